//! `capgate test` driven as a binary: exit 0 when every test passes, 1 with each failure's
//! expected/actual/trace when one fails, 2 with `file:line:col` for a malformed test file, and
//! the `--coverage` report. The counts are always alone on the last line of stdout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};

const POLICY: &str = r#"
skill "s" {
  version "1"
  capability "c" {
    resource http "https://api.example.com/items/{id}"
    operations GET
    lifetime process
    justification "reads items"
    fieldEquals resource.id in ["1", "2"]
    fieldMatches payload.note ~ /[a-z]*/
  }
}"#;

const DEFAULTS: &str = "[defaults]
skill = \"s\"
operation = \"GET\"
resource = \"https://api.example.com/items/1\"
payload = {\"note\": \"hi\"}
";

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory holding the policy and one test file.
fn project(test_name: &str, test_text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "capgate-test-cmd-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.cap"), POLICY).unwrap();
    std::fs::write(dir.join(test_name), test_text).unwrap();
    dir
}

fn capgate(args: &[&str], cwd: &Path) -> Output {
    crate::common::capgate()
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn last_line(output: &Output) -> String {
    stdout(output).lines().last().unwrap_or("").to_owned()
}

#[test]
fn passing_tests_exit_zero_with_the_counts_last() {
    let dir = project(
        "s.captest",
        &format!(
            "{DEFAULTS}[case allowed]\nexpect allow by c\n[case other id]\nresource = \"https://api.example.com/items/3\"\nexpect deny fieldEquals at resource.id\n"
        ),
    );
    let output = capgate(&["test", dir.to_str().unwrap()], &dir);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert_eq!(stdout(&output), "2 passed, 0 failed\n");
}

#[test]
fn a_failing_test_exits_one_with_expected_actual_and_trace() {
    let dir = project(
        "s.captest",
        &format!(
            "{DEFAULTS}[case wrong path]\npayload.note = \"HI\"\nexpect deny fieldMatches at payload.other\n[case fine]\nexpect allow\n"
        ),
    );
    let output = capgate(&["test", "s.captest"], &dir);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.starts_with("FAIL s.captest:8 [case wrong path]\n"),
        "{text}"
    );
    assert!(
        text.contains("  expected: deny fieldMatches at payload.other\n"),
        "{text}"
    );
    assert!(text.contains("  actual:   deny — skill `s`\n"), "{text}");
    assert!(
        text.contains("[c] fieldMatches payload.note: value \"HI\" does not match /[a-z]*/"),
        "{text}"
    );
    assert!(text.contains("  trace:\n    candidate `c`\n      holds fieldEquals resource.id in [\"1\", \"2\"]\n      FAILS fieldMatches payload.note ~ /[a-z]*/\n"), "{text}");
    assert_eq!(last_line(&output), "1 passed, 1 failed");
}

#[test]
fn a_malformed_test_file_exits_two_with_line_and_column() {
    let dir = project(
        "s.captest",
        &format!("{DEFAULTS}[case typo]\nexpect deny fieldMatch\n"),
    );
    let output = capgate(&["test", "."], &dir);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "./s.captest:7:13: error: unknown constraint `fieldMatch`\n"
    );
    assert_eq!(last_line(&output), "0 passed, 0 failed");
}

#[test]
fn a_malformed_multi_line_value_points_inside_it() {
    let dir = project(
        "s.captest",
        "[defaults]\npayload = {\n  \"note\": \"hi\",\n  \"n\": 01\n}\n[case x]\nexpect allow\n",
    );
    let output = capgate(&["test", "s.captest"], &dir);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).starts_with("s.captest:4:9: error: invalid JSON value"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn coverage_lists_each_capability_and_the_untested_constraints() {
    let dir = project(
        "s.captest",
        &format!(
            "{DEFAULTS}[case allowed]\nexpect allow\n[case other id]\nresource = \"https://api.example.com/items/3\"\nexpect deny fieldEquals\n"
        ),
    );
    let output = capgate(&["test", "--coverage", "."], &dir);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        "coverage:
  s/c: allowed
    failed    fieldEquals resource.id in [\"1\", \"2\"]  (./s.cap:9:5)
    untested  fieldMatches payload.note ~ /[a-z]*/  (./s.cap:10:5)
untested: 0 of 1 capabilities never allowed, 1 of 2 constraints never failed
  s/c: fieldMatches payload.note ~ /[a-z]*/ never failed  (./s.cap:10:5)
2 passed, 0 failed
"
    );
}

#[test]
fn the_current_directory_is_the_default_path() {
    let dir = project(
        "s.captest",
        &format!("{DEFAULTS}[case allowed]\nexpect allow\n"),
    );
    let output = capgate(&["test"], &dir);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(last_line(&output), "1 passed, 0 failed");
}

#[test]
fn a_session_runs_as_tests_one_per_expectation() {
    let dir = project(
        "s.session.jsonl",
        r#"{"call": {"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/1", "payload": {"note": "hi"}}, "expect": "allow"}
{"call": {"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/1", "payload": {"note": "hi"}}}
{"call": {"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/9", "payload": {"note": "hi"}}, "expect": "deny", "expect_constraint": "rateLimit"}
"#,
    );
    let output = capgate(&["test", "s.session.jsonl"], &dir);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.starts_with("FAIL s.session.jsonl:3\n"), "{text}");
    assert!(text.contains("  expected: deny rateLimit\n"), "{text}");
    assert_eq!(last_line(&output), "1 passed, 1 failed");
}

#[test]
fn a_file_that_is_not_a_test_exits_two() {
    let dir = project(
        "s.captest",
        &format!("{DEFAULTS}[case allowed]\nexpect allow\n"),
    );
    let output = capgate(&["test", "s.cap"], &dir);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("is neither a `.captest` file nor a session"));
}

#[test]
fn a_policy_that_does_not_load_exits_two() {
    let dir = project(
        "s.captest",
        &format!("{DEFAULTS}[case allowed]\nexpect allow\n"),
    );
    std::fs::write(dir.join("broken.cap"), "skill \"b\" {").unwrap();
    let output = capgate(&["test", "."], &dir);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("broken.cap:1:"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_bundled_policies_pass_with_full_coverage() {
    let root = Path::new(crate::common::REPO);
    let output = capgate(&["test", "--coverage", "policies"], root);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains(
            "coverage:
"
        ),
        "{text}"
    );
    let untested = text.lines().find(|l| l.starts_with("untested: ")).unwrap();
    assert!(
        untested.starts_with("untested: 0 of ") && untested.contains(" never allowed, 0 of "),
        "{text}"
    );
    assert!(last_line(&output).ends_with(" passed, 0 failed"));
}

/// Found in review: the runner read each session line a second time with serde_json's fixed
/// nesting limit of 128, so a line the session itself had read (a payload 126 to 130 deep)
/// came back as nothing and counted as no test: an expectation that failed passed
/// ("0 passed, 0 failed", exit 0). It reads lines with the session's limit, and a failed
/// expectation is a failure whatever it reads.
#[test]
fn regression_a_deeply_nested_session_line_still_counts_as_a_test() {
    for depth in [125, 126, 128, 130] {
        let payload = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let dir = project(
            "d.session.jsonl",
            &format!(
                r#"{{"call": {{"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/9", "payload": {payload}}}, "expect": "allow"}}
"#
            ),
        );
        let output = capgate(&["test", "d.session.jsonl"], &dir);
        assert_eq!(
            output.status.code(),
            Some(1),
            "depth {depth}: {}",
            stdout(&output)
        );
        assert_eq!(last_line(&output), "0 passed, 1 failed", "depth {depth}");
    }
}

/// A session line over `Limits::max_session_line_bytes` fails as a line that could not run,
/// without being held whole, and the lines after it still run as tests.
#[test]
fn an_oversized_session_line_fails_that_line_and_the_rest_still_run() {
    let call = r#"{"call": {"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/1", "payload": {"note": "hi"}}, "expect": "allow"}"#;
    let huge = format!(
        r#"{{"call": {{"skill": "s", "operation": "GET", "resource": "https://api.example.com/items/1", "payload": {{"note": "{}"}}}}, "expect": "deny"}}"#,
        "a".repeat(3 << 20)
    );
    let dir = project("s.session.jsonl", &format!("{call}\n{huge}\n{call}\n"));
    let output = capgate(&["test", "s.session.jsonl"], &dir);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("FAIL s.session.jsonl:2\n"), "{text}");
    assert!(
        text.contains(
            "the line could not run: the line is larger than the 2097152-byte limit (`Limits::max_session_line_bytes`)"
        ),
        "{text}"
    );
    assert_eq!(last_line(&output), "2 passed, 1 failed");
}

/// A `.captest` file over `Limits::max_policy_file_bytes` is refused from its size (this one is
/// a terabyte, sparse: reading it would take minutes).
#[test]
fn a_test_file_over_the_limit_is_refused_without_reading_it() {
    let dir = project(
        "s.captest",
        &format!("{DEFAULTS}[case allowed]\nexpect allow\n"),
    );
    std::fs::File::create(dir.join("big.captest"))
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let output = capgate(&["test", "."], &dir);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains(
            "`./big.captest` is larger than the 4194304-byte limit (`Limits::max_policy_file_bytes`)"
        ),
        "{}",
        stderr(&output)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
