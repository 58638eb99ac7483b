//! `idmint convert`, and the text forms and JSON integers of `idmint decode`, through the real
//! binary: every form `decode --layout auto` reads converts to uuid, ulid, typeid (keeping or
//! setting a prefix), decimal and hex; a 128-bit ID's decode shows its other forms; JSON never
//! holds a number above 2^53 - 1 (JavaScript's `JSON.parse` and jq 1.6 would round it); and
//! every refusal is a clear line with the CLI's exit code, all through one `check` helper.

use serde_json::Value;

use crate::common::{idmint, with_input};

/// A UUIDv7 (from the TypeID specification's examples) in its forms; its `rand_b` is
/// 4381636308810498135, above 2^53.
const UUID: &str = "01890a5d-ac96-774b-bcce-b302099a8057";
const ULID: &str = "01H455VB4PEX5VSKNK084SN02Q";
const TYPEID: &str = "user_01h455vb4pex5vsknk084sn02q";
const SUFFIX: &str = "01h455vb4pex5vsknk084sn02q";
const DECIMAL: &str = "2040782911132661522235942288014082135";
const HEX: &str = "01890a5dac96774bbcceb302099a8057";
const RAND_B: &str = "4381636308810498135";

/// The largest integer JavaScript's numbers hold exactly.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// What a run must print.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// Exit 0, nothing on stderr, and exactly these lines on stdout.
    Lines(&'static [&'static str]),
    /// Exit 0, nothing on stderr, one JSON line per ID; in the first, each JSON pointer holds
    /// this JSON text (`"..."` for a string). No line holds a number above 2^53 - 1.
    Json(&'static [(&'static str, &'static str)]),
    /// Exit 0, nothing on stderr, and stdout containing each of these.
    Contains(&'static [&'static str]),
    /// This exit code, nothing on stdout, and stderr starting `error: ` and containing this.
    Refused(i32, &'static str),
}

/// One run: arguments, optional stdin, and what it must print.
struct Case {
    args: &'static [&'static str],
    stdin: Option<&'static str>,
    want: Want,
}

const fn case(args: &'static [&'static str], want: Want) -> Case {
    Case { args, stdin: None, want }
}

/// Every number in `value`, at any depth.
fn numbers(value: &Value, out: &mut Vec<serde_json::Number>) {
    match value {
        Value::Number(n) => out.push(n.clone()),
        Value::Array(items) => items.iter().for_each(|v| numbers(v, out)),
        Value::Object(map) => map.values().for_each(|v| numbers(v, out)),
        _ => {}
    }
}

fn check(case: &Case) {
    let output = match case.stdin {
        Some(input) => with_input(case.args, input.as_bytes()),
        None => idmint(case.args, &[]).output().expect("run idmint"),
    };
    let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
    let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
    let context =
        format!("idmint {}\n--- stdout:\n{stdout}--- stderr:\n{stderr}", case.args.join(" "));
    assert!(!stderr.contains("panicked"), "panic: {context}");
    if let Want::Refused(code, message) = case.want {
        assert_eq!(output.status.code(), Some(code), "{context}");
        assert_eq!(stdout, "", "{context}");
        assert!(stderr.starts_with("error: ") && stderr.contains(message), "{context}");
        if code == 1 {
            assert_eq!(stderr.lines().count(), 1, "one line: {context}");
        }
        return;
    }
    assert!(output.status.success(), "{context}");
    assert_eq!(stderr, "", "{context}");
    match case.want {
        Want::Lines(lines) => assert_eq!(stdout.lines().collect::<Vec<_>>(), lines, "{context}"),
        Want::Contains(parts) => {
            for part in parts {
                assert!(stdout.contains(part), "missing `{part}`: {context}");
            }
        }
        Want::Json(pointers) => {
            let lines: Vec<Value> = stdout
                .lines()
                .map(|line| serde_json::from_str(line).expect("a JSON line"))
                .collect();
            for (pointer, want) in pointers {
                let want: Value = serde_json::from_str(want).expect("JSON text");
                let got = lines[0].pointer(pointer).unwrap_or(&Value::Null);
                assert_eq!(got, &want, "{pointer}: {context}");
            }
            let mut found = Vec::new();
            lines.iter().for_each(|line| numbers(line, &mut found));
            for n in found {
                assert!(n.as_u64().is_some_and(|n| n <= MAX_SAFE_INTEGER), "{n}: {context}");
            }
        }
        Want::Refused(..) => unreachable!(),
    }
}

#[test]
fn convert_writes_every_form_and_refuses_clearly() {
    let cases = [
        // Every input form to every output form.
        case(&["convert", "--to", "uuid", TYPEID, ULID, UUID, HEX], Want::Lines(&[UUID; 4])),
        case(&["convert", "--to", "ulid", TYPEID, UUID], Want::Lines(&[ULID; 2])),
        case(&["convert", "--to", "typeid", TYPEID, UUID], Want::Lines(&[TYPEID, SUFFIX])),
        case(
            &["convert", "--to", "typeid:order", TYPEID, ULID],
            Want::Lines(&["order_01h455vb4pex5vsknk084sn02q"; 2]),
        ),
        case(&["convert", "--to", "decimal", TYPEID], Want::Lines(&[DECIMAL])),
        case(&["convert", "--to", "hex", ULID], Want::Lines(&[HEX])),
        // A decimal above 2^64 - 1 is a 128-bit ID: what `--to decimal` writes reads back.
        case(&["convert", "--to", "uuid", DECIMAL], Want::Lines(&[UUID])),
        case(&["convert", "--to", "typeid:user", DECIMAL], Want::Lines(&[TYPEID])),
        // A 64-bit ID: decimal and hex only.
        case(
            &["convert", "--to", "hex", "1541815603606036480"],
            Want::Lines(&["1565a11f6217a000"]),
        ),
        case(
            &["convert", "--to", "decimal", "cb54ecf2840a0015"],
            Want::Lines(&["14651596014084554773"]),
        ),
        Case {
            args: &["convert", "--to", "uuid"],
            stdin: Some("user_01h455vb4pex5vsknk084sn02q\n\n01H455VB4PEX5VSKNK084SN02Q\n"),
            want: Want::Lines(&[UUID; 2]),
        },
        // Refusals: bad IDs exit 1 with one line, bad flags exit 2 with clap's message.
        case(
            &["convert", "--to", "uuid", "1541815603606036480"],
            Want::Refused(1, "to uuid: it reads as a 64-bit"),
        ),
        case(
            &["convert", "--to", "typeid:user", "1541815603606036480"],
            Want::Refused(1, "uuid, ulid and typeid hold 128-bit IDs"),
        ),
        case(
            &["convert", "--to", "uuid", "not-an-id"],
            Want::Refused(1, "`not-an-id` is not an ID"),
        ),
        case(
            &["convert", "--to", "uuid", "340282366920938463463374607431768211456"],
            Want::Refused(1, "is not an ID of any known format"),
        ),
        case(
            &["convert", "--to", "uuid", "0ujtsYcgvSTl8PAuAdqWYSMnLOv"],
            Want::Refused(1, "a ksuid ID, which has neither 64 nor 128 bits"),
        ),
        Case {
            args: &["convert", "--to", "uuid"],
            stdin: Some("\nbad\n01H455VB4PEX5VSKNK084SN02Q\n"),
            want: Want::Refused(1, "stdin line 2"),
        },
        case(&["convert", "--to", "guid", UUID], Want::Refused(2, "unknown form `guid`")),
        case(&["convert", "--to", "typeid:", UUID], Want::Refused(2, "an empty prefix")),
        case(&["convert", "--to", "typeid:User", UUID], Want::Refused(2, "only a-z and _")),
        case(&["convert", UUID], Want::Refused(2, "--to <FORM>")),
    ];
    for case in &cases {
        check(case);
    }
}

#[test]
fn decode_shows_the_forms_and_writes_wide_integers_as_strings() {
    let cases = [
        // A 62-bit rand_b is a string, exact; the narrow fields stay numbers.
        case(
            &["decode", "--layout", "auto", "--json", UUID],
            Want::Json(&[
                ("/layout", "\"uuid-v7\""),
                ("/fields/rand_b", "\"4381636308810498135\""),
                ("/fields/rand_a", "1867"),
                ("/forms/ulid", "\"01H455VB4PEX5VSKNK084SN02Q\""),
                ("/forms/decimal", "\"2040782911132661522235942288014082135\""),
                ("/forms/hex", "\"01890a5dac96774bbcceb302099a8057\""),
            ]),
        ),
        case(
            &["decode", "--layout", "auto", "--json", TYPEID],
            Want::Json(&[
                ("/layout", "\"typeid\""),
                ("/fields/rand_b", "\"4381636308810498135\""),
                ("/forms/uuid", "\"01890a5d-ac96-774b-bcce-b302099a8057\""),
                ("/forms/typeid", "\"user_01h455vb4pex5vsknk084sn02q\""),
            ]),
        ),
        case(
            &["decode", "--layout", "uuid7", "--type-prefix", "user", "--json", TYPEID],
            Want::Json(&[
                ("/id", "\"user_01h455vb4pex5vsknk084sn02q\""),
                ("/forms/uuid", "\"01890a5d-ac96-774b-bcce-b302099a8057\""),
                ("/forms/ulid", "\"01H455VB4PEX5VSKNK084SN02Q\""),
                ("/forms/typeid", "\"user_01h455vb4pex5vsknk084sn02q\""),
                ("/forms/decimal", "\"2040782911132661522235942288014082135\""),
                ("/forms/hex", "\"01890a5dac96774bbcceb302099a8057\""),
            ]),
        ),
        // 64-bit IDs have no forms; a 64-bit layout's fields fit JavaScript's numbers, and
        // sequence's one 63-bit field is a string even when its value is small.
        case(&["decode", "--json", "1541815603606036480"], Want::Json(&[("/forms", "null")])),
        case(
            &["decode", "--layout", "sequence", "--json", "42"],
            Want::Json(&[("/fields/value", "\"42\"")]),
        ),
        case(
            &["decode", "--layout", "auto", "--json", "1541815603606036480"],
            Want::Json(&[("/forms", "null")]),
        ),
        // The table shows the forms too.
        case(&["decode", "--layout", "uuid7", UUID], Want::Contains(&[ULID, SUFFIX, DECIMAL, HEX])),
        case(
            &["decode", "--layout", "auto", TYPEID],
            Want::Contains(&[UUID, ULID, TYPEID, DECIMAL, HEX, RAND_B]),
        ),
        // A prefixed TypeID read as uuid7 without --type-prefix: the error names the flag.
        case(
            &["decode", "--layout", "uuid7", "--format", "typeid", TYPEID],
            Want::Refused(
                1,
                "TypeID prefix `user` where none was expected; pass --type-prefix user",
            ),
        ),
        case(
            &["decode", "--layout", "uuid7", "--type-prefix", "order", TYPEID],
            Want::Refused(1, "where `order` was expected; pass --type-prefix user"),
        ),
        case(
            &["decode", "--layout", "uuid7", "--type-prefix", "user", SUFFIX],
            Want::Refused(1, "none where `user` was expected; leave out --type-prefix"),
        ),
    ];
    for case in &cases {
        check(case);
    }
}
