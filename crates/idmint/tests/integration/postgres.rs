//! A fleet on Postgres: minters on two machines (two data directories) claim distinct
//! generator IDs in one database, and one that closes and starts again issues above itself.
//! Skipped, with the reason printed, when PostgreSQL is not installed (a failure in CI).

use std::collections::HashSet;

use idmint::Minter;
use idmint_coord::testing::{self, Postgres};

fn u64s(ids: Vec<idmint::AnyId>) -> Vec<u64> {
    ids.into_iter().map(|id| u64::try_from(id).expect("a 64-bit id")).collect()
}

#[test]
fn minters_claim_distinct_generator_ids_in_postgres() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let tmp = tempfile::tempdir().expect("tempdir");
    let build = |machine: &str| {
        Minter::builder()
            .data_dir(tmp.path().join(machine))
            .postgres(&server.url())
            .build_blocking()
            .expect("build on postgres")
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
    let first = u64::try_from(again.next().expect("next")).expect("u64");
    assert!(first > last_a, "{first} is not above {last_a}");
    all.push(first);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len(), "duplicates");
    again.close().expect("close");
    b.close().expect("close b");
}
