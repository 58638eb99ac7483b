//! Configuration layering of the CLI: flags beat `IDMINT_*` environment variables (clap reads
//! both), which beat the TOML file of `--config`; defaults fill in the rest. Shared by
//! `idmint serve` and `idmint lease list`, which read the same file and etcd settings.

use std::path::PathBuf;

use anyhow::Context;
use idmint_server::ServerConfig;
use serde::Deserialize;

/// Where an etcd fleet keeps its claims and marks: shared by `idmint serve` and
/// `idmint lease list`.
#[derive(Debug, clap::Args)]
pub(crate) struct EtcdArgs {
    /// etcd endpoints, comma-separated, e.g. http://127.0.0.1:2379 [default: none, use the
    /// embedded store in --data-dir]. Needs a build with the `etcd` feature.
    #[arg(long = "etcd", env = "IDMINT_ETCD", value_name = "URLS", value_delimiter = ',')]
    pub(crate) endpoints: Vec<String>,
    /// Where idmint's keys live in etcd [default: idmint/].
    #[arg(long, env = "IDMINT_ETCD_PREFIX", value_name = "PREFIX")]
    pub(crate) etcd_prefix: Option<String>,
    /// How claims are laid out in etcd: `native`, or `lable-org` to share the pool of
    /// LableOrg's uniqueid-etcd clients (`pool/<cluster>:<generator>` keys on 5 s leases)
    /// [default: native].
    #[arg(long, env = "IDMINT_ETCD_SCHEME", value_name = "SCHEME")]
    pub(crate) etcd_scheme: Option<SchemeArg>,
    /// With `--etcd-scheme lable-org`: the jetcd namespace the LableOrg clients use, with its
    /// trailing `/`, e.g. `unique-id/` (required: the wrong one would be a separate pool).
    /// `{namespace}` in it is replaced by the idmint namespace.
    #[arg(long, env = "IDMINT_ETCD_LABLE_PREFIX", value_name = "PREFIX")]
    pub(crate) etcd_lable_prefix: Option<String>,
}

/// `--etcd-scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum SchemeArg {
    /// idmint's own keys under --etcd-prefix.
    Native,
    /// LableOrg's uniqueid-etcd pool.
    LableOrg,
}

/// `--counters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CountersArg {
    /// The file store in --data-dir.
    File,
    /// Postgres (--postgres).
    Postgres,
    /// etcd (--etcd).
    Etcd,
}

/// `--coordinator`: where generator-ID claims and high-water marks live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CoordinatorArg {
    /// `flock`ed files in --data-dir: the servers of one machine.
    File,
    /// etcd (--etcd): a fleet.
    Etcd,
    /// Postgres (--postgres): a fleet on the database you already run.
    Postgres,
}

/// The configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) listen: Option<String>,
    pub(crate) grpc_listen: Option<String>,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) log: Option<String>,
    pub(crate) log_format: Option<crate::logging::LogFormat>,
    /// Postgres connection string (segments and counters).
    pub(crate) postgres: Option<String>,
    /// Promotion margins of Postgres segments and counters.
    pub(crate) postgres_promotion_margin: Option<u64>,
    pub(crate) postgres_promotion_counter_margin: Option<u64>,
    pub(crate) postgres_promotion_mark_margin_ms: Option<u64>,
    /// Redis nodes (source `redis`).
    pub(crate) redis: Option<Vec<String>>,
    /// The Redis primary of source `redis`, found through Sentinel (instead of `redis`).
    pub(crate) redis_sentinel: Option<SentinelConfig>,
    /// Where DecimalId counters live.
    pub(crate) counters: Option<CountersArg>,
    /// Where generator-ID claims and marks live.
    pub(crate) coordinator: Option<CoordinatorArg>,
    /// The default namespace's generator ID is the StatefulSet ordinal of $HOSTNAME.
    #[serde(default)]
    pub(crate) generator_id_from_hostname: bool,
    /// etcd endpoints (fleet mode).
    pub(crate) etcd: Option<Vec<String>>,
    pub(crate) etcd_prefix: Option<String>,
    pub(crate) lease_ttl: Option<u32>,
    pub(crate) etcd_scheme: Option<SchemeArg>,
    pub(crate) etcd_lable_prefix: Option<String>,
    #[serde(default)]
    pub(crate) server: Option<ServerConfig>,
    /// Whether `[server]` sets `shutdown_delay_ms` (whose default differs between the library
    /// and `idmint serve`).
    #[serde(skip)]
    pub(crate) server_sets_shutdown_delay: bool,
}

/// `redis_sentinel = { master = "mymaster", sentinels = ["redis://host:26379", ...] }`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SentinelConfig {
    /// The master's name in the sentinels' configuration (`sentinel monitor <name> ...`).
    pub(crate) master: String,
    /// The sentinels, `redis://host:port`.
    pub(crate) sentinels: Vec<String>,
}

impl FileConfig {
    /// Reads the file `--config` names, or nothing.
    pub(crate) fn load(path: Option<&PathBuf>) -> anyhow::Result<FileConfig> {
        let Some(path) = path else { return Ok(FileConfig::default()) };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut config = toml::from_str::<FileConfig>(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?;
        config.server_sets_shutdown_delay = sets_shutdown_delay(&text);
        Ok(config)
    }
}

/// Whether the TOML text (which parsed as a [`FileConfig`]) has `server.shutdown_delay_ms`.
fn sets_shutdown_delay(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|table| {
        table
            .get("server")
            .and_then(toml::Value::as_table)
            .is_some_and(|server| server.contains_key("shutdown_delay_ms"))
    })
}

pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
pub(crate) const DEFAULT_DATA_DIR: &str = "idmint-data";
/// The default etcd key prefix, as `EtcdOptions`.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub(crate) const DEFAULT_ETCD_PREFIX: &str = "idmint/";
/// The default and the smallest lease TTL, in seconds. etcd raises any TTL below
/// ⌈1.5 × election timeout⌉ (2 s with its default settings), so a shorter one would not mean
/// what it says.
pub(crate) const DEFAULT_LEASE_TTL: u32 = 10;
const MIN_LEASE_TTL: u32 = 2;
/// The lease TTL of LableOrg's pool keys, in seconds.
const LABLE_ORG_LEASE_TTL: u32 = 5;

/// The etcd settings after flags, environment and file are merged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub(crate) struct EtcdSettings {
    pub(crate) endpoints: Vec<String>,
    pub(crate) prefix: String,
    pub(crate) lease_ttl: u32,
    /// `Some(prefix)` for the LableOrg scheme.
    pub(crate) lable_prefix: Option<String>,
}

impl EtcdSettings {
    /// The coordinator's options: the scheme, its lease TTL and the deadline margin.
    #[cfg(feature = "etcd")]
    pub(crate) fn coordinator_options(&self) -> idmint_coord::EtcdOptions {
        use idmint_coord::{EtcdOptions, Scheme};

        let scheme = match &self.lable_prefix {
            None => Scheme::Native,
            Some(prefix) => {
                if self.lease_ttl != DEFAULT_LEASE_TTL {
                    tracing::warn!(
                        lease_ttl = self.lease_ttl,
                        "--lease-ttl is ignored with --etcd-scheme lable-org: LableOrg's pool \
                         keys live on 5 s leases"
                    );
                }
                Scheme::LableOrg { namespace_prefix: prefix.clone() }
            }
        };
        let ttl_secs = match scheme {
            Scheme::Native => self.lease_ttl,
            Scheme::LableOrg { .. } => LABLE_ORG_LEASE_TTL,
        };
        // The claim stops extending its window this long before its lease can expire.
        let margin = EtcdOptions::margin_for(ttl_secs);
        EtcdOptions {
            prefix: self.prefix.clone(),
            lease_ttl_secs: self.lease_ttl,
            margin,
            scheme,
            ..EtcdOptions::default()
        }
    }

    /// The TTL of each claim's lease, in seconds: `lease_ttl`, except for the LableOrg scheme,
    /// whose pool keys live on 5 s leases.
    pub(crate) fn claim_ttl_secs(&self) -> u32 {
        if self.lable_prefix.is_some() { LABLE_ORG_LEASE_TTL } else { self.lease_ttl }
    }

    /// Merges flags (and environment) over the file; `None` without endpoints. `lease_ttl` is
    /// the flag's (`idmint lease list` has none).
    pub(crate) fn resolve(
        args: &EtcdArgs,
        lease_ttl: Option<u32>,
        file: &FileConfig,
    ) -> anyhow::Result<Option<EtcdSettings>> {
        let endpoints: Vec<String> = if args.endpoints.is_empty() {
            file.etcd.clone().unwrap_or_default()
        } else {
            args.endpoints.clone()
        };
        let endpoints: Vec<String> =
            endpoints.iter().map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()).collect();
        let scheme = args.etcd_scheme.or(file.etcd_scheme);
        let lable_prefix = args.etcd_lable_prefix.clone().or(file.etcd_lable_prefix.clone());
        let prefix = args.etcd_prefix.clone().or(file.etcd_prefix.clone());
        let lease_ttl = lease_ttl.or(file.lease_ttl);
        if endpoints.is_empty() {
            let etcd_only = prefix.is_some()
                || scheme.is_some()
                || lable_prefix.is_some()
                || lease_ttl.is_some();
            anyhow::ensure!(
                !etcd_only,
                "--etcd-prefix, --etcd-scheme, --etcd-lable-prefix and --lease-ttl (and their \
                 file keys) need --etcd"
            );
            return Ok(None);
        }
        let scheme = scheme.unwrap_or(SchemeArg::Native);
        let lease_ttl = lease_ttl.unwrap_or(DEFAULT_LEASE_TTL);
        anyhow::ensure!(
            lease_ttl >= MIN_LEASE_TTL,
            "--lease-ttl must be at least {MIN_LEASE_TTL} s, not {lease_ttl}: etcd raises \
             shorter leases to its minimum (1.5 × its election timeout, 2 s by default), so the \
             ttl asked for would not be the one in force"
        );
        let lable_prefix = match scheme {
            SchemeArg::Native => {
                anyhow::ensure!(
                    lable_prefix.is_none(),
                    "--etcd-lable-prefix is only for --etcd-scheme lable-org"
                );
                None
            }
            SchemeArg::LableOrg => {
                let prefix = lable_prefix.filter(|p| !p.is_empty()).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--etcd-scheme lable-org needs --etcd-lable-prefix: the jetcd namespace \
                         of the LableOrg clients to share a pool with, e.g. unique-id/"
                    )
                })?;
                Some(prefix)
            }
        };
        let prefix = prefix.unwrap_or_else(|| DEFAULT_ETCD_PREFIX.to_owned());
        Ok(Some(EtcdSettings { endpoints, prefix, lease_ttl, lable_prefix }))
    }
}

/// The error of an `--etcd` given to a build without the feature.
#[cfg(not(feature = "etcd"))]
pub(crate) fn no_etcd_feature() -> anyhow::Error {
    anyhow::anyhow!(
        "this idmint was built without etcd support; rebuild it with `--features etcd` (which \
         needs protoc) to use --etcd"
    )
}

/// The timeouts and caps of client connections: each overrides the `[server]` key of the same
/// name in the config file.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ConnectionArgs {
    /// How long a new HTTP connection may take to send its first byte, from accept, in ms.
    #[arg(long, env = "IDMINT_FIRST_BYTE_TIMEOUT_MS", value_name = "MS")]
    first_byte_timeout_ms: Option<u64>,
    /// How long a request header may take: the first from accept, later ones from their first
    /// byte, in ms.
    #[arg(long, env = "IDMINT_HEADER_TIMEOUT_MS", value_name = "MS")]
    header_timeout_ms: Option<u64>,
    /// How long each request body may take, from the end of its header, in ms.
    #[arg(long, env = "IDMINT_BODY_TIMEOUT_MS", value_name = "MS")]
    body_timeout_ms: Option<u64>,
    /// How long a keep-alive connection may be idle between requests, in ms.
    #[arg(long, env = "IDMINT_IDLE_TIMEOUT_MS", value_name = "MS")]
    idle_timeout_ms: Option<u64>,
    /// Connections open at once, HTTP and gRPC ports together; at the limit the longest-idle
    /// one is closed for a new one.
    #[arg(long, env = "IDMINT_MAX_CONNECTIONS", value_name = "N")]
    max_connections: Option<usize>,
    /// Connections one client IP address may hold open, both ports together; 0: no cap (behind
    /// a proxy that connects from few addresses).
    #[arg(long, env = "IDMINT_MAX_CONNECTIONS_PER_IP", value_name = "N")]
    max_connections_per_ip: Option<usize>,
    /// The listen backlog of both ports: new connections the kernel holds until they are
    /// accepted, for bursts.
    #[arg(long, env = "IDMINT_LISTEN_BACKLOG", value_name = "N")]
    listen_backlog: Option<u32>,
    /// HTTP/2 pings on idle connections (gRPC, h2c), every this many ms.
    #[arg(long, env = "IDMINT_HTTP2_KEEPALIVE_INTERVAL_MS", value_name = "MS")]
    http2_keepalive_interval_ms: Option<u64>,
    /// How long an HTTP/2 ping may go unanswered, in ms.
    #[arg(long, env = "IDMINT_HTTP2_KEEPALIVE_TIMEOUT_MS", value_name = "MS")]
    http2_keepalive_timeout_ms: Option<u64>,
    /// Concurrent streams per HTTP/2 connection.
    #[arg(long, env = "IDMINT_HTTP2_MAX_CONCURRENT_STREAMS", value_name = "N")]
    http2_max_concurrent_streams: Option<u32>,
    /// Streams an HTTP/2 client may reset before they are accepted (rapid-reset protection).
    #[arg(long, env = "IDMINT_HTTP2_MAX_PENDING_RESETS", value_name = "N")]
    http2_max_pending_resets: Option<usize>,
}

impl ConnectionArgs {
    /// Sets every given value in `config`.
    pub(crate) fn apply(&self, config: &mut ServerConfig) {
        fn set<T: Copy>(from: Option<T>, to: &mut T) {
            if let Some(value) = from {
                *to = value;
            }
        }
        set(self.first_byte_timeout_ms, &mut config.first_byte_timeout_ms);
        set(self.header_timeout_ms, &mut config.header_timeout_ms);
        set(self.body_timeout_ms, &mut config.body_timeout_ms);
        set(self.idle_timeout_ms, &mut config.idle_timeout_ms);
        set(self.max_connections, &mut config.max_connections);
        if let Some(cap) = self.max_connections_per_ip {
            config.max_connections_per_ip = (cap > 0).then_some(cap);
        }
        set(self.listen_backlog, &mut config.listen_backlog);
        set(self.http2_keepalive_interval_ms, &mut config.http2_keepalive_interval_ms);
        set(self.http2_keepalive_timeout_ms, &mut config.http2_keepalive_timeout_ms);
        set(self.http2_max_concurrent_streams, &mut config.http2_max_concurrent_streams);
        set(self.http2_max_pending_resets, &mut config.http2_max_pending_resets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd_args(endpoints: &[&str]) -> EtcdArgs {
        EtcdArgs {
            endpoints: endpoints.iter().map(|e| (*e).to_owned()).collect(),
            etcd_prefix: None,
            etcd_scheme: None,
            etcd_lable_prefix: None,
        }
    }

    #[test]
    fn without_endpoints_the_file_store_is_used() {
        let resolved = EtcdSettings::resolve(&etcd_args(&[]), None, &FileConfig::default());
        assert_eq!(resolved.unwrap(), None);
        let err = EtcdSettings::resolve(&etcd_args(&[]), Some(5), &FileConfig::default());
        assert!(err.unwrap_err().to_string().contains("need --etcd"));
    }

    #[test]
    fn flags_beat_the_file_and_defaults_fill_in() {
        let file: FileConfig = toml::from_str(
            r#"etcd = ["http://file:2379"]
etcd_prefix = "file/""#,
        )
        .unwrap();
        let from_file = EtcdSettings::resolve(&etcd_args(&[]), None, &file).unwrap().unwrap();
        assert_eq!(from_file.endpoints, ["http://file:2379"]);
        assert_eq!((from_file.prefix.as_str(), from_file.lease_ttl), ("file/", 10));
        let flags =
            EtcdSettings::resolve(&etcd_args(&["http://a:1", " http://b:2"]), Some(3), &file)
                .unwrap()
                .unwrap();
        assert_eq!(flags.endpoints, ["http://a:1", "http://b:2"]);
        assert_eq!(flags.lease_ttl, 3);
    }

    #[test]
    fn a_lease_ttl_below_two_seconds_is_refused_with_the_reason() {
        let err =
            EtcdSettings::resolve(&etcd_args(&["http://a:1"]), Some(1), &FileConfig::default())
                .unwrap_err()
                .to_string();
        assert!(err.contains("at least 2 s") && err.contains("election timeout"), "{err}");
    }

    #[test]
    fn the_lable_org_scheme_needs_its_prefix() {
        let mut args = etcd_args(&["http://a:1"]);
        args.etcd_scheme = Some(SchemeArg::LableOrg);
        let err = EtcdSettings::resolve(&args, None, &FileConfig::default()).unwrap_err();
        assert!(err.to_string().contains("--etcd-lable-prefix"), "{err}");
        let file: FileConfig =
            toml::from_str("etcd_scheme = \"lable-org\"\netcd_lable_prefix = \"unique-id/\"")
                .unwrap();
        let settings = EtcdSettings::resolve(&etcd_args(&["http://a:1"]), None, &file).unwrap();
        assert_eq!(settings.unwrap().lable_prefix.as_deref(), Some("unique-id/"));
        let mut native = etcd_args(&["http://a:1"]);
        native.etcd_lable_prefix = Some("unique-id/".into());
        assert!(EtcdSettings::resolve(&native, None, &FileConfig::default()).is_err());
    }

    #[test]
    fn the_shutdown_delay_is_noticed_only_where_the_file_sets_it() {
        let check = |text: &str, want: bool| assert_eq!(sets_shutdown_delay(text), want, "{text}");
        check("[server]\nshutdown_delay_ms = 0\n", true);
        check("[server]\nshutdown_delay_ms = 2000\naccess_log = true\n", true);
        check("[server]\naccess_log = true\n", false);
        check("shutdown_delay_ms = 1\n", false);
        check("", false);
    }

    #[test]
    fn connection_flags_beat_the_file() {
        let file: FileConfig =
            toml::from_str("[server]\nidle_timeout_ms = 7000\nbody_timeout_ms = 8000\n").unwrap();
        let mut config = file.server.unwrap();
        let flags = ConnectionArgs {
            idle_timeout_ms: Some(100),
            max_connections_per_ip: Some(4),
            listen_backlog: Some(4096),
            ..ConnectionArgs::default()
        };
        flags.apply(&mut config);
        assert_eq!(config.listen_backlog, 4096);
        // 0 turns the per-IP cap (256 by default) off.
        let mut uncapped = ServerConfig::default();
        assert_eq!(uncapped.max_connections_per_ip, Some(256));
        let off = ConnectionArgs { max_connections_per_ip: Some(0), ..ConnectionArgs::default() };
        off.apply(&mut uncapped);
        assert_eq!(uncapped.max_connections_per_ip, None);
        assert_eq!((config.idle_timeout_ms, config.body_timeout_ms), (100, 8000));
        assert_eq!(config.max_connections_per_ip, Some(4));
        assert_eq!(config.header_timeout_ms, ServerConfig::default().header_timeout_ms);
    }
}
