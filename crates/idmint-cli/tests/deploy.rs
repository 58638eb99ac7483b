//! The deployment files in `deploy/`: the systemd unit passes `systemd-analyze verify` with no
//! warning (a misspelled key is the negative control), every `IDMINT_*` variable the
//! Dockerfile, the compose file and the Kubernetes example set is one `idmint serve` reads, and
//! the container's settings (listen address and data directory from the environment) serve IDs.
//! Docker itself cannot run on these machines, so images are not built here.

mod common;
#[path = "../../idmint-server/tests/common/http.rs"]
mod http;

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use common::{Server, idmint};

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
    let ready = common::poll(Duration::from_secs(10), || {
        http::send(server.addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
    });
    assert!(ready, "not ready:\n{}", server.log_text());
    assert!(Path::new(&data_dir).join("identity.json").is_file(), "IDMINT_DATA_DIR was not used");
}
