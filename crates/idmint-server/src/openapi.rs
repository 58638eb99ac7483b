//! The OpenAPI document a server serves at `/openapi.json`: the template in `openapi.json`
//! ([`OPENAPI`]) made exact for the server's configuration, so that no parameter the
//! server refuses is declared valid. Each namespace gets its own paths
//! (`/v1/namespaces/<name>/...`), whose `format` lists only the formats that hold its IDs,
//! whose `numbers` is `false` only unless its layout is JavaScript-safe, whose `count` stops
//! at `max_batch`, whose IDs in JSON answers match the exact pattern of each form it can write
//! (a UUIDv7's version and variant, a ULID's first character, a TypeID's prefix), whose
//! `shard_key` is declared only for a `hot-guid` namespace and within its `shard_keys`, and
//! whose security is the bearer token exactly when it has one; the default routes
//! (`/v1/next`, ...) are made exact for the default namespace.

use idmint_core::{Format, IdForm, IdText};
use serde_json::{Value, json};

use idmint_engine::Namespace;

use crate::Server;

/// The OpenAPI 3.1 document of the HTTP API, as a template: `/openapi.json` serves it made
/// exact for the server's configuration (a path per namespace, each with only the `format`s
/// and `numbers` it takes, `count` up to `max_batch`).
pub const OPENAPI: &str = include_str!("openapi.json");

/// The template paths of one namespace's routes.
const NAMESPACE_PATHS: [&str; 3] = [
    "/v1/namespaces/{namespace}/next",
    "/v1/namespaces/{namespace}/batch",
    "/v1/namespaces/{namespace}/decode/{id}",
];
/// The routes of the default namespace.
const DEFAULT_PATHS: [&str; 3] = ["/v1/next", "/v1/batch", "/v1/decode/{id}"];

/// The document for `server`, as JSON text.
pub(crate) fn document(server: &Server) -> String {
    let mut doc: Value = serde_json::from_str(OPENAPI).unwrap_or_else(|_| json!({}));
    let request_schema = doc["components"]["schemas"]["BatchRequest"].clone();
    let max_batch = server.config().max_batch;
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return doc.to_string();
    };
    let templates: Vec<Value> =
        NAMESPACE_PATHS.iter().map(|p| paths.remove(*p).unwrap_or(Value::Null)).collect();
    for ns in server.namespace_list() {
        for (path, template) in NAMESPACE_PATHS.iter().zip(&templates) {
            let mut item = template.clone();
            exact(&mut item, ns, max_batch, &request_schema);
            // Operation IDs are unique in a document: each namespace's carry its name.
            if let Some(operations) = item.as_object_mut() {
                for operation in operations.values_mut() {
                    if let Some(id) = operation["operationId"].as_str() {
                        operation["operationId"] = json!(format!("{id}_{}", ns.name));
                    }
                }
            }
            paths.insert(path.replace("{namespace}", &ns.name), item);
        }
    }
    if let Some(default) = server.namespace_list().first() {
        for path in DEFAULT_PATHS {
            if let Some(item) = paths.get_mut(path) {
                exact(item, default, max_batch, &request_schema);
            }
        }
    }
    doc.to_string()
}

/// Makes the operations of one path item exact for `ns`.
fn exact(item: &mut Value, ns: &Namespace, max_batch: u64, request_schema: &Value) {
    let Some(operations) = item.as_object_mut() else { return };
    let bits = ns.layout.id_bits();
    let texts: Vec<(&str, IdText)> = IdForm::NAMES
        .iter()
        .filter_map(|name| Some((*name, ns.text(Some(name.parse().ok()?)).ok()?)))
        .collect();
    let formats: Vec<&str> = texts.iter().map(|(name, _)| *name).collect();
    let mut id_schemas: Vec<Value> = texts
        .iter()
        .map(|(name, text)| {
            json!({"title": name, "type": "string", "pattern": format!("^{}$", pattern(ns, text))})
        })
        .collect();
    if ns.layout.is_js_safe() {
        id_schemas.push(json!({"title": "numbers", "type": "integer", "minimum": 1, "maximum": 9_007_199_254_740_991_u64}));
    }
    let id_schema = json!({ "anyOf": id_schemas });
    let numbers = if ns.layout.is_js_safe() {
        json!({"type": "boolean", "default": false})
    } else {
        json!({"type": "boolean", "enum": [false], "description": "Always false: this namespace's IDs do not fit a JavaScript number."})
    };
    let shard_keys = ns.shard_keys();
    for operation in operations.values_mut() {
        if let Some(parameters) = operation.get_mut("parameters").and_then(Value::as_array_mut) {
            parameters.retain(|p| {
                p["name"] != "namespace" && (shard_keys.is_some() || p["name"] != "shard_key")
            });
            for parameter in parameters {
                match parameter["name"].as_str() {
                    Some("format") => parameter["schema"]["enum"] = json!(formats),
                    Some("numbers") => parameter["schema"] = numbers.clone(),
                    Some("count") => parameter["schema"]["maximum"] = json!(max_batch),
                    Some("shard_key") => {
                        if let Some(keys) = shard_keys {
                            parameter["schema"]["minimum"] = json!(keys.first);
                            parameter["schema"]["maximum"] = json!(keys.last);
                        }
                    }
                    _ => {}
                }
            }
        }
        if operation.get("requestBody").is_some() {
            let mut schema = request_schema.clone();
            schema["properties"]["count"]["maximum"] = json!(max_batch);
            schema["properties"]["format"]["enum"] = json!(formats);
            schema["properties"]["numbers"] = numbers.clone();
            match (shard_keys, schema["properties"].as_object_mut()) {
                (Some(keys), _) => {
                    schema["properties"]["shard_key"]["minimum"] = json!(keys.first);
                    schema["properties"]["shard_key"]["maximum"] = json!(keys.last);
                }
                (None, Some(properties)) => {
                    properties.remove("shard_key");
                }
                (None, None) => {}
            }
            operation["requestBody"]["content"]["application/json"]["schema"] = schema;
        }
        // The IDs of JSON answers, in every form the namespace can write.
        if let Some(schema) =
            operation.pointer_mut("/responses/200/content/application~1json/schema")
        {
            let (key, id) = match schema["$ref"].as_str() {
                Some("#/components/schemas/Next") => ("id", id_schema.clone()),
                Some("#/components/schemas/Batch") => {
                    ("ids", json!({"type": "array", "items": id_schema}))
                }
                _ => ("", Value::Null),
            };
            if !key.is_empty() {
                *schema = json!({
                    "type": "object",
                    "required": ["namespace", key],
                    "properties": {"namespace": {"const": ns.name}, key: id},
                });
            }
        }
        // A binary batch's IDs are as wide as the namespace's. (`get_mut`, not indexing,
        // which would add the keys to operations that lack them.)
        if let Some(width) = operation
            .pointer_mut("/responses/200/headers/Idmint-Id-Bytes/schema")
            .and_then(Value::as_object_mut)
        {
            width.insert("enum".into(), json!([bits / 8]));
        }
        if let Some(fields) = operation.as_object_mut() {
            if ns.token().is_some() {
                fields.insert("security".into(), json!([{"bearer": []}]));
            } else {
                fields.remove("security");
            }
        }
    }
}

/// The exact pattern (without anchors) of the IDs `ns` writes in `text`.
fn pattern(ns: &Namespace, text: &IdText) -> String {
    let wide = ns.layout.id_bits() == 128;
    let plain = |format: Format| -> String {
        let (narrow, full) = match format {
            Format::Decimal => ("[0-9]{1,20}", "[0-9]{1,39}"),
            Format::Hex | Format::Bytes => ("[0-9a-f]{16}", "[0-9a-f]{32}"),
            Format::Binary => ("[01]{1,64}", "[01]{1,128}"),
            Format::Base64Le => ("[A-Za-z0-9+/]{11}=", "[A-Za-z0-9+/]{22}=="),
            Format::Base64Url => ("[A-Za-z0-9_-]{11}", "[A-Za-z0-9_-]{22}"),
            Format::Base32 => ("[01][0-9A-HJKMNP-TV-Z]{12}", "[0-7][0-9A-HJKMNP-TV-Z]{25}"),
            Format::Base62 => ("[0-9A-Za-z]{11}", "[0-9A-Za-z]{22}"),
            // The version and variant of a UUIDv7 (RFC 9562) are fixed.
            Format::Uuid if ns.layout.name() == "uuid7" => {
                ("", "[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
            }
            Format::Uuid => ("", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
            _ => ("[^_]+", "[^_]+"),
        };
        (if wide { full } else { narrow }).to_owned()
    };
    let prefix =
        text.prefix().filter(|p| !p.is_empty()).map(|p| format!("{p}_")).unwrap_or_default();
    match text.name() {
        "ulid" => plain(Format::Base32),
        "typeid" if wide => format!("{prefix}[0-7][0-9a-hjkmnp-tv-z]{{25}}"),
        "typeid" => format!("{prefix}{}", plain(ns.layout.default_format())),
        name => plain(name.parse().unwrap_or(Format::Decimal)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use idmint_coord::MemoryCoordinator;
    use idmint_core::SystemClock;

    use idmint_engine::{NamespaceConfig, ServerConfig, ShardKeys};

    use crate::Server;

    #[tokio::test]
    async fn each_namespace_gets_exact_paths() {
        let config = ServerConfig {
            max_batch: 500,
            namespaces: vec![
                NamespaceConfig::named("default"),
                NamespaceConfig {
                    layout: "js53".into(),
                    token: Some("t".into()),
                    ..NamespaceConfig::named("web")
                },
                NamespaceConfig {
                    layout: "hot-guid".into(),
                    shard_keys: Some(ShardKeys { first: 0, last: 1023 }),
                    ..NamespaceConfig::named("guid")
                },
            ],
            ..ServerConfig::default()
        };
        let server =
            Server::start(config, Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock))
                .await
                .unwrap();
        let doc: serde_json::Value = serde_json::from_str(&super::document(&server)).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        assert!(!paths.contains_key("/v1/namespaces/{namespace}/next"));
        let param = |path: &str, name: &str| {
            paths[path]["get"]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .cloned()
                .unwrap()
        };
        assert_eq!(param("/v1/namespaces/default/batch", "count")["schema"]["maximum"], 500);
        // `shard_key`: hot-guid only, within the namespace's `shard_keys`.
        let has = |path: &str, name: &str| {
            paths[path]["get"]["parameters"].as_array().unwrap().iter().any(|p| p["name"] == name)
        };
        for path in
            ["/v1/next", "/v1/batch", "/v1/namespaces/web/next", "/v1/namespaces/default/batch"]
        {
            assert!(!has(path, "shard_key"), "{path}");
        }
        for path in ["/v1/namespaces/guid/next", "/v1/namespaces/guid/batch"] {
            let schema = param(path, "shard_key")["schema"].clone();
            assert_eq!(
                (schema["minimum"].clone(), schema["maximum"].clone()),
                (0.into(), 1023.into())
            );
        }
        let body = |path: &str| {
            paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
                .clone()
        };
        assert_eq!(body("/v1/namespaces/guid/batch")["shard_key"]["maximum"], 1023);
        assert!(body("/v1/batch").get("shard_key").is_none());
        assert_eq!(param("/v1/batch", "numbers")["schema"]["enum"], serde_json::json!([false]));
        assert!(param("/v1/namespaces/web/next", "numbers")["schema"].get("enum").is_none());
        let formats = param("/v1/next", "format")["schema"]["enum"].clone();
        assert!(!formats.as_array().unwrap().contains(&"uuid".into()), "{formats}");
        assert_eq!(
            paths["/v1/namespaces/web/next"]["get"]["security"],
            serde_json::json!([{"bearer": []}])
        );
        assert!(paths["/v1/namespaces/default/next"]["get"].get("security").is_none());
        let body =
            &paths["/v1/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(body["properties"]["count"]["maximum"], 500);
        // Binary batches: the media type, the 406, and the width of each namespace's IDs.
        for (path, method, width) in [
            ("/v1/batch", "get", 8),
            ("/v1/batch", "post", 8),
            ("/v1/namespaces/web/batch", "get", 8),
            ("/v1/namespaces/guid/batch", "get", 16),
            ("/v1/namespaces/guid/batch", "post", 16),
        ] {
            let responses = &paths[path][method]["responses"];
            let ok = &responses["200"];
            assert!(ok["content"]["application/octet-stream"].is_object(), "{path} {method}");
            assert!(ok["content"]["application/json"].is_object(), "{path} {method}");
            assert_eq!(
                ok["headers"]["Idmint-Id-Bytes"]["schema"]["enum"],
                serde_json::json!([width])
            );
            assert!(responses["406"].is_object(), "{path} {method}");
        }
        assert!(
            paths["/v1/next"]["get"]["responses"]["200"]["content"]
                .get("application/octet-stream")
                .is_none()
        );
        server.stop().await.unwrap();
    }
}
