//! `RTRACE_OUTPUT` patterns (`%p` → pid, `%h` → host name, `%q{VAR}` → a variable's value,
//! `%%` → `%`, expanded by `rtrace_format`, as librtrace.so expands them): the files in a
//! pattern's directory that a run may have written, under a name the pattern makes or beside
//! one ([`rtrace_format::collision_path`]).

use rtrace_format::{collision_base, expand_output, pattern_pieces, process_var, PatternPiece};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// An absolute output pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputPattern {
    bytes: Vec<u8>,
}

/// A piece of a file-name glob.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    /// `%p`: one or more ASCII digits.
    Pid,
    /// `%q{VAR}`: any bytes (each process may see its own value, e.g. its rank).
    Any,
}

impl OutputPattern {
    /// `pattern`, made absolute against `cwd` when it is relative.
    pub fn new(pattern: &Path, cwd: &Path) -> Self {
        OutputPattern {
            bytes: cwd.join(pattern).into_os_string().into_vec(),
        }
    }

    /// The pattern itself, for `RTRACE_OUTPUT`.
    pub fn as_os_string(&self) -> OsString {
        OsString::from_vec(self.bytes.clone())
    }

    /// The path for process `pid` on host `host`, `%q{VAR}` taking VAR's value in this process
    /// (the traced program inherits it, unless it or a launcher between sets its own).
    pub fn expand(&self, pid: u32, host: &[u8]) -> PathBuf {
        path(expand_output(&self.bytes, pid, host, &process_var))
    }

    /// The directory part with `%h` expanded, and the file-name part as a glob;
    /// `None` when the directory part holds `%p` or `%q{VAR}` (each process may have its own
    /// directory).
    fn split(&self, host: &[u8]) -> Option<(PathBuf, Vec<Token>)> {
        let slash = self.bytes.iter().rposition(|&b| b == b'/')?;
        let (dir, name) = (&self.bytes[..slash.max(1)], &self.bytes[slash + 1..]);
        if varies(dir) {
            return None;
        }
        let mut tokens = Vec::new();
        let mut lit = Vec::new();
        for piece in pattern_pieces(name) {
            match piece {
                PatternPiece::Literal(bytes) => lit.extend_from_slice(bytes),
                PatternPiece::Host => lit.extend_from_slice(host),
                PatternPiece::Pid => {
                    tokens.push(Token::Literal(std::mem::take(&mut lit)));
                    tokens.push(Token::Pid);
                }
                PatternPiece::Var(_) => {
                    tokens.push(Token::Literal(std::mem::take(&mut lit)));
                    tokens.push(Token::Any);
                }
            }
        }
        tokens.push(Token::Literal(lit));
        tokens.retain(|t| *t != Token::Literal(Vec::new()));
        // `dir` holds no `%p` nor `%q{VAR}`: neither the pid given nor variables are used.
        Some((path(expand_output(dir, 0, host, &|_| None)), tokens))
    }

    /// The regular files (not links) in the pattern's directory whose names the pattern makes,
    /// or a collision name of one, sorted; none when the directory part holds `%p`.
    pub fn candidates(&self, host: &[u8]) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let Some((dir, tokens)) = self.split(host) else {
            return files;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return files;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.as_bytes();
            let beside = || collision_base(name).is_some_and(|(base, _)| matches(&tokens, &base));
            if !matches(&tokens, name) && !beside() {
                continue;
            }
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                files.push(entry.path());
            }
        }
        files.sort();
        files
    }
}

fn path(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsString::from_vec(bytes))
}

/// Whether a part of a pattern holds `%p` (a `%%p` is a literal `%p`, not a pid).
pub(super) fn holds_pid(bytes: &[u8]) -> bool {
    pattern_pieces(bytes).any(|piece| piece == PatternPiece::Pid)
}

/// Whether a part of a pattern holds `%p` or `%q{VAR}`: what may differ between processes.
pub(super) fn varies(bytes: &[u8]) -> bool {
    pattern_pieces(bytes).any(|piece| matches!(piece, PatternPiece::Pid | PatternPiece::Var(_)))
}

/// Whether `name` matches the glob `tokens` (`Pid` = one or more digits).
fn matches(tokens: &[Token], name: &[u8]) -> bool {
    match tokens.split_first() {
        None => name.is_empty(),
        Some((Token::Literal(lit), rest)) => {
            name.starts_with(lit) && matches(rest, &name[lit.len()..])
        }
        Some((Token::Pid, rest)) => {
            let digits = name.iter().take_while(|b| b.is_ascii_digit()).count();
            (1..=digits).any(|n| matches(rest, &name[n..]))
        }
        Some((Token::Any, rest)) => (0..=name.len()).any(|n| matches(rest, &name[n..])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_matches() {
        let p = OutputPattern::new(Path::new("out/t-%h-%p.bin"), Path::new("/work"));
        assert_eq!(p.as_os_string(), "/work/out/t-%h-%p.bin");
        assert_eq!(p.expand(42, b"box"), Path::new("/work/out/t-box-42.bin"));
        let (dir, tokens) = p.split(b"box").unwrap();
        assert_eq!(dir, Path::new("/work/out"));
        assert!(matches(&tokens, b"t-box-42.bin"));
        assert!(matches(&tokens, b"t-box-1234567.bin"));
        assert!(!matches(&tokens, b"t-box-.bin"));
        assert!(!matches(&tokens, b"t-box-12x.bin"));
        assert!(!matches(&tokens, b"t-other-12.bin"));
        let fixed = OutputPattern::new(Path::new("/tmp/trace.bin"), Path::new("/work"));
        let (dir, tokens) = fixed.split(b"h").unwrap();
        assert_eq!(dir, Path::new("/tmp"));
        assert!(matches(&tokens, b"trace.bin"));
        assert!(!matches(&tokens, b"trace.bin2"));
        let root = OutputPattern::new(Path::new("/t%p"), Path::new("/"));
        assert_eq!(root.split(b"h").unwrap().0, Path::new("/"));
        let per_dir = OutputPattern::new(Path::new("/tmp/%p/trace.bin"), Path::new("/"));
        assert!(per_dir.split(b"h").is_none());
    }

    #[test]
    fn percent_percent_is_a_percent_sign() {
        let p = OutputPattern::new(Path::new("d%%p/t%%h-%p%.bin"), Path::new("/w"));
        assert_eq!(p.expand(42, b"box"), Path::new("/w/d%p/t%h-42%.bin"));
        let (dir, tokens) = p.split(b"box").unwrap();
        assert_eq!(dir, Path::new("/w/d%p"));
        assert!(matches(&tokens, b"t%h-42%.bin"));
        assert!(!matches(&tokens, b"tbox-42%.bin"));
        assert!(holds_pid(b"/a/%p"));
        assert!(!holds_pid(b"/a/%%p"));
        // The known bug of issue 20: `x%%-%p.bin` names `x%-PID.bin`, and that is what is
        // looked for.
        let p = OutputPattern::new(Path::new("x%%-%p.bin"), Path::new("/w"));
        assert_eq!(p.expand(42, b"h"), Path::new("/w/x%-42.bin"));
        let (_, tokens) = p.split(b"h").unwrap();
        assert!(matches(&tokens, b"x%-42.bin"));
        assert!(!matches(&tokens, b"x%%-42.bin"));
    }

    #[test]
    fn variables_match_any_value() {
        let p = OutputPattern::new(
            Path::new("t-%q{RTRACE_TEST_UNSET_VAR}-%p.bin"),
            Path::new("/w"),
        );
        assert_eq!(p.expand(42, b"h"), Path::new("/w/t--42.bin"));
        let (dir, tokens) = p.split(b"h").unwrap();
        assert_eq!(dir, Path::new("/w"));
        assert!(matches(&tokens, b"t-3-42.bin"));
        assert!(matches(&tokens, b"t--42.bin"));
        assert!(matches(&tokens, b"t-a-b-42.bin"));
        assert!(!matches(&tokens, b"t-3.bin"));
        assert!(varies(b"/d/%q{RANK}"));
        assert!(!varies(b"/d/%%q{RANK}"));
        let per_dir = OutputPattern::new(Path::new("r%q{RANK}/t.bin"), Path::new("/w"));
        assert!(per_dir.split(b"h").is_none());
    }

    #[test]
    fn candidates_are_the_names_the_pattern_makes_and_those_beside_them() {
        let dir = std::env::temp_dir().join(format!("rtrace-pattern-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "rtrace-1.bin",
            "rtrace-2.bin",
            "rtrace-2.1.bin",
            "rtrace-2.0.bin",
            "rtrace-x.1.bin",
            "other.bin",
        ] {
            std::fs::write(dir.join(name), b"x").unwrap();
        }
        std::fs::create_dir(dir.join("rtrace-3.bin")).unwrap();
        std::os::unix::fs::symlink(dir.join("other.bin"), dir.join("rtrace-4.bin")).unwrap();
        let p = OutputPattern::new(Path::new("rtrace-%p.bin"), &dir);
        assert_eq!(
            p.candidates(b"h"),
            vec![
                dir.join("rtrace-1.bin"),
                dir.join("rtrace-2.1.bin"),
                dir.join("rtrace-2.bin")
            ]
        );
        let fixed = OutputPattern::new(Path::new("other.bin"), &dir);
        assert_eq!(fixed.candidates(b"h"), vec![dir.join("other.bin")]);
        let per_dir = OutputPattern::new(Path::new("%p/t.bin"), &dir);
        assert!(per_dir.candidates(b"h").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
