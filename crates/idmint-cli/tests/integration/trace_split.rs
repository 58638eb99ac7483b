//! `--counter-bits`: the `trace-id` chunk/counter split on the command line, through the real
//! binary: `explain`, `gen` and `decode` agree on a split other than elfo's, elfo's is the
//! default, and a width the layout cannot take (or any width for another layout) is one
//! `error:` line.

use std::process::Command;

/// The binary under test.
const IDMINT: &str = env!("CARGO_BIN_EXE_idmint");

/// Runs `idmint args`: (exit success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(IDMINT).args(args).output().expect("run idmint");
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).expect("utf-8");
    (output.status.success(), text(output.stdout), text(output.stderr))
}

/// What one run must give: success with stdout containing each string, or one `error:` line
/// containing the string.
enum Want<'a> {
    Prints(&'a [&'a str]),
    Fails(&'a str),
}

fn check(args: &[&str], want: Want<'_>) -> String {
    let (ok, stdout, stderr) = run(args);
    let context = format!("idmint {}\n--- stdout:\n{stdout}--- stderr:\n{stderr}", args.join(" "));
    match want {
        Want::Prints(pieces) => {
            assert!(ok && stderr.is_empty(), "{context}");
            for piece in pieces {
                assert!(stdout.contains(piece), "lacks {piece:?}: {context}");
            }
        }
        Want::Fails(message) => {
            assert!(!ok && stdout.is_empty(), "{context}");
            assert_eq!(stderr.lines().count(), 1, "{context}");
            assert!(stderr.starts_with("error: ") && stderr.contains(message), "{context}");
        }
    }
    stdout
}

#[test]
fn counter_bits_split_trace_ids() {
    use Want::{Fails, Prints};
    // 2^6 chunks of 2^16 - 1 counters: 4,194,240 per second (elfo's: 4,190,208).
    check(&["explain", "trace-id", "--counter-bits", "16"], Prints(&["4,194,240"]));
    check(&["explain", "trace-id"], Prints(&["4,190,208"]));
    let ids = check(
        &["gen", "--layout", "trace-id", "--counter-bits", "16", "-n", "3", "node_no=9"],
        Prints(&[]),
    );
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    for id in &ids {
        let json = check(
            &["decode", "--layout", "trace-id", "--counter-bits", "16", "--json", id],
            Prints(&[r#""node_no":9"#]),
        );
        let decoded: serde_json::Value = serde_json::from_str(&json).expect("json");
        let counter = decoded["fields"]["counter"].as_u64().expect("counter");
        assert!((1..=65_535).contains(&counter), "{json}");
    }
    check(
        &["gen", "--layout", "trace-id", "--counter-bits", "22"],
        Fails("cannot use --counter-bits: trace-id's counter must be 1..=21 bits"),
    );
    check(
        &["gen", "--layout", "snowflake", "--counter-bits", "10"],
        Fails("layout `snowflake` has no counter width to set"),
    );
}
