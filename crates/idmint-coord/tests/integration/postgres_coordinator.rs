//! `PostgresCoordinator` against real PostgreSQL servers (`idmint_coord::testing::Postgres`):
//! the conformance suite, ten concurrent cold starts, a paused holder taken over (each with
//! the no-pg-fence negative control), leases that outlive their TTL while renewed, the
//! takeover time after a holder dies, a changed history raising every mark once, and the
//! lineage a server remembers. Each test starts its own server on a free loopback port; they
//! skip without PostgreSQL, unless `CI=true`.

#![cfg(all(feature = "test-util", feature = "postgres"))]

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::takeover::Takeover;
use idmint_coord::{
    Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds, PostgresCoordinator,
    PostgresLeaseOptions, PostgresOptions, Remembered, conformance,
    testing::{self, Postgres},
};

/// Short leases, so that takeovers are quick.
fn lease() -> PostgresLeaseOptions {
    PostgresLeaseOptions { ttl: Duration::from_secs(2), margin: Duration::from_millis(500) }
}

fn options() -> PostgresOptions {
    PostgresOptions { request_timeout: Duration::from_secs(3), ..PostgresOptions::default() }
}

async fn connect(server: &Postgres, fenced: bool) -> PostgresCoordinator {
    let coordinator =
        PostgresCoordinator::connect(&server.url(), options(), lease()).await.expect("connect");
    #[cfg(idmint_negative_controls)]
    let coordinator = if fenced { coordinator } else { coordinator.without_fence() };
    #[cfg(not(idmint_negative_controls))]
    assert!(fenced, "the negative control needs a build with IDMINT_NEGATIVE_CONTROLS=1");
    coordinator
}

/// Prints a measured number (shown with `--nocapture`).
#[allow(clippy::print_stdout, reason = "the measured numbers")]
fn report(line: &str) {
    println!("{line}");
}

fn request(namespace: &str, ids: GeneratorIds) -> ClaimRequest {
    ClaimRequest::new(namespace, ids, "test-layout")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_coordinator_passes_the_conformance_suite() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let url = server.url();
    let handles = move || {
        let connecting = PostgresCoordinator::connect(&url, options(), lease());
        let handle = tokio::runtime::Handle::current();
        let coordinator =
            tokio::task::block_in_place(|| handle.block_on(connecting)).expect("connect");
        Arc::new(coordinator) as Arc<dyn Coordinator>
    };
    conformance::run_all(&handles).await;
}

/// Ten coordinators (ten connections) claim from one pool at once: the generator IDs each
/// got, with duplicates kept. "At once" is made exact, not left to the scheduler: the test
/// holds a SHARE lock on `idmint_claims`, which lets every claimant list the live claims (all
/// see none) but makes its claim statement wait; once all ten wait, the lock is released. So
/// every claimant asks for generator ID 0 first, and only the claim statement's exclusive
/// check can keep them apart.
async fn cold_start(server: &Postgres, fenced: bool) -> Vec<u64> {
    let url = server.url();
    // Long enough for the wait on the lock.
    let options =
        PostgresOptions { request_timeout: Duration::from_secs(20), ..PostgresOptions::default() };
    let mut coordinators = Vec::new();
    for _ in 0..10 {
        // Connecting creates the schema, which the lock below would block.
        let coordinator =
            PostgresCoordinator::connect(&url, options.clone(), lease()).await.expect("connect");
        #[cfg(idmint_negative_controls)]
        let coordinator = if fenced { coordinator } else { coordinator.without_fence() };
        coordinators.push(coordinator);
    }
    let _ = fenced;
    let (locker, connection) =
        tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect the locker");
    tokio::spawn(connection);
    locker.batch_execute("BEGIN; LOCK TABLE idmint_claims IN SHARE MODE").await.expect("lock");
    let tasks: Vec<_> = coordinators
        .into_iter()
        .enumerate()
        .map(|(i, coordinator)| {
            tokio::spawn(async move {
                let req = request("cold", GeneratorIds::Pool { count: 4096 })
                    .with_holder(format!("server {i}"));
                let claim = coordinator.claim(&req).await.expect("claim");
                (claim.generator_id(), coordinator, claim)
            })
        })
        .collect();
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()";
    let started = std::time::Instant::now();
    loop {
        let row = locker.query_one(waiting, &[]).await.expect("count the waiting claims");
        let count: i64 = row.get(0);
        if count == 10 {
            break;
        }
        if started.elapsed() > Duration::from_secs(15) {
            let rows = locker
                .query(
                    "SELECT wait_event_type, wait_event, state, query FROM pg_stat_activity",
                    &[],
                )
                .await
                .expect("activity");
            let activity: Vec<String> = rows
                .iter()
                .map(|r| {
                    format!(
                        "{:?} {:?} {:?} {:?}",
                        r.get::<_, Option<String>>(0),
                        r.get::<_, Option<String>>(1),
                        r.get::<_, Option<String>>(2),
                        r.get::<_, Option<String>>(3)
                    )
                })
                .collect();
            panic!("only {count} claims wait: {activity:#?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    locker.batch_execute("COMMIT").await.expect("release the lock");
    let mut ids = Vec::new();
    let mut keep = Vec::new();
    for task in tasks {
        let (id, coordinator, claim) = task.await.expect("task");
        ids.push(id);
        keep.push((coordinator, claim));
    }
    ids
}

fn distinct(ids: &[u64]) -> bool {
    ids.iter().collect::<HashSet<_>>().len() == ids.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_cold_starts_get_ten_distinct_ids() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let ids = cold_start(&server, true).await;
    assert!(distinct(&ids), "a generator id was handed out twice: {ids:?}");
    // Claimants that meet spread out (`Probe`), below 5N whatever their draws.
    assert!(ids.iter().all(|&id| id < 50), "{ids:?}");
}

/// The negative control: without the exclusive check, the same cold start hands generator
/// ID 0 to all ten, and the check above catches it.
#[cfg(idmint_negative_controls)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fence_cold_starts_share_ids() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let ids = cold_start(&server, false).await;
    report(&format!("without the fence, ten cold starts got {ids:?}"));
    assert!(!distinct(&ids), "the check must catch shared ids, got {ids:?}");
    assert_eq!(ids, [0; 10], "every claimant took the first free ID");
}

/// Holder A stores a window and "pauses" (its renewals stop, its claim still reads Held); B
/// retries every 20 ms until it takes the generator ID; A wakes up and extends its window.
async fn takeover(server: &Postgres, fenced: bool) -> Takeover {
    let (a, b) = (connect(server, fenced).await, connect(server, fenced).await);
    let req = request("paused", GeneratorIds::Fixed(0));
    let old = a.claim(&req.clone().with_holder("server a")).await.expect("a claims");
    a.store_mark(&old, 10_000).await.expect("a stores its window");
    assert!(a.pause_renewals(&old));
    let paused = Instant::now();
    let new = loop {
        match b.claim(&req.clone().with_holder("server b")).await {
            Ok(claim) => break claim,
            Err(Error::Conflict { holder, .. }) if paused.elapsed() < Duration::from_secs(15) => {
                assert!(holder.contains("server a"), "{holder}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => panic!("b must take the id once a's lease expires, got {other:?}"),
        }
    };
    let takeover = paused.elapsed();
    let old_state = old.state();
    let old_holder_stored_after = match a.store_mark(&old, 20_000).await {
        Ok(()) => true,
        Err(Error::ClaimLost { .. }) => false,
        Err(e) => panic!("unexpected error from the paused holder: {e}"),
    };
    if fenced {
        b.store_mark(&new, 30_000).await.expect("the new holder stores");
    }
    Takeover {
        before_pause: 10_000,
        new_holder_read: new.mark_ms(),
        old_holder_stored_after,
        old_state,
        takeover,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_cannot_store_after_a_takeover() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let outcome = takeover(&server, true).await;
    report(&format!(
        "takeover {} ms after the holder paused (lease ttl {} ms)",
        outcome.takeover.as_millis(),
        lease().ttl.as_millis()
    ));
    assert!(
        matches!(outcome.old_state, ClaimState::Held { until: Some(t) } if t < Instant::now()),
        "the paused holder still reads Held (stale), so the fence refused: {outcome:?}"
    );
    assert!(!outcome.old_holder_stored_after, "{outcome:?}");
    assert_eq!(outcome.new_holder_read, Some(10_000), "the new holder reads the old mark");
    assert!(!outcome.duplicates_possible(), "{outcome:?}");
    // The lease is timed by the database, so B cannot take over before A's lease expired:
    // at least the TTL after A's last renewal, which was before the pause.
    assert!(outcome.takeover >= lease().ttl - lease().ttl / 3, "{outcome:?}");
}

/// The negative control: without the fence the paused holder's write succeeds, and the check
/// above catches it.
#[cfg(idmint_negative_controls)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fence_a_paused_holder_still_stores() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let outcome = takeover(&server, false).await;
    assert!(outcome.old_holder_stored_after, "{outcome:?}");
    assert!(outcome.duplicates_possible(), "the check must catch the unfenced takeover");
}

/// Waits (at most `limit`) until the claim reads `Lost`.
async fn lost_within(claim: &Claim, limit: Duration) -> bool {
    let mut state = claim.watch();
    tokio::time::timeout(limit, state.wait_for(|s| *s == ClaimState::Lost)).await.is_ok()
}

/// A renewed claim outlives its TTL, its deadline advances, and it costs one statement per
/// TTL/3; the counts are printed (the lease upkeep).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_claim_outlives_its_ttl_and_its_deadline_advances() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let a = connect(&server, true).await;
    let claim = a.claim(&request("renewed", GeneratorIds::Fixed(0))).await.expect("claim");
    let ClaimState::Held { until: Some(first) } = claim.state() else { panic!("not held") };
    let (trips, renewals) = (a.round_trips(), a.renewals());
    let idle = lease().ttl * 3;
    // Waiting on another process's clock (the database's): the verdict is the claim's state.
    let lost = lost_within(&claim, idle).await;
    assert!(!lost, "a renewed claim must outlive three TTLs");
    let ClaimState::Held { until: Some(later) } = claim.state() else { panic!("not held") };
    assert!(later > first, "the deadline advances with renewals");
    let (trips, renewals) = (a.round_trips() - trips, a.renewals() - renewals);
    report(&format!(
        "idle upkeep over {} ms with ttl {} ms: {renewals} renewals, {trips} statements",
        idle.as_millis(),
        lease().ttl.as_millis()
    ));
    assert!(renewals >= 3, "renewed about every ttl/3, got {renewals}");
    // Another claimant is refused the whole time.
    let b = connect(&server, true).await;
    assert!(matches!(
        b.claim(&request("renewed", GeneratorIds::Fixed(0))).await,
        Err(Error::Conflict { .. })
    ));
    a.release(&claim).await.expect("release");
    b.claim(&request("renewed", GeneratorIds::Fixed(0))).await.expect("claim after release");
}

/// A holder whose renewals fail (the database killed) turns `Lost` by itself at its own
/// deadline, and stores nothing after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_renewals_fail_turns_lost_at_its_deadline() {
    let Some(mut server) = testing::available(Postgres::start()) else { return };
    let a = connect(&server, true).await;
    let claim = a.claim(&request("cut", GeneratorIds::Fixed(0))).await.expect("claim");
    a.store_mark(&claim, 1_000).await.expect("store");
    server.kill().expect("kill postgres");
    assert!(lost_within(&claim, lease().ttl * 3).await, "the claim must turn lost");
    assert!(matches!(a.store_mark(&claim, 2_000).await, Err(Error::ClaimLost { .. })));
}

/// A changed history (a promoted standby, a restore) raises every mark by the margin once and
/// ends every claim; a second connection raises nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_history_raises_every_mark_once_and_ends_every_claim() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let a = connect(&server, true).await;
    let claim = a.claim(&request("history", GeneratorIds::Fixed(3))).await.expect("claim");
    a.store_mark(&claim, 50_000).await.expect("store");
    server
        .psql(
            "update idmint_meta set value = 'system_identifier=1 timeline=1' where key = 'history'",
        )
        .expect("tamper");
    let margin = 5_000;
    let raising = PostgresOptions { promotion_mark_margin_ms: margin, ..options() };
    let b = PostgresCoordinator::connect(&server.url(), raising.clone(), lease())
        .await
        .expect("connect after the history changed");
    // The claim ended: a's renewal fails, its next write is refused.
    assert!(lost_within(&claim, lease().ttl * 2).await, "a's claim must end");
    assert!(matches!(a.store_mark(&claim, 60_000).await, Err(Error::ClaimLost { .. })));
    let again = b.claim(&request("history", GeneratorIds::Fixed(3))).await.expect("claim");
    assert_eq!(again.mark_ms(), Some(50_000 + margin), "raised once by the margin");
    b.release(&again).await.expect("release");
    let c = PostgresCoordinator::connect(&server.url(), raising, lease()).await.expect("connect");
    let third = c.claim(&request("history", GeneratorIds::Fixed(3))).await.expect("claim");
    assert_eq!(third.mark_ms(), Some(50_000 + margin), "not raised twice");
}

/// The lineage names the database's system, so a server's data directory remembers it, and
/// another Postgres cluster is refused until an operator adopts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_remembers_the_database_it_claimed_on() {
    let Some(first) = testing::available(Postgres::start()) else { return };
    let other = Postgres::start().expect("a second server");
    let dir = tempfile::tempdir().expect("data dir");
    let req = request("remembered", GeneratorIds::Fixed(0));
    let lineage = connect(&first, true).await.lineage().await.expect("lineage").expect("some");
    assert!(lineage.recorded && lineage.store.starts_with("postgres system "), "{lineage:?}");
    {
        let remembered =
            Remembered::open(dir.path(), Arc::new(connect(&first, true).await)).expect("open");
        let claim = remembered.claim(&req).await.expect("claim");
        remembered.store_mark(&claim, 7_000).await.expect("store");
        remembered.release(&claim).await.expect("release");
    }
    let remembered =
        Remembered::open(dir.path(), Arc::new(connect(&other, true).await)).expect("open");
    match remembered.claim(&req).await {
        Err(Error::StoreChanged { remembered, found, .. }) => {
            assert_eq!(remembered, lineage.store);
            assert_ne!(found, lineage.store);
        }
        other => panic!("another postgres cluster must be refused, got {other:?}"),
    }
    // The operator adopts the other cluster (every server stopped): its marks are raised to
    // the floor and the adoption recorded, so the remembering server claims on it, never
    // below what it remembers.
    let operator = connect(&other, true).await;
    let elsewhere = request("remembered", GeneratorIds::Fixed(1));
    let claim = operator.claim(&elsewhere).await.expect("claim");
    operator.store_mark(&claim, 50).await.expect("store");
    operator.release(&claim).await.expect("release");
    assert_eq!(operator.adopt(100_000).await.expect("adopt"), (1, 0));
    assert_eq!(operator.adopt(100_000).await.expect("adopt again"), (0, 1), "harmless");
    let claim = remembered.claim(&req).await.expect("claim on the adopted cluster");
    assert_eq!(claim.mark_ms(), Some(7_000), "never below the remembered mark");
    remembered.release(&claim).await.expect("release");
    let raised = remembered.claim(&elsewhere).await.expect("claim");
    assert_eq!(raised.mark_ms(), Some(100_000), "raised to the floor");
}

/// How a database can be emptied under a server that remembers it, on the same Postgres
/// cluster (same system identifier, same database name where it applies).
#[derive(Debug, Clone, Copy)]
enum Wipe {
    /// Every idmint table dropped and created again by the next connection.
    DroppedTables,
    /// The server pointed at another, empty database of the same cluster.
    AnotherDatabase,
}

/// A server that remembers its marks is refused on a wiped database of the same cluster, or
/// on another database there: both would let another server claim its generator ID from
/// mark 0. The store's UUID (written once with the schema) tells them apart; the negative
/// control is the lineage without it, which must name the wiped store as the same one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_refused_on_a_wiped_database_of_the_same_cluster() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    for wipe in [Wipe::DroppedTables, Wipe::AnotherDatabase] {
        check_wipe(&server, wipe).await;
    }
}

async fn check_wipe(server: &Postgres, wipe: Wipe) {
    let namespace = format!("wiped-{wipe:?}").to_lowercase();
    let req = request(&namespace, GeneratorIds::Fixed(0));
    let dir = tempfile::tempdir().expect("data dir");
    let before = {
        let first = connect(server, true).await;
        let lineage = first.lineage().await.expect("lineage").expect("some");
        let remembered = Remembered::open(dir.path(), Arc::new(first)).expect("open");
        let claim = remembered.claim(&req).await.expect("claim");
        remembered.store_mark(&claim, 7_000).await.expect("store");
        remembered.release(&claim).await.expect("release");
        lineage
    };
    let url = match wipe {
        Wipe::DroppedTables => {
            server
                .psql("DROP TABLE idmint_claims, idmint_segments, idmint_counters, idmint_meta CASCADE")
                .expect("drop the tables");
            server.url()
        }
        Wipe::AnotherDatabase => {
            server.psql("CREATE DATABASE idmint_other").expect("create a database");
            server.url().replace("/idmint", "/idmint_other")
        }
    };
    let wiped = PostgresCoordinator::connect(&url, options(), lease()).await.expect("connect");
    let after = wiped.lineage().await.expect("lineage").expect("some");
    // The negative control: without the store's name the two lineages are one for a wiped
    // database, and the server would claim there from mark 0.
    let without_name = |store: &str| store.split(", store ").next().unwrap_or_default().to_owned();
    if matches!(wipe, Wipe::DroppedTables) {
        assert_eq!(without_name(&before.store), without_name(&after.store), "{wipe:?}");
    }
    assert_ne!(before.store, after.store, "{wipe:?}: the store's name must change");
    let remembered = Remembered::open(dir.path(), Arc::new(wiped)).expect("open");
    match remembered.claim(&req).await {
        Err(Error::StoreChanged { remembered, found, .. }) => {
            assert_eq!(remembered, before.store, "{wipe:?}");
            assert_eq!(found, after.store, "{wipe:?}");
        }
        other => panic!("{wipe:?}: a wiped database must be refused, got {other:?}"),
    }
}
