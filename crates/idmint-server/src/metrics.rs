//! Prometheus metrics: plain atomic counters on the hot path, rendered as text on `/metrics`.
//!
//! No metrics library: the hot path only does relaxed atomic adds, and the exposition format is
//! a few lines of text.

use crate::listener::Refusal;
use std::{
    fmt::Write,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
};

/// Counters and gauges of one namespace.
#[derive(Debug, Default)]
pub(crate) struct NamespaceMetrics {
    pub(crate) ids_issued: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) sequence_exhaustions: AtomicU64,
    pub(crate) waited_ms: AtomicU64,
    pub(crate) clock_backward_events: AtomicU64,
    pub(crate) clock_backward_ms_total: AtomicU64,
    pub(crate) clock_backward_ms_max: AtomicU64,
    pub(crate) window_exhausted: AtomicU64,
    pub(crate) mark_ms: AtomicU64,
    pub(crate) mark_extensions: AtomicU64,
    pub(crate) mark_failures: AtomicU64,
    pub(crate) claims: AtomicU64,
    pub(crate) claims_lost: AtomicU64,
    pub(crate) store_failures: AtomicU64,
}

impl NamespaceMetrics {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub(crate) fn clock_backward(&self, step_ms: u64) {
        self.clock_backward_events.fetch_add(1, Relaxed);
        self.clock_backward_ms_total.fetch_add(step_ms, Relaxed);
        self.clock_backward_ms_max.fetch_max(step_ms, Relaxed);
    }
}

/// The state of a namespace at render time, beyond its counters.
pub(crate) struct NamespaceGauges<'a> {
    pub(crate) name: &'a str,
    pub(crate) ready: bool,
    pub(crate) generator_id: Option<u64>,
    pub(crate) ahead_of_wall_ms: u64,
    pub(crate) metrics: &'a NamespaceMetrics,
}

/// HTTP responses by status code (the codes the server produces, plus "other"), and the
/// connections: open, closed by the server and why, refused and why.
#[derive(Debug, Default)]
pub(crate) struct HttpMetrics {
    by_status: [AtomicU64; STATUSES.len() + 1],
    connections_open: AtomicU64,
    closed: [AtomicU64; CloseReason::ALL.len()],
    refused: [AtomicU64; 2],
}

const STATUSES: [u16; 12] = [200, 400, 401, 403, 404, 405, 413, 414, 431, 500, 503, 504];

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

/// Renders everything in the Prometheus text exposition format.
pub(crate) fn render(
    namespaces: &[NamespaceGauges<'_>],
    http: &HttpMetrics,
    ready: bool,
) -> String {
    let mut out = String::with_capacity(4096);
    let family = |out: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    let per_ns = |out: &mut String,
                  name: &str,
                  kind: &str,
                  help: &str,
                  value: &dyn Fn(&NamespaceGauges<'_>) -> u64| {
        family(out, name, kind, help);
        for ns in namespaces {
            let _ = writeln!(out, "{name}{{namespace=\"{}\"}} {}", ns.name, value(ns));
        }
    };
    let load = |c: &AtomicU64| c.load(Relaxed);
    per_ns(&mut out, "idmint_ids_issued_total", "counter", "IDs issued.", &|n| {
        load(&n.metrics.ids_issued)
    });
    per_ns(
        &mut out,
        "idmint_requests_total",
        "counter",
        "Requests for IDs (single and batch).",
        &|n| load(&n.metrics.requests),
    );
    per_ns(&mut out, "idmint_batches_total", "counter", "Batch requests served.", &|n| {
        load(&n.metrics.batches)
    });
    per_ns(
        &mut out,
        "idmint_sequence_exhaustions_total",
        "counter",
        "Times a tick's sequence was used up and the generator had to wait.",
        &|n| load(&n.metrics.sequence_exhaustions),
    );
    per_ns(
        &mut out,
        "idmint_wait_ms_total",
        "counter",
        "Milliseconds requests spent waiting for the generator.",
        &|n| load(&n.metrics.waited_ms),
    );
    per_ns(
        &mut out,
        "idmint_clock_backward_total",
        "counter",
        "Backward steps of the wall clock seen.",
        &|n| load(&n.metrics.clock_backward_events),
    );
    per_ns(
        &mut out,
        "idmint_clock_backward_ms_total",
        "counter",
        "Sum of the sizes of backward wall-clock steps, in ms.",
        &|n| load(&n.metrics.clock_backward_ms_total),
    );
    per_ns(
        &mut out,
        "idmint_clock_backward_ms_max",
        "gauge",
        "The largest backward wall-clock step seen, in ms.",
        &|n| load(&n.metrics.clock_backward_ms_max),
    );
    per_ns(
        &mut out,
        "idmint_ahead_of_wall_ms",
        "gauge",
        "How far the generator's time is ahead of the wall clock, in ms.",
        &|n| n.ahead_of_wall_ms,
    );
    per_ns(
        &mut out,
        "idmint_window_exhausted_total",
        "counter",
        "Requests refused because the stored high-water mark was used up.",
        &|n| load(&n.metrics.window_exhausted),
    );
    per_ns(
        &mut out,
        "idmint_high_water_mark_ms",
        "gauge",
        "The durably stored high-water mark, in Unix ms.",
        &|n| load(&n.metrics.mark_ms),
    );
    per_ns(
        &mut out,
        "idmint_high_water_mark_extensions_total",
        "counter",
        "Successful extensions of the high-water mark.",
        &|n| load(&n.metrics.mark_extensions),
    );
    per_ns(
        &mut out,
        "idmint_high_water_mark_failures_total",
        "counter",
        "Failed attempts to extend the high-water mark.",
        &|n| load(&n.metrics.mark_failures),
    );
    per_ns(&mut out, "idmint_claims_total", "counter", "Generator-ID claims taken.", &|n| {
        load(&n.metrics.claims)
    });
    per_ns(
        &mut out,
        "idmint_claims_lost_total",
        "counter",
        "Claims lost or lapsed, after which the namespace claimed again.",
        &|n| load(&n.metrics.claims_lost),
    );
    per_ns(
        &mut out,
        "idmint_store_failures_total",
        "counter",
        "Failed calls to the store a namespace issues from (segments, counters, Redis).",
        &|n| load(&n.metrics.store_failures),
    );
    per_ns(
        &mut out,
        "idmint_namespace_ready",
        "gauge",
        "1 when the namespace can issue IDs.",
        &|n| u64::from(n.ready),
    );
    family(&mut out, "idmint_generator_id", "gauge", "The generator ID held for the namespace.");
    for ns in namespaces {
        if let Some(id) = ns.generator_id {
            let _ = writeln!(out, "idmint_generator_id{{namespace=\"{}\"}} {id}", ns.name);
        }
    }
    family(&mut out, "idmint_ready", "gauge", "1 when the server is ready to issue IDs.");
    let _ = writeln!(out, "idmint_ready {}", u64::from(ready));
    family(&mut out, "idmint_http_responses_total", "counter", "HTTP responses by status code.");
    for (i, status) in STATUSES.iter().enumerate() {
        let _ = writeln!(
            out,
            "idmint_http_responses_total{{code=\"{status}\"}} {}",
            load(&http.by_status[i])
        );
    }
    let _ = writeln!(
        out,
        "idmint_http_responses_total{{code=\"other\"}} {}",
        load(&http.by_status[STATUSES.len()])
    );
    http.render_connections(&mut out);
    out
}
