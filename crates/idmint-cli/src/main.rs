//! The `idmint` binary: parses the command line and hands each command to its module.
//!
//! This crate turns flags into calls on `idmint-core` (and `idmint-runtime`) and owns exit
//! codes and messages; it holds no ID logic of its own. Every failure ends as one line on
//! stderr, `error: <message>`, with exit code 1; a command line clap refuses gets clap's whole
//! message (its tip and usage too) and exit code 2.

mod analyze;
mod bench;
mod color;
mod completions;
mod config;
mod controls;
mod convert;
mod decode;
mod doctor;
mod encode;
mod explain;
mod generate;
mod icicle;
mod layout_arg;
mod layouts;
mod lease;
mod logging;
mod memory;
mod public_ids;
mod serve;

use std::{
    io::{self, BufWriter, Write},
    process::ExitCode,
};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, error::ErrorKind};

/// Generate, encode, decode and explain unique IDs of many layouts.
#[derive(Debug, Parser)]
#[command(
    name = "idmint",
    version,
    after_help = "Examples:
  idmint gen -n 5 datacenter=1 worker=7
  idmint encode --layout decimal-id counter=1415 generator_id=92 launch_id=65
  idmint decode --layout flake --json 5828128208445124609
  idmint convert --to uuid user_01h455vb4pex5vsknk084sn02q
  idmint explain snowflake
  idmint layouts
  idmint serve
  idmint serve --layout sequence
  idmint doctor ./idmint-data
  idmint completions bash > /etc/bash_completion.d/idmint"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// When to colour the output: auto (a terminal, and NO_COLOR unset), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value = "auto")]
    color: color::ColorWhen,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate IDs, one per line: unique within the run and against earlier runs with the
    /// same node fields (each run ends after its last ID's tick). With a store (--data-dir,
    /// --postgres, --etcd or --config) also against runs at the same time and with the clock
    /// set back: each run claims a generator ID of its own there and stores its marks.
    #[command(name = "gen")]
    Gen(generate::Args),
    /// Build an ID from the values of its fields.
    Encode(encode::Args),
    /// Show the fields of an ID.
    Decode(decode::Args),
    /// Write IDs in another form: uuid, ulid, typeid, decimal or hex.
    Convert(convert::Args),
    /// Run a randomness battery over IDs read from stdin; exit 1 when they do not look random.
    Analyze(analyze::Args),
    /// Print a new key file for public IDs (or one with a new key version: --rotate).
    Keygen(public_ids::KeygenArgs),
    /// Map IDs to their public form (a keyed permutation of the layout's domain).
    Obfuscate(public_ids::MapArgs),
    /// Map public IDs back to the IDs behind them (needs the key file).
    Reveal(public_ids::MapArgs),
    /// Draw a layout's bits and say how long and how fast it lasts.
    Explain(explain::Args),
    /// List the built-in layouts.
    Layouts(layouts::Args),
    /// Serve IDs over HTTP and gRPC, durably, on the embedded store, etcd, Postgres or Redis.
    Serve(Box<serve::Args>),
    /// Set up Redis nodes for icicle IDs (`idmint serve --source redis`).
    Icicle(icicle::Args),
    /// Show generator-ID claims and high-water marks (etcd or the embedded store).
    Lease(lease::Args),
    /// Load a running server and report rates and latencies (for benchmarks).
    Bench(bench::Args),
    /// Check a data directory against its journal (copied, restored, lost or rolled-back
    /// files), without changing it.
    Doctor(doctor::Args),
    /// Print a shell completion script (bash, zsh, fish, powershell, elvish).
    Completions(completions::CompletionsArgs),
    /// Write man pages for idmint and each of its commands.
    Man(completions::ManArgs),
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let choice = color::decide(&args);
    let parsed = command()
        .color(color::clap_choice(choice))
        .try_get_matches_from(&args)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => return clap_exit(&err),
    };
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`idmint gen | head`): there is no one left to tell.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            report(&format!("{err:#}"));
            ExitCode::FAILURE
        }
    }
}

/// The command line's definition: `Cli`'s, with the defaults `serve --help` shows filled in
/// from the constants a run uses.
fn command() -> clap::Command {
    Cli::command().mut_subcommand("serve", serve::with_help_defaults).mut_subcommand("gen", |c| {
        serve::with_defaults_of(c, |id| ["lease_ttl", "window_ms"].contains(&id))
    })
}

/// Runs one command with stdout buffered and locked, and flushes it at the end.
fn run(command: Command) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    match command {
        Command::Gen(args) => generate::run(&args, &mut out)?,
        Command::Encode(args) => encode::run(&args, &mut out)?,
        Command::Decode(args) => decode::run(&args, &mut out)?,
        Command::Convert(args) => convert::run(&args, &mut out)?,
        Command::Analyze(args) => analyze::run(&args, io::stdin().lock(), &mut out)?,
        Command::Keygen(args) => public_ids::keygen(&args, &mut out)?,
        Command::Obfuscate(args) => public_ids::map(&args, true, io::stdin().lock(), &mut out)?,
        Command::Reveal(args) => public_ids::map(&args, false, io::stdin().lock(), &mut out)?,
        Command::Explain(args) => explain::run(&args, &mut out)?,
        Command::Layouts(args) => layouts::run(&args, &mut out)?,
        Command::Serve(args) => serve::run(&args)?,
        Command::Icicle(args) => icicle::run(&args, &mut out)?,
        Command::Lease(args) => lease::run(&args, &mut out)?,
        Command::Bench(args) => bench::run(&args, &mut out)?,
        Command::Doctor(args) => doctor::run(&args, &mut out)?,
        Command::Completions(args) => completions::completions(&args, &mut out)?,
        Command::Man(args) => completions::man(&args, &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// Whether the error is a write to a closed pipe.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|io| io.kind() == io::ErrorKind::BrokenPipe)
}

/// Writes `error: <message>` to stderr as a single line.
fn report(message: &str) {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    // Nothing sensible is left to do if stderr itself is gone.
    let _ = writeln!(io::stderr(), "error: {line}");
}

/// Handles what clap refused (or answered itself): help and version print as usual and exit
/// 0; errors print clap's whole message, with its tip ("a similar subcommand exists") and
/// usage, and exit 2.
fn clap_exit(err: &clap::Error) -> ExitCode {
    if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        // clap prints the help alone: say first what went wrong.
        let _ = writeln!(io::stderr(), "error: no command given\n");
    }
    // Nothing sensible is left to do if stdout or stderr is gone.
    let _ = err.print();
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        _ => ExitCode::from(2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        command().debug_assert();
    }
}
