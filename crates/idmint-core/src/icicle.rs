//! intenthq's icicle: a sign bit, 41 bits of milliseconds since 2016-02-18T09:43:20.316Z, a
//! 10-bit logical shard and a 12-bit sequence.

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

/// An icicle ID (v2).
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63 | zero (sign bit of a Java `long`) | 0 | — |
/// | 62..=22 | `timestamp`: ms since [`EPOCH_MS`](Self::EPOCH_MS) (2016-02-18T09:43:20.316Z) | 0..=2^41−1 | Redis `TIME` |
/// | 21..=12 | `shard`: the node's logical shard | 0..=1023 (generators: 1..=1023) | configuration |
/// | 11..=0 | `sequence` | 0..=4095 | generator |
///
/// The time field runs out on 2085-10-25T01:30:55.868Z. icicle v1 used another epoch; v1 and
/// v2 IDs are not compatible. In icicle the Lua script in Redis generates the IDs; this type
/// packs and unpacks them, and its generator is the same layout made locally.
///
/// # Example
///
/// ```
/// use idmint_core::{Icicle, IcicleParts};
///
/// let id: Icicle = "143322835047240136".parse()?;
/// assert_eq!(id.into_parts(), IcicleParts { timestamp: 34_170_826_684, shard: 789, sequence: 456 });
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Icicle(NonZeroU64);

/// The fields of an [`Icicle`], as stored.
///
/// # Example
///
/// ```
/// use idmint_core::{Icicle, IcicleParts};
///
/// let parts = IcicleParts { timestamp: 1, shard: 1023, sequence: 0 };
/// assert_eq!(Icicle::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct IcicleParts {
    /// Milliseconds since [`Icicle::EPOCH_MS`].
    pub timestamp: u64,
    /// The logical shard, 0..=1023.
    pub shard: u64,
    /// The sequence, 0..=4095.
    pub sequence: u64,
}

const SEQUENCE_SHIFT: u32 = 0;
const SHARD_SHIFT: u32 = SEQUENCE_SHIFT + Icicle::SEQUENCE_BITS;
const TIMESTAMP_SHIFT: u32 = SHARD_SHIFT + Icicle::SHARD_BITS;

const FIELDS: &[BitField] = &[
    BitField::new("timestamp", TIMESTAMP_SHIFT, Icicle::TIMESTAMP_BITS, FieldRole::Time),
    BitField::new("shard", SHARD_SHIFT, Icicle::SHARD_BITS, FieldRole::Node)
        .with_generator_min(Icicle::MIN_GENERATOR_SHARD),
    BitField::new("sequence", SEQUENCE_SHIFT, Icicle::SEQUENCE_BITS, FieldRole::Sequence),
];

impl Icicle {
    /// icicle v2's custom epoch: 2016-02-18T09:43:20.316Z, in Unix ms.
    pub const EPOCH_MS: u64 = 1_455_788_600_316;
    /// Width of the timestamp field.
    pub const TIMESTAMP_BITS: u32 = 41;
    /// Width of the logical shard field.
    pub const SHARD_BITS: u32 = 10;
    /// Width of the sequence field.
    pub const SEQUENCE_BITS: u32 = 12;
    /// The smallest shard icicle's client accepts (it refuses 0 and −1).
    pub const MIN_GENERATOR_SHARD: u64 = 1;
    /// The largest sequence value; the Lua script rolls over when it reaches it.
    pub const MAX_SEQUENCE: u64 = (1 << Self::SEQUENCE_BITS) - 1;
    /// The layout as data.
    pub const LAYOUT: BitLayout =
        BitLayout::builtin("icicle", 63, FIELDS, Self::EPOCH_MS, 1, false);
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// An example ID (from icicle's own tests), for documentation and tests.
    pub const EXAMPLE: Icicle = Icicle(NonZeroU64::new(143_322_835_047_240_136).unwrap());

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
    /// use idmint_core::{Icicle, IcicleParts};
    ///
    /// let id = Icicle::from_parts(IcicleParts { timestamp: 34_170_826_684, shard: 789, sequence: 456 })?;
    /// assert_eq!(id, Icicle::EXAMPLE);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_parts(parts: IcicleParts) -> Result<Self, Error> {
        Self::from_raw(Self::LAYOUT.pack(&[parts.timestamp, parts.shard, parts.sequence])?)
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Icicle;
    ///
    /// assert_eq!(Icicle::EXAMPLE.into_parts().shard, 789);
    /// ```
    pub fn into_parts(self) -> IcicleParts {
        let raw = self.to_raw();
        IcicleParts {
            timestamp: FIELDS[0].get(raw),
            shard: FIELDS[1].get(raw),
            sequence: FIELDS[2].get(raw),
        }
    }

    /// The time the ID was issued in, in Unix ms (icicle's `Id.getTime()`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Icicle;
    ///
    /// assert_eq!(Icicle::EXAMPLE.timestamp_ms(), Icicle::EPOCH_MS + 34_170_826_684);
    /// ```
    pub fn timestamp_ms(self) -> u64 {
        Self::EPOCH_MS + FIELDS[0].get(self.to_raw())
    }

    /// A lock-free generator of icicle-layout IDs for one logical shard, made locally.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `shard` is not in 1..=1023 (icicle's client refuses 0),
    /// [`Error::InvalidConfig`] for a bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Icicle};
    ///
    /// assert!(Icicle::generator(0, &GeneratorConfig::default()).is_err());
    /// let generator = Icicle::generator(7, &GeneratorConfig::default())?;
    /// let id = generator.next(Icicle::EPOCH_MS + 1)?.ready().unwrap();
    /// assert_eq!(id.into_parts().shard, 7);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(shard: u64, config: &GeneratorConfig) -> Result<Generator<Icicle>, Error> {
        if shard < Self::MIN_GENERATOR_SHARD {
            return Err(Error::out_of_range(
                "shard",
                shard,
                Self::MIN_GENERATOR_SHARD,
                FIELDS[1].max(),
            ));
        }
        let node = Self::LAYOUT.node_bits(&[("shard", shard)])?;
        Generator::from_plan(Self::LAYOUT.plan(node)?, config)
    }
}

nonzero_bit_id!(Icicle);

/// The `icicle` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "icicle",
    about: "intenthq icicle: 41-bit ms since 2016-02-18, 10-bit logical shard, 12-bit sequence",
    make: || std::sync::Arc::new(Icicle::LAYOUT),
};
