//! T14, `layout-end`: a layout near its end. One server issues from a custom 63-bit layout
//! (40-bit ms, 11-bit generator ID, 12-bit sequence) whose epoch is set so that its time field
//! runs out 10 s after the scenario starts, under HTTP load. Before the end, `/v1/namespaces`
//! names the day it runs out (`runs_out`) and the server logged a warning at start; after it,
//! the server refuses with `layout_exhausted` (503), counts it in
//! `idmint_layout_exhausted_total`, and never wraps (the checker's order check would see a
//! wrapped ID as lower). Then the server is restarted with another layout over the marks it stored: the
//! start is refused.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Run;
use crate::{cluster::http_get, error::ChaosError};

/// The custom layout's time field, in bits (ms).
const TIME_BITS: u32 = 40;
/// How long after the start the layout runs out.
const LIFETIME: Duration = Duration::from_secs(10);

/// The scenario (anchor T14).
pub(super) fn layout_end(run: &mut Run) -> Result<(), ChaosError> {
    // A layout the checker does not decode: uniqueness, and each batch increasing.
    run.layout("short-lived")?;
    let now_ms = unix_ms();
    let runs_out_ms = now_ms + LIFETIME.as_millis() as u64;
    let epoch_ms = runs_out_ms - (1u64 << TIME_BITS);
    let config = run.dir.join("short-lived.toml");
    let text = format!(
        "[[server.namespaces]]\nname = \"default\"\n\n\
         [server.namespaces.custom_layout]\nname = \"short-lived\"\nbits = 63\n\
         epoch_ms = {epoch_ms}\ntick_ms = 1\n\n\
         [[server.namespaces.custom_layout.fields]]\nname = \"timestamp\"\nbits = {TIME_BITS}\nrole = \"time\"\n\n\
         [[server.namespaces.custom_layout.fields]]\nname = \"worker\"\nbits = 11\n\n\
         [[server.namespaces.custom_layout.fields]]\nname = \"sequence\"\nbits = 12\nrole = \"sequence\"\n"
    );
    std::fs::write(&config, text).map_err(ChaosError::io("write the layout's config"))?;
    let path = config.display().to_string();
    let args = run.embedded_args(&["--config", &path, "--generator-id", "0"]);
    let i = run.node(args, false)?;
    run.start(i)?;
    // Warned before: the namespace says when it runs out.
    let http = run.nodes[i].http;
    let namespaces = http_get(http, "/v1/namespaces").map(|(_, body)| body).unwrap_or_default();
    if !namespaces.contains("\"runs_out\"") {
        return Err(ChaosError::Server(format!("/v1/namespaces names no runs_out: {namespaces}")));
    }
    if !run.nodes[i].log_text().contains("less than 10 years from now") {
        return Err(ChaosError::Server(
            "the server did not warn at start that its layout runs out".into(),
        ));
    }
    crate::say!("   layout short-lived runs out at {runs_out_ms} ms (in {} s)", LIFETIME.as_secs());
    run.http(i, 2, None);
    let left = Duration::from_millis(runs_out_ms.saturating_sub(unix_ms()));
    run.hold(left + Duration::from_secs(2));
    run.fired("layout_end", "the layout's time field has run out".into());
    match http_get(http, "/v1/next") {
        Some((503, body)) if body.contains("layout_exhausted") => {
            crate::say!("   /v1/next after the end: 503 layout_exhausted");
        }
        other => {
            return Err(ChaosError::Server(format!(
                "after the layout's end /v1/next answered {other:?}, not 503 layout_exhausted"
            )));
        }
    }
    let metrics = http_get(http, "/metrics").map(|(_, body)| body).unwrap_or_default();
    let counted = metrics
        .lines()
        .find_map(|l| l.strip_prefix("idmint_layout_exhausted_total{namespace=\"default\"} "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if counted == 0 {
        return Err(ChaosError::Server(
            "no refusal counted in idmint_layout_exhausted_total".into(),
        ));
    }
    crate::say!("   idmint_layout_exhausted_total: {counted}");
    run.hold(Duration::from_secs(1));

    // A layout changed for a namespace with stored marks: the start is refused.
    run.nodes[i].terminate();
    run.nodes[i].set_flag("--layout", "snowflake");
    match run.nodes[i].start() {
        Err(refused) => {
            let first = refused.to_string().lines().last().unwrap_or_default().to_owned();
            crate::say!("   restart with another layout over its marks: refused ({first})");
        }
        Ok(()) => {
            return Err(ChaosError::Server(
                "a server started with another layout over the marks of its namespace".into(),
            ));
        }
    }
    run.fired("layout_change", "s0 restarted with --layout snowflake: refused".into());
    Ok(())
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
