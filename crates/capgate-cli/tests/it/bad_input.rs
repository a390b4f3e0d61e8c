//! Malformed and hostile input (SPEC §7): every request that is malformed or breaks a limit is a
//! deny with reason `input` — never a panic, never an allow — and every malformed session line or
//! policy is a clear error from the CLI (exit 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use capgate::tape::{Repeats, Tape};
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
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:#?}");
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
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:#?}");
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
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:#?}");
    let agent = format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:t","agent":{{"a":{}}}}}"#,
        nested(127)
    );
    assert_eq!(decide(&agent).verdict, Verdict::Allow);
}

#[test]
fn payload_at_the_depth_limit_is_accepted() {
    let decision = decide(&with_payload(&format!(r#"{{"deep":{}}}"#, nested(127))));
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:#?}");
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
    assert_eq!(ok.verdict, Verdict::Allow, "{ok:#?}");
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
    assert_eq!(decision.verdict, Verdict::Deny);
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
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:#?}");
    let mut items = vec!["0"; 100_000];
    items[99_999] = "-1";
    let decision = decide(&with_payload(&format!(r#"{{"xs":[{}]}}"#, items.join(","))));
    assert_eq!(decision.verdict, Verdict::Deny);
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
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldRange);
}

#[test]
fn tiny_and_negative_zero_numbers_are_ordinary_values() {
    let decision = decide(&with_payload(r#"{"n":-0.0,"xs":[0.0, 1e-400]}"#));
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:#?}");
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
        assert_eq!(decision.verdict, Verdict::Allow, "{payload}: {decision:#?}");
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
        assert_eq!(decide(&text).verdict, Verdict::Allow, "{autonomy}");
    }
}

/// `autonomy` must be "an integer in 0..=100", and a JSON number with no fraction is that
/// integer however it is written: `80.0` and `8e1` are 80 on the tape path and the strict path
/// alike (`check_slice`, `check_value`); `80.5` is refused.
#[test]
fn autonomy_written_as_a_whole_float_is_that_integer() {
    let engine = engine();
    for (autonomy, allowed) in [
        ("80.0", true),
        ("8e1", true),
        ("-0.0", true),
        ("80.5", false),
    ] {
        let text = format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","autonomy":{autonomy}}}"#
        );
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        for decision in [
            engine.check_slice(text.as_bytes()),
            engine.check_value(value),
        ] {
            if allowed {
                assert_eq!(
                    decision.verdict,
                    Verdict::Allow,
                    "{autonomy}: {decision:#?}"
                );
            } else {
                assert_input_deny(&decision);
                assert!(
                    decision.reasons[0]
                        .message
                        .contains("must be an integer in 0..=100")
                );
            }
        }
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
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
    // Decided by the tape path itself, not by the strict parser it falls back to.
    let tape = engine().check_slice_tape_only(allowed.as_bytes());
    assert_eq!(tape.map(|d| d.verdict), Some(Verdict::Allow));
    let over = r#"{"skill":"s","operation":"call","resource":"tool:t","p\u0061yload":{"n":11}}"#;
    assert_eq!(decide(over).verdict, Verdict::Deny);
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
    assert_eq!(decide(allowed).verdict, Verdict::Allow);
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
        assert_eq!(decision.verdict, Verdict::Deny, "{resource}");
        assert_eq!(decision.reasons[0].constraint, ReasonKind::Resource);
    }
}

// ------------------------------------------------------------------------------------------------
// Regex work
// ------------------------------------------------------------------------------------------------

/// A stateless engine over one skill `s` of `tool:t` whose capabilities are `capabilities`
/// (each a list of constraints).
fn regex_engine(capabilities: &[&str]) -> Engine {
    let mut text = String::from("skill \"s\" {\n  version \"1\"\n");
    for (i, constraints) in capabilities.iter().enumerate() {
        text.push_str(&format!(
            "  capability \"c{i}\" {{\n    resource tool \"t\"\n    operations call\n    \
             justification \"regex work tests\"\n    {constraints}\n  }}\n"
        ));
    }
    text.push('}');
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("regex.cap", text, PolicyFormat::Cap, None);
    Engine::builder(loader.finish().unwrap()).build()
}

/// A request for `tool:t` with `payload`, as bytes.
fn request_bytes(payload: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "payload": payload
    }))
    .unwrap()
}

#[track_caller]
fn assert_regex_work_deny(decision: &Decision, path: &str) {
    assert_input_deny(decision);
    let reason = &decision.reasons[0];
    assert!(reason.message.contains("max_regex_work"), "{decision:#?}");
    assert!(
        reason
            .message
            .contains(&Limits::DEFAULT.max_regex_work.to_string()),
        "{decision:#?}"
    );
    assert_eq!(reason.path.as_deref(), Some(path), "{decision:#?}");
}

/// A string of `len` `a`s and `b`s, mixed as a pseudo-random sequence does: the input on which
/// a regex such as `[a-z]*a[a-z]{20}` makes the engine's lazy DFA thrash (about a second per
/// megabyte when it runs).
fn mixed_ab(len: usize) -> String {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x & 1 == 0 { 'a' } else { 'b' }
        })
        .collect()
}

/// Regex work was unbounded: one linear-time regex over a ~1 MB string took 1.2 s, four took
/// 2.5 s. Each match is charged its text's bytes times its regex's size, before it runs,
/// against `Limits::max_regex_work` for the whole request: four `fieldMatches` over a 1,000,000
/// byte string, four 250,000-byte values under one `[*]` path, or a `payloadSchema` `pattern`
/// over the string are refused as `input` without running, from bytes and pre-parsed alike.
#[test]
fn regex_work_beyond_the_request_budget_is_refused_as_input() {
    let four = regex_engine(&[concat!(
        r"fieldMatches payload.text ~ /[a-z]*a[a-z]{20}/ ",
        r"fieldMatches payload.text ~ /[a-z]*b[a-z]{21}/ ",
        r"fieldMatches payload.text ~ /[a-z]*a[a-z]{22}/ ",
        r"fieldMatches payload.text ~ /[a-z]*b[a-z]{23}/"
    )]);
    let bytes = request_bytes(&serde_json::json!({ "text": mixed_ab(1_000_000) }));
    assert!(bytes.len() <= Limits::DEFAULT.max_request_bytes);
    assert_regex_work_deny(&four.check_slice(&bytes), "payload.text");
    let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_regex_work_deny(&four.check_value(value), "payload.text");
    // Usual sizes fit: the budget is for hostile sizes, not for usual requests.
    let fine = request_bytes(&serde_json::json!({ "text": "ab".repeat(1_000) }));
    let decision = four.check_slice(&fine);
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:#?}");
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldMatches);
    let fine = request_bytes(&serde_json::json!({ "text": "ba".repeat(1_000) }));
    assert_eq!(four.check_slice(&fine).verdict, Verdict::Allow);

    // Under `[*]` each element's match is charged.
    let each = regex_engine(&[r"fieldMatches payload.parts[*] ~ /[a-z]*a[a-z]{20}/"]);
    let part = "b".repeat(250_000);
    let parts = request_bytes(&serde_json::json!({ "parts": [part, part, part, part] }));
    assert_regex_work_deny(&each.check_slice(&parts), "payload.parts[*]");
    let fine = request_bytes(&serde_json::json!({ "parts": ["a".repeat(25), "ba".repeat(20)] }));
    assert_eq!(each.check_slice(&fine).verdict, Verdict::Allow);

    // A `payloadSchema` pattern is paid from the same budget.
    let schema = regex_engine(&[
        r#"payloadSchema {"properties": {"text": {"pattern": "^[a-z]*a[a-z]{20}$"}}}"#,
    ]);
    assert_regex_work_deny(&schema.check_slice(&bytes), "payload");
}

/// The budget is the request's, not a capability's: each candidate's matches are paid from
/// what the ones before it left. Two matches of 40 % of the budget fit; a third does not.
#[test]
fn regex_work_is_summed_over_every_candidate_of_a_request() {
    // No shortcut: `(?:ab|b)*c` needs the regex engine.
    let pattern = "(?:ab|b)*c";
    let capability = format!("fieldMatches payload.text ~ /{pattern}/");
    let anchored = capgate::bytecode::matcher::Matcher::anchored(pattern).unwrap();
    let matcher = capgate::bytecode::matcher::Matcher::build(&anchored, false, 1 << 20).unwrap();
    assert!(!matcher.has_shortcut());
    let cost = usize::try_from(matcher.cost()).unwrap();
    let budget = usize::try_from(Limits::DEFAULT.max_regex_work).unwrap();
    let text = request_bytes(&serde_json::json!({ "text": "b".repeat(budget * 2 / 5 / cost) }));
    for (candidates, refused) in [(1, false), (2, false), (3, true)] {
        let engine = regex_engine(&vec![capability.as_str(); candidates]);
        let decision = engine.check_slice(&text);
        assert_eq!(decision.verdict, Verdict::Deny, "{decision:#?}");
        if refused {
            assert_regex_work_deny(&decision, "payload.text");
        } else {
            assert_eq!(decision.reasons.len(), candidates, "{decision:#?}");
            assert!(
                decision
                    .reasons
                    .iter()
                    .all(|r| r.constraint == ReasonKind::FieldMatches),
                "{decision:#?}"
            );
        }
    }
}

/// Both regex limits are the engine's `Limits`: a tighter work budget refuses what the default
/// allows, and a tighter total refuses a policy the default loads.
#[test]
fn regex_limits_are_honoured_as_configured() {
    let policy = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call
  justification "j" fieldMatches payload.x ~ /(?:ab|b)*c/ } }"#;
    let request = request_bytes(&serde_json::json!({ "x": "ababc" }));
    for (work, verdict) in [
        (Limits::DEFAULT.max_regex_work, Verdict::Allow),
        (50, Verdict::Deny),
    ] {
        let limits = Limits {
            max_regex_work: work,
            ..Limits::DEFAULT
        };
        let mut loader = PolicyLoader::new(limits);
        loader.add_text("p.cap", policy.to_owned(), PolicyFormat::Cap, None);
        let engine = Engine::builder(loader.finish().unwrap())
            .limits(limits)
            .unwrap()
            .build();
        let decision = engine.check_slice(&request);
        assert_eq!(decision.verdict, verdict, "{decision:#?}");
        if verdict == Verdict::Deny {
            assert!(
                decision.reasons[0]
                    .message
                    .contains("limit of 50 byte-states")
            );
        }
    }
    let mut loader = PolicyLoader::new(Limits {
        max_regex_total_bytes: 1_000,
        ..Limits::DEFAULT
    });
    loader.add_text("p.cap", policy.to_owned(), PolicyFormat::Cap, None);
    let error = loader.finish().unwrap_err().to_string();
    assert!(error.contains("more than 1000 bytes"), "{error}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Over generated policies, texts and budgets, a request is refused for its regex work
    /// exactly when its matches, charged in order, need more than the budget — the same from
    /// bytes and pre-parsed.
    #[test]
    fn a_request_is_refused_exactly_when_its_matches_need_more_than_the_budget(
        checks in proptest::collection::vec(
            (
                proptest::sample::select(vec!["(?:ab|b)*a?", "[ab]*", "(?:a|bb?)*", "[ab]{0,9}(?:ab)*b?"]),
                0usize..3_000,
            ),
            1..5,
        ),
        budget in 0u64..200_000,
    ) {
        let constraints: Vec<String> = checks
            .iter()
            .enumerate()
            .map(|(i, (pattern, _))| format!("fieldMatches payload.t{i} ~ /{pattern}/"))
            .collect();
        let limits = Limits { max_regex_work: budget, ..Limits::DEFAULT };
        let text = format!(
            "skill \"s\" {{ version \"1\" capability \"c\" {{ resource tool \"t\" operations call \
             justification \"j\" {} }} }}",
            constraints.join(" ")
        );
        let mut loader = PolicyLoader::new(limits);
        loader.add_text("p.cap", text, PolicyFormat::Cap, None);
        let engine = Engine::builder(loader.finish().unwrap())
            .limits(limits)
            .unwrap()
            .build();
        let mut payload = serde_json::Map::new();
        let mut needed: u64 = 0;
        let mut refused = false;
        for (i, (pattern, len)) in checks.iter().enumerate() {
            let value = "ab".repeat(*len / 2);
            let anchored = capgate::bytecode::matcher::Matcher::anchored(pattern).unwrap();
            let matcher =
                capgate::bytecode::matcher::Matcher::build(&anchored, false, 1 << 20).unwrap();
            proptest::prop_assert!(matcher.is_match(&value), "{pattern} on {value}");
            needed += matcher.work(&value);
            refused |= needed > budget;
            payload.insert(format!("t{i}"), serde_json::Value::String(value));
        }
        let bytes = request_bytes(&serde_json::Value::Object(payload));
        let from_bytes = engine.check_slice(&bytes);
        let pre_parsed = engine.check_value(serde_json::from_slice(&bytes).unwrap());
        proptest::prop_assert_eq!(&from_bytes, &pre_parsed);
        if refused {
            proptest::prop_assert_eq!(from_bytes.verdict, Verdict::Deny);
            proptest::prop_assert_eq!(from_bytes.reasons[0].constraint, ReasonKind::Input);
            proptest::prop_assert!(from_bytes.reasons[0].message.contains("max_regex_work"));
        } else {
            proptest::prop_assert_eq!(from_bytes.verdict, Verdict::Allow, "{:?}", from_bytes);
        }
    }
}

/// Compiling regexes was bounded per regex only: a 41 KB policy of 1,000 distinct `\w{38}zN`
/// regexes took 20 s to load (each compiled to the 1 MiB limit of one regex and failed). `\w`
/// is ASCII, so that policy loads; its Unicode twin (`\pL{38}zN`, ~1.8 MB compiled each) is
/// refused once the regexes together pass `Limits::max_regex_total_bytes`, and every regex
/// after that fails at once instead of compiling.
#[test]
fn a_policy_of_a_thousand_distinct_regexes_loads_or_is_refused_within_the_total() {
    let policy = |class: &str| {
        let mut text = String::from(
            "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource tool \"t\"\n    \
             operations call\n    justification \"many regexes\"\n",
        );
        for n in 0..1_000 {
            text.push_str(&format!(
                "    fieldMatches payload.a ~ /{class}{{38}}z{n}/\n"
            ));
        }
        text.push_str("  }\n}\n");
        text
    };
    let ascii = policy(r"\w");
    assert!(ascii.len() < 43_000, "{}", ascii.len());
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("ascii.cap", ascii, PolicyFormat::Cap, None);
    let loaded = loader.finish().unwrap();
    let engine = Engine::builder(loaded).build();
    let hit = request_bytes(&serde_json::json!({ "a": format!("{}z7", "x".repeat(38)) }));
    assert_eq!(engine.check_slice(&hit).verdict, Verdict::Deny);

    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("unicode.cap", policy(r"\pL"), PolicyFormat::Cap, None);
    let error = loader.finish().unwrap_err().to_string();
    assert!(error.contains("max_regex_total_bytes"), "{error}");
    assert!(
        error.contains("z999"),
        "every regex past the total is reported"
    );
}

// ------------------------------------------------------------------------------------------------
// The CLI: malformed requests, sessions and policies
// ------------------------------------------------------------------------------------------------

use common::write;

fn temp_dir() -> PathBuf {
    common::temp_dir("bad-input")
}

use common::{run_with_stdin as capgate, stderr, stdout};

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

/// A request that starts with U+FEFF (which some editors write unseen) is refused with a reason
/// that names the byte-order mark, by the library and by `capgate check`, not "must be a JSON
/// object".
#[test]
fn a_bom_prefixed_request_names_the_byte_order_mark() {
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend_from_slice(with_payload("1").as_bytes());
    let decision = decide_bytes(&bytes);
    assert_input_deny(&decision);
    assert!(
        decision.reasons[0]
            .message
            .contains("byte-order mark (U+FEFF)"),
        "{decision:#?}"
    );
    let value = capgate::parse_strict_json(&String::from_utf8(bytes.clone()).unwrap());
    assert!(value.unwrap_err().contains("byte-order mark"));

    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let request = write(&dir, "bom.json", &bytes);
    let args = [
        "check",
        "-p",
        policy.to_str().unwrap(),
        "-r",
        request.to_str().unwrap(),
    ];
    let output = capgate(&args, b"");
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("byte-order mark"),
        "{}",
        stderr(&output)
    );
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

// ------------------------------------------------------------------------------------------------
// Case-variant member names: an upstream that binds JSON members case-insensitively (Go's
// `encoding/json` compares names with simple case folding) reads `Amount` as `amount`.

/// Reads names with `s` and `k` in them (which LONG S and the KELVIN SIGN fold into), at every
/// depth up to four, in the payload, the agent and the context; schemas that read names.
const CASE_POLICY: &str = r#"
skill "s" {
  version "1"
  capability "pay" {
    resource tool "pay"
    operations call
    lifetime process
    justification "case-variant tests"
    optional fieldRange payload.amount <= 100
    not { fieldEquals payload.role == "admin" }
    optional fieldEquals payload.order.lines[*].sku in ["a", "b"]
    optional fieldEquals agent.skills.kind == "basic"
    optional fieldEquals context.desk.stack.task == "ok"
  }
  capability "schema" {
    resource tool "schema"
    operations call
    lifetime process
    justification "case-variant tests"
    payloadSchema {
      "type": "object",
      "required": ["amount"],
      "properties": {
        "amount": { "type": "number", "maximum": 100 },
        "card": { "type": "string" }
      },
      "dependentRequired": { "card": ["cvv"] }
    }
  }
  capability "open" {
    resource tool "open"
    operations call
    lifetime process
    justification "case-variant tests"
    payloadSchema {
      "type": "object",
      "properties": { "amount": { "type": "number", "maximum": 100 } },
      "additionalProperties": true
    }
  }
}"#;

fn case_engine(limits: Limits) -> Engine {
    let mut loader = PolicyLoader::new(limits);
    loader.add_text("case.cap", CASE_POLICY.to_owned(), PolicyFormat::Cap, None);
    Engine::builder(loader.finish().unwrap())
        .limits(limits)
        .unwrap()
        .clock(Arc::new(SimulatedClock::new(
            capgate::parse_timestamp("2026-12-01T10:00:00Z").unwrap(),
        )))
        .build()
}

/// A request for `tool:{tool}` whose `field` is the JSON text `value`.
fn case_request(tool: &str, field: &str, value: &str) -> String {
    format!(r#"{{"skill":"s","operation":"call","resource":"tool:{tool}","{field}":{value}}}"#)
}

/// A decision's verdict, capability, and reasons as (capability, constraint).
type Outcome = (Verdict, Option<String>, Vec<(Option<String>, ReasonKind)>);

/// What two decisions say, their messages aside (a strict parse from bytes names the column of a
/// malformed member, one from a parsed value cannot).
fn outcome(decision: &Decision) -> Outcome {
    (
        decision.verdict,
        decision.capability.as_deref().map(str::to_owned),
        decision
            .reasons
            .iter()
            .map(|r| (r.capability.as_deref().map(str::to_owned), r.constraint))
            .collect(),
    )
}

/// `text` decided from its bytes (the tape), from a parsed value (the strict parser) and from
/// documents parsed both ways for `check_doc`: one decision, returned.
#[track_caller]
fn decide_everywhere(engine: &Engine, text: &str) -> Decision {
    let bytes = text.as_bytes();
    let slice = engine.check_slice(bytes);
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        outcome(&engine.check_value(value)),
        outcome(&slice),
        "check_value: {text}"
    );
    let mut tape = Tape::new();
    for repeats in [Repeats::Exact, Repeats::CaseFolded] {
        if let Ok(doc) = tape.parse_with(bytes, 136, repeats) {
            assert_eq!(
                engine.check_doc(&doc),
                slice,
                "check_doc ({repeats:?}): {text}"
            );
        }
    }
    slice
}

/// An input refusal of the whole request that says a name differs only by case.
#[track_caller]
fn assert_case_refusal(decision: &Decision) {
    assert_input_deny(decision);
    assert!(
        decision.reasons[0].message.contains("only by case"),
        "{decision:#?}"
    );
}

#[test]
fn case_variant_duplicate_members_are_refused() {
    let engine = case_engine(Limits::DEFAULT);
    let many: Vec<String> = (0..40).map(|i| format!(r#""m{i}":{i}"#)).collect();
    let large = format!(r#"{{{},"amount":50,"AMOUNT":7}}"#, many.join(","));
    for (field, value) in [
        ("payload", r#"{"amount":50,"Amount":1000000}"#),
        ("payload", r#"{"Amount":1000000,"amount":50}"#),
        ("payload", r#"{"order":{"lines":[{"sku":"a","SKU":"z"}]}}"#),
        ("payload", "{\"kind\":1,\"\u{212A}ind\":2}"),
        ("payload", r#"{"kind":1,"\u212Aind":2}"#),
        ("payload", "{\"sum\":1,\"\u{17F}um\":2}"),
        ("payload", r#"{"extra":[[{"deep":{"x":1,"X":2}}]]}"#),
        ("payload", &large),
        ("agent", r#"{"id":"a","ID":"b"}"#),
        ("context", r#"{"desk":{"Stack":1,"stack":{"task":"ok"}}}"#),
    ] {
        let text = case_request("pay", field, value);
        assert_case_refusal(&decide_everywhere(&engine, &text));
        // Refused by the tape's parse itself; the strict parser says why.
        assert_eq!(
            engine.check_slice_tape_only(text.as_bytes()),
            None,
            "{text}"
        );
    }
    // The same names in different objects are no repeat.
    let text = case_request(
        "pay",
        "payload",
        r#"{"amount":5,"order":{"Amount":1,"lines":[]}}"#,
    );
    assert_eq!(decide_everywhere(&engine, &text).verdict, Verdict::Allow);
}

#[test]
fn a_lone_case_variant_of_an_optional_field_is_refused() {
    let engine = case_engine(Limits::DEFAULT);
    for (field, value) in [
        ("payload", r#"{"Amount":1000000}"#),
        ("payload", r#"{"AMOUNT":5}"#),
        ("payload", r#"{"Order":{"lines":[{"sku":"a"}]}}"#),
        (
            "payload",
            r#"{"order":{"lines":[{"sku":"a"},{"SKU":"z"}]}}"#,
        ),
        ("payload", "{\"order\":{\"lines\":[{\"\u{17F}ku\":\"z\"}]}}"),
        ("agent", "{\"skills\":{\"\u{212A}ind\":\"admin\"}}"),
        ("agent", r#"{"skills":{"\u212aind":"admin"}}"#),
        ("context", r#"{"desk":{"stack":{"TASK":"rm -rf"}}}"#),
    ] {
        let text = case_request("pay", field, value);
        let decision = decide_everywhere(&engine, &text);
        assert_case_refusal(&decision);
        assert_eq!(decision.reasons[0].capability.as_deref(), Some("pay"));
        // Refused while deciding, from the tape as from the parsed request.
        assert_eq!(
            engine.check_slice_tape_only(text.as_bytes()),
            Some(decision)
        );
    }
    // The names themselves, or none at all, are decided as ever.
    for (value, verdict) in [
        (r#"{"amount":100}"#, Verdict::Allow),
        (r#"{"amount":101}"#, Verdict::Deny),
        (r#"{"other":1}"#, Verdict::Allow),
        (r#"{"amounts":1000000,"mount":1}"#, Verdict::Allow),
    ] {
        let text = case_request("pay", "payload", value);
        assert_eq!(decide_everywhere(&engine, &text).verdict, verdict, "{text}");
    }
}

#[test]
fn a_case_variant_under_not_is_refused() {
    let engine = case_engine(Limits::DEFAULT);
    for value in [
        r#"{"ROLE":"admin"}"#,
        r#"{"Role":"user"}"#,
        r#"{"r\u004fle":"admin"}"#,
    ] {
        let text = case_request("pay", "payload", value);
        assert_case_refusal(&decide_everywhere(&engine, &text));
    }
    let admin = case_request("pay", "payload", r#"{"role":"admin"}"#);
    assert_eq!(decide_everywhere(&engine, &admin).verdict, Verdict::Deny);
    let user = case_request("pay", "payload", r#"{"role":"user"}"#);
    assert_eq!(decide_everywhere(&engine, &user).verdict, Verdict::Allow);
}

#[test]
fn case_variants_in_the_envelope_are_refused() {
    let engine = case_engine(Limits::DEFAULT);
    // A request field in another case is an unknown field; beside the field, a repeat.
    for text in [
        r#"{"Skill":"s","operation":"call","resource":"tool:pay"}"#,
        r#"{"skill":"s","SKILL":"s","operation":"call","resource":"tool:pay"}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:pay","Payload":{"amount":1000000}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:pay","payload":{},"PAYLOAD":{}}"#,
        r#"{"skill":"s","operation":"call","resource":"tool:pay","Agent":{}}"#,
        "{\"\u{17F}kill\":\"s\",\"operation\":\"call\",\"resource\":\"tool:pay\"}",
    ] {
        assert_input_deny(&decide_everywhere(&engine, text));
        assert_eq!(
            engine.check_slice_tape_only(text.as_bytes()),
            None,
            "{text}"
        );
    }
    // Inside the agent and the context, as in the payload.
    for (field, value) in [
        ("agent", r#"{"Skills":{"kind":"basic"}}"#),
        ("agent", r#"{"skills":{"kind":"basic","Kind":"admin"}}"#),
        ("context", r#"{"DESK":{"stack":{"task":"ok"}}}"#),
        ("context", r#"{"desk":{"stack":{"task":"ok"},"STACK":{}}}"#),
    ] {
        let text = case_request("pay", field, value);
        assert_case_refusal(&decide_everywhere(&engine, &text));
    }
}

#[test]
fn schema_required_reads_see_case_variants() {
    let engine = case_engine(Limits::DEFAULT);
    for (tool, value) in [
        // `required`: `amount` is missing, `AMOUNT` is there.
        ("schema", r#"{"AMOUNT":5}"#),
        // `dependentRequired`: the trigger and the dependent, each in another case.
        ("schema", r#"{"amount":5,"Card":"4111"}"#),
        ("schema", r#"{"amount":5,"card":"4111","CVV":"123"}"#),
        // `properties` under `additionalProperties`: `Amount` is no property here, but it is
        // `amount` to the upstream.
        ("open", r#"{"Amount":1000000}"#),
        ("open", "{\"nested\":1,\"\u{212A}\":2,\"AMOUNT\":3}"),
    ] {
        let text = case_request(tool, "payload", value);
        let decision = decide_everywhere(&engine, &text);
        assert_case_refusal(&decision);
        assert_eq!(decision.reasons[0].capability.as_deref(), Some(tool));
    }
    for (tool, value, verdict) in [
        ("schema", r#"{"amount":5}"#, Verdict::Allow),
        ("schema", r#"{"amount":500}"#, Verdict::Deny),
        (
            "schema",
            r#"{"amount":5,"card":"4111","cvv":"123"}"#,
            Verdict::Allow,
        ),
        ("schema", r#"{"amount":5,"card":"4111"}"#, Verdict::Deny),
        ("open", r#"{"amount":5,"other":1000000}"#, Verdict::Allow),
    ] {
        let text = case_request(tool, "payload", value);
        assert_eq!(decide_everywhere(&engine, &text).verdict, verdict, "{text}");
    }
}

#[test]
fn each_limits_switch_relaxes_its_rule() {
    let pair = case_request("pay", "payload", r#"{"amount":50,"Amount":1000000}"#);
    let lone = case_request("pay", "payload", r#"{"Amount":1000000}"#);
    let limits = |members, reads| Limits {
        refuse_case_variant_members: members,
        refuse_case_variant_reads: reads,
        ..Limits::DEFAULT
    };
    // Both on (the default): both refused.
    let engine = case_engine(Limits::DEFAULT);
    assert_case_refusal(&decide_everywhere(&engine, &pair));
    assert_case_refusal(&decide_everywhere(&engine, &lone));
    // Repeats allowed, reads still checked: `amount` is found (50) and `Amount` is not read.
    let engine = case_engine(limits(false, true));
    assert_eq!(engine.repeats(), Repeats::Exact);
    assert_eq!(decide_everywhere(&engine, &pair).verdict, Verdict::Allow);
    assert_case_refusal(&decide_everywhere(&engine, &lone));
    // Reads unchecked, repeats still refused: the lone variant reads as an absent `amount`.
    let engine = case_engine(limits(true, false));
    assert_eq!(engine.repeats(), Repeats::CaseFolded);
    assert_case_refusal(&decide_everywhere(&engine, &pair));
    assert_eq!(decide_everywhere(&engine, &lone).verdict, Verdict::Allow);
    // Both off: what capgate read before the rule.
    let engine = case_engine(limits(false, false));
    assert_eq!(decide_everywhere(&engine, &pair).verdict, Verdict::Allow);
    assert_eq!(decide_everywhere(&engine, &lone).verdict, Verdict::Allow);
    let open = case_request("open", "payload", r#"{"Amount":1000000}"#);
    assert_eq!(decide_everywhere(&engine, &open).verdict, Verdict::Allow);
}

#[test]
fn a_case_variant_of_a_rate_limit_key_is_refused() {
    // A `by` path is read like any other: a missing key fails the limit (`rateLimit`), a
    // missing key whose object has it in another case refuses the request.
    let policy = r#"
skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    lifetime process
    justification "rate-limit key tests"
    rateLimit 5 per minute by payload.user
  }
}"#;
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("rate.cap", policy.to_owned(), PolicyFormat::Cap, None);
    let engine = Engine::builder(loader.finish().unwrap())
        .clock(Arc::new(SimulatedClock::new(
            capgate::parse_timestamp("2026-12-01T10:00:00Z").unwrap(),
        )))
        .state(Arc::new(InMemoryStore::new()))
        .build();
    let call = |payload: &str| engine.check_slice(case_request("t", "payload", payload).as_bytes());
    assert_eq!(call(r#"{"user":"ann"}"#).verdict, Verdict::Allow);
    let absent = call(r#"{"other":"ann"}"#);
    assert_eq!(
        absent.reasons[0].constraint,
        ReasonKind::RateLimit,
        "{absent:#?}"
    );
    for payload in [
        r#"{"USER":"ann"}"#,
        r#"{"U\u0073er":"ann"}"#,
        "{\"u\u{17F}er\":\"ann\"}",
    ] {
        let decision = call(payload);
        assert_case_refusal(&decision);
        assert_eq!(decision.reasons[0].path.as_deref(), Some("payload.user"));
        let value: serde_json::Value =
            serde_json::from_str(&case_request("t", "payload", payload)).unwrap();
        assert_eq!(outcome(&engine.check_value(value)), outcome(&decision));
    }
}

#[test]
fn a_case_variant_of_a_rate_limit_key_refuses_the_request_not_only_its_capability() {
    // A later capability for the same call, without the limit, would allow it: an absent `by`
    // value fails only the limited capability, so the next one decides; a case variant of the
    // `by` name refuses the request outright, as for any path a capability reads.
    let policy = r#"
skill "s" {
  version "1"
  capability "limited" {
    resource tool "t"
    operations call
    lifetime process
    justification "rate-limit key tests"
    rateLimit 5 per minute by payload.user
  }
  capability "open" {
    resource tool "t"
    operations call
    lifetime process
    justification "rate-limit key tests"
  }
}"#;
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("rate.cap", policy.to_owned(), PolicyFormat::Cap, None);
    let engine = Engine::builder(loader.finish().unwrap())
        .clock(Arc::new(SimulatedClock::new(
            capgate::parse_timestamp("2026-12-01T10:00:00Z").unwrap(),
        )))
        .state(Arc::new(InMemoryStore::new()))
        .build();
    let call = |payload: &str| engine.check_slice(case_request("t", "payload", payload).as_bytes());
    let limited = call(r#"{"user":"ann"}"#);
    assert_eq!(limited.verdict, Verdict::Allow);
    assert_eq!(limited.capability.as_deref(), Some("limited"));
    let absent = call(r#"{"other":"ann"}"#);
    assert_eq!(absent.verdict, Verdict::Allow, "{absent:#?}");
    assert_eq!(absent.capability.as_deref(), Some("open"));
    for payload in [r#"{"USER":"ann"}"#, "{\"u\u{17F}er\":\"ann\"}"] {
        let decision = call(payload);
        assert_case_refusal(&decision);
        assert_eq!(decision.reasons.len(), 1, "{decision:#?}");
        assert_eq!(decision.reasons[0].capability.as_deref(), Some("limited"));
        let value: serde_json::Value =
            serde_json::from_str(&case_request("t", "payload", payload)).unwrap();
        assert_eq!(outcome(&engine.check_value(value)), outcome(&decision));
    }
}

// The property: variants generated at random (case flips, the KELVIN SIGN and LONG S, raw or
// escaped), anywhere, are refused by both paths; other names change nothing.

/// A JSON document whose objects keep their members in order, written with chosen escapes.
#[derive(Debug, Clone)]
enum Json {
    Text(&'static str),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn object(members: &[(&str, Json)]) -> Json {
        Json::Object(
            members
                .iter()
                .map(|(name, value)| ((*name).to_owned(), value.clone()))
                .collect(),
        )
    }

    /// Writes the document; names' characters outside ASCII, and when `escape` their letters
    /// too, as `\u` escapes.
    fn write(&self, escape: bool, out: &mut String) {
        match self {
            Json::Text(text) => out.push_str(text),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(escape, out);
                }
                out.push(']');
            }
            Json::Object(members) => {
                out.push('{');
                for (i, (name, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push('"');
                    for c in name.chars() {
                        if escape && (!c.is_ascii() || c.is_ascii_alphabetic()) {
                            out.push_str(&format!("\\u{:04x}", u32::from(c)));
                        } else {
                            out.push(c);
                        }
                    }
                    out.push_str("\":");
                    value.write(escape, out);
                }
                out.push('}');
            }
        }
    }

    /// Every object of the document, by the path of member and element positions to it.
    fn objects(&self, at: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        match self {
            Json::Text(_) => {}
            Json::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    at.push(i);
                    item.objects(at, out);
                    at.pop();
                }
            }
            Json::Object(members) => {
                out.push(at.clone());
                for (i, (_, value)) in members.iter().enumerate() {
                    at.push(i);
                    value.objects(at, out);
                    at.pop();
                }
            }
        }
    }

    fn at_mut(&mut self, path: &[usize]) -> &mut Json {
        match (self, path.split_first()) {
            (json, None) => json,
            (Json::Array(items), Some((i, rest))) => items[*i].at_mut(rest),
            (Json::Object(members), Some((i, rest))) => members[*i].1.at_mut(rest),
            (Json::Text(_), Some(_)) => unreachable!("paths lead to containers"),
        }
    }
}

/// An allowed request for `pay` with every name the policy reads present, and `filler` (a
/// document nested `depth` deep) under a name the policy does not read, in each part.
fn allowed_parts(depth: usize) -> [(&'static str, Json); 3] {
    let mut filler = Json::Text("1");
    for level in 0..depth {
        filler = if level % 2 == 0 {
            Json::object(&[("note", Json::Text("2")), ("stack", filler)])
        } else {
            Json::Array(vec![Json::Text("3"), filler])
        };
    }
    let sku = |value| Json::object(&[("sku", Json::Text(value))]);
    [
        (
            "payload",
            Json::object(&[
                ("amount", Json::Text("50")),
                ("role", Json::Text(r#""user""#)),
                (
                    "order",
                    Json::object(&[("lines", Json::Array(vec![sku(r#""a""#), sku(r#""b""#)]))]),
                ),
                ("misc", filler.clone()),
            ]),
        ),
        (
            "agent",
            Json::object(&[
                ("id", Json::Text(r#""agent-7""#)),
                (
                    "skills",
                    Json::object(&[("kind", Json::Text(r#""basic""#))]),
                ),
                ("misc", filler.clone()),
            ]),
        ),
        (
            "context",
            Json::object(&[
                (
                    "desk",
                    Json::object(&[("stack", Json::object(&[("task", Json::Text(r#""ok""#))]))]),
                ),
                ("misc", filler),
            ]),
        ),
    ]
}

/// The request text of `parts`.
fn write_request(parts: &[(&str, Json)], escape: bool) -> String {
    let mut text = String::from(r#"{"skill":"s","operation":"call","resource":"tool:pay""#);
    for (field, value) in parts {
        text.push_str(&format!(r#","{field}":"#));
        value.write(escape, &mut text);
    }
    text.push('}');
    text
}

/// A spelling of `name` equal to it under simple case folding and different from it: at least
/// one letter's case flipped, `k` and `s` sometimes as the KELVIN SIGN and LONG S. `bits`
/// chooses.
fn variant_of(name: &str, bits: u64) -> String {
    let letters = name.chars().filter(char::is_ascii_alphabetic).count();
    let must = (bits % letters as u64) as usize;
    let mut seen = 0;
    name.chars()
        .map(|c| {
            if !c.is_ascii_alphabetic() {
                return c;
            }
            let bit = bits >> (8 + 2 * seen) & 3;
            seen += 1;
            if seen - 1 != must && bit == 0 {
                return c;
            }
            match c {
                'k' | 'K' if bit == 3 => '\u{212A}',
                's' | 'S' if bit == 3 => '\u{17F}',
                _ if c.is_ascii_lowercase() => c.to_ascii_uppercase(),
                _ => c.to_ascii_lowercase(),
            }
        })
        .collect()
}

fn case_cases() -> u32 {
    std::env::var("CAPGATE_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(case_cases()))]

    /// A case variant beside a name anywhere (any object of the payload, agent or context, at
    /// any depth) is refused by both paths, and so is one in place of a name the policy reads;
    /// a name that differs otherwise (one more character) changes nothing.
    #[test]
    fn generated_case_variants_are_refused_on_both_paths(
        depth in 0usize..8,
        part in 0usize..3,
        pick in proptest::prelude::any::<usize>(),
        bits in proptest::prelude::any::<u64>(),
        escape in proptest::prelude::any::<bool>(),
    ) {
        let engine = case_engine(Limits::DEFAULT);
        let allowed = write_request(&allowed_parts(depth), escape);
        proptest::prop_assert_eq!(decide_everywhere(&engine, &allowed).verdict, Verdict::Allow);

        // (a) Beside a member of some object: a repeat up to case.
        let mut parts = allowed_parts(depth);
        let mut objects = Vec::new();
        parts[part].1.objects(&mut Vec::new(), &mut objects);
        let target = &objects[pick % objects.len()];
        let Json::Object(members) = parts[part].1.at_mut(target) else { unreachable!() };
        let (name, _) = members[bits as usize % members.len()].clone();
        let variant = variant_of(&name, bits);
        members.push((variant.clone(), Json::Text("0")));
        let text = write_request(&parts, escape);
        assert_case_refusal(&decide_everywhere(&engine, &text));
        proptest::prop_assert_eq!(engine.check_slice_tape_only(text.as_bytes()), None);

        // The same with one more character: a name of its own, read by no one.
        let Json::Object(members) = parts[part].1.at_mut(target) else { unreachable!() };
        members.last_mut().unwrap().0 = format!("{variant}x");
        let text = write_request(&parts, escape);
        proptest::prop_assert_eq!(decide_everywhere(&engine, &text).verdict, Verdict::Allow);

        // (b) In place of a name the policy reads, at any step of its path.
        let read: [(usize, &[usize]); 8] = [
            (0, &[0]),          // payload.amount
            (0, &[1]),          // payload.role
            (0, &[2]),          // payload.order
            (0, &[2, 0]),       // payload.order.lines
            (0, &[2, 0, 1, 0]), // payload.order.lines[1].sku
            (1, &[1, 0]),       // agent.skills.kind
            (2, &[0, 0]),       // context.desk.stack
            (2, &[0, 0, 0]),    // context.desk.stack.task
        ];
        let (part, steps) = read[pick % read.len()];
        let mut parts = allowed_parts(depth);
        let (owner, last) = steps.split_at(steps.len() - 1);
        let Json::Object(members) = parts[part].1.at_mut(owner) else { unreachable!() };
        let member = &mut members[last[0]].0;
        *member = variant_of(member, bits);
        let text = write_request(&parts, escape);
        let decision = decide_everywhere(&engine, &text);
        assert_case_refusal(&decision);
        proptest::prop_assert_eq!(engine.check_slice_tape_only(text.as_bytes()), Some(decision));
    }
}

// ------------------------------------------------------------------------------------------------
// Every input read within its limit

/// The address space a capped run of the binary gets (`ulimit -v`, in KiB): room for the
/// program and its limits, far less than the inputs below, which read whole would abort it.
#[cfg(unix)]
const CAPPED_KIB: u32 = 128 * 1024;

/// `capgate ARGS` under `ulimit -v CAPPED_KIB`, standard input from `stdin`; killed (and the test
/// failed) if it has not finished within a minute, so a reader that blocks or never stops
/// cannot hang the suite.
#[cfg(unix)]
fn capgate_capped(args: &[&str], stdin: Stdio) -> Output {
    let script = format!("ulimit -v {CAPPED_KIB} && exec \"$0\" \"$@\"");
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_capgate"))
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish_within_a_minute(child)
}

#[cfg(unix)]
fn finish_within_a_minute(mut child: std::process::Child) -> Output {
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("capgate did not finish within a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Makes a FIFO at `dir/name`.
#[cfg(unix)]
fn fifo(dir: &std::path::Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let made = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
    path
}

/// Writes zeros into the FIFO at `path` until its reader goes away.
#[cfg(unix)]
fn endless_writer(path: PathBuf) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        use std::io::Write;
        let Ok(mut fifo) = std::fs::OpenOptions::new().write(true).open(&path) else {
            return;
        };
        let zeros = vec![0u8; 1 << 16];
        while fifo.write_all(&zeros).is_ok() {}
    })
}

/// A file of `bytes` bytes that takes no disk space: reading it whole would take minutes and
/// more memory than a capped run has.
fn sparse(dir: &std::path::Path, name: &str, bytes: u64) -> PathBuf {
    let path = dir.join(name);
    std::fs::File::create(&path)
        .unwrap()
        .set_len(bytes)
        .unwrap();
    path
}

/// Standard error with the diagnostic renderer's line wrapping undone: lines joined by one
/// space (none after a line that the wrap broke after a hyphen), each without its indentation
/// and `│` gutter.
fn unwrapped_stderr(output: &Output) -> String {
    let text = stderr(output);
    let mut joined = String::new();
    for line in text
        .lines()
        .map(|line| line.trim_start().trim_start_matches('│').trim())
    {
        // The wrap breaks after a hyphen (`4194304-` / `byte limit`) or at a space.
        if !joined.is_empty() && !joined.ends_with('-') {
            joined.push(' ');
        }
        joined.push_str(line);
    }
    joined
}

#[track_caller]
fn assert_refused_over(output: &Output, limit: &str) {
    assert_no_panic(output);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(output));
    assert!(
        unwrapped_stderr(output).contains(limit),
        "{}",
        stderr(output)
    );
}

/// Found by a hostile tester: `check -r FILE`, `-r -` and standard input read everything before
/// the size limit, so `/dev/zero` exhausted memory. They read one byte past the limit at most.
#[cfg(unix)]
#[test]
fn check_stops_reading_a_request_at_the_limit() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let policy = policy.to_str().unwrap();
    let over = "is larger than the 1048576-byte limit (`Limits::max_request_bytes`)";
    let zero = || Stdio::from(std::fs::File::open("/dev/zero").unwrap());
    let output = capgate_capped(&["check", "-p", policy, "-r", "/dev/zero"], Stdio::null());
    assert_refused_over(&output, over);
    let output = capgate_capped(&["check", "-p", policy, "-r", "-"], zero());
    assert_refused_over(&output, over);
    let output = capgate_capped(&["check", "-p", policy], zero());
    assert_refused_over(&output, over);
    let pipe = fifo(&dir, "request.json");
    let writer = endless_writer(pipe.clone());
    let output = capgate_capped(
        &["check", "-p", policy, "-r", pipe.to_str().unwrap()],
        Stdio::null(),
    );
    assert_refused_over(&output, over);
    writer.join().unwrap();
    // The refusal is audited like any other input refusal.
    let audit = dir.join("audit.jsonl");
    let output = capgate_capped(
        &["check", "-p", policy, "--audit", audit.to_str().unwrap()],
        zero(),
    );
    assert_refused_over(&output, over);
    let record = std::fs::read_to_string(&audit).unwrap();
    assert!(record.contains(r#""constraint":"input""#), "{record}");
    assert!(record.contains(over), "{record}");
}

/// A policy, a schema file, a `.capc` and a `.json` found in a directory over
/// `max_policy_file_bytes` are refused from their size, before they are read (each file here is
/// a terabyte, sparse); a policy on a FIFO is read one byte past the limit and no further.
#[cfg(unix)]
#[test]
fn a_policy_file_over_the_limit_is_refused_without_reading_it_all() {
    let dir = temp_dir();
    let over = "is larger than the 4194304-byte limit (`Limits::max_policy_file_bytes`)";
    let request = with_payload(r#"{"n":1}"#);
    for name in ["big.cap", "big.json", "big.capc"] {
        let path = sparse(&dir, name, 1 << 40);
        let output = capgate_capped(&["check", "-p", path.to_str().unwrap()], Stdio::null());
        assert_refused_over(&output, over);
        assert!(stderr(&output).contains(name), "{}", stderr(&output));
    }
    // A `.json` file in a directory is looked into to see whether it is a manifest: an
    // oversized one is loaded, so the limit is what is reported.
    let walked = dir.join("walked");
    std::fs::create_dir_all(&walked).unwrap();
    write(&walked, "p.cap", POLICY);
    sparse(&walked, "data.json", 1 << 40);
    let output = capgate_capped(&["check", "-p", walked.to_str().unwrap()], Stdio::null());
    assert_refused_over(&output, over);
    // A schema file.
    let schema_dir = dir.join("schema");
    std::fs::create_dir_all(&schema_dir).unwrap();
    sparse(&schema_dir, "payload.json", 1 << 40);
    let with_schema = POLICY.replace(
        "justification \"bad input tests\"",
        "justification \"bad input tests\"\n    payloadSchema file \"payload.json\"",
    );
    let policy = write(&schema_dir, "p.cap", with_schema);
    let output = capgate_capped(&["check", "-p", policy.to_str().unwrap()], Stdio::null());
    assert_refused_over(&output, over);
    assert!(
        unwrapped_stderr(&output).contains("schema file `"),
        "{}",
        stderr(&output)
    );
    // A policy named explicitly on a FIFO that never ends.
    let pipe = fifo(&dir, "endless.cap");
    let writer = endless_writer(pipe.clone());
    let output = capgate_capped(&["check", "-p", pipe.to_str().unwrap()], Stdio::null());
    assert_refused_over(&output, over);
    writer.join().unwrap();
    // Within the limit, the same policy loads.
    let policy = write(&dir, "p.cap", POLICY);
    let output = capgate(
        &["check", "-p", policy.to_str().unwrap()],
        request.as_bytes(),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `-p DIR` (and `capgate test DIR`, `capgate fmt DIR`) opens only regular files: a FIFO, or a
/// symlink to one, among the policies is an error that names it, and is never opened (opening
/// it would block the run). A symlink to a regular file is followed.
#[cfg(unix)]
#[test]
fn policy_dir_refuses_what_is_not_a_regular_file_without_opening_it() {
    let dir = temp_dir();
    let policies = dir.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    write(&policies, "p.cap", POLICY);
    let elsewhere = write(
        &dir,
        "other.cap",
        POLICY.replace("skill \"s\"", "skill \"other\""),
    );
    std::os::unix::fs::symlink(&elsewhere, policies.join("linked.cap")).unwrap();
    let pipe = fifo(&policies, "pipe.cap");
    let _json = fifo(&policies, "pipe.json");
    std::os::unix::fs::symlink(&pipe, policies.join("to-pipe.cap")).unwrap();
    let request = br#"{"skill":"other","operation":"call","resource":"tool:t"}"#;
    let run = |args: &[&str]| {
        let mut child = common::capgate()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let _ = child.stdin.take().unwrap().write_all(request);
        }
        finish_within_a_minute(child)
    };
    let output = run(&["check", "-p", policies.to_str().unwrap()]);
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    for name in ["pipe.cap", "pipe.json", "to-pipe.cap"] {
        let message = format!("{name}` is a FIFO, not a regular file");
        assert!(
            unwrapped_stderr(&output).contains(&message),
            "{}",
            stderr(&output)
        );
    }
    let output = run(&["fmt", "--check", policies.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("pipe.cap` is a FIFO, not a regular file"),
        "{}",
        stderr(&output)
    );
    // Without them the directory loads, the linked policy with it.
    for name in ["pipe.cap", "pipe.json", "to-pipe.cap"] {
        std::fs::remove_file(policies.join(name)).unwrap();
    }
    let output = run(&["check", "-p", policies.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // A test file that is a FIFO is an error of `capgate test`, not a hang.
    write(
        &policies,
        "p.captest",
        "[case one]\nskill = \"s\"\noperation = \"call\"\nresource = \"tool:t\"\nexpect allow\n",
    );
    fifo(&policies, "pipe.captest");
    let output = run(&["test", policies.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("pipe.captest` is a FIFO, not a regular file"),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
}

/// Found by a hostile tester: `replay` read a 56 MB session line whole into a `Value` before the
/// size check, and the allocation failure aborted the process. A line over
/// `Limits::max_session_line_bytes` is an error for that line, dropped as it is read (here
/// 200 MB on a pipe, under a 128 MiB address-space cap), and the next line still runs.
#[cfg(unix)]
#[test]
fn an_oversized_session_line_is_an_error_for_that_line() {
    let dir = temp_dir();
    let policy = write(&dir, "p.cap", POLICY);
    let script = format!("ulimit -v {CAPPED_KIB} && exec \"$0\" \"$@\"");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_capgate"))
        .args(["replay", "-p", policy.to_str().unwrap(), "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        // Errors are ignored: a reader that died is what the assertions below report.
        let head = br#"{"call":{"skill":"s","operation":"call","resource":"tool:t","payload":""#;
        let _ = input.write_all(head);
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..200 {
            let _ = input.write_all(&chunk);
        }
        let _ = input.write_all(b"\"}}\n");
        let next =
            br#"{"call":{"skill":"s","operation":"call","resource":"tool:t"},"expect":"allow"}"#;
        let _ = input.write_all(next);
        let _ = input.write_all(b"\n");
    });
    let output = finish_within_a_minute(child);
    writer.join().unwrap();
    assert_no_panic(&output);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let lines: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", stdout(&output));
    assert_eq!(lines[0]["line"], 1);
    assert_eq!(
        lines[0]["error"],
        "the line is larger than the 2097152-byte limit (`Limits::max_session_line_bytes`)"
    );
    assert_eq!(lines[1]["line"], 2);
    assert_eq!(lines[1]["decision"], "allow");
    assert!(
        stderr(&output).contains("1 session line(s) could not be run"),
        "{}",
        stderr(&output)
    );
}

/// The same limit holds for a line given to `Session::run_line` as text; a call over the request
/// limit on a line within the line limit is still decided (a deny with reason `input`).
#[test]
fn a_session_line_over_the_line_limit_is_an_error_line_from_text_too() {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("bad.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
    let session = capgate::Session::new(loader.finish().unwrap(), Default::default()).unwrap();
    let line = |note: usize| {
        format!(
            r#"{{"call":{{"skill":"s","operation":"call","resource":"tool:t","payload":"{}"}},"expect":"deny","expect_constraint":"input"}}"#,
            "a".repeat(note)
        )
    };
    let limit = Limits::DEFAULT.max_session_line_bytes();
    let within = line(limit - 200);
    assert!(within.len() <= limit);
    let result = session.run_line(&within, 1);
    assert!(
        !result.error && !result.failed_expectation,
        "{}",
        result.text
    );
    let over = line(limit);
    let result = session.run_line(&over, 2);
    assert!(result.error, "{}", result.text);
    assert_eq!(
        result.output["error"],
        "the line is larger than the 2097152-byte limit (`Limits::max_session_line_bytes`)"
    );
}

// ------------------------------------------------------------------------------------------------
// Control and bidirectional characters in output
// ------------------------------------------------------------------------------------------------

/// True for a character no output may hold raw (`capgate::value::is_hidden`) other than the
/// line breaks and tabs of text laid out in lines.
fn raw_hidden(text: &str) -> Vec<char> {
    text.chars()
        .filter(|c| capgate::value::is_hidden(*c) && !matches!(c, '\n' | '\t'))
        .collect()
}

/// A policy whose literals, regex and locator carry `text` (written as a JSON string, so control
/// characters arrive escaped and bidi controls raw).
fn policy_quoting(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap();
    format!(
        "skill \"s\" {{\n  version \"1\"\n  capability \"c\" {{\n    resource tool \"t\"\n    operations call\n    lifetime process\n    justification \"bidi\"\n    fieldEquals payload.a in [{quoted}, \"x\"]\n    fieldEquals payload[{quoted}] == {quoted}\n  }}\n}}\n"
    )
}

/// Every output a decision and a policy make: the decision's text and reasons, and the
/// disassembly.
fn outputs(text: &str) -> Vec<String> {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("b.cap", policy_quoting(text), PolicyFormat::Cap, None);
    let loaded = loader.finish().unwrap();
    let listing = capgate::bytecode::disasm::disassemble(
        loaded.skills[0].capabilities[0].program().program(),
    );
    let engine = Engine::builder(loaded)
        .state(Arc::new(InMemoryStore::new()))
        .build();
    let request = serde_json::json!({
        "skill": "s", "operation": "call", "resource": "tool:t",
        "payload": { "a": text, text: [text] }
    });
    let mut out = vec![listing];
    for decision in [
        engine.check_slice(request.to_string().as_bytes()),
        engine.check_value(request.clone()),
        engine
            .check_value(serde_json::json!({ "skill": text, "operation": text, "resource": text })),
        engine.check_value(
            serde_json::json!({ "skill": "s", "operation": "call", "resource": "tool:t", text: 1 }),
        ),
    ] {
        out.push(decision.to_text());
        out.extend(decision.reasons.iter().map(|r| r.message.clone()));
        out.extend(decision.reasons.iter().filter_map(|r| r.path.clone()));
    }
    out
}

#[test]
fn bidi_controls_are_escaped_in_every_output() {
    let text = "a\u{202e}b\u{2066}c\u{1b}[2J\u{200f}d\u{61c}";
    for output in outputs(text) {
        assert_eq!(raw_hidden(&output), [], "{output}");
    }
    // The command line: a policy error (message and source snippet), `disasm`, and a decision.
    let dir = temp_dir();
    let bad = write(
        &dir,
        "bad.cap",
        policy_quoting(text).replace(
            "fieldEquals payload.a",
            "fieldMatches payload.a ~ /(\u{202e}/\n    fieldEquals payload.a",
        ),
    );
    let output = capgate(&["check", "-p", bad.to_str().unwrap()], b"{}");
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("\\u{202e}"), "{}", stderr(&output));
    assert_eq!(raw_hidden(&stderr(&output)), [], "{}", stderr(&output));
    let output = capgate(
        &[
            "--error-format",
            "json",
            "check",
            "-p",
            bad.to_str().unwrap(),
        ],
        b"{}",
    );
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    let good = write(&dir, "good.cap", policy_quoting(text));
    let output = capgate(&["disasm", good.to_str().unwrap()], b"");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).contains("\\u{202e}"), "{}", stdout(&output));
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    let request = serde_json::json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "payload": { "a": text }
    });
    let output = capgate(
        &["check", "-p", good.to_str().unwrap()],
        request.to_string().as_bytes(),
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    // JSON lines write them as `\uXXXX` escapes: the same value, nothing raw on the terminal.
    let request = serde_json::json!({
        "skill": text, "operation": "call", "resource": "tool:t", "payload": { "a": text }
    });
    let output = capgate(
        &["check", "-p", good.to_str().unwrap(), "--format", "json"],
        request.to_string().as_bytes(),
    );
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    let decision: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(decision["skill"], text);
    let session = write(
        &dir,
        "s.jsonl",
        format!("{}\n", serde_json::json!({ "call": request })),
    );
    let output = capgate(
        &[
            "replay",
            "-p",
            good.to_str().unwrap(),
            session.to_str().unwrap(),
        ],
        b"",
    );
    assert!(
        stdout(&output).contains(r#""skill":"a\u202eb"#),
        "{}",
        stdout(&output)
    );
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    // A failing test's report quotes the case name and the request.
    let suite = dir.join("suite");
    std::fs::create_dir_all(&suite).unwrap();
    write(&suite, "good.cap", policy_quoting(text));
    write(
        &suite,
        "b.captest",
        format!(
            "[case {text}]\nskill = {}\noperation = \"call\"\nresource = \"tool:t\"\nexpect allow\n",
            serde_json::to_string(text).unwrap()
        ),
    );
    let output = capgate(&["test", suite.to_str().unwrap()], b"");
    assert!(
        stdout(&output).contains("[case a\\u{202e}b"),
        "{}",
        stdout(&output)
    );
    assert_eq!(raw_hidden(&stdout(&output)), [], "{}", stdout(&output));
    assert_eq!(raw_hidden(&stderr(&output)), [], "{}", stderr(&output));
}

/// Any mix of text and control or bidi characters.
fn hostile_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    proptest::collection::vec(
        prop_oneof![
            "[a-z]{0,3}",
            proptest::char::ranges(
                vec![
                    '\u{1}'..='\u{1f}',
                    '\u{7f}'..='\u{9f}',
                    '\u{2028}'..='\u{2029}',
                    '\u{202a}'..='\u{202e}',
                    '\u{2066}'..='\u{2069}',
                    '\u{200e}'..='\u{200f}',
                    '\u{61c}'..='\u{61c}',
                ]
                .into()
            )
            .prop_map(String::from),
        ],
        1..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    #[test]
    fn no_output_holds_a_raw_control_or_bidi_character(text in hostile_text()) {
        for output in outputs(&text) {
            proptest::prop_assert_eq!(raw_hidden(&output), Vec::<char>::new(), "{}", output);
        }
    }
}
