//! `idmint gen` on a store (`--data-dir`): runs at the same time on one data directory each
//! claim a generator ID of their own and print disjoint IDs; node fields or layout flags
//! given beside a store are refused with one clear error line. The chaos harness's
//! `embedded-fleet` scenario runs the same command on Postgres and etcd under faults.

use std::{
    collections::HashSet,
    io::{BufRead, BufReader, Read},
    process::{Child, ChildStderr, Stdio},
};

use crate::common::idmint;

/// IDs per run: far more than a pipe holds, so a run whose stdout is not read yet is still
/// minting (and holding its claim) when the other starts.
const COUNT: &str = "300000";

/// A running `gen` whose claim was read from its stderr; its stdout is not read yet.
struct Run {
    child: Child,
    generator: u64,
    stderr: BufReader<ChildStderr>,
    said: String,
}

/// Starts `idmint gen -n COUNT --data-dir dir` and waits for the line that says which
/// generator ID it claimed. It holds the claim until it ends, and it cannot end before its
/// stdout is read: the pipe is full long before its last ID.
fn start(dir: &std::path::Path) -> Run {
    let mut child = idmint(["gen", "-n", COUNT, "--data-dir"], &[])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idmint gen");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut said = String::new();
    stderr.read_line(&mut said).expect("read stderr");
    let generator = said
        .split("generator_id=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no claim said on stderr: {said:?}"));
    Run { child, generator, stderr, said }
}

/// Reads a run's stdout (on a thread) and stderr to the end and waits for it: its IDs and
/// everything it said on stderr.
fn finish(mut run: Run) -> (Vec<u64>, String) {
    let mut stdout = run.child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).expect("read stdout");
        text
    });
    let mut said = run.said;
    run.stderr.read_to_string(&mut said).expect("read stderr");
    let text = reader.join().expect("the reader");
    let status = run.child.wait().expect("wait");
    assert!(status.success(), "gen failed ({status}): {said}");
    let ids = text.lines().map(|l| l.parse().expect("a decimal id")).collect();
    (ids, said)
}

#[test]
fn two_runs_at_once_on_one_data_dir_claim_apart_and_print_disjoint_ids() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("data");
    // The first holds its claim (its stdout is not read yet) while the second claims.
    let first = start(&data);
    let second = start(&data);
    assert_ne!(first.generator, second.generator, "both runs claimed one generator id");
    let mut seen = HashSet::new();
    for run in [first, second] {
        let generator = run.generator;
        let (ids, said) = finish(run);
        assert_eq!(said.lines().count(), 1, "one note only: {said}");
        assert_eq!(ids.len(), 300_000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "a run's ids increase");
        // Snowflake: the generator ID sits above the 12 sequence bits.
        assert!(ids.iter().all(|id| (id >> 12) & 0x3ff == generator), "ids of its claim");
        for id in ids {
            assert!(seen.insert(id), "id {id} printed by both runs");
        }
    }
    // A third run after them starts above both (their marks are in the data directory).
    let output = idmint(["gen", "--data-dir"], &[]).arg(&data).output().expect("run idmint gen");
    assert!(output.status.success(), "{output:?}");
    let id: u64 = String::from_utf8_lossy(&output.stdout).trim().parse().expect("an id");
    assert!(seen.iter().all(|&earlier| (earlier >> 22) <= (id >> 22)), "a later run is later");
}

#[test]
fn node_fields_and_layout_flags_beside_a_store_are_refused() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data = dir.path().join("data");
    let config = dir.path().join("idmint.toml");
    std::fs::write(&config, "[server]\nwindow_ms = 2000\n").expect("write the file");
    let data = data.to_str().expect("a utf-8 path");
    let config = config.to_str().expect("a utf-8 path");
    for (args, says) in [
        (vec!["gen", "--data-dir", data, "worker=7"], "node fields (worker=7) cannot be given"),
        (vec!["gen", "--config", config, "--layout", "uuid7"], "--layout cannot be given"),
        (vec!["gen", "--postgres", "mysql://db", "--data-dir", data], "invalid store url"),
    ] {
        let output = idmint(&args, &[]).output().expect("run idmint gen");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: nothing printed");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains(says), "{args:?}: {stderr}");
    }
}
