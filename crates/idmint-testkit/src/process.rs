//! The harness of black-box tests of the `idmint` binary: a command with a clean
//! environment, a running server process with its log, polling, and the log's helpers. The
//! binary's path is the caller's (`env!("CARGO_BIN_EXE_idmint")` exists only in the CLI's own
//! tests).
//!
//! Every process is started by a test and stopped by its PID only: dropping a [`Server`]
//! kills it if it still runs.

use std::{
    ffi::OsStr,
    io::{BufRead, BufReader},
    net::SocketAddr,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use crate::http;

/// Variables cleared from every `idmint` the tests run, besides every `IDMINT_*` one, so that
/// the caller's environment cannot change a test.
const CLEARED_ENV: [&str; 2] = ["RUST_LOG", "LD_PRELOAD"];

/// `<program> <args>` (the `idmint` binary) with a clean environment (then `env`), no stdin
/// and no colours. Servers stop without the load-balancer delay (`IDMINT_SHUTDOWN_DELAY_MS=0`)
/// unless `env` or a flag gives one: the tests that need it say so.
///
/// # Example
///
/// ```
/// use idmint_testkit::process::clean_command;
///
/// let command = clean_command("idmint", ["--version"], &[("NO_COLOR", "1")]);
/// assert_eq!(command.get_program(), "idmint");
/// ```
pub fn clean_command<A: AsRef<OsStr>>(
    program: &str,
    args: impl IntoIterator<Item = A>,
    env: &[(&str, &str)],
) -> Command {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null()).env("NO_COLOR", "1");
    for name in CLEARED_ENV {
        command.env_remove(name);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("IDMINT_") {
            command.env_remove(name);
        }
    }
    command.env("IDMINT_SHUTDOWN_DELAY_MS", "0");
    command.envs(env.iter().copied());
    command
}

/// `<program> <args>` (clean environment) with `input` written to its stdin, to the end.
///
/// # Panics
///
/// When the program cannot be started.
pub fn with_input(program: &str, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = clean_command(program, args, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idmint");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &input);
    });
    let output = child.wait_with_output().expect("idmint runs");
    writer.join().expect("the writer");
    output
}

/// Polls `ready` every few milliseconds until it holds or `timeout` passes; whether it held.
pub fn poll(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A running `idmint serve` that the test started, with its stderr read into a log. Dropping
/// it kills the process (by its PID, through `Child`) if it still runs, paused or not.
#[derive(Debug)]
pub struct Server {
    /// What the test calls it, in its failure messages.
    pub name: String,
    /// The process.
    pub child: Child,
    /// Its HTTP address, from its "serving" line.
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
}

impl Server {
    /// A server for an `idmint serve` the test spawned (stderr piped): waits up to `timeout`
    /// for its "serving" line, not for readiness.
    pub fn adopt(name: &str, mut child: Child, timeout: Duration) -> Server {
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
        let mut server = Server {
            name: name.to_owned(),
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
            reader: Some(reader),
        };
        let mut found = None;
        let started = poll(timeout, || {
            found = server.log_text().lines().find_map(serving_address);
            found.is_some() || matches!(server.child.try_wait(), Ok(Some(_)))
        });
        match found {
            Some(addr) => server.addr = addr,
            None => panic!(
                "{name} did not start (in time: {started}, exit: {:?}):\n{}",
                server.child.try_wait(),
                server.full_log()
            ),
        }
        server
    }

    /// Its process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET target` on a new connection.
    pub fn get(&self, target: &str) -> http::Response {
        http::get(self.addr, target)
    }

    /// The log lines read so far.
    pub fn log_text(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// The whole log, once the process has exited (so far, while it runs).
    pub fn full_log(&mut self) -> String {
        if matches!(self.child.try_wait(), Ok(Some(_)))
            && let Some(reader) = self.reader.take()
        {
            let _ = reader.join();
        }
        self.log_text()
    }

    /// `kill -<signal> <pid>` for this process, without waiting.
    pub fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        // The shell's own `kill`, which needs no procps; the PID is an argument, not code.
        let sent = Command::new("sh")
            .args(["-c", "kill \"$0\" \"$1\"", &format!("-{signal}"), &pid])
            .status()
            .expect("run sh -c kill");
        assert!(sent.success(), "kill -{signal} {pid} failed");
    }

    /// Waits up to `timeout` for the process to exit, and its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let mut status = None;
        let exited = poll(timeout, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        assert!(exited, "{} (pid {}) did not exit:\n{}", self.name, self.pid(), self.log_text());
        status.expect("exit status")
    }

    /// The status of `/readyz` (`None`: no answer).
    pub fn readyz(&self) -> Option<u16> {
        http::send(self.addr, "GET", "/readyz", &[], None).ok().map(|r| r.status)
    }

    /// Whether `/readyz` answers 200.
    pub fn ready(&self) -> bool {
        self.readyz() == Some(200)
    }

    /// Waits up to `timeout` for `/readyz` to answer 200.
    ///
    /// # Panics
    ///
    /// When it does not, with the server's log.
    pub fn wait_ready(&self, timeout: Duration) {
        assert!(
            poll(timeout, || self.ready()),
            "{} did not become ready:\n{}",
            self.name,
            self.log_text()
        );
    }

    /// The generator ID the first namespace holds, from `/v1/namespaces` (`None`: none).
    pub fn generator_id(&self) -> Option<u64> {
        self.get("/v1/namespaces").ok().json()["namespaces"][0]["generator_id"].as_u64()
    }

    /// One sample of `/metrics`.
    pub fn metric(&self, series: &str) -> u64 {
        crate::check::metric(&self.get("/metrics").ok().text(), series)
    }

    /// SIGTERM, then the exit status (waiting up to `timeout`).
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        self.signal("TERM");
        self.wait_exit(timeout)
    }

    /// SIGKILL, and reap.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Removes terminal colour sequences (`ESC [ ... letter`).
pub fn strip_ansi(line: &str) -> String {
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
pub fn serving_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("idmint is serving") {
        return None;
    }
    // A JSON line (`--log-format json`): the address is a field.
    if line.starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(line).ok()?;
        return json["fields"]["http"].as_str()?.parse().ok();
    }
    let rest = &line[line.find("http=")? + "http=".len()..];
    rest.split_whitespace().next()?.parse().ok()
}
