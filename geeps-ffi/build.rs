//! Gives the shared library its SONAME on Linux, `libgeeps.so.0`: programs
//! linked against it record that name, so an ABI-compatible release
//! (`libgeeps.so.0.x.y`, installed by scripts/install.sh with the links
//! `libgeeps.so.0` and `libgeeps.so`) replaces it without relinking. The
//! major number changes when the C ABI breaks.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgeeps.so.0");
    }
}
