//! What a takeover of a paused holder's generator ID let both holders do: the record the etcd
//! and Postgres coordinator tests (`etcd.rs`, `postgres_coordinator.rs`) each fill and judge.

use std::time::Duration;

use idmint_coord::ClaimState;

/// What a takeover of a paused holder's generator ID let both holders do.
#[derive(Debug)]
pub(crate) struct Takeover {
    /// The last mark (the end of the window) the paused holder stored before the pause.
    pub(crate) before_pause: u64,
    /// The mark the new holder's claim carried; it starts right above it.
    pub(crate) new_holder_read: Option<u64>,
    /// Whether the paused holder could still store a mark after the takeover.
    pub(crate) old_holder_stored_after: bool,
    /// The old holder's claim state when it tried (a stale `Held` proves the fence refused).
    pub(crate) old_state: ClaimState,
    /// From the pause to the new holder's claim.
    pub(crate) takeover: Duration,
}

impl Takeover {
    /// Whether the two holders' windows overlap, so that both could issue the same time with
    /// the same generator ID: the new holder starts right above the mark it read; the old one
    /// may issue up to the last mark it stored.
    pub(crate) fn duplicates_possible(&self) -> bool {
        let new_start = self.new_holder_read.map_or(0, |mark| mark + 1);
        let old_end = if self.old_holder_stored_after { u64::MAX } else { self.before_pause };
        new_start <= old_end
    }
}
