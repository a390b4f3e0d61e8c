//! Reloads: the last good policy stays when a new one fails, and `/readyz` says so.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::{Duration, Instant};

use serde_json::json;

use crate::check::{notes, notes_policy};
use crate::common::*;

#[test]
fn a_failed_reload_keeps_the_last_good_policy_and_readiness() {
    let dir = temp_dir("reload");
    let policy = write(&dir, "notes.cap", &notes_policy());
    let server = start(config(&dir, vec![policy.clone()]));
    std::fs::write(&policy, "skill \"notes\" { nope").unwrap();
    let response = operator(server.address, "POST", "/v1/reload", "");
    assert_eq!(response.status, 422);
    assert_eq!(response.json()["error"]["code"], "policy_invalid");
    assert!(
        response.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("notes.cap:1:")
    );
    let ready = send(server.address, "GET", "/readyz", None, "");
    assert_eq!(
        ready.status, 200,
        "one bad push must not pull the server out of rotation"
    );
    assert!(ready.json()["reload_error"].as_str().is_some());
    assert_eq!(
        check(server.address, &notes("GET", "notes/1", json!({}))).json()["decision"],
        "allow"
    );
    let metrics =
        String::from_utf8(send(server.address, "GET", "/metrics", None, "").body).unwrap();
    assert!(
        metrics.contains(r#"capgate_reloads_total{result="error"} 1"#),
        "{metrics}"
    );

    std::fs::write(
        &policy,
        notes_policy().replacen("operations GET", "operations HEAD", 1),
    )
    .unwrap();
    let response = operator(server.address, "POST", "/v1/reload", "");
    assert_eq!(response.status, 200, "{:?}", response.json());
    assert_eq!(response.json()["skills"], 1);
    assert!(
        send(server.address, "GET", "/readyz", None, "")
            .json()
            .get("reload_error")
            .is_none()
    );
    let decision = check(server.address, &notes("GET", "notes/1", json!({}))).json();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["reasons"][0]["constraint"], "operation");
}

#[test]
fn a_changed_policy_file_is_reloaded_when_watched() {
    let dir = temp_dir("watch");
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    write(&policies, "notes.cap", &notes_policy());
    let mut config = config(&dir, vec![policies.clone()]);
    config.watch = true;
    let server = start(config);
    let body = notes("GET", "notes/1", json!({}));
    assert_eq!(check(server.address, &body).json()["decision"], "allow");
    write(
        &policies,
        "notes.cap",
        &notes_policy().replacen("operations GET", "operations HEAD", 1),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if check(server.address, &body).json()["decision"] == "deny" {
            break;
        }
        assert!(Instant::now() < deadline, "the change was never loaded");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_server_does_not_start_on_a_bad_policy_or_token() {
    let dir = temp_dir("bad-start");
    let bad = write(&dir, "bad.cap", "skill {");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let error = runtime
        .block_on(capgate_server::Server::bind(config(&dir, vec![bad])))
        .unwrap_err();
    assert!(error.to_string().contains("bad.cap:1:"), "{error}");

    let good = write(&dir, "notes.cap", &notes_policy());
    let mut weak = config(&dir, vec![good.clone()]);
    weak.pep_token_file = write(&dir, "weak.token", "short");
    let error = runtime
        .block_on(capgate_server::Server::bind(weak))
        .unwrap_err();
    assert!(error.to_string().contains("at least 16 bytes"), "{error}");

    let mut missing = config(&dir, vec![good.clone()]);
    missing.operator_token_file = Some(dir.join("missing.token"));
    assert!(
        runtime
            .block_on(capgate_server::Server::bind(missing))
            .is_err()
    );

    let mut open = config(&dir, vec![good]);
    open.listen = "0.0.0.0:0".parse().unwrap();
    let error = runtime
        .block_on(capgate_server::Server::bind(open))
        .unwrap_err();
    assert!(
        error.to_string().contains("--insecure-plaintext"),
        "{error}"
    );
}
