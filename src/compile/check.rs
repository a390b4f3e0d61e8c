//! Skill- and capability-level checks: header fields, verbs, lifetimes, justification, gating.
//!
//! Constraint-level checks happen while emitting code (`emit.rs`), where paths are resolved.

use super::error::CompileError;
use crate::bytecode::program::{LifetimeSpec, SensitivityLevel};
use crate::span::Span;
use crate::syntax::ast::{
    Capability, Duration, Lifetime, ResourceKind, Risk, Sensitivity, Spanned,
};
use crate::syntax::error::did_you_mean;

/// Checks the operations of a capability against its resource kind.
pub fn check_operations(
    kind: ResourceKind,
    operations: &[Spanned<String>],
    errors: &mut Vec<CompileError>,
) {
    let mut seen: Vec<&str> = Vec::new();
    for op in operations {
        if seen.contains(&op.node.as_str()) {
            errors.push(CompileError::new(
                op.span,
                format!("duplicate operation `{}`", op.node),
            ));
            continue;
        }
        seen.push(&op.node);
        if let Some((all, _)) = kind.verbs()
            && !all.contains(&op.node.as_str())
        {
            let help = match all.iter().find(|v| v.eq_ignore_ascii_case(&op.node)) {
                Some(v) => format!("verbs are case-sensitive: did you mean `{v}`?"),
                None => {
                    let upper = op.node.to_ascii_uppercase();
                    let lower = op.node.to_ascii_lowercase();
                    let close = did_you_mean(&upper, all.iter().copied())
                        .or_else(|| did_you_mean(&lower, all.iter().copied()));
                    match close {
                        Some(verb) => format!("did you mean `{verb}`?"),
                        None => {
                            format!("`{}` resources accept: {}", kind.name(), all.join(", "))
                        }
                    }
                }
            };
            errors.push(
                CompileError::new(
                    op.span,
                    format!("`{}` is not a verb of `{}` resources", op.node, kind.name()),
                )
                .with_help(help),
            );
        }
    }
}

/// Converts and checks a risk value; returns the minimum autonomy score.
pub fn check_risk(risk: &Spanned<Risk>, errors: &mut Vec<CompileError>) -> u8 {
    match risk.node {
        Risk::Label(label) => label.min_score(),
        Risk::Score(score) => match u8::try_from(score) {
            Ok(score) if score <= 100 => score,
            _ => {
                errors.push(
                    CompileError::new(risk.span, format!("risk `{score}` is outside 0..=100"))
                        .with_help("use a label (none, low, medium, high, critical) or 0..=100"),
                );
                100
            }
        },
    }
}

/// Converts a sensitivity.
pub fn sensitivity(value: Option<&Spanned<Sensitivity>>) -> Option<SensitivityLevel> {
    value.map(|s| match s.node {
        Sensitivity::Normal => SensitivityLevel::Normal,
        Sensitivity::Elevated => SensitivityLevel::Elevated,
    })
}

/// Converts and checks a lifetime; `None` means the default `call 1`.
pub fn check_lifetime(
    lifetime: Option<&Spanned<Lifetime>>,
    errors: &mut Vec<CompileError>,
) -> LifetimeSpec {
    let Some(lifetime) = lifetime else {
        return LifetimeSpec::Call(1);
    };
    match lifetime.node {
        Lifetime::Call(0) => {
            errors.push(
                CompileError::new(lifetime.span, "`lifetime call 0` grants nothing")
                    .with_help("use a number of calls of at least 1"),
            );
            LifetimeSpec::Call(1)
        }
        Lifetime::Call(n) => LifetimeSpec::Call(n),
        Lifetime::Transaction => LifetimeSpec::Transaction,
        Lifetime::Process => LifetimeSpec::Process,
        Lifetime::WallClock {
            duration,
            renewable,
        } => {
            if duration.nanos == 0 {
                errors.push(CompileError::new(
                    lifetime.span,
                    "`lifetime wallClock` needs a duration longer than zero",
                ));
            }
            LifetimeSpec::WallClock {
                duration: duration.to_std(),
                renewable,
            }
        }
    }
}

/// Enforces SPEC §2.2: a justification is required for `lifetime process`, for `lifetime
/// wallClock` longer than 1h, and for any write verb. Blank counts as missing.
pub fn check_justification(
    capability: &Capability,
    kind: Option<ResourceKind>,
    errors: &mut Vec<CompileError>,
) {
    let present = capability
        .justification
        .as_ref()
        .is_some_and(|j| !j.node.trim().is_empty());
    if present {
        return;
    }
    let why = match capability.lifetime.as_ref().map(|l| l.node) {
        Some(Lifetime::Process) => Some("`lifetime process`".to_owned()),
        Some(Lifetime::WallClock { duration, .. }) if duration > Duration::HOUR => {
            Some("a `wallClock` lifetime longer than 1h".to_owned())
        }
        _ => kind.and_then(|kind| {
            capability
                .operations
                .iter()
                .find(|op| !kind.is_read_verb(&op.node))
                .map(|op| format!("the write verb `{}`", op.node))
        }),
    };
    if let Some(why) = why {
        let span = capability
            .justification
            .as_ref()
            .map_or(capability.name.span, |j| j.span);
        let blank = capability.justification.is_some();
        errors.push(
            CompileError::new(
                span,
                format!(
                    "capability `{}` needs a {}justification because it uses {why}",
                    capability.name.node,
                    if blank { "non-blank " } else { "" }
                ),
            )
            .with_help("add `justification \"why this skill needs it\"` for reviewers"),
        );
    }
}

/// An error for a required field that is missing.
pub fn missing(span: Span, what: &str, example: &str) -> CompileError {
    CompileError::new(span, format!("missing `{what}`")).with_help(format!("add `{example}`"))
}
