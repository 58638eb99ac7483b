//! `idmint-chaos`: the chaos harness of idmint (RELIABILITY.md, "Chaos harness (process level)"). `run` starts real `idmint serve`
//! processes (and etcd) on loopback, drives clients that record Jepsen-style histories,
//! fires seeded nemeses (SIGKILL, SIGSTOP, clock steps under libfaketime, etcd member and
//! leader kills, partitions through a TCP proxy), checks every history, and runs negative
//! controls that must be caught; it ends with one JSON line on stdout. `check FILE...` replays
//! histories through the same checker. `scripts/chaos` is the entry point that builds it.

/// Progress on stderr (stdout holds only the final JSON line).
macro_rules! say {
    ($($arg:tt)*) => {{
        #[allow(clippy::print_stderr, reason = "the harness's progress")]
        {
            eprintln!($($arg)*);
        }
    }};
}
pub(crate) use say;

mod availability;
mod check;
mod client;
mod cluster;
mod error;
mod flood;
mod history;
mod nemesis;
mod proxy;
mod scenario;
mod watch;

use std::{collections::BTreeMap, path::PathBuf, process::ExitCode, time::Instant};

use clap::{Parser, Subcommand};

use crate::{
    error::ChaosError,
    nemesis::Rng,
    scenario::{Outcome, SCENARIOS, Setup},
};

/// The chaos harness of idmint.
#[derive(Debug, Parser)]
#[command(name = "idmint-chaos")]
struct Cli {
    #[command(subcommand)]
    command: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Run scenarios: --quick (every scenario and every negative control), --soak MINUTES,
    /// or --scenario NAME.
    Run(RunArgs),
    /// Check history files (JSON lines) and print the report; exit 1 if a check fails.
    Check {
        /// The histories; several are checked as one.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List the scenarios.
    List,
    /// Measure a fleet (`scripts/fleet-scale`): `--servers` servers cold-started at once on
    /// one 3-member etcd, then on one Postgres; ready time, coordinator load and CPU, mark
    /// writes, a rolling restart under load, and a write benchmark. Writes `fleet.json` per
    /// store and prints one JSON line.
    Fleet(FleetArgs),
}

#[derive(Debug, clap::Args)]
struct FleetArgs {
    /// The idmint binary under test (built with the `etcd` feature).
    #[arg(long)]
    idmint: PathBuf,
    /// Where logs, data and the reports go.
    #[arg(long, default_value = "target/fleet-scale")]
    out: PathBuf,
    /// How many `idmint serve` processes.
    #[arg(long, default_value_t = 200)]
    servers: usize,
    /// Which coordinators: etcd, postgres or both.
    #[arg(long, default_value = "both", value_parser = ["etcd", "postgres", "both"])]
    store: String,
    /// Scales the measurement windows (1.0: 20 s each).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The idmint binary under test (built with the `etcd` feature).
    #[arg(long)]
    idmint: PathBuf,
    /// The idmint binary built with `IDMINT_NEGATIVE_CONTROLS=1` (its hidden `--unsafe-no-…`
    /// flags), for negative controls.
    #[arg(long)]
    unsafe_idmint: Option<PathBuf>,
    /// Where histories, logs and data go.
    #[arg(long, default_value = "target/chaos")]
    out: PathBuf,
    /// Every scenario once, then every negative control.
    #[arg(long, conflicts_with_all = ["soak", "scenario"])]
    quick: bool,
    /// Scenarios with seeded nemeses, one after another, for this many minutes.
    #[arg(long, value_name = "MINUTES")]
    soak: Option<f64>,
    /// One scenario.
    #[arg(long, value_name = "NAME")]
    scenario: Option<String>,
    /// Run the scenario as its negative control (with --scenario).
    #[arg(long, requires = "scenario")]
    control: bool,
    /// The seed of every schedule [default: from the clock].
    #[arg(long)]
    seed: Option<u64>,
    /// Scales the load phases (1.0: the quick lengths).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Fail unless at least this many IDs were checked (over the scenarios, not controls).
    #[arg(long, default_value_t = 0)]
    min_ids: u64,
    /// Keep the histories of runs that passed (and of controls that were caught) [default:
    /// only those that failed are kept, for `check`: a quick run writes gigabytes].
    #[arg(long)]
    keep_histories: bool,
}

#[allow(clippy::print_stdout, clippy::print_stderr, reason = "a command line tool")]
fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Mode::Run(args) => run(&args),
        Mode::Check { files } => check_files(&files),
        Mode::Fleet(args) => fleet(&args),
        Mode::List => {
            for s in SCENARIOS {
                let control = s.control.map_or("-", scenario::Control::name);
                println!("{:24} {:8} control: {control}", s.name, s.anchor);
            }
            Ok(true)
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("idmint-chaos: {e}");
            ExitCode::from(2)
        }
    }
}

#[allow(clippy::print_stdout, reason = "the report")]
fn fleet(args: &FleetArgs) -> Result<bool, ChaosError> {
    let setup = Setup {
        idmint: args.idmint.clone(),
        unsafe_idmint: None,
        out: args.out.clone(),
        scale: args.scale,
        soak_minutes: 0.0,
        fleet_servers: args.servers,
    };
    let mut reports = serde_json::Map::new();
    let mut ok = true;
    for s in scenario::FLEET {
        if args.store != "both" && !s.name.ends_with(args.store.as_str()) {
            continue;
        }
        let outcome = scenario::run(&setup, s, None, 0)?;
        let r = &outcome.report;
        let dir = outcome.history.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
        let mut report: serde_json::Value = std::fs::read_to_string(dir.join("fleet.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        say!(
            "   {}: {} IDs checked, duplicates {}, order {}, unclaimed {}, {:.1} s",
            s.name,
            r.ids,
            r.duplicates,
            r.order_violations,
            r.unclaimed,
            outcome.seconds
        );
        for kind in &outcome.availability {
            say!("      {}", availability_line(kind));
        }
        if let serde_json::Value::Object(map) = &mut report {
            map.insert("ids_checked".into(), r.ids.into());
            map.insert("duplicates".into(), r.duplicates.into());
            map.insert("valid".into(), r.valid.into());
            map.insert("error".into(), outcome.error.clone().into());
            map.insert(
                "availability".into(),
                serde_json::to_value(&outcome.availability).unwrap_or_default(),
            );
        }
        if let Some(error) = &outcome.error {
            say!("   {}: ERROR {error}", s.name);
        }
        let passed = r.valid && outcome.error.is_none();
        if passed {
            // A history of hundreds of servers runs to gigabytes; a failed one is kept.
            let _ = std::fs::remove_file(&outcome.history);
        }
        ok &= passed;
        reports.insert(s.name.to_owned(), report);
    }
    println!("{}", serde_json::Value::Object(reports));
    Ok(ok)
}

#[allow(clippy::print_stdout, reason = "the report")]
fn check_files(files: &[PathBuf]) -> Result<bool, ChaosError> {
    let mut checker = check::Checker::default();
    for file in files {
        history::read(file, |event| checker.add(event))?;
    }
    let report = checker.finish();
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    println!("{text}");
    Ok(report.valid)
}

#[allow(clippy::print_stdout, clippy::print_stderr, reason = "the report")]
fn run(args: &RunArgs) -> Result<bool, ChaosError> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let setup = Setup {
        idmint: args.idmint.clone(),
        unsafe_idmint: args.unsafe_idmint.clone(),
        out: args.out.clone(),
        scale: args.scale,
        soak_minutes: args.soak.unwrap_or(0.0),
        fleet_servers: 0,
    };
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    // (scenario, as control?, seed)
    let mut plan: Vec<(scenario::Scenario, bool, u64)> = Vec::new();
    if args.quick {
        for s in SCENARIOS {
            plan.push((*s, false, rng.next_u64() % 1_000_000));
        }
        for s in SCENARIOS.iter().filter(|s| s.control.is_some()) {
            plan.push((*s, true, rng.next_u64() % 1_000_000));
        }
    } else if let Some(name) = &args.scenario {
        plan.push((scenario::find(name)?, args.control, seed));
    } else if args.soak.is_none() {
        return Err(ChaosError::Usage("give --quick, --soak MINUTES or --scenario NAME".into()));
    }
    if args.soak.is_some() {
        plan.push((scenario::SOAK, false, seed));
    }
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut errors: Vec<String> = Vec::new();
    let mut controls = (0u64, 0u64);
    let mut scenarios = (0u64, 0u64);
    for &(s, as_control, s_seed) in &plan {
        let control = if as_control { s.control } else { None };
        if as_control && control.is_none() {
            return Err(ChaosError::Usage(format!("{} has no negative control", s.name)));
        }
        let outcome = scenario::run(&setup, s, control, s_seed);
        match control {
            Some(_) => controls.0 += 1,
            None => scenarios.0 += 1,
        }
        match outcome {
            Ok(outcome) => {
                let r = &outcome.report;
                if let Some(error) = &outcome.error {
                    say!("   {} seed {}: ERROR {error}", outcome.scenario, outcome.seed);
                    errors.push(format!("{}: {error}", outcome.scenario));
                }
                let verdict = match control {
                    Some(_) if r.caught() && r.ids > 0 => {
                        controls.1 += 1;
                        "CAUGHT (as it must be)"
                    }
                    Some(_) => "NOT CAUGHT: the checker missed the removed protection",
                    None if r.valid && outcome.error.is_none() => {
                        scenarios.1 += 1;
                        "passed"
                    }
                    None => "FAILED",
                };
                eprintln!(
                    "   {}{} seed {}: {} ids, ok {} fail {} info {}, duplicates {}, order {}, unclaimed {}, held by another {}, above mark {} (at return {}), gaps {} ({} skipped), {:.1} s, max RSS {} KiB: {verdict}",
                    outcome.scenario,
                    control.map_or(String::new(), |c| format!(" [{}]", c.name())),
                    outcome.seed,
                    r.ids,
                    r.ok,
                    r.fail,
                    r.info,
                    r.duplicates,
                    r.order_violations,
                    r.unclaimed,
                    r.held_by_another,
                    r.above_mark,
                    r.above_mark_at_return,
                    r.gaps,
                    r.skipped,
                    outcome.seconds,
                    outcome.max_rss_kib,
                );
                for example in r
                    .duplicate_examples
                    .iter()
                    .chain(&r.order_examples)
                    .chain(&r.holder_examples)
                    .chain(&r.mark_examples)
                    .take(3)
                {
                    eprintln!("      e.g. {example}");
                }
                let expected = match control {
                    Some(_) => r.caught() && r.ids > 0,
                    None => r.valid && outcome.error.is_none(),
                };
                if expected && !args.keep_histories {
                    let _ = std::fs::remove_file(&outcome.history);
                    eprintln!("      history: removed (passed; --keep-histories keeps it)");
                } else {
                    eprintln!("      history: {}", outcome.history.display());
                }
                for kind in &outcome.availability {
                    eprintln!("      {}", availability_line(kind));
                }
                if outcome.rss_by_minute.len() > 1 {
                    eprintln!(
                        "      servers' peak RSS by minute (KiB): {:?}",
                        outcome.rss_by_minute
                    );
                }
                outcomes.push(outcome);
            }
            Err(e) => {
                eprintln!("   {} seed {s_seed}: ERROR {e}", s.name);
                errors.push(format!("{}: {e}", s.name));
            }
        }
    }
    let checked: Vec<&Outcome> = outcomes.iter().filter(|o| o.control.is_none()).collect();
    let ids: u64 = checked.iter().map(|o| o.report.ids).sum();
    let duplicates: u64 = checked.iter().map(|o| o.report.duplicates).sum();
    let order: u64 = checked.iter().map(|o| o.report.order_violations).sum();
    let nemeses: BTreeMap<String, u64> = scenario::nemeses(&outcomes);
    let enough = ids >= args.min_ids;
    if !enough {
        eprintln!("   only {ids} IDs checked, fewer than --min-ids {}", args.min_ids);
    }
    let availability: BTreeMap<String, &Vec<availability::KindReport>> =
        checked.iter().map(|o| (o.scenario.to_owned(), &o.availability)).collect();
    // The verdict, in the summary too: a run with a harness error (a process that did not
    // start, a control that ended early) fails even when every count above looks whole.
    let passed = errors.is_empty()
        && enough
        && scenarios.0 == scenarios.1
        && controls.0 == controls.1
        && scenarios.0 + controls.0 > 0;
    let summary = serde_json::json!({
        "passed": passed,
        "harness_errors": errors,
        "ids": ids,
        "duplicates": duplicates,
        "order_violations": order,
        "scenarios": scenarios.0,
        "scenarios_passed": scenarios.1,
        "negative_controls": controls.0,
        "negative_controls_caught": controls.1,
        "nemeses_fired": nemeses,
        "availability": availability,
        "seed": seed,
    });
    eprintln!("   wall time {:.1} s", started.elapsed().as_secs_f64());
    println!("{summary}");
    Ok(passed)
}

/// One kind of client's availability, as a line of the run's report: from the first fault on
/// when a fault was fired, else over the whole run.
fn availability_line(kind: &availability::KindReport) -> String {
    let (span, when) = match &kind.faults {
        Some(faults) => (faults, "from the first fault"),
        None => (&kind.run, "whole run"),
    };
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
    format!(
        "availability {} ({when}): {} of {} answered ({}), longest gap {:.2} s, p99 {}, p99.9 {}",
        kind.kind,
        span.answered,
        span.operations,
        span.answered_share.map_or("-".to_owned(), |s| format!("{:.3} %", s * 100.0)),
        span.longest_gap_s,
        ms(span.p99_ms),
        ms(span.p999_ms),
    )
}
