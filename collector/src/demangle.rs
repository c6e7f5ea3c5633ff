//! Kernel names for display: Itanium C++ symbols (`_Z...`) demangled exactly as `c++filt`
//! and the PyTorch profiler write them, anything else shown as it is.
//!
//! The demangler is libstdc++'s `__cxa_demangle` ([`crate::sys::demangle`]): the GNU
//! toolchain's own (libiberty's `cp-demangle.c`, which `c++filt` runs), and the one PyTorch's
//! profiler calls, so names join with theirs. The `cpp_demangle` crate used before wrote 8 of
//! the 20 names of `demangle.tsv` (mangled by g++ from code shaped like PyTorch's and
//! CUTLASS's kernels, with `c++filt`'s output beside each) differently: `(unsigned long)2` for
//! `2ul`, and a `void ` before a function template named inside a template argument; the
//! issue that asked for this measured 7 of 30 distinct names of a PyTorch run.
//! One known difference from `c++filt` remains: `c++filt` spells out the standard
//! abbreviations `Ss`, `Si`, `So`, `Sd` (`std::basic_string<char, std::char_traits<char>,
//! std::allocator<char> >`) where `__cxa_demangle` and the PyTorch profiler write
//! `std::string`; no kernel can take those types.

use std::borrow::Cow;

/// Names longer than this are shown mangled (they are not worth the work).
const MAX_MANGLED_LEN: usize = 16 << 10;

/// `symbol` demangled for display: `_Z6vecaddPKfS0_Pfi` →
/// `vecadd(float const*, float const*, float*, int)`.
///
/// A name that is not an Itanium C++ symbol (an `extern "C"` kernel, a
/// `kernel#ID` placeholder) or that cannot be demangled is returned unchanged.
pub fn demangle(symbol: &str) -> Cow<'_, str> {
    if !symbol.starts_with("_Z") || symbol.len() > MAX_MANGLED_LEN {
        return Cow::Borrowed(symbol);
    }
    match crate::sys::demangle::cxa_demangle(symbol) {
        Some(name) if !name.is_empty() => Cow::Owned(name),
        _ => Cow::Borrowed(symbol),
    }
}

#[cfg(test)]
mod tests {
    use super::demangle;

    #[test]
    fn plain_functions() {
        assert_eq!(
            demangle("_Z6vecaddPKfS0_Pfi"),
            "vecadd(float const*, float const*, float*, int)"
        );
        assert_eq!(demangle("_Z4loopv"), "loop()");
        assert_eq!(demangle("_ZN5space3fooEibc"), "space::foo(int, bool, char)");
    }

    #[test]
    fn templates() {
        assert_eq!(
            demangle("_Z6kernelIfLi256EEvPT_i"),
            "void kernel<float, 256>(float*, int)"
        );
        assert_eq!(
            demangle(
                "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
            ),
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, \
             std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, \
             std::array<char*, 1ul>)"
        );
    }

    #[test]
    fn data_symbols() {
        assert_eq!(demangle("_Z6vecadd"), "vecadd");
        assert_eq!(demangle("_ZN2ns5tableE"), "ns::table");
    }

    #[test]
    fn other_names_are_kept() {
        for name in [
            "vecadd",
            "kernel#7",
            "",
            "_Z",
            "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_",
            "_Z999999999999999999999x",
            "_ZZZZZZZZZZZZZZ",
        ] {
            assert_eq!(demangle(name), name, "{name:?}");
        }
        let deep = format!("_Z1f{}i{}", "PFv".repeat(5000), "E".repeat(5000));
        assert_eq!(demangle(&deep), deep.as_str());
        let long = format!("_Z{}", "x".repeat(super::MAX_MANGLED_LEN));
        assert_eq!(demangle(&long), long.as_str());
    }

    /// The committed pairs: (mangled, what `c++filt` wrote).
    fn golden() -> Vec<(&'static str, &'static str)> {
        include_str!("demangle.tsv")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| l.split_once('\t').expect("a tab between the two names"))
            .collect()
    }

    #[test]
    fn pytorch_and_cutlass_names_match_the_committed_cxxfilt_output() {
        let pairs = golden();
        assert_eq!(pairs.len(), 20);
        for (mangled, expected) in pairs {
            assert_eq!(demangle(mangled), expected, "{mangled}");
        }
        assert_eq!(
            demangle(
                "_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_23direct_copy_kernel_cudaERNS_\
                 18TensorIteratorBaseEENKUlvE0_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_"
            ),
            "void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda(\
             at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() \
             const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::direct_copy_kernel_\
             cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator\
             ()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
        );
    }

    /// The same names through the `c++filt` of this machine, where there is one.
    #[test]
    fn names_match_the_installed_cxxfilt() {
        use std::io::Write;
        let pairs = golden();
        let child = std::process::Command::new("c++filt")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("no c++filt on PATH: the committed pairs only");
            return;
        };
        let input: String = pairs.iter().map(|(m, _)| format!("{m}\n")).collect();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(lines.len(), pairs.len());
        for ((mangled, _), filtered) in pairs.iter().zip(lines) {
            assert_eq!(demangle(mangled), filtered, "{mangled}");
        }
    }
}
