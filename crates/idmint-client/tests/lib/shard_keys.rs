//! `next_with_shard_key` and `batch_with_shard_key` against a real server: the key lands in
//! every ID, the buffered `next()` keeps the namespace's own key, and keys the namespace does
//! not take are refused with the server's 400, not retried.

use idmint_client::{Client, ErrorKind};
use idmint_coord::MemoryCoordinator;
use idmint_core::{AnyId, HotGuid};
use idmint_server::{NamespaceConfig, ServerConfig, ShardKeys};

use crate::support::TestServer;

fn guid(id: AnyId) -> HotGuid {
    HotGuid::try_from(id).expect("a 128-bit id")
}

#[tokio::test]
async fn shard_keys_per_call_reach_the_ids() {
    let config = ServerConfig {
        namespaces: vec![
            NamespaceConfig {
                layout: "hot-guid".into(),
                shard_keys: Some(ShardKeys { first: 0, last: 1023 }),
                ..NamespaceConfig::named("guids")
            },
            NamespaceConfig::named("flakes"),
        ],
        ..ServerConfig::default()
    };
    let server = TestServer::start(config, MemoryCoordinator::new()).await;
    let client = Client::builder().endpoint(&server.url).namespace("guids").build().unwrap();
    let mut previous: Option<HotGuid> = None;
    for key in [0, 1023, 7, 7, 512] {
        let id = guid(client.next_with_shard_key(key).await.unwrap());
        assert_eq!(id.shard_key(), key);
        assert!(previous.is_none_or(|p| id > p), "{id} after {previous:?}");
        previous = Some(id);
    }
    let batch = client.batch_with_shard_key(100, 99).await.unwrap();
    assert_eq!(batch.len(), 100);
    assert!(batch.iter().all(|&id| guid(id).shard_key() == 99));
    assert_eq!(guid(client.next().await.unwrap()).shard_key(), 0, "next() keeps the own key");
    assert!(client.batch_with_shard_key(0, 5).await.unwrap().is_empty());

    let refused = |error: idmint_client::Error, message: &str| match error.kind() {
        ErrorKind::Rejected { status: 400, code, message: said, .. } => {
            assert_eq!(code, "bad_request");
            assert!(said.contains(message), "{said:?} lacks {message:?}");
        }
        other => panic!("expected a 400, got {other:?}"),
    };
    refused(client.next_with_shard_key(1024).await.unwrap_err(), "outside the shard keys");
    let flakes = Client::builder().endpoint(&server.url).namespace("flakes").build().unwrap();
    refused(flakes.next_with_shard_key(1).await.unwrap_err(), "hot-guid namespaces only");
    client.close().await;
    flakes.close().await;
    server.shut_down().await;
}
