//! The page a table report is written on, and the aligned columns of its tables.

use std::fmt;

/// The first column is never cut narrower than this (lines may then be wider than the width).
const MIN_FIRST_COLUMN: usize = 24;

/// A table report being written: its text, and the width its tables are laid out for.
pub(super) struct Page {
    text: String,
    /// The widest line a table is laid out for: the first column is cut to fit (not below
    /// [`MIN_FIRST_COLUMN`]); the others never are.
    width: usize,
}

impl Page {
    /// An empty page whose tables fit in `width` columns.
    pub(super) fn new(width: usize) -> Page {
        Page {
            text: String::new(),
            width,
        }
    }

    pub(super) fn push(&mut self, c: char) {
        self.text.push(c);
    }

    /// Appends `s` with its control characters made harmless ([`visible`]).
    pub(super) fn push_str(&mut self, s: &str) {
        visible(&mut self.text, s);
    }

    /// The text written.
    pub(super) fn into_text(self) -> String {
        self.text
    }
}

impl fmt::Write for Page {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        visible(&mut self.text, s);
        Ok(())
    }
}

/// Appends `s` to `text` as a terminal shows it harmlessly: names come from the traced program
/// (kernels, threads, NVTX strings), and an escape sequence in one would act on the terminal.
/// A tab becomes a space, every other control character but the newline `�`: one character
/// for one, so that the columns stay aligned.
fn visible(text: &mut String, s: &str) {
    if !s.chars().any(|c| c.is_control() && c != '\n') {
        text.push_str(s);
        return;
    }
    text.extend(s.chars().map(|c| match c {
        '\n' => '\n',
        '\t' => ' ',
        c if c.is_control() => '\u{fffd}',
        c => c,
    }));
}

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Align {
    Left,
    Right,
}

/// `rows` under `headers`, two spaces between columns. The first column is
/// cut (ending in `…`) where the line would be wider than the page's width, but not
/// below [`MIN_FIRST_COLUMN`] characters. Columns
/// are aligned as `align` says, those past its end to the right; trailing
/// spaces are dropped.
pub(super) fn columns(out: &mut Page, headers: &[&str], align: &[Align], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let rest: usize = widths[1..].iter().map(|w| w + 2).sum();
    // Cut to fit, but never below a width that still tells names apart.
    let floor = widths[0]
        .min(MIN_FIRST_COLUMN)
        .max(headers[0].chars().count());
    widths[0] = widths[0].min(out.width.saturating_sub(rest)).max(floor);
    let line = |out: &mut Page, cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            let cell = if i == 0 {
                truncate(cell, *w)
            } else {
                cell.to_string()
            };
            let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
            if i > 0 {
                text.push_str("  ");
            }
            match align.get(i).copied().unwrap_or(Align::Right) {
                Align::Left => {
                    text.push_str(&cell);
                    text.push_str(&pad);
                }
                Align::Right => {
                    text.push_str(&pad);
                    text.push_str(&cell);
                }
            }
        }
        out.push_str(text.trim_end_matches(' '));
        out.push('\n');
    };
    line(out, &mut headers.iter().copied());
    for row in rows {
        line(out, &mut row.iter().map(String::as_str));
    }
}

/// `one` when `n` is 1, else `many`.
pub(super) fn plural<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `s` cut to `width` characters, the last one replaced by `…` when cut.
fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_do_not_reach_the_terminal() {
        let mut page = Page::new(80);
        columns(
            &mut page,
            &["name", "n"],
            &[Align::Left],
            &[
                vec!["k\x1b[31mRED".into(), "1".into()],
                vec!["tab\there\u{9b}".into(), "22".into()],
            ],
        );
        std::fmt::Write::write_str(&mut page, "bell\x07\n").unwrap();
        assert_eq!(
            page.into_text(),
            "name        n\nk\u{fffd}[31mRED   1\ntab here\u{fffd}  22\nbell\u{fffd}\n"
        );
    }

    #[test]
    fn truncates_with_ellipsis() {
        assert_eq!(truncate("cuMemAlloc", 10), "cuMemAlloc");
        assert_eq!(truncate("cuMemAlloc_v2", 10), "cuMemAllo…");
    }
}
