//! Integration tests of `idmint-core`: one test binary, one module per behaviour.
//!
//! | module | what it checks |
//! | --- | --- |
//! | `bulk` | `AnyBatch::extend_u64s` and `write_be` against the iterator, every layout (proptest) |
//! | `conversions` | `AnyId` with `u64`, `u128`, text and serde; layout types from `AnyId`; parts through serde (proptest) |
//! | `vectors` | every case of `testdata/seed-vectors.json`, through [`idmint_core::Layout`] |
//! | `kinds` | each layout's order, issuer and generator from a generator ID (proptest) |
//! | `layouts` | parts → ID → parts and ID → text → ID for every layout and format (proptest) |
//! | `no_panic` | parsing and decoding arbitrary input never panics (proptest) |
//! | `generator` | the generator's rules under a manual clock: order, exhaustion, marks, threads |
//! | `upstream` | the documented behaviour of elfo, LableOrg, go-flakeid and DecimalId |
//! | `shard_keys` | HotGuid shard keys per call: 1,000,000 IDs over 1,000 keys from 4 threads, and the mutations the checker must catch |
//! | `trace_split` | `trace-id`'s chunk/counter split as a parameter: elfo's by default, every split's capacity, order and round trips |
//! | `public_ids` | public IDs: round trips, domains and key versions (T25) |
//! | `upstream_edges` | the text forms the originals print or read beyond idmint's strict ones |
//! | `uuid7_conformance` | `uuid7` against the `uuid` and `ulid` crates and the TypeID specification's own cases; text round trips (proptest) |
//!
//! No test reads the wall clock: times are plain `u64` milliseconds or a `ManualClock`.

mod bulk;
mod common;
mod conversions;
mod generator;
mod kinds;
mod layouts;
mod no_panic;
mod public_ids;
mod shard_keys;
mod trace_split;
mod upstream;
mod upstream_edges;
mod uuid7_conformance;
mod vectors;
