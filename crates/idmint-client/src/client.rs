//! [`Client`]: the IDs a program asks for, from the prefetch buffer or in a batch, and
//! [`Next`], the future of one ID that costs no allocation when the buffer holds it.

use std::sync::Arc;

use idmint_core::AnyId;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::{
    error::{Error, ErrorKind},
    fetch::Shared,
};

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

impl Client {
    /// A client over `shared`, whose refill task stops when `stop` is cancelled: when the last
    /// clone is dropped.
    pub(crate) fn new(shared: Arc<Shared>, stop: CancellationToken) -> Self {
        Client { shared, _stop: Arc::new(stop.drop_guard()) }
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
    /// them. Asks for at most [`max_batch`](crate::ClientBuilder::max_batch) IDs: for more, call
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
        let fetched = self.shared.fetch(n.min(self.shared.max_batch), false, None).await?;
        Ok(fetched.ids.into_vec())
    }

    /// One ID of a `hot-guid` namespace with `shard_key` in it (HotGuid's
    /// `NewGuid(shardKey)`): one request (`batch?count=1&shard_key=K`), bypassing the prefetch
    /// buffer, whose IDs carry the namespace's own key. The server refuses a key outside the
    /// namespace's `shard_keys` and any key for another layout.
    ///
    /// # Errors
    ///
    /// As [`next`](Self::next); [`ErrorKind::Rejected`] (400 `bad_request`) for a key the
    /// namespace does not take.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::HotGuid;
    /// use idmint_server::{NamespaceConfig, ServerConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = ServerConfig {
    ///     namespaces: vec![NamespaceConfig { layout: "hot-guid".into(), ..NamespaceConfig::named("guid") }],
    ///     ..ServerConfig::default()
    /// };
    /// # let server = idmint_server::Server::start(config, std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// let client = idmint_client::Client::builder().endpoint(&url).namespace("guid").build()?;
    /// let id = HotGuid::try_from(client.next_with_shard_key(1023).await?)?;
    /// assert_eq!(id.shard_key(), 1023);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next_with_shard_key(&self, shard_key: u32) -> Result<AnyId, Error> {
        let mut ids = self.batch_with_shard_key(1, shard_key).await?.into_iter();
        ids.next().ok_or_else(|| ErrorKind::Closed.into())
    }

    /// `n` IDs of a `hot-guid` namespace with `shard_key` in each, in one request, as
    /// [`batch`](Self::batch) (at most [`max_batch`](crate::ClientBuilder::max_batch)).
    ///
    /// # Errors
    ///
    /// As [`next_with_shard_key`](Self::next_with_shard_key).
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
    /// // The default namespace is snowflake: its ids carry no shard key.
    /// let err = client.batch_with_shard_key(10, 7).await.unwrap_err();
    /// assert_eq!(err.code(), Some("bad_request"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn batch_with_shard_key(
        &self,
        n: usize,
        shard_key: u32,
    ) -> Result<Vec<AnyId>, Error> {
        if self.shared.buffer.is_closed() {
            return Err(ErrorKind::Closed.into());
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        let count = n.min(self.shared.max_batch);
        let fetched = self.shared.fetch(count, false, Some(shard_key)).await?;
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
