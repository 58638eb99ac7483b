//! [`Server`]: a running ID service (its namespaces, backends, clocks and metrics), the one
//! path by which IDs leave it (`Server::issue_into`), readiness, and the steps of its shutdown
//! ([`ShutdownStep`]).

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicBool, Ordering},
};

use idmint_coord::Coordinator;
use idmint_proto::NamespaceInfo;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    Backends, Error, ServerConfig, WallClock,
    clock::Clocks,
    clock_watch, issuer,
    metrics::{self, ApiMetrics, HttpMetrics},
    namespace::{self, Namespace},
};

/// A step of the shutdown sequence, in the order they happen.
///
/// # Example
///
/// ```
/// use idmint_server::ShutdownStep;
///
/// assert!(ShutdownStep::ReportedNotReady < ShutdownStep::StoppedAccepting);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShutdownStep {
    /// Readiness turned false (`/readyz` answers 503); requests are still accepted and
    /// answered for `shutdown_delay_ms`.
    ReportedNotReady,
    /// The listener was closed: no new connections.
    StoppedAccepting,
    /// In-flight requests finished (or the drain time ran out).
    Drained,
    /// Every namespace's mark was stored once more.
    Persisted,
    /// Every claim was released.
    Released,
}

/// A running ID service: its namespaces, backends, clocks and metrics.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    namespaces: Vec<Arc<Namespace>>,
    backends: Backends,
    clocks: Arc<Clocks>,
    /// Wall-clock steps seen by the clock watch (`clock_watch.rs`); the watch thread ends when
    /// the server is dropped.
    clock_steps: Arc<clock_watch::ClockStepMetrics>,
    http_metrics: HttpMetrics,
    /// The metrics of the APIs served that own theirs (gRPC), one of each type.
    api_metrics: Mutex<Vec<Arc<dyn ApiMetrics>>>,
    shutting_down: AtomicBool,
    tasks: TaskTracker,
    stop_tasks: CancellationToken,
    steps: Mutex<Vec<ShutdownStep>>,
}

impl Server {
    /// Validates `config`, claims a generator ID for every namespace, starts each generator
    /// strictly above its stored mark, and stores each first window. Returns once every
    /// namespace is ready; background tasks then keep the windows ahead of the clock.
    ///
    /// With [`ServerConfig::wait_for_claim`], a namespace whose claim fails in a way that may
    /// clear up by itself (no generator ID free, the coordinator not answering) does not fail
    /// the start: the server starts with it not ready, and its background task keeps claiming
    /// (a spare).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration; [`Error::Coord`] when a claim fails (a
    /// generator ID held by another server is [`idmint_coord::Error::Conflict`]);
    /// [`Error::MarkTooFarAhead`] when a stored mark is further ahead of the clock than
    /// `max_ahead_ms` and `allow_ahead` is off. Claims taken before the failure are released.
    /// A namespace of another source than `generator` is refused ([`Error::Config`]): those
    /// need [`Server::start_with`].
    pub async fn start(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: WallClock,
    ) -> Result<Arc<Server>, Error> {
        Server::start_with(config, Backends::new(coordinator), wall).await
    }

    /// [`Server::start`] with the stores of every [`Source`](crate::Source): each namespace is started from
    /// its source's store (a claim and a first window for `generator`; an allocator, a
    /// DecimalId launch or a first icicle ID for the others), in the order configured.
    ///
    /// # Errors
    ///
    /// As [`Server::start`]; [`Error::Config`] when a namespace's source needs a store that
    /// `backends` lacks (before anything is claimed); the store's error when a store source
    /// cannot start (with `wait_for_claim`, a store that does not answer leaves the namespace
    /// not ready and is retried in the background instead).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{MemoryCoordinator, MemoryStore};
    /// use idmint_core::SystemClock;
    /// use idmint_server::{Backends, NamespaceConfig, Server, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let config = ServerConfig {
    ///     namespaces: vec![NamespaceConfig { layout: "sequence".into(), ..NamespaceConfig::named("rows") }],
    ///     ..ServerConfig::default()
    /// };
    /// let coordinator = Arc::new(MemoryCoordinator::new());
    /// // Without a segment store, a `sequence` namespace cannot start.
    /// let refused = Server::start_with(config.clone(), Backends::new(coordinator.clone()), Arc::new(SystemClock)).await;
    /// assert!(matches!(refused, Err(idmint_server::Error::Config(_))));
    ///
    /// let backends = Backends { segments: Some(Arc::new(MemoryStore::new())), ..Backends::new(coordinator) };
    /// let server = Server::start_with(config, backends, Arc::new(SystemClock)).await?;
    /// let ids = server.issue("rows", 2).await?;
    /// assert!(ids[0] < ids[1]);
    /// server.stop().await?;
    /// # Ok::<(), idmint_server::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn start_with(
        config: ServerConfig,
        backends: Backends,
        wall: WallClock,
    ) -> Result<Arc<Server>, Error> {
        let config = config.validated()?;
        let namespaces = config
            .namespaces
            .iter()
            .map(|ns| Namespace::new(ns.clone()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        for ns in &namespaces {
            backends.check(&ns.name, ns.source)?;
        }
        let server = Arc::new(Server {
            config,
            namespaces,
            backends,
            clocks: Arc::new(Clocks::new(Arc::clone(&wall))),
            clock_steps: Arc::default(),
            http_metrics: HttpMetrics::default(),
            api_metrics: Mutex::default(),
            shutting_down: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            stop_tasks: CancellationToken::new(),
            steps: Mutex::new(Vec::new()),
        });
        if server.config.clock_step_warn_ms > 0 {
            clock_watch::spawn(wall, server.config.clock_step_warn_ms, &server.clock_steps);
        }
        for (i, ns) in server.namespaces.iter().enumerate() {
            if let Err(e) = ns.activate(&server.backends, &server.clocks, &server.config).await {
                if server.config.wait_for_claim && namespace::claim_may_succeed_later(&e) {
                    tracing::warn!(namespace = %ns.name, error = %e, "no generator id to claim yet; starting not ready and waiting for one");
                    continue;
                }
                for earlier in &server.namespaces[..i] {
                    let _ = earlier.deactivate(server.backends.coordinator.as_ref()).await;
                }
                return Err(e);
            }
        }
        let config = Arc::new(server.config.clone());
        for ns in &server.namespaces {
            server.tasks.spawn(Arc::clone(ns).maintain(
                server.backends.clone(),
                Arc::clone(&server.clocks),
                Arc::clone(&config),
                server.stop_tasks.clone(),
            ));
        }
        Ok(server)
    }

    /// The validated configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Whether every namespace can issue IDs and the server is not shutting down. A namespace
    /// can issue while it holds a claim and its stored window is not used up: a server whose
    /// window could not be extended (its coordinator is down) reports not ready until the
    /// extension succeeds, as does a spare still waiting for a generator ID. A namespace of a
    /// store source is ready while the last call to its store succeeded; after a failure a
    /// background probe (one ID, a gap) retries until the store answers again.
    pub fn is_ready(&self) -> bool {
        !self.shutting_down.load(Ordering::Acquire)
            && self.namespaces.iter().all(|ns| ns.is_ready(&self.clocks))
    }

    /// What the server says about its namespaces (`GET /v1/namespaces`).
    pub fn namespace_infos(&self) -> Vec<NamespaceInfo> {
        self.namespaces
            .iter()
            .map(|ns| {
                let capacity = ns.layout.capacity();
                NamespaceInfo {
                    name: ns.name.clone(),
                    layout: ns.layout.name().to_owned(),
                    fingerprint: ns.layout.fingerprint(),
                    id_bits: ns.layout.id_bits(),
                    js_safe: ns.layout.is_js_safe(),
                    default_format: ns.text(None).map_or_else(
                        |_| ns.layout.default_format().to_string(),
                        |text| text.name().to_owned(),
                    ),
                    generator_id: ns.generator_id(),
                    generator_ids: ns.generator_ids(),
                    ready: ns.is_ready(&self.clocks),
                    runs_out: capacity.end,
                    ids_per_second: capacity.ids_per_second_per_generator,
                    generators: ns.layout.generator_count(),
                    auth: ns.token().is_some(),
                    source: ns.source.name().to_owned(),
                    order: ns.order().name().to_owned(),
                    type_prefix: ns.type_prefix().map(|p| p.to_string()).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The steps of the shutdown sequence taken so far.
    pub fn shutdown_steps(&self) -> Vec<ShutdownStep> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The current metrics, in the Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let gauges: Vec<_> = self.namespaces.iter().map(|ns| ns.gauges(&self.clocks)).collect();
        let mut out = metrics::render(&gauges, &self.http_metrics, self.is_ready());
        self.clock_steps.render(&mut out);
        for api in self.api_metrics.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            api.render(&mut out);
        }
        out
    }

    /// IDs of one namespace, in increasing order, bypassing the network. At most `max_batch`
    /// per call.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`], [`Error::BadRequest`] for a count of 0 or above the cap,
    /// and the issuing errors ([`Error::NotReady`], [`Error::Busy`],
    /// [`Error::WindowExhausted`], ...).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_server::{Error, Server, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let server = Server::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let ids = server.issue("default", 3).await?;
    /// assert!(ids.len() == 3 && ids[0] < ids[1] && ids[1] < ids[2]);
    /// // The one rule of a batch size, for every API: 1..=max_batch.
    /// assert!(matches!(server.issue("default", 0).await, Err(Error::BadRequest(_))));
    /// server.stop().await?;
    /// # Ok::<(), idmint_server::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn issue(
        &self,
        namespace: &str,
        count: u64,
    ) -> Result<Vec<idmint_core::AnyId>, Error> {
        let mut ids = Vec::new();
        self.issue_into(self.namespace(namespace)?, count, &mut ids).await?;
        Ok(ids)
    }

    /// [`Server::issue`] for a namespace of 64-bit IDs, appending them to `out` as bare
    /// `u64`s (no `AnyId` per ID).
    ///
    /// # Errors
    ///
    /// As [`Server::issue`], and [`Error::BadRequest`] for a namespace of 128-bit IDs.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_server::{Server, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let server = Server::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let mut ids = Vec::new();
    /// server.issue_u64("default", 1000, &mut ids).await?;
    /// assert!(ids.len() == 1000 && ids.windows(2).all(|w| w[0] < w[1]));
    /// server.stop().await?;
    /// # Ok::<(), idmint_server::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn issue_u64(
        &self,
        namespace: &str,
        count: u64,
        out: &mut Vec<u64>,
    ) -> Result<(), Error> {
        self.issue_into(self.namespace(namespace)?, count, out).await
    }

    /// `count` IDs of a namespace already looked up, appended to `sink`: the one path of every
    /// request of both APIs (JSON and binary batches, gRPC's bare `u64`s and packed bytes). The
    /// count is checked here, once: 1..=`max_batch`; a sink of bare `u64`s takes only a
    /// 64-bit layout.
    pub(crate) async fn issue_into(
        &self,
        ns: &Namespace,
        count: u64,
        sink: &mut dyn issuer::IdSink,
    ) -> Result<(), Error> {
        self.issue_keyed_into(ns, count, None, sink).await
    }

    /// [`issue_into`](Self::issue_into) with a shard key chosen by the request (`shard_key`,
    /// a `hot-guid` namespace only, inside its `shard_keys`); `None` is the namespace's own.
    pub(crate) async fn issue_keyed_into(
        &self,
        ns: &Namespace,
        count: u64,
        shard_key: Option<u32>,
        sink: &mut dyn issuer::IdSink,
    ) -> Result<(), Error> {
        let count = issuer::check_count(count, self.config.max_batch)?;
        if !sink.holds(ns.layout.id_bits()) {
            return Err(Error::BadRequest(format!(
                "namespace `{}` issues {}-bit ids",
                ns.name,
                ns.layout.id_bits()
            )));
        }
        ns.issue_into(&self.clocks, count, shard_key, self.config.max_wait_ms, sink).await
    }

    /// The layout of a namespace.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`].
    pub fn layout(&self, namespace: &str) -> Result<&idmint_core::Layout, Error> {
        Ok(&self.namespace(namespace)?.layout)
    }

    /// The namespace that `/v1/next` and friends use: the first configured.
    pub fn default_namespace(&self) -> &str {
        self.namespaces.first().map_or(idmint_proto::DEFAULT_NAMESPACE, |ns| &ns.name)
    }

    pub(crate) fn namespace(&self, name: &str) -> Result<&Arc<Namespace>, Error> {
        self.namespaces
            .iter()
            .find(|ns| ns.name == name)
            .ok_or_else(|| Error::UnknownNamespace(name.chars().take(64).collect()))
    }

    pub(crate) fn namespace_list(&self) -> &[Arc<Namespace>] {
        &self.namespaces
    }

    pub(crate) fn clocks(&self) -> &Clocks {
        &self.clocks
    }

    pub(crate) fn http_metrics(&self) -> &HttpMetrics {
        &self.http_metrics
    }

    /// The metrics of type `T` of an API, made on the first call and the same ones after: an
    /// API keeps them, and `/metrics` renders them from then on.
    #[cfg_attr(not(feature = "grpc"), allow(dead_code))]
    pub(crate) fn api_metrics<T: ApiMetrics + Default>(&self) -> Arc<T> {
        let mut all = self.api_metrics.lock().unwrap_or_else(|p| p.into_inner());
        for api in all.iter() {
            let any: Arc<dyn std::any::Any + Send + Sync> = Arc::clone(api) as _;
            if let Ok(found) = any.downcast::<T>() {
                return found;
            }
        }
        let made = Arc::new(T::default());
        all.push(Arc::clone(&made) as _);
        made
    }

    pub(crate) fn step(&self, step: ShutdownStep) {
        tracing::info!(?step, "shutdown");
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).push(step);
    }

    /// Turns readiness off: `/readyz` answers 503 from now on.
    pub fn report_not_ready(&self) {
        if !self.shutting_down.swap(true, Ordering::AcqRel) {
            self.step(ShutdownStep::ReportedNotReady);
        }
    }

    /// Stops the window tasks, stores every namespace's mark once more, and releases every
    /// claim. Call it after requests have drained; [`serve`](crate::serve) does.
    ///
    /// # Errors
    ///
    /// The first coordination error; every namespace is still released.
    pub async fn stop(&self) -> Result<(), Error> {
        self.report_not_ready();
        self.stop_tasks.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        let mut first_error = None;
        for ns in &self.namespaces {
            if let Err(e) = ns.deactivate(self.backends.coordinator.as_ref()).await {
                tracing::error!(namespace = %ns.name, error = %e, "could not persist or release");
                first_error.get_or_insert(e);
            }
        }
        self.step(ShutdownStep::Persisted);
        self.step(ShutdownStep::Released);
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, sync::Arc, time::Duration};

    use idmint_coord::MemoryCoordinator;
    use idmint_core::ManualClock;
    use idmint_testkit::check::u64s;

    use crate::{Server, ServerConfig};

    /// A claim taken away (an expired lease) leaves the namespace serving only inside the
    /// window it already stored; then it goes not ready, claims again, and continues above the
    /// stored mark with fresh state.
    #[tokio::test(start_paused = true)]
    async fn a_lost_claim_serves_only_its_window_then_claims_again() {
        let coordinator = MemoryCoordinator::new();
        let wall = Arc::new(ManualClock::new(1_700_000_000_000));
        let config = ServerConfig { window_ms: 1_000, ..ServerConfig::default() };
        let server = Server::start(config, Arc::new(coordinator.clone()), wall.clone())
            .await
            .expect("start");
        let before = u64s(&server.issue("default", 100).await.expect("issue"));
        let mark = coordinator.mark("default", 0).expect("a stored mark");

        assert!(coordinator.revoke("default", 0));
        // Inside the stored window, issuing goes on (nobody else can use these times).
        let inside = u64s(&server.issue("default", 100).await.expect("issue inside the window"));
        assert!(server.is_ready());

        // Past the window: no ID may be issued with this claim any more.
        wall.advance(1_500);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        let mut reclaimed = false;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if server.render_metrics().contains("idmint_claims_lost_total{namespace=\"default\"} 1")
            {
                reclaimed = server.is_ready();
                if reclaimed {
                    break;
                }
            }
        }
        assert!(reclaimed, "the namespace should have claimed again:\n{}", server.render_metrics());
        let after = u64s(&server.issue("default", 100).await.expect("issue after claiming again"));

        let all: Vec<u64> = before.iter().chain(&inside).chain(&after).copied().collect();
        assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "duplicate ids");
        assert!(all.windows(2).all(|w| w[0] < w[1]), "ids must keep increasing");
        let new_mark = coordinator.mark("default", 0).expect("mark");
        assert!(new_mark > mark, "the new claim stored a higher mark");
        let mark_tick = mark - idmint_core::Snowflake::EPOCH_MS;
        assert!(after.iter().all(|id| id >> 22 > mark_tick), "new ids start above the old mark");
    }

    /// A call that finds the window used up after the claim was lost (with etcd: a lease that
    /// etcd itself revoked) waits while the namespace claims again, which it does at once, and
    /// gets its IDs within its 1 s wait, not `window_exhausted` (waiting for the first extension
    /// of the new claim's window, half of the default 3 s window later, would take longer).
    #[tokio::test(start_paused = true)]
    async fn a_call_waits_while_a_lost_claim_is_claimed_again() {
        let coordinator = MemoryCoordinator::new();
        let wall = Arc::new(ManualClock::new(1_700_000_000_000));
        let config =
            ServerConfig { window_ms: 3_000, max_wait_ms: 1_000, ..ServerConfig::default() };
        let server = Server::start(config, Arc::new(coordinator.clone()), wall.clone())
            .await
            .expect("start");
        let before = u64s(&server.issue("default", 100).await.expect("issue"));
        assert!(coordinator.revoke("default", 0));
        // The window runs out before the window task looks again: the call finds it used up.
        wall.advance(3_500);
        let called = tokio::time::Instant::now();
        let after =
            u64s(&server.issue("default", 100).await.expect("the call waits for the new claim"));
        // Time is paused: only a timer moves it, and claiming again here needs none.
        assert_eq!(called.elapsed(), Duration::ZERO, "the call waited for a timer");
        let metrics = server.render_metrics();
        assert!(metrics.contains("idmint_claims_lost_total{namespace=\"default\"} 1"), "{metrics}");
        let all: Vec<u64> = before.iter().chain(&after).copied().collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]), "ids must keep increasing, without repeats");
    }
}
