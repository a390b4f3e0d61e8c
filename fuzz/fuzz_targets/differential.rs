//! The VM against the reference evaluator (`capgate::reference`, behind the `reference`
//! feature). A request from the `decide` generator is decided by a stateless engine over
//! `../policies` (compiler → verified bytecode → VM) and by `reference::decide` walking the ASTs
//! of the same files, at the same instant. They must agree on the verdict, the deciding
//! capability, and the (capability, constraint) of every reason.
//!
//! Build with `--features differential` (see `Cargo.toml`).
#![no_main]

use std::sync::{Arc, OnceLock};

use capgate::reference::{self, ReferenceDecision, ReferenceFailure};
use capgate::span::SourceMap;
use capgate::syntax::ast::PolicyFile;
use capgate::{Decision, Engine, Request, SimulatedClock};
use libfuzzer_sys::fuzz_target;

/// The instant the simulated clock reads (a request's `time` overrides it for both sides).
const NOW: &str = "2026-12-01T15:00:00Z";

fn now() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(NOW)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_utc()
}

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let policy = capgate_fuzz::corpus_loader()
            .finish()
            .unwrap_or_else(|e| panic!("the policy corpus does not load: {:?}", e.diagnostics));
        Engine::builder(policy)
            .clock(Arc::new(SimulatedClock::new(now())))
            .build()
    })
}

/// The ASTs of the same files the engine loaded: every `.cap` under `../policies` and the
/// built-in policy. (JSON manifests and `payloadSchema file` references are left to the
/// engine's loader; a skill that needs them is skipped below.)
fn files() -> &'static [PolicyFile] {
    static FILES: OnceLock<Vec<PolicyFile>> = OnceLock::new();
    FILES.get_or_init(|| {
        let mut texts = vec![capgate_fuzz::BUILTIN_POLICY.to_owned()];
        let mut stack = vec![capgate_fuzz::policies_dir()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "cap") {
                    texts.push(std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        let mut sources = SourceMap::new();
        texts
            .iter()
            .filter_map(|text| {
                let id = sources.add("policy.cap", text.as_str());
                capgate::syntax::parse(id, text).ok()
            })
            .collect()
    })
}

fn engine_view(decision: &Decision) -> ReferenceDecision {
    ReferenceDecision {
        verdict: decision.verdict,
        capability: decision.capability.as_deref().map(str::to_owned),
        failures: decision
            .reasons
            .iter()
            .map(|r| ReferenceFailure {
                capability: r.capability.as_deref().map(str::to_owned),
                constraint: r.constraint.as_str(),
            })
            .collect(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = arbitrary::Unstructured::new(data);
    let Ok(mut request): arbitrary::Result<Request> = capgate_fuzz::arbitrary_request(&mut u)
    else {
        return;
    };
    // The reference takes the clock as an argument and does not read `time`; an unparseable
    // `time` is an input error of the engine alone (covered by the `decide` target), so it is
    // dropped here and both sides decide at the harness clock.
    if request
        .time
        .as_deref()
        .is_some_and(|t| capgate::parse_timestamp(t).is_none())
    {
        request.time = None;
    }
    // Only skills whose AST we hold are compared (see `files`).
    let known = files()
        .iter()
        .flat_map(|f| f.skills.iter())
        .any(|s| s.name.node == request.skill);
    let loaded = capgate_fuzz::corpus()
        .iter()
        .any(|s| *s.name == request.skill);
    if loaded && !known {
        return;
    }
    let at = request
        .time
        .as_deref()
        .and_then(capgate::parse_timestamp)
        .unwrap_or_else(now);
    let engine = engine_view(&engine().check(&request));
    let expected = reference::decide(files(), &request, at);
    assert_eq!(
        engine, expected,
        "the VM and the reference disagree on {request:?}"
    );
});
