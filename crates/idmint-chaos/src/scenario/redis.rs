//! T19, `redis-sentinel`: icicle IDs from a Redis primary that Redis Sentinel fails over to
//! one of two replicas whose clocks are behind, served by two `idmint serve` that find the primary through
//! Sentinel; its negative control runs each server with its own guard only, without the mark
//! shared through Redis.

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
/// How long `s1` goes on alone before it is stopped too, so that its last milliseconds are
/// ones `s0` never saw.
const LEAD_MS: u64 = 500;
/// The logical shard of the primary (and so of the replica, which copies it).
const SHARD: &str = "1";

/// T19: a Redis primary and two replicas (their wall clocks 5 s behind), three sentinels, and two
/// `idmint serve` with the `redis` source finding the primary through Sentinel, under HTTP,
/// gRPC and idmint-client load. After load, `s0` is stopped (SIGSTOP) and `s1` goes on alone
/// for 500 ms, so that the last milliseconds handed out are ones only `s1` saw; then `s1` is
/// stopped, and after a quiet 500 ms the primary is killed (SIGKILL). Sentinel promotes the
/// replica, whose clock is behind the IDs already issued. `s0` is continued at once and meets
/// the promoted node alone; `s1` stays stopped until the promoted node's clock is a second
/// past the kill. The guard (a new `master_replid`) must refuse IDs until the new primary's
/// clock passes the last millisecond any server handed out, which only the mark shared
/// through Redis tells `s0`; with each server's own guard only (`no-shared-redis-guard`),
/// `s0` hands out the milliseconds `s1` used again. Then the killed node comes back (empty;
/// Sentinel makes it a replica) and the current primary is isolated with SIGSTOP until
/// Sentinel fails over again, and continued (a stale primary that Sentinel demotes). The
/// checker checks uniqueness only (icicle layout).
pub(super) fn sentinel_failover(run: &mut Run) -> Result<(), ChaosError> {
    run.layout("icicle")?;
    let primary = run.runtime.block_on(RedisServer::start())?;
    // Two replicas, both behind: whichever Sentinel promotes, the other follows it, so the
    // new primary has a replica to acknowledge the guard's mark (a Sentinel primary without
    // one serves no IDs; DESIGN.md, "Why is icicle mode called best-effort?").
    let behind = RedisClock::Offset { ms: REPLICA_CLOCK_MS };
    let replica = run.runtime.block_on(RedisServer::start_replica_with_clock(&primary, behind))?;
    let replica2 = run.runtime.block_on(RedisServer::start_replica_with_clock(&primary, behind))?;
    let sentinels =
        run.runtime.block_on(RedisSentinel::start(&primary, MASTER, 3, 2, DOWN_AFTER_MS))?;
    crate::say!(
        "   redis primary :{} (pid {:?}), replicas :{} :{} (clock {REPLICA_CLOCK_MS:+} ms), sentinels {}",
        primary.port(),
        primary.pid(),
        replica.port(),
        replica2.port(),
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
    //    `s0` stops first and `s1` goes on alone, so the last milliseconds are `s1`'s only:
    //    the race the shared mark closes happens every run, not by chance.
    run.nodes[0].pause()?;
    run.fired("sigstop", format!("s0 SIGSTOP; s1 alone for {LEAD_MS} ms"));
    run.hold(Duration::from_millis(LEAD_MS));
    run.nodes[1].pause()?;
    run.fired("sigstop", format!("s1 SIGSTOP; both quiet for {QUIET_MS} ms before the kill"));
    run.hold(Duration::from_millis(QUIET_MS));
    let old = primary.port();
    primary.kill()?;
    run.fired(
        "kill9",
        format!("redis primary :{old} SIGKILL (replica clock {REPLICA_CLOCK_MS:+} ms)"),
    );
    let killed = std::time::Instant::now();
    run.nodes[0].resume()?;
    run.fired("sigcont", "s0 SIGCONT (s1 stays stopped)".into());
    let promoted = run.runtime.block_on(sentinels.wait_failover(old, Duration::from_secs(20)))?;
    run.fired(
        "redis_failover",
        format!("sentinels promoted :{promoted} after {} ms", killed.elapsed().as_millis()),
    );
    // 2. The killed node comes back empty on its port and is made a replica of the promoted
    //    one at once (as an orchestrator restarting it would; Sentinel alone takes about 10 s
    //    to convert it).
    run.runtime.block_on(primary.restart())?;
    run.runtime.block_on(primary.make_replica_of(promoted))?;
    run.fired(
        "redis_restart",
        format!("old primary :{old} restarted empty, replica of :{promoted}"),
    );
    // `s0` alone until the promoted node's clock is a second past the kill: without the shared
    // mark it has handed out `s1`'s last milliseconds again by then.
    let alone = Duration::from_millis(REPLICA_CLOCK_MS.unsigned_abs() + 1_000);
    run.hold(alone.saturating_sub(killed.elapsed()));
    run.nodes[1].resume()?;
    run.fired("sigcont", "s1 SIGCONT".into());
    let d = run.secs(3.0).max(Duration::from_secs(2));
    run.hold(d);

    // 3. The current primary is isolated (SIGSTOP) until Sentinel fails over to the returned
    //    node, and continued: a stale primary until Sentinel demotes it.
    let current_port = promoted;
    let pid = [&primary, &replica, &replica2]
        .into_iter()
        .find(|node| node.port() == current_port)
        .and_then(RedisServer::pid)
        .ok_or_else(|| ChaosError::Server("the redis primary does not run".into()))?;
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
    run.services.push(Box::new(replica2));
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
