//! A progress line on standard error while long reads go on: `rtrace: reading  45%
//! (245.3 MB of 545.0 MB)`, rewritten in place at most four times a second, shown only when
//! standard error is a terminal and the read has taken half a second, and erased when done.
//! The CLI starts it ([`start`]); [`load_trace`](crate::read::load_trace) counts what it
//! reads ([`Counting`]).

use std::io::{self, IsTerminal, Read, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a read goes on before the line appears.
const DELAY: Duration = Duration::from_millis(500);
/// How often the line is rewritten.
const EVERY: Duration = Duration::from_millis(250);

/// The state of one progress line.
pub struct Meter<W: Write> {
    total: u64,
    done: u64,
    started: Instant,
    last: Option<Instant>,
    out: W,
}

impl<W: Write> Meter<W> {
    pub fn new(total: u64, started: Instant, out: W) -> Self {
        Meter {
            total,
            done: 0,
            started,
            last: None,
            out,
        }
    }

    /// Counts `n` more bytes read at `now`; rewrites the line when it is due.
    pub fn advance(&mut self, n: u64, now: Instant) {
        self.done = self.done.saturating_add(n);
        let due = now.duration_since(self.started) >= DELAY
            && self.last.is_none_or(|l| now.duration_since(l) >= EVERY);
        if due {
            self.last = Some(now);
            let _ = write!(self.out, "\r{}\x1b[K", line(self.done, self.total));
            let _ = self.out.flush();
        }
    }

    /// Erases the line, if it was shown.
    pub fn finish(&mut self) {
        if self.last.take().is_some() {
            let _ = write!(self.out, "\r\x1b[K");
            let _ = self.out.flush();
        }
    }
}

/// The text of the line.
pub fn line(done: u64, total: u64) -> String {
    let done = done.min(total);
    let percent = if total == 0 {
        100
    } else {
        u128::from(done) * 100 / u128::from(total)
    };
    format!(
        "rtrace: reading {percent:>3}% ({} of {})",
        crate::text::human_bytes(done),
        crate::text::human_bytes(total)
    )
}

/// The process's progress line: one for every thread that reads (`rtrace report` reads several
/// traces at once), taken for each buffer's worth read (64 KiB).
static METER: Mutex<Option<Meter<io::Stderr>>> = Mutex::new(None);

fn with_meter(f: impl FnOnce(&mut Option<Meter<io::Stderr>>)) {
    if let Ok(mut m) = METER.lock() {
        f(&mut m);
    }
}

/// Starts a progress line for reading `total` bytes, if standard error is a terminal.
pub fn start(total: u64) {
    if io::stderr().is_terminal() {
        with_meter(|m| *m = Some(Meter::new(total, Instant::now(), io::stderr())));
    }
}

/// Ends the progress line (erasing it).
pub fn finish() {
    with_meter(|m| {
        if let Some(mut meter) = m.take() {
            meter.finish();
        }
    });
}

/// Counts `n` bytes read into the progress line, if one was started.
pub fn advance(n: u64) {
    with_meter(|m| {
        if let Some(meter) = m.as_mut() {
            meter.advance(n, Instant::now());
        }
    });
}

/// A reader that counts what it reads into the progress line, if one was started.
pub struct Counting<R>(pub R);

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        advance(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_appears_after_a_delay_and_is_erased() {
        let t0 = Instant::now();
        let mut out = Vec::new();
        {
            let mut m = Meter::new(2_000_000, t0, &mut out);
            m.advance(500_000, t0 + Duration::from_millis(100));
            m.advance(500_000, t0 + Duration::from_millis(600));
            // Within a quarter second of the last: not rewritten.
            m.advance(100_000, t0 + Duration::from_millis(700));
            m.advance(400_000, t0 + Duration::from_millis(900));
            m.finish();
            m.finish();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\rrtrace: reading  50% (1.0 MB of 2.0 MB)\x1b[K\
             \rrtrace: reading  75% (1.5 MB of 2.0 MB)\x1b[K\
             \r\x1b[K"
        );
        // A quick read shows nothing.
        let mut out = Vec::new();
        let mut m = Meter::new(10, t0, &mut out);
        m.advance(10, t0 + Duration::from_millis(10));
        m.finish();
        assert!(out.is_empty());
        assert_eq!(line(5, 0), "rtrace: reading 100% (0 B of 0 B)");
    }
}
