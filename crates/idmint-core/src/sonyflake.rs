//! Sony's Sonyflake: a sign bit, 39 bits of 10-ms units since 2014-09-01, an 8-bit sequence and
//! a 16-bit machine ID in the low bits.

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

/// A Sonyflake ID (v1 layout).
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63 | zero (sign bit) | 0 | — |
/// | 62..=24 | `timestamp`: 10-ms units since [`EPOCH_MS`](Self::EPOCH_MS) (2014-09-01T00:00:00Z) | 0..=2^39−1 | clock |
/// | 23..=16 | `sequence` | 0..=255 | generator |
/// | 15..=0 | `machine` | 0..=65535 | configuration |
///
/// The time field lasts about 174 years (to 2188). A generator issues at most 256 IDs per
/// 10 ms (25,600 per second), and 65,536 machines can run at once. The machine ID sits below
/// the sequence, so IDs of different machines interleave within a tick.
///
/// # Example
///
/// ```
/// use idmint_core::{Sonyflake, SonyflakeParts};
///
/// let id = Sonyflake::from_parts(SonyflakeParts { timestamp: 100, sequence: 1, machine: 7 })?;
/// assert_eq!(id.to_raw(), 100 << 24 | 1 << 16 | 7);
/// assert_eq!(id.timestamp_ms(), Sonyflake::EPOCH_MS + 1_000);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sonyflake(NonZeroU64);

/// The fields of a [`Sonyflake`], as stored.
///
/// # Example
///
/// ```
/// use idmint_core::{Sonyflake, SonyflakeParts};
///
/// let parts = SonyflakeParts { timestamp: 1, sequence: 2, machine: 3 };
/// assert_eq!(Sonyflake::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct SonyflakeParts {
    /// 10-ms units since [`Sonyflake::EPOCH_MS`].
    pub timestamp: u64,
    /// The sequence within the tick, 0..=255.
    pub sequence: u64,
    /// The machine ID, 0..=65535.
    pub machine: u64,
}

const MACHINE_SHIFT: u32 = 0;
const SEQUENCE_SHIFT: u32 = MACHINE_SHIFT + Sonyflake::MACHINE_BITS;
const TIMESTAMP_SHIFT: u32 = SEQUENCE_SHIFT + Sonyflake::SEQUENCE_BITS;

const FIELDS: &[BitField] = &[
    BitField::new("timestamp", TIMESTAMP_SHIFT, Sonyflake::TIMESTAMP_BITS, FieldRole::Time),
    BitField::new("sequence", SEQUENCE_SHIFT, Sonyflake::SEQUENCE_BITS, FieldRole::Sequence),
    BitField::new("machine", MACHINE_SHIFT, Sonyflake::MACHINE_BITS, FieldRole::Node),
];

impl Sonyflake {
    /// Sonyflake's default start time: 2014-09-01T00:00:00Z, in Unix ms.
    pub const EPOCH_MS: u64 = 1_409_529_600_000;
    /// The length of one tick, in ms.
    pub const TICK_MS: u64 = 10;
    /// Width of the timestamp field.
    pub const TIMESTAMP_BITS: u32 = 39;
    /// Width of the sequence field.
    pub const SEQUENCE_BITS: u32 = 8;
    /// Width of the machine field.
    pub const MACHINE_BITS: u32 = 16;
    /// The layout as data.
    pub const LAYOUT: BitLayout =
        BitLayout::builtin("sonyflake", 63, FIELDS, Self::EPOCH_MS, Self::TICK_MS, false)
            .with_floored_epoch();
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// An example ID, for documentation and tests.
    pub const EXAMPLE: Sonyflake = Sonyflake(NonZeroU64::new(634_903_540_531_200_001).unwrap());

    /// Packs fields into an ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field that does not fit, and [`Error::InvalidId`] when
    /// every field is 0.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Sonyflake, SonyflakeParts};
    ///
    /// assert!(Sonyflake::from_parts(SonyflakeParts { timestamp: 1, sequence: 256, machine: 0 }).is_err());
    /// ```
    pub fn from_parts(parts: SonyflakeParts) -> Result<Self, Error> {
        Self::from_raw(Self::LAYOUT.pack(&[parts.timestamp, parts.sequence, parts.machine])?)
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Sonyflake;
    ///
    /// assert_eq!(Sonyflake::EXAMPLE.into_parts().machine, 1);
    /// ```
    pub fn into_parts(self) -> SonyflakeParts {
        let raw = self.to_raw();
        SonyflakeParts {
            timestamp: FIELDS[0].get(raw),
            sequence: FIELDS[1].get(raw),
            machine: FIELDS[2].get(raw),
        }
    }

    /// The start of the ID's tick, in Unix ms.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Sonyflake;
    ///
    /// assert_eq!(Sonyflake::from_raw(1 << 24)?.timestamp_ms(), Sonyflake::EPOCH_MS + 10);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn timestamp_ms(self) -> u64 {
        Self::EPOCH_MS + FIELDS[0].get(self.to_raw()) * Self::TICK_MS
    }

    /// A lock-free generator for one machine ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `machine` is above 65535, [`Error::InvalidConfig`] for a
    /// bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Sonyflake};
    ///
    /// let generator = Sonyflake::generator(9, &GeneratorConfig::default())?;
    /// let id = generator.next(Sonyflake::EPOCH_MS + 25)?.ready().unwrap();
    /// assert_eq!(id.into_parts().timestamp, 2);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        machine: u64,
        config: &GeneratorConfig,
    ) -> Result<Generator<Sonyflake>, Error> {
        let node = Self::LAYOUT.node_bits(&[("machine", machine)])?;
        Generator::from_plan(Self::LAYOUT.plan(node)?, config)
    }
}

nonzero_bit_id!(Sonyflake);

/// The `sonyflake` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "sonyflake",
    about: "Sony Sonyflake: 39 bits of 10 ms since 2014-09-01, 8-bit sequence, 16-bit machine",
    make: || std::sync::Arc::new(Sonyflake::LAYOUT),
};
