//! The accept plan: the tests of a program that is one positive test per check, with the shape
//! of each test's paths resolved once, at verification.
//!
//! Most capabilities compile to `test; require` for each constraint, then `accept`: no `not`, no
//! `anyOf` or `allOf`. Such a program accepts exactly when every one of its tests holds, in
//! whatever order they run, so the VM may first try the tests in a tight loop on paths whose
//! shape it knows here (a binding slot, keys only, keys around one `[*]`), without the general
//! walk's layers. Only an *accept* is taken from the plan: a test that fails there, or meets
//! anything the plan does not read directly, sends the decision to the full run, which decides
//! and explains it exactly as without a plan (`crate::vm::run`). So the plan can make an allow
//! faster but can never make a decision other than the program's own.
//!
//! Derived from the verified code alone, so a program loaded from a `.capc` file gets the same
//! plan as one compiled from source.

use super::op::Op;
use super::program::{PathAccess, Program};
use crate::value::Segment;

/// The tests of a program that accepts exactly when all of them hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    tests: Box<[PlanTest]>,
}

/// One test of a [`Plan`]: the instruction and how its paths are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanTest {
    /// The test's instruction position.
    pub at: usize,
    /// How the plan evaluates it.
    pub shape: Shape,
}

/// How the plan evaluates one test.
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
    /// A `Schema`: the payload against the schema, as the VM checks it.
    Schema,
    /// Any other test: run as the VM runs it.
    General,
}

impl Plan {
    /// The plan of `program`: `Some` when its code is `test; require` for each check, in order,
    /// followed by `accept`, and nothing else.
    pub fn of(program: &Program) -> Option<Plan> {
        let (accept, pairs) = program.code.split_last()?;
        if !matches!(accept, Op::Accept) || pairs.len() % 2 != 0 {
            return None;
        }
        let mut tests = Vec::with_capacity(pairs.len() / 2);
        for (pair, at) in pairs.chunks_exact(2).zip((0..).step_by(2)) {
            let [test, Op::Require { .. }] = pair else {
                return None;
            };
            tests.push(PlanTest {
                at,
                shape: shape(program, test)?,
            });
        }
        Some(Plan {
            tests: tests.into_boxed_slice(),
        })
    }

    /// The tests, in program order.
    pub fn tests(&self) -> &[PlanTest] {
        &self.tests
    }
}

/// How the plan reads `test`; `None` for an instruction that is not a test.
fn shape(program: &Program, test: &Op) -> Option<Shape> {
    let plain = |index| {
        crate::bytecode::index::lookup(&program.paths, index).is_some_and(|path| {
            match &path.access {
                PathAccess::Binding { .. } => true,
                PathAccess::Json { segments, .. } => {
                    segments.iter().all(|s| matches!(s, Segment::Key(_)))
                }
                _ => false,
            }
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
fn each_keys(program: &Program, path: crate::bytecode::index::PathIdx) -> Option<usize> {
    let path = crate::bytecode::index::lookup(&program.paths, path)?;
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
