//! Persistent counters and DecimalIds (elfo's book) on every counter store: the counter
//! conformance suite (`idmint_coord::conformance::counters`), then DecimalIds, on the memory and
//! file stores always, Postgres (feature `postgres`) and etcd (feature `etcd`) against real
//! servers started by `idmint_coord::testing`, skipped when they are not installed unless
//! `CI=true`.
//! Each check counts the IDs it saw and asserts there is no duplicate.

#![cfg(feature = "test-util")]

use std::{collections::HashSet, sync::Arc};

use idmint_coord::{
    CounterStore, DecimalIdIssuer, DecimalIdOptions, DecimalIds, Error, FileStore, MemoryStore,
    conformance,
};
use idmint_core::DecimalId;

const LAUNCH: &str = "launch";
const GENERATOR: &str = "generator";

/// Takes `n` IDs from `source`, singles and batches, checking that each belongs to it.
async fn take(source: &DecimalIdIssuer, n: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    while ids.len() < n {
        if ids.len() % 3 == 0 {
            ids.extend(source.next_batch(3).await.expect("batch").map(DecimalId::to_raw));
        } else {
            ids.push(source.next().await.expect("next").to_raw());
        }
    }
    let generators = source.generator_ids();
    for &raw in &ids {
        let parts = DecimalId::from_raw(raw).expect("a decimal id").into_parts();
        assert_eq!(parts.launch_id, source.launch_id(), "{raw}");
        assert!(generators.contains(&parts.generator_id), "{raw} from {generators:?}");
        assert!((1..=5).contains(&parts.counter), "{raw}");
    }
    ids
}

/// elfo's DecimalId on persistent counters: two starts get different launch IDs and
/// disjoint generator IDs; running out of the counter part takes a new generator ID and goes
/// on; sources running at once never collide.
async fn decimal_ids_never_repeat(counters: Arc<dyn CounterStore>) {
    let options = DecimalIdOptions { max_counter: Some(5), ..DecimalIdOptions::default() };
    let first = DecimalIds::start(counters.clone(), LAUNCH, GENERATOR, options.clone())
        .await
        .expect("first start");
    let mut all = take(&first, 23).await;
    let first_generators = first.generator_ids();
    assert!(first_generators.len() >= 5, "23 ids of 5 each: {first_generators:?}");
    assert_eq!(first_generators.iter().collect::<HashSet<_>>().len(), first_generators.len());

    // A restart: a new launch ID and fresh generator IDs.
    let second = DecimalIds::start(counters.clone(), LAUNCH, GENERATOR, options.clone())
        .await
        .expect("second start");
    assert_ne!(second.launch_id(), first.launch_id());
    assert!(!first_generators.contains(&second.generator_id()));
    all.extend(take(&second, 17).await);

    // Both keep going at once, as two processes would.
    let (a, b) = (Arc::new(first), Arc::new(second));
    let tasks: Vec<_> = [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .map(|source| tokio::spawn(async move { take(&source, 40).await }))
        .collect();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    let mut generators = a.generator_ids();
    generators.extend(b.generator_ids());
    let distinct: HashSet<_> = generators.iter().collect();
    assert_eq!(distinct.len(), generators.len(), "a generator id was taken twice");

    let count = all.len();
    let unique: HashSet<_> = all.iter().collect();
    assert_eq!(unique.len(), count, "duplicates among {count} decimal ids");
    assert!(count >= 200);
}

/// A launch ID from deployment config is used by one start only: the same one again, or one
/// below a launch already counted, is refused naming the counter's value, and a start without
/// one goes on above it.
async fn chosen_launches_are_taken_once(handles: conformance::counters::Handles<'_>) {
    let (launch, generator) = ("chosen-launch", "chosen-generator");
    let chosen = |launch_id| DecimalIdOptions { launch_id, ..DecimalIdOptions::default() };
    let start = |options| DecimalIds::start(handles(), launch, generator, options);
    assert_eq!(start(chosen(Some(7))).await.expect("launch 7").launch_id(), 7);
    for again in [7, 5] {
        match start(chosen(Some(again))).await {
            Err(e @ Error::Taken { current: 7, .. }) => {
                let message = e.to_string();
                assert!(message.contains("counter `chosen-launch`, which is at 7"), "{message}");
            }
            other => panic!("launch {again} after 7 must be refused, got {other:?}"),
        }
    }
    assert_eq!(start(chosen(None)).await.expect("next launch").launch_id(), 8);
    assert_eq!(start(chosen(Some(4_210))).await.expect("launch 4210").launch_id(), 4_210);
    for bad in [0, DecimalId::MAX_LAUNCH_ID + 1] {
        let got = start(chosen(Some(bad))).await;
        assert!(matches!(got, Err(Error::InvalidRequest(_))), "launch {bad}: {got:?}");
    }
}

/// The counter suite (`idmint_coord::conformance::counters`), then DecimalIds, on one store
/// through `handles` (one new handle per process).
async fn run_all(handles: conformance::counters::Handles<'_>) {
    conformance::counters::run_all(handles).await;
    decimal_ids_never_repeat(handles()).await;
    chosen_launches_are_taken_once(handles).await;
}

/// Connects one more handle (one more process) from a synchronous factory: the suite's
/// factories are plain functions, and the network stores connect asynchronously.
#[cfg(any(feature = "postgres", feature = "etcd"))]
fn connect_now<T>(connecting: impl std::future::Future<Output = T>) -> T {
    let handle = tokio::runtime::Handle::current();
    tokio::task::block_in_place(|| handle.block_on(connecting))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_counters() {
    let store = MemoryStore::new();
    run_all(&move || Arc::new(store.clone()) as Arc<dyn CounterStore>).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_counters() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().to_path_buf();
    run_all(&move || Arc::new(FileStore::open(&path).expect("store")) as Arc<dyn CounterStore>)
        .await;
    // The values are on disk: a new handle (a restarted process) goes on after them.
    let again = Arc::new(FileStore::open(dir.path()).expect("store"));
    let source = DecimalIds::start(again, LAUNCH, GENERATOR, DecimalIdOptions::default())
        .await
        .expect("third start");
    assert_eq!(source.launch_id(), 3);
}

#[tokio::test]
async fn bad_decimal_id_options_are_refused() {
    let counters = Arc::new(MemoryStore::new());
    for max_counter in [0, DecimalId::MAX_COUNTER + 1] {
        let options =
            DecimalIdOptions { max_counter: Some(max_counter), ..DecimalIdOptions::default() };
        let got = DecimalIds::start(counters.clone(), LAUNCH, GENERATOR, options).await;
        assert!(matches!(got, Err(Error::InvalidRequest(_))), "{max_counter}: {got:?}");
    }
}

#[tokio::test]
async fn launches_stop_at_99_999() {
    let counters = Arc::new(MemoryStore::new());
    // Spend 99,998 launches directly, then the last two starts.
    for _ in 0..99_998 {
        counters.next(LAUNCH, DecimalId::MAX_LAUNCH_ID).await.expect("launch");
    }
    let last = DecimalIds::start(counters.clone(), LAUNCH, GENERATOR, DecimalIdOptions::default())
        .await
        .expect("the last launch");
    assert_eq!(last.launch_id(), 99_999);
    let refused = DecimalIds::start(counters, LAUNCH, GENERATOR, DecimalIdOptions::default()).await;
    assert!(matches!(refused, Err(Error::Exhausted { max: 99_999, .. })), "{refused:?}");
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_counters() {
    use idmint_coord::{PostgresOptions, PostgresStore, testing};

    let Some(server) = testing::available(testing::Postgres::start()) else { return };
    let url = server.url();
    run_all(&move || {
        let store = connect_now(PostgresStore::connect(&url, PostgresOptions::default()));
        Arc::new(store.expect("connect")) as Arc<dyn CounterStore>
    })
    .await;
    assert_eq!(
        server.psql("select value from idmint_counters where name = 'launch'").expect("read"),
        "2"
    );
}

#[cfg(feature = "etcd")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_counters() {
    use idmint_coord::{EtcdStore, EtcdStoreOptions, testing};

    let Some(cluster) = testing::available(testing::EtcdCluster::start(1).await) else { return };
    let options = EtcdStoreOptions { prefix: "test/".into(), ..EtcdStoreOptions::default() };
    let (endpoints, suite_options) = (cluster.endpoints(), options.clone());
    run_all(&move || {
        let store = connect_now(EtcdStore::connect(&endpoints, suite_options.clone()));
        Arc::new(store.expect("connect")) as Arc<dyn CounterStore>
    })
    .await;
    // Another client (another process) continues the same counters.
    let other = EtcdStore::connect(&cluster.endpoints(), options).await.expect("connect");
    assert_eq!(other.next(LAUNCH, 99_999).await.expect("launch"), 3);
}
