//! The etcd backend against real `etcd` processes (`idmint_coord::testing::EtcdCluster`): the
//! conformance suite in both schemes, cold starts, lost leases, a paused holder taken over
//! (with the no-fence negative control), deadlines, LableOrg's exact keys, and an etcd
//! leader kill. Without `etcd` on PATH the tests skip, unless `CI=true`.

#![cfg(all(feature = "etcd", feature = "test-util"))]

use std::{
    collections::HashSet,
    sync::Arc,
    time::{Duration, Instant},
};

use crate::takeover::Takeover;
use idmint_coord::{
    Claim, ClaimRequest, ClaimState, Coordinator, Error, EtcdCoordinator, EtcdOptions,
    GeneratorIds, Scheme, conformance,
    testing::{self, EtcdCluster},
};
use idmint_etcd::{Client, GetOptions, PutOptions, Txn, TxnOp};

/// Test options: etcd's minimum TTL (2 s), so that takeovers are quick.
fn options(scheme: Scheme) -> EtcdOptions {
    EtcdOptions {
        prefix: "test/".into(),
        lease_ttl_secs: 2,
        margin: Duration::from_millis(500),
        request_timeout: Duration::from_secs(3),
        scheme,
        ..EtcdOptions::default()
    }
}

fn lableorg() -> Scheme {
    Scheme::LableOrg { namespace_prefix: "unique-id/".into() }
}

async fn start(members: usize) -> Option<EtcdCluster> {
    testing::available(EtcdCluster::start(members).await)
}

async fn connect(cluster: &EtcdCluster, options: EtcdOptions) -> EtcdCoordinator {
    EtcdCoordinator::connect(&cluster.endpoints(), options).await.expect("connect to etcd")
}

/// A plain client, to look at etcd the way an operator (or LableOrg) would.
async fn plain(cluster: &EtcdCluster) -> Client {
    Client::connect(cluster.endpoints(), None).await.expect("plain client")
}

async fn get(client: &mut Client, key: &str) -> Option<idmint_etcd::KeyValue> {
    client.get(key, None).await.expect("get").kvs().first().cloned()
}

fn request(namespace: &str, ids: GeneratorIds) -> ClaimRequest {
    ClaimRequest::new(namespace, ids, "test-layout")
}

/// Waits (at most `limit`) until the claim reads `Lost`.
async fn lost_within(claim: &Claim, limit: Duration) -> bool {
    let mut state = claim.watch();
    tokio::time::timeout(limit, state.wait_for(|s| *s == ClaimState::Lost)).await.is_ok()
}

/// Runs the conformance suite with one new coordinator (one more "server") per handle.
async fn conformance_with(scheme: Scheme) {
    let Some(cluster) = start(1).await else { return };
    let endpoints = cluster.endpoints();
    let options = options(scheme);
    let handles = move || {
        let connecting = EtcdCoordinator::connect(&endpoints, options.clone());
        let handle = tokio::runtime::Handle::current();
        let coordinator =
            tokio::task::block_in_place(|| handle.block_on(connecting)).expect("connect");
        Arc::new(coordinator) as Arc<dyn Coordinator>
    };
    conformance::run_all(&handles).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_scheme_passes_the_conformance_suite() {
    conformance_with(Scheme::Native).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lableorg_scheme_passes_the_conformance_suite() {
    // `{namespace}` gives each namespace of the suite its own LableOrg pool.
    conformance_with(Scheme::LableOrg { namespace_prefix: "unique-id/{namespace}/".into() }).await;
}

/// T11: ten servers starting at once (connecting and claiming concurrently) get ten distinct
/// generator IDs, in both schemes: LableOrg's the ten lowest, the native scheme's below 50, as
/// claimants that meet draw apart (below 5N whatever their draws).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_cold_starts_get_distinct_ids() {
    let Some(cluster) = start(1).await else { return };
    let cluster = Arc::new(cluster);
    for scheme in [Scheme::Native, lableorg()] {
        let tasks: Vec<_> = (0..10)
            .map(|i| {
                let (cluster, options) = (Arc::clone(&cluster), options(scheme.clone()));
                tokio::spawn(async move {
                    let coordinator = connect(&cluster, options).await;
                    let req = request("cold", GeneratorIds::Pool { count: 4096 })
                        .with_holder(format!("server {i}"));
                    let claim = coordinator.claim(&req).await.expect("claim");
                    (claim.generator_id(), coordinator, claim)
                })
            })
            .collect();
        let mut ids = HashSet::new();
        let mut keep = Vec::new();
        for task in tasks {
            let (id, coordinator, claim) = task.await.expect("task");
            assert!(ids.insert(id), "{scheme:?}: generator id {id} handed out twice");
            keep.push((coordinator, claim));
        }
        if matches!(scheme, Scheme::Native) {
            // Claimants that meet spread out (`Probe`), below 5N whatever their draws.
            assert!(ids.iter().all(|&id| id < 50), "{scheme:?}: {ids:?}");
        } else {
            assert_eq!(ids, (0..10).collect(), "{scheme:?}: the ten lowest ids");
        }
    }
}

/// A lease revoked behind the holder's back: the fence refuses the next mark at once, and
/// the keep-alive notices by itself within TTL/3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_lease_is_revoked_is_lost() {
    let Some(cluster) = start(1).await else { return };
    let coordinator = connect(&cluster, options(Scheme::Native)).await;
    let mut etcd = plain(&cluster).await;

    // The next store is refused by the fence, before the keep-alive noticed anything.
    let claim = coordinator.claim(&request("revoked", GeneratorIds::Fixed(1))).await.unwrap();
    coordinator.store_mark(&claim, 1_000).await.expect("store while held");
    let key = get(&mut etcd, "test/revoked/claim/1").await.expect("claim key");
    etcd.lease_revoke(key.lease()).await.expect("revoke behind its back");
    match coordinator.store_mark(&claim, 2_000).await {
        Err(Error::ClaimLost { generator_id: 1, .. }) => {}
        other => panic!("a revoked claim must not store, got {other:?}"),
    }
    assert_eq!(claim.state(), ClaimState::Lost);
    let mark = get(&mut etcd, "test/revoked/mark/1").await.expect("the mark stays");
    assert_eq!(mark.lease(), 0, "marks are attached to no lease");
    assert!(mark.value_str().unwrap().contains("\"mark_ms\":1000"));

    // Left alone, the keep-alive task finds out (every TTL/3 ≈ 0.67 s).
    let claim = coordinator.claim(&request("revoked", GeneratorIds::Fixed(2))).await.unwrap();
    let key = get(&mut etcd, "test/revoked/claim/2").await.expect("claim key");
    etcd.lease_revoke(key.lease()).await.expect("revoke behind its back");
    assert!(lost_within(&claim, Duration::from_secs(3)).await, "the keep-alive must notice");
    assert!(matches!(coordinator.store_mark(&claim, 5).await, Err(Error::ClaimLost { .. })));
    // The generator ID is free again, and its mark (none was stored) is read by the next.
    let next = coordinator.claim(&request("revoked", GeneratorIds::Fixed(2))).await.unwrap();
    assert_eq!(next.mark_ms(), None);
}

/// A coordinator for the takeover scenario, fenced or (negative control) not.
async fn holder(cluster: &EtcdCluster, scheme: &Scheme, fenced: bool) -> EtcdCoordinator {
    let coordinator = connect(cluster, options(scheme.clone())).await;
    #[cfg(idmint_negative_controls)]
    let coordinator = if fenced { coordinator } else { coordinator.without_fence() };
    #[cfg(not(idmint_negative_controls))]
    let _ = fenced;
    coordinator
}

/// T6 in small: holder A stores a window, then "pauses" (its keep-alive stops, its claim still
/// reads Held), its lease expires, holder B takes the generator ID, and A wakes up and tries to
/// extend its window.
async fn takeover(cluster: &EtcdCluster, scheme: Scheme, fenced: bool) -> Takeover {
    assert!(
        fenced || cfg!(idmint_negative_controls),
        "the negative control needs a build with IDMINT_NEGATIVE_CONTROLS=1"
    );
    let (a, b) = (holder(cluster, &scheme, fenced).await, holder(cluster, &scheme, fenced).await);
    let req = request("paused", GeneratorIds::Fixed(0));
    let old = a.claim(&req).await.expect("a claims");
    a.store_mark(&old, 10_000).await.expect("a stores its window");
    assert!(a.pause_keep_alive(&old));

    let started = Instant::now();
    let new = loop {
        match b.claim(&req).await {
            Ok(claim) => break claim,
            Err(Error::Conflict { .. }) if started.elapsed() < Duration::from_secs(15) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => panic!("b must take the id once a's lease expires, got {other:?}"),
        }
    };
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
        takeover: started.elapsed(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_cannot_store_after_a_takeover() {
    let Some(cluster) = start(1).await else { return };
    for scheme in [Scheme::Native, lableorg()] {
        let outcome = takeover(&cluster, scheme.clone(), true).await;
        assert!(
            matches!(outcome.old_state, ClaimState::Held { until: Some(t) } if t < Instant::now()),
            "{scheme:?}: the paused holder still reads Held (stale), so the fence refused: \
             {outcome:?}"
        );
        assert!(!outcome.old_holder_stored_after, "{scheme:?}: {outcome:?}");
        assert_eq!(
            outcome.new_holder_read,
            Some(10_000),
            "{scheme:?}: the new holder reads the old mark"
        );
        assert!(!outcome.duplicates_possible(), "{scheme:?}: {outcome:?}");
    }
}

/// The negative control: without the fence the same scenario lets both holders issue the
/// same times, and the check above catches it.
#[cfg(idmint_negative_controls)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_fence_the_takeover_check_finds_duplicates() {
    let Some(cluster) = start(1).await else { return };
    let outcome = takeover(&cluster, Scheme::Native, false).await;
    assert!(outcome.old_holder_stored_after, "{outcome:?}");
    assert_eq!(outcome.new_holder_read, None, "{outcome:?}");
    assert!(outcome.duplicates_possible(), "the check must catch the unfenced takeover");
}

/// `Held { until }` starts at grant time + TTL − margin and moves forward with every
/// acknowledged keep-alive (every TTL/3), never beyond send time + TTL − margin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_advances_with_keep_alives() {
    let Some(cluster) = start(1).await else { return };
    let coordinator = connect(&cluster, options(Scheme::Native)).await;
    let (ttl, margin) = (Duration::from_secs(2), Duration::from_millis(500));
    let before = Instant::now();
    let claim = coordinator.claim(&request("deadline", GeneratorIds::Fixed(0))).await.unwrap();
    let until = |state| match state {
        ClaimState::Held { until: Some(t) } => t,
        other => panic!("expected Held with a deadline, got {other:?}"),
    };
    let mut last = until(claim.state());
    assert!(last > Instant::now(), "the first deadline is in the future");
    assert!(last <= Instant::now() + ttl - margin, "and no later than send + TTL - margin");
    assert!(last >= before + ttl - margin - Duration::from_millis(300));

    let mut state = claim.watch();
    let started = Instant::now();
    for _ in 0..3 {
        tokio::time::timeout(ttl, state.changed())
            .await
            .expect("a keep-alive within TTL/3")
            .unwrap();
        let now = Instant::now();
        let next = until(*state.borrow_and_update());
        assert!(next > last, "each keep-alive moves the deadline forward");
        assert!(next <= now + ttl - margin, "computed from the send time, not later");
        assert!(next > now, "and keeps it ahead of now");
        last = next;
    }
    let period = started.elapsed() / 3;
    assert!(
        period > Duration::from_millis(400) && period < Duration::from_millis(1_000),
        "keep-alives every TTL/3 (≈ 667 ms), got {period:?}"
    );
    coordinator.release(&claim).await.unwrap();
    assert_eq!(claim.state(), ClaimState::Lost);
}

/// When the mark changed under a live claim (an earlier write of ours whose answer was lost),
/// the write is retried once on the re-read mark, and a lower mark is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_mark_is_re_read_and_never_lowered() {
    let Some(cluster) = start(1).await else { return };
    let coordinator = connect(&cluster, options(Scheme::Native)).await;
    let mut etcd = plain(&cluster).await;
    let claim = coordinator.claim(&request("reread", GeneratorIds::Fixed(3))).await.unwrap();
    coordinator.store_mark(&claim, 1_000).await.unwrap();
    let value = r#"{"mark_ms":5000,"layout":"test-layout"}"#;
    etcd.put("test/reread/mark/3", value, None).await.unwrap();
    match coordinator.store_mark(&claim, 2_000).await {
        Err(Error::MarkRegressed { offered_ms: 2_000, stored_ms: 5_000 }) => {}
        other => panic!("the re-read mark is higher, got {other:?}"),
    }
    etcd.put("test/reread/mark/3", r#"{"mark_ms":6000,"layout":"test-layout"}"#, None)
        .await
        .unwrap();
    coordinator.store_mark(&claim, 7_000).await.expect("retried once on the re-read mark");
    let stored = get(&mut etcd, "test/reread/mark/3").await.unwrap();
    assert!(stored.value_str().unwrap().contains("7000"));
}

/// LableOrg's keys exactly: `cluster-id` written as "0", `pool/0:0` with an empty value on a
/// 5 s lease, no lock left behind; idmint's mark under `idmint/mark/` on no lease, fenced by
/// the pool key's create revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lableorg_claims_use_the_upstream_keys() {
    let Some(cluster) = start(1).await else { return };
    let coordinator = connect(&cluster, options(lableorg())).await;
    let mut etcd = plain(&cluster).await;
    assert!(get(&mut etcd, "unique-id/cluster-id").await.is_none());

    let req = request("lable", GeneratorIds::Pool { count: 1 << 15 }).with_holder("server x");
    let claim = coordinator.claim(&req).await.expect("claim");
    assert_eq!(claim.generator_id(), 0);
    let cluster_id = get(&mut etcd, "unique-id/cluster-id").await.expect("cluster-id written");
    assert_eq!(cluster_id.value(), b"0");
    assert_eq!(cluster_id.lease(), 0);
    let pool = get(&mut etcd, "unique-id/pool/0:0").await.expect("pool key");
    assert_eq!(pool.value(), b"", "LableOrg's pool keys are empty");
    let ttl = etcd.lease_time_to_live(pool.lease()).await.unwrap();
    assert_eq!(ttl.granted_ttl(), 5);
    assert!(ttl.ttl() > 0 && ttl.ttl() <= 5);
    let lock = GetOptions::new().with_prefix().with_keys_only();
    let locks = etcd.get("unique-id/unique-id-resource-lock", Some(lock)).await.unwrap();
    assert!(locks.kvs().is_empty(), "the resource lock is released after the claim");
    let holder = get(&mut etcd, "unique-id/idmint/holder/0:0").await.expect("holder key");
    assert_eq!((holder.value(), holder.lease()), (&b"server x"[..], pool.lease()));

    coordinator.store_mark(&claim, 1_234).await.unwrap();
    let mark = get(&mut etcd, "unique-id/idmint/mark/0:0").await.expect("mark key");
    assert_eq!(mark.lease(), 0);
    assert_eq!(mark.value_str().unwrap(), r#"{"mark_ms":1234,"layout":"test-layout"}"#);

    // A LableOrg watcher deleting the key, then a LableOrg client re-creating it: the old
    // claim's fence (the create revision) refuses it even though the key exists again.
    etcd.delete("unique-id/pool/0:0", None).await.unwrap();
    let other = etcd.lease_grant(5).await.unwrap().id();
    let put = TxnOp::put("unique-id/pool/0:0", "", Some(PutOptions::new().with_lease(other)));
    let txn = Txn::new()
        .when([idmint_etcd::Compare::version(
            "unique-id/pool/0:0",
            idmint_etcd::CompareOp::Equal,
            0,
        )])
        .and_then([put]);
    assert!(etcd.txn(txn).await.unwrap().succeeded());
    assert!(matches!(coordinator.store_mark(&claim, 2_000).await, Err(Error::ClaimLost { .. })));
    etcd.lease_revoke(other).await.unwrap();

    // Released: the pool key goes, the mark stays for the next holder.
    coordinator.release(&claim).await.unwrap();
    let next = coordinator.claim(&req).await.unwrap();
    assert_eq!((next.generator_id(), next.mark_ms()), (0, Some(1_234)));
    coordinator.release(&next).await.unwrap();
    assert!(get(&mut etcd, "unique-id/pool/0:0").await.is_none());
}

/// A LableOrg claim waits for `unique-id-resource-lock` held by another client, longer than
/// its own 5 s lease lasts unrenewed: the lease is kept alive from the grant on, so the claim
/// succeeds and is held once the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lableorg_claims_wait_for_the_resource_lock() {
    let Some(cluster) = start(1).await else { return };
    let mut etcd = plain(&cluster).await;
    let other = etcd.lease_grant(30).await.unwrap().id();
    let options = Some(idmint_etcd::LockOptions::new().with_lease(other));
    let lock = etcd.lock("unique-id/unique-id-resource-lock", options).await.unwrap();
    let coordinator = connect(&cluster, options_for_lock_wait()).await;
    let unlock_after = Duration::from_secs(6);
    let unlocking = tokio::spawn(async move {
        tokio::time::sleep(unlock_after).await;
        etcd.unlock(lock.key()).await.expect("unlock");
        etcd.lease_revoke(other).await.expect("revoke");
    });
    let started = Instant::now();
    let claim = coordinator
        .claim(&request("lable", GeneratorIds::Pool { count: 1 << 15 }))
        .await
        .expect("claim after the lock is free");
    assert!(started.elapsed() >= unlock_after - Duration::from_millis(500), "it waited");
    assert!(matches!(claim.state(), ClaimState::Held { until: Some(t) } if t > Instant::now()));
    coordinator.store_mark(&claim, 1).await.expect("the claim is live");
    unlocking.await.unwrap();
}

fn options_for_lock_wait() -> EtcdOptions {
    EtcdOptions { lock_timeout: Duration::from_secs(20), ..options(lableorg()) }
}

/// Pre-puts empty `pool/<cluster>:<generator>` keys, as LableOrg clients would.
async fn preclaim(etcd: &mut Client, keys: impl Iterator<Item = String>) {
    let keys: Vec<String> = keys.collect();
    for chunk in keys.chunks(100) {
        let puts: Vec<_> = chunk.iter().map(|k| TxnOp::put(k.as_str(), "", None)).collect();
        etcd.txn(Txn::new().and_then(puts)).await.expect("pre-claim");
    }
}

/// LableOrg's HighGeneratorCountIT: cluster IDs "4, 5", `pool/4:0..4:2046` taken; the next
/// claims get (4, 2047) and then (5, 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lableorg_high_generator_count() {
    let Some(cluster) = start(1).await else { return };
    let mut etcd = plain(&cluster).await;
    etcd.put("unique-id/cluster-id", "4, 5", None).await.unwrap();
    preclaim(&mut etcd, (0..2047).map(|g| format!("unique-id/pool/4:{g}"))).await;
    let coordinator = connect(&cluster, options(lableorg())).await;
    let req = request("lable", GeneratorIds::Pool { count: 1 << 15 });
    let first = coordinator.claim(&req).await.expect("first");
    let second = coordinator.claim(&req).await.expect("second");
    assert_eq!(first.generator_id(), 4 * 2048 + 2047);
    assert_eq!(second.generator_id(), 5 * 2048);
    assert!(get(&mut etcd, "unique-id/pool/4:2047").await.is_some());
    assert!(get(&mut etcd, "unique-id/pool/5:0").await.is_some());
    assert_eq!(get(&mut etcd, "unique-id/cluster-id").await.unwrap().value(), b"4, 5");
}

/// A full LableOrg pool (count of `pool/` keys ≥ 2048 × clusters) is refused at once, not
/// waited on; a fixed ID outside the listed clusters is an invalid request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lableorg_full_pool_is_refused_at_once() {
    let Some(cluster) = start(1).await else { return };
    let mut etcd = plain(&cluster).await;
    preclaim(&mut etcd, (0..2048).map(|g| format!("unique-id/pool/0:{g}"))).await;
    let coordinator = connect(&cluster, options(lableorg())).await;
    let started = Instant::now();
    match coordinator.claim(&request("lable", GeneratorIds::Pool { count: 1 << 15 })).await {
        Err(Error::PoolExhausted { size: 2048, .. }) => {}
        other => panic!("a full pool must be refused, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(2), "no waiting for a free key");
    match coordinator.claim(&request("lable", GeneratorIds::Fixed(3 * 2048))).await {
        Err(Error::InvalidRequest(_)) => {}
        other => panic!("cluster 3 is not listed, got {other:?}"),
    }
}

/// T7 in small, and the harness itself: in a 3-member cluster, killing the leader (SIGKILL)
/// does not lose a claim (etcd refreshes leases on election), marks can still be stored, and
/// the member comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_survive_an_etcd_leader_kill() {
    let Some(mut cluster) = start(3).await else { return };
    assert_eq!(cluster.endpoints().len(), 3);
    assert!(cluster.member_pids().iter().all(Option::is_some));
    // A 2 s lease cannot ride out an election (≈ 1-2 s with etcd's defaults) with a 0.5 s
    // margin: its local deadline lapses first. 5 s can, which is why TTLs must exceed
    // several election timeouts (RELIABILITY.md, T7).
    let riding = EtcdOptions {
        lease_ttl_secs: 5,
        margin: Duration::from_secs(1),
        ..options(Scheme::Native)
    };
    let coordinator = connect(&cluster, riding).await;
    let claim = coordinator.claim(&request("leader", GeneratorIds::Fixed(0))).await.unwrap();
    coordinator.store_mark(&claim, 1_000).await.unwrap();

    let leader = cluster.leader().await.expect("a leader");
    cluster.kill(leader).expect("kill the leader");
    assert_eq!(cluster.member_pids()[leader], None);
    store_retrying(&coordinator, &claim, 2_000).await;
    let new_leader = cluster.leader().await.expect("a new leader");
    assert_ne!(new_leader, leader);
    cluster.restart(leader).await.expect("restart the old leader");
    assert!(cluster.member_pids()[leader].is_some());
    store_retrying(&coordinator, &claim, 3_000).await;
    // Keep-alives went on through all of it.
    assert!(matches!(claim.state(), ClaimState::Held { until: Some(t) } if t > Instant::now()));
}

/// Stores a mark, retrying `Unavailable` (an election, a connection to a killed member) for
/// up to 10 s, as the server's window task would.
async fn store_retrying(coordinator: &EtcdCoordinator, claim: &Claim, mark_ms: u64) {
    let started = Instant::now();
    loop {
        match coordinator.store_mark(claim, mark_ms).await {
            Ok(()) => return,
            Err(Error::Unavailable { .. }) if started.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the claim must survive the election: {e}"),
        }
    }
}

/// Connecting fails cleanly: nothing listening is `Unavailable` within the connect timeout,
/// inconsistent options are refused before connecting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_errors_are_mapped() {
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", nobody.local_addr().unwrap());
    drop(nobody);
    let quick =
        EtcdOptions { connect_timeout: Duration::from_millis(500), ..EtcdOptions::default() };
    let started = Instant::now();
    match EtcdCoordinator::connect(&[endpoint], quick).await {
        Err(Error::Unavailable { backend: "etcd", .. }) => {}
        other => panic!("nothing listens there, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    let bad =
        EtcdOptions { lease_ttl_secs: 2, margin: Duration::from_secs(2), ..EtcdOptions::default() };
    assert!(matches!(
        EtcdCoordinator::connect(&["127.0.0.1:1".into()], bad).await,
        Err(Error::InvalidRequest(_))
    ));
    assert!(matches!(
        EtcdCoordinator::connect(&[], EtcdOptions::default()).await,
        Err(Error::InvalidRequest(_))
    ));
}
