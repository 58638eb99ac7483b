//! One namespace at run time. For source `generator`: its claim on a generator ID, its
//! generator, the durable window (the high-water mark stored ahead of the clock), and the
//! issuing of IDs under that window. For the store sources (`segment`, `counters`, `redis`):
//! the allocator, DecimalId source or icicle client it issues from, and its health.
//!
//! The rule that makes restarts safe: before any ID with time `t` leaves the server, a mark
//! `≥ t` is durably stored (the generator's ceiling is only ever raised to a stored mark), and a
//! new holder of the generator ID starts strictly above the mark it reads. Store sources rest
//! on their store instead: a range or counter value is durable before it is used.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use arc_swap::ArcSwapOption;
#[cfg(feature = "redis")]
use idmint_coord::IcicleClient;
use idmint_coord::{
    Claim, ClaimRequest, ClaimState, Coordinator, DecimalIdIssuer, DecimalIds, GeneratorIds,
    SegmentAllocator,
};
use idmint_core::{Anchor, AnyBatch, AnyGenerator, AnyId, GeneratorConfig, Layout, Next};
use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::{
    Backends, Error, NamespaceConfig, ServerConfig, Source,
    clock::Clocks,
    metrics::{NamespaceGauges, NamespaceMetrics},
};

/// The first wait between attempts to claim a generator ID (or start a store) again; the
/// longest is `ServerConfig::claim_retry_ms`.
const RECLAIM_BACKOFF_MIN: Duration = Duration::from_millis(50);

/// The waits of a background task that retries while it fails: from
/// [`RECLAIM_BACKOFF_MIN`], doubling up to `ServerConfig::claim_retry_ms`, with one warning per
/// streak of failures and the rest at debug level (a spare waiting for a generator ID would
/// otherwise log every attempt).
struct Backoff {
    first: Duration,
    longest: Duration,
    next: Duration,
    /// Whether the current streak of failures was logged as a warning already.
    warned: bool,
}

impl Backoff {
    fn new(server: &ServerConfig) -> Self {
        let longest = Duration::from_millis(server.claim_retry_ms);
        let first = RECLAIM_BACKOFF_MIN.min(longest);
        Backoff { first, longest, next: first, warned: false }
    }

    /// The wait before the next attempt.
    fn wait(&self) -> Duration {
        self.next
    }

    /// An attempt worked: the next streak of failures starts over.
    fn succeeded(&mut self) {
        self.next = self.first;
        self.warned = false;
    }

    /// Logs a failed attempt (`what` failed) and returns the wait before the next one; the
    /// wait after that is twice as long, up to the limit.
    fn failed(&mut self, namespace: &str, error: &Error, what: &str) -> Duration {
        if !std::mem::replace(&mut self.warned, true) {
            tracing::warn!(namespace, error = %error, "{what}; retrying");
        } else {
            tracing::debug!(namespace, error = %error, "{what}; retrying");
        }
        let wait = self.next;
        self.next = (self.next * 2).min(self.longest);
        wait
    }
}

/// Whether a failed claim may succeed later by itself, so that a server with `wait_for_claim`
/// starts without it and keeps trying: every generator ID it may take is held (by servers that
/// may stop), or the coordinator did not answer. Other errors (an invalid request, a changed
/// layout, a corrupt mark) need an operator.
pub(crate) fn claim_may_succeed_later(error: &Error) -> bool {
    use idmint_coord::Error as Coord;
    matches!(
        error,
        Error::Coord(
            Coord::PoolExhausted { .. }
                | Coord::Conflict { .. }
                | Coord::Unavailable { .. }
                | Coord::ClaimLost { .. }
        )
    ) || store_may_answer_later(error)
}

/// Whether a store source's failure at start (a Redis node down, a store not answering) may
/// clear up by itself.
#[cfg(feature = "redis")]
fn store_may_answer_later(error: &Error) -> bool {
    matches!(error, Error::Coord(idmint_coord::Error::AttemptsExhausted { .. }))
}

#[cfg(not(feature = "redis"))]
fn store_may_answer_later(_error: &Error) -> bool {
    false
}

/// Whether a claim may still be extended: held, and not past its local deadline.
fn claim_usable(state: ClaimState) -> bool {
    match state {
        ClaimState::Held { until: None } => true,
        ClaimState::Held { until: Some(deadline) } => std::time::Instant::now() < deadline,
        ClaimState::Lost => false,
    }
}

/// Where issued IDs go: `AnyId`s, or the bare `u64`s of a 64-bit layout.
trait IdSink {
    fn len(&self) -> usize;
    fn reserve(&mut self, additional: usize);
    fn take(&mut self, batch: AnyBatch);
    /// IDs of a 64-bit store source.
    fn take_u64(&mut self, ids: impl IntoIterator<Item = u64>);
    fn truncate(&mut self, len: usize);
}

impl IdSink for Vec<AnyId> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn take(&mut self, batch: AnyBatch) {
        self.extend(batch);
    }

    fn take_u64(&mut self, ids: impl IntoIterator<Item = u64>) {
        self.extend(ids.into_iter().map(AnyId::U64));
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }
}

impl IdSink for Vec<u64> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn reserve(&mut self, additional: usize) {
        Vec::reserve(self, additional);
    }

    fn take_u64(&mut self, ids: impl IntoIterator<Item = u64>) {
        self.extend(ids);
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }

    fn take(&mut self, batch: AnyBatch) {
        // Only 64-bit layouts issue into `u64`s (`Server::issue_u64` checks the width).
        self.extend(batch.map(|id| match id {
            AnyId::U64(v) => v,
            AnyId::U128(v) => v as u64,
        }));
    }
}

/// A namespace: configuration, metrics, and the active generator while a claim is held (source
/// `generator`) or the store it issues from (the other sources).
#[derive(Debug)]
pub(crate) struct Namespace {
    pub(crate) name: String,
    pub(crate) layout: Layout,
    pub(crate) source: Source,
    config: NamespaceConfig,
    active: ArcSwapOption<Active>,
    /// The store a store source issues from, once started.
    store: ArcSwapOption<StoreIssuer>,
    /// Whether the last call to the store succeeded (store sources): readiness.
    store_healthy: AtomicBool,
    pub(crate) metrics: NamespaceMetrics,
    /// Wakes the window task to extend the mark now.
    extend: Notify,
    /// Wakes requests that wait for an extension.
    extended: Notify,
}

/// The generator of a held claim, with its clock and its stored mark.
#[derive(Debug)]
pub(crate) struct Active {
    generator: AnyGenerator,
    anchor: Anchor,
    generator_id: u64,
    /// The stored high-water mark; the generator's ceiling never exceeds it.
    mark_ms: AtomicU64,
    /// The last wall-clock reading, to see backward steps.
    last_wall_ms: AtomicU64,
    /// The claim on the generator ID.
    claim: Claim,
}

impl Active {
    /// Whether IDs may still be issued under the stored mark: false once logical time has
    /// passed it (its extension failed or is late, e.g. the coordinator is down). Always true
    /// for layouts without time (`decimal-id`), whose mark is a launch ID.
    fn window_open(&self, clocks: &Clocks) -> bool {
        self.generator.last_ms().is_none()
            || self.anchor.now_ms(clocks.wall_ms(), clocks.mono_ms())
                <= self.mark_ms.load(Ordering::Acquire)
    }

    /// Logical time now: never backwards, following the monotonic clock. Counts backward
    /// steps of the wall clock on the way.
    fn now(&self, clocks: &Clocks, metrics: &NamespaceMetrics) -> u64 {
        let wall = clocks.wall_ms();
        let previous = self.last_wall_ms.swap(wall, Ordering::Relaxed);
        if wall < previous {
            metrics.clock_backward(previous - wall);
        }
        self.anchor.now_ms(wall, clocks.mono_ms())
    }
}

/// What a store source issues from.
#[derive(Debug)]
enum StoreIssuer {
    /// Source `segment`.
    Segment { allocator: SegmentAllocator, backend: &'static str },
    /// Source `counters`.
    Counters { source: DecimalIdIssuer, backend: &'static str },
    /// Source `redis`.
    #[cfg(feature = "redis")]
    Redis(IcicleClient),
}

impl StoreIssuer {
    /// The backend's name, for messages.
    fn backend(&self) -> &'static str {
        match self {
            StoreIssuer::Segment { backend, .. } | StoreIssuer::Counters { backend, .. } => backend,
            #[cfg(feature = "redis")]
            StoreIssuer::Redis(_) => "redis",
        }
    }

    /// Appends `count` IDs to `ids` (which holds `start` IDs of earlier requests), in
    /// increasing order. On an error some IDs may have been taken from the store: a gap.
    async fn fill<S: IdSink>(&self, count: u64, ids: &mut S) -> Result<(), Error> {
        let start = ids.len();
        match self {
            StoreIssuer::Segment { allocator, .. } => {
                let mut left = count;
                while left > 0 {
                    let range = allocator.next_batch(left).await?;
                    left -= range.end - range.start;
                    ids.take_u64(range);
                }
            }
            StoreIssuer::Counters { source, .. } => {
                // A DecimalId batch comes from one generator ID. When the source switches to the
                // next generator ID during a request (its counter part ran out), the IDs taken
                // from the old one are larger than the new one's: they are dropped (a gap) and
                // the request is served from the new generator ID alone, which has room for it
                // (`max_counter` is at least `max_batch`).
                let mut left = count;
                let mut last = None;
                while left > 0 {
                    let chunk: Vec<u64> =
                        source.next_batch(left).await?.map(|id| id.to_raw()).collect();
                    if let (Some(last), Some(&first)) = (last, chunk.first())
                        && first <= last
                    {
                        ids.truncate(start);
                        left = count;
                    }
                    left -= chunk.len() as u64;
                    last = chunk.last().copied();
                    ids.take_u64(chunk);
                }
            }
            #[cfg(feature = "redis")]
            StoreIssuer::Redis(client) => {
                // One Redis call makes at most 4,096 IDs, and fewer when the node's sequence
                // rolls over; calls go round-robin over the nodes, each with its own clock, so
                // the IDs are sorted before they leave.
                let want = usize::try_from(count).unwrap_or(usize::MAX);
                let mut got: Vec<u64> = Vec::with_capacity(want.min(1 << 20));
                while got.len() < want {
                    let n = (want - got.len()).min(IcicleClient::MAX_BATCH);
                    got.extend(client.generate_batch(n).await?.into_iter().map(|id| id.to_raw()));
                }
                got.sort_unstable();
                if let Some(pair) = got.windows(2).find(|w| w[0] == w[1]) {
                    // Two nodes with one shard ID, or a node that lost its sequence: refuse
                    // rather than hand out a duplicate.
                    return Err(Error::Coord(idmint_coord::Error::Corrupt {
                        path: format!("icicle nodes {}", client.nodes().join(",")),
                        reason: format!("id {} was generated twice in one batch", pair[0]),
                    }));
                }
                ids.take_u64(got);
            }
        }
        Ok(())
    }
}

impl Namespace {
    pub(crate) fn new(config: NamespaceConfig) -> Result<Self, Error> {
        let layout = config.resolve_layout()?;
        let source = config.source()?;
        Ok(Namespace {
            name: config.name.clone(),
            layout,
            source,
            config,
            active: ArcSwapOption::empty(),
            store: ArcSwapOption::empty(),
            store_healthy: AtomicBool::new(false),
            metrics: NamespaceMetrics::default(),
            extend: Notify::new(),
            extended: Notify::new(),
        })
    }

    /// The bearer token this namespace requires, if any.
    pub(crate) fn token(&self) -> Option<&str> {
        self.config.token.as_deref()
    }

    /// Whether the namespace can issue. Source `generator`: it holds a claim and its stored
    /// window is not used up. Store sources: the store was started and its last call
    /// succeeded.
    pub(crate) fn is_ready(&self, clocks: &Clocks) -> bool {
        match self.source {
            Source::Generator => {
                self.active.load().as_ref().is_some_and(|active| active.window_open(clocks))
            }
            _ => self.store.load().is_some() && self.store_healthy.load(Ordering::Acquire),
        }
    }

    /// The generator ID held, if any (for source `counters`, the DecimalId generator ID in
    /// use).
    pub(crate) fn generator_id(&self) -> Option<u64> {
        match self.store.load().as_deref() {
            Some(StoreIssuer::Counters { source, .. }) => Some(source.generator_id()),
            Some(_) => None,
            None => self.active.load().as_ref().map(|a| a.generator_id),
        }
    }

    pub(crate) fn gauges(&self, clocks: &Clocks) -> NamespaceGauges<'_> {
        let active = self.active.load();
        NamespaceGauges {
            name: &self.name,
            ready: self.is_ready(clocks),
            generator_id: self.generator_id(),
            ahead_of_wall_ms: active.as_ref().map_or(0, |a| a.anchor.ahead_of_wall_ms()),
            metrics: &self.metrics,
        }
    }

    /// Makes the namespace ready: [`activate_generator`](Self::activate_generator) or
    /// [`activate_store`](Self::activate_store), by source.
    pub(crate) async fn activate(
        &self,
        backends: &Backends,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(), Error> {
        match self.source {
            Source::Generator => {
                self.activate_generator(backends.coordinator.as_ref(), clocks, server).await
            }
            _ => self.activate_store(backends).await,
        }
    }

    /// Starts a store source: a segment allocator (which fetches nothing yet), a DecimalId
    /// source (which takes this start's launch ID and a generator ID from the counters), or an
    /// icicle client (which makes one ID, so that a start with no Redis node answering fails).
    async fn activate_store(&self, backends: &Backends) -> Result<(), Error> {
        let missing = || crate::missing_store(&self.name, self.source);
        let issuer = match self.source {
            Source::Segment => {
                let store = backends.segments.clone().ok_or_else(missing)?;
                let backend = store.name();
                let allocator =
                    SegmentAllocator::new(store, &self.name, self.config.segment_options())
                        .map_err(|e| Error::Config(format!("namespace `{}`: {e}", self.name)))?;
                StoreIssuer::Segment { allocator, backend }
            }
            Source::Counters => {
                let counters = backends.counters.clone().ok_or_else(missing)?;
                let backend = counters.name();
                let (launch, generator) = self.config.counter_names();
                let options = self.config.decimal_options();
                let source = DecimalIds::start(counters, &launch, &generator, options).await?;
                tracing::info!(namespace = %self.name, launch_id = source.launch_id(), generator_id = source.generator_id(), counters = backend, "decimal-id launch recorded");
                StoreIssuer::Counters { source, backend }
            }
            #[cfg(feature = "redis")]
            Source::Redis => {
                let client = backends.redis.clone().ok_or_else(missing)?;
                client.generate().await?;
                StoreIssuer::Redis(client)
            }
            #[cfg(not(feature = "redis"))]
            Source::Redis => return Err(missing()),
            Source::Generator => {
                return Err(Error::Config(format!(
                    "namespace `{}` issues from a generator, not a store",
                    self.name
                )));
            }
        };
        self.store.store(Some(Arc::new(issuer)));
        self.store_healthy.store(true, Ordering::Release);
        tracing::info!(namespace = %self.name, source = %self.source, "namespace ready");
        Ok(())
    }

    /// Claims a generator ID, starts a generator above the stored mark, stores the first
    /// window, and only then makes the namespace ready.
    pub(crate) async fn activate_generator(
        &self,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(), Error> {
        let ids = match (self.config.generator_id, self.config.generator_pool) {
            (Some(id), _) => GeneratorIds::Fixed(id),
            (None, Some(pool)) => {
                GeneratorIds::Pool { count: pool.min(self.layout.generator_count()) }
            }
            (None, None) => GeneratorIds::Pool { count: self.layout.generator_count() },
        };
        let request = ClaimRequest::new(&self.name, ids, &self.layout.fingerprint())
            .with_holder(clocks.holder_description());
        let claim = coordinator.claim(&request).await?;
        NamespaceMetrics::add(&self.metrics.claims, 1);
        match self.start_generator(claim, coordinator, clocks, server).await {
            Ok(active) => {
                self.active.store(Some(Arc::new(active)));
                Ok(())
            }
            Err((claim, e)) => {
                // Give the generator ID back; the error is what the caller needs to see.
                let _ = coordinator.release(&claim).await;
                Err(e)
            }
        }
    }

    async fn start_generator(
        &self,
        claim: Claim,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<Active, (Claim, Error)> {
        match self.prepare(&claim, coordinator, clocks, server).await {
            Ok((generator, anchor, mark)) => Ok(self.active_state(generator, anchor, claim, mark)),
            Err(e) => Err((claim, e)),
        }
    }

    /// Builds the generator and stores the first mark (or launch ID) for a fresh claim.
    async fn prepare(
        &self,
        claim: &Claim,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(AnyGenerator, Anchor, u64), Error> {
        let wall = clocks.wall_ms();
        let floor = claim.mark_ms().map_or(0, |mark| mark + 1);
        let ahead = floor.saturating_sub(wall);
        if ahead > server.max_ahead_ms && !server.allow_ahead {
            return Err(Error::MarkTooFarAhead {
                namespace: self.name.clone(),
                ahead_ms: ahead,
                limit_ms: server.max_ahead_ms,
            });
        }
        let anchor = Anchor::new(floor, wall, clocks.mono_ms());
        let config = GeneratorConfig {
            start_above_ms: claim.mark_ms(),
            borrow_ms: self.config.borrow_ms,
            ..GeneratorConfig::default()
        };
        let generator = self.layout.generator_for(
            claim.generator_id(),
            &self.config.field_values(),
            &config,
        )?;
        let now = anchor.now_ms(wall, clocks.mono_ms());
        let mark = now + server.window_ms;
        coordinator.store_mark(claim, mark).await?;
        generator.set_ceiling_ms(mark)?;
        if ahead > server.window_ms {
            tracing::warn!(namespace = %self.name, ahead_ms = ahead, "starting above a high-water mark that is ahead of the clock");
        } else if ahead > 0 {
            // A takeover soon after the last holder stopped: its window is still ahead.
            tracing::info!(namespace = %self.name, ahead_ms = ahead, "starting above a high-water mark that is ahead of the clock");
        }
        Ok((generator, anchor, mark))
    }

    fn active_state(
        &self,
        generator: AnyGenerator,
        anchor: Anchor,
        claim: Claim,
        mark: u64,
    ) -> Active {
        self.metrics.mark_ms.store(mark, Ordering::Relaxed);
        tracing::info!(namespace = %self.name, generator_id = claim.generator_id(), mark_ms = mark, "namespace ready");
        Active {
            generator,
            anchor,
            generator_id: claim.generator_id(),
            mark_ms: AtomicU64::new(mark),
            last_wall_ms: AtomicU64::new(0),
            claim,
        }
    }

    /// Keeps the stored mark at least half a window ahead while the claim is held, until
    /// `shutdown`. When the claim is lost or lapses (a lease not renewed in time), it stops
    /// extending and lets the namespace serve only inside the window already stored; once that
    /// is used up, the namespace reports not ready and claims a generator ID again (possibly
    /// another one), with a fresh generator above that ID's mark.
    pub(crate) async fn maintain_window(
        self: Arc<Self>,
        coordinator: Arc<dyn Coordinator>,
        clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) {
        let window_ms = server.window_ms;
        let tick = Duration::from_millis((window_ms / 10).clamp(10, 500));
        let mut backoff = Backoff::new(&server);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(tick) => {}
                () = self.extend.notified() => {}
            }
            let Some(active) = self.active.load_full() else {
                // Not ready: claim again, backing off while claims fail.
                match self.activate_generator(coordinator.as_ref(), &clocks, &server).await {
                    Ok(()) => backoff.succeeded(),
                    Err(e) => {
                        let wait = backoff.failed(&self.name, &e, "could not claim a generator id");
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = tokio::time::sleep(wait) => {}
                        }
                    }
                }
                continue;
            };
            if claim_usable(active.claim.state()) {
                self.extend_if_needed(&active, coordinator.as_ref(), &clocks, window_ms).await;
            } else if active.now(&clocks, &self.metrics) > active.mark_ms.load(Ordering::Acquire) {
                // The claim is gone and its stored window is used up: nothing more can be
                // issued safely with this generator ID. Drop all of its state.
                tracing::warn!(namespace = %self.name, generator_id = active.generator_id, "claim lost and window used up; claiming again");
                self.active.store(None);
                NamespaceMetrics::add(&self.metrics.claims_lost, 1);
                let _ = coordinator.release(&active.claim).await;
            }
        }
    }

    /// For store sources: until `shutdown`, starts the store if it is not started yet (a
    /// spare whose Redis nodes did not answer at start), and while its last call failed,
    /// probes it with one ID (a gap) until a call succeeds, so that readiness returns without
    /// client traffic. Backs off while it fails.
    pub(crate) async fn maintain_store(
        self: Arc<Self>,
        backends: Backends,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) {
        let mut backoff = Backoff::new(&server);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(backoff.wait()) => {}
            }
            let result = match self.store.load_full() {
                // A start cut short by shutdown only wastes what it took (a launch ID, an ID).
                None => tokio::select! {
                    () = shutdown.cancelled() => return,
                    started = self.activate_store(&backends) => started,
                },
                Some(_) if self.store_healthy.load(Ordering::Acquire) => Ok(()),
                Some(issuer) => {
                    let mut probe: Vec<u64> = Vec::new();
                    let outcome = self.call_store(&issuer, 1, server.max_wait_ms, &mut probe).await;
                    if outcome.is_ok() {
                        tracing::info!(namespace = %self.name, backend = issuer.backend(), "the store answers again; ready");
                    }
                    outcome
                }
            };
            match result {
                Ok(()) => backoff.succeeded(),
                Err(e) => {
                    backoff.failed(&self.name, &e, "the id store does not answer; not ready");
                }
            }
        }
    }

    /// One call to a store source for `count` IDs, within `max_wait_ms`, recording its
    /// outcome as the namespace's health. On an error `ids` is as it was.
    async fn call_store<S: IdSink>(
        &self,
        issuer: &StoreIssuer,
        count: u64,
        max_wait_ms: u64,
        ids: &mut S,
    ) -> Result<(), Error> {
        let start = ids.len();
        let wait = Duration::from_millis(max_wait_ms);
        let result = match tokio::time::timeout(wait, issuer.fill(count, ids)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Coord(idmint_coord::Error::Unavailable {
                backend: issuer.backend(),
                reason: format!("no answer within {max_wait_ms} ms"),
            })),
        };
        match &result {
            Ok(()) => self.store_healthy.store(true, Ordering::Release),
            Err(_) => {
                ids.truncate(start);
                self.store_healthy.store(false, Ordering::Release);
                NamespaceMetrics::add(&self.metrics.store_failures, 1);
            }
        }
        result
    }

    async fn extend_if_needed(
        &self,
        active: &Active,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        window_ms: u64,
    ) {
        let Some(last) = active.generator.last_ms() else { return };
        let base = active.now(clocks, &self.metrics).max(last);
        let mark = active.mark_ms.load(Ordering::Acquire);
        if mark >= base + window_ms / 2 {
            return;
        }
        let new_mark = base + window_ms;
        let result = coordinator.store_mark(&active.claim, new_mark).await;
        match result
            .map_err(Error::from)
            .and_then(|()| Ok(active.generator.set_ceiling_ms(new_mark)?))
        {
            Ok(()) => {
                active.mark_ms.store(new_mark, Ordering::Release);
                self.metrics.mark_ms.store(new_mark, Ordering::Relaxed);
                NamespaceMetrics::add(&self.metrics.mark_extensions, 1);
                self.extended.notify_waiters();
            }
            Err(e) => {
                NamespaceMetrics::add(&self.metrics.mark_failures, 1);
                tracing::warn!(namespace = %self.name, error = %e, "could not extend the high-water mark");
            }
        }
    }

    /// One ID, waiting at most `max_wait_ms` for the generator.
    pub(crate) async fn next(&self, clocks: &Clocks, max_wait_ms: u64) -> Result<AnyId, Error> {
        let mut ids = self.issue(clocks, 1, max_wait_ms).await?;
        NamespaceMetrics::add(&self.metrics.requests, 1);
        ids.pop().ok_or_else(|| Error::NotReady(self.name.clone()))
    }

    /// `count` IDs in increasing order, waiting at most `max_wait_ms` in all.
    pub(crate) async fn batch(
        &self,
        clocks: &Clocks,
        count: u64,
        max_wait_ms: u64,
    ) -> Result<Vec<AnyId>, Error> {
        let ids = self.issue(clocks, count, max_wait_ms).await?;
        NamespaceMetrics::add(&self.metrics.requests, 1);
        NamespaceMetrics::add(&self.metrics.batches, 1);
        Ok(ids)
    }

    /// `count` IDs of a 64-bit layout appended to `out`, as [`Namespace::batch`] (or
    /// [`Namespace::next`] for one) counts them, without an `AnyId` per ID: the gRPC fast path.
    /// The caller checks that the layout is 64 bits wide.
    pub(crate) async fn batch_u64(
        &self,
        clocks: &Clocks,
        count: u64,
        max_wait_ms: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), Error> {
        self.issue_into(clocks, count, max_wait_ms, out).await?;
        NamespaceMetrics::add(&self.metrics.requests, 1);
        if count > 1 {
            NamespaceMetrics::add(&self.metrics.batches, 1);
        }
        Ok(())
    }

    /// Reserves IDs until `count` are in hand, with the waiting rules of a request.
    pub(crate) async fn issue(
        &self,
        clocks: &Clocks,
        count: u64,
        max_wait_ms: u64,
    ) -> Result<Vec<AnyId>, Error> {
        let mut ids = Vec::new();
        self.issue_into(clocks, count, max_wait_ms, &mut ids).await?;
        Ok(ids)
    }

    /// Reserves IDs until `count` more are in `ids`, with the waiting rules of a request.
    async fn issue_into<S: IdSink>(
        &self,
        clocks: &Clocks,
        count: u64,
        max_wait_ms: u64,
        ids: &mut S,
    ) -> Result<(), Error> {
        if self.source != Source::Generator {
            let issuer =
                self.store.load_full().ok_or_else(|| Error::NotReady(self.name.clone()))?;
            self.call_store(&issuer, count, max_wait_ms, ids).await?;
            NamespaceMetrics::add(&self.metrics.ids_issued, count);
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_millis(max_wait_ms);
        ids.reserve(usize::try_from(count).unwrap_or(0).min(1 << 20));
        let start = ids.len();
        let issued = |ids: &S| (ids.len() - start) as u64;
        while issued(ids) < count {
            let active =
                self.active.load_full().ok_or_else(|| Error::NotReady(self.name.clone()))?;
            let now = active.now(clocks, &self.metrics);
            match active.generator.next_batch(now, count - issued(ids)) {
                Ok(Next::Ready(batch)) => ids.take(batch),
                Ok(Next::Wait { until_ms }) => {
                    NamespaceMetrics::add(&self.metrics.sequence_exhaustions, 1);
                    let wait = until_ms.saturating_sub(now).max(1);
                    let wake = Instant::now() + Duration::from_millis(wait);
                    if wake > deadline {
                        return Err(Error::Busy { namespace: self.name.clone(), wait_ms: wait });
                    }
                    tokio::time::sleep_until(wake).await;
                    NamespaceMetrics::add(&self.metrics.waited_ms, wait);
                }
                Err(idmint_core::Error::WindowExhausted { .. }) => {
                    // The stored mark is used up: ask for an extension and wait for it, but
                    // never issue past the mark.
                    NamespaceMetrics::add(&self.metrics.window_exhausted, 1);
                    let extended = self.extended.notified();
                    self.extend.notify_one();
                    if tokio::time::timeout_at(deadline, extended).await.is_err() {
                        return Err(Error::WindowExhausted {
                            namespace: self.name.clone(),
                            retry_after_ms: 1_000,
                        });
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        NamespaceMetrics::add(&self.metrics.ids_issued, issued(ids));
        Ok(())
    }

    /// Stops issuing, stores the final mark, and releases the claim (the mark stays). A store
    /// source has nothing to persist or release: the unused rest of its ranges (or of its
    /// DecimalId generator ID) is a gap.
    pub(crate) async fn deactivate(&self, coordinator: &dyn Coordinator) -> Result<(), Error> {
        if self.store.swap(None).is_some() {
            self.store_healthy.store(false, Ordering::Release);
            return Ok(());
        }
        let Some(active) = self.active.swap(None) else { return Ok(()) };
        // Every issued ID lies at or below the stored mark already (the ceiling is never above
        // it); storing it once more makes sure it is durable before the claim goes.
        let mark = active.mark_ms.load(Ordering::Acquire);
        let persisted = coordinator.store_mark(&active.claim, mark).await;
        let released = coordinator.release(&active.claim).await;
        persisted?;
        released?;
        Ok(())
    }
}
