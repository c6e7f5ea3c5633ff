//! Capture control: record only part of the run (docs/configuration.md, "Capture").
//!
//! Recording is on while no gate is closed. Gates: the time window (`RTRACE_DELAY`,
//! `RTRACE_DURATION`), the capture range (`cuProfilerStart`..`cuProfilerStop`, or an NVTX range
//! of `RTRACE_NVTX_CAPTURE`) and NVTX exclude ranges (`RTRACE_NVTX_EXCLUDE`). While one is
//! closed the hot path does one more relaxed load and passes the call through unrecorded.
//! GPU records are kept only when linked to a recorded call ([`drop_unlinked`]); kernels can
//! further be chosen by name, skip and count ([`KernelFilter`], in the worker; with
//! `RTRACE_METRICS` the same controls choose the launches kernel profiling profiles instead).

use crate::state;
use rtrace_format::CAPTURE_NOTICE;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Closed gates (bits); 0: recording.
static GATE: AtomicU8 = AtomicU8::new(0);
/// Before `RTRACE_DELAY` or after `RTRACE_DURATION`.
const WINDOW: u8 = 1;
/// Outside the capture range.
const RANGE: u8 = 2;
/// Inside an NVTX exclude range.
const EXCLUDED: u8 = 4;

/// Whether calls are recorded now.
#[inline(always)]
pub fn recording() -> bool {
    GATE.load(Ordering::Relaxed) == 0
}

fn close(bit: u8) {
    GATE.fetch_or(bit, Ordering::AcqRel);
}

fn open(bit: u8) {
    GATE.fetch_and(!bit, Ordering::AcqRel);
}

/// Sets the gates from the configuration and starts the window's timer. Once, at start-up.
/// Returns the notices to write (configuration errors, what is gated).
pub fn configure() -> Vec<String> {
    let c = &state::config().capture;
    let mut gate = 0;
    if c.delay_ns > 0 {
        gate |= WINDOW;
    }
    if c.profiler_api || !c.nvtx_include.is_empty() {
        gate |= RANGE;
    }
    GATE.store(gate, Ordering::Release);
    // A rule without a domain is of the default domain (id 0) from the start.
    for (i, (_, domain)) in c
        .nvtx_include
        .iter()
        .chain(&c.nvtx_exclude)
        .take(RULES)
        .enumerate()
    {
        if domain.is_none() {
            RULE[i].domain_name.store(u32::MAX, Ordering::Release);
            RULE[i].domain.store(0, Ordering::Release);
        }
    }
    if c.delay_ns > 0 || c.duration_ns.is_some() {
        spawn_timer(c.delay_ns, c.duration_ns);
    }
    let mut notices: Vec<String> = c
        .errors
        .iter()
        .map(|e| format!("{CAPTURE_NOTICE}: {e}"))
        .collect();
    if let Some(what) = describe(c) {
        notices.push(format!("{CAPTURE_NOTICE}: {what}"));
    }
    notices
}

/// What the configuration gates and filters, in words; `None` for everything recorded.
fn describe(c: &crate::config::Capture) -> Option<String> {
    let secs = |ns: u64| format!("{}.{:09} s", ns / 1_000_000_000, ns % 1_000_000_000);
    let names = |v: &[(String, Option<String>)]| -> String {
        v.iter()
            .map(|(n, d)| match d {
                Some(d) => format!("{n}@{d}"),
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if c.profiler_api {
        parts.push("recording only between cuProfilerStart and cuProfilerStop".to_string());
    }
    if !c.nvtx_include.is_empty() {
        parts.push(format!(
            "recording only inside NVTX ranges {}",
            names(&c.nvtx_include)
        ));
    }
    if !c.nvtx_exclude.is_empty() {
        parts.push(format!("not inside NVTX ranges {}", names(&c.nvtx_exclude)));
    }
    if c.delay_ns > 0 {
        parts.push(format!("from {} after start", secs(c.delay_ns)));
    }
    if let Some(d) = c.duration_ns {
        parts.push(format!("for {}", secs(d)));
    }
    // With kernel profiling asked for, the kernel controls choose what is profiled instead.
    if state::config().metrics.is_none() {
        parts.extend(describe_kernels(c));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// What the kernel controls choose, in words; `None` for every kernel.
pub fn describe_kernels(c: &crate::config::Capture) -> Option<String> {
    if c.kernel_regex.is_none() && c.kernel_skip == 0 && c.kernel_count.is_none() {
        return None;
    }
    let mut k = String::from("kernels");
    if let Some(r) = &c.kernel_regex {
        k.push_str(&format!(" matching /{r}/"));
    }
    if c.kernel_skip > 0 {
        k.push_str(&format!(", after the first {}", c.kernel_skip));
    }
    if let Some(n) = c.kernel_count {
        k.push_str(&format!(", {n} of them"));
    }
    Some(k)
}

/// Notices of what capture control left out, once GPU activity is converted at exit.
pub fn final_notices() -> Vec<String> {
    let mut out = Vec::new();
    let outside = OUTSIDE.load(Ordering::Relaxed);
    if outside > 0 {
        out.push(format!(
            "{CAPTURE_NOTICE}: {outside} GPU records left out (not launched by a recorded call)"
        ));
    }
    let filtered = FILTERED.load(Ordering::Relaxed);
    if filtered > 0 {
        out.push(format!(
            "{CAPTURE_NOTICE}: {filtered} kernel records left out by the kernel filter"
        ));
    }
    if let Some(e) = FILTER_ERROR.lock().ok().and_then(|mut e| e.take()) {
        out.push(format!("{CAPTURE_NOTICE}: {e}; every kernel kept"));
    }
    out
}

/// Opens the window after `delay`, closes it for good `duration` later.
fn spawn_timer(delay: u64, duration: Option<u64>) {
    let spawned = crate::thread::spawn_quiet("rtrace-capture", 64 << 10, move || {
        std::thread::sleep(std::time::Duration::from_nanos(delay));
        open(WINDOW);
        if let Some(d) = duration {
            std::thread::sleep(std::time::Duration::from_nanos(d));
            close(WINDOW);
        }
    });
    if spawned.is_err() {
        // No timer: record from now on rather than never.
        open(WINDOW);
    }
}

/// A call made while not recording: `cuProfilerStart` opens a `cudaProfilerApi` range (and is
/// recorded); `cuInit` is always recorded (GPU activity starts after it). Returns whether to
/// record this call.
#[cold]
pub fn paused_call(function: u32) -> bool {
    use crate::generated::id;
    if function == id::cuProfilerStart && state::config().capture.profiler_api {
        open(RANGE);
        return recording();
    }
    function == id::cuInit
}

/// After a recorded call: `cuProfilerStop` closes a `cudaProfilerApi` range.
#[cold]
pub fn after_stop() {
    if state::config().capture.profiler_api {
        close(RANGE);
    }
}

/// Whether a GPU record with these flags is left out: something gates recording and the
/// record is not linked to a recorded call.
pub fn drop_unlinked(flags: u32) -> bool {
    flags & rtrace_format::FLAG_CORRELATED == 0 && state::config().capture.gates()
}

// ---- NVTX capture and exclude ranges -----------------------------------------------------

/// Rules are the include ranges, then the exclude ones, at most this many in all.
const RULES: usize = 16;

/// One `name@domain` rule, resolved as texts get ids and domains are created.
struct Rule {
    /// The range name's NVTX string id (0: not seen yet).
    name: AtomicU32,
    /// The domain name's string id (0: not seen yet; `u32::MAX`: the default domain).
    domain_name: AtomicU32,
    /// The domain's id (`u32::MAX`: not created yet; 0: the default domain).
    domain: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const UNRESOLVED: Rule = Rule {
    name: AtomicU32::new(0),
    domain_name: AtomicU32::new(0),
    domain: AtomicU32::new(u32::MAX),
};
static RULE: [Rule; RULES] = [UNRESOLVED; RULES];

fn rules() -> (usize, usize) {
    let c = &state::config().capture;
    let include = c.nvtx_include.len().min(RULES);
    (include, (include + c.nvtx_exclude.len()).min(RULES))
}

/// A text got NVTX string id `id`: resolves the rules that name it.
pub fn text_interned(id: u32, text: &str) {
    let c = &state::config().capture;
    // The rules' texts are the configuration's, in RULE's order.
    for (i, (name, domain)) in c
        .nvtx_include
        .iter()
        .chain(&c.nvtx_exclude)
        .take(RULES)
        .enumerate()
    {
        if name == text {
            RULE[i].name.store(id, Ordering::Release);
        }
        if domain.as_deref() == Some(text) {
            RULE[i].domain_name.store(id, Ordering::Release);
        }
    }
}

/// Domain `domain` was created with the name of string id `name`.
pub fn domain_created(domain: u32, name: u32) {
    let (_, n) = rules();
    for rule in &RULE[..n] {
        if rule.domain_name.load(Ordering::Acquire) == name {
            rule.domain.store(domain, Ordering::Release);
        }
    }
}

/// Whether a range of `message` in `domain` matches a rule among `range`.
fn matching(range: std::ops::Range<usize>, domain: u32, message: u32) -> bool {
    matched(range, domain, message).is_some()
}

/// The first rule (index) among `range` that a range of `message` in `domain` matches.
fn matched(range: std::ops::Range<usize>, domain: u32, message: u32) -> Option<usize> {
    let start = range.start;
    if message == 0 {
        return None;
    }
    RULE[range]
        .iter()
        .position(|r| {
            r.name.load(Ordering::Acquire) == message && r.domain.load(Ordering::Acquire) == domain
        })
        .map(|i| start + i)
}

thread_local! {
    /// The push range on this thread that opened the capture range, or an exclude range:
    /// (domain, level).
    static PUSHED_INCLUDE: Cell<Option<(u32, u64)>> = const { Cell::new(None) };
    static PUSHED_EXCLUDE: Cell<Option<(u32, u64)>> = const { Cell::new(None) };
}
/// The start/end range that opened the capture range, or an exclude range (0: none).
static STARTED_INCLUDE: AtomicU64 = AtomicU64::new(0);
static STARTED_EXCLUDE: AtomicU64 = AtomicU64::new(0);

/// An NVTX range begins: a push at `level` (`Some`) or a start with id `id`. Call before the
/// event is recorded (so an opening range's own event is). Returns the capture range's name
/// when this range opens it.
pub fn nvtx_begin(domain: u32, message: u32, level: Option<u64>, id: u64) -> Option<&'static str> {
    let (include, all) = rules();
    if all == 0 {
        return None;
    }
    let mut opened = None;
    let rule = (include > 0 && GATE.load(Ordering::Relaxed) & RANGE != 0)
        .then(|| matched(0..include, domain, message))
        .flatten();
    if let Some(i) = rule {
        opened = state::config()
            .capture
            .nvtx_include
            .get(i)
            .map(|(n, _)| n.as_str());
        match level {
            Some(l) => {
                let _ = PUSHED_INCLUDE.try_with(|p| p.set(Some((domain, l))));
            }
            None => STARTED_INCLUDE.store(id, Ordering::Release),
        }
        open(RANGE);
    }
    if all > include
        && GATE.load(Ordering::Relaxed) & EXCLUDED == 0
        && matching(include..all, domain, message)
    {
        match level {
            Some(l) => {
                let _ = PUSHED_EXCLUDE.try_with(|p| p.set(Some((domain, l))));
            }
            None => STARTED_EXCLUDE.store(id, Ordering::Release),
        }
        close(EXCLUDED);
    }
    opened
}

/// An NVTX range ends: a pop back to `level` (`Some`) or the end of start/end range `id`.
/// Call after the event is recorded (so a closing range's own event is). Returns whether it
/// closes the capture range.
pub fn nvtx_end(domain: u32, level: Option<u64>, id: u64) -> bool {
    let (include, all) = rules();
    if all == 0 {
        return false;
    }
    let ends = |pushed: &'static std::thread::LocalKey<Cell<Option<(u32, u64)>>>,
                started: &AtomicU64| match level {
        Some(l) => pushed
            .try_with(|p| {
                let hit = p.get() == Some((domain, l));
                if hit {
                    p.set(None);
                }
                hit
            })
            .unwrap_or(false),
        None => {
            id != 0
                && started
                    .compare_exchange(id, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
        }
    };
    let closed = include > 0 && ends(&PUSHED_INCLUDE, &STARTED_INCLUDE);
    if closed {
        close(RANGE);
    }
    if all > include && ends(&PUSHED_EXCLUDE, &STARTED_EXCLUDE) {
        open(EXCLUDED);
    }
    closed
}

// ---- kernel filter ------------------------------------------------------------------------

/// Which kernels the kernel controls choose: names matching `RTRACE_KERNEL_REGEX` (demangled,
/// or as they are), then after skipping `RTRACE_KERNEL_SKIP` of them, `RTRACE_KERNEL_COUNT`.
/// The worker's kernel records use it, or, with `RTRACE_METRICS`, kernel profiling's launches.
pub struct KernelFilter {
    regex: Option<regex::Regex>,
    skip: u64,
    count: Option<u64>,
    /// Kernels that matched so far.
    seen: u64,
    /// Key (a name pointer, or a function handle) → whether it matches.
    verdicts: std::collections::HashMap<usize, bool>,
}

/// Whether the kernel controls (regex, skip, count) are set.
fn filters_kernels(c: &crate::config::Capture) -> bool {
    c.kernel_regex.is_some() || c.kernel_skip > 0 || c.kernel_count.is_some()
}

impl KernelFilter {
    /// The filter the configuration asks for; `None` keeps every kernel. An invalid regular
    /// expression is said in `error` and keeps every kernel.
    pub fn from_config(error: &mut Option<String>) -> Option<KernelFilter> {
        let c = &state::config().capture;
        if !filters_kernels(c) {
            return None;
        }
        let regex = match &c.kernel_regex {
            Some(r) => match regex::Regex::new(r) {
                Ok(re) => Some(re),
                Err(e) => {
                    *error = Some(format!(
                        "RTRACE_KERNEL_REGEX: not a regular expression: {e}"
                    ));
                    return None;
                }
            },
            None => None,
        };
        Some(KernelFilter {
            regex,
            skip: c.kernel_skip,
            count: c.kernel_count,
            seen: 0,
            verdicts: Default::default(),
        })
    }

    /// Whether to keep a kernel named `name` (CUPTI's string, `key` its address).
    #[cfg(test)]
    pub fn keep(&mut self, key: usize, name: &str) -> bool {
        self.keep_by(key, || name)
    }

    /// Whether to keep a kernel of `key` (an address that names one kernel for the process's
    /// life); `name` is asked for only the first time a regex must judge `key`. No allocation
    /// once `key` has a verdict.
    pub fn keep_by<N: AsRef<str>>(&mut self, key: usize, name: impl FnOnce() -> N) -> bool {
        let matches = match &self.regex {
            None => true,
            Some(_) => {
                if let Some(&v) = self.verdicts.get(&key) {
                    v
                } else {
                    let v = self.name_matches(name().as_ref());
                    self.verdicts.insert(key, v);
                    v
                }
            }
        };
        matches && {
            let n = self.seen;
            self.seen += 1;
            self.kept(n)
        }
    }

    /// A filter of these controls (tests).
    #[cfg(test)]
    pub fn for_test(regex: Option<&str>, skip: u64, count: Option<u64>) -> KernelFilter {
        KernelFilter {
            regex: regex.map(|r| regex::Regex::new(r).unwrap()),
            skip,
            count,
            seen: 0,
            verdicts: Default::default(),
        }
    }

    /// Whether a kernel named `name` (mangled) matches the regex, demangled or not (true
    /// without one). Changes nothing.
    pub fn name_matches(&self, name: &str) -> bool {
        let Some(re) = &self.regex else {
            return true;
        };
        let demangled = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|s| s.demangle().ok());
        re.is_match(demangled.as_deref().unwrap_or(name)) || re.is_match(name)
    }

    /// Whether a regex judges names (else every kernel matches).
    pub fn has_regex(&self) -> bool {
        self.regex.is_some()
    }

    /// Whether the `n`-th matching kernel (from 0) is kept: past the skipped ones, within the
    /// count.
    pub fn kept(&self, n: u64) -> bool {
        n >= self.skip && self.count.is_none_or(|c| n - self.skip < c)
    }

    /// Whether no matching kernel from the `n`-th on is kept (the count is used up).
    pub fn used_up(&self, n: u64) -> bool {
        self.count.is_some_and(|c| n >= self.skip.saturating_add(c))
    }
}

/// GPU records left out because they were not linked to a recorded call, and kernel records
/// the kernel filter left out.
pub static OUTSIDE: AtomicU64 = AtomicU64::new(0);
pub static FILTERED: AtomicU64 = AtomicU64::new(0);

/// The worker's kernel filter (built on first use; the worker alone takes the lock).
static FILTER: std::sync::Mutex<Option<Option<KernelFilter>>> = std::sync::Mutex::new(None);
/// Why the kernel filter is off, once (for a notice).
pub static FILTER_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Whether capture control chooses which GPU work records to keep (capture ranges, or the
/// kernel filter).
pub fn chooses_gpu_work() -> bool {
    let c = &state::config().capture;
    c.gates() || c.kernel_regex.is_some() || c.kernel_skip != 0 || c.kernel_count.is_some()
}

/// A GPU work record with `flags`: false (and counted) when it is to be left out.
pub fn keep_work(flags: u32) -> bool {
    if drop_unlinked(flags) {
        OUTSIDE.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    true
}

/// A kernel record named `name()` (CUPTI's string at `key`, asked for only when a regex must
/// judge `key` the first time): whether the kernel filter keeps it. With `RTRACE_METRICS` the
/// kernel controls choose what is profiled and every kernel record is kept.
pub fn keep_kernel<N: AsRef<str>>(key: usize, name: impl FnOnce() -> N) -> bool {
    let config = state::config();
    if config.metrics.is_some() || !filters_kernels(&config.capture) {
        return true;
    }
    let Ok(mut f) = FILTER.lock() else {
        return true;
    };
    let filter = f.get_or_insert_with(|| {
        let mut error = None;
        let built = KernelFilter::from_config(&mut error);
        if let (Some(e), Ok(mut slot)) = (error, FILTER_ERROR.lock()) {
            *slot = Some(e);
        }
        built
    });
    match filter {
        None => true,
        Some(filter) => {
            let keep = filter.keep_by(key, name);
            if !keep {
                FILTERED.fetch_add(1, Ordering::Relaxed);
            }
            keep
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KernelFilter;

    #[test]
    fn a_kernel_filter_asks_a_name_once_per_key_and_counts_after_the_regex() {
        let mut f = KernelFilter {
            regex: Some(regex::Regex::new("fill").unwrap()),
            skip: 1,
            count: Some(2),
            seen: 0,
            verdicts: Default::default(),
        };
        let mut asked = Vec::new();
        let mut keep = |key: usize, name: &'static str| {
            f.keep_by(key, || {
                asked.push(key);
                name
            })
        };
        // Launches of functions 1 (fill_u32), 2 (add_u32), 1, 1, 2, 1.
        let kept: Vec<bool> = [
            (1, "fill_u32"),
            (2, "add_u32"),
            (1, ""),
            (1, ""),
            (2, ""),
            (1, ""),
        ]
        .into_iter()
        .map(|(k, n)| keep(k, n))
        .collect();
        assert_eq!(kept, vec![false, false, true, true, false, false]);
        assert_eq!(asked, vec![1, 2]);
        // Mangled names are matched demangled too.
        let mut f = KernelFilter {
            regex: Some(regex::Regex::new(r"^fill\(int\)$").unwrap()),
            skip: 0,
            count: None,
            seen: 0,
            verdicts: Default::default(),
        };
        assert!(f.keep(7, "_Z4filli"));
        assert!(!f.keep(8, "_Z3addi"));
    }
}
