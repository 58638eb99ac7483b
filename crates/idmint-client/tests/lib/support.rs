//! What the tests share: in-process idmint servers on port 0, a fake server with scripted
//! answers, a listener that never answers, and reading the servers' metrics.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use axum::{
    Router,
    extract::{Query, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use idmint_coord::MemoryCoordinator;
use idmint_core::{Layout, SystemClock};
use idmint_proto::{NamespaceInfo, NamespacesResponse};
use idmint_server::{Server, ServerConfig};
use tokio::{net::TcpListener, task::JoinHandle};
use tokio_util::sync::CancellationToken;

/// One idmint server, served on 127.0.0.1 at a free port (an `idmint_testkit::TestServer`, on a
/// runtime of its own).
pub(crate) struct TestServer {
    served: idmint_testkit::TestServer,
    pub(crate) server: Arc<Server>,
    pub(crate) url: String,
}

impl TestServer {
    /// Starts a server with `config`, claiming through `coordinator` (clone one coordinator
    /// for servers that must not issue the same IDs).
    pub(crate) async fn start(config: ServerConfig, coordinator: MemoryCoordinator) -> Self {
        let served = idmint_testkit::TestServer::builder(config)
            .coordinator(Arc::new(coordinator))
            .wall(Arc::new(SystemClock))
            .start_async()
            .await
            .expect("the server starts");
        let url = format!("http://{}", served.addr);
        TestServer { server: Arc::clone(&served.server), url, served }
    }

    /// A server with the default configuration and a coordinator of its own.
    pub(crate) async fn default() -> Self {
        TestServer::start(ServerConfig::default(), MemoryCoordinator::new()).await
    }

    /// A metric's value, by its name and labels as rendered
    /// (`idmint_requests_total{namespace="default"}`); 0 when absent.
    pub(crate) fn metric(&self, series: &str) -> u64 {
        metric(&self.server, series)
    }

    /// Stops the server and waits for its shutdown sequence to finish.
    pub(crate) async fn shut_down(self) {
        self.served.stop_async().await.expect("a clean shutdown");
    }
}

/// A metric's value from a server's Prometheus text.
pub(crate) fn metric(server: &Server, series: &str) -> u64 {
    server
        .render_metrics()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// Successful ID requests of the `default` namespace that a server answered.
pub(crate) fn requests(server: &TestServer) -> u64 {
    server.metric(r#"idmint_requests_total{namespace="default"}"#)
}

/// A scripted answer of the fake server's batch route.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// 200 with these IDs as JSON (decimal strings), as a server that predates binary batches
    /// answers whatever the `Accept`.
    Ids(Vec<u64>),
    /// 200 with these IDs in binary: 8 big-endian bytes each, with `Idmint-Count` and
    /// `Idmint-Id-Bytes`.
    Binary(Vec<u64>),
    /// 200 with this content type, body, and `Idmint-Count` (if given; `Idmint-Id-Bytes` is 8).
    Raw(&'static str, Vec<u8>, Option<&'static str>),
    /// An idmint error: status, code, and `Retry-After` seconds.
    Error(u16, &'static str, Option<u64>),
}

/// What the fake server shares with its handlers.
#[derive(Debug)]
struct Script {
    answers: Vec<Answer>,
    /// Batch requests answered so far; past the end of `answers`, the last one repeats.
    batches: AtomicUsize,
    /// The generator IDs `/v1/namespaces` reports, in turn; the last repeats.
    generators: Vec<u64>,
    infos: AtomicUsize,
    fingerprint: String,
    counts: Mutex<Vec<u64>>,
    accepts: Mutex<Vec<String>>,
}

/// A fake idmint server for the `default` namespace (snowflake, unless another fingerprint
/// is given), whose batch route plays a script.
pub(crate) struct Fake {
    pub(crate) url: String,
    script: Arc<Script>,
    stop: CancellationToken,
}

impl Fake {
    pub(crate) async fn start(answers: Vec<Answer>) -> Self {
        Fake::with(answers, vec![0], None).await
    }

    /// A fake whose `/v1/namespaces` reports `generators` in turn and, if given, another
    /// layout fingerprint.
    pub(crate) async fn with(
        answers: Vec<Answer>,
        generators: Vec<u64>,
        fingerprint: Option<&str>,
    ) -> Self {
        let snowflake = Layout::builtin("snowflake").expect("a built-in layout").fingerprint();
        let script = Arc::new(Script {
            answers,
            batches: AtomicUsize::new(0),
            generators,
            infos: AtomicUsize::new(0),
            fingerprint: fingerprint.map_or(snowflake, str::to_owned),
            counts: Mutex::new(Vec::new()),
            accepts: Mutex::new(Vec::new()),
        });
        let router = Router::new()
            .route("/v1/namespaces", get(fake_namespaces))
            .route("/v1/namespaces/default/batch", get(fake_batch))
            .with_state(Arc::clone(&script));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let url = format!("http://{}", listener.local_addr().expect("bound"));
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            axum::serve(listener, router).with_graceful_shutdown(shutdown).await.expect("serves");
        });
        Fake { url, script, stop }
    }

    /// How many batch requests it answered.
    pub(crate) fn batches(&self) -> usize {
        self.script.batches.load(Ordering::SeqCst)
    }

    /// The `count` of each batch request, in order.
    pub(crate) fn counts(&self) -> Vec<u64> {
        self.script.counts.lock().expect("not poisoned").clone()
    }

    /// The `Accept` header of each batch request, in order.
    pub(crate) fn accepts(&self) -> Vec<String> {
        self.script.accepts.lock().expect("not poisoned").clone()
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn fake_namespaces(State(script): State<Arc<Script>>) -> axum::Json<NamespacesResponse> {
    let n = script.infos.fetch_add(1, Ordering::SeqCst);
    let generator = script.generators[n.min(script.generators.len() - 1)];
    axum::Json(NamespacesResponse {
        namespaces: vec![NamespaceInfo {
            name: "default".into(),
            layout: "snowflake".into(),
            fingerprint: script.fingerprint.clone(),
            id_bits: 64,
            js_safe: false,
            default_format: "decimal".into(),
            generator_id: Some(generator),
            ready: true,
            runs_out: None,
            ids_per_second: 4_096_000,
            generators: 1024,
            auth: false,
            source: "generator".into(),
            order: "increasing".into(),
            generator_ids: vec![generator],
            type_prefix: String::new(),
        }],
    })
}

async fn fake_batch(
    State(script): State<Arc<Script>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let count = query.get("count").and_then(|c| c.parse().ok()).unwrap_or(0);
    script.counts.lock().expect("not poisoned").push(count);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    script.accepts.lock().expect("not poisoned").push(accept.to_owned());
    let n = script.batches.fetch_add(1, Ordering::SeqCst);
    match &script.answers[n.min(script.answers.len() - 1)] {
        Answer::Ids(ids) => {
            let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
            axum::Json(serde_json::json!({ "namespace": "default", "ids": ids })).into_response()
        }
        Answer::Binary(ids) => {
            let body: Vec<u8> = ids.iter().flat_map(|id| id.to_be_bytes()).collect();
            let count = ids.len().to_string();
            let headers = [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (header::HeaderName::from_static("idmint-count"), count.as_str()),
                (header::HeaderName::from_static("idmint-id-bytes"), "8"),
            ];
            (headers, body).into_response()
        }
        Answer::Raw(content_type, body, count) => {
            let mut response =
                ([(header::CONTENT_TYPE, *content_type)], body.clone()).into_response();
            let headers = response.headers_mut();
            headers.insert("idmint-id-bytes", HeaderValue::from_static("8"));
            if let Some(count) = count {
                headers.insert("idmint-count", HeaderValue::from_static(count));
            }
            response
        }
        Answer::Error(status, code, retry_after) => {
            let body = serde_json::json!({ "error": { "code": code, "message": "scripted" } });
            let status = StatusCode::from_u16(*status).expect("a status");
            let mut response = (status, axum::Json(body)).into_response();
            if let Some(secs) = retry_after {
                response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*secs));
            }
            response
        }
    }
}

/// A listener that accepts connections and never answers on them.
pub(crate) struct Silent {
    pub(crate) url: String,
    pub(crate) accepted: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Silent {
    pub(crate) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
        let addr: SocketAddr = listener.local_addr().expect("bound");
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                held.push(socket);
            }
        });
        Silent { url: format!("http://{addr}"), accepted, task }
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}
