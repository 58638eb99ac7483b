//! What operators expect of a command-line tool, checked on the real binary: `gen | decode`
//! through a pipe, `--json` that parses, shell completions that the shell accepts, man pages
//! that `man -l` renders, clap's whole error with its tip, and a log without escape codes in
//! a file (with `--color always` as the negative control) or as JSON lines.

use std::{
    io::Write,
    process::{Command, Output, Stdio},
    time::Duration,
};

use crate::common::idmint;

/// Runs `idmint args` with `stdin` piped in; its output.
fn run(args: &[&str], stdin: &str) -> Output {
    let mut child = idmint(args, &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idmint");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8")
}

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect()
}

#[test]
fn gen_piped_into_decode_json_prints_one_object_per_id() {
    let ids = stdout(&run(&["gen", "-n", "3"], ""));
    assert_eq!(ids.lines().count(), 3);
    let objects = json_lines(&stdout(&run(&["decode", "--json"], &ids)));
    assert_eq!(objects.len(), 3);
    for (object, id) in objects.iter().zip(ids.lines()) {
        assert_eq!(object["id"], id);
        assert_eq!(object["layout"], "snowflake");
        assert!(object["fields"]["sequence"].is_u64() && object["time"].is_string(), "{object}");
    }
    // `-` reads stdin too; a bad line is named by its number.
    assert_eq!(json_lines(&stdout(&run(&["decode", "--json", "-"], &ids))).len(), 3);
    let bad = run(&["decode"], &format!("{ids}garbage\n"));
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("stdin line 4"));
}

#[test]
fn json_flags_print_json() {
    let generated = json_lines(&stdout(&run(&["gen", "-n", "2", "--json"], "")));
    assert_eq!(generated.len(), 2);
    let encoded = json_lines(&stdout(&run(
        &["encode", "--json", "timestamp=1000", "datacenter=1", "worker=7", "sequence=0"],
        "",
    )));
    assert_eq!(encoded[0]["fields"]["worker"], 7);
    let layouts = stdout(&run(&["layouts", "--json"], ""));
    let list: serde_json::Value = serde_json::from_str(&layouts).expect("one JSON array");
    assert!(list.as_array().is_some_and(|l| l.iter().any(|e| e["name"] == "snowflake")));
    // Plain `layouts` ends with a newline, like every other command's output.
    assert!(stdout(&run(&["layouts"], "")).ends_with('\n'));
}

#[test]
fn completions_are_scripts_the_shell_accepts() {
    let script = stdout(&run(&["completions", "bash"], ""));
    assert!(script.contains("idmint"), "no completions for idmint");
    let mut bash = Command::new("bash").arg("-n").stdin(Stdio::piped()).spawn().expect("bash");
    bash.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("write");
    assert!(bash.wait().expect("bash -n").success(), "bash -n refused the script");
    // Negative control: bash -n does refuse a broken script.
    let mut broken = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash");
    broken.stdin.take().expect("stdin").write_all(b"_idmint() { if then\n").expect("write");
    assert!(!broken.wait().expect("bash -n").success());
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        assert!(stdout(&run(&["completions", shell], "")).contains("idmint"), "{shell}");
    }
}

#[test]
fn man_writes_pages_that_man_renders() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let listed = stdout(&run(&["man", &dir.path().to_string_lossy()], ""));
    let pages: Vec<&str> = listed.lines().collect();
    assert!(pages.len() > 10, "too few pages: {pages:?}");
    for page in ["idmint.1", "idmint-serve.1", "idmint-decode.1"] {
        let path = dir.path().join(page);
        assert!(pages.contains(&path.to_string_lossy().as_ref()), "{page} not written");
        let rendered = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap_or_else(|e| panic!("man is required (Debian's man-db): {e}"));
        let text = String::from_utf8_lossy(&rendered.stdout);
        assert!(rendered.status.success() && text.contains("NAME"), "man -l {page}:\n{text}");
    }
}

#[test]
fn a_refused_command_line_keeps_clap_s_tip() {
    let output = run(&["genn"], "");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("tip: a similar subcommand exists: 'gen'"), "{stderr}");
}

/// Starts `idmint serve` with `args`, stderr into a file; its log once it served a request.
fn serve_log(args: &[&str]) -> String {
    let dir = tempfile::tempdir().expect("temporary directory");
    let log = dir.path().join("serve.log");
    let file = std::fs::File::create(&log).expect("log file");
    let data = dir.path().join("data");
    let mut command = idmint(["serve", "--listen", "127.0.0.1:0", "--data-dir"], &[]);
    command.arg(&data).args(args).env_remove("NO_COLOR").stdout(Stdio::null()).stderr(file);
    let mut child = command.spawn().expect("start idmint serve");
    let started = crate::common::poll(Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("serving"))
    });
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).expect("read log");
    assert!(started, "no serving line:\n{text}");
    text
}

#[test]
fn a_log_in_a_file_has_no_escape_codes_and_json_lines_parse() {
    let plain = serve_log(&[]);
    assert!(!plain.contains('\u{1b}'), "escape codes in a log file:\n{plain}");
    // Negative control: asked for colour, the same log has escape codes.
    let coloured = serve_log(&["--color", "always"]);
    assert!(coloured.contains('\u{1b}'), "--color always gave no colour:\n{coloured}");
    let json = serve_log(&["--log-format", "json"]);
    let lines = json_lines(&json);
    assert!(
        lines.iter().any(|l| l["fields"]["message"] == "idmint is serving"),
        "no serving line in {lines:?}"
    );
}
