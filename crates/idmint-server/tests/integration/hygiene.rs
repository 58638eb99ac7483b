//! Connection hygiene and the one error contract, against a served server on a free loopback
//! port: connections that send nothing, trickle a header or a body, or sit idle are closed
//! by their deadlines (counted from accept) while `/v1/next` keeps answering; the per-IP cap;
//! idle connections shed at the connection limit; hyper's own answers (431, 400) carry
//! idmint's JSON error; batch bodies of the wrong shape are refused; gRPC messages that do not
//! decode are INVALID_ARGUMENT, and what tonic would take (a second message, an unknown
//! `grpc-encoding`, a `content-type` that is not gRPC's) is refused; and every one of these
//! rules holds on the gRPC port too (`grpc_port`: connection caps counted over both ports,
//! deadlines, streams per connection, rapid reset). Each hole is first shown open on a server
//! whose limits are far away (the negative control), then closed. Timeouts are hundreds of
//! ms, so each test takes about a second.

use std::{
    io::{ErrorKind, Read, Write},
    net::TcpStream,
    sync::Arc,
    time::{Duration, Instant},
};

use idmint_coord::MemoryCoordinator;
use idmint_server::ServerConfig;
use idmint_testkit::{TestServer, check::metric, http};

/// Far enough away that no test reaches it: the limits of the negative controls.
const FAR_MS: u64 = 60_000;

/// A config with these timeouts (ms) and every other setting at its default.
fn timeouts(first_byte: u64, header: u64, body: u64, idle: u64) -> ServerConfig {
    ServerConfig {
        first_byte_timeout_ms: first_byte,
        header_timeout_ms: header,
        body_timeout_ms: body,
        idle_timeout_ms: idle,
        ..ServerConfig::default()
    }
}

fn start(config: ServerConfig) -> TestServer {
    TestServer::start(config, Arc::new(MemoryCoordinator::new()), idmint_testkit::clock(0))
        .expect("the server starts")
}

fn connect(server: &TestServer) -> TcpStream {
    let stream = TcpStream::connect(server.addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    stream
}

/// Whether the server has closed `stream` (EOF or reset), without waiting; data the server
/// sent is read and skipped.
fn is_closed(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0_u8; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break true,
        }
    };
    stream.set_nonblocking(false).expect("blocking");
    closed
}

/// Waits until every stream is closed, up to `limit`; returns how long that took, or None
/// with some still open.
fn all_closed_within(
    streams: &mut [TcpStream],
    start: Instant,
    limit: Duration,
) -> Option<Duration> {
    let mut open: Vec<&mut TcpStream> = streams.iter_mut().collect();
    loop {
        open.retain_mut(|s| !is_closed(s));
        if open.is_empty() {
            return Some(start.elapsed());
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[allow(clippy::print_stderr)]
fn note(what: &str) {
    eprintln!("{what}");
}

#[test]
fn idle_connections_are_closed_within_the_header_timeout_while_next_answers() {
    const CONNECTIONS: usize = 300;
    let check = |config: ServerConfig, expect_closed: bool| {
        let server = start(config.clone());
        let opening = Instant::now();
        let mut idle: Vec<TcpStream> = (0..CONNECTIONS).map(|_| connect(&server)).collect();
        // Each deadline runs from its own accept; the last accept is at the earliest now.
        let opened = Instant::now();
        // The port is not locked: a new client is answered while the 300 are open.
        server.get("/v1/next").ok();
        // The strict server's header timeout, and room for a loaded machine.
        let header = Duration::from_millis(300);
        let took = all_closed_within(&mut idle, opened, header + Duration::from_millis(500));
        if expect_closed {
            let took = took.unwrap_or_else(|| {
                let open = idle.iter_mut().map(is_closed).filter(|c| !c).count();
                panic!(
                    "{open} idle connections still open after the header timeout:\n{}",
                    server.server.render_metrics()
                )
            });
            assert!(took <= header + Duration::from_millis(500), "took {took:?}");
            let metrics = server.server.render_metrics();
            let closed = metric(
                &metrics,
                "idmint_http_connections_closed_total{reason=\"first_byte_timeout\"}",
            );
            assert!(
                closed >= CONNECTIONS as u64,
                "{closed} closed for their first byte:\n{metrics}"
            );
            note(&format!(
                "{CONNECTIONS} idle connections (opened in {:?}) all closed {took:?} after the \
                 last was opened (first byte {} ms, header {} ms)",
                opened - opening,
                config.first_byte_timeout_ms,
                config.header_timeout_ms
            ));
        } else {
            assert!(took.is_none(), "the negative control closed its connections");
            assert!(idle.iter_mut().all(|s| !is_closed(s)));
        }
        server.get("/v1/next").ok();
    };
    // 300 connections from one address: over the default per-IP cap, which is not tested here.
    let uncapped = |config| ServerConfig { max_connections_per_ip: None, ..config };
    // The hole, reproduced with the deadlines far away: nothing closes them.
    check(uncapped(timeouts(FAR_MS, FAR_MS, FAR_MS, FAR_MS)), false);
    check(uncapped(timeouts(200, 300, FAR_MS, FAR_MS)), true);
}

/// Sends a request header and then its body one byte every 50 ms; returns whether the server
/// closed the connection before `bytes` were sent.
fn trickle(server: &TestServer, header: &[u8], bytes: usize) -> bool {
    let mut stream = connect(server);
    stream.write_all(header).expect("write the header");
    for _ in 0..bytes {
        std::thread::sleep(Duration::from_millis(50));
        if stream.write_all(b" ").is_err() || is_closed(&mut stream) {
            return true;
        }
    }
    false
}

#[test]
fn trickling_bodies_and_headers_are_closed() {
    let body = b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
    let head = b"GET /v1/next HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    let lax = start(timeouts(FAR_MS, FAR_MS, FAR_MS, FAR_MS));
    assert!(!trickle(&lax, body, 10), "a far body timeout still closed a trickling body");
    assert!(!trickle(&lax, head, 10), "a far header timeout still closed a trickling header");
    drop(lax);

    let strict = start(timeouts(200, 300, 200, FAR_MS));
    assert!(trickle(&strict, body, 30), "a body trickling for 1.5 s was not closed at 200 ms");
    assert!(trickle(&strict, head, 30), "a header trickling for 1.5 s was not closed at 300 ms");
    let metrics = strict.server.render_metrics();
    assert_eq!(
        metric(&metrics, "idmint_http_connections_closed_total{reason=\"body_timeout\"}"),
        1
    );
    assert_eq!(
        metric(&metrics, "idmint_http_connections_closed_total{reason=\"header_timeout\"}"),
        1
    );
    // A body that arrives in time is answered.
    let ok = http::send(
        strict.addr,
        "POST",
        "/v1/batch",
        &[("Content-Type", "application/json")],
        Some(br#"{"count":2}"#),
    )
    .expect("post");
    assert_eq!(ok.ids().len(), 2);
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let check = |idle_ms: u64, expect_closed: bool| {
        let server = start(timeouts(200, 300, 300, idle_ms));
        let mut conn = http::Connection::open(server.addr).expect("connect");
        conn.get("/v1/next").expect("first request").ok();
        conn.get("/v1/next").expect("keep-alive request").ok();
        let mut stream = conn.stream().try_clone().expect("clone");
        let done = Instant::now();
        let took =
            all_closed_within(std::slice::from_mut(&mut stream), done, Duration::from_millis(800));
        assert_eq!(took.is_some(), expect_closed, "idle {idle_ms} ms: closed after {took:?}");
    };
    check(FAR_MS, false);
    check(300, true);
}

#[test]
fn oversized_and_malformed_requests_get_the_json_error() {
    let server = start(ServerConfig::default());
    let check = |request: Vec<u8>, status: u16, code: &str| {
        let response = http::Connection::open(server.addr)
            .and_then(|mut c| c.send_raw(&request))
            .unwrap_or_else(|e| {
                panic!(
                    "no answer ({e}) for {:?}",
                    String::from_utf8_lossy(&request[..60.min(request.len())])
                )
            });
        assert_eq!(response.status, status, "{}", response.text());
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.json()["error"]["code"], code, "{}", response.text());
        assert!(response.json()["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    };
    let big = "a".repeat(20 * 1024);
    check(
        http::request_bytes("GET", "/v1/next", &[("X-Big", &big)], None),
        431,
        "header_too_large",
    );
    check(
        http::request_bytes("GET", &format!("/v1/next?{big}"), &[], None),
        431,
        "header_too_large",
    );
    check(b"GARBAGE\r\n\r\n".to_vec(), 400, "bad_request");
    check(b"GET /v1/next HTTP/1.1\r\nBad Header\r\n\r\n".to_vec(), 400, "bad_request");
    check(
        b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n".to_vec(),
        400,
        "bad_request",
    );
    // idmint's own errors pass unchanged.
    check(http::request_bytes("GET", "/v1/nope", &[], None), 404, "not_found");
    check(http::request_bytes("GET", "/v1/batch?count=0", &[], None), 400, "bad_request");
    let metrics = server.metrics();
    assert_eq!(metric(&metrics, "idmint_http_responses_total{code=\"431\"}"), 2);
}

#[test]
fn batch_bodies_must_be_the_declared_object() {
    let server = start(ServerConfig::default());
    let check = |body: &str, status: u16| {
        let response = http::send(
            server.addr,
            "POST",
            "/v1/batch",
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
        .expect("post");
        assert_eq!(response.status, status, "{body}: {}", response.text());
        if status != 200 {
            assert_eq!(response.json()["error"]["code"], "bad_request", "{body}");
        }
    };
    check(r#"{"count":1}"#, 200);
    check(r#"{"count":1,"format":"hex","numbers":false}"#, 200);
    check("[1]", 400);
    check(r#"[1,"hex",false]"#, 400);
    check(r#"{"count":1,"format":null}"#, 400);
    check(r#"{"count":1,"numbers":null}"#, 400);
    check(r#"{"count":null}"#, 400);
    check("1", 400);
    check("null", 400);
    check(r#""x""#, 400);
    check(r#"{"count":1.5}"#, 400);
    // JSON Schema's integers include numbers with a zero fraction.
    check(r#"{"count":2.0}"#, 200);
    check(r#"{"count":-1}"#, 400);
    check(r#"{"count":1e400}"#, 400);
    check(r#"{"count":"1"}"#, 400);
    check(r#"{"count":1,"extra":1}"#, 400);
}

#[test]
fn one_client_ip_holds_at_most_its_cap() {
    let check = |cap: Option<usize>| {
        let config = ServerConfig {
            max_connections_per_ip: cap,
            ..timeouts(FAR_MS, FAR_MS, FAR_MS, FAR_MS)
        };
        let server = start(config);
        let held: Vec<TcpStream> = (0..3).map(|_| connect(&server)).collect();
        let mut fourth = http::Connection::open(server.addr).expect("connect");
        let answered = fourth.get("/v1/next").is_ok_and(|r| r.status == 200);
        (server, held, answered)
    };
    let (_, _, answered) = check(None);
    assert!(answered, "without a cap a fourth connection is served");
    let (server, mut held, answered) = check(Some(3));
    assert!(!answered, "a fourth connection from one IP was served over a cap of 3");
    assert_eq!(
        metric(
            &server.server.render_metrics(),
            "idmint_http_connections_refused_total{reason=\"per_ip\"}"
        ),
        1
    );
    // Once one of the three closes, a new connection is served again.
    drop(held.pop());
    idmint_testkit::check::wait_until("a slot freed", Duration::from_secs(2), || {
        http::send(server.addr, "GET", "/v1/next", &[], None).is_ok_and(|r| r.status == 200)
    });
}

#[test]
fn idle_connections_are_shed_at_the_limit_before_new_ones_are_refused() {
    let config =
        |max| ServerConfig { max_connections: max, ..timeouts(FAR_MS, FAR_MS, FAR_MS, FAR_MS) };
    // Four idle connections fill the server; a fifth is served, and the oldest idle one goes.
    let server = start(config(4));
    let mut idle: Vec<TcpStream> = (0..4).map(|_| connect(&server)).collect();
    std::thread::sleep(Duration::from_millis(50));
    server.get("/v1/next").ok();
    idmint_testkit::check::wait_until(
        "the oldest idle connection closed",
        Duration::from_secs(2),
        || is_closed(&mut idle[0]),
    );
    assert!(idle[1..].iter_mut().all(|s| !is_closed(s)), "only the oldest idle connection is shed");
    let metrics = server.server.render_metrics();
    assert!(
        metric(&metrics, "idmint_http_connections_closed_total{reason=\"shed\"}") >= 1,
        "{metrics}"
    );
    drop(server);

    // Connections with a request in flight (a body still arriving) are never shed: at the
    // limit with none idle, a new connection is refused.
    let server = start(config(2));
    let partial = b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{";
    let mut busy: Vec<TcpStream> = (0..2).map(|_| connect(&server)).collect();
    for stream in &mut busy {
        stream.write_all(partial).expect("write");
    }
    std::thread::sleep(Duration::from_millis(50));
    let refused = http::send(server.addr, "GET", "/v1/next", &[], None);
    assert!(refused.is_err(), "a third connection was served: {refused:?}");
    assert!(busy.iter_mut().all(|s| !is_closed(s)), "a busy connection was shed");
    let metrics = server.server.render_metrics();
    assert_eq!(metric(&metrics, "idmint_http_connections_refused_total{reason=\"limit\"}"), 1);
}

mod grpc {
    use std::{net::SocketAddr, sync::Arc};

    use idmint_coord::MemoryCoordinator;
    use idmint_core::SystemClock;
    use idmint_server::{Server, ServerConfig};
    use tokio_util::sync::CancellationToken;
    use tonic::{
        Code, Request, Status,
        codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
        codegen::http::uri::PathAndQuery,
    };

    use idmint_testkit::check::metric;

    /// Request and response messages as raw bytes, so that a test can send what no client
    /// would.
    #[derive(Debug, Clone, Copy, Default)]
    struct Raw;

    impl Codec for Raw {
        type Encode = Vec<u8>;
        type Decode = Vec<u8>;
        type Encoder = Raw;
        type Decoder = Raw;

        fn encoder(&mut self) -> Raw {
            Raw
        }

        fn decoder(&mut self) -> Raw {
            Raw
        }
    }

    impl Encoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;

        fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            bytes::BufMut::put_slice(dst, &item);
            Ok(())
        }
    }

    impl Decoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;

        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
            let n = bytes::Buf::remaining(src);
            Ok(Some(bytes::Buf::copy_to_bytes(src, n).to_vec()))
        }
    }

    async fn call(addr: SocketAddr, message: Vec<u8>) -> Result<Vec<u8>, Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.expect("ready");
        let path = PathAndQuery::from_static("/idmint.v1.IdMint/Batch");
        grpc.unary(Request::new(message), path, Raw).await.map(tonic::Response::into_inner)
    }

    /// Connections to the gRPC port that never send a byte are closed at the first-byte
    /// timeout; with it far away (the negative control) they stay open.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn silent_grpc_connections_are_closed() {
        for (first_byte_ms, expect_closed) in [(super::FAR_MS, false), (200, true)] {
            let config =
                super::timeouts(first_byte_ms, super::FAR_MS, super::FAR_MS, super::FAR_MS);
            let server =
                Server::start(config, Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock))
                    .await
                    .expect("start");
            let listener = idmint_server::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("addr");
            let shutdown = CancellationToken::new();
            let task = tokio::spawn(idmint_server::serve_grpc(
                Arc::clone(&server),
                listener,
                shutdown.clone(),
            ));
            let took = tokio::task::spawn_blocking(move || {
                let mut silent: Vec<std::net::TcpStream> =
                    (0..50).map(|_| std::net::TcpStream::connect(addr).expect("connect")).collect();
                let opened = std::time::Instant::now();
                super::all_closed_within(&mut silent, opened, std::time::Duration::from_millis(700))
            })
            .await
            .expect("join");
            assert_eq!(took.is_some(), expect_closed, "first byte {first_byte_ms} ms: {took:?}");
            // The port still answers.
            call(addr, vec![0x10, 0x01]).await.expect("a call is answered");
            shutdown.cancel();
            task.await.expect("join").expect("serve");
        }
    }

    /// A call to `method` with these request messages and metadata, through tonic's client
    /// (which sends whatever it is given): the first response message, or the status.
    async fn call_with(
        addr: SocketAddr,
        method: &'static str,
        messages: Vec<Vec<u8>>,
        metadata: &[(&'static str, &'static str)],
    ) -> Result<Vec<u8>, Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("url")
            .connect()
            .await
            .expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.expect("ready");
        let mut request = Request::new(tokio_stream::iter(messages));
        for (name, value) in metadata {
            request
                .metadata_mut()
                .insert(*name, tonic::metadata::MetadataValue::from_static(value));
        }
        let path = PathAndQuery::from_static(method);
        let mut stream = grpc.streaming(request, path, Raw).await?.into_inner();
        stream.message().await?.ok_or_else(|| Status::unknown("no message"))
    }

    /// What tonic would take is refused with idmint's errors, counted: a `grpc-encoding`
    /// the server does not decode (UNIMPLEMENTED, `unsupported_media_type`), a second
    /// message on `Next` (INVALID_ARGUMENT, `bad_request`), and a `content-type` that is not
    /// gRPC's (HTTP 415, trailers only: no message). Each beside its control, answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_tonic_would_take_is_refused() {
        let server = Server::start(
            ServerConfig::default(),
            Arc::new(MemoryCoordinator::new()),
            Arc::new(SystemClock),
        )
        .await
        .expect("start");
        let listener = idmint_server::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(idmint_server::serve_grpc(
            Arc::clone(&server),
            listener,
            shutdown.clone(),
        ));
        const NEXT: &str = "/idmint.v1.IdMint/Next";
        type Row = (
            &'static str,
            Vec<Vec<u8>>,
            &'static [(&'static str, &'static str)],
            Option<(Code, &'static str)>,
        );
        let rows: [Row; 6] = [
            ("one message", vec![vec![]], &[], None),
            ("identity encoding", vec![vec![]], &[("grpc-encoding", "identity")], None),
            (
                "gzip encoding",
                vec![vec![]],
                &[("grpc-encoding", "gzip")],
                Some((Code::Unimplemented, "unsupported_media_type")),
            ),
            (
                "unknown encoding",
                vec![vec![]],
                &[("grpc-encoding", "zstd-9000")],
                Some((Code::Unimplemented, "unsupported_media_type")),
            ),
            (
                "two messages",
                vec![vec![], vec![]],
                &[],
                Some((Code::InvalidArgument, "bad_request")),
            ),
            (
                "a second message after a whole one",
                vec![vec![0x12, 0x03, b'h', b'e', b'x'], vec![0x12, 0x03, b'h', b'e', b'x']],
                &[],
                Some((Code::InvalidArgument, "bad_request")),
            ),
        ];
        for (what, messages, metadata, want) in rows {
            let answer = call_with(addr, NEXT, messages, metadata).await;
            match want {
                None => assert!(answer.is_ok_and(|m| !m.is_empty()), "{what}: not answered"),
                Some((code, error)) => {
                    let status = answer.expect_err(what);
                    assert_eq!(status.code(), code, "{what}: {status:?}");
                    assert_eq!(
                        status.metadata().get("idmint-error").and_then(|v| v.to_str().ok()),
                        Some(error),
                        "{what}: {status:?}"
                    );
                }
            }
        }
        let metrics = server.render_metrics();
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"UNIMPLEMENTED\"}"), 2);
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"INVALID_ARGUMENT\"}"), 2);

        // A content-type that is not gRPC's: trailers only, no message; the control is
        // answered with a message.
        let frames = tokio::task::spawn_blocking(move || {
            [("text/plain", 1), ("application/grpc", 3)].map(|(content_type, stream)| {
                let mut conn = idmint_testkit::h2::Conn::open(addr).expect("connect");
                let call = idmint_testkit::h2::call(stream, NEXT, content_type, &[&[]]);
                conn.send(&call).expect("send");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                let mut frames = Vec::new();
                while let Ok(Some(frame)) = conn.read(deadline) {
                    let done =
                        frame.stream == stream && frame.flags & idmint_testkit::h2::END_STREAM != 0;
                    frames.push(frame);
                    if done {
                        break;
                    }
                }
                frames.into_iter().filter(|f| f.stream == stream).collect::<Vec<_>>()
            })
        })
        .await
        .expect("join");
        let kinds = |frames: &[idmint_testkit::h2::Frame]| {
            frames.iter().map(|f| f.kind).collect::<Vec<_>>()
        };
        use idmint_testkit::h2::{DATA, HEADERS};
        assert_eq!(kinds(&frames[0]), [HEADERS], "text/plain: {:?}", frames[0]);
        assert_eq!(
            kinds(&frames[1]),
            [HEADERS, DATA, HEADERS],
            "application/grpc: {:?}",
            frames[1]
        );
        let metrics = server.render_metrics();
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"UNIMPLEMENTED\"}"), 3);
        shutdown.cancel();
        task.await.expect("join").expect("serve");
    }

    #[tokio::test]
    async fn malformed_messages_are_invalid_argument_and_counted() {
        let server = Server::start(
            ServerConfig::default(),
            Arc::new(MemoryCoordinator::new()),
            Arc::new(SystemClock),
        )
        .await
        .expect("start");
        let listener = idmint_server::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(idmint_server::serve_grpc(
            Arc::clone(&server),
            listener,
            shutdown.clone(),
        ));

        // A valid BatchRequest (count = 3: field 2, varint) is answered: the control.
        let ok = call(addr, vec![0x10, 0x03]).await.expect("a valid message is answered");
        assert!(!ok.is_empty());
        let cases: [(&str, Vec<u8>, Code, &str); 4] = [
            ("garbage", vec![0xff; 16], Code::InvalidArgument, "bad_request"),
            ("truncated varint", vec![0x10, 0x80], Code::InvalidArgument, "bad_request"),
            (
                "invalid utf-8",
                vec![0x0a, 0x02, 0xff, 0xfe, 0x10, 0x01],
                Code::InvalidArgument,
                "bad_request",
            ),
            (
                "oversized",
                [vec![0x0a, 0xff, 0xff, 0x04], vec![b'a'; 0x1_3fff]].concat(),
                Code::ResourceExhausted,
                "payload_too_large",
            ),
        ];
        for (what, message, code, error) in cases {
            let status = call(addr, message).await.expect_err(what);
            assert_eq!(status.code(), code, "{what}: {status:?}");
            assert_eq!(
                status.metadata().get("idmint-error").and_then(|v| v.to_str().ok()),
                Some(error),
                "{what}: {status:?}"
            );
        }
        let metrics = server.render_metrics();
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"INVALID_ARGUMENT\"}"), 3);
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"RESOURCE_EXHAUSTED\"}"), 1);
        assert_eq!(metric(&metrics, "idmint_grpc_responses_total{code=\"INTERNAL\"}"), 0);
        shutdown.cancel();
        task.await.expect("join").expect("serve");
    }
}

/// The rules of the HTTP port hold on the gRPC port: each case runs a probe against a server
/// serving both ports (`serve_all`), first with the protection off or far away (the negative
/// control: the probe must find the hole), then on (the probe must find it closed). After
/// each run both ports still answer a new client.
mod grpc_port {
    use std::{
        io::Write as _,
        net::TcpStream,
        time::{Duration, Instant},
    };

    use idmint_proto::grpc::{IdMintClient, NextRequest};
    use idmint_server::ServerConfig;

    use super::{FAR_MS, all_closed_within, is_closed, timeouts};
    use idmint_testkit::{TestServer, check::metric, h2};

    /// Far-away deadlines and no per-IP cap: the base of every case.
    fn lax() -> ServerConfig {
        ServerConfig { max_connections_per_ip: None, ..timeouts(FAR_MS, FAR_MS, FAR_MS, FAR_MS) }
    }

    struct Case {
        name: &'static str,
        /// The protection off (or far away).
        off: ServerConfig,
        /// The protection on.
        on: ServerConfig,
        /// Whether the protection acted.
        probe: fn(&TestServer) -> bool,
    }

    fn grpc_addr(server: &TestServer) -> std::net::SocketAddr {
        server.grpc.expect("serve_all")
    }

    /// Whether a new gRPC client gets an ID from `Next`.
    fn next_answers(server: &TestServer) -> bool {
        let url = format!("http://{}", grpc_addr(server));
        server.runtime().block_on(async move {
            let Ok(mut client) = IdMintClient::connect(url).await else { return false };
            tokio::time::timeout(Duration::from_secs(2), client.next(NextRequest::default()))
                .await
                .is_ok_and(|answer| answer.is_ok_and(|r| r.into_inner().id.is_some()))
        })
    }

    fn check(case: &Case) {
        for (config, protected) in [(&case.off, false), (&case.on, true)] {
            let server = TestServer::builder(config.clone())
                .wall(idmint_testkit::clock(0))
                .grpc()
                .start()
                .expect("the server starts");
            let acted = (case.probe)(&server);
            assert_eq!(
                acted,
                protected,
                "{}: protection {} but the probe found it {}:\n{}",
                case.name,
                if protected { "on" } else { "off" },
                if acted { "acting" } else { "not acting" },
                server.server.render_metrics()
            );
            // The probe's connections are gone once the server has seen them close.
            idmint_testkit::check::wait_until(case.name, Duration::from_secs(3), || {
                next_answers(&server)
            });
            assert_eq!(server.get("/v1/next").status, 200, "{}: /v1/next", case.name);
        }
    }

    /// 300 connections with a call in flight (never shed): how many stay open.
    fn busy_connections_held(server: &TestServer) -> bool {
        let mut conns: Vec<h2::Conn> = (0..300)
            .filter_map(|_| {
                let mut conn = h2::Conn::open(grpc_addr(server)).ok()?;
                conn.send(&h2::stalled_next(1)).ok()?;
                Some(conn)
            })
            .collect();
        accepted(server, 300);
        // A shed connection's close reaches us a moment after the server counted it: the
        // count settles within 2 s (with no cap it stays at 300, and the wait runs out).
        let deadline = Instant::now() + Duration::from_secs(2);
        let open = loop {
            let open =
                conns.iter_mut().map(|c| is_closed(&mut c.stream)).filter(|closed| !closed).count();
            if open <= 100 || Instant::now() > deadline {
                break open;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        super::note(&format!("300 busy gRPC connections: {open} open"));
        open <= 100
    }

    /// Waits until the accept loop has taken `n` connections from the listen backlog: each
    /// is open, was refused, or was closed by the server.
    fn accepted(server: &TestServer, n: u64) {
        idmint_testkit::check::wait_until(
            "the connections accepted",
            Duration::from_secs(5),
            || {
                let metrics = server.server.render_metrics();
                let series = metrics.lines().filter(|line| {
                    line.starts_with("idmint_http_connections_open ")
                        || line.starts_with("idmint_http_connections_refused_total{")
                        || line.starts_with("idmint_http_connections_closed_total{")
                });
                let total: u64 =
                    series.filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok()).sum();
                total >= n
            },
        );
    }

    /// Three HTTP connections from 127.0.0.1 with a body arriving: is a gRPC connection
    /// from the same address refused?
    fn per_ip_across_ports(server: &TestServer) -> bool {
        let partial = b"POST /v1/batch HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{";
        let _held: Vec<TcpStream> = (0..3)
            .map(|_| {
                let mut stream = TcpStream::connect(server.addr).expect("connect");
                stream.write_all(partial).expect("write");
                stream
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50));
        let refused = !next_answers(server);
        if refused {
            let metrics = server.server.render_metrics();
            assert!(
                metric(&metrics, "idmint_http_connections_refused_total{reason=\"per_ip\"}") >= 1,
                "{metrics}"
            );
        }
        refused
    }

    /// Closed within `limit` of `start`?
    fn closed_within(conn: &mut h2::Conn, start: Instant, limit: Duration) -> bool {
        all_closed_within(std::slice::from_mut(&mut conn.stream), start, limit).is_some()
    }

    /// A `Next` whose message never arrives: is its connection closed?
    fn stalled_message(server: &TestServer) -> bool {
        let mut conn = h2::Conn::open(grpc_addr(server)).expect("connect");
        conn.send(&h2::stalled_next(1)).expect("send");
        let closed = closed_within(&mut conn, Instant::now(), Duration::from_millis(1_200));
        if closed {
            let metrics = server.server.render_metrics();
            assert_eq!(
                metric(&metrics, "idmint_http_connections_closed_total{reason=\"body_timeout\"}"),
                1,
                "{metrics}"
            );
        }
        closed
    }

    /// An HTTP/2 connection that never opens a stream (it answers the server's settings):
    /// is it closed?
    fn stream_less(server: &TestServer) -> bool {
        let mut conn = h2::Conn::open(grpc_addr(server)).expect("connect");
        conn.handshake(Duration::from_secs(2)).expect("settings");
        closed_within(&mut conn, Instant::now(), Duration::from_millis(1_200))
    }

    /// A connection idle after one whole call: is it closed?
    fn idle_after_a_call(server: &TestServer) -> bool {
        let mut conn = h2::Conn::open(grpc_addr(server)).expect("connect");
        conn.handshake(Duration::from_secs(2)).expect("settings");
        let count_one: &[u8] = &[0x10, 0x01];
        conn.send(&h2::call(1, "/idmint.v1.IdMint/Batch", "application/grpc", &[count_one]))
            .expect("send");
        // Nothing is sent after the call (no `sync` PING): bytes that the server reads once
        // the call has ended begin the next request's header, under the header deadline, not
        // the idle one, so whether the connection closed would depend on which came first.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match conn.read(deadline).expect("the answer") {
                Some(f) if f.kind == h2::DATA && f.stream == 1 => break,
                Some(_) => {}
                None => panic!("closed before the answer"),
            }
        }
        closed_within(&mut conn, Instant::now(), Duration::from_millis(1_200))
    }

    /// 11 calls in flight on one connection: is the 11th refused?
    fn eleven_streams(server: &TestServer) -> bool {
        let mut conn = h2::Conn::open(grpc_addr(server)).expect("connect");
        let settings = conn.handshake(Duration::from_secs(2)).expect("settings");
        let advertised = settings.setting(h2::MAX_CONCURRENT_STREAMS);
        let streams: Vec<u8> = (0..11).flat_map(|i| h2::stalled_next(2 * i + 1)).collect();
        conn.send(&streams).expect("send");
        let (frames, open) = conn.sync(Duration::from_secs(2)).expect("sync");
        let refused = frames.iter().any(|f| {
            f.kind == h2::RST_STREAM && f.stream == 21 && f.error_code() == Some(h2::REFUSED_STREAM)
        });
        assert!(open, "the connection closed");
        assert_eq!(refused, advertised == Some(10), "advertised {advertised:?}");
        refused
    }

    /// 200 streams opened and reset at once: is the connection closed (GOAWAY)?
    fn rapid_reset(server: &TestServer) -> bool {
        let mut conn = h2::Conn::open(grpc_addr(server)).expect("connect");
        conn.handshake(Duration::from_secs(2)).expect("settings");
        let flood: Vec<u8> = (0..200)
            .flat_map(|i| [h2::stalled_next(2 * i + 1), h2::reset(2 * i + 1)].concat())
            .collect();
        // The server may close while this is being written.
        let _ = conn.send(&flood);
        match conn.sync(Duration::from_secs(2)) {
            Ok((frames, open)) => !open || frames.iter().any(|f| f.kind == h2::GOAWAY),
            Err(_) => true,
        }
    }

    /// 300 calls in flight from 127.0.0.1 against `max_connections` 300 (a stand-in for the
    /// file descriptors of a server): does a client from 127.0.0.2 still get an ID?
    fn another_address_is_served(server: &TestServer) -> bool {
        let mut held: Vec<h2::Conn> = (0..300)
            .filter_map(|_| {
                let mut conn = h2::Conn::open(grpc_addr(server)).ok()?;
                conn.send(&h2::stalled_next(1)).ok()?;
                Some(conn)
            })
            .collect();
        accepted(server, 300);
        // Each held connection's call has reached the server (its PING is answered after
        // its HEADERS), and the call's task has had time to start: none of them is idle.
        for conn in &mut held {
            let _ = conn.sync(Duration::from_secs(2));
        }
        std::thread::sleep(Duration::from_millis(200));
        let addr = grpc_addr(server);
        let stream = server.runtime().block_on(async move {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind("127.0.0.2:0".parse().expect("address"))?;
            socket.connect(addr).await?.into_std()
        });
        let Ok(stream) = stream else { return false };
        stream.set_nonblocking(false).expect("blocking");
        let mut conn = h2::Conn::from_stream(stream).expect("preface");
        let next: &[u8] = &[];
        if conn.send(&h2::call(1, "/idmint.v1.IdMint/Next", "application/grpc", &[next])).is_err() {
            return false;
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match conn.read(deadline) {
                Ok(Some(f)) if f.kind == h2::DATA && f.stream == 1 => return true,
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return false,
            }
        }
    }

    #[test]
    fn the_rules_of_the_http_port_hold_on_the_grpc_port() {
        let cases = [
            Case {
                name: "max_connections counts gRPC connections (300 against 100)",
                off: ServerConfig { max_connections: 10_000, ..lax() },
                on: ServerConfig { max_connections: 100, ..lax() },
                probe: busy_connections_held,
            },
            Case {
                name: "max_connections_per_ip counts both ports together",
                off: lax(),
                on: ServerConfig { max_connections_per_ip: Some(3), ..lax() },
                probe: per_ip_across_ports,
            },
            Case {
                name: "the default per-IP cap leaves room for other addresses",
                off: ServerConfig { max_connections: 300, ..lax() },
                on: ServerConfig {
                    max_connections: 300,
                    max_connections_per_ip: ServerConfig::default().max_connections_per_ip,
                    ..lax()
                },
                probe: another_address_is_served,
            },
            Case {
                name: "a request message must arrive within body_timeout_ms",
                off: lax(),
                on: ServerConfig { body_timeout_ms: 200, ..lax() },
                probe: stalled_message,
            },
            Case {
                name: "a connection that opens no stream is closed",
                off: lax(),
                on: ServerConfig { first_byte_timeout_ms: 200, header_timeout_ms: 300, ..lax() },
                probe: stream_less,
            },
            Case {
                name: "a connection idle after its calls is closed",
                off: lax(),
                on: ServerConfig { idle_timeout_ms: 300, ..lax() },
                probe: idle_after_a_call,
            },
            Case {
                name: "http2_max_concurrent_streams bounds the calls of one connection",
                off: lax(),
                on: ServerConfig { http2_max_concurrent_streams: 10, ..lax() },
                probe: eleven_streams,
            },
            Case {
                name: "rapid reset closes the connection",
                off: ServerConfig { http2_max_pending_resets: 10_000, ..lax() },
                on: ServerConfig { http2_max_pending_resets: 20, ..lax() },
                probe: rapid_reset,
            },
        ];
        for case in &cases {
            check(case);
        }
    }
}
