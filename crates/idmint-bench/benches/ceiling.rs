//! How close a 12-bit snowflake generator comes to its ceiling of 4,096 IDs per millisecond
//! with a real clock, on one thread and on two threads sharing one generator, and the
//! embedded `Minter` on one to eight threads.
//!
//! Each row issues IDs as fast as it can for [`RUN`] of wall-clock time, waiting (by spinning
//! or sleeping, as the row says) whenever the millisecond's sequence is used up, and reports
//! the IDs issued per wall-clock millisecond as a share of 4,096. Every thread checks that the
//! IDs it receives strictly increase, and the IDs of the threads served least and most are
//! given as shares of an even split. Run with `cargo bench -p idmint-bench --bench ceiling`;
//! it prints a Markdown table.
#![allow(clippy::print_stdout, reason = "the benchmark's output is the table it prints")]

use std::{
    hint::spin_loop,
    sync::Barrier,
    thread,
    time::{Duration, Instant},
};

use ferroid::{
    generator::AtomicSnowflakeGenerator,
    id::SnowflakeTwitterId,
    time::{MonotonicClock, TWITTER_EPOCH},
};
use idmint_core::{Clock, GeneratorConfig, Next, Snowflake, SystemClock};
use idmint_runtime::{BlockingGenerator, SpinWait, TickingClock};

/// How long each row runs.
const RUN: Duration = Duration::from_secs(2);
/// A 12-bit sequence: IDs per millisecond.
const PER_MS: f64 = 4096.0;
/// IDs issued between two looks at the time.
const CHUNK: u64 = 1024;

/// One row's result.
struct Outcome {
    ids: u64,
    elapsed: Duration,
    /// The IDs of the thread served least and most, as a share of an even split.
    fewest: f64,
    most: f64,
}

/// Calls `issue` on `threads` threads that start together until [`RUN`] has passed, checking
/// that each thread's IDs strictly increase.
fn measure(threads: usize, issue: &(impl Fn() -> u64 + Sync)) -> Outcome {
    let barrier = Barrier::new(threads);
    let run = || {
        barrier.wait();
        let start = Instant::now();
        let deadline = start + RUN;
        let (mut ids, mut last) = (0u64, 0u64);
        while Instant::now() < deadline {
            for _ in 0..CHUNK {
                let id = issue();
                assert!(id > last, "IDs went from {last} to {id}");
                last = id;
            }
            ids += CHUNK;
        }
        (ids, start, Instant::now())
    };
    let spans: Vec<(u64, Instant, Instant)> = thread::scope(|scope| {
        let others: Vec<_> = (1..threads).map(|_| scope.spawn(run)).collect();
        let mine = run();
        let mut spans: Vec<_> =
            others.into_iter().map(|h| h.join().expect("ceiling thread panicked")).collect();
        spans.push(mine);
        spans
    });
    let start = spans.iter().map(|s| s.1).min().expect("one thread at least");
    let end = spans.iter().map(|s| s.2).max().expect("one thread at least");
    let ids: u64 = spans.iter().map(|s| s.0).sum();
    let even = ids as f64 / threads as f64;
    let fewest = spans.iter().map(|s| s.0).min().unwrap_or(0) as f64 / even;
    let most = spans.iter().map(|s| s.0).max().unwrap_or(0) as f64 / even;
    Outcome { ids, elapsed: end - start, fewest, most }
}

fn row(name: &str, threads: usize, issue: &(impl Fn() -> u64 + Sync)) {
    let outcome = measure(threads, issue);
    let ms = outcome.elapsed.as_secs_f64() * 1e3;
    let per_ms = outcome.ids as f64 / ms;
    println!(
        "| {name} | {threads} | {ids} | {ms:.1} | {per_ms:.1} | {share:.2} % | {ns:.1} | {fewest:.1} / {most:.1} % |",
        ids = outcome.ids,
        fewest = 100.0 * outcome.fewest,
        most = 100.0 * outcome.most,
        share = 100.0 * per_ms / PER_MS,
        ns = outcome.elapsed.as_nanos() as f64 / outcome.ids as f64,
    );
}

fn main() {
    let ticking = TickingClock::start();
    let config = GeneratorConfig::default();
    let generator = |worker| Snowflake::generator(1, worker, &config).expect("valid generator");

    println!(
        "| generator (clock, how it waits) | threads | IDs | elapsed ms | IDs per ms | of 4,096 per ms | ns per ID | fewest / most of an even share |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for threads in [1, 2] {
        let plain = generator(1);
        row(
            "idmint snowflake (SystemClock, plain loop spinning on `Next::Wait`)",
            threads,
            &|| {
                loop {
                    match plain.next(SystemClock.now_ms()) {
                        Ok(Next::Ready(id)) => return id.to_raw(),
                        Ok(Next::Wait { .. }) => spin_loop(),
                        Err(error) => panic!("{error}"),
                    }
                }
            },
        );

        let source = generator(2);
        let spin = BlockingGenerator::with_wait(&source, SystemClock, SpinWait::new());
        row("idmint snowflake (BlockingGenerator, SystemClock, SpinWait)", threads, &|| {
            spin.next().expect("generator failed").to_raw()
        });

        let source = generator(3);
        let spin = BlockingGenerator::with_wait(&source, &ticking, SpinWait::with_clock(&ticking));
        row("idmint snowflake (BlockingGenerator, TickingClock, SpinWait)", threads, &|| {
            spin.next().expect("generator failed").to_raw()
        });

        let source = generator(4);
        let sleep = BlockingGenerator::new(&source, SystemClock);
        row(
            "idmint snowflake (BlockingGenerator, SystemClock, ThreadSleep: the default)",
            threads,
            &|| sleep.next().expect("generator failed").to_raw(),
        );

        let ferroid = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(
            5,
            MonotonicClock::<1>::with_epoch(TWITTER_EPOCH),
        );
        row(
            "ferroid AtomicSnowflakeGenerator, Twitter layout (MonotonicClock, spin)",
            threads,
            &|| ferroid.next_id(|_| spin_loop()).to_raw(),
        );

        let snowflaked = snowflaked::sync::Generator::new(6);
        row("snowflaked sync::Generator (system clock, spins inside)", threads, &|| {
            snowflaked.generate::<u64>()
        });
    }

    // The embedded minter with its defaults (the snowflake layout, a data directory, the
    // window stored ahead), from 1 to 8 threads on one namespace, beside ferroid at 8.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let minter =
        idmint::Minter::builder().data_dir(dir.path()).build_blocking().expect("the minter starts");
    for threads in [1, 2, 8] {
        row("idmint Minter (BlockingMinter::next_as::<u64>, defaults)", threads, &|| {
            minter.next_as::<u64>().expect("minter failed")
        });
    }
    minter.close().expect("the minter closes");
    let ferroid = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(
        7,
        MonotonicClock::<1>::with_epoch(TWITTER_EPOCH),
    );
    row("ferroid AtomicSnowflakeGenerator, Twitter layout (MonotonicClock, spin)", 8, &|| {
        ferroid.next_id(|_| spin_loop()).to_raw()
    });
}
