//! The watcher: while a scenario runs, it polls `idmint lease list --json` (read-only) and
//! records what it shows as `holders` events: for each generator ID, the server holding it
//! (found by the PID in the claim's holder description), the claim's etcd lease, and the
//! stored mark. The checker uses them for its time-bounded checks: an ID's generator ID was
//! not held by another server all through the operation, and its time is at or below the
//! mark stored when the operation returned.

use std::{
    collections::HashMap,
    path::PathBuf,
    process::Command,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use crate::history::{Event, Holding, Recorder};

/// Between two polls.
const EVERY: Duration = Duration::from_millis(300);

/// Which server each PID is (every start of every server registers here).
pub(crate) type Pids = Arc<Mutex<HashMap<u32, String>>>;

/// Where the claims and marks are: `idmint lease list` flags, and the store's number (a
/// restored etcd is another store: marks are compared within one only). Several sets of flags
/// are listed one after the other and make one poll: stores whose generator IDs are apart
/// (the `embedded-fleet` scenario's Postgres and etcd fleets, in datacenters of their own).
#[derive(Debug, Clone, Default)]
struct Store {
    number: u32,
    flags: Vec<Vec<String>>,
}

/// The polling thread and what it reads.
#[derive(Debug)]
pub(crate) struct Watcher {
    store: Arc<Mutex<Option<Store>>>,
    pub(crate) pids: Pids,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts polling with `lister` (the safe `idmint`), recording into `recorder`; it polls
    /// nothing until [`watch`](Self::watch) names a store.
    pub(crate) fn start(lister: PathBuf, recorder: Recorder) -> Watcher {
        let store: Arc<Mutex<Option<Store>>> = Arc::default();
        let pids = Pids::default();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (store, pids, stop) = (store.clone(), pids.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let current = store.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    if let Some(store) = current {
                        let t = recorder.now();
                        let polls: Option<Vec<Vec<Holding>>> =
                            store.flags.iter().map(|flags| poll(&lister, flags, &pids)).collect();
                        if let Some(held) = polls.map(|p| p.concat()) {
                            let end = recorder.now();
                            let event = Event::Holders { t, end, store: store.number, held };
                            let _ = recorder.record(&[event]);
                        }
                    }
                    std::thread::sleep(EVERY);
                }
            })
        };
        Watcher { store, pids, stop, thread: Some(thread) }
    }

    /// Polls this store from now on (`--etcd URLS` or `--data-dir DIR`); a new store gets a
    /// new number.
    pub(crate) fn watch(&self, flags: Vec<String>) {
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let number = store.as_ref().map_or(0, |s| s.number + 1);
        *store = Some(Store { number, flags: vec![flags] });
    }

    /// Polls another store along with the current one, in the same polls (their generator IDs
    /// must be apart); the first store if none is watched yet.
    pub(crate) fn watch_also(&self, flags: Vec<String>) {
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        store.get_or_insert_with(Store::default).flags.push(flags);
    }

    /// Whether a store is watched.
    pub(crate) fn watching(&self) -> bool {
        self.store.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    }

    /// Stops polling (the last poll may still be recorded).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `idmint lease list --json`, `None` when it failed (etcd down, for one).
fn poll(lister: &PathBuf, flags: &[String], pids: &Pids) -> Option<Vec<Holding>> {
    let output = Command::new(lister)
        .args(["lease", "list", "--json", "--namespace", "default"])
        .args(flags)
        .env("NO_COLOR", "1")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    let pids = pids.lock().unwrap_or_else(PoisonError::into_inner);
    let held = json["entries"]
        .as_array()?
        .iter()
        .filter_map(|e| {
            let generator = e["generator_id"].as_u64()?;
            let claimed = e["claimed"].as_bool() != Some(false);
            let pid = e["holder"].as_str().filter(|_| claimed).and_then(pid_of);
            let server = pid.and_then(|pid| pids.get(&pid).cloned());
            let claim = match e["lease_id"].as_str() {
                Some(lease) => Some(format!("lease {lease}")),
                None => pid.map(|pid| format!("pid {pid}")),
            }
            .filter(|_| claimed);
            Some(Holding { generator, server, claim, mark_ms: e["mark_ms"].as_u64() })
        })
        .collect();
    Some(held)
}

/// The PID in a holder description ("idmint pid 1234 on host, since ...").
fn pid_of(holder: &str) -> Option<u32> {
    let rest = &holder[holder.find("pid ")? + 4..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_are_read_from_holder_descriptions() {
        for (holder, pid) in [
            ("idmint pid 1234 on box, since 2026-11-24T10:00:00.000Z", Some(1234)),
            ("pid 7 on host h (data directory x)", Some(7)),
            ("a LableOrg client", None),
            ("pid x", None),
        ] {
            assert_eq!(pid_of(holder), pid, "{holder}");
        }
    }
}
