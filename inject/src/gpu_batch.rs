//! The worker's GPU conversion state, below the writer and CUPTI alike: the link table
//! (CUPTI's correlation ids → rtrace's, from the rings' link entries) and the GPU records
//! converted from CUPTI's buffers waiting to become chunks, with the kernel-name table. It
//! knows chunk kinds, not CUPTI's layouts (`cupti::records` converts) nor the file
//! (`output::Sink` holds one of each and writes what [`GpuBatch::emit`] hands it).

use rtrace_format::ChunkKind;
use std::collections::HashMap;

/// CUPTI correlation id → rtrace correlation id, for the most recent links: a table indexed by
/// CUPTI's id modulo its size. CUPTI numbers the calls of a process in order, so a link is
/// forgotten only once [`Links::CAPACITY`] later calls were numbered (their GPU work is long
/// done); an insert and a look-up are an index and a compare (the worker does one of each per
/// launch).
#[derive(Default)]
pub struct Links {
    /// Each slot: CUPTI's id (0: empty) and rtrace's id linked to it (one slot, one bounds
    /// check, one cache line per look-up).
    slots: Vec<(u32, u64)>,
}

impl Links {
    /// Slots (a power of two); the table is made on the first link, zeroed by the kernel
    /// (pages are touched as ids reach them).
    const CAPACITY: usize = 1 << 20;

    #[inline]
    pub fn insert(&mut self, source: u32, correlation: u64) {
        if source == 0 {
            return;
        }
        if self.slots.is_empty() {
            self.make();
        }
        if let Some(slot) = self.slots.get_mut(source as usize & (Self::CAPACITY - 1)) {
            *slot = (source, correlation);
        }
    }

    /// The table, on the first link (out of line: the drain's link path stays small).
    #[cold]
    #[inline(never)]
    fn make(&mut self) {
        self.slots = vec![(0, 0); Self::CAPACITY];
    }

    pub fn get(&self, source: u32) -> Option<u64> {
        match self.slots.get(source as usize & (Self::CAPACITY - 1)) {
            Some(&(s, c)) if s == source && source != 0 => Some(c),
            _ => None,
        }
    }
}

/// Hashes the worker's integer keys (kernel-name addresses) by one multiplication, where the
/// standard hasher (SipHash, made for keys an adversary picks) cost about 100 instructions per
/// look-up on a path taken for every kernel.
#[derive(Default, Clone, Copy)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

type WordMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<WordHasher>>;

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
    names: HashMap<String, u32>,
    /// Each id's name, by id.
    texts: Vec<String>,
    /// Kernel names' addresses in this process (CUPTI's strings) → name id, and the new ones.
    name_addresses: WordMap<u32>,
    new_name_addresses: Vec<(u64, u32)>,
    /// The address found last in `name_addresses` and its id (0: none): a launch's kernel is
    /// looked up three times (its link, CUPTI's buffer, its record) and loops launch the same
    /// kernels, so one compare usually answers without hashing. Entries are never removed
    /// from `name_addresses`, and [`GpuBatch::name_address`] sets this one too.
    last_address: u64,
    last_id: u32,
}

impl GpuBatch {
    pub fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.insert(name.to_string(), id);
        self.texts.push(name.to_string());
        self.new_names.push((id, name.to_string()));
        id
    }

    /// The name of id `id`.
    pub fn name_of(&self, id: u32) -> &str {
        self.texts.get(id as usize).map_or("", |t| t.as_str())
    }

    /// The id of the NUL-terminated kernel name `text` at `address` in this process (CUPTI's
    /// string, which stays put while its module is loaded): the address's id when the text
    /// there is still the one named by it (a comparison, no hashing of the name and no
    /// allocation), else the text's id, remembered for the address.
    pub fn name_id_at(&mut self, address: u64, text: &std::ffi::CStr) -> u32 {
        if let Some(id) = self.id_at(address) {
            if self.name_of(id).as_bytes() == text.to_bytes() {
                (self.last_address, self.last_id) = (address, id);
                return id;
            }
        }
        let id = self.name_id(&text.to_string_lossy());
        self.name_address(address, id);
        id
    }

    /// Learns the kernel name at `address` in this process (0: none) if it has no id yet: read
    /// through the kernel, so that an address no longer mapped is skipped, not a fault.
    #[inline]
    pub fn learn_name_at(&mut self, address: u64) {
        // The kernel launched last, or none: nearly every link.
        if address != 0 && address != self.last_address {
            self.learn_name_elsewhere(address);
        }
    }

    /// [`GpuBatch::learn_name_at`] of an address other than the last one.
    #[inline(never)]
    fn learn_name_elsewhere(&mut self, address: u64) {
        if let Some(id) = self.id_at(address) {
            (self.last_address, self.last_id) = (address, id);
            return;
        }
        let mut text = Vec::with_capacity(1 << 14);
        if crate::sys::read_own_string(address, &mut text) {
            let id = self.name_id(&String::from_utf8_lossy(&text));
            self.name_address(address, id);
        }
    }

    /// The id of the kernel name at `address` (CUPTI's string), if it has one.
    #[inline]
    pub fn id_at(&self, address: u64) -> Option<u32> {
        if address != 0 && address == self.last_address {
            return Some(self.last_id);
        }
        self.name_addresses.get(&address).copied()
    }

    /// Notes that the kernel name at `address` (CUPTI's string) has id `id`, for a reader
    /// that rebuilds records from CUPTI's buffers (again when the address names another
    /// kernel now, a module loaded where an unloaded one was: the reader keeps the last).
    pub fn name_address(&mut self, address: u64, id: u32) {
        if self.name_addresses.insert(address, id) != Some(id) {
            self.new_name_addresses.push((address, id));
        }
        (self.last_address, self.last_id) = (address, id);
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

#[cfg(test)]
mod tests {
    use super::Links;

    #[test]
    fn links_keep_the_latest_ids_of_each_slot() {
        let mut l = Links::default();
        assert_eq!(l.get(5), None);
        l.insert(5, 50);
        l.insert(6, 60);
        l.insert(0, 1); // CUPTI's "no id": never linked
        assert_eq!(
            (l.get(5), l.get(6), l.get(7), l.get(0)),
            (Some(50), Some(60), None, None)
        );
        // An id a whole table later takes the slot: the older link is forgotten.
        let later = 5 + Links::CAPACITY as u32;
        l.insert(later, 99);
        assert_eq!(
            (l.get(5), l.get(later), l.get(6)),
            (None, Some(99), Some(60))
        );
        l.insert(6, 61);
        assert_eq!(l.get(6), Some(61));
    }

    #[test]
    fn a_kernel_name_is_found_by_its_address_and_renamed_when_the_text_there_changes() {
        let mut b = super::GpuBatch::default();
        let (k1, k2) = (c"_Z2k1v", c"_Z2k2v");
        assert_eq!(b.name_id_at(0x1000, k1), 0);
        assert_eq!(b.name_id_at(0x1000, k1), 0);
        assert_eq!(b.name_id_at(0x2000, k1), 0);
        // Another module at the same address: another name, the address mapped anew.
        assert_eq!(b.name_id_at(0x1000, k2), 1);
        assert_eq!(b.id_at(0x1000), Some(1));
        // The address looked up last answers first; the others from the table.
        assert_eq!((b.id_at(0x2000), b.id_at(0x3000)), (Some(0), None));
        b.learn_name_at(0x2000);
        assert_eq!((b.id_at(0x2000), b.id_at(0x1000)), (Some(0), Some(1)));
        assert_eq!(
            b.new_name_addresses,
            [(0x1000, 0), (0x2000, 0), (0x1000, 1)]
        );
        assert_eq!((b.name_of(0), b.name_of(1)), ("_Z2k1v", "_Z2k2v"));
    }
}
