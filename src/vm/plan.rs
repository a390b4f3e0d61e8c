//! Evaluating an accept [`Plan`]: every test of a one-test-per-check program, in a tight loop.
//!
//! [`accepts`] answers `true` only when every test surely holds, which is exactly when the
//! program accepts (`crate::bytecode::plan`). Each shape reads what the general walk would read
//! and decides only the case where the walk would reach those values and the test hold on them:
//! a missing member, a value of another kind, a `null` identity, an array over the scan limit —
//! anything else — answers `false`, and the caller runs the program, which decides and explains
//! it. So for every input, `accepts` implies that the full run accepts; the differential tests
//! (`tests/vm_plan.rs`) hold it to that, against the run without a plan.

use super::exec::{Silent, Steps, test};
use super::input::Input;
use super::json::{Json, JsonKind};
use super::path::Leaf;
use super::schema::leaf_holds;
use crate::bytecode::index::{PathIdx, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::plan::{FlatProperty, FlatSchema, Plan, PlanTest, Shape};
use crate::bytecode::program::{CompiledPath, PathAccess, Program};
use crate::bytecode::schema::SchemaProgram;
use crate::value::Segment;

/// True when every test of `plan` holds on `input`, read without the general walk; `false` also
/// when the plan cannot tell (the program then decides).
#[inline]
pub(super) fn accepts<'r, J: Json<'r>>(
    program: &Program,
    plan: &Plan,
    input: &Input<'_, J>,
) -> bool {
    plan.tests()
        .iter()
        .all(|test| holds(program, plan, test, input))
}

/// Whether one test surely holds.
#[inline]
fn holds<'r, J: Json<'r>>(
    program: &Program,
    plan: &Plan,
    planned: &PlanTest,
    input: &Input<'_, J>,
) -> bool {
    let Some(op) = program.code.get(planned.at) else {
        return false;
    };
    match (planned.shape, *op) {
        (Shape::Plain, Op::Equals { path, value, .. }) => {
            match (single(program, path, input), lookup(&program.consts, value)) {
                (Some(leaf), Some(value)) => leaf.equals_value(value),
                _ => false,
            }
        }
        (Shape::Plain, Op::InSet { path, set, .. }) => {
            match (single(program, path, input), lookup(&program.sets, set)) {
                (Some(leaf), Some(set)) => leaf.equals_any(&set.values),
                _ => false,
            }
        }
        (Shape::Plain, Op::Matches { path, regex, .. }) => {
            match (
                single(program, path, input),
                lookup(&program.regexes, regex),
            ) {
                (Some(leaf), Some(regex)) => {
                    leaf.with_str(|text| text.is_some_and(|text| regex.regex.is_match(text)))
                }
                _ => false,
            }
        }
        (Shape::Plain, Op::EqualsPath { path, other, .. }) => {
            match (single(program, path, input), single(program, other, input)) {
                (Some(leaf), Some(other)) => leaf.equals(other),
                _ => false,
            }
        }
        (Shape::Plain, Op::BindsIdentity { path, identity, .. }) => match (
            single(program, path, input),
            single(program, identity, input),
        ) {
            // A `null` identity binds nothing (the walk stops with `NullIdentity`).
            (_, Some(Leaf::Json(identity))) if identity.is_null() => false,
            (Some(leaf), Some(identity)) => leaf.equals(identity),
            _ => false,
        },
        (Shape::EachKeys { wildcard }, Op::Matches { path, regex, .. }) => {
            match (
                lookup(&program.paths, path),
                lookup(&program.regexes, regex),
            ) {
                (Some(path), Some(regex)) => each_keys(path, wildcard, input, |leaf| {
                    leaf.as_str()
                        .is_some_and(|text| regex.regex.is_match(&text))
                }),
                _ => false,
            }
        }
        (Shape::FlatSchema { flat }, Op::Schema { schema }) => {
            match (plan.flat_schema(flat), lookup(&program.schemas, schema)) {
                (Some(flat), Some(schema)) => flat_holds(flat, schema, input.payload),
                _ => false,
            }
        }
        (Shape::Schema, Op::Schema { schema }) => lookup(&program.schemas, schema)
            .is_some_and(|schema| super::schema::is_valid(schema, input.payload)),
        // Any other test, run as the program runs it (not negated: a plan has no `not`).
        _ => matches!(
            test::<J, Silent>(
                program,
                op,
                planned.at,
                input,
                &mut Silent,
                &mut Steps::default(),
                false
            ),
            Ok(true)
        ),
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
            keys(input.document(*root), segments).map(Leaf::Json)
        }
        _ => None,
    }
}

/// The value `segments` (keys) lead to from `value`, when each step finds an object with the
/// member; `None` at the first that does not, or at any other kind of segment.
#[inline]
fn keys<'r, J: Json<'r>>(mut value: J, segments: &[Segment]) -> Option<J> {
    for segment in segments {
        let Segment::Key(key) = segment else {
            return None;
        };
        // `get` finds nothing in a value that is not an object.
        value = value.get(key)?;
    }
    Some(value)
}

/// True when the keys before the `[*]` at `wildcard` lead to an array of at most the scan
/// limit's elements, and in each element the keys after it lead to a value `holds` accepts.
#[inline]
fn each_keys<'r, J: Json<'r>>(
    path: &CompiledPath,
    wildcard: usize,
    input: &Input<'_, J>,
    mut holds: impl FnMut(J) -> bool,
) -> bool {
    let PathAccess::Json { root, segments } = &path.access else {
        return false;
    };
    let (Some(before), Some(after)) = (segments.get(..wildcard), segments.get(wildcard + 1..))
    else {
        return false;
    };
    match keys(input.document(*root), before) {
        Some(array) if array.kind() == JsonKind::Array && array.len() <= input.max_array_scan => {
            array
                .elements()
                .all(|element| keys(element, after).is_some_and(&mut holds))
        }
        _ => false,
    }
}

/// True when `instance` is an object valid against `flat`, the flat form of `schema`, within
/// `schema`'s limits: what `crate::vm::schema::is_valid` answers for such an instance, which
/// costs one step for the root and one per property present, at depth 1 below the root.
#[inline]
fn flat_holds<'r, J: Json<'r>>(flat: &FlatSchema, schema: &SchemaProgram, instance: J) -> bool {
    let steps = u64::try_from(flat.properties.len()).unwrap_or(u64::MAX);
    if schema.depth_limit() < 2
        || schema.step_limit() <= steps
        || instance.kind() != JsonKind::Object
    {
        return false;
    }
    flat.required_only
        .iter()
        .all(|name| instance.get(name).is_some())
        && flat.properties.iter().all(|(name, property, required)| {
            match (instance.get(name), property) {
                (None, _) => !required,
                (Some(_), FlatProperty::Always) => true,
                (Some(_), FlatProperty::Never) => false,
                (Some(value), FlatProperty::Leaf(leaf)) => leaf_holds(leaf, value),
            }
        })
}
