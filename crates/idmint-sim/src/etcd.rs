//! A model of etcd as idmint's fleet mode uses it, in simulated time: leases with a TTL that
//! expire unless kept alive, claim keys on those leases whose create revision is the fencing
//! token, and marks written by a compare-and-swap on that token. [`SimCoordinator`] is one
//! server's client of it, and implements the real [`Coordinator`] trait.
//!
//! Calls travel over the server's [`Machine`] link: a refused link fails them at once, a
//! hanging one holds them until it heals (then they are applied late) or until the request
//! timeout; a reply lost on the way back leaves a write applied but reported as failed. A
//! paused machine sends nothing and reads no reply until it resumes, and its keep-alives stop.
//!
//! A claim object can only be made inside `idmint-coord`, so each claim handed to a server is
//! minted by a private [`MemoryCoordinator`] (the reference backend) holding that one claim;
//! revoking it there is how the claim turns [`ClaimState::Lost`]. The claim's real state, its
//! lease and its token live here.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use idmint_coord::{
    Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds, MemoryCoordinator, Probe,
};
use tokio::{sync::watch, time::Instant};

use crate::net::{Link, Machine};

/// Timings of the etcd model, and the negative control.
///
/// # Example
///
/// ```
/// use idmint_sim::EtcdOptions;
///
/// let unfenced = EtcdOptions { fence: false, ..EtcdOptions::default() };
/// assert!(unfenced.margin < unfenced.lease_ttl / 2);
/// ```
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// The lease TTL: a claim whose lease is not kept alive for this long is gone.
    pub lease_ttl: Duration,
    /// The client stops trusting its claim at `send time of the last acknowledged keep-alive +
    /// TTL − margin` (as `idmint_coord::EtcdOptions::margin`).
    pub margin: Duration,
    /// A call with no answer within this long fails (`Unavailable`).
    pub request_timeout: Duration,
    /// One-way network latency.
    pub latency: Duration,
    /// The fence: a mark write compares the claim's token and lease. `false` is the negative
    /// control (UNSAFE): a mark write succeeds even after the claim's lease expired.
    pub fence: bool,
    /// How a claim is made. `false` (the default): one atomic request takes the first free
    /// candidate. `true`: as the real etcd and Postgres coordinators do, one request lists the
    /// held claim keys, then one create-if-absent request per free candidate in order, each a
    /// round trip, so that servers starting together race for the same candidates; a create
    /// that finds the key taken is a conflict ([`SimEtcd::claim_stats`]).
    pub scan: bool,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            lease_ttl: Duration::from_millis(2_000),
            margin: Duration::from_millis(500),
            request_timeout: Duration::from_millis(1_000),
            latency: Duration::from_millis(1),
            fence: true,
            scan: false,
        }
    }
}

/// One successful mark write, as etcd saw it ([`SimEtcd::writes`]).
///
/// # Example
///
/// ```
/// use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds};
/// use idmint_sim::{EtcdOptions, Machine, SimEtcd};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let etcd = SimEtcd::new(EtcdOptions::default());
/// let server = etcd.connect(Machine::new());
/// let claim = server.claim(&ClaimRequest::new("n", GeneratorIds::Fixed(0), "l")).await?;
/// server.store_mark(&claim, 7).await?;
/// let write = &etcd.writes()[0];
/// assert!(write.held && write.mark_ms == 7 && write.process == server.process());
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct MarkWrite {
    /// The writing server (its [`SimCoordinator::process`]).
    pub process: u64,
    /// The namespace.
    pub namespace: String,
    /// The generator ID.
    pub generator_id: u64,
    /// The mark stored (Unix ms).
    pub mark_ms: u64,
    /// When it was applied.
    pub at: Instant,
    /// Whether the writer still held the claim (its key, token and lease) when it was applied.
    /// Always true with the fence on.
    pub held: bool,
}

/// The simulated etcd cluster. Clones share it.
///
/// # Example
///
/// ```
/// use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds};
/// use idmint_sim::{EtcdOptions, Machine, SimEtcd};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let etcd = SimEtcd::new(EtcdOptions::default());
/// let server = etcd.connect(Machine::new());
/// let request = ClaimRequest::new("orders", GeneratorIds::Fixed(1), "snowflake");
/// let claim = server.claim(&request).await?;
/// server.store_mark(&claim, 5_000).await?;
/// assert_eq!(etcd.mark("orders", 1), Some(5_000));
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct SimEtcd {
    options: Arc<EtcdOptions>,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    revision: u64,
    next_process: u64,
    /// Lease ID → expiry.
    leases: BTreeMap<u64, Instant>,
    claims: BTreeMap<(String, u64), ClaimKey>,
    marks: BTreeMap<(String, u64), (u64, String)>,
    writes: Vec<MarkWrite>,
    stats: ClaimStats,
}

/// What claims cost etcd so far ([`SimEtcd::claim_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimStats {
    /// Requests made by claims (lists and create attempts; with `scan: false`, one per claim).
    pub requests: u64,
    /// Create attempts that found the candidate's key taken by another claim (`scan: true`).
    pub conflicts: u64,
    /// Claims granted.
    pub granted: u64,
}

/// A claim taken: (generator ID, stored mark, token, lease).
type Taken = (u64, Option<u64>, u64, u64);

#[derive(Debug)]
struct ClaimKey {
    lease: u64,
    create_revision: u64,
    holder: String,
}

impl State {
    fn expire(&mut self, now: Instant) {
        let before = self.leases.len();
        self.leases.retain(|_, expiry| *expiry > now);
        if self.leases.len() != before {
            let leases = &self.leases;
            self.claims.retain(|_, c| leases.contains_key(&c.lease));
        }
    }

    /// Takes generator ID `generator_id` for `req` on a new lease if its key is free:
    /// `Ok(Some((mark, token, lease)))`, or `Ok(None)` with the holder when it is taken.
    fn take(
        &mut self,
        now: Instant,
        ttl: Duration,
        req: &ClaimRequest,
        generator_id: u64,
    ) -> Result<Result<Taken, String>, Error> {
        let key = (req.namespace.clone(), generator_id);
        if let Some(claim) = self.claims.get(&key) {
            return Ok(Err(claim.holder.clone()));
        }
        let mark = match self.marks.get(&key) {
            Some((_, stored)) if *stored != req.layout_fingerprint => {
                return Err(Error::LayoutChanged {
                    namespace: req.namespace.clone(),
                    stored: stored.clone(),
                    expected: req.layout_fingerprint.clone(),
                });
            }
            Some((mark, _)) => Some(*mark),
            None => None,
        };
        self.revision += 1;
        let lease = self.revision;
        self.leases.insert(lease, now + ttl);
        self.revision += 1;
        let create_revision = self.revision;
        let holder = req.holder.clone();
        self.claims.insert(key, ClaimKey { lease, create_revision, holder });
        self.stats.granted += 1;
        Ok(Ok((generator_id, mark, create_revision, lease)))
    }

    fn holds(&self, key: &(String, u64), token: u64) -> bool {
        self.claims
            .get(key)
            .is_some_and(|c| c.create_revision == token && self.leases.contains_key(&c.lease))
    }
}

impl SimEtcd {
    /// An empty cluster.
    pub fn new(options: EtcdOptions) -> Self {
        SimEtcd { options: Arc::new(options), state: Arc::default() }
    }

    /// A client for one server process on `machine`.
    pub fn connect(&self, machine: Machine) -> SimCoordinator {
        let process = {
            let mut state = self.lock();
            state.next_process += 1;
            state.next_process
        };
        SimCoordinator { etcd: self.clone(), process, machine, held: Arc::default() }
    }

    /// The stored mark of a generator ID.
    pub fn mark(&self, namespace: &str, generator_id: u64) -> Option<u64> {
        self.lock().marks.get(&(namespace.to_owned(), generator_id)).map(|m| m.0)
    }

    /// What claims have cost so far: requests, conflicts, claims granted.
    pub fn claim_stats(&self) -> ClaimStats {
        self.lock().stats
    }

    /// Every mark write applied so far, in order.
    pub fn writes(&self) -> Vec<MarkWrite> {
        self.lock().writes.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A claim as its holder's client knows it.
#[derive(Debug)]
struct Held {
    namespace: String,
    generator_id: u64,
    fingerprint: String,
    token: u64,
    lease: u64,
    /// Mints the claim object and publishes `Lost` (by revoking it).
    minter: MemoryCoordinator,
    receiver: watch::Receiver<ClaimState>,
    ended: AtomicBool,
    /// Send time of the last acknowledged keep-alive, as ms since `created`.
    last_ack_ms: AtomicU64,
    /// When the claim was granted, on the machine's monotonic clock.
    created: Instant,
}

impl Held {
    /// Ends the claim on this side and publishes `Lost` (once).
    fn lose(&self) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            self.minter.revoke(&self.namespace, self.generator_id);
        }
    }

    fn key(&self) -> (String, u64) {
        (self.namespace.clone(), self.generator_id)
    }
}

/// One server process's etcd client: a [`Coordinator`] (see [`SimEtcd`] for an example).
/// Dropping it revokes its leases, as a process that exits cleanly does; a crash is modelled
/// by its [`Machine`] instead, whose calls then never arrive.
#[derive(Debug)]
pub struct SimCoordinator {
    etcd: SimEtcd,
    process: u64,
    machine: Machine,
    held: Arc<Mutex<Vec<Arc<Held>>>>,
}

fn unavailable(reason: &str) -> Error {
    Error::Unavailable { backend: "sim-etcd", reason: reason.to_owned() }
}

impl SimCoordinator {
    /// This client's process number (distinct per connection).
    pub fn process(&self) -> u64 {
        self.process
    }

    /// One request to etcd over the machine's link; `op` runs atomically at etcd.
    async fn rpc<T>(&self, op: impl FnOnce(&mut State, Instant) -> T) -> Result<T, Error> {
        call(&self.etcd, &self.machine, op).await
    }

    fn find(&self, claim: &Claim) -> Option<Arc<Held>> {
        let receiver = claim.watch();
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|h| h.receiver.same_channel(&receiver))
            .cloned()
    }

    /// A claim as the real coordinators make one (`EtcdOptions::scan`): list the held keys,
    /// then try free candidates in the order of a [`Probe`], one request each.
    async fn claim_scanning(&self, request: &ClaimRequest) -> Result<Taken, Error> {
        let ttl = self.etcd.options.lease_ttl;
        let held = async || {
            let namespace = request.namespace.clone();
            self.rpc(move |state, _| {
                state.stats.requests += 1;
                let held = state.claims.keys().filter(|(n, _)| *n == namespace);
                held.map(|(_, id)| *id).collect::<Vec<u64>>()
            })
            .await
        };
        let mut last_holder = None;
        // As the real coordinators draw apart: the seed differs per connection.
        let seed = self.process ^ 0x9e37_79b9_7f4a_7c15;
        let mut probe = Probe::new(request.generator_ids, held().await?, seed);
        while let Some(generator_id) = probe.next() {
            let req = request.clone();
            let taken = self
                .rpc(move |state, now| {
                    state.stats.requests += 1;
                    let taken = state.take(now, ttl, &req, generator_id);
                    if matches!(taken, Ok(Err(_))) {
                        state.stats.conflicts += 1;
                    }
                    taken
                })
                .await??;
            match taken {
                Ok(taken) => return Ok(taken),
                Err(holder) => last_holder = Some(holder),
            }
            if probe.relist_due() {
                probe.add_held(held().await?);
            }
        }
        Err(exhausted(request, last_holder))
    }

    async fn mint(
        request: &ClaimRequest,
        generator_id: u64,
        mark: Option<u64>,
    ) -> Result<(MemoryCoordinator, Claim), Error> {
        let minter = MemoryCoordinator::new();
        let fixed =
            ClaimRequest { generator_ids: GeneratorIds::Fixed(generator_id), ..request.clone() };
        if let Some(mark) = mark {
            let first = minter.claim(&fixed).await?;
            minter.store_mark(&first, mark).await?;
            minter.release(&first).await?;
        }
        let claim = minter.claim(&fixed).await?;
        Ok((minter, claim))
    }
}

/// The error of a claim that found no free candidate.
fn exhausted(req: &ClaimRequest, last_holder: Option<String>) -> Error {
    match (req.generator_ids, last_holder) {
        (GeneratorIds::Fixed(generator_id), Some(holder)) => {
            Error::Conflict { namespace: req.namespace.clone(), generator_id, holder }
        }
        (ids, _) => Error::PoolExhausted { namespace: req.namespace.clone(), size: ids.count() },
    }
}

async fn call<T>(
    etcd: &SimEtcd,
    machine: &Machine,
    op: impl FnOnce(&mut State, Instant) -> T,
) -> Result<T, Error> {
    machine.running().await;
    let deadline = Instant::now() + etcd.options.request_timeout;
    tokio::time::sleep(etcd.options.latency).await;
    match machine.state().etcd {
        Link::Up => {}
        Link::Refuse => return Err(unavailable("connection refused")),
        Link::Hang => {
            if !machine.link_up(|s| s.etcd, deadline).await {
                return Err(unavailable("no answer within the request timeout"));
            }
        }
    }
    let out = {
        let now = Instant::now();
        let mut state = etcd.lock();
        state.expire(now);
        op(&mut state, now)
    };
    tokio::time::sleep(etcd.options.latency).await;
    match machine.state().etcd {
        Link::Up => {}
        Link::Refuse => return Err(unavailable("connection reset before the reply")),
        Link::Hang => {
            if !machine.link_up(|s| s.etcd, deadline).await {
                return Err(unavailable("the reply was lost"));
            }
        }
    }
    machine.running().await;
    Ok(out)
}

/// Keeps a claim's lease alive every TTL/3 while its machine runs; publishes `Lost` when etcd
/// says the lease is gone or the local deadline passes without an acknowledged keep-alive.
/// The deadline is kept on the machine's monotonic clock, which a suspension stops.
async fn keep_alive(etcd: SimEtcd, machine: Machine, held: Arc<Held>) {
    let ttl = etcd.options.lease_ttl;
    let deadline = |held: &Held| {
        held.created + Duration::from_millis(held.last_ack_ms.load(Ordering::SeqCst)) + ttl
            - etcd.options.margin
    };
    loop {
        tokio::select! {
            biased;
            () = tokio::time::sleep(ttl / 3) => {}
            () = tokio::time::sleep_until(machine.real_instant(deadline(&held))) => {}
        }
        // A paused process neither renews nor notices its deadline until it runs again.
        machine.running().await;
        if held.ended.load(Ordering::SeqCst) {
            return;
        }
        if machine.mono_now() >= deadline(&held) {
            held.lose();
            return;
        }
        let sent = machine.mono_now();
        let lease = held.lease;
        let renew = call(&etcd, &machine, move |state, now| {
            state.leases.get_mut(&lease).map(|expiry| *expiry = now + ttl).is_some()
        });
        let result = tokio::select! {
            biased;
            result = renew => Some(result),
            () = tokio::time::sleep_until(machine.real_instant(deadline(&held))) => None,
        };
        match result {
            Some(Ok(true)) => {
                let ms = u64::try_from((sent - held.created).as_millis()).unwrap_or(u64::MAX);
                held.last_ack_ms.fetch_max(ms, Ordering::SeqCst);
            }
            Some(Ok(false)) => {
                held.lose();
                return;
            }
            Some(Err(_)) | None => {}
        }
    }
}

#[async_trait::async_trait]
impl Coordinator for SimCoordinator {
    fn name(&self) -> &'static str {
        "sim-etcd"
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let ttl = self.etcd.options.lease_ttl;
        let taken = if self.etcd.options.scan {
            self.claim_scanning(request).await?
        } else {
            let req = request.clone();
            self.rpc(move |state, now| {
                state.stats.requests += 1;
                let mut last_holder = None;
                for generator_id in req.generator_ids.candidates() {
                    match state.take(now, ttl, &req, generator_id)? {
                        Ok(taken) => return Ok(taken),
                        Err(holder) => last_holder = Some(holder),
                    }
                }
                Err(exhausted(&req, last_holder))
            })
            .await??
        };
        let (generator_id, mark, token, lease) = taken;
        let (minter, claim) = Self::mint(request, generator_id, mark).await?;
        let held = Arc::new(Held {
            namespace: request.namespace.clone(),
            generator_id,
            fingerprint: request.layout_fingerprint.clone(),
            token,
            lease,
            minter,
            receiver: claim.watch(),
            ended: AtomicBool::new(false),
            last_ack_ms: AtomicU64::new(0),
            created: self.machine.mono_now(),
        });
        {
            let mut all = self.held.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|h| !h.ended.load(Ordering::SeqCst));
            all.push(Arc::clone(&held));
        }
        tokio::spawn(keep_alive(self.etcd.clone(), self.machine.clone(), held));
        Ok(claim)
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let lost = || Error::ClaimLost {
            namespace: claim.namespace().to_owned(),
            generator_id: claim.generator_id(),
        };
        let held = self.find(claim).ok_or_else(lost)?;
        if held.ended.load(Ordering::SeqCst) {
            return Err(lost());
        }
        let fence = self.etcd.options.fence;
        let (process, target) = (self.process, Arc::clone(&held));
        let result = self
            .rpc(move |state, now| {
                let key = target.key();
                let holds = state.holds(&key, target.token);
                if fence && !holds {
                    return Err(None);
                }
                if let Some(&(stored_ms, _)) = state.marks.get(&key)
                    && mark_ms < stored_ms
                {
                    return Err(Some(Error::MarkRegressed { offered_ms: mark_ms, stored_ms }));
                }
                state.revision += 1;
                state.marks.insert(key, (mark_ms, target.fingerprint.clone()));
                state.writes.push(MarkWrite {
                    process,
                    namespace: target.namespace.clone(),
                    generator_id: target.generator_id,
                    mark_ms,
                    at: now,
                    held: holds,
                });
                Ok(())
            })
            .await?;
        match result {
            Ok(()) => Ok(()),
            Err(Some(e)) => Err(e),
            Err(None) => {
                held.lose();
                Err(lost())
            }
        }
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        let Some(held) = self.find(claim) else { return Ok(()) };
        if held.ended.load(Ordering::SeqCst) {
            return Ok(());
        }
        held.lose();
        let target = Arc::clone(&held);
        self.rpc(move |state, _| {
            let key = target.key();
            if state.holds(&key, target.token) {
                state.claims.remove(&key);
            }
            state.leases.remove(&target.lease);
        })
        .await
    }
}

impl Drop for SimCoordinator {
    /// A client that goes away (a process that exits) revokes its leases.
    fn drop(&mut self) {
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()));
        let mut state = self.etcd.lock();
        for h in held {
            h.lose();
            let key = h.key();
            if state.claims.get(&key).is_some_and(|c| c.create_revision == h.token) {
                state.claims.remove(&key);
            }
            state.leases.remove(&h.lease);
        }
    }
}
