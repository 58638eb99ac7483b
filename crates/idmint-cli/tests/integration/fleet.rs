//! Fleet mode with real binaries (RELIABILITY.md, T2, T3, T6, T7, T11 and a negative
//! control): `idmint serve --etcd` processes against real etcd members
//! (`idmint_coord::testing::EtcdCluster`), started ten at once, killed and restarted twenty
//! times, paused past their lease while a spare takes over, restarted with the clock a minute
//! back, and served through etcd itself being killed; plus `idmint lease list`. Every test
//! counts the IDs it saw and asserts that none repeats; the negative control asserts that the
//! same pause test, run without the fence, does find repeats.
//!
//! Every process is started by the test and stopped by its PID only (a guard kills it if the
//! test fails first). The etcd tests run one at a time (`SERIAL`): they measure leases and
//! windows in seconds on a small, busy machine. Without etcd (or libfaketime) installed they
//! skip, saying why, unless `CI=true`.

// Without the `etcd` feature only the embedded-store tests run; the harness is shared.
#![cfg_attr(not(feature = "etcd"), allow(dead_code, unused_imports))]

use idmint_testkit::{check, http};
use std::{
    collections::{BTreeMap, HashSet},
    net::SocketAddr,
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::common::{Server, idmint, poll};
use idmint_testkit::check::report;

/// How long a server may take to start, or to stop after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(15);

/// `idmint serve --listen 127.0.0.1:0 <args>`, stderr piped.
fn serve_command(args: &[String], env: &[(&str, &str)]) -> Command {
    let mut command = idmint(["serve", "--listen", "127.0.0.1:0"], env);
    command.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    command
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| (*a).to_owned()).collect()
}

/// A running `idmint serve` that this test started.
type Node = Server;

/// Starts `idmint serve <args>` (with `--listen 127.0.0.1:0`) and waits for its "serving"
/// line, not for readiness (a spare is not ready at first).
fn spawn_node(name: &str, args: &[String], env: &[(&str, &str)]) -> Node {
    let child = serve_command(args, env).spawn().expect("start idmint serve");
    Node::adopt(name, child, PROCESS_TIMEOUT)
}

/// [`spawn_node`], then waits until `/readyz` answers 200.
fn start_node(name: &str, args: &[String], env: &[(&str, &str)]) -> Node {
    let node = spawn_node(name, args, env);
    node.wait_ready(PROCESS_TIMEOUT);
    node
}

/// What a load thread saw.
#[derive(Debug, Default)]
struct Loaded {
    /// Every ID of every answered batch, in order.
    ids: Vec<u64>,
    /// Refusals by error code (`window_exhausted`, `not_ready`, ...).
    refused: BTreeMap<String, usize>,
    /// Requests that got no answer (the server was killed, or paused past the timeout).
    failed: usize,
}

impl Loaded {
    fn refusals(&self) -> usize {
        self.refused.values().sum()
    }
}

/// A client thread fetching batches from one server until stopped, on one keep-alive
/// connection (reopened after errors), about a thousand requests a second at most.
struct Loader {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    handle: Option<JoinHandle<Loaded>>,
}

impl Loader {
    fn start(addr: SocketAddr, target: &str) -> Loader {
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let handle = std::thread::spawn({
            let (stop, answered, target) =
                (Arc::clone(&stop), Arc::clone(&answered), target.to_owned());
            move || {
                let mut loaded = Loaded::default();
                let mut connection: Option<http::Connection> = None;
                while !stop.load(Ordering::SeqCst) {
                    let Some(open) = connection.as_mut() else {
                        match http::Connection::open(addr) {
                            Ok(open) => connection = Some(open),
                            Err(_) => {
                                loaded.failed += 1;
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                        continue;
                    };
                    match open.get(&target) {
                        Ok(response) if response.status == 200 => {
                            loaded.ids.extend(response.ids());
                            answered.fetch_add(1, Ordering::SeqCst);
                            // A steady load rather than a flood: the tests count every ID.
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        Ok(response) => {
                            let json: Option<serde_json::Value> =
                                serde_json::from_slice(&response.body).ok();
                            let code = json
                                .as_ref()
                                .and_then(|j| j["error"]["code"].as_str())
                                .map_or_else(|| response.status.to_string(), str::to_owned);
                            *loaded.refused.entry(code).or_default() += 1;
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(_) => {
                            connection = None;
                            loaded.failed += 1;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                loaded
            }
        });
        Loader { stop, answered, handle: Some(handle) }
    }

    /// How many batches were answered so far.
    fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// Waits (bounded) until `more` further batches are answered; whether they were.
    fn wait_for(&self, more: usize, timeout: Duration) -> bool {
        let target = self.answered() + more;
        poll(timeout, || self.answered() >= target)
    }

    fn finish(mut self) -> Loaded {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.take().expect("load thread").join().expect("load thread panicked")
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// How many IDs occur more than once (0 when all are distinct).
fn duplicates(ids: &[u64]) -> usize {
    ids.len() - ids.iter().collect::<HashSet<_>>().len()
}

/// A snowflake ID's generator ID (`datacenter·32 + worker`, bits 12..22).
fn generator_of(id: u64) -> u64 {
    (id >> 12) & 0x3ff
}

/// A snowflake ID's time, in Unix ms.
fn time_of(id: u64) -> u64 {
    check::time_ms(&check::snowflake(), id)
}

/// `idmint lease list <args> --json`, parsed.
fn lease_list(args: &[String]) -> serde_json::Value {
    let mut all = strings(&["lease", "list", "--json"]);
    all.extend_from_slice(args);
    let output = idmint(&all, &[]).output().expect("run idmint lease list");
    assert!(
        output.status.success(),
        "idmint lease list failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("lease list --json is not JSON ({e}): {}", String::from_utf8_lossy(&output.stdout))
    })
}

/// The entry of one generator ID in a lease listing.
fn lease_entry(listing: &serde_json::Value, generator_id: u64) -> serde_json::Value {
    listing["entries"]
        .as_array()
        .and_then(|entries| entries.iter().find(|e| e["generator_id"] == generator_id))
        .cloned()
        .unwrap_or_else(|| panic!("no entry for generator {generator_id}: {listing:#}"))
}

/// `lease list` on the embedded store (no etcd): a server's claim shows as held, with its
/// holder, and its mark; after SIGTERM the claim is gone and the mark stays.
#[test]
fn lease_list_reads_the_embedded_store() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_dir = dir.path().to_string_lossy().into_owned();
    let mut node = start_node("file server", &strings(&["--data-dir", &data_dir]), &[]);
    let ids = node.get("/v1/batch?count=100").ids();
    let args = strings(&["--data-dir", &data_dir]);
    let held = lease_entry(&lease_list(&args), 0);
    assert_eq!(held["namespace"], "default");
    assert_eq!(held["claimed"], true, "{held:#}");
    let holder = held["holder"].as_str().unwrap_or_default();
    assert!(holder.contains(&format!("pid {}", node.pid())), "{held:#}");
    let mark = held["mark_ms"].as_u64().expect("a mark");
    assert!(ids.iter().all(|&id| time_of(id) <= mark));
    assert!(held["mark"].as_str().is_some_and(|m| m.ends_with('Z') && m.contains('T')));
    assert!(held["mark_ahead_ms"].as_i64().is_some_and(|ahead| ahead > -60_000));
    assert!(node.terminate(PROCESS_TIMEOUT).success(), "{}", node.full_log());
    let released = lease_entry(&lease_list(&args), 0);
    assert_eq!(released["claimed"], false, "{released:#}");
    assert!(released["mark_ms"].as_u64().is_some_and(|m| m >= mark));
    // The table says the same.
    let mut table_args = strings(&["lease", "list"]);
    table_args.extend(args);
    let table = idmint(&table_args, &[]).output().expect("run idmint lease list");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("NAMESPACE") && text.contains("default"), "{text}");
    report("lease_list_reads_the_embedded_store", check::assert_unique(&ids));
}

/// `--generators 3` on the embedded store: three claims, each listed by `lease list` as held
/// by this server with its own mark, `/v1/namespaces` naming all three and `k-sorted`; every
/// batch from one generator; after SIGTERM all three claims are released and the marks stay.
#[test]
fn several_generators_are_each_claimed_listed_and_released() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_dir = dir.path().to_string_lossy().into_owned();
    let serve = strings(&["--data-dir", &data_dir, "--generators", "3"]);
    let mut node = start_node("three generators", &serve, &[]);
    let info = node.get("/v1/namespaces").json();
    let mut held: Vec<u64> = info["namespaces"][0]["generator_ids"]
        .as_array()
        .map(|ids| ids.iter().filter_map(serde_json::Value::as_u64).collect())
        .unwrap_or_default();
    held.sort_unstable();
    assert_eq!(held, [0, 1, 2], "{info:#}");
    assert_eq!(info["namespaces"][0]["order"], "k-sorted", "{info:#}");
    let mut ids = Vec::new();
    let mut generators = HashSet::new();
    for _ in 0..12 {
        let batch = node.get("/v1/batch?count=100").ids();
        assert!(batch.windows(2).all(|w| w[0] < w[1]), "a batch must increase: {batch:?}");
        assert!(batch.iter().all(|&id| generator_of(id) == generator_of(batch[0])));
        generators.insert(generator_of(batch[0]));
        ids.extend(batch);
    }
    assert_eq!(generators.len(), 3, "calls take turns over the generators: {generators:?}");
    let args = strings(&["--data-dir", &data_dir]);
    let listing = lease_list(&args);
    let mut marks = Vec::new();
    for generator_id in 0..3 {
        let entry = lease_entry(&listing, generator_id);
        assert_eq!(entry["claimed"], true, "{entry:#}");
        let holder = entry["holder"].as_str().unwrap_or_default();
        assert!(holder.contains(&format!("pid {}", node.pid())), "{entry:#}");
        let mark = entry["mark_ms"].as_u64().expect("a mark");
        assert!(
            ids.iter()
                .filter(|&&id| generator_of(id) == generator_id)
                .all(|&id| time_of(id) <= mark)
        );
        marks.push(mark);
    }
    assert!(node.terminate(PROCESS_TIMEOUT).success(), "{}", node.full_log());
    let listing = lease_list(&args);
    for (generator_id, mark) in (0..3).zip(marks) {
        let entry = lease_entry(&listing, generator_id);
        assert_eq!(entry["claimed"], false, "released at stop: {entry:#}");
        assert!(entry["mark_ms"].as_u64().is_some_and(|m| m >= mark), "{entry:#}");
    }
    report("several_generators_are_each_claimed_listed_and_released", check::assert_unique(&ids));
}

/// Bad fleet settings fail at once with one clear line.
#[test]
fn bad_fleet_settings_are_refused_clearly() {
    let refused = |args: &[&str], needle: &str| {
        let mut all = strings(&["serve", "--listen", "127.0.0.1:0"]);
        all.extend(strings(args));
        let output = idmint(&all, &[]).output().expect("run idmint serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: `{stderr}` lacks `{needle}`");
    };
    let etcd = "http://127.0.0.1:1";
    refused(&["--etcd", etcd, "--lease-ttl", "1"], "at least 2 s");
    refused(&["--etcd", etcd, "--etcd-scheme", "lable-org"], "--etcd-lable-prefix");
    refused(&["--lease-ttl", "5"], "need --etcd");
    refused(&["--generator-id", "1", "--generator-pool", "2"], "cannot be used with");
    refused(&["--generators", "0"], "generators must be 1..=64");
    refused(&["--generators", "3", "--generator-pool", "2"], "generators must be 1..=2");
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    refused(&["--unsafe-no-fence"], "--unsafe-no-fence needs --etcd");
}

/// A build without the `etcd` feature refuses `--etcd` with one clear error.
#[cfg(not(feature = "etcd"))]
#[test]
fn without_the_etcd_feature_etcd_is_refused_clearly() {
    let args = strings(&["serve", "--listen", "127.0.0.1:0", "--etcd", "http://127.0.0.1:1"]);
    let output = idmint(&args, &[]).output().expect("run idmint serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("without etcd support"), "{stderr}");
}

#[cfg(feature = "etcd")]
mod on_etcd {
    use std::sync::{Mutex, MutexGuard};

    use idmint_coord::testing::{self, EtcdCluster};
    use idmint_core::{AnyId, FieldValue, Layout};
    use idmint_etcd::{Client, GetOptions, KeyValue, Txn, TxnOp};

    use super::*;
    use crate::common::libfaketime;

    /// One etcd test at a time (except the long, mostly idle restart test).
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// libfaketime's library, or `None` (the reason printed) when it is not installed and
    /// `CI` is not `true`; under `CI=true` its absence fails the test.
    fn faketime_or_skip() -> Option<std::path::PathBuf> {
        let lib = libfaketime();
        if lib.is_none() {
            let hint = "install Debian's `faketime` package (scripts/test-all does)";
            assert!(!testing::in_ci(), "libfaketime is required under CI=true: {hint}");
            #[allow(clippy::print_stderr)]
            {
                eprintln!("skipping: libfaketimeMT.so.1 not found; {hint}");
            }
        }
        lib
    }

    /// Where these tests keep their keys.
    const PREFIX: &str = "fleet/";

    /// A real etcd cluster and a runtime to talk to it.
    struct Etcd {
        runtime: tokio::runtime::Runtime,
        cluster: EtcdCluster,
        /// Where the servers' data directories are: each remembers the cluster its server
        /// claims on and the marks it stored (each test has a cluster of its own, so a shared
        /// default directory would be refused).
        data: tempfile::TempDir,
        /// How many data directories [`Etcd::data_dir`] made.
        servers: AtomicUsize,
    }

    impl Etcd {
        /// `None` (the reason printed) when etcd is not installed and `CI` is not `true`.
        fn start(members: usize) -> Option<Etcd> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let cluster = testing::available(runtime.block_on(EtcdCluster::start(members)))?;
            let data = tempfile::tempdir().expect("temporary directory");
            Some(Etcd { runtime, cluster, data, servers: AtomicUsize::new(0) })
        }

        /// `--data-dir` for one more server of this test: a new directory each time, as on a
        /// host of its own (servers sharing one would share their memory of marks, and one
        /// server's memory would cover for another in the negative controls).
        fn data_dir(&self) -> String {
            let n = self.servers.fetch_add(1, Ordering::Relaxed);
            self.data.path().join(format!("server-{n}")).display().to_string()
        }

        /// `--etcd` for a server: every member.
        fn endpoints(&self) -> String {
            self.cluster.endpoints().join(",")
        }

        /// A plain client on the running members, as an operator would use.
        fn client(&self) -> Client {
            let running: Vec<String> = self
                .cluster
                .member_pids()
                .iter()
                .enumerate()
                .filter(|(_, pid)| pid.is_some())
                .map(|(i, _)| self.cluster.endpoint(i))
                .collect();
            self.runtime.block_on(Client::connect(running, None)).expect("connect to etcd")
        }

        fn get_at(&self, key: &str, revision: i64) -> Option<KeyValue> {
            let mut client = self.client();
            let options = (revision > 0).then(|| GetOptions::new().with_revision(revision));
            let response = self.runtime.block_on(client.get(key, options)).expect("get");
            response.kvs().first().cloned()
        }

        fn get(&self, key: &str) -> Option<KeyValue> {
            self.get_at(key, 0)
        }

        /// The mark (ms) the current holder of a native claim read when it claimed: the mark
        /// key as of the claim key's create revision (the claim transaction read it there).
        fn mark_read_by_claim(&self, namespace: &str, generator_id: u64) -> Option<u64> {
            let claim = self
                .get(&format!("{PREFIX}{namespace}/claim/{generator_id}"))
                .unwrap_or_else(|| panic!("no claim on {namespace}/{generator_id}"));
            let mark = self.get_at(
                &format!("{PREFIX}{namespace}/mark/{generator_id}"),
                claim.create_revision(),
            )?;
            let json: serde_json::Value = serde_json::from_slice(mark.value()).expect("mark json");
            json["mark_ms"].as_u64()
        }
    }

    /// `idmint serve` flags for these tests: this etcd, TTL `ttl`, a 1 s window, quick
    /// retries, and `extra`.
    fn fleet_args(etcd: &Etcd, ttl: u32, extra: &[&str]) -> Vec<String> {
        fleet_args_window(etcd, ttl, 1_000, extra)
    }

    /// [`fleet_args`] with another window.
    fn fleet_args_window(etcd: &Etcd, ttl: u32, window_ms: u64, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            "--etcd".to_owned(),
            etcd.endpoints(),
            "--etcd-prefix".to_owned(),
            PREFIX.to_owned(),
            "--lease-ttl".to_owned(),
            ttl.to_string(),
            "--window-ms".to_owned(),
            window_ms.to_string(),
            "--claim-retry-ms".to_owned(),
            "100".to_owned(),
            "--data-dir".to_owned(),
            etcd.data_dir(),
        ];
        if window_ms > u64::from(ttl) * 1_000 {
            // On purpose (the pause scenario): a holder that serves inside its old window.
            args.push("--allow-long-window".to_owned());
        }
        args.extend(strings(extra));
        args
    }

    /// Two servers on `args`, each under load by a [`Loader`] that has had 10 answers.
    fn two_loaded_servers(args: &[String]) -> (Vec<Node>, Vec<Loader>) {
        let nodes: Vec<Node> =
            (0..2).map(|i| start_node(&format!("server {i}"), args, &[])).collect();
        let loaders: Vec<Loader> =
            nodes.iter().map(|n| Loader::start(n.addr, "/v1/batch?count=500")).collect();
        for loader in &loaders {
            assert!(loader.wait_for(10, Duration::from_secs(10)));
        }
        (nodes, loaders)
    }

    /// `lease list` flags for this etcd.
    fn list_args(etcd: &Etcd) -> Vec<String> {
        strings(&["--etcd", &etcd.endpoints(), "--etcd-prefix", PREFIX])
    }

    /// T11 and item 2: three servers on one etcd get three distinct generator IDs, and
    /// `lease list` shows each claim (holder, TTL left) and mark; SIGTERM revokes the lease
    /// and keeps the mark.
    #[test]
    fn three_servers_get_three_generator_ids_and_lease_list_shows_them() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let mut nodes: Vec<Node> = (0..3)
            .map(|i| start_node(&format!("server {i}"), &fleet_args(&etcd, 5, &[]), &[]))
            .collect();
        let ids_held: HashSet<u64> =
            nodes.iter().map(|n| n.generator_id().expect("a generator id")).collect();
        assert_eq!(ids_held, (0..3).collect(), "three distinct generator ids");
        let mut ids = Vec::new();
        for node in &nodes {
            ids.extend(node.get("/v1/batch?count=1000").ids());
        }

        let listing = lease_list(&list_args(&etcd));
        assert_eq!(listing["store"], "etcd");
        for node in &nodes {
            let entry = lease_entry(&listing, node.generator_id().expect("id"));
            assert_eq!(entry["namespace"], "default");
            assert_eq!(entry["claimed"], true);
            let holder = entry["holder"].as_str().unwrap_or_default();
            assert!(holder.contains(&format!("pid {}", node.pid())), "{entry:#}");
            let ttl = entry["lease_ttl_left_s"].as_i64().expect("ttl left");
            assert!((1..=5).contains(&ttl), "{entry:#}");
            assert_eq!(entry["lease_granted_ttl_s"], 5);
            let ahead = entry["mark_ahead_ms"].as_i64().expect("ms ahead");
            assert!((-2_000..=2_000).contains(&ahead), "{entry:#}");
        }
        let by_namespace =
            lease_list(&[list_args(&etcd), strings(&["--namespace", "other"])].concat());
        assert_eq!(by_namespace["entries"].as_array().map(Vec::len), Some(0));

        // Shutdown revokes the lease at once (no TTL to wait for) and keeps the mark.
        let stopped = nodes.remove(0);
        let stopped_id = stopped.generator_id().expect("id");
        let mut stopped = stopped;
        assert!(stopped.terminate(PROCESS_TIMEOUT).success(), "{}", stopped.full_log());
        assert!(
            etcd.get(&format!("{PREFIX}default/claim/{stopped_id}")).is_none(),
            "lease revoked"
        );
        let entry = lease_entry(&lease_list(&list_args(&etcd)), stopped_id);
        assert_eq!(entry["claimed"], false, "{entry:#}");
        assert!(entry["mark_ms"].as_u64().is_some(), "the mark stays: {entry:#}");
        // The table form says the same.
        let mut table = strings(&["lease", "list"]);
        table.extend(list_args(&etcd));
        let text = idmint(&table, &[]).output().expect("lease list");
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("LEASE TTL") && text.lines().count() >= 5, "{text}");
        report("three_servers", check::assert_unique(&ids));
    }

    /// T11: ten servers started at once against an empty etcd get ten distinct generator IDs
    /// (below 50) and issue distinct IDs.
    #[test]
    fn ten_servers_started_at_once_get_ten_generator_ids() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let args = fleet_args(&etcd, 5, &[]);
        let children: Vec<Child> =
            (0..10).map(|_| serve_command(&args, &[]).spawn().expect("spawn")).collect();
        let nodes: Vec<Node> = children
            .into_iter()
            .enumerate()
            .map(|(i, child)| Node::adopt(&format!("server {i}"), child, PROCESS_TIMEOUT))
            .collect();
        for node in &nodes {
            node.wait_ready(PROCESS_TIMEOUT);
        }
        let held: HashSet<u64> = nodes.iter().map(|n| n.generator_id().expect("id")).collect();
        // Claimants that meet draw apart (idmint_coord::Probe): below 5N whatever their draws.
        assert_eq!(held.len(), 10, "ten distinct generator ids: {held:?}");
        assert!(held.iter().all(|&id| id < 50), "below 50: {held:?}");
        let mut ids = Vec::new();
        for node in &nodes {
            ids.extend(node.get("/v1/batch?count=1000").ids());
        }
        report("ten_servers_at_once", check::assert_unique(&ids));
    }

    /// T2: `kill -9` the holder of a one-ID pool under load and start a successor, 20 times.
    /// Each successor waits for the lease to expire, takes the same generator ID over, and
    /// issues only above the mark its predecessor left (read from etcd at the successor's
    /// claim revision), while every predecessor issued only at or below it.
    ///
    /// It runs beside the other tests (no `SERIAL`): it mostly waits for leases to expire
    /// (about 2 s a round, 20 rounds) and bounds its waits generously.
    #[test]
    fn kill_9_and_restart_20_times_under_load_never_repeats() {
        let Some(etcd) = Etcd::start(1) else { return };
        let args = fleet_args(&etcd, 2, &["--generator-pool", "1", "--wait-for-claim"]);
        let mut all: Vec<u64> = Vec::new();
        let mut previous: Vec<u64> = Vec::new();
        let started = Instant::now();
        for round in 0..20 {
            let mut node = spawn_node(&format!("round {round}"), &args, &[]);
            node.wait_ready(Duration::from_secs(10));
            assert_eq!(node.generator_id(), Some(0), "round {round}");
            let left = etcd.mark_read_by_claim("default", 0);
            if round > 0 {
                let left =
                    left.unwrap_or_else(|| panic!("round {round}: the predecessor left no mark"));
                assert!(
                    previous.iter().all(|&id| time_of(id) <= left),
                    "round {round}: the predecessor issued above the mark it left"
                );
                previous.clear();
            }
            let loader = Loader::start(node.addr, "/v1/batch?count=1000");
            assert!(loader.wait_for(5, Duration::from_secs(10)), "round {round}: no load answered");
            node.kill9();
            let loaded = loader.finish();
            assert!(!loaded.ids.is_empty(), "round {round}");
            if let Some(left) = left {
                assert!(
                    loaded.ids.iter().all(|&id| time_of(id) > left),
                    "round {round}: an id at or below the predecessor's mark {left}"
                );
                check::assert_all_above(&loaded.ids, &all);
            }
            previous.extend(&loaded.ids);
            all.extend(loaded.ids);
        }
        let dups = duplicates(&all);
        assert_eq!(dups, 0, "{dups} duplicate ids among {}", all.len());
        report(
            &format!("kill_9_and_restart_20_times ({:.1} s)", started.elapsed().as_secs_f64()),
            check::assert_unique(&all),
        );
    }

    /// What the pause scenario produced.
    struct Paused {
        /// IDs from the paused server A, in order, over the whole test.
        a: Loaded,
        /// IDs from the spare B.
        b: Loaded,
        /// The mark of generator 0 B read when it took the ID over (`None` if none).
        b_read: Option<u64>,
        /// When A was stopped (wall ms).
        stopped_at_ms: u64,
        /// A's generator ID, claims and lost claims at the end.
        a_generator: Option<u64>,
        a_claims: u64,
        a_lost: u64,
    }

    fn wall_ms() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    /// T6: server A (pool of 2, so it holds generator 0) and a spare B (`--wait-for-claim`,
    /// pool of 1: it waits for generator 0) under load; A is stopped with SIGSTOP for 3× the
    /// TTL (6 s), B takes generator 0 over meanwhile, then A gets SIGCONT. The window (16 s)
    /// is long enough that A still serves inside it after the pause (its stored mark is at
    /// least half a window less one 0.5 s check, 7.5 s, ahead when it stops), which is safe
    /// only because B starts above A's mark; then A's window runs out and it claims again (the
    /// other ID of its pool).
    fn pause_scenario(etcd: &Etcd, extra: &[&str]) -> Paused {
        let ttl = 2;
        let mut a_args = fleet_args_window(etcd, ttl, 16_000, &["--generator-pool", "2"]);
        a_args.extend(strings(extra));
        let mut b_args =
            fleet_args_window(etcd, ttl, 16_000, &["--generator-pool", "1", "--wait-for-claim"]);
        b_args.extend(strings(extra));
        let mut a = start_node("A", &a_args, &[]);
        assert_eq!(a.generator_id(), Some(0));
        let mut b = spawn_node("B (spare)", &b_args, &[]);
        assert_eq!(b.readyz(), Some(503), "a waiting spare is not ready");
        assert_eq!(b.generator_id(), None);

        let a_load = Loader::start(a.addr, "/v1/batch?count=100");
        let b_load = Loader::start(b.addr, "/v1/batch?count=100");
        assert!(a_load.wait_for(20, Duration::from_secs(10)), "A answers");
        let stopped_at_ms = wall_ms();
        let stopped = Instant::now();
        a.signal("STOP");
        let pause = Duration::from_secs(3 * u64::from(ttl));
        assert!(
            poll(pause, || b.ready()),
            "the spare did not take generator 0 over while A was paused:\n{}",
            b.log_text()
        );
        assert_eq!(b.generator_id(), Some(0));
        let b_read = etcd.mark_read_by_claim("default", 0);
        assert!(b_load.wait_for(5, Duration::from_secs(5)), "B answers");
        // The rest of the pause (a scenario length, not an assertion).
        std::thread::sleep(pause.saturating_sub(stopped.elapsed()));
        a.signal("CONT");

        // A serves what is left of its window, runs out, and claims again: generator 1.
        let reclaimed = poll(Duration::from_secs(30), || {
            a.get("/metrics").status == 200 && a.generator_id() == Some(1) && a.ready()
        });
        assert!(reclaimed, "A did not claim again after its window ran out:\n{}", a.log_text());
        assert!(a_load.wait_for(5, Duration::from_secs(5)), "A answers again");
        let a_claims = a.metric(r#"idmint_claims_total{namespace="default"}"#);
        let a_lost = a.metric(r#"idmint_claims_lost_total{namespace="default"}"#);
        let a_generator = a.generator_id();
        let (a_loaded, b_loaded) = (a_load.finish(), b_load.finish());
        assert!(a.terminate(PROCESS_TIMEOUT).success(), "{}", a.full_log());
        assert!(b.terminate(PROCESS_TIMEOUT).success(), "{}", b.full_log());
        Paused { a: a_loaded, b: b_loaded, b_read, stopped_at_ms, a_generator, a_claims, a_lost }
    }

    #[test]
    fn a_paused_server_and_the_spare_that_took_its_id_never_repeat() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let outcome = pause_scenario(&etcd, &[]);
        let (a, b) = (&outcome.a, &outcome.b);
        let a0: Vec<u64> = a.ids.iter().copied().filter(|&id| generator_of(id) == 0).collect();
        let a1: Vec<u64> = a.ids.iter().copied().filter(|&id| generator_of(id) == 1).collect();
        assert!(b.ids.iter().all(|&id| generator_of(id) == 0), "B holds generator 0 only");
        // The scenario did what it should: A served inside its old window after the pause
        // (times after it was stopped), and with generator 1 after claiming again.
        let after_pause =
            a0.iter().filter(|&&id| time_of(id) > outcome.stopped_at_ms + 1_000).count();
        assert!(after_pause > 0, "A issued nothing after SIGCONT inside its window");
        assert!(!a1.is_empty(), "A issued nothing with generator 1");
        assert_eq!(outcome.a_generator, Some(1));
        assert_eq!(outcome.a_claims, 2, "A claimed twice");
        assert_eq!(outcome.a_lost, 1, "A lost one claim");
        // Between its window and its new claim, A's calls wait for the claim (within their
        // 1 s limit); a call refused all the same says why, in one of these two codes.
        assert!(
            a.refused.keys().all(|code| code == "window_exhausted" || code == "not_ready"),
            "{:?}",
            a.refused
        );
        // The fence: everything A issued with generator 0 lies at or below the mark B read;
        // everything B issued lies above it.
        let mark = outcome.b_read.expect("B read A's mark");
        assert!(a0.iter().all(|&id| time_of(id) <= mark), "A issued above its stored mark");
        assert!(b.ids.iter().all(|&id| time_of(id) > mark), "B issued at or below A's mark");
        let all: Vec<u64> = a.ids.iter().chain(&b.ids).copied().collect();
        let dups = duplicates(&all);
        assert_eq!(dups, 0, "{dups} duplicates among {} ids", all.len());
        report(
            &format!("a_paused_server_and_the_spare ({} of A's calls refused)", a.refusals()),
            check::assert_unique(&all),
        );
    }

    /// The negative control: the same pause test with the fence off (`--unsafe-no-fence`,
    /// cfg `idmint_negative_controls`): B ignores A's mark and starts at its own clock, while A
    /// still serves its window after the pause, so both issue the same IDs, and the test's
    /// duplicate count finds them. This proves the pause test can fail.
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    #[test]
    fn without_the_fence_the_pause_test_finds_duplicates() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let outcome = pause_scenario(&etcd, &["--unsafe-no-fence"]);
        let all: Vec<u64> = outcome.a.ids.iter().chain(&outcome.b.ids).copied().collect();
        let dups = duplicates(&all);
        assert!(
            dups > 0,
            "the unfenced run must repeat ids ({} ids checked, B read mark {:?})",
            all.len(),
            outcome.b_read
        );
        #[allow(clippy::print_stderr)]
        {
            eprintln!("negative control: {dups} duplicates among {} ids, as expected", all.len());
        }
    }

    /// T3 on etcd: a server on the true clock, SIGTERM, then its successor under libfaketime
    /// 60 s in the past takes the generator ID over: it starts above the mark (about a minute
    /// ahead of its clock) and issues only IDs above the first server's.
    #[test]
    fn a_successor_with_its_clock_60s_back_issues_only_higher_ids() {
        let _serial = serial();
        let Some(lib) = faketime_or_skip() else { return };
        let Some(etcd) = Etcd::start(1) else { return };
        let args = fleet_args(&etcd, 2, &["--generator-pool", "1", "--wait-for-claim"]);
        let mut first = start_node("true clock", &args, &[]);
        let loader = Loader::start(first.addr, "/v1/batch?count=1000");
        assert!(loader.wait_for(20, Duration::from_secs(10)));
        let before = loader.finish();
        assert!(first.terminate(PROCESS_TIMEOUT).success(), "{}", first.full_log());

        let lib = lib.to_string_lossy().into_owned();
        let faked =
            [("LD_PRELOAD", lib.as_str()), ("FAKETIME", "-60s"), ("DONT_FAKE_MONOTONIC", "1")];
        let second = start_node("clock 60 s back", &args, &faked);
        assert_eq!(second.generator_id(), Some(0));
        let mark = etcd.mark_read_by_claim("default", 0).expect("the first server's mark");
        let loader = Loader::start(second.addr, "/v1/batch?count=1000");
        assert!(loader.wait_for(20, Duration::from_secs(10)));
        let after = loader.finish();
        assert!(before.ids.iter().all(|&id| time_of(id) <= mark));
        assert!(after.ids.iter().all(|&id| time_of(id) > mark), "an id at or below the mark");
        check::assert_all_above(&after.ids, &before.ids);
        let ahead = check::metric_f64(
            &second.get("/metrics").ok().text(),
            r#"idmint_ahead_of_wall_seconds{namespace="default"}"#,
        );
        assert!(ahead > 50.0, "idmint_ahead_of_wall_seconds is {ahead}: was the clock faked?");
        let all: Vec<u64> = before.ids.iter().chain(&after.ids).copied().collect();
        report("a_successor_with_its_clock_60s_back", check::assert_unique(&all));
    }

    /// The wrong cluster: a server that issued IDs on one etcd cluster, restarted on an empty
    /// one (a typo in `--etcd`, a wiped or disaster-recovery cluster) with its clock set back
    /// to when it started, is refused with one `error:` line: its data directory remembers the
    /// cluster and its marks. The negative control, the same restart with a data directory
    /// that remembers nothing (as every server was before it remembered), issues IDs that the
    /// first server issued.
    #[test]
    fn a_server_restarted_on_an_empty_cluster_is_refused() {
        let _serial = serial();
        let Some(lib) = faketime_or_skip() else { return };
        let Some(etcd) = Etcd::start(1) else { return };
        let empty = Etcd::start(1).expect("a second etcd cluster");
        let pool = ["--generator-pool", "1"];
        let first_args = fleet_args(&etcd, 2, &pool);
        let at = first_args.iter().position(|a| a == "--data-dir").expect("--data-dir") + 1;
        let remembering = first_args[at].clone();
        let mut first = start_node("on cluster A", &first_args, &[]);
        // Two seconds of load, then the restart with the clock set back to the first ID's
        // second (rounded down) and three seconds of load: the two spans of ID times overlap
        // by at least a second, and each server fills about a quarter of its milliseconds, so
        // the control repeats IDs in dozens of milliseconds, not by chance.
        let loader = Loader::start(first.addr, "/v1/batch?count=1000");
        assert!(loader.wait_for(10, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_secs(2));
        let before = loader.finish();
        assert!(first.terminate(PROCESS_TIMEOUT).success(), "{}", first.full_log());

        let started_ms = before.ids.iter().map(|&id| time_of(id)).min().expect("ids");
        let lib = lib.to_string_lossy().into_owned();
        let back = |now: u64| format!("-{}s", now.saturating_sub(started_ms) / 1_000 + 1);
        let start_on_b = |data_dir: &str| {
            let mut args = fleet_args(&empty, 2, &pool);
            let at = args.iter().position(|a| a == "--data-dir").expect("--data-dir") + 1;
            args[at] = data_dir.to_owned();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("after 1970");
            let offset = back(u64::try_from(now.as_millis()).expect("ms fit"));
            let faked = [
                ("LD_PRELOAD", lib.as_str()),
                ("FAKETIME", offset.as_str()),
                ("DONT_FAKE_MONOTONIC", "1"),
            ];
            serve_command(&args, &faked).spawn().expect("start idmint serve")
        };

        let refused = start_on_b(&remembering).wait_with_output().expect("wait");
        let stderr = crate::common::strip_ansi(&String::from_utf8_lossy(&refused.stderr));
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error: ")).collect();
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(
            errors.len() == 1
                && errors[0].contains("last claimed on")
                && errors[0].contains("holds no idmint marks")
                && errors[0].contains("idmint lease adopt-cluster"),
            "not one clear error line:\n{stderr}"
        );

        // The control.
        let forgetful = tempfile::tempdir().expect("temporary directory");
        let child = start_on_b(&forgetful.path().display().to_string());
        let mut control =
            Node::adopt("on empty cluster B, remembering nothing", child, PROCESS_TIMEOUT);
        control.wait_ready(PROCESS_TIMEOUT);
        let loader = Loader::start(control.addr, "/v1/batch?count=1000");
        assert!(loader.wait_for(10, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_secs(3));
        let after = loader.finish();
        assert!(control.terminate(PROCESS_TIMEOUT).success(), "{}", control.full_log());
        let all: Vec<u64> = before.ids.iter().chain(&after.ids).copied().collect();
        let repeated = duplicates(&all);
        let span = |ids: &[u64]| {
            let times = ids.iter().map(|&id| time_of(id));
            (times.clone().min().unwrap_or(0), times.max().unwrap_or(0))
        };
        #[allow(clippy::print_stderr)]
        {
            eprintln!("times: before {:?}, control {:?}", span(&before.ids), span(&after.ids));
            eprintln!(
                "a_server_restarted_on_an_empty_cluster (negative control): {repeated} of {} ids repeated",
                all.len()
            );
        }
        assert!(repeated > 0, "negative control: no id repeated in {} ids", all.len());
    }

    /// F5 with a single-member etcd killed (SIGKILL) under load for longer than the lease:
    /// both servers keep issuing inside their stored windows, then report not ready once the
    /// windows are used up, and recover (claiming again) after etcd is restarted.
    #[test]
    fn servers_ride_out_an_etcd_kill_and_recover() {
        let _serial = serial();
        let Some(mut etcd) = Etcd::start(1) else { return };
        let args = fleet_args(&etcd, 3, &[]);
        let (nodes, loaders) = two_loaded_servers(&args);
        let killed = Instant::now();
        let killed_ms = wall_ms();
        etcd.cluster.kill(0).expect("kill etcd");
        for node in &nodes {
            assert!(
                poll(Duration::from_secs(10), || node.readyz() == Some(503)),
                "{} still ready with etcd down:\n{}",
                node.name,
                node.log_text()
            );
        }
        // Keep etcd down past the lease (3 s), then bring it back.
        std::thread::sleep(Duration::from_secs(4).saturating_sub(killed.elapsed()));
        let restarted_ms = wall_ms();
        etcd.runtime.block_on(etcd.cluster.restart(0)).expect("restart etcd");
        for node in &nodes {
            node.wait_ready(Duration::from_secs(20));
        }
        for loader in &loaders {
            assert!(loader.wait_for(10, Duration::from_secs(10)), "load after recovery");
        }
        let held: Vec<u64> = nodes.iter().map(|n| n.generator_id().expect("id")).collect();
        assert_ne!(held[0], held[1], "two distinct generator ids after recovery");
        let mut all = Vec::new();
        let mut refused = BTreeMap::new();
        for (node, loader) in nodes.iter().zip(loaders) {
            let loaded = loader.finish();
            // Issued while etcd was down: times after the kill and before the restart (every
            // claim after the restart starts at or above the restart time).
            let during = loaded
                .ids
                .iter()
                .filter(|&&id| (killed_ms + 100..restarted_ms).contains(&time_of(id)))
                .count();
            assert!(during > 0, "{} issued nothing inside its window after etcd died", node.name);
            for (code, n) in loaded.refused {
                *refused.entry(code).or_insert(0) += n;
            }
            all.extend(loaded.ids);
        }
        assert!(
            refused.keys().all(|c| ["window_exhausted", "not_ready"].contains(&c.as_str())),
            "{refused:?}"
        );
        let dups = duplicates(&all);
        assert_eq!(dups, 0, "{dups} duplicates among {} ids", all.len());
        report(
            &format!("servers_ride_out_an_etcd_kill (generator ids after it: {held:?})"),
            check::assert_unique(&all),
        );
    }

    /// T7: the leader of a three-member etcd killed twice under load (restarted in between),
    /// with 5 s leases and a 3 s window: the servers keep issuing, no ID repeats.
    #[test]
    fn the_etcd_leader_killed_twice_under_load() {
        let _serial = serial();
        let Some(mut etcd) = Etcd::start(3) else { return };
        let args = fleet_args_window(&etcd, 5, 3_000, &[]);
        let (nodes, loaders) = two_loaded_servers(&args);
        for kill in 0..2 {
            let leader = etcd.runtime.block_on(etcd.cluster.leader()).expect("a leader");
            etcd.cluster.kill(leader).expect("kill the leader");
            // Load goes on through the election.
            for loader in &loaders {
                assert!(loader.wait_for(20, Duration::from_secs(15)), "kill {kill}: load stalled");
            }
            etcd.runtime.block_on(etcd.cluster.restart(leader)).expect("restart the member");
            for node in &nodes {
                node.wait_ready(Duration::from_secs(20));
            }
        }
        for loader in &loaders {
            assert!(loader.wait_for(10, Duration::from_secs(10)));
        }
        let lost: u64 = nodes
            .iter()
            .map(|n| n.metric(r#"idmint_claims_lost_total{namespace="default"}"#))
            .sum();
        let mut all = Vec::new();
        let mut refusals = 0;
        for loader in loaders {
            let loaded = loader.finish();
            refusals += loaded.refusals();
            all.extend(loaded.ids);
        }
        let dups = duplicates(&all);
        assert_eq!(dups, 0, "{dups} duplicates among {} ids", all.len());
        report(
            &format!("the_etcd_leader_killed_twice ({refusals} refusals, {lost} claims lost)"),
            check::assert_unique(&all),
        );
    }

    /// A field of a decoded `lable` ID.
    fn lable_field(id: u64, field: &str) -> u64 {
        let layout = Layout::builtin("lable").expect("lable layout");
        let fields = layout.decode(AnyId::U64(id)).expect("a lable id");
        match fields.iter().find(|(name, _)| name == field) {
            Some((_, FieldValue::Number(n))) => *n,
            other => panic!("no numeric {field}: {other:?}"),
        }
    }

    /// A fleet with only etcd keeps its `sequence` segments there: two servers, each with its
    /// own data directory as on two machines, hand out disjoint IDs, and the segment is an etcd
    /// key. (Segments kept in each server's own data directory would make both hand out 1, 2,
    /// 3...: this test catches that.)
    #[test]
    fn a_sequence_namespace_on_etcd_is_shared_by_the_fleet() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = dir.path().join("idmint.toml");
        std::fs::write(
            &config,
            "[[server.namespaces]]\nname = \"orders\"\nlayout = \"sequence\"\n",
        )
        .expect("write the config");
        let nodes: Vec<Node> = (0..2)
            .map(|i| {
                let data = dir.path().join(format!("machine-{i}"));
                let args = strings(&[
                    "--etcd",
                    &etcd.endpoints(),
                    "--config",
                    &config.to_string_lossy(),
                    "--data-dir",
                    &data.to_string_lossy(),
                ]);
                start_node(&format!("sequence {i}"), &args, &[])
            })
            .collect();
        let mut ids = Vec::new();
        for _ in 0..5 {
            for node in &nodes {
                ids.extend(node.get("/v1/namespaces/orders/batch?count=1000").ids());
            }
        }
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "duplicates between two servers of one fleet");
        assert_eq!(count, 10_000);
        let key = etcd.get("idmint/segments/orders").expect("the segment is an etcd key");
        let max: u64 = String::from_utf8_lossy(key.value()).parse().expect("a decimal value");
        assert!(max >= *ids.last().expect("ids"), "every id is below the stored segment end");
    }

    /// LableOrg's pool through the server (configured from a file): a `lable` namespace claims
    /// `pool/0:0` (empty value, 5 s lease) and writes `cluster-id` "0"; then, with cluster IDs
    /// "4, 5" and `pool/4:0..4:2046` taken (HighGeneratorCountIT), it gets generator 2047 of
    /// cluster 4, which its IDs carry.
    #[test]
    fn a_lable_namespace_claims_from_the_lableorg_pool() {
        let _serial = serial();
        let Some(etcd) = Etcd::start(1) else { return };
        let dir = tempfile::tempdir().expect("temporary directory");
        let config = dir.path().join("idmint.toml");
        std::fs::write(
            &config,
            r#"etcd_scheme = "lable-org"
etcd_lable_prefix = "unique-id/"
[server]
window_ms = 1000
[[server.namespaces]]
name = "lable"
layout = "lable"
"#,
        )
        .expect("write the config");
        let args = strings(&[
            "--etcd",
            &etcd.endpoints(),
            "--config",
            &config.to_string_lossy(),
            "--data-dir",
            &etcd.data_dir(),
        ]);
        let batch = "/v1/namespaces/lable/batch?count=100&format=decimal";

        let mut first = start_node("lable 1", &args, &[]);
        assert_eq!(first.generator_id(), Some(0));
        let pool = etcd.get("unique-id/pool/0:0").expect("pool/0:0");
        assert_eq!(pool.value(), b"", "LableOrg's pool keys are empty");
        assert_ne!(pool.lease(), 0, "on a lease");
        assert_eq!(etcd.get("unique-id/cluster-id").expect("cluster-id").value(), b"0");
        let mut ids = first.get(batch).ids();
        assert!(ids.iter().all(|&id| lable_field(id, "cluster_id") == 0));
        assert!(first.terminate(PROCESS_TIMEOUT).success(), "{}", first.full_log());
        assert!(etcd.get("unique-id/pool/0:0").is_none(), "released");

        // HighGeneratorCountIT.
        let mut client = etcd.client();
        etcd.runtime.block_on(client.put("unique-id/cluster-id", "4, 5", None)).expect("put");
        let keys: Vec<String> = (0..2047).map(|g| format!("unique-id/pool/4:{g}")).collect();
        for chunk in keys.chunks(100) {
            let puts: Vec<TxnOp> = chunk.iter().map(|k| TxnOp::put(k.as_str(), "", None)).collect();
            etcd.runtime.block_on(client.txn(Txn::new().and_then(puts))).expect("pre-claim");
        }
        let second = start_node("lable 2", &args, &[]);
        assert_eq!(second.generator_id(), Some(4 * 2048 + 2047));
        let pool = etcd.get("unique-id/pool/4:2047").expect("pool/4:2047");
        assert_eq!(pool.value(), b"");
        let holder = etcd.get("unique-id/idmint/holder/4:2047").expect("holder key");
        assert!(String::from_utf8_lossy(holder.value()).contains(&format!("pid {}", second.pid())));
        let new_ids = second.get(batch).ids();
        for &id in &new_ids {
            assert_eq!((lable_field(id, "generator_id"), lable_field(id, "cluster_id")), (2047, 4));
        }
        let listing = lease_list(&strings(&[
            "--etcd",
            &etcd.endpoints(),
            "--etcd-scheme",
            "lable-org",
            "--etcd-lable-prefix",
            "unique-id/",
        ]));
        assert_eq!(listing["cluster_ids"], "4, 5");
        let entry = lease_entry(&listing, 4 * 2048 + 2047);
        assert_eq!(
            (entry["cluster_id"].as_u64(), entry["lable_generator_id"].as_u64()),
            (Some(4), Some(2047))
        );
        assert_eq!(entry["claimed"], true);
        assert_eq!(entry["lease_granted_ttl_s"], 5);
        assert!(entry["mark_ms"].as_u64().is_some(), "{entry:#}");
        ids.extend(new_ids);
        report("a_lable_namespace_claims_from_the_lableorg_pool", check::assert_unique(&ids));
    }
}
