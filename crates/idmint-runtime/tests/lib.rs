//! Behaviour of the waiting generators through the public API, on manual clocks: LableOrg's
//! documented generator behaviour, `fill` across ticks, and threads sharing one generator.
//! No test here waits on the wall clock.

use std::collections::HashSet;

use idmint_core::{Clock, GeneratorConfig, Lable, LableMode, ManualClock, Snowflake};
use idmint_runtime::{BlockingGenerator, Error, Wait};

/// A waiter that does nothing: the clock stays where it is.
struct NoWait;

impl Wait for NoWait {
    fn wait_until(&self, _until_ms: u64) {}
}

/// A waiter that moves a manual clock forward by a fixed step instead of sleeping.
struct Step<'a> {
    clock: &'a ManualClock,
    ms: u64,
}

impl Wait for Step<'_> {
    fn wait_until(&self, _until_ms: u64) {
        self.clock.advance(self.ms);
    }
}

/// A waiter that moves a manual clock forward to the time asked for (never back, even when
/// threads race: each one only adds what it saw missing).
struct Jump<'a>(&'a ManualClock);

impl Wait for Jump<'_> {
    fn wait_until(&self, until_ms: u64) {
        let now_ms = self.0.now_ms();
        self.0.advance(until_ms.saturating_sub(now_ms));
    }
}

/// LableOrg's clock in its tests: a fixed, recent millisecond.
const LABLE_NOW_MS: u64 = 1_700_000_000_000;
/// LableOrg issues 64 IDs per millisecond.
const LABLE_PER_MS: usize = 64;

fn lable() -> idmint_core::Generator<Lable> {
    Lable::generator(1, 5, LableMode::TimeSequential, &GeneratorConfig::default()).unwrap()
}

#[test]
fn lable_with_a_fixed_clock_fails_to_progress_instead_of_hanging() {
    /// With the clock fixed, exactly 64 IDs come out, then `ClockStalled` after `limit` waits.
    fn check(limit: Option<u32>, expected_waits: u32) {
        let clock = ManualClock::new(LABLE_NOW_MS);
        let mut generator = BlockingGenerator::with_wait(lable(), &clock, NoWait);
        if let Some(limit) = limit {
            generator = generator.with_stall_limit(limit);
        }
        let mut issued = 0;
        let err = loop {
            match generator.next() {
                Ok(_) => issued += 1,
                Err(err) => break err,
            }
        };
        assert_eq!(issued, LABLE_PER_MS);
        assert_eq!(
            err,
            Error::ClockStalled {
                until_ms: LABLE_NOW_MS + 1,
                now_ms: LABLE_NOW_MS,
                waits: expected_waits
            }
        );
        // The failure is not sticky: once the clock moves, IDs come again.
        clock.advance(1);
        assert!(generator.next().is_ok());
    }
    check(None, 100);
    // LableOrg's own limit: it gives up after 11 sleeps.
    check(Some(11), 11);
    check(Some(0), 0);
}

#[test]
fn lable_with_a_moving_clock_spreads_ids_over_milliseconds() {
    let clock = ManualClock::new(LABLE_NOW_MS);
    let generator = BlockingGenerator::with_wait(lable(), &clock, Step { clock: &clock, ms: 1 });
    let ids: Vec<Lable> = (0..1_000).map(|_| generator.next().unwrap()).collect();

    let pairs: Vec<(u64, u64)> = ids
        .iter()
        .map(|id| {
            let parts = id.into_parts();
            (parts.timestamp, parts.sequence)
        })
        .collect();
    assert!(pairs.windows(2).all(|w| w[0] < w[1]), "increasing in (timestamp, sequence)");
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    let ms: HashSet<u64> = pairs.iter().map(|&(timestamp, _)| timestamp).collect();
    assert_eq!(ms.len(), 16);
    assert_eq!(ms.iter().min(), Some(&LABLE_NOW_MS));
    assert_eq!(ms.iter().max(), Some(&(LABLE_NOW_MS + 15)));
    assert!(pairs.iter().all(|&(_, sequence)| sequence < LABLE_PER_MS as u64));
}

#[test]
fn fill_delivers_exactly_n_across_ticks() {
    /// `fill(n)` from a fresh Snowflake generator, the waiter jumping to the next tick.
    fn check(n: u64, expected_ms: u64) {
        let start_ms = Snowflake::EPOCH_MS + 1;
        let clock = ManualClock::new(start_ms);
        let source = Snowflake::generator(3, 9, &GeneratorConfig::default()).unwrap();
        let generator = BlockingGenerator::with_wait(source, &clock, Jump(&clock));
        let mut ids = Vec::new();
        generator.fill(n, |id| ids.push(id)).unwrap();
        assert_eq!(ids.len() as u64, n);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "strictly increasing for n = {n}");
        let ms: HashSet<u64> = ids.iter().map(|id| id.into_parts().timestamp).collect();
        assert_eq!(ms.len() as u64, expected_ms, "n = {n}");
        assert_eq!(clock.now_ms(), start_ms + expected_ms.saturating_sub(1));
    }
    let per_ms = 4096;
    check(0, 0);
    check(1, 1);
    check(per_ms, 1);
    check(per_ms + 1, 2);
    check(10 * per_ms - 1, 10);
    check(100_000, 100_000_u64.div_ceil(per_ms));
}

#[test]
fn threads_share_one_generator() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 5_000;
    let clock = ManualClock::new(Snowflake::EPOCH_MS + 1);
    let source = Snowflake::generator(0, 0, &GeneratorConfig::default()).unwrap();
    let generator = BlockingGenerator::with_wait(source, &clock, Jump(&clock));
    let per_thread: Vec<Vec<Snowflake>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let generator = &generator;
                scope.spawn(move || {
                    if i % 2 == 0 {
                        (0..PER_THREAD).map(|_| generator.next().unwrap()).collect()
                    } else {
                        let mut ids = Vec::with_capacity(PER_THREAD);
                        generator.fill(PER_THREAD as u64, |id| ids.push(id)).unwrap();
                        ids
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = HashSet::new();
    for ids in &per_thread {
        assert_eq!(ids.len(), PER_THREAD);
        // Each thread sees its own IDs in increasing order.
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        all.extend(ids.iter().copied());
    }
    assert_eq!(all.len(), THREADS * PER_THREAD);
}
