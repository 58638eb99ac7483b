//! The identity and journal of a local data directory: who it belongs to, and the last value
//! and generation written to each of its files, so that a copied, restored, lost or rolled-back
//! file is refused instead of trusted.
//!
//! Every data directory of the file backends (the coordinator's directory and the store's
//! `store.d`) holds an `identity.json`:
//!
//! | field | meaning |
//! | --- | --- |
//! | `instance` | a random 128-bit ID, made when the directory was first used (or adopted) |
//! | `host` | the host name then |
//! | `device`, `inode`, `born_ns` | the directory's own device, inode and birth time: a copy (`cp -a`, a restore from a backup) has others (a restore may reuse a freed inode number, never the birth time, which no program can set); `mv` on one file system keeps them |
//! | `file_inode` | the inode of `identity.json` itself, written into the file before it is renamed into place: a restored older copy of this file has another |
//! | `generation` | incremented by every write to the directory |
//! | `floor_ms` | set when a directory is adopted: every claim starts above it |
//! | `entries` | for each value file (`marks/<ns>/<id>`, `segments/<ns>`, `counters/<name>`): its last value, the generation of that write and the file's inode |
//!
//! Each value file carries the generation of its own write too, so each value is stored twice.
//! A write takes the journal's `flock`, takes the next generation, replaces the value file,
//! then replaces `identity.json`. A crash between the two leaves a value file *ahead* of the
//! journal (a higher generation, a value not lower): that is harmless and repaired on the next
//! open. Everything else that disagrees is refused: a value file missing, below the journal,
//! with an older generation, or replaced by another file with the same generation; files with
//! no journal; a journal that is not the file idmint wrote; a directory that moved to another
//! inode or device.

use std::{
    collections::BTreeMap,
    fs::{self, File, OpenOptions},
    io::{Read, Write},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{
    Error, Lineage,
    fsio::{fsync_dir, io_error},
};

/// The journal's file name in a data directory.
pub(crate) const IDENTITY_FILE: &str = "identity.json";
/// The lock taken for every write (and for checks, so that they see whole writes).
const LOCK_FILE: &str = "journal.lock";
/// The version of `identity.json`'s format.
const FORMAT: u32 = 1;

/// The content of `identity.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Identity {
    pub(crate) format: u32,
    pub(crate) instance: String,
    pub(crate) host: String,
    pub(crate) device: u64,
    pub(crate) inode: u64,
    /// The directory's birth time (ns since the Unix epoch), where the file system has one.
    #[serde(default)]
    pub(crate) born_ns: Option<u64>,
    pub(crate) file_inode: u64,
    pub(crate) generation: u64,
    #[serde(default)]
    pub(crate) floor_ms: u64,
    #[serde(default)]
    pub(crate) entries: BTreeMap<String, Entry>,
    /// The shared store this directory claims on (a server's `fleet.d`), once it claimed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) lineage: Option<Lineage>,
}

/// What the journal remembers of one value file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// The last value written; `None` for a claim whose first mark is not written yet.
    pub(crate) value: Option<u64>,
    /// The generation of that write.
    pub(crate) generation: u64,
    /// The value file's inode after that write (`None` with no value).
    pub(crate) inode: Option<u64>,
}

/// What a value file holds, as its owner read it.
#[derive(Debug, Clone)]
pub(crate) enum Found {
    /// No such file.
    Missing,
    /// A value written by idmint.
    Value {
        /// The value.
        value: u64,
        /// The generation stored in the file.
        generation: u64,
        /// The file's inode.
        inode: u64,
    },
    /// A claim's lock file that names a holder, and no mark file: a claim was made here.
    ClaimOnly,
    /// A file that cannot be read as idmint wrote it.
    Corrupt(Error),
}

/// The files a journal covers, read by their owner (the coordinator or the store).
pub(crate) trait Ledger {
    /// What the files are, for messages (`mark`, `segment or counter value`).
    fn what(&self) -> &'static str;
    /// The keys of the value files (and claims) present in `dir`.
    fn keys(&self, dir: &Path) -> Result<Vec<String>, Error>;
    /// Reads one of them.
    fn read(&self, dir: &Path, key: &str) -> Found;
}

/// How to treat a directory that is not what idmint last wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Adopt {
    /// The wall clock now (Unix ms); every claim of the adopted directory starts above
    /// `now_ms + margin_ms` or its mark, whichever is greater.
    pub now_ms: u64,
    /// The safety margin added to the clock, in ms. It must cover how far the clock may be
    /// behind the time of the last ID the original directory's holders issued.
    pub margin_ms: u64,
}

/// Segment and counter values jump by these when a directory is adopted: a copy may have
/// handed out the values after the ones it holds.
pub(crate) const ADOPT_SEGMENT_MARGIN: u64 = 1_000_000_000_000;
/// See [`ADOPT_SEGMENT_MARGIN`].
pub(crate) const ADOPT_COUNTER_MARGIN: u64 = 1_000;

/// A data directory's journal.
#[derive(Debug, Clone)]
pub(crate) struct Journal {
    dir: PathBuf,
}

/// One thing that is not as idmint left it.
pub(crate) type Problem = String;

/// The result of checking a directory without changing it.
#[derive(Debug, Clone)]
pub(crate) struct Inspection {
    /// The identity, when there is a readable one.
    pub(crate) identity: Option<Identity>,
    /// Whether an `identity.json` exists, readable or not: an empty or unreadable journal is
    /// not a fresh directory.
    journal_present: bool,
    /// The directory's device, inode and birth time now.
    pub(crate) device_inode: DirId,
    /// Every key found in the journal or on disk, with its entry and what is on disk.
    pub(crate) files: Vec<(String, Option<Entry>, Found)>,
    /// What is wrong; empty when the directory is what idmint last wrote.
    pub(crate) problems: Vec<Problem>,
    /// Value files ahead of the journal (a crash between the two writes), to record.
    repairs: Vec<(String, Entry)>,
}

impl Journal {
    /// Opens the journal of `dir`, checking every file of `ledger` against it, on the verdict
    /// `idmint doctor` reports ([`Inspection::verdict`]): a fresh directory (no journal file
    /// at all, no value files) gets a new identity; anything that is not what idmint last wrote
    /// is [`Error::Untrusted`], unless `adopt` is given, in which case the directory is given a
    /// new identity recording its files as they are, and `on_adopt` raises its values above the
    /// highest each file or the old journal shows. Repairs value files ahead of the journal.
    pub(crate) fn open(
        dir: &Path,
        ledger: &dyn Ledger,
        adopt: Option<Adopt>,
        on_adopt: impl FnOnce(&Path, &mut Identity, &Highest, Adopt) -> Result<(), Error>,
    ) -> Result<Self, Error> {
        let journal = Journal { dir: dir.to_path_buf() };
        journal.locked(|| {
            let inspection = inspect(dir, ledger)?;
            match (inspection.verdict(), adopt) {
                (Verdict::Fresh, _) => {
                    let mut identity = new_identity(inspection.device_inode, 0)?;
                    journal.write(&mut identity)
                }
                (Verdict::Trusted, _) => journal.repair(inspection),
                (Verdict::Untrusted, Some(adopt)) => {
                    let (mut identity, highest) = adopted(&inspection, adopt)?;
                    on_adopt(dir, &mut identity, &highest, adopt)?;
                    journal.write(&mut identity)
                }
                (Verdict::Untrusted, None) => Err(Error::Untrusted {
                    dir: dir.display().to_string(),
                    problems: inspection.problems,
                }),
            }
        })?;
        Ok(journal)
    }

    /// Records the value files found ahead of the journal.
    fn repair(&self, inspection: Inspection) -> Result<(), Error> {
        if inspection.repairs.is_empty() {
            return Ok(());
        }
        let mut identity = inspection.identity.expect("repairs need an identity");
        for (key, entry) in inspection.repairs {
            identity.generation = identity.generation.max(entry.generation);
            identity.entries.insert(key, entry);
        }
        self.write(&mut identity)
    }

    /// Runs `work` under the journal's lock. Blocking.
    pub(crate) fn locked<T>(&self, work: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
        let path = self.dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error("open", &path))?;
        lock.lock().map_err(io_error("lock", &path))?;
        let result = work();
        drop(lock);
        result
    }

    /// The journal as stored, checked to be the file idmint wrote (call under the lock).
    pub(crate) fn load(&self) -> Result<Identity, Error> {
        match read_identity(&self.dir)? {
            Some(identity) => {
                let mut problems = Vec::new();
                check_identity(&self.dir, &identity, dir_id(&self.dir)?, &mut problems)?;
                if problems.is_empty() {
                    Ok(identity)
                } else {
                    Err(Error::Untrusted { dir: self.dir.display().to_string(), problems })
                }
            }
            None => Err(Error::Untrusted {
                dir: self.dir.display().to_string(),
                problems: vec![format!("{IDENTITY_FILE} is missing")],
            }),
        }
    }

    /// Checks what `key`'s file holds against the journal (call under the lock).
    pub(crate) fn check(
        &self,
        identity: &Identity,
        key: &str,
        what: &str,
        found: &Found,
    ) -> Result<(), Error> {
        if let Found::Corrupt(e) = found {
            return Err(e.clone());
        }
        let mut problems = Vec::new();
        check_entry(key, what, identity.entries.get(key), found, &mut problems, &mut Vec::new());
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Untrusted { dir: self.dir.display().to_string(), problems })
        }
    }

    /// Writes a value file through `write_file(generation)`, which returns the file's path,
    /// then records `value` for `key` (call under the lock, with `identity` from
    /// [`load`](Self::load)).
    pub(crate) fn record(
        &self,
        identity: &mut Identity,
        key: &str,
        value: Option<u64>,
        write_file: impl FnOnce(u64) -> Result<Option<PathBuf>, Error>,
    ) -> Result<(), Error> {
        note(identity, key, value, write_file)?;
        self.write(identity)
    }

    /// Loads the journal, lets `change` edit it, and writes it back, under the lock.
    /// Blocking.
    pub(crate) fn update<T>(
        &self,
        change: impl FnOnce(&mut Identity) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.locked(|| {
            let mut identity = self.load()?;
            let answer = change(&mut identity)?;
            self.write(&mut identity)?;
            Ok(answer)
        })
    }

    /// Replaces `identity.json` atomically and durably, with its own inode inside.
    fn write(&self, identity: &mut Identity) -> Result<(), Error> {
        let path = self.dir.join(IDENTITY_FILE);
        let tmp = self.dir.join(format!("{IDENTITY_FILE}.tmp"));
        let mut file = File::create(&tmp).map_err(io_error("create", &tmp))?;
        identity.file_inode = file.metadata().map_err(io_error("stat", &tmp))?.ino();
        let text = serde_json::to_vec_pretty(identity).map_err(|e| Error::Corrupt {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        file.write_all(&text).map_err(io_error("write", &tmp))?;
        file.sync_all().map_err(io_error("fsync", &tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io_error("rename onto", &path))?;
        fsync_dir(&self.dir)
    }
}

/// What `idmint doctor` shows of a data directory: its identity, every file the journal
/// covers, and what is not as idmint last wrote it. Made by [`FileCoordinator::inspect`]
/// and [`FileStore::inspect`] without changing anything.
///
/// [`FileCoordinator::inspect`]: crate::FileCoordinator::inspect
/// [`FileStore::inspect`]: crate::FileStore::inspect
///
/// # Example
///
/// ```
/// use idmint_coord::FileCoordinator;
///
/// let dir = std::env::temp_dir().join(format!("idmint-report-doc-{}", std::process::id()));
/// FileCoordinator::open(&dir)?;
/// let report = FileCoordinator::inspect(&dir)?;
/// assert!(report.problems.is_empty());
/// assert_eq!(report.instance.as_ref().map(String::len), Some(32));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idmint_coord::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DataDirReport {
    /// The directory.
    pub dir: String,
    /// Its random instance ID, if it has a readable identity.
    pub instance: Option<String>,
    /// The host it was made (or adopted) on.
    pub host: Option<String>,
    /// The generation of its last write.
    pub generation: Option<u64>,
    /// The floor of an adopted directory (Unix ms), 0 if never adopted.
    pub floor_ms: u64,
    /// Its device and inode now, and as recorded.
    pub device_inode: (u64, u64),
    /// As recorded in the identity.
    pub recorded_device_inode: Option<(u64, u64)>,
    /// One line per file: its key, the value the journal recorded and what is on disk.
    pub files: Vec<FileReport>,
    /// What is not as idmint last wrote it; empty when the directory can be trusted.
    pub problems: Vec<String>,
}

/// One file of a [`DataDirReport`].
///
/// # Example
///
/// ```
/// use idmint_coord::FileReport;
///
/// let file = FileReport { key: "marks/default/0".into(), recorded: Some(5), on_disk: "5 (generation 2)".into() };
/// assert_eq!(file.recorded, Some(5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FileReport {
    /// `marks/<namespace>/<id>`, `segments/<namespace>` or `counters/<name>`.
    pub key: String,
    /// The value the journal recorded, if any.
    pub recorded: Option<u64>,
    /// What the file holds.
    pub on_disk: String,
}

/// Builds the report of `dir` for `ledger`, changing nothing.
pub(crate) fn report(dir: &Path, ledger: &dyn Ledger) -> Result<DataDirReport, Error> {
    let inspection = inspect(dir, ledger)?;
    let identity = inspection.identity.as_ref();
    Ok(DataDirReport {
        dir: dir.display().to_string(),
        instance: identity.map(|i| i.instance.clone()),
        host: identity.map(|i| i.host.clone()),
        generation: identity.map(|i| i.generation),
        floor_ms: identity.map_or(0, |i| i.floor_ms),
        device_inode: (inspection.device_inode.device, inspection.device_inode.inode),
        recorded_device_inode: identity.map(|i| (i.device, i.inode)),
        files: inspection
            .files
            .iter()
            .map(|(key, entry, found)| FileReport {
                key: key.clone(),
                recorded: entry.and_then(|e| e.value),
                on_disk: match found {
                    Found::Missing => "no file".to_owned(),
                    Found::ClaimOnly => "a claim's lock, no value".to_owned(),
                    Found::Value { value, generation, .. } => {
                        format!("{value} (generation {generation})")
                    }
                    Found::Corrupt(e) => format!("unreadable: {e}"),
                },
            })
            .collect(),
        problems: inspection.problems,
    })
}

/// Writes a value file through `write_file(generation)` at the next generation and notes it
/// in `identity` (its value, generation and the file's inode), without writing the journal:
/// the step [`Journal::record`] and an adoption's raises share.
pub(crate) fn note(
    identity: &mut Identity,
    key: &str,
    value: Option<u64>,
    write_file: impl FnOnce(u64) -> Result<Option<PathBuf>, Error>,
) -> Result<(), Error> {
    let generation = identity.generation + 1;
    let inode = match write_file(generation)? {
        Some(path) => Some(fs::metadata(&path).map_err(io_error("stat", &path))?.ino()),
        None => None,
    };
    identity.generation = generation;
    identity.entries.insert(key.to_owned(), Entry { value, generation, inode });
    Ok(())
}

/// Checks `dir` against its journal without changing anything.
pub(crate) fn inspect(dir: &Path, ledger: &dyn Ledger) -> Result<Inspection, Error> {
    let device_inode = dir_id(dir)?;
    let mut problems = Vec::new();
    let mut repairs = Vec::new();
    let journal_present = dir.join(IDENTITY_FILE).exists();
    // An unreadable journal is a problem, never a fresh start: the files are still listed,
    // so that the report shows what the journal no longer vouches for.
    let identity = read_identity(dir).unwrap_or_else(|e| {
        problems.push(format!(
            "{IDENTITY_FILE} cannot be read as the journal idmint writes ({e}): it was emptied, truncated or edited"
        ));
        None
    });
    let mut keys: Vec<String> = ledger.keys(dir)?;
    if let Some(identity) = &identity {
        check_identity(dir, identity, device_inode, &mut problems)?;
        keys.extend(identity.entries.keys().cloned());
    }
    keys.sort();
    keys.dedup();
    let mut files = Vec::new();
    for key in keys {
        let found = ledger.read(dir, &key);
        let entry = identity.as_ref().and_then(|i| i.entries.get(&key)).copied();
        if identity.is_some() {
            check_entry(&key, ledger.what(), entry.as_ref(), &found, &mut problems, &mut repairs);
        } else if let Found::Corrupt(e) = &found {
            problems.push(format!("{key}: {e}"));
        }
        files.push((key, entry, found));
    }
    if identity.is_none() && !journal_present && !files.is_empty() {
        problems.push(format!(
            "{} holds {} {} file(s) but no {IDENTITY_FILE}: the journal was lost, or the directory was written by an older idmint",
            dir.display(),
            files.len(),
            ledger.what()
        ));
    }
    Ok(Inspection { identity, journal_present, device_inode, files, problems, repairs })
}

/// What a data directory is, as `idmint serve` and `idmint doctor` both judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Never used: no journal file at all and no value files.
    Fresh,
    /// What idmint last wrote (perhaps with value files ahead of the journal, to repair).
    Trusted,
    /// Anything else: refused until adopted.
    Untrusted,
}

impl Inspection {
    /// The one verdict on a directory: `serve` opens on it and `doctor` reports it.
    pub(crate) fn verdict(&self) -> Verdict {
        if !self.problems.is_empty() {
            Verdict::Untrusted
        } else if !self.journal_present && self.files.is_empty() {
            Verdict::Fresh
        } else {
            Verdict::Trusted
        }
    }
}

/// The highest value known for each key of an adopted directory: its file's or the old
/// journal's, whichever is greater (a lowered, rolled-back or deleted file, or a lost
/// journal, each leave the other witness).
pub(crate) type Highest = BTreeMap<String, u64>;

/// The identity of an adopted directory: new, recording every value file exactly as it is
/// on disk (so that the next open trusts it), with the highest value known of each key.
fn adopted(inspection: &Inspection, adopt: Adopt) -> Result<(Identity, Highest), Error> {
    let old = inspection.identity.as_ref();
    let floor_ms = adopt.now_ms.saturating_add(adopt.margin_ms);
    let floor_ms = old.map_or(floor_ms, |old| old.floor_ms.max(floor_ms));
    let mut identity = new_identity(inspection.device_inode, floor_ms)?;
    identity.generation = old.map_or(0, |i| i.generation) + 1;
    identity.lineage = old.and_then(|i| i.lineage.clone());
    let mut highest = Highest::new();
    for (key, entry, found) in &inspection.files {
        let recorded = entry.and_then(|e| e.value);
        match found {
            Found::Value { value, generation, inode } => {
                identity.generation = identity.generation.max(generation + 1);
                identity.entries.insert(
                    key.clone(),
                    Entry { value: Some(*value), generation: *generation, inode: Some(*inode) },
                );
                highest.insert(key.clone(), (*value).max(recorded.unwrap_or(0)));
            }
            Found::ClaimOnly => {
                identity.entries.insert(
                    key.clone(),
                    Entry { value: None, generation: identity.generation, inode: None },
                );
                if let Some(recorded) = recorded {
                    highest.insert(key.clone(), recorded);
                }
            }
            Found::Missing | Found::Corrupt(_) => {
                // No usable file: only the old journal knows its value. The owner writes
                // the key anew above it (a corrupt file is replaced).
                if let Some(recorded) = recorded {
                    highest.insert(key.clone(), recorded);
                }
                if let Found::Corrupt(_) = found {
                    highest.entry(key.clone()).or_insert(0);
                }
            }
        }
    }
    Ok((identity, highest))
}

/// Compares one file with its journal entry.
fn check_entry(
    key: &str,
    what: &str,
    entry: Option<&Entry>,
    found: &Found,
    problems: &mut Vec<Problem>,
    repairs: &mut Vec<(String, Entry)>,
) {
    match (entry, found) {
        (_, Found::Corrupt(e)) => problems.push(format!("{key}: {e}")),
        (None, Found::Missing) => {}
        (None, Found::ClaimOnly) => problems.push(format!(
            "{key}: a claim was made (its lock names a holder) but the journal has no record of it and there is no {what}: the {what} was lost"
        )),
        (None, Found::Value { value, generation, inode }) => repairs.push((
            key.to_owned(),
            Entry { value: Some(*value), generation: *generation, inode: Some(*inode) },
        )),
        (Some(entry), Found::Missing | Found::ClaimOnly) => {
            if let Some(value) = entry.value {
                problems.push(format!(
                    "{key}: the {what} file is missing; the journal says {value} was written (generation {})",
                    entry.generation
                ));
            }
        }
        (Some(entry), Found::Value { value, generation, inode }) => {
            let recorded = entry.value.unwrap_or(0);
            if *generation < entry.generation {
                problems.push(format!(
                    "{key}: the {what} file holds generation {generation} (value {value}) but the journal recorded generation {} (value {recorded}): the file was rolled back",
                    entry.generation
                ));
            } else if *value < recorded {
                problems.push(format!(
                    "{key}: the {what} file holds {value}, below the {recorded} recorded in the journal: it went down"
                ));
            } else if *generation == entry.generation
                && (entry.value != Some(*value) || entry.inode != Some(*inode))
            {
                problems.push(format!(
                    "{key}: the {what} file was replaced or edited since idmint wrote it (generation {generation}, value {value}, inode {inode}; the journal recorded value {recorded}, inode {})",
                    entry.inode.map_or("none".to_owned(), |i| i.to_string())
                ));
            } else if *generation > entry.generation {
                // Written, then a crash before the journal: ahead, harmless.
                repairs.push((
                    key.to_owned(),
                    Entry { value: Some(*value), generation: *generation, inode: Some(*inode) },
                ));
            }
        }
    }
}

/// Compares the identity with the directory it is in.
fn check_identity(
    dir: &Path,
    identity: &Identity,
    now: DirId,
    problems: &mut Vec<Problem>,
) -> Result<(), Error> {
    let (device, inode) = (now.device, now.inode);
    if identity.format != FORMAT {
        problems.push(format!(
            "{IDENTITY_FILE} has format {}, this idmint writes {FORMAT}",
            identity.format
        ));
    }
    let reborn = matches!((identity.born_ns, now.born_ns), (Some(a), Some(b)) if a != b);
    if (identity.device, identity.inode) != (device, inode) || reborn {
        problems.push(format!(
            "{} was copied or restored: it was made as device {} inode {} (born {}) on host `{}` (instance {}), but it is now device {device} inode {inode} (born {}) on host `{}`; if the original may still be in use, two servers would issue the same ids",
            dir.display(),
            identity.device,
            identity.inode,
            identity.born_ns.map_or("unknown".to_owned(), |b| b.to_string()),
            identity.host,
            identity.instance,
            now.born_ns.map_or("unknown".to_owned(), |b| b.to_string()),
            hostname()
        ));
    }
    let path = dir.join(IDENTITY_FILE);
    let file_inode = fs::metadata(&path).map_err(io_error("stat", &path))?.ino();
    if file_inode != identity.file_inode {
        problems.push(format!(
            "{IDENTITY_FILE} is not the file idmint wrote (inode {file_inode}, it recorded {}): it was restored or copied from elsewhere",
            identity.file_inode
        ));
    }
    Ok(())
}

/// Reads `identity.json`, `None` if there is none.
fn read_identity(dir: &Path) -> Result<Option<Identity>, Error> {
    let path = dir.join(IDENTITY_FILE);
    let text = match fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("read", &path)(e)),
    };
    serde_json::from_slice(&text)
        .map(Some)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })
}

/// A new identity for the directory at `device_inode`.
fn new_identity(at: DirId, floor_ms: u64) -> Result<Identity, Error> {
    Ok(Identity {
        format: FORMAT,
        instance: random_instance()?,
        host: hostname(),
        device: at.device,
        inode: at.inode,
        born_ns: at.born_ns,
        file_inode: 0,
        generation: 0,
        floor_ms,
        entries: BTreeMap::new(),
        lineage: None,
    })
}

/// Where a directory is: its device, inode and birth time (if the file system keeps one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirId {
    device: u64,
    inode: u64,
    born_ns: Option<u64>,
}

/// The device, inode and birth time of a directory.
pub(crate) fn dir_id(dir: &Path) -> Result<DirId, Error> {
    let meta = fs::metadata(dir).map_err(io_error("stat", dir))?;
    let born_ns = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok());
    Ok(DirId { device: meta.dev(), inode: meta.ino(), born_ns })
}

/// 128 random bits, as hex, from the operating system.
fn random_instance() -> Result<String, Error> {
    let path = Path::new("/dev/urandom");
    let mut bytes = [0u8; 16];
    File::open(path).and_then(|mut f| f.read_exact(&mut bytes)).map_err(io_error("read", path))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// This machine's host name, as the kernel reports it.
pub(crate) fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}
