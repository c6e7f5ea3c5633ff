//! Many threads: every record lands on its own thread's timeline; a full buffer drops records
//! without blocking, and the loss is counted exactly.

use rtrace_tests::*;

#[test]
fn every_thread_recorded_exactly() {
    let r = run(Spec::traced("threads"));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout().trim_end(),
        "threads ok threads=4 per_thread=1000 calls=4036"
    );
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(
        counts(std::slice::from_ref(&t)),
        r.sim_counts().into_values().next().unwrap()
    );
    assert_eq!(t.threads.len(), 5);
    let mut per_thread: Vec<usize> = t.threads.values().map(|th| th.records.len()).collect();
    per_thread.sort();
    assert_eq!(per_thread, vec![4, 1008, 1008, 1008, 1008]);
    assert_eq!(t.end.as_ref().unwrap().threads, 5);
    assert_eq!(t.dropped, 0);
    gpu_checks_reader_agrees(&r.trace_files()[0], &t);
}

/// Full buffers wait for the worker (RTRACE_FULL_WAIT_MS; here its longest, 1 s, so that a busy
/// test machine cannot starve the worker that long): 8 threads x 5000 calls into 64-record rings
/// lose nothing.
#[test]
fn full_buffers_wait_for_the_worker() {
    let env = [
        ("RTRACE_BUFFER_RECORDS", "64"),
        ("RTRACE_FLUSH_MS", "1000"),
        ("RTRACE_FULL_WAIT_MS", "1000"),
    ];
    let r = run(Spec::traced("threads").args(&["8", "5000"]).env(&env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let t = r.trace();
    check_invariants(&t);
    assert_eq!(t.dropped, 0);
    assert_eq!(counts(&[t]).values().sum::<u64>(), 40068);
}

#[test]
fn full_buffers_drop_and_count_without_blocking() {
    // 8 threads x 5000 calls into 64-record rings that never wait, drained every 1000 ms at
    // the latest.
    let env = [
        ("RTRACE_BUFFER_RECORDS", "64"),
        ("RTRACE_FLUSH_MS", "1000"),
        ("RTRACE_FULL_WAIT_MS", "0"),
    ];
    let r = run(Spec::traced("threads").args(&["8", "5000"]).env(&env));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(
        r.stdout().trim_end(),
        "threads ok threads=8 per_thread=5000 calls=40068"
    );
    let t = r.trace();
    check_invariants(&t);
    let recorded: u64 = t.threads.values().map(|th| th.records.len() as u64).sum();
    let end = t.end.as_ref().unwrap();
    assert!(t.dropped > 0, "64-record rings should overflow");
    assert_eq!(
        recorded + t.dropped,
        40068,
        "every call is either recorded or counted as dropped"
    );
    assert_eq!(end.dropped, t.dropped);
    assert_eq!(end.records, recorded);
    // Per thread too.
    let per_thread: u64 = t.threads.values().map(|th| th.dropped).sum();
    assert_eq!(per_thread, t.dropped);
    let report = std::process::Command::new(rtrace_bin())
        .arg("report")
        .arg(&r.trace_files()[0])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains(&format!("dropped records    {}", t.dropped)),
        "{text}"
    );
}

/// A thread's buffer takes memory as it is used: 1,000 live threads that made one call each
/// cost under 64 MiB more than untraced (they cost 2 GB when every buffer was allocated whole).
#[test]
fn a_thousand_live_threads_take_little_memory() {
    let hwm = |r: &Run| -> u64 {
        let line = r.stdout();
        let kb = line
            .split_whitespace()
            .skip_while(|w| *w != "hwm_kb")
            .nth(1);
        kb.unwrap().parse().unwrap()
    };
    let plain = run(Spec::untraced("threads_rss").args(&["1000", "1"]));
    let r = run(Spec::traced("threads_rss").args(&["1000", "1"]));
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert!(
        hwm(&r) < hwm(&plain) + (64 << 10),
        "{} kB traced against {} kB",
        hwm(&r),
        hwm(&plain)
    );
    let t = r.trace();
    check_invariants(&t);
    // cuInit on the main thread, one call on each of the 1,000.
    assert_eq!(t.threads.len(), 1001);
    assert_eq!(counts(&[t]).values().sum::<u64>(), 1001);
}
