//! `capgate replay`: run a JSON Lines session on one stateful engine with a simulated clock.

use std::io::BufReader;
use std::path::PathBuf;

use clap::Args;

use capgate::bounded::{Line, LineReader};
use capgate::{Limits, LineResult, Session, SessionOptions};

use super::audit::AuditFile;
use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK, Format, load_policies};

/// Arguments of `capgate replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Policy files (.cap, .json) or directories.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The session file (JSON Lines).
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
    // Read line by line, each line bounded (`Limits::max_session_line_bytes`): a session may be
    // a pipe of any length, and a line too long to hold is an error for that line only. Bytes,
    // not a `String`: a line that is not UTF-8 is an error for that line only too (SPEC §8).
    let file = match std::fs::File::open(&session_path) {
        Ok(file) => file,
        Err(e) => {
            eprintln!(
                "error: cannot read session `{}`: {e}",
                session_path.display()
            );
            return EXIT_INPUT;
        }
    };
    let mut options = SessionOptions {
        observe: args.observe,
        limits: Some(limits),
        ..SessionOptions::default()
    };
    let audit = match args.audit.as_deref().map(AuditFile::open).transpose() {
        Ok(audit) => audit,
        Err(code) => return code,
    };
    if let Some(audit) = &audit {
        options.audit = Some(audit.sink());
    }
    let session = match Session::new(policy, options) {
        Ok(session) => session,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_INPUT;
        }
    };
    let (mut failed, mut errors) = (0usize, 0usize);
    let mut lines = LineReader::new(BufReader::new(file), limits.max_session_line_bytes());
    let mut number = 0usize;
    loop {
        number += 1;
        let raw = match lines.next_line() {
            Ok(None) => break,
            Ok(Some(Line::Complete(raw))) => raw,
            Ok(Some(Line::TooLong)) => {
                errors += 1;
                print_line(&session.oversized_line(number), args.format);
                continue;
            }
            Err(e) => {
                eprintln!(
                    "error: cannot read session `{}` at line {number}: {e}",
                    session_path.display()
                );
                errors += 1;
                break;
            }
        };
        let result = match capgate::session::line_text(raw) {
            Ok(None) => continue,
            Ok(Some(line)) => session.run_line(line, number),
            Err(message) => session.error_line(number, message),
        };
        failed += usize::from(result.failed_expectation);
        errors += usize::from(result.error);
        print_line(&result, args.format);
    }
    // Printed first, but the session's own summary below still follows.
    let audit_failed = audit
        .as_ref()
        .is_some_and(|audit| audit.check_written().is_err());
    if errors > 0 {
        eprintln!("error: {errors} session line(s) could not be run");
    }
    if failed > 0 {
        eprintln!("error: {failed} expectation(s) failed");
    }
    if audit_failed || errors > 0 {
        EXIT_INPUT
    } else if failed > 0 {
        EXIT_DENY
    } else {
        EXIT_OK
    }
}

fn print_line(result: &LineResult, format: Format) {
    match format {
        Format::Json => outln!("{}", result.json),
        Format::Text => out!("{}", result.text),
    }
}
