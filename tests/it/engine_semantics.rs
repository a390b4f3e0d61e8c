//! The decision procedure of SPEC §2–§5, pinned through the public API: resources, value
//! equality, paths (`optional`, `[*]`), combinators, regexes, ranges, windows, gating, lifetimes,
//! grants, transactions, revocation, rate limits, observe mode and reload pinning.
//!
//! Every test builds an engine from inline `.cap` text with [`engine`] (stateless) or
//! [`stateful`] (with an [`InMemoryStore`] and a [`SimulatedClock`]) and decides JSON requests
//! with [`decide`]. Regression tests for bugs found here are named `regression_*`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use capgate::{
    Decision, Engine, InMemoryStore, Limits, PolicyFormat, PolicyLoader, PolicySet, ReasonKind,
    SimulatedClock, Verdict,
};
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

/// A Tuesday, 10:00 UTC.
const T0: &str = "2026-12-01T10:00:00Z";

fn at(text: &str) -> DateTime<Utc> {
    capgate::parse_timestamp(text).unwrap()
}

fn load(cap: &str) -> PolicySet {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("test.cap", cap.to_owned(), PolicyFormat::Cap, None);
    loader
        .finish()
        .unwrap_or_else(|e| panic!("policy does not load:\n{e}"))
}

fn load_error(cap: &str) -> String {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("bad.cap", cap.to_owned(), PolicyFormat::Cap, None);
    match loader.finish() {
        Ok(_) => panic!("policy unexpectedly loads"),
        Err(e) => e.to_string(),
    }
}

/// A stateless engine (what `capgate check` runs) on a simulated clock at [`T0`].
fn engine(cap: &str) -> Engine {
    Engine::builder(load(cap))
        .clock(Arc::new(SimulatedClock::new(at(T0))))
        .build()
}

/// A stateful engine and its clock, at [`T0`].
fn stateful(cap: &str) -> (Engine, Arc<SimulatedClock>) {
    let clock = Arc::new(SimulatedClock::new(at(T0)));
    let engine = Engine::builder(load(cap))
        .clock(clock.clone())
        .state(Arc::new(InMemoryStore::new()))
        .build();
    (engine, clock)
}

/// An observe-mode stateful engine and its clock, at [`T0`].
fn observing(cap: &str) -> (Engine, Arc<SimulatedClock>) {
    let clock = Arc::new(SimulatedClock::new(at(T0)));
    let engine = Engine::builder(load(cap))
        .clock(clock.clone())
        .state(Arc::new(InMemoryStore::new()))
        .observe(true)
        .build();
    (engine, clock)
}

/// Decides a request given as JSON, through the untrusted-bytes entry point.
fn decide(engine: &Engine, request: &Value) -> Decision {
    engine.check_slice(&serde_json::to_vec(request).unwrap())
}

/// A request for skill `s`.
fn req(operation: &str, resource: &str, payload: Value) -> Value {
    json!({"skill": "s", "operation": operation, "resource": resource, "payload": payload})
}

/// A `tool:t` call with this payload.
fn tool(payload: Value) -> Value {
    req("call", "tool:t", payload)
}

/// Adds or replaces a top-level request field.
fn with(mut request: Value, key: &str, value: Value) -> Value {
    request[key] = value;
    request
}

/// The constraint names of the reasons, in order.
fn kinds(decision: &Decision) -> Vec<&'static str> {
    decision
        .reasons
        .iter()
        .map(|r| r.constraint.as_str())
        .collect()
}

#[track_caller]
fn assert_allow(decision: &Decision) {
    assert_eq!(
        decision.verdict,
        Verdict::Allow,
        "expected allow, got {decision:#?}"
    );
    assert_eq!(decision.observed, None, "{decision:#?}");
    assert!(decision.reasons.is_empty(), "{decision:#?}");
}

#[track_caller]
fn assert_deny(decision: &Decision, constraint: ReasonKind) {
    assert_eq!(
        decision.verdict,
        Verdict::Deny,
        "expected deny ({constraint}), got {decision:#?}"
    );
    assert!(
        decision.reasons.iter().any(|r| r.constraint == constraint),
        "expected a `{constraint}` reason, got {:?}: {decision:#?}",
        kinds(decision)
    );
    assert_eq!(decision.capability, None, "{decision:#?}");
}

#[track_caller]
fn assert_approval(decision: &Decision, constraint: ReasonKind) {
    assert_eq!(
        decision.verdict,
        Verdict::ApprovalRequired,
        "expected approval_required ({constraint}), got {decision:#?}"
    );
    assert_eq!(kinds(decision), vec![constraint.as_str()], "{decision:#?}");
}

/// A skill `s` with one capability `c` on `tool:t` holding `constraints`.
fn tool_skill(constraints: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    lifetime process justification "test"
    {constraints}
  }}
}}"#
    )
}

/// The verdict of a stateless engine over `tool_skill(constraints)` for `payload`.
fn verdict(constraints: &str, payload: Value) -> Verdict {
    decide(&engine(&tool_skill(constraints)), &tool(payload)).verdict
}

#[track_caller]
fn holds(constraints: &str, payload: Value) {
    let decision = decide(&engine(&tool_skill(constraints)), &tool(payload.clone()));
    assert_eq!(
        decision.verdict,
        Verdict::Allow,
        "`{constraints}` should hold for {payload}: {decision:#?}"
    );
}

#[track_caller]
fn fails(constraints: &str, payload: Value, constraint: ReasonKind) {
    let decision = decide(&engine(&tool_skill(constraints)), &tool(payload.clone()));
    assert_eq!(
        decision.verdict,
        Verdict::Deny,
        "`{constraints}` should fail for {payload}: {decision:#?}"
    );
    assert_eq!(kinds(&decision), vec![constraint.as_str()], "{decision:#?}");
}

// ------------------------------------------------------------------------------------------------
// §5.1 step 1: unknown skill, revision
// ------------------------------------------------------------------------------------------------

const HASHED: &str = r#"
skill "s" {
  version "1"
  hash "sha256:0000000000000000000000000000000000000000000000000000000000000001"
  capability "c" { resource tool "t" operations call lifetime process justification "test" }
}"#;

#[test]
fn unknown_skill_is_denied_with_unknown_skill() {
    let engine = engine(HASHED);
    let decision = decide(&engine, &with(tool(json!({})), "skill", json!("nope")));
    assert_deny(&decision, ReasonKind::UnknownSkill);
    assert_eq!(kinds(&decision), vec!["unknownSkill"]);
    assert_eq!(&*decision.skill, "nope");
}

#[test]
fn skill_names_are_case_sensitive() {
    let engine = engine(HASHED);
    let decision = decide(&engine, &with(tool(json!({})), "skill", json!("S")));
    assert_deny(&decision, ReasonKind::UnknownSkill);
}

#[test]
fn skill_hash_that_differs_is_denied_with_revision() {
    let engine = engine(HASHED);
    let hash = "sha256:0000000000000000000000000000000000000000000000000000000000000002";
    let decision = decide(&engine, &with(tool(json!({})), "skill_hash", json!(hash)));
    assert_deny(&decision, ReasonKind::Revision);
    assert_eq!(kinds(&decision), vec!["revision"]);
}

#[test]
fn skill_hash_that_matches_is_allowed() {
    let engine = engine(HASHED);
    let hash = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
    assert_allow(&decide(
        &engine,
        &with(tool(json!({})), "skill_hash", json!(hash)),
    ));
}

#[test]
fn skill_hash_given_for_a_manifest_without_hash_is_denied_with_revision() {
    let engine = engine(&tool_skill(""));
    let hash = "sha256:0000000000000000000000000000000000000000000000000000000000000001";
    let decision = decide(&engine, &with(tool(json!({})), "skill_hash", json!(hash)));
    assert_deny(&decision, ReasonKind::Revision);
}

#[test]
fn absent_skill_hash_is_not_checked() {
    assert_allow(&decide(&engine(HASHED), &tool(json!({}))));
}

// ------------------------------------------------------------------------------------------------
// §5.1 steps 2–3: resources and operations
// ------------------------------------------------------------------------------------------------

const HTTP: &str = r#"
skill "s" {
  version "1"
  capability "events" {
    resource http "https://api.example.com/v3/calendars/{calendar}/events"
    operations GET, POST
    lifetime process
    justification "reads and writes events"
    fieldEquals resource.calendar in ["primary", "team"]
  }
  capability "files" {
    resource http "https://files.example.com/pub/*/read"
    operations GET
    lifetime process justification "test"
  }
  capability "tree" {
    resource http "https://files.example.com/tree/**"
    operations GET
    lifetime process justification "test"
  }
  capability "wild" {
    resource http "https://*.cdn.example.com/assets/{name}"
    operations GET
    lifetime process justification "test"
    fieldEquals resource.name == "a b"
  }
  capability "rows" {
    resource db "crm/{org}/records"
    operations SELECT
    lifetime process justification "test"
    fieldEquals resource.org == context.org
  }
}"#;

fn http(resource: &str) -> Decision {
    decide(&engine(HTTP), &req("GET", resource, json!({})))
}

#[test]
fn http_template_binding_is_readable_as_resource_name() {
    assert_allow(&http("https://api.example.com/v3/calendars/primary/events"));
    let decision = http("https://api.example.com/v3/calendars/other/events");
    assert_deny(&decision, ReasonKind::FieldEquals);
    assert_eq!(
        decision.reasons[0].path.as_deref(),
        Some("resource.calendar")
    );
}

#[test]
fn http_host_is_case_insensitive_and_default_port_is_dropped() {
    assert_allow(&http("https://API.Example.COM/v3/calendars/primary/events"));
    assert_allow(&http(
        "https://api.example.com:443/v3/calendars/primary/events",
    ));
    assert_deny(
        &http("https://api.example.com:8443/v3/calendars/primary/events"),
        ReasonKind::Resource,
    );
}

#[test]
fn http_scheme_is_literal() {
    assert_deny(
        &http("http://api.example.com/v3/calendars/primary/events"),
        ReasonKind::Resource,
    );
}

#[test]
fn http_path_is_case_sensitive() {
    assert_deny(
        &http("https://api.example.com/V3/calendars/primary/events"),
        ReasonKind::Resource,
    );
}

#[test]
fn http_query_is_not_part_of_matching() {
    assert_allow(&http(
        "https://api.example.com/v3/calendars/primary/events?x=1&y=2",
    ));
}

#[test]
fn star_matches_exactly_one_segment() {
    assert_allow(&http("https://files.example.com/pub/x/read"));
    assert_deny(
        &http("https://files.example.com/pub/x/y/read"),
        ReasonKind::Resource,
    );
    assert_deny(
        &http("https://files.example.com/pub/read"),
        ReasonKind::Resource,
    );
}

#[test]
fn double_star_matches_the_rest() {
    assert_allow(&http("https://files.example.com/tree/a"));
    assert_allow(&http("https://files.example.com/tree/a/b/c"));
    assert_deny(
        &http("https://files.example.com/trees/a"),
        ReasonKind::Resource,
    );
}

#[test]
fn wildcard_host_matches_subdomains_only() {
    assert_allow(&http("https://eu.cdn.example.com/assets/a%20b"));
    assert_deny(
        &http("https://cdn.example.com/assets/a%20b"),
        ReasonKind::Resource,
    );
    assert_deny(
        &http("https://eu.cdn.example.com.evil.com/assets/a%20b"),
        ReasonKind::Resource,
    );
}

#[test]
fn path_segments_are_percent_decoded_before_matching_and_binding() {
    // `a%20b` binds `a b`.
    assert_allow(&http("https://eu.cdn.example.com/assets/a%20b"));
}

#[test]
fn dot_segments_and_encoded_separators_are_denied_never_normalised() {
    for resource in [
        "https://files.example.com/pub/../pub/x/read",
        "https://files.example.com/pub/./x/read",
        "https://files.example.com/tree/a/../../etc",
        "https://files.example.com/tree/%2e%2e/x",
        "https://files.example.com/tree/.%2E/x",
        "https://files.example.com/tree/a%2Fb",
        "https://files.example.com/tree/a%2fb",
        "https://files.example.com/tree/a%5Cb",
        "https://files.example.com/tree/a%5cb",
        "https://files.example.com/tree/a%00",
        "https://files.example.com/tree/a%zz",
        "https://files.example.com/tree/a%2",
        "https://files.example.com/tree/a%",
        "https://files.example.com/tree/a\\b",
        "https://files.example.com/tree/a\u{0}b",
        "https://api.example.com@files.example.com/tree/a",
        "https://files.example.com/tree/a#frag",
        "https://files.example.com/tree//a",
        "",
        "ftp://files.example.com/tree/a",
        "files.example.com/tree/a",
    ] {
        let decision = http(resource);
        assert_deny(&decision, ReasonKind::Resource);
        assert_eq!(kinds(&decision), vec!["resource"], "{resource}");
    }
}

#[test]
fn operation_not_declared_is_denied_with_operation() {
    let engine = engine(HTTP);
    let decision = decide(
        &engine,
        &req(
            "DELETE",
            "https://api.example.com/v3/calendars/primary/events",
            json!({}),
        ),
    );
    assert_deny(&decision, ReasonKind::Operation);
    assert_eq!(kinds(&decision), vec!["operation"]);
}

#[test]
fn operations_are_compared_exactly() {
    let engine = engine(HTTP);
    let decision = decide(
        &engine,
        &req(
            "get",
            "https://api.example.com/v3/calendars/primary/events",
            json!({}),
        ),
    );
    assert_deny(&decision, ReasonKind::Operation);
}

#[test]
fn resource_of_another_kind_is_denied_with_resource() {
    let engine = engine(HTTP);
    let decision = decide(&engine, &req("SELECT", "tool:crm/acme/records", json!({})));
    assert_deny(&decision, ReasonKind::Resource);
}

#[test]
fn db_binding_compared_with_context() {
    let engine = engine(HTTP);
    let request = with(
        req("SELECT", "db:crm/acme/records", json!({})),
        "context",
        json!({"org": "acme"}),
    );
    assert_allow(&decide(&engine, &request));
    let request = with(
        req("SELECT", "db:crm/other/records", json!({})),
        "context",
        json!({"org": "acme"}),
    );
    assert_deny(&decide(&engine, &request), ReasonKind::FieldEquals);
}

#[test]
fn first_holding_candidate_decides_in_declaration_order() {
    let cap = r#"
skill "s" {
  version "1"
  capability "narrow" {
    resource tool "t"
    operations call
    lifetime process justification "test"
    fieldEquals payload.mode == "narrow"
  }
  capability "broad" {
    resource tool "t"
    operations call
    lifetime process justification "test"
  }
}"#;
    let engine = engine(cap);
    let decision = decide(&engine, &tool(json!({"mode": "narrow"})));
    assert_eq!(decision.capability.as_deref(), Some("narrow"));
    let decision = decide(&engine, &tool(json!({"mode": "other"})));
    assert_eq!(decision.capability.as_deref(), Some("broad"));
}

#[test]
fn deny_lists_the_first_failing_check_of_every_candidate() {
    let cap = r#"
skill "s" {
  version "1"
  capability "one" {
    resource tool "t"
    operations call
    lifetime process justification "test"
    fieldEquals payload.a == 1
    fieldEquals payload.b == 1
  }
  capability "two" {
    resource tool "t"
    operations call
    lifetime process justification "test"
    fieldMatches payload.c ~ /x/
  }
}"#;
    let decision = decide(&engine(cap), &tool(json!({"a": 2, "b": 2, "c": "y"})));
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(kinds(&decision), vec!["fieldEquals", "fieldMatches"]);
    assert_eq!(decision.reasons[0].capability.as_deref(), Some("one"));
    assert_eq!(decision.reasons[0].path.as_deref(), Some("payload.a"));
    assert_eq!(decision.reasons[1].capability.as_deref(), Some("two"));
    assert_eq!(decision.reasons[0].source.as_deref(), Some("test.cap:8:5"));
}

// ------------------------------------------------------------------------------------------------
// §2.4 fieldEquals: JSON equality
// ------------------------------------------------------------------------------------------------

#[test]
fn integer_literal_equals_float_form_of_the_same_number() {
    holds("fieldEquals payload.n == 1", json!({"n": 1.0}));
    holds("fieldEquals payload.n == 1.0", json!({"n": 1}));
    holds("fieldEquals payload.n == 0", json!({"n": -0.0}));
    holds("fieldEquals payload.n == 100", json!({"n": 1e2}));
}

#[test]
fn string_never_equals_a_number() {
    fails(
        "fieldEquals payload.n == 1",
        json!({"n": "1"}),
        ReasonKind::FieldEquals,
    );
    fails(
        r#"fieldEquals payload.n == "1""#,
        json!({"n": 1}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn booleans_and_null_equal_only_themselves() {
    holds("fieldEquals payload.b == true", json!({"b": true}));
    fails(
        "fieldEquals payload.b == true",
        json!({"b": 1}),
        ReasonKind::FieldEquals,
    );
    fails(
        "fieldEquals payload.b == false",
        json!({"b": null}),
        ReasonKind::FieldEquals,
    );
    holds("fieldEquals payload.b == null", json!({"b": null}));
    fails(
        "fieldEquals payload.b == null",
        json!({}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn strings_compare_exactly() {
    fails(
        r#"fieldEquals payload.s == "abc""#,
        json!({"s": "ABC"}),
        ReasonKind::FieldEquals,
    );
    fails(
        r#"fieldEquals payload.s == "abc""#,
        json!({"s": "abc "}),
        ReasonKind::FieldEquals,
    );
    // No Unicode normalisation: precomposed é is not e + combining acute.
    fails(
        "fieldEquals payload.s == \"\u{e9}\"",
        json!({"s": "e\u{301}"}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn arrays_and_objects_compare_structurally() {
    holds(
        r#"fieldEquals payload.v == {"a": [1, 2], "b": {"c": null}}"#,
        json!({"v": {"b": {"c": null}, "a": [1.0, 2]}}),
    );
    fails(
        r#"fieldEquals payload.v == [1, 2]"#,
        json!({"v": [2, 1]}),
        ReasonKind::FieldEquals,
    );
    fails(
        r#"fieldEquals payload.v == {"a": 1}"#,
        json!({"v": {"a": 1, "b": 2}}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn in_list_uses_json_equality() {
    let c = r#"fieldEquals payload.v in [1, "two", [3]]"#;
    holds(c, json!({"v": 1.0}));
    holds(c, json!({"v": "two"}));
    holds(c, json!({"v": [3.0]}));
    fails(c, json!({"v": "1"}), ReasonKind::FieldEquals);
    fails(c, json!({"v": 3}), ReasonKind::FieldEquals);
}

#[test]
fn field_equals_path_compares_two_values() {
    let c = "fieldEquals payload.a == payload.b";
    holds(c, json!({"a": 1, "b": 1.0}));
    fails(c, json!({"a": 1, "b": "1"}), ReasonKind::FieldEquals);
    fails(c, json!({"a": 1}), ReasonKind::FieldEquals);
    fails(c, json!({"b": 1}), ReasonKind::FieldEquals);
}

#[test]
fn regression_decimal_payload_numbers_are_parsed_exactly() {
    // Bug: serde_json's default float parser read `7673222765294225.0` as
    // `7673222765294226.0`, so `1 == 1.0` failed for some exactly representable numbers.
    let engine = engine(&tool_skill("fieldEquals payload.n == 7673222765294225"));
    let decision = engine.check_slice(
        br#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":7673222765294225.0}}"#,
    );
    assert_allow(&decision);
    let engine = engine_range_exact();
    let decision = engine.check_slice(
        br#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":7673222765294225.0}}"#,
    );
    assert_deny(&decision, ReasonKind::FieldRange);
}

fn engine_range_exact() -> Engine {
    engine(&tool_skill("fieldRange payload.n < 7673222765294225"))
}

#[test]
fn big_integers_compare_exactly_not_through_f64() {
    // 2^53 + 1 is not a double; it must not equal the double 2^53.
    let big: Value = serde_json::from_str(r#"{"n": 9007199254740993}"#).unwrap();
    fails(
        "fieldEquals payload.n == 9007199254740992.0",
        big.clone(),
        ReasonKind::FieldEquals,
    );
    holds("fieldEquals payload.n == 9007199254740993", big);
    let max: Value = serde_json::from_str(r#"{"n": 18446744073709551615}"#).unwrap();
    holds("fieldEquals payload.n == 18446744073709551615", max.clone());
    fails(
        "fieldEquals payload.n == 18446744073709551614",
        max,
        ReasonKind::FieldEquals,
    );
    let min: Value = serde_json::from_str(r#"{"n": -9223372036854775808}"#).unwrap();
    holds("fieldEquals payload.n == -9223372036854775808", min);
}

// ------------------------------------------------------------------------------------------------
// §2.3 paths: absent, optional, [*], nested [*]
// ------------------------------------------------------------------------------------------------

#[test]
fn constraint_on_absent_path_fails() {
    fails(
        "fieldEquals payload.x == 1",
        json!({}),
        ReasonKind::FieldEquals,
    );
    fails(
        "fieldMatches payload.x ~ /.*/",
        json!({}),
        ReasonKind::FieldMatches,
    );
    fails(
        "fieldRange payload.x <= 1",
        json!({}),
        ReasonKind::FieldRange,
    );
    fails(
        "fieldEquals payload.a.b == 1",
        json!({"a": {}}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn optional_constraint_holds_when_the_path_is_absent() {
    holds("optional fieldEquals payload.x == 1", json!({}));
    holds("optional fieldMatches payload.x ~ /a/", json!({}));
    holds("optional fieldRange payload.x <= 1", json!({"y": 5}));
    // Any segment absent.
    holds("optional fieldEquals payload.a.b.c == 1", json!({}));
    holds("optional fieldEquals payload.a.b.c == 1", json!({"a": {}}));
    holds("optional fieldEquals payload.a[3] == 1", json!({"a": [1]}));
}

#[test]
fn optional_constraint_still_checks_a_present_value() {
    fails(
        "optional fieldEquals payload.x == 1",
        json!({"x": 2}),
        ReasonKind::FieldEquals,
    );
    fails(
        "optional fieldMatches payload.x ~ /a/",
        json!({"x": "b"}),
        ReasonKind::FieldMatches,
    );
    // A present null is a value, not an absence.
    fails(
        "optional fieldEquals payload.x == 1",
        json!({"x": null}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn optional_constraint_holds_when_the_whole_payload_is_absent() {
    // SPEC §4: an absent payload means null; every path below it is absent.
    let engine = engine(&tool_skill("optional fieldEquals payload.x == 1"));
    let request = json!({"skill": "s", "operation": "call", "resource": "tool:t"});
    assert_allow(&decide(&engine, &request));
    let engine = engine_with_absent_roots();
    let request = json!({"skill": "s", "operation": "call", "resource": "tool:t"});
    assert_allow(&decide(&engine, &request));
}

fn engine_with_absent_roots() -> Engine {
    engine(&tool_skill(
        "optional fieldEquals agent.id == \"a\"\n    optional fieldEquals context.org == \"o\"",
    ))
}

#[test]
fn regression_optional_on_absent_payload_agent_or_context_holds() {
    // Bug: a missing payload/agent/context (null) was treated as a wrong shape, so every
    // `optional` constraint under it failed although the path is absent.
    holds_request(
        "optional fieldEquals payload.a.b == 1",
        json!({"skill": "s", "operation": "call", "resource": "tool:t"}),
    );
    holds_request(
        "optional fieldEquals agent.id == \"x\"",
        json!({"skill": "s", "operation": "call", "resource": "tool:t"}),
    );
    holds_request(
        "optional fieldEquals context.org == \"x\"",
        json!({"skill": "s", "operation": "call", "resource": "tool:t", "context": null}),
    );
    // Not optional: still a deny.
    let engine = engine(&tool_skill("fieldEquals payload.a == 1"));
    assert_deny(
        &decide(
            &engine,
            &json!({"skill": "s", "operation": "call", "resource": "tool:t"}),
        ),
        ReasonKind::FieldEquals,
    );
}

#[track_caller]
fn holds_request(constraints: &str, request: Value) {
    let decision = decide(&engine(&tool_skill(constraints)), &request);
    assert_eq!(
        decision.verdict,
        Verdict::Allow,
        "`{constraints}`: {decision:#?}"
    );
}

#[test]
fn stepping_into_a_value_of_the_wrong_type_fails_even_when_optional() {
    fails(
        "optional fieldEquals payload.a.b == 1",
        json!({"a": "string"}),
        ReasonKind::FieldEquals,
    );
    fails(
        "optional fieldEquals payload.a[0] == 1",
        json!({"a": {"0": 1}}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn wildcard_over_an_empty_array_holds() {
    holds(r#"fieldEquals payload.xs[*] == "a""#, json!({"xs": []}));
    holds(r#"fieldMatches payload.xs[*].e ~ /a/"#, json!({"xs": []}));
    holds("fieldRange payload.xs[*] < 0", json!({"xs": []}));
}

#[test]
fn wildcard_must_hold_for_every_element() {
    let c = r#"fieldMatches payload.xs[*].email ~ /[^@]+@example\.com/"#;
    holds(
        c,
        json!({"xs": [{"email": "a@example.com"}, {"email": "b@example.com"}]}),
    );
    let decision = decide(
        &engine(&tool_skill(c)),
        &tool(json!({"xs": [{"email": "a@example.com"}, {"email": "b@evil.com"}]})),
    );
    assert_deny(&decision, ReasonKind::FieldMatches);
    assert_eq!(
        decision.reasons[0].path.as_deref(),
        Some("payload.xs[1].email")
    );
}

#[test]
fn wildcard_element_missing_the_member_fails() {
    fails(
        r#"fieldMatches payload.xs[*].email ~ /.*/"#,
        json!({"xs": [{"email": "a"}, {"name": "b"}]}),
        ReasonKind::FieldMatches,
    );
    holds(
        r#"optional fieldMatches payload.xs[*].email ~ /a/"#,
        json!({"xs": [{"email": "a"}, {"name": "b"}]}),
    );
}

#[test]
fn wildcard_over_an_absent_array_fails_unless_optional() {
    fails(
        r#"fieldEquals payload.xs[*] == 1"#,
        json!({}),
        ReasonKind::FieldEquals,
    );
    holds(r#"optional fieldEquals payload.xs[*] == 1"#, json!({}));
}

#[test]
fn wildcard_over_a_non_array_fails() {
    fails(
        r#"fieldEquals payload.xs[*] == 1"#,
        json!({"xs": {"a": 1}}),
        ReasonKind::FieldEquals,
    );
    fails(
        r#"fieldEquals payload.xs[*] == 1"#,
        json!({"xs": 1}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn nested_wildcards_reach_every_element_of_every_element() {
    let c = "fieldRange payload.m[*][*] < 10";
    holds(c, json!({"m": [[1, 2], [], [3]]}));
    holds(c, json!({"m": []}));
    let decision = decide(
        &engine(&tool_skill(c)),
        &tool(json!({"m": [[1, 2], [3, 10]]})),
    );
    assert_deny(&decision, ReasonKind::FieldRange);
    assert_eq!(decision.reasons[0].path.as_deref(), Some("payload.m[1][1]"));
    fails(c, json!({"m": [[1], 2]}), ReasonKind::FieldRange);
}

#[test]
fn index_segment_reads_one_element() {
    holds("fieldEquals payload.xs[1] == 5", json!({"xs": [4, 5]}));
    fails(
        "fieldEquals payload.xs[2] == 5",
        json!({"xs": [4, 5]}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn quoted_key_segment_reads_odd_member_names() {
    holds(
        r#"fieldEquals payload["a.b"]["c d"] == 1"#,
        json!({"a.b": {"c d": 1}}),
    );
    fails(
        r#"fieldEquals payload["a.b"] == 1"#,
        json!({"a": {"b": 1}}),
        ReasonKind::FieldEquals,
    );
}

#[test]
fn request_root_reads_skill_operation_and_transaction() {
    holds(r#"fieldEquals request.skill == "s""#, json!({}));
    holds(r#"fieldEquals request.operation == "call""#, json!({}));
    fails(
        r#"fieldEquals request.transaction == "tx""#,
        json!({}),
        ReasonKind::FieldEquals,
    );
    holds(
        r#"optional fieldEquals request.transaction == "tx""#,
        json!({}),
    );
}

// ------------------------------------------------------------------------------------------------
// §2.4 combinators
// ------------------------------------------------------------------------------------------------

#[test]
fn any_holds_when_one_alternative_holds() {
    let c = "any { fieldEquals payload.a == 1 fieldEquals payload.b == 1 }";
    holds(c, json!({"a": 1}));
    holds(c, json!({"b": 1}));
    holds(c, json!({"a": 1, "b": 1}));
    fails(c, json!({"a": 2, "b": 2}), ReasonKind::Any);
    fails(c, json!({}), ReasonKind::Any);
}

#[test]
fn all_holds_when_every_member_holds() {
    let c = "all { fieldEquals payload.a == 1 fieldEquals payload.b == 1 }";
    holds(c, json!({"a": 1, "b": 1}));
    fails(c, json!({"a": 1, "b": 2}), ReasonKind::All);
}

#[test]
fn not_inverts_its_constraint() {
    let c = r#"not { fieldEquals payload.role == "admin" }"#;
    holds(c, json!({"role": "user"}));
    fails(c, json!({"role": "admin"}), ReasonKind::Not);
    // The inner constraint fails on an absent path, so `not` holds (SPEC §2.3/§2.4 read literally).
    holds(c, json!({}));
}

#[test]
fn combinators_nest() {
    let c = r#"any { all { fieldEquals payload.a == 1 not { fieldEquals payload.b == 1 } } fieldEquals payload.c == 1 }"#;
    holds(c, json!({"a": 1, "b": 2}));
    holds(c, json!({"c": 1}));
    fails(c, json!({"a": 1, "b": 1}), ReasonKind::Any);
}

#[test]
fn every_top_level_constraint_must_hold() {
    let c = "fieldEquals payload.a == 1\n    fieldEquals payload.b == 1";
    fails(c, json!({"a": 1}), ReasonKind::FieldEquals);
    holds(c, json!({"a": 1, "b": 1}));
}

// ------------------------------------------------------------------------------------------------
// §2.4 fieldMatches: whole-string regexes
// ------------------------------------------------------------------------------------------------

#[test]
fn regex_must_match_the_whole_string() {
    let c = "fieldMatches payload.s ~ /abc/";
    holds(c, json!({"s": "abc"}));
    fails(c, json!({"s": "xabcx"}), ReasonKind::FieldMatches);
    fails(c, json!({"s": "abcx"}), ReasonKind::FieldMatches);
    fails(c, json!({"s": "xabc"}), ReasonKind::FieldMatches);
    fails(c, json!({"s": "abc\n"}), ReasonKind::FieldMatches);
}

#[test]
fn regex_alternation_is_anchored_as_a_group() {
    let c = "fieldMatches payload.s ~ /a|b/";
    holds(c, json!({"s": "a"}));
    holds(c, json!({"s": "b"}));
    fails(c, json!({"s": "ab"}), ReasonKind::FieldMatches);
    fails(c, json!({"s": "xa"}), ReasonKind::FieldMatches);
}

#[test]
fn regex_i_flag_is_case_insensitive() {
    let c = r#"fieldMatches payload.s ~ /[^@]+@example\.com/i"#;
    holds(c, json!({"s": "Bob@EXAMPLE.com"}));
    fails(
        c,
        json!({"s": "bob@example.com.evil"}),
        ReasonKind::FieldMatches,
    );
    fails(
        r#"fieldMatches payload.s ~ /abc/"#,
        json!({"s": "ABC"}),
        ReasonKind::FieldMatches,
    );
}

#[test]
fn regex_on_a_non_string_fails() {
    let c = r"fieldMatches payload.s ~ /\d+/";
    holds(c, json!({"s": "123"}));
    fails(c, json!({"s": 123}), ReasonKind::FieldMatches);
    fails(c, json!({"s": ["1"]}), ReasonKind::FieldMatches);
    fails(c, json!({"s": null}), ReasonKind::FieldMatches);
}

/// `\d`, `\w` and `\s` are ASCII: Arabic-Indic `١٢٣` and fullwidth `１２３` are not digits, `é`
/// is not a word character, a no-break space is not a space — and each negation takes them in.
/// Unicode literals and `\p{..}` classes keep their meaning.
#[test]
fn perl_classes_are_ascii_in_field_matches() {
    let digits = r"fieldMatches payload.s ~ /\d+/";
    holds(digits, json!({"s": "0123456789"}));
    for unicode in ["١٢٣", "１２３", "৩", "٣"] {
        fails(digits, json!({ "s": unicode }), ReasonKind::FieldMatches);
        holds(r"fieldMatches payload.s ~ /\D+/", json!({ "s": unicode }));
        holds(
            r"fieldMatches payload.s ~ /\p{Nd}+/",
            json!({ "s": unicode }),
        );
    }
    let word = r"fieldMatches payload.s ~ /[\w.-]+/";
    holds(word, json!({"s": "Ab_9.-z"}));
    fails(word, json!({"s": "café"}), ReasonKind::FieldMatches);
    fails(word, json!({"s": "ｆｏｏ"}), ReasonKind::FieldMatches);
    holds(r"fieldMatches payload.s ~ /caf\W/", json!({"s": "café"}));
    // The `i` flag folds the class as written out (`[0-9A-Za-z_]`), and no further than ASCII
    // for digits and spaces.
    holds(r"fieldMatches payload.s ~ /\w+/i", json!({"s": "ABCxyz"}));
    fails(
        r"fieldMatches payload.s ~ /\d+/i",
        json!({"s": "１"}),
        ReasonKind::FieldMatches,
    );
    let space = r"fieldMatches payload.s ~ /a\sb/";
    holds(space, json!({"s": "a b"}));
    holds(space, json!({"s": "a\tb"}));
    for unicode in ["a\u{a0}b", "a\u{3000}b", "a\u{2028}b", "a\u{85}b"] {
        fails(space, json!({ "s": unicode }), ReasonKind::FieldMatches);
        holds(r"fieldMatches payload.s ~ /a\Sb/", json!({ "s": unicode }));
        holds(
            r"fieldMatches payload.s ~ /a[^\s]b/",
            json!({ "s": unicode }),
        );
    }
    // Unicode literals still match themselves, case-folded under `i`.
    holds(
        r"fieldMatches payload.s ~ /café-\d/",
        json!({"s": "café-1"}),
    );
    holds(r"fieldMatches payload.s ~ /ÉTÉ/i", json!({"s": "été"}));
}

#[test]
fn backreferences_and_lookaround_are_compile_errors() {
    let e = load_error(&tool_skill(r"fieldMatches payload.s ~ /(a)\1/"));
    assert!(e.contains("bad.cap:"), "{e}");
    let e = load_error(&tool_skill(r"fieldMatches payload.s ~ /a(?=b)/"));
    assert!(e.contains("regex"), "{e}");
}

// ------------------------------------------------------------------------------------------------
// §2.4 fieldRange
// ------------------------------------------------------------------------------------------------

#[test]
fn range_bounds_are_inclusive_or_exclusive_as_written() {
    holds("fieldRange payload.n <= 10", json!({"n": 10}));
    fails(
        "fieldRange payload.n < 10",
        json!({"n": 10}),
        ReasonKind::FieldRange,
    );
    holds("fieldRange payload.n >= 10", json!({"n": 10}));
    fails(
        "fieldRange payload.n > 10",
        json!({"n": 10}),
        ReasonKind::FieldRange,
    );
    holds("fieldRange payload.n > 10", json!({"n": 10.000001}));
    fails(
        "fieldRange payload.n <= 10",
        json!({"n": 10.000001}),
        ReasonKind::FieldRange,
    );
}

#[test]
fn chained_range_reads_as_lower_and_upper_bound() {
    let c = "fieldRange 1 <= payload.n < 10";
    holds(c, json!({"n": 1}));
    holds(c, json!({"n": 9.999}));
    fails(c, json!({"n": 0.999}), ReasonKind::FieldRange);
    fails(c, json!({"n": 10}), ReasonKind::FieldRange);
    let c = "fieldRange 1 < payload.n <= 10";
    fails(c, json!({"n": 1}), ReasonKind::FieldRange);
    holds(c, json!({"n": 10}));
}

#[test]
fn range_on_a_non_number_fails() {
    let c = "fieldRange payload.n <= 10";
    fails(c, json!({"n": "5"}), ReasonKind::FieldRange);
    fails(c, json!({"n": null}), ReasonKind::FieldRange);
    fails(c, json!({"n": true}), ReasonKind::FieldRange);
}

#[test]
fn negative_and_float_bounds_work() {
    holds("fieldRange -1.5 <= payload.n <= -0.5", json!({"n": -1}));
    fails(
        "fieldRange -1.5 <= payload.n <= -0.5",
        json!({"n": 0}),
        ReasonKind::FieldRange,
    );
}

#[test]
fn range_difference_of_timestamps_is_bounded_by_a_duration() {
    let c = "fieldRange payload.end - payload.start <= 2h";
    holds(
        c,
        json!({"start": "2026-12-01T10:00:00Z", "end": "2026-12-01T12:00:00Z"}),
    );
    fails(
        c,
        json!({"start": "2026-12-01T10:00:00Z", "end": "2026-12-01T12:00:00.001Z"}),
        ReasonKind::FieldRange,
    );
    // Offsets are honoured: 12:00+02:00 is 10:00Z.
    holds(
        c,
        json!({"start": "2026-12-01T10:00:00Z", "end": "2026-12-01T14:00:00+02:00"}),
    );
    // A negative difference is within `<= 2h`.
    holds(
        c,
        json!({"start": "2026-12-01T12:00:00Z", "end": "2026-12-01T10:00:00Z"}),
    );
    let c = "fieldRange payload.end - payload.start > 0s";
    fails(
        c,
        json!({"start": "2026-12-01T12:00:00Z", "end": "2026-12-01T12:00:00Z"}),
        ReasonKind::FieldRange,
    );
}

#[test]
fn range_difference_with_a_bad_or_missing_timestamp_fails() {
    let c = "fieldRange payload.end - payload.start <= 2h";
    fails(
        c,
        json!({"start": "2026-12-01T10:00:00Z", "end": "tomorrow"}),
        ReasonKind::FieldRange,
    );
    fails(
        c,
        json!({"start": "2026-12-01T10:00:00Z"}),
        ReasonKind::FieldRange,
    );
    fails(
        c,
        json!({"start": "2026-12-01T10:00:00Z", "end": 5}),
        ReasonKind::FieldRange,
    );
    holds(
        "optional fieldRange payload.end - payload.start <= 2h",
        json!({"start": "2026-12-01T10:00:00Z"}),
    );
}

#[test]
fn range_against_now_uses_the_engine_clock() {
    // The clock is at T0 = 2026-12-01T10:00:00Z.
    let c = "fieldRange payload.expires > now";
    holds(c, json!({"expires": "2026-12-01T10:00:00.001Z"}));
    fails(
        c,
        json!({"expires": "2026-12-01T10:00:00Z"}),
        ReasonKind::FieldRange,
    );
    fails(
        c,
        json!({"expires": "2026-12-01T09:59:59Z"}),
        ReasonKind::FieldRange,
    );
    holds(
        "fieldRange payload.t <= now",
        json!({"t": "2026-12-01T10:00:00Z"}),
    );
    holds(
        "fieldRange payload.t <= now",
        json!({"t": "2026-12-01T11:00:00+01:00"}),
    );
    fails(c, json!({"expires": "not a time"}), ReasonKind::FieldRange);
}

#[test]
fn range_against_now_follows_the_request_time_on_a_simulated_clock() {
    let engine = engine(&tool_skill("fieldRange payload.t > now"));
    let request = tool(json!({"t": "2026-12-01T10:30:00Z"}));
    assert_allow(&decide(&engine, &request));
    let later = with(request, "time", json!("2026-12-01T11:00:00Z"));
    assert_deny(&decide(&engine, &later), ReasonKind::FieldRange);
}

#[test]
fn request_time_is_ignored_by_a_live_engine() {
    // A skill must not be able to claim business hours.
    let policy = load(&tool_skill(
        "wallClockWindow from 2000-01-01T00:00:00Z until 2000-01-02T00:00:00Z",
    ));
    let live = Engine::builder(policy).build();
    let request = with(tool(json!({})), "time", json!("2000-01-01T12:00:00Z"));
    assert_deny(&decide(&live, &request), ReasonKind::WallClockWindow);
}

fn range_verdict(bound: &str, op: &str, value: &str) -> Verdict {
    let payload: Value = serde_json::from_str(&format!(r#"{{"n": {value}}}"#)).unwrap();
    verdict(&format!("fieldRange payload.n {op} {bound}"), payload)
}

#[test]
fn range_at_integer_edges_is_exact() {
    // 2^53 + 1 against the bound 2^53: strictly greater, which f64 could not tell.
    assert_eq!(
        range_verdict("9007199254740992", "<=", "9007199254740993"),
        Verdict::Deny
    );
    assert_eq!(
        range_verdict("9007199254740993", "<=", "9007199254740993"),
        Verdict::Allow
    );
    assert_eq!(
        range_verdict("9007199254740993", "<", "9007199254740993"),
        Verdict::Deny
    );
    assert_eq!(
        range_verdict("9007199254740992.0", "<=", "9007199254740993"),
        Verdict::Deny
    );
    // u64::MAX against i64::MAX and back.
    assert_eq!(
        range_verdict("9223372036854775807", "<=", "18446744073709551615"),
        Verdict::Deny
    );
    assert_eq!(
        range_verdict("18446744073709551615", "<=", "18446744073709551615"),
        Verdict::Allow
    );
    assert_eq!(
        range_verdict("-9223372036854775808", ">=", "-9223372036854775808"),
        Verdict::Allow
    );
    assert_eq!(
        range_verdict("-9223372036854775808", ">", "-9223372036854775808"),
        Verdict::Deny
    );
    // Integer forms against float forms.
    assert_eq!(range_verdict("10", "<=", "10.0"), Verdict::Allow);
    assert_eq!(range_verdict("10.0", "<", "10"), Verdict::Deny);
    assert_eq!(range_verdict("10.5", ">", "10"), Verdict::Deny);
    assert_eq!(range_verdict("10.5", "<", "10"), Verdict::Allow);
    assert_eq!(range_verdict("1e3", ">=", "1000"), Verdict::Allow);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `fieldRange payload.n OP B` for a value equal to, just above and just below B, as
    /// integer and as float when the float is exact.
    #[test]
    fn range_bounds_hold_exactly_at_and_around_the_bound(bound in -1_000_000i64..1_000_000) {
        let engine_le = engine(&tool_skill(&format!("fieldRange payload.n <= {bound}")));
        let engine_lt = engine(&tool_skill(&format!("fieldRange payload.n < {bound}")));
        let engine_ge = engine(&tool_skill(&format!("fieldRange payload.n >= {bound}")));
        let engine_gt = engine(&tool_skill(&format!("fieldRange payload.n > {bound}")));
        for (text, cmp) in [
            (format!("{bound}"), 0),
            (format!("{bound}.0"), 0),
            (format!("{}", bound + 1), 1),
            (format!("{bound}.5"), if bound < 0 { -1 } else { 1 }),
            (format!("{}", bound - 1), -1),
            (format!("{}.0", bound - 1), -1),
        ] {
            let payload: Value = serde_json::from_str(&format!(r#"{{"n": {text}}}"#)).unwrap();
            let allowed = |e: &Engine| decide(e, &tool(payload.clone())).verdict == Verdict::Allow;
            prop_assert_eq!(allowed(&engine_le), cmp <= 0, "{} <= {}", text, bound);
            prop_assert_eq!(allowed(&engine_lt), cmp < 0, "{} < {}", text, bound);
            prop_assert_eq!(allowed(&engine_ge), cmp >= 0, "{} >= {}", text, bound);
            prop_assert_eq!(allowed(&engine_gt), cmp > 0, "{} > {}", text, bound);
        }
    }

    /// Integers near the u64/i64 edges compare exactly against integer bounds.
    #[test]
    fn range_bounds_are_exact_for_large_integers(offset in 0u64..4, delta in 0u64..4) {
        let bound = u64::MAX - 3 + offset;
        let value = u64::MAX - 3 + delta;
        let engine = engine(&tool_skill(&format!("fieldRange payload.n <= {bound}")));
        let payload: Value = serde_json::from_str(&format!(r#"{{"n": {value}}}"#)).unwrap();
        let allowed = decide(&engine, &tool(payload)).verdict == Verdict::Allow;
        prop_assert_eq!(allowed, value <= bound);
    }

    /// `1 == 1.0` and `"1" != 1` for any integer that floats represent exactly.
    #[test]
    fn equality_crosses_number_forms_but_not_strings(n in -(1i64 << 53)..(1i64 << 53)) {
        let engine = engine(&tool_skill(&format!("fieldEquals payload.n == {n}")));
        let float: Value = serde_json::from_str(&format!(r#"{{"n": {n}.0}}"#)).unwrap();
        prop_assert_eq!(decide(&engine, &tool(float)).verdict, Verdict::Allow);
        prop_assert_eq!(decide(&engine, &tool(json!({"n": n.to_string()}))).verdict, Verdict::Deny);
        prop_assert_eq!(decide(&engine, &tool(json!({"n": n + 1}))).verdict, Verdict::Deny);
    }
}

// ------------------------------------------------------------------------------------------------
// §2.4 wallClockWindow
// ------------------------------------------------------------------------------------------------

fn window_verdict(window: &str, now: &str) -> Verdict {
    let engine = engine(&tool_skill(&format!("wallClockWindow {window}")));
    decide(&engine, &with(tool(json!({})), "time", json!(now))).verdict
}

#[test]
fn window_is_half_open_at_its_edges() {
    let w = r#"mon-fri 09:00-17:00 "America/New_York""#;
    // 2026-12-01 is a Tuesday; New York is UTC-5 in December.
    assert_eq!(window_verdict(w, "2026-12-01T13:59:59.999Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-12-01T14:00:00Z"), Verdict::Allow);
    assert_eq!(
        window_verdict(w, "2026-12-01T21:59:59.999Z"),
        Verdict::Allow
    );
    assert_eq!(window_verdict(w, "2026-12-01T22:00:00Z"), Verdict::Deny);
    // Saturday.
    assert_eq!(window_verdict(w, "2026-12-05T15:00:00Z"), Verdict::Deny);
}

#[test]
fn window_default_zone_is_utc() {
    let w = "daily 09:00-17:00";
    assert_eq!(window_verdict(w, "2026-12-01T09:00:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-12-01T08:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-12-01T17:00:00Z"), Verdict::Deny);
    // The instant is converted: 09:00+02:00 is 07:00 UTC.
    assert_eq!(
        window_verdict(w, "2026-12-01T09:00:00+02:00"),
        Verdict::Deny
    );
}

#[test]
fn window_follows_local_wall_time_across_dst() {
    let w = r#"mon-fri 09:00-17:00 "America/New_York""#;
    // Friday 2026-03-06, EST (UTC-5): 09:00 local is 14:00Z.
    assert_eq!(window_verdict(w, "2026-03-06T13:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-03-06T14:00:00Z"), Verdict::Allow);
    // Monday 2026-03-09, EDT (UTC-4) after the spring-forward: 09:00 local is 13:00Z.
    assert_eq!(window_verdict(w, "2026-03-09T12:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-03-09T13:00:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-03-09T20:59:59Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-03-09T21:00:00Z"), Verdict::Deny);
}

#[test]
fn window_in_the_repeated_fall_back_hour_covers_both_occurrences() {
    // 2026-11-01 (Sunday) New York: 01:00-02:00 happens twice, at 05:00Z (EDT) and 06:00Z (EST).
    let w = r#"sun 01:00-02:00 "America/New_York""#;
    assert_eq!(window_verdict(w, "2026-11-01T04:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-11-01T05:00:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-11-01T06:30:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-11-01T07:00:00Z"), Verdict::Deny);
}

#[test]
fn window_in_the_skipped_spring_forward_hour_never_holds() {
    // 2026-03-08 (Sunday) New York: 02:00-03:00 does not exist.
    let w = r#"sun 02:00-03:00 "America/New_York""#;
    assert_eq!(window_verdict(w, "2026-03-08T06:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-03-08T07:00:00Z"), Verdict::Deny);
}

#[test]
fn window_crossing_midnight_belongs_to_the_day_it_starts() {
    let w = "fri 22:00-06:00";
    // 2026-12-04 is a Friday.
    assert_eq!(window_verdict(w, "2026-12-04T21:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-12-04T22:00:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-12-05T05:59:59Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-12-05T06:00:00Z"), Verdict::Deny);
    // Saturday 22:00 is not covered, nor Friday early morning.
    assert_eq!(window_verdict(w, "2026-12-05T23:00:00Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-12-04T01:00:00Z"), Verdict::Deny);
}

#[test]
fn window_whole_day_and_wrapping_day_range() {
    assert_eq!(
        window_verdict("sat 00:00-24:00", "2026-12-05T23:59:59.999Z"),
        Verdict::Allow
    );
    assert_eq!(
        window_verdict("sat 00:00-24:00", "2026-12-06T00:00:00Z"),
        Verdict::Deny
    );
    // fri-mon covers fri, sat, sun, mon — not tue.
    assert_eq!(
        window_verdict("fri-mon 00:00-24:00", "2026-12-07T12:00:00Z"),
        Verdict::Allow
    );
    assert_eq!(
        window_verdict("fri-mon 00:00-24:00", "2026-12-01T12:00:00Z"),
        Verdict::Deny
    );
}

#[test]
fn window_list_holds_in_any_of_its_windows() {
    let w = "mon 09:00-10:00, tue 14:00-15:00";
    assert_eq!(window_verdict(w, "2026-12-01T14:30:00Z"), Verdict::Allow);
    assert_eq!(window_verdict(w, "2026-12-01T09:30:00Z"), Verdict::Deny);
}

#[test]
fn absolute_window_is_half_open() {
    let w = "from 2026-12-01T00:00:00Z until 2026-12-02T00:00:00Z";
    assert_eq!(window_verdict(w, "2026-11-30T23:59:59Z"), Verdict::Deny);
    assert_eq!(window_verdict(w, "2026-12-01T00:00:00Z"), Verdict::Allow);
    assert_eq!(
        window_verdict(w, "2026-12-01T23:59:59.999Z"),
        Verdict::Allow
    );
    assert_eq!(window_verdict(w, "2026-12-02T00:00:00Z"), Verdict::Deny);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A daily UTC window `[start, end)` holds exactly for minutes in it.
    #[test]
    fn daily_utc_window_holds_exactly_inside(start in 0u32..1439, len in 1u32..600, probe in 0u32..1440) {
        let end = (start + len).min(1440);
        let w = format!("daily {:02}:{:02}-{:02}:{:02}", start / 60, start % 60, end / 60, end % 60);
        let engine = engine(&tool_skill(&format!("wallClockWindow {w}")));
        let now = at("2026-12-01T00:00:00Z") + Duration::minutes(i64::from(probe));
        let request = with(tool(json!({})), "time", json!(now.to_rfc3339()));
        let allowed = decide(&engine, &request).verdict == Verdict::Allow;
        prop_assert_eq!(allowed, probe >= start && probe < end, "{} at minute {}", w, probe);
    }
}

// ------------------------------------------------------------------------------------------------
// §2.4 actorBinding
// ------------------------------------------------------------------------------------------------

#[test]
fn actor_binding_compares_each_path_with_the_agent_field() {
    let engine = engine(&tool_skill(
        "actorBinding payload.organizer.email, payload.owner == agent.email",
    ));
    let agent = json!({"id": "a", "email": "bot@example.com"});
    let ok = with(
        tool(json!({"organizer": {"email": "bot@example.com"}, "owner": "bot@example.com"})),
        "agent",
        agent.clone(),
    );
    assert_allow(&decide(&engine, &ok));
    let bad = with(
        tool(json!({"organizer": {"email": "bot@example.com"}, "owner": "x@example.com"})),
        "agent",
        agent.clone(),
    );
    let decision = decide(&engine, &bad);
    assert_deny(&decision, ReasonKind::ActorBinding);
    assert_eq!(decision.reasons[0].path.as_deref(), Some("payload.owner"));
    let missing_path = with(
        tool(json!({"organizer": {"email": "bot@example.com"}})),
        "agent",
        agent,
    );
    assert_deny(&decide(&engine, &missing_path), ReasonKind::ActorBinding);
}

#[test]
fn actor_binding_without_the_agent_field_is_denied_even_when_optional() {
    let engine = engine(&tool_skill(
        "optional actorBinding payload.owner == agent.email",
    ));
    let request = with(tool(json!({"owner": "x"})), "agent", json!({"id": "a"}));
    assert_deny(&decide(&engine, &request), ReasonKind::ActorBinding);
    let request = tool(json!({}));
    assert_deny(&decide(&engine, &request), ReasonKind::ActorBinding);
    // With the agent field and without the payload path, `optional` holds.
    let request = with(tool(json!({})), "agent", json!({"email": "x"}));
    assert_allow(&decide(&engine, &request));
}

#[test]
fn actor_binding_default_identity_is_agent_id_in_json_manifests() {
    let manifest = r#"{
      "skill": {"name": "s", "version": "1"},
      "capabilities": [{
        "name": "c", "resource": "tool:t", "operations": ["call"],
        "lifetime": {"kind": "process"}, "justification": "j",
        "constraints": [{"type": "actorBinding", "fields": ["payload.owner"]}]
      }]
    }"#;
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("m.json", manifest.to_owned(), PolicyFormat::Json, None);
    let engine = Engine::builder(loader.finish().unwrap()).build();
    let request = with(tool(json!({"owner": "a-7"})), "agent", json!({"id": "a-7"}));
    assert_allow(&decide(&engine, &request));
    let request = with(tool(json!({"owner": "a-8"})), "agent", json!({"id": "a-7"}));
    assert_deny(&decide(&engine, &request), ReasonKind::ActorBinding);
}

// ------------------------------------------------------------------------------------------------
// §2.4 payloadSchema (through the engine; conformance lives in schema_conformance.rs)
// ------------------------------------------------------------------------------------------------

#[test]
fn payload_schema_failure_is_a_payload_schema_reason() {
    let c = r#"payloadSchema { "type": "object", "required": ["a"], "properties": { "a": { "type": "integer" }, "r": false } }"#;
    holds(c, json!({"a": 1}));
    holds(c, json!({"a": 1.0}));
    fails(c, json!({"a": "1"}), ReasonKind::PayloadSchema);
    fails(c, json!({}), ReasonKind::PayloadSchema);
    fails(c, json!({"a": 1, "r": 0}), ReasonKind::PayloadSchema);
}

#[test]
fn unknown_schema_keyword_is_a_compile_error_naming_it() {
    let e = load_error(&tool_skill(
        r#"payloadSchema { "type": "object", "unknownKeyword": 1 }"#,
    ));
    assert!(e.contains("unknownKeyword"), "{e}");
}

// ------------------------------------------------------------------------------------------------
// §5.1 step 5: approval gating
// ------------------------------------------------------------------------------------------------

fn gated(skill_header: &str, capability_header: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  {skill_header}
  capability "c" {{
    resource tool "t"
    operations call
    lifetime process justification "test"
    {capability_header}
    fieldEquals payload.ok == true
  }}
}}"#
    )
}

fn autonomy(engine: &Engine, score: Option<Value>) -> Decision {
    let mut request = tool(json!({"ok": true}));
    if let Some(score) = score {
        request = with(request, "autonomy", score);
    }
    decide(engine, &request)
}

#[test]
fn risk_labels_map_to_minimum_autonomy() {
    for (label, score) in [("low", 60), ("medium", 70), ("high", 80), ("critical", 90)] {
        let engine = engine(&gated(&format!("risk {label}"), ""));
        let below = autonomy(&engine, Some(json!(score - 1)));
        assert_approval(&below, ReasonKind::Risk);
        assert_eq!(below.capability.as_deref(), Some("c"));
        assert_allow(&autonomy(&engine, Some(json!(score))));
        assert_allow(&autonomy(&engine, Some(json!(100))));
    }
}

#[test]
fn risk_none_and_absent_need_no_autonomy() {
    assert_allow(&autonomy(&engine(&gated("risk none", "")), None));
    assert_allow(&autonomy(&engine(&gated("", "")), None));
}

#[test]
fn absent_autonomy_counts_as_zero() {
    let engine = engine(&gated("risk 1", ""));
    assert_approval(&autonomy(&engine, None), ReasonKind::Risk);
    assert_allow(&autonomy(&engine, Some(json!(1))));
    let engine = engine_numeric_zero();
    assert_allow(&autonomy(&engine, None));
}

fn engine_numeric_zero() -> Engine {
    engine(&gated("risk 0", ""))
}

#[test]
fn numeric_risk_is_the_required_score() {
    let engine = engine(&gated("risk 55", ""));
    assert_approval(&autonomy(&engine, Some(json!(54))), ReasonKind::Risk);
    assert_allow(&autonomy(&engine, Some(json!(55))));
    assert_allow(&autonomy(&engine, Some(json!(55.0))));
    let engine = engine_100();
    assert_approval(&autonomy(&engine, Some(json!(99))), ReasonKind::Risk);
    assert_allow(&autonomy(&engine, Some(json!(100))));
}

fn engine_100() -> Engine {
    engine(&gated("risk 100", ""))
}

#[test]
fn capability_risk_overrides_the_skill_risk_both_ways() {
    let engine = engine(&gated("risk critical", "risk low"));
    assert_allow(&autonomy(&engine, Some(json!(60))));
    assert_approval(&autonomy(&engine, Some(json!(59))), ReasonKind::Risk);
    let engine = engine_override_up();
    assert_approval(&autonomy(&engine, Some(json!(89))), ReasonKind::Risk);
}

fn engine_override_up() -> Engine {
    engine(&gated("risk low", "risk critical"))
}

#[test]
fn risk_out_of_range_is_a_compile_error() {
    let e = load_error(&gated("risk 101", ""));
    assert!(e.contains("bad.cap:3:"), "{e}");
    load_error(&gated("risk -1", ""));
    load_error(&gated("risk extreme", ""));
}

#[test]
fn gating_applies_only_to_a_candidate_that_holds() {
    let engine = engine(&gated("risk critical", ""));
    let request = with(tool(json!({"ok": false})), "autonomy", json!(0));
    assert_deny(&decide(&engine, &request), ReasonKind::FieldEquals);
}

#[test]
fn elevated_sensitivity_needs_a_recorded_approval() {
    let (engine, _clock) = stateful(&gated("sensitivity elevated", ""));
    assert_approval(&autonomy(&engine, None), ReasonKind::Sensitivity);
    engine.approve("s").unwrap();
    assert_allow(&autonomy(&engine, None));
}

#[test]
fn elevated_capability_override_and_normal_override() {
    let (engine, _clock) = stateful(&gated("", "sensitivity elevated"));
    assert_approval(&autonomy(&engine, None), ReasonKind::Sensitivity);
    let (engine, _clock) = stateful(&gated("sensitivity elevated", "sensitivity normal"));
    assert_allow(&autonomy(&engine, None));
}

#[test]
fn elevated_is_always_approval_required_on_a_stateless_engine() {
    let engine = engine(&gated("sensitivity elevated", ""));
    assert_approval(&autonomy(&engine, None), ReasonKind::Sensitivity);
}

#[test]
fn risk_is_checked_before_sensitivity() {
    let (engine, _clock) = stateful(&gated("risk high\n  sensitivity elevated", ""));
    assert_approval(&autonomy(&engine, Some(json!(10))), ReasonKind::Risk);
    assert_approval(&autonomy(&engine, Some(json!(80))), ReasonKind::Sensitivity);
    engine.approve("s").unwrap();
    assert_allow(&autonomy(&engine, Some(json!(80))));
}

/// A stateful engine whose skill `s` (`skill_header` added) has one capability `c` living for
/// `calls` granted calls under `rateLimit 1 per minute`, with grant `g` issued for it; and a
/// `tool:t` call presenting that grant.
fn granted_once_a_minute(skill_header: &str, calls: u32) -> (Engine, Arc<SimulatedClock>, Value) {
    let cap = format!(
        r#"
skill "s" {{
  version "1"
  {skill_header}
  capability "c" {{
    resource tool "t"
    operations call justification "test"
    lifetime call {calls}
    rateLimit 1 per minute
  }}
}}"#
    );
    let (engine, clock) = stateful(&cap);
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    (engine, clock, with(tool(json!({})), "grant", json!("g")))
}

#[test]
fn approval_required_consumes_nothing() {
    let (engine, _clock, request) = granted_once_a_minute("risk high", 1);
    for _ in 0..3 {
        assert_approval(
            &decide(&engine, &with(request.clone(), "autonomy", json!(50))),
            ReasonKind::Risk,
        );
    }
    assert_allow(&decide(
        &engine,
        &with(request.clone(), "autonomy", json!(80)),
    ));
    assert_deny(
        &decide(&engine, &with(request, "autonomy", json!(80))),
        ReasonKind::Lifetime,
    );
}

#[test]
fn a_full_rate_limit_denies_before_gating() {
    // The read-only rate check is skipped only for ungated process-lifetime calls; a gated call
    // on a full limit must still be denied for the limit, not asked for approval.
    let (engine, _clock) = stateful(&gated("risk high", "rateLimit 1 per minute"));
    let call = |score: i64| {
        decide(
            &engine,
            &with(tool(json!({"ok": true})), "autonomy", json!(score)),
        )
    };
    assert_allow(&call(80));
    assert_deny(&call(50), ReasonKind::RateLimit);
    assert_deny(&call(80), ReasonKind::RateLimit);
}

#[test]
fn a_granted_call_on_a_full_limit_is_denied_for_the_limit() {
    // Grant lifetimes keep the read-only rate check before the commit.
    let (engine, clock, granted) = granted_once_a_minute("", 5);
    assert_allow(&decide(&engine, &granted));
    let decision = decide(&engine, &granted);
    assert_deny(&decision, ReasonKind::RateLimit);
    assert_eq!(kinds(&decision), vec!["rateLimit"]);
    clock.set(at("2026-12-01T10:01:00Z"));
    assert_allow(&decide(&engine, &granted));
}

#[test]
fn an_ungated_process_call_on_a_full_limit_is_denied_by_the_commit_with_the_same_reason() {
    let (engine, _clock) = stateful(&rate_skill("1 per minute"));
    assert_allow(&decide(&engine, &ok_call()));
    let decision = decide(&engine, &ok_call());
    assert_deny(&decision, ReasonKind::RateLimit);
    assert_eq!(kinds(&decision), vec!["rateLimit"]);
    assert_eq!(
        decision.reasons[0].message,
        "rate limit of 1 per 1m reached"
    );
}

#[test]
fn every_rate_limit_of_a_capability_is_charged_whatever_their_number() {
    // The engine holds a call's charges in arrays of 1, 2, 4 or 16 (the most a capability may
    // declare): with the one tight limit at the first, a middle or the last index of each size,
    // the second call is denied by that limit, so the charge at each of those indices was
    // committed by the first.
    for count in [1usize, 2, 3, 4, 5, 15, 16] {
        for tight in [0, count / 2, count - 1] {
            let limits: Vec<String> = (0..count)
                .map(|i| {
                    if i == tight {
                        "1 per minute".to_owned()
                    } else {
                        format!("{} per minute", 100 + i)
                    }
                })
                .collect();
            let (engine, _clock) = stateful(&rate_skill(&limits.join("\n    rateLimit ")));
            assert_allow(&decide(&engine, &ok_call()));
            let decision = decide(&engine, &ok_call());
            assert_deny(&decision, ReasonKind::RateLimit);
            assert_eq!(
                decision.reasons[0].message, "rate limit of 1 per 1m reached",
                "{count} limits, the tight one at {tight}"
            );
        }
    }
}

// ------------------------------------------------------------------------------------------------
// §5.2 lifetimes and grants
// ------------------------------------------------------------------------------------------------

fn lifetime_skill(lifetime: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    lifetime {lifetime}
    justification "needed for the test"
    fieldEquals payload.ok == true
  }}
  capability "d" {{
    resource tool "u"
    operations call
    lifetime process justification "test"
  }}
}}"#
    )
}

fn granted(token: &str) -> Value {
    with(tool(json!({"ok": true})), "grant", json!(token))
}

#[test]
fn call_grant_is_good_for_exactly_n_allowed_calls() {
    let (engine, _clock) = stateful(&lifetime_skill("call 3"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    for _ in 0..3 {
        let decision = decide(&engine, &granted("g"));
        assert_allow(&decision);
        assert_eq!(decision.grant.as_deref(), Some("g"));
    }
    let decision = decide(&engine, &granted("g"));
    assert_deny(&decision, ReasonKind::Lifetime);
    assert_eq!(kinds(&decision), vec!["lifetime"]);
}

#[test]
fn call_lifetime_defaults_to_one_call() {
    let (engine, _clock) = stateful(&lifetime_skill("call"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("g")));
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Lifetime);
    // The default lifetime (none written) is `call 1` too.
    let cap = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "test" } }"#;
    let (engine, _clock) = stateful(cap);
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert_allow(&decide(
        &engine,
        &with(tool(json!({})), "grant", json!("g")),
    ));
    assert_deny(
        &decide(&engine, &with(tool(json!({})), "grant", json!("g"))),
        ReasonKind::Lifetime,
    );
}

#[test]
fn denied_calls_do_not_use_up_a_call_grant() {
    let (engine, _clock) = stateful(&lifetime_skill("call 1"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    for _ in 0..5 {
        let bad = with(tool(json!({"ok": false})), "grant", json!("g"));
        assert_deny(&decide(&engine, &bad), ReasonKind::FieldEquals);
    }
    assert_allow(&decide(&engine, &granted("g")));
}

#[test]
fn grant_is_required_for_call_and_wall_clock_lifetimes() {
    for lifetime in ["call 1", "wallClock 10m"] {
        let (engine, _clock) = stateful(&lifetime_skill(lifetime));
        let decision = decide(&engine, &tool(json!({"ok": true})));
        assert_deny(&decision, ReasonKind::Grant);
        assert_deny(&decide(&engine, &granted("nope")), ReasonKind::Grant);
    }
}

#[test]
fn grant_for_another_capability_is_refused() {
    let cap = r#"
skill "s" {
  version "1"
  capability "c" { resource tool "t" operations call justification "test" lifetime call 5 }
  capability "e" { resource tool "t" operations call justification "test" lifetime call 5 }
}"#;
    let (engine, _clock) = stateful(cap);
    engine
        .issue_grant("s", "e", None, Some("ge".into()))
        .unwrap();
    // Capability `c` refuses `ge`; `e` (next in order) accepts it.
    let decision = decide(&engine, &with(tool(json!({})), "grant", json!("ge")));
    assert_allow(&decision);
    assert_eq!(decision.capability.as_deref(), Some("e"));
}

#[test]
fn stateless_engine_does_not_apply_grants() {
    let engine = engine(&lifetime_skill("call 1"));
    assert_allow(&decide(&engine, &tool(json!({"ok": true}))));
    assert_allow(&decide(&engine, &tool(json!({"ok": true}))));
}

#[test]
fn wall_clock_grant_expires_at_exactly_issue_plus_duration() {
    let (engine, clock) = stateful(&lifetime_skill("wallClock 10m"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    // Many uses before expiry.
    assert_allow(&decide(&engine, &granted("g")));
    clock.set(at("2026-12-01T10:09:59.999Z"));
    assert_allow(&decide(&engine, &granted("g")));
    clock.set(at("2026-12-01T10:10:00Z"));
    let decision = decide(&engine, &granted("g"));
    assert_deny(&decision, ReasonKind::Lifetime);
    assert_eq!(kinds(&decision), vec!["lifetime"]);
}

#[test]
fn wall_clock_grant_expiry_uses_the_request_time_on_a_simulated_clock() {
    let (engine, _clock) = stateful(&lifetime_skill("wallClock 10m"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    let request = with(granted("g"), "time", json!("2026-12-01T10:09:59Z"));
    assert_allow(&decide(&engine, &request));
    let request = with(granted("g"), "time", json!("2026-12-01T10:10:00Z"));
    assert_deny(&decide(&engine, &request), ReasonKind::Lifetime);
}

#[test]
fn renewable_wall_clock_grant_is_renewed_on_use_from_now() {
    let (engine, clock) = stateful(&lifetime_skill("wallClock 10m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    clock.set(at("2026-12-01T10:15:00Z"));
    assert_allow(&decide(&engine, &granted("g")));
    // Renewed to 10:25: still good just before, renewed again at/after.
    clock.set(at("2026-12-01T10:24:59Z"));
    assert_allow(&decide(&engine, &granted("g")));
}

#[test]
fn renewable_grant_is_not_renewed_once_its_capability_is_revoked() {
    let (engine, clock) = stateful(&lifetime_skill("wallClock 10m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.revoke_capability("s", "c").unwrap();
    clock.set(at("2026-12-01T10:15:00Z"));
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Grant);
}

#[test]
fn renewable_grant_is_not_renewed_once_its_capability_is_removed() {
    let (engine, clock) = stateful(&lifetime_skill("wallClock 10m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(load(
        r#"skill "s" { version "2" capability "d" { resource tool "u" operations call lifetime process justification "test" } }"#,
    ));
    clock.set(at("2026-12-01T10:15:00Z"));
    let decision = decide(&engine, &granted("g"));
    assert_deny(&decision, ReasonKind::Resource);
}

#[test]
fn regression_reload_to_non_renewable_does_not_renew_an_old_grant() {
    // Bug: the engine renewed an expired grant that was issued renewable even when the
    // current capability is no longer renewable, widening it past the new policy.
    let (engine, clock) = stateful(&lifetime_skill("wallClock 10m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(load(&lifetime_skill("wallClock 10m")));
    clock.set(at("2026-12-01T10:15:00Z"));
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Lifetime);
}

#[test]
fn regression_an_expired_grant_is_reported_before_a_full_rate_limit() {
    // Bug: a grant issued renewable, expired, under a capability reloaded as not renewable, was
    // refused only by the commit, after the read-only rate check: with the rate limit full as
    // well the deny said `rateLimit`, although SPEC §5.1 checks the grant before rate limits.
    let limited = |lifetime: &str| lifetime_skill(&format!("{lifetime}\n    rateLimit 1 per 1h"));
    let (engine, clock) = stateful(&limited("wallClock 10m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    // Takes the rate limit's one slot for the hour.
    assert_allow(&decide(&engine, &granted("g")));
    engine.reload(load(&limited("wallClock 10m")));
    clock.set(at("2026-12-01T10:15:00Z"));
    let decision = decide(&engine, &granted("g"));
    assert_deny(&decision, ReasonKind::Lifetime);
    assert_eq!(kinds(&decision), vec!["lifetime"]);
}

#[test]
fn process_lifetime_needs_no_grant() {
    let (engine, _clock) = stateful(&lifetime_skill("process"));
    for _ in 0..5 {
        assert_allow(&decide(&engine, &tool(json!({"ok": true}))));
    }
}

#[test]
fn transaction_lifetime_needs_an_open_named_transaction() {
    let (engine, _clock) = stateful(&lifetime_skill("transaction"));
    let in_tx = |tx: &str| with(tool(json!({"ok": true})), "transaction", json!(tx));
    // No transaction named.
    assert_deny(
        &decide(&engine, &tool(json!({"ok": true}))),
        ReasonKind::Lifetime,
    );
    // Never begun.
    assert_deny(&decide(&engine, &in_tx("tx")), ReasonKind::Lifetime);
    engine.begin_transaction("tx").unwrap();
    assert_allow(&decide(&engine, &in_tx("tx")));
    assert_allow(&decide(&engine, &in_tx("tx")));
    assert_deny(&decide(&engine, &in_tx("other")), ReasonKind::Lifetime);
    engine.end_transaction("tx").unwrap();
    let decision = decide(&engine, &in_tx("tx"));
    assert_deny(&decision, ReasonKind::Lifetime);
    assert_eq!(kinds(&decision), vec!["lifetime"]);
}

#[test]
fn ending_a_transaction_ends_its_grants() {
    let (engine, _clock) = stateful(&lifetime_skill("call 5"));
    engine.begin_transaction("tx").unwrap();
    engine
        .issue_grant("s", "c", Some("tx"), Some("g".into()))
        .unwrap();
    let request = with(granted("g"), "transaction", json!("tx"));
    assert_allow(&decide(&engine, &request));
    // Bound to the transaction: a call outside it is refused.
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Grant);
    engine.end_transaction("tx").unwrap();
    assert_deny(&decide(&engine, &request), ReasonKind::Lifetime);
    // Reopening the transaction does not revive the grant.
    engine.begin_transaction("tx").unwrap();
    assert_deny(&decide(&engine, &request), ReasonKind::Lifetime);
}

#[test]
fn ending_a_transaction_ends_its_wall_clock_grants() {
    let (engine, _clock) = stateful(&lifetime_skill("wallClock 1h"));
    engine.begin_transaction("tx").unwrap();
    engine
        .issue_grant("s", "c", Some("tx"), Some("g".into()))
        .unwrap();
    let request = with(granted("g"), "transaction", json!("tx"));
    assert_allow(&decide(&engine, &request));
    engine.end_transaction("tx").unwrap();
    assert_deny(&decide(&engine, &request), ReasonKind::Lifetime);
}

#[test]
fn grant_for_an_unknown_skill_or_capability_is_an_error() {
    let (engine, _clock) = stateful(&lifetime_skill("call 1"));
    assert!(engine.issue_grant("x", "c", None, None).is_err());
    assert!(engine.issue_grant("s", "x", None, None).is_err());
    assert!(
        engine
            .issue_grant("s", "c", Some("not-open"), None)
            .is_err()
    );
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert!(
        engine
            .issue_grant("s", "c", None, Some("g".into()))
            .is_err(),
        "a token is never reissued"
    );
}

// ------------------------------------------------------------------------------------------------
// §5.2 revocation
// ------------------------------------------------------------------------------------------------

#[test]
fn revoked_grant_is_refused_with_grant() {
    let (engine, _clock) = stateful(&lifetime_skill("call 5"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("g")));
    engine.revoke_grant("g").unwrap();
    let decision = decide(&engine, &granted("g"));
    assert_deny(&decision, ReasonKind::Grant);
    assert_eq!(kinds(&decision), vec!["grant"]);
    // Another grant for the same capability still works.
    engine
        .issue_grant("s", "c", None, Some("h".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("h")));
}

#[test]
fn revoked_skill_refuses_every_lifetime() {
    for lifetime in ["process", "transaction", "call 5", "wallClock 1h renewable"] {
        let (engine, _clock) = stateful(&lifetime_skill(lifetime));
        engine.begin_transaction("tx").unwrap();
        engine
            .issue_grant("s", "c", Some("tx"), Some("g".into()))
            .unwrap();
        let request = with(granted("g"), "transaction", json!("tx"));
        assert_allow(&decide(&engine, &request));
        engine.revoke_skill("s").unwrap();
        let decision = decide(&engine, &request);
        assert_deny(&decision, ReasonKind::Grant);
        assert_eq!(kinds(&decision), vec!["grant"], "{lifetime}");
        // Its other capabilities too.
        let other = req("call", "tool:u", json!({}));
        assert_deny(&decide(&engine, &other), ReasonKind::Grant);
        // And later grants.
        assert!(
            engine.issue_grant("s", "c", None, None).is_err(),
            "{lifetime}"
        );
    }
}

#[test]
fn revoked_capability_refuses_only_that_capability() {
    for lifetime in ["process", "transaction", "call 5", "wallClock 1h"] {
        let (engine, _clock) = stateful(&lifetime_skill(lifetime));
        engine.begin_transaction("tx").unwrap();
        engine
            .issue_grant("s", "c", Some("tx"), Some("g".into()))
            .unwrap();
        let request = with(granted("g"), "transaction", json!("tx"));
        engine.revoke_capability("s", "c").unwrap();
        assert_deny(&decide(&engine, &request), ReasonKind::Grant);
        assert_allow(&decide(&engine, &req("call", "tool:u", json!({}))));
        assert!(
            engine.issue_grant("s", "c", None, None).is_err(),
            "{lifetime}"
        );
    }
}

#[test]
fn revocation_survives_a_reload_and_is_lifted_only_explicitly() {
    let (engine, _clock) = stateful(&lifetime_skill("process"));
    engine.revoke_skill("s").unwrap();
    engine.reload(load(&lifetime_skill("process")));
    let request = tool(json!({"ok": true}));
    assert_deny(&decide(&engine, &request), ReasonKind::Grant);
    assert!(engine.lift_skill("s").unwrap());
    assert_allow(&decide(&engine, &request));

    engine.revoke_capability("s", "c").unwrap();
    engine.reload(load(&lifetime_skill("process")));
    assert_deny(&decide(&engine, &request), ReasonKind::Grant);
    assert!(engine.lift_capability("s", "c").unwrap());
    assert_allow(&decide(&engine, &request));
}

#[test]
fn grants_revoked_with_their_skill_stay_revoked_after_lifting() {
    let (engine, _clock) = stateful(&lifetime_skill("call 5"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.revoke_skill("s").unwrap();
    engine.lift_skill("s").unwrap();
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Grant);
    engine
        .issue_grant("s", "c", None, Some("h".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("h")));
}

// ------------------------------------------------------------------------------------------------
// §5.3 rate limits
// ------------------------------------------------------------------------------------------------

fn rate_skill(limit: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    lifetime process justification "test"
    fieldEquals payload.ok == true
    rateLimit {limit}
  }}
}}"#
    )
}

fn ok_call() -> Value {
    tool(json!({"ok": true}))
}

#[test]
fn sliding_window_frees_a_slot_at_exactly_t_after_the_call() {
    let (engine, clock) = stateful(&rate_skill("1 per 10s"));
    assert_allow(&decide(&engine, &ok_call()));
    clock.set(at("2026-12-01T10:00:09.999Z"));
    let decision = decide(&engine, &ok_call());
    assert_deny(&decision, ReasonKind::RateLimit);
    assert_eq!(kinds(&decision), vec!["rateLimit"]);
    // (now − T, now] excludes the call made at exactly now − T.
    clock.set(at("2026-12-01T10:00:10Z"));
    assert_allow(&decide(&engine, &ok_call()));
}

#[test]
fn sliding_window_counts_only_allowed_calls() {
    let (engine, clock) = stateful(&rate_skill("2 per minute"));
    assert_allow(&decide(&engine, &ok_call()));
    // Denied by a constraint: consumes nothing.
    for _ in 0..3 {
        assert_deny(
            &decide(&engine, &tool(json!({"ok": false}))),
            ReasonKind::FieldEquals,
        );
    }
    clock.set(at("2026-12-01T10:00:30Z"));
    assert_allow(&decide(&engine, &ok_call()));
    // Denied by the rate limit: consumes nothing either.
    for _ in 0..3 {
        assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
    }
    // The first call leaves the window at 10:01:00; the second at 10:01:30.
    clock.set(at("2026-12-01T10:01:00Z"));
    assert_allow(&decide(&engine, &ok_call()));
    assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T10:01:29.999Z"));
    assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T10:01:30Z"));
    assert_allow(&decide(&engine, &ok_call()));
}

#[test]
fn rate_limit_units_and_durations() {
    for (limit, period) in [
        ("1 per second", Duration::seconds(1)),
        ("1 per minute", Duration::minutes(1)),
        ("1 per hour", Duration::hours(1)),
        ("1 per day", Duration::days(1)),
        ("1 per 500ms", Duration::milliseconds(500)),
        ("1 per 2h", Duration::hours(2)),
    ] {
        let (engine, clock) = stateful(&rate_skill(limit));
        assert_allow(&decide(&engine, &ok_call()));
        clock.set(at(T0) + period - Duration::milliseconds(1));
        assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
        clock.set(at(T0) + period);
        assert_allow(&decide(&engine, &ok_call()));
    }
}

#[test]
fn token_bucket_allows_a_burst_then_the_sustained_rate() {
    let (engine, clock) = stateful(&rate_skill("1 per 10s burst 3"));
    for _ in 0..3 {
        assert_allow(&decide(&engine, &ok_call()));
    }
    assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T10:00:09.999Z"));
    assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T10:00:10Z"));
    assert_allow(&decide(&engine, &ok_call()));
    assert_deny(&decide(&engine, &ok_call()), ReasonKind::RateLimit);
}

#[test]
fn rate_limit_by_path_keeps_one_window_per_value() {
    let (engine, _clock) = stateful(&rate_skill("1 per minute by payload.user"));
    let as_user = |u: Value| tool(json!({"ok": true, "user": u}));
    assert_allow(&decide(&engine, &as_user(json!("a"))));
    assert_deny(
        &decide(&engine, &as_user(json!("a"))),
        ReasonKind::RateLimit,
    );
    assert_allow(&decide(&engine, &as_user(json!("b"))));
    // Values are keyed by their JSON form: the number 1 is not the string "1".
    assert_allow(&decide(&engine, &as_user(json!(1))));
    assert_allow(&decide(&engine, &as_user(json!("1"))));
    // A missing `by` path fails the constraint.
    let decision = decide(&engine, &ok_call());
    assert_deny(&decision, ReasonKind::RateLimit);
}

#[test]
fn rate_keys_of_other_limits_capabilities_and_skills_are_apart() {
    // The same `by` value under another limit index, capability or skill is another key: the
    // hash covers the skill, capability and index before the value.
    let cap = r#"
skill "s" {
  version "1"
  capability "a" { resource tool "a" operations call lifetime process justification "t"
    rateLimit 1 per hour by agent.id
    rateLimit 1 per hour burst 1 by agent.id }
  capability "b" { resource tool "b" operations call lifetime process justification "t"
    rateLimit 1 per hour by agent.id }
}
skill "s2" {
  version "1"
  capability "a" { resource tool "a" operations call lifetime process justification "t"
    rateLimit 1 per hour by agent.id }
}"#;
    let (engine, _clock) = stateful(cap);
    let call = |skill: &str, tool: &str| {
        json!({"skill": skill, "operation": "call", "resource": format!("tool:{tool}"),
               "agent": {"id": "x"}, "payload": {}})
    };
    for (skill, tool) in [("s", "a"), ("s", "b"), ("s2", "a")] {
        assert_allow(&decide(&engine, &call(skill, tool)));
        assert_deny(&decide(&engine, &call(skill, tool)), ReasonKind::RateLimit);
    }
}

#[test]
fn replicas_sharing_a_rate_key_secret_share_their_keys() {
    // Engines on one store count a caller under one key only if they hash with the same secret:
    // the secret comes from a file every replica reads, never from the process.
    let cap = rate_skill("1 per hour by payload.user");
    let store = Arc::new(InMemoryStore::new());
    let replica = |secret: &[u8]| {
        Engine::builder(load(&cap))
            .clock(Arc::new(SimulatedClock::new(at(T0))))
            .state(store.clone())
            .rate_key_secret(secret)
            .unwrap()
            .build()
    };
    let (a, b) = (replica(b"0123456789abcdef"), replica(b"0123456789abcdef"));
    let call = tool(json!({"ok": true, "user": "u"}));
    assert_allow(&decide(&a, &call));
    assert_deny(&decide(&b, &call), ReasonKind::RateLimit);
    // Another secret, or none, is another key space.
    assert_allow(&decide(&replica(b"fedcba9876543210"), &call));
    let unkeyed = Engine::builder(load(&cap))
        .clock(Arc::new(SimulatedClock::new(at(T0))))
        .state(store.clone())
        .build();
    assert_allow(&decide(&unkeyed, &call));
    // A secret too short to be one (an empty file, say) is refused.
    let short = Engine::builder(load(&cap)).rate_key_secret(b"short");
    let message = short.unwrap_err().to_string();
    assert!(message.contains("at least 16 bytes"), "{message}");
}

#[test]
fn several_rate_limits_are_consumed_together_or_not_at_all() {
    let cap = r#"
skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    lifetime process justification "test"
    rateLimit 2 per minute
    rateLimit 3 per hour
  }
}"#;
    let (engine, clock) = stateful(cap);
    let call = tool(json!({}));
    assert_allow(&decide(&engine, &call));
    assert_allow(&decide(&engine, &call));
    assert_deny(&decide(&engine, &call), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T10:01:00Z"));
    assert_allow(&decide(&engine, &call));
    // The hourly limit is full now; the per-minute one must not be charged by the refusal.
    assert_deny(&decide(&engine, &call), ReasonKind::RateLimit);
    clock.set(at("2026-12-01T11:00:00Z"));
    assert_allow(&decide(&engine, &call));
    assert_allow(&decide(&engine, &call));
    assert_deny(&decide(&engine, &call), ReasonKind::RateLimit);
}

#[test]
fn rate_limit_is_checked_after_the_grant_and_constraints() {
    let cap = r#"
skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call justification "test"
    lifetime call 10
    fieldEquals payload.ok == true
    rateLimit 1 per minute
  }
}"#;
    let (engine, _clock) = stateful(cap);
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("g")));
    let decision = decide(&engine, &granted("g"));
    assert_eq!(kinds(&decision), vec!["rateLimit"]);
    let decision = decide(
        &engine,
        &with(tool(json!({"ok": false})), "grant", json!("g")),
    );
    assert_eq!(kinds(&decision), vec!["fieldEquals"]);
    let decision = decide(&engine, &granted("missing"));
    assert_eq!(kinds(&decision), vec!["grant"]);
}

#[test]
fn rate_limit_is_not_applied_by_a_stateless_engine() {
    let engine = engine(&rate_skill("1 per minute"));
    assert_allow(&decide(&engine, &ok_call()));
    assert_allow(&decide(&engine, &ok_call()));
}

#[test]
fn sliding_window_above_ten_thousand_is_a_compile_error() {
    let e = load_error(&rate_skill("10001 per minute"));
    assert!(e.contains("burst"), "{e}");
    load(&rate_skill("10000 per minute"));
    load(&rate_skill("10001 per minute burst 5"));
}

#[test]
fn rate_limit_inside_a_combinator_is_a_compile_error() {
    load_error(&tool_skill("any { rateLimit 1 per minute }"));
    load_error(&tool_skill("not { rateLimit 1 per minute }"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// `rateLimit N per T`: against a model that keeps allowed call times and counts those in
    /// `(now − T, now]`, over random call times (often landing exactly on `earlier + T`).
    #[test]
    fn sliding_window_matches_an_exact_model(
        n in 1u64..4,
        steps in proptest::collection::vec(prop_oneof![Just(0i64), Just(1000), Just(9_999), Just(10_000), 1i64..12_000], 1..30),
    ) {
        let (engine, clock) = stateful(&rate_skill(&format!("{n} per 10s")));
        let mut allowed: Vec<i64> = Vec::new();
        let mut now = 0i64;
        for step in steps {
            now += step;
            clock.set(at(T0) + Duration::milliseconds(now));
            let in_window = allowed.iter().filter(|&&t| t > now - 10_000 && t <= now).count();
            let expect = (in_window as u64) < n;
            let got = decide(&engine, &ok_call()).verdict == Verdict::Allow;
            prop_assert_eq!(got, expect, "at {}ms with {:?}", now, allowed);
            if got {
                allowed.push(now);
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// §5.1 observe mode
// ------------------------------------------------------------------------------------------------

#[test]
fn observe_mode_returns_allow_with_the_observed_decision_and_reasons() {
    let (engine, _clock) = observing(&gated("risk high", ""));
    let decision = decide(&engine, &tool(json!({"ok": false})));
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.observed, Some(Verdict::Deny));
    assert_eq!(kinds(&decision), vec!["fieldEquals"]);
    assert_eq!(decision.effective(), Verdict::Deny);

    let decision = decide(&engine, &tool(json!({"ok": true})));
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.observed, Some(Verdict::ApprovalRequired));
    assert_eq!(kinds(&decision), vec!["risk"]);

    let decision = decide(
        &engine,
        &with(tool(json!({"ok": true})), "autonomy", json!(80)),
    );
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.observed, None);
}

#[test]
fn observe_mode_consumes_only_what_an_allow_would() {
    let (engine, _clock) = observing(&lifetime_skill("call 1"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    // Observed denials consume nothing.
    for _ in 0..3 {
        let decision = decide(
            &engine,
            &with(tool(json!({"ok": false})), "grant", json!("g")),
        );
        assert_eq!(decision.observed, Some(Verdict::Deny));
    }
    let decision = decide(&engine, &granted("g"));
    assert_eq!(decision.observed, None);
    assert_eq!(decision.grant.as_deref(), Some("g"));
    // The grant is used up now: observed `lifetime`.
    let decision = decide(&engine, &granted("g"));
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.observed, Some(Verdict::Deny));
    assert_eq!(kinds(&decision), vec!["lifetime"]);
}

#[test]
fn observe_mode_applies_to_unknown_skills_and_bad_input_too() {
    let (engine, _clock) = observing(&lifetime_skill("process"));
    let decision = decide(&engine, &with(tool(json!({})), "skill", json!("x")));
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.observed, Some(Verdict::Deny));
    assert_eq!(kinds(&decision), vec!["unknownSkill"]);
}

// ------------------------------------------------------------------------------------------------
// §5.2 reload pinning
// ------------------------------------------------------------------------------------------------

fn amount_skill(max: u32, operations: &str, resource: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  capability "pay" {{
    resource http "{resource}"
    operations {operations}
    lifetime call 10
    justification "payments"
    fieldRange payload.amount <= {max}
  }}
}}"#
    )
}

fn pay(operation: &str, resource: &str, amount: u32, grant: &str) -> Value {
    with(
        req(operation, resource, json!({"amount": amount})),
        "grant",
        json!(grant),
    )
}

const PAY: &str = "https://pay.example.com/v1/{account}/charges";
const PAY_ACME: &str = "https://pay.example.com/v1/acme/charges";

#[test]
fn reload_never_widens_a_running_grant_constraint() {
    let (engine, _clock) = stateful(&amount_skill(100, "POST", PAY));
    engine
        .issue_grant("s", "pay", None, Some("old".into()))
        .unwrap();
    engine.reload(load(&amount_skill(1000, "POST", PAY)));
    // The old grant is honoured only under both policies.
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 100, "old")));
    let decision = decide(&engine, &pay("POST", PAY_ACME, 500, "old"));
    assert_deny(&decision, ReasonKind::FieldRange);
    // A grant issued under the new policy gets the new bound.
    engine
        .issue_grant("s", "pay", None, Some("new".into()))
        .unwrap();
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 500, "new")));
}

#[test]
fn reload_narrowing_applies_to_running_grants() {
    let (engine, _clock) = stateful(&amount_skill(1000, "POST", PAY));
    engine
        .issue_grant("s", "pay", None, Some("old".into()))
        .unwrap();
    engine.reload(load(&amount_skill(100, "POST", PAY)));
    assert_deny(
        &decide(&engine, &pay("POST", PAY_ACME, 500, "old")),
        ReasonKind::FieldRange,
    );
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 50, "old")));
}

#[test]
fn regression_reload_never_widens_a_running_grant_operations() {
    // Bug: only the old capability's constraint program was re-checked, not its operations,
    // so a grant issued for POST was honoured for DELETE after a reload added DELETE.
    let (engine, _clock) = stateful(&amount_skill(100, "POST", PAY));
    engine
        .issue_grant("s", "pay", None, Some("old".into()))
        .unwrap();
    engine.reload(load(&amount_skill(100, "POST, DELETE", PAY)));
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 1, "old")));
    let decision = decide(&engine, &pay("DELETE", PAY_ACME, 1, "old"));
    assert_deny(&decision, ReasonKind::Operation);
}

#[test]
fn regression_reload_never_widens_a_running_grant_resource() {
    // Bug: the old capability's resource template was not re-matched, so a grant issued for
    // one account was honoured for every account after a reload widened the template.
    let (engine, _clock) = stateful(&amount_skill(
        100,
        "POST",
        "https://pay.example.com/v1/acme/charges",
    ));
    engine
        .issue_grant("s", "pay", None, Some("old".into()))
        .unwrap();
    engine.reload(load(&amount_skill(100, "POST", PAY)));
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 1, "old")));
    let decision = decide(
        &engine,
        &pay("POST", "https://pay.example.com/v1/other/charges", 1, "old"),
    );
    assert_deny(&decision, ReasonKind::Resource);
}

#[test]
fn regression_reload_checks_old_constraints_against_the_old_template_bindings() {
    // Bug: the old program read template bindings by slot from the *new* template's match. Here
    // the old `resource.a` (slot 0, first segment) read the new `{b}` (slot 0, second segment),
    // so `/v/safe` passed `resource.a == "safe"` although its `a` is `v`.
    let old = r#"skill "s" { version "1" capability "c" {
        resource http "https://x.example.com/{a}/{b}" operations GET lifetime call 10
        fieldEquals resource.a == "safe" } }"#;
    let new = r#"skill "s" { version "2" capability "c" {
        resource http "https://x.example.com/v/{b}" operations GET lifetime call 10 } }"#;
    let (engine, _clock) = stateful(old);
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(load(new));
    let call = |resource: &str| with(req("GET", resource, json!({})), "grant", json!("g"));
    let decision = decide(&engine, &call("https://x.example.com/v/safe"));
    assert_deny(&decision, ReasonKind::FieldEquals);
    // A grant issued under the new policy is not bound by the old constraint.
    engine
        .issue_grant("s", "c", None, Some("h".into()))
        .unwrap();
    let request = with(
        req("GET", "https://x.example.com/v/safe", json!({})),
        "grant",
        json!("h"),
    );
    assert_allow(&decide(&engine, &request));
}

#[test]
fn reload_that_removes_a_capability_invalidates_its_grants() {
    let cap = r#"
skill "s" {
  version "1"
  capability "c" { resource tool "t" operations call justification "test" lifetime call 5 }
  capability "e" { resource tool "t" operations call lifetime call 5 justification "j" fieldEquals payload.x == 1 }
}"#;
    let (engine, _clock) = stateful(cap);
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(load(
        r#"skill "s" { version "2" capability "e" { resource tool "t" operations call justification "test" lifetime call 5 fieldEquals payload.x == 1 } }"#,
    ));
    let decision = decide(&engine, &with(tool(json!({"x": 1})), "grant", json!("g")));
    assert_deny(&decision, ReasonKind::Grant);
}

#[test]
fn reload_that_adds_a_capability_under_the_same_name_does_not_revive_its_grants() {
    let (engine, _clock) = stateful(&amount_skill(100, "POST", PAY));
    engine
        .issue_grant("s", "pay", None, Some("old".into()))
        .unwrap();
    engine.reload(load(&tool_skill("")));
    assert_deny(
        &decide(&engine, &pay("POST", PAY_ACME, 1, "old")),
        ReasonKind::Resource,
    );
    engine.reload(load(&amount_skill(100, "POST", PAY)));
    // The skill is back with the same text, hence the same revision; the grant stays void all
    // the same (SPEC §5.2: a removed capability invalidates it), and new grants work.
    let decision = decide(&engine, &pay("POST", PAY_ACME, 1, "old"));
    assert_deny(&decision, ReasonKind::Grant);
    assert!(
        decision.reasons[0].message.contains("removed"),
        "{decision:?}"
    );
    engine
        .issue_grant("s", "pay", None, Some("new".into()))
        .unwrap();
    assert_allow(&decide(&engine, &pay("POST", PAY_ACME, 1, "new")));
}

/// Regression: a grant refused while a reload had removed its capability was allowed
/// again once a later reload added the capability back. Both a grant presented while the
/// capability was gone and one that was not stay void, under the same and under another
/// revision, and so does the capability's implicit grant in a transaction begun before.
#[test]
fn a_grant_of_a_removed_capability_stays_invalid_after_it_is_re_added() {
    let without_c = r#"skill "s" { version "1" capability "d" {
        resource tool "u" operations call lifetime process justification "test" } }"#;
    for re_added in [lifetime_skill("call 5"), lifetime_skill("call 6")] {
        let (engine, _clock) = stateful(&lifetime_skill("call 5"));
        for token in ["looked-at", "not-looked-at"] {
            engine
                .issue_grant("s", "c", None, Some(token.into()))
                .unwrap();
        }
        assert_allow(&decide(&engine, &granted("looked-at")));
        engine.reload(load(without_c));
        assert_deny(
            &decide(&engine, &granted("looked-at")),
            ReasonKind::Resource,
        );
        engine.reload(load(&re_added));
        for token in ["looked-at", "not-looked-at"] {
            let decision = decide(&engine, &granted(token));
            assert_deny(&decision, ReasonKind::Grant);
            assert_eq!(kinds(&decision), vec!["grant"], "{token}: {decision:?}");
        }
        // A later reload that keeps the capability does not revive them either.
        engine.reload(load(&lifetime_skill("call 7")));
        assert_deny(
            &decide(&engine, &granted("not-looked-at")),
            ReasonKind::Grant,
        );
        engine
            .issue_grant("s", "c", None, Some("fresh".into()))
            .unwrap();
        assert_allow(&decide(&engine, &granted("fresh")));
    }
    // Removing the whole skill withdraws its capabilities too.
    let (engine, _clock) = stateful(&lifetime_skill("call 5"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(load(
        &tool_skill("").replace("skill \"s\"", "skill \"other\""),
    ));
    engine.reload(load(&lifetime_skill("call 5")));
    assert_deny(&decide(&engine, &granted("g")), ReasonKind::Grant);
    // A transaction's implicit grant: the transaction begun before the removal stays refused,
    // one begun after it is not.
    let (engine, _clock) = stateful(&lifetime_skill("transaction"));
    engine.begin_transaction("before").unwrap();
    let in_tx = |tx: &str| with(tool(json!({"ok": true})), "transaction", json!(tx));
    assert_allow(&decide(&engine, &in_tx("before")));
    engine.reload(load(without_c));
    engine.reload(load(&lifetime_skill("transaction")));
    engine.begin_transaction("after").unwrap();
    let decision = decide(&engine, &in_tx("before"));
    assert_deny(&decision, ReasonKind::Grant);
    assert!(
        decision.reasons[0]
            .message
            .contains("before a reload removed"),
        "{decision:?}"
    );
    assert_allow(&decide(&engine, &in_tx("after")));
}

/// An in-memory store that cannot record withdrawals while `failing` is set (a remote store
/// that lost its server).
#[derive(Debug, Default)]
struct ForgetfulStore {
    inner: InMemoryStore,
    failing: std::sync::atomic::AtomicBool,
}

impl capgate::runtime::StateStore for ForgetfulStore {
    fn begin_transaction(&self, transaction: &str) -> Result<(), capgate::runtime::StateError> {
        self.inner.begin_transaction(transaction)
    }
    fn end_transaction(&self, transaction: &str) -> Result<(), capgate::runtime::StateError> {
        self.inner.end_transaction(transaction)
    }
    fn is_transaction_open(&self, transaction: &str) -> bool {
        self.inner.is_transaction_open(transaction)
    }
    fn issue_grant(
        &self,
        grant: capgate::runtime::NewGrant,
    ) -> Result<(), capgate::runtime::StateError> {
        self.inner.issue_grant(grant)
    }
    fn grant_status(
        &self,
        token: &str,
        skill: &str,
        capability: &str,
        transaction: Option<&str>,
        bound: Option<capgate::runtime::LifetimeBound>,
        now: DateTime<Utc>,
    ) -> capgate::runtime::GrantStatus {
        self.inner
            .grant_status(token, skill, capability, transaction, bound, now)
    }
    fn revoke_grant(&self, token: &str) -> Result<(), capgate::runtime::StateError> {
        self.inner.revoke_grant(token)
    }
    fn revoke_skill(&self, skill: &str) -> Result<(), capgate::runtime::StateError> {
        self.inner.revoke_skill(skill)
    }
    fn revoke_capability(
        &self,
        skill: &str,
        capability: &str,
    ) -> Result<(), capgate::runtime::StateError> {
        self.inner.revoke_capability(skill, capability)
    }
    fn lift_skill(&self, skill: &str) -> Result<bool, capgate::runtime::StateError> {
        self.inner.lift_skill(skill)
    }
    fn lift_capability(
        &self,
        skill: &str,
        capability: &str,
    ) -> Result<bool, capgate::runtime::StateError> {
        self.inner.lift_capability(skill, capability)
    }
    fn withdraw_capability(
        &self,
        skill: &str,
        capability: &str,
    ) -> Result<(), capgate::runtime::StateError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(capgate::runtime::StateError::TransactionsExhausted);
        }
        self.inner.withdraw_capability(skill, capability)
    }
    fn is_revoked(&self, skill: &str, capability: &str) -> bool {
        self.inner.is_revoked(skill, capability)
    }
    fn approve(&self, skill: &str) -> Result<(), capgate::runtime::StateError> {
        self.inner.approve(skill)
    }
    fn is_approved(&self, skill: &str) -> bool {
        self.inner.is_approved(skill)
    }
    fn rate_would_allow(
        &self,
        key: &capgate::runtime::RateKey,
        spec: &capgate::runtime::RateSpec,
        now: DateTime<Utc>,
    ) -> bool {
        self.inner.rate_would_allow(key, spec, now)
    }
    fn commit(
        &self,
        commit: &capgate::runtime::Commit<'_>,
        now: DateTime<Utc>,
    ) -> Result<(), capgate::runtime::CommitRefusal> {
        self.inner.commit(commit, now)
    }
}

/// A removal the state store could not record (a remote store that is down) must not let the
/// old grants back in when the capability returns: the engine refuses the capability until the
/// store has recorded the removal, retrying at every reload and call.
#[test]
fn a_removal_the_store_could_not_record_refuses_the_capability_until_it_is_recorded() {
    let store = Arc::new(ForgetfulStore::default());
    let engine = Engine::builder(load(&lifetime_skill("call 5")))
        .clock(Arc::new(SimulatedClock::new(at(T0))))
        .state(store.clone())
        .build();
    engine
        .issue_grant("s", "c", None, Some("old".into()))
        .unwrap();
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    engine.reload(load(
        r#"skill "s" { version "1" capability "d" {
            resource tool "u" operations call lifetime process justification "test" } }"#,
    ));
    engine.reload(load(&lifetime_skill("call 5")));
    let decision = decide(&engine, &granted("old"));
    assert_deny(&decision, ReasonKind::Grant);
    assert!(
        decision.reasons[0].message.contains("not recorded"),
        "{decision:?}"
    );
    // The other capability of the skill was never removed.
    let other = req("call", "tool:u", json!({}));
    assert_allow(&decide(&engine, &other));
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // Recorded on this call: the old grant is void, a new one works.
    assert_deny(&decide(&engine, &granted("old")), ReasonKind::Grant);
    engine
        .issue_grant("s", "c", None, Some("new".into()))
        .unwrap();
    assert_allow(&decide(&engine, &granted("new")));
}

/// One step of [`grants_follow_a_model_of_reloads_that_remove_and_re_add_their_capability`].
#[derive(Debug, Clone)]
enum ReloadOp {
    /// Issue grant `token` for capability `c` (an error while `c` is not loaded).
    Issue(usize),
    /// Reload with `c` (as `version` 1 or 2: two revisions) or without it.
    Reload { with_c: bool, version: u8 },
    /// A call with grant `token`.
    Call(usize),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The engine against a model of §5.2 over reloads: a grant is usable while its capability
    /// is loaded, only if no reload removed the capability since the grant was issued, and for
    /// at most its three calls.
    #[test]
    fn grants_follow_a_model_of_reloads_that_remove_and_re_add_their_capability(
        ops in proptest::collection::vec(prop_oneof![
            2 => (0..3_usize).prop_map(ReloadOp::Issue),
            2 => (any::<bool>(), 1..=2_u8)
                .prop_map(|(with_c, version)| ReloadOp::Reload { with_c, version }),
            4 => (0..3_usize).prop_map(ReloadOp::Call),
        ], 1..40)
    ) {
        let policy = |with_c: bool, version: u8| {
            let c = if with_c {
                "capability \"c\" { resource tool \"t\" operations call lifetime call 3 justification \"j\" }"
            } else {
                ""
            };
            format!(
                "skill \"s\" {{ version \"{version}\" {c} capability \"d\" {{ resource tool \"u\" operations call lifetime process justification \"j\" }} }}"
            )
        };
        let (engine, _clock) = stateful(&policy(true, 1));
        let mut loaded = true;
        // Per token: issued, and then (void, calls used).
        let mut grants: [Option<(bool, u32)>; 3] = [None; 3];
        let mut issued_ever = [false; 3];
        for op in &ops {
            match *op {
                ReloadOp::Issue(token) => {
                    let name = format!("g{token}");
                    let result = engine.issue_grant("s", "c", None, Some(name));
                    let expected_ok = loaded && !issued_ever[token];
                    prop_assert_eq!(result.is_ok(), expected_ok, "{:?}", result);
                    if expected_ok {
                        issued_ever[token] = true;
                        grants[token] = Some((false, 0));
                    }
                }
                ReloadOp::Reload { with_c, version } => {
                    engine.reload(load(&policy(with_c, version)));
                    loaded = with_c;
                    if !with_c {
                        for grant in grants.iter_mut().flatten() {
                            grant.0 = true;
                        }
                    }
                }
                ReloadOp::Call(token) => {
                    let decision = decide(&engine, &with(tool(json!({})), "grant", json!(format!("g{token}"))));
                    let expected = match grants[token] {
                        _ if !loaded => Err("resource"),
                        None => Err("grant"),
                        Some((true, _)) => Err("grant"),
                        Some((false, 3)) => Err("lifetime"),
                        Some((false, _)) => Ok(()),
                    };
                    match expected {
                        Ok(()) => {
                            prop_assert_eq!(decision.verdict, Verdict::Allow, "{:?}", decision);
                            if let Some(grant) = &mut grants[token] {
                                grant.1 += 1;
                            }
                        }
                        Err(kind) => {
                            prop_assert_eq!(decision.verdict, Verdict::Deny, "{:?}", decision);
                            prop_assert_eq!(kinds(&decision), vec![kind], "{:?}", decision);
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn failed_policy_load_keeps_the_running_policy() {
    // `Engine::reload` takes a loaded policy: a policy that fails to load never reaches it.
    let (engine, _clock) = stateful(&lifetime_skill("process"));
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("bad.cap", "skill {".to_owned(), PolicyFormat::Cap, None);
    assert!(loader.finish().is_err());
    assert_allow(&decide(&engine, &tool(json!({"ok": true}))));
}

// ------------------------------------------------------------------------------------------------
// §4 decision wire format
// ------------------------------------------------------------------------------------------------

#[test]
fn decision_serialises_as_spec_section_4() {
    let engine = engine(&tool_skill(
        r#"fieldMatches payload.xs[*].e ~ /[^@]+@example\.com/i"#,
    ));
    let decision = decide(
        &engine,
        &tool(json!({"xs": [{"e": "a@example.com"}, {"e": "b@evil.com"}]})),
    );
    let wire = serde_json::to_value(&decision).unwrap();
    assert_eq!(wire["decision"], "deny");
    assert_eq!(wire["skill"], "s");
    assert_eq!(wire["capability"], Value::Null);
    let reason = &wire["reasons"][0];
    assert_eq!(reason["capability"], "c");
    assert_eq!(reason["constraint"], "fieldMatches");
    assert_eq!(reason["path"], "payload.xs[1].e");
    assert_eq!(reason["source"], "test.cap:7:5");
    let message = reason["message"].as_str().unwrap();
    assert!(message.contains(r"/[^@]+@example\.com/i"), "{message}");

    let allow = decide(&engine, &tool(json!({"xs": []})));
    let wire = serde_json::to_value(&allow).unwrap();
    assert_eq!(wire["decision"], "allow");
    assert_eq!(wire["capability"], "c");
    assert_eq!(wire["reasons"], json!([]));
}

#[test]
fn quoted_payload_values_in_messages_are_cut_to_64_characters() {
    let long = "x".repeat(500);
    let engine = engine(&tool_skill(r#"fieldEquals payload.s == "y""#));
    let decision = decide(&engine, &tool(json!({ "s": long })));
    let message = &decision.reasons[0].message;
    assert!(!message.contains(&"x".repeat(65)), "{message}");
    assert!(message.contains(&"x".repeat(60)), "{message}");
}

#[test]
fn every_reason_kind_has_its_spec_wire_name() {
    let names: Vec<&str> = [
        ReasonKind::FieldEquals,
        ReasonKind::FieldMatches,
        ReasonKind::FieldRange,
        ReasonKind::PayloadSchema,
        ReasonKind::ActorBinding,
        ReasonKind::RateLimit,
        ReasonKind::WallClockWindow,
        ReasonKind::Resource,
        ReasonKind::Operation,
        ReasonKind::UnknownSkill,
        ReasonKind::Revision,
        ReasonKind::Grant,
        ReasonKind::Lifetime,
        ReasonKind::Risk,
        ReasonKind::Sensitivity,
        ReasonKind::Input,
    ]
    .into_iter()
    .map(|k| {
        let wire = serde_json::to_value(k).unwrap();
        assert_eq!(wire.as_str().unwrap(), k.as_str());
        k.as_str()
    })
    .collect();
    assert_eq!(
        names,
        [
            "fieldEquals",
            "fieldMatches",
            "fieldRange",
            "payloadSchema",
            "actorBinding",
            "rateLimit",
            "wallClockWindow",
            "resource",
            "operation",
            "unknownSkill",
            "revision",
            "grant",
            "lifetime",
            "risk",
            "sensitivity",
            "input"
        ]
    );
}

// ------------------------------------------------------------------------------------------------
// §2, §7: load errors
// ------------------------------------------------------------------------------------------------

#[test]
fn load_error_names_file_line_and_column() {
    let e = load_error(
        "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource tool \"t\"\n    operations call\n    fieldEquals payload.x === 1\n  }\n}\n",
    );
    assert!(e.contains("bad.cap:6:"), "{e}");
}

#[test]
fn every_error_of_a_policy_is_listed() {
    let e = load_error(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations POST
  }
  capability "d" {
    resource http "https://x.example.com/a"
    operations GET
    lifetime process justification "test"
    fieldEquals resource.nope == "x"
  }
}"#,
    );
    assert!(e.contains("bad.cap:5:"), "{e}");
    assert!(e.contains("bad.cap:11:"), "{e}");
}

#[test]
fn compile_errors_for_justification_and_duplicate_names() {
    // Write verbs need a justification.
    load_error(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations POST } }"#,
    );
    // Process lifetime needs one.
    load_error(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations GET lifetime process justification "  " } }"#,
    );
    load_error(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations GET lifetime process } }"#,
    );
    load(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations GET lifetime call 5 } }"#,
    );
    // wallClock longer than 1h needs one; exactly 1h does not.
    load_error(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations GET lifetime wallClock 61m } }"#,
    );
    load(
        r#"skill "s" { version "1" capability "c" { resource http "https://x.example.com/a" operations GET lifetime wallClock 1h } }"#,
    );
    // Duplicate capability names.
    load_error(
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "test" } capability "c" { resource tool "u" operations call justification "test" } }"#,
    );
    // Missing version.
    load_error(
        r#"skill "s" { capability "c" { resource tool "t" operations call justification "test" } }"#,
    );
}

#[test]
fn regression_a_revoked_skill_is_named_as_the_skill_not_its_capability() {
    // Regression: every revocation was reported as "capability `c` is revoked", even when the
    // operator had revoked the whole skill.
    let (engine, _clock) = stateful(&lifetime_skill("process"));
    let request = tool(json!({"ok": true}));
    engine.revoke_skill("s").unwrap();
    let decision = decide(&engine, &request);
    assert_deny(&decision, ReasonKind::Grant);
    assert_eq!(decision.reasons[0].message, "skill `s` is revoked");
    assert!(engine.lift_skill("s").unwrap());

    engine.revoke_capability("s", "c").unwrap();
    let decision = decide(&engine, &request);
    assert_deny(&decision, ReasonKind::Grant);
    assert_eq!(decision.reasons[0].message, "capability `c` is revoked");
}

#[test]
fn regression_revision_reasons_show_both_hashes_whole() {
    // Regression: both hashes were cut at 64 characters, so two `sha256:` hashes (71
    // characters) that differ only at the end read the same in the reason.
    let engine = engine(HASHED);
    let hash = "sha256:0000000000000000000000000000000000000000000000000000000000000002";
    let decision = decide(&engine, &with(tool(json!({})), "skill_hash", json!(hash)));
    assert_deny(&decision, ReasonKind::Revision);
    assert_eq!(
        decision.reasons[0].message,
        format!(
            "request names skill hash `{hash}` but the loaded manifest has \
             `sha256:0000000000000000000000000000000000000000000000000000000000000001`"
        )
    );
}

/// A sliding window counts calls in 64-bit nanoseconds (1677-09-21 to 2262-04-11); with the
/// clock outside that range every call is refused, and the reason says the clock is out of
/// range (regression: it said "rate limit of 5 per 1m reached" on the first call). A bucket
/// (`burst`) counts at any instant.
#[test]
fn a_clock_outside_the_supported_range_says_so() {
    let policy = |limit: &str| {
        format!(
            "skill \"s\" {{ version \"1\" capability \"c\" {{ resource tool \"t\" operations call lifetime process justification \"range test\" {limit} }} }}"
        )
    };
    for time in [
        "9999-12-31T00:00:00Z",
        "1000-01-01T00:00:00Z",
        "2262-04-12T00:00:00Z",
    ] {
        let (engine, clock) = stateful(&policy("rateLimit 5 per minute"));
        clock.set(at(time));
        let decision = decide(&engine, &tool(json!({})));
        assert_eq!(decision.verdict, Verdict::Deny, "{time}");
        assert_eq!(kinds(&decision), ["rateLimit"]);
        assert_eq!(
            decision.reasons[0].message,
            format!(
                "the clock ({time}) is outside the supported range of the rate limit of 5 per 1m (1677-09-21 to 2262-04-11)"
            )
        );
        let (engine, clock) = stateful(&policy("rateLimit 5 per minute burst 2"));
        clock.set(at(time));
        assert_eq!(
            decide(&engine, &tool(json!({}))).verdict,
            Verdict::Allow,
            "{time}"
        );
    }
    // Within the range, a refusal is the limit's own.
    let (engine, _clock) = stateful(&policy("rateLimit 1 per minute"));
    assert_eq!(decide(&engine, &tool(json!({}))).verdict, Verdict::Allow);
    let decision = decide(&engine, &tool(json!({})));
    assert_eq!(
        decision.reasons[0].message,
        "rate limit of 1 per 1m reached"
    );
}

// ------------------------------------------------------------------------------------------------
// A payload the upstream reads differently (the gateway modes)
// ------------------------------------------------------------------------------------------------

#[test]
fn an_unreadable_payload_fails_every_capability_that_reads_it_with_input() {
    let cap = r#"skill "s" {
  version "1"
  capability "optional-field" {
    resource http "https://api.example.com/a"
    operations POST
    justification "test"
    lifetime process
    optional fieldEquals payload.kind == "note"
  }
  capability "schema" {
    resource http "https://api.example.com/a"
    operations POST
    justification "test"
    lifetime process
    payloadSchema { "type": ["object", "null"] }
  }
  capability "negated" {
    resource http "https://api.example.com/a"
    operations POST
    justification "test"
    lifetime process
    not { fieldEquals payload.admin == true }
  }
  capability "keyed" {
    resource http "https://api.example.com/a"
    operations POST
    justification "test"
    lifetime process
    rateLimit 5 per minute by payload.user
  }
  capability "no-payload" {
    resource http "https://api.example.com/b"
    operations POST
    justification "test"
    lifetime process
    fieldEquals context.org == "acme"
  }
}"#;
    let (engine, _clock) = stateful(cap);
    let request = |path: &str| {
        json!({
            "skill": "s", "operation": "POST", "resource": format!("https://api.example.com/{path}"),
            "context": {"org": "acme"}, "autonomy": 100,
            "payload": {"kind": "note", "user": "u"},
        })
    };
    // Read, every one of these capabilities allows (the first one decides).
    let readable = engine.check_value(request("a"));
    assert_eq!(readable.verdict, Verdict::Allow, "{readable:?}");
    // Unreadable, each fails with `input`, `optional` and `not` included: none allows.
    let decision = engine.check_value_without_payload(request("a"), "the body is gzip");
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(kinds(&decision), ["input", "input", "input", "input"]);
    assert!(
        decision.reasons[0]
            .message
            .ends_with("cannot be read as the upstream will read it: the body is gzip"),
        "{}",
        decision.reasons[0].message
    );
    // A capability that reads no payload decides as usual.
    let decision = engine.check_value_without_payload(request("b"), "the body is gzip");
    assert_eq!(decision.verdict, Verdict::Allow);
    assert_eq!(decision.capability.as_deref(), Some("no-payload"));
}
