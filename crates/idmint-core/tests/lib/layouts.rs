//! Round trips of every layout, property-tested: parts → ID → parts through the typed API and
//! through [`Layout::encode`]/[`Layout::decode`], ID → text → ID in every [`Format`] that
//! supports the width, and refusal (never masking) of every field value out of range.

use std::{fmt::Debug, str::FromStr};

use idmint_core::{
    AnyId, BitLayout, DecimalId, DecimalIdParts, Error, FieldValue, Flake, FlakeParts, Format,
    HotGuid, HotGuidParts, Icicle, IcicleParts, Js53, Js53Parts, Lable, LableMode, LableParts,
    Layout, Snowflake, SnowflakeParts, Sonyflake, SonyflakeParts, TraceId, TraceIdParts,
};
use proptest::prelude::*;

use crate::common::{custom_config, custom_layout, num, text};

/// A typed ID of the crate, seen the way these tests need it.
trait Typed: Copy + PartialEq + Debug + std::fmt::Display + FromStr<Err = Error> {
    type Parts: Copy + PartialEq + Debug;
    fn from_parts(parts: Self::Parts) -> Result<Self, Error>;
    fn into_parts(self) -> Self::Parts;
    fn any(self) -> AnyId;
    fn to_text(self, format: Format) -> Result<String, Error>;
    fn parse_text(text: &str, format: Format) -> Result<Self, Error>;
    /// The parts as named values, in the order of `Layout::fields`.
    fn fields(parts: &Self::Parts) -> Vec<(String, FieldValue)>;
    /// Sets a numeric field; `false` if the parts type cannot hold `value`.
    fn set(parts: &mut Self::Parts, field: &str, value: u64) -> bool;
    /// The issue time the typed API reports, in Unix ms.
    fn time_ms(self, now_ms: u64) -> Option<u64>;
}

/// Implements [`Typed`] for a 64-bit ID whose parts are all `u64` fields.
macro_rules! typed_u64 {
    ($ty:ident, $parts:ident, [$($field:ident),+], |$id:ident, $now:ident| $time:expr) => {
        impl Typed for $ty {
            type Parts = $parts;

            fn from_parts(parts: $parts) -> Result<Self, Error> {
                $ty::from_parts(parts)
            }

            fn into_parts(self) -> $parts {
                $ty::into_parts(self)
            }

            fn any(self) -> AnyId {
                AnyId::U64(self.to_raw())
            }

            fn to_text(self, format: Format) -> Result<String, Error> {
                $ty::to_text(self, format)
            }

            fn parse_text(text: &str, format: Format) -> Result<Self, Error> {
                $ty::parse_text(text, format)
            }

            fn fields(parts: &$parts) -> Vec<(String, FieldValue)> {
                vec![$(num(stringify!($field), parts.$field)),+]
            }

            fn set(parts: &mut $parts, field: &str, value: u64) -> bool {
                match field {
                    $(stringify!($field) => parts.$field = value,)+
                    _ => return false,
                }
                true
            }

            fn time_ms(self, now_ms: u64) -> Option<u64> {
                let ($id, $now) = (self, now_ms);
                $time
            }
        }
    };
}

typed_u64!(Snowflake, SnowflakeParts, [timestamp, datacenter, worker, sequence], |id, _n| Some(
    id.timestamp_ms()
));
typed_u64!(Sonyflake, SonyflakeParts, [timestamp, sequence, machine], |id, _n| Some(
    id.timestamp_ms()
));
typed_u64!(Icicle, IcicleParts, [timestamp, shard, sequence], |id, _n| Some(id.timestamp_ms()));
typed_u64!(Js53, Js53Parts, [timestamp, node, sequence], |id, _n| Some(id.timestamp_ms()));
// The epoch is the layout's, not the ID's; `flake_with_epoch` checks other epochs.
typed_u64!(Flake, FlakeParts, [timestamp, datacenter, worker, counter], |id, _n| Some(
    id.timestamp_ms(Flake::EPOCH_MS)
));
typed_u64!(TraceId, TraceIdParts, [timestamp, node_no, chunk_no, counter], |id, now| Some(
    id.unix_secs_near(now) * 1000
));
typed_u64!(DecimalId, DecimalIdParts, [counter, generator_id, launch_id], |_id, _n| None);

impl Typed for Lable {
    type Parts = LableParts;

    fn from_parts(parts: LableParts) -> Result<Self, Error> {
        Lable::from_parts(parts)
    }

    fn into_parts(self) -> LableParts {
        Lable::into_parts(self)
    }

    fn any(self) -> AnyId {
        AnyId::U64(self.to_raw())
    }

    fn to_text(self, format: Format) -> Result<String, Error> {
        Lable::to_text(self, format)
    }

    fn parse_text(text: &str, format: Format) -> Result<Self, Error> {
        Lable::parse_text(text, format)
    }

    fn fields(p: &LableParts) -> Vec<(String, FieldValue)> {
        vec![
            num("timestamp", p.timestamp),
            num("sequence", p.sequence),
            num("generator_id", p.generator_id),
            num("cluster_id", p.cluster_id),
            text("mode", p.mode.name()),
        ]
    }

    fn set(p: &mut LableParts, field: &str, value: u64) -> bool {
        match field {
            "timestamp" => p.timestamp = value,
            "sequence" => p.sequence = value,
            "generator_id" => p.generator_id = value,
            "cluster_id" => p.cluster_id = value,
            _ => return false,
        }
        true
    }

    fn time_ms(self, _now_ms: u64) -> Option<u64> {
        Some(self.into_parts().timestamp)
    }
}

impl Typed for HotGuid {
    type Parts = HotGuidParts;

    fn from_parts(parts: HotGuidParts) -> Result<Self, Error> {
        HotGuid::from_parts(parts)
    }

    fn into_parts(self) -> HotGuidParts {
        HotGuid::into_parts(self)
    }

    fn any(self) -> AnyId {
        AnyId::U128(self.as_u128())
    }

    fn to_text(self, format: Format) -> Result<String, Error> {
        HotGuid::to_text(self, format)
    }

    fn parse_text(text: &str, format: Format) -> Result<Self, Error> {
        HotGuid::parse_text(text, format)
    }

    fn fields(p: &HotGuidParts) -> Vec<(String, FieldValue)> {
        let process: String = p.process.iter().map(|b| format!("{b:02x}")).collect();
        vec![
            num("timestamp", u64::from(p.timestamp)),
            text("process", &process),
            num("counter", u64::from(p.counter)),
            num("shard_key", u64::from(p.shard_key)),
        ]
    }

    fn set(p: &mut HotGuidParts, field: &str, value: u64) -> bool {
        let Ok(value) = u32::try_from(value) else { return false };
        match field {
            "timestamp" => p.timestamp = value,
            "counter" => p.counter = value,
            "shard_key" => p.shard_key = value,
            _ => return false,
        }
        true
    }

    fn time_ms(self, _now_ms: u64) -> Option<u64> {
        Some(u64::from(self.unix_timestamp()) * 1000)
    }
}

/// A clock reading for `Layout::time_ms` (it resolves trace-id's wrapping seconds).
const NOW_MS: u64 = 1_750_000_000_000;

/// Parts → ID → parts (typed and dynamic, which must agree, refusals included), the issue time,
/// and ID → text → ID in every format.
fn check_round_trip<T: Typed>(layout: &Layout, parts: T::Parts) -> Result<(), TestCaseError> {
    let fields = T::fields(&parts);
    let typed = T::from_parts(parts);
    let dynamic = layout.encode(&fields);
    prop_assert_eq!(typed.clone().map(T::any), dynamic.clone(), "typed and dynamic encode differ");
    let Ok(id) = typed else { return Ok(()) };
    let any = id.any();
    prop_assert_eq!(id.into_parts(), parts);
    prop_assert_eq!(layout.decode(any)?, fields);
    prop_assert_eq!(layout.time_ms(any, NOW_MS)?, id.time_ms(NOW_MS));
    check_text(layout, id)
}

/// ID → text → ID through the typed and the dynamic API, in every format.
fn check_text<T: Typed>(layout: &Layout, id: T) -> Result<(), TestCaseError> {
    let any = id.any();
    let mut formats = 0;
    for format in Format::ALL {
        if !format.supports(layout.id_bits()) {
            prop_assert_eq!(layout.id_bits(), 64);
            prop_assert!(matches!(format, Format::Uuid | Format::SqlGuidBytes), "{}", format);
            let refused = Err(Error::UnsupportedFormat { format, bits: 64 });
            prop_assert_eq!(id.to_text(format), refused.clone());
            prop_assert_eq!(layout.format(any, format), refused);
            continue;
        }
        let text = id.to_text(format)?;
        prop_assert_eq!(T::parse_text(&text, format)?, id, "{} text `{}`", format, text);
        prop_assert_eq!(layout.format(any, format)?, text.clone());
        prop_assert_eq!(layout.parse(&text, format)?, any, "{} text `{}`", format, text);
        formats += 1;
    }
    prop_assert_eq!(formats, if layout.id_bits() == 64 { Format::ALL.len() - 2 } else { 10 });
    let shown = id.to_string();
    prop_assert_eq!(shown.parse::<T>()?, id);
    prop_assert_eq!(layout.format(any, layout.default_format())?, shown);
    Ok(())
}

/// A field set above its maximum (or below its minimum) is refused with `FieldOutOfRange`,
/// by the typed and the dynamic API alike; `pick` chooses the field among the numeric ones.
fn check_out_of_range<T: Typed>(
    layout: &Layout,
    mut parts: T::Parts,
    pick: usize,
    excess: u64,
) -> Result<(), TestCaseError> {
    let numeric: Vec<_> = layout.fields().into_iter().filter(|f| f.text.is_none()).collect();
    let field = &numeric[pick % numeric.len()];
    let value = if field.min > 0 && excess & 1 == 0 {
        excess % field.min
    } else {
        field.max.saturating_add(1 + excess / 2)
    };
    prop_assume!(value > field.max || value < field.min);
    let want =
        Error::FieldOutOfRange { field: field.name.clone(), value, min: field.min, max: field.max };
    let mut fields = T::fields(&parts);
    for (name, v) in &mut fields {
        if *name == field.name {
            *v = FieldValue::Number(value);
        }
    }
    prop_assert_eq!(layout.encode(&fields), Err(want.clone()));
    if T::set(&mut parts, &field.name, value) {
        prop_assert_eq!(T::from_parts(parts), Err(want));
    }
    Ok(())
}

/// Values in `0..=max`, with both ends often.
fn upto(max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(max), 0..=max]
}

/// Values in `min..=max`, with both ends often.
fn within(min: u64, max: u64) -> impl Strategy<Value = u64> {
    prop_oneof![Just(min), Just(max), min..=max]
}

/// How far past a field's range a refused value lies: often just past it.
fn excess() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0), Just(1), 0..1_000u64, any::<u64>()]
}

fn snowflake_parts() -> impl Strategy<Value = SnowflakeParts> {
    (upto((1 << 41) - 1), upto(31), upto(31), upto(4095)).prop_map(
        |(timestamp, datacenter, worker, sequence)| SnowflakeParts {
            timestamp,
            datacenter,
            worker,
            sequence,
        },
    )
}

fn sonyflake_parts() -> impl Strategy<Value = SonyflakeParts> {
    (upto((1 << 39) - 1), upto(255), upto(65_535))
        .prop_map(|(timestamp, sequence, machine)| SonyflakeParts { timestamp, sequence, machine })
}

fn icicle_parts() -> impl Strategy<Value = IcicleParts> {
    (upto((1 << 41) - 1), upto(1023), upto(4095))
        .prop_map(|(timestamp, shard, sequence)| IcicleParts { timestamp, shard, sequence })
}

fn js53_parts() -> impl Strategy<Value = Js53Parts> {
    (upto((1 << 40) - 1), upto(63), upto(127)).prop_map(|(timestamp, node, sequence)| Js53Parts {
        timestamp,
        node,
        sequence,
    })
}

fn flake_parts() -> impl Strategy<Value = FlakeParts> {
    (upto((1 << 42) - 1), upto(31), upto(31), upto(4095)).prop_map(
        |(timestamp, datacenter, worker, counter)| FlakeParts {
            timestamp,
            datacenter,
            worker,
            counter,
        },
    )
}

fn lable_parts() -> impl Strategy<Value = LableParts> {
    let mode = prop_oneof![Just(LableMode::Spread), Just(LableMode::TimeSequential)];
    (upto((1 << 42) - 1), upto(63), upto(2047), upto(15), mode).prop_map(
        |(timestamp, sequence, generator_id, cluster_id, mode)| LableParts {
            timestamp,
            sequence,
            generator_id,
            cluster_id,
            mode,
        },
    )
}

fn trace_id_parts() -> impl Strategy<Value = TraceIdParts> {
    (upto((1 << 25) - 1), upto(65_535), upto(4095), within(1, 1023)).prop_map(
        |(timestamp, node_no, chunk_no, counter)| TraceIdParts {
            timestamp,
            node_no,
            chunk_no,
            counter,
        },
    )
}

fn decimal_id_parts() -> impl Strategy<Value = DecimalIdParts> {
    (within(1, 922_337_202), upto(99_999), upto(99_999)).prop_map(
        |(counter, generator_id, launch_id)| DecimalIdParts { counter, generator_id, launch_id },
    )
}

fn hot_guid_parts() -> impl Strategy<Value = HotGuidParts> {
    let word = || prop_oneof![Just(0), Just(u32::MAX), any::<u32>()];
    (word(), any::<[u8; 5]>(), prop_oneof![Just(0), Just((1 << 24) - 1), 0..1u32 << 24], word())
        .prop_map(|(timestamp, process, counter, shard_key)| HotGuidParts {
            timestamp,
            process,
            counter,
            shard_key,
        })
}

fn builtin(name: &str) -> Layout {
    Layout::builtin(name).expect("a built-in layout")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn snowflake(parts in snowflake_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("snowflake");
        check_round_trip::<Snowflake>(&layout, parts)?;
        check_out_of_range::<Snowflake>(&layout, parts, pick, over)?;
    }

    #[test]
    fn sonyflake(parts in sonyflake_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("sonyflake");
        check_round_trip::<Sonyflake>(&layout, parts)?;
        check_out_of_range::<Sonyflake>(&layout, parts, pick, over)?;
    }

    #[test]
    fn icicle(parts in icicle_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("icicle");
        check_round_trip::<Icicle>(&layout, parts)?;
        check_out_of_range::<Icicle>(&layout, parts, pick, over)?;
    }

    #[test]
    fn js53(parts in js53_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("js53");
        check_round_trip::<Js53>(&layout, parts)?;
        check_out_of_range::<Js53>(&layout, parts, pick, over)?;
        prop_assert!(Js53::from_parts(parts).map_or(true, |id| id.to_raw() < 1 << 53));
    }

    #[test]
    fn flake(parts in flake_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("flake");
        check_round_trip::<Flake>(&layout, parts)?;
        check_out_of_range::<Flake>(&layout, parts, pick, over)?;
    }

    /// A non-zero epoch changes the issue time, not the bits.
    #[test]
    fn flake_with_epoch(parts in flake_parts(), epoch in upto(1 << 41), pick in any::<usize>()) {
        let layout = builtin("flake").with_epoch(epoch)?;
        prop_assert_eq!(layout.epoch_ms(), Some(epoch));
        let fields = Flake::fields(&parts);
        let id = layout.encode(&fields)?;
        prop_assert_eq!(id, Flake::from_parts(parts)?.any());
        prop_assert_eq!(layout.decode(id)?, fields);
        let time = layout.time_ms(id, NOW_MS)?;
        prop_assert_eq!(time, Some(epoch + parts.timestamp));
        prop_assert_eq!(time, Some(Flake::from_parts(parts)?.timestamp_ms(epoch)));
        check_text(&layout, Flake::from_parts(parts)?)?;
        check_out_of_range::<Flake>(&layout, parts, pick, 0)?;
    }

    #[test]
    fn lable(parts in lable_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("lable");
        check_round_trip::<Lable>(&layout, parts)?;
        check_out_of_range::<Lable>(&layout, parts, pick, over)?;
        // The 8 bytes are the big-endian raw value, both ways.
        let id = Lable::from_parts(parts)?;
        prop_assert_eq!(Lable::from_bytes(id.to_bytes()), id);
        prop_assert_eq!(u64::from_be_bytes(id.to_bytes()), id.to_raw());
    }

    #[test]
    fn trace_id(parts in trace_id_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("trace-id");
        check_round_trip::<TraceId>(&layout, parts)?;
        check_out_of_range::<TraceId>(&layout, parts, pick, over)?;
    }

    #[test]
    fn decimal_id(parts in decimal_id_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("decimal-id");
        check_round_trip::<DecimalId>(&layout, parts)?;
        check_out_of_range::<DecimalId>(&layout, parts, pick, over)?;
        let id = DecimalId::from_parts(parts)?;
        let weight = DecimalId::COUNTER_WEIGHT;
        let value = parts.counter * weight + parts.generator_id * DecimalId::GENERATOR_WEIGHT;
        prop_assert_eq!(id.to_raw(), value + parts.launch_id);
        prop_assert!(id.to_raw() <= i64::MAX as u64);
    }

    #[test]
    fn hot_guid(parts in hot_guid_parts(), pick in any::<usize>(), over in excess()) {
        let layout = builtin("hot-guid");
        check_round_trip::<HotGuid>(&layout, parts)?;
        check_out_of_range::<HotGuid>(&layout, parts, pick, over)?;
        let id = HotGuid::from_parts(parts)?;
        prop_assert_eq!(HotGuid::from_dotnet_bytes(id.to_dotnet_bytes()), id);
        prop_assert_eq!(HotGuid::from_sql_guid_bytes(id.to_sql_guid_bytes()), id);
    }

    /// `sequence`: the ID is its one field, `value`, in 1..=2^63−1; no time, no generator.
    #[test]
    fn sequence(value in within(1, i64::MAX as u64), over in excess()) {
        let layout = builtin("sequence");
        let fields = vec![num("value", value)];
        let id = layout.encode(&fields)?;
        prop_assert_eq!(id, AnyId::U64(value));
        prop_assert_eq!(layout.decode(id)?, fields);
        prop_assert_eq!(layout.time_ms(id, NOW_MS)?, None);
        for format in Format::ALL.into_iter().filter(|f| f.supports(64)) {
            let text = layout.format(id, format)?;
            prop_assert_eq!(layout.parse(&text, format)?, id);
        }
        // Out of range: refused by `encode` and by `decode`, never masked.
        for bad in [0, (i64::MAX as u64).saturating_add(1).saturating_add(over)] {
            let want = Err(Error::FieldOutOfRange {
                field: "value".into(),
                value: bad,
                min: 1,
                max: i64::MAX as u64,
            });
            prop_assert_eq!(layout.encode(&[num("value", bad)]), want);
            let refused = matches!(layout.decode(AnyId::U64(bad)), Err(Error::InvalidId { .. }));
            prop_assert!(refused);
        }
    }

    /// A custom layout: `pack`/`unpack` are its typed API.
    #[test]
    fn custom(values in custom_values(), pick in any::<usize>(), over in excess()) {
        let bits = custom_layout();
        let layout = Layout::custom(bits.clone());
        let raw = bits.pack(&values)?;
        prop_assert_eq!(bits.unpack(raw), values.clone());
        prop_assert_eq!(bits.validate(raw), Ok(raw));
        let fields: Vec<_> =
            bits.fields().iter().zip(&values).map(|(f, &v)| num(f.name(), v)).collect();
        let any = layout.encode(&fields)?;
        prop_assert_eq!(any, AnyId::U64(raw));
        prop_assert_eq!(layout.decode(any)?, fields.clone());
        let time = layout.time_ms(any, NOW_MS)?;
        prop_assert_eq!(time, Some(bits.epoch_ms() + values[1] * bits.tick_ms()));
        for format in Format::ALL.into_iter().filter(|f| f.supports(64)) {
            let text = format.encode_u64(raw)?;
            prop_assert_eq!(format.parse_u64(&text)?, raw);
            prop_assert_eq!(layout.format(any, format)?, text.clone());
            prop_assert_eq!(layout.parse(&text, format)?, any);
        }
        // Out of range: refused by `pack` and by `encode`, never masked.
        let i = pick % values.len();
        let field = &bits.fields()[i];
        let value = field.max().saturating_add(1).saturating_add(over);
        let want = Err(Error::FieldOutOfRange {
            field: field.name().to_owned(),
            value,
            min: 0,
            max: field.max(),
        });
        let mut bad = values.clone();
        bad[i] = value;
        prop_assert_eq!(bits.pack(&bad), want.clone());
        let mut bad_fields = fields;
        bad_fields[i].1 = FieldValue::Number(value);
        prop_assert_eq!(layout.encode(&bad_fields), want.map(AnyId::U64));
        // A config that round-trips through serde gives the same layout.
        let json = serde_json::to_string(&custom_config()).expect("serializes");
        let config: idmint_core::LayoutConfig = serde_json::from_str(&json).expect("deserializes");
        prop_assert_eq!(BitLayout::try_from(config)?, bits);
    }
}

fn custom_values() -> impl Strategy<Value = Vec<u64>> {
    (upto(7), upto((1 << 41) - 1), upto(1023), upto(1023)).prop_map(|(a, b, c, d)| vec![a, b, c, d])
}

/// Text fields refuse bad text, numbers given as text and text given as numbers.
#[test]
fn text_fields_refuse_bad_values() {
    #[track_caller]
    fn check(layout: &str, field: &str, value: FieldValue) {
        let layout = builtin(layout);
        let mut fields: Vec<_> = layout
            .fields()
            .into_iter()
            .map(|f| match f.text {
                Some(_) if f.name == "mode" => text(&f.name, "spread"),
                Some(_) => text(&f.name, "0000000000"),
                None => num(&f.name, f.min),
            })
            .collect();
        let slot = fields.iter_mut().find(|(name, _)| name == field).expect("the field exists");
        slot.1 = value.clone();
        match layout.encode(&fields) {
            Err(Error::InvalidFieldValue { field: named, .. }) => assert_eq!(named, field),
            other => panic!("{field} = {value:?}: got {other:?}, expected InvalidFieldValue"),
        }
    }
    let t = |s: &str| FieldValue::Text(s.to_owned());
    check("lable", "mode", t("SPREAD"));
    check("lable", "mode", t("time_sequential"));
    check("lable", "mode", FieldValue::Number(0));
    check("hot-guid", "process", t("000000000"));
    check("hot-guid", "process", t("00000000000"));
    check("hot-guid", "process", t("00000000zz"));
    check("hot-guid", "process", t("+000000000"));
    check("hot-guid", "process", FieldValue::Number(0));
    check("snowflake", "worker", t("1"));
    check("decimal-id", "counter", t("1"));
}

/// Encode takes every field once and nothing else.
#[test]
fn encode_refuses_missing_unknown_and_repeated_fields() {
    #[track_caller]
    fn check(fields: &[(String, FieldValue)], want: fn(&Error) -> bool) {
        let got = builtin("snowflake").encode(fields);
        assert!(got.as_ref().is_err_and(want), "{fields:?}: got {got:?}");
    }
    let full =
        || vec![num("timestamp", 1), num("datacenter", 2), num("worker", 3), num("sequence", 4)];
    let mut missing = full();
    missing.pop();
    check(&missing, |e| matches!(e, Error::MissingField { field, .. } if field == "sequence"));
    let mut unknown = full();
    unknown.push(num("shard", 1));
    check(&unknown, |e| matches!(e, Error::UnknownField { field, .. } if field == "shard"));
    let mut twice = full();
    twice.push(num("worker", 3));
    check(&twice, |e| matches!(e, Error::InvalidFieldValue { field, .. } if field == "worker"));
    assert_eq!(
        builtin("snowflake").encode(&full()),
        Ok(AnyId::U64(1 << 22 | 2 << 17 | 3 << 12 | 4))
    );
}

/// A value of the wrong width is not an ID of the layout.
#[test]
fn decode_refuses_the_wrong_width() {
    for (name, _) in Layout::builtins() {
        let layout = builtin(name);
        let wrong = if layout.id_bits() == 64 { AnyId::U128(1) } else { AnyId::U64(1) };
        assert!(
            matches!(layout.decode(wrong), Err(Error::InvalidId { .. })),
            "{name} decoded {wrong:?}"
        );
    }
}

/// `sequence` IDs come from a segment store: the layout has no generator, says so clearly,
/// and describes itself without a clock.
#[test]
fn sequence_has_no_generator_and_no_clock() {
    let layout = builtin("sequence");
    assert!(!layout.has_generator());
    let err = layout.generator(&[], &idmint_core::GeneratorConfig::default()).unwrap_err();
    assert!(matches!(&err, Error::InvalidLayout(m) if m.contains("segment store")), "{err}");
    assert!(layout.with_epoch(0).is_err());
    assert_eq!(layout.epoch_ms(), None);
    assert_eq!(layout.generator_count(), 1);
    assert_eq!(layout.identity(0), Ok(Vec::new()));
    let capacity = layout.capacity();
    assert_eq!((capacity.tick_ms, capacity.end.clone()), (0, None));
    assert_eq!(capacity.ids_per_tick, i64::MAX as u64);
    let segments = layout.segments().expect("a bit diagram");
    assert_eq!(segments.iter().map(|s| s.width()).sum::<u32>(), 64);
    // Every other built-in has a generator.
    for (name, _) in Layout::builtins().iter().filter(|(n, _)| *n != "sequence") {
        assert!(builtin(name).has_generator(), "{name}");
    }
}
