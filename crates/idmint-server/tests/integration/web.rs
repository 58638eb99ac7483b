//! The browser side: the status page and its JSON (`/`, `/v1/status`,
//! `/v1/namespaces/{ns}/layout`), and CORS on the HTTP and gRPC-web APIs: preflights and
//! requests from an allowed origin get the headers, any other origin gets none, and without
//! `cors_allow_origins` nobody does (the negative control).

use std::{net::SocketAddr, sync::Arc};

use idmint_coord::MemoryCoordinator;
use idmint_server::{Error, NamespaceConfig, Server, ServerConfig};
use idmint_testkit::{
    TestServer, clock,
    http::{self, Response},
};
use tokio_util::sync::CancellationToken;

const ALLOWED: &str = "http://app.idmint.test:5173";
const OTHER: &str = "http://evil.idmint.test";

fn config(origins: &[&str]) -> ServerConfig {
    ServerConfig {
        namespaces: vec![
            NamespaceConfig::named("orders"),
            NamespaceConfig {
                layout: "js53".into(),
                token: Some("s3cret".into()),
                ..NamespaceConfig::named("web")
            },
        ],
        cors_allow_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        ..ServerConfig::default()
    }
}

fn start(origins: &[&str]) -> TestServer {
    TestServer::start(config(origins), Arc::new(MemoryCoordinator::new()), clock(0)).expect("start")
}

fn preflight(addr: SocketAddr, origin: &str, path: &str) -> Response {
    http::send(
        addr,
        "OPTIONS",
        path,
        &[
            ("Origin", origin),
            ("Access-Control-Request-Method", "GET"),
            ("Access-Control-Request-Headers", "authorization"),
        ],
        None,
    )
    .expect("preflight")
}

fn get_from(addr: SocketAddr, origin: &str, path: &str, token: Option<&str>) -> Response {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("Origin", origin)];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer.as_str()));
    }
    http::send(addr, "GET", path, &headers, None).expect("GET")
}

fn cors_headers(response: &Response) -> Vec<String> {
    response
        .headers
        .iter()
        .filter(|(name, _)| name.starts_with("access-control-"))
        .map(|(name, value)| format!("{name}: {value}"))
        .collect()
}

/// What one request must get back: its status, and the `Access-Control-Allow-Origin` it
/// carries (`None`: no `Access-Control-*` header at all).
struct Case {
    what: &'static str,
    origins: &'static [&'static str],
    request: fn(SocketAddr) -> Response,
    status: u16,
    allow_origin: Option<&'static str>,
}

fn check(case: &Case) {
    let server = start(case.origins);
    let response = (case.request)(server.addr);
    assert_eq!(response.status, case.status, "{}: {}", case.what, response.text());
    let headers = cors_headers(&response);
    match case.allow_origin {
        Some(origin) => {
            assert_eq!(
                response.header("access-control-allow-origin"),
                Some(origin),
                "{}: {headers:?}",
                case.what
            );
        }
        None => assert!(headers.is_empty(), "{}: CORS headers leaked: {headers:?}", case.what),
    }
    drop(server);
}

#[test]
fn cors_headers_go_to_allowed_origins_only() {
    let cases = [
        Case {
            what: "preflight from the allowed origin",
            origins: &[ALLOWED],
            request: |addr| preflight(addr, ALLOWED, "/v1/namespaces/web/next"),
            status: 200,
            allow_origin: Some(ALLOWED),
        },
        Case {
            what: "GET from the allowed origin",
            origins: &[ALLOWED],
            request: |addr| get_from(addr, ALLOWED, "/v1/namespaces/orders/next", None),
            status: 200,
            allow_origin: Some(ALLOWED),
        },
        Case {
            what: "GET with a token from the allowed origin",
            origins: &[ALLOWED],
            request: |addr| get_from(addr, ALLOWED, "/v1/namespaces/web/next", Some("s3cret")),
            status: 200,
            allow_origin: Some(ALLOWED),
        },
        Case {
            what: "an error answer to the allowed origin (so the page can read it)",
            origins: &[ALLOWED],
            request: |addr| get_from(addr, ALLOWED, "/v1/namespaces/web/next", None),
            status: 401,
            allow_origin: Some(ALLOWED),
        },
        Case {
            what: "preflight from another origin",
            origins: &[ALLOWED],
            request: |addr| preflight(addr, OTHER, "/v1/namespaces/web/next"),
            status: 200,
            allow_origin: None,
        },
        Case {
            what: "GET from another origin",
            origins: &[ALLOWED],
            request: |addr| get_from(addr, OTHER, "/v1/namespaces/orders/next", None),
            status: 200,
            allow_origin: None,
        },
        Case {
            what: "GET without an Origin",
            origins: &[ALLOWED],
            request: |addr| http::get(addr, "/v1/namespaces/orders/next"),
            status: 200,
            allow_origin: None,
        },
        Case {
            what: "`*`: any origin",
            origins: &["*"],
            request: |addr| get_from(addr, OTHER, "/v1/next", None),
            status: 200,
            allow_origin: Some("*"),
        },
        Case {
            what: "`*`: preflight",
            origins: &["*"],
            request: |addr| preflight(addr, OTHER, "/v1/next"),
            status: 200,
            allow_origin: Some("*"),
        },
        // Negative controls: without `cors_allow_origins`, the same requests get nothing,
        // and a preflight is the 405 it always was.
        Case {
            what: "no CORS configured: GET from the would-be origin",
            origins: &[],
            request: |addr| get_from(addr, ALLOWED, "/v1/namespaces/orders/next", None),
            status: 200,
            allow_origin: None,
        },
        Case {
            what: "no CORS configured: preflight",
            origins: &[],
            request: |addr| preflight(addr, ALLOWED, "/v1/namespaces/orders/next"),
            status: 405,
            allow_origin: None,
        },
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn a_preflight_from_the_allowed_origin_lists_methods_and_headers() {
    let server = start(&[ALLOWED]);
    let response = preflight(server.addr, ALLOWED, "/v1/namespaces/web/batch");
    let methods = response.header("access-control-allow-methods").unwrap_or_default();
    assert!(methods.contains("GET") && methods.contains("POST"), "{methods}");
    let headers = response.header("access-control-allow-headers").unwrap_or_default();
    assert!(headers.contains("authorization"), "{headers}");
    let exposed = get_from(server.addr, ALLOWED, "/v1/next", None);
    let exposed = exposed.header("access-control-expose-headers").unwrap_or_default();
    assert!(exposed.contains("retry-after"), "{exposed}");
}

#[test]
fn origins_that_are_not_origins_are_refused_at_start() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for origins in [
        &["app.example.com"][..],
        &["https://app.example.com/"],
        &["https://app.example.com/path"],
        &["*", "https://app.example.com"],
    ] {
        let started = runtime.block_on(Server::start(
            config(origins),
            Arc::new(MemoryCoordinator::new()),
            clock(0),
        ));
        match started {
            Err(Error::Config(message)) => {
                assert!(message.contains("cors_allow_origins"), "{message}")
            }
            other => panic!("{origins:?} should be refused, got {other:?}"),
        }
    }
}

#[test]
fn the_status_page_is_built_in_and_loads_nothing_from_elsewhere() {
    let server = start(&[]);
    let page = server.get("/").ok();
    assert!(page.header("content-type").unwrap_or_default().starts_with("text/html"));
    let html = page.text();
    assert!(html.contains("/ui/app.js") && html.contains("/ui/app.css"), "{html}");
    for asset in ["/ui/app.js", "/ui/app.css"] {
        let response = server.get(asset).ok();
        let csp = response.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
        let text = response.text();
        assert!(!text.contains("https://") && !text.contains("http://"), "{asset} loads a URL");
    }
    assert!(!html.contains("https://") && !html.contains("http://"), "the page loads a URL");
}

#[test]
fn status_and_layout_json_describe_every_namespace() {
    let server = start(&[]);
    server.get("/v1/namespaces/orders/next").ok();
    let status = server.get("/v1/status").ok().json();
    assert_eq!(status["ready"], true);
    let namespaces = status["namespaces"].as_array().expect("namespaces");
    let names: Vec<_> = namespaces.iter().map(|ns| ns["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["orders", "web"]);
    let orders = &namespaces[0];
    assert_eq!(orders["layout"], "snowflake");
    assert_eq!(orders["source"], "generator");
    assert_eq!(orders["claim"], "held");
    assert_eq!(orders["generator_id"], 0);
    assert_eq!(orders["counters"]["ids_issued"], 1);
    let wall = status["wall_ms"].as_u64().unwrap();
    let mark = orders["mark_ms"].as_u64().unwrap();
    assert!(mark > wall && mark <= wall + 3_000 + 1_000, "mark {mark} vs wall {wall}");
    assert_eq!(namespaces[1]["auth"], true);
    assert!(!status.to_string().contains("s3cret"), "the token leaked: {status}");

    let layout = server.get("/v1/namespaces/web/layout").ok().json();
    assert_eq!(layout["layout"], "js53");
    assert_eq!(layout["bits"], 64);
    let fields: Vec<_> =
        layout["fields"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert!(fields.contains(&"sequence"), "{fields:?}");
    let missing = server.get("/v1/namespaces/nope/layout");
    assert_eq!(missing.status, 404, "{}", missing.text());
}

/// gRPC-web over HTTP/1.1, as a browser sends it: a unary `ListNamespaces` answered with
/// grpc-status 0 in the trailer frame, with the CORS headers for the allowed origin only.
#[test]
fn grpc_web_answers_browsers_of_allowed_origins() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = runtime
        .block_on(Server::start(config(&[ALLOWED]), Arc::new(MemoryCoordinator::new()), clock(0)))
        .expect("start");
    let http_listener = runtime.block_on(idmint_server::bind("127.0.0.1:0")).expect("bind");
    let grpc_listener = runtime.block_on(idmint_server::bind("127.0.0.1:0")).expect("bind");
    let grpc = grpc_listener.local_addr().expect("addr");
    let shutdown = CancellationToken::new();
    let task = runtime.spawn(idmint_server::serve_all(
        Arc::clone(&server),
        http_listener,
        Some(grpc_listener),
        shutdown.clone(),
    ));
    let call = |origin: &str| {
        http::send(
            grpc,
            "POST",
            "/idmint.v1.IdMint/ListNamespaces",
            &[
                ("Origin", origin),
                ("Content-Type", "application/grpc-web+proto"),
                ("X-Grpc-Web", "1"),
            ],
            Some(&[0, 0, 0, 0, 0]),
        )
        .expect("gRPC-web call")
    };
    let allowed = call(ALLOWED);
    assert_eq!(allowed.status, 200, "{}", allowed.text());
    assert_eq!(allowed.header("access-control-allow-origin"), Some(ALLOWED));
    let exposed = allowed.header("access-control-expose-headers").unwrap_or_default();
    assert!(exposed.contains("grpc-status"), "{exposed}");
    let body = allowed.text();
    assert!(body.contains("orders") && body.contains("grpc-status:0"), "{body:?}");
    let other = call(OTHER);
    assert_eq!(other.status, 200);
    assert!(cors_headers(&other).is_empty(), "{:?}", cors_headers(&other));
    let grpc_preflight = http::send(
        grpc,
        "OPTIONS",
        "/idmint.v1.IdMint/Next",
        &[
            ("Origin", ALLOWED),
            ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "content-type,x-grpc-web"),
        ],
        None,
    )
    .expect("preflight");
    assert_eq!(grpc_preflight.header("access-control-allow-origin"), Some(ALLOWED));
    shutdown.cancel();
    runtime.block_on(task).expect("join").expect("serve");
}
