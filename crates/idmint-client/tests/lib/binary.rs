//! The prefetch buffer refills over binary batches: the client asks for
//! `application/octet-stream` (JSON ranked below it), reads big-endian IDs whose count and
//! width headers agree with the body, reads JSON from a server that predates binary batches,
//! and refuses anything else with a protocol error naming what it got. Against a real server,
//! sustained `next()` over binary refills hands out unique, increasing IDs.

use idmint_client::{AnyId, Client, ErrorKind};

use crate::support::{Answer, Fake, TestServer};

/// What one scripted answer must give the client.
#[derive(Debug)]
enum Want {
    /// These IDs.
    Ids(Vec<u64>),
    /// A protocol error whose message contains this.
    Protocol(&'static str),
    /// The client's order check refuses the batch.
    NotMonotonic,
}

/// One row: a fake server answers `answer` to a batch of 3; the client's `batch(3)` must give
/// `want`, and the request must have asked for binary first.
async fn check(what: &str, answer: Answer, want: Want) {
    let fake = Fake::start(vec![answer]).await;
    let client = Client::builder().endpoint(&fake.url).attempts(1).build().unwrap();
    let got = client.batch(3).await;
    match (&got, &want) {
        (Ok(ids), Want::Ids(want)) => {
            assert_eq!(ids, &want.iter().copied().map(AnyId::U64).collect::<Vec<_>>(), "{what}")
        }
        (Err(e), Want::Protocol(part)) => {
            let ErrorKind::Protocol { message, .. } = e.kind() else { panic!("{what}: {e}") };
            assert!(message.contains(part), "{what}: {message}");
        }
        (Err(e), Want::NotMonotonic) => {
            assert!(matches!(e.kind(), ErrorKind::NotMonotonic { .. }), "{what}: {e}")
        }
        _ => panic!("{what}: got {got:?}, want {want:?}"),
    }
    let accepts = fake.accepts();
    assert!(!accepts.is_empty(), "{what}: no batch request");
    assert!(
        accepts.iter().all(|a| a == "application/octet-stream, application/json;q=0.5"),
        "{what}: {accepts:?}"
    );
    client.close().await;
}

#[tokio::test]
async fn batches_are_read_in_binary_or_json_and_nothing_else() {
    let be = |ids: &[u64]| ids.iter().flat_map(|id| id.to_be_bytes()).collect::<Vec<u8>>();
    let little: Vec<u8> = [255u64, 256, 257].iter().flat_map(|id| id.to_le_bytes()).collect();
    let rows = [
        ("binary", Answer::Binary(vec![5, 6, 7]), Want::Ids(vec![5, 6, 7])),
        ("binary, fewer than asked", Answer::Binary(vec![9]), Want::Ids(vec![9])),
        ("json from an older server", Answer::Ids(vec![5, 6, 7]), Want::Ids(vec![5, 6, 7])),
        (
            "a count that disagrees with the body",
            Answer::Raw("application/octet-stream", be(&[5, 6, 7]), Some("2")),
            Want::Protocol("says it holds 2 ids"),
        ),
        (
            "no count",
            Answer::Raw("application/octet-stream", be(&[5, 6, 7]), None),
            Want::Protocol("without `idmint-count`"),
        ),
        (
            "more than asked",
            Answer::Binary(vec![1, 2, 3, 4]),
            Want::Protocol("asked for 3 ids, got 4"),
        ),
        (
            "a partial id",
            Answer::Raw("application/octet-stream", vec![0; 12], Some("1")),
            Want::Protocol("12 bytes"),
        ),
        (
            "neither binary nor json",
            Answer::Raw("text/html", b"<html>".to_vec(), None),
            Want::Protocol("answered as `text/html`"),
        ),
        // Negative control: big-endian is the contract; 255, 256, 257 sent little-endian
        // read as other numbers, not in order, which the client's order check refuses.
        (
            "little-endian bytes",
            Answer::Raw("application/octet-stream", little, Some("3")),
            Want::NotMonotonic,
        ),
    ];
    for (what, answer, want) in rows {
        check(what, answer, want).await;
    }
}

#[tokio::test]
async fn next_refills_over_binary_from_a_real_server() {
    let server = TestServer::default().await;
    let client = Client::builder().endpoint(&server.url).prefetch(1000, 500).build().unwrap();
    let mut ids = Vec::with_capacity(20_000);
    for _ in 0..20_000 {
        ids.push(client.next().await.unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "unique and increasing");
    let batch = client.batch(5_000).await.unwrap();
    assert_eq!(batch.len(), 5_000);
    assert!(batch.windows(2).all(|w| w[0] < w[1]));
    assert!(batch[0] > *ids.last().unwrap());
    client.close().await;
    server.shut_down().await;
}
