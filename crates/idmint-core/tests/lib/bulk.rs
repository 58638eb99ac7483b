//! The bulk drains of a batch, [`AnyBatch::extend_u64s`] and [`AnyBatch::write_be`], yield
//! exactly what the batch's iterator yields, for every built-in layout, across tick
//! boundaries and partial ticks (proptest); big-endian bytes sort like the IDs.

use idmint_core::{AnyBatch, AnyGenerator, AnyId, GeneratorConfig, Layout, Next};
use proptest::prelude::*;

/// Two generators of the same layout and node, which issue the same IDs for the same calls.
fn twins(name: &str) -> Option<(AnyGenerator, AnyGenerator, u64)> {
    let layout = Layout::builtin(name).ok()?;
    if !layout.has_generator() {
        return None;
    }
    let config = GeneratorConfig::default();
    let a = layout.generator_for(1 % layout.generator_count(), &[], &config).ok()?;
    let b = layout.generator_for(1 % layout.generator_count(), &[], &config).ok()?;
    Some((a, b, layout.epoch_ms().unwrap_or(1_700_000_000_000)))
}

fn ready(next: Next<AnyBatch>) -> AnyBatch {
    next.ready().expect("a batch is ready")
}

/// Decodes fixed-width big-endian bytes as `AnyId`s of `width` bytes.
fn decode_be(bytes: &[u8], width: usize) -> Vec<AnyId> {
    assert_eq!(bytes.len() % width, 0, "a whole number of IDs");
    bytes
        .chunks_exact(width)
        .map(|chunk| match width {
            8 => AnyId::U64(u64::from_be_bytes(chunk.try_into().unwrap())),
            _ => AnyId::U128(u128::from_be_bytes(chunk.try_into().unwrap())),
        })
        .collect()
}

/// The part of an ID that twins share: all of it, but the 46 random bits of a `uuid7` (drawn
/// from the OS for each ID, so twins differ there by design).
fn stable(name: &str, id: AnyId) -> AnyId {
    match (name, id) {
        ("uuid7", AnyId::U128(raw)) => AnyId::U128(raw & !((1u128 << 46) - 1)),
        _ => id,
    }
}

/// One comparison: the iterator of one twin against the drains of the other, batch after
/// batch at the given times and sizes.
fn check(name: &str, calls: &[(u64, u64)]) -> Result<(), TestCaseError> {
    let Some((iterated, drained, epoch)) = twins(name) else { return Ok(()) };
    for &(at, n) in calls {
        let now = epoch + at;
        let (a, b) = match (iterated.next_batch(now, n), drained.next_batch(now, n)) {
            (Ok(Next::Ready(a)), Ok(Next::Ready(b))) => (a, b),
            (a, b) => {
                prop_assert_eq!(a.is_ok(), b.is_ok(), "{}: same outcome", name);
                continue;
            }
        };
        let want: Vec<AnyId> = a.map(|id| stable(name, id)).collect();
        let width = if want.first().is_some_and(|id| id.bits() == 128) { 16 } else { 8 };
        let mut bytes = vec![0xAA];
        // Half the calls through each drain, so both are compared with the iterator.
        if n % 2 == 0 {
            b.write_be(&mut bytes);
            prop_assert_eq!(bytes[0], 0xAA, "{}: appends", name);
            prop_assert_eq!(
                decode_be(&bytes[1..], width)
                    .into_iter()
                    .map(|id| stable(name, id))
                    .collect::<Vec<_>>(),
                want.clone(),
                "{}: write_be",
                name
            );
            prop_assert!(
                bytes[1..].chunks_exact(width).is_sorted(),
                "{}: bytes sort like ids",
                name
            );
        } else {
            let mut ids = vec![7];
            match b.extend_u64s(&mut ids) {
                Ok(()) => {
                    let got: Vec<AnyId> = ids[1..].iter().copied().map(AnyId::U64).collect();
                    prop_assert_eq!(got, want.clone(), "{}: extend_u64s", name);
                }
                Err(_) => {
                    prop_assert_eq!(width, 16, "{}: only 128-bit batches are refused", name);
                    prop_assert_eq!(ids, vec![7], "{}: untouched on refusal", name);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    /// Batches of any size at increasing times, so that they start and end anywhere in a tick
    /// and run over several ticks (borrowing ahead).
    #[test]
    fn bulk_drains_match_the_iterator(
        pick in 0usize..12,
        calls in proptest::collection::vec((0u64..50, 1u64..20_000), 1..6),
    ) {
        let names = Layout::builtins();
        let (name, _) = names[pick % names.len()];
        let mut at = 0;
        let calls: Vec<(u64, u64)> = calls.into_iter().map(|(dt, n)| { at += dt; (at, n) }).collect();
        check(name, &calls)?;
    }
}

/// Every built-in layout, with fixed batches that cross ticks: none is skipped silently.
#[test]
fn every_layout_drains_in_bulk() {
    let mut checked = 0;
    for (name, _) in Layout::builtins() {
        if twins(name).is_none() {
            continue;
        }
        check(name, &[(1, 1), (1, 5_000), (2, 4_096), (2, 3), (9, 70_001)]).unwrap();
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} layouts have generators");
}

/// Negative control: reading the bytes little-endian, or one ID short, does not pass for the
/// IDs (so the tests above would catch a little-endian or miscounted drain).
#[test]
fn little_endian_or_a_wrong_count_is_caught() {
    let (a, b, epoch) = twins("snowflake").unwrap();
    let want: Vec<u64> =
        ready(a.next_batch(epoch + 1, 100).unwrap()).map(|id| u64::try_from(id).unwrap()).collect();
    let mut bytes = Vec::new();
    ready(b.next_batch(epoch + 1, 100).unwrap()).write_be(&mut bytes);
    let le: Vec<u64> =
        bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_ne!(le, want);
    assert_ne!(decode_be(&bytes[8..], 8), want.iter().copied().map(AnyId::U64).collect::<Vec<_>>());
    assert_eq!(decode_be(&bytes, 8), want.iter().copied().map(AnyId::U64).collect::<Vec<_>>());
}
