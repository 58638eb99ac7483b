//! The `trace-id` layout's chunk/counter split as a parameter (`Layout::with_counter_bits`):
//! elfo's 12/10 by default, unchanged; every other split fills exactly its capacity per
//! second with unique, increasing IDs whose counter is never 0, and is another layout (its
//! fingerprint differs, and its IDs read under elfo's split give other fields).

use std::collections::HashSet;

use idmint_core::{AnyId, FieldValue, GeneratorConfig, Layout, Next, TraceId};

/// 2023-11-14T22:13:20Z.
const T: u64 = 1_700_000_000_000;

fn number(fields: &[(String, FieldValue)], name: &str) -> u64 {
    match fields.iter().find(|(n, _)| n == name) {
        Some((_, FieldValue::Number(v))) => *v,
        other => panic!("no number `{name}`: {other:?}"),
    }
}

/// One split: its capacity, a full second of IDs from one generator, and the fields of the
/// first and last.
fn check(counter_bits: u32) {
    let elfo = Layout::builtin("trace-id").expect("built in");
    let layout = elfo.with_counter_bits(counter_bits).expect("a valid split");
    let chunk_bits = 22 - counter_bits;
    let per_second = (1u64 << chunk_bits) * ((1 << counter_bits) - 1);
    assert_eq!(layout.capacity().ids_per_second_per_generator, per_second, "{counter_bits}");
    let widths: Vec<(String, u32)> =
        layout.fields().iter().map(|f| (f.name.clone(), f.bits)).collect();
    assert_eq!(
        widths,
        [
            ("timestamp".to_owned(), 25),
            ("node_no".to_owned(), 16),
            ("chunk_no".to_owned(), chunk_bits),
            ("counter".to_owned(), counter_bits)
        ],
        "{counter_bits}"
    );
    assert_eq!(layout == elfo, counter_bits == 10, "{counter_bits}");
    assert_eq!(layout.fingerprint() == elfo.fingerprint(), counter_bits == 10, "{counter_bits}");

    let generator = layout.generator_for(7, &[], &GeneratorConfig::default()).expect("generator");
    let Next::Ready(mut batch) = generator.next_batch(T, u64::MAX).expect("no error") else {
        panic!("{counter_bits}: no batch")
    };
    assert_eq!(batch.len() as u64, per_second, "{counter_bits}: a second holds its capacity");
    let sample: Vec<AnyId> = batch.by_ref().take(5_000).collect();
    let last = batch.last().expect("a last id");
    assert!(sample.windows(2).all(|w| w[0] < w[1]), "{counter_bits}: increasing");
    assert_eq!(sample.iter().collect::<HashSet<_>>().len(), sample.len());
    assert!(sample.last() < Some(&last));
    for id in sample.iter().chain([&last]) {
        let fields = layout.decode(*id).expect("decodes");
        assert!(number(&fields, "counter") >= 1, "{counter_bits}: counter 0 in {id}");
        assert_eq!(number(&fields, "node_no"), 7);
        let values: Vec<(String, FieldValue)> = fields;
        assert_eq!(layout.encode(&values).expect("encodes"), *id, "{counter_bits}: round trip");
    }
    let first = layout.decode(sample[0]).expect("decodes");
    assert_eq!((number(&first, "chunk_no"), number(&first, "counter")), (0, 1));
    let end = layout.decode(last).expect("decodes");
    assert_eq!(
        (number(&end, "chunk_no"), number(&end, "counter")),
        ((1 << chunk_bits) - 1, (1 << counter_bits) - 1),
        "{counter_bits}"
    );
    assert_eq!(generator.next(T).expect("no error"), Next::Wait { until_ms: T + 1_000 });

    // Read under elfo's split, another split's IDs give other fields: why it is another layout.
    if counter_bits != 10 {
        let misread: Vec<bool> = sample
            .iter()
            .map(|&id| elfo.decode(id).expect("decodes") != layout.decode(id).expect("decodes"))
            .collect();
        assert!(misread.iter().any(|&m| m), "{counter_bits}: elfo's split reads the same fields");
    }
}

#[test]
fn each_split_fills_its_capacity_with_unique_ids() {
    for counter_bits in [1, 4, 10, 12, 16, 21] {
        check(counter_bits);
    }
}

#[test]
fn elfos_split_is_the_default_and_others_are_refused() {
    let elfo = Layout::builtin("trace-id").expect("built in");
    assert_eq!(TraceId::DEFAULT_COUNTER_BITS, 10);
    assert_eq!(elfo.capacity().ids_per_second_per_generator, TraceId::IDS_PER_SECOND);
    assert_eq!(elfo.with_counter_bits(10).expect("elfo's").fingerprint(), elfo.fingerprint());
    // The typed TraceId is elfo's: its IDs read the same through the default layout.
    let raw = TraceId::EXAMPLE.to_raw();
    let parts = TraceId::EXAMPLE.into_parts();
    let fields = elfo.decode(AnyId::U64(raw)).expect("decodes");
    assert_eq!(
        (number(&fields, "chunk_no"), number(&fields, "counter")),
        (parts.chunk_no, parts.counter)
    );
    for bad in [0, 22, 64] {
        let err = elfo.with_counter_bits(bad).expect_err("refused");
        assert!(err.to_string().contains("trace-id's counter must be 1..=21 bits"), "{bad}: {err}");
    }
    let err = Layout::builtin("snowflake").unwrap().with_counter_bits(10).expect_err("refused");
    assert!(err.to_string().contains("has no counter width"), "{err}");
}
