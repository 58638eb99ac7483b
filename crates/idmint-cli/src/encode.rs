//! `idmint encode`: builds an ID from the values of all its fields and prints it, alone.

use std::io::Write;

use idmint_core::{Clock, Format, SystemClock};

use crate::layout_arg::{LayoutArgs, format_for, parse_fields, parse_format};

/// The arguments of `idmint encode`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint encode timestamp=1000 datacenter=1 worker=7 sequence=0
  idmint encode --layout decimal-id counter=1415 generator_id=92 launch_id=65
  idmint encode --layout icicle --format base32 timestamp=1 shard=1 sequence=0
  idmint encode --layout lable timestamp=0 sequence=0 generator_id=1 \\
      cluster_id=5 mode=spread
  idmint encode --json timestamp=1000 datacenter=1 worker=7 sequence=0")]
pub(crate) struct Args {
    #[command(flatten)]
    layout: LayoutArgs,

    /// The text form of the ID (decimal, hex, binary, base64le, base64url, base32, base62,
    /// uuid, bytes, sqlguid-bytes). Default: the layout's usual form (hex for lable, uuid for hot-guid,
    /// decimal otherwise).
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    format: Option<Format>,

    /// Print a JSON object (layout, id, fields, time) instead of the ID alone.
    #[arg(long)]
    json: bool,

    /// Every field of the layout as NAME=VALUE: decimal integers, except `mode` (lable:
    /// spread or time-sequential) and `process` (hot-guid: 10 hex digits). No default: all
    /// fields are required.
    #[arg(value_name = "NAME=VALUE")]
    fields: Vec<String>,
}

/// Runs `idmint encode`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let layout = args.layout.resolve(None)?;
    let format = format_for(&layout, args.format)?;
    let fields = parse_fields(&layout, &args.fields)?;
    let id = layout.encode(&fields)?;
    if args.json {
        let text =
            idmint_core::IdText::new(&layout, None, Some(idmint_core::IdForm::Format(format)))?;
        crate::decode::write_json(&layout, id, &text, SystemClock.now_ms(), out)?;
    } else {
        writeln!(out, "{}", layout.format(id, format)?)?;
    }
    Ok(())
}
