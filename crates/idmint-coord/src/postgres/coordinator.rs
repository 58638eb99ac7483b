//! `PostgresCoordinator` (feature `postgres`): generator-ID claims and high-water marks in one
//! Postgres table (`sql/claims.sql`), over the connection, durability check and history guard
//! of [`PostgresStore`]. Leases are timed by the database's `now()` alone; the holder's own
//! deadline comes from its monotonic clock; every mark write is fenced by the claim's epoch.

use std::{
    collections::{BTreeSet, HashMap, hash_map::RandomState},
    sync::{
        Arc, LazyLock, Mutex, MutexGuard, Weak,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::sync::watch;
use tokio_postgres::types::Type;

use super::{BACKEND, PostgresOptions, PostgresStore, unavailable};
use crate::{Claim, ClaimRequest, ClaimState, Coordinator, Error, GeneratorIds, Lineage, Probe};

/// Takes one generator ID if it is free or its lease is over.
const TAKE: &str = include_str!("../sql/claim_take.sql");
/// Renews a live lease.
const RENEW: &str = include_str!("../sql/claim_renew.sql");
/// The parameter types of [`RENEW`].
const RENEW_TYPES: [Type; 4] = [Type::TEXT, Type::INT8, Type::INT8, Type::INT8];
/// The fenced mark write.
const MARK: &str = include_str!("../sql/claim_mark.sql");
/// Ends a lease, keeping the mark.
const RELEASE: &str = include_str!("../sql/claim_release.sql");
/// The live claims of a namespace (to skip them in a pool).
const LIVE: &str =
    "SELECT generator_id FROM idmint_claims WHERE namespace = $1 AND expires_at > now()";
/// What a failed claim or mark write finds.
const ROW: &str = "SELECT holder, epoch, expires_at > now(), mark_ms FROM idmint_claims \
                   WHERE namespace = $1 AND generator_id = $2";
/// Raises every mark to at least $1 and records the adoption, in one statement.
const ADOPT: &str = "WITH raised AS ( \
         UPDATE idmint_claims SET mark_ms = $1, updated_at = now() \
         WHERE mark_ms IS NULL OR mark_ms < $1 RETURNING 1 \
     ), adopted AS ( \
         INSERT INTO idmint_meta (key, value) VALUES ('adopted', $1::text) \
         ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now() RETURNING 1 \
     ) \
     SELECT (SELECT count(*) FROM raised), (SELECT count(*) FROM idmint_claims) \
            + 0 * (SELECT count(*) FROM adopted)";
/// Every claim row, for `idmint lease list`.
const LIST: &str = "SELECT namespace, generator_id, holder, epoch, \
                    (extract(epoch FROM (expires_at - now())) * 1000)::bigint, mark_ms, layout \
                    FROM idmint_claims ORDER BY namespace, generator_id";
/// The negative control's claim: takes the row whatever its lease (no exclusive check).
#[cfg(idmint_negative_controls)]
const TAKE_UNFENCED: &str = "INSERT INTO idmint_claims AS c (namespace, generator_id, holder, epoch, expires_at) \
     VALUES ($1, $2, $3, 1, now() + $4 * interval '1 millisecond') \
     ON CONFLICT (namespace, generator_id) DO UPDATE \
     SET holder = EXCLUDED.holder, epoch = c.epoch + 1, expires_at = EXCLUDED.expires_at \
     RETURNING c.epoch, c.mark_ms, c.layout";
/// The negative control's mark write: no epoch and no lease compared.
#[cfg(idmint_negative_controls)]
const MARK_UNFENCED: &str = "UPDATE idmint_claims SET mark_ms = $4, layout = $5, updated_at = now() \
     WHERE namespace = $1 AND generator_id = $2 AND $3::bigint IS NOT NULL \
     AND (mark_ms IS NULL OR mark_ms <= $4) RETURNING mark_ms";

/// Claim tokens, unique in the process.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// Lease settings of a [`PostgresCoordinator`]. Build it with struct-update syntax from
/// [`PostgresLeaseOptions::default`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_coord::PostgresLeaseOptions;
///
/// let options = PostgresLeaseOptions { ttl: Duration::from_secs(2), ..PostgresLeaseOptions::default() };
/// assert!(options.validate().is_ok());
/// assert_eq!(PostgresLeaseOptions::default().margin, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresLeaseOptions {
    /// The lease of each claim, timed by the database: `expires_at = now() + ttl`, renewed
    /// every `ttl / 3`. Default 10 s; at least 1 s.
    pub ttl: Duration,
    /// Subtracted from the lease to get the holder's own deadline, published as
    /// [`ClaimState::Held`]`{ until }`: `until = send time of the last successful renewal +
    /// ttl − margin`. Default 1 s; at most half the TTL (DESIGN.md, "Generator-ID leases in
    /// Postgres: how are claims timed and fenced without trusting clocks?").
    pub margin: Duration,
}

impl Default for PostgresLeaseOptions {
    fn default() -> Self {
        PostgresLeaseOptions { ttl: Duration::from_secs(10), margin: Duration::from_secs(1) }
    }
}

impl PostgresLeaseOptions {
    /// Checks the TTL and the margin.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a TTL below 1 s or above a day, or a margin above half
    /// the TTL.
    pub fn validate(&self) -> Result<(), Error> {
        if self.ttl < Duration::from_secs(1) || self.ttl > Duration::from_secs(86_400) {
            return Err(Error::InvalidRequest(format!(
                "the postgres lease ttl {:?} must be between 1 s and a day",
                self.ttl
            )));
        }
        if self.margin > self.ttl / 2 {
            return Err(Error::InvalidRequest(format!(
                "the postgres lease margin {:?} must be at most half the lease ttl {:?}",
                self.margin, self.ttl
            )));
        }
        Ok(())
    }

    fn ttl_ms(&self) -> i64 {
        // At most a day: fits.
        self.ttl.as_millis() as i64
    }
}

/// One row of [`PostgresCoordinator::list`].
///
/// # Example
///
/// ```
/// use idmint_coord::PostgresClaimRow;
///
/// let row = PostgresClaimRow {
///     namespace: "orders".into(),
///     generator_id: 3,
///     holder: "host-a pid 42".into(),
///     epoch: 2,
///     lease_left_ms: Some(8_200),
///     mark_ms: Some(1_800_000_000_000),
///     layout: Some("snowflake".into()),
/// };
/// assert!(row.held());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresClaimRow {
    /// The namespace.
    pub namespace: String,
    /// The generator ID.
    pub generator_id: u64,
    /// Who holds it, or last held it.
    pub holder: String,
    /// The fencing epoch: how many times it was claimed.
    pub epoch: u64,
    /// How long the lease has left by the database's clock (negative: expired); `None` once
    /// released.
    pub lease_left_ms: Option<i64>,
    /// The high-water mark (Unix ms), if one was stored.
    pub mark_ms: Option<u64>,
    /// The layout fingerprint of the mark.
    pub layout: Option<String>,
}

impl PostgresClaimRow {
    /// Whether the lease is live.
    pub fn held(&self) -> bool {
        self.lease_left_ms.is_some_and(|left| left > 0)
    }
}

/// Claims and marks in Postgres, for several servers sharing one database.
///
/// One row per (namespace, generator ID) in `idmint_claims` (`src/sql/claims.sql`, created by
/// [`PostgresStore`]'s schema step) is both the claim and the mark:
///
/// - **Claim**: one `INSERT … ON CONFLICT DO UPDATE … WHERE expires_at IS NULL OR expires_at <=
///   now()` per candidate (`sql/claim_take.sql`): the row is taken only when free or its lease
///   is over by the **database's** clock, with `epoch + 1` and `expires_at = now() + ttl`.
///   Pools skip the live rows and try the rest in the order of a [`Probe`](crate::Probe)
///   (the lowest first, then spread out after a conflict); a held fixed ID is
///   [`Error::Conflict`] naming the holder.
/// - **Extend**: a task per claim renews every TTL/3 (`sql/claim_renew.sql`, only while the
///   epoch is its own and the lease live). Each success moves the claim's deadline to its send
///   time + TTL − [`margin`](PostgresLeaseOptions::margin) on this process's monotonic clock;
///   past the deadline, or when a renewal finds the lease gone, the claim turns
///   [`ClaimState::Lost`]. No two machines' wall clocks are ever compared.
/// - **Store a mark**: one `UPDATE` that compares the epoch, the lease and the stored mark
///   (`sql/claim_mark.sql`): a holder whose claim was taken over gets [`Error::ClaimLost`],
///   a lower mark [`Error::MarkRegressed`]; triggers refuse any lower mark or epoch, and any
///   `DELETE`.
/// - **Release**: `expires_at = NULL`; the mark stays. Dropping a claim (or the coordinator)
///   releases in the background.
/// - **History**: [`PostgresStore`]'s guard, on every connection, finds a promoted standby or a
///   restore (a new timeline or system identifier) and raises every mark by
///   [`PostgresOptions::promotion_mark_margin_ms`] once, ending every claim.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{
///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
///     PostgresOptions,
/// };
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let url = "postgresql://idmint@127.0.0.1/idmint";
/// let coordinator =
///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
///         .await?;
/// let request = ClaimRequest::new("orders", GeneratorIds::Pool { count: 1024 }, "snowflake");
/// let claim = coordinator.claim(&request).await?;
/// coordinator.store_mark(&claim, 1_800_000_003_000).await?;
/// coordinator.release(&claim).await?;
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
pub struct PostgresCoordinator {
    inner: Arc<Inner>,
}

struct Inner {
    store: PostgresStore,
    lease: PostgresLeaseOptions,
    held: Mutex<HashMap<u64, Arc<Held>>>,
    /// Off only in the no-pg-fence negative control.
    fence: AtomicBool,
    /// Renewals sent (for the upkeep measurement).
    renewals: AtomicU64,
}

/// A claim this coordinator holds.
#[derive(Debug)]
struct Held {
    namespace: String,
    generator_id: i64,
    epoch: i64,
    fingerprint: String,
    state: watch::Sender<ClaimState>,
    /// Test hook: the renewal task acts as if its process were paused.
    paused: AtomicBool,
    task: Mutex<Option<tokio::task::AbortHandle>>,
    /// Serialises this claim's mark writes with its release.
    writing: tokio::sync::Mutex<()>,
}

impl Held {
    fn end_here(&self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
        self.state.send_replace(ClaimState::Lost);
    }
}

impl std::fmt::Debug for PostgresCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCoordinator")
            .field("lease", &self.inner.lease)
            .field("claims", &self.inner.held().len())
            .finish_non_exhaustive()
    }
}

impl PostgresCoordinator {
    /// Connects as [`PostgresStore::connect`] does (durability settings, standby refusal,
    /// schema, history guard) and claims with leases of `lease`.
    ///
    /// # Errors
    ///
    /// As [`PostgresStore::connect`], and [`Error::InvalidRequest`] for inconsistent lease
    /// options.
    pub async fn connect(
        config: &str,
        options: PostgresOptions,
        lease: PostgresLeaseOptions,
    ) -> Result<Self, Error> {
        lease.validate()?;
        let store = PostgresStore::connect(config, options).await?;
        Ok(PostgresCoordinator {
            inner: Arc::new(Inner {
                store,
                lease,
                held: Mutex::default(),
                fence: AtomicBool::new(true),
                renewals: AtomicU64::new(0),
            }),
        })
    }

    /// **Unsafe, tests only** (cfg `idmint_negative_controls`): a negative control whose claims
    /// take a generator ID whatever its lease (no exclusive check) and whose mark writes
    /// compare neither epoch nor lease, so that tests can show they catch what this lets
    /// through. Never enable the feature in a build that serves.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{
    ///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
    ///     PostgresOptions,
    /// };
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// let unsafe_control = coordinator.without_fence();
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    #[cfg(idmint_negative_controls)]
    #[must_use]
    pub fn without_fence(self) -> Self {
        self.inner.fence.store(false, Ordering::Relaxed);
        self
    }

    /// Test hook (feature `test-util`): the claim's renewal task stops as if its process were
    /// paused: no renewals, nothing published, so the claim still reads [`ClaimState::Held`]
    /// with a stale deadline while its lease runs out. Returns whether this coordinator holds
    /// the claim.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{
    ///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
    ///     PostgresOptions,
    /// };
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// let request = ClaimRequest::new("orders", GeneratorIds::Fixed(0), "snowflake");
    /// let claim = coordinator.claim(&request).await?;
    /// assert!(coordinator.pause_renewals(&claim));
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    #[cfg(feature = "test-util")]
    pub fn pause_renewals(&self, claim: &Claim) -> bool {
        self.inner
            .held()
            .get(&claim.token())
            .map(|held| held.paused.store(true, Ordering::SeqCst))
            .is_some()
    }

    /// How many statements this coordinator sent (claims, renewals, marks, releases, reads).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{
    ///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
    ///     PostgresOptions,
    /// };
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// let before = coordinator.round_trips();
    /// let _claim = coordinator.claim(&ClaimRequest::new("orders", GeneratorIds::Fixed(0), "snowflake")).await?;
    /// assert!(coordinator.round_trips() > before);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn round_trips(&self) -> u64 {
        self.inner.store.round_trips()
    }

    /// How many lease renewals this coordinator sent (one per claim every TTL/3).
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{
    ///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
    ///     PostgresOptions,
    /// };
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// assert_eq!(coordinator.renewals(), 0);
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub fn renewals(&self) -> u64 {
        self.inner.renewals.load(Ordering::Relaxed)
    }

    /// Every claim row of the database: for `idmint lease list`.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] when the database does not answer.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{
    ///     ClaimRequest, Coordinator, GeneratorIds, PostgresCoordinator, PostgresLeaseOptions,
    ///     PostgresOptions,
    /// };
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// let held = coordinator.list().await?.into_iter().filter(|row| row.held()).count();
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn list(&self) -> Result<Vec<PostgresClaimRow>, Error> {
        let rows = self.inner.store.query("list the claims", LIST, &[], &[]).await?;
        rows_of(&rows)
    }

    /// Raises every stored mark to at least `floor_ms` and records the adoption in
    /// `idmint_meta` (row `adopted`), in one statement: the operator's step when servers that
    /// remember another database must claim on this one (a logical restore into a new cluster,
    /// a move), with every server stopped. Returns how many marks were raised and how many
    /// were already at or above the floor. Running it again is harmless.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for a floor above a `bigint`, [`Error::Unavailable`] when the
    /// database does not answer.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use idmint_coord::{PostgresCoordinator, PostgresLeaseOptions, PostgresOptions};
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let url = "postgresql://idmint@127.0.0.1/idmint";
    /// let coordinator =
    ///     PostgresCoordinator::connect(url, PostgresOptions::default(), PostgresLeaseOptions::default())
    ///         .await?;
    /// let (raised, kept) = coordinator.adopt(1_800_000_060_000).await?;
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn adopt(&self, floor_ms: u64) -> Result<(u64, u64), Error> {
        let floor = i64::try_from(floor_ms).map_err(|_| {
            Error::InvalidRequest(format!("floor {floor_ms} is above a postgres bigint"))
        })?;
        let rows =
            self.inner.store.query("adopt the database", ADOPT, &[Type::INT8], &[&floor]).await?;
        let row = rows.first().ok_or_else(|| unavailable("no answer to the adoption".into()))?;
        let get = |e: tokio_postgres::Error| unavailable(format!("read the adoption: {e}"));
        let raised: i64 = row.try_get(0).map_err(get)?;
        let total: i64 = row.try_get(1).map_err(get)?;
        Ok((raised.max(0) as u64, (total - raised).max(0) as u64))
    }

    /// Every claim row of the database at `config`, read-only: one connection that creates,
    /// checks and raises nothing (for `idmint lease list`). No table yet reads as no rows.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an unreadable connection string, [`Error::Unavailable`]
    /// when the database does not answer within `timeout`.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// use idmint_coord::PostgresCoordinator;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let rows = PostgresCoordinator::list_at("postgresql://idmint@127.0.0.1/idmint", Duration::from_secs(5)).await?;
    /// for row in rows.iter().filter(|r| r.held()) {
    ///     println!("{} {} held by {}", row.namespace, row.generator_id, row.holder);
    /// }
    /// # Ok::<(), idmint_coord::Error>(())
    /// # }).unwrap();
    /// ```
    pub async fn list_at(config: &str, timeout: Duration) -> Result<Vec<PostgresClaimRow>, Error> {
        let config: tokio_postgres::Config = config.parse().map_err(|e| {
            Error::InvalidRequest(format!("invalid postgres connection string: {e}"))
        })?;
        let read = async {
            let (client, connection) = config
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| super::failed("connect", &e))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let exists: bool = client
                .query_one("SELECT to_regclass('idmint_claims') IS NOT NULL", &[])
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| super::failed("look for idmint_claims", &e))?;
            if !exists {
                return Ok(Vec::new());
            }
            let rows =
                client.query(LIST, &[]).await.map_err(|e| super::failed("list the claims", &e))?;
            rows_of(&rows)
        };
        tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| unavailable(format!("no answer within {timeout:?}")))?
    }
}

/// Reads the rows of [`LIST`].
fn rows_of(rows: &[tokio_postgres::Row]) -> Result<Vec<PostgresClaimRow>, Error> {
    let get = |e: tokio_postgres::Error| unavailable(format!("read a claim row: {e}"));
    rows.iter()
        .map(|row| {
            let generator_id: i64 = row.try_get(1).map_err(get)?;
            let epoch: i64 = row.try_get(3).map_err(get)?;
            let mark_ms: Option<i64> = row.try_get(5).map_err(get)?;
            Ok(PostgresClaimRow {
                namespace: row.try_get(0).map_err(get)?,
                generator_id: generator_id.max(0) as u64,
                holder: row.try_get(2).map_err(get)?,
                epoch: epoch.max(0) as u64,
                lease_left_ms: row.try_get(4).map_err(get)?,
                mark_ms: mark_ms.map(|m| m.max(0) as u64),
                layout: row.try_get(6).map_err(get)?,
            })
        })
        .collect()
}

impl Inner {
    fn held(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fenced(&self) -> bool {
        self.fence.load(Ordering::Relaxed)
    }

    fn live(&self, claim: &Claim) -> Result<Arc<Held>, Error> {
        let held = self.held().get(&claim.token()).cloned();
        match held {
            Some(held) if *held.state.borrow() != ClaimState::Lost => Ok(held),
            _ => Err(claim_lost(claim.namespace(), claim.generator_id())),
        }
    }

    fn forget(&self, token: u64) -> Option<Arc<Held>> {
        let held = self.held().remove(&token)?;
        held.end_here();
        Some(held)
    }

    fn take_sql(&self) -> &'static str {
        #[cfg(idmint_negative_controls)]
        if !self.fenced() {
            return TAKE_UNFENCED;
        }
        TAKE
    }

    fn mark_sql(&self) -> &'static str {
        #[cfg(idmint_negative_controls)]
        if !self.fenced() {
            return MARK_UNFENCED;
        }
        MARK
    }

    /// The row as it is now: (holder, epoch, live, mark).
    async fn row(
        &self,
        namespace: &str,
        generator_id: i64,
    ) -> Result<Option<(String, i64, bool, Option<i64>)>, Error> {
        let rows = self
            .store
            .query("read a claim", ROW, &[Type::TEXT, Type::INT8], &[&namespace, &generator_id])
            .await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let get = |e: tokio_postgres::Error| unavailable(format!("read a claim row: {e}"));
        let live: Option<bool> = row.try_get(2).map_err(get)?;
        Ok(Some((
            row.try_get(0).map_err(get)?,
            row.try_get(1).map_err(get)?,
            live.unwrap_or(false),
            row.try_get(3).map_err(get)?,
        )))
    }

    async fn release_row(
        &self,
        namespace: &str,
        generator_id: i64,
        epoch: i64,
    ) -> Result<(), Error> {
        self.store
            .query(
                "release a claim",
                RELEASE,
                &[Type::TEXT, Type::INT8, Type::INT8],
                &[&namespace, &generator_id, &epoch],
            )
            .await
            .map(drop)
    }
}

/// Releases started in the background and not finished yet, by sequence number.
static RELEASING: LazyLock<watch::Sender<BTreeSet<u64>>> =
    LazyLock::new(|| watch::Sender::new(BTreeSet::new()));
static NEXT_RELEASE: AtomicU64 = AtomicU64::new(0);

/// Removes a release from [`RELEASING`] however its task ends.
struct Releasing(u64);

impl Drop for Releasing {
    fn drop(&mut self) {
        RELEASING.send_modify(|pending| {
            pending.remove(&self.0);
        });
    }
}

/// Releases a claim row without waiting (from `Drop` or a renewal task). Without a Tokio
/// runtime nothing is done: the lease expires after its TTL.
fn release_in_background(inner: Arc<Inner>, held: &Held) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let sequence = NEXT_RELEASE.fetch_add(1, Ordering::SeqCst);
    RELEASING.send_modify(|pending| {
        pending.insert(sequence);
    });
    let guard = Releasing(sequence);
    let (namespace, generator_id, epoch) = (held.namespace.clone(), held.generator_id, held.epoch);
    runtime.spawn(async move {
        let _guard = guard;
        let _ = inner.release_row(&namespace, generator_id, epoch).await;
    });
}

/// Waits, at most `limit`, until every background release started before this call ended.
async fn await_earlier_releases(limit: Duration) {
    let horizon = NEXT_RELEASE.load(Ordering::SeqCst);
    let mut pending = RELEASING.subscribe();
    let done = |p: &BTreeSet<u64>| p.first().is_none_or(|&first| first >= horizon);
    let _ = tokio::time::timeout(limit, pending.wait_for(done)).await;
}

/// `send time + TTL − margin`.
fn deadline(sent: Instant, lease: &PostgresLeaseOptions) -> Instant {
    sent + lease.ttl.saturating_sub(lease.margin)
}

/// Renews one claim's lease every TTL/3 until the claim ends, publishing its deadline.
async fn keep_alive(owner: Weak<Inner>, held: Arc<Held>, token: u64, sent: Instant) {
    let Some(lease) = owner.upgrade().map(|inner| inner.lease.clone()) else { return };
    let period = lease.ttl / 3;
    let retry = (lease.ttl / 20).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut until = deadline(sent, &lease);
    let mut next = sent + period;
    loop {
        let lapsed = tokio::select! {
            () = held.state.closed() => {
                end(&owner, token, true);
                return;
            }
            () = tokio::time::sleep_until(until.into()) => true,
            () = tokio::time::sleep_until(next.into()) => false,
        };
        if held.paused.load(Ordering::SeqCst) {
            // As if the process were stopped: no renewals, no news, until the claim goes.
            held.state.closed().await;
            end(&owner, token, false);
            return;
        }
        if lapsed {
            held.state.send_replace(ClaimState::Lost);
            end(&owner, token, false);
            return;
        }
        let Some(inner) = owner.upgrade() else { return };
        let sent = Instant::now();
        let budget = inner.store.request_timeout().min(until.saturating_duration_since(sent));
        inner.renewals.fetch_add(1, Ordering::Relaxed);
        let ttl_ms = lease.ttl_ms();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&held.namespace, &held.generator_id, &held.epoch, &ttl_ms];
        let renewal = inner.store.query("renew a lease", RENEW, &RENEW_TYPES, &params);
        let outcome = tokio::time::timeout(budget, renewal).await;
        drop(inner);
        match outcome {
            Ok(Ok(rows)) if !rows.is_empty() => {
                until = deadline(sent, &lease);
                held.state.send_replace(ClaimState::Held { until: Some(until) });
                next = sent + period;
            }
            Ok(Ok(_)) => {
                held.state.send_replace(ClaimState::Lost);
                end(&owner, token, false);
                return;
            }
            Ok(Err(_)) | Err(_) => next = Instant::now() + retry,
        }
    }
}

/// Forgets a claim whose renewal task ends by itself; releases its row when asked (the claim
/// was dropped without release).
fn end(owner: &Weak<Inner>, token: u64, release: bool) {
    if let Some(inner) = owner.upgrade()
        && let Some(held) = inner.held().remove(&token)
        && release
    {
        release_in_background(Arc::clone(&inner), &held);
    }
}

impl Drop for PostgresCoordinator {
    /// Ends every claim and releases its row in the background.
    fn drop(&mut self) {
        let held: Vec<_> = self.inner.held().drain().map(|(_, held)| held).collect();
        for held in held {
            held.end_here();
            release_in_background(Arc::clone(&self.inner), &held);
        }
    }
}

#[async_trait::async_trait]
impl Coordinator for PostgresCoordinator {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, Error> {
        request.check()?;
        let inner = &self.inner;
        await_earlier_releases(inner.store.request_timeout()).await;
        let namespace = request.namespace.as_str();
        let live = async || -> Result<Vec<u64>, Error> {
            let rows =
                inner.store.query("list live claims", LIVE, &[Type::TEXT], &[&namespace]).await?;
            let id = |row: &tokio_postgres::Row| row.try_get::<_, i64>(0).ok();
            Ok(rows.iter().filter_map(id).filter_map(|id| u64::try_from(id).ok()).collect())
        };
        let listed = match request.generator_ids {
            GeneratorIds::Fixed(_) => Vec::new(),
            GeneratorIds::Pool { .. } | GeneratorIds::Stride { .. } => live().await?,
        };
        let mut last_holder = None;
        // Claimants that start together draw apart after they meet: the seed is this
        // process's random hash key applied to the holder.
        let seed = std::hash::BuildHasher::hash_one(&RandomState::new(), &request.holder);
        let mut probe = Probe::new(request.generator_ids, listed, seed);
        while let Some(candidate) = probe.next() {
            let Ok(generator_id) = i64::try_from(candidate) else { continue };
            let sent = Instant::now();
            let rows = inner
                .store
                .query(
                    "claim a generator id",
                    inner.take_sql(),
                    &[Type::TEXT, Type::INT8, Type::TEXT, Type::INT8],
                    &[&namespace, &generator_id, &request.holder, &inner.lease.ttl_ms()],
                )
                .await?;
            let Some(row) = rows.first() else {
                let holder = inner.row(namespace, generator_id).await?.map(|(holder, ..)| holder);
                last_holder = Some(holder.unwrap_or_else(|| "another claimant".into()));
                if probe.relist_due() {
                    probe.add_held(live().await?);
                }
                continue;
            };
            let get = |e: tokio_postgres::Error| unavailable(format!("read the claim: {e}"));
            let epoch: i64 = row.try_get(0).map_err(get)?;
            let mark: Option<i64> = row.try_get(1).map_err(get)?;
            let layout: Option<String> = row.try_get(2).map_err(get)?;
            if let Some(stored) =
                layout.filter(|l| mark.is_some() && *l != request.layout_fingerprint)
            {
                let _ = inner.release_row(namespace, generator_id, epoch).await;
                return Err(Error::LayoutChanged {
                    namespace: namespace.to_owned(),
                    stored,
                    expected: request.layout_fingerprint.clone(),
                });
            }
            let mark_ms = if inner.fenced() { mark.map(|m| m.max(0) as u64) } else { None };
            let until = deadline(sent, &inner.lease);
            let (state, receiver) = watch::channel(ClaimState::Held { until: Some(until) });
            let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
            let held = Arc::new(Held {
                namespace: namespace.to_owned(),
                generator_id,
                epoch,
                fingerprint: request.layout_fingerprint.clone(),
                state,
                paused: AtomicBool::new(false),
                task: Mutex::new(None),
                writing: tokio::sync::Mutex::new(()),
            });
            inner.held().insert(token, Arc::clone(&held));
            let task =
                tokio::spawn(keep_alive(Arc::downgrade(inner), Arc::clone(&held), token, sent));
            *held.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
            return Ok(Claim::new(namespace, candidate, mark_ms, token, receiver));
        }
        Err(match (request.generator_ids, last_holder) {
            (GeneratorIds::Fixed(generator_id), Some(holder)) => {
                Error::Conflict { namespace: namespace.to_owned(), generator_id, holder }
            }
            (ids, _) => Error::PoolExhausted { namespace: namespace.to_owned(), size: ids.count() },
        })
    }

    async fn store_mark(&self, claim: &Claim, mark_ms: u64) -> Result<(), Error> {
        let inner = &self.inner;
        let held = inner.live(claim)?;
        let _writing = held.writing.lock().await;
        if *held.state.borrow() == ClaimState::Lost {
            return Err(claim_lost(&held.namespace, claim.generator_id()));
        }
        let mark_i = i64::try_from(mark_ms).map_err(|_| {
            Error::InvalidRequest(format!("mark {mark_ms} is above a postgres bigint"))
        })?;
        let rows = inner
            .store
            .query(
                "store a mark",
                inner.mark_sql(),
                &[Type::TEXT, Type::INT8, Type::INT8, Type::INT8, Type::TEXT],
                &[&held.namespace, &held.generator_id, &held.epoch, &mark_i, &held.fingerprint],
            )
            .await?;
        if !rows.is_empty() {
            return Ok(());
        }
        match inner.row(&held.namespace, held.generator_id).await? {
            Some((_, epoch, live, stored)) if (epoch == held.epoch && live) || !inner.fenced() => {
                match stored {
                    Some(stored) if stored > mark_i => Err(Error::MarkRegressed {
                        offered_ms: mark_ms,
                        stored_ms: stored.max(0) as u64,
                    }),
                    _ => Err(unavailable("the mark write matched no row; not written".into())),
                }
            }
            _ => {
                inner.forget(claim.token());
                Err(claim_lost(&held.namespace, claim.generator_id()))
            }
        }
    }

    async fn release(&self, claim: &Claim) -> Result<(), Error> {
        let inner = &self.inner;
        let Some(held) = inner.forget(claim.token()) else { return Ok(()) };
        // Wait for a mark write in flight, so that it cannot land after the release.
        drop(held.writing.lock().await);
        inner.release_row(&held.namespace, held.generator_id, held.epoch).await
    }

    async fn lineage(&self) -> Result<Option<Lineage>, Error> {
        let history = self.inner.store.recorded_history().await?;
        // The system identifier, not the timeline: a promoted standby or a restore continues
        // the same store, its marks raised by the history guard (DESIGN.md).
        // The store's UUID tells a wiped or re-created database from the one remembered.
        let database = history.database;
        let name = history.store.map_or(String::new(), |store| format!(", store {store}"));
        Ok(Some(Lineage {
            store: match history.system {
                Some(system) => format!("postgres system {system}, database {database}{name}"),
                None => format!("postgres database {database}{name}"),
            },
            recorded: history.system.is_some(),
            adopted_ms: history.adopted_ms,
        }))
    }
}

fn claim_lost(namespace: &str, generator_id: u64) -> Error {
    Error::ClaimLost { namespace: namespace.to_owned(), generator_id }
}
