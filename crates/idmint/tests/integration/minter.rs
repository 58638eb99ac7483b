//! The `Minter` in one process: its errors and their messages, typed IDs, the configuration
//! file of `idmint serve`, the blocking handle, and a restart after a drop without `close`.

use std::{collections::HashSet, os::unix::fs::MetadataExt, path::Path, time::Duration};

use idmint::{AnyId, Builder, Error, Minter, OnFork, Snowflake, Uuid7};

use crate::u64s;

/// What a case expects: the error's variant (by a predicate) and words of its message.
struct Case {
    name: &'static str,
    builder: Builder,
    namespace: &'static str,
    is: fn(&Error) -> bool,
    says: &'static [&'static str],
}

/// Builds the case's minter, mints from its namespace, and checks the error.
async fn check(case: Case) {
    let result = match case.builder.build().await {
        Ok(minter) => {
            let result = minter.next_in(case.namespace).await.map(|_| ());
            minter.close().await.expect("close");
            result
        }
        Err(e) => Err(e),
    };
    let err = result.expect_err(case.name);
    assert!((case.is)(&err), "{}: unexpected error {err:?}", case.name);
    let message = err.to_string();
    for word in case.says {
        assert!(message.contains(word), "{}: `{message}` does not say `{word}`", case.name);
    }
}

/// Each kind of bad input is a clear error, never a panic: a wrong URL, a store that does not
/// answer, a data directory that cannot be written or belongs to another user, an unknown
/// namespace, a window longer than the lease.
#[tokio::test]
async fn bad_input_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"").expect("write");
    // A directory another user owns: made so when running as root, else `/` (root's).
    let me = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    let foreign = if me == 0 {
        let dir = tmp.path().join("someone-elses");
        std::fs::create_dir(&dir).expect("mkdir");
        std::os::unix::fs::chown(&dir, Some(65_534), Some(65_534)).expect("chown");
        dir
    } else {
        "/".into()
    };
    let ok = tmp.path().join("ok");
    let builder = || Minter::builder().data_dir(&ok);
    let cases = [
        Case {
            name: "a postgres url that does not parse",
            builder: builder().postgres("postgresql://localhost:notaport/idmint"),
            namespace: "default",
            is: |e| matches!(e, Error::BadUrl { .. }),
            says: &["invalid store url `postgresql://localhost:notaport/idmint`", "port"],
        },
        Case {
            name: "a postgres that does not answer",
            builder: builder().postgres("postgresql://idmint@127.0.0.1:1/idmint"),
            namespace: "default",
            is: |e| matches!(e, Error::Unreachable { .. }),
            says: &["cannot be reached", "check that it runs"],
        },
        Case {
            name: "a data directory under a file",
            builder: Minter::builder().data_dir(file.join("data")),
            namespace: "default",
            is: |e| matches!(e, Error::DataDirNotWritable { .. }),
            says: &["a-file/data is not writable"],
        },
        Case {
            name: "a data directory of another user",
            builder: Minter::builder().data_dir(&foreign),
            namespace: "default",
            is: |e| matches!(e, Error::DataDirOwned { .. }),
            says: &["is owned by user", "run as its owner"],
        },
        Case {
            name: "an unknown namespace",
            builder: builder().namespace("orders").namespace("users"),
            namespace: "invoices",
            is: |e| matches!(e, Error::UnknownNamespace { .. }),
            says: &["no namespace `invoices`; this minter has orders, users"],
        },
        Case {
            name: "an unknown layout",
            builder: builder().layout("no-such-layout"),
            namespace: "default",
            is: |e| matches!(e, Error::Engine(_) | Error::Core(_)),
            says: &["no-such-layout"],
        },
        Case {
            name: "a window longer than the lease",
            builder: builder()
                .postgres("postgresql://idmint@127.0.0.1:1/idmint")
                .window_ms(20_000)
                .lease_ttl(Duration::from_secs(10)),
            namespace: "default",
            is: |e| matches!(e, Error::Config(_)),
            says: &["longer than the lease TTL"],
        },
    ];
    for case in cases {
        check(case).await;
    }
}

/// The configuration file of `idmint serve --config` builds a minter (the keys of serving
/// are ignored); an unknown key, etcd or a missing file is a clear error.
#[tokio::test]
async fn the_configuration_file_of_idmint_serve_builds_a_minter() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let file = tmp.path().join("idmint.toml");
    std::fs::write(
        &file,
        format!(
            "listen = \"127.0.0.1:0\"\nlog = \"warn\"\ndata_dir = {data:?}\n[server]\nwindow_ms = \
             2000\n[[server.namespaces]]\nname = \"events\"\nlayout = \"uuid7\"\n"
        ),
    )
    .expect("write");
    let minter = Minter::from_config_file(&file).expect("parses").build().await.expect("builds");
    let id: Uuid7 = minter.next_as().await.expect("a uuid7");
    assert_eq!(minter.layout("events").expect("layout").id_bits(), 128);
    assert!(id.to_string().starts_with('0'), "{id}");
    minter.close().await.expect("close");
    assert!(data.join("events").is_dir(), "claims live in the file's data_dir");

    for (text, says) in [
        ("colour = \"blue\"\n", "unknown field `colour`"),
        ("etcd = [\"http://127.0.0.1:2379\"]\netcd_scheme = \"lable-org\"\n", "LableOrg"),
        ("coordinator = \"etcd\"\n", "needs `etcd = [URL]`"),
        ("coordinator = \"postgres\"\n", "needs `postgres = URL`"),
    ] {
        std::fs::write(&file, text).expect("write");
        let err = Minter::from_config_file(&file).expect_err(text);
        assert!(matches!(err, Error::ConfigFile { .. }), "{err:?}");
        assert!(err.to_string().contains(says), "`{err}` does not say `{says}`");
    }
    let err = Minter::from_config_file(tmp.path().join("missing.toml")).expect_err("missing");
    assert!(err.to_string().contains("missing.toml"), "{err}");
}

/// `next`, `next_as` (typed IDs and `u64`), `batch` and `next_in` issue increasing, unique
/// IDs; the layout decodes them, TypeID text round-trips them; after `close`, every call is
/// `Closed`.
#[tokio::test]
async fn the_async_minter_issues_typed_ids() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let minter = Minter::builder()
        .data_dir(tmp.path())
        .namespace("default")
        .namespace("events")
        .layout("uuid7")
        .build()
        .await
        .expect("build");
    let a = u64::try_from(minter.next().await.expect("next")).expect("u64");
    let b: Snowflake = minter.next_as().await.expect("a snowflake");
    let c: u64 = minter.next_as().await.expect("a u64");
    let batch = u64s(&minter.batch(10_000).await.expect("batch"));
    let all: Vec<u64> = [a, b.to_raw(), c].into_iter().chain(batch).collect();
    assert!(all.windows(2).all(|w| w[0] < w[1]), "increasing, so unique");
    assert!(minter.next_as::<Uuid7>().await.is_err(), "a snowflake is no uuid7");
    let fields = minter.layout("default").expect("layout").decode(AnyId::U64(c)).expect("decode");
    assert!(fields.iter().any(|(name, _)| name == "sequence"), "{fields:?}");
    let events = minter.batch_in("events", 100).await.expect("uuid7 batch");
    assert!(events.iter().all(|id| Uuid7::try_from(*id).is_ok()));
    assert!(events.windows(2).all(|w| w[0] < w[1]));
    // The TypeID form, through the re-exports alone.
    let prefix = idmint::TypePrefix::new("event").expect("a prefix");
    let text = idmint::typeid_text(&prefix, u128::from(events[0]));
    assert!(text.starts_with("event_"), "{text}");
    assert_eq!(idmint::parse_typeid(&text).expect("parses").1, u128::from(events[0]));
    assert_eq!(minter.generator_id("default").expect("known"), Some(0));
    minter.close().await.expect("close");
    assert!(matches!(minter.next().await, Err(Error::Closed)));
    assert!(matches!(minter.batch(2).await, Err(Error::Closed)));
}

/// Mints from `dir` with the blocking handle and returns the IDs and the generator ID.
fn mint_blocking(dir: &Path, batches: u64) -> (Vec<u64>, Option<u64>) {
    let minter = Minter::builder().data_dir(dir).build_blocking().expect("build");
    let mut ids = vec![u64::try_from(minter.next().expect("next")).expect("u64")];
    for _ in 0..batches {
        ids.extend(u64s(&minter.batch(1_000).expect("batch")));
    }
    let generator = minter.generator_id("default").expect("known");
    // Dropped without close: its claim goes with its runtime, as with a crash.
    drop(minter);
    (ids, generator)
}

/// The blocking handle issues without a runtime of the caller's; dropped without `close`, the
/// next minter on the same data directory (the same generator ID, free again) starts above
/// every ID it issued, as after kill -9; `close` then stores and releases.
#[test]
fn a_minter_dropped_without_close_is_followed_from_above() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (first, first_generator) = mint_blocking(tmp.path(), 20);
    assert_eq!(first.len(), 20_001);
    assert!(first.windows(2).all(|w| w[0] < w[1]));
    let (second, second_generator) = mint_blocking(tmp.path(), 20);
    assert_eq!(first_generator, second_generator, "the dropped claim was released");
    let last = *first.last().expect("ids");
    assert!(second[0] > last, "{} is not above {last}", second[0]);

    let minter = Minter::builder().data_dir(tmp.path()).build_blocking().expect("build");
    let third = u64::try_from(minter.next().expect("next")).expect("u64");
    assert!(third > *second.last().expect("ids"));
    minter.close().expect("close");
    assert!(matches!(minter.next(), Err(Error::Closed)));
    let all: HashSet<u64> = first.iter().chain(&second).copied().collect();
    assert_eq!(all.len(), first.len() + second.len());
}

/// An async minter dropped inside its runtime without `close`: the next one on the same data
/// directory starts above it (its own generator ID, or the same one once released).
#[tokio::test]
async fn an_async_minter_dropped_without_close_is_followed_from_above() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let minter = Minter::builder().data_dir(tmp.path()).build().await.expect("build");
    let before = u64s(&minter.batch(5_000).await.expect("batch"));
    drop(minter);
    let minter = Minter::builder().data_dir(tmp.path()).build().await.expect("build again");
    let after = u64s(&minter.batch(5_000).await.expect("batch"));
    assert!(after[0] > *before.last().expect("ids"));
    minter.close().await.expect("close");
}

/// `OnFork` is `Claim` unless asked; `Refuse` is accepted by the builder (the fork tests show
/// what each does in a child).
#[tokio::test]
async fn on_fork_refuse_changes_nothing_in_the_process_that_built_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let minter = Minter::builder()
        .data_dir(tmp.path())
        .on_fork(OnFork::Refuse)
        .build()
        .await
        .expect("build");
    assert!(minter.next().await.is_ok());
    minter.close().await.expect("close");
}

/// The blocking handle inside an async runtime (a misuse: it blocks that thread) issues
/// rather than panicking as tokio's `block_on` would, and dropping it there does not panic
/// either. Both handles are `Send + Sync`.
#[tokio::test]
async fn the_blocking_handle_inside_a_runtime_does_not_panic() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Minter>();
    send_sync::<idmint::BlockingMinter>();
    let tmp = tempfile::tempdir().expect("tempdir");
    let minter = Minter::builder().data_dir(tmp.path()).build_blocking().expect("build");
    let first = minter.next().expect("inside a runtime");
    assert!(minter.batch(5_000).expect("a batch")[0] > first);
    drop(minter);
    // Its claim is freed (or closed in the background): a new minter issues above.
    let again = Minter::builder().data_dir(tmp.path()).build().await.expect("build again");
    again.next().await.expect("next");
    again.close().await.expect("close");
}

/// A wall clock the test sets: time is an input.
struct SetClock(std::sync::atomic::AtomicU64);

impl idmint::Clock for SetClock {
    fn now_ms(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A wall clock that stands still, then steps back a second, never stalls single calls and
/// never repeats: past a millisecond's 4,096 IDs, logical time follows the monotonic clock,
/// and a step back is absorbed. Both handles, 3 ticks' worth of IDs each way. End to end: the
/// rule itself (the hot path reads only the wall clock, a call that waits reads both) is
/// `Anchor`'s property test in idmint-core, which fails without it.
#[tokio::test]
async fn a_wall_clock_standing_still_or_stepping_back_never_stalls_or_repeats() {
    use std::sync::{Arc, atomic::Ordering::Relaxed};

    let tmp = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(SetClock(std::sync::atomic::AtomicU64::new(1_800_000_000_000)));
    let minter =
        Minter::builder().data_dir(tmp.path().join("async")).clock(clock.clone()).build().await;
    let minter = minter.expect("build");
    let mut ids = Vec::new();
    for step in [0, 1_000] {
        clock.0.fetch_sub(step, Relaxed);
        for _ in 0..3 * 4_096 {
            ids.push(minter.next_as::<u64>().await.expect("never stalls"));
        }
    }
    minter.close().await.expect("close");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing, so unique");

    let blocking = Minter::builder()
        .data_dir(tmp.path().join("blocking"))
        .clock(clock.clone())
        .build_blocking()
        .expect("build");
    let mut ids = Vec::new();
    for step in [0, 1_000] {
        clock.0.fetch_sub(step, Relaxed);
        for _ in 0..3 * 4_096 {
            ids.push(blocking.next_as::<u64>().expect("never stalls"));
        }
    }
    blocking.close().expect("close");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing, so unique");
}
