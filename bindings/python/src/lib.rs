//! The extension module `idmint._idmint` of the Python package `idmint`: the embedded minter
//! (`Minter`), the client of a fleet (`Client`), and the functions on IDs
//! (`decode`, `layouts`, `explain`, `obfuscate`, `reveal`). The Python package
//! (`bindings/python/python/idmint`) re-exports them with the exception classes and the fork
//! hook; `bindings/python/README.md` is the user's guide.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

mod client;
mod errors;
mod ids;
mod minter;

/// How many forks this process descends from since the module was loaded, as counted by the
/// fork hook ([`_after_fork_in_child`]).
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current fork generation.
pub(crate) fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Acquire)
}

/// The fork hook: called in a forked child (`os.register_at_fork(after_in_child=...)`), so
/// that every minter and client empties what it prefetched in the parent and builds its own
/// runtime and claim at its next call.
#[pyfunction]
fn _after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// Whether this build has the negative controls of the tests (built with
/// `IDMINT_NEGATIVE_CONTROLS=1`).
#[pyfunction]
fn _negative_controls() -> bool {
    cfg!(idmint_negative_controls)
}

/// The module.
#[pymodule]
fn _idmint(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<minter::Minter>()?;
    m.add_class::<client::Client>()?;
    m.add_function(wrap_pyfunction!(ids::_decode, m)?)?;
    m.add_function(wrap_pyfunction!(ids::layouts, m)?)?;
    m.add_function(wrap_pyfunction!(ids::_explain, m)?)?;
    m.add_function(wrap_pyfunction!(ids::obfuscate, m)?)?;
    m.add_function(wrap_pyfunction!(ids::reveal, m)?)?;
    m.add_function(wrap_pyfunction!(_after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(_negative_controls, m)?)?;
    Ok(())
}
