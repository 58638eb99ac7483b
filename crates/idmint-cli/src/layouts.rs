//! `idmint layouts`: lists the built-in layouts, one line each.

use std::io::Write;

use idmint_core::Layout;

/// The arguments of `idmint layouts` (none).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint layouts
  idmint layouts | grep 128-bit")]
pub(crate) struct Args {}

/// Runs `idmint layouts`.
pub(crate) fn run(_args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let builtins = Layout::builtins();
    let pad = builtins.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    for (name, description) in builtins {
        writeln!(out, "{name:<pad$}  {description}")?;
    }
    Ok(())
}
