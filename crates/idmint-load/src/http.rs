//! HTTP/1.1 load: N keep-alive connections, each sending its next GET as soon as the previous
//! answer is read in full (a closed loop, like wrk). Every answer must be 200 with the body
//! the check expects: JSON IDs, binary IDs (`Accept: application/octet-stream`), or a
//! constant.

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt, Empty};
use hyper::{
    HeaderMap, Request, StatusCode, Uri,
    body::Bytes,
    client::conn::http1::{self, SendRequest},
    header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue},
};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::{net::TcpStream, time::Instant};

use crate::{Error, IdRuns, Latencies, LatencySummary, Outcome, Window, parse_url, rate, shares};

/// What the body of every answer must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BodyCheck {
    /// idmint's JSON with decimal IDs (`"id":"..."` or `"ids":[...]`): every ID is read,
    /// all must be distinct, and each connection's IDs must strictly increase (true of every
    /// layout that grows per generator: snowflake and custom layouts, not lable or trace-id).
    Ids,
    /// The same bytes as the first answer (a bare endpoint such as `/healthz`).
    Constant,
    /// idmint's binary batches: the request says `Accept: application/octet-stream`, and
    /// every answer must be `application/octet-stream` with `Idmint-Id-Bytes: 8` and an
    /// `Idmint-Count` that matches the body, 8 big-endian bytes per ID. Every ID is checked
    /// as for [`BodyCheck::Ids`].
    Binary,
}

impl BodyCheck {
    /// Whether the answers hold IDs to check.
    fn has_ids(self) -> bool {
        self != BodyCheck::Constant
    }
}

/// What to load.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The full URL of the GET: `http://127.0.0.1:8080/v1/next`.
    pub url: String,
    /// Keep-alive connections, each with one request in flight.
    pub connections: usize,
    /// How answers are checked.
    pub check: BodyCheck,
    /// Load before measuring.
    pub warmup: Duration,
    /// How long to measure.
    pub duration: Duration,
}

/// The result of [`http`].
#[derive(Debug, Clone, Serialize)]
pub struct HttpReport {
    /// The URL loaded.
    pub url: String,
    /// Connections.
    pub connections: usize,
    /// The check applied to every body.
    pub check: BodyCheck,
    /// The measured duration.
    pub seconds: f64,
    /// Good answers completed inside the measured window.
    pub requests: u64,
    /// `requests` per second.
    pub requests_per_s: f64,
    /// IDs in those answers (0 for [`BodyCheck::Constant`]).
    pub ids: u64,
    /// `ids` per second.
    pub ids_per_s: f64,
    /// From sending a request to having read its whole answer, for those answers.
    pub latency: LatencySummary,
    /// The good answers of the connection that got fewest, as a share of a fair share
    /// (`requests / connections`): 1.0 when every connection got as many.
    pub fewest_share: f64,
    /// The good answers of the connection that got most, as a share of a fair share.
    pub most_share: f64,
    /// Failures and the distinct check.
    pub outcome: Outcome,
}

/// Loads `options.url` for the warm-up plus the duration, and reports.
///
/// # Errors
///
/// [`Error::Url`] for a URL that is not `http://host:port/path`, [`Error::Connect`] when a
/// connection cannot be opened or the first answer fails its check (so that a wrong URL or
/// check stops at once), [`Error::Options`] for 0 connections.
pub async fn http(options: &HttpOptions) -> Result<HttpReport, Error> {
    let uri = parse_url(&options.url)?;
    if options.connections == 0 {
        return Err(Error::Options("--connections must be at least 1".into()));
    }
    let fail = |reason: String| Error::Connect { url: options.url.clone(), reason };
    let target = Target {
        host: HeaderValue::from_str(uri.authority().map_or("", |a| a.as_str()))
            .map_err(|e| fail(e.to_string()))?,
        uri,
        accept: (options.check == BodyCheck::Binary)
            .then(|| HeaderValue::from_static("application/octet-stream")),
    };
    let mut senders = Vec::with_capacity(options.connections);
    for _ in 0..options.connections {
        senders.push(connect(&target.uri).await.map_err(fail)?);
    }
    // One request first: a wrong path or check fails here, with the answer in the message.
    let probe = send(&mut senders[0], &target).await.map_err(fail)?;
    if probe.0 != StatusCode::OK {
        return Err(fail(format!("HTTP {}: {}", probe.0, excerpt(&probe.2))));
    }
    if options.check.has_ids() {
        read_ids(options.check, &probe.1, &probe.2, &mut IdRuns::unordered()).map_err(fail)?;
    }
    let reference = Arc::new(probe.2);

    let window = Window::new(options.warmup, options.duration);
    let target = Arc::new(target);
    let tasks: Vec<_> = senders
        .into_iter()
        .map(|sender| {
            tokio::spawn(drive(
                sender,
                Arc::clone(&target),
                options.check,
                Arc::clone(&reference),
                window,
            ))
        })
        .collect();
    let mut outcome = Outcome::default();
    let (mut requests, mut ids) = (0, 0);
    let mut latencies = Latencies::default();
    let mut runs = Vec::new();
    let mut per_connection = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(conn) => {
                per_connection.push(conn.requests);
                requests += conn.requests;
                ids += conn.ids;
                latencies.merge(conn.latencies);
                runs.push(conn.runs);
                outcome.absorb(conn.outcome);
            }
            Err(e) => outcome.fail(|| format!("a connection task failed: {e}")),
        }
    }
    if options.check.has_ids() {
        outcome.distinct = Some(IdRuns::check(runs));
    }
    let (fewest_share, most_share) = shares(&per_connection);
    Ok(HttpReport {
        url: options.url.clone(),
        connections: options.connections,
        check: options.check,
        seconds: window.seconds(),
        requests,
        requests_per_s: rate(requests, &window),
        ids,
        ids_per_s: rate(ids, &window),
        latency: latencies.summary(),
        fewest_share,
        most_share,
        outcome,
    })
}

/// Where requests go.
#[derive(Debug)]
struct Target {
    uri: Uri,
    host: HeaderValue,
    /// The `Accept` header, if any.
    accept: Option<HeaderValue>,
}

/// What one connection did.
struct Connection {
    requests: u64,
    ids: u64,
    latencies: Latencies,
    runs: IdRuns,
    outcome: Outcome,
}

/// Opens a keep-alive connection (no Nagle delay, as the server sets on its side).
async fn connect(uri: &Uri) -> Result<SendRequest<Empty<Bytes>>, String> {
    let host = uri.host().unwrap_or("127.0.0.1");
    let port = uri.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((host, port)).await.map_err(|e| chain(&e))?;
    stream.set_nodelay(true).map_err(|e| chain(&e))?;
    let (sender, connection) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|e| chain(&e))?;
    tokio::spawn(async move {
        // Ends when the sender is dropped or the server closes; a closed connection shows up
        // as an error of the next request.
        let _ = connection.await;
    });
    Ok(sender)
}

/// One GET, read in full.
async fn send(
    sender: &mut SendRequest<Empty<Bytes>>,
    target: &Target,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let mut request = Request::get(target.uri.clone())
        .header(HOST, target.host.clone())
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    if let Some(accept) = &target.accept {
        request.headers_mut().insert(ACCEPT, accept.clone());
    }
    // The connection turns ready again a moment after the previous body was read, on its
    // own task; sending before then fails with "connection was not ready".
    sender.ready().await.map_err(|e| format!("connection: {}", chain(&e)))?;
    let response =
        sender.send_request(request).await.map_err(|e| format!("request: {}", chain(&e)))?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| format!("body: {}", chain(&e)))?;
    Ok((parts.status, parts.headers, body.to_bytes()))
}

/// One connection's closed loop until the window ends.
async fn drive(
    mut sender: SendRequest<Empty<Bytes>>,
    target: Arc<Target>,
    check: BodyCheck,
    reference: Arc<Bytes>,
    window: Window,
) -> Connection {
    let mut conn = Connection {
        requests: 0,
        ids: 0,
        latencies: Latencies::default(),
        runs: IdRuns::increasing(),
        outcome: Outcome::default(),
    };
    loop {
        let sent = Instant::now();
        if sent >= window.end() {
            break;
        }
        let (status, headers, body) = match send(&mut sender, &target).await {
            Ok(answer) => answer,
            Err(e) => {
                // The connection is unusable: count it and stop this connection.
                conn.outcome.fail(|| e);
                break;
            }
        };
        let done = Instant::now();
        if status != StatusCode::OK {
            conn.outcome.fail(|| format!("HTTP {status}: {}", excerpt(&body)));
            continue;
        }
        let ids = match check {
            BodyCheck::Ids | BodyCheck::Binary => {
                match read_ids(check, &headers, &body, &mut conn.runs) {
                    Ok(n) => n,
                    Err(e) => {
                        conn.outcome.fail(|| format!("{e}: {}", excerpt(&body)));
                        continue;
                    }
                }
            }
            BodyCheck::Constant => {
                if body != *reference {
                    conn.outcome.fail(|| {
                        format!(
                            "the body changed from {} to {}",
                            excerpt(&reference),
                            excerpt(&body)
                        )
                    });
                    continue;
                }
                0
            }
        };
        if window.measures(done) {
            conn.requests += 1;
            conn.ids += ids;
            conn.latencies.record(done - sent);
        }
    }
    conn
}

/// An error and its causes: hyper's own message is only the kind ("operation was canceled").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// The first 200 bytes of a body, as text.
fn excerpt(body: &[u8]) -> String {
    let cut = &body[..body.len().min(200)];
    String::from_utf8_lossy(cut).into_owned()
}

/// Reads the IDs of an answer into `runs` by `check` (JSON or binary), and returns how many.
fn read_ids(
    check: BodyCheck,
    headers: &HeaderMap,
    body: &[u8],
    runs: &mut IdRuns,
) -> Result<u64, String> {
    match check {
        BodyCheck::Binary => parse_binary(headers, body, runs),
        _ => parse_ids(body, runs),
    }
}

/// Reads a binary batch (8 big-endian bytes per ID, `Idmint-Count` and `Idmint-Id-Bytes`
/// matching the body) into `runs`, and returns how many IDs it held.
fn parse_binary(headers: &HeaderMap, body: &[u8], runs: &mut IdRuns) -> Result<u64, String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header(CONTENT_TYPE.as_str()) != Some("application/octet-stream") {
        return Err(format!(
            "not a binary answer: Content-Type {:?}",
            header(CONTENT_TYPE.as_str())
        ));
    }
    if header("idmint-id-bytes") != Some("8") {
        return Err(format!("Idmint-Id-Bytes {:?}, not 8", header("idmint-id-bytes")));
    }
    let count: u64 = header("idmint-count")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("Idmint-Count {:?} is not a number", header("idmint-count")))?;
    if count == 0 || body.len() as u64 != count * 8 {
        return Err(format!("{} bytes for Idmint-Count {count} 8-byte IDs", body.len()));
    }
    for id in idmint_proto::be_u64s(body) {
        runs.push(id);
    }
    Ok(count)
}

/// Reads the decimal IDs of an idmint answer (`"ids":[...]` or `"id":...`, quoted or not)
/// into `runs`, and returns how many.
fn parse_ids(body: &[u8], runs: &mut IdRuns) -> Result<u64, String> {
    if let Some(at) = find(body, b"\"ids\":[") {
        let mut rest = &body[at + 7..];
        let mut n = 0;
        loop {
            let (id, after) = parse_id(rest)?;
            runs.push(id);
            n += 1;
            match after.first() {
                Some(b',') => rest = &after[1..],
                Some(b']') => return Ok(n),
                _ => return Err("the `ids` array does not parse".into()),
            }
        }
    }
    if let Some(at) = find(body, b"\"id\":") {
        let (id, _) = parse_id(&body[at + 5..])?;
        runs.push(id);
        return Ok(1);
    }
    Err("no `id` or `ids` in the answer".into())
}

/// One decimal ID, as a JSON string or number, and what follows it.
fn parse_id(text: &[u8]) -> Result<(u64, &[u8]), String> {
    let quoted = text.first() == Some(&b'"');
    let digits = if quoted { &text[1..] } else { text };
    let len = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    let not_decimal = || "an ID is not a decimal number (ask for `?format=decimal`)".to_owned();
    let mut id: u64 = 0;
    for &b in &digits[..len] {
        id = id
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(not_decimal)?;
    }
    if len == 0 {
        return Err(not_decimal());
    }
    let mut rest = &digits[len..];
    if quoted {
        rest = rest.strip_prefix(b"\"").ok_or_else(not_decimal)?;
    }
    Ok((id, rest))
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_from_next_and_batch_answers() {
        let mut runs = IdRuns::increasing();
        assert_eq!(parse_ids(br#"{"namespace":"default","id":"42"}"#, &mut runs), Ok(1));
        assert_eq!(parse_ids(br#"{"namespace":"n","ids":["43","44",45]}"#, &mut runs), Ok(3));
        let distinct = IdRuns::check([runs]);
        assert_eq!((distinct.ids, distinct.runs, distinct.duplicates), (4, 1, 0));
    }

    #[test]
    fn binary_answers_are_checked() {
        let check = |headers: &[(&str, &str)], body: &[u8], want: Result<u64, &str>| {
            let mut map = HeaderMap::new();
            for (name, value) in headers {
                map.insert(
                    hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            let mut runs = IdRuns::increasing();
            match (parse_binary(&map, body, &mut runs), want) {
                (Ok(got), Ok(want)) => {
                    assert_eq!(got, want, "{headers:?}");
                    assert_eq!(IdRuns::check([runs]).out_of_order, 0, "{headers:?}");
                }
                (Err(got), Err(part)) => assert!(got.contains(part), "{headers:?}: {got}"),
                (got, want) => panic!("{headers:?}: got {got:?}, want {want:?}"),
            }
        };
        let body: Vec<u8> = [1u64, 2, 3].iter().flat_map(|id| id.to_be_bytes()).collect();
        let ok = [("content-type", "application/octet-stream"), ("idmint-id-bytes", "8")];
        let with = |count| [ok[0], ok[1], ("idmint-count", count)];
        check(&with("3"), &body, Ok(3));
        check(&with("2"), &body, Err("24 bytes for Idmint-Count 2"));
        check(&with("x"), &body, Err("not a number"));
        check(&ok, &body, Err("not a number"));
        check(&with("1"), &body[..7], Err("7 bytes"));
        check(&[ok[0], ("idmint-id-bytes", "16"), ("idmint-count", "3")], &body, Err("not 8"));
        check(&[("content-type", "application/json"), ok[1]], &body, Err("not a binary answer"));
        // Negative control: the same IDs little-endian are out of order for the checker.
        let little: Vec<u8> = [255u64, 256].iter().flat_map(|id| id.to_le_bytes()).collect();
        let mut runs = IdRuns::increasing();
        parse_binary(
            &{
                let mut map = HeaderMap::new();
                map.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                map.insert("idmint-id-bytes", HeaderValue::from_static("8"));
                map.insert("idmint-count", HeaderValue::from_static("2"));
                map
            },
            &little,
            &mut runs,
        )
        .unwrap();
        assert_eq!(IdRuns::check([runs]).out_of_order, 1);
    }

    #[test]
    fn bad_answers_are_refused() {
        let mut runs = IdRuns::increasing();
        for body in [
            &br#"{"status":"ok"}"#[..],
            br#"{"id":"0x2a"}"#,
            br#"{"id":"abc"}"#,
            br#"{"ids":["1","2""#,
            br#"{"ids":[]}"#,
            br#"{"id":"99999999999999999999"}"#,
        ] {
            assert!(parse_ids(body, &mut runs).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }
}
