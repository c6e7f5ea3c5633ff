//! PM sampling on one device: set up (device support, chip, counter availability, the metrics
//! of `rtrace_format::GPU_METRICS` that the chip has and that fit one pass together, tried in
//! that order, the configuration image, `Enable`, `SetConfig`, the counter data image,
//! `Start`), each decode (the image filled until CUPTI has no more records, each completed
//! sample's times and values), and the end (`Stop`, the last decode, `Disable`).

use super::api::{call, PmApi};
use crate::cupti::api::{describe, Api};
use rtrace_cupti_abi as abi;
use rtrace_format::{
    encode_value, ChunkKind, GpuMetricSamples, GpuMetricsSetup, PmTrigger, GPU_METRICS,
    GPU_METRICS_NOTICE,
};
use std::ffi::{c_char, c_void, CStr, CString};

/// CUPTI's hardware buffer per device: records of about 5 KB on GH100 (the probe's 1 MiB held
/// 200), so 64 MiB holds seconds of samples between the worker's decodes.
pub(super) const HARDWARE_BUFFER: usize = 64 << 20;
/// Samples one counter data image holds (62.6 KB each on GH100: 4 MB; the first image, kept
/// in the trace compressed, stays small).
pub(super) const SAMPLES_PER_IMAGE: u32 = 64;
/// The interval tried when CUPTI refuses the one asked for: 1 ms (what the H100 gave).
const FALLBACK_INTERVAL: u64 = 1_000_000;
/// Decodes per drain at most (each fills an image): 16384 samples, 1.6 s at 10 kHz.
const DECODES_PER_DRAIN: usize = 256;

/// The devices sampled and what waits for the worker.
#[derive(Default)]
pub(crate) struct PmState {
    pub(super) devices: Vec<Sampled>,
    /// Devices CUPTI refused: not tried again.
    pub(super) off: Vec<u32>,
    /// `cuptiProfilerInitialize` succeeded.
    pub(super) initialized: bool,
    /// Encoded chunks for the worker, in order.
    pub(super) pending: Vec<(ChunkKind, Vec<u8>)>,
}

impl PmState {
    pub(super) fn queue(&mut self, batches: Vec<GpuMetricSamples>) {
        for b in batches {
            self.pending
                .push((ChunkKind::GpuMetricSamples, encode_value(&b)));
        }
    }
}

/// Sampling on one device.
pub(super) struct Sampled {
    pub device: u32,
    object: *mut c_void,
    host_object: *mut c_void,
    #[allow(dead_code)]
    config: Vec<u8>,
    image: Vec<u8>,
    #[allow(dead_code)]
    names: Vec<CString>,
    name_ptrs: Vec<*const c_char>,
    /// CUPTI's time (CLOCK_REALTIME) when sampling started: a sample that begins before it
    /// is the span since the last stop, not a sample of this run.
    started: u64,
    /// Samples written so far.
    pub next: u64,
    /// The first decode's image was kept.
    kept_image: bool,
    /// The interval asked for, ns, and CUPTI's end of the last sample written (for the
    /// samples an overflow lost).
    interval: u64,
    last_end: u64,
    /// Contexts on the device (sampling ends with the last one).
    pub contexts: u32,
    /// A failure of a decode was said.
    said: bool,
}

// SAFETY: CUPTI's objects and rtrace's own buffers, used only under the PM sampling lock.
unsafe impl Send for Sampled {}

fn failed(api: &Api, device: u32, name: &str, rc: u32) -> String {
    format!(
        "{GPU_METRICS_NOTICE} off on device {device}: {name}: {}",
        describe(api, rc as i32)
    )
}

fn check<P>(api: &Api, device: u32, name: &str, f: abi::Call<P>, p: &mut P) -> Result<(), String> {
    match call(f, p) {
        abi::SUCCESS => Ok(()),
        rc => Err(failed(api, device, name, rc)),
    }
}

fn release_host(pm: &PmApi, host_object: *mut c_void) {
    let mut p = abi::HostDeinitialize::new();
    p.host_object = host_object;
    call(pm.host_deinitialize, &mut p);
}

/// A PM sampling host object for `chip` with `metrics`, its configuration image and passes.
fn configured(
    pm: &PmApi,
    chip: &CStr,
    availability: &[u8],
    metrics: &[*const c_char],
) -> Option<(*mut c_void, Vec<u8>, usize)> {
    let mut init = abi::HostInitialize::new();
    init.profiler_type = abi::PROFILER_TYPE_PM_SAMPLING;
    init.chip_name = chip.as_ptr();
    init.counter_availability_image = availability.as_ptr();
    if call(pm.host_initialize, &mut init) != abi::SUCCESS {
        return None;
    }
    let host = init.host_object;
    let image = (|| {
        let mut add = abi::HostConfigAddMetrics::new();
        add.host_object = host;
        add.metric_names = metrics.as_ptr();
        add.num_metrics = metrics.len();
        if call(pm.add_metrics, &mut add) != abi::SUCCESS {
            return None;
        }
        let mut size = abi::HostGetConfigImageSize::new();
        size.host_object = host;
        if call(pm.config_image_size, &mut size) != abi::SUCCESS {
            return None;
        }
        let mut image = vec![0u8; size.config_image_size];
        let mut get = abi::HostGetConfigImage::new();
        get.host_object = host;
        get.config_image_size = image.len();
        get.config_image = image.as_mut_ptr();
        if call(pm.config_image, &mut get) != abi::SUCCESS {
            return None;
        }
        let mut passes = abi::HostGetNumOfPasses::new();
        passes.config_image_size = image.len();
        passes.config_image = image.as_mut_ptr();
        if call(pm.num_passes, &mut passes) != abi::SUCCESS {
            return None;
        }
        Some((image, passes.num_of_passes))
    })();
    match image {
        Some((image, passes)) => Some((host, image, passes)),
        None => {
            release_host(pm, host);
            None
        }
    }
}

/// Sets sampling up on `device` at `hz`. `initialized`: whether `cuptiProfilerInitialize`
/// succeeded already in this process. The set-up, and what was refused on the way (the
/// interval asked for); `Err`: the notice saying why sampling is off there.
pub(super) fn set_up(
    api: &Api,
    pm: &PmApi,
    device: u32,
    hz: u64,
    initialized: &mut bool,
) -> Result<(Sampled, GpuMetricsSetup, Option<String>), String> {
    if !*initialized {
        let mut p = abi::ProfilerInitialize::new();
        check(
            api,
            device,
            "cuptiProfilerInitialize",
            pm.initialize,
            &mut p,
        )?;
        *initialized = true;
    }
    let mut p = abi::DeviceSupported::new();
    p.cu_device = device as i32;
    p.api = abi::PROFILER_API_PM_SAMPLING;
    check(
        api,
        device,
        "cuptiProfilerDeviceSupported",
        pm.device_supported,
        &mut p,
    )?;
    if p.is_supported != abi::SUPPORT_SUPPORTED {
        return Err(format!(
            "{GPU_METRICS_NOTICE} off on device {device}: the device does not support PM sampling"
        ));
    }
    let mut p = abi::DeviceGetChipName::new();
    p.device_index = device as usize;
    check(api, device, "cuptiDeviceGetChipName", pm.chip_name, &mut p)?;
    let chip_text = if p.chip_name.is_null() {
        String::new()
    } else {
        // SAFETY: CUPTI returned a NUL-terminated name it owns.
        unsafe { CStr::from_ptr(p.chip_name) }
            .to_string_lossy()
            .into_owned()
    };
    let chip = CString::new(chip_text.clone()).unwrap_or_default();
    let mut a = abi::PmSamplingGetCounterAvailability::new();
    a.device_index = device as usize;
    check(
        api,
        device,
        "cuptiPmSamplingGetCounterAvailability",
        pm.availability,
        &mut a,
    )?;
    let mut availability = vec![0u8; a.counter_availability_image_size];
    a.counter_availability_image = availability.as_mut_ptr();
    check(
        api,
        device,
        "cuptiPmSamplingGetCounterAvailability",
        pm.availability,
        &mut a,
    )?;
    // The metrics, greedily: each kept when the chip has it and the set still fits one pass.
    let all: Vec<CString> = GPU_METRICS
        .iter()
        .filter_map(|m| CString::new(*m).ok())
        .collect();
    let mut kept: Vec<CString> = Vec::new();
    for m in &all {
        let mut ptrs: Vec<*const c_char> = kept.iter().map(|c| c.as_ptr()).collect();
        ptrs.push(m.as_ptr());
        if let Some((host, _, passes)) = configured(pm, &chip, &availability, &ptrs) {
            release_host(pm, host);
            if passes == 1 {
                kept.push(m.clone());
            }
        }
    }
    let name_ptrs: Vec<*const c_char> = kept.iter().map(|c| c.as_ptr()).collect();
    let Some((host_object, config, _)) = (!kept.is_empty())
        .then(|| configured(pm, &chip, &availability, &name_ptrs))
        .flatten()
    else {
        return Err(format!(
            "{GPU_METRICS_NOTICE} off on device {device}: chip {chip_text} has none of the metrics"
        ));
    };
    let interval = rtrace_format::gpu_metrics_interval_ns(hz);
    let refused = std::cell::Cell::new(None);
    let on = (|| {
        let mut en = abi::PmSamplingEnable::new();
        en.device_index = device as usize;
        check(api, device, "cuptiPmSamplingEnable", pm.enable, &mut en)?;
        let object = en.pm_sampling_object;
        let configure = || {
            // The interval asked for; where CUPTI refuses it, FALLBACK_INTERVAL (said).
            let set = |interval: u64| {
                let mut sc = abi::PmSamplingSetConfig::new();
                sc.pm_sampling_object = object;
                sc.config_size = config.len();
                sc.config = config.as_ptr();
                sc.hardware_buffer_size = HARDWARE_BUFFER;
                sc.sampling_interval = interval;
                sc.trigger_mode = abi::PM_TRIGGER_GPU_TIME_INTERVAL;
                sc.hw_buffer_append_mode = abi::PM_APPEND_KEEP_OLDEST;
                check(
                    api,
                    device,
                    "cuptiPmSamplingSetConfig",
                    pm.set_config,
                    &mut sc,
                )
            };
            let interval = match set(interval) {
                Ok(()) => interval,
                Err(e) if interval < FALLBACK_INTERVAL => {
                    set(FALLBACK_INTERVAL)?;
                    refused.set(Some(format!("every {interval} ns refused ({e})")));
                    FALLBACK_INTERVAL
                }
                Err(e) => return Err(e),
            };
            let mut sz = abi::PmSamplingGetCounterDataSize::new();
            sz.pm_sampling_object = object;
            sz.metric_names = name_ptrs.as_ptr();
            sz.num_metrics = name_ptrs.len();
            sz.max_samples = SAMPLES_PER_IMAGE;
            check(
                api,
                device,
                "cuptiPmSamplingGetCounterDataSize",
                pm.counter_data_size,
                &mut sz,
            )?;
            let image = vec![0u8; sz.counter_data_size];
            // Read before Start: the first sample CUPTI gives began before it (the span since
            // Enable or the last Stop) and is left out by this time.
            let started = crate::sys::clock_ns(libc::CLOCK_REALTIME);
            let mut st = abi::PmSamplingStart::new();
            st.pm_sampling_object = object;
            check(api, device, "cuptiPmSamplingStart", pm.start, &mut st)?;
            Ok((image, started, interval))
        };
        match configure() {
            Ok((image, started, interval)) => Ok((object, image, started, interval)),
            Err(e) => {
                let mut di = abi::PmSamplingDisable::new();
                di.pm_sampling_object = object;
                call(pm.disable, &mut di);
                Err(e)
            }
        }
    })();
    let (object, image, started, interval) = match on {
        Ok(x) => x,
        Err(e) => {
            release_host(pm, host_object);
            return Err(e);
        }
    };
    let metrics: Vec<String> = kept
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let setup = GpuMetricsSetup {
        device,
        time_ns: crate::clock::now_ns(),
        chip: chip_text,
        metrics,
        interval,
        trigger: PmTrigger::GpuTime,
        hardware_buffer_bytes: HARDWARE_BUFFER as u64,
        samples_per_image: SAMPLES_PER_IMAGE,
    };
    let sampled = Sampled {
        device,
        object,
        host_object,
        config,
        image,
        names: kept,
        name_ptrs,
        started,
        next: 0,
        kept_image: false,
        interval,
        last_end: 0,
        contexts: 1,
        said: false,
    };
    Ok((sampled, setup, refused.take()))
}

/// Decodes what CUPTI holds into batches (`out`), image after image until it has no more
/// records; `to_ours` maps CUPTI's sample times (CLOCK_REALTIME) onto the trace's clock.
/// Notices (a failed decode, said once) go to `notices`.
pub(super) fn decode(
    api: &Api,
    pm: &PmApi,
    s: &mut Sampled,
    to_ours: &dyn Fn(u64) -> u64,
    out: &mut Vec<GpuMetricSamples>,
    notices: &mut Vec<String>,
) {
    for _ in 0..DECODES_PER_DRAIN {
        let mut init = abi::PmSamplingCounterDataImageInitialize::new();
        init.pm_sampling_object = s.object;
        init.counter_data_size = s.image.len();
        init.counter_data = s.image.as_mut_ptr();
        if call(pm.counter_data_initialize, &mut init) != abi::SUCCESS {
            return;
        }
        let mut d = abi::PmSamplingDecodeData::new();
        d.pm_sampling_object = s.object;
        d.counter_data_image = s.image.as_mut_ptr();
        d.counter_data_image_size = s.image.len();
        let rc = call(pm.decode, &mut d);
        if rc != abi::SUCCESS {
            if !s.said {
                s.said = true;
                notices.push(format!(
                    "{GPU_METRICS_NOTICE} on device {}: cuptiPmSamplingDecodeData: {} (samples lost)",
                    s.device,
                    describe(api, rc as i32)
                ));
            }
            return;
        }
        let mut info = abi::PmSamplingGetCounterDataInfo::new();
        info.counter_data_image = s.image.as_ptr();
        info.counter_data_image_size = s.image.len();
        if call(pm.counter_data_info, &mut info) != abi::SUCCESS {
            return;
        }
        let batch = samples(pm, s, info.num_completed_samples, d.overflow != 0, to_ours);
        if let Some(b) = batch {
            out.push(b);
        }
        if d.decode_stop_reason != abi::PM_DECODE_STOP_COUNTER_DATA_FULL {
            return;
        }
    }
}

/// The completed samples of the image just decoded, each evaluated; those that began before
/// sampling started are left out.
fn samples(
    pm: &PmApi,
    s: &mut Sampled,
    completed: usize,
    overflow: bool,
    to_ours: &dyn Fn(u64) -> u64,
) -> Option<GpuMetricSamples> {
    let n = s.name_ptrs.len();
    let mut b = GpuMetricSamples {
        device: s.device,
        time_ns: crate::clock::now_ns(),
        first: s.next,
        overflow,
        ..Default::default()
    };
    let mut row = vec![f64::NAN; n];
    let mut ranges = Vec::new();
    for i in 0..completed {
        let mut si = abi::PmSamplingCounterDataGetSampleInfo::new();
        si.pm_sampling_object = s.object;
        si.counter_data_image = s.image.as_ptr();
        si.counter_data_image_size = s.image.len();
        si.sample_index = i;
        if call(pm.sample_info, &mut si) != abi::SUCCESS || si.start_timestamp < s.started {
            continue;
        }
        let mut ev = abi::HostEvaluateToGpuValues::new();
        ev.host_object = s.host_object;
        ev.counter_data_image = s.image.as_ptr();
        ev.counter_data_image_size = s.image.len();
        ev.range_index = i;
        ev.metric_names = s.name_ptrs.as_ptr();
        ev.num_metrics = n;
        ev.metric_values = row.as_mut_ptr();
        if call(pm.evaluate, &mut ev) != abi::SUCCESS {
            row.iter_mut().for_each(|v| *v = f64::NAN);
        }
        let raw = (si.start_timestamp, si.end_timestamp);
        if ranges.is_empty() {
            b.raw_first = raw;
        }
        b.raw_last = raw;
        ranges.push(i);
        b.times.push((to_ours(raw.0), to_ours(raw.1)));
        b.values.extend_from_slice(&row);
    }
    if b.times.is_empty() {
        return None;
    }
    // After an overflow, the gap since the last sample written is samples lost.
    if overflow && s.last_end > 0 && b.raw_first.0 > s.last_end {
        b.dropped = (b.raw_first.0 - s.last_end) / s.interval.max(1);
    }
    s.last_end = b.raw_last.1;
    // The first image is kept when the samples left out are only those before the batch's
    // first (row `i` is then range `image_first + i`).
    let first = ranges[0];
    if !s.kept_image && ranges.len() == completed - first {
        s.kept_image = true;
        b.counter_data = rtrace_format::pack_counter_data(&s.image);
        b.image_first = first as u32;
    }
    s.next += b.times.len() as u64;
    Some(b)
}

/// Stops sampling, decodes the last samples, disables it and releases the host object.
pub(super) fn end(
    api: &Api,
    pm: &PmApi,
    mut s: Sampled,
    to_ours: &dyn Fn(u64) -> u64,
    out: &mut Vec<GpuMetricSamples>,
    notices: &mut Vec<String>,
) {
    let mut st = abi::PmSamplingStop::new();
    st.pm_sampling_object = s.object;
    call(pm.stop, &mut st);
    decode(api, pm, &mut s, to_ours, out, notices);
    let mut di = abi::PmSamplingDisable::new();
    di.pm_sampling_object = s.object;
    call(pm.disable, &mut di);
    release_host(pm, s.host_object);
}
