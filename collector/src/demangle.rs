//! Kernel names for display: Itanium C++ symbols (`_Z...`) demangled with the
//! `cpp_demangle` crate, anything else shown as it is.

use std::borrow::Cow;

/// Names longer than this are shown mangled (they are not worth the work).
const MAX_MANGLED_LEN: usize = 16 << 10;

/// `symbol` demangled for display: `_Z6vecaddPKfS0_Pfi` →
/// `vecadd(float const*, float const*, float*, int)`.
///
/// A name that is not an Itanium C++ symbol (an `extern "C"` kernel, a
/// `kernel#ID` placeholder) or that cannot be demangled is returned unchanged.
/// Never panics.
pub fn demangle(symbol: &str) -> Cow<'_, str> {
    if !symbol.starts_with("_Z") || symbol.len() > MAX_MANGLED_LEN {
        return Cow::Borrowed(symbol);
    }
    // cpp_demangle is fuzzed and bounds its recursion; the unwind guard is a
    // last resort so that one odd name can never take the report down.
    let demangled = std::panic::catch_unwind(|| {
        cpp_demangle::Symbol::new(symbol.as_bytes())
            .ok()
            .and_then(|s| s.demangle().ok())
    });
    match demangled {
        Ok(Some(name)) if !name.is_empty() => Cow::Owned(name),
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
             std::array<char*, (unsigned long)1> >(int, at::native::FillFunctor<float>, \
             std::array<char*, (unsigned long)1>)"
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
}
