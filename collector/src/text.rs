//! Small text helpers shared by the report, the export and the command line: byte counts and
//! durations for people, dates, file names and command lines for display, JSON strings. A
//! leaf: it uses nothing else of the crate.

use std::fmt::Write;

/// A file's size for people, [`human_bytes`]; with what it takes on disk where that is under
/// half of it (a trace's GPU buffer regions are holes until CUPTI writes into them):
/// `14.7 MB, 86.0 kB on disk`.
pub fn file_size(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let on_disk = meta.blocks().saturating_mul(512);
    if on_disk < meta.len() / 2 {
        format!(
            "{}, {} on disk",
            human_bytes(meta.len()),
            human_bytes(on_disk)
        )
    } else {
        human_bytes(meta.len())
    }
}

/// A byte count for people: `512 B`, `4.1 kB`, `2.0 MB`, `1.5 GB`, `3.0 TB`
/// (decimal units, one decimal, rounded half up; the unit is the largest that
/// keeps the number ≥ 1).
pub fn human_bytes(bytes: u64) -> String {
    if bytes < 1_000 {
        return format!("{bytes} B");
    }
    let units = [
        (1_000u128, "kB"),
        (1_000_000, "MB"),
        (1_000_000_000, "GB"),
        (1_000_000_000_000, "TB"),
    ];
    for (i, (div, unit)) in units.iter().enumerate() {
        let tenths = (u128::from(bytes) * 10 + div / 2) / div;
        if tenths < 10_000 || i == units.len() - 1 {
            return format!("{}.{} {unit}", tenths / 10, tenths % 10);
        }
    }
    unreachable!("the last unit always returns")
}

/// A duration for people: `532 ns`, `12.3 µs`, `4.0 ms`, `1.5 s` (one decimal,
/// rounded half up; the unit is the largest that keeps the number ≥ 1).
pub fn human_ns(ns: u64) -> String {
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    let units = [(1_000u128, "µs"), (1_000_000, "ms"), (1_000_000_000, "s")];
    for (i, (div, unit)) in units.iter().enumerate() {
        let tenths = (u128::from(ns) * 10 + div / 2) / div;
        if tenths < 10_000 || i == units.len() - 1 {
            return format!("{}.{} {unit}", tenths / 10, tenths % 10);
        }
    }
    unreachable!("the last unit always returns")
}

/// `realtime_ns` (since the Unix epoch) as UTC ISO-8601 with milliseconds,
/// e.g. `2024-05-01T12:34:56.789Z`.
pub fn iso8601_utc(realtime_ns: u64) -> String {
    let secs = realtime_ns / 1_000_000_000;
    let ms = (realtime_ns / 1_000_000) % 1_000;
    let days = (secs / 86_400) as i64;
    let sod = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The last component of `path` (a source file's name, for display); `path` itself when it
/// has none.
pub fn file_name(path: &str) -> String {
    std::path::Path::new(path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string())
}

/// A command line for display: arguments joined by spaces, each quoted for a
/// POSIX shell where it needs to be.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_alphanumeric() || "_-./=:,+@%^".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// `s` as a JSON string, quoted and escaped.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_json_string(&mut out, s);
    out
}

/// Appends `s` to `out` as a JSON string: quoted, with a backslash before `"` and `\`,
/// `\n`, `\r` and `\t` for those control characters and `\u00XX` for the others; everything
/// else as it is.
pub fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An I/O error's message without the ` (os error N)` suffix std adds.
pub fn io_message(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_size_says_what_it_takes_on_disk_when_that_is_less() {
        let dir = std::env::temp_dir().join(format!("rtrace-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Written whole (bytes no file system compresses): its size alone.
        let whole = dir.join("whole");
        let bytes: Vec<u8> = (0..5_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(&whole, &bytes).unwrap();
        assert_eq!(file_size(&std::fs::metadata(&whole).unwrap()), "5.0 kB");
        // A hole of 10 MB: what it takes on disk too.
        let hole = dir.join("hole");
        std::fs::File::create(&hole)
            .unwrap()
            .set_len(10_000_000)
            .unwrap();
        let meta = std::fs::metadata(&hole).unwrap();
        let on_disk = human_bytes(std::os::unix::fs::MetadataExt::blocks(&meta) * 512);
        assert_eq!(file_size(&meta), format!("10.0 MB, {on_disk} on disk"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ns(0), "0 ns");
        assert_eq!(human_ns(999), "999 ns");
        assert_eq!(human_ns(1_000), "1.0 µs");
        assert_eq!(human_ns(12_345), "12.3 µs");
        assert_eq!(human_ns(12_350), "12.4 µs");
        assert_eq!(human_ns(999_949), "999.9 µs");
        assert_eq!(human_ns(999_950), "1.0 ms");
        assert_eq!(human_ns(1_500_000_000), "1.5 s");
        assert_eq!(human_ns(7_200_000_000_000), "7200.0 s");
        assert_eq!(human_ns(u64::MAX), "18446744073.7 s");
    }

    #[test]
    fn byte_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_000), "1.0 kB");
        assert_eq!(human_bytes(4_096), "4.1 kB");
        assert_eq!(human_bytes(999_950), "1.0 MB");
        assert_eq!(human_bytes(2_000_000_000), "2.0 GB");
        assert_eq!(human_bytes(u64::MAX), "18446744.1 TB");
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
        // 2024-02-29T23:59:59.999Z, a leap day.
        assert_eq!(
            iso8601_utc(1_709_251_199_999_000_000),
            "2024-02-29T23:59:59.999Z"
        );
        assert_eq!(
            iso8601_utc(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn escapes_json_strings() {
        assert_eq!(json_string("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\u0001é""#);
        let mut s = String::from("[");
        push_json_string(&mut s, "\r\t\u{1f}");
        assert_eq!(s, r#"["\r\t\u001f""#);
    }

    #[test]
    fn file_names() {
        assert_eq!(file_name("/src/k.cu"), "k.cu");
        assert_eq!(file_name("k.cu"), "k.cu");
        assert_eq!(file_name("/"), "/");
    }

    #[test]
    fn quoting() {
        let args = ["./app", "--n=3", "two words", "it's", ""].map(String::from);
        assert_eq!(shell_join(&args), r#"./app --n=3 'two words' 'it'\''s' ''"#);
    }
}
