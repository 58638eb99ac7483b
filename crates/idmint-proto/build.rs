//! Compiles `proto/idmint/v1/idmint.proto` into Rust for the `grpc` feature, with protox
//! (a pure-Rust protobuf compiler) and tonic-prost-build: no build of idmint needs protoc.
//! Without the feature it does nothing.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "grpc")]
    grpc();
}

/// Parses the .proto files and writes `idmint.v1.rs` (messages, client and server) to
/// `OUT_DIR`.
#[cfg(feature = "grpc")]
fn grpc() {
    println!("cargo:rerun-if-changed=proto");
    let fds = match protox::compile(["idmint/v1/idmint.proto"], ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("cannot compile proto/idmint/v1/idmint.proto: {e:?}"),
    };
    if let Err(e) = tonic_prost_build::configure().emit_rerun_if_changed(false).compile_fds(fds) {
        panic!("cannot generate the gRPC code: {e}");
    }
}
