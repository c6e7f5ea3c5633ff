//! Every way a process ends gets its records into the trace; forked children write their own;
//! the program's own signal handling, exit status and output are unchanged.

use rtrace_tests::*;
use std::io::{BufRead, BufReader};
use std::time::Duration;

fn exits(mode: &str) -> Run {
    let plain = run(Spec::untraced("exits").args(&[mode]));
    let r = run(Spec::traced("exits").args(&[mode]));
    assert_eq!(
        r.output.status,
        plain.output.status,
        "{mode}: {}",
        r.stderr()
    );
    if mode != "exit" {
        // (`exit` from a thread: the other thread's count at that moment varies.)
        assert_eq!(r.stdout(), plain.stdout(), "{mode}");
    }
    r
}

fn recorded(r: &Run) -> u64 {
    counts(&r.traces()).values().sum()
}

#[test]
fn return_from_main() {
    let r = exits("return");
    assert_eq!(r.code(), Some(0));
    assert_eq!(r.stdout().trim_end(), "exits mode=return calls=106");
    assert_eq!(recorded(&r), 106);
    assert_eq!(r.trace().end.unwrap().reason, "exit");
    assert_eq!(
        counts(&r.traces()),
        r.sim_counts().into_values().next().unwrap()
    );
}

#[test]
fn underscore_exit() {
    let r = exits("_exit");
    assert_eq!(r.code(), Some(4));
    assert_eq!(recorded(&r), 106);
    assert_eq!(r.trace().end.unwrap().reason, "_exit");
}

#[test]
fn exit_from_another_thread_while_calls_go_on() {
    let r = exits("exit");
    assert_eq!(r.code(), Some(3));
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(t.end.as_ref().unwrap().reason, "exit");
    let printed: u64 = r
        .stdout()
        .trim_end()
        .rsplit_once("calls=")
        .unwrap()
        .1
        .parse()
        .unwrap();
    // Everything the program had counted when it called exit was recorded (it may go on
    // calling until the process is gone).
    assert!(recorded(&r) >= printed, "{} < {printed}", recorded(&r));
}

#[test]
fn sigterm_with_default_disposition() {
    let r = exits("sigterm");
    assert_eq!(
        r.signal(),
        Some(libc::SIGTERM),
        "the process still dies of the signal"
    );
    assert_eq!(recorded(&r), 106);
    assert_eq!(r.trace().end.unwrap().reason, "signal 15");
}

#[test]
fn sigint_with_default_disposition() {
    let r = exits("sigint");
    assert_eq!(r.signal(), Some(libc::SIGINT));
    assert_eq!(recorded(&r), 106);
    assert_eq!(r.trace().end.unwrap().reason, "signal 2");
}

#[test]
fn signal_installs_what_glibc_would() {
    let plain = run(Spec::untraced("exits").args(&["signal-flags"]));
    let r = run(Spec::traced("exits").args(&["signal-flags"]));
    let want = "signal 10: restart=1 self-blocked=1 handler=1\nsignal 15: restart=1 self-blocked=1 handler=1\n";
    assert_eq!(plain.stdout(), want);
    assert_eq!(r.stdout(), want);
}

#[test]
fn program_sigint_handler_sees_sig_dfl_and_runs() {
    let r = exits("sigint-handler");
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(r.stdout(), "handled\nexits mode=sigint-handler calls=116\n");
    assert_eq!(recorded(&r), 116);
    assert_eq!(r.trace().end.unwrap().reason, "exit");
}

#[test]
fn fork_child_writes_its_own_trace_and_nothing_twice() {
    let plain = run(Spec::untraced("fork"));
    let r = run(Spec::traced("fork"));
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.code(), Some(0));
    let traces = r.traces();
    assert_eq!(traces.len(), 2, "{:?}", r.trace_files());
    let parent = traces
        .iter()
        .find(|t| t.header.forked_from.is_none())
        .unwrap();
    let child = traces
        .iter()
        .find(|t| t.header.forked_from.is_some())
        .unwrap();
    assert_eq!(child.header.forked_from, Some(parent.header.pid));
    assert_eq!(child.header.ppid, parent.header.pid);
    let sim = r.sim_counts();
    assert_eq!(
        counts(std::slice::from_ref(parent)),
        sim[&parent.header.pid]
    );
    assert_eq!(counts(std::slice::from_ref(child)), sim[&child.header.pid]);
    assert_eq!(
        counts(std::slice::from_ref(parent)).values().sum::<u64>(),
        26
    );
    assert_eq!(
        counts(std::slice::from_ref(child)).values().sum::<u64>(),
        31
    );
    // No correlation id appears in both: nothing written twice.
    let ids = |t: &rtrace_collector::Trace| -> std::collections::HashSet<(u64, u64)> {
        records(t)
            .iter()
            .map(|(_, r)| (r.start_ns, r.correlation))
            .collect()
    };
    assert!(ids(parent).is_disjoint(&ids(child)));
}

#[test]
fn killed_process_leaves_a_readable_trace() {
    let dir = fresh_dir("killme");
    let spec = Spec::traced("killme").env(&[("RTRACE_FLUSH_MS", "20")]);
    let mut child = command(&spec, &dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    assert_eq!(files.len(), 1);
    let t = rtrace_collector::load_trace(&files[0]).unwrap();
    // Killed between chunks or in the middle of one: either way, what was written is read.
    assert!(t.end.is_none());
    check_invariants(&t);
    let n: usize = t.threads.values().map(|th| th.records.len()).sum();
    assert!(n >= 1000, "only {n} records reached the file");
}

#[test]
fn unwritable_output_leaves_the_program_alone() {
    let plain = run(Spec::untraced("direct"));
    let r = run(Spec::traced("direct").env(&[("RTRACE_OUTPUT", "/nonexistent-dir/t-%p.bin")]));
    assert_eq!(r.stdout(), plain.stdout());
    assert_eq!(r.output.status, plain.output.status);
    assert_eq!(r.stderr(), plain.stderr());
}

#[test]
fn output_is_private_and_symlinks_are_not_followed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_dir("symlink");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    let link = dir.join("link.bin");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let link_s = link.display().to_string();
    let r = run(Spec::traced("direct").env(&[("RTRACE_OUTPUT", &link_s)]));
    assert_eq!(r.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    let r = run(Spec::traced("direct"));
    let mode = std::fs::metadata(&r.trace_files()[0])
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

/// librtrace.so also loads with `dlopen`, without `LD_PRELOAD` (Python's ctypes, a tool's
/// NVTX or CUDA injection path): its thread-locals must not need the static TLS block, whose
/// room for libraries opened later is a few hundred bytes.
#[test]
fn loads_with_dlopen_without_preload() {
    let script = "import ctypes, sys\n\
                  lib = ctypes.CDLL(sys.argv[1])\n\
                  print('loaded', hasattr(lib, 'rtrace_push_external_correlation'))";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(librtrace())
        .env_remove("LD_PRELOAD")
        .env("RTRACE_DISABLE", "1")
        .output()
        .unwrap();
    assert_eq!(
        (
            String::from_utf8_lossy(&out.stdout).as_ref(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        ("loaded True\n", "")
    );
}
