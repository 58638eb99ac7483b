//! The HTTP API: routes, strict parameter parsing, bearer tokens, JSON bodies, and binary
//! batches (`Accept: application/octet-stream`, [`batch_media`]). Handlers
//! are thin: parse, call the namespace, write the answer.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{
        DefaultBodyLimit, FromRequestParts, MatchedPath, Path, RawQuery, Request, State,
        rejection::JsonRejection,
    },
    http::{HeaderMap, HeaderValue, StatusCode, header, request::Parts},
    middleware::{self, Next},
    response::{IntoResponse, Response},
    routing::get,
};
use idmint_core::{AnyId, FieldValue, Format, IdForm, IdText};
use idmint_proto::{DecodeResponse, FieldJson, Fields, NamespacesResponse};
use serde::{Deserialize, de::DeserializeOwned};

use idmint_engine::{BeBytes, IdSink as _, Namespace};

use crate::{Error, Server, auth};

/// The media type of binary batches: IDs as fixed-width big-endian unsigned integers.
pub(crate) const OCTET_STREAM: &str = "application/octet-stream";
/// The header of a binary batch that says how many IDs it holds.
pub(crate) const COUNT_HEADER: &str = "idmint-count";
/// The header of a binary batch that says how many bytes each ID takes (8 or 16).
pub(crate) const ID_BYTES_HEADER: &str = "idmint-id-bytes";

/// The router of the HTTP API, over one server.
pub(crate) fn router(server: Arc<Server>) -> Router {
    let limit = server.config().max_body_bytes;
    let cors = crate::cors::cors(&server.config().cors_allow_origins, false);
    let document: Arc<str> = crate::openapi::document(&server).into();
    let router = Router::new()
        .merge(crate::web::routes())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(move || async move { json_body(document.to_string()) }))
        .route("/v1/namespaces", get(namespaces))
        .route("/v1/namespaces/{namespace}/next", get(next))
        .route("/v1/namespaces/{namespace}/batch", get(batch).post(batch_post))
        .route("/v1/namespaces/{namespace}/decode/{id}", get(decode))
        .route("/v1/next", get(next_default))
        .route("/v1/batch", get(batch_default).post(batch_post_default))
        .route("/v1/decode/{id}", get(decode_default))
        .fallback(
            |request: Request| async move { Error::NotFound(request.uri().path().to_owned()) },
        )
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(Arc::clone(&server), guard))
        .with_state(server);
    match cors {
        Some(cors) => {
            router.layer(cors).layer(middleware::map_response(|response: Response| async {
                crate::cors::only_for_allowed(response)
            }))
        }
        None => router,
    }
}

/// Refuses declared bodies over the limit, counts responses by status, times each request by
/// its route template, and writes the access log.
async fn guard(State(server): State<Arc<Server>>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let limit = server.config().max_body_bytes;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let method = request.method().clone();
    // The template, never the raw path: its values are few. Unrouted paths share one label.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| UNMATCHED.to_owned(), |path| path.as_str().to_owned());
    let namespace =
        server.config().access_log.then(|| namespace_of(&server, &route, request.uri().path()));
    let response = match declared {
        Some(length) if length > limit as u64 => Error::PayloadTooLarge { limit }.into_response(),
        _ => next.run(request).await,
    };
    let took = started.elapsed();
    let status = response.status().as_u16();
    server.http_metrics().record(status);
    server.http_metrics().latency.observe(method.as_str(), &route, took);
    if let Some(namespace) = namespace {
        let issued = response.extensions().get::<Issued>().map_or(0, |issued| issued.0);
        tracing::info!(
            target: "idmint::access",
            method = %method,
            route = %route,
            namespace = %namespace,
            status,
            ids = issued,
            latency_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            "request"
        );
    }
    response
}

/// The route label of a request that matched no route.
const UNMATCHED: &str = "unmatched";

/// How many IDs a response carries, for the access log.
#[derive(Debug, Clone, Copy)]
struct Issued(usize);

/// The namespace a request names, for the access log: its `{namespace}` segment (at most 64
/// characters), the default namespace for `/v1/next` and friends, else empty.
fn namespace_of(server: &Server, route: &str, path: &str) -> String {
    if route.starts_with("/v1/namespaces/{namespace}") {
        path.split('/').nth(3).unwrap_or("").chars().take(64).collect()
    } else if ["/v1/next", "/v1/batch", "/v1/decode/{id}"].contains(&route) {
        server.default_namespace().to_owned()
    } else {
        String::new()
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(error = %self, "request failed");
        }
        let mut response = (status, Json(self.body())).into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after_secs() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Path parameters, refused with the JSON error of [`Error::BadRequest`] when they cannot be
/// read (a percent-encoded segment that is not UTF-8), instead of axum's plain-text rejection.
struct PathParams<T>(T);

impl<S, T> FromRequestParts<S> for PathParams<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Error> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(PathParams(value)),
            Err(rejection) => Err(Error::BadRequest(rejection.body_text())),
        }
    }
}

/// The query parameters the ID routes accept; anything else is refused.
#[derive(Debug, Default)]
pub(crate) struct Params {
    count: Option<u64>,
    format: Option<IdForm>,
    numbers: bool,
    /// The shard key of a `hot-guid` namespace's IDs, for this call.
    shard_key: Option<u32>,
}

impl Params {
    /// Parses a query string strictly: known keys only, each at most once, plain values.
    pub(crate) fn parse(
        query: Option<&str>,
        allowed: &[&str],
        max_batch: u64,
    ) -> Result<Self, Error> {
        let mut params = Params::default();
        let mut seen = Vec::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if !allowed.contains(&key) {
                return Err(Error::BadRequest(format!(
                    "unknown parameter `{}` (this route takes: {})",
                    key.chars().take(64).collect::<String>(),
                    allowed.join(", ")
                )));
            }
            if seen.contains(&key) {
                return Err(Error::BadRequest(format!("parameter `{key}` is given twice")));
            }
            seen.push(key);
            match key {
                "count" => params.count = Some(parse_count(value, max_batch)?),
                "format" => {
                    params.format = Some(
                        value
                            .parse()
                            .map_err(|e: idmint_core::Error| Error::BadRequest(e.to_string()))?,
                    )
                }
                "shard_key" => params.shard_key = Some(parse_shard_key(value)?),
                "numbers" => {
                    params.numbers = match value {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(Error::BadRequest(
                                "`numbers` must be `true` or `false`".into(),
                            ));
                        }
                    }
                }
                _ => unreachable!("every allowed key is handled"),
            }
        }
        Ok(params)
    }
}

/// A shard key: digits only, a whole number that fits a `u32`; never masked. Whether the
/// namespace takes it is checked where IDs are issued (`Namespace::check_shard_key`).
fn parse_shard_key(text: &str) -> Result<u32, Error> {
    let digits = !text.is_empty() && text.len() <= 10 && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse::<u32>().ok()).flatten().ok_or_else(|| {
        Error::BadRequest(format!(
            "`shard_key` must be a whole number from 0 to {}, not `{}`",
            u32::MAX,
            text.chars().take(32).collect::<String>()
        ))
    })
}

/// A batch size: digits only, a whole number that fits a `u64`. Its range (1..=max) is
/// checked where IDs are issued (`Server::issue_into`), once for every API.
fn parse_count(text: &str, max_batch: u64) -> Result<u64, Error> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(idmint_engine::count_error(max_batch).into());
    }
    text.parse::<u64>().map_err(|_| idmint_engine::count_error(max_batch).into())
}

/// The namespace, after checking its bearer token in the `Authorization` header
/// ([`auth::authorized`]).
fn authorized<'a>(
    server: &'a Server,
    name: &str,
    headers: &HeaderMap,
) -> Result<&'a Arc<Namespace>, Error> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    auth::authorized(server, name, authorization)
}

/// The text form and number mode of a response, checked against the namespace's layout and
/// TypeID prefix ([`Namespace::text`]).
fn output(namespace: &Namespace, params: &Params) -> Result<(IdText, bool), Error> {
    let text = namespace.text(params.format)?;
    if params.numbers && !namespace.layout.is_js_safe() {
        return Err(Error::BadRequest(format!(
            "namespace `{}` uses layout `{}`, whose ids do not fit a JavaScript number; ask for strings",
            namespace.name,
            namespace.layout.name()
        )));
    }
    Ok((text, params.numbers))
}

/// Writes one ID as a JSON value: a string in `text`, or a number.
fn push_json_id(out: &mut String, id: AnyId, text: &IdText, numbers: bool) -> Result<(), Error> {
    if numbers {
        id.write(Format::Decimal, out)?;
    } else {
        out.push('"');
        // Every form writes ASCII letters, digits, `-`, `_`, `=`, `+` or `/`: nothing to escape.
        text.write_into(id, out)?;
        out.push('"');
    }
    Ok(())
}

fn json_body(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], body)
        .into_response()
}

async fn healthz() -> Response {
    json_body(r#"{"status":"ok"}"#.to_owned())
}

async fn readyz(State(server): State<Arc<Server>>) -> Response {
    let ready = server.is_ready();
    let body = serde_json::json!({
        "ready": ready,
        "namespaces": server.namespace_list().iter().map(|ns| (ns.name.clone(), serde_json::Value::Bool(ns.is_ready(server.clocks())))).collect::<serde_json::Map<_, _>>(),
    });
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, Json(body)).into_response()
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], server.render_metrics()).into_response()
}

async fn namespaces(State(server): State<Arc<Server>>) -> Json<NamespacesResponse> {
    Json(NamespacesResponse { namespaces: server.namespace_infos() })
}

async fn next(
    State(server): State<Arc<Server>>,
    PathParams(namespace): PathParams<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let ns = authorized(&server, &namespace, &headers)?;
    let params = Params::parse(
        query.as_deref(),
        &["format", "numbers", "shard_key"],
        server.config().max_batch,
    )?;
    let (text, numbers) = output(ns, &params)?;
    let mut ids: Vec<AnyId> = Vec::with_capacity(1);
    server.issue_keyed_into(ns, 1, params.shard_key, &mut ids).await?;
    let id = ids.pop().ok_or_else(|| Error::NotReady(ns.name.clone()))?;
    let mut body = String::with_capacity(80);
    body.push_str(r#"{"namespace":""#);
    body.push_str(&ns.name);
    body.push_str(r#"","id":"#);
    push_json_id(&mut body, id, &text, numbers)?;
    body.push('}');
    let mut response = json_body(body);
    response.extensions_mut().insert(Issued(1));
    Ok(response)
}

async fn batch(
    State(server): State<Arc<Server>>,
    PathParams(namespace): PathParams<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let ns = authorized(&server, &namespace, &headers)?;
    let params = Params::parse(
        query.as_deref(),
        &["count", "format", "numbers", "shard_key"],
        server.config().max_batch,
    )?;
    let count = params.count.ok_or_else(|| Error::BadRequest("`count` is required".into()))?;
    let media = batch_media(&headers)?;
    batch_response(&server, ns, count, &params, media).await
}

/// What a batch route answers in, by the request's `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchMedia {
    /// `application/json`: the default, as always.
    Json,
    /// `application/octet-stream`: the IDs packed big-endian, 8 or 16 bytes each.
    OctetStream,
}

/// Content negotiation of the batch routes (RFC 9110 section 12.5.1): each of the two media
/// types gets the quality of the most specific range of `Accept` that matches it (exact,
/// then `application/*`, then `*/*`); octet-stream is chosen only when its quality is
/// higher than JSON's, so no `Accept`, an empty one, `*/*`, or any list that ranks JSON at
/// least as high gets JSON as before. When both qualities are 0 (say `Accept: text/html`)
/// nothing the route can send is acceptable: [`Error::NotAcceptable`] (406) rather than a
/// body the client said it cannot read. A `q` that is not a number from 0 to 1 with at most
/// three decimals is [`Error::BadRequest`].
pub(crate) fn batch_media(headers: &HeaderMap) -> Result<BatchMedia, Error> {
    // (specificity, quality in thousandths) of the best-matching range, per media type.
    let mut json: Option<(u8, u16)> = None;
    let mut octet: Option<(u8, u16)> = None;
    let mut ranges = 0;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let Some((kind, sub)) = media.split_once('/') else { continue };
            ranges += 1;
            let mut q = 1000;
            for parameter in parts {
                if let Some((key, value)) = parameter.split_once('=')
                    && key.trim().eq_ignore_ascii_case("q")
                {
                    q = parse_quality(value.trim())?;
                }
            }
            for (target, slot) in [("application/json", &mut json), (OCTET_STREAM, &mut octet)] {
                let specificity = if media == target {
                    3
                } else if kind == "application" && sub == "*" {
                    2
                } else if kind == "*" && sub == "*" {
                    1
                } else {
                    continue;
                };
                if slot.is_none_or(|(best, _)| specificity > best) {
                    *slot = Some((specificity, q));
                }
            }
        }
    }
    if ranges == 0 {
        return Ok(BatchMedia::Json);
    }
    let (json, octet) = (json.map_or(0, |m| m.1), octet.map_or(0, |m| m.1));
    if json == 0 && octet == 0 {
        return Err(Error::NotAcceptable("application/json or application/octet-stream"));
    }
    Ok(if octet > json { BatchMedia::OctetStream } else { BatchMedia::Json })
}

/// A quality value (`q=0.5`) in thousandths: `0` to `1`, at most three decimals.
fn parse_quality(text: &str) -> Result<u16, Error> {
    let bad = || {
        Error::BadRequest(format!(
            "bad quality value `q={}` in Accept",
            text.chars().take(16).collect::<String>()
        ))
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let thousandths = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
    match whole {
        "0" => Ok(thousandths),
        "1" if thousandths == 0 => Ok(1000),
        _ => Err(bad()),
    }
}

/// The JSON body of `POST .../batch`: an object with `count` and optionally `format` (a
/// string) and `numbers` (a boolean), each at most once, nothing else. `null` for an optional
/// field is refused (leave it out instead); so is an array, which serde would take as the
/// fields in order ([`BatchObject`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchBody {
    #[serde(deserialize_with = "whole_number")]
    count: u64,
    #[serde(default, deserialize_with = "some_string")]
    format: Option<String>,
    #[serde(default)]
    numbers: bool,
    #[serde(default, deserialize_with = "some_shard_key")]
    shard_key: Option<u32>,
}

/// A whole number as JSON Schema defines one: `316` or `316.0` (a number whose fraction is
/// zero), not `1.5`, not negative, not a string.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let number = serde_json::Number::deserialize(d)?;
    if let Some(n) = number.as_u64() {
        return Ok(n);
    }
    match number.as_f64() {
        // Exactly representable whole numbers only (below 2^53).
        Some(f) if f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(&f) => Ok(f as u64),
        _ => Err(serde::de::Error::custom(format!("`count` must be a whole number, not {number}"))),
    }
}

/// A shard key that must be there if its key is: a whole number that fits a `u32`; `null`,
/// a string or a number out of range is refused, never masked.
fn some_shard_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let number = serde_json::Number::deserialize(d)?;
    number.as_u64().and_then(|n| u32::try_from(n).ok()).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`shard_key` must be a whole number from 0 to {}, not {number}",
            u32::MAX
        ))
    })
}

/// A string that must be there if its key is: `null` is refused.
fn some_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// A [`BatchBody`] read only from a JSON object.
#[derive(Debug)]
pub(crate) struct BatchObject(BatchBody);

impl<'de> Deserialize<'de> for BatchObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = BatchObject;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<BatchObject, A::Error> {
                BatchBody::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(BatchObject)
            }
        }
        d.deserialize_map(Object)
    }
}

impl BatchBody {
    /// The body from its bytes, as the route reads it (for the fuzz targets).
    pub(crate) fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        serde_json::from_slice::<BatchObject>(bytes)
            .map(|object| object.0)
            .map_err(|e| Error::BadRequest(format!("Failed to deserialize the JSON body: {e}")))
    }
}

async fn batch_post(
    State(server): State<Arc<Server>>,
    PathParams(namespace): PathParams<String>,
    headers: HeaderMap,
    body: Result<Json<BatchObject>, JsonRejection>,
) -> Result<Response, Error> {
    let ns = authorized(&server, &namespace, &headers)?;
    let Json(BatchObject(body)) = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            Error::PayloadTooLarge { limit: server.config().max_body_bytes }
        }
        _ => Error::BadRequest(rejection.body_text()),
    })?;
    let format = body
        .format
        .map(|f| f.parse::<IdForm>().map_err(|e| Error::BadRequest(e.to_string())))
        .transpose()?;
    let params = Params {
        count: Some(body.count),
        format,
        numbers: body.numbers,
        shard_key: body.shard_key,
    };
    let media = batch_media(&headers)?;
    batch_response(&server, ns, body.count, &params, media).await
}

/// A batch in the negotiated media type. `format` and `numbers` are checked either way, and
/// shape only JSON: binary IDs are raw values, the 16 bytes of a 128-bit ID being those of its
/// UUID, ULID and TypeID alike, without a prefix (DESIGN.md, "What do `format` and
/// `type_prefix` mean across the APIs, and why a prefix on 64-bit IDs?").
async fn batch_response(
    server: &Server,
    ns: &Namespace,
    count: u64,
    params: &Params,
    media: BatchMedia,
) -> Result<Response, Error> {
    let (text, numbers) = output(ns, params)?;
    if media == BatchMedia::OctetStream {
        let mut ids = BeBytes::new(ns.layout.id_bits());
        server.issue_keyed_into(ns, count, params.shard_key, &mut ids).await?;
        let issued = Issued(ids.len());
        let width = ids.width();
        let mut response = (
            [
                (header::CONTENT_TYPE, OCTET_STREAM),
                (header::CACHE_CONTROL, "no-store"),
                (header::VARY, "accept"),
            ],
            ids.bytes,
        )
            .into_response();
        let headers = response.headers_mut();
        headers.insert(COUNT_HEADER, HeaderValue::from(issued.0));
        headers.insert(ID_BYTES_HEADER, HeaderValue::from(width));
        response.extensions_mut().insert(issued);
        return Ok(response);
    }
    let mut ids = Vec::new();
    server.issue_keyed_into(ns, count, params.shard_key, &mut ids).await?;
    let issued = Issued(ids.len());
    // Written by hand: a 100,000-ID body is built in one buffer, without a String per ID.
    let mut body =
        String::with_capacity(32 + ids.len() * if ns.layout.id_bits() == 128 { 40 } else { 24 });
    body.push_str(r#"{"namespace":""#);
    body.push_str(&ns.name);
    body.push_str(r#"","ids":["#);
    for (i, id) in ids.into_iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        push_json_id(&mut body, id, &text, numbers)?;
    }
    body.push_str("]}");
    let mut response = json_body(body);
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("accept"));
    response.extensions_mut().insert(issued);
    Ok(response)
}

async fn decode(
    State(server): State<Arc<Server>>,
    PathParams((namespace, id)): PathParams<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Json<DecodeResponse>, Error> {
    let ns = authorized(&server, &namespace, &headers)?;
    let params = Params::parse(query.as_deref(), &["format"], server.config().max_batch)?;
    let layout = &ns.layout;
    let parsed = ns.read_id(&id, &ns.text(params.format)?)?;
    let fields = layout
        .decode(parsed)?
        .into_iter()
        .map(|(name, value)| {
            let value = match value {
                FieldValue::Number(n) => FieldJson::Number(n),
                FieldValue::Text(t) => FieldJson::Text(t),
            };
            (name, value)
        })
        .collect();
    let time =
        layout.time_ms(parsed, server.clocks().wall_ms())?.map(idmint_core::format_rfc3339_ms);
    Ok(Json(DecodeResponse {
        layout: layout.name().to_owned(),
        id: ns.text(None)?.write(parsed)?,
        fields: Fields(fields),
        time,
    }))
}

async fn next_default(
    state: State<Arc<Server>>,
    query: RawQuery,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let name = state.default_namespace().to_owned();
    next(state, PathParams(name), query, headers).await
}

async fn batch_default(
    state: State<Arc<Server>>,
    query: RawQuery,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let name = state.default_namespace().to_owned();
    batch(state, PathParams(name), query, headers).await
}

async fn batch_post_default(
    state: State<Arc<Server>>,
    headers: HeaderMap,
    body: Result<Json<BatchObject>, JsonRejection>,
) -> Result<Response, Error> {
    let name = state.default_namespace().to_owned();
    batch_post(state, PathParams(name), headers, body).await
}

async fn decode_default(
    state: State<Arc<Server>>,
    PathParams(id): PathParams<String>,
    query: RawQuery,
    headers: HeaderMap,
) -> Result<Json<DecodeResponse>, Error> {
    let name = state.default_namespace().to_owned();
    decode(state, PathParams((name, id)), query, headers).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Digits only, a `u32`, never masked.
    #[test]
    fn shard_keys_are_parsed_strictly() {
        let check = |text: &str, want: Option<u32>| {
            assert_eq!(parse_shard_key(text).ok(), want, "{text:?}");
        };
        check("0", Some(0));
        check("1023", Some(1023));
        check("4294967295", Some(u32::MAX));
        check("0004294967295", None);
        check("4294967296", None);
        check("99999999999", None);
        check("-1", None);
        check("+1", None);
        check("1e3", None);
        check("0x10", None);
        check(" 1", None);
        check("", None);
        let err = parse_shard_key("4294967296").unwrap_err();
        assert_eq!(err.status(), 400);
        assert_eq!(
            err.to_string(),
            "`shard_key` must be a whole number from 0 to 4294967295, not `4294967296`"
        );
    }

    /// Digits only, a `u64`; the range is `Server::issue_into`'s (`issuer::check_count`).
    #[test]
    fn counts_are_parsed_strictly() {
        let check = |text: &str, want: Option<u64>| {
            assert_eq!(parse_count(text, 100_000).ok(), want, "{text:?}")
        };
        check("1", Some(1));
        check("100000", Some(100_000));
        check("0", Some(0));
        check("100001", Some(100_001));
        check("9223372036854775808", Some(9_223_372_036_854_775_808));
        check("18446744073709551616", None);
        check("-1", None);
        check("+1", None);
        check("abc", None);
        check("1e3", None);
        check(" 1", None);
        check("", None);
    }

    #[test]
    fn batch_routes_negotiate_json_or_octet_stream() {
        use BatchMedia::{Json, OctetStream};
        let check = |accept: &[&str], want: Result<BatchMedia, u16>| {
            let mut headers = HeaderMap::new();
            for value in accept {
                headers.append(header::ACCEPT, HeaderValue::from_str(value).unwrap());
            }
            assert_eq!(batch_media(&headers).map_err(|e| e.status()), want, "{accept:?}");
        };
        check(&[], Ok(Json));
        check(&[""], Ok(Json));
        check(&["*/*"], Ok(Json));
        check(&["application/json"], Ok(Json));
        check(&["application/*"], Ok(Json));
        check(&["text/html,application/xhtml+xml,*/*;q=0.8"], Ok(Json));
        check(&["application/octet-stream"], Ok(OctetStream));
        check(&["Application/Octet-Stream"], Ok(OctetStream));
        check(&["application/octet-stream, */*;q=0.1"], Ok(OctetStream));
        check(&["application/octet-stream", "application/json;q=0.5"], Ok(OctetStream));
        check(&["application/octet-stream;q=0.5, application/json"], Ok(Json));
        check(&["application/octet-stream, application/json"], Ok(Json));
        check(&["*/*, application/json;q=0"], Ok(OctetStream));
        check(&["text/html"], Err(406));
        check(&["application/json;q=0"], Err(406));
        check(&["application/octet-stream;q=0, text/plain"], Err(406));
        check(&["application/octet-stream;q=2"], Err(400));
        check(&["application/octet-stream;q=0.1234"], Err(400));
        check(&["application/octet-stream;q=x"], Err(400));
        check(&["application/octet-stream;q=0.25,application/json;q=0.125"], Ok(OctetStream));
    }
}
