//! idmint's measurements. The criterion benchmarks in `benches/` measure the generators beside
//! the peer crates, in one run. With the feature `load`, the module `load` is the load client
//! behind `idmint bench`, which `scripts/load-bench` drives against running servers. The
//! numbers and how to reproduce them are in `BENCHMARKS.md` at the workspace root.

#[cfg(feature = "load")]
pub mod load;
