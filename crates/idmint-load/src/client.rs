//! `idmint_client::Client::next()` with prefetch, against a running server: one task calls
//! `next()` in a loop while the client's own task refills its buffer with batches over HTTP
//! (binary, `application/octet-stream`, since the client asks for it).
//! This is the sustained rate, refills and their waits included (the criterion benchmark
//! `crates/idmint-client/benches/next.rs` measures the buffered path alone). The client makes
//! one attempt per request, so any failed refill surfaces as an error of `next()`.

use std::time::Duration;

use idmint_client::{AnyId, Client};
use serde::Serialize;
use tokio::time::Instant;

use crate::{Error, IdRuns, Outcome, Window};

/// Calls between two looks at the clock.
const CHUNK: u64 = 4096;

/// What to load.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The server's HTTP address: `http://127.0.0.1:8080`.
    pub url: String,
    /// The namespace.
    pub namespace: String,
    /// IDs per refill (the client's prefetch batch; also its `max_batch`).
    pub prefetch: usize,
    /// The buffer level that starts a refill.
    pub low_water: usize,
    /// Refills in flight at once.
    pub pipeline: usize,
    /// Calls before measuring.
    pub warmup: Duration,
    /// How long to measure.
    pub duration: Duration,
}

/// The result of [`client_next`].
#[derive(Debug, Clone, Serialize)]
pub struct ClientReport {
    /// The server's URL.
    pub url: String,
    /// The namespace.
    pub namespace: String,
    /// IDs per refill.
    pub prefetch: usize,
    /// The refill threshold.
    pub low_water: usize,
    /// Refills in flight at once.
    pub pipeline: usize,
    /// The measured time (whole chunks of calls, so a hair off the duration asked for).
    pub seconds: f64,
    /// IDs returned by `next()` in that time.
    pub ids: u64,
    /// `ids` per second.
    pub ids_per_s: f64,
    /// Nanoseconds per `next()` call, waits included.
    pub ns_per_id: f64,
    /// Failures and the distinct check.
    pub outcome: Outcome,
}

/// Calls `next()` for the warm-up plus the duration, and reports.
///
/// # Errors
///
/// [`Error::Options`] for settings the client refuses, [`Error::Connect`] when the first
/// `next()` fails.
pub async fn client_next(options: &ClientOptions) -> Result<ClientReport, Error> {
    let client = Client::builder()
        .endpoint(&options.url)
        .namespace(&options.namespace)
        .max_batch(options.prefetch)
        .prefetch(options.prefetch, options.low_water)
        .pipeline(options.pipeline)
        .attempts(1)
        .build()
        .map_err(|e| Error::Options(e.to_string()))?;
    let mut runs = IdRuns::increasing();
    let mut outcome = Outcome::default();
    let first = client
        .next()
        .await
        .map_err(|e| Error::Connect { url: options.url.clone(), reason: e.to_string() })?;
    let wide = |id| format!("a 128-bit ID ({id:?}) from a namespace expected to be 64-bit");
    match first {
        AnyId::U64(id) => runs.push(id),
        other => return Err(Error::Options(wide(other))),
    }
    let window = Window::new(options.warmup, options.duration);
    let mut measured_from = None;
    let mut ids = 0;
    let end = 'run: loop {
        let now = Instant::now();
        if now >= window.end() {
            break now;
        }
        if measured_from.is_none() && window.measures(now) {
            measured_from = Some(now);
        }
        for _ in 0..CHUNK {
            match client.next().await {
                Ok(AnyId::U64(id)) => runs.push(id),
                Ok(other) => {
                    outcome.fail(|| wide(other));
                    break 'run Instant::now();
                }
                Err(e) => {
                    outcome.fail(|| format!("next(): {e}"));
                    break 'run Instant::now();
                }
            }
        }
        if measured_from.is_some() {
            ids += CHUNK;
        }
    };
    client.close().await;
    outcome.distinct = Some(IdRuns::check([runs]));
    let seconds = measured_from.map_or(0.0, |from| (end - from).as_secs_f64());
    let per_s = if seconds > 0.0 { ids as f64 / seconds } else { 0.0 };
    Ok(ClientReport {
        url: options.url.clone(),
        namespace: options.namespace.clone(),
        prefetch: options.prefetch,
        low_water: options.low_water,
        pipeline: options.pipeline,
        seconds,
        ids,
        ids_per_s: per_s,
        ns_per_id: if ids > 0 { seconds * 1e9 / ids as f64 } else { 0.0 },
        outcome,
    })
}
