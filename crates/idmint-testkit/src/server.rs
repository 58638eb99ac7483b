//! [`TestServer`]: the one way the tests start an in-process server (a builder over
//! `Server::start_with`, served on free loopback ports from a runtime of its own), with the
//! wall clock the tests step, the order of the shutdown steps, and a coordinator whose mark
//! writes can be made to fail.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use idmint_coord::{
    Claim, ClaimRequest, Coordinator, Error as CoordError, FileCoordinator, MemoryCoordinator,
};
use idmint_server::{Backends, Error, OffsetClock, Server, ServerConfig, ShutdownStep, WallClock};
use tokio::{runtime::Runtime, task::JoinHandle};
use tokio_util::sync::CancellationToken;

use crate::http;

/// A started server, serving HTTP (and gRPC, when built with [`TestServerBuilder::grpc`]) on
/// `127.0.0.1:<free port>` from its own two-thread runtime, so that a test can use blocking
/// HTTP, or a client on a runtime of its own. Dropping it cancels its token and waits for the
/// ordered shutdown (from a plain thread when dropped inside an async test).
///
/// # Example
///
/// ```
/// use idmint_server::ServerConfig;
/// use idmint_testkit::{TestServer, clock};
///
/// let server = TestServer::builder(ServerConfig::default()).wall(clock(0)).start()?;
/// assert_eq!(server.get("/v1/next").status, 200);
/// server.stop()?;
/// # Ok::<(), idmint_server::Error>(())
/// ```
#[derive(Debug)]
pub struct TestServer {
    runtime: Option<Runtime>,
    /// The server.
    pub server: Arc<Server>,
    /// Where it serves HTTP.
    pub addr: SocketAddr,
    /// Where it serves gRPC, when built with [`TestServerBuilder::grpc`].
    pub grpc: Option<SocketAddr>,
    /// Cancelling this shuts the server down.
    pub shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), Error>>>,
}

/// How a [`TestServer`] is made: a configuration, its backends (a `MemoryCoordinator` unless
/// given), a wall clock (the system clock unless given), and whether it also serves gRPC.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_server::ServerConfig;
/// use idmint_testkit::{TestServer, clock};
///
/// let server = TestServer::builder(ServerConfig::default())
///     .coordinator(Arc::new(MemoryCoordinator::new()))
///     .wall(clock(-1_000))
///     .grpc()
///     .start()?;
/// assert!(server.grpc.is_some());
/// # Ok::<(), idmint_server::Error>(())
/// ```
#[must_use = "a builder does nothing until `start`"]
pub struct TestServerBuilder {
    config: ServerConfig,
    backends: Option<Backends>,
    wall: Option<WallClock>,
    grpc: bool,
}

impl std::fmt::Debug for TestServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServerBuilder").field("grpc", &self.grpc).finish_non_exhaustive()
    }
}

/// What the launch on the server's runtime hands back.
type Launched = (Arc<Server>, SocketAddr, Option<SocketAddr>, JoinHandle<Result<(), Error>>);

impl TestServerBuilder {
    /// Generator claims and marks from `coordinator` (and no other store).
    pub fn coordinator(mut self, coordinator: Arc<dyn Coordinator>) -> Self {
        self.backends = Some(Backends::new(coordinator));
        self
    }

    /// Every store the namespaces' sources need (`Server::start_with`).
    pub fn backends(mut self, backends: Backends) -> Self {
        self.backends = Some(backends);
        self
    }

    /// The server's wall clock (e.g. [`clock`], which the test can step).
    pub fn wall(mut self, wall: WallClock) -> Self {
        self.wall = Some(wall);
        self
    }

    /// Also serve gRPC (`serve_all`), on a second free port.
    pub fn grpc(mut self) -> Self {
        self.grpc = true;
        self
    }

    /// Starts the server, from a test that is not itself async.
    ///
    /// # Errors
    ///
    /// What `Server::start_with` or `bind` returned.
    pub fn start(self) -> Result<TestServer, Error> {
        let (runtime, shutdown, launch) = self.launch();
        let launched = runtime.block_on(launch).expect("the launch panicked");
        TestServer::assemble(runtime, shutdown, launched)
    }

    /// Starts the server from inside an async test (the server still runs on its own runtime).
    ///
    /// # Errors
    ///
    /// What `Server::start_with` or `bind` returned.
    pub async fn start_async(self) -> Result<TestServer, Error> {
        let (runtime, shutdown, launch) = self.launch();
        let launched = launch.await.expect("the launch panicked");
        TestServer::assemble(runtime, shutdown, launched)
    }

    /// A new runtime, and the start of the server on it.
    fn launch(self) -> (Runtime, CancellationToken, JoinHandle<Result<Launched, Error>>) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let TestServerBuilder { config, backends, wall, grpc } = self;
        let backends =
            backends.unwrap_or_else(|| Backends::new(Arc::new(MemoryCoordinator::new())));
        let wall = wall.unwrap_or_else(|| Arc::new(OffsetClock::new(0)));
        let shutdown = CancellationToken::new();
        let launch = runtime.spawn({
            let shutdown = shutdown.clone();
            async move {
                let server = Server::start_with(config, backends, wall).await?;
                let listener = idmint_server::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr().expect("local address");
                if grpc {
                    let grpc = idmint_server::bind("127.0.0.1:0").await?;
                    let grpc_addr = grpc.local_addr().expect("local address");
                    let task = tokio::spawn(idmint_server::serve_all(
                        Arc::clone(&server),
                        listener,
                        Some(grpc),
                        shutdown,
                    ));
                    Ok((server, addr, Some(grpc_addr), task))
                } else {
                    let task =
                        tokio::spawn(idmint_server::serve(Arc::clone(&server), listener, shutdown));
                    Ok((server, addr, None, task))
                }
            }
        });
        (runtime, shutdown, launch)
    }
}

impl TestServer {
    /// A builder for a server with this configuration.
    pub fn builder(config: ServerConfig) -> TestServerBuilder {
        TestServerBuilder { config, backends: None, wall: None, grpc: false }
    }

    /// `TestServer::builder(config).coordinator(coordinator).wall(wall).start()`.
    ///
    /// # Errors
    ///
    /// What `Server::start_with` or `bind` returned.
    pub fn start(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: Arc<OffsetClock>,
    ) -> Result<TestServer, Error> {
        TestServer::builder(config).coordinator(coordinator).wall(wall).start()
    }

    /// A server on a `FileCoordinator` in `dir`.
    ///
    /// # Errors
    ///
    /// What `Server::start_with` or `bind` returned.
    pub fn on_dir(
        config: ServerConfig,
        dir: &Path,
        wall: Arc<OffsetClock>,
    ) -> Result<TestServer, Error> {
        let coordinator = Arc::new(FileCoordinator::open(dir).expect("open the data directory"));
        TestServer::start(config, coordinator, wall)
    }

    fn assemble(
        runtime: Runtime,
        shutdown: CancellationToken,
        launched: Result<Launched, Error>,
    ) -> Result<TestServer, Error> {
        match launched {
            Ok((server, addr, grpc, task)) => Ok(TestServer {
                runtime: Some(runtime),
                server,
                addr,
                grpc,
                shutdown,
                task: Some(task),
            }),
            Err(e) => {
                drop_runtime(runtime);
                Err(e)
            }
        }
    }

    /// `GET target` on a new connection.
    pub fn get(&self, target: &str) -> http::Response {
        http::get(self.addr, target)
    }

    /// The current metrics text.
    pub fn metrics(&self) -> String {
        self.get("/metrics").ok().text()
    }

    /// `http://<grpc address>`, for a tonic client.
    ///
    /// # Panics
    ///
    /// When the server does not serve gRPC.
    pub fn grpc_url(&self) -> String {
        format!("http://{}", self.grpc.expect("a server started with .grpc()"))
    }

    /// The runtime the server runs on.
    pub fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("the runtime")
    }

    /// Cancels the token and waits for the ordered shutdown; returns what `serve` returned.
    ///
    /// # Errors
    ///
    /// What `serve` returned.
    pub fn stop(mut self) -> Result<(), Error> {
        self.shutdown.cancel();
        let task = self.task.take().expect("serve task");
        self.runtime().block_on(task).expect("the serve task panicked")
    }

    /// [`TestServer::stop`] from inside an async test.
    ///
    /// # Errors
    ///
    /// What `serve` returned.
    pub async fn stop_async(self) -> Result<(), Error> {
        self.shutdown.cancel();
        self.served().await
    }

    /// Waits, from inside an async test, until `serve` returns (after the test cancelled
    /// [`TestServer::shutdown`]), and what it returned.
    ///
    /// # Errors
    ///
    /// What `serve` returned.
    pub async fn served(mut self) -> Result<(), Error> {
        let task = self.task.take().expect("serve task");
        task.await.expect("the serve task panicked")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else { return };
        let task = self.task.take();
        self.shutdown.cancel();
        let finish = move || {
            if let Some(task) = task {
                let _ = runtime.block_on(task);
            }
            runtime
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            // Inside an async test: block on a plain thread, and drop the runtime without
            // blocking this one.
            let runtime = std::thread::spawn(finish).join().expect("the shutdown thread");
            runtime.shutdown_background();
        } else {
            drop(finish());
        }
    }
}

/// Drops a runtime, also from inside an async test.
fn drop_runtime(runtime: Runtime) {
    if tokio::runtime::Handle::try_current().is_ok() {
        runtime.shutdown_background();
    } else {
        drop(runtime);
    }
}

/// A wall clock at the system clock plus `offset_ms`.
pub fn clock(offset_ms: i64) -> Arc<OffsetClock> {
    Arc::new(OffsetClock::new(offset_ms))
}

/// The steps of an ordered shutdown, in the order every shutdown takes them.
pub const SHUTDOWN_ORDER: [ShutdownStep; 5] = [
    ShutdownStep::ReportedNotReady,
    ShutdownStep::StoppedAccepting,
    ShutdownStep::Drained,
    ShutdownStep::Persisted,
    ShutdownStep::Released,
];

/// A coordinator whose mark writes can be made to fail (with the error `fault` makes) while
/// its claims stay held: as a full disk or an unreachable etcd would.
#[derive(Debug)]
pub struct FailingMarks<C> {
    name: &'static str,
    inner: C,
    fault: fn() -> CoordError,
    /// While set, `store_mark` fails.
    pub failing: AtomicBool,
}

impl<C> FailingMarks<C> {
    /// `inner` under the name `name`, not failing yet.
    pub fn new(name: &'static str, inner: C, fault: fn() -> CoordError) -> Self {
        FailingMarks { name, inner, fault, failing: AtomicBool::new(false) }
    }
}

#[async_trait::async_trait]
impl<C: Coordinator> Coordinator for FailingMarks<C> {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, CoordError> {
        self.inner.claim(request).await
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), CoordError> {
        if self.failing.load(Ordering::SeqCst) {
            return Err((self.fault)());
        }
        self.inner.store_mark(claim, mark_ms).await
    }

    async fn release(&self, claim: &Claim) -> Result<(), CoordError> {
        self.inner.release(claim).await
    }
}
