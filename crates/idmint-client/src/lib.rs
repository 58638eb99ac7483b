//! `idmint-client`: IDs from a set of idmint servers, with failover, safe retries and a
//! prefetch buffer that makes [`Client::next`] a memory operation almost every time.
//!
//! # In fifteen lines: an ID now, decoded, and IDs from servers
//!
//! ```
//! use idmint_core::{Layout, Snowflake};
//! use idmint_runtime::SnowflakeGenerator;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}", listener.local_addr()?);
//! # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
//! // An ID now, in this process (datacenter 0, worker 1).
//! let local = SnowflakeGenerator::system(0, 1)?.next()?;
//! // Decoded: its fields and when it was made.
//! let layout: Layout = "snowflake".parse()?;
//! let fields = layout.decode(local.into())?;
//! println!("{local}: {fields:?}, made at {} ms", local.timestamp_ms());
//! // IDs from a fleet of `idmint serve`s, with failover and a prefetch buffer.
//! let client = idmint_client::Client::builder().endpoints([&url]).build()?;
//! let remote: Snowflake = client.next_as().await?;
//! assert_ne!(remote, local); // different workers
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Quick start
//!
//! ```
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let server = idmint_server::Server::start(idmint_server::ServerConfig { namespaces: vec![idmint_server::NamespaceConfig { token: Some("s3cret".into()), ..idmint_server::NamespaceConfig::named("orders") }], ..Default::default() }, std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let url = format!("http://{}", listener.local_addr()?);
//! # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
//! let client = idmint_client::Client::builder()
//!     .endpoints([&url]) // several: round-robin with failover
//!     .namespace("orders")
//!     .token("s3cret")
//!     .timeout(Duration::from_millis(500))
//!     .prefetch(1000, 250)
//!     .build()?;
//! let id = client.next().await?; // usually from memory
//! let many = client.batch(10_000).await?; // one request, bypassing the buffer
//! client.close().await;
//! # assert!(many.iter().all(|other| *other != id));
//! # Ok(())
//! # }
//! ```
//!
//! Without an async runtime, [`ClientBuilder::build_blocking`] gives a
//! [`blocking::Client`] with the same methods.
//!
//! # How requests are sent
//!
//! - **Round-robin with failover.** Each request goes to the next endpoint in turn. A failure
//!   that is safe to retry (no connection, a broken connection, no answer within the
//!   [timeout](ClientBuilder::timeout), or a 502, 503 or 504) ejects that endpoint for a while
//!   (1 s, doubling per failure, at most 30 s) and the request moves on to the next one after
//!   a small jittered backoff (5 ms doubling, at most 250 ms), for up to
//!   [`attempts`](ClientBuilder::attempts) attempts (5 by default). When every endpoint is
//!   ejected, the one that recovers first is tried. A `Retry-After` from the server is
//!   honoured, up to [`max_retry_after`](ClientBuilder::max_retry_after) (2 s).
//! - **Never retried:** every 4xx and any other 5xx. The error is [`ErrorKind::Rejected`], with
//!   the server's error code and message.
//! - **No ID twice.** Retrying can only lose IDs (a server that issued a batch whose answer
//!   was lost leaves a gap), never repeat one: each batch is handed out once, index by index.
//! - **Checked.** A batch must be strictly increasing (or, for layouts without a numeric order
//!   such as `lable` and `trace-id`, hold no ID twice), and the prefetched batches of one
//!   endpoint must keep increasing while it holds the same generator ID; otherwise the batch
//!   is dropped and the call fails with [`ErrorKind::NotMonotonic`]. Endpoints that describe the
//!   namespace with different layouts fail with [`ErrorKind::LayoutMismatch`].
//!
//! # Prefetching
//!
//! Hazelcast's Flake ID client is the model. The client holds a batch (by default 100 IDs, at
//! most 100,000); when it falls to the low-water mark a background task fetches the next
//! batch (one fetch in flight at a time, or up to [`pipeline`](ClientBuilder::pipeline)), and
//! `next()` waits only when every batch is used up. With several fetches in flight their
//! batches may interleave; IDs are then handed out only once no fetch in flight can bring a
//! lower one, merged in order, so `next()` stays increasing.
//! Buffered IDs are lost when the client is closed or dropped: a gap, never a repeat.
//!
//! # IDs
//!
//! IDs are [`AnyId`]: 64-bit for most layouts, 128-bit for `hot-guid`. The client reads each
//! endpoint's `GET /v1/namespaces` once to learn the width, then asks for decimal text, which
//! holds either. A batch is stored as plain `u64`s (or `u128`s), so the hot path only wraps
//! one in an `AnyId`, and [`Error`] is one pointer wide so that `Result<AnyId, Error>` stays
//! small: together that keeps a buffered `next()` near 10 ns.
//!
//! # Layout
//!
//! - `endpoints`: the endpoint set, round-robin and ejection (pure state).
//! - `retry`: what is retried, backoff, and the next endpoint (pure functions).
//! - `order`: which layouts grow per generator, and the checks of a batch (pure functions).
//! - `transport`: the HTTP calls (hyper, HTTP/1.1 keep-alive, no TLS).
//! - `buffer`: the prefetch buffer; `next()`'s fast path.
//! - `sequencer`: which IDs of refills in flight together are final, merged in order (pure).
//! - [`blocking`]: the same client for synchronous code.
//! - `error`: [`Error`].

mod buffer;
mod endpoints;
mod error;
mod order;
mod retry;
mod sequencer;
mod transport;

#[cfg(feature = "blocking")]
pub mod blocking;

use std::{
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

pub use idmint_core::AnyId;
use idmint_proto::NamespaceInfo;
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::{CancellationToken, DropGuard};

pub use crate::error::{Error, ErrorKind};
use crate::{
    buffer::Buffer,
    endpoints::Endpoints,
    order::Order,
    retry::{Decision, Failure, Jitter, Policy},
    sequencer::{Arrival, Sequencer},
    transport::{CallError, Endpoint, Transport},
};

/// The largest batch an idmint server answers by default (its `max_batch`), and Hazelcast's
/// largest prefetch.
const DEFAULT_MAX_BATCH: usize = 100_000;

/// The most refills a client keeps in flight at once ([`ClientBuilder::pipeline`]).
pub const MAX_PIPELINE: usize = 8;

/// A client of a set of idmint servers, for one namespace.
///
/// Cheap to clone: clones share the endpoints, connections and prefetch buffer. The
/// background refill task stops when the last clone is dropped or [`close`](Self::close) is
/// called.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
/// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let url = format!("http://{}", listener.local_addr()?);
/// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
/// let client = idmint_client::Client::builder().endpoint(&url).build()?;
/// let id = client.next().await?;
/// assert_eq!(id.bits(), 64);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
    /// Stops the refill task when the last clone goes.
    _stop: Arc<DropGuard>,
}

/// Settings for a [`Client`]; see [`Client::builder`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), idmint_client::Error> {
/// let client = idmint_client::Client::builder()
///     .endpoint("http://127.0.0.1:8080")
///     .endpoints(["http://127.0.0.1:8081", "http://127.0.0.1:8082"])
///     .namespace("default")
///     .attempts(5)
///     .timeout(Duration::from_millis(200))
///     .prefetch(1000, 500)
///     .build()?;
/// assert_eq!(client.namespace(), "default");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    endpoints: Vec<String>,
    namespace: String,
    token: Option<String>,
    root_certificates: Vec<String>,
    policy: Policy,
    batch_size: usize,
    low_water: usize,
    pipeline: usize,
    max_batch: usize,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            endpoints: Vec::new(),
            namespace: idmint_proto::DEFAULT_NAMESPACE.to_owned(),
            token: None,
            root_certificates: Vec::new(),
            policy: Policy::default(),
            batch_size: 100,
            low_water: 50,
            pipeline: 1,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

impl ClientBuilder {
    /// Adds an endpoint: `http://host:port`, optionally with a path prefix
    /// (`http://host/idmint`), or `https://` with the `rustls` feature (without it, `https://`
    /// is refused at [`build`](Self::build)).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().endpoint("http://127.0.0.1:8080");
    /// # let _ = builder;
    /// ```
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoints.push(url.into());
        self
    }

    /// Trusts the certificates of a PEM text (a private CA) for `https://` endpoints, besides
    /// the system's roots. Needs the `rustls` feature: without it [`build`](Self::build)
    /// refuses the setting.
    ///
    /// # Example
    ///
    /// ```
    /// let pem = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
    /// let builder = idmint_client::Client::builder()
    ///     .endpoint("https://ids.internal:8443")
    ///     .root_certificate_pem(pem);
    /// # let _ = builder;
    /// ```
    pub fn root_certificate_pem(mut self, pem: impl Into<String>) -> Self {
        self.root_certificates.push(pem.into());
        self
    }

    /// Adds several endpoints, in the order they are tried.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder()
    ///     .endpoints(["http://10.0.0.1:8080", "http://10.0.0.2:8080"]);
    /// # let _ = builder;
    /// ```
    pub fn endpoints<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.endpoints.extend(urls.into_iter().map(Into::into));
        self
    }

    /// The namespace to take IDs from. Default: `default`.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().namespace("orders");
    /// # let _ = builder;
    /// ```
    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.namespace = name.into();
        self
    }

    /// The bearer token the namespace needs, if it needs one. Default: none.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().token("s3cret");
    /// # let _ = builder;
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// How many attempts a request gets in all, the first included (1 means no retry).
    /// Default: 5.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().attempts(3);
    /// # let _ = builder;
    /// ```
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.policy.attempts = attempts;
        self
    }

    /// How long one attempt may take, from connecting to the last byte of the answer; then
    /// the next endpoint is tried. Default: 2 s.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = idmint_client::Client::builder().timeout(Duration::from_millis(200));
    /// # let _ = builder;
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.policy.timeout = timeout;
        self
    }

    /// The backoff between attempts: `base` after the first, doubling up to `max`, half of it
    /// random. Default: 5 ms to 250 ms.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = idmint_client::Client::builder()
    ///     .backoff(Duration::from_millis(1), Duration::from_millis(50));
    /// # let _ = builder;
    /// ```
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.policy.backoff_base = base;
        self.policy.backoff_max = max;
        self
    }

    /// The longest pause a server's `Retry-After` can impose before the client asks it again.
    /// Default: 2 s.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = idmint_client::Client::builder().max_retry_after(Duration::from_secs(1));
    /// # let _ = builder;
    /// ```
    pub fn max_retry_after(mut self, max: Duration) -> Self {
        self.policy.ejection.max_retry_after = max;
        self
    }

    /// How long a failed endpoint is skipped: `base` after a failure, doubling per further
    /// failure up to `max`, until it answers again. Default: 1 s to 30 s.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let builder = idmint_client::Client::builder()
    ///     .eject(Duration::from_millis(500), Duration::from_secs(10));
    /// # let _ = builder;
    /// ```
    pub fn eject(mut self, base: Duration, max: Duration) -> Self {
        self.policy.ejection.base = base;
        self.policy.ejection.max = max;
        self
    }

    /// The prefetch buffer: fetch `batch_size` IDs at a time, and start fetching the next
    /// batch when `low_water` IDs are left (0: only when none is left). Default: 100 and 50.
    /// `batch_size` must be 1 to [`max_batch`](Self::max_batch), `low_water` below it.
    ///
    /// For the highest sustained rate, set `low_water` to `batch_size - 1`: the next batch is
    /// then fetched as soon as a batch is taken into use, at the cost of holding up to two
    /// batches (a gap when the client stops); with [`pipeline`](Self::pipeline) 2 the server
    /// also has the next request before it finishes a batch. BENCHMARKS.md measures both.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().prefetch(10_000, 2_500);
    /// # let _ = builder;
    /// ```
    pub fn prefetch(mut self, batch_size: usize, low_water: usize) -> Self {
        self.batch_size = batch_size;
        self.low_water = low_water;
        self
    }

    /// How many refills may be in flight at once: 1 (the default) to
    /// [`MAX_PIPELINE`]. With 1, the server has nothing to do from the moment it answers a
    /// refill until the next one reaches it (the answer's transfer, the client's checks, the
    /// next request), and a client that takes IDs faster than the server makes them loses that
    /// time on every batch. With 2, the next request already waits at the server.
    ///
    /// The server serves requests in flight at once tick by tick, so their batches can
    /// interleave. `next()` still hands out increasing IDs (for layouts that increase): an ID
    /// is handed out once no request in flight can bring a lower one, and the batches are
    /// merged in order (see DESIGN.md). The cost: the first `next()` waits for the first
    /// `pipeline` batches, and the client holds up to `pipeline + 2` batches (a gap when it
    /// stops).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().prefetch(100_000, 99_999).pipeline(2);
    /// # let _ = builder;
    /// ```
    pub fn pipeline(mut self, depth: usize) -> Self {
        self.pipeline = depth;
        self
    }

    /// The largest batch one request asks for: the servers' `max_batch`. Default: 100,000
    /// (the server's default).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().max_batch(10_000);
    /// # let _ = builder;
    /// ```
    pub fn max_batch(mut self, max_batch: usize) -> Self {
        self.max_batch = max_batch;
        self
    }

    /// Checks the settings and starts the client's refill task on the current tokio runtime.
    /// Nothing is sent until IDs are asked for.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for invalid settings (no endpoint, `https://`, a bad namespace name,
    /// zero attempts or timeout, a prefetch outside `1..=max_batch`); [`ErrorKind::NoRuntime`]
    /// outside a tokio runtime.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let err = idmint_client::Client::builder().build().unwrap_err();
    /// assert_eq!(err.to_string(), "invalid client configuration: no endpoint given");
    /// # }
    /// ```
    pub fn build(self) -> Result<Client, Error> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| ErrorKind::NoRuntime)?;
        self.build_on(&handle)
    }

    /// Builds a [`blocking::Client`], which runs the client on a runtime of its own.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build), and [`ErrorKind::Config`] when the runtime cannot start.
    ///
    /// # Example
    ///
    /// ```
    /// let client = idmint_client::Client::builder()
    ///     .endpoint("http://127.0.0.1:8080")
    ///     .build_blocking()?;
    /// assert_eq!(client.buffered(), 0);
    /// # Ok::<(), idmint_client::Error>(())
    /// ```
    #[cfg(feature = "blocking")]
    pub fn build_blocking(self) -> Result<blocking::Client, Error> {
        blocking::Client::new(self)
    }

    /// Builds the client with its refill task on `handle`'s runtime.
    pub(crate) fn build_on(self, handle: &tokio::runtime::Handle) -> Result<Client, Error> {
        let bad = |msg: String| Err(ErrorKind::Config(msg).into());
        if self.endpoints.is_empty() {
            return bad("no endpoint given".into());
        }
        let name = &self.namespace;
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !valid {
            return bad(format!(
                "namespace `{name}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`"
            ));
        }
        if self.policy.attempts == 0 {
            return bad("attempts must be at least 1".into());
        }
        if self.policy.timeout.is_zero() {
            return bad("the timeout must be above zero".into());
        }
        if self.max_batch == 0 {
            return bad("max_batch must be at least 1".into());
        }
        if !(1..=self.max_batch).contains(&self.batch_size) {
            return bad(format!(
                "the prefetch batch size must be 1 to {} (max_batch), not {}",
                self.max_batch, self.batch_size
            ));
        }
        if !(1..=MAX_PIPELINE).contains(&self.pipeline) {
            return bad(format!(
                "the pipeline depth must be 1 to {MAX_PIPELINE}, not {}",
                self.pipeline
            ));
        }
        if self.low_water >= self.batch_size {
            return bad(format!(
                "the low-water mark ({}) must be below the batch size ({})",
                self.low_water, self.batch_size
            ));
        }
        let endpoints = self
            .endpoints
            .iter()
            .map(|url| Endpoint::parse(url, name))
            .collect::<Result<Vec<_>, _>>()?;
        let transport =
            Transport::new(self.token.as_deref(), self.policy.timeout, &self.root_certificates)?;
        let mut jitter = Jitter::seeded();
        // Clients start at different endpoints, so they do not all load the first one.
        let start = usize::try_from(jitter.next() % endpoints.len() as u64).unwrap_or(0);
        let shared = Arc::new(Shared {
            route: Mutex::new(Route {
                endpoints: Endpoints::new(endpoints.len(), start),
                known: vec![Known::default(); endpoints.len()],
                fingerprint: None,
                jitter,
            }),
            endpoints,
            transport,
            policy: self.policy,
            namespace: self.namespace,
            batch_size: self.batch_size,
            pipeline: self.pipeline,
            max_batch: self.max_batch,
            buffer: Buffer::new(self.low_water),
            task: Mutex::new(None),
        });
        let stop = CancellationToken::new();
        let task = handle.spawn(refill(Arc::clone(&shared), stop.clone()));
        *shared.lock_task() = Some(task);
        Ok(Client { shared, _stop: Arc::new(stop.drop_guard()) })
    }
}

impl Client {
    /// Settings for a new client; see [`ClientBuilder`].
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint_client::Client::builder().endpoint("http://127.0.0.1:8080");
    /// # let _ = builder;
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The next ID: from the prefetch buffer when it holds one (no lock, no waiting), else
    /// after the next batch arrives.
    ///
    /// # Errors
    ///
    /// The error of the fetch this call waited for ([`ErrorKind::Unavailable`] when every
    /// attempt failed, [`ErrorKind::Rejected`], [`ErrorKind::NotMonotonic`], ...); the next
    /// call tries again. [`ErrorKind::Closed`] after [`close`](Self::close).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// # let client = idmint_client::Client::builder().endpoint(&url).build()?;
    /// let a = client.next().await?;
    /// let b = client.next().await?;
    /// assert_ne!(a, b);
    /// # Ok(())
    /// # }
    /// ```
    #[inline]
    pub fn next(&self) -> Next<'_> {
        Next { client: self, slow: None }
    }

    /// The next ID as a layout type, e.g. `client.next_as::<Snowflake>()`: [`next`](Self::next)
    /// converted with `TryFrom<AnyId>`, so an ID of another layout is refused, never
    /// misread.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next), and [`ErrorKind::WrongType`] when the namespace's IDs are not
    /// `T`s (that ID is a gap).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{HotGuid, Snowflake};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// # let client = idmint_client::Client::builder().endpoint(&url).build()?;
    /// let id: Snowflake = client.next_as().await?;
    /// assert_eq!(id.into_parts().worker, 0);
    /// assert!(client.next_as::<HotGuid>().await.is_err()); // a 64-bit namespace
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next_as<T>(&self) -> Result<T, Error>
    where
        T: TryFrom<AnyId, Error = idmint_core::Error>,
    {
        let id = self.next().await?;
        T::try_from(id).map_err(|e| {
            ErrorKind::WrongType {
                id,
                target: std::any::type_name::<T>().rsplit("::").next().unwrap_or("id"),
                reason: e.to_string(),
            }
            .into()
        })
    }

    /// The next ID if one is buffered, without waiting (the fast path of `next`).
    #[cfg(feature = "blocking")]
    #[inline]
    pub(crate) fn try_next(&self) -> Option<AnyId> {
        self.shared.buffer.take()
    }

    /// `n` IDs in one request, bypassing the prefetch buffer, in the order the server issued
    /// them. Asks for at most [`max_batch`](ClientBuilder::max_batch) IDs: for more, call
    /// again. Returns fewer than asked only then, or when a server answers with fewer.
    /// `n = 0` sends nothing.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next).
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// # let client = idmint_client::Client::builder().endpoint(&url).build()?;
    /// let ids = client.batch(1000).await?;
    /// assert_eq!(ids.len(), 1000);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn batch(&self, n: usize) -> Result<Vec<AnyId>, Error> {
        if self.shared.buffer.is_closed() {
            return Err(ErrorKind::Closed.into());
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let fetched = self.shared.fetch(n.min(self.shared.max_batch), false).await?;
        Ok(fetched.ids.into_vec())
    }

    /// How many IDs the prefetch buffer holds now.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// # let client = idmint_client::Client::builder().endpoint(&url).build()?;
    /// client.next().await?;
    /// assert!(client.buffered() < 100);
    /// # Ok(())
    /// # }
    /// ```
    pub fn buffered(&self) -> usize {
        self.shared.buffer.buffered()
    }

    /// The namespace this client takes IDs from.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), idmint_client::Error> {
    /// let client = idmint_client::Client::builder().endpoint("http://127.0.0.1:1").build()?;
    /// assert_eq!(client.namespace(), "default");
    /// # Ok(())
    /// # }
    /// ```
    pub fn namespace(&self) -> &str {
        &self.shared.namespace
    }

    /// Closes the client: stops the refill task (the fetches in flight are abandoned, which at
    /// most leaves a gap), drops the buffered IDs, and waits for the task to end. Later calls
    /// on this client and its clones fail with [`ErrorKind::Closed`]; closing again does nothing.
    ///
    /// # Example
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), idmint_client::Error> {
    /// let client = idmint_client::Client::builder().endpoint("http://127.0.0.1:1").build()?;
    /// client.close().await;
    /// assert_eq!(client.next().await.unwrap_err().kind(), &idmint_client::ErrorKind::Closed);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn close(&self) {
        self.shared.buffer.close();
        let task = self.shared.lock_task().take();
        if let Some(task) = task {
            task.abort();
            // Cancelled (or already finished): either way the task is gone.
            let _ = task.await;
        }
    }
}

/// The future of [`Client::next`]: ready at the first poll when the buffer holds an ID,
/// with no allocation; otherwise it waits for the next batch.
///
/// Dropping it before it is ready loses nothing: an ID is taken only when it is returned.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), idmint_client::Error> {
/// let client = idmint_client::Client::builder().endpoint("http://127.0.0.1:1").build()?;
/// let next: idmint_client::Next<'_> = client.next();
/// drop(next); // nothing sent, nothing lost
/// # Ok(())
/// # }
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Next<'a> {
    client: &'a Client,
    slow: Option<Waiting<'a>>,
}

/// The slow path of [`Next`]: waiting for a batch.
type Waiting<'a> = std::pin::Pin<Box<dyn Future<Output = Result<AnyId, Error>> + Send + 'a>>;

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next").field("waiting", &self.slow.is_some()).finish()
    }
}

impl Future for Next<'_> {
    type Output = Result<AnyId, Error>;

    #[inline(always)]
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        if self.slow.is_none() {
            if let Some(id) = self.client.shared.buffer.take() {
                return std::task::Poll::Ready(Ok(id));
            }
            let buffer = &self.client.shared.buffer;
            self.slow = Some(Box::pin(buffer.next_slow()));
        }
        match &mut self.slow {
            Some(slow) => slow.as_mut().poll(cx),
            None => unreachable!("set above"),
        }
    }
}

/// What the clients of one builder share.
#[derive(Debug)]
struct Shared {
    endpoints: Vec<Endpoint>,
    transport: Transport,
    policy: Policy,
    /// Endpoint health and what each endpoint said: only between requests, never held across
    /// an await.
    route: Mutex<Route>,
    namespace: String,
    batch_size: usize,
    /// Refills in flight at most.
    pipeline: usize,
    max_batch: usize,
    buffer: Buffer,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// Routing state, behind one lock.
#[derive(Debug)]
struct Route {
    endpoints: Endpoints,
    known: Vec<Known>,
    /// The layout fingerprint of the first endpoint that described the namespace.
    fingerprint: Option<String>,
    jitter: Jitter,
}

/// What the client knows about the namespace at one endpoint.
#[derive(Debug, Clone, Default)]
struct Known {
    /// From `GET /v1/namespaces`, once.
    layout: Option<LayoutAt>,
    /// The largest ID of the prefetched batches from this endpoint.
    last: Option<AnyId>,
}

/// The parts of a [`NamespaceInfo`] the client uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayoutAt {
    id_bits: u32,
    order: Order,
    generator_id: Option<u64>,
}

impl Shared {
    fn route(&self) -> MutexGuard<'_, Route> {
        self.route.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock_task(&self) -> MutexGuard<'_, Option<JoinHandle<()>>> {
        self.task.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fetches `count` IDs with retries and failover (see the crate docs). `prefetch` marks
    /// the refill task's requests, whose batches are also checked against the endpoint's
    /// earlier ones.
    async fn fetch(&self, count: usize, prefetch: bool) -> Result<Arrival, Error> {
        let decision = retry::first(&mut self.route().endpoints, Instant::now());
        let mut attempt = 1;
        let Decision::Retry { mut endpoint, mut wait } = decision else {
            unreachable!("the first attempt is always made")
        };
        loop {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let timeout = self.policy.timeout;
            let result = match tokio::time::timeout(
                timeout,
                self.attempt(endpoint, count, prefetch),
            )
            .await
            {
                Ok(result) => result,
                Err(_) => Err(CallError::Retry(Failure::Timeout(timeout))),
            };
            let failure = match result {
                Ok(ids) => {
                    self.route().endpoints.succeeded(endpoint);
                    return Ok(ids);
                }
                Err(CallError::Fatal(error)) => {
                    if matches!(
                        error.kind(),
                        ErrorKind::NotMonotonic { .. } | ErrorKind::Protocol { .. }
                    ) {
                        // A server that misbehaves gets others' requests for a while.
                        let policy = &self.policy;
                        self.route().endpoints.failed(
                            endpoint,
                            Instant::now(),
                            None,
                            &policy.ejection,
                        );
                    }
                    return Err(error);
                }
                Err(CallError::Retry(failure)) => failure,
            };
            let decision = {
                let mut route = self.route();
                let random = route.jitter.next();
                retry::after_failure(
                    &self.policy,
                    &mut route.endpoints,
                    endpoint,
                    &failure,
                    attempt,
                    Instant::now(),
                    random,
                )
            };
            match decision {
                Decision::Retry { endpoint: next, wait: pause } => {
                    endpoint = next;
                    wait = pause;
                    attempt += 1;
                }
                Decision::GiveUp => {
                    let last = failure.describe(&self.endpoints[endpoint].base);
                    return Err(ErrorKind::Unavailable { attempts: attempt, last }.into());
                }
            }
        }
    }

    /// One attempt on one endpoint: learn the layout (once), fetch, check. A prefetched batch
    /// must start above every batch that had arrived from the endpoint when it was asked for
    /// (refills in flight at once may interleave; see `sequencer`).
    async fn attempt(
        &self,
        index: usize,
        count: usize,
        prefetch: bool,
    ) -> Result<Arrival, CallError> {
        let endpoint = &self.endpoints[index];
        let (cached, previous) = {
            let route = self.route();
            (route.known[index].layout.clone(), route.known[index].last)
        };
        let layout = match cached {
            Some(layout) => layout,
            None => self.learn_layout(index).await?,
        };
        let ids = self.transport.batch(endpoint, count, layout.id_bits).await?;
        let not_monotonic = |(previous, next)| -> Error {
            ErrorKind::NotMonotonic { endpoint: endpoint.base.clone(), previous, next }.into()
        };
        order::check_batch(&ids, layout.order).map_err(not_monotonic)?;
        let ordered = layout.order == Order::Increasing;
        let arrival = |ids| Ok(Arrival { endpoint: index, ids, ordered });
        if !prefetch || !ordered {
            return arrival(ids);
        }
        let (Some(first), Some(last)) = (ids.first(), ids.last()) else {
            return arrival(ids);
        };
        let mut another_generator = false;
        if let Some(previous) = previous.filter(|&p| first <= p) {
            // Lower than before: fine only if the server now holds another generator ID
            // (it restarted and claimed a different one), whose IDs start afresh.
            let now = self.learn_layout(index).await?;
            if now.generator_id == layout.generator_id {
                return Err(not_monotonic((previous, first)).into());
            }
            another_generator = true;
        }
        let known = &mut self.route().known[index];
        known.last = if another_generator { Some(last) } else { known.last.max(Some(last)) };
        arrival(ids)
    }

    /// Reads the namespace's description from an endpoint and remembers it.
    async fn learn_layout(&self, index: usize) -> Result<LayoutAt, CallError> {
        let endpoint = &self.endpoints[index];
        let info = self.transport.namespace_info(endpoint, &self.namespace).await?;
        let Some(info) = info else {
            // Not listed: let the server say so in its own words (404 unknown_namespace).
            self.transport.batch(endpoint, 1, 64).await?;
            let message = format!("namespace `{}` is not listed by /v1/namespaces", self.namespace);
            let error =
                Error::from(ErrorKind::Protocol { endpoint: endpoint.base.clone(), message });
            return Err(error.into());
        };
        let layout = self.check_layout(endpoint, &info)?;
        self.route().known[index].layout = Some(layout.clone());
        Ok(layout)
    }

    fn check_layout(&self, endpoint: &Endpoint, info: &NamespaceInfo) -> Result<LayoutAt, Error> {
        if info.id_bits != 64 && info.id_bits != 128 {
            return Err(ErrorKind::Protocol {
                endpoint: endpoint.base.clone(),
                message: format!("ids of {} bits are not supported", info.id_bits),
            }
            .into());
        }
        let mut route = self.route();
        match &route.fingerprint {
            Some(expected) if *expected != info.fingerprint => {
                return Err(ErrorKind::LayoutMismatch {
                    namespace: self.namespace.clone(),
                    endpoint: endpoint.base.clone(),
                    expected: expected.clone(),
                    found: info.fingerprint.clone(),
                }
                .into());
            }
            Some(_) => {}
            None => route.fingerprint = Some(info.fingerprint.clone()),
        }
        Ok(LayoutAt {
            id_bits: info.id_bits,
            order: order::order_of(info),
            generator_id: info.generator_id,
        })
    }
}

/// The refill task: when the buffer asks, it sends refills until `pipeline` are in flight;
/// as they come back, the sequencer says which IDs may be handed out, in order, and those are
/// delivered. Ends when `stop` is cancelled (the last client clone was dropped); the requests
/// in flight are then aborted.
async fn refill(shared: Arc<Shared>, stop: CancellationToken) {
    let mut sequencer = Sequencer::new(shared.endpoints.len());
    let mut fetches = tokio::task::JoinSet::new();
    let mut tickets = std::collections::HashMap::new();
    let mut wanted = std::pin::pin!(shared.buffer.wanted());
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = &mut wanted => wanted.set(shared.buffer.wanted()),
            Some(done) = fetches.join_next_with_id() => {
                let (id, result) = match done {
                    Ok((id, result)) => (id, result),
                    Err(failed) => {
                        let message = format!("a refill task ended: {failed}");
                        (failed.id(), Err(ErrorKind::Internal(message).into()))
                    }
                };
                let Some(ticket) = tickets.remove(&id) else { continue };
                let (arrival, error) = match result {
                    Ok(arrival) => (Some(arrival), None),
                    Err(error) => (None, Some(error)),
                };
                let released = sequencer.arrive(ticket, arrival);
                for ids in released.batches {
                    shared.buffer.deliver(Ok(ids));
                }
                if let Some((endpoint, id)) = released.repeated {
                    // Two batches of one endpoint held the same ID: handed out once, reported.
                    let endpoint = shared.endpoints[endpoint].base.clone();
                    let error = ErrorKind::NotMonotonic { endpoint, previous: id, next: id };
                    shared.buffer.deliver(Err(error.into()));
                }
                if let Some(error) = error {
                    shared.buffer.deliver(Err(error));
                }
            }
        }
        if shared.buffer.is_wanted() {
            // At most `pipeline` refills in flight, and no more than `pipeline + 1` batches'
            // worth waiting (fetched ahead, held back by the sequencer, or on their way).
            let limit = (shared.pipeline + 1) * shared.batch_size;
            let waiting = |s: &Sequencer| {
                shared.buffer.ahead() + s.held() + s.in_flight() * shared.batch_size
            };
            while sequencer.in_flight() < shared.pipeline && waiting(&sequencer) < limit {
                let ticket = sequencer.send();
                let shared = Arc::clone(&shared);
                let task =
                    fetches.spawn(async move { shared.fetch(shared.batch_size, true).await });
                tickets.insert(task.id(), ticket);
            }
        }
    }
    fetches.abort_all();
    shared.buffer.close();
}
