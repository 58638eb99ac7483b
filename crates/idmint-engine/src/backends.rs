//! [`Backends`]: the stores a server's namespaces issue from, one per [`Source`], and the
//! error for a namespace whose store was not given.

use std::sync::Arc;

#[cfg(feature = "redis")]
use idmint_coord::IcicleClient;
use idmint_coord::{Coordinator, CounterStore, SegmentStore};

use crate::{Error, Source};

/// The stores a server's namespaces issue from, by [`Source`]: the coordinator (source
/// `generator`) always, the others only when a namespace needs them.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::{MemoryCoordinator, MemoryStore};
/// use idmint_core::SystemClock;
/// use idmint_engine::{Backends, Engine, NamespaceConfig, ServerConfig};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(MemoryStore::new());
/// let backends = Backends {
///     segments: Some(store.clone()),
///     counters: Some(store),
///     ..Backends::new(Arc::new(MemoryCoordinator::new()))
/// };
/// let namespaces = vec![
///     NamespaceConfig { layout: "sequence".into(), ..NamespaceConfig::named("invoices") },
///     NamespaceConfig { layout: "decimal-id".into(), ..NamespaceConfig::named("tickets") },
/// ];
/// let config = ServerConfig { namespaces, ..ServerConfig::default() };
/// let engine = Engine::start_with(config, backends, Arc::new(SystemClock)).await?;
/// assert_eq!(engine.issue("invoices", 3).await?.len(), 3);
/// engine.shutdown().await?;
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Backends {
    /// Generator-ID claims and high-water marks (source `generator`).
    pub coordinator: Arc<dyn Coordinator>,
    /// Ranges of plain IDs (source `segment`): `FileStore`, `PostgresStore`, ... Default: none.
    pub segments: Option<Arc<dyn SegmentStore>>,
    /// DecimalId's launch and generator counters (source `counters`). Default: none.
    pub counters: Option<Arc<dyn CounterStore>>,
    /// The icicle client over the Redis nodes (source `redis`, feature `redis`). Default: none.
    #[cfg(feature = "redis")]
    pub redis: Option<IcicleClient>,
}

impl Backends {
    /// Only a coordinator: enough for namespaces of source `generator`.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use idmint_coord::MemoryCoordinator;
    /// use idmint_engine::Backends;
    ///
    /// let backends = Backends::new(Arc::new(MemoryCoordinator::new()));
    /// assert!(backends.segments.is_none() && backends.counters.is_none());
    /// ```
    pub fn new(coordinator: Arc<dyn Coordinator>) -> Self {
        Backends {
            coordinator,
            segments: None,
            counters: None,
            #[cfg(feature = "redis")]
            redis: None,
        }
    }

    /// Refuses a namespace whose source needs a store that was not given.
    pub(crate) fn check(&self, namespace: &str, source: Source) -> Result<(), Error> {
        #[cfg(feature = "redis")]
        let redis = self.redis.is_some();
        #[cfg(not(feature = "redis"))]
        let redis = false;
        let given = match source {
            Source::Generator => true,
            Source::Segment => self.segments.is_some(),
            Source::Counters => self.counters.is_some(),
            Source::Redis => redis,
        };
        if given { Ok(()) } else { Err(missing_store(namespace, source)) }
    }
}

/// The error for a namespace whose source needs a store that its [`Backends`] lack.
pub(crate) fn missing_store(namespace: &str, source: Source) -> Error {
    let what = match source {
        Source::Generator => "a coordinator",
        Source::Segment => "a segment store",
        Source::Counters => "a counter store",
        Source::Redis if cfg!(feature = "redis") => "redis nodes",
        Source::Redis => "a build of idmint-server with feature `redis`",
    };
    Error::Config(format!(
        "namespace `{namespace}`: source `{source}` needs {what}, and none was given"
    ))
}
