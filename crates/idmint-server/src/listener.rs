//! The listeners and the shutdown sequence: [`serve`], `serve_grpc`, `serve_all` and
//! [`bind`]; the one accept loop of both ports; and the hygiene of every connection.
//!
//! # One admission for both ports
//!
//! The HTTP port and the gRPC port are served by the same accept loop ([`accept`]), each
//! with its own router and HTTP/2 windows ([`Port`]), but through one admission: one registry
//! of open connections, so `max_connections` and `max_connections_per_ip` count the
//! connections of both ports together, and one watchdog per connection with the same
//! deadlines. A gRPC call is a request like any other: its message must arrive within
//! `body_timeout_ms`, and a connection with no call in flight is idle.
//!
//! # Connection hygiene
//!
//! Each connection has a watchdog, on the task that serves it, that closes it when:
//!
//! - its first byte has not arrived `first_byte_timeout_ms` after accept;
//! - the header of its first request is not complete `header_timeout_ms` after accept (of a
//!   later request: after that request's first byte);
//! - a request body is not complete `body_timeout_ms` after its header (a body trickling in
//!   one byte at a time);
//! - it has been idle (no request in flight) for `idle_timeout_ms` since its last response.
//!
//! At `max_connections`, a new connection makes room by closing the connection idle the
//! longest (no request in flight: never sent a byte, between keep-alive requests, or still
//! sending a header); with none idle, the new connection is closed at once, as is one over
//! `max_connections_per_ip`. `max_connections` is lowered to the open-files limit less
//! [`FD_RESERVE`], so the loop can always accept the connection that sheds an idle one. The
//! watchdog sees the connection through [`Tracked`], the socket wrapper that notes each read,
//! and through the service, which notes each request and body.
//!
//! # Errors of the HTTP stack
//!
//! hyper answers some malformed requests itself, before idmint's code sees them: a header
//! over the limit (431), a request target too long (414), and a request line or header that
//! does not parse (400). No request is in flight then, so [`Tracked`] recognises the answer
//! hyper writes and writes idmint's JSON error of the same status instead
//! ([`Error::from_http_stack`]), with `Connection: close`.

use std::{
    collections::HashMap,
    convert::Infallible,
    io,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::{body::Body, http::Request};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::{conn::auto, graceful::GracefulShutdown},
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpSocket, TcpStream},
    sync::Notify,
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

use crate::{
    DEFAULT_LISTEN_BACKLOG, Error, Server, ServerConfig, ShutdownStep, http,
    metrics::{CloseReason, Refusal},
};

/// The largest HTTP/1 read buffer, which bounds the size of a request header (bytes).
pub(crate) const MAX_HEADER_BYTES: usize = 16 * 1024;

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
/// admission (one [`Connections`] registry, one set of [`Limits`]) and one accept loop
/// ([`accept`]), and drain through one [`GracefulShutdown`].
async fn serve_endpoints(
    server: Arc<Server>,
    http: Option<TcpListener>,
    #[cfg(feature = "grpc")] grpc: Option<TcpListener>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // Cancelled after the shutdown delay: the listeners close then, not when `shutdown` is.
    let stop_accepting = CancellationToken::new();
    let admission = Admission {
        limits: Arc::new(Limits::new(server.config())),
        connections: Arc::new(Connections::default()),
    };
    let graceful = GracefulShutdown::new();
    let http = http.map(|listener| (listener, Port::http(&server)));
    #[cfg(feature = "grpc")]
    let grpc = grpc.map(|listener| (listener, Port::grpc(&server, shutdown.clone())));
    #[cfg(not(feature = "grpc"))]
    let grpc: Option<(TcpListener, Port)> = None;
    let sequence = async {
        shutdown.cancelled().await;
        server.report_not_ready();
        let delay = server.config.shutdown_delay_ms;
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
    let drain = Duration::from_millis(server.config.drain_ms);
    if tokio::time::timeout(drain, graceful.shutdown()).await.is_err() {
        tracing::warn!(
            drain_ms = server.config.drain_ms,
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

/// The one admission of both ports: their caps, and the open connections they count.
struct Admission {
    limits: Arc<Limits>,
    connections: Arc<Connections>,
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
        let conn = match admission.connections.admit(peer, &admission.limits, server) {
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
        tokio::spawn(watch(Arc::clone(server), conn, served, Arc::clone(&admission.connections)));
    }
    drop(listener);
}

/// Serves one connection until it ends, its watchdog finds a deadline passed, or it is shed.
async fn watch(
    server: Arc<Server>,
    conn: Arc<Conn>,
    served: impl Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
    connections: Arc<Connections>,
) {
    tokio::pin!(served);
    let closed = loop {
        let deadline = conn.arm();
        let sleep = tokio::time::sleep_until(
            deadline.map_or_else(|| Instant::now() + Duration::from_secs(86_400), |(at, _)| at),
        );
        tokio::select! {
            biased;
            _ = &mut served => break None,
            () = conn.shed.cancelled() => break Some(CloseReason::Shed),
            () = conn.changed.notified() => {}
            () = sleep => {
                if let Some(reason) = conn.expired(Instant::now()) {
                    break Some(reason);
                }
            }
        }
    };
    if let Some(reason) = closed {
        tracing::debug!(peer = %conn.peer, ?reason, "connection closed by the server");
        server.http_metrics().connection_closed(reason);
    }
    connections.remove(&conn, &server);
}

/// The timeouts and caps of HTTP connections, from [`ServerConfig`].
#[derive(Debug)]
struct Limits {
    first_byte: Duration,
    header: Duration,
    body: Duration,
    idle: Duration,
    max: usize,
    per_ip: Option<usize>,
}

/// File descriptors kept out of `max_connections`: the listeners, data files, coordinator
/// connections, and the accept that sheds an idle connection to make room for a new one.
const FD_RESERVE: usize = 64;

/// The soft limit on open files of this process (`RLIMIT_NOFILE`), from `/proc/self/limits`;
/// None where that file is missing or says unlimited.
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find_map(|line| line.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// `max_connections`, lowered to fit the open-files limit: at the limit, the accept loop
/// sheds an idle connection for a new one while it can still accept, instead of failing to
/// accept (EMFILE) with every descriptor held by connections that never send a request.
fn connection_cap(configured: usize, open_files: Option<usize>) -> usize {
    let Some(files) = open_files else { return configured };
    let budget = files.saturating_sub(FD_RESERVE).max(1);
    if budget < configured {
        tracing::warn!(
            max_connections = configured,
            open_files_limit = files,
            cap = budget,
            "max_connections lowered to fit the open-files limit (ulimit -n), less {FD_RESERVE} for files and accepts"
        );
    }
    configured.min(budget)
}

impl Limits {
    fn new(config: &ServerConfig) -> Self {
        Limits {
            first_byte: Duration::from_millis(config.first_byte_timeout_ms),
            header: Duration::from_millis(config.header_timeout_ms),
            body: Duration::from_millis(config.body_timeout_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
            max: connection_cap(config.max_connections, open_files_limit()),
            per_ip: config.max_connections_per_ip.filter(|&cap| cap > 0),
        }
    }
}

/// The open connections, by ID, and how many each IP address holds.
#[derive(Debug, Default)]
struct Connections {
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    open: HashMap<u64, Arc<Conn>>,
    per_ip: HashMap<IpAddr, usize>,
    next_id: u64,
}

impl Registry {
    fn forget(&mut self, conn: &Conn) -> bool {
        if self.open.remove(&conn.id).is_none() {
            return false;
        }
        if let Some(count) = self.per_ip.get_mut(&conn.peer.ip()) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&conn.peer.ip());
            }
        }
        true
    }
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a new connection from `peer`: refused over the per-IP cap; at the limit, the
    /// connection idle the longest is shed to make room, and without one it is refused.
    fn admit(
        &self,
        peer: SocketAddr,
        limits: &Arc<Limits>,
        server: &Server,
    ) -> Result<Arc<Conn>, Refusal> {
        let mut registry = self.lock();
        let from_ip = registry.per_ip.get(&peer.ip()).copied().unwrap_or(0);
        if limits.per_ip.is_some_and(|cap| from_ip >= cap) {
            return Err(Refusal::PerIp);
        }
        if registry.open.len() >= limits.max {
            let victim = registry
                .open
                .values()
                .filter_map(|conn| conn.idle_since().map(|since| (since, conn.id)))
                .min()
                .and_then(|(_, id)| registry.open.get(&id).cloned());
            let Some(victim) = victim else { return Err(Refusal::Limit) };
            registry.forget(&victim);
            server.http_metrics().connection_gone();
            victim.shed.cancel();
        }
        registry.next_id += 1;
        let conn = Arc::new(Conn::new(registry.next_id, peer, Arc::clone(limits)));
        registry.open.insert(conn.id, Arc::clone(&conn));
        *registry.per_ip.entry(peer.ip()).or_insert(0) += 1;
        server.http_metrics().connection_opened();
        Ok(conn)
    }

    /// Forgets a connection that ended (once; a shed one is already forgotten).
    fn remove(&self, conn: &Conn, server: &Server) {
        if self.lock().forget(conn) {
            server.http_metrics().connection_gone();
        }
    }
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Accepted; no byte yet.
    Fresh,
    /// A header is arriving; it must be complete by `deadline`.
    Head { since: Instant, deadline: Instant },
    /// At least one request is being answered.
    Busy,
    /// The last response is done; no byte of a next request yet.
    Idle { since: Instant },
}

#[derive(Debug)]
struct State {
    phase: Phase,
    requests: usize,
    /// Bodies still arriving, with their deadlines.
    bodies: Vec<(u64, Instant)>,
    next_body: u64,
    /// The deadline the watchdog sleeps until (None: no deadline).
    armed: Option<Instant>,
}

/// One HTTP connection, as its watchdog sees it.
#[derive(Debug)]
struct Conn {
    id: u64,
    peer: SocketAddr,
    accepted: Instant,
    state: Mutex<State>,
    /// Woken when a deadline earlier than the armed one appears.
    changed: Notify,
    /// Cancelled when the connection is shed for a new one.
    shed: CancellationToken,
    limits: Arc<Limits>,
}

impl Conn {
    fn new(id: u64, peer: SocketAddr, limits: Arc<Limits>) -> Self {
        Conn {
            limits,
            id,
            peer,
            accepted: Instant::now(),
            state: Mutex::new(State {
                phase: Phase::Fresh,
                requests: 0,
                bodies: Vec::new(),
                next_body: 0,
                armed: None,
            }),
            changed: Notify::new(),
            shed: CancellationToken::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the watchdog if `deadline` comes before the one it sleeps until.
    fn nudge(&self, state: &State, deadline: Instant) {
        if state.armed.is_none_or(|armed| deadline < armed) {
            self.changed.notify_one();
        }
    }

    /// The earliest deadline now, and what passing it means; remembered as armed.
    fn arm(&self) -> Option<(Instant, CloseReason)> {
        let mut state = self.lock();
        let deadline = Self::deadline(&state, self.accepted, &self.limits);
        state.armed = deadline.map(|(at, _)| at);
        deadline
    }

    fn deadline(
        state: &State,
        accepted: Instant,
        limits: &Limits,
    ) -> Option<(Instant, CloseReason)> {
        if let Some(&(_, at)) = state.bodies.iter().min_by_key(|(_, at)| *at) {
            return Some((at, CloseReason::Body));
        }
        match state.phase {
            Phase::Fresh => Some((accepted + limits.first_byte, CloseReason::FirstByte)),
            Phase::Head { deadline, .. } => Some((deadline, CloseReason::Header)),
            Phase::Busy => None,
            Phase::Idle { since } => Some((since + limits.idle, CloseReason::Idle)),
        }
    }

    /// The reason to close, if a deadline has passed at `now`.
    fn expired(&self, now: Instant) -> Option<CloseReason> {
        let state = self.lock();
        Self::deadline(&state, self.accepted, &self.limits)
            .filter(|(at, _)| *at <= now)
            .map(|(_, why)| why)
    }

    /// Since when the connection has had no request in flight; None while it has one.
    fn idle_since(&self) -> Option<Instant> {
        match self.lock().phase {
            Phase::Fresh => Some(self.accepted),
            Phase::Head { since, .. } | Phase::Idle { since } => Some(since),
            Phase::Busy => None,
        }
    }

    /// Bytes arrived: the header of a request has begun, unless one is in flight.
    fn read(&self) {
        let limits_header = self.limits.header;
        let mut state = self.lock();
        let now = Instant::now();
        match state.phase {
            Phase::Fresh => {
                let deadline = self.accepted + limits_header;
                state.phase = Phase::Head { since: self.accepted, deadline };
                // Later than the first-byte deadline: the watchdog re-arms when that passes.
            }
            Phase::Idle { .. } => {
                let deadline = now + limits_header;
                state.phase = Phase::Head { since: now, deadline };
                self.nudge(&state, deadline);
            }
            Phase::Head { .. } | Phase::Busy => {}
        }
    }

    fn request_started(&self) {
        let mut state = self.lock();
        state.requests += 1;
        state.phase = Phase::Busy;
    }

    fn request_ended(&self) {
        let mut state = self.lock();
        state.requests = state.requests.saturating_sub(1);
        if state.requests == 0 {
            let now = Instant::now();
            state.phase = Phase::Idle { since: now };
            self.nudge(&state, now + self.limits.idle);
        }
    }

    fn body_started(&self) -> u64 {
        let timeout = self.limits.body;
        let mut state = self.lock();
        state.next_body += 1;
        let id = state.next_body;
        let deadline = Instant::now() + timeout;
        state.bodies.push((id, deadline));
        self.nudge(&state, deadline);
        id
    }

    fn body_ended(&self, id: u64) {
        self.lock().bodies.retain(|(body, _)| *body != id);
    }
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

/// Marks a request in flight on its connection until dropped (with the response body).
#[derive(Debug)]
struct RequestGuard(Arc<Conn>);

impl RequestGuard {
    fn new(conn: Arc<Conn>) -> Self {
        conn.request_started();
        RequestGuard(conn)
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// A response body that keeps its request in flight until it is written (or dropped).
struct GuardedBody {
    body: Body,
    _guard: RequestGuard,
}

impl hyper::body::Body for GuardedBody {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body under its deadline: registered with the watchdog until it ends, fails or
/// is dropped.
struct TrackedBody {
    body: Incoming,
    conn: Arc<Conn>,
    /// The watchdog's ID of this body while it is arriving.
    arriving: Option<u64>,
}

impl TrackedBody {
    fn new(body: Incoming, conn: Arc<Conn>) -> Self {
        let arriving = (!hyper::body::Body::is_end_stream(&body)).then(|| conn.body_started());
        TrackedBody { body, conn, arriving }
    }

    fn finish(&mut self) {
        if let Some(id) = self.arriving.take() {
            self.conn.body_ended(id);
        }
    }
}

impl hyper::body::Body for TrackedBody {
    type Data = <Incoming as hyper::body::Body>::Data;
    type Error = <Incoming as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = ready!(Pin::new(&mut self.body).poll_frame(cx));
        if !matches!(frame, Some(Ok(_))) || self.body.is_end_stream() {
            self.finish();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The socket of an HTTP connection: tells the watchdog about every read, and writes
/// idmint's JSON error in place of the bare error answers hyper writes on its own.
struct Tracked {
    stream: TcpStream,
    conn: Arc<Conn>,
    server: Arc<Server>,
    /// A replacement answer still to be written, and how much of it is.
    out: Vec<u8>,
    written: usize,
}

impl Tracked {
    fn new(stream: TcpStream, conn: Arc<Conn>, server: Arc<Server>) -> Self {
        Tracked { stream, conn, server, out: Vec::new(), written: 0 }
    }

    /// Writes what is left of a replacement answer.
    fn poll_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &self.out[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// The status of an answer hyper writes on its own, if `buf` is one: an HTTP/1 head of
    /// status 400, 414 or 431 without a `content-type` (every answer of idmint's has one).
    fn stack_answer(buf: &[u8]) -> Option<u16> {
        let status = buf.strip_prefix(b"HTTP/1.")?.get(2..5)?;
        let status = std::str::from_utf8(status).ok()?.parse::<u16>().ok()?;
        if ![400, 414, 431].contains(&status) {
            return None;
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
        let typed = buf[..end].to_ascii_lowercase().windows(14).any(|w| w == b"\ncontent-type:");
        (!typed).then_some(status)
    }
}

/// idmint's JSON error as a whole HTTP/1.1 response that closes the connection.
fn error_response(error: &Error) -> Vec<u8> {
    let body = serde_json::to_string(&error.body()).unwrap_or_default();
    let status = error.status();
    let reason = axum::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error");
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.stream).poll_read(cx, buf))?;
        if buf.filled().len() > before {
            self.conn.read();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_out(cx))?;
        if let Some(status) = Tracked::stack_answer(buf) {
            let error = Error::from_http_stack(status, MAX_HEADER_BYTES);
            self.server.http_metrics().record(error.status());
            self.out = error_response(&error);
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_out(cx))?;
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_out(cx))?;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only hyper's own bare answers are replaced: never a response of idmint's, which always
    /// has a `content-type`, and never a success.
    #[test]
    fn only_the_bare_answers_of_hyper_are_replaced() {
        let check = |bytes: &[u8], want: Option<u16>| {
            assert_eq!(Tracked::stack_answer(bytes), want, "{}", String::from_utf8_lossy(bytes));
        };
        check(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n",
            Some(431),
        );
        check(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n", Some(400));
        check(b"HTTP/1.1 414 URI Too Long\r\n\r\n", Some(414));
        check(b"HTTP/1.0 400 Bad Request\r\n\r\n", Some(400));
        check(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}", None);
        check(b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n\r\n", None);
        check(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", None);
        check(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n", None);
        check(b"HTTP/1.1 431 partial head", None);
        check(b"\x00\x00\x12\x04", None);
    }

    #[test]
    fn max_connections_fits_the_open_files_limit() {
        let check = |configured, files, want| {
            assert_eq!(connection_cap(configured, files), want, "{configured} with {files:?}");
        };
        check(10_000, None, 10_000);
        check(10_000, Some(1_024), 960);
        check(500, Some(1_024), 500);
        check(10_000, Some(1_048_576), 10_000);
        check(10, Some(20), 1);
        // This process's own limit is read (Linux).
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }

    #[test]
    fn the_replacement_is_a_whole_json_answer_that_closes() {
        let text = String::from_utf8(error_response(&Error::from_http_stack(431, 16_384))).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
        assert!(head.contains("\r\nconnection: close") && head.contains("application/json"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "header_too_large");
    }
}
