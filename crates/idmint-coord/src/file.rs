//! The embedded default backend: claims are `flock`s on files in a data directory, and marks
//! are JSON files replaced atomically (write, fsync, rename, fsync the directory), each write
//! recorded in the directory's journal so that a lost, copied or rolled-back mark is refused.

use std::{
    collections::HashMap,
    fs::{self, File, OpenOptions, TryLockError},
    io::{Read, Write},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{
    Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds,
    fsio::{blocking, io_error, replace_json},
    journal::{Adopt, DataDirReport, Found, Highest, Identity, Journal, Ledger, hostname},
};

/// Claims and marks in a local directory, for one machine.
///
/// For each namespace there is a folder, and for each generator ID of it two files:
///
/// - `<id>.lock`: held with an exclusive `flock` while the generator ID is claimed. The lock
///   dies with the process, `kill -9` included, so a crash never leaves a stale claim. The
///   file says who holds it, for the error a second claimant gets.
/// - `<id>.mark`: the high-water mark, as JSON with the layout's fingerprint and the
///   generation of its write. It is replaced atomically: a temporary file is written and
///   fsynced, renamed over the old one, and the directory is fsynced, so after a crash the file
///   holds either the old mark or the new one.
///
/// The directory's `identity.json` records who the directory belongs to (a random instance
/// ID, its device and inode, the host) and the last mark and generation written for every
/// claim. Opening a directory that was copied or restored, or whose marks were lost or rolled
/// back, is [`Error::Untrusted`]: nothing is claimed from it until an operator confirms with
/// [`FileCoordinator::open_adopting`]. Moving the directory with `mv` on one file system keeps
/// it trusted.
///
/// Two processes (or two coordinators in one process) on the same directory never hold the
/// same claim. Keep the directory on a local file system: `flock` over NFS is not reliable.
///
/// # Example
///
/// ```
/// use idmint_coord::{ClaimRequest, Coordinator, Error, FileCoordinator, GeneratorIds};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("idmint-doc-{}", std::process::id()));
/// let first = FileCoordinator::open(&dir)?;
/// let second = FileCoordinator::open(&dir)?;
/// let request = ClaimRequest::new("default", GeneratorIds::Fixed(0), "snowflake");
/// let claim = first.claim(&request).await?;
/// first.store_mark(&claim, 1_700_000_000_000).await?;
/// assert!(matches!(second.claim(&request).await, Err(Error::Conflict { .. })));
/// first.release(&claim).await?;
/// assert_eq!(second.claim(&request).await?.mark_ms(), Some(1_700_000_000_000));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct FileCoordinator {
    dir: PathBuf,
    journal: Journal,
    /// Who this process is, in lock files: pid, host and the directory's instance.
    holder_suffix: String,
    next_token: AtomicU64,
    held: Mutex<HashMap<u64, Arc<Held>>>,
    /// Off only in the no-durable-mark negative control.
    #[cfg(idmint_negative_controls)]
    marks: std::sync::atomic::AtomicBool,
}

/// A claim this coordinator holds.
#[derive(Debug)]
struct Held {
    namespace: String,
    generator_id: u64,
    fingerprint: String,
    /// The locked file; dropping it releases the claim.
    _lock: File,
    /// The stored mark; the async mutex also serialises writes of this claim's mark file.
    mark: tokio::sync::Mutex<Option<u64>>,
    /// The claim's key in the journal.
    key: String,
    _state: watch::Sender<ClaimState>,
}

/// The content of a mark file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkFile {
    mark_ms: u64,
    layout: String,
    /// The journal generation of this write.
    generation: u64,
}

impl FileCoordinator {
    /// A coordinator on `dir`, created if it does not exist, checked against its journal.
    ///
    /// # Errors
    ///
    /// [`Error::Untrusted`] when the directory is not what idmint last wrote (copied,
    /// restored, a mark lost or rolled back); [`Error::Io`] or [`Error::Corrupt`] when it
    /// cannot be created or read.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), None)
    }

    /// Opens `dir` even if it is not what idmint last wrote, after an operator confirmed that
    /// no other copy of it is in use: the directory gets a new identity, and every claim from
    /// it starts above `adopt.now_ms + adopt.margin_ms` or its stored mark, whichever is
    /// greater. The cost: IDs carry times up to the margin ahead of the wall clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{Adopt, ClaimRequest, Coordinator, Error, FileCoordinator, GeneratorIds};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = std::env::temp_dir().join(format!("idmint-adopt-doc-{}", std::process::id()));
    /// let coordinator = FileCoordinator::open(&dir)?;
    /// let request = ClaimRequest::new("default", GeneratorIds::Fixed(0), "snowflake");
    /// let claim = coordinator.claim(&request).await?;
    /// coordinator.store_mark(&claim, 1_000).await?;
    /// coordinator.release(&claim).await?;
    /// std::fs::remove_file(dir.join("default/0.mark")).unwrap();
    /// assert!(matches!(FileCoordinator::open(&dir), Err(Error::Untrusted { .. })));
    ///
    /// let adopt = Adopt { now_ms: 5_000, margin_ms: 60_000 };
    /// let adopted = FileCoordinator::open_adopting(&dir, adopt)?;
    /// assert_eq!(adopted.claim(&request).await?.mark_ms(), Some(65_000));
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Corrupt`] when the directory cannot be read or written.
    pub fn open_adopting(dir: impl AsRef<Path>, adopt: Adopt) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), Some(adopt))
    }

    fn open_with(dir: &Path, adopt: Option<Adopt>) -> Result<Self, Error> {
        let dir = dir.to_path_buf();
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot create data directory {}", dir.display()), e))?;
        let journal = Journal::open(&dir, &Marks, adopt, raise_floor)?;
        let instance = journal.locked(|| journal.load()).map(|i| i.instance)?;
        let holder_suffix = format!("on host {} (data directory {instance})", hostname());
        Ok(FileCoordinator {
            dir,
            journal,
            holder_suffix,
            next_token: AtomicU64::new(1),
            held: Mutex::default(),
            #[cfg(idmint_negative_controls)]
            marks: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control for the
    /// chaos harness. Claims ignore the stored mark (they report none, so a server starts at
    /// its clock) while marks are still written. It exists so that the harness can show it
    /// catches the duplicates a restart with the clock set back then produces. Never enable
    /// the feature in a build that serves.
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_durable_marks(self) -> Self {
        self.marks.store(false, Ordering::Relaxed);
        self
    }

    /// Checks a coordinator's directory against its journal, changing nothing (for
    /// `idmint doctor`). See [`DataDirReport`].
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be read.
    pub fn inspect(dir: impl AsRef<Path>) -> Result<DataDirReport, Error> {
        crate::journal::report(dir.as_ref(), &Marks)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn held(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        // Every update of the map is a single insert or remove, so a poisoned lock is fine.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn live(&self, claim: &Claim) -> Result<Arc<Held>, Error> {
        self.held().get(&claim.token()).cloned().ok_or_else(|| Error::ClaimLost {
            namespace: claim.namespace().to_owned(),
            generator_id: claim.generator_id(),
        })
    }
}

/// What `claim` found on disk for one generator ID it locked.
struct Locked {
    generator_id: u64,
    lock: File,
    mark_ms: Option<u64>,
    key: String,
}

/// A claim's starting mark: its stored mark, raised to the floor of an adopted directory.
fn floor(identity: &Identity, mark_ms: Option<u64>) -> Option<u64> {
    match (mark_ms, identity.floor_ms) {
        (mark, 0) => mark,
        (Some(mark), floor) => Some(mark.max(floor)),
        (None, floor) => Some(floor),
    }
}

fn namespace_dir(dir: &Path, namespace: &str) -> PathBuf {
    dir.join(namespace)
}

fn lock_path(dir: &Path, generator_id: u64) -> PathBuf {
    dir.join(format!("{generator_id}.lock"))
}

fn mark_path(dir: &Path, generator_id: u64) -> PathBuf {
    dir.join(format!("{generator_id}.mark"))
}

/// The files of a coordinator's directory, for its journal: `marks/<namespace>/<id>`.
struct Marks;

impl Ledger for Marks {
    fn what(&self) -> &'static str {
        "mark"
    }

    fn keys(&self, dir: &Path) -> Result<Vec<String>, Error> {
        let mut keys = Vec::new();
        for ns in fs::read_dir(dir).map_err(io_error("list", dir))? {
            let ns = ns.map_err(io_error("list", dir))?;
            let name = ns.file_name().to_string_lossy().into_owned();
            // Namespace folders only (`store.d` and the journal's files are not).
            let is_ns = ns.file_type().is_ok_and(|t| t.is_dir())
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !is_ns {
                continue;
            }
            for file in fs::read_dir(ns.path()).map_err(io_error("list", &ns.path()))? {
                let file = file.map_err(io_error("list", &ns.path()))?.file_name();
                let file = file.to_string_lossy();
                let id = file.strip_suffix(".lock").or_else(|| file.strip_suffix(".mark"));
                if let Some(id) = id.filter(|id| id.parse::<u64>().is_ok()) {
                    keys.push(mark_key(&name, id.parse().unwrap_or_default()));
                }
            }
        }
        Ok(keys)
    }

    fn read(&self, dir: &Path, key: &str) -> Found {
        let Some((namespace, id)) = key
            .strip_prefix("marks/")
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(ns, id)| Some((ns, id.parse::<u64>().ok()?)))
        else {
            return Found::Corrupt(Error::Corrupt {
                path: dir.display().to_string(),
                reason: format!("unknown journal key `{key}`"),
            });
        };
        let ns_dir = namespace_dir(dir, namespace);
        match read_mark_file(&ns_dir, id) {
            Ok(Some((mark, inode))) => {
                Found::Value { value: mark.mark_ms, generation: mark.generation, inode }
            }
            Ok(None) => {
                let holder = fs::read(lock_path(&ns_dir, id)).unwrap_or_default();
                if holder.is_empty() { Found::Missing } else { Found::ClaimOnly }
            }
            Err(e) => Found::Corrupt(e),
        }
    }
}

/// Adoption: every claim of the directory starts above the clock and above the highest mark
/// any file or the old journal shows, plus the margin (a lowered, rolled-back or deleted mark
/// file, or a lost journal, each leave the other witness). A mark file that cannot be read is
/// moved aside (`<id>.mark.unreadable`, kept as evidence) and its claim starts at the floor.
fn raise_floor(
    dir: &Path,
    identity: &mut Identity,
    highest: &Highest,
    adopt: Adopt,
) -> Result<(), Error> {
    let known = highest.values().copied().max().unwrap_or(0);
    identity.floor_ms =
        identity.floor_ms.max(known.max(adopt.now_ms).saturating_add(adopt.margin_ms));
    for key in highest.keys() {
        if identity.entries.contains_key(key) {
            continue;
        }
        // No readable file: forget the key (a claim starts at the floor), keeping a corrupt
        // file out of the way as evidence.
        if let Found::Corrupt(_) = Marks.read(dir, key)
            && let Some((namespace, id)) = key
                .strip_prefix("marks/")
                .and_then(|rest| rest.split_once('/'))
                .and_then(|(ns, id)| Some((ns, id.parse::<u64>().ok()?)))
        {
            let path = mark_path(&namespace_dir(dir, namespace), id);
            let aside = path.with_extension("mark.unreadable");
            fs::rename(&path, &aside).map_err(io_error("rename", &path))?;
        }
        // Known to the new journal as a claim with no mark yet.
        let entry =
            crate::journal::Entry { value: None, generation: identity.generation, inode: None };
        identity.entries.insert(key.clone(), entry);
    }
    Ok(())
}

/// A claim's key in the journal.
fn mark_key(namespace: &str, generator_id: u64) -> String {
    format!("marks/{namespace}/{generator_id}")
}

/// Reads a mark file with its inode; `None` when there is none.
fn read_mark_file(ns_dir: &Path, generator_id: u64) -> Result<Option<(MarkFile, u64)>, Error> {
    use std::os::unix::fs::MetadataExt;

    let path = mark_path(ns_dir, generator_id);
    let mut file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    let inode = file.metadata().map_err(io_error("stat", &path))?.ino();
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io_error("read", &path))?;
    let mark: MarkFile = serde_json::from_str(&text)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })?;
    Ok(Some((mark, inode)))
}

/// Tries the candidates in order and locks the first free one. Runs on a blocking thread.
fn lock_first_free(dir: &Path, journal: &Journal, request: &ClaimRequest) -> Result<Locked, Error> {
    let ns_dir = namespace_dir(dir, &request.namespace);
    fs::create_dir_all(&ns_dir)
        .map_err(|e| Error::io(format!("cannot create {}", ns_dir.display()), e))?;
    let mut last_holder = None;
    for generator_id in request.generator_ids.candidates() {
        let path = lock_path(&ns_dir, generator_id);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                // Best effort: the holder may be rewriting the file right now.
                let _ = file.read_to_string(&mut holder);
                last_holder = Some(holder.trim().to_owned());
                continue;
            }
            Err(TryLockError::Error(e)) => {
                return Err(Error::io(format!("cannot lock {}", path.display()), e));
            }
        }
        // Check the claim against the journal, and record it before the lock names us: a
        // crash in between leaves a recorded claim with an empty lock, which is fine.
        let key = mark_key(&request.namespace, generator_id);
        let mark_ms = journal.locked(|| {
            let mut identity = journal.load()?;
            let found = Marks.read(dir, &key);
            journal.check(&identity, &key, "mark", &found)?;
            let mark_ms = read_mark(&ns_dir, generator_id, request)?;
            if !identity.entries.contains_key(&key) {
                journal.record(&mut identity, &key, None, |_| Ok(None))?;
            }
            Ok(floor(&identity, mark_ms))
        })?;
        // Say who holds it, for the next claimant's error message.
        file.set_len(0)
            .and_then(|()| (&file).write_all(request.holder.as_bytes()))
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
        return Ok(Locked { generator_id, lock: file, mark_ms, key });
    }
    Err(match (request.generator_ids, last_holder) {
        (GeneratorIds::Fixed(generator_id), Some(holder)) => Error::Conflict {
            namespace: request.namespace.clone(),
            generator_id,
            holder: if holder.is_empty() { "another process".into() } else { holder },
        },
        (ids, _) => {
            Error::PoolExhausted { namespace: request.namespace.clone(), size: ids.count() }
        }
    })
}

/// Reads a generator ID's mark, checking that it was written for the same layout.
fn read_mark(
    ns_dir: &Path,
    generator_id: u64,
    request: &ClaimRequest,
) -> Result<Option<u64>, Error> {
    let Some((mark, _)) = read_mark_file(ns_dir, generator_id)? else { return Ok(None) };
    if mark.layout != request.layout_fingerprint {
        return Err(Error::LayoutChanged {
            namespace: request.namespace.clone(),
            stored: mark.layout,
            expected: request.layout_fingerprint.clone(),
        });
    }
    Ok(Some(mark.mark_ms))
}

/// Replaces a mark file atomically and durably, checked against and recorded in the journal.
/// Runs on a blocking thread.
fn write_mark(dir: &Path, journal: &Journal, held: &Held, mark_ms: u64) -> Result<(), Error> {
    let ns_dir = namespace_dir(dir, &held.namespace);
    journal.locked(|| {
        let mut identity = journal.load()?;
        journal.check(&identity, &held.key, "mark", &Marks.read(dir, &held.key))?;
        journal.record(&mut identity, &held.key, Some(mark_ms), |generation| {
            let path = mark_path(&ns_dir, held.generator_id);
            let tmp = ns_dir.join(format!("{}.mark.tmp", held.generator_id));
            let mark = MarkFile { mark_ms, layout: held.fingerprint.clone(), generation };
            replace_json(&ns_dir, &path, &tmp, &mark)?;
            Ok(Some(path))
        })
    })
}

#[async_trait::async_trait]
impl Coordinator for FileCoordinator {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let dir = self.dir.clone();
        let journal = self.journal.clone();
        let owned =
            request.clone().with_holder(format!("{} {}", request.holder, self.holder_suffix));
        #[allow(unused_mut, reason = "changed only by the no-durable-mark control")]
        let mut locked = blocking(move || lock_first_free(&dir, &journal, &owned)).await?;
        #[cfg(idmint_negative_controls)]
        if !self.marks.load(Ordering::Relaxed) {
            locked.mark_ms = None;
        }
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (state, receiver) = watch::channel(ClaimState::Held { until: None });
        let held = Held {
            namespace: request.namespace.clone(),
            generator_id: locked.generator_id,
            fingerprint: request.layout_fingerprint.clone(),
            _lock: locked.lock,
            mark: tokio::sync::Mutex::new(locked.mark_ms),
            key: locked.key,
            _state: state,
        };
        self.held().insert(token, Arc::new(held));
        Ok(Claim::new(&request.namespace, locked.generator_id, locked.mark_ms, token, receiver))
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let held = self.live(claim)?;
        let mut stored = held.mark.lock().await;
        if let Some(stored_ms) = *stored
            && mark_ms < stored_ms
        {
            return Err(Error::MarkRegressed { offered_ms: mark_ms, stored_ms });
        }
        let dir = self.dir.clone();
        let journal = self.journal.clone();
        let writing = Arc::clone(&held);
        blocking(move || write_mark(&dir, &journal, &writing, mark_ms)).await?;
        *stored = Some(mark_ms);
        Ok(())
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        // Dropping the locked file releases the `flock`; the mark file stays.
        self.held().remove(&claim.token());
        Ok(())
    }
}
