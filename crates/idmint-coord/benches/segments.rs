//! Segment allocator throughput: IDs per second handed out in process by a `SegmentAllocator`
//! over the memory store (the hot path alone), the file store and Postgres (feature
//! `postgres`, a throwaway server from `testing::Postgres` with durable settings), plus a
//! report of store round trips per million IDs at the default (adaptive) and at fixed steps.
//!
//! ```sh
//! CARGO_TARGET_DIR=/tmp/t-pg cargo bench -p idmint-coord --features postgres --bench segments
//! ```

#[path = "../tests/integration/common.rs"]
mod common;

use std::{
    hint::black_box,
    sync::Arc,
    time::{Duration, Instant},
};

use common::fixed;
use criterion::{Criterion, Throughput, criterion_group};
use idmint_coord::{FileStore, MemoryStore, SegmentAllocator, SegmentOptions, SegmentStore};
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Fresh namespaces, so that each benchmark starts from the initial step.
fn namespace(label: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{label}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Times `iters` calls of `next()` (or `next_batch(batch)`), per ID.
fn bench_store(c: &mut Criterion, label: &str, store: Arc<dyn SegmentStore>, rt: &Runtime) {
    let mut group = c.benchmark_group("segments");
    group.measurement_time(Duration::from_secs(3)).sample_size(30);
    let ids = SegmentAllocator::new(store.clone(), &namespace(label), SegmentOptions::default())
        .expect("allocator");
    group.throughput(Throughput::Elements(1));
    group.bench_function(format!("{label}/next"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    black_box(ids.next().await.expect("next"));
                }
                started.elapsed()
            })
        })
    });
    group.throughput(Throughput::Elements(100));
    group.bench_function(format!("{label}/next_batch_100"), |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let started = Instant::now();
                for _ in 0..iters {
                    // A batch may come back short at the end of a range: count as 100 anyway,
                    // the next call continues.
                    black_box(ids.next_batch(100).await.expect("batch"));
                }
                started.elapsed()
            })
        })
    });
    group.finish();
}

/// Hands out `total` IDs from a fresh namespace and reports the store calls it took.
#[allow(clippy::print_stdout, reason = "the report is the benchmark's output")]
fn round_trips(label: &str, store: Arc<dyn SegmentStore>, options: SegmentOptions, rt: &Runtime) {
    let total = 1_000_000u64;
    let ids = SegmentAllocator::new(store, &namespace(label), options.clone()).expect("allocator");
    let started = Instant::now();
    rt.block_on(async {
        for _ in 0..total {
            black_box(ids.next().await.expect("next"));
        }
    });
    let elapsed = started.elapsed();
    let stats = ids.stats();
    println!(
        "round trips: {label:<9} steps {}..{} (initial {}): {} fetches per {total} ids \
         ({} in the background, {} waits), last step {}, {:.1} ms, {:.0} ids/s",
        options.min_step,
        options.max_step,
        options.initial_step,
        stats.fetches,
        stats.background_fetches,
        stats.waits,
        stats.step,
        elapsed.as_secs_f64() * 1e3,
        total as f64 / elapsed.as_secs_f64(),
    );
}

fn benches(c: &mut Criterion) {
    let rt = runtime();
    let report = std::env::args().any(|a| a == "--bench");

    bench_store(c, "memory", Arc::new(MemoryStore::new()), &rt);

    let dir = idmint_coord::testing::data_dir("bench").expect("directory");
    let file: Arc<dyn SegmentStore> = Arc::new(FileStore::open(dir.path()).expect("file store"));
    bench_store(c, "file", file.clone(), &rt);
    if report {
        round_trips("file", file.clone(), SegmentOptions::default(), &rt);
        round_trips("file", file, fixed(1_000), &rt);
    }

    #[cfg(feature = "postgres")]
    postgres(c, &rt, report);
}

#[cfg(feature = "postgres")]
#[allow(clippy::print_stdout, reason = "the report is the benchmark's output")]
fn postgres(c: &mut Criterion, rt: &Runtime, report: bool) {
    use idmint_coord::{PostgresOptions, PostgresStore, testing};

    let Some(server) = testing::available(testing::Postgres::start()) else { return };
    let store = rt
        .block_on(PostgresStore::connect(&server.url(), PostgresOptions::default()))
        .expect("connect");
    let store = Arc::new(store);
    bench_store(c, "postgres", store.clone(), rt);
    if !report {
        return;
    }
    // An independent count from the server: transaction IDs assigned (every range statement
    // writes, so it takes one; reading the next xid assigns none). Unlike pg_stat_database,
    // which backends flush up to 10 s late, this is exact at once.
    let next_xid = || {
        server
            .psql("select pg_snapshot_xmax(pg_current_snapshot())")
            .expect("psql")
            .parse::<u64>()
            .expect("an xid")
    };
    for options in [SegmentOptions::default(), fixed(1_000), fixed(10_000)] {
        let (calls, xid) = (store.round_trips(), next_xid());
        round_trips("postgres", store.clone(), options, rt);
        // Let the background fetch started near the end finish.
        std::thread::sleep(Duration::from_millis(200));
        println!(
            "            postgres statements sent: {}, transactions the server assigned: {}",
            store.round_trips() - calls,
            next_xid() - xid
        );
    }
}

criterion_group!(segments, benches);

fn main() {
    segments();
    Criterion::default().configure_from_args().final_summary();
}
