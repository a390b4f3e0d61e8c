//! Evaluating a [`Plan`]: a program's checks, in order, in a tight loop.
//!
//! [`decide`] answers each check, from the first, as holding or failing — only where the
//! program would reach the same values and decide alike on them — or as unknown. Every check
//! holding means the program accepts (`crate::bytecode::plan`); the first that fails fails the
//! program. A one-test check is read by its shape and answered only in the case where the
//! program's test would reach those values and decide on them; a missing member, a value of
//! another kind, a `null` identity, an array over the scan limit — anything else — is unknown,
//! and the caller runs the program from that check on. A check of several instructions is run
//! by the VM over its own range. A check the plan answers is answered alike by the program, and
//! a check's value does not depend on the others', so for every input the outcome is the whole
//! program's; the differential tests (`tests/it/vm_plan.rs`) hold it to that, against the run
//! without a plan.

use super::exec::{Silent, Steps, check_holds};
use super::input::Input;
use super::json::{Json, JsonKind};
use super::path::{Leaf, follow_keys};
use super::schema::leaf_holds;
use super::test_op::test;
use crate::bytecode::index::{CheckIdx, PathIdx, lookup};
use crate::bytecode::matcher::Matcher;
use crate::bytecode::op::Op;
use crate::bytecode::plan::{FlatProperty, FlatSchema, Plan, PlanCheck, Shape};
use crate::bytecode::program::{CompiledPath, PathAccess, Program};
use crate::bytecode::schema::SchemaProgram;
use crate::bytecode::verify::VerifiedProgram;

/// What the plan made of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Planned {
    /// Every check held: the program accepts.
    Accepted,
    /// The checks before this one held and this one failed, as it fails in the program.
    Failed(CheckIdx),
    /// The checks before the one starting at this instruction held, and the plan could not
    /// answer that one: the program decides from there.
    From(usize),
}

/// One check's answer: it holds or fails as in the program, or the plan cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Holds,
    Fails,
    Unsure,
}

impl From<bool> for Answer {
    #[inline]
    fn from(holds: bool) -> Answer {
        if holds { Answer::Holds } else { Answer::Fails }
    }
}

/// `plan`'s checks on `input`, from the first, until one does not hold.
#[inline]
pub(super) fn decide<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    plan: &Plan,
    input: &Input<'_, J>,
) -> Planned {
    for check in plan.checks() {
        // The regex work of a check the plan cannot answer is given back: the program runs the
        // check again and pays for it then, so a call pays what the program alone would.
        let left = input.regex_budget.left();
        match answer(program, plan, check, input) {
            Answer::Holds => {}
            Answer::Fails => return Planned::Failed(check.check),
            Answer::Unsure => {
                input.regex_budget.restore(left);
                return Planned::From(check.at);
            }
        }
    }
    Planned::Accepted
}

/// One check's answer. `Holds` and `Fails` only where the program reaches the same
/// values and decides on them alike (a value the test cannot read — missing, of another kind —
/// is left to the program, which also says why).
#[inline]
fn answer<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    plan: &Plan,
    planned: &PlanCheck,
    input: &Input<'_, J>,
) -> Answer {
    let Some(op) = program.code.get(planned.at) else {
        return Answer::Unsure;
    };
    match planned.shape {
        Shape::Plain => plain(program, *op, input),
        Shape::EachKeys { wildcard } => match *op {
            Op::Matches { path, regex, .. } => {
                match (
                    lookup(&program.paths, path),
                    lookup(&program.regexes, regex),
                ) {
                    (Some(path), Some(regex)) => {
                        each_keys(path, wildcard, input, |leaf| match leaf.as_str() {
                            Some(text) => paid_match(&regex.regex, &text, input),
                            None => Answer::Unsure,
                        })
                    }
                    _ => Answer::Unsure,
                }
            }
            _ => Answer::Unsure,
        },
        Shape::FlatSchema { flat } => match *op {
            Op::Schema { schema } => {
                match (plan.flat_schema(flat), lookup(&program.schemas, schema)) {
                    (Some(flat), Some(schema)) => {
                        flat_answer(flat, schema, input.payload, input.refuse_case_variants)
                    }
                    _ => Answer::Unsure,
                }
            }
            _ => Answer::Unsure,
        },
        Shape::Schema => match *op {
            Op::Schema { schema } => match lookup(&program.schemas, schema) {
                // A limit or a case variant is the program's to report.
                Some(schema) => match super::schema::validate(
                    schema,
                    input.payload,
                    input.regex_budget,
                    input.refuse_case_variants,
                ) {
                    Ok(valid) => valid.into(),
                    Err(_) => Answer::Unsure,
                },
                None => Answer::Unsure,
            },
            _ => Answer::Unsure,
        },
        // A check of several instructions, run on its own as the program runs it; an error is
        // the program's to report.
        Shape::Check { end } => match check_holds(program, input, planned.at, end) {
            Ok(holds) => holds.into(),
            Err(_) => Answer::Unsure,
        },
        // Any other test, run as the program runs it (alone in its check, so not negated); an
        // error is the program's to report.
        Shape::General => match test::<J, Silent>(
            program.program(),
            op,
            planned.at,
            input,
            &mut Silent,
            &mut Steps::default(),
            false,
        ) {
            Ok(holds) => holds.into(),
            Err(_) => Answer::Unsure,
        },
    }
}

/// A [`Shape::Plain`] test's answer.
#[inline]
fn plain<'r, J: Json<'r>>(program: &Program, op: Op, input: &Input<'_, J>) -> Answer {
    match op {
        Op::Equals { path, value, .. } => {
            match (single(program, path, input), lookup(&program.consts, value)) {
                (Some(leaf), Some(value)) => leaf.equals_value(value).into(),
                _ => Answer::Unsure,
            }
        }
        Op::InSet { path, set, .. } => {
            match (single(program, path, input), lookup(&program.sets, set)) {
                (Some(leaf), Some(set)) => leaf.equals_any(&set.values).into(),
                _ => Answer::Unsure,
            }
        }
        Op::Matches { path, regex, .. } => {
            match (
                single(program, path, input),
                lookup(&program.regexes, regex),
            ) {
                (Some(leaf), Some(regex)) => leaf.with_str(|text| match text {
                    Some(text) => paid_match(&regex.regex, text, input),
                    None => Answer::Unsure,
                }),
                _ => Answer::Unsure,
            }
        }
        Op::EqualsPath { path, other, .. } => {
            match (single(program, path, input), single(program, other, input)) {
                (Some(leaf), Some(other)) => leaf.equals(other).into(),
                _ => Answer::Unsure,
            }
        }
        Op::BindsIdentity { path, identity, .. } => match (
            single(program, path, input),
            single(program, identity, input),
        ) {
            // A `null` identity binds nothing (the walk stops with `NullIdentity`).
            (_, Some(Leaf::Json(identity))) if identity.is_null() => Answer::Unsure,
            (Some(leaf), Some(identity)) => leaf.equals(identity).into(),
            _ => Answer::Unsure,
        },
        _ => Answer::Unsure,
    }
}

/// Whether `regex` matches `text`, paid from the request's regex work as the program pays;
/// `Unsure` when the budget cannot pay (the program reports it).
#[inline]
fn paid_match<'r, J: Json<'r>>(regex: &Matcher, text: &str, input: &Input<'_, J>) -> Answer {
    match input.regex_budget.charge(regex.work(text)) {
        Ok(()) => regex.is_match(text).into(),
        Err(_) => Answer::Unsure,
    }
}

/// The one value a binding-slot or keys-only path names, when every step finds it.
#[inline]
fn single<'a, 'r, J: Json<'r>>(
    program: &Program,
    path: PathIdx,
    input: &'a Input<'_, J>,
) -> Option<Leaf<'a, J>> {
    match &lookup(&program.paths, path)?.access {
        PathAccess::Binding { slot } => input.bindings.get(usize::from(*slot)).map(Leaf::Str),
        PathAccess::Json { root, segments } => {
            follow_keys(input.document(*root), segments).map(Leaf::Json)
        }
        _ => None,
    }
}

/// When the keys before the `[*]` at `wildcard` lead to an array of at most the scan limit's
/// elements: `answer` on what the keys after it lead to in each element, in order, until one
/// does not hold (an element without them is left to the program); otherwise `Unsure`.
#[inline]
fn each_keys<'r, J: Json<'r>>(
    path: &CompiledPath,
    wildcard: usize,
    input: &Input<'_, J>,
    mut answer: impl FnMut(J) -> Answer,
) -> Answer {
    let PathAccess::Json { root, segments } = &path.access else {
        return Answer::Unsure;
    };
    let (Some(before), Some(after)) = (segments.get(..wildcard), segments.get(wildcard + 1..))
    else {
        return Answer::Unsure;
    };
    match follow_keys(input.document(*root), before) {
        Some(array) if array.kind() == JsonKind::Array && array.len() <= input.max_array_scan => {
            for element in array.elements() {
                match follow_keys(element, after).map_or(Answer::Unsure, &mut answer) {
                    Answer::Holds => {}
                    other => return other,
                }
            }
            Answer::Holds
        }
        _ => Answer::Unsure,
    }
}

/// For an object `instance` within `schema`'s limits, whether it is valid against `flat`, the
/// flat form of `schema`: what `crate::vm::schema::validate` answers for it, which costs one
/// step for the root and one per property present, at depth 1 below the root. `Unsure` for
/// anything else, and (with `variants`) when a name it reads is absent and has a case variant
/// in the instance: the program says so.
#[inline]
fn flat_answer<'r, J: Json<'r>>(
    flat: &FlatSchema,
    schema: &SchemaProgram,
    instance: J,
    variants: bool,
) -> Answer {
    let steps = u64::try_from(flat.properties.len()).unwrap_or(u64::MAX);
    if schema.depth_limit() < 2
        || schema.step_limit() <= steps
        || instance.kind() != JsonKind::Object
    {
        return Answer::Unsure;
    }
    let mut unsure = false;
    let mut get = |name: &str| match instance.member(name, variants) {
        Ok(member) => member,
        Err(_) => {
            unsure = true;
            None
        }
    };
    // Every name is read, even after one fails: the program reads `required` in its own order,
    // so a failure here must not hide a case variant of a name it reads first. (A valid
    // instance reads them all anyway.)
    let mut valid = true;
    for name in &flat.required_only {
        valid &= get(name).is_some();
    }
    for (name, property, required) in &flat.properties {
        valid &= match (get(name), property) {
            (None, _) => !required,
            (Some(_), FlatProperty::Always) => true,
            (Some(_), FlatProperty::Never) => false,
            (Some(value), FlatProperty::Leaf(leaf)) => leaf_holds(leaf, value),
        };
    }
    if unsure {
        return Answer::Unsure;
    }
    valid.into()
}
