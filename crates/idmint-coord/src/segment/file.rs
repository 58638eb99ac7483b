//! [`FileStore`]: segments and counters in a local directory, for users without Postgres. Each
//! value is a small JSON file replaced atomically (write, fsync, rename, fsync the directory,
//! as the file coordinator's marks are), under an exclusive `flock` held only for the update.

use std::{
    fs::{self, OpenOptions},
    ops::Range,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::{
    CounterStore, DataDirReport, Error, MAX_SEGMENT_ID, SegmentStore,
    counter::{check_counter_request, check_take_request, taken_after},
    fsio::{blocking, fsync_dir, io_error, replace_json},
    journal::{
        ADOPT_COUNTER_MARGIN, ADOPT_SEGMENT_MARGIN, Adopt, Found, Highest, Identity, Journal,
        Ledger,
    },
    segment::{check_range_request, counter_after, range_after},
};

/// Segments and counters in a local directory, shared safely by any number of processes on
/// one machine.
///
/// Layout, one pair of files per namespace or counter:
///
/// | file | content |
/// | --- | --- |
/// | `segments/<namespace>.json` | `{"value": N}`: the last ID handed out |
/// | `counters/<name>.json` | `{"value": N}`: the counter's current value |
/// | `…/<name>.lock` | empty; locked with `flock` during an update |
///
/// An update takes the exclusive `flock` on the `.lock` file (waiting for it), reads the value,
/// writes the new one to a temporary file, fsyncs it, renames it over the old file, fsyncs
/// the directory, and only then unlocks and returns. So two processes (or two handles in one
/// process) never read the same value, and after a crash the file holds either the old value
/// or the new one, and a range is returned only once its new value is on disk. The lock is held
/// for one update only, not for the life of the store: several allocator processes can share a
/// namespace, each getting its own ranges (which is how the tests use it). A process killed
/// while holding the lock releases it with its file descriptors.
///
/// Keep the directory on a local file system: `flock` over NFS is not reliable. Every value
/// file carries the generation of its write, and the directory's `identity.json` journal
/// records the last value, generation and inode of each (see `FileCoordinator`): a copied or
/// restored directory, or a value file that was deleted, zeroed or rolled back, is refused
/// ([`Error::Untrusted`]) instead of handing out IDs again, until an operator adopts it
/// ([`FileStore::open_adopting`]: segment values jump by 10^12, counters by 1,000).
///
/// # Example
///
/// ```
/// use idmint_coord::{CounterStore, Error, FileStore, SegmentStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("idmint-filestore-doc-{}", std::process::id()));
/// let store = FileStore::open(&dir)?;
/// assert_eq!(store.next_range("orders", 1_000).await?, 1..1_001);
/// // Another handle (or process) on the same directory continues after it.
/// assert_eq!(FileStore::open(&dir)?.next_range("orders", 10).await?, 1_001..1_011);
/// assert_eq!(store.next("generator", 2).await?, 1);
/// assert_eq!(store.next("generator", 2).await?, 2);
/// assert!(matches!(store.next("generator", 2).await, Err(Error::Exhausted { .. })));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    journal: Journal,
}

/// The content of a value file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValueFile {
    pub(crate) value: u64,
    /// The journal generation of this write.
    pub(crate) generation: u64,
}

/// The two kinds of values, each in its own folder.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Segments,
    Counters,
}

impl Kind {
    fn folder(self) -> &'static str {
        match self {
            Kind::Segments => "segments",
            Kind::Counters => "counters",
        }
    }
}

impl FileStore {
    /// A store on `dir`, created (with its two folders) if it does not exist.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directories cannot be created.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), None)
    }

    /// Opens `dir` even if it is not what idmint last wrote, once an operator confirmed that
    /// no other copy of it is in use: every segment value jumps ahead by 10^12 and every
    /// counter by 1,000, so that what a copy handed out after the values it holds is not
    /// handed out again (the cost: a gap of that size).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] or [`Error::Corrupt`] when the directory cannot be read or written.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{Adopt, Error, FileStore, SegmentStore};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = std::env::temp_dir().join(format!("idmint-adopt-store-{}", std::process::id()));
    /// assert_eq!(FileStore::open(&dir)?.next_range("orders", 10).await?, 1..11);
    /// std::fs::remove_file(dir.join("segments/orders.json")).unwrap();
    /// assert!(matches!(FileStore::open(&dir), Err(Error::Untrusted { .. })));
    /// let adopted = FileStore::open_adopting(&dir, Adopt::default())?;
    /// assert!(adopted.next_range("orders", 10).await?.start > 1_000_000_000_000);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Error>(())
    /// # }).unwrap();
    /// ```
    pub fn open_adopting(dir: impl AsRef<Path>, adopt: Adopt) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), Some(adopt))
    }

    /// Checks a store's directory against its journal, changing nothing (for
    /// `idmint doctor`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be read.
    pub fn inspect(dir: impl AsRef<Path>) -> Result<DataDirReport, Error> {
        crate::journal::report(dir.as_ref(), &Values)
    }

    fn open_with(dir: &Path, adopt: Option<Adopt>) -> Result<Self, Error> {
        let dir = dir.to_path_buf();
        for kind in [Kind::Segments, Kind::Counters] {
            let folder = dir.join(kind.folder());
            if !folder.is_dir() {
                fs::create_dir_all(&folder)
                    .map_err(|e| Error::io(format!("cannot create {}", folder.display()), e))?;
                // Make the new folder's entry durable, so a crash cannot lose it after values
                // in it were handed out.
                fsync_dir(&dir)?;
            }
        }
        let journal = Journal::open(&dir, &Values, adopt, raise_all)?;
        Ok(FileStore { dir, journal })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `bump` on the stored value of `name` under its lock and stores what it returns,
    /// durably. Runs on a blocking thread.
    async fn update<T: Send + 'static>(
        &self,
        kind: Kind,
        name: &str,
        bump: impl FnOnce(u64) -> Result<(T, u64), Error> + Send + 'static,
    ) -> Result<T, Error> {
        let dir = self.dir.clone();
        let journal = self.journal.clone();
        let name = name.to_owned();
        blocking(move || update_locked(&dir, &journal, kind, &name, bump)).await
    }
}

/// The files of a store's directory, for its journal: `segments/<name>` and
/// `counters/<name>`.
struct Values;

impl Ledger for Values {
    fn what(&self) -> &'static str {
        "segment or counter value"
    }

    fn keys(&self, dir: &Path) -> Result<Vec<String>, Error> {
        let mut keys = Vec::new();
        for kind in [Kind::Segments, Kind::Counters] {
            let folder = dir.join(kind.folder());
            let entries = match fs::read_dir(&folder) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("list", &folder)(e)),
            };
            for entry in entries {
                let name = entry.map_err(io_error("list", &folder))?.file_name();
                if let Some(name) = name.to_string_lossy().strip_suffix(".json") {
                    keys.push(format!("{}/{name}", kind.folder()));
                }
            }
        }
        Ok(keys)
    }

    fn read(&self, dir: &Path, key: &str) -> Found {
        let path = dir.join(format!("{key}.json"));
        match read_value(&path) {
            Ok(Some((file, inode))) => {
                Found::Value { value: file.value, generation: file.generation, inode }
            }
            Ok(None) => Found::Missing,
            Err(e) => Found::Corrupt(e),
        }
    }
}

/// Reads a value file with its inode; `None` when there is none.
pub(crate) fn read_value(path: &Path) -> Result<Option<(ValueFile, u64)>, Error> {
    use std::os::unix::fs::MetadataExt;

    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("read", path)(e)),
    };
    let inode = fs::metadata(path).map_err(io_error("stat", path))?.ino();
    let file = serde_json::from_slice::<ValueFile>(&bytes)
        .map_err(|e| Error::Corrupt { path: path.display().to_string(), reason: e.to_string() })?;
    Ok(Some((file, inode)))
}

/// Replaces a value file with `value` at `generation`; returns its path.
pub(crate) fn write_value(
    dir: &Path,
    key: &str,
    value: u64,
    generation: u64,
) -> Result<PathBuf, Error> {
    let path = dir.join(format!("{key}.json"));
    let tmp = dir.join(format!("{key}.json.tmp"));
    let folder = path.parent().unwrap_or(dir);
    replace_json(folder, &path, &tmp, &ValueFile { value, generation })?;
    Ok(path)
}

/// Adoption: every segment value starts 10^12 (within [`MAX_SEGMENT_ID`]), and every counter
/// 1,000, above the highest value its file or the old journal shows (an unreadable or missing
/// file is written anew), each recorded in the new identity.
fn raise_all(
    dir: &Path,
    identity: &mut Identity,
    highest: &Highest,
    _: Adopt,
) -> Result<(), Error> {
    for (key, &value) in highest {
        let raised = if key.starts_with("segments/") {
            value.saturating_add(ADOPT_SEGMENT_MARGIN).min(MAX_SEGMENT_ID)
        } else {
            value.saturating_add(ADOPT_COUNTER_MARGIN)
        };
        crate::journal::note(identity, key, Some(raised), |generation| {
            write_value(dir, key, raised, generation).map(Some)
        })?;
    }
    Ok(())
}

/// Locks `<name>.lock`, reads `<name>.json`, checks it against the journal, and replaces it
/// with the value `bump` returns, recorded in the journal.
fn update_locked<T>(
    dir: &Path,
    journal: &Journal,
    kind: Kind,
    name: &str,
    bump: impl FnOnce(u64) -> Result<(T, u64), Error>,
) -> Result<T, Error> {
    let folder = dir.join(kind.folder());
    let folder = folder.as_path();
    let lock_path = folder.join(format!("{name}.lock"));
    let lock = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io_error("open", &lock_path))?;
    // Blocks until no other handle or process is updating this value. Released when `lock`
    // is dropped (or the process dies).
    lock.lock().map_err(io_error("lock", &lock_path))?;

    let key = format!("{}/{name}", kind.folder());
    let answer = journal.locked(|| {
        let mut identity = journal.load()?;
        let found = Values.read(dir, &key);
        journal.check(&identity, &key, Values.what(), &found)?;
        let current = match found {
            Found::Value { value, .. } => value,
            _ => 0,
        };
        let (answer, new) = bump(current)?;
        debug_assert!(new > current, "stored values only grow");
        journal.record(&mut identity, &key, Some(new), |generation| {
            write_value(dir, &key, new, generation).map(Some)
        })?;
        Ok(answer)
    })?;
    drop(lock);
    Ok(answer)
}

#[async_trait::async_trait]
impl SegmentStore for FileStore {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error> {
        check_range_request(namespace, step)?;
        let ns = namespace.to_owned();
        self.update(Kind::Segments, namespace, move |max_id| range_after(&ns, max_id, step)).await
    }
}

#[async_trait::async_trait]
impl CounterStore for FileStore {
    fn name(&self) -> &'static str {
        "file"
    }

    async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
        check_counter_request(name, max)?;
        let owned = name.to_owned();
        self.update(Kind::Counters, name, move |value| {
            counter_after(&owned, value, max).map(|next| (next, next))
        })
        .await
    }

    async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error> {
        check_take_request(name, value, max)?;
        let owned = name.to_owned();
        self.update(Kind::Counters, name, move |current| {
            taken_after(&owned, current, value).map(|taken| (taken, taken))
        })
        .await
    }
}
