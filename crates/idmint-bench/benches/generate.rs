//! Nanoseconds per ID for every idmint layout beside the peer crates, measured in one run.
//!
//! Every benchmark iteration is one ID (or, in `batch`, one reservation), so criterion's
//! median is the cost per ID. The groups differ in the clock each generator reads:
//!
//! - `single_thread`: one thread. idmint reads a *counter clock*: a plain counter that moves
//!   1 ms forward every 2^k readings, with 2^k at most a quarter of the layout's IDs per ms,
//!   so no generator is ever held back by its sequence. ferroid reads the same counter clock
//!   (like with like) and, separately, its own benchmark's setup. uuid, ulid and snowflaked
//!   read the system clock themselves, as they always do.
//! - `two_threads`: the same, with two threads sharing one generator. Each thread has its own
//!   counter, so the two readings drift apart a little, as two threads' clock readings do.
//! - `batch`: one reservation of up to 4,096 IDs (or one tick's worth) at a fresh tick, with
//!   and without consuming the IDs.
//! - `unsaturated_burst`: real clocks, bursts of 1,000 calls that start just after the clock
//!   moves to a new millisecond; only the calls are timed, the wait for the next millisecond
//!   is not. 1,000 per ms is well under a 12-bit sequence's 4,096.
//! - `uuid7`: the typed `uuid7` generator beside the typed snowflake one (both on the counter
//!   clock) and `uuid::Uuid::now_v7()` (system clock, as always), and `uuid7` batches: one
//!   reservation of a fresh millisecond's 4,096 IDs, with and without reading them. The
//!   `folded` rows hand `black_box` each 128-bit ID folded to 64 bits, which keeps a harness
//!   stall (a missed store-to-load forwarding on `black_box`'s 16-byte reload) out of the time.
//! - `saturated`: real clocks in a tight loop, spinning whenever the millisecond's sequence is
//!   used up: every 12-bit snowflake is pinned at its ceiling of 4,096 IDs per ms (244 ns).

use std::{
    cell::Cell,
    hint::{black_box, spin_loop},
    sync::{
        Barrier, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};
use ferroid::{
    generator::AtomicSnowflakeGenerator,
    id::SnowflakeTwitterId,
    time::{MonotonicClock, TWITTER_EPOCH, TimeSource},
};
use idmint_bench::bursts;
use idmint_core::{
    ChunkRegistry, ChunkedTraceIdGenerator, Clock, DecimalIdGenerator, Error, Flake,
    GeneratorConfig, HotGuid, Icicle, Js53, Lable, LableMode, Layout, Next, Snowflake, Sonyflake,
    SystemClock, TraceId, Uuid7, Uuid7Generator,
};
use idmint_runtime::{BlockingGenerator, ClockDriven, SpinWait, TickingClock};

/// ferroid's own benchmark layout, in a module of its own: the items `define_snowflake_id!`
/// generates have no documentation.
mod ferroid_bench_layout {
    use ferroid::define_snowflake_id;

    define_snowflake_id!(
        /// ferroid's own benchmark layout (`BenchSnowflake` in its `benches/bench.rs`): a
        /// 0-bit timestamp and a 63-bit sequence.
        BenchSnowflake, u64,
        reserved: 1,
        timestamp: 0,
        machine_id: 0,
        sequence: 63
    );
}

use ferroid_bench_layout::BenchSnowflake;

// ferroid's Twitter layout and idmint's Snowflake count from the same epoch.
const _: () = assert!(TWITTER_EPOCH.as_millis() == Snowflake::EPOCH_MS as u128);

/// IDs per call of the bursts in `unsaturated_burst`.
const BURST: u64 = 1_000;

/// How a layout's time moves in these benchmarks.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// The counter clock moves 1 ms every `1 << shift` readings on a thread.
    shift: u32,
    /// The layout's tick, in ms.
    tick_ms: u64,
    /// IDs per reservation in `batch`: one tick's worth, at most 4,096.
    batch: u64,
}

/// Snowflake, icicle, go-flakeid: 4,096 IDs per ms; the counter clock gives 1,024 per ms.
const PER_MS_4096: Pace = Pace { shift: 10, tick_ms: 1, batch: 4096 };
/// Sonyflake: 256 IDs per 10 ms; 4 per ms is 40 per tick (80 with two threads).
const SONYFLAKE: Pace = Pace { shift: 2, tick_ms: 10, batch: 256 };
/// LableOrg: 64 IDs per ms; 16 per ms.
const LABLE: Pace = Pace { shift: 4, tick_ms: 1, batch: 64 };
/// js53: 128 IDs per ms; 32 per ms.
const JS53: Pace = Pace { shift: 5, tick_ms: 1, batch: 128 };
/// TraceId: 4,190,208 IDs per second; 1,024 per ms is about 1 M per second.
const TRACE_ID: Pace = Pace { shift: 10, tick_ms: 1000, batch: 4096 };
/// HotGuid: 2^24 IDs per second; 1,024 per ms.
const HOT_GUID: Pace = Pace { shift: 10, tick_ms: 1000, batch: 4096 };

thread_local! {
    /// Readings of the counter clock on this thread.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// A clock that is a plain counter: every reading on a thread moves that thread's counter up
/// by one, and the reading is `base_ms + counter >> shift`.
///
/// It never reads the system clock, and it moves forward when a generator says to wait (or
/// that the reading is too far behind), as a real clock would have by the time the caller
/// retried. idmint and ferroid read the very same clock.
#[derive(Debug, Clone, Copy)]
struct CounterClock {
    base_ms: u64,
    shift: u32,
}

impl CounterClock {
    /// A clock starting at `base_ms`; resets this thread's counter.
    fn new(base_ms: u64, shift: u32) -> Self {
        CALLS.set(0);
        CounterClock { base_ms, shift }
    }

    #[inline(always)]
    fn read(&self) -> u64 {
        let calls = CALLS.get();
        CALLS.set(calls + 1);
        self.base_ms + (calls >> self.shift)
    }

    /// Moves this thread's reading forward to at least `ms`.
    #[cold]
    fn advance_to(&self, ms: u64) {
        let calls = ms.saturating_sub(self.base_ms) << self.shift;
        CALLS.set(CALLS.get().max(calls));
    }

    /// Moves this thread's reading forward by `ms`.
    #[cold]
    fn advance_by(&self, ms: u64) {
        CALLS.set(CALLS.get() + (ms << self.shift));
    }
}

impl TimeSource<u64> for CounterClock {
    #[inline(always)]
    fn current_millis(&self) -> u64 {
        self.read()
    }
}

/// ferroid reading idmint's `TickingClock` (ms since the Twitter epoch): both generators fed
/// from one clock.
struct FerroidTicking<'a>(&'a TickingClock);

impl TimeSource<u64> for FerroidTicking<'_> {
    #[inline(always)]
    fn current_millis(&self) -> u64 {
        self.0.now_ms() - Snowflake::EPOCH_MS
    }
}

/// A ferroid clock stuck at 0: with `BenchSnowflake` the sequence then counts up on every
/// call (with a clock that moves, a 0-bit timestamp rolls the sequence back to 0 on every
/// call and the generator returns the same ID each time; see `BENCHMARKS.md`).
struct Frozen;

impl TimeSource<u64> for Frozen {
    #[inline(always)]
    fn current_millis(&self) -> u64 {
        0
    }
}

#[cold]
#[inline(never)]
fn fail(error: Error) -> ! {
    panic!("generator failed: {error}")
}

/// The value, or a panic with the error.
fn ok<T>(result: Result<T, Error>) -> T {
    result.unwrap_or_else(|error| fail(error))
}

/// The next ID from `source`, reading the counter clock.
#[inline(always)]
fn next_counted<S: ClockDriven>(source: &S, clock: &CounterClock) -> S::Id {
    loop {
        match source.next_at(clock.read()) {
            Ok(Next::Ready(id)) => return id,
            Ok(Next::Wait { until_ms }) => clock.advance_to(until_ms),
            Err(Error::ClockBackward { behind_ms, .. }) => clock.advance_by(behind_ms),
            Err(error) => fail(error),
        }
    }
}

/// The next ID from `source`, reading `clock` and spinning until the clock reaches the next
/// tick when the sequence is used up.
#[inline(always)]
fn next_spinning<S: ClockDriven>(source: &S, clock: &impl Clock) -> S::Id {
    loop {
        match source.next_at(clock.now_ms()) {
            Ok(Next::Ready(id)) => return id,
            Ok(Next::Wait { .. }) => spin_loop(),
            Err(error) => fail(error),
        }
    }
}

/// A DecimalId generator with a generator ID no earlier one had. Each sample takes a new one,
/// as a process takes a new generator ID when its counter runs out: at a few ns per ID, one
/// generator's 922,337,202 counter values last only seconds.
fn fresh_decimal() -> DecimalIdGenerator {
    static GENERATOR_ID: AtomicU64 = AtomicU64::new(0);
    ok(DecimalIdGenerator::new(GENERATOR_ID.fetch_add(1, Ordering::Relaxed), 1))
}

/// Runs `work(n)` on two threads (this one and one more) that start together, splitting
/// `iters` between them; returns the wall time from the first start to the last end.
fn two_threads(iters: u64, work: impl Fn(u64) + Sync) -> Duration {
    let barrier = Barrier::new(2);
    let run = |n: u64| {
        barrier.wait();
        let start = Instant::now();
        work(n);
        (start, Instant::now())
    };
    thread::scope(|scope| {
        let other = scope.spawn(|| run(iters / 2));
        let (start_a, end_a) = run(iters - iters / 2);
        let (start_b, end_b) = other.join().expect("benchmark thread panicked");
        end_a.max(end_b) - start_a.min(start_b)
    })
}

/// [`two_threads`] for work that reads the counter clock: each thread's counter starts where
/// the furthest one of the previous sample ended, so the generator never sees time go back
/// across samples.
fn two_threads_counted(iters: u64, high: &AtomicU64, work: impl Fn(u64) + Sync) -> Duration {
    two_threads(iters, |n| {
        CALLS.set(high.load(Ordering::Relaxed));
        work(n);
        high.fetch_max(CALLS.get(), Ordering::Relaxed);
    })
}

/// Calls `$run!(name, generator, pace)` for the generator of every idmint layout that takes
/// the time (all but `decimal-id`, which has no clock, and elfo's chunked TraceId generator,
/// which is per thread).
macro_rules! each_timed_layout {
    ($run:ident) => {{
        let config = GeneratorConfig::default();
        $run!("snowflake", ok(Snowflake::generator(1, 7, &config)), PER_MS_4096);
        $run!("sonyflake", ok(Sonyflake::generator(7, &config)), SONYFLAKE);
        $run!("icicle", ok(Icicle::generator(7, &config)), PER_MS_4096);
        $run!("flake", ok(Flake::generator(1, 7, Flake::EPOCH_MS, &config)), PER_MS_4096);
        $run!("lable", ok(Lable::generator(7, 1, LableMode::default(), &config)), LABLE);
        $run!("js53", ok(Js53::generator(7, &config)), JS53);
        $run!("trace-id", ok(TraceId::generator(7, &config)), TRACE_ID);
        $run!("hot-guid", ok(HotGuid::generator([1, 2, 3, 4, 5], 7, &config)), HOT_GUID);
    }};
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
}

fn single_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("single_thread");
    configure(&mut group);

    macro_rules! counted {
        ($name:expr, $source:expr, $pace:expr) => {{
            let source = $source;
            let clock = CounterClock::new(SystemClock.now_ms(), $pace.shift);
            group.bench_function(concat!("idmint/", $name), |b| {
                b.iter(|| next_counted(&source, &clock))
            });
        }};
    }
    each_timed_layout!(counted);

    let any = ok(Layout::builtin("snowflake")
        .and_then(|layout| layout.generator(&[], &GeneratorConfig::default())));
    counted!("snowflake (AnyGenerator)", any, PER_MS_4096);

    let clock = CounterClock::new(SystemClock.now_ms(), TRACE_ID.shift);
    let registry = ChunkRegistry::new();
    let mut chunked = ok(ChunkedTraceIdGenerator::new(7));
    group.bench_function("idmint/trace-id (chunked)", |b| {
        b.iter(|| chunked.next(&registry, clock.read()))
    });

    group.bench_function("idmint/decimal-id", |b| {
        b.iter_custom(|iters| {
            let decimal = fresh_decimal();
            let start = Instant::now();
            for _ in 0..iters {
                black_box(ok(decimal.next()));
            }
            start.elapsed()
        })
    });

    peers_single_thread(&mut group);
    group.finish();
}

fn peers_single_thread(group: &mut BenchmarkGroup<'_, WallTime>) {
    let clock = CounterClock::new(SystemClock.now_ms() - Snowflake::EPOCH_MS, PER_MS_4096.shift);
    let twitter = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(7, clock);
    group.bench_function("ferroid/twitter (counter clock)", |b| {
        b.iter(|| twitter.next_id(|ms| clock.advance_by(ms)))
    });
    let own = AtomicSnowflakeGenerator::<BenchSnowflake, _>::new(0, MonotonicClock::default());
    group.bench_function("ferroid/bench-snowflake (MonotonicClock)", |b| {
        b.iter(|| own.next_id(|_| spin_loop()))
    });
    let frozen = AtomicSnowflakeGenerator::<BenchSnowflake, _>::new(0, Frozen);
    group.bench_function("ferroid/bench-snowflake (frozen clock)", |b| {
        b.iter(|| frozen.next_id(|_| spin_loop()))
    });

    let snowflaked = snowflaked::sync::Generator::new(7);
    group.bench_function("snowflaked/sync (system clock, saturated)", |b| {
        b.iter(|| snowflaked.generate::<u64>())
    });
    group.bench_function("uuid/now_v7", |b| b.iter(uuid::Uuid::now_v7));
    group.bench_function("ulid/generate", |b| b.iter(ulid::Ulid::generate));
    let mut monotonic = ulid::Generator::new();
    group.bench_function("ulid/monotonic", |b| {
        b.iter(|| monotonic.generate().expect("ulid overflow"))
    });
}

/// The next `uuid7` from `generator`, reading the counter clock (as [`next_counted`]; the
/// `uuid7` generator is not a `ClockDriven` source of `idmint-runtime`).
#[inline(always)]
fn next_uuid7(generator: &Uuid7Generator, clock: &CounterClock) -> Uuid7 {
    loop {
        match generator.next(clock.read()) {
            Ok(Next::Ready(id)) => return id,
            Ok(Next::Wait { until_ms }) => clock.advance_to(until_ms),
            Err(Error::ClockBackward { behind_ms, .. }) => clock.advance_by(behind_ms),
            Err(error) => fail(error),
        }
    }
}

/// A 128-bit ID folded to 64 bits, every bit used: what a 128-bit row hands to `black_box`.
#[inline(always)]
fn fold(id: u128) -> u64 {
    (id >> 64) as u64 ^ id as u64
}

/// `uuid7` beside the typed snowflake and `uuid::Uuid::now_v7()`, in one group so that one run
/// gives the ratios; and its batch reservation, per ID.
fn uuid7(c: &mut Criterion) {
    let mut group = c.benchmark_group("uuid7");
    configure(&mut group);
    let config = GeneratorConfig::default();
    let snowflake = ok(Snowflake::generator(1, 7, &config));
    let clock = CounterClock::new(SystemClock.now_ms(), PER_MS_4096.shift);
    group.bench_function("idmint/snowflake (typed next)", |b| {
        b.iter(|| next_counted(&snowflake, &clock))
    });
    let generator = ok(Uuid7::generator(7, &config));
    let clock = CounterClock::new(SystemClock.now_ms(), PER_MS_4096.shift);
    group
        .bench_function("idmint/uuid7 (typed next)", |b| b.iter(|| next_uuid7(&generator, &clock)));
    group.bench_function("uuid/now_v7", |b| b.iter(uuid::Uuid::now_v7));
    // The same calls with each 128-bit ID folded to 64 bits (every bit still used) before it
    // is handed to `black_box`: a 16-byte value written as two 8-byte halves and read back at
    // once by `black_box`'s 16-byte load misses store-to-load forwarding, a stall of the
    // harness that `perf annotate` puts on that load (BENCHMARKS.md, "UUIDv7").
    group.bench_function("idmint/uuid7 (typed next, folded)", |b| {
        b.iter(|| fold(next_uuid7(&generator, &clock).as_u128()))
    });
    group.bench_function("uuid/now_v7 (folded)", |b| {
        b.iter(|| fold(uuid::Uuid::now_v7().as_u128()))
    });

    let generator = ok(Uuid7::generator(8, &config));
    let mut now_ms = SystemClock.now_ms();
    group.throughput(Throughput::Elements(4096));
    group.bench_function("idmint/uuid7 (reserve only)", |b| {
        b.iter(|| {
            now_ms += 1;
            ok(generator.next_batch(now_ms, 4096))
        })
    });
    group.bench_function("idmint/uuid7 (reserve + iterate, folded)", |b| {
        b.iter(|| {
            now_ms += 1;
            match generator.next_batch(now_ms, 4096) {
                Ok(Next::Ready(batch)) => batch.for_each(|id| {
                    black_box(fold(id.as_u128()));
                }),
                Ok(Next::Wait { until_ms }) => panic!("a fresh millisecond waits ({until_ms})"),
                Err(error) => fail(error),
            }
        })
    });
    group.finish();
}

fn two_threads_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("two_threads");
    configure(&mut group);

    macro_rules! counted {
        ($name:expr, $source:expr, $pace:expr) => {{
            let source = $source;
            let clock = CounterClock::new(SystemClock.now_ms(), $pace.shift);
            let high = AtomicU64::new(0);
            group.bench_function(concat!("idmint/", $name), |b| {
                b.iter_custom(|iters| {
                    two_threads_counted(iters, &high, |n| {
                        for _ in 0..n {
                            black_box(next_counted(&source, &clock));
                        }
                    })
                })
            });
        }};
    }
    each_timed_layout!(counted);

    let clock = CounterClock::new(SystemClock.now_ms(), TRACE_ID.shift);
    let high = AtomicU64::new(0);
    static REGISTRY: ChunkRegistry = ChunkRegistry::new();
    group.bench_function("idmint/trace-id (chunked, one per thread)", |b| {
        b.iter_custom(|iters| {
            two_threads_counted(iters, &high, |n| {
                let mut chunked = ok(ChunkedTraceIdGenerator::new(7));
                for _ in 0..n {
                    black_box(chunked.next(&REGISTRY, clock.read()));
                }
            })
        })
    });

    group.bench_function("idmint/decimal-id", |b| {
        b.iter_custom(|iters| {
            let decimal = fresh_decimal();
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(ok(decimal.next()));
                }
            })
        })
    });

    peers_two_threads(&mut group);
    group.finish();
}

fn peers_two_threads(group: &mut BenchmarkGroup<'_, WallTime>) {
    let clock = CounterClock::new(SystemClock.now_ms() - Snowflake::EPOCH_MS, PER_MS_4096.shift);
    let high = AtomicU64::new(0);
    let twitter = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(7, clock);
    group.bench_function("ferroid/twitter (counter clock)", |b| {
        b.iter_custom(|iters| {
            two_threads_counted(iters, &high, |n| {
                for _ in 0..n {
                    black_box(twitter.next_id(|ms| clock.advance_by(ms)));
                }
            })
        })
    });
    let own = AtomicSnowflakeGenerator::<BenchSnowflake, _>::new(0, MonotonicClock::default());
    group.bench_function("ferroid/bench-snowflake (MonotonicClock)", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(own.next_id(|_| spin_loop()));
                }
            })
        })
    });
    let frozen = AtomicSnowflakeGenerator::<BenchSnowflake, _>::new(0, Frozen);
    group.bench_function("ferroid/bench-snowflake (frozen clock)", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(frozen.next_id(|_| spin_loop()));
                }
            })
        })
    });

    let snowflaked = snowflaked::sync::Generator::new(7);
    group.bench_function("snowflaked/sync (system clock, saturated)", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(snowflaked.generate::<u64>());
                }
            })
        })
    });
    group.bench_function("uuid/now_v7", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(uuid::Uuid::now_v7());
                }
            })
        })
    });
    group.bench_function("ulid/generate", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    black_box(ulid::Ulid::generate());
                }
            })
        })
    });
    let monotonic = Mutex::new(ulid::Generator::new());
    group.bench_function("ulid/monotonic (in a Mutex)", |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |n| {
                for _ in 0..n {
                    let mut generator = monotonic.lock().expect("poisoned");
                    black_box(generator.generate().expect("ulid overflow"));
                }
            })
        })
    });
}

fn batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);

    // One reservation per iteration, each at the next tick: the reading moves one tick per
    // call, so every reservation gets a whole fresh tick.
    macro_rules! collected {
        ($name:expr, $source:expr, $pace:expr) => {{
            let source = $source;
            let pace: Pace = $pace;
            let mut now_ms = SystemClock.now_ms();
            let mut ids = Vec::with_capacity(pace.batch as usize);
            group.throughput(Throughput::Elements(pace.batch));
            group.bench_function(concat!("idmint/", $name, " (reserve + collect)"), |b| {
                b.iter(|| {
                    now_ms += pace.tick_ms;
                    let batch = match source.batch_at(now_ms, pace.batch) {
                        Ok(Next::Ready(batch)) => batch,
                        Ok(Next::Wait { until_ms }) => panic!("a fresh tick waits ({until_ms})"),
                        Err(error) => fail(error),
                    };
                    assert_eq!(batch.len() as u64, pace.batch);
                    ids.clear();
                    ids.extend(batch);
                    black_box(&ids);
                })
            });
        }};
    }

    let config = GeneratorConfig::default();
    let snowflake = ok(Snowflake::generator(1, 7, &config));
    let mut now_ms = SystemClock.now_ms();
    group.throughput(Throughput::Elements(4096));
    group.bench_function("idmint/snowflake (reserve only)", |b| {
        b.iter(|| {
            now_ms += 1;
            ok(snowflake.next_batch(now_ms, 4096))
        })
    });
    group.bench_function("idmint/snowflake (reserve + iterate)", |b| {
        b.iter(|| {
            now_ms += 1;
            match snowflake.next_batch(now_ms, 4096) {
                Ok(Next::Ready(batch)) => batch.for_each(|id| {
                    black_box(id);
                }),
                Ok(Next::Wait { until_ms }) => panic!("a fresh tick waits ({until_ms})"),
                Err(error) => fail(error),
            }
        })
    });
    each_timed_layout!(collected);

    let mut ids = Vec::with_capacity(4096);
    group.throughput(Throughput::Elements(4096));
    group.bench_function("idmint/decimal-id (reserve + collect)", |b| {
        b.iter_custom(|iters| {
            let decimal = fresh_decimal();
            let start = Instant::now();
            for _ in 0..iters {
                ids.clear();
                ids.extend(ok(decimal.next_batch(4096)));
                black_box(&ids);
            }
            start.elapsed()
        })
    });
    group.finish();
}

fn unsaturated_burst(c: &mut Criterion) {
    let mut group = c.benchmark_group("unsaturated_burst");
    // Criterion plans from the timed part only; each burst of 1,000 IDs also waits about a
    // millisecond, so 50 ms of timed calls is about 5 s of wall time per benchmark.
    group
        .throughput(Throughput::Elements(1))
        .warm_up_time(Duration::from_millis(20))
        .measurement_time(Duration::from_millis(50))
        .sample_size(10);

    let ticking = TickingClock::start();
    let tick_ms = || ticking.now_ms();
    let system_ms = || SystemClock.now_ms();
    let config = GeneratorConfig::default();

    let snowflake = ok(Snowflake::generator(1, 7, &config));
    group.bench_function("idmint/snowflake (TickingClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, tick_ms, || {
                black_box(next_spinning(&snowflake, &ticking));
            })
        })
    });
    let snowflake = ok(Snowflake::generator(1, 8, &config));
    group.bench_function("idmint/snowflake (SystemClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(next_spinning(&snowflake, &SystemClock));
            })
        })
    });
    let trace_id = ok(TraceId::generator(7, &config));
    group.bench_function("idmint/trace-id (TickingClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, tick_ms, || {
                black_box(next_spinning(&trace_id, &ticking));
            })
        })
    });
    let registry = ChunkRegistry::new();
    let mut chunked = ok(ChunkedTraceIdGenerator::new(7));
    group.bench_function("idmint/trace-id (chunked, TickingClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, tick_ms, || {
                black_box(chunked.next(&registry, ticking.now_ms()));
            })
        })
    });

    let mono = MonotonicClock::<1>::with_epoch(TWITTER_EPOCH);
    let mono_ms = || TimeSource::<u64>::current_millis(&mono);
    let twitter = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(7, mono.clone());
    group.bench_function("ferroid/twitter (MonotonicClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, mono_ms, || {
                black_box(twitter.next_id(|_| spin_loop()));
            })
        })
    });
    let twitter =
        AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(8, FerroidTicking(&ticking));
    group.bench_function("ferroid/twitter (TickingClock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, tick_ms, || {
                black_box(twitter.next_id(|_| spin_loop()));
            })
        })
    });

    let snowflaked = snowflaked::sync::Generator::new(7);
    group.bench_function("snowflaked/sync (system clock)", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(snowflaked.generate::<u64>());
            })
        })
    });
    group.bench_function("uuid/now_v7", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(uuid::Uuid::now_v7());
            })
        })
    });
    group.bench_function("ulid/generate", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(ulid::Ulid::generate());
            })
        })
    });
    let mut monotonic = ulid::Generator::new();
    group.bench_function("ulid/monotonic", |b| {
        b.iter_custom(|iters| {
            bursts(iters, BURST, system_ms, || {
                black_box(monotonic.generate().expect("ulid overflow"));
            })
        })
    });
    group.finish();
}

fn saturated(c: &mut Criterion) {
    let mut group = c.benchmark_group("saturated");
    configure(&mut group);

    let ticking = TickingClock::start();
    let config = GeneratorConfig::default();
    let snowflake = ok(Snowflake::generator(1, 7, &config));
    group.bench_function("idmint/snowflake (SystemClock, spin)", |b| {
        b.iter(|| next_spinning(&snowflake, &SystemClock))
    });
    let snowflake = ok(Snowflake::generator(1, 8, &config));
    group.bench_function("idmint/snowflake (TickingClock, spin)", |b| {
        b.iter(|| next_spinning(&snowflake, &ticking))
    });
    let snowflake = ok(Snowflake::generator(1, 9, &config));
    let blocking =
        BlockingGenerator::with_wait(&snowflake, &ticking, SpinWait::with_clock(&ticking));
    group.bench_function("idmint/snowflake (BlockingGenerator, TickingClock, SpinWait)", |b| {
        b.iter(|| blocking.next().expect("blocking generator failed"))
    });

    let twitter = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(
        7,
        MonotonicClock::<1>::with_epoch(TWITTER_EPOCH),
    );
    group.bench_function("ferroid/twitter (MonotonicClock, spin)", |b| {
        b.iter(|| twitter.next_id(|_| spin_loop()))
    });
    let snowflaked = snowflaked::sync::Generator::new(7);
    group.bench_function("snowflaked/sync (system clock)", |b| {
        b.iter(|| snowflaked.generate::<u64>())
    });
    group.finish();
}

criterion_group!(
    name = benches;
    config = Criterion::default().without_plots();
    targets = single_thread, two_threads_group, batch, unsaturated_burst, saturated, uuid7
);
criterion_main!(benches);
