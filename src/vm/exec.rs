//! The interpreter.
//!
//! [`run`] is the hot path: it executes a [`VerifiedProgram`] against an [`Input`] with a
//! fixed-size boolean stack, allocates nothing, and reports only which top-level constraint
//! failed. [`trace`] runs the same loop with a [`Tracer`] that receives a [`TestReport`] for every
//! test — the concrete path of the offending value, the value seen and a message — which deny
//! reasons and the REPL's `:explain` are built from. Both share one loop, monomorphised on the
//! tracer, so the explanation can never disagree with the decision. The loop runs the control
//! instructions itself and hands each test instruction to `test_op.rs`.
//!
//! Cost: every jump is forward, so each instruction runs at most once per evaluation; a test
//! visits at most the payload nodes its path reaches. See `docs/bytecode.md` for the bound.

use super::input::Input;
use super::json::Json;
use super::plan::Planned;
use super::test_op::test;
use crate::bytecode::index::{CheckIdx, Index, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::verify::{MAX_STACK, VerifiedProgram};

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
    pub(super) lenient: bool,
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
