//! What each layout says about itself for other crates: the order of its IDs, what issues
//! them, and a generator built from a generator ID as a number.

use idmint_core::{
    AnyGenerator, AnyId, BitLayout, Error, FieldConfig, FieldRole, FieldValue, GeneratorConfig,
    GeneratorStride, IssuedBy, Layout, LayoutConfig, Next, Order,
};
use proptest::prelude::*;

use crate::common::{custom_layout, num, text};

fn builtin(name: &str) -> Layout {
    Layout::builtin(name).expect("a built-in layout")
}

/// Every built-in's order and issuer, and a custom layout's.
#[test]
fn every_layout_says_how_it_is_issued_and_ordered() {
    use IssuedBy::*;
    use Order::*;
    let check = |layout: Layout, order: Order, issued_by: IssuedBy| {
        assert_eq!((layout.order(), layout.issued_by()), (order, issued_by), "{}", layout.name());
        assert_eq!(layout.has_generator(), issued_by != Store, "{}", layout.name());
    };
    check(builtin("snowflake"), Increasing, Clock);
    check(builtin("sonyflake"), Increasing, Clock);
    check(builtin("sonyflake-v2"), Increasing, Clock);
    check(builtin("icicle"), Increasing, Clock);
    check(builtin("flake"), Increasing, Clock);
    check(builtin("js53"), Increasing, Clock);
    check(builtin("hot-guid"), Increasing, Clock);
    check(builtin("uuid7"), Increasing, Clock);
    check(builtin("lable"), Unordered, Clock);
    check(builtin("trace-id"), Periodic, Clock);
    check(builtin("decimal-id"), Sharded, Counters);
    check(builtin("sequence"), Increasing, Store);
    check(Layout::custom(custom_layout()), Increasing, Clock);
    assert_eq!(Layout::builtins().len(), 12, "a new built-in needs a line here");
}

/// An order's name is what JSON and gRPC carry, and reads back.
#[test]
fn orders_read_back_from_their_names() {
    for order in Order::ALL {
        assert_eq!(order.name().parse::<Order>().ok(), Some(order));
    }
    assert!("sorted".parse::<Order>().is_err());
}

/// Three IDs per step of 250 ms over `steps` steps from `start_ms`, from one generator.
fn issued(generator: &AnyGenerator, start_ms: u64, steps: u64) -> Vec<AnyId> {
    let mut ids = Vec::new();
    for step in 0..steps {
        for _ in 0..3 {
            if let Next::Ready(id) = generator.next(start_ms + step * 250).expect("next") {
                ids.push(id);
            }
        }
    }
    assert!(ids.len() as u64 >= steps, "{} ids in {steps} steps", ids.len());
    ids
}

/// How many times an ID is below the one before.
fn descents(ids: &[AnyId]) -> usize {
    ids.windows(2).filter(|pair| pair[1] <= pair[0]).count()
}

/// Each built-in's order label holds on the IDs its generators issue, and the labels that
/// allow a descent are not idle: `increasing` never goes down over 20 s; `periodic` goes down
/// once, at the wrap, and not otherwise; `sharded` increases within each shard (generator ID)
/// and goes down from one shard to the next; `unordered` goes down.
#[test]
fn each_order_label_holds_on_generated_ids() {
    // 2026-09-21: after every built-in's epoch.
    let start = 1_790_000_000_000;
    // trace-id's seconds wrap at every multiple of 2^25 s; 53 of them is in 2026.
    let wrap = 53 * (1_u64 << 25) * 1_000;
    let config = GeneratorConfig::default();
    let mut seen = std::collections::BTreeSet::new();
    for &(name, _) in Layout::builtins() {
        let layout = builtin(name);
        if !layout.has_generator() {
            continue;
        }
        let generator = |id: u64| layout.generator_for(id, &[], &config).expect(name);
        let order = layout.order();
        seen.insert(order.name());
        match order {
            Order::Increasing => {
                // Through restarts too: a clock layout's restart starts above its durable mark.
                assert_eq!(layout.issued_by(), IssuedBy::Clock, "{name}");
                assert_eq!(descents(&issued(&generator(1), start, 80)), 0, "{name}");
            }
            Order::Periodic => {
                assert_eq!(descents(&issued(&generator(1), start, 80)), 0, "{name}");
                assert_eq!(descents(&issued(&generator(1), wrap - 3_000, 24)), 1, "{name}");
            }
            Order::Sharded => {
                // Counters give a new generator ID (a new shard) at every start.
                assert_eq!(layout.issued_by(), IssuedBy::Counters, "{name}");
                let (a, b) = (issued(&generator(1), start, 80), issued(&generator(2), start, 80));
                assert_eq!((descents(&a), descents(&b)), (0, 0), "{name}: within a shard");
                let chained: Vec<AnyId> = a.into_iter().chain(b).collect();
                assert_eq!(descents(&chained), 1, "{name}: from one shard to the next");
            }
            Order::Unordered => {
                assert!(descents(&issued(&generator(1), start, 80)) > 0, "{name}");
            }
            Order::KSorted => panic!("{name}: k-sorted is a property of sources, not layouts"),
        }
    }
    let expected = ["increasing", "periodic", "sharded", "unordered"];
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), expected, "every label is tested");
}

/// The generator IDs whose identity has fixed values of some fields, by brute force.
fn matching(layout: &Layout, fixed: &[(String, FieldValue)]) -> Vec<u64> {
    (0..layout.generator_count())
        .filter(|&id| {
            let identity = layout.identity(id).expect("identity");
            fixed.iter().all(|f| identity.contains(f))
        })
        .collect()
}

/// For every built-in and custom layout, every identity field fixed at its smallest, a middle
/// and its largest value (and every pair for two-field identities) gives exactly the
/// generator IDs whose identity has those values; fixing none gives them all.
#[test]
fn fixed_identity_fields_give_the_generator_ids_that_have_them() {
    let mut layouts: Vec<Layout> = Layout::builtins().iter().map(|(n, _)| builtin(n)).collect();
    layouts.push(Layout::custom(custom_layout()));
    let mut checked = 0;
    for layout in layouts.iter().filter(|l| l.has_generator() && l.generator_count() <= 1 << 16) {
        let count = layout.generator_count();
        let all = layout.generator_ids_with(&[]).expect("no field fixed");
        assert_eq!(all, GeneratorStride { first: 0, step: 1, count }, "{}", layout.name());
        let (lo, hi) = (layout.identity(0).expect("lo"), layout.identity(count - 1).expect("hi"));
        for (k, ((name, low), (_, high))) in lo.iter().zip(&hi).enumerate() {
            let (FieldValue::Number(low), FieldValue::Number(high)) = (low, high) else {
                panic!("{}: a number", layout.name())
            };
            for value in [*low, (low + high) / 2, *high] {
                let mut fixed = vec![num(name, value)];
                let stride = layout.generator_ids_with(&fixed).expect("one field fixed");
                let want = matching(layout, &fixed);
                assert_eq!(stride.ids().collect::<Vec<_>>(), want, "{} {fixed:?}", layout.name());
                checked += 1;
                if let Some((other, FieldValue::Number(v))) = lo.get(k + 1) {
                    fixed.push(num(other, *v));
                    let stride = layout.generator_ids_with(&fixed).expect("two fixed");
                    assert_eq!(stride.ids().collect::<Vec<_>>(), matching(layout, &fixed));
                }
            }
        }
    }
    assert!(checked >= 20, "{checked} cases");
}

/// Fixing a field that is not in the identity, a value out of range, or fields that leave the
/// free ones apart is refused.
#[test]
fn bad_fixed_identity_fields_are_refused() {
    let snowflake = builtin("snowflake");
    let err = snowflake.generator_ids_with(&[num("region", 1)]).unwrap_err();
    assert!(matches!(err, Error::UnknownField { .. }), "{err}");
    let err = snowflake.generator_ids_with(&[num("datacenter", 32)]).unwrap_err();
    assert!(matches!(err, Error::FieldOutOfRange { .. }), "{err}");
    let err = snowflake.generator_ids_with(&[text("datacenter", "x")]).unwrap_err();
    assert!(matches!(err, Error::InvalidFieldValue { .. }), "{err}");
    // Three identity fields: fixing the middle one leaves the outer two apart.
    let three = Layout::custom(
        BitLayout::try_from(LayoutConfig {
            name: "three".into(),
            bits: 63,
            epoch: None,
            epoch_ms: Some(1_700_000_000_000),
            tick_ms: 1,
            fields: vec![
                FieldConfig { name: "timestamp".into(), bits: 41, role: FieldRole::Time },
                FieldConfig { name: "region".into(), bits: 2, role: FieldRole::Node },
                FieldConfig { name: "zone".into(), bits: 2, role: FieldRole::Node },
                FieldConfig { name: "worker".into(), bits: 4, role: FieldRole::Node },
                FieldConfig { name: "sequence".into(), bits: 14, role: FieldRole::Sequence },
            ],
        })
        .expect("valid"),
    );
    let err = three.generator_ids_with(&[num("zone", 1)]).unwrap_err();
    assert!(err.to_string().contains("leaves the free identity fields apart"), "{err}");
    let ends = three.generator_ids_with(&[num("region", 1), num("worker", 3)]).expect("ends");
    assert_eq!(
        ends.ids().collect::<Vec<_>>(),
        matching(&three, &[num("region", 1), num("worker", 3)])
    );
}

/// `generator_for` refuses a generator ID out of range and a field the ID already sets.
#[test]
fn generator_for_refuses_bad_ids_and_fields() {
    let config = GeneratorConfig::default();
    let check = |name: &str, id: u64, fields: &[(String, idmint_core::FieldValue)], field: &str| {
        let err = builtin(name).generator_for(id, fields, &config).expect_err(name);
        assert!(
            matches!(&err, Error::FieldOutOfRange { field: f, .. }
                | Error::InvalidFieldValue { field: f, .. } if f == field),
            "{name}: {err}"
        );
    };
    check("snowflake", 1024, &[], "generator id");
    check("icicle", 1023, &[], "generator id");
    check("snowflake", 1, &[num("worker", 2)], "worker");
    check("lable", 1, &[num("cluster_id", 2)], "cluster_id");
    check("hot-guid", 1, &[text("process", "0000000001")], "process");
    check("decimal-id", 7, &[num("generator_id", 7)], "generator_id");
    check("trace-id", 1 << 16, &[], "generator id");
    assert!(builtin("sequence").generator_for(0, &[], &config).is_err());
    // Fields the ID does not set are still taken.
    let lable = builtin("lable").generator_for(5, &[text("mode", "spread")], &config);
    assert!(lable.is_ok());
}

proptest! {
    /// A generator built from a generator ID issues what a generator built from that ID's
    /// named fields issues: the typed path and the named path agree for every layout.
    #[test]
    fn generator_for_matches_the_identity(pick in 0usize..11, id in any::<u64>(), at in 0u64..1 << 30) {
        let (name, _) = Layout::builtins()[pick];
        let layout = builtin(name);
        prop_assume!(layout.has_generator());
        let id = id % layout.generator_count();
        let now = layout.epoch_ms().unwrap_or(0) + at;
        let config = GeneratorConfig::default();
        let typed = layout.generator_for(id, &[], &config).expect("typed");
        let named = layout.generator(&layout.identity(id).expect("identity"), &config).expect("named");
        prop_assert_eq!(typed.next(now).ok(), named.next(now).ok());
    }
}
