//! Compiled programs and the policy artifact around them.
//!
//! - [`Program`]: one capability's instruction stream plus its tables (constants, sets, interned
//!   paths, regexes, schemas, windows, bounds) and the [`CheckInfo`] of each top-level
//!   constraint, used to build deny reasons and traces.
//! - [`CompiledSkill`] / [`CompiledCapability`]: what the engine holds for each skill: identity,
//!   gating, resource template, operations, lifetime, rate limits, and the verified program.
//!
//! Everything here is immutable after construction and `Send + Sync`.

use std::sync::Arc;

use serde_json::Value;

use super::matcher::Matcher;
use super::op::Op;
use super::resource::ResourcePattern;
use super::schema::SchemaProgram;
use super::verify::VerifiedProgram;
use super::window::CompiledWindow;
use crate::bytes::bytes_eq;
use crate::name::Name;
use crate::resource_kind::ResourceKind;
use crate::revision::Revision;
use crate::span::Location;
use crate::value::Segment;
use crate::vocabulary::ConstraintKeyword;

/// Where a JSON path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonRoot {
    /// The request payload.
    Payload,
    /// The agent identity object.
    Agent,
    /// The caller's context object.
    Context,
}

impl JsonRoot {
    /// The root keyword (`payload`, `agent`, `context`).
    pub fn name(self) -> &'static str {
        match self {
            JsonRoot::Payload => "payload",
            JsonRoot::Agent => "agent",
            JsonRoot::Context => "context",
        }
    }
}

/// How a path reads the request, resolved at compile time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathAccess {
    /// A path into one of the JSON documents of the request.
    Json {
        /// The document.
        root: JsonRoot,
        /// Steps inside it.
        segments: Vec<Segment>,
    },
    /// `resource.NAME`: the segment bound by `{NAME}` in the capability's template.
    Binding {
        /// Slot in [`ResourcePattern::bindings`].
        slot: u16,
    },
    /// `resource.query.NAME`: a query parameter of the request resource.
    Query {
        /// The parameter name.
        name: String,
    },
    /// `request.skill`.
    RequestSkill,
    /// `request.operation`.
    RequestOperation,
    /// `request.transaction` (absent when the request names none).
    RequestTransaction,
}

/// An interned path: how to read it and how to print it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledPath {
    /// How the VM reads it.
    pub access: PathAccess,
    /// The path as written (`payload.attendees[*].email`).
    pub text: String,
}

impl CompiledPath {
    /// True when the path walks `[*]`.
    #[cfg(any(test, feature = "internals"))]
    pub fn has_wildcard(&self) -> bool {
        match &self.access {
            PathAccess::Json { segments, .. } => {
                segments.iter().any(|s| matches!(s, Segment::Wildcard))
            }
            _ => false,
        }
    }

    /// True when the path is into a JSON document and made of keys only (no index, no `[*]`):
    /// it names at most one value, found by one member lookup per key.
    pub fn keys_only(&self) -> bool {
        match &self.access {
            PathAccess::Json { segments, .. } => {
                segments.iter().all(|s| matches!(s, Segment::Key(_)))
            }
            _ => false,
        }
    }
}

/// A whole-value regex, compiled once.
#[derive(Debug, Clone)]
pub struct CompiledRegex {
    /// The anchored regex (`^(?:source)$`), with its shortcut when it has one.
    pub regex: Matcher,
    /// The pattern as written, for messages.
    pub source: String,
    /// The `i` flag.
    pub case_insensitive: bool,
}

/// The literals of one `in [...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueSet {
    /// The allowed values, in source order.
    pub values: Vec<Value>,
}

/// A comparison with the subject on the left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// The operator as written.
    #[cfg(any(test, feature = "internals"))]
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    /// Whether `ordering` (subject compared with the bound) satisfies the operator.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self {
            Cmp::Lt => ordering == Less,
            Cmp::Le => matches!(ordering, Less | Equal),
            Cmp::Gt => ordering == Greater,
            Cmp::Ge => matches!(ordering, Greater | Equal),
        }
    }
}

/// The constant side of one bound.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundConst {
    /// A number (for [`Op::Range`]).
    Number(serde_json::Number),
    /// A signed duration in nanoseconds (for [`Op::RangeDiff`]).
    Nanos(i128),
    /// The engine clock (for [`Op::RangeNow`]).
    Now,
}

/// The bounds of one `fieldRange`; all must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundSet {
    /// `(operator, constant)` pairs, subject on the left.
    pub bounds: Vec<(Cmp, BoundConst)>,
    /// The bounds as written, for messages (`> 0 and <= 100`).
    pub text: String,
}

/// What a top-level constraint is, for reasons and traces.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckInfo {
    /// The constraint's keyword, which names it in reasons (`fieldMatches`, `any`, ...).
    pub constraint: ConstraintKeyword,
    /// Where it was written.
    pub location: Option<Location>,
    /// The constraint's source text in short form, for messages and disassembly.
    pub summary: String,
    /// First instruction of its code.
    pub(crate) code_start: u32,
    /// One past its `Require`.
    pub(crate) code_end: u32,
}

impl CheckInfo {
    /// A check whose code is `code`, for tests that hand-make programs. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn new(
        constraint: ConstraintKeyword,
        location: Option<Location>,
        summary: String,
        code: std::ops::Range<u32>,
    ) -> Self {
        CheckInfo {
            constraint,
            location,
            summary,
            code_start: code.start,
            code_end: code.end,
        }
    }

    /// The instructions of its code: from its first to one past its `Require`. Feature
    /// `internals`.
    #[cfg(feature = "internals")]
    pub fn code(&self) -> std::ops::Range<u32> {
        self.code_start..self.code_end
    }

    /// Moves its code to `code`, for tests that hand-make programs. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn set_code(&mut self, code: std::ops::Range<u32>) {
        (self.code_start, self.code_end) = (code.start, code.end);
    }
}

/// One capability's bytecode and tables. Build it with the compiler, then verify it
/// ([`super::verify::verify`]) to get a [`VerifiedProgram`] the VM accepts.
#[derive(Debug, Clone, Default)]
pub struct Program {
    /// The instructions.
    pub code: Vec<Op>,
    /// Per instruction: the source location it came from.
    pub debug: Vec<Option<Location>>,
    /// JSON literals.
    pub consts: Vec<Value>,
    /// `in [...]` sets.
    pub sets: Vec<ValueSet>,
    /// Interned paths.
    pub paths: Vec<CompiledPath>,
    /// Compiled regexes.
    pub regexes: Vec<CompiledRegex>,
    /// Compiled payload schemas.
    pub schemas: Vec<SchemaProgram>,
    /// Compiled wall-clock windows.
    pub windows: Vec<CompiledWindow>,
    /// `fieldRange` bounds.
    pub bounds: Vec<BoundSet>,
    /// One entry per top-level constraint.
    pub checks: Vec<CheckInfo>,
    /// The deepest the stack gets, as computed by the compiler (the verifier re-derives it).
    pub max_stack: u16,
}

/// A rate limit of a capability.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimitSpec {
    /// N: calls per window (sustained with burst).
    pub count: u64,
    /// T.
    pub per: std::time::Duration,
    /// B: switches to a token bucket.
    pub burst: Option<u64>,
    /// Paths whose values split the key (indices into the program's path table).
    pub(crate) by: Vec<super::index::PathIdx>,
    /// Where it was written.
    pub location: Option<Location>,
    /// The constraint as written, for messages (`10 per 1m`).
    pub summary: String,
}

/// A capability's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifetimeSpec {
    /// Good for N calls per grant.
    Call(u64),
    /// Good while the named transaction is open.
    Transaction,
    /// Good for a duration after issue.
    WallClock {
        /// How long.
        duration: std::time::Duration,
        /// Renewed on use after expiry.
        renewable: bool,
    },
    /// Good until revoked.
    Process,
}

/// Whether a capability or skill needs first-use approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SensitivityLevel {
    /// Gated by autonomy score only.
    #[default]
    Normal,
    /// Needs a recorded approval.
    Elevated,
}

/// One compiled capability.
#[derive(Debug, Clone)]
pub struct CompiledCapability {
    /// Its name, interned (a decision carries a copy).
    pub name: Name,
    /// Where it was declared.
    pub location: Option<Location>,
    /// The resource template.
    pub(crate) resource: ResourcePattern,
    /// Allowed operations, compared exactly.
    pub operations: Vec<Box<str>>,
    /// The lifetime of its grants.
    pub lifetime: LifetimeSpec,
    /// Minimum autonomy score (the capability's risk, else the skill's).
    pub required_autonomy: u8,
    /// Sensitivity (the capability's, else the skill's).
    pub sensitivity: SensitivityLevel,
    /// The justification, if any.
    pub justification: Option<String>,
    /// The constraint program (rate limits excluded).
    pub(crate) program: VerifiedProgram,
    /// Rate limits, checked after the program, in declaration order.
    pub(crate) rate_limits: Vec<RateLimitSpec>,
}

impl CompiledCapability {
    /// The kind of resource its template names (`http`, `file`, `service`, ...).
    pub fn resource_kind(&self) -> ResourceKind {
        self.resource.kind()
    }

    /// Its resource template as written (`https://api.example.com/v1/{id}`).
    pub fn locator(&self) -> &str {
        self.resource.locator()
    }

    /// Its top-level constraints, in the order the program checks them: what each is, where it
    /// was written and its short source text.
    pub fn checks(&self) -> &[CheckInfo] {
        &self.program.program().checks
    }

    /// Its rate limits, in declaration order (checked after every constraint holds).
    pub fn rate_limits(&self) -> &[RateLimitSpec] {
        &self.rate_limits
    }

    /// The request paths a rate limit's key is split by (`agent.id`), as written.
    pub fn rate_limit_keys<'a>(
        &'a self,
        limit: &'a RateLimitSpec,
    ) -> impl Iterator<Item = &'a str> {
        limit.by.iter().map(|&path| {
            super::index::lookup(&self.program.program().paths, path)
                .map_or("?", |p| p.text.as_str())
        })
    }

    /// True when its constraints read the payload: a path under `payload`, a `payloadSchema`,
    /// or a rate limit `by` a payload path.
    pub fn reads_payload(&self) -> bool {
        let program = self.program.program();
        !program.schemas.is_empty()
            || program.paths.iter().any(|path| {
                matches!(
                    path.access,
                    PathAccess::Json {
                        root: JsonRoot::Payload,
                        ..
                    }
                )
            })
    }

    /// Every request path its constraints read (`payload.attendees[*].email`), as written.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.program.program().paths.iter().map(|p| p.text.as_str())
    }

    /// Its bytecode as text, one instruction a line with the source line it came from, then the
    /// plan of its checks: what `capgate disasm` prints.
    pub fn disassemble(&self) -> String {
        let mut text = super::disasm::disassemble(self.program.program());
        text.push_str(&super::disasm::disassemble_plan(self.program.plan()));
        text
    }

    /// The verified program. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn program(&self) -> &VerifiedProgram {
        &self.program
    }

    /// Replaces the verified program, for tests that forge one. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn set_program(&mut self, program: VerifiedProgram) {
        self.program = program;
    }

    /// The compiled resource template. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn resource(&self) -> &ResourcePattern {
        &self.resource
    }

    /// True when `operation` is one of the capability's operations.
    pub fn allows_operation(&self, operation: &str) -> bool {
        self.operations
            .iter()
            .any(|op| bytes_eq(op.as_bytes(), operation.as_bytes()))
    }
}

/// One compiled skill.
#[derive(Debug, Clone)]
pub struct CompiledSkill {
    /// The skill name, interned (a decision carries a copy).
    pub name: Name,
    /// `version`.
    pub version: String,
    /// `hash` (contentHash), compared with a request's `skill_hash`.
    pub hash: Option<String>,
    /// `signer`.
    pub signer: Option<String>,
    /// Where it was declared.
    pub location: Option<Location>,
    /// The SHA-256 of [`CompiledSkill::manifest`]: grants are pinned to it, audit records name
    /// it.
    pub revision: Revision,
    /// The canonical manifest the skill was compiled from (compact JSON, keys in byte order;
    /// `docs/semantics.md`): the bytes its revision hashes, and what a `.capc` file's bytecode
    /// is checked against at load.
    pub manifest: Arc<str>,
    /// The capabilities, in declaration order.
    pub capabilities: Vec<CompiledCapability>,
}

impl CompiledSkill {
    /// The capability named `name`.
    pub fn capability(&self, name: &str) -> Option<&CompiledCapability> {
        self.capabilities.iter().find(|c| &*c.name == name)
    }
}
