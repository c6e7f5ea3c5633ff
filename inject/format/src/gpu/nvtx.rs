//! NVTX events: ranges, marks and the names programs give (NVTX v3, received through its
//! injection interface). One array per thread per chunk; texts are ids into the trace's NVTX
//! string table ([`crate::ChunkKind::NvtxStrings`]).

use super::{Le, LeMut};

/// What an [`NvtxEvent`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NvtxKind {
    /// `nvtxRangePush*`, `nvtxDomainRangePushEx`: a range begins on this thread.
    #[default]
    Push,
    /// `nvtxRangePop`, `nvtxDomainRangePop`: the innermost range of the domain on this thread
    /// ends.
    Pop,
    /// `nvtxRangeStart*`, `nvtxDomainRangeStartEx`: range `value` begins (it may end on
    /// another thread).
    Start,
    /// `nvtxRangeEnd`, `nvtxDomainRangeEnd`: range `value` ends.
    End,
    /// `nvtxMark*`, `nvtxDomainMarkEx`: an instant.
    Mark,
    /// `nvtxDomainCreate*`: domain `domain` is named `message`.
    DomainCreate,
    /// `nvtxDomainDestroy`.
    DomainDestroy,
    /// `nvtxDomainRegisterString*`: string `message` is registered in `domain`.
    RegisterString,
    /// `nvtxNameCategory*`, `nvtxDomainNameCategory*`: `category` of `domain` is named
    /// `message`.
    NameCategory,
    /// `nvtxNameOsThread*`: OS thread `value` is named `message`.
    NameThread,
    /// `rtrace_push_external_correlation`: external id `value` of kind `category` is pushed
    /// on this thread.
    ExternalPush,
    /// `rtrace_pop_external_correlation`: external id `value` of kind `category` is popped.
    ExternalPop,
    Unknown(u16),
}

impl NvtxKind {
    pub fn to_u16(self) -> u16 {
        match self {
            NvtxKind::Push => 1,
            NvtxKind::Pop => 2,
            NvtxKind::Start => 3,
            NvtxKind::End => 4,
            NvtxKind::Mark => 5,
            NvtxKind::DomainCreate => 6,
            NvtxKind::DomainDestroy => 7,
            NvtxKind::RegisterString => 8,
            NvtxKind::NameCategory => 9,
            NvtxKind::NameThread => 10,
            NvtxKind::ExternalPush => 11,
            NvtxKind::ExternalPop => 12,
            NvtxKind::Unknown(k) => k,
        }
    }
    pub fn from_u16(v: u16) -> Self {
        match v {
            1 => NvtxKind::Push,
            2 => NvtxKind::Pop,
            3 => NvtxKind::Start,
            4 => NvtxKind::End,
            5 => NvtxKind::Mark,
            6 => NvtxKind::DomainCreate,
            7 => NvtxKind::DomainDestroy,
            8 => NvtxKind::RegisterString,
            9 => NvtxKind::NameCategory,
            10 => NvtxKind::NameThread,
            11 => NvtxKind::ExternalPush,
            12 => NvtxKind::ExternalPop,
            k => NvtxKind::Unknown(k),
        }
    }
}

/// One NVTX event (48 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvtxEvent {
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
    /// The payload's bits (as `payload_type` says).
    pub payload: u64,
}

impl NvtxEvent {
    pub const SIZE: usize = 48;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u16(0, self.kind.to_u16());
        w.u8(2, self.payload_type);
        w.u8(3, self.color_type);
        w.u32(4, self.message);
        w.u64(8, self.time_ns);
        w.u64(16, self.value);
        w.u32(24, self.domain);
        w.u32(28, self.category);
        w.u32(32, self.color);
        w.u64(40, self.payload);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        NvtxEvent {
            kind: NvtxKind::from_u16(r.u16(0)),
            payload_type: r.u8(2),
            color_type: r.u8(3),
            message: r.u32(4),
            time_ns: r.u64(8),
            value: r.u64(16),
            domain: r.u32(24),
            category: r.u32(28),
            color: r.u32(32),
            payload: r.u64(40),
        }
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
        for k in 1..=13 {
            assert_eq!(NvtxKind::from_u16(k).to_u16(), k);
        }
        assert_eq!(NvtxKind::from_u16(13), NvtxKind::Unknown(13));
    }
}
