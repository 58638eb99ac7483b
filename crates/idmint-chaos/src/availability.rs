//! What clients saw while faults lasted: for each kind of client (plain HTTP to one server,
//! gRPC `Stream` on one server, `idmint-client` with failover), the share of operations that
//! were answered with IDs, the longest time one client went without an answer, and the 99th
//! and 99.9th percentile latency of the answered ones. Each figure is given over the whole run
//! and from the first fault (nemesis) on, so a scenario's baseline does not hide its outage.
//!
//! Latencies go into a log-linear histogram (64 buckets per power of two of microseconds,
//! under 1.6 % error), so a run of tens of millions of `next()` calls costs a few kilobytes.

use std::collections::BTreeMap;

use crate::history::Event;

/// Buckets per power of two.
const SUB: u64 = 64;

/// A latency histogram of microseconds.
#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: BTreeMap<u32, u64>,
    total: u64,
}

impl Histogram {
    fn bucket(us: u64) -> u32 {
        if us < SUB {
            return u32::try_from(us).unwrap_or(0);
        }
        let power = 63 - u64::from(us.leading_zeros());
        let shift = power - SUB.trailing_zeros() as u64;
        let sub = (us >> shift) - SUB;
        u32::try_from((shift + 1) * SUB + sub).unwrap_or(u32::MAX)
    }

    /// The smallest latency of a bucket (its lower edge).
    fn lower(bucket: u32) -> u64 {
        let bucket = u64::from(bucket);
        if bucket < SUB {
            return bucket;
        }
        let shift = bucket / SUB - 1;
        (SUB + bucket % SUB) << shift
    }

    fn add(&mut self, us: u64) {
        *self.counts.entry(Self::bucket(us)).or_default() += 1;
        self.total += 1;
    }

    /// The latency at quantile `q` (0..=1), as the upper edge of its bucket, in ms.
    fn quantile_ms(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        // The rank of the quantile, 1-based: the smallest value with at least q of all at or
        // below it.
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (&bucket, &count) in &self.counts {
            seen += count;
            if seen >= rank {
                return Some(Self::lower(bucket + 1) as f64 / 1_000.0);
            }
        }
        None
    }
}

/// The figures of one kind of client over one span of the run.
#[derive(Debug, Clone, Default)]
struct Span {
    operations: u64,
    answered: u64,
    /// The longest time (µs) one client of this kind went without an answer.
    longest_gap_us: u64,
    latency: Histogram,
}

impl Span {
    fn report(&self) -> SpanReport {
        SpanReport {
            operations: self.operations,
            answered: self.answered,
            answered_share: if self.operations == 0 {
                None
            } else {
                Some(self.answered as f64 / self.operations as f64)
            },
            longest_gap_s: self.longest_gap_us as f64 / 1e6,
            p99_ms: self.latency.quantile_ms(0.99),
            p999_ms: self.latency.quantile_ms(0.999),
        }
    }
}

/// What one client is doing.
#[derive(Debug, Clone, Default)]
struct ClientState {
    /// The time of the operation it invoked and has not finished.
    invoked: Option<u64>,
    /// When it was last answered with IDs, or began.
    last_answer: Option<u64>,
}

/// Follows a history's client operations and nemeses.
#[derive(Debug, Default)]
pub(crate) struct Availability {
    clients: BTreeMap<String, ClientState>,
    /// (kind, from the first fault on?) → figures.
    spans: BTreeMap<(&'static str, bool), Span>,
    first_fault: Option<u64>,
    last_t: u64,
}

/// The figures of one kind of client over one span, as reported.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct SpanReport {
    /// Operations that finished (answered, refused or unanswered).
    pub(crate) operations: u64,
    /// Operations answered with IDs.
    pub(crate) answered: u64,
    /// `answered / operations`.
    pub(crate) answered_share: Option<f64>,
    /// The longest time one client went without an answer, in seconds.
    pub(crate) longest_gap_s: f64,
    /// Latency of the answered operations, 99th percentile, ms.
    pub(crate) p99_ms: Option<f64>,
    /// Latency of the answered operations, 99.9th percentile, ms.
    pub(crate) p999_ms: Option<f64>,
}

/// One kind of client's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct KindReport {
    /// `http` (one server), `grpc` (one server), `client` (idmint-client, failover).
    pub(crate) kind: &'static str,
    /// Over the whole run.
    pub(crate) run: SpanReport,
    /// From the first fault to the end of the run; `None` when nothing was fired.
    pub(crate) faults: Option<SpanReport>,
}

/// The kind of a client, from the name the harness gives it (`http3`, `grpc1`, `client0`,
/// `app2.1`: an application process's first incarnation).
fn kind(client: &str) -> &'static str {
    if client.starts_with("app") {
        "app"
    } else if client.starts_with("http") {
        "http"
    } else if client.starts_with("grpc") {
        "grpc"
    } else if client.starts_with("client") {
        "client"
    } else {
        "other"
    }
}

/// Whose gaps a client's answers close: the client's, or for the incarnations of one
/// application process (`app2.1`, `app2.2`), the application's (`app2`), so that its restarts
/// count as the gaps they are.
fn slot(client: &str) -> &str {
    client.split_once('.').map_or(client, |(app, _)| app)
}

impl Availability {
    /// Takes one event of the history, in the order recorded.
    pub(crate) fn add(&mut self, event: &Event) {
        match event {
            Event::Invoke { client, t, began, .. } => {
                let t = began.unwrap_or(*t);
                self.seen(t);
                let state = self.clients.entry(slot(client).to_owned()).or_default();
                state.invoked = Some(t);
                state.last_answer.get_or_insert(t);
            }
            Event::Ok { client, t, .. } => self.finish(client, *t, true),
            Event::Fail { client, t, .. } | Event::Info { client, t, .. } => {
                self.finish(client, *t, false);
            }
            Event::Nemesis { t, .. } => {
                self.seen(*t);
                self.first_fault.get_or_insert(*t);
            }
            _ => {}
        }
    }

    fn seen(&mut self, t: u64) {
        self.last_t = self.last_t.max(t);
    }

    fn finish(&mut self, client: &str, t: u64, answered: bool) {
        self.seen(t);
        let fault = self.first_fault;
        let Some(state) = self.clients.get_mut(slot(client)) else { return };
        let Some(invoked) = state.invoked.take() else { return };
        let last = state.last_answer.unwrap_or(invoked);
        if answered {
            state.last_answer = Some(t);
        }
        let kind = kind(client);
        let mut windows = vec![(false, last)];
        if let Some(fault) = fault
            && invoked >= fault
        {
            windows.push((true, last.max(fault)));
        }
        for (from_fault, since) in windows {
            let span = self.spans.entry((kind, from_fault)).or_default();
            span.operations += 1;
            if answered {
                span.answered += 1;
                span.latency.add(t.saturating_sub(invoked));
                span.longest_gap_us = span.longest_gap_us.max(t.saturating_sub(since));
            }
        }
    }

    /// The figures of every kind of client, closing each client's last gap at the end of the
    /// history (a client that is never answered again has a gap to the end).
    pub(crate) fn finish_report(mut self) -> Vec<KindReport> {
        let end = self.last_t;
        let fault = self.first_fault;
        for (client, state) in &self.clients {
            let kind = kind(client);
            let last = state.last_answer.unwrap_or(end);
            for (from_fault, since) in [(false, Some(last)), (true, fault.map(|f| last.max(f)))] {
                if let (Some(since), Some(span)) = (since, self.spans.get_mut(&(kind, from_fault)))
                {
                    span.longest_gap_us = span.longest_gap_us.max(end.saturating_sub(since));
                }
            }
        }
        let kinds: Vec<&'static str> = {
            let mut kinds: Vec<_> = self.spans.keys().map(|(k, _)| *k).collect();
            kinds.dedup();
            kinds
        };
        kinds
            .into_iter()
            .map(|kind| KindReport {
                kind,
                run: self
                    .spans
                    .get(&(kind, false))
                    .map(Span::report)
                    .unwrap_or_else(|| Span::default().report()),
                faults: self.spans.get(&(kind, true)).map(Span::report),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invoke(client: &str, t: u64) -> Event {
        Event::Invoke { client: client.into(), server: "s".into(), t, count: 1, began: None }
    }

    fn ok(client: &str, t: u64) -> Event {
        Event::Ok { client: client.into(), t, ids: vec![1] }
    }

    fn fail(client: &str, t: u64) -> Event {
        Event::Fail { client: client.into(), t, error: "503".into() }
    }

    fn nemesis(t: u64) -> Event {
        Event::Nemesis { kind: "pause".into(), t, detail: String::new() }
    }

    /// One history through the accumulator: the figures of one kind.
    fn check(events: &[Event], kind: &str) -> KindReport {
        let mut availability = Availability::default();
        for event in events {
            availability.add(event);
        }
        let reports = availability.finish_report();
        reports.into_iter().find(|r| r.kind == kind).expect("the kind is reported")
    }

    #[test]
    fn shares_gaps_and_percentiles_are_counted_per_kind_and_from_the_first_fault() {
        // http0: answered in 1 ms, 1 ms; then a fault at 10 ms; refused twice; answered at
        // 2_010 ms after being invoked at 2_000 ms.
        let events = [
            invoke("http0", 0),
            ok("http0", 1_000),
            invoke("http0", 1_000),
            ok("http0", 2_000),
            nemesis(10_000),
            invoke("http0", 10_000),
            fail("http0", 11_000),
            invoke("http0", 11_000),
            fail("http0", 12_000),
            invoke("http0", 2_000_000),
            ok("http0", 2_010_000),
        ];
        let report = check(&events, "http");
        assert_eq!((report.run.operations, report.run.answered), (5, 3));
        // The longest gap: from the answer at 2 ms to the one at 2_010 ms.
        assert!((report.run.longest_gap_s - 2.008).abs() < 1e-9, "{report:?}");
        let faults = report.faults.expect("a fault was fired");
        assert_eq!((faults.operations, faults.answered), (3, 1));
        // From the fault on, the gap counts from the fault (10 ms), not the last answer.
        assert!((faults.longest_gap_s - 2.0).abs() < 1e-9, "{faults:?}");
        // The one answered operation after the fault took 10 ms.
        let p99 = faults.p99_ms.expect("p99");
        assert!((10.0..10.2).contains(&p99), "{p99}");
    }

    #[test]
    fn a_client_never_answered_again_has_a_gap_to_the_end() {
        let events = [
            invoke("client0", 0),
            ok("client0", 1_000),
            invoke("client0", 1_000),
            fail("client0", 5_000_000),
        ];
        let report = check(&events, "client");
        assert!((report.run.longest_gap_s - 4.999).abs() < 1e-9, "{report:?}");
        assert_eq!(report.faults, None);
    }

    #[test]
    fn an_application_s_gap_spans_its_restarts() {
        // app0's first incarnation is answered at 1 ms and killed at 2 ms (nothing more
        // printed); its second starts at 500 ms and is first answered at 600 ms.
        let events = [
            invoke("app0.1", 0),
            ok("app0.1", 1_000),
            invoke("app0.1", 1_000),
            fail("app0.1", 2_000),
            invoke("app0.2", 500_000),
            ok("app0.2", 600_000),
        ];
        let report = check(&events, "app");
        assert_eq!((report.run.operations, report.run.answered), (3, 2));
        // One application without IDs from 1 ms to 600 ms, across the restart.
        assert!((report.run.longest_gap_s - 0.599).abs() < 1e-9, "{report:?}");
    }

    #[test]
    fn quantiles_are_within_the_histogram_error() {
        let mut histogram = Histogram::default();
        for us in 1..=100_000u64 {
            histogram.add(us);
        }
        for (q, exact_ms) in [(0.5, 50.0), (0.99, 99.0), (0.999, 99.9)] {
            let got = histogram.quantile_ms(q).expect("quantile");
            assert!(got >= exact_ms && got <= exact_ms * 1.016, "q {q}: {got} vs {exact_ms}");
        }
        for us in [0, 1, 63, 64, 65, 127, 128, 1_000, 123_456_789] {
            let bucket = Histogram::bucket(us);
            assert!(Histogram::lower(bucket) <= us && us < Histogram::lower(bucket + 1), "{us}");
        }
    }
}
