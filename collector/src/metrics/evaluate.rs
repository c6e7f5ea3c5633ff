//! Metrics evaluated again from the counter data a trace keeps for each profiled launch
//! (`rtrace report --metrics LIST`): CUPTI's host API, with a host object for the set-up's
//! chip and no counter availability image, evaluates each metric of one range of an image
//! (range 0 of a launch's own image in kernel replay; in application replay, the range's index
//! in the image of its context's run). A metric whose counters were not collected for that
//! range gets CUPTI's reason instead of a value.

use super::host::{Cupti, Host};
use rtrace_format::ProfilerSetup;
use std::cell::RefCell;
use std::collections::HashMap;

/// Evaluates `metrics` from profiled launches' counter data, a host object per chip.
pub struct Evaluator<'a> {
    cupti: &'a Cupti,
    metrics: Vec<String>,
    hosts: RefCell<HashMap<String, Result<Host<'a>, String>>>,
}

impl<'a> Evaluator<'a> {
    pub fn new(cupti: &'a Cupti, metrics: Vec<String>) -> Evaluator<'a> {
        Evaluator {
            cupti,
            metrics,
            hosts: RefCell::new(HashMap::new()),
        }
    }

    /// Each metric's value in range `range` of counter data `image` (collected under `setup`),
    /// or why not.
    pub fn evaluate(
        &self,
        setup: &ProfilerSetup,
        image: &[u8],
        range: usize,
    ) -> Vec<(String, Result<f64, String>)> {
        let mut hosts = self.hosts.borrow_mut();
        let host = hosts
            .entry(setup.chip.clone())
            .or_insert_with(|| self.cupti.host(&setup.chip));
        let names: Vec<&str> = self.metrics.iter().map(String::as_str).collect();
        let values = match host {
            Ok(h) => h.evaluate_each(image, range, &names),
            Err(e) => names.iter().map(|n| Err(format!("{n}: {e}"))).collect(),
        };
        self.metrics.iter().cloned().zip(values).collect()
    }
}
