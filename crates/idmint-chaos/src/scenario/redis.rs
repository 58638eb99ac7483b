//! T19, `redis-sentinel`: icicle IDs from a Redis primary that Redis Sentinel fails over to a
//! replica whose clock is behind, served by two `idmint serve` that find the primary through
//! Sentinel; its negative control runs without the icicle client's failover guard.

use std::{path::Path, process::Command, time::Duration};

use idmint_coord::testing::{RedisClock, RedisSentinel, RedisServer};

use super::Run;
use crate::{client::ClientMode, error::ChaosError};

/// The Sentinel master name.
const MASTER: &str = "idmint-t19";
/// The replica's clock, behind the primary's by more than a failover takes, so that once
/// promoted it makes IDs at milliseconds the old primary already used.
const REPLICA_CLOCK_MS: i64 = -5_000;
/// Sentinel's `down-after-milliseconds` (the failover timeout is four times it).
const DOWN_AFTER_MS: u64 = 1_000;
/// How long the servers are stopped before the kill (see `sentinel_failover`).
const QUIET_MS: u64 = 500;
/// The logical shard of the primary (and so of the replica, which copies it).
const SHARD: &str = "1";

/// T19: a Redis primary and a replica (its wall clock 5 s behind), three sentinels, and two
/// `idmint serve` with the `redis` source finding the primary through Sentinel, under HTTP,
/// gRPC and idmint-client load. After load and a quiet 500 ms (both servers stopped), the
/// primary is killed (SIGKILL); Sentinel promotes the replica, whose clock is behind the IDs
/// already issued. The guard (a new
/// `master_replid`) must refuse IDs until the new primary's clock passes the last
/// millisecond seen; without it (`no-redis-guard`) the new primary repeats IDs. Then the
/// killed node comes back (empty; Sentinel makes it a replica) and the current primary is
/// isolated with SIGSTOP until Sentinel fails over again, and continued (a stale primary
/// that Sentinel demotes). The checker checks uniqueness only (icicle layout). Best-effort:
/// the guard only protects the IDs the servers saw.
pub(super) fn sentinel_failover(run: &mut Run) -> Result<(), ChaosError> {
    run.layout("icicle")?;
    let primary = run.runtime.block_on(RedisServer::start())?;
    let replica = run.runtime.block_on(RedisServer::start_replica_with_clock(
        &primary,
        RedisClock::Offset { ms: REPLICA_CLOCK_MS },
    ))?;
    let sentinels =
        run.runtime.block_on(RedisSentinel::start(&primary, MASTER, 3, 1, DOWN_AFTER_MS))?;
    crate::say!(
        "   redis primary :{} (pid {:?}), replica :{} (clock {REPLICA_CLOCK_MS:+} ms), sentinels {}",
        primary.port(),
        primary.pid(),
        replica.port(),
        sentinels.urls().join(",")
    );
    set_shard(&run.lister, &primary.url())?;
    // The shard key reaches the replica by replication; the servers start after it has.
    run.hold(Duration::from_millis(300));
    let sentinel_urls = sentinels.urls().join(",");
    for n in 0..2 {
        let data = run.dir.join(format!("s{n}-data"));
        let args: Vec<String> = [
            "--data-dir",
            &data.display().to_string(),
            "--source",
            "redis",
            "--redis-sentinel-master",
            MASTER,
            "--redis-sentinels",
            &sentinel_urls,
            "--log",
            "info",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let args = run.with_control(args);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    run.http(0, 1, None);
    run.http(1, 1, None);
    run.grpc(0);
    run.failover(
        run.nodes.iter().map(|n| format!("http://{}", n.http)).collect(),
        ClientMode::Batch,
    );
    // The services live until the servers are stopped; they are kept in the run at the end.
    let mut primary = primary;
    let load = run.secs(3.0).max(Duration::from_secs(2));
    run.hold(load);

    // 1. A quiet moment, then SIGKILL of the primary. Under full load almost every call
    //    rolls the sequence over and sets icicle's 1 ms lock key, which Redis 7 replicates
    //    with an absolute expiry: a replica promoted right then stays locked until its own
    //    clock passes the old primary's last rollover, which hides the hazard by accident
    //    (without the quiet moment, control runs saw 0 to 540,738 duplicates). Stopping the
    //    servers for 500 ms lets the primary expire that key and replicate the deletion, so
    //    that only the guard stands between the promoted replica (5 s behind) and old IDs.
    for i in 0..run.nodes.len() {
        run.nodes[i].pause()?;
    }
    run.fired("sigstop", format!("s0, s1 SIGSTOP for {QUIET_MS} ms (quiet before the kill)"));
    run.hold(Duration::from_millis(QUIET_MS));
    let old = primary.port();
    primary.kill()?;
    run.fired(
        "kill9",
        format!("redis primary :{old} SIGKILL (replica clock {REPLICA_CLOCK_MS:+} ms)"),
    );
    for i in 0..run.nodes.len() {
        run.nodes[i].resume()?;
    }
    run.fired("sigcont", "s0, s1 SIGCONT".into());
    let started = std::time::Instant::now();
    let promoted = run.runtime.block_on(sentinels.wait_failover(old, Duration::from_secs(20)))?;
    run.fired(
        "redis_failover",
        format!("sentinels promoted :{promoted} after {} ms", started.elapsed().as_millis()),
    );
    let d = run.secs(5.0).max(Duration::from_secs(4));
    run.hold(d);

    // 2. The killed node comes back empty on its port and is made a replica of the promoted
    //    one (as an operator would; Sentinel alone takes about 10 s to convert it). Then the
    //    current primary is isolated (SIGSTOP) until Sentinel fails over to the returned
    //    node, and continued: a stale primary until Sentinel demotes it.
    run.runtime.block_on(primary.restart())?;
    run.runtime.block_on(primary.make_replica_of(promoted))?;
    run.fired(
        "redis_restart",
        format!("old primary :{old} restarted empty, replica of :{promoted}"),
    );
    let (current, stopped) = if promoted == replica.port() {
        (&replica, replica.pid())
    } else {
        (&primary, primary.pid())
    };
    let current_port = current.port();
    let pid = stopped.ok_or_else(|| ChaosError::Server("the redis primary does not run".into()))?;
    signal(pid, "STOP")?;
    run.fired("sigstop", format!("redis primary :{current_port} SIGSTOP (isolated)"));
    let started = std::time::Instant::now();
    let failed_over =
        run.runtime.block_on(sentinels.wait_failover(current_port, Duration::from_secs(25)));
    if let Ok(port) = &failed_over {
        run.fired(
            "redis_failover",
            format!("sentinels promoted :{port} after {} ms", started.elapsed().as_millis()),
        );
        run.hold(Duration::from_secs(2));
    }
    signal(pid, "CONT")?;
    run.fired("sigcont", format!("old primary :{current_port} SIGCONT (stale until demoted)"));
    failed_over?;
    let d = run.secs(3.0).max(Duration::from_secs(2));
    run.hold(d);
    // Killed (by PID) when the run is dropped, after its servers stopped.
    run.services.push(Box::new(sentinels));
    run.services.push(Box::new(replica));
    run.services.push(Box::new(primary));
    Ok(())
}

/// `idmint icicle set-shard URL 1`, the documented setup step, with the safe binary.
fn set_shard(idmint: &Path, url: &str) -> Result<(), ChaosError> {
    let output = Command::new(idmint)
        .args(["icicle", "set-shard", url, SHARD])
        .env("NO_COLOR", "1")
        .output()
        .map_err(ChaosError::io("run idmint icicle set-shard"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(ChaosError::Server(format!(
            "idmint icicle set-shard failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

/// `kill -<signal> <pid>` on a Redis process this run started.
fn signal(pid: u32, signal: &str) -> Result<(), ChaosError> {
    crate::cluster::signal_pid(pid, signal)
}
