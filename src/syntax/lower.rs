//! pest parse tree → AST.
//!
//! [`lower_file`] walks the pairs the grammar produced and builds the [`PolicyFile`]. Everything
//! the grammar leaves loose is checked here — names (path roots, resource kinds, risk labels, day
//! names, rate units), string escapes, numbers, durations, times, timestamps, duplicate fields
//! and keys, regex flags, bound shapes and combinator nesting — and every problem is collected
//! rather than stopping at the first. Semantic rules that need the whole policy (required fields,
//! verbs per kind, risk range, where `optional` and `rateLimit` may appear) belong to the checker.

use chrono::DateTime;
use pest::iterators::{Pair, Pairs};
use serde_json::{Map, Number, Value};

use super::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, DayWindow, Duration,
    EqualsRhs, Lifetime, PolicyFile, RangeSubject, RateLimit, ResourceDecl, ResourceKind, Risk,
    RiskLabel, SchemaSource, Sensitivity, Skill, Spanned, SpannedPath, WindowSpec,
};
use super::error::{SyntaxError, suggestion};
use super::parser::Rule;
use super::units;
use crate::span::{FileId, Span};
use crate::value::{Path, Root, Segment};
use crate::vocabulary::ConstraintKeyword;

/// The deepest nesting of `any`/`all`/`not` blocks inside one another.
pub(crate) use crate::limits::MAX_CONSTRAINT_NESTING as MAX_COMBINATOR_DEPTH;

/// The default zone of weekly windows.
const DEFAULT_ZONE: &str = "UTC";

/// Builds the AST from the pairs of a successful parse of [`Rule::file`], with every error
/// found. With errors, the AST holds the parts that were well-formed (a malformed field is
/// absent, a malformed constraint dropped), for the compiler to check as well.
pub(crate) fn lower_file(file: FileId, pairs: Pairs<'_, Rule>) -> (PolicyFile, Vec<SyntaxError>) {
    let mut lowerer = Lowerer {
        file,
        errors: Vec::new(),
    };
    let mut skills = Vec::new();
    for pair in pairs.filter(|p| p.as_rule() == Rule::file) {
        for item in pair.into_inner() {
            if item.as_rule() == Rule::skill {
                skills.push(lowerer.skill(item));
            }
        }
    }
    if skills.is_empty() {
        lowerer.errors.push(
            SyntaxError::new(Span::new(file, 0, 0), "no skill in file")
                .with_help("a policy file holds one or more `skill \"name\" { ... }` blocks"),
        );
    }
    (PolicyFile { skills }, lowerer.errors)
}

/// The lowering pass's state: the file being lowered and the errors found so far.
struct Lowerer {
    file: FileId,
    errors: Vec<SyntaxError>,
}

/// The end of the last token inside `pair`.
///
/// pest lets a rule's span run over whitespace and comments skipped before an optional element
/// that then did not match (`rateLimit 10 per minute   // note`); every token in this grammar is
/// a pair, so the last leaf's end is where the construct really ends.
fn content_end(pair: &Pair<'_, Rule>) -> usize {
    let mut end = pair.as_span().end();
    let mut current = pair.clone();
    // `next_back`, not `last`: `last` walks every child (for a skill's last child, all its
    // capabilities' tokens: ~3 % of compiling 1,000 capabilities).
    while let Some(last) = current.clone().into_inner().next_back() {
        end = last.as_span().end();
        current = last;
    }
    end
}

/// The first inner pair with one of `rules`.
fn child<'i>(pair: &Pair<'i, Rule>, rule: Rule) -> Option<Pair<'i, Rule>> {
    pair.clone()
        .into_inner()
        .find(|inner| inner.as_rule() == rule)
}

/// Inner pairs that carry meaning (punctuation and keywords dropped).
fn meaningful<'i>(pair: Pair<'i, Rule>) -> impl Iterator<Item = Pair<'i, Rule>> {
    pair.into_inner().filter(|inner| !is_token(inner.as_rule()))
}

/// Punctuation and keywords: present in the tree for error messages and spans only.
fn is_token(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::lbrace
            | Rule::rbrace
            | Rule::lbracket
            | Rule::rbracket
            | Rule::comma
            | Rule::colon
            | Rule::eq_op
            | Rule::tilde
            | Rule::minus
            | Rule::kw_skill
            | Rule::kw_capability
            | Rule::kw_version
            | Rule::kw_hash
            | Rule::kw_signer
            | Rule::kw_risk
            | Rule::kw_sensitivity
            | Rule::kw_resource
            | Rule::kw_operations
            | Rule::kw_lifetime
            | Rule::kw_justification
            | Rule::kw_call
            | Rule::kw_transaction
            | Rule::kw_wall_clock
            | Rule::kw_process
            | Rule::kw_field_equals
            | Rule::kw_in
            | Rule::kw_field_matches
            | Rule::kw_field_range
            | Rule::kw_payload_schema
            | Rule::kw_file
            | Rule::kw_actor_binding
            | Rule::kw_rate_limit
            | Rule::kw_per
            | Rule::kw_burst
            | Rule::kw_by
            | Rule::kw_wall_clock_window
            | Rule::kw_from
            | Rule::kw_until
            | Rule::kw_any
            | Rule::kw_all
            | Rule::kw_not
    )
}

impl Lowerer {
    fn span(&self, pair: &Pair<'_, Rule>) -> Span {
        Span::new(self.file, pair.as_span().start(), content_end(pair))
    }

    fn error(&mut self, span: Span, message: String, help: Option<String>) {
        self.errors.push(SyntaxError {
            span,
            message,
            help,
        });
    }

    /// Stores `value` in `slot`, or reports a duplicate of the field `name` inside `owner`.
    fn set_once<T>(&mut self, slot: &mut Option<T>, value: T, name: &str, owner: &str, span: Span) {
        if slot.is_some() {
            self.error(
                span,
                format!("duplicate `{name}` in {owner}"),
                Some(format!("a {owner} declares `{name}` at most once")),
            );
        } else {
            *slot = Some(value);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Skills and capabilities
    // -----------------------------------------------------------------------------------------

    fn skill(&mut self, pair: Pair<'_, Rule>) -> Skill {
        let span = self.span(&pair);
        let mut name = None;
        let mut version = None;
        let mut hash = None;
        let mut signer = None;
        let mut risk = None;
        let mut sensitivity = None;
        let mut capabilities = Vec::new();
        for item in meaningful(pair) {
            match item.as_rule() {
                Rule::string => name = self.string(&item),
                Rule::capability => capabilities.push(self.capability(item)),
                Rule::skill_field => {
                    let Some(field) = item.into_inner().next() else {
                        continue;
                    };
                    let field_span = self.span(&field);
                    match field.as_rule() {
                        Rule::version_field => {
                            if let Some(value) = self.string_field(&field) {
                                self.set_once(&mut version, value, "version", "skill", field_span);
                            }
                        }
                        Rule::hash_field => {
                            if let Some(value) = self.string_field(&field) {
                                self.set_once(&mut hash, value, "hash", "skill", field_span);
                            }
                        }
                        Rule::signer_field => {
                            if let Some(value) = self.string_field(&field) {
                                self.set_once(&mut signer, value, "signer", "skill", field_span);
                            }
                        }
                        Rule::risk_field => {
                            if let Some(value) = self.risk(&field) {
                                self.set_once(&mut risk, value, "risk", "skill", field_span);
                            }
                        }
                        Rule::sensitivity_field => {
                            if let Some(value) = self.sensitivity(&field) {
                                self.set_once(
                                    &mut sensitivity,
                                    value,
                                    "sensitivity",
                                    "skill",
                                    field_span,
                                );
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Skill {
            name: name.unwrap_or_else(|| Spanned::new(String::new(), span)),
            version,
            hash,
            signer,
            risk,
            sensitivity,
            capabilities,
            span,
        }
    }

    fn capability(&mut self, pair: Pair<'_, Rule>) -> Capability {
        let span = self.span(&pair);
        let mut name = None;
        let mut resource = None;
        let mut operations = Vec::new();
        let mut operations_span = None;
        let mut lifetime = None;
        let mut justification = None;
        let mut risk = None;
        let mut sensitivity = None;
        let mut constraints = Vec::new();
        for item in meaningful(pair) {
            match item.as_rule() {
                Rule::string => name = self.string(&item),
                Rule::constraint => constraints.extend(self.constraint(item, 0)),
                Rule::capability_field => {
                    let Some(field) = item.into_inner().next() else {
                        continue;
                    };
                    let field_span = self.span(&field);
                    match field.as_rule() {
                        Rule::resource_field => {
                            if let Some(value) = self.resource(&field) {
                                let value = Spanned::new(value, field_span);
                                self.set_once(
                                    &mut resource,
                                    value,
                                    "resource",
                                    "capability",
                                    field_span,
                                );
                            }
                        }
                        Rule::operations_field => {
                            if operations_span.is_some() {
                                self.set_once(
                                    &mut operations_span,
                                    field_span,
                                    "operations",
                                    "capability",
                                    field_span,
                                );
                            } else {
                                operations_span = Some(field_span);
                                operations = self.operations(field);
                            }
                        }
                        Rule::lifetime_field => {
                            if let Some(value) = self.lifetime(&field) {
                                let value = Spanned::new(value, field_span);
                                self.set_once(
                                    &mut lifetime,
                                    value,
                                    "lifetime",
                                    "capability",
                                    field_span,
                                );
                            }
                        }
                        Rule::justification_field => {
                            if let Some(value) = self.string_field(&field) {
                                self.set_once(
                                    &mut justification,
                                    value,
                                    "justification",
                                    "capability",
                                    field_span,
                                );
                            }
                        }
                        Rule::risk_field => {
                            if let Some(value) = self.risk(&field) {
                                self.set_once(&mut risk, value, "risk", "capability", field_span);
                            }
                        }
                        Rule::sensitivity_field => {
                            if let Some(value) = self.sensitivity(&field) {
                                self.set_once(
                                    &mut sensitivity,
                                    value,
                                    "sensitivity",
                                    "capability",
                                    field_span,
                                );
                            }
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        Capability {
            name: name.unwrap_or_else(|| Spanned::new(String::new(), span)),
            resource,
            operations,
            operations_span,
            lifetime,
            justification,
            risk,
            sensitivity,
            constraints,
            span,
        }
    }

    /// The decoded string of a `KEYWORD "..."` field.
    fn string_field(&mut self, field: &Pair<'_, Rule>) -> Option<Spanned<String>> {
        let string = child(field, Rule::string)?;
        self.string(&string)
    }

    fn risk(&mut self, field: &Pair<'_, Rule>) -> Option<Spanned<Risk>> {
        let value = child(field, Rule::risk_value)?.into_inner().next()?;
        let span = self.span(&value);
        let text = value.as_str();
        match value.as_rule() {
            Rule::integer => match text.parse::<i64>() {
                Ok(score) => Some(Spanned::new(Risk::Score(score), span)),
                Err(_) => {
                    self.error(
                        span,
                        format!("risk `{text}` is out of range"),
                        Some("a risk score is a whole number from 0 to 100".to_owned()),
                    );
                    None
                }
            },
            _ => match RiskLabel::from_name(text) {
                Some(label) => Some(Spanned::new(Risk::Label(label), span)),
                None => {
                    let names = RiskLabel::ALL.map(|(_, name)| name);
                    self.error(
                        span,
                        format!(
                            "unknown risk level `{text}`: expected none, low, medium, high, critical or a number from 0 to 100"
                        ),
                        suggestion(text, names),
                    );
                    None
                }
            },
        }
    }

    fn sensitivity(&mut self, field: &Pair<'_, Rule>) -> Option<Spanned<Sensitivity>> {
        let word = child(field, Rule::word)?;
        let span = self.span(&word);
        match word.as_str() {
            "normal" => Some(Spanned::new(Sensitivity::Normal, span)),
            "elevated" => Some(Spanned::new(Sensitivity::Elevated, span)),
            other => {
                self.error(
                    span,
                    format!("unknown sensitivity `{other}`: expected normal or elevated"),
                    suggestion(other, ["normal", "elevated"]),
                );
                None
            }
        }
    }

    fn resource(&mut self, field: &Pair<'_, Rule>) -> Option<ResourceDecl> {
        let kind_word = child(field, Rule::word)?;
        let locator = child(field, Rule::string).and_then(|s| self.string(&s));
        let kind_text = kind_word.as_str();
        let Some(kind) = ResourceKind::from_name(kind_text) else {
            let names = ResourceKind::ALL.map(|(_, name)| name);
            self.error(
                self.span(&kind_word),
                format!(
                    "unknown resource kind `{kind_text}`: expected http, db, oauth, tool, service or secret"
                ),
                suggestion(kind_text, names),
            );
            return None;
        };
        let locator = locator?.node;
        // For non-http kinds the request resource is `KIND:LOCATOR`; a locator written with its
        // own `KIND:` prefix means the same thing.
        let locator = if kind == ResourceKind::Http {
            locator
        } else {
            let prefix = format!("{}:", kind.name());
            match locator.strip_prefix(&prefix) {
                Some(rest) => rest.to_owned(),
                None => locator,
            }
        };
        Some(ResourceDecl { kind, locator })
    }

    fn operations(&mut self, field: Pair<'_, Rule>) -> Vec<Spanned<String>> {
        let mut verbs = Vec::new();
        for verb in meaningful(field) {
            let Some(inner) = verb.into_inner().next() else {
                continue;
            };
            match inner.as_rule() {
                Rule::string => verbs.extend(self.string(&inner)),
                _ => verbs.push(Spanned::new(inner.as_str().to_owned(), self.span(&inner))),
            }
        }
        verbs
    }

    fn lifetime(&mut self, field: &Pair<'_, Rule>) -> Option<Lifetime> {
        let lifetime = child(field, Rule::lifetime)?.into_inner().next()?;
        match lifetime.as_rule() {
            Rule::lifetime_call => match child(&lifetime, Rule::uint) {
                Some(count) => self.uint(&count).map(Lifetime::Call),
                None => Some(Lifetime::Call(1)),
            },
            Rule::lifetime_transaction => Some(Lifetime::Transaction),
            Rule::lifetime_wall_clock => {
                let duration = self.duration(&child(&lifetime, Rule::duration)?)?;
                Some(Lifetime::WallClock {
                    duration: duration.node,
                    renewable: child(&lifetime, Rule::kw_renewable).is_some(),
                })
            }
            _ => Some(Lifetime::Process),
        }
    }

    // -----------------------------------------------------------------------------------------
    // Constraints
    // -----------------------------------------------------------------------------------------

    /// Lowers a `constraint` pair; `depth` is the number of combinators around it.
    fn constraint(&mut self, pair: Pair<'_, Rule>, depth: usize) -> Option<Constraint> {
        let span = self.span(&pair);
        let optional = child(&pair, Rule::kw_optional).is_some();
        let body = child(&pair, Rule::constraint_body)?.into_inner().next()?;
        let kind = match body.as_rule() {
            Rule::field_equals => self.field_equals(&body),
            Rule::field_matches => self.field_matches(&body),
            Rule::field_range => self.field_range(&body),
            Rule::payload_schema => self.payload_schema(&body),
            Rule::actor_binding => self.actor_binding(&body),
            Rule::rate_limit => self.rate_limit(&body),
            Rule::wall_clock_window => self.wall_clock_window(&body, span),
            Rule::any_block | Rule::all_block | Rule::not_block => {
                self.combinator(body, depth, span)
            }
            _ => None,
        }?;
        Some(Constraint {
            kind,
            optional,
            span,
        })
    }

    fn combinator(
        &mut self,
        body: Pair<'_, Rule>,
        depth: usize,
        span: Span,
    ) -> Option<ConstraintKind> {
        let keyword = match body.as_rule() {
            Rule::any_block => ConstraintKeyword::Any,
            Rule::all_block => ConstraintKeyword::All,
            _ => ConstraintKeyword::Not,
        };
        let depth = depth + 1;
        if depth > MAX_COMBINATOR_DEPTH {
            self.error(
                span,
                format!(
                    "`{keyword}` nested deeper than {MAX_COMBINATOR_DEPTH} levels of `any`, `all` and `not`"
                ),
                Some("flatten the nested blocks".to_owned()),
            );
            return None;
        }
        let mut inner = Vec::new();
        let mut count = 0usize;
        for item in meaningful(body) {
            if item.as_rule() == Rule::constraint {
                count += 1;
                inner.extend(self.constraint(item, depth));
            }
        }
        if count != inner.len() {
            // An inner constraint failed and was reported; do not report the count as well.
            return None;
        }
        match keyword {
            ConstraintKeyword::Any => Some(ConstraintKind::Any(inner)),
            ConstraintKeyword::All => Some(ConstraintKind::All(inner)),
            _ => {
                if count != 1 {
                    let help = if count == 0 {
                        "write the constraint to negate inside the braces: `not { fieldEquals ... }`"
                    } else {
                        "wrap several constraints in `any { ... }` or `all { ... }` inside the `not`"
                    };
                    self.error(
                        span,
                        format!("`not` takes exactly one constraint, found {count}"),
                        Some(help.to_owned()),
                    );
                    return None;
                }
                inner
                    .pop()
                    .map(|single| ConstraintKind::Not(Box::new(single)))
            }
        }
    }

    fn field_equals(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let path = child(body, Rule::path).map(|p| self.path(&p));
        let rhs = if let Some(list) = child(body, Rule::equals_in) {
            let array = child(&list, Rule::json_array)?;
            let mut values = Vec::new();
            let mut ok = true;
            for element in meaningful(array) {
                let span = self.span(&element);
                match self.json(&element) {
                    Some(value) => values.push(Spanned::new(value, span)),
                    None => ok = false,
                }
            }
            ok.then_some(EqualsRhs::In(values))
        } else if let Some(value) = child(body, Rule::equals_value) {
            let json = child(&value, Rule::json_value)?;
            let span = self.span(&json);
            self.json(&json)
                .map(|value| EqualsRhs::Value(Spanned::new(value, span)))
        } else {
            let other = child(&child(body, Rule::equals_path)?, Rule::path)?;
            self.path(&other).map(EqualsRhs::Path)
        };
        Some(ConstraintKind::FieldEquals {
            path: path??,
            rhs: rhs?,
        })
    }

    fn field_matches(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let path = child(body, Rule::path).map(|p| self.path(&p));
        let regex = child(body, Rule::regex)?;
        let span = self.span(&regex);
        let source = child(&regex, Rule::regex_body)?.as_str();
        let flags = child(&regex, Rule::regex_flags);
        let case_insensitive = match flags.as_ref().map_or("", Pair::as_str) {
            "" => Some(false),
            "i" => Some(true),
            other => {
                let flag_span = flags.as_ref().map_or(span, |f| self.span(f));
                self.error(
                    flag_span,
                    format!("unknown regex flags `{other}`: only `i` is supported"),
                    Some("write `/.../i` for a case-insensitive match".to_owned()),
                );
                None
            }
        };
        Some(ConstraintKind::FieldMatches {
            path: path??,
            pattern: Spanned::new(unescape_regex(source), span),
            case_insensitive: case_insensitive?,
        })
    }

    fn field_range(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let shape = meaningful(body.clone()).next()?;
        match shape.as_rule() {
            Rule::range_between => self.range_between(&shape),
            Rule::range_difference => {
                let mut paths = shape
                    .clone()
                    .into_inner()
                    .filter(|p| p.as_rule() == Rule::path);
                let minuend = paths.next().map(|p| self.path(&p));
                let subtrahend = paths.next().map(|p| self.path(&p));
                let bound = self.trailing_bound(&shape, BoundKind::Duration);
                Some(ConstraintKind::FieldRange {
                    subject: RangeSubject::Difference(minuend??, subtrahend??),
                    bounds: vec![bound?],
                })
            }
            _ => {
                let path = child(&shape, Rule::path).map(|p| self.path(&p));
                let bound = self.trailing_bound(&shape, BoundKind::NumberOrNow);
                Some(ConstraintKind::FieldRange {
                    subject: RangeSubject::Field(path??),
                    bounds: vec![bound?],
                })
            }
        }
    }

    /// `NUM OP PATH OP NUM`, normalised to two bounds with the subject on the left.
    fn range_between(&mut self, shape: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let number = child(shape, Rule::number)?;
        let mut ops = shape
            .clone()
            .into_inner()
            .filter(|p| p.as_rule() == Rule::cmp_op);
        let first_op_pair = ops.next()?;
        let second_op_pair = ops.next()?;
        let first_op = cmp_op(first_op_pair.as_str())?;
        let second_op = cmp_op(second_op_pair.as_str())?;
        let lower = self.number(&number).map(|n| Bound {
            op: flip(first_op),
            value: BoundValue::Number(n),
            span: Span::new(
                self.file,
                number.as_span().start(),
                first_op_pair.as_span().end(),
            ),
        });
        let path = child(shape, Rule::path).map(|p| self.path(&p));
        let upper = self.trailing_bound(shape, BoundKind::Number);
        let same_direction = matches!(
            (first_op, second_op),
            (CmpOp::Lt | CmpOp::Le, CmpOp::Lt | CmpOp::Le)
                | (CmpOp::Gt | CmpOp::Ge, CmpOp::Gt | CmpOp::Ge)
        );
        if !same_direction {
            self.error(
                self.span(shape),
                format!(
                    "`{}` and `{}` point different ways: write `LOW < PATH < HIGH` or `HIGH > PATH > LOW`",
                    first_op.symbol(),
                    second_op.symbol()
                ),
                Some("use two `fieldRange` constraints for two unrelated bounds".to_owned()),
            );
            return None;
        }
        Some(ConstraintKind::FieldRange {
            subject: RangeSubject::Field(path??),
            bounds: vec![lower?, upper?],
        })
    }

    /// The last `OP VALUE` of a range shape, checked against what the subject allows.
    fn trailing_bound(&mut self, shape: &Pair<'_, Rule>, allowed: BoundKind) -> Option<Bound> {
        let op_pair = shape
            .clone()
            .into_inner()
            .filter(|p| p.as_rule() == Rule::cmp_op)
            .last()?;
        let value_pair = child(shape, Rule::range_value)?.into_inner().next()?;
        let op = cmp_op(op_pair.as_str())?;
        let span = Span::new(
            self.file,
            op_pair.as_span().start(),
            content_end(&value_pair),
        );
        let value_span = self.span(&value_pair);
        let text = value_pair.as_str();
        let value = match (value_pair.as_rule(), allowed) {
            (Rule::duration, BoundKind::Duration) => {
                BoundValue::Duration(self.duration(&value_pair)?.node)
            }
            (Rule::number, BoundKind::Number | BoundKind::NumberOrNow) => {
                BoundValue::Number(self.number(&value_pair)?)
            }
            (Rule::kw_now, BoundKind::NumberOrNow) => BoundValue::Now,
            (Rule::duration, _) => {
                self.error(
                    value_span,
                    format!("a duration bound `{text}` needs a difference `PATH - PATH`"),
                    Some("write `fieldRange payload.end - payload.start <= 2h`".to_owned()),
                );
                return None;
            }
            (Rule::kw_now, _) => {
                self.error(
                    value_span,
                    "`now` bounds a single timestamp field, not a difference or a chained range"
                        .to_owned(),
                    Some("write `fieldRange payload.expires > now`".to_owned()),
                );
                return None;
            }
            _ => {
                self.error(
                    value_span,
                    format!(
                        "the difference of two timestamps is bounded by a duration, found `{text}`"
                    ),
                    Some("write a duration such as `2h` or `30m`".to_owned()),
                );
                return None;
            }
        };
        Some(Bound { op, value, span })
    }

    fn payload_schema(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let source = meaningful(body.clone()).next()?;
        let span = self.span(&source);
        match source.as_rule() {
            Rule::schema_file => {
                let path = self.string_field(&source)?;
                Some(ConstraintKind::PayloadSchema(SchemaSource::File(path)))
            }
            _ => {
                let value = self.json(&source)?;
                Some(ConstraintKind::PayloadSchema(SchemaSource::Inline(
                    Spanned::new(value, span),
                )))
            }
        }
    }

    fn actor_binding(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let all: Vec<Pair<'_, Rule>> = body
            .clone()
            .into_inner()
            .filter(|p| p.as_rule() == Rule::path)
            .collect();
        let (identity_pair, bound) = all.split_last()?;
        let mut paths = Vec::new();
        let mut ok = true;
        for pair in bound {
            match self.path(pair) {
                Some(path) => paths.push(path),
                None => ok = false,
            }
        }
        let identity = self.path(identity_pair)?;
        if identity.node.root != Root::Agent || identity.node.segments.is_empty() {
            self.error(
                identity.span,
                format!(
                    "`actorBinding` compares with a field of `agent`, found `{}`",
                    identity.node
                ),
                Some("write `== agent.FIELD`, e.g. `== agent.email`".to_owned()),
            );
            return None;
        }
        ok.then_some(ConstraintKind::ActorBinding { paths, identity })
    }

    fn rate_limit(&mut self, body: &Pair<'_, Rule>) -> Option<ConstraintKind> {
        let count_pair = child(body, Rule::uint)?;
        let count = self
            .uint(&count_pair)
            .map(|n| Spanned::new(n, self.span(&count_pair)));
        let period = child(body, Rule::rate_period)?.into_inner().next()?;
        let per = if period.as_rule() == Rule::duration {
            self.duration(&period)
        } else {
            let text = period.as_str();
            let span = self.span(&period);
            match units::parse_rate_unit(text) {
                Some(duration) => Some(Spanned::new(duration, span)),
                None => {
                    self.error(
                        span,
                        format!(
                            "unknown rate unit `{text}`: expected second, minute, hour, day or a duration such as `30s`"
                        ),
                        suggestion(text, ["second", "minute", "hour", "day"]),
                    );
                    None
                }
            }
        };
        // `None`: no burst written; `Some(None)`: written but invalid (already reported).
        let burst_pair = child(body, Rule::rate_burst).and_then(|b| child(&b, Rule::uint));
        let burst = burst_pair.map(|pair| {
            let span = self.span(&pair);
            self.uint(&pair).map(|n| Spanned::new(n, span))
        });
        let mut by = Vec::new();
        let mut ok = true;
        if let Some(by_pair) = child(body, Rule::rate_by) {
            for path in meaningful(by_pair) {
                match self.path(&path) {
                    Some(path) => by.push(path),
                    None => ok = false,
                }
            }
        }
        if matches!(burst, Some(None)) {
            return None;
        }
        let burst = burst.flatten();
        let rate = RateLimit {
            count: count?,
            per: per?,
            burst,
            by,
        };
        ok.then_some(ConstraintKind::RateLimit(rate))
    }

    fn wall_clock_window(&mut self, body: &Pair<'_, Rule>, span: Span) -> Option<ConstraintKind> {
        let shape = meaningful(body.clone()).next()?;
        if shape.as_rule() == Rule::window_absolute {
            let mut stamps = meaningful(shape).filter(|p| p.as_rule() == Rule::timestamp);
            let from = stamps.next().map(|s| self.timestamp(&s));
            let until = stamps.next().map(|s| self.timestamp(&s));
            return Some(ConstraintKind::WallClockWindow(WindowSpec::Absolute {
                from: from??,
                until: until??,
            }));
        }
        let mut windows = Vec::new();
        let mut zone = None;
        let mut ok = true;
        for item in meaningful(shape) {
            match item.as_rule() {
                Rule::day_window => match self.day_window(&item) {
                    Some(window) => windows.push(window),
                    None => ok = false,
                },
                Rule::string => match self.string(&item) {
                    Some(name) => zone = Some(name),
                    None => ok = false,
                },
                _ => {}
            }
        }
        let zone = zone.unwrap_or_else(|| Spanned::new(DEFAULT_ZONE.to_owned(), span));
        ok.then_some(ConstraintKind::WallClockWindow(WindowSpec::Weekly {
            windows,
            zone,
        }))
    }

    fn day_window(&mut self, pair: &Pair<'_, Rule>) -> Option<DayWindow> {
        let span = self.span(pair);
        let days_pair = child(pair, Rule::days)?;
        let days = units::parse_days(days_pair.as_str()).map_err(|message| {
            let help = suggestion(days_pair.as_str(), DAY_NAMES_AND_DAILY);
            self.error(self.span(&days_pair), message, help);
        });
        let mut times = pair
            .clone()
            .into_inner()
            .filter(|p| p.as_rule() == Rule::time_of_day);
        let start = times.next().map(|t| self.time_of_day(&t));
        let end = times.next().map(|t| self.time_of_day(&t));
        Some(DayWindow {
            days: days.ok()?,
            start: start??,
            end: end??,
            span,
        })
    }

    fn time_of_day(&mut self, pair: &Pair<'_, Rule>) -> Option<super::ast::TimeOfDay> {
        units::parse_time_of_day(pair.as_str())
            .map_err(|message| self.error(self.span(pair), message, None))
            .ok()
    }

    fn timestamp(
        &mut self,
        pair: &Pair<'_, Rule>,
    ) -> Option<Spanned<DateTime<chrono::FixedOffset>>> {
        let inner = pair.clone().into_inner().next()?;
        let span = self.span(&inner);
        let text = match inner.as_rule() {
            Rule::string => self.string(&inner)?.node,
            _ => inner.as_str().to_owned(),
        };
        match DateTime::parse_from_rfc3339(&text) {
            Ok(instant) => Some(Spanned::new(instant, span)),
            Err(reason) => {
                self.error(
                    span,
                    format!("invalid timestamp `{text}`: {reason}"),
                    Some(
                        "write an RFC 3339 timestamp with a zone, such as `2026-12-01T09:00:00Z`"
                            .to_owned(),
                    ),
                );
                None
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Paths, numbers, durations, strings, JSON
    // -----------------------------------------------------------------------------------------

    fn path(&mut self, pair: &Pair<'_, Rule>) -> Option<SpannedPath> {
        let span = self.span(pair);
        let mut parts = pair.clone().into_inner();
        let root_pair = parts.next()?;
        let root_text = root_pair.as_str();
        let root = Root::from_name(root_text);
        if root.is_none() {
            self.error(
                self.span(&root_pair),
                format!(
                    "unknown path root `{root_text}`: expected payload, agent, context, resource or request"
                ),
                suggestion(root_text, Root::ALL.map(Root::name)),
            );
        }
        let mut segments = Vec::new();
        let mut ok = true;
        for segment in parts {
            match segment.as_rule() {
                Rule::dot_segment => {
                    if let Some(name) = child(&segment, Rule::member_name) {
                        segments.push(Segment::Key(name.as_str().to_owned()));
                    }
                }
                _ => {
                    let Some(inner) = meaningful(segment).next() else {
                        continue;
                    };
                    match inner.as_rule() {
                        Rule::string => match self.string(&inner) {
                            Some(key) => segments.push(Segment::Key(key.node)),
                            None => ok = false,
                        },
                        Rule::index => match self.uint(&inner) {
                            Some(index) => segments.push(Segment::Index(index)),
                            None => ok = false,
                        },
                        _ => segments.push(Segment::Wildcard),
                    }
                }
            }
        }
        let path = Path {
            root: root?,
            segments,
        };
        ok.then_some(Spanned::new(path, span))
    }

    fn uint(&mut self, pair: &Pair<'_, Rule>) -> Option<u64> {
        let text = pair.as_str();
        match text.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                self.error(
                    self.span(pair),
                    format!("number `{text}` is too large"),
                    Some(format!("the largest allowed is {}", u64::MAX)),
                );
                None
            }
        }
    }

    fn number(&mut self, pair: &Pair<'_, Rule>) -> Option<Number> {
        let text = pair.as_str();
        match serde_json::from_str::<Number>(text) {
            Ok(number) => Some(number),
            Err(_) => {
                self.error(
                    self.span(pair),
                    format!("number `{text}` is out of range"),
                    Some("numbers must fit in a 64-bit float".to_owned()),
                );
                None
            }
        }
    }

    fn duration(&mut self, pair: &Pair<'_, Rule>) -> Option<Spanned<Duration>> {
        let span = self.span(pair);
        let text = pair.as_str();
        units::parse_duration(text)
            .map(|duration| Spanned::new(duration, span))
            .map_err(|message| {
                let help = units::suggest_duration(text).map(|d| format!("did you mean `{d}`?"));
                self.error(span, message, help);
            })
            .ok()
    }

    /// Decodes a `string` pair (JSON string syntax), reporting every bad escape.
    fn string(&mut self, pair: &Pair<'_, Rule>) -> Option<Spanned<String>> {
        let span = self.span(pair);
        let body = child(pair, Rule::string_body)?;
        let start = body.as_span().start();
        match decode_string(body.as_str()) {
            Ok(text) => Some(Spanned::new(text, span)),
            Err(problems) => {
                for problem in problems {
                    self.error(
                        Span::new(self.file, start + problem.start, start + problem.end),
                        problem.message,
                        problem.help.map(str::to_owned),
                    );
                }
                None
            }
        }
    }

    /// Builds a JSON value from a `json_value` (or one of its alternatives).
    fn json(&mut self, pair: &Pair<'_, Rule>) -> Option<Value> {
        match pair.as_rule() {
            Rule::json_value => {
                let inner = pair.clone().into_inner().next()?;
                self.json(&inner)
            }
            Rule::json_object => {
                let mut map = Map::new();
                let mut ok = true;
                for member in meaningful(pair.clone()) {
                    let key_pair = child(&member, Rule::string);
                    let key = key_pair.as_ref().and_then(|k| self.string(k));
                    let value = child(&member, Rule::json_value).and_then(|v| self.json(&v));
                    match (key, value) {
                        (Some(key), Some(value)) => {
                            if map.contains_key(&key.node) {
                                self.error(
                                    key.span,
                                    format!("duplicate key `{}` in object", key.node),
                                    Some("each key may appear once in a JSON object".to_owned()),
                                );
                                ok = false;
                            } else {
                                map.insert(key.node, value);
                            }
                        }
                        _ => ok = false,
                    }
                }
                ok.then_some(Value::Object(map))
            }
            Rule::json_array => {
                let mut items = Vec::new();
                let mut ok = true;
                for element in meaningful(pair.clone()) {
                    match self.json(&element) {
                        Some(value) => items.push(value),
                        None => ok = false,
                    }
                }
                ok.then_some(Value::Array(items))
            }
            Rule::string => self.string(pair).map(|s| Value::String(s.node)),
            Rule::number => self.number(pair).map(Value::Number),
            Rule::json_true => Some(Value::Bool(true)),
            Rule::json_false => Some(Value::Bool(false)),
            _ => Some(Value::Null),
        }
    }
}

/// Day names and `daily`, for "did you mean" hints.
const DAY_NAMES_AND_DAILY: [&str; 8] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun", "daily"];

/// Which constant a bound may hold, by the shape of the range.
#[derive(Clone, Copy)]
enum BoundKind {
    /// Field subjects in a chained range: numbers only.
    Number,
    /// Single field subjects: a number or `now`.
    NumberOrNow,
    /// Difference subjects: durations only.
    Duration,
}

fn cmp_op(text: &str) -> Option<CmpOp> {
    match text {
        "<" => Some(CmpOp::Lt),
        "<=" => Some(CmpOp::Le),
        ">" => Some(CmpOp::Gt),
        ">=" => Some(CmpOp::Ge),
        _ => None,
    }
}

/// The operator seen from the other side: `3 < x` is `x > 3`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
    }
}

/// The regex source with `\/` turned into `/`; every other escape is kept for the regex engine.
fn unescape_regex(source: &str) -> String {
    let mut pattern = String::with_capacity(source.len());
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('/') => pattern.push('/'),
                Some(other) => {
                    pattern.push('\\');
                    pattern.push(other);
                }
                None => pattern.push('\\'),
            }
        } else {
            pattern.push(c);
        }
    }
    pattern
}

/// One problem inside a string literal, with byte offsets relative to the string body.
struct StringProblem {
    start: usize,
    end: usize,
    message: String,
    help: Option<&'static str>,
}

/// Decodes the body of a JSON string (between the quotes).
fn decode_string(body: &str) -> Result<String, Vec<StringProblem>> {
    let mut out = String::with_capacity(body.len());
    let mut problems = Vec::new();
    let mut chars = body.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            if u32::from(c) < 0x20 {
                problems.push(StringProblem {
                    start: at,
                    end: at + c.len_utf8(),
                    message: format!("control character U+{:04X} in a string", u32::from(c)),
                    help: Some("write it as an escape such as `\\t` or `\\u0009`"),
                });
            } else {
                out.push(c);
            }
            continue;
        }
        let Some((_, escape)) = chars.next() else {
            problems.push(StringProblem {
                start: at,
                end: at + 1,
                message: "unfinished escape at the end of a string".to_owned(),
                help: None,
            });
            break;
        };
        let simple = match escape {
            '"' => Some('"'),
            '\\' => Some('\\'),
            '/' => Some('/'),
            'b' => Some('\u{8}'),
            'f' => Some('\u{c}'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            _ => None,
        };
        if let Some(decoded) = simple {
            out.push(decoded);
            continue;
        }
        if escape != 'u' {
            problems.push(StringProblem {
                start: at,
                end: at + 1 + escape.len_utf8(),
                message: format!("invalid escape `\\{escape}` in a string"),
                help: Some("valid escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX"),
            });
            continue;
        }
        let Some(high) = hex4(body, at + 2) else {
            problems.push(bad_unicode(
                body,
                at,
                "expected four hex digits after `\\u`",
            ));
            skip_hex(&mut chars);
            continue;
        };
        advance(&mut chars, 4);
        let code = if (0xD800..0xDC00).contains(&high) {
            // A high surrogate must be followed by `\u` and a low surrogate.
            let low = body
                .get(at + 6..at + 8)
                .filter(|prefix| *prefix == "\\u")
                .and_then(|_| hex4(body, at + 8))
                .filter(|low| (0xDC00..0xE000).contains(low));
            match low {
                Some(low) => {
                    advance(&mut chars, 6);
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                }
                None => {
                    problems.push(StringProblem {
                        start: at,
                        end: at + 6,
                        message: format!(
                            "unpaired surrogate `\\u{high:04X}` in a string: a high surrogate must be followed by a low one"
                        ),
                        help: None,
                    });
                    continue;
                }
            }
        } else if (0xDC00..0xE000).contains(&high) {
            problems.push(StringProblem {
                start: at,
                end: at + 6,
                message: format!("unpaired surrogate `\\u{high:04X}` in a string"),
                help: None,
            });
            continue;
        } else {
            high
        };
        match char::from_u32(code) {
            Some(decoded) => out.push(decoded),
            None => problems.push(bad_unicode(body, at, "not a Unicode scalar value")),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The value of four hex digits at byte `at`, if they are there.
fn hex4(body: &str, at: usize) -> Option<u32> {
    let digits = body.get(at..at + 4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

fn bad_unicode(body: &str, at: usize, why: &str) -> StringProblem {
    let end = body.get(at + 2..).map_or(at + 2, |rest| {
        at + 2
            + rest
                .char_indices()
                .take_while(|(i, c)| *i < 4 && c.is_ascii_hexdigit())
                .map(|(i, c)| i + c.len_utf8())
                .last()
                .unwrap_or(0)
    });
    let written = body.get(at..end).unwrap_or("\\u");
    StringProblem {
        start: at,
        end,
        message: format!("invalid unicode escape `{written}` in a string: {why}"),
        help: Some("write `\\u` followed by exactly four hex digits"),
    }
}

fn advance(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>, count: usize) {
    for _ in 0..count {
        chars.next();
    }
}

fn skip_hex(chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>) {
    for _ in 0..4 {
        if chars.next_if(|(_, c)| c.is_ascii_hexdigit()).is_none() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_decode_every_json_escape() {
        let decoded = decode_string(r#"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"#).ok();
        assert_eq!(
            decoded.as_deref(),
            Some("a\"b\\c/d\u{8}\u{c}\n\r\t\u{e9}\u{1F600}")
        );
    }

    #[test]
    fn strings_reject_bad_escapes_at_the_escape() {
        let problems = decode_string(r"ab\qc").err().unwrap();
        assert_eq!((problems[0].start, problems[0].end), (2, 4));
        assert!(problems[0].message.contains("`\\q`"));
        let problems = decode_string(r"\u12").err().unwrap();
        assert!(problems[0].message.contains("four hex digits"));
        let problems = decode_string(r"x\ud800y").err().unwrap();
        assert!(problems[0].message.contains("unpaired surrogate"));
        let problems = decode_string(r"\udc00").err().unwrap();
        assert!(problems[0].message.contains("unpaired surrogate"));
        let problems = decode_string("a\tb").err().unwrap();
        assert!(problems[0].message.contains("U+0009"));
    }

    #[test]
    fn regex_unescape_turns_only_escaped_slashes_into_slashes() {
        assert_eq!(unescape_regex(r"a\/b\.c\d"), r"a/b\.c\d");
        assert_eq!(unescape_regex(r"\\"), r"\\");
    }
}
