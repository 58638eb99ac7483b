//! Twitter Snowflake: a sign bit, 41 bits of milliseconds since 2010-11-04, a 5-bit datacenter,
//! a 5-bit worker and a 12-bit sequence.

use std::num::NonZeroU64;

use crate::{
    bits::{BitField, BitLayout},
    error::Error,
    field::FieldRole,
    format::Format,
    generator::{Generator, GeneratorConfig},
    id_impl::nonzero_bit_id,
    kind::Builtin,
};

/// A Twitter Snowflake ID.
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63 | zero (sign bit) | 0 | — |
/// | 62..=22 | `timestamp`: ms since [`EPOCH_MS`](Self::EPOCH_MS) (2010-11-04T01:42:54.657Z) | 0..=2^41−1 | clock |
/// | 21..=17 | `datacenter` | 0..=31 | configuration |
/// | 16..=12 | `worker` | 0..=31 | configuration |
/// | 11..=0 | `sequence` | 0..=4095 | generator |
///
/// The time field runs out on 2080-07-10T17:30:30.209Z. A generator issues at most 4,096 IDs
/// per millisecond, and 1,024 generators (datacenter × worker) can run at once.
/// IDs lie in 1..=2^63−1: a positive `i64`, never 0.
///
/// # Example
///
/// ```
/// use idmint_core::{Snowflake, SnowflakeParts};
///
/// let id = Snowflake::from_parts(SnowflakeParts {
///     timestamp: 1_000,
///     datacenter: 1,
///     worker: 2,
///     sequence: 3,
/// })?;
/// assert_eq!(id.to_raw(), 1_000 << 22 | 1 << 17 | 2 << 12 | 3);
/// assert_eq!(id.timestamp_ms(), Snowflake::EPOCH_MS + 1_000);
/// assert_eq!(id.to_string().parse::<Snowflake>()?, id);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Snowflake(NonZeroU64);

/// The fields of a [`Snowflake`], as stored (the timestamp is ms since the epoch).
///
/// # Example
///
/// ```
/// use idmint_core::{Snowflake, SnowflakeParts};
///
/// let parts = SnowflakeParts { timestamp: 5, datacenter: 0, worker: 0, sequence: 0 };
/// assert_eq!(Snowflake::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SnowflakeParts {
    /// Milliseconds since [`Snowflake::EPOCH_MS`].
    pub timestamp: u64,
    /// The datacenter, 0..=31.
    pub datacenter: u64,
    /// The worker, 0..=31.
    pub worker: u64,
    /// The sequence within the millisecond, 0..=4095.
    pub sequence: u64,
}

const SEQUENCE_SHIFT: u32 = 0;
const WORKER_SHIFT: u32 = SEQUENCE_SHIFT + Snowflake::SEQUENCE_BITS;
const DATACENTER_SHIFT: u32 = WORKER_SHIFT + Snowflake::WORKER_BITS;
const TIMESTAMP_SHIFT: u32 = DATACENTER_SHIFT + Snowflake::DATACENTER_BITS;

const FIELDS: &[BitField] = &[
    BitField::new("timestamp", TIMESTAMP_SHIFT, Snowflake::TIMESTAMP_BITS, FieldRole::Time),
    BitField::new("datacenter", DATACENTER_SHIFT, Snowflake::DATACENTER_BITS, FieldRole::Node),
    BitField::new("worker", WORKER_SHIFT, Snowflake::WORKER_BITS, FieldRole::Node),
    BitField::new("sequence", SEQUENCE_SHIFT, Snowflake::SEQUENCE_BITS, FieldRole::Sequence),
];

impl Snowflake {
    /// Twitter's epoch: 2010-11-04T01:42:54.657Z, in Unix ms.
    pub const EPOCH_MS: u64 = 1_288_834_974_657;
    /// Width of the timestamp field.
    pub const TIMESTAMP_BITS: u32 = 41;
    /// Width of the datacenter field.
    pub const DATACENTER_BITS: u32 = 5;
    /// Width of the worker field.
    pub const WORKER_BITS: u32 = 5;
    /// Width of the sequence field.
    pub const SEQUENCE_BITS: u32 = 12;
    /// The layout as data, for `explain`, custom generators and the dynamic API.
    pub const LAYOUT: BitLayout =
        BitLayout::builtin("snowflake", 63, FIELDS, Self::EPOCH_MS, 1, false);
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// An example ID, for documentation and tests.
    pub const EXAMPLE: Snowflake = Snowflake(NonZeroU64::new(1_541_815_728_125_124_608).unwrap());

    /// Packs fields into an ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field that does not fit (values are never masked), and
    /// [`Error::InvalidId`] when every field is 0 (0 is not an ID).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Snowflake, SnowflakeParts};
    ///
    /// let parts = SnowflakeParts { timestamp: 1, datacenter: 31, worker: 31, sequence: 4095 };
    /// assert!(Snowflake::from_parts(parts).is_ok());
    /// assert!(Snowflake::from_parts(SnowflakeParts { worker: 32, ..parts }).is_err());
    /// ```
    pub fn from_parts(parts: SnowflakeParts) -> Result<Self, Error> {
        let raw = Self::LAYOUT.pack(&[
            parts.timestamp,
            parts.datacenter,
            parts.worker,
            parts.sequence,
        ])?;
        Self::from_raw(raw)
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Snowflake;
    ///
    /// assert_eq!(Snowflake::EXAMPLE.into_parts().datacenter, 1);
    /// ```
    pub fn into_parts(self) -> SnowflakeParts {
        let raw = self.to_raw();
        SnowflakeParts {
            timestamp: FIELDS[0].get(raw),
            datacenter: FIELDS[1].get(raw),
            worker: FIELDS[2].get(raw),
            sequence: FIELDS[3].get(raw),
        }
    }

    /// The time the ID was issued in, in Unix ms.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Snowflake;
    ///
    /// assert_eq!(Snowflake::from_raw(1 << 22)?.timestamp_ms(), Snowflake::EPOCH_MS + 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn timestamp_ms(self) -> u64 {
        Self::EPOCH_MS + FIELDS[0].get(self.to_raw())
    }

    /// A lock-free generator for one (datacenter, worker) pair.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `datacenter` or `worker` is above 31, and
    /// [`Error::InvalidConfig`] for a bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Snowflake};
    ///
    /// let generator = Snowflake::generator(1, 7, &GeneratorConfig::default())?;
    /// let id = generator.next(Snowflake::EPOCH_MS + 9)?.ready().unwrap();
    /// assert_eq!((id.into_parts().datacenter, id.into_parts().worker), (1, 7));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        datacenter: u64,
        worker: u64,
        config: &GeneratorConfig,
    ) -> Result<Generator<Snowflake>, Error> {
        let node = Self::LAYOUT.node_bits(&[("datacenter", datacenter), ("worker", worker)])?;
        Generator::from_plan(Self::LAYOUT.plan(node)?, config)
    }
}

nonzero_bit_id!(Snowflake);

/// The `snowflake` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "snowflake",
    about: "Twitter Snowflake: 41-bit ms since 2010-11-04, 5-bit datacenter, 5-bit worker, 12-bit sequence",
    make: || std::sync::Arc::new(Snowflake::LAYOUT),
};
