//! Loading a `.capc` file: the decoder, then every skill checked against the manifest embedded
//! with it.
//!
//! [`load_capc`] is the one way to load a `.capc` file. `bytecode::decode` checks every byte,
//! that each skill's stored revision is the SHA-256 of its stored manifest, and verifies every
//! program; here each manifest is compiled again and the result compared with the decoded skill,
//! field for field but for source locations. So what the engine runs is what the embedded
//! manifest says, and a reviewer who reads the manifest (`capgate convert` writes it readably)
//! sees what runs — whoever made the file. A file is not signed: its integrity says nothing of
//! who wrote the manifest (`docs/bytecode.md`).
//!
//! The compile reuses every regex the decoder built (one `MatcherCache`) and no source map (a
//! location is not compared, and the canonical manifest is one line, whose columns would cost a
//! scan each), so it costs parsing the manifest's JSON, the compiler's checks and emitting, not
//! building regexes again.

use super::{CompileError, Reported, compile_skill_sharing};
use crate::bytecode::decode::{CapcContents, CapcError, decode_capc};
use crate::bytecode::encode::encode_without_locations;
use crate::bytecode::matcher::MatcherCache;
use crate::bytecode::program::CompiledSkill;
use crate::limits::Limits;
use crate::span::{FileId, SourceMap};

/// Loads a `.capc` file under `limits`: the decoder (header,
/// checksum, every field, revisions, the verifier), then each skill compiled again from its
/// embedded manifest and compared with the decoded one. All or nothing: the first problem
/// rejects the whole file.
pub fn load_capc(bytes: &[u8], limits: &Limits) -> Result<CapcContents, CapcError> {
    let (policy, mut matchers) = decode_capc(bytes, limits)?;
    for skill in &policy.skills {
        check_against_manifest(skill, limits, &mut matchers)?;
    }
    Ok(policy)
}

/// Compiles `skill`'s embedded manifest and compares the result with `skill`, less locations.
fn check_against_manifest(
    skill: &CompiledSkill,
    limits: &Limits,
    matchers: &mut MatcherCache,
) -> Result<(), CapcError> {
    let invalid = |problem: String| CapcError::ManifestInvalid {
        skill: skill.name.to_string(),
        problem,
    };
    let first = |messages: Vec<String>| {
        let message = messages.into_iter().next().unwrap_or_default();
        invalid(format!("does not compile: {message}"))
    };
    let file = crate::manifest::parse_manifest(FileId(0), &skill.manifest)
        .map_err(|errors| first(errors.into_iter().map(|e| e.message).collect()))?;
    let [source] = file.skills.as_slice() else {
        return Err(invalid("does not hold exactly one skill".to_owned()));
    };
    let mut errors: Vec<CompileError> = Vec::new();
    let compiled = compile_skill_sharing(
        source,
        &SourceMap::new(),
        limits,
        &mut errors,
        matchers,
        Reported::NONE,
    );
    let Some(compiled) = compiled else {
        return Err(first(errors.into_iter().map(|e| e.message).collect()));
    };
    if compiled.manifest != skill.manifest {
        return Err(invalid(
            "is not canonical (compact JSON, object keys in byte order, as `capgate compile` writes it)"
                .to_owned(),
        ));
    }
    let mismatch = |capability: Option<&str>| CapcError::ManifestMismatch {
        skill: skill.name.to_string(),
        capability: capability.map(str::to_owned),
    };
    let (header, capabilities) = encode_without_locations(skill)?;
    let (expected_header, expected) = encode_without_locations(&compiled)?;
    if header != expected_header || capabilities.len() != expected.len() {
        return Err(mismatch(None));
    }
    let differs = skill
        .capabilities
        .iter()
        .zip(capabilities.iter().zip(&expected))
        .find(|(_, (stored, expected))| stored != expected);
    match differs {
        Some((capability, _)) => Err(mismatch(Some(&capability.name))),
        None => Ok(()),
    }
}
