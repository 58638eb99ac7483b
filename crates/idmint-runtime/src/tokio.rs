//! [`AsyncGenerator`] (feature `tokio`): a [`Source`] with a clock that waits with
//! `tokio::time::sleep`, so that waiting for a tick never blocks the executor.

use std::time::Duration;

use idmint_core::{Clock, Next, SystemClock};

use crate::{Error, Source, stall::DEFAULT_STALL_LIMIT, stall::Due};

/// A generator for async code: it waits for the next tick with [`tokio::time::sleep`] instead
/// of blocking the thread.
///
/// It follows the same rules as [`BlockingGenerator`](crate::BlockingGenerator): read the
/// clock, ask the source, wait when told to, and fail with [`Error::ClockStalled`] when the
/// clock has not moved after `stall_limit` waits in a row (100 by default). Tokio's timer has
/// millisecond resolution, so a wait can end up to about a millisecond after the boundary.
///
/// The clock is read through [`Clock`] and never through Tokio, so with Tokio's time paused
/// (in tests) use a clock derived from [`tokio::time::Instant`], which auto-advances during
/// sleeps.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
/// use idmint_runtime::AsyncGenerator;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let generator =
///     AsyncGenerator::new(Snowflake::generator(1, 7, &GeneratorConfig::default())?, SystemClock);
/// let a = generator.next().await?;
/// let b = generator.next().await?;
/// assert!(b > a);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct AsyncGenerator<S, C = SystemClock> {
    source: S,
    clock: C,
    stall_limit: u32,
}

impl<S: Source, C: Clock> AsyncGenerator<S, C> {
    /// A generator that reads `clock` and sleeps on Tokio's timer.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_core::{GeneratorConfig, Snowflake};
    /// use idmint_runtime::{AsyncGenerator, TickingClock};
    ///
    /// let clock = Arc::new(TickingClock::start());
    /// let source = Arc::new(Snowflake::generator(0, 1, &GeneratorConfig::default())?);
    /// let generator = AsyncGenerator::new(source, clock);
    /// # let _ = generator;
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn new(source: S, clock: C) -> Self {
        AsyncGenerator { source, clock, stall_limit: DEFAULT_STALL_LIMIT }
    }

    /// Sets how many waits in a row may leave the clock where it was before a call fails with
    /// [`Error::ClockStalled`] (default 100). With 0, any wait fails at once.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake, SystemClock};
    /// use idmint_runtime::AsyncGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = AsyncGenerator::new(source, SystemClock).with_stall_limit(11);
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
    /// use idmint_runtime::AsyncGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// assert_eq!(AsyncGenerator::new(source, SystemClock).stall_limit(), 100);
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
    /// use idmint_runtime::AsyncGenerator;
    ///
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let generator = AsyncGenerator::new(source, SystemClock);
    /// assert_eq!(generator.source().ids_per_tick(), 4096);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The next ID, sleeping until the next tick if this one is used up.
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
    /// use idmint_runtime::AsyncGenerator;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let config = GeneratorConfig::default();
    /// let source = Lable::generator(3, 1, LableMode::TimeSequential, &config)?;
    /// let generator = AsyncGenerator::new(source, SystemClock);
    /// assert_eq!(generator.next().await?.into_parts().generator_id, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn next(&self) -> Result<S::Id, Error> {
        self.when_due(|now_ms| self.source.next_at(now_ms)).await
    }

    /// Reserves up to `n` consecutive IDs in one step, sleeping first if the current tick is
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
    /// use idmint_runtime::AsyncGenerator;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
    /// let source = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let batch = AsyncGenerator::new(source, SystemClock).next_batch(100).await?;
    /// assert!((1..=100).contains(&batch.len()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn next_batch(&self, n: u64) -> Result<S::Batch, Error> {
        self.when_due(|now_ms| self.source.batch_at(now_ms, n)).await
    }

    /// Calls `attempt` with clock readings until it is ready, sleeping in between.
    async fn when_due<T>(
        &self,
        mut attempt: impl FnMut(u64) -> Result<Next<T>, idmint_core::Error>,
    ) -> Result<T, Error> {
        let mut due = Due::start(&self.clock, self.stall_limit);
        loop {
            let until_ms = match due.attempt(&mut attempt)? {
                Next::Ready(value) => return Ok(value),
                Next::Wait { until_ms } => until_ms,
            };
            match until_ms.checked_sub(due.now_ms()) {
                Some(ms) if ms > 0 => ::tokio::time::sleep(Duration::from_millis(ms)).await,
                // A source should not ask to wait for the past; let others run.
                _ => ::tokio::task::yield_now().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, sync::Arc};

    use ::tokio::time::Instant;
    use idmint_core::{GeneratorConfig, Lable, LableMode, ManualClock, Snowflake};

    use super::*;

    /// Unix ms that follow Tokio's (pausable) clock from a fixed start.
    struct TokioClock {
        start: Instant,
        start_ms: u64,
    }

    impl TokioClock {
        fn new(start_ms: u64) -> Self {
            TokioClock { start: Instant::now(), start_ms }
        }
    }

    impl Clock for TokioClock {
        fn now_ms(&self) -> u64 {
            self.start_ms + u64::try_from(self.start.elapsed().as_millis()).unwrap()
        }
    }

    #[::tokio::test(start_paused = true)]
    async fn waits_on_tokio_time_without_wall_time() {
        let per_ms = 4096;
        let n = 5 * per_ms + 7;
        let wall = std::time::Instant::now();
        let clock = TokioClock::new(Snowflake::EPOCH_MS + 1);
        let source = Snowflake::generator(2, 3, &GeneratorConfig::default()).unwrap();
        let generator = AsyncGenerator::new(source, &clock);
        let mut ids = Vec::new();
        for _ in 0..n / 2 {
            ids.push(generator.next().await.unwrap());
        }
        while (ids.len() as u64) < n {
            ids.extend(generator.next_batch(n - ids.len() as u64).await.unwrap());
        }
        let distinct: HashSet<Snowflake> = ids.iter().copied().collect();
        assert_eq!(distinct.len(), ids.len());
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let ticks: HashSet<u64> = ids.iter().map(|id| id.into_parts().timestamp).collect();
        assert_eq!(ticks.len(), 6);
        assert!(clock.now_ms() >= Snowflake::EPOCH_MS + 6);
        // Paused time jumps; a real sleep of 5 ms or more would show up here.
        assert!(wall.elapsed() < std::time::Duration::from_secs(5));
    }

    #[::tokio::test(start_paused = true)]
    async fn a_stopped_clock_is_an_error() {
        let clock = ManualClock::new(1_700_000_000_000);
        let source =
            Lable::generator(1, 5, LableMode::Spread, &GeneratorConfig::default()).unwrap();
        let generator = AsyncGenerator::new(source, &clock).with_stall_limit(11);
        for _ in 0..64 {
            generator.next().await.unwrap();
        }
        assert_eq!(
            generator.next().await.unwrap_err(),
            Error::ClockStalled {
                until_ms: 1_700_000_000_001,
                now_ms: 1_700_000_000_000,
                waits: 11
            }
        );
    }

    #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_share_one_generator() {
        let clock = Arc::new(ManualClock::new(Snowflake::EPOCH_MS + 1));
        let source = Snowflake::generator(0, 0, &GeneratorConfig::default()).unwrap();
        let generator = Arc::new(AsyncGenerator::new(source, Arc::clone(&clock)));
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let generator = Arc::clone(&generator);
                ::tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for _ in 0..1_000 {
                        ids.push(generator.next().await.unwrap());
                    }
                    ids
                })
            })
            .collect();
        let mut all = HashSet::new();
        for task in tasks {
            for id in task.await.unwrap() {
                assert!(all.insert(id));
            }
        }
        assert_eq!(all.len(), 4_000);
    }
}
