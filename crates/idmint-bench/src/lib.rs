//! idmint's measurements. The criterion benchmarks in `benches/` measure the generators beside
//! the peer crates, in one run. The load client behind `idmint bench` is the `idmint-load`
//! crate. The numbers and how to reproduce them are in `BENCHMARKS.md` at the workspace root.
