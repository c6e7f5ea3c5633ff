//! `rtrace sass`: the SASS of the kernels in a trace's stored module images, each instruction
//! under the source line it comes from (code built with `-lineinfo`), and that line's text
//! when the source file can be found.
//!
//! The images are the cubins CUPTI handed rtrace as modules loaded (`ModuleImage` chunks);
//! `nvdisasm` (the CUDA toolkit's, or the `nvidia-cuda-nvdisasm` wheel's) disassembles them.

use crate::model::Trace;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One kernel's listing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The mangled name, and its demangled form.
    pub name: String,
    pub demangled: String,
    /// `sm_90`, ... (nvdisasm's `.target`).
    pub target: String,
    /// The image's content hash.
    pub image: u64,
    /// Where the function's code is in the image, and its size (from the symbol table).
    pub extent: Option<(u64, u64)>,
    /// Instructions: (offset, text, source location `(file, line)` if known).
    pub instructions: Vec<Instruction>,
}

/// One instruction: its offset in the function, its text, and its source `(file, line)`.
pub type Instruction = (u64, String, Option<(String, u32)>);

/// Finds nvdisasm: `explicit`, else on `PATH`.
pub fn find_nvdisasm(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--nvdisasm {}: no such file", p.display()))
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("nvdisasm"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "nvdisasm not found on PATH: install the CUDA toolkit or the nvidia-cuda-nvdisasm \
             wheel, or name it with --nvdisasm PATH"
                .to_string()
        })
}

/// Disassembles `cubin` with `nvdisasm` (`-g -c`: line info, code only) into listings.
pub fn disassemble(nvdisasm: &Path, cubin: &[u8], image: u64) -> Result<Vec<Listing>, String> {
    let dir = std::env::temp_dir().join(format!("rtrace-sass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = dir.join(format!("{image:016x}.cubin"));
    std::fs::write(&file, cubin).map_err(|e| format!("{}: {e}", file.display()))?;
    let out = Command::new(nvdisasm)
        .args(["-g", "-c"])
        .arg(&file)
        .output()
        .map_err(|e| format!("running {}: {e}", nvdisasm.display()));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir(&dir);
    let out = out?;
    if !out.status.success() {
        return Err(format!(
            "{} failed on image {image:016x}: {}",
            nvdisasm.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut listings = parse(&String::from_utf8_lossy(&out.stdout), image);
    if let Ok(functions) = crate::cubin::functions(cubin) {
        for l in &mut listings {
            l.extent = functions
                .iter()
                .find(|f| f.name == l.name)
                .map(|f| (f.offset, f.size));
        }
    }
    Ok(listings)
}

/// Parses `nvdisasm -g -c` output.
pub fn parse(text: &str, image: u64) -> Vec<Listing> {
    let mut target = String::new();
    let mut out: Vec<Listing> = Vec::new();
    let mut line: Option<(String, u32)> = None;
    for l in text.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix(".target") {
            target = rest.trim().to_string();
        } else if let Some(rest) = t.strip_prefix("//--------------------- .text.") {
            let name = rest.split_whitespace().next().unwrap_or("").to_string();
            out.push(Listing {
                demangled: crate::demangle::demangle(&name).into_owned(),
                name,
                target: target.clone(),
                image,
                extent: None,
                instructions: Vec::new(),
            });
            line = None;
        } else if let Some(rest) = t.strip_prefix("//## File \"") {
            // //## File "PATH", line N
            if let Some((file, n)) = rest.split_once("\", line ") {
                let n: u32 = n
                    .split(|c: char| !c.is_ascii_digit())
                    .next()
                    .unwrap_or("")
                    .parse()
                    .unwrap_or(0);
                line = Some((file.to_string(), n));
            }
        } else if let Some(rest) = t.strip_prefix("/*") {
            // /*0010*/   S2R R0, SR_TID.X ;
            let Some((offset, code)) = rest.split_once("*/") else {
                continue;
            };
            let Ok(offset) = u64::from_str_radix(offset.trim(), 16) else {
                continue;
            };
            let code = code.trim().trim_end_matches(';').trim().to_string();
            if let Some(k) = out.last_mut() {
                k.instructions.push((offset, code, line.clone()));
            }
        }
    }
    out
}

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
    for t in traces {
        for img in &t.module_images {
            let Some(bytes) = t.images.get(&img.hash) else {
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
                let _ = writeln!(
                    out,
                    "{}  [{}, image {:016x}{extent}, {} instructions{}]",
                    k.demangled,
                    k.target,
                    k.image,
                    k.instructions.len(),
                    samples
                        .map(|(n, _)| format!(
                            ", {n} PC samples: samples, share of the kernel's, instruction, stall reasons"
                        ))
                        .unwrap_or_default()
                );
                let mut last: Option<(String, u32)> = None;
                for (offset, code, at) in &k.instructions {
                    if at.is_some() && *at != last {
                        if let Some((file, n)) = at {
                            let name = Path::new(file)
                                .file_name()
                                .map(|f| f.to_string_lossy().into_owned())
                                .unwrap_or_else(|| file.clone());
                            match sources.line(file, *n) {
                                Some(text) => {
                                    let _ = writeln!(out, "  {name}:{n}  {}", text.trim_end());
                                }
                                None => {
                                    let _ = writeln!(out, "  {name}:{n}");
                                }
                            }
                        }
                        last = at.clone();
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
        return Err(
            "no module images in the traces (record with GPU activity; RTRACE_MODULE_IMAGES=0 \
             leaves them out)"
                .to_string(),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvdisasm_output_is_parsed_by_kernel_with_lines() {
        let text = "\t.target\tsm_90\n\
            //--------------------- .text._Z4stepPfi   --------------------------\n\
            \t//## File \"/src/k.cu\", line 7\n\
            /*0000*/                   LDC R1, c[0x0][0x28] ;\n\
            \t//## File \"/src/k.cu\", line 8\n\
            /*0010*/                   S2R R0, SR_TID.X ;\n\
            /*0020*/               @P0 EXIT ;\n";
        let l = parse(text, 5);
        assert_eq!(
            l,
            vec![Listing {
                name: "_Z4stepPfi".into(),
                demangled: "step(float*, int)".into(),
                target: "sm_90".into(),
                image: 5,
                extent: None,
                instructions: vec![
                    (
                        0,
                        "LDC R1, c[0x0][0x28]".into(),
                        Some(("/src/k.cu".into(), 7))
                    ),
                    (
                        0x10,
                        "S2R R0, SR_TID.X".into(),
                        Some(("/src/k.cu".into(), 8))
                    ),
                    (0x20, "@P0 EXIT".into(), Some(("/src/k.cu".into(), 8))),
                ],
            }]
        );
    }
}
