//! The Postgres backend of segments and counters (feature `postgres`): one row per namespace
//! or counter, each range or value one atomic statement, the schema and its never-decrease
//! triggers in `sql/`. It owns the SQL, the durability check and the mapping of Postgres
//! errors into [`Error`]; it knows nothing of allocators or DecimalIds.

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
    counter::check_counter_request,
    segment::{MAX_SEGMENT_ID, check_range_request},
};

/// The backend name in errors and the stores' `name()`.
const BACKEND: &str = "postgres";

/// The schema, run on every new connection (idempotent).
const SCHEMA: &str = include_str!("sql/schema.sql");
/// One range: the atomic upsert.
const NEXT_RANGE: &str = include_str!("sql/next_range.sql");
/// One counter value: the atomic upsert.
const NEXT_COUNTER: &str = include_str!("sql/next_counter.sql");
/// The durability settings of the session.
const SETTINGS: &str = include_str!("sql/settings.sql");

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
    /// How long connecting (with the settings check and the schema) may take. Default 5 s.
    pub connect_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            request_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
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
/// returns, so they are accepted. What it cannot check: a standby that may be promoted must be
/// synchronous (`synchronous_standby_names` with `on` or `remote_apply`), or every row must be
/// raised by a safe margin after a failover or a restore from backup (`reliability.md` F11).
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
}

/// One connection, its settings checked and its statements prepared.
#[derive(Debug)]
struct Conn {
    client: Client,
    next_range: Statement,
    next_counter: Statement,
}

impl PostgresStore {
    /// Connects to the database at `config` (a `postgresql://` URL or `key=value` pairs, as
    /// libpq takes them), checks its durability settings and creates the tables and triggers
    /// if they are missing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRequest`] for an unreadable connection string, [`Error::NotDurable`]
    /// when `fsync` or `synchronous_commit` is `off`, [`Error::Unavailable`] when the server
    /// cannot be reached or the schema cannot be created.
    pub async fn connect(config: &str, options: PostgresOptions) -> Result<Self, Error> {
        let config: Config = config.parse().map_err(|e| {
            Error::InvalidRequest(format!("invalid postgres connection string: {e}"))
        })?;
        let store = PostgresStore {
            config,
            options,
            conn: tokio::sync::Mutex::new(None),
            round_trips: AtomicU64::new(0),
        };
        store.conn().await?;
        Ok(store)
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
            tokio::time::timeout(self.options.connect_timeout, open(&self.config)).await.map_err(
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
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        let timeout = self.options.request_timeout;
        match tokio::time::timeout(timeout, conn.client.query(statement(&conn), params)).await {
            Ok(Ok(rows)) => Ok(rows),
            Ok(Err(e)) => {
                if e.is_closed() || conn.client.is_closed() {
                    self.forget(&conn).await;
                }
                Err(failed(what, &e))
            }
            Err(_) => {
                // The statement may still commit: its result is never used (a gap). The
                // connection is in an unknown state, so a new one is opened.
                self.forget(&conn).await;
                Err(unavailable(format!("{what} got no answer within {timeout:?}")))
            }
        }
    }
}

/// Opens a connection, refuses it when its durability settings are off, creates the schema and
/// prepares the statements.
async fn open(config: &Config) -> Result<Conn, Error> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| failed("connect", &e))?;
    // The connection task ends when the client is dropped or the server goes away.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let row = client.query_one(SETTINGS, &[]).await.map_err(|e| failed("read settings", &e))?;
    for (i, setting) in ["fsync", "synchronous_commit"].into_iter().enumerate() {
        let value: String = row.try_get(i).map_err(|e| failed("read settings", &e))?;
        if value.eq_ignore_ascii_case("off") {
            return Err(Error::NotDurable { backend: BACKEND, setting: setting.into(), value });
        }
    }
    client
        .batch_execute(&format!("BEGIN;\n{SCHEMA}\nCOMMIT;"))
        .await
        .map_err(|e| failed("create the schema", &e))?;
    let next_range = client
        .prepare_typed(NEXT_RANGE, &[Type::TEXT, Type::INT8, Type::INT8])
        .await
        .map_err(|e| failed("prepare the range statement", &e))?;
    let next_counter = client
        .prepare_typed(NEXT_COUNTER, &[Type::TEXT, Type::INT8])
        .await
        .map_err(|e| failed("prepare the counter statement", &e))?;
    Ok(Conn { client, next_range, next_counter })
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
}
