//! The disassembler: a program as text, one instruction per line with its source location.
//!
//! ```text
//! checks:
//!   check0  fieldMatches payload.attendees[*].email ~ /[^@]+@example\.com/i   policies/m.cap:15:5
//! code:
//!   0000  match      p0 re0                 ; policies/m.cap:15:5
//!   0001  require    check0
//!   0002  accept
//! ```
//! Operands print with their table's prefix (`p` paths, `c` constants, `re` regexes, `@` jump
//! targets, ...), followed by a comment showing what they name.

use std::fmt::{Display, Write};

use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx, lookup,
};
use super::op::{Op, OperandVisitor};
use super::plan::Plan;
use super::program::Program;

/// An instruction's operands as text, laid out as the instruction table says.
fn operands(program: &Program, op: &Op) -> String {
    let mut text = op.format_operands(&mut Listing(program));
    text.truncate(text.trim_end().len());
    text
}

/// Prints each operand with its table's prefix and what it names: `p0=payload.x`,
/// `c0="literal"`, `re0=/regex/i`; a jump target or a check by its index alone; `optional`
/// when set, nothing when not.
struct Listing<'a>(&'a Program);

impl Listing<'_> {
    fn named<I: Index + Display, T>(
        index: I,
        table: &[T],
        describe: impl FnOnce(&T) -> String,
    ) -> String {
        let text = lookup(table, index).map_or_else(|| "?".to_owned(), describe);
        format!("{index}={text}")
    }
}

impl OperandVisitor for Listing<'_> {
    type Output = String;

    fn path(&mut self, path: PathIdx) -> String {
        Self::named(path, &self.0.paths, |p| p.text.clone())
    }

    fn constant(&mut self, constant: ConstIdx) -> String {
        Self::named(constant, &self.0.consts, |v| {
            crate::value::truncate_for_message(v, 40)
        })
    }

    fn set(&mut self, set: SetIdx) -> String {
        let count = lookup(&self.0.sets, set).map_or(0, |s| s.values.len());
        format!("{set}=({count} values)")
    }

    fn regex(&mut self, regex: RegexIdx) -> String {
        Self::named(regex, &self.0.regexes, |r| {
            format!(
                "/{}/{}",
                r.source.replace('/', "\\/"),
                if r.case_insensitive { "i" } else { "" }
            )
        })
    }

    fn bounds(&mut self, bounds: BoundsIdx) -> String {
        let text = lookup(&self.0.bounds, bounds).map_or("?", |b| b.text.as_str());
        format!("{bounds}=({text})")
    }

    fn schema(&mut self, schema: SchemaIdx) -> String {
        schema.to_string()
    }

    fn window(&mut self, window: WindowIdx) -> String {
        let text = lookup(&self.0.windows, window).map_or_else(|| "?".to_owned(), |w| w.describe());
        format!("{window}=({text})")
    }

    fn check(&mut self, check: CheckIdx) -> String {
        check.to_string()
    }

    fn target(&mut self, target: JumpTarget) -> String {
        target.to_string()
    }

    fn optional(&mut self, optional: bool) -> String {
        if optional { "optional" } else { "" }.to_owned()
    }

    fn flag(&mut self, value: bool) -> String {
        value.to_string()
    }
}

/// The plan line of a disassembly: how the VM answers each check before it runs the program
/// (`crate::bytecode::plan`), e.g. `plan: check0 plain, check1 each [*], check2 vm check`.
pub fn disassemble_plan(plan: Option<&Plan>) -> String {
    match plan {
        None => "plan: none (the program runs alone)\n".to_owned(),
        Some(plan) if plan.checks().is_empty() => "plan: no checks\n".to_owned(),
        Some(plan) => {
            let checks: Vec<String> = plan
                .checks()
                .iter()
                .map(|check| format!("{} {}", check.check, check.shape.name()))
                .collect();
            format!("plan: {}\n", checks.join(", "))
        }
    }
}

/// The checks the code runs, in the order of their first `require` that control can reach from
/// the first instruction: derived from the instructions alone, so an entry of the check table
/// that no reachable `require` names is not a check of the program. Jumps are followed forward,
/// as the verifier allows them.
pub fn required_checks(program: &Program) -> Vec<CheckIdx> {
    let len = program.code.len();
    let mut reachable = vec![false; len];
    if let Some(first) = reachable.first_mut() {
        *first = true;
    }
    let mut listed = vec![false; program.checks.len()];
    let mut checks = Vec::new();
    for (at, op) in program.code.iter().enumerate() {
        if !reachable.get(at).copied().unwrap_or(false) {
            continue;
        }
        let effect = op.effect();
        let next = (!effect.terminal).then_some(at + 1);
        let jump = effect
            .jump
            .map(Index::to_usize)
            .filter(|&target| target > at);
        for target in next.into_iter().chain(jump) {
            if let Some(slot) = reachable.get_mut(target) {
                *slot = true;
            }
        }
        if let Op::Require { check } = *op
            && let Some(seen) = listed.get_mut(check.to_usize())
            && !*seen
        {
            *seen = true;
            checks.push(check);
        }
    }
    checks
}

/// Renders a program's checks and code. The checks listed are those the code runs
/// ([`required_checks`]), each with its summary and source location. Policy text in it (regexes,
/// literals, paths, file names) has its control and bidirectional characters escaped
/// (`value::is_hidden`): a reviewer reads the listing in the order it runs.
pub fn disassemble(program: &Program) -> String {
    let mut out = String::new();
    let checks = required_checks(program);
    if !checks.is_empty() {
        out.push_str("checks:\n");
        for check in checks {
            let Some(info) = lookup(&program.checks, check) else {
                continue;
            };
            let location = info
                .location
                .as_ref()
                .map_or_else(String::new, |l| format!("   {l}"));
            let name = check.to_string();
            let _ = writeln!(out, "  {name:<8} {}{location}", info.summary);
        }
    }
    out.push_str("code:\n");
    for (at, op) in program.code.iter().enumerate() {
        let location = program
            .debug
            .get(at)
            .and_then(Option::as_ref)
            .map_or_else(String::new, |l| format!("  ; {l}"));
        let line = format!("  {at:04}  {:<10} {}", op.mnemonic(), operands(program, op));
        let padded = format!("{:<72}{location}", line.trim_end());
        let _ = writeln!(out, "{}", padded.trim_end());
    }
    match crate::value::escape_controls_in_lines(&out) {
        std::borrow::Cow::Borrowed(_) => out,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}
