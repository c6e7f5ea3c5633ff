//! Gives the library the soname of the real driver, so programs linked with `-lcuda` against it
//! record a dependency on `libcuda.so.1`, as they would against NVIDIA's. Like NVIDIA's
//! (whose dynamic section has `SYMBOLIC`), it binds its own references to its own functions,
//! so a preloaded library's exports of the same names never replace them inside the driver.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic");
    println!("cargo:rerun-if-changed=build.rs");
}
