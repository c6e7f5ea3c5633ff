//! Whatever ends a process, what its threads recorded is in its trace, and every call made is
//! recorded or counted as lost (never neither): the rings are pages of the trace file, so a
//! reader finds what no chunk held when the process died. The program's exit status, signal
//! and output are unchanged.

use rtrace_tests::*;

/// Runs `crashes MODE N` untraced and traced: same status and output. Returns the traced run
/// and the calls the program said it made.
fn crash(mode: &str, n: &str) -> (Run, u64) {
    crash_with(mode, n, &[])
}

/// [`crash`] with `env` in the traced run's environment.
fn crash_with(mode: &str, n: &str, env: &[(&str, &str)]) -> (Run, u64) {
    let plain = run(Spec::untraced("crashes").args(&[mode, n]));
    let r = run(Spec::traced("crashes").args(&[mode, n]).env(env));
    assert_eq!(
        r.output.status,
        plain.output.status,
        "{mode}: {}",
        r.stderr()
    );
    assert_eq!(r.stdout(), plain.stdout(), "{mode}");
    let made = r
        .stdout()
        .lines()
        .next()
        .and_then(|l| l.rsplit_once("calls="))
        .map(|(_, c)| c.trim().parse().unwrap())
        .unwrap();
    (r, made)
}

/// The run's traces. A process that ends while its worker writes can leave the last chunk cut
/// short (its entries are still in the rings, rebuilt by the reader): the only damage allowed.
fn traces(r: &Run) -> Vec<rtrace_collector::Trace> {
    r.trace_files()
        .iter()
        .map(|p| {
            let t = rtrace_collector::load_trace(p).unwrap();
            if let Some(d) = &t.damage {
                assert!(
                    d.starts_with("truncated: the file ends inside the chunk"),
                    "{d}"
                );
            }
            t
        })
        .collect()
}

fn trace(r: &Run) -> rtrace_collector::Trace {
    let mut t = traces(r);
    assert_eq!(t.len(), 1, "{:?}", r.trace_files());
    t.remove(0)
}

fn recorded(t: &rtrace_collector::Trace) -> u64 {
    t.threads.values().map(|th| th.records.len() as u64).sum()
}

/// Settings under which the worker writes none of the calls before the process dies (unless
/// the run takes a second): a ring that never gets busy (a quarter of 2^20 slots is more than
/// the 100 006 calls) and a flush period of a second. Every call is then in a ring.
const NOTHING_WRITTEN: [(&str, &str); 2] = [
    ("RTRACE_BUFFER_RECORDS", "1048576"),
    ("RTRACE_FLUSH_MS", "1000"),
];

/// A process that dies before writing its trace's end: every call is in the file, with the
/// default settings (the worker draining the busy ring as the process dies: how many calls a
/// chunk held by then varies) and with none written ([`NOTHING_WRITTEN`]: the calls rebuilt
/// from the rings).
fn everything_kept(mode: &str, signal: i32) {
    everything_kept_with(mode, signal, &[]);
    everything_kept_with(mode, signal, &NOTHING_WRITTEN);
}

/// [`everything_kept`] with `env` in the traced run's environment.
fn everything_kept_with(mode: &str, signal: i32, env: &[(&str, &str)]) {
    let (r, made) = crash_with(mode, "100000", env);
    assert_eq!(made, 100_006);
    assert_eq!(r.signal(), Some(signal), "{mode}");
    let t = trace(&r);
    check_invariants(&t);
    assert!(t.end.is_none(), "{mode}: no end record");
    assert_eq!(recorded(&t) + t.dropped, made, "{mode}");
    if env == NOTHING_WRITTEN {
        assert!(
            t.salvaged > 0,
            "{mode}: the last records came from the rings"
        );
    }
    assert_eq!(
        t.end_reason(),
        "no end record: the process was killed, crashed or replaced itself (exec), or is still running"
    );
}

#[test]
fn abort_keeps_every_record() {
    everything_kept("abort", libc::SIGABRT);
}

#[test]
fn segfault_keeps_every_record() {
    everything_kept("segv", libc::SIGSEGV);
}

#[test]
fn uncaught_exception_keeps_every_record() {
    everything_kept("throw", libc::SIGABRT);
}

#[test]
fn sigkill_keeps_every_record() {
    everything_kept("sigkill", libc::SIGKILL);
}

/// GPU work CUPTI had not handed back when the process was killed is in the trace: CUPTI's
/// buffers are pages of the file. The first 50 kernels (and the setup's memset) CUPTI handed
/// back before the pause, written by the worker; the last 70 were launched just before
/// SIGKILL, each still linked to its launch and named. Those CUPTI still held are untimed: at
/// least the last (nothing ends it before the kill), and all 70 unless a flush of the worker
/// came during the burst, when CUPTI hands back the buffer of the kernels that had ended (on
/// a loaded machine it can: 57 of them once), timed.
#[test]
fn sigkill_keeps_the_gpu_work_cupti_held() {
    let env = [
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_FLUSH_MS", "20"),
        ("CRASHES_KERNELS", "50,70"),
    ];
    let r = run(Spec::traced("crashes").args(&["sigkill", "10"]).env(&env));
    assert_eq!(r.signal(), Some(libc::SIGKILL), "{}", r.stderr());
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(t.memsets.len(), 1);
    use rtrace_format::gpu_region::UntimedKind;
    let untimed: Vec<_> = t
        .untimed
        .iter()
        .filter(|w| w.kind == UntimedKind::Kernel)
        .collect();
    assert!((1..=70).contains(&untimed.len()), "{}", untimed.len());
    assert_eq!(t.untimed.len(), untimed.len());
    assert_eq!(t.kernels.len() + untimed.len(), 120);
    for w in &untimed {
        assert_eq!(t.kernel_display_name(w.name), "empty");
        assert_ne!(w.correlation, 0, "linked to its launch");
    }
    let launches: Vec<u64> = t
        .threads
        .values()
        .flat_map(|th| th.records.iter())
        .filter(|rec| t.function_name(rec.function) == "cuLaunchKernel")
        .map(|rec| rec.correlation)
        .collect();
    assert_eq!(launches.len(), 120);
    let mut linked: Vec<u64> = t.kernels.iter().map(|k| k.correlation).collect();
    linked.extend(untimed.iter().map(|w| w.correlation));
    // The untimed ones are the last launches, in order.
    let latest: Vec<u64> = untimed.iter().map(|w| w.correlation).collect();
    assert_eq!(
        latest,
        launches[120 - untimed.len()..],
        "the latest launches"
    );
    linked.sort_unstable();
    let mut launches = launches;
    launches.sort_unstable();
    assert_eq!(linked, launches, "every launch's kernel, once");
}

/// A buffer CUPTI never handed back (it keeps the one it fills): its 70 kernels, launched 300
/// ms before SIGKILL, are in the trace untimed, each linked to its launch and named (the
/// worker learned the names of the launches it drained).
#[test]
fn sigkill_keeps_the_gpu_work_of_a_buffer_cupti_kept() {
    let env = [
        ("RTRACE_GPU_ACTIVITY", "1"),
        ("RTRACE_FLUSH_MS", "20"),
        ("SIMCUPTI_HOLD_CURRENT", "1"),
        ("CRASHES_KERNELS", "0,70"),
        ("CRASHES_PAUSE_MS", "0"),
        ("CRASHES_END_PAUSE_MS", "300"),
    ];
    let r = run(Spec::traced("crashes").args(&["sigkill", "10"]).env(&env));
    assert_eq!(r.signal(), Some(libc::SIGKILL), "{}", r.stderr());
    let t = trace(&r);
    check_invariants(&t);
    use rtrace_format::gpu_region::UntimedKind;
    let kind = |k| t.untimed.iter().filter(|w| w.kind == k).count();
    assert_eq!((t.kernels.len(), kind(UntimedKind::Kernel)), (0, 70));
    assert_eq!((t.memsets.len(), kind(UntimedKind::Memset)), (0, 1));
    for w in t.untimed.iter().filter(|w| w.kind == UntimedKind::Kernel) {
        assert_eq!(t.kernel_display_name(w.name), "empty");
        assert_ne!(w.correlation, 0, "linked to its launch");
    }
}

/// At a normal end every CUPTI buffer in the file holds nothing: their disk blocks are given
/// back (the file keeps its size; the buffers read as zeros).
#[test]
fn a_normal_end_gives_back_the_gpu_buffers_blocks() {
    use std::os::unix::fs::MetadataExt;
    let env = [("RTRACE_GPU_ACTIVITY", "1"), ("CRASHES_KERNELS", "50,0")];
    let r = run(Spec::traced("crashes").args(&["return", "10"]).env(&env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = trace(&r);
    assert_eq!(t.kernels.len(), 50);
    let path = &r.trace_files()[0];
    let bytes = std::fs::read(path).unwrap();
    let mut reader = rtrace_format::TraceReader::new(&bytes[..]).unwrap();
    let mut regions = 0u64;
    while let Some(c) = reader.next_chunk().unwrap() {
        if c.header.kind == rtrace_format::ChunkKind::GpuBufferRegion {
            regions += 1;
        }
    }
    assert!(regions >= 2, "{regions} GPU buffer regions");
    let m = std::fs::metadata(path).unwrap();
    let on_disk = m.blocks() * 512;
    assert!(
        on_disk + regions * (4 << 20) <= m.len() + (64 << 10),
        "{on_disk} bytes on disk for {} bytes and {regions} regions",
        m.len()
    );
}

#[test]
fn exec_of_another_program_keeps_every_record() {
    let (r, made) = crash("exec-true", "100000");
    assert_eq!(r.code(), Some(0));
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(recorded(&t) + t.dropped, made);
}

#[test]
fn a_normal_end_rebuilds_nothing() {
    let (r, made) = crash("return", "100000");
    assert_eq!(r.code(), Some(0));
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(t.end.as_ref().unwrap().reason, "exit");
    assert_eq!(recorded(&t) + t.dropped, made);
    assert_eq!(t.salvaged, 0);
    assert_eq!(t.end.as_ref().unwrap().records + t.dropped, made);
}

#[test]
fn sigterm_while_threads_call_counts_every_call() {
    let dir = fresh_dir("crashes-counts");
    let counts = dir.join("counts");
    let counts = counts.to_str().unwrap();
    let r = run(Spec::traced("crashes").args(&["threads", "10", counts]));
    assert_eq!(r.signal(), Some(libc::SIGTERM), "{}", r.stderr());
    let bytes = std::fs::read(counts).unwrap();
    let counted: u64 = (0..4)
        .map(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap()))
        .sum();
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(t.end.as_ref().unwrap().reason, "signal 15");
    let main_thread = 16;
    let seen = recorded(&t) + t.dropped - main_thread;
    // A thread counts a call after it returns: up to one call each may be recorded and not
    // yet counted when the process dies.
    assert!(
        (counted..=counted + 4).contains(&seen),
        "recorded + dropped {seen}, counted {counted}"
    );
}

#[test]
fn exec_of_itself_keeps_both_images_records() {
    let (r, made) = crash("exec-self", "100000");
    assert_eq!(r.code(), Some(0));
    assert_eq!(made, 100_006);
    assert_eq!(
        r.stdout(),
        "crashes mode=exec-self calls=100006\ncrashes mode=return calls=100006\n"
    );
    // The same pid: the second image's trace goes beside the first one's, which it leaves whole.
    let mut traces = traces(&r);
    assert_eq!(traces.len(), 2, "{:?}", r.trace_files());
    for t in &traces {
        check_invariants(t);
        assert_eq!(recorded(t) + t.dropped, made);
    }
    // The first image's trace ends at exec, with no end record; the second's at its exit.
    traces.sort_by_key(|t| t.end.is_some());
    assert_eq!(traces[0].end, None);
    assert_eq!(traces[1].end.as_ref().unwrap().reason, "exit");
    assert_eq!(traces[0].header.pid, traces[1].header.pid);
}

/// Runs `crashes ARGS` untraced and traced (with `env`), each not allowed to make files larger
/// than 384 KiB (`ulimit -f`), `SIGXFSZ` at `sigxfsz`: same status and output. The traced run.
fn run_with_file_size_limit(
    args: &[&str],
    env: &[(&str, &str)],
    sigxfsz: libc::sighandler_t,
) -> Run {
    use std::os::unix::process::CommandExt;
    let limit = |cmd: &mut std::process::Command| {
        // SAFETY: async-signal-safe calls only, in the child before exec.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: 384 << 10,
                    rlim_max: 384 << 10,
                };
                libc::signal(libc::SIGXFSZ, sigxfsz);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    };
    let plain_dir = fresh_dir("crashes-fsize-plain");
    let mut plain = command(&Spec::untraced("crashes").args(args), &plain_dir);
    limit(&mut plain);
    let plain = plain.output().unwrap();
    let dir = fresh_dir("crashes-fsize");
    let spec = Spec::traced("crashes").args(args).env(env);
    let mut traced = command(&spec, &dir);
    limit(&mut traced);
    let out = traced.output().unwrap();
    assert_eq!(out.status, plain.status);
    assert_eq!(out.stdout, plain.stdout);
    Run { output: out, dir }
}

/// The file may not grow past 384 KiB: a write past it fails with EFBIG, as a full disk fails
/// with ENOSPC; both runs alike. The thread's buffer (128 KiB) is in the file.
fn a_write_that_fails_keeps_what_the_buffers_hold(sigxfsz: libc::sighandler_t) {
    let env = [("RTRACE_BUFFER_RECORDS", "4096")];
    let r = run_with_file_size_limit(&["return", "50000"], &env, sigxfsz);
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(t.end, None, "the end record could not be written");
    assert_eq!(t.write_error, Some(libc::EFBIG as u64));
    assert_eq!(
        t.end_reason(),
        "no end record: writing the trace failed (file too large; what the buffers held was kept)"
    );
    // Every call is recorded or counted as lost; the rings kept what they could hold.
    assert_eq!(recorded(&t) + t.dropped, 50_006);
    assert!(t.salvaged > 0);
    assert!(std::fs::metadata(&r.trace_files()[0]).unwrap().len() <= 384 << 10);
}

#[test]
fn a_write_past_the_file_size_limit_fails_with_sigxfsz_ignored() {
    a_write_that_fails_keeps_what_the_buffers_hold(libc::SIG_IGN);
}

/// With `SIGXFSZ` at its default (which ends the process), the traced program lives on as the
/// untraced one does: rtrace's file stops growing at the limit instead of crossing it.
#[test]
fn a_write_past_the_file_size_limit_never_raises_sigxfsz() {
    a_write_that_fails_keeps_what_the_buffers_hold(libc::SIG_DFL);
}

/// A thread's buffer larger than the file may grow (the default 2 MiB, under a 384 KiB limit)
/// stays out of it: the file holds no part of it (no chunk cut short, as there was before), and
/// the trace says that the limit was reached. (The calls go to the file in chunks of up to
/// 1 MiB, none of which fits here: the notice is what the trace holds.)
#[test]
fn a_buffer_the_file_size_limit_cannot_hold_leaves_a_readable_trace() {
    let r = run_with_file_size_limit(&["return", "50000"], &[], libc::SIG_DFL);
    assert_eq!(r.code(), Some(0));
    let t = trace(&r);
    check_invariants(&t);
    assert_eq!(t.damage, None);
    let notices: Vec<&str> = t.notices.iter().map(|n| n.message.as_str()).collect();
    // (The notice that the thread's buffer is not in the file may come first, when it was
    // written before the limit was.)
    assert_eq!(
        notices.last(),
        Some(
            &"the trace file reached the process's file size limit (RLIMIT_FSIZE, `ulimit -f`: \
              393216 bytes): nothing more is written"
        ),
        "{notices:?}"
    );
    assert_eq!(
        t.end_reason(),
        "no end record: the trace file reached the process's file size limit (ulimit -f), and \
         nothing more was written"
    );
    assert!(std::fs::metadata(&r.trace_files()[0]).unwrap().len() <= 384 << 10);
}
