//! The JSON manifest form (SPEC §3) ↔ the same AST as `.cap`.
//!
//! - [`parse_manifest`] reads one JSON manifest (one skill) into a [`PolicyFile`], or every
//!   [`ManifestError`] found, each with a span.
//! - [`to_json_text`] / [`to_json`] write a policy's single skill back in the canonical JSON
//!   form (used by `capgate convert --to json`); [`skill_to_json_text`] does one skill of many.
//! - [`json`] is the strict, span-keeping JSON reader underneath.
//! - `CanonicalSkill` writes the compact, key-sorted text a skill's revision hashes.

mod canonical;
mod emit;
mod error;
pub mod json;
mod lower;

pub(crate) use canonical::CanonicalSkill;
pub use emit::{skill_to_json, skill_to_json_text, to_json, to_json_text};
pub use error::ManifestError;

use crate::span::FileId;
use crate::syntax::ast::PolicyFile;

/// Parses one JSON manifest: a JSON document describing exactly one skill.
///
/// JSON syntax errors stop the reader at the first one (duplicate keys are all listed); past
/// that, every shape error in the document is collected.
pub fn parse_manifest(file: FileId, text: &str) -> Result<PolicyFile, Vec<ManifestError>> {
    let document = json::parse_json(file, text)?;
    lower::lower_manifest(&document, text)
}
