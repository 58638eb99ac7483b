//! `idmint decode`: shows the fields of IDs and when they were issued, as tables or as JSON
//! lines; the IDs come from the command line or, one per line, from stdin. `--layout auto`
//! (in `auto.rs`) names the format of each ID first.

mod auto;

use std::io::{BufRead, Write};

use anyhow::Context;
use idmint_core::{
    AnyId, Clock, FieldValue, IdText, Layout, SystemClock, TypePrefix, format_rfc3339_ms,
};
use serde::{Serialize, ser::SerializeMap};

use crate::{
    convert::Forms,
    layout_arg::{LayoutArgs, TextArgs},
};

/// The arguments of `idmint decode`.
#[derive(Debug, clap::Args)]
#[command(after_help = "With --layout auto, each ID is read as every format it fits: the built-in
layouts (see `idmint layouts`; snowflake is Twitter's), UUID v1-v8 (with Nil and Max), ULID,
KSUID, xid, MongoDB ObjectId, SCRU128, TSID, and Discord, Instagram and Mastodon IDs. The
candidates are ranked, best first: +3000 when marker bits match (a UUID's version and
variant); 2000-2999 for a time inside [2000-01-01, now + 1 day], more the closer to now; 1000
without a time (or with one that wraps, as trace-id's does); 0 for a time outside that window.
A bare integer fits many layouts alike: the best is then the most plausible time, not a
certainty. The table shows the best candidate, then the others one line each; --json adds
`candidates`, best first, each with its score and reason. --format and --epoch do not apply.

A 128-bit ID (UUIDv7, ULID, TypeID, hot-guid, ...) also shows its other text forms: uuid,
ulid, typeid (with the prefix it was read with), decimal and hex (`forms` in --json); `idmint
convert` writes one of them.

Examples:
  idmint decode 1541815603606036480
  idmint decode --layout flake --json 5828128208445124609
  idmint decode --layout flake --format base64le BXDOxnfZflk=
  idmint decode --layout lable cb54ecf2840a0015
  idmint decode --layout hot-guid --json 61ff0f80-981e-12e9-3401-e241d0000000
  idmint decode --layout uuid7 --type-prefix user \\
    user_01h455vb4pex5vsknk084sn02q
  idmint decode --layout auto 017F22E2-79B0-7CC3-98C4-DC0C0C07398F
  idmint decode --layout auto 0ujtsYcgvSTl8PAuAdqWYSMnLOv 9m4e2mr0ui3e8a215n4g
  idmint decode --layout auto --json 175928847299117063
  idmint gen -n 3 | idmint decode --json")]
pub(crate) struct Args {
    #[command(flatten)]
    layout: LayoutArgs,

    #[command(flatten)]
    text: TextArgs,

    /// Print one JSON object (layout, id, fields, time, and for a 128-bit ID its forms) per ID,
    /// one per line, instead of a table. A field that can hold a value above 2^53 - 1 is a
    /// string of decimal digits (JavaScript and jq 1.6 read no larger integer exactly); other
    /// fields are numbers. Default: a table per ID, with a blank line between tables.
    #[arg(long)]
    json: bool,

    /// The IDs to decode. With none, or `-`, they are read from stdin, one per line (blank
    /// lines are skipped).
    #[arg(value_name = "ID")]
    ids: Vec<String>,
}

/// What `decode --json` prints, in this order.
#[derive(Serialize)]
struct Decoded<'a> {
    layout: &'a str,
    /// The ID in the layout's usual form (a TypeID with `--type-prefix`), whatever form it was
    /// given in.
    id: String,
    fields: Fields<'a>,
    /// When the ID was issued (RFC 3339, UTC, ms); `null` for layouts without time.
    time: Option<String>,
    /// A 128-bit ID's other text forms; left out for other widths.
    #[serde(skip_serializing_if = "Option::is_none")]
    forms: Option<Forms>,
}

/// The largest integer a JavaScript number (and jq 1.6) holds exactly: 2^53 - 1.
pub(crate) const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Decoded fields as a JSON object, in the order given. A numeric field is a JSON number when
/// every value it can hold is at most 2^53 - 1, else a string of its decimal digits, so that
/// JavaScript's `JSON.parse` and jq read it exactly and a field's JSON type never depends on
/// its value.
pub(crate) struct Fields<'a>(Vec<(&'a str, &'a FieldValue, u64)>);

impl<'a> Fields<'a> {
    /// The fields of `layout`'s decoded ID, each with its largest value from the layout.
    fn of_layout(layout: &Layout, fields: &'a [(String, FieldValue)]) -> Self {
        let infos = layout.fields();
        Fields(
            fields
                .iter()
                .map(|(name, value)| {
                    let max = infos.iter().find(|f| f.name == *name).map(|f| f.max);
                    (name.as_str(), value, max.unwrap_or_else(|| number_of(value)))
                })
                .collect(),
        )
    }

    /// Fields with their largest values given.
    pub(crate) fn new(fields: Vec<(&'a str, &'a FieldValue, u64)>) -> Self {
        Fields(fields)
    }
}

/// A field's own value as its largest (for a field no layout describes); 0 for text.
pub(crate) fn number_of(value: &FieldValue) -> u64 {
    match value {
        FieldValue::Number(n) => *n,
        FieldValue::Text(_) => 0,
    }
}

impl Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value, max) in &self.0 {
            match value {
                FieldValue::Number(n) if *max > MAX_SAFE_INTEGER => {
                    map.serialize_entry(name, &n.to_string())?;
                }
                FieldValue::Number(n) => map.serialize_entry(name, n)?,
                FieldValue::Text(t) => map.serialize_entry(name, t)?,
            }
        }
        map.end()
    }
}

/// Runs `idmint decode`: every ID given, or every line of stdin. Stops at the first ID that
/// does not decode, naming its line.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    if args.layout.layout == auto::AUTO && args.layout.layout_file.is_none() {
        if args.text.format.is_some()
            || args.text.type_prefix.is_some()
            || args.layout.epoch.is_some()
        {
            anyhow::bail!(
                "--format, --type-prefix and --epoch cannot be used with --layout auto: the text form and the format are recognised"
            );
        }
        let now_ms = SystemClock.now_ms();
        let mut first = true;
        return each_id(&args.ids, out, |text, out| {
            auto::write(text, now_ms, args.json, &mut first, out)
        });
    }
    let layout = args.layout.resolve(None)?;
    let form = args.text.text(&layout)?;
    let usual = IdText::new(&layout, args.text.type_prefix.as_ref(), None)?;
    let now_ms = SystemClock.now_ms();
    let mut first = true;
    let mut one = |text: &str, out: &mut dyn Write| -> anyhow::Result<()> {
        let id = form
            .parse(&layout, text)
            .map_err(prefix_hint)
            .with_context(|| format!("cannot decode `{}` as {}", shorten(text), layout.name()))?;
        if args.json {
            write_json(&layout, id, &usual, now_ms, out)
        } else {
            if !first {
                writeln!(out)?;
            }
            first = false;
            write_table(&layout, id, usual.prefix(), now_ms, out)
        }
    };
    each_id(&args.ids, out, &mut one)
}

/// A refused TypeID prefix, with the flag that reads it.
fn prefix_hint(err: idmint_core::Error) -> anyhow::Error {
    match &err {
        idmint_core::Error::TypePrefixMismatch { found, .. } if found.is_empty() => {
            anyhow::anyhow!("{err}; leave out --type-prefix")
        }
        idmint_core::Error::TypePrefixMismatch { found, .. } => {
            anyhow::anyhow!("{err}; pass --type-prefix {found}")
        }
        _ => err.into(),
    }
}

/// Calls `one` on every ID given, or on every non-blank line of stdin (with `-` or none).
pub(crate) fn each_id<W: Write>(
    ids: &[String],
    out: &mut W,
    mut one: impl FnMut(&str, &mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if ids.is_empty() || ids == ["-"] {
        let stdin = std::io::stdin();
        for (number, line) in stdin.lock().lines().enumerate() {
            let line = line.context("cannot read stdin")?;
            let text = line.trim();
            if !text.is_empty() {
                one(text, out).with_context(|| format!("stdin line {}", number + 1))?;
            }
        }
    } else {
        for text in ids {
            one(text, out)?;
        }
    }
    Ok(())
}

/// An ID decoded, as `decode --json` (and `gen --json`, `encode --json`) print it.
fn decoded<'a>(
    layout: &'a Layout,
    id: AnyId,
    text: &IdText,
    fields: &'a [(String, FieldValue)],
    now_ms: u64,
) -> anyhow::Result<Decoded<'a>> {
    // trace-id's seconds wrap: they are read as the latest matching time up to a day after now.
    let time = layout.time_ms(id, now_ms)?.map(format_rfc3339_ms);
    Ok(Decoded {
        layout: layout.name(),
        id: text.write(id)?,
        fields: Fields::of_layout(layout, fields),
        time,
        forms: Forms::of(id, text.prefix()),
    })
}

/// Writes one ID as a JSON line: layout, id (in `text`), fields, time.
pub(crate) fn write_json(
    layout: &Layout,
    id: AnyId,
    text: &IdText,
    now_ms: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let fields = layout.decode(id)?;
    serde_json::to_writer(&mut *out, &decoded(layout, id, text, &fields, now_ms)?)?;
    writeln!(out)?;
    Ok(())
}

/// The readable form: one `name  value` line per item, values aligned; a 128-bit ID's other
/// forms last (its TypeID with `prefix`, if given).
fn write_table(
    layout: &Layout,
    id: AnyId,
    prefix: Option<&TypePrefix>,
    now_ms: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let fields = layout.decode(id)?;
    let decoded = decoded(layout, id, &IdText::new(layout, None, None)?, &fields, now_ms)?;
    let fields = &fields[..];
    let mut rows: Vec<(&str, String)> = vec![("layout", decoded.layout.to_owned())];
    rows.push(("id", decoded.id.clone()));
    if let Some(time) = &decoded.time {
        rows.push(("time", time.clone()));
    }
    // Bit widths mean something only for bit layouts (not for decimal-id's digits).
    let infos = if layout.segments().is_some() { layout.fields() } else { Vec::new() };
    let values: Vec<String> = fields.iter().map(|(_, value)| value.to_string()).collect();
    let value_pad = values.iter().map(String::len).max().unwrap_or(0);
    for ((name, _), value) in fields.iter().zip(values) {
        let value = match infos.iter().find(|f| f.name == *name) {
            Some(info) => format!("{value:<value_pad$}  ({} bits)", info.bits),
            None => value,
        };
        rows.push((name, value));
    }
    if let Some(forms) = Forms::of(id, prefix) {
        rows.extend(forms.rows());
    }
    let pad = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<pad$}  {value}")?;
    }
    Ok(())
}

/// The text of a refused ID as an error message shows it: at most 40 characters.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}
