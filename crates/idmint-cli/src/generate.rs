//! `idmint gen`: prints N unique IDs, one per line, from a generator on the system clock.
//! Unique within the run; a later run with the same node fields starts in a later tick (the
//! run outlives its last ID's tick), and a layout without time needs an explicit launch.
//! With a store flag (`--data-dir`, `--postgres`, `--etcd`, `--config`), the IDs come from
//! the embedded minter instead (`minter.rs`), safe against runs at the same time and a clock
//! set back.
//!
//! The waiting is `idmint-runtime`'s (`BlockingGenerator::fill`); this module only sets the
//! generator up and writes the IDs. It is the fast path of the CLI: one reused `String`, a
//! `BufWriter` on locked stdout, flushed once per chunk (so that a reader of a long run sees
//! the IDs as they come), and a progress bar touched once per chunk, never per ID.

mod minter;

use std::io::{self, IsTerminal, Write};

use anyhow::bail;
use idmint_core::{
    AnyGenerator, AnyId, Clock, FieldRole, FieldValue, GeneratorConfig, HotGuid, IdText, Layout,
    SystemClock,
};
use idmint_runtime::BlockingGenerator;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::layout_arg::{LayoutArgs, TextArgs, parse_fields};

/// From this many IDs on, `gen` shows a progress bar (when stderr is a terminal).
const PROGRESS_FROM: u64 = 100_000;

/// IDs generated between two checks of stdout and updates of the progress bar: small enough
/// that even sonyflake (25,600 IDs/s) moves the bar several times a second.
const CHUNK: u64 = 1 << 13;

/// The arguments of `idmint gen`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint gen
  idmint gen -n 1000000 datacenter=1 worker=7 > ids.txt
  idmint gen --layout lable --format base32 generator_id=42 mode=spread
  idmint gen --layout hot-guid -n 3 shard_key=208
  idmint gen --layout uuid7 --format typeid --type-prefix user -n 3
  idmint gen --layout uuid7 --format ulid
  idmint gen --layout-file orders.toml -n 10 worker=5
  idmint gen -n 3 --json
  idmint gen -n 1000000 --data-dir ./idmint-data > ids.txt
  idmint gen -n 1000 --postgres postgresql://idmint@db/idmint --data-dir app
  idmint gen -n 1000 --etcd http://etcd-0:2379,http://etcd-1:2379 --lease-ttl 5
  idmint gen -n 10 --config /etc/idmint.toml --namespace orders")]
pub(crate) struct Args {
    #[command(flatten)]
    layout: LayoutArgs,

    /// How many IDs to print (at least 1).
    #[arg(short = 'n', value_name = "N", default_value = "1", value_parser = parse_count,
          allow_negative_numbers = true)]
    count: u64,

    #[command(flatten)]
    text: TextArgs,

    /// How far ahead of the clock a burst may run when a tick is used up, in ms (at most
    /// 3600000); 0 waits for the next tick.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    borrow_ms: u64,

    /// Print one JSON object per ID (layout, id, fields, time), one per line, instead of the
    /// IDs alone.
    #[arg(long)]
    json: bool,

    /// Node fields as NAME=VALUE (datacenter, worker, shard, machine, node, node_no,
    /// generator_id, cluster_id, mode, launch_id, process, shard_key: whichever the layout
    /// has). Default: each node field's smallest value (shard 1 for icicle); for hot-guid,
    /// `process` comes from the host name and the process id. Not with a store, whose claim
    /// sets them.
    #[arg(value_name = "NAME=VALUE")]
    node: Vec<String>,

    #[command(flatten)]
    store: minter::StoreArgs,
}

/// Parses `-n`: a whole number, at least 1.
fn parse_count(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number of ids, at least 1".to_owned()),
    }
}

/// Runs `idmint gen`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    if args.store.given() {
        return minter::run(args, out);
    }
    let layout = args.layout.resolve(None)?;
    let text = args.text.text(&layout)?;
    let mut node = parse_fields(&layout, &args.node)?;
    check_node_fields(&layout, &node)?;
    let has_process = layout.fields().iter().any(|f| f.name == "process" && f.text.is_some());
    if has_process && !node.iter().any(|(name, _)| name == "process") {
        node.push(("process".to_owned(), FieldValue::Text(local_process())));
    }
    let config = GeneratorConfig { borrow_ms: args.borrow_ms, ..GeneratorConfig::default() };
    let generator = BlockingGenerator::new(layout.generator(&node, &config)?, SystemClock);
    check_repeats(&layout, &node)?;

    let progress = (args.count >= PROGRESS_FROM && io::stderr().is_terminal())
        .then(|| progress_bar(args.count));
    let json = args.json.then_some(&layout);
    let written = write_ids(&generator, args.count, &text, json, progress.as_ref(), out);
    // Cleared on errors too, so that the error line stands alone.
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    outlive_last_tick(&layout, written?)
}

/// Refuses a layout without time unless its node fields make the run's IDs its own: such IDs
/// repeat on every run with the same fields (DecimalId's test-only launch 0 gives
/// `10000000000`, `20000000000`, … every time). With an explicit `launch_id`, one line on
/// stderr says what is unique.
fn check_repeats(layout: &Layout, node: &[(String, FieldValue)]) -> anyhow::Result<()> {
    if layout.fields().iter().any(|f| f.role == FieldRole::Time) {
        return Ok(());
    }
    if !node.iter().any(|(name, _)| name == "launch_id") {
        bail!(
            "layout `{}` has no time field, so every run with the same fields prints the same \
             ids: give launch_id=N, a launch no other run used (0 is for tests), or use \
             `idmint serve`, which keeps a counter",
            layout.name()
        );
    }
    #[allow(clippy::print_stderr, reason = "the one line the user must read")]
    {
        eprintln!(
            "note: these {} ids are unique within this launch_id only; a run with the same \
             launch_id and generator_id repeats them",
            layout.name()
        );
    }
    Ok(())
}

/// Returns once the clock has passed the tick of the last ID printed, so that a later `gen`
/// run with the same node fields starts in a later tick and cannot repeat one of this run's
/// IDs (a run within the same tick would start the sequence again). At most one tick: 1 ms
/// for Snowflake, 10 ms for Sonyflake, 1 s for TraceId; more after `--borrow-ms`.
fn outlive_last_tick(layout: &Layout, last: Option<AnyId>) -> anyhow::Result<()> {
    let Some(last) = last else { return Ok(()) };
    let now = SystemClock.now_ms();
    let Some(time_ms) = layout.time_ms(last, now)? else { return Ok(()) };
    let tick_ms = layout.capacity().tick_ms.max(1);
    let over = time_ms.saturating_add(tick_ms);
    while SystemClock.now_ms() < over {
        let left = over.saturating_sub(SystemClock.now_ms());
        std::thread::sleep(std::time::Duration::from_millis(left.max(1)));
    }
    Ok(())
}

/// Generates `count` IDs and writes them one per line, in chunks; stops at the first failed
/// write (a closed pipe, a full disk) instead of generating on. Returns the last ID written.
fn write_ids(
    generator: &BlockingGenerator<AnyGenerator, SystemClock>,
    count: u64,
    text: &IdText,
    json: Option<&Layout>,
    progress: Option<&ProgressBar>,
    out: &mut impl Write,
) -> anyhow::Result<Option<AnyId>> {
    let now_ms = SystemClock.now_ms();
    let mut last = None;
    let mut line = String::with_capacity(64);
    let mut failed: Option<anyhow::Error> = None;
    let mut left = count;
    while left > 0 {
        let chunk = left.min(CHUNK);
        generator.fill(chunk, |id| {
            if failed.is_some() {
                return;
            }
            last = Some(id);
            line.clear();
            let written = match json {
                Some(layout) => crate::decode::write_json(layout, id, text, now_ms, out),
                None => {
                    text.write_into(id, &mut line).map_err(anyhow::Error::from).and_then(|()| {
                        line.push('\n');
                        out.write_all(line.as_bytes()).map_err(anyhow::Error::from)
                    })
                }
            };
            if let Err(err) = written {
                failed = Some(err);
            }
        })?;
        if let Some(err) = failed {
            return Err(err);
        }
        left -= chunk;
        out.flush()?;
        if let Some(bar) = progress {
            bar.inc(chunk);
        }
    }
    Ok(last)
}

/// Refuses fields a generator fills itself (time, sequence), with a message that names the
/// ones that can be given. Unknown names are left to the core, which lists the layout's fields.
fn check_node_fields(layout: &Layout, node: &[(String, FieldValue)]) -> anyhow::Result<()> {
    let fields = layout.fields();
    for (name, _) in node {
        if let Some(field) = fields.iter().find(|f| f.name == *name)
            && field.role != FieldRole::Node
        {
            let settable: Vec<&str> = fields
                .iter()
                .filter(|f| f.role == FieldRole::Node)
                .map(|f| f.name.as_str())
                .collect();
            bail!(
                "field `{name}` of layout `{}` is set by the generator; `gen` takes only node \
                 fields ({})",
                layout.name(),
                if settable.is_empty() { "none".to_owned() } else { settable.join(", ") }
            );
        }
    }
    Ok(())
}

/// HotGuid's `process` for this process, as HotGuid derives it: MD5 of the host name and the
/// process id, as 10 hex digits.
fn local_process() -> String {
    let host = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.trim().to_owned())
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    HotGuid::process_bytes(&host, std::process::id()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A progress bar on stderr for `total` IDs.
fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} ids, {eta} left")
    {
        bar.set_style(style);
    }
    bar
}
