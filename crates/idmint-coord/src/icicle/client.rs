//! [`IcicleClient`]: generates icicle IDs on a round-robin of Redis nodes, with icicle's retry
//! rules and the failover guard; and [`IcicleClient::set_shard`], the operator's setup step.

use std::{
    fmt,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use idmint_core::Icicle;
use redis::{AsyncConnectionConfig, RedisError, RedisResult, Value, aio::MultiplexedConnection};

use super::{
    LOCK_ERROR, LOCK_KEY, MARK_KEY, MARK_SCRIPT, MAX_BATCH, MAX_SHARD, SCRIPT, SCRIPT_SHA1,
    SEQUENCE_KEY, SHARD_KEY, display_node,
    guard::{Guard, Lineage, Verdict},
    reply::{self, ScriptReply},
    rollover::{self, MAX_PER_CALL},
    unavailable,
};
use crate::Error;

/// Sets the lock key for `ARGV[1]` ms unless it already lives at least that long (or forever),
/// so a fence never shortens another lock.
const FENCE_SCRIPT: &str = "local ttl = redis.call('PTTL', KEYS[1]) \
     if ttl == -1 or ttl >= tonumber(ARGV[1]) then return ttl end \
     redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1]) return tonumber(ARGV[1])";

/// Why a call that rolled the sequence over hands out nothing (see `rollover.rs`).
const ROLLOVER: &str = "the sequence rolled over in this call; its range is not handed out (its millisecond can recur)";

/// The value the guard stores in the lock key (icicle's own lock stores `lock`).
const FENCE_VALUE: &str = "idmint-failover-guard";

/// How an [`IcicleClient`] talks to its nodes.
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_coord::IcicleOptions;
///
/// let options = IcicleOptions { max_attempts: 3, ..IcicleOptions::default() };
/// assert_eq!(options.response_timeout, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcicleOptions {
    /// How many attempts one call makes, each on the next node, before it gives up. Default 5,
    /// as icicle's Java client. At least 1.
    pub max_attempts: u32,
    /// How long connecting to a node may take. Default 1 s.
    pub connect_timeout: Duration,
    /// How long a node may take to answer. Default 1 s. After a timeout the connection is
    /// dropped; the sequence range the node may have reserved is lost, never reused.
    pub response_timeout: Duration,
    /// How long a call waits (`WAIT 1`) for a replica to acknowledge the node's shared mark
    /// before its IDs are handed out, when the node has replicas. Default 250 ms; keep it
    /// below `response_timeout`. A call whose mark no replica acknowledged in time is refused
    /// ([`Error::NotReplicated`]) and the next attempt follows.
    pub replica_wait: Duration,
}

impl Default for IcicleOptions {
    fn default() -> Self {
        IcicleOptions {
            max_attempts: 5,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            replica_wait: Duration::from_millis(250),
        }
    }
}

/// Generates [`Icicle`] IDs on Redis nodes running intenthq's icicle v2 script, as icicle's
/// Java client does, plus a failover guard. **Best-effort**: see below.
///
/// Each node holds three keys: `icicle-generator-logical-shard-id` (set once by an operator,
/// see [`set_shard`](Self::set_shard)), `icicle-generator-sequence` (a rolling counter) and
/// `icicle-generator-lock` (set for 1 ms when the sequence rolls over). The script
/// ([`SCRIPT`](Self::SCRIPT), byte for byte icicle's) reserves a range of the sequence and
/// returns it with the shard and the node's `TIME`. Java icicle clients and this one share the
/// script's SHA1 and the keys, so they can use the same nodes side by side.
///
/// Each call takes the next node of a round-robin shared by all calls (and clones), starting
/// with the first node, and makes up to [`max_attempts`](IcicleOptions::max_attempts)
/// attempts:
///
/// * `EVALSHA` with `[4095, 1, 1023, n]` as KEYS; on `NOSCRIPT` only, `SCRIPT LOAD` and
///   `EVALSHA` once more (icicle's Jedis adapter reloads on every error reply);
/// * the lock reply ("Icicle: Cannot generate ID, waiting for lock to expire.") and other
///   error replies move to the next node after sleeping `attempt²` ms (0, 1, 4, 9, …; the
///   sleep after the last attempt is skipped);
/// * connection errors, timeouts and a missing or invalid logical shard move to the next node
///   at once;
/// * IDs are built from the reply: time `secs·1000 + micros/1000` of the node's `TIME`, the
///   node's shard (1..=1023), one ID per sequence value of the reserved range, after checking
///   that the range lies in 0..=4095;
/// * unlike icicle, a call asks for at most 4,094 IDs, and the range of a call that rolled the
///   sequence over is not handed out: the next call follows at once, without using up an
///   attempt (up to four such calls per batch; each is listed as [`Error::NodeLocked`] if the
///   batch fails):
///   its millisecond, read after the 1 ms lock was timed, can come again in the next call on a
///   node descheduled inside the script (the rollover rule, below);
/// * when every attempt failed, the error lists each attempt's failure (icicle returns an
///   empty `Optional`).
///
/// The client connects lazily and reconnects after a failure.
///
/// # Best-effort, unlike the etcd and file modes
///
/// icicle trusts each node's clock and its in-memory sequence. A node whose clock steps back,
/// or whose data is lost (a restart without persistence, a failover to a replica that missed
/// the last writes, a split brain in which two nodes carry one shard ID), can issue an ID that
/// was issued before (RELIABILITY.md, T19). The etcd and file coordinators store a
/// durable high-water mark before any ID is issued; icicle mode has none. Use it to share
/// nodes with existing icicle clients, not where a repeated ID is unacceptable.
///
/// # The failover guard
///
/// The client narrows the hazard for the IDs idmint hands out. In the same pipeline as every
/// script call, right after it, it raises the node's **shared mark** (`idmint-icicle-mark-ms`,
/// a key beside icicle's, which icicle's script never reads) to the node's `TIME` and reads
/// the mark as it stood before, then the node's `run_id` (new on every start of a Redis
/// process) and `master_replid` (new when a replica is promoted or a node starts without
/// data). When the node has online replicas, the call's IDs are handed out only once one of
/// them acknowledged the mark (`WAIT 1`, [`replica_wait`](IcicleOptions::replica_wait)), so a
/// failover cannot promote a replica without it; otherwise the call is refused
/// ([`Error::NotReplicated`]). A primary found through Sentinel with no online replica is
/// refused too. For each logical shard the client remembers the (run ID, replication ID)
/// pair that served it last and the last millisecond of any ID it accepted. When a shard is
/// served by another pair than before (the same node restarted, or another node took over),
/// or by a node the client meets for the first time, the client:
///
/// 1. refuses every ID of that shard whose millisecond is not after the last one it saw and
///    after the node's shared mark ([`Error::FailoverFenced`]), so it never returns an ID at or
///    below one any idmint client handed out for that shard before the change; and
/// 2. sets the node's lock key until the node's own `TIME` passes that millisecond, so other
///    clients of the node (Java icicle clients included: they obey the lock) do not issue IDs
///    there either. A lock is only ever extended, never shortened.
///
/// # The rollover rule
///
/// icicle's lock after a rollover lasts 1 ms from the start of the rolling call, but the IDs'
/// millisecond is the node's `TIME` at the end of it. A node descheduled for 2 ms inside that
/// call reports a millisecond in which the next call, its lock expired, starts the sequence
/// again at 0: icicle's Java client issues those IDs twice (idmint's chaos harness saw 4,096
/// duplicates on a loaded machine). Only the rolling call's own range can meet the next
/// cycle's, so this client discards it: one or two IDs per 4,096 when calls ask for the most
/// (4,094).
///
/// What it cannot cover:
///
/// * IDs no idmint client recorded: a Java icicle client's IDs on the same node, and IDs of a
///   node that lost its data without a replica to fail over to (a restart without
///   persistence loses the mark too; then only each client's own memory protects).
/// * A node given by URL that reports no online replica is taken as standalone and serves
///   without waiting: a failover that some other mechanism (a virtual IP, a proxy) makes to a
///   replica that was offline then can repeat IDs. Use Sentinel, where the client knows.
/// * A node whose clock steps back without a restart or failover: nothing the guard watches
///   changes.
/// * A Redis without `INFO` (renamed or forbidden by ACL): every attempt fails, since the
///   guard cannot work.
///
/// A node whose clock is far behind stays locked until its clock catches up.
///
/// # Redis Sentinel
///
/// [`with_sentinel`](Self::with_sentinel) makes a client of one logical node: the primary
/// that the sentinels name for a master, asked for again at every reconnection (after a
/// connection error, a timeout or a `READONLY` reply from a demoted primary). A promotion
/// changes the replication ID, so the guard above applies to the promoted replica, and the
/// mark it carries protects the milliseconds every idmint server handed out (chaos scenario
/// `redis-sentinel`, T19). Since a Sentinel primary serves only while a replica acknowledges
/// the mark, run two replicas so that icicle mode survives a failover and the loss of a
/// replica.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{IcicleClient, IcicleOptions};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let nodes = ["redis://10.0.0.1:6379/".to_owned(), "redis://10.0.0.2:6379/".to_owned()];
/// let client = IcicleClient::new(&nodes, IcicleOptions::default())?;
/// let id = client.generate().await?;
/// let batch = client.generate_batch(100).await?; // 1 to 100 IDs
/// assert!(!batch.is_empty() && batch.len() <= 100);
/// println!("{id} {}", id.into_parts().shard);
/// # Ok::<(), idmint_coord::Error>(())
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct IcicleClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    nodes: Vec<Node>,
    next: AtomicUsize,
    options: IcicleOptions,
    guard: Mutex<Guard>,
    /// Set only by the no-redis-guard negative control: the guard accepts everything.
    #[cfg(idmint_negative_controls)]
    unguarded: AtomicBool,
    /// Set only by the no-shared-redis-guard negative control: the guard ignores the shared
    /// mark and waits for no replica (each client's own memory only).
    #[cfg(idmint_negative_controls)]
    unshared: AtomicBool,
}

/// One Redis node and its connection, opened on first use.
struct Node {
    /// The URL without its password (or the Sentinel master's name), for messages.
    name: String,
    target: Target,
    connection: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Whether the node reported replicas on its last call: the next pipeline then ends with
    /// `WAIT`, saving a round trip. A wrong guess costs a separate `WAIT` (no replicas
    /// expected but some reported) or a `WAIT` that times out once (replicas expected, none
    /// left).
    replicas_expected: AtomicBool,
}

/// Where a node's connection goes.
enum Target {
    /// One fixed address.
    Fixed(redis::Client),
    /// The current primary of a master monitored by Redis Sentinel, asked for on every new
    /// connection (SENTINEL MASTERS on each sentinel in turn; the primary's ROLE is checked).
    Sentinel {
        /// The master's name in the sentinels' configuration.
        master: String,
        /// The sentinels' client; it keeps a connection to each sentinel.
        sentinel: tokio::sync::Mutex<redis::sentinel::Sentinel>,
    },
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Why one attempt produced no IDs, whether icicle sleeps before the next, and whether it
/// counts as an attempt at all.
struct Failure {
    error: Error,
    sleep: bool,
    /// A call that rolled the sequence over and was discarded (the rollover rule): the node
    /// answered, so it does not use up one of icicle's attempts, up to [`FREE_ROLLOVERS`].
    rolled_over: bool,
}

impl Failure {
    /// A failure after which the next attempt follows at once (icicle's `RuntimeException`).
    fn at_once(error: Error) -> Self {
        Failure { error, sleep: false, rolled_over: false }
    }

    /// A failure after which icicle sleeps `attempt²` ms (icicle's "no result").
    fn backing_off(error: Error) -> Self {
        Failure { error, sleep: true, rolled_over: false }
    }

    /// A call that rolled the sequence over, discarded; the next attempt follows at once.
    fn rolled_over(node: &str) -> Self {
        let error = Error::NodeLocked { node: node.to_owned(), reason: ROLLOVER.to_owned() };
        Failure { error, sleep: false, rolled_over: true }
    }
}

/// How many discarded rolling calls one batch may make beyond its attempts: each is followed by
/// a call that starts a new cycle, unless other callers use the sequence up in between.
const FREE_ROLLOVERS: u32 = 4;

/// The replies of one generation pipeline.
struct Replies {
    script: RedisResult<Value>,
    /// The shared mark before this call ([`MARK_SCRIPT`]).
    mark: RedisResult<Value>,
    server: RedisResult<Value>,
    replication: RedisResult<Value>,
    /// `WAIT 1`'s count of replicas that acknowledged, when the pipeline asked for it.
    waited: Option<RedisResult<Value>>,
}

impl IcicleClient {
    /// The icicle v2.0.1 Lua script, byte for byte (MIT licence, © Intent HQ; see the source).
    pub const SCRIPT: &'static str = SCRIPT;
    /// The SHA1 of [`SCRIPT`](Self::SCRIPT): `594c06c1a007e4c734680d6e4711e67334507564`.
    pub const SCRIPT_SHA1: &'static str = SCRIPT_SHA1;
    /// The key holding a node's logical shard ID.
    pub const SHARD_KEY: &'static str = SHARD_KEY;
    /// The key holding a node's rolling sequence.
    pub const SEQUENCE_KEY: &'static str = SEQUENCE_KEY;
    /// The key whose presence makes the script refuse to generate.
    pub const LOCK_KEY: &'static str = LOCK_KEY;
    /// The script's error reply while the lock key is set.
    pub const LOCK_ERROR: &'static str = LOCK_ERROR;
    /// The largest batch, 4096.
    pub const MAX_BATCH: usize = MAX_BATCH;

    /// A client of `servers` (`redis://[:password@]host:port[/db]` URLs), used round-robin
    /// from the first. Nothing is connected yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for no servers, an invalid URL or `max_attempts == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{IcicleClient, IcicleOptions};
    ///
    /// let client = IcicleClient::new(&["redis://127.0.0.1:6379/".into()], IcicleOptions::default());
    /// assert!(client.is_ok());
    /// assert!(IcicleClient::new(&[], IcicleOptions::default()).is_err());
    /// ```
    pub fn new(servers: &[String], options: IcicleOptions) -> Result<IcicleClient, Error> {
        if servers.is_empty() {
            return Err(Error::InvalidRequest("an icicle client needs at least one node".into()));
        }
        if options.max_attempts == 0 {
            return Err(Error::InvalidRequest("an icicle client needs max_attempts ≥ 1".into()));
        }
        let nodes = servers.iter().map(|url| Node::new(url)).collect::<Result<_, Error>>()?;
        Ok(Self::with_nodes(nodes, options))
    }

    /// A client of the one primary that Redis Sentinel reports for `master`, asking
    /// `sentinels` (`redis://host:port` URLs of Sentinel processes) again whenever it
    /// reconnects: after a failover it follows the promoted replica. Nothing is connected
    /// yet. The failover guard applies as with fixed nodes: a promotion changes the
    /// replication ID, so the guard refuses the new primary's IDs until its clock passes the
    /// last millisecond this client saw.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an empty master name, no sentinels, an invalid URL or
    /// `max_attempts == 0`.
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{IcicleClient, IcicleOptions};
    ///
    /// let sentinels = ["redis://10.0.0.1:26379".to_owned(), "redis://10.0.0.2:26379".to_owned()];
    /// let client = IcicleClient::with_sentinel("mymaster", &sentinels, IcicleOptions::default())?;
    /// assert_eq!(client.nodes(), ["sentinel master mymaster"]);
    /// assert!(IcicleClient::with_sentinel("", &sentinels, IcicleOptions::default()).is_err());
    /// assert!(IcicleClient::with_sentinel("mymaster", &[], IcicleOptions::default()).is_err());
    /// # Ok::<(), idmint_coord::Error>(())
    /// ```
    pub fn with_sentinel(
        master: &str,
        sentinels: &[String],
        options: IcicleOptions,
    ) -> Result<IcicleClient, Error> {
        let master = master.trim();
        if master.is_empty() || master.chars().any(char::is_whitespace) {
            return Err(Error::InvalidRequest(format!(
                "a Sentinel master name is one word, not `{master}`"
            )));
        }
        if sentinels.is_empty() {
            return Err(Error::InvalidRequest(format!(
                "Sentinel master `{master}` needs at least one sentinel URL"
            )));
        }
        if options.max_attempts == 0 {
            return Err(Error::InvalidRequest("an icicle client needs max_attempts ≥ 1".into()));
        }
        for url in sentinels {
            open(url)?;
        }
        let sentinel = redis::sentinel::Sentinel::build(sentinels.to_vec()).map_err(|e| {
            let shown: Vec<String> = sentinels.iter().map(|u| display_node(u)).collect();
            Error::InvalidRequest(format!("invalid sentinels {}: {e}", shown.join(",")))
        })?;
        let node = Node {
            name: format!("sentinel master {master}"),
            target: Target::Sentinel {
                master: master.to_owned(),
                sentinel: tokio::sync::Mutex::new(sentinel),
            },
            connection: tokio::sync::Mutex::new(None),
            replicas_expected: AtomicBool::new(false),
        };
        Ok(Self::with_nodes(vec![node], options))
    }

    fn with_nodes(nodes: Vec<Node>, options: IcicleOptions) -> IcicleClient {
        let inner = Inner {
            nodes,
            next: AtomicUsize::new(0),
            options,
            guard: Mutex::new(Guard::default()),
            #[cfg(idmint_negative_controls)]
            unguarded: AtomicBool::new(false),
            #[cfg(idmint_negative_controls)]
            unshared: AtomicBool::new(false),
        };
        IcicleClient { inner: Arc::new(inner) }
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control whose
    /// failover guard accepts every batch and never fences a node, so that tests can show they
    /// catch the duplicates a failover causes without it. Applies to every clone.
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_guard(self) -> Self {
        self.inner.unguarded.store(true, Ordering::Relaxed);
        self
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control whose
    /// failover guard ignores the node's shared mark and waits for no replica, so that each
    /// client protects only the milliseconds it saw itself. Tests show they catch the
    /// duplicates two servers then hand out across a failover. Applies to every clone.
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_shared_guard(self) -> Self {
        self.inner.unshared.store(true, Ordering::Relaxed);
        self
    }

    /// Whether the guard is off (the negative control only).
    fn unguarded(&self) -> bool {
        #[cfg(idmint_negative_controls)]
        {
            self.inner.unguarded.load(Ordering::Relaxed)
        }
        #[cfg(not(idmint_negative_controls))]
        {
            false
        }
    }

    /// Whether the shared mark is ignored (the negative control only).
    fn unshared(&self) -> bool {
        #[cfg(idmint_negative_controls)]
        {
            self.inner.unshared.load(Ordering::Relaxed)
        }
        #[cfg(not(idmint_negative_controls))]
        {
            false
        }
    }

    /// The nodes, in round-robin order, as shown in messages (without passwords).
    ///
    /// # Example
    ///
    /// ```
    /// use idmint_coord::{IcicleClient, IcicleOptions};
    ///
    /// let nodes = ["redis://:secret@10.0.0.1:6379/".to_owned()];
    /// let client = IcicleClient::new(&nodes, IcicleOptions::default())?;
    /// assert_eq!(client.nodes(), ["redis://10.0.0.1:6379/"]);
    /// # Ok::<(), idmint_coord::Error>(())
    /// ```
    pub fn nodes(&self) -> Vec<String> {
        self.inner.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// One ID: a batch of one.
    ///
    /// # Errors
    ///
    /// As [`generate_batch`](Self::generate_batch).
    pub async fn generate(&self) -> Result<Icicle, Error> {
        let ids = self.generate_batch(1).await?;
        ids.into_iter().next().ok_or_else(empty_batch)
    }

    /// `count` IDs (1..=4096) of one node, in increasing order, but at most 4,094. A call that
    /// would cross the end of the sequence rolls it over, and icicle truncates its range at
    /// 4095; this client discards that range and asks again (the rollover rule above), so
    /// the batch is never short: for example, a node at sequence 4000 asked for 4,096 rolls
    /// over (4001..=4095, discarded) and the next call serves 0..=4093.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a `count` outside 1..=4096 (before any attempt), and
    /// [`Error::AttemptsExhausted`] when every attempt failed, listing why: among others
    /// [`Error::NodeLocked`], [`Error::InvalidShard`], [`Error::FailoverFenced`],
    /// [`Error::Unavailable`] (connection errors and unexpected error replies) and
    /// [`Error::Corrupt`] (replies that make no valid IDs).
    pub async fn generate_batch(&self, count: usize) -> Result<Vec<Icicle>, Error> {
        if !(1..=MAX_BATCH).contains(&count) {
            return Err(Error::InvalidRequest(format!(
                "an icicle batch asks for 1 to {MAX_BATCH} ids, not {count}"
            )));
        }
        let inner = &*self.inner;
        let mut failures = Vec::new();
        let mut rollovers = 0;
        let mut attempt = 0;
        while attempt < inner.options.max_attempts {
            let node = inner.next.fetch_add(1, Ordering::Relaxed) % inner.nodes.len();
            match self.attempt(&inner.nodes[node], count).await {
                Ok(ids) => return Ok(ids),
                Err(failure) if failure.rolled_over && rollovers < FREE_ROLLOVERS => {
                    rollovers += 1;
                    failures.push(failure.error);
                }
                Err(failure) => {
                    failures.push(failure.error);
                    let last = attempt + 1 == inner.options.max_attempts;
                    if failure.sleep && !last {
                        let pause = u64::from(attempt) * u64::from(attempt);
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                    }
                    attempt += 1;
                }
            }
        }
        Err(Error::AttemptsExhausted { failures })
    }

    /// One attempt on one node.
    async fn attempt(&self, node: &Node, count: usize) -> Result<Vec<Icicle>, Failure> {
        let name = &node.name;
        let options = &self.inner.options;
        let mut connection = node.connect(options).await.map_err(Failure::at_once)?;
        let count = count.min(MAX_PER_CALL);
        let wait = !self.unshared();
        let mut replies = node.generate(&mut connection, count, options, wait).await?;
        if matches!(&replies.script, Err(e) if is_noscript(e)) {
            node.load_script(&mut connection).await?;
            // The mark as it stood before the first pipeline: that one raised it, with no
            // IDs to show for it.
            let before = replies.mark;
            replies = node.generate(&mut connection, count, options, wait).await?;
            replies.mark = before;
        }
        let value = match replies.script {
            Ok(value) => value,
            Err(e) if is_lock_error(&e) => {
                let reason = LOCK_ERROR.to_owned();
                return Err(Failure::backing_off(Error::NodeLocked { node: name.clone(), reason }));
            }
            Err(e) => {
                if is_read_only(&e) {
                    // A primary demoted by a failover: reconnect (through Sentinel, to the
                    // new primary) on the next attempt.
                    node.disconnect().await;
                }
                return Err(Failure::backing_off(unavailable(name, e)));
            }
        };
        let corrupt = |reason: String| Error::Corrupt { path: name.clone(), reason };
        let reply = ScriptReply::parse(&value).map_err(|r| Failure::at_once(corrupt(r)))?;
        let Some(shard) = reply.valid_shard() else {
            let error = Error::InvalidShard { node: name.clone(), shard: reply.shard };
            return Err(Failure::at_once(error));
        };
        let time_ms = reply.time_ms().map_err(|r| Failure::at_once(corrupt(r)))?;
        let ids = reply.ids(shard, time_ms).map_err(|r| Failure::at_once(corrupt(r)))?;
        let shared_ms = match replies.mark {
            Ok(Value::Int(ms)) => u64::try_from(ms).unwrap_or(0),
            Ok(other) => {
                return Err(Failure::at_once(corrupt(format!(
                    "the failover guard's mark script answered {other:?}"
                ))));
            }
            Err(e) => {
                let reason = format!("the failover guard's mark: {e}");
                return Err(Failure::backing_off(unavailable(name, reason)));
            }
        };
        let replicas = reply::replicas(replies.replication.as_ref().unwrap_or(&Value::Nil));
        node.replicas_expected.store(replicas > 0, Ordering::Relaxed);
        let lineage = lineage(name, replies.server, replies.replication)?;
        if self.unguarded() {
            return Ok(ids);
        }
        let shared_ms = if self.unshared() { 0 } else { shared_ms };
        let verdict = self
            .inner
            .guard
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .check(shard, &lineage, time_ms, shared_ms);
        match verdict {
            // The rolling call's millisecond may come again in the next call (`rollover`).
            Verdict::Accept if rollover::rolled_over(reply.end) => Err(Failure::rolled_over(name)),
            Verdict::Accept if self.unshared() => Ok(ids),
            Verdict::Accept => {
                node.replicated(&mut connection, replicas, replies.waited, options).await?;
                Ok(ids)
            }
            Verdict::Refuse { floor_ms } => {
                // Lock the node until its clock is past the floor: the lock key lives while
                // the node's time is ≤ set time + TTL, and set time ≥ `time_ms`.
                let ttl = floor_ms + 1 - time_ms;
                node.fence(&mut connection, ttl).await;
                let error = Error::FailoverFenced {
                    node: name.clone(),
                    shard,
                    node_ms: time_ms,
                    seen_ms: floor_ms,
                };
                Err(Failure::backing_off(error))
            }
        }
    }

    /// Sets the logical shard ID of `node` (`icicle-generator-logical-shard-id`) to `shard`,
    /// after checking that no other node of `all_nodes` has it, and returns the node's previous
    /// value (`None` if it had none). This is the contract of the CLI's
    /// `idmint icicle set-shard redis://… 7 [--nodes redis://a,redis://b]`.
    ///
    /// Nodes are compared by their Redis `run_id`, so `all_nodes` may include `node` itself
    /// (under any spelling of its address). Run it for each node after it starts empty (a
    /// Redis without persistence loses the key on restart, and generation fails with
    /// [`Error::InvalidShard`] until it is set again). It is not atomic across nodes: run it
    /// from one place at a time. Changing the shard of a node that served IDs is allowed; its
    /// old shard ID must not be given to another node while IDs of the old times may still be
    /// in use.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a shard outside 1..=1023 or an invalid URL,
    /// [`Error::ShardInUse`] when another listed node has `shard`, [`Error::Unavailable`]
    /// when `node` or any listed node cannot be read (nothing is set then).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::IcicleClient;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let all = ["redis://10.0.0.1:6379/".to_owned(), "redis://10.0.0.2:6379/".to_owned()];
    /// IcicleClient::set_shard(&all[0], 1, &all).await?;
    /// IcicleClient::set_shard(&all[1], 2, &all).await?;
    /// # Ok::<(), idmint_coord::Error>(())
    /// # });
    /// ```
    pub async fn set_shard(
        node: &str,
        shard: u16,
        all_nodes: &[String],
    ) -> Result<Option<i64>, Error> {
        if !(1..=MAX_SHARD).contains(&i64::from(shard)) {
            return Err(Error::InvalidRequest(format!(
                "logical shard id {shard} for icicle node {} is not in 1..={MAX_SHARD}",
                display_node(node)
            )));
        }
        let options = IcicleOptions::default();
        let target = Node::new(node)?;
        let mut connection = target.connect(&options).await?;
        let target_run_id = run_id(&target, &mut connection).await?;
        for other in all_nodes {
            let other = Node::new(other)?;
            let mut other_connection = other.connect(&options).await?;
            if run_id(&other, &mut other_connection).await? == target_run_id {
                continue;
            }
            if read_shard(&other, &mut other_connection).await? == Some(i64::from(shard)) {
                return Err(Error::ShardInUse {
                    shard,
                    node: target.name.clone(),
                    other: other.name.clone(),
                });
            }
        }
        let previous = read_shard(&target, &mut connection).await?;
        redis::cmd("SET")
            .arg(SHARD_KEY)
            .arg(shard)
            .query_async::<()>(&mut connection)
            .await
            .map_err(|e| unavailable(&target.name, e))?;
        Ok(previous)
    }
}

impl Node {
    /// A node that is not connected yet.
    fn new(url: &str) -> Result<Node, Error> {
        Ok(Node {
            name: display_node(url),
            target: Target::Fixed(open(url)?),
            connection: tokio::sync::Mutex::new(None),
            replicas_expected: AtomicBool::new(false),
        })
    }

    /// The client of the node's address: fixed, or the primary Sentinel reports now.
    async fn client(&self, options: &IcicleOptions) -> Result<redis::Client, Error> {
        match &self.target {
            Target::Fixed(client) => Ok(client.clone()),
            Target::Sentinel { master, sentinel } => {
                let limit = options.connect_timeout + options.response_timeout;
                let mut sentinel = sentinel.lock().await;
                match tokio::time::timeout(limit, sentinel.async_master_for(master, None)).await {
                    Ok(Ok(client)) => Ok(client),
                    Ok(Err(e)) => Err(unavailable(&self.name, format!("no primary: {e}"))),
                    Err(_) => Err(unavailable(
                        &self.name,
                        format!("no sentinel named a primary within {} ms", limit.as_millis()),
                    )),
                }
            }
        }
    }

    /// The node's connection, opened if there is none.
    async fn connect(&self, options: &IcicleOptions) -> Result<MultiplexedConnection, Error> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout));
        let client = self.client(options).await?;
        let connection = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| unavailable(&self.name, e))?;
        *slot = Some(connection.clone());
        Ok(connection)
    }

    /// Drops the connection after a connection-level failure; the next use reconnects.
    async fn disconnect(&self) {
        *self.connection.lock().await = None;
    }

    /// The generation pipeline: the script, then the shared mark ([`MARK_SCRIPT`]), then
    /// `INFO server` and `INFO replication`, read after the script so that a lineage change
    /// before or during it is seen; and, when the node had replicas on its last call and
    /// `wait` is set, `WAIT 1` for the mark.
    async fn generate(
        &self,
        connection: &mut MultiplexedConnection,
        count: usize,
        options: &IcicleOptions,
        wait: bool,
    ) -> Result<Replies, Failure> {
        let wait = wait && self.replicas_expected.load(Ordering::Relaxed);
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .cmd("EVALSHA")
            .arg(SCRIPT_SHA1)
            .arg(4)
            .arg(Icicle::MAX_SEQUENCE)
            .arg(1)
            .arg(MAX_SHARD)
            .arg(count)
            .cmd("EVAL")
            .arg(MARK_SCRIPT)
            .arg(1)
            .arg(MARK_KEY)
            .cmd("INFO")
            .arg("server")
            .cmd("INFO")
            .arg("replication");
        if wait {
            pipe.cmd("WAIT").arg(1).arg(wait_ms(options));
        }
        let replies: Vec<RedisResult<Value>> = match pipe.query_async(connection).await {
            Ok(replies) => replies,
            Err(e) => {
                self.disconnect().await;
                return Err(Failure::at_once(unavailable(&self.name, e)));
            }
        };
        let mut replies = replies.into_iter();
        match (replies.next(), replies.next(), replies.next(), replies.next()) {
            (Some(script), Some(mark), Some(server), Some(replication)) => {
                let waited = replies.next();
                if wait && waited.is_none() {
                    return Err(Failure::at_once(unavailable(&self.name, "short pipeline reply")));
                }
                Ok(Replies { script, mark, server, replication, waited })
            }
            _ => Err(Failure::at_once(unavailable(&self.name, "short pipeline reply"))),
        }
    }

    /// Whether the shared mark written by this call's pipeline has reached a replica, so that
    /// the call's IDs may be handed out: `WAIT 1` (from the pipeline, or sent now when the
    /// node reported replicas the pipeline did not expect) must count one. A node with no
    /// replica passes when given by URL (a standalone node: nothing can be promoted over it)
    /// and is refused when found through Sentinel (its replicas are gone, and a failover to
    /// one that missed the mark could repeat the IDs).
    async fn replicated(
        &self,
        connection: &mut MultiplexedConnection,
        replicas: u64,
        waited: Option<RedisResult<Value>>,
        options: &IcicleOptions,
    ) -> Result<(), Failure> {
        let waited_ms = wait_ms(options);
        let refused = |replicas| {
            Failure::backing_off(Error::NotReplicated {
                node: self.name.clone(),
                replicas,
                waited_ms,
            })
        };
        if replicas == 0 {
            return match self.target {
                Target::Fixed(_) => Ok(()),
                Target::Sentinel { .. } => Err(refused(0)),
            };
        }
        let waited = match waited {
            Some(waited) => waited,
            None => redis::cmd("WAIT").arg(1).arg(waited_ms).query_async::<Value>(connection).await,
        };
        match waited {
            Ok(Value::Int(acknowledged)) if acknowledged >= 1 => Ok(()),
            Ok(_) => Err(refused(replicas)),
            Err(e) => {
                if is_connection_error(&e) {
                    self.disconnect().await;
                }
                let reason = format!("the failover guard's WAIT: {e}");
                Err(Failure::backing_off(unavailable(&self.name, reason)))
            }
        }
    }

    /// `SCRIPT LOAD`, checking that the node hashes the script as icicle does.
    async fn load_script(&self, connection: &mut MultiplexedConnection) -> Result<(), Failure> {
        let loaded =
            redis::cmd("SCRIPT").arg("LOAD").arg(SCRIPT).query_async::<String>(connection).await;
        match loaded {
            Ok(sha) if sha == SCRIPT_SHA1 => Ok(()),
            Ok(sha) => Err(Failure::backing_off(unavailable(
                &self.name,
                format!("SCRIPT LOAD returned {sha}, not icicle's {SCRIPT_SHA1}"),
            ))),
            Err(e) if is_connection_error(&e) => {
                self.disconnect().await;
                Err(Failure::at_once(unavailable(&self.name, e)))
            }
            Err(e) => Err(Failure::backing_off(unavailable(&self.name, e))),
        }
    }

    /// Sets the lock key for `ttl_ms` unless it already lives longer. Best-effort: the IDs
    /// were refused anyway; a failed fence only leaves other clients unprotected.
    async fn fence(&self, connection: &mut MultiplexedConnection, ttl_ms: u64) {
        let fenced = redis::cmd("EVAL")
            .arg(FENCE_SCRIPT)
            .arg(1)
            .arg(LOCK_KEY)
            .arg(ttl_ms)
            .arg(FENCE_VALUE)
            .query_async::<i64>(connection)
            .await;
        if let Err(e) = fenced
            && is_connection_error(&e)
        {
            self.disconnect().await;
        }
    }
}

/// `WAIT`'s timeout in ms, at least 1 (`WAIT n 0` would block forever).
fn wait_ms(options: &IcicleOptions) -> u64 {
    u64::try_from(options.replica_wait.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Opens a client for `url` (no connection yet).
fn open(url: &str) -> Result<redis::Client, Error> {
    redis::Client::open(url).map_err(|e| {
        Error::InvalidRequest(format!("invalid redis url `{}`: {e}", display_node(url)))
    })
}

/// The node's lineage from the two `INFO` replies.
fn lineage(
    name: &str,
    server: RedisResult<Value>,
    replication: RedisResult<Value>,
) -> Result<Lineage, Failure> {
    let (server, replication) = match (server, replication) {
        (Ok(server), Ok(replication)) => (server, replication),
        (Err(e), _) | (_, Err(e)) => {
            let reason = format!("the failover guard needs INFO: {e}");
            return Err(Failure::backing_off(unavailable(name, reason)));
        }
    };
    reply::lineage(&server, &replication)
        .map_err(|reason| Failure::at_once(Error::Corrupt { path: name.to_owned(), reason }))
}

/// The node's `run_id`.
async fn run_id(node: &Node, connection: &mut MultiplexedConnection) -> Result<String, Error> {
    let info: Value = redis::cmd("INFO")
        .arg("server")
        .query_async(connection)
        .await
        .map_err(|e| unavailable(&node.name, e))?;
    reply::info_text(&info)
        .and_then(|text| reply::info_field(&text, "run_id"))
        .ok_or_else(|| unavailable(&node.name, "`INFO server` has no run_id"))
}

/// The node's logical shard ID as the script reads it (`tonumber`), `None` if missing or not
/// a number.
async fn read_shard(
    node: &Node,
    connection: &mut MultiplexedConnection,
) -> Result<Option<i64>, Error> {
    let value: Option<String> = redis::cmd("GET")
        .arg(SHARD_KEY)
        .query_async(connection)
        .await
        .map_err(|e| unavailable(&node.name, e))?;
    Ok(value.and_then(|v| lua_integer(&v)))
}

/// An integer as Lua's `tonumber` reads it from a string ("7", " 7 ", "7.0", "0x7").
fn lua_integer(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Ok(n) = text.parse::<i64>() {
        return Some(n);
    }
    let float = text.parse::<f64>().ok().filter(|f| f.is_finite() && f.fract() == 0.0)?;
    // Exact for every shard ID; larger values only need to be "not this shard".
    Some(float as i64)
}

fn is_noscript(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// Whether `e` is the script's lock reply. Redis splits an error reply at its first space
/// into a code (`Icicle:`) and a detail.
fn is_lock_error(e: &RedisError) -> bool {
    let text = match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => return false,
    };
    text.trim() == LOCK_ERROR
}

/// Whether `e` is `READONLY`: the node is a replica now.
fn is_read_only(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
}

/// Whether `e` broke the connection (rather than being an error reply).
fn is_connection_error(e: &RedisError) -> bool {
    !matches!(e.kind(), redis::ErrorKind::Server(_) | redis::ErrorKind::Extension)
}

#[cold]
fn empty_batch() -> Error {
    Error::Corrupt { path: "icicle".into(), reason: "a successful batch had no ids".into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lua_reads_numbers_like_tonumber() {
        let cases = [
            ("7", Some(7)),
            (" 7 ", Some(7)),
            ("7.0", Some(7)),
            ("0x10", Some(16)),
            ("-1", Some(-1)),
            ("7.5", None),
            ("seven", None),
            ("", None),
        ];
        for (text, expected) in cases {
            assert_eq!(lua_integer(text), expected, "{text:?}");
        }
    }

    #[test]
    fn options_must_allow_an_attempt() {
        let options = IcicleOptions { max_attempts: 0, ..IcicleOptions::default() };
        let refused = IcicleClient::new(&["redis://127.0.0.1:1/".into()], options);
        assert!(matches!(refused, Err(Error::InvalidRequest(_))));
        let bad_url = IcicleClient::new(&["http://x".into()], IcicleOptions::default());
        assert!(matches!(bad_url, Err(Error::InvalidRequest(_))));
    }

    #[tokio::test]
    async fn batch_sizes_outside_1_to_4096_are_refused_before_any_attempt() {
        // Port 1 on loopback refuses connections; a refusal before any attempt never gets there.
        let client = IcicleClient::new(&["redis://127.0.0.1:1/".into()], IcicleOptions::default())
            .expect("client");
        for count in [0, 4097, usize::MAX] {
            let refused = client.generate_batch(count).await;
            assert!(matches!(refused, Err(Error::InvalidRequest(_))), "{count}: {refused:?}");
        }
        let attempted = client.generate_batch(4096).await;
        let Err(Error::AttemptsExhausted { failures }) = attempted else {
            panic!("expected every attempt to fail: {attempted:?}");
        };
        assert_eq!(failures.len(), 5);
        assert!(failures.iter().all(|f| matches!(f, Error::Unavailable { backend: "redis", .. })));
    }
}
