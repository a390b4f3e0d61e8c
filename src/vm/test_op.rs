//! The test instructions: each reads the request and pushes whether its constraint holds.
//!
//! [`test`] evaluates one test instruction, for the interpreter loop (`exec.rs`) and the plan
//! (`plan.rs`). It looks up the instruction's operands and hands them to one [`Test`] method per
//! family of test:
//!
//! - equality: `Op::Equals` and `Op::InSet` compare each value a path reaches with constants;
//!   [`Test::equals_path`] compares it with the one value another path reaches (`actorBinding`
//!   too), after [`Test::plain_members_equal`], the shortcut for two plain members;
//! - [`Test::matches`]: a whole-value regex, each match paid from the request's regex budget;
//! - bounds: `Op::Range` bounds a number, `Op::RangeNow` a timestamp against the clock, and
//!   [`Test::range_diff`] the difference of two timestamps;
//! - [`Test::schema`]: the payload against a compiled `payloadSchema`;
//! - [`Test::window`]: the clock against a wall-clock window.
//!
//! The tests of a path visit every value it reaches through [`Test::walk`], which counts them
//! and, only for a sink that explains, records the concrete path and the value that failed.
//! [`Test::finish`] turns what the walk found ([`Walked`]) into the test's answer: an error for
//! a broken limit or a case variant, the failing answer for a value the test cannot decide on,
//! and the report for the sink. Schema and window tests decide on their own and report
//! themselves.
//!
//! Everything is monomorphised on the JSON representation and the sink: with the silent sink, the
//! recording and the reports compile away, and the hot path does only the comparisons.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};

use super::exec::{Sink, Steps, TestReport, VmError};
use super::input::Input;
use super::json::Json;
use super::path::{Leaf, NoTrail, SegmentTrail, Stop, plain_member, visit, with_single};
use super::schema::{Refused, SchemaLimit};
use crate::bytecode::index::{Index, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::program::{
    BoundConst, BoundSet, CompiledPath, CompiledRegex, PathAccess, Program,
};
use crate::bytecode::schema::SchemaProgram;
use crate::bytecode::window::CompiledWindow;
use crate::time::{format_nanos, nanos, parse_timestamp};

/// Evaluates one test instruction, the one at `at`, and reports it to the sink. `negated`: the
/// test is under an odd number of `not`s (`VerifiedProgram::negated`).
pub(super) fn test<'r, J: Json<'r>, S: Sink>(
    program: &Program,
    op: &Op,
    at: usize,
    input: &Input<'_, J>,
    sink: &mut S,
    steps: &mut Steps,
    negated: bool,
) -> Result<bool, VmError> {
    let mut test = Test {
        input,
        sink,
        steps,
        at,
        seen: Seen::default(),
        trail: SegmentTrail::default(),
        mistyped: false,
    };
    let walked = match *op {
        Op::Equals {
            path,
            value,
            optional,
        } => {
            let value = table(&program.consts, value)?;
            test.walk(table(&program.paths, path)?, optional, |leaf| {
                Some(leaf.equals_value(value))
            })
        }
        Op::InSet {
            path,
            set,
            optional,
        } => {
            let set = table(&program.sets, set)?;
            test.walk(table(&program.paths, path)?, optional, |leaf| {
                Some(leaf.equals_any(&set.values))
            })
        }
        Op::EqualsPath {
            path,
            other,
            optional,
        }
        | Op::BindsIdentity {
            path,
            identity: other,
            optional,
        } => {
            // `other` must be present; for `actorBinding` (`binds`) it must not be `null` either
            // (a `null` field names no agent; SPEC §2.4 denies a request without the identity
            // field). Regression: `null == null` bound an agent without an email to records
            // without an owner.
            let identity = matches!(op, Op::BindsIdentity { .. });
            let (path, other) = (table(&program.paths, path)?, table(&program.paths, other)?);
            if let Some(holds) = test.plain_members_equal(path, other, identity) {
                return Ok(holds);
            }
            test.equals_path(path, other, optional, identity)
        }
        Op::Matches {
            path,
            regex,
            optional,
        } => test.matches(
            table(&program.paths, path)?,
            table(&program.regexes, regex)?,
            optional,
        )?,
        Op::Range {
            path,
            bounds,
            optional,
        } => {
            let bounds = table(&program.bounds, bounds)?;
            test.walk(table(&program.paths, path)?, optional, |leaf| {
                leaf.as_number().map(|n| number_in_bounds(&n, bounds))
            })
        }
        Op::RangeNow {
            path,
            bounds,
            optional,
        } => {
            let bounds = table(&program.bounds, bounds)?;
            let now = input.now;
            test.walk(table(&program.paths, path)?, optional, |leaf| {
                leaf.with_str(|s| s.and_then(parse_timestamp))
                    .map(|t| instant_in_bounds(t, now, bounds))
            })
        }
        Op::RangeDiff {
            a,
            b,
            bounds,
            optional,
        } => test.range_diff(
            table(&program.paths, a)?,
            table(&program.paths, b)?,
            table(&program.bounds, bounds)?,
            optional,
        ),
        Op::Schema { schema } => return test.schema(table(&program.schemas, schema)?),
        Op::Window { window } => return Ok(test.window(table(&program.windows, window)?)),
        Op::Push(_)
        | Op::Not
        | Op::OrElse { .. }
        | Op::AndThen { .. }
        | Op::Require { .. }
        | Op::Accept => return Err(VmError::Internal("control instruction evaluated as a test")),
    };
    test.finish(program, op, walked, negated)
}

/// An operand's entry in one of the program's tables.
fn table<I: Index, T>(entries: &[T], index: I) -> Result<&T, VmError> {
    lookup(entries, index).ok_or(VmError::Internal(
        "operand out of range in a verified program",
    ))
}

/// One test instruction being evaluated: what it reads, where it reports, and what it has met.
/// `'p` is the program's: the trail borrows its keys from the compiled paths.
struct Test<'t, 'p, 'i, J, S> {
    input: &'t Input<'i, J>,
    sink: &'t mut S,
    steps: &'t mut Steps,
    /// The instruction's position, for the report.
    at: usize,
    /// The value that failed, kept only when explaining.
    seen: Seen,
    /// The concrete path of the value being visited; on the hot path it records nothing.
    trail: SegmentTrail<'p>,
    /// A value the test cannot read as what it bounds or matches (a number, a string, a
    /// timestamp) was met: like a broken path, it may not count as a pass under `not`.
    mistyped: bool,
}

/// What the walks of a test found: why they stopped, if they did, and the path that says where.
struct Walked<'p> {
    result: Result<(), Stop>,
    /// The path the result is reported against.
    path: &'p CompiledPath,
}

impl<'p, 'r, J: Json<'r>, S: Sink> Test<'_, 'p, '_, J, S> {
    /// Visits every value `path` reaches while `decide` holds for it. `decide` answers `None`
    /// for a value it cannot read as what it compares, which fails the value and marks the test
    /// mistyped.
    #[inline]
    fn walk(
        &mut self,
        path: &'p CompiledPath,
        optional: bool,
        mut decide: impl FnMut(Leaf<'_, J>) -> Option<bool>,
    ) -> Walked<'p> {
        let Test {
            input,
            steps,
            seen,
            trail,
            mistyped,
            ..
        } = self;
        let mut predicate = |leaf: Leaf<'_, J>| {
            steps.visits += 1;
            let holds = decide(leaf).unwrap_or_else(|| {
                *mistyped = true;
                false
            });
            if S::EXPLAIN && !holds {
                seen.record(leaf);
            }
            holds
        };
        // Only a sink that explains pays for a trail.
        let result = if S::EXPLAIN {
            visit(input, path, optional, trail, &mut predicate)
        } else {
            visit(input, path, optional, &mut NoTrail, &mut predicate)
        };
        Walked { result, path }
    }

    /// The answer of an equality of `path` and `other` when both are plain members of the
    /// request (keys only, both present, the identity not `null`): the walks of
    /// [`Test::equals_path`] would reach just these two values and compare them, so they are
    /// compared here (the usual case: `payload.organizer.email == agent.email`). `None` for
    /// every other case, and for a sink that explains. (The same shortcut for `Equals`, `InSet`
    /// and `Matches` costs the other tests of the peers scenario, benches/peers, more than it
    /// saves.)
    #[inline]
    fn plain_members_equal(
        &mut self,
        path: &CompiledPath,
        other: &CompiledPath,
        identity: bool,
    ) -> Option<bool> {
        if S::EXPLAIN {
            return None;
        }
        let value = plain_member(self.input, path)?;
        let other = plain_member(self.input, other)?;
        if identity && other.is_null() {
            return None;
        }
        self.steps.visits += 1;
        Some(value.json_eq(other))
    }

    /// Each value `path` reaches equals the one value `other_path` reaches, which must be
    /// usable: present, not broken, and for an `identity` not `null`.
    fn equals_path(
        &mut self,
        path: &'p CompiledPath,
        other_path: &'p CompiledPath,
        optional: bool,
        identity: bool,
    ) -> Walked<'p> {
        let unusable = |other: &Result<Leaf<'_, J>, Stop>| match other {
            // A broken `other` is broken, not absent (see `Op::Require`); a case variant
            // refuses the request.
            Err(stop @ (Stop::WrongShape(_) | Stop::Ambiguous(_) | Stop::CaseVariant)) => {
                Some(*stop)
            }
            Err(_) => Some(Stop::Missing),
            Ok(Leaf::Json(value)) if identity && value.is_null() => Some(Stop::NullIdentity),
            Ok(_) => None,
        };
        let input = self.input;
        let result = with_single(input, other_path, |other| match (unusable(&other), other) {
            (None, Ok(other)) => {
                self.walk(path, optional, |leaf| Some(leaf.equals(other)))
                    .result
            }
            (Some(stop), _) | (None, Err(stop)) => Err(stop),
        });
        // An unusable `other` is reported against the other path (and so is a case variant
        // met there, which the request's refusal names).
        let other_failed = (S::EXPLAIN || result == Err(Stop::CaseVariant))
            && with_single(input, other_path, |other| unusable(&other).is_some());
        Walked {
            result,
            path: if other_failed { other_path } else { path },
        }
    }

    /// Each string `path` reaches matches `regex` whole. Each match is paid for before it
    /// runs; one the budget cannot pay for stops the walk and refuses the request.
    fn matches(
        &mut self,
        path: &'p CompiledPath,
        regex: &CompiledRegex,
        optional: bool,
    ) -> Result<Walked<'p>, VmError> {
        let budget = self.input.regex_budget;
        let mut exceeded = None;
        let walked = self.walk(path, optional, |leaf| {
            leaf.with_str(|s| {
                s.map(|s| match budget.charge(regex.regex.work(s)) {
                    Ok(()) => regex.regex.is_match(s),
                    Err(over) => {
                        exceeded = Some(over);
                        false
                    }
                })
            })
        });
        match exceeded {
            Some(over) => Err(VmError::RegexWork {
                path: path.text.clone(),
                limit: over.limit,
            }),
            None => Ok(walked),
        }
    }

    /// The difference of the timestamps at `a_path` and `b_path` (one value each) is within
    /// `bounds`.
    fn range_diff(
        &mut self,
        a_path: &'p CompiledPath,
        b_path: &'p CompiledPath,
        bounds: &BoundSet,
        optional: bool,
    ) -> Walked<'p> {
        let Test {
            input,
            steps,
            seen,
            mistyped,
            ..
        } = self;
        steps.visits += 2;
        let result = with_single(input, a_path, |a| {
            with_single(input, b_path, |b| match (a, b) {
                (Ok(a), Ok(b)) => {
                    let difference = a
                        .with_str(|s| s.and_then(parse_timestamp))
                        .zip(b.with_str(|s| s.and_then(parse_timestamp)))
                        .map(|(a, b)| nanos(a) - nanos(b));
                    match difference {
                        Some(d) if nanos_in_bounds(d, bounds) => Ok(()),
                        _ => {
                            *mistyped |= difference.is_none();
                            if S::EXPLAIN {
                                seen.text = Some(match difference {
                                    Some(d) => format_nanos(d),
                                    None => format!("{} and {}", a.describe(), b.describe()),
                                });
                                seen.kind = Some(if difference.is_some() {
                                    "difference"
                                } else {
                                    "timestamps"
                                });
                            }
                            Err(Stop::Rejected)
                        }
                    }
                }
                // A case variant on either side refuses the request, whatever the other.
                (Err(Stop::CaseVariant), _) | (_, Err(Stop::CaseVariant)) => Err(Stop::CaseVariant),
                // `optional` forgives absence only: when one side is absent and the other
                // broken (wrong shape, repeated query parameter), the constraint fails —
                // found by the differential tests (`regression_optional_difference_*`).
                (Ok(_), Err(Stop::Missing)) | (Err(Stop::Missing), Ok(_) | Err(Stop::Missing))
                    if optional =>
                {
                    Ok(())
                }
                (Err(Stop::Missing), Err(stop)) | (Err(stop), _) | (_, Err(stop)) => Err(stop),
            })
        });
        Walked {
            result,
            path: a_path,
        }
    }

    /// The payload is valid against `schema`; a limit or a case variant refuses the request.
    fn schema(&mut self, schema: &SchemaProgram) -> Result<bool, VmError> {
        let input = self.input;
        self.steps.visits += 1;
        let holds = match super::schema::validate(
            schema,
            input.payload,
            input.regex_budget,
            input.refuse_case_variants,
        ) {
            Ok(holds) => holds,
            // A case variant of a name the schema reads refuses the request; with none, the
            // explanation below (which reads no more than this did) meets none either.
            Err(Refused::CaseVariant(_)) => return Err(VmError::CaseVariant { path: None }),
            Err(Refused::Limit(SchemaLimit::BrokenProgram)) => {
                return Err(VmError::Internal("schema program is malformed"));
            }
            Err(Refused::Limit(SchemaLimit::RegexWork(limit))) => {
                return Err(VmError::RegexWork {
                    path: "payload".to_owned(),
                    limit,
                });
            }
            // A limit refuses the request, under `not` and `any` too (never a `false` a
            // `not` could flip into a pass).
            Err(Refused::Limit(limit)) => return Err(VmError::SchemaLimit(limit)),
        };
        if S::EXPLAIN {
            let (path, message) = match super::schema::first_violation(schema, input.payload) {
                Some(violation) => {
                    let mut text = String::from("payload");
                    for segment in &violation.instance_path {
                        text.push_str(&segment.to_string());
                    }
                    (Some(text), violation.message)
                }
                None => (
                    Some("payload".to_owned()),
                    "payload matches the schema".to_owned(),
                ),
            };
            self.sink.test(TestReport {
                at: self.at,
                holds,
                path,
                message,
                broken: false,
            });
        }
        Ok(holds)
    }

    /// The request's instant is inside `window`.
    fn window(&mut self, window: &CompiledWindow) -> bool {
        let now = self.input.now;
        let holds = window.contains(now);
        if S::EXPLAIN {
            let message = if holds {
                format!("the time is inside {}", window.describe())
            } else {
                format!(
                    "the time is {}, outside {}",
                    window.describe_instant(now),
                    window.describe()
                )
            };
            self.sink.test(TestReport {
                at: self.at,
                holds,
                path: None,
                message,
                broken: false,
            });
        }
        holds
    }

    /// The answer of a test whose walks found `walked`: an error for a broken limit or a case
    /// variant; for a value the test cannot decide on, whatever fails its check — false, or
    /// true under an odd number of `not`s (`negated`); else whether every value held. Reports
    /// the test to a sink that explains.
    fn finish(
        self,
        program: &Program,
        op: &Op,
        walked: Walked<'p>,
        negated: bool,
    ) -> Result<bool, VmError> {
        let Walked { result, path } = walked;
        match result {
            Err(Stop::TooLong(found)) => {
                return Err(VmError::ArrayTooLong {
                    path: path.text.clone(),
                    found,
                    limit: self.input.max_array_scan,
                });
            }
            Err(Stop::CaseVariant) => {
                return Err(VmError::CaseVariant {
                    path: Some(path.text.clone()),
                });
            }
            _ => {}
        }
        let broken = matches!(result, Err(Stop::WrongShape(_) | Stop::Ambiguous(_)))
            || (self.mistyped && result == Err(Stop::Rejected));
        if S::EXPLAIN {
            let concrete = concrete_path(path, &self.trail);
            let message = super::explain::test_message(program, op, result, &self.seen, self.input);
            self.sink.test(TestReport {
                at: self.at,
                holds: result.is_ok(),
                path: Some(concrete),
                message,
                broken,
            });
        }
        Ok(if broken {
            negated != self.steps.lenient
        } else {
            result.is_ok()
        })
    }
}

/// The value a failing test saw, kept only when explaining.
#[derive(Default)]
pub(super) struct Seen {
    /// The value as JSON text, cut for messages.
    pub(super) text: Option<String>,
    /// Its JSON type name.
    pub(super) kind: Option<&'static str>,
}

impl Seen {
    fn record<'r, J: Json<'r>>(&mut self, leaf: Leaf<'_, J>) {
        self.text = Some(leaf.describe());
        self.kind = Some(leaf.type_name());
    }
}

/// The concrete path of the value a test stopped at.
fn concrete_path(path: &CompiledPath, trail: &SegmentTrail) -> String {
    match &path.access {
        PathAccess::Json { root, .. } => {
            if trail.steps.is_empty() {
                // The walk never stepped (e.g. it held, or the root itself failed): print the
                // path as written.
                return path.text.clone();
            }
            let mut text = String::with_capacity(path.text.len() + 8);
            text.push_str(root.name());
            for step in &trail.steps {
                step.push_to(&mut text);
            }
            text
        }
        _ => path.text.clone(),
    }
}

/// Whether every bound holds, given how the subject orders against each bound's constant
/// (`None`, e.g. a constant of the wrong kind, fails the bound).
fn within(bounds: &BoundSet, order: impl Fn(&BoundConst) -> Option<Ordering>) -> bool {
    bounds
        .bounds
        .iter()
        .all(|(cmp, bound)| order(bound).is_some_and(|ordering| cmp.holds(ordering)))
}

fn number_in_bounds(n: &serde_json::Number, bounds: &BoundSet) -> bool {
    within(bounds, |bound| match bound {
        BoundConst::Number(limit) => crate::value::cmp_numbers(n, limit),
        BoundConst::Nanos(_) | BoundConst::Now => None,
    })
}

fn instant_in_bounds(t: DateTime<Utc>, now: DateTime<Utc>, bounds: &BoundSet) -> bool {
    within(bounds, |bound| match bound {
        BoundConst::Now => Some(t.cmp(&now)),
        BoundConst::Number(_) | BoundConst::Nanos(_) => None,
    })
}

fn nanos_in_bounds(d: i128, bounds: &BoundSet) -> bool {
    within(bounds, |bound| match bound {
        BoundConst::Nanos(limit) => Some(d.cmp(limit)),
        BoundConst::Number(_) | BoundConst::Now => None,
    })
}
