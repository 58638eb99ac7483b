//! `idmint serve`: runs the ID service on the embedded file store, or (feature `etcd`) as one
//! server of a fleet sharing an etcd cluster, configured by flags, `IDMINT_*` environment
//! variables and an optional TOML file (in that order of precedence). Namespaces of the other
//! sources take their IDs from segments and counters (the file store in the data directory, or
//! Postgres with feature `postgres`) and from Redis nodes (feature `redis`).

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use clap::Parser;
use idmint_coord::{
    Adopt, Coordinator, CounterStore, FLEET_DIR, FileCoordinator, FileStore, Remembered,
    SegmentStore,
};
use idmint_core::{Clock, SystemClock};
use idmint_server::{Backends, NamespaceConfig, Server, ServerConfig, Source};
use tokio_util::sync::CancellationToken;

#[cfg(not(feature = "etcd"))]
use crate::config::no_etcd_feature;
use crate::config::{
    ConnectionArgs, CoordinatorArg, CountersArg, DEFAULT_DATA_DIR, DEFAULT_LEASE_TTL,
    DEFAULT_LISTEN, EtcdArgs, EtcdSettings, FileConfig, SentinelConfig,
};
use crate::controls::{ControlArgs, Controls};

/// Flags of `idmint serve`. Each can also come from the environment variable it names, and
/// most from the configuration file; a flag beats the environment, which beats the file.
#[derive(Debug, Parser)]
#[command(after_help = "The configuration file (TOML) holds `listen`, `grpc_listen`, `data_dir`,
`log`, the etcd settings (`etcd = [\"http://...\"]`, `etcd_prefix`, `lease_ttl`, `etcd_scheme`,
`etcd_lable_prefix`), the stores of the other sources (`postgres = \"postgresql://...\"`,
`postgres_promotion_margin`, `postgres_promotion_counter_margin`,
`postgres_promotion_mark_margin_ms`, `coordinator`, `redis =
[\"redis://...\"]` or `redis_sentinel = { master = \"mymaster\", sentinels =
[\"redis://...:26379\"] }`, `counters`), and a [server] table with the server's limits and
its [[server.namespaces]] (each with its `source`); see docs/operations.md. Once it runs,
`curl -s 'http://127.0.0.1:8080/v1/batch?count=1000'` returns 1,000 IDs, and a browser on
http://127.0.0.1:8080/ shows the status page. With --grpc-listen,
the gRPC API (idmint.v1.IdMint, and grpc.health.v1.Health) answers on a second port; the
.proto file is crates/idmint-proto/proto/idmint/v1/idmint.proto.

Fleet mode (the `etcd` feature, on by default): with --etcd, generator-ID claims live on etcd
leases and high-water marks in etcd, so any number of servers share the generator IDs of a
namespace; a server that stops (or is partitioned away) loses its lease after --lease-ttl
seconds, and another takes the ID over strictly above its stored mark. Shutdown revokes the
leases and keeps the marks. With --wait-for-claim a server that finds no generator ID free
starts not ready and waits for one (a spare). With --coordinator postgres (and --postgres)
the same fleet runs on Postgres instead: one row per generator ID in `idmint_claims`, its
lease timed by the database's clock and renewed every --lease-ttl/3, every mark write fenced
by the claim's epoch; `idmint lease list --postgres URL` shows it.

Sources: where a namespace's IDs come from (--source, or `source` in the file). `generator`
(the default) claims a generator ID as above. `segment` (the default of --layout sequence)
hands out plain increasing integers from ranges of a segment store: Postgres with
--postgres (any number of servers share a namespace), else the file store in
<data-dir>/store.d (servers of one machine). `counters` (the default of --layout
decimal-id) takes a new DecimalId launch ID and generator ID at every start from persistent
counters (--counters). `redis` serves icicle IDs made by the Redis nodes of --redis, each
with a logical shard ID set by `idmint icicle set-shard`, or by the one primary Redis Sentinel
names (--redis-sentinel-master with --redis-sentinels), followed through failovers; it is
best-effort (a Redis failover can repeat IDs; a guard narrows that). --source alone also
picks its layout (sequence, decimal-id, icicle). --postgres refuses a database with fsync or
synchronous_commit off, and a standby; list every host with target_session_attrs=read-write to
follow a promotion. A server that finds the database promoted from a standby or restored (a
new timeline or system) first raises every range and counter by --postgres-promotion-margin,
once for the fleet.

Examples:
  idmint serve
  idmint serve --listen 0.0.0.0:8080 --data-dir /var/lib/idmint
  idmint serve --grpc-listen 127.0.0.1:50051
  idmint serve --cors-allow-origin https://app.example.com
  idmint serve --layout js53 --generator-id 3 --token \"$SECRET\"
  idmint serve --config idmint.toml
  idmint serve --layout sequence
  idmint serve --layout sequence --postgres postgresql://idmint@db/idmint
  idmint serve --coordinator postgres --postgres postgresql://idmint@db/idmint
  idmint serve --layout decimal-id --counters file
  idmint serve --source redis \\
      --redis redis://10.0.0.1:6379,redis://10.0.0.2:6379
  idmint serve --source redis --redis-sentinel-master mymaster \\
      --redis-sentinels redis://10.0.0.1:26379,redis://10.0.0.2:26379,redis://10.0.0.3:26379
  idmint serve --etcd http://10.0.0.1:2379,http://10.0.0.2:2379 --lease-ttl 10
  idmint serve --etcd http://127.0.0.1:2379 --generator-pool 4 --wait-for-claim
  idmint serve --etcd http://127.0.0.1:2379 --layout lable \\
      --etcd-scheme lable-org --etcd-lable-prefix unique-id/")]
pub(crate) struct Args {
    /// Address for the HTTP API.
    #[arg(long, env = "IDMINT_LISTEN", value_name = "ADDR")]
    listen: Option<String>,
    /// Address for the gRPC API, e.g. 127.0.0.1:50051 [default: none, no gRPC].
    #[arg(long, env = "IDMINT_GRPC_LISTEN", value_name = "ADDR")]
    grpc_listen: Option<String>,
    /// An origin whose browser pages may call the HTTP and gRPC-web APIs (CORS):
    /// scheme://host[:port], or `*` for any. Repeat the flag (or separate with commas) for
    /// more; other origins get no CORS headers [default: none; the file's
    /// `server.cors_allow_origins`].
    // `[:port]` is the origin's optional part, read by clap as help, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(
        long = "cors-allow-origin",
        env = "IDMINT_CORS_ALLOW_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = ','
    )]
    cors_allow_origin: Vec<String>,
    /// Directory of the embedded store: generator-ID claims and high-water marks (not used
    /// for them with --etcd), and in its `store.d` folder the file store of segments and
    /// counters [default: ./idmint-data].
    #[arg(long, env = "IDMINT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A TOML configuration file [default: none].
    #[arg(long, env = "IDMINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Layout of the default namespace, when the file configures none [default: snowflake].
    #[arg(long, env = "IDMINT_LAYOUT", value_name = "NAME")]
    layout: Option<String>,
    /// Where the default namespace's IDs come from: generator, segment, counters or redis
    /// [default: from the layout: segment for sequence, counters for decimal-id, else
    /// generator]. Without --layout (and a file without namespaces) it also picks the layout:
    /// sequence, decimal-id or icicle.
    #[arg(long, env = "IDMINT_SOURCE", value_name = "SOURCE")]
    source: Option<Source>,
    /// Postgres connection string (postgresql://user@host/db) for segments and DecimalId
    /// counters [default: none, the file store in --data-dir]. Refused when the database has
    /// fsync or synchronous_commit off. Needs a build with the `postgres` feature (default).
    #[arg(long, env = "IDMINT_POSTGRES", value_name = "URL", hide_env_values = true)]
    postgres: Option<String>,
    /// How far every Postgres segment row is raised when a server finds the database on a new
    /// history (a standby promoted, a restore: a new timeline or system), before it hands out
    /// any range: more than the fleet hands out during the standby's worst replication lag
    /// (IDs/s × seconds). 0 raises nothing: only with synchronous replication.
    #[arg(long, env = "IDMINT_POSTGRES_PROMOTION_MARGIN", value_name = "IDS")]
    postgres_promotion_margin: Option<u64>,
    /// The same for Postgres counters (DecimalId launch IDs, one per server start).
    #[arg(long, env = "IDMINT_POSTGRES_PROMOTION_COUNTER_MARGIN", value_name = "N")]
    postgres_promotion_counter_margin: Option<u64>,
    /// The same for the generator-ID marks of --coordinator postgres, in ms: more than the
    /// standby's worst lag plus --window-ms.
    #[arg(long, env = "IDMINT_POSTGRES_PROMOTION_MARK_MARGIN_MS", value_name = "MS")]
    postgres_promotion_mark_margin_ms: Option<u64>,
    /// Redis nodes for namespaces of source redis, comma-separated (redis://host:port), each
    /// with its logical shard ID set [default: none]. Needs a build with the `redis` feature
    /// (default).
    #[arg(
        long,
        env = "IDMINT_REDIS",
        value_name = "URLS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    redis: Vec<String>,
    /// The Sentinel master name of the Redis primary for namespaces of source redis, instead
    /// of --redis: the primary is asked of --redis-sentinels at every (re)connection, so a
    /// failover is followed [default: none].
    #[arg(long, env = "IDMINT_REDIS_SENTINEL_MASTER", value_name = "NAME")]
    redis_sentinel_master: Option<String>,
    /// The Redis Sentinels to ask for --redis-sentinel-master's primary, comma-separated
    /// (redis://host:port) [default: none].
    #[arg(
        long,
        env = "IDMINT_REDIS_SENTINELS",
        value_name = "URLS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    redis_sentinels: Vec<String>,
    /// Where DecimalId counters live: file (in --data-dir), postgres or etcd [default:
    /// postgres with --postgres, else etcd with --etcd, else file].
    #[arg(long, env = "IDMINT_COUNTERS", value_name = "STORE")]
    counters: Option<CountersArg>,
    /// Fixed generator ID of the default namespace [default: the lowest free one].
    #[arg(long, env = "IDMINT_GENERATOR_ID", value_name = "N")]
    generator_id: Option<u64>,
    /// Take the default namespace's fixed generator ID from the StatefulSet ordinal at the end
    /// of $HOSTNAME (`idmint-7` serves generator 7); a hostname without one, or an ordinal
    /// outside the layout's range, is refused at start [default: false; the file's
    /// `generator_id_from_hostname`].
    #[arg(
        long,
        env = "IDMINT_GENERATOR_ID_FROM_HOSTNAME",
        conflicts_with_all = ["generator_id", "generator_pool", "generators"]
    )]
    generator_id_from_hostname: bool,
    /// Claim only among the first N generator IDs (0..N) of the default namespace
    /// [default: all the layout has].
    #[arg(long, env = "IDMINT_GENERATOR_POOL", value_name = "N", conflicts_with = "generator_id")]
    generator_pool: Option<u64>,
    /// How many generator IDs the default namespace claims and issues from in parallel; above 1
    /// its IDs are increasing per generator ID and k-sorted across them.
    #[arg(long, env = "IDMINT_GENERATORS", value_name = "K", conflicts_with = "generator_id")]
    generators: Option<u64>,
    /// When no generator ID is free, start anyway, not ready, and keep claiming until one is:
    /// a spare [default: false, refuse to start]. etcd must still answer at start.
    #[arg(long, env = "IDMINT_WAIT_FOR_CLAIM")]
    wait_for_claim: bool,
    /// The longest wait between attempts to claim a generator ID while a namespace holds none,
    /// in ms.
    #[arg(long, env = "IDMINT_CLAIM_RETRY_MS", value_name = "MS")]
    claim_retry_ms: Option<u64>,
    /// Bearer token the default namespace requires [default: none].
    #[arg(long, env = "IDMINT_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How far ahead of the clock the durable high-water mark is kept, in ms.
    #[arg(long, env = "IDMINT_WINDOW_MS", value_name = "MS")]
    window_ms: Option<u64>,
    /// Start with a --window-ms longer than the lease TTL (--lease-ttl): then each takeover
    /// of a generator ID may start further ahead of the clock than the last (DESIGN.md, "Why
    /// must the window fit in the lease TTL?") [default: false, refused].
    #[arg(long, env = "IDMINT_ALLOW_LONG_WINDOW")]
    allow_long_window: bool,
    /// Log a WARN line for every step of the wall clock of at least this many ms, in either
    /// direction, and count it in idmint_clock_step_seconds; 0 turns the clock watch off.
    #[arg(long, env = "IDMINT_CLOCK_STEP_WARN_MS", value_name = "MS")]
    clock_step_warn_ms: Option<u64>,
    /// The largest batch one request may ask for.
    #[arg(long, env = "IDMINT_MAX_BATCH", value_name = "N")]
    max_batch: Option<u64>,
    /// Refuse to start when a stored mark is further ahead of the clock than this, in ms.
    #[arg(long, env = "IDMINT_MAX_AHEAD_MS", value_name = "MS")]
    max_ahead_ms: Option<u64>,
    /// Start even when a stored mark is further ahead of the clock than --max-ahead-ms
    /// [default: false].
    #[arg(long, env = "IDMINT_ALLOW_AHEAD")]
    allow_ahead: bool,
    /// Start on a data directory that is not what idmint last wrote (copied, restored, a mark
    /// or store file lost or rolled back), once you are sure that no other copy of it is in
    /// use: claims then start above the clock plus --adopt-margin-ms or their stored marks,
    /// whichever is greater, segments jump by 10^12 and counters by 1,000. With --etcd it
    /// adopts the data directory's memory of the cluster (`fleet.d`). See RELIABILITY.md
    /// [default: false].
    #[arg(long, env = "IDMINT_ADOPT_DATA_DIR")]
    adopt_data_dir: bool,
    /// The safety margin of --adopt-data-dir, in ms: it must cover how far this machine's clock
    /// may be behind the times of IDs the other copy issued.
    #[arg(long, env = "IDMINT_ADOPT_MARGIN_MS", value_name = "MS", requires = "adopt_data_dir")]
    adopt_margin_ms: Option<u64>,
    /// The log's form on stderr: text (coloured only on a terminal, see --color) or json (one
    /// object per line) [default: text].
    #[arg(long, env = "IDMINT_LOG_FORMAT", value_enum, value_name = "FORMAT")]
    log_format: Option<crate::logging::LogFormat>,
    /// Log filter, as in RUST_LOG [default: info].
    #[arg(long, env = "IDMINT_LOG", value_name = "FILTER")]
    log: Option<String>,
    /// Log one line per HTTP request on target `idmint::access`: method, route template,
    /// namespace, status, IDs issued and latency [default: false; the file's
    /// `server.access_log`].
    #[arg(long, env = "IDMINT_ACCESS_LOG")]
    access_log: bool,
    /// On SIGTERM or Ctrl-C, report not ready (`/readyz` 503) and keep serving for this long
    /// before closing the listener, so that load balancers stop sending first; 0 closes at
    /// once. In ms, at most 600000.
    #[arg(long, env = "IDMINT_SHUTDOWN_DELAY_MS", value_name = "MS")]
    shutdown_delay_ms: Option<u64>,
    /// Keep the memory glibc's allocator holds after a burst of connections, instead of giving
    /// it back to the kernel (`malloc_trim`, checked every 2 s, only when the resident size is
    /// 16 MB above its floor) [default: false, give it back].
    #[arg(long, env = "IDMINT_NO_MEMORY_TRIM")]
    no_memory_trim: bool,
    #[command(flatten)]
    connections: ConnectionArgs,
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Where generator-ID claims and high-water marks live: file (in --data-dir, the servers
    /// of one machine), etcd (--etcd) or postgres (--postgres: a fleet on the database you
    /// already run, leases timed by its clock) [default: etcd with --etcd, else file].
    #[arg(long, env = "IDMINT_COORDINATOR", value_name = "STORE")]
    coordinator: Option<CoordinatorArg>,
    /// The lease TTL of each generator-ID claim in etcd or Postgres, in seconds (at least 2 on
    /// etcd, 1 on Postgres). A server that stops keeps its generator IDs this long; one that
    /// cannot renew its lease stops extending its window about a second earlier.
    #[arg(long, env = "IDMINT_LEASE_TTL", value_name = "SECS")]
    lease_ttl: Option<u32>,
    #[command(flatten)]
    controls: ControlArgs,
}

/// Where claims and marks are kept.
#[derive(Debug)]
enum Store {
    File(PathBuf),
    Etcd(EtcdSettings),
    /// `--coordinator postgres`: the connection string and the lease TTL in seconds.
    Postgres {
        url: String,
        lease_ttl: u32,
    },
}

/// The StatefulSet ordinal at the end of a pod's hostname (`idmint-7` → 7): the digits after
/// the last `-`. The layout checks the range, as for --generator-id.
fn ordinal(hostname: &str) -> anyhow::Result<u64> {
    let digits = hostname.rsplit_once('-').map(|(_, tail)| tail).unwrap_or_default();
    let ordinal = (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse::<u64>().ok())
        .flatten();
    ordinal.with_context(|| {
        format!(
            "--generator-id-from-hostname: the hostname `{hostname}` does not end in a \
             StatefulSet ordinal (`<name>-<n>`, as in `idmint-7`); set $HOSTNAME or give \
             --generator-id"
        )
    })
}

/// The defaults `idmint serve --help` shows as `[default: …]`, by argument, each read from
/// the constant or the default configuration a run falls back to: one source for both.
pub(crate) fn help_defaults() -> Vec<(&'static str, String)> {
    let server = ServerConfig::default();
    let mut defaults = vec![
        ("listen", DEFAULT_LISTEN.to_owned()),
        // An unset `generators` is one generator ID (the server's rule).
        ("generators", "1".to_owned()),
        ("claim_retry_ms", server.claim_retry_ms.to_string()),
        ("window_ms", server.window_ms.to_string()),
        ("clock_step_warn_ms", server.clock_step_warn_ms.to_string()),
        ("max_batch", server.max_batch.to_string()),
        ("max_ahead_ms", server.max_ahead_ms.to_string()),
        ("adopt_margin_ms", DEFAULT_ADOPT_MARGIN_MS.to_string()),
        (
            "shutdown_delay_ms",
            format!("{DEFAULT_SHUTDOWN_DELAY_MS}; the file's `server.shutdown_delay_ms`"),
        ),
        ("lease_ttl", DEFAULT_LEASE_TTL.to_string()),
        ("first_byte_timeout_ms", server.first_byte_timeout_ms.to_string()),
        ("header_timeout_ms", server.header_timeout_ms.to_string()),
        ("body_timeout_ms", server.body_timeout_ms.to_string()),
        ("idle_timeout_ms", server.idle_timeout_ms.to_string()),
        ("max_connections", server.max_connections.to_string()),
        ("max_connections_per_ip", server.max_connections_per_ip.unwrap_or(0).to_string()),
        ("listen_backlog", server.listen_backlog.to_string()),
        ("http2_keepalive_interval_ms", server.http2_keepalive_interval_ms.to_string()),
        ("http2_keepalive_timeout_ms", server.http2_keepalive_timeout_ms.to_string()),
        ("http2_max_concurrent_streams", server.http2_max_concurrent_streams.to_string()),
        ("http2_max_pending_resets", server.http2_max_pending_resets.to_string()),
    ];
    #[cfg(feature = "postgres")]
    {
        let postgres = idmint_coord::PostgresOptions::default();
        defaults.extend([
            ("postgres_promotion_margin", postgres.promotion_margin.to_string()),
            ("postgres_promotion_counter_margin", postgres.promotion_counter_margin.to_string()),
            ("postgres_promotion_mark_margin_ms", postgres.promotion_mark_margin_ms.to_string()),
        ]);
    }
    defaults
}

/// `serve`'s command with each of [`help_defaults`] at the end of its argument's help.
pub(crate) fn with_help_defaults(command: clap::Command) -> clap::Command {
    with_defaults_of(command, |_| true)
}

/// Another command's arguments of the same name and meaning (`gen`'s `lease_ttl` and
/// `window_ms`, of the embedded minter) with `serve`'s defaults for them: one source for both.
pub(crate) fn with_defaults_of(
    command: clap::Command,
    wanted: impl Fn(&str) -> bool,
) -> clap::Command {
    help_defaults().into_iter().filter(|(id, _)| wanted(id)).fold(
        command,
        |command, (id, value)| {
            command.mut_arg(id, |arg| {
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                let help = help.trim_end_matches('.');
                arg.help(format!("{help} [default: {value}]"))
            })
        },
    )
}

/// Where claims and marks are kept: `--coordinator`, else etcd with --etcd, else the data
/// directory.
fn store(args: &Args, file: &FileConfig, data_dir: &Path) -> anyhow::Result<Store> {
    let chosen = args.coordinator.or(file.coordinator);
    if chosen == Some(CoordinatorArg::Postgres) {
        let etcd = EtcdSettings::resolve(&args.etcd, None, file)?;
        anyhow::ensure!(etcd.is_none(), "--coordinator postgres and --etcd: give one of them");
        let url = args.postgres.clone().or(file.postgres.clone()).filter(|p| !p.is_empty());
        let url = url.context("--coordinator postgres needs --postgres URL")?;
        let lease_ttl = args.lease_ttl.or(file.lease_ttl).unwrap_or(DEFAULT_LEASE_TTL);
        anyhow::ensure!(
            (1..=86_400).contains(&lease_ttl),
            "--lease-ttl must be 1..=86400 s with --coordinator postgres, not {lease_ttl}"
        );
        return Ok(Store::Postgres { url, lease_ttl });
    }
    let etcd = EtcdSettings::resolve(&args.etcd, args.lease_ttl, file)?;
    Ok(match (chosen, etcd) {
        (Some(CoordinatorArg::Etcd), None) => anyhow::bail!("--coordinator etcd needs --etcd"),
        (Some(CoordinatorArg::File), Some(_)) => {
            anyhow::bail!("--coordinator file and --etcd: give one of them")
        }
        (_, Some(etcd)) => Store::Etcd(etcd),
        (_, None) => Store::File(data_dir.to_path_buf()),
    })
}

/// The folder of the file store (segments and counters) inside the data directory. Namespace
/// folders of the file coordinator never contain a `.`, so the two never meet.
pub(crate) const FILE_STORE_DIR: &str = "store.d";

/// `--shutdown-delay-ms` when neither a flag nor the file sets it: long enough for a load
/// balancer that checks `/readyz` every second or two to see the 503 (the library's default
/// is 0: a program that embeds it decides).
const DEFAULT_SHUTDOWN_DELAY_MS: u64 = 5_000;

/// The safety margin of --adopt-data-dir: ten minutes of clock error.
const DEFAULT_ADOPT_MARGIN_MS: u64 = 600_000;

/// The stores of the other sources, after flags, environment and file are merged.
#[derive(Debug)]
struct StoreSettings {
    /// The data directory (the file store lives in its `store.d`).
    data_dir: PathBuf,
    /// Set with --adopt-data-dir: open the data directory even if it is not trusted.
    adopt: Option<Adopt>,
    postgres: Option<String>,
    /// The promotion margins of segments, counters and marks (the store's defaults when
    /// `None`).
    postgres_margins: PostgresMargins,
    redis: Vec<String>,
    /// The Sentinel master and its sentinels, instead of `redis`.
    redis_sentinel: Option<SentinelConfig>,
    counters: CountersArg,
}

impl StoreSettings {
    fn resolve(
        args: &Args,
        file: &FileConfig,
        data_dir: PathBuf,
        etcd: bool,
    ) -> anyhow::Result<StoreSettings> {
        let postgres = args.postgres.clone().or(file.postgres.clone()).filter(|p| !p.is_empty());
        let redis: Vec<String> = if args.redis.is_empty() {
            file.redis.clone().unwrap_or_default()
        } else {
            args.redis.clone()
        };
        let redis: Vec<String> =
            redis.iter().map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect();
        let redis_sentinel = redis_sentinel(args, file)?;
        anyhow::ensure!(
            redis.is_empty() || redis_sentinel.is_none(),
            "give the Redis nodes either with --redis (`redis`) or through Sentinel with \
             --redis-sentinel-master (`redis_sentinel`), not both"
        );
        let counters = match args.counters.or(file.counters) {
            Some(counters) => counters,
            None if postgres.is_some() => CountersArg::Postgres,
            None if etcd => CountersArg::Etcd,
            None => CountersArg::File,
        };
        anyhow::ensure!(
            counters != CountersArg::Postgres || postgres.is_some(),
            "--counters postgres needs --postgres"
        );
        anyhow::ensure!(counters != CountersArg::Etcd || etcd, "--counters etcd needs --etcd");
        let adopt = args.adopt_data_dir.then(|| Adopt {
            now_ms: SystemClock.now_ms(),
            margin_ms: args.adopt_margin_ms.unwrap_or(DEFAULT_ADOPT_MARGIN_MS),
        });
        let postgres_margins = (
            args.postgres_promotion_margin.or(file.postgres_promotion_margin),
            args.postgres_promotion_counter_margin.or(file.postgres_promotion_counter_margin),
            args.postgres_promotion_mark_margin_ms.or(file.postgres_promotion_mark_margin_ms),
        );
        for (flag, margin) in [
            ("--postgres-promotion-margin", postgres_margins.0),
            ("--postgres-promotion-counter-margin", postgres_margins.1),
            ("--postgres-promotion-mark-margin-ms", postgres_margins.2),
        ] {
            if let Some(margin) = margin {
                anyhow::ensure!(postgres.is_some(), "{flag} needs --postgres");
                anyhow::ensure!(
                    i64::try_from(margin).is_ok(),
                    "{flag} {margin} is above the largest value a Postgres row holds ({})",
                    i64::MAX
                );
            }
        }
        Ok(StoreSettings {
            data_dir,
            adopt,
            postgres,
            postgres_margins,
            redis,
            redis_sentinel,
            counters,
        })
    }
}

/// The Sentinel settings: the flags if either is given (then both must be), else the file's
/// `redis_sentinel`, checked alike.
fn redis_sentinel(args: &Args, file: &FileConfig) -> anyhow::Result<Option<SentinelConfig>> {
    let flags = args.redis_sentinel_master.is_some() || !args.redis_sentinels.is_empty();
    let config = if flags {
        SentinelConfig {
            master: args.redis_sentinel_master.clone().unwrap_or_default(),
            sentinels: args.redis_sentinels.clone(),
        }
    } else {
        match &file.redis_sentinel {
            Some(config) => config.clone(),
            None => return Ok(None),
        }
    };
    let master = config.master.trim().to_owned();
    let sentinels: Vec<String> =
        config.sentinels.iter().map(|r| r.trim().to_owned()).filter(|r| !r.is_empty()).collect();
    anyhow::ensure!(
        !master.is_empty() && !master.contains(char::is_whitespace),
        "Redis Sentinel needs the master's name (one word): --redis-sentinel-master NAME or \
         `redis_sentinel.master`"
    );
    anyhow::ensure!(
        !sentinels.is_empty(),
        "Redis Sentinel master `{master}` needs its sentinels: --redis-sentinels URL,URL or \
         `redis_sentinel.sentinels`"
    );
    Ok(Some(SentinelConfig { master, sentinels }))
}

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let file = FileConfig::load(args.config.as_ref())?;
    let filter = args.log.clone().or(file.log.clone()).unwrap_or_else(|| "info".to_owned());
    crate::logging::init(&filter, args.log_format.or(file.log_format).unwrap_or_default())?;
    let data_dir: PathBuf =
        args.data_dir.clone().or(file.data_dir.clone()).unwrap_or_else(|| DEFAULT_DATA_DIR.into());
    let store = store(args, &file, &data_dir)?;
    let stores = StoreSettings::resolve(args, &file, data_dir, matches!(store, Store::Etcd(_)))?;
    let file_namespaces = file.server.as_ref().is_some_and(|s| !s.namespaces.is_empty());
    let listen = args.listen.clone().or(file.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let grpc_listen = args.grpc_listen.clone().or(file.grpc_listen);
    let mut config = file.server.unwrap_or_default();
    if let Some(window_ms) = args.window_ms {
        config.window_ms = window_ms;
    }
    if let Some(clock_step_warn_ms) = args.clock_step_warn_ms {
        config.clock_step_warn_ms = clock_step_warn_ms;
    }
    check_window_fits_lease(config.window_ms, &store, args.allow_long_window)?;
    if let Some(max_batch) = args.max_batch {
        config.max_batch = max_batch;
    }
    if let Some(max_ahead_ms) = args.max_ahead_ms {
        config.max_ahead_ms = max_ahead_ms;
    }
    if let Some(claim_retry_ms) = args.claim_retry_ms {
        config.claim_retry_ms = claim_retry_ms;
    }
    if !args.cors_allow_origin.is_empty() {
        config.cors_allow_origins.clone_from(&args.cors_allow_origin);
    }
    args.connections.apply(&mut config);
    config.shutdown_delay_ms =
        args.shutdown_delay_ms.unwrap_or(if file.server_sets_shutdown_delay {
            config.shutdown_delay_ms
        } else {
            DEFAULT_SHUTDOWN_DELAY_MS
        });
    config.access_log |= args.access_log;
    config.allow_ahead |= args.allow_ahead;
    config.wait_for_claim |= args.wait_for_claim;
    if config.namespaces.is_empty() {
        config.namespaces.push(NamespaceConfig::default());
    }
    let default = &mut config.namespaces[0];
    if let Some(layout) = &args.layout {
        default.layout.clone_from(layout);
        default.custom_layout = None;
    }
    if let Some(source) = args.source {
        default.source = Some(source);
        // `--source redis` alone means icicle IDs: the layout each store source issues.
        if let Some(layout) =
            source.layout_name().filter(|_| args.layout.is_none() && !file_namespaces)
        {
            default.layout = layout.to_owned();
        }
    }
    // A flag picks how the generator ID is chosen, over whatever the file says.
    if args.generator_id.is_some() {
        default.generator_id = args.generator_id;
        default.generator_pool = None;
    }
    if args.generator_pool.is_some() {
        default.generator_pool = args.generator_pool;
        default.generator_id = None;
    }
    if args.generators.is_some() {
        default.generators = args.generators;
    }
    let flag_picks_id = args.generator_id.is_some() || args.generator_pool.is_some();
    if args.generator_id_from_hostname || (file.generator_id_from_hostname && !flag_picks_id) {
        let hostname = std::env::var("HOSTNAME").unwrap_or_default();
        default.generator_id = Some(ordinal(&hostname)?);
        default.generator_pool = None;
        default.generators = None;
    }
    if args.token.is_some() {
        default.token.clone_from(&args.token);
    }
    let controls = args.controls.apply(matches!(store, Store::Etcd(_)))?;
    anyhow::ensure!(
        !controls.no_durable_mark || matches!(store, Store::File(_)),
        "--unsafe-no-durable-mark is for the embedded store"
    );
    anyhow::ensure!(
        !controls.no_pg_fence || matches!(store, Store::Postgres { .. }),
        "--unsafe-no-pg-fence needs --coordinator postgres"
    );
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    if !args.no_memory_trim {
        runtime.spawn(crate::memory::trim_after_bursts());
    }
    runtime.block_on(serve(config, listen, grpc_listen, store, stores, controls))
}

impl Store {
    /// The TTL in seconds of the lease each claim holds, and how a longer one is asked for
    /// (the flag, or why it cannot be); `None` for the file store, whose claims are locks that
    /// end with the process, not leases.
    fn claim_lease(&self) -> Option<(u32, String)> {
        match self {
            Store::File(_) => None,
            Store::Etcd(etcd) => {
                let ttl = etcd.claim_ttl_secs();
                Some(match etcd.lable_prefix {
                    None => (ttl, "--lease-ttl".to_owned()),
                    Some(_) => (ttl, "(LableOrg's leases last 5 s)".to_owned()),
                })
            }
            Store::Postgres { lease_ttl, .. } => Some((*lease_ttl, "--lease-ttl".to_owned())),
        }
    }
}

/// Refuses a window longer than the lease TTL of the claims (etcd's or Postgres's), unless
/// `allow` (then warns): a takeover starts above the last stored mark, up to a window ahead of
/// the clock, and comes at least a lease TTL less one renewal period after the last extension,
/// so with a longer window each takeover may start further ahead than the last (DESIGN.md,
/// "Why must the window fit in the lease TTL?"). The file store's claims are no leases.
fn check_window_fits_lease(window_ms: u64, store: &Store, allow: bool) -> anyhow::Result<()> {
    let Some((ttl_secs, longer)) = store.claim_lease() else {
        return Ok(());
    };
    let ttl_ms = u64::from(ttl_secs) * 1_000;
    if window_ms <= ttl_ms {
        return Ok(());
    }
    if allow {
        tracing::warn!(
            window_ms,
            lease_ttl_s = ttl_secs,
            "--allow-long-window: the window is longer than the lease TTL, so each takeover may \
             start further ahead of the clock than the last"
        );
        return Ok(());
    }
    let longer_lease = match longer.strip_prefix("--") {
        Some(_) => format!(", {longer} {} or more", window_ms.div_ceil(1_000)),
        None => format!(" {longer}"),
    };
    anyhow::bail!(
        "--window-ms {window_ms} is longer than the {ttl_secs} s lease TTL, so each takeover of a \
         generator ID could start further ahead of the clock than the last (DESIGN.md, \"Why must \
         the window fit in the lease TTL?\"); use --window-ms {ttl_ms} or less{longer_lease}, \
         or --allow-long-window"
    )
}

/// The stores the configured namespaces need, opened (or connected) beside the coordinator.
/// Postgres, when given, is connected (and its durability checked) whether or not a
/// namespace uses it, so that a database that could lose IDs is refused at start.
async fn backends(
    coordinator: Arc<dyn Coordinator>,
    config: &ServerConfig,
    stores: &StoreSettings,
    store: &Store,
    controls: Controls,
) -> anyhow::Result<Backends> {
    // Sources of namespaces whose configuration is invalid are left to the server to report.
    let sources: HashSet<Source> =
        config.namespaces.iter().filter_map(|ns| ns.source().ok()).collect();
    let postgres = match &stores.postgres {
        Some(url) => Some(postgres_store(url, stores, controls).await?),
        None => None,
    };
    // Segments and counters in the file store share one handle.
    let mut opened: Option<Arc<FileStore>> = None;
    let mut file_store = || -> anyhow::Result<Arc<FileStore>> {
        match &opened {
            Some(store) => Ok(Arc::clone(store)),
            None => Ok(Arc::clone(opened.insert(file_store(&stores.data_dir, stores.adopt)?))),
        }
    };
    let mut backends = Backends::new(coordinator);
    if sources.contains(&Source::Segment) {
        // A fleet shares its segments: on Postgres if given, else on etcd; one server alone
        // keeps them in its data directory.
        backends.segments = Some(match (&postgres, store) {
            (Some(pg), _) => pg.segments.clone(),
            (None, Store::Etcd(settings)) => etcd_store(settings).await?,
            (None, Store::File(_)) => file_store()? as Arc<dyn SegmentStore>,
            (None, Store::Postgres { .. }) => {
                anyhow::bail!("--coordinator postgres needs --postgres")
            }
        });
    }
    if sources.contains(&Source::Counters) {
        backends.counters = Some(match stores.counters {
            CountersArg::File => file_store()? as Arc<dyn CounterStore>,
            CountersArg::Postgres => match &postgres {
                Some(pg) => pg.counters.clone(),
                None => anyhow::bail!("--counters postgres needs --postgres"),
            },
            CountersArg::Etcd => match store {
                Store::Etcd(settings) => etcd_store(settings).await?,
                Store::File(_) | Store::Postgres { .. } => {
                    anyhow::bail!("--counters etcd needs --etcd")
                }
            },
        });
    }
    if sources.contains(&Source::Redis) {
        anyhow::ensure!(
            !stores.redis.is_empty() || stores.redis_sentinel.is_some(),
            "a namespace has source `redis`: give its Redis nodes with --redis URL,URL, or its \
             primary with --redis-sentinel-master NAME --redis-sentinels URL,URL"
        );
        set_redis(&mut backends, stores, controls)?;
    }
    Ok(backends)
}

/// The file store in `<data_dir>/store.d`, its folder created durably.
fn file_store(data_dir: &Path, adopt: Option<Adopt>) -> anyhow::Result<Arc<FileStore>> {
    let dir = data_dir.join(FILE_STORE_DIR);
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        // The new folder's entry must survive a crash once IDs were handed out from it.
        std::fs::File::open(data_dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", data_dir.display()))?;
    }
    Ok(Arc::new(match adopt {
        Some(adopt) => FileStore::open_adopting(&dir, adopt)?,
        None => FileStore::open(&dir)?,
    }))
}

/// One Postgres store, as both of its faces.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
struct Postgres {
    segments: Arc<dyn SegmentStore>,
    counters: Arc<dyn CounterStore>,
}

#[cfg(feature = "postgres")]
async fn postgres_store(
    url: &str,
    stores: &StoreSettings,
    controls: Controls,
) -> anyhow::Result<Postgres> {
    use idmint_coord::PostgresStore;

    let options = postgres_options(stores.postgres_margins);
    let store = if !controls.no_promotion_bump {
        PostgresStore::connect(url, options).await?
    } else {
        unraised_postgres_store(url, options).await?
    };
    let store = Arc::new(store);
    Ok(Postgres { segments: store.clone(), counters: store })
}

/// The negative control's store: a promoted standby is not raised.
#[cfg(all(idmint_negative_controls, feature = "postgres"))]
async fn unraised_postgres_store(
    url: &str,
    options: idmint_coord::PostgresOptions,
) -> anyhow::Result<idmint_coord::PostgresStore> {
    tracing::error!(
        "UNSAFE: --unsafe-no-promotion-bump: a promoted Postgres standby is not raised; a negative control for tests only"
    );
    Ok(idmint_coord::PostgresStore::connect_without_promotion_bump(url, options).await?)
}

#[cfg(all(feature = "postgres", not(idmint_negative_controls)))]
async fn unraised_postgres_store(
    _url: &str,
    _options: idmint_coord::PostgresOptions,
) -> anyhow::Result<idmint_coord::PostgresStore> {
    anyhow::bail!("the negative control needs a build with IDMINT_NEGATIVE_CONTROLS=1")
}

#[cfg(not(feature = "postgres"))]
async fn postgres_store(_: &str, _: &StoreSettings, _: Controls) -> anyhow::Result<Postgres> {
    anyhow::bail!(
        "this idmint was built without postgres support; rebuild it with `--features postgres` \
         to use --postgres"
    )
}

#[cfg(feature = "redis")]
fn set_redis(
    backends: &mut Backends,
    stores: &StoreSettings,
    controls: Controls,
) -> anyhow::Result<()> {
    use idmint_coord::{IcicleClient, IcicleOptions};

    let client = match &stores.redis_sentinel {
        Some(sentinel) => {
            tracing::info!(master = %sentinel.master, sentinels = sentinel.sentinels.len(), "icicle ids from the Redis primary Sentinel names");
            IcicleClient::with_sentinel(
                &sentinel.master,
                &sentinel.sentinels,
                IcicleOptions::default(),
            )?
        }
        None => IcicleClient::new(&stores.redis, IcicleOptions::default())?,
    };
    #[cfg(all(idmint_negative_controls, feature = "redis"))]
    let client = if controls.no_redis_guard {
        tracing::error!(
            "UNSAFE: --unsafe-no-redis-guard: the icicle failover guard accepts everything; a negative control for tests only"
        );
        client.without_guard()
    } else {
        client
    };
    #[cfg(all(idmint_negative_controls, feature = "redis"))]
    let client = if controls.no_shared_redis_guard {
        tracing::error!(
            "UNSAFE: --unsafe-no-shared-redis-guard: the icicle failover guard ignores the mark shared through Redis; a negative control for tests only"
        );
        client.without_shared_guard()
    } else {
        client
    };
    let _ = controls;
    backends.redis = Some(client);
    Ok(())
}

#[cfg(not(feature = "redis"))]
fn set_redis(_: &mut Backends, _: &StoreSettings, _: Controls) -> anyhow::Result<()> {
    Err(crate::icicle::no_redis_feature())
}

/// Segments and counters on etcd, under the fleet's prefix.
#[cfg(feature = "etcd")]
async fn etcd_store(settings: &EtcdSettings) -> anyhow::Result<Arc<idmint_coord::EtcdStore>> {
    use idmint_coord::{EtcdStore, EtcdStoreOptions};

    let options =
        EtcdStoreOptions { prefix: settings.prefix.clone(), ..EtcdStoreOptions::default() };
    Ok(Arc::new(EtcdStore::connect(&settings.endpoints, options).await?))
}

/// Without the feature, `--etcd` stops earlier; this keeps the types.
#[cfg(not(feature = "etcd"))]
async fn etcd_store(_settings: &EtcdSettings) -> anyhow::Result<Arc<FileStore>> {
    Err(no_etcd_feature())
}

/// Opens the store: the data directory, or a connection to etcd.
async fn coordinator(
    store: &Store,
    data_dir: &Path,
    adopt: Option<Adopt>,
    margins: PostgresMargins,
    controls: Controls,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    match (store, adopt) {
        #[cfg(idmint_negative_controls)]
        (Store::File(dir), None) if controls.no_durable_mark => {
            tracing::error!(
                "UNSAFE: --unsafe-no-durable-mark: claims ignore stored marks; a negative control for tests only"
            );
            Ok(Arc::new(FileCoordinator::open(dir)?.without_durable_marks()))
        }
        (Store::File(dir), None) => Ok(Arc::new(FileCoordinator::open(dir)?)),
        (Store::File(dir), Some(adopt)) => {
            tracing::warn!(data_dir = %dir.display(), margin_ms = adopt.margin_ms, "adopting the data directory: claims start above the clock plus the margin");
            Ok(Arc::new(FileCoordinator::open_adopting(dir, adopt)?))
        }
        (shared_store @ (Store::Etcd(_) | Store::Postgres { .. }), adopt) => {
            // The fleet's memory in the data directory: the store this server claims on and
            // the marks it stored, so that an empty, wiped or other store is refused.
            let shared = match shared_store {
                Store::Etcd(settings) => etcd_coordinator(settings, controls).await?,
                Store::Postgres { url, lease_ttl } => {
                    postgres_coordinator(url, *lease_ttl, margins, controls).await?
                }
                Store::File(_) => unreachable!("matched above"),
            };
            let memory = data_dir.join(FLEET_DIR);
            Ok(Arc::new(match adopt {
                Some(adopt) => Remembered::open_adopting(&memory, shared, adopt)?,
                None => Remembered::open(&memory, shared)?,
            }))
        }
    }
}

#[cfg(feature = "etcd")]
async fn etcd_coordinator(
    settings: &EtcdSettings,
    controls: Controls,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    use idmint_coord::EtcdCoordinator;

    let options = settings.coordinator_options();
    let coordinator = EtcdCoordinator::connect(&settings.endpoints, options).await?;
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    let coordinator = if controls.no_fence {
        tracing::error!(
            "UNSAFE: --unsafe-no-fence: the etcd fence is off, so this server ignores stored \
             marks and can repeat IDs; it is a negative control for tests only"
        );
        coordinator.without_fence()
    } else {
        coordinator
    };
    #[cfg(all(idmint_negative_controls, feature = "etcd"))]
    let coordinator = if controls.no_restore_guard {
        tracing::error!(
            "UNSAFE: --unsafe-no-restore-guard: this server trusts marks on any etcd cluster, \
             also one restored from an old snapshot, and can repeat IDs; a negative control for \
             tests only"
        );
        coordinator.without_restore_guard()
    } else {
        coordinator
    };
    let _ = controls;
    Ok(Arc::new(coordinator))
}

/// The promotion margins of segments, counters and marks (the store's defaults when `None`).
type PostgresMargins = (Option<u64>, Option<u64>, Option<u64>);

/// Claims and marks in Postgres (`--coordinator postgres`).
#[cfg(feature = "postgres")]
async fn postgres_coordinator(
    url: &str,
    lease_ttl: u32,
    margins: PostgresMargins,
    controls: Controls,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    use idmint_coord::{PostgresCoordinator, PostgresLeaseOptions};

    let lease = PostgresLeaseOptions {
        ttl: std::time::Duration::from_secs(lease_ttl.into()),
        // 1 s, as on etcd, or half a 1 s lease.
        margin: std::time::Duration::from_millis(if lease_ttl >= 2 { 1_000 } else { 500 }),
    };
    let coordinator = PostgresCoordinator::connect(url, postgres_options(margins), lease).await?;
    #[cfg(all(idmint_negative_controls, feature = "postgres"))]
    let coordinator = if controls.no_pg_fence {
        tracing::error!(
            "UNSAFE: --unsafe-no-pg-fence: the Postgres coordinator's fence is off, so this \
             server can share a generator ID and repeat IDs; a negative control for tests only"
        );
        coordinator.without_fence()
    } else {
        coordinator
    };
    let _ = controls;
    Ok(Arc::new(coordinator))
}

#[cfg(not(feature = "postgres"))]
async fn postgres_coordinator(
    _url: &str,
    _lease_ttl: u32,
    _margins: PostgresMargins,
    _controls: Controls,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    anyhow::bail!(
        "this idmint was built without postgres support; rebuild it with `--features postgres` \
         to use --coordinator postgres"
    )
}

/// The Postgres options, the margins given or the defaults.
#[cfg(feature = "postgres")]
fn postgres_options(margins: PostgresMargins) -> idmint_coord::PostgresOptions {
    let defaults = idmint_coord::PostgresOptions::default();
    idmint_coord::PostgresOptions {
        promotion_margin: margins.0.unwrap_or(defaults.promotion_margin),
        promotion_counter_margin: margins.1.unwrap_or(defaults.promotion_counter_margin),
        promotion_mark_margin_ms: margins.2.unwrap_or(defaults.promotion_mark_margin_ms),
        ..defaults
    }
}

#[cfg(not(feature = "etcd"))]
async fn etcd_coordinator(
    _settings: &EtcdSettings,
    _controls: Controls,
) -> anyhow::Result<Arc<dyn Coordinator>> {
    Err(no_etcd_feature())
}

async fn serve(
    config: ServerConfig,
    listen: String,
    grpc_listen: Option<String>,
    store: Store,
    stores: StoreSettings,
    controls: Controls,
) -> anyhow::Result<()> {
    let margins = stores.postgres_margins;
    let coordinator =
        coordinator(&store, &stores.data_dir, stores.adopt, margins, controls).await?;
    let backends = backends(coordinator, &config, &stores, &store, controls).await?;
    let backlog = config.listen_backlog;
    let server = Server::start_with(config, backends, Arc::new(SystemClock)).await?;
    let listener = idmint_server::bind_with_backlog(&listen, backlog).await?;
    let local = listener.local_addr().context("cannot read the listening address")?;
    let grpc = match &grpc_listen {
        Some(addr) => Some(idmint_server::bind_with_backlog(addr, backlog).await?),
        None => None,
    };
    let grpc_local = match &grpc {
        Some(listener) => {
            listener.local_addr().context("cannot read the gRPC listening address")?.to_string()
        }
        None => "off".to_owned(),
    };
    match &store {
        Store::File(data_dir) => {
            tracing::info!(http = %local, grpc = %grpc_local, data_dir = %data_dir.display(), "idmint is serving");
        }
        Store::Etcd(etcd) => {
            tracing::info!(http = %local, grpc = %grpc_local, etcd = %etcd.endpoints.join(","), ready = server.is_ready(), "idmint is serving");
        }
        Store::Postgres { lease_ttl, .. } => {
            tracing::info!(http = %local, grpc = %grpc_local, coordinator = "postgres", lease_ttl_s = lease_ttl, ready = server.is_ready(), "idmint is serving");
        }
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));
    idmint_server::serve_all(server, listener, grpc, shutdown).await?;
    tracing::info!("idmint stopped");
    Ok(())
}

/// Cancels `shutdown` on SIGTERM or SIGINT.
async fn cancel_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        tracing::error!("cannot listen for SIGTERM/SIGINT; stop the server with SIGKILL");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
    shutdown.cancel();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window fits the lease at equality and is refused 1 ms past it, unless allowed, on
    /// etcd and on Postgres alike; the LableOrg scheme's lease is 5 s whatever --lease-ttl
    /// says; the file store has no lease to fit.
    #[test]
    fn a_window_longer_than_the_lease_is_refused_unless_allowed() {
        let etcd = |lease_ttl: u32, lable: bool| {
            Store::Etcd(EtcdSettings {
                endpoints: vec!["http://127.0.0.1:2379".into()],
                prefix: "idmint/".into(),
                lease_ttl,
                lable_prefix: lable.then(|| "unique-id/".to_owned()),
            })
        };
        let postgres = |lease_ttl: u32| Store::Postgres { url: "postgres://db".into(), lease_ttl };
        let check = |window_ms: u64, store: Store, allow: bool, refused: Option<&str>| {
            let result = check_window_fits_lease(window_ms, &store, allow);
            match (result, refused) {
                (Ok(()), None) => {}
                (Err(err), Some(want)) => assert!(err.to_string().contains(want), "{err}"),
                (result, _) => panic!("{window_ms} ms, {store:?}: {result:?}"),
            }
        };
        check(2_000, etcd(2, false), false, None);
        check(2_001, etcd(2, false), false, Some("use --window-ms 2000 or less, --lease-ttl 3"));
        check(10_000, etcd(2, false), false, Some("--lease-ttl 10 or more"));
        check(10_000, etcd(2, false), true, None);
        check(3_000, etcd(10, false), false, None);
        check(5_000, etcd(2, true), false, None);
        check(5_001, etcd(30, true), false, Some("(LableOrg's leases last 5 s)"));
        check(1_000, postgres(1), false, None);
        check(3_000, postgres(1), false, Some("longer than the 1 s lease TTL"));
        check(3_000, postgres(1), true, None);
        check(10_000, postgres(10), false, None);
        check(1_000_000, Store::File("d".into()), false, None);
    }

    /// `serve --help` shows each numeric default once, from the constant or configuration a
    /// run falls back to; no argument writes a number as its default by hand.
    #[test]
    fn help_defaults_come_from_the_constants() {
        let command = crate::command();
        let serve = command.find_subcommand("serve").expect("serve");
        let defaults = help_defaults();
        for (id, _) in &defaults {
            assert!(serve.get_arguments().any(|arg| arg.get_id() == id), "no argument {id}");
        }
        for arg in serve.get_arguments() {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let long = arg.get_long_help().map(ToString::to_string).unwrap_or_default();
            let id = arg.get_id().as_str();
            assert!(!long.contains("[default: "), "{id}: its long help hides the default");
            match defaults.iter().find(|(name, _)| *name == id) {
                Some((_, value)) => {
                    assert!(help.ends_with(&format!(" [default: {value}]")), "{id}: {help}");
                    assert_eq!(help.matches("[default:").count(), 1, "{id}: {help}");
                }
                None => {
                    let by_hand = help.split("[default: ").skip(1);
                    let numbers =
                        by_hand.filter(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
                    assert_eq!(numbers.count(), 0, "{id} writes its default by hand: {help}");
                }
            }
        }
        let value =
            |id: &str| defaults.iter().find(|(name, _)| *name == id).map(|(_, v)| v.clone());
        assert_eq!(value("lease_ttl").as_deref(), Some("10"));
        assert_eq!(value("window_ms").as_deref(), Some("3000"));
        assert_eq!(value("max_connections_per_ip").as_deref(), Some("256"));
    }

    #[test]
    fn counters_live_in_postgres_then_etcd_then_the_file_store() {
        let resolve = |flags: &[&str], etcd: bool| {
            let args = Args::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
                .expect("flags parse");
            StoreSettings::resolve(&args, &FileConfig::default(), "d".into(), etcd)
                .map(|s| s.counters)
                .map_err(|e| e.to_string())
        };
        assert_eq!(resolve(&[], false), Ok(CountersArg::File));
        assert_eq!(resolve(&[], true), Ok(CountersArg::Etcd));
        assert_eq!(resolve(&["--postgres", "postgresql://x/y"], true), Ok(CountersArg::Postgres));
        assert_eq!(
            resolve(&["--counters", "file", "--postgres", "p"], false),
            Ok(CountersArg::File)
        );
        assert_eq!(
            resolve(&["--counters", "postgres"], false),
            Err("--counters postgres needs --postgres".into())
        );
        assert_eq!(
            resolve(&["--counters", "etcd"], false),
            Err("--counters etcd needs --etcd".into())
        );
        let file: FileConfig =
            toml::from_str("postgres = \"postgresql://f/g\"\nredis = [\" redis://a \", \"\"]")
                .unwrap();
        let args = Args::try_parse_from(["serve"]).expect("no flags");
        let settings = StoreSettings::resolve(&args, &file, "d".into(), false).unwrap();
        assert_eq!(settings.counters, CountersArg::Postgres);
        assert_eq!(settings.redis, ["redis://a"]);
    }

    #[test]
    fn redis_sentinel_needs_a_master_and_sentinels_and_excludes_redis() {
        let resolve = |flags: &[&str], file: &str| {
            let args = Args::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
                .expect("flags parse");
            let file: FileConfig = toml::from_str(file).expect("file parses");
            StoreSettings::resolve(&args, &file, "d".into(), false)
                .map(|s| s.redis_sentinel.map(|c| (c.master, c.sentinels)))
                .map_err(|e| e.to_string())
        };
        let flags = ["--redis-sentinel-master", " m ", "--redis-sentinels", "redis://a, redis://b"];
        assert_eq!(
            resolve(&flags, ""),
            Ok(Some(("m".into(), vec!["redis://a".into(), "redis://b".into()])))
        );
        let file = "redis_sentinel = { master = \"f\", sentinels = [\"redis://c\"] }";
        assert_eq!(resolve(&[], file), Ok(Some(("f".into(), vec!["redis://c".into()]))));
        // Flags beat the file as a whole.
        assert_eq!(resolve(&flags, file).map(|c| c.map(|c| c.0)), Ok(Some("m".into())));
        assert_eq!(resolve(&[], ""), Ok(None));
        let no_sentinels = resolve(&["--redis-sentinel-master", "m"], "").unwrap_err();
        assert!(no_sentinels.contains("needs its sentinels"), "{no_sentinels}");
        let no_master = resolve(&["--redis-sentinels", "redis://a"], "").unwrap_err();
        assert!(no_master.contains("master's name"), "{no_master}");
        let two_words =
            resolve(&[], "redis_sentinel = { master = \"a b\", sentinels = [\"redis://c\"] }");
        assert!(two_words.is_err(), "{two_words:?}");
        let both = resolve(&flags, "redis = [\"redis://x\"]").unwrap_err();
        assert!(both.contains("not both"), "{both}");
        let unknown: Result<FileConfig, _> =
            toml::from_str("redis_sentinel = { name = \"m\", sentinels = [] }");
        assert!(unknown.is_err(), "unknown keys are refused");
    }

    #[test]
    fn promotion_margins_come_from_flags_then_the_file_and_are_checked() {
        let resolve = |flags: &[&str], file: &str| {
            let args = Args::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
                .expect("flags parse");
            let file: FileConfig = toml::from_str(file).expect("file parses");
            StoreSettings::resolve(&args, &file, "d".into(), false)
                .map(|s| s.postgres_margins)
                .map_err(|e| e.to_string())
        };
        let pg = "postgres = \"postgresql://f/g\"\n";
        assert_eq!(resolve(&[], pg), Ok((None, None, None)));
        let file =
            format!("{pg}postgres_promotion_margin = 5\npostgres_promotion_counter_margin = 7");
        assert_eq!(resolve(&[], &file), Ok((Some(5), Some(7), None)));
        assert_eq!(
            resolve(&["--postgres-promotion-margin", "0"], &file),
            Ok((Some(0), Some(7), None))
        );
        assert_eq!(
            resolve(&["--postgres-promotion-mark-margin-ms", "9"], &file),
            Ok((Some(5), Some(7), Some(9)))
        );
        let too_big = (1u64 << 63).to_string();
        let refused = resolve(&["--postgres-promotion-margin", &too_big], pg);
        assert!(refused.as_ref().is_err_and(|e| e.contains("above the largest")), "{refused:?}");
        assert_eq!(
            resolve(&["--postgres-promotion-counter-margin", "3"], ""),
            Err("--postgres-promotion-counter-margin needs --postgres".into())
        );
    }

    #[test]
    fn an_ordinal_is_the_number_after_the_last_dash() {
        for (hostname, want) in [
            ("idmint-7", Some(7)),
            ("idmint-0", Some(0)),
            ("my-app-12", Some(12)),
            ("web", None),
            ("web-", None),
            ("", None),
            ("idmint-7a", None),
            ("idmint--1", Some(1)),
            ("idmint-99999999999999999999999", None),
        ] {
            assert_eq!(super::ordinal(hostname).ok(), want, "{hostname:?}");
        }
    }

    #[test]
    fn the_coordinator_comes_from_the_flag_then_the_file_and_is_checked() {
        let store = |flags: &[&str], file: &str| {
            let args = Args::try_parse_from(std::iter::once("serve").chain(flags.iter().copied()))
                .expect("flags parse");
            let file: FileConfig = toml::from_str(file).expect("file parses");
            match super::store(&args, &file, Path::new("d")) {
                Ok(Store::File(_)) => Ok("file".to_owned()),
                Ok(Store::Etcd(_)) => Ok("etcd".to_owned()),
                Ok(Store::Postgres { lease_ttl, .. }) => Ok(format!("postgres {lease_ttl}")),
                Err(e) => Err(e.to_string()),
            }
        };
        let pg = "postgres = \"postgresql://f/g\"\n";
        let check = |flags: &[&str], file: &str, want: Result<&str, &str>| {
            let got = store(flags, file);
            match want {
                Ok(want) => assert_eq!(got.as_deref(), Ok(want), "{flags:?} {file:?}"),
                Err(part) => assert!(
                    got.as_ref().is_err_and(|e| e.contains(part)),
                    "{flags:?} {file:?}: {got:?}"
                ),
            }
        };
        check(&[], pg, Ok("file"));
        check(&["--coordinator", "postgres"], pg, Ok("postgres 10"));
        check(&["--coordinator", "postgres", "--lease-ttl", "3"], pg, Ok("postgres 3"));
        check(&[], &format!("{pg}coordinator = \"postgres\""), Ok("postgres 10"));
        check(&["--coordinator", "postgres"], "", Err("needs --postgres"));
        check(&["--coordinator", "postgres", "--lease-ttl", "0"], pg, Err("--lease-ttl"));
        check(&["--coordinator", "postgres", "--etcd", "http://e:2379"], pg, Err("give one"));
        check(&["--coordinator", "etcd"], pg, Err("needs --etcd"));
        check(&["--coordinator", "file", "--etcd", "http://e:2379"], "", Err("give one"));
        check(&["--etcd", "http://e:2379"], "", Ok("etcd"));
    }
}
