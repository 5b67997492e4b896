//! Gives the shared library its SONAME on Linux. The SONAME names the ABI:
//! the version's first non-zero component and everything before it (0.2.x
//! ships `libgeeps.so.0.2`, 1.4.x `libgeeps.so.1`), the part semver says
//! changes when the C ABI breaks. Programs linked against it record that
//! name, so a compatible release (installed by scripts/install.sh with the
//! links `libgeeps.so.<abi>` and `libgeeps.so`) replaces it without
//! relinking, and an incompatible one is refused by the loader instead of
//! crashing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
        let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
        let abi = if major == "0" { format!("0.{minor}") } else { major };
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgeeps.so.{abi}");
    }
}
