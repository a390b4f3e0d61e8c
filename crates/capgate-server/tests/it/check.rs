//! `POST /v1/check`: who may call it and what it answers.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use serde_json::json;

use crate::common::*;

/// The UTC hour twelve hours from now: the `night` capability's window.
fn far_hour() -> u32 {
    use chrono::Timelike;
    (chrono::Utc::now().hour() + 12) % 24
}

/// A policy with a process-lifetime read, a rate-limited write, and a window far from now.
pub fn notes_policy() -> String {
    let hour = far_hour();
    format!(
        r#"skill "notes" {{
  version "1"
  risk low

  capability "read" {{
    resource http "https://notes.example.com/v1/notes/{{id}}"
    operations GET
    lifetime process
    justification "Reads notes."
  }}

  capability "write" {{
    resource http "https://notes.example.com/v1/notes"
    operations POST
    lifetime process
    justification "Files notes."
    fieldMatches payload.title ~ /[a-z ]+/
    rateLimit 2 per hour
  }}

  capability "night" {{
    resource http "https://notes.example.com/v1/night"
    operations GET
    lifetime process
    justification "Reads at night."
    wallClockWindow mon-sun {hour:02}:00-{hour:02}:59 "UTC"
  }}

  capability "granted" {{
    resource http "https://notes.example.com/v1/granted"
    operations GET
    lifetime call 1
  }}
}}
"#
    )
}

/// A server on [`notes_policy`].
pub fn start_notes(name: &str) -> (Running, std::path::PathBuf) {
    let dir = temp_dir(name);
    let policy = write(&dir, "notes.cap", &notes_policy());
    (start(config(&dir, vec![policy])), dir)
}

pub fn notes(operation: &str, path: &str, extra: serde_json::Value) -> String {
    let mut request = json!({
        "skill": "notes",
        "operation": operation,
        "resource": format!("https://notes.example.com/v1/{path}"),
        "agent": {"id": "a-1"},
        "autonomy": 100,
    });
    for (key, value) in extra.as_object().unwrap() {
        request[key] = value.clone();
    }
    request.to_string()
}

#[test]
fn check_takes_the_pep_token_only() {
    let (server, _dir) = start_notes("pep");
    let body = notes("GET", "notes/1", json!({}));
    for token in [
        None,
        Some(OPERATOR),
        Some("pep-token-0123456789abcdeX"),
        Some(""),
    ] {
        let response = send(server.address, "POST", "/v1/check", token, &body);
        assert_eq!(response.status, 401, "{token:?}");
        assert_eq!(response.json()["error"]["code"], "unauthorized");
        assert_eq!(response.header("www-authenticate"), Some("Bearer"));
    }
    let response = check(server.address, &body);
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["decision"], "allow");
    assert_eq!(response.json()["capability"], "read");
}

#[test]
fn a_basic_or_doubled_authorization_is_refused() {
    let (server, _dir) = start_notes("auth-forms");
    let body = notes("GET", "notes/1", json!({}));
    let basic = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic {PEP}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw(server.address, basic.as_bytes()).status, 401);
    let doubled = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {PEP}\r\nAuthorization: Bearer {PEP}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw(server.address, doubled.as_bytes()).status, 401);
}

#[test]
fn a_deny_carries_its_reasons() {
    let (server, _dir) = start_notes("deny");
    let response = check(
        server.address,
        &notes("POST", "notes", json!({"payload": {"title": "NOPE!"}})),
    );
    assert_eq!(response.status, 200);
    let decision = response.json();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["reasons"][0]["constraint"], "fieldMatches");
    assert_eq!(decision["reasons"][0]["path"], "payload.title");
}

#[test]
fn malformed_requests_are_400_with_the_error_and_the_decision() {
    let (server, _dir) = start_notes("malformed");
    for body in ["{nope", "[]", "{\"skill\": 1}", ""] {
        let response = check(server.address, body);
        assert_eq!(response.status, 400, "{body}");
        let answer = response.json();
        assert_eq!(answer["error"]["code"], "bad_request");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
        assert_eq!(answer["decision"]["decision"], "deny");
        assert_eq!(answer["decision"]["reasons"][0]["constraint"], "input");
    }
}

#[test]
fn a_body_over_the_limit_is_413_declared_or_chunked() {
    let (server, _dir) = start_notes("too-large");
    let big = "x".repeat(capgate::Limits::DEFAULT.max_request_bytes + 1);
    let response = check(server.address, &big);
    assert_eq!(response.status, 413);
    assert_eq!(response.json()["error"]["code"], "body_too_large");
    // Chunked: no Content-Length to refuse up front; the limit cuts the read.
    let mut chunked = format!(
        "POST /v1/check HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {PEP}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..20 {
        chunked.extend_from_slice(format!("{:x}\r\n", 65_536).as_bytes());
        chunked.extend_from_slice(&[b'x'; 65_536]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let response = raw(server.address, &chunked);
    assert_eq!(response.status, 413);
}

#[test]
fn wrong_methods_and_unknown_routes_answer_json() {
    let (server, _dir) = start_notes("routes");
    let response = send(server.address, "GET", "/v1/check", Some(PEP), "");
    assert_eq!(response.status, 405);
    assert_eq!(response.json()["error"]["code"], "method_not_allowed");
    let response = send(server.address, "GET", "/v2/nothing", None, "");
    assert_eq!(response.status, 404);
    assert_eq!(response.json()["error"]["code"], "not_found");
}

#[test]
fn a_request_time_is_ignored() {
    let (server, _dir) = start_notes("time");
    // The window is open twelve hours from now; the request claims a time inside it.
    let hour = far_hour();
    let inside = format!("2026-12-07T{hour:02}:30:00Z");
    let response = check(
        server.address,
        &notes("GET", "night", json!({"time": inside})),
    );
    let decision = response.json();
    assert_eq!(decision["decision"], "deny", "{decision}");
    assert_eq!(decision["reasons"][0]["constraint"], "wallClockWindow");
}

#[test]
fn rate_limits_hold_across_requests() {
    let (server, _dir) = start_notes("rate");
    let body = notes("POST", "notes", json!({"payload": {"title": "hello"}}));
    assert_eq!(check(server.address, &body).json()["decision"], "allow");
    assert_eq!(check(server.address, &body).json()["decision"], "allow");
    let third = check(server.address, &body).json();
    assert_eq!(third["decision"], "deny");
    assert_eq!(third["reasons"][0]["constraint"], "rateLimit");
}

#[test]
fn health_is_open_and_metrics_label_only_loaded_names() {
    let (server, _dir) = start_notes("metrics");
    assert_eq!(
        send(server.address, "GET", "/healthz", None, "").status,
        200
    );
    assert_eq!(
        send(server.address, "GET", "/readyz", None, "").json()["status"],
        "ready"
    );
    for i in 0..5 {
        let body = json!({"skill": format!("attacker-{i}"), "operation": "GET", "resource": "https://x.example.com/"});
        check(server.address, &body.to_string());
    }
    check(server.address, &notes("GET", "notes/1", json!({})));
    check(
        server.address,
        &notes("GET", "notes/1", json!({"skill": "notes"})),
    );
    let metrics =
        String::from_utf8(send(server.address, "GET", "/metrics", None, "").body).unwrap();
    assert!(!metrics.contains("attacker"), "{metrics}");
    assert!(
        metrics.contains(r#"capgate_decisions_total{verdict="deny",skill="(unknown)",capability="",refusal="unknownSkill"} 5"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"capgate_decisions_total{verdict="allow",skill="notes",capability="read",refusal=""} 2"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"capgate_policy_revision{skill="notes",revision="sha256:"#));
    assert!(
        metrics.contains("capgate_decision_seconds_count 7"),
        "{metrics}"
    );
    assert!(
        metrics.contains("capgate_unauthorized_total 0"),
        "{metrics}"
    );
}

#[test]
fn every_decision_is_in_the_audit_log_after_shutdown() {
    let (server, dir) = start_notes("audit");
    for _ in 0..50 {
        check(server.address, &notes("GET", "notes/1", json!({})));
    }
    server.stop();
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 50);
    for line in lines {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(record["decision"], "allow");
        assert_eq!(record["capability"], "read");
    }
}

#[test]
fn lost_audit_records_are_counted() {
    let dir = temp_dir("audit-lost");
    let policy = write(&dir, "notes.cap", &notes_policy());
    let mut config = config(&dir, vec![policy]);
    // Every write to /dev/full fails: the writer stops, and every later record is lost.
    config.audit = Some(std::path::PathBuf::from("/dev/full"));
    let server = start(config);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        check(server.address, &notes("GET", "notes/1", json!({})));
        let metrics =
            String::from_utf8(send(server.address, "GET", "/metrics", None, "").body).unwrap();
        if !metrics.contains("capgate_audit_failures_total 0") {
            assert!(
                metrics.contains("capgate_audit_failures_total"),
                "{metrics}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no lost record was counted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
