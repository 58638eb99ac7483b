//! The restore guard against real `etcd` processes (RELIABILITY.md, "etcd restored from a
//! snapshot (T21)"): marks restored from an etcd snapshot into a new cluster are refused until
//! `adopt_cluster` raises them, a cluster key that idmint did not write is refused, and the
//! no-restore-guard negative control takes the stale marks as they are. And the wrong
//! cluster: a server whose data directory remembers one cluster is refused on an empty, wiped
//! or other one (`Remembered`), where without its memory it would start below its own IDs or
//! on a generator ID another server holds. Without `etcd` on PATH the tests skip, unless
//! `CI=true`.

#![cfg(all(feature = "etcd", feature = "test-util"))]

use std::time::Duration;

use idmint_etcd::Client;
use std::sync::Arc;

use idmint_coord::{
    Adopted, ClaimRequest, ClaimState, Coordinator, Error, EtcdCoordinator, EtcdOptions,
    GeneratorIds, Remembered,
    testing::{self, EtcdCluster},
};

const NAMESPACE: &str = "orders";
/// The mark stored before the snapshot.
const BEFORE: u64 = 1_800_000_001_000;
/// The mark stored after it: lost by the restore.
const AFTER: u64 = 1_800_000_005_000;

fn options() -> EtcdOptions {
    EtcdOptions {
        prefix: "test/".into(),
        lease_ttl_secs: 2,
        margin: Duration::from_millis(500),
        request_timeout: Duration::from_secs(3),
        ..EtcdOptions::default()
    }
}

fn request() -> ClaimRequest {
    ClaimRequest::new(NAMESPACE, GeneratorIds::Fixed(0), "test-layout")
}

async fn connect(cluster: &EtcdCluster) -> EtcdCoordinator {
    EtcdCoordinator::connect(&cluster.endpoints(), options()).await.expect("connect to etcd")
}

/// A cluster whose mark went from `BEFORE` to `AFTER` after a snapshot, and a cluster restored
/// from that snapshot (so its mark is `BEFORE`).
async fn restored() -> Option<(EtcdCluster, EtcdCluster, tempfile::TempDir)> {
    let original = testing::available(EtcdCluster::start(1).await)?;
    let coordinator = connect(&original).await;
    let claim = coordinator.claim(&request()).await.expect("claim");
    coordinator.store_mark(&claim, BEFORE).await.expect("mark before");
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = dir.path().join("snapshot.db");
    original.snapshot(&snapshot).expect("snapshot");
    coordinator.store_mark(&claim, AFTER).await.expect("mark after");
    coordinator.release(&claim).await.expect("release");
    let copy = EtcdCluster::restore(&snapshot, 1).await.expect("restore the snapshot");
    Some((original, copy, dir))
}

/// Claims generator ID 0 once the claim restored with the snapshot is gone (its lease, restored
/// too, runs out a TTL after the restore since nobody keeps it alive).
async fn claim_when_free(coordinator: &EtcdCoordinator) -> idmint_coord::Claim {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match coordinator.claim(&request()).await {
            Err(Error::Conflict { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other.expect("claim"),
        }
    }
}

async fn cluster_id(cluster: &EtcdCluster) -> u64 {
    let mut client = Client::connect(cluster.endpoints(), None).await.expect("plain client");
    let status = client.status().await.expect("status");
    status.header().map(|h| h.cluster_id()).expect("a header")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_cluster_is_refused_until_its_marks_are_raised() {
    let Some((original, copy, _dir)) = restored().await else { return };
    let (old, new) = (cluster_id(&original).await, cluster_id(&copy).await);
    assert_ne!(old, new, "a restore gives the cluster a new ID");
    let coordinator = connect(&copy).await;
    match coordinator.claim(&request()).await {
        Err(Error::ClusterChanged { recorded, live, key }) => {
            assert_eq!((recorded, live, key.as_str()), (old, new, "test/cluster"));
        }
        other => panic!("a claim on the restored cluster must be refused, got {other:?}"),
    }
    let floor = AFTER + 60_000;
    let adopted = coordinator.adopt_cluster(floor).await.expect("adopt");
    assert_eq!(adopted, Adopted { recorded: Some(old), live: new, raised: 1, kept: 0 });
    let claim = claim_when_free(&coordinator).await;
    assert_eq!(claim.mark_ms(), Some(floor), "the claim starts past every lost mark");
    coordinator.release(&claim).await.expect("release");
    // Running it again changes nothing.
    let again = coordinator.adopt_cluster(floor).await.expect("adopt again");
    assert_eq!(again, Adopted { recorded: Some(new), live: new, raised: 0, kept: 1 });
    // The original cluster is not the one recorded there, and still takes its own claims.
    let claim = connect(&original).await.claim(&request()).await.expect("the original");
    assert_eq!(claim.mark_ms(), Some(AFTER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_key_idmint_did_not_write_is_refused() {
    let Some(cluster) = testing::available(EtcdCluster::start(1).await) else { return };
    let mut client = Client::connect(cluster.endpoints(), None).await.expect("plain client");
    for bad in ["not json", r#"{"cluster_id":"zz"}"#, r#"{"id":"1"}"#] {
        client.put("test/cluster", bad, None).await.expect("put");
        let refused = connect(&cluster).await.claim(&request()).await;
        assert!(matches!(refused, Err(Error::Corrupt { .. })), "{bad}: {refused:?}");
    }
}

/// Negative control: without the guard, the claim on the restored cluster takes the stale
/// mark, below IDs that were issued, which is how IDs repeat after a restore.
#[cfg(idmint_negative_controls)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_the_stale_mark_is_trusted() {
    let Some((_original, copy, _dir)) = restored().await else { return };
    let coordinator = connect(&copy).await.without_restore_guard();
    let claim = claim_when_free(&coordinator).await;
    assert_eq!(claim.mark_ms(), Some(BEFORE));
    assert!(claim.mark_ms() < Some(AFTER), "the control trusts a mark below the one lost");
}

/// A server's memory (`<data-dir>/fleet.d`) around a connection to `cluster`.
async fn remembered(dir: &std::path::Path, cluster: &EtcdCluster) -> Remembered {
    Remembered::open(dir, Arc::new(connect(cluster).await)).expect("open the memory")
}

/// The wrong cluster, each way it happens: a server that stored `AFTER` on cluster A is pointed
/// at an empty cluster B, at A wiped of its keys, and at B while a spare holds its generator ID
/// on A. Each is refused by the data directory's memory; each negative control (the same
/// claim with no memory, as before servers remembered) starts below `AFTER` or holds the
/// generator ID the spare holds, which is how IDs repeat. An adoption of B is then taken, and
/// the claim still starts above the remembered mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_is_refused_on_a_cluster_its_data_directory_does_not_know() {
    let Some(a) = testing::available(EtcdCluster::start(1).await) else { return };
    let b = EtcdCluster::start(1).await.expect("a second cluster");
    let data = tempfile::tempdir().expect("tempdir");
    let memory = data.path().join("fleet.d");
    let server = remembered(&memory, &a).await;
    let claim = server.claim(&request()).await.expect("claim on A");
    server.store_mark(&claim, BEFORE).await.expect("mark");
    server.store_mark(&claim, AFTER).await.expect("mark");
    server.release(&claim).await.expect("release");
    drop(server);

    // An empty cluster.
    let refused = remembered(&memory, &b).await.claim(&request()).await;
    match &refused {
        Err(e @ Error::StoreChanged { .. }) => {
            let message = e.to_string();
            assert!(message.contains("holds no idmint marks"), "{message}");
            assert!(message.contains("idmint lease adopt-cluster"), "no way forward: {message}");
        }
        other => panic!("an empty cluster was taken: {other:?}"),
    }
    // The control: without the memory the empty cluster hands out generator 0 with no mark,
    // so a server whose clock is behind `AFTER` issues IDs it issued before.
    let forgetful = connect(&b).await;
    let bare = forgetful.claim(&request()).await.expect("claim with no memory");
    assert_eq!(bare.mark_ms(), None, "the control: nothing protects the IDs below {AFTER}");
    forgetful.release(&bare).await.expect("release");

    // A spare takes generator 0 on A (no memory of its own needed); the server, moved to B,
    // is refused. Without the memory it holds generator 0 on B at the same time.
    let spare = connect(&a).await;
    let spare_claim = claim_when_free(&spare).await;
    let moved = remembered(&memory, &b).await.claim(&request()).await;
    assert!(matches!(moved, Err(Error::StoreChanged { .. })), "moved: {moved:?}");
    let both = forgetful.claim(&request()).await.expect("the control claims on B");
    assert!(
        matches!(spare_claim.state(), ClaimState::Held { .. })
            && matches!(both.state(), ClaimState::Held { .. })
            && spare_claim.generator_id() == both.generator_id(),
        "the control: two live holders of generator {} at once",
        both.generator_id()
    );
    forgetful.release(&both).await.expect("release");
    spare.release(&spare_claim).await.expect("release");

    // A wiped: the same cluster ID, its keys gone.
    let mut client = Client::connect(a.endpoints(), None).await.expect("plain client");
    client
        .delete("test/", Some(idmint_etcd::DeleteOptions::new().with_prefix()))
        .await
        .expect("wipe");
    let wiped = remembered(&memory, &a).await.claim(&request()).await;
    assert!(matches!(wiped, Err(Error::StoreChanged { .. })), "wiped: {wiped:?}");

    // An operator adopts B, with a floor below the remembered mark: taken, and the claim
    // starts above what the data directory remembers.
    let floor = BEFORE - 10_000;
    connect(&b).await.adopt_cluster(floor).await.expect("adopt B");
    let adopted = remembered(&memory, &b).await;
    let claim = adopted.claim(&request()).await.expect("an adopted cluster is taken");
    assert_eq!(claim.mark_ms(), Some(AFTER), "starts above the remembered mark");
    adopted.release(&claim).await.expect("release");
    // And the adoption is remembered: A, empty since the wipe, is refused now.
    let forgotten = remembered(&memory, &a).await.claim(&request()).await;
    assert!(matches!(forgotten, Err(Error::StoreChanged { .. })), "{forgotten:?}");
}
