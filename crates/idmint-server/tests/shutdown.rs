//! The ordered shutdown, in process: with a slow batch in flight when the token is cancelled,
//! the server stops accepting, reports not ready while the batch is still being served, lets
//! it finish, stores its mark and releases its claim, in that order.

mod common;

use std::{
    net::TcpStream,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use common::{
    SHUTDOWN_ORDER, TestServer,
    check::{
        assert_all_above, assert_increasing, assert_unique, metric, report, stored_mark, time_ms,
        wait_until,
    },
    clock, http,
};
use idmint_core::Layout;
use idmint_server::{NamespaceConfig, ServerConfig, ShutdownStep};

/// What a task watching the server saw during the shutdown.
#[derive(Debug, Default)]
struct Seen {
    /// Not ready, before `Drained`, while the slow batch had not been answered.
    not_ready_during_drain: bool,
    /// A new connection attempt after `StoppedAccepting` and before `Drained` was refused.
    refused_during_drain: Option<bool>,
}

/// js53 has 128 IDs per millisecond, so a batch of 64,000 takes at least 500 ms of ticks.
const SLOW_BATCH: usize = 64_000;

fn js53_config() -> ServerConfig {
    ServerConfig {
        namespaces: vec![NamespaceConfig { layout: "js53".into(), ..NamespaceConfig::default() }],
        max_wait_ms: 10_000,
        ..ServerConfig::default()
    }
}

#[test]
fn shutdown_drains_a_slow_batch_and_persists_and_releases_in_order() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let layout = Layout::builtin("js53").expect("layout");
    let server = TestServer::on_dir(js53_config(), dir.path(), clock(0)).expect("start");
    let early = server.get("/v1/batch?count=100").ids();
    assert_eq!(server.get("/readyz").status, 200);
    let addr = server.addr;

    // The slow batch, on its own connection.
    let answered = Arc::new(AtomicBool::new(false));
    let batch = std::thread::spawn({
        let answered = Arc::clone(&answered);
        move || {
            let response = http::get(addr, &format!("/v1/batch?count={SLOW_BATCH}"));
            answered.store(true, Ordering::SeqCst);
            response
        }
    });
    // In flight: the generator has had to wait for a tick at least once.
    let exhaustions = r#"idmint_sequence_exhaustions_total{namespace="default"}"#;
    wait_until("the batch to wait for a tick", Duration::from_secs(5), || {
        metric(&server.server.render_metrics(), exhaustions) > 0
    });
    assert!(!answered.load(Ordering::SeqCst), "the batch finished before the shutdown began");

    let watcher = std::thread::spawn({
        let state = Arc::clone(&server.server);
        let answered = Arc::clone(&answered);
        move || {
            let mut seen = Seen::default();
            wait_until("the shutdown to release the claim", Duration::from_secs(20), || {
                let steps = state.shutdown_steps();
                let drained = steps.contains(&ShutdownStep::Drained);
                if !state.is_ready() && !drained && !answered.load(Ordering::SeqCst) {
                    seen.not_ready_during_drain = true;
                }
                if seen.refused_during_drain.is_none()
                    && steps.contains(&ShutdownStep::StoppedAccepting)
                    && !drained
                {
                    let attempt = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
                    seen.refused_during_drain = Some(attempt.is_err());
                }
                steps.contains(&ShutdownStep::Released)
            });
            seen
        }
    });
    server.shutdown.cancel();

    let response = batch.join().expect("batch thread");
    let slow = response.ids();
    assert_eq!(slow.len(), SLOW_BATCH, "the in-flight batch was answered in full");
    let seen = watcher.join().expect("watcher thread");
    let steps = server.server.shutdown_steps();
    let state = Arc::clone(&server.server);
    server.stop().expect("ordered shutdown");
    assert_eq!(steps, SHUTDOWN_ORDER);
    assert!(seen.not_ready_during_drain, "readiness did not turn off while the batch drained");
    assert_eq!(seen.refused_during_drain, Some(true), "a new connection was accepted in the drain");
    assert!(!state.is_ready());
    assert_eq!(state.namespace_infos()[0].generator_id, None, "the claim is still held");

    // The mark is on disk and covers every ID; the claim is free again.
    let mark = stored_mark(dir.path(), "default", 0);
    let before: Vec<u64> = early.iter().chain(&slow).copied().collect();
    assert_increasing(&before);
    assert!(before.iter().all(|&id| time_ms(&layout, id) <= mark), "an id above the mark");
    let again = TestServer::on_dir(js53_config(), dir.path(), clock(0)).expect("restart");
    assert_eq!(again.server.namespace_infos()[0].generator_id, Some(0));
    let after = again.get("/v1/batch?count=1000").ids();
    assert_all_above(&after, &before);
    again.stop().expect("ordered shutdown");

    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("shutdown_drains_a_slow_batch", assert_unique(&all));
}

/// A keep-alive connection that is idle when the shutdown begins is closed at once: it does
/// not hold the shutdown up for `drain_ms`. (So readiness cannot be watched over an already
/// open connection during the drain; the test above watches it in process.)
#[test]
fn idle_keep_alive_connections_do_not_hold_up_shutdown() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = ServerConfig { drain_ms: 30_000, ..ServerConfig::default() };
    let server = TestServer::on_dir(config, dir.path(), clock(0)).expect("start");
    let mut idle = http::Connection::open(server.addr).expect("connect");
    assert_eq!(idle.get("/readyz").expect("readyz").status, 200);
    let ids = idle.get("/v1/batch?count=10").expect("batch").ids();
    let started = std::time::Instant::now();
    server.stop().expect("ordered shutdown");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "shutdown waited {took:?} for an idle connection");
    if let Ok(response) = idle.get("/readyz") {
        panic!("the idle connection still answers after shutdown: {}", response.status);
    }
    report("idle_keep_alive_connections", assert_unique(&ids));
}
