//! Sony's Sonyflake v2: a sign bit, then time, sequence and machine ID fields whose widths and
//! time unit are settings (by default 39 bits of 10 ms since 2025-01-01, an 8-bit sequence and
//! a 16-bit machine ID). A plain bit layout: encoding, decoding and generating are `bits.rs`'s.

use crate::{
    bits::{BitField, BitLayout, FieldConfig, LayoutConfig},
    error::Error,
    field::FieldRole,
    kind::Builtin,
};

/// The settings of a Sonyflake v2 layout, as upstream's `Settings` defines them: a zero (or
/// `None`) setting takes the default, like upstream's zero values.
///
/// | setting | default | allowed |
/// | --- | --- | --- |
/// | `bits_sequence` | 8 | 1..=30 |
/// | `bits_machine_id` | 16 | 1..=30 |
/// | `time_unit_ms` | 10 | at least 1 (whole milliseconds) |
/// | `start_ms` | 2025-01-01T00:00:00Z | any Unix ms |
///
/// The time field takes the rest of 63 bits (`63 − bits_sequence − bits_machine_id`) and must
/// keep at least 32, as upstream requires. Upstream counts time as
/// `floor(now / unit) − floor(start / unit)`, so the layout's epoch is the start rounded down to
/// a whole unit, also when the start is set later (`with_epoch`, the CLI's `--epoch`). A time
/// field whose range runs past 64-bit Unix milliseconds (61 bits of 10 ms, say) is accepted, as
/// upstream accepts it: the clock never gets there. ID 0 (every field 0, which upstream's
/// `Compose` returns) is refused, as idmint refuses 0 in every layout. Fields, most significant first: `time`, `sequence`, `machine` (upstream's
/// `Decompose` names). The machine ID is the generator's identity.
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, FieldValue, Layout, SonyflakeV2};
///
/// let settings = SonyflakeV2 { bits_sequence: 10, bits_machine_id: 12, time_unit_ms: 1, ..SonyflakeV2::default() };
/// let layout = Layout::custom(settings.bit_layout()?);
/// let fields = [("time", 5), ("sequence", 2), ("machine", 3)]
///     .map(|(name, value)| (name.to_string(), FieldValue::Number(value)));
/// assert_eq!(layout.encode(&fields)?, AnyId::U64(5 << 22 | 2 << 12 | 3));
/// assert_eq!(Layout::builtin("sonyflake-v2")?, Layout::custom(SonyflakeV2::default().bit_layout()?));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SonyflakeV2 {
    /// Bits of the sequence number; 0 means 8.
    pub bits_sequence: u32,
    /// Bits of the machine ID; 0 means 16.
    pub bits_machine_id: u32,
    /// The time unit in milliseconds; 0 means 10.
    pub time_unit_ms: u64,
    /// The start time in Unix ms; `None` means 2025-01-01T00:00:00Z.
    pub start_ms: Option<u64>,
}

/// The default start time: 2025-01-01T00:00:00Z.
const DEFAULT_START_MS: u64 = 1_735_689_600_000;

/// The default layout's fields: 39 bits of time, 8 of sequence, 16 of machine ID.
const DEFAULT_FIELDS: &[BitField] = &[
    BitField::new("time", 24, 39, FieldRole::Time),
    BitField::new("sequence", 16, 8, FieldRole::Sequence),
    BitField::new("machine", 0, 16, FieldRole::Node),
];

impl SonyflakeV2 {
    /// The layout's name.
    pub const NAME: &'static str = "sonyflake-v2";
    /// The default start time, 2025-01-01T00:00:00Z, in Unix ms.
    pub const DEFAULT_START_MS: u64 = DEFAULT_START_MS;
    /// The layout of the default settings.
    pub const LAYOUT: BitLayout =
        BitLayout::builtin(Self::NAME, 63, DEFAULT_FIELDS, DEFAULT_START_MS, 10, false)
            .with_floored_epoch();

    /// The bit layout of these settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] for a sequence or machine ID wider than 30 bits, or a time
    /// field narrower than 32 bits.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::SonyflakeV2;
    ///
    /// assert_eq!(SonyflakeV2::default().bit_layout()?, SonyflakeV2::LAYOUT);
    /// let wide = SonyflakeV2 { bits_sequence: 16, bits_machine_id: 16, ..SonyflakeV2::default() };
    /// assert!(wide.bit_layout().is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn bit_layout(&self) -> Result<BitLayout, Error> {
        let or = |value: u32, default: u32| if value == 0 { default } else { value };
        let sequence = or(self.bits_sequence, 8);
        let machine = or(self.bits_machine_id, 16);
        let unit = if self.time_unit_ms == 0 { 10 } else { self.time_unit_ms };
        let bad = |what: &str| Err(Error::InvalidLayout(format!("sonyflake-v2: {what}")));
        if sequence > 30 {
            return bad(&format!("bits_sequence must be 1..=30, not {sequence}"));
        }
        if machine > 30 {
            return bad(&format!("bits_machine_id must be 1..=30, not {machine}"));
        }
        let time = 63 - sequence - machine;
        if time < 32 {
            return bad(&format!(
                "the time field would have {time} bits; it needs at least 32 \
                 (bits_sequence + bits_machine_id at most 31)"
            ));
        }
        let start = self.start_ms.unwrap_or(DEFAULT_START_MS);
        let field = |name: &str, bits, role| FieldConfig { name: name.into(), bits, role };
        // A start given later (`--epoch`, `with_epoch`) is rounded down to a unit too.
        let layout = BitLayout::try_from(LayoutConfig {
            name: Self::NAME.into(),
            bits: 63,
            epoch: None,
            epoch_ms: Some(start - start % unit),
            tick_ms: unit,
            fields: vec![
                field("time", time, FieldRole::Time),
                field("sequence", sequence, FieldRole::Sequence),
                field("machine", machine, FieldRole::Node),
            ],
        })?;
        Ok(layout.with_floored_epoch())
    }
}

/// The `sonyflake-v2` built-in layout (default settings).
pub(crate) const BUILTIN: Builtin = Builtin {
    name: SonyflakeV2::NAME,
    about: "Sony Sonyflake v2: 39 bits of 10 ms since 2025-01-01, 8-bit sequence, 16-bit machine; widths and unit configurable",
    make: || std::sync::Arc::new(SonyflakeV2::LAYOUT),
};
