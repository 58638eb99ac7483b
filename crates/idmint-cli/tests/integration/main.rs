//! The black-box tests of the `idmint` binary, in one binary (one link of the dependency tree
//! instead of one per file): each module is one command or area, run against the real
//! `idmint` (`common::idmint` runs it with a clean environment, `common::Server` holds a
//! running `idmint serve`). The HTTP clients and checks come from `idmint_testkit`. A new area
//! is a new file here and a `mod` line below; a test is named `<module>::<test>`
//! (`cargo test -p idmint-cli --test integration serve::`).
//!
//! `tests/grpc_flood.rs` is a binary of its own: its floods load the machine, and the latency
//! and memory it judges were measured with no other test running beside it.

mod common;

mod analyze;
mod backends;
mod cli;
mod clock_steps;
mod conventions;
mod convert;
mod decode_auto;
mod deploy;
mod fleet;
mod fleet_postgres;
mod formats;
mod gen_store;
mod public_ids;
mod serve;
mod trace_split;
mod uuid_postgres;
mod web;
