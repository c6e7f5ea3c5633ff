//! The resources GPU work runs in: contexts, streams, modules and functions (modules' code
//! images are in `image.rs`).

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
