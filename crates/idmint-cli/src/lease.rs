//! `idmint lease list` and `idmint lease adopt-cluster`. `list` shows, read-only, which
//! generator IDs are claimed (namespace, generator ID, holder, lease TTL left) and the high-water mark stored for each (as RFC 3339 and in ms
//! ahead of now), from etcd (`--etcd`, feature `etcd`), from Postgres (`--postgres`, the
//! `idmint_claims` table of `--coordinator postgres`, read-only) or from an embedded store's
//! data directory (`--data-dir`).
//!
//! `list` reads the stores' key and file layouts directly (they are documented in
//! `idmint-coord`: `EtcdCoordinator`'s `Scheme` and `FileCoordinator`): it never claims, locks
//! or writes. `adopt-cluster` is the operator's step after etcd was restored from a snapshot
//! (`EtcdCoordinator::adopt_cluster`): it raises every mark past what the fleet can have
//! issued and records the restored cluster as the marks' own.

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

use anyhow::Context;
use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::config::{DEFAULT_DATA_DIR, EtcdArgs, EtcdSettings, FileConfig};

/// `idmint lease ...`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint lease list --data-dir ./idmint-data
  idmint lease list --etcd http://127.0.0.1:2379 --json
  idmint lease list --postgres postgresql://idmint@127.0.0.1/idmint
  idmint lease adopt-cluster --etcd http://127.0.0.1:2379 --margin-ms 60000")]
pub(crate) struct Args {
    #[command(subcommand)]
    command: LeaseCommand,
}

#[derive(Debug, Subcommand)]
enum LeaseCommand {
    /// Show generator-ID claims and stored high-water marks (read-only).
    #[command(after_help = "Examples:
  idmint lease list --etcd http://127.0.0.1:2379
  idmint lease list --etcd http://127.0.0.1:2379 --namespace orders --json
  idmint lease list --etcd http://127.0.0.1:2379 --etcd-scheme lable-org \\
      --etcd-lable-prefix unique-id/
  idmint lease list --data-dir /var/lib/idmint")]
    List(ListArgs),
    /// After etcd was restored from a snapshot, or servers moved to another Postgres (servers
    /// refuse to claim on it): raise every stored mark to now + the margin, then accept the
    /// store. Stop every server first.
    #[command(after_help = "A restored etcd cluster has a new cluster ID, and its marks are \
those of the snapshot: IDs issued after the snapshot are above them. Servers refuse to claim \
on it until this command raised every mark past them. Pick a margin larger than the largest \
window (--window-ms) plus the worst clock error of the fleet; servers whose clocks are behind \
the new marks wait until they pass them.

Examples:
  idmint lease adopt-cluster --etcd http://10.0.0.5:2379
  idmint lease adopt-cluster --etcd http://10.0.0.5:2379 --margin-ms 300000 --json")]
    AdoptCluster(AdoptArgs),
}

/// Flags of `idmint lease adopt-cluster`.
#[derive(Debug, clap::Args)]
struct AdoptArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// The Postgres of --coordinator postgres to adopt instead of etcd (servers that remember
    /// another database refuse it until then) [default: none].
    #[arg(long, env = "IDMINT_POSTGRES", value_name = "URL", hide_env_values = true)]
    postgres: Option<String>,
    /// The server's TOML configuration file, for its store settings [default: none].
    #[arg(long, env = "IDMINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Every mark is raised to at least now plus this, in ms (at most 86400000).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    margin_ms: u64,
    /// One JSON object instead of a sentence.
    #[arg(long)]
    json: bool,
}

/// Flags of `idmint lease list`.
#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// The Postgres of --coordinator postgres (postgresql://user@host/db): read its
    /// `idmint_claims` table [default: the file's `postgres` when its `coordinator` is
    /// postgres].
    #[arg(long, env = "IDMINT_POSTGRES", value_name = "URL", hide_env_values = true)]
    postgres: Option<String>,
    /// Without --etcd: the embedded store's directory [default: ./idmint-data].
    #[arg(long, env = "IDMINT_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// The server's TOML configuration file, for its store settings [default: none].
    #[arg(long, env = "IDMINT_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Only this namespace [default: all].
    #[arg(long, short = 'n', value_name = "NAME")]
    namespace: Option<String>,
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Generator IDs per LableOrg cluster ID (`pool/<cluster>:<generator>`).
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
const LABLE_GENERATORS: u64 = 2048;

/// What one store says about one generator ID.
#[derive(Debug, Default, Serialize)]
struct Entry {
    /// The idmint namespace (`None` in a LableOrg pool, whose keys do not name one).
    namespace: Option<String>,
    generator_id: u64,
    /// LableOrg pools: the pair behind the generator ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lable_generator_id: Option<u64>,
    /// Whether a claim is held (`None`: cannot tell).
    claimed: Option<bool>,
    holder: Option<String>,
    /// etcd: the claim's lease (hex, as etcdctl prints it) and its time to live.
    lease_id: Option<String>,
    lease_ttl_left_s: Option<i64>,
    lease_granted_ttl_s: Option<i64>,
    mark_ms: Option<u64>,
    /// The mark as RFC 3339 (UTC, ms).
    mark: Option<String>,
    /// How far the mark is ahead of now, in ms (negative: behind).
    mark_ahead_ms: Option<i64>,
    /// The layout fingerprint the mark was written under.
    layout: Option<String>,
}

/// The whole answer.
#[derive(Debug, Serialize)]
struct Listing {
    /// `etcd` or `file`.
    store: &'static str,
    /// The endpoints and prefix, or the directory.
    location: String,
    now_ms: u64,
    /// LableOrg pools: the `cluster-id` key, as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_ids: Option<String>,
    entries: Vec<Entry>,
}

/// A mark as both stores write it (JSON).
#[derive(Debug, Deserialize)]
struct MarkValue {
    mark_ms: u64,
    layout: String,
}

pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    match &args.command {
        LeaseCommand::List(list) => run_list(list, out),
        LeaseCommand::AdoptCluster(adopt) => run_adopt(adopt, out),
    }
}

/// The largest margin `adopt-cluster` takes: a day.
const MAX_ADOPT_MARGIN_MS: u64 = 86_400_000;

fn run_adopt(args: &AdoptArgs, out: &mut impl Write) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=MAX_ADOPT_MARGIN_MS).contains(&args.margin_ms),
        "--margin-ms must be 1..={MAX_ADOPT_MARGIN_MS}, not {}",
        args.margin_ms
    );
    let file = FileConfig::load(args.config.as_ref())?;
    let floor_ms = now_ms().saturating_add(args.margin_ms);
    if let Some(url) = &args.postgres {
        anyhow::ensure!(args.etcd.endpoints.is_empty(), "adopt one store: --etcd or --postgres");
        return adopt_postgres(url, floor_ms, args.json, out);
    }
    let etcd = EtcdSettings::resolve(&args.etcd, None, &file)?.context(
        "adopt-cluster needs --etcd or --postgres (or `etcd` in the configuration file)",
    )?;
    adopt_etcd(&etcd, floor_ms, args.json, out)
}

/// `adopt-cluster --postgres`: raises every mark to the floor and records the adoption
/// (`PostgresCoordinator::adopt`).
#[cfg(feature = "postgres")]
fn adopt_postgres(
    url: &str,
    floor_ms: u64,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    use idmint_coord::{PostgresCoordinator, PostgresLeaseOptions, PostgresOptions};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (raised, kept) = runtime.block_on(async {
        let coordinator = PostgresCoordinator::connect(
            url,
            PostgresOptions::default(),
            PostgresLeaseOptions::default(),
        )
        .await?;
        coordinator.adopt(floor_ms).await
    })?;
    let floor = idmint_core::format_rfc3339_ms(floor_ms);
    if json {
        let answer = serde_json::json!({
            "store": "postgres",
            "floor_ms": floor_ms,
            "floor": floor,
            "raised": raised,
            "kept": kept,
        });
        serde_json::to_writer_pretty(&mut *out, &answer)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "raised {raised} marks to {floor} ({kept} already above it); servers that remember \
             another database now claim on this one"
        )?;
    }
    Ok(())
}

#[cfg(not(feature = "postgres"))]
fn adopt_postgres(_: &str, _: u64, _: bool, _: &mut impl Write) -> anyhow::Result<()> {
    anyhow::bail!(
        "this idmint was built without postgres support; rebuild it with `--features postgres`"
    )
}

#[cfg(not(feature = "etcd"))]
fn adopt_etcd(_: &EtcdSettings, _: u64, _: bool, _: &mut impl Write) -> anyhow::Result<()> {
    Err(crate::config::no_etcd_feature())
}

#[cfg(feature = "etcd")]
fn adopt_etcd(
    etcd: &EtcdSettings,
    floor_ms: u64,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let adopted = runtime.block_on(async {
        let coordinator =
            idmint_coord::EtcdCoordinator::connect(&etcd.endpoints, etcd.coordinator_options())
                .await?;
        coordinator.adopt_cluster(floor_ms).await
    })?;
    let floor = idmint_core::format_rfc3339_ms(floor_ms);
    if json {
        let answer = serde_json::json!({
            "recorded_cluster": adopted.recorded.map(|id| format!("{id:x}")),
            "cluster": format!("{:x}", adopted.live),
            "floor_ms": floor_ms,
            "floor": floor,
            "raised": adopted.raised,
            "kept": adopted.kept,
        });
        serde_json::to_writer_pretty(&mut *out, &answer)?;
        writeln!(out)?;
    } else {
        let before = adopted.recorded.map_or("none".to_owned(), |id| format!("{id:x}"));
        writeln!(
            out,
            "raised {} marks to {floor} ({} already above it); the marks now belong to etcd \
             cluster {:x} (was {before})",
            adopted.raised, adopted.kept, adopted.live
        )?;
    }
    Ok(())
}

fn run_list(args: &ListArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let file = FileConfig::load(args.config.as_ref())?;
    if let Some(ns) = &args.namespace {
        let valid = !ns.is_empty()
            && ns.len() <= 64
            && ns
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        anyhow::ensure!(valid, "--namespace `{ns}` is not a namespace name (a-z, 0-9, `-`, `_`)");
    }
    let now_ms = now_ms();
    let postgres = args.postgres.clone().or_else(|| {
        (file.coordinator == Some(crate::config::CoordinatorArg::Postgres))
            .then(|| file.postgres.clone())
            .flatten()
    });
    let etcd = EtcdSettings::resolve(&args.etcd, None, &file)?;
    anyhow::ensure!(
        etcd.is_none() || postgres.is_none(),
        "lease list reads one store: give --etcd or --postgres"
    );
    let mut listing = match (etcd, postgres) {
        (_, Some(url)) => list_postgres(&url, args.namespace.as_deref(), now_ms)?,
        (Some(etcd), None) => list_etcd(&etcd, args.namespace.as_deref(), now_ms)?,
        (None, None) => {
            let dir = args
                .data_dir
                .clone()
                .or(file.data_dir.clone())
                .unwrap_or_else(|| DEFAULT_DATA_DIR.into());
            list_dir(&dir, args.namespace.as_deref(), now_ms)?
        }
    };
    for entry in &mut listing.entries {
        if let Some(mark) = entry.mark_ms {
            entry.mark = Some(idmint_core::format_rfc3339_ms(mark));
            entry.mark_ahead_ms =
                Some(i64::try_from(i128::from(mark) - i128::from(now_ms)).unwrap_or(i64::MAX));
        }
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &listing)?;
        writeln!(out)?;
    } else {
        write_table(&listing, out)?;
    }
    Ok(())
}

/// The claims of `--coordinator postgres`, read-only (`PostgresCoordinator::list_at`).
#[cfg(feature = "postgres")]
fn list_postgres(url: &str, namespace: Option<&str>, now_ms: u64) -> anyhow::Result<Listing> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let rows = runtime.block_on(idmint_coord::PostgresCoordinator::list_at(
        url,
        std::time::Duration::from_secs(5),
    ))?;
    let entries = rows
        .into_iter()
        .filter(|row| namespace.is_none_or(|ns| ns == row.namespace))
        .map(|row| Entry {
            claimed: Some(row.held()),
            lease_ttl_left_s: row.lease_left_ms.filter(|_| row.held()).map(|ms| ms / 1_000),
            namespace: Some(row.namespace),
            generator_id: row.generator_id,
            holder: Some(row.holder),
            mark_ms: row.mark_ms,
            layout: row.layout,
            ..Entry::default()
        })
        .collect();
    // The URL may hold a password: show only where it points.
    let location = url.rsplit('@').next().unwrap_or(url).to_owned();
    Ok(Listing { store: "postgres", location, now_ms, cluster_ids: None, entries })
}

#[cfg(not(feature = "postgres"))]
fn list_postgres(_: &str, _: Option<&str>, _: u64) -> anyhow::Result<Listing> {
    anyhow::bail!(
        "this idmint was built without postgres support; rebuild it with `--features postgres`"
    )
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn parse_mark(text: &[u8]) -> Option<MarkValue> {
    serde_json::from_slice(text).ok()
}

/// Prints the listing as an aligned table.
fn write_table(listing: &Listing, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "{} store at {}; now {}",
        listing.store,
        listing.location,
        idmint_core::format_rfc3339_ms(listing.now_ms)
    )?;
    if let Some(clusters) = &listing.cluster_ids {
        writeln!(out, "cluster ids: {clusters}")?;
    }
    if listing.entries.is_empty() {
        writeln!(out, "no claims and no marks")?;
        return Ok(());
    }
    let dash = || "-".to_owned();
    let mut rows = vec![[
        "NAMESPACE".to_owned(),
        "GENERATOR".to_owned(),
        "CLAIMED".to_owned(),
        "HOLDER".to_owned(),
        "LEASE TTL".to_owned(),
        "MARK".to_owned(),
        "AHEAD OF NOW".to_owned(),
    ]];
    for e in &listing.entries {
        let generator = match (e.cluster_id, e.lable_generator_id) {
            (Some(c), Some(g)) => format!("{} ({c}:{g})", e.generator_id),
            _ => e.generator_id.to_string(),
        };
        rows.push([
            e.namespace.clone().unwrap_or_else(dash),
            generator,
            match e.claimed {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => "?".to_owned(),
            },
            e.holder.clone().unwrap_or_else(dash),
            e.lease_ttl_left_s.map_or_else(dash, |ttl| {
                if ttl < 0 { "expired".to_owned() } else { format!("{ttl} s") }
            }),
            e.mark.clone().unwrap_or_else(dash),
            e.mark_ahead_ms.map_or_else(dash, |ms| format!("{ms:+} ms")),
        ]);
    }
    let widths: Vec<usize> =
        (0..7).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for row in &rows {
        let line: Vec<String> =
            row.iter().zip(&widths).map(|(cell, &w)| format!("{cell:<w$}")).collect();
        writeln!(out, "{}", line.join("  ").trim_end())?;
    }
    Ok(())
}

/// The embedded store: `<dir>/<namespace>/<id>.lock` (held with `flock` while claimed; holds
/// the holder's description) and `<id>.mark` (JSON). Whether a lock is held is read from
/// `/proc/locks`, never by trying it.
fn list_dir(dir: &Path, namespace: Option<&str>, now_ms: u64) -> anyhow::Result<Listing> {
    anyhow::ensure!(dir.is_dir(), "no data directory at {}", dir.display());
    let held = held_flocks();
    let namespaces: Vec<String> = match namespace {
        Some(ns) => vec![ns.to_owned()],
        None => {
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {}", dir.display()))?
                .flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect();
            names.sort();
            names
        }
    };
    let mut entries: BTreeMap<(String, u64), Entry> = BTreeMap::new();
    for ns in namespaces {
        let ns_dir = dir.join(&ns);
        let Ok(files) = std::fs::read_dir(&ns_dir) else { continue };
        for file in files.flatten() {
            let name = file.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((id, kind)) = name.split_once('.') else { continue };
            let Ok(generator_id) = id.parse::<u64>() else { continue };
            let entry = entries.entry((ns.clone(), generator_id)).or_insert_with(|| Entry {
                namespace: Some(ns.clone()),
                generator_id,
                claimed: Some(false),
                ..Entry::default()
            });
            match kind {
                "lock" => {
                    let claimed = held.as_ref().map(|held| is_locked(held, &file.path()));
                    entry.claimed = claimed;
                    if claimed != Some(false) {
                        let holder = std::fs::read_to_string(file.path()).unwrap_or_default();
                        entry.holder = Some(holder.trim().to_owned()).filter(|h| !h.is_empty());
                    }
                }
                "mark" => {
                    if let Some(mark) = std::fs::read(file.path()).ok().and_then(|t| parse_mark(&t))
                    {
                        entry.mark_ms = Some(mark.mark_ms);
                        entry.layout = Some(mark.layout);
                    }
                }
                _ => {}
            }
        }
    }
    Ok(Listing {
        store: "file",
        location: dir.display().to_string(),
        now_ms,
        cluster_ids: None,
        entries: entries.into_values().collect(),
    })
}

/// `(major, minor, inode)` of every file with a `FLOCK` held, from `/proc/locks`; `None` when
/// it cannot be read (not Linux).
fn held_flocks() -> Option<Vec<(u64, u64, u64)>> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 1234 00:2d:5678 0 EOF`; waiters have `->` after the number.
    Some(
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if fields.get(1) != Some(&"FLOCK") {
                    return None;
                }
                let mut device = fields.get(5)?.split(':');
                let major = u64::from_str_radix(device.next()?, 16).ok()?;
                let minor = u64::from_str_radix(device.next()?, 16).ok()?;
                let inode = device.next()?.parse().ok()?;
                Some((major, minor, inode))
            })
            .collect(),
    )
}

/// Whether `/proc/locks` lists a `flock` on this file.
fn is_locked(held: &[(u64, u64, u64)], path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else { return false };
    let dev = meta.dev();
    // glibc's `major`/`minor` of a `st_dev`.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    held.contains(&(major, minor, meta.ino()))
}

#[cfg(not(feature = "etcd"))]
fn list_etcd(_: &EtcdSettings, _: Option<&str>, _: u64) -> anyhow::Result<Listing> {
    Err(crate::config::no_etcd_feature())
}

/// etcd, in either scheme (the key layouts of `idmint_coord::Scheme`).
#[cfg(feature = "etcd")]
fn list_etcd(etcd: &EtcdSettings, namespace: Option<&str>, now_ms: u64) -> anyhow::Result<Listing> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(etcd_list::list(etcd, namespace, now_ms))
}

#[cfg(feature = "etcd")]
mod etcd_list {
    use std::{collections::BTreeMap, time::Duration};

    use anyhow::Context;
    use idmint_coord::{EtcdCoordinator, EtcdKey};

    use super::{Entry, LABLE_GENERATORS, Listing, parse_mark};
    use crate::config::EtcdSettings;

    /// Connecting, and each read with its retries on other members, as servers do.
    const TIMEOUT: Duration = Duration::from_secs(5);

    /// Reads through `EtcdCoordinator`, so that the listing goes to a healthy member (found in
    /// the member list when one endpoint is given) and moves on when one fails, as a server's
    /// requests do; it never claims or writes.
    pub(super) async fn list(
        etcd: &EtcdSettings,
        namespace: Option<&str>,
        now_ms: u64,
    ) -> anyhow::Result<Listing> {
        let endpoints = etcd.endpoints.join(",");
        let options = idmint_coord::EtcdOptions {
            request_timeout: TIMEOUT,
            connect_timeout: TIMEOUT,
            ..etcd.coordinator_options()
        };
        let client = EtcdCoordinator::connect(&etcd.endpoints, options)
            .await
            .with_context(|| format!("cannot reach etcd at {endpoints}"))?;
        match &etcd.lable_prefix {
            None => native(&client, etcd, namespace, now_ms).await,
            Some(prefix) => lable_org(&client, etcd, prefix, namespace, now_ms).await,
        }
    }

    async fn get_prefix(client: &EtcdCoordinator, prefix: &str) -> anyhow::Result<Vec<EtcdKey>> {
        client
            .read_prefix(prefix)
            .await
            .with_context(|| format!("cannot read the keys under {prefix}"))
    }

    /// Fills in the lease of a claim key: its ID and time to live.
    async fn lease(client: &EtcdCoordinator, entry: &mut Entry, lease: i64) -> anyhow::Result<()> {
        if lease == 0 {
            return Ok(());
        }
        entry.lease_id = Some(format!("{lease:x}"));
        let ttl = client
            .lease_time_to_live(lease)
            .await
            .with_context(|| format!("cannot read lease {lease:x}"))?;
        entry.lease_ttl_left_s = Some(ttl.left_s);
        entry.lease_granted_ttl_s = Some(ttl.granted_s);
        Ok(())
    }

    /// `<prefix><namespace>/claim/<id>` (on the claim's lease; the holder) and
    /// `<prefix><namespace>/mark/<id>` (JSON).
    async fn native(
        client: &EtcdCoordinator,
        etcd: &EtcdSettings,
        namespace: Option<&str>,
        now_ms: u64,
    ) -> anyhow::Result<Listing> {
        let root = match namespace {
            Some(ns) => format!("{}{ns}/", etcd.prefix),
            None => etcd.prefix.clone(),
        };
        let mut entries: BTreeMap<(String, u64), Entry> = BTreeMap::new();
        let mut leases = Vec::new();
        for kv in get_prefix(client, &root).await? {
            let Some(rest) = kv.key.as_slice().strip_prefix(etcd.prefix.as_bytes()) else {
                continue;
            };
            let rest = String::from_utf8_lossy(rest);
            let parts: Vec<&str> = rest.split('/').collect();
            let [ns, kind, id] = parts[..] else { continue };
            let Ok(generator_id) = id.parse::<u64>() else { continue };
            if !matches!(kind, "claim" | "mark") {
                continue;
            }
            let key = (ns.to_owned(), generator_id);
            let entry = entries.entry(key.clone()).or_insert_with(|| Entry {
                namespace: Some(ns.to_owned()),
                generator_id,
                claimed: Some(false),
                ..Entry::default()
            });
            if kind == "claim" {
                entry.claimed = Some(true);
                entry.holder = Some(String::from_utf8_lossy(&kv.value).into_owned());
                leases.push((key, kv.lease));
            } else if let Some(mark) = parse_mark(&kv.value) {
                entry.mark_ms = Some(mark.mark_ms);
                entry.layout = Some(mark.layout);
            }
        }
        for (key, id) in leases {
            if let Some(entry) = entries.get_mut(&key) {
                lease(client, entry, id).await?;
            }
        }
        Ok(Listing {
            store: "etcd",
            location: format!("{} (prefix {})", etcd.endpoints.join(","), etcd.prefix),
            now_ms,
            cluster_ids: None,
            entries: entries.into_values().collect(),
        })
    }

    /// LableOrg's pool under `prefix`: `pool/<cluster>:<generator>` (empty, on a lease),
    /// `idmint/holder/<pair>` and `idmint/mark/<pair>` (idmint's own), `cluster-id`.
    async fn lable_org(
        client: &EtcdCoordinator,
        etcd: &EtcdSettings,
        prefix: &str,
        namespace: Option<&str>,
        now_ms: u64,
    ) -> anyhow::Result<Listing> {
        let root = match namespace {
            Some(ns) => prefix.replace("{namespace}", ns),
            None => {
                anyhow::ensure!(
                    !prefix.contains("{namespace}"),
                    "--etcd-lable-prefix {prefix} names a pool per namespace: give --namespace"
                );
                prefix.to_owned()
            }
        };
        let pair = |text: &str| -> Option<(u64, u64)> {
            let (c, g) = text.split_once(':')?;
            Some((c.parse().ok()?, g.parse().ok()?))
        };
        let mut entries: BTreeMap<(u64, u64), Entry> = BTreeMap::new();
        let mut leases = Vec::new();
        let mut cluster_ids = None;
        for kv in get_prefix(client, &root).await? {
            let Some(rest) = kv.key.as_slice().strip_prefix(root.as_bytes()) else { continue };
            let rest = String::from_utf8_lossy(rest).into_owned();
            if rest == "cluster-id" {
                cluster_ids = Some(String::from_utf8_lossy(&kv.value).into_owned());
                continue;
            }
            let (kind, name) = if let Some(name) = rest.strip_prefix("pool/") {
                ("pool", name)
            } else if let Some(name) = rest.strip_prefix("idmint/holder/") {
                ("holder", name)
            } else if let Some(name) = rest.strip_prefix("idmint/mark/") {
                ("mark", name)
            } else {
                continue;
            };
            let Some((cluster, generator)) = pair(name) else { continue };
            let entry = entries.entry((cluster, generator)).or_insert_with(|| Entry {
                namespace: namespace.map(str::to_owned),
                generator_id: cluster.saturating_mul(LABLE_GENERATORS).saturating_add(generator),
                cluster_id: Some(cluster),
                lable_generator_id: Some(generator),
                claimed: Some(false),
                ..Entry::default()
            });
            match kind {
                "pool" => {
                    entry.claimed = Some(true);
                    leases.push(((cluster, generator), kv.lease));
                }
                "holder" => entry.holder = Some(String::from_utf8_lossy(&kv.value).into_owned()),
                _ => {
                    if let Some(mark) = parse_mark(&kv.value) {
                        entry.mark_ms = Some(mark.mark_ms);
                        entry.layout = Some(mark.layout);
                    }
                }
            }
        }
        for (key, id) in leases {
            if let Some(entry) = entries.get_mut(&key) {
                lease(client, entry, id).await?;
            }
        }
        for entry in entries.values_mut() {
            if entry.claimed == Some(true) && entry.holder.is_none() {
                entry.holder = Some("a LableOrg client".into());
            }
        }
        Ok(Listing {
            store: "etcd",
            location: format!("{} (lable-org pool {root})", etcd.endpoints.join(",")),
            now_ms,
            cluster_ids,
            entries: entries.into_values().collect(),
        })
    }
}
