//! `capgate convert` keeps decisions: every bundled policy, converted to its other form, decides
//! the same requests (the session calls next to it, and mutations of them) the same way.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use capgate::manifest::to_json_text;
use capgate::span::FileId;
use capgate::syntax::ast::PolicyFile;
use capgate::{
    Engine, Limits, PolicyFormat, PolicyLoader, Request, SimulatedClock, parse_timestamp,
};
use capgate_authoring::format::{policy_to_cap, same_policy};
use proptest::prelude::*;
use serde_json::Value;

const POLICIES: [&str; 6] = [
    "coding-agent-tools/coding-agent-tools.cap",
    "crm-summarizer/crm-summarizer.json",
    "crm-writer/crm-writer.cap",
    "email-send/email-send.cap",
    "meeting-scheduler/meeting-scheduler.cap",
    "payments-transfer/payments-transfer.json",
];

fn read(relative: &str) -> String {
    std::fs::read_to_string(format!("{}/policies/{relative}", crate::common::REPO)).unwrap()
}

fn parse(text: &str, format: PolicyFormat) -> PolicyFile {
    match format {
        PolicyFormat::Cap => capgate::syntax::parse(FileId(0), text).unwrap(),
        PolicyFormat::Json => capgate::manifest::parse_manifest(FileId(0), text).unwrap(),
    }
}

fn engine(text: String, format: PolicyFormat) -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("policy", text, format, None);
    let policy = loader.finish().unwrap_or_else(|e| panic!("{e}"));
    let now = parse_timestamp("2026-12-01T15:00:00Z").unwrap();
    Engine::builder(policy)
        .clock(Arc::new(SimulatedClock::new(now)))
        .build()
}

/// The policy in its own form and in the other, each as an engine.
fn both_forms(relative: &str) -> (Engine, Engine) {
    let text = read(relative);
    if relative.ends_with(".cap") {
        let converted = to_json_text(&parse(&text, PolicyFormat::Cap)).unwrap();
        (
            engine(text, PolicyFormat::Cap),
            engine(converted, PolicyFormat::Json),
        )
    } else {
        let converted = policy_to_cap(&parse(&text, PolicyFormat::Json));
        (
            engine(text, PolicyFormat::Json),
            engine(converted, PolicyFormat::Cap),
        )
    }
}

/// The `call` requests of the session file next to a policy.
fn session_calls(relative: &str) -> Vec<Value> {
    let session = relative.rsplit_once('.').unwrap().0.to_owned() + ".session.jsonl";
    read(&session)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line.get("call").cloned())
        .collect()
}

fn verdicts_agree(original: &Engine, converted: &Engine, call: &Value) -> Result<(), String> {
    let bytes = serde_json::to_vec(call).unwrap();
    let Ok(mut request) = Request::from_slice(&bytes, &Limits::DEFAULT) else {
        return Ok(());
    };
    request.grant = None;
    let a = original.check(&request);
    let b = converted.check(&request);
    if a.verdict == b.verdict {
        Ok(())
    } else {
        Err(format!("{call}: {:?} vs {:?}", a.verdict, b.verdict))
    }
}

#[test]
fn every_bundled_policy_converts_and_decides_its_session_calls_alike() {
    for relative in POLICIES {
        let (original, converted) = both_forms(relative);
        let calls = session_calls(relative);
        assert!(!calls.is_empty(), "{relative}");
        for call in &calls {
            verdicts_agree(&original, &converted, call).unwrap();
        }
    }
}

#[test]
fn every_bundled_cap_policy_prints_back_to_the_same_ast() {
    for relative in POLICIES.iter().filter(|p| p.ends_with(".cap")) {
        let ast = parse(&read(relative), PolicyFormat::Cap);
        let printed = policy_to_cap(&ast);
        assert!(
            same_policy(&ast, &parse(&printed, PolicyFormat::Cap)),
            "{relative}\n{printed}"
        );
    }
}

#[test]
fn every_bundled_policy_survives_a_round_trip_through_the_other_form() {
    for relative in POLICIES {
        let text = read(relative);
        if relative.ends_with(".cap") {
            let ast = parse(&text, PolicyFormat::Cap);
            let json = to_json_text(&ast).unwrap();
            let back = policy_to_cap(&parse(&json, PolicyFormat::Json));
            engine(back, PolicyFormat::Cap);
        } else {
            let ast = parse(&text, PolicyFormat::Json);
            let cap = policy_to_cap(&ast);
            let back = to_json_text(&parse(&cap, PolicyFormat::Cap)).unwrap();
            assert_eq!(back, to_json_text(&ast).unwrap(), "{relative}");
        }
    }
}

/// One change to a request: a different operation, a payload member dropped or replaced, or a
/// different agent id.
fn mutate(call: &mut Value, kind: u8, pick: usize) {
    const OPERATIONS: [&str; 8] = [
        "GET", "POST", "DELETE", "SELECT", "INSERT", "call", "read", "use",
    ];
    const VALUES: [&str; 4] = ["", "x", "acme", "rec_0123456789ab"];
    match kind % 4 {
        0 => {
            if let Some(call) = call.as_object_mut() {
                call.insert(
                    "operation".to_owned(),
                    Value::from(OPERATIONS[pick % OPERATIONS.len()]),
                );
            }
        }
        1 => {
            if let Some(payload) = call.get_mut("payload").and_then(Value::as_object_mut)
                && let Some(key) = payload.keys().nth(pick % payload.len().max(1)).cloned()
            {
                payload.remove(&key);
            }
        }
        2 => {
            if let Some(payload) = call.get_mut("payload").and_then(Value::as_object_mut)
                && let Some(key) = payload.keys().nth(pick % payload.len().max(1)).cloned()
            {
                payload.insert(key, Value::from(VALUES[pick % VALUES.len()]));
            }
        }
        _ => {
            if let Some(agent) = call.get_mut("agent").and_then(Value::as_object_mut) {
                agent.insert("id".to_owned(), Value::from(VALUES[pick % VALUES.len()]));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn converted_policies_decide_mutated_requests_alike(
        policy in 0usize..POLICIES.len(),
        call_pick in any::<usize>(),
        changes in proptest::collection::vec((any::<u8>(), any::<usize>()), 0..4),
    ) {
        let relative = POLICIES[policy];
        let (original, converted) = both_forms(relative);
        let calls = session_calls(relative);
        let mut call = calls[call_pick % calls.len()].clone();
        for (kind, pick) in changes {
            mutate(&mut call, kind, pick);
        }
        prop_assert!(verdicts_agree(&original, &converted, &call).is_ok(), "{:?}", verdicts_agree(&original, &converted, &call));
    }
}

/// The bundled policies are kept in the canonical layout (`capgate fmt --check policies` passes).
#[test]
fn bundled_policies_are_formatted() {
    let mut files = Vec::new();
    let mut stack = vec![std::path::Path::new(crate::common::REPO).join("policies")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "cap") {
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let formatted = capgate_authoring::format::format_cap(&text).unwrap();
        assert_eq!(formatted, text, "{} is not formatted", file.display());
    }
}

/// A zero duration (`<= 0s`, valid in a `fieldRange` difference) prints as `0s` in `fmt`,
/// `convert` and `disasm` (regression: every unit divides zero, and it printed as `0d`).
#[test]
fn a_zero_duration_prints_as_0s() {
    let text = "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource http \"https://a.example.com/x\"\n    operations GET\n    fieldRange payload.a - payload.b <= 0ms\n  }\n}\n";
    let policy = parse(text, PolicyFormat::Cap);
    assert!(policy_to_cap(&policy).contains("<= 0s"));
    assert!(to_json_text(&policy).unwrap().contains(r#""max": "0s""#));
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("z.cap", text.to_owned(), PolicyFormat::Cap, None);
    let loaded = loader.finish().unwrap();
    let program = loaded.skills[0].capabilities[0].program();
    let listing = capgate::bytecode::disasm::disassemble(program);
    assert!(listing.contains("(<= 0s)"), "{listing}");
    assert!(!listing.contains("0d"), "{listing}");
}
