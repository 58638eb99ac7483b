//! The issuer of source `generator`: a claim on a generator ID, a generator above the claim's
//! stored mark, the logical clock (`Anchor`) and the durable window, and the issuing of IDs
//! under that window. A namespace with `generators = K` runs K such lanes, each with its own
//! claim, generator, window and background task; every call issues from one lane.
//!
//! The rule that makes restarts safe: before any ID with time `t` leaves the server, a mark
//! `≥ t` is durably stored (the generator's ceiling is only ever raised to a stored mark), and a
//! new holder of the generator ID starts strictly above the mark it reads.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, Ordering::Relaxed},
    },
    time::Duration,
};

use idmint_coord::{Claim, ClaimRequest, ClaimState, Coordinator};
use idmint_core::{Anchor, AnyGenerator, GeneratorConfig, Next};
use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

use crate::{
    Backends, Error, ServerConfig,
    clock::Clocks,
    issuer::{
        Backoff, BoxFuture, IdSink, Issuer, Quick, Shared,
        active::Active,
        current::Current,
        turns::{Single, Turn, Turns},
    },
    metrics::NamespaceMetrics,
};

/// Whether a claim may still be extended: held, and not past its local deadline.
fn claim_usable(state: ClaimState) -> bool {
    match state {
        ClaimState::Held { until: None } => true,
        ClaimState::Held { until: Some(deadline) } => std::time::Instant::now() < deadline,
        ClaimState::Lost => false,
    }
}

/// One claimed generator ID and what issues from it.
#[derive(Debug, Default)]
struct Lane {
    /// Its claim and generator (none while it claims again), read through a per-thread copy
    /// on the one-ID path (`current.rs`).
    active: Current,
    /// Wakes the window task to extend the mark now.
    extend: Notify,
    /// Wakes requests that wait for an extension, or for the lane to claim again.
    extended: Notify,
    /// Set while the lane claims again after its claim was lost: calls wait for it instead of
    /// being told at once that the namespace is not ready.
    reclaiming: AtomicBool,
}

/// The issuer of source `generator`: one lane per generator ID it claims (`generators`).
#[derive(Debug)]
pub(crate) struct GeneratorIssuer {
    ns: Arc<Shared>,
    lanes: Box<[Lane]>,
    /// Turns calls over the lanes.
    next_lane: AtomicUsize,
    /// The calls that wait, first come, first served.
    turns: Turns,
}

impl GeneratorIssuer {
    pub(crate) fn new(ns: Arc<Shared>) -> Self {
        let count = ns.config.generator_lanes();
        GeneratorIssuer {
            lanes: (0..count).map(|_| Lane::default()).collect(),
            ns,
            next_lane: AtomicUsize::new(0),
            turns: Turns::default(),
        }
    }

    /// Claims a generator ID for every lane. All or nothing: when one claim fails, the
    /// lanes claimed already are released again, and the error is returned.
    async fn activate_all(
        &self,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(), Error> {
        for (index, lane) in self.lanes.iter().enumerate() {
            if let Err(e) = self.activate_generator(lane, coordinator, clocks, server).await {
                for claimed in &self.lanes[..index] {
                    let _ = Self::deactivate_lane(claimed, coordinator).await;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Claims a generator ID, starts a generator above the stored mark, stores the first
    /// window, and only then makes the namespace ready.
    async fn activate_generator(
        &self,
        lane: &Lane,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(), Error> {
        let ids = self.ns.config.claimable(&self.ns.layout)?;
        let request = ClaimRequest::new(&self.ns.name, ids, &self.ns.layout.fingerprint())
            .with_holder(clocks.holder_description());
        let claim = coordinator.claim(&request).await?;
        NamespaceMetrics::add(&self.ns.metrics.claims, 1);
        match self.start_generator(claim, coordinator, clocks, server).await {
            Ok(active) => {
                lane.active.replace(Some(Arc::new(active)));
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
                namespace: self.ns.name.clone(),
                ahead_ms: ahead,
                limit_ms: server.max_ahead_ms,
            });
        }
        let anchor = Anchor::new(floor, wall, clocks.mono_ms());
        let config = GeneratorConfig {
            start_above_ms: claim.mark_ms(),
            borrow_ms: self.ns.config.borrow_ms,
            ..GeneratorConfig::default()
        };
        // The claimed generator ID sets the identity fields (those fixed in config among
        // them); the others are set here.
        let (_, others) = self.ns.config.split_fields(&self.ns.layout);
        let generator = self.ns.layout.generator_for(claim.generator_id(), &others, &config)?;
        let now = anchor.now_ms(wall, clocks.mono_ms());
        let mark = now + server.window_ms;
        coordinator.store_mark(claim, mark).await?;
        generator.set_ceiling_ms(mark)?;
        if ahead > server.window_ms {
            tracing::warn!(namespace = %self.ns.name, ahead_ms = ahead, "starting above a high-water mark that is ahead of the clock");
        } else if ahead > 0 {
            // A takeover soon after the last holder stopped: its window is still ahead.
            tracing::info!(namespace = %self.ns.name, ahead_ms = ahead, "starting above a high-water mark that is ahead of the clock");
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
        self.ns.metrics.mark_ms.store(mark, Ordering::Relaxed);
        tracing::info!(namespace = %self.ns.name, generator_id = claim.generator_id(), mark_ms = mark, "namespace ready");
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
    async fn maintain_window(
        self: Arc<Self>,
        lane: usize,
        coordinator: Arc<dyn Coordinator>,
        clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) {
        let window_ms = server.window_ms;
        let tick = Duration::from_millis((window_ms / 10).clamp(10, 500));
        let mut backoff = Backoff::new(&server);
        let lane = &self.lanes[lane];
        let mut at_once = false;
        loop {
            if !std::mem::take(&mut at_once) {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(tick) => {}
                    () = lane.extend.notified() => {}
                }
            }
            let Some(active) = lane.active.load_full() else {
                // Not ready: claim again, backing off while claims fail.
                let claimed =
                    self.activate_generator(lane, coordinator.as_ref(), &clocks, &server).await;
                // Calls waiting for the lane go on: with IDs, or told it is not ready.
                lane.reclaiming.store(false, Ordering::Release);
                lane.extended.notify_waiters();
                match claimed {
                    Ok(()) => backoff.succeeded(),
                    Err(e) => {
                        let wait =
                            backoff.failed(&self.ns.name, &e, "could not claim a generator id");
                        tokio::select! {
                            () = shutdown.cancelled() => return,
                            () = tokio::time::sleep(wait) => {}
                        }
                    }
                }
                continue;
            };
            if claim_usable(active.claim.state()) {
                self.extend_if_needed(lane, &active, coordinator.as_ref(), &clocks, window_ms)
                    .await;
            } else if active.now(&clocks, &self.ns.metrics, false)
                > active.mark_ms.load(Ordering::Acquire)
            {
                // The claim is gone and its stored window is used up: nothing more can be
                // issued safely with this generator ID. Drop all of its state.
                tracing::warn!(namespace = %self.ns.name, generator_id = active.generator_id, "claim lost and window used up; claiming again");
                lane.reclaiming.store(true, Ordering::Release);
                lane.active.replace(None);
                NamespaceMetrics::add(&self.ns.metrics.claims_lost, 1);
                let _ = coordinator.release(&active.claim).await;
                // Claim again now, not a tick later: calls are waiting.
                at_once = true;
            }
        }
    }

    async fn extend_if_needed(
        &self,
        lane: &Lane,
        active: &Active,
        coordinator: &dyn Coordinator,
        clocks: &Clocks,
        window_ms: u64,
    ) {
        let Some(last) = active.generator.last_ms() else { return };
        let base = active.now(clocks, &self.ns.metrics, false).max(last);
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
                self.ns.metrics.mark_ms.store(new_mark, Ordering::Relaxed);
                NamespaceMetrics::add(&self.ns.metrics.mark_extensions, 1);
                lane.extended.notify_waiters();
            }
            Err(e) => {
                NamespaceMetrics::add(&self.ns.metrics.mark_failures, 1);
                tracing::warn!(namespace = %self.ns.name, error = %e, "could not extend the high-water mark");
            }
        }
    }

    /// Reserves IDs until `count` more are in `ids`, with the waiting rules of a request, all
    /// from one lane, so that they are increasing. Calls that wait are served first come, first
    /// served (`turns.rs`): a call for one ID in a group, others with a turn.
    ///
    /// With `shard_key`, every ID carries it in place of the generator's own; the IDs come
    /// from the lane's one sequence either way.
    async fn issue(
        &self,
        clocks: &Clocks,
        count: u64,
        shard_key: Option<u32>,
        max_wait_ms: u64,
        ids: &mut dyn IdSink,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_millis(max_wait_ms);
        if count == 1 && shard_key.is_none() {
            return self.issue_single(clocks, deadline, ids).await;
        }
        // While calls wait, one that arrives queues behind them; a batch takes its turn at the
        // latest when it has to wait itself, and keeps it until it is done.
        let mut turn = if self.turns.queued() {
            Some(self.turns.take(deadline).await.ok_or_else(|| self.busy(1))?)
        } else {
            None
        };
        self.reserve(clocks, count, shard_key, deadline, ids, &mut turn).await
    }

    /// One ID: at once while no call waits and the tick has one; otherwise in a group of
    /// single-ID calls, from its leader (`turns.rs`).
    async fn issue_single(
        &self,
        clocks: &Clocks,
        deadline: Instant,
        ids: &mut dyn IdSink,
    ) -> Result<(), Error> {
        if !self.turns.queued()
            && let Quick::Done(id) = self.try_issue_one_shared(clocks.wall_ms(), clocks, false)
        {
            ids.push(id);
            NamespaceMetrics::add(&self.ns.metrics.ids_issued, 1);
            return Ok(());
        }
        let mut leading = match self.turns.join() {
            Single::Leads(leading) => leading,
            Single::Member(mut waiting) => match waiting.handed(deadline).await {
                Some(Ok(id)) => {
                    ids.push(id);
                    return Ok(());
                }
                Some(Err(leading)) => leading,
                None => return Err(self.busy(1)),
            },
        };
        // Behind the calls that waited first; then the leader's own ID, waiting for the tick
        // as it must.
        let mut turn = Some(leading.take(deadline).await.ok_or_else(|| self.busy(1))?);
        let mut mine = Vec::with_capacity(1);
        self.reserve(clocks, 1, None, deadline, &mut mine, &mut turn).await?;
        let mine = mine.pop().ok_or_else(|| Error::NotReady(self.ns.name.clone()))?;
        // The tick has IDs: one for every call that joined meanwhile, in the order they came.
        let behind = leading.close();
        let mut theirs = Vec::with_capacity(behind);
        if behind > 0 {
            let reserved =
                self.reserve(clocks, behind as u64, None, deadline, &mut theirs, &mut turn).await;
            if reserved.is_err() {
                // The leader has its ID; the calls behind it go on with the lead, each within
                // its own deadline.
                ids.push(mine);
                return Ok(());
            }
        }
        ids.push(mine);
        leading.serve(theirs);
        Ok(())
    }

    /// The refusal of a call that would wait past its deadline.
    fn busy(&self, wait_ms: u64) -> Error {
        Error::Busy { namespace: self.ns.name.clone(), wait_ms }
    }

    /// [`issue`](Self::issue)'s reservation: `count` IDs into `ids` from one lane. A call
    /// that has no ID yet moves on to the next lane when its lane's tick is used up (or the
    /// lane holds no claim), and waits only when every lane is in that state, after taking a
    /// turn (`turn`, unless it holds one already).
    async fn reserve<'a>(
        &'a self,
        clocks: &Clocks,
        count: u64,
        shard_key: Option<u32>,
        deadline: Instant,
        ids: &mut dyn IdSink,
        turn: &mut Option<Turn<'a>>,
    ) -> Result<(), Error> {
        ids.reserve(crate::issuer::count_len(count).1);
        let start = ids.len();
        let issued = |ids: &dyn IdSink| (ids.len() - start) as u64;
        let lanes = self.lanes.len();
        let mut index = if lanes == 1 { 0 } else { self.next_lane.fetch_add(1, Relaxed) % lanes };
        let mut untried = lanes - 1;
        let busy = |wait_ms| self.busy(wait_ms);
        while issued(ids) < count {
            let lane = &self.lanes[index];
            // Another lane may serve a call that has no ID yet.
            let may_move = issued(ids) == 0 && untried > 0;
            let next = (index + 1) % lanes;
            let Some(active) = lane.active.load_full() else {
                if may_move {
                    (untried, index) = (untried - 1, next);
                    continue;
                }
                // A lane claiming again after its claim was lost is ready again in one round
                // trip or so: wait for it within the call's deadline.
                let claimed = lane.extended.notified();
                if lane.reclaiming.load(Ordering::Acquire)
                    && lane.active.load().is_none()
                    && tokio::time::timeout_at(deadline, claimed).await.is_ok()
                {
                    continue;
                }
                return Err(Error::NotReady(self.ns.name.clone()));
            };
            let now = active.now(clocks, &self.ns.metrics, false);
            let want = count - issued(ids);
            let reserved = match shard_key {
                None => active.generator.next_batch(now, want),
                Some(key) => active.generator.next_batch_with_shard_key(now, want, key),
            };
            match reserved {
                Ok(Next::Ready(batch)) => ids.take(batch),
                Ok(Next::Wait { until_ms }) => {
                    if may_move {
                        (untried, index) = (untried - 1, next);
                        continue;
                    }
                    if turn.is_none() {
                        // Behind the calls that waited first; then look again.
                        *turn = Some(self.turns.take(deadline).await.ok_or_else(|| busy(1))?);
                        continue;
                    }
                    NamespaceMetrics::add(&self.ns.metrics.sequence_exhaustions, 1);
                    let wait = until_ms.saturating_sub(now).max(1);
                    if let Err(wait_ms) = clocks.wait_ticks(wait, deadline).await {
                        return Err(busy(wait_ms));
                    }
                    NamespaceMetrics::add(&self.ns.metrics.waited_ms, wait);
                }
                Err(idmint_core::Error::WindowExhausted { .. }) => {
                    if turn.is_none() {
                        *turn = Some(self.turns.take(deadline).await.ok_or_else(|| busy(1))?);
                        continue;
                    }
                    // The stored mark is used up: ask for an extension and wait for it, but
                    // never issue past the mark.
                    NamespaceMetrics::add(&self.ns.metrics.window_exhausted, 1);
                    let extended = lane.extended.notified();
                    lane.extend.notify_one();
                    if tokio::time::timeout_at(deadline, extended).await.is_err() {
                        return Err(Error::WindowExhausted {
                            namespace: self.ns.name.clone(),
                            retry_after_ms: 1_000,
                        });
                    }
                }
                Err(e @ idmint_core::Error::TimeExhausted { .. }) => {
                    NamespaceMetrics::add(&self.ns.metrics.layout_exhausted, 1);
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        NamespaceMetrics::add(&self.ns.metrics.ids_issued, issued(ids));
        Ok(())
    }

    /// Stops issuing on every lane, stores each final mark, and releases each claim (the
    /// marks stay). Every lane is released even when one fails; the first error is returned.
    async fn deactivate(&self, coordinator: &dyn Coordinator) -> Result<(), Error> {
        let mut first_error = None;
        for lane in &self.lanes {
            if let Err(e) = Self::deactivate_lane(lane, coordinator).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Stops issuing on one lane, stores the final mark, and releases the claim.
    async fn deactivate_lane(lane: &Lane, coordinator: &dyn Coordinator) -> Result<(), Error> {
        let Some(active) = lane.active.replace(None) else { return Ok(()) };
        // Every issued ID lies at or below the stored mark already (the ceiling is never above
        // it); storing it once more makes sure it is durable before the claim goes.
        let mark = active.mark_ms.load(Ordering::Acquire);
        let persisted = coordinator.store_mark(&active.claim, mark).await;
        let released = coordinator.release(&active.claim).await;
        persisted?;
        released?;
        Ok(())
    }

    /// The generator IDs held, one per lane that holds a claim.
    pub(crate) fn generator_ids(&self) -> Vec<u64> {
        self.lanes
            .iter()
            .filter_map(|lane| lane.active.load().as_ref().map(|a| a.generator_id))
            .collect()
    }

    /// [`Issuer::try_issue_one`], inlined into its caller: a [`QuickPath`](crate::QuickPath)
    /// makes one frame of it, from the caller down to the generator's compare-and-swap. The
    /// wall clock is read first, so that its reading overlaps the loads that find the lane.
    ///
    /// One lane: the thread's copy of its state, and the thread's slot of the tally
    /// (`current.rs`); several, or a thread without its copy, take the shared state.
    #[inline(always)]
    pub(crate) fn try_issue_one_inline(&self, clocks: &Clocks, count: bool) -> Quick {
        let wall = clocks.wall_ms();
        if self.turns.queued() {
            // Calls wait for IDs: this one comes after them (`turns.rs`).
            return Quick::Slow;
        }
        let metrics = &self.ns.metrics;
        let [lane] = &*self.lanes else { return self.try_issue_one_shared(wall, clocks, count) };
        let Some(copy) = lane.active.copy(&metrics.single_tally) else {
            return self.try_issue_one_shared(wall, clocks, count);
        };
        let Some(active) = copy.active() else { return Quick::Slow };
        let quick = issue_at_once(wall, active, clocks, metrics, true);
        if count && matches!(quick, Quick::Done(_)) {
            copy.singles().add(1);
        }
        quick
    }

    /// [`Issuer::try_issue_one`] through the lanes' shared state: several lanes (their turn
    /// is a locked add already), or a thread without its copy. Out of line: the common case
    /// (one lane, the thread's copy) never needs it.
    #[inline(never)]
    fn try_issue_one_shared(&self, wall: u64, clocks: &Clocks, count: bool) -> Quick {
        let metrics = &self.ns.metrics;
        let lanes = self.lanes.len();
        let index = if lanes == 1 { 0 } else { self.next_lane.fetch_add(1, Relaxed) % lanes };
        let active = self.lanes[index].active.load();
        let Some(active) = active.as_ref() else { return Quick::Slow };
        let quick = issue_at_once(wall, active, clocks, metrics, lanes == 1);
        if count && matches!(quick, Quick::Done(_)) {
            NamespaceMetrics::add(&metrics.single_ids, 1);
        }
        quick
    }
}

/// One ID from `active` at once, at the wall clock's reading `wall`, or what keeps it from
/// that; `waits_one_tick`: whether a sequence used up until the next tick is
/// [`Quick::NextTick`] (one lane) rather than [`Quick::Slow`] (several: another lane may
/// have IDs, which the full path looks for).
#[inline(always)]
fn issue_at_once(
    wall: u64,
    active: &Active,
    clocks: &Clocks,
    metrics: &NamespaceMetrics,
    waits_one_tick: bool,
) -> Quick {
    let now = active.now_at(wall, clocks, metrics, true);
    match active.generator.next(now) {
        Ok(Next::Ready(id)) => Quick::Done(id),
        Ok(Next::Wait { until_ms }) if waits_one_tick && until_ms <= now.saturating_add(1) => {
            Quick::NextTick
        }
        // Longer waits, an exhausted window and refusals take the full path, which counts
        // them.
        _ => Quick::Slow,
    }
}

impl Issuer for GeneratorIssuer {
    fn activate<'a>(
        &'a self,
        backends: &'a Backends,
        clocks: &'a Clocks,
        server: &'a ServerConfig,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.activate_all(backends.coordinator.as_ref(), clocks, server))
    }

    fn maintain(
        self: Arc<Self>,
        backends: Backends,
        clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            // One window task per lane; dropping this future stops them all.
            let mut tasks = tokio::task::JoinSet::new();
            for lane in 0..self.lanes.len() {
                tasks.spawn(Arc::clone(&self).maintain_window(
                    lane,
                    Arc::clone(&backends.coordinator),
                    Arc::clone(&clocks),
                    Arc::clone(&server),
                    shutdown.clone(),
                ));
            }
            while tasks.join_next().await.is_some() {}
        })
    }

    /// Every lane holds a claim and its stored window is not used up.
    fn is_ready(&self, clocks: &Clocks) -> bool {
        self.lanes.iter().all(|lane| {
            lane.active.load().as_ref().is_some_and(|active| active.window_open(clocks))
        })
    }

    fn generator_id(&self) -> Option<u64> {
        self.lanes[0].active.load().as_ref().map(|a| a.generator_id)
    }

    fn generator_ids(&self) -> Vec<u64> {
        GeneratorIssuer::generator_ids(self)
    }

    fn ahead_of_wall_ms(&self, clocks: &Clocks) -> u64 {
        let (wall, mono) = (clocks.wall_ms(), clocks.mono_ms());
        let ahead =
            |lane: &Lane| lane.active.load().as_ref().map_or(0, |a| a.ahead_of_wall_ms(wall, mono));
        self.lanes.iter().map(ahead).max().unwrap_or(0)
    }

    fn try_issue_one(&self, clocks: &Clocks, count: bool) -> Quick {
        self.try_issue_one_inline(clocks, count)
    }

    fn issue_into<'a>(
        &'a self,
        clocks: &'a Clocks,
        count: u64,
        max_wait_ms: u64,
        ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.issue(clocks, count, None, max_wait_ms, ids))
    }

    fn issue_keyed_into<'a>(
        &'a self,
        clocks: &'a Clocks,
        count: u64,
        shard_key: u32,
        max_wait_ms: u64,
        ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.issue(clocks, count, Some(shard_key), max_wait_ms, ids))
    }

    fn deactivate<'a>(
        &'a self,
        coordinator: &'a dyn Coordinator,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(GeneratorIssuer::deactivate(self, coordinator))
    }
}
