//! Loaded modules' code images (kind 20): each module's content hash and CUPTI's CRC, and the
//! image itself (compressed) where this trace is the one that stores it.
//!
//! An image is stored once per content: once per trace, and under `rtrace record` once per run
//! (the first process of the run to load a content stores it; the others name it by hash and
//! say so, [`IMAGE_IN_RUN`]). Readers given several traces of a run find an image by its hash
//! in any of them.

use crate::codec::record;
use std::io::Read;

/// `stored` bit: the image follows, as it is (the 2.1 writers' form; still read).
pub const IMAGE_RAW: u32 = 1;
/// `stored` bit: the image follows, compressed as one zstd frame ([`ModuleImage::encode`]).
/// 2.1 readers, which know only [`IMAGE_RAW`], read such a chunk as naming its image.
pub const IMAGE_ZSTD: u32 = 2;
/// `stored` bit: the chunk names its image, which another process of the same `rtrace record`
/// run (the header's session) stores in its trace.
pub const IMAGE_IN_RUN: u32 = 4;
/// The zstd level images are compressed at.
pub const IMAGE_ZSTD_LEVEL: i32 = 3;

/// A loaded module's code image (its cubin, as CUPTI's module-loaded callback gives it).
/// `bytes` holds the image only in the chunk that stores it (the first of its content in the
/// trace, when the trace stores images at all); other chunks name it by `hash`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleImage {
    /// The module (a [`crate::ModuleRecord`]'s `module`).
    pub module: u32,
    pub context: u32,
    /// [`image_hash`] of the content.
    pub hash: u64,
    /// `cuptiGetCubinCrc` of the content, the key CUPTI's PC sampling records use (0:
    /// unknown).
    pub crc: u64,
    /// Size of the image, bytes.
    pub size: u64,
    /// The image (uncompressed), when this chunk stores it.
    pub bytes: Option<Vec<u8>>,
    /// Not stored here: another process of the same `rtrace record` run stores it
    /// ([`IMAGE_IN_RUN`]).
    pub in_run: bool,
}

record! {
    /// The fixed part of a module-image chunk, in front of the image.
    struct ModuleImageHeader: 40 bytes {
        pub module: u32,
        pub context: u32,
        pub hash: u64,
        pub crc: u64,
        /// The image's size, uncompressed.
        pub size: u64,
        /// [`IMAGE_RAW`], [`IMAGE_ZSTD`], [`IMAGE_IN_RUN`] (other bits are ignored).
        pub stored: u32,
        _: [u8; 4],
    }
}

impl ModuleImage {
    /// Bytes before the image in a chunk.
    pub const HEADER: usize = ModuleImageHeader::SIZE;

    fn header(&self, stored: u32) -> Vec<u8> {
        let in_run = if self.in_run { IMAGE_IN_RUN } else { 0 };
        ModuleImageHeader {
            module: self.module,
            context: self.context,
            hash: self.hash,
            crc: self.crc,
            size: self.size,
            stored: stored | in_run,
        }
        .to_bytes()
        .to_vec()
    }

    /// The chunk payload as librtrace.so writes it: the image, if any, compressed
    /// ([`IMAGE_ZSTD`], at [`IMAGE_ZSTD_LEVEL`]: 3.6 times smaller on CUDA 13's cubins, at
    /// about 250 MB/s): the library's worker does it, never the program's threads.
    pub fn encode(&self) -> Vec<u8> {
        let Some(bytes) = &self.bytes else {
            return self.header(0);
        };
        match zstd::bulk::compress(bytes, IMAGE_ZSTD_LEVEL) {
            Ok(packed) => {
                let mut b = self.header(IMAGE_ZSTD);
                b.extend_from_slice(&packed);
                b
            }
            // Only when zstd cannot allocate its state: store it as it is.
            Err(_) => self.encode_uncompressed(),
        }
    }

    /// The chunk payload with the image as it is ([`IMAGE_RAW`], format 2.1's only form).
    pub fn encode_uncompressed(&self) -> Vec<u8> {
        let mut b = self.header(if self.bytes.is_some() { IMAGE_RAW } else { 0 });
        if let Some(bytes) = &self.bytes {
            b.extend_from_slice(bytes);
        }
        b
    }

    pub fn decode(p: &[u8]) -> Result<Self, String> {
        let head: &[u8; Self::HEADER] = p
            .get(..Self::HEADER)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| format!("module image chunk of {} bytes is too short", p.len()))?;
        let h = ModuleImageHeader::from_bytes(head);
        let size = h.size;
        let rest = &p[Self::HEADER..];
        let bytes = match (h.stored & IMAGE_RAW != 0, h.stored & IMAGE_ZSTD != 0) {
            (true, true) => {
                return Err(format!(
                    "module image {:016x} is stored both as it is and compressed",
                    h.hash
                ))
            }
            (true, false) => Some(rest.to_vec()),
            // No larger than a chunk could hold it as it is (what 2.1 wrote).
            (false, true) if size > u64::from(u32::MAX) => {
                return Err(format!(
                    "module image {:016x} of {size} bytes is larger than a chunk holds",
                    h.hash
                ))
            }
            (false, true) => Some(unpack(rest, size).map_err(|e| {
                format!("module image {:016x} cannot be decompressed: {e}", h.hash)
            })?),
            (false, false) => None,
        };
        if let Some(b) = &bytes {
            if b.len() as u64 != size {
                return Err(format!(
                    "module image of {size} bytes holds {} bytes",
                    b.len()
                ));
            }
        }
        Ok(ModuleImage {
            module: h.module,
            context: h.context,
            hash: h.hash,
            crc: h.crc,
            size,
            bytes,
            in_run: h.stored & IMAGE_IN_RUN != 0,
        })
    }
}

/// A zstd frame decompressed, reading at most one byte more than `size` (so that a damaged
/// size neither allocates nor inflates more than the frame holds).
fn unpack(packed: &[u8], size: u64) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(packed)?
        .take(size.saturating_add(1))
        .read_to_end(&mut out)?;
    Ok(out)
}

/// The content hash of a module image: 64 bits, 8 bytes a multiply (not cryptographic; it
/// tells images apart within a run).
pub fn image_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = bytes.len() as u64 ^ 0x5bd1_e995;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(23) ^ v).wrapping_mul(K);
    }
    let mut tail = [0u8; 8];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    h = (h.rotate_left(23) ^ u64::from_le_bytes(tail)).wrapping_mul(K);
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(bytes: &[u8]) -> ModuleImage {
        ModuleImage {
            module: 3,
            context: 1,
            hash: image_hash(bytes),
            crc: 0xdead_beef,
            size: bytes.len() as u64,
            bytes: Some(bytes.to_vec()),
            in_run: false,
        }
    }

    #[test]
    fn images_round_trip_and_reject_bad_sizes() {
        let img = image(b"\x7fELF cubin");
        let b = img.encode_uncompressed();
        assert_eq!(b.len(), ModuleImage::HEADER + 10);
        assert_eq!(b[32..36], IMAGE_RAW.to_le_bytes());
        assert_eq!(ModuleImage::decode(&b), Ok(img.clone()));
        let named = ModuleImage {
            bytes: None,
            ..img.clone()
        };
        assert_eq!(named.encode(), named.encode_uncompressed());
        assert_eq!(ModuleImage::decode(&named.encode()), Ok(named));
        assert!(ModuleImage::decode(&b[..b.len() - 1]).is_err());
        assert!(ModuleImage::decode(&b[..10]).is_err());
        assert_ne!(image_hash(b"a"), image_hash(b"b"));
        assert_ne!(image_hash(b""), image_hash(b"\0"));
    }

    #[test]
    fn images_are_compressed_and_named_across_a_run() {
        // 4096 bytes that repeat every 64: zstd keeps one period and the repeats.
        let text: Vec<u8> = (0..4096u32)
            .map(|i| b"MODULE"[(i % 64 % 6) as usize])
            .collect();
        let img = image(&text);
        let b = img.encode();
        assert_eq!(b[32..36], IMAGE_ZSTD.to_le_bytes());
        assert_eq!(b.len() - ModuleImage::HEADER, 86, "compressed");
        assert_eq!(ModuleImage::decode(&b), Ok(img.clone()));
        // A size that does not match the frame is an error, whichever way it is off.
        for size in [4095u64, 4097, 1 << 32, u64::MAX] {
            let mut bad = b.clone();
            bad[24..32].copy_from_slice(&size.to_le_bytes());
            assert!(ModuleImage::decode(&bad).is_err(), "{size}");
        }
        let mut garbage = b.clone();
        garbage[ModuleImage::HEADER..].fill(0x55);
        let e = ModuleImage::decode(&garbage).unwrap_err();
        assert!(e.contains("cannot be decompressed"), "{e}");
        let mut both = b.clone();
        both[32] = (IMAGE_RAW | IMAGE_ZSTD) as u8;
        assert!(ModuleImage::decode(&both).is_err());
        // Named, stored by another process of the run.
        let elsewhere = ModuleImage {
            bytes: None,
            in_run: true,
            ..img
        };
        let b = elsewhere.encode();
        assert_eq!(b.len(), ModuleImage::HEADER);
        assert_eq!(b[32..36], IMAGE_IN_RUN.to_le_bytes());
        assert_eq!(ModuleImage::decode(&b), Ok(elsewhere));
    }
}
