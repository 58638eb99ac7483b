//! `idmint-load`: the load client behind `idmint bench`: it drives a running server for a
//! fixed time and reports rates and latencies, and it checks everything it receives. A
//! response that is not a success, a body that does not parse, an ID seen twice or out of the
//! promised order is counted, and [`Outcome::ok`] is then false: a run never passes on
//! errors it did not look at.
//!
//! - [`http`]: requests on N HTTP/1.1 keep-alive connections, one at a time on each
//!   (requests/s, IDs/s, latency percentiles). The body is checked as IDs (`/v1/next`,
//!   `/v1/batch`) or as a constant (`/healthz`, the bare endpoint of the same stack).
//! - [`grpc_stream`]: idmint's server-streaming `Stream` call on N connections (IDs/s,
//!   messages/s, percentiles of the time between messages).
//! - [`ferroid_stream`]: the same for ferroid-tonic-server's `ferroid.IdGenerator/StreamIds`.
//! - [`client_next`]: `idmint_client::Client::next()` with prefetch, in one task (IDs/s).
//!
//! Every mode runs a warm-up first, then measures: what completes inside the measured window
//! counts towards the rates; everything received, warm-up included, is checked.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use idmint_load::{self as load, BodyCheck, HttpOptions};
//!
//! # async fn run() -> Result<(), load::Error> {
//! let options = HttpOptions {
//!     url: "http://127.0.0.1:8080/v1/next".into(),
//!     connections: 32,
//!     check: BodyCheck::Ids,
//!     warmup: Duration::from_secs(1),
//!     duration: Duration::from_secs(10),
//! };
//! let report = load::http(&options).await?;
//! assert!(report.outcome.ok(), "{:?}", report.outcome.first_failure);
//! println!("{:.0} requests/s, p99 {} µs", report.requests_per_s, report.latency.p99_us);
//! # Ok(())
//! # }
//! ```

mod check;
mod client;
mod codec;
mod ferroid;
mod grpc;
mod http;

use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

pub use crate::{
    check::{Distinct, IdRuns, Latencies, LatencySummary},
    client::{ClientOptions, ClientReport, client_next},
    ferroid::{FerroidOptions, ferroid_stream},
    grpc::{StreamOptions, StreamReport, grpc_stream},
    http::{BodyCheck, HttpOptions, HttpReport, http},
};

/// Why a run could not start. Failures during a run are counted in its [`Outcome`] instead.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL does not parse, or is not `http://`.
    #[error("invalid URL `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The first connection (or call) failed.
    #[error("cannot reach {url}: {reason}")]
    Connect {
        /// The URL given.
        url: String,
        /// The error.
        reason: String,
    },
    /// An option is out of range.
    #[error("{0}")]
    Options(String),
}

/// When a run measures: a warm-up, then the measured duration. Created once the connections
/// are open, just before the load starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    start: Instant,
    end: Instant,
    duration: Duration,
}

impl Window {
    /// A window that starts measuring `warmup` from now and stops `duration` later.
    pub(crate) fn new(warmup: Duration, duration: Duration) -> Self {
        let start = Instant::now() + warmup;
        Window { start, end: start + duration, duration }
    }

    /// Whether `t` is inside the measured part.
    pub(crate) fn measures(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }

    /// When the load stops.
    pub(crate) fn end(&self) -> Instant {
        self.end
    }

    /// The measured duration, in seconds.
    pub(crate) fn seconds(&self) -> f64 {
        self.duration.as_secs_f64()
    }
}

/// What went wrong during a run, and whether the IDs were distinct.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    /// Failed requests, calls or messages (warm-up included).
    pub failures: u64,
    /// The first failure, as text.
    pub first_failure: Option<String>,
    /// The check of every ID received; `None` where the responses hold no IDs.
    pub distinct: Option<Distinct>,
}

impl Outcome {
    /// No failure, and every ID distinct and in the promised order.
    pub fn ok(&self) -> bool {
        self.failures == 0 && self.distinct.is_none_or(|d| d.ok())
    }

    /// Counts a failure, keeping the first one's text.
    pub(crate) fn fail(&mut self, what: impl FnOnce() -> String) {
        self.failures += 1;
        if self.first_failure.is_none() {
            self.first_failure = Some(what());
        }
    }

    /// Adds the failures of `other` (the distinct check is done once, over every source).
    pub(crate) fn absorb(&mut self, other: Outcome) {
        self.failures += other.failures;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

/// A per-second rate over the measured window.
pub(crate) fn rate(count: u64, window: &Window) -> f64 {
    count as f64 / window.seconds()
}

/// How evenly the load's clients (streams or connections) were served: the IDs of the one
/// that got fewest and of the one that got most, each as a share of a fair share (the total
/// over the number of clients; 1.0 when every client got as many). `(0.0, 0.0)` for none.
pub(crate) fn shares(per_client: &[u64]) -> (f64, f64) {
    let total: u64 = per_client.iter().sum();
    if total == 0 {
        return (0.0, 0.0);
    }
    let fair = total as f64 / per_client.len() as f64;
    let fewest = per_client.iter().copied().min().unwrap_or(0);
    let most = per_client.iter().copied().max().unwrap_or(0);
    (fewest as f64 / fair, most as f64 / fair)
}

/// Checks an `http://host:port[/path]` URL.
pub(crate) fn parse_url(url: &str) -> Result<hyper::Uri, Error> {
    let bad = |reason: &str| Error::Url { url: url.to_owned(), reason: reason.to_owned() };
    let uri: hyper::Uri =
        url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(bad("only http:// is supported (no TLS)"));
    }
    if uri.authority().is_none() {
        return Err(bad("no host"));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::shares;

    /// Each case: the IDs per client, then the expected (fewest, most) shares.
    fn check(per_client: &[u64], expected: (f64, f64)) {
        let (fewest, most) = shares(per_client);
        assert!(
            (fewest - expected.0).abs() < 1e-9 && (most - expected.1).abs() < 1e-9,
            "{per_client:?}: ({fewest}, {most}), expected {expected:?}"
        );
    }

    #[test]
    fn shares_are_the_fewest_and_most_over_a_fair_share() {
        check(&[], (0.0, 0.0));
        check(&[0, 0], (0.0, 0.0));
        check(&[5, 5, 5, 5], (1.0, 1.0));
        check(&[0, 10], (0.0, 2.0));
        check(&[9, 10, 11], (0.9, 1.1));
    }
}
