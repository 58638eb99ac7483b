//! The conversions a Rust user reaches for: `AnyId` to and from `u64`, `u128`, text and
//! serde, each layout type from an `AnyId`, and the parts types through serde (proptest).

use idmint_core::{AnyId, Format, HotGuid, Layout, Snowflake, SnowflakeParts};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_id_round_trips_through_serde_and_text(raw64: u64, raw128: u128) {
        for id in [AnyId::U64(raw64), AnyId::U128(raw128)] {
            let json = serde_json::to_string(&id).expect("serialize");
            prop_assert_eq!(serde_json::from_str::<AnyId>(&json).expect("deserialize"), id);
        }
        prop_assert_eq!(AnyId::U64(raw64).to_string().parse::<AnyId>().expect("parse"), AnyId::U64(raw64));
        prop_assert_eq!(u64::try_from(AnyId::U64(raw64)).expect("u64"), raw64);
        prop_assert!(u64::try_from(AnyId::U128(raw128)).is_err());
        prop_assert_eq!(u128::from(AnyId::U128(raw128)), raw128);
        prop_assert_eq!(HotGuid::try_from(AnyId::U128(raw128)).map(u128::from).expect("guid"), raw128);
        prop_assert!(HotGuid::try_from(AnyId::U64(raw64)).is_err());
    }

    #[test]
    fn a_layout_type_takes_only_its_own_ids_from_any_id(raw: u64) {
        // `Snowflake::try_from(AnyId)` agrees with the layout's own validation.
        let typed = Snowflake::try_from(AnyId::U64(raw)).ok();
        prop_assert_eq!(typed, Snowflake::from_raw(raw).ok());
        if let Some(id) = typed {
            prop_assert_eq!(AnyId::from(id), AnyId::U64(raw));
            let parts = id.into_parts();
            let json = serde_json::to_string(&parts).expect("serialize parts");
            prop_assert_eq!(serde_json::from_str::<SnowflakeParts>(&json).expect("parts"), parts);
        }
    }
}

#[test]
fn formats_and_layouts_by_name() {
    for format in [Format::Decimal, Format::Hex, Format::Base62, Format::Uuid] {
        let json = serde_json::to_string(&format).expect("serialize");
        assert_eq!(serde_json::from_str::<Format>(&json).expect("deserialize"), format);
    }
    for (name, _) in Layout::builtins() {
        assert_eq!(name.parse::<Layout>().expect("a built-in").name(), *name);
    }
    // Unknown fields of a parts object are refused, not ignored.
    let extra = r#"{"timestamp":1,"datacenter":0,"worker":0,"sequence":0,"colour":1}"#;
    assert!(serde_json::from_str::<SnowflakeParts>(extra).is_err());
}
