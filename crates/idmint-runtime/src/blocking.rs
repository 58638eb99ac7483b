//! [`BlockingGenerator`]: a [`ClockDriven`] with a clock and a way to wait, for threads that may
//! block. It reads the clock, calls the source, and waits when told to; nothing more.

use idmint_core::{Clock, Next, SystemClock};

use crate::{ClockDriven, Error, ThreadSleep, Wait, stall::DEFAULT_STALL_LIMIT, stall::Due};

/// The most IDs [`BlockingGenerator::fill`] reserves in one step. A time-based batch is two
/// integers whatever its length, but some batches hold their IDs (`decimal-id` through
/// [`AnyGenerator`](idmint_core::AnyGenerator)); this bounds their memory to half a megabyte.
const FILL_RESERVATION: u64 = 1 << 16;

/// A generator that blocks the calling thread until its IDs are due.
///
/// It wraps a [`ClockDriven`] (any core generator, by value, `&` or [`Arc`](std::sync::Arc)), a
/// [`Clock`] and a [`Wait`]er. Each call reads the clock and asks the source; when the source
/// answers [`Next::Wait`] it waits, re-reads the clock and asks again. It is `Sync` when its
/// parts are, and threads share one by reference: the source hands out each ID once.
///
/// **A stopped clock is an error, not a hang.** If the clock has not moved at all after
/// `stall_limit` waits in a row (100 by default, see
/// [`with_stall_limit`](Self::with_stall_limit)), the call returns
/// [`Error::ClockStalled`]. This is LableOrg's "Clock supplied to generator failed to
/// progress." (thrown there after 11 sleeps of 400 µs), reproduced with a fixed clock instead
/// of spinning forever.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
/// use idmint_runtime::BlockingGenerator;
///
/// let generator = BlockingGenerator::new(
///     Snowflake::generator(1, 7, &GeneratorConfig::default())?,
///     SystemClock,
/// );
/// let a = generator.next()?;
/// let b = generator.next()?;
/// assert!(b > a);
/// # Ok::<(), idmint_runtime::Error>(())
/// ```
///
/// LableOrg's generator with a clock that never moves: 64 IDs, then an error.
///
/// ```
/// use idmint_core::{GeneratorConfig, Lable, LableMode, ManualClock};
/// use idmint_runtime::{BlockingGenerator, Error, Wait};
///
/// struct NoWait;
/// impl Wait for NoWait {
///     fn wait_until(&self, _until_ms: u64) {}
/// }
///
/// let clock = ManualClock::new(1_700_000_000_000);
/// let source = Lable::generator(1, 5, LableMode::Spread, &GeneratorConfig::default())?;
/// let generator = BlockingGenerator::with_wait(source, &clock, NoWait).with_stall_limit(11);
/// for _ in 0..64 {
///     generator.next()?;
/// }
/// assert!(matches!(generator.next(), Err(Error::ClockStalled { waits: 11, .. })));
/// # Ok::<(), idmint_runtime::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct BlockingGenerator<S, C = SystemClock, W = ThreadSleep<C>> {
    source: S,
    clock: C,
    waiter: W,
    stall_limit: u32,
}

impl<S: ClockDriven, C: Clock + Clone> BlockingGenerator<S, C, ThreadSleep<C>> {
    /// A generator that reads `clock` and sleeps on it with [`ThreadSleep`].
    ///
    /// The clock is cloned into the waiter; pass a reference or an [`Arc`](std::sync::Arc) for
    /// a clock that is not `Clone`, such as [`TickingClock`](crate::TickingClock).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    /// use idmint_runtime::{BlockingGenerator, TickingClock};
    ///
    /// let clock = TickingClock::start();
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = BlockingGenerator::new(source, &clock);
    /// assert_eq!(generator.next()?.into_parts().worker, 1);
    /// # Ok::<(), idmint_runtime::Error>(())
    /// ```
    pub fn new(source: S, clock: C) -> Self {
        let waiter = ThreadSleep::with_clock(clock.clone());
        BlockingGenerator::with_wait(source, clock, waiter)
    }
}

impl<S: ClockDriven, C: Clock, W: Wait> BlockingGenerator<S, C, W> {
    /// A generator that reads `clock` and waits with `waiter`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::{BlockingGenerator, SpinWait};
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = BlockingGenerator::with_wait(source, SystemClock, SpinWait::new());
    /// assert!(generator.next().is_ok());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_wait(source: S, clock: C, waiter: W) -> Self {
        BlockingGenerator { source, clock, waiter, stall_limit: DEFAULT_STALL_LIMIT }
    }

    /// Sets how many waits in a row may leave the clock where it was before a call fails with
    /// [`Error::ClockStalled`] (default 100). With 0, any wait fails at once.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = BlockingGenerator::new(source, SystemClock).with_stall_limit(11);
    /// assert_eq!(generator.stall_limit(), 11);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[must_use]
    pub fn with_stall_limit(mut self, limit: u32) -> Self {
        self.stall_limit = limit;
        self
    }

    /// The stall limit; see [`with_stall_limit`](Self::with_stall_limit).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// assert_eq!(BlockingGenerator::new(source, SystemClock).stall_limit(), 100);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn stall_limit(&self) -> u32 {
        self.stall_limit
    }

    /// The wrapped source, for what only it can do (such as `set_ceiling_ms`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = BlockingGenerator::new(source, SystemClock);
    /// assert_eq!(generator.source().ids_per_tick(), 4096);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The next ID, waiting for the next tick if this one is used up.
    ///
    /// # Errors
    ///
    /// [`Error::Core`] when the source refuses (for example the clock is too far back), and
    /// [`Error::ClockStalled`] when the clock does not move while waiting.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Lable, LableMode, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let config = GeneratorConfig::default();
    /// let source = Lable::generator(3, 1, LableMode::TimeSequential, &config)?;
    /// let generator = BlockingGenerator::new(source, SystemClock);
    /// assert_eq!(generator.next()?.into_parts().generator_id, 3);
    /// # Ok::<(), idmint_runtime::Error>(())
    /// ```
    pub fn next(&self) -> Result<S::Id, Error> {
        self.when_due(|now_ms| self.source.next_at(now_ms))
    }

    /// Reserves up to `n` consecutive IDs in one step, waiting first if the current tick is
    /// used up. The batch may hold fewer than `n`: as many as the allowed ticks still have.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next); [`Error::Core`] with
    /// [`EmptyBatch`](idmint_core::Error::EmptyBatch) for `n == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let batch = BlockingGenerator::new(source, SystemClock).next_batch(100)?;
    /// assert!((1..=100).contains(&batch.len()));
    /// # Ok::<(), idmint_runtime::Error>(())
    /// ```
    pub fn next_batch(&self, n: u64) -> Result<S::Batch, Error> {
        self.when_due(|now_ms| self.source.batch_at(now_ms, n))
    }

    /// Hands exactly `n` IDs to `f`, in increasing order, reserving batches and waiting as
    /// needed. This is what `idmint gen -n 1000000` runs.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next). IDs handed to `f` before the error are issued all the same.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::BlockingGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let mut ids = Vec::new();
    /// BlockingGenerator::new(source, SystemClock).fill(1_000, |id| ids.push(id))?;
    /// assert_eq!(ids.len(), 1_000);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idmint_runtime::Error>(())
    /// ```
    pub fn fill(&self, n: u64, mut f: impl FnMut(S::Id)) -> Result<(), Error> {
        let mut left = n;
        while left > 0 {
            for id in self.next_batch(left.min(FILL_RESERVATION))? {
                f(id);
                left -= 1;
            }
        }
        Ok(())
    }

    /// Calls `attempt` with clock readings until it is ready, waiting in between.
    fn when_due<T>(
        &self,
        mut attempt: impl FnMut(u64) -> Result<Next<T>, idmint_core::Error>,
    ) -> Result<T, Error> {
        let mut due = Due::start(&self.clock, self.stall_limit);
        loop {
            match due.attempt(&mut attempt)? {
                Next::Ready(value) => return Ok(value),
                Next::Wait { until_ms } => self.waiter.wait_until(until_ms),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use idmint_core::{GeneratorConfig, ManualClock, Snowflake};

    use super::*;

    /// Counts its calls; moves the clock one millisecond every `every` calls.
    struct Sometimes<'a> {
        clock: &'a ManualClock,
        every: u32,
        calls: std::cell::Cell<u32>,
    }

    impl Wait for Sometimes<'_> {
        fn wait_until(&self, _until_ms: u64) {
            self.calls.set(self.calls.get() + 1);
            if self.calls.get().is_multiple_of(self.every) {
                self.clock.advance(1);
            }
        }
    }

    #[test]
    fn progress_resets_the_stall_count() {
        /// `n` IDs from a fresh Snowflake generator whose waiter moves the clock every
        /// `every` waits; `Ok` with the number of waits, or the number of stalled waits.
        fn check(limit: u32, every: u32, n: u64, expected: Result<u32, u32>) {
            let clock = ManualClock::new(Snowflake::EPOCH_MS + 1);
            let waiter = Sometimes { clock: &clock, every, calls: 0.into() };
            let source = Snowflake::generator(0, 0, &GeneratorConfig::default()).unwrap();
            let generator =
                BlockingGenerator::with_wait(source, &clock, &waiter).with_stall_limit(limit);
            let outcome = match generator.fill(n, |_| {}) {
                Ok(()) => Ok(waiter.calls.get()),
                Err(Error::ClockStalled { waits, .. }) => Err(waits),
                Err(other) => panic!("unexpected {other}"),
            };
            assert_eq!(outcome, expected, "limit {limit}, every {every}, n {n}");
        }
        let per_ms = 4096;
        check(3, 3, 3 * per_ms, Ok(6));
        check(3, 4, 3 * per_ms, Err(3));
        check(0, 1, per_ms, Ok(0));
        check(0, 1, per_ms + 1, Err(0));
        check(DEFAULT_STALL_LIMIT, DEFAULT_STALL_LIMIT, 2 * per_ms, Ok(DEFAULT_STALL_LIMIT));
    }

    #[test]
    fn source_errors_pass_through() {
        let clock = ManualClock::new(Snowflake::EPOCH_MS - 1);
        let source = Snowflake::generator(0, 0, &GeneratorConfig::default()).unwrap();
        let generator = BlockingGenerator::new(source, &clock);
        assert!(matches!(
            generator.next(),
            Err(Error::Core(idmint_core::Error::BeforeEpoch { .. }))
        ));
        clock.set(Snowflake::EPOCH_MS);
        assert!(matches!(
            generator.next_batch(0),
            Err(Error::Core(idmint_core::Error::EmptyBatch))
        ));
        assert_eq!(generator.fill(0, |_| panic!("no ids for n = 0")), Ok(()));
    }
}
