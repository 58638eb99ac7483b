//! The watchdog of each connection: its deadlines (first byte, header, body, idle), the
//! state the service and the socket report to it (requests and bodies in flight, reads), and
//! the task that closes the connection when a deadline passes.

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, ready},
    time::Duration,
};

use axum::body::Body;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::{sync::Notify, time::Instant};
use tokio_util::sync::CancellationToken;

use idmint_engine::ServerConfig;

use crate::{Server, metrics::CloseReason};

/// The deadlines of HTTP connections, from [`ServerConfig`].
#[derive(Debug)]
pub(super) struct Deadlines {
    first_byte: Duration,
    header: Duration,
    body: Duration,
    idle: Duration,
}

impl Deadlines {
    pub(super) fn new(config: &ServerConfig) -> Self {
        Deadlines {
            first_byte: Duration::from_millis(config.first_byte_timeout_ms),
            header: Duration::from_millis(config.header_timeout_ms),
            body: Duration::from_millis(config.body_timeout_ms),
            idle: Duration::from_millis(config.idle_timeout_ms),
        }
    }
}

/// Serves one connection until it ends, its watchdog finds a deadline passed, or it is shed;
/// the caller then forgets it.
pub(super) async fn watch(
    server: &Server,
    conn: &Conn,
    served: impl Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
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
pub(super) struct Conn {
    pub(super) id: u64,
    pub(super) peer: SocketAddr,
    accepted: Instant,
    state: Mutex<State>,
    /// Woken when a deadline earlier than the armed one appears.
    changed: Notify,
    /// Cancelled when the connection is shed for a new one.
    pub(super) shed: CancellationToken,
    limits: Arc<Deadlines>,
}

impl Conn {
    pub(super) fn new(id: u64, peer: SocketAddr, limits: Arc<Deadlines>) -> Self {
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
        limits: &Deadlines,
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
    pub(super) fn idle_since(&self) -> Option<Instant> {
        match self.lock().phase {
            Phase::Fresh => Some(self.accepted),
            Phase::Head { since, .. } | Phase::Idle { since } => Some(since),
            Phase::Busy => None,
        }
    }

    /// Bytes arrived: the header of a request has begun, unless one is in flight.
    pub(super) fn read(&self) {
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

/// Marks a request in flight on its connection until dropped (with the response body).
#[derive(Debug)]
pub(super) struct RequestGuard(Arc<Conn>);

impl RequestGuard {
    pub(super) fn new(conn: Arc<Conn>) -> Self {
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
pub(super) struct GuardedBody {
    pub(super) body: Body,
    pub(super) _guard: RequestGuard,
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
pub(super) struct TrackedBody {
    body: Incoming,
    conn: Arc<Conn>,
    /// The watchdog's ID of this body while it is arriving.
    arriving: Option<u64>,
}

impl TrackedBody {
    pub(super) fn new(body: Incoming, conn: Arc<Conn>) -> Self {
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
