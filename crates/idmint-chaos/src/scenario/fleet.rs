//! `fleet-etcd` and `fleet-postgres` (`scripts/fleet-scale`, never part of `--quick`): a fleet
//! of `--servers` `idmint serve` processes cold-started at once on one 3-member etcd, or on one
//! Postgres, measured: the time until every server is ready and the distinct generator IDs
//! held; the coordinator's requests per second and CPU at idle and under client load (etcd's
//! `/metrics` and its members' `/proc/<pid>/stat`; Postgres's `pg_stat_database` and the CPU of
//! the postmaster and its backends); the latency of a mark write through idmint's own
//! coordinator (`idmint_coord`'s `store_mark`) while the fleet runs; a rolling restart of every
//! server under an idmint-client; and, once the fleet has stopped, how many mark writes per
//! second the same coordinator takes. The measurements go to `fleet.json` in the run's
//! directory; the history is checked as every scenario's is.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use idmint_coord::{
    Claim, ClaimRequest, Coordinator, EtcdCoordinator, EtcdOptions, GeneratorIds,
    PostgresCoordinator, PostgresLeaseOptions, PostgresOptions,
    testing::{EtcdCluster, Postgres, free_ports},
};
use serde_json::{Value, json};

use super::{Run, postgres::stop_all};
use crate::{
    client::ClientMode,
    cluster::{Node, http_get, signal_pid},
    error::ChaosError,
};

/// The servers' lease TTL (s) and window (ms): the defaults of `idmint serve`.
const TTL_S: u32 = 10;
const WINDOW_MS: u64 = 3_000;
/// How long the whole fleet may take to be ready after its cold start.
const READY_TIMEOUT: Duration = Duration::from_secs(600);
/// Mark writes per second of the latency probe.
const PROBE_RATE: u64 = 20;
/// Claims writing marks side by side in the write benchmark.
const BENCH_CLAIMS: u64 = 32;

/// Where the fleet claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Etcd,
    Postgres,
}

/// `fleet-etcd`: the fleet on one 3-member etcd.
pub(super) fn fleet_etcd(run: &mut Run) -> Result<(), ChaosError> {
    fleet(run, Store::Etcd)
}

/// `fleet-postgres`: the fleet on one Postgres.
pub(super) fn fleet_postgres(run: &mut Run) -> Result<(), ChaosError> {
    fleet(run, Store::Postgres)
}

/// The coordinator's processes and how to read its counters.
struct Coord {
    store: Store,
    etcd_metrics: Vec<SocketAddr>,
    pids: Vec<u32>,
    postgres: Option<Postgres>,
    clk_tck: f64,
}

/// One reading of the coordinator's counters and CPU.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    counters: BTreeMap<String, f64>,
    cpu_s: f64,
    servers_cpu_s: f64,
}

impl Coord {
    fn sample(&self, run: &Run) -> Sample {
        let mut counters = BTreeMap::new();
        match self.store {
            Store::Etcd => {
                for (member, addr) in self.etcd_metrics.iter().enumerate() {
                    let text = http_get(*addr, "/metrics").map(|(_, t)| t).unwrap_or_default();
                    for line in text.lines().filter(|l| !l.starts_with('#')) {
                        let Some((name, value)) = line.rsplit_once(' ') else { continue };
                        let Ok(value) = value.trim().parse::<f64>() else { continue };
                        let metric = name.split('{').next().unwrap_or(name);
                        let method = label(name, "grpc_method");
                        let key = match metric {
                            "grpc_server_msg_received_total" => {
                                Some(format!("grpc_msg_received.{}", method.unwrap_or("?")))
                            }
                            "grpc_server_handled_total" => Some("grpc_handled".to_owned()),
                            // Applied on every member; member 0's count is the cluster's.
                            "etcd_mvcc_put_total"
                            | "etcd_mvcc_txn_total"
                            | "etcd_mvcc_range_total"
                            | "etcd_disk_wal_fsync_duration_seconds_count"
                                if member == 0 =>
                            {
                                Some(metric.to_owned())
                            }
                            _ => None,
                        };
                        if let Some(key) = key {
                            *counters.entry(key).or_insert(0.0) += value;
                        }
                    }
                }
            }
            Store::Postgres => {
                let sql = "select xact_commit, tup_updated, tup_inserted, tup_deleted from \
                           pg_stat_database where datname = 'idmint'";
                if let Some(pg) = &self.postgres
                    && let Ok(row) = pg.psql(sql)
                {
                    let names = ["xact_commit", "tup_updated", "tup_inserted", "tup_deleted"];
                    for (name, value) in names.iter().zip(row.split('|')) {
                        if let Ok(v) = value.trim().parse::<f64>() {
                            counters.insert((*name).to_owned(), v);
                        }
                    }
                }
            }
        }
        let mut pids = self.pids.clone();
        if self.store == Store::Postgres {
            pids.extend(children_of(&self.pids));
        }
        let cpu_s = pids.iter().filter_map(|p| cpu_ticks(*p)).sum::<f64>() / self.clk_tck;
        let servers_cpu_s =
            run.nodes.iter().filter_map(|n| n.pid()).filter_map(cpu_ticks).sum::<f64>()
                / self.clk_tck;
        Sample { at: Instant::now(), counters, cpu_s, servers_cpu_s }
    }
}

/// The value of label `name` in a Prometheus series name.
fn label<'a>(series: &'a str, name: &str) -> Option<&'a str> {
    let at = series.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &series[at..];
    Some(&rest[..rest.find('"')?])
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
    Some(fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?)
}

/// The PIDs whose parent is one of `parents` (a postmaster's backends).
fn children_of(parents: &[u32]) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|stat| {
                let Some(end) = stat.rfind(')') else { return false };
                stat[end + 2..]
                    .split(' ')
                    .nth(1)
                    .and_then(|p| p.parse::<u32>().ok())
                    .is_some_and(|ppid| parents.contains(&ppid))
            })
        })
        .collect()
}

/// Rates per second and CPU (cores) between two samples.
fn window(from: &Sample, to: &Sample, servers: usize) -> Value {
    let seconds = (to.at - from.at).as_secs_f64().max(1e-9);
    let mut rates = serde_json::Map::new();
    for (name, value) in &to.counters {
        let delta = value - from.counters.get(name).copied().unwrap_or(0.0);
        if delta > 0.0 {
            rates.insert(name.clone(), json!(round2(delta / seconds)));
        }
    }
    let grpc: f64 = to
        .counters
        .iter()
        .filter(|(k, _)| k.starts_with("grpc_msg_received."))
        .map(|(k, v)| v - from.counters.get(k).copied().unwrap_or(0.0))
        .sum();
    let requests_per_s = match to.counters.contains_key("xact_commit") {
        true => {
            to.counters["xact_commit"] - from.counters.get("xact_commit").copied().unwrap_or(0.0)
        }
        false => grpc,
    } / seconds;
    let cores = (to.cpu_s - from.cpu_s) / seconds;
    // Negative when servers were replaced in between (a restarted process starts at 0).
    let servers_cores = (to.servers_cpu_s - from.servers_cpu_s) / seconds;
    json!({
        "seconds": round2(seconds),
        "requests": (requests_per_s * seconds).round(),
        "requests_per_s": round2(requests_per_s),
        "requests_per_s_per_server": round4(requests_per_s / servers as f64),
        "coordinator_cores": round4(cores),
        "coordinator_cpu_ms_per_request": round4(cores * 1_000.0 / requests_per_s.max(1e-9)),
        "servers_cores": (servers_cores >= 0.0).then(|| round4(servers_cores)),
        "rates_per_s": rates,
    })
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

/// p50, p90, p99 and max of `values` (ms), sorted in place.
fn percentiles(values: &mut [f64]) -> Value {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let i = ((values.len() as f64 * q).ceil() as usize).clamp(1, values.len()) - 1;
        round2(values[i])
    };
    json!({
        "n": values.len(),
        "p50_ms": at(0.5),
        "p90_ms": at(0.9),
        "p99_ms": at(0.99),
        "max_ms": at(1.0),
    })
}

fn fleet(run: &mut Run, store: Store) -> Result<(), ChaosError> {
    let servers = run.fleet_servers;
    let clk_tck = clk_tck();
    let coord = match store {
        Store::Etcd => {
            // Not through `run.etcd`: its watcher's `idmint lease list` polls would be counted
            // as the fleet's load.
            let cluster = run.runtime.block_on(EtcdCluster::start(3))?;
            let pids = cluster.member_pids().into_iter().flatten().collect();
            let etcd_metrics = cluster
                .endpoints()
                .iter()
                .filter_map(|e| e.trim_start_matches("http://").parse().ok())
                .collect();
            run.etcd = Some(cluster);
            Coord { store, etcd_metrics, pids, postgres: None, clk_tck }
        }
        Store::Postgres => {
            let max = (servers * 2 + 50).to_string();
            let pg = Postgres::start_with(&[("max_connections", max.as_str())])?;
            let pids = pg.pid().into_iter().collect();
            Coord { store, etcd_metrics: Vec::new(), pids, postgres: Some(pg), clk_tck }
        }
    };
    let endpoints = run.etcd.as_ref().map(|c| c.endpoints().join(",")).unwrap_or_default();
    let url = coord.postgres.as_ref().map(Postgres::url).unwrap_or_default();
    // Every port in one call: ports taken one server at a time may repeat once released.
    let ports = free_ports(2 * servers)?;
    for n in 0..servers {
        let args = server_args(run, store, &endpoints, &url, n);
        let pids = run.watcher.pids.clone();
        let pair = [ports[2 * n], ports[2 * n + 1]];
        let node =
            Node::on_ports(&format!("s{n}"), &run.program, args, &run.dir, None, pids, pair)?;
        run.nodes.push(node);
    }
    let result = measure(run, &coord, &endpoints, &url);
    // The clients stop, then the servers, before the database goes away with `coord` and
    // before the bench.
    stop_everything(run);
    let mut report = result?;
    report["write_bench"] = write_bench(run, store, &endpoints, &url, &coord)?;
    report["store"] = json!(match store {
        Store::Etcd => "etcd (3 members)",
        Store::Postgres => "postgres",
    });
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    std::fs::write(run.dir.join("fleet.json"), text).map_err(ChaosError::io("write fleet.json"))?;
    drop(coord);
    Ok(())
}

/// The flags of server `n`: the defaults' lease TTL and window, a data directory of its own.
fn server_args(run: &Run, store: Store, endpoints: &str, url: &str, n: usize) -> Vec<String> {
    let data = run.dir.join(format!("data-s{n}")).display().to_string();
    let coordinator = match store {
        Store::Etcd => vec!["--etcd", endpoints],
        Store::Postgres => vec!["--coordinator", "postgres", "--postgres", url],
    };
    let ttl = TTL_S.to_string();
    let window = WINDOW_MS.to_string();
    let rest = ["--data-dir", &data, "--lease-ttl", &ttl, "--window-ms", &window];
    coordinator
        .into_iter()
        .chain(rest)
        .chain(["--claim-retry-ms", "100", "--log", "info"])
        .map(str::to_owned)
        .collect()
}

fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// Stops the clients, then SIGTERM to every server at once (so that 200 need not stop one
/// after another), then reaps them.
fn stop_everything(run: &mut Run) {
    run.stop_clients();
    for node in &run.nodes {
        if let Some(pid) = node.pid() {
            let _ = signal_pid(pid, "TERM");
        }
    }
    stop_all(run);
}

fn measure(run: &mut Run, coord: &Coord, endpoints: &str, url: &str) -> Result<Value, ChaosError> {
    let servers = run.nodes.len();
    let idle_s = run.secs(20.0);
    // Cold start: every server launched at once; each is timed until /readyz answers 200.
    let before = coord.sample(run);
    let started = Instant::now();
    for node in &mut run.nodes {
        node.spawn_serve()?;
    }
    let launched_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let mut ready_ms: Vec<Option<f64>> = vec![None; servers];
    let mut relaunched = 0;
    while ready_ms.iter().any(Option::is_none) {
        for (i, node) in run.nodes.iter_mut().enumerate() {
            if ready_ms[i].is_none() && node.ready() {
                ready_ms[i] = Some(started.elapsed().as_secs_f64() * 1_000.0);
            }
            if let Some(status) = node.exited() {
                // A port given away meanwhile (to another process's outgoing connection):
                // the server starts again on new ports; any other exit ends the run.
                if !node.log_text().contains("Address already in use") || relaunched >= servers {
                    return Err(ChaosError::Server(format!(
                        "{} exited at start ({status})",
                        node.name
                    )));
                }
                let ports = free_ports(2)?;
                node.http = SocketAddr::from(([127, 0, 0, 1], ports[0]));
                node.grpc = SocketAddr::from(([127, 0, 0, 1], ports[1]));
                node.spawn_serve()?;
                relaunched += 1;
            }
        }
        if started.elapsed() > READY_TIMEOUT {
            let ready = ready_ms.iter().flatten().count();
            return Err(ChaosError::Server(format!(
                "only {ready} of {servers} servers ready {} s after the cold start",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let all_ready_ms = started.elapsed().as_secs_f64() * 1_000.0;
    let after_start = coord.sample(run);
    let mut times: Vec<f64> = ready_ms.iter().flatten().copied().collect();
    let claimed: Vec<u64> = run.nodes.iter().flat_map(|n| n.claimed()).collect();
    let mut distinct = claimed.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let held = holders(run, coord.store, endpoints, url)?;
    crate::say!(
        "   cold start: {servers} servers ready in {:.0} ms; {} distinct generator IDs in the logs, {} held",
        all_ready_ms,
        distinct.len(),
        held.0
    );
    let cold = json!({
        "servers": servers,
        "launch_ms": round2(launched_ms),
        "relaunched_for_a_taken_port": relaunched,
        "all_ready_ms": round2(all_ready_ms),
        "ready": percentiles(&mut times),
        "generator_ids_claimed": claimed.len(),
        "distinct_generator_ids": distinct.len(),
        "held_after_start": held.0,
        "distinct_held_after_start": held.1,
        "coordinator": window(&before, &after_start, servers),
    });

    // Idle: no client.
    run.hold(Duration::from_secs(2));
    let idle0 = coord.sample(run);
    run.hold(idle_s);
    let idle1 = coord.sample(run);
    let idle = window(&idle0, &idle1, servers);
    crate::say!("   idle: {idle}");

    // Under load: an idmint-client over every server, and HTTP clients on four of them.
    // Small batches (and a pause for the HTTP clients): the load is on the servers' request
    // path, not hundreds of millions of IDs for the checker to hold.
    run.pace = (100, Duration::from_millis(2));
    let urls = run.nodes.iter().map(|n| format!("http://{}", n.http)).collect();
    run.failover_of(urls, ClientMode::Batch, 100);
    for i in 0..4.min(servers) {
        run.http(i * servers / 4, 1, None);
    }
    run.hold(Duration::from_secs(2));
    let load0 = coord.sample(run);
    run.hold(idle_s);
    let load1 = coord.sample(run);
    let load = window(&load0, &load1, servers);
    crate::say!("   under load: {load}");

    // A mark write's latency through idmint's coordinator, PROBE_RATE per second, under load.
    let probe = probe(run, coord.store, endpoints, url, idle_s)?;
    crate::say!("   mark write under load: {probe}");

    // Rolling restart under load: SIGTERM, start, ready, one server after another.
    run.fired("sigterm", format!("rolling restart of all {servers} servers"));
    let rolling_started = Instant::now();
    let roll0 = coord.sample(run);
    let mut steps = Vec::new();
    for i in 0..servers {
        let step = Instant::now();
        run.nodes[i].terminate();
        run.nodes[i].start()?;
        run.nodes[i].wait_ready(Duration::from_secs(60))?;
        steps.push(step.elapsed().as_secs_f64() * 1_000.0);
    }
    let roll1 = coord.sample(run);
    let rolling_s = rolling_started.elapsed().as_secs_f64();
    run.hold(Duration::from_secs(2));
    let end = holders(run, coord.store, endpoints, url)?;
    let live: Vec<u32> = run.nodes.iter().filter_map(|n| n.pid()).collect();
    crate::say!(
        "   rolling restart: {servers} steps in {rolling_s:.1} s; holders at the end {} ({} distinct, {} by dead processes)",
        end.0,
        end.1,
        end.2.iter().filter(|p| !live.contains(p)).count()
    );
    let rolling = json!({
        "seconds": round2(rolling_s),
        "step": percentiles(&mut steps),
        "holders_at_end": end.0,
        "distinct_held_at_end": end.1,
        "held_by_dead_processes": end.2.iter().filter(|p| !live.contains(p)).count(),
        "coordinator": window(&roll0, &roll1, servers),
    });
    Ok(json!({
        "cold_start": cold,
        "idle": idle,
        "load": load,
        "mark_write_under_load": probe,
        "rolling_restart": rolling,
        "ttl_s": TTL_S,
        "window_ms": WINDOW_MS,
    }))
}

/// `idmint lease list` on the store: claimed entries, distinct generator IDs among them, and
/// the holders' PIDs.
fn holders(
    run: &Run,
    store: Store,
    endpoints: &str,
    url: &str,
) -> Result<(usize, usize, Vec<u32>), ChaosError> {
    let flags = match store {
        Store::Etcd => ["--etcd".to_owned(), endpoints.to_owned()],
        Store::Postgres => ["--postgres".to_owned(), url.to_owned()],
    };
    let entries = run.lease_list(&flags)?;
    let claimed: Vec<&Value> =
        entries.iter().filter(|e| e["claimed"].as_bool() == Some(true)).collect();
    let mut ids: Vec<u64> = claimed.iter().filter_map(|e| e["generator_id"].as_u64()).collect();
    ids.sort_unstable();
    ids.dedup();
    let pids = claimed
        .iter()
        .filter_map(|e| e["holder"].as_str())
        .filter_map(|h| h.split("pid ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next())
        .filter_map(|p| p.parse().ok())
        .collect();
    Ok((claimed.len(), ids.len(), pids))
}

/// idmint's own coordinator client for the store.
async fn connect(
    store: Store,
    endpoints: &str,
    url: &str,
) -> Result<Arc<dyn Coordinator>, ChaosError> {
    let error = |e: idmint_coord::Error| ChaosError::Server(format!("connect a probe: {e}"));
    Ok(match store {
        Store::Etcd => {
            let list: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
            let options = EtcdOptions { lease_ttl_secs: TTL_S, ..EtcdOptions::default() };
            Arc::new(EtcdCoordinator::connect(&list, options).await.map_err(error)?)
        }
        Store::Postgres => {
            let lease = PostgresLeaseOptions {
                ttl: Duration::from_secs(u64::from(TTL_S)),
                ..PostgresLeaseOptions::default()
            };
            Arc::new(
                PostgresCoordinator::connect(url, PostgresOptions::default(), lease)
                    .await
                    .map_err(error)?,
            )
        }
    })
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Mark writes at PROBE_RATE per second for `length`, each timed, on a claim of namespace
/// `fleet-probe` (not the fleet's).
fn probe(
    run: &Run,
    store: Store,
    endpoints: &str,
    url: &str,
    length: Duration,
) -> Result<Value, ChaosError> {
    run.runtime.block_on(async {
        let coordinator = connect(store, endpoints, url).await?;
        let request = ClaimRequest::new("fleet-probe", GeneratorIds::Pool { count: 1 }, "probe");
        let failed = |e: idmint_coord::Error| ChaosError::Server(format!("the probe: {e}"));
        let claim = coordinator.claim(&request).await.map_err(failed)?;
        let pace = tokio::time::interval(Duration::from_millis(1_000 / PROBE_RATE));
        let (mut latencies, failures) =
            write_marks(coordinator.as_ref(), claim, Instant::now() + length, Some(pace)).await;
        let mut summary = percentiles(&mut latencies);
        summary["failures"] = json!(failures);
        summary["rate_per_s"] = json!(PROBE_RATE);
        Ok(summary)
    })
}

/// Writes increasing marks on `claim` until `end`, each as its answer comes or on each tick of
/// `pace`, then releases the claim: each write's latency in ms, and how many failed.
async fn write_marks(
    coordinator: &dyn Coordinator,
    claim: Claim,
    end: Instant,
    mut pace: Option<tokio::time::Interval>,
) -> (Vec<f64>, u64) {
    let mut latencies = Vec::new();
    let mut failures = 0u64;
    let mut mark = now_ms();
    while Instant::now() < end {
        if let Some(pace) = &mut pace {
            pace.tick().await;
        }
        mark = mark.max(now_ms()) + 1;
        let sent = Instant::now();
        match coordinator.store_mark(&claim, mark).await {
            Ok(()) => latencies.push(sent.elapsed().as_secs_f64() * 1_000.0),
            Err(_) => failures += 1,
        }
    }
    let _ = coordinator.release(&claim).await;
    (latencies, failures)
}

/// With the fleet stopped: how many mark writes per second the store takes from idmint's own
/// coordinator, from one claim and from BENCH_CLAIMS claims side by side, each writing as
/// fast as its answers come, for a fifth of the idle window each (at least 5 s).
fn write_bench(
    run: &mut Run,
    store: Store,
    endpoints: &str,
    url: &str,
    coord: &Coord,
) -> Result<Value, ChaosError> {
    let length = run.secs(20.0).max(Duration::from_secs(25)) / 5;
    let mut out = serde_json::Map::new();
    for claims in [1, BENCH_CLAIMS] {
        let before = coord.sample(run);
        let result = run.runtime.block_on(async {
            let coordinator = connect(store, endpoints, url).await?;
            let namespace = format!("fleet-bench-{claims}");
            let request =
                ClaimRequest::new(&namespace, GeneratorIds::Pool { count: claims }, "bench");
            let failed = |e: idmint_coord::Error| ChaosError::Server(format!("the bench: {e}"));
            let mut held = Vec::new();
            for _ in 0..claims {
                held.push(coordinator.claim(&request).await.map_err(failed)?);
            }
            let started = Instant::now();
            let end = started + length;
            let mut tasks = Vec::new();
            for claim in held {
                let coordinator = Arc::clone(&coordinator);
                tasks.push(tokio::spawn(async move {
                    write_marks(coordinator.as_ref(), claim, end, None).await
                }));
            }
            let mut latencies = Vec::new();
            let mut failures = 0;
            for task in tasks {
                if let Ok((l, f)) = task.await {
                    latencies.extend(l);
                    failures += f;
                }
            }
            let seconds = started.elapsed().as_secs_f64();
            // Sampled while the bench's connections (and their backends) still exist.
            let after = coord.sample(run);
            let writes = latencies.len();
            let mut summary = percentiles(&mut latencies);
            summary["writes_per_s"] = json!(round2(writes as f64 / seconds));
            summary["failures"] = json!(failures);
            summary["seconds"] = json!(round2(seconds));
            summary["coordinator"] = window(&before, &after, 1);
            Ok::<Value, ChaosError>(summary)
        })?;
        crate::say!("   write bench, {claims} claims: {result}");
        out.insert(format!("claims_{claims}"), result);
    }
    Ok(Value::Object(out))
}
