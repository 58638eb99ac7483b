//! The data-directory journal of the file backends, which refuses state that is not what the
//! server last wrote: a copied or restored directory, a lost, lowered or rolled-back mark, a
//! claim with no mark, a lost, emptied or unreadable journal, and deleted or zeroed segment and
//! counter files are each refused at open, with the same verdict `idmint doctor` reports;
//! `mv` on one file system, and a crash between a value file and its journal entry, are not.
//! Each refusal has its negative control: the same damage opened with the check bypassed
//! (adopted with no margin) hands out a mark or value at or below one already used, which is
//! what the refusal prevents; and adopting each refused state starts above everything it shows.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use idmint_coord::{
    Adopt, ClaimRequest, Coordinator, CounterStore, Error, FileCoordinator, FileStore,
    GeneratorIds, SegmentStore,
};

const NS: &str = "orders";
const LAYOUT: &str = "snowflake";

fn request() -> ClaimRequest {
    ClaimRequest::new(NS, GeneratorIds::Fixed(0), LAYOUT)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

/// A coordinator directory in which generator 0 stored marks 1,000 then 2,000, and a copy of
/// its first state (after mark 1,000) in `<dir>/../backup`.
fn coordinator_dir(root: &Path) -> (PathBuf, PathBuf) {
    let dir = root.join("data");
    let backup = root.join("backup");
    runtime().block_on(async {
        let coordinator = FileCoordinator::open(&dir).expect("open");
        let claim = coordinator.claim(&request()).await.expect("claim");
        coordinator.store_mark(&claim, 1_000).await.expect("mark");
        cp_a(&dir, &backup);
        coordinator.store_mark(&claim, 2_000).await.expect("mark");
        coordinator.release(&claim).await.expect("release");
    });
    (dir, backup)
}

/// A store directory with segment `orders` at 100 then 200 and counter `launch` at 1 then 2,
/// and a copy of its first state in `<dir>/../backup`.
fn store_dir(root: &Path) -> (PathBuf, PathBuf) {
    let dir = root.join("store");
    let backup = root.join("backup");
    runtime().block_on(async {
        let store = FileStore::open(&dir).expect("open");
        assert_eq!(store.next_range(NS, 100).await.expect("range"), 1..101);
        store.next("launch", 99).await.expect("counter");
        cp_a(&dir, &backup);
        assert_eq!(store.next_range(NS, 100).await.expect("range"), 101..201);
        store.next("launch", 99).await.expect("counter");
    });
    (dir, backup)
}

/// The highest value of generator 0's mark (or the `orders` segment) that its file or the
/// journal still shows, read as raw JSON (0 where neither can be read).
fn visible(dir: &Path, store: bool) -> u64 {
    let read = |path: PathBuf| {
        fs::read(path).ok().and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    };
    let (file, field, key) = if store {
        (dir.join("segments").join(format!("{NS}.json")), "value", format!("segments/{NS}"))
    } else {
        (dir.join(NS).join("0.mark"), "mark_ms", format!("marks/{NS}/0"))
    };
    let in_file = read(file).and_then(|v| v[field].as_u64()).unwrap_or(0);
    let in_journal = read(dir.join("identity.json"))
        .and_then(|v| v["entries"][key.as_str()]["value"].as_u64())
        .unwrap_or(0);
    in_file.max(in_journal)
}

fn cp_a(from: &Path, to: &Path) {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().expect("cp -a");
    assert!(status.success(), "cp -a failed");
}

/// Rewrites a JSON file in place (same inode), as an editor or a careless script would.
fn edit(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value =
        serde_json::from_slice(&fs::read(path).expect("read")).expect("json");
    edit(&mut value);
    fs::write(path, serde_json::to_vec(&value).expect("json")).expect("write in place");
}

/// What opening a damaged directory must give.
#[derive(Debug)]
enum Expect {
    /// Refused, with a problem that contains this text; `true` when the damage lowers what
    /// the directory holds (so trusting it would hand out used marks or values), `false` when
    /// the values are intact and the danger is another copy in use.
    Refused(&'static str, bool),
    /// Refused as unreadable.
    Corrupt,
    /// Opened, and generator 0 starts above this mark (coordinator) or the next range starts
    /// above this value (store).
    Above(u64),
}

/// The one check of this file: damage a fresh directory, open it, compare; then, for a
/// refusal, the negative control: adopted with no margin (the check bypassed), the directory
/// would hand out a mark or value at or below `used`, the last one handed out.
fn check(name: &str, store: bool, damage: impl FnOnce(&Path, &Path), expect: Expect) {
    let root = tempfile::tempdir().expect("dir");
    let (dir, backup) = if store { store_dir(root.path()) } else { coordinator_dir(root.path()) };
    damage(&dir, &backup);
    let used = if store { 200 } else { 2_000 };
    let start = |adopt: Option<Adopt>| -> Result<u64, Error> {
        runtime().block_on(async {
            if store {
                let store = match adopt {
                    Some(adopt) => FileStore::open_adopting(&dir, adopt)?,
                    None => FileStore::open(&dir)?,
                };
                Ok(store.next_range(NS, 1).await?.start - 1)
            } else {
                let coordinator = match adopt {
                    Some(adopt) => FileCoordinator::open_adopting(&dir, adopt)?,
                    None => FileCoordinator::open(&dir)?,
                };
                let claim = coordinator.claim(&request()).await?;
                Ok(claim.mark_ms().unwrap_or(0))
            }
        })
    };
    // `idmint serve` and `idmint doctor` give one verdict: the directory opens exactly when
    // the report lists no problem.
    let report = if store { FileStore::inspect(&dir) } else { FileCoordinator::inspect(&dir) }
        .expect("inspect");
    let visible = visible(&dir, store);
    let opened = start(None);
    assert_eq!(
        opened.is_ok(),
        report.problems.is_empty(),
        "{name}: serve and doctor disagree: serve {opened:?}, doctor {:?}",
        report.problems
    );
    let refused = opened.is_err();
    match (expect, opened) {
        (Expect::Refused(text, lowers), Err(e @ Error::Untrusted { .. })) => {
            let message = e.to_string();
            assert!(message.contains(text), "{name}: the refusal does not say `{text}`: {message}");
            assert!(message.contains("--adopt-data-dir"), "{name}: no way forward: {message}");
            let report =
                if store { FileStore::inspect(&dir) } else { FileCoordinator::inspect(&dir) }
                    .expect("inspect");
            assert!(
                report.problems.iter().any(|p| p.contains(text)),
                "{name}: inspect does not report it: {report:?}"
            );
            // Negative control: trusted as it is, as before the journal (the value in its
            // file, a missing file as 0), the damaged directory starts at or below `used`.
            if lowers {
                let value = |file: &str, field: &str| {
                    fs::read(dir.join(file))
                        .ok()
                        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                        .and_then(|v| v[field].as_u64())
                        .unwrap_or(0)
                };
                let unprotected = if store {
                    // The counter was at 2 when the segment was at 200: scale it alike.
                    value(&format!("segments/{NS}.json"), "value")
                        .min(value("counters/launch.json", "value") * 100)
                } else {
                    value(&format!("{NS}/0.mark"), "mark_ms")
                };
                assert!(
                    unprotected < used,
                    "{name}: the negative control starts above {unprotected}, not below {used}: the damage did not matter"
                );
            }
        }
        (Expect::Corrupt, Err(Error::Corrupt { .. } | Error::Untrusted { .. })) => {}
        (Expect::Above(floor), Ok(start_at)) => {
            assert!(start_at >= floor, "{name}: starts above {start_at}, below {floor}");
        }
        (expect, got) => panic!("{name}: expected {expect:?}, got {got:?}"),
    }
    if refused {
        // `--adopt-data-dir` recovers every state it is offered: above the highest value any
        // file or the journal shows, plus the margin (the store's own margins: 10^12 for a
        // segment).
        let margin = 7;
        let adopted = start(Some(Adopt { now_ms: 0, margin_ms: margin }))
            .unwrap_or_else(|e| panic!("{name}: adopting failed: {e}"));
        let floor = if store { visible + 1_000_000_000_000 } else { visible + margin };
        assert!(adopted >= floor, "{name}: adopted, starts above {adopted}, below {floor}");
    }
}

#[test]
fn the_coordinator_refuses_what_it_did_not_write() {
    let mark = |dir: &Path| dir.join(NS).join("0.mark");
    check("untouched", false, |_, _| {}, Expect::Above(2_000));
    check(
        "mark deleted, claim kept",
        false,
        |dir, _| fs::remove_file(mark(dir)).expect("rm"),
        Expect::Refused("the mark file is missing", true),
    );
    check(
        "mark lowered in place",
        false,
        |dir, _| edit(&mark(dir), |v| v["mark_ms"] = 500.into()),
        Expect::Refused("went down", true),
    );
    check(
        "an older mark file restored",
        false,
        |dir, backup| fs::copy(mark(backup), mark(dir)).map(drop).expect("cp"),
        Expect::Refused("rolled back", true),
    );
    check(
        "the journal deleted",
        false,
        |dir, _| fs::remove_file(dir.join("identity.json")).expect("rm"),
        Expect::Refused("no identity.json", false),
    );
    check(
        "an older journal restored",
        false,
        |dir, backup| {
            fs::copy(backup.join("identity.json"), dir.join("identity.json")).expect("cp");
        },
        Expect::Refused("not the file idmint wrote", false),
    );
    check(
        "the directory copied (cp -a) and the copy used",
        false,
        |dir, _| {
            let copy = dir.with_extension("copy");
            cp_a(dir, &copy);
            fs::remove_dir_all(dir).expect("rm");
            // Renaming keeps the copy's own (new) inode.
            fs::rename(&copy, dir).expect("mv");
        },
        Expect::Refused("copied or restored", false),
    );
    check(
        "an older copy restored in its place",
        false,
        |dir, backup| {
            fs::remove_dir_all(dir).expect("rm");
            fs::rename(backup, dir).expect("mv");
        },
        Expect::Refused("copied or restored", true),
    );
    check(
        "a claim whose mark and journal entry were lost",
        false,
        |dir, _| {
            fs::remove_file(mark(dir)).expect("rm");
            edit(&dir.join("identity.json"), |v| {
                v["entries"].as_object_mut().expect("entries").clear();
            });
        },
        // The journal edited in place is caught by its inode only if replaced; here the
        // claim's lock names a holder and nothing records it.
        Expect::Refused("a claim was made", true),
    );
    check(
        "a mark written ahead of the journal (a crash between the two writes)",
        false,
        |dir, _| {
            edit(&mark(dir), |v| {
                v["mark_ms"] = 3_000.into();
                v["generation"] = 99.into();
            });
        },
        Expect::Above(3_000),
    );
    check(
        "the directory moved with mv on one file system",
        false,
        |dir, _| {
            let moved = dir.with_extension("moved");
            fs::rename(dir, &moved).expect("mv");
            fs::rename(&moved, dir).expect("mv back");
        },
        Expect::Above(2_000),
    );
    for (blank, content) in [("emptied", ""), ("replaced by {}", "{}"), ("not JSON", "{\"form")] {
        check(
            &format!("the journal {blank}"),
            false,
            |dir, _| fs::write(dir.join("identity.json"), content).expect("blank"),
            Expect::Refused("cannot be read as the journal", false),
        );
    }
    check(
        "the journal emptied and the mark lowered",
        false,
        |dir, _| {
            fs::write(dir.join("identity.json"), "").expect("blank");
            edit(&mark(dir), |v| v["mark_ms"] = 500.into());
        },
        Expect::Refused("cannot be read as the journal", true),
    );
    check(
        "a copy (cp -a) with its journal emptied",
        false,
        |dir, _| {
            let copy = dir.with_extension("copy");
            cp_a(dir, &copy);
            fs::remove_dir_all(dir).expect("rm");
            fs::rename(&copy, dir).expect("mv");
            fs::write(dir.join("identity.json"), "").expect("blank");
        },
        Expect::Refused("cannot be read as the journal", false),
    );
    check(
        "a mark file that is not JSON",
        false,
        |dir, _| fs::write(mark(dir), "").expect("truncate"),
        Expect::Corrupt,
    );
}

#[test]
fn the_store_refuses_deleted_zeroed_and_rolled_back_values() {
    let segment = |dir: &Path| dir.join("segments").join(format!("{NS}.json"));
    check("untouched", true, |_, _| {}, Expect::Above(200));
    check(
        "segment file deleted",
        true,
        |dir, _| fs::remove_file(segment(dir)).expect("rm"),
        Expect::Refused("file is missing", true),
    );
    check(
        "segment value zeroed in place",
        true,
        |dir, _| edit(&segment(dir), |v| v["value"] = 0.into()),
        Expect::Refused("went down", true),
    );
    check(
        "segment file emptied",
        true,
        |dir, _| fs::write(segment(dir), "").expect("truncate"),
        Expect::Corrupt,
    );
    check(
        "an older segment file restored",
        true,
        |dir, backup| fs::copy(segment(backup), segment(dir)).map(drop).expect("cp"),
        Expect::Refused("rolled back", true),
    );
    check(
        "counter file deleted",
        true,
        |dir, _| fs::remove_file(dir.join("counters/launch.json")).expect("rm"),
        Expect::Refused("file is missing", true),
    );
    check(
        "the journal emptied and the segment lowered",
        true,
        |dir, _| {
            fs::write(dir.join("identity.json"), "").expect("blank");
            edit(&segment(dir), |v| v["value"] = 0.into());
        },
        Expect::Refused("cannot be read as the journal", true),
    );
    check(
        "the journal replaced by {}",
        true,
        |dir, _| fs::write(dir.join("identity.json"), "{}").expect("blank"),
        Expect::Refused("cannot be read as the journal", false),
    );
    check(
        "the store copied",
        true,
        |dir, _| {
            let copy = dir.with_extension("copy");
            cp_a(dir, &copy);
            fs::remove_dir_all(dir).expect("rm");
            fs::rename(&copy, dir).expect("mv");
        },
        Expect::Refused("copied or restored", false),
    );
}

/// A journal that exists but is blank is not a fresh directory, even with no value files:
/// idmint never leaves one (it writes its journal whole and renames it into place).
#[test]
fn a_blank_journal_in_an_empty_directory_is_refused_too() {
    for store in [false, true] {
        let root = tempfile::tempdir().expect("dir");
        let dir = root.path().join("blank");
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join("identity.json"), "").expect("blank");
        let opened =
            if store { FileStore::open(&dir).err() } else { FileCoordinator::open(&dir).err() };
        assert!(matches!(opened, Some(Error::Untrusted { .. })), "store {store}: {opened:?}");
        let report = if store { FileStore::inspect(&dir) } else { FileCoordinator::inspect(&dir) }
            .expect("inspect");
        assert!(!report.problems.is_empty(), "doctor calls it ok");
    }
}

/// Adopting: a copied coordinator directory starts above the clock plus the margin; a copied
/// store jumps by 10^12; after adoption the directory is trusted again.
#[test]
fn an_adopted_directory_starts_above_the_clock_plus_the_margin_and_is_trusted_again() {
    let root = tempfile::tempdir().expect("dir");
    let (dir, backup) = coordinator_dir(root.path());
    let adopt = Adopt { now_ms: 1_000_000, margin_ms: 600_000 };
    runtime().block_on(async {
        let coordinator = FileCoordinator::open_adopting(&backup, adopt).expect("adopt");
        let claim = coordinator.claim(&request()).await.expect("claim");
        assert_eq!(claim.mark_ms(), Some(1_600_000));
        coordinator.store_mark(&claim, 1_600_500).await.expect("mark");
        coordinator.release(&claim).await.expect("release");
        // Trusted again, with a new instance.
        let again = FileCoordinator::open(&backup).expect("trusted after adoption");
        assert_eq!(again.claim(&request()).await.expect("claim").mark_ms(), Some(1_600_500));
    });
    let original = FileCoordinator::inspect(&dir).expect("inspect");
    let adopted = FileCoordinator::inspect(&backup).expect("inspect");
    assert!(original.problems.is_empty() && adopted.problems.is_empty());
    assert_ne!(original.instance, adopted.instance, "an adopted copy gets a new instance");

    // A deleted mark adopted: the old journal still knows it, so claims start above it even
    // with no margin on a clock that reads 0.
    let root = tempfile::tempdir().expect("dir");
    let (dir, _) = coordinator_dir(root.path());
    fs::remove_file(dir.join(NS).join("0.mark")).expect("rm");
    runtime().block_on(async {
        let adopt = Adopt { now_ms: 0, margin_ms: 0 };
        let coordinator = FileCoordinator::open_adopting(&dir, adopt).expect("adopt");
        assert_eq!(coordinator.claim(&request()).await.expect("claim").mark_ms(), Some(2_000));
    });
    assert!(FileCoordinator::inspect(&dir).expect("inspect").problems.is_empty());

    let root = tempfile::tempdir().expect("dir");
    let (_, backup) = store_dir(root.path());
    runtime().block_on(async {
        let store = FileStore::open_adopting(&backup, Adopt::default()).expect("adopt");
        let range = store.next_range(NS, 10).await.expect("range");
        assert_eq!(range.start, 101 + 1_000_000_000_000);
        assert_eq!(store.next("launch", 2_000).await.expect("counter"), 1 + 1_000 + 1);
    });
}

/// A value file deleted or lowered under a running store or coordinator is refused at its next
/// write (RELIABILITY.md, "What idmint detects"), not recreated: the write fails, and so does
/// every later one, until an operator acts.
#[test]
fn a_value_file_changed_under_a_running_server_is_refused_at_its_next_write() {
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("store");
    let segment = dir.join("segments").join(format!("{NS}.json"));
    runtime().block_on(async {
        let store = FileStore::open(&dir).expect("open");
        store.next_range(NS, 100).await.expect("range");
        fs::remove_file(&segment).expect("rm");
        for attempt in 0..2 {
            let next = store.next_range(NS, 100).await;
            assert!(matches!(next, Err(Error::Untrusted { .. })), "attempt {attempt}: {next:?}");
        }
        assert!(!segment.exists(), "the deleted segment file was recreated");
    });
    let root = tempfile::tempdir().expect("dir");
    let dir = root.path().join("data");
    runtime().block_on(async {
        let coordinator = FileCoordinator::open(&dir).expect("open");
        let claim = coordinator.claim(&request()).await.expect("claim");
        coordinator.store_mark(&claim, 1_000).await.expect("mark");
        let mark = dir.join(NS).join("0.mark");
        fs::remove_file(&mark).expect("rm");
        let next = coordinator.store_mark(&claim, 2_000).await;
        assert!(matches!(next, Err(Error::Untrusted { .. })), "{next:?}");
        assert!(!mark.exists(), "the deleted mark file was recreated");
    });
}
