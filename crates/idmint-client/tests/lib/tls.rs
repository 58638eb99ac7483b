//! `https://` endpoints (feature `rustls`): a real idmint server behind a TLS front with a
//! certificate made for the test. The client trusts it through `root_certificate_pem` and gets
//! IDs; without that root (the negative control) the handshake is refused, and so is plain
//! HTTP to the TLS port.

use std::sync::Arc;

use idmint_client::{Client, ErrorKind};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, rustls};

use crate::support::TestServer;

/// A TLS listener on 127.0.0.1 that forwards each connection to `backend`; its port and the
/// certificate (PEM) it presents for `localhost`.
async fn tls_front(backend: String) -> (u16, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a cert");
    let cert_pem = made.cert.pem();
    let key = rustls::pki_types::PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .expect("a key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![made.cert.der().clone()], key)
    .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else { return };
                let Ok(mut plain) = TcpStream::connect(&backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    (port, cert_pem)
}

#[tokio::test]
async fn https_endpoints_are_verified_against_the_given_root() {
    let server = TestServer::default().await;
    let (port, cert_pem) = tls_front(server.url.trim_start_matches("http://").to_owned()).await;
    let url = format!("https://localhost:{port}");

    let client =
        Client::builder().endpoint(&url).root_certificate_pem(&cert_pem).build().expect("a client");
    let ids = client.batch(1000).await.expect("ids over TLS");
    assert_eq!(ids.len(), 1000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let next = client.next().await.expect("next over TLS");
    assert!(!ids.contains(&next));
    client.close().await;

    // Negative controls: without the root the certificate is refused; plain HTTP to the TLS
    // port gets no answer it understands.
    for (what, builder) in [
        ("no root", Client::builder().endpoint(&url)),
        ("plain http", Client::builder().endpoint(format!("http://localhost:{port}"))),
    ] {
        let client = builder.attempts(1).build().expect("a client");
        let err = client.batch(10).await.expect_err(what);
        assert!(matches!(err.kind(), ErrorKind::Unavailable { .. }), "{what}: {err}");
        client.close().await;
    }
    server.shut_down().await;
}

#[test]
fn a_root_pem_without_a_certificate_is_refused() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _guard = runtime.enter();
    let err = Client::builder()
        .endpoint("https://localhost:1")
        .root_certificate_pem("not a certificate")
        .build()
        .expect_err("refused");
    assert!(matches!(err.kind(), ErrorKind::Config(_)), "{err}");
}
