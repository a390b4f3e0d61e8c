//! Bugs found by the differential and fuzz tests, each kept as a named case. A test here pins
//! the fixed behaviour through the public engine API, from `.cap` text to the decision.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use capgate::{Engine, PolicyFormat, PolicyLoader, Request, SimulatedClock, Verdict};
use serde_json::json;

fn engine(cap: &str) -> Engine {
    let mut loader = PolicyLoader::default();
    loader.add_text("regression.cap", cap.to_owned(), PolicyFormat::Cap, None);
    let loaded = loader.finish().unwrap();
    let now = "2026-12-01T12:00:00Z".parse().unwrap();
    Engine::builder(loaded)
        .clock(Arc::new(SimulatedClock::new(now)))
        .build()
}

fn difference_policy(constraint: &str) -> Engine {
    engine(&format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource http "https://api.example.com/items/{{id}}"
    operations GET
    {constraint}
  }}
}}"#
    ))
}

/// Found by `tests/it/differential.rs` (seed 18041101392041191774): `optional` on a difference
/// forgave a repeated query parameter when the other side was absent, so
/// `?q=a&q=b` with no `payload.start` was allowed. A repeated parameter fails every
/// constraint on it, `optional` or not (`docs/semantics.md`).
#[test]
fn regression_optional_difference_fails_on_repeated_query_parameter_when_other_side_absent() {
    let engine = difference_policy("optional fieldRange resource.query.q - payload.start >= 1s");
    let mut request = Request::new("s", "GET", "https://api.example.com/items/1?q=a&q=b");
    request.payload = json!({});
    let decision = engine.check(&request);
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
    assert_eq!(decision.reasons[0].constraint.as_str(), "fieldRange");
}

/// Found by `tests/it/differential.rs` (seed 18041170213643874436): the same hole with a
/// wrong-shaped side — stepping into a string — next to an absent one.
#[test]
fn regression_optional_difference_fails_on_wrong_shape_when_other_side_absent() {
    let engine = difference_policy("optional fieldRange payload.end - payload.start.at >= 1s");
    let mut request = Request::new("s", "GET", "https://api.example.com/items/1");
    request.payload = json!({ "start": "not an object" });
    let decision = engine.check(&request);
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
    assert_eq!(decision.reasons[0].constraint.as_str(), "fieldRange");
}

/// `optional` still holds where it is meant to: both sides absent, or one absent and the other
/// present.
#[test]
fn regression_optional_difference_still_holds_when_only_absent() {
    let engine = difference_policy("optional fieldRange payload.end - payload.start >= 1s");
    let mut request = Request::new("s", "GET", "https://api.example.com/items/1");
    request.payload = json!({});
    assert_eq!(engine.check(&request).verdict, Verdict::Allow);
    request.payload = json!({ "end": "2026-12-01T12:00:00Z" });
    assert_eq!(engine.check(&request).verdict, Verdict::Allow);
}

const TOOL_POLICY: &str = r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "x"
    operations call
    justification "j"
  }
}"#;

#[test]
fn regression_a_request_given_as_a_json_array_is_refused_not_read_by_position() {
    // serde's derived `Deserialize` reads a struct from an array by position, where
    // `deny_unknown_fields` does not apply: this array was decided, and allowed.
    let engine = engine(TOOL_POLICY);
    let as_object = br#"{"skill":"s","operation":"call","resource":"tool:x"}"#;
    assert_eq!(engine.check_slice(as_object).verdict, Verdict::Allow);
    for bytes in [
        &br#"["s",null,"call","tool:x"]"#[..],
        &br#" ["s",null,"call","tool:x",null,null,null,null,null,null,null] "#[..],
    ] {
        let decision = engine.check_slice(bytes);
        assert_eq!(decision.verdict, Verdict::Deny);
        assert_eq!(decision.reasons[0].constraint.as_str(), "input");
        assert!(Request::from_slice(bytes, &capgate::Limits::DEFAULT).is_err());
    }
    let decision = engine.check_value(json!(["s", null, "call", "tool:x"]));
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint.as_str(), "input");
}

#[test]
fn regression_an_over_limit_request_is_not_parsed_to_name_its_skill() {
    // The deny of an over-limit body named its skill by parsing the whole body, which the
    // size limit is there to prevent; it names none.
    let loaded = {
        let mut loader = PolicyLoader::default();
        loader.add_text("r.cap", TOOL_POLICY.to_owned(), PolicyFormat::Cap, None);
        loader.finish().unwrap()
    };
    let engine = Engine::builder(loaded)
        .limits(capgate::Limits {
            max_request_bytes: 64,
            ..capgate::Limits::DEFAULT
        })
        .unwrap()
        .build();
    let body = format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:x","payload":"{}"}}"#,
        "x".repeat(100)
    );
    let decision = engine.check_slice(body.as_bytes());
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint.as_str(), "input");
    assert_eq!(&*decision.skill, "");
}

#[test]
fn regression_rate_limit_keys_chosen_by_callers_do_not_grow_the_store_without_bound() {
    // Every rate-limit key stayed in the in-memory store forever, so callers choosing `by`
    // values (here the agent id) grew it without bound. Idle keys are forgotten.
    let mut loader = PolicyLoader::default();
    loader.add_text(
        "r.cap",
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "x"
    operations call
    lifetime process
    justification "Per-agent limit."
    rateLimit 1 per 1m by agent.id
  }
}"#
        .to_owned(),
        PolicyFormat::Cap,
        None,
    );
    let loaded = loader.finish().unwrap();
    let clock = Arc::new(SimulatedClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let store = Arc::new(capgate::InMemoryStore::new());
    let engine = Engine::builder(loaded)
        .clock(clock.clone())
        .state(store.clone())
        .build();
    let call = |agent: &str| {
        engine
            .check_value(json!({
                "skill": "s", "operation": "call", "resource": "tool:x",
                "agent": {"id": agent},
            }))
            .verdict
    };
    // Twenty minutes, each with 5,000 new agents: 100,000 keys, at most 5,000 busy at once.
    for minute in 0..20 {
        if minute > 0 {
            clock.advance(std::time::Duration::from_secs(60)).unwrap();
        }
        for i in 0..5_000 {
            assert_eq!(call(&format!("agent-{minute}-{i}")), Verdict::Allow);
        }
        assert!(
            store.rate_key_count() <= 20_000,
            "minute {minute}: {} keys held",
            store.rate_key_count()
        );
    }
    // The busy keys were kept: the last minute's agents are still limited.
    assert_eq!(call("agent-19-0"), Verdict::Deny);
    // A sweep a minute later forgets every key.
    let later = "2026-12-01T12:20:00Z".parse().unwrap();
    assert!(store.forget_idle(later) >= 5_000);
    assert_eq!(store.rate_key_count(), 0);
}

/// Found in review: `payloadSchema` checks quietly stopped at the first failing member in the
/// order the document keeps — the input's when deciding from bytes, name order for a
/// pre-parsed request — so whether the step budget lasted into the next `anyOf` branch
/// depended on that order. In this request `u`, which fails the first branch, comes first in
/// the bytes and last in name order (after 20,000 members); the second branch — doubling
/// `allOf`s through `$ref`, on `u`'s item and on `m1`…`m7` — spends 4,177,906 of the 4,194,304
/// steps, so the request fits only if the first branch stops at `u`. It is refused alike from
/// bytes and pre-parsed, as `input` (a limit, SPEC §7).
#[test]
fn regression_a_schema_near_its_step_budget_decides_alike_from_bytes_and_pre_parsed() {
    let mut defs = serde_json::Map::new();
    for i in 0..19 {
        let next = json!({ "$ref": format!("#/$defs/l{}", i + 1) });
        defs.insert(format!("l{i}"), json!({ "allOf": [next, next] }));
    }
    defs.insert("l19".to_owned(), json!({ "type": "integer" }));
    let mut properties = serde_json::Map::new();
    properties.insert("u".to_owned(), json!({ "items": { "$ref": "#/$defs/l0" } }));
    for j in 1..=7 {
        properties.insert(format!("m{j}"), json!({ "$ref": format!("#/$defs/l{j}") }));
    }
    let schema = json!({
        "$defs": defs,
        "anyOf": [
            { "additionalProperties": { "type": "integer" } },
            { "properties": properties }
        ]
    });
    let engine = engine(&format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    justification "Regression."
    payloadSchema {schema}
  }}
}}"#
    ));
    let mut payload = String::from(r#"{"u":[1]"#);
    for j in 1..=7 {
        payload.push_str(&format!(r#","m{j}":1"#));
    }
    for i in 0..20_000 {
        payload.push_str(&format!(r#","a{i:05}":0"#));
    }
    payload.push('}');
    let bytes =
        format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{payload}}}"#);
    let from_bytes = engine.check_slice(bytes.as_bytes());
    let request = Request::from_slice(bytes.as_bytes(), engine.limits()).unwrap();
    let pre_parsed = engine.check(&request);
    assert_eq!(pre_parsed.verdict, Verdict::Deny, "{pre_parsed:?}");
    assert_eq!(from_bytes.verdict, Verdict::Deny, "{from_bytes:?}");
    assert_eq!(from_bytes.reasons, pre_parsed.reasons);
    assert_eq!(from_bytes.reasons[0].constraint.as_str(), "input");
    assert!(
        from_bytes.reasons[0].message.contains("steps"),
        "{from_bytes:?}"
    );
}

/// Regression: a `payloadSchema` that stopped at its step or depth limit counted as a payload
/// that fails the schema, so it was denied as `payloadSchema` — and under a policy's `not`,
/// allowed. A limit refuses the request as `input` (SPEC §7), `not` or no `not`.
#[test]
fn regression_a_schema_limit_refuses_the_request_as_input_even_under_not() {
    // Each level offers two branches to the next: 2^21 levels' worth of steps for a number.
    let mut defs = serde_json::Map::new();
    for i in 0..21 {
        let next = json!({ "$ref": format!("#/$defs/l{}", i + 1) });
        defs.insert(format!("l{i}"), json!({ "anyOf": [next, next] }));
    }
    defs.insert("l21".to_owned(), json!({ "type": "string" }));
    let schema = json!({ "$defs": defs, "properties": { "x": { "$ref": "#/$defs/l0" } } });
    for constraint in [
        format!("payloadSchema {schema}"),
        format!("not {{ payloadSchema {schema} }}"),
    ] {
        let engine = engine(&format!(
            r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    justification "Regression."
    {constraint}
  }}
}}"#
        ));
        let call =
            json!({"skill": "s", "operation": "call", "resource": "tool:t", "payload": {"x": 1}});
        let decision = engine.check_value(call);
        assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
        assert_eq!(
            decision.reasons[0].constraint.as_str(),
            "input",
            "{decision:?}"
        );
        assert!(
            decision.reasons[0].message.contains("4194304 steps"),
            "{decision:?}"
        );
    }
}

/// Found in review: rate-limit keys held the JSON text of each `by` value, so `7` and `7.0`
/// — one value, SPEC §2.4 and §5.3 — were two keys, each with its own full limit (and `0`,
/// `0.0`, `-0.0` three). Keys are canonical: numbers by value, objects by name.
#[test]
fn regression_a_number_written_another_way_shares_its_rate_limit() {
    let policy = loaded(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "x"
    operations call
    lifetime process
    justification "Per-user limit."
    rateLimit 1 per 1m by payload.user
  }
}"#,
    );
    let clock = Arc::new(SimulatedClock::new("2026-12-01T12:00:00Z".parse().unwrap()));
    let engine = Engine::builder(policy)
        .clock(clock)
        .state(Arc::new(capgate::InMemoryStore::new()))
        .build();
    let request = |user: &str| {
        format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:x","payload":{{"user":{user}}}}}"#
        )
    };
    let pre_parsed = |user: &str| {
        engine
            .check(&Request::from_slice(request(user).as_bytes(), engine.limits()).unwrap())
            .verdict
    };
    let from_bytes = |user: &str| engine.check_slice(request(user).as_bytes()).verdict;
    assert_eq!(pre_parsed("7"), Verdict::Allow);
    for same in ["7.0", "7e0", "70e-1"] {
        assert_eq!(pre_parsed(same), Verdict::Deny, "{same}");
        assert_eq!(from_bytes(same), Verdict::Deny, "{same}");
    }
    assert_eq!(from_bytes("-0.0"), Verdict::Allow);
    for same in ["0", "0.0", "-0"] {
        assert_eq!(pre_parsed(same), Verdict::Deny, "{same}");
    }
    // Different values, and a string, are still keys of their own.
    assert_eq!(from_bytes("7.5"), Verdict::Allow);
    assert_eq!(pre_parsed(r#""7""#), Verdict::Allow);
}

/// A stateful engine on `cap` with a simulated clock at 10:00.
fn stateful(cap: &str) -> (Engine, Arc<SimulatedClock>) {
    let clock = Arc::new(SimulatedClock::new("2026-12-01T10:00:00Z".parse().unwrap()));
    let engine = Engine::builder(loaded(cap))
        .clock(clock.clone())
        .state(Arc::new(capgate::InMemoryStore::new()))
        .build();
    (engine, clock)
}

fn loaded(cap: &str) -> capgate::PolicySet {
    let mut loader = PolicyLoader::default();
    loader.add_text("regression.cap", cap.to_owned(), PolicyFormat::Cap, None);
    loader.finish().unwrap()
}

/// Skill `s` with one capability `c` (`tool:t`, `call`) of the given lifetime.
fn lifetime_policy(lifetime: &str) -> String {
    format!(
        r#"skill "s" {{
  version "1"
  capability "c" {{
    resource tool "t"
    operations call
    lifetime {lifetime}
    justification "Regression."
  }}
}}"#
    )
}

/// A call on `s`/`c` carrying grant `token`.
fn with_grant(engine: &Engine, token: &str) -> capgate::Decision {
    engine.check_value(json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "grant": token,
    }))
}

/// Found in review: a grant for a `transaction` capability issued without a transaction is
/// recorded as a one-call grant; after a reload to `lifetime call 1` the pinned check looked at
/// the old template, operations and constraints but not the old lifetime, so the grant allowed
/// a call with no transaction — a reload widened a running grant (SPEC §5.2).
#[test]
fn regression_a_reload_does_not_free_a_transaction_grant_from_its_transaction() {
    let (engine, _clock) = stateful(&lifetime_policy("transaction"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Deny);
    engine.reload(loaded(&lifetime_policy("call 1")));
    let decision = with_grant(&engine, "g");
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
    assert!(
        decision.reasons[0]
            .message
            .contains("under the revision the grant was issued for"),
        "{decision:?}"
    );
    // Inside an open transaction both lifetimes hold.
    engine.begin_transaction("tx").unwrap();
    let inside = engine.check_value(json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "grant": "g",
        "transaction": "tx",
    }));
    assert_eq!(inside.verdict, Verdict::Allow, "{inside:?}");
}

/// Found in review: an expired renewable grant was renewed for the *current* capability's
/// duration, so a reload to a longer one made a one-minute grant last a day
/// (docs/semantics.md: the duration of a grant is fixed when it is issued). A renewal lasts
/// the shorter of the two.
#[test]
fn regression_a_reload_does_not_lengthen_a_grants_renewal() {
    let (engine, clock) = stateful(&lifetime_policy("wallClock 1m renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(loaded(&lifetime_policy("wallClock 1d renewable")));
    clock.set("2026-12-01T10:02:00Z".parse().unwrap());
    // Expired at 10:01, renewed on use for one minute: to 10:03.
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    engine.reload(loaded(&lifetime_policy("wallClock 1m")));
    clock.set("2026-12-01T10:02:59Z".parse().unwrap());
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    clock.set("2026-12-01T11:00:00Z".parse().unwrap());
    let decision = with_grant(&engine, "g");
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
}

/// Found in review: a reload that narrowed a capability's lifetime left grants issued before it
/// under their old lifetime. An operator cutting `wallClock 1h` to `call 1` (say, after spotting
/// abuse) still left every running token unlimited calls for the rest of the hour; SPEC §5.2
/// honours such a grant only under the intersection of its old and new capability.
#[test]
fn regression_a_reload_that_narrows_a_lifetime_to_calls_binds_running_grants() {
    let (engine, _clock) = stateful(&lifetime_policy("wallClock 1h"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    // One use before the reload counts against the new `call 2`.
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    engine.reload(loaded(&lifetime_policy("call 2")));
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    let decision = with_grant(&engine, "g");
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
    assert_eq!(decision.reasons[0].constraint.as_str(), "lifetime");
    // The same for `call 5` cut to `call 1`, and from bytes.
    let (engine, _clock) = stateful(&lifetime_policy("call 5"));
    engine
        .issue_grant("s", "c", None, Some("h".into()))
        .unwrap();
    engine.reload(loaded(&lifetime_policy("call 1")));
    let call = br#"{"skill":"s","operation":"call","resource":"tool:t","grant":"h"}"#;
    assert_eq!(engine.check_slice(call).verdict, Verdict::Allow);
    let decision = engine.check_slice(call);
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
}

/// Found with the one above: `call 3` cut to `wallClock 1m`, or `wallClock 1h` to
/// `wallClock 1m`, left old grants good past the new minute.
#[test]
fn regression_a_reload_that_narrows_a_lifetime_to_a_duration_expires_running_grants() {
    for (old, token) in [
        ("call 3", "g"),
        ("wallClock 1h", "h"),
        ("wallClock 1h renewable", "r"),
    ] {
        let (engine, clock) = stateful(&lifetime_policy(old));
        engine
            .issue_grant("s", "c", None, Some(token.into()))
            .unwrap();
        engine.reload(loaded(&lifetime_policy("wallClock 1m")));
        clock.set("2026-12-01T10:00:59Z".parse().unwrap());
        assert_eq!(with_grant(&engine, token).verdict, Verdict::Allow, "{old}");
        clock.set("2026-12-01T10:01:00Z".parse().unwrap());
        let decision = with_grant(&engine, token);
        assert_eq!(decision.verdict, Verdict::Deny, "{old}: {decision:?}");
        assert_eq!(decision.reasons[0].constraint.as_str(), "lifetime", "{old}");
    }
    // Renewable under both: renewed on use for the shorter duration, from the renewal.
    let (engine, clock) = stateful(&lifetime_policy("wallClock 1h renewable"));
    engine
        .issue_grant("s", "c", None, Some("g".into()))
        .unwrap();
    engine.reload(loaded(&lifetime_policy("wallClock 1m renewable")));
    clock.set("2026-12-01T10:05:00Z".parse().unwrap());
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    clock.set("2026-12-01T10:05:59Z".parse().unwrap());
    assert_eq!(with_grant(&engine, "g").verdict, Verdict::Allow);
    engine.reload(loaded(&lifetime_policy("wallClock 1m")));
    clock.set("2026-12-01T10:06:00Z".parse().unwrap());
    let decision = with_grant(&engine, "g");
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
}

/// Found in review (twice): a `fieldMatches` source was pasted into `^(?:…)$` unchecked, so a
/// source that closes the group early — `[a-z]+)|(?:x` — became a top-level alternation whose
/// first branch was anchored only at the start, and `abc; DROP TABLE users` matched it (in the
/// `.cap` language and in JSON manifests alike). A source must parse as a regex on its own.
#[test]
fn regression_a_regex_cannot_close_its_anchoring_group() {
    let cap = r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    fieldMatches payload.s ~ /[a-z]+)|(?:x/
  }
}"#;
    let json = r#"{
  "skill": {"name": "s", "version": "1"},
  "capabilities": [{
    "name": "c", "resource": "tool:t", "operations": ["call"],
    "justification": "Regression.",
    "constraints": [{"type": "fieldMatches", "field": "payload.s", "pattern": "[a-z]+)|(?:.*"}]
  }]
}"#;
    for (name, text, format) in [
        ("r.cap", cap, PolicyFormat::Cap),
        ("r.json", json, PolicyFormat::Json),
    ] {
        let mut loader = PolicyLoader::default();
        loader.add_text(name, text.to_owned(), format, None);
        let error = loader.finish().unwrap_err().to_string();
        assert!(error.contains("invalid regex"), "{name}: {error}");
    }
    // A pattern that only looks like it: a group that opens and closes inside is fine.
    let balanced = engine(&cap.replace("/[a-z]+)|(?:x/", "/(?:[a-z]+)|(?:x)/"));
    let call = |s: &str| {
        balanced
            .check_value(json!({
                "skill": "s", "operation": "call", "resource": "tool:t", "payload": {"s": s},
            }))
            .verdict
    };
    assert_eq!(call("abc"), Verdict::Allow);
    assert_eq!(call("abc; DROP TABLE users"), Verdict::Deny);
}

/// Found in review: `actorBinding payload.owner == agent.email` held for an agent whose email is
/// `null` acting on a record whose owner is `null` (`null == null`): an agent with no identity
/// was bound to every unowned record. SPEC §2.4 denies a request without the identity field; a
/// `null` one names no agent either. The binding fails, with its own reason, from bytes and
/// pre-parsed, and in the reference evaluator.
#[test]
fn regression_a_null_identity_binds_nothing() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    actorBinding payload.owner == agent.email
  }
}"#,
    );
    let request = |email: &str, owner: &str| {
        format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","agent":{{"id":"a","email":{email}}},"payload":{{"owner":{owner}}}}}"#
        )
    };
    for (email, owner, verdict) in [
        ("null", "null", Verdict::Deny),
        ("null", r#""x@example.com""#, Verdict::Deny),
        (r#""x@example.com""#, "null", Verdict::Deny),
        (r#""x@example.com""#, r#""x@example.com""#, Verdict::Allow),
    ] {
        let bytes = request(email, owner);
        let from_bytes = engine.check_slice(bytes.as_bytes());
        let pre_parsed =
            engine.check(&Request::from_slice(bytes.as_bytes(), engine.limits()).unwrap());
        assert_eq!(from_bytes.verdict, verdict, "{bytes}: {from_bytes:?}");
        assert_eq!(from_bytes.reasons, pre_parsed.reasons, "{bytes}");
        assert_eq!(pre_parsed.verdict, verdict, "{bytes}");
    }
    let denied = engine.check_slice(request("null", "null").as_bytes());
    assert_eq!(denied.reasons[0].path.as_deref(), Some("agent.email"));
    assert_eq!(denied.reasons[0].message, "the agent identity is null");
}

/// Found in review: RFC 3339 allows any number of fraction digits, and chrono cut them off past
/// the ninth, moving an instant earlier: `12:00:00.0000000001` read as `12:00:00`, so
/// `end - start <= 2h` held for an end just past two hours. Such a timestamp is refused (the
/// constraint fails); extra digits that are all zero still read exactly.
#[test]
fn regression_a_timestamp_finer_than_a_nanosecond_is_not_cut_off() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    fieldRange payload.end - payload.start <= 2h
  }
}"#,
    );
    let call = |end: &str| {
        engine
            .check_value(json!({
                "skill": "s", "operation": "call", "resource": "tool:t",
                "payload": {"start": "2026-12-01T10:00:00Z", "end": end},
            }))
            .verdict
    };
    assert_eq!(call("2026-12-01T12:00:00.0000000001Z"), Verdict::Deny);
    assert_eq!(call("2026-12-01T12:00:00.999999999999Z"), Verdict::Deny);
    assert_eq!(call("2026-12-01T12:00:00.000000000000Z"), Verdict::Allow);
    assert_eq!(call("2026-12-01T11:59:59.999999999Z"), Verdict::Allow);
    assert_eq!(
        capgate::parse_timestamp("2026-12-01T12:00:00.0000000001Z"),
        None
    );
}

/// A session on skill `s` with one capability `c` (`tool:t`, `call`, process lifetime).
fn tool_session() -> capgate::Session {
    let policy = r#"skill "s" { version "1"
  capability "c" { resource tool "t" operations call lifetime process justification "j" } }"#;
    capgate::Session::new(loaded(policy), capgate::SessionOptions::default()).unwrap()
}

/// Found in review: a session `call` line whose request had `"time": null` (absent, as
/// docs/semantics.md says) or a `time` that is not a timestamp was an error line, so
/// `capgate replay` exited 2 where `capgate check` decided the same request. A null time is
/// absent; a malformed one is the request's problem, denied with reason `input`.
#[test]
fn regression_a_session_call_with_a_null_or_malformed_time_is_decided() {
    let session = tool_session();
    let line = session.run_line(
        r#"{"call": {"skill":"s","operation":"call","resource":"tool:t","time":null}, "expect":"allow"}"#,
        1,
    );
    assert!(!line.error && !line.failed_expectation, "{}", line.json);
    let line = session.run_line(
        r#"{"call": {"skill":"s","operation":"call","resource":"tool:t","time":"soon"}, "expect":"deny", "expect_constraint":"input"}"#,
        2,
    );
    assert!(!line.error && !line.failed_expectation, "{}", line.json);
}

/// Found in review: a `[*]` over more than the scan limit in a pinned grant's *old* program
/// failed only that capability, so a later capability could allow the request; SPEC §7 says a
/// request that breaks a limit is denied (`input`), as it is in the current program.
#[test]
fn regression_a_limit_broken_in_a_pinned_grants_old_program_denies_the_request() {
    let v1 = r#"skill "s" { version "1"
  capability "a" { resource tool "t" operations call lifetime call 5 justification "j"
    fieldMatches payload.xs[*] ~ /a/ }
  capability "b" { resource tool "t" operations call lifetime process justification "j" } }"#;
    let v2 = v1
        .replace("version \"1\"", "version \"2\"")
        .replace("fieldMatches payload.xs[*] ~ /a/", "");
    let engine = Engine::builder(loaded(v1))
        .state(Arc::new(capgate::InMemoryStore::new()))
        .build();
    engine
        .issue_grant("s", "a", None, Some("g".into()))
        .unwrap();
    let request = json!({"skill": "s", "operation": "call", "resource": "tool:t", "grant": "g",
                         "payload": {"xs": vec!["a"; 100_001]}});
    let bytes = serde_json::to_vec(&request).unwrap();
    let before = engine.check_slice(&bytes);
    assert_eq!(before.verdict, Verdict::Deny);
    assert_eq!(before.reasons[0].constraint.as_str(), "input");
    engine.reload(loaded(&v2));
    let after = engine.check_slice(&bytes);
    assert_eq!(after.verdict, Verdict::Deny, "{after:?}");
    assert_eq!(after.reasons[0].constraint.as_str(), "input", "{after:?}");
}

/// Found in review: a comment ran to the next line feed, so a lone carriage return — which most
/// editors show as a line break — hid the constraint after it: `// note\r fieldEquals ...`
/// loaded without the constraint and allowed. A carriage return that does not end a line is a
/// syntax error; `\r\n` line ends still load.
#[test]
fn regression_a_lone_carriage_return_cannot_hide_a_constraint() {
    let policy = |line_end: &str| {
        format!(
            "skill \"s\" {{\n  version \"1\"\n  capability \"c\" {{\n    resource tool \"t\"\n    operations call\n    justification \"Regression.\"\n    // only the primary calendar{line_end}    fieldEquals payload.a == \"primary\"\n  }}\n}}\n"
        )
    };
    let mut loader = PolicyLoader::default();
    loader.add_text("cr.cap", policy("\r"), PolicyFormat::Cap, None);
    let error = loader.finish().unwrap_err().to_string();
    assert!(error.contains("carriage return"), "{error}");
    let windows = engine(
        &policy("\r\n")
            .replace('\n', "\r\n")
            .replace("\r\r\n", "\r\n"),
    );
    let call = |a: &str| {
        windows
            .check_value(json!({
                "skill": "s", "operation": "call", "resource": "tool:t", "payload": {"a": a},
            }))
            .verdict
    };
    assert_eq!(call("primary"), Verdict::Allow);
    assert_eq!(call("other"), Verdict::Deny);
}

/// Calls its closure when the thread-local holding it is torn down.
struct DecideOnDrop(Box<dyn FnMut()>);

impl Drop for DecideOnDrop {
    fn drop(&mut self) {
        (self.0)();
    }
}

thread_local! {
    static ON_EXIT: std::cell::RefCell<Option<DecideOnDrop>> = const { std::cell::RefCell::new(None) };
}

/// Found in review: a decision made from a thread-local destructor at thread exit (a gateway's
/// per-thread state logging a last call) reached the engine's own thread-locals — the tape of
/// `check_slice`, the rate-key buffer of a stateful decision — after they were destroyed, and
/// `with` panicked there, which aborts the whole process. Both fall back to a fresh buffer.
/// The scenarios run in a child process, so that a regression fails this test instead of
/// aborting the test binary.
#[test]
fn regression_a_decision_from_a_thread_local_destructor_does_not_abort() {
    const SCENARIO: &str = "CAPGATE_REGRESSION_TLS_SCENARIO";
    if std::env::var_os(SCENARIO).is_some() {
        let policy = r#"skill "s" { version "1"
  capability "c" { resource tool "t" operations call lifetime process justification "j" } }"#;
        let stateless = Arc::new(Engine::builder(loaded(policy)).build());
        let stateful = Arc::new(
            Engine::builder(loaded(policy))
                .state(Arc::new(capgate::InMemoryStore::new()))
                .build(),
        );
        let bytes: &[u8] = br#"{"skill":"s","operation":"call","resource":"tool:t"}"#;
        std::thread::spawn(move || {
            // Registered before the engine's thread-locals are first used, so it is torn down
            // after them.
            let (at_exit_slice, at_exit_state) = (stateless.clone(), stateful.clone());
            ON_EXIT.with(|slot| {
                *slot.borrow_mut() = Some(DecideOnDrop(Box::new(move || {
                    let slice = at_exit_slice.check_slice(bytes).verdict;
                    let state = at_exit_state
                        .check(&Request::new("s", "call", "tool:t"))
                        .verdict;
                    println!("at thread exit: {slice:?} {state:?}");
                })))
            });
            assert_eq!(stateless.check_slice(bytes).verdict, Verdict::Allow);
            let request = Request::new("s", "call", "tool:t");
            assert_eq!(stateful.check(&request).verdict, Verdict::Allow);
        })
        .join()
        .unwrap();
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "regressions::regression_a_decision_from_a_thread_local_destructor_does_not_abort",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        output.status.success(),
        "{:?}\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("at thread exit: Allow Allow"),
        "{stdout}\n{stderr}"
    );
}

/// Found in review: `Request::from_value` (behind `check_value`, session `call` lines,
/// `.captest` cases and the REPL) checked the depth limit but not the size limit, so a session
/// allowed a 2 MiB request that `check_slice` and `capgate check` refuse, and policy tests
/// certified decisions no gateway would make. The value is measured as compact JSON.
#[test]
fn regression_a_request_over_the_size_limit_is_refused_from_a_value_too() {
    let engine = engine(
        r#"skill "s" { version "1"
  capability "c" { resource tool "t" operations call justification "j" } }"#,
    );
    let limit = engine.limits().max_request_bytes;
    let request = |note: usize| {
        json!({"skill": "s", "operation": "call", "resource": "tool:t",
               "payload": {"note": "x".repeat(note)}})
    };
    let within = request(limit - 200);
    assert_eq!(engine.check_value(within).verdict, Verdict::Allow);
    let over = request(limit);
    let bytes = serde_json::to_vec(&over).unwrap();
    let from_value = engine.check_value(over);
    assert_eq!(from_value.verdict, Verdict::Deny);
    assert_eq!(from_value.reasons[0].constraint.as_str(), "input");
    assert_eq!(from_value.reasons, engine.check_slice(&bytes).reasons);
    let session = tool_session();
    let line = format!(
        r#"{{"call": {}, "expect": "deny", "expect_constraint": "input"}}"#,
        String::from_utf8(bytes).unwrap()
    );
    let result = session.run_line(&line, 1);
    assert!(
        !result.error && !result.failed_expectation,
        "{}",
        result.json
    );
}

/// Found in review: the policy loader's directory walk followed symlinks without remembering
/// where it had been, so a link to `.` looped forever (two links: `capgate check -p` hung) or,
/// with one link, loaded every policy again under `loop/loop/...` ("skill declared twice").
/// Each directory is visited once. (The test runner's walk: the authoring crate's
/// `regression_a_symlink_loop_in_a_test_directory_is_walked_once`.)
#[cfg(unix)]
#[test]
fn regression_a_symlink_loop_in_a_policy_directory_is_walked_once() {
    let dir = std::env::temp_dir().join(format!("capgate-symlink-loop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("s.cap"),
        r#"skill "s" { version "1"
  capability "c" { resource tool "t" operations call justification "j" } }"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("s.session.jsonl"),
        r#"{"call": {"skill": "s", "operation": "call", "resource": "tool:t"}, "expect": "allow"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop2")).unwrap();
    let mut loader = PolicyLoader::default();
    loader.add_path(&dir);
    let policy = loader.finish().unwrap();
    assert_eq!(policy.skills.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Found in review: measuring a session's request as compact JSON (the size limit above)
/// disagreed with the bytes on the line both ways — `1e5` is longer written back (`100000.0`),
/// `\u00e9` shorter (`é`). A session counts a call's text as written on its line, as a gateway
/// counts the bytes it receives: under the limit on the line is allowed, over it denied.
#[test]
fn regression_a_session_measures_a_call_as_written_on_its_line() {
    let session = tool_session();
    let line = |payload: &str, expect: &str| {
        format!(
            r#"{{"call": {{"skill": "s", "operation": "call", "resource": "tool:t", "payload": {payload}}}, "expect": "{expect}"}}"#
        )
    };
    // 800 KB as written, 1.8 MB written back: within the 1 MiB limit.
    let numbers = format!("[{}]", vec!["1e5"; 200_000].join(","));
    let result = session.run_line(&line(&numbers, "allow"), 1);
    assert!(
        !result.error && !result.failed_expectation,
        "{}",
        result.text
    );
    // 1.8 MB as written, 600 KB written back: over it; the denial still names the skill.
    let escapes = format!("\"{}\"", "\\u00e9".repeat(300_000));
    let result = session.run_line(&line(&escapes, "deny"), 2);
    assert!(
        !result.error && !result.failed_expectation,
        "{}",
        result.text
    );
    assert!(result.json.contains(r#""skill":"s""#), "{}", result.text);
    // A malformed call's message is the value's, not positioned inside the `call` text
    // (deciding the text with `check_slice` would say "at line 1 column 38" of the member).
    let result = session.run_line(
        r#"{"call": {"skill": "s", "operation": 1, "resource": "tool:t"}, "expect": "deny"}"#,
        3,
    );
    assert!(
        !result.error && !result.failed_expectation,
        "{}",
        result.text
    );
    assert!(!result.json.contains("column"), "{}", result.json);
}

/// Found in review: `uniqueItems` charged one step per pair however large the items, so a
/// 1 MiB request of 2,800 arrays of 181 numbers was compared pair by pair for 25 s (from bytes)
/// before it was allowed; charging the pairs' worst case up front then refused 300 such arrays
/// (8.2 M steps) at once. Items are hashed and sorted: 2,500 such arrays cost their weight
/// (455,000 steps) and are allowed, and a repeated one is found — alike from bytes and
/// pre-parsed.
#[test]
fn regression_unique_items_over_large_items_is_decided_without_comparing_every_pair() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    payloadSchema {"properties": {"tags": {"type": "array", "uniqueItems": true}}}
  }
}"#,
    );
    let tag = |i: usize| {
        let mut item = vec![json!(0); 180];
        item.push(json!(i));
        json!(item)
    };
    let call = |tags: Vec<serde_json::Value>| json!({"skill": "s", "operation": "call", "resource": "tool:t", "payload": {"tags": tags}});
    let distinct = call((0..2_500).map(tag).collect());
    let mut repeated: Vec<serde_json::Value> = (0..2_500).map(tag).collect();
    repeated.push(tag(7));
    let repeated = call(repeated);
    for (call, verdict) in [(distinct, Verdict::Allow), (repeated, Verdict::Deny)] {
        let from_bytes = engine.check_slice(&serde_json::to_vec(&call).unwrap());
        let pre_parsed = engine.check_value(call);
        for decision in [&from_bytes, &pre_parsed] {
            assert_eq!(decision.verdict, verdict, "{decision:?}");
        }
        assert_eq!(from_bytes.reasons, pre_parsed.reasons);
        if verdict == Verdict::Deny {
            assert_eq!(from_bytes.reasons[0].constraint.as_str(), "payloadSchema");
            assert!(
                from_bytes.reasons[0]
                    .message
                    .contains("items 7 and 2500 are equal"),
                "{from_bytes:?}"
            );
        }
    }
}

/// Found in review: a live engine (system clock) skipped parsing `time`, so
/// `"time": "noon"` was allowed by a gateway while `capgate check` and replay refused it. It is
/// refused with `input` everywhere, and a valid one is still never honoured live.
#[test]
fn regression_a_live_engine_refuses_a_time_that_is_not_a_timestamp() {
    let mut loader = PolicyLoader::default();
    loader.add_text(
        "regression.cap",
        lifetime_policy("process"),
        PolicyFormat::Cap,
        None,
    );
    let engine = Engine::builder(loader.finish().unwrap()).build();
    let call = br#"{"skill":"s","operation":"call","resource":"tool:t","time":"noon"}"#;
    for decision in [
        engine.check_slice(call),
        engine.check_value(serde_json::from_slice(call).unwrap()),
    ] {
        assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
        assert_eq!(decision.reasons[0].constraint.as_str(), "input");
    }
    let call =
        br#"{"skill":"s","operation":"call","resource":"tool:t","time":"1999-01-01T00:00:00Z"}"#;
    assert_eq!(engine.check_slice(call).verdict, Verdict::Allow);
}

/// Found in review: an input refusal's audit record said `"operation": ""` and
/// `"resource": ""` whatever the request carried, and a request refused for a duplicate member
/// (a smuggled second `amount`, say) was named `"skill": ""` in the decision and the record:
/// the strict parser it was named with refused it too. It is read leniently for naming.
#[test]
fn regression_an_input_refusal_names_the_requests_skill_operation_and_resource() {
    #[derive(Debug, Default)]
    struct Records(std::sync::Mutex<Vec<serde_json::Value>>);
    impl capgate::AuditSink for Records {
        fn record(&self, record: &capgate::AuditRecord<'_>) {
            self.0
                .lock()
                .unwrap()
                .push(serde_json::to_value(record).unwrap());
        }
    }
    let records = Arc::new(Records::default());
    let engine = Engine::builder(loaded(&lifetime_policy("process")))
        .audit(records.clone())
        .build();
    let duplicate =
        br#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"a":1,"a":2}}"#;
    let unknown = br#"{"skill":"s","operation":"call","resource":"tool:t","x":1}"#;
    for bytes in [&duplicate[..], &unknown[..]] {
        let decision = engine.check_slice(bytes);
        assert_eq!(decision.verdict, Verdict::Deny);
        assert_eq!(&*decision.skill, "s", "{decision:?}");
    }
    let decision = engine.check_value(serde_json::from_slice(unknown).unwrap());
    assert_eq!(&*decision.skill, "s", "{decision:?}");
    let records = records.0.lock().unwrap();
    assert_eq!(records.len(), 3);
    for record in records.iter() {
        assert_eq!(record["skill"], "s", "{record}");
        assert_eq!(record["operation"], "call", "{record}");
        assert_eq!(record["resource"], "tool:t", "{record}");
        assert_eq!(record["reasons"][0]["constraint"], "input", "{record}");
    }
}

/// Found in a fail-open review: a test that meets a broken path — a query parameter given more
/// than once, a value of the wrong shape — counted as failing, and `not` turned that into a pass.
/// `?role=admin&role=admin` (or `?role=user&role=admin`, or `%72ole`) got past
/// `not { fieldEquals resource.query.role == "admin" }`, and `{"user": [{"role": "admin"}]}` past
/// `not { fieldEquals payload.user.role == "admin" }`. A check holds only if it also holds with
/// such tests taken to hold; `any` still holds through another branch.
#[test]
fn regression_not_cannot_turn_a_broken_path_into_a_pass() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource http "https://api.example.com/items"
    operations GET
    not { fieldEquals resource.query.role == "admin" }
    not { fieldEquals payload.user.role == "admin" }
    not { fieldRange payload.amount > 1000 }
    any { fieldEquals payload.kind == "public" fieldEquals payload.owner.id == "me" }
  }
}"#,
    );
    let call = |resource: &str, payload: serde_json::Value| {
        let text = serde_json::to_vec(&json!({
            "skill": "s", "operation": "GET", "resource": resource, "payload": payload,
        }))
        .unwrap();
        let from_bytes = engine.check_slice(&text);
        let pre_parsed = engine.check_value(serde_json::from_slice(&text).unwrap());
        assert_eq!(
            from_bytes.verdict, pre_parsed.verdict,
            "{resource} {from_bytes:?}"
        );
        assert_eq!(from_bytes.reasons, pre_parsed.reasons);
        from_bytes
    };
    let ok = json!({"kind": "public"});
    let items = "https://api.example.com/items";
    assert_eq!(call(items, ok.clone()).verdict, Verdict::Allow);
    assert_eq!(
        call(&format!("{items}?role=user"), ok.clone()).verdict,
        Verdict::Allow
    );
    for query in [
        "role=admin",
        "role=admin&role=admin",
        "role=user&role=admin",
        "role=admin&%72ole=user",
    ] {
        let decision = call(&format!("{items}?{query}"), ok.clone());
        assert_eq!(decision.verdict, Verdict::Deny, "{query}: {decision:?}");
        assert_eq!(decision.reasons[0].constraint.as_str(), "not", "{query}");
    }
    for payload in [
        json!({"kind": "public", "user": [{"role": "admin"}]}),
        json!({"kind": "public", "user": "admin"}),
        json!({"kind": "public", "amount": "5000"}),
    ] {
        let decision = call(items, payload.clone());
        assert_eq!(decision.verdict, Verdict::Deny, "{payload}: {decision:?}");
    }
    // Absent stays absent: `not` of a missing path holds, as documented.
    assert_eq!(
        call(items, json!({"kind": "public", "user": {}})).verdict,
        Verdict::Allow
    );
    // `any` holds through its other branch although the first meets a wrong shape.
    let decision = call(items, json!({"kind": ["public"], "owner": {"id": "me"}}));
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
    let decision = call(items, json!({"kind": ["public"], "owner": {"id": "you"}}));
    assert_eq!(decision.verdict, Verdict::Deny, "{decision:?}");
}

/// Found in review of the step charges: a tape charged a number's text (one step per 64
/// characters) where a pre-parsed `Value` charged one, so 2,000 distinct numbers written with
/// 128 characters each under `uniqueItems` were denied from bytes (out of steps) and allowed
/// pre-parsed. The parser reads each number once and keeps its value, a number weighs one
/// step on both paths, and comparing two never parses their text again.
#[test]
fn regression_long_number_texts_cost_alike_from_bytes_and_pre_parsed() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    payloadSchema {"properties": {"n": {"type": "array", "uniqueItems": true}}}
  }
}"#,
    );
    let numbers: Vec<String> = (0..2000_u32)
        .map(|i| {
            let head = format!("{i}.");
            format!("{head}{}", "0".repeat(128 - head.len()))
        })
        .collect();
    let text = format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{{"n":[{}]}}}}"#,
        numbers.join(",")
    );
    let from_bytes = engine.check_slice(text.as_bytes());
    let pre_parsed = engine.check_value(serde_json::from_str(&text).unwrap());
    assert_eq!(
        from_bytes.verdict,
        Verdict::Allow,
        "{:?}",
        from_bytes.reasons
    );
    assert_eq!(
        pre_parsed.verdict,
        Verdict::Allow,
        "{:?}",
        pre_parsed.reasons
    );
}

/// Found in review: request text reached output raw — a member name in a reason's path
/// (`to_text`), session names echoed on replay's ok lines, and a parser refusal quoting a
/// 10,000-character unknown member whole (in the reason, the audit record and `capgate
/// check`'s stderr).
#[test]
fn regression_request_text_is_escaped_and_cut_in_paths_session_lines_and_parser_refusals() {
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    justification "Regression."
    payloadSchema {"additionalProperties": {"type": "string"}}
  }
}"#,
    );
    let key = "x\u{2028}ALLOW\u{9b}2K\u{7f}\nline";
    let decision = engine.check_value(json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "payload": { key: 1 },
    }));
    assert_eq!(decision.verdict, Verdict::Deny);
    let text = decision.to_text();
    for c in ['\u{2028}', '\u{9b}', '\u{7f}'] {
        assert!(!text.contains(c), "U+{:04X} in {text:?}", u32::from(c));
    }
    assert_eq!(text.lines().count(), 3, "{text}");
    let name = "x".repeat(10_000);
    let call = format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","{name}\n":1}}"#)
        .replace('\n', "\\n");
    let decision = engine.check_slice(call.as_bytes());
    assert_eq!(decision.reasons[0].constraint.as_str(), "input");
    let message = &decision.reasons[0].message;
    assert!(
        message.chars().count() < 300,
        "{} characters",
        message.chars().count()
    );
    assert!(!message.contains('\n'));
    let session =
        capgate::Session::new(loaded(&lifetime_policy("process")), Default::default()).unwrap();
    let results = session
        .run_text(r#"{"begin_transaction": "t\nline 9: allow — skill `s`, capability `c`"}"#);
    assert_eq!(results[0].text.lines().count(), 1, "{:?}", results[0].text);
}

/// Found in review: running a check again with undecidable tests taken to hold (the case above)
/// is sound only when they all sit under the same number of `not`s. `any { not A, B }` passed
/// the first run through `not A` and the second through `B`, so `"user": "admin"` (or a
/// repeated `role` with `"approvals": "many"`) was allowed by the engine and the reference
/// alike. An undecidable test counts as whatever fails its check, from its parity of `not`s
/// (`VerifiedProgram::negated`).
#[test]
fn regression_an_undecidable_test_fails_its_check_whatever_the_nesting() {
    let cases = [
        (
            r#"any {
      not { fieldEquals payload.user.role == "admin" }
      fieldEquals payload.user.approved == true
    }"#,
            "https://api.example.com/items",
            json!({"user": "admin"}),
        ),
        (
            r#"any {
      not { fieldEquals resource.query.role == "admin" }
      fieldRange payload.approvals >= 2
    }"#,
            "https://api.example.com/items?role=admin&role=admin",
            json!({"approvals": "many"}),
        ),
        (
            r#"not { all { fieldEquals payload.kind == "x" fieldEquals resource.query.role == "admin" } }"#,
            "https://api.example.com/items?role=admin&role=admin",
            json!({"kind": "x"}),
        ),
        (
            r#"all { not { not { fieldRange payload.n > 1 } } not { fieldMatches payload.s ~ /a/ } }"#,
            "https://api.example.com/items",
            json!({"n": 5, "s": 7}),
        ),
    ];
    for (constraint, resource, payload) in cases {
        let cap = format!(
            r#"skill "s" {{
  version "1"
  capability "c" {{
    resource http "https://api.example.com/items"
    operations GET
    {constraint}
  }}
}}"#
        );
        let engine = engine(&cap);
        let text = serde_json::to_vec(&json!({
            "skill": "s", "operation": "GET", "resource": resource, "payload": payload,
        }))
        .unwrap();
        let from_bytes = engine.check_slice(&text);
        let pre_parsed = engine.check_value(serde_json::from_slice(&text).unwrap());
        let file = capgate::syntax::parse(capgate::span::FileId::default(), &cap).unwrap();
        let request: Request = serde_json::from_slice(&text).unwrap();
        let reference =
            capgate::reference::decide(&[file], &request, "2026-12-01T12:00:00Z".parse().unwrap());
        assert_eq!(
            from_bytes.verdict,
            Verdict::Deny,
            "{constraint}: {from_bytes:?}"
        );
        assert_eq!(pre_parsed.verdict, Verdict::Deny, "{constraint}");
        assert_eq!(reference.verdict, Verdict::Deny, "{constraint}");
        // The reason says the constraint could not be decided, and names the value.
        let message = &from_bytes.reasons[0].message;
        assert!(
            message.contains("cannot be decided"),
            "{constraint}: {message}"
        );
    }
    // The same shapes still allow what they should.
    let engine = engine(
        r#"skill "s" {
  version "1"
  capability "c" {
    resource http "https://api.example.com/items"
    operations GET
    any {
      not { fieldEquals payload.user.role == "admin" }
      fieldEquals payload.user.approved == true
    }
  }
}"#,
    );
    for payload in [
        json!({"user": {"role": "viewer"}}),
        json!({"user": {"role": "admin", "approved": true}}),
    ] {
        let decision = engine.check_value(json!({
            "skill": "s", "operation": "GET", "resource": "https://api.example.com/items",
            "payload": payload,
        }));
        assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
    }
}

/// Two capabilities with one regex each; `pattern` is used by both, and by another skill.
fn shared_regex_policy(pattern: &str) -> String {
    let capability = |name: &str, host: &str| {
        format!(
            r#"  capability "{name}" {{
    resource http "https://{host}.example.com/items"
    operations POST
    justification "Creates items."
    fieldMatches payload.sku ~ /{pattern}/
  }}
"#
        )
    };
    format!(
        "skill \"a\" {{\n  version \"1\"\n{}{}}}\nskill \"b\" {{\n  version \"1\"\n{}}}\n",
        capability("one", "one"),
        capability("two", "two"),
        capability("three", "three"),
    )
}

#[test]
fn a_regex_shared_by_capabilities_is_built_once_and_each_use_decides_and_fails_alike() {
    // Shared (the load builds it once): every capability still decides on its own payload.
    let engine = engine(&shared_regex_policy("[A-Z]{3}-[0-9]{4}"));
    for (skill, host) in [("a", "one"), ("a", "two"), ("b", "three")] {
        let call = |sku: &str| {
            let mut request =
                Request::new(skill, "POST", format!("https://{host}.example.com/items"));
            request.payload = json!({ "sku": sku });
            engine.check(&request).verdict
        };
        assert_eq!(call("ABC-1234"), Verdict::Allow, "{skill} {host}");
        assert_eq!(call("abc-1234"), Verdict::Deny, "{skill} {host}");
    }
    // Too big for the limit: each of the three uses is reported at its own place.
    let mut loader = PolicyLoader::new(capgate::Limits {
        max_regex_bytes: 64,
        ..capgate::Limits::DEFAULT
    });
    let text = shared_regex_policy("[a-z]{500}");
    loader.add_text("regression.cap", text.clone(), PolicyFormat::Cap, None);
    let error = loader.finish().unwrap_err();
    let lines: Vec<u32> = error
        .diagnostics
        .iter()
        .filter(|d| d.message.contains("compiles to more than 64 bytes"))
        .map(|d| d.location.line)
        .collect();
    let expected: Vec<u32> = text
        .lines()
        .zip(1..)
        .filter(|(line, _)| line.contains("fieldMatches"))
        .map(|(_, number)| number)
        .collect();
    assert_eq!(lines, expected, "{error:?}");
}

/// Found in review: `skill ""` and `capability ""` loaded (in both forms), and requests, grants
/// and reasons then named nothing anyone could tell apart. A blank name is a compile error.
#[test]
fn an_empty_skill_or_capability_name_is_refused() {
    let cap = "skill \"\" {\n  version \"1\"\n  capability \" \" {\n    resource http \"https://a.example.com/x\"\n    operations GET\n  }\n}\n";
    let json = r#"{"skill": {"name": "", "version": "1"}, "capabilities": [
        {"name": "", "resource": "https://a.example.com/x", "operations": ["GET"]}]}"#;
    for (text, format) in [(cap, PolicyFormat::Cap), (json, PolicyFormat::Json)] {
        let mut loader = PolicyLoader::new(capgate::Limits::DEFAULT);
        loader.add_text("p", text.to_owned(), format, None);
        let error = loader.finish().unwrap_err();
        let messages: Vec<&str> = error
            .diagnostics
            .iter()
            .map(|d| d.message.as_str())
            .collect();
        assert_eq!(
            messages,
            ["skill name is empty", "capability name is empty"],
            "{format:?}"
        );
    }
}
