//! Black-box tests of `idmint serve`: the real binary on free loopback ports, restarted with
//! the clock set back under libfaketime (reliability T3), killed with SIGKILL under load (T2),
//! started twice on one data directory (T10), stopped with SIGTERM, and the README's command.
//!
//! Every process is started by the test and stopped by its PID only (a guard kills it if the
//! test fails first).

#[path = "../../idmint-server/tests/common/check.rs"]
mod check;
mod common;
#[path = "../../idmint-server/tests/common/http.rs"]
mod http;

use std::{
    io::Read,
    net::TcpListener,
    path::Path,
    process::{Command, ExitStatus, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use check::{
    assert_all_above, assert_increasing, assert_unique, metric, report, snowflake, stored_mark,
    time_ms, wait_until,
};
use common::{Server, idmint, libfaketime, strip_ansi};

/// How long a server may take to start, or to stop after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(10);

/// `idmint serve ...` with a clean environment, stderr piped and stdout discarded.
fn serve_command(listen: &str, data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = idmint(["serve", "--listen", listen, "--data-dir"], env);
    command.arg(data_dir).args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    command
}

/// A running `idmint serve` that this test started.
type Serve = Server;

impl Serve {
    /// Starts on a port the server picks, waits for its "serving" line and for `/readyz`.
    fn start(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        Serve::start_on("127.0.0.1:0", data_dir, args, env)
    }

    fn start_on(listen: &str, data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let child = serve_command(listen, data_dir, args, env).spawn().expect("start idmint serve");
        let serve = Serve::adopt("idmint serve", child, PROCESS_TIMEOUT);
        let addr = serve.addr;
        wait_until("/readyz to answer 200", PROCESS_TIMEOUT, || {
            http::send(addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
        });
        serve
    }

    /// The generator ID the default namespace holds, from `/v1/namespaces`.
    fn generator_id(&self) -> u64 {
        let json = self.get("/v1/namespaces").ok().json();
        json["namespaces"][0]["generator_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generator id: {json}"))
    }

    /// SIGTERM to this process, then its exit status.
    fn terminate(&mut self) -> ExitStatus {
        self.signal_and_wait("TERM")
    }

    /// `kill -<signal> <pid>` for this process, then its exit status.
    fn signal_and_wait(&mut self, signal: &str) -> ExitStatus {
        assert!(self.child.try_wait().expect("try_wait").is_none(), "already exited");
        self.signal(signal);
        self.wait_exit(PROCESS_TIMEOUT)
    }
}

/// The number after `key=` in a log line.
fn log_number(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// IDs from single and batch requests.
fn fetch(serve: &Serve, batches: usize) -> Vec<u64> {
    let mut ids = Vec::new();
    for _ in 0..batches {
        ids.extend(serve.get("/v1/batch?count=1000").ids());
        ids.push(serve.get("/v1/next").id());
    }
    ids
}

/// Under `CI=true` a missing tool fails the test; elsewhere the test is skipped, saying why.
#[allow(clippy::print_stderr)]
fn missing_tool(what: &str) {
    let hint = "install Debian's `faketime` package (scripts/test-all does)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is required under CI=true: {hint}");
    }
    eprintln!("SKIPPED: {what} not found; {hint}");
}

/// T3 with the real binary: a run on the true clock, SIGTERM, then a run under libfaketime
/// 60 s in the past. The second run starts above the mark the first stored, and says it runs
/// about a minute ahead of its (faked) wall clock.
#[test]
fn restart_under_libfaketime_60s_back_issues_only_higher_ids() {
    let Some(lib) = libfaketime() else {
        missing_tool("libfaketime (libfaketime.so.1)");
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut first = Serve::start(dir.path(), &[], &[]);
    let before = fetch(&first, 5);
    assert!(first.terminate().success(), "exit after SIGTERM:\n{}", first.full_log());
    let mark = stored_mark(dir.path(), "default", 0);

    let lib = lib.to_string_lossy().into_owned();
    let faked = [("LD_PRELOAD", lib.as_str()), ("FAKETIME", "-60s"), ("DONT_FAKE_MONOTONIC", "1")];
    let mut second = Serve::start(dir.path(), &[], &faked);
    assert_eq!(second.generator_id(), 0);
    let after = fetch(&second, 5);
    assert_increasing(&after);
    assert_all_above(&after, &before);
    let layout = snowflake();
    assert!(after.iter().all(|&id| time_ms(&layout, id) > mark), "an id at or below the mark");
    // The server saw its clock a minute behind the stored mark.
    let ahead = metric(
        &second.get("/metrics").ok().text(),
        r#"idmint_ahead_of_wall_ms{namespace="default"}"#,
    );
    assert!(ahead > 50_000, "idmint_ahead_of_wall_ms is {ahead}: was the clock faked?");
    assert!(second.terminate().success(), "exit after SIGTERM:\n{}", second.full_log());
    let log = second.full_log();
    let warned = log
        .lines()
        .find(|l| l.contains("ahead of the clock"))
        .and_then(|l| log_number(l, "ahead_ms="))
        .unwrap_or_else(|| panic!("no warning about running ahead:\n{log}"));
    assert!(warned > 50_000, "the start-up warning says {warned} ms ahead");

    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("restart_under_libfaketime", assert_unique(&all));
}

/// T2 with the real binary: five rounds of start, load from two clients, SIGKILL mid-load,
/// restart on the same directory. Every round's IDs are above every earlier round's.
#[test]
fn sigkill_mid_load_and_restart_never_repeats_an_id() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let layout = snowflake();
    let mut all: Vec<u64> = Vec::new();
    // The mark the previous round left on disk: a new holder issues only above it.
    let mut left_mark = None;
    for round in 0..5 {
        let mut serve = Serve::start(dir.path(), &[], &[]);
        assert_eq!(serve.generator_id(), 0, "round {round}: the killed server's claim is free");
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let loaders: Vec<JoinHandle<Vec<u64>>> = (0..2)
            .map(|_| {
                let (addr, stop, answered) = (serve.addr, Arc::clone(&stop), Arc::clone(&answered));
                std::thread::spawn(move || {
                    let mut ids = Vec::new();
                    let Ok(mut connection) = http::Connection::open(addr) else { return ids };
                    while !stop.load(Ordering::SeqCst) {
                        match connection.get("/v1/batch?count=500") {
                            Ok(response) => {
                                ids.extend(response.ids());
                                answered.fetch_add(1, Ordering::SeqCst);
                            }
                            // The server was killed mid-request.
                            Err(_) => break,
                        }
                    }
                    ids
                })
            })
            .collect();
        wait_until("40 batches under load", PROCESS_TIMEOUT, || {
            answered.load(Ordering::SeqCst) >= 40
        });
        serve.kill9();
        stop.store(true, Ordering::SeqCst);
        let mut ids = Vec::new();
        for loader in loaders {
            ids.extend(loader.join().expect("loader thread"));
        }
        assert!(ids.len() >= 40 * 500, "round {round}: only {} ids", ids.len());
        if let Some(previous) = left_mark {
            assert_all_above(&ids, &all);
            assert!(
                ids.iter().all(|&id| time_ms(&layout, id) > previous),
                "round {round}: an id at or below the mark the killed server left"
            );
        }
        let mark = stored_mark(dir.path(), "default", 0);
        assert!(
            ids.iter().all(|&id| time_ms(&layout, id) <= mark),
            "round {round}: an id above the mark"
        );
        left_mark = Some(mark);
        all.extend(ids);
    }
    report("sigkill_mid_load_and_restart", assert_unique(&all));
}

/// T10 with the real binary: a second server with the same fixed generator ID on the same
/// directory exits non-zero with one error line naming the holder's PID; one without a fixed
/// ID takes generator 1.
#[test]
fn second_server_on_the_same_generator_id_exits_with_one_clear_error() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut first = Serve::start(dir.path(), &["--generator-id", "0"], &[]);
    assert_eq!(first.generator_id(), 0);

    let mut refused = serve_command("127.0.0.1:0", dir.path(), &["--generator-id", "0"], &[])
        .spawn()
        .expect("start a second idmint serve");
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    let status = loop {
        if let Some(status) = refused.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = refused.kill();
            let _ = refused.wait();
            panic!("the second server did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    refused.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
    let stderr = strip_ansi(&stderr);
    assert_eq!(status.code(), Some(1), "exit status: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "not one line on stderr:\n{stderr}");
    let holder = format!("pid {}", first.pid());
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("already claimed")
            && stderr.contains(&holder),
        "the error does not name the holder ({holder}): {stderr}"
    );

    let second = Serve::start(dir.path(), &[], &[]);
    assert_eq!(second.generator_id(), 1);
    let mut ids = fetch(&first, 3);
    ids.extend(fetch(&second, 3));
    assert!(first.terminate().success(), "exit after SIGTERM:\n{}", first.full_log());
    report("second_server_on_the_same_generator_id", assert_unique(&ids));
}

/// SIGTERM: exit 0 after the shutdown steps in order, and the generator ID is free again for
/// a restart with the same fixed ID.
#[test]
fn sigterm_shuts_down_in_order_and_frees_the_generator_id() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut first = Serve::start(dir.path(), &["--generator-id", "0"], &[]);
    let before = fetch(&first, 3);
    let status = first.terminate();
    let log = first.full_log();
    assert_eq!(status.code(), Some(0), "exit status after SIGTERM:\n{log}");
    let steps = [
        "SIGTERM",
        "StoppedAccepting",
        "ReportedNotReady",
        "Drained",
        "Persisted",
        "Released",
        "idmint stopped",
    ];
    let positions: Vec<usize> = steps
        .iter()
        .map(|step| log.find(step).unwrap_or_else(|| panic!("no `{step}` in the log:\n{log}")))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "shutdown steps out of order:\n{log}");
    assert!(
        stored_mark(dir.path(), "default", 0) >= time_ms(&snowflake(), before[before.len() - 1])
    );

    let mut again = Serve::start(dir.path(), &["--generator-id", "0"], &[]);
    let after = fetch(&again, 3);
    assert_all_above(&after, &before);
    assert_eq!(again.terminate().code(), Some(0), "exit status:\n{}", again.full_log());
    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    report("sigterm_shuts_down_in_order", assert_unique(&all));
}

/// The README's first command, `idmint serve`, with the listen address and data directory
/// given as flags: `GET /v1/batch?count=1000` returns 1,000 distinct decimal strings, and
/// Ctrl-C (SIGINT) stops the server cleanly.
#[test]
fn the_readme_command_serves_1000_ids() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let port =
        TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let listen = format!("127.0.0.1:{port}");
    let data_dir = dir.path().join("idmint-data");
    let mut serve = Serve::start_on(&listen, &data_dir, &[], &[]);
    assert_eq!(serve.addr.port(), port);
    let response = serve.get("/v1/batch?count=1000").ok();
    assert_eq!(response.header("content-type"), Some("application/json"));
    let json = response.json();
    assert_eq!(json["namespace"], "default");
    let texts = json["ids"].as_array().unwrap_or_else(|| panic!("no ids: {json}"));
    assert_eq!(texts.len(), 1000);
    let mut ids: Vec<u64> = texts.iter().map(http::decimal).collect();
    assert_increasing(&ids);
    let next = serve.get("/v1/next").ok().json();
    assert_eq!(next["namespace"], "default");
    ids.push(http::decimal(&next["id"]));
    assert_increasing(&ids);
    let status = serve.signal_and_wait("INT");
    assert_eq!(status.code(), Some(0), "exit status after SIGINT:\n{}", serve.full_log());
    assert!(stored_mark(&data_dir, "default", 0) > 0);
    report("the_readme_command", assert_unique(&ids));
}
