//! T18, `postgres-promotion`: a Postgres primary and an asynchronous streaming standby (its
//! replication through the harness's proxy), two `idmint serve` with a `sequence` namespace on
//! them, under HTTP, gRPC and idmint-client load; replication is blackholed for 2–4 s (seeded;
//! so the standby lags, deterministically), the primary is killed with SIGKILL, one server
//! (seeded) too, the standby is promoted and that server restarted. The post-promotion bump
//! must keep the ranges the promoted standby hands out above those the lost primary did;
//! without it (`no-promotion-bump`) they come out again. Also the Postgres coordinator under T6
//! (`pause-takeover-postgres`) and T8 (`partition-server-postgres`).

use std::time::Duration;

use idmint_coord::testing::Postgres;

use super::Run;
use crate::{client::ClientMode, error::ChaosError, proxy::Proxy};

/// Ranges of one batch each: the primary commits many of them while replication is cut, and
/// the load stays bound by Postgres commits (sequence IDs are otherwise nearly free, and the
/// checker holds every ID in memory).
const SEGMENT: &str =
    "[server.namespaces.segment]\ninitial_step = 10000\nmin_step = 10000\nmax_step = 10000\n";

/// The scenario (anchor T18).
pub(super) fn promotion(run: &mut Run) -> Result<(), ChaosError> {
    run.layout("sequence")?;
    let mut primary = Postgres::start()?;
    let replication = Proxy::start(run.runtime.handle(), ([127, 0, 0, 1], primary.port()).into())?;
    let standby = Postgres::start_standby(replication.addr.port())?;
    // Both hosts; a session is only opened on the one that accepts writes, so the servers
    // follow the promotion without a restart.
    let url = format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/idmint?target_session_attrs=read-write&connect_timeout=2",
        primary.port(),
        standby.port()
    );
    let config = run.dir.join("postgres.toml");
    // The data directory holds nothing of a sequence namespace, but it is opened: keep it in
    // the run's directory.
    let data = run.dir.join("data");
    let text = format!(
        "data_dir = \"{}\"\n\
         postgres = \"{url}\"\n\
         postgres_promotion_margin = 1000000000\n\n\
         [[server.namespaces]]\n\
         name = \"default\"\n\
         layout = \"sequence\"\n\n\
         {SEGMENT}",
        data.display()
    );
    std::fs::write(&config, text).map_err(ChaosError::io("write the server configuration"))?;
    let extra =
        ["--config".to_owned(), config.display().to_string(), "--log".into(), "info".into()];
    for _ in 0..2 {
        let args = run.with_control(extra.to_vec());
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    // Paced HTTP clients: sequence IDs are cheap, and a checked history of a few tens of
    // millions of IDs is enough to show re-issued ranges (the control repeats millions).
    run.pace = (super::HTTP_BATCH, Duration::from_millis(4));
    run.http(0, 1, None);
    run.http(1, 1, None);
    run.grpc(1);
    let urls = run.nodes.iter().map(|n| format!("http://{}", n.http)).collect();
    run.failover(urls, ClientMode::Batch);
    let d = run.secs(2.0);
    run.hold(d);
    replication.blackhole();
    run.fired("partition_replication", "primary ↔ standby blackholed: the standby lags".into());
    // How long the standby lags (seeded): 2–4 s of allocations on the primary alone.
    let lag = Duration::from_millis(run.rng.between(2_000, 4_000));
    let d = run.secs(lag.as_secs_f64()).max(Duration::from_secs(2));
    run.hold(d);
    let sql = "select coalesce(max(max_id), 0) from idmint_segments";
    let (ahead, behind) = (primary.psql(sql)?, standby.psql(sql)?);
    primary.kill()?;
    run.fired(
        "postgres_primary_kill",
        format!("primary SIGKILL at max_id {ahead}; the standby has {behind}: the rest is lost"),
    );
    // A server that restarts across the failover has no memory of the ranges it used (a
    // running one refuses a range below its last: the allocator's tripwire), so only the
    // store's raise keeps it above them.
    let restarted = run.rng.index(2);
    run.nodes[restarted].kill9();
    let name = run.nodes[restarted].name.clone();
    run.fired("kill9", format!("{name} SIGKILL, restarted after the promotion"));
    run.hold(Duration::from_secs(1));
    standby.promote()?;
    run.fired("postgres_promote", "pg_ctl promote: the lagging standby is the primary".into());
    run.start(restarted)?;
    let d = run.secs(4.0).max(Duration::from_secs(3));
    run.hold(d);
    // Clients and servers stop before the databases go away with this function.
    stop_all(run);
    Ok(())
}

/// Flags of server `n` with `--coordinator postgres` at `url`: lease TTL 2 s, a 16 s window,
/// and a data directory of its own, as on separate machines (each remembers only its own
/// marks, so the store's marks and the fence keep a taker above the holder it replaced).
fn coordinator_args(run: &Run, url: &str, n: usize, extra: &[&str]) -> Vec<String> {
    coordinator_args_with(run, url, n, "16000", extra)
}

/// [`coordinator_args`] with another window (ms).
pub(super) fn coordinator_args_with(
    run: &Run,
    url: &str,
    n: usize,
    window_ms: &str,
    extra: &[&str],
) -> Vec<String> {
    let data = run.dir.join(format!("fleet-data-{n}")).display().to_string();
    let mut args: Vec<String> = [
        "--coordinator",
        "postgres",
        "--postgres",
        url,
        "--data-dir",
        data.as_str(),
        "--lease-ttl",
        "2",
        "--window-ms",
        window_ms,
        "--claim-retry-ms",
        "100",
        "--log",
        "info",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if window_ms.parse::<u64>().is_ok_and(|ms| ms > 2_000) {
        // A holder that still serves inside its window after its lease is gone is the fence's
        // case; `idmint serve` refuses a window longer than the lease unless told.
        args.push("--allow-long-window".to_owned());
    }
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    run.with_control(args)
}

/// Stops clients and servers before the database goes away with the scenario's function.
pub(super) fn stop_all(run: &mut Run) {
    run.stop_clients();
    for node in &mut run.nodes {
        node.terminate();
    }
}

/// T6 on Postgres, `pause-takeover-postgres`: two servers with `--coordinator postgres` on one
/// Postgres, server 0 holding generator ID 0 of a pool of 2, a spare waiting for the one ID of
/// its pool; server 0 is paused with SIGSTOP for 6 s (3× the 2 s TTL), so its lease lapses by
/// the database's clock and the spare takes generator 0 over, above its mark; then server 0
/// continues. The fence (the claim's epoch on every mark write) and the stored mark keep them
/// apart; without it (`no-pg-fence`) both issue the same times from generator 0.
pub(super) fn pause_takeover(run: &mut Run) -> Result<(), ChaosError> {
    let server = Postgres::start()?;
    let url = server.url();
    let a_args = coordinator_args(run, &url, 0, &["--generator-pool", "2"]);
    let a = run.node(a_args, false)?;
    run.start(a)?;
    let b_args = coordinator_args(run, &url, 1, &["--generator-pool", "1", "--wait-for-claim"]);
    let b = run.node(b_args, false)?;
    run.nodes[b].start()?;
    run.http(a, 2, None);
    run.http(b, 1, None);
    run.grpc(a);
    run.hold(Duration::from_secs(3));
    run.nodes[a].pause()?;
    run.fired("sigstop", "s0 SIGSTOP for 6 s (3× the lease TTL)".into());
    run.hold(Duration::from_secs(6));
    run.nodes[a].resume()?;
    run.fired("sigcont", "s0 SIGCONT".into());
    let d = run.secs(8.0).max(Duration::from_secs(4));
    run.hold(d);
    stop_all(run);
    Ok(())
}

/// T8 on Postgres, `partition-server-postgres`: three servers with `--coordinator postgres`,
/// each reaching Postgres through its own TCP proxy, the third a spare; server 0's proxy
/// blackholes Postgres for 6 s (3× the 2 s lease TTL), then delays it 75 ms for 2 s, then
/// heals. The partitioned server stops extending its window at its own deadline; the spare
/// may take its generator ID over, strictly above its mark.
pub(super) fn partition_server_postgres(run: &mut Run) -> Result<(), ChaosError> {
    let server = Postgres::start()?;
    let mut proxies = Vec::new();
    for n in 0..3 {
        let proxy = Proxy::start(run.runtime.handle(), ([127, 0, 0, 1], server.port()).into())?;
        let url = format!(
            "postgresql://postgres@127.0.0.1:{}/idmint?connect_timeout=2",
            proxy.addr.port()
        );
        let spare = n == 2;
        let mut extra = vec!["--generator-pool", "2"];
        if spare {
            extra.push("--wait-for-claim");
        }
        let args = coordinator_args(run, &url, n, &extra);
        let i = run.node(args, false)?;
        if spare {
            run.nodes[i].start()?;
        } else {
            run.start(i)?;
        }
        proxies.push(proxy);
    }
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.http(2, 1, None);
    run.hold(Duration::from_secs(2));
    proxies[0].blackhole();
    run.fired("partition_postgres", "s0 ↔ postgres blackholed for 6 s".into());
    run.hold(Duration::from_secs(6));
    proxies[0].delay(75);
    run.fired("delay_postgres", "s0 ↔ postgres delayed 75 ms for 2 s".into());
    run.hold(Duration::from_secs(2));
    proxies[0].heal();
    run.fired("heal", "s0 ↔ postgres healed".into());
    let d = run.secs(4.0).max(Duration::from_secs(3));
    run.hold(d);
    stop_all(run);
    Ok(())
}

/// T18 on the Postgres coordinator, `postgres-promotion-coordinator`: a primary and an
/// asynchronous standby replicating through the harness's proxy; two servers with
/// `--coordinator postgres` on both hosts (`target_session_attrs=read-write`), snowflake IDs
/// under load; replication blackholed 2–4 s (seeded) so the standby lacks the last marks, the
/// primary SIGKILLed, the standby promoted. The first server to reconnect finds the new
/// timeline, raises every mark by the promotion margin (60 s) and ends every claim, so the
/// servers claim again above marks the lost primary may have held.
pub(super) fn coordinator_promotion(run: &mut Run) -> Result<(), ChaosError> {
    let mut primary = Postgres::start()?;
    let replication = Proxy::start(run.runtime.handle(), ([127, 0, 0, 1], primary.port()).into())?;
    let standby = Postgres::start_standby(replication.addr.port())?;
    let url = format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/idmint?target_session_attrs=read-write&connect_timeout=2",
        primary.port(),
        standby.port()
    );
    for n in 0..2 {
        // A 1 s window: marks are written every half second, so the lagging standby lacks some.
        let extra = ["--generator-pool", "2", "--wait-for-claim"];
        let args = coordinator_args_with(run, &url, n, "1000", &extra);
        let i = run.node(args, false)?;
        run.start(i)?;
    }
    run.http(0, 2, None);
    run.http(1, 1, None);
    run.grpc(1);
    let d = run.secs(2.0);
    run.hold(d);
    replication.blackhole();
    run.fired("partition_replication", "primary ↔ standby blackholed: the standby lags".into());
    let lag = Duration::from_millis(run.rng.between(2_000, 4_000));
    run.hold(lag);
    let sql = "select coalesce(max(mark_ms), 0) from idmint_claims";
    let (ahead, behind) = (primary.psql(sql)?, standby.psql(sql)?);
    primary.kill()?;
    run.fired(
        "postgres_primary_kill",
        format!("primary SIGKILL with marks up to {ahead}; the standby has {behind}"),
    );
    run.hold(Duration::from_secs(1));
    standby.promote()?;
    run.fired("postgres_promote", "pg_ctl promote: the lagging standby is the primary".into());
    // Past the claims' deadlines and windows: the servers claim again on the promoted standby.
    let d = run.secs(8.0).max(Duration::from_secs(8));
    run.hold(d);
    stop_all(run);
    Ok(())
}
