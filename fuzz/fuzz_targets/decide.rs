//! The whole decision path. A structured request (a skill of the corpus or an arbitrary name,
//! an operation, a resource built from a capability's template, payload/agent/context JSON,
//! autonomy, time, hash) or raw request bytes, decided by a stateless engine over `../policies`
//! with a simulated clock. Never panics, and:
//! - an `allow` names a capability of the skill that allows the operation and covers the
//!   resource, with no reasons; an `approval_required` names one too, with its gating reason;
//! - a `deny` names no capability and gives at least one reason;
//! - the same request decides the same way twice, through `check` and through `check_slice` on
//!   its wire form, and an observe-mode engine's effective decision is the enforcing one's;
//! - `check_doc` on the bytes parsed by the caller (with a far larger depth limit) equals
//!   `check_slice` on them;
//! - the tape path agrees with the full parse: for every wire form of a structured request
//!   (compact, pretty, every string character `\u`-escaped) and for raw bytes that are a valid
//!   request, `check_slice` equals `check` on the parsed request, and `check_slice_tape_only`,
//!   when it reads the bytes as a request at all, gives the same verdict (and, for an allow, the
//!   same whole `Decision`); for bytes the full parser refuses, `check_slice` denies and
//!   `check_slice_tape_only` never allows;
//! - a structured request with two member names equal up to case (which `check` takes as
//!   built) has every wire form refused with reason `input`.
#![no_main]

use std::sync::{Arc, OnceLock};

use arbitrary::{Arbitrary, Result, Unstructured};
use capgate::vm::resource::{Bindings, RequestResource};
use capgate::{Decision, Engine, ReasonKind, Request, RequestError, SimulatedClock, Verdict};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn engine(observe: bool) -> Engine {
    let policy = capgate_fuzz::corpus_loader()
        .finish()
        .unwrap_or_else(|e| panic!("the policy corpus does not load: {:?}", e.diagnostics));
    let start = chrono::DateTime::parse_from_rfc3339("2026-12-01T15:00:00Z")
        .unwrap_or_else(|e| panic!("{e}"))
        .to_utc();
    Engine::builder(policy)
        .clock(Arc::new(SimulatedClock::new(start)))
        .observe(observe)
        .build()
}

fn enforcing() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| engine(false))
}

fn observing() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| engine(true))
}

#[derive(Debug)]
enum Case {
    Structured(Request),
    Raw(Vec<u8>),
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        if u.ratio(1, 8)? {
            return Ok(Case::Raw(u.arbitrary()?));
        }
        Ok(Case::Structured(capgate_fuzz::arbitrary_request(u)?))
    }
}

fn check_shape(request: Option<&Request>, decision: &Decision) {
    match decision.verdict {
        Verdict::Allow => {
            assert!(
                decision.reasons.is_empty(),
                "allow with reasons: {decision:?}"
            );
            let capability = decision.capability.as_deref();
            let capability =
                capability.unwrap_or_else(|| panic!("allow names no capability: {decision:?}"));
            let skills = capgate_fuzz::corpus();
            let skill = skills.iter().find(|s| s.name == decision.skill);
            let skill = skill.unwrap_or_else(|| panic!("allow for an unknown skill: {decision:?}"));
            let compiled = skill.capability(capability);
            let compiled = compiled.unwrap_or_else(|| {
                panic!("allow names a capability the skill lacks: {decision:?}")
            });
            if let Some(request) = request {
                assert!(
                    compiled.allows_operation(&request.operation),
                    "allow for an operation the capability lacks: {decision:?}"
                );
                let resource = RequestResource::parse(&request.resource)
                    .unwrap_or_else(|e| panic!("allow for a refused resource ({e}): {decision:?}"));
                let mut bindings = Bindings::new();
                assert!(
                    compiled.resource().matches(&resource, &mut bindings),
                    "allow for a resource the capability does not cover: {decision:?}"
                );
            }
        }
        Verdict::ApprovalRequired => {
            assert!(
                decision.capability.is_some(),
                "approval_required names no capability: {decision:?}"
            );
            assert!(
                !decision.reasons.is_empty(),
                "approval_required without a reason: {decision:?}"
            );
        }
        Verdict::Deny => {
            assert!(
                decision.capability.is_none(),
                "deny names a capability: {decision:?}"
            );
            assert!(
                !decision.reasons.is_empty(),
                "deny without a reason: {decision:?}"
            );
        }
    }
    assert!(
        decision.observed.is_none(),
        "an enforcing engine reported an observed verdict"
    );
    if let Some(request) = request {
        assert_eq!(
            &*decision.skill,
            request.skill.as_str(),
            "decision for another skill"
        );
    }
}

/// `check_slice` and the tape path on `bytes` agree with `check` on the request the full parser
/// reads from them (and with `expected`, the decision of the request they were written from).
fn check_wire(engine: &Engine, bytes: &[u8], expected: Option<&Decision>) {
    let tape = engine.check_slice_tape_only(bytes);
    let slice = engine.check_slice(bytes);
    // A caller that parsed the bytes itself, with a depth limit far above the engine's, gets
    // exactly `check_slice`'s decision from `check_doc`.
    if let Ok(doc) = capgate::tape::Tape::new().parse(bytes, 4_096) {
        assert_eq!(
            engine.check_doc(&doc),
            slice,
            "check_doc differs from check_slice on the same bytes"
        );
    }
    match Request::from_slice(bytes, engine.limits()) {
        Ok(request) => {
            let full = engine.check(&request);
            if let Some(expected) = expected {
                assert_eq!(&full, expected, "the parsed wire form decided differently");
            }
            assert_eq!(
                slice, full,
                "check_slice differs from check on the parsed request"
            );
            if let Some(tape) = tape {
                assert_eq!(
                    tape.verdict, full.verdict,
                    "the tape path's verdict differs from the full parse's: {tape:?} vs {full:?}"
                );
                if tape.verdict == Verdict::Allow {
                    assert_eq!(
                        tape, full,
                        "the tape path's allow differs from the full parse's"
                    );
                }
            }
        }
        Err(error) => {
            assert_ne!(
                slice.verdict,
                Verdict::Allow,
                "check_slice allowed bytes the full parser refuses ({error})"
            );
            if let Some(tape) = tape {
                assert_ne!(
                    tape.verdict,
                    Verdict::Allow,
                    "the tape path allowed bytes the full parser refuses ({error}): {tape:?}"
                );
            }
            if let Some(expected) = expected {
                // Only a request that breaks a limit fails to parse back from its own wire form,
                // and `check` denies it too.
                assert_eq!(
                    slice, *expected,
                    "a wire form the full parser refuses ({error}) decided differently"
                );
            }
        }
    }
}

/// `value` as JSON text with every character of every string (keys too) written as a `\u`
/// escape (surrogate pairs beyond the BMP), in lower or upper case hex.
fn escaped_json(value: &Value, upper: bool, out: &mut String) {
    fn string(text: &str, upper: bool, out: &mut String) {
        out.push('"');
        for ch in text.chars() {
            for unit in ch.encode_utf16(&mut [0; 2]) {
                if upper {
                    out.push_str(&format!("\\u{unit:04X}"));
                } else {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        out.push('"');
    }
    match value {
        Value::String(text) => string(text, upper, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                escaped_json(item, upper, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(key, upper, out);
                out.push(':');
                escaped_json(item, upper, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fuzz_target!(|case: Case| {
    let engine = enforcing();
    match case {
        Case::Raw(bytes) => {
            let decision = engine.check_slice(&bytes);
            check_shape(None, &decision);
            assert_eq!(
                decision,
                engine.check_slice(&bytes),
                "raw request decided two ways"
            );
            check_wire(engine, &bytes, None);
        }
        Case::Structured(request) => {
            let decision = engine.check(&request);
            check_shape(Some(&request), &decision);
            assert_eq!(decision, engine.check(&request), "request decided two ways");
            let wire = serde_json::to_vec(&request).unwrap_or_else(|e| panic!("{e}"));
            let pretty = serde_json::to_vec_pretty(&request).unwrap_or_else(|e| panic!("{e}"));
            let tree = serde_json::to_value(&request).unwrap_or_else(|e| panic!("{e}"));
            let mut escaped = String::new();
            escaped_json(&tree, wire.len() % 2 == 0, &mut escaped);
            let wire_forms = [wire.as_slice(), pretty.as_slice(), escaped.as_bytes()];
            // A request built in memory with two member names equal up to case is taken as
            // built by `check`; its wire forms are refused by every parser (reason `input`).
            if let Err(RequestError::CaseVariantMembers { .. }) =
                Request::from_value(tree.clone(), engine.limits())
            {
                for bytes in wire_forms {
                    let slice = engine.check_slice(bytes);
                    assert_eq!(slice.verdict, Verdict::Deny, "case variants allowed");
                    assert_eq!(
                        slice.reasons.first().map(|r| r.constraint),
                        Some(ReasonKind::Input),
                        "case variants refused for another reason: {slice:?}"
                    );
                    check_wire(engine, bytes, None);
                }
                return;
            }
            assert_eq!(
                decision,
                engine.check_slice(&wire),
                "wire form decided differently"
            );
            for bytes in wire_forms {
                check_wire(engine, bytes, Some(&decision));
            }
            let observed = observing().check(&request);
            assert_eq!(observed.verdict, Verdict::Allow, "observe mode enforced");
            assert_eq!(
                observed.effective(),
                decision.verdict,
                "observe mode saw another decision"
            );
            let _ = engine.explain(&request);
        }
    }
});
