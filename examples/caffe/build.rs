//! Compiles `proto/caffe.proto` at build time, without a system `protoc`:
//! protox parses it into descriptors, prost-build writes the Rust types, and
//! the descriptor set is kept beside them for the text format (prost-reflect).

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/caffe.proto");
    let fds = protox::compile(["caffe.proto"], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("caffe_descriptor.bin"), fds.encode_to_vec())?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
