//! `idmint serve`: runs the ID service on the embedded file store, configured by flags,
//! `IDMINT_*` environment variables and an optional TOML file (in that order of precedence).

use std::{path::PathBuf, sync::Arc};

use anyhow::Context;
use clap::Parser;
use idmint_coord::FileCoordinator;
use idmint_core::SystemClock;
use idmint_server::{NamespaceConfig, Server, ServerConfig};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// Flags of `idmint serve`. Each can also come from the environment variable it names, and
/// most from the configuration file; a flag beats the environment, which beats the file.
#[derive(Debug, Parser)]
#[command(after_help = "The configuration file (TOML) holds `listen`, `grpc_listen`, `data_dir`,
`log`, and a [server] table with the server's limits and its [[server.namespaces]]; see the
README. Once it runs, `curl -s 'http://127.0.0.1:8080/v1/batch?count=1000'` returns 1,000 IDs.
With --grpc-listen, the gRPC API (idmint.v1.IdMint, and grpc.health.v1.Health) answers on a
second port; the .proto file is crates/idmint-proto/proto/idmint/v1/idmint.proto.

Examples:
  idmint serve
  idmint serve --listen 0.0.0.0:8080 --data-dir /var/lib/idmint
  idmint serve --grpc-listen 127.0.0.1:50051
  idmint serve --layout js53 --generator-id 3 --token \"$SECRET\"
  idmint serve --config idmint.toml")]
pub(crate) struct Args {
    /// Address for the HTTP API [default: 127.0.0.1:8080].
    #[arg(long, env = "IDMINT_LISTEN", value_name = "ADDR")]
    listen: Option<String>,
    /// Address for the gRPC API, e.g. 127.0.0.1:50051 [default: none, no gRPC].
    #[arg(long, env = "IDMINT_GRPC_LISTEN", value_name = "ADDR")]
    grpc_listen: Option<String>,
    /// Directory of the embedded store: generator-ID claims and high-water marks
    /// [default: ./idmint-data].
    #[arg(long, env = "IDMINT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A TOML configuration file [default: none].
    #[arg(long, env = "IDMINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Layout of the default namespace, when the file configures none [default: snowflake].
    #[arg(long, env = "IDMINT_LAYOUT", value_name = "NAME")]
    layout: Option<String>,
    /// Fixed generator ID of the default namespace [default: the lowest free one].
    #[arg(long, env = "IDMINT_GENERATOR_ID", value_name = "N")]
    generator_id: Option<u64>,
    /// Bearer token the default namespace requires [default: none].
    #[arg(long, env = "IDMINT_TOKEN", value_name = "TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How far ahead of the clock the durable high-water mark is kept, in ms [default: 3000].
    #[arg(long, env = "IDMINT_WINDOW_MS", value_name = "MS")]
    window_ms: Option<u64>,
    /// The largest batch one request may ask for [default: 100000].
    #[arg(long, env = "IDMINT_MAX_BATCH", value_name = "N")]
    max_batch: Option<u64>,
    /// Refuse to start when a stored mark is further ahead of the clock than this, in ms
    /// [default: 86400000].
    #[arg(long, env = "IDMINT_MAX_AHEAD_MS", value_name = "MS")]
    max_ahead_ms: Option<u64>,
    /// Start even when a stored mark is further ahead of the clock than --max-ahead-ms
    /// [default: false].
    #[arg(long, env = "IDMINT_ALLOW_AHEAD")]
    allow_ahead: bool,
    /// Log filter, as in RUST_LOG [default: info].
    #[arg(long, env = "IDMINT_LOG", value_name = "FILTER")]
    log: Option<String>,
}

/// The configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    grpc_listen: Option<String>,
    data_dir: Option<PathBuf>,
    log: Option<String>,
    #[serde(default)]
    server: Option<ServerConfig>,
}

const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
const DEFAULT_DATA_DIR: &str = "idmint-data";

pub(crate) fn run(args: &Args) -> anyhow::Result<()> {
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            toml::from_str::<FileConfig>(&text)
                .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.message()))?
        }
        None => FileConfig::default(),
    };
    let filter = args.log.clone().or(file.log.clone()).unwrap_or_else(|| "info".to_owned());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&filter).context("invalid --log filter")?,
        )
        .with_writer(std::io::stderr)
        .init();
    let listen = args.listen.clone().or(file.listen).unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let grpc_listen = args.grpc_listen.clone().or(file.grpc_listen);
    let data_dir =
        args.data_dir.clone().or(file.data_dir).unwrap_or_else(|| DEFAULT_DATA_DIR.into());
    let mut config = file.server.unwrap_or_default();
    if let Some(window_ms) = args.window_ms {
        config.window_ms = window_ms;
    }
    if let Some(max_batch) = args.max_batch {
        config.max_batch = max_batch;
    }
    if let Some(max_ahead_ms) = args.max_ahead_ms {
        config.max_ahead_ms = max_ahead_ms;
    }
    config.allow_ahead |= args.allow_ahead;
    if config.namespaces.is_empty() {
        config.namespaces.push(NamespaceConfig::default());
    }
    if args.layout.is_some() || args.generator_id.is_some() || args.token.is_some() {
        let default = &mut config.namespaces[0];
        if let Some(layout) = &args.layout {
            default.layout.clone_from(layout);
            default.custom_layout = None;
        }
        if args.generator_id.is_some() {
            default.generator_id = args.generator_id;
        }
        if args.token.is_some() {
            default.token.clone_from(&args.token);
        }
    }
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(serve(config, listen, grpc_listen, data_dir))
}

async fn serve(
    config: ServerConfig,
    listen: String,
    grpc_listen: Option<String>,
    data_dir: PathBuf,
) -> anyhow::Result<()> {
    let coordinator = Arc::new(FileCoordinator::open(&data_dir)?);
    let server = Server::start(config, coordinator, Arc::new(SystemClock)).await?;
    let listener = idmint_server::bind(&listen).await?;
    let local = listener.local_addr().context("cannot read the listening address")?;
    let grpc = match &grpc_listen {
        Some(addr) => Some(idmint_server::bind(addr).await?),
        None => None,
    };
    let grpc_local = match &grpc {
        Some(listener) => {
            listener.local_addr().context("cannot read the gRPC listening address")?.to_string()
        }
        None => "off".to_owned(),
    };
    tracing::info!(http = %local, grpc = %grpc_local, data_dir = %data_dir.display(), "idmint is serving");
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
