//! The tooling subcommands through the binary: `fmt`, `lint`, `convert`, `disasm`,
//! `--error-format`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn temp_dir() -> PathBuf {
    common::temp_dir("tooling")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    common::write(dir, name, text).to_str().unwrap().to_owned()
}

use common::run as capgate;

fn code(output: &Output) -> i32 {
    output.status.code().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

const CRAMPED: &str = "skill \"s\"{version \"1\" risk low\ncapability \"c\"{resource http \"https://api.example.com/v1\" operations GET // reads\njustification \"Reads the items of the current organization.\"}}\n";

const FORMATTED: &str = "skill \"s\" {\n  version \"1\"\n  risk low\n  capability \"c\" {\n    resource http \"https://api.example.com/v1\"\n    operations GET // reads\n    justification \"Reads the items of the current organization.\"\n  }\n}\n";

const NOISY: &str = "skill \"n\" {\n  version \"1\"\n  capability \"w\" {\n    resource http \"https://*.example.com/v1\"\n    operations POST\n    lifetime process\n    justification \"needed\"\n  }\n}\n";

#[test]
fn fmt_check_exits_1_and_names_a_file_that_would_change() {
    let dir = temp_dir();
    let path = write(&dir, "p.cap", CRAMPED);
    let output = capgate(&["fmt", "--check", &path]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert!(stdout(&output).contains("p.cap"), "{}", stdout(&output));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        CRAMPED,
        "--check never writes"
    );
}

#[test]
fn fmt_rewrites_in_place_and_then_check_passes() {
    let dir = temp_dir();
    let path = write(&dir, "p.cap", CRAMPED);
    let output = capgate(&["fmt", &path]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), FORMATTED);
    let output = capgate(&["fmt", "--check", &path]);
    assert_eq!(code(&output), 0, "{}", stdout(&output));
}

/// `capgate fmt DIR` walks as the loader does: each directory once, so a link back to `.`
/// neither loops nor names a file twice.
#[cfg(unix)]
#[test]
fn fmt_of_a_directory_visits_each_file_once_through_symlinks() {
    let dir = temp_dir();
    write(&dir, "p.cap", CRAMPED);
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    let output = capgate(&["fmt", "--check", dir.to_str().unwrap()]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert_eq!(
        stdout(&output).matches("would reformat").count(),
        1,
        "{}",
        stdout(&output)
    );
}

#[test]
fn fmt_refuses_an_invalid_policy_with_exit_2_and_leaves_it_alone() {
    let dir = temp_dir();
    let text = "skill \"s\" { versoin \"1\" }\n";
    let path = write(&dir, "bad.cap", text);
    let output = capgate(&["fmt", &path]);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("did you mean `version`?"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn fmt_of_a_missing_file_exits_2() {
    let dir = temp_dir();
    let missing = dir.join("missing.cap");
    let output = capgate(&["fmt", missing.to_str().unwrap()]);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("missing.cap"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn lint_warns_with_codes_and_exits_0() {
    let dir = temp_dir();
    let path = write(&dir, "n.cap", NOISY);
    let output = capgate(&["lint", &path]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let err = stderr(&output);
    for code in ["CG001", "CG002", "CG003", "CG004", "CG007"] {
        assert!(err.contains(code), "{code} missing from {err}");
    }
}

/// Reviewers approve what they see: a bidirectional control written raw in a string literal
/// (of a `.cap` file or a JSON manifest) is a lint error, CG011, without `--deny warnings`; the
/// same character written as an escape is not.
#[test]
fn a_bidi_control_in_a_string_is_a_lint_error() {
    let dir = temp_dir();
    let raw = FORMATTED.replace("current organization", "current \u{202e}organization");
    let cap = write(&dir, "b.cap", &raw);
    let output = capgate(&["lint", &cap]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert!(stderr(&output).contains("CG011"), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("error: 1 lint error"),
        "{}",
        stderr(&output)
    );
    let json = r#"{"skill": {"name": "s", "version": "1"}, "risk": "low", "capabilities": [{"name": "c",
        "resource": "https://api.example.com/v1", "operations": ["GET"],
        "justification": "Reads the items of the current \u202e organization."}]}"#;
    let escaped = write(&dir, "e.json", json);
    let output = capgate(&["lint", &escaped]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let raw_json = write(&dir, "r.json", &json.replace("\\u202e", "\u{202e}"));
    let output = capgate(&["--error-format", "json", "lint", &raw_json]);
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(report["code"], "CG011");
    assert_eq!(report["severity"], "error");
}

#[test]
fn lint_deny_warnings_exits_1_on_a_warning_and_0_without() {
    let dir = temp_dir();
    let noisy = write(&dir, "n.cap", NOISY);
    assert_eq!(code(&capgate(&["lint", "--deny", "warnings", &noisy])), 1);
    let clean = write(&dir, "c.cap", FORMATTED);
    let output = capgate(&["lint", "--deny", "warnings", &clean]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
}

#[test]
fn lint_of_an_invalid_or_missing_policy_exits_2() {
    let dir = temp_dir();
    let bad = write(
        &dir,
        "bad.cap",
        "skill \"s\" { version \"1\" capability \"c\" { resource http \"https://a.example.com/\" operations Post } }",
    );
    let output = capgate(&["lint", &bad]);
    assert_eq!(code(&output), 2);
    assert!(
        stderr(&output).contains("did you mean `POST`?"),
        "{}",
        stderr(&output)
    );
    let missing = dir.join("missing.cap");
    assert_eq!(code(&capgate(&["lint", missing.to_str().unwrap()])), 2);
}

#[test]
fn lint_json_format_prints_one_object_per_warning() {
    let dir = temp_dir();
    let path = write(&dir, "n.cap", NOISY);
    let output = capgate(&["--error-format", "json", "lint", &path]);
    assert_eq!(code(&output), 0);
    let lines: Vec<Value> = stdout(&output)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 5, "{}", stdout(&output));
    let wildcard = lines.iter().find(|l| l["code"] == "CG001").unwrap();
    assert_eq!(wildcard["severity"], "warning");
    assert_eq!(wildcard["line"], 4);
    assert_eq!(wildcard["column"], 5);
    assert_eq!(wildcard["end_line"], 4);
    assert!(wildcard["help"].is_string());
    assert!(wildcard["file"].as_str().unwrap().ends_with("n.cap"));
}

#[test]
fn load_errors_in_json_format_carry_positions_and_help() {
    let dir = temp_dir();
    let path = write(
        &dir,
        "bad.json",
        r#"{"skill": {"name": "s", "version": "1"}, "capabilities": [{"name": "c", "resource": "https://a.example.com/", "operations": ["GET"], "constraints": [{"type": "fieldEquals", "field": "payloads.x", "value": 1}]}]}"#,
    );
    let output = capgate(&["--error-format", "json", "lint", &path]);
    assert_eq!(code(&output), 2);
    let first: Value = serde_json::from_str(stdout(&output).lines().next().unwrap()).unwrap();
    assert_eq!(first["severity"], "error");
    assert_eq!(first["line"], 1);
    assert_eq!(first["help"], "did you mean `payload`?");
}

#[test]
fn human_load_errors_show_a_snippet_and_every_error() {
    let dir = temp_dir();
    let path = write(
        &dir,
        "two.cap",
        "skill \"s\" {\n  version \"1\"\n  risk 101\n  capability \"c\" { resource tool \"t\" operations frobnicate }\n}\n",
    );
    let output = capgate(&["lint", &path]);
    assert_eq!(code(&output), 2);
    let err = stderr(&output);
    assert!(err.contains("two.cap:3:"), "{err}");
    assert!(err.contains("two.cap:4:"), "{err}");
    assert!(
        err.contains("risk 101"),
        "the snippet shows the line: {err}"
    );
    assert!(err.contains("policy rejected: 3 errors"), "{err}");
}

#[test]
fn convert_cap_to_json_and_back_prints_loadable_policies() {
    let dir = temp_dir();
    let cap = write(&dir, "p.cap", FORMATTED);
    let output = capgate(&["convert", "--to", "json", &cap]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["skill"]["name"], "s");
    let json_path = write(&dir, "p.json", &stdout(&output));
    let output = capgate(&["convert", "--to", "cap", &json_path]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("skill \"s\" {\n"),
        "{}",
        stdout(&output)
    );
    let back = write(&dir, "back.cap", &stdout(&output));
    assert_eq!(
        code(&capgate(&["fmt", "--check", &back])),
        0,
        "printed text is formatted"
    );
}

#[test]
fn convert_of_an_invalid_or_missing_policy_exits_2() {
    let dir = temp_dir();
    let bad = write(&dir, "bad.cap", "skill \"s\" {");
    assert_eq!(code(&capgate(&["convert", "--to", "json", &bad])), 2);
    let missing = dir.join("missing.json");
    assert_eq!(
        code(&capgate(&[
            "convert",
            "--to",
            "cap",
            missing.to_str().unwrap()
        ])),
        2
    );
    let bad_target = capgate(&["convert", "--to", "yaml", &bad]);
    assert_eq!(code(&bad_target), 2);
}

#[test]
fn convert_refuses_a_file_with_two_skills_as_json() {
    let dir = temp_dir();
    let two = format!("{FORMATTED}{}", FORMATTED.replace("\"s\"", "\"t\""));
    let path = write(&dir, "two.cap", &two);
    let output = capgate(&["convert", "--to", "json", &path]);
    assert_eq!(code(&output), 2, "{}", stdout(&output));
}

/// Found in review: a manifest regex holding a line break in extended mode, `(?x)a<LF>b`, was
/// written to `.cap` as `/(?x)a\nb/`; there `\n` matches a line break where the real one was
/// ignored, so `ab` went from allowed to denied and `a<LF>b` from denied to allowed. `convert`
/// refuses a regex `.cap` cannot hold, and only that: comparing the output, read back, with the
/// input would refuse the shapes the printer rewrites to the same meaning — an escaped `\/`, an
/// empty regex, a three-bound `fieldRange` — which convert.
#[test]
fn regression_convert_refuses_a_regex_cap_cannot_hold_and_only_that() {
    let dir = temp_dir();
    let manifest = |constraint: &str| {
        format!(
            r#"{{
  "skill": {{"name": "s", "version": "1"}},
  "capabilities": [{{
    "name": "c", "resource": "tool:t", "operations": ["call"],
    "justification": "Regression.",
    "constraints": [{constraint}]
  }}]
}}"#
        )
    };
    let path = write(
        &dir,
        "x.json",
        &manifest(r#"{"type": "fieldMatches", "field": "payload.s", "pattern": "(?x)a\nb"}"#),
    );
    let output = capgate(&["convert", "--to", "cap", &path]);
    assert_eq!(code(&output), 2, "{}", stdout(&output));
    assert!(stdout(&output).is_empty(), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("holds a line break"),
        "{}",
        stderr(&output)
    );
    for (name, constraint) in [
        (
            "space.json",
            r#"{"type": "fieldMatches", "field": "payload.s", "pattern": "(?x)a b"}"#,
        ),
        (
            "slash.json",
            r#"{"type": "fieldMatches", "field": "payload.s", "pattern": "a\/b"}"#,
        ),
        (
            "empty.json",
            r#"{"type": "fieldMatches", "field": "payload.s", "pattern": ""}"#,
        ),
        (
            "range.json",
            r#"{"type": "fieldRange", "field": "payload.n", "min": 1, "max": 10, "exclusiveMax": 9}"#,
        ),
        // Regression: written as `1e+20`, which the grammar reads as the duration `1e`; the
        // output must load back.
        (
            "big.json",
            r#"{"type": "fieldRange", "field": "payload.n", "max": 1e20}"#,
        ),
    ] {
        let path = write(&dir, name, &manifest(constraint));
        let output = capgate(&["convert", "--to", "cap", &path]);
        assert_eq!(code(&output), 0, "{name}: {}", stderr(&output));
        let cap = write(&dir, &format!("{name}.cap"), &stdout(&output));
        let loaded = capgate(&["lint", &cap]);
        assert_eq!(code(&loaded), 0, "{name}: {}", stderr(&loaded));
    }
}

/// Found in review: each human-format report re-read the file from the start to find its line,
/// so 8,000 errors on a 112 KB file took 26 s to print (JSON: 0.3 s). The human format prints
/// the first `HUMAN_REPORTS_SHOWN` (50) and counts the rest; JSON prints all.
#[test]
fn regression_human_reports_stop_at_fifty_and_count_the_rest() {
    let dir = temp_dir();
    let text = format!(
        "skill \"s\" {{\n{}  capability \"c\" {{\n    resource tool \"t\"\n    operations call\n    justification \"Regression.\"\n  }}\n}}\n",
        "  version \"1\"\n".repeat(201)
    );
    let path = write(&dir, "many.cap", &text);
    let human = capgate(&["lint", &path]);
    assert_eq!(code(&human), 2, "{}", stderr(&human));
    let err = stderr(&human);
    assert_eq!(err.matches("duplicate").count(), 50, "{err}");
    assert!(
        err.contains(
            "… and 150 more (the first 50 are shown; `--error-format json` prints all 200)"
        ),
        "{err}"
    );
    let json = capgate(&["--error-format", "json", "lint", &path]);
    assert_eq!(stdout(&json).lines().count(), 200, "{}", stdout(&json));
}

/// `capgate disasm` says, after each capability's code, how the VM answers each check before it
/// runs the program: the peers scenario's four checks each have a shape the plan reads itself.
#[test]
fn disasm_prints_each_capabilitys_plan() {
    let scenario = Path::new(crate::common::REPO).join("benches/peers/scenario.cap");
    let output = capgate(&["disasm", scenario.to_str().unwrap()]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert!(
        stdout(&output)
            .contains("plan: check0 plain, check1 plain, check2 each [*], check3 flat schema\n"),
        "{}",
        stdout(&output)
    );
}
