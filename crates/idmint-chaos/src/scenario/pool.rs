//! T12, generator-ID pool exhaustion and churn. Five servers share a pool of three generator
//! IDs (`--generator-pool 3 --wait-for-claim`) on one etcd member, or on one Postgres
//! (`--coordinator postgres`), under HTTP load on server 0 and an idmint-client over all five.
//! Three claim and serve; the two left over start as spares: not ready, issuing nothing. Then:
//!
//! - `pool-rolling-etcd`, `pool-rolling-postgres`: every server is restarted in turn with
//!   SIGTERM, as a Kubernetes rolling update does, each step waiting until three serve again;
//!   the idmint-client must see every call answered;
//! - `pool-kill9-etcd`, `pool-kill9-postgres`: 100 rapid SIGKILL-and-restart cycles of seeded
//!   servers.
//!
//! At the end exactly three generator IDs are held, each by a live server (`idmint lease
//! list`): no claim leaks, and no dead process holds one past its lease TTL.

use std::time::{Duration, Instant};

use idmint_coord::testing::Postgres;

use super::{
    Run,
    postgres::{coordinator_args_with, stop_all},
};
use crate::{client::ClientMode, error::ChaosError};

/// The generator IDs the servers share.
const POOL: usize = 3;
/// Servers: two more than the pool.
const SERVERS: usize = POOL + 2;
/// SIGKILL-and-restart cycles.
const KILL_CYCLES: usize = 100;
/// The lease TTL (s): a killed server's generator ID is free again after it.
const TTL_S: u64 = 2;
/// How long the fleet may take to have `POOL` servers ready again after a change.
const SETTLE: Duration = Duration::from_secs(20);

/// Where the generator IDs are claimed.
#[derive(Debug, Clone, Copy)]
enum Store {
    Etcd,
    Postgres,
}

/// The churn a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Churn {
    /// Every server restarted in turn with SIGTERM.
    Rolling,
    /// Rapid SIGKILL and restart of seeded servers.
    Kill9,
}

/// T12, a rolling restart on one etcd member.
pub(super) fn rolling_etcd(run: &mut Run) -> Result<(), ChaosError> {
    churn(run, Store::Etcd, Churn::Rolling)
}

/// T12, a rolling restart on one Postgres.
pub(super) fn rolling_postgres(run: &mut Run) -> Result<(), ChaosError> {
    churn(run, Store::Postgres, Churn::Rolling)
}

/// T12, SIGKILL cycles on one etcd member.
pub(super) fn kill9_etcd(run: &mut Run) -> Result<(), ChaosError> {
    churn(run, Store::Etcd, Churn::Kill9)
}

/// T12, SIGKILL cycles on one Postgres.
pub(super) fn kill9_postgres(run: &mut Run) -> Result<(), ChaosError> {
    churn(run, Store::Postgres, Churn::Kill9)
}

fn churn(run: &mut Run, store: Store, churn: Churn) -> Result<(), ChaosError> {
    let postgres = match store {
        Store::Etcd => {
            run.etcd(1)?;
            None
        }
        Store::Postgres => Some(Postgres::start()?),
    };
    let (endpoints, _) = run.etcd_endpoints(false)?;
    let pool = POOL.to_string();
    let extra = ["--generator-pool", pool.as_str(), "--wait-for-claim"];
    for n in 0..SERVERS {
        let args = match &postgres {
            None => run.etcd_args(&endpoints, TTL_S as u32, 1_500, &extra),
            Some(pg) => coordinator_args_with(run, &pg.url(), n, "1500", &extra),
        };
        let i = run.node(args, false)?;
        run.nodes[i].start()?;
    }
    settle(run, "start")?;
    let spares: Vec<String> =
        run.nodes.iter().filter(|n| !n.ready()).map(|n| n.name.clone()).collect();
    crate::say!("   ready: {POOL} of {SERVERS}; spares (not ready) {}", spares.join(", "));
    run.http(0, 1, None);
    let urls = run.nodes.iter().map(|n| format!("http://{}", n.http)).collect();
    run.failover(urls, ClientMode::Batch);
    run.hold(Duration::from_secs(2));

    match churn {
        // SIGTERM (the claim is released), start again, wait for the pool.
        Churn::Rolling => {
            for i in 0..SERVERS {
                run.nodes[i].terminate();
                run.fired("sigterm", format!("{} SIGTERM (rolling restart)", run.nodes[i].name));
                run.nodes[i].start()?;
                settle(run, "a rolling restart step")?;
            }
            run.hold(Duration::from_secs(1));
        }
        // The killed server's claim lapses after its lease TTL.
        Churn::Kill9 => {
            for _ in 0..KILL_CYCLES {
                let i = run.rng.index(SERVERS);
                run.nodes[i].kill9();
                run.nodes[i].start()?;
            }
            let fired = format!("{KILL_CYCLES} SIGKILL-and-restart cycles of seeded servers");
            run.fired("kill9", fired);
            settle(run, "the kill cycles")?;
        }
    }
    run.hold(Duration::from_secs(TTL_S + 1));
    holders_are_live(run, postgres.as_ref(), &endpoints)?;
    if postgres.is_some() {
        // Clients and servers stop before the database goes away with this function.
        stop_all(run);
    }
    Ok(())
}

/// Waits until exactly `POOL` servers are ready (and the others are not).
fn settle(run: &Run, after: &str) -> Result<(), ChaosError> {
    let started = Instant::now();
    loop {
        let ready = run.nodes.iter().filter(|n| n.ready()).count();
        if ready == POOL {
            return Ok(());
        }
        if ready > POOL {
            return Err(ChaosError::Server(format!(
                "{ready} servers ready after {after}, on a pool of {POOL}"
            )));
        }
        if started.elapsed() > SETTLE {
            return Err(ChaosError::Server(format!(
                "only {ready} of {POOL} generator IDs served {} s after {after}",
                SETTLE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `idmint lease list`: exactly `POOL` claims are held, each by a server that runs.
fn holders_are_live(
    run: &Run,
    postgres: Option<&Postgres>,
    endpoints: &str,
) -> Result<(), ChaosError> {
    let store = match postgres {
        None => ["--etcd".to_owned(), endpoints.to_owned()],
        Some(pg) => ["--postgres".to_owned(), pg.url()],
    };
    let entries = run.lease_list(&store)?;
    let holders: Vec<String> = entries
        .iter()
        .filter(|e| e["claimed"].as_bool() == Some(true))
        .filter_map(|e| e["holder"].as_str().map(str::to_owned))
        .collect();
    // A holder reads `idmint pid N on HOST, since …`.
    let live: Vec<u32> = run.nodes.iter().filter_map(|n| n.pid()).collect();
    let pid_of = |holder: &str| -> Option<u32> {
        holder.split("pid ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
    };
    let dead: Vec<&String> =
        holders.iter().filter(|h| pid_of(h).is_none_or(|pid| !live.contains(&pid))).collect();
    crate::say!(
        "   lease list: {} holders ({}); dead: {}",
        holders.len(),
        holders.join(", "),
        dead.len()
    );
    if holders.len() != POOL || !dead.is_empty() {
        return Err(ChaosError::Server(format!(
            "after the churn, {} generator IDs are held ({}), {} of them by processes that no longer run; want exactly {POOL}, all live",
            holders.len(),
            holders.join(", "),
            dead.len()
        )));
    }
    Ok(())
}
