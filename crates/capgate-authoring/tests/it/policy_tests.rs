//! The policy tests next to the bundled policies: every `policies/**/*.captest` and
//! `policies/**/*.session.jsonl`, run through `capgate_authoring::testing::run_dir` as `capgate test
//! policies` runs them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use capgate::{Limits, PolicyLoader};
use capgate_authoring::testing::{discover, run_dir};

fn policies_dir() -> PathBuf {
    Path::new(crate::common::REPO).join("policies")
}

#[test]
fn every_policy_test_passes() {
    let report = run_dir(policies_dir());
    assert!(report.is_success(), "policy tests failed:\n{report}");
    assert!(report.passed > 0, "no policy tests ran");
}

#[test]
fn the_three_test_files_run_beside_the_sessions() {
    let found: Vec<String> = discover(&policies_dir())
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "captest"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for name in [
        "coding-agent-tools.captest",
        "meeting-scheduler.captest",
        "payments-transfer.captest",
    ] {
        assert!(found.iter().any(|f| f == name), "{name} missing: {found:?}");
    }
}

#[test]
fn the_policy_tests_make_every_capability_allow_and_every_constraint_fail() {
    let report = run_dir(policies_dir());
    let coverage = &report.coverage;
    assert_eq!(coverage.never_allowed().count(), 0, "{coverage}");
    assert_eq!(coverage.never_failed().count(), 0, "{coverage}");
}

#[test]
fn the_policy_loader_skips_test_files_in_a_directory() {
    let dir = std::env::temp_dir().join(format!("capgate-policy-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("p.cap"),
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#,
    )
    .unwrap();
    std::fs::write(dir.join("p.captest"), "not a policy {{{").unwrap();
    let loaded = PolicyLoader::new(Limits::DEFAULT).finish_paths(&[&dir]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(loaded.unwrap().skills.len(), 1);
}

#[test]
fn a_directory_without_tests_is_an_error() {
    let dir = std::env::temp_dir().join(format!("capgate-no-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = run_dir(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!report.is_success());
    assert!(
        report.errors[0].message.starts_with("no test files"),
        "{report}"
    );
}

/// Found in review: the test runner's directory walk followed symlinks without remembering
/// where it had been, so a link to `.` looped forever (two links: `capgate test` hung). Each
/// directory is visited once.
#[cfg(unix)]
#[test]
fn regression_a_symlink_loop_in_a_test_directory_is_walked_once() {
    let dir = crate::common::temp_dir("symlink-loop");
    std::fs::write(
        dir.join("s.cap"),
        r#"skill "s" { version "1"
  capability "c" { resource tool "t" operations call justification "j" } }"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("s.session.jsonl"),
        r#"{"call": {"skill": "s", "operation": "call", "resource": "tool:t"}, "expect": "allow"}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop2")).unwrap();
    assert_eq!(discover(&dir).len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
