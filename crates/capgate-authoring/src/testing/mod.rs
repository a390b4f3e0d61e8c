//! Policy tests: `.captest` files and replay sessions kept next to the policies they test.
//!
//! - [`run_dir`] finds every test file under a directory, loads the policies of that directory
//!   tree once, and runs every test; [`run_file`] runs one file against the policies of its own
//!   directory; [`run_test_file`] runs parsed text against a policy you already hold.
//! - [`Report`] counts passed and failed tests, holds one [`Failure`] per failed test (expected
//!   and actual decision, and the [`capgate::Engine::explain`] trace of the call), the
//!   [`TestFileError`]s of files that could not be run, and the [`Coverage`] of the policy.
//! - [`format`](mod@format) is the `.captest` language ([`TestFile`], [`Case`], [`Step`],
//!   [`Expectation`]), described for users in `docs/testing.md`.
//!
//! A test is one `[case]` of a `.captest` file (it passes when every `expect` in it holds; it
//! stops at the first that does not), or one line of a `*.session.jsonl` file that carries
//! `expect` or `expect_constraint` (a session line that cannot be run is a failed test too).
//! Every test runs on a stateful engine with a simulated clock, exactly as `capgate replay` does.

pub mod coverage;
pub mod format;
mod run;

use std::fmt;
use std::path::{Path, PathBuf};

pub use coverage::{CapabilityCoverage, ConstraintCoverage, Coverage};
pub use format::{Case, Expectation, Line, Step, TestFile, TestFileError, parse};

use capgate::bounded::Descend;
use capgate::engine::{CandidateTrace, Decision, PolicyLoader, PolicySet};
use capgate::limits::Limits;

/// The extension of test files in the `.captest` format.
pub const TEST_EXTENSION: &str = "captest";

/// The suffix of replay sessions, which also run as tests.
pub const SESSION_SUFFIX: &str = ".session.jsonl";

/// The outcome of running tests.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Tests whose expectations all held.
    pub passed: usize,
    /// Tests that failed (each has one entry in `failures`).
    pub failed: usize,
    /// Why each failed test failed, in file order.
    pub failures: Vec<Failure>,
    /// Files that could not be run: malformed test files, unreadable files, policies that do
    /// not load, a directory without tests.
    pub errors: Vec<TestFileError>,
    /// What the tests exercised.
    pub coverage: Coverage,
}

impl Report {
    /// True when every test passed and every file could be run.
    pub fn is_success(&self) -> bool {
        self.failed == 0 && self.errors.is_empty()
    }

    /// Adds another report's counts, failures, errors and coverage to this one.
    pub fn merge(&mut self, other: Report) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.failures.extend(other.failures);
        self.errors.extend(other.errors);
        self.coverage.merge(other.coverage);
    }

    fn fail(&mut self, failure: Failure) {
        self.failed += 1;
        self.failures.push(failure);
    }
}

impl fmt::Display for Report {
    /// Every failure and error, then `N passed, M failed` on the last line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for failure in &self.failures {
            writeln!(f, "{failure}")?;
        }
        for error in &self.errors {
            writeln!(f, "{error}")?;
        }
        write!(f, "{} passed, {} failed", self.passed, self.failed)
    }
}

/// Why one test failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The test file.
    pub file: String,
    /// The 1-based line that failed (the `expect`, or the step that could not run).
    pub line: usize,
    /// The case name; `None` for a session line.
    pub case: Option<String>,
    /// What the call should have decided; `None` when a step could not run.
    pub expected: Option<Expectation>,
    /// What it decided; `None` when a step could not run.
    pub actual: Option<Decision>,
    /// What did not hold, in one line.
    pub message: String,
    /// Every candidate's every constraint, for the failed call.
    pub trace: Vec<CandidateTrace>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FAIL {}:{}", self.file, self.line)?;
        if let Some(case) = &self.case {
            write!(f, " [case {case}]")?;
        }
        writeln!(f)?;
        writeln!(f, "  problem:  {}", self.message)?;
        if let Some(expected) = &self.expected {
            writeln!(f, "  expected: {expected}")?;
        }
        if let Some(actual) = &self.actual {
            let text = actual.to_text();
            let mut lines = text.lines();
            if let Some(first) = lines.next() {
                writeln!(f, "  actual:   {first}")?;
            }
            for line in lines {
                writeln!(f, "          {line}")?;
            }
        }
        if !self.trace.is_empty() {
            writeln!(f, "  trace:")?;
            for candidate in &self.trace {
                writeln!(f, "    candidate `{}`", candidate.capability)?;
                if candidate.checks.is_empty() {
                    writeln!(f, "      (no constraints besides rate limits)")?;
                }
                for (summary, holds, reports) in &candidate.checks {
                    writeln!(
                        f,
                        "      {} {summary}",
                        if *holds { "holds" } else { "FAILS" }
                    )?;
                    if *holds {
                        continue;
                    }
                    for report in reports.iter().filter(|r| !r.holds) {
                        match &report.path {
                            Some(path) => writeln!(f, "            {path}: {}", report.message)?,
                            None => writeln!(f, "            {}", report.message)?,
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// True for a file `run_dir` runs as a test.
pub fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy());
    path.extension().is_some_and(|e| e == TEST_EXTENSION)
        || name.is_some_and(|n| n.ends_with(SESSION_SUFFIX))
}

/// Every test file under `dir`, recursively, in name order. Hidden directories and `target`
/// are skipped.
pub fn discover(dir: &Path) -> Vec<PathBuf> {
    capgate::bounded::files_under(dir, Descend::SkipHiddenAndTarget, is_test_file)
}

/// Loads the policies under `dir` (every `.cap` and JSON manifest, recursively).
fn load(dir: &Path, limits: Limits) -> Result<PolicySet, Vec<TestFileError>> {
    let mut loader = PolicyLoader::new(limits);
    loader.add_path(dir);
    loader.finish().map_err(|error| {
        error
            .diagnostics
            .iter()
            .map(|d| TestFileError {
                file: d.location.file.to_string(),
                position: (d.location.line > 0).then(|| {
                    (
                        usize::try_from(d.location.line).unwrap_or(0),
                        usize::try_from(d.location.column).unwrap_or(0),
                    )
                }),
                message: format!("policy does not load: {}", d.message),
            })
            .collect()
    })
}

/// Runs `files` against the policies under `policy_dir`; `walked`: the files were found in a
/// directory walk, where only regular files are opened (a FIFO would block the run).
fn report_for(files: &[PathBuf], policy_dir: &Path, walked: bool) -> Report {
    let limits = Limits::DEFAULT;
    let policy = match load(policy_dir, limits) {
        Ok(policy) => policy,
        Err(errors) => {
            return Report {
                errors,
                ..Report::default()
            };
        }
    };
    let mut report = Report {
        coverage: Coverage::of(&policy),
        ..Report::default()
    };
    for file in files {
        if walked && let Err(e) = capgate::bounded::regular_file(file) {
            report.errors.push(TestFileError {
                file: file.display().to_string(),
                position: None,
                message: e.to_string(),
            });
            continue;
        }
        run::run_path(file, &policy, limits, &mut report);
    }
    report
}

/// Runs every test file under `dir` (see [`discover`]) against the policies of the whole
/// directory tree. A directory without test files is an error in the report, and so is a test
/// file that is not a regular file (a FIFO, a socket, a device), which is never opened.
pub fn run_dir(dir: impl AsRef<Path>) -> Report {
    let dir = dir.as_ref();
    let files = discover(dir);
    if files.is_empty() {
        return Report {
            errors: vec![TestFileError {
                file: dir.display().to_string(),
                position: None,
                message: format!(
                    "no test files (`*.{TEST_EXTENSION}`, `*{SESSION_SUFFIX}`) under `{}`",
                    dir.display()
                ),
            }],
            ..Report::default()
        };
    }
    report_for(&files, dir, true)
}

/// Runs one test file (`.captest` or `.session.jsonl`) against the policies of its directory.
pub fn run_file(file: impl AsRef<Path>) -> Report {
    let file = file.as_ref();
    if !is_test_file(file) {
        return Report {
            errors: vec![TestFileError {
                file: file.display().to_string(),
                position: None,
                message: format!(
                    "`{}` is neither a `.{TEST_EXTENSION}` file nor a session (`{SESSION_SUFFIX}`)",
                    file.display()
                ),
            }],
            ..Report::default()
        };
    }
    let dir = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    report_for(&[file.to_path_buf()], &dir, false)
}

/// Runs `.captest` text against a loaded policy; `name` is used in failures and errors.
pub fn run_test_file(name: &str, text: &str, policy: &PolicySet) -> Report {
    let mut report = Report {
        coverage: Coverage::of(policy),
        ..Report::default()
    };
    match parse(name, text) {
        Ok(file) => run::run_cases(&file, policy, Limits::DEFAULT, &mut report),
        Err(error) => report.errors.push(error),
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use capgate::engine::PolicyFormat;

    const POLICY: &str = r#"
skill "s" {
  version "1"
  capability "c" {
    resource http "https://api.example.com/items/{id}"
    operations POST
    lifetime call 2
    justification "writes items"
    fieldEquals resource.id in ["1", "2"]
    fieldMatches payload.tags[*] ~ /[a-z]+/
    rateLimit 3 per minute
  }
  capability "t" {
    resource tool "shell"
    operations call
    lifetime transaction
    justification "runs commands"
  }
}"#;

    const DEFAULTS: &str = "[defaults]\ntime = \"2026-12-01T15:00:00Z\"\nskill = \"s\"\noperation = \"POST\"\nresource = \"https://api.example.com/items/1\"\npayload = {\"tags\": [\"a\", \"b\"]}\ngrant c as g\ngrant = \"g\"\n";

    fn policy() -> PolicySet {
        let mut loader = PolicyLoader::new(Limits::DEFAULT);
        loader.add_text("p.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
        loader.finish().unwrap()
    }

    fn run(cases: &str) -> Report {
        run_test_file("t.captest", &format!("{DEFAULTS}{cases}"), &policy())
    }

    #[test]
    fn a_case_whose_expectations_hold_passes() {
        let report = run("[case ok]\nexpect allow by c\nexpect allow\nexpect deny lifetime\n");
        assert_eq!((report.passed, report.failed), (1, 0), "{report}");
    }

    #[test]
    fn each_case_starts_on_a_fresh_session() {
        // Each case spends the two uses of `g`; a shared session would refuse the second case.
        let report = run("[case a]\nexpect allow 2 times\n[case b]\nexpect allow 2 times\n");
        assert_eq!((report.passed, report.failed), (2, 0), "{report}");
    }

    #[test]
    fn a_wrong_path_fails_with_expected_actual_and_trace() {
        let report =
            run("[case p]\npayload.tags[1] = \"B\"\nexpect deny fieldMatches at payload.tags[0]\n");
        assert_eq!((report.passed, report.failed), (0, 1));
        let failure = &report.failures[0];
        assert_eq!(failure.line, 11);
        assert_eq!(failure.case.as_deref(), Some("p"));
        assert!(
            failure
                .message
                .contains("fieldMatches at payload.tags[1] by c"),
            "{}",
            failure.message
        );
        assert_eq!(
            failure.actual.as_ref().unwrap().reasons[0].path.as_deref(),
            Some("payload.tags[1]")
        );
        assert_eq!(&*failure.trace[0].capability, "c");
        assert!(failure.trace[0].checks.iter().any(|(_, holds, _)| !holds));
        let text = failure.to_string();
        assert!(text.starts_with("FAIL t.captest:11 [case p]\n"), "{text}");
        assert!(
            text.contains("  expected: deny fieldMatches at payload.tags[0]\n"),
            "{text}"
        );
        assert!(
            text.contains("FAILS fieldMatches payload.tags[*] ~ /[a-z]+/"),
            "{text}"
        );
    }

    #[test]
    fn a_case_stops_at_its_first_failed_expectation() {
        let report = run("[case p]\nexpect deny\nexpect deny\n");
        assert_eq!(report.failed, 1);
        assert_eq!(report.failures.len(), 1);
        assert_eq!(report.failures[0].message, "expected deny, got allow");
    }

    #[test]
    fn allow_by_another_capability_fails() {
        let report = run("[case p]\nexpect allow by t\n");
        assert_eq!(
            report.failures[0].message,
            "expected allow by `t`, got allow by `c`"
        );
    }

    #[test]
    fn constraint_path_and_capability_must_hold_for_one_reason() {
        let report = run(
            "[case p]\nresource = \"https://api.example.com/items/3\"\nexpect deny fieldEquals at resource.id by c\nexpect deny fieldEquals by t\n",
        );
        assert_eq!(report.failed, 1);
        assert_eq!(report.failures[0].line, 12);
    }

    #[test]
    fn a_step_that_cannot_run_fails_the_case() {
        let report = run("[case p]\ngrant nope as x\nexpect allow\n");
        assert_eq!(report.failed, 1);
        let failure = &report.failures[0];
        assert_eq!(failure.line, 10);
        assert!(failure.expected.is_none() && failure.actual.is_none());
        assert!(
            failure.message.contains("has no capability `nope`"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn an_index_one_past_the_end_appends_and_further_fails() {
        let ok = run("[case p]\npayload.tags[2] = \"c\"\nexpect allow\n");
        assert_eq!(ok.failed, 0, "{ok}");
        let report = run("[case p]\npayload.tags[3] = \"c\"\nexpect allow\n");
        assert!(
            report.failures[0]
                .message
                .starts_with("cannot set `payload.tags[3]`: index 3 is past the end"),
            "{}",
            report.failures[0].message
        );
    }

    #[test]
    fn setting_a_member_creates_the_objects_on_the_way() {
        let report = run("[case p]\nagent.team.name = \"x\"\nexpect allow\n");
        assert_eq!(report.failed, 0, "{report}");
    }

    #[test]
    fn setting_a_member_inside_a_string_fails() {
        let report = run("[case p]\npayload.tags[0].x = 1\nexpect allow\n");
        assert_eq!(
            report.failures[0].message,
            "cannot set `payload.tags[0].x`: `x` is inside a string"
        );
    }

    #[test]
    fn unsetting_something_absent_fails() {
        let report = run("[case p]\nunset payload.nothing\nexpect allow\n");
        assert_eq!(
            report.failures[0].message,
            "cannot unset `payload.nothing`: it is absent"
        );
    }

    #[test]
    fn steps_default_to_the_requests_skill() {
        let report = run(
            "[case p]\nrevoke capability c\nexpect deny grant by c\n[case q]\nrevoke skill\nexpect deny grant\n",
        );
        assert_eq!((report.passed, report.failed), (2, 0), "{report}");
    }

    #[test]
    fn a_malformed_file_is_an_error_not_a_failure() {
        let report = run("[case p]\nexpect maybe\n");
        assert_eq!((report.passed, report.failed), (0, 0));
        assert_eq!(
            report.errors[0].to_string(),
            "t.captest:10:8: error: unknown decision `maybe`: expected `allow`, `deny` or `approval_required`"
        );
        assert!(!report.is_success());
    }

    #[test]
    fn coverage_marks_allowed_capabilities_and_failed_constraints() {
        let report = run(
            "[case p]\nexpect allow 2 times\ngrant c as h\ngrant = \"h\"\nexpect allow\nexpect deny rateLimit\n[case q]\nresource = \"https://api.example.com/items/9\"\nexpect deny fieldEquals\n",
        );
        assert_eq!(report.failed, 0, "{report}");
        let c = &report.coverage.capabilities[0];
        assert!(c.allowed);
        let failed: Vec<(ReasonKindName, bool)> = c
            .constraints
            .iter()
            .map(|k| (k.constraint.as_str(), k.failed))
            .collect();
        assert_eq!(
            failed,
            [
                ("fieldEquals", true),
                ("fieldMatches", false),
                ("rateLimit", true)
            ]
        );
        let t = &report.coverage.capabilities[1];
        assert!(!t.allowed);
        let text = report.coverage.to_string();
        assert!(
            text.contains(
                "untested: 1 of 2 capabilities never allowed, 1 of 3 constraints never failed\n"
            ),
            "{text}"
        );
        assert!(text.contains("  s/t: never allowed\n"), "{text}");
        assert!(
            text.contains(
                "  s/c: fieldMatches payload.tags[*] ~ /[a-z]+/ never failed  (p.cap:10:5)\n"
            ),
            "{text}"
        );
    }

    type ReasonKindName = &'static str;

    #[test]
    fn the_report_ends_with_the_counts() {
        let report = run("[case p]\nexpect deny\n[case q]\nexpect allow\n");
        assert!(report.to_string().ends_with("\n1 passed, 1 failed"));
    }
}
