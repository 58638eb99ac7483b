//! [`RedisServer`]: a real `redis-server` on a free loopback port, for tests, optionally with
//! a fake wall clock ([`RedisClock`]). It must never touch a Redis it did not start (no
//! well-known ports, no `pkill`).
//!
//! The fake clock is a tiny `LD_PRELOAD` library compiled with the C compiler the Rust
//! toolchain links with (`cc`), because libfaketime cannot start Debian's jemalloc-linked
//! `redis-server` (it aborts on recursive `clock_gettime` calls during start-up). It changes
//! only the wall clock (`gettimeofday`, `clock_gettime(CLOCK_REALTIME…)`, `time`), which is
//! what Redis' `TIME` and key expiry read; the monotonic clock driving Redis' event loop stays
//! real.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use ::redis::{AsyncConnectionConfig, Client, Value, aio::MultiplexedConnection};

use super::{
    HarnessError, data_dir, find_program, free_ports,
    process::{Process, START_ATTEMPTS, retry_on_lost_port, stop},
};

/// How long a start or restart may take before the harness gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Between readiness checks.
const POLL: Duration = Duration::from_millis(20);

/// The fake wall clock's source, compiled on demand into the server's directory.
const CLOCK_SHIM: &str = r#"/* idmint test harness: a fake wall clock for redis-server (LD_PRELOAD). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

struct idmint_timeval { long tv_sec; long tv_usec; };

static int mode;          /* 0: real, 1: frozen at value_us, 2: real + value_us */
static long long value_us;

__attribute__((constructor)) static void idmint_clock_init(void) {
  const char *spec = getenv("IDMINT_FAKE_CLOCK");
  if (spec == NULL) return;
  if (spec[0] == 'F') { value_us = strtoll(spec + 1, NULL, 10); mode = 1; }
  if (spec[0] == 'O') { value_us = strtoll(spec + 1, NULL, 10); mode = 2; }
}

static long long idmint_now_us(void) {
  struct timespec ts;
  if (mode == 1) return value_us;
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000 + (mode == 2 ? value_us : 0);
}

int gettimeofday(struct idmint_timeval *tv, void *tz) {
  long long now = idmint_now_us();
  (void)tz;
  if (tv != NULL) { tv->tv_sec = now / 1000000LL; tv->tv_usec = now % 1000000LL; }
  return 0;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) {
    long long now = idmint_now_us();
    ts->tv_sec = now / 1000000LL;
    ts->tv_nsec = (now % 1000000LL) * 1000;
    return 0;
  }
  return (int)syscall(SYS_clock_gettime, id, ts);
}

time_t time(time_t *out) {
  time_t now = (time_t)(idmint_now_us() / 1000000LL);
  if (out != NULL) *out = now;
  return now;
}
"#;

/// The wall clock a [`RedisServer`] sees, which is what its `TIME` returns and its key expiry
/// uses.
///
/// # Example
///
/// ```
/// use idmint_coord::testing::RedisClock;
///
/// assert_eq!(RedisClock::default(), RedisClock::Real);
/// let behind = RedisClock::Offset { ms: -1500 };
/// # let _ = behind;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisClock {
    /// The machine's clock.
    #[default]
    Real,
    /// A clock that stands still at this Unix time, in µs. Keys with a TTL never expire.
    Frozen {
        /// The time, in µs since the Unix epoch.
        unix_us: u64,
    },
    /// The machine's clock shifted by this many ms (negative: behind).
    Offset {
        /// The shift, in ms.
        ms: i64,
    },
}

/// A real `redis-server` process (Debian's `redis-server` package) on a free loopback port,
/// without persistence (`--save '' --appendonly no`), with its directory and log in a
/// temporary directory. Dropping it kills the process (SIGKILL, by PID) and deletes the
/// directory.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::testing::{self, RedisServer};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let Some(mut redis) = testing::available(RedisServer::start().await) else { return };
/// let url = redis.url(); // redis://127.0.0.1:<port>/
/// redis.kill().expect("kill");
/// redis.restart().await.expect("restart"); // same port, empty data, new run_id
/// # let _ = url;
/// # });
/// ```
#[derive(Debug)]
pub struct RedisServer {
    program: PathBuf,
    port: u16,
    replica_of: Option<u16>,
    clock: RedisClock,
    process: Process,
    /// Dropped last: the server's directory and log.
    dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts a server on the real clock and waits until it answers `PING`.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Missing`] when `redis-server` is not on `PATH` (see
    /// [`available`](super::available)), [`HarnessError::Timeout`] when it does not answer
    /// within 20 s, others when it cannot be started.
    pub async fn start() -> Result<RedisServer, HarnessError> {
        Self::start_with(RedisClock::Real, None).await
    }

    /// Starts a server whose wall clock is `clock`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); also [`HarnessError::Missing`] when a fake clock is asked
    /// for and no C compiler (`cc`) is on `PATH`.
    pub async fn start_with_clock(clock: RedisClock) -> Result<RedisServer, HarnessError> {
        Self::start_with(clock, None).await
    }

    /// Starts a replica of `primary` (`--replicaof`) on the real clock and waits until its
    /// first synchronisation is done (`master_link_status:up`). Promote it with
    /// `REPLICAOF NO ONE`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub async fn start_replica_of(primary: &RedisServer) -> Result<RedisServer, HarnessError> {
        Self::start_with(RedisClock::Real, Some(primary.port)).await
    }

    /// Starts a replica of `primary` whose wall clock is `clock` (a replica whose clock is
    /// behind issues IDs at earlier times once promoted).
    ///
    /// # Errors
    ///
    /// As [`start_with_clock`](Self::start_with_clock).
    pub async fn start_replica_with_clock(
        primary: &RedisServer,
        clock: RedisClock,
    ) -> Result<RedisServer, HarnessError> {
        Self::start_with(clock, Some(primary.port)).await
    }

    async fn start_with(
        clock: RedisClock,
        replica_of: Option<u16>,
    ) -> Result<RedisServer, HarnessError> {
        let program = find_program("redis-server", "apt-get install redis-server")?;
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            let dir = data_dir("redis")?;
            let port = free_ports(1)?[0];
            let process = Process::new(dir.path().join("redis.log"));
            let mut server =
                RedisServer { program: program.clone(), port, replica_of, clock, process, dir };
            match server.spawn_and_wait().await {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(retry_on_lost_port(e)?),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Service("redis-server did not start".into())))
    }

    /// The server's URL, `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PID of the server process, `None` after [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The directory holding the server's log (`redis.log`) and the clock library.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The clock the server runs (or will run after a restart) on.
    pub fn clock(&self) -> RedisClock {
        self.clock
    }

    /// Kills the server with SIGKILL (by PID) and reaps it. Its data is gone: nothing is
    /// persisted.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] when it is not running.
    pub fn kill(&mut self) -> Result<(), HarnessError> {
        let process = self
            .process
            .take()
            .ok_or_else(|| HarnessError::Usage("the redis server is not running".into()))?;
        stop(process);
        Ok(())
    }

    /// Kills the server if it runs, then starts it again on the same port and clock, empty (a
    /// new `run_id` and replication ID), and waits until it answers (a replica: until it has
    /// synchronised with its primary).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); [`HarnessError::Service`] when the port was taken meanwhile.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        if let Some(process) = self.process.take() {
            stop(process);
        }
        self.spawn_and_wait().await
    }

    /// [`restart`](Self::restart) on another wall clock.
    ///
    /// # Errors
    ///
    /// As [`restart`](Self::restart) and [`start_with_clock`](Self::start_with_clock).
    pub async fn restart_with_clock(&mut self, clock: RedisClock) -> Result<(), HarnessError> {
        self.clock = clock;
        self.restart().await
    }

    fn spawn(&mut self) -> Result<(), HarnessError> {
        let dir = self.dir.path().to_path_buf();
        let mut command = Command::new(&self.program);
        command
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            // Replicas synchronise at once instead of after Redis' default 5 s wait for more.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&dir);
        if let Some(primary) = self.replica_of {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        let fake = match self.clock {
            RedisClock::Real => None,
            RedisClock::Frozen { unix_us } => Some(format!("F{unix_us}")),
            RedisClock::Offset { ms } => Some(format!("O{}", ms.saturating_mul(1000))),
        };
        if let Some(fake) = fake {
            let library = clock_library(&dir)?;
            command.env("LD_PRELOAD", library).env("IDMINT_FAKE_CLOCK", fake);
        }
        self.process.spawn(&mut command, "redis-server")
    }

    async fn spawn_and_wait(&mut self) -> Result<(), HarnessError> {
        self.spawn()?;
        let started = Instant::now();
        loop {
            self.process.check_not_exited("redis-server")?;
            if self.ready().await {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                let what = format!("redis-server on port {} did not become ready", self.port);
                return Err(self.process.timeout(what, READY_TIMEOUT));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Makes the running server a replica of the server on `primary_port` (`REPLICAOF`, as an
    /// operator would after a failover) and waits until it has synchronised; later restarts
    /// start it as that replica.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Service`] when it refuses, [`HarnessError::Timeout`] when it does not
    /// synchronise within 20 s.
    pub async fn make_replica_of(&mut self, primary_port: u16) -> Result<(), HarnessError> {
        let failed = |e: ::redis::RedisError| {
            HarnessError::Service(format!("REPLICAOF on port {}: {e}", self.port))
        };
        let mut connection = connect(&self.url()).await.map_err(failed)?;
        ::redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary_port)
            .query_async::<()>(&mut connection)
            .await
            .map_err(failed)?;
        self.replica_of = Some(primary_port);
        let started = Instant::now();
        while !self.is_synced_replica().await {
            if started.elapsed() > READY_TIMEOUT {
                let what = format!("redis-server on port {} did not synchronise", self.port);
                return Err(self.process.timeout(what, READY_TIMEOUT));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }

    /// Whether the server runs as a replica whose link to its primary is up (`INFO
    /// replication`: `role:slave` and `master_link_status:up`), whatever it was started as:
    /// Sentinel turns a returning old primary into a replica.
    pub async fn is_synced_replica(&self) -> bool {
        let Ok(mut connection) = connect(&self.url()).await else { return false };
        let info: Result<Value, _> =
            ::redis::cmd("INFO").arg("replication").query_async(&mut connection).await;
        matches!(info, Ok(Value::BulkString(text)) if {
            let text = String::from_utf8_lossy(&text);
            text.contains("role:slave") && text.contains("master_link_status:up")
        })
    }

    /// Whether the server answers, and a replica has synchronised.
    async fn ready(&self) -> bool {
        let Ok(mut connection) = connect(&self.url()).await else { return false };
        let pong: Result<String, _> = ::redis::cmd("PING").query_async(&mut connection).await;
        if pong.is_err() {
            return false;
        }
        if self.replica_of.is_none() {
            return true;
        }
        let info: Result<Value, _> =
            ::redis::cmd("INFO").arg("replication").query_async(&mut connection).await;
        matches!(info, Ok(Value::BulkString(text))
            if String::from_utf8_lossy(&text).contains("master_link_status:up"))
    }
}

/// A short-lived connection for readiness checks.
async fn connect(url: &str) -> Result<MultiplexedConnection, ::redis::RedisError> {
    let limit = Some(Duration::from_millis(500));
    let config =
        AsyncConnectionConfig::new().set_connection_timeout(limit).set_response_timeout(limit);
    Client::open(url)?.get_multiplexed_async_connection_with_config(&config).await
}

/// Compiles the fake-clock library into `dir` (once per directory) and returns its path.
fn clock_library(dir: &Path) -> Result<PathBuf, HarnessError> {
    let library = dir.join("idmint-fake-clock.so");
    if library.is_file() {
        return Ok(library);
    }
    let cc = find_program("cc", "apt-get install gcc")?;
    let source = dir.join("idmint-fake-clock.c");
    std::fs::write(&source, CLOCK_SHIM)
        .map_err(|e| HarnessError::io(format!("cannot write {}", source.display()), e))?;
    let output = Command::new(cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&library)
        .arg(&source)
        .output()
        .map_err(|e| HarnessError::io("cannot run cc", e))?;
    if !output.status.success() {
        return Err(HarnessError::Service(format!(
            "cc could not build the fake clock: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(library)
}
