//! [`Engine`]: a running issuing engine (its namespaces, backends, clocks and metrics), the one
//! path by which IDs leave it (`Engine::issue_into`), readiness, and its ordered shutdown
//! (persist every mark, release every claim).

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use idmint_coord::Coordinator;
use idmint_proto::NamespaceInfo;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    Backends, Error, Quick, QuickPath, ServerConfig, WallClock,
    clock::Clocks,
    clock_watch, issuer,
    metrics::{self},
    namespace::{self, Namespace},
};

/// A running issuing engine: its namespaces, backends, clocks and metrics. Every ID leaves it
/// through [`Engine::issue_into`]; a front end (the HTTP and gRPC APIs of `idmint-server`, or
/// an application's own code) calls it directly.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_engine::{Engine, ServerConfig};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// assert!(engine.is_ready());
/// let ids = engine.issue("default", 2).await?;
/// assert!(ids[0] < ids[1]);
/// // Persists every mark and releases every claim.
/// engine.shutdown().await?;
/// assert!(!engine.is_ready());
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Engine {
    config: ServerConfig,
    namespaces: Vec<Arc<Namespace>>,
    backends: Backends,
    clocks: Arc<Clocks>,
    /// Wall-clock steps seen by the clock watch (`clock_watch.rs`); the watch thread ends when
    /// the engine is dropped.
    clock_steps: Arc<clock_watch::ClockStepMetrics>,
    shutting_down: AtomicBool,
    tasks: TaskTracker,
    stop_tasks: CancellationToken,
}

impl Engine {
    /// Validates `config`, claims a generator ID for every namespace, starts each generator
    /// strictly above its stored mark, and stores each first window. Returns once every
    /// namespace is ready; background tasks then keep the windows ahead of the clock.
    ///
    /// With [`ServerConfig::wait_for_claim`], a namespace whose claim fails in a way that may
    /// clear up by itself (no generator ID free, the coordinator not answering) does not fail
    /// the start: the engine starts with it not ready, and its background task keeps claiming
    /// (a spare).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration; [`Error::Coord`] when a claim fails (a
    /// generator ID held by another server is [`idmint_coord::Error::Conflict`]);
    /// [`Error::MarkTooFarAhead`] when a stored mark is further ahead of the clock than
    /// `max_ahead_ms` and `allow_ahead` is off. Claims taken before the failure are released.
    /// A namespace of another source than `generator` is refused ([`Error::Config`]): those
    /// need [`Engine::start_with`].
    pub async fn start(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: WallClock,
    ) -> Result<Arc<Engine>, Error> {
        Engine::start_with(config, Backends::new(coordinator), wall).await
    }

    /// [`Engine::start`] with the stores of every [`Source`](crate::Source): each namespace is started from
    /// its source's store (a claim and a first window for `generator`; an allocator, a
    /// DecimalId launch or a first icicle ID for the others), in the order configured.
    ///
    /// # Errors
    ///
    /// As [`Engine::start`]; [`Error::Config`] when a namespace's source needs a store that
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
    /// use idmint_engine::{Backends, Engine, NamespaceConfig, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let config = ServerConfig {
    ///     namespaces: vec![NamespaceConfig { layout: "sequence".into(), ..NamespaceConfig::named("rows") }],
    ///     ..ServerConfig::default()
    /// };
    /// let coordinator = Arc::new(MemoryCoordinator::new());
    /// // Without a segment store, a `sequence` namespace cannot start.
    /// let refused = Engine::start_with(config.clone(), Backends::new(coordinator.clone()), Arc::new(SystemClock)).await;
    /// assert!(matches!(refused, Err(idmint_engine::Error::Config(_))));
    ///
    /// let backends = Backends { segments: Some(Arc::new(MemoryStore::new())), ..Backends::new(coordinator) };
    /// let engine = Engine::start_with(config, backends, Arc::new(SystemClock)).await?;
    /// let ids = engine.issue("rows", 2).await?;
    /// assert!(ids[0] < ids[1]);
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn start_with(
        config: ServerConfig,
        backends: Backends,
        wall: WallClock,
    ) -> Result<Arc<Engine>, Error> {
        let config = config.validated()?;
        let namespaces = config
            .namespaces
            .iter()
            .map(|ns| Namespace::new(ns.clone()).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        for ns in &namespaces {
            backends.check(&ns.name, ns.source)?;
        }
        let engine = Arc::new(Engine {
            config,
            namespaces,
            backends,
            clocks: Arc::new(Clocks::new(Arc::clone(&wall))),
            clock_steps: Arc::default(),
            shutting_down: AtomicBool::new(false),
            tasks: TaskTracker::new(),
            stop_tasks: CancellationToken::new(),
        });
        if engine.config.clock_step_warn_ms > 0 {
            clock_watch::spawn(wall, engine.config.clock_step_warn_ms, &engine.clock_steps);
        }
        let now_ms = engine.clocks.wall_ms();
        for ns in &engine.namespaces {
            // The rule `idmint explain` warns by: ran out, runs out within 10 years.
            for warning in ns.layout.capacity().warnings(ns.layout.name(), now_ms) {
                tracing::warn!(namespace = %ns.name, "{warning}");
            }
        }
        for (i, ns) in engine.namespaces.iter().enumerate() {
            if let Err(e) = ns.activate(&engine.backends, &engine.clocks, &engine.config).await {
                if engine.config.wait_for_claim && namespace::claim_may_succeed_later(&e) {
                    tracing::warn!(namespace = %ns.name, error = %e, "no generator id to claim yet; starting not ready and waiting for one");
                    continue;
                }
                for earlier in &engine.namespaces[..i] {
                    let _ = earlier.deactivate(engine.backends.coordinator.as_ref()).await;
                }
                return Err(e);
            }
        }
        let config = Arc::new(engine.config.clone());
        for ns in &engine.namespaces {
            engine.tasks.spawn(Arc::clone(ns).maintain(
                engine.backends.clone(),
                Arc::clone(&engine.clocks),
                Arc::clone(&config),
                engine.stop_tasks.clone(),
            ));
        }
        Ok(engine)
    }

    /// The validated configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Whether every namespace can issue IDs and the engine is not shutting down. A namespace
    /// can issue while it holds a claim and its stored window is not used up: an engine whose
    /// window could not be extended (its coordinator is down) reports not ready until the
    /// extension succeeds, as does a spare still waiting for a generator ID. A namespace of a
    /// store source is ready while the last call to its store succeeded; after a failure a
    /// background probe (one ID, a gap) retries until the store answers again.
    pub fn is_ready(&self) -> bool {
        !self.shutting_down.load(Ordering::Acquire)
            && self.namespaces.iter().all(|ns| ns.is_ready(&self.clocks))
    }

    /// What the engine says about its namespaces (`GET /v1/namespaces` of the HTTP API).
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

    /// The engine's metrics, in the Prometheus text format: those of issuing
    /// ([`render_issuing_metrics`](Self::render_issuing_metrics)), then those of the process
    /// ([`render_process_metrics`](Self::render_process_metrics)).
    pub fn render_metrics(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.render_issuing_metrics(&mut out);
        self.render_process_metrics(&mut out);
        out
    }

    /// Appends the metrics of issuing: each namespace's counters and gauges, the generator
    /// IDs held, and `idmint_ready`.
    pub fn render_issuing_metrics(&self, out: &mut String) {
        let gauges: Vec<_> = self.namespaces.iter().map(|ns| ns.gauges(&self.clocks)).collect();
        metrics::render_issuing(out, &gauges, self.is_ready());
    }

    /// Appends the metrics of the process: `idmint_build_info`, the standard `process_*`
    /// metrics, and the wall-clock steps the clock watch saw.
    pub fn render_process_metrics(&self, out: &mut String) {
        metrics::render_process(out);
        self.clock_steps.render(out);
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
    /// use idmint_engine::{Engine, Error, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let ids = engine.issue("default", 3).await?;
    /// assert!(ids.len() == 3 && ids[0] < ids[1] && ids[1] < ids[2]);
    /// // The one rule of a batch size, for every API: 1..=max_batch.
    /// assert!(matches!(engine.issue("default", 0).await, Err(Error::BadRequest(_))));
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
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

    /// One ID of a namespace already looked up ([`Engine::namespace`]): [`Engine::issue`] for
    /// a count of 1, without allocating when an ID is ready at once (the embedded minter's
    /// `next`).
    ///
    /// # Errors
    ///
    /// As [`Engine::issue`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{Engine, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let ns = engine.namespace("default")?;
    /// assert!(engine.issue_one(ns).await? < engine.issue_one(ns).await?);
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn issue_one(&self, ns: &Namespace) -> Result<idmint_core::AnyId, Error> {
        ns.issue_one(&self.clocks, self.config.max_wait_ms).await
    }

    /// [`Engine::issue_one`] when an ID is ready at once, without a future; otherwise whether
    /// one is due within a tick ([`Quick::NextTick`]) or the call must take
    /// [`Engine::issue_one`] ([`Quick::Slow`]: a wait for a claim or a window, or a refusal).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{Engine, Quick, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let ns = engine.namespace("default")?;
    /// let id = match engine.try_issue_one(ns) {
    ///     Quick::Done(id) => id,
    ///     Quick::NextTick | Quick::Slow => engine.issue_one(ns).await?,
    /// };
    /// assert_eq!(id.bits(), 64);
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    #[inline]
    pub fn try_issue_one(&self, ns: &Namespace) -> Quick {
        ns.try_issue_one(&self.clocks)
    }

    /// The one-ID path of `ns` as a handle that reaches it without a lookup: for a caller
    /// that issues from one namespace often (the embedded minter's first namespace). `None`
    /// when `ns` has no such path: a source other than `generator`, or public IDs; the
    /// caller then uses [`Engine::try_issue_one`], which answers the same.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{Engine, Quick, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let ns = engine.namespace("default")?;
    /// let quick = engine.quick_path(ns).expect("a generator namespace");
    /// let id = match quick.try_issue_one() {
    ///     Quick::Done(id) => id,
    ///     Quick::NextTick | Quick::Slow => engine.issue_one(ns).await?,
    /// };
    /// assert_eq!(id.bits(), 64);
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn quick_path(&self, ns: &Namespace) -> Option<QuickPath> {
        ns.quick_issuer().map(|issuer| QuickPath::new(Arc::clone(issuer), Arc::clone(&self.clocks)))
    }

    /// [`Engine::issue`] for a namespace of 64-bit IDs, appending them to `out` as bare
    /// `u64`s (no `AnyId` per ID).
    ///
    /// # Errors
    ///
    /// As [`Engine::issue`], and [`Error::BadRequest`] for a namespace of 128-bit IDs.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{Engine, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let mut ids = Vec::new();
    /// engine.issue_u64("default", 1000, &mut ids).await?;
    /// assert!(ids.len() == 1000 && ids.windows(2).all(|w| w[0] < w[1]));
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
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

    /// `count` IDs of a namespace already looked up ([`Engine::namespace`]), appended to
    /// `sink`: the one path of every call for IDs (the HTTP API's JSON and binary batches,
    /// gRPC's bare `u64`s and packed bytes, and [`Engine::issue`]). The count is checked here,
    /// once: 1..=`max_batch`; a sink of bare `u64`s takes only a 64-bit layout.
    ///
    /// # Errors
    ///
    /// As [`Engine::issue`].
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{BeBytes, Engine, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let namespace = engine.namespace("default")?;
    /// let mut bytes = BeBytes::new(namespace.layout.id_bits());
    /// engine.issue_into(namespace, 4, &mut bytes).await?;
    /// assert_eq!(bytes.bytes.len(), 4 * 8);
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn issue_into(
        &self,
        ns: &Namespace,
        count: u64,
        sink: &mut dyn issuer::IdSink,
    ) -> Result<(), Error> {
        self.issue_keyed_into(ns, count, None, sink).await
    }

    /// [`issue_into`](Self::issue_into) with a shard key chosen by the call (`shard_key`,
    /// a `hot-guid` namespace only, inside its `shard_keys`); `None` is the namespace's own.
    ///
    /// # Errors
    ///
    /// As [`Engine::issue_into`], and [`Error::BadRequest`] for a shard key the namespace
    /// does not take.
    pub async fn issue_keyed_into(
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
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_engine::{Engine, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// assert_eq!(engine.default_namespace(), "default");
    /// assert!(engine.layout("default").is_ok() && engine.layout("orders").is_err());
    /// engine.shutdown().await?;
    /// # Ok::<(), idmint_engine::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn default_namespace(&self) -> &str {
        self.namespaces.first().map_or(idmint_proto::DEFAULT_NAMESPACE, |ns| &ns.name)
    }

    /// A namespace by name, for [`Engine::issue_into`] and for what a front end says about it.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`] (its name cut to 64 characters).
    pub fn namespace(&self, name: &str) -> Result<&Arc<Namespace>, Error> {
        self.namespaces
            .iter()
            .find(|ns| ns.name == name)
            .ok_or_else(|| Error::UnknownNamespace(name.chars().take(64).collect()))
    }

    /// Every namespace, in the order configured.
    pub fn namespaces(&self) -> &[Arc<Namespace>] {
        &self.namespaces
    }

    /// The engine's clocks (the wall clock it was started with, and logical time).
    pub fn clocks(&self) -> &Clocks {
        &self.clocks
    }

    /// Turns readiness off: [`Engine::is_ready`] is false from now on, while calls for IDs are
    /// still answered. True on the first call only.
    pub fn report_not_ready(&self) -> bool {
        !self.shutting_down.swap(true, Ordering::AcqRel)
    }

    /// The ordered shutdown: turns readiness off, stops the window tasks, stores every
    /// namespace's mark once more, and releases every claim. Call it after calls for IDs
    /// have drained (a server, after its connections have).
    ///
    /// # Errors
    ///
    /// The first coordination error; every namespace is still released.
    pub async fn shutdown(&self) -> Result<(), Error> {
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
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashSet, sync::Arc, time::Duration};

    use idmint_coord::MemoryCoordinator;
    use idmint_core::{AnyId, ManualClock};

    use crate::{Engine, Quick, ServerConfig};

    fn u64s(ids: &[AnyId]) -> Vec<u64> {
        ids.iter().map(|&id| u64::try_from(id).expect("a 64-bit id")).collect()
    }

    /// A claim taken away (an expired lease) leaves the namespace serving only inside the
    /// window it already stored; then it goes not ready, claims again, and continues above the
    /// stored mark with fresh state.
    #[tokio::test(start_paused = true)]
    async fn a_lost_claim_serves_only_its_window_then_claims_again() {
        let coordinator = MemoryCoordinator::new();
        let wall = Arc::new(ManualClock::new(1_700_000_000_000));
        let config = ServerConfig { window_ms: 1_000, ..ServerConfig::default() };
        let server = Engine::start(config, Arc::new(coordinator.clone()), wall.clone())
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
        let server = Engine::start(config, Arc::new(coordinator.clone()), wall.clone())
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

    /// Calls for one ID that wait for the next tick are served first come, first served
    /// (`issuer/turns.rs`): 8 calls wait for a used-up tick, then the wall clock steps 1 ms on
    /// and a ninth call comes at once, before any of the 8 has run again. The 8 get IDs in the
    /// order they came and the ninth after them. The negative control (the queue unseen) lets
    /// the ninth take the new tick's first ID, ahead of all 8.
    #[tokio::test(start_paused = true)]
    async fn single_ids_that_wait_are_served_first_come_first_served() {
        for unqueued in [false, true] {
            let wall = Arc::new(ManualClock::new(1_700_000_000_000));
            let engine = Arc::new(
                Engine::start(
                    ServerConfig::default(),
                    Arc::new(MemoryCoordinator::new()),
                    wall.clone(),
                )
                .await
                .expect("start"),
            );
            let ns = Arc::clone(engine.namespace("default").expect("default"));
            // Use up this tick.
            while let Quick::Done(_) = engine.try_issue_one(&ns) {}
            assert!(matches!(engine.try_issue_one(&ns), Quick::NextTick));
            let mut waiters = Vec::new();
            for _ in 0..8 {
                let (engine, ns) = (Arc::clone(&engine), Arc::clone(&ns));
                let call = tokio::spawn(async move { engine.issue_one(&ns).await });
                waiters.push(call);
                // Each comes, and waits, before the next.
                tokio::task::yield_now().await;
            }
            wall.advance(1);
            crate::issuer::turns::tests::UNQUEUED.set(unqueued);
            let ninth = match engine.try_issue_one(&ns) {
                Quick::Done(id) => tokio::spawn(async move { Ok(id) }),
                _ => {
                    let (engine, ns) = (Arc::clone(&engine), Arc::clone(&ns));
                    tokio::spawn(async move { engine.issue_one(&ns).await })
                }
            };
            crate::issuer::turns::tests::UNQUEUED.set(false);
            // The waits end at the tick: tokio's clock moves on to it, and the clock thread
            // (`ticker.rs`) wakes the first call in real time. Meanwhile this task stays
            // runnable, so that the paused clock does not jump to the calls' deadlines.
            tokio::time::advance(Duration::from_millis(1)).await;
            let stuck = std::time::Instant::now() + Duration::from_secs(30);
            while !(waiters.iter().all(tokio::task::JoinHandle::is_finished) && ninth.is_finished())
            {
                assert!(std::time::Instant::now() < stuck, "the waiting calls were never served");
                tokio::task::yield_now().await;
            }
            let ninth = ninth.await.expect("task").expect("the ninth call");
            let mut served = Vec::new();
            for call in waiters {
                served.push(call.await.expect("task").expect("within max_wait_ms"));
            }
            let in_order = served.windows(2).all(|w| w[0] < w[1]) && served[7] < ninth;
            assert_eq!(
                in_order, !unqueued,
                "unqueued: {unqueued}: 8 waiters {served:?}, then {ninth:?}"
            );
            engine.shutdown().await.expect("shutdown");
        }
    }

    /// The one-ID path reads a lane through the calling thread's copy (`issuer/current.rs`):
    /// once shutdown has released the claim, the next call must not issue from that copy,
    /// through the engine or through a held [`QuickPath`]. The negative control (copies used
    /// whatever their stamp) issues from the released claim.
    #[tokio::test]
    async fn a_thread_copy_is_not_used_once_shutdown_released_the_claim() {
        for (held, stale) in [(false, false), (false, true), (true, false), (true, true)] {
            let wall = Arc::new(ManualClock::new(1_700_000_000_000));
            let engine =
                Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), wall)
                    .await
                    .expect("start");
            let ns = engine.namespace("default").expect("default");
            let quick = engine.quick_path(ns).expect("a generator namespace");
            let one = || if held { quick.try_issue_one() } else { engine.try_issue_one(ns) };
            // The first call makes this thread's copy of the lane.
            assert!(matches!(one(), Quick::Done(_)));
            engine.shutdown().await.expect("shutdown");
            crate::issuer::current::tests::STALE_COPIES.set(stale);
            let after = one();
            crate::issuer::current::tests::STALE_COPIES.set(false);
            if stale {
                assert!(
                    matches!(after, Quick::Done(_)),
                    "the control should issue from the released claim: {after:?}"
                );
            } else {
                assert!(
                    matches!(after, Quick::Slow),
                    "issued after the claim was released: {after:?}"
                );
            }
        }
    }

    /// After a lost claim is taken again, a thread that issued under the old one issues under
    /// the new one (above the old mark) on its next call, and every call is counted once.
    #[tokio::test(start_paused = true)]
    async fn a_thread_copy_follows_a_claim_taken_again() {
        let coordinator = MemoryCoordinator::new();
        let wall = Arc::new(ManualClock::new(1_700_000_000_000));
        let config = ServerConfig { window_ms: 1_000, ..ServerConfig::default() };
        let engine = Engine::start(config, Arc::new(coordinator.clone()), wall.clone())
            .await
            .expect("start");
        let ns = engine.namespace("default").expect("default");
        let one = |engine: &Engine| match engine.try_issue_one(ns) {
            Quick::Done(id) => u64::try_from(id).expect("a 64-bit id"),
            other => panic!("no id at once: {other:?}"),
        };
        let before = one(&engine);
        let mark = coordinator.mark("default", 0).expect("a stored mark");
        assert!(coordinator.revoke("default", 0));
        wall.advance(1_500);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if engine.render_metrics().contains("idmint_claims_lost_total{namespace=\"default\"} 1")
                && engine.is_ready()
            {
                break;
            }
        }
        assert!(engine.is_ready(), "not claimed again:\n{}", engine.render_metrics());
        let after = one(&engine);
        let mark_tick = mark - idmint_core::Snowflake::EPOCH_MS;
        assert!(after >> 22 > mark_tick && after > before, "{after} is not above the old mark");
        let metrics = engine.render_metrics();
        for family in ["idmint_ids_issued_total", "idmint_requests_total"] {
            let line = format!("{family}{{namespace=\"default\"}} 2");
            assert!(metrics.contains(&line), "{line} missing:\n{metrics}");
        }
    }
}
