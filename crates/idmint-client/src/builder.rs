//! [`ClientBuilder`]: the client's settings, checked once, and the start of a [`Client`] with
//! its refill task.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio_util::sync::CancellationToken;

use crate::{
    buffer::Buffer,
    client::Client,
    error::{Error, ErrorKind},
    fetch::{Route, Shared},
    refill::refill,
    retry::{Jitter, Policy},
    transport::{Endpoint, Transport},
};

/// The largest batch an idmint server answers by default (its `max_batch`), and Hazelcast's
/// largest prefetch.
const DEFAULT_MAX_BATCH: usize = 100_000;

/// The most refills a client keeps in flight at once ([`ClientBuilder::pipeline`]).
pub const MAX_PIPELINE: usize = 8;

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
        let shared = Arc::new(Shared {
            route: Mutex::new(Route::new(endpoints.len(), Jitter::seeded())),
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
        Ok(Client::new(shared, stop))
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
}
