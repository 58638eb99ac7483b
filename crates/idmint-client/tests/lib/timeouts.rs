//! Timeouts: an endpoint that accepts connections and never answers is given up on after the
//! configured timeout, and the request moves on to the next endpoint. These tests wait for
//! real time, but only as long as the client's own bounded timeout.

use std::{sync::atomic::Ordering, time::Duration};

use idmint_client::{Client, ErrorKind};

use crate::support::{Silent, TestServer, requests};

const TIMEOUT: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_silent_endpoint_times_out_and_fails_over() {
    let silent = Silent::start().await;
    let server = TestServer::default().await;
    let client = Client::builder()
        .endpoints([&silent.url, &server.url])
        .timeout(TIMEOUT)
        // Long enough that the silent endpoint is not probed again during the test.
        .eject(Duration::from_secs(60), Duration::from_secs(60))
        .build()
        .unwrap();
    // Round-robin: one of the first two requests goes to the silent endpoint first.
    let mut slowest = Duration::ZERO;
    for _ in 0..2 {
        let started = tokio::time::Instant::now();
        assert_eq!(client.batch(10).await.unwrap().len(), 10);
        slowest = slowest.max(started.elapsed());
    }
    assert_eq!(silent.accepted.load(Ordering::SeqCst), 1, "the silent endpoint was tried once");
    assert!(slowest >= TIMEOUT, "the timeout was waited for: {slowest:?}");
    assert!(slowest < TIMEOUT * 10, "and then the request failed over: {slowest:?}");
    assert_eq!(requests(&server), 2);
    // Ejected now: further requests go straight to the healthy server.
    for _ in 0..5 {
        client.batch(10).await.unwrap();
    }
    assert_eq!(silent.accepted.load(Ordering::SeqCst), 1, "the silent endpoint was skipped");
    assert_eq!(requests(&server), 7);
    client.close().await;
    server.shut_down().await;
}

#[tokio::test]
async fn only_silent_endpoints_give_up_after_the_attempts() {
    let silent = Silent::start().await;
    let client = Client::builder()
        .endpoint(&silent.url)
        .timeout(Duration::from_millis(100))
        .attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .build()
        .unwrap();
    let err = client.next().await.unwrap_err();
    let ErrorKind::Unavailable { attempts, last } = err.kind() else { panic!("{err}") };
    assert_eq!(*attempts, 2);
    assert!(last.ends_with("no answer within 100 ms"), "{last}");
    client.close().await;
}

#[tokio::test]
async fn a_refused_connection_fails_over_at_once() {
    // A port that was free a moment ago: nothing listens there now.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let server = TestServer::default().await;
    let client = Client::builder()
        .endpoints([&closed, &server.url])
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    for _ in 0..4 {
        assert_eq!(client.batch(3).await.unwrap().len(), 3);
    }
    assert!(started.elapsed() < Duration::from_secs(5), "no timeout was waited for");
    assert_eq!(requests(&server), 4);
    client.close().await;
    server.shut_down().await;
}
