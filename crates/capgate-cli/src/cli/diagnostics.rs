//! Rendering diagnostics — load errors and lint warnings — for people and for editors.
//!
//! A [`Report`] is one problem: severity, optional code, span, message and help. [`emit`]
//! prints a batch of them in the format chosen by the global `--error-format` flag
//! ([`ErrorFormat`]): `human` renders miette reports on standard error (a source snippet with
//! the span labelled, the message, the help); `json` prints one JSON object per report on
//! standard output, with file, line, column, end line/column (1-based, columns in characters),
//! message, help, severity and code.

use std::borrow::Cow;
use std::io::IsTerminal as _;
use std::sync::OnceLock;

use clap::ValueEnum;
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};

use capgate::LoadError;
use capgate::span::{SourceMap, Span};
use capgate::value::{escape_controls, escape_controls_in_lines};

/// How diagnostics are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ErrorFormat {
    /// miette reports with source snippets, on standard error.
    #[default]
    Human,
    /// One JSON object per diagnostic, on standard output.
    Json,
}

static ERROR_FORMAT: OnceLock<ErrorFormat> = OnceLock::new();

/// Sets the format for the whole run (from the global `--error-format` flag).
pub fn set_error_format(format: ErrorFormat) {
    let _ = ERROR_FORMAT.set(format);
}

/// The format chosen for this run.
pub fn error_format() -> ErrorFormat {
    ERROR_FORMAT.get().copied().unwrap_or_default()
}

/// How bad a report is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// The policy was rejected.
    Error,
    /// A review warning; the policy still loads.
    Warning,
}

impl Severity {
    fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem to print.
#[derive(Debug, Clone)]
pub struct Report {
    /// Error or warning.
    pub severity: Severity,
    /// A stable code such as `CG001`, for lints.
    pub code: Option<&'static str>,
    /// Where; an empty span in an empty file prints without a snippet.
    pub span: Span,
    /// One line.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

/// Prints every diagnostic of a load error (the summary line only in human format).
pub fn print_load_error(error: &LoadError) {
    let reports: Vec<Report> = error
        .diagnostics
        .iter()
        .map(|d| Report {
            severity: Severity::Error,
            code: None,
            span: d.span,
            message: d.message.clone(),
            help: d.help.clone(),
        })
        .collect();
    emit(&error.sources, &reports);
    if error_format() == ErrorFormat::Human {
        let count = reports.len();
        eprintln!(
            "error: policy rejected: {count} error{}",
            if count == 1 { "" } else { "s" }
        );
    }
}

/// How many reports the human format shows; it counts the rest. Each graphical report finds its
/// line by reading the file from the start, so thousands of them on a large file took minutes
/// (regression: 8,000 duplicate-field errors on a 112 KB file, 26 s). A choice of the output,
/// not a limit on the input: every report is still made, and JSON prints them all.
pub const HUMAN_REPORTS_SHOWN: usize = 50;

/// Prints reports in the chosen format.
pub fn emit(sources: &SourceMap, reports: &[Report]) {
    match error_format() {
        ErrorFormat::Human => {
            let handler = handler();
            for report in reports.iter().take(HUMAN_REPORTS_SHOWN) {
                eprint!("{}", render_human(&handler, sources, report));
            }
            if let Some(more) = reports
                .len()
                .checked_sub(HUMAN_REPORTS_SHOWN)
                .filter(|&n| n > 0)
            {
                eprintln!(
                    "… and {more} more (the first {HUMAN_REPORTS_SHOWN} are shown; \
                     `--error-format json` prints all {})",
                    reports.len()
                );
            }
        }
        ErrorFormat::Json => {
            for report in reports {
                outln!("{}", render_json(sources, report));
            }
        }
    }
}

fn handler() -> GraphicalReportHandler {
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    GraphicalReportHandler::new_themed(theme)
        .with_links(false)
        .with_width(120)
}

/// One report as a miette graphical report.
fn render_human(handler: &GraphicalReportHandler, sources: &SourceMap, report: &Report) -> String {
    let location = sources.location(report.span);
    // Messages, help and the snippet quote policy text: its control and bidirectional
    // characters are escaped (reviewers read what the terminal shows).
    let message = escape_controls(&report.message).into_owned();
    let mut diagnostic =
        MietteDiagnostic::new(message.clone()).with_severity(match report.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        });
    if let Some(code) = report.code {
        diagnostic = diagnostic.with_code(code);
    }
    if let Some(help) = &report.help {
        diagnostic = diagnostic.with_help(escape_controls_in_lines(help).into_owned());
    }
    let file = sources.file(report.span.file);
    let has_text = file.is_some_and(|f| !f.text.is_empty());
    let mut out = String::new();
    let rendered = match file {
        Some(file) if has_text => {
            let start = report.span.start_usize().min(file.text.len());
            let length = report.span.len().min(file.text.len() - start);
            // The file's text is shared, not copied, for each report — unless it holds
            // characters to escape, when the snippet shows an escaped copy.
            let (text, start, length) = match shown_source(&file.text, start, start + length) {
                Some((escaped, start, end)) => (std::sync::Arc::from(escaped), start, end - start),
                None => (std::sync::Arc::clone(&file.text), start, length),
            };
            diagnostic = diagnostic.with_label(LabeledSpan::new_primary_with_span(
                Some(label(report.severity).to_owned()),
                (start, length),
            ));
            let source = NamedSource::new(escape_controls(&file.name), text);
            let report = miette::Report::new(diagnostic).with_source_code(source);
            handler.render_report(&mut out, report.as_ref())
        }
        _ => {
            // No text to show (a file that could not be read): name the file in the message.
            let named = format!("{}: {message}", escape_controls(&location.file));
            diagnostic.message = named;
            handler.render_report(&mut out, &diagnostic)
        }
    };
    if rendered.is_err() {
        out = format!(
            "{}: {}: {message}\n",
            escape_controls(&location.to_string()),
            report.severity.name(),
        );
    }
    out
}

/// `text` with its hidden characters escaped (`escape_controls_in_lines`) and the byte range
/// `start..end` moved to where it lies in the escaped text; `None` when there is nothing to
/// escape.
fn shown_source(text: &str, start: usize, end: usize) -> Option<(String, usize, usize)> {
    let Cow::Owned(escaped) = escape_controls_in_lines(text) else {
        return None;
    };
    // How much longer the text before `offset` became: escape it alone, minus the `\r` of a
    // `\r\n` that the cut split (kept raw in the whole text, escaped in the head).
    let moved = |offset: usize| {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let head = text.get(..offset).unwrap_or_default();
        let split_crlf =
            head.ends_with('\r') && text.get(offset..).is_some_and(|t| t.starts_with('\n'));
        offset + escape_controls_in_lines(head).len() - head.len() - usize::from(split_crlf)
    };
    Some((escaped, moved(start), moved(end)))
}

fn label(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "here",
        Severity::Warning => "this",
    }
}

/// One report as a JSON object (one line).
fn render_json(sources: &SourceMap, report: &Report) -> String {
    let start = sources.location(report.span);
    let (end_line, end_column) = sources.file(report.span.file).map_or((0, 0), |f| {
        f.line_col(usize::try_from(report.span.end).unwrap_or(0))
    });
    let value = serde_json::json!({
        "file": escape_controls(&start.file),
        "line": start.line,
        "column": start.column,
        "end_line": end_line,
        "end_column": end_column,
        "severity": report.severity.name(),
        "code": report.code,
        "message": escape_controls(&report.message),
        "help": report.help.as_deref().map(escape_controls_in_lines),
    });
    value.to_string()
}
