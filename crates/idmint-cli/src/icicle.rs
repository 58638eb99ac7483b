//! `idmint icicle set-shard`: the setup step of icicle mode. Stores a Redis node's logical
//! shard ID (`icicle-generator-logical-shard-id`), refusing one that another listed node has.
//! The work is `idmint_coord::IcicleClient::set_shard`; this module turns flags into that call
//! and says what it did.

use std::io::Write;

/// The arguments of `idmint icicle`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  idmint icicle set-shard redis://10.0.0.1:6379 1
  idmint icicle set-shard --help")]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Set the logical shard ID (1 to 1023) of one Redis node.
    SetShard(SetShardArgs),
}

/// The arguments of `idmint icicle set-shard`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Each Redis node that `idmint serve --source redis` (or a Java icicle client) uses
needs its own logical shard ID: two nodes with one shard ID issue the same IDs. set-shard reads the shard ID of every node given with --nodes (the node itself may be among
them) and refuses a shard ID that another of them has. It is not atomic across nodes: run it
from one place at a time. A Redis without persistence loses the key when it restarts; set it
again before serving.

Examples:
  idmint icicle set-shard redis://10.0.0.1:6379 1
  idmint icicle set-shard redis://10.0.0.2:6379 2 \\
      --nodes redis://10.0.0.1:6379,redis://10.0.0.2:6379"
)]
struct SetShardArgs {
    /// The node, as redis://[:password@]host:port[/db].
    // The brackets are the URL's optional parts, read by clap as help, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(value_name = "URL")]
    node: String,
    /// The logical shard ID, 1 to 1023.
    #[arg(value_name = "SHARD")]
    shard: u16,
    /// Every node of the deployment, comma-separated, to check that none of the others has
    /// SHARD already [default: none, no check].
    #[arg(long, env = "IDMINT_REDIS", value_name = "URLS", value_delimiter = ',')]
    nodes: Vec<String>,
}

/// Runs `idmint icicle`.
pub(crate) fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    match &args.command {
        Command::SetShard(args) => set_shard(args, out),
    }
}

#[cfg(feature = "redis")]
fn set_shard(args: &SetShardArgs, out: &mut impl Write) -> anyhow::Result<()> {
    use anyhow::Context;
    use idmint_coord::{IcicleClient, IcicleOptions};

    // The node as shown in messages (without its password); this also checks the URL.
    let shown = IcicleClient::new(std::slice::from_ref(&args.node), IcicleOptions::default())?
        .nodes()
        .remove(0);
    let nodes: Vec<String> =
        args.nodes.iter().map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let previous = runtime.block_on(IcicleClient::set_shard(&args.node, args.shard, &nodes))?;
    let previous = match previous {
        Some(previous) => format!("it was {previous}"),
        None => "it had none".to_owned(),
    };
    let checked = match nodes.len() {
        0 => "no other nodes checked".to_owned(),
        n => format!("checked {n} listed nodes"),
    };
    writeln!(out, "set logical shard id {} on {shown} ({previous}; {checked})", args.shard)?;
    Ok(())
}

#[cfg(not(feature = "redis"))]
fn set_shard(_args: &SetShardArgs, _out: &mut impl Write) -> anyhow::Result<()> {
    Err(no_redis_feature())
}

/// The error of a Redis command or flag given to a build without the feature.
#[cfg(not(feature = "redis"))]
pub(crate) fn no_redis_feature() -> anyhow::Error {
    anyhow::anyhow!(
        "this idmint was built without redis support; rebuild it with `--features redis` to use \
         icicle on Redis"
    )
}
