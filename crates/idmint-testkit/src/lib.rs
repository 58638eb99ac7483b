//! idmint's test kit: what the integration tests of `idmint-server`, `idmint-cli` and
//! `idmint-coord` share, in one place. Never published, and only ever a dev-dependency.
//!
//! - [`TestServer`]: the one way to start an in-process server (a builder over
//!   `Server::start_with`, on free loopback ports, from a runtime of its own), with
//!   [`clock`], [`SHUTDOWN_ORDER`] and [`FailingMarks`];
//! - [`http`]: a byte-for-byte HTTP/1.1 client; [`h2`]: a raw HTTP/2 client for floods;
//! - [`check`]: the checks of issued IDs, marks and metrics, and bounded polling;
//! - [`process`]: the harness of black-box tests of the `idmint` binary (a clean environment,
//!   a running `idmint serve` with its log, signals by PID).
//!
//! The harnesses that start real etcd, Redis and Postgres processes stay in
//! `idmint_coord::testing` (with [`libfaketime`], re-exported here): the chaos harness, a
//! binary that is not a test, runs them too, and this crate is never a dependency of anything
//! but tests.
//!
//! # Example
//!
//! ```
//! use idmint_server::ServerConfig;
//! use idmint_testkit::{TestServer, check, clock};
//!
//! let server = TestServer::builder(ServerConfig::default()).wall(clock(0)).start()?;
//! let ids = server.get("/v1/batch?count=3").ids();
//! check::assert_increasing(&ids);
//! # Ok::<(), idmint_server::Error>(())
//! ```

pub mod check;
pub mod h2;
pub mod http;
pub mod process;
mod server;

pub use idmint_coord::testing::libfaketime;

pub use crate::server::{FailingMarks, SHUTDOWN_ORDER, TestServer, TestServerBuilder, clock};
