//! Running test files: each `.captest` case on a fresh [`Session`], each session file on one.
//!
//! Operator steps go through [`Session::run_line`] as the session lines they stand for, so a
//! test and `capgate replay` can never disagree about what a grant or a revocation does.

use std::io::BufRead;
use std::path::Path;

use serde_json::{Map, Value, json};

use super::format::{Expectation, Key, Revocation, Step, Target, TestFile};
use super::{Failure, Report, SESSION_SUFFIX, TestFileError};
use capgate::bounded::{ByteLimit, Line, LineReader};
use capgate::engine::{CandidateTrace, Decision, PolicySet, Request, Verdict};
use capgate::limits::Limits;
use capgate::session::{LineResult, Session, SessionOptions};

/// Runs one test file found on disk. A session is read line by line, each line bounded
/// ([`Limits::max_session_line_bytes`]); a `.captest` file whole, within
/// [`Limits::max_policy_file_bytes`].
pub(super) fn run_path(path: &Path, policy: &PolicySet, limits: Limits, report: &mut Report) {
    let name = path.display().to_string();
    let file_error = |message: String| TestFileError {
        file: name.clone(),
        position: None,
        message,
    };
    if name.ends_with(SESSION_SUFFIX) {
        match std::fs::File::open(path) {
            Ok(file) => run_session(&name, std::io::BufReader::new(file), policy, limits, report),
            Err(e) => report
                .errors
                .push(file_error(format!("cannot read `{name}`: {e}"))),
        }
        return;
    }
    let bytes = match capgate::bounded::read_file(path, ByteLimit::policy_file(&limits)) {
        Ok(bytes) => bytes,
        Err(e) => {
            report.errors.push(file_error(e.to_string()));
            return;
        }
    };
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            report.errors.push(TestFileError {
                file: name.clone(),
                position: None,
                message: format!(
                    "`{name}` is not UTF-8 (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            });
            return;
        }
    };
    match super::parse(&name, &text) {
        Ok(file) => run_cases(&file, policy, limits, report),
        Err(error) => report.errors.push(error),
    }
}

/// A fresh session for test file `name`; a failure of the file if the limits are refused.
fn new_session(
    policy: &PolicySet,
    limits: Limits,
    name: &str,
    report: &mut Report,
) -> Option<Session> {
    let options = SessionOptions {
        limits: Some(limits),
        ..SessionOptions::default()
    };
    match Session::new(policy.clone(), options) {
        Ok(session) => Some(session),
        Err(error) => {
            report.fail(Failure {
                file: name.to_owned(),
                ..step_failure(error.to_string())
            });
            None
        }
    }
}

/// Runs every case of a parsed file, each on a fresh session.
pub(super) fn run_cases(file: &TestFile, policy: &PolicySet, limits: Limits, report: &mut Report) {
    for case in &file.cases {
        let Some(session) = new_session(policy, limits, &file.name, report) else {
            return;
        };
        let mut request = Map::new();
        let mut failure = None;
        for line in file.defaults.iter().chain(&case.lines) {
            if let Err(mut problem) =
                run_step(&session, &mut request, &line.step, line.number, report)
            {
                problem.file.clone_from(&file.name);
                problem.line = line.number;
                problem.case = Some(case.name.clone());
                failure = Some(*problem);
                break;
            }
        }
        match failure {
            Some(failure) => report.fail(failure),
            None => report.passed += 1,
        }
    }
}

/// A failure before the file, line and case are filled in.
fn step_failure(message: String) -> Failure {
    Failure {
        file: String::new(),
        line: 0,
        case: None,
        expected: None,
        actual: None,
        message,
        trace: Vec::new(),
    }
}

fn fail(message: String) -> Box<Failure> {
    Box::new(step_failure(message))
}

/// The request's current `skill`, for steps that default to it.
fn skill_or_current(
    skill: Option<&String>,
    request: &Map<String, Value>,
) -> Result<String, String> {
    match (skill, request.get("skill")) {
        (Some(skill), _) => Ok(skill.clone()),
        (None, Some(Value::String(skill))) => Ok(skill.clone()),
        _ => Err("no skill named and the request has no `skill` string to default to".to_owned()),
    }
}

fn run_step(
    session: &Session,
    request: &mut Map<String, Value>,
    step: &Step,
    number: usize,
    report: &mut Report,
) -> Result<(), Box<Failure>> {
    let line = match step {
        Step::Set { target, value } => return set(request, target, value.clone()).map_err(fail),
        Step::Unset(target) => return unset(request, target).map_err(fail),
        Step::Call { times, expect } => {
            for _ in 0..*times {
                call(session, request, expect.as_ref(), report)?;
            }
            return Ok(());
        }
        Step::Time(time) => json!({ "time": time }),
        Step::Advance(duration) => json!({ "advance": duration }),
        Step::Begin(tx) => json!({ "begin_transaction": tx }),
        Step::End(tx) => json!({ "end_transaction": tx }),
        Step::Grant {
            skill,
            capability,
            token,
            transaction,
        } => {
            let mut grant = Map::new();
            grant.insert(
                "skill".to_owned(),
                Value::String(skill_or_current(skill.as_ref(), request).map_err(fail)?),
            );
            grant.insert("capability".to_owned(), Value::String(capability.clone()));
            if let Some(tx) = transaction {
                grant.insert("transaction".to_owned(), Value::String(tx.clone()));
            }
            let mut line = Map::new();
            line.insert("grant".to_owned(), Value::Object(grant));
            if let Some(token) = token {
                line.insert("id".to_owned(), Value::String(token.clone()));
            }
            Value::Object(line)
        }
        Step::Revoke(Revocation::Grant(token)) => json!({ "revoke": { "grant": token } }),
        Step::Revoke(Revocation::Skill(skill)) => {
            json!({ "revoke": { "skill": skill_or_current(skill.as_ref(), request).map_err(fail)? } })
        }
        Step::Revoke(Revocation::Capability { skill, capability }) => json!({
            "revoke": {
                "skill": skill_or_current(skill.as_ref(), request).map_err(fail)?,
                "capability": capability,
            }
        }),
        Step::Approve { skill } => {
            json!({ "approve": { "skill": skill_or_current(skill.as_ref(), request).map_err(fail)? } })
        }
    };
    let result = session.run_line(&line.to_string(), number);
    if result.error {
        let message = result
            .output
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the step could not run");
        return Err(fail(format!("the step could not run: {message}")));
    }
    Ok(())
}

/// Makes one call and checks it; records coverage either way.
fn call(
    session: &Session,
    request: &Map<String, Value>,
    expect: Option<&Expectation>,
    report: &mut Report,
) -> Result<(), Box<Failure>> {
    let value = Value::Object(request.clone());
    let engine = session.engine();
    let decision = engine.check_value(value.clone());
    let trace = trace(session, value);
    report.coverage.record(&decision, &trace);
    let Some(expect) = expect else {
        return Ok(());
    };
    match mismatch(expect, &decision) {
        None => Ok(()),
        Some(message) => Err(Box::new(Failure {
            expected: Some(expect.clone()),
            actual: Some(decision),
            message,
            trace,
            ..step_failure(String::new())
        })),
    }
}

/// The explain trace of a call given as JSON (empty when it is not a valid request).
fn trace(session: &Session, value: Value) -> Vec<CandidateTrace> {
    let engine = session.engine();
    Request::from_value(value, engine.limits())
        .map(|request| engine.explain(&request))
        .unwrap_or_default()
}

/// What about `decision` does not meet `expect`, if anything.
pub(super) fn mismatch(expect: &Expectation, decision: &Decision) -> Option<String> {
    let actual = decision.effective();
    if actual != expect.verdict {
        return Some(format!("expected {}, got {actual}", expect.verdict));
    }
    if actual == Verdict::Allow {
        return match (&expect.capability, &decision.capability) {
            (Some(expected), Some(got)) if **got != **expected => Some(format!(
                "expected allow by `{expected}`, got allow by `{got}`"
            )),
            (Some(expected), None) => {
                Some(format!("expected allow by `{expected}`, got no capability"))
            }
            _ => None,
        };
    }
    if expect.constraint.is_none() && expect.path.is_none() && expect.capability.is_none() {
        return None;
    }
    let matches = decision.reasons.iter().any(|reason| {
        let capability = reason.capability.as_ref().or(decision.capability.as_ref());
        expect.constraint.is_none_or(|c| c == reason.constraint)
            && expect
                .path
                .as_ref()
                .is_none_or(|p| reason.path.as_deref() == Some(p.as_str()))
            && expect
                .capability
                .as_ref()
                .is_none_or(|c| capability.is_some_and(|got| **got == **c))
    });
    if matches {
        return None;
    }
    let seen: Vec<String> = decision
        .reasons
        .iter()
        .map(|reason| {
            let mut text = reason.constraint.as_str().to_owned();
            if let Some(path) = &reason.path {
                text.push_str(&format!(" at {path}"));
            }
            if let Some(capability) = &reason.capability {
                text.push_str(&format!(" by {capability}"));
            }
            text
        })
        .collect();
    let mut wanted = Expectation {
        verdict: expect.verdict,
        ..expect.clone()
    }
    .to_string();
    if let Some(rest) = wanted.strip_prefix(expect.verdict.as_str()) {
        wanted = rest.trim_start().to_owned();
    }
    Some(format!(
        "no reason is `{wanted}`; reasons: [{}]",
        seen.join("; ")
    ))
}

/// Sets a request field or a member inside one, creating objects on the way; an index may
/// replace an element or append one just past the end.
fn set(request: &mut Map<String, Value>, target: &Target, value: Value) -> Result<(), String> {
    let Some((last, path)) = target.steps.split_last() else {
        request.insert(target.field.clone(), value);
        return Ok(());
    };
    let cannot = |why: String| format!("cannot set `{target}`: {why}");
    let root = request
        .entry(target.field.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    if root.is_null() {
        *root = Value::Object(Map::new());
    }
    let mut node = root;
    for key in path {
        node = match (key, node) {
            (Key::Member(name), Value::Object(map)) => map
                .entry(name.clone())
                .or_insert_with(|| Value::Object(Map::new())),
            (Key::Index(index), Value::Array(items)) => {
                let len = items.len();
                items.get_mut(*index).ok_or_else(|| {
                    cannot(format!("index {index} is past the end ({len} elements)"))
                })?
            }
            (Key::Member(name), other) => {
                return Err(cannot(format!("`{name}` is inside a {}", kind(other))));
            }
            (Key::Index(index), other) => {
                return Err(cannot(format!("[{index}] is inside a {}", kind(other))));
            }
        };
    }
    match (last, node) {
        (Key::Member(name), Value::Object(map)) => {
            map.insert(name.clone(), value);
        }
        (Key::Index(index), Value::Array(items)) => {
            let len = items.len();
            if *index == len {
                items.push(value);
            } else {
                let slot = items.get_mut(*index).ok_or_else(|| {
                    cannot(format!(
                        "index {index} is past the end ({len} elements; {len} appends)"
                    ))
                })?;
                *slot = value;
            }
        }
        (Key::Member(name), other) => {
            return Err(cannot(format!("`{name}` is inside a {}", kind(other))));
        }
        (Key::Index(index), other) => {
            return Err(cannot(format!("[{index}] is inside a {}", kind(other))));
        }
    }
    Ok(())
}

/// Removes a request field or a member; removing something absent is a failure (it usually
/// means the test's defaults changed under it).
fn unset(request: &mut Map<String, Value>, target: &Target) -> Result<(), String> {
    let absent = || format!("cannot unset `{target}`: it is absent");
    let Some((last, path)) = target.steps.split_last() else {
        return request.remove(&target.field).map(drop).ok_or_else(absent);
    };
    let mut node = request.get_mut(&target.field).ok_or_else(absent)?;
    for key in path {
        node = match (key, node) {
            (Key::Member(name), Value::Object(map)) => map.get_mut(name).ok_or_else(absent)?,
            (Key::Index(index), Value::Array(items)) => items.get_mut(*index).ok_or_else(absent)?,
            _ => return Err(absent()),
        };
    }
    match (last, node) {
        (Key::Member(name), Value::Object(map)) => map.remove(name).map(drop).ok_or_else(absent),
        (Key::Index(index), Value::Array(items)) if *index < items.len() => {
            items.remove(*index);
            Ok(())
        }
        _ => Err(absent()),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Runs a session file: each line with `expect`/`expect_constraint` is a test, and so is each
/// line that cannot be run.
fn run_session(
    name: &str,
    reader: impl BufRead,
    policy: &PolicySet,
    limits: Limits,
    report: &mut Report,
) {
    let Some(session) = new_session(policy, limits, name, report) else {
        return;
    };
    let line_failure = |line: usize, message: String| Failure {
        file: name.to_owned(),
        line,
        message,
        ..step_failure(String::new())
    };
    let mut lines = LineReader::new(reader, limits.max_session_line_bytes());
    let mut number = 0usize;
    loop {
        number += 1;
        let raw = match lines.next_line() {
            Ok(None) => break,
            Ok(Some(Line::Complete(raw))) => raw,
            Ok(Some(Line::TooLong)) => {
                let result = session.oversized_line(number);
                report.fail(line_failure(number, could_not_run(&result)));
                continue;
            }
            Err(e) => {
                report.errors.push(TestFileError {
                    file: name.to_owned(),
                    position: Some((number, 1)),
                    message: format!("cannot read `{name}`: {e}"),
                });
                return;
            }
        };
        let line = match capgate::session::line_text(raw) {
            Ok(Some(line)) => line,
            Ok(None) => continue,
            Err(message) => {
                report.fail(line_failure(number, message));
                continue;
            }
        };
        let result = session.run_line(line, number);
        if result.error {
            report.fail(line_failure(number, could_not_run(&result)));
            continue;
        }
        let Ok(decision) = serde_json::from_value::<Decision>(result.output.clone()) else {
            continue; // not a call
        };
        // Read with the session's own depth limit: serde_json's default of 128 refused a line
        // whose payload the session had read, and a line it could not read again counted as
        // no test, so a failed expectation passed (regression).
        let parsed: Value = capgate::engine::parse_json_with_depth(line, limits.parse_depth())
            .unwrap_or(Value::Null);
        let trace = trace(&session, parsed.get("call").cloned().unwrap_or(Value::Null));
        report.coverage.record(&decision, &trace);
        let is_test = parsed.get("expect").is_some() || parsed.get("expect_constraint").is_some();
        if !is_test && !result.failed_expectation {
            continue;
        }
        let expected = session_expectation(&parsed);
        if result.failed_expectation {
            let message = result
                .output
                .get("expectation_failed")
                .and_then(Value::as_str)
                .unwrap_or("the expectation does not hold")
                .to_owned();
            report.fail(Failure {
                file: name.to_owned(),
                line: number,
                case: None,
                expected,
                actual: Some(decision),
                message,
                trace,
            });
        } else {
            report.passed += 1;
        }
    }
}

/// The failure message of a session line that could not run.
fn could_not_run(result: &LineResult) -> String {
    let message = result.output.get("error").and_then(Value::as_str);
    format!(
        "the line could not run: {}",
        message.unwrap_or("the line could not run")
    )
}

/// A session line's `expect`/`expect_constraint` as an [`Expectation`] (the verdict defaults to
/// deny when only a constraint is given, which is how a session line reads).
fn session_expectation(line: &Value) -> Option<Expectation> {
    let verdict = line
        .get("expect")
        .and_then(Value::as_str)
        .and_then(super::format::verdict);
    let constraint = line
        .get("expect_constraint")
        .and_then(Value::as_str)
        .and_then(super::format::reason_kind);
    if verdict.is_none() && constraint.is_none() {
        return None;
    }
    Some(Expectation {
        verdict: verdict.unwrap_or(Verdict::Deny),
        constraint,
        path: None,
        capability: None,
    })
}
