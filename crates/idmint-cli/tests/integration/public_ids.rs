//! `idmint keygen`, `obfuscate` and `reveal`, black box: a key file round-trips IDs from
//! arguments and stdin, rotation adds a version that older public IDs still reveal under,
//! time-ordered IDs that fail `idmint analyze` pass it once obfuscated with FF1 (fixed IDs and
//! a fixed key, so the verdict never depends on luck or on the clock), and bad key files and IDs
//! are one clear error.

use std::process::Output;

use idmint_core::{Snowflake, SnowflakeParts};

fn run(args: &[&str], input: &[u8]) -> Output {
    crate::common::with_input(args, input)
}

fn ok(args: &[&str], input: &[u8]) -> String {
    let output = run(args, input);
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("utf-8")
}

/// A fixed FF1 key file.
const KEYS: &str = r#"{"method": "ff1", "version_bits": 1, "active": 0,
  "keys": [{"version": 0, "secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}]}"#;

#[test]
fn keys_round_trip_ids_and_rotate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(&keys, KEYS).expect("write keys");
    let keys = keys.to_string_lossy().into_owned();
    let ids = ok(&["gen", "-n", "1000"], b"");
    let public = ok(&["obfuscate", "--key-file", &keys], ids.as_bytes());
    assert_eq!(public.lines().count(), 1000);
    assert!(public.lines().zip(ids.lines()).all(|(p, i)| p != i));
    assert_eq!(ok(&["reveal", "--key-file", &keys], public.as_bytes()), ids);
    // Rotation: a new version, active; the old public IDs still reveal.
    let rotated = ok(&["keygen", "--rotate", &keys], b"");
    let file: serde_json::Value = serde_json::from_str(&rotated).expect("json");
    assert_eq!(file["active"], 1);
    assert_eq!(file["keys"].as_array().map(Vec::len), Some(2));
    let rotated_path = dir.path().join("rotated.json");
    std::fs::write(&rotated_path, rotated).expect("write");
    let rotated_path = rotated_path.to_string_lossy().into_owned();
    assert_eq!(ok(&["reveal", "--key-file", &rotated_path], public.as_bytes()), ids);
    let newer = ok(&["obfuscate", "--key-file", &rotated_path], ids.as_bytes());
    assert_ne!(newer, public);
    assert_eq!(ok(&["reveal", "--key-file", &rotated_path], newer.as_bytes()), ids);
    // A fresh key file has a fresh 32-byte key.
    let a: serde_json::Value = serde_json::from_str(&ok(&["keygen"], b"")).expect("json");
    let b: serde_json::Value = serde_json::from_str(&ok(&["keygen"], b"")).expect("json");
    assert_eq!(a["keys"][0]["secret"].as_str().map(str::len), Some(64));
    assert_ne!(a["keys"][0]["secret"], b["keys"][0]["secret"]);
}

/// `count` Snowflake IDs as one generator at node 0 makes them flat out from a fixed instant
/// (2026-11-18): 4,096 a millisecond. Fixed, because IDs from `idmint gen` depend on the
/// clock, and so would the battery's verdict on them (a pass at alpha 0.01 is luck 1 time in 100).
fn saturated_snowflake(count: u64) -> String {
    let per_ms = 1 << Snowflake::SEQUENCE_BITS;
    let start = 1_795_000_000_000 - Snowflake::EPOCH_MS;
    (0..count)
        .map(|i| {
            let parts = SnowflakeParts {
                timestamp: start + i / per_ms,
                datacenter: 0,
                worker: 0,
                sequence: i % per_ms,
            };
            format!("{}\n", Snowflake::from_parts(parts).expect("a snowflake id"))
        })
        .collect()
}

#[test]
fn obfuscated_ids_pass_the_battery_that_plain_ids_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(&keys, KEYS.replace("\"version_bits\": 1", "\"version_bits\": 0"))
        .expect("keys");
    let keys = keys.to_string_lossy().into_owned();
    let ids = saturated_snowflake(250_000);
    let plain = run(&["analyze"], ids.as_bytes());
    assert_eq!(plain.status.code(), Some(1), "plain ids must fail");
    let public = ok(&["obfuscate", "--key-file", &keys], ids.as_bytes());
    let report = ok(&["analyze", "--json"], public.as_bytes());
    let report: serde_json::Value = serde_json::from_str(&report).expect("json");
    assert_eq!(report["random"], true, "{report}");
}

#[test]
fn bad_keys_and_ids_are_one_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.to_string_lossy().into_owned()
    };
    let good = write("good.json", KEYS);
    let short = write("short.json", &KEYS.replace("1e1f\"", "\""));
    let junk = write("junk.json", "not json");
    let missing = dir.path().join("missing.json").to_string_lossy().into_owned();
    for (args, says) in [
        (vec!["obfuscate", "--key-file", &short, "1"], "must be 32 bytes"),
        (vec!["obfuscate", "--key-file", &junk, "1"], "is not a key file"),
        (vec!["obfuscate", "--key-file", &missing, "1"], "cannot read key file"),
        (vec!["obfuscate", "--key-file", &good, "0"], "`0`"),
        (vec!["obfuscate", "--key-file", &good, "abc"], "`abc`"),
        (
            vec!["obfuscate", "--key-file", &good, "9223372036854775807"],
            "outside the 62-bit domain",
        ),
        (vec!["reveal", "--key-file", &good, "9223372036854775807"], "key version 1"),
        (vec!["keygen", "--version-bits", "9"], "--version-bits must be 0 to 4"),
    ] {
        let output = run(&args, b"");
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}
