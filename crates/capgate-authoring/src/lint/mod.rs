//! Review warnings for policies that compile but deserve a second look.
//!
//! [`lint_policy`] walks a parsed [`PolicyFile`] and returns one [`Lint`] per finding, each with a
//! stable [`LintCode`] (`CG001`…), the span it points at, a one-line message and a help line;
//! [`lint_text`] reads the text of a policy that parsed for what the AST does not show (a
//! bidirectional control written raw in a string literal).
//! The rules come from the review guidance of the capability-manifest article (SPEC's seed
//! `001`): wildcard resources, unconstrained writes, long lifetimes, boilerplate
//! justifications, regexes that accept anything, capabilities granting every verb, write
//! capabilities without a declared risk, `optional` under `not`, and `fieldEquals` between two
//! paths that may both be `null`. `docs/lints.md` lists each rule with an example and the fix.
//!
//! Lints never change what a policy allows; a policy with warnings loads and runs unchanged.
//! A few lints are errors ([`LintCode::is_error`]): `capgate lint` fails on them without
//! `--deny warnings`.

use capgate::span::{FileId, Span};
use capgate::syntax::ast::{
    Capability, Constraint, ConstraintKind, Duration, EqualsRhs, Lifetime, PolicyFile,
    RangeSubject, ResourceKind, SchemaSource, Skill,
};
use capgate::value::{Path, Root, Segment};

/// The review rules, each with a stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LintCode {
    /// CG001: a resource with `*`, `**` or a `*.` host.
    WildcardResource,
    /// CG002: a write capability with no `payloadSchema` and no field constraint.
    UnconstrainedWrite,
    /// CG003: `lifetime process` or a `wallClock` lifetime longer than one hour.
    LongLifetime,
    /// CG004: a justification that is blank, very short, or a placeholder.
    BoilerplateJustification,
    /// CG005: a `fieldMatches` regex that accepts any string.
    MatchAnythingRegex,
    /// CG006: every verb of the resource kind is granted.
    EveryVerb,
    /// CG007: a write capability on a skill that declares no `risk`.
    WriteWithoutRisk,
    /// CG008: `optional` inside `not`, which inverts it.
    OptionalInsideNot,
    /// CG009: `fieldEquals A == B` between two paths that may both be `null`.
    NullEqualsNull,
    /// CG011: a bidirectional control written raw inside a string literal (an error).
    BidiInString,
}

impl LintCode {
    /// Every lint, in code order.
    pub const ALL: [LintCode; 10] = [
        LintCode::WildcardResource,
        LintCode::UnconstrainedWrite,
        LintCode::LongLifetime,
        LintCode::BoilerplateJustification,
        LintCode::MatchAnythingRegex,
        LintCode::EveryVerb,
        LintCode::WriteWithoutRisk,
        LintCode::OptionalInsideNot,
        LintCode::NullEqualsNull,
        LintCode::BidiInString,
    ];

    /// The stable code, `CG001`…`CG008`, `CG011`.
    pub fn code(self) -> &'static str {
        match self {
            LintCode::WildcardResource => "CG001",
            LintCode::UnconstrainedWrite => "CG002",
            LintCode::LongLifetime => "CG003",
            LintCode::BoilerplateJustification => "CG004",
            LintCode::MatchAnythingRegex => "CG005",
            LintCode::EveryVerb => "CG006",
            LintCode::WriteWithoutRisk => "CG007",
            LintCode::OptionalInsideNot => "CG008",
            LintCode::NullEqualsNull => "CG009",
            LintCode::BidiInString => "CG011",
        }
    }

    /// A short kebab-case name (`wildcard-resource`).
    pub fn name(self) -> &'static str {
        match self {
            LintCode::WildcardResource => "wildcard-resource",
            LintCode::UnconstrainedWrite => "unconstrained-write",
            LintCode::LongLifetime => "long-lifetime",
            LintCode::BoilerplateJustification => "boilerplate-justification",
            LintCode::MatchAnythingRegex => "match-anything-regex",
            LintCode::EveryVerb => "every-verb",
            LintCode::WriteWithoutRisk => "write-without-risk",
            LintCode::OptionalInsideNot => "optional-inside-not",
            LintCode::NullEqualsNull => "null-equals-null",
            LintCode::BidiInString => "bidi-in-string",
        }
    }

    /// True for the lints that are errors, not warnings: what a reviewer approves would not be
    /// what runs.
    pub fn is_error(self) -> bool {
        matches!(self, LintCode::BidiInString)
    }
}

/// One review warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lint {
    /// Which rule.
    pub code: LintCode,
    /// What it points at.
    pub span: Span,
    /// One line, lowercase.
    pub message: String,
    /// How to fix it.
    pub help: String,
}

/// The verbs of the kinds that have more than one, for [`LintCode::EveryVerb`] (SPEC §2.2).
const HTTP_VERBS: [&str; 8] = [
    "GET", "HEAD", "OPTIONS", "LIST", "POST", "PUT", "PATCH", "DELETE",
];
const DB_VERBS: [&str; 4] = ["SELECT", "INSERT", "UPDATE", "DELETE"];

/// The longest `wallClock` lifetime that is not flagged.
const LONGEST_QUIET_LIFETIME: Duration = Duration::HOUR;

/// Fewer characters than this make a justification too short to review.
const SHORTEST_JUSTIFICATION: usize = 20;

/// Every review warning for a policy file, in source order within each capability.
pub fn lint_policy(file: &PolicyFile) -> Vec<Lint> {
    let mut lints = Vec::new();
    for skill in &file.skills {
        for capability in &skill.capabilities {
            lint_capability(skill, capability, &mut lints);
        }
    }
    lints
}

/// The lints found in the text of policy file `file` (a `.cap` file or a JSON manifest) that
/// parsed: a bidirectional control written raw in it ([`LintCode::BidiInString`]). The parser
/// refuses one anywhere else, so each is inside a string literal, where it is a value the policy
/// means but reorders what a reviewer sees around it; written as an escape (`\u202e`) it shows.
pub fn lint_text(file: FileId, text: &str) -> Vec<Lint> {
    if text.is_ascii() {
        return Vec::new();
    }
    text.char_indices()
        .filter(|(_, c)| capgate::value::is_bidi_control(*c))
        .map(|(at, c)| Lint {
            code: LintCode::BidiInString,
            span: Span::new(file, at, at + c.len_utf8()),
            message: format!(
                "bidirectional control U+{:04X} written raw in a string literal",
                u32::from(c)
            ),
            help: format!(
                "it reorders how the text around it is shown; write it as the escape `\\u{:04x}`",
                u32::from(c)
            ),
        })
        .collect()
}

fn lint_capability(skill: &Skill, capability: &Capability, lints: &mut Vec<Lint>) {
    let name = &capability.name.node;
    let mut push = |code: LintCode, span: Span, message: String, help: &str| {
        lints.push(Lint {
            code,
            span,
            message,
            help: help.to_owned(),
        });
    };
    let kind = capability.resource.as_ref().map(|r| r.node.kind);
    if let Some(resource) = &capability.resource
        && let Some(what) = wildcard_in(resource.node.kind, &resource.node.locator)
    {
        push(
            LintCode::WildcardResource,
            resource.span,
            format!(
                "capability `{name}` reaches {what} of `{}`",
                resource.node.locator
            ),
            "name the exact host and path segments, or bind the segment with `{name}` and constrain it",
        );
    }
    let write_verb = kind.and_then(|kind| {
        capability
            .operations
            .iter()
            .find(|op| !kind.is_read_verb(&op.node))
    });
    let operations_span = capability.operations_span.unwrap_or(capability.name.span);
    if let Some(verb) = write_verb {
        let constrained = capability.constraints.iter().any(constrains_fields);
        if !constrained {
            push(
                LintCode::UnconstrainedWrite,
                operations_span,
                format!(
                    "capability `{name}` grants the write verb `{}` with no payloadSchema and no field constraint",
                    verb.node
                ),
                "add a `payloadSchema` or field constraints that pin down what may be written",
            );
        }
        if skill.risk.is_none() && capability.risk.is_none() {
            push(
                LintCode::WriteWithoutRisk,
                operations_span,
                format!(
                    "capability `{name}` grants the write verb `{}` but skill `{}` declares no risk",
                    verb.node, skill.name.node
                ),
                "declare `risk low|medium|high|critical` on the skill or the capability",
            );
        }
    }
    if let Some(lifetime) = &capability.lifetime {
        match lifetime.node {
            Lifetime::Process => push(
                LintCode::LongLifetime,
                lifetime.span,
                format!("capability `{name}` lives for the whole process"),
                "prefer `lifetime call`, `transaction` or a short `wallClock`; grants that never expire accumulate",
            ),
            Lifetime::WallClock { duration, .. } if duration > LONGEST_QUIET_LIFETIME => push(
                LintCode::LongLifetime,
                lifetime.span,
                format!(
                    "capability `{name}` lives for `{}`, longer than one hour",
                    capgate::syntax::units::format_duration(duration)
                ),
                "shorten the lifetime, or make it `renewable` with a shorter duration",
            ),
            _ => {}
        }
    }
    if let Some(justification) = &capability.justification
        && let Some(why) = boilerplate(&justification.node)
    {
        push(
            LintCode::BoilerplateJustification,
            justification.span,
            format!("the justification of capability `{name}` {why}"),
            "say what the skill does with this capability and why it needs exactly this much",
        );
    }
    if let (Some(all), Some(span)) = (kind.and_then(every_verb_list), capability.operations_span) {
        let granted = |verb: &&str| capability.operations.iter().any(|op| op.node == **verb);
        if all.iter().all(granted) {
            let kind_name = kind.map_or("", ResourceKind::name);
            push(
                LintCode::EveryVerb,
                span,
                format!("capability `{name}` grants every `{kind_name}` verb"),
                "grant only the verbs the skill uses; split reads and writes into separate capabilities",
            );
        }
    }
    let pins = Pins::of(&capability.constraints);
    for constraint in &capability.constraints {
        walk(constraint, false, &mut |constraint, negated| {
            if let ConstraintKind::FieldEquals {
                path,
                rhs: EqualsRhs::Path(other),
            } = &constraint.kind
            {
                let open = |path: &Path| !pins.rules_out_null(path, constraint.optional);
                if !negated && open(&path.node) && open(&other.node) {
                    let (optional, absent) = if constraint.optional {
                        ("optional ", " or both absent")
                    } else {
                        ("", "")
                    };
                    lints.push(Lint {
                        code: LintCode::NullEqualsNull,
                        span: constraint.span,
                        message: format!(
                            "`{optional}fieldEquals {} == {}` in capability `{name}` holds when both are `null`{absent}",
                            path.node, other.node
                        ),
                        help: format!(
                            "if `{}` is the caller's identity, write `actorBinding {} == {}` (it refuses a `null` identity); otherwise rule out `null` on one side: a `payloadSchema` that requires it with a non-null `type`, a `fieldMatches` or `fieldRange` on it, or `not {{ fieldEquals {} == null }}`",
                            other.node, path.node, other.node, path.node
                        ),
                    });
                }
            }
            if let ConstraintKind::FieldMatches { pattern, .. } = &constraint.kind
                && !negated
                && matches_anything(&pattern.node)
            {
                lints.push(Lint {
                        code: LintCode::MatchAnythingRegex,
                        span: pattern.span,
                        message: format!(
                            "the regex `{}` in capability `{name}` accepts any string",
                            pattern.node
                        ),
                        help: "write the shape the value must have; to require a string, use a payloadSchema `type`"
                            .to_owned(),
                    });
            }
            if constraint.optional && negated {
                lints.push(Lint {
                    code: LintCode::OptionalInsideNot,
                    span: constraint.span,
                    message: format!(
                        "`optional {}` inside `not` fails when the value is absent",
                        constraint.kind.name()
                    ),
                    help: "`optional` makes the inner constraint hold when the path is absent, so `not` denies; move `optional` out or test presence explicitly"
                        .to_owned(),
                });
            }
        });
    }
}

/// What a capability's constraints rule out, for [`LintCode::NullEqualsNull`]: the paths at
/// which every request the capability allows has a value that is not `null` (`present`), or at
/// least is not `null` when present (`non_null`). Read from the constraints every allowed
/// request meets — the top-level ones and those of a top-level `all`, not `optional` — and kept
/// simple: no reasoning through `any`, `not` (but `not { fieldEquals P == null }`), other
/// `fieldEquals` paths or schema keywords other than `required`, `properties` and `type`.
#[derive(Default)]
struct Pins<'a> {
    present: Vec<&'a Path>,
    non_null: Vec<&'a Path>,
    schemas: Vec<&'a serde_json::Value>,
}

impl<'a> Pins<'a> {
    fn of(constraints: &'a [Constraint]) -> Pins<'a> {
        let mut pins = Pins::default();
        pins.add(constraints);
        pins
    }

    fn add(&mut self, constraints: &'a [Constraint]) {
        for constraint in constraints {
            if constraint.optional {
                continue;
            }
            match &constraint.kind {
                ConstraintKind::All(items) => self.add(items),
                // A regex, a range and a non-null literal each hold only on a value of their
                // kind; an identity binding only on a non-null identity equal to the paths.
                ConstraintKind::FieldMatches { path, .. }
                | ConstraintKind::FieldRange {
                    subject: RangeSubject::Field(path),
                    ..
                } => self.present.push(&path.node),
                ConstraintKind::FieldRange {
                    subject: RangeSubject::Difference(a, b),
                    ..
                } => self.present.extend([&a.node, &b.node]),
                ConstraintKind::FieldEquals {
                    path,
                    rhs: EqualsRhs::Value(value),
                } if !value.node.is_null() => self.present.push(&path.node),
                ConstraintKind::FieldEquals {
                    path,
                    rhs: EqualsRhs::In(values),
                } if values.iter().all(|v| !v.node.is_null()) => self.present.push(&path.node),
                ConstraintKind::ActorBinding { paths, identity } => {
                    self.present.push(&identity.node);
                    self.present.extend(paths.iter().map(|p| &p.node));
                }
                ConstraintKind::Not(inner) if !inner.optional => {
                    if let ConstraintKind::FieldEquals {
                        path,
                        rhs: EqualsRhs::Value(value),
                    } = &inner.kind
                        && value.node.is_null()
                    {
                        self.non_null.push(&path.node);
                    }
                }
                ConstraintKind::PayloadSchema(SchemaSource::Inline(schema)) => {
                    self.schemas.push(&schema.node);
                }
                _ => {}
            }
        }
    }

    /// Whether every allowed request has a non-`null` value at `path` — present too, when the
    /// `fieldEquals` is `optional` (which holds when both sides are absent). A path rooted
    /// elsewhere than `payload`, `agent` or `context` is never `null`: a binding, a query
    /// parameter or a request field is a string when present.
    fn rules_out_null(&self, path: &Path, optional: bool) -> bool {
        if !matches!(path.root, Root::Payload | Root::Agent | Root::Context) {
            return !optional;
        }
        self.present.contains(&path)
            || (!optional && self.non_null.contains(&path))
            || (path.root == Root::Payload
                && self
                    .schemas
                    .iter()
                    .any(|schema| schema_requires_non_null(schema, &path.segments)))
    }
}

/// Whether `schema` requires a non-`null` value at the payload path `segments` (keys only):
/// each key in the `required` of the schema above it and in its `properties`, and a `type` at
/// the end that does not include `"null"`.
fn schema_requires_non_null(schema: &serde_json::Value, segments: &[Segment]) -> bool {
    let mut node = schema;
    for segment in segments {
        let Segment::Key(key) = segment else {
            return false;
        };
        let required = node
            .get("required")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|names| names.iter().any(|name| name.as_str() == Some(key)));
        match node.get("properties").and_then(|p| p.get(key)) {
            Some(next) if required => node = next,
            _ => return false,
        }
    }
    match node.get("type") {
        Some(serde_json::Value::String(name)) => name != "null",
        Some(serde_json::Value::Array(names)) => {
            !names.is_empty() && names.iter().all(|name| name.as_str() != Some("null"))
        }
        _ => false,
    }
}

/// Visits a constraint and everything nested in it; `negated` is true under an odd number of
/// `not`s.
fn walk(constraint: &Constraint, negated: bool, visit: &mut impl FnMut(&Constraint, bool)) {
    visit(constraint, negated);
    match &constraint.kind {
        ConstraintKind::Any(items) | ConstraintKind::All(items) => {
            for item in items {
                walk(item, negated, visit);
            }
        }
        ConstraintKind::Not(inner) => walk(inner, !negated, visit),
        _ => {}
    }
}

/// True when a constraint (or one nested in it) checks the payload's shape or a field.
fn constrains_fields(constraint: &Constraint) -> bool {
    match &constraint.kind {
        ConstraintKind::FieldEquals { .. }
        | ConstraintKind::FieldMatches { .. }
        | ConstraintKind::FieldRange { .. }
        | ConstraintKind::PayloadSchema(_)
        | ConstraintKind::ActorBinding { .. } => true,
        ConstraintKind::Any(items) | ConstraintKind::All(items) => {
            items.iter().any(constrains_fields)
        }
        ConstraintKind::Not(inner) => constrains_fields(inner),
        ConstraintKind::RateLimit(_) | ConstraintKind::WallClockWindow(_) => false,
    }
}

fn every_verb_list(kind: ResourceKind) -> Option<&'static [&'static str]> {
    match kind {
        ResourceKind::Http => Some(&HTTP_VERBS),
        ResourceKind::Db => Some(&DB_VERBS),
        _ => None,
    }
}

/// What is wild about a locator, if anything: a `*.` host, a `*` segment or a `**` tail.
fn wildcard_in(kind: ResourceKind, locator: &str) -> Option<&'static str> {
    let path = if kind == ResourceKind::Http {
        let after_scheme = locator.split_once("://").map_or(locator, |(_, rest)| rest);
        let (host, path) = after_scheme.split_once('/').unwrap_or((after_scheme, ""));
        if host.starts_with("*.") || host == "*" {
            return Some("every subdomain");
        }
        path.split_once('?').map_or(path, |(path, _)| path)
    } else {
        locator
    };
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"**") {
        Some("every path under a prefix")
    } else if segments.contains(&"*") {
        Some("any value of a path segment")
    } else {
        None
    }
}

/// Why a justification reads as boilerplate, if it does.
fn boilerplate(text: &str) -> Option<&'static str> {
    const PLACEHOLDERS: [&str; 7] = ["todo", "tbd", "fixme", "xxx", "placeholder", "lorem", "tk"];
    const GENERIC: [&str; 30] = [
        "needed",
        "need",
        "needs",
        "required",
        "require",
        "requires",
        "necessary",
        "for",
        "the",
        "a",
        "to",
        "by",
        "skill",
        "this",
        "it",
        "is",
        "work",
        "works",
        "function",
        "functionality",
        "access",
        "permission",
        "permissions",
        "capability",
        "tool",
        "api",
        "because",
        "of",
        "and",
        "use",
    ];
    let lower = text.trim().to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.iter().any(|w| PLACEHOLDERS.contains(w)) {
        Some("is a placeholder")
    } else if lower.chars().count() < SHORTEST_JUSTIFICATION {
        Some("is too short to tell a reviewer why")
    } else if words.iter().all(|w| GENERIC.contains(w)) {
        Some("says only that the capability is needed")
    } else {
        None
    }
}

/// True for regexes that accept every string (or every non-empty one) once wrapped whole:
/// `.*`, `.+`, `(?s).*`, `[\s\S]*`, `^(.*)$`, `.{0,}`, `(?i).*`, `.*|x` and the like.
///
/// Decided by running the regex as the engine compiles it (`^(?:…)$`) on a spread of probes —
/// letters, digits, punctuation, spaces, tabs, accents, CJK, emoji, and a 5,000-character mix —
/// rather than by its spelling: a list of spellings missed `.{0,}`, `(?i).*`, `(.*)?`,
/// `(?s:.)*` and `.*|x`, and trimming the pattern flagged ` .*`, which needs a leading space
/// (regressions). A line break is not probed: `.` excludes it unless `(?s)`, and `.*` is meant
/// to be flagged. A regex that does not compile is not flagged (loading reports it).
fn matches_anything(pattern: &str) -> bool {
    let Ok(regex) = capgate::compiled::Regex::new(pattern, &capgate::Limits::DEFAULT) else {
        return false;
    };
    let long: String = "aZ09 -_.,;:!?/\\'\"()[]{}<>@#$%^&*+=~`|\té漢😀".repeat(100);
    let probes = [
        "a", "Z", "0", " ", "-", ".", "x y", "\t", "é", "漢字", "😀", "a\tb", "\\", "\"",
    ];
    probes
        .iter()
        .copied()
        .chain(std::iter::once(long.as_str()))
        .all(|probe| regex.is_match(probe))
}

#[cfg(test)]
mod tests {
    use super::*;
    use capgate::span::FileId;

    fn codes(body: &str, header: &str) -> Vec<&'static str> {
        let text =
            format!("skill \"s\" {{ version \"1\" {header} capability \"c\" {{ {body} }} }}");
        let file = capgate::syntax::parse(FileId(0), &text).unwrap();
        lint_policy(&file).iter().map(|l| l.code.code()).collect()
    }

    const GOOD: &str = "justification \"Reads the records of the current organization.\"";

    #[test]
    fn a_narrow_read_capability_has_no_warnings() {
        let body =
            format!("resource http \"https://api.example.com/v1/items\" operations GET {GOOD}");
        assert!(codes(&body, "").is_empty());
    }

    #[test]
    fn wildcard_hosts_segments_and_tails_are_flagged() {
        for locator in [
            "https://*.example.com/v1",
            "https://api.example.com/*/items",
            "https://api.example.com/v1/**",
        ] {
            let body = format!("resource http \"{locator}\" operations GET {GOOD}");
            assert_eq!(codes(&body, ""), ["CG001"], "{locator}");
        }
        let body = format!("resource db \"crm/*/records\" operations SELECT {GOOD}");
        assert_eq!(codes(&body, ""), ["CG001"]);
    }

    #[test]
    fn a_write_without_schema_or_fields_and_without_risk_is_flagged_twice() {
        let body = format!("resource http \"https://api.example.com/v1\" operations POST {GOOD}");
        assert_eq!(codes(&body, ""), ["CG002", "CG007"]);
        assert_eq!(codes(&body, "risk low"), ["CG002"]);
        let body = format!("{body} fieldEquals payload.kind == \"a\"");
        assert_eq!(codes(&body, "risk low"), Vec::<&str>::new());
    }

    #[test]
    fn process_lifetimes_and_wall_clocks_over_an_hour_are_flagged() {
        let base = format!("resource http \"https://api.example.com/v1\" operations GET {GOOD}");
        assert_eq!(codes(&format!("{base} lifetime process"), ""), ["CG003"]);
        assert_eq!(
            codes(&format!("{base} lifetime wallClock 61m"), ""),
            ["CG003"]
        );
        assert!(codes(&format!("{base} lifetime wallClock 1h"), "").is_empty());
    }

    #[test]
    fn short_generic_and_placeholder_justifications_are_flagged() {
        for text in [
            "needed",
            "TODO: explain later please",
            "Required for the skill to work",
            "  ",
        ] {
            let body = format!(
                "resource http \"https://api.example.com/v1\" operations GET justification \"{text}\""
            );
            assert_eq!(codes(&body, ""), ["CG004"], "{text}");
        }
    }

    #[test]
    fn match_anything_regexes_are_flagged_outside_not_only() {
        for pattern in [".*", ".+", "^(.*)$", "(?s).*", "(?:.*?)", "[\\s\\S]*"] {
            assert!(matches_anything(pattern), "{pattern}");
        }
        for pattern in ["a.*", ".*@example\\.com", "(.*)(x)", ".*\\$"] {
            assert!(!matches_anything(pattern), "{pattern}");
        }
        // Found in review: spellings the old list missed, and a leading space it trimmed.
        for pattern in [".{0,}", "(?i).*", "(.*)?", "(?s:.)*", ".*|x"] {
            assert!(matches_anything(pattern), "{pattern}");
        }
        for pattern in [" .*", ".{0,10}", "[a-z]*", "\\w+", "(", ".*)|(?:x"] {
            assert!(!matches_anything(pattern), "{pattern}");
        }
        let base = format!("resource http \"https://api.example.com/v1\" operations GET {GOOD}");
        assert_eq!(
            codes(&format!("{base} fieldMatches payload.a ~ /.*/"), ""),
            ["CG005"]
        );
        assert!(
            codes(
                &format!("{base} not {{ fieldMatches payload.a ~ /.*/ }}"),
                ""
            )
            .is_empty()
        );
    }

    #[test]
    fn granting_every_verb_of_a_kind_is_flagged() {
        let body = format!(
            "resource db \"crm/acme/records\" operations SELECT, INSERT, UPDATE, DELETE {GOOD} fieldEquals payload.a == 1"
        );
        assert_eq!(codes(&body, "risk high"), ["CG006"]);
    }

    #[test]
    fn optional_under_an_odd_number_of_nots_is_flagged() {
        let base = format!("resource http \"https://api.example.com/v1\" operations GET {GOOD}");
        let inside = format!("{base} not {{ optional fieldEquals payload.a == 1 }}");
        assert_eq!(codes(&inside, ""), ["CG008"]);
        let double = format!("{base} not {{ not {{ optional fieldEquals payload.a == 1 }} }}");
        assert!(codes(&double, "").is_empty());
    }

    /// `fieldEquals A == B` holds on `null == null`: flagged when neither side is known to be
    /// non-null — and, for `optional`, present — from the capability's other constraints.
    #[test]
    fn field_equals_between_two_optional_paths_is_linted() {
        let base = format!("resource tool \"t\" operations call {GOOD}");
        let with = |constraints: &str| codes(&format!("{base} {constraints}"), "risk low");
        for flagged in [
            "fieldEquals payload.owner == agent.id",
            "fieldEquals payload.items[*].org == context.org",
            "any { fieldEquals payload.owner == agent.id fieldEquals agent.role == \"admin\" }",
            // `optional` also passes when both are absent: a non-null check is not enough.
            "optional fieldEquals payload.owner == agent.id not { fieldEquals payload.owner == null }",
            // Pins under `any`, `optional` or a deeper `not` rule out nothing.
            "fieldEquals payload.owner == agent.id any { fieldMatches payload.owner ~ /a/ fieldEquals payload.x == 1 }",
            "fieldEquals payload.owner == agent.id optional fieldMatches payload.owner ~ /a/",
            r#"fieldEquals payload.owner == agent.id payloadSchema {"properties": {"owner": {"type": "string"}}}"#,
            r#"fieldEquals payload.owner == agent.id payloadSchema {"required": ["owner"], "properties": {"owner": {"type": ["string", "null"]}}}"#,
        ] {
            assert_eq!(with(flagged), ["CG009"], "{flagged}");
        }
        for quiet in [
            // A literal, a binding or a request field is never null.
            "fieldEquals payload.owner == \"me\"",
            "fieldEquals resource.t == context.org",
            "fieldEquals payload.op == request.operation",
            // One side ruled out by another constraint.
            "fieldEquals payload.owner == agent.id fieldMatches agent.id ~ /[a-z]+/",
            "fieldEquals payload.owner == agent.id all { fieldRange payload.owner >= 1 }",
            "fieldEquals payload.owner == agent.id fieldEquals payload.owner in [\"a\", \"b\"]",
            "fieldEquals payload.owner == agent.id not { fieldEquals agent.id == null }",
            "actorBinding payload.owner == agent.id fieldEquals payload.other == payload.owner",
            r#"fieldEquals payload.owner.id == agent.id payloadSchema {"required": ["owner"], "properties": {"owner": {"required": ["id"], "properties": {"id": {"type": "string"}}}}}"#,
            r#"optional fieldEquals payload.owner == agent.id payloadSchema {"required": ["owner"], "properties": {"owner": {"type": "integer"}}}"#,
            // Under `not`, `null == null` holding denies: the safe way round.
            "not { fieldEquals payload.owner == agent.id }",
        ] {
            assert!(with(quiet).is_empty(), "{quiet}: {:?}", with(quiet));
        }
    }

    #[test]
    fn a_bidi_control_in_a_string_literal_is_a_lint_error() {
        let text = "skill \"s\" { version \"1\u{202e}\" capability \"c\u{2066}\" { } }";
        assert!(capgate::syntax::parse(FileId(0), text).is_ok());
        let lints = lint_text(FileId(0), text);
        let found: Vec<(&str, u32)> = lints
            .iter()
            .map(|l| (l.code.code(), l.span.start))
            .collect();
        assert_eq!(found, [("CG011", 22), ("CG011", 40)]);
        assert!(lints.iter().all(|l| l.code.is_error()));
        assert_eq!(
            lints[0].message,
            "bidirectional control U+202E written raw in a string literal"
        );
        assert!(lints[0].help.ends_with("`\\u202e`"), "{}", lints[0].help);
        // Written as an escape, it is seen, and not flagged.
        assert!(lint_text(FileId(0), "skill \"s\" { version \"1\\u202e\" }").is_empty());
        assert!(
            LintCode::ALL
                .iter()
                .filter(|c| c.is_error())
                .eq([&LintCode::BidiInString])
        );
    }

    #[test]
    fn every_code_is_distinct_and_ordered() {
        let all: Vec<&str> = LintCode::ALL.iter().map(|c| c.code()).collect();
        assert_eq!(
            all,
            [
                "CG001", "CG002", "CG003", "CG004", "CG005", "CG006", "CG007", "CG008", "CG009",
                "CG011"
            ]
        );
    }
}
