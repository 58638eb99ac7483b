//! T21: etcd restored from a snapshot. Two servers under load on a one-member etcd; a snapshot
//! is saved, load goes on (the marks move past the snapshot's), then the servers are killed
//! and etcd is lost. The snapshot is restored into a new cluster (new ports, new cluster ID),
//! and the servers are restarted against it, on new hosts (new data directories), with their
//! clocks set back: its marks are the
//! snapshot's, behind the IDs issued after it. The restore guard must refuse to claim until
//! `idmint lease adopt-cluster` raised every mark; the harness does what an operator would: it
//! adopts only when the server refused. Without the guard (`no-restore-guard`) the servers
//! trust the stale marks and repeat the IDs issued after the snapshot.

use std::{process::Command, time::Duration};

use idmint_coord::testing::EtcdCluster;

use super::Run;
use crate::error::ChaosError;

/// How far back the restarted servers' clocks are, in seconds: more than the load that ran
/// after the snapshot, so that trusting the snapshot's marks repeats IDs.
const CLOCK_BACK_S: f64 = 8.0;
/// The margin `adopt-cluster` raises the marks by, past the adopting clock. The IDs issued
/// before the restore are at or below the clocks that issued them, all true here, so any
/// margin is safe in this run; a fleet sets it past its worst clock error. The restarted
/// servers, 8 s behind, wait until their clocks pass the raised marks.
const ADOPT_MARGIN_MS: u64 = 2_000;
/// What the refusal says (coord's `Error::ClusterChanged`).
const REFUSAL: &str = "is not the cluster";

pub(super) fn etcd_restore(run: &mut Run) -> Result<(), ChaosError> {
    run.etcd(1)?;
    let (endpoints, _) = run.etcd_endpoints(false)?;
    // A restarted server waits for the claims restored with the snapshot: their leases run
    // out a TTL after the restore, since nobody keeps them alive.
    let extra = ["--generator-pool", "2", "--wait-for-claim"];
    let mut servers = Vec::new();
    for _ in 0..2 {
        let args = run.etcd_args(&endpoints, 2, 2_000, &extra);
        let i = run.node(args, true)?;
        run.start(i)?;
        servers.push(i);
    }
    for &i in &servers {
        run.http(i, 1, None);
    }
    run.hold(Duration::from_secs(2));
    let snapshot = run.dir.join("etcd.snapshot");
    run.etcd.as_ref().ok_or_else(|| ChaosError::Server("no etcd".into()))?.snapshot(&snapshot)?;
    run.fired("etcd_snapshot", "snapshot saved; load goes on".into());
    let d = run.secs(6.0).max(Duration::from_secs(4));
    run.hold(d);
    for &i in &servers {
        run.nodes[i].kill9();
        run.fired("kill9", format!("{} SIGKILL", run.nodes[i].name));
    }
    // The disaster: the cluster is gone (its processes killed by PID, its data deleted).
    run.etcd = None;
    run.fired("etcd_lost", "the etcd cluster is killed and its data deleted".into());
    let restored = run.runtime.block_on(EtcdCluster::restore(&snapshot, 1))?;
    let new_endpoints = restored.endpoints().join(",");
    run.use_etcd(restored);
    run.fired("etcd_restore", format!("snapshot restored into a new cluster at {new_endpoints}"));
    for &i in &servers {
        run.nodes[i].set_flag("--etcd", &new_endpoints);
        run.nodes[i].set_clock(-CLOCK_BACK_S)?;
        // The hosts are replaced too (new data directories): a server that keeps its own data
        // directory remembers its marks and starts above them whatever etcd says, which would
        // hide what the restore guard's negative control removes.
        let fresh = run.dir.join(format!("data-{}-replaced", run.nodes[i].name));
        run.nodes[i].set_flag("--data-dir", &fresh.display().to_string());
        let name = run.nodes[i].name.clone();
        run.fired(
            "clock_restart_back",
            format!("{name} restarts at -{CLOCK_BACK_S} s on a new host"),
        );
    }
    match run.nodes[servers[0]].start() {
        Err(ChaosError::Server(log)) if log.contains(REFUSAL) => {
            run.fired("restore_refused", "the first restart refused the restored cluster".into());
            adopt(run, &new_endpoints)?;
            run.start(servers[0])?;
        }
        Err(e) => return Err(e),
        Ok(()) => run.nodes[servers[0]].wait_ready(Duration::from_secs(30))?,
    }
    run.start(servers[1])?;
    let d = run.secs(6.0).max(Duration::from_secs(4));
    run.hold(d);
    Ok(())
}

/// `idmint lease adopt-cluster`, as the operator runs it.
fn adopt(run: &Run, endpoints: &str) -> Result<(), ChaosError> {
    let output = Command::new(&run.lister)
        .args(["lease", "adopt-cluster", "--etcd", endpoints])
        .args(["--margin-ms", &ADOPT_MARGIN_MS.to_string()])
        .env("NO_COLOR", "1")
        .output()
        .map_err(ChaosError::io("run idmint lease adopt-cluster"))?;
    let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() {
        return Err(ChaosError::Server(format!(
            "idmint lease adopt-cluster failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    run.fired("adopt_cluster", said);
    Ok(())
}
