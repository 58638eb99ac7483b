//! The repository's tidy rules live in this crate's test, `tests/tidy.rs`
//! (`cargo test -p idmint-tidy`); the library is empty, since a package needs a target.
