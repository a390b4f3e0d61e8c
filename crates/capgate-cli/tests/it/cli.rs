//! The command-line contract of SPEC §8, driving the `capgate` binary: exit codes of `check`
//! (0 allow, 1 deny, 2 input error, 3 approval_required), `--now` against the request's `time`,
//! `--format`, and `replay` output lines, expectations, `--observe` and `--audit`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

const POLICY: &str = r#"
skill "s" {
  version "1"
  capability "c" {
    resource http "https://api.example.com/items/{id}"
    operations GET
    lifetime call 2
    fieldEquals resource.id in ["1", "2"]
    wallClockWindow mon-fri 09:00-17:00
  }
  capability "risky" {
    resource http "https://api.example.com/admin"
    operations POST
    lifetime process
    risk high
    justification "admin writes"
  }
  capability "elevated" {
    resource tool "shell"
    operations call
    lifetime process
    sensitivity elevated
    justification "shell access"
    rateLimit 1 per minute
  }
}"#;

use common::write;

fn temp_dir() -> PathBuf {
    common::temp_dir("cli")
}

/// A temp dir holding the policy; returns (dir, policy path).
fn setup() -> (PathBuf, String) {
    let dir = temp_dir();
    let policy = write(&dir, "policy.cap", POLICY);
    (dir, policy.to_str().unwrap().to_owned())
}

fn run(args: &[&str], stdin: &str) -> Output {
    common::run_with_stdin(args, stdin.as_bytes())
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// A Tuesday inside the window.
const IN_HOURS: &str = "2026-12-01T10:00:00Z";
/// A Saturday.
const WEEKEND: &str = "2026-12-05T10:00:00Z";

fn get(id: &str) -> Value {
    json!({"skill": "s", "operation": "GET", "resource": format!("https://api.example.com/items/{id}")})
}

fn check(policy: &str, request: &Value, extra: &[&str]) -> Output {
    let mut args = vec!["check", "-p", policy, "--format", "json"];
    args.extend_from_slice(extra);
    run(&args, &request.to_string())
}

// ------------------------------------------------------------------------------------------------
// check: exit codes
// ------------------------------------------------------------------------------------------------

#[test]
fn check_allow_exits_0() {
    let (_dir, policy) = setup();
    let output = check(&policy, &get("1"), &["--now", IN_HOURS]);
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["decision"], "allow");
    assert_eq!(decision["capability"], "c");
}

#[test]
fn check_deny_exits_1() {
    let (_dir, policy) = setup();
    let output = check(&policy, &get("3"), &["--now", IN_HOURS]);
    assert_eq!(code(&output), 1);
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["reasons"][0]["constraint"], "fieldEquals");
    assert_eq!(decision["reasons"][0]["path"], "resource.id");
    assert!(
        decision["reasons"][0]["source"]
            .as_str()
            .unwrap()
            .ends_with("policy.cap:8:5")
    );
}

#[test]
fn check_approval_required_exits_3() {
    let (_dir, policy) = setup();
    let request = json!({"skill": "s", "operation": "POST", "resource": "https://api.example.com/admin", "autonomy": 79});
    let output = check(&policy, &request, &[]);
    assert_eq!(code(&output), 3, "{}", stdout(&output));
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["decision"], "approval_required");
    assert_eq!(decision["reasons"][0]["constraint"], "risk");
    let request = json!({"skill": "s", "operation": "POST", "resource": "https://api.example.com/admin", "autonomy": 80});
    assert_eq!(code(&check(&policy, &request, &[])), 0);
}

#[test]
fn check_elevated_capability_exits_3_because_check_is_stateless() {
    let (_dir, policy) = setup();
    let request = json!({"skill": "s", "operation": "call", "resource": "tool:shell"});
    let output = check(&policy, &request, &[]);
    assert_eq!(code(&output), 3);
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "sensitivity");
}

#[test]
fn check_is_stateless_grants_and_rate_limits_are_not_applied() {
    let (_dir, policy) = setup();
    // `c` has `lifetime call 2` and no grant is presented: still allowed by `check`.
    for _ in 0..3 {
        assert_eq!(code(&check(&policy, &get("2"), &["--now", IN_HOURS])), 0);
    }
}

#[test]
fn check_unknown_skill_exits_1() {
    let (_dir, policy) = setup();
    let request =
        json!({"skill": "x", "operation": "GET", "resource": "https://api.example.com/items/1"});
    let output = check(&policy, &request, &[]);
    assert_eq!(code(&output), 1);
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "unknownSkill");
}

#[test]
fn check_input_errors_exit_2() {
    let (dir, policy) = setup();
    // Malformed request JSON.
    let output = run(&["check", "-p", &policy], "{not json");
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("error"), "{}", stderr(&output));
    // A request file that does not exist.
    let missing = dir.join("missing.json");
    let output = run(
        &["check", "-p", &policy, "-r", missing.to_str().unwrap()],
        "",
    );
    assert_eq!(code(&output), 2);
    // A bad `--now`.
    let output = check(&policy, &get("1"), &["--now", "tomorrow"]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("tomorrow"), "{}", stderr(&output));
    // A bad request `time`.
    let request = json!({"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/1", "time": "noon"});
    assert_eq!(code(&check(&policy, &request, &[])), 2);
    // Usage errors.
    assert_eq!(code(&run(&["check"], "")), 2);
    assert_eq!(code(&run(&["check", "-p", &policy, "--bogus"], "")), 2);
    assert_eq!(code(&run(&["frobnicate"], "")), 2);
    assert_eq!(code(&check(&policy, &get("1"), &["--format", "yaml"])), 2);
}

#[test]
fn check_reads_the_request_from_a_file_or_standard_input() {
    let (dir, policy) = setup();
    let request = write(&dir, "r.json", get("1").to_string());
    let output = run(
        &[
            "check",
            "-p",
            &policy,
            "-r",
            request.to_str().unwrap(),
            "--now",
            IN_HOURS,
        ],
        "",
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let output = run(
        &["check", "-p", &policy, "-r", "-", "--now", IN_HOURS],
        &get("1").to_string(),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
}

#[test]
fn check_accepts_a_policy_directory_and_json_manifests() {
    let dir = temp_dir();
    write(&dir, "a.cap", POLICY);
    write(
        &dir,
        "b.json",
        r#"{"skill": {"name": "m", "version": "1"},
            "capabilities": [{"name": "read", "resource": "db:crm/{org}/records", "operations": ["SELECT"],
                              "constraints": [{"type": "fieldEquals", "field": "resource.org", "equalsField": "context.org"}]}]}"#,
    );
    // A JSON file that is not a manifest (e.g. a schema) is skipped inside directories.
    write(&dir, "schema.json", r#"{"type": "object"}"#);
    let request = json!({"skill": "m", "operation": "SELECT", "resource": "db:crm/acme/records", "context": {"org": "acme"}});
    let output = check(dir.to_str().unwrap(), &request, &[]);
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
    let request = json!({"skill": "m", "operation": "SELECT", "resource": "db:crm/other/records", "context": {"org": "acme"}});
    assert_eq!(code(&check(dir.to_str().unwrap(), &request, &[])), 1);
}

#[test]
fn regression_a_broken_json_manifest_in_a_policy_directory_is_reported_not_skipped() {
    // Regression: a manifest with a syntax error was taken for "not a manifest" and skipped:
    // the directory loaded without its skill and nothing said why.
    let dir = temp_dir();
    write(&dir, "a.cap", POLICY);
    write(
        &dir,
        "payments.json",
        "{\"skill\": {\"name\": \"payments\", \"version\": \"1\"},\n \"capabilities\": [,]}",
    );
    let request = json!({"skill": "m", "operation": "SELECT", "resource": "db:crm/acme/records"});
    let output = check(dir.to_str().unwrap(), &request, &[]);
    assert_eq!(code(&output), 2, "{}{}", stdout(&output), stderr(&output));
    assert!(
        stderr(&output).contains("payments.json:2:"),
        "{}",
        stderr(&output)
    );
}

/// Found in review: request text went into `--format text` output raw, so a skill name holding
/// a newline printed a line of its own that read as a verdict (log injection).
#[test]
fn regression_request_text_cannot_forge_a_line_of_text_output() {
    let (_dir, policy) = setup();
    let forged = "x`\nallow — skill `s`, capability `c`";
    let request = json!({"skill": forged, "operation": "call", "resource": "tool:t\r\u{1b}[2K"});
    let output = run(
        &["check", "-p", &policy, "--format", "text"],
        &request.to_string(),
    );
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        !text.lines().any(|line| line.starts_with("allow")),
        "{text}"
    );
    assert!(!text.contains('\r') && !text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("skill `x`\\nallow"), "{text}");
    // Replay's text lines, and its error lines, likewise.
    let session = format!(
        "{}\n{}\n",
        json!({"call": request}),
        json!({"call": {"skill": "s", "operation": "call", "resource": "tool:t", "x\ny": 1}})
    );
    let dir = temp_dir();
    let session_path = write(&dir, "forged.session.jsonl", session);
    let output = run(
        &[
            "replay",
            "-p",
            &policy,
            session_path.to_str().unwrap(),
            "--format",
            "text",
        ],
        "",
    );
    let text = stdout(&output);
    assert_eq!(
        text.lines().count(),
        2 + text.matches("\n  ").count(),
        "{text}"
    );
    assert!(
        !text.lines().any(|line| line.starts_with("allow")),
        "{text}"
    );
    assert!(!text.lines().any(|line| line.starts_with("y")), "{text}");
}

/// Found in review: `check --audit` returned before opening its audit file when the request
/// did not parse, so a refused request (an unknown field, duplicate keys, too many bytes) left no
/// record; and a request the engine refuses as input (`agent` not an object, a malformed `time`)
/// exited 1 where the parser's refusals exit 2 (SPEC §8: 2 is an input error).
#[test]
fn regression_check_audits_input_refusals_and_exits_2_for_them() {
    let (dir, policy) = setup();
    let audit = dir.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap();
    let requests = [
        r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/1","extra":1}"#,
        r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/1","payload":{"a":1,"a":2}}"#,
        r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/1","agent":5}"#,
        r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/1","time":"noon"}"#,
    ];
    for (i, request) in requests.iter().enumerate() {
        let output = run(&["check", "-p", &policy, "--audit", audit_arg], request);
        assert_eq!(
            code(&output),
            2,
            "{request}: {}{}",
            stdout(&output),
            stderr(&output)
        );
        let records = std::fs::read_to_string(&audit).unwrap_or_default();
        assert_eq!(records.lines().count(), i + 1, "{request}: {records}");
        let last: Value = serde_json::from_str(records.lines().last().unwrap()).unwrap();
        assert_eq!(last["decision"], "deny", "{last}");
        assert_eq!(last["reasons"][0]["constraint"], "input", "{last}");
    }
    // A deny by the policy still exits 1.
    let output = run(
        &["check", "-p", &policy],
        r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/9"}"#,
    );
    assert_eq!(code(&output), 1, "{}", stdout(&output));
}

/// Found in review: a parser refusal printed the unknown member's name raw on stderr (a
/// terminal title and clear-screen sequence, a forged line), and a deny for a `[*]` over the
/// scan limit (reason `input`, attached to the capability) exited 1 instead of 2.
#[test]
fn regression_check_escapes_parser_refusals_and_exits_2_for_evaluation_limits() {
    let (_dir, policy) = setup();
    let request = r#"{"skill":"s","operation":"GET","resource":"https://api.example.com/items/1","\u001b]0;owned\u0007\u001b[2J\nallow":1}"#;
    let output = run(&["check", "-p", &policy, "--format", "text"], request);
    assert_eq!(code(&output), 2);
    let err = stderr(&output);
    assert!(
        !err.contains('\u{1b}') && err.lines().count() == 1,
        "{err:?}"
    );
    let dir = temp_dir();
    let scan = write(
        &dir,
        "scan.cap",
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    fieldMatches payload.a[*] ~ /x/
  }
}"#,
    );
    let request = json!({"skill": "s", "operation": "call", "resource": "tool:t",
                         "payload": {"a": vec!["x"; 100_001]}});
    let output = check(scan.to_str().unwrap(), &request, &[]);
    let decision: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "input", "{decision}");
    assert_eq!(code(&output), 2, "{decision}");
}

// ------------------------------------------------------------------------------------------------
// check: the clock
// ------------------------------------------------------------------------------------------------

#[test]
fn check_uses_the_request_time_when_no_now_is_given() {
    let (_dir, policy) = setup();
    let mut request = get("1");
    request["time"] = json!(IN_HOURS);
    assert_eq!(code(&check(&policy, &request, &[])), 0);
    request["time"] = json!(WEEKEND);
    let output = check(&policy, &request, &[]);
    assert_eq!(code(&output), 1);
    let decision: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "wallClockWindow");
}

#[test]
fn check_now_wins_over_the_request_time() {
    let (_dir, policy) = setup();
    let mut request = get("1");
    request["time"] = json!(WEEKEND);
    assert_eq!(code(&check(&policy, &request, &["--now", IN_HOURS])), 0);
    request["time"] = json!(IN_HOURS);
    assert_eq!(code(&check(&policy, &request, &["--now", WEEKEND])), 1);
}

#[test]
fn check_window_edge_with_now() {
    let (_dir, policy) = setup();
    assert_eq!(
        code(&check(
            &policy,
            &get("1"),
            &["--now", "2026-12-01T09:00:00Z"]
        )),
        0
    );
    assert_eq!(
        code(&check(
            &policy,
            &get("1"),
            &["--now", "2026-12-01T08:59:59Z"]
        )),
        1
    );
    assert_eq!(
        code(&check(
            &policy,
            &get("1"),
            &["--now", "2026-12-01T17:00:00Z"]
        )),
        1
    );
}

// ------------------------------------------------------------------------------------------------
// check: text format
// ------------------------------------------------------------------------------------------------

#[test]
fn check_text_format_names_the_verdict_capability_and_reasons() {
    let (_dir, policy) = setup();
    let output = run(
        &[
            "check", "-p", &policy, "--format", "text", "--now", IN_HOURS,
        ],
        &get("1").to_string(),
    );
    assert_eq!(code(&output), 0);
    let text = stdout(&output);
    assert!(text.starts_with("allow"), "{text}");
    assert!(text.contains("`c`"), "{text}");

    let output = run(
        &["check", "-p", &policy, "--now", IN_HOURS],
        &get("9").to_string(),
    );
    assert_eq!(code(&output), 1);
    let text = stdout(&output);
    assert!(text.starts_with("deny"), "{text}");
    assert!(text.contains("fieldEquals"), "{text}");
    assert!(text.contains("resource.id"), "{text}");
    assert!(text.contains("policy.cap:8:5"), "{text}");
}

// ------------------------------------------------------------------------------------------------
// replay
// ------------------------------------------------------------------------------------------------

fn session(dir: &Path, lines: &[Value]) -> String {
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    write(dir, "session.jsonl", &(text.join("\n") + "\n"))
        .to_str()
        .unwrap()
        .to_owned()
}

fn call(request: Value, expect: &str) -> Value {
    json!({"call": request, "expect": expect})
}

fn granted(id: &str, grant: &str) -> Value {
    let mut request = get(id);
    request["grant"] = json!(grant);
    request
}

#[test]
fn replay_prints_one_line_per_input_line_and_exits_0() {
    let (dir, policy) = setup();
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g1"}),
            call(granted("1", "g1"), "allow"),
            json!({"advance": "30s"}),
            call(granted("2", "g1"), "allow"),
            json!({"call": granted("1", "g1"), "expect": "deny", "expect_constraint": "lifetime"}),
        ],
    );
    // The documented argument order: `replay -p POLICY... SESSION.jsonl`.
    let output = run(&["replay", "-p", &policy, &path], "");
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0], json!({"line": 1, "ok": true}));
    assert_eq!(lines[1], json!({"line": 2, "ok": true}));
    assert_eq!(lines[2]["line"], 3);
    assert_eq!(lines[2]["decision"], "allow");
    assert_eq!(lines[2]["grant"], "g1");
    assert_eq!(lines[3], json!({"line": 4, "ok": true}));
    assert_eq!(lines[4]["decision"], "allow");
    assert_eq!(lines[5]["line"], 6);
    assert_eq!(lines[5]["decision"], "deny");
    assert_eq!(lines[5]["reasons"][0]["constraint"], "lifetime");
}

#[test]
fn regression_replay_accepts_the_session_after_several_policies() {
    // Bug: `-p` swallowed the session path, so `replay -p A B SESSION` failed with a usage error.
    let (dir, policy) = setup();
    let other = write(
        &dir,
        "other.cap",
        r#"skill "o" { version "1" capability "r" { resource db "x/y" operations SELECT lifetime process justification "j" } }"#,
    );
    let path = session(
        &dir,
        &[call(
            json!({"skill": "o", "operation": "SELECT", "resource": "db:x/y"}),
            "allow",
        )],
    );
    let output = run(
        &["replay", "-p", &policy, other.to_str().unwrap(), &path],
        "",
    );
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
    // The session first also works.
    let output = run(
        &["replay", &path, "-p", &policy, other.to_str().unwrap()],
        "",
    );
    assert_eq!(code(&output), 0, "{}{}", stdout(&output), stderr(&output));
}

#[test]
fn replay_failed_expectation_exits_1_and_is_reported() {
    let (dir, policy) = setup();
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            call(get("1"), "allow"),
            json!({"call": get("1"), "expect": "deny", "expect_constraint": "rateLimit"}),
        ],
    );
    let output = run(&["replay", "-p", &policy, &path], "");
    assert_eq!(code(&output), 1, "{}", stdout(&output));
    let lines = json_lines(&output);
    // Line 2: no grant, so deny (grant) although allow was expected.
    assert_eq!(lines[1]["decision"], "deny");
    assert_eq!(lines[1]["reasons"][0]["constraint"], "grant");
    assert!(lines[1]["expectation_failed"].is_string(), "{}", lines[1]);
    // Line 3: deny as expected but with `grant`, not `rateLimit`.
    assert!(lines[2]["expectation_failed"].is_string(), "{}", lines[2]);
}

#[test]
fn replay_error_line_wins_over_failed_expectation_exit_2() {
    let (dir, policy) = setup();
    let path = session(&dir, &[call(get("1"), "allow"), json!({"nonsense": true})]);
    let output = run(&["replay", "-p", &policy, &path], "");
    assert_eq!(code(&output), 2);
    let lines = json_lines(&output);
    assert_eq!(lines[1]["line"], 2);
    assert!(lines[1]["error"].is_string());
}

#[test]
fn replay_blank_lines_are_skipped_but_counted() {
    let (dir, policy) = setup();
    let path = write(
        &dir,
        "s.jsonl",
        format!(
            "{}\n\n   \n{}\n",
            json!({"time": IN_HOURS}),
            json!({"begin_transaction": "tx"})
        ),
    );
    let output = run(&["replay", "-p", &policy, path.to_str().unwrap()], "");
    assert_eq!(code(&output), 0);
    let lines = json_lines(&output);
    assert_eq!(
        lines,
        vec![
            json!({"line": 1, "ok": true}),
            json!({"line": 4, "ok": true})
        ]
    );
}

#[test]
fn replay_transactions_revocation_and_approval() {
    let (dir, policy) = setup();
    let shell = json!({"skill": "s", "operation": "call", "resource": "tool:shell"});
    let mut in_tx = granted("1", "gt");
    in_tx["transaction"] = json!("tx");
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"call": shell, "expect": "approval_required", "expect_constraint": "sensitivity"}),
            json!({"approve": {"skill": "s"}}),
            call(shell.clone(), "allow"),
            json!({"call": shell, "expect": "deny", "expect_constraint": "rateLimit"}),
            json!({"begin_transaction": "tx"}),
            json!({"grant": {"skill": "s", "capability": "c", "transaction": "tx"}, "id": "gt"}),
            call(in_tx.clone(), "allow"),
            json!({"end_transaction": "tx"}),
            json!({"call": in_tx, "expect": "deny", "expect_constraint": "lifetime"}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g2"}),
            json!({"revoke": {"grant": "g2"}}),
            json!({"call": granted("1", "g2"), "expect": "deny", "expect_constraint": "grant"}),
            json!({"advance": "1m"}),
            json!({"revoke": {"skill": "s", "capability": "elevated"}}),
            json!({"call": shell, "expect": "deny", "expect_constraint": "grant"}),
            json!({"revoke": {"skill": "s"}}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g3"}),
        ],
    );
    let output = run(&["replay", "-p", &policy, &path], "");
    let lines = json_lines(&output);
    for line in &lines[..17] {
        assert!(line.get("expectation_failed").is_none(), "{line}");
        assert!(line.get("error").is_none(), "{line}");
    }
    // Issuing a grant for a revoked skill is an error line.
    assert!(lines[17]["error"].is_string(), "{}", lines[17]);
    assert_eq!(code(&output), 2);
}

#[test]
fn replay_sliding_window_at_exactly_t() {
    let (dir, policy) = setup();
    let shell = json!({"skill": "s", "operation": "call", "resource": "tool:shell"});
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"approve": {"skill": "s"}}),
            call(shell.clone(), "allow"),
            json!({"advance": "59s"}),
            json!({"call": shell, "expect": "deny", "expect_constraint": "rateLimit"}),
            json!({"advance": "999ms"}),
            call(shell.clone(), "deny"),
            json!({"advance": "1ms"}),
            call(shell.clone(), "allow"),
        ],
    );
    let output = run(&["replay", "-p", &policy, &path], "");
    assert_eq!(code(&output), 0, "{}", stdout(&output));
}

#[test]
fn replay_call_time_sets_the_clock() {
    let (dir, policy) = setup();
    let mut weekend = granted("1", "g");
    weekend["time"] = json!(WEEKEND);
    let mut weekday = granted("1", "g");
    weekday["time"] = json!("2026-12-07T10:00:00Z");
    let path = session(
        &dir,
        &[
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g"}),
            json!({"call": weekend, "expect": "deny", "expect_constraint": "wallClockWindow"}),
            call(weekday, "allow"),
        ],
    );
    let output = run(&["replay", "-p", &policy, &path], "");
    assert_eq!(code(&output), 0, "{}", stdout(&output));
}

#[test]
fn replay_text_format() {
    let (dir, policy) = setup();
    let path = session(&dir, &[json!({"time": IN_HOURS}), call(get("7"), "deny")]);
    let output = run(&["replay", "-p", &policy, &path, "--format", "text"], "");
    assert_eq!(code(&output), 0);
    let text = stdout(&output);
    assert!(text.contains("line 1:"), "{text}");
    assert!(text.contains("line 2: deny"), "{text}");
    assert!(serde_json::from_str::<Value>(text.lines().next().unwrap()).is_err());
}

#[test]
fn replay_observe_returns_allow_with_the_observed_decision() {
    let (dir, policy) = setup();
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g"}),
            json!({"call": granted("9", "g")}),
            json!({"call": granted("1", "g")}),
            json!({"call": granted("1", "g")}),
            json!({"call": granted("1", "g")}),
        ],
    );
    let output = run(&["replay", "-p", &policy, &path, "--observe"], "");
    assert_eq!(code(&output), 0);
    let lines = json_lines(&output);
    // Observed deny: allow returned, grant not consumed.
    assert_eq!(lines[2]["decision"], "allow");
    assert_eq!(lines[2]["observed"], "deny");
    assert_eq!(lines[2]["reasons"][0]["constraint"], "fieldEquals");
    // Two real uses, then the grant is spent.
    assert!(lines[3].get("observed").is_none(), "{}", lines[3]);
    assert!(lines[4].get("observed").is_none(), "{}", lines[4]);
    assert_eq!(lines[5]["decision"], "allow");
    assert_eq!(lines[5]["observed"], "deny");
    assert_eq!(lines[5]["reasons"][0]["constraint"], "lifetime");
}

#[test]
fn replay_audit_writes_one_line_per_decision_and_never_the_payload() {
    let (dir, policy) = setup();
    let audit = dir.join("audit.jsonl");
    let mut secret = granted("9", "g");
    secret["payload"] = json!({"password": "hunter2-very-secret", "nested": {"token": "tok-abc"}});
    let path = session(
        &dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g"}),
            json!({"call": secret}),
            json!({"advance": "1s"}),
            json!({"call": granted("1", "g")}),
        ],
    );
    let output = run(
        &[
            "replay",
            "-p",
            &policy,
            &path,
            "--audit",
            audit.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(!text.contains("tok-abc"), "{text}");
    assert!(!text.contains("password"), "{text}");
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "{text}");
    assert_eq!(records[0]["decision"], "deny");
    assert_eq!(records[0]["skill"], "s");
    assert_eq!(records[0]["resource"], "https://api.example.com/items/9");
    assert_eq!(records[1]["decision"], "allow");
    assert_eq!(records[1]["capability"], "c");
    assert_eq!(records[1]["grant"], "g");
    assert_eq!(
        records[1]["time"].as_str().unwrap(),
        "2026-12-01T10:00:01+00:00"
    );
}

/// A session of one call on a fresh grant, replayed with `--audit audit`.
fn replay_one_granted_call(dir: &Path, policy: &str, audit: &str) -> Output {
    let path = session(
        dir,
        &[
            json!({"time": IN_HOURS}),
            json!({"grant": {"skill": "s", "capability": "c"}, "id": "g"}),
            json!({"call": granted("1", "g")}),
        ],
    );
    run(&["replay", "-p", policy, &path, "--audit", audit], "")
}

/// Regression: a failed audit write was dropped silently (the sink's comment said the CLI
/// reported it; nothing did), so `--audit` on a full disk exited 0 with no trail. An audit
/// trail that cannot be written (here `/dev/full`: every write fails with "no space") is
/// reported, and the run exits 2 even though the decision itself was allow.
#[cfg(target_os = "linux")]
#[test]
fn regression_an_audit_file_that_cannot_be_written_fails_the_run() {
    let (dir, policy) = setup();
    let output = replay_one_granted_call(&dir, &policy, "/dev/full");
    assert_eq!(code(&output), 2, "{}", stderr(&output));
    let err = stderr(&output);
    assert!(
        err.contains("1 audit record(s) could not be written to `/dev/full`"),
        "{err}"
    );
    let ok = check(&policy, &get("1"), &["--now", IN_HOURS]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    let full = check(
        &policy,
        &get("1"),
        &["--now", IN_HOURS, "--audit", "/dev/full"],
    );
    assert_eq!(code(&full), 2, "{}", stderr(&full));
    assert_eq!(json_lines(&full)[0]["decision"], "allow");
    assert!(stderr(&full).contains("audit record(s) could not be written"));
}

/// Regression (found in review): an audit file left with part of a line by an earlier run's
/// failed write had the next run's first record appended to that fragment. The CLI ends such
/// a fragment with a newline before writing.
#[test]
fn regression_an_audit_file_ending_mid_line_gets_whole_records_after_it() {
    let (dir, policy) = setup();
    let audit = dir.join("torn.jsonl");
    std::fs::write(&audit, "{\"time\":\"2026-12-01T10:00:00+00:00\",\"deci").unwrap();
    let audit_arg = audit.to_str().unwrap();
    let output = replay_one_granted_call(&dir, &policy, audit_arg);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = std::fs::read_to_string(&audit).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let record: Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(record["decision"], "allow");
    // A file that already ends with a newline gets nothing extra.
    let output = replay_one_granted_call(&dir, &policy, audit_arg);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let text = std::fs::read_to_string(&audit).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(!text.contains("\n\n"), "{text}");
}

/// Regression: `capgate replay ... | head` panicked with "failed printing to stdout: Broken pipe"
/// once the reader went away. A closed standard output ends the process quietly.
#[test]
fn regression_closed_stdout_ends_quietly_instead_of_panicking() {
    let mut child = common::capgate()
        .args([
            "replay",
            "-p",
            "policies",
            "policies/meeting-scheduler/meeting-scheduler.session.jsonl",
            "--format",
            "text",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the child writes anything.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{stderr}");
}
