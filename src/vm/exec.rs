//! The interpreter.
//!
//! [`run`] is the hot path: it executes a [`VerifiedProgram`] against an [`Input`] with a
//! fixed-size boolean stack, allocates nothing, and reports only which top-level constraint
//! failed. [`trace`] runs the same loop with a [`Tracer`] that receives a [`TestReport`] for every
//! test — the concrete path of the offending value, the value seen and a message — which deny
//! reasons and the REPL's `:explain` are built from. Both share one loop, monomorphised on the
//! tracer, so the explanation can never disagree with the decision.
//!
//! Cost: every jump is forward, so each instruction runs at most once per evaluation; a test
//! visits at most the payload nodes its path reaches. See `docs/bytecode.md` for the bound.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};

use super::input::Input;
use super::json::Json;
use super::path::{Leaf, NoTrail, SegmentTrail, Stop, plain_member, visit, with_single};
use super::plan::Planned;
use super::schema::{Refused, SchemaLimit};
use crate::bytecode::index::{CheckIdx, Index, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::program::{BoundConst, BoundSet, CompiledPath, PathAccess, Program};
use crate::bytecode::verify::{MAX_STACK, VerifiedProgram};
use crate::time::{format_nanos, nanos, parse_timestamp};

/// How a program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every constraint held.
    Accepted,
    /// The top-level constraint `CheckIdx` failed (the first one, in order).
    Failed(CheckIdx),
}

/// Why a program could not be evaluated. Either way the decision is a deny.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum VmError {
    /// The request breaks a limit (reason `input`).
    #[error("`{path}` has {found} elements, more than the limit of {limit} for `[*]`")]
    ArrayTooLong {
        /// The path being walked.
        path: String,
        /// The array length.
        found: usize,
        /// The limit.
        limit: usize,
    },
    /// A regex match would take the request past `Limits::max_regex_work` (reason `input`);
    /// it was not run.
    #[error(
        "matching `{path}` would take the regex work of this request past the limit of {limit} \
         byte-states (`max_regex_work`: each match costs its text's bytes times its regex's \
         states)"
    )]
    RegexWork {
        /// The path being matched (`payload` for a `payloadSchema` pattern).
        path: String,
        /// The limit.
        limit: u64,
    },
    /// A `payloadSchema` validation stopped at a limit (reason `input`): the payload needs more
    /// work or nesting than the schema's limits allow, which is not a schema violation.
    #[error("`payloadSchema` {0}")]
    SchemaLimit(crate::vm::schema::SchemaLimit),
    /// A member the program reads is absent, but its object has a member whose name differs
    /// from it only by case (reason `input`; `Limits::refuse_case_variant_reads`).
    #[error(
        "the request has a member whose name differs only by case from one that {} reads, \
         which an upstream that binds members case-insensitively would read",
        .path.as_deref().map_or_else(|| "the payload schema".to_owned(), |p| format!("`{p}`"))
    )]
    CaseVariant {
        /// The path being read; `None` for a `payloadSchema`.
        path: Option<String>,
    },
    /// A verified-program invariant did not hold. Fuzzing asserts this is unreachable.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// What the tracer learns about one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestReport {
    /// The instruction position.
    pub at: usize,
    /// Whether the test held (false for a test that could not decide: see `broken`).
    pub holds: bool,
    /// The concrete path of the offending value (`payload.attendees[4].email`), when it failed
    /// on one.
    pub path: Option<String>,
    /// A one-line explanation; for a test that held, a short description of what was checked.
    pub message: String,
    /// The test met a value it cannot decide on (a wrong shape, a repeated query parameter, a
    /// value of the wrong type for it). Its check counted it as whatever fails the check — as
    /// true under an odd number of `not`s — whatever `holds` says.
    pub broken: bool,
}

/// Receives test results during [`trace`].
pub trait Tracer {
    /// Called after each test.
    fn test(&mut self, report: TestReport);
    /// Called at each `Require` with the constraint's result.
    fn require(&mut self, check: CheckIdx, holds: bool);
}

/// Counts what an evaluation did, for the cost bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steps {
    /// Instructions executed.
    pub instructions: u64,
    /// Values visited by tests (path leaves and array elements).
    pub visits: u64,
    /// Tests that cannot decide take the answer that helps their check, not the one that fails
    /// it ([`undecidable_tests_decide`] only).
    lenient: bool,
}

struct Stack {
    slots: [bool; MAX_STACK as usize],
    len: usize,
}

impl Stack {
    fn new() -> Self {
        Stack {
            slots: [false; MAX_STACK as usize],
            len: 0,
        }
    }

    fn push(&mut self, value: bool) -> Result<(), VmError> {
        let slot = self
            .slots
            .get_mut(self.len)
            .ok_or(VmError::Internal("stack overflow in a verified program"))?;
        *slot = value;
        self.len += 1;
        Ok(())
    }

    fn pop(&mut self) -> Result<bool, VmError> {
        self.len = self
            .len
            .checked_sub(1)
            .ok_or(VmError::Internal("stack underflow in a verified program"))?;
        self.slots
            .get(self.len)
            .copied()
            .ok_or(VmError::Internal("stack underflow in a verified program"))
    }

    fn peek(&self) -> Result<bool, VmError> {
        self.len
            .checked_sub(1)
            .and_then(|top| self.slots.get(top).copied())
            .ok_or(VmError::Internal("empty stack in a verified program"))
    }
}

/// Runs a program; the hot path. A program with a plan tries it first
/// ([`crate::bytecode::plan`]): when the plan finds every check holding, the program accepts;
/// when it finds one failing (as it fails in the program), that check fails; otherwise the
/// program runs from the first check the plan could not answer (the checks before it held, and
/// the stack is empty between checks).
pub fn run<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
) -> Result<Outcome, VmError> {
    let start = match program.plan() {
        None => 0,
        Some(plan) => match super::plan::decide(program, plan, input) {
            Planned::Accepted => return Ok(Outcome::Accepted),
            Planned::Failed(check) => return Ok(Outcome::Failed(check)),
            Planned::From(at) => at,
        },
    };
    run_from(program, input, (start, TO_THE_END), &mut Steps::default())
}

/// Runs a program silently over `range`: from its start (0, or the start of a check) until the
/// program accepts or fails, or reaches the range's end.
#[inline]
fn run_from<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    range: (usize, usize),
    steps: &mut Steps,
) -> Result<Outcome, VmError> {
    execute::<J, Silent>(program, input, &mut Silent, false, range, 0, steps)
}

/// What the plan of `program` makes of `input` alone: `Some(outcome)` when it decided
/// (every check held, or one failed), `None` when it left the call to the program or `program`
/// has no plan. For the tests that show the plan decides the calls it should. Feature
/// `internals`.
#[cfg(feature = "internals")]
pub fn decided_by_plan<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
) -> Option<Outcome> {
    match super::plan::decide(program, program.plan()?, input) {
        Planned::Accepted => Some(Outcome::Accepted),
        Planned::Failed(check) => Some(Outcome::Failed(check)),
        Planned::From(_) => None,
    }
}

/// Runs a program without trying its plan: the reference the plan is tested against. Feature
/// `internals`.
#[cfg(feature = "internals")]
pub fn run_unplanned<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
) -> Result<Outcome, VmError> {
    run_from(program, input, (0, TO_THE_END), &mut Steps::default())
}

/// Runs a program and counts its steps (for the cost-bound tests). Feature `internals`.
#[cfg(feature = "internals")]
pub fn run_counted<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
) -> Result<(Outcome, Steps), VmError> {
    let mut steps = Steps::default();
    let outcome = run_from(program, input, (0, TO_THE_END), &mut steps)?;
    Ok((outcome, steps))
}

/// Runs a program reporting every test to `tracer`. With `keep_going`, a failing `Require` does
/// not stop the program, so every constraint is traced; the outcome is still the first failure.
pub fn trace<'r, J: Json<'r>, T: Tracer>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    tracer: &mut T,
    keep_going: bool,
) -> Result<Outcome, VmError> {
    trace_from(program, input, tracer, keep_going, 0)
}

/// [`trace`], explaining only the tests at or after instruction `explain_from`: the ones before
/// run as on the hot path (no messages, no concrete paths) and the tracer hears only their
/// `Require`s. For a deny, whose failing check is known from the fast run, the checks before it
/// held and need no explanation.
pub fn trace_from<'r, J: Json<'r>, T: Tracer>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    tracer: &mut T,
    keep_going: bool,
    explain_from: usize,
) -> Result<Outcome, VmError> {
    traced(program, input, tracer, keep_going, 0, explain_from)
}

/// Explains the failure of check `check`, which the decision being explained saw fail after
/// every check before it held: traces its tests, stopping at its `Require`. A check the verifier
/// proved self-contained ([`VerifiedProgram::self_contained`]) is run on its own, from its first
/// instruction; any other check is reached by [`trace_from`] the start of the program, the
/// checks before it run as on the hot path. The outcome is `Failed(check)` either way unless the
/// trace disagrees with the decision, which the caller treats as an internal error.
pub fn trace_check<'r, J: Json<'r>, T: Tracer>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    tracer: &mut T,
    check: CheckIdx,
) -> Result<Outcome, VmError> {
    let (from, start) = check_entry(program, check);
    traced(program, input, tracer, false, from, start)
}

/// Where to run check `check` from to get its result, and where its own code starts: its first
/// instruction when the check is self-contained, else the start of the program.
fn check_entry(program: &VerifiedProgram, check: CheckIdx) -> (usize, usize) {
    let start = lookup(&program.program().checks, check)
        .map_or(0, |info| usize::try_from(info.code_start).unwrap_or(0));
    let from = if program.self_contained(check) {
        start
    } else {
        0
    };
    (from, start)
}

/// Whether check `check` would hold if every test that could not decide had given the answer
/// that helps it: when it would, those tests decided its failure (the deny says the value could
/// not be decided); when not, another test failed it on its own. For explaining a deny only.
pub fn undecidable_tests_decide<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    check: CheckIdx,
) -> Result<bool, VmError> {
    let (from, _) = check_entry(program, check);
    let mut steps = Steps {
        lenient: true,
        ..Steps::default()
    };
    let mut sink = RequireOf { check, holds: None };
    execute(
        program,
        input,
        &mut sink,
        true,
        (from, TO_THE_END),
        0,
        &mut steps,
    )?;
    Ok(sink.holds == Some(true))
}

/// Records what one check's `Require` saw.
struct RequireOf {
    check: CheckIdx,
    holds: Option<bool>,
}

impl Sink for RequireOf {
    const EXPLAIN: bool = false;
    fn test(&mut self, _report: TestReport) {}
    fn require(&mut self, check: CheckIdx, holds: bool) {
        if check == self.check {
            self.holds = Some(holds);
        }
    }
}

/// Runs from instruction `start`, reporting the tests at or after `explain_from` to `tracer`.
fn traced<'r, J: Json<'r>, T: Tracer>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    tracer: &mut T,
    keep_going: bool,
    start: usize,
    explain_from: usize,
) -> Result<Outcome, VmError> {
    let mut steps = Steps::default();
    execute(
        program,
        input,
        &mut Traced(tracer),
        keep_going,
        (start, TO_THE_END),
        explain_from,
        &mut steps,
    )
}

/// The end of a run that goes on until the program accepts or fails.
const TO_THE_END: usize = usize::MAX;

/// Whether the check whose code is `start..end` (self-contained: entered with an empty stack,
/// its last instruction its `Require`) holds, run on its own as the program runs it; an error
/// as the program would report it. For the plan's checks of more than one test.
pub(super) fn check_holds<'r, J: Json<'r>>(
    program: &VerifiedProgram,
    input: &Input<'_, J>,
    start: usize,
    end: usize,
) -> Result<bool, VmError> {
    let outcome = run_from(program, input, (start, end), &mut Steps::default())?;
    Ok(outcome == Outcome::Accepted)
}

/// The tracer interface used inside the loop; `Silent` compiles to nothing.
pub(super) trait Sink {
    const EXPLAIN: bool;
    fn test(&mut self, report: TestReport);
    fn require(&mut self, check: CheckIdx, holds: bool);
}

pub(super) struct Silent;

impl Sink for Silent {
    const EXPLAIN: bool = false;
    #[inline]
    fn test(&mut self, _report: TestReport) {}
    #[inline]
    fn require(&mut self, _check: CheckIdx, _holds: bool) {}
}

struct Traced<'t, T: Tracer>(&'t mut T);

impl<T: Tracer> Sink for Traced<'_, T> {
    const EXPLAIN: bool = true;
    fn test(&mut self, report: TestReport) {
        self.0.test(report);
    }
    fn require(&mut self, check: CheckIdx, holds: bool) {
        self.0.require(check, holds);
    }
}

fn execute<'r, J: Json<'r>, S: Sink>(
    verified: &VerifiedProgram,
    input: &Input<'_, J>,
    sink: &mut S,
    keep_going: bool,
    (start, end): (usize, usize),
    explain_from: usize,
    steps: &mut Steps,
) -> Result<Outcome, VmError> {
    let program = verified.program();
    let mut stack = Stack::new();
    let mut first_failure = None;
    let mut pc = start;
    loop {
        if pc >= end {
            // The end of a check run alone ([`check_holds`]): every `Require` on the way held.
            return Ok(first_failure.map_or(Outcome::Accepted, Outcome::Failed));
        }
        let op = program
            .code
            .get(pc)
            .ok_or(VmError::Internal("control fell off a verified program"))?;
        steps.instructions += 1;
        let mut next = pc + 1;
        match *op {
            Op::Push(value) => stack.push(value)?,
            Op::Not => {
                let value = stack.pop()?;
                stack.push(!value)?;
            }
            Op::OrElse { target } => {
                if stack.peek()? {
                    next = target.to_usize();
                } else {
                    stack.pop()?;
                }
            }
            Op::AndThen { target } => {
                if stack.peek()? {
                    stack.pop()?;
                } else {
                    next = target.to_usize();
                }
            }
            Op::Require { check } => {
                let holds = stack.pop()?;
                sink.require(check, holds);
                if !holds {
                    if !keep_going {
                        return Ok(Outcome::Failed(check));
                    }
                    first_failure.get_or_insert(check);
                }
            }
            Op::Accept => {
                return Ok(first_failure.map_or(Outcome::Accepted, Outcome::Failed));
            }
            _ => {
                // A test that cannot decide counts as whatever fails its check: false, or true
                // under an odd number of `not`s (`VerifiedProgram::negated`). Regression: it
                // counted as false everywhere, so `not` passed a repeated query parameter or a
                // value of the wrong shape (HTTP parameter pollution got past
                // `not { fieldEquals resource.query.role == "admin" }`).
                let negated = verified.negated(pc);
                let holds = if S::EXPLAIN && pc < explain_from {
                    test::<J, Silent>(program, op, pc, input, &mut Silent, steps, negated)?
                } else {
                    test::<J, S>(program, op, pc, input, sink, steps, negated)?
                };
                stack.push(holds)?;
            }
        }
        if next <= pc {
            return Err(VmError::Internal("backward jump in a verified program"));
        }
        pc = next;
    }
}

fn table<I: Index, T>(entries: &[T], index: I) -> Result<&T, VmError> {
    lookup(entries, index).ok_or(VmError::Internal(
        "operand out of range in a verified program",
    ))
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

/// Evaluates one test instruction and reports it to the sink.
pub(super) fn test<'r, J: Json<'r>, S: Sink>(
    program: &Program,
    op: &Op,
    at: usize,
    input: &Input<'_, J>,
    sink: &mut S,
    steps: &mut Steps,
    negated: bool,
) -> Result<bool, VmError> {
    let mut seen = Seen::default();
    let mut trail = SegmentTrail::default();
    // A value the test cannot read as what it bounds or matches (a number, a string, a
    // timestamp) was met: like a broken path, it may not count as a pass under `not`.
    let mut mistyped = false;
    // On the hot path the trail records nothing; only a sink that explains pays for one.
    macro_rules! walk {
        ($path:expr, $optional:expr, |$leaf:ident| $body:expr) => {{
            let mut predicate = |$leaf: Leaf<'_, J>| {
                steps.visits += 1;
                let holds = $body;
                if S::EXPLAIN && !holds {
                    seen.record($leaf);
                }
                holds
            };
            if S::EXPLAIN {
                visit(input, $path, $optional, &mut trail, &mut predicate)
            } else {
                visit(input, $path, $optional, &mut NoTrail, &mut predicate)
            }
        }};
    }
    let (result, path): (Result<(), Stop>, Option<&CompiledPath>) = match *op {
        Op::Equals {
            path,
            value,
            optional,
        } => {
            let path = table(&program.paths, path)?;
            let value = table(&program.consts, value)?;
            (
                walk!(path, optional, |leaf| leaf.equals_value(value)),
                Some(path),
            )
        }
        Op::InSet {
            path,
            set,
            optional,
        } => {
            let path = table(&program.paths, path)?;
            let set = table(&program.sets, set)?;
            (
                walk!(path, optional, |leaf| leaf.equals_any(&set.values)),
                Some(path),
            )
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
            let path = table(&program.paths, path)?;
            let other_path = table(&program.paths, other)?;
            // `other` must be present; for `actorBinding` (`binds`) it must not be `null` either
            // (a `null` field names no agent; SPEC §2.4 denies a request without the identity
            // field). Regression: `null == null` bound an agent without an email to records
            // without an owner.
            let identity = matches!(op, Op::BindsIdentity { .. });
            // Both paths keys only, both values there, the identity not `null`: the walks below
            // would reach just these two values and compare them, so compare them here (the
            // usual case: `payload.organizer.email == agent.email`). Everything else, and every
            // trace, takes the walks. (The same shortcut for `Equals`, `InSet` and `Matches` costs
            // the other tests of the peers scenario, benches/peers, more than it saves.)
            if !S::EXPLAIN
                && let (Some(value), Some(other)) =
                    (plain_member(input, path), plain_member(input, other_path))
                && !(identity && other.is_null())
            {
                steps.visits += 1;
                return Ok(value.json_eq(other));
            }
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
            let result = with_single(input, other_path, |other| match (unusable(&other), other) {
                (None, Ok(other)) => walk!(path, optional, |leaf| leaf.equals(other)),
                (Some(stop), _) | (None, Err(stop)) => Err(stop),
            });
            // An unusable `other` is reported against the other path (and so is a case
            // variant met there, which the request's refusal names).
            let other_failed = (S::EXPLAIN || result == Err(Stop::CaseVariant))
                && with_single(input, other_path, |other| unusable(&other).is_some());
            if other_failed {
                (result, Some(other_path))
            } else {
                (result, Some(path))
            }
        }
        Op::Matches {
            path,
            regex,
            optional,
        } => {
            let path = table(&program.paths, path)?;
            let regex = table(&program.regexes, regex)?;
            // Each match is paid for before it runs; one the budget cannot pay for stops the
            // walk and refuses the request.
            let mut exceeded = None;
            let result = walk!(path, optional, |leaf| leaf.with_str(|s| match s {
                Some(s) => match input.regex_budget.charge(regex.regex.work(s)) {
                    Ok(()) => regex.regex.is_match(s),
                    Err(over) => {
                        exceeded = Some(over);
                        false
                    }
                },
                None => {
                    mistyped = true;
                    false
                }
            }));
            if let Some(over) = exceeded {
                return Err(VmError::RegexWork {
                    path: path.text.clone(),
                    limit: over.limit,
                });
            }
            (result, Some(path))
        }
        Op::Range {
            path,
            bounds,
            optional,
        } => {
            let path = table(&program.paths, path)?;
            let bounds = table(&program.bounds, bounds)?;
            (
                walk!(path, optional, |leaf| match leaf.as_number() {
                    Some(n) => number_in_bounds(&n, bounds),
                    None => {
                        mistyped = true;
                        false
                    }
                }),
                Some(path),
            )
        }
        Op::RangeNow {
            path,
            bounds,
            optional,
        } => {
            let path = table(&program.paths, path)?;
            let bounds = table(&program.bounds, bounds)?;
            let now = input.now;
            (
                walk!(
                    path,
                    optional,
                    |leaf| match leaf.with_str(|s| s.and_then(parse_timestamp)) {
                        Some(t) => instant_in_bounds(t, now, bounds),
                        None => {
                            mistyped = true;
                            false
                        }
                    }
                ),
                Some(path),
            )
        }
        Op::RangeDiff {
            a,
            b,
            bounds,
            optional,
        } => {
            let a_path = table(&program.paths, a)?;
            let b_path = table(&program.paths, b)?;
            let bounds = table(&program.bounds, bounds)?;
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
                                mistyped |= difference.is_none();
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
                    (Err(Stop::CaseVariant), _) | (_, Err(Stop::CaseVariant)) => {
                        Err(Stop::CaseVariant)
                    }
                    // `optional` forgives absence only: when one side is absent and the other
                    // broken (wrong shape, repeated query parameter), the constraint fails —
                    // found by the differential tests (`regression_optional_difference_*`).
                    (Ok(_), Err(Stop::Missing))
                    | (Err(Stop::Missing), Ok(_) | Err(Stop::Missing))
                        if optional =>
                    {
                        Ok(())
                    }
                    (Err(Stop::Missing), Err(stop)) | (Err(stop), _) | (_, Err(stop)) => Err(stop),
                })
            });
            (result, Some(a_path))
        }
        Op::Schema { schema } => {
            let schema = table(&program.schemas, schema)?;
            steps.visits += 1;
            let variants = input.refuse_case_variants;
            let holds = match crate::vm::schema::validate(
                schema,
                input.payload,
                input.regex_budget,
                variants,
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
                let (path, message) =
                    match crate::vm::schema::first_violation(schema, input.payload) {
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
                sink.test(TestReport {
                    at,
                    holds,
                    path,
                    message,
                    broken: false,
                });
            }
            return Ok(holds);
        }
        Op::Window { window } => {
            let window = table(&program.windows, window)?;
            let holds = window.contains(input.now);
            if S::EXPLAIN {
                let message = if holds {
                    format!("the time is inside {}", window.describe())
                } else {
                    format!(
                        "the time is {}, outside {}",
                        window.describe_instant(input.now),
                        window.describe()
                    )
                };
                sink.test(TestReport {
                    at,
                    holds,
                    path: None,
                    message,
                    broken: false,
                });
            }
            return Ok(holds);
        }
        Op::Push(_)
        | Op::Not
        | Op::OrElse { .. }
        | Op::AndThen { .. }
        | Op::Require { .. }
        | Op::Accept => return Err(VmError::Internal("control instruction evaluated as a test")),
    };
    match result {
        Err(Stop::TooLong(found)) => {
            return Err(VmError::ArrayTooLong {
                path: path.map_or_else(String::new, |p| p.text.clone()),
                found,
                limit: input.max_array_scan,
            });
        }
        Err(Stop::CaseVariant) => {
            return Err(VmError::CaseVariant {
                path: path.map(|p| p.text.clone()),
            });
        }
        _ => {}
    }
    // A value the test cannot decide on: it counts as whatever fails its check.
    let broken = matches!(result, Err(Stop::WrongShape(_) | Stop::Ambiguous(_)))
        || (mistyped && result == Err(Stop::Rejected));
    if S::EXPLAIN {
        let concrete = path.map(|p| concrete_path(p, &trail));
        let message = super::explain::test_message(program, op, result, &seen, input);
        sink.test(TestReport {
            at,
            holds: result.is_ok(),
            path: concrete,
            message,
            broken,
        });
    }
    Ok(if broken {
        negated != steps.lenient
    } else {
        result.is_ok()
    })
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
