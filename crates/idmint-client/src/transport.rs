//! HTTP calls to one endpoint: `GET /v1/namespaces` and `GET /v1/namespaces/{ns}/batch`, over
//! hyper's pooled HTTP/1.1 client (keep-alive; `https://` over rustls with feature `rustls`). Each call ends in a value, a failure
//! that is safe to retry, or an error that is not; whether and where to retry is not decided
//! here.
//!
//! Batches are asked for in binary (`Accept: application/octet-stream`, JSON ranked below it):
//! the IDs arrive as fixed-width big-endian integers and are read with one copy, no text. A
//! server that predates binary batches answers JSON, which is read as before.

use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::{
    HeaderMap, Request, StatusCode, Uri,
    body::Bytes,
    header::{self, HeaderValue},
};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use idmint_proto::{ErrorResponse, NamespaceInfo, NamespacesResponse};
use serde::Deserialize;

use crate::{
    buffer::Ids,
    error::{Error, ErrorKind},
    retry::{self, Class, Failure},
};

/// How a call ended when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// Safe to retry, here later or elsewhere.
    Retry(Failure),
    /// Not to be retried.
    Fatal(Error),
}

impl From<Error> for CallError {
    fn from(error: Error) -> Self {
        CallError::Fatal(error)
    }
}

/// One endpoint's address, and the URLs built from it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// As configured, without a trailing `/`: for messages.
    pub(crate) base: String,
    namespaces: Uri,
    /// `{base}/v1/namespaces/{namespace}/batch?format=decimal&count=`.
    batch_prefix: String,
}

impl Endpoint {
    /// Checks and parses an endpoint URL: `http://host:port`, optionally with a path prefix.
    pub(crate) fn parse(url: &str, namespace: &str) -> Result<Endpoint, Error> {
        let bad = |why: &str| Err(ErrorKind::Config(format!("endpoint `{url}`: {why}")).into());
        let base = url.trim().trim_end_matches('/');
        let uri: Uri = match base.parse() {
            Ok(uri) => uri,
            Err(e) => return bad(&e.to_string()),
        };
        match uri.scheme_str() {
            Some("http") => {}
            #[cfg(feature = "rustls")]
            Some("https") => {}
            #[cfg(not(feature = "rustls"))]
            Some("https") => {
                return bad(
                    "https needs idmint-client's `rustls` feature; use http:// or enable it",
                );
            }
            _ => return bad("must start with http:// or https://"),
        }
        if uri.authority().is_none() {
            return bad("has no host");
        }
        if uri.query().is_some() {
            return bad("must not have a query");
        }
        let namespaces: Uri = match format!("{base}/v1/namespaces").parse() {
            Ok(uri) => uri,
            Err(e) => return bad(&e.to_string()),
        };
        let batch_prefix = format!("{base}/v1/namespaces/{namespace}/batch?format=decimal&count=");
        Ok(Endpoint { base: base.to_owned(), namespaces, batch_prefix })
    }
}

/// How connections are made: plain TCP, or TCP then TLS for `https://` (feature `rustls`).
#[cfg(not(feature = "rustls"))]
type Connector = HttpConnector;
#[cfg(feature = "rustls")]
type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// The HTTP side of a client: the pooled connections and the bearer token.
#[derive(Debug)]
pub(crate) struct Transport {
    http: Client<Connector, Empty<Bytes>>,
    authorization: Option<HeaderValue>,
}

/// Without the `rustls` feature: plain TCP; a root certificate is a configuration error.
#[cfg(not(feature = "rustls"))]
fn tls(connector: HttpConnector, extra_roots: &[String]) -> Result<Connector, Error> {
    if extra_roots.is_empty() {
        Ok(connector)
    } else {
        Err(ErrorKind::Config("a root certificate needs idmint-client's `rustls` feature".into())
            .into())
    }
}

/// With the `rustls` feature: `https://` over rustls (ring), verified against the system's
/// root certificates and `extra_roots`; `http://` stays plain.
#[cfg(feature = "rustls")]
fn tls(mut connector: HttpConnector, extra_roots: &[String]) -> Result<Connector, Error> {
    use rustls_pki_types::{CertificateDer, pem::PemObject};

    let config_error = |what: String| Error::from(ErrorKind::Config(what));
    let mut roots = rustls::RootCertStore::empty();
    // The system's roots; a machine without any still reaches servers of `extra_roots`.
    for cert in rustls_native_certs_or_empty() {
        let _ = roots.add(cert);
    }
    for pem in extra_roots {
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| config_error(format!("bad root certificate: {e}")))?;
            roots.add(cert).map_err(|e| config_error(format!("bad root certificate: {e}")))?;
            found += 1;
        }
        if found == 0 {
            return Err(config_error("a root certificate PEM holds no certificate".into()));
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| config_error(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    connector.enforce_http(false);
    Ok(hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector))
}

/// The system's root certificates (none where it has none).
#[cfg(feature = "rustls")]
fn rustls_native_certs_or_empty() -> Vec<rustls_pki_types::CertificateDer<'static>> {
    rustls_native_certs::load_native_certs().certs
}

impl Transport {
    /// A transport that sends `token` (if any) as a bearer token, and gives up connecting
    /// after `connect_timeout`. With feature `rustls`, `https://` endpoints are verified
    /// against the system's roots and `extra_roots` (PEM).
    pub(crate) fn new(
        token: Option<&str>,
        connect_timeout: Duration,
        extra_roots: &[String],
    ) -> Result<Self, Error> {
        let authorization = token
            .map(|token| {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        Error::from(ErrorKind::Config(
                            "the token must be visible ASCII characters".into(),
                        ))
                    })?;
                value.set_sensitive(true);
                Ok::<_, Error>(value)
            })
            .transpose()?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        let connector = tls(connector, extra_roots)?;
        let http = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Transport { http, authorization })
    }

    /// What `endpoint` says about `namespace`: `None` when it does not list it.
    pub(crate) async fn namespace_info(
        &self,
        endpoint: &Endpoint,
        namespace: &str,
    ) -> Result<Option<NamespaceInfo>, CallError> {
        let (_, body) = self.get(endpoint, endpoint.namespaces.clone(), "application/json").await?;
        let list: NamespacesResponse = serde_json::from_slice(&body)
            .map_err(|e| protocol(endpoint, format!("bad `/v1/namespaces` body: {e}")))?;
        Ok(list.namespaces.into_iter().find(|ns| ns.name == namespace))
    }

    /// A batch of `count` IDs (or fewer, but at least one) of a namespace with `id_bits`-bit
    /// IDs, asked for in binary, or as decimal text from a server that answers JSON, with
    /// `shard_key` when given. Checks only the form of the answer, not its order.
    pub(crate) async fn batch(
        &self,
        endpoint: &Endpoint,
        count: usize,
        id_bits: u32,
        shard_key: Option<u32>,
    ) -> Result<Ids, CallError> {
        let key = shard_key.map_or_else(String::new, |key| format!("&shard_key={key}"));
        let uri: Uri = format!("{}{count}{key}", endpoint.batch_prefix)
            .parse()
            .map_err(|e| protocol(endpoint, format!("bad batch url: {e}")))?;
        let (headers, body) = self.get(endpoint, uri, BATCH_ACCEPT).await?;
        let kind = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let media = kind.split(';').next().unwrap_or("").trim();
        let parsed = if media.eq_ignore_ascii_case(OCTET_STREAM) {
            parse_binary(&headers, &body, count, id_bits)
        } else if media.eq_ignore_ascii_case("application/json") {
            parse_batch(&body, count, id_bits)
        } else {
            Err(format!(
                "a batch answered as `{}`, not application/octet-stream or application/json",
                kind.chars().take(64).collect::<String>()
            ))
        };
        parsed.map_err(|message| protocol(endpoint, message).into())
    }

    /// GETs `uri` accepting `accept`, and reads the headers and the whole body of a 2xx
    /// answer.
    async fn get(
        &self,
        endpoint: &Endpoint,
        uri: Uri,
        accept: &'static str,
    ) -> Result<(HeaderMap, Bytes), CallError> {
        let mut request = Request::get(uri)
            .header(header::ACCEPT, accept)
            .body(Empty::new())
            .map_err(|e| protocol(endpoint, format!("bad request: {e}")))?;
        if let Some(value) = &self.authorization {
            request.headers_mut().insert(header::AUTHORIZATION, value.clone());
        }
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| CallError::Retry(Failure::Connect(chain(&e))))?;
        let (parts, body) = response.into_parts();
        // A connection that breaks while the body arrives is a connection failure too.
        let body = body
            .collect()
            .await
            .map_err(|e| CallError::Retry(Failure::Connect(chain(&e))))?
            .to_bytes();
        match retry::classify(parts.status.as_u16()) {
            Class::Success => Ok((parts.headers, body)),
            Class::Retry => {
                let (code, message) = error_detail(parts.status, &body);
                Err(CallError::Retry(Failure::Unavailable {
                    status: parts.status.as_u16(),
                    retry_after: retry_after(&parts.headers),
                    detail: format!("{code}: {message}"),
                }))
            }
            Class::Refuse => {
                let (code, message) = error_detail(parts.status, &body);
                Err(CallError::Fatal(Error::from(ErrorKind::Rejected {
                    endpoint: endpoint.base.clone(),
                    status: parts.status.as_u16(),
                    code,
                    message,
                })))
            }
        }
    }
}

fn protocol(endpoint: &Endpoint, message: String) -> Error {
    ErrorKind::Protocol { endpoint: endpoint.base.clone(), message }.into()
}

/// An error and its sources, joined: hyper's own messages say little.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers.get(header::RETRY_AFTER)?.to_str().ok().and_then(retry::parse_retry_after)
}

/// The server's error code and message, or `http_<status>` and the start of the body when it
/// is not an idmint error (a proxy's page, say).
fn error_detail(status: StatusCode, body: &[u8]) -> (String, String) {
    match serde_json::from_slice::<ErrorResponse>(body) {
        Ok(ErrorResponse { error }) => (error.code, error.message),
        Err(_) => {
            let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
            (format!("http_{}", status.as_u16()), text.trim().to_owned())
        }
    }
}

/// The body of a batch answer, borrowing the ID strings (decimal digits need no unescaping),
/// so a 100,000-ID answer costs one vector rather than 100,000 strings.
#[derive(Deserialize)]
struct BatchBody<'a> {
    #[serde(borrow)]
    ids: Vec<&'a str>,
}

/// The media type of binary batches.
const OCTET_STREAM: &str = "application/octet-stream";
/// What a batch call accepts: binary first, JSON from servers that predate it.
const BATCH_ACCEPT: &str = "application/octet-stream, application/json;q=0.5";

/// Parses a binary batch answer of at most `asked` IDs of `id_bits` bits: the body is the IDs
/// as fixed-width big-endian integers (`id_bits / 8` bytes each), and the `Idmint-Id-Bytes`
/// and `Idmint-Count` headers must say the same width and count as the body's length.
pub(crate) fn parse_binary(
    headers: &HeaderMap,
    body: &[u8],
    asked: usize,
    id_bits: u32,
) -> Result<Ids, String> {
    let header = |name: &str| -> Result<usize, String> {
        let value = headers.get(name).ok_or_else(|| format!("a binary batch without `{name}`"))?;
        value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("a binary batch with a bad `{name}`"))
    };
    let width = match id_bits {
        64 => 8,
        128 => 16,
        other => return Err(format!("ids of {other} bits are not supported")),
    };
    let said = header("idmint-id-bytes")?;
    if said != width {
        return Err(format!("a binary batch of {said}-byte ids for a {id_bits}-bit namespace"));
    }
    let count = header("idmint-count")?;
    if !body.len().is_multiple_of(width) || body.len() / width != count {
        return Err(format!(
            "a binary batch of {} bytes says it holds {count} ids of {width} bytes",
            body.len()
        ));
    }
    if count == 0 || count > asked {
        return Err(format!("asked for {asked} ids, got {count}"));
    }
    Ok(match width {
        8 => Ids::U64(idmint_proto::be_u64s(body).collect()),
        _ => Ids::U128(idmint_proto::be_u128s(body).collect()),
    })
}

/// Parses a batch answer of at most `asked` decimal IDs of `id_bits` bits.
pub(crate) fn parse_batch(body: &[u8], asked: usize, id_bits: u32) -> Result<Ids, String> {
    let parsed: BatchBody<'_> =
        serde_json::from_slice(body).map_err(|e| format!("bad batch body: {e}"))?;
    let count = parsed.ids.len();
    if count == 0 || count > asked {
        return Err(format!("asked for {asked} ids, got {count}"));
    }
    fn digits<T: std::str::FromStr>(text: &str, bits: u32) -> Result<T, String> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "`{}` is not a decimal id",
                text.chars().take(40).collect::<String>()
            ));
        }
        text.parse().map_err(|_| format!("`{text}` does not fit {bits} bits"))
    }
    match id_bits {
        64 => parsed.ids.iter().map(|t| digits(t, 64)).collect::<Result<_, _>>().map(Ids::U64),
        128 => parsed.ids.iter().map(|t| digits(t, 128)).collect::<Result<_, _>>().map(Ids::U128),
        other => Err(format!("ids of {other} bits are not supported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        let check = |url: &str, want: Result<&str, &str>| {
            let got = Endpoint::parse(url, "default");
            match (got, want) {
                (Ok(endpoint), Ok(base)) => {
                    assert_eq!(endpoint.base, base, "{url}");
                    assert_eq!(endpoint.namespaces.to_string(), format!("{base}/v1/namespaces"));
                    assert_eq!(
                        endpoint.batch_prefix,
                        format!("{base}/v1/namespaces/default/batch?format=decimal&count=")
                    );
                }
                (Err(error), Err(part)) => {
                    let ErrorKind::Config(message) = error.kind() else { panic!("{error}") };
                    assert!(message.contains(part), "{url}: {message}")
                }
                (got, want) => panic!("{url}: got {got:?}, want {want:?}"),
            }
        };
        check("http://127.0.0.1:8080", Ok("http://127.0.0.1:8080"));
        check("http://127.0.0.1:8080/", Ok("http://127.0.0.1:8080"));
        check(" http://ids.internal/idmint/ ", Ok("http://ids.internal/idmint"));
        #[cfg(not(feature = "rustls"))]
        check("https://ids.internal", Err("needs idmint-client's `rustls` feature"));
        #[cfg(feature = "rustls")]
        check("https://ids.internal", Ok("https://ids.internal"));
        check("127.0.0.1:8080", Err("must start with http://"));
        check("http://", Err("endpoint `http://`"));
        check("http://a/?x=1", Err("must not have a query"));
        check("", Err("endpoint ``"));
    }

    #[test]
    fn batches_are_parsed() {
        let check = |body: &str, asked: usize, bits: u32, want: Result<Ids, &str>| match (
            parse_batch(body.as_bytes(), asked, bits),
            want,
        ) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{body}"),
            (Err(got), Err(part)) => assert!(got.contains(part), "{body}: {got}"),
            (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
        };
        let ok = r#"{"namespace":"default","ids":["1","18446744073709551615"]}"#;
        check(ok, 2, 64, Ok(Ids::U64([1, u64::MAX].into())));
        check(ok, 2, 128, Ok(Ids::U128([1, u128::from(u64::MAX)].into())));
        check(ok, 1, 64, Err("asked for 1 ids, got 2"));
        check(ok, 2, 32, Err("ids of 32 bits are not supported"));
        check(r#"{"ids":["18446744073709551616"]}"#, 5, 64, Err("does not fit 64 bits"));
        check(r#"{"ids":[]}"#, 5, 64, Err("got 0"));
        check(r#"{"ids":["+1"]}"#, 5, 64, Err("`+1` is not a decimal id"));
        check(r#"{"ids":["0x1f"]}"#, 5, 64, Err("is not a decimal id"));
        check(r#"{"ids":[""]}"#, 5, 64, Err("is not a decimal id"));
        check(r#"{"ids":[1]}"#, 5, 64, Err("bad batch body"));
        check("<html>", 5, 64, Err("bad batch body"));
    }

    #[test]
    fn binary_batches_are_parsed() {
        let be = |ids: &[u64]| ids.iter().flat_map(|id| id.to_be_bytes()).collect::<Vec<u8>>();
        let check =
            |count: &str, width: &str, body: &[u8], asked, bits, want: Result<Ids, &str>| {
                let mut headers = HeaderMap::new();
                for (name, value) in [("idmint-count", count), ("idmint-id-bytes", width)] {
                    if !value.is_empty() {
                        headers.insert(name, HeaderValue::from_str(value).unwrap());
                    }
                }
                match (parse_binary(&headers, body, asked, bits), want) {
                    (Ok(got), Ok(want)) => assert_eq!(got, want, "{count} {width}"),
                    (Err(got), Err(part)) => assert!(got.contains(part), "{count} {width}: {got}"),
                    (got, want) => panic!("{count} {width}: got {got:?}, want {want:?}"),
                }
            };
        let two = be(&[1, u64::MAX]);
        check("2", "8", &two, 2, 64, Ok(Ids::U64([1, u64::MAX].into())));
        // Big-endian: the first byte is the most significant.
        check("1", "8", &[0, 0, 0, 0, 0, 0, 1, 2], 1, 64, Ok(Ids::U64([258].into())));
        let guids: Vec<u8> = [7u128, u128::MAX].iter().flat_map(|id| id.to_be_bytes()).collect();
        check("2", "16", &guids, 5, 128, Ok(Ids::U128([7, u128::MAX].into())));
        check("2", "8", &two, 1, 64, Err("asked for 1 ids, got 2"));
        check("3", "8", &two, 5, 64, Err("says it holds 3 ids"));
        check("1", "8", &two[..9], 5, 64, Err("9 bytes"));
        check("0", "8", &[], 5, 64, Err("got 0"));
        check("2", "16", &two, 5, 64, Err("16-byte ids for a 64-bit namespace"));
        check("1", "8", &two, 5, 128, Err("8-byte ids for a 128-bit namespace"));
        check("", "8", &two, 5, 64, Err("without `idmint-count`"));
        check("2", "", &two, 5, 64, Err("without `idmint-id-bytes`"));
        check("two", "8", &two, 5, 64, Err("bad `idmint-count`"));
        check("2", "8", &two, 5, 32, Err("ids of 32 bits are not supported"));
    }

    #[test]
    fn error_bodies_are_read() {
        let check = |status: u16, body: &str, want: (&str, &str)| {
            let status = StatusCode::from_u16(status).unwrap();
            let (code, message) = error_detail(status, body.as_bytes());
            assert_eq!((code.as_str(), message.as_str()), want, "{body}");
        };
        check(
            403,
            r#"{"error":{"code":"forbidden","message":"the token is not valid"}}"#,
            ("forbidden", "the token is not valid"),
        );
        check(502, " <html>bad gateway</html>\n", ("http_502", "<html>bad gateway</html>"));
        check(500, "", ("http_500", ""));
    }

    #[test]
    fn tokens_must_be_header_safe() {
        assert!(Transport::new(Some("s3cret"), Duration::from_secs(1), &[]).is_ok());
        assert!(matches!(
            Transport::new(Some("line\nbreak"), Duration::from_secs(1), &[]),
            Err(e) if matches!(e.kind(), ErrorKind::Config(_))
        ));
    }
}
