//! `idmint doctor`: reports the state of a data directory (its identity, every mark, segment
//! and counter, and anything that is not what idmint last wrote) without changing it.

use std::{io::Write, path::PathBuf};

use idmint_coord::{DataDirReport, FLEET_DIR, FileCoordinator, FileStore, Remembered};

use crate::serve::FILE_STORE_DIR;

/// The arguments of `idmint doctor`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: 0 when the directory is what idmint last wrote, 1 when \
it is not (the problems are listed; `idmint serve` would refuse it), 2 for bad arguments.

Examples:
  idmint doctor ./idmint-data
  idmint doctor --json /var/lib/idmint | jq .problems")]
pub(crate) struct Args {
    /// The data directory of `idmint serve` (its `store.d` and `fleet.d` are checked too, if
    /// present).
    data_dir: PathBuf,
    /// Print the reports as JSON, one object per directory.
    #[arg(long)]
    json: bool,
}

/// Runs `idmint doctor`. Fails (exit 1) when a directory has problems.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    anyhow::ensure!(args.data_dir.is_dir(), "{} is not a directory", args.data_dir.display());
    let mut reports = vec![FileCoordinator::inspect(&args.data_dir)?];
    let store = args.data_dir.join(FILE_STORE_DIR);
    if store.is_dir() {
        reports.push(FileStore::inspect(&store)?);
    }
    let fleet = args.data_dir.join(FLEET_DIR);
    if fleet.is_dir() {
        reports.push(Remembered::inspect(&fleet)?);
    }
    for report in &reports {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(report)?)?;
        } else {
            write_report(report, out)?;
        }
    }
    let problems: usize = reports.iter().map(|r| r.problems.len()).sum();
    out.flush()?;
    anyhow::ensure!(
        problems == 0,
        "{problems} problem(s) found: idmint serve would refuse this data directory; see RELIABILITY.md for the recovery steps"
    );
    Ok(())
}

/// One directory's report as text.
fn write_report(report: &DataDirReport, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(out, "{}", report.dir)?;
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".to_owned());
    writeln!(out, "  instance:   {}", or_none(&report.instance))?;
    writeln!(out, "  host:       {}", or_none(&report.host))?;
    writeln!(
        out,
        "  generation: {}",
        report.generation.map_or("none".to_owned(), |g| g.to_string())
    )?;
    let (device, inode) = report.device_inode;
    let recorded = report
        .recorded_device_inode
        .map_or("none".to_owned(), |(d, i)| format!("device {d} inode {i}"));
    writeln!(out, "  location:   device {device} inode {inode} (recorded: {recorded})")?;
    if report.floor_ms > 0 {
        writeln!(out, "  adopted:    claims start above {} (Unix ms)", report.floor_ms)?;
    }
    for file in &report.files {
        let recorded = file.recorded.map_or("-".to_owned(), |v| v.to_string());
        writeln!(out, "  {:<32} journal {recorded:<16} file {}", file.key, file.on_disk)?;
    }
    if report.problems.is_empty() {
        writeln!(out, "  ok: what idmint last wrote")?;
    }
    for problem in &report.problems {
        writeln!(out, "  problem: {problem}")?;
    }
    Ok(())
}
