//! The one error type of `idmint-coord`, named for what went wrong from the caller's side.

use std::{io, sync::Arc};

/// Everything that can go wrong while claiming generator IDs or storing marks.
///
/// Backend errors are mapped into these categories; the native error, where there is one, is
/// kept as the source.
///
/// # Example
///
/// ```
/// use idmint_coord::Error;
///
/// let err = Error::PoolExhausted { namespace: "orders".into(), size: 1024 };
/// assert_eq!(err.to_string(), "every generator id of namespace `orders` is claimed (pool of 1024)");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The generator ID is claimed by someone else.
    #[error(
        "generator id {generator_id} of namespace `{namespace}` is already claimed by {holder}"
    )]
    Conflict {
        /// The namespace.
        namespace: String,
        /// The generator ID.
        generator_id: u64,
        /// Who holds it, as they described themselves.
        holder: String,
    },
    /// Every generator ID of the pool is claimed.
    #[error("every generator id of namespace `{namespace}` is claimed (pool of {size})")]
    PoolExhausted {
        /// The namespace.
        namespace: String,
        /// How many generator IDs the pool has.
        size: u64,
    },
    /// The claim is no longer held, so nothing was stored.
    #[error(
        "the claim on generator id {generator_id} of namespace `{namespace}` is no longer held"
    )]
    ClaimLost {
        /// The namespace.
        namespace: String,
        /// The generator ID.
        generator_id: u64,
    },
    /// A mark below the stored one was offered; marks never go down.
    #[error("mark {offered_ms} is below the stored mark {stored_ms}; marks never go down")]
    MarkRegressed {
        /// The mark that was offered.
        offered_ms: u64,
        /// The stored mark.
        stored_ms: u64,
    },
    /// The stored mark was written under another layout.
    #[error(
        "the mark of namespace `{namespace}` was written for layout `{stored}`, not `{expected}`; move it aside to start over"
    )]
    LayoutChanged {
        /// The namespace.
        namespace: String,
        /// The fingerprint stored with the mark.
        stored: String,
        /// The fingerprint of the layout in use.
        expected: String,
    },
    /// The etcd cluster answering is not the one the stored marks were written on: the data
    /// were restored from a snapshot or copied into another cluster, so the marks may be
    /// behind IDs already issued. Nothing is claimed until an operator raises every mark with
    /// `idmint lease adopt-cluster` (RELIABILITY.md, "etcd restored from a snapshot (T21)").
    #[error(
        "etcd cluster {live:016x} is not the cluster {recorded:016x} that the marks under `{key}` were written on: it was restored from a snapshot or the keys were copied, so the marks may be behind ids already issued; nothing is claimed until `idmint lease adopt-cluster` raises every mark past them (see RELIABILITY.md)"
    )]
    ClusterChanged {
        /// The key that records the cluster.
        key: String,
        /// The cluster ID recorded there.
        recorded: u64,
        /// The cluster ID of the cluster answering.
        live: u64,
    },
    /// The shared store a server claims on is not the one its data directory last claimed
    /// on: another cluster, or one with no idmint marks (new or wiped). Its marks may be
    /// behind IDs this server issued, and another server may hold its generator IDs on the
    /// old store, so nothing is claimed until an operator adopts the store.
    #[error(
        "the data directory {dir} last claimed on {remembered}, but the store answering is {found}: its marks may be behind ids this server issued, and another server may hold its generator ids on the old store; nothing is claimed. If this store replaces the old one and no server still runs on the old one, run `idmint lease adopt-cluster` on it, then start again (see RELIABILITY.md)"
    )]
    StoreChanged {
        /// The server's memory directory (`<data-dir>/fleet.d`).
        dir: String,
        /// The store it remembers.
        remembered: String,
        /// The store that answered.
        found: String,
    },
    /// A counter value chosen by the caller was taken before: the counter is already at it
    /// or above (an earlier start, or another process, took it or counted past it).
    #[error(
        "{value} was taken before from counter `{name}`, which is at {current}: choose a value above {current}, or none to take the next one"
    )]
    Taken {
        /// The counter.
        name: String,
        /// The value asked for.
        value: u64,
        /// The counter's value.
        current: u64,
    },
    /// The request itself is invalid.
    #[error("invalid claim request: {0}")]
    InvalidRequest(String),
    /// Stored data could not be read back.
    #[error("corrupt coordination data in {path}: {reason}")]
    Corrupt {
        /// Where the data is.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A data directory is not what idmint last wrote: it was copied or restored, or a mark,
    /// segment or counter file was lost or went back. Nothing is claimed or handed out from
    /// it; see RELIABILITY.md for the recovery steps.
    #[error(
        "data directory {dir} is not what idmint last wrote, so it is not trusted: {}; if no other copy of it can be in use, start once with --adopt-data-dir (ids then jump ahead by a safety margin), otherwise restore the right copy (`idmint doctor` shows the details; see RELIABILITY.md)",
        problems.join("; ")
    )]
    Untrusted {
        /// The directory.
        dir: String,
        /// What was found.
        problems: Vec<String>,
    },
    /// A local file operation failed. The message carries the operating system's error once;
    /// it is not also the error's source, so that a chain of causes does not repeat it.
    #[error("{context}: {os}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        os: Arc<io::Error>,
    },
    /// The coordination service could not be reached, or did not answer in time.
    #[error("{backend} is unavailable: {reason}")]
    Unavailable {
        /// The backend.
        backend: &'static str,
        /// What happened.
        reason: String,
    },
    /// A counter, or a namespace's segment ID space, reached its maximum. Nothing was handed
    /// out; counters and segments never wrap around.
    #[error("{what} `{name}` is exhausted: its maximum is {max} and it never wraps around")]
    Exhausted {
        /// What ran out (`counter`, `segment namespace`).
        what: &'static str,
        /// The counter's or namespace's name.
        name: String,
        /// The largest value it may reach.
        max: u64,
    },
    /// The store is configured so that it may lose writes it has acknowledged, which would hand
    /// out the same IDs twice after a crash; it is refused.
    #[error(
        "{backend} setting `{setting}` is `{value}`: a crash could lose acknowledged writes and hand out the same ids twice; set it to `on`"
    )]
    NotDurable {
        /// The backend.
        backend: &'static str,
        /// The setting (`fsync`, `synchronous_commit`).
        setting: String,
        /// Its value.
        value: String,
    },
    /// The database server is a standby (in recovery): ranges come only from a primary. Give
    /// every host in the connection string with `target_session_attrs=read-write` to follow a
    /// promotion.
    #[error(
        "{backend} server is a standby (in recovery); connect to the primary, e.g. list every host with target_session_attrs=read-write"
    )]
    Standby {
        /// The backend.
        backend: &'static str,
    },
    /// An icicle node (Redis) has no logical shard ID, or one outside 1..=1023 (icicle's
    /// `InvalidLogicalShardIdException`): its IDs could collide with another node's or not fit.
    #[cfg(feature = "redis")]
    #[error("{}", describe_shard(node, *shard))]
    InvalidShard {
        /// The node, without its password.
        node: String,
        /// What the node reported; −1 when `icicle-generator-logical-shard-id` is missing or not
        /// a number.
        shard: i64,
    },
    /// The logical shard ID is already set on another icicle node. Two nodes with one shard ID
    /// issue the same IDs, so it is refused.
    #[cfg(feature = "redis")]
    #[error(
        "logical shard id {shard} is already set on icicle node {other}; refusing to set it on {node} too"
    )]
    ShardInUse {
        /// The shard ID asked for.
        shard: u16,
        /// The node it was to be set on.
        node: String,
        /// The node that already has it.
        other: String,
    },
    /// An icicle node refused to generate IDs because its lock key is set: its sequence rolled
    /// over (a 1 ms lock), or a failover guard fenced it; or the call itself rolled the
    /// sequence over, and its range is not handed out (`IcicleClient`'s rollover rule).
    #[cfg(feature = "redis")]
    #[error("icicle node {node} is locked: {reason}")]
    NodeLocked {
        /// The node, without its password.
        node: String,
        /// The node's error reply.
        reason: String,
    },
    /// The failover guard refused IDs from an icicle node: the node restarted or failed over
    /// (its run ID or replication ID changed), or the client met it for the first time, and its
    /// clock is not past the last millisecond already handed out for the logical shard (seen by
    /// this client, or recorded in the node's shared mark by any idmint client), so its IDs
    /// could repeat ones already handed out. The node was locked until its clock passes that
    /// millisecond.
    #[cfg(feature = "redis")]
    #[error(
        "icicle node {node} restarted or failed over and its clock ({node_ms} ms) is not past the last millisecond handed out for logical shard {shard} ({seen_ms} ms); its ids were refused and it is locked until then"
    )]
    FailoverFenced {
        /// The node, without its password.
        node: String,
        /// The logical shard.
        shard: u16,
        /// The node's clock (Unix ms) when it generated the refused IDs.
        node_ms: u64,
        /// The last millisecond (Unix ms) of any ID seen for the shard.
        seen_ms: u64,
    },
    /// The failover guard refused IDs from an icicle node because no replica acknowledged the
    /// node's shared mark in time: a failover now could promote a replica that lacks it and
    /// repeat the IDs. A primary found through Sentinel with no replica connected is refused
    /// the same way (`replicas` 0).
    #[cfg(feature = "redis")]
    #[error(
        "icicle node {node} has {replicas} replica(s) connected and none acknowledged the failover guard's mark within {waited_ms} ms; its ids were refused, since a failover could repeat them"
    )]
    NotReplicated {
        /// The node, without its password.
        node: String,
        /// The replicas the node reported.
        replicas: u64,
        /// How long the client waited for an acknowledgement.
        waited_ms: u64,
    },
    /// No icicle node generated IDs within the allowed attempts.
    #[cfg(feature = "redis")]
    #[error("no icicle node generated ids in {} attempts: {}", .failures.len(), join(.failures))]
    AttemptsExhausted {
        /// Each attempt's failure, in order.
        failures: Vec<Error>,
    },
}

impl Error {
    /// Builds [`Error::Io`].
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), os: Arc::new(source) }
    }
}

/// The message of [`Error::InvalidShard`].
#[cfg(feature = "redis")]
fn describe_shard(node: &str, shard: i64) -> String {
    if shard == -1 {
        format!(
            "icicle node {node} has no logical shard id (`icicle-generator-logical-shard-id` is missing or not a number); set one in 1..=1023 on each node"
        )
    } else {
        format!("logical shard id {shard} of icicle node {node} is not in 1..=1023")
    }
}

/// The failures of [`Error::AttemptsExhausted`], numbered.
#[cfg(feature = "redis")]
fn join(failures: &[Error]) -> String {
    let parts: Vec<String> =
        failures.iter().enumerate().map(|(i, e)| format!("[{}] {e}", i + 1)).collect();
    parts.join("; ")
}
