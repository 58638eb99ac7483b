//! [`EtcdStore`] (feature `etcd`): segments and persistent counters as etcd keys, each step a
//! transaction that compares the key's mod revision (compare-and-swap, as Tinyid's version
//! column), so that a fleet with only etcd serves `sequence` and `decimal-id` namespaces.
//! Knows nothing of claims or marks. Requests go through the same health-tracked members as
//! the coordinator's (`etcd::members`): a step whose attempt got no answer is repeated on
//! another member, and its compare makes the repeat safe.

use std::{ops::Range, sync::Arc, time::Duration};

use idmint_etcd::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use crate::{
    CounterStore, Error, SegmentStore,
    counter::{check_counter_request, check_take_request, taken_after},
    etcd::members::{Members, Timing},
    segment::{check_range_request, counter_after, range_after},
};

/// The backend name in errors and [`CounterStore::name`].
const BACKEND: &str = "etcd";
/// How often a step is retried when other writers keep winning the compare.
const ATTEMPTS: usize = 1_000;
/// Lost races retried at once with the value the losing transaction read; after that, each
/// retry first waits a random while and reads the key again.
const EAGER_ATTEMPTS: usize = 4;

/// Settings of [`EtcdStore`]. Build it with struct-update syntax from
/// [`EtcdStoreOptions::default`].
///
/// # Example
///
/// ```
/// use idmint_coord::EtcdStoreOptions;
///
/// let options = EtcdStoreOptions { prefix: "test/".into(), ..EtcdStoreOptions::default() };
/// assert_eq!(EtcdStoreOptions::default().prefix, "idmint/");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdStoreOptions {
    /// Counters live at `<prefix>counters/<name>`, segments at `<prefix>segments/<namespace>`.
    /// Default `idmint/`, as `EtcdOptions`.
    pub prefix: String,
    /// How long one etcd request may take, all its attempts on the members together. Default
    /// 5 s; an attempt moves to another member after 1/20 of it, as in `EtcdOptions`.
    pub request_timeout: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for EtcdStoreOptions {
    fn default() -> Self {
        EtcdStoreOptions {
            prefix: "idmint/".into(),
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Segments and persistent counters in etcd: the key `<prefix>counters/<name>` holds a
/// counter's value, `<prefix>segments/<namespace>` the last ID a namespace handed out, both in
/// decimal and attached to no lease.
///
/// A step (a counter's increment, or a segment's range) is one transaction: *if the key's mod
/// revision is still the one I read, put the new value, else read it again*; on a lost race it
/// retries with what it read, and after four lost races waits a random while (up to 3.2 ms,
/// growing) and reads the key afresh before each try, up to 1,000 tries. etcd transactions
/// are linearizable and durable on a quorum before they return, so a value or range is
/// returned once only. A transaction whose answer was lost (a timeout) may have counted: its
/// value or range is skipped, never returned twice. A restored etcd snapshot brings the keys back: see `idmint lease
/// adopt-cluster` for marks; segments and counters then need the same care as a Postgres
/// restore (RELIABILITY.md).
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{CounterStore, EtcdStoreOptions, EtcdStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
/// let counters = EtcdStore::connect(&endpoints, EtcdStoreOptions::default()).await?;
/// let launch_id = counters.next("launch", 99_999).await?;
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct EtcdStore {
    members: Arc<Members>,
    options: EtcdStoreOptions,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").field("options", &self.options).finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to the etcd cluster at `endpoints` (`http://host:port` or `host:port`) and
    /// checks that it answers.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for no endpoints or zero timeouts, [`Error::Unavailable`]
    /// when etcd cannot be reached within the connect timeout.
    pub async fn connect(endpoints: &[String], options: EtcdStoreOptions) -> Result<Self, Error> {
        if endpoints.is_empty() {
            return Err(Error::InvalidRequest("no etcd endpoints given".into()));
        }
        if options.request_timeout.is_zero() || options.connect_timeout.is_zero() {
            return Err(Error::InvalidRequest("etcd timeouts must not be zero".into()));
        }
        let timing = Timing::new(options.request_timeout, options.connect_timeout);
        let members = Members::connect(endpoints, timing).await?;
        Ok(EtcdStore { members, options })
    }

    /// Moves the decimal value at `key` one step with `step` (the value after the current one,
    /// 0 when the key is absent), by compare-and-swap; returns what `step` gave with it.
    async fn bump<T>(
        &self,
        key: &str,
        what: &str,
        step: impl Fn(u64) -> Result<(T, u64), Error>,
    ) -> Result<T, Error> {
        // Start by assuming the key is absent (mod revision 0): a new key then costs one
        // transaction; an existing one costs two, the first reading it.
        let (mut value, mut revision) = (0, 0);
        for attempt in 0..ATTEMPTS {
            if attempt >= EAGER_ATTEMPTS {
                // Lost several races: wait a random while, longer each time, then read the key
                // afresh, so that many writers on one key stop colliding (tight retries starved
                // one of ten processes for 64 rounds in a row; waiting on a value read before
                // the wait only makes it staler).
                tokio::time::sleep(backoff(attempt - EAGER_ATTEMPTS)).await;
                let read =
                    self.members.run(what, |mut c| async move { c.get(key, None).await }).await?;
                (value, revision) = match read.kvs().first() {
                    Some(kv) => (parse(key, kv.value())?, kv.mod_revision()),
                    None => (0, 0),
                };
            }
            let (answer, next) = step(value)?;
            let txn = Txn::new()
                .when([Compare::mod_revision(key, CompareOp::Equal, revision)])
                .and_then([TxnOp::put(key, next.to_string(), None)])
                .or_else([TxnOp::get(key, None)]);
            let response = self
                .members
                .run(what, |mut c| {
                    let txn = txn.clone();
                    async move { c.txn(txn).await }
                })
                .await?;
            if response.succeeded() {
                return Ok(answer);
            }
            let current = response.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(get) => {
                    Some(get.kvs().first().map(|kv| (kv.value().to_vec(), kv.mod_revision())))
                }
                _ => None,
            });
            (value, revision) = match current.flatten() {
                Some((bytes, mod_revision)) => (parse(key, &bytes)?, mod_revision),
                None => (0, 0),
            };
        }
        Err(Error::Unavailable {
            backend: BACKEND,
            reason: format!("{key} changed under {ATTEMPTS} attempts in a row"),
        })
    }
}

#[async_trait::async_trait]
impl CounterStore for EtcdStore {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
        check_counter_request(name, max)?;
        let key = format!("{}counters/{name}", self.options.prefix);
        self.bump(&key, "count", |value| counter_after(name, value, max).map(|n| (n, n))).await
    }

    async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error> {
        check_take_request(name, value, max)?;
        let key = format!("{}counters/{name}", self.options.prefix);
        self.bump(&key, "take a counter value", |current| {
            taken_after(name, current, value).map(|n| (n, n))
        })
        .await
    }
}

#[async_trait::async_trait]
impl SegmentStore for EtcdStore {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error> {
        check_range_request(namespace, step)?;
        let key = format!("{}segments/{namespace}", self.options.prefix);
        self.bump(&key, "fetch a segment", |max_id| range_after(namespace, max_id, step)).await
    }
}

/// A random wait in `0..100 µs · 2^min(attempt, 5)` (up to 3.2 ms).
fn backoff(attempt: usize) -> Duration {
    use std::hash::{BuildHasher, Hasher};

    // Each `RandomState` is seeded afresh: a cheap source of jitter, without a dependency.
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    let ceiling_us = 100_u64 << attempt.min(5);
    Duration::from_micros(random % ceiling_us)
}

fn parse(key: &str, bytes: &[u8]) -> Result<u64, Error> {
    std::str::from_utf8(bytes).ok().and_then(|text| text.parse().ok()).ok_or_else(|| {
        Error::Corrupt {
            path: format!("etcd key {key}"),
            reason: format!("not a decimal value: {:?}", String::from_utf8_lossy(bytes)),
        }
    })
}
