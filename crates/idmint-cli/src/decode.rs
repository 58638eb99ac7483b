//! `idmint decode`: shows the fields of IDs and when they were issued, as tables or as JSON
//! lines; the IDs come from the command line or, one per line, from stdin. `--layout auto`
//! (in `auto.rs`) names the format of each ID first.

mod auto;

use std::io::{BufRead, Write};

use anyhow::Context;
use idmint_core::{AnyId, Clock, FieldValue, Format, Layout, SystemClock, format_rfc3339_ms};
use serde::{Serialize, ser::SerializeMap};

use crate::layout_arg::{LayoutArgs, format_for, parse_format};

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

Examples:
  idmint decode 1541815603606036480
  idmint decode --layout flake --json 5828128208445124609
  idmint decode --layout flake --format base64le BXDOxnfZflk=
  idmint decode --layout lable cb54ecf2840a0015
  idmint decode --layout hot-guid --json 61ff0f80-981e-12e9-3401-e241d0000000
  idmint decode --layout auto 017F22E2-79B0-7CC3-98C4-DC0C0C07398F
  idmint decode --layout auto 0ujtsYcgvSTl8PAuAdqWYSMnLOv 9m4e2mr0ui3e8a215n4g
  idmint decode --layout auto --json 175928847299117063
  idmint gen -n 3 | idmint decode --json")]
pub(crate) struct Args {
    #[command(flatten)]
    layout: LayoutArgs,

    /// The text form of ID (decimal, hex, binary, base64le, base64url, base32, base62, uuid,
    /// bytes, sqlguid-bytes). Default: the layout's usual form (hex for lable, uuid for hot-guid, decimal
    /// otherwise).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    format: Option<Format>,

    /// Print one JSON object (layout, id, fields, time) per ID, one per line, instead of a
    /// table. Default: a table per ID, with a blank line between tables.
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
    /// The ID in the layout's usual form, whatever form it was given in.
    id: String,
    fields: Fields<'a>,
    /// When the ID was issued (RFC 3339, UTC, ms); `null` for layouts without time.
    time: Option<String>,
}

/// The decoded fields as a JSON object, in the layout's order.
struct Fields<'a>(&'a [(String, FieldValue)]);

impl Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            match value {
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
        if args.format.is_some() || args.layout.epoch.is_some() {
            anyhow::bail!(
                "--format and --epoch cannot be used with --layout auto: the text form and the format are recognised"
            );
        }
        let now_ms = SystemClock.now_ms();
        let mut first = true;
        return each_id(&args.ids, out, |text, out| {
            auto::write(text, now_ms, args.json, &mut first, out)
        });
    }
    let layout = args.layout.resolve(None)?;
    let format = format_for(&layout, args.format)?;
    let now_ms = SystemClock.now_ms();
    let mut first = true;
    let mut one = |text: &str, out: &mut dyn Write| -> anyhow::Result<()> {
        let id = layout
            .parse(text, format)
            .with_context(|| format!("cannot decode `{}` as {}", shorten(text), layout.name()))?;
        if args.json {
            write_json(&layout, id, layout.default_format(), now_ms, out)
        } else {
            if !first {
                writeln!(out)?;
            }
            first = false;
            write_table(&layout, id, now_ms, out)
        }
    };
    each_id(&args.ids, out, &mut one)
}

/// Calls `one` on every ID given, or on every non-blank line of stdin (with `-` or none).
fn each_id<W: Write>(
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
    format: Format,
    fields: &'a [(String, FieldValue)],
    now_ms: u64,
) -> anyhow::Result<Decoded<'a>> {
    // trace-id's seconds wrap: they are read as the latest matching time up to a day after now.
    let time = layout.time_ms(id, now_ms)?.map(format_rfc3339_ms);
    Ok(Decoded {
        layout: layout.name(),
        id: layout.format(id, format)?,
        fields: Fields(fields),
        time,
    })
}

/// Writes one ID as a JSON line: layout, id (in `format`), fields, time.
pub(crate) fn write_json(
    layout: &Layout,
    id: AnyId,
    format: Format,
    now_ms: u64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let fields = layout.decode(id)?;
    serde_json::to_writer(&mut *out, &decoded(layout, id, format, &fields, now_ms)?)?;
    writeln!(out)?;
    Ok(())
}

/// The readable form: one `name  value` line per item, values aligned.
fn write_table(layout: &Layout, id: AnyId, now_ms: u64, out: &mut dyn Write) -> anyhow::Result<()> {
    let fields = layout.decode(id)?;
    let decoded = decoded(layout, id, layout.default_format(), &fields, now_ms)?;
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
    let pad = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, value) in rows {
        writeln!(out, "{name:<pad$}  {value}")?;
    }
    Ok(())
}

/// The text of a refused ID as an error message shows it: at most 40 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}
