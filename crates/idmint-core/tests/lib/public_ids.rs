//! Public IDs (RELIABILITY.md, T25): for each domain (63 bits without 0, js53's 53, 64, 128),
//! each method and with and without key-version bits, random and sequential IDs go through
//! `obfuscate` then `reveal` and come back; every public ID is in the domain and none repeats.
//! `IDMINT_PUBLIC_ID_ROUNDS` (default 3,000 per kind of input) and `IDMINT_PUBLIC_ID_LAYOUTS`
//! (default all) make the long run RELIABILITY.md reports: 10 M of each in a release build.

use std::collections::HashSet;

use idmint_core::{AnyId, Error, Layout, PublicIdKey, PublicIdKeys, PublicIdMethod, PublicIds};

fn keys(method: PublicIdMethod, version_bits: u32, active: u8) -> PublicIdKeys {
    let secret = |v: u8| match method {
        PublicIdMethod::Ff1 => (0..32).map(|i| i * 7 + v).collect(),
        PublicIdMethod::Multiply => {
            let mut m: Vec<u8> = (0..16).map(|i| i * 13 + v + 1).collect();
            m[15] |= 1;
            m
        }
    };
    let versions = if version_bits == 0 { vec![0] } else { vec![0, 1] };
    PublicIdKeys {
        method,
        version_bits,
        active,
        keys: versions
            .into_iter()
            .map(|version| PublicIdKey { version, secret: secret(version) })
            .collect(),
    }
}

fn rounds() -> u64 {
    std::env::var("IDMINT_PUBLIC_ID_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000)
}

fn wanted(layout: &str) -> bool {
    std::env::var("IDMINT_PUBLIC_ID_LAYOUTS")
        .map_or(true, |list| list.split(',').any(|l| l == layout))
}

#[track_caller]
fn check(layout: &str, bits: u32, zero_out: bool, method: PublicIdMethod, version_bits: u32) {
    let layout_value = Layout::builtin(layout).expect("layout");
    let ids = PublicIds::new(&layout_value, &keys(method, version_bits, 0)).expect("public ids");
    let permuted = bits - version_bits;
    let max = if permuted >= 128 { u128::MAX } else { (1u128 << permuted) - 1 };
    let wide = layout_value.id_bits() == 128;
    let any = |v: u128| if wide { AnyId::U128(v) } else { AnyId::U64(v as u64) };
    let value = |id: AnyId| match id {
        AnyId::U64(v) => u128::from(v),
        AnyId::U128(v) => v,
    };
    let n = rounds();
    let mut rng = idmint_core::SplitMix64::new(0x1d_2024 ^ u64::from(bits));
    let mut seen = HashSet::with_capacity(2 * n as usize);
    let first = u128::from(zero_out);
    let inputs = (0..n).map(|i| first + u128::from(i)).chain((0..n).map(|_| {
        let r = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & max;
        if r == 0 && zero_out { 1 } else { r }
    }));
    let mut distinct_inputs = HashSet::new();
    for x in inputs {
        let public = ids.obfuscate(any(x)).expect("obfuscate");
        let y = value(public);
        assert!(bits == 128 || y >> bits == 0, "{layout}: {y:#x} outside {bits} bits");
        assert!(!(zero_out && y == 0), "{layout}: 0 is not an id");
        assert_eq!(ids.reveal(public).expect("reveal"), any(x), "{layout} {method:?}");
        if distinct_inputs.insert(x) {
            assert!(seen.insert(y), "{layout} {method:?}: {y:#x} twice");
        }
    }
}

#[test]
fn every_domain_round_trips_without_collisions() {
    for (layout, bits, zero_out) in [
        ("snowflake", 63, true),
        ("js53", 53, true),
        ("flake", 64, false),
        ("hot-guid", 128, false),
    ] {
        if !wanted(layout) {
            continue;
        }
        for method in [PublicIdMethod::Ff1, PublicIdMethod::Multiply] {
            for version_bits in [0, 2] {
                check(layout, bits, zero_out, method, version_bits);
            }
        }
    }
}

#[test]
fn versions_are_carried_and_refused_when_unknown() {
    let layout = Layout::builtin("snowflake").expect("snowflake");
    let old = PublicIds::new(&layout, &keys(PublicIdMethod::Ff1, 1, 0)).expect("v0");
    let new = PublicIds::new(&layout, &keys(PublicIdMethod::Ff1, 1, 1)).expect("v1 active");
    let id = AnyId::U64(1_541_815_603_606_036_480 >> 1);
    let (a, b) = (old.obfuscate(id).expect("v0"), new.obfuscate(id).expect("v1"));
    assert_ne!(a, b);
    // The newer set reveals both versions; each public ID carries its own.
    assert_eq!(new.reveal(a).expect("v0 id"), id);
    assert_eq!(new.reveal(b).expect("v1 id"), id);
    let mut only_v0 = keys(PublicIdMethod::Ff1, 1, 0);
    only_v0.keys.truncate(1);
    let only_v0 = PublicIds::new(&layout, &only_v0).expect("v0 only");
    assert_eq!(only_v0.reveal(b), Err(Error::UnknownKeyVersion { version: 1 }));
    // An ID that needs the version bit cannot be obfuscated with it.
    let big = AnyId::U64(1 << 62);
    assert!(matches!(new.obfuscate(big), Err(Error::OutsideDomain { bits: 62, .. })));
    assert!(matches!(new.obfuscate(AnyId::U64(0)), Err(Error::OutsideDomain { .. })));
}

#[test]
fn bad_key_sets_are_refused() {
    let good = keys(PublicIdMethod::Ff1, 0, 0);
    let cases: Vec<(&str, PublicIdKeys)> = vec![
        (
            "short key",
            PublicIdKeys {
                keys: vec![PublicIdKey { version: 0, secret: vec![1; 16] }],
                ..good.clone()
            },
        ),
        ("no active key", PublicIdKeys { active: 1, ..good.clone() }),
        ("too many version bits", PublicIdKeys { version_bits: 5, ..good.clone() }),
        (
            "version above the bits",
            PublicIdKeys {
                keys: vec![PublicIdKey { version: 2, secret: vec![1; 32] }],
                active: 2,
                version_bits: 1,
                ..good.clone()
            },
        ),
        (
            "even multiplier",
            PublicIdKeys {
                method: PublicIdMethod::Multiply,
                keys: vec![PublicIdKey { version: 0, secret: vec![2; 16] }],
                ..good.clone()
            },
        ),
    ];
    for (name, keys) in cases {
        assert!(matches!(keys.check(), Err(Error::InvalidConfig(_))), "{name}");
    }
}
