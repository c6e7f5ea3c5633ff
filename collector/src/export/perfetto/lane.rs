//! A lane's packet sequence ([`Lane`]): each lane of a track that holds events (a thread's, a
//! stream's, an NVTX track's, a memory counter) is a packet sequence of its own, so that its
//! packets need neither their track (the sequence's default) nor a full timestamp (a clock of
//! the sequence's own, incremental: a packet's timestamp is the time since the last one's),
//! and the names its events use are interned on it ([`Seen`]).
//!
//! The events of one lane come in time order (a lane nests: a slice ends before the next one
//! on it begins, and where one ends the next may begin), so every delta is positive; an event
//! that would go back in time all the same is written with its timestamp whole, on
//! `CLOCK_MONOTONIC`, and leaves the lane's clock where it was.

use super::field;
use crate::export::layout::ARG_NAMES;
use crate::export::proto::{key, Open, Prefix, Proto, LEN, VARINT};

use field::{
    CLOCK_MONOTONIC, LANE_CLOCK, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE,
};

/// One lane of a track, and the packet sequence its events go to.
#[derive(Debug)]
pub struct Lane {
    pub uuid: u64,
    /// Its sequence's `trusted_packet_sequence_id`; 0 until its first event.
    seq: u32,
    /// What its event packets hold after their timestamp: the sequence id and flags; and
    /// those of an end event, with the event.
    head: Prefix,
    end: Prefix,
    /// Its clock's value: the timestamp of the last event written on its clock.
    clock: u64,
    /// The event names and argument strings interned on its sequence.
    pub names: Seen,
    pub strings: Seen,
}

impl Lane {
    pub fn new(uuid: u64) -> Lane {
        Lane {
            uuid,
            seq: 0,
            head: Prefix::default(),
            end: Prefix::default(),
            clock: 0,
            names: Seen::default(),
            strings: Seen::default(),
        }
    }

    /// Starts the lane's sequence before its first event, at `ts` ([`Lane::start`]), numbered
    /// `*next_seq` (which moves on); whether it did.
    #[inline(always)]
    pub fn start_if_new(&mut self, p: &mut Proto, ts: u64, next_seq: &mut u32) -> bool {
        let new = self.seq == 0;
        if new {
            self.start(p, ts, next_seq);
        }
        new
    }

    /// Starts the packet of an event at `ts` on this lane (started:
    /// [`Lane::start_if_new`]): its timestamp, sequence id and flags written. Returns the
    /// open packet.
    #[inline(always)]
    pub fn packet(&mut self, p: &mut Proto, ts: u64) -> Open {
        p.put([key(field::TRACE_PACKET, LEN)]);
        let packet = p.open();
        self.timestamp(p, ts);
        p.prefix(&self.head);
        packet
    }

    /// The packet of a slice's end at `ts` on this lane (started: [`Lane::start_if_new`]).
    #[inline(always)]
    pub fn end(&mut self, p: &mut Proto, ts: u64) {
        p.put([key(field::TRACE_PACKET, LEN)]);
        let packet = p.open();
        self.timestamp(p, ts);
        p.prefix(&self.end);
        p.end(packet);
    }

    /// A packet's timestamp `ts`: the time since the lane's last event, or the time itself on
    /// `CLOCK_MONOTONIC` where it would go back.
    #[inline(always)]
    fn timestamp(&mut self, p: &mut Proto, ts: u64) {
        if ts >= self.clock {
            p.put([key(field::TIMESTAMP, VARINT)]);
            p.put_varint(ts - self.clock);
            self.clock = ts;
        } else {
            p.varint(field::TIMESTAMP, ts);
            p.varint(field::TIMESTAMP_CLOCK_ID, CLOCK_MONOTONIC);
        }
    }

    /// The first packet of the lane's sequence: its state cleared; its defaults (timestamps
    /// on the lane's clock, events on the lane's track); the argument names interned; and a
    /// clock snapshot that sets the lane's clock, incremental, to `ts` on `CLOCK_MONOTONIC`.
    #[inline(never)]
    fn start(&mut self, p: &mut Proto, ts: u64, next_seq: &mut u32) {
        self.seq = *next_seq;
        *next_seq += 1;
        self.clock = ts;
        let seq = u64::from(self.seq);
        let head = |p: &mut Proto| {
            p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, seq);
            p.varint(field::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        };
        self.head = Prefix::of(head);
        self.end = Prefix::of(|p| {
            head(p);
            let e = p.begin(field::TRACK_EVENT);
            p.varint(field::TYPE, field::TYPE_SLICE_END);
            p.end(e);
        });
        let packet = p.begin(field::TRACE_PACKET);
        p.varint(field::TRUSTED_PACKET_SEQUENCE_ID, u64::from(self.seq));
        p.varint(field::SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        p.varint(field::FIRST_PACKET_ON_SEQUENCE, 1);
        let defaults = p.begin(field::TRACE_PACKET_DEFAULTS);
        p.varint(field::TIMESTAMP_CLOCK_ID, LANE_CLOCK);
        let events = p.begin(field::TRACK_EVENT_DEFAULTS);
        p.varint(field::TRACK_UUID, self.uuid);
        p.end(events);
        p.end(defaults);
        let interned = p.begin(field::INTERNED_DATA);
        for (i, name) in ARG_NAMES.iter().enumerate() {
            let n = p.begin(field::DEBUG_ANNOTATION_NAMES);
            p.varint(field::IID, i as u64 + 1);
            p.string(field::NAME, name);
            p.end(n);
        }
        p.end(interned);
        let snapshot = p.begin(field::CLOCK_SNAPSHOT);
        for (clock, incremental) in [(LANE_CLOCK, true), (CLOCK_MONOTONIC, false)] {
            let c = p.begin(field::CLOCKS);
            p.varint(field::CLOCK_ID, clock);
            p.varint(field::CLOCK_TIMESTAMP, ts);
            if incremental {
                p.varint(field::IS_INCREMENTAL, 1);
            }
            p.end(c);
        }
        p.end(snapshot);
        p.end(packet);
    }
}

/// The numbers (of a trace's names or strings: [`super::names`]) a sequence has interned.
#[derive(Debug, Default)]
pub struct Seen(Vec<u64>);

impl Seen {
    /// Notes `n` as interned; whether it was not yet.
    #[inline]
    pub fn insert(&mut self, n: u32) -> bool {
        let (word, bit) = ((n / 64) as usize, 1u64 << (n % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let new = self.0[word] & bit == 0;
        self.0[word] |= bit;
        new
    }
}
