//! idmint's gRPC `Stream` under load: N streams, each on its own HTTP/2 connection, read as
//! fast as the client can. Every message must hold exactly `batch_size` 64-bit IDs (in
//! `repeated fixed64 ids`, or packed big-endian in `packed` with `packed: true`), and every
//! stream's IDs must strictly increase across its messages (the contract of `Stream`).

use std::time::Duration;

use idmint_proto::grpc::{IdBatch, IdEncoding, IdMintClient, ListNamespacesRequest, StreamRequest};
use serde::Serialize;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

use crate::{
    Error, IdRuns, Latencies, LatencySummary, Outcome, Window, codec::BatchCodec, parse_url, rate,
    shares,
};

/// The HTTP/2 receive window of each stream. tonic's default (64 KiB, HTTP/2's initial
/// window) holds two messages of 4,096 IDs and would make throughput a function of round
/// trips; grpc-go and others grow their windows to the bandwidth-delay product instead. The
/// same windows are used against ferroid-tonic-server.
pub(crate) const STREAM_WINDOW: u32 = 8 << 20;
/// The HTTP/2 receive window of each connection.
pub(crate) const CONNECTION_WINDOW: u32 = 16 << 20;

/// What to load.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// The server's gRPC address: `http://127.0.0.1:50051`.
    pub url: String,
    /// The namespace; empty for the server's default one.
    pub namespace: String,
    /// IDs per message.
    pub batch_size: u64,
    /// Concurrent streams, each on its own connection.
    pub streams: usize,
    /// Ask for packed messages (`ID_ENCODING_PACKED_BE`: 8 big-endian bytes per ID in
    /// `packed`) instead of `repeated fixed64 ids`.
    pub packed: bool,
    /// Load before measuring.
    pub warmup: Duration,
    /// How long to measure.
    pub duration: Duration,
}

/// The result of [`grpc_stream`] or [`ferroid_stream`](crate::ferroid_stream).
#[derive(Debug, Clone, Serialize)]
pub struct StreamReport {
    /// The server's URL.
    pub url: String,
    /// Which call: `idmint.v1.IdMint/Stream` or `ferroid.IdGenerator/StreamIds`.
    pub call: &'static str,
    /// How messages carry IDs: `repeated` (`ids`), `packed` (idmint's packed big-endian
    /// bytes), or `ferroid`.
    pub encoding: &'static str,
    /// The namespace (idmint only).
    pub namespace: Option<String>,
    /// IDs per message asked for (idmint), or IDs per call (ferroid).
    pub requested: u64,
    /// Concurrent streams.
    pub streams: usize,
    /// The measured duration.
    pub seconds: f64,
    /// Messages received inside the measured window.
    pub messages: u64,
    /// `messages` per second.
    pub messages_per_s: f64,
    /// IDs in those messages.
    pub ids: u64,
    /// `ids` per second.
    pub ids_per_s: f64,
    /// The time between two messages of one stream (so, time per message).
    pub gap: LatencySummary,
    /// The IDs of the stream that got fewest, as a share of a fair share (`ids / streams`):
    /// 1.0 when every stream got as many.
    pub fewest_share: f64,
    /// The IDs of the stream that got most, as a share of a fair share.
    pub most_share: f64,
    /// Failures and the distinct check.
    pub outcome: Outcome,
}

/// What one stream did.
pub(crate) struct StreamResult {
    pub(crate) messages: u64,
    pub(crate) ids: u64,
    pub(crate) gaps: Latencies,
    pub(crate) runs: IdRuns,
    pub(crate) outcome: Outcome,
}

impl StreamResult {
    pub(crate) fn new(runs: IdRuns) -> Self {
        StreamResult {
            messages: 0,
            ids: 0,
            gaps: Latencies::default(),
            runs,
            outcome: Outcome::default(),
        }
    }

    /// Counts a message received at `now`, the previous one at `last`.
    pub(crate) fn received(&mut self, ids: usize, now: Instant, last: Instant, window: &Window) {
        if window.measures(now) {
            self.messages += 1;
            self.ids += ids as u64;
            self.gaps.record(now - last);
        }
    }
}

/// What a stream load's report says about its calls.
pub(crate) struct Calls {
    /// The gRPC method.
    pub(crate) call: &'static str,
    /// How messages carry IDs (for the report).
    pub(crate) encoding: &'static str,
    /// The namespace asked for, if the call takes one.
    pub(crate) namespace: Option<String>,
    /// IDs asked for per message or call.
    pub(crate) requested: u64,
}

/// Opens `streams` connections to `url`; then, for the warm-up plus the duration, runs
/// `read` on each (one task per connection), and reports what they did together.
pub(crate) async fn run_streams<F>(
    url: &str,
    streams: usize,
    warmup: Duration,
    duration: Duration,
    calls: Calls,
    mut read: impl FnMut(Channel, Window) -> F,
) -> Result<StreamReport, Error>
where
    F: Future<Output = StreamResult> + Send + 'static,
{
    let mut channels = Vec::with_capacity(streams);
    for _ in 0..streams {
        channels.push(channel(url).await?);
    }
    let window = Window::new(warmup, duration);
    let tasks = channels.into_iter().map(|channel| tokio::spawn(read(channel, window))).collect();
    let Collected { messages, ids, gap, per_stream, outcome } = collect(tasks).await;
    let (fewest_share, most_share) = shares(&per_stream);
    Ok(StreamReport {
        url: url.to_owned(),
        call: calls.call,
        encoding: calls.encoding,
        namespace: calls.namespace,
        requested: calls.requested,
        streams,
        seconds: window.seconds(),
        messages,
        messages_per_s: rate(messages, &window),
        ids,
        ids_per_s: rate(ids, &window),
        gap,
        fewest_share,
        most_share,
        outcome,
    })
}

/// The streams' results added up.
struct Collected {
    messages: u64,
    ids: u64,
    gap: LatencySummary,
    /// The IDs of each stream.
    per_stream: Vec<u64>,
    outcome: Outcome,
}

/// Adds up the streams' results.
async fn collect(tasks: Vec<tokio::task::JoinHandle<StreamResult>>) -> Collected {
    let mut outcome = Outcome::default();
    let (mut messages, mut ids) = (0, 0);
    let mut per_stream = Vec::with_capacity(tasks.len());
    let mut gaps = Latencies::default();
    let mut runs = Vec::new();
    for task in tasks {
        match task.await {
            Ok(stream) => {
                messages += stream.messages;
                ids += stream.ids;
                per_stream.push(stream.ids);
                gaps.merge(stream.gaps);
                runs.push(stream.runs);
                outcome.absorb(stream.outcome);
            }
            Err(e) => outcome.fail(|| format!("a stream task failed: {e}")),
        }
    }
    outcome.distinct = Some(IdRuns::check(runs));
    Collected { messages, ids, gap: gaps.summary(), per_stream, outcome }
}

/// Opens an HTTP/2 connection for gRPC, with large receive windows and no Nagle delay.
pub(crate) async fn channel(url: &str) -> Result<Channel, Error> {
    parse_url(url)?;
    let fail = |e: tonic::transport::Error| Error::Connect {
        url: url.to_owned(),
        reason: format!(
            "{e}{}",
            std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default()
        ),
    };
    Endpoint::from_shared(url.to_owned())
        .map_err(fail)?
        .tcp_nodelay(true)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .connect()
        .await
        .map_err(fail)
}

/// Reads `options.streams` `Stream` calls for the warm-up plus the duration, and reports.
///
/// # Errors
///
/// [`Error::Url`], [`Error::Connect`] when a connection cannot be opened,
/// [`Error::Options`] for 0 streams or a batch size of 0.
pub async fn grpc_stream(options: &StreamOptions) -> Result<StreamReport, Error> {
    if options.streams == 0 || options.batch_size == 0 {
        return Err(Error::Options("--streams and --batch-size must be at least 1".into()));
    }
    let calls = Calls {
        call: "idmint.v1.IdMint/Stream",
        encoding: if options.packed { "packed" } else { "repeated" },
        namespace: Some(options.namespace.clone()),
        requested: options.batch_size,
    };
    let (warmup, duration) = (options.warmup, options.duration);
    let Shape { increasing, wide } = namespace_shape(&options.url, &options.namespace).await?;
    if wide && !increasing {
        return Err(Error::Options(format!(
            "namespace {:?} has 128-bit IDs that are not increasing: a 128-bit stream is checked \
             through its IDs' top 64 bits, which must increase",
            options.namespace
        )));
    }
    run_streams(&options.url, options.streams, warmup, duration, calls, |channel, window| {
        let request = StreamRequest {
            namespace: options.namespace.clone(),
            batch_size: options.batch_size,
            batches: 0,
            encoding: if options.packed { IdEncoding::PackedBe } else { IdEncoding::Unspecified }
                .into(),
            shard_key: None,
        };
        read_stream(channel, request, window, increasing, wide)
    })
    .await
}

/// What the load client needs to know of a namespace to check its stream.
struct Shape {
    /// The server says that the namespace's IDs increase from one message to the next
    /// (`NamespaceInfo.order` is `increasing`). Otherwise (`k-sorted`: several generators, or
    /// Redis nodes) each message must still increase by itself, and no ID may come twice.
    increasing: bool,
    /// Its IDs are 128 bits (`NamespaceInfo.id_bits`).
    wide: bool,
}

/// The [`Shape`] the server gives for `namespace`.
async fn namespace_shape(url: &str, namespace: &str) -> Result<Shape, Error> {
    let mut client = IdMintClient::new(channel(url).await?);
    let fail = |status: tonic::Status| Error::Connect {
        url: url.to_owned(),
        reason: format!("ListNamespaces: {status}"),
    };
    let namespaces =
        client.list_namespaces(ListNamespacesRequest {}).await.map_err(fail)?.into_inner();
    // The first namespace is the server's default one, which an empty name asks for.
    let info = namespaces
        .namespaces
        .iter()
        .find(|info| info.name == namespace)
        .or_else(|| namespaces.namespaces.first().filter(|_| namespace.is_empty()));
    Ok(Shape {
        increasing: info.is_some_and(|info| info.order == "increasing"),
        wide: info.is_some_and(|info| info.id_bits > 64),
    })
}

/// Opens a `Stream` call whose messages are read by [`BatchCodec`] (the generated client
/// would read them with prost's per-ID loop).
async fn stream_call(
    channel: Channel,
    request: StreamRequest,
) -> Result<tonic::Streaming<IdBatch>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(usize::MAX);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/idmint.v1.IdMint/Stream");
    Ok(grpc.server_streaming(tonic::Request::new(request), path, BatchCodec).await?.into_inner())
}

/// One `Stream` call, read until the window ends; dropping it cancels the call.
async fn read_stream(
    channel: Channel,
    request: StreamRequest,
    window: Window,
    increasing: bool,
    wide: bool,
) -> StreamResult {
    let runs = if increasing { IdRuns::increasing() } else { IdRuns::unordered() };
    let mut result = StreamResult::new(runs);
    let expected = request.batch_size;
    let packed = request.encoding == i32::from(IdEncoding::PackedBe);
    let mut scratch = Vec::new();
    let mut stream = match stream_call(channel, request).await {
        Ok(stream) => stream,
        Err(status) => {
            result.outcome.fail(|| format!("Stream: {status}"));
            return result;
        }
    };
    let mut last = Instant::now();
    loop {
        let next = tokio::time::timeout_at(window.end(), stream.message()).await;
        let now = Instant::now();
        match next {
            Err(_) => break,
            Ok(Ok(Some(batch))) => {
                let ids = match message_ids(&batch, packed, wide, expected, &mut scratch) {
                    Ok(ids) => ids,
                    Err(e) => {
                        result.outcome.fail(|| e);
                        continue;
                    }
                };
                if increasing {
                    result.runs.push_all(ids);
                } else if !result.runs.push_increasing_message(ids) {
                    result.outcome.fail(|| "a message was not increasing by itself".into());
                }
                result.received(ids.len(), now, last, &window);
                last = now;
            }
            Ok(Ok(None)) => {
                result.outcome.fail(|| "the stream ended before the run did".into());
                break;
            }
            Ok(Err(status)) => {
                result.outcome.fail(|| format!("Stream: {status}"));
                break;
            }
        }
    }
    result
}

/// The `expected` 64-bit IDs of one message: from `ids`, or (packed) decoded big-endian from
/// `packed` into `scratch`; any other shape (wrong count or width, the other field filled,
/// a partial ID) is an error.
///
/// A `wide` (128-bit) message holds its IDs in `ids128`, or packed 16 bytes each; what comes
/// back is each ID's top 64 bits. For an increasing namespace (the only kind checked wide)
/// that is exact: when the top halves strictly increase, so do the whole IDs, and so no ID
/// comes twice; a stream whose top halves do not increase fails, whatever the low halves hold.
fn message_ids<'a>(
    batch: &'a IdBatch,
    packed: bool,
    wide: bool,
    expected: u64,
    scratch: &'a mut Vec<u64>,
) -> Result<&'a [u64], String> {
    let shape = || {
        format!(
            "a message held {} IDs in `ids`, {} bytes in `ids128` and {} bytes of {}-byte IDs in `packed`, not {expected} {}-bit IDs {}",
            batch.ids.len(),
            batch.ids128.len(),
            batch.packed.len(),
            batch.id_bytes,
            if wide { 128 } else { 64 },
            match (packed, wide) {
                (true, _) => "packed",
                (false, false) => "in `ids`",
                (false, true) => "in `ids128`",
            }
        )
    };
    if wide {
        let (bytes, other) = if packed {
            (batch.packed.len(), batch.ids128.len() as u64 + u64::from(batch.id_bytes != 16))
        } else {
            (batch.ids128.len(), batch.packed.len() as u64)
        };
        if bytes as u64 != expected * 16 || other != 0 || !batch.ids.is_empty() {
            return Err(shape());
        }
        scratch.clear();
        scratch.extend(batch.u128s().map(|id| (id >> 64) as u64));
        return Ok(scratch);
    }
    if !batch.ids128.is_empty() {
        return Err(shape());
    }
    if !packed {
        if batch.ids.len() as u64 != expected || !batch.packed.is_empty() {
            return Err(shape());
        }
        return Ok(&batch.ids);
    }
    if batch.id_bytes != 8 || !batch.ids.is_empty() || batch.packed.len() as u64 != expected * 8 {
        return Err(shape());
    }
    scratch.clear();
    scratch.extend(batch.packed_u64s());
    Ok(scratch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_checked_by_encoding() {
        let be = |ids: &[u64]| ids.iter().flat_map(|id| id.to_be_bytes()).collect::<Vec<u8>>();
        let check = |batch: IdBatch, packed: bool, want: Result<&[u64], &str>| {
            let mut scratch = Vec::new();
            match (message_ids(&batch, packed, false, 2, &mut scratch), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{batch:?}"),
                (Err(got), Err(part)) => assert!(got.contains(part), "{batch:?}: {got}"),
                (got, want) => panic!("{batch:?}: got {got:?}, want {want:?}"),
            }
        };
        let repeated = IdBatch { ids: vec![1, 2], ..IdBatch::default() };
        check(repeated.clone(), false, Ok(&[1, 2]));
        check(repeated, true, Err("not 2 64-bit IDs packed"));
        check(IdBatch::from_packed_be(be(&[3, 258]), 8), true, Ok(&[3, 258]));
        check(IdBatch::from_packed_be(be(&[3, 258]), 8), false, Err("in `ids`"));
        check(IdBatch::from_packed_be(be(&[3]), 8), true, Err("8 bytes"));
        check(IdBatch::from_packed_be(be(&[3, 4]), 16), true, Err("16-byte"));
        check(IdBatch::from_u128s([1, 2]), false, Err("32 bytes in `ids128`"));
        // Negative control: little-endian bytes decode to other numbers.
        let little: Vec<u8> = [3u64, 258].iter().flat_map(|id| id.to_le_bytes()).collect();
        let mut scratch = Vec::new();
        let batch = IdBatch::from_packed_be(little, 8);
        assert_ne!(message_ids(&batch, true, false, 2, &mut scratch).unwrap(), &[3, 258]);
    }

    /// 128-bit messages give their IDs' top halves, from `ids128` or packed 16 bytes each, and
    /// every other shape is refused.
    #[test]
    fn wide_messages_give_the_top_halves() {
        let check = |batch: IdBatch, packed: bool, want: Result<&[u64], &str>| {
            let mut scratch = Vec::new();
            match (message_ids(&batch, packed, true, 2, &mut scratch), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{batch:?}"),
                (Err(got), Err(part)) => assert!(got.contains(part), "{batch:?}: {got}"),
                (got, want) => panic!("{batch:?}: got {got:?}, want {want:?}"),
            }
        };
        let ids = [7u128 << 64 | 99, 8u128 << 64];
        let be: Vec<u8> = ids.iter().flat_map(|id| id.to_be_bytes()).collect();
        check(IdBatch::from_u128s(ids), false, Ok(&[7, 8]));
        check(IdBatch::from_u128s(ids), true, Err("not 2 128-bit IDs packed"));
        check(IdBatch::from_packed_be(be.clone(), 16), true, Ok(&[7, 8]));
        check(IdBatch::from_packed_be(be.clone(), 16), false, Err("in `ids128`"));
        check(IdBatch::from_packed_be(be[..16].to_vec(), 16), true, Err("16 bytes"));
        check(IdBatch::from_packed_be(be, 8), true, Err("8-byte"));
        check(IdBatch::from_u128s([1]), false, Err("16 bytes in `ids128`"));
        check(IdBatch { ids: vec![1, 2], ..IdBatch::default() }, false, Err("2 IDs in `ids`"));
    }
}
