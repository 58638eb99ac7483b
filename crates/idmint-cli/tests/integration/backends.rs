//! Black-box tests of the store sources of `idmint serve` and of `idmint icicle set-shard`: the
//! real binary against a real Postgres (refused when `synchronous_commit` or `fsync` is off;
//! `--layout sequence` served from it), the embedded file store (`--layout sequence` continuing
//! above after a restart), and real Redis nodes (shards set and their reuse refused; `--source
//! redis` serving icicle IDs).
//!
//! Postgres and Redis are started by the tests on free loopback ports
//! (`idmint_coord::testing`); without the program the test is skipped with a message, and with
//! `CI=true` it fails. Every process is stopped by its PID only.

use std::{
    path::Path,
    process::{Command, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

use idmint_testkit::http;

use idmint_testkit::check::{
    assert_all_above, assert_increasing, assert_unique, report, wait_until,
};

use crate::common::{Server, idmint};

/// How long a server may take to start, or to stop after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(10);

/// `idmint serve` on a free port with `data_dir`, and `args`.
fn serve_command(data_dir: &Path, args: &[&str]) -> Command {
    let mut command = idmint(["serve", "--listen", "127.0.0.1:0"], &[]);
    command.arg("--data-dir").arg(data_dir).args(args);
    command
}

/// Starts `idmint serve` with `data_dir` and `args`, and waits for its "serving" line and for
/// `/readyz`.
fn start(data_dir: &Path, args: &[&str]) -> Server {
    let child = serve_command(data_dir, args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idmint serve");
    let server = Server::adopt("idmint serve", child, PROCESS_TIMEOUT);
    let addr = server.addr;
    wait_until("/readyz to answer 200", PROCESS_TIMEOUT, || {
        http::send(addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
    });
    server
}

/// Single IDs and batches of the default namespace, in the order received.
fn fetch(server: &Server, batches: &[u64]) -> Vec<u64> {
    let mut ids = Vec::new();
    for &count in batches {
        ids.push(server.get("/v1/next").id());
        let batch = server.get(&format!("/v1/batch?count={count}")).ids();
        assert_eq!(batch.len() as u64, count, "a batch of {count}");
        ids.extend(batch);
    }
    ids
}

/// SIGTERM, then the exit status.
fn terminate(server: &mut Server) -> ExitStatus {
    server.signal("TERM");
    server.wait_exit(PROCESS_TIMEOUT)
}

/// Runs a command that must end by itself (bounded), and returns its output.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
fn finish(mut command: Command) -> Output {
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start idmint");
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("idmint did not exit within {PROCESS_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("collect the output")
}

/// Asserts that a finished run failed with exactly one stderr line, `error: ...`, containing
/// every one of `words`, and nothing on stdout.
#[cfg_attr(not(any(feature = "postgres", feature = "redis")), allow(dead_code))]
fn assert_one_error_line(output: &Output, words: &[&str]) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let context = format!("status {}\n--- stdout:\n{stdout}--- stderr:\n{stderr}", output.status);
    assert_eq!(output.status.code(), Some(1), "{context}");
    assert_eq!(stdout, "", "{context}");
    assert_eq!(stderr.lines().count(), 1, "not one stderr line: {context}");
    assert!(stderr.starts_with("error: "), "{context}");
    for word in words {
        assert!(stderr.contains(word), "`{word}` missing: {context}");
    }
}

/// A Postgres that could lose acknowledged commits is refused at start: one error line naming
/// the setting, exit 1, for `synchronous_commit = off` and for `fsync = off`.
#[cfg(feature = "postgres")]
#[test]
fn serve_refuses_a_postgres_that_is_not_durable() {
    use idmint_coord::testing::{self, Postgres};

    for setting in ["synchronous_commit", "fsync"] {
        let Some(postgres) = testing::available(Postgres::start_with(&[(setting, "off")])) else {
            return;
        };
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = postgres.url();
        for layout in ["snowflake", "sequence"] {
            let output =
                finish(serve_command(dir.path(), &["--layout", layout, "--postgres", &url]));
            assert_one_error_line(&output, &[&format!("`{setting}` is `off`"), "set it to `on`"]);
        }
    }
}

/// `idmint serve --layout sequence --postgres URL`: increasing IDs over HTTP; a second server
/// on the same database gets other IDs, and a restart continues above both.
#[cfg(feature = "postgres")]
#[test]
fn serve_sequence_from_postgres() {
    use idmint_coord::testing::{self, Postgres};

    let Some(postgres) = testing::available(Postgres::start()) else { return };
    let url = postgres.url();
    let (dir_a, dir_b) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
    let args = ["--layout", "sequence", "--postgres", url.as_str()];
    let mut a = start(dir_a.path(), &args);
    let mut b = start(dir_b.path(), &args);
    let first = fetch(&a, &[1, 500, 5_000]);
    let other = fetch(&b, &[700, 3_000]);
    assert_increasing(&first);
    assert_increasing(&other);
    let info = a.get("/v1/namespaces").ok().json();
    assert_eq!(info["namespaces"][0]["layout"], "sequence", "{info}");
    assert!(terminate(&mut a).success());
    assert!(terminate(&mut b).success());
    let mut again = start(dir_a.path(), &args);
    let after = fetch(&again, &[10, 1_000]);
    let before: Vec<u64> = first.iter().chain(&other).copied().collect();
    assert_all_above(&after, &before);
    assert!(terminate(&mut again).success());
    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("sequence from postgres", assert_unique(&all));
}

/// `idmint serve --layout sequence` on the embedded file store (`<data-dir>/store.d`, beside
/// the coordinator's files): increasing IDs, and above them after a restart. The same data
/// directory then serves a snowflake namespace: the two stores do not clash.
#[test]
fn serve_sequence_from_the_file_store_continues_after_a_restart() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut first = start(dir.path(), &["--layout", "sequence"]);
    let before = fetch(&first, &[1, 2_000, 10]);
    assert_increasing(&before);
    assert_eq!(before[0], 1, "the first id of a new namespace");
    assert!(terminate(&mut first).success());
    assert!(dir.path().join("store.d/segments/default.json").is_file());

    let mut second = start(dir.path(), &["--source", "segment"]);
    let after = fetch(&second, &[5, 1_000]);
    assert_increasing(&after);
    assert_all_above(&after, &before);
    assert!(terminate(&mut second).success());

    let mut snowflake = start(dir.path(), &[]);
    let info = snowflake.get("/v1/namespaces").ok().json();
    assert_eq!(info["namespaces"][0]["layout"], "snowflake", "{info}");
    fetch(&snowflake, &[10]);
    assert!(terminate(&mut snowflake).success());
    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("sequence from the file store", assert_unique(&all));
}

/// Two Redis nodes for a test.
#[cfg(feature = "redis")]
fn two_redis_nodes(
    runtime: &tokio::runtime::Runtime,
) -> Option<(idmint_coord::testing::RedisServer, idmint_coord::testing::RedisServer)> {
    use idmint_coord::testing::{self, RedisServer};

    let a = testing::available(runtime.block_on(RedisServer::start()))?;
    let b = testing::available(runtime.block_on(RedisServer::start()))?;
    Some((a, b))
}

/// `idmint icicle set-shard`: sets a node's shard and says what it was; refuses a shard that
/// another listed node has, with one error line and exit 1.
#[cfg(feature = "redis")]
#[test]
fn icicle_set_shard_sets_and_refuses_reuse() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let Some((a, b)) = two_redis_nodes(&runtime) else { return };
    let (a, b) = (a.url(), b.url());
    let nodes = format!("{a},{b}");
    let set = |node: &str, shard: &str| {
        finish(idmint(["icicle", "set-shard", node, shard, "--nodes", &nodes], &[]))
    };
    let check = |node: &str, shard: &str, said: &str| {
        let output = set(node, shard);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "set-shard {node} {shard}: {stderr}");
        assert_eq!(stderr, "");
        assert_eq!(stdout.lines().count(), 1, "{stdout}");
        let expected =
            format!("set logical shard id {shard} on {node} ({said}; checked 2 listed nodes)");
        assert_eq!(stdout.trim_end(), expected);
    };
    check(&a, "7", "it had none");
    check(&a, "8", "it was 7");
    check(&b, "7", "it had none");
    let refused = set(&b, "8");
    assert_one_error_line(&refused, &["logical shard id 8 is already set on icicle node", &a]);
    // Without --nodes nothing is compared, and the node is read (so a dead one is an error).
    let alone = finish(idmint(["icicle", "set-shard", &b, "9"], &[]));
    assert!(alone.status.success(), "{}", String::from_utf8_lossy(&alone.stderr));
    let dead = finish(idmint(["icicle", "set-shard", "redis://127.0.0.1:1/", "3"], &[]));
    assert_one_error_line(&dead, &["redis"]);
}

/// `idmint serve --source redis --redis a,b`: icicle IDs from both nodes over HTTP, no
/// duplicates.
#[cfg(feature = "redis")]
#[test]
fn serve_icicle_ids_from_redis() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let Some((a, b)) = two_redis_nodes(&runtime) else { return };
    let (a, b) = (a.url(), b.url());
    let nodes = format!("{a},{b}");
    for (node, shard) in [(&a, "1"), (&b, "2")] {
        let output = finish(idmint(["icicle", "set-shard", node, shard, "--nodes", &nodes], &[]));
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut serve = start(dir.path(), &["--source", "redis", "--redis", &nodes]);
    let info = serve.get("/v1/namespaces").ok().json();
    assert_eq!(info["namespaces"][0]["layout"], "icicle", "{info}");
    let ids = fetch(&serve, &[1, 4_096, 6_000]);
    let layout = idmint_core::Layout::builtin("icicle").expect("icicle");
    let mut shards = std::collections::BTreeSet::new();
    for &id in &ids {
        let fields = layout.decode(idmint_core::AnyId::U64(id)).expect("an icicle id");
        shards.insert(fields[1].1.to_string());
    }
    assert_eq!(shards.into_iter().collect::<Vec<_>>(), ["1", "2"]);
    assert!(terminate(&mut serve).success());
    report("icicle ids from redis", assert_unique(&ids));
}
