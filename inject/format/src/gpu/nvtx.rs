//! NVTX events: ranges, marks and the names programs give (NVTX v3, received through its
//! injection interface). One array per thread per chunk; texts are ids into the trace's NVTX
//! string table ([`crate::ChunkKind::NvtxStrings`]).

use crate::codec::{record, u16_enum};

u16_enum! {
    /// What an [`NvtxEvent`] is.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum NvtxKind {
        /// `nvtxRangePush*`, `nvtxDomainRangePushEx`: a range begins on this thread.
        #[default]
        Push = 1,
        /// `nvtxRangePop`, `nvtxDomainRangePop`: the innermost range of the domain on this
        /// thread ends: the push of the same level ([`pop_matches`]).
        Pop = 2,
        /// `nvtxRangeStart*`, `nvtxDomainRangeStartEx`: range `value` begins (it may end on
        /// another thread).
        Start = 3,
        /// `nvtxRangeEnd`, `nvtxDomainRangeEnd`: range `value` ends.
        End = 4,
        /// `nvtxMark*`, `nvtxDomainMarkEx`: an instant.
        Mark = 5,
        /// `nvtxDomainCreate*`: domain `domain` is named `message`.
        DomainCreate = 6,
        /// `nvtxDomainDestroy`.
        DomainDestroy = 7,
        /// `nvtxDomainRegisterString*`: string `message` is registered in `domain`.
        RegisterString = 8,
        /// `nvtxNameCategory*`, `nvtxDomainNameCategory*`: `category` of `domain` is named
        /// `message`.
        NameCategory = 9,
        /// `nvtxNameOsThread*`: OS thread `value` is named `message`.
        NameThread = 10,
        /// `rtrace_push_external_correlation`: external id `value` of kind `category` is
        /// pushed on this thread.
        ExternalPush = 11,
        /// `rtrace_pop_external_correlation`: external id `value` of kind `category` is
        /// popped.
        ExternalPop = 12,
        /// As [`NvtxKind::ExternalPush`], made while capture control was not recording: the id
        /// credits the calls recorded later while it is on the stack, but is not reported for
        /// itself (a block wholly outside the capture is not in the trace's summaries).
        ExternalPushPaused = 13,
    }
    Unknown(u16)
}

impl NvtxKind {
    /// An external id's push, made while recording or not.
    pub fn is_external_push(self) -> bool {
        matches!(self, NvtxKind::ExternalPush | NvtxKind::ExternalPushPaused)
    }
}

/// Where in `open` (a thread's pushes of one domain not yet popped, innermost last, each with
/// its level) the push a pop of level `level` ends is: the innermost of that level. `None`:
/// none is open, so the pop's push was not recorded (a trace from before pops followed their
/// pushes' recording, or a ring that was full); the pop ends nothing. The pushes above the one
/// found are those whose pops were not recorded; they ended by the time of this pop.
pub fn pop_matches<T>(open: &[(u64, T)], level: u64) -> Option<usize> {
    open.iter().rposition(|&(l, _)| l == level)
}

record! {
    /// One NVTX event (48 bytes).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct NvtxEvent: 48 bytes {
        pub kind: NvtxKind,
        /// `nvtxPayloadType_t` of `payload` (0: none).
        pub payload_type: u8,
        /// `nvtxColorType_t` of `color` (0: none; 1: ARGB).
        pub color_type: u8,
        /// NVTX string id of the message or name (0: none).
        pub message: u32,
        /// When, on the trace's clock (ns).
        pub time_ns: u64,
        /// Start and End: the range id; NameThread: the OS thread id; Push and Pop: the nesting
        /// level NVTX was given back (the range's, from 0).
        pub value: u64,
        /// The domain (0: the default domain).
        pub domain: u32,
        /// The category (0: none).
        pub category: u32,
        /// ARGB colour.
        pub color: u32,
        _: [u8; 4],
        /// The payload's bits (as `payload_type` says).
        pub payload: u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip() {
        let e = NvtxEvent {
            kind: NvtxKind::Push,
            payload_type: 1,
            color_type: 1,
            message: 7,
            time_ns: 123_456,
            value: 2,
            domain: 3,
            category: 4,
            color: 0xFF88_0000,
            payload: u64::MAX - 1,
        };
        let b = e.to_bytes();
        assert_eq!(b[0..2], [1, 0]);
        assert_eq!(NvtxEvent::from_bytes(&b), e);
        for k in 1..=14 {
            assert_eq!(NvtxKind::from_u16(k).to_u16(), k);
        }
        assert_eq!(NvtxKind::from_u16(13), NvtxKind::ExternalPushPaused);
        assert_eq!(NvtxKind::from_u16(14), NvtxKind::Unknown(14));
    }
}
