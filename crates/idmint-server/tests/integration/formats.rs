//! Text forms of IDs over both APIs: a `uuid7` namespace with a TypeID prefix (`type_prefix`)
//! writes TypeIDs, `format=uuid|ulid|typeid` on next, batch and decode, a 64-bit namespace with
//! a prefix (`order_<decimal>`), 16-byte binary batches, `/openapi.json`'s patterns, the status
//! page, and every refusal: a form that cannot hold a namespace's IDs, a TypeID of another
//! namespace's prefix (named with both), a bad `type_prefix` at start. Each answer is read back
//! with the core's strict parsers and checked to be canonical (written back identically).

use std::sync::Arc;

use idmint_coord::MemoryCoordinator;
use idmint_core::{AnyId, Format, Layout, Text128, TypePrefix};
use idmint_proto::grpc::{BatchRequest, DecodeRequest, IdEncoding, IdMintClient, NextRequest};
use idmint_server::{NamespaceConfig, Server, ServerConfig};
use idmint_testkit::{TestServer, clock, http};
use serde_json::Value;

/// `plain` (snowflake, the default), `users` (uuid7, prefix `user`), `rows` (uuid7),
/// `orders` (snowflake, prefix `order`).
fn config() -> ServerConfig {
    let uuid7 = |name: &str, prefix: Option<&str>| NamespaceConfig {
        layout: "uuid7".into(),
        type_prefix: prefix.map(str::to_owned),
        ..NamespaceConfig::named(name)
    };
    ServerConfig {
        namespaces: vec![
            NamespaceConfig::named("plain"),
            uuid7("users", Some("user")),
            uuid7("rows", None),
            NamespaceConfig {
                type_prefix: Some("order".into()),
                ..NamespaceConfig::named("orders")
            },
        ],
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

/// What an answer must hold.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// 200, and every ID is a canonical text of this form, of a valid ID of the layout.
    Ids(Form),
    /// 200 from decode, whose `id` is this text.
    Decoded(&'static str),
    /// This status, error code, and a message that contains this text.
    Refused(u16, &'static str, &'static str),
}

/// The text forms the answers are checked against.
#[derive(Debug, Clone, Copy)]
enum Form {
    Uuid,
    Ulid,
    TypeId(&'static str),
    Decimal,
    Prefixed(&'static str),
}

impl Form {
    /// The value of `text` if it is exactly this form's canonical text.
    fn read(self, text: &str) -> Option<AnyId> {
        let (form, value) = match self {
            Form::Uuid => (Text128::Uuid, Text128::Uuid.parse(text).ok()?),
            Form::Ulid => (Text128::Ulid, Text128::Ulid.parse(text).ok()?),
            Form::TypeId(prefix) => {
                let form = Text128::TypeId(TypePrefix::new(prefix).ok()?);
                let value = form.parse(text).ok()?;
                (form, value)
            }
            Form::Decimal => {
                let value = Format::Decimal.parse_u64(text).ok()?;
                return (value.to_string() == text).then_some(AnyId::U64(value));
            }
            Form::Prefixed(prefix) => {
                let rest = text.strip_prefix(prefix)?.strip_prefix('_')?;
                return Form::Decimal.read(rest);
            }
        };
        (form.write(value) == text).then_some(AnyId::U128(value))
    }
}

/// Checks one answer: `what` names the case, `layout` is the namespace's.
fn check(what: &str, layout: &str, response: &http::Response, want: Want) {
    let body = response.text();
    match want {
        Want::Ids(form) => {
            assert_eq!(response.status, 200, "{what}: {body}");
            let json = response.json();
            let ids: Vec<&Value> = match (&json["id"], &json["ids"]) {
                (Value::Null, Value::Array(ids)) => ids.iter().collect(),
                (id, _) => vec![id],
            };
            assert!(!ids.is_empty(), "{what}: no ids in {body}");
            let layout = Layout::builtin(layout).unwrap();
            let mut last = None;
            for id in ids {
                let text = id.as_str().unwrap_or_else(|| panic!("{what}: {id} is not a string"));
                let value = form
                    .read(text)
                    .unwrap_or_else(|| panic!("{what}: `{text}` is not a canonical {form:?}"));
                layout.decode(value).unwrap_or_else(|e| panic!("{what}: `{text}`: {e}"));
                assert!(last < Some(value), "{what}: ids do not increase at `{text}`");
                last = Some(value);
            }
        }
        Want::Decoded(id) => {
            assert_eq!(response.status, 200, "{what}: {body}");
            assert_eq!(response.json()["id"], id, "{what}: {body}");
        }
        Want::Refused(status, code, message) => {
            assert_eq!(response.status, status, "{what}: {body}");
            let json = response.json();
            assert_eq!(json["error"]["code"], code, "{what}: {body}");
            let text = json["error"]["message"].as_str().unwrap_or_default();
            assert!(text.contains(message), "{what}: `{text}` lacks `{message}`");
        }
    }
}

#[test]
fn http_writes_and_reads_every_form_and_refuses_the_rest() {
    let server = start();
    let get = |target: &str| server.get(target);
    // One ID of each namespace, in every form the cases need.
    let user_id = get("/v1/namespaces/users/next").ok().json()["id"].as_str().unwrap().to_owned();
    let user = Text128::TypeId(TypePrefix::new("user").unwrap()).parse(&user_id).unwrap();
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let user_typeid = leak(user_id.clone());
    let user_uuid = leak(Text128::Uuid.write(user));
    let user_ulid = leak(Text128::Ulid.write(user));
    let bare = leak(Text128::TypeId(TypePrefix::default()).write(user));
    let as_order = leak(format!("order_{bare}"));
    let order_id =
        leak(get("/v1/namespaces/orders/next").ok().json()["id"].as_str().unwrap().into());
    let order_number = order_id.strip_prefix("order_").unwrap();
    let decode =
        |ns: &str, id: &str, query: &str| get(&format!("/v1/namespaces/{ns}/decode/{id}{query}"));
    let post = |ns: &str, body: &str| {
        http::send(
            server.addr,
            "POST",
            &format!("/v1/namespaces/{ns}/batch"),
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
        .unwrap()
    };

    let cases: Vec<(&str, &str, http::Response, Want)> = vec![
        // A prefixed uuid7 namespace: TypeIDs by default, the bare forms when asked for.
        ("users next", "uuid7", get("/v1/namespaces/users/next"), Want::Ids(Form::TypeId("user"))),
        (
            "users typeid",
            "uuid7",
            get("/v1/namespaces/users/next?format=typeid"),
            Want::Ids(Form::TypeId("user")),
        ),
        (
            "users uuid",
            "uuid7",
            get("/v1/namespaces/users/next?format=uuid"),
            Want::Ids(Form::Uuid),
        ),
        (
            "users ulid",
            "uuid7",
            get("/v1/namespaces/users/next?format=ulid"),
            Want::Ids(Form::Ulid),
        ),
        (
            "users batch",
            "uuid7",
            get("/v1/namespaces/users/batch?count=50"),
            Want::Ids(Form::TypeId("user")),
        ),
        (
            "users batch ulid",
            "uuid7",
            get("/v1/namespaces/users/batch?count=50&format=ulid"),
            Want::Ids(Form::Ulid),
        ),
        (
            "users POST batch",
            "uuid7",
            post("users", r#"{"count":5,"format":"uuid"}"#),
            Want::Ids(Form::Uuid),
        ),
        // Without a prefix: the UUID by default; a TypeID is its suffix alone.
        ("rows next", "uuid7", get("/v1/namespaces/rows/next"), Want::Ids(Form::Uuid)),
        (
            "rows typeid",
            "uuid7",
            get("/v1/namespaces/rows/next?format=typeid"),
            Want::Ids(Form::TypeId("")),
        ),
        // A prefixed 64-bit namespace: `order_` and the layout's decimal.
        (
            "orders next",
            "snowflake",
            get("/v1/namespaces/orders/next"),
            Want::Ids(Form::Prefixed("order")),
        ),
        (
            "orders typeid",
            "snowflake",
            get("/v1/namespaces/orders/batch?count=5&format=typeid"),
            Want::Ids(Form::Prefixed("order")),
        ),
        (
            "orders decimal",
            "snowflake",
            get("/v1/namespaces/orders/next?format=decimal"),
            Want::Ids(Form::Decimal),
        ),
        ("plain next", "snowflake", get("/v1/next"), Want::Ids(Form::Decimal)),
        // Forms that cannot hold a namespace's IDs are refused, never answered otherwise.
        (
            "ulid on 64-bit",
            "",
            get("/v1/next?format=ulid"),
            Want::Refused(
                400,
                "bad_request",
                "format `ulid` needs a 128-bit layout; `snowflake` ids have 64 bits",
            ),
        ),
        (
            "typeid on 64-bit without prefix",
            "",
            get("/v1/batch?count=2&format=typeid"),
            Want::Refused(
                400,
                "bad_request",
                "format `typeid` needs a 128-bit layout or a type prefix",
            ),
        ),
        (
            "uuid on prefixed 64-bit",
            "",
            get("/v1/namespaces/orders/next?format=uuid"),
            Want::Refused(400, "bad_request", "format `uuid` needs a 128-bit layout"),
        ),
        (
            "ulid on 64-bit POST",
            "",
            post("plain", r#"{"count":2,"format":"ulid"}"#),
            Want::Refused(400, "bad_request", "format `ulid` needs"),
        ),
        (
            "unknown form",
            "",
            get("/v1/namespaces/users/next?format=guid"),
            Want::Refused(400, "bad_request", "unknown format `guid` (expected one of: decimal"),
        ),
        (
            "ulid on 64-bit binary",
            "",
            http::send(
                server.addr,
                "GET",
                "/v1/batch?count=2&format=ulid",
                &[("Accept", "application/octet-stream")],
                None,
            )
            .unwrap(),
            Want::Refused(400, "bad_request", "format `ulid` needs"),
        ),
        // Decode reads every form, and answers with the namespace's own.
        ("decode typeid", "", decode("users", user_typeid, ""), Want::Decoded(user_typeid)),
        ("decode uuid", "", decode("users", user_uuid, "?format=uuid"), Want::Decoded(user_typeid)),
        ("decode ulid", "", decode("users", user_ulid, "?format=ulid"), Want::Decoded(user_typeid)),
        (
            "decode lower-case ulid",
            "",
            decode("users", &user_ulid.to_lowercase(), "?format=ulid"),
            Want::Decoded(user_typeid),
        ),
        (
            "decode rows typeid",
            "",
            decode("rows", bare, "?format=typeid"),
            Want::Decoded(user_uuid),
        ),
        ("decode order", "", decode("orders", order_id, ""), Want::Decoded(order_id)),
        (
            "decode order as decimal",
            "",
            decode("orders", order_number, "?format=decimal"),
            Want::Decoded(order_id),
        ),
        // The prefix check: another namespace's prefix, or none, is refused naming both.
        (
            "order id where a user id belongs",
            "",
            decode("users", as_order, ""),
            Want::Refused(
                400,
                "type_prefix_mismatch",
                "TypeID prefix `order` where `user` was expected",
            ),
        ),
        (
            "user id without its prefix",
            "",
            decode("users", bare, ""),
            Want::Refused(
                400,
                "type_prefix_mismatch",
                "TypeID prefix none where `user` was expected",
            ),
        ),
        (
            "user id where an order id belongs",
            "",
            decode("orders", &format!("user_{order_number}"), ""),
            Want::Refused(
                400,
                "type_prefix_mismatch",
                "TypeID prefix `user` where `order` was expected",
            ),
        ),
        (
            "order number without its prefix",
            "",
            decode("orders", order_number, ""),
            Want::Refused(
                400,
                "type_prefix_mismatch",
                "TypeID prefix none where `order` was expected",
            ),
        ),
        (
            "prefixed id in an unprefixed namespace",
            "",
            decode("rows", user_typeid, "?format=typeid"),
            Want::Refused(
                400,
                "type_prefix_mismatch",
                "TypeID prefix `user` where none was expected",
            ),
        ),
        // Bad text of each form is the client's error, never a 5xx.
        (
            "typeid upper case",
            "",
            decode("users", &user_typeid.to_uppercase(), ""),
            Want::Refused(400, "invalid_id", "invalid TypeID"),
        ),
        (
            "typeid above 128 bits",
            "",
            decode("users", "user_8zzzzzzzzzzzzzzzzzzzzzzzzz", ""),
            Want::Refused(400, "invalid_id", "more than 128 bits"),
        ),
        (
            "typeid too short",
            "",
            decode("users", "user_01h455vb4pex5vsknk084sn02", ""),
            Want::Refused(400, "invalid_id", "25 characters"),
        ),
        (
            "uuid7 of another version",
            "",
            decode("users", "01890a5d-ac96-474b-bcce-b302099a8057", "?format=uuid"),
            Want::Refused(400, "invalid_id", "uuid7"),
        ),
        (
            "ulid for a 64-bit decode",
            "",
            decode("plain", "01H455VB4PEX5VSKNK084SN02Q", "?format=ulid"),
            Want::Refused(400, "bad_request", "format `ulid` needs"),
        ),
    ];
    for (what, layout, response, want) in &cases {
        check(what, layout, response, *want);
    }

    // Binary batches of a 128-bit namespace: 16 big-endian bytes per ID, the UUID's bytes,
    // whatever text form is named (it is checked, and shapes only JSON).
    let octet = [("Accept", "application/octet-stream")];
    for query in ["count=64", "count=64&format=typeid", "count=64&format=ulid"] {
        let target = format!("/v1/namespaces/users/batch?{query}");
        let response = http::send(server.addr, "GET", &target, &octet, None).unwrap().ok();
        assert_eq!(response.header("idmint-id-bytes"), Some("16"), "{query}");
        assert_eq!(response.header("idmint-count"), Some("64"), "{query}");
        assert_eq!(response.body.len(), 64 * 16, "{query}");
        let layout = Layout::builtin("uuid7").unwrap();
        let ids: Vec<u128> = response
            .body
            .chunks_exact(16)
            .map(|b| u128::from_be_bytes(b.try_into().unwrap()))
            .collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1], "{query}: binary ids do not increase");
        }
        for id in &ids {
            layout.decode(AnyId::U128(*id)).unwrap_or_else(|e| panic!("{query}: {e}"));
            assert!(*id > user, "{query}: an id below one issued before");
        }
    }

    // The namespace list and the status page name each namespace's form and prefix.
    let list = get("/v1/namespaces").ok().json();
    let info = |name: &str| {
        list["namespaces"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap().clone()
    };
    assert_eq!(
        (info("users")["default_format"].clone(), info("users")["type_prefix"].clone()),
        ("typeid".into(), "user".into())
    );
    assert_eq!(
        (info("rows")["default_format"].clone(), info("rows")["type_prefix"].clone()),
        ("uuid".into(), "".into())
    );
    assert_eq!(
        (info("orders")["default_format"].clone(), info("orders")["type_prefix"].clone()),
        ("typeid".into(), "order".into())
    );
    let status = get("/v1/status").ok().json();
    let users =
        status["namespaces"].as_array().unwrap().iter().find(|n| n["name"] == "users").unwrap();
    assert_eq!(
        (users["id_bits"].clone(), users["type_prefix"].clone()),
        (128.into(), "user".into())
    );
    get("/v1/namespaces/users/layout").ok();
    get("/").ok();
}

/// `/openapi.json` lists only the forms each namespace can write, and the exact pattern of
/// each in its answers.
#[test]
fn openapi_has_each_namespaces_forms_and_patterns() {
    let server = start();
    let doc = server.get("/openapi.json").ok().json();
    let forms = |path: &str| -> Vec<String> {
        let parameters = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let format = parameters.iter().find(|p| p["name"] == "format").unwrap();
        format["schema"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect()
    };
    let patterns = |path: &str| -> Vec<(String, String)> {
        let schema =
            &doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"];
        schema["properties"]["id"]["anyOf"]
            .as_array()
            .unwrap_or_else(|| panic!("{path}: no id schemas in {schema}"))
            .iter()
            .map(|s| {
                (
                    s["title"].as_str().unwrap().to_owned(),
                    s["pattern"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let check = |path: &str, form: &str, want: Option<&str>| {
        let got = patterns(path).into_iter().find(|(f, _)| f == form).map(|(_, p)| p);
        assert_eq!(got.as_deref(), want, "{path} {form}");
        assert_eq!(forms(path).iter().any(|f| f == form), want.is_some(), "{path} {form}");
    };
    let uuid7 = "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$";
    check("/v1/namespaces/users/next", "typeid", Some("^user_[0-7][0-9a-hjkmnp-tv-z]{25}$"));
    check("/v1/namespaces/users/next", "uuid", Some(uuid7));
    check("/v1/namespaces/users/next", "ulid", Some("^[0-7][0-9A-HJKMNP-TV-Z]{25}$"));
    check("/v1/namespaces/rows/next", "typeid", Some("^[0-7][0-9a-hjkmnp-tv-z]{25}$"));
    check("/v1/namespaces/orders/next", "typeid", Some("^order_[0-9]{1,20}$"));
    check("/v1/namespaces/orders/next", "ulid", None);
    check("/v1/namespaces/plain/next", "typeid", None);
    check("/v1/namespaces/plain/next", "uuid", None);
    check("/v1/next", "decimal", Some("^[0-9]{1,20}$"));
}

/// A `type_prefix` that is not a TypeID prefix stops the server at start, naming the rule.
#[test]
fn bad_type_prefixes_are_refused_at_start() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let check = |prefix: &str, want: &str| {
        let config = ServerConfig {
            namespaces: vec![NamespaceConfig {
                layout: "uuid7".into(),
                type_prefix: Some(prefix.into()),
                ..NamespaceConfig::named("users")
            }],
            ..ServerConfig::default()
        };
        let result =
            runtime.block_on(Server::start(config, Arc::new(MemoryCoordinator::new()), clock(0)));
        let err = result.err().unwrap_or_else(|| panic!("type_prefix {prefix:?} was taken"));
        assert!(err.to_string().contains(want), "{prefix:?}: {err}");
    };
    check(
        "User",
        "namespace `users`: type_prefix: invalid TypeID: the prefix `User` has `U` at character 1",
    );
    check("_user", "starts or ends with `_`");
    check("user_", "starts or ends with `_`");
    check("us3r", "has `3` at character 3");
    check(&"a".repeat(64), "at most 63");
    check("", "type_prefix is empty; leave it out for no prefix");
}

/// The same forms and refusals over gRPC: `format` on Next, Batch (text in `texts`) and
/// Decode, INVALID_ARGUMENT where a form does not apply or a prefix is another namespace's.
#[test]
fn grpc_takes_the_same_forms() {
    let server = start();
    let url = format!("http://{}", server.grpc.expect("grpc"));
    server.runtime().block_on(async move {
        let mut client = IdMintClient::connect(url).await.expect("connect");
        let next = |ns: &str, format: Option<&str>| NextRequest {
            namespace: ns.into(),
            format: format.map(Into::into),
            shard_key: None,
        };
        let text = client.next(next("users", None)).await.unwrap().into_inner().text;
        let user = Form::TypeId("user").read(&text).unwrap_or_else(|| panic!("`{text}`"));
        let ulid = client.next(next("users", Some("ulid"))).await.unwrap().into_inner().text;
        assert!(Form::Ulid.read(&ulid).is_some_and(|id| id > user), "`{ulid}`");
        let order = client.next(next("orders", None)).await.unwrap().into_inner().text;
        assert!(Form::Prefixed("order").read(&order).is_some(), "`{order}`");
        let batch = |ns: &str, format: Option<&str>, encoding: IdEncoding| BatchRequest {
            namespace: ns.into(),
            count: 20,
            encoding: encoding.into(),
            format: format.map(Into::into),
            shard_key: None,
        };
        let texts = client
            .batch(batch("users", Some("typeid"), IdEncoding::Unspecified))
            .await
            .unwrap()
            .into_inner();
        assert!(texts.ids128.is_empty() && texts.texts.len() == 20, "{texts:?}");
        let values: Vec<AnyId> =
            texts.texts.iter().map(|t| Form::TypeId("user").read(t).unwrap()).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]) && values[0] > user);
        let binary =
            client.batch(batch("users", None, IdEncoding::Unspecified)).await.unwrap().into_inner();
        assert_eq!((binary.ids128.len(), binary.texts.len()), (20 * 16, 0));
        let decoded = client
            .decode(DecodeRequest { namespace: "users".into(), id: text.clone(), format: None })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((decoded.layout.as_str(), decoded.id.as_str()), ("uuid7", text.as_str()));

        let refused = [
            (
                "ulid on 64-bit",
                client.next(next("plain", Some("ulid"))).await.err(),
                "format `ulid` needs a 128-bit layout",
            ),
            (
                "typeid on 64-bit",
                client.batch(batch("plain", Some("typeid"), IdEncoding::Unspecified)).await.err(),
                "needs a 128-bit layout or a type prefix",
            ),
            (
                "text and packed",
                client.batch(batch("users", Some("uuid"), IdEncoding::PackedBe)).await.err(),
                "give one",
            ),
            (
                "unknown form",
                client.next(next("users", Some("guid"))).await.err(),
                "unknown format `guid`",
            ),
            (
                "another prefix",
                client
                    .decode(DecodeRequest {
                        namespace: "users".into(),
                        id: format!("order_{}", &text["user_".len()..]),
                        format: None,
                    })
                    .await
                    .err(),
                "TypeID prefix `order` where `user` was expected",
            ),
            (
                "another prefix on 64-bit",
                client
                    .decode(DecodeRequest {
                        namespace: "orders".into(),
                        id: text.clone(),
                        format: None,
                    })
                    .await
                    .err(),
                "TypeID prefix `user` where `order` was expected",
            ),
        ];
        for (what, status, message) in refused {
            let status = status.unwrap_or_else(|| panic!("{what}: answered"));
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{what}: {status:?}");
            assert!(status.message().contains(message), "{what}: {}", status.message());
        }
    });
}
