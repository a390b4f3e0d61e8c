//! The shared AST → the canonical JSON manifest form (SPEC §3), for `capgate convert --to json`.
//!
//! - [`skill_to_json_text`] writes one skill as pretty JSON text with keys in the documented
//!   order (the form `docs/manifest.md` shows); [`to_json_text`] does the same for a policy file
//!   that holds exactly one skill.
//! - [`skill_to_json`] / [`to_json`] give the same document as a `serde_json::Value`. serde_json
//!   is built without `preserve_order`, so that value's object keys are sorted; use the text
//!   functions when the order matters to a reader.
//!
//! The document is first built as an [`Out`] tree (objects keep insertion order), then either
//! rendered or converted. Defaults are left out (`optional: false`, `caseInsensitive: false`, an
//! empty `by`), so that loading the output gives back an AST equal to the input modulo spans.
//! ASTs the JSON form cannot express are errors, not silent rewrites.

use chrono::SecondsFormat;
use serde_json::{Map, Number, Value};

use super::error::ManifestError;
use crate::span::Span;
use crate::syntax::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, DaySet, EqualsRhs, Lifetime,
    PolicyFile, RangeSubject, ResourceKind, Risk, SchemaSource, Sensitivity, Skill, WindowSpec,
};
use crate::syntax::units::{format_days, format_duration, format_time_of_day};
use crate::vocabulary::OPTIONAL;

/// Lines longer than this are broken over several lines.
const LINE_WIDTH: usize = 100;

/// A JSON document under construction; objects keep insertion order.
#[derive(Debug, Clone)]
pub(super) enum Out {
    /// A scalar (null, boolean, number, string).
    Scalar(Value),
    Array(Vec<Out>),
    Object(Vec<(String, Out)>),
}

impl Out {
    fn string(text: impl Into<String>) -> Out {
        Out::Scalar(Value::String(text.into()))
    }

    fn number(n: impl Into<Number>) -> Out {
        Out::Scalar(Value::Number(n.into()))
    }

    fn from_value(value: &Value) -> Out {
        match value {
            Value::Array(items) => Out::Array(items.iter().map(Out::from_value).collect()),
            Value::Object(map) => Out::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), Out::from_value(v)))
                    .collect(),
            ),
            scalar => Out::Scalar(scalar.clone()),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Out::Scalar(value) => value.clone(),
            Out::Array(items) => Value::Array(items.iter().map(Out::to_value).collect()),
            Out::Object(members) => {
                let mut map = Map::new();
                for (key, value) in members {
                    map.insert(key.clone(), value.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// The one-line form: `{ "a": 1, "b": [1, 2] }`.
    fn write_flat(&self, out: &mut String) {
        match self {
            Out::Scalar(value) => out.push_str(&value.to_string()),
            Out::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_flat(out);
                }
                out.push(']');
            }
            Out::Object(members) if members.is_empty() => out.push_str("{}"),
            Out::Object(members) => {
                out.push_str("{ ");
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push_str(": ");
                    value.write_flat(out);
                }
                out.push_str(" }");
            }
        }
    }

    /// Depth of nested objects inside this node (0 for scalars and arrays of scalars).
    fn object_depth(&self) -> usize {
        match self {
            Out::Scalar(_) => 0,
            Out::Array(items) => items.iter().map(Out::object_depth).max().unwrap_or(0),
            Out::Object(members) => {
                1 + members
                    .iter()
                    .map(|(_, v)| v.object_depth())
                    .max()
                    .unwrap_or(0)
            }
        }
    }

    /// Pretty form: a node fits on one line when it holds no object nested in an object and the
    /// line stays within [`LINE_WIDTH`]; otherwise one member per line, indented two spaces.
    fn write_pretty(&self, out: &mut String, indent: usize, used: usize) {
        let mut flat = String::new();
        self.write_flat(&mut flat);
        let nested = self.object_depth() > 1;
        if matches!(self, Out::Scalar(_)) || (!nested && used + flat.len() <= LINE_WIDTH) {
            out.push_str(&flat);
            return;
        }
        let pad = " ".repeat(indent + 2);
        match self {
            Out::Scalar(_) => out.push_str(&flat),
            Out::Array(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    out.push_str(&pad);
                    item.write_pretty(out, indent + 2, indent + 2);
                    if i + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                out.push_str(&" ".repeat(indent));
                out.push(']');
            }
            Out::Object(members) => {
                out.push_str("{\n");
                for (i, (key, value)) in members.iter().enumerate() {
                    out.push_str(&pad);
                    let key = Value::String(key.clone()).to_string();
                    out.push_str(&key);
                    out.push_str(": ");
                    value.write_pretty(out, indent + 2, indent + 2 + key.len() + 2);
                    if i + 1 < members.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                out.push_str(&" ".repeat(indent));
                out.push('}');
            }
        }
    }
}

/// Writes a policy file holding exactly one skill as canonical JSON manifest text.
///
/// A JSON manifest describes one skill, so a file with several (or none) is an error; convert
/// each skill with [`skill_to_json_text`] instead.
pub fn to_json_text(file: &PolicyFile) -> Result<String, ManifestError> {
    skill_to_json_text(single_skill(file)?)
}

/// The same document as [`to_json_text`], as a `serde_json::Value` (object keys sorted).
pub fn to_json(file: &PolicyFile) -> Result<Value, ManifestError> {
    skill_to_json(single_skill(file)?)
}

/// Writes one skill as canonical JSON manifest text (two-space indent, trailing newline).
pub fn skill_to_json_text(skill: &Skill) -> Result<String, ManifestError> {
    let document = skill_out(skill)?;
    let mut text = String::new();
    document.write_pretty(&mut text, 0, 0);
    text.push('\n');
    Ok(text)
}

/// One skill as a `serde_json::Value` (object keys sorted).
pub fn skill_to_json(skill: &Skill) -> Result<Value, ManifestError> {
    Ok(skill_out(skill)?.to_value())
}

fn single_skill(file: &PolicyFile) -> Result<&Skill, ManifestError> {
    match file.skills.as_slice() {
        [skill] => Ok(skill),
        skills => {
            let span = skills
                .get(1)
                .map_or_else(Span::default, |second| second.span);
            Err(ManifestError::new(
                span,
                format!(
                    "a JSON manifest holds exactly one skill, this file has {}",
                    skills.len()
                ),
            )
            .with_help("convert each skill to its own JSON file"))
        }
    }
}

fn unrepresentable(span: Span, message: impl Into<String>) -> ManifestError {
    ManifestError::new(span, message)
}

pub(super) fn skill_out(skill: &Skill) -> Result<Out, ManifestError> {
    let mut header = vec![("name".to_owned(), Out::string(&skill.name.node))];
    let optional = [
        ("version", &skill.version),
        ("contentHash", &skill.hash),
        ("signingIdentity", &skill.signer),
    ];
    for (key, value) in optional {
        if let Some(value) = value {
            header.push((key.to_owned(), Out::string(&value.node)));
        }
    }
    let mut top = vec![("skill".to_owned(), Out::Object(header))];
    if let Some(risk) = &skill.risk {
        top.push(("risk".to_owned(), risk_out(risk.node)));
    }
    if let Some(sensitivity) = &skill.sensitivity {
        top.push(("sensitivity".to_owned(), sensitivity_out(sensitivity.node)));
    }
    let capabilities = skill
        .capabilities
        .iter()
        .map(capability_out)
        .collect::<Result<Vec<_>, _>>()?;
    top.push(("capabilities".to_owned(), Out::Array(capabilities)));
    Ok(Out::Object(top))
}

fn risk_out(risk: Risk) -> Out {
    match risk {
        Risk::Label(label) => Out::string(label.name()),
        Risk::Score(score) => Out::number(score),
    }
}

fn sensitivity_out(sensitivity: Sensitivity) -> Out {
    Out::string(match sensitivity {
        Sensitivity::Normal => "normal",
        Sensitivity::Elevated => "elevated",
    })
}

fn capability_out(capability: &Capability) -> Result<Out, ManifestError> {
    let mut members = vec![("name".to_owned(), Out::string(&capability.name.node))];
    if let Some(resource) = &capability.resource {
        let decl = &resource.node;
        let text = match decl.kind {
            ResourceKind::Http => {
                if !(decl.locator.starts_with("https://") || decl.locator.starts_with("http://")) {
                    return Err(unrepresentable(
                        resource.span,
                        format!("http resource `{}` is not a URL", decl.locator),
                    ));
                }
                decl.locator.clone()
            }
            kind => format!("{}:{}", kind.name(), decl.locator),
        };
        members.push(("resource".to_owned(), Out::string(text)));
    }
    if !capability.operations.is_empty() || capability.operations_span.is_some() {
        let verbs = capability
            .operations
            .iter()
            .map(|verb| Out::string(&verb.node))
            .collect();
        members.push(("operations".to_owned(), Out::Array(verbs)));
    }
    if !capability.constraints.is_empty() {
        let constraints = capability
            .constraints
            .iter()
            .map(constraint_out)
            .collect::<Result<Vec<_>, _>>()?;
        members.push(("constraints".to_owned(), Out::Array(constraints)));
    }
    if let Some(lifetime) = &capability.lifetime {
        members.push(("lifetime".to_owned(), lifetime_out(lifetime.node)));
    }
    if let Some(justification) = &capability.justification {
        members.push(("justification".to_owned(), Out::string(&justification.node)));
    }
    if let Some(risk) = &capability.risk {
        members.push(("risk".to_owned(), risk_out(risk.node)));
    }
    if let Some(sensitivity) = &capability.sensitivity {
        members.push(("sensitivity".to_owned(), sensitivity_out(sensitivity.node)));
    }
    Ok(Out::Object(members))
}

fn lifetime_out(lifetime: Lifetime) -> Out {
    let (kind, rest) = match lifetime {
        Lifetime::Call(n) => ("call", vec![("value".to_owned(), Out::number(n))]),
        Lifetime::Transaction => ("transaction", Vec::new()),
        Lifetime::Process => ("process", Vec::new()),
        Lifetime::WallClock {
            duration,
            renewable,
        } => (
            "wallClock",
            vec![
                ("value".to_owned(), Out::string(format_duration(duration))),
                ("renewable".to_owned(), Out::Scalar(Value::Bool(renewable))),
            ],
        ),
    };
    let mut members = vec![("kind".to_owned(), Out::string(kind))];
    members.extend(rest);
    Out::Object(members)
}

fn path_out(path: &crate::value::Path) -> Out {
    Out::string(path.to_string())
}

fn constraint_out(constraint: &Constraint) -> Result<Out, ManifestError> {
    let name = constraint.kind.name();
    let mut members = vec![("type".to_owned(), Out::string(name))];
    let mut push = |key: &str, value: Out| members.push((key.to_owned(), value));
    match &constraint.kind {
        ConstraintKind::FieldEquals { path, rhs } => {
            push("field", path_out(&path.node));
            match rhs {
                EqualsRhs::Value(value) => push("value", Out::from_value(&value.node)),
                EqualsRhs::In(values) => push(
                    "in",
                    Out::Array(values.iter().map(|v| Out::from_value(&v.node)).collect()),
                ),
                EqualsRhs::Path(other) => push("equalsField", path_out(&other.node)),
            }
        }
        ConstraintKind::FieldMatches {
            path,
            pattern,
            case_insensitive,
        } => {
            push("field", path_out(&path.node));
            push("pattern", Out::string(&pattern.node));
            if *case_insensitive {
                push("caseInsensitive", Out::Scalar(Value::Bool(true)));
            }
        }
        ConstraintKind::FieldRange { subject, bounds } => {
            let is_difference = match subject {
                RangeSubject::Field(path) => {
                    push("field", path_out(&path.node));
                    false
                }
                RangeSubject::Difference(a, b) => {
                    push(
                        "difference",
                        Out::Array(vec![path_out(&a.node), path_out(&b.node)]),
                    );
                    true
                }
            };
            let mut seen: Vec<CmpOp> = Vec::new();
            for bound in bounds {
                if seen.contains(&bound.op) {
                    return Err(unrepresentable(
                        bound.span,
                        format!(
                            "two `{}` bounds in one fieldRange cannot be written as JSON",
                            bound.op.symbol()
                        ),
                    )
                    .with_help("keep the tighter bound"));
                }
                seen.push(bound.op);
                let (key, value) = bound_out(bound, is_difference)?;
                push(key, value);
            }
        }
        ConstraintKind::PayloadSchema(source) => match source {
            SchemaSource::Inline(schema) => push("schema", Out::from_value(&schema.node)),
            SchemaSource::File(path) => push("schemaFile", Out::string(&path.node)),
        },
        ConstraintKind::ActorBinding { paths, identity } => {
            push(
                "fields",
                Out::Array(paths.iter().map(|p| path_out(&p.node)).collect()),
            );
            push("identity", path_out(&identity.node));
        }
        ConstraintKind::RateLimit(limit) => {
            push("count", Out::number(limit.count.node));
            push("per", Out::string(format_duration(limit.per.node)));
            if let Some(burst) = &limit.burst {
                push("burst", Out::number(burst.node));
            }
            if !limit.by.is_empty() {
                push(
                    "by",
                    Out::Array(limit.by.iter().map(|p| path_out(&p.node)).collect()),
                );
            }
        }
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            push("timezone", Out::string(&zone.node));
            let windows = windows
                .iter()
                .map(|w| {
                    Out::Object(vec![
                        ("days".to_owned(), days_out(w.days)),
                        ("start".to_owned(), Out::string(format_time_of_day(w.start))),
                        ("end".to_owned(), Out::string(format_time_of_day(w.end))),
                    ])
                })
                .collect();
            push("windows", Out::Array(windows));
        }
        ConstraintKind::WallClockWindow(WindowSpec::Absolute { from, until }) => {
            let stamp = |t: &chrono::DateTime<chrono::FixedOffset>| {
                Out::string(t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
            };
            push("from", stamp(&from.node));
            push("until", stamp(&until.node));
        }
        ConstraintKind::Any(children) | ConstraintKind::All(children) => {
            let children = children
                .iter()
                .map(constraint_out)
                .collect::<Result<Vec<_>, _>>()?;
            push("constraints", Out::Array(children));
        }
        ConstraintKind::Not(child) => push("constraint", constraint_out(child)?),
    }
    if constraint.optional {
        if !constraint.kind.keyword().may_be_optional() {
            return Err(unrepresentable(
                constraint.span,
                format!("`optional` does not apply to `{name}`"),
            ));
        }
        members.push((OPTIONAL.to_owned(), Out::Scalar(Value::Bool(true))));
    }
    Ok(Out::Object(members))
}

/// A day set as one range string (`"mon-fri"`, `"daily"`), or an array of day names when the
/// set is not one range (`["mon", "wed"]`).
fn days_out(days: DaySet) -> Out {
    let text = format_days(days);
    if text.contains(',') {
        Out::Array(text.split(',').map(Out::string).collect())
    } else {
        Out::string(text)
    }
}

fn bound_out(bound: &Bound, is_difference: bool) -> Result<(&'static str, Out), ManifestError> {
    let key = match bound.op {
        CmpOp::Ge => "min",
        CmpOp::Le => "max",
        CmpOp::Gt => "exclusiveMin",
        CmpOp::Lt => "exclusiveMax",
    };
    let value = match (&bound.value, is_difference) {
        (BoundValue::Number(n), false) => Out::Scalar(Value::Number(n.clone())),
        (BoundValue::Now, false) => Out::string("now"),
        (BoundValue::Duration(d), true) => Out::string(format_duration(*d)),
        (BoundValue::Duration(_), false) => {
            return Err(unrepresentable(
                bound.span,
                "a duration bound needs a `difference` subject",
            ));
        }
        (_, true) => {
            return Err(unrepresentable(
                bound.span,
                "a `difference` is bounded by durations only",
            ));
        }
    };
    Ok((key, value))
}
