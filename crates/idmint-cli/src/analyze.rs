//! `idmint analyze`: reads IDs (one per line) and runs a randomness battery over their bits and
//! bytes (`battery`), to tell whether IDs look predictable. It prints each statistic with its
//! p-value and a verdict at a significance level corrected for the number of tests
//! (Bonferroni), and exits 0 when every test passes, 1 when one fails.

mod battery;

use std::{
    io::{BufRead, Write},
    path::PathBuf,
};

use anyhow::{Context, bail, ensure};
use idmint_core::{AnyId, Format, Layout};

use crate::layout_arg::{LayoutArgs, format_for, parse_format};

/// The arguments of `idmint analyze`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The bits under test are each ID's domain bits (63 for a snowflake ID, whose \
bit 63 is always 0; 53 for js53; 64; 128), most significant first, concatenated; the bytes \
are those bits packed 8 at a time. Time-ordered IDs fail; IDs that look random pass. A pass \
says nothing about secrecy: multiplicative hashing passes and is not secret.

Examples:
  idmint gen -n 1000000 | idmint analyze
  idmint gen -n 1000000 | idmint analyze --json --alpha 0.001
  head -c 8000000 /dev/urandom | od -An -v -tu8 -w8 | tr -d ' ' \\
      | idmint analyze --layout flake"
)]
pub(crate) struct Args {
    #[command(flatten)]
    layout: LayoutArgs,
    /// The text form of the IDs. Default: the layout's usual form.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    format: Option<Format>,
    /// The significance level of the whole battery, divided among its tests (Bonferroni).
    #[arg(long, value_name = "ALPHA", default_value_t = 0.01)]
    alpha: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Also write the bytes under test to this file (to compare with `ent`, for one).
    #[arg(long, value_name = "FILE")]
    bytes_out: Option<PathBuf>,
}

/// At least this many bits: the longest-run and serial tests need them.
const MIN_BITS: usize = 100_000;

pub(crate) fn run(args: &Args, input: impl BufRead, out: &mut impl Write) -> anyhow::Result<()> {
    ensure!(
        args.alpha > 0.0 && args.alpha < 1.0,
        "--alpha must be between 0 and 1, not {}",
        args.alpha
    );
    let layout = args.layout.resolve(None)?;
    let format = format_for(&layout, args.format)?;
    let width = domain_bits(&layout);
    let mut values = Vec::new();
    for (index, line) in input.lines().enumerate() {
        let line = line.context("cannot read stdin")?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let id = layout.parse(text, format).with_context(|| {
            format!("line {}: `{text}` is not a {} id", index + 1, layout.name())
        })?;
        values.push(match id {
            AnyId::U64(v) => u128::from(v),
            AnyId::U128(v) => v,
        });
    }
    let bits = battery::Bits::from_values(&values, width);
    if bits.len() < MIN_BITS {
        bail!(
            "{} ids of {width} bits are {} bits; the battery needs at least {MIN_BITS}",
            values.len(),
            bits.len()
        );
    }
    if let Some(path) = &args.bytes_out {
        std::fs::write(path, bits.bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let outcomes = battery::run_all(&bits);
    let tests = outcomes.iter().filter(|o| o.p_value.is_some()).count();
    let threshold = args.alpha / tests as f64;
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.p_value.is_some_and(|p| p < threshold))
        .map(|o| o.name)
        .collect();
    if args.json {
        let answer = serde_json::json!({
            "layout": layout.name(),
            "ids": values.len(),
            "bits_per_id": width,
            "bits": bits.len(),
            "alpha": args.alpha,
            "tests": tests,
            "threshold": threshold,
            "random": failed.is_empty(),
            "outcomes": outcomes,
        });
        serde_json::to_writer(&mut *out, &answer)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{} {} ids, {width} bits each: {} bits; alpha {} over {tests} tests: p < {threshold:.2e} fails\n",
            values.len(),
            layout.name(),
            bits.len(),
            args.alpha
        )?;
        writeln!(out, "{:<28} {:>16} {:>12}  verdict  detail", "test", "statistic", "p-value")?;
        for o in &outcomes {
            let (p, verdict) = match o.p_value {
                Some(p) if p < threshold => (format!("{p:.6}"), "FAIL"),
                Some(p) => (format!("{p:.6}"), "pass"),
                None => ("-".to_owned(), "-"),
            };
            writeln!(
                out,
                "{:<28} {:>16.6} {p:>12}  {verdict:<7}  {}",
                o.name, o.statistic, o.detail
            )?;
        }
    }
    out.flush()?;
    if !failed.is_empty() {
        bail!("the ids do not look random: {} failed at alpha {}", failed.join(", "), args.alpha);
    }
    Ok(())
}

/// The bits an ID of the layout can vary: its width less the bits its diagram fixes at 0 on
/// top (63 for snowflake, 53 for js53).
fn domain_bits(layout: &Layout) -> usize {
    let width = layout.id_bits() as usize;
    let fixed = layout.segments().map_or(0, |segments| {
        let mut top = width;
        let mut fixed = 0;
        let mut sorted = segments;
        sorted.sort_by_key(|s| std::cmp::Reverse(s.msb));
        for s in sorted {
            if s.msb as usize + 1 != top || s.label != "0" {
                break;
            }
            fixed += (s.msb - s.lsb + 1) as usize;
            top = s.lsb as usize;
        }
        fixed
    });
    width - fixed
}
