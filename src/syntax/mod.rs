//! The `.cap` language front end: pest grammar → typed AST with spans.
//!
//! - [`ast`] defines the tree both front ends (this one and `manifest`) produce.
//! - [`parse`] turns one file's text into a [`ast::PolicyFile`] or every [`SyntaxError`] found
//!   (the grammar is `grammar/capgate.pest`; the user guide is `docs/language.md`).
//!   The two nesting limits it enforces are
//!   [`MAX_POLICY_NESTING`](crate::limits::MAX_POLICY_NESTING) and
//!   [`MAX_CONSTRAINT_NESTING`](crate::limits::MAX_CONSTRAINT_NESTING).
//! - [`units`] parses the small lexical forms shared with the JSON manifest (durations, days,
//!   times of day, time zones are only names here).

pub mod ast;
pub mod error;
mod lower;
mod parser;
pub mod units;

pub use error::SyntaxError;
pub use parser::parse;
pub(crate) use parser::parse_partial;
