//! `idmint-engine`: idmint's issuing engine, with no HTTP or gRPC. [`Engine::start`] claims a
//! generator ID for every namespace and stores its first window ([`Engine::start_with`] also
//! takes the stores of the other [`Source`]s: segments, counters and Redis, in [`Backends`]);
//! [`Engine::issue_into`] is the one path by which IDs leave it; [`Engine::shutdown`] turns
//! readiness off, persists every namespace's mark and releases every claim, in that order.
//! `idmint-server` serves it over HTTP and gRPC; an application can call it in its own
//! process, from the same [`ServerConfig`] as `idmint serve`.
//!
//! # Layout
//!
//! The modules stand in floors, each importing only from those below it (ARCHITECTURE.md
//! lists them); from the ground up:
//!
//! - `error` ([`Error`], what went wrong, with no status codes), `metrics` (atomic counters
//!   rendered in the Prometheus text format), and the clocks (`ticker`, `clock`);
//! - `config` ([`ServerConfig`], [`NamespaceConfig`] and [`Source`], plain data validated at
//!   start), `clock_watch` (a thread that logs every step of the wall clock past
//!   [`ServerConfig::clock_step_warn_ms`]) and `backends` ([`Backends`]);
//! - `issuer` and `namespace`: a namespace's claim, generator, durable window and issuing, or
//!   the store it issues from; the batch-size rule;
//! - `quick_path` ([`QuickPath`]): one namespace's one-ID path, held;
//! - `engine`: [`Engine`], whose `issue_into` is the one path of every call's IDs.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use idmint_coord::MemoryCoordinator;
//! use idmint_core::SystemClock;
//! use idmint_engine::{Engine, ServerConfig};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
//! assert!(engine.is_ready());
//! let mut ids = Vec::new();
//! engine.issue_u64("default", 3, &mut ids).await?;
//! assert!(ids[0] < ids[1] && ids[1] < ids[2]);
//! engine.shutdown().await?;
//! # Ok::<(), idmint_engine::Error>(())
//! # }).unwrap();
//! ```

mod backends;
mod clock;
mod clock_watch;
mod config;
mod engine;
mod error;
mod issuer;
mod metrics;
mod namespace;
mod quick_path;
mod tally;
mod ticker;

pub use crate::{
    backends::Backends,
    clock::{Clocks, OffsetClock, WallClock},
    config::{
        DEFAULT_LISTEN_BACKLOG, DEFAULT_MAX_CONNECTIONS_PER_IP, FieldSetting, NamespaceConfig,
        PublicIdsSettings, SegmentSettings, ServerConfig, ShardKeys, Source,
    },
    engine::Engine,
    error::Error,
    issuer::{BeBytes, IdSink, Publish, Quick, count_error},
    metrics::{NamespaceCounters, NamespaceStatus, resident_bytes},
    namespace::{Namespace, load_public_id_keys},
    quick_path::QuickPath,
};
