//! The gRPC API (feature `grpc`): the `idmint.v1.IdMint` service and the standard
//! `grpc.health.v1.Health` service over the same [`Server`] as the HTTP API, on tonic.
//! Handlers are thin, as in `http`: check the namespace and its token, call the server,
//! convert; errors become statuses only through `From<Error> for tonic::Status` (`error`).
//!
//! Shutdown: the listener is owned by [`Incoming`], which drops it when the shutdown token
//! is cancelled (and says so), while tonic keeps serving open connections until the caller
//! starts the drain. Streams (`Stream`, health `Watch`) end when the token is cancelled, so
//! the drain never waits on a client that reads forever.

use std::{
    fmt::Write as _,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    task::{Context, Poll},
    time::Duration,
};

use idmint_core::{AnyId, FieldValue, IdForm, IdText};
use idmint_proto::grpc::{
    BatchRequest, DecodeRequest, DecodeResponse, Field, IdBatch, IdEncoding, IdMint, IdMintServer,
    ListNamespacesRequest, ListNamespacesResponse, NextRequest, NextResponse, SERVICE_NAME,
    StreamRequest, field, next_response,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, metadata::MetadataMap};
use tonic_health::pb::{
    HealthCheckRequest, HealthCheckResponse,
    health_check_response::ServingStatus,
    health_server::{Health, HealthServer},
};

use idmint_engine::{BeBytes, Namespace};

use crate::{Error, Server, auth};

/// Messages a `Stream` call may have made but not yet handed to tonic: each one is a
/// reservation, so a slow reader holds at most this many (plus what HTTP/2 buffers).
const STREAM_BUFFER: usize = 2;
/// How often a health `Watch` looks at readiness between shutdown notifications.
const HEALTH_POLL: Duration = Duration::from_millis(250);
/// HTTP/2 receive windows: requests are small, so the defaults would do; these keep a
/// client that streams requests from stalling on flow control.
const STREAM_WINDOW: u32 = 1 << 20;
const CONNECTION_WINDOW: u32 = 4 << 20;
/// Room in a response for everything but the IDs (namespace, field tags, lengths).
const MESSAGE_OVERHEAD: usize = 4 * 1024;

/// gRPC calls by status code, and open streams.
#[derive(Debug, Default)]
struct GrpcMetrics {
    /// Calls ended, by `tonic::Code` (0..=16).
    by_code: [AtomicU64; 17],
    /// `Stream` calls whose producer is running.
    streams_open: AtomicU64,
    /// Messages sent by `Stream` calls.
    stream_messages: AtomicU64,
    /// Call latencies by service and method (to the response's head: for `Stream` and
    /// `Watch`, until the stream starts).
    latency: crate::metrics::Latencies,
}

/// The methods of the services served, the only values of the `method` label (a client can
/// call any path; the rest are labelled `other`).
const METHODS: [&str; 7] =
    ["Next", "Batch", "Stream", "Decode", "ListNamespaces", "Check", "Watch"];

impl GrpcMetrics {
    fn record(&self, code: tonic::Code) {
        let slot = usize::try_from(code as i32).unwrap_or(0).min(self.by_code.len() - 1);
        self.by_code[slot].fetch_add(1, Relaxed);
    }

    /// Counts an open stream until the guard is dropped.
    fn stream_opened(&self) -> StreamGuard<'_> {
        self.streams_open.fetch_add(1, Relaxed);
        StreamGuard(self)
    }

    /// Appends the gRPC families in the Prometheus text format.
    fn render_into(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP idmint_grpc_responses_total gRPC calls ended, by status code.\n# TYPE idmint_grpc_responses_total counter"
        );
        for (i, count) in self.by_code.iter().enumerate() {
            let code = tonic::Code::from_i32(i32::try_from(i).unwrap_or(2));
            let _ = writeln!(
                out,
                "idmint_grpc_responses_total{{code=\"{}\"}} {}",
                code_name(code),
                count.load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP idmint_grpc_streams_open Stream calls whose producer is running.\n# TYPE idmint_grpc_streams_open gauge\nidmint_grpc_streams_open {}",
            self.streams_open.load(Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP idmint_grpc_stream_messages_total Batches sent by Stream calls.\n# TYPE idmint_grpc_stream_messages_total counter\nidmint_grpc_stream_messages_total {}",
            self.stream_messages.load(Relaxed)
        );
        self.latency.render(
            out,
            "idmint_grpc_request_duration_seconds",
            "gRPC call latency, to the response's head, by service and method.",
            ["service", "method"],
        );
    }
}

impl crate::metrics::ApiMetrics for GrpcMetrics {
    fn render(&self, out: &mut String) {
        self.render_into(out);
    }
}

/// Keeps `streams_open` up while a stream's producer runs, whichever way it ends.
struct StreamGuard<'a>(&'a GrpcMetrics);

impl Drop for StreamGuard<'_> {
    fn drop(&mut self) {
        self.0.streams_open.fetch_sub(1, Relaxed);
    }
}

/// The gRPC name of a status code, as Prometheus labels it.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

impl crate::listener::Port {
    /// The gRPC port: `idmint.v1.IdMint` and `grpc.health.v1.Health` (each behind [`Strict`]),
    /// gRPC-web for browsers behind CORS for the configured origins, as one router that the
    /// accept loop serves like the HTTP API's, with the same admission and watchdog. Streams
    /// and health watches end when `shutdown` is cancelled (the start of the shutdown).
    pub(crate) fn grpc(server: &Arc<Server>, shutdown: CancellationToken) -> Self {
        let config = server.config();
        // The largest answer: max_batch 128-bit IDs at 16 bytes each.
        let max_response =
            usize::try_from(config.max_batch).unwrap_or(usize::MAX).saturating_mul(16);
        // The gRPC API's own metrics, rendered on `/metrics` with the server's.
        let metrics = server.api_metrics::<GrpcMetrics>();
        let idmint = IdMintServer::new(IdMintService {
            server: Arc::clone(server),
            metrics: Arc::clone(&metrics),
            shutdown: shutdown.clone(),
        })
        .max_decoding_message_size(config.max_body_bytes)
        .max_encoding_message_size(max_response.saturating_add(MESSAGE_OVERHEAD));
        let idmint =
            Strict { inner: idmint, metrics: Arc::clone(&metrics), limit: config.max_body_bytes };
        let health = HealthServer::new(HealthService { server: Arc::clone(server), shutdown })
            .max_decoding_message_size(MESSAGE_OVERHEAD);
        let health = Strict { inner: health, metrics, limit: MESSAGE_OVERHEAD };
        let routes = tonic::service::Routes::new(health).add_service(idmint).prepare();
        // gRPC-web (HTTP/1.1 included) for browsers, behind CORS for the configured origins.
        let service = tower::ServiceBuilder::new()
            .map_response(crate::cors::only_for_allowed::<tonic::body::Body>)
            .option_layer(crate::cors::cors(&config.cors_allow_origins, true))
            .layer(tonic_web::GrpcWebLayer::new())
            .service(routes);
        let router = axum::Router::new().fallback_service(service);
        Self::with(router, config, |http2| {
            http2
                .initial_stream_window_size(STREAM_WINDOW)
                .initial_connection_window_size(CONNECTION_WINDOW);
        })
    }
}

/// A gRPC service whose errors made by tonic itself, before a handler runs, follow idmint's
/// contract: a request message that does not decode (garbage bytes, a truncated varint,
/// invalid UTF-8; tonic says INTERNAL) is INVALID_ARGUMENT, one over the size limit (tonic
/// says OUT_OF_RANGE) is RESOURCE_EXHAUSTED, each with the `idmint-error` metadata
/// (`From<Error> for Status`) and counted in the metrics. Statuses of idmint's handlers carry
/// `idmint-error` already and pass unchanged.
///
/// It also refuses what tonic would take: a `content-type` that is not gRPC's (HTTP 415, so
/// that no HTTP client reads the answer as a success), a `grpc-encoding` other than
/// `identity` (UNIMPLEMENTED, with `grpc-accept-encoding: identity`), and a second message
/// on a call whose request is one message (every method served here; tonic would drop it):
/// it reads the request message itself ([`one_message`]) before it calls tonic.
#[derive(Debug, Clone)]
struct Strict<S> {
    inner: S,
    metrics: Arc<GrpcMetrics>,
    /// The service's largest request message, in bytes.
    limit: usize,
}

impl<S: tonic::server::NamedService> tonic::server::NamedService for Strict<S> {
    const NAME: &'static str = S::NAME;
}

type GrpcResponse = tonic::codegen::http::Response<tonic::body::Body>;
type GrpcRequest = tonic::codegen::http::Request<tonic::body::Body>;

impl<S> tonic::codegen::Service<GrpcRequest> for Strict<S>
where
    S: tonic::codegen::Service<
            GrpcRequest,
            Response = GrpcResponse,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = GrpcResponse;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<GrpcResponse, std::convert::Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: GrpcRequest) -> Self::Future {
        let started = std::time::Instant::now();
        let method = request.uri().path().rsplit('/').next().unwrap_or("");
        let method = METHODS.iter().find(|known| **known == method).copied().unwrap_or("other");
        let metrics = Arc::clone(&self.metrics);
        let limit = self.limit;
        if let Some(refused) = refuse(request.headers()) {
            metrics.record(tonic::Code::from_i32(refused.grpc_code()));
            metrics.latency.observe(S::NAME, method, started.elapsed());
            return Box::pin(std::future::ready(Ok(refused_response(refused))));
        }
        // The ready service goes with this call; the clone waits for the next one.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let response = match one_message(body, limit).await {
                Ok(message) => {
                    let body = tonic::body::Body::new(Whole(Some(message)));
                    let Ok(response) = inner.call(GrpcRequest::from_parts(parts, body)).await;
                    strict_response(response, &metrics, limit)
                }
                Err(e) => {
                    let status = Status::from(e);
                    metrics.record(status.code());
                    status.into_http()
                }
            };
            metrics.latency.observe(S::NAME, method, started.elapsed());
            Ok(response)
        })
    }
}

/// The request body of a call whose request is one message (every method served here),
/// read to its end before tonic sees it: tonic would drop a second message, and a call whose
/// message has not arrived holds only this future (no decoder, no handler) until it does or
/// the connection's `body_timeout_ms` passes. A byte after the first message is
/// INVALID_ARGUMENT, a message declared over `limit` is RESOURCE_EXHAUSTED at once; a body
/// with no message, or a truncated one, goes to tonic, which refuses it.
async fn one_message(
    mut body: tonic::body::Body,
    limit: usize,
) -> Result<hyper::body::Bytes, Error> {
    use hyper::body::Body as _;
    let mut framing = Framing::Start;
    let mut message = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|status| {
            Error::BadRequest(format!("the request body failed: {}", status.message()))
        })?;
        let Some(data) = frame.data_ref() else { continue };
        if !framing.advance(data) {
            return Err(Error::BadRequest(
                "a second request message on a call that takes one".into(),
            ));
        }
        if framing.declared().is_some_and(|length| length as usize > limit) {
            return Err(Error::PayloadTooLarge { limit });
        }
        message.extend_from_slice(data);
    }
    Ok(message.into())
}

/// A request body that is all there: the one message, read by [`one_message`].
struct Whole(Option<hyper::body::Bytes>);

impl hyper::body::Body for Whole {
    type Data = hyper::body::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<hyper::body::Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|data| Ok(hyper::body::Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.0.as_ref().map_or(0, |data| data.len() as u64))
    }
}

/// Why a call is refused before tonic sees it: a `content-type` that is not gRPC's (gRPC-web
/// calls are translated to `application/grpc` before this), or a `grpc-encoding` this server
/// does not decode.
fn refuse(headers: &tonic::codegen::http::HeaderMap) -> Option<Error> {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    let grpc = content_type
        .strip_prefix("application/grpc")
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('+') || rest.starts_with(';'));
    if !grpc {
        return Some(Error::UnsupportedMediaType(format!(
            "content-type `{content_type}` is not gRPC (application/grpc)"
        )));
    }
    let encoding = headers.get("grpc-encoding").map(|v| String::from_utf8_lossy(v.as_bytes()));
    match encoding {
        Some(encoding) if encoding != "identity" => Some(Error::UnsupportedMediaType(format!(
            "grpc-encoding `{encoding}` is not supported (identity only)"
        ))),
        _ => None,
    }
}

/// The answer to a refused call: its gRPC status, trailers-only, with the HTTP status of the
/// error when the request was not gRPC at all.
fn refused_response(error: Error) -> GrpcResponse {
    let http_status = error.status();
    let not_grpc = error.to_string().starts_with("content-type");
    let mut response = Status::from(error).into_http::<tonic::body::Body>();
    if not_grpc {
        if let Ok(status) = tonic::codegen::http::StatusCode::from_u16(http_status) {
            *response.status_mut() = status;
        }
    } else {
        response.headers_mut().insert(
            "grpc-accept-encoding",
            tonic::codegen::http::HeaderValue::from_static("identity"),
        );
    }
    response
}

/// Where the body of a call is in gRPC's framing: each message is a 5-byte prefix (a flag,
/// then its length, big-endian) and that many bytes.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// No byte yet.
    Start,
    /// In the length of the first message's prefix: `seen` of its 4 bytes, `length` so far.
    Length { seen: u8, length: u32 },
    /// Inside the first message (of `length` bytes): `left` bytes still to come.
    Message { length: u32, left: u32 },
    /// The first message (of `length` bytes) is complete: any further byte starts another.
    Done { length: u32 },
}

impl Framing {
    /// Follows the framing over `bytes`; false when they begin a second message.
    fn advance(&mut self, mut bytes: &[u8]) -> bool {
        while let Some((&first, rest)) = bytes.split_first() {
            *self = match *self {
                Framing::Start => {
                    bytes = rest;
                    Framing::Length { seen: 0, length: 0 }
                }
                Framing::Done { .. } => return false,
                Framing::Length { seen, length } => {
                    bytes = rest;
                    let length = (length << 8) | u32::from(first);
                    match seen {
                        3 if length == 0 => Framing::Done { length },
                        3 => Framing::Message { length, left: length },
                        _ => Framing::Length { seen: seen + 1, length },
                    }
                }
                Framing::Message { length, left } => {
                    let take = u32::try_from(bytes.len()).unwrap_or(u32::MAX).min(left);
                    bytes = &bytes[take as usize..];
                    if take == left {
                        Framing::Done { length }
                    } else {
                        Framing::Message { length, left: left - take }
                    }
                }
            };
        }
        true
    }

    /// The length the first message's prefix declares, once it is complete.
    fn declared(self) -> Option<u32> {
        match self {
            Framing::Message { length, .. } | Framing::Done { length } => Some(length),
            Framing::Start | Framing::Length { .. } => None,
        }
    }
}

/// The response, or idmint's error in place of a decoding error tonic made.
fn strict_response(response: GrpcResponse, metrics: &GrpcMetrics, limit: usize) -> GrpcResponse {
    if response.headers().contains_key("idmint-error") {
        return response;
    }
    let Some(status) = Status::from_header_map(response.headers()) else { return response };
    if !matches!(
        status.code(),
        tonic::Code::Internal | tonic::Code::OutOfRange | tonic::Code::ResourceExhausted
    ) {
        return response;
    }
    let status = Status::from(Error::from_grpc_decode(&status, limit));
    metrics.record(status.code());
    status.into_http()
}

/// `idmint.v1.IdMint` over a server.
#[derive(Debug)]
struct IdMintService {
    server: Arc<Server>,
    metrics: Arc<GrpcMetrics>,
    shutdown: CancellationToken,
}

impl IdMintService {
    /// Counts the call's outcome and turns it into a response.
    fn answer<T>(&self, result: Result<T, Error>) -> Result<Response<T>, Status> {
        match result {
            Ok(message) => {
                self.metrics.record(tonic::Code::Ok);
                Ok(Response::new(message))
            }
            Err(e) => {
                let status = Status::from(e);
                self.metrics.record(status.code());
                Err(status)
            }
        }
    }

    fn next(&self, request: &Request<NextRequest>) -> Result<(&Arc<Namespace>, IdText), Error> {
        let message = request.get_ref();
        let ns = authorized(&self.server, &message.namespace, request.metadata())?;
        let text = ns.text(message.format.as_deref().map(parse_form).transpose()?)?;
        Ok((ns, text))
    }

    fn decode(&self, request: &Request<DecodeRequest>) -> Result<DecodeResponse, Error> {
        let message = request.get_ref();
        let ns = authorized(&self.server, &message.namespace, request.metadata())?;
        let layout = &ns.layout;
        let text = ns.text(message.format.as_deref().map(parse_form).transpose()?)?;
        let parsed = ns.read_id(&message.id, &text)?;
        let fields = layout
            .decode(parsed)?
            .into_iter()
            .map(|(name, value)| Field {
                name,
                value: Some(match value {
                    FieldValue::Number(n) => field::Value::Number(n),
                    FieldValue::Text(t) => field::Value::Text(t),
                }),
            })
            .collect();
        let unix_ms = layout.time_ms(parsed, self.server.clocks().wall_ms())?;
        Ok(DecodeResponse {
            layout: layout.name().to_owned(),
            id: ns.text(None)?.write(parsed)?,
            fields,
            time: unix_ms.map(idmint_core::format_rfc3339_ms),
            unix_ms,
        })
    }
}

#[tonic::async_trait]
impl IdMint for IdMintService {
    async fn next(&self, request: Request<NextRequest>) -> Result<Response<NextResponse>, Status> {
        let result = async {
            let (ns, form) = self.next(&request)?;
            let mut ids: Vec<AnyId> = Vec::with_capacity(1);
            let shard_key = request.get_ref().shard_key;
            self.server.issue_keyed_into(ns, 1, shard_key, &mut ids).await?;
            let id = ids.pop().ok_or(Error::ShuttingDown)?;
            let text = form.write(id)?;
            let id = match id {
                AnyId::U64(v) => next_response::Id::U64(v),
                AnyId::U128(v) => next_response::Id::U128(v.to_be_bytes().to_vec()),
            };
            Ok(NextResponse { namespace: ns.name.clone(), id: Some(id), text })
        }
        .await;
        self.answer(result)
    }

    async fn batch(&self, request: Request<BatchRequest>) -> Result<Response<IdBatch>, Status> {
        let result = async {
            let message = request.get_ref();
            let ns = authorized(&self.server, &message.namespace, request.metadata())?;
            let packed = packed(message.encoding)?;
            let shape = Shape { size: message.count, packed, shard_key: message.shard_key };
            if let Some(form) = &message.format {
                if packed {
                    return Err(Error::BadRequest(
                        "`format` asks for text and `encoding` for packed bytes; give one".into(),
                    ));
                }
                let text = ns.text(Some(parse_form(form)?))?;
                return issue_texts(&self.server, ns, shape, &text).await;
            }
            issue_batch(&self.server, ns, shape).await
        }
        .await;
        self.answer(result)
    }

    type StreamStream = ReceiverStream<Result<IdBatch, Status>>;

    async fn stream(
        &self,
        request: Request<StreamRequest>,
    ) -> Result<Response<Self::StreamStream>, Status> {
        let started = (|| {
            let message = request.get_ref();
            let ns = authorized(&self.server, &message.namespace, request.metadata())?;
            if message.batch_size == 0 {
                return Err(Error::BadRequest("`batch_size` must be at least 1".into()));
            }
            let size = message.batch_size.min(self.server.config().max_batch);
            let packed = packed(message.encoding)?;
            if let Some(key) = message.shard_key {
                ns.check_shard_key(key)?;
            }
            let shape = Shape { size, packed, shard_key: message.shard_key };
            Ok((Arc::clone(ns), shape, message.batches))
        })();
        let (ns, shape, batches) = match started {
            Ok(started) => started,
            Err(e) => return self.answer(Err(e)),
        };
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(produce(
            Arc::clone(&self.server),
            Arc::clone(&self.metrics),
            ns,
            shape,
            batches,
            tx,
            self.shutdown.clone(),
        ));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn decode(
        &self,
        request: Request<DecodeRequest>,
    ) -> Result<Response<DecodeResponse>, Status> {
        let result = self.decode(&request);
        self.answer(result)
    }

    async fn list_namespaces(
        &self,
        _request: Request<ListNamespacesRequest>,
    ) -> Result<Response<ListNamespacesResponse>, Status> {
        let namespaces = self.server.namespace_infos().into_iter().map(Into::into).collect();
        self.answer(Ok(ListNamespacesResponse { namespaces }))
    }
}

/// The producer of one `Stream` call: reserves `size` IDs whenever the channel has room
/// and sends them at once, `batches` times (0: until the client goes). Ends when the client
/// cancels (the receiver is dropped), on shutdown (with UNAVAILABLE), or on the first
/// issuing error (with its status).
async fn produce(
    server: Arc<Server>,
    metrics: Arc<GrpcMetrics>,
    ns: Arc<Namespace>,
    shape: Shape,
    batches: u64,
    tx: mpsc::Sender<Result<IdBatch, Status>>,
    shutdown: CancellationToken,
) {
    let _open = metrics.stream_opened();
    let mut sent = 0;
    let end = loop {
        if batches != 0 && sent == batches {
            break Ok(());
        }
        // Wait for room first: IDs are reserved only when they can be sent right away.
        let permit = tokio::select! {
            biased;
            () = tx.closed() => break Err(None),
            () = shutdown.cancelled() => break Err(Some(Error::ShuttingDown)),
            permit = tx.reserve() => match permit {
                Ok(permit) => permit,
                Err(_) => break Err(None),
            },
        };
        let issued = tokio::select! {
            biased;
            () = tx.closed() => break Err(None),
            () = shutdown.cancelled() => break Err(Some(Error::ShuttingDown)),
            issued = issue_batch(&server, &ns, shape) => issued,
        };
        match issued {
            Ok(batch) => {
                permit.send(Ok(batch));
                metrics.stream_messages.fetch_add(1, Relaxed);
                sent += 1;
            }
            Err(e) => break Err(Some(e)),
        }
    };
    match end {
        Ok(()) => metrics.record(tonic::Code::Ok),
        Err(None) => metrics.record(tonic::Code::Cancelled),
        Err(Some(e)) => {
            let status = Status::from(e);
            metrics.record(status.code());
            // Fails only when the client is gone, which ends the call as well.
            let _ = tx.send(Err(status)).await;
        }
    }
}

/// The messages of one call: IDs per message, whether they are packed, and the shard key
/// the request chose.
#[derive(Debug, Clone, Copy)]
struct Shape {
    size: u64,
    packed: bool,
    shard_key: Option<u32>,
}

/// Whether a request's `encoding` asks for packed bytes; an encoding this server does not
/// know is refused (INVALID_ARGUMENT), never answered in a form the client did not ask for.
fn packed(encoding: i32) -> Result<bool, Error> {
    match IdEncoding::try_from(encoding) {
        Ok(IdEncoding::Unspecified) => Ok(false),
        Ok(IdEncoding::PackedBe) => Ok(true),
        Err(_) => Err(Error::BadRequest(format!("unknown id encoding {encoding}"))),
    }
}

/// `count` IDs as a message. Packed: every ID as fixed-width big-endian bytes in `packed`,
/// written straight from the typed batch (`AnyBatch::write_be`). Otherwise, as always:
/// 64-bit IDs straight into the repeated field (8 bytes per ID, no `AnyId` in between),
/// 128-bit ones as 16 big-endian bytes each in `ids128`, both through the bulk drains of
/// `AnyBatch`.
async fn issue_batch(server: &Server, ns: &Namespace, shape: Shape) -> Result<IdBatch, Error> {
    let Shape { size: count, packed, shard_key } = shape;
    if !packed && ns.layout.id_bits() == 64 {
        let mut ids = Vec::new();
        server.issue_keyed_into(ns, count, shard_key, &mut ids).await?;
        return Ok(IdBatch { ids, ..IdBatch::default() });
    }
    let mut ids = BeBytes::new(ns.layout.id_bits());
    server.issue_keyed_into(ns, count, shard_key, &mut ids).await?;
    if packed {
        let width = u32::try_from(ids.width()).unwrap_or(8);
        return Ok(IdBatch::from_packed_be(ids.bytes, width));
    }
    // `ids128` is the same bytes as a packed batch of 128-bit IDs: written alike, in bulk.
    Ok(IdBatch { ids128: ids.bytes, ..IdBatch::default() })
}

/// `shape.size` IDs as text in `text` (`BatchRequest.format`), in `IdBatch.texts`.
async fn issue_texts(
    server: &Server,
    ns: &Namespace,
    shape: Shape,
    text: &IdText,
) -> Result<IdBatch, Error> {
    let mut ids: Vec<AnyId> = Vec::new();
    server.issue_keyed_into(ns, shape.size, shape.shard_key, &mut ids).await?;
    let texts = ids.into_iter().map(|id| text.write(id)).collect::<Result<_, _>>()?;
    Ok(IdBatch { texts, ..IdBatch::default() })
}

fn parse_form(name: &str) -> Result<IdForm, Error> {
    name.parse().map_err(|e: idmint_core::Error| Error::BadRequest(e.to_string()))
}

/// The namespace (empty: the default one), after checking its bearer token in the
/// `authorization` metadata ([`auth::authorized`], the rules of the HTTP API).
fn authorized<'a>(
    server: &'a Server,
    name: &str,
    metadata: &MetadataMap,
) -> Result<&'a Arc<Namespace>, Error> {
    let name = if name.is_empty() { server.default_namespace() } else { name };
    let authorization = metadata.get("authorization").and_then(|v| v.to_str().ok());
    auth::authorized(server, name, authorization)
}

/// `grpc.health.v1.Health`: SERVING for the server (`""`) and `idmint.v1.IdMint` while the
/// server is ready and not shutting down, NOT_SERVING otherwise.
#[derive(Debug)]
struct HealthService {
    server: Arc<Server>,
    shutdown: CancellationToken,
}

impl HealthService {
    fn known(service: &str) -> bool {
        service.is_empty() || service == SERVICE_NAME
    }

    fn status(server: &Server, shutdown: &CancellationToken) -> ServingStatus {
        if server.is_ready() && !shutdown.is_cancelled() {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    }
}

fn health(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse { status: status as i32 }
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let service = &request.get_ref().service;
        if !Self::known(service) {
            return Err(Error::NotFound(format!("health of service `{service}`")).into());
        }
        Ok(Response::new(health(Self::status(&self.server, &self.shutdown))))
    }

    type WatchStream = ReceiverStream<Result<HealthCheckResponse, Status>>;

    /// Sends the status at once and whenever it changes; sends NOT_SERVING and ends at
    /// shutdown. An unknown service is SERVICE_UNKNOWN, and the call stays open.
    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let known = Self::known(&request.get_ref().service);
        let (tx, rx) = mpsc::channel(1);
        let server = Arc::clone(&self.server);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let current = || {
                if known { Self::status(&server, &shutdown) } else { ServingStatus::ServiceUnknown }
            };
            let mut last = current();
            if tx.send(Ok(health(last))).await.is_err() {
                return;
            }
            loop {
                let ended = tokio::select! {
                    () = tx.closed() => return,
                    () = shutdown.cancelled() => true,
                    () = tokio::time::sleep(HEALTH_POLL) => false,
                };
                let now = current();
                if now != last {
                    last = now;
                    if tx.send(Ok(health(now))).await.is_err() {
                        return;
                    }
                }
                if ended {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message is accepted however its bytes are split; a byte after it is a second
    /// message; the declared length is known once the 5-byte prefix is.
    #[test]
    fn framing_finds_a_second_message_wherever_the_chunks_split() {
        let check = |chunks: &[&[u8]], whole: bool, declared: Option<u32>| {
            let mut framing = Framing::Start;
            let accepted = chunks.iter().all(|chunk| framing.advance(chunk));
            assert_eq!((accepted, framing.declared()), (whole, declared), "{chunks:?}");
        };
        check(&[], true, None);
        check(&[&[0, 0, 0]], true, None);
        check(&[&[0, 0, 0, 0, 3]], true, Some(3));
        check(&[&[0, 0, 0, 0, 3, 1, 2, 3]], true, Some(3));
        check(&[&[0, 0], &[0, 0, 3, 1], &[2], &[3]], true, Some(3));
        check(&[&[0, 0, 0, 0, 0]], true, Some(0));
        check(&[&[0, 0, 0, 0, 0, 0]], false, Some(0));
        check(&[&[0, 0, 0, 0, 3, 1, 2, 3, 0]], false, Some(3));
        check(&[&[0, 0, 0, 0, 3, 1, 2, 3], &[0, 0, 0, 0, 0]], false, Some(3));
        check(&[&[0, 0, 1, 0, 0]], true, Some(65_536));
    }
}
