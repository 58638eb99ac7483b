//! The processes of a run: `idmint serve` servers (each on fixed free loopback ports, so that a
//! restart keeps its address) and application processes (`idmint gen` on a store), optionally
//! under libfaketime with a time file the nemesis rewrites, started, killed, paused and
//! restarted by PID only. Every process's output goes to its own log, which also tells the
//! checker which generator IDs it claimed.

use std::{
    fs::File,
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{error::ChaosError, watch::Pids};

/// How long a server may take to print its "serving" line (and an application its claim).
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Variables of the harness's environment that would change how `idmint` runs.
const CLEARED_ENV: [&str; 6] = [
    "RUST_LOG",
    "LD_PRELOAD",
    "FAKETIME",
    "FAKETIME_TIMESTAMP_FILE",
    "IDMINT_CONFIG",
    "IDMINT_LOG",
];

/// One process the harness runs (and may restart): an `idmint serve` ([`Node`]) or an
/// application (`idmint gen` on a store, `scenario/embedded.rs`). Started, killed, paused and
/// restarted by PID only; its stderr (and its stdout, unless the harness reads it) goes to
/// `dir/<name>.log`.
#[derive(Debug)]
pub(crate) struct Proc {
    /// Its name in histories.
    pub(crate) name: String,
    program: PathBuf,
    args: Vec<String>,
    /// The faketime file, when the process runs under libfaketime.
    faketime: Option<(PathBuf, PathBuf)>,
    log: PathBuf,
    child: Option<Child>,
    /// Whether it is stopped with SIGSTOP.
    pub(crate) paused: bool,
    /// How many times it was started.
    pub(crate) starts: u32,
    /// Another library to preload (the storage failpoint) and the variables it reads.
    pub(crate) preload: Option<(PathBuf, Vec<(String, String)>)>,
    /// Where every start registers its PID under this process's name.
    pids: Pids,
}

impl Proc {
    /// A process that is not started yet: `program <args>`, logging into `dir/<name>.log`,
    /// under libfaketime when `faketime` is the library's path.
    pub(crate) fn new(
        name: &str,
        program: &Path,
        args: Vec<String>,
        dir: &Path,
        faketime: Option<&Path>,
        pids: Pids,
    ) -> Result<Proc, ChaosError> {
        let faketime = match faketime {
            Some(lib) => {
                let file = dir.join(format!("{name}.faketime"));
                std::fs::write(&file, "+0\n").map_err(ChaosError::io("write a faketime file"))?;
                Some((lib.to_path_buf(), file))
            }
            None => None,
        };
        Ok(Proc {
            name: name.to_owned(),
            program: program.to_path_buf(),
            args,
            faketime,
            log: dir.join(format!("{name}.log")),
            child: None,
            paused: false,
            starts: 0,
            preload: None,
            pids,
        })
    }

    /// Sets the value of `flag` for the next start (adding the flag when it has none).
    pub(crate) fn set_flag(&mut self, flag: &str, value: &str) {
        match self.args.iter().position(|a| a == flag) {
            Some(at) if at + 1 < self.args.len() => value.clone_into(&mut self.args[at + 1]),
            _ => self.args.extend([flag.to_owned(), value.to_owned()]),
        }
    }

    /// Its PID, when it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Starts `program <lead> <args>` and registers its PID. Returns where its log stood
    /// before, and its stdout when `read_stdout` (else stdout goes to the log too).
    pub(crate) fn spawn(
        &mut self,
        lead: &[String],
        read_stdout: bool,
    ) -> Result<(u64, Option<ChildStdout>), ChaosError> {
        if self.child.is_some() {
            return Err(ChaosError::Server(format!("{} already runs", self.name)));
        }
        let offset = std::fs::metadata(&self.log).map_or(0, |m| m.len());
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(ChaosError::io(format!("open {}", self.log.display())))?;
        let err = log.try_clone().map_err(ChaosError::io("share a log"))?;
        let stdout = if read_stdout { Stdio::piped() } else { Stdio::from(log) };
        let mut command = Command::new(&self.program);
        command
            .args(lead)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(err)
            .env("NO_COLOR", "1");
        for name in CLEARED_ENV {
            command.env_remove(name);
        }
        let mut preload = Vec::new();
        if let Some((lib, vars)) = &self.preload {
            preload.push(lib.display().to_string());
            command.envs(vars.iter().map(|(k, v)| (k, v)));
        }
        if let Some((lib, file)) = &self.faketime {
            preload.push(lib.display().to_string());
            command
                .env("FAKETIME_TIMESTAMP_FILE", file)
                .env("FAKETIME_NO_CACHE", "1")
                .env("DONT_FAKE_MONOTONIC", "1");
        }
        if !preload.is_empty() {
            command.env("LD_PRELOAD", preload.join(" "));
        }
        let mut child = command.spawn().map_err(ChaosError::io(format!(
            "start {} ({})",
            self.name,
            self.program.display()
        )))?;
        self.pids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(child.id(), self.name.clone());
        let stdout = child.stdout.take();
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok((offset, stdout))
    }

    /// Its exit status, once it has exited (then it no longer runs).
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let status = child.try_wait().ok().flatten()?;
        let pid = child.id();
        self.child = None;
        self.reaped(pid);
        Some(status)
    }

    /// After the process `pid` was reaped: the shared memory libfaketime made for it, which
    /// a process killed with SIGKILL leaves in `/dev/shm` (named by its PID, so only this
    /// run's).
    fn reaped(&self, pid: u32) {
        if self.faketime.is_some() {
            for name in [format!("faketime_shm_{pid}"), format!("sem.faketime_sem_{pid}")] {
                let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
            }
        }
    }

    /// The log from byte `offset` on.
    pub(crate) fn log_since(&self, offset: u64) -> String {
        let mut text = Vec::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(offset));
            let _ = file.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    }

    /// Everything its incarnations logged.
    pub(crate) fn log_text(&self) -> String {
        self.log_since(0)
    }

    /// Every generator ID any of its incarnations claimed: the `generator_id=` of its log
    /// lines that contain `marker`.
    pub(crate) fn claimed_on(&self, marker: &str) -> Vec<u64> {
        let mut claimed: Vec<u64> = self
            .log_since(0)
            .lines()
            .filter(|line| line.contains(marker))
            .filter_map(|line| {
                let rest = &line[line.find("generator_id=")? + "generator_id=".len()..];
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().ok()
            })
            .collect();
        claimed.sort_unstable();
        claimed.dedup();
        claimed
    }

    /// `kill -<signal>` on its PID.
    fn signal(&self, signal: &str) -> Result<(), ChaosError> {
        let Some(pid) = self.pid() else {
            return Err(ChaosError::Server(format!("{} does not run", self.name)));
        };
        signal_pid(pid, signal)
    }

    /// SIGKILL, and reap.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.reaped(child.id());
        }
        self.paused = false;
    }

    /// SIGSTOP.
    pub(crate) fn pause(&mut self) -> Result<(), ChaosError> {
        self.signal("STOP")?;
        self.paused = true;
        Ok(())
    }

    /// SIGCONT.
    pub(crate) fn resume(&mut self) -> Result<(), ChaosError> {
        self.signal("CONT")?;
        self.paused = false;
        Ok(())
    }

    /// SIGTERM, then waits (bounded) for the exit; SIGKILL if it does not come.
    pub(crate) fn terminate(&mut self) {
        if self.paused {
            let _ = self.resume();
        }
        if self.child.is_some() && self.signal("TERM").is_ok() {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(15) {
                if self.exited().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.kill9();
    }

    /// Steps its wall clock (libfaketime) to `offset` from the true time, e.g. "-10" or
    /// "+0.5" (seconds); the running process sees it at its next clock reading.
    pub(crate) fn set_clock(&self, offset_s: f64) -> Result<(), ChaosError> {
        let Some((_, file)) = &self.faketime else {
            return Err(ChaosError::Server(format!(
                "{} does not run under libfaketime",
                self.name
            )));
        };
        let text = format!("{offset_s:+.3}\n");
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(ChaosError::io("write a faketime file"))?;
        std::fs::rename(&tmp, file).map_err(ChaosError::io("replace a faketime file"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.paused {
            let _ = self.resume();
        }
        self.kill9();
    }
}

/// One `idmint serve` the harness runs (and may restart), on fixed free loopback ports, so
/// that a restart keeps its address. Everything of its process is its [`Proc`]'s.
#[derive(Debug)]
pub(crate) struct Node {
    proc: Proc,
    /// HTTP address.
    pub(crate) http: SocketAddr,
    /// gRPC address.
    pub(crate) grpc: SocketAddr,
}

impl std::ops::Deref for Node {
    type Target = Proc;

    fn deref(&self) -> &Proc {
        &self.proc
    }
}

impl std::ops::DerefMut for Node {
    fn deref_mut(&mut self) -> &mut Proc {
        &mut self.proc
    }
}

impl Node {
    /// A server that is not started yet: `idmint serve --listen <free> --grpc-listen <free>
    /// <args>`, logging into `dir/<name>.log`, under libfaketime when `faketime` is the
    /// library's path.
    pub(crate) fn new(
        name: &str,
        program: &Path,
        args: Vec<String>,
        dir: &Path,
        faketime: Option<&Path>,
        pids: Pids,
    ) -> Result<Node, ChaosError> {
        let ports = idmint_coord::testing::free_ports(2)?;
        Node::on_ports(name, program, args, dir, faketime, pids, [ports[0], ports[1]])
    }

    /// The same on given ports (HTTP, gRPC): a fleet takes all its ports in one call, so that
    /// no two servers are given the same.
    pub(crate) fn on_ports(
        name: &str,
        program: &Path,
        args: Vec<String>,
        dir: &Path,
        faketime: Option<&Path>,
        pids: Pids,
        [http, grpc]: [u16; 2],
    ) -> Result<Node, ChaosError> {
        let http = SocketAddr::from(([127, 0, 0, 1], http));
        let grpc = SocketAddr::from(([127, 0, 0, 1], grpc));
        let proc = Proc::new(name, program, args, dir, faketime, pids)?;
        Ok(Node { proc, http, grpc })
    }

    /// Starts the process and waits for its "serving" line (not for readiness: a spare is
    /// not ready at first).
    pub(crate) fn start(&mut self) -> Result<(), ChaosError> {
        let offset = self.spawn_serve()?;
        let started = Instant::now();
        loop {
            if self.log_since(offset).contains("idmint is serving") {
                return Ok(());
            }
            if let Some(status) = self.proc.exited() {
                return Err(ChaosError::Server(format!(
                    "{} exited at start ({status}):\n{}",
                    self.name,
                    self.log_since(offset)
                )));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(ChaosError::Server(format!("{} did not start in time", self.name)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the process without waiting for anything (a fleet's cold start launches every
    /// server at once); returns where its log stood before.
    pub(crate) fn spawn_serve(&mut self) -> Result<u64, ChaosError> {
        let lead: Vec<String> = [
            "serve",
            "--listen",
            &self.http.to_string(),
            "--grpc-listen",
            &self.grpc.to_string(),
            // No load balancer waits here: stop accepting as soon as asked.
            "--shutdown-delay-ms",
            "0",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let (offset, _) = self.proc.spawn(&lead, false)?;
        Ok(offset)
    }

    /// Every generator ID any of its incarnations claimed (its "namespace ready" lines).
    pub(crate) fn claimed(&self) -> Vec<u64> {
        self.claimed_on("namespace ready")
    }

    /// Whether `/readyz` answers 200.
    pub(crate) fn ready(&self) -> bool {
        http_status(self.http, "/readyz") == Some(200)
    }

    /// Waits up to `timeout` for readiness.
    pub(crate) fn wait_ready(&self, timeout: Duration) -> Result<(), ChaosError> {
        let started = Instant::now();
        while !self.ready() {
            if started.elapsed() > timeout {
                return Err(ChaosError::Server(format!(
                    "{} did not become ready within {} s; see {}",
                    self.name,
                    timeout.as_secs(),
                    self.log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// The status of `GET target` on a new connection, within a second (`None`: no answer).
pub(crate) fn http_status(addr: SocketAddr, target: &str) -> Option<u16> {
    let (stream, status) = http_get_head(addr, target)?;
    drop(stream);
    Some(status)
}

/// The status and the rest of the response (headers and body, as text) of `GET target`.
pub(crate) fn http_get(addr: SocketAddr, target: &str) -> Option<(u16, String)> {
    let (mut stream, status) = http_get_head(addr, target)?;
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    Some((status, String::from_utf8_lossy(&rest).into_owned()))
}

/// Sends `GET target` on a new connection and reads the status line's code, within a second.
fn http_get_head(addr: SocketAddr, target: &str) -> Option<(TcpStream, u16)> {
    let limit = Duration::from_secs(1);
    let mut stream = TcpStream::connect_timeout(&addr, limit).ok()?;
    stream.set_read_timeout(Some(limit)).ok()?;
    stream.set_write_timeout(Some(limit)).ok()?;
    write!(stream, "GET {target} HTTP/1.1\r\nhost: idmint\r\nconnection: close\r\n\r\n").ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    let status = std::str::from_utf8(&head[9..12]).ok()?.parse().ok()?;
    Some((stream, status))
}

/// `kill -<signal> <pid>` on a process this run started.
pub(crate) fn signal_pid(pid: u32, signal: &str) -> Result<(), ChaosError> {
    // The shell's own `kill` (no procps needed); the PID is an argument, not code.
    let sent = Command::new("sh")
        .args(["-c", "kill \"$0\" \"$1\"", &format!("-{signal}"), &pid.to_string()])
        .status()
        .map_err(ChaosError::io("run kill"))?;
    if sent.success() {
        Ok(())
    } else {
        Err(ChaosError::Server(format!("kill -{signal} {pid} failed")))
    }
}
