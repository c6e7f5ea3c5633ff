//! PC sampling: where in each kernel the samples fell, and why its warps were stalled there.
//!
//! The samples (`PcSamples` chunks) name an instruction by the CRC of its module image
//! (`cuptiGetCubinCrc`), its function and its offset in that function. The module images the
//! trace stores (`ModuleImage` chunks, with the same CRC) turn that into the SASS instruction
//! and, for code built with `-lineinfo`, the source line (`nvdisasm -g -c`, [`crate::nvdisasm`]).
//!
//! A sample's stall reason is CUPTI's (`smsp__pcsamp_warps_issue_stalled_<reason>`); each
//! reason also has a `_not_issued` twin counting the samples where the warp issued nothing.
//! "Samples" here are Nsight Compute's "Warp Stall Sampling (All Samples)": the sum over the
//! reasons without `_not_issued`; reasons are named like Nsight Compute's warp states.

use crate::model::Trace;
use crate::nvdisasm::Listing;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// PCs and lines listed per kernel in the table report.
pub const LISTED: usize = 10;

/// Everything sampled in the traces.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// Contexts sampled (set-up chunks), and the periods they used (2^N cycles), sorted.
    pub contexts: usize,
    pub periods: Vec<u32>,
    /// CUPTI's counts over every read: all samples taken, dropped by the hardware, and taken
    /// in kernels CUPTI gives no PCs for.
    pub total_samples: u64,
    pub dropped_samples: u64,
    pub non_user_samples: u64,
    /// Reads that found CUPTI's hardware buffer full.
    pub buffer_full_reads: u64,
    /// The kernels sampled, most samples first.
    pub kernels: Vec<KernelProfile>,
    /// Why sampling was off or partial (the tracer's notices about it).
    pub notes: Vec<String>,
    /// Why instructions and lines are not shown (no nvdisasm, no image), if so.
    pub sass_note: Option<String>,
}

/// One kernel (function of one module image).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelProfile {
    pub name: String,
    pub demangled: String,
    /// `cuptiGetCubinCrc` of its image, and the image's content hash when the trace has it.
    pub crc: u64,
    pub image: Option<u64>,
    /// Samples (all samples: the reasons without `_not_issued`).
    pub samples: u64,
    /// Samples where the warp issued no instruction.
    pub not_issued: u64,
    /// Samples per stall reason (short names, `long_scoreboard`), most first.
    pub stalls: Vec<(String, u64)>,
    /// Instructions sampled, most samples first (then by offset).
    pub pcs: Vec<PcRow>,
    /// Source lines sampled, most samples first; empty without line information.
    pub lines: Vec<LineRow>,
}

/// One sampled instruction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PcRow {
    /// Offset from the start of the function, bytes.
    pub offset: u64,
    pub samples: u64,
    pub not_issued: u64,
    pub stalls: Vec<(String, u64)>,
    /// The SASS instruction and its source line, when the image could be disassembled.
    pub instruction: Option<String>,
    pub line: Option<(String, u32)>,
}

/// One sampled source line: the sum of its instructions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LineRow {
    pub file: String,
    pub line: u32,
    pub samples: u64,
    pub stalls: Vec<(String, u64)>,
}

const STALL_PREFIX: &str = "smsp__pcsamp_warps_issue_stalled_";

/// Nsight Compute's name of a warp state for a short stall reason (`long_scoreboard` →
/// `Stall Long Scoreboard`); reasons it does not know keep their own name.
pub fn warp_state(short: &str) -> String {
    let name = match short {
        "selected" => return "Selected".to_string(),
        "barrier" => "Barrier",
        "branch_resolving" => "Branch Resolving",
        "dispatch_stall" => "Dispatch Stall",
        "drain" => "Drain",
        "imc_miss" => "IMC Miss",
        "lg_throttle" => "LG Throttle",
        "long_scoreboard" => "Long Scoreboard",
        "math_pipe_throttle" => "Math Pipe Throttle",
        "membar" => "Membar",
        "mio_throttle" => "MIO Throttle",
        "misc" => "Misc",
        "no_instructions" => "No Instruction",
        "not_selected" => "Not Selected",
        "short_scoreboard" => "Short Scoreboard",
        "sleeping" => "Sleeping",
        "tex_throttle" => "Tex Throttle",
        "wait" => "Wait",
        "warpgroup_arrive" => "Warpgroup Arrive",
        other => return other.to_string(),
    };
    format!("Stall {name}")
}

/// What one CUPTI stall reason counts toward.
#[derive(Clone, Copy, PartialEq)]
enum Counts {
    /// A reason's all-samples count.
    All,
    /// Its `_not_issued` twin.
    NotIssued,
    /// CUPTI's pseudo-reasons (`smsp__pcsamp_sample_count`, ...): not a warp state.
    Other,
}

fn classify(name: &str) -> (Counts, &str) {
    match name.strip_prefix(STALL_PREFIX) {
        Some(s) => match s.strip_suffix("_not_issued") {
            Some(base) => (Counts::NotIssued, base),
            None => (Counts::All, s),
        },
        None => (Counts::Other, name),
    }
}

#[derive(Default)]
struct Acc {
    samples: u64,
    not_issued: u64,
    stalls: HashMap<String, u64>,
}

impl Acc {
    fn add(&mut self, counts: Counts, reason: &str, n: u64) {
        match counts {
            Counts::All => {
                self.samples += n;
                *self.stalls.entry(reason.to_string()).or_default() += n;
            }
            Counts::NotIssued => self.not_issued += n,
            Counts::Other => {}
        }
    }
    fn merge(&mut self, o: &Acc) {
        self.samples += o.samples;
        self.not_issued += o.not_issued;
        for (k, v) in &o.stalls {
            *self.stalls.entry(k.clone()).or_default() += v;
        }
    }
}

/// Stall counts most first, then by name.
fn ranked(stalls: &HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = stalls
        .iter()
        .filter(|(_, &n)| n > 0)
        .map(|(k, &n)| (k.clone(), n))
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// The profile of `traces`, without instructions and lines (see [`annotate`]).
pub fn profile(traces: &[Trace]) -> Profile {
    let mut p = Profile::default();
    // (crc, name) → pc offset → counts
    let mut kernels: BTreeMap<(u64, String), BTreeMap<u64, Acc>> = BTreeMap::new();
    let mut images: HashMap<u64, u64> = HashMap::new();
    for t in traces {
        p.contexts += t.pc_configs.len();
        for c in &t.pc_configs {
            if !p.periods.contains(&c.period_log2) {
                p.periods.push(c.period_log2);
            }
        }
        for img in &t.module_images {
            if img.crc != 0 && crate::images::find(traces, img.hash).is_some() {
                images.entry(img.crc).or_insert(img.hash);
            }
        }
        p.notes.extend(t.pc_sampling_notes().map(String::from));
        // Stall reason names by context and index.
        let names: HashMap<(u32, u32), &str> = t
            .pc_configs
            .iter()
            .flat_map(|c| {
                c.stall_reasons
                    .iter()
                    .map(move |(i, n)| ((c.context, *i), n.as_str()))
            })
            .collect();
        for b in &t.pc_batches {
            p.total_samples += b.total_samples;
            p.dropped_samples += b.dropped_samples;
            p.non_user_samples += b.non_user_samples;
            p.buffer_full_reads += u64::from(b.hardware_buffer_full);
            for pc in &b.pcs {
                let name = b
                    .functions
                    .get(pc.function as usize)
                    .cloned()
                    .unwrap_or_default();
                let acc = kernels
                    .entry((pc.cubin_crc, name))
                    .or_default()
                    .entry(pc.pc_offset)
                    .or_default();
                for &(reason, n) in &pc.stalls {
                    let reason_name = names
                        .get(&(b.context, reason))
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| format!("reason {reason}"));
                    let (counts, short) = classify(&reason_name);
                    acc.add(counts, short, u64::from(n));
                }
            }
        }
    }
    p.periods.sort_unstable();
    for ((crc, name), pcs) in kernels {
        let mut total = Acc::default();
        let mut rows: Vec<PcRow> = pcs
            .iter()
            .map(|(&offset, a)| {
                total.merge(a);
                PcRow {
                    offset,
                    samples: a.samples,
                    not_issued: a.not_issued,
                    stalls: ranked(&a.stalls),
                    instruction: None,
                    line: None,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.offset.cmp(&b.offset)));
        p.kernels.push(KernelProfile {
            demangled: crate::demangle::demangle(&name).into_owned(),
            name,
            crc,
            image: images.get(&crc).copied(),
            samples: total.samples,
            not_issued: total.not_issued,
            stalls: ranked(&total.stalls),
            pcs: rows,
            lines: Vec::new(),
        });
    }
    p.kernels
        .sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    p
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

/// Names each sampled PC of `k` by its instruction and source line in `listing`, and sums the
/// samples per source line.
pub fn apply_listing(k: &mut KernelProfile, listing: &Listing) {
    let at: HashMap<u64, &crate::nvdisasm::Instruction> =
        listing.instructions.iter().map(|i| (i.0, i)).collect();
    let mut lines: BTreeMap<(String, u32), Acc> = BTreeMap::new();
    for row in &mut k.pcs {
        let Some((_, code, line)) = at.get(&row.offset) else {
            continue;
        };
        row.instruction = Some(code.clone());
        row.line = line.clone();
        if let Some((file, n)) = line {
            let acc = lines.entry((file.clone(), *n)).or_default();
            acc.samples += row.samples;
            acc.not_issued += row.not_issued;
            for (s, c) in &row.stalls {
                *acc.stalls.entry(s.clone()).or_default() += c;
            }
        }
    }
    k.lines = lines
        .into_iter()
        .map(|((file, line), a)| LineRow {
            file,
            line,
            samples: a.samples,
            stalls: ranked(&a.stalls),
        })
        .collect();
    k.lines
        .sort_by(|a, b| b.samples.cmp(&a.samples).then(a.line.cmp(&b.line)));
}

/// The profile of `traces` with instructions and lines, using `nvdisasm` (`--nvdisasm`), else
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

/// True when the traces were recorded with PC sampling (or tried to).
pub fn present(traces: &[Trace]) -> bool {
    traces.iter().any(|t| {
        !t.pc_configs.is_empty()
            || !t.pc_batches.is_empty()
            || t.notices
                .iter()
                .any(|n| n.message.starts_with(rtrace_format::PC_SAMPLING_NOTICE))
    })
}

/// `part` of `whole` as a percentage with one decimal.
pub fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0.0%".to_string();
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

/// The first `n` stall reasons of `stalls` with their share of `whole`:
/// `Stall Long Scoreboard 61.2%, Stall LG Throttle 36.9%`.
pub fn top_stalls(stalls: &[(String, u64)], whole: u64, n: usize) -> String {
    stalls
        .iter()
        .take(n)
        .map(|(s, c)| format!("{} {}", warp_state(s), share(*c, whole)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::{PcSample, PcSampleBatch, PcSamplingConfig};

    fn trace() -> Trace {
        let reasons = vec![
            (0, "smsp__pcsamp_sample_count".to_string()),
            (14, format!("{STALL_PREFIX}long_scoreboard")),
            (15, format!("{STALL_PREFIX}long_scoreboard_not_issued")),
            (30, format!("{STALL_PREFIX}short_scoreboard")),
            (28, format!("{STALL_PREFIX}selected")),
        ];
        let batch = |pcs: Vec<PcSample>| PcSampleBatch {
            context: 1,
            time_ns: 5,
            total_samples: 100,
            dropped_samples: 1,
            non_user_samples: 2,
            hardware_buffer_full: false,
            functions: vec!["_Z1kPf".into(), "_Z1gv".into()],
            pcs,
        };
        let pc = |function, offset, stalls: Vec<(u32, u32)>| PcSample {
            cubin_crc: 7,
            pc_offset: offset,
            function,
            function_index: function,
            stalls,
        };
        Trace {
            pc_configs: vec![PcSamplingConfig {
                context: 1,
                device: 0,
                time_ns: 1,
                period_log2: 11,
                scratch_bytes: 0,
                hardware_bytes: 0,
                stall_reasons: reasons,
            }],
            pc_batches: vec![
                batch(vec![
                    pc(0, 0x10, vec![(14, 30), (15, 20), (28, 1)]),
                    pc(0, 0x20, vec![(30, 9), (0, 50)]),
                    pc(1, 0x0, vec![(28, 4)]),
                ]),
                batch(vec![pc(0, 0x20, vec![(30, 40), (14, 1), (99, 3)])]),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn samples_add_up_per_kernel_pc_and_reason() {
        let p = profile(&[trace()]);
        assert_eq!((p.contexts, p.periods.clone()), (1, vec![11]));
        assert_eq!(
            (p.total_samples, p.dropped_samples, p.non_user_samples),
            (200, 2, 4)
        );
        assert_eq!(p.kernels.len(), 2);
        let k = &p.kernels[0];
        assert_eq!(
            (k.name.as_str(), k.demangled.as_str()),
            ("_Z1kPf", "k(float*)")
        );
        // 30 + 1 at 0x10; 9 + 40 + 1 at 0x20 (pseudo-reason 0 and unknown 99 not counted).
        assert_eq!((k.samples, k.not_issued), (81, 20));
        assert_eq!(
            k.stalls,
            vec![
                ("short_scoreboard".to_string(), 49),
                ("long_scoreboard".to_string(), 31),
                ("selected".to_string(), 1)
            ]
        );
        assert_eq!(
            k.pcs
                .iter()
                .map(|r| (r.offset, r.samples, r.not_issued))
                .collect::<Vec<_>>(),
            vec![(0x20, 50, 0), (0x10, 31, 20)]
        );
        assert_eq!(p.kernels[1].samples, 4);
        assert_eq!(
            top_stalls(&k.stalls, k.samples, 2),
            "Stall Short Scoreboard 60.5%, Stall Long Scoreboard 38.3%"
        );
    }

    #[test]
    fn instructions_and_lines_come_from_the_listing() {
        let mut p = profile(&[trace()]);
        let listing = crate::nvdisasm::parse(
            "//--------------------- .text._Z1kPf --------------------------\n\
             \t//## File \"/s/k.cu\", line 3\n\
             /*0010*/  LDG.E R2, desc[UR4][R2.64] ;\n\
             \t//## File \"/s/k.cu\", line 4\n\
             /*0020*/  FADD R0, R2, R0 ;\n\
             /*0030*/  FADD R0, R0, R0 ;\n",
            9,
        );
        apply_listing(&mut p.kernels[0], &listing[0]);
        let k = &p.kernels[0];
        assert_eq!(
            k.pcs
                .iter()
                .map(|r| (r.offset, r.instruction.as_deref(), r.line.clone()))
                .collect::<Vec<_>>(),
            vec![
                (
                    0x20,
                    Some("FADD R0, R2, R0"),
                    Some(("/s/k.cu".to_string(), 4))
                ),
                (
                    0x10,
                    Some("LDG.E R2, desc[UR4][R2.64]"),
                    Some(("/s/k.cu".to_string(), 3))
                ),
            ]
        );
        assert_eq!(
            k.lines,
            vec![
                LineRow {
                    file: "/s/k.cu".into(),
                    line: 4,
                    samples: 50,
                    stalls: vec![
                        ("short_scoreboard".into(), 49),
                        ("long_scoreboard".into(), 1)
                    ],
                },
                LineRow {
                    file: "/s/k.cu".into(),
                    line: 3,
                    samples: 31,
                    stalls: vec![("long_scoreboard".into(), 30), ("selected".into(), 1)],
                },
            ]
        );
        // Without nvdisasm the report says why instructions are missing.
        let mut p = profile(&[trace()]);
        annotate(&mut p, &[trace()], Err("nvdisasm not found".into()));
        assert_eq!(
            p.sass_note.as_deref(),
            Some("instructions and source lines not shown: nvdisasm not found")
        );
        assert_eq!(warp_state("wait"), "Stall Wait");
        assert_eq!(warp_state("selected"), "Selected");
        assert_eq!(warp_state("reason 99"), "reason 99");
    }
}
