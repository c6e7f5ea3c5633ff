//! The dataset's tables, declared once: each one's columns with their type, unit and meaning.
//! The writers build their Arrow schemas from them, the dataset's `_schema.json` is written
//! from them, and docs/parquet.md describes the same tables (a test checks that every column
//! here is documented there). The compatibility rule is in `schema.rs`.

use super::schema::{col, opt, Column, Table, Type};
use Type::{Bool, Str, F64, I32, I64};

const START: Column = col("start_ns", I64, "ns", "start, on the dataset's clock");
const END: Column = col("end_ns", I64, "ns", "end, on the dataset's clock");
const DURATION: Column = col("duration_ns", I64, "ns", "end_ns - start_ns");
const CORRELATION: Column = opt(
    "correlation",
    I64,
    "",
    "correlation id of the API call that launched it (api_calls.correlation); null when not linked",
);
const DEVICE: Column = col("device", I64, "", "device ordinal (devices.device)");
const CONTEXT: Column = col("context", I64, "", "CUPTI's context id (contexts.context)");
const STREAM: Column = opt(
    "stream",
    I64,
    "",
    "CUPTI's stream id (streams.stream); null when none",
);
const GRAPH: Column = opt(
    "graph_id",
    I64,
    "",
    "CUDA graph id when launched by a graph; null otherwise",
);
const NODE: Column = opt(
    "graph_node_id",
    I64,
    "",
    "graph node id when launched by a graph; null otherwise",
);

/// `api_calls`: driver and runtime API calls.
pub const API_CALLS: Table = Table {
    name: "api_calls",
    about: "one row per driver or runtime API call",
    columns: &[
        col("tid", I64, "", "thread id (threads.tid)"),
        col(
            "correlation",
            I64,
            "",
            "rtrace's correlation id: joins kernels, copies, memsets, memory, syncs",
        ),
        START,
        END,
        DURATION,
        col(
            "api",
            Str,
            "",
            "`driver` (a cu* call) or `runtime` (a cuda* call, from CUPTI's callbacks)",
        ),
        col(
            "name",
            Str,
            "",
            "function name (`cuLaunchKernel`, `cudaMemcpy`)",
        ),
        col("function_id", I64, "", "the trace's function id"),
        col(
            "in_runtime",
            Bool,
            "",
            "a driver call made inside a recorded runtime call of its thread",
        ),
        col(
            "result",
            I64,
            "",
            "return code (CUresult or cudaError_t); 0 is success",
        ),
    ],
};

/// `kernels`.
pub const KERNELS: Table = Table {
    name: "kernels",
    about: "one row per kernel execution",
    columns: &[
        CORRELATION,
        START,
        END,
        DURATION,
        col("name", Str, "", "demangled kernel name"),
        col("mangled_name", Str, "", "the name as recorded"),
        DEVICE,
        CONTEXT,
        STREAM,
        GRAPH,
        NODE,
        col("grid_x", I32, "", "grid size x"),
        col("grid_y", I32, "", "grid size y"),
        col("grid_z", I32, "", "grid size z"),
        col("block_x", I32, "", "block size x"),
        col("block_y", I32, "", "block size y"),
        col("block_z", I32, "", "block size z"),
        col("registers_per_thread", I64, "", "registers per thread"),
        col(
            "static_shared_memory",
            I64,
            "bytes",
            "static shared memory per block",
        ),
        col(
            "dynamic_shared_memory",
            I64,
            "bytes",
            "dynamic shared memory per block",
        ),
        col(
            "local_memory_per_thread",
            I64,
            "bytes",
            "local memory per thread",
        ),
    ],
};

/// `copies`.
pub const COPIES: Table = Table {
    name: "copies",
    about: "one row per memory copy (peer-to-peer copies included)",
    columns: &[
        CORRELATION,
        START,
        END,
        DURATION,
        col("kind", Str, "", "HtoD, DtoH, DtoD, HtoH, PtoP, ..."),
        col("bytes", I64, "bytes", "size"),
        col(
            "src_kind",
            Str,
            "",
            "source memory: pageable, pinned, device, ...",
        ),
        col("dst_kind", Str, "", "destination memory"),
        DEVICE,
        CONTEXT,
        STREAM,
        GRAPH,
        NODE,
        opt(
            "src_device",
            I64,
            "",
            "peer-to-peer copies: the source device; null for others",
        ),
        opt(
            "src_context",
            I64,
            "",
            "peer-to-peer copies: the source context",
        ),
        opt(
            "dst_device",
            I64,
            "",
            "peer-to-peer copies: the destination device",
        ),
        opt(
            "dst_context",
            I64,
            "",
            "peer-to-peer copies: the destination context",
        ),
    ],
};

/// `memsets`.
pub const MEMSETS: Table = Table {
    name: "memsets",
    about: "one row per memset",
    columns: &[
        CORRELATION,
        START,
        END,
        DURATION,
        col("bytes", I64, "bytes", "size"),
        col("value", I64, "", "the value set"),
        DEVICE,
        CONTEXT,
        STREAM,
        GRAPH,
        NODE,
    ],
};

/// `memory`: allocations and frees.
pub const MEMORY: Table = Table {
    name: "memory",
    about: "one row per memory allocation or free",
    columns: &[
        opt(
            "correlation",
            I64,
            "",
            "the API call that made it (api_calls.correlation); null when none",
        ),
        col("time_ns", I64, "ns", "when, on the dataset's clock"),
        col("operation", Str, "", "`alloc`, `free` or `unknown`"),
        col(
            "kind",
            Str,
            "",
            "device, pinned, pageable, managed, array, device-static, ...",
        ),
        col("address", I64, "", "address (as a signed 64-bit value)"),
        col("bytes", I64, "bytes", "size"),
        DEVICE,
        CONTEXT,
        STREAM,
        col(
            "is_async",
            Bool,
            "",
            "a stream-ordered (async) allocation or free",
        ),
    ],
};

/// `syncs`: synchronizations.
pub const SYNCS: Table = Table {
    name: "syncs",
    about: "one row per host synchronization CUPTI recorded",
    columns: &[
        opt(
            "correlation",
            I64,
            "",
            "the API call that waited (api_calls.correlation); null when none",
        ),
        START,
        END,
        DURATION,
        col(
            "kind",
            Str,
            "",
            "stream synchronize, event synchronize, context synchronize, stream wait event, unknown",
        ),
        CONTEXT,
        STREAM,
        opt("event", I64, "", "CUPTI's event id; null when none"),
        col("result", I64, "", "return code of the call"),
    ],
};

/// `nvtx_ranges`: ranges with their GPU projection.
pub const NVTX_RANGES: Table = Table {
    name: "nvtx_ranges",
    about: "one row per NVTX range that began and ended, with the GPU work of the calls inside it",
    columns: &[
        col(
            "range_id",
            I64,
            "",
            "the range's number among the process's ranges in order of beginning, from 1 (rows come in the order ranges end)",
        ),
        col("tid", I64, "", "thread it began on"),
        col("end_tid", I64, "", "thread it ended on"),
        col("domain", Str, "", "domain, `(default)` for the default one"),
        col("name", Str, "", "message, `(unnamed)` without one"),
        col("category", I64, "", "category, 0 for none"),
        opt(
            "level",
            I64,
            "",
            "push/pop ranges: nesting level on its thread and domain from 0; null for start/end",
        ),
        START,
        END,
        DURATION,
        col(
            "gpu_records",
            I64,
            "",
            "kernels, copies, memsets launched by its thread's calls inside it (nested ranges included)",
        ),
        col("gpu_ns", I64, "ns", "their summed GPU durations"),
        opt(
            "gpu_device",
            I64,
            "",
            "device of that work's first record; null without work",
        ),
        opt("gpu_start_ns", I64, "ns", "that work's first start"),
        opt("gpu_end_ns", I64, "ns", "that work's last end"),
        col(
            "own_gpu_records",
            I64,
            "",
            "of that work, what calls made while this was the innermost range launched",
        ),
        col("own_gpu_ns", I64, "ns", "their GPU time"),
        col(
            "process_gpu_records",
            I64,
            "",
            "process view: its work plus other threads' launches made while it was open",
        ),
        col("process_gpu_ns", I64, "ns", "their GPU time"),
        opt("process_gpu_device", I64, "", "device of its first record"),
        opt("process_gpu_start_ns", I64, "ns", "first start"),
        opt("process_gpu_end_ns", I64, "ns", "last end"),
    ],
};

/// `external_ids`.
pub const EXTERNAL_IDS: Table = Table {
    name: "external_ids",
    about: "one row per external correlation id (rtrace_push_external_correlation, NVTX payloads)",
    columns: &[
        col("kind", I64, "", "the id's kind, as the program pushed it"),
        col("id", I64, "", "the id"),
        col(
            "calls",
            I64,
            "",
            "API calls made while it was the innermost id of its kind on their thread",
        ),
        col("gpu_records", I64, "", "GPU records those calls launched"),
        col("gpu_ns", I64, "ns", "their GPU time"),
        col(
            "process_calls",
            I64,
            "",
            "process view: with other threads' calls that had no id of this kind",
        ),
        col("process_gpu_records", I64, "", "their GPU records"),
        col("process_gpu_ns", I64, "ns", "their GPU time"),
    ],
};

/// `processes`.
pub const PROCESSES: Table = Table {
    name: "processes",
    about: "one row per trace file: the traced process",
    columns: &[
        col("trace_file", Str, "", "the trace file exported"),
        col("ppid", I64, "", "parent pid"),
        opt(
            "forked_from",
            I64,
            "",
            "pid of the process it was forked from, if it was",
        ),
        col("command_line", Str, "", "the command line, shell-quoted"),
        col("executable", Str, "", "the executable"),
        col("boot_id", Str, "", "the host's boot id"),
        col(
            "start_ns",
            I64,
            "ns",
            "process start, on the dataset's clock",
        ),
        col(
            "start_realtime_ns",
            I64,
            "ns",
            "process start, realtime clock (ns since 1970)",
        ),
        opt(
            "end_ns",
            I64,
            "ns",
            "process end (its end record), on the dataset's clock; null without one",
        ),
        col(
            "clock_shift_ns",
            I64,
            "ns",
            "added to the trace's own times to put them on the dataset's clock",
        ),
        col("format_version", Str, "", "trace format version"),
        col(
            "writer_version",
            Str,
            "",
            "librtrace.so version that wrote it",
        ),
        col(
            "dropped_records",
            I64,
            "",
            "API records lost to full buffers",
        ),
        opt(
            "damage",
            Str,
            "",
            "how the file is damaged (exported up to there); null when whole",
        ),
        opt(
            "rank_variable",
            Str,
            "",
            "the launcher's rank variable the process had (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, LOCAL_RANK: the first set); null without one",
        ),
        opt("rank", Str, "", "its value: the process's rank in the job"),
    ],
};

/// `threads`.
pub const THREADS: Table = Table {
    name: "threads",
    about: "one row per thread that made calls or NVTX events",
    columns: &[
        col("tid", I64, "", "thread id"),
        opt("name", Str, "", "thread name"),
        col("dropped_records", I64, "", "its API records lost"),
    ],
};

/// `devices`.
pub const DEVICES: Table = Table {
    name: "devices",
    about: "one row per device the trace describes",
    columns: &[
        DEVICE,
        col("name", Str, "", "device name"),
        opt("compute_capability", Str, "", "`9.0`"),
        opt("multiprocessors", I64, "", "SM count"),
        col("total_memory", I64, "bytes", "device memory"),
        opt("clock_khz", I64, "kHz", "SM clock"),
        opt("memory_clock_khz", I64, "kHz", "memory clock"),
        opt("pci_address", Str, "", "`00000000:1B:00.0`"),
    ],
};

/// `contexts`.
pub const CONTEXTS: Table = Table {
    name: "contexts",
    about: "one row per context CUPTI described",
    columns: &[
        CONTEXT,
        DEVICE,
        opt("null_stream", I64, "", "the context's NULL stream id"),
        opt("parent_context", I64, "", "a green context's parent"),
        col("is_green", Bool, "", "a green context"),
        col(
            "multiprocessors",
            I64,
            "",
            "SMs of a green context, 0 otherwise",
        ),
    ],
};

/// `streams`.
pub const STREAMS: Table = Table {
    name: "streams",
    about: "one row per stream CUPTI described",
    columns: &[
        col("stream", I64, "", "CUPTI's stream id"),
        CONTEXT,
        col("priority", I64, "", "priority"),
        col("flag", Str, "", "default, non-blocking, null, unknown"),
        opt(
            "correlation",
            I64,
            "",
            "the call that created it; null when unknown",
        ),
    ],
};

/// `modules`.
pub const MODULES: Table = Table {
    name: "modules",
    about: "one row per module load or unload",
    columns: &[
        col("module", I64, "", "CUPTI's module id"),
        CONTEXT,
        col("event", Str, "", "`load` or `unload`"),
        col("time_ns", I64, "ns", "when, on the dataset's clock"),
        col("cubin_size", I64, "bytes", "size of its cubin"),
        opt("correlation", I64, "", "the call that loaded it"),
    ],
};

/// `pc_samples`.
pub const PC_SAMPLES: Table = Table {
    name: "pc_samples",
    about: "one row per (read, instruction, stall reason) of PC sampling",
    columns: &[
        CONTEXT,
        col("time_ns", I64, "ns", "when the samples were read"),
        col("function", Str, "", "demangled kernel name"),
        col(
            "function_index",
            I64,
            "",
            "the function's index in its module",
        ),
        col(
            "cubin_crc",
            I64,
            "",
            "CRC of the module's cubin (joins module images)",
        ),
        col(
            "pc_offset",
            I64,
            "bytes",
            "the instruction's offset in its function",
        ),
        col(
            "stall_reason",
            Str,
            "",
            "Nsight Compute's warp state (`Stall Long Scoreboard`, `Selected`)",
        ),
        col("samples", I64, "", "samples"),
    ],
};

/// `kernel_metrics`.
pub const KERNEL_METRICS: Table = Table {
    name: "kernel_metrics",
    about: "one row per metric value of a profiled kernel launch (rtrace record --metrics)",
    columns: &[
        col(
            "correlation",
            I64,
            "",
            "the launch call (api_calls.correlation, kernels.correlation)",
        ),
        CONTEXT,
        col(
            "launch",
            I64,
            "",
            "the launch's number among the profiled ones",
        ),
        col("kernel", Str, "", "demangled kernel name"),
        col("range", Str, "", "CUPTI's range name"),
        col(
            "metric",
            Str,
            "",
            "metric name (`sm__throughput.avg.pct_of_peak_sustained_elapsed`)",
        ),
        opt(
            "value",
            F64,
            "",
            "its value; null when CUPTI could not evaluate it",
        ),
    ],
};

/// Every table, in the order the dataset lists them.
pub const TABLES: &[&Table] = &[
    &PROCESSES,
    &THREADS,
    &DEVICES,
    &CONTEXTS,
    &STREAMS,
    &MODULES,
    &API_CALLS,
    &KERNELS,
    &COPIES,
    &MEMSETS,
    &MEMORY,
    &SYNCS,
    &NVTX_RANGES,
    &EXTERNAL_IDS,
    &PC_SAMPLES,
    &KERNEL_METRICS,
];

/// The partition columns every table has, from its folders (`host=H/pid=P`).
pub const PARTITIONS: &[Column] = &[
    col(
        "host",
        Str,
        "",
        "host name of the traced process (partition folder `host=`)",
    ),
    col("pid", I64, "", "process id (partition folder `pid=`)"),
];
