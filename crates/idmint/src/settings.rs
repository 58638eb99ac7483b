//! What a [`Minter`](crate::Minter) is built from: the [`Builder`], or the configuration
//! file of `idmint serve --config`; and how those settings become a coordinator (the file
//! coordinator on the data directory, or Postgres or etcd remembered in it).

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use idmint_coord::{Coordinator, FileCoordinator};
use idmint_core::{Clock, SystemClock};
use idmint_engine::{NamespaceConfig, ServerConfig, WallClock};
use serde::Deserialize;

use crate::{Error, Minter, blocking::BlockingMinter};

/// The data directory when none is given: `idmint serve`'s.
///
/// # Example
///
/// ```
/// assert_eq!(idmint::DEFAULT_DATA_DIR, "idmint-data");
/// ```
pub const DEFAULT_DATA_DIR: &str = "idmint-data";

/// The lease of a Postgres or etcd claim when none is given, in seconds: `idmint serve`'s.
const DEFAULT_LEASE_TTL_S: u32 = 10;

/// The etcd key prefix when none is given: `idmint serve`'s.
const DEFAULT_ETCD_PREFIX: &str = "idmint/";

/// What a minter in a forked child does ([`Builder::on_fork`]).
///
/// # Example
///
/// ```
/// assert_eq!(idmint::OnFork::default(), idmint::OnFork::Claim);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnFork {
    /// The child claims a generator ID of its own on the same settings, at its first call;
    /// its parent's claim and window are never used, stored or released in the child.
    #[default]
    Claim,
    /// Every call in the child is [`Error::Forked`].
    Refuse,
}

/// Where claims and marks live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Store {
    /// `flock`ed files in the data directory.
    File,
    /// Postgres, remembered in the data directory (as `idmint serve --coordinator postgres`).
    Postgres {
        /// The connection string.
        url: String,
        /// The lease of each claim.
        lease_ttl: Duration,
    },
    /// etcd, remembered in the data directory (as `idmint serve --etcd`, native scheme).
    Etcd {
        /// The client URLs of the cluster's members (one is enough).
        endpoints: Vec<String>,
        /// Where the keys live.
        prefix: String,
        /// The lease of each claim, in whole seconds.
        lease_ttl_secs: u32,
    },
}

/// Everything a minter needs to start (again, in a forked child).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) data_dir: PathBuf,
    pub(crate) store: Store,
    pub(crate) config: ServerConfig,
    pub(crate) on_fork: OnFork,
    pub(crate) clock: WallClockSetting,
}

/// The wall clock a minter reads: the system clock unless [`Builder::clock`] set another.
#[derive(Clone)]
pub(crate) struct WallClockSetting(pub(crate) WallClock);

impl std::fmt::Debug for WallClockSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WallClock({} ms)", self.0.now_ms())
    }
}

/// Builds a [`Minter`]: [`Minter::builder`].
///
/// Without a namespace, the minter has one, `default`, of Snowflake IDs. Each
/// [`namespace`](Builder::namespace) adds one; [`layout`](Builder::layout) sets the layout of
/// the last one added (or of `default`). The first namespace is what [`Minter::next`] uses.
///
/// # Example
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let minter = idmint::Minter::builder()
///     .data_dir(dir.path())
///     .namespace("orders")
///     .layout("sonyflake")
///     .window_ms(2_000)
///     .build()
///     .await?;
/// assert!(minter.next_in("orders").await?.bits() == 64);
/// minter.close().await?;
/// # Ok::<(), idmint::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    data_dir: Option<PathBuf>,
    postgres: Option<String>,
    etcd: Option<Vec<String>>,
    etcd_prefix: Option<String>,
    lease_ttl: Option<Duration>,
    config: ServerConfig,
    on_fork: OnFork,
    clock: WallClockSetting,
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            data_dir: None,
            postgres: None,
            etcd: None,
            etcd_prefix: None,
            lease_ttl: None,
            config: ServerConfig::default(),
            on_fork: OnFork::default(),
            clock: WallClockSetting(Arc::new(SystemClock)),
        }
    }

    /// The data directory: claims and marks of the embedded store, or the memory of a
    /// Postgres or etcd fleet. Default `idmint-data`. Several processes may share one.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().data_dir("/var/lib/myapp/idmint");
    /// # let _ = builder;
    /// ```
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Builder {
        self.data_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Adds a namespace (Snowflake IDs unless [`layout`](Builder::layout) follows).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().namespace("orders").namespace("users");
    /// # let _ = builder;
    /// ```
    pub fn namespace(mut self, name: &str) -> Builder {
        self.config.namespaces.push(NamespaceConfig::named(name));
        self
    }

    /// The layout of the last namespace added (or of `default`): a built-in name such as
    /// `snowflake`, `sonyflake` or `uuid7` (`idmint layouts` lists them).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().layout("uuid7");
    /// # let _ = builder;
    /// ```
    pub fn layout(mut self, layout: &str) -> Builder {
        if self.config.namespaces.is_empty() {
            self.config.namespaces.push(NamespaceConfig::default());
        }
        if let Some(ns) = self.config.namespaces.last_mut() {
            layout.clone_into(&mut ns.layout);
            ns.custom_layout = None;
        }
        self
    }

    /// How far ahead of the clock each stored high-water mark goes, in ms (default 3,000).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().window_ms(1_000);
    /// # let _ = builder;
    /// ```
    pub fn window_ms(mut self, window_ms: u64) -> Builder {
        self.config.window_ms = window_ms;
        self
    }

    /// The lease of each claim with [`postgres`](Builder::postgres) (default 10 s; 1 s to a
    /// day) or [`etcd`](Builder::etcd) (default 10 s; whole seconds, 2 s to a day: etcd raises
    /// shorter leases to its minimum). The window must fit in it.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().lease_ttl(std::time::Duration::from_secs(30));
    /// # let _ = builder;
    /// ```
    pub fn lease_ttl(mut self, ttl: Duration) -> Builder {
        self.lease_ttl = Some(ttl);
        self
    }

    /// Claims and marks in Postgres instead of the data directory (a fleet on the database
    /// you already run); the data directory then remembers the fleet's store.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().postgres("postgresql://idmint@db/idmint");
    /// # let _ = builder;
    /// ```
    pub fn postgres(mut self, url: &str) -> Builder {
        self.postgres = Some(url.to_owned());
        self
    }

    /// Claims and marks in etcd instead of the data directory (feature `etcd`, on by
    /// default): a fleet with the servers of `idmint serve --etcd` on the same cluster and
    /// prefix, each process claiming its own generator ID on a lease of its own. `endpoints`
    /// are client URLs of the cluster's members (one is enough: the others are found in its
    /// member list). The data directory then remembers the fleet's store.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder()
    ///     .etcd(["http://etcd-0:2379", "http://etcd-1:2379"])
    ///     .etcd_prefix("myapp/");
    /// # let _ = builder;
    /// ```
    pub fn etcd<I, S>(mut self, endpoints: I) -> Builder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.etcd = Some(endpoints.into_iter().map(|e| e.as_ref().to_owned()).collect());
        self
    }

    /// Where [`etcd`](Builder::etcd) keeps this fleet's keys (default `idmint/`, as
    /// `idmint serve --etcd-prefix`); include the trailing `/`.
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().etcd(["http://127.0.0.1:2379"]).etcd_prefix("app/");
    /// # let _ = builder;
    /// ```
    pub fn etcd_prefix(mut self, prefix: &str) -> Builder {
        self.etcd_prefix = Some(prefix.to_owned());
        self
    }

    /// Every engine setting at once (namespaces, window, batch limit, ...), as the `[server]`
    /// table of the configuration file; later builder calls change it.
    ///
    /// # Example
    ///
    /// ```
    /// let config = idmint::ServerConfig { max_batch: 1_000, ..idmint::ServerConfig::default() };
    /// let builder = idmint::Minter::builder().config(config);
    /// # let _ = builder;
    /// ```
    pub fn config(mut self, config: ServerConfig) -> Builder {
        self.config = config;
        self
    }

    /// What the minter does in a forked child (default [`OnFork::Claim`]).
    ///
    /// # Example
    ///
    /// ```
    /// let builder = idmint::Minter::builder().on_fork(idmint::OnFork::Refuse);
    /// # let _ = builder;
    /// ```
    pub fn on_fork(mut self, on_fork: OnFork) -> Builder {
        self.on_fork = on_fork;
        self
    }

    /// The wall clock the minter reads (default [`SystemClock`](crate::SystemClock)): time is
    /// an input, so a test can drive a minter with a clock of its own and step it back. The
    /// clock guard and the stored marks hold whatever it does.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::{Arc, atomic::{AtomicU64, Ordering::Relaxed}};
    ///
    /// struct Set(AtomicU64);
    /// impl idmint::Clock for Set {
    ///     fn now_ms(&self) -> u64 { self.0.load(Relaxed) }
    /// }
    ///
    /// let clock = Arc::new(Set(AtomicU64::new(1_800_000_000_000)));
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).clock(clock.clone()).build_blocking()?;
    /// let before = minter.next()?;
    /// clock.0.store(1_799_999_000_000, Relaxed); // one second back
    /// assert!(minter.next()? > before);
    /// minter.close()?;
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn clock(mut self, clock: Arc<dyn Clock + Send + Sync>) -> Builder {
        self.clock = WallClockSetting(clock);
        self
    }

    /// Checks the settings, claims a generator ID for every namespace and stores each first
    /// window.
    ///
    /// # Errors
    ///
    /// [`Error::Config`], [`Error::BadUrl`], [`Error::Unreachable`],
    /// [`Error::DataDirNotWritable`], [`Error::DataDirOwned`], or the engine's refusal.
    ///
    /// # Example
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build().await?;
    /// minter.close().await?;
    /// # Ok::<(), idmint::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn build(self) -> Result<Minter, Error> {
        Minter::start(self.settings()?).await
    }

    /// [`build`](Builder::build), for code without a runtime: a [`BlockingMinter`] that owns
    /// a small one.
    ///
    /// # Errors
    ///
    /// As [`build`](Builder::build), and [`Error::Runtime`].
    ///
    /// # Example
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let minter = idmint::Minter::builder().data_dir(dir.path()).build_blocking()?;
    /// assert!(minter.next()? < minter.next()?);
    /// minter.close()?;
    /// # Ok::<(), idmint::Error>(())
    /// ```
    pub fn build_blocking(self) -> Result<BlockingMinter, Error> {
        BlockingMinter::start(self.settings()?)
    }

    fn settings(self) -> Result<Settings, Error> {
        let lease_ttl = self.lease_ttl.unwrap_or(Duration::from_secs(DEFAULT_LEASE_TTL_S.into()));
        let window_fits = || {
            if Duration::from_millis(self.config.window_ms) > lease_ttl {
                return Err(Error::Config(format!(
                    "the window ({} ms) is longer than the lease TTL ({lease_ttl:?}), so each \
                     takeover could start further ahead of the clock than the last; shorten the \
                     window or lengthen the lease",
                    self.config.window_ms
                )));
            }
            Ok(())
        };
        let etcd: Option<Vec<String>> = self.etcd.as_ref().map(|endpoints| {
            endpoints.iter().map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()).collect()
        });
        let store = match (self.postgres.clone(), etcd) {
            (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "both Postgres and etcd are given: claims live in one of them".to_owned(),
                ));
            }
            (Some(url), None) => {
                if !(Duration::from_secs(1)..=Duration::from_secs(86_400)).contains(&lease_ttl) {
                    return Err(Error::Config(format!(
                        "the lease TTL must be 1 s to a day, not {lease_ttl:?}"
                    )));
                }
                window_fits()?;
                Store::Postgres { url, lease_ttl }
            }
            (None, Some(endpoints)) => {
                if endpoints.is_empty() {
                    return Err(Error::Config("etcd needs at least one endpoint".to_owned()));
                }
                // etcd raises shorter leases to its minimum (1.5 × its election timeout, 2 s by
                // default), so a shorter TTL would not be the one in force.
                let whole = lease_ttl.subsec_nanos() == 0;
                let lease_ttl_secs = u32::try_from(lease_ttl.as_secs())
                    .ok()
                    .filter(|s| whole && (2..=86_400).contains(s))
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "the etcd lease TTL must be whole seconds, 2 s to a day, not \
                             {lease_ttl:?}"
                        ))
                    })?;
                window_fits()?;
                let prefix = self.etcd_prefix.clone().filter(|p| !p.is_empty());
                let prefix = prefix.unwrap_or_else(|| DEFAULT_ETCD_PREFIX.to_owned());
                Store::Etcd { endpoints, prefix, lease_ttl_secs }
            }
            (None, None) => {
                if self.etcd_prefix.is_some() {
                    return Err(Error::Config("an etcd prefix needs etcd endpoints".to_owned()));
                }
                Store::File
            }
        };
        let mut config = self.config;
        if config.namespaces.is_empty() {
            config.namespaces.push(NamespaceConfig::default());
        }
        Ok(Settings {
            data_dir: self.data_dir.unwrap_or_else(|| DEFAULT_DATA_DIR.into()),
            store,
            config,
            on_fork: self.on_fork,
            clock: self.clock,
        })
    }

    /// A builder from the configuration file of `idmint serve --config` (the settings a
    /// minter uses: `data_dir`, `coordinator`, `postgres`, `etcd`, `etcd_prefix`, `lease_ttl`
    /// and `[server]`; those of serving, such as `listen`, are read and ignored).
    pub(crate) fn from_config_text(text: &str) -> Result<Builder, String> {
        Builder::from_file(toml::from_str(text).map_err(|e| e.message().to_owned())?)
    }

    /// A builder from `IDMINT_*` variables as `idmint serve` reads them, over the file that
    /// `IDMINT_CONFIG` names (if set): `IDMINT_DATA_DIR`, `IDMINT_COORDINATOR`,
    /// `IDMINT_POSTGRES`, `IDMINT_ETCD` (comma-separated), `IDMINT_ETCD_PREFIX`,
    /// `IDMINT_LEASE_TTL` (s), `IDMINT_WINDOW_MS`, `IDMINT_MAX_BATCH` and `IDMINT_LAYOUT` (the
    /// first namespace's). `var` looks a variable up.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Builder, Error> {
        let mut file = match var("IDMINT_CONFIG").filter(|p| !p.is_empty()) {
            Some(path) => {
                let failed = |reason: String| Error::ConfigFile { path: path.clone(), reason };
                let text = std::fs::read_to_string(&path).map_err(|e| failed(e.to_string()))?;
                toml::from_str(&text).map_err(|e| failed(e.message().to_owned()))?
            }
            None => FileConfig::default(),
        };
        let number = |name: &str| -> Result<Option<u64>, Error> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .map_err(|_| Error::Config(format!("{name}={v} is not a whole number")))
                })
                .transpose()
        };
        if let Some(dir) = var("IDMINT_DATA_DIR") {
            file.data_dir = Some(dir.into());
        }
        if let Some(coordinator) = var("IDMINT_COORDINATOR") {
            file.coordinator = Some(coordinator);
        }
        if let Some(url) = var("IDMINT_POSTGRES") {
            file.postgres = Some(url);
        }
        if let Some(etcd) = var("IDMINT_ETCD") {
            file.etcd = Some(etcd.split(',').map(str::to_owned).collect());
        }
        if let Some(prefix) = var("IDMINT_ETCD_PREFIX") {
            file.etcd_prefix = Some(prefix);
        }
        if let Some(ttl) = number("IDMINT_LEASE_TTL")? {
            let ttl = u32::try_from(ttl)
                .map_err(|_| Error::Config(format!("IDMINT_LEASE_TTL={ttl} is too large")))?;
            file.lease_ttl = Some(ttl);
        }
        let mut builder = Builder::from_file(file).map_err(Error::Config)?;
        if let Some(window_ms) = number("IDMINT_WINDOW_MS")? {
            builder = builder.window_ms(window_ms);
        }
        if let Some(max_batch) = number("IDMINT_MAX_BATCH")? {
            builder.config.max_batch = max_batch;
        }
        if let Some(layout) = var("IDMINT_LAYOUT") {
            if builder.config.namespaces.is_empty() {
                builder.config.namespaces.push(NamespaceConfig::default());
            }
            if let Some(first) = builder.config.namespaces.first_mut() {
                first.layout = layout;
                first.custom_layout = None;
            }
        }
        Ok(builder)
    }

    fn from_file(file: FileConfig) -> Result<Builder, String> {
        let scheme = file.etcd_scheme.as_ref().map(|s| s.as_str().unwrap_or_default());
        if scheme.is_some_and(|s| s != "native") || file.etcd_lable_prefix.is_some() {
            return Err("the LableOrg scheme of etcd is not supported by the embedded minter; \
                        use the native scheme (the default)"
                .to_owned());
        }
        if file.redis.as_ref().is_some_and(|r| !r.is_empty()) || file.redis_sentinel.is_some() {
            return Err("Redis (source `redis`) is not supported by the embedded minter".to_owned());
        }
        let mut builder = Builder::new();
        if let Some(server) = file.server {
            builder.config = server;
        }
        if let Some(dir) = file.data_dir {
            builder.data_dir = Some(dir);
        }
        builder.lease_ttl = file.lease_ttl.map(|s| Duration::from_secs(s.into()));
        let postgres = file.postgres.filter(|p| !p.is_empty());
        let etcd: Option<Vec<String>> = file.etcd.map(|endpoints| {
            endpoints.iter().map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()).collect()
        });
        let etcd = etcd.filter(|e| !e.is_empty());
        builder.etcd_prefix = file.etcd_prefix;
        match file.coordinator.as_deref() {
            Some("postgres") => {
                if etcd.is_some() {
                    return Err("`coordinator = \"postgres\"` and `etcd`: give one of them".into());
                }
                let url = postgres.ok_or("`coordinator = \"postgres\"` needs `postgres = URL`")?;
                builder.postgres = Some(url);
            }
            Some("etcd") => {
                builder.etcd = Some(etcd.ok_or("`coordinator = \"etcd\"` needs `etcd = [URL]`")?);
            }
            Some("file") if etcd.is_some() => {
                return Err("`coordinator = \"file\"` and `etcd`: give one of them".into());
            }
            // As with `idmint serve`, `etcd` alone is the etcd coordinator, and `postgres`
            // alone holds segments and counters, which the embedded minter does not use:
            // claims stay in the data directory.
            Some("file") | None => builder.etcd = etcd,
            Some(other) => return Err(format!("unknown coordinator `{other}`")),
        }
        if builder.etcd.is_none() && builder.etcd_prefix.is_some() {
            return Err("`etcd_prefix` needs `etcd`".into());
        }
        Ok(builder)
    }
}

/// The configuration file of `idmint serve --config`: every key it knows, so that the same
/// file serves both; the minter uses those of issuing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "keys of serving, read so that the same file is accepted")]
struct FileConfig {
    listen: Option<toml::Value>,
    grpc_listen: Option<toml::Value>,
    data_dir: Option<PathBuf>,
    log: Option<toml::Value>,
    log_format: Option<toml::Value>,
    postgres: Option<String>,
    postgres_promotion_margin: Option<toml::Value>,
    postgres_promotion_counter_margin: Option<toml::Value>,
    postgres_promotion_mark_margin_ms: Option<toml::Value>,
    redis: Option<Vec<String>>,
    redis_sentinel: Option<toml::Value>,
    counters: Option<toml::Value>,
    coordinator: Option<String>,
    generator_id_from_hostname: Option<toml::Value>,
    etcd: Option<Vec<String>>,
    etcd_prefix: Option<String>,
    lease_ttl: Option<u32>,
    etcd_scheme: Option<toml::Value>,
    etcd_lable_prefix: Option<toml::Value>,
    server: Option<ServerConfig>,
}

impl Settings {
    /// Checks the data directory (created if missing, writable, this user's) and opens the
    /// coordinator on it.
    pub(crate) async fn coordinator(&self) -> Result<Arc<dyn Coordinator>, Error> {
        check_data_dir(&self.data_dir)?;
        match &self.store {
            Store::File => {
                Ok(Arc::new(FileCoordinator::open(&self.data_dir).map_err(|e| match e {
                    idmint_coord::Error::Io { .. } => Error::not_writable(&self.data_dir, e),
                    e => Error::from(e),
                })?))
            }
            Store::Postgres { url, lease_ttl } => postgres(&self.data_dir, url, *lease_ttl).await,
            Store::Etcd { endpoints, prefix, lease_ttl_secs } => {
                etcd(&self.data_dir, endpoints, prefix, *lease_ttl_secs).await
            }
        }
    }
}

#[cfg(feature = "postgres")]
async fn postgres(
    data_dir: &Path,
    url: &str,
    lease_ttl: Duration,
) -> Result<Arc<dyn Coordinator>, Error> {
    use idmint_coord::{FLEET_DIR, PostgresCoordinator, PostgresLeaseOptions, Remembered};

    let lease = PostgresLeaseOptions {
        ttl: lease_ttl,
        margin: if lease_ttl >= Duration::from_secs(2) {
            Duration::from_secs(1)
        } else {
            lease_ttl / 2
        },
    };
    let shared = PostgresCoordinator::connect(url, idmint_coord::PostgresOptions::default(), lease)
        .await
        .map_err(|e| match Error::from(e) {
            Error::BadUrl { reason, .. } => Error::BadUrl { url: url.to_owned(), reason },
            e => e,
        })?;
    let remembered = Remembered::open(data_dir.join(FLEET_DIR), Arc::new(shared))?;
    Ok(Arc::new(remembered))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &Path, url: &str, _: Duration) -> Result<Arc<dyn Coordinator>, Error> {
    Err(Error::BadUrl {
        url: url.to_owned(),
        reason: "this build of idmint has no Postgres support; enable its `postgres` feature"
            .to_owned(),
    })
}

/// The etcd coordinator as `idmint serve --etcd` opens it (native scheme), remembered in the
/// data directory.
#[cfg(feature = "etcd")]
async fn etcd(
    data_dir: &Path,
    endpoints: &[String],
    prefix: &str,
    lease_ttl_secs: u32,
) -> Result<Arc<dyn Coordinator>, Error> {
    use idmint_coord::{EtcdCoordinator, EtcdOptions, FLEET_DIR, Remembered};

    let options = EtcdOptions::native(prefix, lease_ttl_secs);
    let shared =
        EtcdCoordinator::connect(endpoints, options).await.map_err(|e| match Error::from(e) {
            Error::BadUrl { reason, .. } => Error::BadUrl { url: endpoints.join(","), reason },
            e => e,
        })?;
    let remembered = Remembered::open(data_dir.join(FLEET_DIR), Arc::new(shared))?;
    Ok(Arc::new(remembered))
}

#[cfg(not(feature = "etcd"))]
async fn etcd(
    _: &Path,
    endpoints: &[String],
    _: &str,
    _: u32,
) -> Result<Arc<dyn Coordinator>, Error> {
    Err(Error::BadUrl {
        url: endpoints.join(","),
        reason: "this build of idmint has no etcd support; enable its `etcd` feature".to_owned(),
    })
}

/// The data directory, created if missing; refused when another user owns it or it cannot
/// be written (a probe file is created and removed).
fn check_data_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;

    std::fs::create_dir_all(dir).map_err(|e| Error::not_writable(dir, e))?;
    let owner = std::fs::metadata(dir).map_err(|e| Error::not_writable(dir, e))?.uid();
    // `/proc/self` belongs to the process's effective user.
    if let Ok(me) = std::fs::metadata("/proc/self").map(|m| m.uid())
        && owner != me
    {
        return Err(Error::DataDirOwned { path: dir.display().to_string(), owner, me });
    }
    let probe = dir.join(format!(".idmint-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| Error::not_writable(dir, e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{Builder, Store};

    /// What a case expects of `IDMINT_*` variables: the settings (data directory, store,
    /// window, layout of the first namespace) or an error that says these words.
    struct Case {
        vars: &'static [(&'static str, &'static str)],
        expect: Result<(&'static str, Option<&'static str>, u64, &'static str), &'static str>,
    }

    fn check(case: &Case) {
        let vars: HashMap<&str, &str> = case.vars.iter().copied().collect();
        let got = Builder::from_vars(|name| vars.get(name).map(|v| (*v).to_owned()))
            .and_then(Builder::settings);
        match (&case.expect, got) {
            (Ok((dir, postgres, window_ms, layout)), Ok(settings)) => {
                assert_eq!(settings.data_dir.to_str(), Some(*dir), "{:?}", case.vars);
                let url = match &settings.store {
                    Store::File => None,
                    Store::Postgres { url, .. } => Some(url.clone()),
                    Store::Etcd { endpoints, prefix, lease_ttl_secs } => {
                        Some(format!("etcd {} {prefix} {lease_ttl_secs}", endpoints.join(",")))
                    }
                };
                let url = url.as_deref();
                assert_eq!(url, *postgres, "{:?}", case.vars);
                assert_eq!(settings.config.window_ms, *window_ms, "{:?}", case.vars);
                assert_eq!(settings.config.namespaces[0].layout, *layout, "{:?}", case.vars);
            }
            (Err(says), Err(e)) => {
                assert!(e.to_string().contains(says), "{:?}: `{e}` lacks `{says}`", case.vars);
            }
            (expect, got) => panic!("{:?}: expected {expect:?}, got {got:?}", case.vars),
        }
    }

    /// `IDMINT_*` variables mean to a minter what they mean to `idmint serve`.
    #[test]
    fn idmint_variables_are_read_as_idmint_serve_reads_them() {
        let cases = [
            Case { vars: &[], expect: Ok(("idmint-data", None, 3_000, "snowflake")) },
            Case {
                vars: &[
                    ("IDMINT_DATA_DIR", "/d"),
                    ("IDMINT_WINDOW_MS", "2000"),
                    ("IDMINT_LAYOUT", "uuid7"),
                ],
                expect: Ok(("/d", None, 2_000, "uuid7")),
            },
            Case {
                vars: &[
                    ("IDMINT_COORDINATOR", "postgres"),
                    ("IDMINT_POSTGRES", "postgresql://h/db"),
                ],
                expect: Ok(("idmint-data", Some("postgresql://h/db"), 3_000, "snowflake")),
            },
            // `postgres` alone holds segments and counters in `idmint serve`: claims stay put.
            Case {
                vars: &[("IDMINT_POSTGRES", "postgresql://h/db")],
                expect: Ok(("idmint-data", None, 3_000, "snowflake")),
            },
            Case {
                vars: &[("IDMINT_COORDINATOR", "postgres")],
                expect: Err("needs `postgres = URL`"),
            },
            Case {
                vars: &[("IDMINT_WINDOW_MS", "soon")],
                expect: Err("IDMINT_WINDOW_MS=soon is not a whole number"),
            },
            Case {
                vars: &[("IDMINT_ETCD", "http://e:2379")],
                expect: Ok((
                    "idmint-data",
                    Some("etcd http://e:2379 idmint/ 10"),
                    3_000,
                    "snowflake",
                )),
            },
            Case {
                vars: &[
                    ("IDMINT_COORDINATOR", "etcd"),
                    ("IDMINT_ETCD", "http://e:2379, http://f:2379"),
                    ("IDMINT_ETCD_PREFIX", "app/"),
                    ("IDMINT_LEASE_TTL", "4"),
                ],
                expect: Ok((
                    "idmint-data",
                    Some("etcd http://e:2379,http://f:2379 app/ 4"),
                    3_000,
                    "snowflake",
                )),
            },
            Case { vars: &[("IDMINT_COORDINATOR", "etcd")], expect: Err("needs `etcd = [URL]`") },
            Case {
                vars: &[("IDMINT_ETCD", "http://e:2379"), ("IDMINT_LEASE_TTL", "1")],
                expect: Err("2 s to a day"),
            },
            Case {
                vars: &[
                    ("IDMINT_COORDINATOR", "postgres"),
                    ("IDMINT_POSTGRES", "postgresql://h/db"),
                    ("IDMINT_ETCD", "http://e:2379"),
                ],
                expect: Err("give one of them"),
            },
            Case {
                vars: &[("IDMINT_ETCD_PREFIX", "app/")],
                expect: Err("`etcd_prefix` needs `etcd`"),
            },
            Case {
                vars: &[("IDMINT_COORDINATOR", "zookeeper")],
                expect: Err("unknown coordinator `zookeeper`"),
            },
            Case {
                vars: &[("IDMINT_CONFIG", "/nonexistent/idmint.toml")],
                expect: Err("/nonexistent/idmint.toml"),
            },
            Case {
                vars: &[
                    ("IDMINT_COORDINATOR", "postgres"),
                    ("IDMINT_POSTGRES", "postgresql://h/db"),
                    ("IDMINT_LEASE_TTL", "2"),
                ],
                expect: Err("longer than the lease TTL"),
            },
        ];
        for case in &cases {
            check(case);
        }
    }

    /// The etcd keys of `idmint serve --config` files: the native scheme is embedded, the
    /// LableOrg scheme is refused.
    #[test]
    fn etcd_keys_of_the_configuration_file() {
        let native = "coordinator = \"etcd\"\netcd = [\"http://e:2379\"]\netcd_prefix = \"app/\"\n\
                      etcd_scheme = \"native\"\nlease_ttl = 5\n";
        let settings =
            Builder::from_config_text(native).and_then(|b| b.settings().map_err(|e| e.to_string()));
        match settings.map(|s| s.store) {
            Ok(Store::Etcd { endpoints, prefix, lease_ttl_secs }) => {
                assert_eq!(
                    (endpoints, prefix, lease_ttl_secs),
                    (vec!["http://e:2379".into()], "app/".into(), 5)
                );
            }
            other => panic!("{other:?}"),
        }
        let lable = "etcd = [\"http://e:2379\"]\netcd_scheme = \"lable-org\"\n";
        let refused = Builder::from_config_text(lable).expect_err("LableOrg is refused");
        assert!(refused.contains("LableOrg"), "{refused}");
    }
}
