//! Upstream behaviour, from the upstream projects' own tests and documentation: elfo's chunked
//! TraceId generator and validator, LableOrg's generator (without its duplicates on a clock
//! step back), go-flakeid's rate and ranges, DecimalId's counter exhaustion, and Sonyflake v2's
//! settings.

use std::collections::HashSet;

use idmint_core::{
    AnyId, ChunkRegistry, ChunkedTraceIdGenerator, DecimalId, DecimalIdGenerator, Error, Flake,
    FlakeParts, GeneratorConfig, Lable, LableMode, Layout, Next, SonyflakeV2, TraceId,
    TraceIdValidator,
};

use crate::common::num;

const SECOND: u64 = 1 << 38;

/// elfo's generator test: node 0, mock time from 0 in steps of 500 ms. The cached second is
/// refreshed only once at least 1 s has passed since the last refresh, and the counter is not
/// reset when the second changes.
#[test]
fn elfo_chunked_generator() {
    check_chunked(&[
        (0, 1),
        (500, 2),
        (1_000, SECOND + 3),
        (1_500, SECOND + 4),
        (2_000, 2 * SECOND + 5),
    ]);
    // The refresh is measured from the last refresh, not from the second's boundary.
    check_chunked(&[(900, 1), (1_100, 2), (1_899, 3), (1_900, SECOND + 4), (2_899, SECOND + 5)]);
    // A clock that steps back keeps the cached second.
    check_chunked(&[(5_000, 5 * SECOND + 1), (1_000, 5 * SECOND + 2), (6_000, 6 * SECOND + 3)]);
}

/// Runs a fresh generator on a fresh registry through (clock reading, expected raw ID) steps.
#[track_caller]
fn check_chunked(steps: &[(u64, u64)]) {
    let registry = ChunkRegistry::new();
    let mut generator = ChunkedTraceIdGenerator::new(0).expect("node 0");
    for &(now_ms, want) in steps {
        assert_eq!(generator.next(&registry, now_ms).to_raw(), want, "at {now_ms} ms");
    }
}

/// Chunks: a second generator on the same registry takes another chunk, and a generator takes
/// a new chunk after 1,023 IDs; chunk numbers wrap mod 4096.
#[test]
fn elfo_chunks() {
    let registry = ChunkRegistry::new();
    let mut a = ChunkedTraceIdGenerator::new(7).expect("node 7");
    let mut b = ChunkedTraceIdGenerator::new(7).expect("node 7");
    let first_a = a.next(&registry, 0).into_parts();
    let first_b = b.next(&registry, 0).into_parts();
    assert_eq!((first_a.chunk_no, first_a.counter, first_a.node_no), (0, 1, 7));
    assert_eq!((first_b.chunk_no, first_b.counter), (1, 1));
    let mut ids: Vec<TraceId> = vec![TraceId::from_parts(first_a).expect("valid")];
    ids.extend((1..1023).map(|_| a.next(&registry, 0)));
    assert!(ids.iter().all(|id| id.into_parts().chunk_no == 0));
    let counters: Vec<u64> = ids.iter().map(|id| id.into_parts().counter).collect();
    assert_eq!(counters, (1..=1023).collect::<Vec<_>>());
    let moved = a.next(&registry, 0).into_parts();
    assert_eq!((moved.chunk_no, moved.counter), (2, 1));
    // 4,096 chunks later the numbers come round again (elfo's documented limit).
    let registry = ChunkRegistry::new();
    let chunks: Vec<u64> = (0..4097)
        .map(|_| {
            let mut generator = ChunkedTraceIdGenerator::new(1).expect("node 1");
            generator.next(&registry, 0).into_parts().chunk_no
        })
        .collect();
    assert_eq!((chunks[0], chunks[4095], chunks[4096]), (0, 4095, 0));
    assert!(ChunkedTraceIdGenerator::new(65_536).is_err());
}

/// elfo's `TraceIdValidator` cases: zero, the highest bit, the time window around now (with
/// its wrap-around at 2^25 s), and its exact messages.
#[test]
fn elfo_validator() {
    let strict = TraceIdValidator::default().max_time_difference_secs(5);
    let lax = TraceIdValidator::default();
    let ts = |secs: u64| secs << 38 | 1;
    let end = 1u64 << 25;
    let ok = |raw: u64| Ok(raw);
    check_validator(lax, 0, 0, Err(Error::Zero));
    check_validator(lax, 1 << 63, 0, Err(Error::HighestBitSet));
    check_validator(lax, u64::MAX, 0, Err(Error::HighestBitSet));
    check_validator(lax, 1, 0, ok(1));
    check_validator(lax, ts(1_000), 0, ok(ts(1_000)));
    check_validator(strict, 0, 10_000, Err(Error::Zero));
    check_validator(strict, 1 << 63 | ts(10), 10_000, Err(Error::HighestBitSet));
    // Now is 10 s: 5..=15 s pass, 4 and 16 do not.
    check_validator(strict, ts(5), 10_000, ok(ts(5)));
    check_validator(strict, ts(15), 10_999, ok(ts(15)));
    check_validator(strict, ts(4), 10_000, Err(Error::InvalidTimestamp));
    check_validator(strict, ts(16), 10_000, Err(Error::InvalidTimestamp));
    // Around the wrap: now 0 accepts 2^25 − 5, now 2^25 − 2 s accepts 3.
    check_validator(strict, ts(end - 5), 0, ok(ts(end - 5)));
    check_validator(strict, ts(end - 6), 0, Err(Error::InvalidTimestamp));
    check_validator(strict, ts(3), (end - 2) * 1000, ok(ts(3)));
    check_validator(strict, ts(4), (end - 2) * 1000, Err(Error::InvalidTimestamp));
    // The seconds are Unix seconds mod 2^25: a year later the same field is "now" again.
    check_validator(strict, ts(7), (end + 7) * 1000, ok(ts(7)));
    assert_eq!(Error::Zero.to_string(), "cannot be zero");
    assert_eq!(Error::HighestBitSet.to_string(), "highest bit must be zero");
    assert_eq!(Error::InvalidTimestamp.to_string(), "invalid timestamp");
}

#[track_caller]
fn check_validator(validator: TraceIdValidator, raw: u64, now_ms: u64, want: Result<u64, Error>) {
    let got = validator.validate(raw, now_ms).map(TraceId::to_raw);
    assert_eq!(got, want, "{raw:#x} at {now_ms} ms");
}

/// LableOrg with a fixed time: exactly 64 IDs, then a wait for the next millisecond.
#[test]
fn lable_fixed_time() {
    for mode in [LableMode::Spread, LableMode::TimeSequential] {
        let generator = Lable::generator(22, 15, mode, &GeneratorConfig::default()).expect("built");
        let now = 1_700_000_000_123;
        let mut ids = HashSet::new();
        while let Next::Ready(id) = generator.next(now).expect("no error") {
            let parts = id.into_parts();
            assert_eq!((parts.timestamp, parts.generator_id, parts.cluster_id), (now, 22, 15));
            assert_eq!(parts.mode, mode);
            assert!(ids.insert(id), "{id:?} twice");
            assert!(ids.len() <= 64, "more than 64 IDs in one ms");
        }
        assert_eq!(ids.len(), 64, "{mode}");
        assert_eq!(generator.next(now), Ok(Next::Wait { until_ms: now + 1 }), "{mode}");
    }
}

/// LableOrg's clock-backwards vector: readings 10, 10, 9, 10, 10 ms, generator 22, cluster 15,
/// TIME_SEQUENTIAL. Upstream gave `0x280116f, 0x281116f, 0x240116f, 0x280116f, 0x281116f`: its
/// last two repeat its first two. Ours agree on the first two and are five distinct,
/// increasing IDs.
#[test]
fn lable_clock_backwards() {
    let upstream: [u64; 5] = [0x280_116f, 0x281_116f, 0x240_116f, 0x280_116f, 0x281_116f];
    let generator =
        Lable::generator(22, 15, LableMode::TimeSequential, &GeneratorConfig::default())
            .expect("built");
    let ours: Vec<u64> = [10, 10, 9, 10, 10]
        .into_iter()
        .map(|now| generator.next(now).expect("no error").ready().expect("ready").to_raw())
        .collect();
    assert_eq!(ours[..2], upstream[..2], "the first two IDs are LableOrg's");
    assert_ne!(ours[2], upstream[2]);
    assert!(ours.windows(2).all(|w| w[0] < w[1]), "{ours:x?}");
    assert_eq!(upstream.iter().collect::<HashSet<_>>().len(), 3, "upstream repeats two IDs");
    // Every ID is still in millisecond 10: the step back was absorbed.
    for raw in ours {
        assert_eq!(Lable::from_raw(raw).expect("any value").into_parts().timestamp, 10);
    }
}

/// go-flakeid: 4,096 IDs per ms, then a wait (upstream spins with sleeps); a datacenter of 33
/// is refused (upstream masks it to 1) by the generator, the typed API and `Layout::encode`.
#[test]
fn flake_rate_and_ranges() {
    let now = Flake::EPOCH_2000_MS + 590_836_890_763;
    let generator =
        Flake::generator(7, 7, Flake::EPOCH_2000_MS, &GeneratorConfig::default()).expect("built");
    let mut count = 0;
    let mut last = None;
    while let Next::Ready(id) = generator.next(now).expect("no error") {
        assert!(last < Some(id));
        assert_eq!(id.timestamp_ms(Flake::EPOCH_2000_MS), now);
        last = Some(id);
        count += 1;
        assert!(count <= 4096, "more than 4,096 IDs in one ms");
    }
    assert_eq!(count, 4096);
    assert_eq!(last.map(|id| id.into_parts().counter), Some(4095));
    assert_eq!(generator.next(now), Ok(Next::Wait { until_ms: now + 1 }));

    let refused =
        |field: &str, value| Error::FieldOutOfRange { field: field.into(), value, min: 0, max: 31 };
    let config = GeneratorConfig::default();
    assert_eq!(Flake::generator(33, 0, 0, &config).err(), Some(refused("datacenter", 33)));
    assert_eq!(Flake::generator(0, 32, 0, &config).err(), Some(refused("worker", 32)));
    let parts = FlakeParts { timestamp: 0, datacenter: 33, worker: 0, counter: 0 };
    assert_eq!(Flake::from_parts(parts), Err(refused("datacenter", 33)));
    let layout = Layout::builtin("flake").expect("built in");
    let fields = [num("timestamp", 0), num("datacenter", 33), num("worker", 0), num("counter", 0)];
    assert_eq!(layout.encode(&fields), Err(refused("datacenter", 33)));
    let node = [num("datacenter", 33)];
    assert_eq!(layout.generator(&node, &config).err(), Some(refused("datacenter", 33)));
}

/// DecimalId: with a small `max_counter` the generator issues exactly that many IDs, counting
/// up from 1, then `CounterExhausted` for every later call and batch; never a repeat.
#[test]
fn decimal_id_exhaustion() {
    for (max, batch) in [(1, 1), (5, 2), (1000, 7), (1000, 1000), (1000, 5000)] {
        let generator = DecimalIdGenerator::new(92, 65).and_then(|g| g.with_max_counter(max));
        let generator = generator.expect("in range");
        let mut ids = Vec::new();
        loop {
            let taken: Result<Vec<DecimalId>, Error> = if ids.len() % 2 == 0 {
                generator.next_batch(batch).map(Iterator::collect)
            } else {
                generator.next().map(|id| vec![id])
            };
            match taken {
                Ok(taken) => ids.extend(taken),
                Err(e) => {
                    assert_eq!(
                        e,
                        Error::CounterExhausted { what: "decimal-id counter", capacity: max }
                    );
                    break;
                }
            }
            assert!(ids.len() as u64 <= max, "more than {max} IDs");
        }
        assert_eq!(ids.len() as u64, max);
        let counters: Vec<u64> = ids.iter().map(|id| id.into_parts().counter).collect();
        assert_eq!(counters, (1..=max).collect::<Vec<_>>());
        assert!(
            ids.iter()
                .all(|id| (id.into_parts().generator_id, id.into_parts().launch_id) == (92, 65))
        );
        assert_eq!(generator.remaining(), 0);
        for _ in 0..3 {
            assert!(matches!(generator.next(), Err(Error::CounterExhausted { .. })));
            assert!(matches!(generator.next_batch(1), Err(Error::CounterExhausted { .. })));
        }
        assert_eq!(generator.remaining(), 0, "refusals do not move the counter");
    }
    let generator = DecimalIdGenerator::new(0, 0).expect("in range");
    assert!(matches!(generator.next_batch(0), Err(Error::EmptyBatch)));
    assert!(DecimalIdGenerator::new(0, 0).and_then(|g| g.with_max_counter(0)).is_err());
    assert!(DecimalIdGenerator::new(0, 0).and_then(|g| g.with_max_counter(922_337_203)).is_err());
}

/// Sonyflake v2 (sony/sonyflake `v2/sonyflake.go`): an ID is
/// `elapsed << (bits_sequence + bits_machine_id) | sequence << bits_machine_id | machine`, with
/// `elapsed = floor(now / unit) − floor(start / unit)`; zero settings take the defaults (8, 16,
/// 10 ms, 2025-01-01); a sequence or machine ID wider than 30 bits, or a time field narrower
/// than 32 bits, is refused.
#[test]
fn sonyflake_v2_settings_and_ids() {
    let start = 1_735_689_600_000; // 2025-01-01T00:00:00Z
    let check = |settings: SonyflakeV2, machine: u64, now: u64, want: u64| {
        let layout = Layout::custom(settings.bit_layout().expect("valid settings"));
        let generator =
            layout.generator_for(machine, &[], &GeneratorConfig::default()).expect("a generator");
        let first = generator.next(now).expect("no error").ready();
        assert_eq!(first, Some(AnyId::U64(want)), "{settings:?} at {now}");
        assert_eq!(
            layout.time_ms(AnyId::U64(want), now).ok().flatten().map(|t| t <= now),
            Some(true)
        );
    };
    let default = SonyflakeV2::default();
    assert_eq!(
        Layout::custom(default.bit_layout().unwrap()),
        Layout::builtin("sonyflake-v2").unwrap()
    );
    // 12,345 ms after the start: elapsed 1,234 units of 10 ms.
    check(default, 0x1234, start + 12_345, 1_234 << 24 | 0x1234);
    let narrow =
        SonyflakeV2 { bits_sequence: 10, bits_machine_id: 12, time_unit_ms: 1, start_ms: None };
    check(narrow, 7, start + 999, 999 << 22 | 7);
    // A start inside a unit: elapsed counts whole units of the clock, not of the distance.
    let offset = SonyflakeV2 { time_unit_ms: 1_000, start_ms: Some(start + 900), ..default };
    check(offset, 1, start + 1_100, 1 << 24 | 1);
    let refused = |settings: SonyflakeV2, needle: &str| {
        let err = settings.bit_layout().expect_err(needle);
        assert!(err.to_string().contains(needle), "{err}");
    };
    refused(SonyflakeV2 { bits_sequence: 31, ..default }, "bits_sequence");
    refused(SonyflakeV2 { bits_machine_id: 31, ..default }, "bits_machine_id");
    refused(SonyflakeV2 { bits_sequence: 16, bits_machine_id: 16, ..default }, "at least 32");
    // 15 + 16 = 31 leaves exactly 32 bits of time: allowed.
    assert!(SonyflakeV2 { bits_sequence: 15, ..default }.bit_layout().is_ok());
}
