//! The compiler: AST → checked, verified bytecode.
//!
//! [`compile_skills`] takes the parsed files of one policy set and returns a
//! [`CompiledSkill`] per skill, or every [`CompileError`] found in any of them — a policy is
//! rejected whole. Per capability it checks the header rules (`check.rs`), emits the constraint
//! program (`emit.rs`, which resolves paths and compiles regexes, schemas and windows), and runs
//! the verifier: a program the verifier rejects is a compiler bug, reported as an error rather
//! than loaded. Each skill also gets its canonical manifest and revision (its SHA-256).
//!
//! [`load_capc`] loads a `.capc` file: the decoder, then each skill compiled again from its
//! embedded manifest and compared (`capc.rs`).

mod capc;
mod check;
mod emit;
pub mod error;
pub mod schema;
pub mod window;

use std::collections::HashMap;
use std::sync::Arc;

pub use capc::load_capc;
pub use error::CompileError;

use crate::bytecode::matcher::MatcherCache;
use crate::bytecode::program::{CompiledCapability, CompiledSkill, SensitivityLevel};
use crate::bytecode::resource::ResourcePattern;
use crate::bytecode::verify::verify;
use crate::limits::Limits;
use crate::manifest::ManifestError;
use crate::name::Name;
use crate::revision::Revision;
use crate::span::{SourceMap, Span};
use crate::syntax::ast::{PolicyFile, Skill};

/// Compiles every skill of every file; skill names must be unique across the set.
pub fn compile_skills(
    files: &[PolicyFile],
    sources: &SourceMap,
    limits: &Limits,
) -> Result<Vec<CompiledSkill>, Vec<CompileError>> {
    let mut errors = Vec::new();
    let mut skills = Vec::new();
    let mut seen: HashMap<&str, crate::span::Span> = HashMap::new();
    // One cache for the whole set: a pattern used by many capabilities compiles once.
    let mut matchers = MatcherCache::with_total(limits.max_regex_total_bytes);
    for file in files {
        for skill in &file.skills {
            if let Some(first) = seen.get(skill.name.node.as_str()) {
                errors.push(
                    CompileError::new(
                        skill.name.span,
                        format!("skill `{}` is declared twice", skill.name.node),
                    )
                    .with_help(format!("first declared at {}", sources.location(*first))),
                );
                continue;
            }
            seen.insert(&skill.name.node, skill.name.span);
            if let Some(compiled) = compile_skill_sharing(
                skill,
                sources,
                limits,
                &mut errors,
                &mut matchers,
                Reported::NONE,
            ) {
                skills.push(compiled);
            }
        }
    }
    if errors.is_empty() {
        Ok(skills)
    } else {
        Err(errors)
    }
}

/// Compiles one skill, pushing its errors; `None` when it had any.
#[cfg(any(test, feature = "internals"))]
pub fn compile_skill(
    skill: &Skill,
    sources: &SourceMap,
    limits: &Limits,
    errors: &mut Vec<CompileError>,
) -> Option<CompiledSkill> {
    compile_skill_sharing(
        skill,
        sources,
        limits,
        errors,
        &mut MatcherCache::with_total(limits.max_regex_total_bytes),
        Reported::NONE,
    )
}

/// Checks files that a front end could read only in part (`parse_partial`,
/// `parse_manifest_partial`) and returns their compile errors — regexes, schemas, zones, risk,
/// verbs — so that a load lists them with the front end's errors, not after those are fixed
/// (SPEC §7). Each file comes with the spans of the errors its front end reported: where one
/// lies inside a skill or capability, the checks that need a whole field there (a missing
/// `resource`, `version` or `operations`, the justification a write verb requires, a blank or
/// repeated name) stay quiet, since that field may be the malformed one the front end dropped.
pub fn check_partial(
    files: &[(PolicyFile, Vec<Span>)],
    sources: &SourceMap,
    limits: &Limits,
) -> Vec<CompileError> {
    let mut errors = Vec::new();
    let mut matchers = MatcherCache::with_total(limits.max_regex_total_bytes);
    for (file, reported) in files {
        for skill in &file.skills {
            compile_skill_sharing(
                skill,
                sources,
                limits,
                &mut errors,
                &mut matchers,
                Reported(reported),
            );
        }
    }
    errors
}

/// The spans of the errors a front end reported in a file it read only in part (see
/// [`check_partial`]); empty for a file read whole.
#[derive(Debug, Clone, Copy)]
struct Reported<'a>(&'a [Span]);

impl Reported<'_> {
    const NONE: Reported<'static> = Reported(&[]);

    /// True when a reported error lies inside `span`.
    fn within(self, span: Span) -> bool {
        self.0
            .iter()
            .any(|e| e.file == span.file && e.start >= span.start && e.end <= span.end)
    }

    /// True when a reported error lies in the skill's header: inside the skill, outside every
    /// capability.
    fn in_header(self, skill: &Skill) -> bool {
        self.0.iter().any(|e| {
            Reported(std::slice::from_ref(e)).within(skill.span)
                && !skill
                    .capabilities
                    .iter()
                    .any(|c| Reported(std::slice::from_ref(e)).within(c.span))
        })
    }
}

/// [`compile_skill`], building regexes through `matchers`, shared with the other skills of the
/// set.
fn compile_skill_sharing(
    skill: &Skill,
    sources: &SourceMap,
    limits: &Limits,
    errors: &mut Vec<CompileError>,
    matchers: &mut MatcherCache,
    reported: Reported<'_>,
) -> Option<CompiledSkill> {
    let before = errors.len();
    let whole_header = !reported.in_header(skill);
    if skill.name.node.trim().is_empty() && !reported.within(skill.name.span) {
        errors.push(blank_name("skill", skill.name.span));
    }
    let version = match &skill.version {
        Some(v) if !v.node.trim().is_empty() => v.node.clone(),
        Some(v) => {
            errors.push(CompileError::new(v.span, "`version` is blank"));
            String::new()
        }
        None => {
            if whole_header {
                errors.push(check::missing(
                    skill.name.span,
                    "version",
                    "version \"1.0.0\"",
                ));
            }
            String::new()
        }
    };
    let skill_risk = skill
        .risk
        .as_ref()
        .map_or(0, |r| check::check_risk(r, errors));
    let skill_sensitivity =
        check::sensitivity(skill.sensitivity.as_ref()).unwrap_or(SensitivityLevel::Normal);
    if skill.capabilities.len() > limits.max_capabilities_per_skill {
        errors.push(CompileError::new(
            skill.name.span,
            format!(
                "skill `{}` has {} capabilities, more than the limit of {}",
                skill.name.node,
                skill.capabilities.len(),
                limits.max_capabilities_per_skill
            ),
        ));
    }
    let mut names: HashMap<&str, crate::span::Span> = HashMap::new();
    let mut capabilities = Vec::new();
    for capability in &skill.capabilities {
        // A capability the front end reported an error in may lack a field it wrote.
        let whole = !reported.within(capability.span);
        if capability.name.node.trim().is_empty() && whole {
            errors.push(blank_name("capability", capability.name.span));
        }
        if let (Some(first), true) = (names.get(capability.name.node.as_str()), whole) {
            errors.push(
                CompileError::new(
                    capability.name.span,
                    format!(
                        "capability `{}` is declared twice in skill `{}`",
                        capability.name.node, skill.name.node
                    ),
                )
                .with_help(format!("first declared at {}", sources.location(*first))),
            );
            continue;
        }
        names.insert(&capability.name.node, capability.name.span);
        let pattern = match &capability.resource {
            None => {
                if whole {
                    errors.push(check::missing(
                        capability.name.span,
                        "resource",
                        "resource http \"https://host/path\"",
                    ));
                }
                None
            }
            Some(resource) => {
                match ResourcePattern::compile(resource.node.kind, &resource.node.locator) {
                    Ok(pattern) => Some(pattern),
                    Err(e) => {
                        errors.push(CompileError {
                            span: resource.span,
                            message: e.message,
                            help: e.help,
                        });
                        None
                    }
                }
            }
        };
        let kind = capability.resource.as_ref().map(|r| r.node.kind);
        if capability.operations.is_empty() {
            if whole {
                errors.push(check::missing(
                    capability.name.span,
                    "operations",
                    "operations GET",
                ));
            }
        } else if let Some(kind) = kind {
            check::check_operations(kind, &capability.operations, errors);
        }
        let lifetime = check::check_lifetime(capability.lifetime.as_ref(), errors);
        if whole {
            check::check_justification(capability, kind, errors);
        }
        let required_autonomy = capability
            .risk
            .as_ref()
            .map_or(skill_risk, |r| check::check_risk(r, errors));
        let sensitivity =
            check::sensitivity(capability.sensitivity.as_ref()).unwrap_or(skill_sensitivity);
        let emitter = emit::Emitter::new(pattern.as_ref(), sources, limits, errors, matchers);
        let (program, rate_limits) = emitter.capability(&capability.constraints);
        let (Some(pattern), true) = (pattern, errors.len() == before) else {
            continue;
        };
        match verify(program) {
            Ok(program) => capabilities.push(CompiledCapability {
                name: Name::interned(&capability.name.node),
                location: Some(sources.location(capability.name.span)),
                resource: pattern,
                operations: capability
                    .operations
                    .iter()
                    .map(|o| Box::from(o.node.as_str()))
                    .collect(),
                lifetime,
                required_autonomy,
                sensitivity,
                justification: capability.justification.as_ref().map(|j| j.node.clone()),
                program,
                rate_limits,
            }),
            Err(e) => errors.push(CompileError::new(
                capability.name.span,
                format!("internal compiler error: {e}"),
            )),
        }
    }
    if errors.len() != before {
        return None;
    }
    let (manifest, revision) = match canonical_manifest(skill) {
        Ok(canonical) => canonical,
        Err(e) => {
            // The checks above refuse every AST the JSON form cannot express; fail closed should
            // one slip through, rather than pin grants to something else.
            errors.push(CompileError {
                span: e.span,
                message: format!(
                    "skill `{}` has no canonical manifest form: {}",
                    skill.name.node, e.message
                ),
                help: e.help,
            });
            return None;
        }
    };
    Some(CompiledSkill {
        name: Name::interned(&skill.name.node),
        version,
        hash: skill.hash.as_ref().map(|h| h.node.clone()),
        signer: skill.signer.as_ref().map(|s| s.node.clone()),
        location: Some(sources.location(skill.name.span)),
        revision,
        manifest,
        capabilities,
    })
}

/// A skill or capability named `""` (or only spaces): requests, grants, revocations and reasons
/// name it, and nobody can tell it apart there.
fn blank_name(what: &str, span: Span) -> CompileError {
    CompileError::new(span, format!("{what} name is empty")).with_help(format!(
        "give the {what} a name: requests, grants and deny reasons name it"
    ))
}

/// The skill's canonical manifest and its revision (the manifest's SHA-256). The canonical
/// manifest is the JSON manifest form written compactly with keys in byte order
/// (`manifest::CanonicalSkill`): it has no source positions, so reformatting a file keeps its
/// revision, and it does not depend on how serde_json orders maps in the build at hand.
fn canonical_manifest(skill: &Skill) -> Result<(Arc<str>, Revision), ManifestError> {
    let canonical = crate::manifest::CanonicalSkill::new(skill)?;
    let mut text = Vec::new();
    let written = canonical.write_to(&mut text);
    // Writing into a `Vec` does not fail, and serde_json writes UTF-8.
    let text = written
        .ok()
        .and_then(|()| String::from_utf8(text).ok())
        .ok_or_else(|| {
            ManifestError::new(skill.name.span, "the canonical manifest is not UTF-8 text")
        })?;
    let revision = Revision::of_manifest(text.as_bytes());
    Ok((Arc::from(text), revision))
}

#[cfg(test)]
mod tests {
    use super::canonical_manifest;
    use crate::revision::Revision;
    use crate::span::FileId;
    use crate::syntax::ast::{PolicyFile, Skill};

    fn canonical(skill: &Skill) -> String {
        let (text, revision) = canonical_manifest(skill).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(revision, Revision::of_manifest(text.as_bytes()));
        text.to_string()
    }

    fn bundled_policies() -> Vec<PolicyFile> {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/policies");
        let mut files = Vec::new();
        for dir in std::fs::read_dir(root).unwrap_or_else(|e| panic!("{e}")) {
            let dir = dir.unwrap_or_else(|e| panic!("{e}")).path();
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let parsed = match path.extension().and_then(|e| e.to_str()) {
                    Some("cap") => crate::syntax::parse(FileId(0), &text).ok(),
                    Some("json") => crate::manifest::parse_manifest(FileId(0), &text).ok(),
                    _ => None,
                };
                files.extend(parsed);
            }
        }
        files
    }

    const SAMPLE: &str = r#"skill "s" {
  version "2.0.0"
  capability "c" {
    resource http "https://api.example.com/v1/{org}/items"
    operations GET, "custom:op"
    justification "Tab\t, quote \" and é."
    fieldEquals payload.a in [1, 2.5, -0.0, "x", null, true]
    fieldMatches payload.items[*]["odd key"] ~ /^a+$/i
    payloadSchema { "type": "object", "required": ["z", "a"], "properties": { "z": { "const": { "b": 1, "a": [2, {"y": 0, "x": 1}] } }, "a": false } }
  }
}"#;

    fn skills() -> Vec<Skill> {
        let files = bundled_policies();
        assert!(files.len() >= 6, "{} policy files found", files.len());
        let sample = crate::syntax::parse(FileId(0), SAMPLE).unwrap_or_else(|e| panic!("{e:?}"));
        files
            .into_iter()
            .chain([sample])
            .flat_map(|file| file.skills)
            .collect()
    }

    /// The canonical manifest is the manifest form as a sorted `serde_json::Value` prints it:
    /// compact, keys in byte order.
    #[test]
    fn the_canonical_manifest_is_the_sorted_json_form() {
        for skill in skills() {
            let through_value = crate::manifest::skill_to_json(&skill)
                .map(|value| value.to_string())
                .unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(canonical(&skill), through_value, "{}", skill.name.node);
        }
    }

    /// A `.capc` file is checked by compiling its embedded manifest: read back as a manifest,
    /// the canonical text gives itself again, so the revision survives the trip.
    #[test]
    fn the_canonical_manifest_reads_back_to_itself() {
        for skill in skills() {
            let text = canonical(&skill);
            let file = crate::manifest::parse_manifest(FileId(0), &text)
                .unwrap_or_else(|e| panic!("{}: {e:?}", skill.name.node));
            let [again] = file.skills.as_slice() else {
                panic!("one skill expected")
            };
            assert_eq!(canonical(again), text, "{}", skill.name.node);
        }
    }
}
