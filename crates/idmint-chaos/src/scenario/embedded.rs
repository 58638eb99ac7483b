//! `embedded-fleet` (T2, T3, T4, T5, T6): application processes that embed the minter, not
//! servers. Each is `idmint gen -n <huge>` on a store (`gen`'s `idmint::BlockingMinter`: a
//! generator ID claimed for the process, durable marks, the clock guard), under libfaketime,
//! with a data directory of its own as on a host of its own: three on one Postgres, three on
//! one etcd member, with a lease TTL of 2 s and a 1.5 s window. The Postgres fleet claims in
//! datacenter 1 and the etcd fleet in datacenter 2 (the namespace's `fields` in the
//! configuration file), so the two fleets' IDs are apart, as two fleets of one application
//! would be kept.
//!
//! A reader thread per process incarnation turns what it prints into the history: every read
//! of its stdout that holds whole lines is one `ok` operation of client `appN.K` (process N,
//! incarnation K) on server `appN`, invoked when the previous read returned. The reader takes a
//! read every few milliseconds, so the pipe paces the process (a process blocked on a full pipe
//! mints nothing). An ID printed is issued; when the process ends, its pending operation is
//! `info` if a line was cut (the ID may have been taken), else `fail` (nothing was handed out).
//!
//! Nemeses, in a seeded order on seeded processes: SIGKILL and restart at once (twice), the
//! clock stepped back 2 s and 30 ms (each held, then set right), a SIGKILL and restart with the
//! clock 5 s back, and on each store a process stopped (SIGSTOP) while a fresh one, waiting for
//! exactly its generator ID, takes it once the lease lapses (checked in the store with
//! `idmint lease list`), then continued: it must not issue from the lost claim, and claims
//! anew. The negative control (`no-clock-guard`) runs the same processes with `idmint gen
//! --unsafe-no-clock-guard`: logical time follows the clock back, and the 2 s step repeats IDs.
//! It leaves out the restart with the clock back, which the store refuses on its own.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::ChildStdout,
    sync::atomic::Ordering,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use idmint_coord::testing::{Postgres, libfaketime};

use super::Run;
use crate::{
    client::Shared,
    cluster::{Proc, START_TIMEOUT},
    error::ChaosError,
    history::Event,
};

/// How many IDs each process is asked for: more than it mints in any run.
const COUNT: &str = "1000000000000";
/// Processes per store.
const PER_STORE: usize = 3;
/// The lease TTL of every claim, in seconds (etcd's shortest), and the window in ms.
const LEASE_TTL: &str = "2";
const WINDOW_MS: &str = "1500";
/// The bytes a reader takes per read, and its pause after each: about 1.6 MB/s, some 80,000
/// IDs/s, per process.
const READ_BYTES: usize = 16 << 10;
const READ_EVERY: Duration = Duration::from_millis(10);
/// What `gen` asks its minter for per call (its chunk), as each operation's count.
const CHUNK: u64 = 1 << 10;
/// The generous bound of every wait on a condition.
const BOUND: Duration = Duration::from_secs(60);

/// Which store a process claims in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Postgres,
    Etcd,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::Postgres => "postgres",
            Store::Etcd => "etcd",
        }
    }
}

/// One application process and the reader of its current incarnation.
struct App {
    proc: Proc,
    store: Store,
    reader: Option<JoinHandle<()>>,
}

impl App {
    /// Starts an incarnation and its reader, and waits (bounded) for the line that says its
    /// claim; a process that waits for a held generator ID says it later (`wait_claim`).
    fn start(&mut self, shared: &Shared, wait_claim: bool) -> Result<(), ChaosError> {
        self.join_reader();
        let lead = ["gen".to_owned(), "-n".to_owned(), COUNT.to_owned()];
        let (offset, stdout) = self.proc.spawn(&lead, true)?;
        let stdout = stdout.ok_or_else(|| ChaosError::Server("no stdout to read".into()))?;
        let client = format!("{}.{}", self.proc.name, self.proc.starts);
        let server = self.proc.name.clone();
        let shared = shared.clone();
        self.reader = Some(std::thread::spawn(move || read_ids(&shared, &client, &server, stdout)));
        if wait_claim {
            return Ok(());
        }
        let started = Instant::now();
        while !self.proc.log_since(offset).contains("generator_id=") {
            if let Some(status) = self.proc.exited() {
                return Err(ChaosError::Server(format!(
                    "{} exited at start ({status}):\n{}",
                    self.proc.name,
                    self.proc.log_since(offset)
                )));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(ChaosError::Server(format!(
                    "{} claimed nothing in time",
                    self.proc.name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The generator ID its last claim took, from its log.
    fn generator(&self) -> Option<u64> {
        let log = self.proc.log_text();
        let line = log.lines().rev().find(|l| l.contains("generator_id="))?;
        let rest = &line[line.find("generator_id=")? + "generator_id=".len()..];
        rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
    }

    /// Waits for the reader of the last incarnation, which ends when its stdout closes.
    fn join_reader(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }

    fn kill9(&mut self) {
        self.proc.kill9();
        self.join_reader();
    }
}

/// Reads one incarnation's stdout to its end, recording each read of whole lines as one
/// operation; paces the process by reading [`READ_BYTES`] every [`READ_EVERY`].
fn read_ids(shared: &Shared, client: &str, server: &str, mut stdout: ChildStdout) {
    let recorder = &shared.recorder;
    let invoke = |t: u64| Event::Invoke {
        client: client.to_owned(),
        server: server.to_owned(),
        t,
        count: CHUNK,
        began: None,
    };
    let _ = recorder.record(&[invoke(recorder.now())]);
    let mut buf = vec![0u8; READ_BYTES];
    let mut partial: Vec<u8> = Vec::new();
    loop {
        let n = match stdout.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        partial.extend_from_slice(&buf[..n]);
        let Some(end) = partial.iter().rposition(|&b| b == b'\n') else { continue };
        let ids: Vec<u128> = partial[..end]
            .split(|&b| b == b'\n')
            .filter_map(|line| std::str::from_utf8(line).ok()?.trim().parse().ok())
            .collect();
        partial.drain(..=end);
        if !ids.is_empty() {
            let t = recorder.now();
            shared.acknowledged.fetch_add(ids.len() as u64, Ordering::Relaxed);
            let _ = recorder.record(&[Event::Ok { client: client.to_owned(), t, ids }, invoke(t)]);
        }
        std::thread::sleep(READ_EVERY);
    }
    let t = recorder.now();
    let end = if partial.is_empty() {
        Event::Fail { client: client.to_owned(), t, error: "the process ended".into() }
    } else {
        Event::Info { client: client.to_owned(), t, error: "the process ended mid-line".into() }
    };
    let _ = recorder.record(&[end]);
}

/// The configuration file of a fleet: the namespace's datacenter, and for a process that
/// takes one generator ID over, that ID, waiting for it.
fn config_file(dir: &Path, name: &str, text: &str) -> Result<PathBuf, ChaosError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(ChaosError::io("write a configuration file"))?;
    Ok(path)
}

/// The processes of the run and what a new one needs.
struct Fleet {
    apps: Vec<App>,
    url: String,
    endpoints: String,
    lib: PathBuf,
}

impl Fleet {
    /// Adds a process (not started) on `store` with the configuration file `config`, a data
    /// directory of its own, the lease TTL and window of the scenario.
    fn add(&mut self, run: &Run, store: Store, config: &Path) -> Result<usize, ChaosError> {
        let n = self.apps.len();
        let data = run.dir.join(format!("data-app{n}"));
        let mut args: Vec<String> = match store {
            Store::Postgres => vec!["--postgres".into(), self.url.clone()],
            Store::Etcd => vec!["--etcd".into(), self.endpoints.clone()],
        };
        for (flag, value) in [
            ("--config", config.display().to_string()),
            ("--data-dir", data.display().to_string()),
            ("--lease-ttl", LEASE_TTL.to_owned()),
            ("--window-ms", WINDOW_MS.to_owned()),
        ] {
            args.extend([flag.to_owned(), value]);
        }
        let args = run.with_control(args);
        let pids = run.watcher.pids.clone();
        let name = format!("app{n}");
        let proc = Proc::new(&name, &run.program, args, &run.dir, Some(&self.lib), pids)?;
        self.apps.push(App { proc, store, reader: None });
        Ok(n)
    }

    /// The `idmint lease list` flags of `store`.
    fn store_flags(&self, store: Store) -> Vec<String> {
        match store {
            Store::Postgres => vec!["--postgres".to_owned(), self.url.clone()],
            Store::Etcd => vec!["--etcd".to_owned(), self.endpoints.clone()],
        }
    }
}

/// The scenario.
pub(super) fn embedded_fleet(run: &mut Run) -> Result<(), ChaosError> {
    let postgres = Postgres::start()?;
    run.etcd(1)?;
    let lib = libfaketime().ok_or_else(|| {
        ChaosError::Usage("libfaketime is not installed (apt-get install faketime)".into())
    })?;
    let endpoints = run.etcd.as_ref().map(|e| e.endpoints().join(",")).unwrap_or_default();
    let mut fleet = Fleet { apps: Vec::new(), url: postgres.url(), endpoints, lib };
    run.watcher.watch_also(fleet.store_flags(Store::Postgres));
    let datacenter = |n: u32| {
        format!("[[server.namespaces]]\nname = \"default\"\nfields = {{ datacenter = {n} }}\n")
    };
    let pg_config = config_file(&run.dir, "fleet-postgres.toml", &datacenter(1))?;
    let etcd_config = config_file(&run.dir, "fleet-etcd.toml", &datacenter(2))?;
    for (store, config) in [(Store::Postgres, &pg_config), (Store::Etcd, &etcd_config)] {
        for _ in 0..PER_STORE {
            fleet.add(run, store, config)?;
        }
    }
    let result = (|| {
        for app in &mut fleet.apps {
            app.start(&run.shared, false)?;
        }
        let d = run.secs(2.0);
        run.hold(d);
        nemeses(run, &mut fleet)
    })();
    // Stopped before the stores go away with this function: every reader to its end, every
    // claim and the Postgres marks into the history (the etcd marks are the run's).
    for app in &mut fleet.apps {
        app.proc.terminate();
        app.join_reader();
    }
    let mut events = Vec::new();
    for app in &fleet.apps {
        for generator in app.proc.claimed_on("generator_id=") {
            events.push(Event::Claim { server: app.proc.name.clone(), generator });
        }
    }
    for entry in run.lease_list(&fleet.store_flags(Store::Postgres))? {
        if let (Some(generator), Some(mark_ms)) =
            (entry["generator_id"].as_u64(), entry["mark_ms"].as_u64())
        {
            events.push(Event::Mark { generator, mark_ms });
        }
    }
    run.shared.recorder.record(&events)?;
    result
}

/// What a nemesis of the seeded order does.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill9,
    StepBack(f64),
    RestartBack(f64),
    Takeover(Store),
}

/// The seeded order of faults, each on a seeded process.
fn nemeses(run: &mut Run, fleet: &mut Fleet) -> Result<(), ChaosError> {
    let mut faults = vec![
        Fault::Kill9,
        Fault::Kill9,
        Fault::StepBack(-2.0),
        Fault::StepBack(-0.030),
        Fault::RestartBack(-5.0),
        Fault::Takeover(Store::Postgres),
        Fault::Takeover(Store::Etcd),
    ];
    if run.control.is_some() {
        // Without the clock guard, a process restarted with its clock back asks the store for
        // a mark below the stored one, and the store refuses it (marks never go down): the
        // process exits at start, which ends the run before the faults the guard alone
        // answers. The control keeps those: the steps back while running.
        faults.retain(|fault| !matches!(fault, Fault::RestartBack(_)));
    }
    run.rng.shuffle(&mut faults);
    let regular = fleet.apps.len();
    for fault in faults {
        let i = run.rng.index(regular);
        let app = &mut fleet.apps[i];
        let name = app.proc.name.clone();
        match fault {
            Fault::Kill9 => {
                app.kill9();
                run.fired("kill9", format!("{name} SIGKILL, restarted at once"));
                app.start(&run.shared, false)?;
            }
            Fault::StepBack(step) => {
                app.proc.set_clock(step)?;
                run.fired("clock_step_back", format!("{name} clock {step:+} s"));
                let d = run.secs(2.5);
                run.hold(d);
                fleet.apps[i].proc.set_clock(0.0)?;
                run.fired("clock_step_reset", format!("{name} clock back to true time"));
            }
            Fault::RestartBack(step) => {
                app.kill9();
                run.fired("kill9", format!("{name} SIGKILL"));
                app.proc.set_clock(step)?;
                run.fired("clock_restart_back", format!("{name} restarts at {step:+} s"));
                app.start(&run.shared, false)?;
            }
            Fault::Takeover(store) => takeover(run, fleet, store)?,
        }
        let d = Duration::from_millis(run.rng.between(1_500, 3_000));
        let d = run.secs(d.as_secs_f64());
        run.hold(d);
    }
    let d = run.secs(3.0);
    run.hold(d);
    Ok(())
}

/// T6 on `store`: a seeded process of it is stopped (SIGSTOP); a fresh process waiting for
/// exactly its generator ID starts; once the store shows the fresh one holding it (the lease
/// lapsed), the stopped one is continued and kept running.
fn takeover(run: &mut Run, fleet: &mut Fleet, store: Store) -> Result<(), ChaosError> {
    let own: Vec<usize> = (0..fleet.apps.len())
        .filter(|&i| {
            let app = &fleet.apps[i];
            app.store == store && app.proc.pid().is_some() && !app.proc.paused
        })
        .collect();
    let paused = own[run.rng.index(own.len())];
    let name = fleet.apps[paused].proc.name.clone();
    let generator = fleet.apps[paused]
        .generator()
        .ok_or_else(|| ChaosError::Server(format!("{name} said no generator ID")))?;
    fleet.apps[paused].proc.pause()?;
    run.fired(
        "sigstop",
        format!(
            "{name} ({}, generator {generator}) SIGSTOP past its {LEASE_TTL} s lease",
            store.name()
        ),
    );
    let text = format!(
        "[server]\nwait_for_claim = true\nclaim_retry_ms = 100\n\n\
         [[server.namespaces]]\nname = \"default\"\ngenerator_id = {generator}\n"
    );
    let config = config_file(&run.dir, &format!("takeover-{generator}.toml"), &text)?;
    let fresh = fleet.add(run, store, &config)?;
    fleet.apps[fresh].start(&run.shared, true)?;
    let taker = fleet.apps[fresh].proc.name.clone();
    let pid = fleet.apps[fresh].proc.pid().unwrap_or_default();
    let holder = format!("pid {pid} ");
    let flags = fleet.store_flags(store);
    let started = Instant::now();
    loop {
        let held = run.lease_list(&flags).unwrap_or_default().iter().any(|e| {
            e["generator_id"].as_u64() == Some(generator)
                && e["holder"].as_str().is_some_and(|h| h.contains(&holder))
        });
        if held && fleet.apps[fresh].generator() == Some(generator) {
            break;
        }
        if started.elapsed() > BOUND {
            return Err(ChaosError::Server(format!(
                "{taker} did not take generator {generator} from the stopped {name} within {} s:\n{}",
                BOUND.as_secs(),
                fleet.apps[fresh].proc.log_text()
            )));
        }
        run.hold(Duration::from_millis(100));
    }
    run.fired(
        "takeover",
        format!(
            "{taker} holds generator {generator} in {} after {:.1} s (lease list, its own note)",
            store.name(),
            started.elapsed().as_secs_f64()
        ),
    );
    fleet.apps[paused].proc.resume()?;
    run.fired("sigcont", format!("{name} SIGCONT, kept running"));
    Ok(())
}
