//! [`RedisSentinel`]: real Redis Sentinel processes (`redis-server --sentinel`) on free
//! loopback ports watching one [`RedisServer`](super::RedisServer) primary, with short
//! failure-detection times, for failover tests. Like every harness here, it only ever
//! signals the PIDs it started.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use ::redis::{AsyncConnectionConfig, Client};

use super::{
    HarnessError, data_dir, find_program, free_ports,
    process::{Process, stop},
};

/// How long the sentinels may take to start and to see the primary.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Between checks.
const POLL: Duration = Duration::from_millis(50);

/// A group of sentinels monitoring one primary under a master name, each with its generated
/// configuration file (which Sentinel rewrites) in a temporary directory. Dropping it kills
/// them (SIGKILL, by PID).
///
/// # Example
///
/// ```no_run
/// use idmint_coord::testing::{self, RedisSentinel, RedisServer};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let Some(primary) = testing::available(RedisServer::start().await) else { return };
/// let sentinels = RedisSentinel::start(&primary, "mymaster", 3, 0, 1_000).await.expect("sentinels");
/// assert_eq!(sentinels.urls().len(), 3);
/// # });
/// ```
#[derive(Debug)]
pub struct RedisSentinel {
    master: String,
    /// How many replicas every sentinel must know before the group is ready.
    replicas: usize,
    ports: Vec<u16>,
    processes: Vec<Process>,
    /// Dropped last: the configuration files and logs.
    dir: tempfile::TempDir,
}

impl RedisSentinel {
    /// Starts `count` sentinels monitoring `primary` as `master`, with a quorum of a
    /// majority, `down-after-milliseconds` = `down_after_ms` and a failover timeout of four
    /// times that, and waits until every one of them sees the primary up, knows the other
    /// sentinels and at least `replicas` replicas.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Missing`] when `redis-server` is not on `PATH`,
    /// [`HarnessError::Timeout`] when a sentinel does not become ready within 20 s,
    /// [`HarnessError::Usage`] for no sentinels or an empty master name, others when one
    /// cannot be started.
    pub async fn start(
        primary: &super::RedisServer,
        master: &str,
        count: usize,
        replicas: usize,
        down_after_ms: u64,
    ) -> Result<RedisSentinel, HarnessError> {
        if count == 0 || master.is_empty() || master.contains(char::is_whitespace) {
            return Err(HarnessError::Usage(format!(
                "{count} sentinels for master `{master}`: need at least one and a one-word name"
            )));
        }
        let program = find_program("redis-server", "apt-get install redis-server")?;
        let dir = data_dir("sentinel")?;
        let ports = free_ports(count)?;
        let quorum = count / 2 + 1;
        let mut processes = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let config = dir.path().join(format!("sentinel{i}.conf"));
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
                 sentinel monitor {master} 127.0.0.1 {primary} {quorum}\n\
                 sentinel down-after-milliseconds {master} {down_after_ms}\n\
                 sentinel failover-timeout {master} {failover}\n\
                 sentinel parallel-syncs {master} 1\n",
                dir = dir.path().display(),
                primary = primary.port(),
                failover = down_after_ms * 4,
            );
            std::fs::write(&config, text)
                .map_err(|e| HarnessError::io(format!("cannot write {}", config.display()), e))?;
            let mut process = Process::new(dir.path().join(format!("sentinel{i}.log")));
            let mut command = Command::new(&program);
            command.arg(&config).arg("--sentinel");
            process.spawn(&mut command, "redis-server --sentinel")?;
            processes.push(process);
        }
        let sentinels =
            RedisSentinel { master: master.to_owned(), replicas, ports, processes, dir };
        sentinels.wait_ready().await?;
        Ok(sentinels)
    }

    /// The sentinels' URLs, `redis://127.0.0.1:<port>`.
    pub fn urls(&self) -> Vec<String> {
        self.ports.iter().map(|p| format!("redis://127.0.0.1:{p}")).collect()
    }

    /// The PIDs of the running sentinels.
    pub fn pids(&self) -> Vec<u32> {
        self.processes.iter().filter_map(Process::pid).collect()
    }

    /// The directory of the configuration files and logs (`sentinel<i>.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The log of sentinel `i`.
    pub fn log(&self, i: usize) -> Option<PathBuf> {
        self.processes.get(i).map(|p| p.log().to_path_buf())
    }

    /// The port of the primary that the first sentinel that answers names for the master
    /// now (`SENTINEL get-master-addr-by-name`); `None` when none answers.
    pub async fn primary_port(&self) -> Option<u16> {
        for url in self.urls() {
            let Ok(mut connection) = connect(&url).await else { continue };
            let reply: Result<Vec<String>, _> = ::redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.master)
                .query_async(&mut connection)
                .await;
            if let Ok(address) = reply
                && let Some(port) = address.get(1).and_then(|p| p.parse().ok())
            {
                return Some(port);
            }
        }
        None
    }

    /// Waits until every sentinel names a primary other than `old_port` (after a failover),
    /// for at most `limit`; returns the new primary's port.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Timeout`] when the sentinels did not agree on a new primary in time.
    pub async fn wait_failover(&self, old_port: u16, limit: Duration) -> Result<u16, HarnessError> {
        let started = Instant::now();
        loop {
            let mut named = Vec::new();
            for url in self.urls() {
                if let Ok(mut connection) = connect(&url).await {
                    let reply: Result<Vec<String>, _> = ::redis::cmd("SENTINEL")
                        .arg("get-master-addr-by-name")
                        .arg(&self.master)
                        .query_async(&mut connection)
                        .await;
                    named.push(reply.ok().and_then(|a| a.get(1).and_then(|p| p.parse().ok())));
                }
            }
            if let Some(Some(port)) = named.first()
                && *port != old_port
                && named.len() == self.ports.len()
                && named.iter().all(|n| *n == Some(*port))
            {
                return Ok(*port);
            }
            if started.elapsed() > limit {
                let log = self.log(0).map(|l| l.display().to_string()).unwrap_or_default();
                return Err(HarnessError::Timeout {
                    what: format!("the sentinels did not fail over from port {old_port}"),
                    seconds: limit.as_secs(),
                    log,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Kills every sentinel (SIGKILL, by PID).
    pub fn kill(&mut self) {
        for process in &mut self.processes {
            if let Some(child) = process.take() {
                stop(child);
            }
        }
    }

    async fn wait_ready(&self) -> Result<(), HarnessError> {
        let started = Instant::now();
        for (i, url) in self.urls().iter().enumerate() {
            loop {
                if self.knows_primary(url).await {
                    break;
                }
                if started.elapsed() > READY_TIMEOUT {
                    let log = self.log(i).map(|l| l.display().to_string()).unwrap_or_default();
                    return Err(HarnessError::Timeout {
                        what: format!("sentinel {url} did not become ready"),
                        seconds: READY_TIMEOUT.as_secs(),
                        log,
                    });
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }

    /// Whether the sentinel at `url` monitors the master, sees it up, knows the other
    /// sentinels (a failover needs a majority of them to elect a leader) and at least
    /// `self.replicas` replicas.
    async fn knows_primary(&self, url: &str) -> bool {
        let Ok(mut connection) = connect(url).await else { return false };
        let reply: Result<HashMap<String, String>, _> = ::redis::cmd("SENTINEL")
            .arg("master")
            .arg(&self.master)
            .query_async(&mut connection)
            .await;
        let Ok(fields) = reply else { return false };
        let number = |key: &str| fields.get(key).and_then(|v| v.parse::<usize>().ok());
        fields.get("flags").is_some_and(|f| f == "master")
            && number("num-other-sentinels") == Some(self.ports.len() - 1)
            && number("num-slaves").is_some_and(|n| n >= self.replicas)
    }
}

/// A short-lived connection for checks.
async fn connect(url: &str) -> Result<::redis::aio::MultiplexedConnection, ::redis::RedisError> {
    let limit = Some(Duration::from_millis(500));
    let config =
        AsyncConnectionConfig::new().set_connection_timeout(limit).set_response_timeout(limit);
    Client::open(url)?.get_multiplexed_async_connection_with_config(&config).await
}
