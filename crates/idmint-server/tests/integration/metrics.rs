//! `/metrics` of a live server as Prometheus' own linter sees it: `promtool check metrics`
//! passes on a scrape after traffic (latency histograms, build info and process metrics
//! included), and rejects a deliberately bad name (the control). Without promtool the test
//! says SKIPPED, except under `CI=true`, where it fails. Every family a server renders, gRPC's
//! too, is a row of the metrics table in docs/operations.md. And the clock watch's histogram
//! and the lead over the wall clock, with a wall clock stepped forward and back.

use std::{
    collections::BTreeSet,
    io::Write,
    process::{Command, Stdio},
    time::Duration,
};

use idmint_server::ServerConfig;
use idmint_testkit::{TestServer, check::metric_f64, clock, http};

/// `promtool check metrics` on `text`: whether it passed, and what it said. `None` when
/// promtool is not installed (outside CI).
fn promtool(text: &str) -> Option<(bool, String)> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("promtool is required under CI=true (Debian's `prometheus`): {e}")
        }
        Err(e) => {
            skipped(&e);
            return None;
        }
    };
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write to promtool");
    let output = child.wait_with_output().expect("promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Some((output.status.success(), said))
}

#[allow(clippy::print_stderr)]
fn skipped(e: &std::io::Error) {
    eprintln!("SKIPPED: promtool not found ({e}); install Debian's `prometheus` to run this test");
}

#[allow(clippy::print_stderr)]
fn show(what: &str, text: &str) {
    eprintln!("{what}:\n{text}");
}

#[test]
fn promtool_accepts_a_live_scrape_and_rejects_a_bad_name() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let server = TestServer::on_dir(ServerConfig::default(), dir.path(), clock(0)).expect("start");
    for target in ["/v1/next", "/v1/batch?count=5", "/v1/namespaces/default/next", "/nowhere"] {
        let _ = http::get(server.addr, target);
    }
    let text = server.metrics();
    server.stop().expect("ordered shutdown");

    // The families this issue added are there, with samples.
    for series in [
        r#"idmint_http_request_duration_seconds_count{method="GET",route="/v1/next"}"#,
        r#"idmint_http_request_duration_seconds_count{method="GET",route="/v1/namespaces/{namespace}/next"}"#,
        r#"idmint_http_request_duration_seconds_count{method="GET",route="unmatched"}"#,
        r#"idmint_build_info{version="0.1.0"}"#,
        "process_open_fds",
    ] {
        assert!(metric_f64(&text, series) >= 1.0, "{series} is not at least 1");
    }
    assert!(metric_f64(&text, "process_resident_memory_bytes") > 0.0);
    // A young process may have used less than a tick (10 ms) of CPU: only the sample is sure.
    assert!(metric_f64(&text, "process_cpu_seconds_total") >= 0.0);
    assert!(metric_f64(&text, "process_start_time_seconds") > 1.6e9);
    let raw_paths = text.lines().filter(|l| l.contains("route=\"/nowhere\"")).count();
    assert_eq!(raw_paths, 0, "a raw path became a label:\n{text}");
    assert!(!text.contains("_ms"), "a metric in ms:\n{text}");

    let Some((passed, said)) = promtool(&text) else { return };
    show(
        "promtool check metrics on the live scrape",
        if said.is_empty() { "(nothing)" } else { &said },
    );
    assert!(passed && said.trim().is_empty(), "promtool refused the scrape:\n{said}\n{text}");

    // The control: the name this server used before (milliseconds) is refused.
    let bad = "# HELP idmint_wait_ms_total Waits.\n# TYPE idmint_wait_ms_total counter\nidmint_wait_ms_total{namespace=\"default\"} 3\n";
    let (passed, said) = promtool(bad).expect("promtool ran a moment ago");
    show("promtool check metrics on the control", &said);
    assert!(!passed && said.contains("abbreviated units"), "promtool let a bad name pass: {said}");
}

/// The library's clock watch, in process: a wall clock stepped 60 s forward, then back, is
/// counted once each way in `idmint_clock_step_seconds` (against the monotonic clock, which
/// the step does not move); while it is ahead the IDs follow it and the lead reads 0, and once
/// it is back the IDs keep their time and the lead reads the step.
#[test]
fn a_stepped_wall_clock_is_counted_each_way_and_the_lead_follows() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let wall = clock(0);
    let server =
        TestServer::on_dir(ServerConfig::default(), dir.path(), wall.clone()).expect("start");
    let count = |direction: &str| {
        let series = format!(
            "idmint_clock_step_seconds_count{{direction=\"{direction}\",against=\"monotonic\"}}"
        );
        metric_f64(&server.metrics(), &series)
    };
    let ahead =
        || metric_f64(&server.metrics(), r#"idmint_ahead_of_wall_seconds{namespace="default"}"#);
    let _ = http::get(server.addr, "/v1/batch?count=10").ok();
    assert_eq!((count("forward"), count("backward")), (0.0, 0.0));

    wall.set_offset_ms(60_000);
    idmint_testkit::check::wait_until("the forward step counted", Duration::from_secs(5), || {
        count("forward") == 1.0
    });
    let _ = http::get(server.addr, "/v1/batch?count=10").ok();
    assert!(ahead() < 1.0, "the IDs follow a clock stepped forward: {} s ahead", ahead());

    wall.set_offset_ms(0);
    idmint_testkit::check::wait_until("the backward step counted", Duration::from_secs(5), || {
        count("backward") == 1.0
    });
    assert!(ahead() > 59.0, "the IDs keep their time: {} s ahead", ahead());
    assert_eq!(count("forward"), 1.0, "one forward step, counted once");
    server.stop().expect("ordered shutdown");
}

/// The metric names of the table in docs/operations.md (a row's first cell: one or more names
/// in backticks, with labels), without their labels.
fn documented_metrics(operations: &str) -> BTreeSet<String> {
    operations
        .lines()
        .skip_while(|line| !line.starts_with("| metric | type |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| line.trim_start_matches('|').split(" | ").next())
        .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_owned).collect::<Vec<_>>())
        .map(|name| name.split('{').next().unwrap_or_default().to_owned())
        .collect()
}

/// The families `text` (Prometheus text) declares with `# TYPE`, by their undocumented names:
/// every one but those a row names, the `process_*` ones counting as one row.
fn undocumented(text: &str, documented: &BTreeSet<String>) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.split(' ').next())
        .filter(|name| {
            let row = if name.starts_with("process_") { "process_*" } else { name };
            !documented.contains(row)
        })
        .map(str::to_owned)
        .collect()
}

/// Every metric family a server renders, with its gRPC port served, has a row in the metrics
/// table of docs/operations.md.
#[test]
fn every_rendered_metric_is_in_the_operations_table() {
    let server = TestServer::builder(ServerConfig::default())
        .coordinator(std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()))
        .wall(clock(0))
        .grpc()
        .start()
        .expect("start");
    let _ = http::get(server.addr, "/v1/batch?count=5");
    let text = server.metrics();
    server.stop().expect("ordered shutdown");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operations.md");
    let operations = std::fs::read_to_string(path).expect("docs/operations.md");
    let documented = documented_metrics(&operations);
    assert!(text.contains("# TYPE idmint_grpc_streams_open "), "gRPC's families are rendered");
    let missing = undocumented(&text, &documented);
    assert!(
        missing.is_empty(),
        "add these to the metrics table of docs/operations.md: {missing:?}"
    );
    // The control: a table without the gRPC rows misses them.
    let without_grpc: BTreeSet<String> =
        documented.iter().filter(|name| !name.starts_with("idmint_grpc_")).cloned().collect();
    assert!(undocumented(&text, &without_grpc).contains(&"idmint_grpc_streams_open".to_owned()));
}

/// A layout near its end: a custom layout whose time field runs out a minute from now names
/// its end in `idmint_layout_runs_out_timestamp_seconds`; once the wall clock passes it, a
/// request is refused with `layout_exhausted` (503, never a wrapped ID) and counted in
/// `idmint_layout_exhausted_total`.
#[test]
fn a_layout_that_ran_out_refuses_and_is_counted() {
    use idmint_core::{FieldConfig, FieldRole, LayoutConfig};
    use idmint_server::NamespaceConfig;

    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64;
    let end_ms = now_ms + 60_000;
    let layout = LayoutConfig {
        name: "short-lived".into(),
        bits: 63,
        epoch: None,
        epoch_ms: Some(end_ms - (1 << 20)),
        tick_ms: 1,
        fields: vec![
            FieldConfig { name: "timestamp".into(), bits: 20, role: FieldRole::Time },
            FieldConfig { name: "node".into(), bits: 31, role: FieldRole::Node },
            FieldConfig { name: "sequence".into(), bits: 12, role: FieldRole::Sequence },
        ],
    };
    let namespace = NamespaceConfig {
        name: "short".into(),
        custom_layout: Some(layout),
        ..NamespaceConfig::default()
    };
    let mut config = ServerConfig::default();
    config.namespaces.push(namespace);
    let wall = clock(0);
    let server = TestServer::builder(config)
        .coordinator(std::sync::Arc::new(idmint_coord::MemoryCoordinator::new()))
        .wall(wall.clone())
        .start()
        .expect("start");
    assert_eq!(server.get("/v1/namespaces/short/batch?count=5").status, 200);
    let text = server.metrics();
    let end = metric_f64(&text, "idmint_layout_runs_out_timestamp_seconds{namespace=\"short\"}");
    assert_eq!(end, end_ms as f64 / 1000.0, "the end, before it comes");

    wall.set_offset_ms(120_000);
    let refused = server.get("/v1/namespaces/short/next");
    let body = String::from_utf8_lossy(&refused.body).into_owned();
    assert_eq!(refused.status, 503, "{body}");
    assert!(body.contains("layout_exhausted"), "{body}");
    let text = server.metrics();
    let counted = metric_f64(&text, "idmint_layout_exhausted_total{namespace=\"short\"}");
    assert_eq!(counted, 1.0, "one refusal counted");
    server.stop().expect("ordered shutdown");
}
