//! The scenarios (RELIABILITY.md, "Chaos harness (process level)") and what runs them: a [`Run`] starts etcd, servers,
//! proxies and clients, lets a scenario fire its nemeses on a seeded schedule, then stops
//! everything, adds the servers' claims and the stored marks to the history, and checks it.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use idmint_coord::testing::{EtcdCluster, libfaketime};

mod embedded;
mod etcd_restore;
mod fleet;
mod layout_end;
mod pool;
mod redis;

use crate::{
    availability::{Availability, KindReport},
    check::{self, Report},
    client::{self, ClientMode, Shared},
    cluster::{Node, signal_pid},
    error::ChaosError,
    flood::Flood,
    history::{self, Event, Recorder},
    nemesis::Rng,
    proxy::Proxy,
    watch::Watcher,
};

mod postgres;

/// The protection a negative control removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// `--unsafe-no-fence`: the etcd coordinator ignores marks and skips its fence.
    Fence,
    /// `--unsafe-no-durable-mark`: a claim ignores the stored mark (starts at the clock).
    DurableMark,
    /// `--unsafe-no-clock-guard`: logical time follows the wall clock back, and the
    /// generator restarts at a clock behind its last ID instead of continuing above it.
    ClockGuard,
    /// `--unsafe-no-restore-guard`: the etcd coordinator trusts marks on any cluster, also
    /// one restored from an old snapshot.
    RestoreGuard,
    /// `--unsafe-no-shared-redis-guard`: the icicle client's failover guard ignores the mark
    /// shared through Redis (each server protects only the milliseconds it saw).
    SharedRedisGuard,
    /// `--unsafe-no-promotion-bump`: a promoted Postgres standby is not raised.
    PromotionBump,
    /// `--unsafe-no-pg-fence`: the Postgres coordinator's claims skip the exclusive check and
    /// its mark writes the epoch compare.
    PgFence,
}

impl Control {
    /// The hidden flag of the unsafe build.
    pub(crate) fn flag(self) -> &'static str {
        match self {
            Control::Fence => "--unsafe-no-fence",
            Control::DurableMark => "--unsafe-no-durable-mark",
            Control::ClockGuard => "--unsafe-no-clock-guard",
            Control::RestoreGuard => "--unsafe-no-restore-guard",
            Control::SharedRedisGuard => "--unsafe-no-shared-redis-guard",
            Control::PromotionBump => "--unsafe-no-promotion-bump",
            Control::PgFence => "--unsafe-no-pg-fence",
        }
    }

    /// Its name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Control::Fence => "no-fence",
            Control::DurableMark => "no-durable-mark",
            Control::ClockGuard => "no-clock-guard",
            Control::RestoreGuard => "no-restore-guard",
            Control::SharedRedisGuard => "no-shared-redis-guard",
            Control::PromotionBump => "no-promotion-bump",
            Control::PgFence => "no-pg-fence",
        }
    }
}

/// One scenario of the catalogue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scenario {
    /// Its name (`--scenario`).
    pub(crate) name: &'static str,
    /// The fault scenarios (T-numbers of RELIABILITY.md) it covers.
    pub(crate) anchor: &'static str,
    /// The negative control that runs it without a protection, if any.
    pub(crate) control: Option<Control>,
    run: fn(&mut Run) -> Result<(), ChaosError>,
}

/// The catalogue, in the order `--quick` runs it.
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario { name: "baseline-etcd3", anchor: "T1", control: None, run: baseline },
    Scenario { name: "kill9-embedded", anchor: "T2", control: None, run: kill9_storm },
    Scenario {
        name: "restart-clock-back",
        anchor: "T3",
        control: Some(Control::DurableMark),
        run: restart_clock_back,
    },
    Scenario {
        name: "clock-steps",
        anchor: "T4, T5",
        control: Some(Control::ClockGuard),
        run: clock_steps,
    },
    Scenario {
        name: "full-batches",
        anchor: "T13",
        control: Some(Control::ClockGuard),
        run: full_batches,
    },
    Scenario {
        name: "pause-takeover-etcd",
        anchor: "T6",
        control: Some(Control::Fence),
        run: pause_takeover,
    },
    Scenario { name: "uuid7", anchor: "T3, T6", control: Some(Control::Fence), run: uuid7 },
    Scenario { name: "etcd-leader-kill", anchor: "T7", control: None, run: etcd_leader_kill },
    Scenario {
        name: "etcd-follower-pause",
        anchor: "T7 (paused)",
        control: None,
        run: etcd_follower_pause,
    },
    Scenario {
        name: "etcd-leader-pause",
        anchor: "T7 (paused)",
        control: None,
        run: etcd_leader_pause,
    },
    Scenario {
        name: "etcd-lease-revoked",
        anchor: "T7 (paused)",
        control: None,
        run: etcd_lease_revoked,
    },
    Scenario {
        name: "partition-server-etcd",
        anchor: "T8",
        control: None,
        run: partition_server_etcd,
    },
    Scenario { name: "client-failover", anchor: "T9", control: None, run: client_failover },
    Scenario { name: "grpc-flood", anchor: "T24", control: None, run: grpc_flood },
    Scenario { name: "storage-faults", anchor: "T20", control: None, run: storage_faults },
    Scenario { name: "layout-end", anchor: "T14", control: None, run: layout_end::layout_end },
    Scenario { name: "pool-rolling-etcd", anchor: "T12", control: None, run: pool::rolling_etcd },
    Scenario {
        name: "pool-rolling-postgres",
        anchor: "T12",
        control: None,
        run: pool::rolling_postgres,
    },
    Scenario { name: "pool-kill9-etcd", anchor: "T12", control: None, run: pool::kill9_etcd },
    Scenario {
        name: "pool-kill9-postgres",
        anchor: "T12",
        control: None,
        run: pool::kill9_postgres,
    },
    Scenario {
        name: "redis-sentinel",
        anchor: "T19",
        control: Some(Control::SharedRedisGuard),
        run: redis::sentinel_failover,
    },
    Scenario {
        name: "etcd-restore",
        anchor: "T21",
        control: Some(Control::RestoreGuard),
        run: etcd_restore::etcd_restore,
    },
    Scenario {
        name: "postgres-promotion",
        anchor: "T18",
        control: Some(Control::PromotionBump),
        run: postgres::promotion,
    },
    Scenario {
        name: "pause-takeover-postgres",
        anchor: "T6",
        control: Some(Control::PgFence),
        run: postgres::pause_takeover,
    },
    Scenario {
        name: "partition-server-postgres",
        anchor: "T8",
        control: None,
        run: postgres::partition_server_postgres,
    },
    Scenario {
        name: "embedded-fleet",
        anchor: "T2, T3, T4, T5, T6",
        control: Some(Control::ClockGuard),
        run: embedded::embedded_fleet,
    },
    Scenario {
        name: "postgres-promotion-coordinator",
        anchor: "T18",
        control: None,
        run: postgres::coordinator_promotion,
    },
];

/// The long soak (T23), run by `--soak MINUTES`, not by `--quick`.
pub(crate) const SOAK: Scenario =
    Scenario { name: "soak", anchor: "T23", control: None, run: soak };

/// The fleet measurements (`scripts/fleet-scale`, `idmint-chaos fleet`), never run by
/// `--quick` or `--soak`: `Setup::fleet_servers` servers on one 3-member etcd, and on one
/// Postgres.
pub(crate) const FLEET: [Scenario; 2] = [
    Scenario { name: "fleet-etcd", anchor: "T12", control: None, run: fleet::fleet_etcd },
    Scenario { name: "fleet-postgres", anchor: "T12", control: None, run: fleet::fleet_postgres },
];

/// Finds a scenario by name.
pub(crate) fn find(name: &str) -> Result<Scenario, ChaosError> {
    SCENARIOS.iter().copied().chain([SOAK]).find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        ChaosError::Usage(format!("no scenario `{name}`; there are: {}", names.join(", ")))
    })
}

/// What the harness needs to run scenarios.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// The `idmint` binary under test.
    pub(crate) idmint: PathBuf,
    /// The same built with `IDMINT_NEGATIVE_CONTROLS=1` (negative controls), if built.
    pub(crate) unsafe_idmint: Option<PathBuf>,
    /// Where runs keep their histories, logs and data.
    pub(crate) out: PathBuf,
    /// How long the load phases last, relative to the quick defaults (1.0).
    pub(crate) scale: f64,
    /// The length of the `soak` scenario, in minutes.
    pub(crate) soak_minutes: f64,
    /// The servers of the fleet measurements ([`FLEET`]).
    pub(crate) fleet_servers: usize,
}

/// The outcome of one scenario run.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) scenario: &'static str,
    pub(crate) control: Option<Control>,
    pub(crate) seed: u64,
    pub(crate) report: Report,
    pub(crate) history: PathBuf,
    pub(crate) seconds: f64,
    /// Peak RSS of the servers, in KiB, sampled during the run.
    pub(crate) max_rss_kib: u64,
    /// Why the scenario stopped early (a server that would not start...), if it did.
    pub(crate) error: Option<String>,
    /// The servers' peak RSS per minute of the run, in KiB.
    pub(crate) rss_by_minute: BTreeMap<u64, u64>,
    /// What each kind of client saw (share answered, longest gap, latency).
    pub(crate) availability: Vec<KindReport>,
}

/// Runs one scenario (as a negative control when `control` is set) with `seed`.
pub(crate) fn run(
    setup: &Setup,
    scenario: Scenario,
    control: Option<Control>,
    seed: u64,
) -> Result<Outcome, ChaosError> {
    let label = match control {
        Some(c) => format!("{}-{}-{seed}", scenario.name, c.name()),
        None => format!("{}-{seed}", scenario.name),
    };
    let dir = setup.out.join(&label);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(ChaosError::io(format!("create {}", dir.display())))?;
    let program = match control {
        Some(_) => setup.unsafe_idmint.clone().ok_or_else(|| {
            ChaosError::Usage("negative controls need the unsafe build (--unsafe-idmint)".into())
        })?,
        None => setup.idmint.clone(),
    };
    let started = Instant::now();
    let history = dir.join("history.jsonl");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ChaosError::io("start a runtime"))?;
    let recorder = Recorder::create(&history, started)?;
    let watcher = Watcher::start(setup.idmint.clone(), recorder.clone());
    let shared = Shared {
        recorder,
        stop: Arc::new(AtomicBool::new(false)),
        acknowledged: Arc::new(AtomicU64::new(0)),
    };
    let mut run = Run {
        rng: Rng::new(seed),
        scale: setup.scale,
        dir: dir.clone(),
        program,
        lister: setup.idmint.clone(),
        control,
        runtime,
        etcd: None,
        watcher,
        nodes: Vec::new(),
        shared,
        threads: Vec::new(),
        tasks: Vec::new(),
        data_dir: None,
        max_rss_kib: 0,
        pace: (HTTP_BATCH, Duration::ZERO),
        soak: Duration::from_secs_f64(setup.soak_minutes * 60.0),
        rss_by_minute: BTreeMap::new(),
        started,
        services: Vec::new(),
        fleet_servers: setup.fleet_servers,
    };
    crate::say!("== {label}");
    let body = (scenario.run)(&mut run);
    let finished = run.finish();
    // What was recorded is checked even when the scenario could not go on.
    let error = body.err().or(finished.err()).map(|e| e.to_string());
    let mut checker = check::Checker::default();
    let mut availability = Availability::default();
    history::read(&history, |event| {
        availability.add(&event);
        checker.add(event);
    })?;
    let report = checker.finish();
    Ok(Outcome {
        scenario: scenario.name,
        control,
        seed,
        report,
        history,
        seconds: started.elapsed().as_secs_f64(),
        max_rss_kib: run.max_rss_kib,
        error,
        rss_by_minute: std::mem::take(&mut run.rss_by_minute),
        availability: availability.finish_report(),
    })
}

/// One scenario's processes, clients and schedule.
pub(crate) struct Run {
    rng: Rng,
    scale: f64,
    dir: PathBuf,
    program: PathBuf,
    /// The safe binary, for `idmint lease list`.
    lister: PathBuf,
    control: Option<Control>,
    runtime: tokio::runtime::Runtime,
    etcd: Option<EtcdCluster>,
    /// Polls who holds each generator ID and the stored marks while the run goes on.
    watcher: Watcher,
    nodes: Vec<Node>,
    shared: Shared,
    threads: Vec<std::thread::JoinHandle<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The shared data directory of embedded-store servers.
    data_dir: Option<PathBuf>,
    max_rss_kib: u64,
    /// HTTP clients' batch size and pause between requests.
    pace: (u64, Duration),
    /// The soak's length.
    soak: Duration,
    /// RSS samples of the soak: (minute, max KiB in it).
    rss_by_minute: BTreeMap<u64, u64>,
    started: Instant,
    /// Other services a scenario started (Redis), dropped (killed) after the servers stop.
    services: Vec<Box<dyn std::any::Any>>,
    /// The servers of a fleet measurement.
    fleet_servers: usize,
}

/// HTTP batch size: large, so that millions of IDs cost few requests.
const HTTP_BATCH: u64 = 10_000;
/// gRPC Stream message size.
const GRPC_BATCH: u64 = 10_000;
/// idmint-client batch size.
const CLIENT_BATCH: usize = 2_000;

impl Run {
    /// A duration of the schedule, scaled.
    fn secs(&self, s: f64) -> Duration {
        Duration::from_secs_f64((s * self.scale).max(0.2))
    }

    /// Sleeps, sampling the servers' RSS.
    fn hold(&mut self, duration: Duration) {
        let end = Instant::now() + duration;
        while Instant::now() < end {
            self.sample_rss();
            std::thread::sleep(
                Duration::from_millis(250).min(end.saturating_duration_since(Instant::now())),
            );
        }
    }

    fn sample_rss(&mut self) {
        for node in &self.nodes {
            if let Some(kib) = node.pid().and_then(rss_kib) {
                self.max_rss_kib = self.max_rss_kib.max(kib);
                let minute = self.started.elapsed().as_secs() / 60;
                let slot = self.rss_by_minute.entry(minute).or_default();
                *slot = (*slot).max(kib);
            }
        }
    }

    /// Says that this run's IDs are of `layout` (not snowflake IDs: the checker then checks
    /// uniqueness only). Call it before the clients start.
    fn layout(&self, name: &str) -> Result<(), ChaosError> {
        self.shared.recorder.record(&[Event::Layout { name: name.into() }])
    }

    /// Records a nemesis.
    fn fired(&self, kind: &str, detail: String) {
        crate::say!("   nemesis {kind}: {detail}");
        let t = self.shared.recorder.now();
        let _ = self.shared.recorder.record(&[Event::Nemesis { kind: kind.into(), t, detail }]);
    }

    /// Starts an etcd cluster of `members`.
    fn etcd(&mut self, members: usize) -> Result<(), ChaosError> {
        let cluster = self.runtime.block_on(EtcdCluster::start(members))?;
        self.use_etcd(cluster);
        Ok(())
    }

    /// Makes `cluster` the run's etcd (the watcher polls it as a new store).
    fn use_etcd(&mut self, cluster: EtcdCluster) {
        self.watcher.watch(vec!["--etcd".into(), cluster.endpoints().join(",")]);
        self.etcd = Some(cluster);
    }

    /// The etcd endpoints, directly or each through a new proxy.
    fn etcd_endpoints(&mut self, proxied: bool) -> Result<(String, Vec<Proxy>), ChaosError> {
        let endpoints = self.etcd.as_ref().map(EtcdCluster::endpoints).unwrap_or_default();
        if !proxied {
            return Ok((endpoints.join(","), Vec::new()));
        }
        let mut proxies = Vec::new();
        for endpoint in &endpoints {
            let target = endpoint
                .trim_start_matches("http://")
                .parse()
                .map_err(|_| ChaosError::Server(format!("bad etcd endpoint {endpoint}")))?;
            proxies.push(Proxy::start(self.runtime.handle(), target)?);
        }
        let list = proxies.iter().map(|p| format!("http://{}", p.addr)).collect::<Vec<_>>();
        Ok((list.join(","), proxies))
    }

    /// Flags of a server against etcd (`endpoints`) with this lease TTL and window, for the
    /// next node. Each server has a data directory of its own, as on its own host: it remembers
    /// the cluster the server claims on and the marks it stored (shared, one server's memory
    /// would protect another, and hide what a negative control removes).
    fn etcd_args(&self, endpoints: &str, ttl: u32, window_ms: u64, extra: &[&str]) -> Vec<String> {
        let data = self.dir.join(format!("data-s{}", self.nodes.len())).display().to_string();
        let mut args: Vec<String> = [
            "--etcd",
            endpoints,
            "--data-dir",
            &data,
            "--lease-ttl",
            &ttl.to_string(),
            "--window-ms",
            &window_ms.to_string(),
            "--claim-retry-ms",
            "100",
            "--log",
            "info",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        if window_ms > u64::from(ttl) * 1_000 {
            // Some scenarios want a holder that still serves inside its window after its lease
            // is gone (the fence's case); `idmint serve` refuses that unless told.
            args.push("--allow-long-window".to_owned());
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        self.with_control(args)
    }

    /// Flags of a server on the shared embedded data directory.
    fn embedded_args(&mut self, extra: &[&str]) -> Vec<String> {
        let data = self.data_dir.get_or_insert_with(|| self.dir.join("data")).clone();
        if !self.watcher.watching() {
            self.watcher.watch(vec!["--data-dir".into(), data.display().to_string()]);
        }
        let mut args = vec![
            "--data-dir".to_owned(),
            data.display().to_string(),
            "--log".into(),
            "info".into(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        self.with_control(args)
    }

    fn with_control(&self, mut args: Vec<String>) -> Vec<String> {
        if let Some(control) = self.control {
            args.push(control.flag().to_owned());
        }
        args
    }

    /// Adds a server (not started).
    fn node(&mut self, args: Vec<String>, faketime: bool) -> Result<usize, ChaosError> {
        let lib = match faketime {
            true => Some(libfaketime().ok_or_else(|| {
                ChaosError::Usage("libfaketime is not installed (apt-get install faketime)".into())
            })?),
            false => None,
        };
        let name = format!("s{}", self.nodes.len());
        let pids = self.watcher.pids.clone();
        let node = Node::new(&name, &self.program, args, &self.dir, lib.as_deref(), pids)?;
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Starts a server and waits until it is ready.
    fn start(&mut self, i: usize) -> Result<(), ChaosError> {
        self.nodes[i].start()?;
        self.nodes[i].wait_ready(Duration::from_secs(30))
    }

    /// `k` HTTP clients on server `i` (through `via`, a proxy's address, if given).
    fn http(&mut self, i: usize, k: usize, via: Option<std::net::SocketAddr>) {
        for _ in 0..k {
            let name = format!("http{}", self.threads.len());
            let addr = via.unwrap_or(self.nodes[i].http);
            let server = self.nodes[i].name.clone();
            let (batch, pace) = self.pace;
            self.threads.push(client::http_client(
                self.shared.clone(),
                name,
                server,
                addr,
                batch,
                pace,
            ));
        }
    }

    /// `k` HTTP clients on server `i` asking for `count` IDs per request.
    fn http_batches(&mut self, i: usize, k: usize, count: u64) {
        let pace = self.pace;
        self.pace = (count, Duration::ZERO);
        self.http(i, k, None);
        self.pace = pace;
    }

    /// A gRPC Stream client on server `i`.
    fn grpc(&mut self, i: usize) {
        let name = format!("grpc{}", self.tasks.len());
        let (addr, server) = (self.nodes[i].grpc, self.nodes[i].name.clone());
        let task = client::grpc_client(self.shared.clone(), name, server, addr, GRPC_BATCH);
        self.tasks.push(self.runtime.spawn(task));
    }

    /// An idmint-client over `endpoints`, taking IDs as `mode` says.
    fn failover(&mut self, endpoints: Vec<String>, mode: ClientMode) {
        self.failover_of(endpoints, mode, CLIENT_BATCH);
    }

    /// The same with operations of `count` IDs.
    fn failover_of(&mut self, endpoints: Vec<String>, mode: ClientMode, count: usize) {
        let name = format!("client{}", self.tasks.len());
        let task = client::failover_client(self.shared.clone(), name, endpoints, count, mode);
        self.tasks.push(self.runtime.spawn(task));
    }

    /// Stops the clients: tells them to stop, then joins the threads and waits up to 5 s for
    /// each task.
    pub(super) fn stop_clients(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        for task in self.tasks.drain(..) {
            let _ = self
                .runtime
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
        }
    }

    /// Stops the clients, then the servers (SIGTERM), and adds claims and marks.
    fn finish(&mut self) -> Result<(), ChaosError> {
        self.stop_clients();
        self.watcher.stop();
        for node in &mut self.nodes {
            node.terminate();
        }
        let mut events = Vec::new();
        for node in &self.nodes {
            for generator in node.claimed() {
                events.push(Event::Claim { server: node.name.clone(), generator });
            }
        }
        for (generator, mark_ms) in self.marks()? {
            events.push(Event::Mark { generator, mark_ms });
        }
        self.shared.recorder.record(&events)?;
        self.shared.recorder.flush()?;
        crate::say!("   {} IDs acknowledged", self.shared.acknowledged.load(Ordering::Relaxed));
        Ok(())
    }

    /// The stored marks of namespace `default`, from `idmint lease list --json`.
    fn marks(&self) -> Result<Vec<(u64, u64)>, ChaosError> {
        let store = match (&self.etcd, &self.data_dir) {
            (Some(etcd), _) => ["--etcd".to_owned(), etcd.endpoints().join(",")],
            (None, Some(dir)) => ["--data-dir".to_owned(), dir.display().to_string()],
            (None, None) => return Ok(Vec::new()),
        };
        let entries = self.lease_list(&store)?;
        Ok(entries
            .iter()
            .filter_map(|e| Some((e["generator_id"].as_u64()?, e["mark_ms"].as_u64()?)))
            .collect())
    }

    /// The entries of namespace `default` that `idmint lease list --json` shows on `store`
    /// (its flags, e.g. `--etcd URLS`).
    fn lease_list(&self, store: &[String]) -> Result<Vec<serde_json::Value>, ChaosError> {
        let mut command = Command::new(&self.lister);
        command.args(["lease", "list", "--json", "--namespace", "default"]).args(store);
        let output = command
            .env("NO_COLOR", "1")
            .output()
            .map_err(ChaosError::io("run idmint lease list"))?;
        if !output.status.success() {
            return Err(ChaosError::Server(format!(
                "idmint lease list failed: {}",
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        let json: serde_json::Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| ChaosError::Server(format!("idmint lease list: {e}")))?;
        Ok(json["entries"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// T1: three servers on a three-member etcd, each under HTTP and gRPC load, and an
/// idmint-client over all three; no faults.
fn baseline(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(3)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    for _ in 0..3 {
        let args = run.etcd_args(&endpoints, 5, 3_000, &[]);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    for i in 0..3 {
        run.http(i, 1, None);
        run.grpc(i);
    }
    let urls = run.nodes.iter().map(|n| format!("http://{}", n.http)).collect();
    run.failover(urls, ClientMode::Batch);
    let d = run.secs(12.0);
    run.hold(d);
    Ok(())
}

/// T2: two servers on one embedded data directory under load; every 1–3 s one of them
/// (seeded) is killed with SIGKILL and restarted at once.
fn kill9_storm(run: &mut Run) -> Result<(), ChaosError> {
    for _ in 0..2 {
        let args = run.embedded_args(&["--generator-pool", "4"]);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    run.http(0, 2, None);
    run.http(1, 2, None);
    run.grpc(0);
    let end = Instant::now() + run.secs(14.0);
    while Instant::now() < end {
        let wait = Duration::from_millis(run.rng.between(1_000, 3_000));
        run.hold(wait);
        let i = run.rng.index(2);
        run.nodes[i].kill9();
        run.fired("kill9", format!("{} SIGKILL", run.nodes[i].name));
        run.start(i)?;
    }
    run.hold(Duration::from_secs(1));
    Ok(())
}

/// T3: one server under libfaketime and load; three times: SIGKILL, then a restart with its
/// clock set back (−1 s, −10 s or −60 s, seeded) behind the IDs it issued. The stored mark
/// must keep it above them; without it (`no-durable-mark`) it repeats them.
fn restart_clock_back(run: &mut Run) -> Result<(), ChaosError> {
    let args = run.embedded_args(&["--generator-id", "0"]);
    let i = run.node(args, true)?;
    run.start(i)?;
    run.http(i, 2, None);
    let mut offset = 0.0;
    for _ in 0..3 {
        let load = run.secs(4.0).max(Duration::from_secs(2));
        run.hold(load);
        run.nodes[i].kill9();
        run.fired("kill9", "s0 SIGKILL".into());
        let back = [1.0, 10.0, 60.0][run.rng.index(3)];
        offset -= back;
        run.nodes[i].set_clock(offset)?;
        run.fired("clock_restart_back", format!("s0 restarts at {offset:+} s"));
        run.start(i)?;
    }
    let d = run.secs(3.0);
    run.hold(d);
    Ok(())
}

/// T13: sequence overflow under full batches. Two servers on one embedded data directory
/// under libfaketime, `s0` issuing from one generator ID and `s1` from four (`--generators
/// 4`), each under three HTTP clients asking for `max_batch` (100,000) IDs per request, 24
/// milliseconds' worth of one generator's sequence; each server's clock is stepped back 1 s,
/// then 10 ms, while they serve. Every batch must be increasing and no ID repeated; without
/// the clock guard (`no-clock-guard`) logical time follows the clock back and repeats them.
fn full_batches(run: &mut Run) -> Result<(), ChaosError> {
    const MAX_BATCH: u64 = 100_000;
    let generators: [&[&str]; 2] =
        [&["--generator-pool", "8"], &["--generator-pool", "8", "--generators", "4"]];
    for extra in generators {
        let args = run.embedded_args(extra);
        let i = run.node(args, true)?;
        run.start(i)?;
    }
    run.http_batches(0, 3, MAX_BATCH);
    run.http_batches(1, 3, MAX_BATCH);
    run.hold(Duration::from_secs(2));
    for step in [-1.0, -0.010] {
        for i in 0..2 {
            run.nodes[i].set_clock(step)?;
        }
        run.fired("clock_step_back", format!("s0, s1 clocks {step:+} s under full batches"));
        let d = run.secs(1.5).max(Duration::from_secs(1));
        run.hold(d);
        for i in 0..2 {
            run.nodes[i].set_clock(0.0)?;
        }
        run.fired("clock_step_reset", "s0, s1 clocks back to true time".into());
        let d = run.secs(1.0).max(Duration::from_millis(500));
        run.hold(d);
    }
    Ok(())
}

/// T4, T5: two servers under libfaketime and load; their clocks are stepped while they run
/// (−5 ms, −1 s, −10 s, −1 h, +500 ms, +1 h, each held a while, then back), in a seeded
/// order. Without the clock guard (`no-clock-guard`) logical time follows the clock back.
fn clock_steps(run: &mut Run) -> Result<(), ChaosError> {
    let extra: &[&str] = &["--generator-pool", "4", "--max-ahead-ms", "86400000"];
    for _ in 0..2 {
        let args = run.embedded_args(extra);
        let i = run.node(args, true)?;
        run.start(i)?;
    }
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.grpc(1);
    run.hold(Duration::from_secs(2));
    let mut steps = [-0.005, -1.0, -10.0, -3600.0, 0.5, 3600.0];
    run.rng.shuffle(&mut steps);
    for step in steps {
        let i = run.rng.index(2);
        run.nodes[i].set_clock(step)?;
        let kind = if step < 0.0 { "clock_step_back" } else { "clock_step_forward" };
        run.fired(kind, format!("{} clock {step:+} s", run.nodes[i].name));
        let d = run.secs(1.5);
        run.hold(d);
        run.nodes[i].set_clock(0.0)?;
        run.fired("clock_step_reset", format!("{} clock back to true time", run.nodes[i].name));
        let d = run.secs(1.0);
        run.hold(d);
    }
    Ok(())
}

/// T6: server A (pool 2, so generator 0) and a spare B (pool 1, waiting for a claim) on etcd
/// with a 2 s lease and a 16 s window, under load; A is stopped (SIGSTOP) for 6 s, B takes
/// generator 0 over, A is continued and serves inside its old window. The fence keeps B above
/// A's mark; without it (`no-fence`) B starts at its clock and repeats A's IDs.
fn pause_takeover(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(1)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    let a_args = run.etcd_args(&endpoints, 2, 16_000, &["--generator-pool", "2"]);
    let a = run.node(a_args, false)?;
    run.start(a)?;
    let b_args =
        run.etcd_args(&endpoints, 2, 16_000, &["--generator-pool", "1", "--wait-for-claim"]);
    let b = run.node(b_args, false)?;
    run.nodes[b].start()?;
    run.http(a, 2, None);
    run.http(b, 1, None);
    run.grpc(a);
    run.hold(Duration::from_secs(3));
    run.nodes[a].pause()?;
    run.fired("sigstop", "s0 SIGSTOP for 6 s (3× the lease TTL)".into());
    run.hold(Duration::from_secs(6));
    run.nodes[a].resume()?;
    run.fired("sigcont", "s0 SIGCONT".into());
    let d = run.secs(8.0).max(Duration::from_secs(4));
    run.hold(d);
    Ok(())
}

/// T3 and T6 for 128-bit IDs: three servers of a `uuid7` namespace on a one-member etcd
/// (lease TTL 2 s, 2 s window), two serving generator IDs 0 and 1 (pool 2) and a spare waiting
/// for one, each under HTTP batch load (the IDs are RFC 9562 text). First s1 is killed
/// (SIGKILL) and not restarted, so that the spare takes its generator ID over on etcd; then
/// s0, under libfaketime, is killed and restarted on a new host (a new data directory, which
/// remembers no mark) with its clock 10 s behind the IDs it issued, and claims generator 0
/// back. The stored marks keep every claimer above what the generator ID issued; without the
/// fence (`no-fence`: marks ignored) s0 mints (ms, counter) pairs below its earlier ones. The
/// 46 random bits make such repeats distinct IDs, so that control is caught by the
/// per-generator order and the marks, not by duplicates (RELIABILITY.md, "Chaos harness (process level)").
fn uuid7(run: &mut Run) -> Result<(), ChaosError> {
    run.layout("uuid7")?;
    run.etcd(1)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    let pool: &[&str] = &["--layout", "uuid7", "--generator-pool", "2", "--wait-for-claim"];
    for faketime in [true, false, false] {
        let args = run.etcd_args(&endpoints, 2, 2_000, pool);
        run.node(args, faketime)?;
    }
    run.start(0)?;
    run.start(1)?;
    // The spare finds both generator IDs held: it waits (not ready) for one of them.
    run.nodes[2].start()?;
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.http(2, 1, None);
    let d = run.secs(8.0).max(Duration::from_secs(3));
    run.hold(d);
    run.nodes[1].kill9();
    run.fired("kill9", "s1 SIGKILL, not restarted: the spare takes its generator ID".into());
    let d = run.secs(4.0).max(Duration::from_secs(4));
    run.hold(d);
    run.nodes[0].kill9();
    run.fired("kill9", "s0 SIGKILL".into());
    run.nodes[0].set_clock(-10.0)?;
    let fresh = run.dir.join("data-s0-replaced");
    run.nodes[0].set_flag("--data-dir", &fresh.display().to_string());
    run.fired("clock_restart_back", "s0 restarts at -10 s on a new host".into());
    run.nodes[0].start()?;
    let d = run.secs(10.0).max(Duration::from_secs(4));
    run.hold(d);
    Ok(())
}

/// T7: two servers on a three-member etcd under load; the etcd leader is killed, restarted
/// after 3 s, twice; then a follower.
fn etcd_leader_kill(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(3)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    for _ in 0..2 {
        let args = run.etcd_args(&endpoints, 5, 5_000, &[]);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.grpc(1);
    run.hold(Duration::from_secs(2));
    for round in 0..3 {
        let etcd = run.etcd.as_mut().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
        let leader = run.runtime.block_on(etcd.leader())?;
        let member = if round < 2 { leader } else { (leader + 1) % 3 };
        etcd.kill(member)?;
        let kind = if round < 2 { "etcd_leader_kill" } else { "etcd_member_kill" };
        run.fired(kind, format!("etcd member {member} SIGKILL (leader {leader})"));
        run.hold(Duration::from_secs(3));
        let etcd = run.etcd.as_mut().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
        run.runtime.block_on(etcd.restart(member))?;
        run.fired("etcd_restart", format!("etcd member {member} restarted"));
        let d = run.secs(2.0);
        run.hold(d);
    }
    Ok(())
}

/// T7, paused: three servers on a three-member etcd (every endpoint given, a 10 s lease),
/// each under HTTP load, and an idmint-client over all three prefetching with two refills in
/// flight; one etcd follower is stopped with SIGSTOP for 15 s (longer than the 10 s lease;
/// `--scale 2` for 30 s), then resumed. A paused member
/// accepts connections and answers nothing, which a client that does not track members' health
/// waits out request by request.
fn etcd_follower_pause(run: &mut Run) -> Result<(), ChaosError> {
    etcd_member_pause(run, false)
}

/// T7, paused: as [`etcd_follower_pause`], with the leader stopped (etcd elects another).
fn etcd_leader_pause(run: &mut Run) -> Result<(), ChaosError> {
    etcd_member_pause(run, true)
}

/// Three servers on three etcd members (every endpoint given, a 10 s lease, a 3 s window),
/// HTTP to each and an idmint-client over all three prefetching with two refills in flight.
fn etcd_fleet_under_load(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(3)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    for _ in 0..3 {
        let args = run.etcd_args(&endpoints, 10, 3_000, &[]);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    for i in 0..3 {
        run.http(i, 1, None);
    }
    let urls = run.nodes.iter().map(|n| format!("http://{}", n.http)).collect();
    run.failover(urls, ClientMode::Prefetch { pipeline: 2 });
    Ok(())
}

fn etcd_member_pause(run: &mut Run, leader: bool) -> Result<(), ChaosError> {
    etcd_fleet_under_load(run)?;
    let d = run.secs(4.0);
    run.hold(d);
    let etcd = run.etcd.as_ref().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
    let current = run.runtime.block_on(etcd.leader())?;
    let member = if leader { current } else { (current + 1) % 3 };
    let pid = etcd.member_pids()[member]
        .ok_or_else(|| ChaosError::Server(format!("etcd member {member} does not run")))?;
    let held = run.secs(15.0);
    signal_pid(pid, "STOP")?;
    let kind = if leader { "etcd_leader_pause" } else { "etcd_follower_pause" };
    run.fired(kind, format!("etcd member {member} SIGSTOP for {held:?} (leader {current})"));
    run.hold(held);
    signal_pid(pid, "CONT")?;
    run.fired("etcd_resume", format!("etcd member {member} SIGCONT"));
    let d = run.secs(4.0);
    run.hold(d);
    Ok(())
}

/// T7, after a paused leader resumes: three servers on three etcd members (every endpoint
/// given, a 10 s lease, a 3 s window), HTTP to each and an idmint-client prefetching with two
/// refills in flight; the lease of each server's claim is revoked in etcd in turn, 5 s apart,
/// as a paused etcd leader can do when it resumes (etcd-io/etcd#15247; DESIGN.md, "How
/// does idmint ride out a failed or paused etcd member?"). Each server learns of it at its
/// next keep-alive or mark write, serves out the window it stored, and claims again.
fn etcd_lease_revoked(run: &mut Run) -> Result<(), ChaosError> {
    etcd_fleet_under_load(run)?;
    let d = run.secs(3.0);
    run.hold(d);
    for generator in 0..3 {
        let etcd = run.etcd.as_ref().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
        // The servers' claim keys: the default `--etcd-prefix` and namespace.
        let prefix = format!("idmint/default/claim/{generator}");
        let revoked = run.runtime.block_on(etcd.revoke_leases_under(&prefix))?;
        let leases: Vec<String> = revoked.iter().map(|l| format!("{l:x}")).collect();
        run.fired(
            "etcd_lease_revoked",
            format!(
                "the lease of generator {generator}'s claim revoked in etcd ({})",
                leases.join(", ")
            ),
        );
        let d = run.secs(5.0);
        run.hold(d);
    }
    Ok(())
}

/// T8: two servers, each talking to etcd through its own proxy, and a spare; server 0's
/// proxy blackholes etcd for 6 s (3× the 2 s lease TTL), then delays it 75 ms for 2 s. The
/// partitioned server stops extending its window and the spare may take its generator ID
/// over, strictly above its mark.
fn partition_server_etcd(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(1)?;
    let mut proxies = Vec::new();
    for (n, pool) in ["2", "2", "2"].into_iter().enumerate() {
        let (endpoints, proxy) = run.etcd_endpoints(true)?;
        let spare = n == 2;
        let mut extra = vec!["--generator-pool", pool];
        if spare {
            extra.push("--wait-for-claim");
        }
        let args = run.etcd_args(&endpoints, 2, 4_000, &extra);
        let i = run.node(args, false)?;
        if spare {
            run.nodes[i].start()?;
        } else {
            run.start(i)?;
        }
        proxies.push(proxy);
    }
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.http(2, 1, None);
    run.hold(Duration::from_secs(2));
    for proxy in &proxies[0] {
        proxy.blackhole();
    }
    run.fired("partition_etcd", "s0 ↔ etcd blackholed for 6 s".into());
    run.hold(Duration::from_secs(6));
    for proxy in &proxies[0] {
        proxy.delay(75);
    }
    run.fired("delay_etcd", "s0 ↔ etcd delayed 75 ms for 2 s".into());
    run.hold(Duration::from_secs(2));
    for proxy in &proxies[0] {
        proxy.heal();
    }
    run.fired("heal", "s0 ↔ etcd healed".into());
    let d = run.secs(4.0);
    run.hold(d);
    Ok(())
}

/// T9: three servers on one embedded data directory, each behind a proxy; an idmint-client
/// over the three proxies and HTTP clients through them; one proxy blackholes for 3 s, then
/// another server is stopped with SIGSTOP for 3 s.
fn client_failover(run: &mut Run) -> Result<(), ChaosError> {
    let mut proxies = Vec::new();
    for _ in 0..3 {
        let args = run.embedded_args(&["--generator-pool", "4"]);
        let i = run.node(args, false)?;
        run.start(i)?;
        proxies.push(Proxy::start(run.runtime.handle(), run.nodes[i].http)?);
    }
    for (i, proxy) in proxies.iter().enumerate() {
        run.http(i, 1, Some(proxy.addr));
    }
    let urls: Vec<String> = proxies.iter().map(|p| format!("http://{}", p.addr)).collect();
    run.failover(urls.clone(), ClientMode::Batch);
    // Prefetching with two refills in flight: the sequencer's merge under failover.
    run.failover(urls, ClientMode::Prefetch { pipeline: 2 });
    run.hold(Duration::from_secs(2));
    let cut = run.rng.index(3);
    proxies[cut].blackhole();
    run.fired("partition_client", format!("client ↔ s{cut} blackholed for 3 s"));
    run.hold(Duration::from_secs(3));
    proxies[cut].heal();
    let paused = (cut + 1 + run.rng.index(2)) % 3;
    run.nodes[paused].pause()?;
    run.fired("sigstop", format!("s{paused} SIGSTOP for 3 s"));
    run.hold(Duration::from_secs(3));
    run.nodes[paused].resume()?;
    run.fired("sigcont", format!("s{paused} SIGCONT"));
    let d = run.secs(3.0);
    run.hold(d);
    Ok(())
}

/// A flood of the gRPC port during load: one server on the embedded store, its open files
/// limited to 1,024 (as a default systemd unit or shell has them), under HTTP, gRPC and
/// idmint-client load; then, one after the other, each held 5 s: 1,100 HTTP/2 connections
/// that open no stream (more than the file limit), 40 connections of 1,000 calls whose
/// message never arrives, 1,100 such calls on one connection, and 10,000 streams reset as
/// soon as opened. The clients' availability shows whether the server kept answering; the
/// server's RSS before, at its peak and after each flood goes into the nemesis log.
fn grpc_flood(run: &mut Run) -> Result<(), ChaosError> {
    let args = run.embedded_args(&[]);
    let i = run.node(args, false)?;
    run.start(i)?;
    let pid = run.nodes[i].pid().ok_or_else(|| ChaosError::Server("s0 does not run".into()))?;
    let limited = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--nofile=1024:1024"])
        .status()
        .map_err(ChaosError::io("run prlimit (util-linux)"))?;
    if !limited.success() {
        return Err(ChaosError::Server("prlimit could not limit the server's files".into()));
    }
    run.http(i, 1, None);
    run.grpc(i);
    run.failover(vec![format!("http://{}", run.nodes[i].http)], ClientMode::Batch);
    run.hold(Duration::from_secs(2));
    let target = run.nodes[i].grpc;
    let floods = [
        ("grpc_idle_connections", Flood::Idle { connections: 1_100 }),
        ("grpc_stalled_calls", Flood::Stalled { connections: 40, streams: 1_000 }),
        ("grpc_streams_one_connection", Flood::Stalled { connections: 1, streams: 1_100 }),
        ("grpc_rapid_reset", Flood::RapidReset { resets: 10_000 }),
    ];
    for (kind, flood) in floods {
        let before = rss_kib(pid);
        let mut peak = before.unwrap_or(0);
        let hold = Duration::from_secs(5);
        let flooding = run.runtime.spawn(flood.run(target, hold));
        run.fired(kind, format!("{flood:?} on {target}, held {hold:?}"));
        while !flooding.is_finished() {
            run.hold(Duration::from_millis(250));
            peak = peak.max(rss_kib(pid).unwrap_or(0));
        }
        let opened = run.runtime.block_on(flooding).unwrap_or_default();
        run.hold(Duration::from_secs(2));
        run.fired(
            "flood_end",
            format!(
                "{kind}: {} connections and {} streams opened, {} refused; server RSS {} KiB before, {peak} KiB peak, {} KiB 2 s after",
                opened.connections,
                opened.streams,
                opened.refused,
                kib_or_unread(before),
                kib_or_unread(rss_kib(pid))
            ),
        );
    }
    Ok(())
}

/// A resident size for a report line: its KiB, or `unread`.
fn kib_or_unread(kib: Option<u64>) -> String {
    kib.map_or_else(|| "unread".to_owned(), |kib| kib.to_string())
}

/// A process's resident set, in KiB (`VmRSS` in its `/proc/<pid>/status`), or `None` when it
/// cannot be read (the process is gone).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    kib.split_whitespace().next()?.parse().ok()
}

/// The nemesis counts of several outcomes.
pub(crate) fn nemeses(outcomes: &[Outcome]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for outcome in outcomes {
        for (kind, n) in &outcome.report.nemeses {
            *counts.entry(kind.clone()).or_default() += n;
        }
    }
    counts
}

/// The storage failpoint, compiled once per output directory with gcc.
fn failpoint_library(dir: &std::path::Path) -> Result<PathBuf, ChaosError> {
    let out = dir.parent().unwrap_or(dir).join("storage_faults.so");
    if out.is_file() {
        return Ok(out);
    }
    let source = dir.join("storage_faults.c");
    std::fs::write(&source, include_str!("../failpoint/storage_faults.c"))
        .map_err(ChaosError::io("write the failpoint source"))?;
    let built = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status()
        .map_err(ChaosError::io("run gcc (apt-get install gcc)"))?;
    if !built.success() {
        return Err(ChaosError::Server("gcc could not build the storage failpoint".into()));
    }
    Ok(out)
}

/// T20: one server on the embedded store with an LD_PRELOAD failpoint, under load: fsync of
/// the data directory fails with EIO for 4 s, then the disk is "full" (ENOSPC on write and
/// fsync) for 4 s; the server must not serve above a mark it could not store. Then it is
/// killed with SIGKILL and restarted with its clock 5 s back: it must start above every ID
/// it issued.
fn storage_faults(run: &mut Run) -> Result<(), ChaosError> {
    let lib = failpoint_library(&run.dir)?;
    let args = run.embedded_args(&["--generator-id", "0"]);
    let data = run.data_dir.clone().unwrap_or_default();
    std::fs::create_dir_all(&data).map_err(ChaosError::io("create the data directory"))?;
    let data = data.canonicalize().map_err(ChaosError::io("resolve the data directory"))?;
    let control = run.dir.join("storage.fail");
    std::fs::write(&control, "pass\n").map_err(ChaosError::io("write the failpoint file"))?;
    let i = run.node(args, true)?;
    run.nodes[i].preload = Some((
        lib,
        vec![
            ("CHAOS_FAIL_FILE".into(), control.display().to_string()),
            ("CHAOS_FAIL_PATH".into(), data.display().to_string()),
        ],
    ));
    run.start(i)?;
    run.http(i, 2, None);
    run.grpc(i);
    run.hold(Duration::from_secs(2));
    for (mode, kind) in [("eio", "fsync_eio"), ("enospc", "disk_full")] {
        std::fs::write(&control, mode).map_err(ChaosError::io("write the failpoint file"))?;
        run.fired(kind, format!("s0 data directory: {mode} for 4 s"));
        run.hold(Duration::from_secs(4));
        std::fs::write(&control, "pass").map_err(ChaosError::io("write the failpoint file"))?;
        run.fired("storage_heal", "s0 data directory healthy".into());
        // A server that refused to go on needs an operator: the harness restarts it.
        if run.nodes[i].ready() || run.nodes[i].wait_ready(Duration::from_secs(8)).is_ok() {
            run.hold(Duration::from_secs(2));
        } else {
            run.nodes[i].kill9();
            run.fired("kill9", "s0 SIGKILL (not ready after the fault)".into());
            run.start(i)?;
        }
    }
    run.nodes[i].kill9();
    run.fired("kill9", "s0 SIGKILL".into());
    run.nodes[i].set_clock(-5.0)?;
    run.fired("clock_restart_back", "s0 restarts at -5 s".into());
    run.start(i)?;
    let d = run.secs(3.0);
    run.hold(d);
    Ok(())
}

/// T23: three servers on a three-member etcd (each through its own proxies, under
/// libfaketime) and a spare, under paced load (about 20,000 IDs/s) for the soak's length; every
/// 10–30 s (seeded) one nemesis: SIGKILL and restart, SIGSTOP past the lease, a clock step
/// (held 2 s, then back), an etcd leader kill, or a partition from etcd (6 s).
fn soak(run: &mut Run) -> Result<(), ChaosError> {
    run.pace = (1_000, Duration::from_millis(45));
    run.etcd(3)?;
    let mut proxies = Vec::new();
    for n in 0..4 {
        let (endpoints, proxy) = run.etcd_endpoints(true)?;
        // Every server waits for a claim: one restarted while a spare holds its generator ID
        // (the pool is full) waits to become a spare itself instead of exiting.
        let args =
            run.etcd_args(&endpoints, 2, 4_000, &["--generator-pool", "3", "--wait-for-claim"]);
        let i = run.node(args, true)?;
        if n == 3 {
            run.nodes[i].start()?;
        } else {
            run.start(i)?;
        }
        proxies.push(proxy);
    }
    for i in 0..4 {
        run.http(i, 1, None);
    }
    let end = Instant::now() + run.soak;
    let steps = [-0.005, -1.0, -10.0, -3600.0, 0.5, 3600.0];
    while Instant::now() < end {
        let wait = Duration::from_secs(run.rng.between(10, 30));
        run.hold(wait.min(end.saturating_duration_since(Instant::now())));
        if Instant::now() >= end {
            break;
        }
        let i = run.rng.index(4);
        let name = run.nodes[i].name.clone();
        match run.rng.index(5) {
            0 => {
                run.nodes[i].kill9();
                run.fired("kill9", format!("{name} SIGKILL"));
                run.nodes[i].start()?;
            }
            1 => {
                run.nodes[i].pause()?;
                run.fired("sigstop", format!("{name} SIGSTOP for 6 s"));
                run.hold(Duration::from_secs(6));
                run.nodes[i].resume()?;
                run.fired("sigcont", format!("{name} SIGCONT"));
            }
            2 => {
                let step = steps[run.rng.index(steps.len())];
                run.nodes[i].set_clock(step)?;
                let kind = if step < 0.0 { "clock_step_back" } else { "clock_step_forward" };
                run.fired(kind, format!("{name} clock {step:+} s"));
                run.hold(Duration::from_secs(2));
                run.nodes[i].set_clock(0.0)?;
                run.fired("clock_step_reset", format!("{name} clock back to true time"));
            }
            3 => {
                let etcd = run.etcd.as_mut().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
                let leader = run.runtime.block_on(etcd.leader())?;
                etcd.kill(leader)?;
                run.fired("etcd_leader_kill", format!("etcd member {leader} SIGKILL"));
                run.hold(Duration::from_secs(3));
                let etcd = run.etcd.as_mut().ok_or_else(|| ChaosError::Server("no etcd".into()))?;
                run.runtime.block_on(etcd.restart(leader))?;
                run.fired("etcd_restart", format!("etcd member {leader} restarted"));
            }
            _ => {
                for proxy in &proxies[i] {
                    proxy.blackhole();
                }
                run.fired("partition_etcd", format!("{name} ↔ etcd blackholed for 6 s"));
                run.hold(Duration::from_secs(6));
                for proxy in &proxies[i] {
                    proxy.heal();
                }
                run.fired("heal", format!("{name} ↔ etcd healed"));
            }
        }
    }
    Ok(())
}
