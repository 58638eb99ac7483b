//! Nanoseconds per ID of the embedded `Minter` beside what it is made of and what it replaces,
//! in one criterion run: the core's typed generator it drives, `idmint-client` through a
//! local server, and ferroid's atomic generator.
//!
//! Every row reads the system clock (the minter's only clock) and runs in bursts of 1,000
//! calls that start just after the clock moves to a new millisecond; only the calls are
//! timed. 1,000 IDs per ms is a quarter of a 12-bit sequence, so no row waits for the next
//! millisecond, and the times are the cost of a call, not the layout's ceiling:
//!
//! - `core/Generator<Snowflake>::next`: the typed generator and nothing else;
//! - `idmint/Minter::next_as::<Snowflake>`: the async minter on a current-thread runtime (a
//!   minter on the data directory, its window stored, its clock guard and metrics);
//! - `idmint/BlockingMinter::next_as::<Snowflake>`: the same from code without a runtime;
//! - `idmint-client/next (local server)`: `idmint-client` against an `idmint serve` in this
//!   process on loopback, its prefetch buffer refilled in the background;
//! - `ferroid/AtomicSnowflakeGenerator (MonotonicClock)`: ferroid's lock-free generator with
//!   its own clock.
//!
//! Run with `cargo bench -p idmint-bench --bench minter`.

use std::{
    hint::{black_box, spin_loop},
    sync::Arc,
    time::{Duration, Instant},
};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferroid::{generator::AtomicSnowflakeGenerator, id::SnowflakeTwitterId, time::MonotonicClock};
use idmint::{BlockingMinter, Minter, Snowflake};
use idmint_bench::{bursts, wait_for_next_ms};
use idmint_core::{Clock, GeneratorConfig, Next, SystemClock};
use idmint_runtime::ClockDriven;

/// Calls per burst: a quarter of what a 12-bit sequence holds in a millisecond.
const BURST: u64 = 1_000;

/// The system clock in milliseconds, the minter's only clock.
fn system_ms() -> u64 {
    SystemClock.now_ms()
}

fn fail(what: &str, error: impl std::fmt::Display) -> ! {
    panic!("{what}: {error}")
}

/// A runtime for the async rows: one thread, as an application's request handler sees it.
fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("runtime", e))
}

fn minter_next(c: &mut Criterion) {
    let mut group = c.benchmark_group("minter_next");
    // Criterion plans from the timed part only; each burst of 1,000 IDs also waits about a
    // millisecond, so 100 ms of timed calls is a few seconds of wall time per row.
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(50))
        .measurement_time(Duration::from_millis(100))
        .sample_size(20);

    let config = GeneratorConfig::default();
    let core = Snowflake::generator(1, 7, &config).unwrap_or_else(|e| fail("generator", e));
    group.bench_function("core/Generator<Snowflake>::next", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                loop {
                    match core.next_at(SystemClock.now_ms()) {
                        Ok(Next::Ready(id)) => {
                            black_box(id);
                            break;
                        }
                        Ok(Next::Wait { .. }) => spin_loop(),
                        Err(e) => fail("core", e),
                    }
                }
            })
        })
    });

    let dir = tempfile::tempdir().unwrap_or_else(|e| fail("tempdir", e));
    let runtime = current_thread();
    let minter = runtime
        .block_on(Minter::builder().data_dir(dir.path().join("async")).build())
        .unwrap_or_else(|e| fail("minter", e));
    group.bench_function("idmint/Minter::next_as::<Snowflake>", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let mut timed = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BURST);
                    wait_for_next_ms(system_ms);
                    let start = Instant::now();
                    for _ in 0..n {
                        let id: Snowflake =
                            minter.next_as().await.unwrap_or_else(|e| fail("minter", e));
                        black_box(id);
                    }
                    timed += start.elapsed();
                    left -= n;
                }
                timed
            })
        })
    });
    runtime.block_on(minter.close()).unwrap_or_else(|e| fail("close", e));

    let blocking: BlockingMinter = Minter::builder()
        .data_dir(dir.path().join("blocking"))
        .build_blocking()
        .unwrap_or_else(|e| fail("blocking minter", e));
    group.bench_function("idmint/BlockingMinter::next_as::<Snowflake>", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                let id: Snowflake = blocking.next_as().unwrap_or_else(|e| fail("minter", e));
                black_box(id);
            })
        })
    });
    blocking.close().unwrap_or_else(|e| fail("close", e));

    client_through_local_server(&mut group);

    let ferroid =
        AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(7, MonotonicClock::default());
    group.bench_function("ferroid/AtomicSnowflakeGenerator (MonotonicClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(ferroid.next_id(|_| spin_loop()));
            })
        })
    });
    group.finish();
}

/// `idmint-client`'s `next()` against an `idmint serve` of this process on loopback (the
/// default snowflake namespace, in memory), with the client's default prefetch.
fn client_through_local_server(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
) {
    let server_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("server runtime", e));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let addr = server_runtime.block_on(async {
        let server = idmint_server::Server::start(
            idmint_server::ServerConfig::default(),
            Arc::new(idmint_coord::MemoryCoordinator::new()),
            Arc::new(SystemClock),
        )
        .await
        .unwrap_or_else(|e| fail("server", e));
        let listener =
            tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| fail("bind", e));
        let addr = listener.local_addr().unwrap_or_else(|e| fail("address", e));
        tokio::spawn(idmint_server::serve(server, listener, shutdown.clone()));
        addr
    });
    let client = idmint_client::Client::builder()
        .endpoint(format!("http://{addr}"))
        .build_blocking()
        .unwrap_or_else(|e| fail("client", e));
    group.bench_function("idmint-client/next (local server)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(client.next().unwrap_or_else(|e| fail("client", e)));
            })
        })
    });
    client.close();
    shutdown.cancel();
    server_runtime.shutdown_timeout(Duration::from_secs(5));
}

criterion_group!(benches, minter_next);
criterion_main!(benches);
