//! The plan: a program's checks in order, each check of one test with the shape of the test's
//! paths resolved once, at verification.
//!
//! The compiler emits each constraint as a self-contained check — entered with an empty stack,
//! ending with its own `require` — one after another, then `accept`. Such a program accepts
//! exactly when every check holds, and otherwise fails the first check that does not; most
//! checks are one test. So the VM may first try the checks in a tight loop, reading the paths of
//! the one-test checks by a shape it knows here (a binding slot, keys only, keys around one
//! `[*]`, a flat payload schema) without the general walk's layers, and running every other
//! check (`any`, `all`, `not`, tests of other shapes) as the program does. The plan answers a
//! check only where the program would reach the same values and decide alike on them; at the
//! first check it cannot answer (a value missing or of another kind, an array over the scan
//! limit, an error), the program runs from that check on, and decides and explains the call
//! exactly as it would have from the start (`crate::vm::run`): the checks before it held, and
//! between checks the stack is empty. So the plan can make a decision faster but never another
//! one.
//!
//! Derived from the verified code alone, so a program loaded from a `.capc` file gets the same
//! plan as one compiled from source.

use super::index::{CheckIdx, Index, PathIdx, lookup};
use super::op::Op;
use super::program::{PathAccess, Program};
use super::schema::{Leaf, SchemaNode, SchemaObject, SchemaProgram, SchemaType};
use crate::convert::usize_from;
use crate::value::Segment;

/// A program's checks in order, each with how the plan answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    checks: Box<[PlanCheck]>,
    /// The flat schemas of its [`Shape::FlatSchema`] checks.
    schemas: Box<[FlatSchema]>,
}

/// A payload schema that is only `type` (including `object`), `required` and `properties`
/// whose subschemas are `true`, `false` or leaves (`type` and size bounds): checked as one
/// lookup per named property. Such a schema takes at most one step for the root and one per
/// property; the plan takes it only when the schema's limits leave room for that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatSchema {
    /// `required` names that `properties` does not list.
    pub required_only: Box<[String]>,
    /// `properties`, each with whether it is also `required`.
    pub properties: Box<[(String, FlatProperty, bool)]>,
}

/// The subschema of one property of a [`FlatSchema`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlatProperty {
    /// `true`: any value.
    Always,
    /// `false`: the property may not be present.
    Never,
    /// A leaf: `type` and the size bounds.
    Leaf(Leaf),
}

/// One check of a [`Plan`]: where its code starts, and how the plan answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanCheck {
    /// The check's first instruction (for a one-test check, the test).
    pub at: usize,
    /// The check.
    pub check: CheckIdx,
    /// How the plan evaluates it.
    pub shape: Shape,
}

/// How the plan answers one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An `Equals`, `InSet` or `Matches` whose path, or an `EqualsPath` or `BindsIdentity` both
    /// of whose paths, are a binding slot or keys only: each names at most one value, found by
    /// plain member lookups.
    Plain,
    /// A `Matches` on a path of keys, one `[*]` at segment `wildcard`, and keys.
    EachKeys {
        /// The position of the `[*]` among the path's segments.
        wildcard: usize,
    },
    /// A `Schema` whose schema is flat: [`Plan::flat_schema`] `flat`.
    FlatSchema {
        /// The flat schema's position in the plan.
        flat: usize,
    },
    /// Any other `Schema`: the payload against the schema, as the VM checks it.
    Schema,
    /// Any other test: run as the VM runs it.
    General,
    /// A check of more than one instruction (`any`, `all`, `not`): its code run on its own as
    /// the program runs it, up to `end`, one past its `Require`.
    Check {
        /// One past the check's `Require`.
        end: usize,
    },
}

impl Shape {
    /// How the shape reads in a disassembly.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Plain => "plain",
            Shape::EachKeys { .. } => "each [*]",
            Shape::FlatSchema { .. } => "flat schema",
            Shape::Schema => "schema",
            Shape::General => "vm test",
            Shape::Check { .. } => "vm check",
        }
    }
}

impl Plan {
    /// The plan of `program`, whose checks stand alone where `self_contained` says so (by
    /// check index): `Some` when the checks' code ranges follow one another from the first
    /// instruction, each self-contained and ending with its own `Require` (the only one in it),
    /// and `accept` follows the last — as the compiler emits every program. A check of one test
    /// gets that test's shape; any other is run as the program runs it ([`Shape::Check`]).
    pub(super) fn of(program: &Program, self_contained: &[bool]) -> Option<Plan> {
        let (accept, _) = program.code.split_last()?;
        if !matches!(accept, Op::Accept) {
            return None;
        }
        let mut checks = Vec::with_capacity(program.checks.len());
        let mut schemas = Vec::new();
        let mut next = 0;
        for (index, info) in program.checks.iter().enumerate() {
            let check = CheckIdx::from_usize(index)?;
            let (start, end) = (usize_from(info.code_start), usize_from(info.code_end));
            let code = program.code.get(start..end)?;
            let (Op::Require { check: required }, body) = code.split_last()? else {
                return None;
            };
            let only_require = !body
                .iter()
                .any(|op| matches!(op, Op::Require { .. } | Op::Accept));
            if start != next
                || *required != check
                || !only_require
                || !self_contained.get(index).copied().unwrap_or(false)
            {
                return None;
            }
            next = end;
            let shape = match body {
                [test] => {
                    let flat = match *test {
                        Op::Schema { schema } => {
                            lookup(&program.schemas, schema).and_then(flat_schema)
                        }
                        _ => None,
                    };
                    match flat {
                        Some(flat) => {
                            schemas.push(flat);
                            Shape::FlatSchema {
                                flat: schemas.len() - 1,
                            }
                        }
                        None => shape(program, test).unwrap_or(Shape::Check { end }),
                    }
                }
                _ => Shape::Check { end },
            };
            checks.push(PlanCheck {
                at: start,
                check,
                shape,
            });
        }
        (next + 1 == program.code.len()).then(|| Plan {
            checks: checks.into_boxed_slice(),
            schemas: schemas.into_boxed_slice(),
        })
    }

    /// The checks, in program order.
    pub fn checks(&self) -> &[PlanCheck] {
        &self.checks
    }

    /// The flat schema of a [`Shape::FlatSchema`] test.
    pub fn flat_schema(&self, flat: usize) -> Option<&FlatSchema> {
        self.schemas.get(flat)
    }
}

/// `schema` as a [`FlatSchema`], when it is one.
fn flat_schema(schema: &SchemaProgram) -> Option<FlatSchema> {
    let Some(SchemaNode::Object(root)) = schema.node(schema.root()) else {
        return None;
    };
    // Every field named (no `..`), so a keyword added to `SchemaObject` does not compile until
    // it is placed here: a keyword the flat check ignored would be skipped (fail open). The
    // string, number and array keywords do not apply to the object instances the flat check
    // accepts, but are refused all the same: a flat schema is what it looks like.
    let SchemaObject {
        reference: None,
        types,
        enum_values: None,
        const_value: None,
        minimum: None,
        maximum: None,
        exclusive_minimum: None,
        exclusive_maximum: None,
        multiple_of: None,
        min_length: None,
        max_length: None,
        pattern: None,
        format: None,
        prefix_items,
        items: None,
        contains: None,
        min_items: None,
        max_items: None,
        unique_items: false,
        required,
        properties,
        pattern_properties,
        additional_properties: None,
        property_names: None,
        min_properties: None,
        max_properties: None,
        dependent_required,
        all_of,
        any_of,
        one_of,
        not: None,
        condition: None,
        shape: _,
    } = &**root
    else {
        return None;
    };
    let lists_empty = prefix_items.is_empty()
        && pattern_properties.is_empty()
        && dependent_required.is_empty()
        && all_of.is_empty()
        && any_of.is_empty()
        && one_of.is_empty();
    if !lists_empty || types.is_some_and(|types| !types.contains(SchemaType::Object)) {
        return None;
    }
    let properties = properties
        .iter()
        .map(|(name, id)| {
            let property = match schema.node(*id)? {
                SchemaNode::Always => FlatProperty::Always,
                SchemaNode::Never => FlatProperty::Never,
                SchemaNode::Object(object) => FlatProperty::Leaf(**object.shape.leaf.as_ref()?),
            };
            Some((name.clone(), property, required.contains(name)))
        })
        .collect::<Option<Box<[_]>>>()?;
    let required_only = required
        .iter()
        .filter(|name| !properties.iter().any(|(property, ..)| property == *name))
        .cloned()
        .collect();
    Some(FlatSchema {
        required_only,
        properties,
    })
}

/// How the plan reads `test`; `None` for an instruction that is not a test.
fn shape(program: &Program, test: &Op) -> Option<Shape> {
    let plain = |index| {
        lookup(&program.paths, index).is_some_and(|path| {
            path.keys_only() || matches!(path.access, PathAccess::Binding { .. })
        })
    };
    Some(match *test {
        Op::Equals { path, .. } | Op::InSet { path, .. } if plain(path) => Shape::Plain,
        Op::EqualsPath { path, other, .. }
        | Op::BindsIdentity {
            path,
            identity: other,
            ..
        } if plain(path) && plain(other) => Shape::Plain,
        Op::Matches { path, .. } => {
            if plain(path) {
                Shape::Plain
            } else {
                each_keys(program, path)
                    .map_or(Shape::General, |wildcard| Shape::EachKeys { wildcard })
            }
        }
        Op::Schema { .. } => Shape::Schema,
        Op::Push(_)
        | Op::Not
        | Op::OrElse { .. }
        | Op::AndThen { .. }
        | Op::Require { .. }
        | Op::Accept => return None,
        _ => Shape::General,
    })
}

/// Where the one `[*]` of a JSON path of keys and one `[*]` is.
fn each_keys(program: &Program, path: PathIdx) -> Option<usize> {
    let path = lookup(&program.paths, path)?;
    let PathAccess::Json { segments, .. } = &path.access else {
        return None;
    };
    let wildcard = segments
        .iter()
        .position(|s| matches!(s, Segment::Wildcard))?;
    segments
        .iter()
        .enumerate()
        .all(|(at, s)| at == wildcard || matches!(s, Segment::Key(_)))
        .then_some(wildcard)
}
