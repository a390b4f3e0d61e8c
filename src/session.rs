//! Sessions: JSON Lines scripts of clock moves, transactions, grants, revocations, approvals and
//! calls, run on one stateful engine with a simulated clock (SPEC §8). `capgate replay`,
//! `capgate test` and the policy tests under `cargo test` all run sessions through [`Session`].

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::engine::{AuditSink, Engine, EngineError, PolicySet, parse_json_with_depth};
use crate::limits::Limits;
use crate::runtime::{InMemoryStore, SimulatedClock};
use crate::time::parse_duration;
use crate::time::parse_timestamp;

/// How a session's engine is built.
#[derive(Debug, Default)]
pub struct SessionOptions {
    /// Observe mode.
    pub observe: bool,
    /// Where audit records go.
    pub audit: Option<Arc<dyn AuditSink>>,
    /// The engine's limits (default: [`Limits::DEFAULT`]).
    pub limits: Option<Limits>,
}

/// A stateful engine with a simulated clock that starts at the Unix epoch.
#[derive(Debug)]
pub struct Session {
    engine: Engine,
    clock: Arc<SimulatedClock>,
    limits: Limits,
}

impl Session {
    /// Builds a session around a loaded policy.
    ///
    /// # Errors
    /// [`EngineError::Limits`] if `options.limits` sets a field above its fixed bound.
    pub fn new(policy: PolicySet, options: SessionOptions) -> Result<Self, EngineError> {
        let limits = options.limits.unwrap_or_default();
        let clock = Arc::new(SimulatedClock::new(chrono::DateTime::UNIX_EPOCH));
        let mut builder = Engine::builder(policy)
            .limits(limits)?
            .clock(clock.clone())
            .state(Arc::new(InMemoryStore::new()))
            .observe(options.observe);
        if let Some(audit) = options.audit {
            builder = builder.audit(audit);
        }
        Ok(Session {
            engine: builder.build(),
            clock,
            limits,
        })
    }

    /// The session's engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Runs one line (1-based `number`, used in the output). A line longer than
    /// [`Limits::max_session_line_bytes`] is an error line, and is not read as JSON.
    pub fn run_line(&self, line: &str, number: usize) -> LineResult {
        if line.len() > self.limits.max_session_line_bytes() {
            return self.oversized_line(number);
        }
        run_line(&self.engine, &self.clock, line, number, &self.limits)
    }

    /// The result of a line that could not be run.
    pub fn error_line(&self, number: usize, message: String) -> LineResult {
        error_line(number, message)
    }

    /// The error line for a line longer than [`Limits::max_session_line_bytes`], which a
    /// reader ([`crate::bounded::LineReader`]) dropped without holding it.
    pub fn oversized_line(&self, number: usize) -> LineResult {
        let error = crate::bounded::ReadError::TooLarge {
            what: "the line".to_owned(),
            limit: crate::bounded::ByteLimit::session_line(&self.limits),
        };
        error_line(number, error.to_string())
    }

    /// Runs every non-blank line of a session text.
    pub fn run_text(&self, text: &str) -> Vec<LineResult> {
        text.lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(index, line)| self.run_line(line, index + 1))
            .collect()
    }
}

/// What one session line produced.
#[derive(Debug, Clone, PartialEq)]
pub struct LineResult {
    /// The JSON object for the line (SPEC §8), for programs.
    pub output: Value,
    /// The same object as one line of JSON text with its keys in the documented order
    /// (`decision`, `skill`, `capability`, …, `line`), as `capgate replay` prints it.
    pub json: String,
    /// The same for people.
    pub text: String,
    /// An `expect`/`expect_constraint` did not hold.
    pub failed_expectation: bool,
    /// The line could not be run (malformed, or the operation was refused).
    pub error: bool,
}

/// A session line's bytes as read ([`crate::bounded::LineReader`]) as text: without a final
/// `\r`, `Ok(None)` for a blank line (which is not run), or the message for bytes that are not
/// UTF-8 (an error for that line only).
pub fn line_text(raw: &[u8]) -> Result<Option<&str>, String> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    match std::str::from_utf8(raw) {
        Ok(line) if line.trim().is_empty() => Ok(None),
        Ok(line) => Ok(Some(line)),
        Err(e) => Err(format!(
            "the line is not UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        )),
    }
}

fn error_line(number: usize, message: String) -> LineResult {
    let quoted = crate::value::to_json_line(&message).unwrap_or_else(|_| "\"\"".to_owned());
    LineResult {
        text: format!(
            "line {number}: error: {}\n",
            crate::value::escape_controls(&message)
        ),
        json: format!(r#"{{"line":{number},"error":{quoted}}}"#),
        output: json!({ "line": number, "error": message }),
        failed_expectation: false,
        error: true,
    }
}

fn ok_line(number: usize, what: String) -> LineResult {
    LineResult {
        // `what` echoes session text (a transaction, a skill): escaped, one line.
        text: format!("line {number}: {}\n", crate::value::escape_controls(&what)),
        json: format!(r#"{{"line":{number},"ok":true}}"#),
        output: json!({ "line": number, "ok": true }),
        failed_expectation: false,
        error: false,
    }
}

fn string_field<'a>(object: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    object
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` must be a string"))
}

fn only_keys(object: &Map<String, Value>, allowed: &[&str]) -> Result<(), String> {
    match object.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(format!("unexpected key `{key}`")),
        None => Ok(()),
    }
}

const COMMANDS: [&str; 8] = [
    "time",
    "advance",
    "begin_transaction",
    "end_transaction",
    "grant",
    "revoke",
    "approve",
    "call",
];

/// The text of a line's `call` member as written. The line has already been read whole, with a
/// depth limit, so reading it again without one cannot recurse deeply.
fn call_text(line: &str) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        call: Option<&'a serde_json::value::RawValue>,
    }
    let mut deserializer = serde_json::Deserializer::from_str(line);
    deserializer.disable_recursion_limit();
    let parsed: Line<'_> = serde::Deserialize::deserialize(&mut deserializer).ok()?;
    parsed.call.map(serde_json::value::RawValue::get)
}

fn run_line(
    engine: &Engine,
    clock: &SimulatedClock,
    line: &str,
    number: usize,
    limits: &Limits,
) -> LineResult {
    // Room for the line object and the `call` object around a payload at the depth limit.
    let value = match parse_json_with_depth(line, limits.parse_depth()) {
        Ok(value) => value,
        Err(e) => return error_line(number, format!("malformed JSON: {e}")),
    };
    let Value::Object(object) = value else {
        return error_line(number, "a session line must be a JSON object".to_owned());
    };
    let present: Vec<&str> = COMMANDS
        .iter()
        .copied()
        .filter(|c| object.contains_key(*c))
        .collect();
    let command = match present.as_slice() {
        [one] => *one,
        [] => {
            return error_line(number, format!("expected one of {}", COMMANDS.join(", ")));
        }
        _ => {
            return error_line(
                number,
                format!(
                    "a line must have exactly one command, found {}",
                    present.join(", ")
                ),
            );
        }
    };
    let result = match command {
        "time" => only_keys(&object, &["time"]).and_then(|()| {
            let text = string_field(&object, "time")?;
            let time = parse_timestamp(text)
                .ok_or_else(|| format!("`{text}` is not an RFC 3339 timestamp"))?;
            clock.set(time);
            Ok(format!("time {}", time.to_rfc3339()))
        }),
        "advance" => only_keys(&object, &["advance"]).and_then(|()| {
            let text = string_field(&object, "advance")?;
            let duration = parse_duration(text)?;
            let now = clock
                .advance(duration)
                .map_err(|e| format!("cannot advance the clock: {e}"))?;
            Ok(format!("time {}", now.to_rfc3339()))
        }),
        "begin_transaction" => only_keys(&object, &["begin_transaction"]).and_then(|()| {
            let tx = string_field(&object, "begin_transaction")?;
            engine.begin_transaction(tx).map_err(|e| e.to_string())?;
            Ok(format!("begin transaction `{tx}`"))
        }),
        "end_transaction" => only_keys(&object, &["end_transaction"]).and_then(|()| {
            let tx = string_field(&object, "end_transaction")?;
            engine.end_transaction(tx).map_err(|e| e.to_string())?;
            Ok(format!("end transaction `{tx}`"))
        }),
        "grant" => only_keys(&object, &["grant", "id"]).and_then(|()| grant(engine, &object)),
        "revoke" => only_keys(&object, &["revoke"]).and_then(|()| revoke(engine, &object)),
        "approve" => only_keys(&object, &["approve"]).and_then(|()| {
            let target = object
                .get("approve")
                .and_then(Value::as_object)
                .ok_or("`approve` must be an object like {\"skill\": \"s\"}")?;
            only_keys(target, &["skill"])?;
            let skill = string_field(target, "skill")?;
            engine.approve(skill).map_err(|e| e.to_string())?;
            Ok(format!("approve skill `{skill}`"))
        }),
        _ => {
            // The size of the `call` text as written: within the limit the whole line bounds
            // it, so only a line over the limit is read a second time to measure its `call`.
            let text_size = if line.len() <= engine.limits().max_request_bytes {
                Some(line.len())
            } else {
                call_text(line).map(str::len)
            };
            return call(engine, clock, &object, text_size, number);
        }
    };
    match result {
        Ok(what) => ok_line(number, what),
        Err(message) => error_line(number, message),
    }
}

fn grant(engine: &Engine, object: &Map<String, Value>) -> Result<String, String> {
    let target = object
        .get("grant")
        .and_then(Value::as_object)
        .ok_or("`grant` must be an object with `skill` and `capability`")?;
    only_keys(target, &["skill", "capability", "transaction"])?;
    let skill = string_field(target, "skill")?;
    let capability = string_field(target, "capability")?;
    let transaction = match target.get("transaction") {
        None => None,
        Some(Value::String(tx)) => Some(tx.as_str()),
        Some(_) => return Err("`transaction` must be a string".to_owned()),
    };
    let id = match object.get("id") {
        None => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(_) => return Err("`id` must be a string".to_owned()),
    };
    let token = engine
        .issue_grant(skill, capability, transaction, id)
        .map_err(|e| e.to_string())?;
    Ok(format!("grant `{token}` for `{skill}`/`{capability}`"))
}

fn revoke(engine: &Engine, object: &Map<String, Value>) -> Result<String, String> {
    let target = object
        .get("revoke")
        .and_then(Value::as_object)
        .ok_or("`revoke` must be an object")?;
    only_keys(target, &["grant", "skill", "capability"])?;
    match (
        target.get("grant"),
        target.get("skill"),
        target.get("capability"),
    ) {
        (Some(_), None, None) => {
            let token = string_field(target, "grant")?;
            engine.revoke_grant(token).map_err(|e| e.to_string())?;
            Ok(format!("revoke grant `{token}`"))
        }
        (None, Some(_), None) => {
            let skill = string_field(target, "skill")?;
            engine.revoke_skill(skill).map_err(|e| e.to_string())?;
            Ok(format!("revoke skill `{skill}`"))
        }
        (None, Some(_), Some(_)) => {
            let skill = string_field(target, "skill")?;
            let capability = string_field(target, "capability")?;
            engine
                .revoke_capability(skill, capability)
                .map_err(|e| e.to_string())?;
            Ok(format!("revoke capability `{skill}`/`{capability}`"))
        }
        _ => {
            Err("`revoke` takes {\"grant\"}, {\"skill\"} or {\"skill\", \"capability\"}".to_owned())
        }
    }
}

fn call(
    engine: &Engine,
    clock: &SimulatedClock,
    object: &Map<String, Value>,
    text_size: Option<usize>,
    number: usize,
) -> LineResult {
    if let Err(e) = only_keys(object, &["call", "expect", "expect_constraint"]) {
        return error_line(number, e);
    }
    let expect = match object.get("expect") {
        None => None,
        Some(Value::String(s)) if ["allow", "deny", "approval_required"].contains(&s.as_str()) => {
            Some(s.as_str())
        }
        Some(_) => {
            return error_line(
                number,
                "`expect` must be \"allow\", \"deny\" or \"approval_required\"".to_owned(),
            );
        }
    };
    let expect_constraint = match object.get("expect_constraint") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return error_line(number, "`expect_constraint` must be a string".to_owned()),
    };
    let request_value = object.get("call").cloned().unwrap_or(Value::Null);
    // A call's own `time` moves the session clock (SPEC §5.4), even when the request is
    // otherwise malformed and denied. A `null` time is absent, and one that is not a timestamp
    // is the request's problem: the engine denies it with reason `input`, as it would from
    // `check` (regression: both were error lines, and `replay` exited 2).
    if let Some(t) = request_value
        .get("time")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
    {
        clock.set(t);
    }
    // A request that is not valid is denied with reason `input` (SPEC §4), not an error line.
    // The size limit counts the request's text as written on the line, as a gateway counts the
    // bytes it receives (regression: a session allowed a 2 MiB request that `check` refuses;
    // measuring the value written back disagreed with the bytes both ways, `1e5` being longer
    // and `\u00e9` shorter). Deciding those bytes with `check_slice` instead gave messages
    // positioned inside the `call` member and lost the skill of an over-limit request.
    let decision = engine.check_value_measured(request_value, text_size);
    let mut output = match serde_json::to_value(&decision) {
        Ok(Value::Object(map)) => map,
        _ => return error_line(number, "cannot print the decision".to_owned()),
    };
    output.insert("line".to_owned(), json!(number));
    let actual = decision.effective().as_str();
    let mut problems = Vec::new();
    if let Some(expected) = expect
        && expected != actual
    {
        problems.push(format!(
            "expected {}, got {actual}",
            crate::value::truncate_str(expected, 64)
        ));
    }
    if let Some(expected) = expect_constraint
        && !decision
            .reasons
            .iter()
            .any(|r| r.constraint.as_str() == expected)
    {
        let seen: Vec<&str> = decision
            .reasons
            .iter()
            .map(|r| r.constraint.as_str())
            .collect();
        problems.push(format!(
            "expected a `{expected}` reason, got [{}]",
            seen.join(", ")
        ));
    }
    let failed_expectation = !problems.is_empty();
    if failed_expectation {
        output.insert("expectation_failed".to_owned(), json!(problems.join("; ")));
    }
    let mut text = format!("line {number}: {}", decision.to_text());
    if failed_expectation {
        text.push_str(&format!("  EXPECTATION FAILED: {}\n", problems.join("; ")));
    }
    // The decision's own field order, then `line` (and the failed expectation).
    let mut json = crate::value::to_json_line(&decision).unwrap_or_else(|_| "{}".to_owned());
    if json.ends_with('}') {
        json.pop();
        let comma = if json.len() > 1 { "," } else { "" };
        json.push_str(&format!(r#"{comma}"line":{number}"#));
        if failed_expectation {
            let problems = crate::value::to_json_line(&problems.join("; ")).unwrap_or_default();
            json.push_str(&format!(r#","expectation_failed":{problems}"#));
        }
        json.push('}');
    }
    LineResult {
        output: Value::Object(output),
        json,
        text,
        failed_expectation,
        error: false,
    }
}
