//! The gRPC API, in process: every call through a tonic client against `serve_all` on a
//! `MemoryCoordinator`, streams (order, cancellation, shutdown), packed big-endian batches
//! beside the repeated fields (and old clients' unchanged messages), the status codes of bad input,
//! health, and the shutdown order with calls in flight. Every await that could hang is bounded
//! by a timeout; no test waits for wall-clock time to pass.

use std::{
    collections::HashSet,
    future::Future,
    net::{SocketAddr, TcpStream},
    sync::Arc,
    time::Duration,
};

use idmint_coord::MemoryCoordinator;
use idmint_core::{Layout, SystemClock};
use idmint_proto::grpc::{
    BatchRequest, DecodeRequest, IdBatch, IdEncoding, IdMintClient, ListNamespacesRequest,
    NextRequest, SERVICE_NAME, StreamRequest, field,
};
use idmint_server::{Error, NamespaceConfig, Server, ServerConfig};
use idmint_testkit::{SHUTDOWN_ORDER, TestServer};
use tokio_util::sync::CancellationToken;
use tonic::{Code, Request, Status, transport::Channel};
use tonic_health::pb::{
    HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
};

/// The bound on any single await: generous, so that only a hang fails a test.
const LIMIT: Duration = Duration::from_secs(30);
const TOKEN: &str = "s3cret";

/// Awaits `f`, failing the test if it takes longer than [`LIMIT`].
async fn within<F: Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// A [`TestServer`] serving HTTP and gRPC on free loopback ports (on a runtime of its own),
/// over a `MemoryCoordinator` the test reads marks from.
struct Running {
    served: TestServer,
    server: Arc<Server>,
    coordinator: Arc<MemoryCoordinator>,
    shutdown: CancellationToken,
    http: SocketAddr,
    grpc: SocketAddr,
}

impl Running {
    async fn start(config: ServerConfig) -> Running {
        let coordinator = Arc::new(MemoryCoordinator::new());
        let served = within(
            "start",
            TestServer::builder(config)
                .coordinator(Arc::clone(&coordinator) as _)
                .wall(Arc::new(SystemClock))
                .grpc()
                .start_async(),
        )
        .await
        .expect("server starts");
        Running {
            server: Arc::clone(&served.server),
            shutdown: served.shutdown.clone(),
            http: served.addr,
            grpc: served.grpc.expect("a gRPC address"),
            coordinator,
            served,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.grpc)
    }

    async fn client(&self) -> IdMintClient<Channel> {
        within("connect", IdMintClient::connect(self.url())).await.expect("connect")
    }

    async fn health(&self) -> HealthClient<Channel> {
        let channel = within("connect", Channel::from_shared(self.url()).unwrap().connect())
            .await
            .expect("connect");
        HealthClient::new(channel)
    }

    /// Cancels the token and returns what `serve_all` returned.
    async fn stop(self) -> Result<(), Error> {
        within("shutdown", self.served.stop_async()).await
    }

    fn metric(&self, series: &str) -> u64 {
        let text = self.server.render_metrics();
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no sample `{series}` in the metrics:\n{text}"))
    }
}

fn config(namespaces: Vec<NamespaceConfig>) -> ServerConfig {
    ServerConfig { namespaces, max_batch: 10_000, ..ServerConfig::default() }
}

/// `default` (snowflake), `guid` (hot-guid, 128-bit), `secret` (snowflake, with a token).
fn three_namespaces() -> ServerConfig {
    config(vec![
        NamespaceConfig::default(),
        NamespaceConfig { layout: "hot-guid".into(), ..NamespaceConfig::named("guid") },
        NamespaceConfig { token: Some(TOKEN.into()), ..NamespaceConfig::named("secret") },
    ])
}

fn assert_increasing<T: Ord + Copy + std::fmt::Debug>(ids: &[T]) {
    if let Some(pair) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!("ids do not increase: {:?} then {:?}", pair[0], pair[1]);
    }
}

fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}

/// Reads a stream to its end: the batches, and the status it ended with (`None`: OK).
async fn drain_stream(stream: &mut tonic::Streaming<IdBatch>) -> (Vec<IdBatch>, Option<Status>) {
    let mut batches = Vec::new();
    loop {
        match within("stream message", stream.message()).await {
            Ok(Some(batch)) => batches.push(batch),
            Ok(None) => return (batches, None),
            Err(status) => return (batches, Some(status)),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_answers() {
    let running = Running::start(three_namespaces()).await;
    let mut client = running.client().await;

    let list = within("list", client.list_namespaces(ListNamespacesRequest {}))
        .await
        .unwrap()
        .into_inner();
    let names: Vec<_> = list.namespaces.iter().map(|ns| ns.name.as_str()).collect();
    assert_eq!(names, ["default", "guid", "secret"]);
    let bits: Vec<_> = list.namespaces.iter().map(|ns| ns.id_bits).collect();
    assert_eq!(bits, [64, 128, 64]);
    assert!(list.namespaces.iter().all(|ns| ns.ready));
    assert_eq!(list.namespaces.iter().map(|ns| ns.auth).collect::<Vec<_>>(), [false, false, true]);
    assert_eq!(
        list.namespaces.into_iter().map(idmint_proto::NamespaceInfo::from).collect::<Vec<_>>(),
        running.server.namespace_infos()
    );

    // Next: the default namespace (empty name), binary and text agree.
    let next = within(
        "next",
        client.next(NextRequest {
            namespace: String::new(),
            format: Some("hex".into()),
            shard_key: None,
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(next.namespace, "default");
    let id = next.id_u64().expect("a 64-bit id");
    assert_eq!(next.text, format!("{id:016x}"));

    // Batch: after the single ID, increasing.
    let batch = within(
        "batch",
        client.batch(BatchRequest {
            namespace: "default".into(),
            count: 1000,
            ..Default::default()
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(batch.ids.len(), 1000);
    assert!(batch.ids128.is_empty());
    assert!(batch.ids[0] > id);
    assert_increasing(&batch.ids);

    // Decode: the fields of the ID just issued, and its time.
    let decoded = within(
        "decode",
        client.decode(DecodeRequest { namespace: String::new(), id: id.to_string(), format: None }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(decoded.layout, "snowflake");
    assert_eq!(decoded.id, id.to_string());
    let layout = Layout::builtin("snowflake").unwrap();
    let want = layout.decode(idmint_core::AnyId::U64(id)).unwrap();
    assert_eq!(decoded.fields.len(), want.len());
    for (got, (name, value)) in decoded.fields.iter().zip(want) {
        assert_eq!(got.name, name);
        let idmint_core::FieldValue::Number(n) = value else {
            panic!("snowflake fields are numbers")
        };
        assert_eq!(got.value, Some(field::Value::Number(n)));
    }
    let unix_ms = decoded.unix_ms.expect("snowflake ids carry time");
    assert_eq!(Some(unix_ms), layout.time_ms(idmint_core::AnyId::U64(id), u64::MAX).unwrap());
    assert_eq!(decoded.time, Some(idmint_core::format_rfc3339_ms(unix_ms)));
    // The same ID in hex decodes the same.
    let hex = within(
        "decode hex",
        client.decode(DecodeRequest {
            namespace: String::new(),
            id: next.text.clone(),
            format: Some("hex".into()),
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(hex.id, decoded.id);

    // 128-bit: 16 big-endian bytes per ID.
    let next = within(
        "next guid",
        client.next(NextRequest { namespace: "guid".into(), format: None, shard_key: None }),
    )
    .await
    .unwrap()
    .into_inner();
    let guid = next.id_u128().expect("a 128-bit id");
    assert_eq!(next.id_u64(), None);
    let batch = within(
        "batch guid",
        client.batch(BatchRequest { namespace: "guid".into(), count: 500, ..Default::default() }),
    )
    .await
    .unwrap()
    .into_inner();
    assert!(batch.ids.is_empty());
    assert_eq!(batch.ids128.len(), 500 * 16);
    let guids: Vec<u128> = batch.u128s().collect();
    assert_eq!(guids.len(), 500);
    assert_eq!(guids.iter().collect::<HashSet<_>>().len(), 500);
    assert!(!guids.contains(&guid));
    let decoded = within(
        "decode guid",
        client.decode(DecodeRequest {
            namespace: "guid".into(),
            id: next.text.clone(),
            format: None,
        }),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(decoded.layout, "hot-guid");
    assert_eq!(decoded.id, next.text);

    // The token namespace, with its token.
    let batch = within(
        "batch secret",
        client.batch(with_token(
            BatchRequest { namespace: "secret".into(), count: 3, ..Default::default() },
            Some(TOKEN),
        )),
    )
    .await
    .unwrap()
    .into_inner();
    assert_eq!(batch.ids.len(), 3);

    assert_eq!(running.metric("idmint_grpc_responses_total{code=\"OK\"}"), 9);
    // Latency by method: every call is in its method's histogram, and only known methods
    // are labels.
    let text = running.server.render_metrics();
    let count = |method: &str| {
        running.metric(&format!(
            "idmint_grpc_request_duration_seconds_count{{service=\"idmint.v1.IdMint\",method=\"{method}\"}}"
        ))
    };
    assert!(count("Batch") >= 2 && count("Next") >= 1 && count("Decode") >= 1, "{text}");
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_sends_batches_of_distinct_increasing_ids() {
    let running = Running::start(config(vec![NamespaceConfig::default()])).await;
    let mut client = running.client().await;
    let request = StreamRequest {
        namespace: "default".into(),
        batch_size: 4096,
        batches: 10,
        ..Default::default()
    };
    let mut stream = within("stream", client.stream(request)).await.unwrap().into_inner();
    let (batches, status) = drain_stream(&mut stream).await;
    assert!(status.is_none(), "the stream ended with {status:?}");
    assert_eq!(batches.len(), 10);
    assert!(batches.iter().all(|b| b.ids.len() == 4096 && b.ids128.is_empty()));
    let ids: Vec<u64> = batches.iter().flat_map(|b| b.ids.iter().copied()).collect();
    assert_increasing(&ids);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 40_960);

    // A batch size above max_batch is lowered to it.
    let request = StreamRequest {
        namespace: String::new(),
        batch_size: 1_000_000,
        batches: 2,
        ..Default::default()
    };
    let mut stream = within("stream", client.stream(request)).await.unwrap().into_inner();
    let (batches, status) = drain_stream(&mut stream).await;
    assert!(status.is_none(), "the stream ended with {status:?}");
    assert_eq!(batches.iter().map(IdBatch::len).collect::<Vec<_>>(), [10_000, 10_000]);
    assert!(batches[1].ids[0] > *ids.last().unwrap());

    assert_eq!(running.metric("idmint_grpc_stream_messages_total"), 12);
    assert_eq!(running.metric("idmint_grpc_streams_open"), 0);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_stream_stops_issuing() {
    let running = Running::start(config(vec![NamespaceConfig::default()])).await;
    // Small HTTP/2 windows, so that the server cannot run far ahead of what is read.
    let endpoint = Channel::from_shared(running.url())
        .unwrap()
        .initial_stream_window_size(64 * 1024)
        .initial_connection_window_size(64 * 1024);
    let mut client = IdMintClient::new(within("connect", endpoint.connect()).await.unwrap());
    let request = StreamRequest {
        namespace: String::new(),
        batch_size: 1000,
        batches: 0,
        ..Default::default()
    };
    let mut stream = within("stream", client.stream(request)).await.unwrap().into_inner();
    for _ in 0..3 {
        let batch = within("message", stream.message()).await.unwrap().expect("a batch");
        assert_eq!(batch.len(), 1000);
    }
    assert_eq!(running.metric("idmint_grpc_streams_open"), 1);
    drop(stream);

    // The producer notices the cancellation and ends; poll (bounded) until it has.
    within("the producer to end", async {
        while running.metric("idmint_grpc_streams_open") != 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    let issued = running.metric("idmint_ids_issued_total{namespace=\"default\"}");
    let messages = running.metric("idmint_grpc_stream_messages_total");
    // Three batches were read; the rest sat in buffers or was being made when the client went:
    // the channel (2), the HTTP/2 window (64 KiB) and hyper's send buffer (400 KiB), so at most
    // about 1 MiB of 8 KB messages, not an endless run.
    assert!((3..=3 + 128).contains(&messages), "{messages} messages were sent");
    assert!(issued <= (messages + 1) * 1000, "{issued} ids for {messages} messages");
    assert_eq!(running.metric("idmint_grpc_responses_total{code=\"CANCELLED\"}"), 1);

    // Nothing issues any more: one more call adds exactly its own ID.
    within("next", client.next(NextRequest::default())).await.unwrap();
    assert_eq!(running.metric("idmint_ids_issued_total{namespace=\"default\"}"), issued + 1);
    running.stop().await.unwrap();
}

async fn batch_call(
    mut client: IdMintClient<Channel>,
    request: Request<BatchRequest>,
) -> Result<(), Status> {
    client.batch(request).await.map(drop)
}

/// What a call is checked for: the status code and the `idmint-error` metadata.
struct Case {
    what: &'static str,
    code: Code,
    error: &'static str,
}

fn check(case: &Case, result: Result<(), Status>) {
    let status =
        result.err().unwrap_or_else(|| panic!("{}: expected {:?}, got OK", case.what, case.code));
    assert_eq!(status.code(), case.code, "{}: {status:?}", case.what);
    let error = status.metadata().get("idmint-error").map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(error.as_deref(), Some(case.error), "{}: {status:?}", case.what);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_right_status() {
    let running = Running::start(three_namespaces()).await;
    let mut client = running.client().await;
    let batch = |namespace: &str, count: u64, token: Option<&str>| {
        let request = with_token(
            BatchRequest { namespace: namespace.into(), count, ..Default::default() },
            token,
        );
        batch_call(client.clone(), request)
    };
    let cases: Vec<(Case, Result<(), Status>)> = vec![
        (
            Case { what: "count 0", code: Code::InvalidArgument, error: "bad_request" },
            batch("default", 0, None).await,
        ),
        (
            Case {
                what: "count above max_batch",
                code: Code::InvalidArgument,
                error: "bad_request",
            },
            batch("default", 10_001, None).await,
        ),
        (
            Case { what: "unknown namespace", code: Code::NotFound, error: "unknown_namespace" },
            batch("nope", 1, None).await,
        ),
        (
            Case { what: "missing token", code: Code::Unauthenticated, error: "unauthorized" },
            batch("secret", 1, None).await,
        ),
        (
            Case { what: "wrong token", code: Code::PermissionDenied, error: "forbidden" },
            batch("secret", 1, Some("s3creT")).await,
        ),
        (
            Case {
                what: "token of another scheme",
                code: Code::Unauthenticated,
                error: "unauthorized",
            },
            {
                let mut request = Request::new(BatchRequest {
                    namespace: "secret".into(),
                    count: 1,
                    ..Default::default()
                });
                request
                    .metadata_mut()
                    .insert("authorization", format!("Basic {TOKEN}").parse().unwrap());
                client.batch(request).await.map(drop)
            },
        ),
        (
            Case { what: "unknown format", code: Code::InvalidArgument, error: "bad_request" },
            client
                .next(NextRequest {
                    namespace: String::new(),
                    format: Some("roman".into()),
                    shard_key: None,
                })
                .await
                .map(drop),
        ),
        (
            Case { what: "format too wide", code: Code::InvalidArgument, error: "bad_request" },
            client
                .next(NextRequest {
                    namespace: String::new(),
                    format: Some("uuid".into()),
                    shard_key: None,
                })
                .await
                .map(drop),
        ),
        (
            Case { what: "next, wrong token", code: Code::PermissionDenied, error: "forbidden" },
            client
                .next(with_token(
                    NextRequest { namespace: "secret".into(), format: None, shard_key: None },
                    Some("x"),
                ))
                .await
                .map(drop),
        ),
        (
            Case { what: "bad id", code: Code::InvalidArgument, error: "invalid_id" },
            client
                .decode(DecodeRequest { namespace: String::new(), id: "12x4".into(), format: None })
                .await
                .map(drop),
        ),
        (
            Case { what: "empty id", code: Code::InvalidArgument, error: "invalid_id" },
            client.decode(DecodeRequest::default()).await.map(drop),
        ),
        (
            Case { what: "huge id", code: Code::InvalidArgument, error: "invalid_id" },
            client
                .decode(DecodeRequest {
                    namespace: String::new(),
                    id: "9".repeat(10_000),
                    format: None,
                })
                .await
                .map(drop),
        ),
        (
            Case {
                what: "decode, unknown namespace",
                code: Code::NotFound,
                error: "unknown_namespace",
            },
            client
                .decode(DecodeRequest { namespace: "nope".into(), id: "1".into(), format: None })
                .await
                .map(drop),
        ),
        (
            Case {
                what: "decode, missing token",
                code: Code::Unauthenticated,
                error: "unauthorized",
            },
            client
                .decode(DecodeRequest { namespace: "secret".into(), id: "1".into(), format: None })
                .await
                .map(drop),
        ),
        (
            Case {
                what: "stream, batch size 0",
                code: Code::InvalidArgument,
                error: "bad_request",
            },
            client
                .stream(StreamRequest {
                    namespace: String::new(),
                    batch_size: 0,
                    batches: 1,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            Case {
                what: "stream, unknown namespace",
                code: Code::NotFound,
                error: "unknown_namespace",
            },
            client
                .stream(StreamRequest {
                    namespace: "nope".into(),
                    batch_size: 1,
                    batches: 1,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            Case {
                what: "stream, missing token",
                code: Code::Unauthenticated,
                error: "unauthorized",
            },
            client
                .stream(StreamRequest {
                    namespace: "secret".into(),
                    batch_size: 1,
                    batches: 1,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ];
    let count = cases.len() as u64;
    for (case, result) in cases {
        check(&case, result);
    }

    // A request larger than max_body_bytes is refused before it reaches a handler, as HTTP's
    // 413 is: RESOURCE_EXHAUSTED, with the error code.
    let status = client
        .decode(DecodeRequest { namespace: String::new(), id: "9".repeat(100_000), format: None })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.metadata().get("idmint-error").unwrap(), "payload_too_large");

    // Health of a service the server does not have.
    let mut health = running.health().await;
    let status =
        health.check(HealthCheckRequest { service: "other.Service".into() }).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    let errors: u64 = ["INVALID_ARGUMENT", "NOT_FOUND", "UNAUTHENTICATED", "PERMISSION_DENIED"]
        .iter()
        .map(|code| running.metric(&format!("idmint_grpc_responses_total{{code=\"{code}\"}}")))
        .sum();
    assert_eq!(errors, count);
    assert_eq!(running.metric("idmint_grpc_responses_total{code=\"INTERNAL\"}"), 0);
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_readiness() {
    let running = Running::start(config(vec![NamespaceConfig::default()])).await;
    let mut health = running.health().await;
    for service in ["", SERVICE_NAME] {
        let answer = within("check", health.check(HealthCheckRequest { service: service.into() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.status(), ServingStatus::Serving, "{service:?}");
    }
    // Not ready (as while a namespace claims again): NOT_SERVING, though nothing shuts down.
    running.server.report_not_ready();
    for service in ["", SERVICE_NAME] {
        let answer = within("check", health.check(HealthCheckRequest { service: service.into() }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.status(), ServingStatus::NotServing, "{service:?}");
    }
    running.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_turns_not_serving_when_shutdown_begins() {
    let running = Running::start(config(vec![NamespaceConfig::default()])).await;
    let mut health = running.health().await;
    let mut watch =
        within("watch", health.watch(HealthCheckRequest::default())).await.unwrap().into_inner();
    let first = within("first status", watch.message()).await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);
    let mut unknown = within(
        "watch unknown",
        health.watch(HealthCheckRequest { service: "other.Service".into() }),
    )
    .await
    .unwrap()
    .into_inner();
    let first = within("first status", unknown.message()).await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::ServiceUnknown);

    running.shutdown.cancel();
    let next = within("status at shutdown", watch.message()).await.unwrap().unwrap();
    assert_eq!(next.status(), ServingStatus::NotServing);
    // The watch ends, so it does not hold up the drain.
    assert!(within("end of watch", watch.message()).await.unwrap().is_none());
    within("shutdown", running.served.served()).await.unwrap();
    assert_eq!(running.server.shutdown_steps().len(), 5);
}

/// js53 issues 128 IDs per millisecond: a batch of 32,000 takes at least 250 ms of ticks.
const SLOW_BATCH: u64 = 32_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_both_apis_before_persisting() {
    let config = ServerConfig {
        namespaces: vec![
            NamespaceConfig::default(),
            NamespaceConfig { layout: "js53".into(), ..NamespaceConfig::named("slow") },
        ],
        max_batch: 100_000,
        max_wait_ms: 20_000,
        // Longer than the test's limit: a drain that waited for it would fail the test.
        drain_ms: 60_000,
        ..ServerConfig::default()
    };
    let running = Running::start(config).await;
    let mut client = running.client().await;

    // An endless stream, read for a while.
    let request = StreamRequest {
        namespace: String::new(),
        batch_size: 1000,
        batches: 0,
        ..Default::default()
    };
    let mut stream = within("stream", client.stream(request)).await.unwrap().into_inner();
    let first = within("message", stream.message()).await.unwrap().unwrap();

    // A slow batch, in flight when the token is cancelled.
    let mut slow_client = client.clone();
    let slow = tokio::spawn(async move {
        slow_client
            .batch(BatchRequest {
                namespace: "slow".into(),
                count: SLOW_BATCH,
                ..Default::default()
            })
            .await
    });
    within("the slow batch to be issuing", async {
        while running.metric("idmint_sequence_exhaustions_total{namespace=\"slow\"}") == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;

    running.shutdown.cancel();

    // The stream ends with UNAVAILABLE (reconnect elsewhere), after the batches in flight.
    let (mut batches, status) = drain_stream(&mut stream).await;
    let status = status.expect("the stream ends with a status");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.metadata().get("idmint-error").unwrap(), "shutting_down");
    batches.insert(0, first);
    let ids: Vec<u64> = batches.iter().flat_map(|b| b.ids.iter().copied()).collect();
    assert_increasing(&ids);

    // The slow batch was drained, not cut: every ID, issued before the claim was released.
    let slow = within("the slow batch", slow).await.unwrap().expect("the slow batch succeeds");
    let slow_ids = slow.into_inner().ids;
    assert_eq!(slow_ids.len() as u64, SLOW_BATCH);
    assert_increasing(&slow_ids);

    within("shutdown", running.served.served()).await.unwrap();
    assert_eq!(running.server.shutdown_steps(), SHUTDOWN_ORDER);
    // Every ID lies at or below the stored marks.
    for (namespace, layout, id) in [
        ("default", "snowflake", *ids.last().unwrap()),
        ("slow", "js53", *slow_ids.last().unwrap()),
    ] {
        let layout = Layout::builtin(layout).unwrap();
        let time = layout.time_ms(idmint_core::AnyId::U64(id), u64::MAX).unwrap().unwrap();
        let mark = running.coordinator.mark(namespace, 0).expect("a stored mark");
        assert!(time <= mark, "{namespace}: id time {time} above the mark {mark}");
    }
    // Neither port accepts any more.
    for addr in [running.http, running.grpc] {
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_err(),
            "{addr} accepts"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_grpc_alone_shuts_down_in_order() {
    let coordinator = Arc::new(MemoryCoordinator::new());
    let server =
        Server::start(config(vec![NamespaceConfig::default()]), coordinator, Arc::new(SystemClock))
            .await
            .unwrap();
    let listener = idmint_server::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let task =
        tokio::spawn(idmint_server::serve_grpc(Arc::clone(&server), listener, shutdown.clone()));
    let mut client = within("connect", IdMintClient::connect(url)).await.unwrap();
    let batch = within(
        "batch",
        client.batch(BatchRequest { namespace: String::new(), count: 5, ..Default::default() }),
    )
    .await
    .unwrap();
    assert_eq!(batch.into_inner().ids.len(), 5);
    shutdown.cancel();
    within("shutdown", task).await.unwrap().unwrap();
    assert_eq!(server.shutdown_steps().len(), 5);
    assert!(!server.is_ready());
}

/// Which fields of an `IdBatch` a request for `encoding` may fill, checked, and its IDs
/// widened to `u128`: packed is `id_bytes` big-endian bytes per ID in `packed` alone; unset
/// is `ids` (64-bit) or `ids128` (128-bit) alone, and nothing else on the wire, byte for
/// byte what servers sent before `encoding` existed.
fn ids_of(batch: &IdBatch, encoding: IdEncoding, bits: u32) -> Vec<u128> {
    use prost::Message as _;
    match encoding {
        IdEncoding::PackedBe => {
            let width = if bits == 128 { 16 } else { 8 };
            assert_eq!(batch.id_bytes, width, "id_bytes");
            assert!(batch.ids.is_empty() && batch.ids128.is_empty(), "only `packed`");
            assert_eq!(batch.packed.len() % width as usize, 0, "whole ids");
            if bits == 128 {
                batch.u128s().collect()
            } else {
                batch.packed_u64s().map(u128::from).collect()
            }
        }
        IdEncoding::Unspecified => {
            // Re-encoded, the message holds exactly today's field: no `packed`, no `id_bytes`.
            let today = if bits == 128 {
                IdBatch { ids128: batch.ids128.clone(), ..IdBatch::default() }
            } else {
                IdBatch { ids: batch.ids.clone(), ..IdBatch::default() }
            };
            assert_eq!(batch.encode_to_vec(), today.encode_to_vec(), "today's message");
            assert!(batch.packed.is_empty() && batch.id_bytes == 0);
            if bits == 128 {
                assert!(batch.ids.is_empty());
                batch.u128s().collect()
            } else {
                assert!(batch.ids128.is_empty());
                batch.ids.iter().copied().map(u128::from).collect()
            }
        }
    }
}

/// Checks one answer's IDs: the count asked for, strictly increasing, all above the
/// namespace's earlier IDs, and of about now for a layout with time (so bytes read in the
/// wrong order fail). Returns the last ID.
fn check_ids(
    what: &str,
    ids: &[u128],
    count: usize,
    bits: u32,
    after: Option<u128>,
) -> Result<u128, String> {
    if ids.len() != count {
        return Err(format!("{what}: {} ids, want {count}", ids.len()));
    }
    if let Some(pair) = ids.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("{what}: {} then {}", pair[0], pair[1]));
    }
    if let (Some(before), Some(&first)) = (after, ids.first())
        && first <= before
    {
        return Err(format!("{what}: {first} after {before}"));
    }
    let layout = Layout::builtin(if bits == 128 { "hot-guid" } else { "snowflake" }).unwrap();
    let now_ms = idmint_core::Clock::now_ms(&SystemClock);
    for &id in ids {
        let id = if bits == 128 {
            idmint_core::AnyId::U128(id)
        } else {
            idmint_core::AnyId::U64(u64::try_from(id).map_err(|_| format!("{what}: {id} > u64"))?)
        };
        match layout.time_ms(id, u64::MAX) {
            Ok(Some(ms)) if ms.abs_diff(now_ms) > 60_000 => {
                return Err(format!("{what}: {id} issued at {ms}, not about {now_ms}"));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{what}: {id}: {e}")),
        }
    }
    ids.last().copied().ok_or_else(|| format!("{what}: no ids"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_and_repeated_batches_carry_the_same_ids() {
    use IdEncoding::{PackedBe, Unspecified};
    use prost::Message as _;
    // An old client's request is the new request with `encoding` unset, byte for byte.
    let old = BatchRequest { count: 5, ..Default::default() };
    assert_eq!(old.encode_to_vec(), [0x10, 5]);

    let running = Running::start(three_namespaces()).await;
    let mut client = running.client().await;
    let rows = [
        ("default", 1000, Unspecified, 64),
        ("default", 1000, PackedBe, 64),
        ("default", 1, PackedBe, 64),
        ("default", 1, Unspecified, 64),
        ("default", 10_000, PackedBe, 64),
        ("guid", 500, Unspecified, 128),
        ("guid", 500, PackedBe, 128),
        ("guid", 1, PackedBe, 128),
    ];
    let mut last: std::collections::HashMap<&str, u128> = Default::default();
    for (namespace, count, encoding, bits) in rows {
        let what = format!("Batch {namespace} {count} {encoding:?}");
        let request = BatchRequest {
            namespace: namespace.into(),
            count,
            encoding: encoding.into(),
            format: None,
            shard_key: None,
        };
        let batch = within(&what, client.batch(request)).await.unwrap().into_inner();
        assert_eq!(batch.len(), count as usize, "{what}");
        let ids = ids_of(&batch, encoding, bits);
        let end = check_ids(&what, &ids, count as usize, bits, last.get(namespace).copied())
            .unwrap_or_else(|e| panic!("{e}"));
        last.insert(namespace, end);
    }
    // Streams: packed messages, then repeated ones, on one namespace.
    for (namespace, encoding, bits) in
        [("default", PackedBe, 64), ("default", Unspecified, 64), ("guid", PackedBe, 128)]
    {
        let what = format!("Stream {namespace} {encoding:?}");
        let request = StreamRequest {
            namespace: namespace.into(),
            batch_size: 4096,
            batches: 5,
            encoding: encoding.into(),
            shard_key: None,
        };
        let mut stream = within(&what, client.stream(request)).await.unwrap().into_inner();
        let (batches, status) = drain_stream(&mut stream).await;
        assert!(status.is_none(), "{what} ended with {status:?}");
        assert_eq!(batches.len(), 5, "{what}");
        for batch in &batches {
            let ids = ids_of(batch, encoding, bits);
            let end = check_ids(&what, &ids, 4096, bits, last.get(namespace).copied())
                .unwrap_or_else(|e| panic!("{e}"));
            last.insert(namespace, end);
        }
    }
    // An encoding this server does not know is refused, not answered in another form.
    let request = BatchRequest {
        namespace: String::new(),
        count: 3,
        encoding: 7,
        format: None,
        shard_key: None,
    };
    let status = within("unknown encoding", client.batch(request)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let request = StreamRequest { batch_size: 3, batches: 1, encoding: -1, ..Default::default() };
    let status = within("unknown encoding", client.stream(request)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    running.stop().await.unwrap();
}

/// Negative control: the checks (`check_ids`) of `packed_and_repeated_batches_carry_the_same_ids` fail for
/// packed bytes read little-endian and for a batch one ID short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_checks_catch_little_endian_and_short_batches() {
    let running = Running::start(three_namespaces()).await;
    let mut client = running.client().await;
    let request =
        BatchRequest { count: 100, encoding: IdEncoding::PackedBe.into(), ..Default::default() };
    let batch = within("batch", client.batch(request)).await.unwrap().into_inner();
    let ids = ids_of(&batch, IdEncoding::PackedBe, 64);
    check_ids("real", &ids, 100, 64, None).expect("the real answer passes");
    let little: Vec<u128> = batch
        .packed
        .chunks_exact(8)
        .map(|c| u128::from(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    assert!(check_ids("little-endian", &little, 100, 64, None).is_err());
    assert!(check_ids("short", &ids[1..], 100, 64, None).is_err());
    running.stop().await.unwrap();
}

/// Public IDs are applied to packed batches too: what a packed batch hands out is not the
/// layout's IDs, and each reveals (decode with the token) to increasing IDs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packed_batches_carry_public_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(
        &keys,
        r#"{"method": "ff1", "version_bits": 0, "active": 0,
  "keys": [{"version": 0, "secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}]}"#,
    )
    .expect("keys");
    let namespace = NamespaceConfig {
        token: Some(TOKEN.into()),
        public_ids: Some(idmint_server::PublicIdsSettings {
            key_file: keys.to_string_lossy().into_owned(),
        }),
        ..NamespaceConfig::named("orders")
    };
    let running = Running::start(config(vec![namespace])).await;
    let mut client = running.client().await;
    let request = BatchRequest {
        namespace: "orders".into(),
        count: 200,
        encoding: IdEncoding::PackedBe.into(),
        format: None,
        shard_key: None,
    };
    let batch =
        within("batch", client.batch(with_token(request, Some(TOKEN)))).await.unwrap().into_inner();
    let public: Vec<u64> = batch.packed_u64s().collect();
    assert_eq!(public.len(), 200);
    assert!(public.windows(2).any(|w| w[0] > w[1]), "public ids are not in time order");
    let mut revealed = Vec::new();
    for id in &public {
        let request =
            DecodeRequest { namespace: "orders".into(), id: id.to_string(), format: None };
        let decoded = within("decode", client.decode(with_token(request, Some(TOKEN))))
            .await
            .unwrap()
            .into_inner();
        revealed.push(decoded.id.parse::<u64>().expect("decimal"));
    }
    assert!(revealed.windows(2).all(|w| w[0] < w[1]), "the ids behind them increase");
    assert_ne!(public, revealed, "the packed path handed out the ids themselves");
    running.stop().await.unwrap();
}
