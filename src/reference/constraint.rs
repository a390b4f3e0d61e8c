//! Constraints, evaluated by walking the AST ([`first_failing`], [`holds`]).
//!
//! A field constraint holds when every value its path reaches passes the test; an absent path
//! passes only when the constraint is `optional`; a broken path (wrong shape, repeated query
//! parameter) never passes.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use serde_json::{Number, Value};

use super::path::{Found, Reached, reach, reach_one};
use super::window::window_holds;
use crate::engine::Request;
use crate::syntax::ast::{
    Bound, BoundValue, CmpOp, Constraint, ConstraintKind, EqualsRhs, RangeSubject, SchemaSource,
};
use crate::value::{Path, cmp_numbers, json_eq};
use crate::vm::resource::{Bindings, RequestResource};

/// The request breaks a limit (a `[*]` over too long an array) or has a case variant of a name
/// read: the whole request is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Abort;

/// What constraints can read.
pub(super) struct Env<'a> {
    pub(super) request: &'a Request,
    pub(super) resource: &'a RequestResource<'a>,
    /// The template's binding names; `bindings` slot `i` holds the value of name `i`.
    pub(super) binding_names: &'a [String],
    pub(super) bindings: &'a Bindings<'a>,
    pub(super) now: DateTime<Utc>,
    pub(super) max_array_scan: usize,
    /// A missing member with a case variant in its object refuses the request.
    pub(super) refuse_case_variants: bool,
    /// The constraint being checked sits under an odd number of `not`s.
    pub(super) negated: std::cell::Cell<bool>,
}

impl Env<'_> {
    /// What a test that cannot decide (a value of the wrong shape or type, a repeated query
    /// parameter) counts as: whatever fails the top-level constraint — false, or true under an
    /// odd number of `not`s.
    fn broken(&self) -> bool {
        self.negated.get()
    }
}

/// The name of the first top-level constraint that does not hold, if any. Rate limits are
/// stateful and hold in a stateless decision.
pub(super) fn first_failing(
    env: &Env<'_>,
    constraints: &[Constraint],
) -> Result<Option<&'static str>, Abort> {
    for constraint in constraints {
        if !holds(env, constraint)? {
            return Ok(Some(constraint.kind.name()));
        }
    }
    Ok(None)
}

/// Whether one constraint holds.
pub(super) fn holds(env: &Env<'_>, constraint: &Constraint) -> Result<bool, Abort> {
    let optional = constraint.optional;
    Ok(match &constraint.kind {
        ConstraintKind::FieldEquals { path, rhs } => match rhs {
            EqualsRhs::Value(literal) => every(env, &path.node, optional, |found| {
                Some(json_eq(&found.to_json(), &literal.node))
            })?,
            EqualsRhs::In(literals) => every(env, &path.node, optional, |found| {
                let value = found.to_json();
                Some(
                    literals
                        .iter()
                        .any(|literal| json_eq(&value, &literal.node)),
                )
            })?,
            EqualsRhs::Path(other) => equals_other(env, &path.node, &other.node, optional)?,
        },
        ConstraintKind::FieldMatches {
            path,
            pattern,
            case_insensitive,
        } => {
            // SPEC §2.4: the whole string, "as if wrapped in `^(?:…)$`" — which presumes the
            // pattern is a regex on its own (one that closes the wrapper's group early is not).
            if regex_syntax::ast::parse::Parser::new()
                .parse(&pattern.node)
                .is_err()
            {
                return Ok(false);
            }
            // `\d`, `\w` and `\s` are ASCII (`docs/language.md`): written out as ASCII classes,
            // the regex crate reads the pattern as the engine does.
            let Ok(regex) =
                crate::bytecode::matcher::with_ascii_classes(&pattern.node).and_then(|ascii| {
                    regex::RegexBuilder::new(&format!("^(?:{ascii})$"))
                        .case_insensitive(*case_insensitive)
                        .build()
                })
            else {
                return Ok(false);
            };
            every(env, &path.node, optional, |found| match found {
                Found::Json(Value::String(text)) => Some(regex.is_match(text)),
                Found::Text(text) => Some(regex.is_match(text)),
                // Not a string: nothing to match, and not a pass under `not` either.
                Found::Json(_) => None,
            })?
        }
        ConstraintKind::FieldRange { subject, bounds } => match subject {
            RangeSubject::Field(path) => {
                let uses_now = bounds.iter().any(|b| b.value == BoundValue::Now);
                if uses_now {
                    every(env, &path.node, optional, |found| {
                        timestamp(found)
                            .map(|t| bounds.iter().all(|b| bound_holds(b, t.cmp(&env.now))))
                    })?
                } else {
                    every(env, &path.node, optional, |found| match found {
                        Found::Json(Value::Number(n)) => {
                            Some(bounds.iter().all(|b| number_bound_holds(b, n)))
                        }
                        _ => None,
                    })?
                }
            }
            RangeSubject::Difference(a, b) => {
                let a = reach_one(env, &a.node)?;
                let b = reach_one(env, &b.node)?;
                match (a, b) {
                    (Reached::CaseVariant, _) | (_, Reached::CaseVariant) => return Err(Abort),
                    (Reached::Broken, _) | (_, Reached::Broken) => env.broken(),
                    (Reached::Absent, _) | (_, Reached::Absent) => optional,
                    (Reached::Value(a), Reached::Value(b)) => {
                        match (timestamp(&a), timestamp(&b)) {
                            (Some(a), Some(b)) => {
                                let difference = nanos(a) - nanos(b);
                                bounds.iter().all(|bound| match bound.value {
                                    BoundValue::Duration(d) => {
                                        bound_holds(bound, difference.cmp(&i128::from(d.nanos)))
                                    }
                                    _ => false,
                                })
                            }
                            _ => env.broken(),
                        }
                    }
                }
            }
        },
        ConstraintKind::PayloadSchema(source) => match source {
            SchemaSource::Inline(schema) => {
                match crate::compile::schema::compile_schema(&schema.node) {
                    // A limit or a case variant refuses the whole request (SPEC §7), as in the
                    // engine. The reference does not count regex work (`Limits::max_regex_work`).
                    Ok(program) => crate::vm::schema::validate(
                        &program,
                        &env.request.payload,
                        &crate::vm::RegexBudget::unlimited(),
                        env.refuse_case_variants,
                    )
                    .map_err(|_| Abort)?,
                    Err(_) => false,
                }
            }
            // The loader inlines schema files before anything is compiled.
            SchemaSource::File(_) => false,
        },
        ConstraintKind::ActorBinding { paths, identity } => {
            // SPEC §2.4: a request without the identity field is denied; a `null` one names
            // no agent either.
            if let Reached::Value(found) = reach_one(env, &identity.node)?
                && found.to_json() == Value::Null
            {
                return Ok(false);
            }
            let mut all = true;
            for path in paths {
                all = all && equals_other(env, &path.node, &identity.node, optional)?;
            }
            all && !paths.is_empty()
        }
        // Stateful: a stateless decision does not count calls.
        ConstraintKind::RateLimit(_) => true,
        ConstraintKind::WallClockWindow(spec) => window_holds(spec, env.now),
        ConstraintKind::Any(items) => {
            let mut any = false;
            for item in items {
                if holds(env, item)? {
                    any = true;
                    break;
                }
            }
            any
        }
        ConstraintKind::All(items) => {
            let mut all = true;
            for item in items {
                if !holds(env, item)? {
                    all = false;
                    break;
                }
            }
            all
        }
        ConstraintKind::Not(inner) => {
            env.negated.set(!env.negated.get());
            let inner = holds(env, inner);
            env.negated.set(!env.negated.get());
            !inner?
        }
    })
}

/// True when every value `path` reaches passes `test`, absent values passing only if
/// `optional`.
fn every(
    env: &Env<'_>,
    path: &Path,
    optional: bool,
    test: impl Fn(&Found<'_>) -> Option<bool>,
) -> Result<bool, Abort> {
    // In order, stopping at the first value that decides: a failing value, or a broken one (a
    // wrong shape on the way, or a value `test` cannot read, `None`), which decides the whole
    // test as broken.
    for reached in reach(env, path)? {
        match reached {
            Reached::Value(found) => match test(&found) {
                Some(true) => {}
                Some(false) => return Ok(false),
                None => return Ok(env.broken()),
            },
            Reached::Absent if optional => {}
            Reached::Absent => return Ok(false),
            Reached::Broken => return Ok(env.broken()),
            Reached::CaseVariant => return Err(Abort),
        }
    }
    Ok(true)
}

/// `PATH == OTHER`: `OTHER` must name one present value, `optional` or not.
fn equals_other(env: &Env<'_>, path: &Path, other: &Path, optional: bool) -> Result<bool, Abort> {
    let other = match reach_one(env, other)? {
        Reached::Value(other) => other,
        Reached::Broken => return Ok(env.broken()),
        Reached::Absent => return Ok(false),
        Reached::CaseVariant => return Err(Abort),
    };
    let other = other.to_json();
    every(env, path, optional, |found| {
        Some(json_eq(&found.to_json(), &other))
    })
}

fn timestamp(found: &Found<'_>) -> Option<DateTime<Utc>> {
    let text = match found {
        Found::Json(Value::String(text)) => text.as_str(),
        Found::Text(text) => text.as_str(),
        Found::Json(_) => return None,
    };
    // An instant is exact to the nanosecond: finer fractions are not cut off but refused.
    if let Some((_, after_point)) = text.split_once('.') {
        let fraction: String = after_point
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if fraction.len() > 9 && fraction[9..].chars().any(|c| c != '0') {
            return None;
        }
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn nanos(t: DateTime<Utc>) -> i128 {
    i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos())
}

fn number_bound_holds(bound: &Bound, n: &Number) -> bool {
    match &bound.value {
        BoundValue::Number(limit) => {
            cmp_numbers(n, limit).is_some_and(|ordering| bound_holds(bound, ordering))
        }
        _ => false,
    }
}

/// `subject OP value`, given how the subject orders against the value.
fn bound_holds(bound: &Bound, ordering: Ordering) -> bool {
    match bound.op {
        CmpOp::Lt => ordering == Ordering::Less,
        CmpOp::Le => ordering != Ordering::Greater,
        CmpOp::Gt => ordering == Ordering::Greater,
        CmpOp::Ge => ordering != Ordering::Less,
    }
}
