//! Failover: three servers sharing one coordinator (so each holds its own generator ID), one
//! stopped while a client takes 200,000 IDs through its prefetch buffer.

use std::collections::HashSet;

use idmint_client::Client;
use idmint_coord::MemoryCoordinator;
use idmint_server::ServerConfig;

use crate::support::{TestServer, requests};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_failed_over_without_duplicates() {
    const TOTAL: usize = 200_000;
    const STOP_AT: usize = 60_000;
    let coordinator = MemoryCoordinator::new();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(TestServer::start(ServerConfig::default(), coordinator.clone()).await);
    }
    let generators: HashSet<_> =
        servers.iter().map(|s| s.server.namespace_infos()[0].generator_id).collect();
    assert_eq!(generators.len(), 3, "each server holds its own generator id: {generators:?}");

    let client = Client::builder()
        .endpoints(servers.iter().map(|s| s.url.clone()))
        .prefetch(1000, 500)
        .build()
        .unwrap();
    let mut seen = HashSet::with_capacity(TOTAL);
    let stopped = servers.remove(1);
    let mut stopped = Some(stopped);
    let mut after_stop = None;
    for i in 0..TOTAL {
        if i == STOP_AT {
            let server = stopped.take().unwrap();
            assert!(requests(&server) > 0, "the server served before it was stopped");
            server.shut_down().await;
            after_stop = Some(servers.iter().map(requests).collect::<Vec<_>>());
        }
        let id = client.next().await.unwrap_or_else(|e| panic!("next #{i}: {e}"));
        assert!(seen.insert(id), "id {id} handed out twice (call #{i})");
    }
    assert_eq!(seen.len(), TOTAL);

    // Requests after the stop all went to the other two, and both took part.
    let before = after_stop.unwrap();
    let served: Vec<u64> =
        servers.iter().zip(&before).map(|(s, before)| requests(s) - before).collect();
    assert!(served.iter().all(|&n| n > 0), "both remaining servers served: {served:?}");
    assert!(served.iter().sum::<u64>() >= ((TOTAL - STOP_AT) / 1000) as u64 - 3, "{served:?}");

    // Direct batches after the stop succeed too, and repeat nothing.
    for _ in 0..20 {
        for id in client.batch(100).await.unwrap() {
            assert!(seen.insert(id), "batch id {id} seen before");
        }
    }
    client.close().await;
    for server in servers {
        server.shut_down().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_rotate_over_the_endpoints() {
    let coordinator = MemoryCoordinator::new();
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(TestServer::start(ServerConfig::default(), coordinator.clone()).await);
    }
    let client =
        Client::builder().endpoints(servers.iter().map(|s| s.url.clone())).build().unwrap();
    for _ in 0..30 {
        assert_eq!(client.batch(10).await.unwrap().len(), 10);
    }
    let served: Vec<u64> = servers.iter().map(requests).collect();
    assert_eq!(served, [10, 10, 10], "round-robin");
    client.close().await;
    for server in servers {
        server.shut_down().await;
    }
}
