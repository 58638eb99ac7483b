//! [`EtcdCluster`]: real `etcd` processes on free loopback ports, for tests. It must never
//! touch an etcd it did not start (no well-known ports, no `pkill`).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use idmint_etcd::{Client, ConnectOptions, GetOptions};

use super::{
    HarnessError, data_dir, find_program, free_ports,
    process::{Process, START_ATTEMPTS, retry_on_lost_port, stop},
};

/// How long a start or restart may take before the harness gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Between readiness checks.
const POLL: Duration = Duration::from_millis(50);

/// A local etcd cluster of real `etcd` processes (Debian's `etcd-server` package), each on
/// free loopback ports with its data in a temporary directory. Dropping it kills every
/// process it started (SIGKILL, by PID) and deletes the data.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::testing::{self, EtcdCluster};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let Some(mut cluster) = testing::available(EtcdCluster::start(3).await) else { return };
/// let leader = cluster.leader().await.expect("leader");
/// cluster.kill(leader).expect("kill");
/// cluster.restart(leader).await.expect("restart");
/// # });
/// ```
#[derive(Debug)]
pub struct EtcdCluster {
    program: PathBuf,
    members: Vec<Member>,
    /// Dropped last: the members' data and logs.
    dir: tempfile::TempDir,
}

#[derive(Debug)]
struct Member {
    name: String,
    client_port: u16,
    args: Vec<String>,
    process: Process,
}

impl EtcdCluster {
    /// Starts a cluster of `members` etcd processes and waits until it has a leader.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Missing`] when `etcd` is not on `PATH` (see
    /// [`available`](super::available)), [`HarnessError::Timeout`] when the cluster does not
    /// become healthy within 30 s, others when processes cannot be started.
    pub async fn start(members: usize) -> Result<EtcdCluster, HarnessError> {
        Self::start_from(members, None).await
    }

    /// Starts a new cluster of `members` from a snapshot that [`snapshot`](Self::snapshot)
    /// saved (`etcdctl snapshot restore`, as etcd's disaster-recovery guide does it): the keys
    /// and revisions of the snapshot, on new ports, with a new cluster token and so a new
    /// cluster ID.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); [`HarnessError::Service`] when the restore fails.
    pub async fn restore(snapshot: &Path, members: usize) -> Result<EtcdCluster, HarnessError> {
        Self::start_from(members, Some(snapshot)).await
    }

    async fn start_from(
        members: usize,
        snapshot: Option<&Path>,
    ) -> Result<EtcdCluster, HarnessError> {
        if members == 0 {
            return Err(HarnessError::Usage("an etcd cluster needs at least one member".into()));
        }
        let program = find_program("etcd", "apt-get install etcd-server etcd-client")?;
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            match Self::try_start(&program, members, snapshot).await {
                Ok(cluster) => return Ok(cluster),
                Err(e) => last = Some(retry_on_lost_port(e)?),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Service("etcd did not start".into())))
    }

    async fn try_start(
        program: &Path,
        count: usize,
        snapshot: Option<&Path>,
    ) -> Result<EtcdCluster, HarnessError> {
        let dir = data_dir("etcd")?;
        let ports = free_ports(2 * count)?;
        let peer = |i: usize| format!("http://127.0.0.1:{}", ports[2 * i + 1]);
        let initial_cluster =
            (0..count).map(|i| format!("m{i}={}", peer(i))).collect::<Vec<_>>().join(",");
        let token = format!("idmint-test-{}-{}", std::process::id(), ports[0]);
        let members = (0..count)
            .map(|i| {
                let client = format!("http://127.0.0.1:{}", ports[2 * i]);
                let name = format!("m{i}");
                let args = vec![
                    format!("--name={name}"),
                    format!("--data-dir={}", dir.path().join(&name).display()),
                    format!("--listen-client-urls={client}"),
                    format!("--advertise-client-urls={client}"),
                    format!("--listen-peer-urls={}", peer(i)),
                    format!("--initial-advertise-peer-urls={}", peer(i)),
                    format!("--initial-cluster={initial_cluster}"),
                    "--initial-cluster-state=new".into(),
                    format!("--initial-cluster-token={token}"),
                    "--log-level=warn".into(),
                ];
                let process = Process::new(dir.path().join(format!("{name}.log")));
                Member { name, client_port: ports[2 * i], args, process }
            })
            .collect();
        if let Some(snapshot) = snapshot {
            for i in 0..count {
                let name = format!("m{i}");
                let data = dir.path().join(&name);
                etcdctl(&[
                    "snapshot".into(),
                    "restore".into(),
                    snapshot.display().to_string(),
                    format!("--name={name}"),
                    format!("--data-dir={}", data.display()),
                    format!("--initial-cluster={initial_cluster}"),
                    format!("--initial-cluster-token={token}"),
                    format!("--initial-advertise-peer-urls={}", peer(i)),
                ])?;
            }
        }
        let mut cluster = EtcdCluster { program: program.to_path_buf(), members, dir };
        for member in 0..count {
            cluster.spawn(member)?;
        }
        cluster.wait_ready(0..count).await?;
        Ok(cluster)
    }

    /// Saves a snapshot of the cluster's keys to `path` (`etcdctl snapshot save`, from the
    /// first running member).
    ///
    /// # Errors
    ///
    /// [`HarnessError::Missing`] without `etcdctl`, [`HarnessError::Service`] when no member
    /// runs or the save fails.
    pub fn snapshot(&self, path: &Path) -> Result<(), HarnessError> {
        let member = (0..self.members.len())
            .find(|&m| self.members[m].process.is_running())
            .ok_or_else(|| HarnessError::Service("no etcd member runs".into()))?;
        etcdctl(&[
            format!("--endpoints={}", self.endpoint(member)),
            "snapshot".into(),
            "save".into(),
            path.display().to_string(),
        ])
    }

    /// The client URLs, one per member (`http://127.0.0.1:<port>`), in member order.
    pub fn endpoints(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.endpoint(i)).collect()
    }

    /// The client URL of one member.
    ///
    /// # Panics
    ///
    /// When `member` is not a member index.
    pub fn endpoint(&self, member: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[member].client_port)
    }

    /// The PID of each member's process, `None` for a killed member.
    pub fn member_pids(&self) -> Vec<Option<u32>> {
        self.members.iter().map(|m| m.process.pid()).collect()
    }

    /// The directory holding the members' data and logs (`m<i>.log`).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The index of the current leader, as the running members' maintenance status reports.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Service`] when no running member names a leader among the members.
    pub async fn leader(&self) -> Result<usize, HarnessError> {
        let mut ids = Vec::new();
        let mut leader = 0;
        for member in 0..self.members.len() {
            if !self.members[member].process.is_running() {
                ids.push(None);
                continue;
            }
            let status = status(&self.endpoint(member)).await.ok();
            ids.push(status.map(|(id, _)| id));
            if let Some((_, l)) = status
                && l != 0
            {
                leader = l;
            }
        }
        ids.iter()
            .position(|id| *id == Some(leader) && leader != 0)
            .ok_or_else(|| HarnessError::Service("no member reports a leader".into()))
    }

    /// Revokes the lease of every key under `prefix` (through the running members), as etcd
    /// itself does when a leader that resumes after a pause revokes the leases it takes for
    /// expired: the keys on them go at once. Returns the leases revoked.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Service`] when no running member answers within 5 s.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::testing::{self, EtcdCluster};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let Some(cluster) = testing::available(EtcdCluster::start(1).await) else { return };
    /// let revoked = cluster.revoke_leases_under("idmint/default/claim/0").await.expect("revoke");
    /// # });
    /// ```
    pub async fn revoke_leases_under(&self, prefix: &str) -> Result<Vec<i64>, HarnessError> {
        let endpoints: Vec<String> = (0..self.members.len())
            .filter(|&m| self.members[m].process.is_running())
            .map(|m| self.endpoint(m))
            .collect();
        let limit = Duration::from_secs(5);
        let options = ConnectOptions::new().with_connect_timeout(limit).with_timeout(limit);
        let answer = tokio::time::timeout(limit, async {
            let mut client = Client::connect(&endpoints, Some(options)).await?;
            let keys = client.get(prefix, Some(GetOptions::new().with_prefix())).await?;
            let mut leases: Vec<i64> =
                keys.kvs().iter().map(|kv| kv.lease()).filter(|&l| l != 0).collect();
            leases.sort_unstable();
            leases.dedup();
            for &lease in &leases {
                client.lease_revoke(lease).await?;
            }
            Ok::<_, idmint_etcd::Error>(leases)
        })
        .await;
        match answer {
            Ok(Ok(leases)) => Ok(leases),
            Ok(Err(e)) => {
                Err(HarnessError::Service(format!("revoke the leases under {prefix}: {e}")))
            }
            Err(_) => {
                Err(HarnessError::Service(format!("revoke the leases under {prefix}: no answer")))
            }
        }
    }

    /// Kills one member with SIGKILL (by PID) and reaps it.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] for an unknown or already killed member.
    pub fn kill(&mut self, member: usize) -> Result<(), HarnessError> {
        let process = self
            .members
            .get_mut(member)
            .and_then(|m| m.process.take())
            .ok_or_else(|| HarnessError::Usage(format!("member {member} is not running")))?;
        stop(process);
        Ok(())
    }

    /// Starts a killed member again on its ports and data, and waits until it serves with a
    /// leader.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] for an unknown or running member, [`HarnessError::Timeout`]
    /// when it does not rejoin within 30 s.
    pub async fn restart(&mut self, member: usize) -> Result<(), HarnessError> {
        match self.members.get(member) {
            Some(m) if !m.process.is_running() => {}
            _ => return Err(HarnessError::Usage(format!("member {member} is not stopped"))),
        }
        self.spawn(member)?;
        self.wait_ready(member..member + 1).await
    }

    fn spawn(&mut self, member: usize) -> Result<(), HarnessError> {
        let m = &mut self.members[member];
        let mut command = Command::new(&self.program);
        m.process.spawn(command.args(&m.args), &format!("etcd member {}", m.name))
    }

    /// Waits until each of `members` answers a status request and names a leader.
    async fn wait_ready(&mut self, members: std::ops::Range<usize>) -> Result<(), HarnessError> {
        let started = Instant::now();
        for member in members {
            loop {
                let m = &mut self.members[member];
                m.process.check_not_exited(&format!("etcd member {}", m.name))?;
                if let Ok((_, leader)) = status(&self.endpoint(member)).await
                    && leader != 0
                {
                    break;
                }
                if started.elapsed() > READY_TIMEOUT {
                    let what = format!("etcd member {member} did not serve with a leader");
                    return Err(self.members[member].process.timeout(what, READY_TIMEOUT));
                }
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }
}

/// Runs `etcdctl` (API v3) with `args`, failing with its output.
fn etcdctl(args: &[String]) -> Result<(), HarnessError> {
    let program = find_program("etcdctl", "apt-get install etcd-client")?;
    let output = Command::new(program)
        .args(args)
        .env("ETCDCTL_API", "3")
        .output()
        .map_err(|e| HarnessError::Service(format!("run etcdctl: {e}")))?;
    if !output.status.success() {
        return Err(HarnessError::Service(format!(
            "etcdctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}

/// `(member ID, leader ID)` of one endpoint, within a second.
async fn status(endpoint: &str) -> Result<(u64, u64), HarnessError> {
    let limit = Duration::from_secs(1);
    let options = ConnectOptions::new().with_connect_timeout(limit).with_timeout(limit);
    let answer = tokio::time::timeout(limit, async {
        let mut client = Client::connect([endpoint], Some(options)).await?;
        client.status().await
    })
    .await;
    match answer {
        Ok(Ok(status)) => {
            let member = status.header().map_or(0, |h| h.member_id());
            Ok((member, status.leader()))
        }
        Ok(Err(e)) => Err(HarnessError::Service(format!("status of {endpoint}: {e}"))),
        Err(_) => Err(HarnessError::Service(format!("status of {endpoint}: no answer"))),
    }
}
