//! Helpers for interactive policy authoring (`capgate repl`), built on the public engine API.
//!
//! - [`evaluate_constraint`] evaluates constraint text such as
//!   `fieldMatches payload.email ~ /.*@example\.com/` against a payload, an agent and a context,
//!   by compiling it into a one-capability synthetic skill and tracing it with
//!   [`Engine::explain`]. It returns a [`ConstraintEvaluation`] (whether it held, and each test
//!   with the value it saw) or a [`ConstraintError`] whose diagnostics point into the text typed.
//! - [`value_at`] finds the value a concrete path of a trace (`payload.attendees[4].email`) saw
//!   in a request, so a trace can print it next to each test.
//! - [`needs_more_input`] tells whether typed text is unfinished (an open `{` or `[` outside
//!   strings, regexes and comments), so that an editor keeps reading lines until it is balanced.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use capgate::engine::TestReport;
use capgate::engine::{Diagnostic, Engine, PolicyFormat, PolicyLoader, Request};
use capgate::limits::Limits;
use capgate::runtime::SimulatedClock;
use capgate::span::Location;
use capgate::value::{Path, Root, Segment};

/// The skill, capability and resource of the synthetic policy a constraint is compiled into.
/// Paths under `request.` see these values (`request.skill` is `repl`).
pub const SYNTHETIC_SKILL: &str = "repl";
const SYNTHETIC_CAPABILITY: &str = "line";
const SYNTHETIC_RESOURCE: &str = "tool:repl";
/// The file name diagnostics of a constraint use.
pub const CONSTRAINT_SOURCE: &str = "<input>";

/// What a constraint is evaluated against.
#[derive(Debug, Clone, Copy)]
pub struct ConstraintInput<'a> {
    /// The call's body (`payload.…`).
    pub payload: &'a Value,
    /// The calling agent (`agent.…`).
    pub agent: &'a Value,
    /// Caller-supplied facts (`context.…`).
    pub context: &'a Value,
    /// The engine clock, for `fieldRange … now` and `wallClockWindow`.
    pub now: DateTime<Utc>,
}

/// One top-level constraint of the evaluated text, traced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintCheck {
    /// The constraint as the compiler summarises it.
    pub summary: String,
    /// Whether it held.
    pub holds: bool,
    /// Every test it ran, with the path and the value it saw.
    pub tests: Vec<TestReport>,
}

/// The result of evaluating constraint text: every constraint it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstraintEvaluation {
    /// Each top-level constraint of the text, in order.
    pub checks: Vec<ConstraintCheck>,
}

impl ConstraintEvaluation {
    /// True when every constraint held (the text is a conjunction, like a capability body).
    pub fn holds(&self) -> bool {
        self.checks.iter().all(|c| c.holds)
    }
}

/// Why constraint text could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// The text does not parse or compile; locations are in the text as typed
    /// (file [`CONSTRAINT_SOURCE`], line 1 is its first line).
    #[error("the constraint does not compile: {} error(s)", .0.len())]
    Invalid(Vec<Diagnostic>),
    /// The text compiled but holds nothing that can be evaluated alone (only `rateLimit`).
    #[error("{0}")]
    NotEvaluable(String),
    /// The limits set a field above its fixed bound.
    #[error(transparent)]
    Limits(#[from] capgate::limits::LimitError),
}

/// The synthetic policy's first line; the constraint text starts on line 2.
const HEADER: &str = concat!(
    "skill \"repl\" { version \"0\" capability \"line\" { resource tool \"repl\" ",
    "operations call justification \"evaluates one constraint typed in the repl\""
);
const FOOTER: &str = "} }";

/// Evaluates constraint text (one or more constraints, as written inside a capability) against
/// `input`. Paths under `resource.` are absent (the synthetic resource has no template bindings);
/// `request.skill` is [`SYNTHETIC_SKILL`] and `request.operation` is `call`.
pub fn evaluate_constraint(
    text: &str,
    input: &ConstraintInput<'_>,
    limits: Limits,
) -> Result<ConstraintEvaluation, ConstraintError> {
    limits.check()?;
    let source = format!("{HEADER}\n{text}\n{FOOTER}\n");
    let mut loader = PolicyLoader::new(limits);
    loader.add_text(CONSTRAINT_SOURCE, source, PolicyFormat::Cap, None);
    let policy = loader
        .finish()
        .map_err(|e| ConstraintError::Invalid(remap(text, e.diagnostics)))?;
    if let Some(capability) = policy
        .skills
        .iter()
        .flat_map(|s| s.capabilities.iter())
        .find(|c| &*c.name == SYNTHETIC_CAPABILITY)
        && capability.checks().is_empty()
    {
        return Err(ConstraintError::NotEvaluable(
            if capability.rate_limits().is_empty() {
                "no constraint to evaluate".to_owned()
            } else {
                "`rateLimit` counts the calls a stateful engine allowed: it cannot be evaluated \
                 alone; send requests to a capability that has it"
                    .to_owned()
            },
        ));
    }
    let engine = Engine::builder(policy)
        .limits(limits)
        .map_err(|error| ConstraintError::NotEvaluable(error.to_string()))?
        .clock(Arc::new(SimulatedClock::new(input.now)))
        .build();
    let request = constraint_request(input);
    let trace = engine
        .explain(&request)
        .into_iter()
        .find(|t| &*t.capability == SYNTHETIC_CAPABILITY)
        .ok_or_else(|| {
            ConstraintError::NotEvaluable("the constraint could not be traced".to_owned())
        })?;
    Ok(ConstraintEvaluation {
        checks: trace
            .checks
            .into_iter()
            .map(|(summary, holds, tests)| ConstraintCheck {
                summary,
                holds,
                tests,
            })
            .collect(),
    })
}

/// The synthetic request a constraint is evaluated on: skill [`SYNTHETIC_SKILL`], operation
/// `call`, resource `tool:repl`, and the input's payload, agent and context. Use it with
/// [`value_at`] to show the values a [`ConstraintEvaluation`]'s tests saw.
pub fn constraint_request(input: &ConstraintInput<'_>) -> Request {
    let mut request = Request::new(SYNTHETIC_SKILL, "call", SYNTHETIC_RESOURCE);
    request.payload = input.payload.clone();
    request.agent = input.agent.clone();
    request.context = input.context.clone();
    request
}

/// Moves diagnostics from the synthetic policy into the text as typed: line 2 of the policy is
/// line 1 of the text; anything after the text (an unclosed block found at the footer) points
/// just past its end.
fn remap(text: &str, diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let lines: Vec<&str> = text.split('\n').collect();
    let last_line = u32::try_from(lines.len()).unwrap_or(u32::MAX).max(1);
    let end_column = lines
        .last()
        .map_or(1, |l| u32::try_from(l.chars().count()).unwrap_or(u32::MAX))
        .saturating_add(1);
    diagnostics
        .into_iter()
        .map(|mut d| {
            let line = d.location.line.saturating_sub(1);
            let (line, column) = if line == 0 {
                (1, 1)
            } else if line > last_line {
                (last_line, end_column)
            } else {
                (line, d.location.column.max(1))
            };
            d.location = Location {
                file: Arc::from(CONSTRAINT_SOURCE),
                line,
                column,
            };
            d
        })
        .collect()
}

/// The value a concrete path (as a trace reports it, without `[*]`) reaches in `request`:
/// `payload`, `agent` and `context` members, and `request.skill`, `request.operation`,
/// `request.transaction`. `None` when the path is absent, has a wildcard, or starts at
/// `resource` (template bindings are not kept in the request).
pub fn value_at(request: &Request, path: &str) -> Option<Value> {
    let path = Path::parse(path).ok()?;
    let (mut value, segments) = match path.root {
        Root::Payload => (&request.payload, path.segments.as_slice()),
        Root::Agent => (&request.agent, path.segments.as_slice()),
        Root::Context => (&request.context, path.segments.as_slice()),
        Root::Resource => return None,
        Root::Request => {
            let [Segment::Key(field)] = path.segments.as_slice() else {
                return None;
            };
            return match field.as_str() {
                "skill" => Some(Value::String(request.skill.clone())),
                "operation" => Some(Value::String(request.operation.clone())),
                "transaction" => request.transaction.clone().map(Value::String),
                _ => None,
            };
        }
    };
    for segment in segments {
        value = match segment {
            Segment::Key(key) => value.as_object()?.get(key)?,
            Segment::Index(index) => value.as_array()?.get(usize::try_from(*index).ok()?)?,
            Segment::Wildcard => return None,
        };
    }
    Some(value.clone())
}

/// True when `text` opens more `{` or `[` than it closes, outside strings, regex literals
/// (`~ /…/`) and comments (`//`, `#`): an editor should read another line. Strings and regexes
/// end at a line end, as in the grammar, so a stray quote cannot swallow later lines.
pub fn needs_more_input(text: &str) -> bool {
    let mut depth: i64 = 0;
    for line in text.split('\n') {
        depth = depth.saturating_add(line_depth(line));
    }
    depth > 0
}

/// The net `{`/`[` depth one line opens (outside strings, regexes and comments). Lines add up:
/// [`needs_more_input`] is their sum above zero, so a reader taking one line at a time keeps a
/// running total instead of rescanning what it holds.
pub fn line_depth(line: &str) -> i64 {
    #[derive(PartialEq)]
    enum Mode {
        Code,
        String,
        Regex,
    }
    let mut mode = Mode::Code;
    let mut depth: i64 = 0;
    let mut escaped = false;
    let mut last_code_char = ' ';
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match mode {
            Mode::String | Mode::Regex => {
                let close = if mode == Mode::String { '"' } else { '/' };
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == close {
                    mode = Mode::Code;
                    last_code_char = c;
                }
            }
            Mode::Code => {
                match c {
                    '"' => mode = Mode::String,
                    '#' => break,
                    '/' if chars.peek() == Some(&'/') => break,
                    '/' if last_code_char == '~' => mode = Mode::Regex,
                    '{' | '[' => depth = depth.saturating_add(1),
                    '}' | ']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if !c.is_whitespace() {
                    last_code_char = c;
                }
            }
        }
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input<'a>(payload: &'a Value, agent: &'a Value, context: &'a Value) -> ConstraintInput<'a> {
        ConstraintInput {
            payload,
            agent,
            context,
            now: DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_matching_field_holds() {
        let payload = json!({"email": "ann@example.com"});
        let result = evaluate_constraint(
            r"fieldMatches payload.email ~ /.*@example\.com/",
            &input(&payload, &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap();
        assert!(result.holds());
        assert_eq!(result.checks.len(), 1);
    }

    #[test]
    fn a_failing_field_reports_the_path_it_saw() {
        let payload = json!({"email": "eve@evil.test"});
        let result = evaluate_constraint(
            r"fieldMatches payload.email ~ /.*@example\.com/",
            &input(&payload, &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap();
        assert!(!result.holds());
        let test = &result.checks[0].tests[0];
        assert!(!test.holds);
        assert_eq!(test.path.as_deref(), Some("payload.email"));
    }

    #[test]
    fn a_syntax_error_points_into_the_typed_text() {
        let payload = json!({});
        let error = evaluate_constraint(
            "fieldEquals payload.a === 1",
            &input(&payload, &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap_err();
        let ConstraintError::Invalid(diagnostics) = error else {
            panic!("expected a compile error");
        };
        let location = &diagnostics[0].location;
        assert_eq!(&*location.file, CONSTRAINT_SOURCE);
        assert_eq!(location.line, 1);
        assert!(location.column > 1 && location.column <= 28, "{location}");
    }

    #[test]
    fn an_unclosed_block_points_past_the_typed_text() {
        let error = evaluate_constraint(
            "any { fieldEquals payload.a == 1",
            &input(&json!({}), &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap_err();
        let ConstraintError::Invalid(diagnostics) = error else {
            panic!("expected a compile error");
        };
        assert_eq!(diagnostics[0].location.line, 1);
    }

    #[test]
    fn a_rate_limit_alone_is_not_evaluable() {
        let error = evaluate_constraint(
            "rateLimit 5 per minute",
            &input(&json!({}), &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap_err();
        assert!(matches!(error, ConstraintError::NotEvaluable(_)));
    }

    #[test]
    fn every_constraint_of_a_conjunction_is_traced() {
        let payload = json!({"a": 1, "b": 2});
        let result = evaluate_constraint(
            "fieldEquals payload.a == 1\nfieldEquals payload.b == 3",
            &input(&payload, &Value::Null, &Value::Null),
            Limits::DEFAULT,
        )
        .unwrap();
        assert_eq!(result.checks.len(), 2);
        assert!(result.checks[0].holds);
        assert!(!result.checks[1].holds);
        assert!(!result.holds());
    }

    #[test]
    fn value_at_follows_keys_and_indexes() {
        let mut request = Request::new("s", "call", "tool:t");
        request.payload = json!({"a": [{"b": 1}, {"b": "x"}], "odd key": true});
        request.transaction = Some("tx".to_owned());
        assert_eq!(value_at(&request, "payload.a[1].b"), Some(json!("x")));
        assert_eq!(
            value_at(&request, r#"payload["odd key"]"#),
            Some(json!(true))
        );
        assert_eq!(value_at(&request, "request.transaction"), Some(json!("tx")));
        assert_eq!(value_at(&request, "payload.a[2].b"), None);
        assert_eq!(value_at(&request, "payload.a[*].b"), None);
        assert_eq!(value_at(&request, "resource.calendar"), None);
        assert_eq!(value_at(&request, "not a path"), None);
    }

    #[test]
    fn unbalanced_braces_need_more_input() {
        assert!(needs_more_input("skill \"x\" {"));
        assert!(needs_more_input("{\"a\": ["));
        assert!(!needs_more_input("{\"a\": [1]}"));
        assert!(!needs_more_input("fieldEquals payload.a == 1"));
    }

    #[test]
    fn brackets_in_strings_regexes_and_comments_do_not_count() {
        assert!(!needs_more_input(r#"{"a": "{["}"#));
        assert!(!needs_more_input(r"fieldMatches payload.a ~ /[^@{]+/"));
        assert!(!needs_more_input(r"fieldMatches payload.a ~ /a\/[/"));
        assert!(!needs_more_input("fieldEquals payload.a == 1 // {"));
        assert!(!needs_more_input("fieldEquals payload.a == 1 # ["));
        assert!(!needs_more_input(r#"{"a": "say \"{\""}"#));
    }

    #[test]
    fn an_unterminated_string_ends_at_the_line_end() {
        assert!(!needs_more_input("\"{\n}"));
        assert!(needs_more_input("{\n\"oops\n"));
    }

    #[test]
    fn extra_closers_never_need_more_input() {
        assert!(!needs_more_input("}}"));
    }
}
