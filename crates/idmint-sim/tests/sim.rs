//! The simulation's tests: thousands of seeds in CI (more with `IDMINT_SIM_SEEDS`), the saved
//! regression seeds, the negative control (no fence), replay, determinism, and the etcd
//! model against the coordinator conformance suite.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds, conformance};
use idmint_sim::{
    EtcdOptions, FleetOptions, Machine, Report, SimEtcd, SimOptions, run_fleet, run_seed,
};

/// Seeds run by default (CI).
const CI_SEEDS: u64 = 2_000;
/// The fence-less variant must show a duplicate within this many seeds (about 1 seed in 100
/// does; with `--cfg tokio_unstable` the first is seed 81).
const CONTROL_SEEDS: u64 = 1_000;
/// Whether runs are exact replays: tokio's `select!` draws from a seeded generator only under
/// `--cfg tokio_unstable` (`scripts/sim` sets it).
const EXACT: bool = cfg!(tokio_unstable);
/// Saved failing seeds: one `seed` (fenced) or `seed nofence` per line, `#` comments.
const REGRESSIONS: &str = include_str!("regressions.txt");

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => {
            text.trim().parse().unwrap_or_else(|_| panic!("{name}={text:?} is not a number"))
        }
        Err(_) => default,
    }
}

fn replay_command(seed: u64, fence: bool) -> String {
    let fence = if fence { "" } else { " IDMINT_SIM_FENCE=off" };
    format!("IDMINT_SIM_SEED={seed}{fence} scripts/sim replay")
}

#[allow(clippy::print_stderr)]
fn note(text: &str) {
    eprintln!("{text}");
}

/// Runs `seeds` on as many threads as the machine has cores; returns the failing reports and
/// the totals.
fn run_many(seeds: std::ops::Range<u64>, options: &SimOptions) -> (Vec<Report>, Report, f64) {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    let next = AtomicU64::new(seeds.start);
    let failures = Mutex::new(Vec::new());
    let total = Mutex::new(Report::default());
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= seeds.end {
                        return;
                    }
                    let report = run_seed(seed, options);
                    if !report.ok() {
                        note(&format!(
                            "FAILED {report}\n  replay: {}",
                            replay_command(seed, options.etcd.fence)
                        ));
                        failures.lock().expect("failures").push(report.clone());
                    }
                    let mut total = total.lock().expect("total");
                    total.ids += report.ids;
                    total.acked += report.acked;
                    total.failed += report.failed;
                    total.info += report.info;
                    total.duplicates += report.duplicates;
                    for (name, n) in report.nemeses {
                        *total.nemeses.entry(name).or_default() += n;
                    }
                    for (reason, n) in report.failures {
                        *total.failures.entry(reason).or_default() += n;
                    }
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    let mut failures = failures.into_inner().expect("failures");
    failures.sort_by_key(|r| r.seed);
    (failures, total.into_inner().expect("total"), seconds)
}

/// Appends failing seeds to `tests/regressions.txt`, so that every later run replays them.
fn save_regressions(failures: &[Report]) {
    use std::io::Write as _;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/regressions.txt");
    let mut file =
        std::fs::OpenOptions::new().append(true).open(path).expect("open regressions.txt");
    for report in failures {
        let summary = report.to_string();
        let first_line = summary.lines().next().unwrap_or_default();
        writeln!(file, "# {first_line}\n{}", report.seed).expect("write regressions.txt");
    }
}

/// CI: 2,000 seeds (override with `IDMINT_SIM_SEEDS`, start with `IDMINT_SIM_FIRST_SEED`); every
/// invariant holds on every seed, and every nemesis fired.
#[test]
fn seeds() {
    let count = env_u64("IDMINT_SIM_SEEDS", CI_SEEDS);
    let first = env_u64("IDMINT_SIM_FIRST_SEED", 0);
    let (failures, total, seconds) = run_many(first..first + count, &SimOptions::default());
    note(&format!(
        "{count} seeds in {seconds:.1} s ({:.0} seeds/s): {} ids in {} requests ({} failed: {:?}; {} ambiguous), {} duplicates; nemeses {:?}",
        count as f64 / seconds,
        total.ids,
        total.acked,
        total.failed,
        total.failures,
        total.info,
        total.duplicates,
        total.nemeses
    ));
    let failed: Vec<u64> = failures.iter().map(|r| r.seed).collect();
    if !failed.is_empty() {
        save_regressions(&failures);
    }
    assert!(failed.is_empty(), "failing seeds {failed:?}, saved in tests/regressions.txt");
    assert!(total.ids >= count * 1_000, "too few ids checked: {}", total.ids);
    for nemesis in [
        "partition-etcd-hang",
        "partition-etcd-refuse",
        "partition-clients",
        "pause",
        "clock-back",
        "clock-forward",
        "crash",
        "restart",
    ] {
        assert!(total.nemeses.get(nemesis).is_some_and(|&n| n > 0), "{nemesis} never fired");
    }
}

/// Every seed saved in `tests/regressions.txt` passes with the fence; each `nofence` seed still
/// finds a duplicate without it (checked in exact runs, where a seed replays one history).
#[test]
fn regressions() {
    let mut checked = 0;
    for line in REGRESSIONS.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let mut words = line.split_whitespace();
        let seed: u64 = words.next().and_then(|w| w.parse().ok()).expect("a seed");
        let fence = words.next() != Some("nofence");
        if !fence && !EXACT {
            note(&format!("regression `{line}` is checked by exact runs only (scripts/sim)"));
            continue;
        }
        let options = if fence { SimOptions::default() } else { SimOptions::without_fence() };
        let report = run_seed(seed, &options);
        if fence {
            assert!(report.ok(), "regression {report}\n  replay: {}", replay_command(seed, fence));
        } else {
            assert!(report.duplicates > 0, "control seed {seed} finds no duplicate: {report}");
        }
        checked += 1;
    }
    assert!(checked > 0, "tests/regressions.txt lists no seed");
}

/// The negative control: without the fence (a mark write succeeds after the writer's lease
/// expired), the checker catches the run, and a duplicate is found, within `CONTROL_SEEDS`.
#[test]
fn without_the_fence_a_duplicate_is_found() {
    let options = SimOptions::without_fence();
    let mut caught = None;
    let mut duplicate = None;
    for seed in 0..CONTROL_SEEDS {
        let report = run_seed(seed, &options);
        if !report.ok() && caught.is_none() {
            caught = Some(report.seed);
        }
        if report.duplicates > 0 {
            duplicate = Some(report);
            break;
        }
    }
    let caught =
        caught.unwrap_or_else(|| panic!("no seed of {CONTROL_SEEDS} caught the missing fence"));
    let report = duplicate.unwrap_or_else(|| {
        panic!("no duplicate in {CONTROL_SEEDS} seeds without the fence: the simulation is blind")
    });
    note(&format!(
        "negative control: first caught at seed {caught}, first duplicate at {report}\n  replay: {}",
        replay_command(report.seed, false)
    ));
    assert!(report.mark_violations > 0, "a duplicate implies an id above its issuer's fenced mark");
    assert!(report.unheld_writes > 0, "the run wrote a mark without the claim");
}

/// One seed, twice: the same faults and, in exact runs, the same history.
#[test]
fn a_seed_replays_the_same_history() {
    for seed in [3, 77, 1_000_003] {
        let options = SimOptions::default();
        let (a, b) = (run_seed(seed, &options), run_seed(seed, &options));
        assert_eq!(a.nemeses, b.nemeses, "seed {seed}: the fault schedule is the seed's");
        if EXACT {
            assert_eq!(
                (a.trace_hash, a.ids, a.acked),
                (b.trace_hash, b.ids, b.acked),
                "seed {seed}"
            );
        }
        assert!(a.ids > 0 && a.ok() && b.ok(), "seed {seed}: {a}");
    }
}

/// `IDMINT_SIM_SEED=N [IDMINT_SIM_FENCE=off]`: runs one seed and prints its report.
#[test]
#[ignore = "replays the seed in IDMINT_SIM_SEED"]
fn replay() {
    let seed = std::env::var("IDMINT_SIM_SEED")
        .expect("set IDMINT_SIM_SEED to the seed to replay")
        .parse()
        .expect("IDMINT_SIM_SEED is a number");
    let fence = std::env::var("IDMINT_SIM_FENCE").as_deref() != Ok("off");
    let options = if fence { SimOptions::default() } else { SimOptions::without_fence() };
    let report = run_seed(seed, &options);
    note(&report.to_string());
    assert!(report.ok(), "{report}");
}

/// A server suspended past its lease: another takes its generator ID, and its late mark write
/// is refused with the fence and applied without it (the negative control's mutation).
#[tokio::test(start_paused = true)]
async fn the_fence_refuses_a_late_mark_write() {
    async fn check(fence: bool, expect_refused: bool) {
        let etcd = SimEtcd::new(EtcdOptions { fence, ..EtcdOptions::default() });
        let (machine_a, machine_b) = (Machine::new(), Machine::new());
        let (a, b) = (etcd.connect(machine_a.clone()), etcd.connect(machine_b));
        let request = ClaimRequest::new("fenced", GeneratorIds::Fixed(0), "layout");
        let claim_a = a.claim(&request).await.expect("a claims");
        a.store_mark(&claim_a, 1_000).await.expect("a stores while it holds the claim");
        machine_a.update(|s| s.paused = true);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let claim_b = b.claim(&request).await.expect("b claims after a's lease expired");
        assert_eq!(claim_b.mark_ms(), Some(1_000));
        machine_a.update(|s| s.paused = false);
        let late = a.store_mark(&claim_a, 5_000).await;
        assert_eq!(
            matches!(late, Err(idmint_coord::Error::ClaimLost { .. })),
            expect_refused,
            "fence {fence}: {late:?}"
        );
        let stored = etcd.mark("fenced", 0);
        assert_eq!(stored, Some(if expect_refused { 1_000 } else { 5_000 }), "fence {fence}");
        let unheld = etcd.writes().iter().filter(|w| !w.held).count();
        assert_eq!(unheld, usize::from(!expect_refused), "fence {fence}");
    }
    check(true, true).await;
    check(false, false).await;
}

/// The etcd model keeps the coordinator contract, as every real backend does.
#[tokio::test(start_paused = true)]
async fn the_etcd_model_passes_the_conformance_suite() {
    let etcd = SimEtcd::new(EtcdOptions::default());
    let handles = move || Arc::new(etcd.connect(Machine::new())) as Arc<dyn Coordinator>;
    conformance::run_all(&handles).await;
}

/// A small fleet started at once on the scanning etcd model: every server that is not a spare
/// holds a distinct generator ID, the races cost conflicts, and a spare takes a crashed
/// holder's generator ID over once its lease expires.
#[test]
fn a_fleet_claims_distinct_ids_and_a_spare_takes_over() {
    let options = FleetOptions { servers: 12, spares: 2, takeovers: 1, ..FleetOptions::default() };
    let report = run_fleet(3, &options);
    note(&format!("{report}"));
    assert_eq!((report.ready, report.distinct, report.claim_ms.len()), (10, 10, 10), "{report}");
    assert_eq!(report.claims.granted, 11, "ten at the start and one takeover: {report}");
    assert!(report.claims.conflicts > 0, "servers started together race: {report}");
    let ttl = options.etcd.lease_ttl.as_millis() as u64;
    let takeover = report.takeover_ms[0];
    assert!(
        (ttl / 2..=ttl + 2 * options.claim_retry_ms + 100).contains(&takeover),
        "a takeover waits for the lease ({ttl} ms), then one retry: {report}"
    );
    assert!(report.mark_writes_per_server_s > 0.5, "a mark per half window: {report}");
}

/// The fleet sizes of docs/operations.md's table, on snowflake's 1,024 generator IDs and
/// uuid7's 65,536 (`scripts/sim fleet`): claim times, conflicts and takeovers.
#[test]
#[ignore = "minutes; scripts/sim fleet runs it"]
fn fleet_sizes() {
    // (generator IDs, holders, whether to start them all at once as well as over 60 s).
    let sizes = [
        (1_024, 50, true),
        (1_024, 500, true),
        (1_024, 1_022, true),
        (65_536, 500, true),
        (65_536, 5_000, true),
    ];
    let large = env_u64("IDMINT_SIM_FLEET_LARGE", 1) == 1;
    for (generator_ids, servers, at_once) in sizes {
        if servers > 1_024 && !large {
            continue;
        }
        let spreads = [("at once", Duration::ZERO), ("over 60 s", Duration::from_secs(60))];
        for (label, spread) in spreads.into_iter().filter(|(_, s)| at_once || !s.is_zero()) {
            let options = FleetOptions {
                servers: servers + 2,
                spares: 2,
                generator_ids,
                start_spread: spread,
                takeovers: 2,
                ..FleetOptions::default()
            };
            let started = Instant::now();
            let report = run_fleet(1, &options);
            note(&format!(
                "generator IDs {generator_ids}, {servers} holders + 2 spares, started {label}: {report} ({:.1} s)",
                started.elapsed().as_secs_f64()
            ));
            assert_eq!(report.distinct as u64, options.pool().min(servers as u64), "{report}");
        }
    }
}
