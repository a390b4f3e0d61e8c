//! The JSON manifest form (SPEC §3) ↔ the same AST as `.cap`.
//!
//! - [`parse_manifest`] reads one JSON manifest (one skill) into a [`PolicyFile`], or every
//!   [`ManifestError`] found, each with a span.
//! - [`to_json_text`] / [`to_json`] write a policy's single skill back in the canonical JSON
//!   form (used by `capgate convert --to json`); [`skill_to_json_text`] does one skill of many.
//! - `json` is the strict, span-keeping JSON reader underneath.
//! - `CanonicalSkill` writes the compact, key-sorted text a skill's revision hashes.

mod canonical;
mod emit;
mod error;
mod json;
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
pub(crate) fn parse_manifest_partial(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;
    use crate::vocabulary::ConstraintKeyword;

    /// One constraint of each kind, in `.cap`.
    fn sample(keyword: ConstraintKeyword) -> &'static str {
        match keyword {
            ConstraintKeyword::FieldEquals => "fieldEquals payload.a == 1",
            ConstraintKeyword::FieldMatches => "fieldMatches payload.a ~ /x+/i",
            ConstraintKeyword::FieldRange => "fieldRange 0 < payload.n <= 10",
            ConstraintKeyword::PayloadSchema => r#"payloadSchema {"type": "object"}"#,
            ConstraintKeyword::ActorBinding => "actorBinding payload.owner == agent.id",
            ConstraintKeyword::RateLimit => "rateLimit 10 per 1m",
            ConstraintKeyword::WallClockWindow => r#"wallClockWindow mon-fri 09:00-17:00 "UTC""#,
            ConstraintKeyword::Any => "any { fieldEquals payload.a == 1 }",
            ConstraintKeyword::All => "all { fieldEquals payload.a == 1 }",
            ConstraintKeyword::Not => "not { fieldEquals payload.a == 1 }",
        }
    }

    fn cap_file(constraint: &str) -> String {
        format!(
            "skill \"s\" {{ version \"1\" capability \"c\" {{ resource http \"https://a.example.com/\" \
             operations GET {constraint} }} }}"
        )
    }

    fn manifest(constraint: &str) -> String {
        format!(
            r#"{{"skill": {{"name": "s", "version": "1"}}, "capabilities": [{{"name": "c",
               "resource": "https://a.example.com/", "operations": ["GET"],
               "constraints": [{constraint}]}}]}}"#
        )
    }

    fn keyword_of(file: &PolicyFile) -> Option<ConstraintKeyword> {
        let capability = file.skills.first()?.capabilities.first()?;
        Some(capability.constraints.first()?.kind.keyword())
    }

    /// Both front ends read every keyword of the table, each to the same kind of constraint,
    /// and reject a word that is not in it.
    #[test]
    fn the_manifest_and_cap_forms_accept_the_same_constraint_keywords() {
        for keyword in ConstraintKeyword::ALL {
            let cap = parse(FileId(0), &cap_file(sample(keyword)))
                .unwrap_or_else(|e| panic!("{keyword}: {e:?}"));
            assert_eq!(keyword_of(&cap), Some(keyword));
            let json = to_json_text(&cap).unwrap();
            let type_member = format!("\"type\": \"{}\"", keyword.name());
            assert!(json.contains(&type_member), "{json}");
            let from_json =
                parse_manifest(FileId(0), &json).unwrap_or_else(|e| panic!("{keyword}: {e:?}"));
            assert_eq!(keyword_of(&from_json), Some(keyword));
        }
        for word in [
            "fieldEqual",
            "FieldEquals",
            "optional",
            "rate_limit",
            "none",
        ] {
            assert!(
                parse(FileId(0), &cap_file(&format!("{word} payload.a == 1"))).is_err(),
                "{word}"
            );
            let errors = parse_manifest(
                FileId(0),
                &manifest(&format!(
                    r#"{{"type": "{word}", "field": "payload.a", "value": 1}}"#
                )),
            )
            .unwrap_err();
            assert!(
                errors
                    .iter()
                    .any(|e| e.to_string().contains("unknown constraint type")),
                "{word}: {errors:?}"
            );
        }
    }

    /// `optional` applies to the same kinds in both forms: the manifest's lowerer and the
    /// compiler (which checks `.cap`) both follow [`ConstraintKeyword::may_be_optional`].
    #[test]
    fn optional_applies_to_the_same_kinds_in_both_forms() {
        for keyword in ConstraintKeyword::ALL {
            let optional = format!("optional {}", sample(keyword));
            let cap = parse(FileId(0), &cap_file(&optional))
                .unwrap_or_else(|e| panic!("{keyword}: {e:?}"));
            let compiled = crate::compile::compile_skills(
                &[cap],
                &crate::span::SourceMap::new(),
                &crate::Limits::DEFAULT,
            );
            assert_eq!(compiled.is_ok(), keyword.may_be_optional(), "{keyword}");

            let plain = parse(FileId(0), &cap_file(sample(keyword))).unwrap();
            let mut json = to_json(&plain).unwrap();
            json["capabilities"][0]["constraints"][0]["optional"] = true.into();
            match parse_manifest(FileId(0), &json.to_string()) {
                Ok(_) => assert!(keyword.may_be_optional(), "{keyword}"),
                Err(errors) => {
                    assert!(!keyword.may_be_optional(), "{keyword}: {errors:?}");
                    assert_eq!(
                        errors[0].to_string(),
                        format!("`optional` does not apply to `{keyword}`")
                    );
                    assert_eq!(
                        errors[0].help.as_deref(),
                        Some(
                            "only field constraints (fieldEquals, fieldMatches, fieldRange, \
                             actorBinding) may be optional"
                        )
                    );
                }
            }
        }
    }
}
