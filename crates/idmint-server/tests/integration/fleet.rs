//! Fleet options in process, on a shared `MemoryCoordinator` (several "servers" in one test):
//! spares that start not ready and wait for a generator ID (`wait_for_claim`, reliability T6's
//! pool = servers + 1), pools limited to the first N generator IDs (`generator_pool`), and
//! readiness that follows the stored window (a server whose mark cannot be extended reports
//! not ready once its window is used up, while it still holds its claim).

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use idmint_coord::{Coordinator, Error as CoordError, MemoryCoordinator};
use idmint_server::{Error, FieldSetting, NamespaceConfig, ServerConfig};
use idmint_testkit::{
    FailingMarks, TestServer,
    check::{assert_all_above, assert_unique, metric, report, snowflake, time_ms, wait_until},
    clock,
};

/// One `default` namespace limited to the first `pool` generator IDs.
fn pooled(pool: u64, wait_for_claim: bool) -> ServerConfig {
    ServerConfig {
        namespaces: vec![NamespaceConfig {
            generator_pool: Some(pool),
            ..NamespaceConfig::named("default")
        }],
        window_ms: 500,
        wait_for_claim,
        claim_retry_ms: 50,
        ..ServerConfig::default()
    }
}

fn start(config: ServerConfig, coordinator: &MemoryCoordinator) -> Result<TestServer, Error> {
    TestServer::start(config, Arc::new(coordinator.clone()), clock(0))
}

/// The generator ID `/v1/namespaces` reports for the first namespace (`None`: not held).
fn generator_id(server: &TestServer) -> Option<u64> {
    server.get("/v1/namespaces").ok().json()["namespaces"][0]["generator_id"].as_u64()
}

/// T6's spare: with the pool of one generator ID held, a server with `wait_for_claim` starts
/// not ready (503 on `/readyz` and on requests, no generator ID), and takes the ID over once
/// its holder stops, issuing only above everything the holder issued.
#[test]
fn a_spare_waits_for_the_pool_and_takes_over_above_the_mark() {
    let coordinator = MemoryCoordinator::new();
    let holder = start(pooled(1, false), &coordinator).expect("the holder starts");
    assert_eq!(generator_id(&holder), Some(0));
    let spare = start(pooled(1, true), &coordinator).expect("the spare starts anyway");
    assert_eq!(spare.get("/readyz").status, 503, "a waiting spare is not ready");
    assert_eq!(generator_id(&spare), None);
    let refused = spare.get("/v1/next");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"]["code"], "not_ready", "{}", refused.text());
    let metrics = spare.metrics();
    assert_eq!(metric(&metrics, r#"idmint_namespace_ready{namespace="default"}"#), 0);
    assert_eq!(metric(&metrics, r#"idmint_claims_total{namespace="default"}"#), 0);

    let mut before = holder.get("/v1/batch?count=1000").ids();
    before.push(holder.get("/v1/next").id());
    holder.stop().expect("the holder stops and releases");
    let mark = coordinator.mark("default", 0).expect("the holder's mark stays");

    wait_until("the spare to take generator 0", Duration::from_secs(5), || {
        spare.get("/readyz").status == 200
    });
    assert_eq!(generator_id(&spare), Some(0));
    let after = spare.get("/v1/batch?count=1000").ids();
    assert_all_above(&after, &before);
    let layout = snowflake();
    assert!(after.iter().all(|&id| time_ms(&layout, id) > mark), "an id at or below the mark");
    assert_eq!(
        metric(&spare.metrics(), r#"idmint_claims_total{namespace="default"}"#),
        1,
        "one claim, after waiting"
    );
    spare.stop().expect("stop");
    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("a_spare_waits_for_the_pool", assert_unique(&all));
}

/// Without `wait_for_claim` a full pool still refuses the start, and `wait_for_claim` does
/// not hide errors that need an operator (a mark stored under another layout).
#[test]
fn only_claims_that_may_succeed_later_are_waited_for() {
    let coordinator = MemoryCoordinator::new();
    let holder = start(pooled(1, false), &coordinator).expect("the holder starts");
    match start(pooled(1, false), &coordinator) {
        Err(Error::Coord(CoordError::PoolExhausted { size: 1, .. })) => {}
        Err(e) => panic!("expected PoolExhausted, got {e}"),
        Ok(_) => panic!("a full pool must refuse the start"),
    }
    holder.stop().expect("stop");

    let mut other_layout = pooled(1, true);
    other_layout.namespaces[0].layout = "js53".into();
    match start(other_layout, &coordinator) {
        Err(Error::Coord(CoordError::LayoutChanged { .. })) => {}
        Err(e) => panic!("expected LayoutChanged, got {e}"),
        Ok(_) => panic!("a changed layout must refuse the start, even when waiting"),
    }
}

/// `generator_pool = 2`: the first two servers get 0 and 1, the third finds the pool full.
#[test]
fn a_generator_pool_limits_the_ids_claimed() {
    let coordinator = MemoryCoordinator::new();
    let first = start(pooled(2, false), &coordinator).expect("first");
    let second = start(pooled(2, false), &coordinator).expect("second");
    assert_eq!((generator_id(&first), generator_id(&second)), (Some(0), Some(1)));
    assert!(matches!(
        start(pooled(2, false), &coordinator),
        Err(Error::Coord(CoordError::PoolExhausted { size: 2, .. }))
    ));
    let mut ids = first.get("/v1/batch?count=1000").ids();
    ids.extend(second.get("/v1/batch?count=1000").ids());
    report("a_generator_pool_limits_the_ids_claimed", assert_unique(&ids));
}

#[test]
fn invalid_pools_and_retry_times_are_refused() {
    let coordinator = MemoryCoordinator::new();
    let refused = |config: ServerConfig, needle: &str| match start(config, &coordinator) {
        Err(Error::Config(message)) => {
            assert!(message.contains(needle), "`{message}` does not mention `{needle}`");
        }
        Err(e) => panic!("expected a configuration error about {needle}, got {e}"),
        Ok(_) => panic!("expected a configuration error about {needle}"),
    };
    refused(pooled(0, false), "generator_pool must be 1..=1024");
    refused(pooled(1025, false), "generator_pool must be 1..=1024");
    let mut both = pooled(2, false);
    both.namespaces[0].generator_id = Some(1);
    refused(both, "not both");
    refused(ServerConfig { claim_retry_ms: 0, ..pooled(1, true) }, "claim_retry_ms");
}

/// A memory coordinator whose mark writes can be made to fail (as an unreachable etcd would)
/// while its claims stay held.
fn unreachable() -> FailingMarks<MemoryCoordinator> {
    FailingMarks::new("unreachable-memory", MemoryCoordinator::new(), || CoordError::Unavailable {
        backend: "memory",
        reason: "injected fault: no answer".into(),
    })
}

/// Readiness follows the window: while the claim is still held but the mark cannot be
/// extended, `/readyz` turns 503 once the stored window is used up (requests get 503 too), and
/// 200 again once an extension succeeds.
#[test]
fn readiness_turns_off_when_the_window_is_used_up() {
    let coordinator = Arc::new(unreachable());
    let config = ServerConfig { window_ms: 300, max_wait_ms: 50, ..ServerConfig::default() };
    let server =
        TestServer::start(config, Arc::clone(&coordinator) as Arc<dyn Coordinator>, clock(0))
            .expect("start");
    assert_eq!(server.get("/readyz").status, 200);
    let mut ids = server.get("/v1/batch?count=100").ids();

    coordinator.failing.store(true, Ordering::SeqCst);
    wait_until("/readyz to answer 503", Duration::from_secs(5), || {
        server.get("/readyz").status == 503
    });
    let refused = server.get("/v1/next");
    assert_eq!(refused.status, 503, "{}", refused.text());
    let metrics = server.metrics();
    assert_eq!(metric(&metrics, "idmint_ready"), 0);
    assert_eq!(metric(&metrics, r#"idmint_claims_lost_total{namespace="default"}"#), 0);
    assert_eq!(generator_id(&server), Some(0), "the claim is still held");

    coordinator.failing.store(false, Ordering::SeqCst);
    wait_until("/readyz to answer 200 again", Duration::from_secs(5), || {
        server.get("/readyz").status == 200
    });
    ids.extend(server.get("/v1/batch?count=100").ids());
    server.stop().expect("stop");
    report("readiness_turns_off_when_the_window_is_used_up", assert_unique(&ids));
}

/// A fixed generator ID is checked against the layout and the fixed fields when the
/// configuration is validated, so a bad one is a configuration error (before any claim), not
/// a claim that is made and then given back.
#[test]
fn a_bad_fixed_generator_id_is_refused_before_any_claim() {
    let coordinator = MemoryCoordinator::new();
    let fixed = |id: u64, worker: Option<u64>| {
        let mut config = pooled(1, false);
        config.namespaces[0].generator_pool = None;
        config.namespaces[0].generator_id = Some(id);
        if let Some(worker) = worker {
            config.namespaces[0].fields.insert("worker".into(), FieldSetting::Number(worker));
        }
        config
    };
    let refused = |config: ServerConfig, needle: &str| match start(config, &coordinator) {
        Err(Error::Config(message)) => {
            assert!(message.contains(needle), "`{message}` does not mention `{needle}`");
        }
        Err(e) => panic!("expected a configuration error about {needle}, got {e}"),
        Ok(_) => panic!("expected a configuration error about {needle}"),
    };
    refused(fixed(1024, None), "generator id");
    // The ID sets `worker` already: fixing it too is refused, naming both ways.
    refused(fixed(3, Some(1)), "give generator_id or fix `worker` in fields");
    // Negative control: a good fixed ID starts and holds that ID.
    let server = start(fixed(3, None), &coordinator).expect("a good fixed id");
    assert_eq!(generator_id(&server), Some(3));
    let info = server.get("/v1/namespaces").ok().json();
    assert_eq!(info["namespaces"][0]["order"], "increasing");
}
