//! The VM tested apart from the compiler: hand-written programs, run against hand-built inputs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::ConstraintKeyword;
use capgate::bytecode::index::{CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SetIdx};
use capgate::bytecode::matcher::Matcher;
use capgate::bytecode::op::Op;
use capgate::bytecode::program::{
    CheckInfo, CompiledPath, CompiledRegex, JsonRoot, PathAccess, Program, ValueSet,
};
use capgate::bytecode::verify::verify;
use capgate::tape::Tape;
use capgate::value::Segment;
use capgate::vm::resource::{Bindings, RequestResource};
use capgate::vm::{
    Input, Outcome, RegexBudget, TestReport, Tracer, run, run_counted, trace_check, trace_from,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn path(segments: Vec<Segment>, text: &str) -> CompiledPath {
    CompiledPath {
        access: PathAccess::Json {
            root: JsonRoot::Payload,
            segments,
        },
        text: text.to_owned(),
    }
}

fn key(k: &str) -> Segment {
    Segment::Key(k.to_owned())
}

fn check(code_end: u32) -> CheckInfo {
    CheckInfo::new(
        ConstraintKeyword::FieldEquals,
        None,
        String::new(),
        0..code_end,
    )
}

fn program(code: Vec<Op>) -> Program {
    let debug = vec![None; code.len()];
    let end = u32::try_from(code.len()).unwrap();
    Program {
        code,
        debug,
        consts: vec![json!("primary"), json!(1)],
        paths: vec![
            path(vec![key("calendar")], "payload.calendar"),
            path(
                vec![key("attendees"), Segment::Wildcard, key("email")],
                "payload.attendees[*].email",
            ),
            path(vec![key("n")], "payload.n"),
        ],
        regexes: vec![CompiledRegex {
            regex: Matcher::build("^(?:[^@]+@example\\.com)$", false, 1 << 20).unwrap(),
            source: "[^@]+@example\\.com".to_owned(),
            case_insensitive: false,
        }],
        checks: vec![check(end)],
        ..Program::default()
    }
}

/// The input of a call of skill `s`, operation `call`, on `resource`, with these documents.
fn input_with<'a, J>(
    documents: [J; 3],
    resource: &'a RequestResource<'a>,
    bindings: &'a Bindings<'a>,
    regex_budget: &'a RegexBudget,
) -> Input<'a, J> {
    crate::common::vm_input(documents, "call", resource, bindings, regex_budget)
}

fn with_input<R>(payload: Value, f: impl FnOnce(&Input<'_, &Value>) -> R) -> R {
    let resource = RequestResource::parse("tool:x").unwrap();
    let bindings = Bindings::new();
    let null = Value::Null;
    let budget = RegexBudget::unlimited();
    f(&input_with(
        [&payload, &null, &null],
        &resource,
        &bindings,
        &budget,
    ))
}

fn p(i: usize) -> PathIdx {
    PathIdx::from_usize(i).unwrap()
}

fn check0() -> CheckIdx {
    CheckIdx::from_usize(0).unwrap()
}

#[test]
fn equals_then_require_accepts_and_fails() {
    let code = vec![
        Op::Equals {
            path: p(0),
            value: ConstIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Require { check: check0() },
        Op::Accept,
    ];
    let verified = verify(program(code)).unwrap();
    with_input(json!({"calendar": "primary"}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Accepted);
    });
    with_input(json!({"calendar": "team"}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check0()));
    });
    with_input(json!({}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check0()));
    });
}

#[test]
fn or_else_short_circuits_over_a_failing_first_alternative() {
    // any { calendar == "primary"  ;  n == 1 }
    let code = vec![
        Op::Equals {
            path: p(0),
            value: ConstIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::OrElse {
            target: JumpTarget::from_usize(3).unwrap(),
        },
        Op::Equals {
            path: p(2),
            value: ConstIdx::from_usize(1).unwrap(),
            optional: false,
        },
        Op::Require { check: check0() },
        Op::Accept,
    ];
    let verified = verify(program(code)).unwrap();
    with_input(json!({"calendar": "x", "n": 1.0}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Accepted);
    });
    with_input(json!({"calendar": "primary"}), |input| {
        let (outcome, steps) = run_counted(&verified, input).unwrap();
        assert_eq!(outcome, Outcome::Accepted);
        // The jump skipped the second test.
        assert_eq!(steps.instructions, 4);
    });
    with_input(json!({"calendar": "x", "n": 2}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check0()));
    });
}

#[test]
fn wildcard_match_holds_for_empty_arrays_and_fails_on_one_bad_element() {
    let code = vec![
        Op::Matches {
            path: p(1),
            regex: RegexIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Require { check: check0() },
        Op::Accept,
    ];
    let verified = verify(program(code)).unwrap();
    with_input(json!({"attendees": []}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Accepted);
    });
    with_input(
        json!({"attendees": [{"email": "a@example.com"}, {"email": "b@evil.com"}]}),
        |input| assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check0())),
    );
    with_input(json!({"attendees": [{"email": 3}]}), |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check0()));
    });
}

#[test]
fn arrays_longer_than_the_scan_limit_are_an_error_not_a_decision() {
    let code = vec![
        Op::Matches {
            path: p(1),
            regex: RegexIdx::from_usize(0).unwrap(),
            optional: true,
        },
        Op::Not,
        Op::Require { check: check0() },
        Op::Accept,
    ];
    let verified = verify(program(code)).unwrap();
    let many: Vec<Value> = (0..101)
        .map(|_| json!({"email": "a@example.com"}))
        .collect();
    with_input(json!({ "attendees": many }), |input| {
        assert!(run(&verified, input).is_err());
    });
}

/// The documented bound (docs/bytecode.md): instructions ≤ code length; visits ≤ tests × (N + 2)
/// where N counts the payload's nodes.
#[test]
fn steps_stay_within_the_documented_bound() {
    let code = vec![
        Op::Matches {
            path: p(1),
            regex: RegexIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::AndThen {
            target: JumpTarget::from_usize(3).unwrap(),
        },
        Op::Equals {
            path: p(0),
            value: ConstIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Require { check: check0() },
        Op::Accept,
    ];
    let verified = verify(program(code.clone())).unwrap();
    for n in [0usize, 1, 7, 50] {
        let attendees: Vec<Value> = (0..n)
            .map(|i| json!({"email": format!("u{i}@example.com")}))
            .collect();
        let payload = json!({"calendar": "primary", "attendees": attendees});
        let nodes = count_nodes(&payload);
        with_input(payload, |input| {
            let (_, steps) = run_counted(&verified, input).unwrap();
            let tests = code.iter().filter(|op| op.is_test()).count() as u64;
            assert!(steps.instructions <= code.len() as u64);
            assert!(
                steps.visits <= tests * (nodes + 2),
                "{steps:?} nodes={nodes}"
            );
        });
    }
}

fn count_nodes(value: &Value) -> u64 {
    1 + match value {
        Value::Array(items) => items.iter().map(count_nodes).sum(),
        Value::Object(map) => map.values().map(count_nodes).sum(),
        _ => 0,
    }
}

/// Every test report and `Require` a trace produced, in order.
#[derive(Default)]
struct Transcript {
    tests: Vec<(usize, bool, Option<String>, String)>,
    requires: Vec<(usize, bool)>,
}

impl Tracer for Transcript {
    fn test(&mut self, report: TestReport) {
        self.tests
            .push((report.at, report.holds, report.path, report.message));
    }
    fn require(&mut self, check: CheckIdx, holds: bool) {
        self.requires.push((check.to_usize(), holds));
    }
}

/// `calendar == "primary"`, then every attendee's email on example.com: two checks, the second
/// failing on `attendees[1]`, traced by `trace_check` and by `trace_from` its first instruction.
fn trace_second_check(ranges: [(u32, u32); 2]) -> (Transcript, Transcript) {
    let check1 = CheckIdx::from_usize(1).unwrap();
    let code = vec![
        Op::Equals {
            path: p(0),
            value: ConstIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Require { check: check0() },
        Op::Matches {
            path: p(1),
            regex: RegexIdx::from_usize(0).unwrap(),
            optional: false,
        },
        Op::Require { check: check1 },
        Op::Accept,
    ];
    let mut program = program(code);
    program.checks = ranges
        .iter()
        .map(|&(start, end)| {
            let mut check = check(end);
            check.set_code(start..end);
            check
        })
        .collect();
    let verified = verify(program).unwrap();
    let payload = json!({
        "calendar": "primary",
        "attendees": [{"email": "a@example.com"}, {"email": "eve@evil.com"}]
    });
    with_input(payload, |input| {
        assert_eq!(run(&verified, input).unwrap(), Outcome::Failed(check1));
        let mut alone = Transcript::default();
        let outcome = trace_check(&verified, input, &mut alone, check1).unwrap();
        assert_eq!(outcome, Outcome::Failed(check1));
        let mut from_start = Transcript::default();
        let start = usize::try_from(verified.checks[1].code().start).unwrap();
        let outcome = trace_from(&verified, input, &mut from_start, false, start).unwrap();
        assert_eq!(outcome, Outcome::Failed(check1));
        (alone, from_start)
    })
}

#[test]
fn a_self_contained_failing_check_is_explained_by_running_it_alone() {
    let (alone, from_start) = trace_second_check([(0, 2), (2, 4)]);
    // The same explanation of the failing check...
    assert_eq!(alone.tests, from_start.tests);
    assert_eq!(
        alone.tests,
        [(
            2,
            false,
            Some("payload.attendees[1].email".to_owned()),
            r#"value "eve@evil.com" does not match /[^@]+@example\.com/"#.to_owned()
        )]
    );
    // ...without running the check before it.
    assert_eq!(alone.requires, [(1, false)]);
    assert_eq!(from_start.requires, [(0, true), (1, false)]);
}

#[test]
fn a_check_that_is_not_self_contained_is_explained_from_the_start_of_the_program() {
    // Overlapping ranges: the second check is not self-contained.
    let (alone, from_start) = trace_second_check([(0, 3), (2, 4)]);
    assert_eq!(alone.tests, from_start.tests);
    assert_eq!(alone.requires, [(0, true), (1, false)]);
    assert_eq!(from_start.requires, alone.requires);
}

/// A JSON value for the path-comparison property: objects keyed by the paths' own names (so the
/// paths often reach something), with every kind of leaf.
fn comparison_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => Just(Value::Null),
        1 => Just(json!(true)),
        1 => Just(json!(1)),
        1 => Just(json!(1.0)),
        1 => Just(json!("a")),
        1 => Just(json!("b")),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec!["organizer", "email", "x"]),
                inner,
                0..3,
            )
            .prop_map(|members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect(),
                )
            }),
        ]
    })
}

fn rooted(root: JsonRoot, segments: Vec<Segment>, text: &str) -> CompiledPath {
    CompiledPath {
        access: PathAccess::Json { root, segments },
        text: text.to_owned(),
    }
}

/// One test over the paths below, maybe under a `not`: `path == other` (`EqualsPath`), `path
/// binds other` (`BindsIdentity`), `path == "a"` (`Equals`), `path in ["a", 1]` (`InSet`) or
/// `path ~ /a|b/` (`Matches`).
fn comparison_program(
    kind: usize,
    path: usize,
    other: usize,
    optional: bool,
    negated: bool,
) -> Program {
    let (path, other) = (p(path), p(other));
    let test = match kind {
        0 => Op::EqualsPath {
            path,
            other,
            optional,
        },
        1 => Op::BindsIdentity {
            path,
            identity: other,
            optional,
        },
        2 => Op::Equals {
            path,
            value: ConstIdx::from_usize(0).unwrap(),
            optional,
        },
        3 => Op::InSet {
            path,
            set: SetIdx::from_usize(0).unwrap(),
            optional,
        },
        _ => Op::Matches {
            path,
            regex: RegexIdx::from_usize(0).unwrap(),
            optional,
        },
    };
    let mut code = vec![test];
    if negated {
        code.push(Op::Not);
    }
    code.extend([Op::Require { check: check0() }, Op::Accept]);
    let end = u32::try_from(code.len()).unwrap();
    Program {
        debug: vec![None; code.len()],
        code,
        consts: vec![json!("a")],
        sets: vec![ValueSet {
            values: vec![json!("a"), json!(1)],
        }],
        regexes: vec![CompiledRegex {
            regex: Matcher::build("^(?:a|b)$", false, 1 << 20).unwrap(),
            source: "a|b".to_owned(),
            case_insensitive: false,
        }],
        paths: vec![
            rooted(
                JsonRoot::Payload,
                vec![key("organizer"), key("email")],
                "payload.organizer.email",
            ),
            rooted(JsonRoot::Agent, vec![key("email")], "agent.email"),
            rooted(JsonRoot::Agent, Vec::new(), "agent"),
            rooted(
                JsonRoot::Payload,
                vec![key("x"), Segment::Index(0)],
                "payload.x[0]",
            ),
            rooted(
                JsonRoot::Agent,
                vec![key("x"), key("email")],
                "agent.x.email",
            ),
        ],
        checks: vec![check(end)],
        ..Program::default()
    }
}

/// `run` with these documents as payload and agent, on a `Value` and on a tape, and `trace`
/// (which never takes the VM's shortcuts) on a `Value`.
fn comparison_outcomes(program: &Program, payload: &Value, agent: &Value) -> [Outcome; 3] {
    let verified = verify(program.clone()).unwrap();
    let resource = RequestResource::parse("tool:x").unwrap();
    let bindings = Bindings::new();
    let null = Value::Null;
    let budget = RegexBudget::unlimited();
    let input = input_with([payload, agent, &null], &resource, &bindings, &budget);
    let fast = run(&verified, &input).unwrap();
    let traced = trace_from(&verified, &input, &mut Transcript::default(), false, 0).unwrap();
    let (payload_bytes, agent_bytes) = (payload.to_string(), agent.to_string());
    let (mut payload_tape, mut agent_tape) = (Tape::new(), Tape::new());
    let payload_doc = payload_tape.parse(payload_bytes.as_bytes(), 64).unwrap();
    let agent_doc = agent_tape.parse(agent_bytes.as_bytes(), 64).unwrap();
    let tape_input = input_with(
        [payload_doc.root(), agent_doc.root(), capgate::tape::null()],
        &resource,
        &bindings,
        &budget,
    );
    let on_tape = run(&verified, &tape_input).unwrap();
    [fast, on_tape, traced]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8192))]

    /// `EqualsPath` and `BindsIdentity` on key-only paths that both reach a value (an identity
    /// that is not `null`) are decided on the two values without the walks; everything else
    /// takes them. `run`, on a `Value` and on a tape, must give the outcome the trace (which
    /// always walks) gives, whatever the documents' shapes; the other key-path tests are
    /// checked the same way.
    #[test]
    fn key_path_tests_decide_alike_with_and_without_the_shortcut(
        payload in comparison_value(),
        agent in comparison_value(),
        kind in 0usize..5,
        path in 0usize..5,
        other in 0usize..5,
        optional in any::<bool>(),
        negated in any::<bool>(),
    ) {
        let program = comparison_program(kind, path, other, optional, negated);
        let [fast, on_tape, traced] = comparison_outcomes(&program, &payload, &agent);
        prop_assert_eq!(fast, traced);
        prop_assert_eq!(on_tape, traced);
    }
}
