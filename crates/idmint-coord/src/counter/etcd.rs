//! [`EtcdCounters`] (feature `etcd`): persistent counters as etcd keys, each increment a
//! transaction that compares the key's mod revision (optimistic concurrency, as Tinyid's
//! version column). Knows nothing of claims or marks.

use std::{future::Future, time::Duration};

use etcd_client::{Client, Compare, CompareOp, ConnectOptions, Txn, TxnOp, TxnOpResponse};

use crate::{CounterStore, Error, counter::check_counter_request, segment::counter_after};

/// The backend name in errors and [`CounterStore::name`].
const BACKEND: &str = "etcd";
/// How often an increment is retried when other writers keep winning the compare.
const ATTEMPTS: usize = 64;

/// Settings of [`EtcdCounters`]. Build it with struct-update syntax from
/// [`EtcdCounterOptions::default`].
///
/// # Example
///
/// ```
/// use idmint_coord::EtcdCounterOptions;
///
/// let options = EtcdCounterOptions { prefix: "test/".into(), ..EtcdCounterOptions::default() };
/// assert_eq!(EtcdCounterOptions::default().prefix, "idmint/");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdCounterOptions {
    /// Counters live at `<prefix>counters/<name>`. Default `idmint/`, as `EtcdOptions`.
    pub prefix: String,
    /// How long one etcd request may take. Default 5 s.
    pub request_timeout: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for EtcdCounterOptions {
    fn default() -> Self {
        EtcdCounterOptions {
            prefix: "idmint/".into(),
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Persistent counters in etcd: the key `<prefix>counters/<name>` holds the value in decimal,
/// attached to no lease.
///
/// An increment is one transaction: *if the key's mod revision is still the one I read, put
/// value + 1, else read it again*; on a lost race it retries with what it read (up to 64
/// times). etcd transactions are linearizable and durable on a quorum before they return, so
/// a value is returned once only. A transaction whose answer was lost (a timeout) may have
/// counted: the value is skipped, never returned twice.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{CounterStore, EtcdCounterOptions, EtcdCounters};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
/// let counters = EtcdCounters::connect(&endpoints, EtcdCounterOptions::default()).await?;
/// let launch_id = counters.next("launch", 99_999).await?;
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct EtcdCounters {
    client: Client,
    options: EtcdCounterOptions,
}

impl std::fmt::Debug for EtcdCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCounters").field("options", &self.options).finish_non_exhaustive()
    }
}

impl EtcdCounters {
    /// Connects to the etcd cluster at `endpoints` (`http://host:port` or `host:port`) and
    /// checks that it answers.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for no endpoints or zero timeouts, [`Error::Unavailable`]
    /// when etcd cannot be reached within the connect timeout.
    pub async fn connect(endpoints: &[String], options: EtcdCounterOptions) -> Result<Self, Error> {
        if endpoints.is_empty() {
            return Err(Error::InvalidRequest("no etcd endpoints given".into()));
        }
        if options.request_timeout.is_zero() || options.connect_timeout.is_zero() {
            return Err(Error::InvalidRequest("etcd timeouts must not be zero".into()));
        }
        let connect = ConnectOptions::new()
            .with_connect_timeout(options.connect_timeout)
            .with_require_leader(true);
        let client = call("connect", options.connect_timeout, async {
            let mut client = Client::connect(endpoints, Some(connect)).await?;
            client.status().await?;
            Ok(client)
        })
        .await?;
        Ok(EtcdCounters { client, options })
    }

    fn key(&self, name: &str) -> String {
        format!("{}counters/{name}", self.options.prefix)
    }
}

#[async_trait::async_trait]
impl CounterStore for EtcdCounters {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
        check_counter_request(name, max)?;
        let key = self.key(name);
        // Start by assuming the key is absent (mod revision 0): a new counter then costs one
        // transaction; an existing one costs two, the first reading it.
        let (mut value, mut revision) = (0, 0);
        for _ in 0..ATTEMPTS {
            let next = counter_after(name, value, max)?;
            let txn = Txn::new()
                .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, revision)])
                .and_then([TxnOp::put(key.as_str(), next.to_string(), None)])
                .or_else([TxnOp::get(key.as_str(), None)]);
            let mut client = self.client.clone();
            let response = call("count", self.options.request_timeout, client.txn(txn)).await?;
            if response.succeeded() {
                return Ok(next);
            }
            let current = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(get) => {
                    Some(get.kvs().first().map(|kv| (kv.value().to_vec(), kv.mod_revision())))
                }
                _ => None,
            });
            (value, revision) = match current.flatten() {
                Some((bytes, mod_revision)) => (parse(&key, &bytes)?, mod_revision),
                None => (0, 0),
            };
        }
        Err(Error::Unavailable {
            backend: BACKEND,
            reason: format!("counter `{name}` changed under {ATTEMPTS} attempts in a row"),
        })
    }
}

fn parse(key: &str, bytes: &[u8]) -> Result<u64, Error> {
    std::str::from_utf8(bytes).ok().and_then(|text| text.parse().ok()).ok_or_else(|| {
        Error::Corrupt {
            path: format!("etcd key {key}"),
            reason: format!("not a counter value: {:?}", String::from_utf8_lossy(bytes)),
        }
    })
}

/// Runs one etcd request under a timeout, mapping its errors into [`Error::Unavailable`].
async fn call<T>(
    what: &str,
    timeout: Duration,
    request: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Error> {
    let unavailable = |reason: String| Error::Unavailable { backend: BACKEND, reason };
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(unavailable(format!("{what} failed: {e}"))),
        Err(_) => Err(unavailable(format!("{what} got no answer within {timeout:?}"))),
    }
}
