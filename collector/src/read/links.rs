//! The links from API calls to the GPU work they launched ([`LinkTable`]), noted by
//! correlation id on a first read and numbered as flows.

use super::records::Gpu;
use crate::model::{IdMap, Trace};
use rtrace_format::ApiRecord;

/// The flow of a GPU record: its id, and whether the call started before
/// the work did (the normal case, which ends the flow at the work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub id: u64,
    pub call_first: bool,
}

/// The dense range of correlation ids may span this many ids, plus
/// [`DENSE_PER_ID`] per id noted: ids are handed out densely, so a real
/// trace's ids all fit, while a stray id (a damaged record) far from the
/// others goes to the map instead of growing the range to reach it.
const DENSE_IDS: u64 = 1 << 16;
const DENSE_PER_ID: u64 = 4;
/// A cell's bits: an API record has the id; that record has taken its flows;
/// the GPU records with the id (`COUNT` itself: more, counted in a map).
const API: u8 = 0x80;
const CLAIMED: u8 = 0x40;
const COUNT: u8 = 0x3f;

/// The links from API calls to the GPU work they launched, for a trace read
/// as a stream: per correlation id, whether an API record has it and how
/// many GPU records do ([`Gpu::correlation`]), noted on a first read of
/// every record ([`LinkTable::api`], [`LinkTable::gpu`]); then, as the
/// records come again in time order, the flow ids of each call and each
/// piece of work. Each link is one flow with an id unique in the export: an
/// API call that launched several records (a graph) starts one flow per
/// record. A correlation id given to several calls links to the first of
/// them in time.
///
/// One byte per correlation id (ids are handed out densely, from 1), plus a
/// map entry per stray id, per id with 63 or more GPU records and per id whose
/// GPU records are being handed their flows, so memory grows by a byte per
/// API call, not with the size of the records.
#[derive(Debug, Default)]
pub struct LinkTable {
    /// Cell of id `base + i`.
    cells: Vec<u8>,
    base: u64,
    /// Ids outside the dense range: (cell, slot).
    sparse: IdMap<(u8, u64)>,
    /// GPU records of ids whose count is `COUNT` or more.
    many: IdMap<u32>,
    /// Flows handed to GPU records so far, for ids with several.
    used: IdMap<u32>,
    /// Flow ids: `first + position * stride + k`.
    first: u64,
    stride: u64,
    /// Ids noted (with repeats).
    notes: u64,
    /// API records of ids that more than one has (a damaged trace).
    repeated: IdMap<u32>,
    /// Flows started (each API call's count, when it has a GPU record).
    pub flows: u64,
}

impl LinkTable {
    /// The links of a trace held in memory, flow ids from `*next_flow` on.
    pub fn of(trace: &Trace, next_flow: &mut u64) -> LinkTable {
        let mut t = LinkTable::default();
        for th in trace.threads.values() {
            th.records.iter().for_each(|r| t.api(r.correlation));
        }
        let gpu = trace
            .kernels
            .iter()
            .map(Gpu::Kernel)
            .chain(trace.memcpys.iter().map(Gpu::Memcpy))
            .chain(trace.memsets.iter().map(Gpu::Memset));
        for g in gpu {
            if let Some(c) = g.correlation() {
                t.gpu(c);
            }
        }
        t.number(next_flow);
        t
    }

    #[inline]
    fn cell(&mut self, id: u64) -> &mut u8 {
        // Most ids: in the dense range, none in the map.
        let i = id.wrapping_sub(self.base);
        if self.sparse.is_empty() && i < self.cells.len() as u64 {
            self.notes += 1;
            return &mut self.cells[i as usize];
        }
        self.cell_slow(id)
    }

    /// [`LinkTable::cell`] for an id outside the dense range, or with ids in the map: the
    /// range grown to reach it, or a map entry.
    #[inline(never)]
    fn cell_slow(&mut self, id: u64) -> &mut u8 {
        self.notes += 1;
        if self.cells.is_empty() && self.sparse.is_empty() {
            self.base = id;
        }
        // An id once put in the map stays there, though the range may grow to reach it.
        if !self.sparse.is_empty() && self.sparse.contains_key(&id) {
            return &mut self.sparse.entry(id).or_insert((0, 0)).0;
        }
        let len = self.cells.len() as u64;
        let most = DENSE_IDS.saturating_add(self.notes.saturating_mul(DENSE_PER_ID));
        if id < self.base && (self.base - id).saturating_add(len) <= most {
            // Grown at the front by at least as much as it holds (within the bound), so that
            // ids coming in descending order cost amortized constant time, not a move of the
            // whole range each.
            let grow = (self.base - id).max(len.min(most - len)).min(self.base);
            self.cells
                .splice(0..0, std::iter::repeat_n(0, grow as usize));
            self.base -= grow;
        }
        let i = id.wrapping_sub(self.base);
        if id >= self.base && (i < len || i < most) {
            if i >= len {
                self.cells.resize(i as usize + 1, 0);
            }
            return &mut self.cells[i as usize];
        }
        let slot = self.sparse.len() as u64;
        &mut self.sparse.entry(id).or_insert((0, slot)).0
    }

    #[inline]
    fn get(&self, id: u64) -> u8 {
        if let Some(&(c, _)) = self.sparse.get(&id) {
            return c;
        }
        let i = id.wrapping_sub(self.base);
        if id >= self.base && i < self.cells.len() as u64 {
            self.cells[i as usize]
        } else {
            self.sparse.get(&id).map_or(0, |c| c.0)
        }
    }

    /// Notes an API record with correlation id `id`.
    pub fn api(&mut self, id: u64) {
        let c = self.cell(id);
        let seen = *c & API != 0;
        *c |= API;
        if seen {
            *self.repeated.entry(id).or_insert(1) += 1;
        }
    }

    /// Notes a GPU record with correlation id `id`.
    pub fn gpu(&mut self, id: u64) {
        let c = self.cell(id);
        if *c & COUNT < COUNT - 1 {
            *c += 1;
        } else if *c & COUNT == COUNT - 1 {
            *c += 1;
            self.many.insert(id, u32::from(COUNT));
        } else if let Some(n) = self.many.get_mut(&id) {
            *n = n.saturating_add(1);
        }
    }

    fn count(&self, id: u64, cell: u8) -> u32 {
        match cell & COUNT {
            COUNT => self.many.get(&id).copied().unwrap_or(u32::from(COUNT)),
            n => u32::from(n),
        }
    }

    /// How many API records have correlation id `id`, and how many GPU records do.
    pub fn counts(&self, id: u64) -> (u32, u32) {
        let cell = self.get(id);
        let calls = match cell & API {
            0 => 0,
            _ => self.repeated.get(&id).copied().unwrap_or(1),
        };
        (calls, self.count(id, cell))
    }

    /// Ends the first read: gives the links their flow ids, from `*next_flow`
    /// on, and moves it past them.
    pub fn number(&mut self, next_flow: &mut u64) {
        let most = self.many.values().copied().max().unwrap_or(0);
        let most = self
            .cells
            .iter()
            .chain(self.sparse.values().map(|(c, _)| c))
            .map(|&c| u32::from(c & COUNT))
            .max()
            .unwrap_or(0)
            .max(most);
        self.stride = u64::from(most.max(1));
        self.first = *next_flow;
        let positions = self.cells.len() as u64 + self.sparse.len() as u64;
        *next_flow = next_flow.saturating_add(positions.saturating_mul(self.stride));
    }

    fn position(&self, id: u64) -> u64 {
        if let Some(&(_, slot)) = self.sparse.get(&id) {
            return self.cells.len() as u64 + slot;
        }
        id.wrapping_sub(self.base)
    }

    fn flow_id(&self, id: u64, k: u32) -> u64 {
        self.first
            .saturating_add(self.position(id).saturating_mul(self.stride))
            .saturating_add(u64::from(k))
    }

    /// The ids of the flows API record `r` starts: one per GPU record with
    /// its correlation id, when it is the first call with that id to come
    /// (empty for most calls).
    pub fn api_flows(&mut self, r: &ApiRecord) -> std::ops::Range<u64> {
        let id = r.correlation;
        let cell = self.get(id);
        if cell & API == 0 || cell & CLAIMED != 0 || cell & COUNT == 0 {
            return 0..0;
        }
        *self.cell(id) |= CLAIMED;
        let n = self.count(id, cell);
        self.flows += u64::from(n);
        let first = self.flow_id(id, 0);
        first..first + u64::from(n)
    }

    /// The flow that ends at (or, when the work started before its call
    /// came, passes through) GPU record `g`, if it links to a call; the
    /// records of one call take its flows in turn.
    pub fn gpu_flow(&mut self, g: Gpu) -> Option<Flow> {
        let id = g.correlation()?;
        let cell = self.get(id);
        if cell & API == 0 {
            return None;
        }
        let n = self.count(id, cell);
        let k = if n <= 1 {
            0
        } else {
            let used = self.used.entry(id).or_insert(0);
            let k = *used;
            *used += 1;
            if *used >= n {
                self.used.remove(&id);
            }
            k
        };
        (k < n).then(|| Flow {
            id: self.flow_id(id, k),
            call_first: cell & CLAIMED != 0,
        })
    }
}
