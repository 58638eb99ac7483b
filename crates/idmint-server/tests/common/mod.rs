//! Shared helpers of the in-process service tests: a server on its own runtime, served on a
//! free loopback port, a coordinator whose mark writes can be made to fail, the order of the
//! shutdown steps, and the HTTP client and checks in the submodules.

#![allow(dead_code)]

pub(crate) mod check;
pub(crate) mod h2;
pub(crate) mod http;

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use idmint_coord::{Claim, ClaimRequest, Coordinator, Error as CoordError, FileCoordinator};
use idmint_server::{Error, OffsetClock, Server, ServerConfig, ShutdownStep};
use tokio::{runtime::Runtime, task::JoinHandle};
use tokio_util::sync::CancellationToken;

/// A started server, serving HTTP on `127.0.0.1:<free port>` from its own two-thread runtime,
/// so the test itself can use blocking HTTP. Dropping it cancels its token and waits for the
/// ordered shutdown.
pub(crate) struct TestServer {
    runtime: Runtime,
    /// The server.
    pub(crate) server: Arc<Server>,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Where it serves gRPC, when started with [`TestServer::start_all`].
    pub(crate) grpc: Option<SocketAddr>,
    /// Cancelling this shuts the server down.
    pub(crate) shutdown: CancellationToken,
    task: Option<JoinHandle<Result<(), Error>>>,
}

impl TestServer {
    /// `Server::start` with these parts, then `serve` on a free port.
    pub(crate) fn start(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: Arc<OffsetClock>,
    ) -> Result<TestServer, Error> {
        TestServer::launch(config, coordinator, wall, false)
    }

    /// `Server::start` with these parts, then `serve_all` on two free ports (HTTP and gRPC).
    pub(crate) fn start_all(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: Arc<OffsetClock>,
    ) -> Result<TestServer, Error> {
        TestServer::launch(config, coordinator, wall, true)
    }

    fn launch(
        config: ServerConfig,
        coordinator: Arc<dyn Coordinator>,
        wall: Arc<OffsetClock>,
        with_grpc: bool,
    ) -> Result<TestServer, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let server = runtime.block_on(Server::start(config, coordinator, wall))?;
        let listener = runtime.block_on(idmint_server::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr().expect("local address");
        let shutdown = CancellationToken::new();
        let (task, grpc) = if with_grpc {
            let grpc = runtime.block_on(idmint_server::bind("127.0.0.1:0"))?;
            let grpc_addr = grpc.local_addr().expect("local address");
            let task = runtime.spawn(idmint_server::serve_all(
                Arc::clone(&server),
                listener,
                Some(grpc),
                shutdown.clone(),
            ));
            (task, Some(grpc_addr))
        } else {
            let task = runtime.spawn(idmint_server::serve(
                Arc::clone(&server),
                listener,
                shutdown.clone(),
            ));
            (task, None)
        };
        Ok(TestServer { runtime, server, addr, grpc, shutdown, task: Some(task) })
    }

    /// A server on a `FileCoordinator` in `dir`.
    pub(crate) fn on_dir(
        config: ServerConfig,
        dir: &Path,
        wall: Arc<OffsetClock>,
    ) -> Result<TestServer, Error> {
        let coordinator = Arc::new(FileCoordinator::open(dir).expect("open the data directory"));
        TestServer::start(config, coordinator, wall)
    }

    /// `GET target` on a new connection.
    pub(crate) fn get(&self, target: &str) -> http::Response {
        http::get(self.addr, target)
    }

    /// The current metrics text.
    pub(crate) fn metrics(&self) -> String {
        self.get("/metrics").ok().text()
    }

    /// The runtime the server runs on.
    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Cancels the token and waits for the ordered shutdown; returns what `serve` returned.
    pub(crate) fn stop(mut self) -> Result<(), Error> {
        self.shutdown.cancel();
        let task = self.task.take().expect("serve task");
        self.runtime.block_on(task).expect("the serve task panicked")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            self.shutdown.cancel();
            let _ = self.runtime.block_on(task);
        }
    }
}

/// A wall clock at the system clock plus `offset_ms`.
pub(crate) fn clock(offset_ms: i64) -> Arc<OffsetClock> {
    Arc::new(OffsetClock::new(offset_ms))
}

/// The steps of an ordered shutdown, in the order every shutdown takes them.
pub(crate) const SHUTDOWN_ORDER: [ShutdownStep; 5] = [
    ShutdownStep::ReportedNotReady,
    ShutdownStep::StoppedAccepting,
    ShutdownStep::Drained,
    ShutdownStep::Persisted,
    ShutdownStep::Released,
];

/// A coordinator whose mark writes can be made to fail (with the error `fault` makes) while
/// its claims stay held: as a full disk or an unreachable etcd would.
#[derive(Debug)]
pub(crate) struct FailingMarks<C> {
    name: &'static str,
    inner: C,
    fault: fn() -> CoordError,
    /// While set, `store_mark` fails.
    pub(crate) failing: AtomicBool,
}

impl<C> FailingMarks<C> {
    /// `inner` under the name `name`, not failing yet.
    pub(crate) fn new(name: &'static str, inner: C, fault: fn() -> CoordError) -> Self {
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
