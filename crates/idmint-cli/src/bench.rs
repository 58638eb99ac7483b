//! `idmint bench`: loads a running server for a fixed time and reports rates and latencies.
//! The load client is `idmint_load`; this module turns flags into its options, runs
//! it on a runtime of the requested size, and prints the report (text or one JSON object).
//! A run that received any failure, a duplicate ID or an ID out of order exits with 1 after
//! printing its report. `scripts/load-bench` starts the servers and runs every mode.

use std::{io::Write, time::Duration};

use anyhow::{Context, bail};
use clap::Subcommand;
use idmint_load::{
    self as load, BodyCheck, ClientOptions, FerroidOptions, HttpOptions, LatencySummary, Outcome,
    StreamOptions,
};
use serde::Serialize;

/// The arguments of `idmint bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Each mode loads a server that is already running, for a warm-up
and then the measured duration, and checks every answer: a failure, a duplicate
ID or an ID out of order fails the run (exit 1). On one machine, the client
takes CPU from the server. scripts/load-bench starts idmint and
ferroid-tonic-server and runs every mode.

Examples:
  idmint bench http --url http://127.0.0.1:8080/v1/next --connections 32
  idmint bench http --url http://127.0.0.1:8080/healthz --check constant
  idmint bench http --url 'http://127.0.0.1:8080/v1/batch?count=1000'
  idmint bench http --check binary \\
    --url 'http://127.0.0.1:8080/v1/batch?count=1000'
  idmint bench grpc-stream --url http://127.0.0.1:50051 --batch-size 4096
  idmint bench grpc-stream --url http://127.0.0.1:50051 --packed
  idmint bench ferroid-stream --url http://127.0.0.1:50052 --streams 2
  idmint bench client --url http://127.0.0.1:8080 --prefetch 100000")]
pub(crate) struct Args {
    #[command(subcommand)]
    mode: Mode,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// GETs on keep-alive HTTP/1.1 connections: requests/s, latency.
    #[command(after_help = "Examples:
  idmint bench http --url http://127.0.0.1:8080/v1/next --connections 32
  idmint bench http --url 'http://127.0.0.1:8080/v1/batch?count=1000' --json
  idmint bench http --check binary \\
    --url 'http://127.0.0.1:8080/v1/batch?count=1000'")]
    Http(HttpArgs),
    /// idmint's gRPC Stream call: IDs/s, time per message.
    #[command(after_help = "Examples:
  idmint bench grpc-stream --url http://127.0.0.1:50051 --batch-size 4096
  idmint bench grpc-stream --url http://127.0.0.1:50051 --streams 8 --duration 30
  idmint bench grpc-stream --url http://127.0.0.1:50051 --packed")]
    GrpcStream(StreamArgs),
    /// ferroid-tonic-server's StreamIds call, loaded as grpc-stream.
    #[command(after_help = "Examples:
  idmint bench ferroid-stream --url http://127.0.0.1:50052 --streams 2")]
    FerroidStream(FerroidArgs),
    /// idmint-client's next() with prefetch, against a server: IDs/s.
    #[command(after_help = "Examples:
  idmint bench client --url http://127.0.0.1:8080 --prefetch 100000
  idmint bench client --url http://127.0.0.1:8080 --namespace orders --json")]
    Client(ClientArgs),
}

/// Flags every mode has.
#[derive(Debug, clap::Args)]
struct Common {
    /// Seconds to measure.
    #[arg(long, value_name = "S", default_value = "10", value_parser = parse_seconds)]
    duration: Duration,
    /// Seconds of load before measuring (not counted, but checked).
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    warmup: Duration,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct HttpArgs {
    /// The URL to GET, path and query included.
    #[arg(long, value_name = "URL")]
    url: String,
    /// Keep-alive connections, each with one request in flight.
    #[arg(long, value_name = "N", default_value_t = 32)]
    connections: usize,
    /// How each answer is checked: `ids` (idmint's JSON with decimal IDs: every ID distinct,
    /// each connection's increasing), `binary` (asks for `application/octet-stream` batches:
    /// 8 big-endian bytes per ID, count header checked, every ID checked as for `ids`) or
    /// `constant` (the same body every time, as /healthz).
    #[arg(long, value_name = "CHECK", default_value = "ids", value_parser = parse_check)]
    check: BodyCheck,
    /// Threads of the client's runtime.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
struct StreamArgs {
    /// The server's gRPC address.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The namespace [default: the server's default namespace].
    #[arg(long, value_name = "NAME", default_value = "", hide_default_value = true)]
    namespace: String,
    /// IDs per message.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    batch_size: u64,
    /// Concurrent streams, each on its own connection.
    #[arg(long, value_name = "N", default_value_t = 2)]
    streams: usize,
    /// Ask for packed messages (8 big-endian bytes per ID in `IdBatch.packed`) instead of
    /// `repeated fixed64 ids`.
    #[arg(long)]
    packed: bool,
    /// Threads of the client's runtime.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
struct FerroidArgs {
    /// ferroid-tonic-server's address.
    #[arg(long, value_name = "URL")]
    url: String,
    /// IDs each `StreamIds` call asks for; the call in flight when the run ends is read to
    /// its end (not counted).
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    count: u64,
    /// Concurrent streams, each on its own connection.
    #[arg(long, value_name = "N", default_value_t = 2)]
    streams: usize,
    /// Threads of the client's runtime.
    #[arg(long, value_name = "N", default_value_t = 1)]
    threads: usize,
    #[command(flatten)]
    common: Common,
}

#[derive(Debug, clap::Args)]
struct ClientArgs {
    /// The server's HTTP address.
    #[arg(long, value_name = "URL")]
    url: String,
    /// The namespace.
    #[arg(long, value_name = "NAME", default_value = "default")]
    namespace: String,
    /// IDs per refill of the prefetch buffer.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    prefetch: usize,
    /// The buffer level that starts a refill [default: half of --prefetch].
    #[arg(long, value_name = "N")]
    low_water: Option<usize>,
    /// Refills in flight at once (the client's `pipeline`, 1 to 8).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pipeline: usize,
    /// Threads of the client's runtime (the refill task runs beside the caller).
    #[arg(long, value_name = "N", default_value_t = 2)]
    threads: usize,
    #[command(flatten)]
    common: Common,
}

/// Parses a positive number of seconds (fractions allowed).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=3600.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err("expected a number of seconds from 0 to 3600".to_owned()),
    }
}

/// Parses `--check`.
fn parse_check(text: &str) -> Result<BodyCheck, String> {
    match text {
        "ids" => Ok(BodyCheck::Ids),
        "constant" => Ok(BodyCheck::Constant),
        "binary" => Ok(BodyCheck::Binary),
        _ => Err("expected `ids`, `binary` or `constant`".to_owned()),
    }
}

/// Runs `idmint bench`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    match &args.mode {
        Mode::Http(a) => {
            let (warmup, duration) = a.common.window()?;
            let options = HttpOptions {
                url: a.url.clone(),
                connections: a.connections,
                check: a.check,
                warmup,
                duration,
            };
            finish(out, a.threads, &a.common, load::http(&options))
        }
        Mode::GrpcStream(a) => {
            let (warmup, duration) = a.common.window()?;
            let options = StreamOptions {
                url: a.url.clone(),
                namespace: a.namespace.clone(),
                batch_size: a.batch_size,
                streams: a.streams,
                packed: a.packed,
                warmup,
                duration,
            };
            finish(out, a.threads, &a.common, load::grpc_stream(&options))
        }
        Mode::FerroidStream(a) => {
            let (warmup, duration) = a.common.window()?;
            let options = FerroidOptions {
                url: a.url.clone(),
                count_per_call: a.count,
                streams: a.streams,
                warmup,
                duration,
            };
            finish(out, a.threads, &a.common, load::ferroid_stream(&options))
        }
        Mode::Client(a) => {
            let (warmup, duration) = a.common.window()?;
            let options = ClientOptions {
                url: a.url.clone(),
                namespace: a.namespace.clone(),
                prefetch: a.prefetch,
                low_water: a.low_water.unwrap_or(a.prefetch / 2),
                pipeline: a.pipeline,
                warmup,
                duration,
            };
            finish(out, a.threads, &a.common, load::client_next(&options))
        }
    }
}

/// Runs `load` on a runtime of `threads` workers, prints its report (text or JSON), and fails
/// the command when the run saw anything wrong.
fn finish<R: Report>(
    out: &mut impl Write,
    threads: usize,
    common: &Common,
    load: impl Future<Output = Result<R, load::Error>>,
) -> anyhow::Result<()> {
    let progress = Progress::start(common.warmup + common.duration);
    let report = runtime(threads)?.block_on(load);
    drop(progress);
    let report = report?;
    if common.json {
        json(out, &report)?;
    } else {
        report.text(out, threads, common.warmup)?;
        outcome(out, report.outcome())?;
    }
    verdict(report.outcome())
}

/// A bar that fills over the run's warm-up and measured duration, on stderr, only when stderr
/// is a terminal (so scripts and files never see it); cleared when dropped.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    ticker: Option<std::thread::JoinHandle<()>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    fn start(total: Duration) -> Progress {
        use std::{
            io::IsTerminal,
            sync::{Arc, atomic::AtomicBool},
        };
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None, ticker: None, stop };
        }
        let millis = u64::try_from(total.as_millis()).unwrap_or(u64::MAX).max(1);
        let bar = indicatif::ProgressBar::new(millis);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {elapsed:>4} [{bar:40}] {percent:>3}% {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message("loading; checking every answer");
        let ticker = std::thread::spawn({
            let (bar, stop) = (bar.clone(), Arc::clone(&stop));
            move || {
                let started = std::time::Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let done = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    bar.set_position(done.min(millis));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        });
        Progress { bar: Some(bar), ticker: Some(ticker), stop }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// A load's report, as `idmint bench` prints it.
trait Report: Serialize {
    /// What the run's checks found.
    fn outcome(&self) -> &Outcome;

    /// The text report, but for the checks' lines.
    fn text(&self, out: &mut impl Write, threads: usize, warmup: Duration) -> anyhow::Result<()>;
}

impl Report for load::HttpReport {
    fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    fn text(&self, out: &mut impl Write, threads: usize, warmup: Duration) -> anyhow::Result<()> {
        writeln!(
            out,
            "http {}: {} connections, {threads} client thread(s), check {:?}",
            self.url, self.connections, self.check
        )?;
        timing(out, self.seconds, warmup)?;
        writeln!(
            out,
            "  requests   {:>14} /s  ({} in the window)",
            thousands(self.requests_per_s),
            self.requests
        )?;
        if self.check != BodyCheck::Constant {
            writeln!(
                out,
                "  IDs        {:>14} /s  ({} in the window)",
                thousands(self.ids_per_s),
                self.ids
            )?;
        }
        writeln!(
            out,
            "  shares     fewest {:.1} %, most {:.1} % of a fair share (answers / connections)",
            100.0 * self.fewest_share,
            100.0 * self.most_share
        )?;
        latency(out, "latency", &self.latency)
    }
}

impl Report for load::StreamReport {
    fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    fn text(&self, out: &mut impl Write, threads: usize, warmup: Duration) -> anyhow::Result<()> {
        let what = match &self.namespace {
            Some(ns) if ns.is_empty() => {
                format!("default namespace, {} IDs per message", self.requested)
            }
            Some(ns) => format!("namespace {ns}, {} IDs per message", self.requested),
            None => format!("{} IDs per call", self.requested),
        };
        writeln!(
            out,
            "{} ({}) at {}: {what}, {} stream(s), {threads} client thread(s)",
            self.call, self.encoding, self.url, self.streams
        )?;
        timing(out, self.seconds, warmup)?;
        writeln!(
            out,
            "  IDs        {:>14} /s  ({} in the window)",
            thousands(self.ids_per_s),
            self.ids
        )?;
        writeln!(
            out,
            "  messages   {:>14} /s  ({} in the window)",
            thousands(self.messages_per_s),
            self.messages
        )?;
        writeln!(
            out,
            "  shares     fewest {:.1} %, most {:.1} % of a fair share (IDs / streams)",
            100.0 * self.fewest_share,
            100.0 * self.most_share
        )?;
        latency(out, "per message", &self.gap)
    }
}

impl Report for load::ClientReport {
    fn outcome(&self) -> &Outcome {
        &self.outcome
    }

    fn text(&self, out: &mut impl Write, threads: usize, warmup: Duration) -> anyhow::Result<()> {
        writeln!(
            out,
            "client next() {} namespace {}: prefetch {} (refill at {}, {} in flight), {threads} \
             client thread(s)",
            self.url, self.namespace, self.prefetch, self.low_water, self.pipeline
        )?;
        timing(out, self.seconds, warmup)?;
        writeln!(
            out,
            "  IDs        {:>14} /s  ({} in the window, {:.1} ns per call)",
            thousands(self.ids_per_s),
            self.ids,
            self.ns_per_id
        )?;
        Ok(())
    }
}

impl Common {
    /// The warm-up and the measured duration, which must be more than 0.
    fn window(&self) -> anyhow::Result<(Duration, Duration)> {
        if self.duration.is_zero() {
            bail!("--duration must be more than 0 seconds");
        }
        Ok((self.warmup, self.duration))
    }
}

/// A runtime with `threads` workers: a current-thread runtime for 1.
fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        0 => bail!("--threads must be at least 1"),
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    };
    builder.enable_all().build().context("cannot start the async runtime")
}

fn timing(out: &mut impl Write, seconds: f64, warmup: Duration) -> anyhow::Result<()> {
    writeln!(out, "  measured   {seconds:.2} s after {:.2} s of warm-up", warmup.as_secs_f64())?;
    Ok(())
}

fn latency(out: &mut impl Write, what: &str, l: &LatencySummary) -> anyhow::Result<()> {
    writeln!(
        out,
        "  {what:<10} p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs, mean {} µs",
        round(l.p50_us),
        round(l.p99_us),
        round(l.p999_us),
        round(l.max_us),
        round(l.mean_us)
    )?;
    Ok(())
}

fn outcome(out: &mut impl Write, outcome: &Outcome) -> anyhow::Result<()> {
    write!(out, "  checked    {} failures", outcome.failures)?;
    if let Some(d) = &outcome.distinct {
        write!(
            out,
            "; {} IDs received (warm-up included) in {} runs of consecutive values: {} duplicates, {} out of order",
            d.ids, d.runs, d.duplicates, d.out_of_order
        )?;
    }
    writeln!(out)?;
    if let Some(first) = &outcome.first_failure {
        writeln!(out, "  first failure: {first}")?;
    }
    Ok(())
}

/// Fails the command when the run saw anything wrong (the report is printed first).
fn verdict(outcome: &Outcome) -> anyhow::Result<()> {
    if outcome.ok() {
        return Ok(());
    }
    let distinct = outcome.distinct.unwrap_or_default();
    bail!(
        "the run failed its checks: {} failures (first: {}), {} duplicate IDs, {} IDs out of order",
        outcome.failures,
        outcome.first_failure.as_deref().unwrap_or("none"),
        distinct.duplicates,
        distinct.out_of_order
    )
}

fn json(out: &mut impl Write, report: &impl Serialize) -> anyhow::Result<()> {
    serde_json::to_writer(&mut *out, report)?;
    writeln!(out)?;
    Ok(())
}

/// A latency in µs: whole µs from 100 on, one decimal from 10, two below.
fn round(us: f64) -> String {
    match us {
        100.0.. => format!("{us:.0}"),
        10.0.. => format!("{us:.1}"),
        _ => format!("{us:.2}"),
    }
}

/// A rate with thousands separators: 12,345,678.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    grouped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_grouped() {
        assert_eq!(thousands(0.4), "0");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000.0), "1,000");
        assert_eq!(thousands(12_345_678.9), "12,345,679");
    }

    #[test]
    fn seconds_are_checked() {
        assert_eq!(parse_seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("NaN").is_err());
        assert!(parse_seconds("3601").is_err());
    }
}
