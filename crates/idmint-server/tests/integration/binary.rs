//! Binary batches over HTTP, in process: `Accept: application/octet-stream` on the batch
//! routes answers the IDs as fixed-width big-endian integers (8 or 16 bytes each) with their
//! count and width in headers; JSON stays the default for every `Accept` that ranks it at least
//! as high; an `Accept` that allows neither is 406; errors keep their JSON bodies and statuses;
//! public IDs are applied on the binary path too. A negative control shows that the checks
//! catch little-endian bytes and a wrong count.

use std::sync::Arc;

use idmint_coord::MemoryCoordinator;
use idmint_core::{AnyId, Layout};
use idmint_server::{NamespaceConfig, PublicIdsSettings, ServerConfig};
use idmint_testkit::{TestServer, clock, http};

const TOKEN: &str = "s3cret";
const KEYS: &str = r#"{"method": "ff1", "version_bits": 0, "active": 0,
  "keys": [{"version": 0, "secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}]}"#;
const OCTET: &str = "application/octet-stream";

/// `default` (snowflake), `guid` (hot-guid, 128-bit), and `orders` (public IDs, a token)
/// when a key file is given.
fn config(keys: Option<&str>) -> ServerConfig {
    let mut namespaces = vec![
        NamespaceConfig::default(),
        NamespaceConfig { layout: "hot-guid".into(), ..NamespaceConfig::named("guid") },
    ];
    if let Some(keys) = keys {
        namespaces.push(NamespaceConfig {
            token: Some(TOKEN.into()),
            public_ids: Some(PublicIdsSettings { key_file: keys.to_owned() }),
            ..NamespaceConfig::named("orders")
        });
    }
    ServerConfig { namespaces, max_batch: 10_000, ..ServerConfig::default() }
}

/// What a request must get.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Binary: this many IDs of this many bytes each.
    Binary { width: usize, count: usize },
    /// JSON, as always: this many IDs.
    Json(usize),
    /// A JSON error body with this status and code.
    Error(u16, &'static str),
}

/// Checks a binary answer and returns its IDs, or says what is wrong: the content type, the
/// `Idmint-Count` and `Idmint-Id-Bytes` headers, the body length, strictly increasing IDs
/// (which also makes them distinct), and for a layout with time, IDs of about now (which
/// little-endian bytes would not be).
fn verify_binary(
    response: &http::Response,
    layout: &Layout,
    width: usize,
    count: usize,
) -> Result<Vec<AnyId>, String> {
    if response.status != 200 {
        return Err(format!("status {}: {}", response.status, response.text()));
    }
    if response.header("content-type") != Some(OCTET) {
        return Err(format!("content type {:?}", response.header("content-type")));
    }
    if response.header("idmint-count") != Some(count.to_string().as_str()) {
        return Err(format!("Idmint-Count {:?}, want {count}", response.header("idmint-count")));
    }
    if response.header("idmint-id-bytes") != Some(width.to_string().as_str()) {
        return Err(format!("Idmint-Id-Bytes {:?}", response.header("idmint-id-bytes")));
    }
    if response.body.len() != count * width {
        return Err(format!("{} bytes for {count} ids of {width}", response.body.len()));
    }
    let ids: Vec<AnyId> = response
        .body
        .chunks_exact(width)
        .map(|chunk| match width {
            8 => AnyId::U64(u64::from_be_bytes(chunk.try_into().unwrap())),
            _ => AnyId::U128(u128::from_be_bytes(chunk.try_into().unwrap())),
        })
        .collect();
    if let Some(pair) = ids.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("ids do not increase: {} then {}", pair[0], pair[1]));
    }
    let now_ms = idmint_core::Clock::now_ms(&idmint_core::SystemClock);
    for id in &ids {
        match layout.time_ms(*id, u64::MAX) {
            Ok(Some(ms)) if ms.abs_diff(now_ms) > 60_000 => {
                return Err(format!("id {id} was issued at {ms}, not about {now_ms}"));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("id {id} is not a {} id: {e}", layout.name())),
        }
    }
    Ok(ids)
}

/// One request through the table: sends it, checks it against `want`, and returns the IDs of
/// a binary or JSON answer (widened to `u128`).
fn check(
    server: &TestServer,
    (method, target, accept, body, want): (&str, &str, Option<&str>, Option<&str>, Want),
) -> Vec<u128> {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(accept) = accept {
        headers.push(("accept", accept));
    }
    let response = http::send(server.addr, method, target, &headers, body.map(str::as_bytes))
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"));
    let what = format!("{method} {target} (Accept: {accept:?})");
    let namespace = target.split('/').nth(3).filter(|_| target.contains("/namespaces/"));
    let layout =
        Layout::builtin(if namespace == Some("guid") { "hot-guid" } else { "snowflake" }).unwrap();
    assert!(
        response.header("vary").is_none_or(|v| v.eq_ignore_ascii_case("accept")),
        "{what}: Vary"
    );
    match want {
        Want::Binary { width, count } => verify_binary(&response, &layout, width, count)
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .into_iter()
            .map(u128::from)
            .collect(),
        Want::Json(count) => {
            assert_eq!(response.status, 200, "{what}: {}", response.text());
            assert_eq!(response.header("content-type"), Some("application/json"), "{what}");
            assert_eq!(response.header("idmint-count"), None, "{what}");
            let json = response.json();
            let ids: Vec<u128> = json["ids"]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: no ids in {json}"))
                .iter()
                .map(|id| u128::from(id.as_str().unwrap().parse::<AnyId>().unwrap()))
                .collect();
            assert_eq!(ids.len(), count, "{what}");
            ids
        }
        Want::Error(status, code) => {
            assert_eq!(response.status, status, "{what}: {}", response.text());
            assert_eq!(response.header("content-type"), Some("application/json"), "{what}");
            assert_eq!(response.json()["error"]["code"], code, "{what}");
            Vec::new()
        }
    }
}

#[test]
fn batch_routes_answer_binary_on_request_and_json_otherwise() {
    let server =
        TestServer::start(config(None), Arc::new(MemoryCoordinator::new()), clock(0)).unwrap();
    let octet = Some(OCTET);
    let bin = |width, count| Want::Binary { width, count };
    let count_body = Some(r#"{"count": 700}"#);
    let rows = [
        ("GET", "/v1/batch?count=1000", octet, None, bin(8, 1000)),
        ("GET", "/v1/namespaces/default/batch?count=1", octet, None, bin(8, 1)),
        ("GET", "/v1/namespaces/default/batch?count=10000", octet, None, bin(8, 10_000)),
        ("POST", "/v1/batch", octet, count_body, bin(8, 700)),
        ("POST", "/v1/namespaces/default/batch", octet, count_body, bin(8, 700)),
        (
            "GET",
            "/v1/batch?count=5&format=hex",
            Some("application/octet-stream, */*;q=0.5"),
            None,
            bin(8, 5),
        ),
        ("GET", "/v1/namespaces/guid/batch?count=300", octet, None, bin(16, 300)),
        ("POST", "/v1/namespaces/guid/batch", octet, count_body, bin(16, 700)),
        // JSON as before: no Accept, */*, JSON ranked as high or higher, a browser's Accept.
        ("GET", "/v1/batch?count=10", None, None, Want::Json(10)),
        ("GET", "/v1/batch?count=10", Some("*/*"), None, Want::Json(10)),
        (
            "GET",
            "/v1/batch?count=10",
            Some("application/json, application/octet-stream"),
            None,
            Want::Json(10),
        ),
        (
            "GET",
            "/v1/batch?count=10",
            Some("text/html,application/xhtml+xml,*/*;q=0.8"),
            None,
            Want::Json(10),
        ),
        (
            "POST",
            "/v1/namespaces/guid/batch",
            Some("application/json"),
            count_body,
            Want::Json(700),
        ),
        // Errors: today's statuses and JSON bodies, whatever was asked for.
        ("GET", "/v1/batch?count=10", Some("text/html"), None, Want::Error(406, "not_acceptable")),
        (
            "GET",
            "/v1/batch?count=10",
            Some("application/octet-stream;q=5"),
            None,
            Want::Error(400, "bad_request"),
        ),
        ("GET", "/v1/batch?count=0", octet, None, Want::Error(400, "bad_request")),
        ("GET", "/v1/batch?count=10001", octet, None, Want::Error(400, "bad_request")),
        ("GET", "/v1/batch", octet, None, Want::Error(400, "bad_request")),
        (
            "GET",
            "/v1/namespaces/guid/batch?count=2&numbers=true",
            octet,
            None,
            Want::Error(400, "bad_request"),
        ),
        ("POST", "/v1/batch", octet, Some("[]"), Want::Error(400, "bad_request")),
        (
            "GET",
            "/v1/namespaces/nope/batch?count=1",
            octet,
            None,
            Want::Error(404, "unknown_namespace"),
        ),
    ];
    // Every answer of a namespace is above its earlier answers, binary or JSON.
    let mut last: std::collections::HashMap<&str, u128> = Default::default();
    for row in rows {
        let ids = check(&server, row);
        let namespace = if row.1.contains("guid") { "guid" } else { "default" };
        if let Some(&first) = ids.first() {
            let before = last.insert(namespace, *ids.last().unwrap());
            assert!(before.is_none_or(|b| first > b), "{row:?}: {first} after {before:?}");
        }
    }
    // The 406 is counted under its own status.
    let metrics = server.metrics();
    assert!(metrics.contains(r#"idmint_http_responses_total{code="406"} 1"#), "{metrics}");
    server.stop().unwrap();
}

#[test]
fn binary_batches_carry_public_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(&keys, KEYS).expect("keys");
    let server = TestServer::start(
        config(Some(&keys.to_string_lossy())),
        Arc::new(MemoryCoordinator::new()),
        clock(0),
    )
    .unwrap();
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str()), ("accept", OCTET)];
    let response =
        http::send(server.addr, "GET", "/v1/namespaces/orders/batch?count=300", &headers, None)
            .unwrap();
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("idmint-count"), Some("300"));
    assert_eq!(response.body.len(), 300 * 8);
    let public: Vec<u64> =
        response.body.chunks_exact(8).map(|c| u64::from_be_bytes(c.try_into().unwrap())).collect();
    assert!(public.windows(2).any(|w| w[0] > w[1]), "public ids are not in time order");
    let mut revealed = Vec::new();
    for id in &public {
        let decoded = http::send(
            server.addr,
            "GET",
            &format!("/v1/namespaces/orders/decode/{id}"),
            &headers[..1],
            None,
        )
        .unwrap()
        .ok()
        .json();
        revealed.push(decoded["id"].as_str().expect("id").parse::<u64>().expect("decimal"));
    }
    assert!(revealed.windows(2).all(|w| w[0] < w[1]), "the ids behind them increase");
    assert_ne!(public, revealed, "the binary path handed out the ids themselves");
    // Without the token: 401 and its JSON body, as for JSON batches.
    let anonymous =
        http::send(server.addr, "GET", "/v1/namespaces/orders/batch?count=3", &headers[1..], None)
            .unwrap();
    assert_eq!((anonymous.status, anonymous.header("www-authenticate")), (401, Some("Bearer")));
    assert_eq!(anonymous.json()["error"]["code"], "unauthorized");
    server.stop().unwrap();
}

/// Negative control: the binary checks above fail for the same body read with its bytes in
/// little-endian order, with one ID missing, or with a wrong count header.
#[test]
fn the_binary_checks_catch_little_endian_and_wrong_counts() {
    let server =
        TestServer::start(config(None), Arc::new(MemoryCoordinator::new()), clock(0)).unwrap();
    let layout = Layout::builtin("snowflake").unwrap();
    let response =
        http::send(server.addr, "GET", "/v1/batch?count=100", &[("accept", OCTET)], None).unwrap();
    verify_binary(&response, &layout, 8, 100).expect("the real answer passes");

    let mut little = response.clone();
    for chunk in little.body.chunks_exact_mut(8) {
        chunk.reverse();
    }
    let mut short = response.clone();
    short.body.truncate(99 * 8);
    let mut miscounted = response.clone();
    for (name, value) in &mut miscounted.headers {
        if name == "idmint-count" {
            *value = "101".into();
        }
    }
    for (what, doctored) in
        [("little-endian", little), ("short", short), ("miscounted", miscounted)]
    {
        assert!(verify_binary(&doctored, &layout, 8, 100).is_err(), "{what} passed");
    }
    server.stop().unwrap();
}
