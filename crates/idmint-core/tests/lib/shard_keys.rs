//! HotGuid shard keys per call: 1,000,000 IDs over 1,000 keys from 4 threads sharing one
//! generator, checked by one checker (duplicates, duplicates with the key left out, the key
//! `ExtractShardKey` reads back, and each thread's order), and two mutated generators that
//! checker must catch: one sequence per key, and one sequence per key with the key cut to 8
//! bits.

use std::{
    collections::{HashMap, HashSet},
    sync::Mutex,
};

use idmint_core::{AnyId, GeneratorConfig, HotGuid, HotGuidGenerator, Layout, Next};

/// 2022-02-06T00:00:00Z.
const T0: u64 = 1_644_105_600_000;
const PROCESS: [u8; 5] = [0x1e, 0x98, 0xe9, 0x12, 0x34];
/// The shard key's bits in a HotGuid's `u128` (its last 4 bytes).
const SHARD_BITS: u128 = 0xFFFF_FFFF;

/// What the checker found in the IDs of one run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Report {
    ids: usize,
    /// IDs equal to an earlier one.
    duplicates: usize,
    /// IDs equal to an earlier one once both have their shard-key bytes zeroed: uniqueness
    /// that would depend on the key.
    keyless_duplicates: usize,
    /// IDs whose `shard_key()` (HotGuid's `ExtractShardKey`) is not the key asked for.
    wrong_keys: usize,
    /// IDs not above the one the same thread got before (one generator's order).
    order_breaks: usize,
}

/// Checks runs of (key asked for, ID) pairs, one run per thread in the order it got them.
fn check(runs: &[Vec<(u32, HotGuid)>]) -> Report {
    let mut report = Report::default();
    let mut seen = HashSet::new();
    let mut keyless = HashSet::new();
    for run in runs {
        for (i, &(key, guid)) in run.iter().enumerate() {
            report.ids += 1;
            report.duplicates += usize::from(!seen.insert(guid));
            report.keyless_duplicates += usize::from(!keyless.insert(guid.as_u128() & !SHARD_BITS));
            report.wrong_keys += usize::from(guid.shard_key() != key);
            report.order_breaks += usize::from(i > 0 && guid <= run[i - 1].1);
        }
    }
    report
}

/// What mints: `n` IDs at `now_ms` with `key`, or the time to wait until.
type Mint<'a> = dyn Fn(u64, u64, u32) -> Result<Vec<HotGuid>, u64> + Sync + 'a;

/// `threads` threads mint `per_thread` IDs each, in batches of 1 to 16, cycling over `keys`
/// keys from different starting points, while the time they pass moves 1 ms per 64 batches.
fn mint(threads: u32, keys: u32, per_thread: usize, mint: &Mint<'_>) -> Vec<Vec<(u32, HotGuid)>> {
    let runs = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let runs = &runs;
            scope.spawn(move || {
                let mut run = Vec::with_capacity(per_thread);
                let mut now = T0;
                let mut call: u32 = 0;
                while run.len() < per_thread {
                    let key = (thread * 250 + call * 7) % keys;
                    let want = u64::from(1 + call % 16).min((per_thread - run.len()) as u64);
                    match mint(now, want, key) {
                        Ok(ids) => run.extend(ids.into_iter().map(|id| (key, id))),
                        Err(until_ms) => now = until_ms,
                    }
                    call += 1;
                    if call.is_multiple_of(64) {
                        now += 1;
                    }
                }
                runs.lock().expect("not poisoned").push(run);
            });
        }
    });
    runs.into_inner().expect("not poisoned")
}

/// The HotGuids of a batch of `AnyId`s.
fn guids(ids: impl Iterator<Item = AnyId>) -> Vec<HotGuid> {
    ids.map(|id| HotGuid::try_from(id).expect("a 128-bit id")).collect()
}

/// The mutated generator: one sequence per key, each its own generator with the same process
/// bytes, writing `key & mask` into its IDs; 100,000 IDs over 1,000 keys from 4 threads.
fn mint_per_key(mask: u32) -> Vec<Vec<(u32, HotGuid)>> {
    let per_key: Mutex<HashMap<u32, HotGuidGenerator>> = Mutex::new(HashMap::new());
    mint(4, 1_000, 25_000, &|now, n, key| {
        let mut per_key = per_key.lock().expect("not poisoned");
        let generator = per_key.entry(key).or_insert_with(|| {
            HotGuid::generator(PROCESS, key & mask, &GeneratorConfig::default()).expect("generator")
        });
        match generator.next_batch(now, n).expect("no error") {
            Next::Ready(batch) => Ok(batch.collect()),
            Next::Wait { until_ms } => Err(until_ms),
        }
    })
}

/// 1,000,000 IDs over 1,000 keys from 4 threads, through `AnyGenerator` as the server
/// issues them: no duplicate, none even with the key left out, every key read back, and each
/// thread's IDs increasing.
#[test]
fn a_million_ids_over_a_thousand_keys_from_four_threads() {
    let layout = Layout::builtin("hot-guid").expect("built in");
    assert!(layout.takes_shard_key());
    let generator = layout
        .generator_for(0x001e_98e9_1234, &[], &GeneratorConfig::default())
        .expect("generator");
    let runs = mint(4, 1_000, 250_000, &|now, n, key| match generator
        .next_batch_with_shard_key(now, n, key)
        .expect("no error")
    {
        Next::Ready(batch) => Ok(guids(batch)),
        Next::Wait { until_ms } => Err(until_ms),
    });
    let keys: HashSet<u32> = runs.iter().flatten().map(|&(key, _)| key).collect();
    assert_eq!(keys.len(), 1_000);
    assert_eq!(
        check(&runs),
        Report {
            ids: 1_000_000,
            duplicates: 0,
            keyless_duplicates: 0,
            wrong_keys: 0,
            order_breaks: 0
        }
    );
}

/// Mutation: one sequence per key (each key its own generator with the same process bytes),
/// the design the shared sequence avoids. Its IDs are still distinct, but only through the
/// key: with the key left out they collide, and the threads' order breaks. The checker
/// must see both.
#[test]
fn checker_catches_a_sequence_per_key() {
    let runs = mint_per_key(u32::MAX);
    let report = check(&runs);
    assert_eq!((report.ids, report.duplicates, report.wrong_keys), (100_000, 0, 0), "{report:?}");
    assert!(report.keyless_duplicates > 50_000, "{report:?}");
    assert!(report.order_breaks > 1_000, "{report:?}");
}

/// Mutation: one sequence per key, and the key cut to its low 8 bits on the way into the ID
/// (keys 0 and 256 alias). Now IDs of different keys collide, and `ExtractShardKey` reads
/// other keys back. The checker must see both.
#[test]
fn checker_catches_collisions_of_aliased_keys() {
    let runs = mint_per_key(0xFF);
    let report = check(&runs);
    assert!(report.duplicates > 10_000, "{report:?}");
    assert!(report.wrong_keys > 50_000, "{report:?}");
}

/// The per-call key and the generator's own share one sequence and one order, in
/// `next_with_shard_key` as in the batch call; the generator's own key is unchanged after.
#[test]
fn per_call_keys_and_the_generators_own_share_one_sequence() {
    let generator = HotGuid::generator(PROCESS, 208, &GeneratorConfig::default()).expect("valid");
    let steps: [(Option<u32>, u32); 5] =
        [(None, 208), (Some(0), 0), (Some(u32::MAX), u32::MAX), (None, 208), (Some(208), 208)];
    let mut last: Option<HotGuid> = None;
    for (i, (key, want)) in steps.into_iter().enumerate() {
        let next = match key {
            Some(key) => generator.next_with_shard_key(T0, key),
            None => generator.next(T0),
        };
        let Ok(Next::Ready(guid)) = next else { panic!("step {i}: {next:?}") };
        let parts = guid.into_parts();
        assert_eq!((parts.shard_key, parts.counter, parts.process), (want, i as u32, PROCESS));
        assert!(last.is_none_or(|last| guid > last), "step {i}");
        last = Some(guid);
    }
}

/// Layouts without a shard key refuse one, with the reason.
#[test]
fn layouts_without_a_shard_key_refuse_one() {
    for name in ["snowflake", "icicle", "uuid7", "trace-id"] {
        let layout = Layout::builtin(name).expect("built in");
        assert!(!layout.takes_shard_key(), "{name}");
        let generator = layout.generator(&[], &GeneratorConfig::default()).expect("generator");
        let err = generator.next_batch_with_shard_key(T0, 1, 7).expect_err(name);
        assert!(err.to_string().contains("carry no shard key"), "{name}: {err}");
    }
}
