//! `rtrace sass`: the SASS of the kernels in a trace's stored module images, each instruction
//! under the source line it comes from (code built with `-lineinfo`), and that line's text
//! when the source file can be found.
//!
//! The images are the cubins CUPTI handed rtrace as modules loaded (`ModuleImage` chunks),
//! found by hash in any of the traces given ([`crate::images`]);
//! `nvdisasm` (the CUDA toolkit's, or the `nvidia-cuda-nvdisasm` wheel's) disassembles them
//! ([`crate::nvdisasm`]).

use crate::model::Trace;
use crate::nvdisasm::disassemble;
use crate::source_counters::Values;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Source text lookup: a file as the line info names it, else its name in `source_dir`.
#[derive(Default)]
pub struct Sources {
    dir: Option<PathBuf>,
    files: HashMap<String, Option<Vec<String>>>,
}

impl Sources {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Sources {
            dir,
            files: HashMap::new(),
        }
    }

    /// Line `n` (from 1) of `file`, if the file can be read.
    pub fn line(&mut self, file: &str, n: u32) -> Option<&str> {
        let dir = self.dir.clone();
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            let direct = std::fs::read_to_string(file).ok();
            let text = direct.or_else(|| {
                let name = Path::new(file).file_name()?;
                std::fs::read_to_string(dir?.join(name)).ok()
            })?;
            Some(text.lines().map(str::to_string).collect())
        });
        lines
            .as_ref()?
            .get((n as usize).checked_sub(1)?)
            .map(String::as_str)
    }
}

/// A kernel's sampled instructions by offset.
type SampledPcs<'a> = HashMap<u64, &'a crate::pcsamp::PcRow>;

/// A kernel's counted instructions by offset, with its launches.
type CountedPcs = (u64, HashMap<u64, Values>);

/// Counters as `rtrace sass` prints them beside an instruction: instructions, thread
/// instructions, global sectors/ideal, shared wavefronts/ideal, divergent branch targets.
fn counter_cells(v: &Values) -> String {
    format!(
        "{:>9} {:>10} {:>13} {:>13} {:>6}",
        v[0],
        v[1],
        format!("{}/{}", v[2], v[3]),
        format!("{}/{}", v[4], v[5]),
        v[6]
    )
}

/// The listings of the kernels of `traces` whose demangled or mangled name matches `kernel`
/// (all without), one per distinct image and kernel, as text.
pub fn render(
    traces: &[Trace],
    nvdisasm: &Path,
    kernel: Option<&regex::Regex>,
    sources: &mut Sources,
) -> Result<String, String> {
    use std::fmt::Write;
    let mut out = String::new();
    let mut seen = std::collections::HashSet::new();
    let mut images = 0;
    // PC samples, when the traces have them: (image, kernel) → offset → samples and reasons.
    let profile = crate::pcsamp::profile(traces);
    let sampled: HashMap<(u64, &str), (u64, SampledPcs)> = profile
        .kernels
        .iter()
        .filter_map(|k| {
            let rows = k.pcs.iter().map(|r| (r.offset, r)).collect();
            Some(((k.image?, k.name.as_str()), (k.samples, rows)))
        })
        .collect();
    // Source counters, when the traces have them: (image, kernel) → offset → counters.
    let counters = crate::source_counters::profile(traces);
    let counted: HashMap<(u64, &str), CountedPcs> = counters
        .kernels
        .iter()
        .filter_map(|k| {
            let rows = k
                .instructions
                .iter()
                .map(|r| (r.offset, r.values))
                .collect();
            Some(((k.image?, k.name.as_str()), (k.launches, rows)))
        })
        .collect();
    for t in traces {
        for img in &t.module_images {
            let Some(bytes) = crate::images::find(traces, img.hash) else {
                continue;
            };
            if !seen.insert(img.hash) {
                continue;
            }
            images += 1;
            for k in disassemble(nvdisasm, bytes, img.hash)? {
                if kernel.is_some_and(|re| !re.is_match(&k.demangled) && !re.is_match(&k.name)) {
                    continue;
                }
                let extent = k
                    .extent
                    .map(|(o, s)| format!(", at {o:#x}, {s} bytes"))
                    .unwrap_or_default();
                let samples = sampled.get(&(k.image, k.name.as_str()));
                let counts = counted.get(&(k.image, k.name.as_str()));
                let _ = writeln!(
                    out,
                    "{}  [{}, image {:016x}{extent}, {} instructions{}{}]",
                    k.demangled,
                    k.target,
                    k.image,
                    k.instructions.len(),
                    samples
                        .map(|(n, _)| format!(
                            ", {n} PC samples: samples, share of the kernel's, instruction, stall reasons"
                        ))
                        .unwrap_or_default(),
                    counts
                        .map(|(n, _)| format!(
                            ", source counters of {n} launch{}: instructions, thread instructions, global sectors/ideal, shared wavefronts/ideal, divergent branch targets; each source line their sum",
                            if *n == 1 { "" } else { "es" }
                        ))
                        .unwrap_or_default()
                );
                // Each source line's counters: the sum of its instructions.
                let mut line_sums: HashMap<(&str, u32), Values> = HashMap::new();
                if let Some((_, rows)) = counts {
                    for (offset, _, at) in &k.instructions {
                        if let (Some((file, n)), Some(v)) = (at, rows.get(offset)) {
                            let sum = line_sums.entry((file.as_str(), *n)).or_default();
                            for (a, b) in sum.iter_mut().zip(v) {
                                *a += b;
                            }
                        }
                    }
                }
                let mut last: Option<(String, u32)> = None;
                for (offset, code, at) in &k.instructions {
                    if at.is_some() && *at != last {
                        if let Some((file, n)) = at {
                            let name = crate::text::file_name(file);
                            match sources.line(file, *n) {
                                Some(text) => {
                                    let _ = writeln!(out, "  {name}:{n}  {}", text.trim_end());
                                }
                                None => {
                                    let _ = writeln!(out, "  {name}:{n}");
                                }
                            }
                            if let Some(v) = line_sums.get(&(file.as_str(), *n)) {
                                let _ = writeln!(out, "    line sum  {}", counter_cells(v));
                            }
                        }
                        last = at.clone();
                    }
                    if let Some((_, rows)) = counts {
                        let cells = rows.get(offset).map_or_else(
                            || format!("{:>9} {:>10} {:>13} {:>13} {:>6}", "", "", "", "", ""),
                            counter_cells,
                        );
                        let _ = writeln!(out, "    /*{offset:04x}*/  {cells}  {code}");
                        continue;
                    }
                    match samples {
                        None => {
                            let _ = writeln!(out, "    /*{offset:04x}*/  {code}");
                        }
                        Some((total, rows)) => match rows.get(offset) {
                            Some(r) => {
                                let _ = writeln!(
                                    out,
                                    "    /*{offset:04x}*/  {:>9} {:>6}  {code}  <- {}",
                                    r.samples,
                                    crate::pcsamp::share(r.samples, *total),
                                    crate::pcsamp::top_stalls(&r.stalls, r.samples, 3)
                                );
                            }
                            None => {
                                let _ = writeln!(
                                    out,
                                    "    /*{offset:04x}*/  {:>9} {:>6}  {code}",
                                    "", ""
                                );
                            }
                        },
                    }
                }
                out.push('\n');
            }
        }
    }
    if images == 0 {
        let why = crate::images::Missing::of(traces)
            .line()
            .unwrap_or_else(|| "the traces hold no modules (record with GPU activity)".into());
        return Err(format!("no module images to disassemble: {why}"));
    }
    Ok(out)
}
