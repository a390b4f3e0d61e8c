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
// Regex work (issue 40 item 8)
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
/// 2.5 s. Each match is now charged its text's bytes times its regex's size, before it runs,
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
    assert_eq!(decision.decision, Verdict::Deny, "{decision:#?}");
    assert_eq!(decision.reasons[0].constraint, ReasonKind::FieldMatches);
    let fine = request_bytes(&serde_json::json!({ "text": "ba".repeat(1_000) }));
    assert_eq!(four.check_slice(&fine).decision, Verdict::Allow);

    // Under `[*]` each element's match is charged.
    let each = regex_engine(&[r"fieldMatches payload.parts[*] ~ /[a-z]*a[a-z]{20}/"]);
    let part = "b".repeat(250_000);
    let parts = request_bytes(&serde_json::json!({ "parts": [part, part, part, part] }));
    assert_regex_work_deny(&each.check_slice(&parts), "payload.parts[*]");
    let fine = request_bytes(&serde_json::json!({ "parts": ["a".repeat(25), "ba".repeat(20)] }));
    assert_eq!(each.check_slice(&fine).decision, Verdict::Allow);

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
        assert_eq!(decision.decision, Verdict::Deny, "{decision:#?}");
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
            .build();
        let decision = engine.check_slice(&request);
        assert_eq!(decision.decision, verdict, "{decision:#?}");
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
        let engine = Engine::builder(loader.finish().unwrap()).limits(limits).build();
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
            proptest::prop_assert_eq!(from_bytes.decision, Verdict::Deny);
            proptest::prop_assert_eq!(from_bytes.reasons[0].constraint, ReasonKind::Input);
            proptest::prop_assert!(from_bytes.reasons[0].message.contains("max_regex_work"));
        } else {
            proptest::prop_assert_eq!(from_bytes.decision, Verdict::Allow, "{:?}", from_bytes);
        }
    }
}

/// Compiling regexes was bounded per regex only: a 41 KB policy of 1,000 distinct `\w{38}zN`
/// regexes took 20 s to load (each compiled to the 1 MiB limit of one regex and failed). `\w`
/// is ASCII now, so that policy loads; its Unicode twin (`\pL{38}zN`, ~1.8 MB compiled each) is
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
    assert_eq!(engine.check_slice(&hit).decision, Verdict::Deny);

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
