//! ferroid-tonic-server's `ferroid.IdGenerator/StreamIds` under the same load as idmint's
//! `Stream`: N concurrent calls, each on its own HTTP/2 connection with the same windows.
//!
//! A call asks for a total count and the server streams it in chunks of its `IDS_PER_CHUNK`
//! (4,096 by default), each a buffer of little-endian `u64`s. When a call has delivered its
//! count, the stream makes the next call. At the end of the window the call in flight is
//! read to its end rather than cancelled (ferroid-tonic-server 2.0.0 keeps a worker's partly
//! filled buffer across calls, so cancelling mid-chunk is best avoided); what arrives after
//! the window is checked but not counted. Each chunk comes from one worker's generator, so
//! its IDs must strictly increase; chunks from different workers interleave, so no order is
//! checked between chunks. All IDs must be distinct.

use std::time::Duration;

use tokio::time::Instant;
use tonic::transport::Channel;

use crate::{
    Error, IdRuns, Window,
    codec::le_u64s,
    grpc::{Calls, StreamReport, StreamResult, run_streams},
};

/// The code tonic-prost-build generates from `proto/ferroid/ferroid.proto` (client only).
#[allow(missing_docs, unreachable_pub, clippy::all)]
mod generated {
    tonic::include_proto!("ferroid");
}

use generated::{StreamIdsRequest, id_generator_client::IdGeneratorClient};

/// The size of one ID in a chunk.
const ID_BYTES: usize = 8;

/// What to load.
#[derive(Debug, Clone)]
pub struct FerroidOptions {
    /// The server's address: `http://127.0.0.1:50051`.
    pub url: String,
    /// IDs asked for by each `StreamIds` call.
    pub count_per_call: u64,
    /// Concurrent streams, each on its own connection.
    pub streams: usize,
    /// Load before measuring.
    pub warmup: Duration,
    /// How long to measure.
    pub duration: Duration,
}

/// Reads `options.streams` streams of `StreamIds` calls for the warm-up plus the duration,
/// and reports.
///
/// # Errors
///
/// [`Error::Url`], [`Error::Connect`] when a connection cannot be opened,
/// [`Error::Options`] for 0 streams or a count of 0.
pub async fn ferroid_stream(options: &FerroidOptions) -> Result<StreamReport, Error> {
    if options.streams == 0 || options.count_per_call == 0 {
        return Err(Error::Options("--streams and --count must be at least 1".into()));
    }
    let count = options.count_per_call;
    let calls = Calls {
        call: "ferroid.IdGenerator/StreamIds",
        encoding: "ferroid",
        namespace: None,
        requested: count,
    };
    let (warmup, duration) = (options.warmup, options.duration);
    run_streams(&options.url, options.streams, warmup, duration, calls, |channel, window| {
        read_calls(channel, count, window)
    })
    .await
}

/// `StreamIds` calls of `count` IDs, one after another, until the window ends.
async fn read_calls(channel: Channel, count: u64, window: Window) -> StreamResult {
    let mut result = StreamResult::new(IdRuns::unordered());
    let mut client = IdGeneratorClient::new(channel).max_decoding_message_size(usize::MAX);
    let mut ids = Vec::new();
    let mut last = Instant::now();
    'calls: while Instant::now() < window.end() {
        let mut stream = match client.stream_ids(StreamIdsRequest { count }).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                result.outcome.fail(|| format!("StreamIds: {status}"));
                break;
            }
        };
        let mut received = 0u64;
        loop {
            match stream.message().await {
                Ok(Some(chunk)) => {
                    let now = Instant::now();
                    let bytes = &chunk.packed_ids;
                    if bytes.is_empty() || bytes.len() % ID_BYTES != 0 {
                        result.outcome.fail(|| {
                            format!("a chunk of {} bytes is not a whole number of IDs", bytes.len())
                        });
                        break 'calls;
                    }
                    ids.clear();
                    ids.extend(le_u64s(bytes));
                    if !result.runs.push_increasing_message(&ids) {
                        result.outcome.fail(|| "a chunk's IDs did not strictly increase".into());
                    }
                    received += ids.len() as u64;
                    result.received(ids.len(), now, last, &window);
                    last = now;
                }
                Ok(None) => {
                    if received != count {
                        result
                            .outcome
                            .fail(|| format!("a call ended after {received} of its {count} IDs"));
                        break 'calls;
                    }
                    break;
                }
                Err(status) => {
                    result.outcome.fail(|| format!("StreamIds: {status}"));
                    break 'calls;
                }
            }
        }
    }
    result
}
