//! Compiles the admin endpoint's gRPC schema (proto/admin.proto) when the
//! `admin` feature is on: protox parses it (no system protoc), tonic-build
//! generates the service, and the descriptor set is kept for reflection.

fn main() {
    println!("cargo:rerun-if-changed=proto/admin.proto");
    #[cfg(feature = "admin")]
    admin();
}

#[cfg(feature = "admin")]
fn admin() {
    use prost::Message;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let fds = protox::compile(["proto/admin.proto"], ["proto"]).unwrap_or_else(|e| panic!("proto/admin.proto: {e}"));
    std::fs::write(out.join("admin_descriptor.bin"), fds.encode_to_vec()).expect("descriptor set written");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .unwrap_or_else(|e| panic!("generating the admin service: {e}"));
}
