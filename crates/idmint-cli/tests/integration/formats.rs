//! `idmint gen` and `idmint decode` with `--format uuid|ulid|typeid` and `--type-prefix`,
//! through the real binary: each printed ID is read by code no one here wrote (the `uuid`
//! crate as version 7 and RFC variant, the `ulid` crate with the same time), decode reads
//! every form back and refuses another prefix naming both, and every refusal is one clear
//! line with a non-zero exit, all through one `check` helper.

use std::process::Command;

use serde_json::Value;

/// The binary under test.
const IDMINT: &str = env!("CARGO_BIN_EXE_idmint");

/// What a run must print.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Exit 0 and this many lines, each an ID in this form.
    Ids(usize, Form),
    /// Exit 0 and one JSON line whose `id` is the given text and whose layout is this one.
    Decoded(&'static str),
    /// A non-zero exit, nothing on stdout, and stderr that contains this text.
    Refused(&'static str),
}

/// A text form a line must be in.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// A UUIDv7 as the `uuid` crate reads it.
    Uuid7,
    /// A ULID as the `ulid` crate reads it, holding a UUIDv7.
    Ulid,
    /// A TypeID with this prefix whose suffix the `ulid` crate reads as a UUIDv7.
    TypeId(&'static str),
    /// This prefix, `_`, and a decimal number.
    PrefixedDecimal(&'static str),
}

/// The UUIDv7 of `value` checked by the `uuid` crate; returns its Unix ms.
fn uuid7_ms(value: u128, line: &str) -> u64 {
    let uuid = uuid::Uuid::from_u128(value);
    assert_eq!(uuid.get_version_num(), 7, "{line}");
    assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{line}");
    let (secs, nanos) = uuid.get_timestamp().expect("a v7 timestamp").to_unix();
    secs * 1000 + u64::from(nanos) / 1_000_000
}

impl Form {
    /// Checks one printed line.
    fn check(self, line: &str) {
        match self {
            Form::Uuid7 => {
                let uuid = uuid::Uuid::parse_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
                assert_eq!(uuid.hyphenated().to_string(), line, "not canonical");
                uuid7_ms(uuid.as_u128(), line);
            }
            Form::Ulid => {
                let ulid = ulid::Ulid::from_string(line).unwrap_or_else(|e| panic!("{line}: {e}"));
                assert_eq!(ulid.to_string(), line, "not canonical");
                assert_eq!(ulid.timestamp_ms(), uuid7_ms(ulid.0, line), "{line}");
            }
            Form::TypeId(prefix) => {
                let suffix = match prefix {
                    "" => line,
                    _ => line
                        .strip_prefix(prefix)
                        .and_then(|rest| rest.strip_prefix('_'))
                        .unwrap_or_else(|| panic!("{line} lacks the prefix {prefix}_")),
                };
                assert_eq!(suffix.len(), 26, "{line}");
                assert_eq!(suffix, suffix.to_lowercase(), "{line}");
                let ulid =
                    ulid::Ulid::from_string(suffix).unwrap_or_else(|e| panic!("{line}: {e}"));
                assert_eq!(ulid.timestamp_ms(), uuid7_ms(ulid.0, line), "{line}");
            }
            Form::PrefixedDecimal(prefix) => {
                let rest = line.strip_prefix(prefix).and_then(|r| r.strip_prefix('_'));
                let number = rest.and_then(|r| r.parse::<u64>().ok());
                assert!(number.is_some_and(|n| n.to_string() == rest.unwrap_or("")), "{line}");
            }
        }
    }
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(IDMINT).args(args).env("NO_COLOR", "1").output().expect("run idmint")
}

fn check(args: &[&str], want: Want) {
    let output = run(args);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    match want {
        Want::Ids(count, form) => {
            assert!(output.status.success(), "{args:?}: {stderr}");
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), count, "{args:?}: {stdout}");
            for line in lines {
                form.check(line);
            }
        }
        Want::Decoded(id) => {
            assert!(output.status.success(), "{args:?}: {stderr}");
            let json: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
            assert_eq!(json["id"], id, "{args:?}: {stdout}");
            assert!(json["time"].is_string(), "{args:?}: {stdout}");
        }
        Want::Refused(message) => {
            assert!(!output.status.success(), "{args:?} succeeded: {stdout}");
            assert!(stdout.is_empty(), "{args:?} printed {stdout}");
            assert!(stderr.contains(message), "{args:?}: `{stderr}` lacks `{message}`");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        }
    }
}

/// One line of `idmint gen`.
fn gen_one(args: &[&str]) -> String {
    let output = run(&[&["gen"], args].concat());
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[test]
fn gen_writes_every_form_and_refuses_those_that_do_not_fit() {
    let cases: &[(&[&str], Want)] = &[
        (&["gen", "--layout", "uuid7", "-n", "200"], Want::Ids(200, Form::Uuid7)),
        (&["gen", "--layout", "uuid7", "--format", "uuid", "-n", "3"], Want::Ids(3, Form::Uuid7)),
        (
            &["gen", "--layout", "uuid7", "--format", "ulid", "-n", "200"],
            Want::Ids(200, Form::Ulid),
        ),
        (
            &[
                "gen",
                "--layout",
                "uuid7",
                "--format",
                "typeid",
                "--type-prefix",
                "user",
                "-n",
                "200",
            ],
            Want::Ids(200, Form::TypeId("user")),
        ),
        (
            &["gen", "--layout", "uuid7", "--type-prefix", "user"],
            Want::Ids(1, Form::TypeId("user")),
        ),
        (&["gen", "--layout", "uuid7", "--format", "typeid"], Want::Ids(1, Form::TypeId(""))),
        (
            &["gen", "--layout", "uuid7", "--type-prefix", "user", "--format", "uuid"],
            Want::Ids(1, Form::Uuid7),
        ),
        (
            &["gen", "--type-prefix", "order", "-n", "5"],
            Want::Ids(5, Form::PrefixedDecimal("order")),
        ),
        // Forms that cannot hold the layout's IDs, and prefixes the TypeID spec refuses.
        (
            &["gen", "--format", "ulid"],
            Want::Refused("format `ulid` needs a 128-bit layout; `snowflake` ids have 64 bits"),
        ),
        (
            &["gen", "--format", "typeid"],
            Want::Refused("format `typeid` needs a 128-bit layout or a type prefix"),
        ),
        (
            &["gen", "--layout", "js53", "--format", "uuid", "--type-prefix", "a"],
            Want::Refused("format `uuid` needs a 128-bit layout"),
        ),
        (&["gen", "--format", "guid"], Want::Refused("unknown format `guid`")),
        (
            &["gen", "--layout", "uuid7", "--type-prefix", "User"],
            Want::Refused("the prefix `User` has `U` at character 1"),
        ),
        (
            &["gen", "--layout", "uuid7", "--type-prefix", "user_"],
            Want::Refused("starts or ends with `_`"),
        ),
        (&["gen", "--layout", "uuid7", "--type-prefix", ""], Want::Refused("an empty prefix")),
    ];
    for (args, want) in cases {
        check(args, *want);
    }
}

#[test]
fn decode_reads_every_form_and_refuses_another_prefix() {
    let typeid: &'static str =
        Box::leak(gen_one(&["--layout", "uuid7", "--type-prefix", "user"]).into_boxed_str());
    let suffix = &typeid["user_".len()..];
    let value = ulid::Ulid::from_string(suffix).unwrap().0;
    let uuid = uuid::Uuid::from_u128(value).hyphenated().to_string();
    let ulid = ulid::Ulid(value).to_string();
    let order = format!("order_{suffix}");
    let order_number: &'static str =
        Box::leak(gen_one(&["--type-prefix", "order"]).into_boxed_str());
    let number = &order_number["order_".len()..];
    let as_user = format!("user_{number}");
    let uuid7 = ["decode", "--json", "--layout", "uuid7"];
    let with = |extra: &[&str]| -> Vec<String> {
        uuid7.iter().chain(extra).map(|s| (*s).to_owned()).collect()
    };
    let cases: Vec<(Vec<String>, Want)> = vec![
        (with(&["--type-prefix", "user", typeid]), Want::Decoded(typeid)),
        (with(&["--type-prefix", "user", "--format", "uuid", &uuid]), Want::Decoded(typeid)),
        (with(&["--type-prefix", "user", "--format", "ulid", &ulid]), Want::Decoded(typeid)),
        (
            with(&["--format", "typeid", suffix]),
            Want::Decoded(Box::leak(uuid.clone().into_boxed_str())),
        ),
        (
            ["decode", "--json", "--type-prefix", "order", order_number]
                .map(str::to_owned)
                .to_vec(),
            Want::Decoded(order_number),
        ),
        // The prefix check, both widths, with both prefixes named.
        (
            with(&["--type-prefix", "user", &order]),
            Want::Refused("TypeID prefix `order` where `user` was expected"),
        ),
        (
            with(&["--type-prefix", "user", suffix]),
            Want::Refused("TypeID prefix none where `user` was expected"),
        ),
        (
            with(&["--format", "typeid", typeid]),
            Want::Refused("TypeID prefix `user` where none was expected"),
        ),
        (
            ["decode", "--type-prefix", "order", &as_user].map(|s| s.to_owned()).to_vec(),
            Want::Refused("TypeID prefix `user` where `order` was expected"),
        ),
        (
            ["decode", "--layout", "auto", "--type-prefix", "user", typeid]
                .map(str::to_owned)
                .to_vec(),
            Want::Refused("--format, --type-prefix and --epoch cannot be used with --layout auto"),
        ),
    ];
    for (args, want) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        check(&args, *want);
    }

    // `--layout auto` names the TypeID, its prefix and its UUIDv7's time, as the best candidate.
    let output = run(&["decode", "--layout", "auto", "--json", typeid]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (json["layout"].as_str(), json["fields"]["prefix"].as_str()),
        (Some("typeid"), Some("user"))
    );
    assert_eq!(json["fields"]["version"], 7, "{json}");
    assert_eq!(json["fields"]["unix_ts_ms"], uuid7_ms(value, typeid), "{json}");
}
