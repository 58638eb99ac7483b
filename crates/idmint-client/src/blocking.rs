//! A synchronous facade (mini-redis's `blocking_client` pattern): the async [`crate::Client`]
//! plus a tokio runtime of its own. Not for use inside async code: it blocks the thread, and
//! dropping it there panics (tokio does not allow dropping a runtime in async context).
//!
//! The runtime has one worker thread rather than mini-redis's current-thread runtime, so the
//! refill task keeps fetching ahead while the caller's thread takes IDs from memory; with a
//! current-thread runtime it would only run inside a blocking call, and every batch would be
//! waited for.

use std::time::Duration;

use idmint_core::AnyId;

use crate::{
    builder::ClientBuilder,
    error::{Error, ErrorKind},
};

/// A client for synchronous code. Build one with [`ClientBuilder::build_blocking`].
///
/// # Example
///
/// ```
/// # let runtime = tokio::runtime::Runtime::new()?;
/// # let url = runtime.block_on(async {
/// #     let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
/// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// #     let url = format!("http://{}", listener.local_addr()?);
/// #     tokio::spawn(idmint_server::serve(server, listener, Default::default()));
/// #     Ok::<_, Box<dyn std::error::Error>>(url)
/// # })?;
/// let client = idmint_client::Client::builder().endpoint(&url).build_blocking()?;
/// let id = client.next()?;
/// let ids = client.batch(500)?;
/// assert!(!ids.contains(&id));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Client {
    // Dropped first: its refill task is stopped before the runtime goes.
    inner: crate::client::Client,
    runtime: tokio::runtime::Runtime,
}

impl ClientBuilder {
    /// Builds a [`blocking::Client`](Client), which runs the client on a runtime of its own.
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
    pub fn build_blocking(self) -> Result<Client, Error> {
        Client::new(self)
    }
}

impl Client {
    pub(crate) fn new(builder: ClientBuilder) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("idmint-client")
            .enable_all()
            .build()
            .map_err(|e| ErrorKind::Config(format!("cannot start the client's runtime: {e}")))?;
        let inner = builder.build_on(runtime.handle())?;
        Ok(Client { inner, runtime })
    }

    /// The next ID: from memory when the buffer holds one, else after the next batch arrives.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::next`].
    ///
    /// # Example
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # let url = runtime.block_on(async {
    /// #     let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let url = format!("http://{}", listener.local_addr()?);
    /// #     tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// #     Ok::<_, Box<dyn std::error::Error>>(url)
    /// # })?;
    /// # let client = idmint_client::Client::builder().endpoint(&url).build_blocking()?;
    /// let id = client.next()?;
    /// # let _ = id;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn next(&self) -> Result<AnyId, Error> {
        match self.inner.try_next() {
            Some(id) => Ok(id),
            None => self.runtime.block_on(self.inner.next()),
        }
    }

    /// The next ID as a layout type; see [`crate::Client::next_as`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::next_as`].
    ///
    /// # Example
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # let url = runtime.block_on(async {
    /// #     let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let url = format!("http://{}", listener.local_addr()?);
    /// #     tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// #     Ok::<_, Box<dyn std::error::Error>>(url)
    /// # })?;
    /// # let client = idmint_client::Client::builder().endpoint(&url).build_blocking()?;
    /// let id: idmint_core::Snowflake = client.next_as()?;
    /// # let _ = id;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_as<T>(&self) -> Result<T, Error>
    where
        T: TryFrom<AnyId, Error = idmint_core::Error>,
    {
        self.runtime.block_on(self.inner.next_as())
    }

    /// `n` IDs in one request, bypassing the buffer (at most `max_batch`).
    ///
    /// # Errors
    ///
    /// As [`crate::Client::batch`].
    ///
    /// # Example
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # let url = runtime.block_on(async {
    /// #     let server = idmint_server::Server::start(Default::default(), std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let url = format!("http://{}", listener.local_addr()?);
    /// #     tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// #     Ok::<_, Box<dyn std::error::Error>>(url)
    /// # })?;
    /// # let client = idmint_client::Client::builder().endpoint(&url).build_blocking()?;
    /// assert_eq!(client.batch(100)?.len(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn batch(&self, n: usize) -> Result<Vec<AnyId>, Error> {
        self.runtime.block_on(self.inner.batch(n))
    }

    /// One ID of a `hot-guid` namespace with `shard_key` in it; see
    /// [`crate::Client::next_with_shard_key`].
    ///
    /// # Errors
    ///
    /// As [`crate::Client::next_with_shard_key`].
    ///
    /// # Example
    ///
    /// ```
    /// # let runtime = tokio::runtime::Runtime::new()?;
    /// # let url = runtime.block_on(async {
    /// #     let config = idmint_server::ServerConfig { namespaces: vec![idmint_server::NamespaceConfig { layout: "hot-guid".into(), ..idmint_server::NamespaceConfig::named("guid") }], ..Default::default() };
    /// #     let server = idmint_server::Server::start(config, std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
    /// #     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// #     let url = format!("http://{}", listener.local_addr()?);
    /// #     tokio::spawn(idmint_server::serve(server, listener, Default::default()));
    /// #     Ok::<_, Box<dyn std::error::Error>>(url)
    /// # })?;
    /// # let client = idmint_client::Client::builder().endpoint(&url).namespace("guid").build_blocking()?;
    /// let id = idmint_core::HotGuid::try_from(client.next_with_shard_key(42)?)?;
    /// assert_eq!(id.shard_key(), 42);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_with_shard_key(&self, shard_key: u32) -> Result<AnyId, Error> {
        self.runtime.block_on(self.inner.next_with_shard_key(shard_key))
    }

    /// How many IDs the prefetch buffer holds now.
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
    pub fn buffered(&self) -> usize {
        self.inner.buffered()
    }

    /// Closes the client (see [`crate::Client::close`]) and shuts its runtime down, waiting
    /// at most a second for its connection tasks.
    ///
    /// # Example
    ///
    /// ```
    /// let client = idmint_client::Client::builder()
    ///     .endpoint("http://127.0.0.1:8080")
    ///     .build_blocking()?;
    /// client.close();
    /// # Ok::<(), idmint_client::Error>(())
    /// ```
    pub fn close(self) {
        let Client { inner, runtime } = self;
        runtime.block_on(inner.close());
        drop(inner);
        runtime.shutdown_timeout(Duration::from_secs(1));
    }
}
