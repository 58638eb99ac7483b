//! Several generators per namespace (`generators = K`): K claims, fenced and marked each,
//! calls that take turns over them and move on when one's tick is used up, batches and
//! per-generator order that stay increasing, `k-sorted` in `NamespaceInfo`, and stop and
//! failed starts that release every claim.

use std::{collections::HashSet, sync::Arc};

use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds, MemoryCoordinator};
use idmint_core::{Layout, ManualClock};
use idmint_server::{Error, NamespaceConfig, Server, ServerConfig, Source};
use idmint_testkit::check::u64s;

const WALL_MS: u64 = 1_700_000_000_000;

/// One `default` snowflake namespace with `generators` and `generator_pool` as given.
fn config(generators: Option<u64>, pool: Option<u64>) -> ServerConfig {
    ServerConfig {
        namespaces: vec![NamespaceConfig {
            generators,
            generator_pool: pool,
            ..NamespaceConfig::named("default")
        }],
        ..ServerConfig::default()
    }
}

async fn start(
    config: ServerConfig,
    coordinator: &MemoryCoordinator,
) -> Result<Arc<Server>, Error> {
    Server::start(config, Arc::new(coordinator.clone()), Arc::new(ManualClock::new(WALL_MS))).await
}

/// The generator ID field of a snowflake ID.
fn generator_of(id: u64) -> u64 {
    (id >> 12) & 0x3ff
}

/// Whether `generator_id` of the namespace is free in `coordinator` (claims it and gives it
/// back).
async fn is_free(coordinator: &MemoryCoordinator, generator_id: u64) -> bool {
    let fingerprint = Layout::builtin("snowflake").expect("snowflake").fingerprint();
    let request = ClaimRequest::new("default", GeneratorIds::Fixed(generator_id), &fingerprint);
    match coordinator.claim(&request).await {
        Ok(claim) => {
            coordinator.release(&claim).await.expect("release");
            true
        }
        Err(_) => false,
    }
}

/// K claims, each its own generator ID; above 1 the order across batches is `k-sorted`.
#[tokio::test]
async fn k_generators_hold_k_ids_and_say_k_sorted() {
    let check = async |generators: Option<u64>, held: Vec<u64>, order: &str| {
        let coordinator = MemoryCoordinator::new();
        let server = start(config(generators, None), &coordinator).await.expect("start");
        let info = server.namespace_infos().remove(0);
        let mut ids = info.generator_ids.clone();
        ids.sort_unstable();
        assert_eq!(ids, held, "{generators:?}");
        assert_eq!(info.order, order, "{generators:?}");
        assert!(info.ready && server.is_ready(), "{generators:?}");
        for id in &held {
            assert!(!is_free(&coordinator, *id).await, "generator id {id} must be held");
        }
        server.stop().await.expect("stop");
        for id in &held {
            assert!(is_free(&coordinator, *id).await, "stop must release generator id {id}");
        }
    };
    check(None, vec![0], "increasing").await;
    check(Some(1), vec![0], "increasing").await;
    check(Some(4), vec![0, 1, 2, 3], "k-sorted").await;
}

/// Calls take turns over the generators; every batch comes from one generator and increases,
/// and so does every generator's sequence of IDs, call after call; no ID twice.
#[tokio::test]
async fn every_batch_and_every_generator_stays_increasing() {
    let coordinator = MemoryCoordinator::new();
    let server = start(config(Some(4), None), &coordinator).await.expect("start");
    let mut seen = HashSet::new();
    let mut last_per_generator = [None::<u64>; 4];
    for call in 0..400 {
        let batch = u64s(&server.issue("default", 100).await.expect("issue"));
        assert_eq!(batch.len(), 100);
        assert!(batch.windows(2).all(|w| w[0] < w[1]), "call {call}: batch not increasing");
        let generator = generator_of(batch[0]);
        assert!(
            batch.iter().all(|id| generator_of(*id) == generator),
            "call {call}: two generators"
        );
        let slot = &mut last_per_generator[usize::try_from(generator).expect("small")];
        if let Some(last) = *slot {
            assert!(batch[0] > last, "call {call}: generator {generator} went back");
        }
        *slot = batch.last().copied();
        assert!(batch.iter().all(|id| seen.insert(*id)), "call {call}: an id issued twice");
    }
    assert!(last_per_generator.iter().all(Option::is_some), "every generator issued");
    server.stop().await.expect("stop");
}

/// Within one millisecond (the clocks stand still), a call whose generator has used up its
/// tick moves on to the next generator instead of waiting: with 4 generators, 4 calls of a
/// whole tick (4,096) succeed without any wait (`max_wait_ms = 0`), from 4 generators, and
/// the 5th is busy. The control: with one generator, the second call is busy already.
#[tokio::test(start_paused = true)]
async fn a_used_up_tick_moves_the_call_to_another_generator() {
    let check = async |generators: u64, served: usize| {
        let coordinator = MemoryCoordinator::new();
        let mut config = config(Some(generators), None);
        config.max_wait_ms = 0;
        let server = start(config, &coordinator).await.expect("start");
        let mut from = HashSet::new();
        for call in 0..served {
            let batch = u64s(&server.issue("default", 4_096).await.unwrap_or_else(|e| {
                panic!("{generators} generators, call {call}: {e}");
            }));
            from.insert(generator_of(batch[0]));
        }
        assert_eq!(from.len(), served, "{generators} generators: each call from another one");
        let busy = server.issue("default", 4_096).await;
        assert!(matches!(busy, Err(Error::Busy { .. })), "{generators} generators: {busy:?}");
        server.stop().await.expect("stop");
    };
    check(4, 4).await;
    check(1, 1).await;
}

/// Claims are all or nothing: a server that gets only some of its K generator IDs fails to
/// start and gives back the ones it got.
#[tokio::test]
async fn a_start_short_of_generators_releases_what_it_claimed() {
    let coordinator = MemoryCoordinator::new();
    let first = start(config(Some(2), Some(3)), &coordinator).await.expect("first server");
    let second = start(config(Some(2), Some(3)), &coordinator).await;
    assert!(second.is_err(), "only one generator id is left for two claims");
    assert!(is_free(&coordinator, 2).await, "the failed start must release generator id 2");
    first.stop().await.expect("stop");
}

/// Out-of-range or conflicting `generators` settings are refused with a clear reason.
#[tokio::test]
async fn bad_generators_settings_are_refused() {
    let coordinator = MemoryCoordinator::new();
    let check = async |ns: NamespaceConfig, reason: &str| {
        let config = ServerConfig { namespaces: vec![ns], ..ServerConfig::default() };
        match start(config, &coordinator).await {
            Err(Error::Config(message)) => assert!(message.contains(reason), "{message}"),
            Err(other) => panic!("expected a config error with `{reason}`, got {other}"),
            Ok(_) => panic!("expected a config error with `{reason}`, the server started"),
        }
    };
    let ns = |generators| NamespaceConfig { generators, ..NamespaceConfig::named("default") };
    check(ns(Some(0)), "generators must be 1..=64").await;
    check(ns(Some(65)), "generators must be 1..=64").await;
    check(NamespaceConfig { generator_pool: Some(2), ..ns(Some(3)) }, "generators must be 1..=2")
        .await;
    check(NamespaceConfig { generator_id: Some(5), ..ns(Some(2)) }, "not generator_id").await;
    let segment =
        NamespaceConfig { source: Some(Source::Segment), layout: "sequence".into(), ..ns(Some(2)) };
    check(segment, "`generators` applies to source `generator` only").await;
}

/// A datacenter (or LableOrg cluster) fixed by config beside negotiated generator IDs: the
/// namespace claims only among the generator IDs that have it, lowest free first, and every
/// ID carries it; a full datacenter is refused even with other datacenters free; and fixing it
/// beside `generator_id`, or out of range, is a config error.
#[tokio::test]
async fn a_fixed_datacenter_claims_only_its_own_generator_ids() {
    use idmint_server::FieldSetting;

    let in_dc = |dc: u64, generators: u64, pool: Option<u64>| ServerConfig {
        namespaces: vec![NamespaceConfig {
            fields: [("datacenter".to_owned(), FieldSetting::Number(dc))].into(),
            generators: Some(generators),
            generator_pool: pool,
            ..NamespaceConfig::named("default")
        }],
        ..ServerConfig::default()
    };
    let coordinator = MemoryCoordinator::new();
    let first = start(in_dc(3, 30, None), &coordinator).await.expect("start");
    let mut held = first.namespace_infos().remove(0).generator_ids;
    held.sort_unstable();
    assert_eq!(held, (96..126).collect::<Vec<_>>(), "datacenter 3 is generator ids 96..=127");
    for _ in 0..50 {
        let batch = u64s(&first.issue("default", 100).await.expect("issue"));
        assert!(batch.iter().all(|id| generator_of(*id) >> 5 == 3), "every id in datacenter 3");
    }
    // The last two of datacenter 3, then nothing left there, though 0..96 are free.
    let second = start(in_dc(3, 2, None), &coordinator).await.expect("the last two");
    let mut last = second.namespace_infos().remove(0).generator_ids;
    last.sort_unstable();
    assert_eq!(last, [126, 127]);
    let full = start(in_dc(3, 1, None), &coordinator).await.err().map(|e| e.to_string());
    assert!(full.as_deref().is_some_and(|e| e.contains("pool of 32")), "{full:?}");
    assert!(is_free(&coordinator, 0).await, "no id outside datacenter 3 was taken");
    // generator_pool counts inside the datacenter: the first 2 of datacenter 4.
    let pooled = start(in_dc(4, 2, Some(2)), &coordinator).await.expect("pool of 2");
    let mut two = pooled.namespace_infos().remove(0).generator_ids;
    two.sort_unstable();
    assert_eq!(two, [128, 129]);
    for server in [first, second, pooled] {
        server.stop().await.expect("stop");
    }

    for (what, namespace, want) in [
        (
            "beside generator_id",
            NamespaceConfig { generator_id: Some(7), ..in_dc(3, 1, None).namespaces.remove(0) },
            "give generator_id or fix `datacenter` in fields",
        ),
        ("out of range", in_dc(32, 1, None).namespaces.remove(0), "datacenter"),
        (
            "more generators than it has",
            in_dc(3, 33, None).namespaces.remove(0),
            "generators must be 1..=32",
        ),
    ] {
        let config = ServerConfig { namespaces: vec![namespace], ..ServerConfig::default() };
        let got = start(config, &MemoryCoordinator::new()).await.err().map(|e| e.to_string());
        assert!(got.as_deref().is_some_and(|e| e.contains(want)), "{what}: {got:?}");
    }
}
