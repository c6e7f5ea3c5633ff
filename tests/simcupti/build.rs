//! Gives the library the soname of NVIDIA's CUPTI 13, so programs linked with `-lcupti` against
//! it record a dependency on `libcupti.so.13`, as they would against the real one.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcupti.so.13");
    println!("cargo:rerun-if-changed=build.rs");
}
