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
    CounterStore, Error, SegmentStore,
    counter::check_counter_request,
    file::{blocking, fsync_dir, io_error, replace_json},
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
/// Keep the directory on a local file system: `flock` over NFS is not reliable. Never copy or
/// restore the directory from a backup while it is in use: an older value hands out IDs again.
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
}

/// The content of a value file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValueFile {
    value: u64,
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
        let dir = dir.as_ref().to_path_buf();
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
        Ok(FileStore { dir })
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
        let folder = self.dir.join(kind.folder());
        let name = name.to_owned();
        blocking(move || update_locked(&folder, &name, bump)).await
    }
}

/// Locks `<name>.lock`, reads `<name>.json`, and replaces it with the value `bump` returns.
fn update_locked<T>(
    folder: &Path,
    name: &str,
    bump: impl FnOnce(u64) -> Result<(T, u64), Error>,
) -> Result<T, Error> {
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

    let path = folder.join(format!("{name}.json"));
    let current = match fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice::<ValueFile>(&bytes)
                .map_err(|e| Error::Corrupt {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?
                .value
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io_error("read", &path)(e)),
    };
    let (answer, new) = bump(current)?;
    debug_assert!(new > current, "stored values only grow");

    let tmp = folder.join(format!("{name}.json.tmp"));
    replace_json(folder, &path, &tmp, &ValueFile { value: new })?;
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
}
