//! [`Server`]: a running ID service, the [`Engine`] that issues with what the APIs keep over
//! it (their metrics, and the steps of the shutdown sequence, [`ShutdownStep`]).

use std::sync::{Arc, Mutex};

use idmint_coord::Coordinator;
use idmint_engine::{Backends, Clocks, Engine, IdSink, Namespace, ServerConfig, WallClock};
use idmint_proto::NamespaceInfo;

use crate::{
    Error,
    metrics::{ApiMetrics, HttpMetrics},
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

/// A running ID service: its [`Engine`] (namespaces, backends, clocks and their metrics), and
/// the metrics and shutdown steps of the APIs that serve it.
#[derive(Debug)]
pub struct Server {
    engine: Arc<Engine>,
    http_metrics: HttpMetrics,
    /// The metrics of the APIs served that own theirs (gRPC), one of each type.
    api_metrics: Mutex<Vec<Arc<dyn ApiMetrics>>>,
    steps: Mutex<Vec<ShutdownStep>>,
}

impl Server {
    /// Starts an [`Engine`] ([`Engine::start`], which says what a start claims and stores,
    /// and how a spare starts) and wraps it ([`Server::over`]).
    ///
    /// # Errors
    ///
    /// The engine's ([`Engine::start`]), as the [`Error`]s of the same names.
    pub async fn start(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: WallClock,
    ) -> Result<Arc<Server>, Error> {
        Server::start_with(config, Backends::new(coordinator), wall).await
    }

    /// [`Server::start`] with the stores of every [`Source`](idmint_engine::Source)
    /// ([`Engine::start_with`], which says how each namespace starts from its store).
    ///
    /// # Errors
    ///
    /// The engine's ([`Engine::start_with`]), as the [`Error`]s of the same names.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_server::{Backends, Server, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let backends = Backends::new(Arc::new(MemoryCoordinator::new()));
    /// let server = Server::start_with(ServerConfig::default(), backends, Arc::new(SystemClock)).await?;
    /// assert_eq!(server.issue("default", 3).await?.len(), 3);
    /// server.stop().await?;
    /// # Ok::<(), idmint_server::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn start_with(
        config: ServerConfig,
        backends: Backends,
        wall: WallClock,
    ) -> Result<Arc<Server>, Error> {
        let engine = Engine::start_with(config, backends, wall).await?;
        Ok(Arc::new(Server::over(engine)))
    }

    /// A server over an engine already started: the APIs' metrics start at zero, and no
    /// shutdown step is taken yet.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_core::SystemClock;
    /// use idmint_server::{Engine, Server, ServerConfig};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
    /// let server = Server::over(Arc::clone(&engine));
    /// assert!(Arc::ptr_eq(server.engine(), &engine) && server.is_ready());
    /// server.stop().await?;
    /// assert!(!engine.is_ready());
    /// # Ok::<(), idmint_server::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn over(engine: Arc<Engine>) -> Server {
        Server {
            engine,
            http_metrics: HttpMetrics::default(),
            api_metrics: Mutex::default(),
            steps: Mutex::new(Vec::new()),
        }
    }

    /// The engine that issues.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The validated configuration.
    pub fn config(&self) -> &ServerConfig {
        self.engine.config()
    }

    /// Whether every namespace can issue IDs and the server is not shutting down
    /// ([`Engine::is_ready`]). A namespace can issue while it holds a claim and its stored
    /// window is not used up: a server whose window could not be extended (its coordinator is
    /// down) reports not ready until the extension succeeds, as does a spare still waiting for
    /// a generator ID. A namespace of a store source is ready while the last call to its store
    /// succeeded; after a failure a background probe (one ID, a gap) retries until the store
    /// answers again.
    pub fn is_ready(&self) -> bool {
        self.engine.is_ready()
    }

    /// What the server says about its namespaces (`GET /v1/namespaces`).
    pub fn namespace_infos(&self) -> Vec<NamespaceInfo> {
        self.engine.namespace_infos()
    }

    /// The steps of the shutdown sequence taken so far.
    pub fn shutdown_steps(&self) -> Vec<ShutdownStep> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The current metrics, in the Prometheus text format: the engine's of issuing, the HTTP
    /// API's, the engine's of the process, then those of the other APIs served (gRPC).
    pub fn render_metrics(&self) -> String {
        let mut out = String::with_capacity(4096);
        self.engine.render_issuing_metrics(&mut out);
        self.http_metrics.render(&mut out);
        self.engine.render_process_metrics(&mut out);
        for api in self.api_metrics.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            api.render(&mut out);
        }
        out
    }

    /// IDs of one namespace, in increasing order, bypassing the network
    /// ([`Engine::issue`]). At most `max_batch` per call.
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
        Ok(self.engine.issue(namespace, count).await?)
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
        Ok(self.engine.issue_u64(namespace, count, out).await?)
    }

    /// [`Engine::issue_keyed_into`]: the one path of every request of both APIs, with a
    /// request's shard key (`None`: the namespace's own).
    pub(crate) async fn issue_keyed_into(
        &self,
        ns: &Namespace,
        count: u64,
        shard_key: Option<u32>,
        sink: &mut dyn IdSink,
    ) -> Result<(), Error> {
        Ok(self.engine.issue_keyed_into(ns, count, shard_key, sink).await?)
    }

    /// The layout of a namespace.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`].
    pub fn layout(&self, namespace: &str) -> Result<&idmint_core::Layout, Error> {
        Ok(self.engine.layout(namespace)?)
    }

    /// The namespace that `/v1/next` and friends use: the first configured.
    pub fn default_namespace(&self) -> &str {
        self.engine.default_namespace()
    }

    pub(crate) fn namespace(&self, name: &str) -> Result<&Arc<Namespace>, Error> {
        Ok(self.engine.namespace(name)?)
    }

    pub(crate) fn namespace_list(&self) -> &[Arc<Namespace>] {
        self.engine.namespaces()
    }

    pub(crate) fn clocks(&self) -> &Clocks {
        self.engine.clocks()
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
        if self.engine.report_not_ready() {
            self.step(ShutdownStep::ReportedNotReady);
        }
    }

    /// The engine's ordered shutdown ([`Engine::shutdown`]): stops the window tasks, stores
    /// every namespace's mark once more, and releases every claim. Call it after requests have
    /// drained; [`serve`](crate::serve) does.
    ///
    /// # Errors
    ///
    /// The first coordination error; every namespace is still released.
    pub async fn stop(&self) -> Result<(), Error> {
        self.report_not_ready();
        let stopped = self.engine.shutdown().await;
        self.step(ShutdownStep::Persisted);
        self.step(ShutdownStep::Released);
        Ok(stopped?)
    }
}
