//! [`Minter`]: the async handle over one running engine, which records the process that
//! claimed, so that a forked child never issues from its parent's claim or window.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use arc_swap::ArcSwap;
use idmint_core::{AnyId, Layout};
use idmint_engine::{Backends, Engine, Quick, QuickPath};

use crate::{
    Error,
    process::Process,
    settings::{Builder, OnFork, Settings},
};

/// One engine and the process that started it (and holds its claims).
#[derive(Debug)]
struct Running {
    process: Process,
    engine: Arc<Engine>,
}

/// Unique IDs in your own process: an embedded issuing engine (no HTTP) whose generator IDs
/// are claimed in the data directory (several processes may share one) or in Postgres, and
/// whose high-water marks are stored before any ID is issued below them.
///
/// [`close`](Minter::close) stores every mark and releases every claim. Dropping a minter
/// without closing it is safe: the next minter on the same store starts above the stored
/// mark, as after a crash. In a forked child, a minter never issues from its parent's claim:
/// it claims a generator ID of its own ([`OnFork::Claim`]) or refuses ([`OnFork::Refuse`]).
///
/// # Example
///
/// ```
/// use idmint::{Minter, Snowflake};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let minter = Minter::builder().data_dir(dir.path()).build().await?;
/// let a = minter.next().await?;
/// let b: Snowflake = minter.next_as().await?;
/// assert!(u64::try_from(a)? < b.to_raw());
/// minter.close().await?;
/// # Ok::<(), idmint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Minter {
    settings: Settings,
    /// The engine this minter started, and where: read without an atomic write by every call
    /// of the process that built the minter (the common case).
    started: Arc<Engine>,
    started_in: Process,
    /// The one-ID path of the first namespace in `started`, held (none for a namespace
    /// without one: another source, or public IDs).
    quick: Option<QuickPath>,
    /// The engine of the process that runs now: `started`, or a forked child's own.
    current: ArcSwap<Running>,
    /// Held while a forked child starts its own engine.
    restart: tokio::sync::Mutex<()>,
    closed: AtomicBool,
}

impl Minter {
    /// A [`Builder`], every setting at its default.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().data_dir("ids").layout("uuid7");
    /// # let _ = builder;
    /// ```
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A [`Builder`] from the configuration file of `idmint serve --config` (TOML): its
    /// `data_dir`, `coordinator`, `postgres`, `etcd`, `etcd_prefix`, `lease_ttl` and `[server]`
    /// (namespaces, window, ...); the keys of serving (`listen`, `log`, ...) are accepted and
    /// ignored.
    ///
    /// # Errors
    ///
    /// [`Error::ConfigFile`] when the file cannot be read or parsed, names an unknown key, or
    /// asks for Redis or etcd's LableOrg scheme (not embedded).
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let file = dir.path().join("idmint.toml");
    /// let data = dir.path().join("data");
    /// let text = format!("data_dir = {:?}\n[server]\nwindow_ms = 2000\n[[server.namespaces]]\nname = \"orders\"\n", data);
    /// std::fs::write(&file, text).unwrap();
    /// let minter = idmint::Minter::from_config_file(&file)?.build().await?;
    /// minter.next_in("orders").await?;
    /// minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn from_config_file(path: impl AsRef<Path>) -> Result<Builder, Error> {
        let path = path.as_ref();
        let failed =
            |reason: String| Error::ConfigFile { path: path.display().to_string(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
        Builder::from_config_text(&text).map_err(failed)
    }

    /// A [`Builder`] from the `IDMINT_*` environment variables, as `idmint serve` reads them
    /// (over the file `IDMINT_CONFIG` names, if set): `IDMINT_DATA_DIR`,
    /// `IDMINT_COORDINATOR` (`file`, `postgres` or `etcd`), `IDMINT_POSTGRES`, `IDMINT_ETCD`
    /// (comma-separated), `IDMINT_ETCD_PREFIX`, `IDMINT_LEASE_TTL` (s), `IDMINT_WINDOW_MS`,
    /// `IDMINT_MAX_BATCH` and `IDMINT_LAYOUT` (of the first namespace).
    /// Other variables of `idmint serve` are not read.
    ///
    /// # Errors
    ///
    /// [`Error::ConfigFile`] for the file, [`Error::Config`] for a value that is not a number
    /// or a combination that is refused (such as both Postgres and etcd).
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// # let dir = tempfile::tempdir().unwrap();
    /// // With IDMINT_DATA_DIR unset, the data directory is `idmint-data`: set it here.
    /// let minter = idmint::Minter::from_env()?.data_dir(dir.path()).build().await?;
    /// minter.next().await?;
    /// minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn from_env() -> Result<Builder, Error> {
        Builder::from_vars(|name| std::env::var(name).ok())
    }

    pub(crate) async fn start(settings: Settings) -> Result<Minter, Error> {
        let engine = start_engine(&settings).await?;
        let process = Process::current();
        Ok(Minter {
            settings,
            quick: engine.namespaces().first().and_then(|ns| engine.quick_path(ns)),
            started: Arc::clone(&engine),
            started_in: process,
            current: ArcSwap::from_pointee(Running { process, engine }),
            restart: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
        })
    }

    /// The engine of this process: the one it started, or after a fork, the child's own.
    async fn engine(&self) -> Result<Arc<Engine>, Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let running = self.current.load();
        if running.process.is_current() {
            return Ok(Arc::clone(&running.engine));
        }
        let parent = running.process.pid();
        drop(running);
        match self.settings.on_fork {
            OnFork::Refuse => Err(Error::Forked { parent, child: std::process::id() }),
            OnFork::Claim => self.claim_in_child().await,
        }
    }

    /// In a forked child: starts an engine of its own on the same settings (a claim of its
    /// own) and leaks the parent's, whose claim and tasks belong to the parent: it is never
    /// persisted, released or dropped here.
    async fn claim_in_child(&self) -> Result<Arc<Engine>, Error> {
        let _restarting = self.restart.lock().await;
        let running = self.current.load_full();
        if running.process.is_current() {
            return Ok(Arc::clone(&running.engine));
        }
        let engine = start_engine(&self.settings).await?;
        let process = Process::current();
        let parents = self.current.swap(Arc::new(Running { process, engine: Arc::clone(&engine) }));
        std::mem::forget(parents);
        std::mem::forget(running);
        Ok(engine)
    }

    /// The next ID of the first namespace.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`], [`Error::Forked`], or the engine's refusal (not ready, busy).
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// assert!(minter.next().await? < minter.next().await?);
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next(&self) -> Result<AnyId, Error> {
        if let Quick::Done(id) = self.try_next(None) {
            return Ok(id);
        }
        let engine = self.engine().await?;
        let ns = engine.namespaces().first().map(|ns| ns.name.clone()).unwrap_or_default();
        one(&engine, &ns).await
    }

    /// The next ID of a namespace.
    ///
    /// # Errors
    ///
    /// As [`next`](Minter::next), and [`Error::UnknownNamespace`].
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).namespace("orders").build().await?;
    /// assert_eq!(minter.next_in("orders").await?.bits(), 64);
    /// assert!(matches!(minter.next_in("users").await, Err(idmint::Error::UnknownNamespace { .. })));
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next_in(&self, namespace: &str) -> Result<AnyId, Error> {
        if let Quick::Done(id) = self.try_next(Some(namespace)) {
            return Ok(id);
        }
        let engine = self.engine().await?;
        one(&engine, namespace).await
    }

    /// The next ID of a namespace (the first one for `None`) when this process's own engine
    /// has one ready at once: a few atomic operations and one clock reading, no future, no
    /// allocation. Otherwise [`Quick::NextTick`] (one is due within a tick), or
    /// [`Quick::Slow`] for the full path (a closed minter, a forked child, an unknown
    /// namespace, a wait for a window or a claim). The common case (the first namespace, in
    /// the process that built the minter) is inlined whole into the caller, through the held
    /// [`QuickPath`]; the others are out of line.
    #[inline(always)]
    pub(crate) fn try_next(&self, namespace: Option<&str>) -> Quick {
        if namespace.is_none()
            && let Some(quick) = &self.quick
            && !self.closed.load(Ordering::Acquire)
            && self.started_in.is_current()
        {
            return quick.try_issue_one();
        }
        self.try_next_other(namespace)
    }

    /// [`try_next`](Self::try_next) but for its common case: a namespace named, a closed
    /// minter, a forked child. Out of line, so that the common case's frame stays small.
    #[inline(never)]
    fn try_next_other(&self, namespace: Option<&str>) -> Quick {
        if self.closed.load(Ordering::Acquire) {
            return Quick::Slow;
        }
        if self.started_in.is_current() {
            return try_next_on(&self.started, namespace);
        }
        let running = self.current.load();
        if !running.process.is_current() {
            return Quick::Slow;
        }
        try_next_on(&running.engine, namespace)
    }

    /// The next ID of the first namespace as a typed ID: [`Snowflake`](crate::Snowflake),
    /// [`Uuid7`](crate::Uuid7), ... (any type an [`AnyId`] converts into), or `u64`.
    ///
    /// # Errors
    ///
    /// As [`next`](Minter::next), and [`Error::Core`] when the namespace's IDs are not of
    /// that type.
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).layout("uuid7").build().await?;
    /// let id: idmint::Uuid7 = minter.next_as().await?;
    /// assert_eq!(id.to_string().len(), 36);
    /// assert!(minter.next_as::<u64>().await.is_err());
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn next_as<T>(&self) -> Result<T, Error>
    where
        T: TryFrom<AnyId, Error = idmint_core::Error>,
    {
        Ok(T::try_from(self.next().await?)?)
    }

    /// `count` IDs of the first namespace, increasing (1 to the engine's `max_batch`,
    /// default 100,000).
    ///
    /// # Errors
    ///
    /// As [`next`](Minter::next); a count out of range is the engine's `BadRequest`.
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// let ids = minter.batch(1_000).await?;
    /// assert!(ids.len() == 1_000 && ids.windows(2).all(|w| w[0] < w[1]));
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn batch(&self, count: u64) -> Result<Vec<AnyId>, Error> {
        let engine = self.engine().await?;
        let ns = engine.default_namespace().to_owned();
        issue(&engine, &ns, count).await
    }

    /// `count` IDs of a namespace.
    ///
    /// # Errors
    ///
    /// As [`batch`](Minter::batch), and [`Error::UnknownNamespace`].
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).namespace("a").build().await?;
    /// assert_eq!(minter.batch_in("a", 3).await?.len(), 3);
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn batch_in(&self, namespace: &str, count: u64) -> Result<Vec<AnyId>, Error> {
        let engine = self.engine().await?;
        issue(&engine, namespace, count).await
    }

    /// The layout of a namespace: to decode its IDs (`layout.decode(id)`) or name it.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`].
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// let fields = minter.layout("default")?.decode(minter.next().await?)?;
    /// assert!(fields.iter().any(|(name, _)| name == "sequence"));
    /// # minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn layout(&self, namespace: &str) -> Result<Layout, Error> {
        let running = self.current.load();
        running.engine.layout(namespace).cloned().map_err(|e| unknown(&running.engine, e))
    }

    /// The generator ID this process holds for a namespace (`None` for a namespace whose IDs
    /// come from a store, or before a forked child's first call).
    ///
    /// # Errors
    ///
    /// [`Error::UnknownNamespace`].
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let first = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// let second = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// assert_ne!(first.generator_id("default")?, second.generator_id("default")?);
    /// # first.close().await?;
    /// # second.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn generator_id(&self, namespace: &str) -> Result<Option<u64>, Error> {
        let running = self.current.load();
        if !running.process.is_current() {
            return Ok(None);
        }
        let ns = running.engine.namespace(namespace).map_err(|e| unknown(&running.engine, e))?;
        Ok(ns.generator_id())
    }

    /// Stores every namespace's mark and releases every claim; later calls are
    /// [`Error::Closed`]. In a forked child, closes the child's own engine only.
    ///
    /// # Errors
    ///
    /// The first coordination error (every claim is still released).
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// minter.close().await?;
    /// assert!(matches!(minter.next().await, Err(idmint::Error::Closed)));
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn close(&self) -> Result<(), Error> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let running = self.current.load_full();
        if !running.process.is_current() {
            // The parent's engine: not ours to close.
            std::mem::forget(running);
            return Ok(());
        }
        Ok(running.engine.shutdown().await?)
    }
}

impl Drop for Minter {
    /// In a forked child, the parent's engine is leaked: dropping it here could release or
    /// persist the parent's claim. Otherwise, when dropped inside a runtime without
    /// [`close`](Minter::close), the close is spawned on that runtime (best effort); either
    /// way the claims go at the latest when the engine's tasks stop (the runtime's end, or the
    /// process's), and every window was stored before an ID in it was issued.
    fn drop(&mut self) {
        let running = self.current.load_full();
        if !running.process.is_current() {
            // Each forgotten clone keeps a reference that the fields' own drops cannot free.
            std::mem::forget(running);
            std::mem::forget(Arc::clone(&self.started));
            return;
        }
        if !self.started_in.is_current() {
            std::mem::forget(Arc::clone(&self.started));
        }
        if !self.closed.swap(true, Ordering::AcqRel)
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let engine = Arc::clone(&running.engine);
            handle.spawn(async move {
                let _ = engine.shutdown().await;
            });
        }
    }
}

async fn start_engine(settings: &Settings) -> Result<Arc<Engine>, Error> {
    let coordinator = settings.coordinator().await?;
    let engine = Engine::start_with(
        settings.config.clone(),
        Backends::new(coordinator),
        Arc::clone(&settings.clock.0),
    )
    .await?;
    Ok(engine)
}

/// [`Minter::try_next`] on one engine, through its namespaces: a namespace named, or the
/// first one of a forked child's engine.
fn try_next_on(engine: &Engine, namespace: Option<&str>) -> Quick {
    let ns = match namespace {
        None => engine.namespaces().first(),
        Some(name) => by_name(engine, name),
    };
    ns.map_or(Quick::Slow, |ns| engine.try_issue_one(ns))
}

/// A namespace of `engine` by name: out of line, as a call without a name never needs it.
#[inline(never)]
fn by_name<'a>(engine: &'a Engine, name: &str) -> Option<&'a Arc<idmint_engine::Namespace>> {
    engine.namespace(name).ok()
}

async fn one(engine: &Engine, namespace: &str) -> Result<AnyId, Error> {
    let ns = engine.namespace(namespace).map_err(|e| unknown(engine, e))?;
    engine.issue_one(ns).await.map_err(|e| unknown(engine, e))
}

async fn issue(engine: &Engine, namespace: &str, count: u64) -> Result<Vec<AnyId>, Error> {
    engine.issue(namespace, count).await.map_err(|e| unknown(engine, e))
}

/// The engine's error, an unknown namespace with the names there are.
fn unknown(engine: &Engine, e: idmint_engine::Error) -> Error {
    match e {
        idmint_engine::Error::UnknownNamespace(name) => Error::UnknownNamespace {
            name,
            known: engine
                .namespaces()
                .iter()
                .map(|ns| ns.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        },
        e => Error::from(e),
    }
}
