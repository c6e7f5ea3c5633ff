//! Samples into timelines: each decode's values as the library evaluated them, or, for a decode
//! without them, its counter data image evaluated through CUPTI's host API (a PM sampling host
//! object for the set-up's chip, no counter availability image), every sample at once in one
//! forked child ([`crate::metrics::Host::evaluate_samples`]).

use super::timeline::{is_count, shown_name, Sample, Timeline};
use crate::metrics::{Cupti, Host};
use rtrace_format::{GpuMetricSamples, GpuMetricsSetup};
use std::collections::HashMap;

/// Evaluates a decode's samples: one row of values per sample, in the set-up's metric order.
pub type EvaluateFn<'a> =
    dyn Fn(&GpuMetricsSetup, &GpuMetricSamples) -> Result<Vec<Vec<f64>>, String> + 'a;

/// The largest counter data image read back (one decode's, unpacked).
const IMAGE_LIMIT: u64 = 4 << 30;

/// Evaluation through a loaded CUPTI, one host object per chip.
pub struct HostEvaluator<'a> {
    cupti: &'a Cupti,
    hosts: std::cell::RefCell<HashMap<String, std::rc::Rc<Result<Host<'a>, String>>>>,
}

impl<'a> HostEvaluator<'a> {
    pub fn new(cupti: &'a Cupti) -> HostEvaluator<'a> {
        HostEvaluator {
            cupti,
            hosts: Default::default(),
        }
    }

    /// The values of `batch`'s samples, collected under `setup`.
    pub fn evaluate(
        &self,
        setup: &GpuMetricsSetup,
        batch: &GpuMetricSamples,
    ) -> Result<Vec<Vec<f64>>, String> {
        let host = self
            .hosts
            .borrow_mut()
            .entry(setup.chip.clone())
            .or_insert_with(|| std::rc::Rc::new(self.cupti.pm_host(&setup.chip)))
            .clone();
        let host = host.as_ref().as_ref().map_err(Clone::clone)?;
        let names: Vec<&str> = setup.metrics.iter().map(String::as_str).collect();
        let image = rtrace_format::unpack_counter_data(&batch.counter_data, IMAGE_LIMIT)?;
        let skip = batch.image_first as usize;
        let mut rows = host.evaluate_samples(&image, skip + batch.times.len(), &names)?;
        Ok(rows.split_off(skip.min(rows.len())))
    }
}

/// A device's timeline from its set-ups and decodes (a trace's, in file order): each decode
/// evaluated under the last set-up of its device that started before it; counts turned into
/// rates over each sample's own duration. The timeline, and why decodes could not be
/// evaluated (each reason once).
pub fn timeline(
    device: u32,
    setups: &[GpuMetricsSetup],
    batches: &[GpuMetricSamples],
    evaluate: &EvaluateFn<'_>,
) -> (Timeline, Vec<String>) {
    let mine: Vec<&GpuMetricsSetup> = setups.iter().filter(|s| s.device == device).collect();
    let mut t = Timeline {
        metrics: mine
            .first()
            .map(|s| s.metrics.iter().map(|m| shown_name(m)).collect())
            .unwrap_or_default(),
        samples: Vec::new(),
    };
    let mut errors: Vec<String> = Vec::new();
    for b in batches
        .iter()
        .filter(|b| b.device == device && !b.times.is_empty())
    {
        let Some(setup) = mine
            .iter()
            .rev()
            .find(|s| s.time_ns <= b.time_ns)
            .or(mine.first())
        else {
            continue;
        };
        let n = setup.metrics.len();
        let kept = n > 0 && b.values.len() == b.times.len() * n;
        let rows = if kept {
            Ok(b.values.chunks(n).map(<[f64]>::to_vec).collect())
        } else if b.counter_data.is_empty() {
            Err("a decode with neither values nor counter data".to_string())
        } else {
            evaluate(setup, b)
        };
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                if !errors.contains(&e) {
                    errors.push(e);
                }
                continue;
            }
        };
        for (&(start, end), row) in b.times.iter().zip(rows) {
            let secs = end.saturating_sub(start) as f64 / 1e9;
            // Columns by name: a later set-up may list the metrics in another order.
            let mut values = vec![f64::NAN; t.metrics.len()];
            for (m, v) in setup.metrics.iter().zip(row) {
                let v = if is_count(m) {
                    if secs > 0.0 {
                        v / secs
                    } else {
                        f64::NAN
                    }
                } else {
                    v
                };
                let name = shown_name(m);
                match t.metrics.iter().position(|c| *c == name) {
                    Some(i) => values[i] = v,
                    None => {
                        t.metrics.push(name);
                        values.push(v);
                    }
                }
            }
            t.samples.push(Sample { start, end, values });
        }
    }
    let n = t.metrics.len();
    t.samples
        .iter_mut()
        .for_each(|s| s.values.resize(n, f64::NAN));
    t.sort();
    (t, errors)
}
