//! The prefetch buffer: after warm-up `next()` is served from memory, one request per batch;
//! IDs are unique across concurrent callers and increasing from one server, with one refill
//! in flight or several; `batch` bypasses the buffer; `close` ends everything.

use std::collections::HashSet;

use idmint_client::{AnyId, Client, ErrorKind};
use idmint_coord::MemoryCoordinator;
use idmint_server::{NamespaceConfig, ServerConfig};

use crate::support::{Answer, Fake, TestServer, requests};

/// Calls `next()` `n` times; every ID must be above the one before (and so distinct).
async fn take_increasing(client: &Client, n: usize) {
    let mut previous = client.next().await.unwrap();
    for i in 0..n {
        let id = client.next().await.unwrap();
        assert!(id > previous, "call #{i}: {id} after {previous}");
        previous = id;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_is_served_from_memory_after_warm_up() {
    const BATCH: usize = 1000;
    const TAKE: usize = 100_000;
    let server = TestServer::default().await;
    let client = Client::builder().endpoint(&server.url).prefetch(BATCH, 500).build().unwrap();
    client.next().await.unwrap();
    let warm = requests(&server);
    assert_eq!(warm, 1);
    // One server, one generator, one fetch at a time: every ID is above the one before.
    take_increasing(&client, TAKE).await;
    let fetched = requests(&server) - warm;
    // One request per batch, plus the one fetched ahead.
    assert!(fetched <= (TAKE / BATCH) as u64 + 1, "{fetched} requests for {TAKE} ids");
    assert!(fetched >= (TAKE / BATCH) as u64 - 1, "{fetched} requests for {TAKE} ids");
    assert!(client.buffered() <= 2 * BATCH);
    client.close().await;
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_get_distinct_ids() {
    let server = TestServer::default().await;
    let client = Client::builder().endpoint(&server.url).prefetch(500, 250).build().unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut ids = Vec::with_capacity(25_000);
                for _ in 0..25_000 {
                    ids.push(client.next().await.unwrap());
                }
                ids
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for task in tasks {
        let ids = task.await.unwrap();
        // Each caller sees its own IDs in increasing order too.
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for id in ids {
            assert!(seen.insert(id), "{id} handed out twice");
        }
    }
    assert_eq!(seen.len(), 100_000);
    client.close().await;
    server.shut_down().await;
}

#[tokio::test]
async fn batch_bypasses_the_buffer_and_is_capped() {
    let fake = Fake::start(vec![Answer::Ids((1..=300).collect())]).await;
    let client =
        Client::builder().endpoint(&fake.url).max_batch(300).prefetch(10, 5).build().unwrap();
    assert_eq!(client.batch(0).await.unwrap(), []);
    let ids = client.batch(1_000_000).await.unwrap();
    assert_eq!(ids.len(), 300);
    assert_eq!(fake.counts(), [300], "asked for max_batch, once");
    assert_eq!(client.buffered(), 0, "the buffer was not touched");
}

#[tokio::test]
async fn a_128_bit_namespace_gives_128_bit_ids() {
    let config = ServerConfig {
        namespaces: vec![NamespaceConfig {
            layout: "hot-guid".into(),
            ..NamespaceConfig::named("guids")
        }],
        ..ServerConfig::default()
    };
    let server = TestServer::start(config, MemoryCoordinator::new()).await;
    let client = Client::builder()
        .endpoint(&server.url)
        .namespace("guids")
        .prefetch(100, 10)
        .build()
        .unwrap();
    let mut previous = AnyId::U128(0);
    for _ in 0..1000 {
        let id = client.next().await.unwrap();
        assert!(matches!(id, AnyId::U128(_)), "{id:?}");
        assert!(id > previous);
        previous = id;
    }
    assert!(client.batch(10).await.unwrap().iter().all(|id| id.bits() == 128));
    client.close().await;
    server.shut_down().await;
}

#[tokio::test]
async fn close_ends_the_client_and_its_clones() {
    let server = TestServer::default().await;
    let client = Client::builder().endpoint(&server.url).build().unwrap();
    let clone = client.clone();
    client.next().await.unwrap();
    client.close().await;
    assert_eq!(client.next().await.unwrap_err().kind(), &ErrorKind::Closed);
    assert_eq!(clone.next().await.unwrap_err().kind(), &ErrorKind::Closed);
    assert_eq!(clone.batch(5).await.unwrap_err().kind(), &ErrorKind::Closed);
    assert_eq!(client.buffered(), 0);
    client.close().await;
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_refills_keep_next_increasing_against_a_real_server() {
    // Batches of 5,000 take two ticks of the snowflake layout (4,096 IDs per ms), so two
    // refills in flight at once are served tick by tick and their batches interleave.
    const TAKE: usize = 200_000;
    let server = TestServer::default().await;
    let client =
        Client::builder().endpoint(&server.url).prefetch(5000, 4999).pipeline(2).build().unwrap();
    take_increasing(&client, TAKE).await;
    // The current batch and at most `pipeline + 2` batches' worth more.
    assert!(client.buffered() <= 5 * 5000, "{} buffered", client.buffered());
    client.close().await;
    server.shut_down().await;
}

#[tokio::test]
async fn interleaved_batches_in_flight_together_are_handed_out_merged() {
    // The first two refills are in flight together and come back interleaved (as a server
    // serving both tick by tick answers); every later one is above both.
    let answers = [vec![1, 3, 5, 7], vec![2, 4, 8, 10], vec![12, 13], vec![14, 15], vec![16, 17]];
    let fake = Fake::start(answers.into_iter().map(Answer::Ids).collect()).await;
    let client = Client::builder().endpoint(&fake.url).prefetch(4, 3).pipeline(2).build().unwrap();
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(client.next().await.unwrap());
    }
    assert_eq!(ids, [1, 2, 3, 4, 5, 7, 8, 10, 12, 13].map(AnyId::U64));
    client.close().await;
}
