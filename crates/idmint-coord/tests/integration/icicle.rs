//! The icicle client against real `redis-server` processes (`idmint_coord::testing::RedisServer`):
//! the script's SHA1, icicle's Lua behaviour table (raw `EVALSHA` and through the client),
//! loading the script on `NOSCRIPT` only, a million IDs round-robin over two nodes, a node
//! killed mid-run, missing and invalid shards, `set_shard`, and the failover guard (reliability
//! T19): a restart with the clock standing still and a promoted replica whose clock is behind,
//! each with a negative control showing what the raw script does, and a failover under Redis
//! Sentinel followed by a client that finds the primary through the sentinels. Without `redis-server` on
//! PATH the tests skip, unless `CI=true`.

#![cfg(all(feature = "redis", feature = "test-util"))]

use std::{
    collections::HashSet,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use idmint_coord::{
    Error, IcicleClient, IcicleOptions,
    testing::{self, RedisClock, RedisSentinel, RedisServer},
};
use idmint_core::{Icicle, IcicleParts};
use redis::{RedisResult, Value, aio::MultiplexedConnection};

async fn start() -> Option<RedisServer> {
    testing::available(RedisServer::start().await)
}

async fn start_with_clock(clock: RedisClock) -> Option<RedisServer> {
    testing::available(RedisServer::start_with_clock(clock).await)
}

/// A plain connection, to look at a node the way an operator (or a Java client) would.
async fn raw(server: &RedisServer) -> MultiplexedConnection {
    let client = redis::Client::open(server.url()).expect("url");
    client.get_multiplexed_async_connection().await.expect("connect")
}

async fn command<T: redis::FromRedisValue>(con: &mut MultiplexedConnection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(con).await.unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// `EVALSHA` exactly as icicle's Java client sends it: `[4095, 1, 1023, batch]` as KEYS.
fn evalsha(pipe: &mut redis::Pipeline, batch: usize) {
    pipe.cmd("EVALSHA").arg(IcicleClient::SCRIPT_SHA1).arg(4).arg(4095).arg(1).arg(1023).arg(batch);
}

/// The raw script's reply as (start, end, shard, time_ms).
fn script_reply(value: &Value) -> (i64, i64, i64, u64) {
    let Value::Array(items) = value else { panic!("not an array: {value:?}") };
    let n: Vec<i64> = items
        .iter()
        .map(|v| match v {
            Value::Int(n) => *n,
            other => panic!("not an integer: {other:?}"),
        })
        .collect();
    (n[0], n[1], n[2], (n[3] * 1000 + n[4] / 1000) as u64)
}

/// The IDs the raw script's reply stands for, built as icicle does.
fn raw_ids(value: &Value) -> Vec<Icicle> {
    let (start, end, shard, time_ms) = script_reply(value);
    (start..=end)
        .map(|sequence| {
            let parts = IcicleParts {
                timestamp: time_ms - Icicle::EPOCH_MS,
                shard: shard as u64,
                sequence: sequence as u64,
            };
            Icicle::from_parts(parts).expect("id")
        })
        .collect()
}

/// An error reply as the node sent it (the client library splits off its first word).
fn reply_text(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or_default(), e.detail().unwrap_or_default())
}

async fn load_script(con: &mut MultiplexedConnection) {
    let sha: String = command(con, &["SCRIPT", "LOAD", IcicleClient::SCRIPT]).await;
    assert_eq!(sha, IcicleClient::SCRIPT_SHA1);
}

fn client(servers: &[&RedisServer]) -> IcicleClient {
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    IcicleClient::new(&urls, IcicleOptions::default()).expect("client")
}

/// Every failure of an exhausted call.
fn failures(result: Result<Vec<Icicle>, Error>) -> Vec<Error> {
    match result {
        Err(Error::AttemptsExhausted { failures }) => failures,
        other => panic!("expected every attempt to fail, got {other:?}"),
    }
}

/// Inserts `ids` into `seen`, failing on the first duplicate.
fn insert_unique(seen: &mut HashSet<Icicle>, ids: &[Icicle]) {
    for id in ids {
        assert!(seen.insert(*id), "duplicate id {id} ({:?})", id.into_parts());
    }
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_micros() as u64
}

#[tokio::test]
async fn the_script_is_icicles_byte_for_byte() {
    // Computed here, with no Redis: lines joined with "\n", no trailing newline.
    let local = sha1_smol::Sha1::from(IcicleClient::SCRIPT.as_bytes()).digest().to_string();
    assert_eq!(local, "594c06c1a007e4c734680d6e4711e67334507564");
    // The upstream file is the same bytes and its final newline, which the Java client drops.
    assert_eq!(IcicleClient::SCRIPT.len(), 2_769);
    let file = format!("{}\n", IcicleClient::SCRIPT);
    let upstream = sha1_smol::Sha1::from(file.as_bytes()).digest().to_string();
    assert_eq!(upstream, "4accfeb94a7dbef408149b4af1ddd530b859f190");
    assert_eq!(IcicleClient::SCRIPT_SHA1, local);
    // And as Redis computes it.
    let Some(redis) = start().await else { return };
    let mut con = raw(&redis).await;
    load_script(&mut con).await;
}

/// One row of the table of icicle's Lua script's behaviour.
struct LuaCase {
    name: &'static str,
    /// The sequence key before the call (`None`: a fresh node).
    sequence: Option<&'static str>,
    batch: usize,
    /// The range the script reserves.
    range: (i64, i64),
    /// The sequence key after the call.
    after: &'static str,
    /// Whether the call sets the lock (a second call in the same pipeline gets the lock error).
    locks: bool,
    /// What the client hands out for the same batch: at most 4,094 per call, and never the
    /// range of a call that rolled over (it asks again, from −1).
    client: (i64, i64),
    /// The sequence key after the client's batch.
    client_after: &'static str,
}

const LUA_CASES: &[LuaCase] = &[
    LuaCase {
        name: "fresh node",
        sequence: None,
        batch: 1,
        range: (1, 1),
        after: "1",
        locks: false,
        client: (1, 1),
        client_after: "1",
    },
    LuaCase {
        name: "after a rollover",
        sequence: Some("-1"),
        batch: 10,
        range: (0, 9),
        after: "9",
        locks: false,
        client: (0, 9),
        client_after: "9",
    },
    LuaCase {
        name: "rollover",
        sequence: Some("4094"),
        batch: 1,
        range: (4095, 4095),
        after: "-1",
        locks: true,
        client: (0, 0),
        client_after: "0",
    },
    LuaCase {
        name: "a batch crossing 4095 is truncated",
        sequence: Some("4000"),
        batch: 4096,
        range: (4001, 4095),
        after: "-1",
        locks: true,
        client: (0, 4093),
        client_after: "4093",
    },
    LuaCase {
        name: "a full batch from -1",
        sequence: Some("-1"),
        batch: 4096,
        range: (0, 4095),
        after: "-1",
        locks: true,
        client: (0, 4093),
        client_after: "4093",
    },
];

/// Resets the node to the case's starting state, with logical shard 7.
async fn prepare(con: &mut MultiplexedConnection, case: &LuaCase) {
    let _: () = command(con, &["DEL", "icicle-generator-sequence", "icicle-generator-lock"]).await;
    let _: () = command(con, &["SET", "icicle-generator-logical-shard-id", "7"]).await;
    if let Some(sequence) = case.sequence {
        let _: () = command(con, &["SET", "icicle-generator-sequence", sequence]).await;
    }
}

/// Runs one case raw (one pipeline: script, sequence, lock, script again) and through the
/// client. One client serves every case: a client meeting a node for the first time refuses
/// IDs at or below the node's shared mark, which the previous case raised.
async fn check(icicle: &IcicleClient, con: &mut MultiplexedConnection, case: &LuaCase) {
    let name = case.name;
    prepare(con, case).await;
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    evalsha(&mut pipe, case.batch);
    pipe.cmd("GET").arg("icicle-generator-sequence").cmd("EXISTS").arg("icicle-generator-lock");
    evalsha(&mut pipe, 1);
    let replies: Vec<RedisResult<Value>> = pipe.query_async(con).await.expect("pipeline");
    let (start, end, shard, _) = script_reply(replies[0].as_ref().expect("script"));
    assert_eq!(((start, end), shard), (case.range, 7), "{name}: raw range");
    let after: String = redis::from_redis_value(replies[1].clone().expect("get")).expect("text");
    assert_eq!(after, case.after, "{name}: sequence key after");
    assert_eq!(replies[2].clone().expect("exists") == Value::Int(1), case.locks, "{name}: lock");
    match &replies[3] {
        Err(e) if case.locks => {
            assert_eq!(reply_text(e), IcicleClient::LOCK_ERROR, "{name}: second call");
        }
        Ok(_) if !case.locks => {}
        other => panic!("{name}: second call while locked={}: {other:?}", case.locks),
    }

    prepare(con, case).await;
    let ids = icicle.generate_batch(case.batch).await.expect("client batch");
    let sequences: Vec<u64> = ids.iter().map(|id| id.into_parts().sequence).collect();
    let expected: Vec<u64> = (case.client.0 as u64..=case.client.1 as u64).collect();
    assert_eq!(sequences, expected, "{name}: client sequences");
    assert!(ids.iter().all(|id| id.into_parts().shard == 7), "{name}: client shard");
    let after: String = command(con, &["GET", "icicle-generator-sequence"]).await;
    assert_eq!(after, case.client_after, "{name}: sequence key after the client");
}

#[tokio::test]
async fn the_lua_behaviour_table_raw_and_through_the_client() {
    let Some(redis) = start().await else { return };
    let mut con = raw(&redis).await;
    load_script(&mut con).await;
    let icicle = client(&[&redis]);
    for case in LUA_CASES {
        check(&icicle, &mut con, case).await;
    }
    // The client's IDs carry the node's TIME.
    let before: u64 = now_us() / 1000;
    let id = client(&[&redis]).generate().await.expect("id");
    let after = now_us() / 1000;
    assert!(
        (before..=after).contains(&id.timestamp_ms()),
        "{before} ≤ {} ≤ {after}",
        id.timestamp_ms()
    );
}

#[tokio::test]
async fn a_locked_node_refuses_raw_calls_and_the_client_backs_off() {
    let Some(redis) = start().await else { return };
    let mut con = raw(&redis).await;
    load_script(&mut con).await;
    let _: () = command(&mut con, &["SET", "icicle-generator-logical-shard-id", "3"]).await;
    let _: () = command(&mut con, &["SET", "icicle-generator-sequence", "41"]).await;
    let _: () = command(&mut con, &["PSETEX", "icicle-generator-lock", "60000", "lock"]).await;

    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    evalsha(&mut pipe, 1);
    let replies: Vec<RedisResult<Value>> = pipe.query_async(&mut con).await.expect("pipeline");
    let error = replies[0].as_ref().expect_err("the lock error");
    assert_eq!(reply_text(error), IcicleClient::LOCK_ERROR);

    let started = Instant::now();
    let failed = failures(client(&[&redis]).generate_batch(10).await);
    assert_eq!(failed.len(), 5, "{failed:?}");
    assert!(failed.iter().all(|f| matches!(f, Error::NodeLocked { .. })), "{failed:?}");
    // Sleeps of 0, 1, 4 and 9 ms between the five attempts.
    assert!(started.elapsed() >= Duration::from_millis(14), "{:?}", started.elapsed());
    let options = IcicleOptions { max_attempts: 2, ..IcicleOptions::default() };
    let two = IcicleClient::new(&[redis.url()], options).expect("client");
    assert_eq!(failures(two.generate_batch(1).await).len(), 2);
    // The lock error is not "script missing": the client never reloaded the script, and the
    // lock check comes before the sequence moves.
    let stats: String = command(&mut con, &["INFO", "commandstats"]).await;
    let loads = stats.lines().find(|l| l.starts_with("cmdstat_script|load:")).unwrap_or_default();
    assert!(loads.contains("calls=1,"), "one SCRIPT LOAD, by this test: {loads}");
    let sequence: String = command(&mut con, &["GET", "icicle-generator-sequence"]).await;
    assert_eq!(sequence, "41");
}

#[tokio::test]
async fn noscript_loads_the_script_once() {
    let Some(redis) = start().await else { return };
    let mut con = raw(&redis).await;
    let _: () = command(&mut con, &["SET", "icicle-generator-logical-shard-id", "9"]).await;
    let icicle = client(&[&redis]);
    for _ in 0..3 {
        icicle.generate().await.expect("id");
    }
    let loaded: Vec<i64> =
        command(&mut con, &["SCRIPT", "EXISTS", IcicleClient::SCRIPT_SHA1]).await;
    assert_eq!(loaded, [1]);
    let stats: String = command(&mut con, &["INFO", "commandstats"]).await;
    let loads = stats.lines().find(|l| l.starts_with("cmdstat_script|load:")).unwrap_or_default();
    assert!(loads.contains("calls=1,"), "{loads}");
    // After SCRIPT FLUSH the next call loads it again, and succeeds.
    let _: () = command(&mut con, &["SCRIPT", "FLUSH"]).await;
    icicle.generate().await.expect("id after SCRIPT FLUSH");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_ids_round_robin_over_two_nodes_without_duplicates() {
    let (Some(a), Some(b)) = (start().await, start().await) else { return };
    IcicleClient::set_shard(&a.url(), 1, &[a.url(), b.url()]).await.expect("shard 1");
    IcicleClient::set_shard(&b.url(), 2, &[a.url(), b.url()]).await.expect("shard 2");
    let icicle = client(&[&a, &b]);
    let mut seen = HashSet::with_capacity(1_100_000);
    let mut last = [None::<Icicle>; 3];
    let mut batches = 0;
    let started = Instant::now();
    while seen.len() < 1_000_000 {
        let ids = icicle.generate_batch(4096).await.expect("batch");
        let shard = ids[0].into_parts().shard as usize;
        if batches < 2 {
            assert_eq!(shard, batches + 1, "round-robin starts with the first node");
        }
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(last[shard] < Some(ids[0]), "each node's ids increase across batches");
        last[shard] = ids.last().copied();
        insert_unique(&mut seen, &ids);
        batches += 1;
    }
    assert!(last[1].is_some() && last[2].is_some(), "both nodes served");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(60), "{batches} batches took {elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_share_the_round_robin_without_duplicates() {
    let (Some(a), Some(b)) = (start().await, start().await) else { return };
    IcicleClient::set_shard(&a.url(), 11, &[]).await.expect("shard 11");
    IcicleClient::set_shard(&b.url(), 12, &[]).await.expect("shard 12");
    let icicle = client(&[&a, &b]);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let icicle = icicle.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for _ in 0..200 {
                    ids.extend(icicle.generate_batch(100).await.expect("batch"));
                }
                ids
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for task in tasks {
        insert_unique(&mut seen, &task.await.expect("task"));
    }
    // A call that rolls the sequence over is discarded and asked again: no batch is short.
    assert_eq!(seen.len(), 4 * 200 * 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_is_skipped_and_rejoins_after_set_shard() {
    let (Some(mut a), Some(b)) = (start().await, start().await) else { return };
    let nodes = [a.url(), b.url()];
    IcicleClient::set_shard(&a.url(), 1, &nodes).await.expect("shard 1");
    IcicleClient::set_shard(&b.url(), 2, &nodes).await.expect("shard 2");
    // With one node left, every call tries the dead one and, just after a rollover, may find
    // the live one locked for up to 2 ms: more attempts than icicle's 5 ride that out.
    let options = IcicleOptions { max_attempts: 10, ..IcicleOptions::default() };
    let icicle = IcicleClient::new(&nodes, options).expect("client");
    let mut seen = HashSet::new();
    for _ in 0..40 {
        insert_unique(&mut seen, &icicle.generate_batch(4096).await.expect("before the kill"));
    }

    a.kill().expect("kill");
    let mut after_kill = Vec::new();
    for _ in 0..40 {
        let ids = icicle.generate_batch(4096).await.expect("node 2 carries on");
        insert_unique(&mut seen, &ids);
        after_kill.extend(ids);
    }
    assert!(after_kill.iter().all(|id| id.into_parts().shard == 2));

    // Back, empty: without its shard it is skipped at once; after set_shard it serves again.
    a.restart().await.expect("restart");
    for _ in 0..4 {
        let ids = icicle.generate_batch(1000).await.expect("node 2 while node 1 has no shard");
        assert!(ids.iter().all(|id| id.into_parts().shard == 2));
        insert_unique(&mut seen, &ids);
    }
    IcicleClient::set_shard(&a.url(), 1, &nodes).await.expect("shard 1 again");
    let mut shards = HashSet::new();
    for _ in 0..10 {
        let ids = icicle.generate_batch(4096).await.expect("both again");
        shards.insert(ids[0].into_parts().shard);
        insert_unique(&mut seen, &ids);
    }
    assert_eq!(shards, HashSet::from([1, 2]));
}

#[tokio::test]
async fn missing_and_invalid_shards_are_clear_errors() {
    let Some(redis) = start().await else { return };
    let mut con = raw(&redis).await;
    let icicle = client(&[&redis]);
    // (stored value, shard the error names); None: the key is missing.
    let cases =
        [(None, -1), (Some("0"), 0), (Some("1024"), 1024), (Some("-3"), -3), (Some("x"), -1)];
    for (stored, shard) in cases {
        match stored {
            Some(value) => {
                let _: () =
                    command(&mut con, &["SET", "icicle-generator-logical-shard-id", value]).await;
            }
            None => {
                let _: () = command(&mut con, &["DEL", "icicle-generator-logical-shard-id"]).await;
            }
        }
        let failed = failures(icicle.generate_batch(5).await);
        assert_eq!(failed.len(), 5, "{stored:?}");
        for failure in &failed {
            assert!(
                matches!(failure, Error::InvalidShard { shard: s, node } if *s == shard && node == &redis.url()),
                "{stored:?}: {failure}"
            );
        }
        let message = failed[0].to_string();
        if shard == -1 {
            assert!(message.contains("has no logical shard id"), "{message}");
        } else {
            assert!(
                message.contains(&format!("logical shard id {shard} of icicle node")),
                "{message}"
            );
        }
    }
}

#[tokio::test]
async fn set_shard_refuses_reuse_and_ids_outside_1_to_1023() {
    let (Some(a), Some(b)) = (start().await, start().await) else { return };
    let nodes = [a.url(), b.url()];
    assert_eq!(IcicleClient::set_shard(&a.url(), 5, &nodes).await.expect("set"), None);
    match IcicleClient::set_shard(&b.url(), 5, &nodes).await {
        Err(Error::ShardInUse { shard: 5, other, .. }) => assert_eq!(other, a.url()),
        other => panic!("expected ShardInUse, got {other:?}"),
    }
    assert_eq!(IcicleClient::set_shard(&b.url(), 6, &nodes).await.expect("set"), None);
    // A node is compared by run_id, so it may list itself under any address.
    let alias = format!("redis://127.0.0.1:{}/0", a.port());
    let again = IcicleClient::set_shard(&a.url(), 5, &[alias, b.url()]).await.expect("same node");
    assert_eq!(again, Some(5));
    for shard in [0, 1024, u16::MAX] {
        let refused = IcicleClient::set_shard(&a.url(), shard, &nodes).await;
        assert!(matches!(refused, Err(Error::InvalidRequest(_))), "{shard}: {refused:?}");
    }
    // A listed node that cannot be read: nothing is set.
    let gone = format!("redis://127.0.0.1:{}/", testing::free_ports(1).expect("port")[0]);
    let refused = IcicleClient::set_shard(&b.url(), 7, &[a.url(), gone]).await;
    assert!(matches!(refused, Err(Error::Unavailable { backend: "redis", .. })), "{refused:?}");
    let mut con = raw(&b).await;
    let shard: String = command(&mut con, &["GET", "icicle-generator-logical-shard-id"]).await;
    assert_eq!(shard, "6");
}

/// T19, restart: a node without persistence restarts with its clock standing still (the
/// same millisecond). The raw script hands out exactly the IDs it handed out before; the
/// client refuses them, locks the node, and serves again only once the node's clock is past
/// the last millisecond it saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_never_repeats_an_id_across_a_restart_in_the_same_millisecond() {
    let frozen_us = now_us() / 1000 * 1000;
    let frozen_ms = frozen_us / 1000;
    let Some(mut redis) = start_with_clock(RedisClock::Frozen { unix_us: frozen_us }).await else {
        return;
    };
    IcicleClient::set_shard(&redis.url(), 7, &[]).await.expect("shard");
    let icicle = client(&[&redis]);
    let mut seen = HashSet::new();
    for _ in 0..3 {
        let ids = icicle.generate_batch(10).await.expect("batch");
        assert!(ids.iter().all(|id| id.timestamp_ms() == frozen_ms), "the clock stands still");
        insert_unique(&mut seen, &ids);
    }
    let highest = *seen.iter().max().expect("ids");

    redis.restart().await.expect("restart, same frozen clock");
    IcicleClient::set_shard(&redis.url(), 7, &[]).await.expect("shard again");
    // Negative control: the raw script repeats the IDs handed out before the restart.
    let mut con = raw(&redis).await;
    load_script(&mut con).await;
    let mut pipe = redis::pipe();
    evalsha(&mut pipe, 10);
    let (reply,): (Value,) = pipe.query_async(&mut con).await.expect("raw script");
    let repeated = raw_ids(&reply);
    assert!(repeated.iter().all(|id| seen.contains(id)), "the raw script repeats: {repeated:?}");

    // The client refuses, and fences the node for every client. (Its first attempt may meet
    // the connection the restart broke.)
    let failed = failures(icicle.generate_batch(10).await);
    let reconnect = usize::from(matches!(failed[0], Error::Unavailable { .. }));
    assert!(
        matches!(&failed[reconnect], Error::FailoverFenced { shard: 7, node_ms, seen_ms, .. }
            if *node_ms == frozen_ms && *seen_ms == frozen_ms),
        "{failed:?}"
    );
    let rest = &failed[reconnect + 1..];
    assert!(rest.iter().all(|f| matches!(f, Error::NodeLocked { .. })), "{failed:?}");
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    evalsha(&mut pipe, 1);
    let replies: Vec<RedisResult<Value>> = pipe.query_async(&mut con).await.expect("pipeline");
    assert!(replies[0].is_err(), "other clients are locked out too: {replies:?}");

    // The node comes back 500 ms behind the last millisecond seen, with a running clock: the
    // client refuses until the node's clock passes it, then serves only higher IDs.
    let now_ms = (now_us() / 1000) as i64;
    let behind = RedisClock::Offset { ms: frozen_ms as i64 - 500 - now_ms };
    redis.restart_with_clock(behind).await.expect("restart behind");
    IcicleClient::set_shard(&redis.url(), 7, &[]).await.expect("shard again");
    let started = Instant::now();
    let mut refusals = 0;
    let ids = loop {
        match icicle.generate_batch(10).await {
            Ok(ids) => break ids,
            Err(Error::AttemptsExhausted { .. }) => refusals += 1,
            Err(other) => panic!("unexpected {other}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the fence never lifted");
    };
    assert!(refusals > 0, "the node's clock was behind, so its first ids were refused");
    assert!(ids.iter().all(|id| *id > highest && id.timestamp_ms() > frozen_ms), "{ids:?}");
    insert_unique(&mut seen, &ids);
}

/// T19, failover: a replica whose clock is a second behind is promoted after the primary is
/// killed. Its raw IDs fall below the ones already handed out; the client refuses them until
/// the replica's clock passes the last millisecond it saw, and never repeats an ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_holds_across_a_failover_to_a_replica_whose_clock_is_behind() {
    let Some(mut primary) = start().await else { return };
    IcicleClient::set_shard(&primary.url(), 7, &[]).await.expect("shard");
    let Some(mut replica) = testing::available(RedisServer::start_replica_of(&primary).await)
    else {
        return;
    };
    replica.restart_with_clock(RedisClock::Offset { ms: -1000 }).await.expect("replica behind");
    // The replica is read-only: its attempts fail and the primary serves.
    let icicle = client(&[&primary, &replica]);
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let ids = icicle.generate_batch(100).await.expect("batch");
        insert_unique(&mut seen, &ids);
    }
    let highest = *seen.iter().max().expect("ids");

    primary.kill().expect("kill the primary");
    let mut con = raw(&replica).await;
    let _: () = command(&mut con, &["REPLICAOF", "NO", "ONE"]).await;
    let shard: String = command(&mut con, &["GET", "icicle-generator-logical-shard-id"]).await;
    assert_eq!(shard, "7", "the shard key was replicated");
    // Negative control: the promoted replica's raw IDs are below the highest handed out.
    load_script(&mut con).await;
    let mut pipe = redis::pipe();
    evalsha(&mut pipe, 10);
    let (reply,): (Value,) = pipe.query_async(&mut con).await.expect("raw script");
    assert!(raw_ids(&reply).iter().all(|id| *id < highest), "the raw script goes back");

    let started = Instant::now();
    let mut fenced = 0;
    let mut after = Vec::new();
    while after.len() < 2_000 {
        match icicle.generate_batch(100).await {
            Ok(ids) => after.extend(ids),
            Err(Error::AttemptsExhausted { failures }) => {
                fenced +=
                    failures.iter().filter(|f| matches!(f, Error::FailoverFenced { .. })).count();
            }
            Err(other) => panic!("unexpected {other}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the fence never lifted");
    }
    assert!(after.iter().all(|id| *id > highest), "only ids above the highest seen");
    insert_unique(&mut seen, &after);
    assert!(fenced > 0, "the promoted replica's first ids were refused");
}

/// T19 under Redis Sentinel: a client that finds the primary through three sentinels
/// follows their failover to a replica whose clock is five seconds behind; the guard refuses
/// the promoted replica's first IDs (its `master_replid` is new) and never repeats one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_client_follows_a_failover_and_the_guard_holds() {
    let Some(mut primary) = start().await else { return };
    IcicleClient::set_shard(&primary.url(), 9, &[]).await.expect("shard");
    // Behind by more than a failover takes (about 2 s), so its first IDs are old ones.
    let behind = RedisClock::Offset { ms: -5000 };
    let Some(replica) =
        testing::available(RedisServer::start_replica_with_clock(&primary, behind).await)
    else {
        return;
    };
    let sentinels =
        RedisSentinel::start(&primary, "t19", 3, 1, 500).await.expect("sentinels start");
    let icicle = IcicleClient::with_sentinel("t19", &sentinels.urls(), IcicleOptions::default())
        .expect("sentinel client");
    let mut seen = HashSet::new();
    for _ in 0..20 {
        let ids = icicle.generate_batch(100).await.expect("batch from the primary");
        insert_unique(&mut seen, &ids);
    }
    let highest = *seen.iter().max().expect("ids");

    let old = primary.port();
    primary.kill().expect("kill the primary");
    let promoted =
        sentinels.wait_failover(old, Duration::from_secs(20)).await.expect("sentinel failover");
    assert_eq!(promoted, replica.port());
    // The promoted replica is fenced while its clock is behind the last millisecond seen;
    // after that, having no replica of its own (a failover now could lose the shared mark),
    // it is refused until one acknowledges the mark: icicle mode stops rather than risk it.
    let started = Instant::now();
    let mut fenced = 0;
    loop {
        let failed = failures(icicle.generate_batch(100).await);
        fenced += failed.iter().filter(|f| matches!(f, Error::FailoverFenced { .. })).count();
        if failed.iter().any(|f| matches!(f, Error::NotReplicated { replicas: 0, .. })) {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never past the fence: {failed:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let Some(_new_replica) = testing::available(RedisServer::start_replica_of(&replica).await)
    else {
        return;
    };
    let mut after = Vec::new();
    while after.len() < 2_000 {
        match icicle.generate_batch(100).await {
            Ok(ids) => after.extend(ids),
            Err(Error::AttemptsExhausted { failures }) => {
                fenced +=
                    failures.iter().filter(|f| matches!(f, Error::FailoverFenced { .. })).count();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(other) => panic!("unexpected {other}"),
        }
        assert!(started.elapsed() < Duration::from_secs(20), "never served after the failover");
    }
    assert!(after.iter().all(|id| *id > highest), "only ids above the highest seen");
    insert_unique(&mut seen, &after);
    assert!(fenced > 0, "the promoted replica's first ids were refused");
}

/// T19, two servers: server A hands out IDs milliseconds after server B's last, then the
/// primary is killed and its replica (clock a second behind) promoted. B meets the promoted
/// node first. The shared mark A recorded, which reached the replica before A handed its IDs
/// out, makes B refuse every millisecond up to A's last one. Two negative controls: with each
/// server's own guard only (`without_shared_guard`), and with no guard (`without_guard`), B
/// hands out IDs at milliseconds A already used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_mark_protects_the_ids_another_server_saw() {
    for guard in [Guard::Shared, Guard::OwnOnly, Guard::None] {
        let Some((b_after, a_highest)) = two_servers_across_a_failover(guard).await else {
            continue;
        };
        let at_or_below = b_after.iter().filter(|id| id.timestamp_ms() <= a_highest).count();
        if guard == Guard::Shared {
            assert_eq!(at_or_below, 0, "B repeated milliseconds A had handed out");
        } else {
            assert!(at_or_below > 0, "negative control {guard:?}: B must reach A's milliseconds");
        }
    }
}

/// Which failover guard the two servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guard {
    /// The guard with the mark shared through Redis.
    Shared,
    /// Negative control: each server's own memory only.
    OwnOnly,
    /// Negative control: no guard.
    None,
}

/// Runs the two-server failover; returns B's IDs after it and A's highest millisecond, or
/// `None` when Redis is not on PATH (outside CI) or a control is not compiled in.
async fn two_servers_across_a_failover(guard: Guard) -> Option<(Vec<Icicle>, u64)> {
    let mut primary = start().await?;
    IcicleClient::set_shard(&primary.url(), 5, &[]).await.expect("shard");
    let behind = RedisClock::Offset { ms: -1000 };
    let replica =
        testing::available(RedisServer::start_replica_with_clock(&primary, behind).await)?;
    synced(&primary).await;
    let (a, b) = (client(&[&primary, &replica]), client(&[&primary, &replica]));
    #[cfg(idmint_negative_controls)]
    let (a, b) = match guard {
        Guard::Shared => (a, b),
        Guard::OwnOnly => (a.without_shared_guard(), b.without_shared_guard()),
        Guard::None => (a.without_guard(), b.without_guard()),
    };
    #[cfg(not(idmint_negative_controls))]
    if guard != Guard::Shared {
        return None;
    }
    let mut seen = HashSet::new();
    for _ in 0..5 {
        insert_unique(&mut seen, &b.generate_batch(100).await.expect("B before"));
    }
    // A goes on for 50 ms after B's last call: milliseconds B never saw.
    let b_last = seen.iter().map(|id| id.timestamp_ms()).max().expect("ids");
    let mut a_highest = 0;
    while a_highest < b_last + 50 {
        let ids = a.generate_batch(100).await.expect("A before");
        a_highest = a_highest.max(ids.iter().map(|id| id.timestamp_ms()).max().expect("ids"));
        insert_unique(&mut seen, &ids);
    }
    primary.kill().expect("kill the primary");
    let mut con = raw(&replica).await;
    let _: () = command(&mut con, &["REPLICAOF", "NO", "ONE"]).await;
    // B first, until it has served past A's last millisecond.
    let started = Instant::now();
    let mut after = Vec::new();
    while after.last().is_none_or(|id: &Icicle| id.timestamp_ms() <= a_highest + 5) {
        match b.generate_batch(100).await {
            Ok(ids) => after.extend(ids),
            Err(Error::AttemptsExhausted { .. }) => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(other) => panic!("unexpected {other}"),
        }
        assert!(started.elapsed() < Duration::from_secs(10), "B never served");
    }
    Some((after, a_highest))
}

/// Waits until a replica of `primary` acknowledges its writes: a replica that has just
/// synchronised reports itself online before its first acknowledgement, and until then the
/// client refuses IDs whose mark it cannot see acknowledged (`Error::NotReplicated`).
async fn synced(primary: &RedisServer) {
    let mut con = raw(primary).await;
    let started = Instant::now();
    // A write of this connection's own, so that `WAIT` has something to count.
    let _: () = command(&mut con, &["SET", "idmint-test-synced", "1"]).await;
    while command::<i64>(&mut con, &["WAIT", "1", "100"]).await < 1 {
        assert!(started.elapsed() < Duration::from_secs(10), "the replica never acknowledged");
    }
}
