//! The worker's GPU conversion state, below the writer and CUPTI alike: the link table
//! (CUPTI's correlation ids → rtrace's, from the rings' link entries) and the GPU records
//! converted from CUPTI's buffers waiting to become chunks, with the kernel-name table. It
//! knows chunk kinds, not CUPTI's layouts (`cupti::records` converts) nor the file
//! (`output::Sink` holds one of each and writes what [`GpuBatch::emit`] hands it).

use rtrace_format::ChunkKind;
use std::collections::HashMap;

/// CUPTI correlation id → rtrace correlation id, for the most recent links.
#[derive(Default)]
pub struct Links {
    map: HashMap<u32, u64>,
    order: std::collections::VecDeque<u32>,
}

impl Links {
    /// Links kept; older ones are forgotten (their GPU work is long done).
    const CAPACITY: usize = 1 << 20;

    pub fn insert(&mut self, source: u32, correlation: u64) {
        if self.map.insert(source, correlation).is_none() {
            self.order.push_back(source);
            if self.order.len() > Self::CAPACITY {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    pub fn get(&self, source: u32) -> Option<u64> {
        self.map.get(&source).copied()
    }
}

/// GPU records being collected for the next chunks, and the kernel-name table.
#[derive(Default)]
pub struct GpuBatch {
    pub kernels: Vec<u8>,
    pub memcpys: Vec<u8>,
    pub memsets: Vec<u8>,
    pub memory: Vec<u8>,
    pub syncs: Vec<u8>,
    pub peer_copies: Vec<u8>,
    pub contexts: Vec<u8>,
    pub streams: Vec<u8>,
    pub modules: Vec<u8>,
    pub functions: Vec<u8>,
    pub new_names: Vec<(u32, String)>,
    pub names: HashMap<String, u32>,
    /// Kernel names' addresses in this process (CUPTI's strings) → name id, and the new ones.
    name_addresses: HashMap<u64, u32>,
    new_name_addresses: Vec<(u64, u32)>,
}

impl GpuBatch {
    pub fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.insert(name.to_string(), id);
        self.new_names.push((id, name.to_string()));
        id
    }

    /// Learns the kernel name at `address` in this process (0: none) if it has no id yet: read
    /// through the kernel, so that an address no longer mapped is skipped, not a fault.
    pub fn learn_name_at(&mut self, address: u64) {
        if address == 0 || self.knows_address(address) {
            return;
        }
        let mut text = Vec::with_capacity(1 << 14);
        if crate::sys::read_own_string(address, &mut text) {
            let id = self.name_id(&String::from_utf8_lossy(&text));
            self.name_address(address, id);
        }
    }

    /// Whether the kernel name at `address` has an id.
    pub fn knows_address(&self, address: u64) -> bool {
        self.name_addresses.contains_key(&address)
    }

    /// Notes that the kernel name at `address` (CUPTI's string) has id `id`, for a reader
    /// that rebuilds records from CUPTI's buffers.
    pub fn name_address(&mut self, address: u64, id: u32) {
        if self.name_addresses.insert(address, id).is_none() {
            self.new_name_addresses.push((address, id));
        }
    }

    /// Hands the collected records to `chunk` (kind, payload), new kernel names first, and
    /// empties the batch (its buffers and the name table are kept).
    pub fn emit(&mut self, mut chunk: impl FnMut(ChunkKind, &[u8])) {
        if !self.new_names.is_empty() {
            let payload = rtrace_format::encode_function_names(
                self.new_names.iter().map(|(id, n)| (*id, n.as_str())),
            );
            chunk(ChunkKind::KernelNames, &payload);
            self.new_names.clear();
        }
        if !self.new_name_addresses.is_empty() {
            let mut payload = Vec::new();
            rtrace_format::gpu_region::encode_name_addresses(
                &self.new_name_addresses,
                &mut payload,
            );
            chunk(ChunkKind::KernelNameAddresses, &payload);
            self.new_name_addresses.clear();
        }
        for (kind, data) in [
            (ChunkKind::Kernels, &mut self.kernels),
            (ChunkKind::Memcpys, &mut self.memcpys),
            (ChunkKind::Memsets, &mut self.memsets),
            (ChunkKind::Memory, &mut self.memory),
            (ChunkKind::Sync, &mut self.syncs),
            (ChunkKind::PeerCopies, &mut self.peer_copies),
            (ChunkKind::Contexts, &mut self.contexts),
            (ChunkKind::Streams, &mut self.streams),
            (ChunkKind::Modules, &mut self.modules),
            (ChunkKind::Functions, &mut self.functions),
        ] {
            if !data.is_empty() {
                chunk(kind, data);
                data.clear();
            }
        }
    }
}
