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
}

#[test]
fn full_buffers_drop_and_count_without_blocking() {
    // 8 threads x 5000 calls into 64-record rings, drained every 1000 ms at the latest.
    let env = [("RTRACE_BUFFER_RECORDS", "64"), ("RTRACE_FLUSH_MS", "1000")];
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
