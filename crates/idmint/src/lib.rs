//! `idmint`: unique IDs in your own process. A [`Minter`] runs idmint's issuing engine
//! (no HTTP) on an embedded store: several processes may share one data directory, each
//! claiming its own generator ID; a restart, even after a crash, starts above the last stored
//! high-water mark; a forked child never issues from its parent's claim.
//!
//! ```
//! use idmint::{Minter, Snowflake};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let minter = Minter::builder().data_dir(dir.path()).build().await?;
//! let id = minter.next().await?;
//! let typed: Snowflake = minter.next_as().await?;
//! assert!(u64::try_from(id)? < typed.to_raw());
//! assert_eq!(minter.batch(1_000).await?.len(), 1_000);
//! minter.close().await?; // stores the marks, releases the claim
//! # Ok::<(), idmint::Error>(())
//! # }).unwrap();
//! ```
//!
//! Code without a runtime uses [`Builder::build_blocking`] ([`BlockingMinter`]); the settings
//! of `idmint serve --config` build one too ([`Minter::from_config_file`]). Claims and marks
//! live in the data directory, in Postgres ([`Builder::postgres`], feature `postgres`, on by
//! default) or in etcd ([`Builder::etcd`], feature `etcd`, on by default; the native scheme of
//! `idmint serve --etcd`). Namespaces whose IDs come from a store (segments, counters, Redis)
//! are not embedded: use `idmint serve` for those.
//!
//! An application that takes its IDs from a fleet of `idmint serve` instead uses the same
//! crate: feature `client` re-exports idmint-client as [`client`] (failover between servers,
//! safe retries, a prefetch buffer).
//!
//! Everything a user needs is re-exported: the typed IDs ([`Snowflake`], [`Uuid7`], ...),
//! [`AnyId`], [`Layout`] (decode with [`Layout::decode`]), the text forms ([`IdText`],
//! [`IdForm`], [`parse_typeid`], [`typeid_text`]) and the engine's settings
//! ([`ServerConfig`], [`NamespaceConfig`]).

/// The client of a fleet of `idmint serve` (the `idmint-client` crate), with feature `client`.
///
/// # Example
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // Nothing is sent until IDs are asked for (`client.next().await`).
/// let client = idmint::client::Client::builder().endpoint("http://127.0.0.1:8080").build();
/// assert!(client.is_ok());
/// # });
/// ```
#[cfg(feature = "client")]
pub use idmint_client as client;

mod blocking;
mod error;
mod minter;
mod process;
mod settings;

pub use idmint_core::{
    AnyId, Clock, DecimalId, Flake, Format, HotGuid, IdForm, IdText, Js53, Lable, Layout,
    Snowflake, Sonyflake, SonyflakeV2, SystemClock, TraceId, TypePrefix, Uuid7, detect,
    parse_typeid, typeid_text,
};
pub use idmint_engine::{NamespaceConfig, ServerConfig};

pub use crate::{
    blocking::BlockingMinter,
    error::Error,
    minter::Minter,
    settings::{Builder, DEFAULT_DATA_DIR, OnFork},
};
