//! `rtrace record --replay application`: kernel profiling's application replay. The program
//! runs once per replay pass with the same arguments and environment, plus
//! `RTRACE_METRICS_REPLAY=application`, its pass (`RTRACE_REPLAY_PASS`) and a directory the
//! passes share (`RTRACE_REPLAY_DIR`, where librtrace.so keeps the counter data and lists each
//! pass's ranges). The first run says how many passes the metrics cost; each later run's
//! ranges must match the first's (count, names, kernel launches per range). Every pass's trace
//! is written in a temporary directory; the last pass's is moved to the output, or the
//! first's when the runs diverge.

use crate::record::{record, RecordError, RecordOptions, Recording, TraceFile};
use rtrace_format::env;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

/// Librtrace.so's list of one pass's ranges, profiled or not: one per line, `context \t
/// launches \t - \t - \t name` (the third and fourth fields are not read).
fn ranges_file(dir: &Path, pass: u32) -> PathBuf {
    dir.join(format!("ranges.{pass}"))
}

/// One range as a pass lists it: (context, kernel launches, name).
type Range = (String, String, String);

fn read_ranges(dir: &Path, pass: u32) -> Vec<Range> {
    let text = std::fs::read_to_string(ranges_file(dir, pass)).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, '\t').collect();
            let at = |i: usize| f.get(i).copied().unwrap_or("").to_string();
            (at(0), at(1), at(4))
        })
        .collect()
}

/// The passes the first run found the metrics to cost (the most over its contexts); `None`
/// when no range was profiled.
fn passes(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("setup")).ok()?;
    text.lines()
        .filter_map(|l| l.split('\t').nth(1)?.parse().ok())
        .max()
}

/// How pass `pass`'s ranges differ from the first pass's, in words; `None` when they match.
pub fn divergence(first: &[Range], later: &[Range], pass: u32) -> Option<String> {
    let launches = |n: &str| format!("{n} kernel launch{}", if n == "1" { "" } else { "es" });
    for (i, (a, b)) in first.iter().zip(later).enumerate() {
        if a != b {
            let what = if a.2 != b.2 {
                format!("is \"{}\" in pass {pass} but \"{}\" in pass 0", b.2, a.2)
            } else if a.0 != b.0 {
                format!(
                    "(\"{}\") ran on context {} in pass {pass} but {} in pass 0",
                    a.2, b.0, a.0
                )
            } else {
                format!(
                    "(\"{}\") made {} in pass {pass} but {} in pass 0",
                    a.2,
                    launches(&b.1),
                    launches(&a.1)
                )
            };
            return Some(format!("range {} {what}", i + 1));
        }
    }
    match later.len().cmp(&first.len()) {
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(format!(
            "pass {pass} ran range {} (\"{}\"), which pass 0 did not ({} ranges)",
            first.len() + 1,
            later[first.len()].2,
            first.len()
        )),
        std::cmp::Ordering::Less => Some(format!(
            "pass {pass} ended after {} ranges, without range {} (\"{}\") of pass 0",
            later.len(),
            later.len() + 1,
            first[later.len()].2
        )),
    }
}

/// What [`record_replayed`] did.
#[derive(Debug)]
pub struct Replayed {
    /// The last pass's run; its traces moved to the output.
    pub last: Recording,
    /// Runs made (the replay passes).
    pub runs: u32,
}

/// Runs `opts`'s program once per replay pass (`show_output`: the program's stdout and
/// stderr in every pass, not only the first). A divergence is `RecordError::Diverged`, after
/// the first pass's traces were moved to the output.
pub fn record_replayed(opts: &RecordOptions, show_output: bool) -> Result<Replayed, RecordError> {
    let cwd = std::env::current_dir()
        .map_err(|e| RecordError::Setup(format!("the current directory: {e}")))?;
    let output = cwd.join(
        opts.output
            .clone()
            .unwrap_or_else(|| rtrace_format::DEFAULT_OUTPUT.into()),
    );
    let (Some(out_dir), Some(name)) = (output.parent(), output.file_name()) else {
        return Err(RecordError::Setup("--output: not a file pattern".into()));
    };
    if out_dir.as_os_str().to_string_lossy().contains('%') {
        return Err(RecordError::Setup(
            "--replay application: the output's directory cannot hold % patterns".into(),
        ));
    }
    if !out_dir.is_dir() {
        return Err(RecordError::Setup(format!(
            "--output: the directory {} does not exist",
            out_dir.display()
        )));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let state = std::env::temp_dir().join(format!("rtrace-replay-{}-{nanos}", std::process::id()));
    // New and private (0700): a directory already there, anyone's, is not used.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&state)
        .map_err(|e| RecordError::Setup(format!("cannot create {}: {e}", state.display())))?;
    let result = run_passes(opts, show_output, &state, out_dir, name.as_ref());
    let _ = std::fs::remove_dir_all(&state);
    result
}

fn run_passes(
    opts: &RecordOptions,
    show_output: bool,
    state: &Path,
    out_dir: &Path,
    name: &Path,
) -> Result<Replayed, RecordError> {
    let mut total = 1;
    let mut pass = 0;
    let mut first: Vec<TraceFile> = Vec::new();
    loop {
        let dir = state.join(format!("pass-{pass}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| RecordError::Setup(format!("cannot create {}: {e}", dir.display())))?;
        let mut run = opts.clone();
        run.output = Some(dir.join(name));
        run.quiet = pass > 0 && !show_output;
        run.env.extend([
            (env::METRICS_REPLAY.to_string(), "application".to_string()),
            (env::REPLAY_PASS.to_string(), pass.to_string()),
            (env::REPLAY_DIR.to_string(), state.display().to_string()),
        ]);
        let mut rec = record(&run)?;
        if pass == 0 {
            total = passes(state).unwrap_or(1).max(1);
            first = rec.found.traces.clone();
        }
        if let (Some(sig), true) = (rec.status.signal(), pass + 1 < total) {
            let kept = move_all(&first, out_dir)?;
            let kept: Vec<String> = kept.iter().map(|t| t.path.display().to_string()).collect();
            return Err(RecordError::Diverged(format!(
                "application replay: pass {pass}: the program was killed by signal {sig} ({}); the first pass's trace is kept: {}",
                crate::record::signal_name(sig),
                kept.join(", ")
            )));
        }
        let diverged = (pass > 0)
            .then(|| divergence(&read_ranges(state, 0), &read_ranges(state, pass), pass))
            .flatten();
        if let Some(why) = diverged {
            let kept = move_all(&first, out_dir)?;
            let kept: Vec<String> = kept.iter().map(|t| t.path.display().to_string()).collect();
            return Err(RecordError::Diverged(format!(
                "application replay: the runs diverged: {why}; the first pass's trace is kept: {}",
                kept.join(", ")
            )));
        }
        pass += 1;
        if pass >= total {
            rec.found.traces = move_all(&rec.found.traces, out_dir)?;
            return Ok(Replayed {
                last: rec,
                runs: total,
            });
        }
    }
}

/// Moves the traces `files` into `dir`, keeping their names, or beside a name that is taken
/// there ([`rtrace_format::collision_path`]): nothing in `dir` is replaced. The traces as
/// moved.
fn move_all(files: &[TraceFile], dir: &Path) -> Result<Vec<TraceFile>, RecordError> {
    let mut moved = Vec::new();
    for f in files {
        let Some(name) = f.path.file_name() else {
            continue;
        };
        let to = dir.join(name);
        let placed = place_beside(&f.path, &to)
            .map_err(|e| RecordError::Setup(format!("cannot write {}: {e}", to.display())))?;
        let _ = std::fs::remove_file(&f.path);
        moved.push(TraceFile {
            beside: (placed != to).then_some(to),
            path: placed,
            pid: f.pid,
        });
    }
    Ok(moved)
}

/// Puts a copy of `from` at `to`, or beside it where it is taken, without replacing anything
/// (a hard link, or a copy into a file created new with mode 0600); the path used.
fn place_beside(from: &Path, to: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::os::unix::fs::OpenOptionsExt;
    let to_bytes = to.as_os_str().as_bytes();
    for n in 0..=rtrace_format::MAX_COLLISION_SUFFIX {
        let path = match n {
            0 => to.to_path_buf(),
            n => PathBuf::from(std::ffi::OsString::from_vec(rtrace_format::collision_path(
                to_bytes, n,
            ))),
        };
        let r = std::fs::hard_link(from, &path).or_else(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)?;
            std::io::copy(&mut std::fs::File::open(from)?, &mut out).map(drop)
        });
        match r {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
}

#[cfg(test)]
mod tests {
    use super::{divergence, move_all, TraceFile};

    #[test]
    fn moved_traces_go_beside_what_is_there() {
        let base = std::env::temp_dir().join(format!("rtrace-move-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (from, to) = (base.join("pass"), base.join("out"));
        std::fs::create_dir_all(&from).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(to.join("t.bin"), b"theirs").unwrap();
        std::fs::write(from.join("t.bin"), b"ours").unwrap();
        std::fs::write(from.join("u.bin"), b"ours too").unwrap();
        let traces = ["t.bin", "u.bin"].map(|n| TraceFile {
            path: from.join(n),
            pid: 7,
            beside: None,
        });
        let moved = move_all(&traces, &to).unwrap();
        assert_eq!(
            moved,
            vec![
                TraceFile {
                    path: to.join("t.1.bin"),
                    pid: 7,
                    beside: Some(to.join("t.bin"))
                },
                TraceFile {
                    path: to.join("u.bin"),
                    pid: 7,
                    beside: None
                }
            ]
        );
        assert_eq!(std::fs::read(to.join("t.bin")).unwrap(), b"theirs");
        assert_eq!(std::fs::read(to.join("t.1.bin")).unwrap(), b"ours");
        assert_eq!(std::fs::read(to.join("u.bin")).unwrap(), b"ours too");
        assert_eq!(std::fs::read_dir(&from).unwrap().count(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }

    fn r(ctx: &str, launches: &str, name: &str) -> (String, String, String) {
        (ctx.into(), launches.into(), name.into())
    }

    #[test]
    fn divergence_names_the_range_and_the_pass() {
        let first = vec![r("1", "2", "step"), r("1", "3", "step")];
        assert_eq!(divergence(&first, &first.clone(), 1), None);
        assert_eq!(
            divergence(&first, &[r("1", "2", "step"), r("1", "1", "step")], 2).unwrap(),
            "range 2 (\"step\") made 1 kernel launch in pass 2 but 3 kernel launches in pass 0"
        );
        assert_eq!(
            divergence(&first, &[r("1", "2", "step"), r("1", "3", "eval")], 1).unwrap(),
            "range 2 is \"eval\" in pass 1 but \"step\" in pass 0"
        );
        let more = [first.clone(), vec![r("1", "1", "extra")]].concat();
        assert_eq!(
            divergence(&first, &more, 1).unwrap(),
            "pass 1 ran range 3 (\"extra\"), which pass 0 did not (2 ranges)"
        );
        assert_eq!(
            divergence(&first, &first[..1], 3).unwrap(),
            "pass 3 ended after 1 ranges, without range 2 (\"step\") of pass 0"
        );
    }
}
