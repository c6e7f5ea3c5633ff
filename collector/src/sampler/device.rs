//! PM sampling on one device: set up (device support, chip, counter availability, the metrics
//! of `rtrace_format::GPU_METRICS` that the chip has and that fit one pass together, tried in
//! that order, the configuration image, `Enable`, `SetConfig`, `Start`), each decode (images
//! filled until CUPTI has no more records, each completed sample's times and values), and the
//! end (`Stop` and the last decode; never `Disable`, which in CUPTI 13.0 finalizes all of
//! CUPTI: the sampler exits instead).

use super::target::{Driver, PmObject, PmTarget};
use crate::metrics::{Cupti, Host, MetricNames};
use rtrace_format::{
    GpuMetricSamples, GpuMetricsSetup, PmTrigger, GPU_METRICS, GPU_METRICS_NOTICE,
};

/// CUPTI's hardware buffer per device: a sample's record is about 5 KB on GH100, so 128 MiB
/// holds about 2.6 s of samples at 10 kHz, many times the time between two decodes.
pub const HARDWARE_BUFFER: usize = 128 << 20;
/// Samples one counter data image holds (62.6 KB each on GH100: 31 MB).
pub const SAMPLES_PER_IMAGE: u32 = 500;
/// Samples of each device's first image, the one kept in the trace (compressed) so that a
/// reader can evaluate other metrics from it: small.
pub const FIRST_IMAGE_SAMPLES: u32 = 64;
/// The interval tried when CUPTI refuses the one asked for: 1 ms.
const FALLBACK_INTERVAL: u64 = 1_000_000;
/// Images decoded in one round at most, per device (so that one device cannot hold the others
/// back): 32 000 samples, 3.2 s at 10 kHz.
const IMAGES_PER_ROUND: usize = 64;

/// Sampling on one device.
pub struct Sampled<'c> {
    pub device: u32,
    object: PmObject,
    host: Host<'c>,
    names: MetricNames,
    /// The configuration image `SetConfig` was given, and the counter availability image the
    /// host object was made with: kept for as long as sampling runs, as CUPTI's own client
    /// keeps them (CUPTI may read them again at each decode: on an H200 the sampler crashed
    /// at its first decode while the configuration image had been freed after `SetConfig`).
    _config: Vec<u8>,
    _availability: Vec<u8>,
    image: Vec<u8>,
    /// CUPTI's time (CLOCK_REALTIME) just before `Start`: the first sample CUPTI gives began
    /// before it (the span since `Enable`) and is left out.
    started: u64,
    /// Samples written so far.
    next: u64,
    /// The first image was kept (then `image` holds [`SAMPLES_PER_IMAGE`]).
    kept_image: bool,
    /// The interval, ns, and CUPTI's end of the last sample written (the samples an overflow
    /// lost are the gap after it).
    interval: u64,
    last_end: u64,
    /// A failed decode was said.
    said: bool,
    /// What the decodes gave, for the notice at the end: decodes, samples completed, samples
    /// left out (they began before `Start`), samples CUPTI could not evaluate.
    pub tally: Tally,
}

/// What one device's decodes gave ([`Sampled::tally`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub decodes: u64,
    pub completed: u64,
    pub before_start: u64,
    pub unevaluated: u64,
}

/// Sets sampling up on `device` at `hz`: the set-up to record and what was refused on the way
/// (an interval, a context needed); `Err`: the notice saying why sampling is off there.
pub fn set_up<'c>(
    cupti: &'c Cupti,
    pm: &PmTarget,
    driver: &Driver,
    device: u32,
    hz: u64,
) -> Result<(Sampled<'c>, GpuMetricsSetup, Vec<String>), String> {
    let off = |e: String| format!("{GPU_METRICS_NOTICE} off on device {device}: {e}");
    // Every CUPTI call on the device with its primary context current, as CUPTI's own PM
    // sampling client makes them (on an H200, Enable and Start without a context succeeded
    // but no sample ever came; with a context made current only before Enable, after the
    // counter availability was read without one, every decode failed).
    driver.use_primary_context(device).map_err(off)?;
    if !pm.supported(cupti, device).map_err(off)? {
        return Err(off("the device does not support PM sampling".into()));
    }
    let chip = pm.chip(cupti, device).map_err(off)?;
    let availability = pm.availability(cupti, device).map_err(off)?;
    // The metrics, greedily: each kept when the chip has it and the set still fits one pass
    // (each try on a host object of its own: a refused name spoils the object).
    let mut kept: Vec<String> = Vec::new();
    for m in GPU_METRICS {
        let mut tried: Vec<&str> = kept.iter().map(String::as_str).collect();
        tried.push(m);
        let fits = cupti
            .pm_host_for_device(&chip, &availability)
            .and_then(|mut h| {
                h.add_metrics(&tried)?;
                h.passes()
            });
        if fits == Ok(1) {
            kept.push(m.to_string());
        }
    }
    if kept.is_empty() {
        return Err(off(format!("chip {chip} has none of the metrics")));
    }
    let refs: Vec<&str> = kept.iter().map(String::as_str).collect();
    let mut host = cupti
        .pm_host_for_device(&chip, &availability)
        .map_err(off)?;
    host.add_metrics(&refs).map_err(off)?;
    let config = host.config_image().map_err(off)?;
    let names = MetricNames::new(&kept).map_err(off)?;
    let mut said = Vec::new();
    let object = pm.enable(cupti, device).map_err(off)?;
    let asked = rtrace_format::gpu_metrics_interval_ns(hz);
    let interval = match pm.set_config(cupti, object, &config, asked, HARDWARE_BUFFER) {
        Ok(()) => asked,
        Err(e) if asked < FALLBACK_INTERVAL => {
            pm.set_config(cupti, object, &config, FALLBACK_INTERVAL, HARDWARE_BUFFER)
                .map_err(off)?;
            said.push(format!(
                "{GPU_METRICS_NOTICE} on device {device}: every {asked} ns refused ({e}): \
                 every {FALLBACK_INTERVAL} ns"
            ));
            FALLBACK_INTERVAL
        }
        Err(e) => return Err(off(e)),
    };
    let bytes = pm
        .image_size(cupti, object, &names, FIRST_IMAGE_SAMPLES)
        .map_err(off)?;
    let started = crate::sys::clock_ns(libc::CLOCK_REALTIME);
    pm.start(cupti, object).map_err(off)?;
    let setup = GpuMetricsSetup {
        device,
        time_ns: crate::sys::clock_ns(libc::CLOCK_MONOTONIC),
        chip,
        metrics: kept,
        interval,
        trigger: PmTrigger::GpuTime,
        hardware_buffer_bytes: HARDWARE_BUFFER as u64,
        samples_per_image: SAMPLES_PER_IMAGE,
    };
    let sampled = Sampled {
        device,
        object,
        host,
        names,
        _config: config,
        _availability: availability,
        image: vec![0u8; bytes],
        started,
        next: 0,
        kept_image: false,
        interval,
        last_end: 0,
        said: false,
        tally: Tally::default(),
    };
    Ok((sampled, setup, said))
}

impl Sampled<'_> {
    /// Decodes what CUPTI holds into batches (`out`), image after image until it has no more
    /// records (at most [`IMAGES_PER_ROUND`]); `to_ours` maps CUPTI's sample times
    /// (CLOCK_REALTIME) onto the trace's clock. A failed decode is said once (`notices`).
    pub fn decode(
        &mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        to_ours: &dyn Fn(u64) -> u64,
        out: &mut Vec<GpuMetricSamples>,
        notices: &mut Vec<String>,
    ) {
        for _ in 0..IMAGES_PER_ROUND {
            let d = match pm.decode(cupti, self.object, &mut self.image) {
                Ok(d) => d,
                Err(e) => {
                    if !self.said {
                        self.said = true;
                        notices.push(format!(
                            "{GPU_METRICS_NOTICE} on device {}: {e} (samples lost)",
                            self.device
                        ));
                    }
                    return;
                }
            };
            self.tally.decodes += 1;
            self.tally.completed += d.completed as u64;
            if let Some(b) = self.samples(cupti, pm, d.completed, d.overflow, to_ours) {
                out.push(b);
            }
            if !self.kept_image {
                // The first image was small, to be kept; the next ones hold more.
                self.kept_image = true;
                match pm.image_size(cupti, self.object, &self.names, SAMPLES_PER_IMAGE) {
                    Ok(bytes) => self.image = vec![0u8; bytes],
                    Err(e) => notices.push(format!(
                        "{GPU_METRICS_NOTICE} on device {}: {e} (images of {FIRST_IMAGE_SAMPLES} \
                         samples)",
                        self.device
                    )),
                }
            }
            if !d.full {
                return;
            }
        }
    }

    /// The completed samples of the image just decoded, each evaluated; those that began
    /// before sampling started are left out.
    fn samples(
        &mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        completed: usize,
        overflow: bool,
        to_ours: &dyn Fn(u64) -> u64,
    ) -> Option<GpuMetricSamples> {
        let mut b = GpuMetricSamples {
            device: self.device,
            time_ns: crate::sys::clock_ns(libc::CLOCK_MONOTONIC),
            first: self.next,
            overflow,
            ..Default::default()
        };
        let mut row = vec![f64::NAN; self.names.len()];
        let mut first_kept = None;
        for i in 0..completed {
            let Ok(raw) = pm.sample_times(cupti, self.object, &self.image, i) else {
                continue;
            };
            if raw.0 < self.started {
                self.tally.before_start += 1;
                continue;
            }
            if self
                .host
                .evaluate_decoded(&self.image, i, &self.names, &mut row)
                .is_err()
            {
                self.tally.unevaluated += 1;
                row.iter_mut().for_each(|v| *v = f64::NAN);
            }
            if first_kept.is_none() {
                first_kept = Some(i);
                b.raw_first = raw;
            }
            b.raw_last = raw;
            b.times.push((to_ours(raw.0), to_ours(raw.1)));
            b.values.extend_from_slice(&row);
        }
        let first = first_kept?;
        // After an overflow, the gap since the last sample written is samples lost.
        if overflow && self.last_end > 0 && b.raw_first.0 > self.last_end {
            b.dropped = (b.raw_first.0 - self.last_end) / self.interval.max(1);
        }
        self.last_end = b.raw_last.1;
        // The first image is kept when the samples left out are only those before the
        // batch's first (row `i` is then range `image_first + i`).
        if !self.kept_image && b.times.len() == completed - first {
            b.counter_data = rtrace_format::pack_counter_data(&self.image);
            b.image_first = first as u32;
        }
        self.next += b.times.len() as u64;
        Some(b)
    }

    /// Stops sampling and decodes the last samples.
    pub fn end(
        mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        to_ours: &dyn Fn(u64) -> u64,
        out: &mut Vec<GpuMetricSamples>,
        notices: &mut Vec<String>,
    ) {
        if let Err(e) = pm.stop(cupti, self.object) {
            notices.push(format!(
                "{GPU_METRICS_NOTICE} on device {}: {e}",
                self.device
            ));
        }
        self.decode(cupti, pm, to_ours, out, notices);
        let t = self.tally;
        notices.push(format!(
            "{GPU_METRICS_NOTICE} on device {}: {} decodes, {} samples completed, {} written, \
             {} left out (begun before Start), {} not evaluated",
            self.device, t.decodes, t.completed, self.next, t.before_start, t.unevaluated
        ));
    }
}
