//! The one error type of `idmint-core`: what went wrong while packing, parsing or generating an ID.

use crate::format::Format;

/// Everything that can go wrong in `idmint-core`.
///
/// Messages are lower-case phrases without a trailing period, and they carry the facts
/// (the field, the value, the allowed range), so they can be shown to a user as they are.
/// The enum is `#[non_exhaustive]`: new kinds of failure are not breaking changes.
///
/// # Example
///
/// ```
/// use idmint_core::{Error, Snowflake, SnowflakeParts};
///
/// let err = Snowflake::from_parts(SnowflakeParts {
///     timestamp: 1,
///     datacenter: 32,
///     worker: 0,
///     sequence: 0,
/// })
/// .unwrap_err();
/// assert!(matches!(err, Error::FieldOutOfRange { .. }));
/// assert_eq!(err.to_string(), "field `datacenter` out of range: 32 is not in 0..=31");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A field value does not fit its field. Values are refused, never masked or wrapped.
    #[error("field `{field}` out of range: {value} is not in {min}..={max}")]
    FieldOutOfRange {
        /// The field's name.
        field: String,
        /// The value that was given.
        value: u64,
        /// The smallest allowed value.
        min: u64,
        /// The largest allowed value.
        max: u64,
    },
    /// A field that the layout does not have was given.
    #[error("layout `{layout}` has no field `{field}` (its fields are: {expected})")]
    UnknownField {
        /// The layout's name.
        layout: String,
        /// The field that was given.
        field: String,
        /// The layout's field names, comma-separated.
        expected: String,
    },
    /// A field that the layout needs was not given.
    #[error("missing field `{field}` for layout `{layout}`")]
    MissingField {
        /// The layout's name.
        layout: String,
        /// The missing field.
        field: String,
    },
    /// A field was given a value of the wrong kind (text for a number, or bad text).
    #[error("invalid value for field `{field}`: {reason}")]
    InvalidFieldValue {
        /// The field's name.
        field: String,
        /// What is wrong with the value.
        reason: String,
    },
    /// Text is not a valid ID in the given format.
    #[error("invalid {format} id: {reason}")]
    InvalidText {
        /// The format the text was parsed as.
        format: Format,
        /// What is wrong with the text.
        reason: String,
    },
    /// The format cannot represent IDs of this width (for example `uuid` for a 64-bit ID).
    #[error("format `{format}` cannot represent {bits}-bit ids")]
    UnsupportedFormat {
        /// The format that was asked for.
        format: Format,
        /// The width of the ID in bits.
        bits: u32,
    },
    /// An unknown format name.
    #[error("unknown format `{0}` (expected one of: {names})", names = Format::NAMES.join(", "))]
    UnknownFormat(String),
    /// An unknown layout name.
    #[error("unknown layout `{name}` (expected one of: {expected})")]
    UnknownLayout {
        /// The name that was given.
        name: String,
        /// The built-in layout names, comma-separated.
        expected: String,
    },
    /// elfo's first validation rule: a trace ID is never zero.
    #[error("cannot be zero")]
    Zero,
    /// elfo's second validation rule: a trace ID is a positive `i64`.
    #[error("highest bit must be zero")]
    HighestBitSet,
    /// elfo's third validation rule: the timestamp is too far from now.
    #[error("invalid timestamp")]
    InvalidTimestamp,
    /// `idmint decode --layout auto` ([`detect`](crate::detect)): the text is an ID of no
    /// format it knows.
    #[error("`{text}` is not an ID of any known format (tried: {tried})")]
    Unrecognized {
        /// The text, shortened to 40 characters.
        text: String,
        /// The names of the formats tried, comma-separated.
        tried: String,
    },
    /// The bits of an ID do not form a valid value of its layout.
    #[error("invalid {layout} id: {reason}")]
    InvalidId {
        /// The layout's name.
        layout: String,
        /// Why the value is not valid.
        reason: &'static str,
    },
    /// A value is outside the domain a public-ID permutation maps (0 where the layout excludes
    /// it, or more bits than are left under the key-version bits).
    #[error("{value} is outside the {bits}-bit domain of these public ids")]
    OutsideDomain {
        /// The value, in decimal.
        value: String,
        /// How many bits the permutation maps.
        bits: u32,
    },
    /// A public ID names a key version its key set does not have.
    #[error("key version {version} is not in this public-id key set")]
    UnknownKeyVersion {
        /// The version the ID carries.
        version: u8,
    },
    /// A custom layout is not valid, or a layout cannot be used as asked.
    #[error("invalid layout: {0}")]
    InvalidLayout(String),
    /// A generator configuration is not valid.
    #[error("invalid generator configuration: {0}")]
    InvalidConfig(String),
    /// The clock is further behind the last issued ID than the configured tolerance.
    ///
    /// The generator refuses rather than issue IDs below ones it already issued.
    #[error(
        "clock moved backwards: {behind_ms} ms behind the last issued id (tolerance {tolerance_ms} ms)"
    )]
    ClockBackward {
        /// How far the clock reading is behind the last issued tick, in milliseconds.
        behind_ms: u64,
        /// The tolerance that was exceeded, in milliseconds.
        tolerance_ms: u64,
    },
    /// The clock reads a time before the layout's epoch.
    #[error("clock reads {now_ms} ms, before the layout's epoch {epoch_ms} ms")]
    BeforeEpoch {
        /// The clock reading, in Unix milliseconds.
        now_ms: u64,
        /// The layout's epoch, in Unix milliseconds.
        epoch_ms: u64,
    },
    /// The layout's time field has run out: no later time can be represented.
    #[error("the layout's time field ran out at {last_ms} ms (Unix); no more ids can be issued")]
    TimeExhausted {
        /// The last representable time, in Unix milliseconds.
        last_ms: u64,
    },
    /// The next ID would lie above the durable high-water mark the generator may issue up to.
    #[error("the reserved time window ends at {ceiling_ms} ms (Unix); it must be extended first")]
    WindowExhausted {
        /// The end of the reserved window, in Unix milliseconds.
        ceiling_ms: u64,
    },
    /// A counter-based generator has used all its values.
    #[error("{what} exhausted: all {capacity} values were issued")]
    CounterExhausted {
        /// What ran out.
        what: &'static str,
        /// How many values there were.
        capacity: u64,
    },
    /// The operating system's CSPRNG refused random bytes (UUIDv7's random bits); the ID was
    /// not issued.
    #[error("the operating system's random number generator failed: {0}")]
    RandomUnavailable(String),
    /// A text is not a TypeID (TypeID specification 0.3), or a prefix is not a TypeID prefix.
    #[error("invalid TypeID: {0}")]
    InvalidTypeId(String),
    /// A TypeID has another prefix than the one expected (an order ID where a user ID belongs).
    #[error("TypeID prefix {} where {} was expected", shown(found), shown(expected))]
    TypePrefixMismatch {
        /// The prefix expected (empty: none).
        expected: String,
        /// The prefix the text has (empty: none).
        found: String,
    },
    /// A batch of zero IDs was asked for.
    #[error("batch size must be at least 1")]
    EmptyBatch,
    /// An unknown text form name ([`IdForm`](crate::IdForm)).
    #[error("unknown format `{name}` (expected one of: {names})")]
    UnknownForm {
        /// The name that was given.
        name: String,
        /// The names of every form, comma-separated.
        names: String,
    },
    /// A text form cannot hold a layout's IDs: `ulid` or `uuid` for a 64-bit layout, `typeid`
    /// for a 64-bit layout without a type prefix.
    #[error("format `{form}` needs {needs}; `{layout}` ids have {bits} bits")]
    UnsupportedForm {
        /// The form asked for.
        form: &'static str,
        /// What it needs.
        needs: &'static str,
        /// The layout's name.
        layout: String,
        /// The layout's width in bits.
        bits: u32,
    },
}

/// A TypeID prefix in a message: in backquotes, or `none` when empty.
fn shown(prefix: &str) -> String {
    if prefix.is_empty() { "none".to_owned() } else { format!("`{prefix}`") }
}

impl Error {
    /// Builds [`Error::FieldOutOfRange`] for a field with a `&str` name.
    #[cold]
    pub(crate) fn out_of_range(field: &str, value: u64, min: u64, max: u64) -> Self {
        Error::FieldOutOfRange { field: field.to_owned(), value, min, max }
    }

    /// Builds [`Error::InvalidText`].
    #[cold]
    pub(crate) fn text(format: Format, reason: impl Into<String>) -> Self {
        Error::InvalidText { format, reason: reason.into() }
    }
}
