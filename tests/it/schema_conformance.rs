//! Runs the official JSON Schema Test Suite (draft 2020-12 and its format-assertion files)
//! against the `payloadSchema` engine.
//!
//! Every group whose schema compiles must give the suite's expected answer on every case. A
//! group may be skipped only when *all* of its compile errors are on the allowlist below
//! (keywords outside the SPEC §2.6 subset, non-local `$ref`s, anchors, nested `$id`); any
//! other compile failure is a test failure, so a compiler bug cannot hide as a skip.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use capgate::compile::schema::{SchemaCompileError, compile_schema};
use capgate::tape::Tape;
use capgate::vm::schema::{first_violation, is_valid};
use serde_json::Value;

/// Keywords the suite uses that are deliberately outside the subset.
const KEYWORDS_OUTSIDE_SUBSET: [&str; 12] = [
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentSchemas",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "additionalItems",
    "dependencies",
];

/// Why a group is skipped, or `None` if one of its errors is not an allowed reason.
fn skip_reason(errors: &[SchemaCompileError]) -> Option<String> {
    let mut reasons = Vec::new();
    for error in errors {
        let m = &error.message;
        let reason = if let Some(keyword) = KEYWORDS_OUTSIDE_SUBSET
            .iter()
            .find(|k| *m == format!("unsupported payloadSchema keyword `{k}`"))
        {
            format!("keyword `{keyword}` is outside the subset")
        } else if m.starts_with("`$ref` `") && m.ends_with("` is not a local reference") {
            "non-local `$ref` (remote or `$id`-relative)".to_owned()
        } else if m.ends_with("refers to an anchor, which is not supported") {
            "`$ref` to an anchor".to_owned()
        } else if m == "nested `$id` is not supported" {
            "nested `$id` (changes `$ref` resolution)".to_owned()
        } else {
            return None;
        };
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// The JSON Schema test suite: `$CAPGATE_JSON_SCHEMA_SUITE`, by default the copy in the shared
/// folder beside the repository (`../shared/conformance/json-schema-test-suite`).
fn suite() -> Option<PathBuf> {
    crate::common::external_data(
        "CAPGATE_JSON_SCHEMA_SUITE",
        "../shared/conformance/json-schema-test-suite",
        "the JSON Schema test suite",
    )
}

#[derive(Default)]
struct Tally {
    files: usize,
    groups: usize,
    cases_passed: usize,
    skipped: BTreeMap<String, Vec<String>>,
    failures: Vec<String>,
}

fn run_file(path: &Path, tally: &mut Tally) {
    let text = std::fs::read_to_string(path).unwrap();
    let groups: Vec<Value> = serde_json::from_str(&text).unwrap();
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    tally.files += 1;
    for group in groups {
        tally.groups += 1;
        let description = group["description"].as_str().unwrap();
        let tests = group["tests"].as_array().unwrap();
        let program = match compile_schema(&group["schema"]) {
            Ok(program) => program,
            Err(errors) => {
                match skip_reason(&errors) {
                    Some(reason) => tally
                        .skipped
                        .entry(reason)
                        .or_default()
                        .push(format!("{file}: {description} ({} cases)", tests.len())),
                    None => tally.failures.push(format!(
                        "{file}: `{description}`: schema does not compile: {errors:?}"
                    )),
                }
                continue;
            }
        };
        for case in tests {
            let expected = case["valid"].as_bool().unwrap();
            let data = &case["data"];
            let valid = is_valid(&program, data);
            let violation = first_violation(&program, data);
            // The same case from bytes: a request decided by `check_slice` reads its payload
            // from a tape, which must answer as the `Value` does.
            let text = serde_json::to_vec(data).unwrap();
            let mut tape = Tape::new();
            let doc = tape.parse(&text, 512).unwrap();
            let (tape_valid, tape_violation) = (
                is_valid(&program, doc.root()),
                first_violation(&program, doc.root()),
            );
            if (tape_valid, tape_violation.is_some()) != (valid, violation.is_some()) {
                tally.failures.push(format!(
                    "{file}: `{description}` / `{}`: from bytes valid={tape_valid}, pre-parsed \
                     valid={valid}",
                    case["description"].as_str().unwrap()
                ));
            }
            if valid != expected {
                tally.failures.push(format!(
                    "{file}: `{description}` / `{}`: expected valid={expected}, got {valid} \
                     (violation: {violation:?})",
                    case["description"].as_str().unwrap()
                ));
            } else if violation.is_some() == valid {
                tally.failures.push(format!(
                    "{file}: `{description}` / `{}`: first_violation disagrees with is_valid",
                    case["description"].as_str().unwrap()
                ));
            } else {
                tally.cases_passed += 1;
            }
        }
    }
}

#[test]
fn official_suite_passes_for_every_supported_keyword() {
    let Some(suite) = suite() else {
        return;
    };
    let mut tally = Tally::default();
    for dir in ["draft2020-12", "draft2020-12-format"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(suite.join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no test files in {dir}");
        for file in files {
            run_file(&file, &mut tally);
        }
    }
    let skipped_groups: usize = tally.skipped.values().map(Vec::len).sum();
    println!(
        "json-schema-test-suite: {} files, {} groups, {} cases passed, {} groups skipped",
        tally.files, tally.groups, tally.cases_passed, skipped_groups
    );
    for (reason, groups) in &tally.skipped {
        println!("skipped ({reason}): {} groups", groups.len());
        for group in groups {
            println!("    {group}");
        }
    }
    assert!(
        tally.failures.is_empty(),
        "{} failures:\n{}",
        tally.failures.len(),
        tally.failures.join("\n")
    );
}
