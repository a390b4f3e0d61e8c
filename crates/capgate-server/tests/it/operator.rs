//! The operator API: its credential, grants, revocations, transactions, approvals, and the audit
//! line of each action.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use serde_json::json;

use crate::check::{notes, start_notes};
use crate::common::*;

#[test]
fn the_operator_api_takes_the_operator_token_only() {
    let (server, _dir) = start_notes("operator-auth");
    let grant = json!({"skill": "notes", "capability": "granted"}).to_string();
    for token in [None, Some(PEP), Some("operator-token-0123456789abcdeX")] {
        for (method, path, body) in [
            ("POST", "/v1/grants", grant.as_str()),
            ("POST", "/v1/reload", ""),
            ("POST", "/v1/revocations", r#"{"skill": "notes"}"#),
            ("POST", "/v1/revocations/lift", r#"{"skill": "notes"}"#),
            ("POST", "/v1/transactions", r#"{"transaction": "t"}"#),
            ("DELETE", "/v1/transactions/t", ""),
            ("DELETE", "/v1/grants/g-1", ""),
            ("POST", "/v1/approvals", r#"{"skill": "notes"}"#),
        ] {
            let response = send(server.address, method, path, token, body);
            assert_eq!(response.status, 401, "{method} {path} with {token:?}");
        }
    }
    // Nothing happened: the skill is not revoked.
    assert_eq!(
        check(server.address, &notes("GET", "notes/1", json!({}))).json()["decision"],
        "allow"
    );
}

#[test]
fn without_an_operator_token_file_the_operator_api_is_closed() {
    let dir = temp_dir("no-operator");
    let policy = write(&dir, "notes.cap", &crate::check::notes_policy());
    let mut config = config(&dir, vec![policy]);
    config.operator_token_file = None;
    let server = start(config);
    let response = operator(server.address, "POST", "/v1/reload", "");
    assert_eq!(response.status, 401);
}

#[test]
fn a_grant_allows_its_calls_and_a_revoked_one_none() {
    let (server, dir) = start_notes("grants");
    let body = notes("GET", "granted", json!({}));
    assert_eq!(
        check(server.address, &body).json()["reasons"][0]["constraint"],
        "grant"
    );
    let issued = operator(
        server.address,
        "POST",
        "/v1/grants",
        &json!({"skill": "notes", "capability": "granted"}).to_string(),
    );
    assert_eq!(issued.status, 201);
    let token = issued.json()["token"].as_str().unwrap().to_owned();
    assert_eq!(token.len(), 34);
    let with = notes("GET", "granted", json!({"grant": token}));
    let decision = check(server.address, &with).json();
    assert_eq!(decision["decision"], "allow", "{decision}");
    assert_eq!(decision["grant"], token.as_str());
    // `call 1`: used up.
    assert_eq!(check(server.address, &with).json()["decision"], "deny");

    let second = operator(
        server.address,
        "POST",
        "/v1/grants",
        &json!({"skill": "notes", "capability": "granted"}).to_string(),
    )
    .json()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        operator(
            server.address,
            "DELETE",
            &format!("/v1/grants/{second}"),
            ""
        )
        .status,
        204
    );
    let decision = check(
        server.address,
        &notes("GET", "granted", json!({"grant": second})),
    )
    .json();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(
        operator(server.address, "DELETE", "/v1/grants/g-unknown", "").status,
        404
    );
    server.stop();
    let log = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    let actions: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r.get("operator").is_some())
        .collect();
    let names: Vec<&str> = actions
        .iter()
        .map(|r| r["operator"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["grant", "grant", "revoke", "revoke"]);
    assert_eq!(actions[3]["ok"], false);
    assert!(actions[3]["error"].as_str().unwrap().contains("g-unknown"));
}

#[test]
fn grant_errors_name_the_problem() {
    let (server, _dir) = start_notes("grant-errors");
    let unknown = operator(
        server.address,
        "POST",
        "/v1/grants",
        &json!({"skill": "nobody", "capability": "x"}).to_string(),
    );
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody")
    );
    let extra = operator(
        server.address,
        "POST",
        "/v1/grants",
        &json!({"skill": "notes", "capability": "granted", "uses": 100}).to_string(),
    );
    assert_eq!(extra.status, 400, "unknown fields are refused");
    let bad = operator(server.address, "POST", "/v1/grants", "{");
    assert_eq!(bad.status, 400);
}

#[test]
fn revocations_refuse_calls_until_lifted() {
    let (server, _dir) = start_notes("revocations");
    let body = notes("GET", "notes/1", json!({}));
    let revoke = json!({"skill": "notes", "capability": "read"}).to_string();
    assert_eq!(
        operator(server.address, "POST", "/v1/revocations", &revoke).status,
        204
    );
    let decision = check(server.address, &body).json();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["reasons"][0]["constraint"], "grant");
    let lifted = operator(server.address, "POST", "/v1/revocations/lift", &revoke);
    assert_eq!(lifted.json()["lifted"], true);
    assert_eq!(check(server.address, &body).json()["decision"], "allow");
    let again = operator(server.address, "POST", "/v1/revocations/lift", &revoke);
    assert_eq!(again.json()["lifted"], false);
}

#[test]
fn transactions_begin_once_and_end_once() {
    let (server, _dir) = start_notes("transactions");
    let begin = json!({"transaction": "turn-1"}).to_string();
    assert_eq!(
        operator(server.address, "POST", "/v1/transactions", &begin).status,
        204
    );
    assert_eq!(
        operator(server.address, "POST", "/v1/transactions", &begin).status,
        409
    );
    assert_eq!(
        operator(server.address, "DELETE", "/v1/transactions/turn-1", "").status,
        204
    );
    assert_eq!(
        operator(server.address, "DELETE", "/v1/transactions/turn-1", "").status,
        404
    );
}

#[test]
fn approvals_are_recorded() {
    let (server, _dir) = start_notes("approvals");
    let response = operator(
        server.address,
        "POST",
        "/v1/approvals",
        r#"{"skill": "notes"}"#,
    );
    assert_eq!(response.status, 204);
}
