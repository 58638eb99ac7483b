//! Choosing a layout on the command line (`--layout`, `--layout-file`, `--epoch`,
//! `--counter-bits`), and reading `NAME=VALUE` field values, `--format` and `--type-prefix`
//! for it.
//!
//! Shared by `gen`, `encode`, `decode` and `explain`. Validation of layouts and values is the
//! core's; this module only turns text into the core's types.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use idmint_core::{
    BitLayout, Error, FieldValue, Format, IdForm, IdText, Layout, LayoutConfig, TypePrefix,
};

/// The built-in layout used when none is given.
pub(crate) const DEFAULT_LAYOUT: &str = "snowflake";

/// The flags that choose a layout.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LayoutArgs {
    /// The built-in layout (see `idmint layouts`).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_LAYOUT)]
    pub(crate) layout: String,

    /// A custom layout from a TOML file (name, bits, epoch or epoch_ms, tick_ms, [[fields]]).
    /// Default: none (use --layout).
    // `[[fields]]` is TOML, read by clap as help, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "FILE", conflicts_with = "layout")]
    pub(crate) layout_file: Option<PathBuf>,

    /// The epoch of the time field, in Unix milliseconds, for layouts that have one
    /// (snowflake, sonyflake, icicle, flake, js53, custom). Default: the layout's own epoch.
    #[arg(long, value_name = "MS")]
    pub(crate) epoch: Option<u64>,

    /// trace-id only: the bits of the counter under the chunk number (1..=21; the chunk
    /// number takes the rest of 22). Default: elfo's 10 (12 bits of chunk).
    #[arg(long, value_name = "BITS")]
    pub(crate) counter_bits: Option<u32>,
}

impl LayoutArgs {
    /// The chosen layout: `name` (a positional layout name, for `explain`) or `--layout`, or
    /// the file of `--layout-file`, then `--counter-bits` and `--epoch` applied.
    pub(crate) fn resolve(&self, name: Option<&str>) -> anyhow::Result<Layout> {
        let mut layout = match &self.layout_file {
            Some(path) => load_layout_file(path)?,
            None => Layout::builtin(name.unwrap_or(&self.layout))?,
        };
        if let Some(bits) = self.counter_bits {
            layout = layout.with_counter_bits(bits).map_err(|err| match err {
                Error::InvalidLayout(reason) => anyhow!("cannot use --counter-bits: {reason}"),
                other => other.into(),
            })?;
        }
        match self.epoch {
            None => Ok(layout),
            Some(epoch) => layout.with_epoch(epoch).map_err(|err| match err {
                Error::InvalidLayout(reason) => anyhow!("cannot use --epoch: {reason}"),
                other => other.into(),
            }),
        }
    }
}

/// Reads and validates a TOML layout file.
fn load_layout_file(path: &Path) -> anyhow::Result<Layout> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read layout file `{shown}`"))?;
    let config: LayoutConfig = toml::from_str(&text).map_err(|err| {
        let place = match err.span() {
            Some(span) => {
                let before = text.get(..span.start).unwrap_or(&text);
                let line = before.matches('\n').count() + 1;
                let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                format!("line {line}, column {column}: ")
            }
            None => String::new(),
        };
        anyhow!("layout file `{shown}`: {place}{}", err.message().trim())
    })?;
    let layout = BitLayout::try_from(config).with_context(|| format!("layout file `{shown}`"))?;
    Ok(Layout::custom(layout))
}

/// The text form of IDs (`gen`, `decode`): `--format`, which also takes `ulid` and `typeid`,
/// and `--type-prefix`, as a namespace's `type_prefix` on the server ([`IdText`]).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct TextArgs {
    /// The text form of the IDs (decimal, hex, binary, base64le, base64url, base32, base62,
    /// uuid, bytes; ulid, typeid and sqlguid-bytes for 128-bit layouts, typeid also for a 64-bit one with
    /// --type-prefix). Default: typeid with --type-prefix, else the layout's usual form (hex
    /// for lable, uuid for hot-guid and uuid7, decimal otherwise).
    #[arg(long, value_name = "FORMAT", value_parser = parse_form)]
    pub(crate) format: Option<IdForm>,

    /// A TypeID prefix (a-z and _, at most 63, starting and ending with a letter): IDs are
    /// written, and read, as `PREFIX_...` TypeIDs (for a 64-bit layout `PREFIX_` and its usual
    /// text); reading refuses another prefix. Default: none.
    #[arg(long, value_name = "PREFIX", value_parser = parse_prefix)]
    pub(crate) type_prefix: Option<TypePrefix>,
}

impl TextArgs {
    /// The text of `layout`'s IDs these flags ask for; refused early if the form cannot hold
    /// them.
    pub(crate) fn text(&self, layout: &Layout) -> anyhow::Result<IdText> {
        Ok(IdText::new(layout, self.type_prefix.as_ref(), self.format)?)
    }
}

/// Parses a `--format` value of [`TextArgs`].
fn parse_form(text: &str) -> Result<IdForm, String> {
    text.parse::<IdForm>().map_err(|err| err.to_string())
}

/// Parses a `--type-prefix` value.
fn parse_prefix(text: &str) -> Result<TypePrefix, String> {
    match text.parse::<TypePrefix>() {
        Ok(prefix) if prefix.is_empty() => Err("an empty prefix; leave --type-prefix out".into()),
        Ok(prefix) => Ok(prefix),
        Err(err) => Err(err.to_string()),
    }
}

/// Parses a `--format` value.
pub(crate) fn parse_format(text: &str) -> Result<Format, String> {
    text.parse::<Format>().map_err(|err| err.to_string())
}

/// The format to use: the one given, or the layout's usual one; refused early if it cannot
/// hold the layout's IDs.
pub(crate) fn format_for(layout: &Layout, format: Option<Format>) -> anyhow::Result<Format> {
    let format = format.unwrap_or_else(|| layout.default_format());
    if !format.supports(layout.id_bits()) {
        return Err(Error::UnsupportedFormat { format, bits: layout.id_bits() }.into());
    }
    Ok(format)
}

/// Reads `NAME=VALUE` arguments for a layout. Values are decimal integers except for the
/// layout's text fields (`mode`, `process`). Names the layout does not have are passed on as
/// text, for the core to refuse with the list of its fields.
pub(crate) fn parse_fields(
    layout: &Layout,
    args: &[String],
) -> anyhow::Result<Vec<(String, FieldValue)>> {
    let fields = layout.fields();
    args.iter()
        .map(|arg| {
            let Some((name, value)) = arg.split_once('=') else {
                bail!("expected NAME=VALUE, got `{arg}`");
            };
            let value = match fields.iter().find(|f| f.name == name) {
                None => FieldValue::Text(value.to_owned()),
                Some(field) if field.text.is_some() => FieldValue::Text(value.to_owned()),
                Some(field) => FieldValue::Number(parse_number(name, value, field.min, field.max)?),
            };
            Ok((name.to_owned(), value))
        })
        .collect()
}

/// A field's value: decimal digits only (no sign, no spaces), refused if above `u64`.
fn parse_number(name: &str, text: &str, min: u64, max: u64) -> anyhow::Result<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        bail!("invalid value for field `{name}`: `{text}` is not a decimal integer");
    }
    // All digits, so the only way to fail is a value above u64::MAX: out of range all the same.
    text.parse::<u64>()
        .map_err(|_| anyhow!("field `{name}` out of range: {text} is not in {min}..={max}"))
}
