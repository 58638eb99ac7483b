//! The endpoint set: round-robin order, and which endpoints are ejected (skipped for a while
//! after a failure) or asked to wait (a `Retry-After`). Pure state: time comes in as `now`, and
//! nothing here sleeps, sends or reads a clock.

use std::time::Duration;

use tokio::time::Instant;

/// How long a failed endpoint is skipped, and the longest pause a server may ask for: the
/// health part of the client's retry settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ejection {
    /// How long an endpoint is skipped after its first failure; it doubles per failure.
    pub(crate) base: Duration,
    /// The longest an endpoint is skipped.
    pub(crate) max: Duration,
    /// The longest `Retry-After` pause the client honours.
    pub(crate) max_retry_after: Duration,
}

impl Default for Ejection {
    fn default() -> Self {
        Ejection {
            base: Duration::from_secs(1),
            max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(2),
        }
    }
}

/// The health of every endpoint, and whose turn it is.
#[derive(Debug, Clone)]
pub(crate) struct Endpoints {
    health: Vec<Health>,
    /// The endpoint whose turn is next.
    turn: usize,
}

/// What the client knows about one endpoint's health.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Health {
    /// Failures since the last success.
    failures: u32,
    /// Until then the endpoint is skipped while another one is healthy.
    ejected_until: Option<Instant>,
    /// Before then the endpoint is not tried at all: the server asked for it (`Retry-After`).
    not_before: Option<Instant>,
}

/// The endpoint to try, and the earliest time to try it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pick {
    /// The endpoint's index.
    pub(crate) index: usize,
    /// Not before then (`now` unless the server asked for a pause).
    pub(crate) at: Instant,
}

impl Endpoints {
    /// `count` healthy endpoints, the first turn being `start`'s (taken modulo `count`).
    pub(crate) fn new(count: usize, start: usize) -> Self {
        assert!(count > 0, "an endpoint set is never empty");
        Endpoints { health: vec![Health::default(); count], turn: start % count }
    }

    /// The endpoint to try next: the next healthy one in round-robin order; when every
    /// endpoint is ejected, the one whose ejection ends first (a probe). The turn moves past it.
    pub(crate) fn pick(&mut self, now: Instant) -> Pick {
        let count = self.health.len();
        let order = (0..count).map(|k| (self.turn + k) % count);
        let healthy =
            order.clone().find(|&i| self.health[i].ejected_until.is_none_or(|t| t <= now));
        let index = healthy.unwrap_or_else(|| {
            // `min_by_key` keeps the first of equal keys: ties go in round-robin order.
            order.min_by_key(|&i| self.health[i].ejected_until).unwrap_or(self.turn)
        });
        self.turn = (index + 1) % count;
        let at = self.health[index].not_before.map_or(now, |t| t.max(now));
        Pick { index, at }
    }

    /// Records a success: the endpoint is healthy again.
    pub(crate) fn succeeded(&mut self, index: usize) {
        self.health[index] = Health::default();
    }

    /// Records a failure at `now`: the endpoint is ejected for `retry_after` when the server
    /// gave one, else for `ejection.base`, doubled per failure since the last success, both
    /// capped by `ejection.max`. A `retry_after` also keeps the endpoint from being tried at
    /// all before it ends (capped by `ejection.max_retry_after`).
    pub(crate) fn failed(
        &mut self,
        index: usize,
        now: Instant,
        retry_after: Option<Duration>,
        ejection: &Ejection,
    ) {
        let health = &mut self.health[index];
        health.failures = health.failures.saturating_add(1);
        let doubled = ejection.base.saturating_mul(1 << (health.failures - 1).min(16));
        let eject = retry_after.unwrap_or(doubled).min(ejection.max);
        health.ejected_until = Some(now + eject);
        health.not_before = retry_after.map(|pause| now + pause.min(ejection.max_retry_after));
    }

    /// How many endpoints there are.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.health.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ejection() -> Ejection {
        Ejection {
            base: Duration::from_secs(1),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(2),
        }
    }

    /// One step of a scenario: at `at_ms`, either a pick (expecting the endpoint and the
    /// delay before it may be tried) or a recorded outcome.
    enum Step {
        Pick { at_ms: u64, want: usize, delay_ms: u64 },
        Fail { at_ms: u64, index: usize, retry_after_ms: Option<u64> },
        Succeed { index: usize },
    }

    fn check(count: usize, start: usize, steps: &[Step]) {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut endpoints = Endpoints::new(count, start);
        assert_eq!(endpoints.len(), count);
        for (n, step) in steps.iter().enumerate() {
            match *step {
                Step::Pick { at_ms, want, delay_ms } => {
                    let now = t0 + ms(at_ms);
                    let pick = endpoints.pick(now);
                    assert_eq!((pick.index, pick.at - now), (want, ms(delay_ms)), "step {n}");
                }
                Step::Fail { at_ms, index, retry_after_ms } => {
                    endpoints.failed(index, t0 + ms(at_ms), retry_after_ms.map(ms), &ejection())
                }
                Step::Succeed { index } => endpoints.succeeded(index),
            }
        }
    }

    #[test]
    fn round_robin_over_healthy_endpoints() {
        use Step::*;
        check(
            3,
            1,
            &[
                Pick { at_ms: 0, want: 1, delay_ms: 0 },
                Pick { at_ms: 0, want: 2, delay_ms: 0 },
                Pick { at_ms: 0, want: 0, delay_ms: 0 },
                Pick { at_ms: 0, want: 1, delay_ms: 0 },
            ],
        );
        check(
            1,
            7,
            &[Pick { at_ms: 0, want: 0, delay_ms: 0 }, Pick { at_ms: 5, want: 0, delay_ms: 0 }],
        );
    }

    #[test]
    fn a_failed_endpoint_is_skipped_then_tried_again() {
        use Step::*;
        check(
            3,
            0,
            &[
                Fail { at_ms: 0, index: 1, retry_after_ms: None },
                Pick { at_ms: 0, want: 0, delay_ms: 0 },
                Pick { at_ms: 0, want: 2, delay_ms: 0 },
                Pick { at_ms: 0, want: 0, delay_ms: 0 },
                // Ejected for 1 s: at 999 ms still skipped, at 1000 ms its turn comes again.
                Pick { at_ms: 999, want: 2, delay_ms: 0 },
                Pick { at_ms: 1000, want: 0, delay_ms: 0 },
                Pick { at_ms: 1000, want: 1, delay_ms: 0 },
            ],
        );
    }

    #[test]
    fn ejection_doubles_per_failure_up_to_the_cap_and_resets_on_success() {
        use Step::*;
        check(
            2,
            0,
            &[
                Fail { at_ms: 0, index: 0, retry_after_ms: None },
                Fail { at_ms: 0, index: 0, retry_after_ms: None },
                Fail { at_ms: 0, index: 0, retry_after_ms: None },
                // Third failure: 4 s.
                Pick { at_ms: 3999, want: 1, delay_ms: 0 },
                Pick { at_ms: 3999, want: 1, delay_ms: 0 },
                Pick { at_ms: 4000, want: 0, delay_ms: 0 },
                Fail { at_ms: 4000, index: 0, retry_after_ms: None },
                Fail { at_ms: 4000, index: 0, retry_after_ms: None },
                Fail { at_ms: 4000, index: 0, retry_after_ms: None },
                // Capped at 8 s.
                Pick { at_ms: 11_999, want: 1, delay_ms: 0 },
                Pick { at_ms: 12_000, want: 0, delay_ms: 0 },
                Succeed { index: 0 },
                Fail { at_ms: 12_000, index: 0, retry_after_ms: None },
                // Back to 1 s after the success.
                Pick { at_ms: 13_000, want: 1, delay_ms: 0 },
                Pick { at_ms: 13_000, want: 0, delay_ms: 0 },
            ],
        );
    }

    #[test]
    fn when_every_endpoint_is_ejected_the_first_to_recover_is_probed() {
        use Step::*;
        check(
            3,
            0,
            &[
                Fail { at_ms: 0, index: 0, retry_after_ms: None },
                Fail { at_ms: 0, index: 0, retry_after_ms: None },
                Fail { at_ms: 0, index: 1, retry_after_ms: None },
                Fail { at_ms: 10, index: 2, retry_after_ms: None },
                // 1 recovers at 1000, 2 at 1010, 0 at 2000: 1 is probed at once.
                Pick { at_ms: 20, want: 1, delay_ms: 0 },
                Fail { at_ms: 20, index: 1, retry_after_ms: None },
                Pick { at_ms: 30, want: 2, delay_ms: 0 },
            ],
        );
    }

    #[test]
    fn retry_after_is_honoured_within_bounds() {
        use Step::*;
        check(
            2,
            0,
            &[
                Fail { at_ms: 0, index: 0, retry_after_ms: Some(1000) },
                // Another endpoint is healthy: no waiting.
                Pick { at_ms: 0, want: 1, delay_ms: 0 },
                Fail { at_ms: 0, index: 1, retry_after_ms: Some(5000) },
                // Both paused: 0 first, for what is left of its 1 s.
                Pick { at_ms: 200, want: 0, delay_ms: 800 },
                Fail { at_ms: 1000, index: 0, retry_after_ms: Some(60_000) },
                // 1 ejected until 5000, 0 until 9000 (the eject cap): 1 is next, its pause
                // capped at 2 s from when it was given.
                Pick { at_ms: 1000, want: 1, delay_ms: 1000 },
            ],
        );
        check(
            1,
            0,
            &[
                Fail { at_ms: 0, index: 0, retry_after_ms: Some(1000) },
                Pick { at_ms: 0, want: 0, delay_ms: 1000 },
                Pick { at_ms: 1500, want: 0, delay_ms: 0 },
            ],
        );
    }
}
