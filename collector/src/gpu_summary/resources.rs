//! The resources of the traced processes: devices, contexts, streams, modules, functions.

use super::common::*;

/// A device a trace describes (its DeviceInfo).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceRow {
    /// The traced process.
    pub pid: u32,
    /// The device ordinal (the `device` of the GPU records).
    pub ordinal: u32,
    pub name: String,
    /// `(major, minor)`; `None` when the trace does not say.
    pub compute_capability: Option<(i32, i32)>,
    /// Multiprocessors (SMs).
    pub multiprocessors: Option<i32>,
    /// Bytes.
    pub total_memory: u64,
    /// Peak SM clock, kHz.
    pub clock_khz: Option<i32>,
    /// Peak memory clock, kHz.
    pub memory_clock_khz: Option<i32>,
}

/// A context created while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextRow {
    pub pid: u32,
    pub context: u32,
    pub device: u32,
    /// Its NULL (legacy default) stream.
    pub null_stream: u32,
    /// The context it was made from (green contexts); 0 for none.
    pub parent_context: u32,
    pub is_green: bool,
    /// Green contexts: multiprocessors given to it.
    pub multiprocessors: u16,
    /// Stream, module and function records of the context.
    pub streams: u64,
    pub modules: u64,
    pub functions: u64,
}

/// A stream created while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRow {
    pub pid: u32,
    pub context: u32,
    pub stream: u32,
    pub flag: StreamFlag,
    /// Clamped to the device's range; lower is higher.
    pub priority: i32,
    /// The API function of the call that created it (with its context, for the NULL
    /// stream and the driver's own), when the record is linked to one of the trace.
    pub created_by: Option<String>,
    /// That call's correlation id.
    pub correlation: Option<u64>,
}

/// A module loaded while GPU activity was recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleRow {
    pub pid: u32,
    pub context: u32,
    pub module: u32,
    /// Size of its image, bytes.
    pub cubin_size: u64,
    /// When it was loaded (host clock), ns.
    pub timestamp_ns: u64,
    /// Its function records.
    pub functions: u64,
    /// The API function of the call that loaded it, when linked to one of the trace.
    pub loaded_by: Option<String>,
    /// That call's correlation id.
    pub correlation: Option<u64>,
    /// When its unload started (host clock), ns; `None` if the trace saw no unload.
    pub unloaded_ns: Option<u64>,
    /// The API function of the call that unloaded it (`cuModuleUnload`, `cuLibraryUnload`,
    /// a context destroyed), when linked to one of the trace.
    pub unloaded_by: Option<String>,
    /// That call's correlation id.
    pub unload_correlation: Option<u64>,
    /// Its image: content hash, `cuptiGetCubinCrc` (0: unknown), and whether the traces read
    /// hold the bytes (its own, or another of the run's); `None` when the trace names no image
    /// of it.
    pub image: Option<(u64, u64, bool)>,
    /// The functions of its stored image (a cubin), with their code's offset and size in it;
    /// empty without a stored image or for an image that is not a cubin.
    pub image_functions: Vec<crate::cubin::CubinFunction>,
}

/// A function (kernel) of a loaded module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionRow {
    pub pid: u32,
    pub context: u32,
    pub module: u32,
    /// The function's id.
    pub function: u32,
    /// Its symbol index in the module.
    pub index: u32,
    /// Its name, demangled ([`Trace::kernel_display_name`]).
    pub name: String,
}

/// The resources of the traced processes: devices, and the contexts, streams, modules and
/// functions created or loaded while GPU activity was recorded. Per process (in `traces`
/// order): devices by ordinal, the others in file order (the order they were made).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub devices: Vec<DeviceRow>,
    pub contexts: Vec<ContextRow>,
    pub streams: Vec<StreamRow>,
    pub modules: Vec<ModuleRow>,
    pub functions: Vec<FunctionRow>,
}

impl Resources {
    /// Nothing to show: no device and no resource record.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
            && self.contexts.is_empty()
            && self.streams.is_empty()
            && self.modules.is_empty()
            && self.functions.is_empty()
    }
}

/// The resources of `traces` ([`Resources`]).
pub fn resources(traces: &[Trace]) -> Resources {
    let mut r = Resources::default();
    for t in traces {
        let pid = t.header.pid;
        let api = t.api_records_for(
            t.streams
                .iter()
                .filter(|s| linked(s.flags))
                .map(|s| s.correlation)
                .chain(
                    t.modules
                        .iter()
                        .chain(&t.module_unloads)
                        .filter(|m| linked(m.flags))
                        .map(|m| m.correlation),
                ),
        );
        // The API function of a linked record, and its correlation id.
        let call = |flags: u8, correlation: u64| -> (Option<String>, Option<u64>) {
            if !linked(flags) {
                return (None, None);
            }
            match api.get(correlation) {
                Some(a) => (
                    Some(t.function_name(a.function).into_owned()),
                    Some(correlation),
                ),
                None => (None, None),
            }
        };
        for (&ordinal, d) in &t.devices {
            r.devices.push(DeviceRow {
                pid,
                ordinal,
                name: d.name.clone(),
                compute_capability: d.compute_capability(),
                multiprocessors: d.attribute(attr::MULTIPROCESSOR_COUNT),
                total_memory: d.total_memory,
                clock_khz: d.attribute(attr::CLOCK_RATE),
                memory_clock_khz: d.attribute(attr::MEMORY_CLOCK_RATE),
            });
        }
        for c in &t.contexts {
            let count = |n: usize| n as u64;
            r.contexts.push(ContextRow {
                pid,
                context: c.context,
                device: c.device,
                null_stream: c.null_stream,
                parent_context: c.parent_context,
                is_green: c.is_green,
                multiprocessors: c.num_multiprocessors,
                streams: count(t.streams.iter().filter(|s| s.context == c.context).count()),
                modules: count(t.modules.iter().filter(|m| m.context == c.context).count()),
                functions: count(
                    t.gpu_functions
                        .iter()
                        .filter(|f| f.context == c.context)
                        .count(),
                ),
            });
        }
        for s in &t.streams {
            let (created_by, correlation) = call(s.flags, s.correlation);
            r.streams.push(StreamRow {
                pid,
                context: s.context,
                stream: s.stream,
                flag: s.flag,
                priority: s.priority,
                created_by,
                correlation,
            });
        }
        for m in &t.modules {
            let (loaded_by, correlation) = call(m.flags, m.correlation);
            let unload = t.module_unloads.iter().find(|u| u.module == m.module);
            let image = t.module_images.iter().find(|i| i.module == m.module);
            let (unloaded_by, unload_correlation) =
                unload.map_or((None, None), |u| call(u.flags, u.correlation));
            let functions = t.gpu_functions.iter().filter(|f| f.module == m.module);
            r.modules.push(ModuleRow {
                pid,
                context: m.context,
                module: m.module,
                cubin_size: m.cubin_size,
                timestamp_ns: m.timestamp_ns,
                functions: functions.count() as u64,
                loaded_by,
                correlation,
                unloaded_ns: unload.map(|u| u.timestamp_ns),
                unloaded_by,
                unload_correlation,
                image: image.map(|i| {
                    let stored = crate::images::find(traces, i.hash).is_some();
                    (i.hash, i.crc, stored)
                }),
                image_functions: image
                    .and_then(|i| crate::images::find(traces, i.hash))
                    .and_then(|bytes| crate::cubin::functions(bytes).ok())
                    .unwrap_or_default(),
            });
        }
        let mut names: HashMap<u32, String> = HashMap::new();
        for f in &t.gpu_functions {
            let name = names
                .entry(f.name)
                .or_insert_with(|| t.kernel_display_name(f.name))
                .clone();
            r.functions.push(FunctionRow {
                pid,
                context: f.context,
                module: f.module,
                function: f.function,
                index: f.function_index,
                name,
            });
        }
    }
    r
}
