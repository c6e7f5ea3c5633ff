//! Module images across the traces read together: each content is stored once per trace, and
//! under `rtrace record` once per run (the run's first process to load it stores it; the
//! others name it by hash, [`rtrace_format::IMAGE_IN_RUN`]). An image is looked up by hash in
//! every trace given; what none of them holds is said in one line, with how to get it.

use crate::model::Trace;

/// The image of content `hash`, from whichever of `traces` stores it.
pub fn find(traces: &[Trace], hash: u64) -> Option<&[u8]> {
    traces
        .iter()
        .find_map(|t| t.images.get(&hash))
        .map(Vec::as_slice)
}

/// The images the modules of `traces` name and none of `traces` stores, by why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Missing {
    /// Distinct contents not stored at all (recorded without images).
    pub not_recorded: usize,
    /// Distinct contents another process of the run stored, in a trace not given.
    pub in_other_traces: usize,
}

impl Missing {
    /// What `traces` lack.
    pub fn of(traces: &[Trace]) -> Missing {
        let mut seen = std::collections::HashSet::new();
        let mut m = Missing::default();
        for t in traces {
            for img in &t.module_images {
                if find(traces, img.hash).is_some() || !seen.insert(img.hash) {
                    continue;
                }
                if img.in_run {
                    m.in_other_traces += 1;
                } else {
                    m.not_recorded += 1;
                }
            }
        }
        m
    }

    pub fn is_empty(&self) -> bool {
        *self == Missing::default()
    }

    /// One line: how many images are missing, why, and how to get them (`None`: none is).
    pub fn line(&self) -> Option<String> {
        let images = |n: usize| format!("{n} module image{}", if n == 1 { "" } else { "s" });
        let mut parts = Vec::new();
        if self.in_other_traces > 0 {
            parts.push(format!(
                "{} {} stored in another trace of the same run (rtrace record stores each \
                 image once per run): give all of the run's traces",
                images(self.in_other_traces),
                if self.in_other_traces == 1 {
                    "is"
                } else {
                    "are"
                },
            ));
        }
        if self.not_recorded > 0 {
            parts.push(format!(
                "{} {} not recorded (images are stored with --pc-sampling or --metrics, or \
                 when asked for: rtrace record --module-images, RTRACE_MODULE_IMAGES=1)",
                images(self.not_recorded),
                if self.not_recorded == 1 {
                    "was"
                } else {
                    "were"
                },
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}
