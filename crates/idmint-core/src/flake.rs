//! go-flakeid (T-PWK): 42 bits of milliseconds since a configurable epoch, a 5-bit datacenter,
//! a 5-bit worker and a 12-bit counter, using all 64 bits.

use crate::{
    bits::{BitField, BitLayout},
    error::Error,
    field::FieldRole,
    format::Format,
    generator::{Generator, GeneratorConfig},
    id_impl::u64_id,
    kind::Builtin,
};

/// A go-flakeid ID.
///
/// | bits | field | range | source |
/// | --- | --- | --- | --- |
/// | 63..=22 | `timestamp`: ms since the epoch (go-flakeid's `Epoc`, default 0 = Unix) | 0..=2^42−1 | clock |
/// | 21..=17 | `datacenter` | 0..=31 | configuration |
/// | 16..=12 | `worker` | 0..=31 | configuration |
/// | 11..=0 | `counter` | 0..=4095 | generator |
///
/// **Bit 63 is used.** go-flakeid returns a `uint64` with no sign bit, so for upstream
/// compatibility this layout uses all 64 bits: with the default epoch, bit 63 is set on every
/// ID from 2039-09-07T15:47:35.552Z on, and such IDs are negative as an `i64`. Use a later
/// epoch (for example [`EPOCH_2000_MS`](Self::EPOCH_2000_MS)) to push that date out, or
/// another layout where IDs must be positive `i64` values.
///
/// Where go-flakeid silently masks a datacenter or worker above 31 (33 acts as 1), this type
/// refuses it. The ID 0 is a valid go-flakeid value (all fields 0 at the epoch instant), so it
/// is accepted when decoding; a generator never issues it.
///
/// # Example
///
/// ```
/// use idmint_core::{Flake, FlakeParts};
///
/// let id: Flake = "5828128208445124609".parse()?;
/// assert_eq!(
///     id.into_parts(),
///     FlakeParts { timestamp: 1_389_534_046_279, datacenter: 7, worker: 3, counter: 1 }
/// );
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Flake(u64);

/// The fields of a [`Flake`], as stored (the timestamp is ms since the generator's epoch).
///
/// # Example
///
/// ```
/// use idmint_core::{Flake, FlakeParts};
///
/// let parts = FlakeParts { timestamp: 3, datacenter: 1, worker: 2, counter: 4095 };
/// assert_eq!(Flake::from_parts(parts)?.into_parts(), parts);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct FlakeParts {
    /// Milliseconds since the epoch.
    pub timestamp: u64,
    /// The datacenter, 0..=31.
    pub datacenter: u64,
    /// The worker, 0..=31.
    pub worker: u64,
    /// The counter within the millisecond, 0..=4095.
    pub counter: u64,
}

const COUNTER_SHIFT: u32 = 0;
const WORKER_SHIFT: u32 = COUNTER_SHIFT + Flake::COUNTER_BITS;
const DATACENTER_SHIFT: u32 = WORKER_SHIFT + Flake::WORKER_BITS;
const TIMESTAMP_SHIFT: u32 = DATACENTER_SHIFT + Flake::DATACENTER_BITS;

const FIELDS: &[BitField] = &[
    BitField::new("timestamp", TIMESTAMP_SHIFT, Flake::TIMESTAMP_BITS, FieldRole::Time),
    BitField::new("datacenter", DATACENTER_SHIFT, Flake::DATACENTER_BITS, FieldRole::Node),
    BitField::new("worker", WORKER_SHIFT, Flake::WORKER_BITS, FieldRole::Node),
    BitField::new("counter", COUNTER_SHIFT, Flake::COUNTER_BITS, FieldRole::Sequence),
];

impl Flake {
    /// go-flakeid's default epoch: the Unix epoch.
    pub const EPOCH_MS: u64 = 0;
    /// go-flakeid's `Epoc1Jan2000`: 2000-01-01T00:00:00Z in Unix ms.
    pub const EPOCH_2000_MS: u64 = 946_684_800_000;
    /// Width of the timestamp field.
    pub const TIMESTAMP_BITS: u32 = 42;
    /// Width of the datacenter field.
    pub const DATACENTER_BITS: u32 = 5;
    /// Width of the worker field.
    pub const WORKER_BITS: u32 = 5;
    /// Width of the counter field.
    pub const COUNTER_BITS: u32 = 12;
    /// The layout as data, with the default epoch; see [`BitLayout::with_epoch`].
    pub const LAYOUT: BitLayout =
        BitLayout::builtin("flake", 64, FIELDS, Self::EPOCH_MS, 1, false).with_unpadded_hex();
    /// The text form of `Display` and `FromStr`.
    pub const DEFAULT_FORMAT: Format = Format::Decimal;
    /// An example ID (from go-flakeid's README), for documentation and tests.
    pub const EXAMPLE: Flake = Flake(5_828_128_208_445_124_609);

    /// Packs fields into an ID.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] for a field that does not fit: a datacenter of 33 is refused,
    /// not masked to 1 as go-flakeid does.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Flake, FlakeParts};
    ///
    /// assert!(Flake::from_parts(FlakeParts { datacenter: 33, ..FlakeParts::default() }).is_err());
    /// ```
    pub fn from_parts(parts: FlakeParts) -> Result<Self, Error> {
        let raw =
            Self::LAYOUT.pack(&[parts.timestamp, parts.datacenter, parts.worker, parts.counter])?;
        Ok(Flake(raw))
    }

    /// The ID's fields.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Flake;
    ///
    /// assert_eq!(Flake::EXAMPLE.into_parts().worker, 3);
    /// ```
    pub fn into_parts(self) -> FlakeParts {
        let raw = self.0;
        FlakeParts {
            timestamp: FIELDS[0].get(raw),
            datacenter: FIELDS[1].get(raw),
            worker: FIELDS[2].get(raw),
            counter: FIELDS[3].get(raw),
        }
    }

    /// Any 64-bit value is a go-flakeid ID; this never fails.
    ///
    /// # Errors
    ///
    /// None; the `Result` matches the other layouts.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Flake;
    ///
    /// assert_eq!(Flake::from_raw(u64::MAX)?.into_parts().counter, 4095);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn from_raw(raw: u64) -> Result<Self, Error> {
        Ok(Flake(raw))
    }

    /// The raw value.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Flake;
    ///
    /// assert_eq!(Flake::EXAMPLE.to_raw(), 5_828_128_208_445_124_609);
    /// ```
    pub const fn to_raw(self) -> u64 {
        self.0
    }

    /// The time the ID was issued in, in Unix ms, for IDs made with `epoch_ms`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Flake;
    ///
    /// assert_eq!(Flake::EXAMPLE.timestamp_ms(Flake::EPOCH_MS), 1_389_534_046_279);
    /// ```
    pub fn timestamp_ms(self, epoch_ms: u64) -> u64 {
        epoch_ms.saturating_add(FIELDS[0].get(self.0))
    }

    /// A lock-free generator for one (datacenter, worker) pair and epoch.
    ///
    /// Unlike go-flakeid, which panics when the clock moves backwards and spins with 1-ms
    /// sleeps on exhaustion, it follows the [`Generator`] rules: small steps are absorbed,
    /// large ones are an error, and waiting is the caller's.
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] if `datacenter` or `worker` is above 31,
    /// [`Error::InvalidConfig`] for a bad configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Flake, GeneratorConfig};
    ///
    /// let generator = Flake::generator(7, 7, Flake::EPOCH_2000_MS, &GeneratorConfig::default())?;
    /// let id = generator.next(Flake::EPOCH_2000_MS + 5)?.ready().unwrap();
    /// assert_eq!(id.into_parts().timestamp, 5);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        datacenter: u64,
        worker: u64,
        epoch_ms: u64,
        config: &GeneratorConfig,
    ) -> Result<Generator<Flake>, Error> {
        let layout = Self::LAYOUT.with_epoch(epoch_ms)?;
        let node = layout.node_bits(&[("datacenter", datacenter), ("worker", worker)])?;
        Generator::from_plan(layout.plan(node)?, config)
    }

    fn from_generated_raw(raw: u64) -> Self {
        Flake(raw)
    }
}

// Its generators differ in shape, so none is compiled ahead.
impl crate::generator::Sealed for Flake {}

u64_id!(Flake);

/// The `flake` built-in layout.
pub(crate) const BUILTIN: Builtin = Builtin {
    name: "flake",
    about: "go-flakeid: 42-bit ms since a chosen epoch (default Unix), 5-bit datacenter, 5-bit worker, 12-bit counter; uses bit 63",
    make: || std::sync::Arc::new(Flake::LAYOUT),
};
