//! The log of `idmint serve`: tracing to stderr as text (coloured only when `--color` allows:
//! a terminal, NO_COLOR unset) or as JSON lines (`--log-format json`), filtered like RUST_LOG.

use anyhow::Context;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// Installs the global subscriber: `filter` as in RUST_LOG, to stderr, in `format`.
pub(crate) fn init(filter: &str, format: LogFormat) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter).context("invalid --log filter")?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(crate::color::stderr()).init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
    Ok(())
}
