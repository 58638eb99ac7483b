//! Choosing a layout on the command line (`--layout`, `--layout-file`, `--epoch`,
//! `--counter-bits`), and reading
//! `NAME=VALUE` field values and `--format` for it.
//!
//! Shared by `gen`, `encode`, `decode` and `explain`. Validation of layouts and values is the
//! core's; this module only turns text into the core's types.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use idmint_core::{BitLayout, Error, FieldValue, Format, Layout, LayoutConfig};

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
