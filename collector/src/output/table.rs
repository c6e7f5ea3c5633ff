//! `--format table`: process sections, the API summary, then (when the traces
//! hold them) NVTX ranges and external correlation ids, the resources (devices, contexts,
//! streams, modules, functions), the GPU sections, the memory and synchronization sections,
//! the ranks compared (two or more processes), kernel profiles and PC sampling, as aligned columns that fit in [`RenderOptions::width`] columns.
//!
//! Each section is written by its own file on a [`layout::Page`] (the text and the width);
//! the files read top-down: this one, then the sections, then `layout.rs`.

use super::options::{RenderOptions, Section};
use crate::model::Trace;
use crate::report::Sections;
use layout::Page;

mod api;
mod gpu;
mod gpu_metrics;
mod layout;
mod memory;
mod nvtx;
mod occupancy;
mod pcsamp;
mod process;
mod profiles;
mod ranks;
mod resources;
mod source_counters;

pub(super) fn render(traces: &[Trace], s: &Sections, options: &RenderOptions) -> String {
    let mut out = Page::new(options.width);
    let want = |section| options.wants(section);
    if want(Section::Processes) {
        for (t, c) in traces.iter().zip(&s.counts) {
            process::section(&mut out, t, c);
            out.push('\n');
        }
    }
    if want(Section::Api) {
        api::section(&mut out, traces.len(), &s.api);
        api::in_runtime_section(&mut out, traces.len(), &s.api_in_runtime);
    }
    if want(Section::Nvtx) {
        nvtx::ranges_section(&mut out, &s.nvtx);
    }
    if want(Section::External) {
        nvtx::external_section(&mut out, &s.nvtx.external);
    }
    if want(Section::Resources) {
        resources::section(&mut out, traces);
    }
    gpu::sections(&mut out, traces, s, &want, options.filter.as_deref());
    memory::sections(&mut out, s, &want);
    if want(Section::Ranks) {
        ranks::ranks_section(&mut out, &s.ranks);
    }
    if want(Section::Steps) {
        ranks::steps_section(&mut out, &s.ranks);
    }
    if want(Section::Profiles) {
        profiles::section(&mut out, &s.profiles);
    }
    if want(Section::GpuMetrics) {
        gpu_metrics::section(&mut out, &s.gpu_metrics);
    }
    if want(Section::Pcsamp) {
        pcsamp::section(&mut out, traces, options.nvdisasm.as_deref());
    }
    if want(Section::SourceCounters) {
        source_counters::section(&mut out, traces, options.nvdisasm.as_deref());
    }
    // A report of chosen sections starts with the first one, not a blank line.
    let text = out.into_text();
    if options.sections.is_empty() {
        text
    } else {
        text.trim_start_matches('\n').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_and_sync_sections_come_last() {
        let t = crate::gpu_summary::samples::memory_and_sync();
        let out = render(
            std::slice::from_ref(&t),
            &Sections::of(std::slice::from_ref(&t)),
            &RenderOptions::default(),
        );
        assert!(
            out.contains(
                "  memory records     7 allocations and frees\n  \
                 sync records       4 synchronizations\n  dropped records"
            ),
            "{out}"
        );
        // No kernels, copies or memsets: no GPU sections.
        assert!(!out.contains("GPU kernel summary"), "{out}");
        let tail = &out[out.find("\nMemory:").unwrap() + 1..];
        let expected = "\
Memory: 4 allocations, 3 frees, 1.1 MB allocated
kind    allocations  frees  allocated  peak in use  largest  never freed
device            3      2     1.1 MB       1.1 MB   1.0 MB       4.1 kB
pinned            1      1     8.2 kB       8.2 kB   8.2 kB          0 B

Synchronization: 4 synchronizations, 7.6 µs of host wait
type                 count  total wait  mean wait  max wait
stream synchronize       2      5.1 µs     2.6 µs    5.0 µs
context synchronize      1      2.0 µs     2.0 µs    2.0 µs
event synchronize        1      500 ns     500 ns    500 ns
";
        assert_eq!(tail, expected, "\n{tail}");
        // Syncs without memory records, and the other way round.
        let only_syncs = Trace {
            memory: Vec::new(),
            ..t.clone()
        };
        let one = std::slice::from_ref(&only_syncs);
        let out = render(one, &Sections::of(one), &RenderOptions::default());
        assert!(
            out.contains("\nMemory: no allocations or frees were recorded\n\nSynchronization: 4")
        );
        let only_memory = Trace {
            syncs: Vec::new(),
            ..t
        };
        let one = std::slice::from_ref(&only_memory);
        let out = render(one, &Sections::of(one), &RenderOptions::default());
        assert!(
            out.ends_with("\nSynchronization: none was recorded\n"),
            "{out}"
        );
        assert!(!render(
            &[Trace::default()],
            &Sections::of(&[Trace::default()]),
            &RenderOptions::default()
        )
        .contains("Memory"));
    }
}
