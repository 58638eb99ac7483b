//! `idmint keygen`, `idmint obfuscate` and `idmint reveal`: key files for public IDs (JSON:
//! method, version bits, active version, keys in hex), and the mapping of IDs read from the
//! command line or, one per line, from stdin, through `idmint_core::PublicIds`.

use std::{
    io::{BufRead, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, bail, ensure};
use idmint_core::{
    AnyId, Format, MAX_VERSION_BITS, PublicIdKey, PublicIdKeys, PublicIdMethod, PublicIds,
};

use crate::layout_arg::{LayoutArgs, format_for, parse_format};

/// The arguments of `idmint keygen`.
#[derive(Debug, clap::Args)]
#[command(after_help = "A key file is JSON: {\"method\", \"version_bits\", \"active\", \"keys\": \
[{\"version\", \"secret\"}]}. Keep it secret (mode 0600): with ff1, whoever has it can reveal \
every public ID. Each version bit halves the IDs a layout can issue; with 0, a key cannot be \
rotated without changing every public ID.

Examples:
  idmint keygen
  idmint keygen --version-bits 1
  idmint keygen --method multiply
  idmint keygen --rotate keys.json")]
pub(crate) struct KeygenArgs {
    /// ff1 (a keyed cipher: reversible only with the key) or multiply (looks random, not
    /// secret).
    #[arg(long, default_value = "ff1", value_parser = parse_method)]
    method: PublicIdMethod,
    /// How many top bits of a public ID carry its key version (0 to 4).
    #[arg(long, default_value_t = 0)]
    version_bits: u32,
    /// Add a new version to this key file and make it the active one (printed; the file is
    /// not changed).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["method", "version_bits"])]
    rotate: Option<PathBuf>,
}

/// The arguments of `idmint obfuscate` and `idmint reveal`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint keygen > keys.json
  idmint obfuscate --key-file keys.json 1541815603606036480
  idmint gen -n 3 | idmint obfuscate --key-file keys.json
  idmint obfuscate --key-file keys.json 1541815603606036480 \\
      | idmint reveal --key-file keys.json")]
pub(crate) struct MapArgs {
    /// The key file (`idmint keygen`).
    #[arg(long, value_name = "FILE")]
    key_file: PathBuf,
    #[command(flatten)]
    layout: LayoutArgs,
    /// The text form of IDs, in and out. Default: the layout's usual form.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    format: Option<Format>,
    /// The IDs. With none, or `-`, they are read from stdin, one per line.
    #[arg(value_name = "ID")]
    ids: Vec<String>,
}

fn parse_method(text: &str) -> Result<PublicIdMethod, String> {
    text.parse().map_err(|e: idmint_core::Error| e.to_string())
}

/// `idmint keygen`.
pub(crate) fn keygen(args: &KeygenArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let keys = match &args.rotate {
        Some(path) => {
            let mut keys = read_keys(path)?;
            let taken: Vec<u8> = keys.keys.iter().map(|k| k.version).collect();
            let slots = 1_u16 << keys.version_bits;
            let Some(version) =
                (0..slots).filter_map(|v| u8::try_from(v).ok()).find(|v| !taken.contains(v))
            else {
                bail!(
                    "{} has every version its {} version bits allow; remove a retired one first",
                    path.display(),
                    keys.version_bits
                );
            };
            keys.keys.push(PublicIdKey { version, secret: secret(keys.method)? });
            keys.active = version;
            keys
        }
        None => {
            ensure!(
                args.version_bits <= MAX_VERSION_BITS,
                "--version-bits must be 0 to {MAX_VERSION_BITS}, not {}",
                args.version_bits
            );
            PublicIdKeys {
                method: args.method,
                version_bits: args.version_bits,
                active: 0,
                keys: vec![PublicIdKey { version: 0, secret: secret(args.method)? }],
            }
        }
    };
    keys.check()?;
    serde_json::to_writer_pretty(&mut *out, &keys)?;
    writeln!(out)?;
    Ok(())
}

/// A new secret from the operating system's generator: an AES-256 key, or an odd multiplier.
fn secret(method: PublicIdMethod) -> anyhow::Result<Vec<u8>> {
    let mut bytes = vec![0; if method == PublicIdMethod::Ff1 { 32 } else { 16 }];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no random bytes: {e}"))?;
    if method == PublicIdMethod::Multiply {
        bytes[15] |= 1;
    }
    Ok(bytes)
}

/// Reads and checks a key file (as the server does).
pub(crate) fn read_keys(path: &Path) -> anyhow::Result<PublicIdKeys> {
    Ok(idmint_server::load_public_id_keys(path)?)
}

/// `idmint obfuscate` (`forward`) and `idmint reveal`.
pub(crate) fn map(
    args: &MapArgs,
    forward: bool,
    input: impl BufRead,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let layout = args.layout.resolve(None)?;
    let format = format_for(&layout, args.format)?;
    let ids = PublicIds::new(&layout, &read_keys(&args.key_file)?)?;
    let mut one = |text: &str| -> anyhow::Result<()> {
        let id = layout
            .parse(text, format)
            .or_else(|e| match forward {
                true => Err(e),
                // A public ID need not decode as a layout ID; only its width and domain count.
                false if layout.id_bits() == 128 => format.parse_u128(text).map(AnyId::U128),
                false => format.parse_u64(text).map(AnyId::U64),
            })
            .with_context(|| format!("`{text}` is not a {} id", layout.name()))?;
        let mapped = if forward { ids.obfuscate(id) } else { ids.reveal(id) }
            .with_context(|| format!("`{text}`"))?;
        writeln!(out, "{}", layout.format(mapped, format)?)?;
        Ok(())
    };
    if args.ids.is_empty() || args.ids == ["-"] {
        for line in input.lines() {
            let line = line.context("cannot read stdin")?;
            if !line.trim().is_empty() {
                one(line.trim())?;
            }
        }
    } else {
        for text in &args.ids {
            one(text)?;
        }
    }
    Ok(())
}
