//! What the store sources share: an issuer over a [`Store`] (segments, counters, Redis) that
//! starts it, bounds every call by `max_wait_ms`, keeps its health (readiness), and probes it
//! after a failure. Store sources rest on their store: a range or counter value is durable
//! before it is used, and there is nothing to persist or release at shutdown (the unused rest
//! of a range, or of a DecimalId generator ID, is a gap).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use arc_swap::ArcSwapOption;
use idmint_coord::Coordinator;
use tokio_util::sync::CancellationToken;

use crate::{
    Backends, Error, ServerConfig,
    clock::Clocks,
    issuer::{Backoff, BoxFuture, IdSink, Issuer, Shared},
    metrics::NamespaceMetrics,
};

/// A store a namespace issues from.
pub(crate) trait Store: std::fmt::Debug + Send + Sync + Sized + 'static {
    /// Starts the store for the namespace: opens what it needs from `backends`.
    fn start<'a>(ns: &'a Shared, backends: &'a Backends) -> BoxFuture<'a, Result<Self, Error>>;

    /// The backend's name, for messages.
    fn backend(&self) -> &'static str;

    /// The generator ID in use, if the store has one (DecimalId's counters).
    fn generator_id(&self) -> Option<u64> {
        None
    }

    /// Appends `count` IDs to `ids` (which may hold IDs of earlier requests), in increasing
    /// order. On an error some IDs may have been taken from the store: a gap.
    fn fill<'a>(&'a self, count: u64, ids: &'a mut dyn IdSink) -> BoxFuture<'a, Result<(), Error>>;
}

/// The issuer of a store source.
#[derive(Debug)]
pub(crate) struct Stored<S> {
    ns: Arc<Shared>,
    /// The store, once started.
    store: ArcSwapOption<S>,
    /// Whether the last call to the store succeeded: readiness.
    healthy: AtomicBool,
}

impl<S: Store> Stored<S> {
    pub(crate) fn new(ns: Arc<Shared>) -> Self {
        Stored { ns, store: ArcSwapOption::empty(), healthy: AtomicBool::new(false) }
    }

    /// Starts the store: a segment allocator (which fetches nothing yet), a DecimalId issuer
    /// (which takes this start's launch ID and a generator ID from the counters), or an icicle
    /// client (which makes one ID, so that a start with no Redis node answering fails).
    async fn activate_store(&self, backends: &Backends) -> Result<(), Error> {
        let store = S::start(&self.ns, backends).await?;
        self.store.store(Some(Arc::new(store)));
        self.healthy.store(true, Ordering::Release);
        tracing::info!(namespace = %self.ns.name, source = %self.ns.source, "namespace ready");
        Ok(())
    }

    /// For store sources: until `shutdown`, starts the store if it is not started yet (a
    /// spare whose Redis nodes did not answer at start), and while its last call failed,
    /// probes it with one ID (a gap) until a call succeeds, so that readiness returns without
    /// client traffic. Backs off while it fails.
    async fn maintain_store(
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
                Some(_) if self.healthy.load(Ordering::Acquire) => Ok(()),
                Some(issuer) => {
                    let mut probe: Vec<u64> = Vec::new();
                    let outcome = self.call_store(&issuer, 1, server.max_wait_ms, &mut probe).await;
                    if outcome.is_ok() {
                        tracing::info!(namespace = %self.ns.name, backend = issuer.backend(), "the store answers again; ready");
                    }
                    outcome
                }
            };
            match result {
                Ok(()) => backoff.succeeded(),
                Err(e) => {
                    backoff.failed(&self.ns.name, &e, "the id store does not answer; not ready");
                }
            }
        }
    }

    /// One call to a store source for `count` IDs, within `max_wait_ms`, recording its
    /// outcome as the namespace's health. On an error `ids` is as it was.
    async fn call_store(
        &self,
        issuer: &S,
        count: u64,
        max_wait_ms: u64,
        ids: &mut dyn IdSink,
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
            Ok(()) => self.healthy.store(true, Ordering::Release),
            Err(_) => {
                ids.truncate(start);
                self.healthy.store(false, Ordering::Release);
                NamespaceMetrics::add(&self.ns.metrics.store_failures, 1);
            }
        }
        result
    }
}

impl<S: Store> Issuer for Stored<S> {
    fn activate<'a>(
        &'a self,
        backends: &'a Backends,
        _clocks: &'a Clocks,
        _server: &'a ServerConfig,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(self.activate_store(backends))
    }

    fn maintain(
        self: Arc<Self>,
        backends: Backends,
        _clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(self.maintain_store(backends, server, shutdown))
    }

    /// The store was started and its last call succeeded.
    fn is_ready(&self, _clocks: &Clocks) -> bool {
        self.store.load().is_some() && self.healthy.load(Ordering::Acquire)
    }

    fn generator_id(&self) -> Option<u64> {
        self.store.load().as_ref().and_then(|store| store.generator_id())
    }

    fn issue_into<'a>(
        &'a self,
        _clocks: &'a Clocks,
        count: u64,
        max_wait_ms: u64,
        ids: &'a mut dyn IdSink,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let store =
                self.store.load_full().ok_or_else(|| Error::NotReady(self.ns.name.clone()))?;
            self.call_store(&store, count, max_wait_ms, ids).await?;
            NamespaceMetrics::add(&self.ns.metrics.ids_issued, count);
            Ok(())
        })
    }

    /// Nothing to persist or release.
    fn deactivate<'a>(
        &'a self,
        _coordinator: &'a dyn Coordinator,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if self.store.swap(None).is_some() {
                self.healthy.store(false, Ordering::Release);
            }
            Ok(())
        })
    }
}
