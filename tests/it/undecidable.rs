//! Tests that cannot decide (a wrong shape, a repeated query parameter, a value of the wrong
//! type): how the verifier traces their `not` parity, and how deny reasons, policy-test traces
//! and the REPL show them. Each was found in review of how `not` treats such tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use capgate::bytecode::index::{CheckIdx, ConstIdx, Index, JumpTarget, PathIdx};
use capgate::bytecode::op::Op;
use capgate::bytecode::program::{CheckInfo, CompiledPath, JsonRoot, PathAccess, Program};
use capgate::bytecode::verify::{VerifyReason, verify};
use capgate::value::Segment;
use capgate::{
    ConstraintKeyword, Engine, PolicyFormat, PolicyLoader, Request, SimulatedClock, Verdict,
};
use serde_json::json;

// ---------- F1: verifier parity for a value left below the jumped slot ----------

#[test]
/// A crafted program popped a slot on a jump's fall-through path and negated it on the jump
/// path; the verifier gave its test the fall-through parity, so an undecidable value passed. Code
/// that touches the slots below a jump before its target is refused (`UntraceableTest`).
fn regression_the_verifier_refuses_code_that_touches_a_slot_below_a_jump() {
    let c = |i: usize| CheckIdx::from_usize(i).unwrap();
    let code = vec![
        // 0: x = payload.user.role == "admin"          stack [x]
        Op::Equals {
            path: PathIdx::from_usize(0).unwrap(),
            value: ConstIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Push(true), // 1: [x, T]
        Op::OrElse {
            target: JumpTarget::from_usize(6).unwrap(),
        }, // 2: jumps with [x, T]
        Op::Require { check: c(0) }, // 3: (fall-through only) pops x
        Op::Push(false), // 4
        Op::Push(false), // 5: height 2, as on the jump
        Op::Require { check: c(1) }, // 6: pops T on the jump path
        Op::Not,        // 7: x reaches this Not on the jump path
        Op::Require { check: c(2) }, // 8
        Op::Accept,     // 9
    ];
    let check = |s: u32, e: u32| CheckInfo::new(ConstraintKeyword::Not, None, String::new(), s..e);
    let program = Program {
        debug: vec![None; code.len()],
        code,
        consts: vec![json!("admin")],
        paths: vec![CompiledPath {
            access: PathAccess::Json {
                root: JsonRoot::Payload,
                segments: vec![Segment::Key("user".into()), Segment::Key("role".into())],
            },
            text: "payload.user.role".into(),
        }],
        checks: vec![check(0, 4), check(4, 7), check(7, 9)],
        ..Program::default()
    };
    let error = verify(program).unwrap_err();
    assert_eq!(error.reason, VerifyReason::UntraceableTest, "{error}");
}

/// Found in review of the verifier's parity trace: every instruction scanned every jump not yet
/// reached, so verifying was quadratic in the number of open jumps. A crafted `.capc` of 40,000
/// `OrElse`s to one target took 1.2 s to verify (release build), and one filling the 4 MiB file
/// limit minutes — at load, before any request. Here 300,000 such jumps verify at once.
#[test]
fn regression_the_parity_trace_is_not_quadratic_in_open_jumps() {
    let jumps = 300_000;
    let target = JumpTarget::from_usize(2 * jumps + 1).unwrap();
    let mut code = Vec::with_capacity(2 * jumps + 3);
    for _ in 0..jumps {
        code.push(Op::Push(true));
        code.push(Op::OrElse { target });
    }
    code.push(Op::Push(true));
    code.push(Op::Require {
        check: CheckIdx::from_usize(0).unwrap(),
    });
    code.push(Op::Accept);
    let end = u32::try_from(code.len() - 1).unwrap();
    let program = Program {
        debug: vec![None; code.len()],
        code,
        checks: vec![CheckInfo::new(
            ConstraintKeyword::Any,
            None,
            String::new(),
            0..end,
        )],
        ..Program::default()
    };
    verify(program).unwrap();
}

// ---------- helpers ----------

const CAP_HEAD: &str = "skill \"s\" {\n  version \"1\"\n  capability \"c\" {\n    resource http \"https://api.example.com/items\"\n    operations GET\n";

fn loaded(constraint: &str) -> capgate::PolicySet {
    let mut loader = PolicyLoader::default();
    loader.add_text(
        "p.cap",
        format!("{CAP_HEAD}    {constraint}\n  }}\n}}\n"),
        PolicyFormat::Cap,
        None,
    );
    loader.finish().unwrap()
}

fn engine(constraint: &str) -> Engine {
    Engine::builder(loaded(constraint))
        .clock(Arc::new(SimulatedClock::new(
            "2026-12-01T12:00:00Z".parse().unwrap(),
        )))
        .build()
}

// ---------- F3: "cannot be decided" for a constraint that is decided ----------

#[test]
/// An undecidable test inside an `any` that held anyway took the place of the failure that
/// decided the check.
fn regression_a_deny_names_the_decisive_failure_not_an_irrelevant_undecidable_test() {
    let engine = engine(
        r#"all { any { fieldEquals payload.user.role == "admin" fieldEquals payload.ok == true } fieldEquals payload.x == 1 }"#,
    );
    let text = serde_json::to_vec(&json!({"skill": "s", "operation": "GET",
        "resource": "https://api.example.com/items",
        "payload": {"user": "bob", "ok": true, "x": 2}}))
    .unwrap();
    let decision = engine.check_slice(&text);
    assert_eq!(decision.verdict, Verdict::Deny);
    let reason = &decision.reasons[0];
    let request: Request = serde_json::from_slice(&text).unwrap();
    let _ = request;
    assert_eq!(reason.path.as_deref(), Some("payload.x"), "{reason:?}");
    assert!(!reason.message.contains("cannot be decided"), "{reason:?}");
}
