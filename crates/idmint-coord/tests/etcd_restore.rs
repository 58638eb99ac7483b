//! The restore guard against real `etcd` processes (reliability.md T21): marks restored from an
//! etcd snapshot into a new cluster are refused until `adopt_cluster` raises them, a cluster
//! key that idmint did not write is refused, and the `test-no-restore-guard` negative control
//! takes the stale marks as they are. Without `etcd` on PATH the tests skip, unless `CI=true`.

#![cfg(all(feature = "etcd", feature = "test-util"))]

use std::time::Duration;

use etcd_client::Client;
use idmint_coord::{
    Adopted, ClaimRequest, Coordinator, Error, EtcdCoordinator, EtcdOptions, GeneratorIds,
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
#[cfg(feature = "test-no-restore-guard")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_guard_the_stale_mark_is_trusted() {
    let Some((_original, copy, _dir)) = restored().await else { return };
    let coordinator = connect(&copy).await.without_restore_guard();
    let claim = claim_when_free(&coordinator).await;
    assert_eq!(claim.mark_ms(), Some(BEFORE));
    assert!(claim.mark_ms() < Some(AFTER), "the control trusts a mark below the one lost");
}
