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

/// Hands each of `kernels` its function's listing in its stored module image, each image
/// disassembled once with `nvdisasm` (`key`: a kernel's image hash, None when none is stored,
/// and its function's name; `apply`: what to do with the listing). Returns what could not be
/// shown, in a line (None: every kernel got its listing or has none in its image).
pub fn annotate_kernels<K>(
    kernels: &mut [K],
    traces: &[Trace],
    nvdisasm: &std::path::Path,
    key: impl Fn(&K) -> (Option<u64>, String),
    mut apply: impl FnMut(&mut K, &crate::nvdisasm::Listing),
) -> Option<String> {
    let mut listings = std::collections::HashMap::new();
    let mut missing = 0;
    let mut notes: Vec<String> = Vec::new();
    for k in kernels.iter_mut() {
        let (Some(hash), name) = key(k) else {
            missing += 1;
            continue;
        };
        let l = listings
            .entry(hash)
            .or_insert_with(|| match find(traces, hash) {
                Some(b) => crate::nvdisasm::disassemble(nvdisasm, b, hash),
                None => Err(format!("image {hash:016x} not stored")),
            });
        match l {
            Ok(all) => {
                if let Some(listing) = all.iter().find(|l| l.name == name) {
                    apply(k, listing);
                }
            }
            Err(e) => {
                if !notes.contains(e) {
                    notes.push(e.clone());
                }
            }
        }
    }
    if missing > 0 {
        let why = Missing::of(traces)
            .line()
            .map(|l| format!(": {l}"))
            .unwrap_or_default();
        notes.push(format!(
            "{missing} {} without a stored module image{why}",
            if missing == 1 { "kernel" } else { "kernels" }
        ));
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// [`annotate_kernels`] with `nvdisasm` where one was found (`Err`: why none was), saying in
/// `note` what is not shown: every instruction and line without `nvdisasm`, else those of the
/// kernels [`annotate_kernels`] names. Nothing to do without kernels.
pub fn annotate_or_say<K>(
    kernels: &mut [K],
    note: &mut Option<String>,
    traces: &[Trace],
    nvdisasm: Result<&std::path::Path, String>,
    key: impl Fn(&K) -> (Option<u64>, String),
    apply: impl FnMut(&mut K, &crate::nvdisasm::Listing),
) {
    if kernels.is_empty() {
        return;
    }
    let nvdisasm = match nvdisasm {
        Ok(n) => n,
        Err(e) => {
            *note = Some(format!("instructions and source lines not shown: {e}"));
            return;
        }
    };
    if let Some(missing) = annotate_kernels(kernels, traces, nvdisasm, key, apply) {
        *note = Some(format!("some instructions not shown: {missing}"));
    }
}
