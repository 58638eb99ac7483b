//! The loop that `scripts/instructions` runs under callgrind: N calls of one generator with a
//! fixed time sequence, so that instruction counts repeat exactly from run to run.
//!
//! Usage: `instructions <case> <n>`. Every case makes `n` calls (`n` reservations for
//! `idmint/batch` and `idmint/uuid7-batch`), reads no clock (but snowflaked and `uuid`'s
//! `now_v7`, which read the system clock themselves) and never sleeps. The time is a plain counter that moves 1 ms every 1,024 readings, below every
//! layout's 4,096 IDs per ms, so no call waits. The script runs each case at two sizes and
//! divides the difference of the totals by the difference of the IDs, so that start-up costs
//! cancel. The case prints the number of IDs it made on standard output.

use std::{
    hint::black_box,
    process::ExitCode,
    sync::atomic::{AtomicU64, Ordering},
};

use ferroid::{generator::AtomicSnowflakeGenerator, id::SnowflakeTwitterId, time::TimeSource};
use idmint_core::{Error, GeneratorConfig, Layout, Next, Snowflake, Uuid7};

/// 2025-11-24T00:00:00Z in ms since the Unix epoch: the fixed start of every case's time.
const BASE_MS: u64 = 1_763_942_400_000;

/// Readings per millisecond, as a shift: 1,024 IDs per ms.
const SHIFT: u32 = 10;

/// IDs per reservation in `idmint/batch`.
const BATCH: u64 = 4096;

/// A clock that is a counter: each reading moves it up by one, and the reading is
/// `base_ms + readings >> SHIFT`. A relaxed load and store (no read-modify-write), so a
/// reading costs a few instructions; idmint and ferroid read the very same clock.
struct StepClock {
    base_ms: u64,
    readings: AtomicU64,
}

impl StepClock {
    fn new(base_ms: u64) -> Self {
        StepClock { base_ms, readings: AtomicU64::new(0) }
    }

    #[inline(always)]
    fn read(&self) -> u64 {
        let readings = self.readings.load(Ordering::Relaxed);
        self.readings.store(readings + 1, Ordering::Relaxed);
        self.base_ms + (readings >> SHIFT)
    }
}

impl TimeSource<u64> for &StepClock {
    #[inline(always)]
    fn current_millis(&self) -> u64 {
        self.read()
    }
}

#[cold]
#[inline(never)]
fn fail(what: &str) -> ! {
    panic!("a call that must not wait or fail did: {what}")
}

/// The value, or a panic with the error.
fn ok<T>(result: Result<T, Error>) -> T {
    result.unwrap_or_else(|error| fail(&error.to_string()))
}

/// The ID of a call that must be ready.
#[inline(always)]
fn ready<T>(next: Result<Next<T>, Error>) -> T {
    match next {
        Ok(Next::Ready(id)) => id,
        Ok(Next::Wait { .. }) => fail("wait"),
        Err(error) => fail(&error.to_string()),
    }
}

#[inline(never)]
fn idmint_typed(n: u64) -> u64 {
    let generator = ok(Snowflake::generator(1, 7, &GeneratorConfig::default()));
    let clock = StepClock::new(BASE_MS);
    for _ in 0..n {
        black_box(ready(generator.next(clock.read())));
    }
    n
}

#[inline(never)]
fn idmint_any(n: u64) -> u64 {
    let generator = ok(Layout::builtin("snowflake")
        .and_then(|layout| layout.generator(&[], &GeneratorConfig::default())));
    let clock = StepClock::new(BASE_MS);
    for _ in 0..n {
        black_box(ready(generator.next(clock.read())));
    }
    n
}

/// `n` reservations of 4,096 IDs, each at a fresh millisecond, every ID read.
#[inline(never)]
fn idmint_batch(n: u64) -> u64 {
    let generator = ok(Snowflake::generator(1, 7, &GeneratorConfig::default()));
    for i in 0..n {
        ready(generator.next_batch(BASE_MS + i, BATCH)).for_each(|id| {
            black_box(id);
        });
    }
    n * BATCH
}

/// The typed `uuid7` generator: the (ms, counter) pair as the snowflake's, plus 46 random bits
/// from the thread's ChaCha stream.
#[inline(never)]
fn idmint_uuid7(n: u64) -> u64 {
    let generator = ok(Uuid7::generator(7, &GeneratorConfig::default()));
    let clock = StepClock::new(BASE_MS);
    for _ in 0..n {
        black_box(ready(generator.next(clock.read())));
    }
    n
}

/// `n` reservations of 4,096 `uuid7`s, each at a fresh millisecond, every ID read (the random
/// bits are drawn as the batch is read).
#[inline(never)]
fn idmint_uuid7_batch(n: u64) -> u64 {
    let generator = ok(Uuid7::generator(7, &GeneratorConfig::default()));
    for i in 0..n {
        ready(generator.next_batch(BASE_MS + i, BATCH)).for_each(|id| {
            black_box(id);
        });
    }
    n * BATCH
}

/// The embedded minter's `BlockingMinter::next_as::<T>()` with its defaults (the snowflake
/// layout, a claim and marks in a fresh data directory, the system clock: a minter's logical
/// time never runs slower than the monotonic clock, so the step clock, slower than real time
/// under callgrind, would keep it on the path for a wall clock left behind). The claim check,
/// the clock guard, the counter, the generator, and the conversion to `T` (`u64`, or the
/// typed `Snowflake`, which checks its layout). Its runtime's worker and the engine's
/// window task run beside it and are counted too; they wake on real time, so the total moves
/// by a few instructions per ID between runs. Under callgrind a call is far slower than the
/// layout's 4,096 per ms, so no call waits.
#[inline(never)]
fn idmint_minter<T>(n: u64) -> u64
where
    T: TryFrom<idmint::AnyId, Error = idmint_core::Error>,
{
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&e.to_string()));
    let minter = idmint::Minter::builder()
        .data_dir(dir.path())
        .build_blocking()
        .unwrap_or_else(|e| fail(&e.to_string()));
    for _ in 0..n {
        black_box(minter.next_as::<T>().unwrap_or_else(|e| fail(&e.to_string())));
    }
    minter.close().unwrap_or_else(|e| fail(&e.to_string()));
    n
}

/// `uuid::Uuid::now_v7()`: the `uuid` crate's UUIDv7 (system clock, its own counter and random
/// bits).
#[inline(never)]
fn uuid_now_v7(n: u64) -> u64 {
    for _ in 0..n {
        black_box(uuid::Uuid::now_v7());
    }
    n
}

#[inline(never)]
fn ferroid_twitter(n: u64) -> u64 {
    let clock = StepClock::new(BASE_MS - Snowflake::EPOCH_MS);
    let generator = AtomicSnowflakeGenerator::<SnowflakeTwitterId, _>::new(7, &clock);
    for _ in 0..n {
        black_box(generator.next_id(|_| fail("wait")));
    }
    n
}

#[inline(never)]
fn snowflaked_sync(n: u64) -> u64 {
    let generator = snowflaked::sync::Generator::new(7);
    for _ in 0..n {
        black_box(generator.generate::<u64>());
    }
    n
}

// A command-line program: its output is the count, and its errors go to standard error.
#[allow(clippy::print_stdout, clippy::print_stderr)]
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` runs every bench target with `--bench` (and a filter, if given): this one
    // only counts under callgrind, so it says where to run it and does not fail the suite.
    if args.first().is_some_and(|arg| arg == "--bench") {
        eprintln!("instructions: counted under callgrind only; run scripts/instructions");
        return ExitCode::SUCCESS;
    }
    let [case, n] = args.as_slice() else {
        eprintln!("usage: instructions <case> <n>");
        return ExitCode::from(2);
    };
    let Ok(n) = n.parse::<u64>() else {
        eprintln!("instructions: n must be a whole number, not {n:?}");
        return ExitCode::from(2);
    };
    let ids = match case.as_str() {
        "idmint/typed" => idmint_typed(n),
        "idmint/any" => idmint_any(n),
        "idmint/batch" => idmint_batch(n),
        "idmint/uuid7" => idmint_uuid7(n),
        "idmint/uuid7-batch" => idmint_uuid7_batch(n),
        "idmint/minter" => idmint_minter::<u64>(n),
        "idmint/minter-typed" => idmint_minter::<idmint::Snowflake>(n),
        "uuid/now_v7" => uuid_now_v7(n),
        "ferroid/twitter" => ferroid_twitter(n),
        "snowflaked/sync" => snowflaked_sync(n),
        _ => {
            eprintln!(
                "instructions: unknown case {case:?}; one of idmint/typed, idmint/any, \
                 idmint/batch, idmint/uuid7, idmint/uuid7-batch, idmint/minter, \
                 idmint/minter-typed, uuid/now_v7, \
                 ferroid/twitter, snowflaked/sync"
            );
            return ExitCode::from(2);
        }
    };
    println!("{ids}");
    ExitCode::SUCCESS
}
