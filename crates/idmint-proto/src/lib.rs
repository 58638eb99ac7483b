//! `idmint-proto`: the contract between `idmint serve` and its clients, as data only.
//!
//! These are the JSON bodies of the HTTP API under `/v1` (and, in `grpc`, the gRPC messages).
//! Both sides depend on this crate, so neither drags the other's dependencies in. IDs travel as
//! strings, so JavaScript never rounds them; [`JsonId::Number`] appears only when a client
//! asks for numbers and the namespace's layout is JavaScript-safe.
//!
//! | method and path | response |
//! | --- | --- |
//! | `GET /v1/namespaces/{ns}/next` | [`NextResponse`] |
//! | `GET /v1/namespaces/{ns}/batch?count=N` | [`BatchResponse`] |
//! | `GET /v1/namespaces/{ns}/decode/{id}` | [`DecodeResponse`] |
//! | `GET /v1/namespaces` | [`NamespacesResponse`] |
//! | `GET /v1/next`, `/v1/batch`, `/v1/decode/{id}` | the same, for the default namespace |
//! | any error | [`ErrorResponse`] with a 4xx or 5xx status |
//!
//! Query parameters: `count` (batch size, 1..=the server's cap), `format` (an idmint text
//! format, default the layout's), `numbers=true` (IDs as JSON numbers; only for JS-safe
//! layouts).
//!
//! The feature `grpc` adds the module `grpc`: the `idmint.v1` gRPC service (`Next`, `Batch`, a
//! server-streaming `Stream`, `Decode`, `ListNamespaces`), generated from
//! `proto/idmint/v1/idmint.proto` without protoc. It is off by default, so JSON-only users
//! build no tonic.

use serde::{Deserialize, Serialize};

#[cfg(feature = "grpc")]
pub mod grpc;

/// The 64-bit IDs of packed big-endian bytes (an `application/octet-stream` batch, or a
/// packed gRPC batch of 8-byte IDs), in order. A trailing partial ID is ignored: callers
/// check the length against the count first.
///
/// # Example
///
/// ```
/// let bytes: Vec<u8> = [5u64, 258].iter().flat_map(|id| id.to_be_bytes()).collect();
/// assert_eq!(idmint_proto::be_u64s(&bytes).collect::<Vec<_>>(), [5, 258]);
/// ```
pub fn be_u64s(bytes: &[u8]) -> impl ExactSizeIterator<Item = u64> + '_ {
    bytes.chunks_exact(8).map(|chunk| {
        let mut id = [0; 8];
        id.copy_from_slice(chunk);
        u64::from_be_bytes(id)
    })
}

/// The 128-bit IDs of packed big-endian bytes (16 per ID), in order; as [`be_u64s`].
///
/// # Example
///
/// ```
/// let bytes = [7u128.to_be_bytes(), u128::MAX.to_be_bytes()].concat();
/// assert_eq!(idmint_proto::be_u128s(&bytes).collect::<Vec<_>>(), [7, u128::MAX]);
/// ```
pub fn be_u128s(bytes: &[u8]) -> impl ExactSizeIterator<Item = u128> + '_ {
    bytes.chunks_exact(16).map(|chunk| {
        let mut id = [0; 16];
        id.copy_from_slice(chunk);
        u128::from_be_bytes(id)
    })
}

/// The name of the namespace a server always has, unless configured otherwise.
pub const DEFAULT_NAMESPACE: &str = "default";

/// An ID in a JSON body: a string by default, a number on request for JS-safe layouts.
///
/// # Example
///
/// ```
/// use idmint_proto::JsonId;
///
/// let text: JsonId = serde_json::from_str("\"1541815728125124608\"").unwrap();
/// assert_eq!(text, JsonId::Text("1541815728125124608".into()));
/// assert_eq!(serde_json::to_string(&JsonId::Number(7)).unwrap(), "7");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum JsonId {
    /// The ID as text in the requested format (the default).
    Text(String),
    /// The ID as a JSON number (`numbers=true`, JS-safe layouts only).
    Number(u64),
}

/// The body of a single-ID response.
///
/// # Example
///
/// ```
/// use idmint_proto::{JsonId, NextResponse};
///
/// let body = NextResponse { namespace: "default".into(), id: JsonId::Text("42".into()) };
/// assert_eq!(serde_json::to_string(&body).unwrap(), r#"{"namespace":"default","id":"42"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextResponse {
    /// The namespace the ID belongs to.
    pub namespace: String,
    /// The ID.
    pub id: JsonId,
}

/// The body of a batch response: IDs in increasing order of issue.
///
/// # Example
///
/// ```
/// use idmint_proto::{BatchResponse, JsonId};
///
/// let body: BatchResponse =
///     serde_json::from_str(r#"{"namespace":"default","ids":["1","2"]}"#).unwrap();
/// assert_eq!(body.ids.len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchResponse {
    /// The namespace the IDs belong to.
    pub namespace: String,
    /// The IDs, as many as were asked for.
    pub ids: Vec<JsonId>,
}

/// One field of a decoded ID: a number, or text (LableOrg's `mode`, HotGuid's `process`).
///
/// # Example
///
/// ```
/// use idmint_proto::FieldJson;
///
/// assert_eq!(serde_json::to_string(&FieldJson::Number(5)).unwrap(), "5");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldJson {
    /// A numeric field.
    Number(u64),
    /// A text field.
    Text(String),
}

/// The body of a decode response.
///
/// # Example
///
/// ```
/// use idmint_proto::{DecodeResponse, FieldJson};
///
/// use idmint_proto::Fields;
///
/// let body = DecodeResponse {
///     layout: "snowflake".into(),
///     id: "4194304".into(),
///     fields: Fields(vec![("timestamp".into(), FieldJson::Number(1))]),
///     time: Some("2010-11-04T01:42:54.658Z".into()),
/// };
/// let text = serde_json::to_string(&body).unwrap();
/// assert!(text.contains(r#""fields":{"timestamp":1}"#));
/// assert_eq!(serde_json::from_str::<DecodeResponse>(&text).unwrap(), body);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecodeResponse {
    /// The namespace's layout.
    pub layout: String,
    /// The ID, in the layout's default text form.
    pub id: String,
    /// The fields, most significant first: a JSON object that keeps this order.
    pub fields: Fields,
    /// When the ID was issued (RFC 3339, UTC), if the layout records time.
    pub time: Option<String>,
}

/// What a server says about one of its namespaces.
///
/// # Example
///
/// ```
/// use idmint_proto::NamespaceInfo;
///
/// let text = r#"{"name":"default","layout":"snowflake","fingerprint":"f","id_bits":64,
///   "js_safe":false,"default_format":"decimal","generator_id":0,"ready":true,
///   "runs_out":"2080-07-10T17:30:30.209Z","ids_per_second":4096000,"generators":1024,
///   "auth":false}"#;
/// let info: NamespaceInfo = serde_json::from_str(text).unwrap();
/// assert_eq!(info.generator_id, Some(0));
/// assert_eq!(info.source, "generator");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceInfo {
    /// The namespace's name.
    pub name: String,
    /// The layout's name.
    pub layout: String,
    /// The layout's fingerprint (name, width, epoch, tick, fields).
    pub fingerprint: String,
    /// 64 or 128.
    pub id_bits: u32,
    /// Whether `numbers=true` is allowed (every ID ≤ 2^53−1).
    pub js_safe: bool,
    /// The text form IDs take by default.
    pub default_format: String,
    /// The generator ID this server holds for the namespace, while it holds one.
    pub generator_id: Option<u64>,
    /// Whether the namespace can issue IDs now.
    pub ready: bool,
    /// When the layout's time field runs out (RFC 3339), if it does.
    pub runs_out: Option<String>,
    /// How many IDs one generator can issue per second.
    pub ids_per_second: u64,
    /// How many generators can run at once.
    pub generators: u64,
    /// Whether requests need a bearer token.
    pub auth: bool,
    /// Where the namespace's IDs come from: `generator` (a generator ID claimed by this
    /// server), `segment` (ranges of a database), `redis` (icicle's script on Redis nodes) or
    /// `counters` (DecimalId's persistent counters). Only `redis` IDs lack an order from one
    /// batch to the next (each node has its own clock). Servers that predate this field omit
    /// it, which reads as `generator`.
    #[serde(default = "generator_source")]
    pub source: String,
    /// The order of the IDs this server issues for the namespace, from one batch to the
    /// next, as the layout, the source and the number of generators say: `increasing` (every
    /// batch above the last), `periodic` (increasing until the time field wraps: `trace-id`),
    /// `sharded` (increasing within a shard, each new one starting low: `decimal-id`),
    /// `k-sorted` (roughly by time: source `redis`, and a namespace
    /// that issues from several generator IDs, where each batch and each generator ID's IDs
    /// still increase) or `unordered`. Servers that predate this field omit it, which reads
    /// as empty: a client then assumes no order.
    #[serde(default)]
    pub order: String,
    /// Every generator ID this server holds for the namespace: more than one with the
    /// namespace setting `generators`. Servers that predate this field omit it.
    #[serde(default)]
    pub generator_ids: Vec<u64>,
    /// The namespace's TypeID prefix (setting `type_prefix`): its IDs are then written
    /// `prefix_...` by default. Empty for none; servers that predate this field omit it.
    #[serde(default)]
    pub type_prefix: String,
}

/// The `source` of a namespace described by a server that does not send one.
fn generator_source() -> String {
    "generator".to_owned()
}

/// The body of `GET /v1/namespaces`.
///
/// # Example
///
/// ```
/// use idmint_proto::NamespacesResponse;
///
/// let body: NamespacesResponse = serde_json::from_str(r#"{"namespaces":[]}"#).unwrap();
/// assert!(body.namespaces.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespacesResponse {
    /// Every namespace, by name.
    pub namespaces: Vec<NamespaceInfo>,
}

/// The body of every error response.
///
/// # Example
///
/// ```
/// use idmint_proto::{ErrorDetail, ErrorResponse};
///
/// let body = ErrorResponse {
///     error: ErrorDetail { code: "unknown_namespace".into(), message: "no namespace `x`".into() },
/// };
/// assert_eq!(
///     serde_json::to_string(&body).unwrap(),
///     r#"{"error":{"code":"unknown_namespace","message":"no namespace `x`"}}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A stable error code and a human-readable message.
///
/// # Example
///
/// ```
/// use idmint_proto::ErrorDetail;
///
/// let detail = ErrorDetail { code: "bad_request".into(), message: "count must be at least 1".into() };
/// assert_eq!(detail.code, "bad_request");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// A stable, machine-readable code (`bad_request`, `unknown_namespace`, `unauthorized`,
    /// `payload_too_large`, `not_ready`, `window_exhausted`, `clock_backward`, ...).
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
}

/// Named field values in order, written as a JSON object whose keys keep that order.
///
/// # Example
///
/// ```
/// use idmint_proto::{FieldJson, Fields};
///
/// let fields: Fields = serde_json::from_str(r#"{"b":1,"a":"x"}"#).unwrap();
/// assert_eq!(fields.0[0].0, "b");
/// assert_eq!(fields.0[1].1, FieldJson::Text("x".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fields(pub Vec<(String, FieldJson)>);

impl Serialize for Fields {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, value) in &self.0 {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> serde::de::Visitor<'de> for FieldsVisitor {
            type Value = Fields;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of field values")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry::<String, FieldJson>()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}
