//! Fleet mode on Postgres with real binaries: `idmint serve --coordinator postgres --postgres
//! URL` processes against a real PostgreSQL server (`idmint_coord::testing::Postgres`). Two
//! servers, and ten cold-started at once, get distinct generator IDs and their IDs never repeat; `idmint lease list
//! --postgres` shows both claims, and after SIGTERM the released claim and its kept mark; the
//! lease upkeep of an idle server is measured from the table's update counter. Every process is
//! started by the test and stopped by its PID only. Without PostgreSQL the test skips, saying
//! why, unless `CI=true`.

#![cfg(feature = "postgres")]

use idmint_testkit::{check, http};
use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use crate::common::{Server, idmint, poll};
use idmint_coord::testing::{self, Postgres};

/// How long a server may take to start, or to stop after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(15);

/// Starts `idmint serve --coordinator postgres` on its own data directory and waits until it
/// is ready.
fn start(name: &str, url: &str, data_dir: &str) -> Server {
    let server = spawn(name, url, data_dir, &[]);
    assert!(poll(PROCESS_TIMEOUT, || ready(&server)), "{name} not ready:\n{}", server.log_text());
    server
}

/// Starts `idmint serve --coordinator postgres <extra>` and waits for its "serving" line only.
fn spawn(name: &str, url: &str, data_dir: &str, extra: &[&str]) -> Server {
    let child = serve(url, data_dir, extra).spawn().expect("start idmint serve");
    Server::adopt(name, child, PROCESS_TIMEOUT)
}

/// The command `idmint serve --coordinator postgres <extra>`, stderr piped.
fn serve(url: &str, data_dir: &str, extra: &[&str]) -> std::process::Command {
    let mut command = idmint(
        [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--coordinator",
            "postgres",
            "--postgres",
            url,
            "--data-dir",
            data_dir,
        ],
        &[],
    );
    command.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    command
}

fn ready(server: &Server) -> bool {
    http::send(server.addr, "GET", "/readyz", &[], None).ok().is_some_and(|r| r.status == 200)
}

fn generator_id(server: &Server) -> u64 {
    server.get("/v1/namespaces").ok().json()["namespaces"][0]["generator_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("{} holds no generator id", server.name))
}

/// `idmint lease list --postgres URL --json`, parsed.
fn lease_list(url: &str) -> serde_json::Value {
    let output = idmint(["lease", "list", "--json", "--postgres", url], &[])
        .output()
        .expect("run idmint lease list");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("lease list --json is JSON")
}

fn entry(listing: &serde_json::Value, generator_id: u64) -> serde_json::Value {
    listing["entries"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["generator_id"] == generator_id))
        .cloned()
        .unwrap_or_else(|| panic!("no entry for generator {generator_id}: {listing:#}"))
}

/// Rows updated in `idmint_claims` so far (every renewal and every mark write is one).
fn updates(server: &Postgres) -> u64 {
    // Pending statistics of other sessions are flushed within a second or so; force ours.
    let sql = "select pg_stat_force_next_flush(); \
               select n_tup_upd from pg_stat_user_tables where relname = 'idmint_claims'";
    let out = server.psql(sql).expect("read the update counter");
    out.lines().last().unwrap_or_default().trim().parse().unwrap_or(0)
}

/// Prints a measured number (shown with `--nocapture`).
#[allow(clippy::print_stderr, reason = "the measured numbers")]
fn measured(line: &str) {
    eprintln!("{line}");
}

#[test]
fn two_servers_on_postgres_get_distinct_generator_ids_and_never_repeat() {
    let Some(pg) = testing::available(Postgres::start()) else { return };
    let url = pg.url();
    let dirs = [tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir")];
    let path = |i: usize| dirs[i].path().to_string_lossy().into_owned();
    let mut a = start("server a", &url, &path(0));
    let b = start("server b", &url, &path(1));
    let (ga, gb) = (generator_id(&a), generator_id(&b));
    assert_ne!(ga, gb, "two servers share generator id {ga}");

    let mut ids = Vec::new();
    for _ in 0..50 {
        for server in [&a, &b] {
            ids.extend(server.get("/v1/batch?count=1000").ids());
        }
    }
    let unique = check::assert_unique(&ids);
    assert_eq!(ids.len(), 100_000);

    let listing = lease_list(&url);
    assert_eq!(listing["store"], "postgres");
    for (server, id) in [(&a, ga), (&b, gb)] {
        let held = entry(&listing, id);
        assert_eq!(held["claimed"], true, "{held:#}");
        let holder = held["holder"].as_str().unwrap_or_default();
        assert!(holder.contains(&format!("pid {}", server.pid())), "{held:#}");
        assert!(held["mark_ms"].as_u64().is_some(), "{held:#}");
    }

    // Idle upkeep: renewals and mark writes of two idle servers, from the table's counter.
    let (before, started) = (updates(&pg), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let (after, elapsed) = (updates(&pg), started.elapsed());
    let per_server = (after - before) as f64 / elapsed.as_secs_f64() / 2.0;
    measured(&format!(
        "postgres idle upkeep: {} updates of idmint_claims in {:.1} s by 2 idle servers: {per_server:.2} per second per server",
        after - before,
        elapsed.as_secs_f64()
    ));
    assert!(after > before, "idle servers must still renew their leases");

    // Upkeep under load: the same counter while both servers answer batches back to back.
    let (before, started) = (updates(&pg), Instant::now());
    let mut loaded = 0usize;
    while started.elapsed() < Duration::from_secs(5) {
        for server in [&a, &b] {
            let batch = server.get("/v1/batch?count=1000").ids();
            loaded += batch.len();
            ids.extend(batch);
        }
    }
    let (after, elapsed) = (updates(&pg), started.elapsed());
    measured(&format!(
        "postgres upkeep under load: {} updates of idmint_claims in {:.1} s while 2 servers issued {loaded} ids ({:.0} ids/s): {:.2} per second per server",
        after - before,
        elapsed.as_secs_f64(),
        loaded as f64 / elapsed.as_secs_f64(),
        (after - before) as f64 / elapsed.as_secs_f64() / 2.0
    ));

    let mark = entry(&lease_list(&url), ga)["mark_ms"].as_u64().expect("mark");
    a.signal("TERM");
    assert!(a.wait_exit(PROCESS_TIMEOUT).success(), "{}", a.full_log());
    let released = entry(&lease_list(&url), ga);
    assert_eq!(released["claimed"], false, "released on shutdown: {released:#}");
    assert!(released["mark_ms"].as_u64().is_some_and(|m| m >= mark), "the mark stays");
    // The freed generator ID goes to the next server, which starts above the kept mark.
    let c = start("server c", &url, &path(0));
    assert_eq!(generator_id(&c), ga);
    let more = c.get("/v1/batch?count=1000").ids();
    assert!(more.iter().all(|&id| check::time_ms(&check::snowflake(), id) > mark));
    ids.extend(more);
    check::report("two_servers_on_postgres", unique);
    check::assert_unique(&ids);
}

/// Ten `idmint serve` processes cold-started at once from one pool, each on its own data
/// directory: ten distinct generator IDs (below 50), and their IDs never repeat. The
/// claim statement's exclusive check is what keeps them apart; its negative control, the same
/// cold start without it, is `without_the_fence_cold_starts_share_ids` in idmint-coord's
/// `postgres_coordinator` tests.
#[test]
fn ten_servers_cold_started_at_once_get_ten_distinct_generator_ids() {
    let Some(pg) = testing::available(Postgres::start()) else { return };
    let url = pg.url();
    let dirs: Vec<_> = (0..10).map(|_| tempfile::tempdir().expect("dir")).collect();
    let pool = ["--generator-pool", "64"];
    // Every process is spawned before any is waited for.
    let children: Vec<_> = dirs
        .iter()
        .map(|dir| {
            let path = dir.path().to_string_lossy().into_owned();
            serve(&url, &path, &pool).spawn().expect("start idmint serve")
        })
        .collect();
    let started = Instant::now();
    let servers: Vec<Server> = children
        .into_iter()
        .enumerate()
        .map(|(i, child)| Server::adopt(&format!("server {i}"), child, PROCESS_TIMEOUT))
        .collect();
    for server in &servers {
        assert!(poll(PROCESS_TIMEOUT, || ready(server)), "{}", server.log_text());
    }
    measured(&format!(
        "postgres cold start: ten servers ready {} ms after the first was spawned",
        started.elapsed().as_millis()
    ));
    let generators: std::collections::BTreeSet<u64> = servers.iter().map(generator_id).collect();
    // Claimants that meet draw apart (idmint_coord::Probe): below 5N whatever their draws.
    assert_eq!(generators.len(), 10, "ten distinct: {generators:?}");
    assert!(generators.iter().all(|&id| id < 50), "below 50: {generators:?}");
    let mut ids = Vec::new();
    for _ in 0..10 {
        for server in &servers {
            ids.extend(server.get("/v1/batch?count=1000").ids());
        }
    }
    assert_eq!(ids.len(), 100_000);
    check::report("ten_servers_cold_started_at_once", check::assert_unique(&ids));
    let listing = lease_list(&url);
    for server in &servers {
        let held = entry(&listing, generator_id(server));
        let holder = held["holder"].as_str().unwrap_or_default();
        assert!(holder.contains(&format!("pid {}", server.pid())), "{held:#}");
    }
}

/// A holder killed with SIGKILL: a spare waiting for the one generator ID of a pool takes it
/// over once the lease expired by the database's clock, and starts above the holder's mark.
/// The time from the kill to the spare's readiness is printed (target: the TTL + 1 s).
#[test]
fn a_spare_takes_over_a_killed_holder_within_the_lease() {
    let Some(pg) = testing::available(Postgres::start()) else { return };
    let url = pg.url();
    let dirs = [tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir")];
    let path = |i: usize| dirs[i].path().to_string_lossy().into_owned();
    let fleet = [
        "--generator-pool",
        "1",
        "--lease-ttl",
        "2",
        "--window-ms",
        "2000",
        "--claim-retry-ms",
        "100",
    ];
    let mut holder = spawn("holder", &url, &path(0), &fleet);
    assert!(poll(PROCESS_TIMEOUT, || ready(&holder)), "{}", holder.log_text());
    let mut spare_args = fleet.to_vec();
    spare_args.push("--wait-for-claim");
    let spare = spawn("spare", &url, &path(1), &spare_args);
    assert!(!ready(&spare), "the spare must wait: the only generator id is held");
    let mut ids = holder.get("/v1/batch?count=1000").ids();
    // Let a renewal or two pass, so that the kill lands mid-lease.
    std::thread::sleep(Duration::from_millis(1_500));
    ids.extend(holder.get("/v1/batch?count=1000").ids());
    let mark = entry(&lease_list(&url), 0)["mark_ms"].as_u64().expect("mark");
    holder.kill9();
    let killed = Instant::now();
    assert!(poll(Duration::from_secs(15), || ready(&spare)), "{}", spare.log_text());
    let takeover = killed.elapsed();
    measured(&format!(
        "postgres takeover: spare ready {} ms after the holder's SIGKILL (lease ttl 2000 ms, claim retry 100 ms)",
        takeover.as_millis()
    ));
    let after = spare.get("/v1/batch?count=1000").ids();
    assert!(after.iter().all(|&id| check::time_ms(&check::snowflake(), id) > mark));
    ids.extend(after);
    check::report("a_spare_takes_over_a_killed_holder", check::assert_unique(&ids));
}

/// A server that claimed on one Postgres, restarted on another (a move, a logical restore),
/// is refused with one `error:` line until `idmint lease adopt-cluster --postgres` adopts the
/// new one; then it serves above what it issued.
#[test]
fn another_postgres_is_refused_until_adopted() {
    let Some(first) = testing::available(Postgres::start()) else { return };
    let second = Postgres::start().expect("a second server");
    let dir = tempfile::tempdir().expect("dir");
    let data_dir = dir.path().to_string_lossy().into_owned();
    let mut a = start("on the first", &first.url(), &data_dir);
    let ids = a.get("/v1/batch?count=1000").ids();
    a.signal("TERM");
    assert!(a.wait_exit(PROCESS_TIMEOUT).success(), "{}", a.full_log());

    let mut refused = spawn_refused(&second.url(), &data_dir);
    let mut status = None;
    let exited = poll(PROCESS_TIMEOUT, || {
        status = refused.try_wait().expect("try_wait");
        status.is_some()
    });
    if !exited {
        let _ = refused.kill();
        let _ = refused.wait();
        panic!("idmint serve did not refuse another postgres");
    }
    let status = status.expect("exited");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut refused.stderr.take().expect("stderr"), &mut stderr)
        .expect("read stderr");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line:\n{stderr}");
    assert!(stderr.starts_with("error: ") && stderr.contains("postgres system"), "{stderr}");

    let adopted = idmint(["lease", "adopt-cluster", "--json", "--postgres", &second.url()], &[])
        .output()
        .expect("run adopt-cluster");
    assert!(adopted.status.success(), "{}", String::from_utf8_lossy(&adopted.stderr));
    let b = start("on the adopted second", &second.url(), &data_dir);
    let more = b.get("/v1/batch?count=1000").ids();
    let last = ids.iter().max().copied().unwrap_or_default();
    assert!(more.iter().all(|&id| id > last), "the adopted server starts above what it issued");
}

/// Starts a server that must refuse to start, its stderr piped.
fn spawn_refused(url: &str, data_dir: &str) -> std::process::Child {
    serve(url, data_dir, &[]).spawn().expect("start idmint serve")
}
