//! Source counters: per SASS instruction of the counted launches, how often it ran and what it
//! moved (`SourceCounters` chunks, CUPTI's SASS metrics), summed per kernel over its launches,
//! per source line, and Nsight Compute's two Source Counters findings.
//!
//! A kernel is a function of one module image (its cubin CRC); instructions are named by their
//! offset in the function, turned into SASS and source lines by the stored images
//! (`nvdisasm -g -c`, [`crate::nvdisasm`]), as PC sampling does.
//!
//! The findings are Nsight Compute's SourceCounters rules: **Uncoalesced Global Accesses**
//! (global sectors beyond the ideal: `smsp__sass_sectors_mem_global` −
//! `smsp__sass_sectors_mem_global_ideal`) and **Uncoalesced Shared Accesses** (shared-memory
//! wavefronts beyond the ideal, which bank conflicts cause:
//! `smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared` − `..._ideal`). A finding is made when
//! the excess is above 0; its estimated speedup is excessive ÷ total (the share of that
//! traffic the kernel would not need, taken as the share of its time: an upper bound; Nsight
//! Compute weighs it by how much the kernel depends on that unit, from counters this mode does
//! not collect: docs/source-counters.md).

use crate::model::Trace;
use crate::nvdisasm::Listing;
use rtrace_format::{
    COUNTERS, COUNTER_COUNT, GLOBAL_SECTORS, GLOBAL_SECTORS_IDEAL, SHARED_WAVEFRONTS,
    SHARED_WAVEFRONTS_IDEAL, SOURCE_COUNTERS_NOTICE,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Places listed per finding in the table report.
pub const LISTED: usize = 5;

/// The counters' values, in the order of [`COUNTERS`].
pub type Values = [u64; COUNTER_COUNT];

/// Everything counted in the traces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// Contexts set up, the chips, and the counters no chip collected.
    pub contexts: usize,
    pub chips: Vec<String>,
    pub missing: Vec<&'static str>,
    /// Launches counted, those CUPTI gave no counts for, and records CUPTI dropped.
    pub launches: u64,
    pub empty_launches: u64,
    pub dropped: u64,
    /// The kernels counted, most instructions executed first.
    pub kernels: Vec<KernelCounters>,
    /// Why source counters were off or partial (the tracer's notices).
    pub notes: Vec<String>,
    /// Why instructions and lines are not shown, if so.
    pub sass_note: Option<String>,
}

/// One kernel (function of one module image), summed over its counted launches.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelCounters {
    pub name: String,
    pub demangled: String,
    pub crc: u64,
    pub image: Option<u64>,
    pub launches: u64,
    pub totals: Values,
    /// Every instruction with a record, by offset.
    pub instructions: Vec<Row>,
    /// Source lines, in file and line order; empty without line information.
    pub lines: Vec<LineRow>,
}

/// One instruction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub offset: u64,
    pub values: Values,
    pub instruction: Option<String>,
    pub line: Option<(String, u32)>,
}

/// One source line: the sum of its instructions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineRow {
    pub file: String,
    pub line: u32,
    pub values: Values,
}

/// Which of Nsight Compute's Source Counters rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    UncoalescedGlobal,
    UncoalescedShared,
}

impl Rule {
    pub const ALL: [Rule; 2] = [Rule::UncoalescedGlobal, Rule::UncoalescedShared];

    /// Nsight Compute's name of the rule.
    pub fn title(self) -> &'static str {
        match self {
            Rule::UncoalescedGlobal => "Uncoalesced Global Accesses",
            Rule::UncoalescedShared => "Uncoalesced Shared Accesses (shared memory bank conflicts)",
        }
    }

    /// A short key (JSON, CSV).
    pub fn key(self) -> &'static str {
        match self {
            Rule::UncoalescedGlobal => "uncoalesced_global",
            Rule::UncoalescedShared => "uncoalesced_shared",
        }
    }

    /// (total, ideal) counter indices; the unit's name.
    fn counters(self) -> (usize, usize, &'static str) {
        match self {
            Rule::UncoalescedGlobal => (GLOBAL_SECTORS, GLOBAL_SECTORS_IDEAL, "sectors"),
            Rule::UncoalescedShared => (SHARED_WAVEFRONTS, SHARED_WAVEFRONTS_IDEAL, "wavefronts"),
        }
    }

    /// What `values` has beyond the ideal.
    pub fn excess(self, values: &Values) -> u64 {
        let (total, ideal, _) = self.counters();
        values[total].saturating_sub(values[ideal])
    }
}

/// A finding of one rule for one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub rule: Rule,
    pub excessive: u64,
    pub total: u64,
    /// excessive ÷ total, percent.
    pub speedup_percent: f64,
    /// Nsight Compute's wording.
    pub message: String,
    /// Where the excess is: source lines (with line information), else instructions, most
    /// first; each with its excess.
    pub places: Vec<Place>,
}

/// A line or an instruction with an excess.
#[derive(Clone, Debug, PartialEq)]
pub struct Place {
    /// `file:line`, or the instruction's offset.
    pub line: Option<(String, u32)>,
    pub offset: Option<u64>,
    pub instruction: Option<String>,
    pub excessive: u64,
}

/// The findings of kernel `k`, in [`Rule::ALL`]'s order.
pub fn findings(k: &KernelCounters) -> Vec<Finding> {
    Rule::ALL
        .iter()
        .filter_map(|&rule| {
            let (total_i, _, unit) = rule.counters();
            let excessive = rule.excess(&k.totals);
            let total = k.totals[total_i];
            if excessive == 0 || total == 0 {
                return None;
            }
            let share = excessive as f64 * 100.0 / total as f64;
            let what = match rule {
                Rule::UncoalescedGlobal => "global",
                Rule::UncoalescedShared => "shared",
            };
            let table = match rule {
                Rule::UncoalescedGlobal => "L2 Theoretical Sectors Global Excessive",
                Rule::UncoalescedShared => "L1 Wavefronts Shared Excessive",
            };
            let message = format!(
                "This kernel has uncoalesced {what} accesses resulting in a total of {excessive} excessive {unit} ({share:.0}% of the total {total} {unit}). Check the {table} places below."
            );
            let mut places: Vec<Place> = if k.lines.is_empty() {
                k.instructions
                    .iter()
                    .map(|r| Place {
                        line: r.line.clone(),
                        offset: Some(r.offset),
                        instruction: r.instruction.clone(),
                        excessive: rule.excess(&r.values),
                    })
                    .collect()
            } else {
                k.lines
                    .iter()
                    .map(|l| Place {
                        line: Some((l.file.clone(), l.line)),
                        offset: None,
                        instruction: None,
                        excessive: rule.excess(&l.values),
                    })
                    .collect()
            };
            places.retain(|p| p.excessive > 0);
            places.sort_by(|a, b| {
                b.excessive
                    .cmp(&a.excessive)
                    .then_with(|| a.offset.cmp(&b.offset))
                    .then_with(|| a.line.cmp(&b.line))
            });
            Some(Finding {
                rule,
                excessive,
                total,
                speedup_percent: share,
                message,
                places,
            })
        })
        .collect()
}

fn add(a: &mut Values, b: &Values) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// The counters of `traces`, without instructions and lines (see [`annotate`]).
pub fn profile(traces: &[Trace]) -> Profile {
    let mut p = Profile::default();
    // (crc, name) → (launches, offset → values)
    type Acc = (u64, BTreeMap<u64, Values>);
    let mut kernels: BTreeMap<(u64, String), Acc> = BTreeMap::new();
    let mut images: HashMap<u64, u64> = HashMap::new();
    let mut collected = [false; COUNTER_COUNT];
    for t in traces {
        p.contexts += t.source_counter_setups.len();
        for s in &t.source_counter_setups {
            if !p.chips.contains(&s.chip) {
                p.chips.push(s.chip.clone());
            }
            for (c, m) in collected.iter_mut().zip(&s.metrics) {
                *c |= !m.is_empty();
            }
        }
        for img in &t.module_images {
            if img.crc != 0 && crate::images::find(traces, img.hash).is_some() {
                images.entry(img.crc).or_insert(img.hash);
            }
        }
        for n in &t.notices {
            let m = &n.message;
            if m.starts_with(SOURCE_COUNTERS_NOTICE)
                && !m.starts_with(&format!("{SOURCE_COUNTERS_NOTICE} on"))
            {
                p.notes.push(m.clone());
            }
        }
        for l in &t.source_counters {
            p.launches += 1;
            p.empty_launches += u64::from(l.functions.is_empty());
            p.dropped += l.dropped;
            for f in &l.functions {
                let acc = kernels.entry((f.cubin_crc, f.name.clone())).or_default();
                acc.0 += 1;
                for i in &f.instructions {
                    add(
                        acc.1.entry(i.pc_offset).or_insert([0; COUNTER_COUNT]),
                        &i.values,
                    );
                }
            }
        }
    }
    if p.contexts > 0 {
        p.missing = COUNTERS
            .iter()
            .zip(collected)
            .filter(|(_, on)| !on)
            .map(|(c, _)| c.key)
            .collect();
    }
    for ((crc, name), (launches, pcs)) in kernels {
        let mut totals = [0; COUNTER_COUNT];
        let instructions: Vec<Row> = pcs
            .into_iter()
            .map(|(offset, values)| {
                add(&mut totals, &values);
                Row {
                    offset,
                    values,
                    instruction: None,
                    line: None,
                }
            })
            .collect();
        p.kernels.push(KernelCounters {
            demangled: crate::demangle::demangle(&name).into_owned(),
            name,
            crc,
            image: images.get(&crc).copied(),
            launches,
            totals,
            instructions,
            lines: Vec::new(),
        });
    }
    p.kernels.sort_by(|a, b| {
        b.totals[0]
            .cmp(&a.totals[0])
            .then_with(|| a.name.cmp(&b.name))
    });
    p
}

/// Names each instruction of `k` by its SASS and source line in `listing`, and sums the
/// counters per source line.
pub fn apply_listing(k: &mut KernelCounters, listing: &Listing) {
    let at: HashMap<u64, &crate::nvdisasm::Instruction> =
        listing.instructions.iter().map(|i| (i.0, i)).collect();
    let mut lines: BTreeMap<(String, u32), Values> = BTreeMap::new();
    for row in &mut k.instructions {
        let Some((_, code, line)) = at.get(&row.offset) else {
            continue;
        };
        row.instruction = Some(code.clone());
        row.line = line.clone();
        if let Some((file, n)) = line {
            add(
                lines
                    .entry((file.clone(), *n))
                    .or_insert([0; COUNTER_COUNT]),
                &row.values,
            );
        }
    }
    k.lines = lines
        .into_iter()
        .map(|((file, line), values)| LineRow { file, line, values })
        .collect();
}

/// Adds instructions and source lines to `p` from the traces' images, disassembled with
/// `nvdisasm`; says in `p.sass_note` what could not be done.
pub fn annotate(p: &mut Profile, traces: &[Trace], nvdisasm: Result<&Path, String>) {
    crate::images::annotate_or_say(
        &mut p.kernels,
        &mut p.sass_note,
        traces,
        nvdisasm,
        |k| (k.image, k.name.clone()),
        apply_listing,
    );
}

/// The counters of `traces` with instructions and lines, using `nvdisasm` (`--nvdisasm`), else
/// the one found on `PATH`.
pub fn report_profile(traces: &[Trace], nvdisasm: Option<&Path>) -> Profile {
    let mut p = profile(traces);
    if p.kernels.is_empty() {
        return p;
    }
    let found = crate::nvdisasm::find(nvdisasm);
    annotate(&mut p, traces, found.as_deref().map_err(Clone::clone));
    p
}

/// True when the traces were recorded with source counters (or tried to).
pub fn present(traces: &[Trace]) -> bool {
    traces.iter().any(|t| {
        !t.source_counter_setups.is_empty()
            || !t.source_counters.is_empty()
            || t.notices
                .iter()
                .any(|n| n.message.starts_with(SOURCE_COUNTERS_NOTICE))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::{
        InstructionCounters, SourceCounterFunction, SourceCounterLaunch, SourceCounterSetup,
    };

    fn trace() -> Trace {
        let f = |offsets: &[(u64, Values)]| SourceCounterFunction {
            cubin_crc: 7,
            function_index: 1,
            name: "_Z1kPf".into(),
            instructions: offsets
                .iter()
                .map(|&(pc_offset, values)| InstructionCounters { pc_offset, values })
                .collect(),
        };
        let launch = |n: u64, functions| SourceCounterLaunch {
            context: 1,
            correlation: 10 + n,
            launch: n,
            start_ns: 0,
            end_ns: 1,
            name: "_Z1kPf".into(),
            functions,
            dropped: 0,
        };
        let mut metrics: Vec<String> = COUNTERS.iter().map(|c| c.metrics[0].to_string()).collect();
        metrics[6] = String::new();
        Trace {
            source_counter_setups: vec![SourceCounterSetup {
                context: 1,
                device: 0,
                time_ns: 0,
                chip: "GH100".into(),
                metrics,
                lazy_patching: true,
            }],
            source_counters: vec![
                launch(
                    0,
                    vec![f(&[
                        (0x10, [4, 128, 128, 16, 0, 0, 0]),
                        (0x20, [4, 128, 0, 0, 128, 4, 0]),
                    ])],
                ),
                launch(1, vec![f(&[(0x10, [4, 128, 64, 16, 0, 0, 0])])]),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn launches_add_up_per_instruction_and_the_findings_rank_places() {
        let p = profile(&[trace()]);
        assert_eq!((p.contexts, p.launches), (1, 2));
        assert_eq!(p.chips, vec!["GH100".to_string()]);
        assert_eq!(p.missing, vec!["divergent_branch_targets"]);
        let k = &p.kernels[0];
        assert_eq!((k.demangled.as_str(), k.launches), ("k(float*)", 2));
        assert_eq!(k.totals, [12, 384, 192, 32, 128, 4, 0]);
        assert_eq!(
            k.instructions
                .iter()
                .map(|r| (r.offset, r.values))
                .collect::<Vec<_>>(),
            vec![
                (0x10, [8, 256, 192, 32, 0, 0, 0]),
                (0x20, [4, 128, 0, 0, 128, 4, 0])
            ]
        );
        let f = findings(k);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].rule, Rule::UncoalescedGlobal);
        assert_eq!((f[0].excessive, f[0].total), (160, 192));
        assert_eq!(format!("{:.2}", f[0].speedup_percent), "83.33");
        assert_eq!(
            f[0].message,
            "This kernel has uncoalesced global accesses resulting in a total of 160 excessive sectors (83% of the total 192 sectors). Check the L2 Theoretical Sectors Global Excessive places below."
        );
        assert_eq!(f[0].places.len(), 1);
        assert_eq!(
            (f[0].places[0].offset, f[0].places[0].excessive),
            (Some(0x10), 160)
        );
        assert_eq!(
            (f[1].rule, f[1].excessive, f[1].total),
            (Rule::UncoalescedShared, 124, 128)
        );
    }

    #[test]
    fn lines_sum_their_instructions_and_become_the_places() {
        let mut p = profile(&[trace()]);
        let listing = crate::nvdisasm::parse(
            "//--------------------- .text._Z1kPf --------------------------\n\
             \t//## File \"/s/k.cu\", line 3\n\
             /*0010*/  LDG.E R2, desc[UR4][R2.64] ;\n\
             \t//## File \"/s/k.cu\", line 4\n\
             /*0020*/  LDS R0, [R3] ;\n",
            9,
        );
        apply_listing(&mut p.kernels[0], &listing[0]);
        let k = &p.kernels[0];
        assert_eq!(
            k.instructions[0].instruction.as_deref(),
            Some("LDG.E R2, desc[UR4][R2.64]")
        );
        assert_eq!(
            k.lines
                .iter()
                .map(|l| (l.line, l.values))
                .collect::<Vec<_>>(),
            vec![
                (3, [8, 256, 192, 32, 0, 0, 0]),
                (4, [4, 128, 0, 0, 128, 4, 0])
            ]
        );
        let f = findings(k);
        assert_eq!(f[1].places[0].line, Some(("/s/k.cu".to_string(), 4)));
        assert_eq!(f[1].places[0].excessive, 124);
        let mut p = profile(&[trace()]);
        annotate(&mut p, &[trace()], Err("nvdisasm not found".into()));
        assert_eq!(
            p.sass_note.as_deref(),
            Some("instructions and source lines not shown: nvdisasm not found")
        );
    }
}
