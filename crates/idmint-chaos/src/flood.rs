//! Floods of a server's gRPC port, as a hostile client would send them, over HTTP/2 on
//! loopback (the `h2` crate, the HTTP/2 implementation under hyper and tonic): connections
//! that open no stream, requests whose message never arrives, many streams on one connection,
//! and streams reset as soon as they are opened (the HTTP/2 "rapid reset" attack). Each flood
//! is bounded in count and time and ends by dropping everything it opened.

use std::{net::SocketAddr, time::Duration};

use tokio::net::TcpStream;

/// How long one connect or handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One flood.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Flood {
    /// `connections` HTTP/2 connections that answer PINGs but open no stream.
    Idle { connections: usize },
    /// `connections` connections with `streams` unary `Next` calls each whose message never
    /// arrives (headers sent, no body, the stream left open).
    Stalled { connections: usize, streams: usize },
    /// `resets` streams opened and reset at once, on as few connections as the server allows.
    RapidReset { resets: usize },
}

/// What a flood managed to open.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Opened {
    /// Connections whose HTTP/2 handshake finished.
    pub(crate) connections: usize,
    /// Streams the client sent (for `RapidReset`: sent and reset).
    pub(crate) streams: usize,
    /// Connections or streams refused (a failed connect or handshake, a refused stream, a
    /// GOAWAY).
    pub(crate) refused: usize,
}

impl Flood {
    /// Sends the flood to `addr`, holds what it opened for `hold`, then drops it.
    pub(crate) async fn run(self, addr: SocketAddr, hold: Duration) -> Opened {
        let mut opened = Opened::default();
        let mut keep = Vec::new();
        match self {
            Flood::Idle { connections } => {
                for _ in 0..connections {
                    match connect(addr).await {
                        Some(client) => {
                            opened.connections += 1;
                            keep.push((client, Vec::new()));
                        }
                        None => opened.refused += 1,
                    }
                }
            }
            Flood::Stalled { connections, streams } => {
                for _ in 0..connections {
                    let Some(mut client) = connect(addr).await else {
                        opened.refused += 1;
                        continue;
                    };
                    opened.connections += 1;
                    let mut sent = Vec::new();
                    for _ in 0..streams {
                        match stalled_call(&mut client, addr).await {
                            Some(stream) => {
                                opened.streams += 1;
                                sent.push(stream);
                            }
                            None => {
                                opened.refused += 1;
                                break;
                            }
                        }
                    }
                    keep.push((client, sent));
                }
            }
            Flood::RapidReset { resets } => {
                let mut client = None;
                let mut attempts = 0;
                while opened.streams < resets && attempts < resets {
                    attempts += 1;
                    if client.is_none() {
                        client = connect(addr).await;
                        match client {
                            Some(_) => opened.connections += 1,
                            None => {
                                opened.refused += 1;
                                continue;
                            }
                        }
                    }
                    let Some(live) = client.as_mut() else { continue };
                    match stalled_call(live, addr).await {
                        Some(mut stream) => {
                            stream.send_reset(h2::Reason::CANCEL);
                            opened.streams += 1;
                        }
                        None => {
                            // A GOAWAY (the server's answer to a reset flood): a new connection.
                            opened.refused += 1;
                            client = None;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(hold).await;
        drop(keep);
        opened
    }
}

/// An HTTP/2 connection whose driver runs on its own task (answering PINGs and SETTINGS).
async fn connect(addr: SocketAddr) -> Option<h2::client::SendRequest<bytes::Bytes>> {
    let handshake = async {
        let tcp = TcpStream::connect(addr).await.ok()?;
        let (client, connection) = h2::client::handshake(tcp).await.ok()?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Some(client)
    };
    tokio::time::timeout(CONNECT_TIMEOUT, handshake).await.ok().flatten()
}

/// A unary `Next` call whose message never comes: its headers sent, its stream left open.
async fn stalled_call(
    client: &mut h2::client::SendRequest<bytes::Bytes>,
    addr: SocketAddr,
) -> Option<h2::SendStream<bytes::Bytes>> {
    let ready = tokio::time::timeout(CONNECT_TIMEOUT, client.clone().ready()).await.ok()?.ok()?;
    *client = ready;
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}/idmint.v1.IdMint/Next"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .ok()?;
    let (_response, stream) = client.send_request(request, false).ok()?;
    Some(stream)
}
