//! The metrics of the APIs: HTTP responses by status, connections (open, closed and why,
//! refused and why) and request latencies per route or gRPC method, rendered by hand as
//! Prometheus text after the engine's families of issuing (`/metrics`).
//!
//! As the engine's counters: relaxed atomic adds on the hot path (and a read lock to find a
//! latency series), base units in the names (seconds), `_total` on counters.

use std::{
    collections::BTreeMap,
    fmt::Write,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

/// The metrics an API owns (the gRPC API's calls and streams): it makes them when it is
/// served ([`Server::api_metrics`](crate::Server::api_metrics)), and `/metrics` renders them
/// after the server's own.
pub(crate) trait ApiMetrics: std::any::Any + std::fmt::Debug + Send + Sync {
    /// Appends its families in the Prometheus text format.
    fn render(&self, out: &mut String);
}

/// HTTP responses by status code (the codes the server produces, plus "other"), and the
/// connections: open, closed by the server and why, refused and why.
#[derive(Debug, Default)]
pub(crate) struct HttpMetrics {
    by_status: [AtomicU64; STATUSES.len() + 1],
    connections_open: AtomicU64,
    closed: [AtomicU64; CloseReason::ALL.len()],
    refused: [AtomicU64; 2],
    /// Request latencies by method and route template.
    pub(crate) latency: Latencies,
}

const STATUSES: [u16; 13] = [200, 400, 401, 403, 404, 405, 406, 413, 414, 431, 500, 503, 504];

/// Why the server closed an HTTP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// No byte within `first_byte_timeout_ms` of accept.
    FirstByte,
    /// A header not complete within `header_timeout_ms`.
    Header,
    /// A body not complete within `body_timeout_ms`.
    Body,
    /// Idle for `idle_timeout_ms`.
    Idle,
    /// Shed at the connection limit for a new connection.
    Shed,
}

/// Why a new connection was closed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `max_connections` are open and none is idle.
    Limit,
    /// The client's IP address holds `max_connections_per_ip`.
    PerIp,
}

impl CloseReason {
    const ALL: [CloseReason; 5] = [
        CloseReason::FirstByte,
        CloseReason::Header,
        CloseReason::Body,
        CloseReason::Idle,
        CloseReason::Shed,
    ];

    fn label(self) -> &'static str {
        match self {
            CloseReason::FirstByte => "first_byte_timeout",
            CloseReason::Header => "header_timeout",
            CloseReason::Body => "body_timeout",
            CloseReason::Idle => "idle_timeout",
            CloseReason::Shed => "shed",
        }
    }
}

impl HttpMetrics {
    /// Appends the families of HTTP: responses by status code, connections, latencies.
    pub(crate) fn render(&self, out: &mut String) {
        let family = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        let load = |c: &AtomicU64| c.load(Relaxed);
        family(out, "idmint_http_responses_total", "counter", "HTTP responses by status code.");
        for (i, status) in STATUSES.iter().enumerate() {
            let _ = writeln!(
                out,
                "idmint_http_responses_total{{code=\"{status}\"}} {}",
                load(&self.by_status[i])
            );
        }
        let _ = writeln!(
            out,
            "idmint_http_responses_total{{code=\"other\"}} {}",
            load(&self.by_status[STATUSES.len()])
        );
        self.render_connections(out);
        self.latency.render(
        out,
        "idmint_http_request_duration_seconds",
        "HTTP request latency, from the request's head to its response's head, by method and route template.",
        ["method", "route"],
    );
    }

    pub(crate) fn record(&self, status: u16) {
        let slot = STATUSES.iter().position(|&s| s == status).unwrap_or(STATUSES.len());
        self.by_status[slot].fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_gone(&self) {
        self.connections_open.fetch_sub(1, Relaxed);
    }

    pub(crate) fn connection_closed(&self, reason: CloseReason) {
        self.closed[reason as usize].fetch_add(1, Relaxed);
    }

    pub(crate) fn connection_refused(&self, reason: Refusal) {
        self.refused[reason as usize].fetch_add(1, Relaxed);
    }

    fn render_connections(&self, out: &mut String) {
        let load = |c: &AtomicU64| c.load(Relaxed);
        let _ = writeln!(
            out,
            "# HELP idmint_http_connections_open HTTP connections open.\n# TYPE idmint_http_connections_open gauge\nidmint_http_connections_open {}",
            load(&self.connections_open)
        );
        let _ = writeln!(
            out,
            "# HELP idmint_http_connections_closed_total HTTP connections the server closed, by reason.\n# TYPE idmint_http_connections_closed_total counter"
        );
        for reason in CloseReason::ALL {
            let _ = writeln!(
                out,
                "idmint_http_connections_closed_total{{reason=\"{}\"}} {}",
                reason.label(),
                load(&self.closed[reason as usize])
            );
        }
        let _ = writeln!(
            out,
            "# HELP idmint_http_connections_refused_total New HTTP connections closed at once, by reason.\n# TYPE idmint_http_connections_refused_total counter"
        );
        for (reason, label) in [(Refusal::Limit, "limit"), (Refusal::PerIp, "per_ip")] {
            let _ = writeln!(
                out,
                "idmint_http_connections_refused_total{{reason=\"{label}\"}} {}",
                load(&self.refused[reason as usize])
            );
        }
    }
}

/// The upper bounds of the latency buckets, in microseconds (0.5 ms to 10 s).
const BUCKETS_US: [u64; 14] = [
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000,
];

/// A latency histogram: a relaxed atomic add per bucket, count and sum.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    /// Observations per bucket (not cumulative); the last slot is above every bound.
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let slot = BUCKETS_US.iter().position(|&bound| us <= bound).unwrap_or(BUCKETS_US.len());
        self.buckets[slot].fetch_add(1, Relaxed);
        self.count.fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Writes the `_bucket`, `_sum` and `_count` samples of one series; `labels` is the
    /// series' labels without braces (`route="/v1/next"`).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, bound) in BUCKETS_US.iter().enumerate() {
            cumulative += self.buckets[i].load(Relaxed);
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        // Read the count after the buckets: `+Inf` is at least every bucket's total.
        let count =
            self.count.load(Relaxed).max(cumulative + self.buckets[BUCKETS_US.len()].load(Relaxed));
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = self.sum_ns.load(Relaxed);
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {}.{:09}",
            sum / 1_000_000_000,
            sum % 1_000_000_000
        );
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Latency histograms by a small, bounded set of label values (route templates, gRPC
/// methods): a read lock and a relaxed add per request once a series exists.
#[derive(Debug, Default)]
pub(crate) struct Latencies {
    series: RwLock<BTreeMap<(String, String), Arc<Histogram>>>,
}

impl Latencies {
    /// Records one request of `(first, second)` (method and route, or service and method).
    pub(crate) fn observe(&self, first: &str, second: &str, took: Duration) {
        let found = self
            .series
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(first.to_owned(), second.to_owned()))
            .cloned();
        let histogram = match found {
            Some(histogram) => histogram,
            None => Arc::clone(
                self.series
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry((first.to_owned(), second.to_owned()))
                    .or_default(),
            ),
        };
        histogram.observe(took);
    }

    /// Writes the family `name` with its labels named `keys`.
    pub(crate) fn render(&self, out: &mut String, name: &str, help: &str, keys: [&str; 2]) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let series = self.series.read().unwrap_or_else(|p| p.into_inner());
        for ((first, second), histogram) in series.iter() {
            let labels =
                format!("{}=\"{}\",{}=\"{}\"", keys[0], escape(first), keys[1], escape(second));
            histogram.render(out, name, &labels);
        }
    }
}

/// A label value escaped for the text format.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_is_cumulative_with_its_sum_and_count() {
        let histogram = Histogram::default();
        for us in [100, 600, 600, 20_000_000] {
            histogram.observe(Duration::from_micros(us));
        }
        let mut out = String::new();
        histogram.render(&mut out, "h", "route=\"/x\"");
        let check = |line: &str| assert!(out.lines().any(|l| l == line), "no `{line}` in\n{out}");
        check("h_bucket{route=\"/x\",le=\"0.0005\"} 1");
        check("h_bucket{route=\"/x\",le=\"0.001\"} 3");
        check("h_bucket{route=\"/x\",le=\"10\"} 3");
        check("h_bucket{route=\"/x\",le=\"+Inf\"} 4");
        check("h_sum{route=\"/x\"} 20.001300000");
        check("h_count{route=\"/x\"} 4");
    }
}
