//! elfo's TraceId: 25 bits of seconds (wrapping yearly), a 16-bit node number, a 12-bit chunk
//! number and a 10-bit counter that is never 0; plus elfo's validator and chunked generator.

use std::{
    num::NonZeroU64,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use crate::{
    any::{AnyGenerator, AnyId},
    bits::{BitField, BitLayout},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::{Generator, GeneratorConfig},
    id_impl::u64_id,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, same_as},
    pack::{PackKind, Packer, Plan, Shape},
};

/// An elfo TraceId: a positive, non-zero `i64` that is unique for about a year.
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63 | zero | 0 | — |
/// | 62..=38 | `timestamp`: Unix seconds mod 2^25 | 0..=33,554,431 | clock |
/// | 37..=22 | `node_no` | 0..=65,535 (0 means "unknown") | configuration |
/// | 21..=10 | `chunk_no`: a chunk of counters taken from a process-wide registry | 0..=4,095 | generator |
/// | 9..=0 | `counter` within the chunk | 1..=1,023 as generated; 0 is read and written | generator |
///
/// `raw = timestamp·2^38 + node_no·2^22 + chunk_no·2^10 + counter`. The early draft of elfo's book (the "ID generation" chapter)
/// wrote `node_no·2^18`; elfo's code, and this type, use 2^22.
///
/// The timestamp wraps every 2^25 s ≈ 388 days: TraceIds are *periodically monotonic* and
/// unique within one period. Pair them with a monotonic field (such as `created_at`) for
/// long-term order. One node can mint 4,096 × 1,023 ≈ 4.19 M IDs per second.
///
/// A raw value is accepted as elfo's `TraceIdValidator` accepts it (without its time check):
/// non-zero, with bit 63 clear. elfo's `TryFrom<u64>` refuses only 0, so it also takes values
/// with bit 63 set, which elfo's generator never makes and its validator refuses; idmint
/// refuses them everywhere, so that every TraceId it accepts is in the 63-bit domain (a
/// positive `i64`, as databases and Java store it). Any other non-zero value is accepted,
/// counter 0 included (elfo's generator starts at 1, but `TryFrom` takes it), and
/// [`from_parts`](Self::from_parts) packs whatever decoding returns.
///
/// # Example
///
/// ```
/// use idmint_core::{TraceId, TraceIdParts};
///
/// let id = TraceId::from_parts(TraceIdParts { timestamp: 1, node_no: 1, chunk_no: 0, counter: 1 })?;
/// assert_eq!(id.to_raw(), 274_882_101_249);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TraceId(NonZeroU64);

/// The fields of a [`TraceId`].
///
/// # Example
///
/// ```
/// use idmint_core::{TraceId, TraceIdParts};
///
/// let parts = TraceIdParts { timestamp: 276_476, node_no: 5045, chunk_no: 1924, counter: 595 };
/// assert_eq!(TraceId::from_parts(parts)?.to_raw(), 75_997_165_362_483_795);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct TraceIdParts {
    /// Unix seconds mod 2^25.
    pub timestamp: u64,
    /// The node number, 0..=65535.
    pub node_no: u64,
    /// The chunk number, 0..=4095.
    pub chunk_no: u64,
    /// The counter within the chunk, 1..=1023.
    pub counter: u64,
}

const COUNTER_SHIFT: u32 = 0;
const CHUNK_SHIFT: u32 = COUNTER_SHIFT + TraceId::COUNTER_BITS;
const NODE_SHIFT: u32 = CHUNK_SHIFT + TraceId::CHUNK_BITS;
const TIMESTAMP_SHIFT: u32 = NODE_SHIFT + TraceId::NODE_BITS;
/// The bits below the node number: chunk and counter, which the generator fills.
const BOTTOM_BITS: u32 = TraceId::CHUNK_BITS + TraceId::COUNTER_BITS;
/// Counters per chunk: 1..=1023.
const COUNTERS_PER_CHUNK: u64 = (1 << TraceId::COUNTER_BITS) - 1;
/// Chunks per second and node.
const CHUNKS: u64 = 1 << TraceId::CHUNK_BITS;
const MS_PER_SECOND: u64 = 1000;

const FIELDS: &[BitField] = &[
    BitField::new("timestamp", TIMESTAMP_SHIFT, TraceId::TIMESTAMP_BITS, FieldRole::Time),
    BitField::new("node_no", NODE_SHIFT, TraceId::NODE_BITS, FieldRole::Node),
    BitField::new("chunk_no", CHUNK_SHIFT, TraceId::CHUNK_BITS, FieldRole::Other),
    BitField::new("counter", COUNTER_SHIFT, TraceId::COUNTER_BITS, FieldRole::Other),
];

impl TraceId {
    /// How far ahead of the reader's clock [`unix_secs_near`](Self::unix_secs_near) places an
    /// ID rather than one period (about 388 days) back: a day, as a server's marks may be
    /// ahead of its clock (`max_ahead_ms`).
    pub const FUTURE_SECS: u64 = 86_400;
    /// Width of the timestamp field (seconds, wrapping).
    pub const TIMESTAMP_BITS: u32 = 25;
    /// Width of the node number field.
    pub const NODE_BITS: u32 = 16;
    /// Width of the chunk number field.
    pub const CHUNK_BITS: u32 = 12;
    /// Width of the counter field.
    pub const COUNTER_BITS: u32 = 10;
    /// How many IDs one node can issue per second: 4,096 chunks of 1,023 counters.
    pub const IDS_PER_SECOND: u64 = CHUNKS * COUNTERS_PER_CHUNK;
    /// The layout as data (a wrapping time field in 1-second ticks).
    pub const LAYOUT: BitLayout =
        BitLayout::builtin("trace-id", 63, FIELDS, 0, MS_PER_SECOND, true);
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// The counter width of elfo's TraceId, the `trace-id` layout's default: 10 bits of
    /// counter under 12 bits of chunk number.
    pub const DEFAULT_COUNTER_BITS: u32 = Self::COUNTER_BITS;
    /// The widest counter a `trace-id` layout may take: the chunk number keeps at least 1 bit.
    pub const MAX_COUNTER_BITS: u32 = BOTTOM_BITS - 1;
    /// An example ID (from elfo's tests), for documentation and tests.
    pub const EXAMPLE: TraceId = TraceId(NonZeroU64::new(276_561_162_443_934_569).unwrap());

    /// Packs fields into an ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field that does not fit, [`Error::Zero`] when every
    /// field is 0. A counter of 0 is packed as elfo's `TryFrom` reads it.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{TraceId, TraceIdParts};
    ///
    /// let parts = TraceIdParts { timestamp: 0, node_no: 0, chunk_no: 0, counter: 0 };
    /// assert!(TraceId::from_parts(parts).is_err());
    /// let parts = TraceIdParts { timestamp: 1, ..parts };
    /// assert_eq!(TraceId::from_parts(parts)?.into_parts(), parts);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_parts(parts: TraceIdParts) -> Result<Self, Error> {
        let raw =
            Self::LAYOUT.pack(&[parts.timestamp, parts.node_no, parts.chunk_no, parts.counter])?;
        Self::from_raw(raw)
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::TraceId;
    ///
    /// assert_eq!(TraceId::EXAMPLE.into_parts().node_no, 42_456);
    /// ```
    pub fn into_parts(self) -> TraceIdParts {
        let raw = self.to_raw();
        TraceIdParts {
            timestamp: FIELDS[0].get(raw),
            node_no: FIELDS[1].get(raw),
            chunk_no: FIELDS[2].get(raw),
            counter: FIELDS[3].get(raw),
        }
    }

    /// Accepts a raw value as elfo does: non-zero, with bit 63 clear.
    ///
    /// # Errors
    ///
    /// [`Error::Zero`] ("cannot be zero") or [`Error::HighestBitSet`] ("highest bit must be
    /// zero").
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, TraceId};
    ///
    /// assert_eq!(TraceId::from_raw(0), Err(Error::Zero));
    /// assert_eq!(TraceId::from_raw(1 << 63), Err(Error::HighestBitSet));
    /// assert!(TraceId::from_raw(1).is_ok());
    /// ```
    pub fn from_raw(raw: u64) -> Result<Self, Error> {
        let id = NonZeroU64::new(raw).ok_or(Error::Zero)?;
        if raw >> 63 != 0 {
            return Err(Error::HighestBitSet);
        }
        Ok(TraceId(id))
    }

    /// The raw value.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::TraceId;
    ///
    /// assert_eq!(TraceId::EXAMPLE.to_raw(), 276_561_162_443_934_569);
    /// ```
    pub const fn to_raw(self) -> u64 {
        self.0.get()
    }

    /// The Unix second the ID was issued in: the latest time not after `now_ms` plus
    /// [`FUTURE_SECS`](Self::FUTURE_SECS) whose seconds mod 2^25 equal the timestamp field
    /// (the field alone is ambiguous across periods). An ID a little ahead of the reader's
    /// clock (a server whose clock is ahead, or that issues above a stored mark after a
    /// restart) is read as the near future, not as 388 days ago.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{TraceId, TraceIdParts};
    ///
    /// let now_ms = 1_700_000_000_000;
    /// let secs = 1_700_000_000 - 10;
    /// let id = TraceId::from_parts(TraceIdParts {
    ///     timestamp: secs % (1 << 25),
    ///     node_no: 1,
    ///     chunk_no: 0,
    ///     counter: 1,
    /// })?;
    /// assert_eq!(id.unix_secs_near(now_ms), secs);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn unix_secs_near(self, now_ms: u64) -> u64 {
        let period = 1u64 << Self::TIMESTAMP_BITS;
        let now_secs = (now_ms / MS_PER_SECOND).saturating_add(Self::FUTURE_SECS);
        let field = FIELDS[0].get(self.to_raw());
        let base = now_secs - now_secs % period + field;
        if base <= now_secs { base } else { base.saturating_sub(period) }
    }

    /// A lock-free generator for one node that never issues a TraceId twice within a period.
    ///
    /// It counts (second, chunk, counter) in one atomic word like every idmint generator, and
    /// waits for the next second after 4,096 × 1,023 IDs in one second. For elfo's own
    /// per-thread scheme, use [`ChunkedTraceIdGenerator`].
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `node_no` is above 65535, [`Error::InvalidConfig`] for a
    /// bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, TraceId};
    ///
    /// let generator = TraceId::generator(7, &GeneratorConfig::default())?;
    /// let a = generator.next(1_700_000_000_000)?.ready().unwrap();
    /// let b = generator.next(1_700_000_000_000)?.ready().unwrap();
    /// assert_eq!(b.to_raw(), a.to_raw() + 1);
    /// assert_eq!(a.into_parts().counter, 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(node_no: u64, config: &GeneratorConfig) -> Result<Generator<TraceId>, Error> {
        Generator::from_plan(Self::plan(node_no)?, config)
    }

    /// How a generator fills TraceIds for `node_no`.
    pub(crate) fn plan(node_no: u64) -> Result<Plan, Error> {
        Self::plan_with(node_no, Self::COUNTER_BITS)
    }

    /// How a generator fills TraceIds for `node_no`, with `counter_bits` of counter under the
    /// chunk number (checked by the caller: 1..=[`MAX_COUNTER_BITS`](Self::MAX_COUNTER_BITS)).
    fn plan_with(node_no: u64, counter_bits: u32) -> Result<Plan, Error> {
        let node_bits = FIELDS[1].check(node_no)? << NODE_SHIFT;
        let kind = PackKind::Chunked {
            time_shift: TIMESTAMP_SHIFT,
            time_mask: FIELDS[0].max(),
            chunk_shift: counter_bits,
            per_chunk: (1 << counter_bits) - 1,
        };
        Ok(Plan {
            epoch_ms: SHAPE.epoch_ms,
            tick_ms: SHAPE.tick_ms,
            time_bits: Self::TIMESTAMP_BITS,
            time_wraps: true,
            seq_limit: ids_per_second(counter_bits),
            packer: Packer { kind, node_bits, seq_bits: SHAPE.seq_bits },
        })
    }

    fn from_generated_raw(raw: u64) -> Self {
        // The counter is at least 1, so a generated TraceId is never 0.
        TraceId(crate::id_impl::generated_nonzero(raw))
    }
}

/// Every TraceId generator's shape: seconds since the Unix epoch, and a sequence split into a
/// chunk number and a counter that starts at 1.
const SHAPE: Shape = Shape {
    epoch_ms: 0,
    tick_ms: MS_PER_SECOND,
    seq_bits: BOTTOM_BITS,
    seq_limit: TraceId::IDS_PER_SECOND,
    kind: PackKind::Chunked {
        time_shift: TIMESTAMP_SHIFT,
        time_mask: FIELDS[0].max(),
        chunk_shift: CHUNK_SHIFT,
        per_chunk: COUNTERS_PER_CHUNK,
    },
};

impl crate::generator::Sealed for TraceId {
    const SHAPE: Option<Shape> = Some(SHAPE);
}

u64_id!(TraceId);

/// IDs per second and node with `counter_bits` of counter: every chunk number, times the
/// counter values but 0.
const fn ids_per_second(counter_bits: u32) -> u64 {
    (1 << (BOTTOM_BITS - counter_bits)) * ((1 << counter_bits) - 1)
}

/// The `trace-id` layout: TraceId's bit fields, with a sequence split into chunk and counter;
/// the split is a parameter (`counter_bits`, elfo's 10 by default, the chunk number taking the
/// other 22 − `counter_bits` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TraceIdLayout {
    counter_bits: u32,
}

impl Default for TraceIdLayout {
    fn default() -> Self {
        TraceIdLayout { counter_bits: TraceId::DEFAULT_COUNTER_BITS }
    }
}

impl TraceIdLayout {
    /// The layout with `counter_bits` of counter.
    pub(crate) fn with_counter_bits(counter_bits: u32) -> Result<Self, Error> {
        if !(1..=TraceId::MAX_COUNTER_BITS).contains(&counter_bits) {
            return Err(Error::InvalidLayout(format!(
                "trace-id's counter must be 1..={} bits (the chunk number takes the rest of {BOTTOM_BITS}), not {counter_bits}",
                TraceId::MAX_COUNTER_BITS
            )));
        }
        Ok(TraceIdLayout { counter_bits })
    }

    /// The bit fields: elfo's constant for the default split, else the same fields with the
    /// chunk number and counter resized.
    fn bits(&self) -> BitLayout {
        if self.counter_bits == TraceId::DEFAULT_COUNTER_BITS {
            return TraceId::LAYOUT;
        }
        let k = self.counter_bits;
        let fields = vec![
            FIELDS[0].clone(),
            FIELDS[1].clone(),
            BitField::new("chunk_no", k, BOTTOM_BITS - k, FieldRole::Other),
            BitField::new("counter", 0, k, FieldRole::Other),
        ];
        BitLayout::builtin_owned("trace-id", 63, fields, 0, MS_PER_SECOND, true)
    }
}

impl LayoutKind for TraceIdLayout {
    fn name(&self) -> &str {
        "trace-id"
    }

    fn epoch_ms(&self) -> Option<u64> {
        Some(0)
    }

    fn with_counter_bits(&self, counter_bits: u32) -> Option<Result<Arc<dyn LayoutKind>, Error>> {
        Some(
            TraceIdLayout::with_counter_bits(counter_bits)
                .map(|layout| Arc::new(layout) as Arc<dyn LayoutKind>),
        )
    }

    fn fields(&self) -> Vec<FieldInfo> {
        self.bits().field_infos()
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        Some(self.bits().diagram())
    }

    fn capacity(&self) -> Capacity {
        // Chunk number and counter together are the sequence: 4,096 × 1,023 per second with
        // elfo's split.
        let per_second = ids_per_second(self.counter_bits);
        Capacity {
            ids_per_tick: per_second,
            ids_per_second_per_generator: per_second,
            ..self.bits().capacity()
        }
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let bits = self.bits();
        let raw = bits.pack(&bits.read_fields(values)?)?;
        Ok(AnyId::U64(TraceId::from_raw(raw)?.to_raw()))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let raw = TraceId::from_raw(id.u64_for(self.name())?)?.to_raw();
        let bits = self.bits();
        Ok(bits.fields().iter().map(|field| num(field.name(), field.get(raw))).collect())
    }

    fn time_ms(&self, id: AnyId, now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(TraceId::from_raw(id.u64_for(self.name())?)?.unix_secs_near(now_ms).checked_mul(1000))
    }

    fn fingerprint(&self) -> String {
        LayoutKind::fingerprint(&self.bits())
    }

    fn generator_count(&self) -> u64 {
        1 << TraceId::NODE_BITS
    }

    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        vec![num("node_no", generator_id)]
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let node_no = values.node("node_no", generator_id, 0)?;
        let plan = TraceId::plan_with(node_no, self.counter_bits)?;
        Ok(AnyGenerator::from_u64(Generator::from_plan(plan, config)?))
    }

    fn order(&self) -> Order {
        // The seconds wrap every 388 days.
        Order::Periodic
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Clock
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

/// elfo's `TraceIdValidator`: checks TraceIds that arrive from outside.
///
/// It refuses 0 ("cannot be zero"), a set bit 63 ("highest bit must be zero") and, when a
/// maximum time difference is set, a timestamp further from now than that ("invalid
/// timestamp"), comparing the 25-bit seconds around the wrap: the difference is
/// `min((a − b) mod 2^25, (b − a) mod 2^25)`. Like elfo's code (not its doc comment), it does not
/// check the node number.
///
/// # Example
///
/// ```
/// use idmint_core::{Error, TraceIdValidator};
///
/// let validator = TraceIdValidator::default().max_time_difference_secs(5);
/// let now_ms = 0;
/// assert_eq!(validator.validate(0, now_ms), Err(Error::Zero));
/// assert_eq!(validator.validate(1 << 63, now_ms), Err(Error::HighestBitSet));
/// assert!(validator.validate(5 << 38, now_ms).is_ok());
/// assert!(validator.validate(((1 << 25) - 5) << 38, now_ms).is_ok());
/// assert_eq!(validator.validate(6 << 38, now_ms), Err(Error::InvalidTimestamp));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceIdValidator {
    max_time_difference_secs: Option<u64>,
}

impl TraceIdValidator {
    /// Also refuse IDs whose timestamp is more than `secs` seconds from now (either way).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::TraceIdValidator;
    ///
    /// let validator = TraceIdValidator::default().max_time_difference_secs(60);
    /// assert!(validator.validate(1 << 38, 0).is_ok());
    /// ```
    pub fn max_time_difference_secs(mut self, secs: u64) -> Self {
        self.max_time_difference_secs = Some(secs);
        self
    }

    /// Validates a raw TraceId against the clock reading `now_ms` (Unix ms).
    ///
    /// # Errors
    ///
    /// [`Error::Zero`], [`Error::HighestBitSet`] or [`Error::InvalidTimestamp`], checked in
    /// that order.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, TraceIdValidator};
    ///
    /// let validator = TraceIdValidator::default().max_time_difference_secs(5);
    /// let ten_seconds = 10_000;
    /// assert_eq!(validator.validate(16 << 38, ten_seconds), Err(Error::InvalidTimestamp));
    /// assert_eq!(validator.validate(4 << 38, ten_seconds), Err(Error::InvalidTimestamp));
    /// ```
    pub fn validate(&self, raw: u64, now_ms: u64) -> Result<TraceId, Error> {
        let id = TraceId::from_raw(raw)?;
        if let Some(max) = self.max_time_difference_secs {
            let period = 1u64 << TraceId::TIMESTAMP_BITS;
            let now = (now_ms / MS_PER_SECOND) % period;
            let then = FIELDS[0].get(raw);
            let forward = (now + period - then) % period;
            let backward = (then + period - now) % period;
            if forward.min(backward) > max {
                return Err(Error::InvalidTimestamp);
            }
        }
        Ok(id)
    }
}

/// elfo's process-wide chunk registry: an atomic counter handing out chunk numbers mod 4096.
///
/// Share one registry (for example in a `static`) between the [`ChunkedTraceIdGenerator`]s of
/// all threads of a process.
///
/// # Example
///
/// ```
/// use idmint_core::ChunkRegistry;
///
/// static CHUNKS: ChunkRegistry = ChunkRegistry::new();
/// # let _ = &CHUNKS;
/// ```
#[derive(Debug, Default)]
pub struct ChunkRegistry(AtomicU64);

impl ChunkRegistry {
    /// A registry whose first chunk is 0.
    pub const fn new() -> Self {
        ChunkRegistry(AtomicU64::new(0))
    }

    #[cold]
    fn take(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) % CHUNKS
    }
}

/// elfo's per-thread TraceId generator, reproduced: fast and never waiting, but not a
/// uniqueness guarantee.
///
/// Each thread owns one (it is `Send` but not shared) and takes a chunk of 1,023 counters from a
/// shared [`ChunkRegistry`], so threads touch shared memory once per 1,023 IDs. As in elfo:
///
/// - a new generator takes a chunk on its first call; counters run 1..=1023 and are not reset
///   when the second changes;
/// - the second is cached and refreshed only when at least 1 s has passed since the last
///   refresh, so it may lag the clock by up to a second;
/// - it never blocks; chunk numbers wrap mod 4096, so more than about 4.19 M IDs in one second
///   on one node can repeat an ID, and so can a restart within the same second.
///
/// Use [`TraceId::generator`] where IDs must never repeat.
///
/// # Example
///
/// ```
/// use idmint_core::{ChunkRegistry, ChunkedTraceIdGenerator};
///
/// let registry = ChunkRegistry::new();
/// let mut generator = ChunkedTraceIdGenerator::new(0)?;
/// let second = 1 << 38;
/// assert_eq!(generator.next(&registry, 0).to_raw(), 1);
/// assert_eq!(generator.next(&registry, 500).to_raw(), 2);
/// assert_eq!(generator.next(&registry, 1_000).to_raw(), second + 3);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ChunkedTraceIdGenerator {
    node_bits: u64,
    chunk_no: u64,
    counter: u64,
    /// The cached second (mod 2^25), and the clock reading at which it was refreshed.
    cached: Option<(u64, u64)>,
}

impl ChunkedTraceIdGenerator {
    /// A generator for `node_no` (0 means "unknown", as in elfo).
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `node_no` is above 65535.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::ChunkedTraceIdGenerator;
    ///
    /// assert!(ChunkedTraceIdGenerator::new(65_536).is_err());
    /// ```
    pub fn new(node_no: u64) -> Result<Self, Error> {
        Ok(ChunkedTraceIdGenerator {
            node_bits: FIELDS[1].check(node_no)? << NODE_SHIFT,
            chunk_no: 0,
            counter: COUNTERS_PER_CHUNK,
            cached: None,
        })
    }

    /// The next TraceId at clock reading `now_ms` (Unix ms).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{ChunkRegistry, ChunkedTraceIdGenerator};
    ///
    /// let registry = ChunkRegistry::new();
    /// let mut generator = ChunkedTraceIdGenerator::new(1)?;
    /// let id = generator.next(&registry, 1_700_000_000_000);
    /// assert_eq!(id.into_parts().counter, 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next(&mut self, registry: &ChunkRegistry, now_ms: u64) -> TraceId {
        if self.counter == COUNTERS_PER_CHUNK {
            self.chunk_no = registry.take();
            self.counter = 0;
        }
        self.counter += 1;
        let secs = match self.cached {
            Some((secs, at)) if now_ms.saturating_sub(at) < MS_PER_SECOND => secs,
            _ => {
                let secs = (now_ms / MS_PER_SECOND) & FIELDS[0].max();
                self.cached = Some((secs, now_ms));
                secs
            }
        };
        let raw =
            secs << TIMESTAMP_SHIFT | self.node_bits | self.chunk_no << CHUNK_SHIFT | self.counter;
        TraceId(crate::id_impl::generated_nonzero(raw))
    }
}

/// The `trace-id` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "trace-id",
    about: "elfo TraceId: 25-bit seconds (wraps every 388 days), 16-bit node, 12-bit chunk, 10-bit counter",
    make: || Arc::new(TraceIdLayout::default()),
};
