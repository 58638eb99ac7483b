//! Histories, Jepsen-style: every client operation is an `invoke` followed by `ok` (with the
//! IDs it returned), `fail` (definitely nothing issued) or `info` (ambiguous: a timeout or a
//! reset connection); the harness adds what it learned about the servers (the generator IDs
//! each one claimed, from its log) and the durable marks it read at the end. One JSON object
//! per line, so that `idmint-chaos check FILE...` can replay any run through the checker.

use std::{
    fs::File,
    io::{BufRead, BufReader, BufWriter, Write},
    path::Path,
    sync::{Arc, Mutex},
    time::Instant,
};

use serde::{Deserialize, Serialize};

use crate::error::ChaosError;

/// One line of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum Event {
    /// A client asked `server` for `count` IDs at `t` (µs since the run started).
    Invoke {
        /// The client (one sequential process: its operations never overlap).
        client: String,
        /// The server asked (`*` when the client picks one itself, like idmint-client).
        server: String,
        /// When, in µs of the harness's monotonic clock.
        t: u64,
        /// How many IDs were asked for.
        count: u64,
        /// When the operation really began, where `t` is earlier on purpose (a prefetching
        /// client's operations take IDs buffered before them, so `t` is the client's start
        /// for the order check); what clients saw (availability) is measured from here.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        began: Option<u64>,
    },
    /// The operation the client last invoked returned these IDs.
    Ok {
        /// The client.
        client: String,
        /// When it returned.
        t: u64,
        /// The IDs, in the order the server sent them: JSON numbers up to 2^64 − 1 (64-bit
        /// layouts), decimal strings above (128-bit ones such as `uuid7`; serde's tagged
        /// enums buffer numbers as at most 64 bits).
        #[serde(with = "wide")]
        ids: Vec<u128>,
    },
    /// The operation the client last invoked definitely issued nothing (an error answer).
    Fail {
        /// The client.
        client: String,
        /// When it returned.
        t: u64,
        /// Why.
        error: String,
    },
    /// The operation the client last invoked may or may not have issued IDs.
    Info {
        /// The client.
        client: String,
        /// When the client gave up.
        t: u64,
        /// Why.
        error: String,
    },
    /// `server` claimed `generator` (from its log).
    Claim {
        /// The server.
        server: String,
        /// The generator ID.
        generator: u64,
    },
    /// The durable mark stored for `generator` at the end of the run (Unix ms).
    Mark {
        /// The generator ID.
        generator: u64,
        /// The mark.
        mark_ms: u64,
    },
    /// What `idmint lease list` showed (the watcher's polls) on store number `store` (a
    /// restored etcd is a new store): it read the store between `t` and `end`.
    Holders {
        /// When the poll began, in µs.
        t: u64,
        /// When it ended.
        end: u64,
        /// The store's number in this run.
        store: u32,
        /// Per generator ID.
        held: Vec<Holding>,
    },
    /// The IDs of this history are of `layout`: `snowflake` (idmint's default, and what a
    /// history without this event holds) is decoded for the holder, mark, order and gap
    /// checks; any other layout (`sequence`, `icicle`...) is checked for uniqueness only.
    Layout {
        /// The layout's name.
        name: String,
    },
    /// A nemesis fired (for the record; the checker counts them).
    Nemesis {
        /// Its kind.
        kind: String,
        /// When, in µs.
        t: u64,
        /// What it did.
        detail: String,
    },
}

/// IDs of up to 128 bits in JSON: a number when it fits 64 bits, else a decimal string.
mod wide {
    use serde::{Deserializer, Serializer, de, ser::SerializeSeq};

    pub(super) fn serialize<S: Serializer>(ids: &[u128], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(ids.len()))?;
        for &id in ids {
            match u64::try_from(id) {
                Ok(narrow) => seq.serialize_element(&narrow)?,
                Err(_) => seq.serialize_element(&id.to_string())?,
            }
        }
        seq.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u128>, D::Error> {
        struct Ids;
        impl<'de> de::Visitor<'de> for Ids {
            type Value = Vec<u128>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of IDs (numbers or decimal strings)")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u128>, A::Error> {
                let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(id) = seq.next_element::<Id>()? {
                    ids.push(id.0);
                }
                Ok(ids)
            }
        }
        d.deserialize_seq(Ids)
    }

    /// One ID.
    struct Id(u128);

    impl<'de> de::Deserialize<'de> for Id {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
            struct One;
            impl de::Visitor<'_> for One {
                type Value = Id;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an ID (a number or a decimal string)")
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                    Ok(Id(u128::from(v)))
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                    v.parse().map(Id).map_err(E::custom)
                }
            }
            d.deserialize_any(One)
        }
    }
}

/// One generator ID as a poll of `idmint lease list` saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Holding {
    /// The generator ID.
    pub(crate) generator: u64,
    /// The server holding it (`None`: nobody, or not a server of this run).
    pub(crate) server: Option<String>,
    /// What identifies the claim: its etcd lease, or on the embedded store the holding PID
    /// (a process holds its claims until it exits). The same value at two polls means one
    /// claim held all through.
    pub(crate) claim: Option<String>,
    /// The stored mark.
    pub(crate) mark_ms: Option<u64>,
}

/// A history being written: shared by the clients and the nemesis of one run.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    out: Arc<Mutex<BufWriter<File>>>,
    start: Instant,
}

impl Recorder {
    /// A new history file at `path`; times count from now.
    pub(crate) fn create(path: &Path, start: Instant) -> Result<Recorder, ChaosError> {
        let file =
            File::create(path).map_err(ChaosError::io(format!("create {}", path.display())))?;
        Ok(Recorder { out: Arc::new(Mutex::new(BufWriter::with_capacity(1 << 20, file))), start })
    }

    /// µs since the run started.
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Appends events (one lock for all of them).
    pub(crate) fn record(&self, events: &[Event]) -> Result<(), ChaosError> {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for event in events {
            serde_json::to_writer(&mut *out, event)
                .map_err(|e| ChaosError::io("write a history")(e.into()))?;
            out.write_all(b"\n").map_err(ChaosError::io("write a history"))?;
        }
        Ok(())
    }

    /// Flushes what was written.
    pub(crate) fn flush(&self) -> Result<(), ChaosError> {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        out.flush().map_err(ChaosError::io("flush a history"))
    }
}

/// Reads every event of a history file, in order.
pub(crate) fn read(path: &Path, mut each: impl FnMut(Event)) -> Result<(), ChaosError> {
    let file = File::open(path).map_err(ChaosError::io(format!("open {}", path.display())))?;
    for (index, line) in BufReader::with_capacity(1 << 20, file).lines().enumerate() {
        let line = line.map_err(ChaosError::io(format!("read {}", path.display())))?;
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(&line).map_err(|e| ChaosError::History {
            path: path.display().to_string(),
            line: index + 1,
            reason: e.to_string(),
        })?;
        each(event);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_a_file() {
        let dir = tempfile_dir();
        let path = dir.join("h.jsonl");
        let recorder = Recorder::create(&path, Instant::now()).expect("create");
        let events = vec![
            Event::Invoke { client: "c".into(), server: "s".into(), t: 1, count: 2, began: None },
            Event::Ok { client: "c".into(), t: 2, ids: vec![5, 6, u128::MAX] },
            Event::Info { client: "c".into(), t: 3, error: "reset".into() },
            Event::Claim { server: "s".into(), generator: 0 },
            Event::Mark { generator: 0, mark_ms: 9 },
            Event::Layout { name: "sequence".into() },
            Event::Holders {
                t: 4,
                end: 5,
                store: 1,
                held: vec![Holding {
                    generator: 3,
                    server: Some("s".into()),
                    claim: Some("7f".into()),
                    mark_ms: Some(9),
                }],
            },
        ];
        recorder.record(&events).expect("record");
        recorder.flush().expect("flush");
        let mut back = Vec::new();
        read(&path, |e| back.push(e)).expect("read");
        assert_eq!(back, events);
        std::fs::remove_dir_all(dir).expect("clean");
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("idmint-chaos-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }
}
