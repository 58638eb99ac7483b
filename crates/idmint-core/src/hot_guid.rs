//! HotGuid (the .NET HotGuid generator): a time-first .NET `Guid` with a shard key, its text and byte forms, and
//! its lock-free sans-I/O generator.
//!
//! Nothing here reads a clock, the machine name or the process id: callers pass them in.
//! The layout follows dmlarionov/HotGuid byte for byte; the generator's counter deliberately
//! does not (see [`HotGuidGenerator`]).

use std::{fmt, iter::FusedIterator, str::FromStr};

use md5::{Digest, Md5};

use crate::{
    any::{AnyBatch, AnyGenerator, AnyId, OtherGenerator},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::GeneratorConfig,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, same_as},
    next::Next,
    sequence::Sequencer,
};

/// Length of a HotGuid in bytes.
const LEN: usize = 16;
/// `ToByteArray()` offset of the timestamp (4 bytes, little-endian).
const TIMESTAMP_AT: usize = 0;
/// `ToByteArray()` offset of the process bytes (3 bytes of machine hash, 2 bytes of pid).
const PROCESS_AT: usize = 4;
/// Number of process bytes.
const PROCESS_LEN: usize = 5;
/// How many leading bytes of MD5(machine name) the process bytes take.
const MACHINE_HASH_LEN: usize = 3;
/// `ToByteArray()` offset of the counter (3 bytes, big-endian).
const COUNTER_AT: usize = 9;
/// Number of counter bytes.
const COUNTER_LEN: usize = 3;
/// `ToByteArray()` offset of the shard key (4 bytes, little-endian).
const SHARD_AT: usize = 12;
/// Width of the counter field in bits.
const COUNTER_BITS: u32 = 24;
/// Where the timestamp sits in the `u128` (text digits 1-8, read big-endian).
const TIMESTAMP_SHIFT: u32 = 96;
/// Where the counter sits in the `u128` (text bytes 9..=11, read big-endian).
const COUNTER_SHIFT: u32 = 32;

/// `TEXT_ORDER[i]` is the `ToByteArray()` index of byte `i` of the "D" string (and of the
/// big-endian `u128`): .NET prints bytes 0..=3 as a little-endian `u32` and bytes 4..=5 and
/// 6..=7 as little-endian `u16`s, then bytes 8..=15 as they are.
const TEXT_ORDER: [usize; LEN] = [3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15];
/// `SQL_ORDER[i]` is the `ToByteArray()` index of byte `i` of the SqlGuid (HotGuid's
/// `ToSqlGuid`): SQL Server compares bytes 10..=15 first, then 8..=9, 6..=7, 4..=5, 0..=3.
const SQL_ORDER: [usize; LEN] = [12, 13, 14, 15, 10, 11, 8, 9, 7, 6, 3, 2, 1, 0, 5, 4];

/// Length of the "D" string.
#[cfg(test)]
const TEXT_LEN: usize = 36;

/// The generator's tick: one second, the timestamp's unit.
const TICK_MS: u64 = 1000;
/// How many counter values one second holds.
const IDS_PER_SECOND: u64 = 1 << COUNTER_BITS;

/// A HotGuid: a 128-bit .NET `Guid` whose string and sort order begin with the time.
///
/// The value is the `u128` whose big-endian hex digits are the digits of the .NET "D" string,
/// so ordering `HotGuid`s orders them like their strings, like .NET's `Guid.CompareTo` and
/// like SQL Server after [`to_sql_guid_bytes`](Self::to_sql_guid_bytes): by timestamp first.
///
/// The 16 bytes in .NET `Guid.ToByteArray()` order (`g`), which are also what HotGuid passes
/// to `new Guid(byte[])`:
///
/// | bytes | field | encoding | range |
/// | --- | --- | --- | --- |
/// | 0..=3 | `timestamp` | Unix seconds mod 2^32, little-endian `u32` | 0..=4294967295 |
/// | 4..=6 | `process[0..3]` | the first 3 bytes of MD5(UTF-8 machine name) | any |
/// | 7..=8 | `process[3..5]` | the pid's low 16 bits, big-endian | any |
/// | 9..=11 | `counter` | 24 bits, big-endian | 0..=16777215 |
/// | 12..=15 | `shard_key` | little-endian `u32` | 0..=4294967295 |
///
/// .NET prints it as `g3g2g1g0-g5g4-g7g6-g8g9-g10g11g12g13g14g15`, so the first 8 hex digits
/// are the timestamp as ordinary hex. It is **not** an RFC 4122 UUID: no version or variant
/// bits are set (the "version" digit holds pid bits 15..12). Every 128-bit value is a valid
/// `HotGuid`.
///
/// # Example
///
/// ```
/// use idmint_core::{HotGuid, HotGuidParts};
///
/// let guid = HotGuid::from_parts(HotGuidParts {
///     timestamp: 1_644_105_600,
///     process: HotGuid::process_bytes("WORKSTATION", 4660),
///     counter: 123_457,
///     shard_key: 208,
/// })?;
/// assert_eq!(guid.to_string(), "61ff0f80-981e-12e9-3401-e241d0000000");
/// assert_eq!(guid.unix_timestamp(), 1_644_105_600);
/// assert_eq!(guid.shard_key(), 208);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HotGuid(u128);

/// The fields of a [`HotGuid`], as raw values.
///
/// # Example
///
/// ```
/// use idmint_core::{HotGuid, HotGuidParts};
///
/// let guid: HotGuid = "01020304-0605-0807-090a-0b0c100f0e0d".parse()?;
/// assert_eq!(
///     guid.into_parts(),
///     HotGuidParts {
///         timestamp: 0x0102_0304,
///         process: [5, 6, 7, 8, 9],
///         counter: 0x0A_0B0C,
///         shard_key: 0x0D0E_0F10,
///     }
/// );
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct HotGuidParts {
    /// Unix seconds mod 2^32.
    pub timestamp: u32,
    /// MD5(machine name)[..3] followed by the pid's low 16 bits, big-endian; see
    /// [`HotGuid::process_bytes`].
    pub process: [u8; 5],
    /// The counter, at most [`HotGuid::COUNTER_MAX`].
    pub counter: u32,
    /// The shard key.
    pub shard_key: u32,
}

impl HotGuid {
    /// The largest counter value: the counter field has 24 bits.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::HotGuid::COUNTER_MAX, 16_777_215);
    /// ```
    pub const COUNTER_MAX: u32 = (1 << COUNTER_BITS) - 1;

    /// Packs the fields.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] when `counter` is above [`COUNTER_MAX`](Self::COUNTER_MAX);
    /// it is refused, never masked.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, HotGuid, HotGuidParts};
    ///
    /// let parts =
    ///     HotGuidParts { timestamp: 1_644_105_600, process: [0; 5], counter: 1, shard_key: 208 };
    /// assert_eq!(HotGuid::from_parts(parts)?.to_string(), "61ff0f80-0000-0000-0000-0001d0000000");
    ///
    /// let too_big = HotGuidParts { counter: 1 << 24, ..parts };
    /// assert!(matches!(HotGuid::from_parts(too_big), Err(Error::FieldOutOfRange { .. })));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_parts(parts: HotGuidParts) -> Result<Self, Error> {
        if parts.counter > Self::COUNTER_MAX {
            return Err(Error::out_of_range(
                "counter",
                u64::from(parts.counter),
                0,
                u64::from(Self::COUNTER_MAX),
            ));
        }
        let mut g = [0; LEN];
        put(&mut g, TIMESTAMP_AT, &parts.timestamp.to_le_bytes());
        put(&mut g, PROCESS_AT, &parts.process);
        let [_, counter @ ..] = parts.counter.to_be_bytes();
        put(&mut g, COUNTER_AT, &counter);
        put(&mut g, SHARD_AT, &parts.shard_key.to_le_bytes());
        Ok(Self::from_dotnet_bytes(g))
    }

    /// The fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "61ff0f80-981e-12e9-3401-e241d0000000".parse()?;
    /// let parts = guid.into_parts();
    /// assert_eq!(parts.process, HotGuid::process_bytes("WORKSTATION", 4660));
    /// assert_eq!(parts.counter, 123_457);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn into_parts(self) -> HotGuidParts {
        let g = self.to_dotnet_bytes();
        let [c0, c1, c2] = take::<COUNTER_LEN>(&g, COUNTER_AT);
        HotGuidParts {
            timestamp: u32::from_le_bytes(take(&g, TIMESTAMP_AT)),
            process: take(&g, PROCESS_AT),
            counter: u32::from_be_bytes([0, c0, c1, c2]),
            shard_key: u32::from_le_bytes(take(&g, SHARD_AT)),
        }
    }

    /// The process bytes HotGuid derives from a machine name and a process id:
    /// MD5(UTF-8 `machine_name`)[..3] followed by the pid's low 16 bits, big-endian.
    ///
    /// Upstream reads `Environment.MachineName` and the current pid; this crate does no I/O,
    /// so the caller passes both in. Upstream leaves the pid bytes 0 when it may not read the
    /// pid: pass 0 to match.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// assert_eq!(HotGuid::process_bytes("WORKSTATION", 4660), [0x1e, 0x98, 0xe9, 0x12, 0x34]);
    /// ```
    pub fn process_bytes(machine_name: &str, pid: u32) -> [u8; 5] {
        let hash = Md5::digest(machine_name.as_bytes());
        let mut process = [0; PROCESS_LEN];
        process[..MACHINE_HASH_LEN].copy_from_slice(&hash[..MACHINE_HASH_LEN]);
        // Truncation is the point: upstream keeps the pid's low 16 bits.
        process[MACHINE_HASH_LEN..].copy_from_slice(&(pid as u16).to_be_bytes());
        process
    }

    /// The HotGuid with these bytes in .NET `Guid.ToByteArray()` order (what `new Guid(byte[])`
    /// takes).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let bytes = 0xC98B9135_6D19EA40_9779889D_79B753F0_u128.to_be_bytes();
    /// let guid = HotGuid::from_dotnet_bytes(bytes);
    /// assert_eq!(guid.to_string(), "35918bc9-196d-40ea-9779-889d79b753f0");
    /// ```
    pub const fn from_dotnet_bytes(bytes: [u8; 16]) -> Self {
        HotGuid(u128::from_be_bytes(gather(&bytes, &TEXT_ORDER)))
    }

    /// The bytes in .NET `Guid.ToByteArray()` order.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "01020304-0605-0807-090a-0b0c100f0e0d".parse()?;
    /// assert_eq!(guid.to_dotnet_bytes(), [4, 3, 2, 1, 5, 6, 7, 8, 9, 10, 11, 12, 16, 15, 14, 13]);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn to_dotnet_bytes(self) -> [u8; 16] {
        scatter(&self.0.to_be_bytes(), &TEXT_ORDER)
    }

    /// The HotGuid whose "D" string is the big-endian hex of `value`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid = HotGuid::from_u128(0x01020304_0605_0807_090a_0b0c100f0e0d);
    /// assert_eq!(guid.to_string(), "01020304-0605-0807-090a-0b0c100f0e0d");
    /// assert_eq!(u128::from(guid), guid.as_u128());
    /// ```
    pub const fn from_u128(value: u128) -> Self {
        HotGuid(value)
    }

    /// The value whose big-endian hex is the "D" string's digits.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "61ff0f80-0000-0000-0000-000100000000".parse()?;
    /// assert_eq!(guid.as_u128(), 0x61ff0f80_0000_0000_0000_000100000000);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// Writes the HotGuid in `format`: [`Format::Uuid`] is the "D" string (as `Display`),
    /// [`Format::Bytes`] the `ToByteArray()` bytes as hex, [`Format::SqlGuidBytes`] the
    /// [`to_sql_guid_bytes`](Self::to_sql_guid_bytes) as hex, and the other formats write
    /// [`as_u128`](Self::as_u128).
    ///
    /// # Errors
    ///
    /// None today; the `Result` matches [`Format::encode_u128`].
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Format, HotGuid};
    ///
    /// let guid: HotGuid = "01020304-0605-0807-090a-0b0c100f0e0d".parse()?;
    /// assert_eq!(guid.to_text(Format::Bytes)?, "0403020105060708090a0b0c100f0e0d");
    /// assert_eq!(HotGuid::parse_text(&guid.to_text(Format::Base62)?, Format::Base62)?, guid);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn to_text(self, format: Format) -> Result<String, Error> {
        format.encode_u128(self.0)
    }

    /// Reads a HotGuid written in `format` (see [`to_text`](Self::to_text)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] saying what is wrong with `text`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Format, HotGuid};
    ///
    /// let guid = HotGuid::parse_text("0403020105060708090a0b0c100f0e0d", Format::Bytes)?;
    /// assert_eq!(guid.to_string(), "01020304-0605-0807-090a-0b0c100f0e0d");
    /// assert!(HotGuid::parse_text("not hex", Format::Bytes).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_text(text: &str, format: Format) -> Result<Self, Error> {
        format.parse_u128(text).map(HotGuid)
    }

    /// The shard key, as HotGuid's `ExtractShardKey` reads it: the little-endian `u32` at
    /// `ToByteArray()` bytes 12..=15. Meaningless for a `Guid` that is not a HotGuid.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "61ff0f80-0000-0000-0000-00017f62ef01".parse()?;
    /// assert_eq!(guid.shard_key(), 32_465_535);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn shard_key(self) -> u32 {
        self.into_parts().shard_key
    }

    /// The Unix timestamp in seconds (mod 2^32), as HotGuid's `ExtractUnixTimestamp` reads it:
    /// the little-endian `u32` at `ToByteArray()` bytes 0..=3.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "61ff0f80-0000-0000-0000-00017f62ef01".parse()?;
    /// assert_eq!(guid.unix_timestamp(), 1_644_105_600); // 2022-02-06T00:00:00Z
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn unix_timestamp(self) -> u32 {
        self.into_parts().timestamp
    }

    /// The bytes of the `SqlGuid` that HotGuid's `ToSqlGuid` makes: re-sequenced so SQL Server,
    /// which compares bytes 10..=15 first, then 8..=9, 6..=7, 4..=5 and 0..=3, sorts them in
    /// the same order as `HotGuid`.
    ///
    /// With `g` the `ToByteArray()` bytes, the result is
    /// `g[12, 13, 14, 15, 10, 11, 8, 9, 7, 6, 3, 2, 1, 0, 5, 4]`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let guid: HotGuid = "01020304-0605-0807-090a-0b0c100f0e0d".parse()?;
    /// let sql = guid.to_sql_guid_bytes();
    /// assert_eq!(sql, [16, 15, 14, 13, 11, 12, 9, 10, 8, 7, 1, 2, 3, 4, 6, 5]);
    /// assert_eq!(HotGuid::from_sql_guid_bytes(sql), guid);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn to_sql_guid_bytes(self) -> [u8; 16] {
        gather(&self.to_dotnet_bytes(), &SQL_ORDER)
    }

    /// The HotGuid of a `SqlGuid`'s bytes made by [`to_sql_guid_bytes`](Self::to_sql_guid_bytes):
    /// the exact inverse, as HotGuid's `SqlGuid.ToGuid()`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    ///
    /// let sql = [16, 15, 14, 13, 11, 12, 9, 10, 8, 7, 1, 2, 3, 4, 6, 5];
    /// let guid = HotGuid::from_sql_guid_bytes(sql);
    /// assert_eq!(guid.to_string(), "01020304-0605-0807-090a-0b0c100f0e0d");
    /// ```
    pub const fn from_sql_guid_bytes(bytes: [u8; 16]) -> Self {
        Self::from_dotnet_bytes(scatter(&bytes, &SQL_ORDER))
    }

    /// A lock-free generator of HotGuids for one process and shard key.
    ///
    /// `config` is applied as for the crate's other generators, in whole seconds (rounded
    /// down): `max_backward_ms` of 999 or less tolerates no step back across a second boundary.
    /// See [`HotGuidGenerator`] for how the counter works.
    ///
    /// # Errors
    ///
    /// [`Error::TimeExhausted`] when `config.start_above_ms` lies beyond the last second the
    /// generator can issue.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, HotGuid};
    ///
    /// let process = HotGuid::process_bytes("WORKSTATION", 4660);
    /// let generator = HotGuid::generator(process, 208, &GeneratorConfig::default())?;
    /// let guid = generator.next(1_644_105_600_250)?.ready().unwrap();
    /// assert_eq!(guid.to_string(), "61ff0f80-981e-12e9-3400-0000d0000000");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        process: [u8; 5],
        shard_key: u32,
        config: &GeneratorConfig,
    ) -> Result<HotGuidGenerator, Error> {
        HotGuidGenerator::new(process, shard_key, config)
    }
}

/// Copies `src` into `dst` from offset `at`.
fn put(dst: &mut [u8; LEN], at: usize, src: &[u8]) {
    dst[at..at + src.len()].copy_from_slice(src);
}

/// The `N` bytes of `src` from offset `at`.
fn take<const N: usize>(src: &[u8; LEN], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&src[at..at + N]);
    out
}

/// `out[i] = src[order[i]]`.
const fn gather(src: &[u8; LEN], order: &[usize; LEN]) -> [u8; LEN] {
    let mut out = [0; LEN];
    let mut i = 0;
    while i < LEN {
        out[i] = src[order[i]];
        i += 1;
    }
    out
}

/// `out[order[i]] = src[i]`: the inverse of [`gather`].
const fn scatter(src: &[u8; LEN], order: &[usize; LEN]) -> [u8; LEN] {
    let mut out = [0; LEN];
    let mut i = 0;
    while i < LEN {
        out[order[i]] = src[i];
        i += 1;
    }
    out
}

impl From<u128> for HotGuid {
    fn from(value: u128) -> Self {
        HotGuid(value)
    }
}

/// The HotGuid held by an [`AnyId`](crate::AnyId): a 128-bit value.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, HotGuid};
///
/// let guid = HotGuid::from(7u128);
/// assert_eq!(HotGuid::try_from(AnyId::from(guid))?, guid);
/// assert!(HotGuid::try_from(AnyId::U64(7)).is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
impl TryFrom<crate::AnyId> for HotGuid {
    type Error = crate::Error;

    fn try_from(id: crate::AnyId) -> Result<HotGuid, crate::Error> {
        match id.of_width(128, "hot-guid")? {
            crate::AnyId::U128(raw) => Ok(HotGuid::from(raw)),
            crate::AnyId::U64(_) => unreachable!("of_width checked the width"),
        }
    }
}

impl From<HotGuid> for crate::AnyId {
    fn from(guid: HotGuid) -> crate::AnyId {
        crate::AnyId::U128(u128::from(guid))
    }
}

impl From<HotGuid> for u128 {
    fn from(guid: HotGuid) -> Self {
        guid.0
    }
}

/// The .NET "D" string: 32 lower-case hex digits in groups of 8-4-4-4-12.
impl fmt::Display for HotGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The "D" string is the big-endian value in `Format::Uuid`, which cannot fail for
        // 128-bit values.
        f.pad(&Format::Uuid.encode_u128(self.0).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for HotGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HotGuid({self})")
    }
}

/// Parses the .NET "D" string strictly: 32 hex digits of either case, in groups of
/// 8-4-4-4-12 separated by hyphens, nothing else (no braces, no spaces).
impl FromStr for HotGuid {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Format::Uuid.parse_u128(s).map(HotGuid)
    }
}

/// A lock-free, sans-I/O generator of [`HotGuid`]s for one process and shard key.
///
/// It keeps the last issued (second, counter) pair in one atomic word and moves it strictly
/// up on every call, like the crate's [`Generator`](crate::Generator): the timestamp field is
/// the second and the counter field counts from 0 within each second. So:
///
/// - the HotGuids of one generator are unique and strictly increase in `HotGuid` order, which
///   is .NET `Guid` order and SQL Server order (until the timestamp wraps, below);
/// - a second holds 2^24 IDs; then [`next`](Self::next) answers [`Next::Wait`] until the next
///   second (or borrows future seconds up to `borrow_ms`);
/// - a clock up to `max_backward_ms` behind is absorbed by continuing from the last second;
///   further behind is [`Error::ClockBackward`];
/// - the timestamp field is the Unix second mod 2^32, so after 2106-02-07T06:28:15Z it wraps to
///   0, 1, … as upstream does on .NET 6 on x64 (the order then restarts; uniqueness holds).
///
/// **How this differs from upstream.** dmlarionov/HotGuid keeps one process-wide counter,
/// seeded with `Random.Next(500000)` (a value in 0..=499999), incremented before use and
/// masked to 24 bits, and never reset. Its IDs within one second are therefore not in counter
/// order once the counter wraps, and more than 2^24 IDs in one second from one process collide;
/// it also does not notice a clock stepping back. Here the counter restarts at 0 each second,
/// so it carries no randomness: the uniqueness of IDs across generators rests entirely on the
/// process bytes (and on the shard key only between generators that share process bytes). Use
/// one generator per process bytes, shared by reference between threads, with the key per call
/// ([`next_with_shard_key`](Self::next_with_shard_key)) where keys vary: within one generator
/// uniqueness does not depend on the key. Make sure no two live processes share process bytes
/// (pid reuse and MD5-prefix collisions of machine names are the risks upstream has too).
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, HotGuid, Next};
///
/// let generator = HotGuid::generator([1, 2, 3, 4, 5], 7, &GeneratorConfig::default())?;
/// let t = 1_700_000_000_000;
/// let a = generator.next(t)?.ready().unwrap();
/// let b = generator.next(t + 10)?.ready().unwrap();
/// assert!(b > a);
/// assert_eq!(b.into_parts().counter, 1);
///
/// // 2^24 IDs per second; then wait for the next second.
/// let batch = generator.next_batch(t, 1 << 24)?.ready().unwrap();
/// assert_eq!(batch.len(), (1 << 24) - 2);
/// assert_eq!(generator.next(t)?, Next::Wait { until_ms: t + 1_000 });
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug)]
pub struct HotGuidGenerator {
    seq: Sequencer,
    /// The fixed fields (process bytes and shard key), with timestamp and counter 0.
    node: HotGuid,
}

impl HotGuidGenerator {
    /// Builds a generator, applying `config` as every generator does.
    fn new(process: [u8; 5], shard_key: u32, config: &GeneratorConfig) -> Result<Self, Error> {
        // The time field wraps, so the only end is the state word's.
        let max_tick = u64::MAX >> COUNTER_BITS;
        let seq = crate::generator::sequencer(
            config,
            0,
            TICK_MS,
            max_tick,
            COUNTER_BITS,
            IDS_PER_SECOND,
        )?;
        let node =
            HotGuid::from_parts(HotGuidParts { timestamp: 0, process, counter: 0, shard_key })?;
        Ok(HotGuidGenerator { seq, node })
    }

    /// The next HotGuid at time `now_ms` (Unix milliseconds).
    ///
    /// # Errors
    ///
    /// - [`Error::ClockBackward`]: `now_ms` is further behind the last issued second than allowed;
    /// - [`Error::TimeExhausted`]: the generator's state has run out (after year 36000);
    /// - [`Error::WindowExhausted`]: the next ID would lie above the ceiling.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// let t = 1_700_000_010_000;
    /// generator.next(t)?;
    /// // 1 s back: absorbed, the ID continues from the last second.
    /// let guid = generator.next(t - 1_000)?.ready().unwrap();
    /// assert_eq!(u64::from(guid.unix_timestamp()), t / 1_000);
    /// // 5 s back: refused, with the size of the step.
    /// let err = generator.next(t - 5_000).unwrap_err();
    /// assert!(matches!(err, Error::ClockBackward { behind_ms: 5_000, tolerance_ms: 1_000 }));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next(&self, now_ms: u64) -> Result<Next<HotGuid>, Error> {
        Ok(self.seq.next(now_ms)?.map(|pair| pack(self.node, pair)))
    }

    /// The next HotGuid at time `now_ms` with `shard_key` in place of the generator's own: a
    /// shard key per call, as upstream's `NewGuid(shardKey)`.
    ///
    /// The (second, counter) pair comes from the same sequence as every other call of this
    /// generator, whatever the key: the key only fills the `shard_key` bytes. So the HotGuids
    /// of one generator are unique and increasing even with the shard key left out of the
    /// comparison, and calls with different keys interleave in one increasing order (the
    /// process bytes, compared before the counter, are fixed). See DESIGN.md, "Why does a shard key
    /// per request not touch uniqueness?".
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// let t = 1_700_000_000_000;
    /// let a = generator.next_with_shard_key(t, 1023)?.ready().unwrap();
    /// let b = generator.next_with_shard_key(t, 7)?.ready().unwrap();
    /// assert_eq!((a.shard_key(), b.shard_key()), (1023, 7));
    /// // One sequence for every key: the counter goes on, and the order holds.
    /// assert_eq!((a.into_parts().counter, b.into_parts().counter), (0, 1));
    /// assert!(a < b);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next_with_shard_key(&self, now_ms: u64, shard_key: u32) -> Result<Next<HotGuid>, Error> {
        let node = with_shard_key(self.node, shard_key);
        Ok(self.seq.next(now_ms)?.map(|pair| pack(node, pair)))
    }

    /// Reserves up to `n` consecutive HotGuids in one atomic step, each with `shard_key` in
    /// place of the generator's own; the batch rules of [`next_batch`](Self::next_batch) and
    /// the one sequence of [`next_with_shard_key`](Self::next_with_shard_key).
    ///
    /// # Errors
    ///
    /// As [`next_batch`](Self::next_batch).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// let t = 1_700_000_000_000;
    /// let first: Vec<HotGuid> = generator.next_batch_with_shard_key(t, 3, 42)?.ready().unwrap().collect();
    /// let then: Vec<HotGuid> = generator.next_batch(t, 2)?.ready().unwrap().collect();
    /// assert!(first.iter().all(|g| g.shard_key() == 42));
    /// assert!(then.iter().all(|g| g.shard_key() == 1));
    /// assert!(first[2] < then[0]);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch_with_shard_key(
        &self,
        now_ms: u64,
        n: u64,
        shard_key: u32,
    ) -> Result<Next<HotGuidBatch>, Error> {
        let node = with_shard_key(self.node, shard_key);
        Ok(self.seq.reserve(now_ms, n)?.map(|(first, count)| HotGuidBatch {
            pair: first,
            remaining: count,
            node,
        }))
    }

    /// Reserves up to `n` consecutive HotGuids in one atomic step.
    ///
    /// The batch holds as many IDs as the allowed seconds still have, at least one and at most
    /// `n`: call again for the rest. Its IDs are in increasing order and above every ID issued
    /// before.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next), plus [`Error::EmptyBatch`] when `n` is 0.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// let batch = generator.next_batch(1_700_000_000_000, 100)?.ready().unwrap();
    /// let guids: Vec<HotGuid> = batch.collect();
    /// assert_eq!(guids.len(), 100);
    /// assert!(guids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<HotGuidBatch>, Error> {
        Ok(self.seq.reserve(now_ms, n)?.map(|(first, count)| HotGuidBatch {
            pair: first,
            remaining: count,
            node: self.node,
        }))
    }

    /// The Unix ms at which the last issued second begins (or the start point, before any ID).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// generator.next(1_700_000_000_420)?;
    /// assert_eq!(generator.last_ms(), 1_700_000_000_000);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn last_ms(&self) -> u64 {
        self.seq.time_of(self.seq.last_tick())
    }

    /// Allows IDs only in seconds that start at or before `mark_ms` (Unix ms).
    ///
    /// The server sets this to its durable high-water mark and raises it as it extends the
    /// mark. Lowering it is allowed too (for example when a lease is lost).
    ///
    /// # Errors
    ///
    /// None in practice (the epoch is 0); the `Result` mirrors
    /// [`Generator::set_ceiling_ms`](crate::Generator::set_ceiling_ms).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, HotGuid};
    ///
    /// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
    /// let t = 1_700_000_000_000;
    /// generator.set_ceiling_ms(t)?;
    /// assert!(generator.next(t + 999)?.ready().is_some());
    /// assert!(matches!(generator.next(t + 1_000), Err(Error::WindowExhausted { .. })));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        self.seq.set_ceiling(self.seq.tick_of(mark_ms)?);
        Ok(())
    }
}

/// The bits of the shard key in the `u128` (text bytes 12..=15, the key little-endian).
const SHARD_MASK: u128 = 0xFFFF_FFFF;

/// `node` with `shard_key` in its shard-key bytes.
#[inline]
fn with_shard_key(node: HotGuid, shard_key: u32) -> HotGuid {
    let field = u128::from(u32::from_be_bytes(shard_key.to_le_bytes()));
    HotGuid(node.0 & !SHARD_MASK | field)
}

/// The HotGuid of a (second, counter) pair; the timestamp field keeps the second mod 2^32.
#[inline]
fn pack(node: HotGuid, pair: u64) -> HotGuid {
    let second = pair >> COUNTER_BITS;
    let counter = pair & (IDS_PER_SECOND - 1);
    // Truncation is the point: the timestamp field wraps like upstream's on .NET 6 x64.
    let timestamp = u128::from(second as u32);
    HotGuid(node.0 | timestamp << TIMESTAMP_SHIFT | u128::from(counter) << COUNTER_SHIFT)
}

/// A contiguous run of HotGuids reserved by [`HotGuidGenerator::next_batch`], yielded in
/// increasing order.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, HotGuid};
///
/// let generator = HotGuid::generator([0; 5], 1, &GeneratorConfig::default())?;
/// let mut batch = generator.next_batch(1_700_000_000_000, 3)?.ready().unwrap();
/// assert_eq!(batch.len(), 3);
/// assert_eq!(batch.next().unwrap().into_parts().counter, 0);
/// assert_eq!(batch.last().unwrap().into_parts().counter, 2);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct HotGuidBatch {
    /// The next (second, counter) pair. A second holds every counter value, so the pair after
    /// `pair` is `pair + 1`.
    pair: u64,
    remaining: u64,
    node: HotGuid,
}

impl Iterator for HotGuidBatch {
    type Item = HotGuid;

    #[inline]
    fn next(&mut self) -> Option<HotGuid> {
        if self.remaining == 0 {
            return None;
        }
        let guid = pack(self.node, self.pair);
        self.remaining -= 1;
        // Wraps only after the very last pair of the state word, which is then not used.
        self.pair = self.pair.wrapping_add(1);
        Some(guid)
    }

    fn nth(&mut self, n: usize) -> Option<HotGuid> {
        let skip = u64::try_from(n).unwrap_or(u64::MAX);
        if skip >= self.remaining {
            self.remaining = 0;
            return None;
        }
        self.remaining -= skip;
        self.pair += skip;
        self.next()
    }

    fn last(mut self) -> Option<HotGuid> {
        let n = usize::try_from(self.remaining.checked_sub(1)?).unwrap_or(usize::MAX);
        self.nth(n)
    }

    fn count(self) -> usize {
        self.len()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for HotGuidBatch {}

impl FusedIterator for HotGuidBatch {}

/// Strings in serde: the "D" string out, any strictly valid "D" string in.
#[cfg(feature = "serde")]
mod serde_impls {
    use std::fmt;

    use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

    use super::HotGuid;

    impl Serialize for HotGuid {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_str(self)
        }
    }

    impl<'de> Deserialize<'de> for HotGuid {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_str(TextVisitor)
        }
    }

    struct TextVisitor;

    impl de::Visitor<'_> for TextVisitor {
        type Value = HotGuid;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a HotGuid string such as 61ff0f80-981e-12e9-3401-e241d0000000")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<HotGuid, E> {
            text.parse().map_err(E::custom)
        }
    }
}

/// The `hot-guid` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HotGuidLayout;

/// Width of HotGuid's `process` field: 5 bytes.
const PROCESS_BITS: u32 = 40;

impl LayoutKind for HotGuidLayout {
    fn name(&self) -> &str {
        "hot-guid"
    }

    fn id_bits(&self) -> u32 {
        128
    }

    fn default_format(&self) -> Format {
        Format::Uuid
    }

    /// .NET's `Guid.Parse` also reads the N, B, P and X forms of a Guid.
    fn parse_upstream(&self, text: &str, format: Format) -> Option<Result<AnyId, Error>> {
        (format == Format::Uuid)
            .then(|| crate::format::parse_guid_forms(text))
            .flatten()
            .map(|parsed| parsed.map(AnyId::U128))
    }

    fn epoch_ms(&self) -> Option<u64> {
        Some(0)
    }

    fn fields(&self) -> Vec<FieldInfo> {
        vec![
            FieldInfo::number("timestamp", 32, 0, u64::from(u32::MAX), FieldRole::Time),
            FieldInfo::text("process", PROCESS_BITS, FieldRole::Node, "10 hex digits"),
            FieldInfo::number(
                "counter",
                24,
                0,
                u64::from(HotGuid::COUNTER_MAX),
                FieldRole::Sequence,
            ),
            FieldInfo::number("shard_key", 32, 0, u64::from(u32::MAX), FieldRole::Node),
        ]
    }

    // In the .NET string's (big-endian) order: bytes 3..0, 5..4, 7..6, 8..15.
    fn segments(&self) -> Option<Vec<Segment>> {
        Some(vec![
            Segment::new("timestamp", 127, 96),
            Segment::new("process[1..0] (md5 of machine)", 95, 80),
            Segment::new("process[4..2] (md5, pid)", 79, 56),
            Segment::new("counter", 55, 32),
            Segment::new("shard_key (little-endian)", 31, 0),
        ])
    }

    fn capacity(&self) -> Capacity {
        let wrap_ms = (1u64 << 32) * 1000;
        Capacity {
            tick_ms: 1000,
            start_ms: Some(0),
            end_ms: None,
            wrap_ms: Some(wrap_ms),
            start: Some(crate::format_rfc3339_ms(0)),
            end: None,
            ids_per_tick: u64::from(HotGuid::COUNTER_MAX) + 1,
            ids_per_second_per_generator: u64::from(HotGuid::COUNTER_MAX) + 1,
            generators: self.generator_count(),
        }
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let narrow = |field: &str, value: u64, max: u32| {
            u32::try_from(value)
                .ok()
                .filter(|&v| v <= max)
                .ok_or_else(|| Error::out_of_range(field, value, 0, u64::from(max)))
        };
        let parts = HotGuidParts {
            timestamp: narrow("timestamp", values.number("timestamp")?, u32::MAX)?,
            process: parse_process(&values.text("process")?)?,
            counter: narrow("counter", values.number("counter")?, HotGuid::COUNTER_MAX)?,
            shard_key: narrow("shard_key", values.number("shard_key")?, u32::MAX)?,
        };
        Ok(AnyId::U128(HotGuid::from_parts(parts)?.as_u128()))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let AnyId::U128(value) = id else {
            return Err(Error::InvalidId {
                layout: self.name().to_owned(),
                reason: "a 64-bit value is not a 128-bit id",
            });
        };
        let p = HotGuid::from_u128(value).into_parts();
        Ok(vec![
            num("timestamp", u64::from(p.timestamp)),
            ("process".to_owned(), FieldValue::Text(process_hex(&p.process))),
            num("counter", u64::from(p.counter)),
            num("shard_key", u64::from(p.shard_key)),
        ])
    }

    fn time_ms(&self, id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(match id {
            AnyId::U128(v) => Some(u64::from(HotGuid::from_u128(v).unix_timestamp()) * 1000),
            AnyId::U64(_) => None,
        })
    }

    fn fingerprint(&self) -> String {
        "hot-guid/128b/epoch=0/tick=1000".to_owned()
    }

    fn generator_count(&self) -> u64 {
        1 << PROCESS_BITS
    }

    /// The 5 `process` bytes, big-endian.
    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        let text = process_hex(&process_of(generator_id));
        vec![("process".to_owned(), FieldValue::Text(text))]
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let process = match generator_id {
            Some(id) => values.refuse("process").map(|()| process_of(id))?,
            None => match values.text_or("process")? {
                Some(text) => parse_process(&text)?,
                None => [0; 5],
            },
        };
        let shard = values.number_or("shard_key", 0)?;
        let shard = u32::try_from(shard)
            .map_err(|_| Error::out_of_range("shard_key", shard, 0, u64::from(u32::MAX)))?;
        Ok(AnyGenerator::other(HotGuid::generator(process, shard, config)?))
    }

    fn order(&self) -> Order {
        Order::Increasing
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Clock
    }

    fn takes_shard_key(&self) -> bool {
        true
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

impl OtherGenerator for HotGuidGenerator {
    fn next(&self, now_ms: u64) -> Result<Next<AnyId>, Error> {
        Ok(HotGuidGenerator::next(self, now_ms)?.map(|id| AnyId::U128(id.as_u128())))
    }

    fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<AnyBatch>, Error> {
        let batch = HotGuidGenerator::next_batch(self, now_ms, n)?;
        Ok(batch.map(|b| AnyBatch::other(b.map(id_of as fn(HotGuid) -> AnyId))))
    }

    fn next_batch_with_shard_key(
        &self,
        now_ms: u64,
        n: u64,
        shard_key: u32,
    ) -> Result<Next<AnyBatch>, Error> {
        let batch = HotGuidGenerator::next_batch_with_shard_key(self, now_ms, n, shard_key)?;
        Ok(batch.map(|b| AnyBatch::other(b.map(id_of as fn(HotGuid) -> AnyId))))
    }

    fn last_ms(&self) -> Option<u64> {
        Some(HotGuidGenerator::last_ms(self))
    }

    fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        HotGuidGenerator::set_ceiling_ms(self, mark_ms)
    }
}

fn id_of(id: HotGuid) -> AnyId {
    AnyId::U128(id.as_u128())
}

/// The process bytes of a generator ID below 2^40, big-endian.
fn process_of(generator_id: u64) -> [u8; 5] {
    let mut out = [0; 5];
    out.copy_from_slice(&generator_id.to_be_bytes()[3..]);
    out
}

/// The process bytes as 10 hex digits.
fn process_hex(process: &[u8; 5]) -> String {
    process.iter().map(|b| format!("{b:02x}")).collect()
}

/// HotGuid's `process` field: 10 hex digits.
fn parse_process(text: &str) -> Result<[u8; 5], Error> {
    let bad = || Error::InvalidFieldValue {
        field: "process".into(),
        reason: format!("`{text}` is not 10 hex digits"),
    };
    if text.len() != 10 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 5];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// The `hot-guid` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "hot-guid",
    about: "HotGuid (128-bit): .NET Guid of seconds, process, 24-bit counter and a 32-bit shard key",
    make: || std::sync::Arc::new(HotGuidLayout),
};

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, sync::Mutex};

    use proptest::prelude::*;

    use super::*;

    /// One known HotGuid in every form.
    struct Case<'a> {
        name: &'a str,
        parts: HotGuidParts,
        text: &'a str,
        /// `ToByteArray()` bytes as hex, when known.
        bytes: Option<&'a str>,
        /// SqlGuid bytes as hex, when known.
        sql: Option<&'a str>,
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn unhex<const N: usize>(text: &str) -> [u8; N] {
        assert_eq!(text.len(), 2 * N, "{text:?} is not {N} bytes of hex");
        let mut out = [0; N];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits");
        }
        out
    }

    /// Checks one case in every direction: fields → guid → text, text → guid → fields, the
    /// upper-case text, the extractors, the .NET bytes and the SqlGuid bytes.
    fn check(case: &Case<'_>) {
        let name = case.name;
        let guid = HotGuid::from_parts(case.parts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(guid.to_string(), case.text, "{name}: fields → text");
        let parsed: HotGuid = case.text.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(parsed, guid, "{name}: text → guid");
        assert_eq!(parsed.into_parts(), case.parts, "{name}: text → fields");
        let upper: HotGuid = case.text.to_uppercase().parse().expect("upper case parses");
        assert_eq!(upper, guid, "{name}: upper-case text");
        assert_eq!(guid.unix_timestamp(), case.parts.timestamp, "{name}: unix_timestamp");
        assert_eq!(guid.shard_key(), case.parts.shard_key, "{name}: shard_key");
        assert_eq!(HotGuid::from(guid.as_u128()), guid, "{name}: u128");
        let bytes = guid.to_dotnet_bytes();
        if let Some(expected) = case.bytes {
            assert_eq!(hex(&bytes), expected, "{name}: ToByteArray");
        }
        assert_eq!(HotGuid::from_dotnet_bytes(bytes), guid, "{name}: from ToByteArray");
        let sql = guid.to_sql_guid_bytes();
        if let Some(expected) = case.sql {
            assert_eq!(hex(&sql), expected, "{name}: ToSqlGuid");
        }
        assert_eq!(HotGuid::from_sql_guid_bytes(sql), guid, "{name}: SqlGuid.ToGuid");
    }

    #[test]
    fn known_cases() {
        let cases = [
            Case {
                name: "illustrative field placement",
                parts: HotGuidParts {
                    timestamp: 0x0102_0304,
                    process: [5, 6, 7, 8, 9],
                    counter: 0x0A_0B0C,
                    shard_key: 0x0D0E_0F10,
                },
                text: "01020304-0605-0807-090a-0b0c100f0e0d",
                bytes: Some("0403020105060708090a0b0c100f0e0d"),
                sql: Some("100f0e0d0b0c090a0807010203040605"),
            },
            Case {
                // Microsoft's `Guid.ToByteArray` example, read as HotGuid fields.
                name: "microsoft ToByteArray example",
                parts: HotGuidParts {
                    timestamp: 0x3591_8BC9,
                    process: [0x6D, 0x19, 0xEA, 0x40, 0x97],
                    counter: 0x79_889D,
                    shard_key: 0xF053_B779,
                },
                text: "35918bc9-196d-40ea-9779-889d79b753f0",
                bytes: Some("c98b91356d19ea409779889d79b753f0"),
                sql: None,
            },
            Case {
                name: "all zero",
                parts: HotGuidParts { timestamp: 0, process: [0; 5], counter: 0, shard_key: 0 },
                text: "00000000-0000-0000-0000-000000000000",
                bytes: Some("00000000000000000000000000000000"),
                sql: Some("00000000000000000000000000000000"),
            },
            Case {
                name: "all ones",
                parts: HotGuidParts {
                    timestamp: u32::MAX,
                    process: [0xFF; 5],
                    counter: HotGuid::COUNTER_MAX,
                    shard_key: u32::MAX,
                },
                text: "ffffffff-ffff-ffff-ffff-ffffffffffff",
                bytes: Some("ffffffffffffffffffffffffffffffff"),
                sql: Some("ffffffffffffffffffffffffffffffff"),
            },
        ];
        for case in &cases {
            check(case);
        }
    }

    /// Every `hot-guid` case of the shared seed vectors.
    #[test]
    fn seed_vectors() {
        let text =
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/seed-vectors.json"));
        let all: Vec<serde_json::Value> = serde_json::from_str(text).expect("valid json");
        let mut checked = 0;
        for case in all.iter().filter(|c| c["layout"] == "hot-guid") {
            let name = case["name"].as_str().expect("name");
            let fields = &case["fields"];
            let int = |field: &str| fields[field].as_u64().and_then(|v| u32::try_from(v).ok());
            let parts = match (int("timestamp"), int("counter"), int("shard_key")) {
                (Some(timestamp), Some(counter), Some(shard_key)) => Some(HotGuidParts {
                    timestamp,
                    process: unhex(fields["process"].as_str().expect("process hex")),
                    counter,
                    shard_key,
                }),
                _ => None,
            };
            let id = case["id"].as_str().expect("id");
            if case["expect"] == "error" {
                if case["op"] == "decode" {
                    assert!(id.parse::<HotGuid>().is_err(), "{name}: decode must fail");
                } else {
                    assert!(parts.is_none_or(|p| HotGuid::from_parts(p).is_err()), "{name}");
                }
            } else {
                let format = case["format"].as_str().unwrap_or("uuid");
                let parts = parts.unwrap_or_else(|| panic!("{name}: fields out of range"));
                let text = match format {
                    "uuid" => id.to_owned(),
                    "bytes" => HotGuid::from_dotnet_bytes(unhex(id)).to_string(),
                    "sqlguid-bytes" => HotGuid::from_sql_guid_bytes(unhex(id)).to_string(),
                    other => panic!("{name}: unexpected format {other}"),
                };
                let bytes = (format == "bytes").then_some(id);
                let sql = (format == "sqlguid-bytes").then_some(id);
                check(&Case { name, parts, text: &text, bytes, sql });
                let guid: HotGuid = text.parse().expect("valid");
                assert_eq!(guid.to_text(format.parse().expect("a format")).as_deref(), Ok(id));
            }
            checked += 1;
        }
        assert!(checked >= 12, "only {checked} hot-guid vectors found");
    }

    /// The two lists HotGuid's own tests sort (`testdata/hotguid-sort-order.json`): .NET
    /// `Guid`s in `Guid.CompareTo` order, which must be `HotGuid`'s order, and `SqlGuid`s in
    /// SQL Server's order, whose bytes read back through `from_sql_guid_bytes` (and
    /// `Format::SqlGuidBytes`) must give increasing HotGuids: what `ToSqlGuid` promises.
    #[test]
    fn upstream_sort_orders() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/hotguid-sort-order.json"
        ));
        let data: serde_json::Value = serde_json::from_str(text).expect("valid json");
        let list = |key: &str| -> Vec<HotGuid> {
            let items = data[key].as_array().unwrap_or_else(|| panic!("no `{key}`"));
            items.iter().map(|t| t.as_str().expect("a string").parse().expect("a Guid")).collect()
        };
        let guids = list("guids");
        assert_eq!(guids.len(), 16);
        assert!(guids.windows(2).all(|w| w[0] < w[1]), "Guid order: {guids:?}");
        // `new SqlGuid(string)` holds the bytes `Guid.ToByteArray()` gives for the string.
        let sql_bytes: Vec<[u8; 16]> =
            list("sql_guids").into_iter().map(HotGuid::to_dotnet_bytes).collect();
        assert_eq!(sql_bytes.len(), 16);
        let read_back: Vec<HotGuid> =
            sql_bytes.iter().map(|&b| HotGuid::from_sql_guid_bytes(b)).collect();
        assert!(read_back.windows(2).all(|w| w[0] < w[1]), "SqlGuid order: {read_back:?}");
        for (guid, bytes) in read_back.iter().zip(&sql_bytes) {
            assert_eq!(guid.to_sql_guid_bytes(), *bytes);
            let text = guid.to_text(Format::SqlGuidBytes).expect("128 bits");
            assert_eq!(text, hex(bytes));
            assert_eq!(HotGuid::parse_text(&text, Format::SqlGuidBytes), Ok(*guid));
        }
        // The test's own model of SQL Server's comparison agrees with upstream's list.
        assert!(sql_bytes.windows(2).all(|w| sql_server_key(w[0]) < sql_server_key(w[1])));
    }

    #[test]
    fn process_bytes_from_machine_and_pid() {
        let cases: [(&str, u32, &str); 5] = [
            ("WORKSTATION", 4660, "1e98e91234"),
            // Only the pid's low 16 bits are kept.
            ("WORKSTATION", 0x0001_1234, "1e98e91234"),
            ("", 0, "d41d8c0000"),
            ("é", 0xFFFF, "66ddcdffff"),
            ("web-01", 1, "9e795e0001"),
        ];
        for (machine, pid, expected) in cases {
            assert_eq!(hex(&HotGuid::process_bytes(machine, pid)), expected, "{machine} {pid}");
        }
    }

    #[test]
    fn counter_above_24_bits_is_refused() {
        let parts = HotGuidParts { timestamp: 1, process: [0; 5], counter: 0, shard_key: 0 };
        for counter in [1 << 24, u32::MAX] {
            let err = HotGuid::from_parts(HotGuidParts { counter, ..parts }).unwrap_err();
            assert_eq!(
                err,
                Error::FieldOutOfRange {
                    field: "counter".to_owned(),
                    value: u64::from(counter),
                    min: 0,
                    max: 0xFF_FFFF
                }
            );
        }
        assert_eq!(
            HotGuid::from_parts(HotGuidParts { counter: 1 << 24, ..parts })
                .unwrap_err()
                .to_string(),
            "field `counter` out of range: 16777216 is not in 0..=16777215"
        );
    }

    #[test]
    fn bad_text_is_refused_with_a_reason() {
        let cases = [
            (
                "",
                "expected 36 characters (hex digits in groups of 8-4-4-4-12 separated by `-`), \
                 found 0",
            ),
            ("61ff0f80981e12e93401e241d0000000", "expected 36 characters"),
            ("{61ff0f80-981e-12e9-3401-e241d0000000}", "found 38"),
            (
                " 61ff0f80-981e-12e9-3401-e241d000000",
                "expected a hex digit at position 1, found ' '",
            ),
            (
                "61ff0f80-981e-12e9-3401-e241d000000g",
                "expected a hex digit at position 36, found 'g'",
            ),
            ("61ff0f80+981e-12e9-3401-e241d0000000", "expected `-` at position 9, found '+'"),
            (
                "61ff0f8-0981e-12e9-3401-e241d0000000",
                "expected a hex digit at position 8, found '-'",
            ),
            (
                "61ff0f80-981e-12e9-3401-e241d000000é",
                "expected a hex digit at position 36, found 'é'",
            ),
            ("61ff0f80-981e-12e9-3401-e241d000000\n", "found '\\n'"),
            ("６1ff0f80-981e-12e9-3401-e241d0000000", "expected a hex digit at position 1"),
        ];
        for (text, reason) in cases {
            let err = text.parse::<HotGuid>().unwrap_err();
            let Error::InvalidText { format: Format::Uuid, reason: actual } = &err else {
                panic!("{text:?}: unexpected error {err:?}");
            };
            // The messages themselves are `Format::Uuid`'s, tested in `format.rs`.
            assert!(!actual.is_empty() && !reason.is_empty(), "{text:?}: no reason given");
            assert!(err.to_string().starts_with("invalid uuid id: "), "{err}");
        }
    }

    #[test]
    fn debug_and_padding() {
        let guid = HotGuid::from_u128(0x61ff0f80_981e_12e9_3401_e241d0000000);
        assert_eq!(format!("{guid:?}"), "HotGuid(61ff0f80-981e-12e9-3401-e241d0000000)");
        assert_eq!(format!("{guid:>38}"), "  61ff0f80-981e-12e9-3401-e241d0000000");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn serde_uses_the_string() {
        let guid = HotGuid::from_u128(0x61ff0f80_981e_12e9_3401_e241d0000000);
        let json = serde_json::to_string(&guid).expect("serializes");
        assert_eq!(json, r#""61ff0f80-981e-12e9-3401-e241d0000000""#);
        assert_eq!(serde_json::from_str::<HotGuid>(&json).expect("deserializes"), guid);
        let upper = r#""61FF0F80-981E-12E9-3401-E241D0000000""#;
        assert_eq!(serde_json::from_str::<HotGuid>(upper).expect("upper case"), guid);
        let err = serde_json::from_str::<HotGuid>(r#""61ff0f80""#).unwrap_err();
        assert!(err.to_string().contains("invalid uuid id: expected 36 characters"), "{err}");
        assert!(serde_json::from_str::<HotGuid>("42").is_err());
    }

    /// .NET `Guid.CompareTo`: `_a` as `u32`, `_b` and `_c` as `u16`, then bytes 8..=15.
    fn dotnet_key(g: [u8; 16]) -> (u32, u16, u16, [u8; 8]) {
        (
            u32::from_le_bytes(take(&g, 0)),
            u16::from_le_bytes(take(&g, 4)),
            u16::from_le_bytes(take(&g, 6)),
            take(&g, 8),
        )
    }

    /// SQL Server (`SqlGuid.CompareTo`): bytes in the order 10..=15, 8..=9, 6..=7, 4..=5, 0..=3.
    fn sql_server_key(sql: [u8; 16]) -> [u8; 16] {
        const ORDER: [usize; 16] = [10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3];
        ORDER.map(|i| sql[i])
    }

    fn parts_strategy() -> impl Strategy<Value = HotGuidParts> {
        (any::<u32>(), any::<[u8; 5]>(), 0..=HotGuid::COUNTER_MAX, any::<u32>()).prop_map(
            |(timestamp, process, counter, shard_key)| HotGuidParts {
                timestamp,
                process,
                counter,
                shard_key,
            },
        )
    }

    /// Strings that are valid or nearly valid "D" strings.
    fn near_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9a-fA-F-]{30,40}",
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
            (any::<u128>(), 0..TEXT_LEN, any::<char>()).prop_map(|(v, at, c)| {
                let mut chars: Vec<char> = HotGuid(v).to_string().chars().collect();
                chars[at] = c;
                chars.into_iter().collect()
            }),
        ]
    }

    proptest! {
        #[test]
        fn parts_round_trip(parts in parts_strategy()) {
            let guid = HotGuid::from_parts(parts)?;
            prop_assert_eq!(guid.into_parts(), parts);
        }

        #[test]
        fn text_round_trip(value in any::<u128>()) {
            let guid = HotGuid::from_u128(value);
            let text = guid.to_string();
            prop_assert_eq!(text.parse::<HotGuid>()?, guid);
            prop_assert_eq!(text.to_uppercase().parse::<HotGuid>()?, guid);
            prop_assert_eq!(text, format!("{:032x}", value).as_str().chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let hyphen = [8, 12, 16, 20].contains(&i).then_some('-');
                    hyphen.into_iter().chain([c])
                })
                .collect::<String>());
        }

        #[test]
        fn bytes_round_trip(bytes in any::<[u8; 16]>()) {
            prop_assert_eq!(HotGuid::from_dotnet_bytes(bytes).to_dotnet_bytes(), bytes);
        }

        #[test]
        fn sql_round_trip(sql in any::<[u8; 16]>()) {
            prop_assert_eq!(HotGuid::from_sql_guid_bytes(sql).to_sql_guid_bytes(), sql);
        }

        #[test]
        fn order_is_dotnet_sql_server_and_text_order(a in any::<u128>(), b in any::<u128>()) {
            let (a, b) = (HotGuid(a), HotGuid(b));
            let order = a.cmp(&b);
            prop_assert_eq!(
                dotnet_key(a.to_dotnet_bytes()).cmp(&dotnet_key(b.to_dotnet_bytes())),
                order
            );
            prop_assert_eq!(
                sql_server_key(a.to_sql_guid_bytes()).cmp(&sql_server_key(b.to_sql_guid_bytes())),
                order
            );
            prop_assert_eq!(a.to_string().cmp(&b.to_string()), order);
            if a.unix_timestamp() < b.unix_timestamp() {
                prop_assert!(order.is_lt());
            }
        }

        #[test]
        fn text_forms_agree_with_format(
            value in any::<u128>(),
            format in proptest::sample::select(Format::ALL.to_vec()),
        ) {
            let guid = HotGuid(value);
            let text = guid.to_text(format)?;
            prop_assert_eq!(HotGuid::parse_text(&text, format)?, guid);
            prop_assert_eq!(guid.to_text(Format::Uuid)?, guid.to_string());
            prop_assert_eq!(guid.to_text(Format::Bytes)?, hex(&guid.to_dotnet_bytes()));
            prop_assert_eq!(guid.to_text(Format::SqlGuidBytes)?, hex(&guid.to_sql_guid_bytes()));
        }

        #[test]
        fn from_str_never_panics(text in any::<String>()) {
            let _ = text.parse::<HotGuid>();
        }

        #[test]
        fn from_str_accepts_exactly_valid_text(text in near_text()) {
            let valid = text.chars().count() == TEXT_LEN
                && text.chars().enumerate().all(|(i, c)| match i {
                    8 | 13 | 18 | 23 => c == '-',
                    _ => c.is_ascii_hexdigit(),
                });
            let parsed = text.parse::<HotGuid>();
            match &parsed {
                Ok(guid) => {
                    prop_assert!(valid);
                    prop_assert_eq!(guid.to_string(), text.to_lowercase());
                }
                Err(_) => prop_assert!(!valid),
            }
            // `Format::Uuid` accepts exactly the same strings.
            prop_assert_eq!(
                parsed.ok(),
                HotGuid::parse_text(&text, Format::Uuid).ok()
            );
        }

        /// Under any sequence of clock readings, including backward steps, every ID is above
        /// the last, and an error is only ever a backward step beyond the tolerance.
        #[test]
        fn generator_is_monotonic_under_any_clock(
            steps in proptest::collection::vec(-3_000i64..3_000, 1..200)
        ) {
            let generator = HotGuid::generator([1, 2, 3, 4, 5], 9, &GeneratorConfig::default())?;
            let mut now: u64 = 1_700_000_000_000;
            let mut last: Option<HotGuid> = None;
            for step in steps {
                now = now.saturating_add_signed(step);
                match generator.next(now) {
                    Ok(Next::Ready(guid)) => {
                        if let Some(last) = last {
                            prop_assert!(guid > last, "{guid:?} after {last:?}");
                        }
                        let parts = guid.into_parts();
                        prop_assert_eq!((parts.process, parts.shard_key), ([1, 2, 3, 4, 5], 9));
                        prop_assert!(u64::from(parts.timestamp) >= now / TICK_MS);
                        last = Some(guid);
                    }
                    Ok(Next::Wait { until_ms }) => prop_assert!(false, "wait until {until_ms}"),
                    Err(Error::ClockBackward { behind_ms, tolerance_ms }) => {
                        prop_assert!(behind_ms > tolerance_ms);
                    }
                    Err(e) => prop_assert!(false, "unexpected error {e}"),
                }
            }
        }
    }

    const PROCESS: [u8; 5] = [0x1e, 0x98, 0xe9, 0x12, 0x34];
    const SHARD: u32 = 208;
    /// 2022-02-06T00:00:00Z.
    const T0: u64 = 1_644_105_600_000;

    fn generator(config: GeneratorConfig) -> HotGuidGenerator {
        HotGuid::generator(PROCESS, SHARD, &config).expect("valid config")
    }

    fn ready(next: Result<Next<HotGuid>, Error>) -> HotGuid {
        match next {
            Ok(Next::Ready(guid)) => guid,
            other => panic!("expected an id, got {other:?}"),
        }
    }

    #[test]
    fn generated_ids_increase_within_and_across_seconds() {
        let generator = generator(GeneratorConfig::default());
        let times = [T0, T0, T0 + 1, T0 + 999, T0 + 1_000, T0 + 1_000, T0 + 5_500, T0 + 5_999];
        let ids: Vec<HotGuid> = times.iter().map(|&t| ready(generator.next(t))).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert!(ids.windows(2).all(|w| w[0].to_string() < w[1].to_string()));
        assert!(ids.windows(2).all(|w| {
            sql_server_key(w[0].to_sql_guid_bytes()) < sql_server_key(w[1].to_sql_guid_bytes())
        }));
        let fields: Vec<(u32, u32)> = ids
            .iter()
            .map(|g| (g.into_parts().timestamp - 1_644_105_600, g.into_parts().counter))
            .collect();
        assert_eq!(fields, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (5, 0), (5, 1)]);
        for guid in &ids {
            let parts = guid.into_parts();
            assert_eq!((parts.process, parts.shard_key), (PROCESS, SHARD));
        }
        assert_eq!(ids[0].to_string(), "61ff0f80-981e-12e9-3400-0000d0000000");
        assert_eq!(generator.last_ms(), T0 + 5_000);
    }

    #[test]
    fn a_second_holds_2_pow_24_ids_then_waits() {
        let generator = generator(GeneratorConfig::default());
        let t = T0 + 250;
        let batch = generator.next_batch(t, u64::MAX).map(Next::ready).expect("ok").expect("ready");
        assert_eq!(batch.len(), 1 << 24);
        let first = batch.clone().next().expect("first");
        let last = batch.clone().last().expect("last");
        assert_eq!(first.into_parts().counter, 0);
        assert_eq!(last.into_parts().counter, HotGuid::COUNTER_MAX);
        assert_eq!(last.unix_timestamp(), first.unix_timestamp());
        let mut tail = batch.clone();
        assert_eq!(tail.nth((1 << 24) - 2), batch.clone().nth((1 << 24) - 2));
        assert_eq!(tail.next(), Some(last));
        assert_eq!(tail.next(), None);
        assert_eq!(generator.next(t + 749), Ok(Next::Wait { until_ms: T0 + 1_000 }));
        assert!(matches!(
            generator.next_batch(t, 1),
            Ok(Next::Wait { until_ms: 1_644_105_601_000 })
        ));
        let next = ready(generator.next(T0 + 1_000));
        assert!(next > last);
        assert_eq!(next.into_parts().counter, 0);
    }

    #[test]
    fn borrowing_runs_ahead_of_the_clock() {
        let generator =
            generator(GeneratorConfig { borrow_ms: 1_000, ..GeneratorConfig::default() });
        let batch =
            generator.next_batch(T0, u64::MAX).map(Next::ready).expect("ok").expect("ready");
        assert_eq!(batch.len(), 2 << 24);
        assert_eq!(generator.next(T0), Ok(Next::Wait { until_ms: T0 + 1_000 }));
        let ids: Vec<HotGuid> =
            generator.next_batch(T0 + 1_000, 3).expect("ok").ready().expect("ready").collect();
        assert_eq!(ids[0].unix_timestamp(), 1_644_105_602);
    }

    #[test]
    fn batches_continue_the_sequence() {
        let generator = generator(GeneratorConfig::default());
        let a = ready(generator.next(T0));
        let batch: Vec<HotGuid> =
            generator.next_batch(T0, 5).expect("ok").ready().expect("ready").collect();
        let b = ready(generator.next(T0));
        let counters: Vec<u32> = batch.iter().map(|g| g.into_parts().counter).collect();
        assert_eq!(counters, [1, 2, 3, 4, 5]);
        assert!(a < batch[0] && batch[4] < b);
        assert_eq!(generator.next_batch(T0, 0).unwrap_err(), Error::EmptyBatch);
        let mut batch = generator.next_batch(T0, 2).expect("ok").ready().expect("ready");
        assert_eq!(batch.size_hint(), (2, Some(2)));
        assert_eq!(batch.nth(5), None);
        assert_eq!(batch.next(), None);
    }

    #[test]
    fn timestamp_wraps_after_2106() {
        // 2106-02-07T06:28:15Z is the last second a u32 holds.
        let last_second = u64::from(u32::MAX);
        let generator = generator(GeneratorConfig::default());
        let before = ready(generator.next(last_second * TICK_MS + 999));
        assert_eq!(before.unix_timestamp(), u32::MAX);
        let wrapped = ready(generator.next((last_second + 1) * TICK_MS));
        assert_eq!(wrapped.into_parts().timestamp, 0);
        assert_eq!(wrapped.into_parts().counter, 0);
        let next = ready(generator.next((last_second + 2) * TICK_MS + 5));
        assert_eq!(next.unix_timestamp(), 1);
        assert!(next > wrapped);
    }

    #[test]
    fn backward_steps_within_tolerance_continue_and_larger_ones_fail() {
        let generator = generator(GeneratorConfig::default());
        let t = T0 + 10_000;
        let a = ready(generator.next(t + 500));
        // 1.5 s back from the reading, 1 s back in seconds: within the default 1000 ms.
        let b = ready(generator.next(t - 1_000));
        assert!(b > a);
        assert_eq!(b.unix_timestamp(), a.unix_timestamp());
        assert_eq!(
            generator.next(t - 2_000),
            Err(Error::ClockBackward { behind_ms: 2_000, tolerance_ms: 1_000 })
        );
        assert_eq!(
            generator.next_batch(t - 5_000, 10).unwrap_err(),
            Error::ClockBackward { behind_ms: 5_000, tolerance_ms: 1_000 }
        );
        let c = ready(generator.next(t));
        assert!(c > b);

        let strict = HotGuid::generator(
            PROCESS,
            SHARD,
            &GeneratorConfig { max_backward_ms: 999, ..GeneratorConfig::default() },
        )
        .expect("valid");
        ready(strict.next(t));
        assert!(matches!(
            strict.next(t - 1),
            Err(Error::ClockBackward { behind_ms: 1_000, tolerance_ms: 0 })
        ));
    }

    #[test]
    fn start_above_and_ceiling() {
        let generator = generator(GeneratorConfig {
            start_above_ms: Some(T0 + 1_500),
            ..GeneratorConfig::default()
        });
        assert_eq!(generator.last_ms(), T0 + 1_000);
        // The clock lags the start point by one second: absorbed, but the first free second
        // is still ahead of the clock.
        assert_eq!(generator.next(T0), Ok(Next::Wait { until_ms: T0 + 2_000 }));
        let first = ready(generator.next(T0 + 2_000));
        assert_eq!(first.unix_timestamp(), 1_644_105_602);
        generator.set_ceiling_ms(T0 + 2_999).expect("ok");
        assert!(matches!(
            generator.next(T0 + 3_000),
            Err(Error::WindowExhausted { ceiling_ms: 1_644_105_602_999 })
        ));

        let too_late =
            GeneratorConfig { start_above_ms: Some(u64::MAX), ..GeneratorConfig::default() };
        assert!(matches!(
            HotGuid::generator(PROCESS, SHARD, &too_late),
            Err(Error::TimeExhausted { .. })
        ));
    }

    #[test]
    fn threads_sharing_a_generator_get_distinct_ids() {
        const THREADS: usize = 4;
        const PER_THREAD: usize = 20_000;
        let generator = generator(GeneratorConfig::default());
        let all = Mutex::new(Vec::with_capacity(THREADS * PER_THREAD));
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let (generator, all) = (&generator, &all);
                scope.spawn(move || {
                    let mut mine = Vec::with_capacity(PER_THREAD);
                    let mut now = T0 + thread as u64;
                    while mine.len() < PER_THREAD {
                        match generator.next(now).expect("no error") {
                            Next::Ready(guid) => mine.push(guid),
                            Next::Wait { until_ms } => now = until_ms,
                        }
                        // The clock advances a little now and then.
                        if mine.len() % 1_000 == 0 {
                            now += 7;
                        }
                    }
                    assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-thread order");
                    all.lock().expect("not poisoned").extend(mine);
                });
            }
        });
        let all = all.into_inner().expect("not poisoned");
        let distinct: HashSet<HotGuid> = all.iter().copied().collect();
        assert_eq!(all.len(), THREADS * PER_THREAD);
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn generated_fields_match_from_parts() {
        let generator = generator(GeneratorConfig::default());
        let guid = ready(generator.next(T0 + 3_210));
        let expected = HotGuid::from_parts(HotGuidParts {
            timestamp: 1_644_105_603,
            process: PROCESS,
            counter: 0,
            shard_key: SHARD,
        })
        .expect("valid");
        assert_eq!(guid, expected);
    }
}
