//! Benchmarks of `Client::next` against an in-process idmint server (snowflake, one
//! generator), on a two-worker runtime that also runs the server and the refill task.
//!
//! - `next/buffered`: calls made while the prefetch buffer holds IDs: the memory path that
//!   the ≥ 50 M IDs/s (≤ 20 ns per call) target is about. Refills still run in the
//!   background; only the waits for an empty buffer are left out of the timing.
//! - `next/sustained`: every call timed, waits included: bounded by how fast the server
//!   issues (snowflake: 4,096 IDs per ms per generator) and the HTTP round trip.
//! - `blocking_next/buffered`: the blocking facade's memory path.
//! - `batch/1000`: one `batch(1000)` request, a full round trip.

use std::{
    hint::black_box,
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use idmint_client::Client;
use idmint_coord::MemoryCoordinator;
use idmint_core::SystemClock;
use idmint_server::{Server, ServerConfig};
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

const BATCH: usize = 100_000;
const LOW_WATER: usize = 50_000;

/// A runtime running a server; returns its URL.
fn server(runtime: &Runtime) -> (String, CancellationToken) {
    runtime.block_on(async {
        let server = Server::start(
            ServerConfig::default(),
            Arc::new(MemoryCoordinator::new()),
            Arc::new(SystemClock),
        )
        .await
        .expect("the server starts");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let stop = CancellationToken::new();
        tokio::spawn(idmint_server::serve(server, listener, stop.clone()));
        (url, stop)
    })
}

/// Times `iters` calls of `take`, leaving out the waits for an empty buffer: calls are made
/// in runs no longer than what is buffered, and `refill` (untimed) waits for more.
fn buffered_runs(
    iters: u64,
    buffered: impl Fn() -> usize,
    mut refill: impl FnMut(),
    mut take: impl FnMut(u64) -> Duration,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let held = buffered().saturating_sub(1) as u64;
        if held == 0 {
            refill();
            continue;
        }
        let run = left.min(held);
        total += take(run);
        left -= run;
    }
    total
}

fn next(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (url, stop) = server(&runtime);
    let client = runtime.block_on(async {
        let client =
            Client::builder().endpoint(&url).prefetch(BATCH, LOW_WATER).build().expect("a client");
        client.next().await.expect("warm-up");
        client
    });

    let mut group = c.benchmark_group("next");
    group.throughput(Throughput::Elements(1));
    group.bench_function("buffered", |b| {
        b.iter_custom(|iters| {
            buffered_runs(
                iters,
                || client.buffered(),
                || {
                    runtime.block_on(client.next()).expect("an id");
                },
                |run| {
                    runtime.block_on(async {
                        let start = Instant::now();
                        for _ in 0..run {
                            black_box(client.next().await.expect("an id"));
                        }
                        start.elapsed()
                    })
                },
            )
        })
    });
    group.bench_function("sustained", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(client.next().await.expect("an id"));
                }
                start.elapsed()
            })
        })
    });
    group.finish();

    let mut group = c.benchmark_group("batch");
    group.throughput(Throughput::Elements(1000));
    group.bench_function("1000", |b| {
        b.iter(|| runtime.block_on(client.batch(1000)).expect("ids"));
    });
    group.finish();
    runtime.block_on(client.close());

    let blocking = Client::builder()
        .endpoint(&url)
        .prefetch(BATCH, LOW_WATER)
        .build_blocking()
        .expect("a blocking client");
    blocking.next().expect("warm-up");
    let mut group = c.benchmark_group("blocking_next");
    group.throughput(Throughput::Elements(1));
    group.bench_function("buffered", |b| {
        b.iter_custom(|iters| {
            buffered_runs(
                iters,
                || blocking.buffered(),
                || {
                    blocking.next().expect("an id");
                },
                |run| {
                    let start = Instant::now();
                    for _ in 0..run {
                        black_box(blocking.next().expect("an id"));
                    }
                    start.elapsed()
                },
            )
        })
    });
    group.finish();
    blocking.close();
    stop.cancel();
}

criterion_group!(benches, next);
criterion_main!(benches);
