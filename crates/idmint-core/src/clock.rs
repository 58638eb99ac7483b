//! Where time comes from: the [`Clock`] trait, the system clock (the only place in this crate
//! that reads the OS clock), a manual clock for tests, and the [`Anchor`] rule that keeps time
//! from going backwards across restarts.

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of Unix milliseconds.
///
/// Generators never call a clock; callers at the edge read one and pass the reading in.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
///
/// fn stamp(clock: &impl Clock) -> u64 {
///     clock.now_ms()
/// }
/// assert!(stamp(&SystemClock) > 1_600_000_000_000);
/// ```
pub trait Clock {
    /// The current time in Unix milliseconds.
    fn now_ms(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

/// The operating system's wall clock (`SystemTime`). A time before 1970 reads as 0.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
///
/// let a = SystemClock.now_ms();
/// assert!(SystemClock.now_ms() + 1_000 >= a);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that only moves when told to, shareable between threads. For tests.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(500);
/// assert_eq!(clock.now_ms(), 1_500);
/// clock.set(10);
/// assert_eq!(clock.now_ms(), 10);
/// ```
#[cfg(any(test, feature = "test-util"))]
#[derive(Debug, Default)]
pub struct ManualClock(std::sync::atomic::AtomicU64);

#[cfg(any(test, feature = "test-util"))]
impl ManualClock {
    /// A clock reading `now_ms`.
    pub const fn new(now_ms: u64) -> Self {
        ManualClock(std::sync::atomic::AtomicU64::new(now_ms))
    }

    /// Sets the reading, forwards or backwards.
    pub fn set(&self, now_ms: u64) {
        self.0.store(now_ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Moves the reading forwards by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(any(test, feature = "test-util"))]
impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Logical time that never goes backwards and advances at the rate of a monotonic clock.
///
/// Give it a floor (for example one millisecond past a persisted high-water mark) and feed it
/// pairs of readings: the wall clock and a monotonic clock (such as `Instant`, in ms since any
/// fixed point). It returns `max(wall, floor + monotonic time elapsed since the floor was set)`,
/// and re-anchors whenever the wall clock gets ahead, so:
///
/// - a backward wall-clock step is invisible (logical time keeps following the monotonic clock);
/// - a forward step is followed;
/// - after a restart with the wall clock behind the high-water mark, time runs at the normal rate
///   from just above the mark, and [`ahead_of_wall_ms`](Self::ahead_of_wall_ms) says by how much.
///
/// This is pure arithmetic on the readings it is given; the edges read the clocks.
///
/// # Example
///
/// ```
/// use idmint_core::Anchor;
///
/// // Restarted with the wall clock 60 s behind the persisted mark.
/// let mark = 1_700_000_060_000;
/// let mut anchor = Anchor::new(mark + 1, 1_700_000_000_000, 0);
/// assert_eq!(anchor.now_ms(1_700_000_000_000, 0), mark + 1);
/// assert_eq!(anchor.now_ms(1_700_000_000_500, 500), mark + 501);
/// assert_eq!(anchor.ahead_of_wall_ms(), 60_001);
/// // A backward step of the wall clock does not move logical time back.
/// assert_eq!(anchor.now_ms(1_600_000_000_000, 600), mark + 601);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// Logical time at the anchor point.
    base_ms: u64,
    /// Monotonic reading at the anchor point.
    base_mono_ms: u64,
    /// The last returned logical time.
    last_ms: u64,
    /// The last wall reading seen.
    last_wall_ms: u64,
}

impl Anchor {
    /// Starts logical time at `max(floor_ms, wall_ms)`, anchored at monotonic reading `mono_ms`.
    pub fn new(floor_ms: u64, wall_ms: u64, mono_ms: u64) -> Self {
        let base_ms = floor_ms.max(wall_ms);
        Anchor { base_ms, base_mono_ms: mono_ms, last_ms: base_ms, last_wall_ms: wall_ms }
    }

    /// Logical time for a pair of readings. Never less than a previous result.
    pub fn now_ms(&mut self, wall_ms: u64, mono_ms: u64) -> u64 {
        let elapsed = mono_ms.saturating_sub(self.base_mono_ms);
        let mut now = self.base_ms.saturating_add(elapsed);
        if wall_ms > now {
            // The wall clock is ahead (it stepped forward, or we caught up): follow it.
            self.base_ms = wall_ms;
            self.base_mono_ms = mono_ms;
            now = wall_ms;
        }
        self.last_ms = self.last_ms.max(now);
        self.last_wall_ms = wall_ms;
        self.last_ms
    }

    /// How far the last logical time is ahead of the last wall reading, in ms (0 if behind).
    pub fn ahead_of_wall_ms(&self) -> u64 {
        self.last_ms.saturating_sub(self.last_wall_ms)
    }
}
