//! The server's configuration: plain data (serde, so it loads from TOML), validated once when
//! the server starts. Every field documents its default.

use std::{collections::BTreeMap, sync::Arc};

use idmint_coord::{DecimalIdOptions, GeneratorIds, MemoryStore, SegmentAllocator, SegmentOptions};
use idmint_core::{
    BitLayout, DecimalId, FieldValue, GeneratorConfig, GeneratorStride, Icicle, IssuedBy, Layout,
    LayoutConfig, Order, TypePrefix,
};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The default of [`ServerConfig::max_connections_per_ip`]: far above what one well-behaved
/// client needs (a pool of tens of connections), far below the file descriptors of a server
/// (1,024 by default), so one address cannot hold them all.
///
/// # Example
///
/// ```
/// use idmint_engine::{DEFAULT_MAX_CONNECTIONS_PER_IP, ServerConfig};
///
/// assert_eq!(ServerConfig::default().max_connections_per_ip, Some(DEFAULT_MAX_CONNECTIONS_PER_IP));
/// ```
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;

/// The listen backlog of `idmint_server::bind` and the default of
/// [`ServerConfig::listen_backlog`]: room for a burst of new connections while the accept
/// loop catches up (the kernel caps it at `net.core.somaxconn`).
///
/// # Example
///
/// ```
/// use idmint_engine::{DEFAULT_LISTEN_BACKLOG, ServerConfig};
///
/// assert_eq!(ServerConfig::default().listen_backlog, DEFAULT_LISTEN_BACKLOG);
/// ```
pub const DEFAULT_LISTEN_BACKLOG: u32 = 1024;

/// How a server runs: its namespaces and its limits.
///
/// # Example
///
/// ```
/// use idmint_engine::{NamespaceConfig, ServerConfig};
///
/// let config: ServerConfig = serde_json::from_str(
///     r#"{"window_ms": 5000, "namespaces": [{"name": "orders", "layout": "js53"}]}"#,
/// )?;
/// assert_eq!(config.window_ms, 5000);
/// assert_eq!(config.max_batch, 100_000);
/// assert_eq!(config.namespaces[0], NamespaceConfig { layout: "js53".into(), ..NamespaceConfig::named("orders") });
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The namespaces. Default: none given means one namespace, `default`, with the
    /// `snowflake` layout.
    pub namespaces: Vec<NamespaceConfig>,
    /// How far ahead of the clock the high-water mark is stored, in ms. IDs are issued only
    /// inside this window; it is extended in the background when half of it is left.
    /// Default: 3000 (PD's TSO window).
    pub window_ms: u64,
    /// Refuse to start when a stored mark is further ahead of the clock than this, in ms.
    /// Default: 86,400,000 (24 h).
    pub max_ahead_ms: u64,
    /// Start anyway when a stored mark is further ahead than `max_ahead_ms`; IDs then carry
    /// times ahead of the clock. Default: false.
    pub allow_ahead: bool,
    /// Log a WARN line for every step of the wall clock of at least this many ms, either way,
    /// and count it in `idmint_clock_step_seconds`: a thread reads the wall and monotonic
    /// clocks every 250 ms and compares their advance (DESIGN.md, "How are clock steps
    /// seen?"). 0: no watch. Default: 1000.
    pub clock_step_warn_ms: u64,
    /// The largest batch one request may ask for. Default: 100,000.
    pub max_batch: u64,
    /// The largest request body, in bytes. Default: 65,536.
    pub max_body_bytes: usize,
    /// How long a request may wait for the generator (a used-up tick, a window being
    /// extended) before it is answered with 503, in ms. Default: 1000.
    pub max_wait_ms: u64,
    /// How long shutdown waits for in-flight requests, in ms. Default: 10,000.
    pub drain_ms: u64,
    /// How long shutdown reports not ready (`/readyz` 503, gRPC health NOT_SERVING) while
    /// still accepting and answering requests, before it stops accepting, in ms: the time a
    /// load balancer needs to see the 503 and stop sending. 0: stop accepting at once.
    /// Default: 0 here (an embedding program decides); `idmint serve` defaults to 5,000.
    pub shutdown_delay_ms: u64,
    /// Log one event per HTTP request on target `idmint::access` (method, route template,
    /// namespace, status, IDs issued, latency). Default: false.
    pub access_log: bool,
    /// When a namespace finds no generator ID free at start (every ID of its pool is held, or
    /// its fixed ID is) or its coordinator does not answer, start anyway with that namespace
    /// not ready (`/readyz` answers 503) and keep claiming in the background: a spare, which
    /// takes over the generator ID of a server that stops or loses its claim, above that ID's
    /// stored mark. Default: false (refuse to start).
    pub wait_for_claim: bool,
    /// The longest wait between attempts to claim a generator ID while a namespace holds none
    /// (a spare waiting, or a server that lost its claim), in ms. Attempts back off from 50 ms
    /// up to this. Default: 2000.
    pub claim_retry_ms: u64,
    /// Origins whose browser pages may call the HTTP and gRPC(-web) APIs (CORS): each
    /// `scheme://host[:port]`, or `*` for any. Preflights from them are answered, and their
    /// requests get the `Access-Control-*` headers; other origins get none. Default: none.
    pub cors_allow_origins: Vec<String>,
    /// How long a new HTTP connection may take to send its first byte, counted from accept,
    /// in ms. At most `header_timeout_ms`. Default: 5,000.
    pub first_byte_timeout_ms: u64,
    /// How long a request's whole header may take: for the first request of a connection
    /// counted from accept, for the next ones from their first byte, in ms. Default: 10,000.
    pub header_timeout_ms: u64,
    /// How long each request body may take to arrive, counted from the end of its header, in
    /// ms: a body that trickles in is closed with its connection. Default: 10,000.
    pub body_timeout_ms: u64,
    /// How long a keep-alive connection may stay idle between requests, in ms. Default: 30,000.
    pub idle_timeout_ms: u64,
    /// How many connections are open at once, on the HTTP and gRPC ports together. At the
    /// limit, the connection idle the longest (no request or call in flight) is closed for a
    /// new one; with none idle, new connections are closed at once. Default: 10,000.
    pub max_connections: usize,
    /// How many connections one client IP address may hold open at once, on both ports
    /// together; further ones are closed at once. `None` or 0: no cap (behind a proxy that
    /// connects from one address). Default: 256 (DESIGN.md, "Why does the gRPC port share the
    /// HTTP port's admission?").
    pub max_connections_per_ip: Option<usize>,
    /// The listen backlog of the CLI's listeners (`idmint_server::bind_with_backlog`): connections
    /// the kernel completes before they are accepted, so a burst waits instead of being
    /// dropped. Default: 1,024 ([`DEFAULT_LISTEN_BACKLOG`]).
    pub listen_backlog: u32,
    /// How often an idle HTTP/2 connection (the gRPC port, and h2c on the HTTP port) is
    /// pinged, in ms. Default: 30,000.
    pub http2_keepalive_interval_ms: u64,
    /// How long a ping may go unanswered before the connection is closed, in ms.
    /// Default: 10,000.
    pub http2_keepalive_timeout_ms: u64,
    /// Concurrent streams (calls) per HTTP/2 connection: with the connection caps, what
    /// bounds the memory of calls whose message has not arrived (a few KB each).
    /// Default: 100 (the least RFC 9113 recommends; DESIGN.md, "Why does the gRPC port share
    /// the HTTP port's admission?").
    pub http2_max_concurrent_streams: u32,
    /// Streams a client may open and reset before the server has accepted them, per HTTP/2
    /// connection; more closes the connection (protection against rapid reset,
    /// CVE-2023-44487). Default: 20.
    pub http2_max_pending_resets: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            namespaces: Vec::new(),
            window_ms: 3_000,
            max_ahead_ms: 86_400_000,
            allow_ahead: false,
            clock_step_warn_ms: 1_000,
            max_batch: 100_000,
            max_body_bytes: 65_536,
            max_wait_ms: 1_000,
            drain_ms: 10_000,
            shutdown_delay_ms: 0,
            access_log: false,
            wait_for_claim: false,
            claim_retry_ms: 2_000,
            cors_allow_origins: Vec::new(),
            first_byte_timeout_ms: 5_000,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
            max_connections: 10_000,
            max_connections_per_ip: Some(DEFAULT_MAX_CONNECTIONS_PER_IP),
            listen_backlog: DEFAULT_LISTEN_BACKLOG,
            http2_keepalive_interval_ms: 30_000,
            http2_keepalive_timeout_ms: 10_000,
            http2_max_concurrent_streams: 100,
            http2_max_pending_resets: 20,
        }
    }
}

/// One namespace: a name, a layout, and where its IDs come from ([`Source`]).
///
/// # Example
///
/// ```
/// use idmint_engine::{NamespaceConfig, Source};
///
/// let ns = NamespaceConfig { generator_id: Some(7), ..NamespaceConfig::named("orders") };
/// assert_eq!(ns.layout, "snowflake");
/// assert_eq!(ns.source()?, Source::Generator);
/// let seq = NamespaceConfig { layout: "sequence".into(), ..NamespaceConfig::named("invoices") };
/// assert_eq!(seq.source()?, Source::Segment);
/// # Ok::<(), idmint_engine::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NamespaceConfig {
    /// The name: 1 to 64 characters of `a-z`, `0-9`, `-`, `_`. Default: `default`.
    pub name: String,
    /// A built-in layout (`idmint layouts` lists them). Default: `snowflake`.
    pub layout: String,
    /// A custom layout instead of a built-in one (the same table as a layout file).
    /// Default: none.
    pub custom_layout: Option<LayoutConfig>,
    /// Another epoch in Unix ms, for layouts that take one. Default: the layout's.
    pub epoch_ms: Option<u64>,
    /// `trace-id` only: the bits of the counter under the chunk number (1..=21). Default:
    /// elfo's 10. Another width is another layout (its fingerprint differs).
    pub counter_bits: Option<u32>,
    /// Where the IDs come from. Default: derived from the layout: `counters` for
    /// `decimal-id`, `segment` for `sequence`, `generator` for every other layout (`redis` is
    /// never chosen by default). The other settings below say which sources they apply to.
    pub source: Option<Source>,
    /// A fixed generator ID (see `idmint explain`: 0..generators). Source `generator` only.
    /// Default: none, which takes the lowest free one.
    pub generator_id: Option<u64>,
    /// Fixed values of node fields. Fields outside the generator's identity (LableOrg's
    /// `mode`, HotGuid's `shard_key`) are set on the generator. Fields of the identity (a
    /// snowflake `datacenter`, a LableOrg `cluster_id`) are static deployment config beside a
    /// negotiated generator ID: the namespace claims only among the generator IDs that have
    /// them (`idmint_core::Layout::generator_ids_with`; the fields left free must be adjacent).
    /// Not together with `generator_id`. Source `generator` only. Default: none.
    pub fields: BTreeMap<String, FieldSetting>,
    /// A bearer token that requests for this namespace must carry. Default: none (open).
    pub token: Option<String>,
    /// How far ahead of the clock a burst may borrow ticks, in ms. Source `generator` only.
    /// Default: 0 (wait for the next tick).
    pub borrow_ms: u64,
    /// Claim only among the first N generator IDs (`0..N`) instead of all the layout has: to
    /// keep a fleet inside part of the range, or to make a spare wait for the generator ID of
    /// one particular server. Not together with `generator_id`. Source `generator` only.
    /// Default: none (all of them).
    pub generator_pool: Option<u64>,
    /// How many generator IDs this server claims for the namespace and issues from in
    /// parallel, each fenced and marked on its own (1 to 64, and no more than the pool).
    /// Every call takes its IDs from one of them, so each batch stays increasing, and so do
    /// the IDs of one generator ID; IDs of different generator IDs are only k-sorted (by
    /// time), so above 1 the namespace reports its order as `k-sorted`. Not together with
    /// `generator_id`. Source `generator` only. Default: none, which is 1.
    pub generators: Option<u64>,
    /// How ranges are taken from the segment store. Source `segment` only. Default: none,
    /// which is [`SegmentSettings::default`].
    pub segment: Option<SegmentSettings>,
    /// How many IDs one DecimalId generator ID issues before the next generator ID is taken
    /// (1 to 922,337,202), for tests of the switch. Source `counters` only; at least
    /// `max_batch`, so that a batch never spans a switch. Default: none, the layout's
    /// 922,337,202.
    pub max_counter: Option<u64>,
    /// This start's DecimalId launch ID (1 to 99,999), from the deployment's launch log, as
    /// elfo's book recommends. It is taken from the namespace's launch counter only if it is
    /// above every launch counted there, so a launch ID another server or an earlier start
    /// used is refused at start: give every deployment its own. Source `counters` only.
    /// Default: none, which takes the counter's next value at every start.
    pub launch_id: Option<u64>,
    /// Hand out public IDs: every ID this namespace issues (`next`, `batch`, gRPC) goes
    /// through a keyed permutation of the layout's domain (`idmint keygen` makes the key
    /// file), and `decode` reveals them. Needs `token`, or anyone could reveal them. Default:
    /// none (the IDs as issued).
    pub public_ids: Option<PublicIdsSettings>,
    /// A TypeID prefix (`user`: 1 to 63 characters of `a-z` and `_`, starting and ending with
    /// a letter; TypeID specification 0.3). The namespace's IDs are then written as TypeIDs
    /// (`user_01h455vb4pex5vsknk084sn02q` for a 128-bit layout, `user_` and the layout's
    /// usual text for a 64-bit one), and `decode` refuses another prefix, naming both. The
    /// forms `uuid`, `ulid` and the plain formats still give the bare ID when asked for.
    /// Default: none.
    pub type_prefix: Option<String>,
    /// The shard keys a request may choose (`shard_key=K`), as `"A..=B"`, for a `hot-guid`
    /// namespace only; a key outside is refused, and so is a configured `fields.shard_key`
    /// outside. Default: none, which is every `u32` (`0..=4294967295`).
    pub shard_keys: Option<ShardKeys>,
}

/// The shard keys a `hot-guid` namespace takes per request: `first..=last`, written
/// `"A..=B"` in configuration files.
///
/// # Example
///
/// ```
/// use idmint_engine::ShardKeys;
///
/// let keys: ShardKeys = "0..=1023".parse()?;
/// assert_eq!(keys, ShardKeys { first: 0, last: 1023 });
/// assert!(keys.contains(1023) && !keys.contains(1024));
/// assert_eq!(keys.to_string(), "0..=1023");
/// assert!("5..=4".parse::<ShardKeys>().is_err());
/// assert!("0..1024".parse::<ShardKeys>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ShardKeys {
    /// The lowest key allowed.
    pub first: u32,
    /// The highest key allowed.
    pub last: u32,
}

impl ShardKeys {
    /// Every `u32`.
    pub const ALL: ShardKeys = ShardKeys { first: 0, last: u32::MAX };

    /// Whether `key` is allowed.
    pub fn contains(self, key: u32) -> bool {
        (self.first..=self.last).contains(&key)
    }
}

impl std::fmt::Display for ShardKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..={}", self.first, self.last)
    }
}

impl std::str::FromStr for ShardKeys {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "shard_keys must be `A..=B` with whole numbers 0 <= A <= B <= {}, not `{text}`",
                u32::MAX
            )
        };
        let (first, last) = text.split_once("..=").ok_or_else(bad)?;
        let number = |part: &str| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse::<u32>().map_err(|_| bad())
        };
        let (first, last) = (number(first)?, number(last)?);
        if first > last {
            return Err(bad());
        }
        Ok(ShardKeys { first, last })
    }
}

impl TryFrom<String> for ShardKeys {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<ShardKeys> for String {
    fn from(keys: ShardKeys) -> String {
        keys.to_string()
    }
}

/// A namespace's public IDs: the key file (`idmint keygen`), read when the server starts.
///
/// # Example
///
/// ```
/// use idmint_engine::PublicIdsSettings;
///
/// let settings: PublicIdsSettings = serde_json::from_str(r#"{"key_file": "/etc/idmint/keys.json"}"#)?;
/// assert_eq!(settings.key_file, "/etc/idmint/keys.json");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicIdsSettings {
    /// The key file's path.
    pub key_file: String,
}

/// Where a namespace's IDs come from. In configuration files, kebab-case: `generator`,
/// `segment`, `redis`, `counters`.
///
/// | source | IDs | needs | layout |
/// | --- | --- | --- | --- |
/// | `generator` | a generator on a claimed generator ID, under a durable high-water mark | the coordinator | any with a clock |
/// | `segment` | ranges of a segment store, served in increasing order | [`Backends::segments`](crate::Backends::segments) | `sequence` |
/// | `redis` | icicle IDs made by Redis nodes (best-effort, see `idmint_coord::IcicleClient`) | `Backends::redis` (feature `redis`) | `icicle` |
/// | `counters` | DecimalIds whose launch and generator IDs come from persistent counters | [`Backends::counters`](crate::Backends::counters) | `decimal-id` |
///
/// # Example
///
/// ```
/// use idmint_engine::Source;
///
/// let source: Source = serde_json::from_str("\"counters\"")?;
/// assert_eq!(source, Source::Counters);
/// assert_eq!("redis".parse::<Source>(), Ok(Source::Redis));
/// assert_eq!(Source::Segment.to_string(), "segment");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A generator on a claimed generator ID, with a durable window.
    Generator,
    /// Ranges of plain integers from a segment store.
    Segment,
    /// icicle IDs from Redis nodes.
    Redis,
    /// DecimalIds from persistent counters.
    Counters,
}

impl Source {
    /// Every source, in the order of the table above.
    pub const ALL: [Source; 4] =
        [Source::Generator, Source::Segment, Source::Redis, Source::Counters];

    /// The name used in configuration: `generator`, `segment`, `redis`, `counters`.
    ///
    /// # Example
    ///
    /// ```
    /// assert_eq!(idmint_engine::Source::Counters.name(), "counters");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Source::Generator => "generator",
            Source::Segment => "segment",
            Source::Redis => "redis",
            Source::Counters => "counters",
        }
    }

    /// The source a layout gets when none is configured: `counters` for `decimal-id`,
    /// `segment` for `sequence`, `generator` otherwise.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::Layout;
    /// use idmint_engine::Source;
    ///
    /// assert_eq!(Source::default_for(&Layout::builtin("decimal-id")?), Source::Counters);
    /// assert_eq!(Source::default_for(&Layout::builtin("icicle")?), Source::Generator);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn default_for(layout: &Layout) -> Source {
        match layout.issued_by() {
            IssuedBy::Clock => Source::Generator,
            IssuedBy::Counters => Source::Counters,
            IssuedBy::Store => Source::Segment,
        }
    }

    /// The one layout a store source issues, by name: `sequence` for `segment`, `decimal-id`
    /// for `counters`, `icicle` for `redis`; `None` for `generator`, which takes any layout
    /// with a clock.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_engine::Source;
    ///
    /// assert_eq!(Source::Redis.layout_name(), Some("icicle"));
    /// assert_eq!(Source::Generator.layout_name(), None);
    /// ```
    pub fn layout_name(self) -> Option<&'static str> {
        match self {
            Source::Generator => None,
            Source::Segment => Some("sequence"),
            Source::Counters => Some(DecimalId::NAME),
            Source::Redis => Some("icicle"),
        }
    }

    /// The order of the IDs this source issues for `layout`: the layout's own, except that
    /// icicle IDs from several Redis nodes (each with its own clock) are only k-sorted.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_core::{Layout, Order};
    /// use idmint_engine::Source;
    ///
    /// let icicle = Layout::builtin("icicle")?;
    /// assert_eq!(Source::Generator.order(&icicle), Order::Increasing);
    /// assert_eq!(Source::Redis.order(&icicle), Order::KSorted);
    /// # Ok::<(), idmint_core::Error>(())
    /// ```
    pub fn order(self, layout: &Layout) -> Order {
        match (self, layout.order()) {
            (Source::Redis, Order::Increasing) => Order::KSorted,
            (_, order) => order,
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Source {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Source::ALL.into_iter().find(|s| s.name() == text).ok_or_else(|| {
            format!(
                "unknown source `{text}` (expected one of: generator, segment, redis, counters)"
            )
        })
    }
}

/// How a `segment` namespace takes ranges from its store: the settings of
/// `idmint_coord::SegmentOptions` that a server exposes. Each range's length starts at
/// `initial_step`, doubles (up to `max_step`) when ranges go fast and halves (down to
/// `min_step`) when they go slow; the next range is fetched in the background once
/// `prefetch_percent` of the current one is used. A restart or crash leaves the unused rest of
/// the ranges in memory as a gap, never a duplicate.
///
/// # Example
///
/// ```
/// use idmint_engine::SegmentSettings;
///
/// let settings: SegmentSettings = serde_json::from_str(r#"{"initial_step": 5000, "min_step": 5000}"#)?;
/// assert_eq!(settings.max_step, 1_000_000);
/// assert_eq!(settings.prefetch_percent, 15);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SegmentSettings {
    /// The length of the first range. Default: 1,000.
    pub initial_step: u64,
    /// The shortest range after halving. Default: 1,000.
    pub min_step: u64,
    /// The longest range after doubling (at most 2^40). Default: 1,000,000.
    pub max_step: u64,
    /// When this share (1 to 99 percent) of a range is used, the next one is fetched.
    /// Default: 15.
    pub prefetch_percent: u8,
}

impl Default for SegmentSettings {
    fn default() -> Self {
        let options = SegmentOptions::default();
        SegmentSettings {
            initial_step: options.initial_step,
            min_step: options.min_step,
            max_step: options.max_step,
            prefetch_percent: options.prefetch_percent,
        }
    }
}

impl SegmentSettings {
    /// The allocator options these settings stand for (the other options at their defaults).
    pub(crate) fn options(&self) -> SegmentOptions {
        SegmentOptions {
            initial_step: self.initial_step,
            min_step: self.min_step,
            max_step: self.max_step,
            prefetch_percent: self.prefetch_percent,
            ..SegmentOptions::default()
        }
    }
}

/// The most generator IDs one server claims for one namespace (`generators`): far more than
/// the cores that could use them in parallel.
pub(crate) const MAX_GENERATORS: u64 = 64;

/// The suffixes of a `counters` namespace's two counters: `<namespace>-launch` and
/// `<namespace>-generator`.
pub(crate) const LAUNCH_SUFFIX: &str = "-launch";
/// See [`LAUNCH_SUFFIX`].
pub(crate) const GENERATOR_SUFFIX: &str = "-generator";

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig::named(idmint_proto::DEFAULT_NAMESPACE)
    }
}

impl NamespaceConfig {
    /// How many generator IDs the namespace claims and issues from: `generators`, 1 when
    /// unset (validation refuses 0).
    pub(crate) fn generator_lanes(&self) -> u64 {
        self.generators.unwrap_or(1).max(1)
    }

    /// A `snowflake` namespace with this name and every other setting at its default.
    pub fn named(name: &str) -> Self {
        NamespaceConfig {
            name: name.to_owned(),
            layout: "snowflake".to_owned(),
            custom_layout: None,
            epoch_ms: None,
            counter_bits: None,
            generator_id: None,
            fields: BTreeMap::new(),
            token: None,
            borrow_ms: 0,
            generator_pool: None,
            generators: None,
            source: None,
            segment: None,
            max_counter: None,
            launch_id: None,
            public_ids: None,
            type_prefix: None,
            shard_keys: None,
        }
    }

    /// Where the namespace's IDs come from: [`source`](Self::source) if set, else the
    /// layout's default ([`Source::default_for`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the layout is invalid.
    pub fn source(&self) -> Result<Source, Error> {
        match self.source {
            Some(source) => Ok(source),
            None => Ok(Source::default_for(&self.resolve_layout()?)),
        }
    }

    /// The names of the launch and generator counters of a `counters` namespace.
    pub(crate) fn counter_names(&self) -> (String, String) {
        (format!("{}{LAUNCH_SUFFIX}", self.name), format!("{}{GENERATOR_SUFFIX}", self.name))
    }

    /// The DecimalId options of a `counters` namespace.
    pub(crate) fn decimal_options(&self) -> DecimalIdOptions {
        DecimalIdOptions { max_counter: self.max_counter, launch_id: self.launch_id }
    }

    /// The segment options of a `segment` namespace.
    pub(crate) fn segment_options(&self) -> SegmentOptions {
        self.segment.clone().unwrap_or_default().options()
    }

    /// The namespace's layout.
    pub(crate) fn resolve_layout(&self) -> Result<Layout, Error> {
        let bad = |e: idmint_core::Error| Error::Config(format!("namespace `{}`: {e}", self.name));
        let mut layout = match &self.custom_layout {
            Some(custom) => Layout::custom(BitLayout::try_from(custom.clone()).map_err(bad)?),
            None => Layout::builtin(&self.layout).map_err(bad)?,
        };
        if let Some(bits) = self.counter_bits {
            layout = layout.with_counter_bits(bits).map_err(bad)?;
        }
        match self.epoch_ms {
            Some(epoch) => layout.with_epoch(epoch).map_err(bad),
            None => Ok(layout),
        }
    }

    /// The fixed fields as core field values, split into those of the generator identity
    /// (a datacenter, a LableOrg cluster: they narrow which generator IDs may be claimed) and
    /// the others (LableOrg's `mode`, HotGuid's `shard_key`: set on the generator).
    pub(crate) fn split_fields(&self, layout: &Layout) -> (Fields, Fields) {
        let identity: Vec<String> = match layout.generator_count() {
            0 => Vec::new(),
            _ => layout
                .identity(0)
                .map(|f| f.into_iter().map(|(n, _)| n).collect())
                .unwrap_or_default(),
        };
        self.field_values().into_iter().partition(|(name, _)| identity.contains(name))
    }

    /// The generator IDs this namespace may claim: its `generator_id`; otherwise those whose
    /// identity has its fixed identity fields (every one, when it fixes none), the first
    /// `generator_pool` of them when that is set.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when the fixed identity fields are not valid for the layout, or are
    /// given beside `generator_id`.
    pub(crate) fn claimable(&self, layout: &Layout) -> Result<GeneratorIds, Error> {
        let (identity, _) = self.split_fields(layout);
        let bad = |why: String| Error::Config(format!("namespace `{}`: {why}", self.name));
        if let Some(id) = self.generator_id {
            if let Some((name, _)) = identity.first() {
                return Err(bad(format!(
                    "give generator_id or fix `{name}` in fields (to claim among the generator \
                     ids that have it), not both"
                )));
            }
            return Ok(GeneratorIds::Fixed(id));
        }
        let stride = layout.generator_ids_with(&identity).map_err(|e| bad(e.to_string()))?;
        let count = self.generator_pool.map_or(stride.count, |pool| pool.min(stride.count));
        Ok(match (identity.is_empty(), stride) {
            (true, _) => GeneratorIds::Pool { count },
            (false, GeneratorStride { first, step, .. }) => {
                GeneratorIds::Stride { first, step, count }
            }
        })
    }

    /// The checked TypeID prefix, if set.
    pub(crate) fn type_prefix(&self) -> Result<Option<TypePrefix>, Error> {
        self.type_prefix
            .as_deref()
            .map(|p| {
                TypePrefix::new(p).map_err(|e| {
                    Error::Config(format!("namespace `{}`: type_prefix: {e}", self.name))
                })
            })
            .transpose()
    }

    /// The fixed fields as core field values.
    pub(crate) fn field_values(&self) -> Vec<(String, FieldValue)> {
        self.fields
            .iter()
            .map(|(name, value)| {
                let value = match value {
                    FieldSetting::Number(n) => FieldValue::Number(*n),
                    FieldSetting::Text(t) => FieldValue::Text(t.clone()),
                };
                (name.clone(), value)
            })
            .collect()
    }
}

/// Named field values, as the core takes them.
pub(crate) type Fields = Vec<(String, FieldValue)>;

/// A fixed field value in a namespace's configuration: a number or text.
///
/// # Example
///
/// ```
/// use idmint_engine::FieldSetting;
///
/// let mode: FieldSetting = serde_json::from_str("\"time-sequential\"")?;
/// assert_eq!(mode, FieldSetting::Text("time-sequential".into()));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldSetting {
    /// A number.
    Number(u64),
    /// Text.
    Text(String),
}

impl ServerConfig {
    /// Checks the limits and the namespaces, and fills in the default namespace, as
    /// [`Engine::start`](crate::Engine::start) does.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] naming the first setting that is wrong.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_engine::ServerConfig;
    ///
    /// let config = ServerConfig::default().validated()?;
    /// assert_eq!(config.namespaces.len(), 1);
    /// assert!(ServerConfig { window_ms: 1, ..ServerConfig::default() }.validated().is_err());
    /// # Ok::<(), idmint_engine::Error>(())
    /// ```
    pub fn validated(mut self) -> Result<Self, Error> {
        let bad = |msg: String| Err(Error::Config(msg));
        if self.window_ms < 100 || self.window_ms > 3_600_000 {
            return bad(format!("window_ms must be 100..=3600000, not {}", self.window_ms));
        }
        if self.max_batch == 0 || self.max_batch > 10_000_000 {
            return bad(format!("max_batch must be 1..=10000000, not {}", self.max_batch));
        }
        if self.max_body_bytes == 0 {
            return bad("max_body_bytes must be at least 1".into());
        }
        if !(10..=600_000).contains(&self.claim_retry_ms) {
            return bad(format!("claim_retry_ms must be 10..=600000, not {}", self.claim_retry_ms));
        }
        if self.shutdown_delay_ms > 600_000 {
            return bad(format!(
                "shutdown_delay_ms must be 0..=600000, not {}",
                self.shutdown_delay_ms
            ));
        }
        for origin in &self.cors_allow_origins {
            check_origin(origin).map_err(Error::Config)?;
        }
        if self.cors_allow_origins.len() > 1 && self.cors_allow_origins.iter().any(|o| o == "*") {
            return bad("cors_allow_origins: `*` allows every origin; give it alone".into());
        }
        self.check_connections()?;
        if self.namespaces.is_empty() {
            self.namespaces.push(NamespaceConfig::default());
        }
        let mut names = std::collections::HashSet::new();
        for ns in &self.namespaces {
            let valid = !ns.name.is_empty()
                && ns.name.len() <= 64
                && ns.name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !valid {
                return bad(format!(
                    "namespace name `{}` must be 1 to 64 characters of a-z, 0-9, `-` or `_`",
                    ns.name
                ));
            }
            if !names.insert(ns.name.as_str()) {
                return bad(format!("namespace `{}` is configured twice", ns.name));
            }
            if matches!(&ns.token, Some(t) if t.is_empty()) {
                return bad(format!("namespace `{}`: an empty token would let anyone in", ns.name));
            }
            if ns.public_ids.is_some() && ns.token.is_none() {
                return bad(format!(
                    "namespace `{}`: public_ids needs a token, or anyone could reveal its ids",
                    ns.name
                ));
            }
            if let Some(prefix) = &ns.type_prefix {
                ns.type_prefix()?;
                if prefix.is_empty() {
                    return bad(format!(
                        "namespace `{}`: type_prefix is empty; leave it out for no prefix",
                        ns.name
                    ));
                }
            }
            if ns.borrow_ms > self.window_ms {
                return bad(format!(
                    "namespace `{}`: borrow_ms ({}) must not exceed window_ms ({})",
                    ns.name, ns.borrow_ms, self.window_ms
                ));
            }
            let layout = ns.resolve_layout()?;
            // The generator IDs it may claim: all of the layout's, or those with its fixed
            // identity fields.
            let claimable = match ns.source()? {
                Source::Generator => {
                    // Also refuses identity fields beside `generator_id`.
                    let unpooled = NamespaceConfig { generator_pool: None, ..ns.clone() };
                    match unpooled.claimable(&layout)? {
                        GeneratorIds::Fixed(_) => layout.generator_count(),
                        ids => ids.count(),
                    }
                }
                _ => layout.generator_count(),
            };
            check_source(ns, &layout, self.max_batch)?;
            check_shard_keys(ns, &layout)?;
            if let Some(pool) = ns.generator_pool {
                let count = claimable;
                if pool == 0 || pool > count {
                    return bad(format!(
                        "namespace `{}`: generator_pool must be 1..={count} (the layout's \
                         generator ids), not {pool}",
                        ns.name
                    ));
                }
                if ns.generator_id.is_some() {
                    return bad(format!(
                        "namespace `{}`: give generator_id or generator_pool, not both",
                        ns.name
                    ));
                }
            }
            if let Some(k) = ns.generators {
                let pool = ns.generator_pool.unwrap_or(claimable);
                let most = pool.min(MAX_GENERATORS);
                if k == 0 || k > most {
                    return bad(format!(
                        "namespace `{}`: generators must be 1..={most} (at most {MAX_GENERATORS}, \
                         and no more than the generator ids it may claim), not {k}",
                        ns.name
                    ));
                }
                if k > 1 && ns.generator_id.is_some() {
                    return bad(format!(
                        "namespace `{}`: generators = {k} claims several generator ids; give \
                         generator_pool, not generator_id",
                        ns.name
                    ));
                }
            }
        }
        Ok(self)
    }
}

impl ServerConfig {
    /// Checks the connection limits and timeouts: each timeout 1 ms to 1 hour, the first
    /// byte no later than the whole header, the total cap and the backlog at least 1 (a
    /// per-IP cap of 0 is none; one above the total cap never binds).
    fn check_connections(&self) -> Result<(), Error> {
        let bad = |msg: String| Err(Error::Config(msg));
        let timeouts = [
            ("first_byte_timeout_ms", self.first_byte_timeout_ms),
            ("header_timeout_ms", self.header_timeout_ms),
            ("body_timeout_ms", self.body_timeout_ms),
            ("idle_timeout_ms", self.idle_timeout_ms),
            ("http2_keepalive_interval_ms", self.http2_keepalive_interval_ms),
            ("http2_keepalive_timeout_ms", self.http2_keepalive_timeout_ms),
        ];
        for (name, value) in timeouts {
            if !(1..=3_600_000).contains(&value) {
                return bad(format!("{name} must be 1..=3600000, not {value}"));
            }
        }
        if self.first_byte_timeout_ms > self.header_timeout_ms {
            return bad(format!(
                "first_byte_timeout_ms ({}) must not exceed header_timeout_ms ({})",
                self.first_byte_timeout_ms, self.header_timeout_ms
            ));
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            return bad(format!(
                "max_connections must be 1..=1000000, not {}",
                self.max_connections
            ));
        }
        if self.listen_backlog == 0 {
            return bad("listen_backlog must be at least 1".into());
        }
        if self.http2_max_concurrent_streams == 0 {
            return bad("http2_max_concurrent_streams must be at least 1".into());
        }
        if !(1..=10_000).contains(&self.http2_max_pending_resets) {
            return bad(format!(
                "http2_max_pending_resets must be 1..=10000, not {}",
                self.http2_max_pending_resets
            ));
        }
        Ok(())
    }
}

/// Checks `shard_keys`: only for a layout with a shard key, and holding the configured one.
fn check_shard_keys(ns: &NamespaceConfig, layout: &Layout) -> Result<(), Error> {
    let Some(keys) = ns.shard_keys else { return Ok(()) };
    let bad = |msg: String| Err(Error::Config(format!("namespace `{}`: {msg}", ns.name)));
    if !layout.takes_shard_key() {
        return bad(format!(
            "shard_keys applies to layout `hot-guid` only, not `{}` (its ids carry no shard key)",
            layout.name()
        ));
    }
    let configured = match ns.fields.get("shard_key") {
        Some(FieldSetting::Number(key)) => *key,
        // Checked as the generator is made, with the layout's message.
        Some(FieldSetting::Text(_)) => return Ok(()),
        None => 0,
    };
    if u32::try_from(configured).is_ok_and(|key| keys.contains(key)) {
        Ok(())
    } else {
        bad(format!(
            "the shard key of requests without one (fields.shard_key, default 0) is {configured}, \
             outside shard_keys {keys}"
        ))
    }
}

/// Checks that a namespace's source fits its layout, and that it sets only the settings of its
/// source.
fn check_source(ns: &NamespaceConfig, layout: &Layout, max_batch: u64) -> Result<(), Error> {
    let bad = |msg: String| Err(Error::Config(format!("namespace `{}`: {msg}", ns.name)));
    let source = ns.source.unwrap_or_else(|| Source::default_for(layout));
    let name = layout.name();
    let issued_by = layout.issued_by();
    match source {
        Source::Generator if issued_by == IssuedBy::Store => {
            return bad(format!(
                "layout `{name}` has no generator: its ids come from a segment store \
                 (source `segment`)"
            ));
        }
        Source::Generator if issued_by == IssuedBy::Counters => {
            return bad(format!(
                "layout `{name}` takes its launch and generator ids from persistent counters: \
                 use source `counters`"
            ));
        }
        Source::Segment if issued_by != IssuedBy::Store => {
            return bad(format!(
                "source `segment` issues plain integers: it needs layout `sequence`, not `{name}`"
            ));
        }
        Source::Counters if issued_by != IssuedBy::Counters => {
            return bad(format!(
                "source `counters` issues DecimalIds: it needs layout `decimal-id`, not `{name}`"
            ));
        }
        // The Redis nodes run icicle's script: exactly icicle's layout, epoch included.
        Source::Redis if *layout != Layout::custom(Icicle::LAYOUT) => {
            return bad(format!(
                "source `redis` issues icicle's ids (icicle's epoch, shards set on the Redis \
                 nodes): it needs layout `icicle` without another epoch, not `{name}`"
            ));
        }
        _ => {}
    }
    if source != Source::Generator {
        let generator_only = [
            ("generator_id", ns.generator_id.is_some()),
            ("generator_pool", ns.generator_pool.is_some()),
            ("generators", ns.generators.is_some()),
            ("fields", !ns.fields.is_empty()),
            ("borrow_ms", ns.borrow_ms != 0),
        ];
        if let Some((setting, _)) = generator_only.iter().find(|(_, set)| *set) {
            return bad(format!(
                "`{setting}` applies to source `generator` only, not to source `{source}`"
            ));
        }
    }
    // A fixed generator ID and the fixed fields make a generator here, before any claim.
    if let (Source::Generator, Some(id)) = (source, ns.generator_id) {
        let config = GeneratorConfig { borrow_ms: ns.borrow_ms, ..GeneratorConfig::default() };
        if let Err(e) = layout.generator_for(id, &ns.field_values(), &config) {
            return bad(e.to_string());
        }
    }
    if ns.segment.is_some() && source != Source::Segment {
        return bad(format!("`segment` settings apply to source `segment` only, not `{source}`"));
    }
    if let Some(max) = ns.max_counter {
        if source != Source::Counters {
            return bad(format!("`max_counter` applies to source `counters` only, not `{source}`"));
        }
        if !(max_batch..=DecimalId::MAX_COUNTER).contains(&max) {
            return bad(format!(
                "max_counter must be {max_batch}..={} (at least max_batch, so that a batch \
                 never spans two generator ids), not {max}",
                DecimalId::MAX_COUNTER
            ));
        }
    }
    if let Some(launch) = ns.launch_id {
        if source != Source::Counters {
            return bad(format!("`launch_id` applies to source `counters` only, not `{source}`"));
        }
        if !(1..=DecimalId::MAX_LAUNCH_ID).contains(&launch) {
            return bad(format!(
                "launch_id must be 1..={} (0 is for tests), not {launch}",
                DecimalId::MAX_LAUNCH_ID
            ));
        }
    }
    match source {
        Source::Segment => {
            // The allocator checks its options (and the name) without touching any store.
            let probe = Arc::new(MemoryStore::new());
            if let Err(e) = SegmentAllocator::new(probe, &ns.name, ns.segment_options()) {
                return bad(coord_reason(e));
            }
        }
        Source::Counters => {
            let longest = ns.name.len() + GENERATOR_SUFFIX.len();
            if longest > 64 {
                return bad(format!(
                    "its counter names (`<name>{GENERATOR_SUFFIX}`) would be longer than 64 \
                     characters; use a name of at most {} characters",
                    64 - GENERATOR_SUFFIX.len()
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The reason inside a coordination error about a request, without its `invalid claim
/// request:` prefix.
fn coord_reason(e: idmint_coord::Error) -> String {
    match e {
        idmint_coord::Error::InvalidRequest(reason) => reason,
        other => other.to_string(),
    }
}

/// Checks one entry of `cors_allow_origins`: `*`, or an origin as a browser sends it
/// (`scheme://host` or `scheme://host:port`, no path, no trailing slash, and a valid HTTP
/// header value: visible ASCII, spaces and tabs, no control characters).
fn check_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let bad = |why: &str| {
        Err(format!(
            "cors_allow_origins: `{}` is not an origin ({why}); write `*` or \
             scheme://host[:port], e.g. https://app.example.com",
            origin.chars().take(100).collect::<String>()
        ))
    };
    let Some((scheme, rest)) = origin.split_once("://") else {
        return bad("no scheme");
    };
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        return bad("the scheme must be lowercase letters, like http or https");
    }
    if rest.is_empty() {
        return bad("no host");
    }
    if rest.contains(['/', '?', '#', '@', ' ']) {
        return bad("an origin has no path, query, user or spaces");
    }
    // The bytes an HTTP header value may hold (as the `http` crate's `HeaderValue` checks).
    if !origin.bytes().all(|b| (b >= 32 && b != 127) || b == b'\t') {
        return bad("not a valid header value");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_are_checked() {
        let check = |change: fn(&mut ServerConfig), ok: bool| {
            let mut config = ServerConfig::default();
            change(&mut config);
            assert_eq!(config.validated().is_ok(), ok);
        };
        check(|_| {}, true);
        check(|c| c.first_byte_timeout_ms = 0, false);
        check(|c| c.header_timeout_ms = 3_600_001, false);
        check(|c| c.body_timeout_ms = 0, false);
        check(|c| c.idle_timeout_ms = 0, false);
        check(|c| c.first_byte_timeout_ms = c.header_timeout_ms + 1, false);
        check(|c| c.first_byte_timeout_ms = c.header_timeout_ms, true);
        check(|c| c.max_connections = 0, false);
        // 0 is no cap, as is None; a cap above the total never binds.
        check(|c| c.max_connections_per_ip = Some(0), true);
        check(|c| c.max_connections_per_ip = None, true);
        check(|c| c.max_connections_per_ip = Some(c.max_connections + 1), true);
        check(|c| c.max_connections_per_ip = Some(1), true);
        check(|c| c.listen_backlog = 0, false);
        check(|c| c.listen_backlog = 1, true);
        check(|c| c.http2_max_concurrent_streams = 0, false);
        check(|c| c.http2_max_pending_resets = 0, false);
        check(|c| c.http2_keepalive_timeout_ms = 0, false);
        check(|c| c.shutdown_delay_ms = 0, true);
        check(|c| c.shutdown_delay_ms = 600_000, true);
        check(|c| c.shutdown_delay_ms = 600_001, false);
    }

    #[test]
    fn origins_are_checked() {
        let check = |origin: &str, ok: bool| {
            assert_eq!(check_origin(origin).is_ok(), ok, "{origin:?}: {:?}", check_origin(origin))
        };
        check("*", true);
        check("http://127.0.0.1:5173", true);
        check("https://app.example.com", true);
        check("app.example.com", false);
        check("https://app.example.com/", false);
        check("https://app.example.com/path", false);
        check("https://", false);
        check("HTTPS://x", false);
        check("https://user@x", false);
        check("https://x\n", false);
        check("https://x\u{7f}", false);
        check("https://x\t", true);
        check("https://caf\u{e9}.example", true);
        check("", false);
    }
}
