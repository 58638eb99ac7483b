//! The Postgres backend of segments and counters (feature `postgres`): one row per namespace
//! or counter, each range or value one atomic statement, the schema and its never-decrease
//! triggers in `sql/`. It owns the connection, the durability check, the history guard and the
//! mapping of Postgres errors into [`Error`]; it knows nothing of allocators or DecimalIds.
//! `PostgresCoordinator` (`postgres/coordinator.rs`) claims generator IDs over the same
//! connection.

pub(crate) mod coordinator;

use std::{
    ops::Range,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use tokio_postgres::{Client, Config, NoTls, Row, Statement, types::ToSql, types::Type};

use crate::{
    CounterStore, Error, SegmentStore,
    counter::{check_counter_request, check_take_request},
    segment::{MAX_SEGMENT_ID, check_range_request},
};

/// The backend name in errors and the stores' `name()`.
const BACKEND: &str = "postgres";

/// The schema, run on every new connection (idempotent).
const SCHEMA: &str = include_str!("sql/schema.sql");
/// The claims table of `PostgresCoordinator`, run with the schema (idempotent).
const CLAIMS: &str = include_str!("sql/claims.sql");
/// One range: the atomic upsert.
const NEXT_RANGE: &str = include_str!("sql/next_range.sql");
/// One counter value: the atomic upsert.
const NEXT_COUNTER: &str = include_str!("sql/next_counter.sql");
/// Raising a counter to a chosen value: the atomic upsert.
const TAKE_COUNTER: &str = include_str!("sql/take_counter.sql");
/// The durability settings of the session.
const SETTINGS: &str = include_str!("sql/settings.sql");
/// Whether the server is a standby, and its history identity.
const IDENTITY: &str = include_str!("sql/identity.sql");
/// The post-promotion bump of every row.
const RAISE: &str = include_str!("sql/raise.sql");
/// The key of the recorded history identity in `idmint_meta`.
const HISTORY_KEY: &str = "history";
/// Serialises the history checks of concurrent connections (so exactly one raises).
const HISTORY_LOCK: i64 = 7_587_007_236_661_834_088;
/// The default promotion margin of segment rows: a million ranges of 1,000 IDs, about a
/// ten-billionth of the ID space (2^63).
pub const DEFAULT_PROMOTION_MARGIN: u64 = 1_000_000_000;
/// The default promotion margin of counters (DecimalId launch IDs, taken once per start).
pub const DEFAULT_PROMOTION_COUNTER_MARGIN: u64 = 100;
/// The default promotion margin of generator-ID marks: 60 s (DESIGN.md, "Generator-ID leases
/// in Postgres: how are claims timed and fenced without trusting clocks?").
pub const DEFAULT_PROMOTION_MARK_MARGIN_MS: u64 = 60_000;

/// Settings of a [`PostgresStore`]. Build it with struct-update syntax from
/// [`PostgresOptions::default`].
///
/// # Example
///
/// ```
/// use std::time::Duration;
///
/// use idmint_coord::PostgresOptions;
///
/// let options = PostgresOptions { request_timeout: Duration::from_secs(2), ..PostgresOptions::default() };
/// assert_eq!(PostgresOptions::default().connect_timeout, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// How long one statement may take. Default 5 s. A statement cut off may still commit:
    /// its range is then never used (a gap).
    pub request_timeout: Duration,
    /// How long connecting (with the settings check, the schema and the history check) may
    /// take. Default 5 s.
    pub connect_timeout: Duration,
    /// How far every segment row is raised when the store finds the database on a new history
    /// (a promoted standby, a restore): it must exceed the IDs the old primary could hand out
    /// in its standby's worst replication lag (IDs per second × lag in seconds), because those
    /// ranges may be lost with it. Default [`DEFAULT_PROMOTION_MARGIN`] (10⁹). 0 raises nothing:
    /// only when every standby that may be promoted is synchronous.
    pub promotion_margin: u64,
    /// The same for counters (one value per server start). Default
    /// [`DEFAULT_PROMOTION_COUNTER_MARGIN`] (100).
    pub promotion_counter_margin: u64,
    /// The same for the generator-ID marks of `PostgresCoordinator`, in ms: it must exceed the
    /// marks the old primary could store within its standby's worst lag (the lag plus the
    /// servers' window). Default [`DEFAULT_PROMOTION_MARK_MARGIN_MS`] (60 s).
    pub promotion_mark_margin_ms: u64,
}

impl PostgresOptions {
    /// Checks the margins, which must fit a Postgres `bigint`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] naming the margin that is too large.
    pub fn validate(&self) -> Result<(), Error> {
        for (name, margin) in [
            ("promotion margin", self.promotion_margin),
            ("promotion counter margin", self.promotion_counter_margin),
            ("promotion mark margin", self.promotion_mark_margin_ms),
        ] {
            if margin > MAX_SEGMENT_ID {
                return Err(Error::InvalidRequest(format!(
                    "postgres {name} {margin} is above the largest value a row can hold ({MAX_SEGMENT_ID})"
                )));
            }
        }
        Ok(())
    }
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            promotion_margin: DEFAULT_PROMOTION_MARGIN,
            promotion_counter_margin: DEFAULT_PROMOTION_COUNTER_MARGIN,
            promotion_mark_margin_ms: DEFAULT_PROMOTION_MARK_MARGIN_MS,
        }
    }
}

/// Segments and persistent counters in Postgres, for any number of processes on any number of
/// machines.
///
/// **Schema** (`src/sql/schema.sql`, created if missing on every connection, under an advisory
/// lock): `idmint_segments(namespace text primary key, max_id bigint not null check (max_id >=
/// 0), updated_at timestamptz)` and `idmint_counters(name, value, updated_at)` alike, with
/// triggers that refuse any decrease or key change, any `DELETE` and any `TRUNCATE` (raise a
/// row by hand to repair it; never lower one).
///
/// **A range** is one atomic statement, sent as a prepared statement in one round trip
/// (`src/sql/next_range.sql`):
///
/// ```sql
/// INSERT INTO idmint_segments AS s (namespace, max_id) VALUES ($1, $2)
/// ON CONFLICT (namespace) DO UPDATE
///     SET max_id = s.max_id + $2, updated_at = now()
///     WHERE s.max_id <= $3 - $2
/// RETURNING s.max_id - $2 AS previous, s.max_id
/// ```
///
/// i.e. `UPDATE … SET max_id = max_id + step … RETURNING max_id − step, max_id`, which also
/// creates the row the first time. Concurrent callers queue on the row lock, and each bumps the
/// value the previous one committed (under `READ COMMITTED`, `ON CONFLICT DO UPDATE` always
/// updates the latest row version), so the ranges `(previous, max_id]` are disjoint. The
/// statement runs in its own implicit transaction, committed when the server processes the
/// protocol's `Sync`; the reply ends with `ReadyForQuery`, which the server sends only after
/// that commit (and, with `synchronous_commit = on`, its WAL flush), and the rows are returned
/// only then. So a range is used only after its commit is durable. A call that fails or times
/// out after the commit wastes its range, never repeats it.
///
/// **Durability check.** On every connection the store reads `fsync` and
/// `synchronous_commit` as that session sees them and refuses ([`Error::NotDurable`]) when
/// either is `off`: with `fsync = off` a crash can lose committed rows, with
/// `synchronous_commit = off` the last few hundred milliseconds of acknowledged commits.
/// `local`, `remote_write`, `remote_apply` and `on` all flush the WAL locally before a commit
/// returns, so they are accepted.
///
/// **Failover and restore (the post-promotion bump).** A standby replicated asynchronously
/// may lack the last ranges its primary committed; promoted, it would hand them out again
/// (RELIABILITY.md, T18). So the store refuses a standby ([`Error::Standby`]) and records, in
/// the row `history` of `idmint_meta`, the identity of the cluster it hands ranges out from:
/// its `system_identifier` (new at `initdb`, kept by `pg_basebackup`) and its current
/// timeline (the first field of `pg_walfile_name(pg_current_wal_lsn())`, which a promotion or
/// a point-in-time restore moves to a new one at once, before any checkpoint; an ordinary
/// owner role may read both). On every connection, before it hands out anything, it compares
/// the recorded identity with the live one in one transaction under an advisory lock (a
/// compare-and-set: of many servers reconnecting, exactly one raises). When they differ, or
/// when rows exist but no identity was recorded (an older idmint wrote them, or the row was
/// lost), it raises every segment row by [`PostgresOptions::promotion_margin`] and every
/// counter by [`PostgresOptions::promotion_counter_margin`], records the live identity,
/// commits, and logs a warning. A recorded identity it cannot read is refused
/// ([`Error::Corrupt`]), never trusted. The margin must exceed what the old primary could hand
/// out within its standby's worst lag; the cost is a gap of that size at each failover (10⁹ of
/// the 9.2 × 10¹⁸ IDs by default). With synchronous replication (`synchronous_standby_names`
/// with `synchronous_commit = on` or `remote_apply`) a promoted standby has every
/// acknowledged range, and a margin of 0 skips the raise. What it cannot see: a file-level
/// copy of the data directory restored without recovery (same system, same timeline): raise
/// the rows by hand then (`UPDATE idmint_segments SET max_id = max_id + <margin>`).
///
/// **Connection.** One connection, shared by all callers (tokio-postgres pipelines their
/// statements), without TLS. If it breaks, the next call reconnects, checking the settings and
/// the schema again.
///
/// # Example
///
/// ```no_run
/// use idmint_coord::{CounterStore, PostgresOptions, PostgresStore, SegmentStore};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = PostgresStore::connect("postgresql://idmint@127.0.0.1/idmint", PostgresOptions::default()).await?;
/// let range = store.next_range("orders", 1_000).await?;
/// assert_eq!(range.end - range.start, 1_000);
/// let launch_id = store.next("launch", 99_999).await?;
/// # Ok::<(), idmint_coord::Error>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct PostgresStore {
    config: Config,
    options: PostgresOptions,
    /// The live connection, `None` after it broke (until the next call reconnects).
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    round_trips: AtomicU64,
    /// Whether a new history raises the rows (false only in the negative control).
    raise: bool,
    /// How many times this store raised the rows.
    raises: Arc<AtomicU64>,
}

/// One connection, its settings checked and its statements prepared.
#[derive(Debug)]
struct Conn {
    client: Client,
    next_range: Statement,
    next_counter: Statement,
    /// Other statements (the coordinator's), prepared on first use, by their SQL.
    prepared: std::sync::Mutex<std::collections::HashMap<&'static str, Statement>>,
}

impl PostgresStore {
    /// Connects to the database at `config` (a `postgresql://` URL or `key=value` pairs, as
    /// libpq takes them), checks its durability settings and creates the tables and triggers
    /// if they are missing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an unreadable connection string or a margin too large,
    /// [`Error::NotDurable`] when `fsync` or `synchronous_commit` is `off`,
    /// [`Error::Standby`] when the server is a standby, [`Error::Corrupt`] when the recorded
    /// history identity cannot be read, [`Error::Unavailable`] when the server cannot be
    /// reached or the schema cannot be created.
    pub async fn connect(config: &str, options: PostgresOptions) -> Result<Self, Error> {
        Self::connect_raising(config, options, true).await
    }

    /// UNSAFE, tests only (cfg `idmint_negative_controls`): [`connect`](Self::connect), but a
    /// new history (a promoted standby) raises nothing, so a lagging standby hands out again the
    /// ranges its primary lost: the negative control of the post-promotion bump.
    ///
    /// # Errors
    ///
    /// As [`connect`](Self::connect).
    #[cfg(idmint_negative_controls)]
    pub async fn connect_without_promotion_bump(
        config: &str,
        options: PostgresOptions,
    ) -> Result<Self, Error> {
        Self::connect_raising(config, options, false).await
    }

    async fn connect_raising(
        config: &str,
        options: PostgresOptions,
        raise: bool,
    ) -> Result<Self, Error> {
        options.validate()?;
        let config: Config = config.parse().map_err(|e| {
            Error::InvalidRequest(format!("invalid postgres connection string: {e}"))
        })?;
        let store = PostgresStore {
            config,
            options,
            conn: tokio::sync::Mutex::new(None),
            round_trips: AtomicU64::new(0),
            raise,
            raises: Arc::new(AtomicU64::new(0)),
        };
        store.conn().await?;
        Ok(store)
    }

    /// How many times this store raised every row after finding the database on a new
    /// history (a promoted standby, a restore).
    pub fn promotion_raises(&self) -> u64 {
        self.raises.load(Ordering::Relaxed)
    }

    /// How many range and counter statements this store has sent: one round trip each (the
    /// settings check and the schema at each connection are not counted).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// The live connection, opening one if there is none.
    async fn conn(&self) -> Result<Arc<Conn>, Error> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && !conn.client.is_closed()
        {
            return Ok(Arc::clone(conn));
        }
        *slot = None;
        let conn = Arc::new(
            tokio::time::timeout(self.options.connect_timeout, self.open()).await.map_err(
                |_| unavailable(format!("no connection within {:?}", self.options.connect_timeout)),
            )??,
        );
        *slot = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Drops `conn` if it is still the live connection, so that the next call reconnects.
    async fn forget(&self, conn: &Arc<Conn>) {
        let mut slot = self.conn.lock().await;
        if slot.as_ref().is_some_and(|live| Arc::ptr_eq(live, conn)) {
            *slot = None;
        }
    }

    /// Runs one prepared statement under the request timeout.
    async fn run(
        &self,
        what: &str,
        statement: fn(&Conn) -> &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let conn = self.conn().await?;
        self.execute(what, &conn, statement(&conn), params).await
    }

    /// Sends `statement` on `conn` under the request timeout, counting the round trip. A
    /// closed connection or a timeout drops `conn`, so that the next call reconnects.
    async fn execute(
        &self,
        what: &str,
        conn: &Arc<Conn>,
        statement: &Statement,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let timeout = self.options.request_timeout;
        match tokio::time::timeout(timeout, conn.client.query(statement, params)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => {
                if e.is_closed() || conn.client.is_closed() {
                    self.forget(conn).await;
                }
                Err(failed(what, &e))
            }
            Err(_) => {
                // The statement may still commit: its result is never used (a gap). The
                // connection is in an unknown state, so a new one is opened.
                self.forget(conn).await;
                Err(unavailable(format!("{what} got no answer within {timeout:?}")))
            }
        }
    }
}

impl PostgresStore {
    /// Runs `sql` (prepared once per connection, with parameter `types`) under the request
    /// timeout, as [`run`](Self::run) does the range statement.
    pub(crate) async fn query(
        &self,
        what: &str,
        sql: &'static str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let conn = self.conn().await?;
        let cached = conn.prepared.lock().unwrap_or_else(|p| p.into_inner()).get(sql).cloned();
        let statement = match cached {
            Some(statement) => statement,
            None => {
                let statement = match tokio::time::timeout(
                    self.options.request_timeout,
                    conn.client.prepare_typed(sql, types),
                )
                .await
                {
                    Ok(Ok(statement)) => statement,
                    Ok(Err(e)) => {
                        if e.is_closed() || conn.client.is_closed() {
                            self.forget(&conn).await;
                        }
                        return Err(failed(what, &e));
                    }
                    Err(_) => {
                        self.forget(&conn).await;
                        return Err(unavailable(format!("preparing {what} got no answer")));
                    }
                };
                conn.prepared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(sql, statement.clone());
                statement
            }
        };
        self.execute(what, &conn, &statement, params).await
    }

    /// The history identity recorded in `idmint_meta` (its system identifier), the database's
    /// name, the store's name (the UUID the schema wrote once), and the floor of the last
    /// adoption (`idmint lease adopt-cluster`), if any; `None` before any identity is recorded.
    pub(crate) async fn recorded_history(&self) -> Result<History, Error> {
        const SQL: &str = "SELECT (SELECT value FROM idmint_meta WHERE key = $1), \
                           current_database(), \
                           (SELECT value FROM idmint_meta WHERE key = 'adopted'), \
                           (SELECT value FROM idmint_meta WHERE key = 'store')";
        let rows =
            self.query("read the recorded history", SQL, &[Type::TEXT], &[&HISTORY_KEY]).await?;
        let row =
            rows.first().ok_or_else(|| unavailable("no answer to the history read".into()))?;
        let text: Option<String> = row.try_get(0).map_err(|e| failed("read the history", &e))?;
        let database: String = row.try_get(1).map_err(|e| failed("read the history", &e))?;
        let adopted: Option<String> = row.try_get(2).map_err(|e| failed("read the history", &e))?;
        let store: Option<String> = row.try_get(3).map_err(|e| failed("read the history", &e))?;
        let system =
            text.map(|text| Identity::parse(&text)).transpose()?.map(|i| i.system_identifier);
        let adopted_ms = adopted
            .map(|text| {
                text.parse::<u64>().map_err(|_| Error::Corrupt {
                    path: "postgres idmint_meta row `adopted`".into(),
                    reason: format!("`{text}` is not a time in ms"),
                })
            })
            .transpose()?;
        Ok(History { system, database, store, adopted_ms })
    }

    /// The request timeout of every statement.
    pub(crate) fn request_timeout(&self) -> Duration {
        self.options.request_timeout
    }

    /// Opens a connection, refuses it when its durability settings are off or it is a standby,
    /// creates the schema, raises the rows if the history changed, and prepares the statements.
    async fn open(&self) -> Result<Conn, Error> {
        let (mut client, connection) =
            self.config.connect(NoTls).await.map_err(|e| failed("connect", &e))?;
        // The connection task ends when the client is dropped or the server goes away.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        check_settings(&client).await?;
        let live = live_identity(&client).await?;
        client
            // `IF NOT EXISTS` answers with notices, which tokio-postgres logs: not news.
            .batch_execute(&format!(
                "SET client_min_messages TO warning;\nBEGIN;\n{SCHEMA}\n{CLAIMS}\nCOMMIT;"
            ))
            .await
            .map_err(|e| failed("create the schema", &e))?;
        self.check_history(&mut client, &live).await?;
        let next_range = client
            .prepare_typed(NEXT_RANGE, &[Type::TEXT, Type::INT8, Type::INT8])
            .await
            .map_err(|e| failed("prepare the range statement", &e))?;
        let next_counter = client
            .prepare_typed(NEXT_COUNTER, &[Type::TEXT, Type::INT8])
            .await
            .map_err(|e| failed("prepare the counter statement", &e))?;
        Ok(Conn { client, next_range, next_counter, prepared: Default::default() })
    }

    /// The compare-and-set of the history identity: under an advisory lock, reads the recorded
    /// identity, and when it differs from `live` (or is missing while rows exist) raises every
    /// row by the margins and records `live`, all in one transaction.
    async fn check_history(&self, client: &mut Client, live: &Identity) -> Result<(), Error> {
        let tx = client.transaction().await.map_err(|e| failed("begin the history check", &e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&HISTORY_LOCK])
            .await
            .map_err(|e| failed("lock the history check", &e))?;
        let row = tx
            .query_opt("SELECT value FROM idmint_meta WHERE key = $1", &[&HISTORY_KEY])
            .await
            .map_err(|e| failed("read the recorded history", &e))?;
        let recorded = match &row {
            Some(row) => {
                let text: String =
                    row.try_get(0).map_err(|e| failed("read the recorded history", &e))?;
                Some(Identity::parse(&text)?)
            }
            None => None,
        };
        let why = match &recorded {
            Some(recorded) if recorded == live => return Ok(()),
            Some(recorded) => format!(
                "the database's history changed from {recorded} to {live} (a promoted standby or a restore)"
            ),
            None => {
                let rows: i64 = tx
                    .query_one(
                        "SELECT (SELECT count(*) FROM idmint_segments) + (SELECT count(*) FROM idmint_counters) \
                         + (SELECT count(*) FROM idmint_claims)",
                        &[],
                    )
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(|e| failed("count the rows", &e))?;
                if rows == 0 {
                    String::new()
                } else {
                    format!(
                        "the database ({live}) has {rows} rows but no recorded history (written by an older idmint, or the row was lost)"
                    )
                }
            }
        };
        if !why.is_empty() {
            let (margin, counter_margin, mark_margin) = (
                self.options.promotion_margin,
                self.options.promotion_counter_margin,
                self.options.promotion_mark_margin_ms,
            );
            if !self.raise {
                tracing::error!(
                    "UNSAFE: {why}; the post-promotion bump is disabled (a negative control for tests only): nothing raised"
                );
            } else if margin == 0 && counter_margin == 0 && mark_margin == 0 {
                tracing::warn!(
                    "{why}; promotion margins are 0 (synchronous replication assumed): nothing raised"
                );
            } else {
                // Both fit: `validate` keeps the margins within `i64::MAX`.
                let (margin_i, counter_i, mark_i) =
                    (margin as i64, counter_margin as i64, mark_margin as i64);
                let row = tx
                    .query_one(RAISE, &[&margin_i, &counter_i, &mark_i])
                    .await
                    .map_err(|e| failed("raise the rows after a new history", &e))?;
                let segments: i64 = row.try_get(0).map_err(|e| failed("raise the rows", &e))?;
                let counters: i64 = row.try_get(1).map_err(|e| failed("raise the rows", &e))?;
                let marks: i64 = row.try_get(2).map_err(|e| failed("raise the rows", &e))?;
                tracing::warn!(
                    "{why}: raised {segments} segment rows by {margin}, {counters} counters by {counter_margin} and {marks} generator-ID marks by {mark_margin} ms (ending their claims) before handing out anything"
                );
                self.raises.fetch_add(1, Ordering::Relaxed);
            }
        }
        tx.execute(
            "INSERT INTO idmint_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
            &[&HISTORY_KEY, &live.to_string()],
        )
        .await
        .map_err(|e| failed("record the history", &e))?;
        tx.commit().await.map_err(|e| failed("commit the history check", &e))
    }
}

/// Refuses a session whose durability settings are off.
async fn check_settings(client: &Client) -> Result<(), Error> {
    let row = client.query_one(SETTINGS, &[]).await.map_err(|e| failed("read settings", &e))?;
    for (i, setting) in ["fsync", "synchronous_commit"].into_iter().enumerate() {
        let value: String = row.try_get(i).map_err(|e| failed("read settings", &e))?;
        if value.eq_ignore_ascii_case("off") {
            return Err(Error::NotDurable { backend: BACKEND, setting: setting.into(), value });
        }
    }
    Ok(())
}

/// The live identity of the server, refusing a standby.
async fn live_identity(client: &Client) -> Result<Identity, Error> {
    let row = client.query_one(IDENTITY, &[]).await.map_err(|e| failed("read the identity", &e))?;
    let standby: bool = row.try_get(0).map_err(|e| failed("read the identity", &e))?;
    if standby {
        return Err(Error::Standby { backend: BACKEND });
    }
    let system: String = row.try_get(1).map_err(|e| failed("read the identity", &e))?;
    let wal_file: String = row.try_get(2).map_err(|e| failed("read the identity", &e))?;
    let corrupt = |reason: String| Error::Corrupt { path: "postgres live identity".into(), reason };
    let system_identifier =
        system.parse().map_err(|_| corrupt(format!("system identifier `{system}`")))?;
    let timeline = wal_file
        .get(..8)
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or_else(|| corrupt(format!("WAL file name `{wal_file}`")))?;
    Ok(Identity { system_identifier, timeline })
}

/// What a database records of itself, for `Coordinator::lineage`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct History {
    /// The recorded system identifier (`None` before any is recorded).
    pub(crate) system: Option<i64>,
    /// The database's name.
    pub(crate) database: String,
    /// The store's name: the UUID written when the schema was created in this database
    /// (`None` only in a database whose schema predates it).
    pub(crate) store: Option<String>,
    /// The floor of the last adoption, if any.
    pub(crate) adopted_ms: Option<u64>,
}

/// Which history a database is on: its system and timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    /// Postgres shows the unsigned identifier as a `bigint`: negative once its top bit is set.
    system_identifier: i64,
    timeline: u32,
}

impl Identity {
    /// Reads `system_identifier=<n> timeline=<n>` (as `Display` writes it), refusing anything
    /// else.
    fn parse(text: &str) -> Result<Identity, Error> {
        let corrupt = || Error::Corrupt {
            path: format!("postgres idmint_meta row `{HISTORY_KEY}`"),
            reason: format!(
                "`{text}` is not `system_identifier=<n> timeline=<n>`; it is not trusted: raise every row by hand past what any lost primary handed out, then delete the row"
            ),
        };
        let mut fields = text.split(' ');
        let system_identifier = fields
            .next()
            .and_then(|f| f.strip_prefix("system_identifier="))
            .and_then(|n| n.parse().ok())
            .ok_or_else(corrupt)?;
        let timeline = fields
            .next()
            .and_then(|f| f.strip_prefix("timeline="))
            .and_then(|n| n.parse().ok())
            .ok_or_else(corrupt)?;
        if fields.next().is_some() {
            return Err(corrupt());
        }
        Ok(Identity { system_identifier, timeline })
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "system_identifier={} timeline={}", self.system_identifier, self.timeline)
    }
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable { backend: BACKEND, reason }
}

/// Maps a Postgres error, with the server's message and SQLSTATE when it sent one.
fn failed(what: &str, e: &tokio_postgres::Error) -> Error {
    match e.as_db_error() {
        Some(db) => unavailable(format!(
            "{what} failed: {}: {} (sqlstate {})",
            db.severity(),
            db.message(),
            db.code().code()
        )),
        None => unavailable(format!("{what} failed: {e}")),
    }
}

/// A value the statements return, which the table's CHECK keeps non-negative.
fn column(row: &Row, index: usize, what: &str) -> Result<u64, Error> {
    let value: i64 = row.try_get(index).map_err(|e| failed(what, &e))?;
    u64::try_from(value).map_err(|_| Error::Corrupt {
        path: format!("postgres {what}"),
        reason: format!("negative value {value}"),
    })
}

#[async_trait::async_trait]
impl SegmentStore for PostgresStore {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn next_range(&self, namespace: &str, step: u64) -> Result<Range<u64>, Error> {
        check_range_request(namespace, step)?;
        // Both fit: `check_range_request` keeps `step` within `MAX_SEGMENT_ID` = `i64::MAX`.
        let (step_i, max_i) = (step as i64, MAX_SEGMENT_ID as i64);
        let rows =
            self.run("next range", |c| &c.next_range, &[&namespace, &step_i, &max_i]).await?;
        let Some(row) = rows.first() else {
            return Err(Error::Exhausted {
                what: "segment namespace",
                name: namespace.to_owned(),
                max: MAX_SEGMENT_ID,
            });
        };
        let previous = column(row, 0, "idmint_segments.max_id")?;
        let max_id = column(row, 1, "idmint_segments.max_id")?;
        if max_id.checked_sub(previous) != Some(step) {
            return Err(Error::Corrupt {
                path: format!("postgres idmint_segments row `{namespace}`"),
                reason: format!("asked for {step} ids, got ({previous}, {max_id}]"),
            });
        }
        Ok(previous + 1..max_id + 1)
    }
}

#[async_trait::async_trait]
impl CounterStore for PostgresStore {
    fn name(&self) -> &'static str {
        BACKEND
    }

    async fn next(&self, name: &str, max: u64) -> Result<u64, Error> {
        check_counter_request(name, max)?;
        let exhausted = || Error::Exhausted { what: "counter", name: name.to_owned(), max };
        if max == 0 {
            return Err(exhausted());
        }
        // Fits: `check_counter_request` keeps `max` within `i64::MAX`.
        let max_i = max as i64;
        let rows = self.run("next counter value", |c| &c.next_counter, &[&name, &max_i]).await?;
        let row = rows.first().ok_or_else(exhausted)?;
        column(row, 0, "idmint_counters.value")
    }

    async fn take(&self, name: &str, value: u64, max: u64) -> Result<u64, Error> {
        check_take_request(name, value, max)?;
        // Fits: `check_take_request` keeps `value` within `max`, and `max` within `i64::MAX`.
        let value_i = value as i64;
        let types = [Type::TEXT, Type::INT8];
        let rows =
            self.query("take a counter value", TAKE_COUNTER, &types, &[&name, &value_i]).await?;
        if let Some(row) = rows.first() {
            return column(row, 0, "idmint_counters.value");
        }
        const CURRENT: &str = "SELECT value FROM idmint_counters WHERE name = $1";
        let rows = self.query("read a counter", CURRENT, &[Type::TEXT], &[&name]).await?;
        let current = match rows.first() {
            Some(row) => column(row, 0, "idmint_counters.value")?,
            None => value,
        };
        Err(Error::Taken { name: name.to_owned(), value, current })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_reads_back_what_it_writes_and_nothing_else() {
        for identity in [
            Identity { system_identifier: 7_311_234_567_890_123_456, timeline: 1 },
            Identity { system_identifier: -5, timeline: u32::MAX },
        ] {
            assert_eq!(Identity::parse(&identity.to_string()).ok(), Some(identity));
        }
        for bad in
            ["", "garbage", "timeline=1 system_identifier=1", "system_identifier=1 timeline=1 "]
        {
            assert!(matches!(Identity::parse(bad), Err(Error::Corrupt { .. })), "{bad:?}");
        }
    }
}
