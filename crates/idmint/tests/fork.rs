//! A forked child never issues from its parent's claim: with `OnFork::Claim` it claims a
//! generator ID of its own, with `OnFork::Refuse` it gets `Error::Forked`. One test in its own
//! binary, so that no other test's thread is running when it forks.

use std::{collections::HashSet, io::Write, path::Path};

use idmint::{BlockingMinter, Error, Minter, OnFork};

/// `fork(2)`: runs `child` in the child, which then ends with `_exit` and its result as the
/// exit code (101 after a panic); returns the child's pid in the parent.
#[expect(unsafe_code, reason = "fork(2), waitpid(2) and _exit(2) have no safe wrapper")]
fn fork(child: impl FnOnce() -> i32) -> libc::pid_t {
    // SAFETY: the child runs only `child` (which makes a fresh runtime and engine and touches
    // nothing the parent's other threads may have held locked at the fork, bar the allocator,
    // which glibc makes safe across fork) and ends with `_exit`, never returning into the test
    // harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(101);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    pid
}

/// `waitpid(2)`: the child's exit code.
#[expect(unsafe_code, reason = "waitpid(2) has no safe wrapper for a forked child")]
fn wait(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int; `pid` is a child of this process.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    assert_eq!(waited, pid, "waitpid");
    assert!(libc::WIFEXITED(status), "the child did not exit: status {status}");
    libc::WEXITSTATUS(status)
}

fn u64s(ids: Vec<idmint::AnyId>) -> Vec<u64> {
    ids.into_iter().map(|id| u64::try_from(id).expect("a 64-bit id")).collect()
}

/// In a child: mints 20 batches of 1,000 with the parent's blocking minter, and writes its
/// generator ID and IDs to `out`.
fn child_mints(minter: &BlockingMinter, out: &Path) -> i32 {
    let mut words = Vec::new();
    for _ in 0..20 {
        words.extend(u64s(minter.batch(1_000).expect("batch in the child")));
    }
    let generator = minter.generator_id("default").expect("known").expect("a generator id");
    let mut bytes = generator.to_le_bytes().to_vec();
    for id in words {
        bytes.extend_from_slice(&id.to_le_bytes());
    }
    std::fs::File::create(out).and_then(|mut f| f.write_all(&bytes)).expect("write");
    minter.close().expect("close in the child");
    0
}

/// A parent mints, forks 8 children that each mint with the same blocking minter (each
/// claims its own generator ID), and keeps minting while they run: no duplicate, and no child
/// holds the parent's generator ID. Then, built with `OnFork::Refuse`, a child's call is
/// `Error::Forked` and the parent goes on.
#[test]
fn a_forked_child_claims_its_own_generator_id_or_refuses() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let minter = Minter::builder().data_dir(&dir).build_blocking().expect("build");
    let mut parent_ids = u64s(minter.batch(1_000).expect("batch"));
    let parent_generator = minter.generator_id("default").expect("known").expect("an id");

    let outs: Vec<_> = (0..8).map(|i| tmp.path().join(format!("child-{i}"))).collect();
    let pids: Vec<_> = outs.iter().map(|out| fork(|| child_mints(&minter, out))).collect();
    for _ in 0..50 {
        parent_ids.extend(u64s(minter.batch(1_000).expect("the parent keeps minting")));
    }
    for pid in pids {
        assert_eq!(wait(pid), 0, "a child failed");
    }
    parent_ids.extend(u64s(minter.batch(1_000).expect("the parent mints after its children")));
    assert_eq!(minter.generator_id("default").expect("known"), Some(parent_generator));
    minter.close().expect("close");

    let mut all: HashSet<u64> = parent_ids.iter().copied().collect();
    assert_eq!(all.len(), parent_ids.len());
    let mut generators = HashSet::from([parent_generator]);
    for out in &outs {
        let bytes = std::fs::read(out).expect("the child's output");
        let mut words = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8")));
        let generator = words.next().expect("the generator id");
        assert_ne!(generator, parent_generator, "a child holds its parent's generator id");
        // Two children may hold one generator ID one after the other (the second claims it
        // once the first closed, and starts above its mark): the IDs below say no duplicate.
        generators.insert(generator);
        let ids: Vec<u64> = words.collect();
        assert_eq!(ids.len(), 20_000);
        for id in ids {
            assert!(all.insert(id), "duplicate id {id}");
        }
    }
    assert_eq!(all.len(), parent_ids.len() + 8 * 20_000);
    assert!(generators.len() >= 2, "the children claimed: {generators:?}");

    // OnFork::Refuse: the child's calls are refused, the parent's are not.
    let minter =
        Minter::builder().data_dir(&dir).on_fork(OnFork::Refuse).build_blocking().expect("build");
    let before = minter.next().expect("next");
    let pid = fork(|| match minter.next() {
        Err(Error::Forked { parent, child }) if parent != child && child == std::process::id() => {
            i32::from(minter.batch(10).is_ok())
        }
        _ => 2,
    });
    assert_eq!(wait(pid), 0, "the child was not refused");
    assert!(minter.next().expect("the parent goes on") > before);
    minter.close().expect("close");
}
