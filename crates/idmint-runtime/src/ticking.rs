//! [`TickingClock`]: a clock whose reading is one atomic load, kept current by a background
//! thread. The only place in this crate that spawns a thread.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::{self, JoinHandle},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use idmint_core::{Clock, SystemClock};

/// Nanoseconds in a millisecond.
const NANOS_PER_MS: u32 = 1_000_000;

/// The name of the background thread, as shown by debuggers and `top -H`.
const THREAD_NAME: &str = "idmint-ticking-clock";

/// A clock that a background thread keeps current, so that reading it is one relaxed atomic
/// load with no system call (like ferroid's `MonotonicClock`).
///
/// The thread stores the Unix millisecond in an `AtomicU64`, then sleeps until the next
/// millisecond boundary, and again. The clock is read from `SystemClock` once before
/// [`start`](Self::start) returns, so the first reading is already right. Readings never go
/// backwards: the thread stores the larger of the previous and the new reading.
///
/// **The trade-off.** A reading is up to about a millisecond stale (more if the thread is
/// descheduled), and the clock costs a thread that wakes a thousand times a second. It pays
/// off where the clock is read far more often than that, such as a generator issuing millions
/// of IDs a second. If the wall clock steps back, this clock stands still until the wall clock
/// catches up; a [`BlockingGenerator`](crate::BlockingGenerator) waiting on it meanwhile
/// reports [`Error::ClockStalled`](crate::Error::ClockStalled).
///
/// Dropping the clock stops and joins its thread. It is not `Clone`: share it by reference or
/// in an [`Arc`] (both are [`Clock`]s too).
///
/// # Example
///
/// ```
/// use idmint_core::{Clock, SystemClock};
/// use idmint_runtime::TickingClock;
///
/// let clock = TickingClock::start();
/// let now_ms = clock.now_ms();
/// assert!(now_ms.abs_diff(SystemClock.now_ms()) < 1_000);
/// drop(clock); // stops the thread
/// ```
#[derive(Debug)]
pub struct TickingClock {
    now_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TickingClock {
    /// Reads the system clock and starts the thread that keeps the reading current.
    ///
    /// # Panics
    ///
    /// If the operating system cannot create a thread, as [`std::thread::spawn`] does.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Clock;
    ///
    /// let clock = idmint_runtime::TickingClock::start();
    /// assert!(clock.now_ms() > 1_600_000_000_000);
    /// ```
    pub fn start() -> Self {
        let now_ms = Arc::new(AtomicU64::new(SystemClock.now_ms()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .spawn({
                let now_ms = Arc::clone(&now_ms);
                let stop = Arc::clone(&stop);
                move || tick(&now_ms, &stop)
            })
            .expect("failed to spawn the ticking clock's thread");
        TickingClock { now_ms, stop, thread: Some(thread) }
    }
}

/// The background thread: store the time, sleep to the next millisecond, until told to stop.
fn tick(now_ms: &AtomicU64, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let reading = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX);
        now_ms.fetch_max(reading, Ordering::Relaxed);
        // Parked rather than slept, so that `drop` can wake the thread at once.
        thread::park_timeout(until_next_ms(since_epoch));
    }
}

/// The time from `since_epoch` to the start of the next millisecond.
fn until_next_ms(since_epoch: Duration) -> Duration {
    Duration::from_nanos((NANOS_PER_MS - since_epoch.subsec_nanos() % NANOS_PER_MS).into())
}

impl Clock for TickingClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}

impl Drop for TickingClock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            // The thread does not panic; if it did, there is nothing left to clean up.
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far a reading may be from the system clock's. Generous: the test machine is shared,
    /// and this must never fail because a thread was descheduled.
    const TOLERANCE_MS: u64 = 50;

    #[test]
    fn readings_are_current_and_never_go_back() {
        let clock = TickingClock::start();
        let first = clock.now_ms();
        assert!(first.abs_diff(SystemClock.now_ms()) <= TOLERANCE_MS);
        let mut last = first;
        for _ in 0..100_000 {
            let reading = clock.now_ms();
            assert!(reading >= last, "{reading} after {last}");
            last = reading;
        }
        assert!(clock.now_ms().abs_diff(SystemClock.now_ms()) <= TOLERANCE_MS);
    }

    #[test]
    fn clocks_start_and_stop_independently() {
        let clocks: Vec<TickingClock> = (0..4).map(|_| TickingClock::start()).collect();
        let readings: Vec<u64> = clocks.iter().map(Clock::now_ms).collect();
        drop(clocks);
        assert!(readings.iter().all(|r| r.abs_diff(readings[0]) <= TOLERANCE_MS));
    }

    #[test]
    fn sleeps_to_the_next_boundary() {
        fn check(since_epoch: Duration, expected: Duration) {
            assert_eq!(until_next_ms(since_epoch), expected, "{since_epoch:?}");
        }
        check(Duration::from_millis(1_700_000_000_000), Duration::from_millis(1));
        check(Duration::from_nanos(1_700_000_000_000_250_000), Duration::from_micros(750));
        check(Duration::from_nanos(999_999), Duration::from_nanos(1));
    }
}
