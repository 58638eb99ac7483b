//! `uuid7` checked against code no one here wrote: the `uuid` crate reads every minted ID as a
//! version 7, RFC-variant UUID with idmint's time; the `ulid` crate reads the ULID form with
//! the same time; the TypeID specification's own `valid.json` and `invalid.json` (kept in
//! `testdata/typeid/`) pass; and fields → ID → text → ID round-trips in all three text forms.

use idmint_core::{
    Error, GeneratorConfig, Next, Text128, TypePrefix, Uuid7, Uuid7Parts, Uuid7Split, parse_typeid,
    typeid_text,
};
use proptest::prelude::*;
use serde_json::Value;

const T: u64 = 1_764_000_000_000;

/// The splits every minting check runs under: the default, a narrow one and one with
/// sub-millisecond bits whose counter crosses the variant.
fn splits() -> [Uuid7Split; 3] {
    [
        Uuid7Split::default(),
        Uuid7Split { sub_ms_bits: 0, counter_bits: 8, generator_bits: 10 },
        Uuid7Split { sub_ms_bits: 4, counter_bits: 10, generator_bits: 20 },
    ]
}

/// `n` IDs from generator `generator` under `split`, over as many milliseconds as they take.
fn mint(split: &Uuid7Split, generator: u64, n: usize) -> Vec<Uuid7> {
    let g = Uuid7::generator_in(split, generator, &GeneratorConfig::default()).unwrap();
    let mut now = T;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match g.next(now).unwrap() {
            Next::Ready(id) => out.push(id),
            Next::Wait { until_ms } => now = until_ms,
        }
    }
    out
}

/// One minted ID through the `uuid` and `ulid` crates.
fn check(split: &Uuid7Split, id: Uuid7) {
    let theirs = uuid::Uuid::from_u128(id.as_u128());
    assert_eq!(theirs.get_version(), Some(uuid::Version::SortRand), "{id}");
    assert_eq!(theirs.get_version_num(), 7, "{id}");
    assert_eq!(theirs.get_variant(), uuid::Variant::RFC4122, "{id}");
    let (secs, nanos) = theirs.get_timestamp().expect("a v7 has a timestamp").to_unix();
    assert_eq!(secs * 1000 + u64::from(nanos) / 1_000_000, id.unix_ms(), "{id}: uuid's time");
    assert_eq!(
        uuid::Uuid::parse_str(&id.to_string()).unwrap(),
        theirs,
        "{id}: uuid parses our text"
    );
    assert_eq!(theirs.hyphenated().to_string(), id.to_string(), "{id}: same text");
    let ulid = ulid::Ulid::from_string(&id.to_ulid()).unwrap_or_else(|e| panic!("{id}: {e}"));
    assert_eq!((ulid.0, ulid.timestamp_ms()), (id.as_u128(), id.unix_ms()), "{id}: ulid");
    assert_eq!(ulid.to_string(), id.to_ulid(), "{id}: ulid writes what we write");
    assert_eq!(id.into_parts_in(split).unix_ms, id.unix_ms());
}

/// 60,000 minted IDs (3 splits × 2 generators × 10,000, over several milliseconds each) read
/// by the `uuid` and `ulid` crates.
#[test]
fn the_uuid_and_ulid_crates_read_every_minted_id_with_its_time() {
    let mut checked = 0;
    for split in &splits() {
        for generator in [0, split.generator_count() - 1] {
            let ids = mint(split, generator, 10_000);
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "{split:?}: increasing");
            assert!(ids.last().unwrap().unix_ms() > T, "{split:?}: several milliseconds");
            for &id in &ids {
                check(split, id);
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 60_000);
}

/// The other way: UUIDv7s the `uuid` crate makes are UUIDv7s to idmint, with its time, and a
/// version 4 is refused.
#[test]
fn idmint_reads_the_uuid_crates_v7s() {
    for _ in 0..1_000 {
        let theirs = uuid::Uuid::now_v7();
        let ours: Uuid7 = theirs.to_string().parse().unwrap();
        let (secs, nanos) = theirs.get_timestamp().unwrap().to_unix();
        assert_eq!(ours.unix_ms(), secs * 1000 + u64::from(nanos) / 1_000_000);
        assert_eq!(Uuid7::parse_ulid(&ulid::Ulid(theirs.as_u128()).to_string()).unwrap(), ours);
    }
    let v4 = uuid::Uuid::from_u128(0x01890a5d_ac96_474b_bcce_b302099a8057);
    assert!(matches!(v4.to_string().parse::<Uuid7>(), Err(Error::InvalidId { .. })));
}

/// The TypeID specification's cases, as kept in `testdata/typeid/`.
fn spec_cases(file: &str) -> Vec<Value> {
    let path = format!("{}/../../testdata/typeid/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let Value::Array(cases) = serde_json::from_str(&text).unwrap() else {
        panic!("{path}: not a JSON array")
    };
    cases
}

fn field<'a>(case: &'a Value, name: &str) -> &'a str {
    case[name].as_str().unwrap_or_else(|| panic!("{case}: no string `{name}`"))
}

/// Every valid case decodes to its prefix and UUID and encodes back to the same text.
#[test]
fn the_typeid_specs_valid_cases_decode_and_encode_back() {
    let cases = spec_cases("valid.json");
    assert_eq!(cases.len(), 9, "the specification's valid.json has 9 cases");
    for case in &cases {
        let (name, text) = (field(case, "name"), field(case, "typeid"));
        let uuid = Text128::Uuid.parse(field(case, "uuid")).unwrap();
        let (prefix, value) = parse_typeid(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((prefix.as_str(), value), (field(case, "prefix"), uuid), "{name}");
        assert_eq!(typeid_text(&prefix, value), text, "{name}: encodes back");
        assert_eq!(Text128::TypeId(prefix.clone()).parse(text).unwrap(), uuid, "{name}");
        assert_eq!(Text128::TypeId(prefix).write(uuid), text, "{name}");
    }
}

/// Every invalid case is refused with an error that says what is wrong (never a panic).
#[test]
fn the_typeid_specs_invalid_cases_are_refused() {
    let cases = spec_cases("invalid.json");
    assert_eq!(cases.len(), 19, "the specification's invalid.json has 19 cases");
    for case in &cases {
        let (name, text) = (field(case, "name"), field(case, "typeid"));
        match parse_typeid(text) {
            Err(Error::InvalidTypeId(reason)) => assert!(!reason.is_empty(), "{name}"),
            other => panic!("{name}: {text:?} must be refused, got {other:?}"),
        }
    }
}

/// Negative control for the two tests above: a reader that accepted upper case and Crockford's
/// aliases (the ULID reader) would let spec-invalid suffixes through, so the spec check is
/// what tells a TypeID reader from a lenient one.
#[test]
fn a_lenient_reader_fails_the_invalid_cases() {
    let cases = spec_cases("invalid.json");
    let lenient = |text: &str| {
        let suffix = text.rsplit('_').next().unwrap_or(text);
        Text128::Ulid.parse(suffix).is_ok()
    };
    let passed: Vec<&str> =
        cases.iter().filter(|c| lenient(field(c, "typeid"))).map(|c| field(c, "name")).collect();
    assert!(passed.contains(&"suffix-uppercase"), "{passed:?}");
    assert!(passed.contains(&"suffix-ambiguous-crockford"), "{passed:?}");
}

fn parts_strategy() -> impl Strategy<Value = (Uuid7Split, Uuid7Parts)> {
    (0u32..=8, 1u32..=8, 0u32..=32, 0u64..1 << 48, any::<[u64; 4]>()).prop_filter_map(
        "a valid split",
        |(sub, counter, generator, unix_ms, v)| {
            let split =
                Uuid7Split { sub_ms_bits: sub, counter_bits: counter, generator_bits: generator };
            split.check().ok()?;
            let mask = |bits: u32| if bits >= 64 { u64::MAX } else { (1 << bits) - 1 };
            Some((
                split,
                Uuid7Parts {
                    unix_ms,
                    sub_ms: v[0] & mask(split.sub_ms_bits),
                    counter: v[1] & mask(split.counter_bits),
                    generator: v[2] & mask(split.generator_bits),
                    random: v[3] & mask(split.random_bits()),
                },
            ))
        },
    )
}

proptest! {
    /// fields → ID → text → ID → fields, in the UUID, ULID and TypeID forms.
    #[test]
    fn fields_id_text_round_trips(
        (split, parts) in parts_strategy(),
        prefix in "([a-z]([a-z_]{0,20}[a-z])?)?",
    ) {
        let id = Uuid7::from_parts_in(&split, parts).unwrap();
        let prefix = TypePrefix::new(&prefix).unwrap();
        for form in [Text128::Uuid, Text128::Ulid, Text128::TypeId(prefix.clone())] {
            let text = form.write(id.as_u128());
            let back = Uuid7::from_u128(form.parse(&text).unwrap()).unwrap();
            prop_assert_eq!(back, id, "{:?}: {}", form, text);
            prop_assert_eq!(back.into_parts_in(&split), parts);
        }
        prop_assert_eq!(Uuid7::parse_ulid(&id.to_ulid()).unwrap(), id);
        prop_assert_eq!(Uuid7::parse_typeid(&id.to_typeid(&prefix), &prefix).unwrap(), id);
        prop_assert_eq!(id.to_string().parse::<Uuid7>().unwrap(), id);
    }

    /// The text forms sort like the IDs (the ULID and TypeID suffix are fixed width), so a
    /// database or a log sorted by text is sorted by time.
    #[test]
    fn text_forms_sort_like_the_ids(a in any::<u128>(), b in any::<u128>()) {
        let prefix = TypePrefix::new("user").unwrap();
        for form in [Text128::Uuid, Text128::Ulid, Text128::TypeId(prefix.clone())] {
            prop_assert_eq!(form.write(a).cmp(&form.write(b)), a.cmp(&b));
        }
    }
}
