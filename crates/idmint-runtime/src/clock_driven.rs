//! What the waiting generators drive: [`ClockDriven`], anything that takes the time as input and
//! answers with an ID, a batch, or a time to wait until. No clock and no waiting here.

use std::sync::Arc;

use idmint_core::{
    AnyBatch, AnyGenerator, AnyId, Batch, GeneratedId, Generator, HotGuid, HotGuidBatch,
    HotGuidGenerator, Next,
};

/// A sans-I/O ID generator: give it the time (Unix milliseconds), get an ID or a batch, a time
/// to wait until ([`Next::Wait`]), or an error.
///
/// Implemented for every generator of `idmint-core` that takes the time
/// ([`Generator<I>`](Generator), [`HotGuidGenerator`], [`AnyGenerator`]) and for references
/// and [`Arc`]s of them, so one generator can be shared by several wrappers. It is `Sync`:
/// implementations hand out each ID once however many threads call them.
///
/// An implementation must return [`Next::Wait`] only with an `until_ms` later than `now_ms`,
/// and a ready batch must hold at least one ID; the core generators do both.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Next, Snowflake};
/// use idmint_runtime::ClockDriven;
///
/// fn first<S: ClockDriven>(source: &S, now_ms: u64) -> Option<S::Id> {
///     source.next_at(now_ms).ok()?.ready()
/// }
///
/// let generator = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
/// let id = first(&generator, Snowflake::EPOCH_MS + 7).unwrap();
/// assert_eq!(id.into_parts().timestamp, 7);
/// # Ok::<(), idmint_core::Error>(())
/// ```
pub trait ClockDriven: Sync {
    /// The ID type issued.
    type Id;
    /// A run of IDs reserved in one step, in increasing order.
    type Batch: Iterator<Item = Self::Id> + ExactSizeIterator;

    /// The next ID at `now_ms` (Unix milliseconds), or the time to wait until.
    ///
    /// # Errors
    ///
    /// The generator's errors, such as [`idmint_core::Error::ClockBackward`].
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Lable, LableMode, Next};
    /// use idmint_runtime::ClockDriven;
    ///
    /// let generator = Lable::generator(1, 5, LableMode::Spread, &GeneratorConfig::default())?;
    /// let now_ms = 1_700_000_000_000;
    /// let _ = generator.batch_at(now_ms, 64)?;
    /// assert_eq!(generator.next_at(now_ms)?, Next::Wait { until_ms: now_ms + 1 });
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    fn next_at(&self, now_ms: u64) -> Result<Next<Self::Id>, idmint_core::Error>;

    /// Reserves up to `n` consecutive IDs at `now_ms` in one step: at least one, and fewer
    /// than `n` when the allowed ticks hold fewer.
    ///
    /// # Errors
    ///
    /// As [`next_at`](Self::next_at), plus [`idmint_core::Error::EmptyBatch`] for `n == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    /// use idmint_runtime::ClockDriven;
    ///
    /// let generator = Snowflake::generator(0, 1, &GeneratorConfig::default())?;
    /// let batch = generator.batch_at(Snowflake::EPOCH_MS + 1, 10_000)?.ready().unwrap();
    /// assert_eq!(batch.len(), 4096); // one millisecond's worth
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    fn batch_at(&self, now_ms: u64, n: u64) -> Result<Next<Self::Batch>, idmint_core::Error>;
}

/// Implements [`ClockDriven`] for each `impl[generics] Type => (Id, Batch) via next, batch;` by
/// calling `next(self, now_ms)` and `batch(self, now_ms, n)`: the generators' own methods, or
/// those of the source behind a reference.
macro_rules! sources {
    ($(impl[$($generics:tt)*] $ty:ty => ($id:ty, $batch:ty) via $next:path, $batch_at:path;)*) => {$(
        impl<$($generics)*> ClockDriven for $ty {
            type Id = $id;
            type Batch = $batch;

            #[inline]
            fn next_at(&self, now_ms: u64) -> Result<Next<$id>, idmint_core::Error> {
                $next(self, now_ms)
            }

            #[inline]
            fn batch_at(&self, now_ms: u64, n: u64) -> Result<Next<$batch>, idmint_core::Error> {
                $batch_at(self, now_ms, n)
            }
        }
    )*};
}

sources! {
    impl[I: GeneratedId] Generator<I> => (I, Batch<I>) via Generator::next, Generator::next_batch;
    impl[] HotGuidGenerator => (HotGuid, HotGuidBatch)
        via HotGuidGenerator::next, HotGuidGenerator::next_batch;
    impl[] AnyGenerator => (AnyId, AnyBatch) via AnyGenerator::next, AnyGenerator::next_batch;
    impl[S: ClockDriven + ?Sized] &S => (S::Id, S::Batch) via S::next_at, S::batch_at;
    impl[S: ClockDriven + Send + ?Sized] Arc<S> => (S::Id, S::Batch) via S::next_at, S::batch_at;
}

#[cfg(test)]
mod tests {
    use idmint_core::{GeneratorConfig, HotGuid, Layout, Snowflake};

    use super::*;

    /// A fresh source at `now_ms`: the first call is ready, a batch of `n` holds `batch_len`
    /// IDs, and then the source waits until `until_ms`.
    fn check<S: ClockDriven>(source: S, now_ms: u64, n: u64, batch_len: usize, until_ms: u64)
    where
        S::Id: PartialEq + std::fmt::Debug,
    {
        let first = source.next_at(now_ms).unwrap().ready().expect("a fresh source is ready");
        let batch = source.batch_at(now_ms, n).unwrap().ready().expect("room for a batch");
        assert_eq!(batch.len(), batch_len);
        assert!(batch.into_iter().next().is_some_and(|id| id != first));
        assert_eq!(source.next_at(now_ms).unwrap().ready(), None);
        assert!(matches!(source.next_at(now_ms), Ok(Next::Wait { until_ms: u }) if u == until_ms));
        assert!(matches!(source.batch_at(now_ms, 0), Err(idmint_core::Error::EmptyBatch)));
    }

    #[test]
    fn every_core_generator_is_a_source() {
        let config = GeneratorConfig::default();
        let t = Snowflake::EPOCH_MS + 1_000;
        let per_ms = 4096;
        check(Snowflake::generator(1, 2, &config).unwrap(), t, u64::MAX, per_ms - 1, t + 1);
        let shared = Snowflake::generator(1, 2, &config).unwrap();
        check(&shared, t, u64::MAX, per_ms - 1, t + 1);
        check(
            Arc::new(Snowflake::generator(1, 2, &config).unwrap()),
            t,
            u64::MAX,
            per_ms - 1,
            t + 1,
        );
        let any = Layout::builtin("snowflake").unwrap().generator(&[], &config).unwrap();
        check(any, t, u64::MAX, per_ms - 1, t + 1);

        let per_second = 1 << 24;
        let hot = HotGuid::generator([1, 2, 3, 4, 5], 7, &config).unwrap();
        let second = 1_700_000_000_000;
        check(hot, second, u64::MAX, per_second - 1, second + 1_000);
    }
}
