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
    match parse_manifest_partial(file, text) {
        (Some(policy), errors) if errors.is_empty() => Ok(policy),
        (_, errors) => Err(errors),
    }
}

/// [`parse_manifest`], returning with the errors the parts of the manifest that were
/// well-formed (malformed fields absent, malformed constraints and capabilities dropped), so
/// that the compiler can check those too and a load lists every error in one pass (SPEC §7).
/// The policy is `None` when the document is not JSON or its skill cannot be read; with no
/// errors it is the policy [`parse_manifest`] returns.
pub fn parse_manifest_partial(
    file: FileId,
    text: &str,
) -> (Option<PolicyFile>, Vec<ManifestError>) {
    let (document, mut errors) = json::parse_json_partial(file, text);
    let Some(document) = document else {
        return (None, errors);
    };
    let (policy, shape_errors) = lower::lower_manifest(&document, text);
    errors.extend(shape_errors);
    (policy, errors)
}
