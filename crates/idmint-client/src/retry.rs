//! Retry decisions as pure functions (after tikv's `pd/retry.rs`): which answers may be
//! retried, how long to back off, and which endpoint to try next. Nothing here sleeps, sends or
//! reads a clock; the caller passes `now` and a random number in, and does what it is told.
//!
//! A retried request can only cost IDs, never repeat them: a server that issued a batch whose
//! answer was lost just leaves a gap, and the client never hands out an ID twice.

use std::time::Duration;

use tokio::time::Instant;

use crate::endpoints::{Ejection, Endpoints};

/// The client's retry and health settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    /// How many attempts a request gets in all (icicle's client: 5).
    pub(crate) attempts: u32,
    /// How long one attempt may take, connecting and reading the whole answer included.
    pub(crate) timeout: Duration,
    /// The backoff before the second attempt; it doubles per attempt.
    pub(crate) backoff_base: Duration,
    /// The largest backoff.
    pub(crate) backoff_max: Duration,
    /// How long a failed endpoint is skipped, and the longest `Retry-After` honoured.
    pub(crate) ejection: Ejection,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            attempts: 5,
            timeout: Duration::from_secs(2),
            backoff_base: Duration::from_millis(5),
            backoff_max: Duration::from_millis(250),
            ejection: Ejection::default(),
        }
    }
}

/// A failure that is safe to retry, on this endpoint or another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No connection, or it broke before the whole answer arrived.
    Connect(String),
    /// The attempt took longer than the policy's timeout.
    Timeout(Duration),
    /// 502, 503 or 504: the server (or a proxy) cannot serve now.
    Unavailable {
        /// The HTTP status.
        status: u16,
        /// The server's `Retry-After`, if it gave one.
        retry_after: Option<Duration>,
        /// The server's code and message.
        detail: String,
    },
}

impl Failure {
    /// What to report when this was the last attempt.
    pub(crate) fn describe(&self, endpoint: &str) -> String {
        match self {
            Failure::Connect(e) => format!("{endpoint}: {e}"),
            Failure::Timeout(t) => format!("{endpoint}: no answer within {} ms", t.as_millis()),
            Failure::Unavailable { status, detail, .. } => format!("{endpoint}: {status} {detail}"),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Failure::Unavailable { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// How the client treats an HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// 2xx: read the body.
    Success,
    /// 502, 503, 504: retry elsewhere or later.
    Retry,
    /// Every other status: the server refused, and asking again would not change that.
    Refuse,
}

/// Classifies an HTTP status. Only 502, 503 and 504 are retried: they say the server did not
/// or could not issue. A 500 is a server bug, and a 4xx is the caller's to fix.
pub(crate) fn classify(status: u16) -> Class {
    match status {
        200..=299 => Class::Success,
        502..=504 => Class::Retry,
        _ => Class::Refuse,
    }
}

/// Reads a `Retry-After` header given in seconds. The HTTP-date form is not used by idmint
/// servers and is ignored.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() || value.len() > 10 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().map(Duration::from_secs)
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Wait `wait`, then try `endpoint`.
    Retry {
        /// The endpoint to try.
        endpoint: usize,
        /// How long to wait first.
        wait: Duration,
    },
    /// Stop: the attempts are used up.
    GiveUp,
}

/// Where the first attempt of a request goes, and how long to wait before it (zero unless
/// every endpoint asked for a pause).
pub(crate) fn first(endpoints: &mut Endpoints, now: Instant) -> Decision {
    let pick = endpoints.pick(now);
    Decision::Retry { endpoint: pick.index, wait: pick.at - now }
}

/// Decides what follows attempt number `attempt` (1-based), which failed on `endpoint` with
/// `failure` at `now`. Records the failure in `endpoints`, then gives up when the attempts are
/// used up, or picks the next endpoint in turn (failover) and waits a jittered backoff, or
/// longer when that endpoint asked for a pause. `random` drives the jitter.
pub(crate) fn after_failure(
    policy: &Policy,
    endpoints: &mut Endpoints,
    endpoint: usize,
    failure: &Failure,
    attempt: u32,
    now: Instant,
    random: u64,
) -> Decision {
    endpoints.failed(endpoint, now, failure.retry_after(), &policy.ejection);
    if attempt >= policy.attempts {
        return Decision::GiveUp;
    }
    let pick = endpoints.pick(now);
    let wait = backoff(policy, attempt, random).max(pick.at - now);
    Decision::Retry { endpoint: pick.index, wait }
}

/// The backoff after attempt `attempt` (1-based): `base · 2^(attempt−1)`, capped, with "equal
/// jitter": half of it fixed, the other half random.
pub(crate) fn backoff(policy: &Policy, attempt: u32, random: u64) -> Duration {
    let exp = policy
        .backoff_base
        .saturating_mul(1 << attempt.saturating_sub(1).min(20))
        .min(policy.backoff_max);
    let half = exp / 2;
    let spread = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).saturating_add(1);
    half + Duration::from_nanos(random % spread)
}

/// A small random number generator for jitter (idmint-core's SplitMix64): good enough to
/// spread retries, and no dependency.
#[derive(Debug, Clone)]
pub(crate) struct Jitter(idmint_core::SplitMix64);

impl Jitter {
    /// A generator seeded from the process's hash randomness.
    pub(crate) fn seeded() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let seed = std::collections::hash_map::RandomState::new().build_hasher().finish();
        Jitter(idmint_core::SplitMix64::new(seed))
    }

    /// The next random number.
    pub(crate) fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn policy() -> Policy {
        Policy {
            attempts: 5,
            backoff_base: ms(10),
            backoff_max: ms(100),
            ejection: Ejection { base: ms(1000), max: ms(30_000), max_retry_after: ms(2000) },
            ..Policy::default()
        }
    }

    #[test]
    fn statuses_are_classified() {
        let check = |status: u16, want: Class| assert_eq!(classify(status), want, "{status}");
        check(200, Class::Success);
        check(204, Class::Success);
        check(502, Class::Retry);
        check(503, Class::Retry);
        check(504, Class::Retry);
        check(400, Class::Refuse);
        check(401, Class::Refuse);
        check(403, Class::Refuse);
        check(404, Class::Refuse);
        check(413, Class::Refuse);
        check(429, Class::Refuse);
        check(500, Class::Refuse);
        check(301, Class::Refuse);
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        let check = |text: &str, want: Option<u64>| {
            assert_eq!(parse_retry_after(text), want.map(Duration::from_secs), "{text:?}")
        };
        check("1", Some(1));
        check(" 3 ", Some(3));
        check("0", Some(0));
        check("", None);
        check("-1", None);
        check("1.5", None);
        check("Wed, 21 Oct 2015 07:28:00 GMT", None);
        check("99999999999", None);
    }

    #[test]
    fn backoff_doubles_is_capped_and_jittered_within_half() {
        let check = |attempt: u32, random: u64, want_ms: u64| {
            assert_eq!(backoff(&policy(), attempt, random), ms(want_ms), "{attempt} {random}")
        };
        check(1, 0, 5);
        check(1, 5_000_000, 10);
        check(1, 5_000_001, 5);
        check(2, 0, 10);
        check(3, 0, 20);
        check(4, 0, 40);
        check(5, 0, 50);
        check(5, 50_000_000, 100);
        check(30, 0, 50);
        for random in [1, 77, u64::MAX, 123_456_789] {
            let wait = backoff(&policy(), 3, random);
            assert!(wait >= ms(20) && wait <= ms(40), "{wait:?}");
        }
    }

    /// Runs a request's attempts against a scripted list of failures and checks the decisions:
    /// `(endpoint, wait in ms)` per retry, `None` for giving up.
    fn check(count: usize, failures: &[Failure], want: &[Option<(usize, u64)>]) {
        let t0 = Instant::now();
        let mut endpoints = Endpoints::new(count, 0);
        let Decision::Retry { mut endpoint, wait } = first(&mut endpoints, t0) else {
            panic!("the first attempt is always made")
        };
        assert_eq!((endpoint, wait), (0, Duration::ZERO));
        let mut now = t0;
        let mut got = Vec::new();
        for (i, failure) in failures.iter().enumerate() {
            let attempt = u32::try_from(i + 1).unwrap();
            match after_failure(&policy(), &mut endpoints, endpoint, failure, attempt, now, 0) {
                Decision::Retry { endpoint: next, wait } => {
                    got.push(Some((next, u64::try_from(wait.as_millis()).unwrap())));
                    endpoint = next;
                    now += wait;
                }
                Decision::GiveUp => {
                    got.push(None);
                    break;
                }
            }
        }
        assert_eq!(got, want);
    }

    #[test]
    fn connection_failures_fail_over_in_turn_with_backoff() {
        let refused = || Failure::Connect("connection refused".into());
        check(
            3,
            &[refused(), refused(), refused(), refused(), refused()],
            // Each failed endpoint is ejected, so the next healthy one is tried; once all
            // three are ejected, the one that recovers first (0) is probed.
            &[Some((1, 5)), Some((2, 10)), Some((0, 20)), Some((1, 40)), None],
        );
    }

    #[test]
    fn a_timeout_fails_over_to_the_next_endpoint() {
        check(2, &[Failure::Timeout(ms(200))], &[Some((1, 5))]);
    }

    #[test]
    fn unavailable_fails_over_at_once_or_waits_for_retry_after() {
        let unavailable = |secs: Option<u64>| Failure::Unavailable {
            status: 503,
            retry_after: secs.map(Duration::from_secs),
            detail: "not_ready".into(),
        };
        // With another endpoint: go there after the backoff.
        check(2, &[unavailable(Some(1))], &[Some((1, 5))]);
        // Alone: wait as asked.
        check(1, &[unavailable(Some(1)), unavailable(None)], &[Some((0, 1000)), Some((0, 10))]);
        // Alone, asked for too long: the pause is capped.
        check(1, &[unavailable(Some(3600))], &[Some((0, 2000))]);
    }

    #[test]
    fn one_attempt_means_no_retry() {
        let policy = Policy { attempts: 1, ..policy() };
        let mut endpoints = Endpoints::new(2, 0);
        let failure = Failure::Timeout(ms(1));
        let decision = after_failure(&policy, &mut endpoints, 0, &failure, 1, Instant::now(), 0);
        assert_eq!(decision, Decision::GiveUp);
    }

    #[test]
    fn jitter_varies() {
        let mut jitter = Jitter(idmint_core::SplitMix64::new(1));
        let (a, b) = (jitter.next(), jitter.next());
        assert_ne!(a, b);
        assert_ne!(Jitter::seeded().next(), Jitter::seeded().next());
    }

    #[test]
    fn failures_are_described_with_their_endpoint() {
        let check = |failure: Failure, want: &str| assert_eq!(failure.describe("http://a"), want);
        check(Failure::Connect("connection refused".into()), "http://a: connection refused");
        check(Failure::Timeout(ms(200)), "http://a: no answer within 200 ms");
        check(
            Failure::Unavailable { status: 503, retry_after: None, detail: "not_ready: x".into() },
            "http://a: 503 not_ready: x",
        );
    }
}
