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
        decide(&engine, json!({"name": "caf\u{e9}"})).verdict,
        Verdict::Allow
    );
    let denied = decide(&engine, json!({"name": "cafe\u{301}"}));
    assert_eq!(denied.verdict, Verdict::Deny);
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
    assert_eq!(decide(&engine, payload).verdict, Verdict::Allow);
    // `payload.a.b` is a different path from `payload["a.b"]`.
    let denied = decide(&engine, json!({"a": {"b": 1}, "": 2, "[*]": 3}));
    assert_eq!(denied.verdict, Verdict::Deny);
    assert_eq!(denied.reasons[0].path.as_deref(), Some("payload[\"a.b\"]"));
}

#[test]
fn wildcards_scan_arrays_up_to_the_limit_and_deny_one_past_it() {
    let engine = engine("fieldRange payload.items[*] >= 0");
    let at_limit: Vec<Value> = vec![json!(1); Limits::DEFAULT.max_array_scan];
    assert_eq!(
        decide(&engine, json!({ "items": at_limit })).verdict,
        Verdict::Allow
    );
    let past: Vec<Value> = vec![json!(1); Limits::DEFAULT.max_array_scan + 1];
    let denied = decide(&engine, json!({ "items": past }));
    assert_eq!(denied.verdict, Verdict::Deny);
    assert_eq!(denied.reasons[0].constraint.as_str(), "input");
}

#[test]
fn schema_string_lengths_count_code_points_not_bytes() {
    let engine = engine(r#"payloadSchema { "properties": { "s": { "maxLength": 2 } } }"#);
    // Two code points, eight bytes.
    assert_eq!(
        decide(&engine, json!({"s": "😀😀"})).verdict,
        Verdict::Allow
    );
    assert_eq!(
        decide(&engine, json!({"s": "😀😀😀"})).verdict,
        Verdict::Deny
    );
}

#[test]
fn case_insensitive_regexes_fold_unicode_case() {
    let engine = engine("fieldMatches payload.city ~ /zürich/i");
    assert_eq!(
        decide(&engine, json!({"city": "ZÜRICH"})).verdict,
        Verdict::Allow
    );
    // Whole-value match: a longer string does not match.
    assert_eq!(
        decide(&engine, json!({"city": "Zürich!"})).verdict,
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
        assert_eq!(decide(&engine, payload).verdict, Verdict::Allow, "{n}");
    }
    let payload: Value = serde_json::from_str(r#"{"n": 9007199254740993}"#).unwrap();
    assert_eq!(decide(&engine, payload).verdict, Verdict::Deny);
}

// ------------------------------------------------------------------------------------------------
// Every `Limits` field, end to end
// ------------------------------------------------------------------------------------------------

/// `policy` loaded and an engine built, both under `limits` (stateful, on a simulated clock), or
/// the error that refused either.
fn engine_under(limits: Limits, policy: &str) -> Result<Engine, String> {
    let mut loader = PolicyLoader::new(limits);
    loader.add_text("limits.cap", policy.to_owned(), PolicyFormat::Cap, None);
    let loaded = loader.finish().map_err(|e| e.to_string())?;
    let now = capgate::parse_timestamp("2026-12-01T10:00:00Z").unwrap();
    Ok(Engine::builder(loaded)
        .limits(limits)
        .map_err(|e| e.to_string())?
        .clock(std::sync::Arc::new(capgate::SimulatedClock::new(now)))
        .state(std::sync::Arc::new(capgate::InMemoryStore::new()))
        .build())
}

/// A one-capability skill with these constraints.
fn policy_with(constraints: &str) -> String {
    format!(
        "skill \"s\" {{ version \"1\" capability \"c\" {{ resource tool \"t\" operations call \
         lifetime process justification \"limits\" {constraints} }} }}"
    )
}

/// The verdict and first reason of `engine` on a request whose payload is `payload`, from bytes.
fn from_bytes(engine: &Engine, payload: &str) -> (Verdict, String) {
    let text =
        format!(r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{payload}}}"#);
    let decision = engine.check_slice(text.as_bytes());
    let first = decision
        .reasons
        .first()
        .map_or_else(String::new, |r| r.constraint.as_str().to_owned());
    (decision.verdict, first)
}

fn nested_arrays(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// A field above its fixed bound is refused by the engine builder, the policy loader, the
/// `.capc` loader and the request parser, each naming the field and the bound.
fn assert_refused_above_bound(limits: Limits, field: &str, bound: u64) {
    let named = |message: String| {
        assert!(message.contains(field), "{message}");
        assert!(message.contains(&bound.to_string()), "{message}");
    };
    named(engine_under(limits, &policy_with("")).err().unwrap());
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("ok.cap", policy_with(""), PolicyFormat::Cap, None);
    let skills = loader.finish().unwrap().skills;
    let bytes = capgate::bytecode::encode::encode_capc(&skills).unwrap();
    named(
        capgate::compile::load_capc(&bytes, &limits)
            .err()
            .unwrap()
            .to_string(),
    );
    let request = br#"{"skill":"s","operation":"call","resource":"tool:t"}"#;
    named(
        Request::from_slice(request, &limits)
            .unwrap_err()
            .to_string(),
    );
    assert_eq!(limits.check().unwrap_err().bound, bound);
}

#[test]
fn every_limits_field_is_honoured_end_to_end() {
    // Naming every field: a field added to `Limits` stops this from compiling until it has a
    // case below.
    let Limits {
        max_payload_depth: _,
        max_request_bytes: _,
        max_regex_bytes: _,
        max_policy_file_bytes: _,
        max_capabilities_per_skill: _,
        max_array_scan: _,
        max_sliding_window: _,
        refuse_case_variant_members: _,
        refuse_case_variant_reads: _,
        max_regex_work: _,
        max_regex_total_bytes: _,
    } = Limits::DEFAULT;
    let allow = (Verdict::Allow, String::new());
    let input = (Verdict::Deny, "input".to_owned());

    // max_payload_depth: a payload at the limit is decided, one level deeper is refused; the
    // limit may be raised up to its bound and no further.
    for depth in [5, capgate::limits::MAX_PAYLOAD_DEPTH] {
        let limits = Limits {
            max_payload_depth: depth,
            ..Limits::DEFAULT
        };
        let engine = engine_under(limits, &policy_with("")).unwrap();
        assert_eq!(from_bytes(&engine, &nested_arrays(depth)), allow, "{depth}");
        assert_eq!(
            from_bytes(&engine, &nested_arrays(depth + 1)),
            input,
            "{depth}"
        );
    }
    let bound = capgate::limits::MAX_PAYLOAD_DEPTH;
    assert_refused_above_bound(
        Limits {
            max_payload_depth: bound + 1,
            ..Limits::DEFAULT
        },
        "max_payload_depth",
        bound as u64,
    );

    // max_request_bytes: a request of exactly the limit is decided, one byte more is refused.
    let engine = engine_under(
        Limits {
            max_request_bytes: 100,
            ..Limits::DEFAULT
        },
        &policy_with(""),
    )
    .unwrap();
    let padded = |len: usize| {
        let empty = r#"{"skill":"s","operation":"call","resource":"tool:t","payload":""}"#.len();
        format!("\"{}\"", "x".repeat(len - empty))
    };
    assert_eq!(from_bytes(&engine, &padded(100)), allow);
    assert_eq!(from_bytes(&engine, &padded(101)), input);
    let bound = capgate::limits::MAX_REQUEST_BYTES;
    engine_under(
        Limits {
            max_request_bytes: bound,
            ..Limits::DEFAULT
        },
        &policy_with(""),
    )
    .unwrap();
    if let Some(above) = bound.checked_add(1) {
        assert_refused_above_bound(
            Limits {
                max_request_bytes: above,
                ..Limits::DEFAULT
            },
            "max_request_bytes",
            bound as u64,
        );
    }

    // max_regex_bytes: the smallest limit a regex compiles under loads it and decides with it;
    // one byte less refuses the policy.
    let regex = policy_with(r"fieldMatches payload.s ~ /[a-z]{1,40}@example\.com/");
    let loads = |max_regex_bytes: usize| {
        engine_under(
            Limits {
                max_regex_bytes,
                ..Limits::DEFAULT
            },
            &regex,
        )
    };
    let (mut low, mut high) = (0_usize, 1 << 20);
    assert!(loads(high).is_ok() && loads(low).is_err());
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if loads(middle).is_ok() {
            high = middle;
        } else {
            low = middle;
        }
    }
    let engine = loads(high).unwrap();
    assert_eq!(from_bytes(&engine, r#"{"s":"ab@example.com"}"#), allow);
    assert_eq!(
        from_bytes(&engine, r#"{"s":"AB@example.com"}"#).1,
        "fieldMatches"
    );
    let refused = loads(high - 1).err().unwrap();
    assert!(refused.contains("regex"), "{refused}");

    // max_policy_file_bytes: a policy file of exactly the limit loads, one byte more does not.
    let text = policy_with("");
    let at = |max_policy_file_bytes: usize| Limits {
        max_policy_file_bytes,
        ..Limits::DEFAULT
    };
    engine_under(at(text.len()), &text).unwrap();
    let refused = engine_under(at(text.len() - 1), &text).err().unwrap();
    assert!(refused.contains(&(text.len() - 1).to_string()), "{refused}");
    let bound = capgate::limits::MAX_POLICY_FILE_BYTES;
    engine_under(at(bound), &text).unwrap();
    if let Some(above) = bound.checked_add(1) {
        assert_refused_above_bound(at(above), "max_policy_file_bytes", bound as u64);
    }

    // max_capabilities_per_skill: a skill with exactly the limit loads, one more does not.
    let capabilities: String = (0..3)
        .map(|i| {
            format!(
                "capability \"c{i}\" {{ resource tool \"t{i}\" operations call \
                 lifetime process justification \"limits\" }} "
            )
        })
        .collect();
    let skill = format!("skill \"s\" {{ version \"1\" {capabilities} }}");
    let at = |max_capabilities_per_skill: usize| Limits {
        max_capabilities_per_skill,
        ..Limits::DEFAULT
    };
    engine_under(at(3), &skill).unwrap();
    let refused = engine_under(at(2), &skill).err().unwrap();
    assert!(refused.contains("capabilities"), "{refused}");

    // max_array_scan: a `[*]` over exactly the limit is decided, one element more is refused.
    let engine = engine_under(
        Limits {
            max_array_scan: 4,
            ..Limits::DEFAULT
        },
        &policy_with("fieldRange payload.xs[*] >= 0"),
    )
    .unwrap();
    assert_eq!(from_bytes(&engine, r#"{"xs":[1,2,3,4]}"#), allow);
    assert_eq!(from_bytes(&engine, r#"{"xs":[1,2,3,4,5]}"#), input);

    // max_sliding_window: a window of exactly the limit compiles and allows its calls (the bug:
    // a limit raised past the runtime's bound compiled `rateLimit 15000 per hour`, which then
    // refused its first call); one call more per window does not compile; above the runtime's
    // bound the limit itself is refused.
    for window in [3_u64, capgate::limits::MAX_SLIDING_WINDOW] {
        let limits = Limits {
            max_sliding_window: window,
            ..Limits::DEFAULT
        };
        let engine = engine_under(
            limits,
            &policy_with(&format!("rateLimit {window} per hour")),
        )
        .unwrap();
        for _ in 0..window.min(3) {
            assert_eq!(from_bytes(&engine, "{}"), allow, "{window}");
        }
        let refused = engine_under(
            limits,
            &policy_with(&format!("rateLimit {} per hour", window + 1)),
        )
        .err()
        .unwrap();
        assert!(refused.contains(&window.to_string()), "{refused}");
    }
    let engine = engine_under(
        Limits {
            max_sliding_window: 3,
            ..Limits::DEFAULT
        },
        &policy_with("rateLimit 3 per hour"),
    )
    .unwrap();
    for _ in 0..3 {
        assert_eq!(from_bytes(&engine, "{}"), allow);
    }
    assert_eq!(from_bytes(&engine, "{}").1, "rateLimit");
    let bound = capgate::limits::MAX_SLIDING_WINDOW;
    assert_refused_above_bound(
        Limits {
            max_sliding_window: 20_000,
            ..Limits::DEFAULT
        },
        "max_sliding_window",
        bound,
    );

    // refuse_case_variant_members: on, an object with two member names equal under simple case
    // folding (ASCII case, LONG S) is refused, by the engine and by the strict parser; off, the
    // request is decided. A switch: `Limits::check` has no bound for it.
    let members = |refuse: bool| Limits {
        refuse_case_variant_members: refuse,
        ..Limits::DEFAULT
    };
    for payload in [r#"{"amount":1,"Amount":2}"#, r#"{"sku":1,"\u017fku":2}"#] {
        let request = format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{payload}}}"#
        );
        let engine = engine_under(members(true), &policy_with("")).unwrap();
        assert_eq!(from_bytes(&engine, payload), input, "{payload}");
        assert!(
            matches!(
                Request::from_slice(request.as_bytes(), &members(true)),
                Err(capgate::RequestError::CaseVariantMembers { .. })
            ),
            "{payload}"
        );
        let engine = engine_under(members(false), &policy_with("")).unwrap();
        assert_eq!(from_bytes(&engine, payload), allow, "{payload}");
        Request::from_slice(request.as_bytes(), &members(false)).unwrap();
    }

    // refuse_case_variant_reads: on, a member the policy reads that is absent while the object
    // has a case variant of its name refuses the request, from bytes and from a `Request`; off,
    // the read misses it and the `optional` constraint holds.
    let reads = |refuse: bool| {
        engine_under(
            Limits {
                refuse_case_variant_reads: refuse,
                ..Limits::DEFAULT
            },
            &policy_with("optional fieldRange payload.amount <= 100"),
        )
        .unwrap()
    };
    let in_memory = |engine: &Engine| {
        let decision = decide(engine, json!({"Amount": 1_000_000}));
        let first = decision
            .reasons
            .first()
            .map_or_else(String::new, |r| r.constraint.as_str().to_owned());
        (decision.verdict, first)
    };
    for (refuse, expected) in [(true, &input), (false, &allow)] {
        let engine = reads(refuse);
        assert_eq!(from_bytes(&engine, r#"{"amount":5}"#), allow, "{refuse}");
        assert_eq!(
            from_bytes(&engine, r#"{"Amount":1000000}"#),
            *expected,
            "{refuse}"
        );
        assert_eq!(in_memory(&engine), *expected, "{refuse}");
    }

    // max_regex_work: a request whose matches need exactly the limit is decided, one
    // byte-state less refuses it, from bytes and from a `Request`; each match costs its text's
    // bytes plus one times its regex's cost (`Matcher::work`). No bound: `Limits::check` takes
    // any value.
    let pattern = "[a-z]{1,8}(?:-[a-z]{1,8})*";
    let anchored = capgate::bytecode::matcher::Matcher::anchored(pattern).unwrap();
    let matcher = capgate::bytecode::matcher::Matcher::build(
        &anchored,
        false,
        Limits::DEFAULT.max_regex_bytes,
    )
    .unwrap();
    let (first, second) = ("abc-def", "ghi");
    let needed = matcher.work(first) + matcher.work(second);
    assert!(needed > 2, "{needed}");
    let work = |max_regex_work: u64| {
        engine_under(
            Limits {
                max_regex_work,
                ..Limits::DEFAULT
            },
            &policy_with(&format!(
                "fieldMatches payload.a ~ /{pattern}/ fieldMatches payload.b ~ /{pattern}/"
            )),
        )
        .unwrap()
    };
    let payload = format!(r#"{{"a":"{first}","b":"{second}"}}"#);
    let in_memory = |engine: &Engine| {
        let decision = decide(engine, serde_json::from_str(&payload).unwrap());
        let first = decision
            .reasons
            .first()
            .map_or_else(String::new, |r| r.constraint.as_str().to_owned());
        (decision.verdict, first)
    };
    for (limit, expected) in [(needed, &allow), (needed - 1, &input), (0, &input)] {
        let engine = work(limit);
        assert_eq!(from_bytes(&engine, &payload), *expected, "{limit}");
        assert_eq!(in_memory(&engine), *expected, "{limit}");
    }
    Limits {
        max_regex_work: u64::MAX,
        ..Limits::DEFAULT
    }
    .check()
    .unwrap();

    // max_regex_total_bytes: the smallest total the policy's regexes compile under loads it and
    // decides with it; one byte less refuses the policy. A pattern used twice is charged once,
    // and a `.capc` file of the same policy loads under exactly the same total: its regexes are
    // charged once, by the decoder, and the compile that checks each skill against its
    // manifest reuses them. No bound: `Limits::check` takes any value.
    let regexes = policy_with(
        r#"fieldMatches payload.s ~ /[a-z]{1,40}@example\.com/
        fieldMatches payload.t ~ /[a-z]{1,40}@example\.com/
        fieldMatches payload.n ~ /[0-9]{3,12}/i
        payloadSchema { "properties": { "z": { "pattern": "^[A-Z]{2}[0-9]{2,30}$" } } }"#,
    );
    let total = |max_regex_total_bytes: usize| Limits {
        max_regex_total_bytes,
        ..Limits::DEFAULT
    };
    let loads = |max_regex_total_bytes: usize| engine_under(total(max_regex_total_bytes), &regexes);
    let (mut low, mut high) = (0_usize, Limits::DEFAULT.max_regex_total_bytes);
    assert!(loads(high).is_ok() && loads(low).is_err());
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if loads(middle).is_ok() {
            high = middle;
        } else {
            low = middle;
        }
    }
    let engine = loads(high).unwrap();
    let good = r#"{"s":"ab@example.com","t":"cd@example.com","n":"12345","z":"DE89"}"#;
    assert_eq!(from_bytes(&engine, good), allow);
    assert_eq!(
        from_bytes(
            &engine,
            r#"{"s":"ab@example.com","t":"cd@example.com","n":"12","z":"DE89"}"#
        )
        .1,
        "fieldMatches"
    );
    let refused = loads(high - 1).err().unwrap();
    assert!(refused.contains("max_regex_total_bytes"), "{refused}");
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("limits.cap", regexes.clone(), PolicyFormat::Cap, None);
    let skills = loader.finish().unwrap().skills;
    let bytes = capgate::bytecode::encode::encode_capc(&skills).unwrap();
    capgate::compile::load_capc(&bytes, &total(high)).unwrap();
    let refused = capgate::compile::load_capc(&bytes, &total(high - 1))
        .err()
        .unwrap()
        .to_string();
    assert!(refused.contains("max_regex_total_bytes"), "{refused}");
    total(usize::MAX).check().unwrap();
}
