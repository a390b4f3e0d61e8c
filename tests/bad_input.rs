//! Malformed and hostile input (SPEC §7): every request that is malformed or breaks a limit is a
//! deny with reason `input` — never a panic, never an allow — and every malformed session line or
//! policy is a clear error from the CLI (exit 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use capgate::{
    Decision, Engine, InMemoryStore, Limits, PolicyFormat, PolicyLoader, ReasonKind,
    SimulatedClock, Verdict,
};

/// Allows every `tool:t` call whose optional fields hold; lets `[*]` and depth be exercised.
const POLICY: &str = r#"
skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    lifetime process
    justification "bad input tests"
    optional fieldRange payload.xs[*] >= 0
    optional fieldRange payload.n <= 10
  }
}"#;

fn engine() -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("bad.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
    Engine::builder(loader.finish().unwrap())
        .clock(Arc::new(SimulatedClock::new(
            capgate::parse_timestamp("2026-12-01T10:00:00Z").unwrap(),
        )))
        .state(Arc::new(InMemoryStore::new()))
        .build()
}

fn decide_bytes(bytes: &[u8]) -> Decision {
    engine().check_slice(bytes)
}

fn decide(text: &str) -> Decision {
    decide_bytes(text.as_bytes())
}

/// A request around a raw payload text.
fn with_payload(payload: &str) -> String {
    format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{payload}}}"#)
}

#[track_caller]
fn assert_input_deny(decision: &Decision) {
    assert_eq!(decision.decision, Verdict::Deny, "{decision:#?}");
    assert_eq!(decision.capability, None);
    assert_eq!(decision.reasons.len(), 1, "{decision:#?}");
    assert_eq!(
        decision.reasons[0].constraint,
        ReasonKind::Input,
        "{decision:#?}"
    );
    assert!(!decision.reasons[0].message.is_empty());
}

#[test]
fn well_formed_request_is_allowed() {
    let decision = decide(&with_payload(r#"{"xs":[1,2],"n":3}"#));
    assert_eq!(decision.decision, Verdict::Allow, "{decision:#?}");
}

// ------------------------------------------------------------------------------------------------
// Depth
// ------------------------------------------------------------------------------------------------

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn regression_payload_exactly_at_the_depth_limit_is_accepted() {
    // Bug: serde_json's fixed 128-level limit counted the request object too, so a payload
    // of exactly 128 levels was refused as malformed.
    let decision = decide(&with_payload(&format!(r#"{{"deep":{}}}"#, nested(127))));
    assert_eq!(decision.decision, Verdict::Allow, "{decision:#?}");
    let agent = format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:t","agent":{{"a":{}}}}}"#,
        nested(127)
    );
    assert_eq!(decide(&agent).decision, Verdict::Allow);
}

#[test]
fn payload_at_the_depth_limit_is_accepted() {
    let decision = decide(&with_payload(&format!(r#"{{"deep":{}}}"#, nested(127))));
    assert_eq!(decision.decision, Verdict::Allow, "{decision:#?}");
}

#[test]
fn payload_deeper_than_the_limit_is_denied_with_input() {
    assert_input_deny(&decide(&with_payload(&format!(
        r#"{{"deep":{}}}"#,
        nested(128)
    ))));
    assert_input_deny(&decide(&with_payload(&nested(129))));
}

#[test]
fn absurdly_deep_payload_is_denied_without_overflowing_the_stack() {
    assert_input_deny(&decide(&with_payload(&nested(200_000))));
    let objects = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000));
    assert_input_deny(&decide(&with_payload(&objects)));
}

#[test]
fn deep_agent_and_context_are_denied_with_input() {
    for field in ["agent", "context"] {
        let text = format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","{field}":{{"a":{}}}}}"#,
            nested(200)
        );
        assert_input_deny(&decide(&text));
    }
}

#[test]
fn lower_depth_limit_is_honoured() {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("bad.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
    let engine = Engine::builder(loader.finish().unwrap())
        .limits(Limits {
            max_payload_depth: 3,
            ..Limits::DEFAULT
        })
        .unwrap()
        .build();
    let ok = engine.check_slice(with_payload(&format!(r#"{{"d":{}}}"#, nested(2))).as_bytes());
    assert_eq!(ok.decision, Verdict::Allow, "{ok:#?}");
    let deep = with_payload(&format!(r#"{{"d":{}}}"#, nested(3)));
    assert_input_deny(&engine.check_slice(deep.as_bytes()));
}

// ------------------------------------------------------------------------------------------------
// Size
// ------------------------------------------------------------------------------------------------

#[test]
fn request_over_one_mebibyte_is_denied_with_input() {
    let big = format!(r#"{{"s":"{}"}}"#, "a".repeat(1 << 20));
    let decision = decide(&with_payload(&big));
    assert_input_deny(&decision);
    assert!(
        decision.reasons[0].message.contains("limit"),
        "{decision:#?}"
    );
}

#[test]
fn large_string_under_the_limit_is_fine_and_messages_stay_short() {
    let engine = engine();
    let long = "b".repeat(900_000);
    let text = with_payload(&format!(r#"{{"n":"{long}"}}"#));
    let decision = engine.check_slice(text.as_bytes());
    assert_eq!(decision.decision, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldRange);
    assert!(decision.reasons[0].message.len() < 400, "{decision:#?}");
}

#[test]
fn wildcard_over_more_than_100000_elements_is_denied_with_input() {
    let items = vec!["0"; 100_001].join(",");
    let decision = decide(&with_payload(&format!(r#"{{"xs":[{items}]}}"#)));
    assert_input_deny(&decision);
    assert_eq!(decision.reasons[0].path.as_deref(), Some("payload.xs[*]"));
}

#[test]
fn wildcard_over_exactly_100000_elements_is_scanned() {
    let items = vec!["0"; 100_000].join(",");
    let decision = decide(&with_payload(&format!(r#"{{"xs":[{items}]}}"#)));
    assert_eq!(decision.decision, Verdict::Allow, "{decision:#?}");
    let mut items = vec!["0"; 100_000];
    items[99_999] = "-1";
    let decision = decide(&with_payload(&format!(r#"{{"xs":[{}]}}"#, items.join(","))));
    assert_eq!(decision.decision, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldRange);
    assert_eq!(
        decision.reasons[0].path.as_deref(),
        Some("payload.xs[99999]")
    );
}

// ------------------------------------------------------------------------------------------------
// Encoding and numbers
// ------------------------------------------------------------------------------------------------

#[test]
fn non_utf8_bytes_are_denied_with_input() {
    let mut bytes = br#"{"skill":"s","operation":"call","resource":"tool:t","payload":""#.to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe, 0x80]);
    bytes.extend_from_slice(br#""}"#);
    assert_input_deny(&decide_bytes(&bytes));
    let mut bytes = br#"{"skill":""#.to_vec();
    bytes.extend_from_slice(&[0xc3, 0x28]);
    bytes.extend_from_slice(br#"","operation":"call","resource":"tool:t"}"#);
    assert_input_deny(&decide_bytes(&bytes));
}

#[test]
fn numbers_beyond_f64_range_are_denied_with_input() {
    for n in ["1e400", "-1e400", "1E+999"] {
        assert_input_deny(&decide(&with_payload(&format!(r#"{{"n":{n}}}"#))));
    }
}

#[test]
fn integers_beyond_u64_still_compare_as_numbers() {
    // Read as the nearest double (> 10), so the range fails; never an error or an allow.
    let decision = decide(&with_payload(r#"{"n":123456789012345678901234567890}"#));
    assert_eq!(decision.decision, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldRange);
}

#[test]
fn tiny_and_negative_zero_numbers_are_ordinary_values() {
    let decision = decide(&with_payload(r#"{"n":-0.0,"xs":[0.0, 1e-400]}"#));
    assert_eq!(decision.decision, Verdict::Allow, "{decision:#?}");
}

// ------------------------------------------------------------------------------------------------
// Shape
// ------------------------------------------------------------------------------------------------

#[test]
fn duplicate_keys_anywhere_are_denied_with_input() {
    for text in [
        r#"{"skill":"s","skill":"s","operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":1,"n":20}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"a":[{"n":1,"n":2}]}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","agent":{"id":"a","id":"b"}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","context":{"o":1,"o":1}}"#,
    ] {
        assert_input_deny(&decide(text));
    }
}

#[test]
fn non_object_agent_or_context_is_denied_with_input() {
    for (field, value) in [
        ("agent", r#""agent-7""#),
        ("agent", "[1]"),
        ("agent", "7"),
        ("context", "true"),
        ("context", r#""acme""#),
    ] {
        let text =
            format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","{field}":{value}}}"#);
        assert_input_deny(&decide(&text));
    }
}

#[test]
fn any_json_payload_is_accepted() {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text(
        "any.cap",
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#
            .to_owned(),
        PolicyFormat::Cap,
        None,
    );
    let engine = Engine::builder(loader.finish().unwrap()).build();
    for payload in ["null", "1", r#""text""#, "[]", "true", "{}"] {
        let decision = engine.check_slice(with_payload(payload).as_bytes());
        assert_eq!(
            decision.decision,
            Verdict::Allow,
            "{payload}: {decision:#?}"
        );
    }
}

#[test]
fn autonomy_out_of_range_or_not_an_integer_is_denied_with_input() {
    for autonomy in ["101", "-1", "50.5", r#""80""#, "true", "1e3", "{}"] {
        let text = format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","autonomy":{autonomy}}}"#
        );
        let decision = decide(&text);
        assert_input_deny(&decision);
    }
    // `null` is the same as absent (0).
    for autonomy in ["0", "100", "100.0", "null"] {
        let text = format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","autonomy":{autonomy}}}"#
        );
        assert_eq!(decide(&text).decision, Verdict::Allow, "{autonomy}");
    }
}

#[test]
fn bad_time_is_denied_with_input_on_a_simulated_clock() {
    for time in [
        r#""yesterday""#,
        r#""2026-13-01T00:00:00Z""#,
        r#""2026-12-01 10:00:00""#,
        r#""2026-12-01T10:00:00""#,
        "5",
        "[]",
    ] {
        let text =
            format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","time":{time}}}"#);
        assert_input_deny(&decide(&text));
    }
}

#[test]
fn missing_required_fields_and_unknown_fields_are_denied_with_input() {
    for text in [
        r#"{"operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","extra":1}"#,
        r#"{"skill":1,"operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","grant":7}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","transaction":["tx"]}"#,
    ] {
        assert_input_deny(&decide(text));
    }
}

#[test]
fn request_member_names_with_escapes_read_as_their_decoded_names() {
    // The tape path compares plain member names where they lie and decodes escaped ones; both
    // must read a request exactly as the strict parser does.
    let allowed =
        r#"{"sk\u0069ll":"s","\u006fperation":"call","resource":"tool:t","p\u0061yload":{"n":1}}"#;
    let decision = decide(allowed);
    assert_eq!(decision.decision, Verdict::Allow, "{decision:?}");
    // Decided by the tape path itself, not by the strict parser it falls back to.
    let tape = engine().check_slice_tape_only(allowed.as_bytes());
    assert_eq!(tape.map(|d| d.decision), Some(Verdict::Allow));
    let over = r#"{"skill":"s","operation":"call","resource":"tool:t","p\u0061yload":{"n":11}}"#;
    assert_eq!(decide(over).decision, Verdict::Deny);
    assert!(
        !decide(over)
            .reasons
            .iter()
            .any(|r| r.constraint == ReasonKind::Input)
    );
    for text in [
        // Escaped, but not a member name once decoded.
        r#"{"skill":"s","operation":"call","resource":"tool:t","p\u0061yloads":{}}"#,
        // A plain name and an escaped one that decode the same.
        r#"{"skill":"s","sk\u0069ll":"s","operation":"call","resource":"tool:t"}"#,
        // Names that differ from a member by case or by one byte.
        r#"{"Skill":"s","operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","payloaD":{}}"#,
    ] {
        assert_input_deny(&decide(text));
    }
}

#[test]
fn envelope_strings_with_escapes_are_read_by_the_tape_path_as_their_decoded_text() {
    // Some encoders escape `/` (`\/`) or `&` (`\u0026`, Go's default) in the resource; such a
    // request is decided from its tape (strings decoded first, off the usual path), exactly as
    // the strict parser reads it.
    let engine = engine();
    for text in [
        r#"{"skill":"\u0073","operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"c\u0061ll","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:\u0074"}"#,
        r#"{"sk\u0069ll":"\u0073","\u006fperation":"c\u0061ll","resource":"tool:\u0074","payload":{"n":1}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","time":"2026-12-01T10:00:00\u005a"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","transaction":"t\u0078","grant":"g\/1"}"#,
        // Denied, with the decoded text in the reasons.
        r#"{"skill":"\u0078","operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"c\u0061lls","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:\u0075"}"#,
        r#"{"skill":"s","skill_hash":"sha256:\u0030","operation":"call","resource":"tool:t"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":11},"time":"\u0031"}"#,
    ] {
        let parsed =
            engine.check(&capgate::Request::from_slice(text.as_bytes(), &Limits::DEFAULT).unwrap());
        let tape = engine.check_slice_tape_only(text.as_bytes());
        assert_eq!(tape.as_ref(), Some(&parsed), "{text}");
        assert_eq!(engine.check_slice(text.as_bytes()), parsed, "{text}");
    }
    let allowed =
        r#"{"sk\u0069ll":"\u0073","\u006fperation":"c\u0061ll","resource":"tool:\u0074"}"#;
    assert_eq!(decide(allowed).decision, Verdict::Allow);
    let unknown = decide(r#"{"skill":"\u0078","operation":"call","resource":"tool:t"}"#);
    assert_eq!(&*unknown.skill, "x");
    // An escaped string where the envelope wants another type is still refused.
    for text in [
        r#"{"skill":"s","operation":"call","resource":"tool:t","grant":["\u0067"]}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t","p\u0061yloads":"\u0031"}"#,
    ] {
        assert_input_deny(&decide(text));
        assert_eq!(
            engine.check_slice_tape_only(text.as_bytes()),
            None,
            "{text}"
        );
    }
}

#[test]
fn non_object_or_truncated_requests_are_denied_with_input() {
    for text in [
        "",
        " ",
        "null",
        "[]",
        r#""request""#,
        "{",
        r#"{"skill":"s","operation":"call","resource":"tool:t""#,
        r#"{"skill":"s","operation":"call","resource":"tool:t"} trailing"#,
        r#"{"skill":"s","operation":"call","resource":"tool:t"}{}"#,
    ] {
        assert_input_deny(&decide(text));
    }
}

#[test]
fn control_characters_in_the_resource_are_denied_with_resource() {
    for resource in ["tool:t\\u0000", "tool:t\\n", "tool: t", "tool:t\\u007f"] {
        let text = format!(r#"{{"skill":"s","operation":"call","resource":"{resource}"}}"#);
        let decision = decide(&text);
        assert_eq!(decision.decision, Verdict::Deny, "{resource}");
        assert_eq!(decision.reasons[0].constraint, ReasonKind::Resource);
    }
}

// ------------------------------------------------------------------------------------------------
// The CLI: malformed requests, sessions and policies
// ------------------------------------------------------------------------------------------------

use common::write;

fn temp_dir() -> PathBuf {
    common::temp_dir("bad-input")
}

fn capgate(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_capgate"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    // The child may exit before reading everything (e.g. on a bad policy).
    let _ = input.write_all(stdin);
    drop(input);
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn assert_no_panic(output: &Output) {
    let err = stderr(output);
    assert!(!err.contains("panicked"), "{err}");
    assert!(output.status.code().is_some(), "killed by a signal");
}

#[test]
fn cli_check_deep_payload_is_never_allowed() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let request = with_payload(&nested(100_000));
    let output = capgate(
        &["check", "-p", policy.to_str().unwrap(), "-r", "-"],
        request.as_bytes(),
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("malformed request"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn cli_check_non_utf8_and_huge_requests_are_input_errors() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let mut bytes = br#"{"skill":"s","operation":"call","resource":"tool:t","payload":""#.to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(br#""}"#);
    let request = write(&dir, "r.json", &bytes);
    let output = capgate(
        &[
            "check",
            "-p",
            policy.to_str().unwrap(),
            "-r",
            request.to_str().unwrap(),
        ],
        b"",
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));

    let huge = with_payload(&format!(r#""{}""#, "a".repeat(2 << 20)));
    let output = capgate(&["check", "-p", policy.to_str().unwrap()], huge.as_bytes());
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("limit"), "{}", stderr(&output));
}

#[test]
fn cli_check_limit_breaking_array_is_a_deny_with_input() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let items = vec!["0"; 100_001].join(",");
    let request = with_payload(&format!(r#"{{"xs":[{items}]}}"#));
    let output = capgate(
        &["check", "-p", policy.to_str().unwrap(), "--format", "json"],
        request.as_bytes(),
    );
    assert_no_panic(&output);
    // An input refusal (a limit the request broke) exits 2 (SPEC §8), the decision printed.
    assert_eq!(output.status.code(), Some(2));
    let decision: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["reasons"][0]["constraint"], "input");
}

#[test]
fn cli_replay_malformed_lines_are_error_lines_and_exit_2_at_the_end() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let call = r#"{"call":{"skill":"s","operation":"call","resource":"tool:t"},"expect":"allow"}"#;
    let mut session = Vec::new();
    for line in [
        "not json",
        "[]",
        "{}",
        r#"{"time":"2026-12-01T10:00:00Z","advance":"1s"}"#,
        r#"{"time":"not a time"}"#,
        r#"{"advance":"ten seconds"}"#,
        r#"{"advance":5}"#,
        r#"{"call":{"skill":"s"},"expect":"deny","expect":"allow"}"#,
        r#"{"call":{"skill":"s","operation":"call","resource":"tool:t","payload":{"a":1,"a":2}}}"#,
        r#"{"call":{"skill":"s","operation":"call","resource":"tool:t"},"expect":"maybe"}"#,
        r#"{"call":{"skill":"s","operation":"call","resource":"tool:t"},"extra":1}"#,
        r#"{"grant":{"skill":"s"},"id":"g"}"#,
        r#"{"grant":{"skill":"nope","capability":"c"},"id":"g"}"#,
        r#"{"revoke":{"capability":"c"}}"#,
        r#"{"revoke":{"grant":"never-issued"}}"#,
        r#"{"end_transaction":"never-begun"}"#,
        r#"{"approve":"s"}"#,
        &format!(r#"{{"call":{}}}"#, with_payload(&nested(200))),
        r#"{"call":{"skill":"s","operation":"call","resource":"tool:t","payload":1e400}}"#,
    ] {
        session.extend_from_slice(line.as_bytes());
        session.push(b'\n');
    }
    // A line that is not UTF-8, then a good call that must still run.
    session.extend_from_slice(&[0xff, b'{', b'}', b'\n']);
    session.extend_from_slice(call.as_bytes());
    session.push(b'\n');
    let path = write(&dir, "s.jsonl", &session);
    let output = capgate(
        &[
            "replay",
            "-p",
            policy.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 21, "{}", stdout(&output));
    for (i, line) in lines.iter().take(20).enumerate() {
        assert_eq!(line["line"], i + 1, "{line}");
        let error = line["error"].as_str();
        assert!(
            error.is_some_and(|e| !e.is_empty()),
            "line {}: {line}",
            i + 1
        );
    }
    assert_eq!(lines[20]["line"], 21);
    assert_eq!(lines[20]["decision"], "allow");
}

#[test]
fn cli_replay_call_with_a_malformed_request_is_denied_with_reason_input() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let session = concat!(
        r#"{"call":{"skill":"s"},"expect":"deny","expect_constraint":"input"}"#,
        "\n",
        r#"{"call":{"skill":"s","operation":"call","resource":"tool:t","extra":1},"expect":"deny","expect_constraint":"input"}"#,
        "\n",
        r#"{"call":"not a request","expect":"deny","expect_constraint":"input"}"#,
        "\n",
    );
    let path = write(&dir, "s.jsonl", session);
    let output = capgate(
        &[
            "replay",
            "-p",
            policy.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert_eq!(stdout(&output).lines().count(), 3);
}

#[test]
fn cli_replay_call_with_a_payload_at_the_depth_limit_runs() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let at_limit = format!(
        r#"{{"call":{},"expect":"allow"}}"#,
        with_payload(&format!(r#"{{"d":{}}}"#, nested(127)))
    );
    let too_deep = format!(
        r#"{{"call":{},"expect":"deny","expect_constraint":"input"}}"#,
        with_payload(&format!(r#"{{"d":{}}}"#, nested(128)))
    );
    let path = write(&dir, "s.jsonl", format!("{at_limit}\n{too_deep}\n"));
    let output = capgate(
        &[
            "replay",
            "-p",
            policy.to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        b"",
    );
    assert_no_panic(&output);
    let out = stdout(&output);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["decision"], "allow", "{out}");
    // One level past the limit: the engine's answer is a deny with reason `input` (SPEC §7).
    assert_eq!(lines[1]["decision"], "deny", "{out}");
    assert_eq!(lines[1]["reasons"][0]["constraint"], "input", "{out}");
    assert!(
        lines[1]["reasons"][0]["message"]
            .as_str()
            .is_some_and(|e| e.contains("deeper")),
        "{out}"
    );
    assert_eq!(output.status.code(), Some(0));
}

#[test]
fn cli_malformed_policy_exits_2_with_file_line_and_column() {
    let dir = temp_dir();
    let policy = write(
        &dir,
        "broken.cap",
        "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource tool \"t\"\n    operations call\n    justification \"j\"\n    fieldRange payload.n <=\n  }\n}\n",
    );
    let request = r#"{"skill":"s","operation":"call","resource":"tool:t"}"#;
    let output = capgate(
        &["check", "-p", policy.to_str().unwrap()],
        request.as_bytes(),
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("broken.cap:8:"), "{err}");
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));

    let session = write(&dir, "s.jsonl", "{}\n");
    let output = capgate(
        &[
            "replay",
            "-p",
            policy.to_str().unwrap(),
            session.to_str().unwrap(),
        ],
        b"",
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("broken.cap:8:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn cli_policy_errors_are_all_listed() {
    let dir = temp_dir();
    let a = write(
        &dir,
        "a.cap",
        "skill \"a\" {\n  version \"1\"\n  risk 101\n  capability \"c\" { resource tool \"t\" operations frobnicate }\n}\n",
    );
    let b = write(
        &dir,
        "b.json",
        r#"{"skill": {"name": "b", "version": "1"}, "capabilities": [], "surprise": 1}"#,
    );
    let output = capgate(
        &["check", "-p", a.to_str().unwrap(), b.to_str().unwrap()],
        br#"{"skill":"a","operation":"call","resource":"tool:t"}"#,
    );
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("a.cap:3:"), "{err}");
    assert!(err.contains("a.cap:4:"), "{err}");
    assert!(err.contains("b.json:1:"), "{err}");
    assert!(err.contains("surprise"), "{err}");
}

#[test]
fn cli_policy_that_is_not_utf8_or_missing_exits_2() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", [0xff, 0xfe, b's']);
    let request = br#"{"skill":"s","operation":"call","resource":"tool:t"}"#;
    let output = capgate(&["check", "-p", policy.to_str().unwrap()], request);
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("UTF-8"), "{}", stderr(&output));
    let missing = dir.join("missing.cap");
    let output = capgate(&["check", "-p", missing.to_str().unwrap()], request);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("missing.cap"),
        "{}",
        stderr(&output)
    );
}
