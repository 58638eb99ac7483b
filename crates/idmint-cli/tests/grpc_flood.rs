//! Floods of the gRPC port of a real `idmint serve` with 1,024 file descriptors (started
//! under `prlimit --nofile=1024:1024`), default limits but a 3 s message deadline: stream-less
//! HTTP/2 connections past the descriptor limit, 40 connections x 1,000 calls whose message
//! never arrives (three times), 1,100 calls on one connection, and rapid reset. During each,
//! a new client is probed every 100 ms on both ports (`GET /v1/next`, gRPC `Next`); the
//! server's RSS (`/proc/PID/status`) is sampled before, during and after.
//!
//! Each flood must leave both ports answering every probe (within 2 s each; the latencies
//! are printed, not judged) and the RSS under 100 MB, back within 20 MB of its start after;
//! three floods of stalled calls in a row must not raise its peak from one to the next, and after
//! every flood the RSS returns within 20 MB of the server's start (the memory trim; without
//! it, `--no-memory-trim`, a flood's memory stays). Loopback only; every flood is bounded in
//! connections or in time. `GRPC_FLOOD_SERVER_ENV=NAME=VALUE` passes one variable to the
//! server, for allocator experiments (`MALLOC_ARENA_MAX=1`, `GLIBC_TUNABLES=...`).
//! `GRPC_FLOOD_BINARY=target/release/idmint` floods the release build instead of this test
//! build: the latencies an operator's server shows (RELIABILITY.md, "Floods of the gRPC
//! port").

use std::{
    io::{ErrorKind, Read, Write},
    net::{SocketAddr, TcpStream},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use idmint_testkit::{check, h2, http, process::Server};

/// The binary under test: this build's, or the one `GRPC_FLOOD_BINARY` names (the release
/// build, `target/release/idmint`, to measure what operators run).
fn idmint() -> String {
    std::env::var("GRPC_FLOOD_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_idmint").to_owned())
}

/// How long a flood is held while the probes run.
const HOLD: Duration = Duration::from_secs(4);
/// The message deadline of the server under test (ms).
const BODY_TIMEOUT_MS: &str = "3000";

/// `idmint serve` on free loopback ports, both APIs, under a limit of 1,024 open files, with
/// these extra flags.
fn start(data_dir: &std::path::Path, extra: &[&str]) -> (Server, SocketAddr) {
    let mut command = Command::new("prlimit");
    command
        .args(["--nofile=1024:1024", "--", &idmint(), "serve", "--listen", "127.0.0.1:0"])
        .args(["--grpc-listen", "127.0.0.1:0", "--body-timeout-ms", BODY_TIMEOUT_MS])
        .args(["--http2-keepalive-interval-ms", "1000"])
        .args(extra)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .env("IDMINT_SHUTDOWN_DELAY_MS", "0")
        .envs(std::env::var("GRPC_FLOOD_SERVER_ENV").ok().and_then(|v| {
            v.split_once('=').map(|(name, value)| (name.to_owned(), value.to_owned()))
        }))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("IDMINT_") && name != "IDMINT_SHUTDOWN_DELAY_MS" {
            command.env_remove(name);
        }
    }
    let server =
        Server::adopt("idmint serve", command.spawn().expect("prlimit"), Duration::from_secs(60));
    let grpc = server
        .log_text()
        .lines()
        .find_map(|line| line.split("grpc=").nth(1)?.split_whitespace().next()?.parse().ok())
        .expect("the gRPC address in the serving line");
    (server, grpc)
}

/// The server's resident memory, in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    kb / 1024.0
}

/// The address the probes connect from: not one a flood uses, as another client would.
const PROBE_SOURCE: [u8; 4] = [127, 0, 0, 9];

/// A socket connected from [`PROBE_SOURCE`] to `addr`, within 2 s.
fn probe_socket(addr: SocketAddr, runtime: &tokio::runtime::Runtime) -> Option<TcpStream> {
    let stream = runtime
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((PROBE_SOURCE, 0)))?;
            tokio::time::timeout(Duration::from_secs(2), socket.connect(addr))
                .await
                .map_err(|_| std::io::Error::from(ErrorKind::TimedOut))??
                .into_std()
        })
        .ok()?;
    stream.set_nonblocking(false).ok()?;
    Some(stream)
}

/// One gRPC `Next` on a new connection: its latency, or None without an ID in 2 s.
fn grpc_next(addr: SocketAddr, runtime: &tokio::runtime::Runtime) -> Option<Duration> {
    let start = Instant::now();
    let mut conn = h2::Conn::from_stream(probe_socket(addr, runtime)?).ok()?;
    conn.send(&h2::call(1, "/idmint.v1.IdMint/Next", "application/grpc", &[&[]])).ok()?;
    let deadline = start + Duration::from_secs(2);
    loop {
        match conn.read(deadline) {
            Ok(Some(f)) if f.kind == h2::DATA && f.stream == 1 => return Some(start.elapsed()),
            Ok(Some(_)) => {}
            _ => return None,
        }
    }
}

/// One `GET /v1/next` on a new connection: its latency, or None without a 200 in 2 s.
fn http_next(addr: SocketAddr, runtime: &tokio::runtime::Runtime) -> Option<Duration> {
    let start = Instant::now();
    let mut stream = probe_socket(addr, runtime)?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream.write_all(b"GET /v1/next HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").ok()?;
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).ok()?;
    (&head[9..12] == b"200").then(|| start.elapsed())
}

/// What the probes and the RSS samples saw while a flood was held.
#[derive(Debug, Default)]
struct Seen {
    probes: usize,
    http_failed: usize,
    grpc_failed: usize,
    http_max: Duration,
    grpc_max: Duration,
    http_over_100ms: usize,
    grpc_over_100ms: usize,
    rss_peak: f64,
}

/// Probes both ports every 100 ms and samples the RSS until `hold` has passed.
fn probe(server: &Server, grpc: SocketAddr, runtime: &tokio::runtime::Runtime) -> Seen {
    let mut seen = Seen::default();
    let end = Instant::now() + HOLD;
    while Instant::now() < end {
        seen.rss_peak = seen.rss_peak.max(rss_mb(server.pid()));
        seen.probes += 1;
        match http_next(server.addr, runtime) {
            Some(t) => {
                seen.http_max = seen.http_max.max(t);
                seen.http_over_100ms += usize::from(t > Duration::from_millis(100));
            }
            None => seen.http_failed += 1,
        }
        match grpc_next(grpc, runtime) {
            Some(t) => {
                seen.grpc_max = seen.grpc_max.max(t);
                seen.grpc_over_100ms += usize::from(t > Duration::from_millis(100));
            }
            None => seen.grpc_failed += 1,
        }
        seen.rss_peak = seen.rss_peak.max(rss_mb(server.pid()));
        std::thread::sleep(Duration::from_millis(100));
    }
    seen
}

/// A connection from `source` (a loopback address), with the HTTP/2 preface sent.
fn connect_from(
    source: [u8; 4],
    addr: SocketAddr,
    runtime: &tokio::runtime::Runtime,
) -> Option<h2::Conn> {
    let stream = runtime
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from((source, 0)))?;
            socket.connect(addr).await?.into_std()
        })
        .ok()?;
    stream.set_nonblocking(false).ok()?;
    h2::Conn::from_stream(stream).ok()
}

/// Answers the PINGs of `conns` (and their SETTINGS) until `stop`: HTTP/2 connections that
/// are alive but open no stream.
fn answer_pings(mut conns: Vec<h2::Conn>, stop: Arc<AtomicBool>) -> usize {
    let mut buffers = vec![Vec::new(); conns.len()];
    for conn in &conns {
        let _ = conn.stream.set_nonblocking(true);
    }
    let mut pings = 0;
    let mut chunk = [0_u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        for (conn, buffer) in conns.iter_mut().zip(&mut buffers) {
            loop {
                match conn.stream.read(&mut chunk) {
                    Ok(n) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    _ => break,
                }
            }
            while buffer.len() >= 9 {
                let len = u32::from_be_bytes([0, buffer[0], buffer[1], buffer[2]]) as usize;
                if buffer.len() < 9 + len {
                    break;
                }
                let (kind, flags) = (buffer[3], buffer[4]);
                let payload = buffer[9..9 + len].to_vec();
                buffer.drain(..9 + len);
                let answer = match kind {
                    h2::PING if flags & h2::ACK == 0 => {
                        pings += 1;
                        h2::frame(h2::PING, h2::ACK, 0, &payload)
                    }
                    h2::SETTINGS if flags & h2::ACK == 0 => {
                        h2::frame(h2::SETTINGS, h2::ACK, 0, &[])
                    }
                    _ => continue,
                };
                let _ = conn.stream.set_nonblocking(false);
                let _ = conn.stream.write_all(&answer);
                let _ = conn.stream.set_nonblocking(true);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    pings
}

#[allow(clippy::print_stderr)]
fn report(what: &str, before: f64, seen: &Seen, after: f64) {
    eprintln!(
        "{what}: RSS before {before:.1} MB, peak {:.1} MB, after {after:.1} MB; {} probes: \
         /v1/next failed {} (max {:?}, {} over 100 ms), gRPC Next failed {} (max {:?}, {} over 100 ms)",
        seen.rss_peak,
        seen.probes,
        seen.http_failed,
        seen.http_max,
        seen.http_over_100ms,
        seen.grpc_failed,
        seen.grpc_max,
        seen.grpc_over_100ms
    );
}

/// The verdict of one flood: every probe answered, the RSS bounded and given back.
fn judge(what: &str, before: f64, seen: &Seen, after: f64) {
    report(what, before, seen, after);
    assert_eq!((seen.http_failed, seen.grpc_failed), (0, 0), "{what}: probes failed: {seen:?}");
    assert!(seen.rss_peak < 100.0, "{what}: RSS peaked at {:.1} MB", seen.rss_peak);
    assert!(after < before + 20.0, "{what}: RSS {after:.1} MB after, {before:.1} MB before");
}

/// Waits until the flood's connections are gone (the connection gauge counts only the
/// scrape's own), then 500 ms, and returns the RSS.
fn settled_rss(server: &Server) -> f64 {
    // A `/metrics` exchange that fails while the flood's connections are being closed counts
    // as not settled yet; the probes are what judge the ports.
    check::wait_until("the flood's connections closed", Duration::from_secs(20), || {
        http::send(server.addr, "GET", "/metrics", &[], None).is_ok_and(|response| {
            let metrics = response.ok().text();
            check::metric(&metrics, "idmint_http_connections_open") <= 1
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    rss_mb(server.pid())
}

/// `connections` connections, each with as many calls whose message never arrives as the
/// server's SETTINGS allow, up to `calls`.
fn stall(grpc: SocketAddr, connections: usize, calls: u32) -> Vec<h2::Conn> {
    (0..connections)
        .filter_map(|_| {
            let mut conn = h2::Conn::open(grpc).ok()?;
            let settings = conn.handshake(Duration::from_secs(2)).ok()?;
            let allowed = settings.setting(h2::MAX_CONCURRENT_STREAMS).unwrap_or(100).min(calls);
            let flood: Vec<u8> = (0..allowed).flat_map(|i| h2::stalled_next(2 * i + 1)).collect();
            conn.send(&flood).ok()?;
            Some(conn)
        })
        .collect()
}

/// Whether the server has closed `conn` (EOF or reset), without waiting.
fn is_closed(conn: &mut h2::Conn) -> bool {
    let _ = conn.stream.set_nonblocking(true);
    let mut buf = [0_u8; 4096];
    loop {
        match conn.stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Connections the server closed at the message deadline, so far.
fn body_timeouts(server: &Server) -> u64 {
    let metrics = server.get("/metrics").ok().text();
    check::metric(&metrics, "idmint_http_connections_closed_total{reason=\"body_timeout\"}")
}

#[test]
fn grpc_floods_leave_both_ports_answering_and_memory_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (server, grpc) = start(dir.path(), &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    // Warm up both paths, so that "before" includes what any first call allocates.
    for _ in 0..20 {
        http_next(server.addr, &runtime).expect("/v1/next");
        grpc_next(grpc, &runtime).expect("gRPC Next");
    }
    let start_rss = rss_mb(server.pid());

    // 1,100 stream-less connections that answer PINGs, from five addresses (220 each, under
    // the per-IP cap), past the 1,024 descriptors.
    let before = rss_mb(server.pid());
    let conns: Vec<h2::Conn> = (0..1_100)
        .filter_map(|i| connect_from([127, 0, 0, 1 + (i % 5) as u8], grpc, &runtime))
        .collect();
    let opened = conns.len();
    let stop = Arc::new(AtomicBool::new(false));
    let pinger = std::thread::spawn({
        let stop = Arc::clone(&stop);
        move || answer_pings(conns, stop)
    });
    let seen = probe(&server, grpc, &runtime);
    stop.store(true, Ordering::Relaxed);
    let pings = pinger.join().expect("pinger");
    let after = settled_rss(&server);
    judge(
        &format!("{opened} stream-less connections ({pings} PINGs answered)"),
        before,
        &seen,
        after,
    );

    // 40 connections x 1,000 calls whose message never arrives, sent blind (before the
    // server's SETTINGS): past the 100 streams allowed, h2 refuses the rest and closes the
    // connection after `http2_max_pending_resets` refusals.
    let before = rss_mb(server.pid());
    let mut blind: Vec<h2::Conn> = (0..40)
        .filter_map(|_| {
            let mut conn = h2::Conn::open(grpc).ok()?;
            let calls: Vec<u8> = (0..1_000).flat_map(|i| h2::stalled_next(2 * i + 1)).collect();
            conn.send(&calls).ok()?;
            Some(conn)
        })
        .collect();
    let seen = probe(&server, grpc, &runtime);
    let closed = blind.iter_mut().map(is_closed).filter(|closed| *closed).count();
    drop(blind);
    let after = settled_rss(&server);
    judge(
        &format!(
            "40 x 1,000 stalled calls sent blind ({closed} of 40 connections closed by the server)"
        ),
        before,
        &seen,
        after,
    );

    // The most a client that follows the SETTINGS can hold: 40 connections x 100 calls
    // whose message never arrives, ended at the message deadline; three times.
    let mut peaks = Vec::new();
    for cycle in 1..=3 {
        let before = rss_mb(server.pid());
        let closed_before = body_timeouts(&server);
        let stalled = stall(grpc, 40, 1_000);
        let held = stalled.len();
        let seen = probe(&server, grpc, &runtime);
        drop(stalled);
        let after = settled_rss(&server);
        let closed = body_timeouts(&server) - closed_before;
        judge(
            &format!(
                "{held} connections x 100 stalled calls, cycle {cycle} ({closed} closed at the message deadline)"
            ),
            before,
            &seen,
            after,
        );
        peaks.push(seen.rss_peak);
    }
    // What a flood leaves is reused by the next one: the peak does not grow from cycle to
    // cycle (before the message deadline, three cycles took a server from 382 to 526 MB). The
    // peaks, not the RSS after each cycle: that one is 25 or 42 MB depending on whether the
    // memory trim, every 2 s, has run yet when it is read.
    assert!(peaks[2] < peaks[0] + 10.0, "RSS peak of each cycle: {peaks:?}");

    // 1,100 calls in flight on one connection (over the 1,024 streams allowed).
    let before = rss_mb(server.pid());
    let mut one = h2::Conn::open(grpc).expect("connect");
    let calls: Vec<u8> = (0..1_100).flat_map(|i| h2::stalled_next(2 * i + 1)).collect();
    one.send(&calls).expect("send");
    let seen = probe(&server, grpc, &runtime);
    let closed = is_closed(&mut one);
    drop(one);
    let after = settled_rss(&server);
    judge(
        &format!("1,100 stalled calls on one connection (closed by the server: {closed})"),
        before,
        &seen,
        after,
    );

    // Rapid reset: connections that open and reset 200 streams at once, one after another,
    // for as long as the probes run (a count alone would end the flood early against a fast
    // server: a release build takes 5,000 such connections in under 0.3 s).
    let before = rss_mb(server.pid());
    let stop = Arc::new(AtomicBool::new(false));
    let resetter = std::thread::spawn({
        let stop = Arc::clone(&stop);
        move || {
            let flood: Vec<u8> = (0..200)
                .flat_map(|i| [h2::stalled_next(2 * i + 1), h2::reset(2 * i + 1)].concat())
                .collect();
            let (mut sent, started) = (0_usize, Instant::now());
            while !stop.load(Ordering::Relaxed) {
                if let Ok(mut conn) = h2::Conn::open(grpc)
                    && conn.send(&flood).is_ok()
                {
                    sent += 1;
                }
            }
            (sent, started.elapsed())
        }
    });
    let seen = probe(&server, grpc, &runtime);
    stop.store(true, Ordering::Relaxed);
    let (floods, lasted) = resetter.join().expect("resetter");
    let after = settled_rss(&server);
    judge(
        &format!("rapid reset ({floods} connections x 200 resets over {lasted:.1?})"),
        before,
        &seen,
        after,
    );

    // What every flood left: glibc keeps the small chunks the floods freed until the server
    // gives them back (`malloc_trim`, checked every 2 s: src/memory.rs).
    let end_rss = given_back(&server, start_rss);
    #[allow(clippy::print_stderr)]
    {
        eprintln!("RSS at the start {start_rss:.1} MB, after every flood {end_rss:.1} MB");
    }
    assert!(
        end_rss < start_rss + 20.0,
        "RSS {end_rss:.1} MB after the floods, {start_rss:.1} MB at the start"
    );
    drop(server);

    // The negative control: with 1,000 streams per connection allowed (the old default was
    // 1,024), the same SETTINGS-following flood holds 40,000 calls, and the RSS grows by
    // tens of MB where the cap of 100 kept it to a few. The same flood then shows what the
    // memory trim does: given back within seconds, or kept with `--no-memory-trim`.
    for trim in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut extra = vec!["--http2-max-concurrent-streams", "1000"];
        if !trim {
            extra.push("--no-memory-trim");
        }
        let (lax, lax_grpc) = start(dir.path(), &extra);
        let before = rss_mb(lax.pid());
        let stalled = stall(lax_grpc, 40, 1_000);
        let mut peak = before;
        let end = Instant::now() + Duration::from_secs(2);
        while Instant::now() < end {
            peak = peak.max(rss_mb(lax.pid()));
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(stalled);
        let after = if trim {
            given_back(&lax, before)
        } else {
            settled_rss(&lax);
            // Three times as long as the trim's check period: the trim would have run.
            std::thread::sleep(Duration::from_secs(6));
            rss_mb(lax.pid())
        };
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "control, 1,000 streams per connection, trim {trim}: RSS before {before:.1} MB, \
                 peak {peak:.1} MB, after {after:.1} MB"
            );
        }
        assert!(
            peak > before + 60.0,
            "the control's flood did not grow the RSS: {before:.1} -> {peak:.1} MB"
        );
        if trim {
            assert!(after < before + 20.0, "not given back: {before:.1} -> {after:.1} MB");
        } else {
            assert!(after > before + 20.0, "kept without the trim: {before:.1} -> {after:.1} MB");
        }
    }
}

/// Waits (up to 20 s, where the trim takes one or two of its 2 s checks) until the RSS is back
/// within 20 MB of `start` after the flood's connections are gone, and returns it.
fn given_back(server: &Server, start: f64) -> f64 {
    settled_rss(server);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rss = rss_mb(server.pid());
        if rss < start + 20.0 || Instant::now() > deadline {
            return rss;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
