//! Calls that wait are served first come, first served: at a namespace's ceiling, clients
//! that each ask for a whole tick's IDs are served in turn, none twice before another once.

use std::sync::{Arc, Mutex};

use idmint_coord::MemoryCoordinator;
use idmint_core::ManualClock;
use idmint_server::{Server, ServerConfig};
use idmint_testkit::check::u64s;

/// Clients asking at once, and batches each asks for in a row.
const CLIENTS: usize = 8;
const ROUNDS: usize = 40;
/// How far one client may get ahead of another: in turn, 2 (the first to arrive may take
/// the tick at hand and queue again before the others arrive), 3 on a loaded machine; the
/// same run without the queue reaches 15 to 29.
const LEAD: usize = 6;

/// 8 clients each ask for 4,096 IDs (a snowflake tick) 40 times in a row, starting together,
/// on a wall clock that stands still (logical time follows the monotonic clock, one tick per
/// ms): every batch waits for a tick of its own. Served in turn, no client ever runs more than
/// `LEAD` batches ahead of another, and no ID comes twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_at_the_ceiling_are_served_in_turn() {
    let server = Server::start(
        ServerConfig::default(),
        Arc::new(MemoryCoordinator::new()),
        Arc::new(ManualClock::new(1_700_000_000_000)),
    )
    .await
    .expect("start");
    let served = Arc::new(Mutex::new(Vec::new()));
    let start = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let mut tasks = Vec::new();
    for client in 0..CLIENTS {
        let (server, served, start) =
            (Arc::clone(&server), Arc::clone(&served), Arc::clone(&start));
        tasks.push(tokio::spawn(async move {
            start.wait().await;
            let mut ids = Vec::new();
            for _ in 0..ROUNDS {
                let batch = server.issue("default", 4_096).await.expect("within max_wait_ms");
                served.lock().expect("served").push(client);
                ids.extend(u64s(&batch));
            }
            ids
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("client"));
    }
    server.stop().await.expect("stop");
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "an ID came twice");

    let served = served.lock().expect("served").clone();
    let mut done = [0usize; CLIENTS];
    let mut lead = 0;
    for client in &served {
        done[*client] += 1;
        lead = lead.max(done[*client] - done.iter().copied().min().unwrap_or(0));
    }
    assert!(lead <= LEAD, "a client ran {lead} batches ahead of another: {served:?}");
}
