//! What is retried and what is not: 503 (with `Retry-After`) is retried until a server is
//! healthy, every 4xx fails at once with the server's code, and batches out of order are
//! refused rather than handed out.

use std::time::Duration;

use idmint_client::{AnyId, Client, ErrorKind};
use idmint_coord::MemoryCoordinator;
use idmint_server::{NamespaceConfig, ServerConfig};

use crate::support::{Answer, Fake, TestServer};

fn not_ready() -> Answer {
    Answer::Error(503, "not_ready", Some(1))
}

#[tokio::test]
async fn unavailable_then_healthy_is_retried_on_the_same_server() {
    let fake = Fake::start(vec![not_ready(), not_ready(), Answer::Ids(vec![1, 2, 3])]).await;
    // Retry-After says 1 s; the bound keeps the test short while the pause is still taken.
    let client = Client::builder()
        .endpoint(&fake.url)
        .max_retry_after(Duration::from_millis(20))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let ids = client.batch(3).await.unwrap();
    assert_eq!(ids, [1, 2, 3].map(AnyId::U64));
    assert_eq!(fake.batches(), 3);
    assert!(started.elapsed() >= Duration::from_millis(40), "two pauses of 20 ms were taken");
}

#[tokio::test]
async fn unavailable_fails_over_to_a_healthy_server_at_once() {
    // Had the client waited as the sick server asked (10 s), the test would show it.
    let sick = Fake::start(vec![Answer::Error(503, "not_ready", Some(10))]).await;
    let healthy = Fake::start(vec![Answer::Ids(vec![7, 8])]).await;
    let client = Client::builder()
        .endpoints([&sick.url, &healthy.url])
        .max_retry_after(Duration::from_secs(30))
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    for _ in 0..4 {
        assert_eq!(client.batch(2).await.unwrap(), [7, 8].map(AnyId::U64));
    }
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(sick.batches() <= 1, "the sick server is skipped once it said 503");
    assert_eq!(healthy.batches(), 4);
}

#[tokio::test]
async fn unavailable_everywhere_gives_up_after_the_attempts() {
    let fake = Fake::start(vec![Answer::Error(503, "window_exhausted", None)]).await;
    let client = Client::builder()
        .endpoint(&fake.url)
        .attempts(3)
        .backoff(Duration::from_millis(1), Duration::from_millis(2))
        .build()
        .unwrap();
    let err = client.batch(5).await.unwrap_err();
    let ErrorKind::Unavailable { attempts, last } = err.kind() else { panic!("{err}") };
    assert_eq!(*attempts, 3);
    assert!(last.contains("503 window_exhausted: scripted"), "{last}");
    assert_eq!(fake.batches(), 3);
    // 502 and 504 from a proxy count as unavailable too; 500 does not.
    let check = |status: u16, retried: bool| async move {
        let fake = Fake::start(vec![Answer::Error(status, "x", None)]).await;
        let client = Client::builder()
            .endpoint(&fake.url)
            .attempts(2)
            .backoff(Duration::from_millis(1), Duration::from_millis(1))
            .build()
            .unwrap();
        let err = client.batch(1).await.unwrap_err();
        assert_eq!(fake.batches(), if retried { 2 } else { 1 }, "{status}: {err}");
    };
    check(502, true).await;
    check(504, true).await;
    check(500, false).await;
}

#[tokio::test]
async fn client_errors_are_not_retried_and_carry_the_servers_code() {
    let config = ServerConfig {
        namespaces: vec![NamespaceConfig {
            token: Some("s3cret".into()),
            ..NamespaceConfig::named("default")
        }],
        ..ServerConfig::default()
    };
    let server = TestServer::start(config, MemoryCoordinator::new()).await;
    let responses =
        |code: u16| server.metric(&format!(r#"idmint_http_responses_total{{code="{code}"}}"#));
    let check = |builder: idmint_client::ClientBuilder, status: u16, code: &'static str| {
        let server_url = server.url.clone();
        async move {
            let before = responses(status);
            let client = builder.endpoint(&server_url).build().unwrap();
            let err = client.next().await.unwrap_err();
            let ErrorKind::Rejected { endpoint, status: got, code: got_code, message } = err.kind()
            else {
                panic!("{err}")
            };
            assert_eq!((*got, got_code.as_str(), endpoint.as_str()), (status, code, &*server_url));
            assert!(!message.is_empty());
            assert!(err.to_string().contains(code), "{err}");
            assert_eq!(responses(status) - before, 1, "{code}: asked once, never again");
            client.close().await;
        }
    };
    check(Client::builder(), 401, "unauthorized").await;
    check(Client::builder().token("wrong"), 403, "forbidden").await;
    check(Client::builder().token("s3cret").namespace("nope"), 404, "unknown_namespace").await;
    check(
        Client::builder().token("s3cret").max_batch(200_000).prefetch(150_000, 0),
        400,
        "bad_request",
    )
    .await;
    let client = Client::builder().token("s3cret").endpoint(&server.url).build().unwrap();
    assert!(client.next().await.is_ok());
    client.close().await;
    server.shut_down().await;
}

#[tokio::test]
async fn a_batch_out_of_order_is_refused() {
    let fake = Fake::start(vec![Answer::Ids(vec![5, 9, 9, 10])]).await;
    let client = Client::builder().endpoint(&fake.url).build().unwrap();
    let err = client.batch(4).await.unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::NotMonotonic {
            endpoint: fake.url.clone(),
            previous: AnyId::U64(9),
            next: AnyId::U64(9)
        }
    );
    assert_eq!(client.next().await.unwrap_err(), err, "nothing of that batch is handed out");
}

#[tokio::test]
async fn prefetched_batches_of_one_generator_must_keep_increasing() {
    let fake = Fake::start(vec![Answer::Ids(vec![10, 11]), Answer::Ids(vec![5, 6])]).await;
    let client = Client::builder().endpoint(&fake.url).prefetch(2, 0).build().unwrap();
    assert_eq!(client.next().await, Ok(AnyId::U64(10)));
    assert_eq!(client.next().await, Ok(AnyId::U64(11)));
    let err = client.next().await.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::NotMonotonic { previous: AnyId::U64(11), next: AnyId::U64(5), .. }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_new_generator_id_may_start_lower() {
    // The server restarted and claimed generator 4 instead of 3: lower IDs are fine.
    let fake =
        Fake::with(vec![Answer::Ids(vec![10, 11]), Answer::Ids(vec![5, 6])], vec![3, 4], None)
            .await;
    let client = Client::builder().endpoint(&fake.url).prefetch(2, 0).build().unwrap();
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(client.next().await.unwrap());
    }
    assert_eq!(ids, [10, 11, 5, 6].map(AnyId::U64));
}

#[tokio::test]
async fn endpoints_with_different_layouts_are_refused() {
    let a = Fake::start(vec![Answer::Ids(vec![1])]).await;
    let b =
        Fake::with(vec![Answer::Ids(vec![2])], vec![0], Some("other/64b/epoch=0/tick=1/x")).await;
    let client = Client::builder().endpoints([&a.url, &b.url]).build().unwrap();
    let mut errors = Vec::new();
    for _ in 0..2 {
        if let Err(e) = client.batch(1).await {
            errors.push(e);
        }
    }
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(matches!(errors[0].kind(), ErrorKind::LayoutMismatch { .. }), "{}", errors[0]);
}
