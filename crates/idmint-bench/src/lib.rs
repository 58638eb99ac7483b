//! idmint's measurements. The criterion benchmarks in `benches/` measure the generators beside
//! the peer crates, in one run. The load client behind `idmint bench` is the `idmint-load`
//! crate. The numbers and how to reproduce them are in `BENCHMARKS.md` at the workspace root.
//!
//! What the library holds: the timing helpers the benchmarks share.

#![warn(missing_docs, unreachable_pub)]

use std::{
    hint::spin_loop,
    time::{Duration, Instant},
};

/// Spins until `ms()` (a clock in milliseconds) moves to a new millisecond.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let ms = AtomicU64::new(7);
/// idmint_bench::wait_for_next_ms(|| ms.fetch_add(1, Ordering::Relaxed) / 2);
/// assert!(ms.load(Ordering::Relaxed) >= 9);
/// ```
pub fn wait_for_next_ms(ms: impl Fn() -> u64) {
    let last = ms();
    while ms() == last {
        spin_loop();
    }
}

/// Times `iters` calls of `call` in bursts of `burst` calls, each starting just after `ms()`
/// moves to a new millisecond ([`wait_for_next_ms`]); only the calls are timed, not the waits.
/// A burst smaller than what a layout issues in a millisecond times the cost of a call, not
/// the layout's ceiling.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let ms = AtomicU64::new(0);
/// let mut calls = 0;
/// idmint_bench::bursts(10, 4, || ms.fetch_add(1, Ordering::Relaxed), || calls += 1);
/// assert_eq!(calls, 10);
/// ```
pub fn bursts(iters: u64, burst: u64, ms: impl Fn() -> u64, mut call: impl FnMut()) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(burst.max(1));
        wait_for_next_ms(&ms);
        let start = Instant::now();
        for _ in 0..n {
            call();
        }
        timed += start.elapsed();
        left -= n;
    }
    timed
}
