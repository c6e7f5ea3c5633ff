//! The resources GPU work runs in: contexts, streams, modules and functions.

use crate::codec::{record, u8_enum};

record! {
    /// One context (CUPTI's `CUpti_ActivityContext3`), written when it is created.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ContextRecord: 24 bytes {
        /// The context's id (the `context` of the other records).
        pub context: u32,
        /// The device it was created on (the `ordinal` of a [`crate::DeviceInfo`]).
        pub device: u32,
        /// The id of its NULL (legacy default) stream.
        pub null_stream: u32,
        /// The context it was made from (green contexts); 0 for none.
        pub parent_context: u32,
        /// The compute API (CUPTI's numbering): 0 unknown, 1 CUDA, 2 CUDA under MPS.
        pub compute_api: u16,
        /// Green contexts: the multiprocessors given to it (0 otherwise).
        pub num_multiprocessors: u16,
        /// CUDA-in-graphics mode (CUPTI's numbering): 0 none, 1 CIG, 2 CIG fallback.
        pub cig_mode: u8,
        pub is_green: bool,
        _: [u8; 2],
    }
}

u8_enum! {
    /// How a stream was created (CUPTI's `CUpti_ActivityStreamFlag` numbering).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum StreamFlag {
        #[default]
        Unknown = 0 => "unknown",
        /// `CU_STREAM_DEFAULT`: synchronizes with the NULL stream.
        Default = 1 => "default",
        /// `CU_STREAM_NON_BLOCKING`.
        NonBlocking = 2 => "non-blocking",
        /// A context's NULL (legacy default) stream.
        Null = 3 => "null",
    }
}

record! {
    /// One stream (CUPTI's `CUpti_ActivityStream`), written when it is created: those the
    /// program creates, and those the driver creates with a context (its NULL stream among them).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct StreamRecord: 32 bytes {
        /// rtrace correlation id of the API record that created it (valid with
        /// `FLAG_CORRELATED`): `cuStreamCreate*`, or the call that created its context.
        pub correlation: u64,
        /// The correlation id of the GPU-activity source (CUPTI's).
        pub source_correlation: u32,
        pub context: u32,
        /// The stream's id (the `stream` of the other records).
        pub stream: u32,
        /// Its priority, clamped to the device's range (lower is higher: -5 .. 0 on Hopper).
        pub priority: i32,
        pub flag: StreamFlag,
        /// `FLAG_*` bits (low 8).
        pub flags: u8,
        _: [u8; 6],
    }
}

record! {
    /// One module as it is loaded, or, with `FLAG_UNLOADED`, as it is unloaded (CUPTI's module
    /// resource callbacks; `CUpti_ActivityModule`'s fields).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ModuleRecord: 40 bytes {
        /// rtrace correlation id of the API record that loaded it (valid with
        /// `FLAG_CORRELATED`): `cuModuleLoad*`, `cuLibraryLoad*`, ...; or that unloaded it.
        pub correlation: u64,
        /// When it was loaded, or its unload started (host clock), ns.
        pub timestamp_ns: u64,
        /// Size of its image (cubin) in bytes.
        pub cubin_size: u64,
        /// The module's id (the `module` of function records).
        pub module: u32,
        /// The context it was loaded into.
        pub context: u32,
        /// `FLAG_*` bits (low 8).
        pub flags: u8,
        _: [u8; 7],
    }
}

record! {
    /// One function (kernel) of a loaded module (CUPTI's `CUpti_ActivityFunction`), written as
    /// its module loads.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct FunctionRecord: 24 bytes {
        /// The function's id (unique in the process).
        pub function: u32,
        pub context: u32,
        /// The module it belongs to (a [`ModuleRecord`]'s `module`).
        pub module: u32,
        /// Its symbol index in the module.
        pub function_index: u32,
        /// Index into the trace's kernel-name table (shared with kernel records).
        pub name: u32,
        _: [u8; 4],
    }
}

/// A loaded module's code image (its cubin, as CUPTI's module-loaded callback gives it).
/// Images are stored once per trace: `bytes` holds the image only the first time its content
/// (`hash`) is seen; later modules of the same content name it by `hash`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleImage {
    /// The module (a [`ModuleRecord`]'s `module`).
    pub module: u32,
    pub context: u32,
    /// [`image_hash`] of the content.
    pub hash: u64,
    /// `cuptiGetCubinCrc` of the content, the key CUPTI's PC sampling records use (0:
    /// unknown).
    pub crc: u64,
    /// Size of the image, bytes.
    pub size: u64,
    /// The image, when this chunk stores it.
    pub bytes: Option<Vec<u8>>,
}

record! {
    /// The fixed part of a module-image chunk, in front of the image.
    struct ModuleImageHeader: 40 bytes {
        pub module: u32,
        pub context: u32,
        pub hash: u64,
        pub crc: u64,
        pub size: u64,
        /// Bit 0: the image follows (the other bits are ignored).
        pub stored: u32,
        _: [u8; 4],
    }
}

impl ModuleImage {
    /// Bytes before the image in a chunk.
    pub const HEADER: usize = ModuleImageHeader::SIZE;

    pub fn encode(&self) -> Vec<u8> {
        let header = ModuleImageHeader {
            module: self.module,
            context: self.context,
            hash: self.hash,
            crc: self.crc,
            size: self.size,
            stored: u32::from(self.bytes.is_some()),
        };
        let mut b = header.to_bytes().to_vec();
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
        let bytes = if h.stored & 1 != 0 {
            if rest.len() as u64 != size {
                return Err(format!(
                    "module image of {size} bytes holds {} bytes",
                    rest.len()
                ));
            }
            Some(rest.to_vec())
        } else {
            None
        };
        Ok(ModuleImage {
            module: h.module,
            context: h.context,
            hash: h.hash,
            crc: h.crc,
            size,
            bytes,
        })
    }
}

/// The content hash of a module image: 64 bits, 8 bytes a multiply (not cryptographic; it
/// tells images apart within a trace).
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
mod image_tests {
    use super::*;

    #[test]
    fn images_round_trip_and_reject_bad_sizes() {
        let img = ModuleImage {
            module: 3,
            context: 1,
            hash: image_hash(b"\x7fELF cubin"),
            crc: 0xdead_beef,
            size: 10,
            bytes: Some(b"\x7fELF cubin".to_vec()),
        };
        assert_eq!(img.size as usize, img.bytes.as_ref().unwrap().len());
        let b = img.encode();
        assert_eq!(b.len(), ModuleImage::HEADER + 10);
        assert_eq!(ModuleImage::decode(&b), Ok(img.clone()));
        let named = ModuleImage {
            bytes: None,
            ..img.clone()
        };
        assert_eq!(ModuleImage::decode(&named.encode()), Ok(named));
        assert!(ModuleImage::decode(&b[..b.len() - 1]).is_err());
        assert!(ModuleImage::decode(&b[..10]).is_err());
        assert_ne!(image_hash(b"a"), image_hash(b"b"));
        assert_ne!(image_hash(b""), image_hash(b"\0"));
    }
}
