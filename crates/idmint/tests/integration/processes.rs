//! Several OS processes on one data directory: this test binary runs itself again as each
//! child (`IDMINT_TEST_CHILD_OUT` selects the child mode of the `child` test), which mints
//! with the blocking handle and writes its generator ID and IDs to a file.

use std::{
    collections::HashSet,
    io::Write,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use idmint::Minter;

/// Where a child writes: its generator ID, then its IDs, each as 8 little-endian bytes.
const OUT: &str = "IDMINT_TEST_CHILD_OUT";
/// The shared data directory.
const DIR: &str = "IDMINT_TEST_CHILD_DIR";
/// How many IDs a child mints; `forever` mints until killed, flushing every batch.
const COUNT: &str = "IDMINT_TEST_CHILD_COUNT";
/// `<dir>,<n>`: after claiming, a child marks itself in `<dir>` and mints once `n` children
/// have, so that all hold their claims at once (one that closed early would free its
/// generator ID for the next: safe, as it starts above the mark, but not 16 distinct IDs).
const BARRIER: &str = "IDMINT_TEST_CHILD_BARRIER";

/// The child mode: does nothing unless run as a child by the tests below.
#[test]
fn child() {
    let (Some(out), Some(dir)) = (std::env::var_os(OUT), std::env::var_os(DIR)) else { return };
    let count = std::env::var(COUNT).expect("count");
    let minter = Minter::builder().data_dir(dir).build_blocking().expect("build");
    let mut file = std::fs::File::create(out).expect("create the output");
    let generator = minter.generator_id("default").expect("known").expect("a generator id");
    file.write_all(&generator.to_le_bytes()).expect("write");
    if let Ok(barrier) = std::env::var(BARRIER) {
        let (dir, n) = barrier.split_once(',').expect("<dir>,<n>");
        let n: usize = n.parse().expect("a number of children");
        std::fs::write(Path::new(dir).join(std::process::id().to_string()), b"").expect("mark");
        let started = Instant::now();
        while std::fs::read_dir(dir).expect("the barrier").count() < n {
            assert!(started.elapsed() < Duration::from_secs(120), "the others did not claim");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let mut left = if count == "forever" { u64::MAX } else { count.parse().expect("a count") };
    while left > 0 {
        let n = left.min(1_000);
        let mut bytes = Vec::with_capacity(8 * 1_000);
        for id in minter.batch(n).expect("batch") {
            bytes.extend_from_slice(&u64::try_from(id).expect("u64").to_le_bytes());
        }
        file.write_all(&bytes).expect("write");
        if count == "forever" {
            file.flush().expect("flush");
        }
        left -= n;
    }
    minter.close().expect("close");
}

fn spawn(dir: &Path, out: &Path, count: &str) -> Child {
    command(dir, out, count).spawn().expect("spawn a child")
}

fn command(dir: &Path, out: &Path, count: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", "processes::child", "--test-threads=1", "--quiet"])
        .env(OUT, out)
        .env(DIR, dir)
        .env(COUNT, count)
        .stdout(Stdio::null());
    command
}

/// A child's output: its generator ID and its IDs (a partly written last ID is dropped).
fn read(out: &Path) -> (u64, Vec<u64>) {
    let bytes = std::fs::read(out).expect("read the output");
    let mut words = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect::<Vec<_>>()
        .into_iter();
    (words.next().expect("the generator id"), words.collect())
}

/// 16 processes mint 100,000 IDs each on one data directory, all holding their claims at
/// once: no duplicate in the 1.6 M, and 16 distinct generator IDs. Then one is killed with SIGKILL while minting and started again
/// on the same directory: it takes the same generator ID, and its IDs are above those the
/// killed one wrote.
#[test]
fn sixteen_processes_share_a_data_directory_and_survive_kill_9() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let outs: Vec<PathBuf> = (0..16).map(|i| tmp.path().join(format!("out-{i}"))).collect();
    let barrier = tmp.path().join("barrier");
    std::fs::create_dir(&barrier).expect("mkdir");
    let barrier = format!("{},16", barrier.display());
    let children: Vec<Child> = outs
        .iter()
        .map(|out| {
            let mut command = command(&dir, out, "100000");
            command.env(BARRIER, &barrier).spawn().expect("spawn a child")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a child failed");
    }
    let mut generators = HashSet::new();
    let mut all = HashSet::new();
    for out in &outs {
        let (generator, ids) = read(out);
        assert_eq!(ids.len(), 100_000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "a process's ids increase");
        generators.insert(generator);
        all.extend(ids);
    }
    assert_eq!(generators.len(), 16, "16 distinct generator ids: {generators:?}");
    assert_eq!(all.len(), 1_600_000, "duplicates among the processes' ids");

    // kill -9 while minting, then start again.
    let killed_out = tmp.path().join("killed");
    let mut killed = spawn(&dir, &killed_out, "forever");
    let started = Instant::now();
    while std::fs::metadata(&killed_out).map_or(0, |m| m.len()) < 8 * 50_000 {
        assert!(started.elapsed() < Duration::from_secs(120), "the child did not mint");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().expect("SIGKILL");
    assert!(!killed.wait().expect("wait").success(), "killed, not exited");
    let (killed_generator, before) = read(&killed_out);
    let restarted_out = tmp.path().join("restarted");
    assert!(spawn(&dir, &restarted_out, "10000").wait().expect("wait").success());
    let (generator, after) = read(&restarted_out);
    assert_eq!(generator, killed_generator, "the killed process's claim was freed");
    let last = *before.last().expect("ids before the kill");
    assert!(after[0] > last, "{} is not above {last}, written before the kill", after[0]);
    assert!(after.iter().all(|id| !all.contains(id)));
}
