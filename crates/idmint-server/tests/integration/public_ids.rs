//! A namespace with `public_ids`, in process: `batch` and `next` hand out public IDs (a keyed
//! permutation, so they are not in time order), `decode` with the token reveals each to a
//! snowflake ID of this server's generator and now, and the revealed IDs increase in the order
//! they were issued; without the token nothing is revealed; `public_ids` without a token or
//! with a bad key file is a configuration error.

use std::sync::Arc;

use idmint_coord::MemoryCoordinator;
use idmint_server::{Error, NamespaceConfig, PublicIdsSettings, ServerConfig};
use idmint_testkit::{TestServer, check::assert_unique, clock, http};

const TOKEN: &str = "s3cret";
const KEYS: &str = r#"{"method": "ff1", "version_bits": 0, "active": 0,
  "keys": [{"version": 0, "secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"}]}"#;

fn config(key_file: &str, token: Option<&str>) -> ServerConfig {
    let namespace = NamespaceConfig {
        token: token.map(str::to_owned),
        generator_id: Some(5),
        public_ids: Some(PublicIdsSettings { key_file: key_file.to_owned() }),
        ..NamespaceConfig::named("orders")
    };
    ServerConfig { namespaces: vec![namespace], ..ServerConfig::default() }
}

#[test]
fn public_ids_are_handed_out_and_revealed_with_the_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(&keys, KEYS).expect("keys");
    let server = TestServer::start(
        config(&keys.to_string_lossy(), Some(TOKEN)),
        Arc::new(MemoryCoordinator::new()),
        clock(0),
    )
    .expect("start");
    let auth = format!("Bearer {TOKEN}");
    let headers = [("authorization", auth.as_str())];
    let get = |target: &str| http::send(server.addr, "GET", target, &headers, None).expect("send");
    let mut public = get("/v1/namespaces/orders/batch?count=500").ids();
    public.push(
        get("/v1/namespaces/orders/next").ok().json()["id"]
            .as_str()
            .expect("id")
            .parse()
            .expect("decimal"),
    );
    assert_unique(&public);
    assert!(public.windows(2).any(|w| w[0] > w[1]), "public ids are not in time order");
    let now_ms = idmint_core::Clock::now_ms(&idmint_core::SystemClock);
    let mut revealed = Vec::new();
    for id in &public {
        let decoded = get(&format!("/v1/namespaces/orders/decode/{id}")).ok().json();
        let fields = &decoded["fields"];
        assert_eq!(fields["datacenter"].as_u64().zip(fields["worker"].as_u64()), Some((0, 5)));
        let time = idmint_core::parse_rfc3339_ms(decoded["time"].as_str().expect("time"))
            .expect("rfc 3339");
        assert!(time.abs_diff(now_ms) < 60_000, "revealed to now: {decoded}");
        revealed.push(decoded["id"].as_str().expect("id").parse::<u64>().expect("decimal"));
    }
    assert!(revealed.windows(2).all(|w| w[0] < w[1]), "the ids behind them increase");
    // Without the token, nothing is revealed (nor handed out).
    let anonymous = http::get(server.addr, &format!("/v1/namespaces/orders/decode/{}", public[0]));
    assert_eq!(anonymous.status, 401);
}

#[test]
fn public_ids_need_a_token_and_a_good_key_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.json");
    std::fs::write(&keys, KEYS).expect("keys");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{}").expect("bad keys");
    let coordinator = || Arc::new(MemoryCoordinator::new());
    for (config, says) in [
        (config(&keys.to_string_lossy(), None), "public_ids needs a token"),
        (config(&bad.to_string_lossy(), Some(TOKEN)), "is not a key file"),
        (config("/nonexistent/keys.json", Some(TOKEN)), "cannot read key file"),
    ] {
        match TestServer::start(config, coordinator(), clock(0)) {
            Err(e @ Error::Config(_)) => assert!(e.to_string().contains(says), "{e}"),
            Err(other) => panic!("expected a config error saying {says}, got {other}"),
            Ok(_) => panic!("expected a config error saying {says}"),
        }
    }
}
