//! Writing compiled policies to a `.capc` file, so a gateway can load them without the compiler.
//!
//! - [`encode_capc`] turns compiled skills into the bytes of a `.capc` file;
//!   `compile::load_capc` reads them back, checking every byte, re-running the verifier on every
//!   program and comparing each skill with what its embedded manifest compiles to (through
//!   `encode_without_locations`, the same encoding less the source locations).
//! - [`MAGIC`], [`FORMAT_VERSION`] and [`fnv1a64`] define the header both sides agree on; an
//!   instruction is its opcode byte and its operands, both from the instruction table
//!   (`bytecode::op`).
//!
//! The layout (all integers little-endian; the reference is the `.capc` section of
//! `docs/bytecode.md`):
//!
//! ```text
//! magic          8 bytes   \x89 C A P C \r \n \x1a
//! format version u16       FORMAT_VERSION
//! crate version  u8 + n    the capgate version that wrote the file (UTF-8)
//! body length    u64
//! checksum       u64       FNV-1a 64 of the body
//! body           …         file names, then skills (see `Writer::skill`), each with its
//!                          canonical manifest and revision
//! ```
//!
//! The body is a hand-written binary encoding that follows the in-memory types field by field:
//! strings and lists are a `u32` count then the items, options a `0`/`1` tag then the value, enums
//! a `u8` tag. Compiled regexes, resource templates and windows are stored as their source and
//! rebuilt at load; everything else (including payload-schema node arenas) is stored as compiled.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Number, Value};

use super::decode::CapcError;
use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx,
};
use super::op::{Op, OperandVisitor};
use super::program::{
    BoundConst, BoundSet, CheckInfo, Cmp, CompiledCapability, CompiledPath, CompiledSkill,
    JsonRoot, LifetimeSpec, PathAccess, Program, RateLimitSpec, SensitivityLevel,
};
use super::resource::ResourceKind;
use super::schema::{SchemaNode, SchemaNodeId, SchemaObject, SchemaPattern, SchemaProgram};
use super::window::{CompiledWindow, WindowRule};
use crate::span::Location;
use crate::value::Segment;

/// The first eight bytes of every `.capc` file. The high first byte and the `\r\n\x1a` tail
/// catch a file mangled by a text-mode transfer, as in PNG.
pub const MAGIC: [u8; 8] = *b"\x89CAPC\r\n\x1a";

/// The version of the body encoding and of the instruction semantics it records. Bump it on any
/// change to either: a loader accepts exactly this version. Version 3 stores each skill's
/// canonical manifest and its SHA-256 revision.
pub const FORMAT_VERSION: u16 = 3;

/// The capgate version written into each file's header (informational: compatibility is decided
/// by [`FORMAT_VERSION`] alone).
pub const CRATE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The deepest JSON literal (constant, set member, schema `enum`/`const`) a file may hold. The
/// decoder recurses once per level, so this bounds its stack use on hostile input.
pub use crate::limits::MAX_LITERAL_DEPTH as MAX_VALUE_DEPTH;

/// The 64-bit FNV-1a hash: the body checksum. It detects corruption and truncation, not
/// tampering: a `.capc` file is as trusted as the policy source it was compiled from.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a64::default();
    hash.add(bytes);
    hash.finish()
}

/// [`fnv1a64`] of everything written to it, for text hashed as it is produced (a skill's
/// revision); writing never fails.
pub(crate) struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a64 {
    /// Hashes `bytes` in.
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        self.0 = bytes.iter().fold(self.0, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(PRIME)
        });
    }

    /// The hash of the bytes so far.
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

impl std::io::Write for Fnv1a64 {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.add(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Tags of JSON values in the body.
pub(crate) mod value_tag {
    pub(crate) const NULL: u8 = 0;
    pub(crate) const FALSE: u8 = 1;
    pub(crate) const TRUE: u8 = 2;
    pub(crate) const NUMBER: u8 = 3;
    pub(crate) const STRING: u8 = 4;
    pub(crate) const ARRAY: u8 = 5;
    pub(crate) const OBJECT: u8 = 6;
}

/// Tags of JSON numbers: the three forms serde_json keeps, so equality is preserved exactly.
pub(crate) mod number_tag {
    pub(crate) const UNSIGNED: u8 = 0;
    pub(crate) const SIGNED: u8 = 1;
    pub(crate) const FLOAT: u8 = 2;
}

/// Encodes compiled skills as the bytes of a `.capc` file.
///
/// Fails only when a JSON literal is nested deeper than [`MAX_VALUE_DEPTH`] or a table is longer
/// than a `u32` can count, neither of which the compiler produces within its limits.
pub fn encode_capc(skills: &[CompiledSkill]) -> Result<Vec<u8>, CapcError> {
    let files = collect_files(skills);
    let mut body = Writer {
        bytes: Vec::new(),
        file_index: Some(
            files
                .iter()
                .enumerate()
                .map(|(i, f)| (f.clone(), i))
                .collect(),
        ),
    };
    body.count(files.len())?;
    for file in &files {
        body.str(file)?;
    }
    body.count(skills.len())?;
    for skill in skills {
        body.skill(skill)?;
    }
    let body = body.bytes;
    let version = CRATE_VERSION.as_bytes();
    let version_len = u8::try_from(version.len())
        .map_err(|_| CapcError::encode("the crate version is longer than 255 bytes"))?;
    let body_len = u64::try_from(body.len())
        .map_err(|_| CapcError::encode("the body is longer than a u64 can count"))?;
    let mut out = Vec::with_capacity(body.len().saturating_add(64));
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(version_len);
    out.extend_from_slice(version);
    out.extend_from_slice(&body_len.to_le_bytes());
    out.extend_from_slice(&fnv1a64(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// A skill as [`encode_capc`] writes it, less every source location: the skill's own fields
/// (name, version, hash, signer, revision, manifest), then each capability apart. Two skills
/// with equal encodings here decode to the same skill but for the lines messages point to; the
/// loader compares a decoded skill with what its manifest compiles to this way, and names the
/// first capability that differs.
pub(crate) fn encode_without_locations(
    skill: &CompiledSkill,
) -> Result<(Vec<u8>, Vec<Vec<u8>>), CapcError> {
    let mut header = Writer {
        bytes: Vec::new(),
        file_index: None,
    };
    header.skill_header(skill)?;
    header.count(skill.capabilities.len())?;
    let capabilities = skill
        .capabilities
        .iter()
        .map(|capability| {
            let mut writer = Writer {
                bytes: Vec::new(),
                file_index: None,
            };
            writer.capability(capability).map(|()| writer.bytes)
        })
        .collect::<Result<_, _>>()?;
    Ok((header.bytes, capabilities))
}

/// Every source file named by a location, in first-use order: locations store an index into it.
fn collect_files(skills: &[CompiledSkill]) -> Vec<Arc<str>> {
    let mut files: Vec<Arc<str>> = Vec::new();
    let mut seen: HashSet<Arc<str>> = HashSet::new();
    let mut add = |location: &Option<Location>| {
        if let Some(location) = location
            && seen.insert(location.file.clone())
        {
            files.push(location.file.clone());
        }
    };
    for skill in skills {
        add(&skill.location);
        for capability in &skill.capabilities {
            add(&capability.location);
            capability.program.debug.iter().for_each(&mut add);
            for check in &capability.program.checks {
                add(&check.location);
            }
            for limit in &capability.rate_limits {
                add(&limit.location);
            }
        }
    }
    files
}

struct Writer {
    bytes: Vec<u8>,
    /// Position of each file name in the file table; `None` writes no locations at all
    /// ([`encode_without_locations`]).
    file_index: Option<HashMap<Arc<str>, usize>>,
}

impl Writer {
    fn u8(&mut self, n: u8) {
        self.bytes.push(n);
    }

    fn bool(&mut self, b: bool) {
        self.u8(u8::from(b));
    }

    fn u16(&mut self, n: u16) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    fn u32(&mut self, n: u32) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    fn u64(&mut self, n: u64) {
        self.bytes.extend_from_slice(&n.to_le_bytes());
    }

    fn count(&mut self, n: usize) -> Result<(), CapcError> {
        let n = u32::try_from(n)
            .map_err(|_| CapcError::encode("a table is longer than a u32 can count"))?;
        self.u32(n);
        Ok(())
    }

    fn index<I: Index>(&mut self, index: I) -> Result<(), CapcError> {
        self.count(index.to_usize())
    }

    fn str(&mut self, text: &str) -> Result<(), CapcError> {
        self.count(text.len())?;
        self.bytes.extend_from_slice(text.as_bytes());
        Ok(())
    }

    fn opt<T>(
        &mut self,
        value: Option<&T>,
        mut write: impl FnMut(&mut Self, &T) -> Result<(), CapcError>,
    ) -> Result<(), CapcError> {
        match value {
            None => self.u8(0),
            Some(value) => {
                self.u8(1);
                write(self, value)?;
            }
        }
        Ok(())
    }

    fn list<T>(
        &mut self,
        items: &[T],
        mut write: impl FnMut(&mut Self, &T) -> Result<(), CapcError>,
    ) -> Result<(), CapcError> {
        self.count(items.len())?;
        items.iter().try_for_each(|item| write(self, item))
    }

    fn opt_str(&mut self, text: Option<&str>) -> Result<(), CapcError> {
        match text {
            None => self.u8(0),
            Some(text) => {
                self.u8(1);
                self.str(text)?;
            }
        }
        Ok(())
    }

    fn duration(&mut self, duration: Duration) {
        self.u64(duration.as_secs());
        self.u32(duration.subsec_nanos());
    }

    fn location(&mut self, location: Option<&Location>) -> Result<(), CapcError> {
        let Some(file_index) = &self.file_index else {
            return Ok(());
        };
        let file = location
            .map(|location| {
                file_index
                    .get(&location.file)
                    .copied()
                    .ok_or_else(|| CapcError::encode("a location names a file not collected"))
            })
            .transpose()?;
        self.opt(location.zip(file).as_ref(), |w, (location, file)| {
            w.count(*file)?;
            w.u32(location.line);
            w.u32(location.column);
            Ok(())
        })
    }

    fn skill(&mut self, skill: &CompiledSkill) -> Result<(), CapcError> {
        self.skill_header(skill)?;
        self.list(&skill.capabilities, Self::capability)
    }

    /// A skill's own fields. The manifest is the canonical text the revision hashes; the loader
    /// hashes it again and compiles it to check the rest.
    fn skill_header(&mut self, skill: &CompiledSkill) -> Result<(), CapcError> {
        self.str(&skill.name)?;
        self.str(&skill.version)?;
        self.opt_str(skill.hash.as_deref())?;
        self.opt_str(skill.signer.as_deref())?;
        self.location(skill.location.as_ref())?;
        self.bytes.extend_from_slice(skill.revision.as_bytes());
        self.str(&skill.manifest)
    }

    fn capability(&mut self, capability: &CompiledCapability) -> Result<(), CapcError> {
        self.str(&capability.name)?;
        self.location(capability.location.as_ref())?;
        let kind = ResourceKind::ALL
            .iter()
            .position(|(k, _)| *k == capability.resource.kind())
            .ok_or_else(|| CapcError::encode("unknown resource kind"))?;
        self.count(kind)?;
        self.str(capability.resource.locator())?;
        self.list(&capability.operations, |w, op| w.str(op))?;
        self.lifetime(capability.lifetime);
        self.u8(capability.required_autonomy);
        self.u8(match capability.sensitivity {
            SensitivityLevel::Normal => 0,
            SensitivityLevel::Elevated => 1,
        });
        self.opt_str(capability.justification.as_deref())?;
        self.program(capability.program.program())?;
        self.list(&capability.rate_limits, Self::rate_limit)
    }

    fn lifetime(&mut self, lifetime: LifetimeSpec) {
        match lifetime {
            LifetimeSpec::Call(n) => {
                self.u8(0);
                self.u64(n);
            }
            LifetimeSpec::Transaction => self.u8(1),
            LifetimeSpec::WallClock {
                duration,
                renewable,
            } => {
                self.u8(2);
                self.duration(duration);
                self.bool(renewable);
            }
            LifetimeSpec::Process => self.u8(3),
        }
    }

    fn rate_limit(&mut self, limit: &RateLimitSpec) -> Result<(), CapcError> {
        self.u64(limit.count);
        self.duration(limit.per);
        self.opt(limit.burst.as_ref(), |w, b| {
            w.u64(*b);
            Ok(())
        })?;
        self.list(&limit.by, |w, p| w.index(*p))?;
        self.location(limit.location.as_ref())?;
        self.str(&limit.summary)
    }

    fn program(&mut self, program: &Program) -> Result<(), CapcError> {
        self.list(&program.code, |w, op| w.op(op))?;
        self.list(&program.debug, |w, l| w.location(l.as_ref()))?;
        self.list(&program.consts, |w, v| w.value(v, 0))?;
        self.list(&program.sets, |w, set| {
            w.list(&set.values, |w, v| w.value(v, 0))
        })?;
        self.list(&program.paths, Self::path)?;
        self.list(&program.regexes, |w, re| {
            w.str(&re.source)?;
            w.bool(re.case_insensitive);
            Ok(())
        })?;
        self.list(&program.schemas, Self::schema)?;
        self.list(&program.windows, Self::window)?;
        self.list(&program.bounds, Self::bounds)?;
        self.list(&program.checks, Self::check)?;
        self.u16(program.max_stack);
        Ok(())
    }

    /// An instruction: its opcode byte, then each operand in declaration order
    /// ([`OperandVisitor`] below).
    fn op(&mut self, op: &Op) -> Result<(), CapcError> {
        self.u8(op.opcode());
        op.try_for_each_operand(self)
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<(), CapcError> {
        if depth >= MAX_VALUE_DEPTH {
            return Err(CapcError::encode(format!(
                "a JSON literal is nested deeper than {MAX_VALUE_DEPTH} levels"
            )));
        }
        let depth = depth.saturating_add(1);
        match value {
            Value::Null => self.u8(value_tag::NULL),
            Value::Bool(false) => self.u8(value_tag::FALSE),
            Value::Bool(true) => self.u8(value_tag::TRUE),
            Value::Number(n) => {
                self.u8(value_tag::NUMBER);
                self.number(n);
            }
            Value::String(s) => {
                self.u8(value_tag::STRING);
                self.str(s)?;
            }
            Value::Array(items) => {
                self.u8(value_tag::ARRAY);
                self.list(items, |w, v| w.value(v, depth))?;
            }
            Value::Object(members) => {
                self.u8(value_tag::OBJECT);
                self.count(members.len())?;
                for (key, v) in members {
                    self.str(key)?;
                    self.value(v, depth)?;
                }
            }
        }
        Ok(())
    }

    fn number(&mut self, n: &Number) {
        if let Some(u) = n.as_u64() {
            self.u8(number_tag::UNSIGNED);
            self.u64(u);
        } else if let Some(i) = n.as_i64() {
            self.u8(number_tag::SIGNED);
            self.bytes.extend_from_slice(&i.to_le_bytes());
        } else {
            // serde_json numbers are finite: NaN and infinities are not JSON.
            self.u8(number_tag::FLOAT);
            self.u64(n.as_f64().unwrap_or(0.0).to_bits());
        }
    }

    fn path(&mut self, path: &CompiledPath) -> Result<(), CapcError> {
        match &path.access {
            PathAccess::Json { root, segments } => {
                self.u8(0);
                self.u8(match root {
                    JsonRoot::Payload => 0,
                    JsonRoot::Agent => 1,
                    JsonRoot::Context => 2,
                });
                self.list(segments, |w, segment| {
                    match segment {
                        Segment::Key(key) => {
                            w.u8(0);
                            w.str(key)?;
                        }
                        Segment::Index(i) => {
                            w.u8(1);
                            w.u64(*i);
                        }
                        Segment::Wildcard => w.u8(2),
                    }
                    Ok(())
                })?;
            }
            PathAccess::Binding { slot } => {
                self.u8(1);
                self.u16(*slot);
            }
            PathAccess::Query { name } => {
                self.u8(2);
                self.str(name)?;
            }
            PathAccess::RequestSkill => self.u8(3),
            PathAccess::RequestOperation => self.u8(4),
            PathAccess::RequestTransaction => self.u8(5),
        }
        self.str(&path.text)
    }

    fn bounds(&mut self, bounds: &BoundSet) -> Result<(), CapcError> {
        self.list(&bounds.bounds, |w, (cmp, constant)| {
            w.u8(match cmp {
                Cmp::Lt => 0,
                Cmp::Le => 1,
                Cmp::Gt => 2,
                Cmp::Ge => 3,
            });
            match constant {
                BoundConst::Number(n) => {
                    w.u8(0);
                    w.number(n);
                }
                BoundConst::Nanos(nanos) => {
                    w.u8(1);
                    w.bytes.extend_from_slice(&nanos.to_le_bytes());
                }
                BoundConst::Now => w.u8(2),
            }
            Ok(())
        })?;
        self.str(&bounds.text)
    }

    fn check(&mut self, check: &CheckInfo) -> Result<(), CapcError> {
        self.str(check.constraint.name())?;
        self.location(check.location.as_ref())?;
        self.str(&check.summary)?;
        self.u32(check.code_start);
        self.u32(check.code_end);
        Ok(())
    }

    fn window(&mut self, window: &CompiledWindow) -> Result<(), CapcError> {
        match &window.rule {
            WindowRule::Weekly { windows, zone } => {
                self.u8(0);
                self.str(zone.name())?;
                self.list(windows, |w, day| {
                    w.u8(day.days);
                    w.u16(day.start);
                    w.u16(day.end);
                    Ok(())
                })
            }
            WindowRule::Absolute { from, until, .. } => {
                self.u8(1);
                self.str(&from.to_rfc3339())?;
                self.str(&until.to_rfc3339())
            }
        }
    }

    fn schema(&mut self, schema: &SchemaProgram) -> Result<(), CapcError> {
        self.list(&schema.nodes, Self::schema_node)?;
        self.node_id(schema.root)?;
        self.u32(schema.depth_limit);
        self.u64(schema.step_limit);
        Ok(())
    }

    fn node_id(&mut self, id: SchemaNodeId) -> Result<(), CapcError> {
        self.count(id.index())
    }

    fn opt_node(&mut self, id: Option<SchemaNodeId>) -> Result<(), CapcError> {
        self.opt(id.as_ref(), |w, id| w.node_id(*id))
    }

    fn opt_u64(&mut self, n: Option<u64>) {
        match n {
            None => self.u8(0),
            Some(n) => {
                self.u8(1);
                self.u64(n);
            }
        }
    }

    fn opt_number(&mut self, n: Option<&Number>) -> Result<(), CapcError> {
        self.opt(n, |w, n| {
            w.number(n);
            Ok(())
        })
    }

    fn pattern(&mut self, pattern: &SchemaPattern) -> Result<(), CapcError> {
        self.str(&pattern.source)?;
        // The translated (ECMA-262 → Rust) pattern, so loading needs no compiler code.
        self.str(pattern.regex.as_str())
    }

    fn schema_node(&mut self, node: &SchemaNode) -> Result<(), CapcError> {
        match node {
            SchemaNode::Always => {
                self.u8(0);
                Ok(())
            }
            SchemaNode::Never => {
                self.u8(1);
                Ok(())
            }
            SchemaNode::Object(object) => {
                self.u8(2);
                self.schema_object(object)
            }
        }
    }

    fn schema_object(&mut self, o: &SchemaObject) -> Result<(), CapcError> {
        self.opt_node(o.reference)?;
        self.opt(o.types.as_ref(), |w, t| {
            w.u8(t.bits());
            Ok(())
        })?;
        self.opt(o.enum_values.as_ref(), |w, values| {
            w.list(values, |w, v| w.value(v, 0))
        })?;
        self.opt(o.const_value.as_ref(), |w, v| w.value(v, 0))?;
        self.opt_number(o.minimum.as_ref())?;
        self.opt_number(o.maximum.as_ref())?;
        self.opt_number(o.exclusive_minimum.as_ref())?;
        self.opt_number(o.exclusive_maximum.as_ref())?;
        // The exact decimal is recomputed from the number at load.
        self.opt_number(o.multiple_of.as_ref().map(|(n, _)| n))?;
        self.opt_u64(o.min_length);
        self.opt_u64(o.max_length);
        self.opt(o.pattern.as_ref(), Self::pattern)?;
        self.opt(o.format.as_ref(), |w, f| {
            let n = super::schema::Format::ALL
                .iter()
                .position(|x| x == f)
                .ok_or_else(|| CapcError::encode("unknown schema format"))?;
            w.count(n)
        })?;
        self.list(&o.prefix_items, |w, id| w.node_id(*id))?;
        self.opt_node(o.items)?;
        self.opt(o.contains.as_ref(), |w, c| {
            w.node_id(c.schema)?;
            w.u64(c.min);
            w.opt_u64(c.max);
            Ok(())
        })?;
        self.opt_u64(o.min_items);
        self.opt_u64(o.max_items);
        self.bool(o.unique_items);
        self.list(&o.required, |w, s| w.str(s))?;
        self.list(&o.properties, |w, (name, id)| {
            w.str(name)?;
            w.node_id(*id)
        })?;
        self.list(&o.pattern_properties, |w, (pattern, id)| {
            w.pattern(pattern)?;
            w.node_id(*id)
        })?;
        self.opt_node(o.additional_properties)?;
        self.opt_node(o.property_names)?;
        self.opt_u64(o.min_properties);
        self.opt_u64(o.max_properties);
        self.list(&o.dependent_required, |w, (name, others)| {
            w.str(name)?;
            w.list(others, |w, s| w.str(s))
        })?;
        self.list(&o.all_of, |w, id| w.node_id(*id))?;
        self.list(&o.any_of, |w, id| w.node_id(*id))?;
        self.list(&o.one_of, |w, id| w.node_id(*id))?;
        self.opt_node(o.not)?;
        self.opt(o.condition.as_ref(), |w, c| {
            w.node_id(c.if_schema)?;
            w.opt_node(c.then_schema)?;
            w.opt_node(c.else_schema)
        })
    }
}

/// Operands as the file stores them: a table index or jump target as a `u32`, a flag as a byte.
impl OperandVisitor for Writer {
    type Output = Result<(), CapcError>;

    fn path(&mut self, path: PathIdx) -> Self::Output {
        self.index(path)
    }

    fn constant(&mut self, constant: ConstIdx) -> Self::Output {
        self.index(constant)
    }

    fn set(&mut self, set: SetIdx) -> Self::Output {
        self.index(set)
    }

    fn regex(&mut self, regex: RegexIdx) -> Self::Output {
        self.index(regex)
    }

    fn bounds(&mut self, bounds: BoundsIdx) -> Self::Output {
        self.index(bounds)
    }

    fn schema(&mut self, schema: SchemaIdx) -> Self::Output {
        self.index(schema)
    }

    fn window(&mut self, window: WindowIdx) -> Self::Output {
        self.index(window)
    }

    fn check(&mut self, check: CheckIdx) -> Self::Output {
        self.index(check)
    }

    fn target(&mut self, target: JumpTarget) -> Self::Output {
        self.index(target)
    }

    fn optional(&mut self, optional: bool) -> Self::Output {
        self.bool(optional);
        Ok(())
    }

    fn flag(&mut self, value: bool) -> Self::Output {
        self.bool(value);
        Ok(())
    }
}

/// One instruction as [`encode_capc`] writes it, for the instruction table's tests.
#[cfg(test)]
pub(super) fn op_bytes(op: &Op) -> Result<Vec<u8>, CapcError> {
    let mut writer = Writer {
        bytes: Vec::new(),
        file_index: None,
    };
    writer.op(op)?;
    Ok(writer.bytes)
}
