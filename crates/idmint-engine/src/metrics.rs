//! The engine's Prometheus metrics: plain atomic counters on the hot path, rendered as text
//! (a front end serves it, as `/metrics` of the HTTP API does).
//!
//! No metrics library: the hot path only does relaxed atomic adds, and the exposition format
//! is a few lines of text. Every name follows Prometheus' conventions (base units: seconds and
//! bytes; `_total` on counters), which `promtool check metrics` checks in the tests.

use std::{
    fmt::Write,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
};

use crate::tally::Tally;

/// Counters and gauges of one namespace.
#[derive(Debug, Default)]
pub(crate) struct NamespaceMetrics {
    /// IDs issued, but for those of `single_ids`.
    pub(crate) ids_issued: AtomicU64,
    /// Calls for IDs, but for those of `single_ids`.
    pub(crate) requests: AtomicU64,
    /// Calls for one ID served at once (the embedded minter's `next`): one ID and one request
    /// each, counted with one atomic add instead of two; read through
    /// [`ids_issued`](Self::ids_issued) and [`requests`](Self::requests). Those of a lane
    /// read through a thread's copy are in `single_tally` instead.
    pub(crate) single_ids: AtomicU64,
    /// As `single_ids`, one single-writer slot per thread that counts (`tally.rs`): no locked
    /// add on the one-ID path.
    pub(crate) single_tally: Arc<Tally>,
    pub(crate) batches: AtomicU64,
    pub(crate) sequence_exhaustions: AtomicU64,
    pub(crate) waited_ms: AtomicU64,
    pub(crate) clock_backward_events: AtomicU64,
    pub(crate) clock_backward_ms_total: AtomicU64,
    pub(crate) clock_backward_ms_max: AtomicU64,
    pub(crate) window_exhausted: AtomicU64,
    pub(crate) layout_exhausted: AtomicU64,
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

    /// Every ID issued.
    pub(crate) fn ids_issued(&self) -> u64 {
        self.ids_issued.load(Relaxed).wrapping_add(self.singles())
    }

    /// Every call for IDs, single and batch.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Relaxed).wrapping_add(self.singles())
    }

    /// Calls for one ID served at once, however counted.
    fn singles(&self) -> u64 {
        self.single_ids.load(Relaxed).wrapping_add(self.single_tally.sum())
    }

    pub(crate) fn clock_backward(&self, step_ms: u64) {
        self.clock_backward_events.fetch_add(1, Relaxed);
        self.clock_backward_ms_total.fetch_add(step_ms, Relaxed);
        self.clock_backward_ms_max.fetch_max(step_ms, Relaxed);
    }
}

impl NamespaceMetrics {
    /// The counters as they are now.
    pub(crate) fn snapshot(&self) -> NamespaceCounters {
        let load = |c: &AtomicU64| c.load(Relaxed);
        NamespaceCounters {
            ids_issued: self.ids_issued(),
            requests: self.requests(),
            batches: load(&self.batches),
            sequence_exhaustions: load(&self.sequence_exhaustions),
            waited_ms: load(&self.waited_ms),
            clock_backward_events: load(&self.clock_backward_events),
            window_exhausted: load(&self.window_exhausted),
            layout_exhausted: load(&self.layout_exhausted),
            mark_ms: load(&self.mark_ms),
            mark_extensions: load(&self.mark_extensions),
            mark_failures: load(&self.mark_failures),
            claims: load(&self.claims),
            claims_lost: load(&self.claims_lost),
            store_failures: load(&self.store_failures),
        }
    }
}

/// What a namespace has counted since the engine started, read at one moment: the numbers of
/// its families on `/metrics` ([`Namespace::status`](crate::Namespace::status)).
///
/// # Example
///
/// ```
/// let counters = idmint_engine::NamespaceCounters::default();
/// assert_eq!(counters.ids_issued, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NamespaceCounters {
    /// IDs issued.
    pub ids_issued: u64,
    /// Calls for IDs (single and batch).
    pub requests: u64,
    /// Calls for more than one ID.
    pub batches: u64,
    /// Times a tick's sequence was used up and the generator had to wait.
    pub sequence_exhaustions: u64,
    /// Time calls spent waiting for the generator, in ms.
    pub waited_ms: u64,
    /// Backward steps of the wall clock seen.
    pub clock_backward_events: u64,
    /// Calls refused because the stored high-water mark was used up.
    pub window_exhausted: u64,
    /// Calls refused because the layout's time field has run out.
    pub layout_exhausted: u64,
    /// The durably stored high-water mark, in ms since the Unix epoch (0: none yet).
    pub mark_ms: u64,
    /// Successful extensions of the high-water mark.
    pub mark_extensions: u64,
    /// Failed attempts to extend the high-water mark.
    pub mark_failures: u64,
    /// Generator-ID claims taken.
    pub claims: u64,
    /// Claims lost or lapsed, after which the namespace claimed again.
    pub claims_lost: u64,
    /// Failed calls to the store the namespace issues from.
    pub store_failures: u64,
}

/// A namespace's state now: readiness, the generator ID held, how far its IDs run ahead of
/// the wall clock, and its counters ([`Namespace::status`](crate::Namespace::status)).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_engine::{Engine, ServerConfig};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// engine.issue("default", 5).await?;
/// let status = engine.namespace("default")?.status(engine.clocks());
/// assert!(status.ready && status.generator_id == Some(0));
/// assert_eq!((status.counters.ids_issued, status.counters.batches), (5, 1));
/// engine.shutdown().await?;
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NamespaceStatus {
    /// Whether the namespace can issue now.
    pub ready: bool,
    /// The generator ID held, if any.
    pub generator_id: Option<u64>,
    /// How far its IDs run ahead of the wall clock, in ms.
    pub ahead_of_wall_ms: u64,
    /// Its counters.
    pub counters: NamespaceCounters,
}

/// The state of a namespace at render time, beyond its counters.
pub(crate) struct NamespaceGauges<'a> {
    pub(crate) name: &'a str,
    pub(crate) ready: bool,
    pub(crate) generator_id: Option<u64>,
    pub(crate) ahead_of_wall_ms: u64,
    /// When the layout's time field runs out (Unix ms), if it does.
    pub(crate) runs_out_ms: Option<u64>,
    pub(crate) metrics: &'a NamespaceMetrics,
}

/// Appends the families of issuing: each namespace's counters and gauges, the generator IDs
/// held, and `idmint_ready`, in the Prometheus text format.
pub(crate) fn render_issuing(out: &mut String, namespaces: &[NamespaceGauges<'_>], ready: bool) {
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
    // A value kept in ms, shown in seconds (Prometheus wants base units).
    let per_ns_seconds = |out: &mut String,
                          name: &str,
                          kind: &str,
                          help: &str,
                          value: &dyn Fn(&NamespaceGauges<'_>) -> u64| {
        family(out, name, kind, help);
        for ns in namespaces {
            let _ = writeln!(out, "{name}{{namespace=\"{}\"}} {}", ns.name, Seconds(value(ns)));
        }
    };
    let load = |c: &AtomicU64| c.load(Relaxed);
    per_ns(out, "idmint_ids_issued_total", "counter", "IDs issued.", &|n| n.metrics.ids_issued());
    per_ns(out, "idmint_requests_total", "counter", "Requests for IDs (single and batch).", &|n| {
        n.metrics.requests()
    });
    per_ns(out, "idmint_batches_total", "counter", "Batch requests served.", &|n| {
        load(&n.metrics.batches)
    });
    per_ns(
        out,
        "idmint_sequence_exhaustions_total",
        "counter",
        "Times a tick's sequence was used up and the generator had to wait.",
        &|n| load(&n.metrics.sequence_exhaustions),
    );
    per_ns_seconds(
        out,
        "idmint_wait_seconds_total",
        "counter",
        "Time requests spent waiting for the generator, in seconds.",
        &|n| load(&n.metrics.waited_ms),
    );
    per_ns(
        out,
        "idmint_clock_backward_total",
        "counter",
        "Backward steps of the wall clock seen.",
        &|n| load(&n.metrics.clock_backward_events),
    );
    per_ns_seconds(
        out,
        "idmint_clock_backward_seconds_total",
        "counter",
        "Sum of the sizes of backward wall-clock steps, in seconds.",
        &|n| load(&n.metrics.clock_backward_ms_total),
    );
    per_ns_seconds(
        out,
        "idmint_clock_backward_max_seconds",
        "gauge",
        "The largest backward wall-clock step seen, in seconds.",
        &|n| load(&n.metrics.clock_backward_ms_max),
    );
    per_ns_seconds(
        out,
        "idmint_ahead_of_wall_seconds",
        "gauge",
        "How far the namespace's IDs run ahead of this process's wall clock, in seconds, read at scrape time: the time in the newest ID issued (or the logical time of the next one, if later) minus the wall clock, the largest over its generators. While the wall clock is stepped forward it is 0 (IDs follow the wall clock); once the wall clock is stepped back it is the size of the step, for the life of the process (logical time never goes back); after a start or takeover above a stored mark, how far that mark was ahead.",
        &|n| n.ahead_of_wall_ms,
    );
    per_ns(
        out,
        "idmint_window_exhausted_total",
        "counter",
        "Requests refused because the stored high-water mark was used up.",
        &|n| load(&n.metrics.window_exhausted),
    );
    per_ns(
        out,
        "idmint_layout_exhausted_total",
        "counter",
        "Requests refused because the layout's time field has run out (layout_exhausted).",
        &|n| load(&n.metrics.layout_exhausted),
    );
    // Only namespaces whose layout runs out (a layout that wraps has no end).
    let name = "idmint_layout_runs_out_timestamp_seconds";
    family(
        out,
        name,
        "gauge",
        "When the namespace's layout runs out (its time field's end), as a Unix time in seconds.",
    );
    for ns in namespaces {
        if let Some(end_ms) = ns.runs_out_ms {
            let _ = writeln!(out, "{name}{{namespace=\"{}\"}} {}", ns.name, Seconds(end_ms));
        }
    }
    per_ns_seconds(
        out,
        "idmint_high_water_mark_timestamp_seconds",
        "gauge",
        "The durably stored high-water mark, as a Unix time in seconds.",
        &|n| load(&n.metrics.mark_ms),
    );
    per_ns(
        out,
        "idmint_high_water_mark_extensions_total",
        "counter",
        "Successful extensions of the high-water mark.",
        &|n| load(&n.metrics.mark_extensions),
    );
    per_ns(
        out,
        "idmint_high_water_mark_failures_total",
        "counter",
        "Failed attempts to extend the high-water mark.",
        &|n| load(&n.metrics.mark_failures),
    );
    per_ns(out, "idmint_claims_total", "counter", "Generator-ID claims taken.", &|n| {
        load(&n.metrics.claims)
    });
    per_ns(
        out,
        "idmint_claims_lost_total",
        "counter",
        "Claims lost or lapsed, after which the namespace claimed again.",
        &|n| load(&n.metrics.claims_lost),
    );
    per_ns(
        out,
        "idmint_store_failures_total",
        "counter",
        "Failed calls to the store a namespace issues from (segments, counters, Redis).",
        &|n| load(&n.metrics.store_failures),
    );
    per_ns(out, "idmint_namespace_ready", "gauge", "1 when the namespace can issue IDs.", &|n| {
        u64::from(n.ready)
    });
    family(out, "idmint_generator_id", "gauge", "The generator ID held for the namespace.");
    for ns in namespaces {
        if let Some(id) = ns.generator_id {
            let _ = writeln!(out, "idmint_generator_id{{namespace=\"{}\"}} {id}", ns.name);
        }
    }
    family(out, "idmint_ready", "gauge", "1 when the server is ready to issue IDs.");
    let _ = writeln!(out, "idmint_ready {}", u64::from(ready));
}

/// Milliseconds, written as seconds with three decimals (`1500` is `1.500`).
pub(crate) struct Seconds(pub(crate) u64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// `idmint_build_info` and the standard process metrics (Linux: read from `/proc/self`;
/// elsewhere only the build info).
pub(crate) fn render_process(out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP idmint_build_info The version of idmint serving, as a label; always 1.\n# TYPE idmint_build_info gauge\nidmint_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    let Some(process) = Process::read() else { return };
    let _ = writeln!(
        out,
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}",
        Seconds(process.cpu_ticks * 1000 / CLOCK_TICKS_PER_SECOND)
    );
    let _ = writeln!(
        out,
        "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}",
        process.resident_bytes
    );
    let _ = writeln!(
        out,
        "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {}",
        process.open_fds
    );
    if let Some(limit) = process.max_fds {
        let _ = writeln!(
            out,
            "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds {limit}"
        );
    }
    if let Some(start_ms) = process.start_ms {
        let _ = writeln!(
            out,
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}",
            Seconds(start_ms)
        );
    }
}

/// `/proc` counts CPU time and start times in clock ticks of USER_HZ, which Linux fixes at 100
/// for user space on every architecture it runs on (`sysconf(_SC_CLK_TCK)` would need unsafe
/// code to ask).
const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// The resident size of this process in bytes, as `/metrics` reports it
/// (`process_resident_memory_bytes`): `VmRSS` in `/proc/self/status`. `None` where that file
/// is not there or not as Linux writes it.
///
/// # Example
///
/// ```
/// if let Some(bytes) = idmint_engine::resident_bytes() {
///     assert!(bytes > 0);
/// }
/// ```
pub fn resident_bytes() -> Option<u64> {
    vm_rss_bytes(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// `VmRSS` of a `/proc/<pid>/status` text, in bytes (the file gives kB).
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let kb = status.lines().find_map(|line| line.strip_prefix("VmRSS:"))?;
    kb.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?.checked_mul(1024)
}

/// What `/proc/self` says about this process.
#[derive(Debug, PartialEq, Eq)]
struct Process {
    cpu_ticks: u64,
    resident_bytes: u64,
    open_fds: u64,
    max_fds: Option<u64>,
    start_ms: Option<u64>,
}

impl Process {
    fn read() -> Option<Process> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let boot = std::fs::read_to_string("/proc/stat").ok();
        let limits = std::fs::read_to_string("/proc/self/limits").ok();
        Process::parse(&stat, &status, boot.as_deref(), limits.as_deref(), open_fds)
    }

    /// Parses the files of `/proc` (pure, for the tests).
    fn parse(
        stat: &str,
        status: &str,
        proc_stat: Option<&str>,
        limits: Option<&str>,
        open_fds: u64,
    ) -> Option<Process> {
        // The command name (field 2) is in parentheses and may hold spaces: fields after it
        // are counted from the last `)`. utime and stime are fields 14 and 15, starttime 22.
        let after = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let cpu_ticks = field(14)?.checked_add(field(15)?)?;
        let resident_bytes = vm_rss_bytes(status)?;
        let boot_secs = proc_stat.and_then(|text| {
            text.lines().find_map(|line| line.strip_prefix("btime "))?.trim().parse::<u64>().ok()
        });
        let start_ms = boot_secs
            .zip(field(22))
            .map(|(boot, ticks)| boot * 1000 + ticks * 1000 / CLOCK_TICKS_PER_SECOND);
        let max_fds = limits.and_then(|text| {
            let line = text.lines().find(|line| line.starts_with("Max open files"))?;
            line["Max open files".len()..].split_whitespace().next()?.parse::<u64>().ok()
        });
        Some(Process { cpu_ticks, resident_bytes, open_fds, max_fds, start_ms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_written_from_ms() {
        let check = |ms: u64, want: &str| assert_eq!(Seconds(ms).to_string(), want);
        check(0, "0.000");
        check(1, "0.001");
        check(1_500, "1.500");
        check(60_000, "60.000");
        check(u64::MAX, "18446744073709551.615");
    }

    #[test]
    fn proc_files_are_parsed_and_bad_ones_refused() {
        let stat = "4242 (idmint (a) b) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 12345 1000000 500 18446744073709551615";
        let status = "Name:\tidmint\nVmRSS:\t   2048 kB\nThreads:\t9\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n";
        let process =
            Process::parse(stat, status, Some("cpu 1 2\nbtime 1700000000\n"), Some(limits), 7);
        assert_eq!(
            process,
            Some(Process {
                cpu_ticks: 300,
                resident_bytes: 2048 * 1024,
                open_fds: 7,
                max_fds: Some(1024),
                start_ms: Some(1_700_000_123_450),
            })
        );
        assert_eq!(Process::parse("garbage", status, None, None, 1), None);
        assert_eq!(Process::parse(stat, "VmRSS: lots\n", None, None, 1), None);
    }

    /// The live process, as the server reads it: some CPU, some memory, open files.
    #[test]
    #[cfg(target_os = "linux")]
    fn this_process_is_read() {
        let process = Process::read().expect("/proc/self");
        assert!(process.resident_bytes > 0 && process.open_fds > 0);
        assert!(process.start_ms.is_some_and(|ms| ms > 1_600_000_000_000));
    }
}
