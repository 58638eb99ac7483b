//! A shared coordinator remembered in the server's own data directory: the store it claims on
//! (its [`Lineage`]) and the last mark it stored for each generator ID, so that a server
//! pointed at the wrong store (an empty, wiped or other etcd cluster) is refused instead of
//! starting below IDs it issued, or on a generator ID another server now holds.
//!
//! The memory lives in `<data-dir>/fleet.d`, a journaled directory like the file
//! coordinator's (`identity.json` checks that it is what idmint last wrote):
//!
//! | file | holds |
//! | --- | --- |
//! | `identity.json` | the journal, and the [`Lineage`] of the store this directory claims on |
//! | `marks/<namespace>/<id>.json` | the last mark this server stored for that generator ID |
//!
//! The rules:
//! - **A claim goes where the last one went.** Before claiming, the store's lineage is read.
//!   A directory that remembers none (its first claim) takes any; one that remembers a store
//!   takes only that store, or one an operator adopted since (`idmint lease adopt-cluster`
//!   records the adoption in the store); anything else, an empty store included, is
//!   [`Error::StoreChanged`].
//! - **A claim never starts below a mark this directory knows**: its mark is the greater of
//!   the store's and the remembered one.
//! - **A mark is remembered before it is stored**, so the memory is never behind an ID the
//!   server issued (IDs are issued only below a stored mark).

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{
    Adopt, Claim, ClaimRequest, Coordinator, DataDirReport, Error, Lineage,
    fsio::{blocking, io_error},
    journal::{Found, Journal, Ledger},
    segment::file::{read_value, write_value},
};

/// The name of the memory's folder inside a server's data directory (a name no namespace can
/// have).
pub const FLEET_DIR: &str = "fleet.d";

/// A shared coordinator (etcd) with its memory in the server's data directory: see the
/// module documentation of `remembered.rs` for the rules.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::{ClaimRequest, Coordinator, GeneratorIds, MemoryCoordinator, Remembered};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("idmint-remembered-doc-{}", std::process::id()));
/// let shared = Arc::new(MemoryCoordinator::new());
/// let coordinator = Remembered::open(&dir, shared.clone())?;
/// let request = ClaimRequest::new("orders", GeneratorIds::Fixed(0), "snowflake");
/// let claim = coordinator.claim(&request).await?;
/// coordinator.store_mark(&claim, 5_000).await?;
/// coordinator.release(&claim).await?;
///
/// // The shared store forgets everything; the data directory does not.
/// let forgetful = Remembered::open(&dir, Arc::new(MemoryCoordinator::new()))?;
/// assert_eq!(forgetful.claim(&request).await?.mark_ms(), Some(5_000));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Remembered {
    inner: Arc<dyn Coordinator>,
    dir: PathBuf,
    journal: Journal,
}

impl Remembered {
    /// Opens (or creates) the memory in `dir`, checked against its journal, around `inner`.
    ///
    /// # Errors
    ///
    /// [`Error::Untrusted`] when `dir` is not what idmint last wrote (copied, restored, a mark
    /// lost or lowered); [`Error::Io`] when it cannot be created or read.
    pub fn open(dir: impl AsRef<Path>, inner: Arc<dyn Coordinator>) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), inner, None)
    }

    /// Opens the memory in `dir` even if it is not what idmint last wrote, once an operator
    /// is sure no other copy of it is in use: it gets a new identity, keeps the store it
    /// remembers, and remembers for each generator ID the highest mark any file or the old
    /// journal shows.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::{Adopt, Error, MemoryCoordinator, Remembered};
    ///
    /// let dir = std::env::temp_dir().join(format!("idmint-remembered-adopt-{}", std::process::id()));
    /// Remembered::open(&dir, Arc::new(MemoryCoordinator::new()))?;
    /// std::fs::write(dir.join("identity.json"), "")?;
    /// let shared = Arc::new(MemoryCoordinator::new());
    /// assert!(matches!(Remembered::open(&dir, shared.clone()), Err(Error::Untrusted { .. })));
    /// Remembered::open_adopting(&dir, shared, Adopt::default())?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be read or written.
    pub fn open_adopting(
        dir: impl AsRef<Path>,
        inner: Arc<dyn Coordinator>,
        adopt: Adopt,
    ) -> Result<Self, Error> {
        Self::open_with(dir.as_ref(), inner, Some(adopt))
    }

    /// Checks a memory directory against its journal, changing nothing (for
    /// `idmint doctor`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directory cannot be read.
    pub fn inspect(dir: impl AsRef<Path>) -> Result<DataDirReport, Error> {
        crate::journal::report(dir.as_ref(), &Marks)
    }

    fn open_with(
        dir: &Path,
        inner: Arc<dyn Coordinator>,
        adopt: Option<Adopt>,
    ) -> Result<Self, Error> {
        let dir = dir.to_path_buf();
        fs::create_dir_all(dir.join("marks"))
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let journal = Journal::open(&dir, &Marks, adopt, |dir, identity, highest, _| {
            for (key, &value) in highest {
                crate::journal::note(identity, key, Some(value), |generation| {
                    write_value(dir, key, value, generation).map(Some)
                })?;
            }
            Ok(())
        })?;
        Ok(Remembered { inner, dir, journal })
    }

    /// The memory's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Refuses a store other than the remembered one (or one adopted since).
    async fn check_lineage(&self) -> Result<(), Error> {
        let Some(found) = self.inner.lineage().await? else { return Ok(()) };
        let journal = self.journal.clone();
        let remembered = blocking(move || journal.locked(|| journal.load())).await?.lineage;
        let Some(remembered) = remembered else { return Ok(()) };
        let same = found.recorded
            && found.store == remembered.store
            && found.adopted_ms == remembered.adopted_ms;
        let adopted_since = found.recorded
            && found.adopted_ms.is_some()
            && found.adopted_ms != remembered.adopted_ms;
        if same {
            return Ok(());
        }
        if adopted_since {
            tracing::warn!(
                remembered = %remembered.store,
                found = %found.store,
                "this data directory last claimed on another store, adopted since by an operator: claiming on it"
            );
            return Ok(());
        }
        Err(Error::StoreChanged {
            dir: self.dir.display().to_string(),
            remembered: remembered.store,
            found: if found.recorded {
                found.store
            } else {
                format!("{}, which holds no idmint marks (empty or wiped)", found.store)
            },
        })
    }

    /// Records the store's lineage after a claim (the first claim on a store records it).
    async fn remember_lineage(&self) -> Result<(), Error> {
        let Some(found) = self.inner.lineage().await? else { return Ok(()) };
        if !found.recorded {
            return Ok(());
        }
        let journal = self.journal.clone();
        blocking(move || {
            journal.update(|identity| {
                identity.lineage = Some(found);
                Ok(())
            })
        })
        .await
    }

    /// The mark this directory remembers for a claim's generator ID.
    async fn remembered_mark(
        &self,
        namespace: &str,
        generator_id: u64,
    ) -> Result<Option<u64>, Error> {
        let (dir, journal, key) =
            (self.dir.clone(), self.journal.clone(), key(namespace, generator_id));
        blocking(move || {
            journal.locked(|| {
                let identity = journal.load()?;
                let found = Marks.read(&dir, &key);
                journal.check(&identity, &key, Marks.what(), &found)?;
                Ok(match found {
                    Found::Value { value, .. } => Some(value),
                    _ => None,
                })
            })
        })
        .await
    }

    /// Remembers `mark_ms` for a claim's generator ID if it is above what is remembered.
    async fn remember_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let (dir, journal) = (self.dir.clone(), self.journal.clone());
        let key = key(claim.namespace(), claim.generator_id());
        let folder = dir.join("marks").join(claim.namespace());
        blocking(move || {
            fs::create_dir_all(&folder).map_err(io_error("create", &folder))?;
            journal.locked(|| {
                let mut identity = journal.load()?;
                let found = Marks.read(&dir, &key);
                journal.check(&identity, &key, Marks.what(), &found)?;
                if let Found::Value { value, .. } = found
                    && value >= mark_ms
                {
                    return Ok(());
                }
                journal.record(&mut identity, &key, Some(mark_ms), |generation| {
                    write_value(&dir, &key, mark_ms, generation).map(Some)
                })
            })
        })
        .await
    }
}

#[async_trait::async_trait]
impl Coordinator for Remembered {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        self.check_lineage().await?;
        let mut claim = self.inner.claim(request).await?;
        let raised = async {
            self.remember_lineage().await?;
            self.remembered_mark(claim.namespace(), claim.generator_id()).await
        }
        .await;
        match raised {
            Ok(Some(remembered)) => claim.raise_mark(remembered),
            Ok(None) => {}
            Err(e) => {
                let _ = self.inner.release(&claim).await;
                return Err(e);
            }
        }
        Ok(claim)
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        self.remember_mark(claim, mark_ms).await?;
        self.inner.store_mark(claim, mark_ms).await
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        self.inner.release(claim).await
    }

    async fn lineage(&self) -> Result<Option<Lineage>, Error> {
        self.inner.lineage().await
    }
}

/// A generator ID's key in the memory's journal.
fn key(namespace: &str, generator_id: u64) -> String {
    format!("marks/{namespace}/{generator_id}")
}

/// The memory's files, for its journal: `marks/<namespace>/<id>.json`.
struct Marks;

impl Ledger for Marks {
    fn what(&self) -> &'static str {
        "remembered mark"
    }

    fn keys(&self, dir: &Path) -> Result<Vec<String>, Error> {
        let marks = dir.join("marks");
        let mut keys = Vec::new();
        let namespaces = match fs::read_dir(&marks) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(keys),
            Err(e) => return Err(io_error("list", &marks)(e)),
        };
        for ns in namespaces {
            let ns = ns.map_err(io_error("list", &marks))?;
            let name = ns.file_name().to_string_lossy().into_owned();
            for file in fs::read_dir(ns.path()).map_err(io_error("list", &ns.path()))? {
                let file = file.map_err(io_error("list", &ns.path()))?.file_name();
                if let Some(id) = file.to_string_lossy().strip_suffix(".json")
                    && let Ok(id) = id.parse::<u64>()
                {
                    keys.push(key(&name, id));
                }
            }
        }
        Ok(keys)
    }

    fn read(&self, dir: &Path, key: &str) -> Found {
        match read_value(&dir.join(format!("{key}.json"))) {
            Ok(Some((file, inode))) => {
                Found::Value { value: file.value, generation: file.generation, inode }
            }
            Ok(None) => Found::Missing,
            Err(e) => Found::Corrupt(e),
        }
    }
}
