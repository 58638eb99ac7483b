//! The etcd backend (feature `etcd`): claims are keys attached to leases, marks are plain keys
//! written by fenced transactions (DESIGN.md, "How does fleet mode on etcd stay unique when leases lie?").
//!
//! This module owns the key layout, the claim and mark transactions and the mapping of etcd
//! errors into [`Error`]; `lease` owns lease grants, keep-alives and the local deadline, and
//! `lableorg` the claim procedure that interoperates with LableOrg's `uniqueid-etcd`, and
//! `cluster` the restore guard (the cluster ID the marks were written on), and `members` the
//! health-tracked clients, one per etcd member, that every request goes through. Nothing
//! here trusts a lease for uniqueness: every mark write compares the claim key's create
//! revision, so a holder whose lease lapsed cannot write.

mod cluster;
mod lableorg;
mod lease;
pub(crate) mod members;

pub use cluster::Adopted;

use std::{
    collections::HashMap,
    fmt,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use idmint_etcd::{
    Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::{
    Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds, Lineage, Probe,
    etcd::{
        lease::{Kept, Lease, LeaseOptions, OnEnd},
        members::{BACKEND, Members, Timing},
    },
};

/// How claims and marks are laid out in etcd.
///
/// # Example
///
/// ```
/// use idmint_coord::Scheme;
///
/// // Interoperate with LableOrg generators that use the jetcd namespace `unique-id/`.
/// let scheme = Scheme::LableOrg { namespace_prefix: "unique-id/".into() };
/// assert_ne!(scheme, Scheme::Native);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scheme {
    /// idmint's own layout, under [`EtcdOptions::prefix`], per namespace and generator ID:
    ///
    /// | key | lease | value |
    /// | --- | --- | --- |
    /// | `<prefix><namespace>/claim/<id>` | the claim's own lease | the holder description |
    /// | `<prefix><namespace>/mark/<id>` | none | JSON `{"mark_ms": …, "layout": "…"}` |
    ///
    /// `<id>` is the generator ID in decimal.
    #[default]
    Native,
    /// LableOrg's `uniqueid-etcd` claim protocol, byte for byte, so that idmint servers and
    /// LableOrg generators can share one pool of (cluster ID, generator ID) pairs. All keys are
    /// relative to `namespace_prefix` (the jetcd client's namespace, e.g. `unique-id/`);
    /// [`EtcdOptions::prefix`] is not used:
    ///
    /// | key | lease | value | read by LableOrg |
    /// | --- | --- | --- | --- |
    /// | `cluster-id` | none | comma-separated cluster IDs; written as `0` when absent | yes |
    /// | `unique-id-resource-lock/…` | the claim's lease | etcd's lock, held while scanning | yes |
    /// | `pool/<cluster>:<generator>` | the claim's lease, TTL 5 s | empty | yes |
    /// | `idmint/holder/<cluster>:<generator>` | the claim's lease | the holder description | no |
    /// | `idmint/mark/<cluster>:<generator>` | none | JSON mark, as in [`Scheme::Native`] | no |
    ///
    /// The claim's generator ID is `cluster·2048 + generator`, as `Layout::identity` of the
    /// `lable` layout expects; only pairs whose identity the request accepts are tried, in
    /// LableOrg's order (cluster IDs as listed, then generator IDs ascending).
    ///
    /// `{namespace}` in `namespace_prefix` is replaced by the claim's namespace, to give each
    /// idmint namespace its own pool; without it, every namespace claimed through this
    /// coordinator shares the one pool (as LableOrg generators on one jetcd namespace do).
    ///
    /// The mark keys are fenced as in the native scheme (by the pool key's create revision),
    /// so idmint servers never repeat an ID even where a LableOrg generator could. What we
    /// deliberately do not copy: LableOrg closes every claim 30 s after taking it and revokes
    /// its lease 2 s later (we hold a claim for as long as its lease is kept alive, and revoke
    /// on release); and when the pool is full, LableOrg watches `pool/` for up to 5 minutes,
    /// whereas [`Coordinator::claim`] fails at once with [`Error::PoolExhausted`] (the server
    /// retries with backoff).
    LableOrg {
        /// The jetcd namespace LableOrg's clients use, e.g. `unique-id/` (its tests) or
        /// `unique-id-generator/` (its README). Include the trailing `/`.
        namespace_prefix: String,
    },
}

/// Settings of an [`EtcdCoordinator`]. Build it with struct-update syntax from
/// [`EtcdOptions::default`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_coord::EtcdOptions;
///
/// let options = EtcdOptions {
///     lease_ttl_secs: 2,
///     margin: Duration::from_millis(500),
///     ..EtcdOptions::default()
/// };
/// assert_eq!(options.prefix, "idmint/");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// Where the native scheme's keys live. Default `idmint/`.
    pub prefix: String,
    /// The TTL asked for each claim's lease, in seconds. Default 10. etcd raises TTLs below
    /// its minimum (⌈1.5 × election timeout⌉, 2 s with default settings); the granted TTL is
    /// the one used. Keep-alives are sent every TTL/3. Ignored by [`Scheme::LableOrg`], whose
    /// leases have a TTL of 5 s.
    pub lease_ttl_secs: u32,
    /// Subtracted from the lease's expiry to get the claim's local deadline, published as
    /// [`ClaimState::Held`]`{ until }`:
    /// `until = send time of the last acknowledged keep-alive + TTL − margin`.
    /// Default 1 s; at most half the TTL.
    ///
    /// Why 1 s: the server starts its TTL no earlier than it receives the keep-alive, which is
    /// after we sent it, and etcd extends (never shortens) leases on leader changes, so
    /// `send + TTL` is already a lower bound of the lease's life. What is left to cover is the
    /// difference between the two machines' clock rates (parts per million) and the time
    /// between a caller checking the deadline and acting on it (scheduling, a short stall),
    /// which 1 s, etcd's default election timeout, covers generously while leaving 5.7 s of a
    /// 10 s lease for retrying keep-alives. TTL/5 would be 2 s at TTL 10 and too tight at
    /// TTL 2. Uniqueness does not depend on this value (the mark fence does); it only decides
    /// how early a holder stops extending its window.
    pub margin: Duration,
    /// How long one etcd request may take, all its attempts on the members together. Default
    /// 5 s. A request moves to another member when an attempt fails or takes longer than 1/20
    /// of this (between 50 ms and 1 s: 250 ms by default), each round over the members allowing
    /// one such step more. Keep-alives are also cut off at the claim's deadline.
    pub request_timeout: Duration,
    /// How long connecting may take. Default 5 s.
    pub connect_timeout: Duration,
    /// How long a [`Scheme::LableOrg`] claim waits for `unique-id-resource-lock`. Default 15 s:
    /// a LableOrg process that died holding the lock frees it when its 5 s lease expires.
    pub lock_timeout: Duration,
    /// How claims and marks are laid out. Default [`Scheme::Native`].
    pub scheme: Scheme,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            prefix: "idmint/".into(),
            lease_ttl_secs: 10,
            margin: Duration::from_secs(1),
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(15),
            scheme: Scheme::Native,
        }
    }
}

impl EtcdOptions {
    /// The options of a native-scheme fleet with leases of `lease_ttl_secs` under `prefix`,
    /// as `idmint serve --etcd` and the embedded minter open it: the margin is
    /// [`margin_for`](EtcdOptions::margin_for) that TTL, the rest is the default.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use idmint_coord::EtcdOptions;
    ///
    /// let options = EtcdOptions::native("orders/", 2);
    /// assert_eq!(options.prefix, "orders/");
    /// assert_eq!(options.margin, Duration::from_millis(500));
    /// ```
    pub fn native(prefix: &str, lease_ttl_secs: u32) -> EtcdOptions {
        EtcdOptions {
            prefix: prefix.to_owned(),
            lease_ttl_secs,
            margin: EtcdOptions::margin_for(lease_ttl_secs),
            ..EtcdOptions::default()
        }
    }

    /// The deadline margin of a claim whose lease lives `ttl_secs`: 1 s (etcd's default
    /// election timeout), but at most a quarter of the TTL, so that a 2 s lease still renews
    /// (every TTL/3) well inside its deadline.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use idmint_coord::EtcdOptions;
    ///
    /// assert_eq!(EtcdOptions::margin_for(10), Duration::from_secs(1));
    /// assert_eq!(EtcdOptions::margin_for(2), Duration::from_millis(500));
    /// ```
    pub fn margin_for(ttl_secs: u32) -> Duration {
        Duration::from_secs(1).min(Duration::from_secs(u64::from(ttl_secs)) / 4)
    }

    /// The lease TTL this scheme asks for.
    fn ttl_secs(&self) -> i64 {
        match self.scheme {
            Scheme::Native => i64::from(self.lease_ttl_secs),
            Scheme::LableOrg { .. } => lableorg::LEASE_TTL_SECS,
        }
    }

    fn check(&self) -> Result<(), Error> {
        let invalid = |reason: String| Err(Error::InvalidRequest(reason));
        if self.ttl_secs() < 1 {
            return invalid("the etcd lease ttl must be at least 1 s".into());
        }
        let ttl = Duration::from_secs(self.ttl_secs().unsigned_abs());
        if self.margin > ttl / 2 {
            return invalid(format!(
                "the etcd deadline margin {:?} must be at most half the lease ttl {ttl:?}",
                self.margin
            ));
        }
        if self.request_timeout.is_zero() || self.connect_timeout.is_zero() {
            return invalid("etcd timeouts must not be zero".into());
        }
        Ok(())
    }
}

/// Claims and marks in etcd, for several servers (DESIGN.md, "How does fleet mode on etcd stay unique when leases lie?").
///
/// - **Claim**: grant a lease (one per claim, so claims are lost independently), then one
///   transaction creates the claim key on it if it does not exist, and reads the mark in the
///   same linearizable step. The claim key's create revision is the claim's fencing token.
///   Pools list the claim keys and try the free IDs in ascending order; two claimants racing
///   for one ID are decided by the transaction, and the loser tries the next.
/// - **Extend**: a background task sends a keep-alive every TTL/3. Each acknowledged one moves
///   the deadline to its send time + TTL − [`margin`](EtcdOptions::margin), published as
///   [`ClaimState::Held`]`{ until }`. Failed keep-alives are retried until the deadline; past
///   it, or when etcd says the lease is gone, the claim turns [`ClaimState::Lost`].
/// - **Store a mark**: one transaction that compares the claim key's create revision with the
///   token **and** the mark's mod revision with the one last seen, then puts the mark (which
///   is attached to no lease, so it outlives every claim). A failed claim compare is
///   [`Error::ClaimLost`]; a changed mark is re-read and the write retried once.
/// - **Release**: revoke the lease, which deletes the claim key; the mark stays. Dropping the
///   coordinator revokes the leases of its claims in the background, and so does dropping a
///   claim (every clone of its watch receiver) without releasing it.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{ClaimRequest, Coordinator, EtcdCoordinator, EtcdOptions, GeneratorIds};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
/// let coordinator = EtcdCoordinator::connect(&endpoints, EtcdOptions::default()).await?;
/// let request = ClaimRequest::new("orders", GeneratorIds::Pool { count: 1024 }, "snowflake");
/// let claim = coordinator.claim(&request).await?;
/// let start = claim.mark_ms().map_or(0, |mark| mark + 1);
/// coordinator.store_mark(&claim, start + 3_000).await?;
/// coordinator.release(&claim).await?;
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
pub struct EtcdCoordinator {
    inner: Arc<Inner>,
}

/// The state shared with the keep-alive tasks (which hold it weakly).
struct Inner {
    /// Every request goes through these: one client per etcd member, with its health.
    members: Arc<Members>,
    options: EtcdOptions,
    /// Live claims by token.
    held: Mutex<HashMap<u64, Arc<Held>>>,
    /// Off only in the no-fence negative control.
    fence: AtomicBool,
    /// Off only in the no-restore-guard negative control.
    restore_guard: AtomicBool,
}

/// A claim this coordinator holds.
#[derive(Debug)]
struct Held {
    namespace: String,
    generator_id: u64,
    /// The key whose existence is the claim (attached to `lease`).
    claim_key: String,
    /// The key of the mark (attached to no lease).
    mark_key: String,
    /// The claim key's create revision: the fencing token.
    epoch: i64,
    /// The etcd cluster that granted the claim: a mark written on another one is refused.
    cluster_id: u64,
    fingerprint: String,
    /// The mark as last seen in etcd; the async mutex serialises this claim's mark writes.
    mark: tokio::sync::Mutex<MarkSeen>,
    /// The claim's lease, its keep-alive task and its published state.
    kept: Arc<Kept>,
}

/// A key as [`EtcdCoordinator::read_prefix`] read it.
///
/// # Example
///
/// ```
/// use idmint_coord::EtcdKey;
///
/// let kv = EtcdKey {
///     key: b"idmint/orders/claim/3".to_vec(),
///     value: b"host-a".to_vec(),
///     lease: 0x694d,
///     create_revision: 12,
///     mod_revision: 12,
/// };
/// assert!(kv.key.ends_with(b"/3"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdKey {
    /// The key.
    pub key: Vec<u8>,
    /// Its value.
    pub value: Vec<u8>,
    /// The lease it is attached to, 0 for none.
    pub lease: i64,
    /// The revision that created it.
    pub create_revision: i64,
    /// The revision that last changed it.
    pub mod_revision: i64,
}

/// A lease's time to live, as [`EtcdCoordinator::lease_time_to_live`] read it.
///
/// # Example
///
/// ```
/// use idmint_coord::EtcdLeaseTtl;
///
/// let gone = EtcdLeaseTtl { left_s: -1, granted_s: 0 };
/// assert!(gone.left_s < 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdLeaseTtl {
    /// Seconds left; −1 when the lease does not exist (any more).
    pub left_s: i64,
    /// The TTL the lease was granted, in seconds.
    pub granted_s: i64,
}

/// A stored mark and the mod revision it was read or written at (0: no mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MarkSeen {
    mark_ms: Option<u64>,
    mod_revision: i64,
}

/// The JSON value of a mark key (the same fields as the file backend's mark files).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkValue {
    mark_ms: u64,
    layout: String,
}

/// A key-value pair as a transaction returned it.
#[derive(Debug, Clone)]
struct Kv {
    value: Vec<u8>,
    create_revision: i64,
    mod_revision: i64,
    lease: i64,
}

/// A claim key created by `Inner::create_claim`.
#[derive(Debug)]
struct Taken {
    generator_id: u64,
    claim_key: String,
    mark_key: String,
    epoch: i64,
    mark: MarkSeen,
}

/// What the claim transaction found.
enum Created {
    /// The key is mine, created at this revision; the mark as read in the same transaction.
    Mine { epoch: i64, mark: Option<Kv> },
    /// Someone holds it.
    Taken { holder: String },
}

impl fmt::Debug for EtcdCoordinator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdCoordinator")
            .field("options", &self.inner.options)
            .field("claims", &self.inner.held().len())
            .finish_non_exhaustive()
    }
}

impl EtcdCoordinator {
    /// Connects to the etcd cluster at `endpoints` (`http://host:port` or `host:port`) and
    /// checks that it answers.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for inconsistent options or no endpoints,
    /// [`Error::Unavailable`] when etcd cannot be reached within
    /// [`connect_timeout`](EtcdOptions::connect_timeout).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{EtcdCoordinator, EtcdOptions, Scheme};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let options = EtcdOptions {
    ///     scheme: Scheme::LableOrg { namespace_prefix: "unique-id/".into() },
    ///     ..EtcdOptions::default()
    /// };
    /// let coordinator = EtcdCoordinator::connect(&["127.0.0.1:2379".to_owned()], options).await?;
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn connect(endpoints: &[String], options: EtcdOptions) -> Result<Self, Error> {
        options.check()?;
        if endpoints.is_empty() {
            return Err(Error::InvalidRequest("no etcd endpoints given".into()));
        }
        let timing = Timing::new(options.request_timeout, options.connect_timeout);
        let members = Members::connect(endpoints, timing).await?;
        Ok(Self::with_members(members, options))
    }

    fn with_members(members: Arc<Members>, options: EtcdOptions) -> Self {
        EtcdCoordinator {
            inner: Arc::new(Inner {
                members,
                options,
                held: Mutex::default(),
                fence: AtomicBool::new(true),
                restore_guard: AtomicBool::new(true),
            }),
        }
    }

    /// **Tests only** (cfg `idmint_negative_controls`): a negative control that connects as
    /// idmint did before it tracked etcd members: one `idmint_etcd::Client` balanced over all
    /// `endpoints`, no member health, no member list, no failover, one attempt per request
    /// under the whole [`request_timeout`](EtcdOptions::request_timeout). Uniqueness is not
    /// affected (the fence is); it exists so that tests can show that a paused member stalls
    /// this client past the server's window, and not the default one.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{EtcdCoordinator, EtcdOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
    /// let old = EtcdCoordinator::connect_round_robin(&endpoints, EtcdOptions::default()).await?;
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    #[cfg(idmint_negative_controls)]
    pub async fn connect_round_robin(
        endpoints: &[String],
        options: EtcdOptions,
    ) -> Result<Self, Error> {
        options.check()?;
        if endpoints.is_empty() {
            return Err(Error::InvalidRequest("no etcd endpoints given".into()));
        }
        let timing = Timing::new(options.request_timeout, options.connect_timeout);
        let members = members::Members::round_robin(endpoints, timing).await?;
        Ok(Self::with_members(members, options))
    }

    /// The options in use.
    pub fn options(&self) -> &EtcdOptions {
        &self.inner.options
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control. Claims ignore the
    /// stored mark (they report none) and mark writes skip both fence compares, so a holder
    /// whose claim was taken over keeps writing. It exists so that tests can prove they would
    /// catch the duplicates this lets through. Never enable the feature in a build that serves.
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_fence(self) -> Self {
        self.inner.fence.store(false, Ordering::Relaxed);
        self
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control. Claims
    /// and mark writes trust any etcd cluster, so marks restored from an old snapshot are
    /// taken as they are. It exists so that the chaos harness can prove it would catch what
    /// this lets through. Never enable the feature in a build that serves.
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_restore_guard(self) -> Self {
        self.inner.restore_guard.store(false, Ordering::Relaxed);
        self
    }

    /// Raises every stored mark to at least `floor_ms`, then records the etcd cluster that
    /// answers as the one the marks belong to, so that claims are no longer refused with
    /// [`Error::ClusterChanged`]. This is the operator's step after restoring etcd from a
    /// snapshot (or moving its keys to another cluster), with every server stopped; pick a
    /// floor past any ID the fleet can have issued (now plus the largest window and clock
    /// error). Marks keep their layout and never go down; running it again is harmless.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when etcd does not answer, [`Error::Corrupt`] for a mark or
    /// cluster key that idmint did not write, [`Error::InvalidRequest`] when a key changed
    /// meanwhile (a server is running) or the scheme's marks cannot be listed.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{EtcdCoordinator, EtcdOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
    /// let coordinator = EtcdCoordinator::connect(&endpoints, EtcdOptions::default()).await?;
    /// let adopted = coordinator.adopt_cluster(1_800_000_060_000).await?;
    /// println!("{} marks raised", adopted.raised);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn adopt_cluster(&self, floor_ms: u64) -> Result<Adopted, Error> {
        cluster::adopt(&self.inner, floor_ms).await
    }

    /// Reads every key under `prefix` (linearizably, through the same health-tracked members
    /// as claims and marks), for tools that show what the fleet holds (`idmint lease list`).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when no member answers within the request timeout.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{EtcdCoordinator, EtcdOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
    /// let coordinator = EtcdCoordinator::connect(&endpoints, EtcdOptions::default()).await?;
    /// for kv in coordinator.read_prefix("idmint/orders/claim/").await? {
    ///     println!("{} on lease {:x}", String::from_utf8_lossy(&kv.key), kv.lease);
    /// }
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn read_prefix(&self, prefix: &str) -> Result<Vec<EtcdKey>, Error> {
        let options = GetOptions::new().with_prefix();
        let response = self
            .inner
            .members
            .run(&format!("read the keys under {prefix}"), |mut c| {
                let options = options.clone();
                async move { c.get(prefix, Some(options)).await }
            })
            .await?;
        Ok(response
            .kvs()
            .iter()
            .map(|kv| EtcdKey {
                key: kv.key().to_vec(),
                value: kv.value().to_vec(),
                lease: kv.lease(),
                create_revision: kv.create_revision(),
                mod_revision: kv.mod_revision(),
            })
            .collect())
    }

    /// The time to live of an etcd lease, as `etcdctl lease timetolive` shows it: the seconds
    /// left (−1 when the lease no longer exists) and the TTL it was granted.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when no member answers within the request timeout.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{EtcdCoordinator, EtcdOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let endpoints = vec!["http://127.0.0.1:2379".to_owned()];
    /// let coordinator = EtcdCoordinator::connect(&endpoints, EtcdOptions::default()).await?;
    /// let ttl = coordinator.lease_time_to_live(0x694d_7b5a_0d1c_2a07).await?;
    /// println!("{} of {} s left", ttl.left_s, ttl.granted_s);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn lease_time_to_live(&self, lease: i64) -> Result<EtcdLeaseTtl, Error> {
        let response = self
            .inner
            .members
            .run(&format!("read lease {lease:x}"), |mut c| async move {
                c.lease_time_to_live(lease).await
            })
            .await?;
        Ok(EtcdLeaseTtl { left_s: response.ttl(), granted_s: response.granted_ttl() })
    }

    /// Test hook (feature `test-util`): the claim's keep-alive task stops as if its process
    /// were paused: it sends no keep-alives and publishes nothing, so the claim still reads
    /// [`ClaimState::Held`] with a stale deadline while its lease runs out. Returns whether
    /// this coordinator holds the claim.
    #[cfg(feature = "test-util")]
    pub fn pause_keep_alive(&self, claim: &Claim) -> bool {
        self.inner
            .held()
            .get(&claim.token())
            .map(|held| held.kept.paused.store(true, Ordering::SeqCst))
            .is_some()
    }
}

impl Inner {
    /// What a lease needs of the options.
    fn lease_options(&self) -> LeaseOptions {
        LeaseOptions { margin: self.options.margin, request_timeout: self.options.request_timeout }
    }

    /// What a keep-alive that ends by itself does: forget the claim, revoke its lease.
    fn on_end(self: &Arc<Self>) -> OnEnd {
        let owner = Arc::downgrade(self);
        Arc::new(move |token, lease| {
            if let Some(inner) = owner.upgrade()
                && inner.held().remove(&token).is_some()
            {
                lease::revoke_in_background(&inner.members, lease);
            }
        })
    }

    fn held(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        // Every update of the map is a single insert or remove, so a poisoned lock is fine.
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn fenced(&self) -> bool {
        self.fence.load(Ordering::Relaxed)
    }

    fn restore_guarded(&self) -> bool {
        self.restore_guard.load(Ordering::Relaxed)
    }

    /// The live claim behind `claim`, or [`Error::ClaimLost`].
    fn live(&self, claim: &Claim) -> Result<Arc<Held>, Error> {
        let held = self.held().get(&claim.token()).cloned();
        match held {
            Some(held) if *held.kept.state.borrow() != ClaimState::Lost => Ok(held),
            _ => Err(claim_lost(claim.namespace(), claim.generator_id())),
        }
    }

    /// Ends a claim here: forgets it, stops its keep-alive and publishes `Lost`. The caller
    /// revokes the lease.
    fn forget(&self, token: u64) -> Option<Arc<Held>> {
        let held = self.held().remove(&token)?;
        held.kept.end_here();
        Some(held)
    }

    /// Creates `claim_key` on `lease` unless `absent` says it exists, reading `mark_key` in the
    /// same transaction. `extra` puts go with the claim key (LableOrg's holder key).
    async fn create_claim(
        &self,
        absent: Compare,
        claim_key: &str,
        claim_value: &[u8],
        lease: &Lease,
        mark_key: &str,
        holder_key: Option<(&str, &[u8])>,
    ) -> Result<Created, Error> {
        let leased = || Some(PutOptions::new().with_lease(lease.id));
        let mut then = vec![
            TxnOp::put(claim_key, claim_value, leased()),
            TxnOp::get(claim_key, None),
            TxnOp::get(mark_key, None),
        ];
        // Both branches read the claim key and the mark: a repeat of this transaction (its
        // first attempt got no answer) finds the key it created on its own lease, and that is
        // the claim, with a mark only this claim can have written since.
        let mut otherwise = vec![TxnOp::get(claim_key, None), TxnOp::get(mark_key, None)];
        if let Some((key, value)) = holder_key {
            then.push(TxnOp::put(key, value, leased()));
            otherwise.push(TxnOp::get(key, None));
        }
        let txn = Txn::new().when([absent]).and_then(then).or_else(otherwise);
        let response = self
            .members
            .run("claim transaction", |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let found = ranges(&response);
        let key = found.first().cloned().flatten();
        let mark = found.get(1).cloned().flatten();
        if let Some(mine) = key.as_ref().filter(|kv| kv.lease == lease.id) {
            return Ok(Created::Mine { epoch: mine.create_revision, mark });
        }
        if response.succeeded() {
            return Err(unavailable(format!("claim key {claim_key} was not created")));
        }
        let described = found.get(2).cloned().flatten().map(|kv| kv.value);
        let holder = match (described, key) {
            (Some(value), _) if !value.is_empty() => String::from_utf8_lossy(&value).into_owned(),
            (_, Some(kv)) if !kv.value.is_empty() => {
                String::from_utf8_lossy(&kv.value).into_owned()
            }
            (_, Some(kv)) => format!("the holder of etcd lease {:x}", kv.lease),
            (_, None) => "another claimant".into(),
        };
        Ok(Created::Taken { holder })
    }

    /// Reads a mark as a claim found it, checking its layout.
    fn parse_mark(
        &self,
        mark_key: &str,
        kv: Option<Kv>,
        request: &ClaimRequest,
    ) -> Result<MarkSeen, Error> {
        let Some(kv) = kv else { return Ok(MarkSeen { mark_ms: None, mod_revision: 0 }) };
        let mark = decode_mark(mark_key, &kv.value)?;
        if mark.layout != request.layout_fingerprint {
            return Err(Error::LayoutChanged {
                namespace: request.namespace.clone(),
                stored: mark.layout,
                expected: request.layout_fingerprint.clone(),
            });
        }
        Ok(MarkSeen { mark_ms: Some(mark.mark_ms), mod_revision: kv.mod_revision })
    }

    /// The native scheme: try the free candidates in the order of a [`Probe`] and create the
    /// first free claim key.
    async fn take_native(&self, request: &ClaimRequest, lease: &Lease) -> Result<Taken, Error> {
        let base = format!("{}{}/", self.options.prefix, request.namespace);
        let claim_prefix = format!("{base}claim/");
        let held = async || -> Result<Vec<u64>, Error> {
            let keys = self.list_keys(&claim_prefix).await?;
            Ok(keys.iter().filter_map(|key| key.parse().ok()).collect())
        };
        let listed = match request.generator_ids {
            GeneratorIds::Fixed(_) => Vec::new(),
            GeneratorIds::Pool { .. } | GeneratorIds::Stride { .. } => held().await?,
        };
        let mut last_holder = None;
        // Claimants that start together draw apart after they meet: the lease ID differs
        // between them.
        let mut probe = Probe::new(request.generator_ids, listed, lease.id.cast_unsigned());
        while let Some(generator_id) = probe.next() {
            let claim_key = format!("{claim_prefix}{generator_id}");
            let mark_key = format!("{base}mark/{generator_id}");
            let absent = Compare::create_revision(claim_key.as_str(), CompareOp::Equal, 0);
            let holder = request.holder.as_bytes();
            match self.create_claim(absent, &claim_key, holder, lease, &mark_key, None).await? {
                Created::Mine { epoch, mark } => {
                    let mark = self.parse_mark(&mark_key, mark, request)?;
                    return Ok(Taken { generator_id, claim_key, mark_key, epoch, mark });
                }
                Created::Taken { holder } => {
                    last_holder = Some(holder);
                    if probe.relist_due() {
                        probe.add_held(held().await?);
                    }
                }
            }
        }
        Err(match (request.generator_ids, last_holder) {
            (GeneratorIds::Fixed(generator_id), Some(holder)) => {
                Error::Conflict { namespace: request.namespace.clone(), generator_id, holder }
            }
            (ids, _) => {
                Error::PoolExhausted { namespace: request.namespace.clone(), size: ids.count() }
            }
        })
    }

    /// The keys under `prefix`, without it (keys only).
    async fn list_keys(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let options = GetOptions::new().with_prefix().with_keys_only();
        let response = self
            .members
            .run("list keys", |mut c| {
                let options = options.clone();
                async move { c.get(prefix, Some(options)).await }
            })
            .await?;
        Ok(response
            .kvs()
            .iter()
            .filter_map(|kv| kv.key().strip_prefix(prefix.as_bytes()))
            .map(|rest| String::from_utf8_lossy(rest).into_owned())
            .collect())
    }

    /// Records a taken claim, whose lease is already kept alive.
    fn hold(
        &self,
        request: &ClaimRequest,
        taken: Taken,
        cluster_id: u64,
        kept: Arc<Kept>,
        state: watch::Receiver<ClaimState>,
    ) -> Claim {
        let mark =
            if self.fenced() { taken.mark } else { MarkSeen { mark_ms: None, ..taken.mark } };
        let token = kept.token;
        let held = Arc::new(Held {
            namespace: request.namespace.clone(),
            generator_id: taken.generator_id,
            claim_key: taken.claim_key,
            mark_key: taken.mark_key,
            epoch: taken.epoch,
            cluster_id,
            fingerprint: request.layout_fingerprint.clone(),
            mark: tokio::sync::Mutex::new(mark),
            kept,
        });
        self.held().insert(token, held);
        Claim::new(&request.namespace, taken.generator_id, mark.mark_ms, token, state)
    }

    /// One fenced write of the mark: `Ok(true)` when written, `Ok(false)` when the mark had
    /// changed (and `seen` now holds the current one).
    async fn write_mark(
        &self,
        held: &Held,
        seen: &mut MarkSeen,
        value: &[u8],
        mark_ms: u64,
    ) -> Result<bool, Error> {
        let compares = if self.fenced() {
            vec![
                Compare::create_revision(held.claim_key.as_str(), CompareOp::Equal, held.epoch),
                Compare::mod_revision(held.mark_key.as_str(), CompareOp::Equal, seen.mod_revision),
            ]
        } else {
            Vec::new()
        };
        let txn = Txn::new()
            .when(compares)
            .and_then([TxnOp::put(held.mark_key.as_str(), value, None)])
            .or_else([
                TxnOp::get(held.claim_key.as_str(), None),
                TxnOp::get(held.mark_key.as_str(), None),
            ]);
        // Repeated on another member when an attempt gets no answer: a repeat of one that
        // landed fails the mark's revision compare and reads back the mark it wrote.
        let response = self
            .members
            .run("mark transaction", |mut c| {
                let txn = txn.clone();
                async move { c.txn(txn).await }
            })
            .await?;
        let answered = response.header().map_or(0, |h| h.cluster_id());
        cluster::check_answer(self, held.cluster_id, answered)?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision());
            *seen = MarkSeen { mark_ms: Some(mark_ms), mod_revision: revision };
            return Ok(true);
        }
        let found = ranges(&response);
        let claim = found.first().cloned().flatten();
        if claim.is_none_or(|kv| kv.create_revision != held.epoch) {
            return Err(claim_lost(&held.namespace, held.generator_id));
        }
        // The claim is still mine, so only I can have written the mark: an earlier write whose
        // answer was lost (or the first attempt of this one). Take it as the current mark; if
        // it is the mark being written, the write is done.
        let current = found.get(1).cloned().flatten();
        let landed = current.as_ref().is_some_and(|kv| kv.value == value);
        *seen = match current {
            None => MarkSeen { mark_ms: None, mod_revision: 0 },
            Some(kv) => {
                let mark = decode_mark(&held.mark_key, &kv.value)?;
                if mark.layout != held.fingerprint {
                    return Err(Error::LayoutChanged {
                        namespace: held.namespace.clone(),
                        stored: mark.layout,
                        expected: held.fingerprint.clone(),
                    });
                }
                MarkSeen { mark_ms: Some(mark.mark_ms), mod_revision: kv.mod_revision }
            }
        };
        Ok(landed)
    }
}

impl Drop for EtcdCoordinator {
    /// Ends every claim: as a crash would, but the leases are revoked in the background at
    /// once instead of expiring a TTL later.
    fn drop(&mut self) {
        let held: Vec<_> = self.inner.held().drain().map(|(_, held)| held).collect();
        for held in held {
            held.kept.end_here();
            lease::revoke_in_background(&self.inner.members, held.kept.lease.id);
        }
    }
}

#[async_trait::async_trait]
impl Coordinator for EtcdCoordinator {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let inner = &self.inner;
        // Leases this process dropped a moment ago are being revoked: let that finish first,
        // so that "drop the old handle, then claim again" behaves as in one process.
        lease::await_earlier_revocations(inner.options.request_timeout).await;
        // Refused before any lease is granted when the marks belong to another cluster.
        let cluster_id = cluster::verify(inner).await?;
        // The lease is kept alive from the start: a LableOrg claim may wait for its lock.
        let (kept, state) = lease::start(
            &inner.members,
            inner.lease_options(),
            inner.options.ttl_secs(),
            inner.on_end(),
        )
        .await?;
        let taken = match &inner.options.scheme {
            Scheme::Native => inner.take_native(request, &kept.lease).await,
            Scheme::LableOrg { namespace_prefix } => {
                let root = namespace_prefix.replace("{namespace}", &request.namespace);
                lableorg::claim(inner, &root, request, &kept.lease).await
            }
        };
        let failed = match taken {
            Ok(taken) if *state.borrow() != ClaimState::Lost => {
                return Ok(inner.hold(request, taken, cluster_id, kept, state));
            }
            Ok(_) => unavailable("the lease expired while claiming".into()),
            Err(e) => e,
        };
        kept.end_here();
        lease::revoke(&inner.members, kept.lease.id).await;
        Err(failed)
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let inner = &self.inner;
        let held = inner.live(claim)?;
        let mut seen = held.mark.lock().await;
        if *held.kept.state.borrow() == ClaimState::Lost {
            return Err(claim_lost(&held.namespace, held.generator_id));
        }
        let value = serde_json::to_vec(&MarkValue { mark_ms, layout: held.fingerprint.clone() })
            .map_err(|e| Error::Corrupt {
                path: format!("etcd key {}", held.mark_key),
                reason: e.to_string(),
            })?;
        for _ in 0..2 {
            if let Some(stored_ms) = seen.mark_ms
                && mark_ms < stored_ms
            {
                return Err(Error::MarkRegressed { offered_ms: mark_ms, stored_ms });
            }
            match inner.write_mark(&held, &mut seen, &value, mark_ms).await {
                Ok(true) => return Ok(()),
                Ok(false) => continue,
                Err(e @ Error::ClaimLost { .. }) => {
                    if inner.forget(claim.token()).is_some() {
                        let id = held.kept.lease.id;
                        lease::gone_in_etcd(id, "a mark write");
                        lease::revoke_in_background(&inner.members, id);
                    }
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(unavailable(format!("the mark at {} kept changing; not written", held.mark_key)))
    }

    async fn lineage(&self) -> Result<Option<Lineage>, Error> {
        cluster::lineage(&self.inner).await.map(Some)
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        let inner = &self.inner;
        let Some(held) = inner.forget(claim.token()) else { return Ok(()) };
        // Wait for a mark write in flight, so that it cannot land after the release.
        drop(held.mark.lock().await);
        let id = held.kept.lease.id;
        match inner
            .members
            .run("revoke the lease", |mut c| async move { c.lease_revoke(id).await })
            .await
        {
            Err(Error::Unavailable { reason, .. }) if lease::is_not_found(&reason) => Ok(()),
            other => other.map(drop),
        }
    }
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable { backend: BACKEND, reason }
}

fn claim_lost(namespace: &str, generator_id: u64) -> Error {
    Error::ClaimLost { namespace: namespace.to_owned(), generator_id }
}

fn decode_mark(key: &str, value: &[u8]) -> Result<MarkValue, Error> {
    serde_json::from_slice(value)
        .map_err(|e| Error::Corrupt { path: format!("etcd key {key}"), reason: e.to_string() })
}

/// The first key-value pair of every range operation of a transaction, in order.
fn ranges(response: &TxnResponse) -> Vec<Option<Kv>> {
    response
        .op_responses()
        .into_iter()
        .filter_map(|op| match op {
            TxnOpResponse::Get(get) => Some(get.kvs().first().map(|kv| Kv {
                value: kv.value().to_vec(),
                create_revision: kv.create_revision(),
                mod_revision: kv.mod_revision(),
                lease: kv.lease(),
            })),
            _ => None,
        })
        .collect()
}
