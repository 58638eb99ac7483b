//! UUIDv7 (RFC 9562 §5.7) minted under a claimed generator ID: the [`Uuid7`] value, its
//! configurable split of the 74 bits after the timestamp ([`Uuid7Split`]), its lock-free
//! sans-I/O generator, and the `uuid7` layout. Unique across a fleet by construction (the
//! generator ID), strictly increasing per generator (a dedicated counter, RFC 9562 §6.2
//! method 1), and unpredictable beyond the counter (random bits from ChaCha8 keyed from the OS
//! CSPRNG).

use std::{fmt, iter::FusedIterator, str::FromStr, sync::Arc};

use crate::{
    any::{AnyBatch, AnyGenerator, AnyId, OtherGenerator},
    error::Error,
    field::{FieldInfo, FieldReader, FieldRole, FieldValue, Segment, num},
    format::Format,
    generator::GeneratorConfig,
    kind::{Builtin, Capacity, IssuedBy, LayoutKind, Order, same_as},
    next::Next,
    pack::low_mask,
    random::random_u64,
    sequence::{Sequencer, Timing},
    text128::{Text128, TypePrefix},
};

/// Bits of the Unix-millisecond timestamp (`unix_ts_ms`).
const MS_BITS: u32 = 48;
/// Where the timestamp starts: bits 127..=80.
const MS_SHIFT: u32 = 80;
/// The version nibble (7) in place: bits 79..=76.
const VERSION_BITS: u128 = 0x7 << 76;
/// The variant (0b10) in place: bits 63..=62.
const VARIANT_BITS: u128 = 0b10 << 62;
/// The mask of the version nibble.
const VERSION_MASK: u128 = 0xf << 76;
/// The mask of the variant bits.
const VARIANT_MASK: u128 = 0b11 << 62;
/// Bits after the timestamp that are neither version nor variant: `rand_a` (12) and `rand_b`
/// (62).
const PAYLOAD_BITS: u32 = 74;
/// Bits of `rand_b`, the low part of the payload.
const RAND_B_BITS: u32 = 62;
/// `rand_b`'s mask.
const RAND_B_MASK: u128 = (1 << RAND_B_BITS) - 1;
/// The most bits the sub-millisecond and counter fields may take together: the state word
/// holds the 48-bit millisecond, the sub-millisecond fraction and the counter in 64 bits.
const MAX_SUB_MS_AND_COUNTER: u32 = 64 - MS_BITS;
/// The most generator bits (generator IDs are `u64`s counted by a `u64`).
const MAX_GENERATOR_BITS: u32 = 32;

/// How a [`Uuid7`] divides the 74 bits after its timestamp (RFC 9562's `rand_a` and `rand_b`,
/// around the version and variant), most significant first: the sub-millisecond fraction
/// (RFC 9562 §6.2 method 3), the counter (method 1), the generator ID and random bits.
///
/// | setting | default | allowed |
/// | --- | --- | --- |
/// | `sub_ms_bits` | 0 | 0..=12 |
/// | `counter_bits` | 12 | 1..=16, with `sub_ms_bits + counter_bits` at most 16 |
/// | `generator_bits` | 16 | 0..=32 |
///
/// The random field takes the rest: `74 − sub_ms_bits − counter_bits − generator_bits` bits,
/// at most 64. The default holds 4,096 IDs per millisecond per generator, 65,536 generators
/// and 46 random bits; its bit table is on [`Uuid7`].
///
/// # Example
///
/// ```
/// use idmint_core::Uuid7Split;
///
/// let split = Uuid7Split::default();
/// assert_eq!((split.random_bits(), split.ids_per_ms(), split.generator_count()), (46, 4_096, 65_536));
/// assert!(Uuid7Split { counter_bits: 20, ..split }.check().is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct Uuid7Split {
    /// Bits of sub-millisecond time after the 48-bit millisecond (RFC 9562 §6.2 method 3).
    /// Filled only by [`Uuid7Generator::next_us`]; `next(now_ms)` writes 0 there.
    pub sub_ms_bits: u32,
    /// Bits of the counter that orders the IDs of one millisecond (or sub-millisecond tick).
    pub counter_bits: u32,
    /// Bits of the claimed generator ID.
    pub generator_bits: u32,
}

impl Default for Uuid7Split {
    fn default() -> Self {
        DEFAULT_SPLIT
    }
}

/// The default split: 12 counter bits (all of `rand_a`), 16 generator bits, 46 random bits.
const DEFAULT_SPLIT: Uuid7Split =
    Uuid7Split { sub_ms_bits: 0, counter_bits: 12, generator_bits: 16 };

impl Uuid7Split {
    /// Checks the widths (see the table above).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] naming the setting and its allowed range.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7Split;
    ///
    /// assert!(Uuid7Split { sub_ms_bits: 4, counter_bits: 12, generator_bits: 10 }.check().is_ok());
    /// assert!(Uuid7Split { generator_bits: 0, counter_bits: 1, sub_ms_bits: 0 }.check().is_err());
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::InvalidLayout(format!("uuid7: {what}")));
        if self.counter_bits == 0 {
            return bad("counter_bits must be at least 1".into());
        }
        if self.sub_ms_bits + self.counter_bits > MAX_SUB_MS_AND_COUNTER {
            return bad(format!(
                "sub_ms_bits + counter_bits must be at most {MAX_SUB_MS_AND_COUNTER}, not {}",
                self.sub_ms_bits + self.counter_bits
            ));
        }
        if self.generator_bits > MAX_GENERATOR_BITS {
            return bad(format!(
                "generator_bits must be 0..={MAX_GENERATOR_BITS}, not {}",
                self.generator_bits
            ));
        }
        let used = self.sub_ms_bits + self.counter_bits + self.generator_bits;
        if PAYLOAD_BITS - used > 64 {
            return bad(format!(
                "the random field would have {} bits; at most 64 (sub_ms_bits + counter_bits + \
                 generator_bits at least 10)",
                PAYLOAD_BITS - used
            ));
        }
        Ok(())
    }

    /// Bits of the random field: what the other fields leave of the 74.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Uuid7Split::default().random_bits(), 46);
    /// ```
    pub const fn random_bits(&self) -> u32 {
        PAYLOAD_BITS - self.sub_ms_bits - self.counter_bits - self.generator_bits
    }

    /// How many IDs one generator can issue per millisecond when it is given milliseconds
    /// (`2^counter_bits`); with a sub-millisecond clock ([`Uuid7Generator::next_us`]) up to
    /// `2^(sub_ms_bits + counter_bits)`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Uuid7Split::default().ids_per_ms(), 4_096);
    /// ```
    pub const fn ids_per_ms(&self) -> u64 {
        1 << self.counter_bits
    }

    /// How many generator IDs there are: `2^generator_bits`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Uuid7Split::default().generator_count(), 65_536);
    /// ```
    pub const fn generator_count(&self) -> u64 {
        1 << self.generator_bits
    }

    /// The `uuid7` layout with this split, for [`Layout`](crate::Layout)'s run-time API.
    ///
    /// # Errors
    ///
    /// As [`check`](Self::check).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Uuid7Split};
    ///
    /// assert_eq!(Uuid7Split::default().layout()?, Layout::builtin("uuid7")?);
    /// let small = Uuid7Split { generator_bits: 10, ..Uuid7Split::default() }.layout()?;
    /// assert_eq!(small.generator_count(), 1_024);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn layout(&self) -> Result<crate::Layout, Error> {
        self.check()?;
        Ok(crate::Layout::from_kind(Arc::new(Uuid7Layout { split: *self })))
    }

    /// Bits of the fields that the state word carries below the millisecond.
    const fn low_bits(&self) -> u32 {
        self.sub_ms_bits + self.counter_bits
    }

    /// Where the (sub-millisecond, counter) bits start inside the payload.
    const fn low_shift(&self) -> u32 {
        self.generator_bits + self.random_bits()
    }
}

/// Puts a 74-bit payload around the version and variant: its top 12 bits into `rand_a`
/// (bits 75..=64), its low 62 into `rand_b` (bits 61..=0).
#[inline(always)]
const fn place(payload: u128) -> u128 {
    (payload >> RAND_B_BITS) << 64 | (payload & RAND_B_MASK)
}

/// The inverse of [`place`]: the 74-bit payload of a value.
#[inline(always)]
const fn payload_of(value: u128) -> u128 {
    ((value >> 64) & 0xfff) << RAND_B_BITS | (value & RAND_B_MASK)
}

/// A UUID version 7 (RFC 9562 §5.7) as idmint mints it.
///
/// The 128 bits, most significant first, with the default [`Uuid7Split`]:
///
/// | bits | field | RFC 9562 name | width |
/// | --- | --- | --- | --- |
/// | 127..=80 | `unix_ms`: Unix time in milliseconds | `unix_ts_ms` | 48 |
/// | 79..=76 | version, always `0111` (7) | `ver` | 4 |
/// | 75..=64 | `counter`: orders the IDs of one millisecond | `rand_a` | 12 |
/// | 63..=62 | variant, always `10` | `var` | 2 |
/// | 61..=46 | `generator`: the claimed generator ID | `rand_b` (top) | 16 |
/// | 45..=0 | `random`: ChaCha8 keyed from the OS CSPRNG | `rand_b` (rest) | 46 |
///
/// Other splits move the boundaries after bit 76 (a `sub_ms` field, then `counter`,
/// `generator` and `random`, in that order, jumping over the variant); see
/// [`Uuid7::from_parts_in`]. The value is the big-endian `u128` of the UUID's 16 bytes, so
/// `Uuid7`s order like their bytes and their text: by time, then counter, then generator.
///
/// # Example
///
/// ```
/// use idmint_core::{Uuid7, Uuid7Parts};
///
/// let id = Uuid7::from_parts(Uuid7Parts { unix_ms: 1_700_000_000_000, counter: 5, generator: 3, random: 0, ..Default::default() })?;
/// assert_eq!(id.to_string(), "018bcfe5-6800-7005-8000-c00000000000");
/// assert_eq!(id.unix_ms(), 1_700_000_000_000);
/// assert_eq!(id.to_string().parse::<Uuid7>()?, id);
/// assert!("018bcfe5-6800-4005-8000-c00000000000".parse::<Uuid7>().is_err()); // version 4
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid7(u128);

/// The fields of a [`Uuid7`] under a [`Uuid7Split`]; `sub_ms` is 0 when the split has none.
///
/// # Example
///
/// ```
/// use idmint_core::{Uuid7, Uuid7Parts};
///
/// let parts = Uuid7Parts { unix_ms: 1, sub_ms: 0, counter: 2, generator: 3, random: 4 };
/// assert_eq!(Uuid7::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Uuid7Parts {
    /// Unix time in milliseconds, below 2^48.
    pub unix_ms: u64,
    /// The sub-millisecond fraction, in units of `2^-sub_ms_bits` ms.
    pub sub_ms: u64,
    /// The counter.
    pub counter: u64,
    /// The generator ID.
    pub generator: u64,
    /// The random bits.
    pub random: u64,
}

impl Uuid7 {
    /// The version nibble's value.
    pub const VERSION: u8 = 7;
    /// The variant's two bits (`10`, RFC 9562 §4.1).
    pub const VARIANT: u8 = 0b10;
    /// Bits of the Unix-millisecond timestamp.
    pub const UNIX_MS_BITS: u32 = MS_BITS;
    /// Where the timestamp starts (it fills bits 127..=80).
    pub const UNIX_MS_SHIFT: u32 = MS_SHIFT;
    /// The largest timestamp: 2^48 − 1 ms, in the year 10889.
    pub const MAX_UNIX_MS: u64 = (1 << MS_BITS) - 1;
    /// Bits after the timestamp that the split divides (`rand_a` and `rand_b`).
    pub const PAYLOAD_BITS: u32 = PAYLOAD_BITS;

    /// Packs fields under the default split.
    ///
    /// # Errors
    ///
    /// As [`from_parts_in`](Self::from_parts_in).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Uuid7, Uuid7Parts};
    ///
    /// let too_big = Uuid7Parts { counter: 4_096, ..Default::default() };
    /// assert!(Uuid7::from_parts(too_big).is_err());
    /// ```
    pub fn from_parts(parts: Uuid7Parts) -> Result<Self, Error> {
        Self::from_parts_in(&Uuid7Split::default(), parts)
    }

    /// Packs fields under `split`. Values are refused, never masked.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field too wide for its bits, [`Error::InvalidLayout`]
    /// for a bad split.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Uuid7, Uuid7Parts, Uuid7Split};
    ///
    /// let split = Uuid7Split { sub_ms_bits: 4, counter_bits: 8, generator_bits: 10 };
    /// let parts = Uuid7Parts { unix_ms: 9, sub_ms: 15, counter: 255, generator: 1_023, random: 1 };
    /// assert_eq!(Uuid7::from_parts_in(&split, parts)?.into_parts_in(&split), parts);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_parts_in(split: &Uuid7Split, parts: Uuid7Parts) -> Result<Self, Error> {
        split.check()?;
        let fit = |field: &str, value: u64, bits: u32| {
            if value > low_mask(bits) {
                return Err(Error::out_of_range(field, value, 0, low_mask(bits)));
            }
            Ok(u128::from(value))
        };
        let ms = fit("unix_ms", parts.unix_ms, MS_BITS)?;
        let sub = fit("sub_ms", parts.sub_ms, split.sub_ms_bits)?;
        let counter = fit("counter", parts.counter, split.counter_bits)?;
        let generator = fit("generator", parts.generator, split.generator_bits)?;
        let random = fit("random", parts.random, split.random_bits())?;
        let r = split.random_bits();
        let payload =
            (sub << split.counter_bits | counter) << split.low_shift() | generator << r | random;
        Ok(Uuid7(ms << MS_SHIFT | VERSION_BITS | VARIANT_BITS | place(payload)))
    }

    /// The fields under the default split.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7;
    ///
    /// let id: Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.into_parts().unix_ms, 1_688_096_058_518);
    /// assert_eq!(id.into_parts().counter, 0x74b);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn into_parts(self) -> Uuid7Parts {
        self.into_parts_in(&Uuid7Split::default())
    }

    /// The fields under `split` (which must be valid; see [`Uuid7Split::check`]).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Uuid7, Uuid7Split};
    ///
    /// let id: Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// let split = Uuid7Split { generator_bits: 10, ..Uuid7Split::default() };
    /// assert_eq!(id.into_parts_in(&split).generator, 0x3cc);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn into_parts_in(self, split: &Uuid7Split) -> Uuid7Parts {
        let payload = payload_of(self.0);
        let r = split.random_bits();
        let field = |shift: u32, bits: u32| ((payload >> shift) as u64) & low_mask(bits);
        let low_shift = split.low_shift();
        Uuid7Parts {
            unix_ms: self.unix_ms(),
            sub_ms: field(low_shift + split.counter_bits, split.sub_ms_bits),
            counter: field(low_shift, split.counter_bits),
            generator: field(r, split.generator_bits),
            random: field(0, r),
        }
    }

    /// The Unix time in milliseconds (RFC 9562's `unix_ts_ms`).
    ///
    /// # Example
    ///
    /// ```
    /// let id: idmint_core::Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.unix_ms(), 0x01890a5dac96);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn unix_ms(self) -> u64 {
        (self.0 >> MS_SHIFT) as u64
    }

    /// The UUIDv7 of a 128-bit value (the big-endian UUID bytes).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidId`] when the version nibble is not 7 or the variant is not `10`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7;
    ///
    /// assert!(Uuid7::from_u128(0x01890a5d_ac96_774b_bcce_b302099a8057).is_ok());
    /// assert!(Uuid7::from_u128(0x01890a5d_ac96_474b_bcce_b302099a8057).is_err());
    /// ```
    pub fn from_u128(value: u128) -> Result<Self, Error> {
        if value & VERSION_MASK != VERSION_BITS {
            return Err(Error::InvalidId {
                layout: NAME.to_owned(),
                reason: "the version nibble (bits 79..=76) is not 7",
            });
        }
        if value & VARIANT_MASK != VARIANT_BITS {
            return Err(Error::InvalidId {
                layout: NAME.to_owned(),
                reason: "the variant (bits 63..=62) is not 0b10 (RFC 9562)",
            });
        }
        Ok(Uuid7(value))
    }

    /// The value: the big-endian UUID bytes as a `u128`.
    ///
    /// # Example
    ///
    /// ```
    /// let id: idmint_core::Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.as_u128(), 0x01890a5d_ac96_774b_bcce_b302099a8057);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// The 16 bytes, big-endian (as RFC 9562 and a database's `uuid` column hold them).
    ///
    /// # Example
    ///
    /// ```
    /// let id: idmint_core::Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.to_bytes()[6], 0x77);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }

    /// The UUIDv7 of 16 big-endian bytes.
    ///
    /// # Errors
    ///
    /// As [`from_u128`](Self::from_u128).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7;
    ///
    /// let id: Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(Uuid7::from_bytes(id.to_bytes())?, id);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_bytes(bytes: [u8; 16]) -> Result<Self, Error> {
        Self::from_u128(u128::from_be_bytes(bytes))
    }

    /// The ID as a ULID: 26 Crockford base32 characters, upper case, the same 128 bits.
    ///
    /// # Example
    ///
    /// ```
    /// let id: idmint_core::Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.to_ulid(), "01H455VB4PEX5VSKNK084SN02Q");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn to_ulid(self) -> String {
        Text128::Ulid.write(self.0)
    }

    /// Reads a ULID (either case) that holds a UUIDv7.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] for a bad ULID, [`Error::InvalidId`] when its bits are not a
    /// UUIDv7 (a ULID from a ULID generator has random bits where the version and variant go).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7;
    ///
    /// let id = Uuid7::parse_ulid("01h455vb4pex5vsknk084sn02q")?;
    /// assert_eq!(id.to_string(), "01890a5d-ac96-774b-bcce-b302099a8057");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_ulid(text: &str) -> Result<Self, Error> {
        Self::from_u128(Text128::Ulid.parse(text)?).map_err(named)
    }

    /// The ID as a TypeID with `prefix`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{TypePrefix, Uuid7};
    ///
    /// let id: Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// assert_eq!(id.to_typeid(&TypePrefix::new("user")?), "user_01h455vb4pex5vsknk084sn02q");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn to_typeid(self, prefix: &TypePrefix) -> String {
        crate::text128::typeid_text(prefix, self.0)
    }

    /// Reads a TypeID that must have prefix `expected` and hold a UUIDv7.
    ///
    /// # Errors
    ///
    /// [`Error::TypePrefixMismatch`] naming both prefixes, [`Error::InvalidTypeId`] for text
    /// that is no TypeID, [`Error::InvalidId`] for a suffix that is not a UUIDv7.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, TypePrefix, Uuid7};
    ///
    /// let user = TypePrefix::new("user")?;
    /// let id = Uuid7::parse_typeid("user_01h455vb4pex5vsknk084sn02q", &user)?;
    /// assert_eq!(id.unix_ms(), 1_688_096_058_518);
    /// let err = Uuid7::parse_typeid("order_01h455vb4pex5vsknk084sn02q", &user).unwrap_err();
    /// assert!(matches!(err, Error::TypePrefixMismatch { .. }));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse_typeid(text: &str, expected: &TypePrefix) -> Result<Self, Error> {
        Self::from_u128(Text128::TypeId(expected.clone()).parse(text)?).map_err(named)
    }

    /// A lock-free generator of UUIDv7s for generator ID `generator` under the default split.
    ///
    /// # Errors
    ///
    /// As [`generator_in`](Self::generator_in).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7};
    ///
    /// let generator = Uuid7::generator(7, &GeneratorConfig::default())?;
    /// let id = generator.next(1_700_000_000_000)?.ready().unwrap();
    /// assert_eq!((id.unix_ms(), id.into_parts().generator), (1_700_000_000_000, 7));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(generator: u64, config: &GeneratorConfig) -> Result<Uuid7Generator, Error> {
        Uuid7Generator::new(Uuid7Split::default(), generator, config)
    }

    /// A lock-free generator of UUIDv7s for generator ID `generator` under `split`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] for a bad split, [`Error::FieldOutOfRange`] for a generator ID
    /// that does not fit, [`Error::InvalidConfig`] for a bad `config`, and
    /// [`Error::TimeExhausted`] for a `start_above_ms` at the end of time.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7, Uuid7Split};
    ///
    /// let split = Uuid7Split { generator_bits: 10, ..Uuid7Split::default() };
    /// assert!(Uuid7::generator_in(&split, 1_024, &GeneratorConfig::default()).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator_in(
        split: &Uuid7Split,
        generator: u64,
        config: &GeneratorConfig,
    ) -> Result<Uuid7Generator, Error> {
        Uuid7Generator::new(*split, generator, config)
    }
}

impl fmt::Display for Uuid7 {
    /// The canonical hyphenated form, lower case.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&Format::Uuid.encode_u128(self.0).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Uuid7 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid7({self})")
    }
}

/// Parses the hyphenated form (either case) and checks the version and variant.
impl FromStr for Uuid7 {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        Format::Uuid.parse_u128(text).and_then(|v| Self::from_u128(v).map_err(named))
    }
}

/// Names the layout in an [`Error::InvalidId`] from [`Uuid7::from_u128`].
fn named(e: Error) -> Error {
    match e {
        Error::InvalidId { reason, .. } => Error::InvalidId { layout: NAME.to_owned(), reason },
        e => e,
    }
}

impl From<Uuid7> for u128 {
    fn from(id: Uuid7) -> u128 {
        id.0
    }
}

impl From<Uuid7> for AnyId {
    fn from(id: Uuid7) -> AnyId {
        AnyId::U128(id.0)
    }
}

/// The UUIDv7 held by an [`AnyId`]: a 128-bit value with version 7 and the RFC variant.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, Uuid7};
///
/// let id: Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
/// assert_eq!(Uuid7::try_from(AnyId::from(id))?, id);
/// assert!(Uuid7::try_from(AnyId::U64(7)).is_err());
/// # Ok::<(), idmint_core::Error>(())
/// ```
impl TryFrom<AnyId> for Uuid7 {
    type Error = Error;

    fn try_from(id: AnyId) -> Result<Uuid7, Error> {
        match id.of_width(128, NAME)? {
            AnyId::U128(raw) => Uuid7::from_u128(raw).map_err(named),
            AnyId::U64(_) => unreachable!("of_width checked the width"),
        }
    }
}

/// Strings in serde: the hyphenated form out, a valid UUIDv7 string in.
#[cfg(feature = "serde")]
mod serde_impls {
    use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

    use super::Uuid7;

    impl Serialize for Uuid7 {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_str(self)
        }
    }

    impl<'de> Deserialize<'de> for Uuid7 {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
            text.parse().map_err(de::Error::custom)
        }
    }
}

/// Conversions to and from the `uuid` crate's [`uuid::Uuid`] (feature `uuid`): a [`Uuid7`] is
/// one, and a `uuid::Uuid` is a [`Uuid7`] when it has version 7 and the RFC variant.
#[cfg(feature = "uuid")]
mod uuid_impls {
    use super::{AnyId, Error, NAME, Uuid7, named};

    /// # Example
    ///
    /// ```
    /// let id: idmint_core::Uuid7 = "01890a5d-ac96-774b-bcce-b302099a8057".parse()?;
    /// let uuid = uuid::Uuid::from(id);
    /// assert_eq!((uuid.get_version_num(), uuid.to_string()), (7, id.to_string()));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    impl From<Uuid7> for uuid::Uuid {
        fn from(id: Uuid7) -> uuid::Uuid {
            uuid::Uuid::from_u128(id.0)
        }
    }

    /// # Example
    ///
    /// ```
    /// use idmint_core::Uuid7;
    ///
    /// let v7 = uuid::Uuid::parse_str("01890a5d-ac96-774b-bcce-b302099a8057").unwrap();
    /// assert_eq!(Uuid7::try_from(v7)?.to_string(), v7.to_string());
    /// assert!(Uuid7::try_from(uuid::Uuid::nil()).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    impl TryFrom<uuid::Uuid> for Uuid7 {
        type Error = Error;

        fn try_from(uuid: uuid::Uuid) -> Result<Uuid7, Error> {
            Uuid7::from_u128(uuid.as_u128()).map_err(named)
        }
    }

    /// The 128 bits of an ID as a `uuid::Uuid` (any 128-bit layout; a 64-bit ID is
    /// [`Error::InvalidId`]), so that `idmint_client::Client::next_as::<uuid::Uuid>()` works.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::AnyId;
    ///
    /// assert_eq!(uuid::Uuid::try_from(AnyId::U128(1))?.as_u128(), 1);
    /// assert!(uuid::Uuid::try_from(AnyId::U64(1)).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    impl TryFrom<AnyId> for uuid::Uuid {
        type Error = Error;

        fn try_from(id: AnyId) -> Result<uuid::Uuid, Error> {
            match id {
                AnyId::U128(raw) => Ok(uuid::Uuid::from_u128(raw)),
                AnyId::U64(_) => Err(Error::InvalidId {
                    layout: NAME.to_owned(),
                    reason: "a 64-bit id is not a UUID",
                }),
            }
        }
    }
}

/// A lock-free, sans-I/O generator of [`Uuid7`]s for one generator ID.
///
/// It keeps the last issued (millisecond, counter) pair in one atomic word and moves it
/// strictly up, like every time-based generator of the crate, so:
///
/// - its IDs are unique and strictly increase (the pair sits above the generator ID and the
///   random bits), whatever the clock does;
/// - a millisecond holds `2^counter_bits` IDs; then [`next`](Self::next) answers
///   [`Next::Wait`] until the next millisecond (or borrows future ones up to `borrow_ms`);
/// - a clock up to `max_backward_ms` behind is absorbed by continuing from the last
///   millisecond; further behind is [`Error::ClockBackward`];
/// - `config.start_above_ms` (a durable high-water mark) makes the first ID's millisecond lie
///   strictly after the mark, and [`set_ceiling_ms`](Self::set_ceiling_ms) stops it past the
///   mark it may issue up to: strictly increasing across restarts, as for the 64-bit layouts.
///
/// The random bits come from a ChaCha8 stream per thread, keyed from the OS CSPRNG
/// (`getrandom`) and re-keyed every 64 KiB.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Next, Uuid7};
///
/// let generator = Uuid7::generator(1, &GeneratorConfig::default())?;
/// let t = 1_700_000_000_000;
/// let a = generator.next(t)?.ready().unwrap();
/// let b = generator.next(t)?.ready().unwrap();
/// assert!(b > a);
/// assert_eq!(b.into_parts().counter, 1);
/// let batch = generator.next_batch(t, 5_000)?.ready().unwrap();
/// assert_eq!(batch.len(), 4_094); // the rest of the millisecond
/// assert_eq!(generator.next(t)?, Next::Wait { until_ms: t + 1 });
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug)]
pub struct Uuid7Generator {
    seq: Sequencer,
    split: Uuid7Split,
    packing: Packing,
}

impl Uuid7Generator {
    fn new(split: Uuid7Split, generator: u64, config: &GeneratorConfig) -> Result<Self, Error> {
        split.check()?;
        config.check()?;
        if generator >= split.generator_count() {
            return Err(Error::out_of_range(
                "generator",
                generator,
                0,
                split.generator_count() - 1,
            ));
        }
        let s = split.sub_ms_bits;
        // The sequencer counts ticks of 2^-s ms from the Unix epoch.
        let max_tick = (1u64 << (MS_BITS + s)) - 1;
        let timing = Timing {
            epoch_ms: 0,
            tick_ms: 1,
            max_tick,
            backward_ticks: config.max_backward_ms << s,
            borrow_ticks: config.borrow_ms << s,
        };
        let start_after = match config.start_above_ms {
            Some(mark) => {
                if mark >= Uuid7::MAX_UNIX_MS {
                    return Err(Error::TimeExhausted { last_ms: Uuid7::MAX_UNIX_MS });
                }
                // The last tick of the mark's millisecond.
                Some(((mark + 1) << s) - 1)
            }
            None => None,
        };
        let seq = Sequencer::new(split.counter_bits, 1 << split.counter_bits, timing, start_after);
        Ok(Uuid7Generator { seq, split, packing: Packing::new(&split, generator) })
    }

    /// The split this generator writes.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7, Uuid7Split};
    ///
    /// assert_eq!(Uuid7::generator(0, &GeneratorConfig::default())?.split(), Uuid7Split::default());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn split(&self) -> Uuid7Split {
        self.split
    }

    /// The next UUIDv7 at `now_ms` (Unix milliseconds); a sub-millisecond field is written 0.
    ///
    /// # Errors
    ///
    /// - [`Error::ClockBackward`]: `now_ms` is further behind the last issued ID than allowed;
    /// - [`Error::WindowExhausted`]: the next ID would lie above the ceiling;
    /// - [`Error::TimeExhausted`]: past the year 10889;
    /// - [`Error::RandomUnavailable`]: the OS refused random bytes (the pair is then skipped).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, Uuid7};
    ///
    /// let generator = Uuid7::generator(0, &GeneratorConfig::default())?;
    /// let t = 1_700_000_000_000;
    /// generator.next(t)?;
    /// assert!(generator.next(t - 1_000)?.ready().is_some()); // absorbed
    /// assert!(matches!(generator.next(t - 5_000), Err(Error::ClockBackward { behind_ms: 5_000, .. })));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    #[inline]
    pub fn next(&self, now_ms: u64) -> Result<Next<Uuid7>, Error> {
        let s = self.split.sub_ms_bits;
        if now_ms > Uuid7::MAX_UNIX_MS {
            return Err(Error::TimeExhausted { last_ms: Uuid7::MAX_UNIX_MS });
        }
        self.next_tick(now_ms << s)
    }

    /// The next UUIDv7 at `now_us` (Unix microseconds): the sub-millisecond field (if the
    /// split has one) takes the fraction of the millisecond (RFC 9562 §6.2 method 3).
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7, Uuid7Split};
    ///
    /// let split = Uuid7Split { sub_ms_bits: 2, counter_bits: 10, generator_bits: 10 };
    /// let generator = Uuid7::generator_in(&split, 0, &GeneratorConfig::default())?;
    /// let id = generator.next_us(1_700_000_000_000_750)?.ready().unwrap();
    /// assert_eq!(id.into_parts_in(&split).sub_ms, 3); // 0.75 ms in quarters
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_us(&self, now_us: u64) -> Result<Next<Uuid7>, Error> {
        let s = self.split.sub_ms_bits;
        let ms = now_us / 1000;
        if ms > Uuid7::MAX_UNIX_MS {
            return Err(Error::TimeExhausted { last_ms: Uuid7::MAX_UNIX_MS });
        }
        let fraction = ((now_us % 1000) << s) / 1000;
        self.next_tick(ms << s | fraction)
    }

    #[inline(always)]
    fn next_tick(&self, tick: u64) -> Result<Next<Uuid7>, Error> {
        // The two common cases (room in the tick, a new tick) inline, the rest out of line; the
        // default split on constants (its shifts and masks fold), any other on the generator's
        // precomputed ones.
        if self.split == DEFAULT_SPLIT {
            let bits = DEFAULT_SPLIT.counter_bits;
            if let Some(pair) = self.seq.try_next_tick(tick, bits, 1 << bits) {
                let packing =
                    Packing { node: self.packing.node, ..Packing::new(&DEFAULT_SPLIT, 0) };
                return Ok(Next::Ready(packing.pack(pair, random_u64()?)));
            }
        } else {
            let bits = self.split.counter_bits;
            if let Some(pair) = self.seq.try_next_tick(tick, bits, 1 << bits) {
                return Ok(Next::Ready(self.packing.pack(pair, random_u64()?)));
            }
        }
        self.next_tick_in_full(tick)
    }

    /// Every case of [`next_tick`](Self::next_tick).
    #[inline(never)]
    fn next_tick_in_full(&self, tick: u64) -> Result<Next<Uuid7>, Error> {
        let next = self.seq.next(tick).map_err(|e| self.in_ms(e))?;
        Ok(match next {
            Next::Ready(pair) => Next::Ready(self.pack(pair, random_u64()?)),
            Next::Wait { until_ms } => Next::Wait { until_ms: self.ms_of_tick_ceil(until_ms) },
        })
    }

    /// Reserves up to `n` consecutive UUIDv7s in one atomic step: as many as the allowed
    /// milliseconds still hold (at least one). Their random bits are drawn as the batch is
    /// read.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next), plus [`Error::EmptyBatch`] for `n == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7};
    ///
    /// let generator = Uuid7::generator(0, &GeneratorConfig::default())?;
    /// let ids: Vec<Uuid7> = generator.next_batch(1_700_000_000_000, 100)?.ready().unwrap().collect();
    /// assert_eq!(ids.len(), 100);
    /// assert!(ids.windows(2).all(|w| w[0] < w[1]));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<Uuid7Batch>, Error> {
        if now_ms > Uuid7::MAX_UNIX_MS {
            return Err(Error::TimeExhausted { last_ms: Uuid7::MAX_UNIX_MS });
        }
        let tick = now_ms << self.split.sub_ms_bits;
        let reserved = self.seq.reserve(tick, n).map_err(|e| self.in_ms(e))?;
        Ok(match reserved {
            Next::Ready((pair, remaining)) => {
                Next::Ready(Uuid7Batch { pair, remaining, packing: self.packing })
            }
            Next::Wait { until_ms } => Next::Wait { until_ms: self.ms_of_tick_ceil(until_ms) },
        })
    }

    /// The Unix ms of the last issued millisecond (or of the start point, before any ID).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{GeneratorConfig, Uuid7};
    ///
    /// let generator = Uuid7::generator(0, &GeneratorConfig::default())?;
    /// generator.next(1_700_000_000_420)?;
    /// assert_eq!(generator.last_ms(), 1_700_000_000_420);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn last_ms(&self) -> u64 {
        self.seq.last_tick() >> self.split.sub_ms_bits
    }

    /// Allows IDs only in milliseconds at or before `mark_ms`: the server sets it to its
    /// durable high-water mark and raises it as it extends the mark; lowering is allowed.
    ///
    /// # Errors
    ///
    /// None today; the `Result` mirrors [`Generator::set_ceiling_ms`](crate::Generator::set_ceiling_ms).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Error, GeneratorConfig, Uuid7};
    ///
    /// let generator = Uuid7::generator(0, &GeneratorConfig::default())?;
    /// let t = 1_700_000_000_000;
    /// generator.set_ceiling_ms(t)?;
    /// assert!(generator.next(t)?.ready().is_some());
    /// assert!(matches!(generator.next(t + 1), Err(Error::WindowExhausted { ceiling_ms }) if ceiling_ms == t));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        let s = self.split.sub_ms_bits;
        let tick = mark_ms.min(Uuid7::MAX_UNIX_MS).saturating_add(1) << s;
        self.seq.set_ceiling(tick - 1);
        Ok(())
    }

    /// The UUID of a pair and 64 random bits (masked to the random field).
    #[inline(always)]
    fn pack(&self, pair: u64, random: u64) -> Uuid7 {
        self.packing.pack(pair, random)
    }

    /// The first whole millisecond at or after the start of tick `tick`.
    fn ms_of_tick_ceil(&self, tick: u64) -> u64 {
        let s = self.split.sub_ms_bits;
        tick.div_ceil(1 << s)
    }

    /// An error of the sequencer, whose "ms" are ticks of `2^-sub_ms_bits` ms, in ms.
    #[cold]
    fn in_ms(&self, e: Error) -> Error {
        let s = self.split.sub_ms_bits;
        match e {
            Error::ClockBackward { behind_ms, tolerance_ms } => {
                Error::ClockBackward { behind_ms: behind_ms >> s, tolerance_ms: tolerance_ms >> s }
            }
            Error::TimeExhausted { last_ms } => Error::TimeExhausted { last_ms: last_ms >> s },
            Error::WindowExhausted { ceiling_ms } => {
                Error::WindowExhausted { ceiling_ms: ceiling_ms >> s }
            }
            e => e,
        }
    }
}

/// How a generator turns a state-word pair (tick and counter) and 64 random bits into a
/// UUID: its split's shifts and masks, worked out once when the generator is made rather than
/// for every ID.
#[derive(Debug, Clone, Copy)]
struct Packing {
    /// Version, variant and generator ID in place; time, counter and random bits 0.
    node: u128,
    /// Bits of a pair below its millisecond (sub-millisecond and counter), and their mask.
    low_bits: u32,
    low_mask: u64,
    /// Where those bits start in the 74-bit payload.
    low_shift: u32,
    /// The random field's mask.
    random_mask: u64,
}

impl Packing {
    #[inline(always)]
    fn new(split: &Uuid7Split, generator: u64) -> Packing {
        Packing {
            node: VERSION_BITS | VARIANT_BITS | place(u128::from(generator) << split.random_bits()),
            low_bits: split.low_bits(),
            low_mask: low_mask(split.low_bits()),
            low_shift: split.low_shift(),
            random_mask: low_mask(split.random_bits()),
        }
    }

    /// The UUID of a pair, with the fixed bits and 64 random bits (masked to the field).
    #[inline(always)]
    fn pack(&self, pair: u64, random: u64) -> Uuid7 {
        let ms = u128::from(pair >> self.low_bits);
        let below = u128::from(pair & self.low_mask) << self.low_shift;
        let random = u128::from(random & self.random_mask);
        Uuid7(ms << MS_SHIFT | self.node | place(below | random))
    }
}

/// A run of UUIDv7s reserved by [`Uuid7Generator::next_batch`], in increasing order. Each ID's
/// random bits are drawn when it is read; should the OS refuse random bytes then (it does not
/// once booted), the rest of the batch has random bits 0: still unique and ordered.
///
/// # Example
///
/// ```
/// use idmint_core::{GeneratorConfig, Uuid7};
///
/// let generator = Uuid7::generator(0, &GeneratorConfig::default())?;
/// let mut batch = generator.next_batch(1_700_000_000_000, 3)?.ready().unwrap();
/// assert_eq!(batch.len(), 3);
/// assert_eq!(batch.next().unwrap().into_parts().counter, 0);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Uuid7Batch {
    /// The next pair; the pair after it is `pair + 1` (a tick holds every counter value).
    pair: u64,
    remaining: u64,
    packing: Packing,
}

impl Iterator for Uuid7Batch {
    type Item = Uuid7;

    #[inline]
    fn next(&mut self) -> Option<Uuid7> {
        if self.remaining == 0 {
            return None;
        }
        let id = self.packing.pack(self.pair, random_u64().unwrap_or(0));
        self.remaining -= 1;
        self.pair = self.pair.wrapping_add(1);
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

impl ExactSizeIterator for Uuid7Batch {}

impl FusedIterator for Uuid7Batch {}

/// The layout's name.
const NAME: &str = "uuid7";

/// The `uuid7` layout with its split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Uuid7Layout {
    split: Uuid7Split,
}

impl Uuid7Layout {
    /// The fields, most significant first, with their widths and roles.
    fn field_list(&self) -> Vec<(&'static str, u32, FieldRole)> {
        let s = &self.split;
        let mut fields = vec![("unix_ms", MS_BITS, FieldRole::Time)];
        if s.sub_ms_bits > 0 {
            fields.push(("sub_ms", s.sub_ms_bits, FieldRole::Time));
        }
        fields.push(("counter", s.counter_bits, FieldRole::Sequence));
        if s.generator_bits > 0 {
            fields.push(("generator", s.generator_bits, FieldRole::Node));
        }
        if s.random_bits() > 0 {
            fields.push(("random", s.random_bits(), FieldRole::Other));
        }
        fields
    }
}

impl LayoutKind for Uuid7Layout {
    fn name(&self) -> &str {
        NAME
    }

    fn id_bits(&self) -> u32 {
        128
    }

    fn default_format(&self) -> Format {
        Format::Uuid
    }

    fn epoch_ms(&self) -> Option<u64> {
        Some(0)
    }

    fn fields(&self) -> Vec<FieldInfo> {
        self.field_list()
            .into_iter()
            .map(|(name, bits, role)| FieldInfo::number(name, bits, 0, low_mask(bits), role))
            .collect()
    }

    fn segments(&self) -> Option<Vec<Segment>> {
        let mut out = vec![Segment::new("unix_ms", 127, 80), Segment::new("version (7)", 79, 76)];
        // Payload bits 73..=62 are ID bits 75..=64; payload bits 61..=0 are ID bits 61..=0.
        let to_id = |p: u32| if p >= RAND_B_BITS { p + 2 } else { p };
        let mut top = PAYLOAD_BITS;
        for (name, bits, _) in self.field_list().into_iter().skip(1) {
            let (msb, lsb) = (top - 1, top - bits);
            top -= bits;
            if msb >= RAND_B_BITS && lsb < RAND_B_BITS {
                out.push(Segment::new(format!("{name} (high)"), to_id(msb), to_id(RAND_B_BITS)));
                out.push(Segment::new("variant (10)", 63, 62));
                out.push(Segment::new(format!("{name} (low)"), RAND_B_BITS - 1, lsb));
            } else {
                out.push(Segment::new(name, to_id(msb), to_id(lsb)));
                if lsb == RAND_B_BITS {
                    out.push(Segment::new("variant (10)", 63, 62));
                }
            }
        }
        Some(out)
    }

    fn capacity(&self) -> Capacity {
        let per_ms = self.split.ids_per_ms();
        let end_ms = 1u64 << MS_BITS;
        Capacity {
            tick_ms: 1,
            start_ms: Some(0),
            end_ms: Some(end_ms),
            wrap_ms: None,
            start: Some(crate::format_rfc3339_ms(0)),
            end: Some(crate::format_rfc3339_ms(end_ms)),
            ids_per_tick: per_ms,
            ids_per_second_per_generator: per_ms * 1000,
            generators: self.generator_count(),
        }
    }

    fn encode(&self, values: &mut FieldReader) -> Result<AnyId, Error> {
        let mut parts = Uuid7Parts::default();
        for (name, _, _) in self.field_list() {
            let value = values.number(name)?;
            match name {
                "unix_ms" => parts.unix_ms = value,
                "sub_ms" => parts.sub_ms = value,
                "counter" => parts.counter = value,
                "generator" => parts.generator = value,
                _ => parts.random = value,
            }
        }
        Ok(AnyId::from(Uuid7::from_parts_in(&self.split, parts)?))
    }

    fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let p = Uuid7::try_from(id)?.into_parts_in(&self.split);
        Ok(self
            .field_list()
            .into_iter()
            .map(|(name, _, _)| {
                num(
                    name,
                    match name {
                        "unix_ms" => p.unix_ms,
                        "sub_ms" => p.sub_ms,
                        "counter" => p.counter,
                        "generator" => p.generator,
                        _ => p.random,
                    },
                )
            })
            .collect())
    }

    fn time_ms(&self, id: AnyId, _now_ms: u64) -> Result<Option<u64>, Error> {
        Ok(Some(Uuid7::try_from(id)?.unix_ms()))
    }

    fn fingerprint(&self) -> String {
        let s = &self.split;
        format!(
            "uuid7/128b/epoch=0/tick=1/sub_ms={}/counter={}/generator={}",
            s.sub_ms_bits, s.counter_bits, s.generator_bits
        )
    }

    fn generator_count(&self) -> u64 {
        self.split.generator_count()
    }

    fn identity(&self, generator_id: u64) -> Vec<(String, FieldValue)> {
        if self.split.generator_bits == 0 {
            return Vec::new();
        }
        vec![num("generator", generator_id)]
    }

    fn generator_for(
        &self,
        generator_id: Option<u64>,
        mut values: FieldReader,
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let generator = values.node("generator", generator_id, 0)?;
        Ok(AnyGenerator::other(Uuid7Generator::new(self.split, generator, config)?))
    }

    fn order(&self) -> Order {
        Order::Increasing
    }

    fn issued_by(&self) -> IssuedBy {
        IssuedBy::Clock
    }

    fn same(&self, other: &dyn LayoutKind) -> bool {
        same_as(self, other)
    }
}

impl OtherGenerator for Uuid7Generator {
    fn next(&self, now_ms: u64) -> Result<Next<AnyId>, Error> {
        Ok(Uuid7Generator::next(self, now_ms)?.map(AnyId::from))
    }

    fn next_batch(&self, now_ms: u64, n: u64) -> Result<Next<AnyBatch>, Error> {
        let batch = Uuid7Generator::next_batch(self, now_ms, n)?;
        Ok(batch.map(|b| AnyBatch::other(b.map(AnyId::from as fn(Uuid7) -> AnyId))))
    }

    fn last_ms(&self) -> Option<u64> {
        Some(Uuid7Generator::last_ms(self))
    }

    fn set_ceiling_ms(&self, mark_ms: u64) -> Result<(), Error> {
        Uuid7Generator::set_ceiling_ms(self, mark_ms)
    }
}

/// The `uuid7` built-in layout (default split).
pub(crate) const BUILTIN: Builtin = Builtin {
    name: NAME,
    about: "UUIDv7 (RFC 9562, 128-bit): 48-bit Unix ms, 12-bit counter, 16-bit generator ID, 46 random bits; split configurable",
    make: || {
        Arc::new(Uuid7Layout {
            split: Uuid7Split { sub_ms_bits: 0, counter_bits: 12, generator_bits: 16 },
        })
    },
};

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, sync::Mutex};

    use proptest::prelude::*;

    use super::*;
    use crate::Layout;

    const T: u64 = 1_700_000_000_000;

    fn ready(next: Result<Next<Uuid7>, Error>) -> Uuid7 {
        match next {
            Ok(Next::Ready(id)) => id,
            other => panic!("expected an ID, got {other:?}"),
        }
    }

    /// One field set to all ones under the default split, and the bits of the value it must
    /// light (the bit table on `Uuid7`), besides version and variant.
    struct BitCase {
        field: &'static str,
        parts: Uuid7Parts,
        msb: u32,
        lsb: u32,
    }

    fn check(case: &BitCase) {
        let id = Uuid7::from_parts(case.parts).unwrap_or_else(|e| panic!("{}: {e}", case.field));
        let width = case.msb - case.lsb + 1;
        let expected = ((1u128 << width) - 1) << case.lsb;
        assert_eq!(
            id.as_u128() & !(VERSION_MASK | VARIANT_MASK),
            expected,
            "{}: bits {}..={}",
            case.field,
            case.msb,
            case.lsb
        );
        assert_eq!(id.as_u128() & (VERSION_MASK | VARIANT_MASK), VERSION_BITS | VARIANT_BITS);
        assert_eq!(id.into_parts(), case.parts, "{}: round trip", case.field);
    }

    #[test]
    fn the_bit_table_of_the_default_split() {
        let zero = Uuid7Parts::default();
        let cases = [
            BitCase {
                field: "unix_ms",
                parts: Uuid7Parts { unix_ms: (1 << 48) - 1, ..zero },
                msb: 127,
                lsb: 80,
            },
            BitCase {
                field: "counter",
                parts: Uuid7Parts { counter: 4_095, ..zero },
                msb: 75,
                lsb: 64,
            },
            BitCase {
                field: "generator",
                parts: Uuid7Parts { generator: 65_535, ..zero },
                msb: 61,
                lsb: 46,
            },
            BitCase {
                field: "random",
                parts: Uuid7Parts { random: (1 << 46) - 1, ..zero },
                msb: 45,
                lsb: 0,
            },
        ];
        for case in &cases {
            check(case);
        }
        let segments = Layout::builtin("uuid7").unwrap().segments().unwrap();
        let table: Vec<_> = segments.iter().map(|s| (s.label.as_str(), s.msb, s.lsb)).collect();
        assert_eq!(
            table,
            [
                ("unix_ms", 127, 80),
                ("version (7)", 79, 76),
                ("counter", 75, 64),
                ("variant (10)", 63, 62),
                ("generator", 61, 46),
                ("random", 45, 0)
            ]
        );
    }

    #[test]
    fn a_field_across_the_variant_is_drawn_in_two_parts() {
        let split = Uuid7Split { sub_ms_bits: 4, counter_bits: 10, generator_bits: 10 };
        let segments = split.layout().unwrap().segments().unwrap();
        let table: Vec<_> = segments.iter().map(|s| (s.label.as_str(), s.msb, s.lsb)).collect();
        assert_eq!(
            table,
            [
                ("unix_ms", 127, 80),
                ("version (7)", 79, 76),
                ("sub_ms", 75, 72),
                ("counter (high)", 71, 64),
                ("variant (10)", 63, 62),
                ("counter (low)", 61, 60),
                ("generator", 59, 50),
                ("random", 49, 0)
            ]
        );
        assert_eq!(segments.iter().map(Segment::width).sum::<u32>(), 128);
    }

    #[test]
    fn bad_splits_and_values_are_refused_with_the_reason() {
        let d = Uuid7Split::default();
        let bad = [
            (Uuid7Split { counter_bits: 0, ..d }, "counter_bits must be at least 1"),
            (Uuid7Split { counter_bits: 17, ..d }, "at most 16"),
            (Uuid7Split { sub_ms_bits: 8, counter_bits: 9, ..d }, "at most 16"),
            (Uuid7Split { generator_bits: 33, ..d }, "generator_bits must be 0..=32"),
            (Uuid7Split { generator_bits: 0, counter_bits: 4, sub_ms_bits: 0 }, "at most 64"),
        ];
        for (split, reason) in bad {
            let err = split.check().unwrap_err().to_string();
            assert!(err.contains(reason), "{split:?}: {err}");
        }
        let err = Uuid7::from_parts(Uuid7Parts { generator: 1 << 16, ..Default::default() });
        assert_eq!(err.unwrap_err(), Error::out_of_range("generator", 1 << 16, 0, 65_535));
        assert!("018bcfe5-6800-7005-c000-c00000000000".parse::<Uuid7>().is_err(), "variant 11");
        let err = "018bcfe5-6800-4005-8000-c00000000000".parse::<Uuid7>().unwrap_err();
        assert_eq!(err.to_string(), "invalid uuid7 id: the version nibble (bits 79..=76) is not 7");
    }

    #[test]
    fn a_millisecond_holds_4096_ids_then_waits() {
        let generator = Uuid7::generator(9, &GeneratorConfig::default()).unwrap();
        let mut last = None;
        for i in 0..4_096 {
            let id = ready(generator.next(T));
            let parts = id.into_parts();
            assert_eq!((parts.unix_ms, parts.counter, parts.generator), (T, i, 9));
            assert!(last < Some(id));
            last = Some(id);
        }
        assert_eq!(generator.next(T).unwrap(), Next::Wait { until_ms: T + 1 });
        let next = ready(generator.next(T + 1));
        assert_eq!((next.unix_ms(), next.into_parts().counter), (T + 1, 0));
    }

    #[test]
    fn the_clock_going_back_is_absorbed_or_refused() {
        let generator = Uuid7::generator(0, &GeneratorConfig::default()).unwrap();
        let a = ready(generator.next(T));
        let b = ready(generator.next(T - 1_000));
        assert!(b > a);
        assert_eq!(b.unix_ms(), T);
        let err = generator.next(T - 1_001).unwrap_err();
        assert_eq!(err, Error::ClockBackward { behind_ms: 1_001, tolerance_ms: 1_000 });
    }

    /// A restart with the clock behind the last ID: the durable mark (`start_above_ms`)
    /// keeps the new generator's IDs above the old one's. Without the mark it goes below:
    /// the negative control.
    #[test]
    fn a_restart_above_the_durable_mark_continues_upwards() {
        let before = Uuid7::generator(3, &GeneratorConfig::default()).unwrap();
        let last = (0..10).map(|_| ready(before.next(T))).last().unwrap();
        let mark = before.last_ms();
        let config = GeneratorConfig { start_above_ms: Some(mark), ..GeneratorConfig::default() };
        let after = Uuid7::generator(3, &config).unwrap();
        // The clock stepped back 500 ms across the restart: nothing before the mark's next
        // millisecond, then IDs above the old ones.
        assert_eq!(after.next(T - 500).unwrap(), Next::Wait { until_ms: T + 1 });
        let first = ready(after.next(T + 1));
        assert!(first > last, "{first} must be above {last}");
        assert_eq!(first.unix_ms(), T + 1);
        let unguarded = Uuid7::generator(3, &GeneratorConfig::default()).unwrap();
        assert!(ready(unguarded.next(T - 500)) < last, "negative control: no mark, lower ID");
    }

    #[test]
    fn the_ceiling_stops_the_generator_at_the_mark() {
        let generator = Uuid7::generator(0, &GeneratorConfig::default()).unwrap();
        generator.set_ceiling_ms(T).unwrap();
        assert_eq!(ready(generator.next(T)).unix_ms(), T);
        assert_eq!(generator.next(T + 1).unwrap_err(), Error::WindowExhausted { ceiling_ms: T });
        generator.set_ceiling_ms(T + 10).unwrap();
        assert_eq!(ready(generator.next(T + 1)).unix_ms(), T + 1);
    }

    #[test]
    fn batches_continue_the_sequence_and_stop_at_the_millisecond() {
        let generator = Uuid7::generator(5, &GeneratorConfig::default()).unwrap();
        let first = ready(generator.next(T));
        let batch: Vec<_> = generator.next_batch(T, 10_000).unwrap().ready().unwrap().collect();
        assert_eq!(batch.len(), 4_095);
        assert!(batch[0] > first && batch.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(batch.last().unwrap().into_parts().counter, 4_095);
        assert_eq!(generator.next_batch(T, 1).unwrap().ready().map(|b| b.len()), None);
        assert_eq!(generator.next_batch(T, 0).unwrap_err(), Error::EmptyBatch);
    }

    #[test]
    fn sub_millisecond_ticks_order_and_wait_in_whole_milliseconds() {
        let split = Uuid7Split { sub_ms_bits: 4, counter_bits: 2, generator_bits: 10 };
        let generator = Uuid7::generator_in(&split, 1, &GeneratorConfig::default()).unwrap();
        let us = T * 1000;
        let ids: Vec<_> = (0..4).map(|_| ready(generator.next_us(us + 500))).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            ids[3].into_parts_in(&split),
            Uuid7Parts {
                unix_ms: T,
                sub_ms: 8,
                counter: 3,
                generator: 1,
                random: ids[3].into_parts_in(&split).random
            }
        );
        // The 1/16 ms tick is used up: the next ID takes the next tick, which the clock has
        // not reached, so wait (rounded up to a whole millisecond).
        assert_eq!(generator.next_us(us + 500).unwrap(), Next::Wait { until_ms: T + 1 });
        // A later sub-millisecond reading goes on at once.
        assert_eq!(ready(generator.next_us(us + 999)).into_parts_in(&split).sub_ms, 15);
        let err = generator.next_us(us - 2_000_000).unwrap_err();
        assert!(
            matches!(err, Error::ClockBackward { behind_ms: 2_000, tolerance_ms: 1_000 }),
            "{err:?}"
        );
    }

    /// Two generators of a fleet at the same instant: their IDs never meet, because the
    /// generator field differs. The control: with one generator ID shared by both (the claim
    /// removed), every (time, counter, generator) triple repeats, and only the 46 random bits
    /// keep the IDs apart, by chance.
    #[test]
    fn a_fleet_is_unique_by_the_generator_id_not_by_chance() {
        let stable = |id: Uuid7| id.as_u128() >> 46;
        let ids = |generator| {
            let g = Uuid7::generator(generator, &GeneratorConfig::default()).unwrap();
            (0..4_096).map(|_| ready(g.next(T))).collect::<Vec<_>>()
        };
        let (a, b) = (ids(1), ids(2));
        let a_stable: HashSet<u128> = a.iter().copied().map(stable).collect();
        assert!(b.iter().all(|&id| !a_stable.contains(&stable(id))), "distinct generators");
        let shared = ids(1);
        assert!(shared.iter().all(|&id| a_stable.contains(&stable(id))), "control: all repeat");
    }

    #[test]
    fn random_bits_differ_between_ids() {
        let generator = Uuid7::generator(0, &GeneratorConfig::default()).unwrap();
        let randoms: HashSet<u64> =
            (0..2_000).map(|i| ready(generator.next(T + i / 4_096)).into_parts().random).collect();
        // 46 random bits: a repeat among 2,000 has probability below 2^-24.
        assert_eq!(randoms.len(), 2_000);
    }

    #[test]
    fn the_layout_decodes_encodes_and_explains() {
        let layout = Layout::builtin("uuid7").unwrap();
        assert_eq!(
            (layout.id_bits(), layout.default_format(), layout.generator_count()),
            (128, Format::Uuid, 65_536)
        );
        let cap = layout.capacity();
        assert_eq!(
            (cap.ids_per_tick, cap.ids_per_second_per_generator, cap.generators),
            (4_096, 4_096_000, 65_536)
        );
        assert_eq!(cap.end.as_deref(), Some("10889-08-02T05:31:50.656Z"));
        let id = layout.parse("01890a5d-ac96-774b-bcce-b302099a8057", Format::Uuid).unwrap();
        let fields = layout.decode(id).unwrap();
        let names: Vec<_> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["unix_ms", "counter", "generator", "random"]);
        assert_eq!(layout.encode(&fields).unwrap(), id);
        assert_eq!(layout.time_ms(id, 0).unwrap(), Some(0x01890a5dac96));
        assert!(layout.parse("01890a5d-ac96-474b-bcce-b302099a8057", Format::Uuid).is_err());
        assert!(layout.decode(AnyId::U64(1)).is_err());
        let generator = layout.generator_for(77, &[], &GeneratorConfig::default()).unwrap();
        let AnyId::U128(raw) = generator.next(T).unwrap().ready().unwrap() else {
            panic!("a 128-bit ID")
        };
        assert_eq!(Uuid7::from_u128(raw).unwrap().into_parts().generator, 77);
        assert!(layout.generator_for(65_536, &[], &GeneratorConfig::default()).is_err());
        let batch: Vec<_> = generator.next_batch(T, 3).unwrap().ready().unwrap().collect();
        assert_eq!(batch.len(), 3);
        assert_ne!(
            layout.fingerprint(),
            Uuid7Split { generator_bits: 10, ..Uuid7Split::default() }
                .layout()
                .unwrap()
                .fingerprint()
        );
    }

    #[test]
    fn threads_sharing_a_generator_get_distinct_increasing_ids() {
        let generator = Uuid7::generator(2, &GeneratorConfig::default()).unwrap();
        let seen = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    let mut now = T;
                    while mine.len() < 5_000 {
                        match generator.next(now).unwrap() {
                            Next::Ready(id) => mine.push(id),
                            Next::Wait { until_ms } => now = until_ms,
                        }
                    }
                    assert!(mine.windows(2).all(|w| w[0] < w[1]));
                    seen.lock().unwrap().extend(mine);
                });
            }
        });
        let all = seen.into_inner().unwrap();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), 20_000);
    }

    proptest! {
        #[test]
        fn parts_round_trip_under_any_split(
            sub in 0u32..=12, counter in 1u32..=16, generator in 0u32..=32,
            unix_ms in 0u64..1 << 48, values in any::<[u64; 4]>(),
        ) {
            let split = Uuid7Split { sub_ms_bits: sub.min(16 - counter), counter_bits: counter, generator_bits: generator };
            prop_assume!(split.check().is_ok());
            let parts = Uuid7Parts {
                unix_ms,
                sub_ms: values[0] & low_mask(split.sub_ms_bits),
                counter: values[1] & low_mask(split.counter_bits),
                generator: values[2] & low_mask(split.generator_bits),
                random: values[3] & low_mask(split.random_bits()),
            };
            let id = Uuid7::from_parts_in(&split, parts).unwrap();
            prop_assert_eq!(id.into_parts_in(&split), parts);
            prop_assert_eq!(id.to_string().parse::<Uuid7>().unwrap(), id);
        }

        #[test]
        fn generator_is_strictly_increasing_under_any_clock(
            steps in proptest::collection::vec((0u64..3_000, any::<bool>()), 1..200),
        ) {
            let generator = Uuid7::generator(1, &GeneratorConfig::default()).unwrap();
            let mut last: Option<Uuid7> = None;
            for (offset, back) in steps {
                let now = if back { T - offset } else { T + offset };
                if let Ok(Next::Ready(id)) = generator.next(now) {
                    prop_assert!(last < Some(id));
                    last = Some(id);
                }
            }
        }
    }
}
