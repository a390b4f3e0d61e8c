//! Printing an AST as `.cap` text (used by `capgate convert --to cap`).
//!
//! The printer writes each item on its own line and leaves spacing and indentation to the
//! formatter's layout, so printed and formatted files look the same. A few AST shapes have no
//! direct `.cap` spelling and are written as equivalent constraints:
//! - a `fieldRange` with bounds that neither `PATH OP VALUE` nor `LOW < PATH < HIGH` can hold
//!   (three or four bounds, or two on a timestamp difference) becomes `all { ... }` of one
//!   `fieldRange` per bound, each with the same `optional`;
//! - a weekly window whose day set is not one run of days (`mon, wed`) becomes one window per
//!   day, with the same times;
//! - a regex is written between slashes, so a `/` in it is escaped as `\/` and an empty regex
//!   as `(?:)`; a regex with a raw line break cannot be written ([`regex_cap_cannot_hold`]).

use std::fmt::Write as _;

use chrono::SecondsFormat;
use serde_json::Value;

use capgate::syntax::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, EqualsRhs, Lifetime,
    PolicyFile, RangeSubject, Risk, SchemaSource, Sensitivity, Skill, SpannedPath, WindowSpec,
};
use capgate::syntax::units::{format_days, format_duration, format_time_of_day};

/// Writes a policy file as `.cap` text in the canonical layout.
pub fn policy_to_cap(file: &PolicyFile) -> String {
    let mut text = String::new();
    for (index, skill) in file.skills.iter().enumerate() {
        if index > 0 {
            text.push('\n');
        }
        write_skill(&mut text, skill);
    }
    super::layout_text(&text)
}

fn write_skill(out: &mut String, skill: &Skill) {
    let _ = writeln!(out, "skill {} {{", quote(&skill.name.node));
    if let Some(version) = &skill.version {
        let _ = writeln!(out, "version {}", quote(&version.node));
    }
    if let Some(hash) = &skill.hash {
        let _ = writeln!(out, "hash {}", quote(&hash.node));
    }
    if let Some(signer) = &skill.signer {
        let _ = writeln!(out, "signer {}", quote(&signer.node));
    }
    if let Some(risk) = &skill.risk {
        let _ = writeln!(out, "risk {}", risk_text(risk.node));
    }
    if let Some(sensitivity) = &skill.sensitivity {
        let _ = writeln!(out, "sensitivity {}", sensitivity_text(sensitivity.node));
    }
    for capability in &skill.capabilities {
        out.push('\n');
        write_capability(out, capability);
    }
    out.push_str("}\n");
}

fn write_capability(out: &mut String, capability: &Capability) {
    let _ = writeln!(out, "capability {} {{", quote(&capability.name.node));
    if let Some(resource) = &capability.resource {
        let _ = writeln!(
            out,
            "resource {} {}",
            resource.node.kind.name(),
            quote(&resource.node.locator)
        );
    }
    if !capability.operations.is_empty() {
        let verbs: Vec<String> = capability
            .operations
            .iter()
            .map(|op| verb_text(&op.node))
            .collect();
        let _ = writeln!(out, "operations {}", verbs.join(", "));
    }
    if let Some(lifetime) = &capability.lifetime {
        let _ = writeln!(out, "lifetime {}", lifetime_text(lifetime.node));
    }
    if let Some(risk) = &capability.risk {
        let _ = writeln!(out, "risk {}", risk_text(risk.node));
    }
    if let Some(sensitivity) = &capability.sensitivity {
        let _ = writeln!(out, "sensitivity {}", sensitivity_text(sensitivity.node));
    }
    if let Some(justification) = &capability.justification {
        let _ = writeln!(out, "justification {}", quote(&justification.node));
    }
    if !capability.constraints.is_empty() {
        out.push('\n');
    }
    for constraint in &capability.constraints {
        write_constraint(out, constraint);
    }
    out.push_str("}\n");
}

fn write_constraint(out: &mut String, constraint: &Constraint) {
    let optional = if constraint.optional { "optional " } else { "" };
    match &constraint.kind {
        ConstraintKind::FieldEquals { path, rhs } => {
            let rhs = match rhs {
                EqualsRhs::Value(value) => format!("== {}", json(&value.node)),
                EqualsRhs::In(values) => {
                    let items: Vec<String> = values.iter().map(|v| json(&v.node)).collect();
                    format!("in [{}]", items.join(", "))
                }
                EqualsRhs::Path(other) => format!("== {}", path_text(other)),
            };
            let _ = writeln!(out, "{optional}fieldEquals {} {rhs}", path_text(path));
        }
        ConstraintKind::FieldMatches {
            path,
            pattern,
            case_insensitive,
        } => {
            let flags = if *case_insensitive { "i" } else { "" };
            let _ = writeln!(
                out,
                "{optional}fieldMatches {} ~ /{}/{flags}",
                path_text(path),
                regex_body(&pattern.node)
            );
        }
        ConstraintKind::FieldRange { subject, bounds } => {
            write_field_range(out, optional, subject, bounds);
        }
        ConstraintKind::PayloadSchema(SchemaSource::Inline(schema)) => {
            let _ = writeln!(out, "{optional}payloadSchema {}", json(&schema.node));
        }
        ConstraintKind::PayloadSchema(SchemaSource::File(file)) => {
            let _ = writeln!(out, "{optional}payloadSchema file {}", quote(&file.node));
        }
        ConstraintKind::ActorBinding { paths, identity } => {
            let paths: Vec<String> = paths.iter().map(path_text).collect();
            let _ = writeln!(
                out,
                "{optional}actorBinding {} == {}",
                paths.join(", "),
                path_text(identity)
            );
        }
        ConstraintKind::RateLimit(rate) => {
            let _ = write!(
                out,
                "{optional}rateLimit {} per {}",
                rate.count.node,
                format_duration(rate.per.node)
            );
            if let Some(burst) = &rate.burst {
                let _ = write!(out, " burst {}", burst.node);
            }
            if !rate.by.is_empty() {
                let by: Vec<String> = rate.by.iter().map(path_text).collect();
                let _ = write!(out, " by {}", by.join(", "));
            }
            out.push('\n');
        }
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            let mut parts = Vec::new();
            for window in windows {
                let times = format!(
                    "{}-{}",
                    format_time_of_day(window.start),
                    format_time_of_day(window.end)
                );
                for days in format_days(window.days).split(',') {
                    parts.push(format!("{days} {times}"));
                }
            }
            let _ = writeln!(
                out,
                "{optional}wallClockWindow {} {}",
                parts.join(", "),
                quote(&zone.node)
            );
        }
        ConstraintKind::WallClockWindow(WindowSpec::Absolute { from, until }) => {
            let _ = writeln!(
                out,
                "{optional}wallClockWindow from {} until {}",
                from.node.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                until.node.to_rfc3339_opts(SecondsFormat::AutoSi, true)
            );
        }
        ConstraintKind::Any(items) | ConstraintKind::All(items) => {
            let _ = writeln!(out, "{optional}{} {{", constraint.kind.name());
            for item in items {
                write_constraint(out, item);
            }
            out.push_str("}\n");
        }
        ConstraintKind::Not(inner) => {
            let _ = writeln!(out, "{optional}not {{");
            write_constraint(out, inner);
            out.push_str("}\n");
        }
    }
}

fn write_field_range(out: &mut String, optional: &str, subject: &RangeSubject, bounds: &[Bound]) {
    let bound_text = |bound: &Bound| format!("{} {}", bound.op.symbol(), bound_value(&bound.value));
    match (subject, bounds) {
        (RangeSubject::Field(path), [bound]) => {
            let _ = writeln!(
                out,
                "{optional}fieldRange {} {}",
                path_text(path),
                bound_text(bound)
            );
        }
        (RangeSubject::Difference(a, b), [bound]) => {
            let _ = writeln!(
                out,
                "{optional}fieldRange {} - {} {}",
                path_text(a),
                path_text(b),
                bound_text(bound)
            );
        }
        (RangeSubject::Field(path), [low, high])
            if matches!(low.op, CmpOp::Gt | CmpOp::Ge)
                && matches!(high.op, CmpOp::Lt | CmpOp::Le)
                && matches!(low.value, BoundValue::Number(_))
                && matches!(high.value, BoundValue::Number(_)) =>
        {
            let flipped = if low.op == CmpOp::Gt { "<" } else { "<=" };
            let _ = writeln!(
                out,
                "{optional}fieldRange {} {flipped} {} {}",
                bound_value(&low.value),
                path_text(path),
                bound_text(high)
            );
        }
        _ => {
            out.push_str("all {\n");
            for bound in bounds {
                write_field_range(out, optional, subject, std::slice::from_ref(bound));
            }
            out.push_str("}\n");
        }
    }
}

fn bound_value(value: &BoundValue) -> String {
    match value {
        BoundValue::Number(number) => number.to_string(),
        BoundValue::Duration(duration) => format_duration(*duration),
        BoundValue::Now => "now".to_owned(),
    }
}

fn path_text(path: &SpannedPath) -> String {
    path.node.to_string()
}

/// A JSON value, compact (the layout spreads it out).
fn json(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// A `.cap` string literal (JSON escapes).
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A verb as a bare word when the grammar reads it as one, else quoted.
fn verb_text(verb: &str) -> String {
    let mut chars = verb.chars();
    let bare = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '-' | '.' | ':'));
    if bare { verb.to_owned() } else { quote(verb) }
}

/// The first regex of `file` that `.cap` cannot hold, if any: one with a raw line break. A
/// `/…/` literal ends at the line, and `\n` is not the same pattern under `(?x)`, which ignores
/// a raw break but not the escape (regression: `convert --to cap` wrote it as `\n` and turned a
/// deny into an allow). Every other shape the printer rewrites keeps its meaning.
pub fn regex_cap_cannot_hold(file: &PolicyFile) -> Option<String> {
    fn find(constraint: &Constraint) -> Option<String> {
        match &constraint.kind {
            ConstraintKind::FieldMatches { pattern, .. } if pattern.node.contains(['\n', '\r']) => {
                Some(pattern.node.clone())
            }
            ConstraintKind::Any(items) | ConstraintKind::All(items) => items.iter().find_map(find),
            ConstraintKind::Not(inner) => find(inner),
            _ => None,
        }
    }
    file.skills
        .iter()
        .flat_map(|skill| &skill.capabilities)
        .flat_map(|capability| &capability.constraints)
        .find_map(find)
}

/// A regex source as it goes between slashes.
fn regex_body(pattern: &str) -> String {
    if pattern.is_empty() {
        return "(?:)".to_owned();
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => out.push_str("\\n"),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            },
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ => out.push(c),
        }
    }
    out
}

fn risk_text(risk: Risk) -> String {
    match risk {
        Risk::Label(label) => label.name().to_owned(),
        Risk::Score(score) => score.to_string(),
    }
}

fn sensitivity_text(sensitivity: Sensitivity) -> &'static str {
    match sensitivity {
        Sensitivity::Normal => "normal",
        Sensitivity::Elevated => "elevated",
    }
}

fn lifetime_text(lifetime: Lifetime) -> String {
    match lifetime {
        Lifetime::Call(1) => "call".to_owned(),
        Lifetime::Call(n) => format!("call {n}"),
        Lifetime::Transaction => "transaction".to_owned(),
        Lifetime::WallClock {
            duration,
            renewable,
        } => {
            let renew = if renewable { " renewable" } else { "" };
            format!("wallClock {}{renew}", format_duration(duration))
        }
        Lifetime::Process => "process".to_owned(),
    }
}
