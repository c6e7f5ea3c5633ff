//! `rtrace gpu-sampler`: GPU metrics over time, sampled by a process of their own beside the
//! traced program (`rtrace record --gpu-metrics` starts it), so that the program never loads
//! CUPTI's PM sampling: in CUDA 13.0, PM sampling inside a traced process hung or crashed it
//! at exit (docs/gpu-metrics.md), and the counters it reads are the whole GPU's anyway, so
//! another process sees the program's work (measured on an H200: tests/gpu/pmsampling_cross.sh).
//!
//! It writes a trace of its own (a header naming it the sampler, with the run's session
//! token; each sampled device's identity, its set-up and its samples, every sample's times on
//! the traces' clock and its values evaluated here; notices on what was not sampled), says
//! `ready` (or `off: why`) on standard output once sampling runs, decodes every round (two
//! fifths of what an image holds, at most 50 ms: [`device::round_ms`]) until standard input
//! ends (`rtrace record` closes it when the program has ended), each device's images evaluated
//! on a thread of its own, then stops, decodes the last samples, ends its trace and exits
//! without CUPTI's own teardown. Rooms: `target.rs` (the foreign calls), `device.rs` (one
//! device's decoding), `evaluator.rs` (its evaluating thread), and here, the process and its
//! trace.

mod device;
mod evaluator;
mod target;

use crate::metrics::Cupti;
use device::Sampled;
use evaluator::Made;
use rtrace_format::{
    collision_path, encode_file_header, encode_value, expand_output, hostname, process_var,
    ChunkHeader, ChunkKind, ClockAnchor, Notice, ProcessEnd, ProcessHeader, DEVICE_ATTRIBUTES,
    GPU_METRICS_NOTICE, GPU_SAMPLER, MAX_COLLISION_SUFFIX, STATUS_TRACE,
};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};
use target::{Driver, PmTarget};

/// What `rtrace gpu-sampler` takes.
#[derive(Clone, Debug)]
pub struct SamplerOptions {
    /// Samples a second.
    pub hz: u64,
    /// The trace's path pattern (as `rtrace record -o`: `%p` is the sampler's pid).
    pub output: PathBuf,
    /// CUPTI to load (else as `rtrace metrics` finds it).
    pub cupti: Option<PathBuf>,
    /// Replace a file at the trace's name instead of writing beside it.
    pub force_overwrite: bool,
}

/// The sampler's trace, written chunk by chunk as it goes.
struct Output {
    file: File,
    path: PathBuf,
}

impl Output {
    /// The trace file at `opts.output` expanded for this process (beside a name that is
    /// taken, unless told to replace it), its header written; named in the run's status
    /// directory, as librtrace.so names its traces, so that `rtrace record` finds it.
    fn create(opts: &SamplerOptions, header: &ProcessHeader) -> Result<Output, String> {
        let name = expand_output(
            opts.output.as_os_str().as_bytes(),
            header.pid,
            header.hostname.as_bytes(),
            &process_var,
        );
        let mut tried = name.clone();
        let mut n = 0;
        let file = loop {
            let mut o = std::fs::OpenOptions::new();
            o.write(true).mode(0o600);
            if opts.force_overwrite {
                o.create(true).truncate(true);
            } else {
                o.create_new(true);
            }
            match o.open(Path::new(std::ffi::OsStr::from_bytes(&tried))) {
                Ok(f) => break f,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < MAX_COLLISION_SUFFIX => {
                    n += 1;
                    tried = collision_path(&name, n);
                }
                Err(e) => {
                    return Err(format!(
                        "cannot create {}: {e}",
                        String::from_utf8_lossy(&tried)
                    ))
                }
            }
        };
        let path = PathBuf::from(std::ffi::OsString::from_vec(tried));
        let mut out = Output { file, path };
        out.write(&encode_file_header(header))?;
        if let Some(dir) = std::env::var_os(rtrace_format::env::STATUS_DIR) {
            let entry = Path::new(&dir).join(format!("{STATUS_TRACE}{}", header.pid));
            let mut line = out.path.as_os_str().as_bytes().to_vec();
            line.push(b'\n');
            // Without it, `rtrace record` still finds the trace by the output pattern.
            let _ = std::fs::write(entry, line);
        }
        Ok(out)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.file
            .write_all(bytes)
            .map_err(|e| format!("writing {}: {e}", self.path.display()))
    }

    fn chunk(&mut self, kind: ChunkKind, payload: &[u8]) -> Result<(), String> {
        let h = ChunkHeader::new(kind, 0, 0, 0, payload);
        let mut bytes = h.encode().to_vec();
        bytes.extend_from_slice(payload);
        self.write(&bytes)
    }

    fn notice(&mut self, message: &str) -> Result<(), String> {
        let n = Notice {
            time_ns: now(),
            message: message.to_string(),
        };
        self.chunk(ChunkKind::Notice, &encode_value(&n))
    }
}

fn now() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}

fn anchor() -> ClockAnchor {
    ClockAnchor {
        monotonic_ns: now(),
        realtime_ns: crate::sys::clock_ns(libc::CLOCK_REALTIME),
    }
}

/// CUPTI's sample times (CLOCK_REALTIME, ns) on the traces' clock (CLOCK_MONOTONIC): the
/// offset between the two, read as the tightest of three back-to-back pairs. Kept from round to
/// round while a new reading stays within [`CLOCK_STEP_NS`] of it (so that samples that follow
/// one another on CUPTI's clock still do on the traces'; a pair read back to back is off by
/// tens of ns), taken anew when it moves more (the real-time clock was stepped, or slewed that
/// far). A time nearer to the traces' clock than to CLOCK_REALTIME is on it already and kept as
/// it is (the two are decades apart).
#[derive(Clone, Copy, Debug, Default)]
struct ClockMap {
    /// CLOCK_MONOTONIC minus CLOCK_REALTIME, ns.
    offset: i128,
    /// CLOCK_REALTIME when it was read.
    real: u64,
}

/// How far a new reading of the clocks' offset may move before it replaces the one kept.
const CLOCK_STEP_NS: i128 = 1_000;

impl ClockMap {
    /// The offset read now, or the one kept when they agree within [`CLOCK_STEP_NS`].
    fn renewed(self) -> ClockMap {
        let mut best = (u64::MAX, 0i128, 0u64);
        for _ in 0..3 {
            let a = now();
            let real = crate::sys::clock_ns(libc::CLOCK_REALTIME);
            let b = now();
            if b - a < best.0 {
                best = (b - a, (a + (b - a) / 2) as i128 - real as i128, real);
            }
        }
        let offset = if self.offset != 0 && (best.1 - self.offset).abs() <= CLOCK_STEP_NS {
            self.offset
        } else {
            best.1
        };
        ClockMap {
            offset,
            real: best.2,
        }
    }

    /// `t` (CUPTI's) on the traces' clock.
    fn to_ours(self, t: u64) -> u64 {
        let ours_then = self.real as i128 + self.offset;
        // Already on the traces' clock (nearer to it than to CLOCK_REALTIME): as it is.
        if (t as i128).abs_diff(ours_then) < t.abs_diff(self.real) as u128 {
            return t;
        }
        (t as i128 + self.offset).max(0) as u64
    }
}

/// The header of the sampler's trace.
fn header() -> ProcessHeader {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    ProcessHeader {
        pid: std::process::id(),
        // The parent's pid, from /proc: `state ppid ...` after the command's name.
        ppid: read("/proc/self/stat")
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0),
        command_line: std::env::args().collect(),
        executable: std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        hostname: hostname(),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        writer_version: format!("{GPU_SAMPLER} {}", env!("CARGO_PKG_VERSION")),
        start: anchor(),
        clock: "CLOCK_MONOTONIC".into(),
        session: std::env::var(rtrace_format::env::SESSION).unwrap_or_default(),
        ..Default::default()
    }
}

/// Whether standard input has ended (what a waiting round reads of it is thrown away).
fn input_ended(wait_ms: i32) -> bool {
    if !crate::sys::stdin_ready(wait_ms) {
        return false;
    }
    let mut buf = [0u8; 256];
    !matches!(io::stdin().read(&mut buf), Ok(n) if n > 0)
}

/// Runs the sampler; what it says on standard output (`ready`, or `off: why`) is for
/// `rtrace record`. Returns only on a failure before sampling started; otherwise the process
/// ends in [`finish`].
pub fn run(opts: &SamplerOptions) -> Result<(), String> {
    let header = header();
    let mut out = Output::create(opts, &header)?;
    let mut sampled = Vec::new();
    let started = start(opts, &mut out, &mut sampled);
    let mut stdout = io::stdout();
    let said = match &started {
        Ok(_) if !sampled.is_empty() => "ready\n".to_string(),
        Ok(_) => "off: no device could be sampled (the trace's notices say why)\n".to_string(),
        Err(e) => format!("off: {e}\n"),
    };
    let _ = stdout
        .write_all(said.as_bytes())
        .and_then(|_| stdout.flush());
    match started {
        Ok((cupti, pm, driver)) => sample(cupti, &pm, &driver, sampled, out),
        Err(e) => {
            let _ = out.notice(&format!("{GPU_METRICS_NOTICE} off: {e}"));
            finish(out, 1)
        }
    }
}

/// Loads the driver and CUPTI and sets sampling up on every device: the trace gets each
/// device's identity and set-up, or the notice saying why it is not sampled.
fn start(
    opts: &SamplerOptions,
    out: &mut Output,
    sampled: &mut Vec<Sampled<'static>>,
) -> Result<(&'static Cupti, PmTarget, Driver), String> {
    let driver = Driver::load()?;
    // Loaded for the life of the process: CUPTI keeps state for it anyway.
    let cupti: &'static Cupti = Box::leak(Box::new(Cupti::load(opts.cupti.as_deref())?));
    let pm = PmTarget::load(cupti)?;
    // The profiler initialized with a context current, as every later call makes it.
    if driver.devices()? > 0 {
        driver.use_primary_context(0)?;
    }
    pm.initialize(cupti)?;
    let ids: Vec<i32> = DEVICE_ATTRIBUTES.iter().map(|&(id, _)| id).collect();
    for d in 0..driver.devices()? {
        if let Ok(info) = driver.info(d, &ids) {
            out.chunk(ChunkKind::DeviceInfo, &encode_value(&info))?;
        }
        match device::set_up(cupti, &pm, &driver, d, opts.hz) {
            Ok((s, setup, said)) => {
                out.chunk(ChunkKind::GpuMetricsSetup, &encode_value(&setup))?;
                out.notice(&format!(
                    "{GPU_METRICS_NOTICE} on device {d}: {}, every {} ns, {} metrics",
                    setup.chip,
                    setup.interval,
                    setup.metrics.len()
                ))?;
                for n in said {
                    out.notice(&n)?;
                }
                sampled.push(s);
            }
            Err(e) => out.notice(&e)?,
        }
    }
    Ok((cupti, pm, driver))
}

/// Decodes every round until standard input ends (each device's images evaluated on a thread
/// of its own), then stops every device, decodes the last samples and ends.
fn sample(
    cupti: &Cupti,
    pm: &PmTarget,
    driver: &Driver,
    mut sampled: Vec<Sampled<'_>>,
    mut out: Output,
) -> ! {
    let write = |out: &mut Output, made: &Receiver<Made>, notices: Vec<String>| {
        for m in made.try_iter() {
            match m {
                Made::Batch(b) if !b.times.is_empty() => {
                    out.chunk(ChunkKind::GpuMetricSamples, &encode_value(&b))?
                }
                Made::Batch(_) => {}
                Made::Notice(n) => out.notice(&n)?,
            }
        }
        notices.iter().try_for_each(|n| out.notice(n))
    };
    // The shortest round any device needs.
    let round = sampled
        .iter()
        .map(|s| device::round_ms(s.interval))
        .min()
        .unwrap_or(50);
    let (made_to, made) = channel();
    let code = std::thread::scope(|scope| {
        let evaluators: Vec<_> = sampled
            .iter_mut()
            .filter_map(|s| s.evaluator(made_to.clone()))
            .map(|e| scope.spawn(move || e.run(cupti, pm)))
            .collect();
        drop(made_to);
        let mut clocks = ClockMap::default();
        let mut next = Instant::now();
        loop {
            // Rounds every `round` ms, however long the last one took.
            next += Duration::from_millis(round);
            let now = Instant::now();
            if next < now {
                next = now;
            }
            if input_ended((next - now).as_millis() as i32) {
                break;
            }
            let mut notices = Vec::new();
            clocks = clocks.renewed();
            let map = |t| clocks.to_ours(t);
            for s in sampled.iter_mut() {
                // Its context current, as for every call on the device.
                let _ = driver.use_primary_context(s.device);
                s.decode(cupti, pm, &map, Duration::ZERO, &mut notices);
            }
            if let Err(e) = write(&mut out, &made, notices) {
                eprintln!("rtrace gpu-sampler: {e}");
                // The decoding sides dropped, so that the evaluators end and the scope can.
                sampled.clear();
                return 1;
            }
        }
        let mut notices = Vec::new();
        clocks = clocks.renewed();
        let map = |t| clocks.to_ours(t);
        let mut ends = Vec::new();
        for s in sampled.drain(..) {
            let _ = driver.use_primary_context(s.device);
            ends.push(s.end(cupti, pm, &map, &mut notices));
        }
        // The evaluators end once their decoding sides are gone.
        for ((device, tally), e) in ends.iter().zip(evaluators) {
            let e = e.join().unwrap_or_default();
            notices.push(device::tally_notice(*device, tally, &e));
        }
        match write(&mut out, &made, notices) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("rtrace gpu-sampler: {e}");
                1
            }
        }
    });
    finish(out, code)
}

/// Ends the trace (its end record, synced) and the process, without CUPTI's teardown.
fn finish(mut out: Output, code: i32) -> ! {
    let end = ProcessEnd {
        end: anchor(),
        reason: "exit".into(),
        ..Default::default()
    };
    let _ = out.chunk(ChunkKind::ProcessEnd, &encode_value(&end));
    let _ = out.file.sync_data();
    crate::sys::exit_now(code)
}

#[cfg(test)]
mod tests {
    use super::ClockMap;

    #[test]
    fn sample_times_are_put_on_the_traces_clock_once() {
        // CLOCK_REALTIME about 1.8e18 while the traces' clock reads 5e9.
        let real = 1_795_596_004_227_443_970u64;
        let map = ClockMap {
            offset: 5_000_000_000 - real as i128,
            real,
        };
        assert_eq!(map.to_ours(real - 2_000_000), 5_000_000_000 - 2_000_000);
        assert_eq!(map.to_ours(real + 10), 5_000_000_010);
        // Already on the traces' clock: as it is.
        assert_eq!(map.to_ours(4_999_999_993), 4_999_999_993);
        // A new reading within a microsecond keeps the offset; the clocks here are read anew.
        let now = ClockMap::default().renewed();
        let kept = ClockMap {
            offset: now.offset + 500,
            ..now
        };
        assert_eq!(kept.renewed().offset, kept.offset);
        let stepped = ClockMap {
            offset: now.offset + 1_000_000,
            ..now
        };
        assert!((stepped.renewed().offset - now.offset).abs() < 1_000_000);
    }
}
