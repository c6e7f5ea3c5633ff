//! Which parts of the report to compute ([`Needs`]): a report of chosen sections skips the
//! passes over the records that only the others need.

use super::fold::Pending;

/// The parts of a report to compute. A part not needed is left empty, and the passes that
/// would fill it are not made; [`Needs::ALL`] computes every section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// The summaries whose exact medians are computed (API, kernels, copies, memsets): the
    /// others keep the first pass's figures, their medians unset.
    pub medians: Pending,
    /// The join of GPU and synchronization records with the calls that made them:
    /// utilisation, shared GPUs, launch latency, kernel launch and execution times,
    /// synchronizations, ranks and steps.
    pub join: bool,
    /// Exact medians of kernel launch and execution times (with the join).
    pub kern_exec: bool,
    /// Exact medians of NVTX range durations.
    pub nvtx_medians: bool,
    /// Each rank's step durations (with the join).
    pub steps: bool,
    /// Utilisation of the GPUs several processes shared (with the join).
    pub shared: bool,
    /// Memory in use over every trace.
    pub memory: bool,
    /// Kernel profiles linked to their launches and ranges.
    pub profiles: bool,
    /// GPU metrics over time, per kernel and range.
    pub gpu_metrics: bool,
}

impl Needs {
    /// Every section.
    pub const ALL: Needs = Needs {
        medians: Pending::ALL,
        join: true,
        kern_exec: true,
        nvtx_medians: true,
        steps: true,
        shared: true,
        memory: true,
        profiles: true,
        gpu_metrics: true,
    };

    /// Nothing beyond the first pass: the processes, resources, occupancy, PC sampling and
    /// source counters need no more.
    pub const FIRST_PASS: Needs = Needs {
        medians: Pending {
            api: false,
            kernels: false,
            memcpys: false,
            memsets: false,
        },
        join: false,
        kern_exec: false,
        nvtx_medians: false,
        steps: false,
        shared: false,
        memory: false,
        profiles: false,
        gpu_metrics: false,
    };
}

#[cfg(test)]
mod tests {
    use super::super::tests::awkward_files;
    use super::super::{ranks::StepNames, report_inputs, Needs};
    use crate::filter::Filter;
    use crate::output::{render, Format, RenderOptions, Section};
    use crate::read::parallel::Jobs;
    use clap::ValueEnum;
    use std::path::PathBuf;

    /// Every section, alone in each format that prints it, and a few together: the report
    /// computed for them alone is the whole report's.
    fn chosen_sections_as_in_the_whole_report(files: &[PathBuf]) {
        let steps = StepNames::default();
        let every = report_inputs(files, &Filter::default(), Jobs::ONE, &steps, Needs::ALL);
        let (traces, sections) = every.unwrap();
        let mut asked: Vec<(Format, Vec<Section>)> = Vec::new();
        for &s in Section::value_variants() {
            asked.push((Format::Table, vec![s]));
            asked.push((Format::Json, vec![s]));
            if Section::CSV.contains(&s) {
                asked.push((Format::Csv, vec![s]));
            }
        }
        asked.push((Format::Table, vec![Section::Kernels, Section::Latency]));
        asked.push((Format::Json, vec![Section::Memset, Section::Sync]));
        asked.push((Format::Csv, Vec::new()));
        for (format, chosen) in asked {
            let options = RenderOptions {
                format,
                sections: chosen.clone(),
                ..RenderOptions::default()
            };
            let needs = options.needs();
            let (t, s) = report_inputs(files, &Filter::default(), Jobs::ONE, &steps, needs)
                .unwrap_or_else(|e| panic!("{format:?} {chosen:?}: {e}"));
            assert_eq!(
                render(&t.traces, &s, &options),
                render(&traces.traces, &sections, &options),
                "{format:?} {chosen:?} ({needs:?})"
            );
        }
    }

    #[test]
    fn a_report_of_chosen_sections_is_theirs_in_the_whole_report() {
        let (dir, files) = awkward_files("needs");
        chosen_sections_as_in_the_whole_report(&files);
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
        for name in ["api_threads", "gpu", "nvtx", "profiles", "forked_child"] {
            let path = fixtures.join("fixtures").join(format!("{name}.bin"));
            chosen_sections_as_in_the_whole_report(&[path]);
        }
        chosen_sections_as_in_the_whole_report(&[fixtures.join("pcsamp/pcsamp.bin")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_section_but_the_first_pass_ones_needs_more() {
        let needs = |format, sections: Vec<Section>| {
            RenderOptions {
                format,
                sections,
                ..RenderOptions::default()
            }
            .needs()
        };
        assert_eq!(needs(Format::Table, Vec::new()), Needs::ALL);
        assert_eq!(needs(Format::Json, Vec::new()), Needs::ALL);
        // CSV prints the API summary when no section is chosen.
        let mut api = Needs::FIRST_PASS;
        api.medians.api = true;
        assert_eq!(needs(Format::Csv, Vec::new()), api);
        for s in [
            Section::Processes,
            Section::Resources,
            Section::Occupancy,
            Section::Pcsamp,
            Section::SourceCounters,
        ] {
            assert_eq!(needs(Format::Table, vec![s]), Needs::FIRST_PASS, "{s:?}");
        }
        let mut kern_exec = Needs::FIRST_PASS;
        (kern_exec.join, kern_exec.kern_exec) = (true, true);
        assert_eq!(needs(Format::Csv, vec![Section::KernExec]), kern_exec);
    }
}
