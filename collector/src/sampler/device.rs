//! PM sampling on one device: set up (device support, chip, counter availability, the metrics
//! of `rtrace_format::GPU_METRICS` that the chip has and that fit one pass together, tried in
//! that order, the configuration image, `Enable`, `SetConfig`, `Start`), each decode (images
//! filled until CUPTI has no more records, each completed sample's times and values, the
//! samples lost counted), and the end (`Stop` and the last decode; never `Disable`, which in
//! CUPTI 13.0 finalizes all of CUPTI: the sampler exits instead).
//!
//! What CUPTI 13.0 does when a decode fills the image (measured on an H200, driver 580): the
//! decode stops at `COUNTER_DATA_FULL` and the samples that did not fit are gone; the next
//! decode goes on after them, some of its first samples with both times 0. So every image
//! holds several rounds of samples ([`samples_per_image`], [`round_ms`]), one size for every
//! image (CUPTI is asked for one size only), and the samples lost are counted from the gaps
//! between the samples written.

use super::evaluator::{EvalTally, Evaluator, Made, Taken};
use super::target::{Driver, PmObject, PmTarget};
use crate::metrics::{Cupti, Host, MetricNames};
use rtrace_format::{
    GpuMetricSamples, GpuMetricsSetup, PmTrigger, GPU_METRICS, GPU_METRICS_NOTICE,
};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::time::Instant;

/// CUPTI's hardware buffer per device: a sample's record is about 5 KB on GH100, so 128 MiB
/// holds about 2.6 s of samples at 10 kHz, many times the time between two decodes.
pub const HARDWARE_BUFFER: usize = 128 << 20;
/// The time one image holds, ms, where the image is not capped: two and a half rounds of
/// decoding. (Initializing an image costs more than its size says: on an H200, 0.6 ms for
/// 100 samples, 1.8 ms for 250, 15.5 ms for 1000.)
const IMAGE_MS: u64 = 50;
/// The most samples an image holds (62.6 KB each on GH100: 62.6 MB), the fewest.
const MAX_SAMPLES_PER_IMAGE: u64 = 1000;
const MIN_SAMPLES_PER_IMAGE: u64 = 64;
/// The longest and the shortest time between two decodes, ms.
const MAX_ROUND_MS: u64 = 50;
const MIN_ROUND_MS: u64 = 1;
/// The interval tried when CUPTI refuses the one asked for: 1 ms.
const FALLBACK_INTERVAL: u64 = 1_000_000;
/// Images decoded in one round at most, per device (so that one device cannot hold the others
/// back).
const IMAGES_PER_ROUND: usize = 64;

/// The samples each image holds at `interval` ns: [`IMAGE_MS`] of them, within
/// [`MIN_SAMPLES_PER_IMAGE`]..=[`MAX_SAMPLES_PER_IMAGE`].
pub fn samples_per_image(interval: u64) -> u32 {
    (IMAGE_MS * 1_000_000 / interval.max(1)).clamp(MIN_SAMPLES_PER_IMAGE, MAX_SAMPLES_PER_IMAGE)
        as u32
}

/// The time between two decodes of a device sampled every `interval` ns, ms: two fifths of
/// what an image holds, within [`MIN_ROUND_MS`]..=[`MAX_ROUND_MS`].
pub fn round_ms(interval: u64) -> u64 {
    let image_ms = u64::from(samples_per_image(interval)) * interval / 1_000_000;
    (image_ms * 2 / 5).clamp(MIN_ROUND_MS, MAX_ROUND_MS)
}

/// Images per device: one being decoded into, the others evaluated or waiting.
const IMAGES: usize = 3;

/// Sampling on one device: the decoding side (its evaluator is [`Sampled::evaluator`]).
pub struct Sampled<'c> {
    pub device: u32,
    object: PmObject,
    /// The host object the configuration was made with, and its chip and metrics (the
    /// evaluator makes its own from them).
    _host: Host<'c>,
    chip: String,
    metrics: Vec<String>,
    /// The configuration image `SetConfig` was given, and the counter availability image the
    /// host object was made with: kept for as long as sampling runs, as CUPTI's own client
    /// keeps them (CUPTI may read them again at each decode: on an H200 the sampler crashed
    /// at its first decode while the configuration image had been freed after `SetConfig`).
    _config: Vec<u8>,
    availability: Vec<u8>,
    /// Initialized images, ready to decode into; and where decoded ones go (until the
    /// evaluator is started, images wait in `pending`).
    free: Receiver<Vec<u8>>,
    free_back: Option<Sender<Vec<u8>>>,
    taken: Option<SyncSender<Taken>>,
    pending: Option<Receiver<Taken>>,
    /// CUPTI's time (CLOCK_REALTIME) just before `Start`: the first sample CUPTI gives began
    /// before it (the span since `Enable`) and is left out.
    started: u64,
    /// The first image was kept.
    kept_image: bool,
    /// The interval, ns, and CUPTI's end of the last sample taken (the samples lost are the
    /// gap after it).
    pub interval: u64,
    last_end: u64,
    /// A failed decode was said.
    said: bool,
    /// What the decodes gave, for the notice at the end.
    pub tally: Tally,
}

/// What one device's decodes gave ([`Sampled::tally`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub decodes: u64,
    /// Decodes that stopped with the image full (samples after it lost).
    pub full: u64,
    /// Rounds with no image free (the evaluator behind): the samples waited in CUPTI's
    /// hardware buffer.
    pub waited: u64,
    pub completed: u64,
    pub before_start: u64,
    /// Samples CUPTI gave with no times (after a full image).
    pub untimed: u64,
    /// Samples lost: the gaps between those taken.
    pub lost: u64,
    /// Samples taken (written once evaluated): the next one's number on the device.
    pub taken: u64,
    /// Time spent decoding (`DecodeData`, the image's info, the sample times), ns.
    pub decode_ns: u64,
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
    let per_image = samples_per_image(interval);
    let bytes = pm
        .image_size(cupti, object, &names, per_image)
        .map_err(off)?;
    let (free_back, free) = channel();
    for _ in 0..IMAGES {
        let mut image = vec![0u8; bytes];
        pm.init_image(cupti, object, &mut image).map_err(off)?;
        let _ = free_back.send(image);
    }
    let (taken, pending) = sync_channel(IMAGES);
    let started = crate::sys::clock_ns(libc::CLOCK_REALTIME);
    pm.start(cupti, object).map_err(off)?;
    let setup = GpuMetricsSetup {
        device,
        time_ns: crate::sys::clock_ns(libc::CLOCK_MONOTONIC),
        chip: chip.clone(),
        metrics: kept.clone(),
        interval,
        trigger: PmTrigger::GpuTime,
        hardware_buffer_bytes: HARDWARE_BUFFER as u64,
        samples_per_image: per_image,
    };
    let sampled = Sampled {
        device,
        object,
        _host: host,
        chip,
        metrics: kept,
        _config: config,
        availability,
        free,
        free_back: Some(free_back),
        taken: Some(taken),
        pending: Some(pending),
        started,
        kept_image: false,
        interval,
        last_end: 0,
        said: false,
        tally: Tally::default(),
    };
    Ok((sampled, setup, said))
}

impl Sampled<'_> {
    /// The device's evaluator, to run on a thread of its own; `made` gets its batches and
    /// notices. Once.
    pub fn evaluator(&mut self, made: Sender<Made>) -> Option<Evaluator> {
        Some(Evaluator {
            device: self.device,
            object: self.object,
            chip: self.chip.clone(),
            availability: self.availability.clone(),
            metrics: self.metrics.clone(),
            taken: self.pending.take()?,
            free: self.free_back.take()?,
            made,
        })
    }

    /// Decodes what CUPTI holds into free images, image after image until it has no more
    /// records (at most [`IMAGES_PER_ROUND`]), each sent to the evaluator; with no image free
    /// (`wait`: none within that time), the samples wait in CUPTI's buffer for the next round.
    /// `to_ours` maps CUPTI's sample times (CLOCK_REALTIME) onto the trace's clock. A failed
    /// decode is said once (`notices`).
    pub fn decode(
        &mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        to_ours: &dyn Fn(u64) -> u64,
        wait: std::time::Duration,
        notices: &mut Vec<String>,
    ) {
        for _ in 0..IMAGES_PER_ROUND {
            let Ok(mut image) = self.free.recv_timeout(wait) else {
                self.tally.waited += 1;
                return;
            };
            let t0 = Instant::now();
            let decoded = pm.decode(cupti, self.object, &mut image);
            let d = match decoded {
                Ok(d) => d,
                Err(e) => {
                    if !self.said {
                        self.said = true;
                        notices.push(format!(
                            "{GPU_METRICS_NOTICE} on device {}: {e} (samples lost)",
                            self.device
                        ));
                    }
                    // Initialized again by the evaluator (an empty batch).
                    self.send(Taken {
                        image,
                        rows: Vec::new(),
                        batch: GpuMetricSamples::default(),
                        keep_image: false,
                    });
                    return;
                }
            };
            self.tally.decodes += 1;
            self.tally.completed += d.completed as u64;
            self.tally.full += u64::from(d.full);
            let t = self.take(cupti, pm, image, d.completed, d.overflow, to_ours);
            self.tally.decode_ns += t0.elapsed().as_nanos() as u64;
            self.send(t);
            if !d.full {
                return;
            }
        }
    }

    fn send(&mut self, t: Taken) {
        if let Some(to) = &self.taken {
            let _ = to.send(t);
        }
    }

    /// The completed samples of the image just decoded: each one's times and image index;
    /// those that began before sampling started, and those CUPTI gave no times, are left out;
    /// the gaps between the samples taken are samples lost (the batch's `dropped`).
    fn take(
        &mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        image: Vec<u8>,
        completed: usize,
        overflow: bool,
        to_ours: &dyn Fn(u64) -> u64,
    ) -> Taken {
        let mut b = GpuMetricSamples {
            device: self.device,
            time_ns: crate::sys::clock_ns(libc::CLOCK_MONOTONIC),
            first: self.tally.taken,
            overflow,
            ..Default::default()
        };
        let mut rows = Vec::with_capacity(completed);
        for i in 0..completed {
            let Ok(raw) = pm.sample_times(cupti, self.object, &image, i) else {
                continue;
            };
            if raw == (0, 0) {
                self.tally.untimed += 1;
                continue;
            }
            if raw.0 < self.started {
                self.tally.before_start += 1;
                continue;
            }
            if rows.is_empty() {
                b.raw_first = raw;
            }
            rows.push(i);
            b.dropped += lost_between(self.last_end, raw.0, self.interval);
            self.last_end = raw.1;
            b.raw_last = raw;
            b.times.push((to_ours(raw.0), to_ours(raw.1)));
        }
        self.tally.lost += b.dropped;
        self.tally.taken += rows.len() as u64;
        // The first image is kept when the samples left out are only those before the
        // batch's first (row `i` is then range `image_first + i`).
        let keep_image = match rows.first() {
            Some(&first) if !self.kept_image && rows.len() == completed - first => {
                self.kept_image = true;
                b.image_first = first as u32;
                true
            }
            _ => false,
        };
        Taken {
            image,
            rows,
            batch: b,
            keep_image,
        }
    }

    /// Stops sampling, decodes the last samples (waiting for images as long as it takes the
    /// evaluator to free them) and hangs up on the evaluator; the decoding side's tally.
    pub fn end(
        mut self,
        cupti: &Cupti,
        pm: &PmTarget,
        to_ours: &dyn Fn(u64) -> u64,
        notices: &mut Vec<String>,
    ) -> (u32, Tally) {
        if let Err(e) = pm.stop(cupti, self.object) {
            notices.push(format!(
                "{GPU_METRICS_NOTICE} on device {}: {e}",
                self.device
            ));
        }
        self.decode(cupti, pm, to_ours, END_WAIT, notices);
        (self.device, self.tally)
    }
}

/// How long the last decode waits for the evaluator to free an image.
const END_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The notice at the end on what a device's sampling gave.
pub fn tally_notice(device: u32, t: &Tally, e: &EvalTally) -> String {
    format!(
        "{GPU_METRICS_NOTICE} on device {device}: {} decodes ({} with the image full, {} \
         rounds waiting for an image), {} samples completed, {} written, {} lost, {} left out \
         (begun before Start), {} without times, {} not evaluated; {} ms decoding, {} ms \
         evaluating, {} ms initializing images",
        t.decodes,
        t.full,
        t.waited,
        t.completed,
        t.taken,
        t.lost,
        t.before_start,
        t.untimed,
        e.unevaluated,
        t.decode_ns / 1_000_000,
        e.evaluate_ns / 1_000_000,
        e.init_ns / 1_000_000
    )
}

/// The samples lost between a sample that ended at `last_end` (0: none yet) and the next one,
/// starting at `start`, `interval` ns apart: the gap in whole intervals, rounded.
fn lost_between(last_end: u64, start: u64, interval: u64) -> u64 {
    if last_end == 0 || start <= last_end {
        return 0;
    }
    (start - last_end + interval / 2) / interval.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_hold_two_and_a_half_rounds() {
        // 10 kHz: 500 samples, a round every 20 ms.
        assert_eq!((samples_per_image(100_000), round_ms(100_000)), (500, 20));
        // 100 kHz: capped at 1000 samples (10 ms), a round every 4 ms.
        assert_eq!((samples_per_image(10_000), round_ms(10_000)), (1000, 4));
        // 1 Hz: 64 samples, a round every 50 ms.
        assert_eq!(
            (samples_per_image(1_000_000_000), round_ms(1_000_000_000)),
            (64, 50)
        );
        // 1 kHz: 64 samples, 25 ms.
        assert_eq!(
            (samples_per_image(1_000_000), round_ms(1_000_000)),
            (64, 25)
        );
    }

    #[test]
    fn gaps_are_samples_lost() {
        assert_eq!(lost_between(0, 5_000, 100), 0);
        assert_eq!(lost_between(5_000, 5_000, 100), 0);
        // Clock jitter under half an interval is no sample.
        assert_eq!(lost_between(5_000, 5_040, 100), 0);
        assert_eq!(lost_between(5_000, 5_100, 100), 1);
        assert_eq!(lost_between(5_000, 70_000, 100), 650);
    }
}
