//! Calls that must wait for a namespace's ticks are served one after another, oldest first,
//! instead of taking turns at every tick and all finishing together: a client with two
//! requests in flight then gets one answer while the server works on the other.

use std::sync::Arc;

use idmint_coord::MemoryCoordinator;
use idmint_core::{AnyId, ManualClock};
use idmint_server::{NamespaceConfig, Server, ServerConfig};

const WALL_MS: u64 = 1_700_000_000_000;

/// IDs per call: six ticks of the default snowflake namespace.
const PER_CALL: u64 = 6 * 4_096;

fn raw(ids: &[AnyId]) -> Vec<u64> {
    ids.iter()
        .map(|id| match id {
            AnyId::U64(v) => *v,
            AnyId::U128(_) => panic!("snowflake ids are 64-bit"),
        })
        .collect()
}

/// How often the owner changes along the IDs of two calls, in order: 1 when one call's IDs
/// all lie below the other's.
fn switches(a: &[u64], b: &[u64]) -> usize {
    let mut all: Vec<(u64, bool)> =
        a.iter().map(|&id| (id, true)).chain(b.iter().map(|&id| (id, false))).collect();
    all.sort_unstable();
    all.windows(2).filter(|w| w[0].1 != w[1].1).count()
}

/// Two calls of six ticks each, started together on two threads. The first to wait holds
/// its turn until it has all its IDs; the other may take the rest of the tick both started
/// in, then waits for its turn. So the owner changes at most twice along the IDs, where
/// calls served tick by tick (the negative control: no turn) change it about twice a tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_calls_are_served_one_after_another() {
    let config = ServerConfig {
        namespaces: vec![NamespaceConfig::named("default")],
        ..ServerConfig::default()
    };
    let coordinator = Arc::new(MemoryCoordinator::new());
    let server = Server::start(config, coordinator, Arc::new(ManualClock::new(WALL_MS)))
        .await
        .expect("start");
    let mut seen = std::collections::HashSet::new();
    for trial in 0..5 {
        let call = |server: Arc<Server>| {
            tokio::spawn(
                async move { raw(&server.issue("default", PER_CALL).await.expect("issue")) },
            )
        };
        let (a, b) = (call(Arc::clone(&server)), call(Arc::clone(&server)));
        let (a, b) = (a.await.expect("call a"), b.await.expect("call b"));
        for ids in [&a, &b] {
            assert_eq!(ids.len() as u64, PER_CALL, "trial {trial}");
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "trial {trial}: a call's IDs increase");
            assert!(ids.iter().all(|id| seen.insert(*id)), "trial {trial}: an ID was issued twice");
        }
        let switches = switches(&a, &b);
        assert!(switches <= 2, "trial {trial}: the calls took turns {switches} times");
    }
    server.stop().await.expect("stop");
}
