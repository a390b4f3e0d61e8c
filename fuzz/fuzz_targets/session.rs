//! The stateful engine through replay sessions: fuzzed bytes are the lines of a session
//! (`time`, `advance`, `call`, `grant`, `revoke`, `approve`, transactions, `expect`) run on a
//! fresh `Session` over `../policies` — rate limits, grants, transactions, revocation and a
//! clock that may go back. Never panics, and:
//! - every line gives one result whose JSON text parses to the same object as its `output`,
//!   with its line number, and a non-empty text form;
//! - a line is an error or a decision (`decision` set), never both;
//! - the same session run again on a second fresh session gives the same results: nothing in a
//!   session's answers depends on the store's randomly keyed hashes (inputs are capped at 64
//!   lines, far too few to bring a store shard to the 32 keys at which it starts forgetting idle
//!   keys, the one place where a clock set back may see hash order).
#![no_main]

use std::sync::OnceLock;

use capgate::{LineResult, PolicySet, Session, SessionOptions};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// How many lines of one input the target reads (the rest is ignored), so one input stays fast.
const LINES_PER_INPUT: usize = 64;

fn policy() -> &'static PolicySet {
    static POLICY: OnceLock<PolicySet> = OnceLock::new();
    POLICY.get_or_init(|| {
        capgate_fuzz::corpus_loader()
            .finish()
            .unwrap_or_else(|e| panic!("the policy corpus does not load: {:?}", e.diagnostics))
    })
}

/// Runs the lines as `capgate replay` does (a trailing `\r` dropped, blank lines skipped,
/// bytes that are not UTF-8 an error line; only that error's wording differs).
fn run(lines: &[&[u8]]) -> Vec<LineResult> {
    let session = Session::new(policy().clone(), SessionOptions::default())
        .unwrap_or_else(|e| panic!("the default limits are refused: {e}"));
    let mut results = Vec::new();
    for (index, raw) in lines.iter().enumerate() {
        let number = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let result = match std::str::from_utf8(raw) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => session.run_line(line, number),
            Err(e) => session.error_line(number, format!("not UTF-8: {e}")),
        };
        results.push((number, result));
    }
    results
        .into_iter()
        .map(|(number, result)| {
            check_result(&result, number);
            result
        })
        .collect()
}

fn check_result(result: &LineResult, number: usize) {
    let parsed: Value = serde_json::from_str(&result.json)
        .unwrap_or_else(|e| panic!("line {number}: the JSON form does not parse: {e}"));
    assert_eq!(
        parsed, result.output,
        "line {number}: the JSON text and the output object differ"
    );
    assert_eq!(
        result.output.get("line").and_then(Value::as_u64),
        Some(number as u64),
        "line {number}: {}",
        result.json
    );
    assert!(!result.text.is_empty(), "line {number}: empty text form");
    let decided = result.output.get("decision").is_some();
    assert!(
        !(decided && result.error),
        "line {number}: both a decision and an error: {}",
        result.json
    );
    if result.error {
        assert!(
            result.output.get("error").and_then(Value::as_str).is_some(),
            "line {number}: an error line without its message: {}",
            result.json
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let lines: Vec<&[u8]> = data
        .split(|&byte| byte == b'\n')
        .take(LINES_PER_INPUT)
        .collect();
    let first = run(&lines);
    let second = run(&lines);
    assert_eq!(first, second, "the same session answered differently twice");
});
