//! The JSON shapes the writers of `--format json` share: a key holding a list of objects,
//! one per line, and a value or `null`.

use std::fmt::Write;

/// Writes `,\n"key":[` then each of `items` on its own line, then `]`.
pub(super) fn array<T>(out: &mut String, key: &str, items: &[T], item: impl Fn(&mut String, &T)) {
    out.push(',');
    list(out, key, items, item);
}

/// Writes `\n"key":[` then each of `items` on its own line, then `]`.
pub(super) fn list<T>(out: &mut String, key: &str, items: &[T], item: impl Fn(&mut String, &T)) {
    let _ = write!(out, "\n\"{key}\":[");
    for (i, it) in items.iter().enumerate() {
        out.push_str(if i == 0 { "\n  " } else { ",\n  " });
        item(out, it);
    }
    out.push_str(if items.is_empty() { "]" } else { "\n]" });
}

pub(super) fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("null".to_string(), |v| v.to_string())
}
