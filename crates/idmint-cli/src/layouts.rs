//! `idmint layouts`: lists the built-in layouts, one line each.

use std::io::Write;

use idmint_core::Layout;

/// The arguments of `idmint layouts` (none).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint layouts
  idmint layouts | grep 128-bit
  idmint layouts --json")]
pub(crate) struct Args {
    /// Print a JSON array of objects (name, description) instead of aligned lines.
    #[arg(long)]
    json: bool,
}

/// One layout in `layouts --json`.
#[derive(serde::Serialize)]
struct Entry<'a> {
    name: &'a str,
    description: &'a str,
}

/// Runs `idmint layouts`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let builtins = Layout::builtins();
    if args.json {
        let entries: Vec<Entry<'_>> =
            builtins.iter().map(|(name, description)| Entry { name, description }).collect();
        serde_json::to_writer(&mut *out, &entries)?;
        writeln!(out)?;
        return Ok(());
    }
    let pad = builtins.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, description) in builtins {
        writeln!(out, "{name:<pad$}  {description}")?;
    }
    Ok(())
}
