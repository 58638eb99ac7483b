//! HTTP/1.1 load: N keep-alive connections, each sending its next GET as soon as the previous
//! answer is read in full (a closed loop, like wrk). Every answer must be 200 with the body
//! the check expects.

use std::{sync::Arc, time::Duration};

use http_body_util::{BodyExt, Empty};
use hyper::{
    Request, StatusCode, Uri,
    body::Bytes,
    client::conn::http1::{self, SendRequest},
    header::{HOST, HeaderValue},
};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::{net::TcpStream, time::Instant};

use crate::{Error, IdRuns, Latencies, LatencySummary, Outcome, Window, parse_url, rate};

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
    };
    let mut senders = Vec::with_capacity(options.connections);
    for _ in 0..options.connections {
        senders.push(connect(&target.uri).await.map_err(fail)?);
    }
    // One request first: a wrong path or check fails here, with the answer in the message.
    let probe = send(&mut senders[0], &target).await.map_err(fail)?;
    if probe.0 != StatusCode::OK {
        return Err(fail(format!("HTTP {}: {}", probe.0, excerpt(&probe.1))));
    }
    if options.check == BodyCheck::Ids {
        parse_ids(&probe.1, &mut IdRuns::unordered()).map_err(fail)?;
    }
    let reference = Arc::new(probe.1);

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
    for task in tasks {
        match task.await {
            Ok(conn) => {
                requests += conn.requests;
                ids += conn.ids;
                latencies.merge(conn.latencies);
                runs.push(conn.runs);
                outcome.absorb(conn.outcome);
            }
            Err(e) => outcome.fail(|| format!("a connection task failed: {e}")),
        }
    }
    if options.check == BodyCheck::Ids {
        outcome.distinct = Some(IdRuns::check(runs));
    }
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
        outcome,
    })
}

/// Where requests go.
#[derive(Debug)]
struct Target {
    uri: Uri,
    host: HeaderValue,
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
) -> Result<(StatusCode, Bytes), String> {
    let request = Request::get(target.uri.clone())
        .header(HOST, target.host.clone())
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    // The connection turns ready again a moment after the previous body was read, on its
    // own task; sending before then fails with "connection was not ready".
    sender.ready().await.map_err(|e| format!("connection: {}", chain(&e)))?;
    let response =
        sender.send_request(request).await.map_err(|e| format!("request: {}", chain(&e)))?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| format!("body: {}", chain(&e)))?;
    Ok((status, body.to_bytes()))
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
        let (status, body) = match send(&mut sender, &target).await {
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
            BodyCheck::Ids => match parse_ids(&body, &mut conn.runs) {
                Ok(n) => n,
                Err(e) => {
                    conn.outcome.fail(|| format!("{e}: {}", excerpt(&body)));
                    continue;
                }
            },
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
