//! Values of any layout: [`AnyId`] (64 or 128 bits), and [`AnyGenerator`] with its
//! [`AnyBatch`]. The 64-bit [`Generator`] that most layouts build is held directly (its `next`
//! is the hot path); generators of other shapes (DecimalId's counter, HotGuid) plug in through
//! the private `OtherGenerator` trait, so this file names no layout.

use std::fmt;

use crate::{
    compiled::Compiled,
    error::Error,
    format::Format,
    generator::{Batch, Generator},
    next::Next,
};

/// An ID of any layout: 64 or 128 bits.
///
/// # Example
///
/// ```
/// use idmint_core::AnyId;
///
/// assert_eq!(AnyId::U64(42).to_string(), "42");
/// assert_eq!(AnyId::U128(1).bits(), 128);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnyId {
    /// A 64-bit ID.
    U64(u64),
    /// A 128-bit ID (`hot-guid`, `uuid7`).
    U128(u128),
}

impl AnyId {
    /// The ID's width in bits.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::AnyId::U64(1).bits(), 64);
    /// ```
    pub const fn bits(self) -> u32 {
        match self {
            AnyId::U64(_) => 64,
            AnyId::U128(_) => 128,
        }
    }

    /// Writes the ID in `format`, appending to `out`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] when the format cannot hold the ID's width.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Format};
    ///
    /// let mut out = String::new();
    /// AnyId::U64(255).write(Format::Hex, &mut out)?;
    /// assert_eq!(out, "00000000000000ff");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn write(self, format: Format, out: &mut String) -> Result<(), Error> {
        match self {
            AnyId::U64(v) => format.write_u64(v, out),
            AnyId::U128(v) => {
                out.push_str(&format.encode_u128(v)?);
                Ok(())
            }
        }
    }
}

impl fmt::Display for AnyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyId::U64(v) => write!(f, "{v}"),
            AnyId::U128(v) => write!(f, "{v}"),
        }
    }
}

impl From<u64> for AnyId {
    fn from(raw: u64) -> AnyId {
        AnyId::U64(raw)
    }
}

impl From<u128> for AnyId {
    fn from(raw: u128) -> AnyId {
        AnyId::U128(raw)
    }
}

/// The raw value of a 64-bit ID; a 128-bit one is [`Error::InvalidId`].
///
/// # Example
///
/// ```
/// use idmint_core::AnyId;
///
/// assert_eq!(u64::try_from(AnyId::U64(7))?, 7);
/// assert!(u64::try_from(AnyId::U128(7)).is_err());
/// assert_eq!(u128::from(AnyId::U64(7)), 7);
/// # Ok::<(), idmint_core::Error>(())
/// ```
impl TryFrom<AnyId> for u64 {
    type Error = Error;

    fn try_from(id: AnyId) -> Result<u64, Error> {
        id.u64_for("u64")
    }
}

/// The raw value, widened: every ID fits 128 bits.
impl From<AnyId> for u128 {
    fn from(id: AnyId) -> u128 {
        match id {
            AnyId::U64(raw) => u128::from(raw),
            AnyId::U128(raw) => raw,
        }
    }
}

/// Parses an ID as [`AnyId`] writes it: decimal digits are a 64-bit ID (a 128-bit one past
/// `u64::MAX`), and the UUID form (`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as serde writes
/// 128-bit IDs) is a 128-bit ID.
///
/// # Example
///
/// ```
/// use idmint_core::AnyId;
///
/// assert_eq!("42".parse::<AnyId>()?, AnyId::U64(42));
/// assert_eq!("00000000-0000-0000-0000-00000000002a".parse::<AnyId>()?, AnyId::U128(42));
/// assert_eq!("18446744073709551616".parse::<AnyId>()?, AnyId::U128(1 << 64));
/// assert!("forty-two".parse::<AnyId>().is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
impl std::str::FromStr for AnyId {
    type Err = Error;

    fn from_str(text: &str) -> Result<AnyId, Error> {
        if text.contains('-') {
            return Format::Uuid.parse_u128(text).map(AnyId::U128);
        }
        match Format::Decimal.parse_u64(text) {
            Ok(raw) => Ok(AnyId::U64(raw)),
            Err(e) => Format::Decimal.parse_u128(text).map(AnyId::U128).map_err(|_| e),
        }
    }
}

/// Serialized as a string, so JavaScript never rounds it: a 64-bit ID in decimal, a 128-bit
/// one in the UUID form, which keeps the width through a round trip. Deserializes from that
/// string or from a JSON integer (a 64-bit ID).
///
/// # Example
///
/// ```
/// use idmint_core::AnyId;
///
/// assert_eq!(serde_json::to_string(&AnyId::U64(42))?, r#""42""#);
/// assert_eq!(serde_json::to_string(&AnyId::U128(1))?, r#""00000000-0000-0000-0000-000000000001""#);
/// assert_eq!(serde_json::from_str::<AnyId>("42")?, AnyId::U64(42));
/// assert_eq!(serde_json::from_str::<AnyId>(r#""00000000-0000-0000-0000-000000000001""#)?, AnyId::U128(1));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[cfg(feature = "serde")]
impl serde::Serialize for AnyId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            AnyId::U64(raw) => serializer.collect_str(raw),
            AnyId::U128(raw) => serializer
                .serialize_str(&Format::Uuid.encode_u128(*raw).map_err(serde::ser::Error::custom)?),
        }
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for AnyId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = AnyId;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ID: a decimal string or integer, or a UUID-form string")
            }

            fn visit_u64<E: serde::de::Error>(self, raw: u64) -> Result<AnyId, E> {
                Ok(AnyId::U64(raw))
            }

            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<AnyId, E> {
                text.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl AnyId {
    /// The ID, if it is `bits` wide; else [`Error::InvalidId`] for `layout`.
    pub(crate) fn of_width(self, bits: u32, layout: &str) -> Result<Self, Error> {
        if self.bits() == bits {
            return Ok(self);
        }
        Err(Error::InvalidId {
            layout: layout.to_owned(),
            reason: if self.bits() == 64 {
                "a 64-bit value is not a 128-bit id"
            } else {
                "a 128-bit value is not a 64-bit id"
            },
        })
    }

    /// Parses an ID `bits` wide written in `format`.
    pub(crate) fn parse(text: &str, format: Format, bits: u32) -> Result<Self, Error> {
        Ok(match bits {
            128 => AnyId::U128(format.parse_u128(text)?),
            _ => AnyId::U64(format.parse_u64(text)?),
        })
    }

    /// The 64-bit value, or [`Error::InvalidId`] for a 128-bit one.
    #[inline]
    pub(crate) fn u64_for(self, layout: &str) -> Result<u64, Error> {
        match self {
            AnyId::U64(raw) => Ok(raw),
            AnyId::U128(_) => Err(Error::InvalidId {
                layout: layout.to_owned(),
                reason: "a 128-bit value is not a 64-bit id",
            }),
        }
    }
}

/// A generator whose IDs are not packed by [`Generator<u64>`].
pub(crate) trait OtherGenerator: fmt::Debug + Send + Sync {
    /// As [`AnyGenerator::next`].
    fn next(&self, now_ms: u64) -> Result<Next<AnyId>, Error>;
    /// As [`AnyGenerator::next_batch`].
    fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<AnyBatch>, Error>;
    /// As [`AnyGenerator::next_batch_with_shard_key`]; refused unless the layout has a shard
    /// key.
    fn next_batch_with_shard_key(
        &self,
        _now_ms: u64,
        _n: u64,
        _shard_key: u32,
    ) -> Result<Next<AnyBatch>, Error> {
        Err(no_shard_key())
    }
    /// As [`AnyGenerator::last_ms`].
    fn last_ms(&self) -> Option<u64>;
    /// As [`AnyGenerator::set_ceiling_ms`].
    fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error>;
}

/// The refusal of a shard key by a layout whose IDs have none.
fn no_shard_key() -> Error {
    Error::InvalidFieldValue {
        field: "shard_key".into(),
        reason: "this layout's ids carry no shard key (only hot-guid's do)".into(),
    }
}

/// The IDs of a batch from an [`OtherGenerator`].
pub(crate) trait OtherBatch:
    ExactSizeIterator<Item = AnyId> + fmt::Debug + Send + Sync
{
}

impl<T: ExactSizeIterator<Item = AnyId> + fmt::Debug + Send + Sync> OtherBatch for T {}

#[derive(Debug)]
enum AnyInner {
    /// A 64-bit generator, with its hot path: compiled for its shape where a built-in
    /// layout's typed ID has that shape, else reading the shape from the generator.
    U64(Compiled),
    Other(Box<dyn OtherGenerator>),
}

/// A generator of any layout, made by [`Layout::generator`](crate::Layout::generator). Lock-free and `Sync`.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Layout};
///
/// let generator = Layout::builtin("hot-guid")?.generator(&[], &GeneratorConfig::default())?;
/// let batch = generator.next_batch(1_700_000_000_000, 3)?.ready().unwrap();
/// assert_eq!(batch.len(), 3);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug)]
pub struct AnyGenerator {
    inner: AnyInner,
}

impl AnyGenerator {
    /// Wraps a 64-bit generator.
    pub(crate) fn from_u64(generator: Generator<u64>) -> Self {
        AnyGenerator { inner: AnyInner::U64(Compiled::new(generator)) }
    }

    /// The 64-bit generator with its compiled path, for the tests of `compiled`.
    #[cfg(test)]
    pub(crate) fn compiled(&self) -> Option<&Compiled> {
        match &self.inner {
            AnyInner::U64(compiled) => Some(compiled),
            AnyInner::Other(_) => None,
        }
    }

    /// Wraps a generator of another shape.
    pub(crate) fn other(generator: impl OtherGenerator + 'static) -> Self {
        AnyGenerator { inner: AnyInner::Other(Box::new(generator)) }
    }

    /// The next ID at `now_ms`; see [`Generator::next`].
    ///
    /// # Errors
    ///
    /// As [`Generator::next`], and [`Error::CounterExhausted`] for `decimal-id`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout};
    ///
    /// let generator = Layout::builtin("decimal-id")?.generator(&[], &GeneratorConfig::default())?;
    /// assert_eq!(generator.next(0)?.ready().unwrap().to_string(), "10000000000");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next(&self, now_ms: u64) -> Result<Next<AnyId>, Error> {
        if let AnyInner::U64(compiled) = &self.inner
            && let Some(raw) = compiled.try_next(now_ms)
        {
            return Ok(Next::Ready(AnyId::U64(raw)));
        }
        self.next_in_full(now_ms)
    }

    /// Every case of [`next`](Self::next) but the hot path's, out of line.
    #[inline(never)]
    fn next_in_full(&self, now_ms: u64) -> Result<Next<AnyId>, Error> {
        match &self.inner {
            AnyInner::U64(compiled) => Ok(compiled.generator().next(now_ms)?.map(AnyId::U64)),
            AnyInner::Other(g) => g.next(now_ms),
        }
    }

    /// Up to `n` consecutive IDs at `now_ms`; see [`Generator::next_batch`].
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next), plus [`Error::EmptyBatch`] for `n == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout, Snowflake};
    ///
    /// let generator = Layout::builtin("snowflake")?.generator(&[], &GeneratorConfig::default())?;
    /// let ids: Vec<_> = generator.next_batch(Snowflake::EPOCH_MS + 1, 5)?.ready().unwrap().collect();
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<AnyBatch>, Error> {
        Ok(match &self.inner {
            AnyInner::U64(compiled) => compiled
                .generator()
                .next_batch(now_ms, n)?
                .map(|b| AnyBatch { inner: BatchInner::U64(b) }),
            AnyInner::Other(g) => g.next_batch(now_ms, n)?,
        })
    }

    /// Up to `n` consecutive IDs at `now_ms`, each with `shard_key` in place of the
    /// generator's own, for layouts whose IDs carry a shard key
    /// ([`Layout::takes_shard_key`](crate::Layout::takes_shard_key): `hot-guid`). The IDs come
    /// from the generator's one sequence, whatever the key, so they are unique and in the
    /// generator's order even across keys.
    ///
    /// # Errors
    ///
    /// As [`next_batch`](Self::next_batch), and [`Error::InvalidFieldValue`] for a layout
    /// without a shard key.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, GeneratorConfig, HotGuid, Layout};
    ///
    /// let generator = Layout::builtin("hot-guid")?.generator(&[], &GeneratorConfig::default())?;
    /// let ids: Vec<AnyId> =
    ///     generator.next_batch_with_shard_key(1_700_000_000_000, 2, 1023)?.ready().unwrap().collect();
    /// assert!(ids.iter().all(|&id| HotGuid::try_from(id).is_ok_and(|g| g.shard_key() == 1023)));
    ///
    /// let snowflake = Layout::builtin("snowflake")?.generator(&[], &GeneratorConfig::default())?;
    /// assert!(snowflake.next_batch_with_shard_key(1_700_000_000_000, 2, 1023).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch_with_shard_key(
        &self,
        now_ms: u64,
        n: u64,
        shard_key: u32,
    ) -> Result<Next<AnyBatch>, Error> {
        match &self.inner {
            AnyInner::U64(_) => Err(no_shard_key()),
            AnyInner::Other(g) => g.next_batch_with_shard_key(now_ms, n, shard_key),
        }
    }

    /// The start of the last issued tick in Unix ms (see [`Generator::last_ms`]); `None` for
    /// `decimal-id`, which has no clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout};
    ///
    /// let generator = Layout::builtin("trace-id")?.generator(&[], &GeneratorConfig::default())?;
    /// generator.next(5_500)?;
    /// assert_eq!(generator.last_ms(), Some(5_000));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn last_ms(&self) -> Option<u64> {
        match &self.inner {
            AnyInner::U64(compiled) => Some(compiled.generator().last_ms()),
            AnyInner::Other(g) => g.last_ms(),
        }
    }

    /// Allows IDs only in ticks that start at or before `mark_ms`; see
    /// [`Generator::set_ceiling_ms`]. Has no effect on `decimal-id`.
    ///
    /// # Errors
    ///
    /// [`Error::BeforeEpoch`] when `mark_ms` is before the layout's epoch.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout, Snowflake};
    ///
    /// let generator = Layout::builtin("snowflake")?.generator(&[], &GeneratorConfig::default())?;
    /// generator.set_ceiling_ms(Snowflake::EPOCH_MS + 10)?;
    /// assert!(generator.next(Snowflake::EPOCH_MS + 11).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        match &self.inner {
            AnyInner::U64(compiled) => compiled.generator().set_ceiling_ms(mark_ms),
            AnyInner::Other(g) => g.set_ceiling_ms(mark_ms),
        }
    }
}

#[derive(Debug)]
enum BatchInner {
    U64(Batch<u64>),
    Other(Box<dyn OtherBatch>),
}

/// A batch from [`AnyGenerator::next_batch`]: IDs in increasing order.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Layout};
///
/// let generator = Layout::builtin("js53")?.generator(&[], &GeneratorConfig::default())?;
/// let batch = generator.next_batch(idmint_core::Js53::EPOCH_MS, 4)?.ready().unwrap();
/// assert_eq!(batch.count(), 4);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug)]
pub struct AnyBatch {
    inner: BatchInner,
}

impl Iterator for AnyBatch {
    type Item = AnyId;

    #[inline]
    fn next(&mut self) -> Option<AnyId> {
        match &mut self.inner {
            BatchInner::U64(b) => b.next().map(AnyId::U64),
            BatchInner::Other(b) => b.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            BatchInner::U64(b) => b.size_hint(),
            BatchInner::Other(b) => b.size_hint(),
        }
    }
}

impl AnyBatch {
    /// Wraps the IDs of a batch from an [`OtherGenerator`].
    pub(crate) fn other(ids: impl OtherBatch + 'static) -> Self {
        AnyBatch { inner: BatchInner::Other(Box::new(ids)) }
    }

    /// Appends every ID of a batch of 64-bit IDs to `out`, in order, in bulk: the layout is
    /// matched once and the typed batch then runs one tight loop per tick (no `AnyId` and no
    /// dispatch per ID), so it is much faster than `out.extend(batch)`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] when the batch holds 128-bit IDs (hot-guid); `out` is left as it
    /// was and the IDs are dropped. [`Layout::id_bits`](crate::Layout::id_bits) says
    /// beforehand.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout, Snowflake};
    ///
    /// let generator = Layout::builtin("snowflake")?.generator(&[], &GeneratorConfig::default())?;
    /// let mut ids = vec![0];
    /// generator.next_batch(Snowflake::EPOCH_MS + 1, 4_000)?.ready().unwrap().extend_u64s(&mut ids)?;
    /// assert_eq!(ids.len(), 4_001);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    ///
    /// let guids = Layout::builtin("hot-guid")?.generator(&[], &GeneratorConfig::default())?;
    /// assert!(guids.next_batch(1_700_000_000_000, 2)?.ready().unwrap().extend_u64s(&mut ids).is_err());
    /// assert_eq!(ids.len(), 4_001);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn extend_u64s(self, out: &mut Vec<u64>) -> Result<(), Error> {
        match self.inner {
            BatchInner::U64(mut b) => {
                out.reserve(b.len());
                b.drain_raw(|id| out.push(id));
                Ok(())
            }
            BatchInner::Other(b) => {
                let start = out.len();
                out.reserve(b.len());
                for id in b {
                    match id {
                        AnyId::U64(v) => out.push(v),
                        AnyId::U128(_) => {
                            out.truncate(start);
                            return Err(Error::InvalidId {
                                layout: "128-bit".to_owned(),
                                reason: "a 128-bit value is not a 64-bit id",
                            });
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Appends every ID of the batch to `out` as fixed-width big-endian bytes, one after
    /// another: 8 bytes per 64-bit ID, 16 per 128-bit one. Big-endian, so that the byte
    /// strings sort like the IDs. Like [`extend_u64s`](Self::extend_u64s) it matches the
    /// layout once and then runs a tight loop over the typed batch.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Layout, Snowflake};
    ///
    /// let generator = Layout::builtin("snowflake")?.generator(&[], &GeneratorConfig::default())?;
    /// let mut bytes = Vec::new();
    /// generator.next_batch(Snowflake::EPOCH_MS + 1, 3)?.ready().unwrap().write_be(&mut bytes);
    /// assert_eq!(bytes.len(), 3 * 8);
    /// let ids: Vec<u64> =
    ///     bytes.chunks_exact(8).map(|b| u64::from_be_bytes(b.try_into().unwrap())).collect();
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// assert!(bytes[..8] < bytes[8..16]);
    ///
    /// let guids = Layout::builtin("hot-guid")?.generator(&[], &GeneratorConfig::default())?;
    /// let mut bytes = Vec::new();
    /// guids.next_batch(1_700_000_000_000, 2)?.ready().unwrap().write_be(&mut bytes);
    /// assert_eq!(bytes.len(), 2 * 16);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn write_be(self, out: &mut Vec<u8>) {
        match self.inner {
            BatchInner::U64(mut b) => {
                out.reserve(b.len().saturating_mul(8));
                b.drain_raw(|id| out.extend_from_slice(&id.to_be_bytes()));
            }
            BatchInner::Other(b) => {
                for id in b {
                    match id {
                        AnyId::U64(v) => out.extend_from_slice(&v.to_be_bytes()),
                        AnyId::U128(v) => out.extend_from_slice(&v.to_be_bytes()),
                    }
                }
            }
        }
    }
}

impl ExactSizeIterator for AnyBatch {}
impl std::iter::FusedIterator for AnyBatch {}
