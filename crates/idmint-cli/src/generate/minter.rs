//! `idmint gen` on a store: the IDs come from the embedded minter (`idmint::BlockingMinter`),
//! which claims a generator ID of its own in the data directory, Postgres or etcd, stores a
//! durable high-water mark before it issues below it, and keeps logical time from going back
//! with the clock. So runs at the same time, on one machine or many, and a run after a crash
//! or with the clock set back never repeat an ID. At the end the minter is closed: its marks
//! stored, its claim released.
//!
//! Every chunk of IDs ([`MINTER_CHUNK`]) is flushed as soon as it is written, so that a reader of a long run sees
//! them as they are minted. A call that fails after the start (a claim lost while the process
//! was stopped, a store that does not answer) is retried for [`RETRY_FOR`], one note a kind of
//! failure on stderr; a generator ID claimed anew is said on stderr too.

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use idmint::{BlockingMinter, Minter, NamespaceConfig, ServerConfig};
use idmint_core::{Clock, SystemClock};

use super::{Args, PROGRESS_FROM, progress_bar};
use crate::layout_arg::DEFAULT_LAYOUT;

/// IDs per call of the minter, written and flushed together: about 20 KB of text, minted in
/// well under a millisecond, so that a reader of a long run sees them a few milliseconds after
/// they are minted (a chunk of the bare generator's size would come in bursts 8 times as big).
const MINTER_CHUNK: u64 = 1 << 10;

/// How long a run goes on retrying calls that fail, from its last IDs on, before it gives up
/// with the error: longer than a lease TTL and a claim retry, so that a process stopped past
/// its lease finds a generator ID again.
const RETRY_FOR: Duration = Duration::from_secs(60);

/// Between two attempts of a failed call.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// The store flags of `idmint gen`: with any of them, `gen` mints through the embedded minter.
#[derive(Debug, Default, clap::Args)]
#[command(
    next_help_heading = "Store (the embedded minter: safe against runs at the same time and a clock set back)"
)]
pub(crate) struct StoreArgs {
    /// Directory of the embedded store: generator-ID claims and high-water marks, shared by
    /// the runs of one machine; with --postgres or --etcd, this machine's memory of the
    /// fleet's store [default: ./idmint-data when another store flag is given].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Claims and marks in Postgres (postgresql://user@host/db), the `idmint_claims` table of
    /// `idmint serve --coordinator postgres`: a fleet on the database you already run, leases
    /// timed by its clock [default: none].
    #[arg(long, value_name = "URL", conflicts_with = "etcd", hide_env_values = true)]
    postgres: Option<String>,
    /// Claims and marks in etcd, comma-separated endpoints (http://127.0.0.1:2379), as
    /// `idmint serve --etcd` keeps them (the native scheme, prefix idmint/) [default: none].
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    etcd: Vec<String>,
    /// The TOML configuration file of `idmint serve`: its `data_dir`, `coordinator`,
    /// `postgres`, `etcd`, `lease_ttl` and `[server]` (namespaces, window); the flags above
    /// and below override it [default: none].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The lease TTL of the generator-ID claim in Postgres or etcd, in seconds (at least 2 on
    /// etcd, 1 on Postgres). A run that stops without closing keeps its generator ID this
    /// long.
    #[arg(long, value_name = "SECS")]
    lease_ttl: Option<u32>,
    /// How far ahead of the clock the durable high-water mark is kept, in ms (at most the
    /// lease TTL on Postgres or etcd).
    #[arg(long, value_name = "MS")]
    window_ms: Option<u64>,
    /// The namespace to mint from (one of --config's).
    #[arg(long, value_name = "NAME", default_value = "default")]
    namespace: String,
    /// Hidden negative control (tests only).
    #[command(flatten)]
    controls: crate::controls::GenControlArgs,
}

impl StoreArgs {
    /// Whether a store flag is given (then `gen` mints through the minter).
    pub(crate) fn given(&self) -> bool {
        self.data_dir.is_some()
            || self.postgres.is_some()
            || !self.etcd.is_empty()
            || self.config.is_some()
            || self.lease_ttl.is_some()
            || self.window_ms.is_some()
    }
}

/// Runs `idmint gen` with a store.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let store = &args.store;
    refuse_generator_flags(args)?;
    store.controls.apply();
    let minter = builder(args)?.build_blocking().context("cannot start the embedded minter")?;
    let minted = mint(&minter, args, out);
    // Closed on errors too (a closed pipe, a store gone): the marks stored, the claim released.
    let closed = minter.close().context("cannot close the embedded minter");
    minted.and(closed)
}

/// Refuses what the claim sets (node fields) and the flags of a bare generator that a store's
/// namespace takes from the configuration file instead.
fn refuse_generator_flags(args: &Args) -> anyhow::Result<()> {
    if !args.node.is_empty() {
        bail!(
            "node fields ({}) cannot be given with a store (--data-dir, --postgres, --etcd, \
             --config): the minter claims its generator ID there, which sets them; leave them \
             out, or pin a namespace's `generator_id` or `fields` in the --config file",
            args.node.join(" ")
        );
    }
    if args.layout.layout_file.is_some() {
        bail!(
            "--layout-file cannot be given with a store: put the layout in the --config file's \
             namespace (`custom_layout`)"
        );
    }
    if args.store.config.is_some() {
        let flags = [
            ("--layout", args.layout.layout != DEFAULT_LAYOUT),
            ("--epoch", args.layout.epoch.is_some()),
            ("--counter-bits", args.layout.counter_bits.is_some()),
            ("--borrow-ms", args.borrow_ms != 0),
        ];
        if let Some((flag, _)) = flags.iter().find(|(_, given)| *given) {
            bail!(
                "{flag} cannot be given with --config: set it in the file's namespace \
                 (`[[server.namespaces]]`)"
            );
        }
    }
    Ok(())
}

/// The minter's builder: the configuration file (if given), or one namespace of the layout
/// flags, then the store flags over it.
fn builder(args: &Args) -> anyhow::Result<idmint::Builder> {
    let store = &args.store;
    let mut builder = match &store.config {
        Some(path) => Minter::from_config_file(path)?,
        None => {
            let namespace = NamespaceConfig {
                layout: args.layout.layout.clone(),
                epoch_ms: args.layout.epoch,
                counter_bits: args.layout.counter_bits,
                borrow_ms: args.borrow_ms,
                ..NamespaceConfig::named(&store.namespace)
            };
            let config = ServerConfig { namespaces: vec![namespace], ..ServerConfig::default() };
            Minter::builder().config(config)
        }
    };
    if let Some(dir) = &store.data_dir {
        builder = builder.data_dir(dir);
    }
    if let Some(url) = &store.postgres {
        builder = builder.postgres(url);
    }
    if !store.etcd.is_empty() {
        builder = etcd(builder, &store.etcd)?;
    }
    if let Some(ttl) = store.lease_ttl {
        builder = builder.lease_ttl(Duration::from_secs(ttl.into()));
    }
    if let Some(window_ms) = store.window_ms {
        builder = builder.window_ms(window_ms);
    }
    Ok(builder)
}

#[cfg(feature = "etcd")]
fn etcd(builder: idmint::Builder, endpoints: &[String]) -> anyhow::Result<idmint::Builder> {
    Ok(builder.etcd(endpoints))
}

#[cfg(not(feature = "etcd"))]
fn etcd(_: idmint::Builder, _: &[String]) -> anyhow::Result<idmint::Builder> {
    Err(crate::config::no_etcd_feature())
}

/// Mints `args.count` IDs from the namespace and writes them, a flushed chunk at a time.
fn mint(minter: &BlockingMinter, args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let namespace = args.store.namespace.as_str();
    let layout = minter.layout(namespace)?;
    let text = args.text.text(&layout)?;
    let json = args.json.then_some(&layout);
    let progress = (args.count >= PROGRESS_FROM && std::io::stderr().is_terminal())
        .then(|| progress_bar(args.count));
    let mut claimed = None;
    let mut failing: Option<(Instant, String)> = None;
    let mut line = String::with_capacity(64);
    let mut left = args.count;
    let result = loop {
        if left == 0 {
            break Ok(());
        }
        let ids = match minter.batch_in(namespace, left.min(MINTER_CHUNK)) {
            Ok(ids) => ids,
            Err(err) => match retry(&mut failing, err) {
                Ok(()) => continue,
                Err(err) => break Err(err),
            },
        };
        failing = None;
        // Before the IDs: a reader that sees an ID of a generator ID has seen its claim.
        let generator = minter.generator_id(namespace)?;
        if generator.is_some() && generator != claimed {
            claimed = generator;
            say_claimed(namespace, generator);
        }
        let now_ms = SystemClock.now_ms();
        for &id in &ids {
            match json {
                Some(layout) => crate::decode::write_json(layout, id, &text, now_ms, out)?,
                None => {
                    line.clear();
                    text.write_into(id, &mut line)?;
                    line.push('\n');
                    out.write_all(line.as_bytes())?;
                }
            }
        }
        out.flush()?;
        let n = ids.len() as u64;
        left = left.saturating_sub(n);
        if let Some(bar) = &progress {
            bar.inc(n);
        }
    };
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    result
}

/// After a failed call: waits [`RETRY_EVERY`] and says so once per kind of failure, or gives
/// up with the error once calls have failed for [`RETRY_FOR`].
fn retry(failing: &mut Option<(Instant, String)>, err: idmint::Error) -> anyhow::Result<()> {
    let message = err.to_string();
    let since = match failing {
        Some((since, _)) => *since,
        None => Instant::now(),
    };
    if since.elapsed() >= RETRY_FOR {
        return Err(anyhow::Error::from(err)
            .context(format!("minting failed for {} s", RETRY_FOR.as_secs())));
    }
    if failing.as_ref().is_none_or(|(_, said)| *said != message) {
        note(&format!("minting failed, retrying for up to {} s: {message}", RETRY_FOR.as_secs()));
    }
    *failing = Some((since, message));
    std::thread::sleep(RETRY_EVERY);
    Ok(())
}

/// Says which generator ID the run holds (at the start, and after a claim made anew).
fn say_claimed(namespace: &str, generator: Option<u64>) {
    if let Some(generator) = generator {
        note(&format!(
            "namespace {namespace}: generator_id={generator} claimed (released when gen ends)"
        ));
    }
}

/// One `note:` line on stderr.
fn note(text: &str) {
    #[allow(clippy::print_stderr, reason = "what the user of a store must know")]
    {
        eprintln!("note: {text}");
    }
}
