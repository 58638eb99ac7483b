//! Namespaces of the store sources, in process, over real stores: `segment` over the file
//! store and a real Postgres (increasing, disjoint between two servers, continuing above after
//! a restart), `counters` over file counters (a new launch ID at every start, a new generator
//! ID when the counter part runs out), `redis` over two real Redis nodes (batches larger than
//! one Redis call, a node killed mid-run), decoding `sequence` IDs, honest readiness when a
//! store fails, and the configuration errors of sources and stores.
//!
//! Tests that need Postgres or Redis start them with `idmint_coord::testing` on free loopback
//! ports; without the program they are skipped with a message, and with `CI=true` they fail.

use std::{
    collections::HashSet,
    ops::Range,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use idmint_coord::{
    CounterStore, FileStore, IcicleClient, IcicleOptions, MemoryCoordinator, MemoryStore,
    PostgresOptions, PostgresStore, SegmentStore,
    testing::{self, Postgres, RedisServer},
};
use idmint_core::{AnyId, FieldValue, Layout, SystemClock};
use idmint_server::{Backends, Error, NamespaceConfig, SegmentSettings, ServerConfig, Source};
use tokio::runtime::Runtime;

use idmint_testkit::{
    TestServer,
    check::{assert_increasing, assert_unique, metric, report, wait_until},
    http,
};

/// A server over `backends` on the system clock, serving HTTP on a free port.
fn start(config: ServerConfig, backends: Backends) -> Result<TestServer, Error> {
    TestServer::builder(config).backends(backends).wall(Arc::new(SystemClock)).start()
}

/// Single IDs, GET batches and a POST batch of namespace `ns`, in the order received.
fn fetch(server: &TestServer, ns: &str, batches: &[u64]) -> Vec<u64> {
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(server.get(&format!("/v1/namespaces/{ns}/next")).id());
    }
    for &count in batches {
        let batch = server.get(&format!("/v1/namespaces/{ns}/batch?count={count}")).ids();
        assert_eq!(batch.len() as u64, count, "a batch of {count}");
        ids.extend(batch);
    }
    let body = br#"{"count": 7}"#;
    let target = format!("/v1/namespaces/{ns}/batch");
    let headers = [("Content-Type", "application/json")];
    let posted = http::send(server.addr, "POST", &target, &headers, Some(body)).expect("POST");
    ids.extend(posted.ids());
    ids
}

/// The gRPC fast path (`Server::issue_u64`), in process.
fn issue_u64(server: &TestServer, ns: &str, count: u64) -> Vec<u64> {
    let mut out = Vec::new();
    server.runtime().block_on(server.server.issue_u64(ns, count, &mut out)).expect("issue_u64");
    out
}

fn config(namespaces: Vec<NamespaceConfig>) -> ServerConfig {
    ServerConfig { namespaces, ..ServerConfig::default() }
}

/// A `sequence` namespace with short ranges, so that a test crosses many of them.
fn sequence(name: &str) -> NamespaceConfig {
    NamespaceConfig {
        layout: "sequence".into(),
        segment: Some(SegmentSettings {
            initial_step: 100,
            min_step: 100,
            max_step: 400,
            prefetch_percent: 50,
        }),
        ..NamespaceConfig::named(name)
    }
}

fn with_segments(store: Arc<dyn SegmentStore>) -> Backends {
    Backends { segments: Some(store), ..Backends::new(Arc::new(MemoryCoordinator::new())) }
}

/// The fields of an ID of `layout`.
fn fields(layout: &str, id: u64) -> Vec<(String, FieldValue)> {
    Layout::builtin(layout).expect("layout").decode(AnyId::U64(id)).expect("a valid id")
}

fn field(fields: &[(String, FieldValue)], name: &str) -> u64 {
    match fields.iter().find(|(n, _)| n == name) {
        Some((_, FieldValue::Number(n))) => *n,
        other => panic!("no number `{name}`: {other:?}"),
    }
}

/// The segment checks on one store: a server's IDs strictly increase (HTTP and the gRPC
/// path), a second server on the same store and namespace gets disjoint IDs, and a restart
/// continues above everything handed out before.
fn check_segments(store: &str, open: &dyn Fn() -> Arc<dyn SegmentStore>) {
    let first = start(config(vec![sequence("orders")]), with_segments(open()))
        .unwrap_or_else(|e| panic!("{store}: start: {e}"));
    let second = start(config(vec![sequence("orders")]), with_segments(open()))
        .unwrap_or_else(|e| panic!("{store}: start a second server: {e}"));
    let mut a = fetch(&first, "orders", &[1, 250, 1_000]);
    a.extend(issue_u64(&first, "orders", 500));
    let b = fetch(&second, "orders", &[300, 1_000]);
    a.extend(fetch(&first, "orders", &[2_000]));
    assert_increasing(&a);
    assert_increasing(&b);
    assert!(a[0] >= 1, "{store}: ids start at 1");
    let issued = metric(
        &first.get("/metrics").ok().text(),
        r#"idmint_ids_issued_total{namespace="orders"}"#,
    );
    assert_eq!(issued, a.len() as u64, "{store}: ids_issued counts every id");
    let before: Vec<u64> = a.iter().chain(&b).copied().collect();
    assert_unique(&before);
    first.stop().expect("ordered shutdown");
    second.stop().expect("ordered shutdown");

    let restarted = start(config(vec![sequence("orders")]), with_segments(open()))
        .unwrap_or_else(|e| panic!("{store}: restart: {e}"));
    let after = fetch(&restarted, "orders", &[100, 1_000]);
    assert_increasing(&after);
    let high = before.iter().max().copied().unwrap_or(0);
    assert!(after[0] > high, "{store}: after a restart {} is not above {high}", after[0]);
    restarted.stop().expect("ordered shutdown");
    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report(&format!("segments over {store}"), assert_unique(&all));
}

#[test]
fn segment_namespace_over_the_file_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().to_path_buf();
    check_segments("file", &|| Arc::new(FileStore::open(&path).expect("open the file store")));
}

#[test]
fn segment_namespace_over_postgres() {
    let Some(postgres) = testing::available(Postgres::start()) else { return };
    let url = postgres.url();
    let connect = || -> Arc<dyn SegmentStore> {
        let runtime = Runtime::new().expect("runtime");
        let store = runtime.block_on(PostgresStore::connect(&url, PostgresOptions::default()));
        Arc::new(store.expect("connect to postgres"))
    };
    check_segments("postgres", &connect);
}

/// A `decimal-id` namespace over file counters: every start takes a new launch ID, a small
/// `max_counter` makes it take new generator IDs (batches stay increasing across the switch),
/// and no ID repeats across all of it.
#[test]
fn decimal_id_namespace_over_file_counters() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let start = |dir: &Path| {
        let store = Arc::new(FileStore::open(dir).expect("open the file store"));
        let backends = Backends {
            counters: Some(store as Arc<dyn CounterStore>),
            ..Backends::new(Arc::new(MemoryCoordinator::new()))
        };
        let tickets = NamespaceConfig {
            layout: "decimal-id".into(),
            max_counter: Some(100),
            ..NamespaceConfig::named("tickets")
        };
        let config = ServerConfig { max_batch: 60, ..config(vec![tickets]) };
        start(config, backends).expect("start")
    };
    let mut all = Vec::new();
    let mut launches = Vec::new();
    let mut generators = HashSet::new();
    for _ in 0..2 {
        let server = start(dir.path());
        let ids = fetch(&server, "tickets", &[60, 60, 60, 60, 1, 60]);
        let grpc = issue_u64(&server, "tickets", 60);
        assert_increasing(&grpc);
        let launch: HashSet<u64> =
            ids.iter().map(|&id| field(&fields("decimal-id", id), "launch_id")).collect();
        assert_eq!(launch.len(), 1, "one launch id per start: {launch:?}");
        launches.extend(launch);
        for &id in ids.iter().chain(&grpc) {
            generators.insert(field(&fields("decimal-id", id), "generator_id"));
        }
        let json = server.get("/v1/namespaces").ok().json();
        assert!(json["namespaces"][0]["generator_id"].is_u64(), "{json}");
        assert_eq!(json["namespaces"][0]["order"], "sharded", "{json}");
        all.extend(ids);
        all.extend(grpc);
        server.stop().expect("ordered shutdown");
    }
    assert_ne!(launches[0], launches[1], "two starts took the same launch id");
    assert!(generators.len() >= 6, "400+ ids with max_counter 100 took {generators:?}");
    report("decimal-id over file counters", assert_unique(&all));
}

/// A `decimal-id` namespace with `launch_id` from config: its IDs carry that launch; a
/// second start with the same launch ID, or one below it, is refused naming the counter,
/// where without the check both starts would issue the same IDs; a start without one goes
/// on above it.
#[test]
fn a_decimal_id_launch_from_config_is_used_once() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let start = |launch_id: Option<u64>| {
        let store = Arc::new(FileStore::open(dir.path()).expect("open the file store"));
        let backends = Backends {
            counters: Some(store as Arc<dyn CounterStore>),
            ..Backends::new(Arc::new(MemoryCoordinator::new()))
        };
        let tickets = NamespaceConfig {
            layout: "decimal-id".into(),
            launch_id,
            ..NamespaceConfig::named("test")
        };
        start(config(vec![tickets]), backends)
    };
    let launch_of = |server: &TestServer| {
        let ids = fetch(server, "test", &[10]);
        let launches: HashSet<u64> =
            ids.iter().map(|&id| field(&fields("decimal-id", id), "launch_id")).collect();
        launches
    };
    let server = start(Some(7)).expect("launch 7");
    assert_eq!(launch_of(&server), HashSet::from([7]));
    server.stop().expect("ordered shutdown");
    for again in [7, 3] {
        let refused = start(Some(again)).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            refused.contains("taken before from counter `test-launch`, which is at 7"),
            "launch {again} again must be refused: {refused:?}"
        );
    }
    let server = start(None).expect("the next launch");
    assert_eq!(launch_of(&server), HashSet::from([8]));
    server.stop().expect("ordered shutdown");
    let server = start(Some(4_210)).expect("launch 4210");
    assert_eq!(launch_of(&server), HashSet::from([4_210]));
    server.stop().expect("ordered shutdown");
}

/// A `redis` namespace over two real Redis nodes with shards 1 and 2: batches over HTTP
/// (larger than one Redis call), no duplicates, both shards used; one node killed mid-run and
/// the namespace keeps serving from the other.
#[test]
fn redis_namespace_over_two_nodes_survives_one_dying() {
    let harness = Runtime::new().expect("runtime");
    let Some(mut a) = testing::available(harness.block_on(RedisServer::start())) else { return };
    let Some(b) = testing::available(harness.block_on(RedisServer::start())) else { return };
    let nodes = vec![a.url(), b.url()];
    harness.block_on(IcicleClient::set_shard(&nodes[0], 1, &nodes)).expect("set shard 1");
    harness.block_on(IcicleClient::set_shard(&nodes[1], 2, &nodes)).expect("set shard 2");
    let client = IcicleClient::new(&nodes, IcicleOptions::default()).expect("client");
    let backends =
        Backends { redis: Some(client), ..Backends::new(Arc::new(MemoryCoordinator::new())) };
    let icicle = NamespaceConfig {
        layout: "icicle".into(),
        source: Some(Source::Redis),
        ..NamespaceConfig::named("events")
    };
    let server = start(config(vec![icicle]), backends).expect("start");
    let shards = |ids: &[u64]| -> HashSet<u64> {
        ids.iter().map(|&id| field(&fields("icicle", id), "shard")).collect()
    };
    let mut all = Vec::new();
    for _ in 0..3 {
        let batch = server.get("/v1/namespaces/events/batch?count=5000").ids();
        assert_eq!(batch.len(), 5_000);
        assert_increasing(&batch);
        all.extend(batch);
    }
    all.extend(fetch(&server, "events", &[10]));
    assert_eq!(shards(&all), HashSet::from([1, 2]), "both nodes serve");

    a.kill().expect("kill the first node");
    let mut after = Vec::new();
    for _ in 0..5 {
        let batch = server.get("/v1/namespaces/events/batch?count=3000").ids();
        assert_eq!(batch.len(), 3_000);
        after.extend(batch);
    }
    after.extend(fetch(&server, "events", &[10]));
    assert_eq!(shards(&after), HashSet::from([2]), "only the live node serves");
    assert_eq!(server.get("/readyz").status, 200, "still ready with one node");
    all.extend(after);
    server.stop().expect("ordered shutdown");
    report("redis namespace", assert_unique(&all));
}

/// A `sequence` ID decodes to its value, without a time; what is not one is refused (4xx).
#[test]
fn sequence_ids_decode() {
    let store = Arc::new(MemoryStore::new());
    let server = start(config(vec![sequence("invoices")]), with_segments(store)).expect("start");
    let id = server.get("/v1/namespaces/invoices/next").id();
    let decoded = server.get(&format!("/v1/namespaces/invoices/decode/{id}")).ok().json();
    assert_eq!(decoded["layout"], "sequence");
    assert_eq!(decoded["fields"]["value"], id);
    assert!(decoded["time"].is_null(), "{decoded}");
    let max = server.get("/v1/decode/9223372036854775807").ok().json();
    assert_eq!(max["fields"]["value"], 9_223_372_036_854_775_807u64);
    for bad in ["0", "9223372036854775808", "-1", "x"] {
        let answer = server.get(&format!("/v1/decode/{bad}"));
        assert_eq!(answer.status, 400, "decode {bad}: {}", answer.text());
    }
    server.stop().expect("ordered shutdown");
}

/// A segment store that answers, fails or is slow (1.5 s per range, as a store near its own
/// request timeout), as a test says.
#[derive(Debug, Default)]
struct FlakyStore {
    inner: MemoryStore,
    /// 0: answer; 1: fail; 2: answer after 1.5 s.
    mode: AtomicU8,
}

#[async_trait::async_trait]
impl SegmentStore for FlakyStore {
    fn name(&self) -> &'static str {
        "flaky"
    }

    async fn next_range(
        &self,
        namespace: &str,
        step: u64,
    ) -> Result<Range<u64>, idmint_coord::Error> {
        match self.mode.load(Ordering::SeqCst) {
            0 => self.inner.next_range(namespace, step).await,
            1 => Err(idmint_coord::Error::Unavailable {
                backend: "flaky",
                reason: "switched off by the test".into(),
            }),
            _ => {
                tokio::time::sleep(Duration::from_millis(1_500)).await;
                self.inner.next_range(namespace, step).await
            }
        }
    }
}

/// A store that fails makes requests fail with 503 and the namespace not ready, until a
/// background probe finds it answering again, without any request; a request that would wait
/// on a slow store longer than `max_wait_ms` is answered with 503 in time.
#[test]
fn a_failing_store_makes_the_namespace_not_ready_until_it_answers() {
    let store = Arc::new(FlakyStore::default());
    let one_id_ranges = NamespaceConfig {
        segment: Some(SegmentSettings {
            initial_step: 1,
            min_step: 1,
            max_step: 1,
            prefetch_percent: 50,
        }),
        ..sequence("orders")
    };
    let config =
        ServerConfig { max_wait_ms: 300, claim_retry_ms: 50, ..config(vec![one_id_ranges]) };
    let server = start(config, with_segments(store.clone())).expect("start");
    let first = server.get("/v1/next").id();
    assert_eq!(server.get("/readyz").status, 200);

    store.mode.store(1, Ordering::SeqCst);
    // The allocator may hold one range fetched ahead (one ID here); the request after it needs
    // the store.
    let mut answers = (0..2).map(|_| server.get("/v1/next"));
    let failed = answers.find(|r| r.status != 200).expect("a request that needs the store");
    assert_eq!(failed.status, 503, "{}", failed.text());
    assert_eq!(failed.json()["error"]["code"], "coordination_unavailable");
    assert!(failed.header("retry-after").is_some());
    assert_eq!(server.get("/readyz").status, 503, "not ready after a failed store call");
    let failures = metric(
        &server.get("/metrics").ok().text(),
        r#"idmint_store_failures_total{namespace="orders"}"#,
    );
    assert!(failures >= 1);

    store.mode.store(0, Ordering::SeqCst);
    wait_until("/readyz after the store answers again", Duration::from_secs(5), || {
        server.get("/readyz").status == 200
    });

    store.mode.store(2, Ordering::SeqCst);
    let started = std::time::Instant::now();
    let mut answers = (0..2).map(|_| server.get("/v1/next"));
    let slow = answers.find(|r| r.status != 200).expect("a request that needs the store");
    assert_eq!(slow.status, 503, "{}", slow.text());
    assert!(slow.text().contains("no answer within 300 ms"), "{}", slow.text());
    assert!(started.elapsed() < Duration::from_millis(1_400), "{:?}", started.elapsed());
    store.mode.store(0, Ordering::SeqCst);
    wait_until("/readyz after the slow store", Duration::from_secs(10), || {
        server.get("/readyz").status == 200
    });
    let later = server.get("/v1/next").id();
    assert!(later > first);
    server.stop().expect("ordered shutdown");
}

/// Configurations that cannot start, each refused with `Error::Config` naming the problem,
/// before anything is claimed.
#[test]
fn inconsistent_sources_and_missing_stores_are_config_errors() {
    let store = Arc::new(MemoryStore::new());
    let all_stores = || Backends {
        segments: Some(store.clone()),
        counters: Some(store.clone()),
        ..Backends::new(Arc::new(MemoryCoordinator::new()))
    };
    let only_coordinator = || Backends::new(Arc::new(MemoryCoordinator::new()));
    let ns = |layout: &str, source: Option<Source>| NamespaceConfig {
        layout: layout.into(),
        source,
        ..NamespaceConfig::named("ns")
    };
    let segment = |settings: SegmentSettings| NamespaceConfig {
        segment: Some(settings),
        ..ns("sequence", None)
    };
    let steps = |initial, min, max, prefetch| SegmentSettings {
        initial_step: initial,
        min_step: min,
        max_step: max,
        prefetch_percent: prefetch,
    };
    let check = |what: &str, namespace: NamespaceConfig, backends: Backends, expected: &str| {
        let config = ServerConfig { max_batch: 1_000, ..config(vec![namespace]) };
        match start(config, backends) {
            Err(Error::Config(message)) => {
                assert!(message.contains(expected), "{what}: `{message}` lacks `{expected}`");
                assert_eq!(Error::Config(message).status(), 500);
            }
            Err(other) => panic!("{what}: expected a config error, got {other}"),
            Ok(_) => panic!("{what}: started"),
        }
    };
    check("no segment store", ns("sequence", None), only_coordinator(), "needs a segment store");
    check("no counter store", ns("decimal-id", None), only_coordinator(), "needs a counter store");
    check("no redis nodes", ns("icicle", Some(Source::Redis)), all_stores(), "needs redis nodes");
    check(
        "redis, snowflake",
        ns("snowflake", Some(Source::Redis)),
        all_stores(),
        "layout `icicle`",
    );
    check(
        "redis, another epoch",
        NamespaceConfig { epoch_ms: Some(0), ..ns("icicle", Some(Source::Redis)) },
        all_stores(),
        "without another epoch",
    );
    check(
        "segment, snowflake",
        ns("snowflake", Some(Source::Segment)),
        all_stores(),
        "layout `sequence`",
    );
    check(
        "counters, js53",
        ns("js53", Some(Source::Counters)),
        all_stores(),
        "layout `decimal-id`",
    );
    check(
        "generator, sequence",
        ns("sequence", Some(Source::Generator)),
        all_stores(),
        "has no generator",
    );
    check(
        "generator, decimal-id",
        ns("decimal-id", Some(Source::Generator)),
        all_stores(),
        "source `counters`",
    );
    check("step of 0", segment(steps(1, 0, 1, 15)), all_stores(), "1 <= min_step");
    check(
        "min above initial",
        segment(steps(10, 20, 100, 15)),
        all_stores(),
        "min_step (20) <= initial_step (10)",
    );
    check("max beyond 2^40", segment(steps(1, 1, (1 << 40) + 1, 15)), all_stores(), "max_step");
    check("prefetch 100", segment(steps(1, 1, 1, 100)), all_stores(), "1 to 99 percent");
    check(
        "segment settings on a generator",
        NamespaceConfig { segment: Some(SegmentSettings::default()), ..ns("snowflake", None) },
        all_stores(),
        "apply to source `segment` only",
    );
    check(
        "generator_id on a segment",
        NamespaceConfig { generator_id: Some(1), ..ns("sequence", None) },
        all_stores(),
        "`generator_id` applies to source `generator` only",
    );
    check(
        "launch_id 0",
        NamespaceConfig { launch_id: Some(0), ..ns("decimal-id", None) },
        all_stores(),
        "launch_id must be 1..=99999 (0 is for tests), not 0",
    );
    check(
        "launch_id above 99,999",
        NamespaceConfig { launch_id: Some(100_000), ..ns("decimal-id", None) },
        all_stores(),
        "launch_id must be 1..=99999",
    );
    check(
        "launch_id on a generator",
        NamespaceConfig { launch_id: Some(5), ..ns("snowflake", None) },
        all_stores(),
        "`launch_id` applies to source `counters` only, not `generator`",
    );
    check(
        "max_counter below max_batch",
        NamespaceConfig { max_counter: Some(999), ..ns("decimal-id", None) },
        all_stores(),
        "at least max_batch",
    );
    check(
        "max_counter on a snowflake",
        NamespaceConfig { max_counter: Some(5_000), ..ns("snowflake", None) },
        all_stores(),
        "applies to source `counters` only",
    );
    check(
        "counter names too long",
        NamespaceConfig { name: "n".repeat(60), ..ns("decimal-id", None) },
        all_stores(),
        "longer than 64 characters",
    );
    // An unknown source never gets that far: the configuration does not parse.
    let parsed = serde_json::from_str::<ServerConfig>(r#"{"namespaces": [{"source": "disk"}]}"#);
    let message = parsed.expect_err("an unknown source").to_string();
    assert!(message.contains("unknown variant `disk`"), "{message}");
}
