//! Black-box tests of the `idmint` binary: every run goes through the real executable, and
//! every expectation through one `check` helper.

use std::{
    collections::HashSet,
    io::{BufRead, BufReader, Read},
    path::PathBuf,
    process::{Command, Stdio},
};

use serde_json::Value;

/// The binary under test.
use crate::common::IDMINT;

/// The seed vectors shared with the core.
const SEED_VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/seed-vectors.json");

/// What a run of `idmint` must produce.
#[derive(Debug, Clone, Copy)]
enum Expect<'a> {
    /// Exit 0, nothing on stderr, and exactly this on stdout.
    Prints(&'a str),
    /// Exit 0, nothing on stderr, and stdout containing each of these.
    Contains(&'a [&'a str]),
    /// Exit 0 and nothing on stderr; stdout is returned for further checks.
    Succeeds,
    /// Exit 0 and exactly one line on stderr, `note: ...` containing this.
    Notes(&'a str),
    /// A non-zero exit, nothing on stdout, and exactly one line on stderr, `error: ...`.
    Fails,
}

/// Runs `idmint args` and checks the outcome; returns stdout.
fn check(args: &[&str], expect: Expect<'_>) -> String {
    let output = Command::new(IDMINT).args(args).output().expect("run idmint");
    let stdout = String::from_utf8(output.stdout).expect("utf-8 stdout");
    let stderr = String::from_utf8(output.stderr).expect("utf-8 stderr");
    let context = format!("idmint {}\n--- stdout:\n{stdout}--- stderr:\n{stderr}", args.join(" "));
    assert!(!stderr.contains("panicked"), "panic: {context}");
    match expect {
        Expect::Fails => {
            assert!(!output.status.success(), "expected failure: {context}");
            assert_eq!(stdout, "", "stdout on failure: {context}");
            assert!(stderr.starts_with("error: "), "no `error:` prefix: {context}");
            assert!(stderr.ends_with('\n'), "unterminated line: {context}");
            if output.status.code() == Some(2) {
                // A command line clap refused: its whole message, to its pointer to --help.
                assert!(stderr.contains("--help"), "clap's message was cut: {context}");
            } else {
                assert_eq!(output.status.code(), Some(1), "{context}");
                assert_eq!(stderr.lines().count(), 1, "not one stderr line: {context}");
            }
        }
        Expect::Notes(text) => {
            assert!(output.status.success(), "expected success: {context}");
            assert_eq!(stderr.lines().count(), 1, "not one stderr line: {context}");
            assert!(stderr.starts_with("note: ") && stderr.contains(text), "{context}");
        }
        Expect::Prints(_) | Expect::Contains(_) | Expect::Succeeds => {
            assert!(output.status.success(), "expected success: {context}");
            assert_eq!(stderr, "", "stderr on success: {context}");
            if let Expect::Prints(text) = expect {
                assert_eq!(stdout, text, "{context}");
            }
            if let Expect::Contains(parts) = expect {
                for part in parts {
                    assert!(stdout.contains(part), "missing `{part}`: {context}");
                }
            }
        }
    }
    stdout
}

/// `decode --json` of one ID: the parsed object.
fn decode_json(layout: &str, extra: &[&str], id: &str) -> Value {
    let mut args = vec!["decode", "--layout", layout, "--json"];
    args.extend_from_slice(extra);
    args.push(id);
    let stdout = check(&args, Expect::Succeeds);
    assert_eq!(stdout.lines().count(), 1, "one line of JSON: {stdout}");
    serde_json::from_str(&stdout).expect("decode --json prints JSON")
}

/// A file in the temp folder, unique to this test process, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> Self {
        let path = std::env::temp_dir()
            .join(format!("idmint-cli-test-{}-{name}.toml", std::process::id()));
        std::fs::write(&path, text).expect("write temp file");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn seed_vectors_encode_and_decode() {
    let text = std::fs::read_to_string(SEED_VECTORS).expect("read seed vectors");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("seed vectors are JSON");
    let mut run = 0;
    for case in &cases {
        let layout = case["layout"].as_str().expect("layout");
        let mut options = Vec::new();
        if let Some(format) = case.get("format").and_then(Value::as_str) {
            options.extend(["--format".to_owned(), format.to_owned()]);
        }
        if let Some(epoch) = case.get("args").and_then(|a| a.get("epoch")) {
            options.extend(["--epoch".to_owned(), epoch.to_string()]);
        }
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let fields: Vec<String> = case
            .get("fields")
            .and_then(Value::as_object)
            .map(|fields| {
                fields
                    .iter()
                    .map(|(name, value)| match value {
                        Value::String(text) => format!("{name}={text}"),
                        other => format!("{name}={other}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let encode = |expect| {
            let mut args = vec!["encode", "--layout", layout];
            args.extend_from_slice(&options);
            args.extend(fields.iter().map(String::as_str));
            check(&args, expect)
        };
        let expect_error = case.get("expect").and_then(Value::as_str) == Some("error");
        match (expect_error, case.get("op").and_then(Value::as_str)) {
            (true, Some("encode")) => {
                encode(Expect::Fails);
            }
            (true, Some("decode")) => {
                let id = case["id"].as_str().expect("id");
                let mut args = vec!["decode", "--layout", layout, "--json"];
                args.extend_from_slice(&options);
                args.push(id);
                check(&args, Expect::Fails);
            }
            (false, _) => {
                let id = case["id"].as_str().expect("id");
                encode(Expect::Prints(&format!("{id}\n")));
                let decoded = decode_json(layout, &options, id);
                assert_eq!(decoded["layout"], layout, "{case}");
                assert_eq!(decoded["fields"], case["fields"], "{case}");
                let timeless = layout == "decimal-id";
                assert_eq!(decoded["time"].is_null(), timeless, "{case}");
            }
            (true, op) => panic!("unknown op {op:?} in {case}"),
        }
        run += 1;
    }
    assert_eq!(run, cases.len());
    assert_eq!(run, 52, "the seed file changed: review the new cases");
}

#[test]
fn decode_json_keeps_the_layout_order() {
    check(
        &["decode", "--layout", "flake", "--json", "5828128208445124609"],
        Expect::Prints(concat!(
            r#"{"layout":"flake","id":"5828128208445124609","#,
            r#""fields":{"timestamp":1389534046279,"datacenter":7,"worker":3,"counter":1},"#,
            r#""time":"2014-01-12T13:40:46.279Z"}"#,
            "\n"
        )),
    );
    // The id is shown in the layout's usual form whatever form it came in.
    let decoded = decode_json("flake", &["--format", "base64le"], "BXDOxnfZflk=");
    assert_eq!(decoded["id"], "6448830824900882437");
    let decoded = decode_json("decimal-id", &[], "14150009200065");
    assert_eq!(decoded["time"], Value::Null);
}

#[test]
fn sequence_ids_encode_and_decode() {
    check(&["encode", "--layout", "sequence", "value=42"], Expect::Prints("42\n"));
    let decoded = decode_json("sequence", &[], "9223372036854775807");
    // 63 bits: a string, which JavaScript and jq read exactly.
    assert_eq!(decoded["fields"]["value"], "9223372036854775807");
    assert_eq!(decoded["time"], Value::Null);
    check(
        &["decode", "--layout", "sequence", "--format", "hex", "000000000000002a"],
        Expect::Contains(&["42"]),
    );
}

#[test]
fn decode_table() {
    check(
        &["decode", "--layout", "flake", "5828128208445124609"],
        Expect::Prints(
            "layout      flake
id          5828128208445124609
time        2014-01-12T13:40:46.279Z
timestamp   1389534046279  (42 bits)
datacenter  7              (5 bits)
worker      3              (5 bits)
counter     1              (12 bits)
",
        ),
    );
}

#[test]
fn gen_a_million_snowflakes() {
    let stdout = check(&["gen", "--layout", "snowflake", "-n", "1000000"], Expect::Succeeds);
    let mut count = 0u64;
    let mut last = 0u64;
    for line in stdout.lines() {
        let id: u64 = line.parse().expect("decimal id");
        assert!(id > last, "{id} after {last}");
        last = id;
        count += 1;
    }
    assert_eq!(count, 1_000_000);
}

#[test]
fn gen_every_layout_with_node_fields() {
    let cases: [(&str, &[&str]); 11] = [
        ("snowflake", &["datacenter=3", "worker=7"]),
        ("sonyflake", &["machine=4242"]),
        ("sonyflake-v2", &["machine=4242"]),
        ("icicle", &["shard=789"]),
        ("flake", &["datacenter=7", "worker=3"]),
        ("lable", &["generator_id=300", "cluster_id=3", "mode=time-sequential"]),
        ("trace-id", &["node_no=5045"]),
        ("decimal-id", &["generator_id=92", "launch_id=65"]),
        ("hot-guid", &["process=1e98e91234", "shard_key=208"]),
        ("js53", &["node=42"]),
        ("uuid7", &["generator=4242"]),
    ];
    // Every layout with a generator; `sequence` has none (its IDs come from a segment store)
    // and says so in one line.
    assert_eq!(cases.len() + 1, idmint_core::Layout::builtins().len());
    let refused = std::process::Command::new(IDMINT)
        .args(["gen", "--layout", "sequence"])
        .output()
        .expect("run idmint");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.lines().count() == 1, "{stderr}");
    assert!(stderr.contains("segment store"), "{stderr}");
    check(&["gen", "--layout", "sequence"], Expect::Fails);
    for (layout, node) in cases {
        let mut args = vec!["gen", "--layout", layout, "-n", "1000"];
        args.extend_from_slice(node);
        let expect = match layout {
            "decimal-id" => Expect::Notes("unique within this launch_id only"),
            _ => Expect::Succeeds,
        };
        let stdout = check(&args, expect);
        let ids: Vec<&str> = stdout.lines().collect();
        assert_eq!(ids.len(), 1000, "{layout}");
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 1000, "{layout}: duplicates");
        for id in [ids[0], ids[999]] {
            let fields = decode_json(layout, &[], id)["fields"].clone();
            for assignment in node {
                let (name, value) = assignment.split_once('=').unwrap();
                let got = match &fields[name] {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                assert_eq!(got, value, "{layout} {id}: {name}");
            }
        }
    }
}

/// A second `gen` run with the same node fields never repeats the first: the first ends after
/// its last ID's tick, so the second starts in a later one (TraceId: a 1 s tick). The negative
/// control: a generator of the same fields started in the first run's second makes the first
/// run's first ID again, which is what a second run in that second would print.
#[test]
fn a_second_gen_run_never_repeats_the_first() {
    use idmint_core::{Clock, FieldValue, GeneratorConfig, Layout, Next, SystemClock};
    let run = || check(&["gen", "--layout", "trace-id", "-n", "3", "node_no=9"], Expect::Succeeds);
    let first = run();
    let second = run();
    let (a, b): (HashSet<&str>, HashSet<&str>) =
        (first.lines().collect(), second.lines().collect());
    assert_eq!((a.len(), b.len()), (3, 3));
    assert!(a.is_disjoint(&b), "a second run repeated the first:\n{first}{second}");

    let layout = Layout::builtin("trace-id").expect("trace-id");
    let id =
        layout.parse(first.lines().next().expect("an id"), layout.default_format()).expect("id");
    let now = SystemClock.now_ms();
    let second_ms = layout.time_ms(id, now).expect("time").expect("a time");
    let node = [("node_no".to_owned(), FieldValue::Number(9))];
    let generator = layout.generator(&node, &GeneratorConfig::default()).expect("generator");
    let again = match generator.next(second_ms).expect("next") {
        Next::Ready(id) => id,
        other => panic!("{other:?}"),
    };
    assert_eq!(again, id, "within that second a new run starts over: the hazard is real");
}

/// A layout without time (DecimalId) repeats its IDs on every run with the same fields: `gen`
/// refuses it without an explicit launch, and with one says in one line what is unique.
#[test]
fn gen_refuses_a_layout_without_time_unless_given_a_launch() {
    check(&["gen", "--layout", "decimal-id", "-n", "2"], Expect::Fails);
    check(&["gen", "--layout", "decimal-id", "-n", "2", "generator_id=1"], Expect::Fails);
    let stdout = check(
        &["gen", "--layout", "decimal-id", "-n", "2", "launch_id=7"],
        Expect::Notes("unique within this launch_id only"),
    );
    assert_eq!(stdout, "10000000007\n20000000007\n");
}

#[test]
fn gen_hot_guid_derives_the_process_from_host_and_pid() {
    let child = Command::new(IDMINT)
        .args(["gen", "--layout", "hot-guid"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idmint");
    let pid = child.id();
    let output = child.wait_with_output().expect("wait for idmint");
    assert!(output.status.success());
    let id = String::from_utf8(output.stdout).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let expected: String = idmint_core::HotGuid::process_bytes(&host, pid)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let decoded = decode_json("hot-guid", &[], id.trim());
    assert_eq!(decoded["fields"]["process"], expected.as_str());
}

#[test]
fn gen_formats_and_counts() {
    let stdout = check(&["gen", "-n", "3", "--format", "base32", "worker=1"], Expect::Succeeds);
    assert_eq!(stdout.lines().count(), 3);
    assert!(stdout.lines().all(|l| l.len() == 13), "{stdout}");
    let stdout = check(&["gen", "--borrow-ms", "1000", "-n", "10000"], Expect::Succeeds);
    assert_eq!(stdout.lines().count(), 10_000);
    assert_eq!(check(&["gen"], Expect::Succeeds).lines().count(), 1);
}

#[test]
fn gen_ends_quietly_when_stdout_closes() {
    let mut child = Command::new(IDMINT)
        .args(["gen", "-n", "100000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idmint");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.trim().parse::<u64>().is_ok(), "{first}");
    // The reader is dropped here: the pipe closes like `idmint gen | head -1`.
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "{status}: {stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn explain_layouts() {
    check(
        &["explain", "snowflake"],
        Expect::Contains(&["2080-07-10T17:30:30.209Z", "4,096", "1,024", "timestamp (41)"]),
    );
    let stdout = check(&["explain", "--layout", "snowflake"], Expect::Succeeds);
    assert!(!stdout.contains("warning"), "{stdout}");
    check(&["explain", "trace-id"], Expect::Contains(&["2^25 s (about 388 days)"]));
    check(&["explain", "hot-guid"], Expect::Contains(&["2^32 s", "127"]));
    check(&["explain", "decimal-id"], Expect::Contains(&["10^18", "counter", "order: sharded"]));
    check(&["explain", "trace-id"], Expect::Contains(&["order: periodic"]));
    check(&["explain", "snowflake"], Expect::Contains(&["order: increasing"]));
    check(&["explain", "sequence"], Expect::Contains(&["value (63)", "no clock", "segment store"]));
    for (name, _) in idmint_core::Layout::builtins() {
        let stdout = check(&["explain", name], Expect::Succeeds);
        assert!(stdout.lines().all(|l| l.len() <= 79), "{name}:\n{stdout}");
        let json = check(&["explain", name, "--json"], Expect::Succeeds);
        let json: Value = serde_json::from_str(&json).expect("explain --json prints JSON");
        assert_eq!(json["layout"], *name);
        let order = idmint_core::Layout::builtin(name).expect("built-in").order();
        assert_eq!(json["order"], order.name(), "{name}");
        assert!(json["capacity"]["generators"].is_u64());
    }
    let json = check(&["explain", "snowflake", "--json"], Expect::Succeeds);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["capacity"]["end"], "2080-07-10T17:30:30.209Z");
    assert_eq!(json["warnings"], Value::Array(Vec::new()));
}

#[test]
fn explain_warns_about_short_lived_layouts() {
    let layout = |name: &str, epoch_ms: u64, tick_ms: u64, time_bits: u32| {
        TempFile::new(
            name,
            &format!(
                "name = \"{name}\"\nbits = 63\nepoch_ms = {epoch_ms}\ntick_ms = {tick_ms}\n\n\
                 [[fields]]\nname = \"timestamp\"\nbits = {time_bits}\nrole = \"time\"\n\n\
                 [[fields]]\nname = \"worker\"\nbits = {}\n\n\
                 [[fields]]\nname = \"sequence\"\nbits = 12\nrole = \"sequence\"\n",
                63 - 12 - time_bits
            ),
        )
    };
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64;
    // 20 bits of ms: it ran out 17 minutes after 1970.
    let ran_out = layout("ran-out", 0, 1, 20);
    let stdout = check(&["explain", "--layout-file", ran_out.path()], Expect::Succeeds);
    assert!(
        stdout.lines().any(|l| l.starts_with("warning: ") && l.contains("ran out")),
        "{stdout}"
    );
    // 20 bits of 2.5-minute ticks from now: about 5 years.
    let soon = layout("soon", now_ms, 150_000, 20);
    let stdout = check(&["explain", "--layout-file", soon.path()], Expect::Succeeds);
    assert!(
        stdout.lines().any(|l| l.starts_with("warning: ") && l.contains("runs out")),
        "{stdout}"
    );
    let json = check(&["explain", "--layout-file", soon.path(), "--json"], Expect::Succeeds);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["warnings"].as_array().map(Vec::len), Some(1), "{json}");
    // 41 bits of ms from now: 69 years, no warning; and it generates and decodes.
    let long = layout("long", now_ms - 1000, 1, 41);
    let stdout = check(&["explain", "--layout-file", long.path()], Expect::Succeeds);
    assert!(!stdout.contains("warning"), "{stdout}");
    let ids =
        check(&["gen", "--layout-file", long.path(), "-n", "5", "worker=9"], Expect::Succeeds);
    let first = ids.lines().next().unwrap();
    let mut args = vec!["decode", "--layout-file", long.path(), "--json", first];
    let json: Value = serde_json::from_str(&check(&args, Expect::Succeeds)).unwrap();
    assert_eq!(json["fields"]["worker"], 9);
    // `--epoch` moves a custom layout's epoch too: 1 s later, so the same id reads 1 s later.
    let epoch = now_ms.to_string();
    args.splice(1..1, ["--epoch", epoch.as_str()]);
    let moved: Value = serde_json::from_str(&check(&args, Expect::Succeeds)).unwrap();
    assert_ne!(moved["time"], json["time"]);
}

#[test]
fn invalid_layout_files_give_one_error_line() {
    let cases = [
        (
            "bits",
            "name = \"x\"\nbits = 62\nepoch_ms = 0\n[[fields]]\nname = \"t\"\nbits = 62\nrole = \"time\"\n",
        ),
        ("syntax", "name = \"x\"\nbits = = 63\n"),
        ("missing", "name = \"x\"\nbits = 63\n"),
        ("unknown", "name = \"x\"\nbits = 63\nepoch_ms = 0\ncolour = 1\nfields = []\n"),
        (
            "order",
            "name = \"x\"\nbits = 63\nepoch_ms = 0\n[[fields]]\nname = \"s\"\nbits = 12\nrole = \"sequence\"\n[[fields]]\nname = \"t\"\nbits = 51\nrole = \"time\"\n",
        ),
    ];
    for (name, text) in cases {
        let file = TempFile::new(&format!("bad-{name}"), text);
        check(&["explain", "--layout-file", file.path()], Expect::Fails);
        check(&["gen", "--layout-file", file.path()], Expect::Fails);
    }
    check(&["explain", "--layout-file", "/nonexistent/idmint.toml"], Expect::Fails);
}

#[test]
fn layouts_lists_every_builtin() {
    let stdout = check(&["layouts"], Expect::Succeeds);
    assert_eq!(stdout.lines().count(), idmint_core::Layout::builtins().len());
    for (line, (name, description)) in stdout.lines().zip(idmint_core::Layout::builtins()) {
        assert!(line.starts_with(name) && line.ends_with(description), "{line}");
    }
}

#[test]
fn help_and_version() {
    for command in [
        &["--help"][..],
        &["gen", "--help"],
        &["encode", "--help"],
        &["decode", "--help"],
        &["explain", "--help"],
        &["layouts", "--help"],
        &["icicle", "set-shard", "--help"],
        &["help", "gen"],
    ] {
        check(command, Expect::Contains(&["Usage:", "Examples:"]));
    }
    check(&["--version"], Expect::Contains(&["idmint "]));
}

#[test]
fn help_examples_fit_and_run() {
    for command in [
        "",
        "gen",
        "encode",
        "decode",
        "analyze",
        "keygen",
        "obfuscate",
        "explain",
        "layouts",
        "serve",
        "bench",
        "icicle set-shard",
        "doctor",
    ] {
        let args: Vec<&str> = command.split_whitespace().chain(["--help"]).collect();
        let help = check(&args, Expect::Succeeds);
        let examples = help.split("Examples:\n").nth(1).expect("an Examples: section");
        let mut lines = examples.lines().peekable();
        while let Some(line) = lines.next() {
            assert!(line.len() <= 79, "example too wide for a terminal: {line}");
            let mut example = line.trim().to_owned();
            while let Some(rest) = example.strip_suffix('\\') {
                example = format!("{rest}{}", lines.next().expect("continued line").trim());
            }
            // Examples that need a file or a shell, that start a server (which runs until it
            // is stopped), that load one (which needs it running) or that set up Redis nodes
            // (which need them running; tests/backends.rs runs set-shard on real ones), or that
            // check a data directory (tests/serve.rs runs doctor on real ones), or that mint on
            // Postgres or etcd (which need them running; the chaos harness's `embedded-fleet`
            // runs `gen` on real ones), are shown, not run.
            if ["|", ">", ".toml", ".json"].iter().any(|s| example.contains(s))
                || example.starts_with("idmint serve")
                || example.starts_with("idmint bench")
                || example.starts_with("idmint icicle")
                || example.starts_with("idmint doctor")
                || example.contains("--postgres")
                || example.contains("--etcd")
            {
                continue;
            }
            let words: Vec<&str> = example.split_whitespace().collect();
            assert_eq!(words[0], "idmint", "{example}");
            check(&words[1..], Expect::Succeeds);
        }
    }
}

#[test]
fn bad_input_gives_one_error_line() {
    let fields = ["timestamp=1", "datacenter=1", "worker=1", "sequence=1"];
    let encode = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec!["encode"];
        args.extend_from_slice(extra);
        args
    };
    let with_fields = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = encode(extra);
        args.extend_from_slice(&fields);
        args
    };
    let cases: Vec<Vec<&str>> = vec![
        with_fields(&["--layout", "nope"]),
        with_fields(&["--format", "nope"]),
        with_fields(&["colour=1"]),
        with_fields(&["worker=2"]),
        encode(&["timestamp=1", "datacenter=1", "worker=1"]),
        encode(&["timestamp=1", "datacenter=32", "worker=1", "sequence=1"]),
        encode(&["timestamp=1", "datacenter=x", "worker=1", "sequence=1"]),
        encode(&["timestamp=1", "datacenter=-1", "worker=1", "sequence=1"]),
        encode(&["timestamp=99999999999999999999999", "datacenter=1", "worker=1", "sequence=1"]),
        encode(&["timestamp=1", "datacenter", "worker=1", "sequence=1"]),
        with_fields(&["--format", "uuid"]),
        vec![
            "encode",
            "--layout",
            "lable",
            "timestamp=0",
            "sequence=0",
            "generator_id=0",
            "cluster_id=0",
            "mode=up",
        ],
        vec!["gen", "-n", "0"],
        vec!["gen", "-n", "-1"],
        vec!["gen", "-n", "abc"],
        vec!["gen", "sequence=5"],
        vec!["gen", "colour=5"],
        vec!["gen", "worker=32"],
        vec!["gen", "--borrow-ms", "3600001"],
        vec!["gen", "--layout", "hot-guid", "process=xyz"],
        vec!["gen", "--layout", "trace-id", "--epoch", "0"],
        vec![
            "encode",
            "--layout",
            "trace-id",
            "--epoch",
            "1000",
            "timestamp=1",
            "node_no=1",
            "chunk_no=1",
            "counter=1",
        ],
        vec!["explain", "decimal-id", "--epoch", "1000"],
        vec!["decode", "garbage"],
        vec!["doctor", "/nonexistent/idmint-data"],
        vec!["doctor", "/dev/null"],
        vec!["decode", "--json", "9223372036854775808"],
        vec!["decode", "--layout", "hot-guid", "1234"],
        vec!["decode", "--layout", "sequence", "0"],
        vec!["encode", "--layout", "sequence", "value=9223372036854775808"],
        vec!["icicle", "set-shard", "redis://127.0.0.1:1/", "0"],
        vec!["icicle", "set-shard", "not a url", "1"],
        vec!["decode", "--layout", "lable", "--format", "hex", "xyz"],
        vec!["explain", "nope"],
        vec!["explain", "snowflake", "--layout", "flake"],
        vec!["explain", "--layout", "x", "--layout-file", "y"],
        vec!["encode", "--epoch"],
        vec!["encode", "--epoch", "soon"],
        vec!["bogus"],
        vec!["gen", "--bogus"],
        vec![],
    ];
    for args in cases {
        check(&args, Expect::Fails);
    }
}

/// `scripts/no-hidden-controls` on the binary under test. A build without
/// `IDMINT_NEGATIVE_CONTROLS=1` must have none of the hidden `--unsafe-no-…` flags, and the script
/// must pass it (CI runs the same script on the chaos harness's plain binary). A build with it
/// (as `scripts/test-all` makes) has every flag its features allow, and the script must fail
/// and name each: the negative control, showing the script catches a binary that has them.
#[test]
fn hidden_controls_exist_only_in_a_negative_control_build() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/no-hidden-controls");
    let output = Command::new(script).arg(IDMINT).output().expect("run scripts/no-hidden-controls");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let compiled: Vec<&str> = [
        ("--unsafe-no-fence", cfg!(all(idmint_negative_controls, feature = "etcd"))),
        ("--unsafe-no-durable-mark", cfg!(idmint_negative_controls)),
        ("--unsafe-no-clock-guard", cfg!(idmint_negative_controls)),
        ("--unsafe-no-restore-guard", cfg!(all(idmint_negative_controls, feature = "etcd"))),
        ("--unsafe-no-redis-guard", cfg!(all(idmint_negative_controls, feature = "redis"))),
        ("--unsafe-no-shared-redis-guard", cfg!(all(idmint_negative_controls, feature = "redis"))),
        ("--unsafe-no-promotion-bump", cfg!(all(idmint_negative_controls, feature = "postgres"))),
        ("--unsafe-no-pg-fence", cfg!(all(idmint_negative_controls, feature = "postgres"))),
    ]
    .into_iter()
    .filter_map(|(flag, on)| on.then_some(flag))
    .collect();
    if compiled.is_empty() {
        assert_eq!(output.status.code(), Some(0), "a plain build: {stderr}");
        assert!(stderr.contains("has none of the 8 hidden flags"), "{stderr}");
    } else {
        assert_eq!(output.status.code(), Some(1), "a negative-control build: {stderr}");
        let named = stderr.rsplit("hidden negative controls: ").next().unwrap_or_default();
        let named: Vec<&str> = named.split_whitespace().collect();
        assert_eq!(named, compiled, "{stderr}");
    }
}
