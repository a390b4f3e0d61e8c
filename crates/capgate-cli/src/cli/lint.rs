//! `capgate lint`: review warnings for policies that load.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use capgate::span::FileId;
use capgate::{Limits, PolicyLoader};
use capgate_authoring::lint::{lint_policy, lint_text};

use super::diagnostics::{ErrorFormat, Report, Severity, emit, error_format, print_load_error};
use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK};

/// What `--deny` turns into errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Deny {
    /// Every warning.
    Warnings,
}

/// Arguments of `capgate lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// `--deny warnings`: exit 1 when there is any warning.
    #[arg(long, value_enum)]
    deny: Option<Deny>,
    /// Policy files (.cap, .json) or directories.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `capgate lint`: exit 0 (even with warnings), 1 on a lint error or with `--deny warnings`
/// and a warning, 2 when the policies do not load.
pub fn run(args: LintArgs) -> u8 {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    for path in &args.files {
        loader.add_path(path);
    }
    let loaded = match loader.finish() {
        Ok(loaded) => loaded,
        Err(error) => {
            print_load_error(&error);
            return EXIT_INPUT;
        }
    };
    let mut reports = Vec::new();
    for (index, file) in loaded.sources.files().iter().enumerate() {
        let id = FileId(u32::try_from(index).unwrap_or(u32::MAX));
        let parsed = if file.name.ends_with(".json") {
            capgate::manifest::parse_manifest(id, &file.text).ok()
        } else {
            capgate::syntax::parse(id, &file.text).ok()
        };
        let text_lints = parsed.is_some().then(|| lint_text(id, &file.text));
        for lint in parsed
            .iter()
            .flat_map(lint_policy)
            .chain(text_lints.into_iter().flatten())
        {
            reports.push(Report {
                severity: if lint.code.is_error() {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                code: Some(lint.code.code()),
                span: lint.span,
                message: lint.message,
                help: Some(lint.help),
            });
        }
    }
    emit(&loaded.sources, &reports);
    let errors = reports
        .iter()
        .filter(|r| r.severity == Severity::Error)
        .count();
    let count = reports.len() - errors;
    if error_format() == ErrorFormat::Human && count > 0 {
        eprintln!(
            "warning: {count} warning{}",
            if count == 1 { "" } else { "s" }
        );
    }
    if error_format() == ErrorFormat::Human && errors > 0 {
        eprintln!(
            "error: {errors} lint error{}",
            if errors == 1 { "" } else { "s" }
        );
    }
    if errors > 0 || (count > 0 && args.deny == Some(Deny::Warnings)) {
        EXIT_DENY
    } else {
        EXIT_OK
    }
}
