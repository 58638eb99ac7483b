//! Black-box tests of `idmint serve`: the real binary on free loopback ports, restarted with
//! the clock set back under libfaketime (reliability T3), killed with SIGKILL under load (T2),
//! started twice on one data directory (T10), stopped with SIGTERM, and the README's command.
//!
//! Every process is started by the test and stopped by its PID only (a guard kills it if the
//! test fails first).

#[path = "../../idmint-server/tests/common/check.rs"]
mod check;
#[path = "../../idmint-server/tests/common/http.rs"]
mod http;

use std::{
    io::{BufRead, BufReader, Read},
    net::{SocketAddr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use check::{
    assert_all_above, assert_increasing, assert_unique, metric, report, snowflake, stored_mark,
    time_ms, wait_until,
};

/// The binary under test.
const IDMINT: &str = env!("CARGO_BIN_EXE_idmint");

/// How long a server may take to start, or to stop after SIGTERM.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(10);

/// Variables of the parent's environment that would change how `idmint serve` runs.
const CLEARED_ENV: [&str; 12] = [
    "IDMINT_LISTEN",
    "IDMINT_DATA_DIR",
    "IDMINT_CONFIG",
    "IDMINT_LAYOUT",
    "IDMINT_GENERATOR_ID",
    "IDMINT_TOKEN",
    "IDMINT_WINDOW_MS",
    "IDMINT_MAX_BATCH",
    "IDMINT_MAX_AHEAD_MS",
    "IDMINT_ALLOW_AHEAD",
    "IDMINT_LOG",
    "RUST_LOG",
];

/// `idmint serve ...` with a clean environment, stderr piped and stdout discarded.
fn serve_command(listen: &str, data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(IDMINT);
    command
        .arg("serve")
        .args(["--listen", listen])
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("NO_COLOR", "1");
    for name in CLEARED_ENV {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

/// A running `idmint serve` that this test started. Dropping it kills the process (by its
/// PID, through `Child`) if it still runs.
struct Serve {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Serve {
    /// Starts on a port the server picks, waits for its "serving" line and for `/readyz`.
    fn start(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        Serve::start_on("127.0.0.1:0", data_dir, args, env)
    }

    fn start_on(listen: &str, data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut child =
            serve_command(listen, data_dir, args, env).spawn().expect("start idmint serve");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let reader = std::thread::spawn({
            let log = Arc::clone(&log);
            move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log.lock().expect("log").push(strip_ansi(&line));
                }
            }
        });
        let mut serve =
            Serve { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), log, reader: Some(reader) };
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        let addr = loop {
            if let Some(addr) = serve.log_text().lines().find_map(serving_address) {
                break addr;
            }
            if let Ok(Some(status)) = serve.child.try_wait() {
                panic!("idmint serve exited with {status} before serving:\n{}", serve.full_log());
            }
            assert!(Instant::now() < deadline, "idmint serve did not start:\n{}", serve.log_text());
            std::thread::sleep(Duration::from_millis(10));
        };
        serve.addr = addr;
        wait_until("/readyz to answer 200", PROCESS_TIMEOUT, || {
            http::send(addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
        });
        serve
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn get(&self, target: &str) -> http::Response {
        http::get(self.addr, target)
    }

    /// The generator ID the default namespace holds, from `/v1/namespaces`.
    fn generator_id(&self) -> u64 {
        let json = self.get("/v1/namespaces").ok().json();
        json["namespaces"][0]["generator_id"]
            .as_u64()
            .unwrap_or_else(|| panic!("no generator id: {json}"))
    }

    /// The log lines read so far.
    fn log_text(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// The whole log, once the process has exited.
    fn full_log(&mut self) -> String {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.log_text()
    }

    /// Waits (bounded) for the process to exit.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PROCESS_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "pid {} did not exit:\n{}",
                self.pid(),
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM to this process, then its exit status.
    fn terminate(&mut self) -> ExitStatus {
        self.signal("-TERM")
    }

    /// `kill <signal> <pid>` for this process, then its exit status.
    fn signal(&mut self, signal: &str) -> ExitStatus {
        assert!(self.child.try_wait().expect("try_wait").is_none(), "already exited");
        let pid = self.pid().to_string();
        // The shell's own `kill`, which needs no procps; the PID is an argument, not code.
        let sent = Command::new("sh")
            .args(["-c", "kill \"$0\" \"$1\"", signal, &pid])
            .status()
            .expect("run sh -c kill");
        assert!(sent.success(), "kill {signal} {pid} failed");
        self.wait_exit()
    }

    /// SIGKILL to this process, and reaps it.
    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Removes terminal colour sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The address in the log line `idmint is serving http=ADDR ...`.
fn serving_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("idmint is serving") {
        return None;
    }
    let rest = &line[line.find("http=")? + "http=".len()..];
    rest.split_whitespace().next()?.parse().ok()
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

/// libfaketime's preload library, where Debian's `faketime` package puts it.
fn libfaketime() -> Option<PathBuf> {
    let mut dirs =
        vec![PathBuf::from("/usr/lib/faketime"), PathBuf::from("/usr/local/lib/faketime")];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        dirs.extend(entries.flatten().map(|e| e.path().join("faketime")));
    }
    dirs.into_iter().map(|d| d.join("libfaketime.so.1")).find(|p| p.is_file())
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
    let status = serve.signal("-INT");
    assert_eq!(status.code(), Some(0), "exit status after SIGINT:\n{}", serve.full_log());
    assert!(stored_mark(&data_dir, "default", 0) > 0);
    report("the_readme_command", assert_unique(&ids));
}
