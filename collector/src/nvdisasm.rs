//! nvdisasm, the CUDA toolkit's disassembler (or the `nvidia-cuda-nvdisasm` wheel's): finding
//! it, running it on a module image (a cubin), and reading its listing into each kernel's
//! instructions with their source lines (code built with `-lineinfo`). `rtrace sass`
//! ([`crate::sass`]) prints the listings; the report's PC sampling section ([`crate::pcsamp`])
//! names sampled instructions and lines with them.

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
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
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
