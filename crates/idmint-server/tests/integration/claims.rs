//! Two servers on one data directory (reliability T10), in process: a fixed generator ID held
//! by one server is refused to the next with `Conflict` naming the holder; without a fixed ID
//! the next server takes the next free generator, and the two issue distinct IDs.

use std::{collections::HashSet, sync::Arc};

use idmint_coord::{Coordinator, FileCoordinator};
use idmint_core::{AnyId, FieldValue, Layout};
use idmint_server::{Error, NamespaceConfig, Server, ServerConfig};
use idmint_testkit::{
    TestServer,
    check::{assert_unique, report},
    clock,
};

fn fixed(generator_id: Option<u64>) -> ServerConfig {
    ServerConfig {
        namespaces: vec![NamespaceConfig { generator_id, ..NamespaceConfig::named("default") }],
        ..ServerConfig::default()
    }
}

/// The snowflake worker field of an ID.
fn worker(id: u64) -> u64 {
    let fields = Layout::builtin("snowflake").expect("layout").decode(AnyId::U64(id)).expect("id");
    match fields.iter().find(|(name, _)| name == "worker") {
        Some((_, FieldValue::Number(n))) => *n,
        other => panic!("no worker field: {other:?}"),
    }
}

#[test]
fn second_server_on_a_held_generator_id_is_refused_and_the_next_takes_generator_1() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let shared: Arc<dyn Coordinator> = Arc::new(FileCoordinator::open(dir.path()).expect("open"));
    let first = TestServer::start(fixed(Some(0)), Arc::clone(&shared), clock(0)).expect("first");
    assert_eq!(first.server.namespace_infos()[0].generator_id, Some(0));

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Through the same coordinator, and through another one on the same directory.
    let other: Arc<dyn Coordinator> = Arc::new(FileCoordinator::open(dir.path()).expect("open"));
    for coordinator in [Arc::clone(&shared), other] {
        let refused = runtime.block_on(Server::start(fixed(Some(0)), coordinator, clock(0)));
        match refused {
            Err(Error::Coord(idmint_coord::Error::Conflict {
                namespace,
                generator_id,
                holder,
            })) => {
                assert_eq!(namespace, "default");
                assert_eq!(generator_id, 0);
                let pid = format!("pid {}", std::process::id());
                assert!(holder.contains(&pid), "holder {holder:?} does not name {pid}");
            }
            other => panic!("expected Error::Coord(Conflict), got {other:?}"),
        }
    }

    // No fixed generator ID: the lowest free one, 1 (the refused starts hold nothing).
    let coordinator = Arc::new(FileCoordinator::open(dir.path()).expect("open"));
    let second = TestServer::start(fixed(None), coordinator, clock(0)).expect("second");
    assert_eq!(second.server.namespace_infos()[0].generator_id, Some(1));

    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.extend(first.get("/v1/batch?count=2000").ids());
        ids.extend(second.get("/v1/batch?count=2000").ids());
        ids.push(first.get("/v1/next").id());
        ids.push(second.get("/v1/next").id());
    }
    let workers: HashSet<u64> = ids.iter().map(|&id| worker(id)).collect();
    assert_eq!(workers, HashSet::from([0, 1]), "ids come from generators 0 and 1");
    report("two_servers_one_directory", assert_unique(&ids));

    first.stop().expect("ordered shutdown");
    second.stop().expect("ordered shutdown");
}
