//! A fleet on etcd and on Postgres: minters on two machines (two data directories) claim
//! distinct generator IDs in one store, and one that closes and starts again issues above
//! itself. Skipped, with the reason printed, when etcd or PostgreSQL is not installed (a
//! failure in CI).

use std::{collections::HashSet, path::Path};

use idmint::{BlockingMinter, Minter};
use idmint_coord::testing::{self, EtcdCluster, Postgres};

use crate::u64s;

/// Starts a cluster of `members` on a runtime of its own (the cluster's processes outlive it).
pub(crate) fn cluster(members: usize) -> Option<EtcdCluster> {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    testing::available(runtime.block_on(EtcdCluster::start(members)))
}

#[test]
fn minters_claim_distinct_generator_ids_in_etcd() {
    let Some(cluster) = cluster(1) else { return };
    // etcd names the holder of a released key by its data directory: the same one again.
    check_two_machines(true, |dir| {
        Minter::builder()
            .data_dir(dir)
            .etcd(cluster.endpoints())
            .etcd_prefix("embedded/")
            .build_blocking()
            .expect("build on etcd")
    });
}

#[test]
fn minters_claim_distinct_generator_ids_in_postgres() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    check_two_machines(false, |dir| {
        Minter::builder()
            .data_dir(dir)
            .postgres(&server.url())
            .build_blocking()
            .expect("build on postgres")
    });
}

/// Machines `a` and `b` claim distinct generator IDs and mint 10,000 IDs each; `a` closes and
/// starts again (with the same generator ID when `same_id_again`), and mints above its last.
fn check_two_machines(same_id_again: bool, build: impl Fn(&Path) -> BlockingMinter) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let a = build(&tmp.path().join("a"));
    let b = build(&tmp.path().join("b"));
    let (ga, gb) = (a.generator_id("default").expect("a"), b.generator_id("default").expect("b"));
    assert!(ga.is_some() && gb.is_some() && ga != gb, "{ga:?} {gb:?}");
    let mut all = u64s(&a.batch(10_000).expect("batch a"));
    all.extend(u64s(&b.batch(10_000).expect("batch b")));
    let last_a = *all[..10_000].last().expect("ids");
    a.close().expect("close a");
    let again = build(&tmp.path().join("a"));
    if same_id_again {
        assert_eq!(again.generator_id("default").expect("again"), ga, "the freed generator id");
    }
    let first = u64::try_from(again.next().expect("next")).expect("u64");
    assert!(first > last_a, "{first} is not above {last_a}");
    all.push(first);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "duplicates");
    again.close().expect("close");
    b.close().expect("close b");
}
