//! Black-box tests of `idmint serve`'s browser side: `GET /` is the status page, and CORS is
//! switched on by `--cors-allow-origin` (repeatable), `IDMINT_CORS_ALLOW_ORIGIN` and
//! `server.cors_allow_origins` in the file, for those origins only; something that is not an
//! origin stops the start with one clear line.
//!
//! Every process is started by the test and stopped by its PID only (dropping a `Server` kills
//! it).

use idmint_testkit::http;
use std::{path::Path, process::Stdio, time::Duration};

use crate::common::{Server, idmint};
use idmint_testkit::check::wait_until;

const TIMEOUT: Duration = Duration::from_secs(10);
const APP: &str = "http://app.idmint.test:5173";
const ADMIN: &str = "https://admin.idmint.test";
const OTHER: &str = "http://evil.idmint.test";

fn start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    let mut command = idmint(["serve", "--listen", "127.0.0.1:0", "--data-dir"], env);
    command.arg(dir.join("data")).args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    let server = Server::adopt("idmint serve", command.spawn().expect("spawn"), TIMEOUT);
    let addr = server.addr;
    wait_until("/readyz to answer 200", TIMEOUT, || {
        http::send(addr, "GET", "/readyz", &[], None).is_ok_and(|r| r.status == 200)
    });
    server
}

/// The `Access-Control-Allow-Origin` a GET from `origin` gets.
fn allowed(server: &Server, origin: &str) -> Option<String> {
    let response =
        http::send(server.addr, "GET", "/v1/next", &[("Origin", origin)], None).expect("GET");
    assert_eq!(response.status, 200, "{}", response.text());
    response.header("access-control-allow-origin").map(str::to_owned)
}

/// Each way of configuring the origins: which of APP, ADMIN and OTHER are then allowed.
#[test]
fn origins_come_from_the_flag_the_environment_or_the_file() {
    let check = |what: &str, args: &[&str], env: &[(&str, &str)], file: &str, want: [bool; 3]| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = args.to_vec();
        let config = dir.path().join("idmint.toml");
        let config_arg = config.to_string_lossy().into_owned();
        if !file.is_empty() {
            std::fs::write(&config, file).expect("write the config");
            args.extend(["--config", config_arg.as_str()]);
        }
        let server = start(dir.path(), &args, env);
        for (origin, want) in [APP, ADMIN, OTHER].into_iter().zip(want) {
            let got = allowed(&server, origin);
            let expected = want.then(|| origin.to_owned());
            assert_eq!(got, expected, "{what}: origin {origin}");
        }
    };
    check("nothing configured", &[], &[], "", [false, false, false]);
    check("one flag", &["--cors-allow-origin", APP], &[], "", [true, false, false]);
    check(
        "the flag repeated",
        &["--cors-allow-origin", APP, "--cors-allow-origin", ADMIN],
        &[],
        "",
        [true, true, false],
    );
    check(
        "the environment",
        &[],
        &[("IDMINT_CORS_ALLOW_ORIGIN", &format!("{APP},{ADMIN}"))],
        "",
        [true, true, false],
    );
    check(
        "the file",
        &[],
        &[],
        &format!("[server]\ncors_allow_origins = [\"{ADMIN}\"]\n"),
        [false, true, false],
    );
    check(
        "the flag beats the file",
        &["--cors-allow-origin", APP],
        &[],
        &format!("[server]\ncors_allow_origins = [\"{ADMIN}\"]\n"),
        [true, false, false],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let any = start(dir.path(), &["--cors-allow-origin", "*"], &[]);
    assert_eq!(allowed(&any, OTHER).as_deref(), Some("*"));
}

#[test]
fn something_that_is_not_an_origin_stops_the_start() {
    for bad in ["app.idmint.test", "https://app.idmint.test/", "https://app.idmint.test/x"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = idmint(
            ["serve", "--listen", "127.0.0.1:0", "--cors-allow-origin", bad, "--data-dir"],
            &[],
        )
        .arg(dir.path().join("data"))
        .output()
        .expect("run idmint serve");
        assert!(!output.status.success(), "{bad} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("cors_allow_origins") && stderr.contains("is not an origin"),
            "{bad}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn the_status_page_is_served_at_the_root() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path(), &[], &[]);
    let page = server.get("/").ok();
    assert!(page.text().contains("<title>idmint status</title>"), "{}", page.text());
    let script = server.get("/ui/app.js").ok();
    assert!(script.header("content-type").unwrap_or_default().starts_with("text/javascript"));
    let status = server.get("/v1/status").ok().json();
    assert_eq!(status["namespaces"][0]["name"], "default");
}
