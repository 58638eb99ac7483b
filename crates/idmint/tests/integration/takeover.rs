//! A paused holder on a shared store: four processes mint on Postgres (or etcd), one is
//! stopped (SIGSTOP) past its 2 s lease, a fifth takes its generator ID, the stopped one is
//! resumed (SIGCONT), and all keep minting. Every ID is collected: no duplicate, the fifth
//! holds exactly the stopped one's generator ID, and everything the stopped one issued on it,
//! before or after its pause, is below the fifth's first ID (DESIGN.md, "How does fleet mode
//! on etcd stay unique when leases lie?" and "Generator-ID leases in Postgres: how are claims
//! timed and fenced without trusting clocks?"). The resumed process is refused (its calls
//! fail while no generator ID is free) or claims again; it never extends its lost claim.
//!
//! This test binary runs itself again as each child (`IDMINT_TEST_TAKEOVER_OUT` selects the
//! child mode of the `child` test). Every wait is on a condition, with a generous bound.
//! Skipped, with the reason printed, when Postgres or etcd is not installed (a failure in CI).

use std::{
    collections::HashSet,
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use idmint::{Minter, NamespaceConfig, ServerConfig};
use idmint_coord::testing::{self, Postgres};

/// Where a child writes: its generator ID, then its IDs, each as 8 little-endian bytes; its
/// errors go, one a line, to the same path with `.errors` added.
const OUT: &str = "IDMINT_TEST_TAKEOVER_OUT";
/// The child's own data directory (each child is a machine of its own).
const DIR: &str = "IDMINT_TEST_TAKEOVER_DIR";
/// `postgres <url>` or `etcd <endpoint>,...`.
const STORE: &str = "IDMINT_TEST_TAKEOVER_STORE";
/// The file whose existence tells every child to close and exit.
const STOP: &str = "IDMINT_TEST_TAKEOVER_STOP";
/// A fixed generator ID to claim (the fifth process), instead of one of the pool.
const FIXED: &str = "IDMINT_TEST_TAKEOVER_FIXED";

/// The fleet's generator IDs: 0..4, one per process, so none is free while four run.
const POOL: u64 = 4;
/// The lease of every claim: etcd's shortest.
const LEASE_TTL: Duration = Duration::from_secs(2);
/// The window, which must fit in the lease.
const WINDOW_MS: u64 = 1_000;
/// IDs per call.
const BATCH: u64 = 500;
/// The bound of every wait: generous, so that only a real failure ends one.
const BOUND: Duration = Duration::from_secs(120);

/// The generator ID of a Snowflake (datacenter and worker, bits 12..22).
fn generator_of(id: u64) -> u64 {
    (id >> 12) & 0x3ff
}

/// The child mode: does nothing unless run as a child by the tests below.
#[test]
fn child() {
    let (Some(out), Some(dir), Ok(store), Some(stop)) = (
        std::env::var_os(OUT),
        std::env::var_os(DIR),
        std::env::var(STORE),
        std::env::var_os(STOP),
    ) else {
        return;
    };
    let fixed: Option<u64> = std::env::var(FIXED).ok().map(|g| g.parse().expect("a number"));
    let build = || {
        let namespace = match fixed {
            Some(id) => NamespaceConfig { generator_id: Some(id), ..NamespaceConfig::default() },
            None => NamespaceConfig { generator_pool: Some(POOL), ..NamespaceConfig::default() },
        };
        let config = ServerConfig {
            window_ms: WINDOW_MS,
            namespaces: vec![namespace],
            ..ServerConfig::default()
        };
        let builder = Minter::builder().data_dir(&dir).config(config).lease_ttl(LEASE_TTL);
        let builder = match store.split_once(' ') {
            Some(("postgres", url)) => builder.postgres(url),
            Some(("etcd", endpoints)) => builder.etcd(endpoints.split(',')),
            _ => panic!("unknown store {store}"),
        };
        builder.build_blocking()
    };
    // Until a generator ID is free: the fifth waits here for the stopped one's lease to lapse.
    let started = Instant::now();
    let minter = loop {
        match build() {
            Ok(minter) => break minter,
            Err(e) => {
                assert!(started.elapsed() < BOUND, "no generator id was freed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let mut file = std::fs::File::create(&out).expect("create the output");
    let generator = minter.generator_id("default").expect("known").expect("a generator id");
    file.write_all(&generator.to_le_bytes()).expect("write");
    let mut errors_path = out.clone();
    errors_path.push(".errors");
    let mut errors = std::fs::File::create(errors_path).expect("create the error log");
    while !Path::new(&stop).exists() {
        match minter.batch(BATCH) {
            Ok(ids) => {
                let mut bytes = Vec::with_capacity(8 * ids.len());
                for id in ids {
                    bytes.extend_from_slice(&u64::try_from(id).expect("u64").to_le_bytes());
                }
                file.write_all(&bytes).expect("write");
            }
            Err(e) => {
                writeln!(errors, "{e}").expect("log");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // A process whose claim was taken may fail to store its mark or release the claim: that
    // is the fence at work, not a failure of the test.
    if let Err(e) = minter.close() {
        writeln!(errors, "close: {e}").expect("log");
    }
}

/// The children of one run, killed (SIGKILL, by PID) if the test ends early.
struct Fleet {
    tmp: tempfile::TempDir,
    store: String,
    children: Vec<Child>,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Fleet {
    fn out(&self, index: usize) -> PathBuf {
        self.tmp.path().join(format!("out-{index}"))
    }

    fn stop_file(&self) -> PathBuf {
        self.tmp.path().join("stop")
    }

    fn spawn(&mut self, fixed: Option<u64>) {
        let index = self.children.len();
        let mut command = Command::new(std::env::current_exe().expect("the test binary"));
        command
            .args(["--exact", "takeover::child", "--test-threads=1", "--quiet"])
            .env(OUT, self.out(index))
            .env(DIR, self.tmp.path().join(format!("data-{index}")))
            .env(STORE, &self.store)
            .env(STOP, self.stop_file())
            .stdout(Stdio::null());
        if let Some(id) = fixed {
            command.env(FIXED, id.to_string());
        }
        self.children.push(command.spawn().expect("spawn a child"));
    }

    /// A child's output so far: its generator ID (once written) and its IDs (a partly
    /// written last ID is left out).
    fn read(&self, index: usize) -> (Option<u64>, Vec<u64>) {
        let bytes = std::fs::read(self.out(index)).unwrap_or_default();
        let mut words = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect::<Vec<_>>()
            .into_iter();
        (words.next(), words.collect())
    }

    fn errors(&self, index: usize) -> String {
        let mut path = self.out(index).into_os_string();
        path.push(".errors");
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// Waits until `ready` holds, failing after [`BOUND`] with `what`.
    fn wait(&mut self, what: &str, mut ready: impl FnMut(&Fleet) -> bool) {
        let started = Instant::now();
        while !ready(self) {
            for (index, child) in self.children.iter_mut().enumerate() {
                if let Some(status) = child.try_wait().expect("try_wait") {
                    panic!("child {index} ended ({status}) while waiting until {what}");
                }
            }
            assert!(started.elapsed() < BOUND, "not within {BOUND:?}: {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, index: usize, signal: &str) {
        let pid = self.children[index].id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }
}

/// The scenario on one store; `store` is the children's [`STORE`].
fn takeover(store: String) {
    let mut fleet =
        Fleet { tmp: tempfile::tempdir().expect("tempdir"), store, children: Vec::new() };
    for _ in 0..4 {
        fleet.spawn(None);
    }
    fleet.wait("four processes claimed and minted", |f| (0..4).all(|i| f.read(i).1.len() >= 1_000));
    let generators: HashSet<u64> = (0..4).filter_map(|i| fleet.read(i).0).collect();
    assert_eq!(generators, (0..POOL).collect(), "the four hold the pool");

    // Stop one past its lease; a fifth, waiting for exactly its generator ID, takes it over.
    let stopped = 0;
    let taken = fleet.read(stopped).0.expect("a generator id");
    fleet.signal(stopped, "-STOP");
    fleet.spawn(Some(taken));
    let fifth = 4;
    fleet.wait("the fifth took the stopped one's generator id and minted", |f| {
        f.read(fifth).1.len() >= 1_000
    });
    assert_eq!(fleet.read(fifth).0, Some(taken), "the fifth holds the stopped one's id");

    // Resume it: it must find its claim gone, and be refused or claim again.
    let before = fleet.read(stopped).1.len();
    fleet.signal(stopped, "-CONT");
    fleet.wait("the resumed process was refused or claimed again", |f| {
        !f.errors(stopped).is_empty()
            || f.read(stopped).1.iter().any(|&id| generator_of(id) != taken)
    });
    let counts: Vec<usize> = (0..5).map(|i| fleet.read(i).1.len()).collect();
    fleet.wait("the others kept minting", |f| {
        (1..5).all(|i| f.read(i).1.len() >= counts[i] + 2_000)
    });

    std::fs::write(fleet.stop_file(), b"").expect("stop");
    let started = Instant::now();
    for (index, child) in fleet.children.iter_mut().enumerate() {
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                assert!(status.success(), "child {index} failed: {status}");
                break;
            }
            assert!(started.elapsed() < BOUND, "child {index} did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    let outputs: Vec<Vec<u64>> = (0..5).map(|i| fleet.read(i).1).collect();
    let total: usize = outputs.iter().map(Vec::len).sum();
    let distinct: HashSet<u64> = outputs.iter().flatten().copied().collect();
    assert_eq!(distinct.len(), total, "{} duplicates among {total} ids", total - distinct.len());
    let first_of_fifth = *outputs[fifth].iter().min().expect("the fifth minted");
    assert!(outputs[fifth].iter().all(|&id| generator_of(id) == taken), "the fifth stayed on it");
    let on_taken: Vec<u64> =
        outputs[stopped].iter().copied().filter(|&id| generator_of(id) == taken).collect();
    let last_of_stopped = *on_taken.iter().max().expect("the stopped one minted on its id");
    assert!(
        last_of_stopped < first_of_fifth,
        "the stopped process issued {last_of_stopped} on generator {taken}, not below the \
         fifth's first {first_of_fifth}: {} of its ids after the resume",
        outputs[stopped].len() - before
    );
}

#[test]
fn a_paused_holder_on_postgres_never_repeats_an_id() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    takeover(format!("postgres {}", server.url()));
}

#[test]
fn a_paused_holder_on_etcd_never_repeats_an_id() {
    let Some(cluster) = crate::fleet::cluster(1) else { return };
    takeover(format!("etcd {}", cluster.endpoints().join(",")));
}
