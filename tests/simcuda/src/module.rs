//! Module images and the built-in kernels.
//!
//! An image for `cuModuleLoadData` is NUL-terminated text:
//!
//! ```text
//! simcuda-module
//! # a comment
//! kernel vecadd 2000
//! kernel fill_u32 500
//! ```
//!
//! The first line is exactly `simcuda-module`; each `kernel <name> <ns>` line declares a kernel
//! and its duration in virtual nanoseconds. Blank lines and lines starting with `#` are ignored;
//! anything else, a duplicate name or a missing magic line makes the image invalid.
//!
//! PTX text is accepted too (so a sample that embeds PTX runs on the simulator): every
//! `.entry <name>(` declares a kernel lasting [`PTX_KERNEL_NS`] (override with
//! `SIMCUDA_KERNEL_NS`). The PTX is not run.

use std::collections::BTreeSet;

pub const MAGIC: &str = "simcuda-module";

/// Duration of a kernel declared by PTX `.entry`, in virtual ns.
pub const PTX_KERNEL_NS: u64 = 1000;

/// Kernels declared by `.entry` in PTX text; `None` if it is not PTX.
fn parse_ptx(text: &str) -> Option<Vec<(String, u64)>> {
    if !text.lines().any(|l| l.trim_start().starts_with(".version")) {
        return None;
    }
    let mut kernels: Vec<(String, u64)> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(i) = words.iter().position(|w| *w == ".entry") {
            let name = words.get(i + 1)?.split('(').next()?.trim();
            if !name.is_empty() && !kernels.iter().any(|(n, _)| n == name) {
                kernels.push((name.to_string(), PTX_KERNEL_NS));
            }
        }
    }
    Some(kernels)
}

/// Parses an image's text into `(kernel name, duration ns)` pairs.
pub fn parse(text: &str) -> Option<Vec<(String, u64)>> {
    if let Some(k) = parse_ptx(text) {
        return Some(k);
    }
    let mut lines = text.lines().map(str::trim);
    if lines.next()? != MAGIC {
        return None;
    }
    let mut kernels = Vec::new();
    let mut seen = BTreeSet::new();
    for line in lines {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some("kernel"), Some(name), Some(ns), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return None;
        };
        let ns = ns.parse::<u64>().ok()?;
        if !seen.insert(name) {
            return None;
        }
        kernels.push((name.to_string(), ns));
    }
    Some(kernels)
}

/// Kernels that do real work on their `kernelParams` when a module declares them by this name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `fill_u32(CUdeviceptr dst, unsigned int value, unsigned int n)`: `dst[i] = value`.
    FillU32,
    /// `add_u32(CUdeviceptr dst, unsigned int value, unsigned int n)`: `dst[i] += value`
    /// (wrapping).
    AddU32,
    /// `vecadd_f32(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, unsigned int n)`:
    /// `c[i] = a[i] + b[i]`.
    VecaddF32,
}

impl Builtin {
    pub fn by_name(name: &str) -> Option<Builtin> {
        match name {
            "fill_u32" => Some(Builtin::FillU32),
            "add_u32" => Some(Builtin::AddU32),
            "vecadd_f32" => Some(Builtin::VecaddF32),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptx_entries() {
        let ptx = ".version 8.0\n.target sm_52\n.visible .entry vecadd(\n.param .u64 a\n)\n{ ret; }\n.visible .entry scale (\n)\n";
        assert_eq!(
            parse(ptx).unwrap(),
            vec![("vecadd".to_string(), 1000), ("scale".to_string(), 1000)]
        );
    }

    #[test]
    fn parses() {
        let k = parse("simcuda-module\n\n# c\nkernel vecadd 2000\r\nkernel fill 500\n").unwrap();
        assert_eq!(
            k,
            vec![("vecadd".to_string(), 2000), ("fill".to_string(), 500)]
        );
        assert_eq!(parse("simcuda-module").unwrap(), vec![]);
        assert!(parse("").is_none());
        assert!(parse("\x7fELF").is_none());
        assert!(parse("simcuda-module\nkernel a\n").is_none());
        assert!(parse("simcuda-module\nkernel a 1 2\n").is_none());
        assert!(parse("simcuda-module\nkernel a 1\nkernel a 2\n").is_none());
        assert!(parse("simcuda-module\nfunction a 1\n").is_none());
    }
}
