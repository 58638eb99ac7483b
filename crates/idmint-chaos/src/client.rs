//! Clients that record histories: HTTP batches on one keep-alive connection (a thread each),
//! gRPC `Stream` calls and `idmint-client` (tokio tasks). Each operation is recorded as
//! `invoke`, then `ok` with its IDs, `fail` (an error answer: nothing issued) or `info` (no
//! answer, a reset or a timeout: unknown).

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use idmint_proto::grpc::{IdMintClient, StreamRequest};

use crate::history::{Event, Recorder};

/// How long a client waits for an answer before it records `info`.
const TIMEOUT: Duration = Duration::from_secs(2);

/// What every client of a run shares: the history, the stop flag and the ID count.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub(crate) recorder: Recorder,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) acknowledged: Arc<AtomicU64>,
}

impl Shared {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn record(&self, events: &[Event]) {
        if let Some(Event::Ok { ids, .. }) = events.last() {
            self.acknowledged.fetch_add(ids.len() as u64, Ordering::Relaxed);
        }
        // A history that cannot be written fails the run when it is checked (too few IDs).
        let _ = self.recorder.record(events);
    }
}

/// One HTTP client thread: `GET /v1/batch?count=N` on `addr` (through a proxy, or not), named
/// `server` in the history, until stopped, pausing `pace` after each answer.
pub(crate) fn http_client(
    shared: Shared,
    name: String,
    server: String,
    addr: SocketAddr,
    count: u64,
    pace: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut connection: Option<BufReader<TcpStream>> = None;
        let request = format!("GET /v1/batch?count={count} HTTP/1.1\r\nhost: idmint\r\n\r\n");
        while !shared.stopped() {
            let t = shared.recorder.now();
            let invoke = Event::Invoke {
                client: name.clone(),
                server: server.clone(),
                t,
                count,
                began: None,
            };
            if connection.is_none() {
                match TcpStream::connect_timeout(&addr, TIMEOUT) {
                    Ok(stream) => {
                        let _ = stream.set_read_timeout(Some(TIMEOUT));
                        let _ = stream.set_write_timeout(Some(TIMEOUT));
                        let _ = stream.set_nodelay(true);
                        connection = Some(BufReader::with_capacity(1 << 16, stream));
                    }
                    Err(e) => {
                        // Nothing was sent: definitely nothing issued.
                        let t = shared.recorder.now();
                        shared.record(&[
                            invoke,
                            Event::Fail { client: name.clone(), t, error: format!("connect: {e}") },
                        ]);
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
            }
            let Some(reader) = connection.as_mut() else { continue };
            let answer =
                reader.get_mut().write_all(request.as_bytes()).and_then(|()| read_response(reader));
            let t = shared.recorder.now();
            let outcome = match answer {
                Ok((200, body)) => match parse_ids(&body) {
                    Some(ids) => Event::Ok { client: name.clone(), t, ids },
                    None => {
                        Event::Info { client: name.clone(), t, error: "unreadable body".into() }
                    }
                },
                Ok((status, body)) => {
                    let error = format!("{status}: {}", String::from_utf8_lossy(&body));
                    Event::Fail { client: name.clone(), t, error }
                }
                Err(e) => {
                    connection = None;
                    Event::Info { client: name.clone(), t, error: e.to_string() }
                }
            };
            let refused = !matches!(outcome, Event::Ok { .. });
            shared.record(&[invoke, outcome]);
            if refused {
                std::thread::sleep(Duration::from_millis(20));
            } else if !pace.is_zero() {
                std::thread::sleep(pace);
            }
        }
    })
}

/// Reads one HTTP/1.1 response with a `content-length`: its status and body.
fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<(u16, Vec<u8>)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(bad("connection closed"));
    }
    let status: u16 =
        line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| bad("status"))?;
    let mut length = None;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in the head"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length.ok_or_else(|| bad("no content-length"))?];
    reader.read_exact(&mut body)?;
    Ok((status, body))
}

/// The IDs of `{"namespace": ..., "ids": ["1", "2", ...]}`.
fn parse_ids(body: &[u8]) -> Option<Vec<u128>> {
    #[derive(serde::Deserialize)]
    struct Batch {
        ids: Vec<String>,
    }
    let batch: Batch = serde_json::from_slice(body).ok()?;
    batch.ids.iter().map(|id| parse_id(id)).collect()
}

/// One ID of a JSON batch: a decimal number (64-bit layouts) or a hyphenated UUID (RFC 9562
/// text, what a `uuid7` namespace answers with `format=uuid`).
fn parse_id(text: &str) -> Option<u128> {
    if text.len() == 36 && text.as_bytes()[8] == b'-' {
        let hex: String = text.chars().filter(|&c| c != '-').collect();
        return (hex.len() == 32).then(|| u128::from_str_radix(&hex, 16).ok()).flatten();
    }
    text.parse().ok()
}

/// One gRPC client task: `Stream` calls of `count`-ID messages from `addr` until stopped;
/// every message is an operation invoked when the call began (the server may have made it
/// any time since), reconnecting after an error.
pub(crate) async fn grpc_client(
    shared: Shared,
    name: String,
    server: String,
    addr: SocketAddr,
    count: u64,
) {
    while !shared.stopped() {
        let started = shared.recorder.now();
        // Every message is an operation invoked when the call began (for the checker); what
        // clients saw is measured from the message before it (`began`).
        let invoke = |t, began| Event::Invoke {
            client: name.clone(),
            server: server.clone(),
            t,
            count,
            began,
        };
        let call = async {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .map_err(|e| e.to_string())?
                .connect_timeout(TIMEOUT)
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            let mut client = IdMintClient::new(channel).max_decoding_message_size(usize::MAX);
            let request = StreamRequest {
                namespace: "default".into(),
                batch_size: count,
                batches: 0,
                ..Default::default()
            };
            client.stream(request).await.map(tonic::Response::into_inner).map_err(|e| e.to_string())
        };
        let error = match tokio::time::timeout(TIMEOUT, call).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("no answer".to_owned()),
        };
        let mut stream = match error {
            Ok(stream) => stream,
            Err(error) => {
                // The call never started: nothing was issued for it.
                let t = shared.recorder.now();
                let failed = Event::Fail { client: name.clone(), t, error };
                shared.record(&[invoke(started, None), failed]);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let mut since = shared.recorder.now();
        while !shared.stopped() {
            let next = tokio::time::timeout(TIMEOUT, stream.message()).await;
            let t = shared.recorder.now();
            let invoke = |began: u64| invoke(started, Some(began));
            match next {
                Ok(Ok(Some(batch))) => {
                    shared.record(&[
                        invoke(since),
                        Event::Ok {
                            client: name.clone(),
                            t,
                            ids: batch.ids.into_iter().map(u128::from).collect(),
                        },
                    ]);
                    since = t;
                }
                Ok(Ok(None)) => break,
                Ok(Err(status)) => {
                    // An error status ends the call: whatever it was making is unknown.
                    let error = format!("{}: {}", status.code(), status.message());
                    shared.record(&[invoke(since), Event::Info { client: name.clone(), t, error }]);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    break;
                }
                Err(_) => {
                    shared.record(&[
                        invoke(since),
                        Event::Info { client: name.clone(), t, error: "no message in time".into() },
                    ]);
                    break;
                }
            }
        }
    }
}

/// How an `idmint-client` task takes its IDs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ClientMode {
    /// `batch(count)`: one request per operation, no buffer.
    Batch,
    /// `next()` `count` times per operation, from the prefetch buffer (refills of `count`,
    /// asked for as soon as a batch is taken into use) with `pipeline` refills in flight.
    /// Buffered IDs were issued before the operation began, so its invoke is recorded at the
    /// client's start: the real-time order check then never compares them with operations that
    /// ended before they were used; uniqueness, claims and marks are checked as for any other.
    Prefetch { pipeline: usize },
}

/// One `idmint-client` task over every endpoint (`server` `*`: the client picks), operations
/// of `count` IDs, until stopped.
pub(crate) async fn failover_client(
    shared: Shared,
    name: String,
    endpoints: Vec<String>,
    count: usize,
    mode: ClientMode,
) {
    let started = shared.recorder.now();
    let mut builder = idmint_client::Client::builder()
        .endpoints(&endpoints)
        .namespace("default")
        .timeout(TIMEOUT);
    if let ClientMode::Prefetch { pipeline } = mode {
        builder = builder.prefetch(count, count - 1).pipeline(pipeline);
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(e) => {
            let t = shared.recorder.now();
            shared.record(&[
                Event::Invoke {
                    client: name.clone(),
                    server: "*".into(),
                    t,
                    count: count as u64,
                    began: None,
                },
                Event::Fail { client: name.clone(), t, error: format!("build: {e}") },
            ]);
            return;
        }
    };
    while !shared.stopped() {
        let now = shared.recorder.now();
        let (t, began) = match mode {
            ClientMode::Batch => (now, None),
            ClientMode::Prefetch { .. } => (started, Some(now)),
        };
        let invoke = Event::Invoke {
            client: name.clone(),
            server: "*".into(),
            t,
            count: count as u64,
            began,
        };
        let (ids, error) = match mode {
            ClientMode::Batch => match client.batch(count).await {
                Ok(ids) => (ids, None),
                Err(e) => (Vec::new(), Some(e)),
            },
            ClientMode::Prefetch { .. } => {
                let mut ids = Vec::with_capacity(count);
                let mut error = None;
                while ids.len() < count && error.is_none() {
                    match client.next().await {
                        Ok(id) => ids.push(id),
                        Err(e) => error = Some(e),
                    }
                }
                (ids, error)
            }
        };
        let t = shared.recorder.now();
        let ids: Vec<u128> = ids
            .into_iter()
            .map(|id| match id {
                idmint_core::AnyId::U64(raw) => u128::from(raw),
                idmint_core::AnyId::U128(raw) => raw,
            })
            .collect();
        match error {
            // IDs handed out before an error are acknowledged all the same.
            None => shared.record(&[invoke, Event::Ok { client: name.clone(), t, ids }]),
            Some(e) => {
                if !ids.is_empty() {
                    shared.record(&[invoke.clone(), Event::Ok { client: name.clone(), t, ids }]);
                }
                // After retries the client cannot say whether a lost answer issued IDs.
                shared.record(&[
                    invoke,
                    Event::Info { client: name.clone(), t, error: e.to_string() },
                ]);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    client.close().await;
}
