//! This crate only hosts benchmarks (`benches/`): idmint's generators beside the peer crates,
//! measured in one run. The numbers and how to reproduce them are in `BENCHMARKS.md` at the
//! workspace root.
