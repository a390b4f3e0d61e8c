//! Constraints → bytecode.
//!
//! Each top-level constraint compiles to code that leaves one boolean on the stack, followed by
//! `Require`. Combinators short-circuit with forward jumps (`OrElse`/`AndThen`), patched once
//! their end is known. Paths are resolved against the capability's resource template here, and
//! regexes, schemas and windows are compiled into the program's tables — so every
//! constraint-level error is found in this one pass.

use std::collections::HashMap;

use super::error::CompileError;
use crate::bytecode::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx,
};
use crate::bytecode::matcher::{BuildError, Matcher, MatcherCache};
use crate::bytecode::op::Op;
use crate::bytecode::program::{
    BoundConst, BoundSet, CheckInfo, Cmp, CompiledPath, CompiledRegex, JsonRoot, PathAccess,
    Program, RateLimitSpec, ValueSet,
};
use crate::bytecode::resource::ResourcePattern;
use crate::limits::Limits;
use crate::span::{Location, SourceMap, Span};
use crate::syntax::ast::{
    BoundValue, CmpOp, Constraint, ConstraintKind, EqualsRhs, RangeSubject, RateLimit,
    SchemaSource, SpannedPath,
};
use crate::syntax::units::format_duration;
use crate::value::{Root, Segment};

/// Most rate limits one capability may declare, and how deeply `any`/`all`/`not` may nest.
pub use crate::limits::{MAX_CONSTRAINT_NESTING as MAX_NESTING, MAX_RATE_LIMITS};

/// Builds one capability's program.
pub struct Emitter<'a> {
    program: Program,
    pattern: Option<&'a ResourcePattern>,
    sources: &'a SourceMap,
    limits: &'a Limits,
    errors: &'a mut Vec<CompileError>,
    /// The regexes this load has built (shared by every capability that uses one).
    matchers: &'a mut MatcherCache,
    interned: HashMap<String, PathIdx>,
    location: Option<Location>,
}

fn index<I: Index>(n: usize, span: Span, errors: &mut Vec<CompileError>) -> Option<I> {
    let index = I::from_usize(n);
    if index.is_none() {
        errors.push(CompileError::new(
            span,
            format!("too many entries in the `{}` table", I::TABLE),
        ));
    }
    index
}

impl<'a> Emitter<'a> {
    /// Starts a program for a capability whose template is `pattern` (when it compiled).
    pub fn new(
        pattern: Option<&'a ResourcePattern>,
        sources: &'a SourceMap,
        limits: &'a Limits,
        errors: &'a mut Vec<CompileError>,
        matchers: &'a mut MatcherCache,
    ) -> Self {
        Emitter {
            program: Program::default(),
            pattern,
            sources,
            limits,
            errors,
            matchers,
            interned: HashMap::new(),
            location: None,
        }
    }

    /// Compiles the top-level constraints; returns the program and the rate limits (which run
    /// after it, in declaration order).
    pub fn capability(mut self, constraints: &[Constraint]) -> (Program, Vec<RateLimitSpec>) {
        let mut rate_limits = Vec::new();
        for constraint in constraints {
            if let ConstraintKind::RateLimit(limit) = &constraint.kind {
                if constraint.optional {
                    self.error(constraint.span, "`optional` does not apply to `rateLimit`");
                }
                if let Some(spec) = self.rate_limit(limit, constraint.span) {
                    if rate_limits.len() == MAX_RATE_LIMITS {
                        self.error(
                            constraint.span,
                            format!(
                                "a capability may declare at most {MAX_RATE_LIMITS} rate limits"
                            ),
                        );
                    }
                    rate_limits.push(spec);
                }
                continue;
            }
            self.location = Some(self.sources.location(constraint.span));
            let start = self.program.code.len();
            self.expr(constraint, 0);
            let Some(check) =
                index::<CheckIdx>(self.program.checks.len(), constraint.span, self.errors)
            else {
                continue;
            };
            self.op(Op::Require { check });
            self.program.checks.push(CheckInfo {
                constraint: constraint.kind.keyword(),
                location: self.location.clone(),
                summary: summary(constraint),
                code_start: u32::try_from(start).unwrap_or(u32::MAX),
                code_end: u32::try_from(self.program.code.len()).unwrap_or(u32::MAX),
            });
        }
        self.location = None;
        self.op(Op::Accept);
        (self.program, rate_limits)
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.errors.push(CompileError::new(span, message));
    }

    fn op(&mut self, op: Op) -> usize {
        self.program.code.push(op);
        self.program.debug.push(self.location.clone());
        self.program.code.len() - 1
    }

    fn here(&mut self, span: Span) -> Option<JumpTarget> {
        index(self.program.code.len(), span, self.errors)
    }

    fn patch(&mut self, at: usize, target: JumpTarget) {
        if let Some(Op::OrElse { target: t } | Op::AndThen { target: t }) =
            self.program.code.get_mut(at)
        {
            *t = target;
        }
    }

    /// Emits a chain `t1 J t2 J ... tn` where J is `OrElse` (any) or `AndThen` (all), with every
    /// jump landing after `tn`.
    fn chain(&mut self, items: &[Constraint], depth: usize, or: bool, span: Span) {
        let Some((last, init)) = items.split_last() else {
            self.op(Op::Push(!or));
            return;
        };
        let placeholder = JumpTarget::from_usize(0);
        let mut jumps = Vec::new();
        for item in init {
            self.expr(item, depth + 1);
            if let Some(target) = placeholder {
                jumps.push(self.op(if or {
                    Op::OrElse { target }
                } else {
                    Op::AndThen { target }
                }));
            }
        }
        self.expr(last, depth + 1);
        if let Some(end) = self.here(span) {
            for at in jumps {
                self.patch(at, end);
            }
        }
    }

    fn expr(&mut self, constraint: &Constraint, depth: usize) {
        let span = constraint.span;
        let optional = constraint.optional;
        if depth > MAX_NESTING {
            self.error(
                span,
                format!("constraints nest deeper than {MAX_NESTING} levels"),
            );
            self.op(Op::Push(false));
            return;
        }
        if optional && !constraint.kind.keyword().may_be_optional() {
            self.error(
                span,
                format!("`optional` does not apply to `{}`", constraint.kind.name()),
            );
        }
        let test = match &constraint.kind {
            ConstraintKind::FieldEquals { path, rhs } => self.field_equals(path, rhs, optional),
            ConstraintKind::FieldMatches {
                path,
                pattern,
                case_insensitive,
            } => {
                let path = self.path(path, true);
                let regex = self.regex(&pattern.node, *case_insensitive, pattern.span);
                path.zip(regex).map(|(path, regex)| Op::Matches {
                    path,
                    regex,
                    optional,
                })
            }
            ConstraintKind::FieldRange { subject, bounds } => {
                self.field_range(subject, bounds, optional, span)
            }
            ConstraintKind::PayloadSchema(source) => self.schema(source, span),
            ConstraintKind::ActorBinding { paths, identity } => {
                self.actor_binding(paths, identity, optional, span);
                return;
            }
            ConstraintKind::RateLimit(_) => {
                self.errors.push(
                    CompileError::new(span, "`rateLimit` is only allowed at the top level of a capability")
                        .with_help("move it out of `any`/`all`/`not`: a rate limit is consumed only when the whole capability allows"),
                );
                None
            }
            ConstraintKind::WallClockWindow(spec) => {
                match crate::compile::window::compile_window(spec) {
                    Ok(window) => {
                        let n = self.program.windows.len();
                        self.program.windows.push(window);
                        index::<WindowIdx>(n, span, self.errors).map(|window| Op::Window { window })
                    }
                    Err(e) => {
                        self.errors.push(CompileError {
                            span: if e.span == Span::default() {
                                span
                            } else {
                                e.span
                            },
                            message: e.message,
                            help: e.help,
                        });
                        None
                    }
                }
            }
            ConstraintKind::Any(items) => {
                self.chain(items, depth, true, span);
                return;
            }
            ConstraintKind::All(items) => {
                self.chain(items, depth, false, span);
                return;
            }
            ConstraintKind::Not(inner) => {
                self.expr(inner, depth + 1);
                self.op(Op::Not);
                return;
            }
        };
        // On error, keep the stack shape valid so later constraints still check.
        self.op(test.unwrap_or(Op::Push(false)));
    }

    fn field_equals(&mut self, path: &SpannedPath, rhs: &EqualsRhs, optional: bool) -> Option<Op> {
        let left = self.path(path, true);
        match rhs {
            EqualsRhs::Value(value) => {
                let n = self.program.consts.len();
                self.program.consts.push(value.node.clone());
                let value = index::<ConstIdx>(n, value.span, self.errors)?;
                Some(Op::Equals {
                    path: left?,
                    value,
                    optional,
                })
            }
            EqualsRhs::In(values) => {
                if values.is_empty() {
                    self.error(path.span, "`in []` can never hold");
                }
                let n = self.program.sets.len();
                self.program.sets.push(ValueSet {
                    values: values.iter().map(|v| v.node.clone()).collect(),
                });
                let set = index::<SetIdx>(n, path.span, self.errors)?;
                Some(Op::InSet {
                    path: left?,
                    set,
                    optional,
                })
            }
            EqualsRhs::Path(other) => {
                let other = self.path(other, false);
                Some(Op::EqualsPath {
                    path: left?,
                    other: other?,
                    optional,
                })
            }
        }
    }

    fn actor_binding(
        &mut self,
        paths: &[SpannedPath],
        identity: &SpannedPath,
        optional: bool,
        span: Span,
    ) {
        if identity.node.root != Root::Agent || identity.node.segments.is_empty() {
            self.errors.push(
                CompileError::new(
                    identity.span,
                    format!("`{}` is not an agent identity field", identity.node),
                )
                .with_help("write `== agent.FIELD`, e.g. `== agent.email`"),
            );
        }
        let other = self.path(identity, false);
        if paths.is_empty() {
            self.error(span, "`actorBinding` needs at least one path");
            self.op(Op::Push(false));
            return;
        }
        let mut jumps = Vec::new();
        let count = paths.len();
        for (i, path) in paths.iter().enumerate() {
            let left = self.path(path, true);
            let test = left.zip(other).map(|(path, identity)| Op::BindsIdentity {
                path,
                identity,
                optional,
            });
            self.op(test.unwrap_or(Op::Push(false)));
            if i + 1 < count
                && let Some(target) = JumpTarget::from_usize(0)
            {
                jumps.push(self.op(Op::AndThen { target }));
            }
        }
        if let Some(end) = self.here(span) {
            for at in jumps {
                self.patch(at, end);
            }
        }
    }

    fn field_range(
        &mut self,
        subject: &RangeSubject,
        bounds: &[crate::syntax::ast::Bound],
        optional: bool,
        span: Span,
    ) -> Option<Op> {
        if bounds.is_empty() {
            self.error(span, "`fieldRange` needs at least one bound");
            return None;
        }
        let cmp = |op: CmpOp| match op {
            CmpOp::Lt => Cmp::Lt,
            CmpOp::Le => Cmp::Le,
            CmpOp::Gt => Cmp::Gt,
            CmpOp::Ge => Cmp::Ge,
        };
        let mut set = Vec::new();
        let mut text = Vec::new();
        let (mut numbers, mut durations, mut nows) = (0, 0, 0);
        for bound in bounds {
            let (constant, shown) = match &bound.value {
                BoundValue::Number(n) => {
                    numbers += 1;
                    (BoundConst::Number(n.clone()), n.to_string())
                }
                BoundValue::Duration(d) => {
                    durations += 1;
                    (BoundConst::Nanos(i128::from(d.nanos)), format_duration(*d))
                }
                BoundValue::Now => {
                    nows += 1;
                    (BoundConst::Now, "now".to_owned())
                }
            };
            text.push(format!("{} {shown}", bound.op.symbol()));
            set.push((cmp(bound.op), constant));
        }
        let bound_set = BoundSet {
            bounds: set,
            text: text.join(" and "),
        };
        match subject {
            RangeSubject::Field(path) => {
                if durations > 0 {
                    self.errors.push(
                        CompileError::new(
                            span,
                            "a duration bound needs a difference of two timestamps",
                        )
                        .with_help("write `fieldRange payload.end - payload.start <= 2h`"),
                    );
                    return None;
                }
                if numbers > 0 && nows > 0 {
                    self.error(span, "a `fieldRange` cannot mix numbers and `now`");
                    return None;
                }
                let path = self.path(path, true)?;
                let n = self.program.bounds.len();
                self.program.bounds.push(bound_set);
                let bounds = index::<BoundsIdx>(n, span, self.errors)?;
                Some(if nows > 0 {
                    Op::RangeNow {
                        path,
                        bounds,
                        optional,
                    }
                } else {
                    Op::Range {
                        path,
                        bounds,
                        optional,
                    }
                })
            }
            RangeSubject::Difference(a, b) => {
                if numbers > 0 || nows > 0 {
                    self.errors.push(
                        CompileError::new(
                            span,
                            "a difference of timestamps is bounded by durations",
                        )
                        .with_help("write a duration such as `2h`, `30m` or `500ms`"),
                    );
                    return None;
                }
                let a = self.path(a, false);
                let b = self.path(b, false);
                let n = self.program.bounds.len();
                self.program.bounds.push(bound_set);
                let bounds = index::<BoundsIdx>(n, span, self.errors)?;
                Some(Op::RangeDiff {
                    a: a?,
                    b: b?,
                    bounds,
                    optional,
                })
            }
        }
    }

    fn schema(&mut self, source: &SchemaSource, span: Span) -> Option<Op> {
        let schema = match source {
            SchemaSource::Inline(value) => value,
            SchemaSource::File(path) => {
                self.error(
                    path.span,
                    format!("schema file `{}` was not loaded", path.node),
                );
                return None;
            }
        };
        match crate::compile::schema::compile_schema_sharing(
            &schema.node,
            self.limits.max_regex_bytes,
            self.matchers,
        ) {
            Ok(program) => {
                let n = self.program.schemas.len();
                self.program.schemas.push(program);
                index::<SchemaIdx>(n, span, self.errors).map(|schema| Op::Schema { schema })
            }
            Err(errors) => {
                for e in errors {
                    let at = if e.pointer.is_empty() {
                        String::new()
                    } else {
                        format!(" at `{}`", e.pointer)
                    };
                    self.errors.push(CompileError {
                        span: schema.span,
                        message: format!("{}{at}", e.message),
                        help: e.help,
                    });
                }
                None
            }
        }
    }

    fn regex(&mut self, source: &str, case_insensitive: bool, span: Span) -> Option<RegexIdx> {
        let built = Matcher::anchored(source)
            .map_err(BuildError::from)
            .and_then(|anchored| {
                self.matchers
                    .build(&anchored, case_insensitive, self.limits.max_regex_bytes)
            });
        match built {
            Ok(regex) => {
                let n = self.program.regexes.len();
                self.program.regexes.push(CompiledRegex {
                    regex,
                    source: source.to_owned(),
                    case_insensitive,
                });
                index(n, span, self.errors)
            }
            Err(error @ BuildError::TotalTooBig { .. }) => {
                self.errors.push(
                    CompileError::new(span, format!("regex `/{source}/`: {error}")).with_help(
                        "share patterns between capabilities, simplify them, or raise the limit",
                    ),
                );
                None
            }
            Err(BuildError::Regex(regex::Error::CompiledTooBig(limit))) => {
                self.errors.push(
                    CompileError::new(
                        span,
                        format!("regex `/{source}/` compiles to more than {limit} bytes"),
                    )
                    .with_help(
                        "simplify the pattern (large counted repetitions are the usual cause)",
                    ),
                );
                None
            }
            Err(BuildError::Regex(e)) => {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("").trim().to_owned();
                let help =
                    if source.contains("(?=") || source.contains("(?!") || source.contains("(?<") {
                        "look-around is not supported: only linear-time regexes are allowed"
                    } else if source.contains("\\1") || source.contains("\\k<") {
                        "backreferences are not supported: only linear-time regexes are allowed"
                    } else {
                        "see the regex syntax in docs/language.md"
                    };
                self.errors.push(
                    CompileError::new(span, format!("invalid regex `/{source}/`: {last}"))
                        .with_help(help),
                );
                None
            }
        }
    }

    fn rate_limit(&mut self, limit: &RateLimit, span: Span) -> Option<RateLimitSpec> {
        let mut ok = true;
        if limit.count.node == 0 {
            self.error(limit.count.span, "`rateLimit 0` allows nothing");
            ok = false;
        }
        if limit.per.node.nanos == 0 {
            self.error(
                limit.per.span,
                "a rate-limit window must be longer than zero",
            );
            ok = false;
        }
        match &limit.burst {
            Some(burst) if burst.node == 0 => {
                self.error(burst.span, "`burst 0` allows nothing");
                ok = false;
            }
            Some(_) => {}
            None if limit.count.node > self.limits.max_sliding_window => {
                self.errors.push(
                    CompileError::new(
                        limit.count.span,
                        format!(
                            "a sliding-window rate limit of {} is more than {}",
                            limit.count.node, self.limits.max_sliding_window
                        ),
                    )
                    .with_help(
                        "add `burst B` to use a token bucket, which needs no per-call history",
                    ),
                );
                ok = false;
            }
            None => {}
        }
        let mut by = Vec::new();
        for path in &limit.by {
            match self.path(path, false) {
                Some(p) => by.push(p),
                None => ok = false,
            }
        }
        let mut summary = format!(
            "{} per {}",
            limit.count.node,
            format_duration(limit.per.node)
        );
        if let Some(burst) = &limit.burst {
            summary.push_str(&format!(" burst {}", burst.node));
        }
        if !limit.by.is_empty() {
            let names: Vec<String> = limit.by.iter().map(|p| p.node.to_string()).collect();
            summary.push_str(&format!(" by {}", names.join(", ")));
        }
        ok.then(|| RateLimitSpec {
            count: limit.count.node,
            per: limit.per.node.to_std(),
            burst: limit.burst.as_ref().map(|b| b.node),
            by,
            location: Some(self.sources.location(span)),
            summary,
        })
    }

    /// Resolves and interns a path. `many` says whether `[*]` is allowed.
    fn path(&mut self, path: &SpannedPath, many: bool) -> Option<PathIdx> {
        let text = path.node.to_string();
        if !many && path.node.has_wildcard() {
            self.errors.push(
                CompileError::new(path.span, format!("`{text}` must name a single value"))
                    .with_help("`[*]` is not allowed here; use an index such as `[0]`"),
            );
            return None;
        }
        if let Some(&id) = self.interned.get(&text) {
            return Some(id);
        }
        let access = self.access(path)?;
        let n = self.program.paths.len();
        let id = index::<PathIdx>(n, path.span, self.errors)?;
        self.program.paths.push(CompiledPath {
            access,
            text: text.clone(),
        });
        self.interned.insert(text, id);
        Some(id)
    }

    fn access(&mut self, path: &SpannedPath) -> Option<PathAccess> {
        let segments = &path.node.segments;
        let json = |root| {
            Some(PathAccess::Json {
                root,
                segments: segments.clone(),
            })
        };
        match path.node.root {
            Root::Payload => json(JsonRoot::Payload),
            Root::Agent => json(JsonRoot::Agent),
            Root::Context => json(JsonRoot::Context),
            Root::Request => match segments.as_slice() {
                [Segment::Key(k)] if k == "skill" => Some(PathAccess::RequestSkill),
                [Segment::Key(k)] if k == "operation" => Some(PathAccess::RequestOperation),
                [Segment::Key(k)] if k == "transaction" => Some(PathAccess::RequestTransaction),
                _ => {
                    self.errors.push(
                        CompileError::new(
                            path.span,
                            format!("`{}` is not a request field", path.node),
                        )
                        .with_help(
                            "use `request.skill`, `request.operation` or `request.transaction`",
                        ),
                    );
                    None
                }
            },
            Root::Resource => {
                let bindings: &[String] = self.pattern.map_or(&[], |p| p.bindings());
                match segments.as_slice() {
                    [Segment::Key(q), Segment::Key(name)] if q == "query" => {
                        Some(PathAccess::Query { name: name.clone() })
                    }
                    [Segment::Key(name)] => match bindings.iter().position(|b| b == name) {
                        Some(slot) => u16::try_from(slot)
                            .ok()
                            .map(|slot| PathAccess::Binding { slot }),
                        None => {
                            if self.pattern.is_some() {
                                let help = if bindings.is_empty() {
                                    "the resource template binds no names; write `{name}` in it"
                                        .to_owned()
                                } else {
                                    format!("the template binds: {}", bindings.join(", "))
                                };
                                self.errors.push(
                                    CompileError::new(
                                        path.span,
                                        format!(
                                            "`{}` is not bound by the resource template",
                                            path.node
                                        ),
                                    )
                                    .with_help(help),
                                );
                            }
                            None
                        }
                    },
                    _ => {
                        self.errors.push(
                            CompileError::new(path.span, format!("`{}` is not a resource field", path.node))
                                .with_help("use `resource.NAME` for a `{NAME}` of the template or `resource.query.NAME`"),
                        );
                        None
                    }
                }
            }
        }
    }
}

/// A short text of a constraint for messages and disassembly.
pub fn summary(constraint: &Constraint) -> String {
    let optional = if constraint.optional { "optional " } else { "" };
    let body = match &constraint.kind {
        ConstraintKind::FieldEquals { path, rhs } => match rhs {
            EqualsRhs::Value(v) => format!("fieldEquals {} == {}", path.node, v.node),
            EqualsRhs::In(vs) => {
                let list: Vec<String> = vs.iter().map(|v| v.node.to_string()).collect();
                format!("fieldEquals {} in [{}]", path.node, list.join(", "))
            }
            EqualsRhs::Path(p) => format!("fieldEquals {} == {}", path.node, p.node),
        },
        ConstraintKind::FieldMatches {
            path,
            pattern,
            case_insensitive,
        } => format!(
            "fieldMatches {} ~ /{}/{}",
            path.node,
            pattern.node.replace('/', "\\/"),
            if *case_insensitive { "i" } else { "" }
        ),
        ConstraintKind::FieldRange { subject, bounds } => {
            let bounds: Vec<String> = bounds
                .iter()
                .map(|b| {
                    let value = match &b.value {
                        BoundValue::Number(n) => n.to_string(),
                        BoundValue::Duration(d) => format_duration(*d),
                        BoundValue::Now => "now".to_owned(),
                    };
                    format!("{} {value}", b.op.symbol())
                })
                .collect();
            match subject {
                RangeSubject::Field(p) => format!("fieldRange {} {}", p.node, bounds.join(" and ")),
                RangeSubject::Difference(a, b) => {
                    format!(
                        "fieldRange {} - {} {}",
                        a.node,
                        b.node,
                        bounds.join(" and ")
                    )
                }
            }
        }
        ConstraintKind::PayloadSchema(_) => "payloadSchema".to_owned(),
        ConstraintKind::ActorBinding { paths, identity } => {
            let list: Vec<String> = paths.iter().map(|p| p.node.to_string()).collect();
            format!("actorBinding {} == {}", list.join(", "), identity.node)
        }
        ConstraintKind::RateLimit(_) => "rateLimit".to_owned(),
        ConstraintKind::WallClockWindow(spec) => match crate::compile::window::compile_window(spec)
        {
            Ok(window) => format!("wallClockWindow {}", window.describe()),
            Err(_) => "wallClockWindow".to_owned(),
        },
        ConstraintKind::Any(items) => format!("any {{ {} constraints }}", items.len()),
        ConstraintKind::All(items) => format!("all {{ {} constraints }}", items.len()),
        ConstraintKind::Not(_) => "not { ... }".to_owned(),
    };
    crate::value::truncate_str(&format!("{optional}{body}"), 120)
}
