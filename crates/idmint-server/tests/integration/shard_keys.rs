//! Shard keys per request (`shard_key=K`) of a `hot-guid` namespace, over HTTP and gRPC: the
//! key lands in every ID (`HotGuid::shard_key`, HotGuid's `ExtractShardKey`), bad keys are a
//! clear 400 / INVALID_ARGUMENT, the namespace's `shard_keys` bounds them, and IDs of many
//! keys from one namespace are unique (even with the key left out) and increasing per
//! client, as without keys.

use std::{
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use idmint_coord::MemoryCoordinator;
use idmint_core::HotGuid;
use idmint_proto::grpc::{
    BatchRequest, IdEncoding, IdMintClient, NextRequest, StreamRequest, next_response,
};
use idmint_server::{FieldSetting, NamespaceConfig, ServerConfig, ShardKeys};
use idmint_testkit::{TestServer, clock, http};

/// `default` (snowflake), `guid` (hot-guid, own key 208, keys `0..=1023`), `wide` (hot-guid,
/// every key).
fn config() -> ServerConfig {
    let guid = NamespaceConfig {
        layout: "hot-guid".into(),
        fields: BTreeMap::from([("shard_key".to_owned(), FieldSetting::Number(208))]),
        shard_keys: Some(ShardKeys { first: 0, last: 1023 }),
        ..NamespaceConfig::named("guid")
    };
    let wide = NamespaceConfig { layout: "hot-guid".into(), ..NamespaceConfig::named("wide") };
    ServerConfig {
        namespaces: vec![NamespaceConfig::default(), guid, wide],
        ..ServerConfig::default()
    }
}

fn start() -> TestServer {
    TestServer::builder(config())
        .coordinator(Arc::new(MemoryCoordinator::new()))
        .wall(clock(0))
        .grpc()
        .start()
        .expect("start")
}

/// The HotGuids of a JSON answer (`id` or `ids`, in the "D" form).
fn guids(json: &serde_json::Value) -> Vec<HotGuid> {
    let texts = match json.get("ids") {
        Some(ids) => ids.as_array().expect("ids").clone(),
        None => vec![json["id"].clone()],
    };
    texts.iter().map(|t| t.as_str().expect("a string").parse().expect("a HotGuid")).collect()
}

/// What one request must get: the status, and the shard key of every ID (200) or a piece of
/// the error message (otherwise).
enum Want {
    Keys(u32),
    Refused(u16, &'static str),
}

/// Sends `method target` (with a JSON body for POST) and checks the answer.
fn check(server: &TestServer, method: &str, target: &str, body: Option<&str>, want: Want) {
    let headers: &[(&str, &str)] =
        if body.is_some() { &[("content-type", "application/json")] } else { &[] };
    let response = http::send(server.addr, method, target, headers, body.map(str::as_bytes))
        .unwrap_or_else(|e| panic!("{method} {target}: {e}"));
    match want {
        Want::Keys(key) => {
            assert_eq!(response.status, 200, "{method} {target}: {}", response.text());
            let ids = guids(&response.json());
            assert!(!ids.is_empty(), "{method} {target}: no ids");
            for id in ids {
                assert_eq!(id.shard_key(), key, "{method} {target}: {id}");
            }
        }
        Want::Refused(status, message) => {
            assert_eq!(response.status, status, "{method} {target}: {}", response.text());
            let json = response.json();
            let error =
                json["error"]["message"].as_str().unwrap_or_else(|| panic!("no error: {json}"));
            assert!(error.contains(message), "{method} {target}: {error:?} lacks {message:?}");
        }
    }
}

#[test]
fn http_takes_a_shard_key_per_request_and_refuses_bad_ones() {
    use Want::{Keys, Refused};
    let server = start();
    let not_u32 = "`shard_key` must be a whole number from 0 to 4294967295";
    let cases: &[(&str, &str, Option<&str>, Want)] = &[
        ("GET", "/v1/namespaces/guid/next?shard_key=1023", None, Keys(1023)),
        ("GET", "/v1/namespaces/guid/next?shard_key=0", None, Keys(0)),
        ("GET", "/v1/namespaces/guid/next", None, Keys(208)),
        ("GET", "/v1/namespaces/guid/batch?count=50&shard_key=7", None, Keys(7)),
        ("GET", "/v1/namespaces/guid/batch?shard_key=0007&count=3", None, Keys(7)),
        ("GET", "/v1/namespaces/guid/batch?count=3", None, Keys(208)),
        ("POST", "/v1/namespaces/guid/batch", Some(r#"{"count":3,"shard_key":9}"#), Keys(9)),
        ("GET", "/v1/namespaces/wide/next?shard_key=4294967295", None, Keys(u32::MAX)),
        ("GET", "/v1/namespaces/wide/next", None, Keys(0)),
        // The namespace's own range.
        (
            "GET",
            "/v1/namespaces/guid/next?shard_key=1024",
            None,
            Refused(400, "outside the shard keys of namespace `guid` (0..=1023)"),
        ),
        (
            "GET",
            "/v1/namespaces/guid/batch?count=2&shard_key=4294967295",
            None,
            Refused(400, "0..=1023"),
        ),
        (
            "POST",
            "/v1/namespaces/guid/batch",
            Some(r#"{"count":3,"shard_key":5000}"#),
            Refused(400, "outside the shard keys"),
        ),
        // Not a u32: refused, never masked.
        ("GET", "/v1/namespaces/wide/next?shard_key=4294967296", None, Refused(400, not_u32)),
        (
            "GET",
            "/v1/namespaces/wide/next?shard_key=18446744073709551616",
            None,
            Refused(400, not_u32),
        ),
        ("GET", "/v1/namespaces/wide/next?shard_key=-1", None, Refused(400, not_u32)),
        ("GET", "/v1/namespaces/wide/next?shard_key=abc", None, Refused(400, not_u32)),
        ("GET", "/v1/namespaces/wide/next?shard_key=0x10", None, Refused(400, not_u32)),
        ("GET", "/v1/namespaces/wide/next?shard_key=", None, Refused(400, not_u32)),
        ("GET", "/v1/namespaces/wide/batch?count=2&shard_key=1.5", None, Refused(400, not_u32)),
        (
            "GET",
            "/v1/namespaces/wide/next?shard_key=1&shard_key=2",
            None,
            Refused(400, "given twice"),
        ),
        (
            "POST",
            "/v1/namespaces/wide/batch",
            Some(r#"{"count":3,"shard_key":4294967296}"#),
            Refused(400, not_u32),
        ),
        (
            "POST",
            "/v1/namespaces/wide/batch",
            Some(r#"{"count":3,"shard_key":-1}"#),
            Refused(400, not_u32),
        ),
        (
            "POST",
            "/v1/namespaces/wide/batch",
            Some(r#"{"count":3,"shard_key":"7"}"#),
            Refused(400, "shard_key"),
        ),
        (
            "POST",
            "/v1/namespaces/wide/batch",
            Some(r#"{"count":3,"shard_key":null}"#),
            Refused(400, "shard_key"),
        ),
        // Layouts without a shard key.
        (
            "GET",
            "/v1/namespaces/default/next?shard_key=1",
            None,
            Refused(
                400,
                "`shard_key` applies to hot-guid namespaces only; namespace `default` uses layout `snowflake`",
            ),
        ),
        ("GET", "/v1/next?shard_key=1", None, Refused(400, "hot-guid namespaces only")),
        (
            "GET",
            "/v1/namespaces/default/batch?count=2&shard_key=1",
            None,
            Refused(400, "hot-guid namespaces only"),
        ),
        (
            "POST",
            "/v1/namespaces/default/batch",
            Some(r#"{"count":3,"shard_key":1}"#),
            Refused(400, "hot-guid namespaces only"),
        ),
        // Decode takes no shard key.
        (
            "GET",
            "/v1/namespaces/guid/decode/61ff0f80-0000-0000-0000-0001d0000000?shard_key=1",
            None,
            Refused(400, "unknown parameter `shard_key`"),
        ),
    ];
    for (method, target, body, want) in cases {
        let want = match want {
            Keys(k) => Keys(*k),
            Refused(s, m) => Refused(*s, m),
        };
        check(&server, method, target, *body, want);
    }
    // Binary batches carry the key too: 16 big-endian bytes per ID, the `u128` of a HotGuid.
    let response = http::send(
        server.addr,
        "GET",
        "/v1/namespaces/wide/batch?count=4&shard_key=3000000000",
        &[("accept", "application/octet-stream")],
        None,
    )
    .expect("binary batch");
    assert_eq!(response.status, 200, "{}", response.text());
    let keys: Vec<u32> = response
        .body
        .chunks_exact(16)
        .map(|c| HotGuid::from_u128(u128::from_be_bytes(c.try_into().expect("16"))).shard_key())
        .collect();
    assert_eq!(keys, [3_000_000_000; 4]);
    server.stop().expect("stop");
}

/// `format=sqlguid-bytes`: HotGuid's `ToSqlGuid` bytes as hex, for 128-bit namespaces only,
/// read back by `decode` and by the core into the same IDs and keys.
#[test]
fn sqlguid_bytes_is_a_text_form() {
    use idmint_core::Format;
    let server = start();
    let json = server
        .get("/v1/namespaces/wide/batch?count=5&shard_key=7&format=sqlguid-bytes")
        .ok()
        .json();
    let texts: Vec<String> = json["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|t| t.as_str().expect("text").to_owned())
        .collect();
    assert_eq!(texts.len(), 5);
    let guids: Vec<HotGuid> = texts
        .iter()
        .map(|t| HotGuid::parse_text(t, Format::SqlGuidBytes).expect("sqlguid bytes"))
        .collect();
    assert!(guids.iter().all(|g| g.shard_key() == 7));
    assert!(guids.windows(2).all(|w| w[0] < w[1]));
    for (text, guid) in texts.iter().zip(&guids) {
        assert_eq!(text.len(), 32);
        assert_eq!(
            *text,
            guid.to_sql_guid_bytes().iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        let decoded = server
            .get(&format!("/v1/namespaces/wide/decode/{text}?format=sqlguid-bytes"))
            .ok()
            .json();
        assert_eq!(decoded["id"], guid.to_string());
        assert_eq!(decoded["fields"]["shard_key"], 7);
    }
    let refused = server.get("/v1/namespaces/default/next?format=sqlguid-bytes");
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.text().contains("format `sqlguid-bytes` needs a 128-bit layout"),
        "{}",
        refused.text()
    );
    server.stop().expect("stop");
}

/// 4 clients, 250 requests each of 1,000 IDs, each request its own key of 1,000: one
/// namespace, one generator. No duplicate, none with the key left out, every key read back,
/// and each client's IDs increasing across its requests.
#[test]
fn a_million_ids_over_a_thousand_keys_from_four_clients() {
    let server = start();
    let addr = server.addr;
    let runs: Vec<Vec<(u32, HotGuid)>> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..4u32)
            .map(|client| {
                scope.spawn(move || {
                    let mut run = Vec::with_capacity(250_000);
                    for i in 0..250u32 {
                        let key = i * 4 + client;
                        let target =
                            format!("/v1/namespaces/wide/batch?count=1000&shard_key={key}");
                        let ids = guids(&http::get(addr, &target).ok().json());
                        assert_eq!(ids.len(), 1000, "{target}");
                        run.extend(ids.into_iter().map(|id| (key, id)));
                    }
                    run
                })
            })
            .collect();
        clients.into_iter().map(|c| c.join().expect("client thread")).collect()
    });
    let (mut seen, mut keyless) = (HashSet::new(), HashSet::new());
    let (mut duplicates, mut keyless_duplicates, mut wrong_keys, mut order_breaks) = (0, 0, 0, 0);
    for run in &runs {
        for (i, &(key, id)) in run.iter().enumerate() {
            duplicates += usize::from(!seen.insert(id));
            keyless_duplicates += usize::from(!keyless.insert(id.as_u128() >> 32));
            wrong_keys += usize::from(id.shard_key() != key);
            order_breaks += usize::from(i > 0 && id <= run[i - 1].1);
        }
    }
    let keys: HashSet<u32> = runs.iter().flatten().map(|&(key, _)| key).collect();
    assert_eq!((seen.len(), keys.len()), (1_000_000, 1_000));
    assert_eq!((duplicates, keyless_duplicates, wrong_keys, order_breaks), (0, 0, 0, 0));
    server.stop().expect("stop");
}

#[test]
fn grpc_takes_a_shard_key_per_request_and_refuses_bad_ones() {
    let server = start();
    let url = format!("http://{}", server.grpc.expect("grpc address"));
    server.runtime().block_on(async {
        let mut client = IdMintClient::connect(url).await.expect("connect");
        let next = |namespace: &str, shard_key: Option<u32>| NextRequest {
            namespace: namespace.into(),
            format: None,
            shard_key,
        };
        let guid_of = |answer: idmint_proto::grpc::NextResponse| match answer.id {
            Some(next_response::Id::U128(bytes)) => HotGuid::from_u128(u128::from_be_bytes(
                bytes.as_slice().try_into().expect("16 bytes"),
            )),
            other => panic!("not a 128-bit id: {other:?}"),
        };
        let keyed = client.next(next("guid", Some(1023))).await.expect("next").into_inner();
        assert_eq!(keyed.text, guid_of(keyed.clone()).to_string());
        assert_eq!(guid_of(keyed).shard_key(), 1023);
        let own = client.next(next("guid", None)).await.expect("next").into_inner();
        assert_eq!(guid_of(own).shard_key(), 208);

        let batch = |encoding: IdEncoding, shard_key| BatchRequest {
            namespace: "wide".into(),
            count: 100,
            encoding: encoding.into(),
            shard_key,
            format: None,
        };
        for encoding in [IdEncoding::Unspecified, IdEncoding::PackedBe] {
            let ids = client.batch(batch(encoding, Some(u32::MAX))).await.expect("batch");
            let keys: HashSet<u32> =
                ids.into_inner().u128s().map(|v| HotGuid::from_u128(v).shard_key()).collect();
            assert_eq!(keys, HashSet::from([u32::MAX]), "{encoding:?}");
        }
        let stream = StreamRequest {
            namespace: "guid".into(),
            batch_size: 10,
            batches: 3,
            shard_key: Some(5),
            ..StreamRequest::default()
        };
        let mut messages = client.stream(stream).await.expect("stream").into_inner();
        let mut streamed = Vec::new();
        while let Some(batch) = messages.message().await.expect("message") {
            streamed.extend(batch.u128s().map(HotGuid::from_u128));
        }
        assert_eq!(streamed.len(), 30);
        assert!(streamed.iter().all(|g| g.shard_key() == 5));
        assert!(streamed.windows(2).all(|w| w[0] < w[1]));

        // INVALID_ARGUMENT, with the message of the HTTP API.
        let refusals = [
            (next("guid", Some(1024)), "outside the shard keys of namespace `guid` (0..=1023)"),
            (next("default", Some(1)), "applies to hot-guid namespaces only"),
            (next("", Some(1)), "namespace `default` uses layout `snowflake`"),
        ];
        for (request, message) in refusals {
            let status = client.next(request).await.expect_err("refused");
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
            assert!(status.message().contains(message), "{status:?}");
        }
        let mut out_of_range = batch(IdEncoding::Unspecified, Some(1024));
        out_of_range.namespace = "guid".into();
        let status = client.batch(out_of_range).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        let stream = StreamRequest {
            namespace: "default".into(),
            batch_size: 10,
            shard_key: Some(1),
            ..StreamRequest::default()
        };
        let status = client.stream(stream).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("hot-guid namespaces only"), "{status:?}");
    });
    server.stop().expect("stop");
}

/// `shard_keys` is refused where it cannot hold: on a layout without a shard key, and when
/// the namespace's own key lies outside it; a bad range does not parse.
#[test]
fn shard_keys_are_checked_when_the_server_starts() {
    let start = |ns: NamespaceConfig| {
        let config = ServerConfig { namespaces: vec![ns], ..ServerConfig::default() };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(idmint_server::Server::start(
            config,
            Arc::new(MemoryCoordinator::new()),
            clock(0),
        ))
    };
    let keys = Some(ShardKeys { first: 1, last: 1023 });
    let cases = [
        (
            NamespaceConfig { shard_keys: keys, ..NamespaceConfig::named("flakes") },
            "namespace `flakes`: shard_keys applies to layout `hot-guid` only, not `snowflake`",
        ),
        (
            NamespaceConfig {
                layout: "hot-guid".into(),
                shard_keys: keys,
                ..NamespaceConfig::named("guid")
            },
            "fields.shard_key, default 0) is 0, outside shard_keys 1..=1023",
        ),
        (
            NamespaceConfig {
                layout: "hot-guid".into(),
                fields: BTreeMap::from([("shard_key".to_owned(), FieldSetting::Number(2000))]),
                shard_keys: keys,
                ..NamespaceConfig::named("guid")
            },
            "is 2000, outside shard_keys 1..=1023",
        ),
    ];
    for (ns, message) in cases {
        let err = start(ns).expect_err(message);
        assert!(err.to_string().contains(message), "{err} lacks {message:?}");
    }
    for bad in ["1023", "0..1024", "5..=4", "0..=4294967296", "-1..=3", " 0..=1", "a..=b"] {
        let json = format!(r#"{{"name":"guid","layout":"hot-guid","shard_keys":"{bad}"}}"#);
        let err = serde_json::from_str::<NamespaceConfig>(&json).expect_err(bad);
        assert!(err.to_string().contains("shard_keys must be `A..=B`"), "{bad}: {err}");
    }
    let json = r#"{"name":"guid","layout":"hot-guid","shard_keys":"0..=4294967295"}"#;
    let ns: NamespaceConfig = serde_json::from_str(json).expect("every key");
    assert_eq!(ns.shard_keys, Some(ShardKeys::ALL));
}
