//! The `.cap` language front end: pest grammar → typed AST with spans.
//!
//! - [`ast`] defines the tree both front ends (this one and `manifest`) produce.
//! - [`parse`] turns one file's text into a [`ast::PolicyFile`] or every [`SyntaxError`] found
//!   (the grammar is `grammar/capgate.pest`; the user guide is `docs/language.md`).
//!   [`MAX_NESTING`] and [`MAX_COMBINATOR_DEPTH`] are the two nesting limits it enforces.
//! - [`units`] parses the small lexical forms shared with the JSON manifest (durations, days,
//!   times of day, time zones are only names here).

pub mod ast;
pub mod error;
mod lower;
mod parser;
pub mod units;

pub use error::SyntaxError;
pub use lower::MAX_COMBINATOR_DEPTH;
pub use parser::{MAX_NESTING, parse, parse_partial};
