//! Bad input over HTTP (reliability T24): every malformed request gets the right 4xx with a
//! JSON error body, never a 5xx; random query strings, path segments and bodies never make
//! the server fail or stop answering.

use std::{net::SocketAddr, sync::Arc};

use idmint_coord::{MemoryCoordinator, MemoryStore};
use idmint_core::Layout;
use idmint_server::{Backends, NamespaceConfig, ServerConfig};
use idmint_testkit::{
    TestServer,
    check::{assert_unique, report},
    clock,
    http::{self, Response},
};
use proptest::prelude::*;

const TOKEN: &str = "s3cret-token";

/// The default (snowflake) namespace, one with a token, and one per built-in layout
/// (`l-<layout>`, each from its layout's default source: `l-sequence` from segments,
/// `l-decimal-id` from counters).
fn config() -> ServerConfig {
    let mut namespaces = vec![
        NamespaceConfig::named("default"),
        NamespaceConfig { token: Some(TOKEN.into()), ..NamespaceConfig::named("locked") },
    ];
    for (layout, _) in Layout::builtins() {
        namespaces.push(NamespaceConfig {
            layout: (*layout).to_owned(),
            ..NamespaceConfig::named(&format!("l-{layout}"))
        });
    }
    ServerConfig { namespaces, ..ServerConfig::default() }
}

/// A server over memory stores (claims, segments, counters), serving HTTP on a free port.
fn start() -> TestServer {
    let store = Arc::new(MemoryStore::new());
    let backends = Backends {
        segments: Some(store.clone()),
        counters: Some(store),
        ..Backends::new(Arc::new(MemoryCoordinator::new()))
    };
    TestServer::builder(config()).backends(backends).wall(clock(0)).start().expect("start")
}

/// One malformed request and what it must get.
struct Case {
    what: &'static str,
    request: Vec<u8>,
    status: u16,
    code: &'static str,
}

fn case(what: &'static str, request: Vec<u8>, status: u16, code: &'static str) -> Case {
    Case { what, request, status, code }
}

fn get(target: &str) -> Vec<u8> {
    http::request_bytes("GET", target, &[], None)
}

fn get_with(target: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    http::request_bytes("GET", target, headers, None)
}

fn post_json(target: &str, body: &str) -> Vec<u8> {
    http::request_bytes(
        "POST",
        target,
        &[("Content-Type", "application/json")],
        Some(body.as_bytes()),
    )
}

/// A POST whose body is sent in chunks, so its size is not declared up front.
fn post_chunked(target: &str, size: usize) -> Vec<u8> {
    let mut out = format!(
        "POST {target} HTTP/1.1\r\nHost: idmint.test\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    let mut left = size;
    while left > 0 {
        let chunk = left.min(8192);
        out.extend_from_slice(format!("{chunk:x}\r\n").as_bytes());
        out.extend(std::iter::repeat_n(b' ', chunk));
        out.extend_from_slice(b"\r\n");
        left -= chunk;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// Asserts what every error answer must be: a 4xx (never a 5xx) with a JSON body
/// `{"error": {"code", "message"}}`; returns the code.
fn assert_error_body(response: &Response, context: &str) -> String {
    assert!(response.status < 500, "{context}: {} {}", response.status, response.text());
    assert!(
        response.header("content-type").is_some_and(|t| t.starts_with("application/json")),
        "{context}: not JSON: {} {:?} {}",
        response.status,
        response.headers,
        response.text()
    );
    let json = response.json();
    let error = &json["error"];
    let code = error["code"].as_str().unwrap_or_else(|| panic!("{context}: no code: {json}"));
    let message =
        error["message"].as_str().unwrap_or_else(|| panic!("{context}: no message: {json}"));
    assert!(!message.is_empty(), "{context}: empty message");
    if response.status == 401 {
        assert_eq!(response.header("www-authenticate"), Some("Bearer"), "{context}");
    }
    code.to_owned()
}

/// Sends one case on a new connection and checks status, code and body.
fn check(addr: SocketAddr, case: &Case) {
    let response = http::Connection::open(addr)
        .and_then(|mut c| c.send_raw(&case.request))
        .unwrap_or_else(|e| panic!("{}: no answer: {e}", case.what));
    let code = assert_error_body(&response, case.what);
    assert_eq!(
        (response.status, code.as_str()),
        (case.status, case.code),
        "{}: {}",
        case.what,
        response.text()
    );
}

#[test]
fn malformed_requests_get_the_right_4xx_with_a_json_error() {
    let server = start();
    let big = format!(r#"{{"count": 1, "format": "{}"}}"#, "x".repeat(70_000));
    let cases = [
        case("count 0", get("/v1/batch?count=0"), 400, "bad_request"),
        case("count -1", get("/v1/batch?count=-1"), 400, "bad_request"),
        case("count 2^63", get("/v1/batch?count=9223372036854775808"), 400, "bad_request"),
        case("count 2^64", get("/v1/batch?count=18446744073709551616"), 400, "bad_request"),
        case("count abc", get("/v1/batch?count=abc"), 400, "bad_request"),
        case("count 10^9", get("/v1/batch?count=1000000000"), 400, "bad_request"),
        case("count cap + 1", get("/v1/batch?count=100001"), 400, "bad_request"),
        case("count empty", get("/v1/batch?count="), 400, "bad_request"),
        case("count without =", get("/v1/batch?count"), 400, "bad_request"),
        case("count missing", get("/v1/batch"), 400, "bad_request"),
        case("count 1.5", get("/v1/batch?count=1.5"), 400, "bad_request"),
        case("count +1", get("/v1/batch?count=+1"), 400, "bad_request"),
        case("count 1e3", get("/v1/batch?count=1e3"), 400, "bad_request"),
        case("count percent-encoded", get("/v1/batch?count=%31"), 400, "bad_request"),
        case("count twice", get("/v1/batch?count=1&count=2"), 400, "bad_request"),
        case("unknown parameter", get("/v1/batch?count=1&foo=bar"), 400, "bad_request"),
        case("count on next", get("/v1/next?count=1"), 400, "bad_request"),
        case("numbers on snowflake", get("/v1/next?numbers=true"), 400, "bad_request"),
        case(
            "numbers on a snowflake batch",
            get("/v1/batch?count=2&numbers=true"),
            400,
            "bad_request",
        ),
        case("numbers not a bool", get("/v1/next?numbers=yes"), 400, "bad_request"),
        case("unknown format", get("/v1/next?format=klingon"), 400, "bad_request"),
        case("uuid for 64 bits", get("/v1/next?format=uuid"), 400, "bad_request"),
        case(
            "unknown namespace, batch",
            get("/v1/namespaces/nope/batch?count=1"),
            404,
            "unknown_namespace",
        ),
        case("unknown namespace, next", get("/v1/namespaces/nope/next"), 404, "unknown_namespace"),
        case(
            "namespace in upper case",
            get("/v1/namespaces/DEFAULT/next"),
            404,
            "unknown_namespace",
        ),
        case("body over the limit", post_json("/v1/batch", &big), 413, "payload_too_large"),
        case(
            "chunked body over the limit",
            post_chunked("/v1/batch", 70_000),
            413,
            "payload_too_large",
        ),
        case("POST count 0", post_json("/v1/batch", r#"{"count":0}"#), 400, "bad_request"),
        case("POST count -1", post_json("/v1/batch", r#"{"count":-1}"#), 400, "bad_request"),
        case("POST count 1.5", post_json("/v1/batch", r#"{"count":1.5}"#), 400, "bad_request"),
        case("POST count text", post_json("/v1/batch", r#"{"count":"5"}"#), 400, "bad_request"),
        case(
            "POST count 2^64",
            post_json("/v1/batch", r#"{"count":18446744073709551616}"#),
            400,
            "bad_request",
        ),
        case(
            "POST count 10^9",
            post_json("/v1/batch", r#"{"count":1000000000}"#),
            400,
            "bad_request",
        ),
        case(
            "POST count twice",
            post_json("/v1/batch", r#"{"count":1,"count":2}"#),
            400,
            "bad_request",
        ),
        case(
            "POST unknown field",
            post_json("/v1/batch", r#"{"count":1,"extra":true}"#),
            400,
            "bad_request",
        ),
        case(
            "POST numbers on snowflake",
            post_json("/v1/batch", r#"{"count":2,"numbers":true}"#),
            400,
            "bad_request",
        ),
        case("POST not JSON", post_json("/v1/batch", "count=1"), 400, "bad_request"),
        case("POST empty body", post_json("/v1/batch", ""), 400, "bad_request"),
        case(
            "POST without a content type",
            http::request_bytes("POST", "/v1/batch", &[], Some(br#"{"count":1}"#)),
            400,
            "bad_request",
        ),
        case(
            "POST unknown namespace",
            post_json("/v1/namespaces/nope/batch", r#"{"count":1}"#),
            404,
            "unknown_namespace",
        ),
        case(
            "wrong token",
            get_with("/v1/namespaces/locked/next", &[("Authorization", "Bearer wrong")]),
            403,
            "forbidden",
        ),
        case(
            "token with a suffix",
            get_with(
                "/v1/namespaces/locked/batch?count=1",
                &[("Authorization", &format!("Bearer {TOKEN}x"))],
            ),
            403,
            "forbidden",
        ),
        case("missing token", get("/v1/namespaces/locked/next"), 401, "unauthorized"),
        case(
            "basic instead of bearer",
            get_with("/v1/namespaces/locked/next", &[("Authorization", "Basic dXNlcjpwYXNz")]),
            401,
            "unauthorized",
        ),
        case(
            "missing token on POST",
            post_json("/v1/namespaces/locked/batch", r#"{"count":1}"#),
            401,
            "unauthorized",
        ),
        case("missing token on decode", get("/v1/namespaces/locked/decode/1"), 401, "unauthorized"),
        case("decode text", get("/v1/decode/abc"), 400, "invalid_id"),
        case("decode zero", get("/v1/decode/0"), 400, "invalid_id"),
        case("decode bit 63", get("/v1/decode/18446744073709551615"), 400, "invalid_id"),
        case("decode too long", get("/v1/decode/99999999999999999999999"), 400, "invalid_id"),
        case("decode negative", get("/v1/decode/-5"), 400, "invalid_id"),
        case("decode unknown format", get("/v1/decode/1?format=klingon"), 400, "bad_request"),
        case("decode extra parameter", get("/v1/decode/1?count=1"), 400, "bad_request"),
        case("decode wrong width", get("/v1/namespaces/l-hot-guid/decode/12"), 400, "invalid_id"),
        case("unknown route", get("/nope"), 404, "not_found"),
        case("unknown page asset", get("/ui/nope.js"), 404, "not_found"),
        case("route prefix", get("/v1"), 404, "not_found"),
        case("route with a trailing slash", get("/v1/next/"), 404, "not_found"),
        case(
            "DELETE batch",
            http::request_bytes("DELETE", "/v1/batch", &[], None),
            405,
            "method_not_allowed",
        ),
        case(
            "PUT next",
            http::request_bytes("PUT", "/v1/next", &[], None),
            405,
            "method_not_allowed",
        ),
        case(
            "POST next",
            http::request_bytes("POST", "/v1/next", &[], Some(b"{}")),
            405,
            "method_not_allowed",
        ),
        case(
            "POST healthz",
            http::request_bytes("POST", "/healthz", &[], None),
            405,
            "method_not_allowed",
        ),
        case("invalid UTF-8 in a namespace", get("/v1/namespaces/%FF/next"), 400, "bad_request"),
        case("invalid UTF-8 in an id", get("/v1/decode/%FF%FE"), 400, "bad_request"),
    ];
    for case in &cases {
        check(server.addr, case);
    }

    // The same server still issues, and the good versions of these requests work.
    let mut ids = server.get("/v1/batch?count=100000").ids();
    assert_eq!(ids.len(), 100_000, "a batch at the cap");
    let posted =
        http::send(server.addr, "POST", "/v1/batch", &[("Content-Type", "application/json")], {
            Some(br#"{"count": 2, "format": "decimal"}"#)
        })
        .expect("POST")
        .ids();
    ids.extend(posted);
    let authorized = http::send(
        server.addr,
        "GET",
        "/v1/namespaces/locked/next",
        &[("Authorization", &format!("Bearer {TOKEN}"))],
        None,
    )
    .expect("GET with the token");
    // Another namespace: its own generator 0, so its IDs are not compared with default's.
    assert!(authorized.id() > 0);
    let number = server.get("/v1/namespaces/l-js53/next?numbers=true").ok().json();
    assert!(number["id"].is_u64(), "numbers=true on js53 gives a JSON number: {number}");
    let decoded = server.get(&format!("/v1/decode/{}", ids[0])).ok().json();
    assert_eq!(decoded["layout"], "snowflake");
    report("malformed_requests", assert_unique(&ids));
    server.stop().expect("ordered shutdown");
}

/// Characters that may stand in a request target (no space, `#`, quote, braces, `|`, `\`,
/// `^`, backtick or `<>`), and pieces that mean something to the routes.
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9._~!$'()*+,;:@-]{0,10}",
        "[0-9]{1,25}",
        "%[0-9A-Fa-f]{2}",
        Just("%".to_owned()),
        Just("%FF".to_owned()),
        Just("%00".to_owned()),
        Just("%2F".to_owned()),
        Just("..".to_owned()),
        Just("count".to_owned()),
        Just("format".to_owned()),
        Just("numbers".to_owned()),
        Just("true".to_owned()),
        Just("-1".to_owned()),
        Just("=".to_owned()),
        Just("&".to_owned()),
        Just("?".to_owned()),
        Just("/".to_owned()),
        prop::sample::select(vec!["decimal", "hex", "uuid", "bytes", "base62", "base32", "binary"])
            .prop_map(str::to_owned),
    ]
}

fn text(max_pieces: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..max_pieces).prop_map(|pieces| pieces.concat())
}

/// A namespace: a configured one or random text.
fn namespace() -> impl Strategy<Value = String> {
    let mut names: Vec<String> = vec!["default".into(), "locked".into()];
    names.extend(Layout::builtins().iter().map(|(layout, _)| format!("l-{layout}")));
    prop_oneof![prop::sample::select(names), text(3)]
}

/// A request target over every route shape, with random segments and query strings.
fn target() -> impl Strategy<Value = String> {
    let path = prop_oneof![
        Just("/v1/next".to_owned()),
        Just("/v1/batch".to_owned()),
        text(4).prop_map(|id| format!("/v1/decode/{id}")),
        namespace().prop_map(|ns| format!("/v1/namespaces/{ns}/next")),
        namespace().prop_map(|ns| format!("/v1/namespaces/{ns}/batch")),
        (namespace(), text(4)).prop_map(|(ns, id)| format!("/v1/namespaces/{ns}/decode/{id}")),
        (text(3), text(3)).prop_map(|(a, b)| format!("/{a}/{b}")),
        Just("/readyz".to_owned()),
    ];
    let query = prop_oneof![
        Just(String::new()),
        text(8).prop_map(|q| format!("?{q}")),
        ("[0-9+.e-]{0,22}", prop::sample::select(vec!["", "&numbers=true", "&format=hex"]))
            .prop_map(|(n, rest)| format!("?count={n}{rest}")),
    ];
    (path, query).prop_map(|(path, query)| format!("{path}{query}"))
}

/// A POST body: JSON-ish text around a random count, or random text.
fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9.e+-]{0,25}".prop_map(|n| format!(r#"{{"count":{n}}}"#)),
        ("[0-9]{1,7}", "[a-z0-9]{0,10}")
            .prop_map(|(n, f)| format!(r#"{{"count":{n},"format":"{f}"}}"#)),
        "[ -~]{0,60}",
    ]
}

/// A random request (ASCII, so failures print readably), with a random token header.
fn request() -> impl Strategy<Value = String> {
    let auth = prop::sample::select(vec![None, Some("Bearer wrong"), Some("Bearer s3cret-token")]);
    let method = prop::sample::select(vec!["GET", "GET", "GET", "POST", "DELETE"]);
    (method, target(), auth, body()).prop_map(|(method, target, auth, body)| {
        let mut headers = vec![("Content-Type", "application/json")];
        headers.extend(auth.map(|a| ("Authorization", a)));
        let body = (method == "POST").then_some(body.as_bytes());
        String::from_utf8(http::request_bytes(method, &target, &headers, body)).expect("ASCII")
    })
}

/// Random query strings, path segments, tokens and bodies: every answer is below 500, every
/// error answer has a JSON error body, and the server keeps answering.
#[test]
fn random_requests_never_get_a_5xx_or_stop_the_server() {
    let server = start();
    let addr = server.addr;
    let config = ProptestConfig { cases: 600, failure_persistence: None, ..Default::default() };
    proptest!(config, |(request in request())| {
        let shown = request.as_str();
        let response = http::Connection::open(addr)
            .and_then(|mut c| c.send_raw(request.as_bytes()))
            .unwrap_or_else(|e| panic!("no answer to {shown:?}: {e}"));
        prop_assert!(response.status < 500, "{} {} for {shown:?}", response.status, response.text());
        if response.status >= 400 {
            assert_error_body(&response, shown);
        }
    });
    // Still serving.
    assert_eq!(server.get("/healthz").status, 200);
    assert_eq!(server.get("/readyz").status, 200);
    let ids = server.get("/v1/batch?count=1000").ids();
    report("random_requests", assert_unique(&ids));
    server.stop().expect("ordered shutdown");
}

/// Random ID text in every format, decoded by every layout: a 200 or a 4xx, never a 5xx.
#[test]
fn decoding_random_text_in_any_layout_and_format_never_fails_the_server() {
    let server = start();
    let addr = server.addr;
    let layouts: Vec<String> = Layout::builtins().iter().map(|(l, _)| (*l).to_owned()).collect();
    let formats = idmint_core::Format::NAMES.to_vec();
    let id_text = prop_oneof![
        "[0-9]{1,40}",
        "[0-9a-fA-F]{16}",
        "[0-9a-fA-F]{32}",
        "[01]{1,130}",
        "[0-9A-Za-z]{11}",
        "[0-9A-Za-z]{22}",
        "[0-9A-Z]{13}",
        "[0-9A-Z]{26}",
        "[A-Za-z0-9_-]{11}",
        "[A-Za-z0-9_-]{22}",
        "[A-Za-z0-9+]{10}%3D%3D",
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ];
    let config = ProptestConfig { cases: 800, failure_persistence: None, ..Default::default() };
    let strategy = (prop::sample::select(layouts), prop::sample::select(formats), id_text);
    proptest!(config, |((layout, format, id) in strategy)| {
        let target = format!("/v1/namespaces/l-{layout}/decode/{id}?format={format}");
        let response = http::get(addr, &target);
        prop_assert!(response.status < 500, "{} {} for {target}", response.status, response.text());
        if response.status >= 400 {
            assert_error_body(&response, &target);
        }
    });
    // And every layout's own IDs decode, in their default format.
    let mut seen = std::collections::HashSet::new();
    for (layout, _) in Layout::builtins() {
        let ns = format!("l-{layout}");
        let batch = server.get(&format!("/v1/namespaces/{ns}/batch?count=50")).ok().json();
        for id in batch["ids"].as_array().expect("ids") {
            let id = id.as_str().expect("string id");
            let encoded: String = id
                .bytes()
                .map(|b| match b {
                    b'+' => "%2B".to_owned(),
                    b'/' => "%2F".to_owned(),
                    b'=' => "%3D".to_owned(),
                    _ => char::from(b).to_string(),
                })
                .collect();
            let decoded = server.get(&format!("/v1/namespaces/{ns}/decode/{encoded}"));
            assert_eq!(decoded.status, 200, "{ns} {id}: {}", decoded.text());
            assert!(seen.insert(format!("{ns}/{id}")), "duplicate id {id} in {ns}");
        }
    }
    report("decoding_random_text", seen.len());
    server.stop().expect("ordered shutdown");
}
