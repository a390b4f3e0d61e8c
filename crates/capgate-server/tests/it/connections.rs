//! The listener: slow clients are cut, connections are capped, TLS works.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::check::{notes, notes_policy, start_notes};
use crate::common::*;

#[test]
fn a_slowloris_connection_is_cut_after_the_header_timeout() {
    let (server, _dir) = start_notes("slowloris");
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"POST /v1/check HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    // The server answers 408 or just closes; either way the read ends well before 10 s.
    let _ = stream.read_to_end(&mut rest);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_body_that_stops_arriving_is_408() {
    let (server, _dir) = start_notes("slow-body");
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let head = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {PEP}\r\nContent-Length: 100\r\n\r\n{{\"skill\""
    );
    stream.write_all(head.as_bytes()).unwrap();
    let response = read_response(&mut stream).unwrap();
    assert_eq!(response.status, 408);
    assert_eq!(response.json()["error"]["code"], "body_timeout");
}

#[test]
fn connections_past_the_cap_wait_for_a_free_one() {
    let dir = temp_dir("cap");
    let policy = write(&dir, "notes.cap", &notes_policy());
    let mut config = config(&dir, vec![policy]);
    config.connections.max_connections = 1;
    config.connections.header_timeout = std::time::Duration::from_secs(30);
    let server = start(config);
    // The first connection holds the only slot (keep-alive, idle).
    let mut first = TcpStream::connect(server.address).unwrap();
    let body = notes("GET", "notes/1", json!({}));
    let keep = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {PEP}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    first.write_all(keep.as_bytes()).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(read_response(&mut first).unwrap().status, 200);
    let mut second = TcpStream::connect(server.address).unwrap();
    second
        .write_all(&request("GET", "/healthz", None, ""))
        .unwrap();
    second
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut byte = [0_u8; 1];
    assert!(second.read(&mut byte).is_err(), "served past the cap");
    drop(first);
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(read_response(&mut second).unwrap().status, 200);
}

#[test]
fn tls_serves_with_the_given_certificate() {
    let dir = temp_dir("tls");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = write(&dir, "cert.pem", &certified.cert.pem());
    let key = write(&dir, "key.pem", &certified.signing_key.serialize_pem());
    let policy = write(&dir, "notes.cap", &notes_policy());
    let mut config = config(&dir, vec![policy]);
    config.tls = Some((cert, key));
    let server = start(config);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let response = runtime.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio_rustls::rustls;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(certified.cert.der().clone()).unwrap();
        #[expect(deprecated, reason = "the server's provider")]
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client));
        let tcp = tokio::net::TcpStream::connect(server.address)
            .await
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(&request("GET", "/healthz", None, ""))
            .await
            .unwrap();
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer).await.unwrap();
        String::from_utf8(answer).unwrap()
    });
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");

    // Plain HTTP to the TLS port gets no answer.
    let mut plain = TcpStream::connect(server.address).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain
        .write_all(&request("GET", "/healthz", None, ""))
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("200"));
}
