//! A server machine's wall clock in simulated time: tokio's paused clock plus a base and an
//! offset that the nemesis steps back and forth.

use std::sync::atomic::{AtomicI64, Ordering};

use idmint_core::Clock;
use tokio::time::Instant;

/// A wall clock that follows tokio's (paused) time from `base_ms`, shifted by an offset.
///
/// # Example
///
/// ```
/// use idmint_core::Clock;
/// use idmint_sim::SimClock;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let clock = SimClock::new(1_000_000);
/// tokio::time::sleep(std::time::Duration::from_millis(5)).await;
/// assert_eq!(clock.now_ms(), 1_000_005);
/// clock.step_ms(-10);
/// assert_eq!(clock.now_ms(), 999_995);
/// # });
/// ```
#[derive(Debug)]
pub struct SimClock {
    origin: Instant,
    base_ms: u64,
    offset_ms: AtomicI64,
}

impl SimClock {
    /// A clock reading `base_ms` now.
    pub fn new(base_ms: u64) -> Self {
        SimClock { origin: Instant::now(), base_ms, offset_ms: AtomicI64::new(0) }
    }

    /// Steps the clock by `delta_ms` (negative: backwards).
    pub fn step_ms(&self, delta_ms: i64) {
        self.offset_ms.fetch_add(delta_ms, Ordering::SeqCst);
    }
}

impl Clock for SimClock {
    fn now_ms(&self) -> u64 {
        let elapsed = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.base_ms
            .saturating_add(elapsed)
            .saturating_add_signed(self.offset_ms.load(Ordering::SeqCst))
    }
}
