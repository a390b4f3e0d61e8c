//! Errors of the `.cap` front end.

use crate::span::Span;

/// A syntax error with the place it was found and a one-line hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct SyntaxError {
    /// Where the problem is.
    pub span: Span,
    /// Lowercase, one line, no final period; user input in backticks.
    pub message: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}
