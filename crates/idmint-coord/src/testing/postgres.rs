//! [`Postgres`]: a throwaway PostgreSQL server (initdb into a temporary directory, a free
//! loopback port), for tests. It must never touch a server it did not start: no well-known
//! port, no system cluster, no `pkill`; it signals only the PIDs it started and their
//! children.

use std::{
    fs,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use super::{
    HarnessError, data_dir, find_program, free_ports,
    process::{Process, START_ATTEMPTS, retry_on_lost_port, stop},
};

/// How long a start, restart or stop may take before the harness gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Between readiness checks.
const POLL: Duration = Duration::from_millis(50);
/// How to install the server.
const HINT: &str = "apt-get install postgresql, or set IDMINT_POSTGRES_BIN to its bin directory";
/// The database every server gets.
const DATABASE: &str = "idmint";
/// The settings every server starts with, before the caller's: durable, as production needs.
const DURABLE: [(&str, &str); 3] =
    [("fsync", "on"), ("synchronous_commit", "on"), ("full_page_writes", "on")];

/// A local PostgreSQL server for tests, run as the `postgres` user when the tests run as root
/// (initdb refuses root), with its data in a temporary directory (in `/dev/shm` when it can,
/// where fsync is cheap, so the durable settings cost little), listening on a free port of
/// 127.0.0.1 only, with trust authentication for the `postgres` role and a database `idmint`.
///
/// The server process is the harness's own child (not daemonized by `pg_ctl`), so it is reaped
/// and never lingers as a zombie. Dropping the harness stops it with `pg_ctl stop -m fast`,
/// and SIGKILLs it by PID if it does not exit within 30 s; then the data is deleted.
///
/// Binaries are taken from `IDMINT_POSTGRES_BIN` if set, else from the directory `initdb` on
/// `PATH` resolves to, else from the newest `/usr/lib/postgresql/<version>/bin`.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::testing::{self, Postgres};
///
/// // `None` (with the reason printed) when PostgreSQL is not installed and `CI` is not "true".
/// let Some(mut server) = testing::available(Postgres::start()) else { return };
/// assert_eq!(server.psql("select 1 + 1").expect("psql"), "2");
/// let url = server.url(); // postgresql://postgres@127.0.0.1:<port>/idmint
/// server.kill().expect("kill -9");
/// server.restart().expect("crash recovery");
/// ```
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    /// `(uid, gid)` to run the server as, when we are root.
    run_as: Option<(u32, u32)>,
    port: u16,
    data: PathBuf,
    socket_dir: PathBuf,
    settings: Vec<(String, String)>,
    process: Process,
    /// Dropped last: the data, socket and log.
    dir: tempfile::TempDir,
}

impl Postgres {
    /// Starts a server with durable settings (`fsync`, `synchronous_commit` and
    /// `full_page_writes` on) and waits until it accepts connections.
    ///
    /// Blocking (about a second): call it before entering an async runtime, or from one whose
    /// other tasks can wait.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Missing`] when PostgreSQL (or, as root, a `postgres` user) is not
    /// found (see [`available`](super::available)), [`HarnessError::Timeout`] when it does not
    /// accept connections within 30 s, others when initdb or the server fails.
    pub fn start() -> Result<Postgres, HarnessError> {
        Self::start_with(&[])
    }

    /// The same, with more `-c name=value` settings after the durable ones (so they win), for
    /// example `[("synchronous_commit", "off")]` to test that a store refuses it.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Postgres, HarnessError> {
        let mut server = Self::prepare(settings)?;
        server.initdb()?;
        server.spawn_on_a_free_port()?;
        server.createdb()?;
        Ok(server)
    }

    /// Starts a streaming standby of the server listening on `upstream_port` of 127.0.0.1 (a
    /// primary, or a proxy in front of one): `pg_basebackup -R` copies its data and writes the
    /// `primary_conninfo` (to that port) and `standby.signal`, so the standby replicates
    /// asynchronously, read-only, until [`promote`](Self::promote). The primary must allow
    /// replication connections (the harness's servers do: trust, `wal_level = replica`).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), and [`HarnessError::Service`] when pg_basebackup fails.
    pub fn start_standby(upstream_port: u16) -> Result<Postgres, HarnessError> {
        let mut server = Self::prepare(&[])?;
        let (out, err) = server.process.log_files()?;
        let status = server
            .command("pg_basebackup")
            .args(["-h", "127.0.0.1", "-p", &upstream_port.to_string(), "-U", "postgres"])
            .arg("-D")
            .arg(&server.data)
            .args(["-R", "-X", "stream", "-c", "fast", "-N"])
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| HarnessError::io("cannot run pg_basebackup", e))?;
        if !status.success() {
            return Err(HarnessError::Service(format!(
                "pg_basebackup from port {upstream_port} failed ({status}); see {}",
                server.log().display()
            )));
        }
        server.spawn_on_a_free_port()?;
        Ok(server)
    }

    /// Promotes a standby to a primary (`pg_ctl promote`, waiting until it accepts writes): it
    /// goes on a new timeline with whatever WAL it had received.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] when it is not running, [`HarnessError::Service`] when
    /// `pg_ctl promote` fails (for example on a server that is not a standby).
    pub fn promote(&self) -> Result<(), HarnessError> {
        if !self.process.is_running() {
            return Err(HarnessError::Usage("postgres is not running".into()));
        }
        let output = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", "30", "promote"])
            .output()
            .map_err(|e| HarnessError::io("cannot run pg_ctl promote", e))?;
        if !output.status.success() {
            return Err(HarnessError::Service(format!(
                "pg_ctl promote failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        Ok(())
    }

    /// A server not yet initialised, with its directories and settings.
    fn prepare(settings: &[(&str, &str)]) -> Result<Postgres, HarnessError> {
        let bin = find_bin()?;
        let run_as = run_as()?;
        let dir = data_dir("postgres")?;
        // tempfile makes it 0700, which the postgres user could not enter.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755))
            .map_err(|e| HarnessError::io("cannot open up the data directory", e))?;
        let pg = dir.path().join("pg");
        fs::create_dir(&pg).map_err(|e| HarnessError::io("cannot create the pg directory", e))?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&pg, Some(uid), Some(gid))
                .map_err(|e| HarnessError::io("cannot give the pg directory to postgres", e))?;
        }
        let settings = DURABLE
            .iter()
            .chain(settings)
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Ok(Postgres {
            bin,
            run_as,
            port: 0,
            data: pg.join("data"),
            socket_dir: pg,
            settings,
            process: Process::new(dir.path().join("postgres.log")),
            dir,
        })
    }

    /// Starts the server on a free port, trying another if that one was taken meanwhile.
    fn spawn_on_a_free_port(&mut self) -> Result<(), HarnessError> {
        let mut last = None;
        for _ in 0..START_ATTEMPTS {
            self.port = free_ports(1)?[0];
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(e) => last = Some(retry_on_lost_port(e)?),
            }
        }
        Err(last.unwrap_or_else(|| HarnessError::Service("postgres did not start".into())))
    }

    /// A connection string for the `idmint` database:
    /// `postgresql://postgres@127.0.0.1:<port>/idmint`.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{DATABASE}", self.port)
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's (postmaster's) PID, `None` after [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The server's log file.
    pub fn log(&self) -> &Path {
        self.process.log()
    }

    /// The temporary directory holding the data, the socket and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `sql` with `psql` on the `idmint` database and returns what it prints (unaligned,
    /// tuples only, trimmed), for tests that look at or tamper with tables.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Service`] with psql's message when the SQL fails.
    pub fn psql(&self, sql: &str) -> Result<String, HarnessError> {
        let output = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1"])
            .args(["-p", &self.port.to_string(), "-U", "postgres", "-d", DATABASE, "-c", sql])
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| HarnessError::io("cannot run psql", e))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(HarnessError::Service(format!(
                "psql failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )))
        }
    }

    /// Crashes the server: stops the postmaster (SIGSTOP, so it forks no more), SIGKILLs its
    /// children (backends, WAL writer, checkpointer…) and then itself, all by PID, and waits
    /// until they are gone (a zombie counts as gone: it holds no memory). Uncommitted work is
    /// lost; committed, flushed work survives [`restart`](Self::restart).
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] when the server is not running, [`HarnessError::Timeout`]
    /// when a process outlives its SIGKILL by 10 s.
    pub fn kill(&mut self) -> Result<(), HarnessError> {
        let process = self
            .process
            .take()
            .ok_or_else(|| HarnessError::Usage("postgres is not running".into()))?;
        let pid = process.id();
        signal("STOP", pid);
        let children = children_of(pid);
        for &child in &children {
            signal("KILL", child);
        }
        stop(process);
        let started = Instant::now();
        while children.iter().any(|&child| alive(child)) {
            if started.elapsed() > Duration::from_secs(10) {
                let what = format!("postgres children of {pid} did not die");
                return Err(self.process.timeout(what, Duration::from_secs(10)));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Starts the server again on its data and port (after [`kill`](Self::kill): with crash
    /// recovery) and waits until it accepts connections.
    ///
    /// # Errors
    ///
    /// [`HarnessError::Usage`] when it is running, otherwise as [`start`](Self::start).
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.process.is_running() {
            return Err(HarnessError::Usage("postgres is running".into()));
        }
        self.spawn_and_wait()
    }

    /// A command for one of the server's programs, run as the server's user.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command.current_dir(self.dir.path()).env("HOME", self.dir.path()).stdin(Stdio::null());
        command
    }

    fn initdb(&self) -> Result<(), HarnessError> {
        let (out, err) = self.process.log_files()?;
        let status = self
            .command("initdb")
            .arg("-D")
            .arg(&self.data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "-N"])
            .stdout(out)
            .stderr(err)
            .status()
            .map_err(|e| HarnessError::io("cannot run initdb", e))?;
        if !status.success() {
            return Err(HarnessError::Service(format!(
                "initdb failed ({status}); see {}",
                self.log().display()
            )));
        }
        Ok(())
    }

    fn spawn_and_wait(&mut self) -> Result<(), HarnessError> {
        let mut command = self.command("postgres");
        command
            .arg("-D")
            .arg(&self.data)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-k"])
            .arg(&self.socket_dir);
        for (name, value) in &self.settings {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        self.process.spawn(&mut command, "postgres")?;
        let started = Instant::now();
        loop {
            self.process.check_not_exited("postgres")?;
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-t", "1", "-h", "127.0.0.1", "-p", &self.port.to_string()])
                .stdin(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                let what = "postgres did not accept connections".into();
                return Err(self.process.timeout(what, READY_TIMEOUT));
            }
            std::thread::sleep(POLL);
        }
    }

    fn createdb(&self) -> Result<(), HarnessError> {
        let status = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", DATABASE])
            .current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .status()
            .map_err(|e| HarnessError::io("cannot run createdb", e))?;
        if !status.success() {
            return Err(HarnessError::Service(format!("createdb {DATABASE} failed ({status})")));
        }
        Ok(())
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let Some(mut process) = self.process.take() else { return };
        // A fast shutdown (SIGINT: roll back open transactions, checkpoint, exit)…
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "fast", "-w", "-t", "30", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let started = Instant::now();
        while started.elapsed() < READY_TIMEOUT {
            if !matches!(process.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // …or SIGKILL, by PID, and reap.
        stop(process);
    }
}

/// The directory of the server's programs.
fn find_bin() -> Result<PathBuf, HarnessError> {
    let complete = |dir: &Path| {
        ["initdb", "postgres", "pg_ctl", "pg_isready", "createdb", "psql", "pg_basebackup"]
            .iter()
            .all(|program| dir.join(program).is_file())
    };
    if let Some(dir) = std::env::var_os("IDMINT_POSTGRES_BIN") {
        let dir = PathBuf::from(dir);
        return if complete(&dir) {
            Ok(dir)
        } else {
            Err(HarnessError::Missing {
                program: format!("{}/postgres", dir.display()),
                hint: HINT.into(),
            })
        };
    }
    if let Ok(initdb) = find_program("initdb", HINT)
        && let Ok(real) = fs::canonicalize(initdb)
        && let Some(dir) = real.parent()
        && complete(dir)
    {
        return Ok(dir.to_path_buf());
    }
    let newest = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            complete(&bin).then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    newest
        .map(|(_, bin)| bin)
        .ok_or_else(|| HarnessError::Missing { program: "initdb".into(), hint: HINT.into() })
}

/// `(uid, gid)` of the `postgres` user when this process is root (initdb refuses root), else
/// `None` (run as ourselves).
fn run_as() -> Result<Option<(u32, u32)>, HarnessError> {
    let status = fs::read_to_string("/proc/self/status")
        .map_err(|e| HarnessError::io("cannot read /proc/self/status", e))?;
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|id| id.parse::<u32>().ok());
    if euid != Some(0) {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd")
        .map_err(|e| HarnessError::io("cannot read /etc/passwd", e))?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
                _ => None,
            }
        })
        .map(Some)
        .ok_or_else(|| HarnessError::Missing {
            program: "a `postgres` user (initdb refuses to run as root)".into(),
            hint: "apt-get install postgresql, or useradd postgres".into(),
        })
}

/// The state letter and parent PID of a process, from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything; the fields after it are
    // "state ppid …".
    let mut rest = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Whether `pid` is a live process: `kill -0` would say yes for a zombie too, so this reads its
/// state instead.
fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x'))
}

/// The live children of `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| stat(child).is_some_and(|(_, ppid)| ppid == pid) && alive(child))
        .collect()
}

/// Sends `SIG<name>` to one PID.
fn signal(name: &str, pid: u32) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
