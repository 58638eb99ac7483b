//! One simulated run: real `idmint_server::Server`s on simulated machines over a
//! [`SimEtcd`], clients that record every acknowledged batch, and a nemesis that partitions,
//! pauses, steps clocks and crashes, all from one seed, in tokio's paused time on one thread.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use idmint_core::Clock;
use idmint_server::{NamespaceConfig, Server, ServerConfig};
use tokio::time::Instant;

use crate::{
    Rng,
    check::{self, Ack, Report},
    clock::SimClock,
    etcd::{EtcdOptions, SimEtcd},
    net::{Link, Machine},
};

/// The namespace every simulated server serves.
pub const NAMESPACE: &str = "sim";

/// What to simulate.
///
/// # Example
///
/// ```
/// use idmint_sim::SimOptions;
///
/// let options = SimOptions::default();
/// assert!(options.etcd.fence && options.pool < options.servers as u64);
/// assert!(!SimOptions::without_fence().etcd.fence);
/// ```
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Server machines.
    pub servers: usize,
    /// Generator IDs in the pool (fewer than servers leaves spares waiting to take over).
    pub pool: u64,
    /// Clients, each sending one request at a time.
    pub clients: usize,
    /// Simulated duration of the run.
    pub duration: Duration,
    /// A client waits between this many ms (low, high) before each request.
    pub think_ms: (u64, u64),
    /// The servers' window (`ServerConfig::window_ms`).
    pub window_ms: u64,
    /// The etcd model (its `fence: false` is the negative control).
    pub etcd: EtcdOptions,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            servers: 3,
            pool: 2,
            clients: 3,
            duration: Duration::from_secs(10),
            think_ms: (2, 40),
            window_ms: 1_000,
            etcd: EtcdOptions::default(),
        }
    }
}

impl SimOptions {
    /// The default run with the fence removed (UNSAFE, the negative control).
    pub fn without_fence() -> Self {
        let mut options = SimOptions::default();
        options.etcd.fence = false;
        options
    }
}

/// One server machine: its clock survives restarts, its process does not.
struct Slot {
    clock: Arc<SimClock>,
    machine: Machine,
    /// Which process runs on it now (a new number per start), and the server once started.
    process: u64,
    server: Option<Arc<Server>>,
}

struct World {
    options: SimOptions,
    etcd: SimEtcd,
    slots: Mutex<Vec<Slot>>,
    acks: Mutex<Vec<Ack>>,
    outcomes: Mutex<[u64; 3]>,
    /// Failed requests by reason.
    reasons: Mutex<BTreeMap<String, u64>>,
    nemeses: Mutex<BTreeMap<&'static str, u64>>,
    end: Instant,
}

/// Runs one seed to the end and checks its history.
///
/// # Example
///
/// ```
/// use idmint_sim::{SimOptions, run_seed};
///
/// let options = SimOptions { duration: std::time::Duration::from_secs(2), ..SimOptions::default() };
/// let report = run_seed(1, &options);
/// assert!(report.ok(), "{report}");
/// assert!(report.ids > 0);
/// ```
pub fn run_seed(seed: u64, options: &SimOptions) -> Report {
    crate::rng::block_on_seeded(seed, simulate(seed, options.clone()))
}

async fn simulate(seed: u64, options: SimOptions) -> Report {
    let root = Rng::new(seed);
    let mut setup = root.fork(0);
    // Machines' clocks start within 50 ms of each other (a fleet kept in step by NTP), on a
    // date in 2025; the nemesis then steps them apart.
    let base = 1_750_000_000_000 + setup.below(3_600_000);
    let slots = (0..options.servers)
        .map(|_| Slot {
            clock: Arc::new(SimClock::new(base + setup.below(50))),
            machine: Machine::new(),
            process: 0,
            server: None,
        })
        .collect();
    let world = Arc::new(World {
        etcd: SimEtcd::new(options.etcd.clone()),
        slots: Mutex::new(slots),
        acks: Mutex::default(),
        outcomes: Mutex::default(),
        reasons: Mutex::default(),
        nemeses: Mutex::default(),
        end: Instant::now() + options.duration,
        options,
    });
    for slot in 0..world.options.servers {
        tokio::spawn(Arc::clone(&world).start_server(slot, Duration::ZERO));
    }
    let mut tasks = Vec::new();
    for client in 0..world.options.clients {
        tasks.push(tokio::spawn(Arc::clone(&world).client(root.fork(100 + client as u64), client)));
    }
    tasks.push(tokio::spawn(Arc::clone(&world).nemesis(root.fork(1))));
    for task in tasks {
        task.await.expect("a simulation task panicked");
    }
    let acks = std::mem::take(&mut *world.acks.lock().expect("acks"));
    let [failed, info, _] = *world.outcomes.lock().expect("outcomes");
    let nemeses = world.nemeses.lock().expect("nemeses").clone();
    let mut report = check::check(seed, &acks, &world.etcd.writes(), failed, info, nemeses);
    report.failures = std::mem::take(&mut *world.reasons.lock().expect("reasons"));
    report
}

impl World {
    fn slot<T>(&self, i: usize, f: impl FnOnce(&mut Slot) -> T) -> T {
        f(&mut self.slots.lock().expect("slots")[i])
    }

    fn fired(&self, nemesis: &'static str) {
        *self.nemeses.lock().expect("nemeses").entry(nemesis).or_default() += 1;
    }

    /// Starts a new server process on machine `slot` after `delay`, retrying while the start
    /// fails.
    async fn start_server(self: Arc<Self>, slot: usize, delay: Duration) {
        tokio::time::sleep(delay).await;
        let (clock, machine) = self.slot(slot, |s| (Arc::clone(&s.clock), s.machine.clone()));
        let config = ServerConfig {
            namespaces: vec![NamespaceConfig {
                generator_pool: Some(self.options.pool),
                ..NamespaceConfig::named(NAMESPACE)
            }],
            window_ms: self.options.window_ms,
            wait_for_claim: true,
            claim_retry_ms: 500,
            max_wait_ms: 500,
            // The clock watch is a thread on real time; simulated clocks run on tokio's paused
            // time, which it cannot see.
            clock_step_warn_ms: 0,
            ..ServerConfig::default()
        };
        loop {
            // The process number is the etcd client's, so that the checker can match its mark
            // writes; a new machine state means this start belongs to a crashed process.
            let coordinator = Arc::new(self.etcd.connect(machine.clone()));
            let process = coordinator.process();
            let current = self.slot(slot, |s| {
                let current = s.machine.same(&machine) && s.server.is_none();
                if current {
                    s.process = process;
                }
                current
            });
            if !current {
                return;
            }
            let wall: Arc<dyn Clock + Send + Sync> = clock.clone();
            match Server::start(config.clone(), coordinator, wall).await {
                Ok(server) => {
                    let stale = self.slot(slot, |s| {
                        let current = s.process == process;
                        if current {
                            s.server = Some(Arc::clone(&server));
                        }
                        !current
                    });
                    if stale {
                        // The machine crashed or was restarted meanwhile: this process ends.
                        let _ = server.stop().await;
                    }
                    return;
                }
                Err(_) if Instant::now() < self.end => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(_) => return,
            }
        }
    }

    /// Sends one request at a time to random servers until the end, recording acknowledged
    /// batches; failed and ambiguous requests are counted.
    async fn client(self: Arc<Self>, mut rng: Rng, client: usize) {
        while Instant::now() < self.end {
            let (low, high) = self.options.think_ms;
            tokio::time::sleep(Duration::from_millis(rng.between(low, high))).await;
            let slot = rng.below(self.options.servers as u64) as usize;
            let count = if rng.chance(70) { 1 } else { rng.between(2, 32) };
            let (process, server, machine) =
                self.slot(slot, |s| (s.process, s.server.clone(), s.machine.clone()));
            let Some(server) = server else {
                self.failed("no server running");
                continue;
            };
            let invoked = Instant::now();
            if machine.state().clients == Link::Refuse {
                self.failed("connection refused");
                continue;
            }
            // The request runs on the server even if the client stops waiting for it.
            let mut request = Box::pin({
                let machine = machine.clone();
                async move {
                    let deadline = Instant::now() + Duration::from_millis(2_000);
                    if !machine.link_up(|s| s.clients, deadline).await {
                        return None;
                    }
                    machine.running().await;
                    let mut ids = Vec::new();
                    let result = server.issue_u64(NAMESPACE, count, &mut ids).await;
                    machine.running().await;
                    Some(result.map(|()| ids))
                }
            });
            let reply = tokio::select! {
                biased;
                reply = &mut request => Some(reply),
                () = tokio::time::sleep(Duration::from_millis(2_000)) => {
                    tokio::spawn(request);
                    None
                }
            };
            let state = machine.state();
            let current = self.slot(slot, |s| s.process);
            match reply {
                Some(Some(Ok(ids)))
                    if state.clients == Link::Up && !state.crashed && current == process =>
                {
                    self.acks.lock().expect("acks").push(Ack {
                        client,
                        process,
                        invoked,
                        acked: Instant::now(),
                        ids,
                    });
                }
                // Refused before it reached the server, or answered with an error.
                Some(None) => self.failed("no connection"),
                Some(Some(Err(e))) => {
                    let name = format!("{e:?}");
                    let end = name.find(|c: char| !c.is_alphanumeric()).unwrap_or(name.len());
                    self.failed(&name[..end]);
                }
                // It may have been served: the reply was lost, or the server died.
                _ => self.outcome(1),
            }
        }
    }

    fn failed(&self, reason: &str) {
        self.outcome(0);
        *self.reasons.lock().expect("reasons").entry(reason.to_owned()).or_default() += 1;
    }

    fn outcome(&self, which: usize) {
        self.outcomes.lock().expect("outcomes")[which] += 1;
    }

    /// Every 0.2 to 2 s: one fault on one random machine, healed after a random time (some
    /// longer than the lease TTL).
    async fn nemesis(self: Arc<Self>, mut rng: Rng) {
        let settle = Duration::from_secs(2);
        loop {
            tokio::time::sleep(Duration::from_millis(rng.between(200, 2_000))).await;
            if Instant::now() + settle >= self.end {
                return;
            }
            let slot = rng.below(self.options.servers as u64) as usize;
            let machine = self.slot(slot, |s| s.machine.clone());
            let hold = Duration::from_millis(if rng.chance(50) {
                rng.between(50, 1_500)
            } else {
                rng.between(1_500, 8_000)
            });
            match rng.below(8) {
                0 | 1 => {
                    let (name, link) = if rng.chance(50) {
                        ("partition-etcd-hang", Link::Hang)
                    } else {
                        ("partition-etcd-refuse", Link::Refuse)
                    };
                    self.fired(name);
                    machine.update(|s| s.etcd = link);
                    heal(hold, machine, |s| s.etcd = Link::Up);
                }
                2 | 3 => {
                    machine.update(|s| s.paused = true);
                    if rng.chance(50) {
                        // A suspended VM: its monotonic clock does not count the pause, so its
                        // lease deadline looks further away than it is.
                        self.fired("suspend");
                        let lag = u64::try_from(hold.as_millis()).unwrap_or(u64::MAX);
                        heal(hold, machine, move |s| {
                            s.paused = false;
                            s.mono_lag_ms += lag;
                        });
                    } else {
                        self.fired("pause");
                        heal(hold, machine, |s| s.paused = false);
                    }
                }
                4 => {
                    let step: i64 = match rng.below(6) {
                        0 => -5,
                        1 => -1_000,
                        2 => -10_000,
                        3 => -3_600_000,
                        4 => 500,
                        _ => 3_600_000,
                    };
                    self.fired(if step < 0 { "clock-back" } else { "clock-forward" });
                    let clock = self.slot(slot, |s| Arc::clone(&s.clock));
                    clock.step_ms(step);
                    if step.abs() >= 3_600_000 && rng.chance(50) {
                        // And back again later.
                        tokio::spawn(async move {
                            tokio::time::sleep(hold).await;
                            clock.step_ms(-step);
                        });
                    }
                }
                5 => {
                    self.fired("partition-clients");
                    let link = if rng.chance(50) { Link::Hang } else { Link::Refuse };
                    machine.update(|s| s.clients = link);
                    heal(hold, machine, |s| s.clients = Link::Up);
                }
                6 => {
                    self.fired("crash");
                    self.crash(slot);
                    let delay = Duration::from_millis(rng.between(0, 3_000));
                    tokio::spawn(Arc::clone(&self).start_server(slot, delay));
                }
                _ => {
                    self.fired("restart");
                    let server = self.slot(slot, |s| s.server.take());
                    let world = Arc::clone(&self);
                    tokio::spawn(async move {
                        if let Some(server) = server {
                            let _ = server.stop().await;
                        }
                        world.start_server(slot, Duration::ZERO).await;
                    });
                }
            }
        }
    }

    /// Kills the process on machine `slot`: it never sends or answers again; the machine
    /// comes back with the same clock and healed links for the next process.
    fn crash(&self, slot: usize) {
        let (old, server) = self.slot(slot, |s| {
            let old = std::mem::take(&mut s.machine);
            s.process = 0;
            (old, s.server.take())
        });
        old.update(|s| s.crashed = true);
        if let Some(server) = server {
            // Stops its background tasks; its last mark write never leaves the dead machine.
            tokio::spawn(async move {
                let _ = server.stop().await;
            });
        }
    }
}

/// Undoes a fault after `hold`.
fn heal(
    hold: Duration,
    machine: Machine,
    undo: impl FnOnce(&mut crate::MachineState) + Send + 'static,
) {
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        machine.update(undo);
    });
}
