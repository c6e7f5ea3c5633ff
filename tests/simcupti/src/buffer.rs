//! Activity buffers: the client's memory that records are written into, and the iteration of
//! `cuptiActivityGetNextRecord`.

use crate::layout::{
    CUPTI_ERROR_INVALID_KIND, CUPTI_ERROR_INVALID_PARAMETER, CUPTI_ERROR_MAX_LIMIT_REACHED,
};
use crate::records;

/// Records are 8-byte aligned (CUPTI's `ACTIVITY_RECORD_ALIGNMENT`).
pub const ALIGN: usize = 8;

pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// The offset of the first record in a buffer at address `addr`: the first 8-byte aligned byte.
pub fn first_offset(addr: usize) -> usize {
    align_up(addr) - addr
}

/// A GPU record in a buffer: where it is, its kind, when its operation ends (virtual ns), and
/// the whole record, which the buffer holds only once it is handed back (as CUPTI does, the
/// buffer holds it from the start with no times and the top bit of its kind set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuRecord {
    pub offset: usize,
    pub kind: u32,
    pub end_ns: u64,
    pub whole: Vec<u8>,
}

/// The bit CUPTI sets in the kind of a record whose times it has not filled in yet.
pub const INCOMPLETE: u32 = 1 << 31;

/// A buffer the client handed over through its buffer-request callback.
#[derive(Debug)]
pub struct Buffer {
    pub ptr: *mut u8,
    pub size: usize,
    /// Bytes from `ptr` holding records (0 while empty).
    pub valid: usize,
    /// Records written.
    pub records: usize,
    /// The client's `maxNumRecords` (0: as many as fit).
    pub max_records: usize,
    /// The GPU records, to tell when they are complete.
    pub gpu: Vec<GpuRecord>,
}

// SAFETY: the buffer is the client's memory, handed to simcupti until it is completed; only the
// thread holding simcupti's state (or, once completed, the delivery thread) touches it.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Takes over the client's buffer: zeroes it, as CUPTI does unless the client said it hands
    /// over zeroed buffers (`CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER`).
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `size` bytes until the buffer is completed.
    pub unsafe fn new(ptr: *mut u8, size: usize, max_records: usize, zero: bool) -> Buffer {
        if zero {
            // SAFETY: the caller's contract.
            unsafe { std::ptr::write_bytes(ptr, 0, size) };
        }
        Buffer {
            ptr,
            size,
            valid: 0,
            records: 0,
            max_records,
            gpu: Vec::new(),
        }
    }

    /// Where the next record would start.
    fn next_offset(&self) -> usize {
        if self.records == 0 {
            first_offset(self.ptr as usize)
        } else {
            align_up(self.valid)
        }
    }

    /// Whether a record of `len` bytes fits.
    pub fn fits(&self, len: usize) -> bool {
        (self.max_records == 0 || self.records < self.max_records)
            && self
                .next_offset()
                .checked_add(len)
                .is_some_and(|end| end <= self.size)
    }

    /// Whether no further record may be written (`maxNumRecords` reached).
    pub fn at_max(&self) -> bool {
        self.max_records != 0 && self.records >= self.max_records
    }

    /// Appends a record (which must fit); `gpu`: its kind and its operation's end (then it
    /// goes in without times, its kind flagged [`INCOMPLETE`], until [`Buffer::finish`]).
    pub fn append(&mut self, rec: &[u8], gpu: Option<(u32, u64)>) {
        assert!(self.fits(rec.len()));
        let at = self.next_offset();
        let mut written = rec.to_vec();
        if let Some((kind, _)) = gpu {
            records::clear_times(&mut written, kind);
            written[..4].copy_from_slice(&(kind | INCOMPLETE).to_le_bytes());
        }
        // SAFETY: `at + rec.len() <= size` (fits), and the buffer is ours until completed.
        unsafe { std::ptr::copy_nonoverlapping(written.as_ptr(), self.ptr.add(at), rec.len()) };
        self.valid = at + rec.len();
        self.records += 1;
        if let Some((kind, end_ns)) = gpu {
            self.gpu.push(GpuRecord {
                offset: at,
                kind,
                end_ns,
                whole: rec.to_vec(),
            });
        }
    }

    /// Whether every GPU operation recorded here has ended by virtual time `now`.
    pub fn complete(&self, now: u64) -> bool {
        self.gpu.iter().all(|g| g.end_ns <= now)
    }

    /// Completes the records as the buffer is handed back: each whole, with its times when
    /// its operation has ended by `now` and without them (a forced flush) when it has not.
    pub fn finish(&mut self, now: u64) {
        for g in &self.gpu {
            let mut rec = g.whole.clone();
            if g.end_ns > now {
                records::clear_times(&mut rec, g.kind);
            }
            // SAFETY: the record lies inside the written part of the buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(rec.as_ptr(), self.ptr.add(g.offset), rec.len())
            };
        }
    }
}

/// `cuptiActivityGetNextRecord` on the bytes `[buffer, buffer + valid)`: the offset of the
/// record after the one at `current` (the first record if `None`), or a CUPTI error code.
///
/// - past the last record, or a record that does not fit in `valid`:
///   `CUPTI_ERROR_MAX_LIMIT_REACHED`;
/// - a record of a kind simcupti does not know (`CUPTI_ACTIVITY_KIND_INVALID` included):
///   `CUPTI_ERROR_INVALID_KIND`.
///
/// `read_kind(offset)` reads the `u32` kind at an offset (which lies inside `valid`).
pub fn next_record(
    buffer_addr: usize,
    valid: usize,
    current: Option<usize>,
    read_kind: impl Fn(usize) -> u32,
) -> Result<usize, u32> {
    let first = first_offset(buffer_addr);
    let at = match current {
        None => first,
        Some(off) => {
            if off < first || off >= valid || valid - off < 4 {
                return Err(CUPTI_ERROR_INVALID_PARAMETER);
            }
            let size = records::size_of_kind(read_kind(off)).ok_or(CUPTI_ERROR_INVALID_KIND)?;
            align_up(off + size)
        }
    };
    if at >= valid || valid - at < 4 {
        return Err(CUPTI_ERROR_MAX_LIMIT_REACHED);
    }
    let size = records::size_of_kind(read_kind(at)).ok_or(CUPTI_ERROR_INVALID_KIND)?;
    if size > valid - at {
        return Err(CUPTI_ERROR_MAX_LIMIT_REACHED);
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::*;

    fn kinds(bytes: &[u8]) -> impl Fn(usize) -> u32 + '_ {
        |at| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
    }

    /// Walks a buffer like a CUPTI client; returns the record offsets and the final status.
    fn walk(bytes: &[u8], valid: usize) -> (Vec<usize>, u32) {
        let mut out = Vec::new();
        let mut cur = None;
        loop {
            match next_record(0, valid, cur, kinds(bytes)) {
                Ok(at) => {
                    out.push(at);
                    cur = Some(at);
                }
                Err(e) => return (out, e),
            }
        }
    }

    fn record(kind: u32, len: usize) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[..4].copy_from_slice(&kind.to_le_bytes());
        r
    }

    #[test]
    fn iterates_records_in_order_then_max_limit() {
        let mut b = Vec::new();
        b.extend(record(
            CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            kernel10::SIZE,
        ));
        b.extend(record(CUPTI_ACTIVITY_KIND_MEMCPY, memcpy6::SIZE));
        b.extend(record(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 24));
        b.extend(record(CUPTI_ACTIVITY_KIND_MEMSET, memset4::SIZE));
        b.extend(record(CUPTI_ACTIVITY_KIND_DRIVER, api::SIZE));
        let valid = b.len();
        b.extend([0u8; 64]);
        let (offsets, status) = walk(&b, valid);
        assert_eq!(offsets, vec![0, 216, 312, 336, 424]);
        assert_eq!(status, CUPTI_ERROR_MAX_LIMIT_REACHED);
        // Asking again after the end keeps saying so.
        assert_eq!(
            next_record(0, valid, Some(424), kinds(&b)),
            Err(CUPTI_ERROR_MAX_LIMIT_REACHED)
        );
    }

    #[test]
    fn edge_cases_as_cupti_13_0() {
        let zeros = [0u8; 256];
        // Nothing valid: no record.
        assert_eq!(walk(&zeros, 0), (vec![], CUPTI_ERROR_MAX_LIMIT_REACHED));
        // Kind 0 (INVALID) or unknown: INVALID_KIND.
        assert_eq!(walk(&zeros, 256), (vec![], CUPTI_ERROR_INVALID_KIND));
        let unknown = record(9999, 64);
        assert_eq!(walk(&unknown, 64), (vec![], CUPTI_ERROR_INVALID_KIND));
        // A record cut short by `valid`: MAX_LIMIT_REACHED.
        let memset = record(CUPTI_ACTIVITY_KIND_MEMSET, memset4::SIZE + 8);
        assert_eq!(walk(&memset, 16), (vec![], CUPTI_ERROR_MAX_LIMIT_REACHED));
        assert_eq!(
            walk(&memset, memset4::SIZE),
            (vec![0], CUPTI_ERROR_MAX_LIMIT_REACHED)
        );
        // 8 zero bytes after a record: read as a record of kind 0.
        assert_eq!(
            walk(&memset, memset4::SIZE + 8),
            (vec![0], CUPTI_ERROR_INVALID_KIND)
        );
    }

    #[test]
    fn misaligned_buffer_starts_at_the_first_aligned_byte() {
        assert_eq!(first_offset(0x1000), 0);
        assert_eq!(first_offset(0x1003), 5);
        let mut b = vec![0u8; 5];
        b.extend(record(CUPTI_ACTIVITY_KIND_MEMSET, memset4::SIZE));
        // A buffer at address 3: its first record is at offset 5 (address 8).
        assert_eq!(next_record(3, b.len(), None, kinds(&b)), Ok(5));
        assert_eq!(
            next_record(3, b.len(), Some(5), kinds(&b)),
            Err(CUPTI_ERROR_MAX_LIMIT_REACHED)
        );
    }

    #[test]
    fn buffer_fills_and_respects_max_records() {
        let mut mem = vec![0u64; 64]; // 512 bytes, aligned
                                      // SAFETY: `mem` outlives the buffer.
        let mut buf = unsafe { Buffer::new(mem.as_mut_ptr().cast(), 512, 0, true) };
        let k = record(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, kernel10::SIZE);
        assert!(buf.fits(k.len()));
        buf.append(&k, Some((CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 100)));
        buf.append(&k, Some((CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 300)));
        assert_eq!(buf.valid, 432);
        assert!(!buf.fits(k.len()));
        assert!(buf.fits(api::SIZE));
        assert!(!buf.complete(299));
        assert!(buf.complete(300));
        let mut mem2 = vec![0u64; 64];
        // SAFETY: as above.
        let mut small = unsafe { Buffer::new(mem2.as_mut_ptr().cast(), 512, 1, true) };
        small.append(&record(CUPTI_ACTIVITY_KIND_DRIVER, api::SIZE), None);
        assert!(small.at_max());
        assert!(!small.fits(api::SIZE));
    }
}
