//! `--format csv`: the API summary, one line per function, RFC 4180 quoting.

use crate::summary::FunctionSummary;
use std::fmt::Write;

/// The CSV header line.
pub const HEADER: &str = "function,calls,errors,total_ns,mean_ns,median_ns,min_ns,max_ns";

pub(super) fn render(summary: &[FunctionSummary]) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push('\n');
    for s in summary {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{}",
            field(&s.function),
            s.calls,
            s.errors,
            s.total_ns,
            s.mean_ns,
            s.median_ns,
            s.min_ns,
            s.max_ns
        );
    }
    out
}

/// A CSV field: quoted (with `"` doubled) when it holds `,`, `"` or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(field("cuInit"), "cuInit");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
