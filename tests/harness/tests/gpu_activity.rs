//! GPU activity (`RTRACE_GPU_ACTIVITY=1`) on the simulated driver and the simulated CUPTI
//! (tests/simcupti): exact kernel, copy and memset records, each linked to its launch call;
//! exact allocation, free and synchronization records, each linked to its API call; exact
//! context, stream, module and function records, linked to each other and to their calls.

use rtrace_format::{
    ContextRecord, CopyKind, DeviceInfo, FunctionRecord, MemoryKind, MemoryOperation,
    MemoryPoolType, ModuleRecord, StreamFlag, StreamRecord, SyncKind, FLAG_CORRELATED,
    FLAG_UNLOADED, ID_NONE,
};
use rtrace_tests::*;

const ON: &[(&str, &str)] = &[("RTRACE_GPU_ACTIVITY", "1")];

#[test]
fn kernels_copies_and_memsets_are_recorded_and_linked() {
    let plain = run(Spec::untraced("direct"));
    let r = run(Spec::traced("direct").env(ON));
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        messages,
        vec![
            "GPU activity on: kernels, memory copies, peer copies, memsets, contexts, streams, \
             functions and modules through CUPTI",
            "GPU records carry rtrace correlation ids (CUPTI callbacks on 127 driver functions)",
            "runtime API calls recorded (CUPTI runtime callbacks)",
        ]
    );
    // Allocations and synchronizations only when asked for (RTRACE_GPU_ACTIVITY=all or a list).
    assert!(t.memory.is_empty() && t.syncs.is_empty());
    let api: std::collections::HashMap<u64, (String, u64)> = records(&t)
        .into_iter()
        .map(|(_, a)| {
            (
                a.correlation,
                (t.functions[&a.function].clone(), a.start_ns),
            )
        })
        .collect();
    let launcher = |corr: u64| api.get(&corr).map(|(f, _)| f.as_str());

    // Kernels: names and durations from the module image, in launch order.
    let kernels: Vec<_> = t
        .kernels
        .iter()
        .map(|k| {
            assert_eq!(k.flags & FLAG_CORRELATED, FLAG_CORRELATED);
            assert_eq!(launcher(k.correlation), Some("cuLaunchKernel"));
            (
                t.kernel_name(k.name).into_owned(),
                k.end_ns - k.start_ns,
                k.grid,
                k.block,
                k.registers_per_thread,
            )
        })
        .collect();
    assert_eq!(
        kernels,
        vec![
            ("vecadd_f32".into(), 2000, [4, 1, 1], [256, 1, 1], 32),
            ("fill_u32".into(), 500, [4, 1, 1], [256, 1, 1], 32),
        ]
    );
    assert!(t.kernels[0].start_ns < t.kernels[1].start_ns);

    // Copies: 4096 bytes at 10 GB/s take 410 virtual ns.
    let copies: Vec<_> = t
        .memcpys
        .iter()
        .map(|c| {
            assert_eq!(c.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED);
            (
                launcher(c.correlation).unwrap().to_string(),
                c.kind,
                c.bytes,
                c.end_ns - c.start_ns,
            )
        })
        .collect();
    assert_eq!(
        copies,
        vec![
            ("cuMemcpyHtoD_v2".into(), CopyKind::HtoD, 4096, 410),
            ("cuMemcpyHtoD_v2".into(), CopyKind::HtoD, 4096, 410),
            ("cuMemcpyDtoH_v2".into(), CopyKind::DtoH, 4096, 410),
            ("cuMemcpyDtoHAsync_v2".into(), CopyKind::DtoH, 4096, 410),
        ]
    );
    assert_eq!(t.memsets.len(), 1);
    let m = t.memsets[0];
    assert_eq!((m.bytes, m.end_ns - m.start_ns), (4096, 410));
    assert_eq!(launcher(m.correlation), Some("cuMemsetD32_v2"));

    // The device, as the driver describes it.
    let devices: Vec<&DeviceInfo> = t.devices.values().collect();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].ordinal, 0);
    assert_eq!(
        devices[0].attribute(rtrace_format::attr::MULTIPROCESSOR_COUNT),
        Some(132)
    );
}

/// `direct` with its kernels lengthened so that the host really waits (virtual time, see
/// tests/simcuda/README.md): vecadd 26820..36820 ns and fill 40230..50230 ns after the first
/// call, plus whatever rtrace's own driver calls at start add to all of them alike.
const LONG_KERNELS: &[(&str, &str)] = &[
    ("RTRACE_GPU_ACTIVITY", "all"),
    ("SIMCUDA_KERNEL_NS", "vecadd_f32=10000,fill_u32=10000"),
];

#[test]
fn allocations_frees_and_synchronizations_are_recorded_and_linked() {
    let plain = run(Spec::untraced("direct").env(&LONG_KERNELS[1..]));
    let r = run(Spec::traced("direct").env(LONG_KERNELS));
    assert_eq!(r.stdout(), plain.stdout());
    assert!(
        r.stdout().contains(" elapsed_ms=0.011000 "),
        "{}",
        r.stdout()
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let api: std::collections::HashMap<u64, &str> = records(&t)
        .into_iter()
        .map(|(_, a)| (a.correlation, t.functions[&a.function].as_str()))
        .collect();
    let context = t.kernels[0].context;

    // 3 cuMemAlloc (cuMemAlloc_v2 through cuda.h) of 4096 bytes, 1 cuMemAllocHost of 4096,
    // then, at the end, their frees in the same order: one call (1000 virtual ns) apart.
    assert_eq!(t.memory.len(), 8, "{:?}", t.memory);
    let memory: Vec<_> = t
        .memory
        .iter()
        .map(|m| {
            assert_eq!(m.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED, "{m:?}");
            assert_eq!((m.device, m.context, m.stream), (0, context, ID_NONE));
            assert_eq!(
                (m.pc, m.is_async, m.pool_type),
                (0, false, MemoryPoolType::None)
            );
            assert_eq!((m.pool_address, m.pool_size, m.pool_utilized), (0, 0, 0));
            assert_ne!(m.address, 0);
            (
                api[&m.correlation],
                m.operation,
                m.kind,
                m.bytes,
                m.timestamp_ns - t.memory[0].timestamp_ns,
            )
        })
        .collect();
    use MemoryKind::{Device, Pinned};
    use MemoryOperation::{Alloc, Free};
    let free_at = t.memory[4].timestamp_ns - t.memory[0].timestamp_ns;
    assert_eq!(
        memory,
        vec![
            ("cuMemAlloc_v2", Alloc, Device, 4096, 0),
            ("cuMemAlloc_v2", Alloc, Device, 4096, 1000),
            ("cuMemAlloc_v2", Alloc, Device, 4096, 2000),
            ("cuMemAllocHost_v2", Alloc, Pinned, 4096, 3000),
            ("cuMemFree_v2", Free, Device, 4096, free_at),
            ("cuMemFree_v2", Free, Device, 4096, free_at + 1000),
            ("cuMemFree_v2", Free, Device, 4096, free_at + 2000),
            ("cuMemFreeHost", Free, Pinned, 4096, free_at + 3000),
        ]
    );
    // Each free names the address of its allocation; the four addresses differ.
    for i in 0..4 {
        assert_eq!(t.memory[i].address, t.memory[i + 4].address);
    }
    let mut addresses: Vec<u64> = t.memory[..4].iter().map(|m| m.address).collect();
    addresses.dedup();
    assert_eq!(addresses.len(), 4);
    // The correlation ids of the calls, CUPTI's and rtrace's, all distinct.
    let mut ids: Vec<(u32, u64)> = t
        .memory
        .iter()
        .map(|m| (m.source_correlation, m.correlation))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8);

    // cuEventSynchronize(stop) waits from the host clock after its own step (2000 ns after
    // vecadd started) to the end of vecadd; cuStreamSynchronize(stream) waits for the copy
    // queued behind fill (it ends 50640, the host is at 42230); cuCtxSynchronize finds
    // nothing left to wait for.
    let syncs: Vec<_> = t
        .syncs
        .iter()
        .map(|s| {
            assert_eq!(s.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED, "{s:?}");
            assert_eq!((s.context, s.result), (context, 0));
            (api[&s.correlation], s.kind, s.stream, s.event, s.wait_ns())
        })
        .collect();
    let (vecadd, fill) = (t.kernels[0], t.kernels[1]);
    let stream = vecadd.stream;
    assert_eq!(
        syncs[0..1],
        [(
            "cuEventSynchronize",
            SyncKind::EventSynchronize,
            ID_NONE,
            syncs[0].3,
            8000
        )]
    );
    assert_ne!(syncs[0].3, ID_NONE);
    assert_eq!(
        syncs[1..],
        [
            (
                "cuStreamSynchronize",
                SyncKind::StreamSynchronize,
                stream,
                ID_NONE,
                8410
            ),
            (
                "cuCtxSynchronize",
                SyncKind::ContextSynchronize,
                ID_NONE,
                ID_NONE,
                0
            ),
        ]
    );
    let (event, stream_sync, ctx) = (t.syncs[0], t.syncs[1], t.syncs[2]);
    assert_eq!(event.start_ns, vecadd.start_ns + 2000);
    assert_eq!(event.end_ns, vecadd.end_ns);
    assert_eq!(stream_sync.end_ns, t.memcpys[3].end_ns);
    assert_eq!(stream_sync.start_ns, fill.start_ns + 2000);
    assert_eq!(ctx.start_ns, stream_sync.end_ns + 1000);

    // The report's sections.
    let summary = rtrace_collector::render_report_section(
        std::slice::from_ref(&t),
        rtrace_collector::Format::Csv,
        rtrace_collector::Section::Memory,
    );
    assert_eq!(
        summary,
        "kind,allocations,frees,bytes_allocated,peak_bytes,largest_bytes,live_bytes\n\
         device,3,3,12288,12288,4096,0\n\
         pinned,1,1,4096,4096,4096,0\n"
    );
    let summary = rtrace_collector::render_report_section(
        std::slice::from_ref(&t),
        rtrace_collector::Format::Csv,
        rtrace_collector::Section::Sync,
    );
    assert_eq!(
        summary,
        "type,count,total_wait_ns,mean_wait_ns,max_wait_ns\n\
         stream synchronize,1,8410,8410,8410\n\
         event synchronize,1,8000,8000,8000\n\
         context synchronize,1,0,0,0\n"
    );
}

/// `direct` loads one module of four kernels (tests/programs/common.h) into the primary
/// context and creates one stream: exactly one context, its NULL stream and the created one,
/// one module and its four functions (CUPTI writes every function of a module as it loads,
/// not at `cuModuleGetFunction`), all linked to each other, to the kernels, and to the calls
/// that made them.
#[test]
fn contexts_streams_modules_and_functions_are_recorded_and_linked() {
    let r = run(Spec::traced("direct").env(ON));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let api: std::collections::HashMap<u64, &str> = records(&t)
        .into_iter()
        .map(|(_, a)| (a.correlation, t.functions[&a.function].as_str()))
        .collect();
    let (vecadd, fill) = (t.kernels[0], t.kernels[1]);
    let (context, stream) = (vecadd.context, vecadd.stream);
    assert_eq!((fill.context, fill.stream), (context, stream));

    // The primary context, on device 0, with its NULL (legacy) stream; the copies on the
    // legacy stream ran there.
    assert_eq!(t.contexts.len(), 1, "{:?}", t.contexts);
    let c = t.contexts[0];
    assert_eq!(
        c,
        ContextRecord {
            context,
            device: 0,
            null_stream: c.null_stream,
            compute_api: 1,
            ..Default::default()
        }
    );
    assert!(t.devices.contains_key(&c.device));
    assert_eq!(t.memcpys[0].stream, c.null_stream);

    // The NULL stream, made with the context by cuDevicePrimaryCtxRetain, then the stream
    // cuStreamCreate made, where the kernels ran.
    let streams: Vec<_> = t
        .streams
        .iter()
        .map(|s| {
            assert_eq!(s.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED, "{s:?}");
            assert_ne!(s.source_correlation, 0);
            (api[&s.correlation], *s)
        })
        .collect();
    let created = |stream, flag, s: &StreamRecord| StreamRecord {
        context,
        stream,
        priority: 0,
        flag,
        ..*s
    };
    assert_eq!(
        streams,
        vec![
            (
                "cuDevicePrimaryCtxRetain",
                created(c.null_stream, StreamFlag::Null, &t.streams[0])
            ),
            (
                "cuStreamCreate",
                created(stream, StreamFlag::Default, &t.streams[1])
            ),
        ]
    );

    // The module, loaded by cuModuleLoadData: the image is 95 bytes of text.
    assert_eq!(t.modules.len(), 1, "{:?}", t.modules);
    let m = t.modules[0];
    assert_eq!((m.context, m.cubin_size), (context, 95));
    assert_eq!(m.flags as u32 & FLAG_CORRELATED, FLAG_CORRELATED);
    assert_eq!(api[&m.correlation], "cuModuleLoadData");
    let load = records(&t)
        .into_iter()
        .find(|(_, a)| a.correlation == m.correlation)
        .unwrap()
        .1;
    assert!(load.start_ns <= m.timestamp_ns && m.timestamp_ns <= load.end_ns);

    // Its image's hash and the (simulated) CUPTI CRC; the bytes only when asked for
    // (tests/harness/tests/module_images.rs).
    assert_eq!(t.module_images.len(), 1, "{:?}", t.module_images);
    assert!(t.images.is_empty());
    let img = &t.module_images[0];
    assert_eq!((img.module, img.context, img.size), (m.module, context, 95));
    let r =
        run(Spec::traced("direct")
            .env(&[("RTRACE_GPU_ACTIVITY", "1"), ("RTRACE_MODULE_IMAGES", "1")]));
    let stored = r.trace();
    let bytes = &stored.images[&img.hash];
    assert_eq!(bytes.len(), 95);
    assert!(bytes.starts_with(b"simcuda-module"), "{bytes:?}");
    assert_eq!(img.hash, rtrace_format::image_hash(bytes));
    let ieee = |data: &[u8]| {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            }
        }
        u64::from(!crc)
    };
    assert_eq!(img.crc, ieee(bytes));

    // Its unload, by cuModuleUnload at the end of the program, inside that call.
    assert_eq!(t.module_unloads.len(), 1, "{:?}", t.module_unloads);
    let u = t.module_unloads[0];
    assert_eq!(
        u,
        ModuleRecord {
            correlation: u.correlation,
            timestamp_ns: u.timestamp_ns,
            // The simulated CUPTI passes no image with an unload.
            cubin_size: 0,
            module: m.module,
            context,
            flags: (FLAG_CORRELATED | FLAG_UNLOADED) as u8,
        }
    );
    assert_eq!(api[&u.correlation], "cuModuleUnload");
    let unload = records(&t)
        .into_iter()
        .find(|(_, a)| a.correlation == u.correlation)
        .unwrap()
        .1;
    assert!(unload.start_ns <= u.timestamp_ns && u.timestamp_ns <= unload.end_ns);

    // Its four kernels, in image order, with the names the kernel records use.
    let functions: Vec<_> = t
        .gpu_functions
        .iter()
        .map(|f| (t.kernel_name(f.name).into_owned(), *f))
        .collect();
    let function = |id, index, name: &str| {
        (
            name.to_string(),
            FunctionRecord {
                function: id,
                context,
                module: m.module,
                function_index: index,
                name: functions[index as usize].1.name,
            },
        )
    };
    assert_eq!(
        functions,
        vec![
            function(1, 0, "vecadd_f32"),
            function(2, 1, "fill_u32"),
            function(3, 2, "add_u32"),
            function(4, 3, "empty"),
        ]
    );
    assert_eq!(functions[0].1.name, vecadd.name);
    assert_eq!(functions[1].1.name, fill.name);
    assert!(t.peer_copies.is_empty());

    // RTRACE_MODULE_IMAGES=0 keeps the modules and their images' hashes, not the bytes.
    let r =
        run(Spec::traced("direct")
            .env(&[("RTRACE_GPU_ACTIVITY", "1"), ("RTRACE_MODULE_IMAGES", "0")]));
    let t = r.trace();
    assert_eq!(
        (t.modules.len(), t.module_images.len(), t.images.len()),
        (1, 1, 0)
    );

    // Only when asked for: `kernel,memcpy,memset` has none of them.
    let r = run(Spec::traced("direct").env(&[("RTRACE_GPU_ACTIVITY", "kernel,memcpy,memset")]));
    let t = r.trace();
    assert_eq!(t.kernels.len(), 2);
    assert_eq!(t.resource_records(), 0);
    assert_eq!(
        t.notices[0].message,
        "GPU activity on: kernels, memory copies, peer copies and memsets through CUPTI"
    );
}

/// `threads`: four threads each create a non-blocking stream in the primary context; each
/// stream record is linked to its own thread's cuStreamCreate, and names the stream its
/// thread's memset and copy ran on.
#[test]
fn streams_created_on_many_threads_are_linked_to_their_calls() {
    let r = run(Spec::traced("threads").args(&["4", "10"]).env(ON));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    let calls: std::collections::HashMap<u64, (u64, &str)> = records(&t)
        .into_iter()
        .map(|(tid, a)| (a.correlation, (tid, t.functions[&a.function].as_str())))
        .collect();
    assert_eq!(t.contexts.len(), 1);
    let created: Vec<&StreamRecord> = t
        .streams
        .iter()
        .filter(|s| s.flag == StreamFlag::NonBlocking)
        .collect();
    assert_eq!(created.len(), 4, "{:?}", t.streams);
    assert_eq!(t.streams.len(), 5);
    let mut threads = Vec::new();
    for s in created {
        assert_eq!((s.context, s.priority), (t.contexts[0].context, 0));
        let (tid, function) = calls[&s.correlation];
        assert_eq!(function, "cuStreamCreate");
        // The memset this thread issued ran on this stream.
        let memset = t
            .memsets
            .iter()
            .find(|m| calls[&m.correlation].0 == tid)
            .unwrap();
        assert_eq!(memset.stream, s.stream);
        threads.push(tid);
    }
    threads.sort_unstable();
    threads.dedup();
    assert_eq!(threads.len(), 4);
}

/// cupti_client is a CUPTI client of its own (as the PyTorch profiler is): rtrace shares
/// CUPTI with it. The program gets exactly the records it gets alone (with its clock given
/// before CUPTI starts, or late, when CUPTI switches clocks), and rtrace gets its own.
#[test]
fn a_program_that_uses_cupti_itself_shares_it_with_rtrace() {
    for mode in [&[][..], &["late"][..]] {
        let plain = run(Spec::untraced("cupti_client").args(mode));
        assert_eq!(plain.code(), Some(0), "{}", plain.stderr());
        // Kernels, copies and memsets only: the calls that get CUPTI correlation ids are then
        // the same as without rtrace, so the program's records are equal number for number.
        let kinds = [("RTRACE_GPU_ACTIVITY", "kernel,memcpy,memset")];
        let r = run(Spec::traced("cupti_client").args(mode).env(&kinds));
        assert_eq!(
            relative_times(&r.stdout()),
            relative_times(&plain.stdout()),
            "{mode:?} {}",
            r.stderr()
        );
        assert_eq!(r.code(), Some(0));
        let t = r.trace();
        check_invariants(&t);
        let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
        let on = "GPU activity on: kernels, memory copies, peer copies and memsets through CUPTI";
        let linked =
            "GPU records carry rtrace correlation ids (CUPTI callbacks on 117 driver functions)";
        let runtime = "runtime API calls recorded (CUPTI runtime callbacks)";
        let shared = "GPU activity shared with the program's own CUPTI client (for example the \
                      PyTorch profiler): it gets the records it asks for, rtrace keeps its own";
        let clock = "CUPTI times GPU work on the program's own clock (it registered a timestamp \
                     callback): rtrace maps those times to its clock from readings of both";
        // The program's first CUPTI call starts rtrace's collection: its clock, or (late) its
        // buffer callbacks.
        let expected = if mode.is_empty() {
            vec![on, linked, runtime, clock, shared]
        } else {
            vec![on, linked, runtime, shared, clock]
        };
        assert_eq!(messages, expected, "{mode:?}");
        let api: std::collections::HashMap<u64, (String, u64, u64)> = records(&t)
            .into_iter()
            .map(|(_, a)| {
                let name = t.functions[&a.function].clone();
                (a.correlation, (name, a.start_ns, a.end_ns))
            })
            .collect();
        let launcher = |corr: u64| api[&corr].0.as_str();
        // Every kernel linked, with its virtual duration; the last one was handed over by the
        // program's forced flush before it ended, so it has no times, for rtrace too.
        let kernels: Vec<_> = t
            .kernels
            .iter()
            .map(|k| {
                assert_eq!(k.flags & FLAG_CORRELATED, FLAG_CORRELATED);
                let name = t.kernel_name(k.name).into_owned();
                (
                    name,
                    launcher(k.correlation),
                    k.end_ns - k.start_ns,
                    k.start_ns > 0,
                )
            })
            .collect();
        assert_eq!(
            kernels,
            vec![
                ("vecadd_f32".into(), "cuLaunchKernel", 2000, true),
                ("fill_u32".into(), "cuLaunchKernel", 500, true),
                ("empty".into(), "cuLaunchKernel", 0, false),
            ],
            "{mode:?}"
        );
        let copies: Vec<_> = t
            .memcpys
            .iter()
            .map(|c| {
                (
                    launcher(c.correlation),
                    c.kind,
                    c.bytes,
                    c.end_ns - c.start_ns,
                )
            })
            .collect();
        assert_eq!(
            copies,
            vec![
                ("cuMemcpyHtoD_v2", CopyKind::HtoD, 4096, 410),
                ("cuMemcpyHtoDAsync_v2", CopyKind::HtoD, 4096, 410),
                ("cuMemcpyDtoHAsync_v2", CopyKind::DtoH, 4096, 410),
                ("cuMemcpyDtoD_v2", CopyKind::DtoD, 4096, 410),
                ("cuMemcpyAsync", CopyKind::HtoH, 256, 26),
                ("cuMemcpyDtoH_v2", CopyKind::DtoH, 4096, 410),
            ],
            "{mode:?}"
        );
        let memsets: Vec<_> = t
            .memsets
            .iter()
            .map(|m| (launcher(m.correlation), m.bytes, m.end_ns - m.start_ns))
            .collect();
        assert_eq!(
            memsets,
            vec![
                ("cuMemsetD32_v2", 4096, 410),
                ("cuMemsetD8Async", 4096, 410)
            ],
            "{mode:?}"
        );
    }
}

/// `start=`, `end=` and `completed=` times of cupti_client's output relative to the first
/// record's start (`-1`, an unknown time, stays): rtrace's own driver calls when it starts
/// (device queries) advance simcuda's virtual clock, so under rtrace every time is later by
/// the same amount.
fn relative_times(out: &str) -> String {
    let mut base = None;
    out.lines()
        .map(|line| {
            line.split(' ')
                .map(|word| {
                    for key in ["start=", "end=", "completed="] {
                        if let Some(v) = word.strip_prefix(key).and_then(|v| v.parse::<i64>().ok())
                        {
                            if v < 0 {
                                return word.to_string();
                            }
                            let b = *base.get_or_insert(v);
                            return format!("{key}+{}", v - b);
                        }
                    }
                    word.to_string()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn missing_cupti_is_said_and_api_tracing_goes_on() {
    let env = [
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13"),
    ];
    let r = run(Spec::traced("direct").env(&env));
    assert_eq!(r.code(), Some(0));
    let t = r.trace();
    assert_eq!(counts(std::slice::from_ref(&t)).values().sum::<u64>(), 44);
    let messages: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        messages,
        vec!["GPU activity off: no CUPTI library found (tried /nonexistent/libcupti.so.13)"]
    );
}

#[test]
fn a_forked_child_never_writes_the_parents_gpu_records() {
    let r = run(Spec::traced("fork").env(ON));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let traces = r.traces();
    assert_eq!(traces.len(), 2);
    let parent = traces
        .iter()
        .find(|t| t.header.forked_from.is_none())
        .unwrap();
    let child = traces
        .iter()
        .find(|t| t.header.forked_from.is_some())
        .unwrap();
    // GPU activity belongs to the process that enabled CUPTI: the child has no CUPTI of its own
    // (it inherits none of CUPTI's threads) and writes none of the parent's records or notices.
    assert!(parent
        .notices
        .iter()
        .any(|n| n.message.starts_with("GPU activity on")));
    assert!(child.notices.is_empty(), "{:?}", child.notices);
    assert!(child.kernels.is_empty() && child.memcpys.is_empty() && child.memsets.is_empty());
    let ids: std::collections::HashSet<u64> =
        records(parent).iter().map(|(_, a)| a.correlation).collect();
    for k in &parent.kernels {
        assert!(ids.contains(&k.correlation));
    }
}
