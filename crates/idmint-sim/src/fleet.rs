//! A fleet's claims at scale, simulated ([`run_fleet`]): `servers` real
//! `idmint_server::Server`s started together (within `start_spread`) on a [`SimEtcd`] whose
//! claims scan as the real coordinators do (`EtcdOptions::scan`), over a layout with
//! `generator_ids` generator IDs (snowflake's 1,024 or uuid7's 65,536), `spares` of them
//! spares once the pool is held. It reports the distribution of claim times (start to
//! ready), the claims' requests and conflicts, and, after holders are crashed one at a time,
//! how long a spare takes to take a generator ID over. No faults but the crashes; no clients.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use idmint_core::Clock;
use idmint_server::{NamespaceConfig, Server, ServerConfig};
use tokio::time::Instant;

use crate::{
    Rng,
    clock::SimClock,
    etcd::{ClaimStats, EtcdOptions, SimEtcd},
    net::Machine,
    world::NAMESPACE,
};

/// What to simulate.
///
/// # Example
///
/// ```
/// use idmint_sim::FleetOptions;
///
/// let options = FleetOptions::default();
/// assert!(options.etcd.scan && options.pool() == options.servers as u64 - options.spares as u64);
/// ```
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// Servers started, spares included.
    pub servers: usize,
    /// Of them, how many find every generator ID of the pool held and wait (`wait_for_claim`).
    pub spares: usize,
    /// The layout's generator IDs: 1,024 (snowflake) or 65,536 (uuid7); the pool is the
    /// first `servers − spares` of them when fewer, else all.
    pub generator_ids: u64,
    /// Servers start at random times within this long.
    pub start_spread: Duration,
    /// Holders crashed one after another once every server is up, each timed until a spare
    /// holds a generator ID again (at most `spares`).
    pub takeovers: usize,
    /// How often a waiting spare tries to claim (`ServerConfig::claim_retry_ms`).
    pub claim_retry_ms: u64,
    /// The servers' window (`ServerConfig::window_ms`).
    pub window_ms: u64,
    /// The etcd model; `scan` should stay on (the real coordinators' claims).
    pub etcd: EtcdOptions,
}

impl Default for FleetOptions {
    fn default() -> Self {
        FleetOptions {
            servers: 20,
            spares: 2,
            generator_ids: 1_024,
            start_spread: Duration::ZERO,
            takeovers: 2,
            claim_retry_ms: 100,
            window_ms: 3_000,
            etcd: EtcdOptions {
                lease_ttl: Duration::from_secs(10),
                margin: Duration::from_secs(1),
                request_timeout: Duration::from_secs(5),
                latency: Duration::from_micros(500),
                fence: true,
                scan: true,
            },
        }
    }
}

impl FleetOptions {
    /// The generator IDs the servers share: as many as the servers that are not spares, at
    /// most the layout's.
    pub fn pool(&self) -> u64 {
        (self.servers.saturating_sub(self.spares) as u64).clamp(1, self.generator_ids)
    }

    /// The layout whose generator IDs these are.
    fn layout(&self) -> &'static str {
        if self.generator_ids > 1_024 { "uuid7" } else { "snowflake" }
    }
}

/// What [`run_fleet`] saw. Times are simulated milliseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetReport {
    /// The seed.
    pub seed: u64,
    /// Claim time of each server that claimed at its start (start to ready), sorted.
    pub claim_ms: Vec<u64>,
    /// Servers ready before the crashes (at most the pool).
    pub ready: usize,
    /// Distinct generator IDs held before the crashes.
    pub distinct: usize,
    /// The claims' requests and conflicts until every server had started (ready, or a spare
    /// waiting).
    pub claims_at_start: ClaimStats,
    /// The same over the whole run: waiting spares retry every `claim_retry_ms`.
    pub claims: ClaimStats,
    /// For each crash of a holder: how long until a spare held a generator ID again.
    pub takeover_ms: Vec<u64>,
    /// Mark writes per simulated second per server while the fleet ran idle (after the
    /// start, before the crashes).
    pub mark_writes_per_server_s: f64,
}

impl FleetReport {
    /// The `q` quantile (0..=1) of the claim times, in ms (nearest rank).
    pub fn claim_quantile(&self, q: f64) -> u64 {
        quantile(&self.claim_ms, q)
    }
}

/// The `q` quantile of sorted `values` (nearest rank; 0 when empty).
pub fn quantile(values: &[u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    let rank = (values.len() as f64 * q.clamp(0.0, 1.0)).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

impl std::fmt::Display for FleetReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {} ready, {} distinct; claim p50 {} ms, p99 {} ms, max {} ms; at the start {} claim requests, {} conflicts; in all {} claim requests, {} conflicts; takeovers {:?} ms; {:.2} mark writes/s per server",
            self.seed,
            self.ready,
            self.distinct,
            self.claim_quantile(0.5),
            self.claim_quantile(0.99),
            self.claim_quantile(1.0),
            self.claims_at_start.requests,
            self.claims_at_start.conflicts,
            self.claims.requests,
            self.claims.conflicts,
            self.takeover_ms,
            self.mark_writes_per_server_s,
        )
    }
}

/// Runs one fleet to the end, in tokio's paused time on one thread.
///
/// # Example
///
/// ```
/// use idmint_sim::{FleetOptions, run_fleet};
///
/// let options = FleetOptions { servers: 6, spares: 1, takeovers: 1, ..FleetOptions::default() };
/// let report = run_fleet(7, &options);
/// assert_eq!((report.ready, report.distinct), (5, 5));
/// assert_eq!(report.takeover_ms.len(), 1);
/// ```
pub fn run_fleet(seed: u64, options: &FleetOptions) -> FleetReport {
    crate::rng::block_on_seeded(seed, simulate(seed, options.clone()))
}

/// One server machine and what runs on it.
struct Slot {
    machine: Machine,
    server: Option<Arc<Server>>,
}

async fn simulate(seed: u64, options: FleetOptions) -> FleetReport {
    let mut rng = Rng::new(seed);
    let etcd = SimEtcd::new(options.etcd.clone());
    let base = 1_750_000_000_000 + rng.below(3_600_000);
    let config = ServerConfig {
        namespaces: vec![NamespaceConfig {
            layout: options.layout().to_owned(),
            generator_pool: Some(options.pool()),
            ..NamespaceConfig::named(NAMESPACE)
        }],
        window_ms: options.window_ms,
        wait_for_claim: true,
        claim_retry_ms: options.claim_retry_ms,
        clock_step_warn_ms: 0,
        ..ServerConfig::default()
    };
    let slots: Arc<Mutex<Vec<Slot>>> = Arc::default();
    let started = Instant::now();
    let spread = u64::try_from(options.start_spread.as_millis()).unwrap_or(u64::MAX);
    let mut starts = Vec::new();
    let held = Arc::new(AtomicUsize::new(0));
    let pool = options.pool() as usize;
    for i in 0..options.servers {
        let delay = Duration::from_millis(if spread == 0 { 0 } else { rng.below(spread + 1) });
        let clock: Arc<dyn Clock + Send + Sync> =
            Arc::new(SimClock::new(base + delay.as_millis() as u64 + rng.below(50)));
        let machine = Machine::new();
        slots.lock().expect("slots").push(Slot { machine: machine.clone(), server: None });
        let (etcd, config, slots) = (etcd.clone(), config.clone(), Arc::clone(&slots));
        let held = Arc::clone(&held);
        starts.push(tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let at = Instant::now();
            let coordinator = Arc::new(etcd.connect(machine));
            let server = Server::start(config, coordinator, clock).await.expect("a server starts");
            slots.lock().expect("slots")[i].server = Some(Arc::clone(&server));
            // Claim time: from this server's start until it is ready. A spare never is: it
            // stops waiting once the whole pool is held.
            let limit = at + Duration::from_secs(600);
            while !server.is_ready() && Instant::now() < limit {
                if held.load(Ordering::SeqCst) >= pool {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let ready = server.is_ready();
            if ready {
                held.fetch_add(1, Ordering::SeqCst);
            }
            ready.then(|| (at.elapsed().as_millis()) as u64)
        }));
    }
    let mut claim_ms = Vec::new();
    for start in starts {
        if let Some(ms) = start.await.expect("a start task") {
            claim_ms.push(ms);
        }
    }
    claim_ms.sort_unstable();
    let claims_at_start = etcd.claim_stats();
    let ready_servers = || -> Vec<Arc<Server>> {
        slots
            .lock()
            .expect("slots")
            .iter()
            .filter_map(|s| s.server.clone())
            .filter(|s| s.is_ready())
            .collect()
    };
    let ready = ready_servers().len();
    let distinct = {
        let mut ids: Vec<u64> = ready_servers()
            .iter()
            .flat_map(|s| s.namespace_infos())
            .flat_map(|n| n.generator_ids.clone())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    };
    // Idle: mark writes over 30 s with the fleet up.
    let writes0 = etcd.writes().len();
    let idle = Duration::from_secs(30);
    tokio::time::sleep(idle).await;
    let writes = (etcd.writes().len() - writes0) as f64;
    let mark_writes_per_server_s = writes / idle.as_secs_f64() / ready.max(1) as f64;
    // Crashes: a holder's machine dies (its keep-alives stop); a spare must take over once
    // its lease expires.
    let mut takeover_ms = Vec::new();
    for _ in 0..options.takeovers.min(options.spares) {
        let victim = {
            let mut slots = slots.lock().expect("slots");
            let holders: Vec<usize> = (0..slots.len())
                .filter(|&i| slots[i].server.as_ref().is_some_and(|s| s.is_ready()))
                .collect();
            let Some(&i) = holders.get(rng.below(holders.len().max(1) as u64) as usize) else {
                break;
            };
            let slot = &mut slots[i];
            slot.machine.update(|s| s.crashed = true);
            slot.machine = Machine::new();
            slot.server.take()
        };
        if let Some(server) = victim {
            tokio::spawn(async move {
                let _ = server.stop().await;
            });
        }
        let crashed = Instant::now();
        let limit = crashed + Duration::from_secs(600);
        while ready_servers().len() < ready && Instant::now() < limit {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        takeover_ms.push(crashed.elapsed().as_millis() as u64);
    }
    let servers: Vec<Arc<Server>> =
        slots.lock().expect("slots").iter_mut().filter_map(|s| s.server.take()).collect();
    for server in servers {
        let _ = server.stop().await;
    }
    let _ = started;
    FleetReport {
        seed,
        claim_ms,
        ready,
        distinct,
        claims_at_start,
        claims: etcd.claim_stats(),
        takeover_ms,
        mark_writes_per_server_s,
    }
}
