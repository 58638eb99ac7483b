//! The builder's settings are checked before anything is sent.

use std::time::Duration;

use idmint_client::{Client, ClientBuilder, Error, ErrorKind};

#[tokio::test]
async fn settings_are_checked() {
    let check = |builder: ClientBuilder, want: Option<&str>| {
        let got = builder.build().map(|_| ()).map_err(|e| e.to_string());
        match (got, want) {
            (Ok(()), None) => {}
            (Err(message), Some(part)) => assert!(message.contains(part), "{message}"),
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    };
    let ok = || Client::builder().endpoint("http://127.0.0.1:8080");
    check(ok(), None);
    check(Client::builder(), Some("no endpoint given"));
    // https:// needs the `rustls` feature (tests/lib/tls.rs uses it).
    let https = if cfg!(feature = "rustls") {
        None
    } else {
        Some("needs idmint-client's `rustls` feature")
    };
    check(Client::builder().endpoint("https://127.0.0.1"), https);
    check(Client::builder().endpoint("localhost:8080"), Some("must start with http://"));
    check(ok().namespace("Orders"), Some("namespace `Orders` must be"));
    check(ok().namespace(""), Some("namespace `` must be"));
    check(ok().namespace("a/b"), Some("namespace `a/b` must be"));
    check(ok().attempts(0), Some("attempts must be at least 1"));
    check(ok().timeout(Duration::ZERO), Some("the timeout must be above zero"));
    check(ok().prefetch(0, 0), Some("batch size must be 1 to 100000"));
    check(ok().prefetch(100_001, 0), Some("not 100001"));
    check(ok().prefetch(100, 100), Some("low-water mark (100) must be below"));
    check(ok().prefetch(1, 0), None);
    check(ok().pipeline(0), Some("pipeline depth must be 1 to 8, not 0"));
    check(ok().pipeline(9), Some("pipeline depth must be 1 to 8, not 9"));
    check(ok().pipeline(8), None);
    check(ok().max_batch(0), Some("max_batch must be at least 1"));
    check(ok().max_batch(10).prefetch(100, 0), Some("1 to 10 (max_batch)"));
    check(ok().token("a\nb"), Some("visible ASCII"));
    check(ok().endpoints(["http://a:1", "http://b:2/prefix/"]).token("t"), None);
}

#[tokio::test]
async fn errors_read_well() {
    let check = |err: Error, want: &str| assert_eq!(err.to_string(), want);
    check(ErrorKind::Closed.into(), "the client is closed");
    check(
        ErrorKind::Unavailable { attempts: 5, last: "http://a: connection refused".into() }.into(),
        "no endpoint could serve the request after 5 attempts; the last: http://a: connection refused",
    );
    check(
        ErrorKind::Protocol { endpoint: "http://a".into(), message: "bad batch body".into() }
            .into(),
        "http://a sent a response the client does not understand: bad batch body",
    );
}
