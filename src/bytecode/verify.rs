//! The verifier: proves a [`Program`] safe to run before the VM ever sees it.
//!
//! It checks, in one forward pass:
//! - every operand index is in range for its table;
//! - every jump goes strictly forward to an instruction inside the program;
//! - the stack height is the same on every path into an instruction, never underflows and never
//!   exceeds [`MAX_STACK`];
//! - control cannot fall off the end, and reaches `Accept` with an empty stack;
//! - every `Require` names a check, and every check's code range lies inside the program.
//!
//! Only [`verify`] builds a [`VerifiedProgram`].
//
// INVARIANT (verified-program): a `VerifiedProgram` holds a program for which every check above
// passed. The VM relies on it and reports a violation as an internal error, never a panic.

use std::collections::BTreeMap;

use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx, lookup,
};
use super::op::{Op, OperandVisitor};
use super::plan::Plan;
use super::program::Program;
use crate::convert::usize_from;

/// The deepest stack a program may use (defined in [`crate::limits`]).
pub use crate::limits::MAX_STACK;

/// A program the verifier accepted.
#[derive(Debug, Clone)]
pub struct VerifiedProgram {
    program: Program,
    #[cfg_attr(
        not(any(test, feature = "internals")),
        expect(dead_code, reason = "read by the tests, through `max_stack`")
    )]
    max_stack: u16,
    reads_clock: bool,
    /// Per check: [`VerifiedProgram::self_contained`].
    self_contained: Vec<bool>,
    /// Per instruction: [`VerifiedProgram::negated`].
    negated: Vec<bool>,
    /// [`VerifiedProgram::plan`].
    plan: Option<Plan>,
}

impl VerifiedProgram {
    /// The verified program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The stack depth the verifier proved sufficient.
    #[cfg(any(test, feature = "internals"))]
    pub fn max_stack(&self) -> u16 {
        self.max_stack
    }

    /// True when some instruction reads the clock (`RangeNow`, `Window`): the engine reads the
    /// clock for a decision only when a program or the state store needs it.
    pub fn reads_clock(&self) -> bool {
        self.reads_clock
    }

    /// True when check `check`'s code can run on its own: it is entered with an empty stack, its
    /// range overlaps no other check's, every `Require` of it lies inside it, and no jump leaves
    /// or enters it. Such a check computes the same result whether
    /// the checks before it ran or not, so the explanation of its failure may start at its first
    /// instruction ([`crate::vm::trace_check`]). The compiler emits only such checks.
    pub fn self_contained(&self, check: CheckIdx) -> bool {
        lookup(&self.self_contained, check)
            .copied()
            .unwrap_or(false)
    }

    /// True when the value of the test at instruction `at` reaches its check's `Require` through
    /// an odd number of `Not`s: the check holds *less* often when the test holds. A test that
    /// cannot decide (a broken value) answers this, so it counts as whatever fails its check
    /// ([`crate::vm`]); every check is monotone in each test, increasing or decreasing by this
    /// parity, so that is the check's value under the worst answer of every such test.
    pub fn negated(&self, at: usize) -> bool {
        self.negated.get(at).copied().unwrap_or(false)
    }

    /// The program's plan, when its checks follow one another and each stands alone, as in
    /// every compiled program ([`crate::bytecode::plan`]).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }
}

impl std::ops::Deref for VerifiedProgram {
    type Target = Program;

    fn deref(&self) -> &Program {
        &self.program
    }
}

/// Why a program was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("bytecode rejected at instruction {at}: {reason}")]
pub struct VerifyError {
    /// The instruction position.
    pub at: usize,
    /// What is wrong.
    pub reason: VerifyReason,
}

/// The kinds of verification failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyReason {
    /// The program has no instructions.
    #[error("empty program")]
    Empty,
    /// An operand names an entry past the end of its table.
    #[error("operand {index} out of range for table `{table}`")]
    OperandOutOfRange {
        /// The table.
        table: &'static str,
        /// The index.
        index: usize,
    },
    /// A jump does not go strictly forward into the program.
    #[error("jump to {target} is not strictly forward inside the program")]
    BadJump {
        /// The target.
        target: usize,
    },
    /// An instruction pops more than the stack holds.
    #[error("stack underflow")]
    StackUnderflow,
    /// The stack grows past [`MAX_STACK`].
    #[error("stack deeper than {MAX_STACK}")]
    StackOverflow,
    /// Two paths reach an instruction with different stack heights.
    #[error("stack height {first} on one path and {other} on another")]
    InconsistentStack {
        /// Height on the first path.
        first: u16,
        /// Height on the other.
        other: u16,
    },
    /// Control reaches the end without `Accept`.
    #[error("control falls off the end")]
    FallsOffEnd,
    /// `Accept` is reached with values on the stack.
    #[error("accept with {0} values on the stack")]
    AcceptWithStack(u16),
    /// A check's code range is outside the program or empty.
    #[error("check code range outside the program")]
    BadCheckRange,
    /// The debug table does not have one entry per instruction.
    #[error("debug table length differs from code length")]
    DebugTableMismatch,
    /// A test's value cannot be followed to a `Require`: whether it counts negated is unknown.
    #[error("a test's value cannot be followed to the check that requires it")]
    UntraceableTest,
}

fn in_range<I: Index, T>(table: &[T], index: I, at: usize) -> Result<(), VerifyError> {
    if index.to_usize() < table.len() {
        Ok(())
    } else {
        Err(VerifyError {
            at,
            reason: VerifyReason::OperandOutOfRange {
                table: I::TABLE,
                index: index.to_usize(),
            },
        })
    }
}

fn check_operands(program: &Program, op: &Op, at: usize) -> Result<(), VerifyError> {
    op.try_for_each_operand(&mut InRange { program, at })
}

/// Checks each table index of the instruction at `at` against its table. Jump targets are
/// checked as control flow, by [`verify`]; flags have no table.
struct InRange<'a> {
    program: &'a Program,
    at: usize,
}

impl OperandVisitor for InRange<'_> {
    type Output = Result<(), VerifyError>;

    fn path(&mut self, path: PathIdx) -> Self::Output {
        in_range(&self.program.paths, path, self.at)
    }

    fn constant(&mut self, constant: ConstIdx) -> Self::Output {
        in_range(&self.program.consts, constant, self.at)
    }

    fn set(&mut self, set: SetIdx) -> Self::Output {
        in_range(&self.program.sets, set, self.at)
    }

    fn regex(&mut self, regex: RegexIdx) -> Self::Output {
        in_range(&self.program.regexes, regex, self.at)
    }

    fn bounds(&mut self, bounds: BoundsIdx) -> Self::Output {
        in_range(&self.program.bounds, bounds, self.at)
    }

    fn schema(&mut self, schema: SchemaIdx) -> Self::Output {
        in_range(&self.program.schemas, schema, self.at)
    }

    fn window(&mut self, window: WindowIdx) -> Self::Output {
        in_range(&self.program.windows, window, self.at)
    }

    fn check(&mut self, check: CheckIdx) -> Self::Output {
        in_range(&self.program.checks, check, self.at)
    }

    fn target(&mut self, _: JumpTarget) -> Self::Output {
        Ok(())
    }

    fn optional(&mut self, _: bool) -> Self::Output {
        Ok(())
    }

    fn flag(&mut self, _: bool) -> Self::Output {
        Ok(())
    }
}

fn merge(
    heights: &mut [Option<u16>],
    at: usize,
    height: u16,
    from: usize,
) -> Result<(), VerifyError> {
    let slot = heights.get_mut(at).ok_or(VerifyError {
        at: from,
        reason: VerifyReason::BadJump { target: at },
    })?;
    match *slot {
        None => {
            *slot = Some(height);
            Ok(())
        }
        Some(first) if first == height => Ok(()),
        Some(first) => Err(VerifyError {
            at,
            reason: VerifyReason::InconsistentStack {
                first,
                other: height,
            },
        }),
    }
}

/// Verifies a program; see the module docs for what is proven.
pub fn verify(program: Program) -> Result<VerifiedProgram, VerifyError> {
    let len = program.code.len();
    if len == 0 {
        return Err(VerifyError {
            at: 0,
            reason: VerifyReason::Empty,
        });
    }
    if program.debug.len() != len {
        return Err(VerifyError {
            at: 0,
            reason: VerifyReason::DebugTableMismatch,
        });
    }
    for check in &program.checks {
        let start = usize_from(check.code_start);
        let end = usize_from(check.code_end);
        if start >= end || end > len {
            return Err(VerifyError {
                at: start,
                reason: VerifyReason::BadCheckRange,
            });
        }
    }
    // Heights on entry to each instruction; `None` = unreachable so far.
    let mut heights: Vec<Option<u16>> = vec![None; len];
    if let Some(first) = heights.first_mut() {
        *first = Some(0);
    }
    let mut max_height = 0u16;
    for (at, op) in program.code.iter().enumerate() {
        check_operands(&program, op, at)?;
        let Some(height) = heights.get(at).copied().flatten() else {
            // Unreachable code is harmless: it can never run.
            continue;
        };
        let effect = op.effect();
        let after_pop = height
            .checked_sub(u16::from(effect.pops))
            .ok_or(VerifyError {
                at,
                reason: VerifyReason::StackUnderflow,
            })?;
        let after = after_pop + u16::from(effect.pushes);
        if after > MAX_STACK {
            return Err(VerifyError {
                at,
                reason: VerifyReason::StackOverflow,
            });
        }
        max_height = max_height.max(after).max(height);
        if let Some(target) = effect.jump {
            let target = target.to_usize();
            if target <= at || target >= len {
                return Err(VerifyError {
                    at,
                    reason: VerifyReason::BadJump { target },
                });
            }
            // A taken jump keeps the tested value on the stack.
            merge(&mut heights, target, height, at)?;
        }
        if matches!(op, Op::Accept) && height != 0 {
            return Err(VerifyError {
                at,
                reason: VerifyReason::AcceptWithStack(height),
            });
        }
        if !effect.terminal {
            if at + 1 >= len {
                return Err(VerifyError {
                    at,
                    reason: VerifyReason::FallsOffEnd,
                });
            }
            merge(&mut heights, at + 1, after, at)?;
        }
    }
    let reads_clock = program.code.iter().any(Op::reads_clock);
    let self_contained = self_contained_checks(&program, &heights);
    let negated = negated_tests(&program).ok_or(VerifyError {
        at: 0,
        reason: VerifyReason::UntraceableTest,
    })?;
    let plan = Plan::of(&program, &self_contained);
    Ok(VerifiedProgram {
        program,
        max_stack: max_height,
        reads_clock,
        self_contained,
        negated,
        plan,
    })
}

/// [`VerifiedProgram::negated`] for every instruction, by following which tests' values make up
/// each stack slot along the straight-line code: a test pushes a slot of itself; `Not` flips the
/// parity of every test in the top slot; `OrElse`/`AndThen` carry the top slot to their target
/// when they jump (its tests reach the result there past the instructions in between) and drop
/// it when they fall through, so the tests join the slot on top when the target is reached;
/// `Require` consumes the top slot. Jumps are forward (checked before), so one pass sees every
/// path — provided the code between a jump and its target never touches the slots below the
/// one it carries (those travel with the jump unchanged; regression: a crafted program popped
/// one on the fall-through path and negated it on the jump path, and got the wrong parity) and
/// reaches the target with exactly one slot above them, as compiled code does. `None` for code
/// of any other shape, which the verifier refuses.
///
/// O(L log L) for L instructions, however many jumps are open at once (regression: every
/// instruction scanned every open jump, so a `.capc` of 40,000 jumps to one target took 1.2 s
/// to verify, and one of the 4 MiB limit minutes).
fn negated_tests(program: &Program) -> Option<Vec<bool>> {
    let len = program.code.len();
    let mut negated = vec![false; len];
    let mut stack: Vec<Vec<usize>> = Vec::new();
    // Per instruction, the jumps not yet reached that target it.
    let mut targets: Vec<Target> = vec![Target::default(); len + 1];
    // The floors of the open jumps, with how many jumps have each: the highest is the guard.
    let mut floors: BTreeMap<usize, usize> = BTreeMap::new();
    let mut open = 0usize;
    for (at, op) in program.code.iter().enumerate() {
        let arriving = std::mem::take(targets.get_mut(at)?);
        if arriving.jumps > 0 {
            if stack.len() != arriving.floor + 1 {
                return None;
            }
            open -= arriving.jumps;
            let left = floors.get_mut(&arriving.floor)?;
            *left -= arriving.jumps;
            if *left == 0 {
                floors.remove(&arriving.floor);
            }
            stack.last_mut()?.extend(arriving.tests);
        }
        // An instruction that reads the top slot may not reach below an open jump's floor.
        let guard = floors.last_key_value().map_or(0, |(floor, _)| *floor);
        let touches_top = matches!(
            op,
            Op::Not | Op::OrElse { .. } | Op::AndThen { .. } | Op::Require { .. }
        );
        if touches_top && stack.len() <= guard {
            return None;
        }
        match op {
            Op::Push(_) => stack.push(Vec::new()),
            Op::Not => {
                for &test in stack.last()? {
                    let flag = negated.get_mut(test)?;
                    *flag = !*flag;
                }
            }
            Op::OrElse { target } | Op::AndThen { target } => {
                let carried = stack.pop()?;
                let floor = stack.len();
                let target = targets.get_mut(target.to_usize())?;
                // Every jump to one target must arrive with the same slots below the carried
                // one; jumps that leave different floors cannot.
                if target.jumps > 0 && target.floor != floor {
                    return None;
                }
                target.floor = floor;
                target.jumps += 1;
                target.tests.extend(carried);
                *floors.entry(floor).or_insert(0) += 1;
                open += 1;
            }
            Op::Require { .. } => {
                stack.pop()?;
            }
            Op::Accept if open > 0 => return None,
            Op::Accept => {}
            _ if op.is_test() => stack.push(vec![at]),
            _ => return None,
        }
    }
    Some(negated)
}

/// The jumps to one instruction that the trace of [`negated_tests`] has not reached yet.
#[derive(Debug, Clone, Default)]
struct Target {
    /// The tests their carried slots hold.
    tests: Vec<usize>,
    /// The slots below the carried one when they jumped, which nothing may touch on the way.
    floor: usize,
    /// How many; 0 when none is open.
    jumps: usize,
}

/// [`VerifiedProgram::self_contained`] for every check: O(L + C log C) for L instructions and C
/// checks, whatever the ranges (hostile `.capc` files may overlap them all).
fn self_contained_checks(program: &Program, heights: &[Option<u16>]) -> Vec<bool> {
    let len = program.code.len();
    let range = |index: usize| {
        program.checks.get(index).map_or((0, 0), |check| {
            (
                usize_from(check.code_start),
                usize_from(check.code_end).min(len),
            )
        })
    };
    let mut contained: Vec<bool> = program
        .checks
        .iter()
        .map(|check| heights.get(usize_from(check.code_start)) == Some(&Some(0)))
        .collect();
    // Ranges that overlap another: sorted by start, a run of ranges each starting before the
    // furthest end so far overlaps pairwise-connected, and every range in a run of two or more
    // overlaps some other. Those checks do not stand alone.
    let mut by_start: Vec<usize> = (0..program.checks.len()).collect();
    by_start.sort_unstable_by_key(|&index| range(index));
    let mut run: Vec<usize> = Vec::new();
    let mut run_end = 0;
    for &index in &by_start {
        let (start, end) = range(index);
        if run.is_empty() || start >= run_end {
            if run.len() > 1 {
                run.iter().for_each(|&i| spoil(&mut contained, i));
            }
            run.clear();
            run_end = end;
        }
        run.push(index);
        run_end = run_end.max(end);
    }
    if run.len() > 1 {
        run.iter().for_each(|&i| spoil(&mut contained, i));
    }
    // The check whose range holds each instruction, for ranges that overlap nothing (so each
    // instruction is written once).
    let mut owner: Vec<Option<usize>> = vec![None; len];
    for (index, _) in contained.iter().enumerate().filter(|(_, flag)| **flag) {
        let (start, end) = range(index);
        for slot in owner.get_mut(start..end).into_iter().flatten() {
            *slot = Some(index);
        }
    }
    for (at, op) in program.code.iter().enumerate() {
        let here = owner.get(at).copied().flatten();
        // A check's `Require` outside its own range: the decision may fail it without passing
        // the range's start.
        if let Op::Require { check } = op {
            let check = check.to_usize();
            if here != Some(check) {
                spoil(&mut contained, check);
            }
        }
        // A jump between two checks (or between a check and code outside every check) spoils
        // both ends.
        if let Some(target) = op.effect().jump.map(|t| t.to_usize()) {
            let there = owner.get(target).copied().flatten();
            if here != there {
                for index in [here, there].into_iter().flatten() {
                    spoil(&mut contained, index);
                }
            }
        }
    }
    contained
}

/// Marks check `index` as not self-contained.
fn spoil(contained: &mut [bool], index: usize) {
    if let Some(flag) = contained.get_mut(index) {
        *flag = false;
    }
}

/// Builds a jump target for tests and the compiler.
#[cfg(any(test, feature = "internals"))]
pub fn jump_to(position: usize) -> Option<JumpTarget> {
    JumpTarget::from_usize(position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytecode::index::CheckIdx;
    use crate::bytecode::program::CheckInfo;
    use crate::vocabulary::ConstraintKeyword;

    fn program(code: Vec<Op>) -> Program {
        let debug = vec![None; code.len()];
        Program {
            code,
            debug,
            checks: vec![CheckInfo {
                constraint: ConstraintKeyword::Any,
                location: None,
                summary: String::new(),
                code_start: 0,
                code_end: 1,
            }],
            ..Program::default()
        }
    }

    fn check0() -> CheckIdx {
        CheckIdx::from_usize(0).unwrap()
    }

    fn check_at(index: usize) -> CheckIdx {
        CheckIdx::from_usize(index).unwrap()
    }

    /// `code` with one check per `(start, end)` range.
    fn with_checks(code: Vec<Op>, ranges: &[(u32, u32)]) -> Program {
        let mut program = program(code);
        program.checks = ranges
            .iter()
            .map(|&(code_start, code_end)| CheckInfo {
                constraint: ConstraintKeyword::Any,
                location: None,
                summary: String::new(),
                code_start,
                code_end,
            })
            .collect();
        program
    }

    /// Two checks as the compiler lays them out: `true || false`, then `true`; `jump` is the
    /// first check's short-circuit target.
    fn two_checks(jump: usize) -> Vec<Op> {
        vec![
            Op::Push(true),
            Op::OrElse {
                target: jump_to(jump).unwrap(),
            },
            Op::Push(false),
            Op::Require { check: check_at(0) },
            Op::Push(true),
            Op::Require { check: check_at(1) },
            Op::Accept,
        ]
    }

    fn contained(program: Program) -> Vec<bool> {
        let verified = verify(program).unwrap();
        (0..verified.checks.len())
            .map(|i| verified.self_contained(check_at(i)))
            .collect()
    }

    #[test]
    fn checks_laid_out_one_after_another_are_self_contained() {
        let program = with_checks(two_checks(3), &[(0, 4), (4, 6)]);
        assert_eq!(contained(program), [true, true]);
    }

    #[test]
    fn regression_a_require_outside_its_checks_range_is_not_self_contained() {
        // Found by review: the decision can fail such a check without passing its range's
        // start, so a trace started there disagreed (a jump over the range straight to the
        // `Require`) or blamed a test that never ran (the `Require` before the range).
        let jump_over = vec![
            Op::Push(false),
            Op::AndThen {
                target: jump_to(4).unwrap(),
            },
            Op::Push(true),
            Op::Not,
            Op::Require { check: check_at(1) },
            Op::Accept,
        ];
        let program = with_checks(jump_over, &[(0, 2), (2, 4)]);
        assert_eq!(contained(program), [false, false]);
        let require_before = vec![
            Op::Push(false),
            Op::Require { check: check_at(1) },
            Op::Push(true),
            Op::Require { check: check_at(1) },
            Op::Accept,
        ];
        let program = with_checks(require_before, &[(0, 2), (2, 4)]);
        assert_eq!(contained(program), [true, false]);
    }

    #[test]
    fn overlapping_ranges_are_found_in_any_order_and_nesting() {
        // Twelve checks `push; require`, check i's at 2i; ranges: one nesting another, a chain
        // of two, two overlapping the same third out of order, three that are their own code,
        // and an overlapping pair last.
        let mut code = Vec::new();
        for i in 0..12 {
            code.extend([Op::Push(true), Op::Require { check: check_at(i) }]);
        }
        code.push(Op::Accept);
        let ranges = [
            (0, 4),   // 0: holds check 1's range
            (2, 4),   // 1
            (4, 6),   // 2: alone
            (6, 9),   // 3: overlaps 4
            (8, 12),  // 4
            (16, 18), // 5: overlaps 7
            (12, 14), // 6: alone
            (14, 18), // 7: overlaps 5 and 8
            (14, 16), // 8: overlaps 7
            (18, 20), // 9: alone
            (20, 23), // 10: overlaps 11
            (22, 24), // 11
        ];
        let expected = [
            false, false, true, false, false, false, true, false, false, true, false, false,
        ];
        assert_eq!(contained(with_checks(code, &ranges)), expected);
    }

    #[test]
    fn a_jump_between_checks_an_overlap_or_a_stack_at_entry_is_not_self_contained() {
        // The first check's short-circuit lands on the second check's `Require`.
        let across = with_checks(two_checks(5), &[(0, 4), (4, 6)]);
        assert_eq!(contained(across), [false, false]);
        // Ranges that share an instruction.
        let overlap = with_checks(two_checks(3), &[(0, 4), (3, 6)]);
        assert_eq!(contained(overlap), [false, false]);
        // The second range starts with a value on the stack (after its `Push`).
        let entered_with_stack = with_checks(two_checks(3), &[(0, 4), (5, 6)]);
        assert_eq!(contained(entered_with_stack), [true, false]);
        // A jump from code outside every check into one.
        let from_outside = with_checks(two_checks(3), &[(2, 4), (4, 6)]);
        assert_eq!(contained(from_outside), [false, true]);
    }

    #[test]
    fn accepts_a_short_circuit_or() {
        let code = vec![
            Op::Push(false),
            Op::OrElse {
                target: jump_to(3).unwrap(),
            },
            Op::Push(true),
            Op::Require { check: check0() },
            Op::Accept,
        ];
        let verified = verify(program(code)).unwrap();
        assert_eq!(verified.max_stack(), 1);
    }

    #[test]
    fn rejects_backward_and_self_jumps() {
        let back = vec![
            Op::Push(true),
            Op::OrElse {
                target: jump_to(0).unwrap(),
            },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(back)).unwrap_err().reason,
            VerifyReason::BadJump { target: 0 }
        ));
        let self_jump = vec![
            Op::Push(true),
            Op::AndThen {
                target: jump_to(1).unwrap(),
            },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(self_jump)).unwrap_err().reason,
            VerifyReason::BadJump { .. }
        ));
    }

    #[test]
    fn rejects_jumps_past_the_end() {
        let code = vec![
            Op::Push(true),
            Op::OrElse {
                target: jump_to(9).unwrap(),
            },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(code)).unwrap_err().reason,
            VerifyReason::BadJump { target: 9 }
        ));
    }

    #[test]
    fn rejects_stack_underflow_and_unbalanced_accept() {
        assert_eq!(
            verify(program(vec![Op::Not, Op::Accept]))
                .unwrap_err()
                .reason,
            VerifyReason::StackUnderflow
        );
        assert_eq!(
            verify(program(vec![Op::Push(true), Op::Accept]))
                .unwrap_err()
                .reason,
            VerifyReason::AcceptWithStack(1)
        );
    }

    #[test]
    fn rejects_inconsistent_heights_at_a_join() {
        // The jump arrives with height 1; the fall-through arrives with height 2.
        let code = vec![
            Op::Push(true),
            Op::OrElse {
                target: jump_to(4).unwrap(),
            },
            Op::Push(true),
            Op::Push(true),
            Op::Require { check: check0() },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(code)).unwrap_err().reason,
            VerifyReason::InconsistentStack { .. }
        ));
    }

    #[test]
    fn rejects_operands_out_of_range() {
        let code = vec![
            Op::Window {
                window: crate::bytecode::index::WindowIdx::from_usize(0).unwrap(),
            },
            Op::Require { check: check0() },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(code)).unwrap_err().reason,
            VerifyReason::OperandOutOfRange {
                table: "windows",
                index: 0
            }
        ));
        let bad_check = vec![
            Op::Push(true),
            Op::Require {
                check: CheckIdx::from_usize(5).unwrap(),
            },
            Op::Accept,
        ];
        assert!(matches!(
            verify(program(bad_check)).unwrap_err().reason,
            VerifyReason::OperandOutOfRange {
                table: "checks",
                index: 5
            }
        ));
    }

    #[test]
    fn rejects_falling_off_the_end_and_empty_programs() {
        assert_eq!(
            verify(program(vec![
                Op::Push(true),
                Op::Require { check: check0() }
            ]))
            .unwrap_err()
            .reason,
            VerifyReason::FallsOffEnd
        );
        let mut empty = program(vec![]);
        empty.checks.clear();
        assert_eq!(verify(empty).unwrap_err().reason, VerifyReason::Empty);
    }
}
