//! `include/geeps.h` must be exactly what cbindgen generates from this crate
//! with `geeps-ffi/cbindgen.toml`: this test regenerates it in memory and
//! fails when the committed header differs (a hand edit, or a change to the
//! exported functions without regenerating). With `GEEPS_WRITE_HEADER=1` it
//! writes the header instead, which is what `scripts/gen-header.sh` runs.

use std::path::PathBuf;

fn generate() -> Vec<u8> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("geeps-ffi/cbindgen.toml");
    let bindings = match cbindgen::generate_with_config(&crate_dir, config) {
        Ok(b) => b,
        Err(e) => panic!("cbindgen cannot parse geeps-ffi: {e}"),
    };
    let mut text = Vec::new();
    bindings.write(&mut text);
    text
}

#[test]
fn the_committed_header_is_the_generated_one() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../include/geeps.h");
    let generated = generate();
    if std::env::var_os("GEEPS_WRITE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    if committed == generated {
        return;
    }
    let (old, new) = (String::from_utf8_lossy(&committed), String::from_utf8_lossy(&generated));
    let end = || std::iter::repeat("<end of file>");
    let lines = old.lines().count().max(new.lines().count()) + 1;
    let (line, (was, is)) = old
        .lines()
        .chain(end())
        .zip(new.lines().chain(end()))
        .take(lines)
        .enumerate()
        .find(|(_, (a, b))| a != b)
        .unwrap_or((lines, ("(line endings)", "(line endings)")));
    panic!(
        "include/geeps.h is stale: run scripts/gen-header.sh and commit it.\nfirst difference, line {}:\n  \
         committed: {was}\n  generated: {is}",
        line + 1
    );
}
