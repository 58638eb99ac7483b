//! Compiles `proto/ferroid/ferroid.proto` (ferroid-tonic-server's contract, copied from the
//! crate ferroid-tonic-core) into a Rust client, with protox and tonic-prost-build, the way
//! idmint-proto compiles its own .proto: no build needs protoc. (ferroid-tonic-core itself
//! runs protoc in its build script, so it is not a dependency.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    ferroid();
}

/// Parses the .proto file and writes `ferroid.rs` (messages and client, no server) to
/// `OUT_DIR`.
fn ferroid() {
    println!("cargo:rerun-if-changed=proto");
    let fds = match protox::compile(["ferroid/ferroid.proto"], ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("cannot compile proto/ferroid/ferroid.proto: {e:?}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_server(false)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)
    {
        panic!("cannot generate the ferroid gRPC client: {e}");
    }
}
