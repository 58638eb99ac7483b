//! A `trace-id` namespace with another chunk/counter split (`counter_bits`): it issues and
//! decodes under that split, `/v1/namespaces` shows its capacity and its own fingerprint, and
//! a width the layout cannot take, or `counter_bits` on another layout, stops the start.

use std::sync::Arc;

use idmint_coord::MemoryCoordinator;
use idmint_server::{NamespaceConfig, ServerConfig};
use idmint_testkit::{TestServer, clock};

fn trace(name: &str, counter_bits: Option<u32>) -> NamespaceConfig {
    NamespaceConfig { layout: "trace-id".into(), counter_bits, ..NamespaceConfig::named(name) }
}

#[test]
fn a_trace_id_namespace_takes_another_split() {
    let config = ServerConfig {
        namespaces: vec![trace("elfo", None), trace("wide", Some(16))],
        ..ServerConfig::default()
    };
    let server =
        TestServer::start(config, Arc::new(MemoryCoordinator::new()), clock(0)).expect("start");
    let list = server.get("/v1/namespaces").ok().json();
    let info = |name: &str| {
        list["namespaces"]
            .as_array()
            .expect("list")
            .iter()
            .find(|ns| ns["name"] == name)
            .cloned()
            .expect(name)
    };
    assert_eq!(info("elfo")["ids_per_second"], 4_190_208);
    assert_eq!(info("wide")["ids_per_second"], 4_194_240);
    assert_ne!(info("elfo")["fingerprint"], info("wide")["fingerprint"]);
    let ids = server.get("/v1/namespaces/wide/batch?count=1000").ids();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    for id in [ids[0], ids[999]] {
        let decoded = server.get(&format!("/v1/namespaces/wide/decode/{id}")).ok().json();
        let counter = decoded["fields"]["counter"].as_u64().expect("counter");
        assert!((1..=65_535).contains(&counter), "{decoded}");
    }
    server.stop().expect("stop");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cases = [
        (trace("bad", Some(22)), "trace-id's counter must be 1..=21 bits"),
        (trace("bad", Some(0)), "trace-id's counter must be 1..=21 bits"),
        (
            NamespaceConfig { counter_bits: Some(10), ..NamespaceConfig::named("flakes") },
            "layout `snowflake` has no counter width to set",
        ),
    ];
    for (ns, message) in cases {
        let config = ServerConfig { namespaces: vec![ns], ..ServerConfig::default() };
        let started = runtime.block_on(idmint_server::Server::start(
            config,
            Arc::new(MemoryCoordinator::new()),
            clock(0),
        ));
        let err = started.expect_err(message);
        assert!(err.to_string().contains(message), "{err}");
    }
}
