//! Boundary cases at the engine level that the other suites do not pin one by one: Unicode
//! normalisation, odd keys in paths, arrays at the scan limit, code-point lengths.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::{Decision, Engine, Limits, PolicyFormat, PolicyLoader, Request, Verdict};
use serde_json::{Value, json};

fn engine(constraints: &str) -> Engine {
    let text = format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    justification "boundary tests"
    {constraints}
  }}
}}"#
    );
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("b.cap", text, PolicyFormat::Cap, None);
    match loader.finish() {
        Ok(policy) => Engine::builder(policy).build(),
        Err(e) => panic!("{e}"),
    }
}

fn decide(engine: &Engine, payload: Value) -> Decision {
    let mut request = Request::new("s", "call", "tool:t");
    request.payload = payload;
    engine.check(&request)
}

#[test]
fn nfc_and_nfd_spellings_are_different_strings() {
    // "é" precomposed (NFC, U+00E9) versus "e" + combining acute (NFD, U+0065 U+0301): capgate
    // compares strings byte for byte and does not normalise (docs/semantics.md).
    let engine = engine("fieldEquals payload.name == \"caf\\u00e9\"");
    assert_eq!(
        decide(&engine, json!({"name": "caf\u{e9}"})).decision,
        Verdict::Allow
    );
    let denied = decide(&engine, json!({"name": "cafe\u{301}"}));
    assert_eq!(denied.decision, Verdict::Deny);
    assert_eq!(denied.reasons[0].constraint.as_str(), "fieldEquals");
}

#[test]
fn odd_keys_are_reached_only_through_quoted_segments() {
    let engine = engine(
        r#"fieldEquals payload["a.b"] == 1
    fieldEquals payload[""] == 2
    fieldEquals payload["[*]"] == 3"#,
    );
    let payload = json!({"a.b": 1, "": 2, "[*]": 3, "a": {"b": 9}});
    assert_eq!(decide(&engine, payload).decision, Verdict::Allow);
    // `payload.a.b` is a different path from `payload["a.b"]`.
    let denied = decide(&engine, json!({"a": {"b": 1}, "": 2, "[*]": 3}));
    assert_eq!(denied.decision, Verdict::Deny);
    assert_eq!(denied.reasons[0].path.as_deref(), Some("payload[\"a.b\"]"));
}

#[test]
fn wildcards_scan_arrays_up_to_the_limit_and_deny_one_past_it() {
    let engine = engine("fieldRange payload.items[*] >= 0");
    let at_limit: Vec<Value> = vec![json!(1); Limits::DEFAULT.max_array_scan];
    assert_eq!(
        decide(&engine, json!({ "items": at_limit })).decision,
        Verdict::Allow
    );
    let past: Vec<Value> = vec![json!(1); Limits::DEFAULT.max_array_scan + 1];
    let denied = decide(&engine, json!({ "items": past }));
    assert_eq!(denied.decision, Verdict::Deny);
    assert_eq!(denied.reasons[0].constraint.as_str(), "input");
}

#[test]
fn schema_string_lengths_count_code_points_not_bytes() {
    let engine = engine(r#"payloadSchema { "properties": { "s": { "maxLength": 2 } } }"#);
    // Two code points, eight bytes.
    assert_eq!(
        decide(&engine, json!({"s": "😀😀"})).decision,
        Verdict::Allow
    );
    assert_eq!(
        decide(&engine, json!({"s": "😀😀😀"})).decision,
        Verdict::Deny
    );
}

#[test]
fn case_insensitive_regexes_fold_unicode_case() {
    let engine = engine("fieldMatches payload.city ~ /zürich/i");
    assert_eq!(
        decide(&engine, json!({"city": "ZÜRICH"})).decision,
        Verdict::Allow
    );
    // Whole-value match: a longer string does not match.
    assert_eq!(
        decide(&engine, json!({"city": "Zürich!"})).decision,
        Verdict::Deny
    );
}

#[test]
fn numbers_compare_exactly_at_the_float_precision_edge() {
    let engine = engine("fieldRange payload.n <= 9007199254740992");
    // 2^53 as an integer and as a float both hold; 2^53 + 1 as an integer does not, even
    // though it rounds to 2^53 as a float.
    for n in ["9007199254740992", "9007199254740992.0"] {
        let payload: Value = serde_json::from_str(&format!(r#"{{"n": {n}}}"#)).unwrap();
        assert_eq!(decide(&engine, payload).decision, Verdict::Allow, "{n}");
    }
    let payload: Value = serde_json::from_str(r#"{"n": 9007199254740993}"#).unwrap();
    assert_eq!(decide(&engine, payload).decision, Verdict::Deny);
}
