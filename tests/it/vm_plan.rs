//! The plan held to the program: `run` (which tries the plan first) must give exactly
//! what `run_unplanned` gives, for every program of the planned shape and every input, on a
//! `Value` and on a tape; and the plan must actually take the common allows.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::ConstraintKeyword;
use capgate::bytecode::index::{
    CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
};
use capgate::bytecode::matcher::Matcher;
use capgate::bytecode::op::Op;
use capgate::bytecode::plan::Shape;
use capgate::bytecode::program::{
    CheckInfo, CompiledPath, CompiledRegex, JsonRoot, PathAccess, Program, ValueSet,
};
use capgate::bytecode::resource::ResourcePattern;
use capgate::bytecode::verify::{VerifiedProgram, verify};
use capgate::syntax::ast::ResourceKind;
use capgate::tape::Tape;
use capgate::value::Segment;
use capgate::vm::resource::{Bindings, RequestResource};
use capgate::vm::{Input, Outcome, RegexBudget, VmError, decided_by_plan, run, run_unplanned};
use proptest::prelude::*;
use serde_json::{Value, json};

fn key(k: &str) -> Segment {
    Segment::Key(k.to_owned())
}

fn json_path(root: JsonRoot, segments: Vec<Segment>, text: &str) -> CompiledPath {
    CompiledPath {
        access: PathAccess::Json { root, segments },
        text: text.to_owned(),
    }
}

/// The paths the generated tests read: every shape the plan knows, and some it does not.
fn paths() -> Vec<CompiledPath> {
    use JsonRoot::{Agent, Context, Payload};
    vec![
        json_path(
            Payload,
            vec![key("organizer"), key("email")],
            "payload.organizer.email",
        ),
        json_path(Agent, vec![key("email")], "agent.email"),
        json_path(
            Payload,
            vec![key("attendees"), Segment::Wildcard, key("email")],
            "payload.attendees[*].email",
        ),
        json_path(
            Payload,
            vec![key("attendees"), Segment::Wildcard],
            "payload.attendees[*]",
        ),
        json_path(Payload, vec![key("x"), Segment::Index(0)], "payload.x[0]"),
        json_path(
            Payload,
            vec![
                key("attendees"),
                Segment::Wildcard,
                key("x"),
                Segment::Wildcard,
            ],
            "payload.attendees[*].x[*]",
        ),
        CompiledPath {
            access: PathAccess::Binding { slot: 0 },
            text: "resource.calendar".to_owned(),
        },
        json_path(Agent, Vec::new(), "agent"),
        CompiledPath {
            access: PathAccess::Query {
                name: "q".to_owned(),
            },
            text: "resource.query.q".to_owned(),
        },
        CompiledPath {
            access: PathAccess::RequestOperation,
            text: "request.operation".to_owned(),
        },
        json_path(Context, vec![key("email")], "context.email"),
        json_path(
            Payload,
            vec![Segment::Wildcard, key("email")],
            "payload[*].email",
        ),
    ]
}

const PATHS: usize = 12;

/// One test over the paths above: `kind` picks the instruction.
fn test_op(kind: usize, path: usize, other: usize, optional: bool) -> Op {
    let (path, other) = (
        PathIdx::from_usize(path).unwrap(),
        PathIdx::from_usize(other).unwrap(),
    );
    match kind {
        0 => Op::Equals {
            path,
            value: ConstIdx::from_usize(0).unwrap(),
            optional,
        },
        1 => Op::InSet {
            path,
            set: SetIdx::from_usize(0).unwrap(),
            optional,
        },
        2 => Op::Matches {
            path,
            regex: RegexIdx::from_usize(0).unwrap(),
            optional,
        },
        3 => Op::EqualsPath {
            path,
            other,
            optional,
        },
        4 => Op::BindsIdentity {
            path,
            identity: other,
            optional,
        },
        5 => Op::Schema {
            schema: SchemaIdx::from_usize(0).unwrap(),
        },
        _ => Op::Schema {
            schema: SchemaIdx::from_usize(1).unwrap(),
        },
    }
}

/// One check's code before its `require`, as the compiler emits each constraint.
#[derive(Debug, Clone)]
enum Check {
    /// `test`
    One(Op),
    /// `not { test }`: `test; not`
    Not(Op),
    /// `any { a b }`: `a; or_else @end; b; @end:`
    Any(Op, Op),
    /// `all { a b }`: `a; and_then @end; b; @end:`
    All(Op, Op),
}

/// `test; require` for each test, then `accept`.
fn planned_program(tests: &[Op]) -> Program {
    checked_program(&tests.iter().copied().map(Check::One).collect::<Vec<_>>())
}

/// Each check's code and its `require`, then `accept`: the shape of every compiled program.
fn checked_program(checks_code: &[Check]) -> Program {
    let mut code = Vec::new();
    let mut checks = Vec::new();
    for (i, check) in checks_code.iter().enumerate() {
        let start = u32::try_from(code.len()).unwrap();
        // The `require` of a two-test check comes three instructions after its start.
        let end = JumpTarget::from_usize(code.len() + 3).unwrap();
        match check {
            Check::One(test) => code.push(*test),
            Check::Not(test) => code.extend([*test, Op::Not]),
            Check::Any(a, b) => code.extend([*a, Op::OrElse { target: end }, *b]),
            Check::All(a, b) => code.extend([*a, Op::AndThen { target: end }, *b]),
        }
        code.push(Op::Require {
            check: CheckIdx::from_usize(i).unwrap(),
        });
        checks.push(CheckInfo::new(
            ConstraintKeyword::FieldEquals,
            None,
            String::new(),
            start..u32::try_from(code.len()).unwrap(),
        ));
    }
    code.push(Op::Accept);
    let schema = json!({
        "type": "object",
        "required": ["organizer"],
        "properties": {
            "x": { "type": "string", "maxLength": 3 },
            "attendees": { "type": "array", "maxItems": 3 },
            "recurrence": false
        }
    });
    // `items` is not a keyword of a flat schema.
    let not_flat = json!({
        "type": "object",
        "properties": { "attendees": { "items": { "required": ["email"] } } }
    });
    Program {
        debug: vec![None; code.len()],
        code,
        consts: vec![json!("a@example.com")],
        sets: vec![ValueSet {
            values: vec![json!("a@example.com"), json!("primary"), json!(1)],
        }],
        regexes: vec![CompiledRegex {
            regex: Matcher::build("^(?:[^@]+@example\\.com|a)$", false, 1 << 20).unwrap(),
            source: "[^@]+@example\\.com|a".to_owned(),
            case_insensitive: false,
        }],
        schemas: vec![
            capgate::compile::schema::compile_schema(&schema).unwrap(),
            capgate::compile::schema::compile_schema(&not_flat).unwrap(),
        ],
        paths: paths(),
        checks,
        ..Program::default()
    }
}

/// JSON built from the names and values the paths read, so most documents are near a shape a
/// test holds on, and many are one step off it.
fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!("a@example.com")),
        Just(json!("eve@evil.com")),
        Just(json!("a")),
        Just(json!("primary")),
        Just(json!("")),
        Just(json!("a\u{e9}@example.com")),
        Just(json!(1)),
        Just(json!(1.0)),
        Just(json!(true)),
        Just(Value::Null),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "organizer",
                        "email",
                        "attendees",
                        "x",
                        "recurrence",
                        "q",
                    ]),
                    inner
                ),
                0..5
            )
            .prop_map(|members| Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect()
            )),
        ]
    })
}

/// A value the tests hold on half of the time, else one that breaks them in one way or another.
fn near_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!("a@example.com")),
        1 => Just(Value::Null),
        1 => Just(json!("eve@evil.com")),
        1 => Just(json!(1)),
        1 => Just(json!({"email": "a@example.com"})),
    ]
}

/// Documents shaped like the allows the plan is for: an organizer, attendees and `x`, each
/// member maybe missing or of another kind.
fn near_allow() -> impl Strategy<Value = Value> {
    let member = |value: BoxedStrategy<Value>| prop::option::weighted(0.85, value);
    let email = || near_leaf().prop_map(|email| json!({ "email": email }));
    let attendees = prop_oneof![
        4 => prop::collection::vec(
            prop_oneof![
                8 => email().boxed(),
                1 => near_leaf().boxed(),
                1 => Just(json!({"name": "a"})).boxed(),
            ],
            0..6
        )
        .prop_map(Value::Array),
        1 => near_leaf(),
    ];
    (
        member(prop_oneof![4 => email(), 1 => near_leaf()].boxed()),
        member(attendees.boxed()),
        member(near_leaf().boxed()),
        member(near_leaf().boxed()),
    )
        .prop_map(|(organizer, attendees, x, email)| {
            let mut object = serde_json::Map::new();
            for (name, value) in [
                ("organizer", organizer),
                ("attendees", attendees),
                ("x", x),
                ("email", email),
            ] {
                if let Some(value) = value {
                    object.insert(name.to_owned(), value);
                }
            }
            Value::Object(object)
        })
}

/// What `run` and `run_unplanned` give on these documents, on `Value`s and on tapes.
#[derive(Debug, PartialEq)]
struct Outcomes {
    planned: Result<Outcome, VmError>,
    unplanned: Result<Outcome, VmError>,
    planned_on_tape: Result<Outcome, VmError>,
    unplanned_on_tape: Result<Outcome, VmError>,
}

fn outcomes(
    program: &VerifiedProgram,
    [payload, agent, context]: [&Value; 3],
    resource: &str,
    max_array_scan: usize,
) -> Outcomes {
    let pattern = ResourcePattern::compile(ResourceKind::Tool, "cal/{calendar}").unwrap();
    let request = RequestResource::parse(resource).unwrap();
    let mut bindings = Bindings::new();
    // An unmatched resource leaves slot 0 unbound: the binding path is then absent.
    pattern.matches(&request, &mut bindings);
    let texts = [payload, agent, context].map(Value::to_string);
    let mut tapes = [Tape::new(), Tape::new(), Tape::new()];
    let [p, a, c] = &mut tapes;
    let docs = [
        p.parse(texts[0].as_bytes(), 64).unwrap(),
        a.parse(texts[1].as_bytes(), 64).unwrap(),
        c.parse(texts[2].as_bytes(), 64).unwrap(),
    ];
    // Each run on its own budget: the default one, and one tight enough that the regex work of
    // some calls does not fit. The plan pays what the program alone pays (it gives back the
    // work of a check it cannot answer), so all four runs end alike, with as much work left.
    let mut default = None;
    for limit in [capgate::Limits::DEFAULT.max_regex_work, 1_000] {
        let budgets: [RegexBudget; 4] = std::array::from_fn(|_| RegexBudget::new(limit));
        let on_values = |budget| Input {
            max_array_scan,
            refuse_case_variants: true,
            ..input([payload, agent, context], &request, &bindings, budget)
        };
        let on_tapes = |budget| Input {
            max_array_scan,
            refuse_case_variants: true,
            ..input(
                [docs[0].root(), docs[1].root(), docs[2].root()],
                &request,
                &bindings,
                budget,
            )
        };
        let got = Outcomes {
            planned: run(program, &on_values(&budgets[0])),
            unplanned: run_unplanned(program, &on_values(&budgets[1])),
            planned_on_tape: run(program, &on_tapes(&budgets[2])),
            unplanned_on_tape: run_unplanned(program, &on_tapes(&budgets[3])),
        };
        let left = budgets.each_ref().map(RegexBudget::left);
        assert!(
            left.iter().all(|l| *l == left[0]),
            "regex work left {left:?} (limit {limit}): {got:?}"
        );
        if limit == 1_000 {
            assert_eq!(got.planned, got.unplanned, "tight budget");
            assert_eq!(got.planned, got.planned_on_tape, "tight budget");
            assert_eq!(got.unplanned, got.unplanned_on_tape, "tight budget");
        } else {
            default = Some(got);
        }
    }
    default.unwrap()
}

/// The input of a call with these documents, resource and bindings.
fn input<'a, J>(
    documents: [J; 3],
    resource: &'a RequestResource<'a>,
    bindings: &'a Bindings<'a>,
    regex_budget: &'a RegexBudget,
) -> Input<'a, J> {
    crate::common::vm_input(documents, "a@example.com", resource, bindings, regex_budget)
}

fn check_strategy() -> impl Strategy<Value = Check> {
    prop_oneof![
        4 => test_strategy().prop_map(Check::One),
        1 => test_strategy().prop_map(Check::Not),
        1 => (test_strategy(), test_strategy()).prop_map(|(a, b)| Check::Any(a, b)),
        1 => (test_strategy(), test_strategy()).prop_map(|(a, b)| Check::All(a, b)),
    ]
}

fn test_strategy() -> impl Strategy<Value = Op> {
    (0usize..7, 0..PATHS, 0..PATHS, any::<bool>())
        .prop_map(|(kind, path, other, optional)| test_op(kind, path, other, optional))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Whatever the tests, documents, binding and scan limit: the plan changes nothing.
    #[test]
    fn a_planned_run_decides_as_the_program_does(
        checks in prop::collection::vec(check_strategy(), 1..5),
        payload in prop_oneof![document(), near_allow()],
        agent in prop_oneof![document(), near_allow(), near_leaf()],
        context in prop_oneof![Just(Value::Null), document(), near_allow()],
        resource in prop::sample::select(vec![
            "tool:cal/a@example.com",
            "tool:cal/primary",
            "tool:cal/a%40example.com",
            "tool:cal/other",
            "tool:elsewhere?q=a&q=a",
            "tool:cal/a?q=a@example.com",
        ]),
        max_array_scan in 0usize..5,
    ) {
        let program = verify(checked_program(&checks)).unwrap();
        prop_assert!(program.plan().is_some(), "every generated program has a plan");
        let got = outcomes(&program, [&payload, &agent, &context], resource, max_array_scan);
        prop_assert_eq!(&got.planned, &got.unplanned);
        prop_assert_eq!(&got.planned_on_tape, &got.unplanned_on_tape);
        prop_assert_eq!(&got.planned, &got.planned_on_tape);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// One test of a shape the plan answers itself, on documents near its allows: where the
    /// plan decides, it decides as the program does.
    #[test]
    fn a_planned_test_decides_as_the_program_does(
        kind in 0usize..5,
        path in prop::sample::select(vec![0usize, 1, 2, 3, 6, 7]),
        other in prop::sample::select(vec![0usize, 1, 6, 7]),
        optional in any::<bool>(),
        payload in near_allow(),
        agent in prop_oneof![near_allow(), near_leaf()],
        max_array_scan in 0usize..7,
    ) {
        let program = verify(planned_program(&[test_op(kind, path, other, optional)])).unwrap();
        let documents = [&payload, &agent, &Value::Null];
        let got = outcomes(&program, documents, "tool:cal/a@example.com", max_array_scan);
        prop_assert_eq!(&got.planned, &got.unplanned);
        prop_assert_eq!(&got.planned_on_tape, &got.unplanned_on_tape);
        prop_assert_eq!(&got.planned, &got.planned_on_tape);
    }
}

/// A subschema of a property: `true`, `false`, leaves, and some that are not leaves.
fn property_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(true)),
        Just(json!(false)),
        Just(json!({})),
        Just(json!({"type": "string", "minLength": 1, "maxLength": 3})),
        Just(json!({"type": ["string", "null"], "maxLength": 13})),
        Just(json!({"type": "array", "maxItems": 2})),
        Just(json!({"minItems": 1})),
        Just(json!({"type": "integer"})),
        Just(json!({"type": "object"})),
        Just(json!({"pattern": "a"})),
        Just(json!({"const": "a"})),
        Just(json!({"items": false})),
    ]
}

/// Schemas that are flat, or one keyword away from it, with any of the limits.
fn flat_ish_schema() -> impl Strategy<Value = (Value, u32, u64)> {
    let names =
        || prop::sample::subsequence(vec!["organizer", "email", "attendees", "x", "q"], 0..=5);
    (
        prop_oneof![
            Just(json!("object")),
            Just(json!(["object", "null"])),
            Just(json!("string")),
            Just(Value::Null),
        ],
        names(),
        prop::collection::vec(
            (
                prop::sample::select(vec!["organizer", "email", "attendees", "x", "q"]),
                property_schema(),
            ),
            0..5,
        ),
        prop_oneof![
            8 => Just(None),
            1 => Just(Some(json!({"additionalProperties": false}))),
            1 => Just(Some(json!({"maxProperties": 2}))),
            1 => Just(Some(json!({"minLength": 2}))),
        ],
        0u32..4,
        prop_oneof![Just(1_000_000u64), 0u64..7],
    )
        .prop_map(|(types, required, properties, extra, depth, steps)| {
            let mut schema = serde_json::Map::new();
            if !types.is_null() {
                schema.insert("type".to_owned(), types);
            }
            if !required.is_empty() {
                schema.insert("required".to_owned(), json!(required));
            }
            if !properties.is_empty() {
                let properties: serde_json::Map<String, Value> = properties
                    .into_iter()
                    .map(|(name, schema)| (name.to_owned(), schema))
                    .collect();
                schema.insert("properties".to_owned(), Value::Object(properties));
            }
            if let Some(Value::Object(extra)) = extra {
                schema.extend(extra);
            }
            (Value::Object(schema), depth, steps)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// A payload schema checked by the plan (flat or not) decides as the schema evaluator does,
    /// whatever the schema's depth and step limits.
    #[test]
    fn a_planned_schema_decides_as_the_evaluator_does(
        (schema, depth, steps) in flat_ish_schema(),
        payload in prop_oneof![document(), near_allow()],
    ) {
        let mut program = planned_program(&[test_op(5, 0, 0, false)]);
        program.schemas[0] = capgate::compile::schema::compile_schema(&schema)
            .unwrap()
            .with_limits(depth, steps);
        let program = verify(program).unwrap();
        let got = outcomes(&program, [&payload, &Value::Null, &Value::Null], "tool:cal/a", 100);
        prop_assert_eq!(&got.planned, &got.unplanned);
        prop_assert_eq!(&got.planned_on_tape, &got.unplanned_on_tape);
        prop_assert_eq!(&got.planned, &got.planned_on_tape);
    }
}

/// Each shape the plan knows decides an allow and a deny itself (so the properties above are not
/// met only by a plan that always leaves the call to the program), and a test of another shape
/// is run as the program runs it.
#[test]
fn the_plan_takes_each_shape_it_knows() {
    let allow_payload = json!({
        "organizer": {"email": "a@example.com"},
        "attendees": [{"email": "a@example.com"}, {"email": "b@example.com"}],
        "x": "abc"
    });
    let agent = json!({"email": "a@example.com"});
    let pattern = ResourcePattern::compile(ResourceKind::Tool, "cal/{calendar}").unwrap();
    let request = RequestResource::parse("tool:cal/primary").unwrap();
    let mut bindings = Bindings::new();
    assert!(pattern.matches(&request, &mut bindings));
    let cases: [(Op, Shape); 7] = [
        (test_op(0, 0, 0, false), Shape::Plain),
        (test_op(1, 6, 0, false), Shape::Plain),
        (test_op(2, 2, 0, false), Shape::EachKeys { wildcard: 1 }),
        (test_op(4, 0, 1, false), Shape::Plain),
        (test_op(5, 0, 0, false), Shape::FlatSchema { flat: 0 }),
        (test_op(6, 0, 0, false), Shape::Schema),
        (test_op(0, 4, 0, false), Shape::General),
    ];
    for (test, shape) in cases {
        let program = verify(planned_program(&[test])).unwrap();
        let plan = program.plan().expect("a one-test program has a plan");
        assert_eq!(plan.checks().len(), 1);
        assert_eq!(plan.checks()[0].shape, shape, "{test:?}");
        assert_eq!(plan.checks()[0].at, 0);
        let payload = if shape == Shape::General {
            json!({"x": ["a@example.com"]})
        } else {
            allow_payload.clone()
        };
        let documents = [&payload, &agent, &Value::Null];
        let got = outcomes(&program, documents, "tool:cal/primary", 100);
        assert_eq!(got.planned, Ok(Outcome::Accepted), "{test:?}");
        assert_eq!(got.unplanned, Ok(Outcome::Accepted), "{test:?}");
        let budget = RegexBudget::unlimited();
        let decided = decided_by_plan(&program, &input(documents, &request, &bindings, &budget));
        assert_eq!(decided, Some(Outcome::Accepted), "{test:?}");
        // A value of the right kind that fails the test fails it in the plan too.
        let deny = json!({
            "organizer": {"email": "b@example.com"},
            "attendees": [{"email": "a@example.com"}, {"email": "eve@evil.com"}, {}],
            "x": ["abc"]
        });
        let denied = [&deny, &agent, &Value::Null];
        let got = outcomes(&program, denied, "tool:cal/team", 100);
        let failed = Ok(Outcome::Failed(CheckIdx::from_usize(0).unwrap()));
        assert_eq!(got.unplanned, failed, "{test:?}");
        assert_eq!(got.planned, failed, "{test:?}");
        let request = RequestResource::parse("tool:cal/team").unwrap();
        let mut bindings = Bindings::new();
        assert!(pattern.matches(&request, &mut bindings));
        let decided = decided_by_plan(&program, &input(denied, &request, &bindings, &budget));
        assert_eq!(decided, failed.ok(), "{test:?}");
    }
}

/// A check of several instructions (or of a constant) is run as the program runs it; code whose
/// checks do not follow one another from the start, each ending with its own `require`, has no
/// plan.
#[test]
fn checks_of_several_instructions_are_run_whole_and_other_code_has_no_plan() {
    let equals = test_op(0, 0, 0, false);
    let require = |check| Op::Require {
        check: CheckIdx::from_usize(check).unwrap(),
    };
    let and_then_5 = Op::AndThen {
        target: JumpTarget::from_usize(5).unwrap(),
    };
    // The code, each check's range, and the plan's shapes (none: no plan).
    type Case = (Vec<Op>, Vec<(u32, u32)>, Option<Vec<Shape>>);
    let cases: [Case; 6] = [
        (
            vec![equals, Op::Not, require(0), Op::Accept],
            vec![(0, 3)],
            Some(vec![Shape::Check { end: 3 }]),
        ),
        (
            vec![
                Op::Push(true),
                require(0),
                equals,
                and_then_5,
                equals,
                require(1),
                Op::Accept,
            ],
            vec![(0, 2), (2, 6)],
            Some(vec![Shape::Check { end: 2 }, Shape::Check { end: 6 }]),
        ),
        // The check does not start the program.
        (
            vec![equals, Op::Not, require(0), Op::Accept],
            vec![(1, 3)],
            None,
        ),
        // Two `require`s in one check.
        (
            vec![equals, require(0), equals, require(0), Op::Accept],
            vec![(0, 4)],
            None,
        ),
        // Code after the last check, before `accept`.
        (
            vec![equals, require(0), Op::Push(true), require(0), Op::Accept],
            vec![(0, 2)],
            None,
        ),
        // The checks out of order.
        (
            vec![equals, require(1), equals, require(0), Op::Accept],
            vec![(2, 4), (0, 2)],
            None,
        ),
    ];
    for (code, ranges, shapes) in cases {
        let mut program = planned_program(&[]);
        program.debug = vec![None; code.len()];
        program.code = code.clone();
        program.checks = ranges
            .iter()
            .map(|&(code_start, code_end)| {
                CheckInfo::new(
                    ConstraintKeyword::FieldEquals,
                    None,
                    String::new(),
                    code_start..code_end,
                )
            })
            .collect();
        let verified = verify(program).unwrap_or_else(|e| panic!("{code:?}: {e}"));
        let got = verified.plan().map(|plan| {
            plan.checks()
                .iter()
                .map(|test| test.shape)
                .collect::<Vec<_>>()
        });
        assert_eq!(got, shapes, "{code:?}");
    }
}

fn load(paths: &[&std::path::Path]) -> capgate::PolicySet {
    capgate::PolicyLoader::new(capgate::Limits::DEFAULT)
        .finish_paths(paths)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The compiler's programs get plans: the peers scenario's four checks each have a shape the
/// plan reads directly, and every capability of the bundled policies has one.
#[test]
fn compiled_programs_get_the_plans_of_their_shapes() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let scenario = load(&[&root.join("benches/peers/scenario.cap")]);
    let program = &scenario.skills[0].capabilities[0].program();
    let shapes: Vec<Shape> = program
        .plan()
        .expect("the scenario is one test per check")
        .checks()
        .iter()
        .map(|test| test.shape)
        .collect();
    assert_eq!(
        shapes,
        [
            Shape::Plain,
            Shape::Plain,
            Shape::EachKeys { wildcard: 1 },
            Shape::FlatSchema { flat: 0 }
        ]
    );
    let bundled = load(&[&root.join("policies")]);
    let capabilities: Vec<_> = bundled
        .skills
        .iter()
        .flat_map(|skill| &skill.capabilities)
        .collect();
    let planned = capabilities
        .iter()
        .filter(|capability| capability.program().plan().is_some())
        .count();
    assert_eq!(
        planned,
        capabilities.len(),
        "every compiled capability has a plan"
    );
}
