//! How a thread waits for a time: the [`Wait`] trait, [`ThreadSleep`] (the default, which
//! sleeps to the millisecond boundary) and [`SpinWait`] (for benchmarks). No ID logic here.

use std::{
    hint,
    sync::Arc,
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use idmint_core::{Clock, SystemClock};

/// Nanoseconds in a millisecond.
const NANOS_PER_MS: u32 = 1_000_000;

/// The shortest sleep [`ThreadSleep`] takes when its clock is still short of the target.
///
/// This is the default timer slack of a Linux thread, so a shorter sleep would last this long
/// anyway. It makes every wait take real time: without it a clock that lags the wall clock
/// (such as [`TickingClock`](crate::TickingClock) just after a millisecond boundary) would be
/// polled in a tight loop, and a generator's stall limit would be reached in microseconds.
const SHORTEST_SLEEP: Duration = Duration::from_micros(50);

/// How long [`SpinWait`] keeps spinning past the time its clock should have needed, before it
/// gives up and lets the caller re-read the clock.
const SPIN_GRACE: Duration = Duration::from_millis(1);

/// How many `spin_loop` hints [`SpinWait`] gives between two `yield_now` calls.
const SPINS_PER_YIELD: u32 = 64;

/// Blocks the current thread until a clock reads a given Unix millisecond.
///
/// An implementation may return early (for example when its clock stopped, so that a stopped
/// clock cannot hang it); callers re-read their clock and call again.
/// [`BlockingGenerator`](crate::BlockingGenerator) counts those returns and gives up with
/// [`Error::ClockStalled`](crate::Error::ClockStalled) when the clock does not move.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, ManualClock};
/// use idmint_runtime::Wait;
///
/// /// A waiter for tests: moves a manual clock forward instead of sleeping.
/// struct Jump<'a>(&'a ManualClock);
///
/// impl Wait for Jump<'_> {
///     fn wait_until(&self, until_ms: u64) {
///         let now_ms = self.0.now_ms();
///         self.0.advance(until_ms.saturating_sub(now_ms));
///     }
/// }
///
/// let clock = ManualClock::new(10);
/// Jump(&clock).wait_until(15);
/// assert_eq!(clock.now_ms(), 15);
/// ```
pub trait Wait {
    /// Blocks until the clock reads `until_ms` (Unix ms), or returns early; see the trait docs.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::ManualClock;
    /// use idmint_runtime::{ThreadSleep, Wait};
    ///
    /// // The clock is already there: returns at once.
    /// ThreadSleep::with_clock(ManualClock::new(100)).wait_until(100);
    /// ```
    fn wait_until(&self, until_ms: u64);
}

impl<W: Wait + ?Sized> Wait for &W {
    fn wait_until(&self, until_ms: u64) {
        (**self).wait_until(until_ms);
    }
}

impl<W: Wait + ?Sized> Wait for Arc<W> {
    fn wait_until(&self, until_ms: u64) {
        (**self).wait_until(until_ms);
    }
}

/// Waits with [`std::thread::sleep`], waking right at the millisecond boundary.
///
/// The clock says which millisecond it is; how far into that millisecond the thread already is
/// comes from a sub-millisecond `SystemTime` reading. The sleep is the difference, so the
/// thread wakes at the boundary rather than up to a millisecond after it. This matters for
/// throughput: a snowflake generator issues at most 4,096 IDs per millisecond, and each
/// millisecond it starts late is a share of that ceiling lost for good.
///
/// It sleeps once per call (at least 50 µs, the usual timer slack), so a clock that is not the
/// wall clock (a [`TickingClock`](crate::TickingClock) a little behind, a clock anchored ahead
/// of the wall) costs at most a re-check, and a stopped clock cannot hang it.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
/// use idmint_runtime::{ThreadSleep, Wait};
///
/// let waiter = ThreadSleep::new();
/// let now_ms = SystemClock.now_ms();
/// waiter.wait_until(now_ms); // already there: no sleep
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadSleep<C = SystemClock> {
    clock: C,
}

impl ThreadSleep {
    /// A waiter on the system clock.
    ///
    /// # Example
    ///
    /// ```
    /// let waiter = idmint_runtime::ThreadSleep::new();
    /// # let _ = waiter;
    /// ```
    pub const fn new() -> Self {
        ThreadSleep { clock: SystemClock }
    }
}

impl<C: Clock> ThreadSleep<C> {
    /// A waiter on `clock`: use the clock the generator reads.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_runtime::{ThreadSleep, TickingClock};
    ///
    /// let clock = TickingClock::start();
    /// let waiter = ThreadSleep::with_clock(&clock);
    /// # let _ = waiter;
    /// ```
    pub const fn with_clock(clock: C) -> Self {
        ThreadSleep { clock }
    }
}

impl<C: Clock> Wait for ThreadSleep<C> {
    fn wait_until(&self, until_ms: u64) {
        // Read the wall clock first: if a boundary passes between the two readings, the
        // clock's reading is the later one and the sleep errs short, never long.
        let into_ms = into_current_ms(SystemTime::now());
        let now_ms = self.clock.now_ms();
        if now_ms < until_ms {
            thread::sleep(sleep_for(until_ms, now_ms, into_ms));
        }
    }
}

/// How far `time` is into its Unix millisecond (zero before 1970).
fn into_current_ms(time: SystemTime) -> Duration {
    time.duration_since(UNIX_EPOCH).map_or(Duration::ZERO, |since| {
        Duration::from_nanos((since.subsec_nanos() % NANOS_PER_MS).into())
    })
}

/// The sleep from `into_ms` past the start of millisecond `now_ms` to the start of `until_ms`.
fn sleep_for(until_ms: u64, now_ms: u64, into_ms: Duration) -> Duration {
    Duration::from_millis(until_ms.saturating_sub(now_ms))
        .saturating_sub(into_ms)
        .max(SHORTEST_SLEEP)
}

/// Waits by spinning ([`std::hint::spin_loop`], with a [`std::thread::yield_now`] now and
/// then) until the clock reads the target.
///
/// It reacts within nanoseconds of the clock ticking, at the price of a busy core: use it in
/// benchmarks, where a sleep's wake-up latency would be measured instead of the generator.
/// It gives up once the wait has taken a millisecond longer than the clock should have needed
/// (measured on the monotonic clock), so a stopped clock cannot hang it.
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
/// use idmint_runtime::{SpinWait, Wait};
///
/// let waiter = SpinWait::new();
/// waiter.wait_until(SystemClock.now_ms()); // already there: returns at once
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SpinWait<C = SystemClock> {
    clock: C,
}

impl SpinWait {
    /// A spinning waiter on the system clock.
    ///
    /// # Example
    ///
    /// ```
    /// let waiter = idmint_runtime::SpinWait::new();
    /// # let _ = waiter;
    /// ```
    pub const fn new() -> Self {
        SpinWait { clock: SystemClock }
    }
}

impl<C: Clock> SpinWait<C> {
    /// A spinning waiter on `clock`: use the clock the generator reads.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_runtime::{SpinWait, TickingClock};
    ///
    /// let clock = TickingClock::start();
    /// let waiter = SpinWait::with_clock(&clock);
    /// # let _ = waiter;
    /// ```
    pub const fn with_clock(clock: C) -> Self {
        SpinWait { clock }
    }
}

impl<C: Clock> Wait for SpinWait<C> {
    fn wait_until(&self, until_ms: u64) {
        let now_ms = self.clock.now_ms();
        if now_ms >= until_ms {
            return;
        }
        let budget = Duration::from_millis(until_ms - now_ms).saturating_add(SPIN_GRACE);
        let start = Instant::now();
        let mut spins = 0;
        while self.clock.now_ms() < until_ms {
            if spins < SPINS_PER_YIELD {
                hint::spin_loop();
                spins += 1;
            } else {
                if start.elapsed() >= budget {
                    return;
                }
                thread::yield_now();
                spins = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idmint_core::ManualClock;

    use super::*;

    #[test]
    fn sleeps_to_the_boundary() {
        fn check(until_ms: u64, now_ms: u64, into_us: u64, expected_us: u64) {
            let slept = sleep_for(until_ms, now_ms, Duration::from_micros(into_us));
            assert_eq!(slept, Duration::from_micros(expected_us), "{until_ms} {now_ms} {into_us}");
        }
        check(11, 10, 0, 1_000);
        check(11, 10, 300, 700);
        check(12, 10, 300, 1_700);
        check(1_010, 1_000, 999, 9_001);
        // Never shorter than the timer slack: a lagging clock is re-checked, not polled.
        check(11, 10, 999, 50);
        check(11, 10, 1_500, 50);
        check(10, 10, 0, 50);
    }

    #[test]
    fn reads_the_fraction_of_the_millisecond() {
        fn check(since_epoch: Duration, expected: Duration) {
            assert_eq!(into_current_ms(UNIX_EPOCH + since_epoch), expected);
        }
        check(Duration::from_millis(1_700_000_000_123), Duration::ZERO);
        check(Duration::from_nanos(1_700_000_000_123_456_789), Duration::from_nanos(456_789));
        check(Duration::from_nanos(999_999), Duration::from_nanos(999_999));
        assert_eq!(into_current_ms(UNIX_EPOCH - Duration::from_secs(1)), Duration::ZERO);
    }

    #[test]
    fn returns_at_once_when_the_clock_is_there() {
        let clock = ManualClock::new(1_000);
        for until_ms in [0, 999, 1_000] {
            ThreadSleep::with_clock(&clock).wait_until(until_ms);
            SpinWait::with_clock(&clock).wait_until(until_ms);
            Arc::new(ThreadSleep::with_clock(&clock)).wait_until(until_ms);
        }
    }
}
