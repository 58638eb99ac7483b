//! Accept and shutdown: [`serve`], `serve_grpc` and `serve_all` over one accept loop for
//! both ports ([`accept`]), each port's router and hyper settings ([`Port`]), the shutdown
//! sequence, and [`bind`].

use std::{convert::Infallible, io, sync::Arc, time::Duration};

use axum::{body::Body, http::Request};
use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use idmint_engine::{DEFAULT_LISTEN_BACKLOG, ServerConfig};
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use super::{
    admission::Admission,
    socket::{MAX_HEADER_BYTES, Tracked},
    watchdog::{GuardedBody, RequestGuard, TrackedBody, watch},
};
use crate::{Error, Server, ShutdownStep, http};

/// Serves the HTTP API of `server` on `listener` until `shutdown` is cancelled, then shuts
/// down in order: report not ready, keep serving for `shutdown_delay_ms` (so that load
/// balancers see the 503 first), stop accepting, drain in-flight requests, persist marks,
/// release claims.
///
/// # Errors
///
/// The error of the final persist-and-release step, if any. Accept errors are retried.
pub async fn serve(
    server: Arc<Server>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    serve_endpoints(
        server,
        Some(listener),
        #[cfg(feature = "grpc")]
        None,
        shutdown,
    )
    .await
}

/// Serves the gRPC API of `server` (`idmint.v1.IdMint`, and `grpc.health.v1.Health` reporting
/// SERVING while [`Server::is_ready`]) on `listener` until `shutdown` is cancelled, then shuts
/// down in the order of [`serve`]. Streams end with UNAVAILABLE when `shutdown` is cancelled.
/// Connections are admitted and watched as on the HTTP port (caps, deadlines, HTTP/2 limits).
///
/// # Errors
///
/// The error of the final persist-and-release step, if any.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_proto::grpc::{BatchRequest, IdMintClient};
/// use idmint_server::{Server, ServerConfig};
/// use tokio_util::sync::CancellationToken;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let server = Server::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let url = format!("http://{}", listener.local_addr().unwrap());
/// let shutdown = CancellationToken::new();
/// let task = tokio::spawn(idmint_server::serve_grpc(Arc::clone(&server), listener, shutdown.clone()));
/// let mut client = IdMintClient::connect(url).await.unwrap();
/// let batch = client.batch(BatchRequest { namespace: String::new(), count: 3, ..Default::default() }).await.unwrap();
/// assert_eq!(batch.into_inner().ids.len(), 3);
/// shutdown.cancel();
/// task.await.unwrap()?;
/// # Ok::<(), idmint_server::Error>(())
/// # }).unwrap();
/// ```
#[cfg(feature = "grpc")]
pub async fn serve_grpc(
    server: Arc<Server>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    serve_endpoints(server, None, Some(listener), shutdown).await
}

/// Serves the HTTP API on `http` and, when given, the gRPC API on `grpc`, over one server,
/// until `shutdown` is cancelled. The connections of both ports count against the same
/// `max_connections` and `max_connections_per_ip`. At shutdown readiness and gRPC health turn
/// off, both keep serving for `shutdown_delay_ms`, both stop accepting, both drain (together,
/// within `drain_ms`), and only then are marks persisted and claims released, once:
/// [`Server::shutdown_steps`] records each step once.
///
/// # Errors
///
/// The error of the final persist-and-release step, if any.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_server::{Server, ServerConfig, ShutdownStep};
/// use tokio_util::sync::CancellationToken;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let server = Server::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// let http = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let shutdown = CancellationToken::new();
/// let task = tokio::spawn(idmint_server::serve_all(Arc::clone(&server), http, Some(grpc), shutdown.clone()));
/// shutdown.cancel();
/// task.await.unwrap()?;
/// assert_eq!(
///     server.shutdown_steps(),
///     [
///         ShutdownStep::ReportedNotReady,
///         ShutdownStep::StoppedAccepting,
///         ShutdownStep::Drained,
///         ShutdownStep::Persisted,
///         ShutdownStep::Released,
///     ]
/// );
/// # Ok::<(), idmint_server::Error>(())
/// # }).unwrap();
/// ```
#[cfg(feature = "grpc")]
pub async fn serve_all(
    server: Arc<Server>,
    http: TcpListener,
    grpc: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    serve_endpoints(server, Some(http), grpc, shutdown).await
}

/// The one shutdown sequence, over whichever APIs are served. Both ports go through one
/// [`Admission`] (one registry of open connections, one set of caps and deadlines) and one
/// accept loop ([`accept`]), and drain through one [`GracefulShutdown`].
async fn serve_endpoints(
    server: Arc<Server>,
    http: Option<TcpListener>,
    #[cfg(feature = "grpc")] grpc: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // Cancelled after the shutdown delay: the listeners close then, not when `shutdown` is.
    let stop_accepting = CancellationToken::new();
    let admission = Admission::new(server.config());
    let graceful = GracefulShutdown::new();
    let http = http.map(|listener| (listener, Port::http(&server)));
    #[cfg(feature = "grpc")]
    let grpc = grpc.map(|listener| (listener, Port::grpc(&server, shutdown.clone())));
    #[cfg(not(feature = "grpc"))]
    let grpc: Option<(TcpListener, Port)> = None;
    let sequence = async {
        shutdown.cancelled().await;
        server.report_not_ready();
        let delay = server.config().shutdown_delay_ms;
        if delay > 0 {
            tracing::info!(
                shutdown_delay_ms = delay,
                "not ready; still serving until the load balancers have seen it"
            );
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        stop_accepting.cancel();
    };
    let accept_on = |port: Option<(TcpListener, Port)>| {
        let (server, admission, graceful, stop) = (&server, &admission, &graceful, &stop_accepting);
        async move {
            if let Some((listener, port)) = port {
                accept(server, listener, port, admission, graceful, stop).await;
            }
        }
    };
    tokio::join!(accept_on(http), accept_on(grpc), sequence);
    server.step(ShutdownStep::StoppedAccepting);
    let drain = Duration::from_millis(server.config().drain_ms);
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!(
            drain_ms = server.config().drain_ms,
            "in-flight requests did not finish in time"
        );
    }
    server.step(ShutdownStep::Drained);
    server.stop().await
}

/// What one port serves: its router, and the hyper settings of its connections.
pub(crate) struct Port {
    router: axum::Router,
    builder: auto::Builder<TokioExecutor>,
}

impl Port {
    /// The HTTP API, with idmint's HTTP/1 and HTTP/2 limits.
    fn http(server: &Arc<Server>) -> Port {
        Port { router: http::router(Arc::clone(server)), builder: builder(server.config()) }
    }

    /// A port serving `router` with the limits of every port, then `http2` applied to its
    /// HTTP/2 settings (the gRPC port's flow-control windows).
    #[cfg(feature = "grpc")]
    pub(crate) fn with(
        router: axum::Router,
        config: &ServerConfig,
        http2: impl FnOnce(&mut hyper_util::server::conn::auto::Http2Builder<'_, TokioExecutor>),
    ) -> Port {
        let mut builder = builder(config);
        http2(&mut builder.http2());
        Port { router, builder }
    }
}

/// The hyper settings every port shares: the HTTP/1 header limit (the watchdog times
/// headers), and HTTP/2's header limit, keep-alive pings, concurrent streams per connection
/// and resets (rapid reset, CVE-2023-44487).
fn builder(config: &ServerConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .max_buf_size(MAX_HEADER_BYTES)
        // The watchdog times headers, from accept; hyper's own timer would also close idle
        // keep-alive connections at the header timeout.
        .header_read_timeout(None)
        .timer(TokioTimer::new());
    builder
        .http2()
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .keep_alive_interval(Duration::from_millis(config.http2_keepalive_interval_ms))
        .keep_alive_timeout(Duration::from_millis(config.http2_keepalive_timeout_ms))
        .max_concurrent_streams(config.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(config.http2_max_pending_resets)
        .max_local_error_reset_streams(config.http2_max_pending_resets)
        .timer(TokioTimer::new());
    builder
}

/// Accepts connections on `listener` until `shutdown` is cancelled, admits each one (caps
/// and shedding), serves it with `port` under its watchdog, then closes the listener. The
/// open connections drain through `graceful`.
async fn accept(
    server: &Arc<Server>,
    listener: TcpListener,
    port: Port,
    admission: &Admission,
    graceful: &GracefulShutdown,
    shutdown: &CancellationToken,
) {
    let Port { router, builder } = port;
    let mut backoff = Duration::from_millis(1);
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(conn) => {
                backoff = Duration::from_millis(1);
                conn
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let conn = match admission.admit(peer, server) {
            Ok(conn) => conn,
            Err(reason) => {
                server.http_metrics().connection_refused(reason);
                tracing::debug!(%peer, ?reason, "connection refused");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let io = Tracked::new(stream, Arc::clone(&conn), Arc::clone(server));
        let service = {
            let conn = Arc::clone(&conn);
            let router = router.clone();
            hyper::service::service_fn(move |request: Request<Incoming>| {
                let conn = Arc::clone(&conn);
                let mut router = router.clone();
                async move {
                    let guard = RequestGuard::new(Arc::clone(&conn));
                    let request = request.map(|body| Body::new(TrackedBody::new(body, conn)));
                    let Ok(response) = router.call(request).await;
                    Ok::<_, Infallible>(response.map(|body| GuardedBody { body, _guard: guard }))
                }
            })
        };
        let served =
            graceful.watch(builder.serve_connection(TokioIo::new(io), service).into_owned());
        let (owner, connections) = (Arc::clone(server), Arc::clone(&admission.connections));
        tokio::spawn(async move {
            watch(&owner, &conn, served).await;
            connections.remove(&conn, &owner);
        });
    }
    drop(listener);
}

/// Binds a TCP listener with a listen backlog of [`DEFAULT_LISTEN_BACKLOG`], with a clear
/// error.
///
/// # Errors
///
/// [`Error::Io`] when the address cannot be bound.
///
/// # Example
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let listener = idmint_server::bind("127.0.0.1:0").await?;
/// assert!(listener.local_addr().unwrap().port() > 0);
/// # Ok::<(), idmint_server::Error>(())
/// # }).unwrap();
/// ```
pub async fn bind(addr: &str) -> Result<TcpListener, Error> {
    bind_with_backlog(addr, DEFAULT_LISTEN_BACKLOG).await
}

/// Binds a TCP listener on `addr` (an IP address and port, or a host name and port: the
/// first of its addresses that binds) with a listen `backlog` of connections the kernel
/// completes before the accept loop takes them: a burst of new connections waits there
/// instead of being dropped and retried by the client after a second. `SO_REUSEADDR` is set,
/// as by [`TcpListener::bind`].
///
/// # Errors
///
/// [`Error::Io`] when the address does not resolve or cannot be bound, or `backlog` is 0.
///
/// # Example
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let listener = idmint_server::bind_with_backlog("127.0.0.1:0", 4096).await?;
/// assert!(listener.local_addr().unwrap().port() > 0);
/// assert!(idmint_server::bind_with_backlog("127.0.0.1:0", 0).await.is_err());
/// # Ok::<(), idmint_server::Error>(())
/// # }).unwrap();
/// ```
pub async fn bind_with_backlog(addr: &str, backlog: u32) -> Result<TcpListener, Error> {
    let context = || format!("cannot listen on {addr}");
    if backlog == 0 {
        return Err(Error::io(
            context(),
            io::Error::new(io::ErrorKind::InvalidInput, "the listen backlog must be at least 1"),
        ));
    }
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "the address resolves to nothing");
    for resolved in tokio::net::lookup_host(addr).await.map_err(|e| Error::io(context(), e))? {
        let socket = if resolved.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() };
        let bound = socket.and_then(|socket| {
            socket.set_reuseaddr(true)?;
            socket.bind(resolved)?;
            socket.listen(backlog)
        });
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(Error::io(context(), last))
}
