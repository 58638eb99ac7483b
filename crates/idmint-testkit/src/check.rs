//! Checks shared by the service tests: uniqueness and order of issued IDs, decoded times,
//! stored marks, metrics, and bounded polling.

use std::{
    collections::HashSet,
    path::Path,
    time::{Duration, Instant},
};

use idmint_core::{AnyId, Layout};

/// Asserts that no ID occurs twice and returns how many there are.
pub fn assert_unique(ids: &[u64]) -> usize {
    let mut seen = HashSet::with_capacity(ids.len());
    for &id in ids {
        assert!(seen.insert(id), "duplicate id {id} among {} ids", ids.len());
    }
    ids.len()
}

/// The IDs as integers.
///
/// # Panics
///
/// On a 128-bit ID.
///
/// # Example
///
/// ```
/// use idmint_core::AnyId;
/// use idmint_testkit::check::u64s;
///
/// assert_eq!(u64s(&[AnyId::U64(7), AnyId::U64(9)]), [7, 9]);
/// ```
pub fn u64s(ids: &[AnyId]) -> Vec<u64> {
    ids.iter()
        .map(|&id| u64::try_from(id).unwrap_or_else(|_| panic!("{id} is not a 64-bit id")))
        .collect()
}

/// Asserts that every ID of `newer` is greater than every ID of `older`, as integers.
pub fn assert_all_above(newer: &[u64], older: &[u64]) {
    let (Some(&low), Some(&high)) = (newer.iter().min(), older.iter().max()) else {
        panic!("nothing to compare: {} newer, {} older ids", newer.len(), older.len());
    };
    assert!(low > high, "a newer id ({low}) is not above every older id (max {high})");
}

/// Asserts that the IDs strictly increase in the order given.
pub fn assert_increasing(ids: &[u64]) {
    if let Some(pair) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!("ids do not increase: {} then {}", pair[0], pair[1]);
    }
}

/// The time (Unix ms) an ID of a layout carries.
pub fn time_ms(layout: &Layout, id: u64) -> u64 {
    layout
        .time_ms(AnyId::U64(id), u64::MAX)
        .unwrap_or_else(|e| panic!("cannot decode {id} as {}: {e}", layout.name()))
        .unwrap_or_else(|| panic!("layout {} has no time", layout.name()))
}

/// The snowflake layout, the service's default.
pub fn snowflake() -> Layout {
    Layout::builtin("snowflake").expect("snowflake layout")
}

/// The mark stored in `<data>/<namespace>/<generator>.mark` (JSON `{"mark_ms": ..}`).
pub fn stored_mark(data_dir: &Path, namespace: &str, generator_id: u64) -> u64 {
    let path = data_dir.join(namespace).join(format!("{generator_id}.mark"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", path.display()));
    json["mark_ms"].as_u64().unwrap_or_else(|| panic!("no mark_ms in {}: {text}", path.display()))
}

/// The value of one sample in Prometheus text (`name{labels} value`, written as `series`).
pub fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse::<u64>().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("no sample `{series}` in the metrics:\n{text}"))
}

/// The value of one sample in Prometheus text that may have a fraction (seconds).
pub fn metric_f64(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series).then(|| value.parse::<f64>().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("no sample `{series}` in the metrics:\n{text}"))
}

/// Polls `ready` every few milliseconds until it holds; panics after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Notes how many IDs a test checked (shown with `--nocapture`).
#[allow(clippy::print_stderr)]
pub fn report(test: &str, ids: usize) {
    eprintln!("{test}: {ids} ids checked, 0 duplicates");
}
