//! The integration tests of idmint-server, in one binary (one link of the dependency tree
//! instead of one per file): each module is one area of the service, run in process. Every
//! test server comes from `idmint_testkit::TestServer`, the HTTP/1.1 and HTTP/2 clients and the
//! checks from the rest of `idmint_testkit`. A new area is a new file here and a `mod` line
//! below; a test is named `<module>::<test>` (`cargo test -p idmint-server --test integration
//! grpc::`).

mod bad_input;
mod binary;
mod claims;
mod fairness;
mod fleet;
mod formats;
mod generators;
mod grpc;
mod hygiene;
mod metrics;
mod public_ids;
mod restart;
mod shard_keys;
mod shutdown;
mod sources;
mod trace_split;
mod web;
mod window;
