//! What each layout says about itself for other crates: the order of its IDs, what issues
//! them, and a generator built from a generator ID as a number.

use idmint_core::{Error, GeneratorConfig, IssuedBy, Layout, Order};
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
    check(builtin("trace-id"), KSorted, Clock);
    check(builtin("decimal-id"), Increasing, Counters);
    check(builtin("sequence"), Increasing, Store);
    check(Layout::custom(custom_layout()), Increasing, Clock);
    assert_eq!(Layout::builtins().len(), 12, "a new built-in needs a line here");
}

/// An order's name is what JSON and gRPC carry, and reads back.
#[test]
fn orders_read_back_from_their_names() {
    for order in [Order::Increasing, Order::KSorted, Order::Unordered] {
        assert_eq!(order.name().parse::<Order>().ok(), Some(order));
    }
    assert!("sorted".parse::<Order>().is_err());
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
