//! Regenerates `include/geeps.h` from this crate's source with cbindgen,
//! only when built with `--features header` (scripts/gen-header.sh). A
//! normal build never writes outside the target directory.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "header")]
    header::generate();
}

#[cfg(feature = "header")]
mod header {
    use std::path::PathBuf;

    pub fn generate() {
        let crate_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
        let out = crate_dir.join("../include/geeps.h");
        println!("cargo:rerun-if-changed=src");
        println!("cargo:rerun-if-changed=cbindgen.toml");
        // A hand edit of the header is overwritten by the next build.
        println!("cargo:rerun-if-changed={}", out.display());
        let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("geeps-ffi/cbindgen.toml");
        match cbindgen::generate_with_config(&crate_dir, config) {
            Ok(bindings) => {
                bindings.write_to_file(&out);
            }
            Err(e) => panic!("cbindgen could not generate {}: {e}", out.display()),
        }
    }
}
