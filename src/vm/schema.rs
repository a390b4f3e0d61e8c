//! `payloadSchema` validation: runs a [`SchemaProgram`] against a JSON instance.
//!
//! - [`validate`] is the hot path (the VM's): valid, invalid, or the [`SchemaLimit`] that stopped
//!   it. It allocates nothing when the instance is valid (up to `uniqueItems` over more than 16
//!   items): messages are built lazily, only by the explaining evaluator, and paths are not
//!   tracked. [`is_valid`] is the same as a yes/no, a limit counting as invalid.
//! - [`first_violation`] explains a failure as a [`SchemaViolation`] (instance path, keyword,
//!   message). It runs the *same* evaluator, so it returns `Some` exactly when [`is_valid`]
//!   returns `false`.
//!
//! All are bounded. Every subschema evaluation costs a step, and work that grows with the
//! instance (text, constants, `uniqueItems`) costs in proportion; running out of
//! [`SchemaProgram::step_limit`] steps, or nesting deeper than [`SchemaProgram::depth_limit`],
//! aborts validation — including inside `not`, `anyOf` and `if`, where a plain `false` would
//! flip into a pass. The engine refuses such a request as `input` (SPEC §7).

mod format;

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Number, Value};

use super::input::RegexBudget;
use super::json::{BYTES_PER_STEP, CaseVariant, Json, JsonKind, json_hash};

use crate::bytecode::schema::{
    Decimal, Leaf, SchemaNode, SchemaNodeId, SchemaObject, SchemaPattern, SchemaProgram,
    SchemaType, TypeSet,
};
use crate::value::{Segment, cmp_numbers, truncate_for_message, truncate_str};

pub use format::is_valid_format;

/// How many `properties` lookups one object validation remembers for `required`.
const CACHED: usize = 8;

/// Longest quoted instance value in a message, in characters.
const QUOTED_CHARS: usize = 64;

/// Arrays of at most this many items have `uniqueItems` checked pair by pair, allocating
/// nothing; longer ones by hashing ([`Eval::first_equal_items`]).
const PAIRWISE_ITEMS: u64 = 16;

/// How many comparisons of (hash, index) pairs a `uniqueItems` sort makes per step.
const SORT_COMPARISONS_PER_STEP: u64 = 4;

/// The fixed seed of the `uniqueItems` hash: the same charges on every run and every replica.
const UNIQUE_ITEMS_SEED: u64 = 0x6361_7067_6174_6531;

/// Why a payload does not satisfy a `payloadSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Where in the payload the violation is (empty for the payload itself).
    pub instance_path: Vec<Segment>,
    /// The schema keyword that failed, e.g. `maxItems`; `false` for a `false` schema reached
    /// without a keyword, `limits` when validation hit its depth or step limit.
    pub keyword: &'static str,
    /// What is wrong, lowercase, one line.
    pub message: String,
}

/// Validation stopped at a limit before it reached an answer. The engine refuses such a request
/// (reason `input`, SPEC §7): the payload broke a limit, which says nothing about the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SchemaLimit {
    /// Nested deeper than [`SchemaProgram::depth_limit`] levels.
    #[error("schema validation nested deeper than the limit of {0} levels")]
    Depth(u32),
    /// Needed more than [`SchemaProgram::step_limit`] steps.
    #[error("schema validation needed more than the limit of {0} steps")]
    Steps(u64),
    /// A `pattern` or `patternProperties` match would take the request past its regex work
    /// (`Limits::max_regex_work`, this limit).
    #[error("schema validation needed more than the request's regex work limit of {0} byte-states")]
    RegexWork(u64),
    /// A node id outside the arena: an internal invariant broke (never expected).
    #[error("schema program is malformed")]
    BrokenProgram,
}

/// Why [`validate`] refused the instance instead of answering: the engine refuses the request
/// (reason `input`), under `not` and `any` too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Validation stopped at a limit.
    #[error(transparent)]
    Limit(SchemaLimit),
    /// A name the schema reads is absent and the object has a case variant of it
    /// (`Limits::refuse_case_variant_reads`).
    #[error("a member's name differs only by case from one the schema reads")]
    CaseVariant(CaseVariant),
}

impl Refused {
    fn of(abort: Abort, program: &SchemaProgram) -> Refused {
        Refused::Limit(match abort {
            Abort::Depth => SchemaLimit::Depth(program.depth_limit()),
            Abort::Steps => SchemaLimit::Steps(program.step_limit()),
            Abort::RegexWork(limit) => SchemaLimit::RegexWork(limit),
            Abort::BrokenProgram => SchemaLimit::BrokenProgram,
            Abort::CaseVariant => return Refused::CaseVariant(CaseVariant),
        })
    }
}

/// Whether `instance` validates against `program`, or why validation stopped first: a limit,
/// or — with `refuse_case_variants` — a [`CaseVariant`], when a name `properties`, `required` or
/// `dependentRequired` reads is absent from an object that has a case variant of it, or a
/// member matched by no property is a case variant of one (an upstream that binds members
/// case-insensitively reads it as that property). Its `pattern` and `patternProperties` matches
/// are paid from `regex_budget`. Allocation-free when it validates (up to `uniqueItems` over
/// more than 16 items).
pub fn validate<'r, J: Json<'r>>(
    program: &SchemaProgram,
    instance: J,
    regex_budget: &RegexBudget,
    refuse_case_variants: bool,
) -> Result<bool, Refused> {
    let mut eval = Eval {
        program,
        steps_left: program.step_limit(),
        regex_budget,
        report: Quiet,
        variants: refuse_case_variants,
    };
    eval.node(program.root(), Instance::Value(instance), 0)
        .map_err(|abort| Refused::of(abort, program))
}

/// True when `instance` validates against `program`, regex work unbounded and case variants
/// not looked for; a limit reached makes it invalid (fail closed). Allocation-free when it
/// validates.
#[cfg(any(test, feature = "internals"))]
pub fn is_valid<'r, J: Json<'r>>(program: &SchemaProgram, instance: J) -> bool {
    matches!(
        validate(program, instance, &RegexBudget::unlimited(), false),
        Ok(true)
    )
}

/// The first violation found, or `None` when `instance` is valid (exactly when [`is_valid`]).
pub fn first_violation<'r, J: Json<'r>>(
    program: &SchemaProgram,
    instance: J,
) -> Option<SchemaViolation> {
    let regex_budget = RegexBudget::unlimited();
    let mut eval = Eval {
        program,
        steps_left: program.step_limit(),
        regex_budget: &regex_budget,
        report: Explain::default(),
        variants: false,
    };
    match eval.node(program.root(), Instance::Value(instance), 0) {
        Ok(true) => None,
        Ok(false) => Some(eval.report.found.unwrap_or_else(|| SchemaViolation {
            instance_path: Vec::new(),
            keyword: "false",
            message: "payload does not match the schema".to_owned(),
        })),
        Err(abort) => Some(SchemaViolation {
            // The path is left where the abort happened: `?` skips the `leave`s.
            instance_path: eval.report.path,
            keyword: "limits",
            message: Refused::of(abort, program).to_string(),
        }),
    }
}

/// Validation stopped before reaching an answer ([`Refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abort {
    Depth,
    Steps,
    /// The request's regex work would pass this limit.
    RegexWork(u64),
    /// A node id outside the arena: an internal invariant broke (never expected).
    BrokenProgram,
    /// A name the schema reads has a case variant in the instance ([`validate`]).
    CaseVariant,
}

type Outcome = Result<bool, Abort>;

/// The outcome of one check per object member when the members are visited in the document's
/// order (the quiet report, which does not sort them). A tape keeps the input's order and a
/// `Value` map its own, so stopping at the first failing member would make the steps spent —
/// and with them whether the budget runs out, in this check or in a later `anyOf` branch —
/// depend on the order of the members (regression: a request decided from its bytes was
/// allowed while the same request pre-parsed was denied for running out of steps). So every
/// member is checked: a failure or a depth abort is remembered, and only running out of steps
/// stops the loop, which happens exactly when the members' steps together exceed what is left,
/// in any order. A case variant outranks a depth abort, and a depth abort a failure, so the
/// outcome is the same in any order too.
#[derive(Debug, Default)]
struct EveryMember {
    failed: bool,
    too_deep: bool,
    case_variant: bool,
}

impl EveryMember {
    /// Takes one member's outcome; out of steps (or a broken program) ends the loop at once.
    fn add(&mut self, outcome: Outcome) -> Result<(), Abort> {
        match outcome {
            Ok(valid) => self.failed |= !valid,
            Err(Abort::Depth) => self.too_deep = true,
            Err(Abort::CaseVariant) => self.case_variant = true,
            Err(abort @ (Abort::Steps | Abort::RegexWork(_) | Abort::BrokenProgram)) => {
                return Err(abort);
            }
        }
        Ok(())
    }

    /// Whether every member held.
    fn outcome(&self) -> Outcome {
        if self.case_variant {
            Err(Abort::CaseVariant)
        } else if self.too_deep {
            Err(Abort::Depth)
        } else {
            Ok(!self.failed)
        }
    }
}

/// What is being validated: a JSON value, or an object member name (for `propertyNames`),
/// which behaves as a JSON string without being allocated as one.
#[derive(Debug, Clone, Copy)]
enum Instance<'a, J> {
    Value(J),
    Name(&'a str),
}

impl<'a, 'r: 'a, J: Json<'r>> Instance<'a, J> {
    fn as_str(self) -> Option<Cow<'a, str>> {
        match self {
            Instance::Value(v) => v.as_str(),
            Instance::Name(s) => Some(Cow::Borrowed(s)),
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Instance::Value(v) => v.type_name(),
            Instance::Name(_) => "string",
        }
    }

    fn equals(self, expected: &Value) -> bool {
        match self {
            Instance::Value(v) => v.equals_value(expected),
            Instance::Name(s) => expected.as_str() == Some(s),
        }
    }

    /// Whether comparing the instance with `expected` reads more than their kinds and sizes:
    /// the same kind, and for an array or object the same length (equality answers anything
    /// else at once).
    fn may_equal(self, expected: &Value) -> bool {
        let expected_kind = Json::kind(expected);
        self.kind() == expected_kind
            && match expected_kind {
                JsonKind::Array | JsonKind::Object => {
                    matches!(self, Instance::Value(v) if v.len() == Json::len(expected))
                }
                _ => true,
            }
    }

    fn equals_any(self, values: &[Value]) -> bool {
        match self {
            Instance::Value(v) => v.equals_any(values),
            Instance::Name(s) => values.iter().any(|c| c.as_str() == Some(s)),
        }
    }

    fn quoted(self) -> String {
        match self {
            Instance::Value(v) => v.describe(QUOTED_CHARS),
            Instance::Name(s) => truncate_for_message(&Value::String(s.to_owned()), QUOTED_CHARS),
        }
    }

    fn kind(self) -> JsonKind {
        match self {
            Instance::Value(v) => v.kind(),
            Instance::Name(_) => JsonKind::String,
        }
    }

    fn has_type(self, types: TypeSet) -> bool {
        let ty = match self.kind() {
            JsonKind::String => SchemaType::String,
            JsonKind::Null => SchemaType::Null,
            JsonKind::Bool => SchemaType::Boolean,
            JsonKind::Object => SchemaType::Object,
            JsonKind::Array => SchemaType::Array,
            JsonKind::Number => {
                return types.contains(SchemaType::Number)
                    || (types.contains(SchemaType::Integer)
                        && matches!(self, Instance::Value(v) if v.as_number().is_some_and(|n| is_integer(&n))));
            }
        };
        types.contains(ty)
    }
}

/// True when `text` has between `min` and `max` characters (Unicode code points). A string of
/// n bytes has between ⌈n/4⌉ and n characters (UTF-8): they are counted only when those bounds
/// do not already decide.
#[inline]
fn length_within(text: &str, min: Option<u64>, max: Option<u64>) -> bool {
    let bytes = u64::try_from(text.len()).unwrap_or(u64::MAX);
    let surely_long_enough = min.is_none_or(|min| bytes.div_ceil(4) >= min);
    let surely_short_enough = max.is_none_or(|max| bytes <= max);
    if surely_long_enough && surely_short_enough {
        return true;
    }
    let length = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
    min.is_none_or(|min| length >= min) && max.is_none_or(|max| length <= max)
}

/// [`Leaf`]'s keywords on `instance`: what `Eval::object` decides for such a schema.
#[inline]
pub(super) fn leaf_holds<'r, J: Json<'r>>(leaf: &Leaf, instance: J) -> bool {
    if let Some(types) = leaf.types
        && !Instance::Value(instance).has_type(types)
    {
        return false;
    }
    match instance.kind() {
        JsonKind::Array => {
            let count = u64::try_from(instance.len()).unwrap_or(u64::MAX);
            leaf.min_items.is_none_or(|min| count >= min)
                && leaf.max_items.is_none_or(|max| count <= max)
        }
        JsonKind::String if leaf.min_length.is_some() || leaf.max_length.is_some() => instance
            .as_str()
            .is_some_and(|text| length_within(&text, leaf.min_length, leaf.max_length)),
        _ => true,
    }
}

fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// A path step without allocation; only the explaining report turns it into a [`Segment`].
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Where failures go. [`Quiet`] drops them (the hot path); [`Explain`] records the first.
trait Report {
    /// Visit object members in name order whatever the document keeps them in, so the first
    /// violation reported is the same for a `Value` (sorted map) and a tape (input order). The
    /// quiet report visits them in the document's order and checks every one ([`EveryMember`]),
    /// so neither its answer nor the steps it spends depend on that order.
    const SORTED: bool;
    /// Failures are explained (the general evaluator runs everywhere, for its messages); a
    /// quiet report lets [`Leaf`] schemas be checked in line.
    const EXPLAIN: bool;
    fn enter(&mut self, step: Step<'_>);
    fn leave(&mut self);
    fn fail(&mut self, keyword: &'static str, message: impl FnOnce() -> String);
}

struct Quiet;

impl Report for Quiet {
    const SORTED: bool = false;
    const EXPLAIN: bool = false;
    #[inline]
    fn enter(&mut self, _: Step<'_>) {}
    #[inline]
    fn leave(&mut self) {}
    #[inline]
    fn fail(&mut self, _: &'static str, _: impl FnOnce() -> String) {}
}

#[derive(Default)]
struct Explain {
    path: Vec<Segment>,
    found: Option<SchemaViolation>,
}

impl Report for Explain {
    const SORTED: bool = true;
    const EXPLAIN: bool = true;
    fn enter(&mut self, step: Step<'_>) {
        self.path.push(match step {
            Step::Key(k) => Segment::Key(k.to_owned()),
            Step::Index(i) => Segment::Index(u64::try_from(i).unwrap_or(u64::MAX)),
        });
    }

    fn leave(&mut self) {
        self.path.pop();
    }

    fn fail(&mut self, keyword: &'static str, message: impl FnOnce() -> String) {
        if self.found.is_none() {
            self.found = Some(SchemaViolation {
                instance_path: self.path.clone(),
                keyword,
                message: message(),
            });
        }
    }
}

struct Eval<'p, R> {
    program: &'p SchemaProgram,
    steps_left: u64,
    /// The request's regex work, which `pattern` and `patternProperties` matches are paid from.
    regex_budget: &'p RegexBudget,
    report: R,
    /// Case variants of the names read abort validation ([`validate`]).
    variants: bool,
}

/// Fails the current keyword: records a lazily built message and returns `Ok(false)`.
macro_rules! ensure {
    ($eval:expr, $cond:expr, $keyword:expr, $($message:tt)+) => {
        if !$cond {
            $eval.report.fail($keyword, || format!($($message)+));
            return Ok(false);
        }
    };
}

/// Propagates a failed sub-evaluation (already reported) as `Ok(false)`.
macro_rules! require {
    ($outcome:expr) => {
        if !$outcome? {
            return Ok(false);
        }
    };
}

/// The steps reading `text` costs beyond one: one per [`BYTES_PER_STEP`] bytes.
fn text_steps(text: &str) -> u64 {
    u64::try_from(text.len()).unwrap_or(u64::MAX) / BYTES_PER_STEP
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

impl<R: Report> Eval<'_, R> {
    fn step(&mut self) -> Result<(), Abort> {
        self.charge(1)
    }

    /// The member `name` of object `members`; [`Abort::CaseVariant`] when it is absent and a
    /// member's name is a case variant of it (and variants are refused).
    #[inline]
    fn lookup<'r, J: Json<'r>>(&self, members: J, name: &str) -> Result<Option<J>, Abort> {
        members
            .member(name, self.variants)
            .map_err(|CaseVariant| Abort::CaseVariant)
    }

    /// Spends `steps` steps: work that grows with the instance (text scanned, items compared)
    /// costs in proportion, so the budget bounds the time a decision takes, not only the number
    /// of schema nodes it visits.
    fn charge(&mut self, steps: u64) -> Result<(), Abort> {
        self.steps_left = self.steps_left.checked_sub(steps).ok_or(Abort::Steps)?;
        Ok(())
    }

    /// Whether `pattern` matches `text`, paid from the request's regex work before it runs.
    #[inline(always)]
    fn matches(&mut self, pattern: &SchemaPattern, text: &str) -> Result<bool, Abort> {
        self.regex_budget
            .charge(pattern.regex.work(text))
            .map_err(|over| Abort::RegexWork(over.limit))?;
        Ok(pattern.regex.is_match(text))
    }

    /// Evaluates a node quietly (for `anyOf`, `oneOf`, `not`, `if`, `contains`,
    /// `propertyNames`), sharing the step budget. Aborts still propagate.
    fn quiet<'r, J: Json<'r>>(
        &mut self,
        id: SchemaNodeId,
        instance: Instance<'_, J>,
        depth: u32,
    ) -> Outcome {
        let mut quiet = Eval {
            program: self.program,
            steps_left: self.steps_left,
            regex_budget: self.regex_budget,
            report: Quiet,
            variants: self.variants,
        };
        let outcome = quiet.node(id, instance, depth);
        self.steps_left = quiet.steps_left;
        outcome
    }

    fn node<'r, J: Json<'r>>(
        &mut self,
        id: SchemaNodeId,
        instance: Instance<'_, J>,
        depth: u32,
    ) -> Outcome {
        if depth >= self.program.depth_limit() {
            return Err(Abort::Depth);
        }
        self.step()?;
        match self.program.node(id).ok_or(Abort::BrokenProgram)? {
            SchemaNode::Always => Ok(true),
            SchemaNode::Never => {
                self.report
                    .fail("false", || "no value is allowed here".to_owned());
                Ok(false)
            }
            SchemaNode::Object(object) => self.object(object, instance, depth + 1),
        }
    }

    /// Evaluates a subschema on a member or element, reporting a `false` schema there as
    /// "not allowed" under the keyword that applied it.
    #[inline]
    fn descend<'r, J: Json<'r>>(
        &mut self,
        keyword: &'static str,
        id: SchemaNodeId,
        step: Step<'_>,
        instance: J,
        depth: u32,
    ) -> Outcome {
        self.report.enter(step);
        let node = self.program.node(id);
        // A leaf is checked in line when no message is wanted.
        let leaf = match node {
            Some(SchemaNode::Object(object)) if !R::EXPLAIN => object.shape.leaf.as_deref(),
            _ => None,
        };
        let valid = match (node, leaf) {
            (Some(SchemaNode::Never), _) => {
                self.step()?;
                self.report.fail(keyword, || match step {
                    Step::Key(k) => format!("`{}` is not allowed", truncate_str(k, QUOTED_CHARS)),
                    Step::Index(i) => format!("item {i} is not allowed"),
                });
                false
            }
            (_, Some(leaf)) => {
                // What `node` and `object` do for this schema: the same depth and step
                // accounting, then `type` and the size bounds.
                if depth >= self.program.depth_limit() {
                    return Err(Abort::Depth);
                }
                self.step()?;
                leaf_holds(leaf, instance)
            }
            _ => self.node(id, Instance::Value(instance), depth)?,
        };
        self.report.leave();
        Ok(valid)
    }

    fn object<'r, J: Json<'r>>(
        &mut self,
        schema: &SchemaObject,
        instance: Instance<'_, J>,
        depth: u32,
    ) -> Outcome {
        if let Some(target) = schema.reference {
            require!(self.node(target, instance, depth));
        }
        if let Some(types) = schema.types {
            ensure!(
                self,
                instance.has_type(types),
                "type",
                "expected {types}, found {}",
                instance.type_name()
            );
        }
        if let Some(values) = &schema.enum_values {
            // A comparison reads at most the constant, and only one of the instance's kind (and,
            // for an array or object, its size) is read at all.
            let weights = values
                .iter()
                .filter(|v| instance.may_equal(v))
                .fold(0, |sum: u64, v| sum.saturating_add(v.weight()));
            self.charge(weights)?;
            ensure!(
                self,
                instance.equals_any(values),
                "enum",
                "value `{}` is not one of {}",
                instance.quoted(),
                truncate_for_message(&Value::Array(values.clone()), QUOTED_CHARS)
            );
        }
        if let Some(expected) = &schema.const_value {
            if instance.may_equal(expected) {
                self.charge(expected.weight())?;
            }
            ensure!(
                self,
                instance.equals(expected),
                "const",
                "expected `{}`, found `{}`",
                truncate_for_message(expected, QUOTED_CHARS),
                instance.quoted()
            );
        }
        // Only the keyword groups the schema has are visited (`Shape`, derived at build).
        let shape = &schema.shape;
        if let Instance::Value(value) = instance {
            match value.kind() {
                JsonKind::Number if shape.numbers => {
                    if let Some(n) = value.as_number() {
                        require!(self.number(schema, &n));
                    }
                }
                JsonKind::Array if shape.arrays => require!(self.array(schema, value, depth)),
                JsonKind::Object if shape.objects => {
                    require!(self.members(schema, value, depth));
                }
                _ => {}
            }
        }
        if shape.strings
            && let Some(text) = instance.as_str()
        {
            require!(self.string(schema, &text));
        }
        if shape.applicators {
            self.applicators(schema, instance, depth)
        } else {
            Ok(true)
        }
    }

    fn number(&mut self, schema: &SchemaObject, n: &Number) -> Outcome {
        use Ordering::{Equal, Greater, Less};
        let bounds: [(&Option<Number>, &'static str, &[Ordering], &str); 4] = [
            (&schema.minimum, "minimum", &[Greater, Equal], "at least"),
            (&schema.maximum, "maximum", &[Less, Equal], "at most"),
            (
                &schema.exclusive_minimum,
                "exclusiveMinimum",
                &[Greater],
                "greater than",
            ),
            (
                &schema.exclusive_maximum,
                "exclusiveMaximum",
                &[Less],
                "less than",
            ),
        ];
        for (bound, keyword, allowed, words) in bounds {
            if let Some(limit) = bound {
                let holds = cmp_numbers(n, limit).is_some_and(|o| allowed.contains(&o));
                ensure!(
                    self,
                    holds,
                    keyword,
                    "expected a number {words} {limit}, found {n}"
                );
            }
        }
        if let Some((given, divisor)) = &schema.multiple_of {
            let holds = Decimal::from_number(n).is_some_and(|d| d.is_multiple_of(*divisor));
            ensure!(
                self,
                holds,
                "multipleOf",
                "expected a multiple of {given}, found {n}"
            );
        }
        Ok(true)
    }

    fn string(&mut self, schema: &SchemaObject, text: &str) -> Outcome {
        // Lengths, `pattern` and `format` read the whole text.
        self.charge(text_steps(text))?;
        // Counted again only on a failure, to say which bound it broke.
        if !length_within(text, schema.min_length, schema.max_length) {
            let length = u64::try_from(text.chars().count()).unwrap_or(u64::MAX);
            if let Some(min) = schema.min_length {
                ensure!(
                    self,
                    length >= min,
                    "minLength",
                    "expected at least {min} {}, found {length}",
                    plural(min, "character", "characters")
                );
            }
            if let Some(max) = schema.max_length {
                ensure!(
                    self,
                    length <= max,
                    "maxLength",
                    "expected at most {max} {}, found {length}",
                    plural(max, "character", "characters")
                );
            }
        }
        if let Some(pattern) = &schema.pattern {
            self.step()?;
            let matched = self.matches(pattern, text)?;
            ensure!(
                self,
                matched,
                "pattern",
                "value `{}` does not match pattern `{}`",
                quote_str(text),
                pattern.source
            );
        }
        if let Some(format) = schema.format {
            self.step()?;
            ensure!(
                self,
                is_valid_format(format, text),
                "format",
                "value `{}` is not a valid {}",
                quote_str(text),
                format.name()
            );
        }
        Ok(true)
    }

    fn array<'r, J: Json<'r>>(&mut self, schema: &SchemaObject, items: J, depth: u32) -> Outcome {
        let count = u64::try_from(items.len()).unwrap_or(u64::MAX);
        if let Some(min) = schema.min_items {
            ensure!(
                self,
                count >= min,
                "minItems",
                "expected at least {min} {}, found {count}",
                plural(min, "item", "items")
            );
        }
        if let Some(max) = schema.max_items {
            ensure!(
                self,
                count <= max,
                "maxItems",
                "expected at most {max} {}, found {count}",
                plural(max, "item", "items")
            );
        }
        if schema.unique_items {
            let equal = self.first_equal_items(items, count)?;
            if let Some((i, j)) = equal {
                self.report.fail("uniqueItems", || {
                    format!("items {i} and {j} are equal, expected unique items")
                });
                return Ok(false);
            }
        }
        for (i, (item, id)) in items.elements().zip(&schema.prefix_items).enumerate() {
            require!(self.descend("prefixItems", *id, Step::Index(i), item, depth));
        }
        if let Some(id) = schema.items {
            let rest = items.elements().enumerate().skip(schema.prefix_items.len());
            for (i, item) in rest {
                require!(self.descend("items", id, Step::Index(i), item, depth));
            }
        }
        if let Some(rule) = schema.contains {
            let mut found: u64 = 0;
            for item in items.elements() {
                if found >= rule.min && rule.max.is_none() {
                    break;
                }
                if self.quiet(rule.schema, Instance::Value(item), depth)? {
                    found += 1;
                    if rule.max.is_some_and(|max| found > max) {
                        break;
                    }
                }
            }
            let min = rule.min;
            ensure!(
                self,
                found >= min,
                "minContains",
                "expected at least {min} {} matching `contains`, found {found}",
                plural(min, "item", "items")
            );
            if let Some(max) = rule.max {
                ensure!(
                    self,
                    found <= max,
                    "maxContains",
                    "expected at most {max} {} matching `contains`, found more",
                    plural(max, "item", "items")
                );
            }
        }
        Ok(true)
    }

    /// `uniqueItems`: the first pair of equal items — the smallest `i` that has an equal item
    /// after it, and the first such `j` — or `None`, charging before the work it pays for.
    ///
    /// Up to [`PAIRWISE_ITEMS`] items, every pair is compared, allocating nothing: half the
    /// items' weight once per other item (a comparison reads at most the lighter item) is
    /// charged first. A longer array is hashed instead ([`json_hash`]: equal items hash alike)
    /// and its items sorted by hash, O(n log n): the items' weight (one reading each) and a
    /// [`SORT_COMPARISONS_PER_STEP`]th of a step per item per halving level are charged first,
    /// and then only items whose hashes agree are compared, each comparison charged the weight
    /// of the lighter item. The hash is fixed, so the charges are the same on every run, from
    /// bytes and pre-parsed; crafted collisions only spend the budget.
    fn first_equal_items<'r, J: Json<'r>>(
        &mut self,
        items: J,
        count: u64,
    ) -> Result<Option<(usize, usize)>, Abort> {
        if count <= PAIRWISE_ITEMS {
            let weight = items
                .elements()
                .fold(0, |sum: u64, item| sum.saturating_add(item.weight()));
            self.charge(weight.saturating_mul(count.saturating_sub(1)).div_ceil(2))?;
            for (i, a) in items.elements().enumerate() {
                for (j, b) in items.elements().enumerate().skip(i + 1) {
                    if a.json_eq(b) {
                        return Ok(Some((i, j)));
                    }
                }
            }
            return Ok(None);
        }
        // (hash, index, weight, item): sorted by hash and index, equal items sit together,
        // each run in index order.
        let mut keyed: Vec<(u64, usize, u64, J)> = items
            .elements()
            .enumerate()
            .map(|(index, item)| (0, index, item.weight(), item))
            .collect();
        let weight = keyed
            .iter()
            .fold(0, |sum: u64, (_, _, w, _)| sum.saturating_add(*w));
        let levels = u64::from(count.next_power_of_two().trailing_zeros());
        self.charge(
            weight.saturating_add(count.saturating_mul(levels) / SORT_COMPARISONS_PER_STEP),
        )?;
        let state = foldhash::fast::FixedState::with_seed(UNIQUE_ITEMS_SEED);
        for (hash, _, _, item) in &mut keyed {
            *hash = json_hash(*item, &state);
        }
        keyed.sort_unstable_by_key(|(hash, index, _, _)| (*hash, *index));
        let mut first: Option<(usize, usize)> = None;
        for run in keyed
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|run| run.len() > 1)
        {
            // The first item of the run with an equal one after it, and its first equal one.
            'run: for (at, (_, i, a_weight, a)) in run.iter().enumerate() {
                for (_, j, b_weight, b) in run.iter().skip(at + 1) {
                    self.charge((*a_weight).min(*b_weight))?;
                    if a.json_eq(*b) {
                        if first.is_none_or(|(earliest, _)| *i < earliest) {
                            first = Some((*i, *j));
                        }
                        break 'run;
                    }
                }
            }
        }
        Ok(first)
    }

    fn members<'r, J: Json<'r>>(
        &mut self,
        schema: &SchemaObject,
        members: J,
        depth: u32,
    ) -> Outcome {
        // A `required` name that `properties` also lists is looked up once, for both
        // keywords (the first `CACHED` properties).
        let mut cached: [Option<Option<J>>; CACHED] = [None; CACHED];
        for (name, property) in schema
            .required
            .iter()
            .zip(&schema.shape.required_properties)
        {
            let member = self.lookup(members, name)?;
            if let Some(slot) = property.and_then(|i| cached.get_mut(i)) {
                *slot = Some(member);
            }
            ensure!(
                self,
                member.is_some(),
                "required",
                "missing required property `{}`",
                truncate_str(name, QUOTED_CHARS)
            );
        }
        let count = u64::try_from(members.len()).unwrap_or(u64::MAX);
        if let Some(min) = schema.min_properties {
            ensure!(
                self,
                count >= min,
                "minProperties",
                "expected at least {min} {}, found {count}",
                plural(min, "property", "properties")
            );
        }
        if let Some(max) = schema.max_properties {
            ensure!(
                self,
                count <= max,
                "maxProperties",
                "expected at most {max} {}, found {count}",
                plural(max, "property", "properties")
            );
        }
        for (name, dependents) in &schema.dependent_required {
            if self.lookup(members, name)?.is_some() {
                for dependent in dependents {
                    let present = self.lookup(members, dependent)?.is_some();
                    ensure!(
                        self,
                        present,
                        "dependentRequired",
                        "missing property `{}`, required when `{}` is present",
                        truncate_str(dependent, QUOTED_CHARS),
                        truncate_str(name, QUOTED_CHARS)
                    );
                }
            }
        }
        if let Some(id) = schema.property_names {
            if R::SORTED {
                // Explaining (a deny): the names in name order, whatever the document keeps.
                let mut names: Vec<Cow<'_, str>> =
                    members.members().map(|(name, _)| name).collect();
                if !J::sorted_members() {
                    names.sort();
                }
                for name in names {
                    let valid = self.quiet(id, Instance::<J>::Name(&name), depth)?;
                    ensure!(
                        self,
                        valid,
                        "propertyNames",
                        "property name `{}` is not allowed by `propertyNames`",
                        truncate_str(&name, QUOTED_CHARS)
                    );
                }
            } else {
                let mut every = EveryMember::default();
                for (name, _) in members.members() {
                    every.add(self.quiet(id, Instance::<J>::Name(&name), depth))?;
                }
                require!(every.outcome());
            }
        }
        let only_named =
            schema.pattern_properties.is_empty() && schema.additional_properties.is_none();
        if only_named {
            // Only `properties` applies: look each named property up instead of walking every
            // member of the instance (a payload usually has many more members than the schema
            // names). Both lists are in name order, so violations come in the same order.
            for (index, (name, id)) in schema.properties.iter().enumerate() {
                let member = match cached.get(index).copied().flatten() {
                    Some(member) => member,
                    None => self.lookup(members, name)?,
                };
                if let Some(value) = member {
                    require!(self.descend("properties", *id, Step::Key(name), value, depth));
                }
            }
        } else if R::SORTED && !J::sorted_members() {
            let mut sorted: Vec<(Cow<'_, str>, J)> = members.members().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            for (name, value) in sorted {
                require!(self.member(schema, &name, value, depth));
            }
        } else if R::SORTED {
            for (name, value) in members.members() {
                require!(self.member(schema, &name, value, depth));
            }
        } else {
            let mut every = EveryMember::default();
            for (name, value) in members.members() {
                every.add(self.member(schema, &name, value, depth))?;
            }
            require!(every.outcome());
        }
        Ok(true)
    }

    /// `properties`, `patternProperties` and `additionalProperties` on one member.
    fn member<'r, J: Json<'r>>(
        &mut self,
        schema: &SchemaObject,
        name: &str,
        value: J,
        depth: u32,
    ) -> Outcome {
        let mut matched = false;
        if let Some(id) = schema.property(name) {
            matched = true;
            require!(self.descend("properties", id, Step::Key(name), value, depth));
        } else if self.variants && schema.has_case_variant_property(name) {
            // Not a property here, but one to an upstream that reads names case-insensitively.
            return Err(Abort::CaseVariant);
        }
        for (pattern, id) in &schema.pattern_properties {
            self.charge(1 + text_steps(name))?;
            if self.matches(pattern, name)? {
                matched = true;
                require!(self.descend("patternProperties", *id, Step::Key(name), value, depth));
            }
        }
        if let (false, Some(id)) = (matched, schema.additional_properties) {
            require!(self.descend("additionalProperties", id, Step::Key(name), value, depth));
        }
        Ok(true)
    }

    fn applicators<'r, J: Json<'r>>(
        &mut self,
        schema: &SchemaObject,
        instance: Instance<'_, J>,
        depth: u32,
    ) -> Outcome {
        for id in &schema.all_of {
            require!(self.node(*id, instance, depth));
        }
        if !schema.any_of.is_empty() {
            let mut any = false;
            for id in &schema.any_of {
                if self.quiet(*id, instance, depth)? {
                    any = true;
                    break;
                }
            }
            ensure!(
                self,
                any,
                "anyOf",
                "value does not match any schema in `anyOf`"
            );
        }
        if !schema.one_of.is_empty() {
            let mut first = None;
            let mut second = None;
            for (i, id) in schema.one_of.iter().enumerate() {
                if self.quiet(*id, instance, depth)? {
                    if first.is_none() {
                        first = Some(i);
                    } else {
                        second = Some(i);
                        break;
                    }
                }
            }
            ensure!(
                self,
                first.is_some(),
                "oneOf",
                "value does not match any schema in `oneOf`"
            );
            if let (Some(a), Some(b)) = (first, second) {
                self.report.fail("oneOf", || {
                    format!("value matches schemas {a} and {b} in `oneOf`, expected exactly one")
                });
                return Ok(false);
            }
        }
        if let Some(id) = schema.not {
            let matched = self.quiet(id, instance, depth)?;
            ensure!(
                self,
                !matched,
                "not",
                "value must not match the schema in `not`"
            );
        }
        if let Some(condition) = schema.condition {
            let branch = if self.quiet(condition.if_schema, instance, depth)? {
                condition.then_schema
            } else {
                condition.else_schema
            };
            if let Some(id) = branch {
                require!(self.node(id, instance, depth));
            }
        }
        Ok(true)
    }
}

fn quote_str(text: &str) -> String {
    truncate_for_message(&Value::String(text.to_owned()), QUOTED_CHARS)
}

#[cfg(test)]
mod tests;
