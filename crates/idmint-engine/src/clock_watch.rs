//! The clock watch: a thread that reads the wall clock and the monotonic clock every 250 ms and
//! reports each step of the wall clock past a threshold (`clock_step_warn_ms`), in either
//! direction, with one WARN line and the `idmint_clock_step_seconds` histogram. The rule is a
//! pure function of two readings ([`step_between`]), tested with manual clocks.
//!
//! Two ways to see a step (DESIGN.md, "How are clock steps seen?"):
//!
//! - **Against the monotonic clock.** An NTP step or `settimeofday` moves `CLOCK_REALTIME`
//!   only: between two readings the wall clock advances by more (or less) than the monotonic
//!   clock, and the difference is the step.
//! - **Against the sleep.** libfaketime moves `CLOCK_MONOTONIC` too (unless
//!   `DONT_FAKE_MONOTONIC=1`), so both clocks agree and the difference is 0. But the watch sleeps
//!   a fixed 250 ms between readings with a relative sleep (`nanosleep`), which no clock setting
//!   shortens or lengthens: a monotonic clock that went back (or stood still) during that sleep
//!   was set, and the wall clock's advance minus the sleep is the step; one that jumped ahead
//!   by more than the sleep was set forward, or this process did not run for that long
//!   (SIGSTOP, a paused VM). Both are reported, labelled `against="sleep"`.
//!
//! Why a thread and not a task: tokio's timer waits for instants of the (possibly faked)
//! monotonic clock, so a monotonic clock set back by 60 s holds every timer, and a task that
//! sampled on one, 60 s; the thread's relative sleep does not wait for the clock.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::{Duration, Instant},
};

use crate::{clock::WallClock, metrics::Seconds};

/// How long the watch sleeps between two readings.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// One reading of both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sample {
    /// The wall clock, in Unix ms.
    pub(crate) wall_ms: u64,
    /// The monotonic clock, in ms from any fixed point; negative when a faked monotonic clock
    /// was set back past that point.
    pub(crate) mono_ms: i64,
}

/// What a step was measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Against {
    /// The wall clock moved and the monotonic clock did not: an NTP step, `settimeofday`.
    Monotonic,
    /// Both clocks moved together against the watch's sleep: both were set (libfaketime
    /// without `DONT_FAKE_MONOTONIC=1`), or, for a forward jump, the process did not run.
    Sleep,
}

impl Against {
    const ALL: [Against; 2] = [Against::Monotonic, Against::Sleep];

    fn label(self) -> &'static str {
        match self {
            Against::Monotonic => "monotonic",
            Against::Sleep => "sleep",
        }
    }
}

/// A step of the wall clock: its size in ms (negative: backwards) and how it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClockStep {
    pub(crate) step_ms: i64,
    pub(crate) against: Against,
}

/// How far a measured step may be from the true one: each reading truncates two clocks to
/// whole milliseconds, so a difference of differences is off by less than 2 ms.
const READING_PRECISION_MS: i128 = 2;

/// The rule: the step of the wall clock between two readings `slept_ms` apart (a relative
/// sleep), if it is at least `threshold_ms` either way, to the readings' precision (a leap
/// second, exactly 1 s back, may measure 999 ms and is still a step at the default 1 s).
///
/// - The monotonic clock advanced at least the sleep, less the threshold: it is believed, and
///   the wall clock's advance minus the monotonic clock's is the step. If that is below the
///   threshold but the monotonic clock jumped more than the sleep plus the threshold, both
///   clocks jumped forward together (or the process was stopped): that jump is reported.
/// - Otherwise the monotonic clock went back or stood still during a real sleep, so it was
///   set: the wall clock's advance minus the sleep is the step.
pub(crate) fn step_between(
    before: Sample,
    after: Sample,
    slept_ms: u64,
    threshold_ms: u64,
) -> Option<ClockStep> {
    let wall = i128::from(after.wall_ms) - i128::from(before.wall_ms);
    let mono = i128::from(after.mono_ms) - i128::from(before.mono_ms);
    let slept = i128::from(slept_ms);
    let threshold = i128::from(threshold_ms.max(1));
    let step = |ms: i128, against| {
        (ms.abs() + READING_PRECISION_MS >= threshold).then(|| ClockStep {
            step_ms: i64::try_from(ms).unwrap_or(if ms < 0 { i64::MIN } else { i64::MAX }),
            against,
        })
    };
    if mono >= slept - threshold {
        let jump = mono - slept;
        step(wall - mono, Against::Monotonic)
            .or_else(|| if jump > 0 { step(jump, Against::Sleep) } else { None })
    } else {
        step(wall - slept, Against::Sleep)
    }
}

/// The upper bounds of the step-size buckets, in seconds.
const BUCKETS_S: [u64; 6] = [1, 10, 60, 600, 3_600, 86_400];

/// The steps seen, by direction and by what they were measured against: a histogram of
/// their sizes each.
#[derive(Debug, Default)]
pub(crate) struct ClockStepMetrics {
    /// Indexed by `[backward as usize][against as usize]`.
    series: [[StepHistogram; 2]; 2],
}

#[derive(Debug, Default)]
struct StepHistogram {
    /// Steps per bucket (not cumulative); the last slot is above every bound.
    buckets: [AtomicU64; BUCKETS_S.len() + 1],
    count: AtomicU64,
    sum_ms: AtomicU64,
}

impl ClockStepMetrics {
    /// Counts one step.
    pub(crate) fn record(&self, step: ClockStep) {
        let size_ms = step.step_ms.unsigned_abs();
        let series = &self.series[usize::from(step.step_ms < 0)][step.against as usize];
        let slot = BUCKETS_S.iter().position(|&s| size_ms <= s * 1_000).unwrap_or(BUCKETS_S.len());
        series.buckets[slot].fetch_add(1, Relaxed);
        series.count.fetch_add(1, Relaxed);
        series.sum_ms.fetch_add(size_ms, Relaxed);
    }

    /// Writes the family `idmint_clock_step_seconds`.
    pub(crate) fn render(&self, out: &mut String) {
        use std::fmt::Write;

        let name = "idmint_clock_step_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Steps of the wall clock of at least the configured threshold (1 s by default) seen by the clock watch (each also logged at WARN), by size in seconds, direction, and what they were measured against: monotonic (the wall clock moved, the monotonic clock did not: an NTP step) or sleep (both clocks moved together, as under libfaketime, or the process was stopped that long).\n# TYPE {name} histogram"
        );
        for (backward, direction) in [(false, "forward"), (true, "backward")] {
            for against in Against::ALL {
                let series = &self.series[usize::from(backward)][against as usize];
                let labels = format!("direction=\"{direction}\",against=\"{}\"", against.label());
                let mut cumulative = 0;
                for (i, bound) in BUCKETS_S.iter().enumerate() {
                    cumulative += series.buckets[i].load(Relaxed);
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
                }
                let count = series
                    .count
                    .load(Relaxed)
                    .max(cumulative + series.buckets[BUCKETS_S.len()].load(Relaxed));
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
                let _ = writeln!(
                    out,
                    "{name}_sum{{{labels}}} {}",
                    Seconds(series.sum_ms.load(Relaxed))
                );
                let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
            }
        }
    }
}

/// Logs one step at WARN and counts it.
fn report(step: ClockStep, slept: Duration, metrics: &ClockStepMetrics) {
    metrics.record(step);
    let size = Seconds(step.step_ms.unsigned_abs());
    let direction = if step.step_ms < 0 { "backward" } else { "forward" };
    match (step.against, step.step_ms < 0) {
        (Against::Monotonic, false) => tracing::warn!(
            direction,
            step_ms = step.step_ms,
            against = "monotonic",
            "the wall clock stepped forward by {size} s: IDs follow it, and keep that lead if it is stepped back"
        ),
        (Against::Monotonic, true) => tracing::warn!(
            direction,
            step_ms = step.step_ms,
            against = "monotonic",
            "the wall clock stepped backward by {size} s: IDs keep their logical time, ahead of the wall clock by up to the step"
        ),
        (Against::Sleep, false) => tracing::warn!(
            direction,
            step_ms = step.step_ms,
            against = "sleep",
            "the wall and monotonic clocks jumped forward together by {size} s during a {} s sleep: both were stepped, or this process was stopped that long",
            Seconds(u64::try_from(slept.as_millis()).unwrap_or(u64::MAX))
        ),
        (Against::Sleep, true) => tracing::warn!(
            direction,
            step_ms = step.step_ms,
            against = "sleep",
            "the wall clock stepped backward by {size} s, and the monotonic clock with it: IDs keep their logical time"
        ),
    }
}

/// The monotonic clock in ms since `origin`, negative when a faked clock went back past it.
fn mono_ms_since(origin: Instant) -> i64 {
    let now = Instant::now();
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match now.checked_duration_since(origin) {
        Some(ahead) => ms(ahead),
        None => -ms(origin.saturating_duration_since(now)),
    }
}

/// Starts the watch thread: every [`SAMPLE_EVERY`] it reads `wall` and the monotonic clock,
/// and reports each step of at least `threshold_ms` into `metrics` (and the log). It ends when
/// `metrics` has no other owner (the server is gone). Whether it started.
pub(crate) fn spawn(wall: WallClock, threshold_ms: u64, metrics: &Arc<ClockStepMetrics>) -> bool {
    let metrics: Weak<ClockStepMetrics> = Arc::downgrade(metrics);
    std::thread::Builder::new()
        .name("idmint-clock-watch".into())
        .spawn(move || {
            let origin = Instant::now();
            let read = || Sample { wall_ms: wall.now_ms(), mono_ms: mono_ms_since(origin) };
            let mut before = read();
            loop {
                std::thread::sleep(SAMPLE_EVERY);
                let Some(metrics) = metrics.upgrade() else { return };
                let after = read();
                let slept = u64::try_from(SAMPLE_EVERY.as_millis()).unwrap_or(u64::MAX);
                if let Some(step) = step_between(before, after, slept, threshold_ms) {
                    report(step, SAMPLE_EVERY, &metrics);
                }
                before = after;
            }
        })
        .inspect_err(|e| {
            tracing::warn!(error = %e, "cannot start the clock watch; wall-clock steps are not reported");
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use idmint_core::{Clock, ManualClock};

    use super::*;

    const T0: u64 = 1_700_000_000_000;

    /// A wall clock and a monotonic clock that move only when told, and the watch's readings
    /// of them.
    struct Clocks {
        wall: ManualClock,
        mono: ManualClock,
    }

    impl Clocks {
        fn new() -> Self {
            Clocks { wall: ManualClock::new(T0), mono: ManualClock::new(1_000_000) }
        }

        fn read(&self) -> Sample {
            Sample {
                wall_ms: self.wall.now_ms(),
                mono_ms: i64::try_from(self.mono.now_ms()).expect("small"),
            }
        }
    }

    /// One case: the watch reads both clocks, `during` happens to them while it sleeps
    /// `slept` ms, it reads them again; the rule at a 1 s threshold must find `want`.
    fn check(what: &str, slept: u64, during: impl Fn(&Clocks), want: Option<(i64, Against)>) {
        let clocks = Clocks::new();
        let before = clocks.read();
        during(&clocks);
        let after = clocks.read();
        let got = step_between(before, after, slept, 1_000);
        let want = want.map(|(step_ms, against)| ClockStep { step_ms, against });
        assert_eq!(got, want, "{what}: {before:?} -> {after:?} in a {slept} ms sleep");
    }

    #[test]
    fn steps_are_found_either_way_and_only_past_the_threshold() {
        use Against::{Monotonic, Sleep};

        // Real time passes on both clocks; a step moves the wall clock (an NTP step), or
        // both (libfaketime without DONT_FAKE_MONOTONIC=1).
        let elapse = |c: &Clocks, ms: u64| {
            c.wall.advance(ms);
            c.mono.advance(ms);
        };
        let step_wall = |c: &Clocks, ms: i64| c.wall.set(c.wall.now_ms().saturating_add_signed(ms));
        let step_both = |c: &Clocks, ms: i64| {
            step_wall(c, ms);
            c.mono.set(c.mono.now_ms().saturating_add_signed(ms));
        };
        check("no step", 250, |c| elapse(c, 250), None);
        check("a late wake-up (40 ms)", 250, |c| elapse(c, 290), None);
        check(
            "wall +60 s",
            250,
            |c| (elapse(c, 250), step_wall(c, 60_000)).1,
            Some((60_000, Monotonic)),
        );
        check(
            "wall -60 s",
            250,
            |c| (elapse(c, 250), step_wall(c, -60_000)).1,
            Some((-60_000, Monotonic)),
        );
        check(
            "wall -10 s",
            250,
            |c| (elapse(c, 250), step_wall(c, -10_000)).1,
            Some((-10_000, Monotonic)),
        );
        check(
            "wall +1 s, the threshold",
            250,
            |c| (elapse(c, 250), step_wall(c, 1_000)).1,
            Some((1_000, Monotonic)),
        );
        check(
            "wall -999 ms: a leap second, read across the milliseconds",
            250,
            |c| (elapse(c, 250), step_wall(c, -999)).1,
            Some((-999, Monotonic)),
        );
        check("wall +997 ms, below", 250, |c| (elapse(c, 250), step_wall(c, 997)).1, None);
        check("wall -500 ms, below", 250, |c| (elapse(c, 250), step_wall(c, -500)).1, None);
        check(
            "both +60 s",
            250,
            |c| (elapse(c, 250), step_both(c, 60_000)).1,
            Some((60_000, Sleep)),
        );
        check(
            "both -60 s",
            250,
            |c| (elapse(c, 250), step_both(c, -60_000)).1,
            Some((-60_000, Sleep)),
        );
        check(
            "both -10 s",
            250,
            |c| (elapse(c, 250), step_both(c, -10_000)).1,
            Some((-10_000, Sleep)),
        );
        check("both -500 ms, below", 250, |c| (elapse(c, 250), step_both(c, -500)).1, None);
        check("both +997 ms, below", 250, |c| (elapse(c, 250), step_both(c, 997)).1, None);
        // A process stopped for 5 s looks like a forward jump of both clocks: reported as such.
        check("stopped 5 s", 250, |c| elapse(c, 5_250), Some((5_000, Sleep)));
        // Stopped 5 s, and the wall clock stepped back 60 s meanwhile: the step is exact.
        check(
            "stopped, wall -60 s",
            250,
            |c| (elapse(c, 5_250), step_wall(c, -60_000)).1,
            Some((-60_000, Monotonic)),
        );
        // Only the monotonic clock set back (never real): the wall clock did not step.
        check(
            "monotonic alone -60 s",
            250,
            |c| (elapse(c, 250), c.mono.set(c.mono.now_ms() - 60_000)).1,
            None,
        );
    }

    #[test]
    fn a_monotonic_clock_behind_its_origin_reads_negative() {
        let before = Sample { wall_ms: T0, mono_ms: 5_000 };
        let after = Sample { wall_ms: T0 - 59_750, mono_ms: -54_750 };
        assert_eq!(
            step_between(before, after, 250, 1_000),
            Some(ClockStep { step_ms: -60_000, against: Against::Sleep })
        );
    }

    #[test]
    fn steps_are_rendered_by_direction_and_what_they_were_seen_against() {
        let metrics = ClockStepMetrics::default();
        metrics.record(ClockStep { step_ms: 60_000, against: Against::Monotonic });
        metrics.record(ClockStep { step_ms: -60_000, against: Against::Monotonic });
        metrics.record(ClockStep { step_ms: -10_000, against: Against::Monotonic });
        metrics.record(ClockStep { step_ms: 90_000_000, against: Against::Sleep });
        let mut out = String::new();
        metrics.render(&mut out);
        let check = |line: &str| assert!(out.lines().any(|l| l == line), "no `{line}` in\n{out}");
        let fwd = r#"direction="forward",against="monotonic""#;
        let back = r#"direction="backward",against="monotonic""#;
        let sleep = r#"direction="forward",against="sleep""#;
        check(&format!("idmint_clock_step_seconds_bucket{{{fwd},le=\"10\"}} 0"));
        check(&format!("idmint_clock_step_seconds_bucket{{{fwd},le=\"60\"}} 1"));
        check(&format!("idmint_clock_step_seconds_count{{{fwd}}} 1"));
        check(&format!("idmint_clock_step_seconds_sum{{{fwd}}} 60.000"));
        check(&format!("idmint_clock_step_seconds_bucket{{{back},le=\"10\"}} 1"));
        check(&format!("idmint_clock_step_seconds_count{{{back}}} 2"));
        check(&format!("idmint_clock_step_seconds_sum{{{back}}} 70.000"));
        check(&format!("idmint_clock_step_seconds_bucket{{{sleep},le=\"86400\"}} 0"));
        check(&format!("idmint_clock_step_seconds_bucket{{{sleep},le=\"+Inf\"}} 1"));
        check(r#"idmint_clock_step_seconds_count{direction="backward",against="sleep"} 0"#);
    }
}
