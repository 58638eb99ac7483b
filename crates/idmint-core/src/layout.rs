//! Layouts chosen at run time by name: encode, decode, parse, explain and generate any layout,
//! built-in or custom, through one value. The CLI and the server use this; library users who
//! know their layout at compile time use the typed IDs instead.

use std::fmt;

use crate::{
    BitLayout, Capacity, DecimalId, DecimalIdBatch, DecimalIdGenerator, DecimalIdParts, Error,
    FieldRole, Flake, Format, Generator, GeneratorConfig, HotGuid, HotGuidBatch, HotGuidGenerator,
    HotGuidParts, Icicle, Js53, Lable, LableMode, LableParts, Next, Snowflake, Sonyflake, TraceId,
    bits::low_mask, time_fmt::format_rfc3339_ms,
};

/// The value of one field, as given to `encode` or returned by `decode`.
///
/// # Example
///
/// ```
/// use idmint_core::FieldValue;
///
/// assert_eq!(FieldValue::Number(7).to_string(), "7");
/// assert_eq!(FieldValue::Text("spread".into()).to_string(), "spread");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FieldValue {
    /// A number (most fields).
    Number(u64),
    /// Text: LableOrg's `mode` (`spread` or `time-sequential`) and HotGuid's `process`
    /// (10 hex digits).
    Text(String),
}

impl fmt::Display for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Number(n) => write!(f, "{n}"),
            FieldValue::Text(t) => f.write_str(t),
        }
    }
}

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
    /// A 128-bit ID (HotGuid).
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

/// One field of a layout, as `idmint explain` and the server describe it.
///
/// # Example
///
/// ```
/// use idmint_core::Layout;
///
/// let layout = Layout::builtin("snowflake")?;
/// let worker = layout.fields().into_iter().find(|f| f.name == "worker").unwrap();
/// assert_eq!((worker.bits, worker.max), (5, 31));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct FieldInfo {
    /// The field's name.
    pub name: String,
    /// Its width in bits (for DecimalId: the bits its range needs).
    pub bits: u32,
    /// Its smallest value.
    pub min: u64,
    /// Its largest value.
    pub max: u64,
    /// What it holds.
    pub role: FieldRole,
    /// For text fields, the accepted values or their form.
    pub text: Option<&'static str>,
}

/// A run of bits in an ID's diagram, most significant first.
///
/// # Example
///
/// ```
/// use idmint_core::Layout;
///
/// let segments = Layout::builtin("lable")?.segments().unwrap();
/// assert_eq!(segments.iter().map(|s| s.width()).sum::<u32>(), 64);
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Segment {
    /// What the bits hold.
    pub label: String,
    /// The highest bit.
    pub msb: u32,
    /// The lowest bit.
    pub lsb: u32,
}

impl Segment {
    fn new(label: impl Into<String>, msb: u32, lsb: u32) -> Self {
        Segment { label: label.into(), msb, lsb }
    }

    /// How many bits the segment covers.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// let segments = Layout::builtin("snowflake")?.segments().unwrap();
    /// assert_eq!(segments[0].width(), 1);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn width(&self) -> u32 {
        self.msb - self.lsb + 1
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Lable,
    DecimalId,
    HotGuid,
    TraceId,
    /// Plain integers from a segment store: no clock, no generator of its own.
    Sequence,
    /// A plain bit layout: Snowflake, Sonyflake, icicle, go-flakeid, js53 or a custom one.
    Bits(BitLayout),
}

/// A layout chosen at run time: one of the built-ins by name, or a custom [`BitLayout`].
///
/// | name | bits | one line |
/// | --- | --- | --- |
/// | `snowflake` | 63 | Twitter: 41-bit ms since 2010-11-04, 5+5-bit node, 12-bit sequence |
/// | `sonyflake` | 63 | Sony: 39 bits of 10 ms since 2014-09-01, 8-bit sequence, 16-bit machine |
/// | `icicle` | 63 | intenthq icicle: 41-bit ms since 2016-02-18, 10-bit shard, 12-bit sequence |
/// | `flake` | 64 | go-flakeid: 42-bit ms since a chosen epoch, 5+5-bit node, 12-bit counter |
/// | `lable` | 64 | LableOrg: 42-bit ms (bit-reversed in SPREAD mode), 6-bit sequence, 11-bit generator, 4-bit cluster |
/// | `trace-id` | 63 | elfo: 25-bit seconds (wrapping), 16-bit node, 12-bit chunk, 10-bit counter |
/// | `decimal-id` | 63 | counter·10^10 + generator·10^5 + launch, no clock |
/// | `hot-guid` | 128 | HotGuid: .NET Guid with seconds, process, counter and a 32-bit shard key |
/// | `js53` | 53 | idmint: 40-bit ms since 2026, 6-bit node, 7-bit sequence, JavaScript-safe |
/// | `sequence` | 63 | plain integers 1..=2^63−1 from a segment store (a database), no clock |
///
/// # Example
///
/// ```
/// use idmint_core::{AnyId, FieldValue, Format, Layout};
///
/// let layout = Layout::builtin("flake")?;
/// let fields = layout.decode(layout.parse("5828128208445124609", Format::Decimal)?)?;
/// assert_eq!(fields[1], ("datacenter".to_string(), FieldValue::Number(7)));
/// assert_eq!(layout.encode(&fields)?, AnyId::U64(5_828_128_208_445_124_609));
/// # Ok::<(), idmint_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    kind: Kind,
}

/// The name of the HotGuid layout.
const HOT_GUID_NAME: &str = "hot-guid";

/// The name of the segment layout.
const SEQUENCE_NAME: &str = "sequence";

/// The largest `sequence` ID: `2^63 − 1`, so that every ID fits a signed 64-bit column.
const SEQUENCE_MAX: u64 = i64::MAX as u64;

/// The built-in layouts, with a one-line description each.
const BUILTINS: [(&str, &str); 10] = [
    (
        "snowflake",
        "Twitter Snowflake: 41-bit ms since 2010-11-04, 5-bit datacenter, 5-bit worker, 12-bit sequence",
    ),
    (
        "sonyflake",
        "Sony Sonyflake: 39 bits of 10 ms since 2014-09-01, 8-bit sequence, 16-bit machine",
    ),
    (
        "icicle",
        "intenthq icicle: 41-bit ms since 2016-02-18, 10-bit logical shard, 12-bit sequence",
    ),
    (
        "flake",
        "go-flakeid: 42-bit ms since a chosen epoch (default Unix), 5-bit datacenter, 5-bit worker, 12-bit counter; uses bit 63",
    ),
    (
        "lable",
        "LableOrg: 42-bit ms (bit-reversed in spread mode), 6-bit sequence, 11-bit generator, mode flag, 4-bit cluster; uses bit 63",
    ),
    (
        "trace-id",
        "elfo TraceId: 25-bit seconds (wraps every 388 days), 16-bit node, 12-bit chunk, 10-bit counter",
    ),
    (
        "decimal-id",
        "DecimalId: counter*10^10 + generator_id*10^5 + launch_id, readable in decimal, no clock",
    ),
    (
        "hot-guid",
        "HotGuid (128-bit): .NET Guid of seconds, process, 24-bit counter and a 32-bit shard key",
    ),
    (
        "js53",
        "idmint js53: 40-bit ms since 2026-01-01, 6-bit node, 7-bit sequence; every id below 2^53",
    ),
    (
        "sequence",
        "plain integers 1..=2^63-1 from a segment store (a database or a local file), no clock",
    ),
];

impl Layout {
    /// The names of the built-in layouts and a one-line description of each.
    ///
    /// # Example
    ///
    /// ```
    /// assert!(idmint_core::Layout::builtins().iter().any(|(name, _)| *name == "js53"));
    /// ```
    pub fn builtins() -> &'static [(&'static str, &'static str)] {
        &BUILTINS
    }

    /// A built-in layout by name.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownLayout`] for any other name.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// assert_eq!(Layout::builtin("icicle")?.name(), "icicle");
    /// assert!(Layout::builtin("nope").is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn builtin(name: &str) -> Result<Self, Error> {
        let kind = match name {
            "snowflake" => Kind::Bits(Snowflake::LAYOUT),
            "sonyflake" => Kind::Bits(Sonyflake::LAYOUT),
            "icicle" => Kind::Bits(Icicle::LAYOUT),
            "flake" => Kind::Bits(Flake::LAYOUT),
            "js53" => Kind::Bits(Js53::LAYOUT),
            "lable" => Kind::Lable,
            "trace-id" => Kind::TraceId,
            "decimal-id" => Kind::DecimalId,
            "hot-guid" => Kind::HotGuid,
            SEQUENCE_NAME => Kind::Sequence,
            _ => {
                return Err(Error::UnknownLayout {
                    name: name.to_owned(),
                    expected: BUILTINS.map(|(n, _)| n).join(", "),
                });
            }
        };
        Ok(Layout { kind })
    }

    /// A custom layout.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Snowflake};
    ///
    /// assert_eq!(Layout::custom(Snowflake::LAYOUT).name(), "snowflake");
    /// ```
    pub fn custom(layout: BitLayout) -> Self {
        Layout { kind: Kind::Bits(layout) }
    }

    /// The same layout with another epoch (Unix ms), for layouts whose time field counts
    /// milliseconds from an epoch.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidLayout`] for layouts without such an epoch (`trace-id`, `decimal-id`,
    /// `hot-guid`, `lable`, `sequence`).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// let layout = Layout::builtin("flake")?.with_epoch(946_684_800_000)?;
    /// assert_eq!(layout.epoch_ms(), Some(946_684_800_000));
    /// assert!(Layout::builtin("trace-id")?.with_epoch(1).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn with_epoch(&self, epoch_ms: u64) -> Result<Self, Error> {
        match &self.kind {
            Kind::Bits(bits) => Ok(Layout { kind: Kind::Bits(bits.with_epoch(epoch_ms)?) }),
            _ => Err(Error::InvalidLayout(format!(
                "layout `{}` has no configurable epoch",
                self.name()
            ))),
        }
    }

    /// The layout's name.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("hot-guid")?.name(), "hot-guid");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Lable => Lable::NAME,
            Kind::DecimalId => DecimalId::NAME,
            Kind::HotGuid => HOT_GUID_NAME,
            Kind::TraceId => "trace-id",
            Kind::Sequence => SEQUENCE_NAME,
            Kind::Bits(bits) => bits.name(),
        }
    }

    /// Whether [`generator`](Self::generator) can make IDs of this layout: false only for
    /// `sequence`, whose IDs come from a segment store (a database), not from a clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// assert!(Layout::builtin("snowflake")?.has_generator());
    /// assert!(!Layout::builtin("sequence")?.has_generator());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn has_generator(&self) -> bool {
        !matches!(self.kind, Kind::Sequence)
    }

    /// The epoch of the time field in Unix ms, if the layout has one. It is fixed (0, the Unix
    /// epoch) for `lable`, `trace-id` and `hot-guid`, whose [`with_epoch`](Self::with_epoch)
    /// refuses another.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Snowflake};
    ///
    /// assert_eq!(Layout::builtin("snowflake")?.epoch_ms(), Some(Snowflake::EPOCH_MS));
    /// assert_eq!(Layout::builtin("decimal-id")?.epoch_ms(), None);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn epoch_ms(&self) -> Option<u64> {
        match &self.kind {
            Kind::Bits(bits) => Some(bits.epoch_ms()),
            Kind::Lable | Kind::TraceId | Kind::HotGuid => Some(0),
            Kind::DecimalId | Kind::Sequence => None,
        }
    }

    /// The ID's width: 128 for `hot-guid`, 64 otherwise.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_core::Layout::builtin("hot-guid")?.id_bits(), 128);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn id_bits(&self) -> u32 {
        match self.kind {
            Kind::HotGuid => 128,
            _ => 64,
        }
    }

    /// Whether every ID of the layout is at most 2^53−1, so a JSON number is safe in JavaScript.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// assert!(Layout::builtin("js53")?.is_js_safe());
    /// assert!(!Layout::builtin("snowflake")?.is_js_safe());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn is_js_safe(&self) -> bool {
        matches!(&self.kind, Kind::Bits(bits) if bits.bits() <= 53)
    }

    /// The layout's usual text form.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Format, Layout};
    ///
    /// assert_eq!(Layout::builtin("lable")?.default_format(), Format::Hex);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn default_format(&self) -> Format {
        match self.kind {
            Kind::Lable => Lable::DEFAULT_FORMAT,
            Kind::HotGuid => Format::Uuid,
            _ => Format::Decimal,
        }
    }

    /// The layout's fields, in the order `decode` returns them.
    ///
    /// # Example
    ///
    /// ```
    /// let fields = idmint_core::Layout::builtin("decimal-id")?.fields();
    /// assert_eq!(fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(), ["counter", "generator_id", "launch_id"]);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn fields(&self) -> Vec<FieldInfo> {
        let number = |name: &str, bits: u32, min: u64, max: u64, role| FieldInfo {
            name: name.to_owned(),
            bits,
            min,
            max,
            role,
            text: None,
        };
        let text = |name: &str, bits: u32, role, form| FieldInfo {
            name: name.to_owned(),
            bits,
            min: 0,
            max: low_mask(bits),
            role,
            text: Some(form),
        };
        match &self.kind {
            Kind::Bits(bits) => bits
                .fields()
                .iter()
                .map(|f| number(f.name(), f.width(), f.min(), f.max(), f.role()))
                .collect(),
            Kind::TraceId => TraceId::LAYOUT
                .fields()
                .iter()
                .map(|f| number(f.name(), f.width(), f.min(), f.max(), f.role()))
                .collect(),
            Kind::Lable => vec![
                number(
                    "timestamp",
                    Lable::TIMESTAMP_BITS,
                    0,
                    Lable::MAX_TIMESTAMP,
                    FieldRole::Time,
                ),
                number(
                    "sequence",
                    Lable::SEQUENCE_BITS,
                    0,
                    low_mask(Lable::SEQUENCE_BITS),
                    FieldRole::Sequence,
                ),
                number(
                    "generator_id",
                    Lable::GENERATOR_BITS,
                    0,
                    low_mask(Lable::GENERATOR_BITS),
                    FieldRole::Node,
                ),
                number(
                    "cluster_id",
                    Lable::CLUSTER_BITS,
                    0,
                    low_mask(Lable::CLUSTER_BITS),
                    FieldRole::Node,
                ),
                text("mode", 1, FieldRole::Node, "`spread` or `time-sequential`"),
            ],
            Kind::DecimalId => vec![
                number(
                    "counter",
                    30,
                    DecimalId::MIN_COUNTER,
                    DecimalId::MAX_COUNTER,
                    FieldRole::Sequence,
                ),
                number("generator_id", 17, 0, DecimalId::MAX_GENERATOR_ID, FieldRole::Node),
                number("launch_id", 17, 0, DecimalId::MAX_LAUNCH_ID, FieldRole::Node),
            ],
            Kind::Sequence => vec![number("value", 63, 1, SEQUENCE_MAX, FieldRole::Sequence)],
            Kind::HotGuid => vec![
                number("timestamp", 32, 0, u64::from(u32::MAX), FieldRole::Time),
                text("process", 40, FieldRole::Node, "10 hex digits"),
                number("counter", 24, 0, u64::from(HotGuid::COUNTER_MAX), FieldRole::Sequence),
                number("shard_key", 32, 0, u64::from(u32::MAX), FieldRole::Node),
            ],
        }
    }

    /// The bit diagram, most significant first; `None` for `decimal-id`, which is decimal.
    ///
    /// # Example
    ///
    /// ```
    /// let segments = idmint_core::Layout::builtin("hot-guid")?.segments().unwrap();
    /// assert_eq!(segments[0].msb, 127);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn segments(&self) -> Option<Vec<Segment>> {
        let from_bits = |bits: &BitLayout| {
            let mut out = Vec::new();
            let mut top = 63;
            if bits.bits() < 64 {
                out.push(Segment::new("0", 63, bits.bits()));
                top = bits.bits() - 1;
            }
            for f in bits.fields() {
                debug_assert_eq!(top, f.shift() + f.width() - 1);
                out.push(Segment::new(f.name(), f.shift() + f.width() - 1, f.shift()));
                top = f.shift().wrapping_sub(1);
            }
            out
        };
        match &self.kind {
            Kind::Bits(bits) => Some(from_bits(bits)),
            Kind::TraceId => Some(from_bits(&TraceId::LAYOUT)),
            Kind::Lable => Some(vec![
                Segment::new("timestamp", 63, 22),
                Segment::new("sequence", 21, 16),
                Segment::new("generator_id[10:8]", 15, 13),
                Segment::new("mode", 12, 12),
                Segment::new("generator_id[7:0]", 11, 4),
                Segment::new("cluster_id", 3, 0),
            ]),
            // In the .NET string's (big-endian) order: bytes 3..0, 5..4, 7..6, 8..15.
            Kind::HotGuid => Some(vec![
                Segment::new("timestamp", 127, 96),
                Segment::new("process[1..0] (md5 of machine)", 95, 80),
                Segment::new("process[4..2] (md5, pid)", 79, 56),
                Segment::new("counter", 55, 32),
                Segment::new("shard_key (little-endian)", 31, 0),
            ]),
            Kind::Sequence => Some(vec![Segment::new("0", 63, 63), Segment::new("value", 62, 0)]),
            Kind::DecimalId => None,
        }
    }

    /// What the layout can hold: its lifetime and its rate.
    ///
    /// # Example
    ///
    /// ```
    /// let cap = idmint_core::Layout::builtin("lable")?.capacity();
    /// assert_eq!(cap.ids_per_tick, 64);
    /// assert_eq!(cap.end.as_deref(), Some("2109-05-15T07:35:11.104Z"));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn capacity(&self) -> Capacity {
        match &self.kind {
            Kind::Bits(bits) => bits.capacity(),
            Kind::TraceId => {
                // Chunk number and counter together are the sequence: 4,096 × 1,023 per second.
                let per_second = TraceId::IDS_PER_SECOND;
                Capacity {
                    ids_per_tick: per_second,
                    ids_per_second_per_generator: per_second,
                    ..TraceId::LAYOUT.capacity()
                }
            }
            Kind::Lable => {
                let end_ms = Lable::MAX_TIMESTAMP + 1;
                Capacity {
                    tick_ms: 1,
                    start_ms: Some(0),
                    end_ms: Some(end_ms),
                    wrap_ms: None,
                    start: Some(format_rfc3339_ms(0)),
                    end: Some(format_rfc3339_ms(end_ms)),
                    ids_per_tick: 1 << Lable::SEQUENCE_BITS,
                    ids_per_second_per_generator: 1000 << Lable::SEQUENCE_BITS,
                    generators: 1 << (Lable::GENERATOR_BITS + Lable::CLUSTER_BITS),
                }
            }
            Kind::HotGuid => {
                let wrap_ms = (1u64 << 32) * 1000;
                Capacity {
                    tick_ms: 1000,
                    start_ms: Some(0),
                    end_ms: None,
                    wrap_ms: Some(wrap_ms),
                    start: Some(format_rfc3339_ms(0)),
                    end: None,
                    ids_per_tick: u64::from(HotGuid::COUNTER_MAX) + 1,
                    ids_per_second_per_generator: u64::from(HotGuid::COUNTER_MAX) + 1,
                    generators: 1 << 40,
                }
            }
            Kind::DecimalId => clockless_capacity(
                DecimalId::MAX_COUNTER,
                (DecimalId::MAX_GENERATOR_ID + 1) * (DecimalId::MAX_LAUNCH_ID + 1),
            ),
            // One sequence per namespace, shared by every server that takes ranges of it.
            Kind::Sequence => clockless_capacity(SEQUENCE_MAX, 1),
        }
    }

    /// Builds an ID from named field values. Every field must be given, and nothing else.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`], [`Error::MissingField`], [`Error::InvalidFieldValue`] or
    /// [`Error::FieldOutOfRange`]; values are never masked.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, Layout};
    ///
    /// let layout = Layout::builtin("decimal-id")?;
    /// let fields = [("counter", 1415), ("generator_id", 92), ("launch_id", 65)]
    ///     .map(|(name, value)| (name.to_string(), FieldValue::Number(value)));
    /// assert_eq!(layout.encode(&fields)?, AnyId::U64(14_150_009_200_065));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn encode(&self, fields: &[(String, FieldValue)]) -> Result<AnyId, Error> {
        let mut values = FieldReader::new(self, fields)?;
        let id = match &self.kind {
            Kind::Bits(bits) => {
                let numbers = bits
                    .fields()
                    .iter()
                    .map(|f| values.number(f.name()))
                    .collect::<Result<Vec<_>, _>>()?;
                AnyId::U64(bits.validate(bits.pack(&numbers)?)?)
            }
            Kind::TraceId => {
                let numbers = TraceId::LAYOUT
                    .fields()
                    .iter()
                    .map(|f| values.number(f.name()))
                    .collect::<Result<Vec<_>, _>>()?;
                let raw = TraceId::LAYOUT.pack(&numbers)?;
                AnyId::U64(TraceId::from_raw(raw)?.to_raw())
            }
            Kind::Lable => AnyId::U64(
                Lable::from_parts(LableParts {
                    timestamp: values.number("timestamp")?,
                    sequence: values.number("sequence")?,
                    generator_id: values.number("generator_id")?,
                    cluster_id: values.number("cluster_id")?,
                    mode: values.text("mode")?.parse()?,
                })?
                .to_raw(),
            ),
            Kind::DecimalId => AnyId::U64(
                DecimalId::from_parts(DecimalIdParts {
                    counter: values.number("counter")?,
                    generator_id: values.number("generator_id")?,
                    launch_id: values.number("launch_id")?,
                })?
                .to_raw(),
            ),
            Kind::Sequence => {
                let value = values.number("value")?;
                if !(1..=SEQUENCE_MAX).contains(&value) {
                    return Err(Error::out_of_range("value", value, 1, SEQUENCE_MAX));
                }
                AnyId::U64(value)
            }
            Kind::HotGuid => {
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
                AnyId::U128(HotGuid::from_parts(parts)?.as_u128())
            }
        };
        Ok(id)
    }

    /// Reads the fields of an ID, after checking it is a valid ID of this layout.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`]-style width mismatches are reported as
    /// [`Error::InvalidId`]; otherwise the layout's own validation errors.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, Layout};
    ///
    /// let fields = Layout::builtin("lable")?.decode(AnyId::U64(0x1000))?;
    /// assert_eq!(fields[4], ("mode".to_string(), FieldValue::Text("time-sequential".into())));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn decode(&self, id: AnyId) -> Result<Vec<(String, FieldValue)>, Error> {
        let num = |name: &str, value: u64| (name.to_owned(), FieldValue::Number(value));
        match (&self.kind, id) {
            (Kind::Bits(bits), AnyId::U64(raw)) => {
                bits.validate(raw)?;
                Ok(bits.fields().iter().map(|f| num(f.name(), f.get(raw))).collect())
            }
            (Kind::TraceId, AnyId::U64(raw)) => {
                let p = TraceId::from_raw(raw)?.into_parts();
                Ok(vec![
                    num("timestamp", p.timestamp),
                    num("node_no", p.node_no),
                    num("chunk_no", p.chunk_no),
                    num("counter", p.counter),
                ])
            }
            (Kind::Lable, AnyId::U64(raw)) => {
                let p = Lable::from_raw(raw)?.into_parts();
                Ok(vec![
                    num("timestamp", p.timestamp),
                    num("sequence", p.sequence),
                    num("generator_id", p.generator_id),
                    num("cluster_id", p.cluster_id),
                    ("mode".to_owned(), FieldValue::Text(p.mode.name().to_owned())),
                ])
            }
            (Kind::DecimalId, AnyId::U64(raw)) => {
                let p = DecimalId::from_raw(raw)?.into_parts();
                Ok(vec![
                    num("counter", p.counter),
                    num("generator_id", p.generator_id),
                    num("launch_id", p.launch_id),
                ])
            }
            (Kind::Sequence, AnyId::U64(raw)) => {
                if !(1..=SEQUENCE_MAX).contains(&raw) {
                    return Err(Error::InvalidId {
                        layout: SEQUENCE_NAME.to_owned(),
                        reason: "a sequence id is a whole number from 1 to 2^63-1",
                    });
                }
                Ok(vec![num("value", raw)])
            }
            (Kind::HotGuid, AnyId::U128(value)) => {
                let p = HotGuid::from_u128(value).into_parts();
                let process = p.process.iter().map(|b| format!("{b:02x}")).collect::<String>();
                Ok(vec![
                    num("timestamp", u64::from(p.timestamp)),
                    ("process".to_owned(), FieldValue::Text(process)),
                    num("counter", u64::from(p.counter)),
                    num("shard_key", u64::from(p.shard_key)),
                ])
            }
            (_, id) => Err(Error::InvalidId {
                layout: self.name().to_owned(),
                reason: if id.bits() == 64 {
                    "a 64-bit value is not a 128-bit id"
                } else {
                    "a 128-bit value is not a 64-bit id"
                },
            }),
        }
    }

    /// Parses text in `format` and checks it is a valid ID of this layout.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidText`] or [`Error::UnsupportedFormat`] for text that is not a number of
    /// the layout's width in that format, and the layout's validation errors.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Format, Layout};
    ///
    /// let layout = Layout::builtin("lable")?;
    /// assert_eq!(layout.parse("0000000000001000", Format::Hex)?, AnyId::U64(0x1000));
    /// assert!(layout.parse("00ff", Format::Hex).is_err());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn parse(&self, text: &str, format: Format) -> Result<AnyId, Error> {
        let id = match self.id_bits() {
            128 => AnyId::U128(format.parse_u128(text)?),
            _ => AnyId::U64(format.parse_u64(text)?),
        };
        self.decode(id)?;
        Ok(id)
    }

    /// Writes an ID in `format`.
    ///
    /// # Errors
    ///
    /// [`Error::UnsupportedFormat`] when the format cannot hold the ID.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Format, Layout};
    ///
    /// let layout = Layout::builtin("flake")?;
    /// assert_eq!(layout.format(AnyId::U64(6448830824900882437), Format::Base64Le)?, "BXDOxnfZflk=");
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn format(&self, id: AnyId, format: Format) -> Result<String, Error> {
        let mut out = String::new();
        id.write(format, &mut out)?;
        Ok(out)
    }

    /// The Unix ms an ID was issued at, if the layout records time. `now_ms` resolves
    /// `trace-id`'s wrapping seconds to the latest matching time not after it.
    ///
    /// # Errors
    ///
    /// As [`decode`](Self::decode).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, Layout};
    ///
    /// let layout = Layout::builtin("flake")?;
    /// assert_eq!(layout.time_ms(AnyId::U64(5828128208445124609), 0)?, Some(1_389_534_046_279));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn time_ms(&self, id: AnyId, now_ms: u64) -> Result<Option<u64>, Error> {
        self.decode(id)?;
        Ok(match (&self.kind, id) {
            (Kind::Bits(bits), AnyId::U64(raw)) => {
                bits.field_with_role(FieldRole::Time).and_then(|f| bits.time_of_tick(f.get(raw)))
            }
            (Kind::TraceId, AnyId::U64(raw)) => {
                TraceId::from_raw(raw)?.unix_secs_near(now_ms).checked_mul(1000)
            }
            (Kind::Lable, AnyId::U64(raw)) => Some(Lable::from_raw(raw)?.into_parts().timestamp),
            (Kind::HotGuid, AnyId::U128(v)) => {
                Some(u64::from(HotGuid::from_u128(v).unix_timestamp()) * 1000)
            }
            _ => None,
        })
    }

    /// A text that identifies the layout's bits and time: its name, width, epoch, tick and
    /// fields. A stored high-water mark is only valid for the same fingerprint.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// let snowflake = Layout::builtin("snowflake")?;
    /// assert_ne!(snowflake.fingerprint(), snowflake.with_epoch(0)?.fingerprint());
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn fingerprint(&self) -> String {
        let bits = |b: &BitLayout| {
            let fields: Vec<String> = b
                .fields()
                .iter()
                .map(|f| format!("{}:{}:{:?}", f.name(), f.width(), f.role()).to_lowercase())
                .collect();
            format!(
                "{}/{}b/epoch={}/tick={}/{}",
                b.name(),
                b.bits(),
                b.epoch_ms(),
                b.tick_ms(),
                fields.join(",")
            )
        };
        match &self.kind {
            Kind::Bits(b) => bits(b),
            Kind::TraceId => bits(&TraceId::LAYOUT),
            Kind::Lable => "lable/64b/epoch=0/tick=1/v4.1".to_owned(),
            Kind::DecimalId => "decimal-id/63b/counter*10^10+generator*10^5+launch".to_owned(),
            Kind::HotGuid => "hot-guid/128b/epoch=0/tick=1000".to_owned(),
            Kind::Sequence => "sequence/63b/1..=2^63-1".to_owned(),
        }
    }

    /// How many generators can run at once: the number of distinct generator identities, each
    /// a value of the layout's node fields (see [`identity`](Self::identity)).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    ///
    /// assert_eq!(Layout::builtin("snowflake")?.generator_count(), 1024);
    /// assert_eq!(Layout::builtin("icicle")?.generator_count(), 1023);
    /// assert_eq!(Layout::builtin("lable")?.generator_count(), 2048 * 16);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator_count(&self) -> u64 {
        match &self.kind {
            Kind::Bits(b) if is_icicle(b) => (1 << Icicle::SHARD_BITS) - 1,
            Kind::Bits(b) => node_span(b),
            Kind::TraceId => node_span(&TraceId::LAYOUT),
            Kind::Lable => 1 << (Lable::GENERATOR_BITS + Lable::CLUSTER_BITS),
            Kind::DecimalId => DecimalId::MAX_GENERATOR_ID + 1,
            Kind::HotGuid => 1 << PROCESS_BITS,
            Kind::Sequence => 1,
        }
    }

    /// The node-field values of generator identity `generator_id` (in `0..generator_count()`),
    /// so that a coordinator can hand out plain integers:
    ///
    /// - bit layouts: the node fields read as one number, most significant first (Snowflake:
    ///   `datacenter·32 + worker`); icicle: `shard = generator_id + 1`, since shard 0 is refused;
    /// - `lable`: `cluster_id·2048 + generator_id`, LableOrg's claim order (cluster, then
    ///   generator ID ascending);
    /// - `decimal-id`: the `generator_id` field;
    /// - `hot-guid`: the 5 `process` bytes, big-endian;
    /// - `sequence`: nothing (its one "generator" is the segment store).
    ///
    /// # Errors
    ///
    /// [`Error::FieldOutOfRange`] when `generator_id` is not below
    /// [`generator_count`](Self::generator_count).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{FieldValue, Layout};
    ///
    /// let fields = Layout::builtin("snowflake")?.identity(33)?;
    /// assert_eq!(fields, vec![
    ///     ("datacenter".to_string(), FieldValue::Number(1)),
    ///     ("worker".to_string(), FieldValue::Number(1)),
    /// ]);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn identity(&self, generator_id: u64) -> Result<Vec<(String, FieldValue)>, Error> {
        let count = self.generator_count();
        if generator_id >= count {
            return Err(Error::out_of_range("generator id", generator_id, 0, count - 1));
        }
        let num = |name: &str, value: u64| (name.to_owned(), FieldValue::Number(value));
        Ok(match &self.kind {
            Kind::Bits(b) if is_icicle(b) => vec![num("shard", generator_id + 1)],
            Kind::Bits(b) => split_node(b, generator_id),
            Kind::TraceId => split_node(&TraceId::LAYOUT, generator_id),
            Kind::Lable => vec![
                num("generator_id", generator_id % (1 << Lable::GENERATOR_BITS)),
                num("cluster_id", generator_id >> Lable::GENERATOR_BITS),
            ],
            Kind::DecimalId => vec![num("generator_id", generator_id)],
            Kind::Sequence => Vec::new(),
            Kind::HotGuid => {
                let bytes = &generator_id.to_be_bytes()[8 - PROCESS_BITS as usize / 8..];
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                vec![("process".to_owned(), FieldValue::Text(hex))]
            }
        })
    }

    /// A generator for this layout with the given node fields (datacenter, worker, shard,
    /// generator ID, ...). Node fields that are not given take their smallest value.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownField`] for a field that is not a node field of the layout,
    /// [`Error::FieldOutOfRange`] or [`Error::InvalidFieldValue`] for a bad value,
    /// [`Error::InvalidConfig`] for a bad configuration, [`Error::InvalidLayout`] for
    /// `sequence`, whose IDs come from a segment store (see
    /// [`has_generator`](Self::has_generator)).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{AnyId, FieldValue, GeneratorConfig, Layout, Snowflake};
    ///
    /// let layout = Layout::builtin("snowflake")?;
    /// let node = [("worker".to_string(), FieldValue::Number(3))];
    /// let generator = layout.generator(&node, &GeneratorConfig::default())?;
    /// let id = generator.next(Snowflake::EPOCH_MS + 1)?.ready().unwrap();
    /// assert_eq!(id, AnyId::U64(1 << 22 | 3 << 12));
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn generator(
        &self,
        node: &[(String, FieldValue)],
        config: &GeneratorConfig,
    ) -> Result<AnyGenerator, Error> {
        let mut values = FieldReader::for_node(self, node)?;
        let inner = match &self.kind {
            Kind::Sequence => {
                return Err(Error::InvalidLayout(
                    "layout `sequence` has no generator: its ids come from a segment store \
                     (a database or a local file); serve them with `idmint serve --layout sequence`"
                        .to_owned(),
                ));
            }
            Kind::Bits(bits) => {
                // icicle's client refuses shard 0, so an icicle generator starts at shard 1.
                let icicle = is_icicle(bits);
                let min = if icicle { Icicle::MIN_GENERATOR_SHARD } else { 0 };
                let mut named = Vec::new();
                for f in bits.fields().iter().filter(|f| f.role() == FieldRole::Node) {
                    let value = values.number_or(f.name(), min)?;
                    if value < min {
                        return Err(Error::out_of_range(f.name(), value, min, f.max()));
                    }
                    named.push((f.name(), value));
                }
                AnyInner::U64(Generator::custom(bits, &named, config)?)
            }
            Kind::TraceId => AnyInner::U64(Generator::from_plan(
                TraceId::plan(values.number_or("node_no", 0)?)?,
                config,
            )?),
            Kind::Lable => {
                let mode = match values.text_or("mode")? {
                    Some(mode) => mode.parse()?,
                    None => LableMode::default(),
                };
                AnyInner::U64(Generator::from_plan(
                    Lable::plan(
                        values.number_or("generator_id", 0)?,
                        values.number_or("cluster_id", 0)?,
                        mode,
                    )?,
                    config,
                )?)
            }
            Kind::DecimalId => AnyInner::DecimalId(DecimalIdGenerator::new(
                values.number_or("generator_id", 0)?,
                values.number_or("launch_id", 0)?,
            )?),
            Kind::HotGuid => {
                let process = match values.text_or("process")? {
                    Some(text) => parse_process(&text)?,
                    None => [0; 5],
                };
                let shard = values.number_or("shard_key", 0)?;
                let shard = u32::try_from(shard)
                    .map_err(|_| Error::out_of_range("shard_key", shard, 0, u64::from(u32::MAX)))?;
                AnyInner::HotGuid(HotGuid::generator(process, shard, config)?)
            }
        };
        Ok(AnyGenerator { inner })
    }
}

/// Width of HotGuid's `process` field: 5 bytes.
const PROCESS_BITS: u32 = 40;

/// Whether a bit layout is icicle's (whose generators refuse shard 0).
fn is_icicle(bits: &BitLayout) -> bool {
    bits.name() == "icicle" && bits.fields() == Icicle::LAYOUT.fields()
}

/// How many values the node fields of a bit layout take together.
fn node_span(bits: &BitLayout) -> u64 {
    bits.fields()
        .iter()
        .filter(|f| f.role() == FieldRole::Node)
        .fold(1u64, |acc, f| acc.saturating_mul(1u64.checked_shl(f.width()).unwrap_or(u64::MAX)))
}

/// The node fields of a bit layout for one generator identity, most significant first.
fn split_node(bits: &BitLayout, mut generator_id: u64) -> Vec<(String, FieldValue)> {
    let mut out: Vec<(String, FieldValue)> = bits
        .fields()
        .iter()
        .rev()
        .filter(|f| f.role() == FieldRole::Node)
        .map(|f| {
            let value = generator_id & f.max();
            generator_id = generator_id.checked_shr(f.width()).unwrap_or(0);
            (f.name().to_owned(), FieldValue::Number(value))
        })
        .collect();
    out.reverse();
    out
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

/// Takes named values out of a list, refusing unknown and duplicate names.
struct FieldReader<'a> {
    layout: &'a Layout,
    values: Vec<(String, FieldValue)>,
}

impl<'a> FieldReader<'a> {
    /// For `encode`: every name must be a field of the layout.
    fn new(layout: &'a Layout, given: &[(String, FieldValue)]) -> Result<Self, Error> {
        Self::checked(layout, given, |_| true)
    }

    /// For `generator`: every name must be a node field of the layout.
    fn for_node(layout: &'a Layout, given: &[(String, FieldValue)]) -> Result<Self, Error> {
        Self::checked(layout, given, |f| f.role == FieldRole::Node)
    }

    fn checked(
        layout: &'a Layout,
        given: &[(String, FieldValue)],
        allowed: impl Fn(&FieldInfo) -> bool,
    ) -> Result<Self, Error> {
        let fields = layout.fields();
        for (i, (name, _)) in given.iter().enumerate() {
            if fields.iter().any(|f| f.name == *name && !allowed(f)) {
                return Err(Error::InvalidFieldValue {
                    field: name.clone(),
                    reason: format!(
                        "it is set by the generator; the fields that can be given are: {}",
                        fields
                            .iter()
                            .filter(|f| allowed(f))
                            .map(|f| f.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            if !fields.iter().any(|f| f.name == *name && allowed(f)) {
                return Err(Error::UnknownField {
                    layout: layout.name().to_owned(),
                    field: name.clone(),
                    expected: fields
                        .iter()
                        .filter(|f| allowed(f))
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            if given[..i].iter().any(|(other, _)| other == name) {
                return Err(Error::InvalidFieldValue {
                    field: name.clone(),
                    reason: "given twice".into(),
                });
            }
        }
        Ok(FieldReader { layout, values: given.to_vec() })
    }

    fn take(&mut self, name: &str) -> Option<FieldValue> {
        let i = self.values.iter().position(|(n, _)| n == name)?;
        Some(self.values.swap_remove(i).1)
    }

    fn missing(&self, name: &str) -> Error {
        Error::MissingField { layout: self.layout.name().to_owned(), field: name.to_owned() }
    }

    fn number(&mut self, name: &str) -> Result<u64, Error> {
        self.number_opt(name)?.ok_or_else(|| self.missing(name))
    }

    fn number_or(&mut self, name: &str, default: u64) -> Result<u64, Error> {
        Ok(self.number_opt(name)?.unwrap_or(default))
    }

    fn number_opt(&mut self, name: &str) -> Result<Option<u64>, Error> {
        match self.take(name) {
            None => Ok(None),
            Some(FieldValue::Number(n)) => Ok(Some(n)),
            Some(FieldValue::Text(t)) => Err(Error::InvalidFieldValue {
                field: name.to_owned(),
                reason: format!("`{t}` is not a number"),
            }),
        }
    }

    fn text(&mut self, name: &str) -> Result<String, Error> {
        self.text_or(name)?.ok_or_else(|| self.missing(name))
    }

    fn text_or(&mut self, name: &str) -> Result<Option<String>, Error> {
        Ok(self.take(name).map(|v| v.to_string()))
    }
}

#[derive(Debug)]
enum AnyInner {
    U64(Generator<u64>),
    DecimalId(DecimalIdGenerator),
    HotGuid(HotGuidGenerator),
}

/// A generator of any layout, made by [`Layout::generator`]. Lock-free and `Sync`.
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
    pub fn next(&self, now_ms: u64) -> Result<Next<AnyId>, Error> {
        match &self.inner {
            AnyInner::U64(g) => Ok(g.next(now_ms)?.map(AnyId::U64)),
            AnyInner::DecimalId(g) => Ok(Next::Ready(AnyId::U64(g.next()?.to_raw()))),
            AnyInner::HotGuid(g) => Ok(g.next(now_ms)?.map(|id| AnyId::U128(id.as_u128()))),
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
            AnyInner::U64(g) => {
                g.next_batch(now_ms, n)?.map(|b| AnyBatch { inner: BatchInner::U64(b) })
            }
            AnyInner::DecimalId(g) => {
                Next::Ready(AnyBatch { inner: BatchInner::DecimalId(g.next_batch(n)?) })
            }
            AnyInner::HotGuid(g) => {
                g.next_batch(now_ms, n)?.map(|b| AnyBatch { inner: BatchInner::HotGuid(b) })
            }
        })
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
            AnyInner::U64(g) => Some(g.last_ms()),
            AnyInner::DecimalId(_) => None,
            AnyInner::HotGuid(g) => Some(g.last_ms()),
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
            AnyInner::U64(g) => g.set_ceiling_ms(mark_ms),
            AnyInner::DecimalId(_) => Ok(()),
            AnyInner::HotGuid(g) => g.set_ceiling_ms(mark_ms),
        }
    }
}

#[derive(Debug)]
enum BatchInner {
    U64(crate::Batch<u64>),
    HotGuid(HotGuidBatch),
    DecimalId(DecimalIdBatch),
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
            BatchInner::HotGuid(b) => b.next().map(|id| AnyId::U128(id.as_u128())),
            BatchInner::DecimalId(b) => b.next().map(|id| AnyId::U64(id.to_raw())),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.inner {
            BatchInner::U64(b) => b.size_hint(),
            BatchInner::HotGuid(b) => b.size_hint(),
            BatchInner::DecimalId(b) => b.size_hint(),
        }
    }
}

impl ExactSizeIterator for AnyBatch {}
impl std::iter::FusedIterator for AnyBatch {}

/// The capacity of a layout without a clock: `ids` IDs per generator, no dates, no rate.
fn clockless_capacity(ids: u64, generators: u64) -> Capacity {
    Capacity {
        tick_ms: 0,
        start_ms: None,
        end_ms: None,
        wrap_ms: None,
        start: None,
        end: None,
        ids_per_tick: ids,
        ids_per_second_per_generator: 0,
        generators,
    }
}
