//! Restarts against the stored high-water mark (reliability T3, and the start-up guard on a
//! mark far ahead of the clock), in process: a `FileCoordinator` on a temporary directory and
//! an `OffsetClock` that tests set back and forth.

use std::sync::Arc;

use idmint_coord::FileCoordinator;
use idmint_server::{Error, Server, ServerConfig};
use idmint_testkit::{
    TestServer,
    check::{
        assert_all_above, assert_increasing, assert_unique, metric, metric_f64, report, snowflake,
        stored_mark, time_ms,
    },
    clock, http,
};

/// IDs over HTTP from every issuing route: single IDs, GET batches and a POST batch.
fn fetch_mixed(server: &TestServer) -> Vec<u64> {
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(server.get("/v1/next").id());
    }
    for count in [1, 2, 1_000, 5_000] {
        let batch = server.get(&format!("/v1/batch?count={count}")).ids();
        assert_eq!(batch.len(), count, "batch of {count}");
        ids.extend(batch);
    }
    let body = br#"{"count": 3000}"#;
    let posted = http::send(
        server.addr,
        "POST",
        "/v1/batch",
        &[("Content-Type", "application/json")],
        Some(body),
    )
    .expect("POST /v1/batch")
    .ids();
    assert_eq!(posted.len(), 3000);
    ids.extend(posted);
    for _ in 0..10 {
        ids.push(server.get("/v1/namespaces/default/next").id());
    }
    ids
}

/// Stop, set the wall clock back 60 s, start again on the same directory: every new ID is
/// above every earlier one, and the server reports that it runs about a minute ahead.
#[test]
fn restart_with_clock_set_back_60s_issues_only_higher_ids() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let first = TestServer::on_dir(ServerConfig::default(), dir.path(), clock(0)).expect("start");
    let before = fetch_mixed(&first);
    assert_increasing(&before);
    first.stop().expect("ordered shutdown");
    let mark = stored_mark(dir.path(), "default", 0);
    let layout = snowflake();
    assert!(before.iter().all(|&id| time_ms(&layout, id) <= mark), "an id above the stored mark");

    let second =
        TestServer::on_dir(ServerConfig::default(), dir.path(), clock(-60_000)).expect("restart");
    assert_eq!(second.server.namespace_infos()[0].generator_id, Some(0));
    let after = fetch_mixed(&second);
    assert_increasing(&after);
    assert_all_above(&after, &before);
    assert!(
        after.iter().all(|&id| time_ms(&layout, id) > mark),
        "an id after the restart lies at or below the mark the first run stored"
    );
    let ahead =
        metric_f64(&second.metrics(), r#"idmint_ahead_of_wall_seconds{namespace="default"}"#);
    assert!(ahead > 59.0, "idmint_ahead_of_wall_seconds is {ahead}, expected > 59");
    second.stop().expect("ordered shutdown");

    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("restart_with_clock_set_back_60s", assert_unique(&all));
}

/// The wall clock stepping back while the server runs: IDs keep increasing, and the metrics
/// count the step.
#[test]
fn clock_stepping_back_while_serving_keeps_ids_increasing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let wall = clock(0);
    let server =
        TestServer::on_dir(ServerConfig::default(), dir.path(), Arc::clone(&wall)).expect("start");
    let mut ids = server.get("/v1/batch?count=2000").ids();
    for step in [-5_i64, -1_000, -10_000, -3_600_000] {
        wall.set_offset_ms(step);
        ids.extend(server.get("/v1/batch?count=2000").ids());
        ids.push(server.get("/v1/next").id());
    }
    assert_increasing(&ids);
    let metrics = server.metrics();
    let steps = metric(&metrics, r#"idmint_clock_backward_total{namespace="default"}"#);
    // The first step (5 ms) hides in the time between requests; the others cannot.
    assert!(steps >= 3, "expected at least 3 backward steps counted, got {steps}");
    let largest = metric_f64(&metrics, r#"idmint_clock_backward_max_seconds{namespace="default"}"#);
    assert!(largest >= 3_500.0, "largest backward step {largest} s");
    server.stop().expect("ordered shutdown");
    assert!(
        ids.iter().all(|&id| time_ms(&snowflake(), id) <= stored_mark(dir.path(), "default", 0)),
        "an id above the stored mark"
    );
    report("clock_stepping_back_while_serving", assert_unique(&ids));
}

/// A stored mark further ahead of the clock than `max_ahead_ms` stops the start, and releases
/// the claim; `allow_ahead` starts anyway, above the mark.
#[test]
fn mark_too_far_ahead_refuses_to_start_unless_allowed() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let first = TestServer::on_dir(ServerConfig::default(), dir.path(), clock(0)).expect("start");
    let before = first.get("/v1/batch?count=500").ids();
    first.stop().expect("ordered shutdown");
    let mark = stored_mark(dir.path(), "default", 0);

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let start = |config: ServerConfig, offset_ms: i64| {
        let coordinator = Arc::new(FileCoordinator::open(dir.path()).expect("open"));
        runtime.block_on(Server::start(config, coordinator, clock(offset_ms)))
    };
    // A small limit: the mark is about 13 s ahead of a clock set back 10 s.
    let strict = ServerConfig { max_ahead_ms: 5_000, ..ServerConfig::default() };
    match start(strict.clone(), -10_000) {
        Err(Error::MarkTooFarAhead { namespace, ahead_ms, limit_ms }) => {
            assert_eq!(namespace, "default");
            assert_eq!(limit_ms, 5_000);
            assert!(ahead_ms > 10_000, "ahead_ms {ahead_ms}");
        }
        other => panic!("expected MarkTooFarAhead, got {other:?}"),
    }
    // The default limit (24 h), with the clock set back two days.
    match start(ServerConfig::default(), -2 * 86_400_000) {
        Err(e @ Error::MarkTooFarAhead { .. }) => {
            assert_eq!(e.code(), "mark_too_far_ahead");
            assert!(e.to_string().contains("allow_ahead"), "{e}");
        }
        other => panic!("expected MarkTooFarAhead, got {other:?}"),
    }

    // The refused starts released their claims: this one gets generator 0 and its mark.
    let allowed = ServerConfig { allow_ahead: true, ..strict };
    let coordinator = Arc::new(FileCoordinator::open(dir.path()).expect("open"));
    let server = TestServer::start(allowed, coordinator, clock(-10_000)).expect("allow_ahead");
    assert_eq!(server.server.namespace_infos()[0].generator_id, Some(0));
    let after = server.get("/v1/batch?count=500").ids();
    assert_all_above(&after, &before);
    let layout = snowflake();
    assert!(after.iter().all(|&id| time_ms(&layout, id) > mark), "an id at or below the mark");
    server.stop().expect("ordered shutdown");

    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("mark_too_far_ahead", assert_unique(&all));
}
