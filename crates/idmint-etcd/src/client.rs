//! [`Client`]: a tonic channel balanced over the given endpoints, the generated clients of the
//! services idmint calls on it, and the calls themselves; [`ConnectOptions`] for its timeouts,
//! HTTP/2 keep-alive pings and etcd's `hasleader` requirement.

use std::time::Duration;

use tonic::{
    Request, Status,
    metadata::MetadataValue,
    service::{Interceptor, interceptor::InterceptedService},
    transport::{Channel, Endpoint},
};

use crate::{
    DeleteOptions, Error, GetOptions, PutOptions, Txn,
    lease::{LeaseKeepAliveStream, LeaseKeeper, LockOptions},
    proto::{
        etcdserverpb::{
            DeleteRangeResponse, LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest,
            LeaseRevokeResponse, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
            MemberListRequest, MemberListResponse, PutRequest, PutResponse, RangeResponse,
            StatusRequest, StatusResponse, TxnResponse, cluster_client::ClusterClient,
            kv_client::KvClient, lease_client::LeaseClient, maintenance_client::MaintenanceClient,
        },
        v3lockpb::{
            LockRequest, LockResponse, UnlockRequest, UnlockResponse, lock_client::LockClient,
        },
    },
};

/// The metadata key by which etcd refuses a request on a member without a leader at once
/// (`Unavailable`, "no leader") instead of holding it: etcd's `rpctypes.MetadataRequireLeaderKey`.
const REQUIRE_LEADER_KEY: &str = "hasleader";

/// How a [`Client`] connects. Nothing is set by default: no timeouts (beyond etcd's), no
/// HTTP/2 pings, no leader requirement.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_etcd::ConnectOptions;
///
/// let options = ConnectOptions::new()
///     .with_connect_timeout(Duration::from_secs(5))
///     .with_timeout(Duration::from_secs(5))
///     .with_keep_alive(Duration::from_secs(1), Duration::from_secs(5))
///     .with_require_leader(true);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
    keep_alive: Option<(Duration, Duration)>,
    require_leader: bool,
}

impl ConnectOptions {
    /// No option set.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::ConnectOptions::new();
    /// # let _ = options;
    /// ```
    pub fn new() -> Self {
        ConnectOptions::default()
    }

    /// How long dialling one endpoint may take.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::ConnectOptions::new()
    ///     .with_connect_timeout(std::time::Duration::from_secs(2));
    /// # let _ = options;
    /// ```
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// How long each request may take (tonic's per-request timeout; a keep-alive stream is
    /// one request).
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::ConnectOptions::new()
    ///     .with_timeout(std::time::Duration::from_secs(5));
    /// # let _ = options;
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// HTTP/2 pings every `interval`, also while idle, and a connection given up when one
    /// goes unanswered for `timeout`: a dead member is noticed even while a keep-alive stream
    /// waits.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let options = idmint_etcd::ConnectOptions::new()
    ///     .with_keep_alive(Duration::from_secs(1), Duration::from_secs(5));
    /// # let _ = options;
    /// ```
    pub fn with_keep_alive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.keep_alive = Some((interval, timeout));
        self
    }

    /// Sends etcd's `hasleader` metadata: a member without a leader refuses a request at once
    /// (`Unavailable`) instead of holding it until an election ends.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::ConnectOptions::new().with_require_leader(true);
    /// # let _ = options;
    /// ```
    pub fn with_require_leader(mut self, require: bool) -> Self {
        self.require_leader = require;
        self
    }

    /// The tonic endpoint of one URL (`http://host:port`, or `host:port`).
    fn endpoint(&self, url: &str) -> Result<Endpoint, Error> {
        let url = url.trim();
        if url.starts_with("https://") {
            return Err(Error::InvalidArgs(format!(
                "`{url}`: https endpoints need TLS, which idmint-etcd does not build"
            )));
        }
        let full = if url.contains("://") { url.to_owned() } else { format!("http://{url}") };
        let mut endpoint = Endpoint::from_shared(full)
            .map_err(|e| Error::InvalidArgs(format!("`{url}` is not an endpoint URL: {e}")))?;
        if let Some((interval, timeout)) = self.keep_alive {
            endpoint = endpoint
                .keep_alive_while_idle(true)
                .http2_keep_alive_interval(interval)
                .keep_alive_timeout(timeout);
        }
        if let Some(timeout) = self.timeout {
            endpoint = endpoint.timeout(timeout);
        }
        if let Some(timeout) = self.connect_timeout {
            endpoint = endpoint.connect_timeout(timeout);
        }
        Ok(endpoint)
    }
}

/// Adds the metadata every request carries.
#[derive(Debug, Clone, Copy)]
struct Headers {
    require_leader: bool,
}

impl Interceptor for Headers {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if self.require_leader {
            request.metadata_mut().insert(REQUIRE_LEADER_KEY, MetadataValue::from_static("true"));
        }
        Ok(request)
    }
}

type Service = InterceptedService<Channel, Headers>;

/// A client of one etcd cluster: one channel, balanced over the endpoints it was given, and
/// dialled lazily. Cheap to clone (clones share the channel); calls take `&mut self`, as
/// tonic's clients do.
///
/// # Example
///
/// ```no_run
/// use idmint_etcd::{Client, GetOptions};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let mut client = Client::connect(["http://127.0.0.1:2379"], None).await?;
/// client.put("app/a", "1", None).await?;
/// let found = client.get("app/", Some(GetOptions::new().with_prefix())).await?;
/// assert_eq!(found.kvs()[0].value(), b"1");
/// # Ok::<(), idmint_etcd::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    kv: KvClient<Service>,
    lease: LeaseClient<Service>,
    cluster: ClusterClient<Service>,
    maintenance: MaintenanceClient<Service>,
    lock: LockClient<Service>,
}

impl Client {
    /// A client balanced over `endpoints` (client URLs: `http://host:port` or `host:port`).
    /// Nothing is dialled yet (the first request does), so only a malformed or `https://`
    /// endpoint, or none, fails here. Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgs`].
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let client = idmint_etcd::Client::connect(["127.0.0.1:2379", "127.0.0.1:22379"], None).await;
    /// assert!(client.is_ok());
    /// let none: [&str; 0] = [];
    /// assert!(idmint_etcd::Client::connect(none, None).await.is_err());
    /// # });
    /// ```
    pub async fn connect<E: AsRef<str>, S: AsRef<[E]>>(
        endpoints: S,
        options: Option<ConnectOptions>,
    ) -> Result<Client, Error> {
        let options = options.unwrap_or_default();
        let endpoints = endpoints
            .as_ref()
            .iter()
            .map(|e| options.endpoint(e.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err(Error::InvalidArgs("no etcd endpoint".into()));
        }
        let channel = Channel::balance_list(endpoints.into_iter());
        let service =
            InterceptedService::new(channel, Headers { require_leader: options.require_leader });
        Ok(Client {
            kv: KvClient::new(service.clone()),
            lease: LeaseClient::new(service.clone()),
            cluster: ClusterClient::new(service.clone()),
            maintenance: MaintenanceClient::new(service.clone()),
            lock: LockClient::new(service),
        })
    }

    /// Reads `key`, or with [`GetOptions::with_prefix`] every key under it (a linearizable
    /// read).
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let found = client.get("app/a", None).await?;
    /// println!("{:?}", found.kvs().first().map(|kv| kv.value()));
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn get(
        &mut self,
        key: impl Into<Vec<u8>>,
        options: Option<GetOptions>,
    ) -> Result<RangeResponse, Error> {
        let request = options.unwrap_or_default().request(key.into());
        Ok(self.kv.range(request).await?.into_inner())
    }

    /// Writes `value` at `key`, with [`PutOptions::with_lease`] on a lease.
    ///
    /// # Errors
    ///
    /// [`Error::Status`] (`NotFound` for a lease that does not exist).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// client.put("app/a", "1", None).await?;
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn put(
        &mut self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: Option<PutOptions>,
    ) -> Result<PutResponse, Error> {
        let request: PutRequest = options.unwrap_or_default().request(key.into(), value.into());
        Ok(self.kv.put(request).await?.into_inner())
    }

    /// Deletes `key`, or with [`DeleteOptions::with_prefix`] every key under it.
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_etcd::DeleteOptions;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let gone = client.delete("test/", Some(DeleteOptions::new().with_prefix())).await?;
    /// println!("{} keys deleted", gone.deleted);
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn delete(
        &mut self,
        key: impl Into<Vec<u8>>,
        options: Option<DeleteOptions>,
    ) -> Result<DeleteRangeResponse, Error> {
        let request = options.unwrap_or_default().request(key.into());
        Ok(self.kv.delete_range(request).await?.into_inner())
    }

    /// Runs a transaction: its compares, then its success or failure operations.
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_etcd::{Compare, CompareOp, Txn, TxnOp};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let txn = Txn::new()
    ///     .when([Compare::version("app/a", CompareOp::Equal, 0)])
    ///     .and_then([TxnOp::put("app/a", "first", None)]);
    /// println!("{}", client.txn(txn).await?.succeeded());
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn txn(&mut self, txn: Txn) -> Result<TxnResponse, Error> {
        Ok(self.kv.txn(txn.into_request()).await?.into_inner())
    }

    /// Grants a lease of `ttl` seconds, its ID chosen by etcd (which raises a TTL below its
    /// minimum; the granted one is in the answer).
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let lease = client.lease_grant(10).await?;
    /// println!("lease {:x} for {} s", lease.id(), lease.ttl());
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease_grant(&mut self, ttl: i64) -> Result<LeaseGrantResponse, Error> {
        let request = LeaseGrantRequest { ttl, id: 0 };
        Ok(self.lease.lease_grant(request).await?.into_inner())
    }

    /// Revokes a lease: every key on it is deleted.
    ///
    /// # Errors
    ///
    /// [`Error::Status`] (`NotFound`, "requested lease not found", for a lease that is gone).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let lease = client.lease_grant(10).await?;
    /// client.lease_revoke(lease.id()).await?;
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease_revoke(&mut self, id: i64) -> Result<LeaseRevokeResponse, Error> {
        Ok(self.lease.lease_revoke(LeaseRevokeRequest { id }).await?.into_inner())
    }

    /// A lease's time to live: the seconds left (−1 when it no longer exists) and its granted
    /// TTL.
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let ttl = client.lease_time_to_live(0x694d_7b5a_0d1c_2a07).await?;
    /// println!("{} of {} s left", ttl.ttl(), ttl.granted_ttl());
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease_time_to_live(&mut self, id: i64) -> Result<LeaseTimeToLiveResponse, Error> {
        let request = LeaseTimeToLiveRequest { id, keys: false };
        Ok(self.lease.lease_time_to_live(request).await?.into_inner())
    }

    /// Opens a keep-alive stream for lease `id` on one member, sends the first keep-alive and
    /// reads its answer: the [`LeaseKeeper`] sends the next ones, the
    /// [`LeaseKeepAliveStream`] reads their answers, in order.
    ///
    /// # Errors
    ///
    /// [`Error::LeaseNotFound`] when etcd answers that the lease is gone (a TTL of 0),
    /// [`Error::KeepAlive`] when the stream ends before answering, [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let lease = client.lease_grant(10).await?;
    /// let (mut keeper, mut answers) = client.lease_keep_alive(lease.id()).await?;
    /// keeper.keep_alive().await?;
    /// if let Some(answer) = answers.message().await? {
    ///     println!("{} s again", answer.ttl());
    /// }
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease_keep_alive(
        &mut self,
        id: i64,
    ) -> Result<(LeaseKeeper, LeaseKeepAliveStream), Error> {
        crate::lease::open(&mut self.lease, id).await
    }

    /// The members of the cluster, as the answering member knows them.
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// for member in client.member_list().await?.members() {
    ///     println!("{:x}: {:?}", member.id(), member.client_urls());
    /// }
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn member_list(&mut self) -> Result<MemberListResponse, Error> {
        let request = MemberListRequest {};
        Ok(self.cluster.member_list(request).await?.into_inner())
    }

    /// The status of the member that answers (its ID and cluster ID are in the header).
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let status = client.status().await?;
    /// println!("member {:x}", status.header().map_or(0, |h| h.member_id()));
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn status(&mut self) -> Result<StatusResponse, Error> {
        Ok(self.maintenance.status(StatusRequest {}).await?.into_inner())
    }

    /// Takes etcd's lock `name` (its lock service), waiting while another holds it; with
    /// [`LockOptions::with_lease`] the lock lives on that lease. The answer's key is the lock's
    /// ownership key, for [`unlock`](Client::unlock).
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_etcd::LockOptions;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let lease = client.lease_grant(5).await?;
    /// let locked = client.lock("app/lock", Some(LockOptions::new().with_lease(lease.id()))).await?;
    /// client.unlock(locked.key()).await?;
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lock(
        &mut self,
        name: impl Into<Vec<u8>>,
        options: Option<LockOptions>,
    ) -> Result<LockResponse, Error> {
        let lease = options.map_or(0, |o| o.lease());
        let request = LockRequest { name: name.into(), lease };
        Ok(self.lock.lock(request).await?.into_inner())
    }

    /// Releases a lock by its ownership key (the key [`lock`](Client::lock) answered).
    ///
    /// # Errors
    ///
    /// [`Error::Status`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
    /// let locked = client.lock("app/lock", None).await?;
    /// client.unlock(locked.key()).await?;
    /// # Ok::<(), idmint_etcd::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn unlock(&mut self, key: impl Into<Vec<u8>>) -> Result<UnlockResponse, Error> {
        Ok(self.lock.unlock(UnlockRequest { key: key.into() }).await?.into_inner())
    }
}
