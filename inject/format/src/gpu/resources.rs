//! The resources GPU work runs in: contexts, streams, modules and functions.

use super::{Le, LeMut};

/// One context (CUPTI's `CUpti_ActivityContext3`), written when it is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextRecord {
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
}

impl ContextRecord {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u32(0, self.context);
        w.u32(4, self.device);
        w.u32(8, self.null_stream);
        w.u32(12, self.parent_context);
        w.u16(16, self.compute_api);
        w.u16(18, self.num_multiprocessors);
        w.u8(20, self.cig_mode);
        w.u8(21, u8::from(self.is_green));
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        ContextRecord {
            context: r.u32(0),
            device: r.u32(4),
            null_stream: r.u32(8),
            parent_context: r.u32(12),
            compute_api: r.u16(16),
            num_multiprocessors: r.u16(18),
            cig_mode: r.u8(20),
            is_green: r.u8(21) != 0,
        }
    }
}

/// How a stream was created (CUPTI's `CUpti_ActivityStreamFlag` numbering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum StreamFlag {
    #[default]
    Unknown = 0,
    /// `CU_STREAM_DEFAULT`: synchronizes with the NULL stream.
    Default = 1,
    /// `CU_STREAM_NON_BLOCKING`.
    NonBlocking = 2,
    /// A context's NULL (legacy default) stream.
    Null = 3,
}

impl StreamFlag {
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => StreamFlag::Default,
            2 => StreamFlag::NonBlocking,
            3 => StreamFlag::Null,
            _ => StreamFlag::Unknown,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StreamFlag::Unknown => "unknown",
            StreamFlag::Default => "default",
            StreamFlag::NonBlocking => "non-blocking",
            StreamFlag::Null => "null",
        }
    }
}

/// One stream (CUPTI's `CUpti_ActivityStream`), written when it is created: those the
/// program creates, and those the driver creates with a context (its NULL stream among them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamRecord {
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
}

impl StreamRecord {
    pub const SIZE: usize = 32;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u32(8, self.source_correlation);
        w.u32(12, self.context);
        w.u32(16, self.stream);
        w.i32(20, self.priority);
        w.u8(24, self.flag as u8);
        w.u8(25, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        StreamRecord {
            correlation: r.u64(0),
            source_correlation: r.u32(8),
            context: r.u32(12),
            stream: r.u32(16),
            priority: r.i32(20),
            flag: StreamFlag::from_u8(r.u8(24)),
            flags: r.u8(25),
        }
    }
}

/// One module as it is loaded, or, with `FLAG_UNLOADED`, as it is unloaded (CUPTI's module
/// resource callbacks; `CUpti_ActivityModule`'s fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModuleRecord {
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
}

impl ModuleRecord {
    pub const SIZE: usize = 40;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u64(0, self.correlation);
        w.u64(8, self.timestamp_ns);
        w.u64(16, self.cubin_size);
        w.u32(24, self.module);
        w.u32(28, self.context);
        w.u8(32, self.flags);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        ModuleRecord {
            correlation: r.u64(0),
            timestamp_ns: r.u64(8),
            cubin_size: r.u64(16),
            module: r.u32(24),
            context: r.u32(28),
            flags: r.u8(32),
        }
    }
}

/// One function (kernel) of a loaded module (CUPTI's `CUpti_ActivityFunction`), written as
/// its module loads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionRecord {
    /// The function's id (unique in the process).
    pub function: u32,
    pub context: u32,
    /// The module it belongs to (a [`ModuleRecord`]'s `module`).
    pub module: u32,
    /// Its symbol index in the module.
    pub function_index: u32,
    /// Index into the trace's kernel-name table (shared with kernel records).
    pub name: u32,
}

impl FunctionRecord {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        let mut w = LeMut(&mut b);
        w.u32(0, self.function);
        w.u32(4, self.context);
        w.u32(8, self.module);
        w.u32(12, self.function_index);
        w.u32(16, self.name);
        b
    }

    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let r = Le(b);
        FunctionRecord {
            function: r.u32(0),
            context: r.u32(4),
            module: r.u32(8),
            function_index: r.u32(12),
            name: r.u32(16),
        }
    }
}
