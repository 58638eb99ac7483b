//! UUIDv7 IDs from a fleet as a Postgres `uuid PRIMARY KEY`: three `idmint serve` processes
//! claim generator IDs on one real etcd (`idmint_coord::testing::EtcdCluster`), hand out a
//! `uuid7` namespace's IDs in `format=uuid` batches at the same time, and every ID goes into a
//! real PostgreSQL table (`idmint_coord::testing::Postgres`) keyed by the `uuid` type. The
//! table counts conflicts (none), and per server `ORDER BY id` gives the order in which the
//! server handed the IDs out, with the UUIDv7 millisecond never going back (DESIGN.md, "What
//! does a database gain from the order of UUIDv7 IDs, and how far does the order go?"). Negative controls: a row offered twice
//! is counted as a conflict, and a shuffled issue order is reported as out of order.
//!
//! Every process is started by the test and stopped by its PID only (dropping the harnesses
//! and servers). Without etcd or PostgreSQL the test skips, saying why, unless `CI=true`.

#![cfg(all(feature = "etcd", feature = "postgres"))]

use std::{
    fmt::Write as _,
    process::Stdio,
    time::{Duration, Instant},
};

use idmint_coord::testing::{self, EtcdCluster, Postgres};
use idmint_testkit::http;

use crate::common::{Server, idmint};

/// How long a server may take to start and become ready.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(15);
/// Servers in the fleet.
const SERVERS: usize = 3;
/// IDs per batch request, and batches per server: 100,000 IDs from each server.
const BATCH: usize = 10_000;
const BATCHES: usize = 10;
/// The namespace under test.
const NAMESPACE: &str = "users";

/// Prints a measured number (shown with `--nocapture`).
#[allow(clippy::print_stderr, reason = "the measured numbers")]
fn measured(line: &str) {
    eprintln!("{line}");
}

/// Starts `idmint serve` on `etcd` with the `uuid7` namespace of `config`, on its own data
/// directory, and waits until it is ready.
fn start(name: &str, etcd: &str, config: &str, data_dir: &str) -> Server {
    let mut command = idmint(["serve", "--listen", "127.0.0.1:0"], &[]);
    command
        .args(["--etcd", etcd, "--config", config, "--data-dir", data_dir])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let server = Server::adopt(name, command.spawn().expect("start idmint serve"), PROCESS_TIMEOUT);
    server.wait_ready(PROCESS_TIMEOUT);
    server
}

/// The generator ID `server` holds for [`NAMESPACE`], from `/v1/namespaces`.
fn generator_id(server: &Server) -> u64 {
    let info = server.get("/v1/namespaces").ok().json();
    info["namespaces"]
        .as_array()
        .and_then(|all| all.iter().find(|ns| ns["name"] == NAMESPACE))
        .and_then(|ns| ns["generator_id"].as_u64())
        .unwrap_or_else(|| {
            panic!("{} holds no generator id for {NAMESPACE}: {info:#}", server.name)
        })
}

/// The `generator` field of `id` as the server's decode route reads it.
fn decoded_generator(server: &Server, id: &str) -> u64 {
    let json = server.get(&format!("/v1/namespaces/{NAMESPACE}/decode/{id}")).ok().json();
    json["fields"]["generator"].as_u64().unwrap_or_else(|| panic!("no generator field: {json:#}"))
}

/// [`BATCHES`] batches of [`BATCH`] IDs in `format=uuid` on one keep-alive connection, in the
/// order the server handed them out.
fn fetch(server: &Server) -> Vec<String> {
    let target = format!("/v1/namespaces/{NAMESPACE}/batch?count={BATCH}&format=uuid");
    let mut connection = http::Connection::open(server.addr).expect("connect");
    let mut ids = Vec::with_capacity(BATCH * BATCHES);
    for _ in 0..BATCHES {
        let response = connection.get(&target).expect("batch").ok();
        let json = response.json();
        let batch = json["ids"].as_array().unwrap_or_else(|| panic!("no ids: {json}"));
        assert_eq!(batch.len(), BATCH);
        ids.extend(batch.iter().map(|id| id.as_str().expect("a string").to_owned()));
    }
    ids
}

/// A UUIDv7's Unix millisecond (its top 48 bits), read in Rust from the hyphenated text.
fn uuid7_ms(id: &str) -> u64 {
    let hex: String = id.chars().filter(|c| *c != '-').take(12).collect();
    u64::from_str_radix(&hex, 16).unwrap_or_else(|e| panic!("{id} is not a uuid: {e}"))
}

/// Runs `sql` and panics with the harness's message if it fails.
fn psql(pg: &Postgres, sql: &str) -> String {
    pg.psql(sql).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// One number printed by `sql`.
fn number(pg: &Postgres, sql: &str) -> i64 {
    let out = psql(pg, sql);
    out.trim().parse().unwrap_or_else(|e| panic!("{sql} printed {out:?}: {e}"))
}

/// Offers the rows `(id, server, seq)` of `csv` to `table` (`uuid PRIMARY KEY`) through a
/// staging table with `\copy`, `ON CONFLICT DO NOTHING`: `(offered, inserted)`. A conflict is
/// a row offered and not inserted, counted rather than raised.
fn offer(pg: &Postgres, table: &str, csv: &str) -> (i64, i64) {
    let file = tempfile::NamedTempFile::new().expect("a csv file");
    std::fs::write(file.path(), csv).expect("write the csv");
    psql(pg, "drop table if exists offered; create table offered (id uuid, server int, seq int)");
    psql(pg, &format!("\\copy offered from '{}' with (format csv)", file.path().display()));
    let offered = number(pg, "select count(*) from offered");
    let inserted = number(
        pg,
        &format!(
            "with landed as (insert into {table} select id, server, seq from offered \
             on conflict do nothing returning 1) select count(*) from landed"
        ),
    );
    (offered, inserted)
}

/// The SQL of a UUIDv7's Unix millisecond: `uuid_extract_timestamp` where it reads version 7
/// (PostgreSQL 18+; PostgreSQL 17's reads only version 1 and gives NULL for 7), else the top 48
/// bits of the 16 bytes.
fn ms_expression(has_extract: bool) -> &'static str {
    if has_extract {
        "(extract(epoch from uuid_extract_timestamp(id)) * 1000)::bigint"
    } else {
        "('x' || lpad(encode(substring(uuid_send(id) from 1 for 6), 'hex'), 16, '0'))::bit(64)::bigint"
    }
}

/// What `ORDER BY id` shows of one server's rows in `table`.
#[derive(Debug, PartialEq, Eq)]
struct Order {
    rows: i64,
    /// Neighbours (in `ORDER BY id`) whose issue order `seq` does not increase.
    seq_breaks: i64,
    /// Neighbours whose millisecond goes back.
    ms_breaks: i64,
    /// The first and last millisecond, as SQL reads them.
    min_ms: i64,
    max_ms: i64,
}

fn order(pg: &Postgres, table: &str, server: usize, ms: &str) -> Order {
    let out = psql(
        pg,
        &format!(
            "select count(*), count(*) filter (where seq <= prev_seq), \
             count(*) filter (where ms < prev_ms), min(ms), max(ms) \
             from (select seq, ms, lag(seq) over w as prev_seq, lag(ms) over w as prev_ms \
                   from (select id, seq, {ms} as ms from {table} where server = {server}) t \
                   window w as (order by id)) s"
        ),
    );
    let n: Vec<i64> = out
        .split('|')
        .map(|f| f.trim().parse().unwrap_or_else(|e| panic!("{out:?}: {e}")))
        .collect();
    Order { rows: n[0], seq_breaks: n[1], ms_breaks: n[2], min_ms: n[3], max_ms: n[4] }
}

#[test]
fn uuid7_ids_of_three_servers_are_a_conflict_free_time_ordered_postgres_key() {
    let Some(pg) = testing::available(Postgres::start()) else { return };
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let Some(etcd) = testing::available(runtime.block_on(EtcdCluster::start(1))) else { return };
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = dir.path().join("idmint.toml");
    std::fs::write(
        &config,
        format!("[[server.namespaces]]\nname = \"{NAMESPACE}\"\nlayout = \"uuid7\"\n"),
    )
    .expect("write the config");
    let config = config.to_string_lossy().into_owned();
    let endpoint = etcd.endpoint(0);
    let servers: Vec<Server> = (0..SERVERS)
        .map(|i| {
            let data = dir.path().join(format!("machine-{i}")).to_string_lossy().into_owned();
            start(&format!("server {i}"), &endpoint, &config, &data)
        })
        .collect();

    // Three distinct generator IDs, as the servers report them and as their IDs carry them.
    let generators: Vec<u64> = servers.iter().map(generator_id).collect();
    let mut distinct = generators.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), SERVERS, "generator ids {generators:?}");

    // All three at once.
    let fetch_started = Instant::now();
    let issued: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = servers.iter().map(|s| scope.spawn(move || fetch(s))).collect();
        handles.into_iter().map(|h| h.join().expect("fetch thread")).collect()
    });
    let fetch_time = fetch_started.elapsed();
    for (i, ids) in issued.iter().enumerate() {
        for id in [&ids[0], &ids[ids.len() / 2], &ids[ids.len() - 1]] {
            assert_eq!(decoded_generator(&servers[i], id), generators[i], "{id} of server {i}");
        }
    }

    let version = psql(&pg, "select version()");
    let has_extract = psql(
        &pg,
        "select current_setting('server_version_num')::int >= 180000 \
         and to_regproc('uuid_extract_timestamp') is not null",
    ) == "t";
    let ms = ms_expression(has_extract);
    psql(&pg, "create table ids (id uuid primary key, server int, seq int)");
    let mut csv = String::with_capacity(SERVERS * BATCH * BATCHES * 48);
    for (server, ids) in issued.iter().enumerate() {
        for (seq, id) in ids.iter().enumerate() {
            writeln!(csv, "{id},{server},{seq}").expect("write to a string");
        }
    }
    let insert_started = Instant::now();
    let (offered, inserted) = offer(&pg, "ids", &csv);
    let insert_time = insert_started.elapsed();
    let sent = (SERVERS * BATCH * BATCHES) as i64;
    assert_eq!(offered, sent);
    assert_eq!(offered - inserted, 0, "conflicts on the uuid primary key");
    assert_eq!(number(&pg, "select count(*) from ids"), sent);

    for (server, ids) in issued.iter().enumerate() {
        let seen = order(&pg, "ids", server, ms);
        let first = uuid7_ms(&ids[0]) as i64;
        let last = uuid7_ms(&ids[ids.len() - 1]) as i64;
        assert_eq!(
            seen,
            Order {
                rows: (BATCH * BATCHES) as i64,
                seq_breaks: 0,
                ms_breaks: 0,
                min_ms: first,
                max_ms: last
            },
            "server {server}: ORDER BY id is the issue order, in time order"
        );
        measured(&format!(
            "uuid_postgres: server {server} (generator {}): {} rows, ORDER BY id: 0 seq breaks, \
             0 ms breaks, {} ms of ids",
            generators[server],
            seen.rows,
            last - first
        ));
    }

    // Negative control: a row offered again (with another issue number) is a conflict.
    let again = format!("{},0,{sent}\n", issued[0][0]);
    assert_eq!(offer(&pg, "ids", &again), (1, 0), "the duplicate must be counted");
    assert_eq!(number(&pg, "select count(*) from ids"), sent);

    // Negative control: the same IDs with each server's issue order shuffled (numbered by a
    // hash of the ID) are reported out of order.
    psql(
        &pg,
        "create table shuffled as select id, server, \
         (row_number() over (partition by server order by md5(id::text)))::int - 1 as seq from ids",
    );
    for server in 0..SERVERS {
        let seen = order(&pg, "shuffled", server, ms);
        assert!(seen.seq_breaks > 0, "a shuffled order passed as the issue order: {seen:?}");
        measured(&format!(
            "uuid_postgres: negative control, server {server} shuffled: {} of {} neighbours out of order",
            seen.seq_breaks,
            seen.rows - 1
        ));
    }

    measured(&format!(
        "uuid_postgres: {sent} ids offered, {inserted} rows, {} conflicts; fetch {} ms, \
         insert {} ms, whole test {} ms; millisecond by {}; {version}",
        offered - inserted,
        fetch_time.as_millis(),
        insert_time.as_millis(),
        started.elapsed().as_millis(),
        if has_extract { "uuid_extract_timestamp" } else { "the top 48 bits (uuid_send)" },
    ));
}
