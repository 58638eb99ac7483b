//! Clock steps under a running `idmint serve`, made with libfaketime and a time file the test
//! rewrites: +60 s, back, −60 s, back. Each step logs exactly one WARN line with its size and
//! direction and moves `idmint_clock_step_seconds` and `idmint_ahead_of_wall_seconds`, both
//! when libfaketime moves the monotonic clock too (its default) and when it moves the wall
//! clock only (`DONT_FAKE_MONOTONIC=1`, what an NTP step does). The negative control runs the
//! same check with the clock watch off, and with its threshold above the step: no line, and
//! the check fails. A leap second as Linux inserts it (the wall clock back 1 s after
//! midnight) keeps IDs unique and increasing and logs one line; its control removes the clock
//! guard. And a window longer than the lease TTL (etcd's or Postgres's) is refused with one line.
//!
//! Every process is started by the test and stopped by its PID only.

use std::{
    path::Path,
    process::Stdio,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::common::{Server, idmint, libfaketime, poll};
use idmint_testkit::check::{
    assert_increasing, assert_unique, metric, metric_f64, snowflake, time_ms,
};

/// How long a step may take to show in the log: the watch reads the clocks every 250 ms.
const SEEN_WITHIN: Duration = Duration::from_secs(5);

/// How long the test waits after a step's line for a second one that must not come (four
/// readings of the watch).
const SETTLE: Duration = Duration::from_secs(1);

/// What libfaketime moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Faked {
    /// The wall clock and the monotonic clock (libfaketime's default).
    Both,
    /// The wall clock only (`DONT_FAKE_MONOTONIC=1`), as an NTP step does.
    WallOnly,
}

impl Faked {
    /// The `against` label its steps are counted under.
    fn against(self) -> &'static str {
        match self {
            Faked::Both => "sleep",
            Faked::WallOnly => "monotonic",
        }
    }
}

/// The offsets written to the time file in turn, the step each one makes (ms), and the least
/// `idmint_ahead_of_wall_seconds` must read after it. With both clocks faked, logical time
/// stands still after a backward step until real time catches up, so the lead shrinks by the
/// seconds the test has taken since: the bounds leave 10 s for that.
const STEPS: [(&str, i64, f64); 4] =
    [("+60", 60_000, 0.0), ("+0", -60_000, 50.0), ("-60", -60_000, 110.0), ("+0", 60_000, 50.0)];

/// What the test measured after one step.
#[derive(Debug)]
struct Phase {
    offset: &'static str,
    /// WARN lines of the clock watch in the log so far.
    warn_lines: usize,
    /// The new line's `step_ms`.
    step_ms: i64,
    ahead_s: f64,
    forward: u64,
    backward: u64,
    /// The newest ID's time minus the true (unfaked) clock of the test, in s.
    id_ahead_of_true_s: f64,
}

/// Prints what a test measured (shown with `--nocapture`).
#[allow(clippy::print_stderr)]
fn note(text: &str) {
    eprintln!("{text}");
}

/// The test's own clock, which libfaketime does not touch.
fn true_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Replaces the time file in one step, as libfaketime re-reads it at every clock reading.
fn set_offset(file: &Path, offset: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).expect("write the time file");
    std::fs::rename(&tmp, file).expect("replace the time file");
}

/// The clock watch's WARN lines in a log.
fn warn_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains("WARN") && l.contains("idmint_engine::clock_watch"))
        .map(str::to_owned)
        .collect()
}

/// The signed number after `step_ms=` in a log line.
fn step_ms(line: &str) -> Option<i64> {
    let rest = &line[line.find("step_ms=")? + "step_ms=".len()..];
    let number: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    number.parse().ok()
}

/// A few IDs (single and batch), or what the server answered instead.
fn some_ids(server: &Server) -> Result<Vec<u64>, String> {
    let mut ids = Vec::new();
    for target in ["/v1/batch?count=10", "/v1/next"] {
        let response = server.get(target);
        if response.status != 200 {
            return Err(format!("{target} answered {}: {}", response.status, response.text()));
        }
        if target == "/v1/next" {
            ids.push(response.id());
        } else {
            ids.extend(response.ids());
        }
    }
    Ok(ids)
}

/// The scenario: `idmint serve <extra>` under libfaketime (`faked`), stepped through
/// [`STEPS`]. Returns what was measured after each step, or the first thing that is not as it
/// must be: a missing or second WARN line, a line with the wrong size, a metric that did not
/// move, a refused request. `None` when libfaketime is not installed (outside CI).
fn check(faked: Faked, extra: &[&str]) -> Option<Result<Vec<Phase>, String>> {
    let faked_serve = serve_faked(faked, "+0", extra)?;
    Some(run_steps(&faked_serve.server, faked, &faked_serve.time_file))
}

/// An `idmint serve` under libfaketime, and the time file that sets its offset.
struct FakedServe {
    server: Server,
    time_file: std::path::PathBuf,
    /// Holds the time file and the data directory.
    _dir: tempfile::TempDir,
}

/// `idmint serve <extra>` on free ports with its own data directory, under libfaketime
/// (`faked`) at `offset` (the time file's first line), ready. `None` when libfaketime is not
/// installed (outside CI).
fn serve_faked(faked: Faked, offset: &str, extra: &[&str]) -> Option<FakedServe> {
    let Some(lib) = libfaketime() else {
        let hint = "install Debian's `faketime` package (scripts/test-all does)";
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!in_ci, "libfaketime is required under CI=true: {hint}");
        note(&format!("SKIPPED: libfaketimeMT.so.1 not found; {hint}"));
        return None;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let time_file = dir.path().join("faketime");
    set_offset(&time_file, offset);
    let lib = lib.to_string_lossy().into_owned();
    let file = time_file.to_string_lossy().into_owned();
    let mut env = vec![
        ("LD_PRELOAD", lib.as_str()),
        ("FAKETIME_TIMESTAMP_FILE", file.as_str()),
        ("FAKETIME_NO_CACHE", "1"),
    ];
    if faked == Faked::WallOnly {
        env.push(("DONT_FAKE_MONOTONIC", "1"));
    }
    let data = dir.path().join("data");
    let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir"];
    args.push(data.to_str().expect("a UTF-8 path"));
    args.extend(extra);
    let child = idmint(&args, &env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idmint serve");
    let server = Server::adopt("idmint serve", child, Duration::from_secs(10));
    let ready = poll(Duration::from_secs(10), || server.get("/readyz").status == 200);
    assert!(ready, "not ready:\n{}", server.log_text());
    Some(FakedServe { server, time_file, _dir: dir })
}

/// Steps the clock of a running server through [`STEPS`] and measures each step.
fn run_steps(server: &Server, faked: Faked, time_file: &Path) -> Result<Vec<Phase>, String> {
    let against = faked.against();
    let series = |direction: &str| {
        format!(
            "idmint_clock_step_seconds_count{{direction=\"{direction}\",against=\"{against}\"}}"
        )
    };
    let mut ids = some_ids(server)?;
    let before = server.get("/metrics").text();
    let ahead = metric_f64(&before, r#"idmint_ahead_of_wall_seconds{namespace="default"}"#);
    if ahead > 5.0 || !warn_lines(&server.log_text()).is_empty() {
        return Err(format!(
            "before any step: {ahead} s ahead, or a WARN line:\n{}",
            server.log_text()
        ));
    }
    let mut phases = Vec::new();
    for (k, (offset, step, least_ahead)) in STEPS.into_iter().enumerate() {
        set_offset(time_file, offset);
        let started = Instant::now();
        if !poll(SEEN_WITHIN, || warn_lines(&server.log_text()).len() > k) {
            return Err(format!(
                "no WARN line for the step to {offset} within {SEEN_WITHIN:?}:\n{}",
                server.log_text()
            ));
        }
        let seen_after = started.elapsed();
        std::thread::sleep(SETTLE);
        let lines = warn_lines(&server.log_text());
        if lines.len() != k + 1 {
            return Err(format!(
                "{} WARN lines after {} steps:\n{}",
                lines.len(),
                k + 1,
                lines.join("\n")
            ));
        }
        let line = &lines[k];
        let logged = step_ms(line).ok_or_else(|| format!("no step_ms in `{line}`"))?;
        let direction = if step > 0 { "forward" } else { "backward" };
        if (logged - step).abs() > 500 || !line.contains(direction) || !line.contains(against) {
            return Err(format!(
                "the step to {offset} ({step} ms, {direction}, {against}) was logged as `{line}`"
            ));
        }
        let new = some_ids(server)?;
        let id_ahead_of_true_s =
            (time_ms(&snowflake(), *new.last().expect("ids")) as f64 - true_ms() as f64) / 1e3;
        ids.extend(new);
        let text = server.get("/metrics").text();
        let phase = Phase {
            offset,
            warn_lines: lines.len(),
            step_ms: logged,
            ahead_s: metric_f64(&text, r#"idmint_ahead_of_wall_seconds{namespace="default"}"#),
            forward: metric(&text, &series("forward")),
            backward: metric(&text, &series("backward")),
            id_ahead_of_true_s,
        };
        note(&format!("{faked:?}: step to {offset} seen after {seen_after:?}: {phase:?}"));
        let counted = STEPS[..=k].iter().filter(|s| s.1 > 0).count() as u64;
        if (phase.forward, phase.backward) != (counted, k as u64 + 1 - counted) {
            return Err(format!("step counts after the step to {offset}: {phase:?}"));
        }
        // While the wall clock is ahead, the IDs follow it and the gauge reads 0; once it is
        // back, the IDs keep their logical time and the gauge reads the lead.
        let gauge_ok =
            if k == 0 { phase.ahead_s < 5.0 } else { phase.ahead_s >= least_ahead - 10.0 };
        // Every ID from the first step on is about a minute ahead of the true time.
        if !gauge_ok || phase.id_ahead_of_true_s < 40.0 {
            return Err(format!("after the step to {offset}: {phase:?}"));
        }
        phases.push(phase);
    }
    assert_increasing(&ids);
    assert_unique(&ids);
    Ok(phases)
}

/// One more WARN line after each step, in its direction.
fn assert_one_line_per_step(phases: &[Phase]) {
    let got: Vec<_> = phases.iter().map(|p| (p.offset, p.warn_lines, p.step_ms.signum())).collect();
    assert_eq!(got, [("+60", 1, 1), ("+0", 2, -1), ("-60", 3, -1), ("+0", 4, 1)]);
}

#[test]
fn a_wall_clock_step_logs_one_warn_line_each_way_and_moves_the_metrics() {
    if let Some(result) = check(Faked::WallOnly, &[]) {
        assert_one_line_per_step(&result.unwrap_or_else(|e| panic!("{e}")));
    }
}

#[test]
fn a_step_of_both_clocks_logs_one_warn_line_each_way_and_moves_the_metrics() {
    if let Some(result) = check(Faked::Both, &[]) {
        assert_one_line_per_step(&result.unwrap_or_else(|e| panic!("{e}")));
    }
}

/// The negative control: the same check with the watch off (`--clock-step-warn-ms 0`), and
/// with its threshold above the step (120 s), must fail for want of the first WARN line.
#[test]
fn without_the_clock_watch_the_check_fails() {
    for (faked, threshold) in [(Faked::WallOnly, "0"), (Faked::Both, "120000")] {
        let Some(result) = check(faked, &["--clock-step-warn-ms", threshold]) else { return };
        let error = result.err().unwrap_or_else(|| {
            panic!("{faked:?}, threshold {threshold} ms: the check passed without the watch")
        });
        assert!(
            error.starts_with("no WARN line for the step to +60"),
            "{faked:?}, threshold {threshold} ms: failed for another reason: {error}"
        );
        let first = error.lines().next().unwrap_or_default();
        note(&format!("control {faked:?}, threshold {threshold} ms: caught: {first}"));
    }
}

/// A window longer than the claims' lease TTL is refused at start with one line naming both,
/// on etcd and on Postgres (before anything connects, so the endpoint need not answer).
#[test]
fn a_window_longer_than_the_lease_ttl_is_refused_with_one_line() {
    let etcd: &[&str] = &["--etcd", "http://127.0.0.1:1"];
    let postgres: &[&str] =
        &["--coordinator", "postgres", "--postgres", "postgres://idmint@127.0.0.1:1/idmint"];
    let check = |store: &[&str], args: &[&str], want: &str| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let data = dir.path().to_str().expect("a UTF-8 path");
        let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--data-dir", data];
        all.extend(store);
        all.extend(args);
        let output = idmint(&all, &[]).output().expect("run idmint serve");
        let stderr = crate::common::strip_ansi(&String::from_utf8_lossy(&output.stderr));
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end(), want, "{args:?}");
    };
    check(
        etcd,
        &["--window-ms", "10000", "--lease-ttl", "2"],
        "error: --window-ms 10000 is longer than the 2 s lease TTL, so each takeover of a \
         generator ID could start further ahead of the clock than the last (DESIGN.md, \"Why \
         must the window fit in the lease TTL?\"); use --window-ms 2000 or less, --lease-ttl 10 \
         or more, or --allow-long-window",
    );
    // LableOrg's pool keys live on 5 s leases, whatever --lease-ttl says.
    check(
        etcd,
        &["--window-ms", "5001", "--etcd-scheme", "lable-org", "--etcd-lable-prefix", "unique-id/"],
        "error: --window-ms 5001 is longer than the 5 s lease TTL, so each takeover of a \
         generator ID could start further ahead of the clock than the last (DESIGN.md, \"Why \
         must the window fit in the lease TTL?\"); use --window-ms 5000 or less (LableOrg's leases \
         last 5 s), or --allow-long-window",
    );
    // Postgres's leases are held to the same rule, and its default window to its TTL.
    check(
        postgres,
        &["--window-ms", "3000", "--lease-ttl", "1"],
        "error: --window-ms 3000 is longer than the 1 s lease TTL, so each takeover of a \
         generator ID could start further ahead of the clock than the last (DESIGN.md, \"Why \
         must the window fit in the lease TTL?\"); use --window-ms 1000 or less, --lease-ttl 3 \
         or more, or --allow-long-window",
    );
    check(
        postgres,
        &["--lease-ttl", "2"],
        "error: --window-ms 3000 is longer than the 2 s lease TTL, so each takeover of a \
         generator ID could start further ahead of the clock than the last (DESIGN.md, \"Why \
         must the window fit in the lease TTL?\"); use --window-ms 2000 or less, --lease-ttl 3 \
         or more, or --allow-long-window",
    );
}

/// The Unix second that ends the last leap second so far: 2017-01-01T00:00:00Z, right after
/// 2016-12-31T23:59:60. The kernel inserts a leap second by stepping `CLOCK_REALTIME` back
/// 1 s here, so Unix second 1,483,228,799 (23:59:59) is read twice; the monotonic clock does
/// not move.
const AFTER_LEAP_S: i64 = 1_483_228_800;

/// A leap second as Linux inserts it, under a running `idmint serve <extra>`: the wall clock
/// (only: `DONT_FAKE_MONOTONIC=1`) runs from 23:59:58 on 2016-12-31 past midnight, then steps
/// back 1 s and reads 23:59:59 again. Returns the IDs issued all along (one request after
/// another) and the clock watch's WARN lines; `None` without libfaketime (outside CI).
fn leap_second(extra: &[&str]) -> Option<(Vec<u64>, Vec<String>)> {
    // Whole seconds: the faked clock keeps the true clock's fraction of a second.
    let offset_s = AFTER_LEAP_S - 2 - (true_ms() / 1_000) as i64;
    let fake_ms = |offset_s: i64| true_ms() as i64 + offset_s * 1_000;
    let faked = serve_faked(Faked::WallOnly, &format!("{offset_s:+}"), extra)?;
    let (server, time_file) = (&faked.server, &faked.time_file);
    let mut ids = Vec::new();
    let mut issue_until = |end_ms: i64, offset_s: i64| {
        let started = Instant::now();
        while fake_ms(offset_s) < end_ms && started.elapsed() < Duration::from_secs(10) {
            ids.extend(some_ids(server).unwrap_or_else(|e| panic!("{e}")));
        }
    };
    // Past midnight (by 100 ms or more) on the faked clock, then the repeated second.
    issue_until(AFTER_LEAP_S * 1_000 + 100, offset_s);
    set_offset(time_file, &format!("{:+}", offset_s - 1));
    issue_until(AFTER_LEAP_S * 1_000 + 500, offset_s - 1);
    let lines = warn_lines(&server.log_text());
    Some((ids, lines))
}

/// What a leap second does to the IDs (RELIABILITY.md, "Leap seconds"): the clock watch logs
/// the 1 s step back once, and the IDs stay unique and increasing through the repeated
/// second, their time held at the last one issued until the clock is past it again.
#[test]
fn a_leap_second_inserted_at_23_59_60_repeats_no_id_and_keeps_the_order() {
    let Some((ids, lines)) = leap_second(&[]) else { return };
    let times: Vec<u64> = ids.iter().map(|&id| time_ms(&snowflake(), id)).collect();
    let leap_ms = AFTER_LEAP_S as u64 * 1_000;
    note(&format!(
        "{} ids from {} to {} ms (the leap at {leap_ms}); lines: {lines:?}",
        ids.len(),
        times[0],
        times[times.len() - 1]
    ));
    assert!(times[0] < leap_ms && times[times.len() - 1] > leap_ms, "the ids span the leap");
    assert_unique(&ids);
    assert_increasing(&ids);
    assert_eq!(lines.len(), 1, "one WARN line for the leap: {lines:?}");
    let step = step_ms(&lines[0]).unwrap_or_default();
    assert!((-1_500..=-500).contains(&step) && lines[0].contains("backward"), "{}", lines[0]);
}

/// The negative control: with the clock guard removed (`--unsafe-no-clock-guard`, in a build
/// with the negative controls), IDs follow the wall clock back into the repeated second, and
/// the order check above must fail.
#[cfg(idmint_negative_controls)]
#[test]
fn without_the_clock_guard_a_leap_second_sends_ids_back() {
    let Some((ids, _)) = leap_second(&["--unsafe-no-clock-guard"]) else { return };
    let descents = ids.windows(2).filter(|pair| pair[1] <= pair[0]).count();
    note(&format!("control: {descents} descents among {} ids", ids.len()));
    assert!(descents > 0, "the ids did not go back without the guard");
}
