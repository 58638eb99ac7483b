//! DecimalId (elfo's book, "ID generation"): `counter·10^10 + generator_id·10^5 + launch_id`, an ID that reads in
//! decimal, with no clock at all.

use std::{
    num::NonZeroU64,
    sync::atomic::{AtomicU64, Ordering},
};

use crate::{
    any::{AnyBatch, AnyGenerator, AnyId, OtherGenerator},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::GeneratorConfig,
    id_impl::u64_id,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, clockless_capacity, same_as},
    next::Next,
};

/// A DecimalId: three decimal fields in one positive `i64`.
///
/// | decimal digits | field | range | source |
/// | --- | --- | --- | --- |
/// | all but the last 10 | `counter` | 1..=922,337,202 | generator |
/// | 5 | `generator_id` | 0..=99,999 | a persistent, synchronized counter, taken at every start and whenever `counter` runs out |
/// | last 5 | `launch_id` | 0..=99,999 (0 for tests) | a persistent counter, one per process start |
///
/// `id = counter·10^10 + generator_id·10^5 + launch_id`; for example `14150009200065` is
/// (1415, 92, 65). The largest ID, 9,223,372,029,999,999,999, is below `i64::MAX`; a counter of
/// 922,337,203 would overflow it. IDs are monotonic per (generator_id, launch_id), which
/// Actoromicon calls *sharded monotonicity*.
///
/// # Example
///
/// ```
/// use idmint_core::{DecimalId, DecimalIdParts};
///
/// let id: DecimalId = "14150009200065".parse()?;
/// assert_eq!(id.into_parts(), DecimalIdParts { counter: 1415, generator_id: 92, launch_id: 65 });
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DecimalId(NonZeroU64);

/// The fields of a [`DecimalId`].
///
/// # Example
///
/// ```
/// use idmint_core::{DecimalId, DecimalIdParts};
///
/// let parts = DecimalIdParts { counter: 1, generator_id: 2, launch_id: 3 };
/// assert_eq!(DecimalId::from_parts(parts)?.to_raw(), 10_000_200_003);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct DecimalIdParts {
    /// The counter, 1..=922,337,202.
    pub counter: u64,
    /// The generator ID, 0..=99,999.
    pub generator_id: u64,
    /// The launch ID, 0..=99,999.
    pub launch_id: u64,
}

impl DecimalId {
    /// The weight of the counter: 10^10.
    pub const COUNTER_WEIGHT: u64 = 10_000_000_000;
    /// The weight of the generator ID: 10^5.
    pub const GENERATOR_WEIGHT: u64 = 100_000;
    /// The smallest counter.
    pub const MIN_COUNTER: u64 = 1;
    /// The largest counter that keeps the ID within `i64::MAX`.
    pub const MAX_COUNTER: u64 = 922_337_202;
    /// The largest generator ID.
    pub const MAX_GENERATOR_ID: u64 = Self::GENERATOR_WEIGHT - 1;
    /// The largest launch ID.
    pub const MAX_LAUNCH_ID: u64 = Self::GENERATOR_WEIGHT - 1;
    /// The layout's name.
    pub const NAME: &'static str = "decimal-id";
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// An example ID (the book's), for documentation and tests.
    pub const EXAMPLE: DecimalId = DecimalId(NonZeroU64::new(14_150_009_200_065).unwrap());

    /// Builds an ID from its fields.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field outside its range.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{DecimalId, DecimalIdParts};
    ///
    /// let too_big = DecimalIdParts { counter: 922_337_203, generator_id: 0, launch_id: 1 };
    /// assert!(DecimalId::from_parts(too_big).is_err());
    /// ```
    pub fn from_parts(parts: DecimalIdParts) -> Result<Self, Error> {
        let check = |field: &str, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                Err(Error::out_of_range(field, value, min, max))
            } else {
                Ok(value)
            }
        };
        let counter = check("counter", parts.counter, Self::MIN_COUNTER, Self::MAX_COUNTER)?;
        let generator_id = check("generator_id", parts.generator_id, 0, Self::MAX_GENERATOR_ID)?;
        let launch_id = check("launch_id", parts.launch_id, 0, Self::MAX_LAUNCH_ID)?;
        let raw =
            counter * Self::COUNTER_WEIGHT + generator_id * Self::GENERATOR_WEIGHT + launch_id;
        Ok(DecimalId(crate::id_impl::generated_nonzero(raw)))
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalId;
    ///
    /// assert_eq!(DecimalId::EXAMPLE.into_parts().generator_id, 92);
    /// ```
    pub fn into_parts(self) -> DecimalIdParts {
        let raw = self.to_raw();
        DecimalIdParts {
            counter: raw / Self::COUNTER_WEIGHT,
            generator_id: raw / Self::GENERATOR_WEIGHT % Self::GENERATOR_WEIGHT,
            launch_id: raw % Self::GENERATOR_WEIGHT,
        }
    }

    /// Checks a raw value: its counter part must be 1..=922,337,202.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a counter part outside its range (which includes 0 and
    /// every value below 10^10).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalId;
    ///
    /// assert!(DecimalId::from_raw(10_000_000_000).is_ok());
    /// assert!(DecimalId::from_raw(9_999_999_999).is_err());
    /// assert!(DecimalId::from_raw(u64::MAX).is_err());
    /// ```
    pub fn from_raw(raw: u64) -> Result<Self, Error> {
        let counter = raw / Self::COUNTER_WEIGHT;
        if !(Self::MIN_COUNTER..=Self::MAX_COUNTER).contains(&counter) {
            return Err(Error::out_of_range(
                "counter",
                counter,
                Self::MIN_COUNTER,
                Self::MAX_COUNTER,
            ));
        }
        Ok(DecimalId(crate::id_impl::generated_nonzero(raw)))
    }

    /// The raw value.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalId;
    ///
    /// assert_eq!(DecimalId::EXAMPLE.to_raw(), 14_150_009_200_065);
    /// ```
    pub const fn to_raw(self) -> u64 {
        self.0.get()
    }

    fn from_generated_raw(raw: u64) -> Self {
        DecimalId(crate::id_impl::generated_nonzero(raw))
    }
}

// Its generators differ in shape, so none is compiled ahead.
impl crate::generator::Sealed for DecimalId {}

u64_id!(DecimalId);

/// A lock-free DecimalId generator for one (generator_id, launch_id) pair.
///
/// It needs no clock: the counter counts up from 1 with one atomic add per call (or per batch).
/// When it runs out it returns [`Error::CounterExhausted`]; the book's remedy is to take a new
/// `generator_id` from the persistent counter and build a new generator.
///
/// # Example
///
/// ```
/// use idmint_core::DecimalIdGenerator;
///
/// let generator = DecimalIdGenerator::new(92, 65)?.with_max_counter(2)?;
/// assert_eq!(generator.next()?.to_raw(), 10_009_200_065);
/// assert_eq!(generator.next()?.into_parts().counter, 2);
/// assert!(generator.next().is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug)]
pub struct DecimalIdGenerator {
    next_counter: AtomicU64,
    max_counter: u64,
    base: u64,
}

impl DecimalIdGenerator {
    /// A generator whose first ID has counter 1.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a generator ID or launch ID above 99,999.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalIdGenerator;
    ///
    /// assert!(DecimalIdGenerator::new(100_000, 1).is_err());
    /// ```
    pub fn new(generator_id: u64, launch_id: u64) -> Result<Self, Error> {
        let first = DecimalId::from_parts(DecimalIdParts {
            counter: DecimalId::MIN_COUNTER,
            generator_id,
            launch_id,
        })?;
        Ok(DecimalIdGenerator {
            next_counter: AtomicU64::new(DecimalId::MIN_COUNTER),
            max_counter: DecimalId::MAX_COUNTER,
            base: first.to_raw() - DecimalId::COUNTER_WEIGHT,
        })
    }

    /// Stops after `max_counter` IDs instead of 922,337,202 (for tests of exhaustion).
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a limit outside 1..=922,337,202.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalIdGenerator;
    ///
    /// assert_eq!(DecimalIdGenerator::new(1, 1)?.with_max_counter(10)?.remaining(), 10);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_max_counter(mut self, max_counter: u64) -> Result<Self, Error> {
        if !(DecimalId::MIN_COUNTER..=DecimalId::MAX_COUNTER).contains(&max_counter) {
            return Err(Error::out_of_range(
                "max_counter",
                max_counter,
                DecimalId::MIN_COUNTER,
                DecimalId::MAX_COUNTER,
            ));
        }
        self.max_counter = max_counter;
        Ok(self)
    }

    /// The next ID.
    ///
    /// # Errors
    ///
    /// [`Error::CounterExhausted`] once every counter value was issued.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalIdGenerator;
    ///
    /// let generator = DecimalIdGenerator::new(0, 1)?;
    /// assert!(generator.next()? < generator.next()?);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next(&self) -> Result<DecimalId, Error> {
        let (first, _) = self.reserve(1)?;
        Ok(first)
    }

    /// Reserves up to `n` consecutive IDs at once (fewer when the counter is about to run out).
    ///
    /// # Errors
    ///
    /// [`Error::EmptyBatch`] for `n == 0`, [`Error::CounterExhausted`] when nothing is left.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalIdGenerator;
    ///
    /// let generator = DecimalIdGenerator::new(0, 1)?.with_max_counter(5)?;
    /// assert_eq!(generator.next_batch(3)?.count(), 3);
    /// assert_eq!(generator.next_batch(3)?.count(), 2);
    /// assert!(generator.next_batch(3).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch(&self, n: u64) -> Result<DecimalIdBatch, Error> {
        let (first, count) = self.reserve(n)?;
        Ok(DecimalIdBatch { next: first.to_raw(), remaining: count })
    }

    /// How many counter values are left.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::DecimalIdGenerator;
    ///
    /// let generator = DecimalIdGenerator::new(0, 1)?.with_max_counter(5)?;
    /// generator.next()?;
    /// assert_eq!(generator.remaining(), 4);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn remaining(&self) -> u64 {
        (self.max_counter + 1).saturating_sub(self.next_counter.load(Ordering::Acquire))
    }

    fn reserve(&self, n: u64) -> Result<(DecimalId, u64), Error> {
        if n == 0 {
            return Err(Error::EmptyBatch);
        }
        // A CAS loop rather than `fetch_add`, so that calls on an exhausted generator never
        // move the counter, and it can never wrap around to reissue values.
        let max = self.max_counter;
        let start = self
            .next_counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                (c <= max).then(|| c + n.min(max - c + 1))
            })
            .map_err(|_| Error::CounterExhausted { what: "decimal-id counter", capacity: max })?;
        let count = n.min(max - start + 1);
        Ok((DecimalId::from_generated_raw(self.base + start * DecimalId::COUNTER_WEIGHT), count))
    }
}

/// Consecutive DecimalIds reserved by [`DecimalIdGenerator::next_batch`], in increasing order.
///
/// # Example
///
/// ```
/// use idmint_core::DecimalIdGenerator;
///
/// let generator = DecimalIdGenerator::new(7, 1)?;
/// let mut batch = generator.next_batch(2)?;
/// assert_eq!(batch.len(), 2);
/// assert_eq!(batch.next().map(|id| id.into_parts().counter), Some(1));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct DecimalIdBatch {
    next: u64,
    remaining: u64,
}

impl Iterator for DecimalIdBatch {
    type Item = DecimalId;

    fn next(&mut self) -> Option<DecimalId> {
        if self.remaining == 0 {
            return None;
        }
        let id = DecimalId::from_generated_raw(self.next);
        self.remaining -= 1;
        // After the batch's last ID this value is never used, so saturating is harmless.
        self.next = self.next.saturating_add(DecimalId::COUNTER_WEIGHT);
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for DecimalIdBatch {}
impl std::iter::FusedIterator for DecimalIdBatch {}

/// The `decimal-id` layout: decimal digits, no clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecimalIdLayout;

impl LayoutKind for DecimalIdLayout {
    fn name(&self) -> &str {
        DecimalId::NAME
    }

    fn epoch_ms(&self) -> Option<u64> {
        None
    }

    fn fields(&self) -> Vec<FieldInfo> {
        vec![
            FieldInfo::number(
                "counter",
                30,
                DecimalId::MIN_COUNTER,
                DecimalId::MAX_COUNTER,
                FieldRole::Sequence,
            ),
            FieldInfo::number("generator_id", 17, 0, DecimalId::MAX_GENERATOR_ID, FieldRole::Node),
            FieldInfo::number("launch_id", 17, 0, DecimalId::MAX_LAUNCH_ID, FieldRole::Node),
        ]
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        None
    }

    fn capacity(&self) -> Capacity {
        clockless_capacity(
            DecimalId::MAX_COUNTER,
            (DecimalId::MAX_GENERATOR_ID + 1) * (DecimalId::MAX_LAUNCH_ID + 1),
        )
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let parts = DecimalIdParts {
            counter: values.number("counter")?,
            generator_id: values.number("generator_id")?,
            launch_id: values.number("launch_id")?,
        };
        Ok(AnyId::U64(DecimalId::from_parts(parts)?.to_raw()))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let p = DecimalId::from_raw(id.u64_for(self.name())?)?.into_parts();
        Ok(vec![
            num("counter", p.counter),
            num("generator_id", p.generator_id),
            num("launch_id", p.launch_id),
        ])
    }

    fn time_ms(&self, _id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(None)
    }

    fn fingerprint(&self) -> String {
        "decimal-id/63b/counter*10^10+generator*10^5+launch".to_owned()
    }

    fn generator_count(&self) -> u64 {
        DecimalId::MAX_GENERATOR_ID + 1
    }

    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        vec![num("generator_id", generator_id)]
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        _config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        Ok(AnyGenerator::other(DecimalIdGenerator::new(
            values.node("generator_id", generator_id, 0)?,
            values.number_or("launch_id", 0)?,
        )?))
    }

    fn order(&self) -> Order {
        // Increasing per (generator ID, launch ID): the book's sharded monotonicity.
        Order::Sharded
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Counters
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

/// No clock: `now_ms` is ignored and there is no ceiling.
impl OtherGenerator for DecimalIdGenerator {
    fn next(&self, _now_ms: u64) -> Result<Next<AnyId>, Error> {
        Ok(Next::Ready(AnyId::U64(DecimalIdGenerator::next(self)?.to_raw())))
    }

    fn next_batch(&self, _now_ms: u64, n: u64) -> Result<Next<AnyBatch>, Error> {
        let batch = DecimalIdGenerator::next_batch(self, n)?;
        Ok(Next::Ready(AnyBatch::other(batch.map(id_of as fn(DecimalId) -> AnyId))))
    }

    fn last_ms(&self) -> Option<u64> {
        None
    }

    fn set_ceiling_ms(&self, _mark_ms: u64) -> Result<(), Error> {
        Ok(())
    }
}

fn id_of(id: DecimalId) -> AnyId {
    AnyId::U64(id.to_raw())
}

/// The `decimal-id` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "decimal-id",
    about: "DecimalId: counter*10^10 + generator_id*10^5 + launch_id, readable in decimal, no clock",
    make: || std::sync::Arc::new(DecimalIdLayout),
};
