//! How a trace's tracing ended and what it lost, in words: its duration, the reason it
//! ended, and the warning for lost records.

use super::{Duration, Trace};

impl Trace {
    /// The latest `end_ns` of any API record.
    pub fn last_record_end_ns(&self) -> Option<u64> {
        self.threads
            .values()
            .flat_map(|t| t.records.iter().map(|r| r.end_ns))
            .max()
    }

    /// How long the process was traced.
    pub fn duration(&self) -> Duration {
        let start = self.header.start.monotonic_ns;
        if let Some(end) = &self.end {
            Duration::ToEnd(end.end.monotonic_ns.saturating_sub(start))
        } else if let Some(last) = self.last_record_end_ns() {
            Duration::ToLastRecord(last.saturating_sub(start))
        } else {
            Duration::Unknown
        }
    }

    /// The warning for the API records the trace lost (None: none lost): how many, why, and,
    /// where a larger buffer would have kept them, what to do. `summary`: adds that the
    /// summaries miss them (the table's words).
    pub fn lost_warning(&self, summary: bool) -> Option<String> {
        match (self.dropped, self.write_error, summary) {
            (0, _, _) => None,
            (n, Some(_), summary) => Some(format!(
                "{n} API records were lost (writing the trace failed: the buffers filled up \
                 with nothing to empty them){}",
                if summary {
                    "; the summary misses them"
                } else {
                    ""
                }
            )),
            (n, None, summary) => Some(format!(
                "{n} API records were lost (a thread's buffer was full); {}try a larger \
                 --buffer-records",
                if summary {
                    "the summary misses them: "
                } else {
                    ""
                }
            )),
        }
    }

    /// Whether the tracer said the file reached the process's file size limit.
    fn reached_size_limit(&self) -> bool {
        let said =
            |n: &rtrace_format::Notice| n.message.starts_with(rtrace_format::SIZE_LIMIT_NOTICE);
        self.notices.iter().any(said)
    }

    /// How tracing ended, where writing the trace failed (a failed write, or the file size
    /// limit reached, and no end record): [`Trace::end_reason`]. None otherwise.
    pub fn write_failure(&self) -> Option<std::borrow::Cow<'_, str>> {
        let failed = self.write_error.is_some() || self.reached_size_limit();
        (self.end.is_none() && failed).then(|| self.end_reason())
    }

    /// How tracing ended, in words.
    pub fn end_reason(&self) -> std::borrow::Cow<'_, str> {
        match (&self.end, self.write_error) {
            (Some(end), _) => end.reason.as_str().into(),
            (None, Some(e)) if e == libc::ENOSPC as u64 => {
                "no end record: the disk was full (what the buffers held was kept)".into()
            }
            (None, Some(e)) => {
                // The system's words, as `strerror` gives them, in lower case: "file too
                // large", "bad file descriptor".
                let error = std::io::Error::from_raw_os_error(e as i32);
                let why = crate::text::io_message(&error).to_lowercase();
                format!(
                    "no end record: writing the trace failed ({why}; what the buffers held \
                     was kept)"
                )
                .into()
            }
            (None, None) if self.reached_size_limit() => {
                "no end record: the trace file reached the process's file size limit (ulimit \
                 -f), and nothing more was written"
                    .into()
            }
            (None, None) => {
                "no end record: the process was killed, crashed or replaced itself (exec), or is \
                 still running"
                    .into()
            }
        }
    }
}
