//! NVTX v3 from real programs built against the nvtx3 headers: librtrace.so points
//! `NVTX_INJECTION64_PATH` at itself, each image that embeds NVTX attaches, and the trace holds
//! every range, mark and name with its thread and times.

use rtrace_collector::nvtx::{nvtx_summary, ranges, NvtxRange};
use rtrace_format::{NvtxEvent, NvtxKind};
use rtrace_tests::*;

#[test]
fn ranges_marks_and_names_from_two_images_are_recorded() {
    let plain = run(Spec::untraced("nvtx"));
    assert_eq!(plain.code(), Some(0), "{}", plain.stderr());
    // Without a tool NVTX tracks nothing.
    assert_eq!(
        plain.stdout(),
        "levels -2 -2 -2 -2 domain -2 -2 extra pop -2\nexternal none\n"
    );

    let r = run(Spec::traced("nvtx"));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // Levels from 0, per thread and domain; popping an empty stack is an error.
    // External ids pop innermost first per kind; popping an empty kind fails (-1) and leaves
    // the output alone.
    assert_eq!(
        r.stdout(),
        "levels 0 1 1 0 domain 0 0 extra pop -1\nexternal 0 0 0 pop 0 43 0 42 -1 99 0\n"
    );
    let t = r.trace();
    check_invariants(&t);
    let main = t.header.pid as u64;
    let worker = *t
        .threads
        .keys()
        .find(|&&tid| tid != main)
        .expect("the worker thread's events");
    assert_eq!(t.threads.len(), 2, "{:?}", t.threads.keys());

    // Every event of the main thread, in order, with its texts.
    let text = |id: u32| t.nvtx_strings.get(&id).cloned().unwrap_or_default();
    let events: Vec<(NvtxKind, String, u32, u32, u64)> = t.threads[&main]
        .nvtx
        .iter()
        .map(|e| (e.kind, text(e.message), e.domain, e.category, e.value))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        events,
        vec![
            (NvtxKind::NameCategory, s("io"), 0, 3, 0),
            (NvtxKind::DomainCreate, s("app"), 1, 0, 0),
            (NvtxKind::RegisterString, s("registered step"), 1, 0, 0),
            (NvtxKind::Push, s("outer"), 0, 0, 0),
            (NvtxKind::Push, s("inner"), 0, 3, 1),
            (NvtxKind::Mark, s("here"), 0, 0, 0),
            (NvtxKind::Pop, s(""), 0, 0, 1),
            (NvtxKind::Pop, s(""), 0, 0, 0),
            (NvtxKind::Push, s("registered step"), 1, 0, 0),
            (NvtxKind::Pop, s(""), 1, 0, 0),
            (NvtxKind::Start, s("async"), 0, 0, 1),
            (NvtxKind::Push, s("lib range"), 0, 0, 0),
            (NvtxKind::Pop, s(""), 0, 0, 0),
            (NvtxKind::ExternalPush, s(""), 0, 2, 42),
            (NvtxKind::ExternalPush, s(""), 0, 2, 43),
            (NvtxKind::ExternalPush, s(""), 0, 7, 5),
            (NvtxKind::ExternalPop, s(""), 0, 2, 43),
            (NvtxKind::ExternalPop, s(""), 0, 2, 42),
            (NvtxKind::ExternalPop, s(""), 0, 7, 5),
        ]
    );
    // The inner range's colour and payload (an int64 of -5).
    let inner: &NvtxEvent = &t.threads[&main].nvtx[4];
    assert_eq!(
        (
            inner.color_type,
            inner.color,
            inner.payload_type,
            inner.payload as i64
        ),
        (1, 0xFF00_FF00, 2, -5)
    );
    let events: Vec<(NvtxKind, String, u64)> = t.threads[&worker]
        .nvtx
        .iter()
        .map(|e| (e.kind, text(e.message), e.value))
        .collect();
    assert_eq!(
        events,
        vec![
            (NvtxKind::NameThread, s("nvtx worker"), worker),
            (NvtxKind::End, s(""), 1),
            (NvtxKind::Push, s("worker range"), 0),
            (NvtxKind::Pop, s(""), 0),
        ]
    );
    for th in t.threads.values() {
        assert!(th.nvtx.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        assert!(th
            .nvtx
            .iter()
            .all(|e| e.time_ns >= t.header.start.monotonic_ns));
    }

    // The ranges rebuilt: the async one started on main and ended on the worker.
    let rs = ranges(&t);
    assert_eq!((rs.open, rs.marks), (0, 1));
    let got: Vec<(String, String, u64, u64, Option<u64>, u32)> = rs
        .ranges
        .iter()
        .map(|x: &NvtxRange| {
            assert!(x.start_ns <= x.end_ns);
            (
                x.domain.clone(),
                x.name.clone(),
                x.tid,
                x.end_tid,
                x.level,
                x.category,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (s("(default)"), s("outer"), main, main, Some(0), 0),
            (s("(default)"), s("inner"), main, main, Some(1), 3),
            (s("app"), s("registered step"), main, main, Some(0), 0),
            (s("(default)"), s("async"), main, worker, None, 0),
            (
                s("(default)"),
                s("worker range"),
                worker,
                worker,
                Some(0),
                0
            ),
            (s("(default)"), s("lib range"), main, main, Some(0), 0),
        ]
    );
    let (rows, open, marks) = nvtx_summary(std::slice::from_ref(&t));
    assert_eq!((rows.len(), open, marks), (6, 0, 1));
    assert!(rows.iter().all(|r| r.count == 1));

    // The report's section.
    let table =
        rtrace_collector::render_report(std::slice::from_ref(&t), rtrace_collector::Format::Table);
    assert!(
        table.contains("NVTX ranges: 6 ranges, 6 names, 0 open, 1 mark\n"),
        "{table}"
    );
}

#[test]
fn rtrace_nvtx_0_leaves_nvtx_alone() {
    let r = run(Spec::traced("nvtx").env(&[("RTRACE_NVTX", "0")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout(),
        "levels -2 -2 -2 -2 domain -2 -2 extra pop -2\nexternal 0 0 0 pop 0 43 0 42 -1 99 0\n"
    );
    // Only the external ids, pushed through rtrace's own functions, are recorded.
    let t = r.trace();
    let kinds: Vec<NvtxKind> = t
        .threads
        .values()
        .flat_map(|th| th.nvtx.iter().map(|e| e.kind))
        .collect();
    assert_eq!(
        kinds,
        vec![
            NvtxKind::ExternalPush,
            NvtxKind::ExternalPush,
            NvtxKind::ExternalPush,
            NvtxKind::ExternalPop,
            NvtxKind::ExternalPop,
            NvtxKind::ExternalPop,
        ]
    );
}

/// docs/examples/external_correlation.py, run under rtrace, pushes and pops its ids through
/// librtrace.so's C ABI; the report lists them.
#[test]
fn the_python_example_records_its_external_ids() {
    let dir = fresh_dir("python-external");
    let output = std::process::Command::new("python3")
        .arg(root().join("docs/examples/external_correlation.py"))
        .env("LD_PRELOAD", librtrace())
        .env("RTRACE_OUTPUT", dir.join("trace-%p.bin"))
        .env_remove("RTRACE_DISABLE")
        .env_remove("RTRACE_NVTX")
        .output()
        .expect("python3");
    let r = Run { output, dir };
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "under rtrace\n");
    let t = r.trace();
    let rows = rtrace_collector::nvtx::external_summary(std::slice::from_ref(&t));
    let got: Vec<(u32, u64, u64)> = rows.iter().map(|x| (x.kind, x.id, x.calls)).collect();
    assert_eq!(got, vec![(2, 100, 0), (2, 101, 0), (2, 102, 0)]);
}

/// The pattern of a PyTorch training step (tests/programs/nvtx_threads.c): `backward` on the
/// main thread holds, in the process view, what the "autograd" thread launched while the main
/// thread waited, and not what the "loader" thread launched inside its own range; the same for
/// the external ids. Kernel times are simcuda's (fill_u32 500 ns, empty 1000 ns).
#[test]
fn ranges_and_ids_get_other_threads_launches_in_the_process_view() {
    let r = run(Spec::traced("nvtx_threads").env(&[("RTRACE_GPU_ACTIVITY", "1")]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "nvtx_threads ok calls=21\n");
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(t.threads.len(), 3, "{:?}", t.threads.keys());
    let json =
        rtrace_collector::render_report(std::slice::from_ref(&t), rtrace_collector::Format::Json);
    let row = |name: &str| -> &str {
        let key = format!("\"name\":\"{name}\",");
        json.lines()
            .find(|l| l.contains(&key) && l.contains("\"process_gpu_records\""))
            .unwrap_or_else(|| panic!("no row {name} in {json}"))
    };
    // (thread view, process view): GPU records, GPU time, and what came while innermost.
    for (name, thread, process) in [
        ("step", (2, 1_000, 2, 1_000), (5, 4_000, 2, 1_000)),
        ("backward", (0, 0, 0, 0), (3, 3_000, 3, 3_000)),
        ("load", (2, 1_000, 2, 1_000), (2, 1_000, 2, 1_000)),
    ] {
        let want = format!(
            "\"gpu_records\":{},\"gpu_ns\":{},\"own_gpu_records\":{},\"own_gpu_ns\":{},\
             \"process_gpu_records\":{},\"process_gpu_ns\":{},\"process_own_gpu_records\":{},\
             \"process_own_gpu_ns\":{}}}",
            thread.0, thread.1, thread.2, thread.3, process.0, process.1, process.2, process.3
        );
        let line = row(name).trim_end_matches(',');
        assert!(line.ends_with(&want), "{name}: {line}, want {want}");
    }
    // 42 (main): its 2 launches, with the autograd thread's 4 calls (3 launches); 7 (loader):
    // its thread's 3 calls (2 launches) only.
    let pid = t.header.pid;
    for (id, thread, process) in [
        (42, (2, 2, 1_000), (6, 5, 4_000)),
        (7, (3, 2, 1_000), (3, 2, 1_000)),
    ] {
        let want = format!(
            "{{\"pid\":{pid},\"kind\":2,\"id\":{id},\"calls\":{},\"gpu_records\":{},\"gpu_ns\":{},\
             \"process_calls\":{},\"process_gpu_records\":{},\"process_gpu_ns\":{}}}",
            thread.0, thread.1, thread.2, process.0, process.1, process.2
        );
        assert!(json.contains(&want), "{want} in {json}");
    }
    // The export's projected GPU track draws the process view: `backward` spans the autograd
    // thread's three back-to-back 1000 ns kernels (the range itself lasts milliseconds).
    let out = r.dir.join("nvtx_threads.json");
    let files: Vec<_> = std::fs::read_dir(&r.dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    let export = std::process::Command::new(rtrace_bin())
        .args(["export", "--format", "chrome", "-o"])
        .arg(&out)
        .args(&files)
        .output()
        .expect("rtrace export");
    assert!(export.status.success(), "{export:?}");
    let chrome = std::fs::read_to_string(&out).unwrap();
    let projected: Vec<&str> = chrome
        .lines()
        .filter(|l| {
            l.contains("\"cat\":\"nvtx\",\"name\":\"backward\"") && l.contains("\"dur\":3.000,")
        })
        .collect();
    assert_eq!(projected.len(), 1, "{chrome}");
}
