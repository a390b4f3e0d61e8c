//! `capgate test`: run the policy tests (`.captest` files and replay sessions) under each path.

use std::path::PathBuf;

use clap::Args;

use capgate::value::escape_controls_in_lines;
use capgate_authoring::testing::{Report, run_dir, run_file};

use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK};

/// Arguments of `capgate test`.
#[derive(Debug, Args)]
pub struct TestArgs {
    /// Directories (every test file within, against the policies within) or test files
    /// (against the policies of their directory). Default: the current directory.
    paths: Vec<PathBuf>,
    /// Also report, per capability and per constraint, whether some test exercised it.
    #[arg(long)]
    coverage: bool,
}

/// Runs `capgate test`: failures and coverage on stdout, then `N passed, M failed` as the last
/// line; files that cannot be run on stderr. Exit 2 if a file cannot be run, else 1 if a test
/// failed, else 0.
pub fn run(args: TestArgs) -> u8 {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths
    };
    let mut report = Report::default();
    for path in &paths {
        report.merge(if path.is_dir() {
            run_dir(path)
        } else {
            run_file(path)
        });
    }
    // Case names, requests and policy text are quoted in the report: control and bidirectional
    // characters are escaped, line breaks kept.
    let shown = |text: String| escape_controls_in_lines(&text).into_owned();
    for failure in &report.failures {
        outln!("{}", shown(failure.to_string()));
    }
    for error in &report.errors {
        eprintln!("{}", shown(error.to_string()));
    }
    if args.coverage {
        out!("{}", shown(report.coverage.to_string()));
    }
    outln!("{} passed, {} failed", report.passed, report.failed);
    if !report.errors.is_empty() {
        EXIT_INPUT
    } else if report.failed > 0 {
        EXIT_DENY
    } else {
        EXIT_OK
    }
}
