//! The output of the Perfetto writer as packets ([`Packets`]): the encoding buffer and what is
//! numbered over the whole output (track uuids, packet sequences), with the track descriptor
//! packets; and the packets of events ([`Packets::begin`], [`Packets::end`],
//! [`Packets::counter`]), each on its lane's sequence ([`Lane`]).

use super::field;
use super::lane::Lane;
use super::names::{Strings, Table};
use crate::export::emitter::Stats;
use crate::export::layout::{self, Args, Flow, Value};
use crate::export::proto::{key, key2, varint_len, Open, Proto, FIXED64, LEN, VARINT};
use std::io::{self, Write};

/// Packets are gathered in a buffer and written once it holds this much.
const FLUSH_BYTES: usize = 1 << 20;

/// Most arguments a slice has (a kernel's six: [`crate::export::layout::gpu_args`]).
const MOST_ARGS: usize = 8;

/// Packets on their way to the output.
pub struct Packets<W: Write> {
    out: W,
    pub p: Proto,
    next_uuid: u64,
    /// The next packet sequence id.
    pub next_seq: u32,
    pub stats: Stats,
}

impl<W: Write> Packets<W> {
    pub fn new(out: W) -> Self {
        Packets {
            out,
            p: Proto::default(),
            next_uuid: 1,
            next_seq: 1,
            stats: Stats::default(),
        }
    }

    /// A new track uuid.
    pub fn uuid(&mut self) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        u
    }

    /// A new packet sequence id.
    pub fn sequence(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    #[inline]
    pub fn flush_if_full(&mut self) -> io::Result<()> {
        if self.p.buf.len() >= FLUSH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.p.buf)?;
        self.stats.bytes += self.p.buf.len() as u64;
        self.p.buf.clear();
        Ok(())
    }

    /// Writes what is buffered and returns the output, with what was written.
    pub fn finish(mut self) -> io::Result<(W, Stats)> {
        self.flush()?;
        self.out.flush()?;
        Ok((self.out, self.stats))
    }

    /// A packet on sequence `seq` holding a track descriptor that `fill` writes.
    pub fn descriptor(&mut self, seq: u32, fill: impl FnOnce(&mut Proto)) {
        let packet = self.p.begin(field::TRACE_PACKET);
        self.p
            .varint(field::TRUSTED_PACKET_SEQUENCE_ID, u64::from(seq));
        let d = self.p.begin(field::TRACK_DESCRIPTOR);
        fill(&mut self.p);
        self.p.end(d);
        self.p.end(packet);
        self.stats.packets += 1;
        self.stats.tracks += 1;
    }

    /// Starts `lane`'s sequence if an event at `ts` is its first; counts the event's packet.
    #[inline(always)]
    fn start(&mut self, lane: &mut Lane, ts: u64) {
        let started = lane.start_if_new(&mut self.p, ts, &mut self.next_seq);
        self.stats.packets += 1 + u64::from(started);
    }

    /// Starts the packet of an event at `ts` on `lane`.
    #[inline(always)]
    fn event_packet(&mut self, lane: &mut Lane, ts: u64) -> Open {
        self.start(lane, ts);
        lane.packet(&mut self.p, ts)
    }

    /// A slice's begin event on `lane` at `ts`: named by number `name` of `names`, with the
    /// arguments `args` gives ([`Annotations`]: string values interned as `strings` numbers
    /// them) and `metrics`; `flows` start here; `flow` ends here (or passes through, when the
    /// work started before the call). A name or string the lane's sequence has not interned
    /// yet is interned in the packet (after the event, as Perfetto's own SDK writes them: a
    /// reader takes a packet's interned data first).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn begin(
        &mut self,
        lane: &mut Lane,
        ts: u64,
        (names, name): (&Table, u32),
        strings: &mut Strings,
        args: impl FnOnce(&mut Annotations),
        metrics: &[(String, f64)],
        flows: std::ops::Range<u64>,
        flow: Option<Flow>,
    ) -> io::Result<()> {
        let packet = self.event_packet(lane, ts);
        let p = &mut self.p;
        p.put([key(field::TRACK_EVENT, LEN)]);
        let e = p.open();
        p.put([
            key(field::TYPE, VARINT),
            field::TYPE_SLICE_BEGIN as u8,
            key(field::NAME_IID, VARINT),
        ]);
        p.put_varint(u64::from(name));
        let mut a = Annotations {
            p,
            seen: &mut lane.strings,
            strings,
            fresh: [0; MOST_ARGS],
            new: 0,
        };
        args(&mut a);
        let (fresh, new) = (a.fresh, a.new);
        for (name, value) in metrics {
            let a = p.begin(field::DEBUG_ANNOTATIONS);
            p.string(field::ANNOTATION_NAME, name);
            p.fixed64(field::DOUBLE_VALUE, value.to_bits());
            p.end(a);
        }
        for id in flows {
            fixed64(p, FLOW_IDS, id);
        }
        if let Some(flow) = flow {
            let f = if flow.call_first {
                TERMINATING_FLOW_IDS
            } else {
                FLOW_IDS
            };
            fixed64(p, f, flow.id);
        }
        p.end(e);
        let new_name = lane.names.insert(name);
        if new_name || new > 0 {
            let interned = p.begin(field::INTERNED_DATA);
            if new_name {
                let n = p.begin(field::EVENT_NAMES);
                p.varint(field::IID, u64::from(name));
                p.string(field::NAME, names.text(name));
                p.end(n);
            }
            for &s in &fresh[..new] {
                let n = p.begin(field::DEBUG_ANNOTATION_STRING_VALUES);
                p.varint(field::IID, u64::from(s));
                p.string(field::NAME, strings.table.text(s));
                p.end(n);
            }
            p.end(interned);
        }
        p.end(packet);
        self.stats.slices += 1;
        self.flush_if_full()
    }

    /// The end of the innermost slice open on `lane`, at `ts`.
    #[inline]
    pub fn end(&mut self, lane: &mut Lane, ts: u64) -> io::Result<()> {
        self.start(lane, ts);
        lane.end(&mut self.p, ts);
        self.flush_if_full()
    }

    /// A counter's value from `ts` on, on `lane` (the counter's track), written by `value`.
    pub fn counter(
        &mut self,
        lane: &mut Lane,
        ts: u64,
        value: impl FnOnce(&mut Proto),
    ) -> io::Result<()> {
        let packet = self.event_packet(lane, ts);
        let e = self.p.begin(field::TRACK_EVENT);
        self.p.varint(field::TYPE, field::TYPE_COUNTER);
        value(&mut self.p);
        self.p.end(e);
        self.p.end(packet);
        self.stats.counter_values += 1;
        self.flush_if_full()
    }
}

/// A slice's arguments as they come ([`Args`]), each written as a debug annotation of the
/// event: its name interned by position in [`crate::export::layout::ARG_NAMES`], a number as
/// `uint_value`, a text interned (`string_value_iid`), noting those new on the lane.
pub struct Annotations<'a> {
    p: &'a mut Proto,
    /// The strings interned on the lane.
    seen: &'a mut super::lane::Seen,
    strings: &'a mut Strings,
    /// The strings first used on the lane here, to intern with the packet.
    fresh: [u32; MOST_ARGS],
    new: usize,
}

impl Args for Annotations<'_> {
    /// Written as bytes made with their lengths known: an annotation is a few bytes, of which
    /// only the value varies.
    #[inline(always)]
    fn arg(&mut self, name: usize, value: Value) {
        const _: () = assert!(layout::ARG_NAMES.len() < 0x80);
        const ANNOTATION: u8 = key(field::DEBUG_ANNOTATIONS, LEN);
        const NAME_IID: u8 = key(field::ANNOTATION_NAME_IID, VARINT);
        let p = &mut *self.p;
        let name = name as u8 + 1;
        match value {
            Value::Uint(v) => {
                let len = 3 + varint_len(v) as u8;
                p.put([
                    ANNOTATION,
                    len,
                    NAME_IID,
                    name,
                    key(field::UINT_VALUE, VARINT),
                ]);
                p.put_varint(v);
            }
            _ => {
                let s = self.strings.of(&value).unwrap_or_default();
                if self.seen.insert(s) {
                    self.fresh[self.new] = s;
                    self.new += 1;
                }
                let len = 4 + varint_len(u64::from(s)) as u8;
                let [k0, k1] = key2(field::STRING_VALUE_IID, VARINT);
                p.put([ANNOTATION, len, NAME_IID, name, k0, k1]);
                p.put_varint(u64::from(s));
            }
        }
    }
}

/// The keys of a flow id (fixed64, fields past 15).
const FLOW_IDS: [u8; 2] = key2(field::FLOW_IDS, FIXED64);
const TERMINATING_FLOW_IDS: [u8; 2] = key2(field::TERMINATING_FLOW_IDS, FIXED64);

/// A fixed64 field of key `key`, in one copy.
#[inline(always)]
fn fixed64(p: &mut Proto, [k0, k1]: [u8; 2], v: u64) {
    let b = v.to_le_bytes();
    p.put([k0, k1, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
}
