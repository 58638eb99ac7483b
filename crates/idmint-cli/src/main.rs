//! The `idmint` binary: parses the command line and hands each command to its module.
//!
//! This crate turns flags into calls on `idmint-core` (and `idmint-runtime`) and owns exit
//! codes and messages; it holds no ID logic of its own. Every failure ends as one line on
//! stderr, `error: <message>`, with exit code 1 (2 for a command line clap refuses).

mod bench;
mod config;
mod decode;
mod encode;
mod explain;
mod generate;
mod icicle;
mod layout_arg;
mod layouts;
mod lease;
mod serve;

use std::{
    io::{self, BufWriter, Write},
    process::ExitCode,
};

use clap::{
    CommandFactory, Parser, Subcommand,
    error::{ContextKind, ContextValue, ErrorKind},
};

/// Generate, encode, decode and explain unique IDs of many layouts.
#[derive(Debug, Parser)]
#[command(
    name = "idmint",
    version,
    after_help = "Examples:
  idmint gen -n 5 datacenter=1 worker=7
  idmint encode --layout decimal-id counter=1415 generator_id=92 launch_id=65
  idmint decode --layout flake --json 5828128208445124609
  idmint explain snowflake
  idmint layouts
  idmint serve
  idmint serve --layout sequence"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate unique IDs, one per line.
    #[command(name = "gen")]
    Gen(generate::Args),
    /// Build an ID from the values of its fields.
    Encode(encode::Args),
    /// Show the fields of an ID.
    Decode(decode::Args),
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
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
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

/// Runs one command with stdout buffered and locked, and flushes it at the end.
fn run(command: Command) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    match command {
        Command::Gen(args) => generate::run(&args, &mut out)?,
        Command::Encode(args) => encode::run(&args, &mut out)?,
        Command::Decode(args) => decode::run(&args, &mut out)?,
        Command::Explain(args) => explain::run(&args, &mut out)?,
        Command::Layouts(args) => layouts::run(&args, &mut out)?,
        Command::Serve(args) => serve::run(&args)?,
        Command::Icicle(args) => icicle::run(&args, &mut out)?,
        Command::Lease(args) => lease::run(&args, &mut out)?,
        Command::Bench(args) => bench::run(&args, &mut out)?,
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
/// 0; errors are shortened to their first line and exit 2.
fn clap_exit(err: &clap::Error) -> ExitCode {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            ExitCode::SUCCESS
        }
        _ => {
            report(&clap_message(err));
            ExitCode::from(2)
        }
    }
}

/// The first line of clap's message, without its `error:` prefix, completed where the first
/// line alone would not say what is missing.
fn clap_message(err: &clap::Error) -> String {
    let strings = |kind| match err.get(kind) {
        Some(ContextValue::Strings(values)) => values.join(", "),
        Some(ContextValue::String(value)) => value.clone(),
        _ => String::new(),
    };
    match err.kind() {
        ErrorKind::MissingRequiredArgument => {
            format!("missing required argument: {}", strings(ContextKind::InvalidArg))
        }
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let names: Vec<String> =
                Cli::command().get_subcommands().map(|c| c.get_name().to_owned()).collect();
            format!("no command given (expected one of: {}); see `idmint --help`", names.join(", "))
        }
        _ => {
            let rendered = err.render().to_string();
            let first =
                rendered.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
            first.strip_prefix("error:").unwrap_or(first).trim().to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
