//! PM sampling's side of the host API: a host object of `CUPTI_PROFILER_TYPE_PM_SAMPLING` for a
//! chip, and every sample of a PM sampling counter data image evaluated in one forked child
//! (sample `i` is range `i`; a child per sample would cost a fork per 100 µs of a run).
#![allow(unsafe_code)]

use super::{isolated, Cupti, EvaluateParams, Host};
use rtrace_cupti_abi::PROFILER_TYPE_PM_SAMPLING;
use std::ffi::{c_char, CString};

impl Cupti {
    /// A PM sampling host object for `chip`, with no counter availability image.
    pub fn pm_host(&self, chip: &str) -> Result<Host<'_>, String> {
        self.host_of(chip, PROFILER_TYPE_PM_SAMPLING, None)
    }

    /// A PM sampling host object for a device's `chip`, with the device's counter
    /// availability image (what configuring the device's sampling takes).
    pub fn pm_host_for_device(&self, chip: &str, availability: &[u8]) -> Result<Host<'_>, String> {
        self.host_of(chip, PROFILER_TYPE_PM_SAMPLING, Some(availability))
    }
}

impl Host<'_> {
    /// `metrics` in each of the first `samples` samples of a PM sampling counter data image:
    /// one row of values per sample. Fails as a whole when CUPTI refuses one (naming the
    /// sample and its reason) or cannot read the image.
    pub fn evaluate_samples(
        &self,
        counter_data: &[u8],
        samples: usize,
        metrics: &[&str],
    ) -> Result<Vec<Vec<f64>>, String> {
        let owned: Vec<CString> = metrics
            .iter()
            .map(|n| CString::new(*n).map_err(|_| format!("{n:?}: not a metric name")))
            .collect::<Result<_, _>>()?;
        let ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let n = ptrs.len();
        let call = "cuptiProfilerHostEvaluateToGpuValues";
        let answer = isolated(call, || {
            let mut values = vec![f64::NAN; n];
            let mut out = Vec::with_capacity(8 + samples * n * 8);
            out.extend(0u32.to_le_bytes());
            for i in 0..samples {
                let mut p = EvaluateParams {
                    host_object: self.object,
                    counter_data_image: counter_data.as_ptr(),
                    counter_data_image_size: counter_data.len(),
                    range_index: i,
                    metric_names: ptrs.as_ptr(),
                    num_metrics: n,
                    metric_values: values.as_mut_ptr(),
                    ..EvaluateParams::new()
                };
                // SAFETY: a params struct laid out as the header's; the image, the names and
                // `values` (one f64 per name) outlive the call.
                let r = unsafe { (self.cupti.evaluate)(&mut p) };
                if r != 0 {
                    // The failing result first, then the sample's index.
                    out.truncate(0);
                    out.extend(r.to_le_bytes());
                    out.extend((i as u64).to_le_bytes());
                    return out;
                }
                values.iter().for_each(|v| out.extend(v.to_le_bytes()));
            }
            out
        })?;
        let (r, rest) = answer.split_at(4);
        let r = u32::from_le_bytes(r.try_into().expect("4 bytes"));
        if r != 0 {
            let at = rest
                .get(..8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
            return self
                .cupti
                .check(&format!("{call} (sample {at})"), r)
                .map(|_| Vec::new());
        }
        if rest.len() != samples * n * 8 {
            return Err(format!(
                "{call}: {} bytes of values for {samples} samples of {n} metrics",
                rest.len()
            ));
        }
        let all: Vec<f64> = rest
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        Ok(all.chunks(n.max(1)).map(<[f64]>::to_vec).collect())
    }
}

/// Metric names as CUPTI takes them: the owned C strings and the pointers to them.
pub struct MetricNames {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
}

impl MetricNames {
    pub fn new(metrics: &[String]) -> Result<MetricNames, String> {
        let owned: Vec<CString> = metrics
            .iter()
            .map(|n| CString::new(n.as_str()).map_err(|_| format!("{n:?}: not a metric name")))
            .collect::<Result<_, _>>()?;
        let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
        Ok(MetricNames {
            _owned: owned,
            ptrs,
        })
    }

    pub fn len(&self) -> usize {
        self.ptrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ptrs.is_empty()
    }

    /// The pointers, for a CUPTI parameter structure (valid while `self` lives).
    pub fn as_ptr(&self) -> *const *const c_char {
        self.ptrs.as_ptr()
    }
}

impl Host<'_> {
    /// `metrics` of sample `sample` of a counter data image CUPTI's PM sampling itself decoded
    /// in this process (so read in place, not in a forked child as an image from elsewhere
    /// is), written into `values` (one per metric); CUPTI's result on failure.
    pub fn evaluate_decoded(
        &self,
        image: &[u8],
        sample: usize,
        metrics: &MetricNames,
        values: &mut [f64],
    ) -> Result<(), String> {
        assert_eq!(values.len(), metrics.len());
        let mut p = EvaluateParams {
            host_object: self.object,
            counter_data_image: image.as_ptr(),
            counter_data_image_size: image.len(),
            range_index: sample,
            metric_names: metrics.as_ptr(),
            num_metrics: metrics.len(),
            metric_values: values.as_mut_ptr(),
            ..EvaluateParams::new()
        };
        // SAFETY: a params struct laid out as the header's; the image (CUPTI's own decode),
        // the names and `values` (one f64 per name, checked above) outlive the call.
        let r = unsafe { (self.cupti.evaluate)(&mut p) };
        self.cupti.check("cuptiProfilerHostEvaluateToGpuValues", r)
    }
}
