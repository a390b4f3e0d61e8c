//! Errors of the compiler.

use crate::span::Span;

/// One reason a policy cannot be compiled, with the place and a one-line hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct CompileError {
    /// Where the problem is.
    pub span: Span,
    /// Lowercase, one line, no final period; user input in backticks.
    pub message: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}

impl CompileError {
    /// An error without help.
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        CompileError {
            span,
            message: message.into(),
            help: None,
        }
    }

    /// Adds a help line.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}
