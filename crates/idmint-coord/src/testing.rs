//! Test harnesses that run real coordination services on loopback (feature `test-util`), for
//! the tests of this crate, the server and the CLI. One submodule per service; this file holds
//! what they share: the error type, program lookup, free ports, data directories and the
//! "skip locally, fail in CI" rule (and `process`, how they start and kill their processes).
//!
//! Harnesses never use well-known ports, bind only 127.0.0.1, and kill every process they
//! started, by PID, when dropped. They must not be used outside tests.
//!
//! | service | harness | feature |
//! | --- | --- | --- |
//! | etcd | [`EtcdCluster`] | `etcd` |
//! | Redis (with an optional fake wall clock) | [`RedisServer`] | `redis` |
//! | PostgreSQL (segments and counters) | [`Postgres`] | none (the harness runs the server's own programs) |
//!
//! # Example
//!
//! ```no_run
//! use idmint_coord::testing::{self, EtcdCluster};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // `None` (with the reason printed) when etcd is not installed and `CI` is not "true".
//! let Some(cluster) = testing::available(EtcdCluster::start(1).await) else { return };
//! assert_eq!(cluster.endpoints().len(), 1);
//! # });
//! ```

#[cfg(feature = "etcd")]
mod etcd;
mod postgres;
mod process;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
mod sentinel;

use std::{
    collections::BTreeSet,
    io,
    net::{Ipv4Addr, TcpListener},
    path::{Path, PathBuf},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

#[cfg(feature = "etcd")]
pub use self::etcd::EtcdCluster;
pub use self::postgres::Postgres;
#[cfg(feature = "redis")]
pub use self::redis::{RedisClock, RedisServer};
#[cfg(feature = "redis")]
pub use self::sentinel::RedisSentinel;

/// Why a service harness could not do what it was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The service's program is not installed.
    #[error("`{program}` was not found on PATH (install it: {hint})")]
    Missing {
        /// The program.
        program: String,
        /// How to install it.
        hint: String,
    },
    /// A local operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The service did not become ready in time.
    #[error("{what} within {seconds} s; see {log}")]
    Timeout {
        /// What did not happen.
        what: String,
        /// How long the harness waited.
        seconds: u64,
        /// The service's log file.
        log: String,
    },
    /// The service misbehaved (exited early, answered with an error).
    #[error("{0}")]
    Service(String),
    /// The harness was used wrongly (for example, an unknown member).
    #[error("invalid harness use: {0}")]
    Usage(String),
}

impl HarnessError {
    #[cfg_attr(not(feature = "etcd"), allow(dead_code, reason = "used by the harnesses"))]
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        HarnessError::Io { context: context.into(), source }
    }
}

/// Whether `CI` is set to `true`: then a missing service fails the test instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Turns a harness result into what a test needs: the service; `None` after printing why,
/// when the service's program is missing and [`in_ci`] is false (the test then returns
/// early, as skipped).
///
/// # Panics
///
/// On every other error, and on a missing program in CI.
#[allow(clippy::print_stderr, reason = "a skipped test says why on stderr")]
pub fn available<T>(started: Result<T, HarnessError>) -> Option<T> {
    match started {
        Ok(service) => Some(service),
        Err(e @ HarnessError::Missing { .. }) if !in_ci() => {
            eprintln!("skipping: {e} (set CI=true to make this a failure)");
            None
        }
        Err(e) => panic!("test service failed to start: {e}"),
    }
}

/// libfaketime's thread-safe preload library (`libfaketimeMT.so.1`), where Debian's
/// `libfaketime` package puts it: `None` when it is not installed. The CLI's tests and the
/// chaos harness run `idmint serve` under it (`LD_PRELOAD`) to step its wall clock.
///
/// Why the `MT` build: with `FAKETIME_NO_CACHE=1` (which the tests need, to see each step at
/// once), the plain `libfaketime.so.1` re-reads its time file without a lock, and a thread that
/// reads the clock while another re-parses the offset now and then gets the true clock instead.
/// Measured with libfaketime 0.9.10: 4 threads reading `CLOCK_REALTIME` 8 M times got the true
/// time (10 years off) 12,068 times with `libfaketime.so.1` and 0 times with
/// `libfaketimeMT.so.1`. One such reading inside a server is a 10-year clock step the test
/// never made.
///
/// # Example
///
/// ```
/// use idmint_coord::testing::libfaketime;
///
/// if let Some(library) = libfaketime() {
///     assert!(library.ends_with("libfaketimeMT.so.1"));
/// }
/// ```
pub fn libfaketime() -> Option<PathBuf> {
    let mut dirs =
        vec![PathBuf::from("/usr/lib/faketime"), PathBuf::from("/usr/local/lib/faketime")];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
    }
    dirs.into_iter().map(|d| d.join("libfaketimeMT.so.1")).find(|p| p.is_file())
}

/// The full path of `program` on `PATH`.
///
/// # Errors
///
/// [`HarnessError::Missing`], naming `hint` as the way to install it.
///
/// # Example
///
/// ```
/// use idmint_coord::testing::{HarnessError, find_program};
///
/// let missing = find_program("no-such-program-idmint", "do not");
/// assert!(matches!(missing, Err(HarnessError::Missing { .. })));
/// ```
pub fn find_program(program: &str, hint: &str) -> Result<PathBuf, HarnessError> {
    let missing = || HarnessError::Missing { program: program.into(), hint: hint.into() };
    let path = std::env::var_os("PATH").ok_or_else(missing)?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .ok_or_else(missing)
}

/// `count` distinct free loopback ports, below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`, 32768 and up by default).
///
/// A port the kernel picks (a bind to port 0) is an ephemeral one, and between its release
/// and the service's bind any outgoing connection on the machine may be given it as its local
/// port: a chaos run, with thousands of connections, lost a server's start to that. The
/// kernel gives connections only ephemeral ports, so these are drawn from 10000 up to the
/// range, at random, each checked by binding it, and never handed out twice by this process
/// (until half of them have been). All are held until every one is picked, then released for
/// the service to bind. Where the range leaves fewer than 1,000 ports below it, the kernel
/// picks.
///
/// # Errors
///
/// [`HarnessError::Io`] when no loopback port can be bound.
///
/// # Example
///
/// ```
/// let ports = idmint_coord::testing::free_ports(2)?;
/// assert_ne!(ports[0], ports[1]);
/// # Ok::<(), idmint_coord::testing::HarnessError>(())
/// ```
pub fn free_ports(count: usize) -> Result<Vec<u16>, HarnessError> {
    const FLOOR: u16 = 10_000;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let below = ephemeral_floor().saturating_sub(FLOOR);
    let bind = |port: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, port));
    let mut listeners = Vec::with_capacity(count);
    if below < 1_000 {
        for _ in 0..count {
            listeners
                .push(bind(0).map_err(|e| HarnessError::io("cannot bind a loopback port", e))?);
        }
    } else {
        let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
        // A different sequence in each process: its ID and the time mixed in.
        let seed = u64::from(std::process::id()) << 32
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::from(d.subsec_nanos()));
        let mut attempts = 0u32;
        while listeners.len() < count {
            attempts += 1;
            if attempts > 100_000 {
                return Err(HarnessError::io(
                    "cannot bind a loopback port below the ephemeral range",
                    io::Error::from(io::ErrorKind::AddrInUse),
                ));
            }
            if given.len() >= usize::from(below) / 2 {
                given.clear();
            }
            let draw = splitmix(seed.wrapping_add(DRAWS.fetch_add(1, Ordering::Relaxed)));
            let port = FLOOR + u16::try_from(draw % u64::from(below)).unwrap_or(0);
            if given.contains(&port) {
                continue;
            }
            if let Ok(listener) = bind(port) {
                given.insert(port);
                listeners.push(listener);
            }
        }
    }
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<_, _>>()
        .map_err(|e| HarnessError::io("cannot read a bound port", e))
}

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|low| low.parse().ok()))
        .unwrap_or(32_768)
}

/// SplitMix64's output for `x`: spreads consecutive draws over the ports.
fn splitmix(x: u64) -> u64 {
    idmint_core::SplitMix64::new(x).next_u64()
}

/// A fresh temporary directory for a service's data: in `/dev/shm` when possible (fsync is
/// free there, so tests are quick), else in the system temporary directory. It is deleted
/// when dropped.
///
/// # Errors
///
/// [`HarnessError::Io`] when no directory can be created.
///
/// # Example
///
/// ```
/// let dir = idmint_coord::testing::data_dir("doc")?;
/// assert!(dir.path().is_dir());
/// # Ok::<(), idmint_coord::testing::HarnessError>(())
/// ```
pub fn data_dir(service: &str) -> Result<tempfile::TempDir, HarnessError> {
    let prefix = format!("idmint-{service}-");
    let shm = Path::new("/dev/shm");
    let in_shm = shm.is_dir().then(|| tempfile::Builder::new().prefix(&prefix).tempdir_in(shm));
    match in_shm {
        Some(Ok(dir)) => Ok(dir),
        _ => tempfile::Builder::new()
            .prefix(&prefix)
            .tempdir()
            .map_err(|e| HarnessError::io("cannot create a temporary directory", e)),
    }
}
