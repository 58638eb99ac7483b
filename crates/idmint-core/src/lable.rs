//! LableOrg's 8-byte IDs (java-uniqueid): a 42-bit millisecond timestamp, bit-reversed in
//! SPREAD mode, a 6-bit sequence, an 11-bit generator ID split around a mode flag, and a 4-bit
//! cluster ID.

use std::{fmt, str::FromStr};

use crate::{
    any::{AnyGenerator, AnyId},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::{Generator, GeneratorConfig},
    id_impl::u64_id,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, same_as},
    pack::{PackKind, Packer, Plan},
};

/// How a [`Lable`] ID stores its timestamp.
///
/// # Example
///
/// ```
/// use idmint_core::LableMode;
///
/// assert_eq!("time-sequential".parse::<LableMode>()?, LableMode::TimeSequential);
/// assert_eq!(LableMode::Spread.to_string(), "spread");
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum LableMode {
    /// The timestamp is bit-reversed (Java's `Long.reverse`), so consecutive milliseconds
    /// spread over the key space. Flag value 0; LableOrg's default.
    #[default]
    Spread,
    /// The timestamp is stored as is, so IDs sort by time. Flag value 1.
    TimeSequential,
}

impl LableMode {
    /// The mode's name: `spread` or `time-sequential`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::LableMode::TimeSequential.name(), "time-sequential");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            LableMode::Spread => "spread",
            LableMode::TimeSequential => "time-sequential",
        }
    }
}

impl fmt::Display for LableMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LableMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "spread" => Ok(LableMode::Spread),
            "time-sequential" => Ok(LableMode::TimeSequential),
            _ => Err(Error::InvalidFieldValue {
                field: "mode".into(),
                reason: format!("`{s}` is not `spread` or `time-sequential`"),
            }),
        }
    }
}

/// A LableOrg unique ID: 8 bytes, read here as a big-endian `u64`.
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63..=22 | `timestamp`, Unix ms: bit-reversed over 64 bits (SPREAD) or shifted up by 22 (TIME_SEQUENTIAL) | 0..=2^42−1 (to 2109-05-15T07:35:11.103Z) | clock |
/// | 21..=16 | `sequence` | 0..=63 | generator |
/// | 15..=13 | `generator_id` bits 10..8 | | configuration or etcd claim |
/// | 12 | `mode` flag: 0 SPREAD, 1 TIME_SEQUENTIAL | | configuration |
/// | 11..=4 | `generator_id` bits 7..0 | 0..=2047 in all | configuration or etcd claim |
/// | 3..=0 | `cluster_id` | 0..=15 | configuration |
///
/// In SPREAD mode timestamp bit *i* goes to ID bit 63−*i* (a **bit** reversal; LableOrg's docs
/// say "byte order", its code reverses bits), so byte 0 holds the low 8 bits of the millisecond
/// count reversed. IDs with generator IDs below 256 are identical in LableOrg's pre-4.1 layout.
///
/// **Bit 63 is used.** LableOrg IDs are byte arrays: a SPREAD ID has bit 63 set whenever its
/// millisecond count is odd, and a TIME_SEQUENTIAL one from 2039-09-07 on. Every 64-bit value
/// is a valid ID, including 0 (LableOrg has no ≥ 1 rule); a generator never issues 0.
///
/// # Example
///
/// ```
/// use idmint_core::{Lable, LableMode, LableParts};
///
/// let id = Lable::from_parts(LableParts {
///     timestamp: 143_062_936_275,
///     sequence: 10,
///     generator_id: 1,
///     cluster_id: 5,
///     mode: LableMode::Spread,
/// })?;
/// assert_eq!(id.to_string(), "cb54ecf2840a0015");
/// assert_eq!(id.to_bytes(), [0xcb, 0x54, 0xec, 0xf2, 0x84, 0x0a, 0x00, 0x15]);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lable(u64);

/// The fields of a [`Lable`] ID (LableOrg's `Blueprint`).
///
/// # Example
///
/// ```
/// use idmint_core::{Lable, LableMode, LableParts};
///
/// let parts = LableParts { timestamp: 1, sequence: 0, generator_id: 2047, cluster_id: 15, mode: LableMode::TimeSequential };
/// assert_eq!(Lable::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct LableParts {
    /// Unix milliseconds, 0..=2^42−1.
    pub timestamp: u64,
    /// The sequence within the millisecond, 0..=63.
    pub sequence: u64,
    /// The generator ID, 0..=2047.
    pub generator_id: u64,
    /// The cluster ID, 0..=15.
    pub cluster_id: u64,
    /// How the timestamp is stored.
    pub mode: LableMode,
}

const CLUSTER_SHIFT: u32 = 0;
const GENERATOR_LOW_SHIFT: u32 = CLUSTER_SHIFT + Lable::CLUSTER_BITS;
const GENERATOR_LOW_BITS: u32 = 8;
const MODE_SHIFT: u32 = GENERATOR_LOW_SHIFT + GENERATOR_LOW_BITS;
const GENERATOR_HIGH_SHIFT: u32 = MODE_SHIFT + 1;
const GENERATOR_HIGH_BITS: u32 = Lable::GENERATOR_BITS - GENERATOR_LOW_BITS;
const SEQUENCE_SHIFT: u32 = GENERATOR_HIGH_SHIFT + GENERATOR_HIGH_BITS;
const TIMESTAMP_SHIFT: u32 = SEQUENCE_SHIFT + Lable::SEQUENCE_BITS;
const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

impl Lable {
    /// Width of the timestamp field.
    pub const TIMESTAMP_BITS: u32 = 42;
    /// Width of the sequence field: 64 IDs per millisecond.
    pub const SEQUENCE_BITS: u32 = 6;
    /// Width of the generator ID (in two parts around the mode flag).
    pub const GENERATOR_BITS: u32 = 11;
    /// Width of the cluster ID.
    pub const CLUSTER_BITS: u32 = 4;
    /// The largest timestamp: 2109-05-15T07:35:11.103Z.
    pub const MAX_TIMESTAMP: u64 = mask(Self::TIMESTAMP_BITS);
    /// The text form of `Display` and `FromStr`: 16 lower-case hex digits of the 8 bytes.
    pub const DEFAULT_FORMAT: Format = Format::Hex;
    /// An example ID (LableOrg's "parseBytes SPREAD" test), for documentation and tests.
    pub const EXAMPLE: Lable = Lable(0xcb54_ecf2_840a_0015);
    /// The layout's name.
    pub const NAME: &'static str = "lable";

    /// Packs fields into an ID, like LableOrg's `IDBuilder.build(Blueprint)`.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field that does not fit (LableOrg throws
    /// `IllegalArgumentException`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Lable, LableParts};
    ///
    /// assert!(Lable::from_parts(LableParts { generator_id: 2048, ..LableParts::default() }).is_err());
    /// assert!(Lable::from_parts(LableParts { sequence: 64, ..LableParts::default() }).is_err());
    /// ```
    pub fn from_parts(parts: LableParts) -> Result<Self, Error> {
        let check = |field: &str, value: u64, bits: u32| {
            if value > mask(bits) {
                Err(Error::out_of_range(field, value, 0, mask(bits)))
            } else {
                Ok(value)
            }
        };
        let timestamp = check("timestamp", parts.timestamp, Self::TIMESTAMP_BITS)?;
        let sequence = check("sequence", parts.sequence, Self::SEQUENCE_BITS)?;
        let fixed = fixed_bits(parts.generator_id, parts.cluster_id, parts.mode)?;
        Ok(Lable(time_bits(timestamp, parts.mode) | sequence << SEQUENCE_SHIFT | fixed))
    }

    /// The ID's fields, like LableOrg's `IDBuilder.parse(byte[])`. A mode flag other than 1 is
    /// SPREAD.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Lable, LableMode};
    ///
    /// let parts = Lable::EXAMPLE.into_parts();
    /// assert_eq!((parts.timestamp, parts.mode), (143_062_936_275, LableMode::Spread));
    /// ```
    pub fn into_parts(self) -> LableParts {
        let raw = self.0;
        let mode =
            if raw >> MODE_SHIFT & 1 == 1 { LableMode::TimeSequential } else { LableMode::Spread };
        let timestamp = match mode {
            LableMode::Spread => (raw >> TIMESTAMP_SHIFT << TIMESTAMP_SHIFT).reverse_bits(),
            LableMode::TimeSequential => raw >> TIMESTAMP_SHIFT,
        };
        LableParts {
            timestamp,
            sequence: raw >> SEQUENCE_SHIFT & mask(Self::SEQUENCE_BITS),
            generator_id: (raw >> GENERATOR_HIGH_SHIFT & mask(GENERATOR_HIGH_BITS))
                << GENERATOR_LOW_BITS
                | (raw >> GENERATOR_LOW_SHIFT & mask(GENERATOR_LOW_BITS)),
            cluster_id: raw >> CLUSTER_SHIFT & mask(Self::CLUSTER_BITS),
            mode,
        }
    }

    /// Every 64-bit value is a LableOrg ID; this never fails.
    ///
    /// # Errors
    ///
    /// None; the `Result` matches the other layouts.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Lable;
    ///
    /// assert_eq!(Lable::from_raw(0)?.to_string(), "0000000000000000");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_raw(raw: u64) -> Result<Self, Error> {
        Ok(Lable(raw))
    }

    /// The 8 bytes read as a big-endian `u64`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Lable;
    ///
    /// assert_eq!(Lable::EXAMPLE.to_raw(), 0xcb54_ecf2_840a_0015);
    /// ```
    pub const fn to_raw(self) -> u64 {
        self.0
    }

    /// The ID from its 8 bytes, as LableOrg's `byte[]`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Lable;
    ///
    /// assert_eq!(Lable::from_bytes(Lable::EXAMPLE.to_bytes()), Lable::EXAMPLE);
    /// ```
    pub const fn from_bytes(bytes: [u8; 8]) -> Self {
        Lable(u64::from_be_bytes(bytes))
    }

    /// The ID's 8 bytes, as LableOrg's `byte[]`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Lable;
    ///
    /// assert_eq!(Lable::EXAMPLE.to_bytes()[0], 0xcb);
    /// ```
    pub const fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// A lock-free generator for one (generator ID, cluster ID) pair: 64 IDs per millisecond.
    ///
    /// It keeps LableOrg's rate (the 65th ID of a millisecond waits for the next one) but not
    /// its faults: LableOrg resets the sequence on any change of millisecond, so a clock that
    /// steps back reissues IDs; this generator continues from the last millisecond instead.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a generator ID above 2047 or a cluster ID above 15,
    /// [`Error::InvalidConfig`] for a bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Lable, LableMode, Next};
    ///
    /// let generator = Lable::generator(1, 5, LableMode::Spread, &GeneratorConfig::default())?;
    /// let now = 1_700_000_000_000;
    /// for _ in 0..64 {
    ///     assert!(generator.next(now)?.ready().is_some());
    /// }
    /// assert_eq!(generator.next(now)?, Next::Wait { until_ms: now + 1 });
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        generator_id: u64,
        cluster_id: u64,
        mode: LableMode,
        config: &GeneratorConfig,
    ) -> Result<Generator<Lable>, Error> {
        Generator::from_plan(Self::plan(generator_id, cluster_id, mode)?, config)
    }

    /// How a generator fills Lable IDs for one (generator ID, cluster ID, mode).
    pub(crate) fn plan(generator_id: u64, cluster_id: u64, mode: LableMode) -> Result<Plan, Error> {
        let kind = match mode {
            LableMode::Spread => PackKind::Reversed { seq_shift: SEQUENCE_SHIFT },
            LableMode::TimeSequential => PackKind::Bits {
                time_shift: TIMESTAMP_SHIFT,
                time_mask: Self::MAX_TIMESTAMP,
                seq_shift: SEQUENCE_SHIFT,
            },
        };
        Ok(Plan {
            epoch_ms: 0,
            tick_ms: 1,
            time_bits: Self::TIMESTAMP_BITS,
            time_wraps: false,
            seq_limit: 1 << Self::SEQUENCE_BITS,
            packer: Packer {
                kind,
                node_bits: fixed_bits(generator_id, cluster_id, mode)?,
                seq_bits: Self::SEQUENCE_BITS,
            },
        })
    }

    fn from_generated_raw(raw: u64) -> Self {
        Lable(raw)
    }
}

/// The timestamp's bits for a mode.
fn time_bits(timestamp: u64, mode: LableMode) -> u64 {
    match mode {
        LableMode::Spread => timestamp.reverse_bits(),
        LableMode::TimeSequential => timestamp << TIMESTAMP_SHIFT,
    }
}

/// The bits that are fixed per generator: generator ID (split), mode flag and cluster ID.
fn fixed_bits(generator_id: u64, cluster_id: u64, mode: LableMode) -> Result<u64, Error> {
    if generator_id > mask(Lable::GENERATOR_BITS) {
        return Err(Error::out_of_range(
            "generator_id",
            generator_id,
            0,
            mask(Lable::GENERATOR_BITS),
        ));
    }
    if cluster_id > mask(Lable::CLUSTER_BITS) {
        return Err(Error::out_of_range("cluster_id", cluster_id, 0, mask(Lable::CLUSTER_BITS)));
    }
    let flag = match mode {
        LableMode::Spread => 0,
        LableMode::TimeSequential => 1,
    };
    Ok((generator_id >> GENERATOR_LOW_BITS) << GENERATOR_HIGH_SHIFT
        | flag << MODE_SHIFT
        | (generator_id & mask(GENERATOR_LOW_BITS)) << GENERATOR_LOW_SHIFT
        | cluster_id << CLUSTER_SHIFT)
}

// Its generators differ in shape, so none is compiled ahead.
impl crate::generator::Sealed for Lable {}

u64_id!(Lable);

/// The `lable` layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LableLayout;

impl LayoutKind for LableLayout {
    fn name(&self) -> &str {
        Lable::NAME
    }

    fn default_format(&self) -> Format {
        Lable::DEFAULT_FORMAT
    }

    fn epoch_ms(&self) -> Option<u64> {
        Some(0)
    }

    fn fields(&self) -> Vec<FieldInfo> {
        let number = |name, bits, max, role| FieldInfo::number(name, bits, 0, max, role);
        vec![
            number("timestamp", Lable::TIMESTAMP_BITS, Lable::MAX_TIMESTAMP, FieldRole::Time),
            number(
                "sequence",
                Lable::SEQUENCE_BITS,
                mask(Lable::SEQUENCE_BITS),
                FieldRole::Sequence,
            ),
            number(
                "generator_id",
                Lable::GENERATOR_BITS,
                mask(Lable::GENERATOR_BITS),
                FieldRole::Node,
            ),
            number("cluster_id", Lable::CLUSTER_BITS, mask(Lable::CLUSTER_BITS), FieldRole::Node),
            FieldInfo::text("mode", 1, FieldRole::Node, "`spread` or `time-sequential`"),
        ]
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        Some(vec![
            Segment::new("timestamp", 63, 22),
            Segment::new("sequence", 21, 16),
            Segment::new("generator_id[10:8]", 15, 13),
            Segment::new("mode", 12, 12),
            Segment::new("generator_id[7:0]", 11, 4),
            Segment::new("cluster_id", 3, 0),
        ])
    }

    fn capacity(&self) -> Capacity {
        let end_ms = Lable::MAX_TIMESTAMP + 1;
        Capacity {
            tick_ms: 1,
            start_ms: Some(0),
            end_ms: Some(end_ms),
            wrap_ms: None,
            start: Some(crate::format_rfc3339_ms(0)),
            end: Some(crate::format_rfc3339_ms(end_ms)),
            ids_per_tick: 1 << Lable::SEQUENCE_BITS,
            ids_per_second_per_generator: 1000 << Lable::SEQUENCE_BITS,
            generators: self.generator_count(),
        }
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let parts = LableParts {
            timestamp: values.number("timestamp")?,
            sequence: values.number("sequence")?,
            generator_id: values.number("generator_id")?,
            cluster_id: values.number("cluster_id")?,
            mode: values.text("mode")?.parse()?,
        };
        Ok(AnyId::U64(Lable::from_parts(parts)?.to_raw()))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let p = Lable::from_raw(id.u64_for(self.name())?)?.into_parts();
        Ok(vec![
            num("timestamp", p.timestamp),
            num("sequence", p.sequence),
            num("generator_id", p.generator_id),
            num("cluster_id", p.cluster_id),
            ("mode".to_owned(), FieldValue::Text(p.mode.name().to_owned())),
        ])
    }

    fn time_ms(&self, id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(Some(Lable::from_raw(id.u64_for(self.name())?)?.into_parts().timestamp))
    }

    fn fingerprint(&self) -> String {
        "lable/64b/epoch=0/tick=1/v4.1".to_owned()
    }

    fn generator_count(&self) -> u64 {
        1 << (Lable::GENERATOR_BITS + Lable::CLUSTER_BITS)
    }

    /// `cluster_id·2048 + generator_id`: LableOrg's claim order (cluster, then generator ID).
    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        vec![
            num("generator_id", generator_id % (1 << Lable::GENERATOR_BITS)),
            num("cluster_id", generator_id >> Lable::GENERATOR_BITS),
        ]
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let mode = match values.text_or("mode")? {
            Some(mode) => mode.parse()?,
            None => LableMode::default(),
        };
        let low = generator_id.map(|id| id % (1 << Lable::GENERATOR_BITS));
        let cluster = generator_id.map(|id| id >> Lable::GENERATOR_BITS);
        let plan = Lable::plan(
            values.node("generator_id", low, 0)?,
            values.node("cluster_id", cluster, 0)?,
            mode,
        )?;
        Ok(AnyGenerator::from_u64(Generator::from_plan(plan, config)?))
    }

    fn order(&self) -> Order {
        // A generator's mode decides: spread mode reverses the time's bits.
        Order::Unordered
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Clock
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

/// The `lable` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "lable",
    about: "LableOrg: 42-bit ms (bit-reversed in spread mode), 6-bit sequence, 11-bit generator, mode flag, 4-bit cluster; uses bit 63",
    make: || std::sync::Arc::new(LableLayout),
};
