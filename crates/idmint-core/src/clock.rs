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

    /// Whether this clock is [`SystemClock`] (or a reference to it): a caller that holds a
    /// clock behind `dyn Clock` may then read the system clock directly, without the indirect
    /// call. False for every other clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Clock, ManualClock, SystemClock};
    ///
    /// assert!(SystemClock.is_system());
    /// assert!(!ManualClock::new(1).is_system());
    /// ```
    fn is_system(&self) -> bool {
        false
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    fn is_system(&self) -> bool {
        (**self).is_system()
    }
}

impl<C: Clock + ?Sized> Clock for std::sync::Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    fn is_system(&self) -> bool {
        (**self).is_system()
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
    #[inline]
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    fn is_system(&self) -> bool {
        true
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
/// fixed point). Logical time is `monotonic + offset`, where the offset starts at
/// `max(floor, wall) − monotonic` and only ever grows, to `wall − monotonic` whenever the wall
/// clock is ahead. So:
///
/// - a backward wall-clock step is invisible: logical time keeps following the monotonic clock;
/// - a forward step is followed;
/// - after a restart with the wall clock behind the high-water mark, time runs at the normal rate
///   from just above the mark, and [`ahead_of_wall_ms`](Self::ahead_of_wall_ms) says by how much.
///
/// [`now_ms_with`](Self::now_ms_with) is the hot path: while the wall clock reads the very
/// millisecond last returned, it returns it without reading the monotonic clock, so a
/// generator reads both clocks once per millisecond, not once per ID.
///
/// It is pure arithmetic on the readings it is given (the edges read the clocks), lock-free and
/// `Sync`: every request of a server can read it.
///
/// # Example
///
/// ```
/// use idmint_core::Anchor;
///
/// // Restarted with the wall clock 60 s behind the persisted mark.
/// let mark = 1_700_000_060_000;
/// let anchor = Anchor::new(mark + 1, 1_700_000_000_000, 0);
/// assert_eq!(anchor.now_ms(1_700_000_000_000, 0), mark + 1);
/// assert_eq!(anchor.now_ms(1_700_000_000_500, 500), mark + 501);
/// assert_eq!(anchor.ahead_of_wall_ms(), 60_001);
/// // A backward step of the wall clock does not move logical time back.
/// assert_eq!(anchor.now_ms(1_600_000_000_000, 600), mark + 601);
/// // Once the wall clock is ahead again, logical time follows it.
/// assert_eq!(anchor.now_ms(mark + 10_000, 700), mark + 10_000);
/// ```
#[derive(Debug)]
pub struct Anchor {
    /// Logical time minus the monotonic reading; only grows.
    offset: std::sync::atomic::AtomicU64,
    /// The last wall reading seen, for [`ahead_of_wall_ms`](Self::ahead_of_wall_ms).
    last_wall_ms: std::sync::atomic::AtomicU64,
    /// The last logical time returned.
    last_ms: std::sync::atomic::AtomicU64,
}

impl Anchor {
    /// Starts logical time at `max(floor_ms, wall_ms)`, at monotonic reading `mono_ms`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Anchor;
    ///
    /// assert_eq!(Anchor::new(5, 100, 0).now_ms(100, 0), 100);
    /// ```
    pub fn new(floor_ms: u64, wall_ms: u64, mono_ms: u64) -> Self {
        let start = floor_ms.max(wall_ms);
        Anchor {
            offset: std::sync::atomic::AtomicU64::new(start.saturating_sub(mono_ms)),
            last_wall_ms: std::sync::atomic::AtomicU64::new(wall_ms),
            last_ms: std::sync::atomic::AtomicU64::new(start),
        }
    }

    /// Logical time for a pair of readings. Never less than a previous result, provided the
    /// monotonic readings do not go backwards.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Anchor;
    ///
    /// let anchor = Anchor::new(0, 1_000, 0);
    /// assert_eq!(anchor.now_ms(1_010, 10), 1_010);
    /// assert_eq!(anchor.now_ms(900, 20), 1_020);
    /// ```
    pub fn now_ms(&self, wall_ms: u64, mono_ms: u64) -> u64 {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
        #[cfg(idmint_negative_controls)]
        if clock_guard_disabled() {
            self.last_wall_ms.store(wall_ms, Relaxed);
            return wall_ms;
        }
        let mut offset = self.offset.load(Acquire);
        if wall_ms > mono_ms.saturating_add(offset) {
            // The wall clock is ahead (it stepped forward, or caught up): follow it.
            offset = offset.max(wall_ms - mono_ms);
            offset = self.offset.fetch_max(offset, AcqRel).max(offset);
        }
        self.last_wall_ms.store(wall_ms, Relaxed);
        let now = mono_ms.saturating_add(offset);
        // Readings taken by racing threads may arrive out of order; never return less than
        // what was already returned.
        self.last_ms.fetch_max(now, AcqRel).max(now)
    }

    /// The hot path of [`now_ms`](Self::now_ms): while the wall clock reads the millisecond
    /// last returned, that millisecond, without reading the monotonic clock (`mono_ms` is
    /// called only when the wall clock reads another). The result is one `now_ms` could have
    /// returned a moment earlier; a caller that finds that millisecond's IDs used up waits and
    /// reads both clocks (`now_ms`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Anchor;
    ///
    /// let anchor = Anchor::new(0, 1_000, 0);
    /// // The wall clock reads the millisecond last returned: the monotonic clock is not read.
    /// assert_eq!(anchor.now_ms_with(1_000, || unreachable!()), 1_000);
    /// // Another millisecond: both clocks, as `now_ms`.
    /// assert_eq!(anchor.now_ms_with(1_010, || 10), 1_010);
    /// assert_eq!(anchor.now_ms_with(900, || 20), 1_020);
    /// ```
    #[inline(always)]
    pub fn now_ms_with(&self, wall_ms: u64, mono_ms: impl FnOnce() -> u64) -> u64 {
        use std::sync::atomic::Ordering::Acquire;
        #[cfg(idmint_negative_controls)]
        if clock_guard_disabled() {
            return self.now_ms(wall_ms, 0);
        }
        let last = self.last_ms.load(Acquire);
        if wall_ms == last {
            return last;
        }
        self.now_ms(wall_ms, mono_ms())
    }

    /// The logical time that [`now_ms`](Self::now_ms) would return for these readings, without
    /// recording anything: for a gauge read at any moment, which must not move the clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Anchor;
    ///
    /// // Started 60 s ahead of the wall clock (above a stored mark).
    /// let anchor = Anchor::new(1_060_000, 1_000_000, 0);
    /// assert_eq!(anchor.peek_ms(1_000_500, 500), 1_060_500);
    /// // Unlike `now_ms`, nothing was recorded.
    /// assert_eq!(anchor.now_ms(1_000_100, 100), 1_060_100);
    /// // A wall clock ahead of logical time is followed.
    /// assert_eq!(anchor.peek_ms(2_000_000, 200), 2_000_000);
    /// ```
    pub fn peek_ms(&self, wall_ms: u64, mono_ms: u64) -> u64 {
        use std::sync::atomic::Ordering::Acquire;
        #[cfg(idmint_negative_controls)]
        if clock_guard_disabled() {
            return wall_ms;
        }
        let offset = self.offset.load(Acquire).max(wall_ms.saturating_sub(mono_ms));
        mono_ms.saturating_add(offset).max(self.last_ms.load(Acquire))
    }

    /// How far the last logical time is ahead of the last wall reading, in ms (0 if behind).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Anchor;
    ///
    /// let anchor = Anchor::new(2_000, 1_000, 0);
    /// anchor.now_ms(1_000, 0);
    /// assert_eq!(anchor.ahead_of_wall_ms(), 1_000);
    /// ```
    pub fn ahead_of_wall_ms(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        self.last_ms.load(Relaxed).saturating_sub(self.last_wall_ms.load(Relaxed))
    }
}

#[cfg(idmint_negative_controls)]
static NO_CLOCK_GUARD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control for the chaos
/// harness. From now on, in this process, [`Anchor::now_ms`] returns the wall clock as it is
/// (backwards too) and generators restart at a clock behind their last ID instead of
/// continuing above it, as Twitter's early snowflake did. It exists so that the harness can
/// show it catches the duplicates this lets through.
///
/// # Example
///
/// ```
/// # #[cfg(idmint_negative_controls)] {
/// idmint_core::disable_clock_guard_for_tests();
/// assert_eq!(idmint_core::Anchor::new(0, 1_000, 0).now_ms(900, 10), 900);
/// # }
/// ```
#[cfg(idmint_negative_controls)]
pub fn disable_clock_guard_for_tests() {
    NO_CLOCK_GUARD.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`disable_clock_guard_for_tests`] was called.
#[cfg(idmint_negative_controls)]
pub(crate) fn clock_guard_disabled() -> bool {
    NO_CLOCK_GUARD.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Anchor;

    proptest! {
        /// Whatever the wall clock does (steps back and forth of up to a minute, standing
        /// still) while the monotonic clock moves on, through both paths in any mix: logical
        /// time never goes back, never falls below the floor or the wall clock, the hot path
        /// returns the last result while the wall clock reads it, and two full readings
        /// advance at least as far as the monotonic clock did between them.
        #[test]
        fn logical_time_never_goes_back_and_follows_the_clocks(
            floor in 0u64..200_000,
            steps in proptest::collection::vec((-60_000i64..60_000, 0u64..50, any::<bool>(), any::<bool>()), 1..200),
        ) {
            let (mut wall, mut mono) = (100_000u64, 0u64);
            let anchor = Anchor::new(floor, wall, mono);
            let mut last = floor.max(wall);
            let mut full_before: Option<(u64, u64)> = None;
            for (step, elapsed, stand, hot) in steps {
                // Now and then the wall clock reads the millisecond last returned.
                wall = if stand { last } else { wall.saturating_add_signed(step).max(1) };
                mono += elapsed;
                let now = if hot { anchor.now_ms_with(wall, || mono) } else { anchor.now_ms(wall, mono) };
                prop_assert!(now >= last, "went back from {last} to {now}");
                prop_assert!(now >= floor && now >= wall);
                if hot && wall == last {
                    prop_assert_eq!(now, last);
                } else {
                    if let Some((before, mono_before)) = full_before {
                        prop_assert!(now - before >= mono - mono_before);
                    }
                    full_before = Some((now, mono));
                }
                last = now;
            }
        }
    }
}
