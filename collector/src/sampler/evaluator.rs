//! One device's evaluator: a thread beside the decoding one that turns each decoded image into
//! a batch (every kept sample's metrics evaluated by a host object of its own, the image packed
//! into the batch when it is the one kept), initializes the image again and hands it back.
//!
//! Measured on an H200 (GH100, 11 metrics, 10 kHz): decoding costs the decoding thread about
//! 52 to 62 µs a sample and evaluating 21 to 38 µs more, and initializing an image of 1000
//! samples (62.6 MB) about 15 ms: on one thread the sampler fell behind (more than 100 µs of
//! work a sample), its images filled and samples were lost. Here decoding alone stays on the
//! decoding thread.

use super::target::{Driver, PmObject, PmTarget};
use crate::metrics::{Cupti, MetricNames};
use rtrace_format::{GpuMetricSamples, GPU_METRICS_NOTICE};
use std::sync::mpsc::{Receiver, Sender};
use std::time::Instant;

/// A decoded image and what the decoding thread made of it: the batch without its values,
/// and which of the image's samples its rows are.
pub struct Taken {
    pub image: Vec<u8>,
    /// The image's sample index of each row of `batch`.
    pub rows: Vec<usize>,
    pub batch: GpuMetricSamples,
    /// The image goes into the batch (the device's first).
    pub keep_image: bool,
}

/// What an evaluator gives the process: a batch to write, or a notice.
pub enum Made {
    Batch(GpuMetricSamples),
    Notice(String),
}

/// What one evaluator did, for the device's notice at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct EvalTally {
    pub unevaluated: u64,
    pub evaluate_ns: u64,
    pub init_ns: u64,
}

/// An evaluator, to run on a thread of its own ([`Evaluator::run`]).
pub struct Evaluator {
    pub device: u32,
    pub object: PmObject,
    pub chip: String,
    pub availability: Vec<u8>,
    pub metrics: Vec<String>,
    /// Decoded images in, initialized images back, batches and notices out.
    pub taken: Receiver<Taken>,
    pub free: Sender<Vec<u8>>,
    pub made: Sender<Made>,
}

impl Evaluator {
    /// Evaluates every image taken until the decoding side hangs up.
    pub fn run(self, cupti: &Cupti, pm: &PmTarget) -> EvalTally {
        let mut tally = EvalTally::default();
        let say = |e: String| {
            let _ = self.made.send(Made::Notice(format!(
                "{GPU_METRICS_NOTICE} on device {}: {e}",
                self.device
            )));
        };
        // Its context current on this thread too, as for every CUPTI call on the device.
        let driver = Driver::load().and_then(|d| d.use_primary_context(self.device).map(|()| d));
        if let Err(e) = &driver {
            say(format!("evaluator: {e}"));
        }
        let refs: Vec<&str> = self.metrics.iter().map(String::as_str).collect();
        let host = cupti
            .pm_host_for_device(&self.chip, &self.availability)
            .and_then(|mut h| h.add_metrics(&refs).map(|()| h));
        let names = MetricNames::new(&self.metrics);
        let mut said = false;
        for mut t in self.taken.iter() {
            let t0 = Instant::now();
            let mut row = vec![f64::NAN; self.metrics.len()];
            t.batch.values.reserve(t.rows.len() * row.len());
            for &i in &t.rows {
                let ok = match (&host, &names) {
                    (Ok(h), Ok(n)) => h.evaluate_decoded(&t.image, i, n, &mut row),
                    (Err(e), _) | (_, Err(e)) => Err(e.clone()),
                };
                if let Err(e) = ok {
                    tally.unevaluated += 1;
                    row.iter_mut().for_each(|v| *v = f64::NAN);
                    if !said {
                        said = true;
                        say(format!("sample not evaluated: {e}"));
                    }
                }
                t.batch.values.extend_from_slice(&row);
            }
            if t.keep_image {
                t.batch.counter_data = rtrace_format::pack_counter_data(&t.image);
            }
            let t1 = Instant::now();
            tally.evaluate_ns += (t1 - t0).as_nanos() as u64;
            if let Err(e) = pm.init_image(cupti, self.object, &mut t.image) {
                say(e);
            }
            tally.init_ns += t1.elapsed().as_nanos() as u64;
            let _ = self.made.send(Made::Batch(t.batch));
            let _ = self.free.send(t.image);
        }
        tally
    }
}
