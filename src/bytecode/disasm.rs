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

use std::fmt::Write;

use super::index::{CheckIdx, Index, lookup};
use super::op::Op;
use super::plan::Plan;
use super::program::Program;

fn path(program: &Program, index: impl Index + std::fmt::Display) -> String {
    let text = lookup(&program.paths, index).map_or("?", |p| p.text.as_str());
    format!("{index}={text}")
}

fn operands(program: &Program, op: &Op) -> String {
    let optional = |o: bool| if o { " optional" } else { "" };
    match *op {
        Op::Equals {
            path: p,
            value,
            optional: o,
        } => {
            let constant = lookup(&program.consts, value).map_or_else(
                || "?".to_owned(),
                |v| crate::value::truncate_for_message(v, 40),
            );
            format!("{} {value}={constant}{}", path(program, p), optional(o))
        }
        Op::InSet {
            path: p,
            set,
            optional: o,
        } => {
            let count = lookup(&program.sets, set).map_or(0, |s| s.values.len());
            format!("{} {set}=({count} values){}", path(program, p), optional(o))
        }
        Op::EqualsPath {
            path: p,
            other,
            optional: o,
        }
        | Op::BindsIdentity {
            path: p,
            identity: other,
            optional: o,
        } => format!(
            "{} {}{}",
            path(program, p),
            path(program, other),
            optional(o)
        ),
        Op::Matches {
            path: p,
            regex,
            optional: o,
        } => {
            let source = lookup(&program.regexes, regex).map_or_else(
                || "?".to_owned(),
                |r| {
                    format!(
                        "/{}/{}",
                        r.source.replace('/', "\\/"),
                        if r.case_insensitive { "i" } else { "" }
                    )
                },
            );
            format!("{} {regex}={source}{}", path(program, p), optional(o))
        }
        Op::Range {
            path: p,
            bounds,
            optional: o,
        }
        | Op::RangeNow {
            path: p,
            bounds,
            optional: o,
        } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            format!("{} {bounds}=({text}){}", path(program, p), optional(o))
        }
        Op::RangeDiff {
            a,
            b,
            bounds,
            optional: o,
        } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            format!(
                "{} - {} {bounds}=({text}){}",
                path(program, a),
                path(program, b),
                optional(o)
            )
        }
        Op::Schema { schema } => format!("{schema}"),
        Op::Window { window } => {
            let text =
                lookup(&program.windows, window).map_or_else(|| "?".to_owned(), |w| w.describe());
            format!("{window}=({text})")
        }
        Op::Push(value) => value.to_string(),
        Op::OrElse { target } | Op::AndThen { target } => format!("{target}"),
        Op::Require { check } => format!("{check}"),
        Op::Not | Op::Accept => String::new(),
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
