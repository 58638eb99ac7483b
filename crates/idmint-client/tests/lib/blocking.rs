//! The blocking facade, used from a plain `#[test]` thread with no runtime of its own; the
//! server runs on a separate runtime.

use std::collections::HashSet;

use crate::support::{TestServer, requests};

#[test]
fn the_blocking_client_works_from_a_plain_thread() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime.block_on(TestServer::default());
    let client = idmint_client::Client::builder()
        .endpoint(&server.url)
        .prefetch(1000, 500)
        .build_blocking()
        .unwrap();
    let mut seen = HashSet::new();
    for _ in 0..20_000 {
        assert!(seen.insert(client.next().unwrap()));
    }
    let batch = client.batch(500).unwrap();
    assert_eq!(batch.len(), 500);
    assert!(batch.windows(2).all(|w| w[0] < w[1]));
    for id in batch {
        assert!(seen.insert(id));
    }
    assert!(requests(&server) <= 20 + 2 + 1, "{}", requests(&server));
    client.close();
    runtime.block_on(server.shut_down());
}

#[test]
fn building_outside_a_runtime_needs_build_blocking() {
    let err = idmint_client::Client::builder().endpoint("http://127.0.0.1:1").build().unwrap_err();
    assert_eq!(err.kind(), &idmint_client::ErrorKind::NoRuntime);
}
