//! Decoding a `.capc` file: header, checksum, a bounds-checked decode of the body, each skill's
//! revision against its embedded manifest, and the verifier on every program — without the
//! policy compiler.
//!
//! - `decode_capc` reads bytes into a [`CapcContents`] (the skills plus the names of the
//!   source files their locations point into), or a [`CapcError`]. `compile::load_capc`, the
//!   entry point, then compiles each skill's embedded manifest and compares (see
//!   `docs/bytecode.md`); a policy straight from this decoder has not been checked that way.
//! - [`CapcError`] says what was wrong and where (a byte offset into the file, the skill and
//!   capability).
//!
//! Nothing here trusts the file: every count is checked against the bytes left before anything
//! is allocated, every table index is checked against its table, every enum tag and string is
//! validated, JSON literals are nested at most [`MAX_VALUE_DEPTH`] deep, and the rules the
//! compiler enforces at the edges of the engine (rate-limit counts, `lifetime call 0`, window
//! shapes, binding slots, schema `$ref` cycles) are enforced again. A skill's stored revision
//! must be the SHA-256 of its stored manifest. Finally [`verify`] runs on every program, so the
//! engine only ever holds [`VerifiedProgram`](super::verify::VerifiedProgram)s, exactly as when
//! it compiles sources. Decoding never panics, whatever the input (`crates/capgate-cli/tests/it/capc.rs` feeds it
//! random and mutated bytes).
//!
//! Regexes, resource templates and windows are rebuilt from their stored source with the same
//! builders the compiler uses ([`Matcher::build`] with the same size limits,
//! [`ResourcePattern::compile`], `chrono_tz`); payload-schema arenas are decoded node by node.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde_json::{Map, Number, Value};

use super::encode::{FORMAT_VERSION, MAGIC, MAX_VALUE_DEPTH, fnv1a64, number_tag, value_tag};
use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx,
};
use super::matcher::{BuildError, Matcher, MatcherCache};
use super::op::{Op, OperandSource};
use super::program::{
    BoundConst, BoundSet, CheckInfo, Cmp, CompiledCapability, CompiledPath, CompiledRegex,
    CompiledSkill, JsonRoot, LifetimeSpec, PathAccess, Program, RateLimitSpec, SensitivityLevel,
    ValueSet,
};
use super::resource::{ResourceKind, ResourcePattern};
use super::schema::{
    Condition, ContainsRule, DEFAULT_SCHEMA_DEPTH_LIMIT, DEFAULT_SCHEMA_STEP_LIMIT, Decimal,
    Format, SchemaNode, SchemaNodeId, SchemaObject, SchemaPattern, SchemaProgram, Shape, TypeSet,
};
use super::verify::{VerifyError, verify};
use super::window::{CompiledWindow, DayInterval, MINUTES_PER_DAY, WindowRule};
use crate::limits::Limits;
use crate::name::Name;
use crate::revision::Revision;
use crate::span::Location;
use crate::value::Segment;
use crate::vocabulary::ConstraintKeyword;

use crate::limits::MAX_RATE_LIMITS;

/// The scale of autonomy scores and risk levels: `risk 0..=100` in the language
/// (`docs/language.md`) and a request's `autonomy` (`docs/semantics.md`). A fact of the format,
/// not a limit.
const AUTONOMY_SCALE: std::ops::RangeInclusive<u8> = 0..=100;

/// What a `.capc` file holds: compiled skills, ready for an engine.
#[derive(Debug, Clone)]
pub struct CapcContents {
    /// The skills, verified, in the order they were written.
    pub skills: Vec<CompiledSkill>,
    /// The source files the skills were compiled from (the files their locations name).
    pub source_files: Vec<Arc<str>>,
    /// The capgate version that wrote the file.
    pub written_by: String,
}

/// Why a `.capc` file was not loaded (or could not be written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum CapcError {
    /// The file does not start with [`MAGIC`].
    #[error("not a `.capc` file: the magic bytes are missing")]
    #[diagnostic(help("write one with `capgate compile -p POLICY... -o FILE.capc`"))]
    BadMagic,
    /// The format version is not the one this build reads.
    #[error("{}", version_message(*found, *supported))]
    UnsupportedVersion {
        /// The file's version.
        found: u16,
        /// The version this build reads.
        supported: u16,
    },
    /// The header's body length does not match the bytes that follow it.
    #[error(
        "`.capc` body is {found} bytes, the header says {expected}: the file is truncated or has trailing bytes"
    )]
    BodyLength {
        /// What the header says.
        expected: u64,
        /// What is there.
        found: u64,
    },
    /// The body does not hash to the header's checksum.
    #[error(
        "`.capc` checksum mismatch (header {expected:016x}, body {found:016x}): the file is corrupt"
    )]
    ChecksumMismatch {
        /// What the header says.
        expected: u64,
        /// What the body hashes to.
        found: u64,
    },
    /// The file ends inside a field.
    #[error("`.capc` file ends early at byte {at} while reading {what}{place}")]
    Truncated {
        /// Byte offset in the file.
        at: usize,
        /// Where: ` of skill `s` capability `c``, or empty outside a skill.
        place: String,
        /// The field being read.
        what: &'static str,
    },
    /// A field holds a value no compiler writes.
    #[error("malformed `.capc` file at byte {at}: {message}")]
    Malformed {
        /// Byte offset in the file (of the end of the field at fault).
        at: usize,
        /// What is wrong.
        message: String,
    },
    /// A program failed verification.
    #[error("skill `{skill}` capability `{capability}`: {error}")]
    Verify {
        /// The skill.
        skill: String,
        /// The capability.
        capability: String,
        /// What the verifier found.
        error: VerifyError,
    },
    /// A skill's stored revision is not the SHA-256 of its stored manifest.
    #[error(
        "skill `{skill}`: the stored revision {stored} is not the SHA-256 of the skill's manifest ({computed})"
    )]
    RevisionMismatch {
        /// The skill.
        skill: String,
        /// The revision the file states.
        stored: Revision,
        /// The SHA-256 of the manifest the file holds.
        computed: Revision,
    },
    /// A skill's embedded manifest is not a canonical manifest that compiles.
    #[error("skill `{skill}`: the embedded manifest {problem}")]
    ManifestInvalid {
        /// The skill.
        skill: String,
        /// What is wrong with it (`does not compile: ...`, `is not canonical ...`).
        problem: String,
    },
    /// A skill's compiled form is not what its embedded manifest compiles to.
    #[error("{}", mismatch_message(skill, capability.as_deref()))]
    ManifestMismatch {
        /// The skill.
        skill: String,
        /// The first capability that differs; `None` when the skill's own fields (name, version,
        /// hash, signer, the list of capabilities) differ.
        capability: Option<String>,
    },
    /// A policy could not be written.
    #[error("cannot write a `.capc` file: {0}")]
    Encode(String),
    /// The limits to load under set a field above its fixed bound.
    #[error(transparent)]
    Limits(#[from] crate::limits::LimitError),
}

impl CapcError {
    pub(crate) fn encode(message: impl Into<String>) -> Self {
        CapcError::Encode(message.into())
    }
}

/// [`CapcError::UnsupportedVersion`]'s message: an older file is recompiled from its sources, a
/// newer one needs the capgate that wrote it or a recompile.
fn version_message(found: u16, supported: u16) -> String {
    if found < supported {
        format!(
            "`.capc` format version {found} is older than version {supported}, which this capgate reads: recompile the policy sources with `capgate compile`"
        )
    } else {
        format!(
            "`.capc` format version {found} is not supported (this capgate reads version {supported}): recompile the policy sources with this capgate"
        )
    }
}

/// [`CapcError::ManifestMismatch`]'s message.
fn mismatch_message(skill: &str, capability: Option<&str>) -> String {
    match capability {
        Some(capability) => format!(
            "skill `{skill}` capability `{capability}`: the bytecode is not what the skill's embedded manifest compiles to"
        ),
        None => format!(
            "skill `{skill}`: its name, version, hash, signer or list of capabilities is not what its embedded manifest compiles to"
        ),
    }
}

/// Decodes a `.capc` file: checks the header, the body length and checksum, decodes every skill
/// with every index checked and its revision checked against its manifest, rebuilds regexes,
/// templates and windows under `limits`, and verifies every program. All or nothing: the first
/// problem rejects the whole file. Also returns the regexes built, for the compiler to share
/// when it checks the skills against their manifests.
pub(crate) fn decode_capc(
    bytes: &[u8],
    limits: &Limits,
) -> Result<(CapcContents, MatcherCache), CapcError> {
    limits.check()?;
    let mut header = Reader::new(bytes, 0);
    if header.take(MAGIC.len(), "the magic bytes").ok() != Some(MAGIC.as_slice()) {
        return Err(CapcError::BadMagic);
    }
    let version = header.u16("the format version")?;
    if version != FORMAT_VERSION {
        return Err(CapcError::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let version_len = usize::from(header.u8("the crate version length")?);
    let written_by = header.take(version_len, "the crate version")?;
    let written_by = std::str::from_utf8(written_by)
        .map_err(|_| header.malformed("the crate version is not UTF-8"))?
        .to_owned();
    let body_len = header.u64("the body length")?;
    let checksum = header.u64("the checksum")?;
    let body = header.rest();
    let found_len = u64::try_from(body.len()).unwrap_or(u64::MAX);
    if found_len != body_len {
        return Err(CapcError::BodyLength {
            expected: body_len,
            found: found_len,
        });
    }
    let found = fnv1a64(body);
    if found != checksum {
        return Err(CapcError::ChecksumMismatch {
            expected: checksum,
            found,
        });
    }
    let mut reader = Reader::new(body, header.pos);
    reader.limits = *limits;
    reader.matchers = MatcherCache::with_total(limits.max_regex_total_bytes);
    let file_count = reader.count("the file table", 4)?;
    for _ in 0..file_count {
        let name: Arc<str> = reader.str("a file name")?.into();
        reader.files.push(name);
    }
    let skill_count = reader.count("the skill table", 1)?;
    let mut skills = Vec::with_capacity(skill_count);
    let mut names = HashSet::new();
    for _ in 0..skill_count {
        let skill = reader.skill()?;
        if !names.insert(skill.name.clone()) {
            return Err(reader.malformed(format!("skill `{}` is declared twice", skill.name)));
        }
        skills.push(skill);
    }
    if !reader.rest().is_empty() {
        return Err(reader.malformed("trailing bytes after the last skill"));
    }
    Ok((
        CapcContents {
            skills,
            source_files: reader.files,
            written_by,
        },
        reader.matchers,
    ))
}

/// A cursor over the file that never reads past the end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes` in the file, for messages.
    base: usize,
    files: Vec<Arc<str>>,
    limits: Limits,
    /// The regexes this file has rebuilt (shared by every capability that uses one).
    matchers: MatcherCache,
    /// The skill and capability being read, named in messages (`skill `s` capability `c``);
    /// empty between skills.
    place: String,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], base: usize) -> Self {
        Reader {
            bytes,
            pos: 0,
            base,
            files: Vec::new(),
            limits: Limits::DEFAULT,
            matchers: MatcherCache::default(),
            place: String::new(),
        }
    }

    fn at(&self) -> usize {
        self.base.saturating_add(self.pos)
    }

    fn malformed(&self, message: impl Into<String>) -> CapcError {
        let message = message.into();
        CapcError::Malformed {
            at: self.at(),
            message: if self.place.is_empty() {
                message
            } else {
                format!("{}: {message}", self.place)
            },
        }
    }

    /// ` of skill `s` capability `c``, for a truncation message; empty between skills.
    fn place_suffix(&self) -> String {
        if self.place.is_empty() {
            String::new()
        } else {
            format!(" of {}", self.place)
        }
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], CapcError> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.bytes.get(self.pos..end)) {
            Some(slice) => {
                self.pos = self.pos.saturating_add(n);
                Ok(slice)
            }
            None => Err(CapcError::Truncated {
                at: self.at(),
                place: self.place_suffix(),
                what,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CapcError> {
        let slice = self.take(N, what)?;
        <[u8; N]>::try_from(slice).map_err(|_| CapcError::Truncated {
            at: self.at(),
            place: self.place_suffix(),
            what,
        })
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, CapcError> {
        Ok(u8::from_le_bytes(self.array(what)?))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, CapcError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, CapcError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, CapcError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn usize(&mut self, what: &'static str) -> Result<usize, CapcError> {
        let n = self.u32(what)?;
        usize::try_from(n).map_err(|_| self.malformed(format!("{what} does not fit in memory")))
    }

    fn bool(&mut self, what: &'static str) -> Result<bool, CapcError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            tag => Err(self.malformed(format!("{what} is {tag}, not a boolean"))),
        }
    }

    /// A list length, checked against the bytes left (`min_size` bytes per item at least), so a
    /// forged count cannot make the decoder allocate more than the file's size.
    fn count(&mut self, what: &'static str, min_size: usize) -> Result<usize, CapcError> {
        let n = self.usize(what)?;
        let needed = n.saturating_mul(min_size.max(1));
        if needed > self.rest().len() {
            return Err(CapcError::Truncated {
                at: self.at(),
                place: self.place_suffix(),
                what,
            });
        }
        Ok(n)
    }

    fn tag(&mut self, what: &'static str, max: u8) -> Result<u8, CapcError> {
        let tag = self.u8(what)?;
        if tag > max {
            return Err(self.malformed(format!("{what} has unknown tag {tag}")));
        }
        Ok(tag)
    }

    fn str(&mut self, what: &'static str) -> Result<String, CapcError> {
        let len = self.count(what, 1)?;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(text) => Ok(text.to_owned()),
            Err(_) => Err(self.malformed(format!("{what} is not UTF-8"))),
        }
    }

    fn opt<T>(
        &mut self,
        what: &'static str,
        mut read: impl FnMut(&mut Self) -> Result<T, CapcError>,
    ) -> Result<Option<T>, CapcError> {
        if self.bool(what)? {
            read(self).map(Some)
        } else {
            Ok(None)
        }
    }

    fn list<T>(
        &mut self,
        what: &'static str,
        min_size: usize,
        mut read: impl FnMut(&mut Self) -> Result<T, CapcError>,
    ) -> Result<Vec<T>, CapcError> {
        let n = self.count(what, min_size)?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(read(self)?);
        }
        Ok(items)
    }

    fn opt_str(&mut self, what: &'static str) -> Result<Option<String>, CapcError> {
        self.opt(what, |r| r.str(what))
    }

    fn opt_u64(&mut self, what: &'static str) -> Result<Option<u64>, CapcError> {
        self.opt(what, |r| r.u64(what))
    }

    fn duration(&mut self, what: &'static str) -> Result<Duration, CapcError> {
        let secs = self.u64(what)?;
        let nanos = self.u32(what)?;
        if nanos >= 1_000_000_000 {
            return Err(self.malformed(format!("{what} has {nanos} nanoseconds")));
        }
        Ok(Duration::new(secs, nanos))
    }

    fn location(&mut self) -> Result<Option<Location>, CapcError> {
        self.opt("a location", |r| {
            let file = r.usize("a location's file")?;
            let Some(file) = r.files.get(file).cloned() else {
                return Err(r.malformed(format!("a location names file {file}, not in the table")));
            };
            let line = r.u32("a location's line")?;
            let column = r.u32("a location's column")?;
            Ok(Location { file, line, column })
        })
    }

    fn skill(&mut self) -> Result<CompiledSkill, CapcError> {
        let name = Name::interned(&self.str("a skill name")?);
        self.place = format!("skill `{name}`");
        let version = self.str("a skill version")?;
        let hash = self.opt_str("a skill hash")?;
        let signer = self.opt_str("a skill signer")?;
        let location = self.location()?;
        let revision = Revision::from_bytes(self.array("a skill revision")?);
        let manifest: Arc<str> = self.str("a skill manifest")?.into();
        let computed = Revision::of_manifest(manifest.as_bytes());
        if computed != revision {
            return Err(CapcError::RevisionMismatch {
                skill: name.to_string(),
                stored: revision,
                computed,
            });
        }
        let count = self.count("the capability table", 1)?;
        if count > self.limits.max_capabilities_per_skill {
            return Err(self.malformed(format!(
                "{count} capabilities, more than the limit of {}",
                self.limits.max_capabilities_per_skill
            )));
        }
        let mut capabilities: Vec<CompiledCapability> = Vec::with_capacity(count);
        for _ in 0..count {
            let capability = self.capability(&name)?;
            if capabilities.iter().any(|c| c.name == capability.name) {
                // The message's place names the skill.
                return Err(self.malformed(format!(
                    "capability `{}` is declared twice",
                    capability.name
                )));
            }
            capabilities.push(capability);
        }
        // Done with this skill: messages between skills name none.
        self.place.clear();
        Ok(CompiledSkill {
            name,
            version,
            hash,
            signer,
            location,
            revision,
            manifest,
            capabilities,
        })
    }

    fn capability(&mut self, skill: &str) -> Result<CompiledCapability, CapcError> {
        let name = Name::interned(&self.str("a capability name")?);
        self.place = format!("skill `{skill}` capability `{name}`");
        let location = self.location()?;
        let kind = self.usize("a resource kind")?;
        let Some((kind, _)) = ResourceKind::ALL.get(kind).copied() else {
            return Err(self.malformed(format!("resource kind {kind} is unknown")));
        };
        let locator = self.str("a resource locator")?;
        let resource = ResourcePattern::compile(kind, &locator).map_err(|e| {
            self.malformed(format!("resource template `{locator}` is invalid: {e}"))
        })?;
        let operations = self.list("the operation list", 4, |r| {
            r.str("an operation").map(String::into_boxed_str)
        })?;
        let lifetime = self.lifetime()?;
        let required_autonomy = self.u8("the required autonomy")?;
        if !AUTONOMY_SCALE.contains(&required_autonomy) {
            return Err(self.malformed(format!(
                "required autonomy {required_autonomy} is outside {}..={}",
                AUTONOMY_SCALE.start(),
                AUTONOMY_SCALE.end()
            )));
        }
        let sensitivity = match self.tag("a sensitivity", 1)? {
            0 => SensitivityLevel::Normal,
            _ => SensitivityLevel::Elevated,
        };
        let justification = self.opt_str("a justification")?;
        let program = self.program(resource.bindings().len())?;
        let rate_limits = self.list("the rate-limit list", 1, |r| r.rate_limit(&program))?;
        if rate_limits.len() > MAX_RATE_LIMITS {
            return Err(self.malformed(format!(
                "capability `{name}` has {} rate limits, more than {MAX_RATE_LIMITS}",
                rate_limits.len()
            )));
        }
        let program = verify(program).map_err(|error| CapcError::Verify {
            skill: skill.to_owned(),
            capability: name.to_string(),
            error,
        })?;
        // Done with this capability: later messages name only the skill.
        self.place = format!("skill `{skill}`");
        Ok(CompiledCapability {
            name,
            location,
            resource,
            operations,
            lifetime,
            required_autonomy,
            sensitivity,
            justification,
            program,
            rate_limits,
        })
    }

    fn lifetime(&mut self) -> Result<LifetimeSpec, CapcError> {
        Ok(match self.tag("a lifetime", 3)? {
            0 => match self.u64("a call count")? {
                0 => return Err(self.malformed("`lifetime call 0` grants nothing")),
                n => LifetimeSpec::Call(n),
            },
            1 => LifetimeSpec::Transaction,
            2 => LifetimeSpec::WallClock {
                duration: self.duration("a lifetime duration")?,
                renewable: self.bool("the renewable flag")?,
            },
            _ => LifetimeSpec::Process,
        })
    }

    fn rate_limit(&mut self, program: &Program) -> Result<RateLimitSpec, CapcError> {
        let count = self.u64("a rate-limit count")?;
        let per = self.duration("a rate-limit window")?;
        let burst = self.opt_u64("a rate-limit burst")?;
        let by = self.list("a rate-limit key", 4, |r| {
            r.index::<PathIdx>(program.paths.len())
        })?;
        let location = self.location()?;
        let summary = self.str("a rate-limit summary")?;
        if count == 0 || per.is_zero() || burst == Some(0) {
            return Err(self.malformed(format!("rate limit `{summary}` allows nothing")));
        }
        if burst.is_none() && count > self.limits.max_sliding_window {
            return Err(self.malformed(format!(
                "a sliding-window rate limit of {count} is more than {}",
                self.limits.max_sliding_window
            )));
        }
        Ok(RateLimitSpec {
            count,
            per,
            burst,
            by,
            location,
            summary,
        })
    }

    /// A table index, checked against the table length `len`.
    fn index<I: Index>(&mut self, len: usize) -> Result<I, CapcError> {
        let n = self.usize(I::TABLE)?;
        match I::from_usize(n) {
            Some(index) if n < len => Ok(index),
            _ => Err(self.malformed(format!(
                "index {n} is out of range for table `{}` of {len}",
                I::TABLE
            ))),
        }
    }

    /// An instruction operand: range-checked by the verifier, which knows every table.
    fn operand<I: Index>(&mut self) -> Result<I, CapcError> {
        let n = self.usize(I::TABLE)?;
        I::from_usize(n).ok_or_else(|| self.malformed(format!("operand {n} does not fit")))
    }

    fn program(&mut self, bindings: usize) -> Result<Program, CapcError> {
        let code = self.list("the code", 1, Self::op)?;
        let debug = self.list("the debug table", 1, Self::location)?;
        let consts = self.list("the constant table", 1, |r| r.value(0))?;
        let sets = self.list("the set table", 4, |r| {
            r.list("a set", 1, |r| r.value(0))
                .map(|values| ValueSet { values })
        })?;
        let paths = self.list("the path table", 5, |r| r.path(bindings))?;
        let regexes = self.list("the regex table", 5, Self::regex)?;
        let schemas = self.list("the schema table", 20, Self::schema)?;
        let windows = self.list("the window table", 5, Self::window)?;
        let bounds = self.list("the bounds table", 8, Self::bounds)?;
        let checks = self.list("the check table", 17, Self::check)?;
        let max_stack = self.u16("the stack depth")?;
        Ok(Program {
            code,
            debug,
            consts,
            sets,
            paths,
            regexes,
            schemas,
            windows,
            bounds,
            checks,
            max_stack,
        })
    }

    /// An instruction: its opcode byte, then its operands ([`OperandSource`] below).
    fn op(&mut self) -> Result<Op, CapcError> {
        let code = self.u8("an opcode")?;
        Op::read(code, self)?.ok_or_else(|| self.malformed(format!("unknown opcode {code:#04x}")))
    }

    fn value(&mut self, depth: usize) -> Result<Value, CapcError> {
        if depth >= MAX_VALUE_DEPTH {
            return Err(self.malformed(format!(
                "a JSON literal is nested deeper than {MAX_VALUE_DEPTH} levels"
            )));
        }
        let depth = depth.saturating_add(1);
        Ok(match self.tag("a JSON value", value_tag::OBJECT)? {
            value_tag::NULL => Value::Null,
            value_tag::FALSE => Value::Bool(false),
            value_tag::TRUE => Value::Bool(true),
            value_tag::NUMBER => Value::Number(self.number()?),
            value_tag::STRING => Value::String(self.str("a JSON string")?),
            value_tag::ARRAY => Value::Array(self.list("a JSON array", 1, |r| r.value(depth))?),
            _ => {
                let n = self.count("a JSON object", 5)?;
                let mut members = Map::new();
                for _ in 0..n {
                    let key = self.str("a JSON member name")?;
                    let value = self.value(depth)?;
                    if members.insert(key, value).is_some() {
                        return Err(self.malformed("a JSON object has a member twice"));
                    }
                }
                Value::Object(members)
            }
        })
    }

    fn number(&mut self) -> Result<Number, CapcError> {
        Ok(match self.tag("a number", number_tag::FLOAT)? {
            number_tag::UNSIGNED => Number::from(self.u64("a number")?),
            number_tag::SIGNED => {
                let n = i64::from_le_bytes(self.array("a number")?);
                if n >= 0 {
                    // The encoder writes non-negative integers as unsigned.
                    return Err(self.malformed("a signed number is not negative"));
                }
                Number::from(n)
            }
            _ => {
                let f = f64::from_bits(self.u64("a number")?);
                Number::from_f64(f).ok_or_else(|| self.malformed("a number is not finite"))?
            }
        })
    }

    fn path(&mut self, bindings: usize) -> Result<CompiledPath, CapcError> {
        let access = match self.tag("a path", 5)? {
            0 => {
                let root = match self.tag("a path root", 2)? {
                    0 => JsonRoot::Payload,
                    1 => JsonRoot::Agent,
                    _ => JsonRoot::Context,
                };
                let segments = self.list("the path segments", 1, |r| {
                    Ok(match r.tag("a path segment", 2)? {
                        0 => Segment::Key(r.str("a member name")?),
                        1 => Segment::Index(r.u64("an array index")?),
                        _ => Segment::Wildcard,
                    })
                })?;
                PathAccess::Json { root, segments }
            }
            1 => {
                let slot = self.u16("a binding slot")?;
                if usize::from(slot) >= bindings {
                    return Err(self.malformed(format!(
                        "binding slot {slot} is out of range for a template with {bindings} bindings"
                    )));
                }
                PathAccess::Binding { slot }
            }
            2 => PathAccess::Query {
                name: self.str("a query parameter name")?,
            },
            3 => PathAccess::RequestSkill,
            4 => PathAccess::RequestOperation,
            _ => PathAccess::RequestTransaction,
        };
        let text = self.str("a path's text")?;
        Ok(CompiledPath { access, text })
    }

    fn regex(&mut self) -> Result<CompiledRegex, CapcError> {
        let source = self.str("a regex")?;
        let case_insensitive = self.bool("the regex `i` flag")?;
        // The same anchoring and builder as `compile::emit`.
        let limit = self.limits.max_regex_bytes;
        let regex = Matcher::anchored(&source)
            .map_err(BuildError::from)
            .and_then(|anchored| self.matchers.build(&anchored, case_insensitive, limit))
            .map_err(|e| self.malformed(format!("regex `{source}` does not compile: {e}")))?;
        Ok(CompiledRegex {
            regex,
            source,
            case_insensitive,
        })
    }

    fn bounds(&mut self) -> Result<BoundSet, CapcError> {
        let bounds = self.list("a bound list", 2, |r| {
            let cmp = match r.tag("a comparison", 3)? {
                0 => Cmp::Lt,
                1 => Cmp::Le,
                2 => Cmp::Gt,
                _ => Cmp::Ge,
            };
            let constant = match r.tag("a bound", 2)? {
                0 => BoundConst::Number(r.number()?),
                1 => BoundConst::Nanos(i128::from_le_bytes(r.array("a duration bound")?)),
                _ => BoundConst::Now,
            };
            Ok((cmp, constant))
        })?;
        let text = self.str("a bound's text")?;
        Ok(BoundSet { bounds, text })
    }

    fn check(&mut self) -> Result<CheckInfo, CapcError> {
        let name = self.str("a constraint name")?;
        let Some(constraint) = ConstraintKeyword::from_name(&name) else {
            return Err(self.malformed(format!("constraint `{name}` is unknown")));
        };
        Ok(CheckInfo {
            constraint,
            location: self.location()?,
            summary: self.str("a check summary")?,
            code_start: self.u32("a check's code start")?,
            code_end: self.u32("a check's code end")?,
        })
    }

    fn window(&mut self) -> Result<CompiledWindow, CapcError> {
        let rule = match self.tag("a window", 1)? {
            0 => {
                let zone_name = self.str("a time zone")?;
                let zone: Tz = zone_name
                    .parse()
                    .map_err(|_| self.malformed(format!("unknown time zone `{zone_name}`")))?;
                let windows = self.list("a day-window list", 5, |r| {
                    let days = r.u8("a window's days")?;
                    let start = r.u16("a window's start")?;
                    let end = r.u16("a window's end")?;
                    // INVARIANT (day-window): checked here as `compile::window::compile_window` does.
                    let valid = days != 0
                        && days & !0b111_1111 == 0
                        && start < MINUTES_PER_DAY
                        && end <= MINUTES_PER_DAY
                        && start != end;
                    if !valid {
                        return Err(r.malformed(format!(
                            "day window (days {days:#09b}, {start}-{end} minutes) is invalid"
                        )));
                    }
                    Ok(DayInterval { days, start, end })
                })?;
                if windows.is_empty() {
                    return Err(self.malformed("a weekly window has no day windows"));
                }
                WindowRule::Weekly { windows, zone }
            }
            _ => {
                let from = self.timestamp("a window's `from`")?;
                let until = self.timestamp("a window's `until`")?;
                if from >= until {
                    return Err(self.malformed("a window's `from` is not before its `until`"));
                }
                WindowRule::Absolute {
                    from,
                    until,
                    from_utc: from.with_timezone(&Utc),
                    until_utc: until.with_timezone(&Utc),
                }
            }
        };
        Ok(CompiledWindow { rule })
    }

    fn timestamp(
        &mut self,
        what: &'static str,
    ) -> Result<DateTime<chrono::FixedOffset>, CapcError> {
        let text = self.str(what)?;
        DateTime::parse_from_rfc3339(&text)
            .map_err(|_| self.malformed(format!("{what} `{text}` is not an RFC 3339 timestamp")))
    }

    fn schema(&mut self) -> Result<SchemaProgram, CapcError> {
        let count = self.count("a schema's node table", 1)?;
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            nodes.push(self.schema_node(count)?);
        }
        let root = self.node_id(count)?;
        let depth_limit = self.u32("a schema depth limit")?;
        let step_limit = self.u64("a schema step limit")?;
        // The compiler always writes the defaults; larger limits would let one payload make the
        // evaluator run for as long, or recurse as deep, as the file says (regression: a hand-set
        // step limit of 2^64 - 1 ran a decision for ~2^60 steps, a depth limit of 2^32 - 1
        // overflowed the stack).
        if depth_limit > DEFAULT_SCHEMA_DEPTH_LIMIT || step_limit > DEFAULT_SCHEMA_STEP_LIMIT {
            return Err(self.malformed(format!(
                "a schema's limits (depth {depth_limit}, steps {step_limit}) are above the \
                 engine's ({DEFAULT_SCHEMA_DEPTH_LIMIT}, {DEFAULT_SCHEMA_STEP_LIMIT})"
            )));
        }
        if let Some(node) = in_place_cycle(&nodes) {
            return Err(self.malformed(format!(
                "schema node {node} is on a `$ref` cycle that never descends into the payload"
            )));
        }
        // INVARIANT (schema-arena): every id was checked against `count` == `nodes.len()`.
        Ok(SchemaProgram::new(nodes, root, depth_limit, step_limit))
    }

    fn node_id(&mut self, count: usize) -> Result<SchemaNodeId, CapcError> {
        let n = self.usize("a schema node id")?;
        match SchemaNodeId::from_index(n) {
            Some(id) if n < count => Ok(id),
            _ => Err(self.malformed(format!(
                "schema node {n} is out of range for an arena of {count}"
            ))),
        }
    }

    fn opt_node(&mut self, count: usize) -> Result<Option<SchemaNodeId>, CapcError> {
        self.opt("a schema node", |r| r.node_id(count))
    }

    fn node_list(&mut self, count: usize) -> Result<Vec<SchemaNodeId>, CapcError> {
        self.list("a schema node list", 4, |r| r.node_id(count))
    }

    fn opt_number(&mut self) -> Result<Option<Number>, CapcError> {
        self.opt("a schema number", Self::number)
    }

    fn pattern(&mut self) -> Result<SchemaPattern, CapcError> {
        let source = self.str("a schema pattern")?;
        let translated = self.str("a translated schema pattern")?;
        // The same builder and limit as `compile::schema`; the stored pattern is already
        // translated.
        let limit = self.limits.max_regex_bytes;
        let regex = self
            .matchers
            .build(&translated, false, limit)
            .map_err(|e| self.malformed(format!("pattern `{source}` does not compile: {e}")))?;
        Ok(SchemaPattern { source, regex })
    }

    fn schema_node(&mut self, count: usize) -> Result<SchemaNode, CapcError> {
        Ok(match self.tag("a schema node", 2)? {
            0 => SchemaNode::Always,
            1 => SchemaNode::Never,
            _ => SchemaNode::Object(Box::new(self.schema_object(count)?)),
        })
    }

    fn schema_object(&mut self, count: usize) -> Result<SchemaObject, CapcError> {
        let reference = self.opt_node(count)?;
        let types = self.opt("a schema `type`", |r| {
            let bits = r.u8("a schema `type`")?;
            TypeSet::from_bits(bits).ok_or_else(|| r.malformed("a schema `type` names no type"))
        })?;
        let enum_values = self.opt("a schema `enum`", |r| {
            r.list("a schema `enum`", 1, |r| r.value(0))
        })?;
        let const_value = self.opt("a schema `const`", |r| r.value(0))?;
        let minimum = self.opt_number()?;
        let maximum = self.opt_number()?;
        let exclusive_minimum = self.opt_number()?;
        let exclusive_maximum = self.opt_number()?;
        let multiple_of = match self.opt_number()? {
            None => None,
            Some(n) => match Decimal::from_number(&n) {
                Some(d) if d.mantissa != 0 && n.as_f64().is_some_and(|f| f > 0.0) => Some((n, d)),
                _ => return Err(self.malformed("a schema `multipleOf` is not positive")),
            },
        };
        let min_length = self.opt_u64("a schema `minLength`")?;
        let max_length = self.opt_u64("a schema `maxLength`")?;
        let pattern = self.opt("a schema `pattern`", Self::pattern)?;
        let format = self.opt("a schema `format`", |r| {
            let n = r.usize("a schema `format`")?;
            Format::ALL
                .get(n)
                .copied()
                .ok_or_else(|| r.malformed(format!("schema format {n} is unknown")))
        })?;
        let prefix_items = self.node_list(count)?;
        let items = self.opt_node(count)?;
        let contains = self.opt("a schema `contains`", |r| {
            Ok(ContainsRule {
                schema: r.node_id(count)?,
                min: r.u64("a schema `minContains`")?,
                max: r.opt_u64("a schema `maxContains`")?,
            })
        })?;
        let min_items = self.opt_u64("a schema `minItems`")?;
        let max_items = self.opt_u64("a schema `maxItems`")?;
        let unique_items = self.bool("a schema `uniqueItems`")?;
        let required = self.list("a schema `required`", 4, |r| r.str("a required name"))?;
        let properties = self.list("a schema `properties`", 8, |r| {
            Ok((r.str("a property name")?, r.node_id(count)?))
        })?;
        // `SchemaObject::property` binary-searches: the names must be strictly sorted.
        if properties.windows(2).any(|pair| match pair {
            [(a, _), (b, _)] => a >= b,
            _ => false,
        }) {
            return Err(self.malformed("schema `properties` are not sorted by name"));
        }
        let pattern_properties = self.list("a schema `patternProperties`", 12, |r| {
            Ok((r.pattern()?, r.node_id(count)?))
        })?;
        let additional_properties = self.opt_node(count)?;
        let property_names = self.opt_node(count)?;
        let min_properties = self.opt_u64("a schema `minProperties`")?;
        let max_properties = self.opt_u64("a schema `maxProperties`")?;
        let dependent_required = self.list("a schema `dependentRequired`", 8, |r| {
            Ok((
                r.str("a dependent name")?,
                r.list("a dependent list", 4, |r| r.str("a dependent name"))?,
            ))
        })?;
        let all_of = self.node_list(count)?;
        let any_of = self.node_list(count)?;
        let one_of = self.node_list(count)?;
        let not = self.opt_node(count)?;
        let condition = self.opt("a schema `if`", |r| {
            Ok(Condition {
                if_schema: r.node_id(count)?,
                then_schema: r.opt_node(count)?,
                else_schema: r.opt_node(count)?,
            })
        })?;
        Ok(SchemaObject {
            reference,
            types,
            enum_values,
            const_value,
            minimum,
            maximum,
            exclusive_minimum,
            exclusive_maximum,
            multiple_of,
            min_length,
            max_length,
            pattern,
            format,
            prefix_items,
            items,
            contains,
            min_items,
            max_items,
            unique_items,
            required,
            properties,
            pattern_properties,
            additional_properties,
            property_names,
            min_properties,
            max_properties,
            dependent_required,
            all_of,
            any_of,
            one_of,
            not,
            condition,
            shape: Shape::default(),
        })
    }
}

/// Operands as the encoder writes them; a table index is range-checked later, by the verifier.
impl OperandSource for Reader<'_> {
    type Error = CapcError;

    fn path(&mut self) -> Result<PathIdx, CapcError> {
        self.operand()
    }

    fn constant(&mut self) -> Result<ConstIdx, CapcError> {
        self.operand()
    }

    fn set(&mut self) -> Result<SetIdx, CapcError> {
        self.operand()
    }

    fn regex(&mut self) -> Result<RegexIdx, CapcError> {
        self.operand()
    }

    fn bounds(&mut self) -> Result<BoundsIdx, CapcError> {
        self.operand()
    }

    fn schema(&mut self) -> Result<SchemaIdx, CapcError> {
        self.operand()
    }

    fn window(&mut self) -> Result<WindowIdx, CapcError> {
        self.operand()
    }

    fn check(&mut self) -> Result<CheckIdx, CapcError> {
        self.operand()
    }

    fn target(&mut self) -> Result<JumpTarget, CapcError> {
        self.operand()
    }

    fn optional(&mut self) -> Result<bool, CapcError> {
        self.bool("the optional flag")
    }

    fn flag(&mut self) -> Result<bool, CapcError> {
        self.bool("a pushed boolean")
    }
}

/// One instruction read back from [`op_bytes`](super::encode::op_bytes)'s output, which it must
/// use whole, for the instruction table's tests.
#[cfg(test)]
pub(super) fn op_from_bytes(bytes: &[u8]) -> Result<Op, CapcError> {
    let mut reader = Reader::new(bytes, 0);
    let op = reader.op()?;
    if reader.rest().is_empty() {
        Ok(op)
    } else {
        Err(reader.malformed("trailing bytes after the instruction"))
    }
}

/// A node on a cycle of in-place edges (`$ref`, `allOf`, `not`, `if`, ...), which would
/// re-evaluate the same instance forever; the compiler rejects these, and so does the loader.
/// Iterative depth-first search, so a hostile arena cannot exhaust the stack.
fn in_place_cycle(nodes: &[SchemaNode]) -> Option<SchemaNodeId> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let children = |id: SchemaNodeId| -> Vec<SchemaNodeId> {
        match nodes.get(id.index()) {
            Some(SchemaNode::Object(object)) => object.in_place_children().collect(),
            _ => Vec::new(),
        }
    };
    let mut marks = vec![Mark::New; nodes.len()];
    for start in 0..nodes.len() {
        let start = SchemaNodeId::from_index(start)?;
        if marks.get(start.index()) != Some(&Mark::New) {
            continue;
        }
        let mut stack: Vec<(SchemaNodeId, Vec<SchemaNodeId>)> = vec![(start, children(start))];
        if let Some(mark) = marks.get_mut(start.index()) {
            *mark = Mark::OnPath;
        }
        while let Some((node, pending)) = stack.last_mut() {
            let node = *node;
            match pending.pop() {
                Some(child) => match marks.get(child.index()).copied() {
                    Some(Mark::OnPath) => return Some(child),
                    Some(Mark::New) => {
                        if let Some(mark) = marks.get_mut(child.index()) {
                            *mark = Mark::OnPath;
                        }
                        stack.push((child, children(child)));
                    }
                    // Done, or an id out of range (already rejected by the decoder).
                    _ => {}
                },
                None => {
                    if let Some(mark) = marks.get_mut(node.index()) {
                        *mark = Mark::Done;
                    }
                    stack.pop();
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_place_ref_cycle_is_found() {
        let id = |n| SchemaNodeId::from_index(n).unwrap();
        let refer = |n| {
            SchemaNode::Object(Box::new(SchemaObject {
                reference: Some(id(n)),
                ..SchemaObject::default()
            }))
        };
        assert_eq!(in_place_cycle(&[refer(1), refer(0)]), Some(id(0)));
        assert_eq!(in_place_cycle(&[refer(1), SchemaNode::Always]), None);
        let descends = SchemaNode::Object(Box::new(SchemaObject {
            items: Some(id(0)),
            ..SchemaObject::default()
        }));
        assert_eq!(in_place_cycle(&[descends]), None);
    }
}
