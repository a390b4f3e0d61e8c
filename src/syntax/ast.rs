//! The typed AST both front ends produce.
//!
//! A [`PolicyFile`] holds [`Skill`]s; a skill holds [`Capability`]s; a capability holds
//! [`Constraint`]s. Every node that an error or a deny reason can point at carries a [`Span`].
//! The `.cap` parser (`syntax::parser`) and the JSON manifest loader (`manifest`) both build this
//! tree; nothing here is validated beyond what the grammar guarantees — `compile::check` does that.

use chrono::{DateTime, FixedOffset};
use serde_json::Value;

pub use crate::resource_kind::ResourceKind;
use crate::span::Span;
use crate::value::Path;
use crate::vocabulary::ConstraintKeyword;

/// A value together with the source range it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    /// The value.
    pub node: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// Pairs a value with its span.
    pub fn new(node: T, span: Span) -> Self {
        Spanned { node, span }
    }
}

/// One policy file: one or more skills.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyFile {
    /// The skills, in file order.
    pub skills: Vec<Skill>,
}

/// A `skill "name" { ... }` block (or one JSON manifest).
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// The skill's name.
    pub name: Spanned<String>,
    /// `version` (required by the checker).
    pub version: Option<Spanned<String>>,
    /// `hash` / `contentHash`.
    pub hash: Option<Spanned<String>>,
    /// `signer` / `signingIdentity`.
    pub signer: Option<Spanned<String>>,
    /// `risk`; absent means none (0).
    pub risk: Option<Spanned<Risk>>,
    /// `sensitivity`; absent means normal.
    pub sensitivity: Option<Spanned<Sensitivity>>,
    /// The capabilities, in declaration order.
    pub capabilities: Vec<Capability>,
    /// The whole block.
    pub span: Span,
}

/// A risk level: a label or a raw score (the checker enforces `0..=100`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// `none|low|medium|high|critical`.
    Label(RiskLabel),
    /// A raw number as written; may be out of range until checked.
    Score(i64),
}

/// The named risk levels of the seed schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RiskLabel {
    /// Minimum autonomy 0.
    None,
    /// Minimum autonomy 60.
    Low,
    /// Minimum autonomy 70.
    Medium,
    /// Minimum autonomy 80.
    High,
    /// Minimum autonomy 90.
    Critical,
}

impl RiskLabel {
    /// Every label with its keyword.
    pub const ALL: [(RiskLabel, &'static str); 5] = [
        (RiskLabel::None, "none"),
        (RiskLabel::Low, "low"),
        (RiskLabel::Medium, "medium"),
        (RiskLabel::High, "high"),
        (RiskLabel::Critical, "critical"),
    ];

    /// The label spelled `word`, if any.
    pub fn from_name(word: &str) -> Option<RiskLabel> {
        Self::ALL
            .into_iter()
            .find(|(_, name)| *name == word)
            .map(|(label, _)| label)
    }

    /// The keyword for this label.
    pub fn name(self) -> &'static str {
        Self::ALL
            .into_iter()
            .find(|(label, _)| *label == self)
            .map_or("none", |(_, name)| name)
    }

    /// The minimum autonomy score this label requires.
    pub fn min_score(self) -> u8 {
        match self {
            RiskLabel::None => 0,
            RiskLabel::Low => 60,
            RiskLabel::Medium => 70,
            RiskLabel::High => 80,
            RiskLabel::Critical => 90,
        }
    }
}

/// `sensitivity normal|elevated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sensitivity {
    /// Auto-approved by autonomy score.
    #[default]
    Normal,
    /// Needs a recorded first-use approval.
    Elevated,
}

/// A `capability "name" { ... }` block.
#[derive(Debug, Clone, PartialEq)]
pub struct Capability {
    /// Unique within its skill.
    pub name: Spanned<String>,
    /// `resource KIND "LOCATOR"`; `None` only when missing (a check error).
    pub resource: Option<Spanned<ResourceDecl>>,
    /// `operations VERB, ...`; empty when missing (a check error).
    pub operations: Vec<Spanned<String>>,
    /// Span of the `operations` line, when present.
    pub operations_span: Option<Span>,
    /// `lifetime ...`; absent means `call 1`.
    pub lifetime: Option<Spanned<Lifetime>>,
    /// `justification "..."`.
    pub justification: Option<Spanned<String>>,
    /// Overrides the skill's risk.
    pub risk: Option<Spanned<Risk>>,
    /// Overrides the skill's sensitivity.
    pub sensitivity: Option<Spanned<Sensitivity>>,
    /// Top-level constraints (a conjunction), in declaration order.
    pub constraints: Vec<Constraint>,
    /// The whole block.
    pub span: Span,
}

/// A resource declaration as written: the kind and the locator template.
///
/// For `http` the locator is the whole URL template (`https://host/v3/{id}`); for the other kinds
/// it is the part after `KIND:` (`crm/{org}/records`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDecl {
    /// The resource kind.
    pub kind: ResourceKind,
    /// The locator template.
    pub locator: String,
}

/// A duration, kept in nanoseconds (`500ms`, `30s`, `10m`, `2h`, `1d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration {
    /// Length in nanoseconds.
    pub nanos: u64,
}

impl Duration {
    /// One hour.
    pub const HOUR: Duration = Duration {
        nanos: 3_600_000_000_000,
    };

    /// The same length as a `std::time::Duration`.
    pub fn to_std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.nanos)
    }
}

/// `lifetime ...` (SPEC §2.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// `call [N]`: a grant good for N calls.
    Call(u64),
    /// `transaction`: good while the named transaction is open.
    Transaction,
    /// `wallClock D [renewable]`.
    WallClock {
        /// How long a grant lives after issue.
        duration: Duration,
        /// Whether an expired grant is renewed on use.
        renewable: bool,
    },
    /// `process`: until revoked or unloaded.
    Process,
}

/// One constraint, possibly `optional`.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    /// What it checks.
    pub kind: ConstraintKind,
    /// `optional` prefix: holds when the path (or any segment of it) is absent.
    pub optional: bool,
    /// The whole constraint, from its keyword (or `optional`) to its end.
    pub span: Span,
}

/// A path with its span.
pub type SpannedPath = Spanned<Path>;

/// The constraint kinds of SPEC §2.4 plus the combinators.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintKind {
    /// `fieldEquals PATH == LIT` / `in [...]` / `== PATH2`.
    FieldEquals {
        /// The path compared.
        path: SpannedPath,
        /// What it must equal.
        rhs: EqualsRhs,
    },
    /// `fieldMatches PATH ~ /REGEX/[i]`: whole-string match.
    FieldMatches {
        /// The path matched.
        path: SpannedPath,
        /// The regex source, without delimiters.
        pattern: Spanned<String>,
        /// The `i` flag.
        case_insensitive: bool,
    },
    /// `fieldRange ...`.
    FieldRange {
        /// What is bounded.
        subject: RangeSubject,
        /// One or more bounds, all of which must hold.
        bounds: Vec<Bound>,
    },
    /// `payloadSchema { ... }` / `payloadSchema file "..."`.
    PayloadSchema(SchemaSource),
    /// `actorBinding PATH, ... == agent.FIELD`.
    ActorBinding {
        /// Paths that must equal the identity field.
        paths: Vec<SpannedPath>,
        /// The identity path, rooted at `agent`.
        identity: SpannedPath,
    },
    /// `rateLimit N per T [burst B] [by PATH, ...]`.
    RateLimit(RateLimit),
    /// `wallClockWindow ...`.
    WallClockWindow(WindowSpec),
    /// `any { ... }`: at least one holds.
    Any(Vec<Constraint>),
    /// `all { ... }`: every one holds.
    All(Vec<Constraint>),
    /// `not { c }`: `c` does not hold.
    Not(Box<Constraint>),
}

impl ConstraintKind {
    /// The keyword this constraint is written with.
    pub fn keyword(&self) -> ConstraintKeyword {
        match self {
            ConstraintKind::FieldEquals { .. } => ConstraintKeyword::FieldEquals,
            ConstraintKind::FieldMatches { .. } => ConstraintKeyword::FieldMatches,
            ConstraintKind::FieldRange { .. } => ConstraintKeyword::FieldRange,
            ConstraintKind::PayloadSchema(_) => ConstraintKeyword::PayloadSchema,
            ConstraintKind::ActorBinding { .. } => ConstraintKeyword::ActorBinding,
            ConstraintKind::RateLimit(_) => ConstraintKeyword::RateLimit,
            ConstraintKind::WallClockWindow(_) => ConstraintKeyword::WallClockWindow,
            ConstraintKind::Any(_) => ConstraintKeyword::Any,
            ConstraintKind::All(_) => ConstraintKeyword::All,
            ConstraintKind::Not(_) => ConstraintKeyword::Not,
        }
    }

    /// The constraint name used in reasons (`fieldEquals`, `any`, ...): the keyword's name.
    pub fn name(&self) -> &'static str {
        self.keyword().name()
    }
}

/// The right-hand side of `fieldEquals`.
#[derive(Debug, Clone, PartialEq)]
pub enum EqualsRhs {
    /// `== LITERAL`.
    Value(Spanned<Value>),
    /// `in [LIT, ...]`.
    In(Vec<Spanned<Value>>),
    /// `== PATH2`.
    Path(SpannedPath),
}

/// What a `fieldRange` bounds.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeSubject {
    /// A JSON number at a path (or a timestamp, when a bound is `now`).
    Field(SpannedPath),
    /// `A - B`: the difference of two RFC 3339 timestamps, bounded by durations.
    Difference(SpannedPath, SpannedPath),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl CmpOp {
    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// One bound: `subject OP value`.
///
/// `fieldRange 0 < payload.x <= 10` is written as two bounds with the subject on the left:
/// `payload.x > 0` and `payload.x <= 10`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    /// The comparison, with the subject on the left.
    pub op: CmpOp,
    /// The other side.
    pub value: BoundValue,
    /// Where the bound was written.
    pub span: Span,
}

/// The constant side of a bound.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundValue {
    /// A JSON number (for `Field` subjects).
    Number(serde_json::Number),
    /// A duration (for `Difference` subjects).
    Duration(Duration),
    /// The engine clock (for timestamp `Field` subjects).
    Now,
}

/// Where a `payloadSchema` comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaSource {
    /// Written inline, as JSON.
    Inline(Spanned<Value>),
    /// `file "rel/path.json"`, relative to the policy file; the loader reads it before compiling
    /// and replaces this with `Inline`.
    File(Spanned<String>),
}

/// `rateLimit N per T [burst B] [by PATH, ...]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// N: calls allowed per window (sustained rate with `burst`).
    pub count: Spanned<u64>,
    /// T: the window length.
    pub per: Spanned<Duration>,
    /// B: token-bucket capacity; switches to GCRA.
    pub burst: Option<Spanned<u64>>,
    /// Paths whose values split the key.
    pub by: Vec<SpannedPath>,
}

/// A set of weekdays, bit 0 = Monday … bit 6 = Sunday.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DaySet(pub u8);

impl DaySet {
    /// Every day.
    pub const DAILY: DaySet = DaySet(0b111_1111);
    /// Day names in bit order.
    pub const NAMES: [&'static str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

    /// True when the day `index` (0 = Monday) is in the set.
    pub fn contains(self, index: u32) -> bool {
        index < 7 && self.0 & (1 << index) != 0
    }
}

/// A time of day in minutes since midnight, `0..=1440` (`24:00` is 1440).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeOfDay(pub u16);

/// `DAYS HH:MM-HH:MM`.
#[derive(Debug, Clone, PartialEq)]
pub struct DayWindow {
    /// The days a window may start on.
    pub days: DaySet,
    /// Inclusive start.
    pub start: TimeOfDay,
    /// Exclusive end; `end <= start` crosses midnight into the next day.
    pub end: TimeOfDay,
    /// Where it was written.
    pub span: Span,
}

/// `wallClockWindow ...`.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowSpec {
    /// Weekly windows in an IANA zone (default `UTC`).
    Weekly {
        /// The windows; the instant must fall in one.
        windows: Vec<DayWindow>,
        /// The zone name as written (validated by the checker).
        zone: Spanned<String>,
    },
    /// `from RFC3339 until RFC3339`: absolute half-open interval.
    Absolute {
        /// Inclusive start.
        from: Spanned<DateTime<FixedOffset>>,
        /// Exclusive end.
        until: Spanned<DateTime<FixedOffset>>,
    },
}
