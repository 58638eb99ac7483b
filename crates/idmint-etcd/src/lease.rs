//! Leases (the keep-alive stream: [`LeaseKeeper`] and [`LeaseKeepAliveStream`]), the lock
//! service's [`LockOptions`], and the accessors of the lease, cluster, maintenance and lock
//! answers.

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::{
    Error,
    proto::{
        etcdserverpb::{
            LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
            LeaseTimeToLiveResponse, Member, MemberListResponse, ResponseHeader, StatusResponse,
            lease_client::LeaseClient,
        },
        v3lockpb::LockResponse,
    },
};

/// Keep-alives queued on one stream before `keep_alive` waits: idmint sends one and waits for
/// its answer.
const QUEUED: usize = 16;

/// Sends keep-alives of one lease on its stream ([`Client::lease_keep_alive`]); dropping it
/// ends the stream.
///
/// [`Client::lease_keep_alive`]: crate::Client::lease_keep_alive
///
/// # Example
///
/// ```no_run
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
/// let lease = client.lease_grant(10).await?;
/// let (mut keeper, mut answers) = client.lease_keep_alive(lease.id()).await?;
/// assert_eq!(keeper.id(), lease.id());
/// keeper.keep_alive().await?;
/// let ttl = answers.message().await?.map(|a| a.ttl());
/// # let _ = ttl;
/// # Ok::<(), idmint_etcd::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct LeaseKeeper {
    id: i64,
    sender: mpsc::Sender<LeaseKeepAliveRequest>,
}

impl LeaseKeeper {
    /// The lease kept.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Sends one keep-alive; its answer arrives on the [`LeaseKeepAliveStream`].
    ///
    /// # Errors
    ///
    /// [`Error::KeepAlive`] when the stream has ended.
    pub async fn keep_alive(&mut self) -> Result<(), Error> {
        self.sender
            .send(LeaseKeepAliveRequest { id: self.id })
            .await
            .map_err(|_| Error::KeepAlive("the keep-alive stream is closed".into()))
    }
}

/// The answers of one lease's keep-alives, in the order they were sent.
///
/// # Example
///
/// ```no_run
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let mut client = idmint_etcd::Client::connect(["http://127.0.0.1:2379"], None).await?;
/// let (mut keeper, mut answers) = client.lease_keep_alive(7).await?;
/// keeper.keep_alive().await?;
/// match answers.message().await? {
///     Some(answer) if answer.ttl() > 0 => println!("alive for {} s", answer.ttl()),
///     Some(_) => println!("gone"),
///     None => println!("the stream ended"),
/// }
/// # Ok::<(), idmint_etcd::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct LeaseKeepAliveStream {
    stream: Streaming<LeaseKeepAliveResponse>,
}

impl LeaseKeepAliveStream {
    /// The next answer (a TTL of 0 says the lease is gone), or `None` when the stream ended.
    ///
    /// # Errors
    ///
    /// [`Error::Status`] when the stream fails.
    pub async fn message(&mut self) -> Result<Option<LeaseKeepAliveResponse>, Error> {
        Ok(self.stream.message().await?)
    }
}

/// Opens a keep-alive stream, sends the first keep-alive and reads its answer.
pub(crate) async fn open<T>(
    client: &mut LeaseClient<T>,
    id: i64,
) -> Result<(LeaseKeeper, LeaseKeepAliveStream), Error>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: tonic::codegen::Body<Data = tonic::codegen::Bytes> + Send + 'static,
    <T::ResponseBody as tonic::codegen::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let (sender, receiver) = mpsc::channel(QUEUED);
    sender
        .send(LeaseKeepAliveRequest { id })
        .await
        .map_err(|_| Error::KeepAlive("the keep-alive stream is closed".into()))?;
    let mut stream = client.lease_keep_alive(ReceiverStream::new(receiver)).await?.into_inner();
    match stream.message().await? {
        Some(first) if first.ttl <= 0 => Err(Error::LeaseNotFound(id)),
        Some(_) => Ok((LeaseKeeper { id, sender }, LeaseKeepAliveStream { stream })),
        None => Err(Error::KeepAlive("the stream ended before the first answer".into())),
    }
}

/// Options of [`Client::lock`](crate::Client::lock).
///
/// # Example
///
/// ```
/// let options = idmint_etcd::LockOptions::new().with_lease(7);
/// assert_eq!(options.lease(), 7);
/// ```
#[derive(Debug, Clone, Default)]
pub struct LockOptions {
    lease: i64,
}

impl LockOptions {
    /// A lock on no lease.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_etcd::LockOptions::new().lease(), 0);
    /// ```
    pub fn new() -> Self {
        LockOptions::default()
    }

    /// The lock lives on lease `id`: it is released when the lease ends.
    ///
    /// # Example
    ///
    /// ```
    /// let options = idmint_etcd::LockOptions::new().with_lease(7);
    /// # let _ = options;
    /// ```
    pub fn with_lease(mut self, id: i64) -> Self {
        self.lease = id;
        self
    }

    /// The lease the lock lives on, 0 for none.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_etcd::LockOptions::new().with_lease(9).lease(), 9);
    /// ```
    pub fn lease(&self) -> i64 {
        self.lease
    }
}

impl LeaseGrantResponse {
    /// The lease granted.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The TTL granted, in seconds (etcd raises one below its minimum).
    pub fn ttl(&self) -> i64 {
        self.ttl
    }

    /// etcd's error text, empty when the lease was granted.
    pub fn error(&self) -> &str {
        &self.error
    }
}

impl LeaseKeepAliveResponse {
    /// The lease's TTL again, in seconds; 0 or less when the lease is gone.
    pub fn ttl(&self) -> i64 {
        self.ttl
    }
}

impl LeaseTimeToLiveResponse {
    /// The seconds left, −1 when the lease no longer exists.
    pub fn ttl(&self) -> i64 {
        self.ttl
    }

    /// The TTL the lease was granted, in seconds.
    pub fn granted_ttl(&self) -> i64 {
        self.granted_ttl
    }
}

impl MemberListResponse {
    /// The answering member's header.
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.header.as_ref()
    }

    /// The cluster's members.
    pub fn members(&self) -> &[Member] {
        &self.members
    }
}

impl Member {
    /// The member's ID.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The URLs clients reach it at (empty until it has started).
    pub fn client_urls(&self) -> &[String] {
        &self.client_ur_ls
    }

    /// Whether it is a learner (it serves no client requests).
    pub fn is_learner(&self) -> bool {
        self.is_learner
    }
}

impl StatusResponse {
    /// The answering member's header (its member and cluster IDs).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.header.as_ref()
    }

    /// The member ID of the cluster's leader, as the answering member knows it (0: none).
    pub fn leader(&self) -> u64 {
        self.leader
    }
}

impl LockResponse {
    /// The lock's ownership key, for [`Client::unlock`](crate::Client::unlock).
    pub fn key(&self) -> &[u8] {
        &self.key
    }
}
