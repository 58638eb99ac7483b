//! The Postgres post-promotion bump (RELIABILITY.md, T18) against real servers: a
//! primary and a streaming standby (`pg_basebackup -R`) that lags, the primary killed, the
//! standby promoted; the store must raise every row past what the lost primary handed out, once,
//! before its first range. With cfg `idmint_negative_controls`, the negative control shows
//! the same promotion handing a lost range out again. Also: a restored history (a changed
//! identity), rows without a recorded identity, an unreadable identity, a standby, the margins.
//! Each test starts its own servers on free loopback ports; they skip without PostgreSQL,
//! unless `CI=true`.

#![cfg(all(feature = "test-util", feature = "postgres"))]

use std::{
    ops::Range,
    time::{Duration, Instant},
};

use idmint_coord::{
    CounterStore, Error, PostgresOptions, PostgresStore, SegmentStore,
    testing::{self, Postgres},
};

/// The namespace and the counter every test uses.
const NS: &str = "orders";
const COUNTER: &str = "launch";
/// The step of every range.
const STEP: u64 = 1_000;
/// A margin larger than anything these tests hand out.
const MARGIN: u64 = 1_000_000;

fn options() -> PostgresOptions {
    PostgresOptions {
        promotion_margin: MARGIN,
        promotion_counter_margin: 50,
        ..PostgresOptions::default()
    }
}

async fn connect(server: &Postgres) -> PostgresStore {
    PostgresStore::connect(&server.url(), options()).await.expect("connect")
}

/// `n` ranges of `STEP`.
async fn ranges(store: &PostgresStore, n: usize) -> Vec<Range<u64>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(store.next_range(NS, STEP).await.expect("next range"));
    }
    out
}

/// Waits until the standby has replayed the primary's `orders` row (replication is
/// asynchronous): the only wait here is on another process.
fn caught_up(primary: &Postgres, standby: &Postgres) {
    let sql = format!("select max_id from idmint_segments where namespace = '{NS}'");
    let want = primary.psql(&sql).expect("read the primary");
    let started = Instant::now();
    while standby.psql(&sql).ok().as_deref() != Some(want.as_str()) {
        assert!(started.elapsed() < Duration::from_secs(30), "the standby did not catch up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a promotion of a lagging standby did: every range and counter value the old primary
/// handed out, those the promoted standby handed out next, and how often it raised.
struct Promotion {
    before: Vec<Range<u64>>,
    counters_before: Vec<u64>,
    after: Vec<Range<u64>>,
    counter_after: u64,
    raises: u64,
}

/// A primary hands out ranges; a standby copies it and catches up; the standby stops (so it
/// lags, deterministically) while the primary hands out more; the primary is killed; the
/// standby restarts and is promoted; a store (`raising`, or the negative control) connects
/// to it and hands out ranges. `None` without PostgreSQL.
async fn promote_lagging_standby(raising: bool) -> Option<Promotion> {
    let mut primary = testing::available(Postgres::start())?;
    let store = connect(&primary).await;
    let mut before = ranges(&store, 3).await;
    let mut counters_before = vec![store.next(COUNTER, 99_999).await.expect("counter")];
    let mut standby = Postgres::start_standby(primary.port()).expect("start a standby");
    caught_up(&primary, &standby);
    // A standby hands nothing out.
    match PostgresStore::connect(&standby.url(), options()).await {
        Err(e @ Error::Standby { .. }) => assert!(e.to_string().contains("standby"), "{e}"),
        other => panic!("a standby must be refused, got {other:?}"),
    }
    standby.kill().expect("stop the standby");
    // Committed on the primary only: lost with it.
    before.extend(ranges(&store, 5).await);
    counters_before.push(store.next(COUNTER, 99_999).await.expect("counter"));
    primary.kill().expect("kill the primary");
    standby.restart().expect("restart the standby");
    standby.promote().expect("promote the standby");
    let promoted = if raising {
        PostgresStore::connect(&standby.url(), options()).await
    } else {
        without_bump(&standby).await
    }
    .expect("connect to the promoted standby");
    let after = ranges(&promoted, 5).await;
    let counter_after = promoted.next(COUNTER, 99_999).await.expect("counter");
    // Another server connecting later finds the identity recorded: no second raise.
    let later = connect(&standby).await;
    assert_eq!(later.promotion_raises(), 0);
    Some(Promotion {
        before,
        counters_before,
        after,
        counter_after,
        raises: promoted.promotion_raises(),
    })
}

#[cfg(idmint_negative_controls)]
async fn without_bump(server: &Postgres) -> Result<PostgresStore, Error> {
    PostgresStore::connect_without_promotion_bump(&server.url(), options()).await
}

#[cfg(not(idmint_negative_controls))]
async fn without_bump(_server: &Postgres) -> Result<PostgresStore, Error> {
    Err(Error::InvalidRequest(
        "the negative control needs a build with IDMINT_NEGATIVE_CONTROLS=1".into(),
    ))
}

fn overlaps(a: &[Range<u64>], b: &[Range<u64>]) -> usize {
    a.iter().filter(|x| b.iter().any(|y| x.start < y.end && y.start < x.end)).count()
}

#[tokio::test]
async fn a_promoted_lagging_standby_is_raised_past_every_range_its_primary_handed_out() {
    let Some(p) = promote_lagging_standby(true).await else { return };
    assert_eq!(p.raises, 1, "exactly one raise");
    assert_eq!(overlaps(&p.after, &p.before), 0, "re-issued: {:?} vs {:?}", p.after, p.before);
    let highest = p.before.iter().map(|r| r.end).max().unwrap_or(0);
    assert!(p.after[0].start >= highest, "{:?} starts below {highest}", p.after[0]);
    assert!(p.after[0].start > MARGIN, "{:?} was not raised by the margin", p.after[0]);
    assert!(p.counters_before.iter().all(|&v| v < p.counter_after), "{:?}", p.counter_after);
}

/// The negative control: without the bump, the promoted standby hands out again the ranges
/// (and the counter value) its primary lost.
#[cfg(idmint_negative_controls)]
#[tokio::test]
async fn without_the_bump_a_promoted_lagging_standby_hands_ranges_out_again() {
    let Some(p) = promote_lagging_standby(false).await else { return };
    assert_eq!(p.raises, 0);
    let reissued = overlaps(&p.after, &p.before);
    assert!(reissued >= 5, "the lost ranges must come out again: {:?} vs {:?}", p.after, p.before);
    assert!(p.counters_before.contains(&p.counter_after), "{:?}", p.counter_after);
}

#[tokio::test]
async fn a_changed_history_raises_every_row_exactly_once() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let store = connect(&server).await;
    let before = ranges(&store, 2).await;
    let counter = store.next(COUNTER, 99_999).await.expect("counter");
    // As after a restore: the recorded identity is not the live one.
    server
        .psql(
            "update idmint_meta set value = 'system_identifier=1 timeline=1' where key = 'history'",
        )
        .expect("tamper");
    let url = server.url();
    let (a, b) = tokio::join!(
        PostgresStore::connect(&url, options()),
        PostgresStore::connect(&url, options())
    );
    let (a, b) = (a.expect("connect a"), b.expect("connect b"));
    assert_eq!(a.promotion_raises() + b.promotion_raises(), 1, "one raise in all");
    let after = a.next_range(NS, STEP).await.expect("next range");
    assert_eq!(after.start, before[1].end + MARGIN, "raised by exactly the margin");
    assert_eq!(a.next(COUNTER, 99_999).await.expect("counter"), counter + 50 + 1);
    let recorded =
        server.psql("select value from idmint_meta where key = 'history'").expect("psql");
    assert!(recorded.starts_with("system_identifier=") && !recorded.contains("=1 "), "{recorded}");
}

#[tokio::test]
async fn rows_without_a_recorded_history_are_raised_and_a_fresh_database_is_not() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    let store = connect(&server).await;
    assert_eq!(store.promotion_raises(), 0, "a fresh database has nothing to raise");
    let before = ranges(&store, 1).await;
    server.psql("delete from idmint_meta").expect("delete the history");
    let store = connect(&server).await;
    assert_eq!(store.promotion_raises(), 1);
    assert_eq!(store.next_range(NS, STEP).await.expect("next").start, before[0].end + MARGIN);
}

#[tokio::test]
async fn an_unreadable_history_is_refused_never_trusted() {
    let Some(server) = testing::available(Postgres::start()) else { return };
    connect(&server).await;
    for bad in [
        "garbage",
        "system_identifier=x timeline=1",
        "system_identifier=1 timeline=-1",
        "system_identifier=1",
        "system_identifier=1 timeline=1 extra",
        "",
    ] {
        server
            .psql(&format!("update idmint_meta set value = '{bad}' where key = 'history'"))
            .expect("tamper");
        match PostgresStore::connect(&server.url(), options()).await {
            Err(e @ Error::Corrupt { .. }) => {
                assert!(e.to_string().contains("idmint_meta"), "{e}");
            }
            other => panic!("`{bad}` must be refused, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn margins_must_fit_a_row_and_zero_trusts_synchronous_replication() {
    for options in [
        PostgresOptions { promotion_margin: u64::MAX, ..PostgresOptions::default() },
        PostgresOptions { promotion_counter_margin: 1 << 63, ..PostgresOptions::default() },
        PostgresOptions { promotion_mark_margin_ms: 1 << 63, ..PostgresOptions::default() },
    ] {
        let refused = PostgresStore::connect("postgresql://nobody@127.0.0.1:1/x", options).await;
        assert!(matches!(refused, Err(Error::InvalidRequest(_))), "{refused:?}");
    }
    let Some(server) = testing::available(Postgres::start()) else { return };
    let store = connect(&server).await;
    let before = ranges(&store, 1).await;
    server.psql("update idmint_meta set value = 'system_identifier=1 timeline=1'").expect("tamper");
    let sync = PostgresOptions {
        promotion_margin: 0,
        promotion_counter_margin: 0,
        promotion_mark_margin_ms: 0,
        ..PostgresOptions::default()
    };
    let store = PostgresStore::connect(&server.url(), sync).await.expect("connect");
    assert_eq!(store.promotion_raises(), 0);
    assert_eq!(store.next_range(NS, STEP).await.expect("next").start, before[0].end);
}
