//! `idmint-server`: the ID service as a library, HTTP and gRPC over idmint-engine's issuing
//! engine. [`Server::start`] starts an [`Engine`] (which claims a generator ID for every
//! namespace and stores its first window; [`Server::start_with`] also takes the stores of the
//! other [`Source`]s: segments, counters and Redis, in [`Backends`]); [`serve`] answers
//! HTTP on a bound listener until a shutdown token is cancelled, then shuts down in order. With the feature `grpc`,
//! `serve_grpc` answers gRPC (`idmint.v1.IdMint` and `grpc.health.v1.Health`) the same way,
//! and `serve_all` answers both over one server state, with one shutdown sequence.
//!
//! # Layout
//!
//! Below the whole crate is idmint-engine: the configuration ([`ServerConfig`],
//! [`NamespaceConfig`], [`Source`]), the backends ([`Backends`]), the clocks, the namespaces
//! and their issuers, and [`Engine`], whose `issue_into` is the one path of every request's
//! IDs; this crate re-exports its configuration and backends. The modules of this crate stand
//! in floors over it, each importing only from those below it (ARCHITECTURE.md lists them);
//! from the ground up:
//!
//! - `error` ([`Error`], the one place that maps errors, the engine's among them, to status
//!   codes, and the JSON error body), `metrics` (the APIs' atomic counters and latency
//!   histograms, rendered in the Prometheus text format) and `cors`;
//! - `server`: [`Server`], the engine with the APIs' metrics and the shutdown steps;
//! - `auth` (bearer tokens), `openapi` and `web` (the status page), over the server;
//! - `http`: the routes of the HTTP API (`/v1/...`, `/healthz`, `/readyz`, `/metrics`,
//!   `/openapi.json`);
//! - `listener`: [`serve`], `serve_grpc`, `serve_all` and [`bind`]: the one accept loop of
//!   both ports and the shutdown sequence (`accept`), the connection caps counted over both
//!   ports (`admission`), each connection's deadlines (`watchdog`) and its socket (`socket`);
//! - `grpc` (feature `grpc`): the gRPC services, on tonic, with their own metrics.
//!
//! # Shutdown order
//!
//! When the token is cancelled: report not ready, keep accepting and answering requests for
//! `shutdown_delay_ms` (so that a load balancer sees `/readyz` answer 503 before any
//! connection is refused), stop accepting connections, drain in-flight requests (up to
//! `drain_ms`), persist each namespace's mark, release its claim. The steps are recorded in
//! [`Server::shutdown_steps`]. With both APIs (`serve_all`), each step is taken for both
//! before the next begins: readiness (and gRPC health) turns off, both keep serving through
//! the one delay, both listeners are closed, then both drain within the one `drain_ms`, then
//! marks are persisted and claims released, once. gRPC streams end when the token is
//! cancelled, so they never hold up the drain.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use idmint_coord::MemoryCoordinator;
//! use idmint_core::SystemClock;
//! use idmint_server::{Server, ServerConfig, ShutdownStep};
//! use tokio_util::sync::CancellationToken;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let server = Server::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! let shutdown = CancellationToken::new();
//! let task = tokio::spawn(idmint_server::serve(Arc::clone(&server), listener, shutdown.clone()));
//! assert!(server.is_ready());
//! shutdown.cancel();
//! task.await.unwrap()?;
//! assert_eq!(server.shutdown_steps().last(), Some(&ShutdownStep::Released));
//! # Ok::<(), idmint_server::Error>(())
//! # }).unwrap();
//! ```

mod auth;
mod cors;
mod error;
#[cfg(feature = "grpc")]
mod grpc;
mod http;
mod listener;
mod metrics;
mod openapi;
mod server;
mod web;

pub use crate::listener::{bind, bind_with_backlog, serve};
#[cfg(feature = "grpc")]
pub use crate::listener::{serve_all, serve_grpc};
pub use crate::{
    error::Error,
    openapi::OPENAPI,
    server::{Server, ShutdownStep},
};
pub use idmint_engine::{
    Backends, DEFAULT_LISTEN_BACKLOG, DEFAULT_MAX_CONNECTIONS_PER_IP, Engine, FieldSetting,
    NamespaceConfig, OffsetClock, PublicIdsSettings, SegmentSettings, ServerConfig, ShardKeys,
    Source, WallClock, load_public_id_keys, resident_bytes,
};

/// Entry points for the fuzz targets (`fuzz/` at the repository root): the parsers of the
/// HTTP API's outside input. Not part of the API: no stability promise.
#[doc(hidden)]
pub mod fuzzing {
    /// Parses a query string as the ID routes do (`count`, `format`, `numbers`, `shard_key`,
    /// each at most once, nothing else), with `max_batch` 100,000.
    ///
    /// # Errors
    ///
    /// [`crate::Error::BadRequest`] for anything the routes refuse.
    pub fn parse_query(query: &str) -> Result<(), crate::Error> {
        let allowed = ["count", "format", "numbers", "shard_key"];
        crate::http::Params::parse(Some(query), &allowed, 100_000).map(drop)
    }

    /// Parses the body of `POST /v1/batch`.
    ///
    /// # Errors
    ///
    /// [`crate::Error::BadRequest`] for anything but the object the schema declares.
    pub fn parse_batch_body(body: &[u8]) -> Result<(), crate::Error> {
        crate::http::BatchBody::from_slice(body).map(drop)
    }

    /// Validates a configuration as `Server::start` does (the fuzz target reads it from TOML).
    ///
    /// # Errors
    ///
    /// [`crate::Error::Config`] for an invalid configuration.
    pub fn validate_config(config: idmint_engine::ServerConfig) -> Result<(), crate::Error> {
        config.validated().map(drop).map_err(crate::Error::from)
    }
}
