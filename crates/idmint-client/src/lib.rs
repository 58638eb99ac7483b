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
//! IDs are [`AnyId`]: 64-bit for most layouts, 128-bit for `hot-guid` and `uuid7` (feature `uuid`:
//! `uuid::Uuid` and `Uuid7` through [`Client::next_as`]). The client reads each
//! endpoint's `GET /v1/namespaces` once to learn the width, then asks for decimal text, which
//! holds either. A batch is stored as plain `u64`s (or `u128`s), so the hot path only wraps
//! one in an `AnyId`, and [`Error`] is one pointer wide so that `Result<AnyId, Error>` stays
//! small: together that keeps a buffered `next()` near 10 ns.
//!
//! # Layout
//!
//! From the top down; each module imports only those below it.
//!
//! - [`blocking`]: the same client for synchronous code.
//! - `builder`: [`ClientBuilder`], its checks, and the start of a client and its refill task.
//! - `client`: [`Client`] and [`Next`], what a program calls.
//! - `refill`: the refill task, keeping the buffer above its low-water mark.
//! - `fetch`: what the clients of one builder share, and a fetch with retries and failover.
//! - `transport`: the HTTP calls (hyper, HTTP/1.1 keep-alive, no TLS).
//! - `sequencer`: which IDs of refills in flight together are final, merged in order (pure).
//! - `order`: which layouts grow per generator, and the checks of a batch (pure functions).
//! - `retry`: what is retried, backoff, and the next endpoint (pure functions).
//! - `buffer`: the prefetch buffer; `next()`'s fast path.
//! - `endpoints`: the endpoint set, round-robin and ejection (pure state).
//! - `error`: [`Error`].

mod buffer;
mod builder;
mod client;
mod endpoints;
mod error;
mod fetch;
mod order;
mod refill;
mod retry;
mod sequencer;
mod transport;

#[cfg(feature = "blocking")]
pub mod blocking;

pub use idmint_core::AnyId;
/// The `uuid` crate (feature `uuid`), whose `Uuid` [`Client::next_as`] returns for a 128-bit
/// namespace, and which a `Uuid7` converts to and from.
///
/// A `uuid7` namespace hands out UUIDv7s as 16-byte binary batches; a TypeID is only how one
/// is written, so the client holds `Uuid7`s and writes them as the namespace does:
///
/// ```
/// use idmint_core::{TypePrefix, Uuid7};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let ns = idmint_server::NamespaceConfig { layout: "uuid7".into(), type_prefix: Some("user".into()), ..idmint_server::NamespaceConfig::named("users") };
/// # let server = idmint_server::Server::start(idmint_server::ServerConfig { namespaces: vec![ns], ..Default::default() }, std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()), std::sync::Arc::new(idmint_core::SystemClock)).await?;
/// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// # let url = format!("http://{}", listener.local_addr()?);
/// # tokio::spawn(idmint_server::serve(server, listener, Default::default()));
/// let client = idmint_client::Client::builder().endpoint(&url).namespace("users").build()?;
/// let id: Uuid7 = client.next_as().await?;
/// let uuid = idmint_client::uuid::Uuid::from(id); // for a `uuid` column
/// assert_eq!(uuid.get_version_num(), 7);
/// assert_eq!(Uuid7::try_from(uuid)?, id);
/// let typeid = id.to_typeid(&TypePrefix::new("user")?); // as the server writes it
/// assert_eq!(Uuid7::parse_typeid(&typeid, &TypePrefix::new("user")?)?, id);
/// let next: idmint_client::uuid::Uuid = client.next_as().await?;
/// assert!(next > uuid);
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "uuid")]
pub use uuid;

pub use crate::{
    builder::{ClientBuilder, MAX_PIPELINE},
    client::{Client, Next},
    error::{Error, ErrorKind},
};
