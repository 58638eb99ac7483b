//! The integration tests of `idmint`, one binary with a module per area (the fork test is a
//! binary of its own: it forks, so no other test's thread may run beside it), and the helpers
//! they share.

mod fleet;
mod minter;
mod processes;
mod takeover;

/// The 64-bit values of `ids` (every test namespace here has a 64-bit layout).
fn u64s(ids: &[idmint::AnyId]) -> Vec<u64> {
    ids.iter().map(|&id| u64::try_from(id).expect("a 64-bit id")).collect()
}
