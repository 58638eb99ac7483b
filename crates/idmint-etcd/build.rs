//! Compiles etcd's vendored `.proto` files (`proto/`: the KV, Lease, Cluster, Maintenance and
//! Lock services and their messages, from etcd v3.4.23) into Rust clients with protox (a
//! pure-Rust protobuf compiler) and tonic-prost-build, as `idmint-proto` compiles idmint's own:
//! no build of idmint needs protoc.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=proto");
    let files =
        ["mvccpb/kv.proto", "authpb/auth.proto", "etcdserverpb/rpc.proto", "v3lockpb/v3lock.proto"];
    let fds = match protox::compile(files, ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("cannot compile etcd's .proto files: {e:?}"),
    };
    if let Err(e) = tonic_prost_build::configure()
        .build_server(false)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)
    {
        panic!("cannot generate etcd's gRPC clients: {e}");
    }
}
