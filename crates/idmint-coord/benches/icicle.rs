//! What the icicle failover guard costs per call, against real `redis-server`s on loopback
//! (`testing::RedisServer`): icicle's script alone (what icicle's Java client sends), the
//! script with the guard's `INFO` reads (each server's own guard), and the client with the
//! shared mark, on a standalone node (no replica: no `WAIT`) and on a primary with an online
//! replica (`WAIT 1` per call). Calls of 1 and of 4,094 IDs (the most one call asks for).
//!
//! ```sh
//! cargo bench -p idmint-coord --features redis --bench icicle
//! ```

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use criterion::{Criterion, Throughput};
use idmint_coord::{
    IcicleClient, IcicleOptions,
    testing::{self, RedisServer},
};
use redis::{Value, aio::MultiplexedConnection};
use tokio::runtime::Runtime;

/// The batch sizes measured: one ID, and the most one script call asks for.
const BATCHES: [usize; 2] = [1, 4094];

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Times `iters` calls of `call`, one after another.
fn timed<F, Fut>(rt: &Runtime, iters: u64, mut call: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    rt.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            call().await;
        }
        started.elapsed()
    })
}

/// A node with shard 1 and the script loaded; `None` without `redis-server` (outside CI).
async fn node(replica_of: Option<&RedisServer>) -> Option<RedisServer> {
    let server = match replica_of {
        Some(primary) => RedisServer::start_replica_of(primary).await,
        None => RedisServer::start().await,
    };
    testing::available(server)
}

async fn connection(server: &RedisServer) -> MultiplexedConnection {
    let client = redis::Client::open(server.url()).expect("url");
    let mut con = client.get_multiplexed_async_connection().await.expect("connect");
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(IcicleClient::SCRIPT)
        .query_async(&mut con)
        .await
        .expect("script load");
    con
}

/// icicle's call as its Java client makes it, optionally followed by the two `INFO` reads of
/// the per-server guard, in one pipeline; called again at once while the node is locked after
/// a rollover (as icicle's client does on its first retry).
async fn raw(mut con: MultiplexedConnection, count: usize, info: bool) {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("EVALSHA").arg(IcicleClient::SCRIPT_SHA1).arg(4).arg(4095).arg(1).arg(1023);
    pipe.arg(count);
    if info {
        pipe.cmd("INFO").arg("server").cmd("INFO").arg("replication");
    }
    loop {
        let replies: Vec<redis::RedisResult<Value>> =
            pipe.query_async(&mut con).await.expect("pipeline");
        if replies.first().is_some_and(Result::is_ok) {
            black_box(replies);
            return;
        }
    }
}

/// Waits until the replica acknowledges a write of `primary`'s.
async fn synced(primary: &RedisServer) {
    let mut con = connection(primary).await;
    let _: () = redis::cmd("SET").arg("bench-synced").arg(1).query_async(&mut con).await.unwrap();
    while redis::cmd("WAIT").arg(1).arg(100).query_async::<i64>(&mut con).await.unwrap() < 1 {}
}

#[expect(clippy::print_stderr, reason = "a bench says why it measured nothing")]
fn main() {
    let rt = runtime();
    let mut c = Criterion::default().configure_from_args();
    let Some((primary, _replica, standalone)) = rt.block_on(async {
        let primary = node(None).await?;
        let replica = node(Some(&primary)).await?;
        let standalone = node(None).await?;
        for server in [&primary, &standalone] {
            IcicleClient::set_shard(&server.url(), 1, &[]).await.expect("shard");
        }
        synced(&primary).await;
        Some((primary, replica, standalone))
    }) else {
        eprintln!("icicle bench: no redis-server on PATH");
        return;
    };
    let mut group = c.benchmark_group("icicle");
    group.measurement_time(Duration::from_secs(3)).sample_size(30);
    for count in BATCHES {
        group.throughput(Throughput::Elements(count as u64));
        let con = rt.block_on(connection(&standalone));
        group.bench_function(format!("script/{count}"), |b| {
            b.iter_custom(|iters| timed(&rt, iters, || raw(con.clone(), count, false)));
        });
        group.bench_function(format!("script+info/{count}"), |b| {
            b.iter_custom(|iters| timed(&rt, iters, || raw(con.clone(), count, true)));
        });
        for (label, server) in [("standalone", &standalone), ("with-replica", &primary)] {
            let client =
                IcicleClient::new(&[server.url()], IcicleOptions::default()).expect("client");
            group.bench_function(format!("client-{label}/{count}"), |b| {
                b.iter_custom(|iters| {
                    timed(&rt, iters, || async {
                        black_box(client.generate_batch(count).await.expect("batch"));
                    })
                });
            });
        }
    }
    group.finish();
    c.final_summary();
}
