//! The durable window (reliability §3 and T20): no ID carries a time above the mark stored on
//! disk; when the mark cannot be stored any more, the server issues only what its window
//! still holds, then answers 503 `window_exhausted` with `Retry-After`, and recovers once
//! storing works again.

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use idmint_coord::{Coordinator, Error as CoordError, FileCoordinator};
use idmint_server::ServerConfig;
use idmint_testkit::{
    FailingMarks, TestServer,
    check::{
        assert_all_above, assert_increasing, assert_unique, metric, report, snowflake, stored_mark,
        time_ms, wait_until,
    },
    clock,
};

/// The largest time among some IDs.
fn latest(ids: &[u64]) -> u64 {
    let layout = snowflake();
    ids.iter().map(|&id| time_ms(&layout, id)).max().expect("some ids")
}

/// Every ID's time lies at or below the mark on disk, read after the IDs were answered (marks
/// only grow, so this bounds the mark in force when they were issued).
#[test]
fn issued_times_never_exceed_the_stored_mark() {
    let dir = tempfile::tempdir().expect("temporary directory");
    // A short window, so that it is extended many times during the test.
    let config = ServerConfig { window_ms: 200, ..ServerConfig::default() };
    let server = TestServer::on_dir(config, dir.path(), clock(0)).expect("start");
    let mut ids = Vec::new();
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(1_200) {
        let batch = server.get("/v1/batch?count=500").ids();
        let single = server.get("/v1/next").id();
        let mark = stored_mark(dir.path(), "default", 0);
        assert!(latest(&batch).max(latest(&[single])) <= mark, "an id above the stored mark");
        ids.extend(batch);
        ids.push(single);
    }
    let extensions = metric(
        &server.metrics(),
        r#"idmint_high_water_mark_extensions_total{namespace="default"}"#,
    );
    assert!(extensions >= 3, "the window was extended only {extensions} times");
    server.stop().expect("ordered shutdown");
    assert_increasing(&ids);
    assert!(latest(&ids) <= stored_mark(dir.path(), "default", 0));
    report("issued_times_never_exceed_the_stored_mark", assert_unique(&ids));
}

/// A file coordinator whose mark writes can be made to fail, as a full or read-only disk
/// would. Used when `chmod` cannot stop writes (tests often run as root).
type Breakable = FailingMarks<FileCoordinator>;

/// A [`Breakable`] on `dir`.
fn breakable(dir: &Path) -> Breakable {
    let inner = FileCoordinator::open(dir).expect("open");
    FailingMarks::new("breakable-file", inner, || CoordError::Io {
        context: "injected fault: cannot write the mark".into(),
        os: Arc::new(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
    })
}

/// How the test makes mark writes fail: a read-only namespace directory where permissions
/// bind the process, the `Breakable` switch where they do not (root).
enum Fault {
    ReadOnlyDir(PathBuf),
    Switch(Arc<Breakable>),
}

impl Fault {
    fn choose(ns_dir: &Path, coordinator: &Arc<Breakable>) -> Fault {
        set_mode(ns_dir, 0o500);
        let probe = ns_dir.join("probe");
        let blocked = fs::File::create(&probe).is_err();
        let _ = fs::remove_file(&probe);
        set_mode(ns_dir, 0o755);
        if blocked {
            Fault::ReadOnlyDir(ns_dir.to_path_buf())
        } else {
            Fault::Switch(Arc::clone(coordinator))
        }
    }

    fn set(&self, failing: bool) {
        match self {
            Fault::ReadOnlyDir(dir) => set_mode(dir, if failing { 0o500 } else { 0o755 }),
            Fault::Switch(coordinator) => coordinator.failing.store(failing, Ordering::SeqCst),
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

#[test]
fn failing_mark_writes_stop_issuing_after_the_window_and_recover() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let coordinator = Arc::new(breakable(dir.path()));
    let config = ServerConfig { window_ms: 200, max_wait_ms: 100, ..ServerConfig::default() };
    let server =
        TestServer::start(config, Arc::clone(&coordinator) as Arc<dyn Coordinator>, clock(0))
            .expect("start");
    let fault = Fault::choose(&dir.path().join("default"), &coordinator);
    let mut before = server.get("/v1/batch?count=1000").ids();

    // Writes fail from now on: the server serves what its window holds, then 503s.
    fault.set(true);
    let mut exhausted = None;
    wait_until("a 503 once the window is used up", Duration::from_secs(5), || {
        let response = server.get("/v1/batch?count=100");
        if response.status == 200 {
            before.extend(response.ids());
            return false;
        }
        exhausted = Some(response);
        true
    });
    let response = exhausted.expect("a 503");
    assert_eq!(response.status, 503, "{}", response.text());
    assert_eq!(response.json()["error"]["code"], "window_exhausted", "{}", response.text());
    let retry: u64 = response
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric Retry-After: {:?}", response.headers));
    assert!(retry >= 1);
    let frozen = stored_mark(dir.path(), "default", 0);
    for _ in 0..3 {
        assert_eq!(server.get("/v1/next").status, 503, "issued without a stored mark");
        assert_eq!(server.get("/v1/batch?count=10").status, 503, "issued without a stored mark");
    }
    assert_eq!(stored_mark(dir.path(), "default", 0), frozen, "the mark moved while failing");
    assert!(latest(&before) <= frozen, "an id above the last stored mark");
    let metrics = server.metrics();
    assert!(metric(&metrics, r#"idmint_high_water_mark_failures_total{namespace="default"}"#) > 0);
    assert!(metric(&metrics, r#"idmint_window_exhausted_total{namespace="default"}"#) > 0);
    assert_eq!(server.get("/healthz").status, 200);

    // Writes work again: issuing resumes above everything issued before.
    fault.set(false);
    let mut after = Vec::new();
    wait_until("issuing to resume", Duration::from_secs(5), || {
        let response = server.get("/v1/batch?count=100");
        if response.status == 200 {
            after.extend(response.ids());
        }
        response.status == 200
    });
    after.extend(server.get("/v1/batch?count=1000").ids());
    after.push(server.get("/v1/next").id());
    let healed = stored_mark(dir.path(), "default", 0);
    assert!(healed > frozen, "the mark did not move after writes recovered");
    assert!(latest(&after) <= healed, "an id above the stored mark");
    assert_all_above(&after, &before);
    server.stop().expect("ordered shutdown");

    let all: Vec<u64> = before.iter().chain(&after).copied().collect();
    assert_increasing(&all);
    report("failing_mark_writes", assert_unique(&all));
}
