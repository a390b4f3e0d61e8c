//! The auth-subrequest dialects (`forward-auth`, `envoy-http`): the front's credential, the
//! agent's, what the upstream will read, and how a refusal is told.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;

use crate::check::start_notes;
use crate::common::*;

/// A subrequest with these headers and body.
fn subrequest(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    raw(address, text.as_bytes())
}

fn forward(
    address: SocketAddr,
    method: &str,
    uri: &str,
    extra: &[(&str, &str)],
    body: &str,
) -> Response {
    let pep = format!("Bearer {PEP}");
    let mut headers = vec![
        ("Authorization", pep.as_str()),
        ("X-Capgate-Credential", AGENT),
        ("X-Forwarded-Method", method),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "notes.example.com"),
        ("X-Forwarded-Uri", uri),
    ];
    headers.extend_from_slice(extra);
    subrequest(address, "GET", "/v1/auth/forward", &headers, body)
}

#[test]
fn forward_auth_allows_and_denies_from_the_forwarded_headers() {
    let (server, _dir) = start_notes("forward");
    let allowed = forward(
        server.address,
        "GET",
        "/v1/notes/1",
        &[("X-Forwarded-Content-Length", "")],
        "",
    );
    assert_eq!(allowed.status, 200);
    let denied = forward(server.address, "DELETE", "/v1/notes/1", &[], "");
    assert_eq!(denied.status, 403);
    assert_eq!(denied.header("x-capgate-reason"), Some("operation"));
    assert_eq!(denied.json()["decision"], "deny");
}

#[test]
fn the_front_needs_the_pep_token_and_the_agent_a_known_credential() {
    let (server, _dir) = start_notes("forward-auth");
    let headers = [
        ("X-Capgate-Credential", AGENT),
        ("X-Forwarded-Method", "GET"),
        ("X-Forwarded-Host", "notes.example.com"),
        ("X-Forwarded-Uri", "/v1/notes/1"),
    ];
    // Without the front's token the forwarded headers are not believed.
    assert_eq!(
        subrequest(server.address, "GET", "/v1/auth/forward", &headers, "").status,
        401
    );
    let pep = format!("Bearer {PEP}");
    let mut unknown = headers.to_vec();
    unknown[0] = ("X-Capgate-Credential", "nobody-0123456789");
    unknown.push(("Authorization", pep.as_str()));
    let response = subrequest(server.address, "GET", "/v1/auth/forward", &unknown, "");
    assert_eq!(response.status, 401);
    assert_eq!(response.json()["error"]["code"], "unknown_agent");
    let mut missing = headers[1..].to_vec();
    missing.push(("Authorization", pep.as_str()));
    let response = subrequest(server.address, "GET", "/v1/auth/forward", &missing, "");
    assert_eq!(response.status, 401);
    assert_eq!(response.json()["error"]["code"], "unknown_agent");
}

#[test]
fn identity_fields_in_the_call_are_not_believed() {
    let (server, _dir) = start_notes("forward-escalate");
    let pep = format!("Bearer {PEP}");
    let headers = [
        ("Authorization", pep.as_str()),
        ("X-Capgate-Credential", TIMID_AGENT),
        ("X-Forwarded-Method", "GET"),
        ("X-Forwarded-Proto", "https"),
        ("X-Forwarded-Host", "notes.example.com"),
        ("X-Forwarded-Uri", "/v1/notes/1?autonomy=100"),
        ("X-Capgate-Autonomy", "100"),
        ("Content-Type", "application/json"),
    ];
    let response = subrequest(
        server.address,
        "GET",
        "/v1/auth/forward",
        &headers,
        r#"{"autonomy": 100, "skill": "other"}"#,
    );
    assert_eq!(response.status, 403);
    assert_eq!(
        response.header("x-capgate-approval-required"),
        Some("read"),
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    assert_eq!(response.json()["decision"], "approval_required");
}

#[test]
fn an_unforwarded_body_fails_every_payload_constraint_with_input() {
    let (server, _dir) = start_notes("unforwarded");
    // `write` reads payload.title; nginx's auth_request forwards no body.
    let response = forward(
        server.address,
        "POST",
        "/v1/notes",
        &[("X-Forwarded-Content-Length", "20")],
        "",
    );
    assert_eq!(response.status, 403);
    let decision = response.json();
    assert_eq!(decision["reasons"][0]["constraint"], "input", "{decision}");
    assert!(
        decision["reasons"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did not forward")
    );
    // The same call with its JSON body forwarded is decided on it.
    let json = [("Content-Type", "application/json")];
    let allowed = forward(
        server.address,
        "POST",
        "/v1/notes",
        &json,
        r#"{"title": "hello"}"#,
    );
    assert_eq!(allowed.status, 200);
    // A body that is not JSON by its type, or compressed, is not read either.
    for extra in [
        vec![("Content-Type", "text/plain")],
        vec![
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
        ],
    ] {
        let response = forward(
            server.address,
            "POST",
            "/v1/notes",
            &extra,
            r#"{"title": "hello"}"#,
        );
        assert_eq!(response.status, 403, "{extra:?}");
        assert_eq!(response.json()["reasons"][0]["constraint"], "input");
    }
}

#[test]
fn method_overrides_are_refused() {
    let (server, _dir) = start_notes("override");
    for (uri, extra) in [
        ("/v1/notes/1", vec![("X-HTTP-Method-Override", "DELETE")]),
        ("/v1/notes/1?_method=DELETE", vec![]),
        ("/v1/notes/1?%5Fmethod=DELETE", vec![]),
    ] {
        let response = forward(server.address, "GET", uri, &extra, "");
        assert_eq!(response.status, 403, "{uri} {extra:?}");
        assert_eq!(response.header("x-capgate-reason"), Some("methodOverride"));
    }
}

#[test]
fn envoy_http_reads_the_call_from_the_subrequest_itself() {
    let (server, _dir) = start_notes("envoy-http");
    let pep = format!("Bearer {PEP}");
    let headers = [
        ("Authorization", pep.as_str()),
        ("X-Capgate-Credential", AGENT),
        ("X-Forwarded-Proto", "https"),
    ];
    let mut text = "GET /v1/auth/envoy/v1/notes/7?x=1 HTTP/1.1\r\nHost: notes.example.com\r\nConnection: close\r\n".to_owned();
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    assert_eq!(raw(server.address, text.as_bytes()).status, 200);
    let denied = text.replacen(
        "GET /v1/auth/envoy/v1/notes/7",
        "PUT /v1/auth/envoy/v1/notes/7",
        1,
    );
    let response = raw(server.address, denied.as_bytes());
    assert_eq!(response.status, 403);
    assert_eq!(response.header("x-capgate-reason"), Some("operation"));
}
