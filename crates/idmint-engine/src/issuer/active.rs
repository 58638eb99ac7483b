//! [`Active`]: what a lane of source `generator` issues from while it holds a claim: the
//! claim, the generator above the claim's stored mark, its logical clock and the mark.

use std::sync::atomic::{AtomicU64, Ordering};

use idmint_coord::Claim;
use idmint_core::{Anchor, AnyGenerator};

use crate::{clock::Clocks, metrics::NamespaceMetrics};

/// The generator of a held claim, with its clock and its stored mark.
#[derive(Debug)]
pub(crate) struct Active {
    pub(super) generator: AnyGenerator,
    pub(super) anchor: Anchor,
    pub(super) generator_id: u64,
    /// The stored high-water mark; the generator's ceiling never exceeds it.
    pub(super) mark_ms: AtomicU64,
    /// The last wall-clock reading, to see backward steps.
    pub(super) last_wall_ms: AtomicU64,
    /// The claim on the generator ID.
    pub(super) claim: Claim,
}

impl Active {
    /// Whether IDs may still be issued under the stored mark: false once logical time has
    /// passed it (its extension failed or is late, e.g. the coordinator is down). Always true
    /// for layouts without time (`decimal-id`), whose mark is a launch ID.
    pub(super) fn window_open(&self, clocks: &Clocks) -> bool {
        self.generator.last_ms().is_none()
            || self.anchor.now_ms(clocks.wall_ms(), clocks.mono_ms())
                <= self.mark_ms.load(Ordering::Acquire)
    }

    /// How far this lane's IDs run ahead of the wall clock reading `wall_ms`: the time in the
    /// newest ID issued, or the logical time the next one gets if that is later (read without
    /// moving the clock), minus `wall_ms`. Read at scrape time, so that it is right whether or
    /// not requests came since the wall clock moved.
    pub(super) fn ahead_of_wall_ms(&self, wall_ms: u64, mono_ms: u64) -> u64 {
        let newest = self.generator.last_ms().unwrap_or(0);
        self.anchor.peek_ms(wall_ms, mono_ms).max(newest).saturating_sub(wall_ms)
    }

    /// Logical time now: never backwards, following the monotonic clock
    /// ([`now_at`](Self::now_at) with the wall clock read now).
    #[inline(always)]
    pub(super) fn now(&self, clocks: &Clocks, metrics: &NamespaceMetrics, hot: bool) -> u64 {
        self.now_at(clocks.wall_ms(), clocks, metrics, hot)
    }

    /// Logical time at the wall clock's reading `wall`: never backwards, following the
    /// monotonic clock. Counts backward steps of the wall clock on the way.
    /// On the hot path (`hot`), the monotonic clock is read only when the wall clock reads
    /// another millisecond than the last one returned ([`Anchor::now_ms_with`]); a call that
    /// waits reads both, so that a wall clock standing still never stalls it. The last wall
    /// reading is written only when it changed: every call comes through here.
    #[inline(always)]
    pub(super) fn now_at(
        &self,
        wall: u64,
        clocks: &Clocks,
        metrics: &NamespaceMetrics,
        hot: bool,
    ) -> u64 {
        if self.last_wall_ms.load(Ordering::Relaxed) != wall {
            let previous = self.last_wall_ms.swap(wall, Ordering::Relaxed);
            if wall < previous {
                metrics.clock_backward(previous - wall);
            }
        }
        if hot {
            self.anchor.now_ms_with(wall, || clocks.mono_ms())
        } else {
            self.anchor.now_ms(wall, clocks.mono_ms())
        }
    }
}
