//! The ordered shutdown, in process: when the token is cancelled the server reports not ready,
//! keeps serving for `shutdown_delay_ms` (so that a load balancer sees the 503 first), stops
//! accepting, lets a slow batch in flight finish, stores its mark and releases its claim, in
//! that order.

use std::{
    net::TcpStream,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use idmint_core::Layout;
use idmint_server::{NamespaceConfig, ServerConfig, ShutdownStep};
use idmint_testkit::{
    SHUTDOWN_ORDER, TestServer,
    check::{
        assert_all_above, assert_increasing, assert_unique, metric, report, stored_mark, time_ms,
        wait_until,
    },
    clock, http,
};

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

/// What a client polling a shutting-down server saw, in time from the cancel.
#[derive(Debug)]
struct Timeline {
    /// The first `/readyz` that answered 503 (None: none did before the refusal).
    first_not_ready: Option<Duration>,
    /// `/readyz` answers of 200 after the first 503.
    ready_again: usize,
    /// `/v1/next` answers of 200 after the first 503, and the last one's time.
    issued: usize,
    last_issued: Duration,
    /// `/v1/next` answers that were not 200 while the listener was open.
    failed: usize,
    /// The first connection refused.
    refused: Duration,
}

/// Cancels a server with `shutdown_delay_ms = delay_ms` and polls it on new connections
/// (`/readyz`, then `/v1/next`) until a connection is refused.
fn shutdown_timeline(delay_ms: u64) -> Timeline {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = ServerConfig { shutdown_delay_ms: delay_ms, ..ServerConfig::default() };
    let server = TestServer::on_dir(config, dir.path(), clock(0)).expect("start");
    assert_eq!(server.get("/readyz").status, 200);
    let addr = server.addr;
    let cancelled = Instant::now();
    server.shutdown.cancel();
    let mut seen: Option<Timeline> = None;
    let refused = loop {
        let at = cancelled.elapsed();
        assert!(at < Duration::from_secs(10), "the listener never closed: {seen:?}");
        // The refusal's time is when the attempt failed, not when it began: a connection
        // made just before the listener closes is reset by the close, after the delay.
        let Ok(ready) = http::send(addr, "GET", "/readyz", &[], None) else {
            break cancelled.elapsed();
        };
        let Some(timeline) = &mut seen else {
            if ready.status == 503 {
                seen = Some(Timeline {
                    first_not_ready: Some(at),
                    ready_again: 0,
                    issued: 0,
                    last_issued: at,
                    failed: 0,
                    refused: at,
                });
            }
            continue;
        };
        timeline.ready_again += usize::from(ready.status != 503);
        match http::send(addr, "GET", "/v1/next", &[], None) {
            Ok(next) if next.status == 200 => {
                timeline.issued += 1;
                timeline.last_issued = cancelled.elapsed();
            }
            Ok(_) => timeline.failed += 1,
            Err(_) => break cancelled.elapsed(),
        }
    };
    let state = Arc::clone(&server.server);
    server.stop().expect("ordered shutdown");
    assert_eq!(state.shutdown_steps(), SHUTDOWN_ORDER);
    let mut timeline = seen.unwrap_or(Timeline {
        first_not_ready: None,
        ready_again: 0,
        issued: 0,
        last_issued: refused,
        failed: 0,
        refused,
    });
    timeline.refused = refused;
    timeline
}

/// With a delay, `/readyz` answers 503 for the whole of it while new connections are still
/// accepted and `/v1/next` still issues; only then does the listener close. Without one (the
/// control: the order a load balancer cannot use), connections are refused at once, which the
/// same checks catch.
#[test]
fn readiness_turns_off_for_the_whole_delay_before_the_listener_closes() {
    let check = |delay_ms: u64, held: bool| {
        let timeline = shutdown_timeline(delay_ms);
        report_timeline(delay_ms, &timeline);
        let delay = Duration::from_millis(delay_ms);
        let ok = timeline.first_not_ready.is_some_and(|at| at < Duration::from_millis(100))
            && timeline.ready_again == 0
            && timeline.failed == 0
            && timeline.issued >= 10
            && timeline.refused >= delay
            && timeline.last_issued + Duration::from_millis(100) >= delay;
        assert_eq!(ok, held, "shutdown_delay_ms {delay_ms}: {timeline:?}");
    };
    check(500, true);
    check(0, false);
}

/// Shows the timeline (with `--nocapture`).
#[allow(clippy::print_stderr)]
fn report_timeline(delay_ms: u64, t: &Timeline) {
    eprintln!(
        "shutdown_delay_ms {delay_ms}: /readyz 503 first at {:?}; {} /v1/next answered 200 (last at \
         {:?}), {} not; ready again {} times; connection refused at {:?}",
        t.first_not_ready, t.issued, t.last_issued, t.failed, t.ready_again, t.refused
    );
}
