//! The deployment files in `deploy/`: the systemd unit passes `systemd-analyze verify` with no
//! warning (a misspelled key is the negative control), every `IDMINT_*` variable the
//! Dockerfile, the compose file and the Kubernetes example set is one `idmint serve` reads, and
//! the container's settings (listen address and data directory from the environment) serve IDs,
//! and the example Prometheus alert rules pass `promtool check rules` and their unit tests.
//! Docker itself cannot run on these machines, so images are not built here.

use idmint_testkit::http;
use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::{Server, idmint};

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(deploy_dir().join(name))
        .unwrap_or_else(|e| panic!("cannot read deploy/{name}: {e}"))
}

/// `systemd-analyze verify` on a copy of the unit whose `ExecStart` runs the idmint binary
/// of this build: its exit status and everything it printed.
fn verify_unit(unit: &str) -> (bool, String) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let binary = env!("CARGO_BIN_EXE_idmint");
    let path = dir.path().join("idmint.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/idmint", binary)).expect("write unit");
    let output = match Command::new("systemd-analyze").arg("verify").arg(&path).output() {
        Ok(output) => output,
        Err(e) => panic!("systemd-analyze is required (Debian's `systemd`): {e}"),
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn the_systemd_unit_verifies_without_warnings() {
    let unit = read("idmint.service");
    for hardening in ["DynamicUser=yes", "StateDirectory=idmint", "ProtectSystem=strict"] {
        assert!(unit.contains(hardening), "the unit lacks {hardening}");
    }
    let (ok, text) = verify_unit(&unit);
    assert!(ok && text.trim().is_empty(), "systemd-analyze verify: ok={ok}\n{text}");
    // Negative control: a misspelled key is reported, so silence above means something.
    let (_, text) = verify_unit(&unit.replace("ProtectSystem=strict", "ProtectSystm=strict"));
    assert!(text.contains("ProtectSystm"), "a misspelled key was not reported:\n{text}");
}

/// The `IDMINT_*` names in a text.
fn variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("IDMINT_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

#[test]
fn every_variable_the_deployment_files_set_is_one_idmint_serve_reads() {
    let help = idmint(["serve", "--help"], &[]).output().expect("idmint serve --help");
    let known = variables(&String::from_utf8_lossy(&help.stdout));
    assert!(known.contains("IDMINT_DATA_DIR"), "no variables in --help: {known:?}");
    for file in ["Dockerfile", "compose.yaml", "kubernetes/statefulset.yaml", "idmint.service"] {
        for name in variables(&read(file)) {
            assert!(known.contains(&name), "deploy/{file} sets {name}, which idmint serve ignores");
        }
    }
    let docker = read("Dockerfile");
    assert!(docker.matches("\nFROM ").count() + usize::from(docker.starts_with("FROM ")) >= 2);
    for line in ["USER idmint", "VOLUME [\"/var/lib/idmint\"]", "/readyz"] {
        assert!(docker.contains(line), "the Dockerfile lacks `{line}`");
    }
    let kube = read("kubernetes/statefulset.yaml");
    assert!(kube.contains("path: /readyz") && kube.contains("path: /healthz"));
    assert!(
        kube.contains("{name: IDMINT_GENERATOR_ID_FROM_HOSTNAME, value: \"true\"}"),
        "the StatefulSet serves the generator ID of each pod's ordinal"
    );
}

/// The container's configuration, as the Dockerfile sets it (`IDMINT_LISTEN`,
/// `IDMINT_DATA_DIR`, `serve`), on a free loopback port: ready and serving.
#[test]
fn the_containers_environment_serves_ids() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let data_dir = dir.path().to_string_lossy().into_owned();
    let env = [("IDMINT_LISTEN", "127.0.0.1:0"), ("IDMINT_DATA_DIR", data_dir.as_str())];
    let child = idmint(["serve"], &env)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idmint serve");
    let server = Server::adopt("idmint serve", child, Duration::from_secs(10));
    let ready = crate::common::poll(Duration::from_secs(10), || {
        http::send(server.addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
    });
    assert!(ready, "not ready:\n{}", server.log_text());
    assert!(Path::new(&data_dir).join("identity.json").is_file(), "IDMINT_DATA_DIR was not used");
}

/// `promtool <args>` in `dir`: whether it passed, and what it said. `None` when promtool is not
/// installed (outside CI; under `CI=true` that fails).
fn promtool(dir: &Path, args: &[&str]) -> Option<(bool, String)> {
    match Command::new("promtool").args(args).current_dir(dir).output() {
        Ok(output) => Some((
            output.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        )),
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("promtool is required under CI=true (Debian's `prometheus`): {e}")
        }
        Err(e) => {
            skipped(&e);
            None
        }
    }
}

#[allow(clippy::print_stderr)]
fn skipped(e: &std::io::Error) {
    eprintln!("SKIPPED: promtool not found ({e}); install Debian's `prometheus` to run this test");
}

/// The example alert rules are valid (`promtool check rules`) and do what their unit tests say
/// (`promtool test rules`: a clock step alerts, a lead of 60 s alerts after 5 minutes, a
/// window's lead does not). Controls: a rule whose threshold no lead reaches fails the unit
/// tests, and a misspelled function fails the check.
#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    let rules = read("prometheus/idmint-alerts.yml");
    let tests = read("prometheus/idmint-alerts.test.yml");
    for name in ["idmint_ahead_of_wall_seconds", "idmint_clock_step_seconds_count"] {
        assert!(rules.contains(name), "the rules do not use {name}");
    }
    let run = |rules: &str, args: &[&str]| {
        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(dir.path().join("idmint-alerts.yml"), rules).expect("write rules");
        std::fs::write(dir.path().join("idmint-alerts.test.yml"), &tests).expect("write tests");
        promtool(dir.path(), args)
    };
    let check = ["check", "rules", "idmint-alerts.yml"];
    let test = ["test", "rules", "idmint-alerts.test.yml"];
    let Some((passed, said)) = run(&rules, &check) else { return };
    assert!(passed && said.contains("SUCCESS: 3 rules found"), "promtool check rules:\n{said}");
    let (passed, said) = run(&rules, &test).expect("promtool ran a moment ago");
    assert!(passed && said.contains("SUCCESS"), "promtool test rules:\n{said}");

    let blind = rules
        .replace("(idmint_ahead_of_wall_seconds) > 10\n", "(idmint_ahead_of_wall_seconds) > 1e9\n");
    assert_ne!(blind, rules, "the control did not change the rule");
    let (passed, said) = run(&blind, &test).expect("promtool");
    assert!(!passed && said.contains("IdmintIdsAheadOfWallClock"), "a blind rule passed:\n{said}");
    let broken = rules.replace("increase(", "increas(");
    let (passed, said) = run(&broken, &check).expect("promtool");
    assert!(!passed && said.contains("increas"), "a misspelled function passed:\n{said}");
}
