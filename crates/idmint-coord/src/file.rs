//! The embedded default backend: claims are `flock`s on files in a data directory, and marks
//! are JSON files replaced atomically (write, fsync, rename, fsync the directory).

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

use crate::{Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds};

/// Claims and marks in a local directory, for one machine.
///
/// For each namespace there is a folder, and for each generator ID of it two files:
///
/// - `<id>.lock`: held with an exclusive `flock` while the generator ID is claimed. The lock
///   dies with the process, `kill -9` included, so a crash never leaves a stale claim. The
///   file says who holds it, for the error a second claimant gets.
/// - `<id>.mark`: the high-water mark, as JSON with the layout's fingerprint. It is replaced
///   atomically: a temporary file is written and fsynced, renamed over the old one, and the
///   directory is fsynced, so after a crash the file holds either the old mark or the new one.
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
    next_token: AtomicU64,
    held: Mutex<HashMap<u64, Arc<Held>>>,
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
    _state: watch::Sender<ClaimState>,
}

/// The content of a mark file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkFile {
    mark_ms: u64,
    layout: String,
}

impl FileCoordinator {
    /// A coordinator on `dir`, created if it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be created.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("cannot create data directory {}", dir.display()), e))?;
        Ok(FileCoordinator { dir, next_token: AtomicU64::new(1), held: Mutex::default() })
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

/// Tries the candidates in order and locks the first free one. Runs on a blocking thread.
fn lock_first_free(dir: &Path, request: &ClaimRequest) -> Result<Locked, Error> {
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
        // Say who holds it, for the next claimant's error message.
        file.set_len(0)
            .and_then(|()| (&file).write_all(request.holder.as_bytes()))
            .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
        let mark_ms = read_mark(&ns_dir, generator_id, request)?;
        return Ok(Locked { generator_id, lock: file, mark_ms });
    }
    Err(match (request.generator_ids, last_holder) {
        (GeneratorIds::Fixed(generator_id), Some(holder)) => Error::Conflict {
            namespace: request.namespace.clone(),
            generator_id,
            holder: if holder.is_empty() { "another process".into() } else { holder },
        },
        (ids, _) => Error::PoolExhausted {
            namespace: request.namespace.clone(),
            size: ids.candidates().count() as u64,
        },
    })
}

/// Reads a generator ID's mark, checking that it was written for the same layout.
fn read_mark(
    ns_dir: &Path,
    generator_id: u64,
    request: &ClaimRequest,
) -> Result<Option<u64>, Error> {
    let path = mark_path(ns_dir, generator_id);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    let mark: MarkFile = serde_json::from_str(&text)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })?;
    if mark.layout != request.layout_fingerprint {
        return Err(Error::LayoutChanged {
            namespace: request.namespace.clone(),
            stored: mark.layout,
            expected: request.layout_fingerprint.clone(),
        });
    }
    Ok(Some(mark.mark_ms))
}

/// Replaces a mark file atomically and durably. Runs on a blocking thread.
fn write_mark(ns_dir: &Path, generator_id: u64, mark: &MarkFile) -> Result<(), Error> {
    let tmp = ns_dir.join(format!("{generator_id}.mark.tmp"));
    replace_json(ns_dir, &mark_path(ns_dir, generator_id), &tmp, mark)
}

/// The error of a failed file operation: "cannot `what` `path`: …".
pub(crate) fn io_error(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let context = format!("cannot {what} {}", path.display());
    move |e| Error::io(context, e)
}

/// Replaces `path`, a file in `dir`, with `value` as JSON, atomically and durably: writes and
/// fsyncs `tmp` (in `dir` too), renames it over `path` and fsyncs `dir`, so that after a crash
/// `path` holds either the old value or the new one. Blocking.
pub(crate) fn replace_json(
    dir: &Path,
    path: &Path,
    tmp: &Path,
    value: &impl Serialize,
) -> Result<(), Error> {
    let text = serde_json::to_vec(value)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })?;
    let mut file = File::create(tmp).map_err(io_error("create", tmp))?;
    file.write_all(&text).map_err(io_error("write", tmp))?;
    file.sync_all().map_err(io_error("fsync", tmp))?;
    drop(file);
    fs::rename(tmp, path).map_err(io_error("rename onto", path))?;
    fsync_dir(dir)
}

/// Fsyncs a directory, making the entries created, renamed or removed in it durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("fsync directory", dir))
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work).await.map_err(|e| Error::Unavailable {
        backend: "file",
        reason: format!("blocking task failed: {e}"),
    })?
}

#[async_trait::async_trait]
impl Coordinator for FileCoordinator {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let dir = self.dir.clone();
        let owned = request.clone();
        let locked = blocking(move || lock_first_free(&dir, &owned)).await?;
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (state, receiver) = watch::channel(ClaimState::Held { until: None });
        let held = Held {
            namespace: request.namespace.clone(),
            generator_id: locked.generator_id,
            fingerprint: request.layout_fingerprint.clone(),
            _lock: locked.lock,
            mark: tokio::sync::Mutex::new(locked.mark_ms),
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
        let ns_dir = namespace_dir(&self.dir, &held.namespace);
        let generator_id = held.generator_id;
        let mark = MarkFile { mark_ms, layout: held.fingerprint.clone() };
        blocking(move || write_mark(&ns_dir, generator_id, &mark)).await?;
        *stored = Some(mark_ms);
        Ok(())
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        // Dropping the locked file releases the `flock`; the mark file stays.
        self.held().remove(&claim.token());
        Ok(())
    }
}
