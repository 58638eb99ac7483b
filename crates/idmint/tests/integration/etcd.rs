//! A fleet on etcd: minters on two machines (two data directories) claim distinct generator
//! IDs in one etcd cluster, and one that closes and starts again issues above itself.
//! Skipped, with the reason printed, when etcd is not installed (a failure in CI).

use std::collections::HashSet;

use idmint::Minter;
use idmint_coord::testing::{self, EtcdCluster};

fn u64s(ids: Vec<idmint::AnyId>) -> Vec<u64> {
    ids.into_iter().map(|id| u64::try_from(id).expect("a 64-bit id")).collect()
}

/// Starts a cluster of `members` on a runtime of its own (the cluster's processes outlive it).
pub(crate) fn cluster(members: usize) -> Option<EtcdCluster> {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    testing::available(runtime.block_on(EtcdCluster::start(members)))
}

#[test]
fn minters_claim_distinct_generator_ids_in_etcd() {
    let Some(cluster) = cluster(1) else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let build = |machine: &str| {
        Minter::builder()
            .data_dir(tmp.path().join(machine))
            .etcd(cluster.endpoints())
            .etcd_prefix("embedded/")
            .build_blocking()
            .expect("build on etcd")
    };
    let a = build("a");
    let b = build("b");
    let (ga, gb) = (a.generator_id("default").expect("a"), b.generator_id("default").expect("b"));
    assert!(ga.is_some() && gb.is_some() && ga != gb, "{ga:?} {gb:?}");
    let mut all = u64s(a.batch(10_000).expect("batch a"));
    all.extend(u64s(b.batch(10_000).expect("batch b")));
    let last_a = *all[..10_000].last().expect("ids");
    a.close().expect("close a");
    let again = build("a");
    assert_eq!(again.generator_id("default").expect("again"), ga, "the freed generator id");
    let first = u64::try_from(again.next().expect("next")).expect("u64");
    assert!(first > last_a, "{first} is not above {last_a}");
    all.push(first);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "duplicates");
    again.close().expect("close");
    b.close().expect("close b");
}
