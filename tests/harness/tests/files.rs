//! One file per process image, never shared, never foreign: librtrace.so creates its trace
//! exclusively (never through a link, never over a file, FIFO or device already at the name)
//! and beside a taken name (`trace.1.bin`, ...), saying so in the trace; `rtrace record` lists
//! exactly the traces of its run, with their size and record counts, and why tracing turned
//! itself off.

use rtrace_collector::text::file_size;
use rtrace_collector::{load_trace, Trace};
use rtrace_tests::*;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `direct`'s driver calls (tests/programs/README.md).
const DIRECT_CALLS: u64 = 44;

/// Runs `cmd` to its end, or kills it and fails after `limit`.
fn finish_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the program did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Runs `program` traced, writing to the fixed name `output`, within 60 s.
fn traced_to(program: &str, output: &Path, dir: &Path) -> Output {
    let out = output.to_str().unwrap();
    let env = [("RTRACE_OUTPUT", out)];
    let spec = Spec::traced(program).env(&env);
    finish_within(command(&spec, dir), Duration::from_secs(60))
}

/// `rtrace record -o OUTPUT [OPTIONS] -- PROGRAM ARGS`, within 60 s.
fn record(output: &Path, options: &[&str], program: &str, args: &[&str]) -> Output {
    let b = build();
    let mut cmd = Command::new(rtrace_bin());
    cmd.arg("record")
        .arg("-o")
        .arg(output)
        .args(options)
        .arg("--")
        .arg(b.bin.join(program))
        .args(args)
        .env("LD_LIBRARY_PATH", &b.lib)
        .env_remove("LD_PRELOAD")
        .env_remove("RTRACE_DEBUG");
    finish_within(cmd, Duration::from_secs(60))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn api_records(t: &Trace) -> u64 {
    t.threads.values().map(|th| th.records.len() as u64).sum()
}

fn notices(t: &Trace) -> Vec<String> {
    t.notices.iter().map(|n| n.message.clone()).collect()
}

/// The trace at `path`, read whole and undamaged.
fn whole(path: &Path) -> Trace {
    let t = load_trace(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(t.damage, None, "{}", path.display());
    t
}

fn taken_notice(name: &Path, beside: &Path) -> String {
    format!(
        "{} was taken: this trace is written beside it, as {}",
        name.display(),
        beside.display()
    )
}

/// The names in `dir`, sorted, without the simulator's count files.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("simcounts."))
        .collect();
    v.sort();
    v
}

/// `rtrace record`'s options for these tests: API calls only (what they are about is where
/// the files go, not what they hold).
const API_ONLY: [&str; 2] = ["-t", "cuda"];

/// The lines `rtrace record -t cuda` prints for a trace.
fn written_line(path: &Path, api: u64, beside: Option<&Path>) -> String {
    let mut line = format!(
        "rtrace: trace written to {} ({})",
        path.display(),
        file_size(&std::fs::metadata(path).unwrap())
    );
    if let Some(b) = beside {
        line += &format!("; {} was taken, so it went beside it", b.display());
    }
    line += &format!(
        "\nrtrace:   {api} API calls; none dropped\n\
         rtrace:   GPU activity: off (-t cuda)\n\
         rtrace:   NVTX: off (-t cuda)"
    );
    line
}

#[test]
fn a_file_at_the_name_is_left_alone_and_the_trace_goes_beside_it() {
    let dir = fresh_dir("files-regular");
    let name = dir.join("out.bin");
    let theirs = b"someone else's data\n";
    std::fs::write(&name, theirs).unwrap();
    std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o644)).unwrap();
    // As root, the file belongs to another user, as in the attack it stands for.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::chown(&name, Some(65534), Some(65534)).unwrap();
    }
    let before = std::fs::metadata(&name).unwrap();

    let out = traced_to("direct", &name, &dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let after = std::fs::metadata(&name).unwrap();
    assert_eq!(std::fs::read(&name).unwrap(), theirs);
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mode() & 0o7777, 0o644);
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
    assert_eq!(after.ino(), before.ino());
    assert_eq!(after.mtime_nsec(), before.mtime_nsec());

    let beside = dir.join("out.1.bin");
    assert_eq!(names(&dir), ["out.1.bin", "out.bin"]);
    assert_eq!(std::fs::metadata(&beside).unwrap().mode() & 0o7777, 0o600);
    let t = whole(&beside);
    assert_eq!(api_records(&t), DIRECT_CALLS);
    assert_eq!(t.end.as_ref().unwrap().reason, "exit");
    assert_eq!(notices(&t), [taken_notice(&name, &beside)]);
    assert_eq!(t.header.session, "");
}

#[test]
fn a_fifo_at_the_name_is_not_opened_and_the_program_finishes() {
    let dir = fresh_dir("files-fifo");
    let name = dir.join("out.bin");
    let c = std::ffi::CString::new(name.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o622) }, 0);
    let before = std::fs::symlink_metadata(&name).unwrap();

    // A FIFO nobody reads: opening it for writing would block the program forever.
    let out = traced_to("direct", &name, &dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("direct ok"));

    let after = std::fs::symlink_metadata(&name).unwrap();
    assert!(after.file_type().is_fifo());
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.ino(), before.ino());
    let beside = dir.join("out.1.bin");
    assert_eq!(names(&dir), ["out.1.bin", "out.bin"]);
    let t = whole(&beside);
    assert_eq!(api_records(&t), DIRECT_CALLS);
    assert_eq!(notices(&t), [taken_notice(&name, &beside)]);
}

#[test]
fn a_symlink_at_the_name_is_not_followed() {
    let dir = fresh_dir("files-symlink");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"precious\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.join("out.bin");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    // A dangling link: following it would create its target.
    let dangling = dir.join("dangling.bin");
    let target = dir.join("created-through-the-link");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();

    for (name, beside) in [(&link, "out.1.bin"), (&dangling, "dangling.1.bin")] {
        let out = traced_to("direct", name, &dir);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let beside = dir.join(beside);
        let t = whole(&beside);
        assert_eq!(api_records(&t), DIRECT_CALLS);
        assert_eq!(notices(&t), [taken_notice(name, &beside)]);
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious\n");
    assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o7777, 0o640);
    assert_eq!(std::fs::read_link(&link).unwrap(), victim);
    assert_eq!(std::fs::read_link(&dangling).unwrap(), target);
    assert!(!target.exists());
    assert_eq!(
        names(&dir),
        [
            "dangling.1.bin",
            "dangling.bin",
            "out.1.bin",
            "out.bin",
            "victim.txt"
        ]
    );
}

/// Removes the files it names when dropped (what a run as root leaves in /dev).
struct RemoveAfter(Vec<PathBuf>);

impl Drop for RemoveAfter {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn dev_null_as_the_output_is_not_touched() {
    let null = Path::new("/dev/null");
    let before = std::fs::metadata(null).unwrap();
    let out = record(null, &API_ONLY, "direct", &[]);
    let after = std::fs::metadata(null).unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(after.file_type().is_char_device());
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.rdev(), before.rdev());
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));

    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    // As root the trace goes beside /dev/null (as `/dev/null.N`, N the first free number);
    // as another user, /dev is not writable and tracing says why it turned itself off.
    let written = lines[0]
        .strip_prefix("rtrace: trace written to ")
        .and_then(|rest| rest.split_once(' '))
        .map(|(path, _)| PathBuf::from(path));
    let _cleanup = RemoveAfter(written.clone().into_iter().collect());
    match written {
        Some(path) => {
            let n = path.to_str().unwrap().strip_prefix("/dev/null.").unwrap();
            assert!(n.parse::<u32>().unwrap() >= 1, "{}", path.display());
            let m = std::fs::symlink_metadata(&path).unwrap();
            assert!(m.file_type().is_file());
            assert_eq!(m.mode() & 0o7777, 0o600);
            assert_eq!(err, written_line(&path, DIRECT_CALLS, Some(null)) + "\n");
            let t = whole(&path);
            assert_eq!(api_records(&t), DIRECT_CALLS);
            assert_eq!(notices(&t), [taken_notice(null, &path)]);
        }
        None => {
            assert_eq!(lines.len(), 1, "{err}");
            let (prefix, why) = lines[0].split_once(": cannot create ").unwrap();
            assert!(prefix.starts_with("rtrace: tracing turned itself off in process "));
            assert_eq!(why, "/dev/null.1: Permission denied");
        }
    }
}

#[test]
fn exec_keeping_the_pid_writes_a_second_trace_beside_the_first() {
    let dir = fresh_dir("files-exec");
    let out = record(
        &dir.join("rec-%p.bin"),
        &["--flush-ms", "10", "-t", "cuda"],
        "reexec",
        &["10", "20", "500"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "reexec first ok calls=11\nreexec second ok same_pid=1 calls=21\n"
    );
    let files = names(&dir);
    assert_eq!(files.len(), 2, "{files:?}");
    let first = dir.join(&files[1]);
    let second = dir.join(&files[0]);
    let a = whole(&first);
    let b = whole(&second);
    let pid = a.header.pid;
    assert_eq!(b.header.pid, pid);
    assert_eq!(first, dir.join(format!("rec-{pid}.bin")));
    assert_eq!(second, dir.join(format!("rec-{pid}.1.bin")));
    // Neither image's records replace the other's.
    assert_eq!(api_records(&a), 11);
    assert_eq!(a.end, None);
    assert_eq!(notices(&a), Vec::<String>::new());
    assert_eq!(api_records(&b), 21);
    assert_eq!(b.end.as_ref().unwrap().reason, "exit");
    assert_eq!(notices(&b), [taken_notice(&first, &second)]);
    assert_eq!(a.header.session.len(), 32);
    assert_eq!(a.header.session, b.header.session);
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}\n{}\n",
            written_line(&first, 11, None),
            written_line(&second, 21, Some(&first))
        )
    );
}

#[test]
fn forked_children_with_one_fixed_name_each_get_their_own_file() {
    let dir = fresh_dir("files-fork");
    let name = dir.join("trace.bin");
    let out = record(&name, &API_ONLY, "fork", &["10", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let parent = whole(&name);
    let child_path = dir.join("trace.1.bin");
    let child = whole(&child_path);
    assert_eq!(child.header.forked_from, Some(parent.header.pid));
    assert_eq!(api_records(&parent), 26);
    assert_eq!(api_records(&child), 31);
    assert_eq!(notices(&parent), Vec::<String>::new());
    assert_eq!(notices(&child), [taken_notice(&name, &child_path)]);
    let first_run = format!(
        "{}\n{}\n",
        written_line(&name, 26, None),
        written_line(&child_path, 31, Some(&name))
    );
    assert_eq!(text(&out.stderr), first_run);

    // A second run with the same name: its traces go beside the first run's, which are left
    // as they were and not listed.
    let kept = (
        std::fs::read(&name).unwrap(),
        std::fs::read(&child_path).unwrap(),
    );
    let out = record(&name, &API_ONLY, "fork", &["10", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        (
            std::fs::read(&name).unwrap(),
            std::fs::read(&child_path).unwrap()
        ),
        kept
    );
    let (p2, c2) = (dir.join("trace.2.bin"), dir.join("trace.3.bin"));
    assert_eq!(api_records(&whole(&p2)), 26);
    assert_eq!(api_records(&whole(&c2)), 31);
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}\n{}\n",
            written_line(&p2, 26, Some(&name)),
            written_line(&c2, 31, Some(&name))
        )
    );
    assert_eq!(
        names(&dir),
        ["trace.1.bin", "trace.2.bin", "trace.3.bin", "trace.bin"]
    );
}

#[test]
fn a_directory_as_the_output_is_a_clear_error() {
    let dir = fresh_dir("files-dir");
    let out = record(&dir, &[], "direct", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(out.stdout, b"");
    assert_eq!(
        text(&out.stderr),
        format!(
            "rtrace: --output: {} is a directory; give a file name pattern, e.g. {}\n",
            dir.display(),
            dir.join("rtrace-%p.bin").display()
        )
    );
    // librtrace.so alone: tracing turns itself off, the program runs on, and the reason goes
    // to the status directory (the one `rtrace record` would have made).
    let status = fresh_dir("files-dir-status");
    let out_dir = dir.join("sub");
    std::fs::create_dir(&out_dir).unwrap();
    let env = [
        ("RTRACE_OUTPUT", out_dir.to_str().unwrap()),
        ("RTRACE_STATUS_DIR", status.to_str().unwrap()),
    ];
    let out = finish_within(
        command(&Spec::traced("direct").env(&env), &dir),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let entries = names(&status);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].starts_with("off-"));
    assert_eq!(
        std::fs::read_to_string(status.join(&entries[0])).unwrap(),
        format!(
            "cannot create {}: it is a directory (the output names a file)\n",
            out_dir.display()
        )
    );
    assert_eq!(names(&out_dir), Vec::<String>::new());
}

#[test]
fn rtrace_record_says_why_tracing_turned_itself_off() {
    // /proc/ accepts no new files: the library cannot create its trace.
    let out = record(Path::new("/proc/rtrace-test-%p.bin"), &[], "direct", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("direct ok"));
    let err = text(&out.stderr);
    let pid = err
        .strip_prefix("rtrace: tracing turned itself off in process ")
        .and_then(|r| r.split_once(':'))
        .map(|(pid, _)| pid)
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(
        err,
        format!(
            "rtrace: tracing turned itself off in process {pid}: cannot create \
             /proc/rtrace-test-{pid}.bin: No such file or directory\n"
        )
    );
}

/// A program that closes descriptors it did not open and then writes a file of its own: the
/// trace's descriptor sits above the ones programs use (`low`: untouched), and where the
/// program closes it too (`all`), the trace file is opened again by its path; the program's
/// file holds what the program wrote, and the trace every call, with a notice that says so.
#[test]
fn a_program_closing_the_traces_descriptor_keeps_its_own_files() {
    const CALLS: u64 = 1006 + 20000;
    for (mode, notice) in [("low", false), ("all", true)] {
        let dir = fresh_dir(&format!("closefds-{mode}"));
        let mine = dir.join("mine.txt");
        let mine_s = mine.to_str().unwrap();
        let args = [mode, mine_s, "20000"];
        let plain = run(Spec::untraced("closefds").args(&args));
        let expected = format!("closefds mode={mode} fd=3 same=1 calls={CALLS}\n");
        assert_eq!(plain.stdout(), expected);
        std::fs::remove_file(&mine).unwrap();
        let out = dir.join("t.bin");
        let env = [("RTRACE_OUTPUT", out.to_str().unwrap())];
        let spec = Spec::traced("closefds").args(&args).env(&env);
        let r = finish_within(command(&spec, &dir), Duration::from_secs(60));
        assert_eq!(text(&r.stdout), expected, "{mode}: {}", text(&r.stderr));
        assert_eq!(r.status.code(), Some(0));
        assert_eq!(std::fs::read(&mine).unwrap(), b"hello\n");
        let t = whole(&out);
        assert_eq!(api_records(&t), CALLS, "{mode}");
        assert_eq!(t.end.as_ref().map(|e| e.reason.as_str()), Some("exit"));
        let said = notices(&t).iter().any(|n| {
            n == "the program closed or replaced the trace file's descriptor: the file was \
                  opened again by its path, and nothing was written to the program's files"
        });
        assert_eq!(said, notice, "{mode}: {:?}", notices(&t));
    }
}
