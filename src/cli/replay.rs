//! `capgate replay`: run a JSON Lines session on one stateful engine with a simulated clock.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::{Map, Value, json};

use capgate::{
    Engine, InMemoryStore, JsonLinesAudit, Limits, Request, SimulatedClock, parse_duration,
    parse_strict_json, parse_timestamp,
};

use super::output::decision_text;
use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK, Format, load_policies};

/// Arguments of `capgate replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Policy files (.cap, .json) or directories.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The session file (JSON Lines). May also come last after `-p`, as in
    /// `capgate replay -p POLICY... SESSION.jsonl` (SPEC §8).
    session: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// Observe mode: return allow, reporting what would have been enforced.
    #[arg(long)]
    observe: bool,
    /// Append one audit record per decision to this file (JSON Lines).
    #[arg(long)]
    audit: Option<PathBuf>,
}

/// What one session line produced.
struct LineResult {
    output: Value,
    text: String,
    failed_expectation: bool,
    error: bool,
}

/// Runs `capgate replay`.
pub fn run(mut args: ReplayArgs) -> u8 {
    let limits = Limits::DEFAULT;
    // `-p` takes one or more values, so in `replay -p POLICY... SESSION.jsonl` clap hands the
    // session to `-p` as its last value: take it back (regression: the documented form failed
    // with "required arguments were not provided").
    let session_path = match args.session.take() {
        Some(path) => path,
        None if args.policies.len() >= 2 => match args.policies.pop() {
            Some(path) => path,
            None => return EXIT_INPUT,
        },
        None => {
            eprintln!(
                "error: missing the session file: `capgate replay -p POLICY... SESSION.jsonl`"
            );
            return EXIT_INPUT;
        }
    };
    let policy = match load_policies(&args.policies, limits) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    // Read bytes, not a `String`: a line that is not UTF-8 is an error for that line only
    // (SPEC §8), not for the whole session.
    let session = match std::fs::read(&session_path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!(
                "error: cannot read session `{}`: {e}",
                session_path.display()
            );
            return EXIT_INPUT;
        }
    };
    let clock = Arc::new(SimulatedClock::new(chrono::DateTime::UNIX_EPOCH));
    let mut builder = Engine::builder(policy)
        .limits(limits)
        .clock(clock.clone())
        .state(Arc::new(InMemoryStore::new()))
        .observe(args.observe);
    if let Some(path) = &args.audit {
        match File::options().create(true).append(true).open(path) {
            Ok(file) => builder = builder.audit(JsonLinesAudit::new(BufWriter::new(file))),
            Err(e) => {
                eprintln!("error: cannot open audit file `{}`: {e}", path.display());
                return EXIT_INPUT;
            }
        }
    }
    let engine = builder.build();
    let mut failed = 0usize;
    let mut errors = 0usize;
    for (index, raw) in session.split(|&byte| byte == b'\n').enumerate() {
        let number = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let result = match std::str::from_utf8(raw) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => run_line(&engine, &clock, line, number, &limits),
            Err(e) => error_line(
                number,
                format!(
                    "the line is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            ),
        };
        failed += usize::from(result.failed_expectation);
        errors += usize::from(result.error);
        match args.format {
            Format::Json => println!("{}", result.output),
            Format::Text => print!("{}", result.text),
        }
    }
    if errors > 0 {
        eprintln!("error: {errors} session line(s) could not be run");
        EXIT_INPUT
    } else if failed > 0 {
        eprintln!("error: {failed} expectation(s) failed");
        EXIT_DENY
    } else {
        EXIT_OK
    }
}

fn error_line(number: usize, message: String) -> LineResult {
    LineResult {
        text: format!("line {number}: error: {message}\n"),
        output: json!({ "line": number, "error": message }),
        failed_expectation: false,
        error: true,
    }
}

fn ok_line(number: usize, what: String) -> LineResult {
    LineResult {
        text: format!("line {number}: {what}\n"),
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

fn run_line(
    engine: &Engine,
    clock: &SimulatedClock,
    line: &str,
    number: usize,
    limits: &Limits,
) -> LineResult {
    let value = match parse_strict_json(line) {
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
        _ => return call(engine, clock, &object, number, limits),
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
    number: usize,
    limits: &Limits,
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
    let request = match Request::from_value(request_value, limits) {
        Ok(request) => request,
        Err(e) => return error_line(number, e.to_string()),
    };
    if let Some(time) = &request.time {
        match parse_timestamp(time) {
            Some(t) => clock.set(t),
            None => {
                return error_line(
                    number,
                    format!("`time` `{time}` is not an RFC 3339 timestamp"),
                );
            }
        }
    }
    let decision = engine.check(&request);
    let mut output = match serde_json::to_value(&decision) {
        Ok(Value::Object(map)) => map,
        _ => return error_line(number, "cannot print the decision".to_owned()),
    };
    output.insert("line".to_owned(), json!(number));
    let actual = decision.effective().as_str();
    let mut problems = Vec::new();
    if let Some(expected) = expect {
        if expected != actual {
            problems.push(format!("expected {expected}, got {actual}"));
        }
    }
    if let Some(expected) = expect_constraint {
        if !decision
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
    }
    let failed_expectation = !problems.is_empty();
    if failed_expectation {
        output.insert("expectation_failed".to_owned(), json!(problems.join("; ")));
    }
    let mut text = format!("line {number}: {}", decision_text(&decision));
    if failed_expectation {
        text.push_str(&format!("  EXPECTATION FAILED: {}\n", problems.join("; ")));
    }
    LineResult {
        output: Value::Object(output),
        text,
        failed_expectation,
        error: false,
    }
}
