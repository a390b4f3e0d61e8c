//! A [`SpannedJson`] manifest → the shared AST ([`PolicyFile`]).
//!
//! [`lower_manifest`] walks the document with a [`Lowerer`], which collects every error instead
//! of stopping at the first: a malformed field yields its error and is then treated as absent
//! (or the enclosing node is dropped), so the rest of the document is still checked. Each object
//! is opened through [`Lowerer::object`], which rejects unknown fields with a "did you mean".
//!
//! Only the shape of the document is checked here (types, required fields, known names, the
//! lexical forms of durations, days, times, timestamps and paths). Semantics that `.cap` shares
//! (risk range, verbs per kind, regex syntax, schema keywords, justification rules) belong to
//! `compile::check`.

use chrono::{DateTime, FixedOffset};

use super::error::{ManifestError, did_you_mean};
use super::json::{JsonMember, JsonValue, SpannedJson};
use crate::span::Span;
use crate::syntax::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, DaySet, DayWindow, EqualsRhs,
    Lifetime, PolicyFile, RangeSubject, RateLimit, ResourceDecl, ResourceKind, Risk, RiskLabel,
    SchemaSource, Sensitivity, Skill, Spanned, SpannedPath, WindowSpec,
};
use crate::syntax::units::{parse_days, parse_duration, parse_rate_unit, parse_time_of_day};
use crate::value::{Path, Root};
use crate::vocabulary::{ConstraintKeyword, OPTIONAL};

/// Lowers one manifest document: the skill and every error found in it. With errors, the skill
/// holds the parts that were well-formed (a malformed field is absent, a malformed constraint
/// or capability is dropped), for the compiler to check as well; it is `None` when the skill
/// itself could not be read (no object, no name).
pub(crate) fn lower_manifest(
    document: &SpannedJson,
    text: &str,
) -> (Option<PolicyFile>, Vec<ManifestError>) {
    let mut lowerer = Lowerer {
        text,
        errors: Vec::new(),
    };
    let skill = lowerer.skill(document);
    let mut errors = lowerer.errors;
    if skill.is_none() && errors.is_empty() {
        // Never an empty error list: a failed load always says why.
        errors.push(ManifestError::new(
            document.span,
            "the manifest could not be read",
        ));
    }
    let file = skill.map(|skill| PolicyFile {
        skills: vec![skill],
    });
    (file, errors)
}

const TOP_FIELDS: &[&str] = &["skill", "risk", "sensitivity", "capabilities"];
const SKILL_FIELDS: &[&str] = &["name", "version", "contentHash", "signingIdentity"];
const CAPABILITY_FIELDS: &[&str] = &[
    "name",
    "resource",
    "operations",
    "constraints",
    "lifetime",
    "justification",
    "risk",
    "sensitivity",
];
const LIFETIME_FIELDS: &[&str] = &["kind", "value", "renewable"];
const LIFETIME_KINDS: &[&str] = &["call", "transaction", "wallClock", "process"];
const WINDOW_FIELDS: &[&str] = &["days", "start", "end"];
const SENSITIVITIES: &[&str] = &["normal", "elevated"];
const RISK_LABELS: &[&str] = &["none", "low", "medium", "high", "critical"];
const RESOURCE_KINDS: &[&str] = &["http", "db", "oauth", "tool", "service", "secret"];

/// The fields a constraint of type `keyword` accepts (besides `type` and `optional`).
fn constraint_fields(keyword: ConstraintKeyword) -> &'static [&'static str] {
    match keyword {
        ConstraintKeyword::FieldEquals => &["field", "value", "in", "equalsField"],
        ConstraintKeyword::FieldMatches => &["field", "pattern", "caseInsensitive"],
        ConstraintKeyword::FieldRange => &[
            "field",
            "difference",
            "min",
            "max",
            "exclusiveMin",
            "exclusiveMax",
        ],
        ConstraintKeyword::PayloadSchema => &["schema", "schemaFile"],
        ConstraintKeyword::ActorBinding => &["fields", "identity"],
        ConstraintKeyword::RateLimit => &["count", "per", "burst", "by"],
        ConstraintKeyword::WallClockWindow => &["timezone", "windows", "from", "until"],
        ConstraintKeyword::Any | ConstraintKeyword::All => &["constraints"],
        ConstraintKeyword::Not => &["constraint"],
    }
}

/// The `fieldRange` bound fields and the operator each stands for (subject on the left).
const BOUND_FIELDS: &[(&str, CmpOp)] = &[
    ("min", CmpOp::Ge),
    ("max", CmpOp::Le),
    ("exclusiveMin", CmpOp::Gt),
    ("exclusiveMax", CmpOp::Lt),
];

/// An object whose member names have been checked against the known ones.
struct Fields<'a> {
    members: &'a [JsonMember],
    span: Span,
    /// What the object is, for messages (`skill`, `capability`, `fieldEquals constraint`).
    what: &'a str,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a SpannedJson> {
        self.members.iter().find(|m| m.key == key).map(|m| &m.value)
    }

    fn member(&self, key: &str) -> Option<&'a JsonMember> {
        self.members.iter().find(|m| m.key == key)
    }
}

/// Walks a manifest, collecting errors.
struct Lowerer<'t> {
    /// The document text, to point path errors at the offending character.
    text: &'t str,
    errors: Vec<ManifestError>,
}

impl Lowerer<'_> {
    fn push(&mut self, error: ManifestError) {
        self.errors.push(error);
    }

    fn wrong_type(&mut self, node: &SpannedJson, field: &str, expected: &str) {
        self.push(ManifestError::new(
            node.span,
            format!(
                "`{field}` must be {expected}, found {}",
                node.value.type_phrase()
            ),
        ));
    }

    /// Opens `node` as an object named `what`, reporting unknown fields (all but `ignore`d ones).
    fn object<'a>(
        &mut self,
        node: &'a SpannedJson,
        what: &'a str,
        known: &[&str],
        ignore: &[&str],
    ) -> Option<Fields<'a>> {
        let JsonValue::Object(members) = &node.value else {
            self.push(ManifestError::new(
                node.span,
                format!(
                    "{what} must be an object, found {}",
                    node.value.type_phrase()
                ),
            ));
            return None;
        };
        for member in members {
            let key = member.key.as_str();
            if known.contains(&key) || ignore.contains(&key) {
                continue;
            }
            let error = ManifestError::new(
                member.key_span,
                format!("unknown field `{}` in {what}", key.escape_debug()),
            );
            let help = match did_you_mean(key, known) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("known fields: {}", quoted_list(known)),
            };
            self.push(error.with_help(help));
        }
        Some(Fields {
            members,
            span: node.span,
            what,
        })
    }

    fn required<'a>(&mut self, fields: &Fields<'a>, key: &str) -> Option<&'a SpannedJson> {
        let found = fields.get(key);
        if found.is_none() {
            self.push(ManifestError::new(
                fields.span,
                format!("missing required field `{key}` in {}", fields.what),
            ));
        }
        found
    }

    fn string(&mut self, node: &SpannedJson, field: &str) -> Option<Spanned<String>> {
        match &node.value {
            JsonValue::String(s) => Some(Spanned::new(s.clone(), node.span)),
            _ => {
                self.wrong_type(node, field, "a string");
                None
            }
        }
    }

    fn boolean(&mut self, node: &SpannedJson, field: &str) -> Option<bool> {
        match node.value {
            JsonValue::Bool(b) => Some(b),
            _ => {
                self.wrong_type(node, field, "a boolean");
                None
            }
        }
    }

    fn count(&mut self, node: &SpannedJson, field: &str) -> Option<Spanned<u64>> {
        match &node.value {
            JsonValue::Number(n) => match n.as_u64() {
                Some(count) => Some(Spanned::new(count, node.span)),
                None => {
                    self.push(ManifestError::new(
                        node.span,
                        format!("`{field}` must be a whole number of at least 0, found `{n}`"),
                    ));
                    None
                }
            },
            _ => {
                self.wrong_type(node, field, "a whole number");
                None
            }
        }
    }

    fn array<'a>(
        &mut self,
        node: &'a SpannedJson,
        field: &str,
        of: &str,
    ) -> Option<&'a [SpannedJson]> {
        match &node.value {
            JsonValue::Array(items) => Some(items),
            _ => {
                self.wrong_type(node, field, &format!("an array of {of}"));
                None
            }
        }
    }

    fn path(&mut self, node: &SpannedJson, field: &str) -> Option<SpannedPath> {
        let text = match &node.value {
            JsonValue::String(text) => text,
            _ => {
                self.wrong_type(node, field, "a path string such as `payload.user.id`");
                return None;
            }
        };
        match Path::parse(text) {
            Ok(path) => Some(Spanned::new(path, node.span)),
            Err(error) => {
                // Point into the string when it has no escapes (text == raw between the quotes).
                let inner = node.span.start_usize().saturating_add(1);
                let span = if self.text.get(inner..inner + text.len()) == Some(text.as_str())
                    && node.span.len() == text.len() + 2
                {
                    // Cover the whole character at the offset: a one-byte span would split a
                    // multi-byte character (found by fuzzing, `regression_manifest_path_span_*`).
                    let mut offset = error.offset.min(text.len());
                    while !text.is_char_boundary(offset) {
                        offset -= 1;
                    }
                    let width = text
                        .get(offset..)
                        .and_then(|rest| rest.chars().next())
                        .map_or(0, char::len_utf8);
                    let at = inner + offset;
                    Span::new(node.span.file, at, at + width)
                } else {
                    node.span
                };
                // A misspelled root (`payloads.x`) gets a "did you mean" instead of the grammar.
                let root: String = text
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$'))
                    .collect();
                let help = match did_you_mean(&root, &crate::value::Root::ALL.map(|r| r.name())) {
                    Some(best) if error.offset == 0 => format!("did you mean `{best}`?"),
                    _ => "a path is a root (payload, agent, context, resource, request) followed \
                          by `.name`, `[\"key\"]`, `[3]` or `[*]`"
                        .to_owned(),
                };
                self.push(
                    ManifestError::new(
                        span,
                        format!("invalid path `{}`: {}", text.escape_debug(), error.reason),
                    )
                    .with_help(help),
                );
                None
            }
        }
    }

    fn paths(&mut self, node: &SpannedJson, field: &str) -> Option<Vec<SpannedPath>> {
        let items = self.array(node, field, "path strings")?;
        let mut paths = Vec::with_capacity(items.len());
        let mut ok = true;
        for item in items {
            match self.path(item, field) {
                Some(path) => paths.push(path),
                None => ok = false,
            }
        }
        ok.then_some(paths)
    }

    fn duration(
        &mut self,
        node: &SpannedJson,
        field: &str,
    ) -> Option<Spanned<crate::syntax::ast::Duration>> {
        let text = self.string_as(node, field, "a duration string such as `2h`")?;
        match parse_duration(&text) {
            Ok(duration) => Some(Spanned::new(duration, node.span)),
            Err(message) => {
                let help = match crate::syntax::units::suggest_duration(&text) {
                    Some(meant) => format!("did you mean `{meant}`?"),
                    None => "durations are a whole number and a unit, `500ms`, `30s`, `10m`, \
                             `2h`, `1d`, or parts from the largest unit down, `1h30m`"
                        .to_owned(),
                };
                self.push(ManifestError::new(node.span, message).with_help(help));
                None
            }
        }
    }

    /// A string field described as `expected` in the type error.
    fn string_as(&mut self, node: &SpannedJson, field: &str, expected: &str) -> Option<String> {
        match &node.value {
            JsonValue::String(s) => Some(s.clone()),
            _ => {
                self.wrong_type(node, field, expected);
                None
            }
        }
    }

    /// One of `names`, reported with a did-you-mean otherwise.
    fn keyword<'n>(
        &mut self,
        node: &SpannedJson,
        field: &str,
        names: &[&'n str],
    ) -> Option<&'n str> {
        let expected = format!("one of {}", quoted_list(names));
        let text = self.string_as(node, field, &expected)?;
        if let Some(name) = names.iter().find(|n| **n == text) {
            return Some(name);
        }
        let error = ManifestError::new(
            node.span,
            format!("unknown {field} `{}`", text.escape_debug()),
        );
        let help = match did_you_mean(&text, names) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("expected {expected}"),
        };
        self.push(error.with_help(help));
        None
    }

    // ----- skill and capability -----

    fn skill(&mut self, document: &SpannedJson) -> Option<Skill> {
        let top = self.object(document, "the manifest", TOP_FIELDS, &[])?;
        let header = self
            .required(&top, "skill")
            .and_then(|node| self.object(node, "skill", SKILL_FIELDS, &[]));
        let name = header
            .as_ref()
            .and_then(|h| self.required(h, "name"))
            .and_then(|node| self.string(node, "name"));
        let optional_string = |this: &mut Self, key: &str| {
            header
                .as_ref()
                .and_then(|h| h.get(key))
                .and_then(|node| this.string(node, key))
        };
        let version = optional_string(self, "version");
        let hash = optional_string(self, "contentHash");
        let signer = optional_string(self, "signingIdentity");
        let risk = top.get("risk").and_then(|node| self.risk(node));
        let sensitivity = top
            .get("sensitivity")
            .and_then(|node| self.sensitivity(node));
        let mut capabilities = Vec::new();
        if let Some(node) = top.get("capabilities") {
            for item in self
                .array(node, "capabilities", "capability objects")
                .unwrap_or(&[])
            {
                if let Some(capability) = self.capability(item) {
                    capabilities.push(capability);
                }
            }
        }
        Some(Skill {
            name: name?,
            version,
            hash,
            signer,
            risk,
            sensitivity,
            capabilities,
            span: document.span,
        })
    }

    fn risk(&mut self, node: &SpannedJson) -> Option<Spanned<Risk>> {
        let risk = match &node.value {
            // A whole number is a score however it is written (`80`, `80.0`, `8e1`), as a
            // request's `autonomy` is; out-of-range scores are kept for the checker to refuse.
            JsonValue::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(score), _) => Risk::Score(score),
                (None, Some(f)) if f.fract() == 0.0 && f.abs() <= 1e15 => {
                    // Whole and well inside i64: the conversion is exact.
                    Risk::Score(f as i64)
                }
                (None, Some(f)) if f.fract() != 0.0 => {
                    let message = format!("`risk` must be a whole number, found `{n}`");
                    self.push(ManifestError::new(node.span, message));
                    return None;
                }
                _ => {
                    let message = format!("risk score `{n}` must be between 0 and 100");
                    self.push(ManifestError::new(node.span, message));
                    return None;
                }
            },
            JsonValue::String(_) => {
                let label = self.keyword(node, "risk", RISK_LABELS)?;
                Risk::Label(RiskLabel::from_name(label)?)
            }
            _ => {
                self.wrong_type(
                    node,
                    "risk",
                    "a risk label string or a number from 0 to 100",
                );
                return None;
            }
        };
        Some(Spanned::new(risk, node.span))
    }

    fn sensitivity(&mut self, node: &SpannedJson) -> Option<Spanned<Sensitivity>> {
        let sensitivity = match self.keyword(node, "sensitivity", SENSITIVITIES)? {
            "elevated" => Sensitivity::Elevated,
            _ => Sensitivity::Normal,
        };
        Some(Spanned::new(sensitivity, node.span))
    }

    fn capability(&mut self, node: &SpannedJson) -> Option<Capability> {
        let fields = self.object(node, "capability", CAPABILITY_FIELDS, &[])?;
        let name = self
            .required(&fields, "name")
            .and_then(|n| self.string(n, "name"));
        let resource = fields.get("resource").and_then(|n| self.resource(n));
        let mut operations = Vec::new();
        let mut operations_span = None;
        if let Some(list) = fields.get("operations") {
            operations_span = Some(list.span);
            for item in self
                .array(list, "operations", "operation names")
                .unwrap_or(&[])
            {
                match &item.value {
                    JsonValue::String(verb) => {
                        operations.push(Spanned::new(verb.clone(), item.span))
                    }
                    _ => self.wrong_type(item, "operations", "an array of operation names"),
                }
            }
        }
        let lifetime = fields.get("lifetime").and_then(|n| self.lifetime(n));
        let justification = fields
            .get("justification")
            .and_then(|n| self.string(n, "justification"));
        let risk = fields.get("risk").and_then(|n| self.risk(n));
        let sensitivity = fields.get("sensitivity").and_then(|n| self.sensitivity(n));
        let mut constraints = Vec::new();
        if let Some(list) = fields.get("constraints") {
            for item in self
                .array(list, "constraints", "constraint objects")
                .unwrap_or(&[])
            {
                if let Some(constraint) = self.constraint(item, false) {
                    constraints.push(constraint);
                }
            }
        }
        Some(Capability {
            name: name?,
            resource,
            operations,
            operations_span,
            lifetime,
            justification,
            risk,
            sensitivity,
            constraints,
            span: node.span,
        })
    }

    fn resource(&mut self, node: &SpannedJson) -> Option<Spanned<ResourceDecl>> {
        let text = self.string_as(
            node,
            "resource",
            "a URL or a `KIND:LOCATOR` string such as `db:crm/{org}/records`",
        )?;
        if text.starts_with("https://") || text.starts_with("http://") {
            let decl = ResourceDecl {
                kind: ResourceKind::Http,
                locator: text,
            };
            return Some(Spanned::new(decl, node.span));
        }
        let Some((kind_name, locator)) = text.split_once(':') else {
            self.push(
                ManifestError::new(
                    node.span,
                    format!("resource `{}` has no kind", text.escape_debug()),
                )
                .with_help(
                    "write an http(s) URL, or `KIND:LOCATOR` with KIND one of db, oauth, tool, \
                     service, secret",
                ),
            );
            return None;
        };
        let kind = match ResourceKind::from_name(kind_name) {
            Some(ResourceKind::Http) => {
                self.push(
                    ManifestError::new(
                        node.span,
                        format!("http resource `{}` is not a URL", text.escape_debug()),
                    )
                    .with_help("write the whole URL, starting with `https://` or `http://`"),
                );
                return None;
            }
            Some(kind) => kind,
            None => {
                let error = ManifestError::new(
                    node.span,
                    format!("unknown resource kind `{}`", kind_name.escape_debug()),
                );
                let help = match did_you_mean(kind_name, RESOURCE_KINDS) {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => format!("expected one of {}", quoted_list(RESOURCE_KINDS)),
                };
                self.push(error.with_help(help));
                return None;
            }
        };
        let decl = ResourceDecl {
            kind,
            locator: locator.to_owned(),
        };
        Some(Spanned::new(decl, node.span))
    }

    fn lifetime(&mut self, node: &SpannedJson) -> Option<Spanned<Lifetime>> {
        let fields = self.object(node, "lifetime", LIFETIME_FIELDS, &[])?;
        let kind = self
            .required(&fields, "kind")
            .and_then(|n| self.keyword(n, "lifetime kind", LIFETIME_KINDS));
        let value = fields.get("value");
        let renewable = match fields.get("renewable") {
            Some(n) => Some((self.boolean(n, "renewable")?, n)),
            None => None,
        };
        let lifetime = match kind? {
            "call" => Lifetime::Call(match value {
                Some(n) => self.count(n, "value")?.node,
                None => 1,
            }),
            "wallClock" => match value {
                Some(n) => Lifetime::WallClock {
                    duration: self.duration(n, "value")?.node,
                    renewable: renewable.is_some_and(|(r, _)| r),
                },
                None => {
                    self.push(
                        ManifestError::new(
                            fields.span,
                            "missing required field `value` in wallClock lifetime",
                        )
                        .with_help("give the grant's duration, e.g. `\"value\": \"1h\"`"),
                    );
                    return None;
                }
            },
            other => {
                if let Some(n) = value {
                    self.push(ManifestError::new(
                        n.span,
                        format!("a `{other}` lifetime takes no `value`"),
                    ));
                    return None;
                }
                if other == "process" {
                    Lifetime::Process
                } else {
                    Lifetime::Transaction
                }
            }
        };
        if let (Some((true, n)), false) =
            (renewable, matches!(lifetime, Lifetime::WallClock { .. }))
        {
            self.push(ManifestError::new(
                n.span,
                "`renewable` applies only to wallClock lifetimes",
            ));
            return None;
        }
        Some(Spanned::new(lifetime, node.span))
    }

    // ----- constraints -----

    /// The `constraint` of a `not`: one constraint object (an array is named as such, with the
    /// way to negate several).
    fn not_operand(&mut self, node: &SpannedJson) -> Option<Constraint> {
        match &node.value {
            JsonValue::Object(_) => self.constraint(node, true),
            JsonValue::Array(_) => {
                self.push(
                    ManifestError::new(
                        node.span,
                        "`constraint` must be one constraint object, found an array",
                    )
                    .with_help(
                        "`not` takes exactly one constraint; wrap several in `{\"type\": \"any\"}` \
                         or `{\"type\": \"all\"}`",
                    ),
                );
                None
            }
            _ => {
                self.wrong_type(node, "constraint", "a constraint object");
                None
            }
        }
    }

    fn constraint(&mut self, node: &SpannedJson, nested: bool) -> Option<Constraint> {
        let JsonValue::Object(_) = &node.value else {
            self.wrong_type(node, "constraints", "constraint objects");
            return None;
        };
        let Some(type_node) = node.member("type").map(|m| &m.value) else {
            self.push(
                ManifestError::new(node.span, "missing required field `type` in constraint")
                    .with_help(format!("one of {}", quoted_list(&type_names()))),
            );
            return None;
        };
        let type_name = self.keyword(type_node, "constraint type", &type_names())?;
        // `type_names` lists exactly the table's names.
        let keyword = ConstraintKeyword::from_name(type_name)?;
        let may_be_optional = keyword.may_be_optional();
        let mut with_meta: Vec<&str> = vec!["type"];
        if may_be_optional {
            with_meta.push(OPTIONAL);
        }
        with_meta.extend_from_slice(constraint_fields(keyword));
        let what = format!("{type_name} constraint");
        let fields = self.object(node, &what, &with_meta, &[OPTIONAL])?;
        let mut optional = false;
        if let Some(member) = fields.member(OPTIONAL) {
            if may_be_optional {
                optional = self.boolean(&member.value, OPTIONAL).unwrap_or(false);
            } else {
                let field_constraints: Vec<&str> = ConstraintKeyword::ALL
                    .into_iter()
                    .filter(|k| k.may_be_optional())
                    .map(ConstraintKeyword::name)
                    .collect();
                self.push(
                    ManifestError::new(
                        member.key_span,
                        format!("`optional` does not apply to `{type_name}`"),
                    )
                    .with_help(format!(
                        "only field constraints ({}) may be optional",
                        field_constraints.join(", ")
                    )),
                );
            }
        }
        let kind = match keyword {
            ConstraintKeyword::FieldEquals => self.field_equals(&fields),
            ConstraintKeyword::FieldMatches => self.field_matches(&fields),
            ConstraintKeyword::FieldRange => self.field_range(&fields),
            ConstraintKeyword::PayloadSchema => self.payload_schema(&fields),
            ConstraintKeyword::ActorBinding => self.actor_binding(&fields),
            ConstraintKeyword::RateLimit => {
                if nested {
                    self.push(
                        ManifestError::new(
                            node.span,
                            "`rateLimit` is only allowed at the top level of a capability",
                        )
                        .with_help("move it out of the `any`/`all`/`not` combinator"),
                    );
                }
                self.rate_limit(&fields)
            }
            ConstraintKeyword::WallClockWindow => self.wall_clock_window(&fields),
            ConstraintKeyword::Any | ConstraintKeyword::All => {
                let list = self.required(&fields, "constraints");
                let items = list.and_then(|n| self.array(n, "constraints", "constraint objects"));
                let mut children = Vec::new();
                let mut ok = items.is_some();
                for item in items.unwrap_or(&[]) {
                    match self.constraint(item, true) {
                        Some(child) => children.push(child),
                        None => ok = false,
                    }
                }
                ok.then(|| {
                    if keyword == ConstraintKeyword::Any {
                        ConstraintKind::Any(children)
                    } else {
                        ConstraintKind::All(children)
                    }
                })
            }
            ConstraintKeyword::Not => {
                let child = self
                    .required(&fields, "constraint")
                    .and_then(|n| self.not_operand(n));
                child.map(|c| ConstraintKind::Not(Box::new(c)))
            }
        };
        Some(Constraint {
            kind: kind?,
            optional,
            span: node.span,
        })
    }

    fn field_equals(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let path = self
            .required(fields, "field")
            .and_then(|n| self.path(n, "field"));
        let given: Vec<&JsonMember> = ["value", "in", "equalsField"]
            .iter()
            .filter_map(|key| fields.member(key))
            .collect();
        let rhs = match given.as_slice() {
            [member] => match member.key.as_str() {
                "value" => Some(EqualsRhs::Value(Spanned::new(
                    member.value.to_value(),
                    member.value.span,
                ))),
                "in" => self.array(&member.value, "in", "values").map(|items| {
                    EqualsRhs::In(
                        items
                            .iter()
                            .map(|item| Spanned::new(item.to_value(), item.span))
                            .collect(),
                    )
                }),
                _ => self.path(&member.value, "equalsField").map(EqualsRhs::Path),
            },
            [] => {
                self.push(
                    ManifestError::new(
                        fields.span,
                        "`fieldEquals` needs one of `value`, `in` or `equalsField`",
                    )
                    .with_help("e.g. `\"value\": \"primary\"` or `\"in\": [\"a\", \"b\"]`"),
                );
                None
            }
            [_, second, ..] => {
                self.push(
                    ManifestError::new(
                        second.key_span,
                        "`fieldEquals` takes exactly one of `value`, `in` and `equalsField`",
                    )
                    .with_help("keep one of them; use `any` to combine alternatives"),
                );
                None
            }
        };
        Some(ConstraintKind::FieldEquals {
            path: path?,
            rhs: rhs?,
        })
    }

    fn field_matches(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let path = self
            .required(fields, "field")
            .and_then(|n| self.path(n, "field"));
        let pattern = self
            .required(fields, "pattern")
            .and_then(|n| self.string(n, "pattern"));
        let case_insensitive = match fields.get("caseInsensitive") {
            Some(n) => self.boolean(n, "caseInsensitive")?,
            None => false,
        };
        Some(ConstraintKind::FieldMatches {
            path: path?,
            pattern: pattern?,
            case_insensitive,
        })
    }

    fn field_range(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let subject = match (fields.member("field"), fields.member("difference")) {
            (Some(field), None) => self.path(&field.value, "field").map(RangeSubject::Field),
            (None, Some(difference)) => self.difference(&difference.value),
            (Some(_), Some(difference)) => {
                self.push(ManifestError::new(
                    difference.key_span,
                    "`fieldRange` takes either `field` or `difference`, not both",
                ));
                None
            }
            (None, None) => {
                self.push(
                    ManifestError::new(fields.span, "`fieldRange` needs `field` or `difference`")
                        .with_help("e.g. `\"field\": \"payload.amount\"`"),
                );
                None
            }
        };
        let is_difference = fields.member("difference").is_some();
        let mut bounds = Vec::new();
        let mut ok = true;
        for member in fields.members {
            let Some((_, op)) = BOUND_FIELDS.iter().find(|(key, _)| *key == member.key) else {
                continue;
            };
            match self.bound_value(&member.value, &member.key, is_difference) {
                Some(value) => bounds.push(Bound {
                    op: *op,
                    value,
                    span: member.key_span.to(member.value.span),
                }),
                None => ok = false,
            }
        }
        if bounds.is_empty() && ok {
            self.push(
                ManifestError::new(fields.span, "`fieldRange` needs at least one bound")
                    .with_help("add `min`, `max`, `exclusiveMin` or `exclusiveMax`"),
            );
            return None;
        }
        let subject = subject?;
        ok.then_some(ConstraintKind::FieldRange { subject, bounds })
    }

    fn difference(&mut self, node: &SpannedJson) -> Option<RangeSubject> {
        let items = self.array(node, "difference", "two path strings")?;
        let [a, b] = items else {
            self.push(
                ManifestError::new(
                    node.span,
                    format!(
                        "`difference` must hold exactly two paths, found {}",
                        items.len()
                    ),
                )
                .with_help("`[\"payload.end\", \"payload.start\"]` bounds end − start"),
            );
            return None;
        };
        let a = self.path(a, "difference");
        let b = self.path(b, "difference");
        Some(RangeSubject::Difference(a?, b?))
    }

    fn bound_value(
        &mut self,
        node: &SpannedJson,
        key: &str,
        is_difference: bool,
    ) -> Option<BoundValue> {
        match (&node.value, is_difference) {
            (JsonValue::String(s), false) if s == "now" => Some(BoundValue::Now),
            (JsonValue::Number(n), false) => Some(BoundValue::Number(n.clone())),
            (_, false) => {
                self.wrong_type(node, key, "a number or `\"now\"`");
                None
            }
            (JsonValue::String(_), true) => self
                .duration(node, key)
                .map(|d| BoundValue::Duration(d.node)),
            (_, true) => {
                self.wrong_type(
                    node,
                    key,
                    "a duration string such as `2h` for a `difference`",
                );
                None
            }
        }
    }

    fn payload_schema(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let source = match (fields.member("schema"), fields.member("schemaFile")) {
            (Some(schema), None) => match &schema.value.value {
                JsonValue::Object(_) | JsonValue::Bool(_) => Some(SchemaSource::Inline(
                    Spanned::new(schema.value.to_value(), schema.value.span),
                )),
                _ => {
                    self.wrong_type(&schema.value, "schema", "an object or a boolean");
                    None
                }
            },
            (None, Some(file)) => self
                .string(&file.value, "schemaFile")
                .map(SchemaSource::File),
            (Some(_), Some(file)) => {
                self.push(ManifestError::new(
                    file.key_span,
                    "`payloadSchema` takes either `schema` or `schemaFile`, not both",
                ));
                None
            }
            (None, None) => {
                self.push(ManifestError::new(
                    fields.span,
                    "`payloadSchema` needs `schema` or `schemaFile`",
                ));
                None
            }
        };
        source.map(ConstraintKind::PayloadSchema)
    }

    fn actor_binding(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let paths = self
            .required(fields, "fields")
            .and_then(|n| self.paths(n, "fields").map(|p| (p, n.span)));
        if let Some((list, span)) = &paths
            && list.is_empty()
        {
            self.push(ManifestError::new(
                *span,
                "`fields` must list at least one path",
            ));
        }
        let identity = match fields.get("identity") {
            Some(n) => self.path(n, "identity").and_then(|identity| {
                let rooted = identity.node.root == Root::Agent
                    && !identity.node.segments.is_empty()
                    && !identity.node.has_wildcard();
                if rooted {
                    Some(identity)
                } else {
                    self.push(
                        ManifestError::new(
                            n.span,
                            format!("identity `{}` is not an agent field", identity.node),
                        )
                        .with_help(
                            "the identity is a field of the calling agent, e.g. `agent.email`",
                        ),
                    );
                    None
                }
            }),
            None => Some(Spanned::new(
                Path {
                    root: Root::Agent,
                    segments: vec![crate::value::Segment::Key("id".to_owned())],
                },
                fields.span,
            )),
        };
        let (paths, _) = paths?;
        if paths.is_empty() {
            return None;
        }
        Some(ConstraintKind::ActorBinding {
            paths,
            identity: identity?,
        })
    }

    fn rate_limit(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let count = self
            .required(fields, "count")
            .and_then(|n| self.count(n, "count"));
        let per = self.required(fields, "per").and_then(|n| {
            let text = self.string_as(n, "per", "a duration string such as `1m` or a unit name")?;
            if let Some(duration) = parse_rate_unit(&text) {
                return Some(Spanned::new(duration, n.span));
            }
            if text.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
                return self.duration(n, "per");
            }
            let error =
                ManifestError::new(n.span, format!("invalid `per` `{}`", text.escape_debug()));
            let units = ["second", "minute", "hour", "day"];
            let help = match did_you_mean(&text, &units) {
                Some(near) => format!("did you mean `{near}`?"),
                None => "write a duration such as `10s` or `1m`, or one of `second`, `minute`, \
                         `hour`, `day`"
                    .to_owned(),
            };
            self.push(error.with_help(help));
            None
        });
        let burst = match fields.get("burst") {
            Some(n) => Some(self.count(n, "burst")?),
            None => None,
        };
        let by = match fields.get("by") {
            Some(n) => self.paths(n, "by")?,
            None => Vec::new(),
        };
        Some(ConstraintKind::RateLimit(RateLimit {
            count: count?,
            per: per?,
            burst,
            by,
        }))
    }

    fn wall_clock_window(&mut self, fields: &Fields<'_>) -> Option<ConstraintKind> {
        let windows = fields.member("windows");
        let from = fields.member("from");
        let until = fields.member("until");
        if let Some(windows) = windows {
            if let Some(extra) = from.or(until) {
                self.push(ManifestError::new(
                    extra.key_span,
                    "`wallClockWindow` takes either `windows` or `from`/`until`, not both",
                ));
                return None;
            }
            let zone = match fields.get("timezone") {
                Some(n) => self.string(n, "timezone")?,
                None => Spanned::new("UTC".to_owned(), fields.span),
            };
            let items = self.array(&windows.value, "windows", "window objects")?;
            if items.is_empty() {
                self.push(ManifestError::new(
                    windows.value.span,
                    "`windows` must list at least one window",
                ));
                return None;
            }
            let mut list = Vec::with_capacity(items.len());
            let mut ok = true;
            for item in items {
                match self.day_window(item) {
                    Some(window) => list.push(window),
                    None => ok = false,
                }
            }
            return ok.then_some(ConstraintKind::WallClockWindow(WindowSpec::Weekly {
                windows: list,
                zone,
            }));
        }
        if let Some(zone) = fields.member("timezone")
            && (from.is_some() || until.is_some())
        {
            self.push(
                ManifestError::new(zone.key_span, "`timezone` applies only to `windows`")
                    .with_help("`from`/`until` timestamps carry their own UTC offset"),
            );
            return None;
        }
        match (from, until) {
            (Some(from), Some(until)) => {
                let from = self.timestamp(&from.value, "from");
                let until = self.timestamp(&until.value, "until");
                Some(ConstraintKind::WallClockWindow(WindowSpec::Absolute {
                    from: from?,
                    until: until?,
                }))
            }
            (Some(_), None) => {
                self.push(ManifestError::new(
                    fields.span,
                    "missing required field `until` in wallClockWindow constraint",
                ));
                None
            }
            (None, Some(_)) => {
                self.push(ManifestError::new(
                    fields.span,
                    "missing required field `from` in wallClockWindow constraint",
                ));
                None
            }
            (None, None) => {
                self.push(
                    ManifestError::new(
                        fields.span,
                        "`wallClockWindow` needs `windows` or `from` and `until`",
                    )
                    .with_help(
                        "e.g. `\"windows\": [{\"days\": \"mon-fri\", \"start\": \"09:00\", \
                         \"end\": \"17:00\"}]`",
                    ),
                );
                None
            }
        }
    }

    fn day_window(&mut self, node: &SpannedJson) -> Option<DayWindow> {
        let fields = self.object(node, "window", WINDOW_FIELDS, &[])?;
        let days = self.required(&fields, "days").and_then(|n| self.days(n));
        let start = self
            .required(&fields, "start")
            .and_then(|n| self.time_of_day(n, "start"));
        let end = self
            .required(&fields, "end")
            .and_then(|n| self.time_of_day(n, "end"));
        Some(DayWindow {
            days: days?,
            start: start?,
            end: end?,
            span: node.span,
        })
    }

    fn days(&mut self, node: &SpannedJson) -> Option<DaySet> {
        let mut parts: Vec<(String, Span)> = Vec::new();
        match &node.value {
            JsonValue::String(text) => {
                parts.extend(text.split(',').map(|p| (p.to_owned(), node.span)));
            }
            JsonValue::Array(items) => {
                for item in items {
                    let text = self.string_as(item, "days", "a day name such as `mon`")?;
                    parts.push((text, item.span));
                }
                if items.is_empty() {
                    self.push(ManifestError::new(
                        node.span,
                        "`days` must list at least one day",
                    ));
                    return None;
                }
            }
            _ => {
                self.wrong_type(
                    node,
                    "days",
                    "a day range string such as `mon-fri` or an array of day names",
                );
                return None;
            }
        }
        let mut set = DaySet::default();
        let mut ok = true;
        for (text, span) in parts {
            match parse_days(text.trim()) {
                Ok(days) => set.0 |= days.0,
                Err(message) => {
                    self.push(ManifestError::new(span, message));
                    ok = false;
                }
            }
        }
        ok.then_some(set)
    }

    fn time_of_day(
        &mut self,
        node: &SpannedJson,
        field: &str,
    ) -> Option<crate::syntax::ast::TimeOfDay> {
        let text = self.string_as(node, field, "a time of day string such as `09:00`")?;
        match parse_time_of_day(&text) {
            Ok(time) => Some(time),
            Err(message) => {
                self.push(ManifestError::new(node.span, message));
                None
            }
        }
    }

    fn timestamp(
        &mut self,
        node: &SpannedJson,
        field: &str,
    ) -> Option<Spanned<DateTime<FixedOffset>>> {
        let text = self.string_as(node, field, "an RFC 3339 timestamp string")?;
        match DateTime::parse_from_rfc3339(&text) {
            Ok(instant) => Some(Spanned::new(instant, node.span)),
            Err(_) => {
                self.push(
                    ManifestError::new(
                        node.span,
                        format!("invalid RFC 3339 timestamp `{}`", text.escape_debug()),
                    )
                    .with_help("e.g. `2026-12-01T09:00:00Z` or `2026-12-01T09:00:00-05:00`"),
                );
                None
            }
        }
    }
}

fn type_names() -> Vec<&'static str> {
    ConstraintKeyword::ALL.map(ConstraintKeyword::name).to_vec()
}

fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
