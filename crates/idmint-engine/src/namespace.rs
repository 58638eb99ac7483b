//! One namespace at run time: its configuration and metrics, and the [`Issuer`] of its source
//! (`issuer/`), to which it routes every call: activation, the background task, readiness,
//! issuing and deactivation.

use std::sync::Arc;

use idmint_coord::Coordinator;
use idmint_core::{AnyId, IdForm, IdText, Layout, Order, PublicIds, TypePrefix};
use tokio_util::sync::CancellationToken;

use crate::{
    Backends, Error, NamespaceConfig, ServerConfig, ShardKeys, Source,
    clock::Clocks,
    issuer::{
        IdSink, Issuer, Quick, Shared, counters::Counters, generator::GeneratorIssuer, redis,
        redis::Redis, segment::Segment, store::Stored,
    },
    metrics::{NamespaceGauges, NamespaceMetrics, NamespaceStatus},
};

/// Whether a failed claim may succeed later by itself, so that a server with `wait_for_claim`
/// starts without it and keeps trying: every generator ID it may take is held (by servers that
/// may stop), or the coordinator did not answer. Other errors (an invalid request, a changed
/// layout, a corrupt mark) need an operator.
pub(crate) fn claim_may_succeed_later(error: &Error) -> bool {
    use idmint_coord::Error as Coord;
    matches!(
        error,
        Error::Coord(
            Coord::PoolExhausted { .. }
                | Coord::Conflict { .. }
                | Coord::Unavailable { .. }
                | Coord::ClaimLost { .. }
        )
    ) || redis::may_answer_later(error)
}

/// A namespace of a running [`Engine`](crate::Engine): configuration, metrics, and the issuer
/// of its source ([`Engine::namespace`](crate::Engine::namespace)).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
///
/// use idmint_coord::MemoryCoordinator;
/// use idmint_core::SystemClock;
/// use idmint_engine::{Engine, ServerConfig, Source};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let engine = Engine::start(ServerConfig::default(), Arc::new(MemoryCoordinator::new()), Arc::new(SystemClock)).await?;
/// let namespace = engine.namespace("default")?;
/// assert_eq!((namespace.name.as_str(), namespace.source), ("default", Source::Generator));
/// assert!(namespace.is_ready(engine.clocks()) && namespace.token().is_none());
/// engine.shutdown().await?;
/// # Ok::<(), idmint_engine::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Namespace {
    /// Its name.
    pub name: String,
    /// Its layout.
    pub layout: Layout,
    /// Where its IDs come from.
    pub source: Source,
    shared: Arc<Shared>,
    issuer: Arc<dyn Issuer>,
    /// The same issuer, typed, when the source is `generator`: what a
    /// [`QuickPath`](crate::QuickPath) calls without `dyn Issuer`.
    generator: Option<Arc<GeneratorIssuer>>,
    /// The keyed permutation of `public_ids`, if set.
    public: Option<PublicIds>,
    /// The TypeID prefix of `type_prefix`, if set.
    prefix: Option<TypePrefix>,
    /// The text IDs take when a request names no form.
    default_text: IdText,
}

/// Reads and checks a public-ID key file (`idmint keygen` writes them).
///
/// # Errors
///
/// [`Error::Config`] naming the file and what is wrong with it.
///
/// # Example
///
/// ```
/// let missing = idmint_engine::load_public_id_keys(std::path::Path::new("/nonexistent.json"));
/// assert!(missing.is_err());
/// ```
pub fn load_public_id_keys(path: &std::path::Path) -> Result<idmint_core::PublicIdKeys, Error> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("cannot read key file {shown}: {e}")))?;
    let keys: idmint_core::PublicIdKeys = serde_json::from_str(&text)
        .map_err(|e| Error::Config(format!("{shown} is not a key file: {e}")))?;
    keys.check().map_err(|e| Error::Config(format!("key file {shown}: {e}")))?;
    Ok(keys)
}

impl Namespace {
    pub(crate) fn new(config: NamespaceConfig) -> Result<Self, Error> {
        let layout = config.resolve_layout()?;
        let source = config.source()?;
        let prefix = config.type_prefix()?;
        let default_text = IdText::new(&layout, prefix.as_ref(), None)
            .map_err(|e| Error::Config(format!("namespace `{}`: {e}", config.name)))?;
        let public = match &config.public_ids {
            Some(settings) => {
                let keys = load_public_id_keys(std::path::Path::new(&settings.key_file))?;
                Some(PublicIds::new(&layout, &keys).map_err(|e| {
                    Error::Config(format!("namespace `{}`: public_ids: {e}", config.name))
                })?)
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            name: config.name.clone(),
            layout: layout.clone(),
            source,
            config,
            metrics: NamespaceMetrics::default(),
        });
        let (issuer, generator) = issuer_for(Arc::clone(&shared));
        Ok(Namespace {
            name: shared.name.clone(),
            layout,
            source,
            issuer,
            generator,
            shared,
            public,
            prefix,
            default_text,
        })
    }

    /// The text of this namespace's IDs in `form` (`None`: its default, the TypeID when it
    /// has a `type_prefix`); a form that cannot hold its IDs is refused ([`IdText::new`]).
    pub fn text(&self, form: Option<IdForm>) -> Result<IdText, Error> {
        match form {
            None => Ok(self.default_text.clone()),
            Some(form) => Ok(IdText::new(&self.layout, self.prefix.as_ref(), Some(form))?),
        }
    }

    /// The TypeID prefix of `type_prefix`, if set.
    pub fn type_prefix(&self) -> Option<&TypePrefix> {
        self.prefix.as_ref()
    }

    /// Reads an ID given to `decode` in `text`: the public form when the namespace hands out
    /// public IDs (revealed; it need not be a valid layout ID itself), else a layout ID. A
    /// prefixed form refuses another prefix, naming both.
    pub fn read_id(&self, id: &str, text: &IdText) -> Result<AnyId, Error> {
        let Some(public) = &self.public else { return Ok(text.parse(&self.layout, id)?) };
        Ok(public.reveal(text.parse_value_of(self.layout.id_bits(), id)?)?)
    }

    fn public_exhausted(&self, error: idmint_core::Error) -> Error {
        Error::PublicIdsExhausted { namespace: self.name.clone(), reason: error.to_string() }
    }

    /// The bearer token this namespace requires, if any.
    pub fn token(&self) -> Option<&str> {
        self.shared.config.token.as_deref()
    }

    /// Whether the namespace can issue. Source `generator`: it holds a claim and its stored
    /// window is not used up. Store sources: the store was started and its last call
    /// succeeded.
    pub fn is_ready(&self, clocks: &Clocks) -> bool {
        self.issuer.is_ready(clocks)
    }

    /// The generator ID held, if any (for source `counters`, the DecimalId generator ID in
    /// use).
    pub fn generator_id(&self) -> Option<u64> {
        self.issuer.generator_id()
    }

    /// Every generator ID held (one per lane of a `generators` namespace).
    pub fn generator_ids(&self) -> Vec<u64> {
        self.issuer.generator_ids()
    }

    /// The order of the IDs issued, from one batch to the next: the source's and layout's,
    /// except that several generator IDs make increasing IDs only k-sorted across batches.
    pub fn order(&self) -> Order {
        match self.source.order(&self.layout) {
            Order::Increasing if self.shared.config.generator_lanes() > 1 => Order::KSorted,
            order => order,
        }
    }

    /// Its state now: readiness, generator ID, how far ahead of the wall clock, counters.
    pub fn status(&self, clocks: &Clocks) -> NamespaceStatus {
        NamespaceStatus {
            ready: self.is_ready(clocks),
            generator_id: self.generator_id(),
            ahead_of_wall_ms: self.issuer.ahead_of_wall_ms(clocks),
            counters: self.shared.metrics.snapshot(),
        }
    }

    pub(crate) fn gauges(&self, clocks: &Clocks) -> NamespaceGauges<'_> {
        NamespaceGauges {
            name: &self.name,
            ready: self.is_ready(clocks),
            generator_id: self.generator_id(),
            ahead_of_wall_ms: self.issuer.ahead_of_wall_ms(clocks),
            runs_out_ms: self.layout.capacity().end_ms,
            metrics: &self.shared.metrics,
        }
    }

    /// Makes the namespace ready: claims a generator ID and stores the first window, or starts
    /// the store.
    pub(crate) async fn activate(
        &self,
        backends: &Backends,
        clocks: &Clocks,
        server: &ServerConfig,
    ) -> Result<(), Error> {
        self.issuer.activate(backends, clocks, server).await
    }

    /// The background task until `shutdown`: for source `generator`, keeps the stored mark
    /// ahead and claims again after a lost claim; for the store sources, starts the store if
    /// it is not started yet and probes it after a failure.
    pub(crate) async fn maintain(
        self: Arc<Self>,
        backends: Backends,
        clocks: Arc<Clocks>,
        server: Arc<ServerConfig>,
        shutdown: CancellationToken,
    ) {
        Arc::clone(&self.issuer).maintain(backends, clocks, server, shutdown).await;
    }

    /// `count` IDs (checked by the caller against `max_batch`) appended to `sink` in
    /// increasing order, waiting at most `max_wait_ms` in all; their public forms when the
    /// namespace hands out public IDs. The one way IDs leave a namespace: every API and every
    /// shape (JSON, bare `u64`s, big-endian bytes) comes through here, and each call is
    /// counted once (a request, and a batch when it asked for more than one ID). An ID that
    /// needs the key-version bits ends the batch: the layout has run out under them.
    ///
    /// `shard_key` (checked by [`check_shard_key`](Self::check_shard_key)) replaces the
    /// configured shard key of a `hot-guid` namespace for this call.
    pub(crate) async fn issue_into(
        &self,
        clocks: &Clocks,
        count: u64,
        shard_key: Option<u32>,
        max_wait_ms: u64,
        sink: &mut dyn IdSink,
    ) -> Result<(), Error> {
        let start = sink.len();
        match shard_key {
            None => self.issuer.issue_into(clocks, count, max_wait_ms, sink).await?,
            Some(key) => {
                let key = self.check_shard_key(key)?;
                self.issuer.issue_keyed_into(clocks, count, key, max_wait_ms, sink).await?;
            }
        }
        if let Some(public) = &self.public {
            sink.publish_from(start, &mut |id| {
                public.obfuscate(id).map_err(|e| self.public_exhausted(e))
            })?;
        }
        self.count_call(count);
        Ok(())
    }

    /// One ID at once, as [`issue_into`](Self::issue_into) for a count of 1 would give it,
    /// when the issuer has one ready without waiting; `None` when the call must take
    /// [`issue_one`](Self::issue_one). No sink, no boxed future: the embedded minter's `next`.
    /// Without public IDs nothing can refuse the ID any more, and the issuer counts it.
    #[inline]
    pub(crate) fn try_issue_one(&self, clocks: &Clocks) -> Quick {
        let Some(public) = &self.public else { return self.issuer.try_issue_one(clocks, true) };
        let id = match self.issuer.try_issue_one(clocks, false) {
            Quick::Done(id) => id,
            other => return other,
        };
        let metrics = &self.shared.metrics;
        if let Ok(id) = public.obfuscate(id) {
            NamespaceMetrics::add(&metrics.single_ids, 1);
            Quick::Done(id)
        } else {
            // Issued but not served: the full path takes another, is refused as this one was,
            // and says why.
            NamespaceMetrics::add(&metrics.ids_issued, 1);
            Quick::Slow
        }
    }

    /// The generator issuer of a namespace of source `generator` without public IDs, whose
    /// one-ID path answers without another step: what a [`QuickPath`](crate::QuickPath)
    /// calls. `None` for other sources, and with public IDs (each ID is then permuted).
    pub(crate) fn quick_issuer(&self) -> Option<&Arc<GeneratorIssuer>> {
        if self.public.is_some() { None } else { self.generator.as_ref() }
    }

    /// One ID, waiting at most `max_wait_ms` as [`issue_into`](Self::issue_into) does.
    pub(crate) async fn issue_one(
        &self,
        clocks: &Clocks,
        max_wait_ms: u64,
    ) -> Result<AnyId, Error> {
        if let Quick::Done(id) = self.try_issue_one(clocks) {
            return Ok(id);
        }
        let mut ids = Vec::with_capacity(1);
        self.issuer.issue_into(clocks, 1, max_wait_ms, &mut ids).await?;
        let id = ids.pop().ok_or_else(|| Error::NotReady(self.name.clone()))?;
        let id = self.publish_one(id)?;
        self.count_call(1);
        Ok(id)
    }

    /// A single issued ID's public form, when the namespace hands them out.
    fn publish_one(&self, id: AnyId) -> Result<AnyId, Error> {
        match &self.public {
            Some(public) => public.obfuscate(id).map_err(|e| self.public_exhausted(e)),
            None => Ok(id),
        }
    }

    /// The shard keys a request may choose: `None` unless the layout's IDs carry one.
    pub fn shard_keys(&self) -> Option<ShardKeys> {
        self.layout
            .takes_shard_key()
            .then(|| self.shared.config.shard_keys.unwrap_or(ShardKeys::ALL))
    }

    /// A shard key a request chose: refused unless the layout's IDs carry one (`hot-guid`)
    /// and the key is inside the namespace's `shard_keys`.
    pub fn check_shard_key(&self, key: u32) -> Result<u32, Error> {
        if !self.layout.takes_shard_key() {
            return Err(Error::BadRequest(format!(
                "`shard_key` applies to hot-guid namespaces only; namespace `{}` uses layout \
                 `{}`, whose ids carry no shard key",
                self.name,
                self.layout.name()
            )));
        }
        let keys = self.shard_keys().unwrap_or(ShardKeys::ALL);
        if !keys.contains(key) {
            return Err(Error::BadRequest(format!(
                "`shard_key` {key} is outside the shard keys of namespace `{}` ({keys})",
                self.name
            )));
        }
        Ok(key)
    }

    /// Counts one call of `count` IDs: a request, and a batch when it asked for more than one.
    fn count_call(&self, count: u64) {
        NamespaceMetrics::add(&self.shared.metrics.requests, 1);
        if count > 1 {
            NamespaceMetrics::add(&self.shared.metrics.batches, 1);
        }
    }

    /// Stops issuing, stores the final mark, and releases the claim (the mark stays). A store
    /// source has nothing to persist or release: the unused rest of its ranges (or of its
    /// DecimalId generator ID) is a gap.
    pub(crate) async fn deactivate(&self, coordinator: &dyn Coordinator) -> Result<(), Error> {
        self.issuer.deactivate(coordinator).await
    }
}

/// The issuer of a namespace's source, and the same issuer typed when it is a generator's.
fn issuer_for(shared: Arc<Shared>) -> (Arc<dyn Issuer>, Option<Arc<GeneratorIssuer>>) {
    match shared.source {
        Source::Generator => {
            let generator = Arc::new(GeneratorIssuer::new(shared));
            (Arc::clone(&generator) as Arc<dyn Issuer>, Some(generator))
        }
        Source::Segment => (Arc::new(Stored::<Segment>::new(shared)), None),
        Source::Counters => (Arc::new(Stored::<Counters>::new(shared)), None),
        Source::Redis => (Arc::new(Stored::<Redis>::new(shared)), None),
    }
}
