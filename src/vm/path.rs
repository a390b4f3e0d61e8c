//! Reading paths: every value a path reaches, visited without copying.
//!
//! [`visit`] walks a compiled path and calls a predicate on each value it reaches (one value, or
//! every element under a `[*]`). It stops at the first value the predicate rejects. A [`Trail`]
//! records the concrete path of the value being visited: [`NoTrail`] on the fast path (zero
//! cost), [`SegmentTrail`] when a deny reason needs `payload.attendees[4].email`.
//!
//! Absence rules (see `docs/semantics.md`): a missing member or an index past the end is
//! *absent* (an `optional` constraint holds); stepping into a value of the wrong type — a
//! member of a string, `[*]` over an object, any step into `null` — is a failure even for
//! `optional`, because the request does not have the shape the policy describes. The one
//! exception is a root that is `null`: SPEC §4 says an absent payload (agent, context) *is*
//! `null`, so every path below a `null` root is absent.

use std::fmt;

use super::input::Input;
use super::json::{Json, JsonKind};
use super::resource::QueryValue;
use crate::bytecode::program::{CompiledPath, PathAccess};
use crate::bytes::bytes_eq;
use crate::value::Segment;

/// One value a path reached.
#[derive(Debug, Clone, Copy)]
pub enum Leaf<'a, J> {
    /// A JSON value from the payload, agent or context.
    Json(J),
    /// A string from the resource or request (bindings, query, skill, operation, transaction).
    Str(&'a str),
}

impl<'a, 'r, J: Json<'r>> Leaf<'a, J> {
    /// Hands the value as a string, if it is one, to `f` (a tape string with escapes is decoded
    /// for the call).
    #[inline]
    pub fn with_str<R>(self, f: impl FnOnce(Option<&str>) -> R) -> R {
        match self {
            Leaf::Json(v) => match v.as_str() {
                Some(text) => f(Some(&text)),
                None => f(None),
            },
            Leaf::Str(s) => f(Some(s)),
        }
    }

    /// The value as a JSON number, if it is one.
    #[inline]
    pub fn as_number(self) -> Option<serde_json::Number> {
        match self {
            Leaf::Json(v) => v.as_number(),
            Leaf::Str(_) => None,
        }
    }

    /// The value's JSON type name.
    pub fn type_name(self) -> &'static str {
        match self {
            Leaf::Json(v) => v.type_name(),
            Leaf::Str(_) => "string",
        }
    }

    /// JSON equality between two leaves (a request string equals the JSON string with the same
    /// text).
    pub fn equals(self, other: Leaf<'_, J>) -> bool {
        match (self, other) {
            (Leaf::Json(a), Leaf::Json(b)) => a.json_eq(b),
            (Leaf::Str(a), Leaf::Str(b)) => a == b,
            (Leaf::Str(a), Leaf::Json(b)) | (Leaf::Json(b), Leaf::Str(a)) => b.str_eq(a),
        }
    }

    /// JSON equality with a constant.
    #[inline]
    pub fn equals_value(self, value: &serde_json::Value) -> bool {
        match self {
            Leaf::Json(v) => v.equals_value(value),
            Leaf::Str(s) => value
                .as_str()
                .is_some_and(|text| bytes_eq(text.as_bytes(), s.as_bytes())),
        }
    }

    /// JSON equality with any of `values` (the literals of an `in [...]`).
    pub fn equals_any(self, values: &[serde_json::Value]) -> bool {
        match self {
            Leaf::Json(v) => v.equals_any(values),
            // Compared in line: a `memcmp` call per literal cost more than these short strings.
            Leaf::Str(s) => values.iter().any(|c| {
                c.as_str()
                    .is_some_and(|text| bytes_eq(text.as_bytes(), s.as_bytes()))
            }),
        }
    }

    /// The value as JSON text for messages, cut to 64 characters.
    pub fn describe(self) -> String {
        match self {
            Leaf::Json(v) => v.describe(64),
            Leaf::Str(s) => crate::value::string_for_message(s, 64),
        }
    }
}

/// Why a path walk stopped without every value holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The predicate rejected the value at the trail.
    Rejected,
    /// The path is absent at the trail (and the constraint is not optional).
    Missing,
    /// A step met a value of the wrong type at the trail.
    WrongShape(&'static str),
    /// A query parameter cannot be read as one value, for the reason held.
    Ambiguous(QueryAmbiguity),
    /// A `[*]` met an array longer than the scan limit.
    TooLong(usize),
    /// An `actorBinding`'s agent identity is `null`: there is no identity to bind.
    NullIdentity,
    /// A member on the path is absent but the object has a case variant of its name
    /// ([`crate::vm::CaseVariant`]): the request is refused.
    CaseVariant,
}

/// Why a query parameter has no one value a test can decide on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryAmbiguity {
    /// [`QueryValue::Repeated`]: given more than once, under equivalent names.
    Repeated,
    /// [`QueryValue::Variant`]: given only under another spelling of the name.
    Variant,
    /// [`QueryValue::DoubleEncoded`]: its value decodes to another escape.
    DoubleEncoded,
}

impl QueryAmbiguity {
    /// The one-line reason for deny messages and traces.
    pub fn describe(self) -> &'static str {
        match self {
            QueryAmbiguity::Repeated => {
                "the query parameter is given more than once (names compared ignoring case and a `[…]` suffix)"
            }
            QueryAmbiguity::Variant => {
                "the query parameter is given only under another spelling of its name (case or a `[…]` suffix), which a server may read as this one"
            }
            QueryAmbiguity::DoubleEncoded => {
                "the query parameter's value percent-decodes to another escape (double encoding)"
            }
        }
    }
}

/// Records the concrete path of the value being visited; keys are borrowed from the compiled
/// path (`'s`), never from the request.
pub trait Trail<'s> {
    /// Enters a segment.
    fn push(&mut self, segment: ConcreteStep<'s>);
    /// Leaves it.
    fn pop(&mut self);
}

/// A concrete step: a key or an index (never a wildcard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcreteStep<'a> {
    /// An object member.
    Key(&'a str),
    /// An array element.
    Index(usize),
}

/// The fast path: records nothing.
#[derive(Debug, Default)]
pub struct NoTrail;

impl Trail<'_> for NoTrail {
    #[inline]
    fn push(&mut self, _segment: ConcreteStep<'_>) {}
    #[inline]
    fn pop(&mut self) {}
}

/// Records the steps taken, for deny reasons (borrowed: no allocation per step once the
/// vector has grown).
#[derive(Debug, Default)]
pub struct SegmentTrail<'s> {
    /// The steps so far.
    pub steps: Vec<ConcreteStep<'s>>,
}

impl<'s> Trail<'s> for SegmentTrail<'s> {
    fn push(&mut self, segment: ConcreteStep<'s>) {
        self.steps.push(segment);
    }
    fn pop(&mut self) {
        self.steps.pop();
    }
}

impl ConcreteStep<'_> {
    /// Appends the step as [`fmt::Display`] prints it.
    pub fn push_to(&self, out: &mut String) {
        // Writing into a `String` cannot fail.
        let _ = self.write_to(out);
    }

    /// As the same step of a [`crate::value::Path`] prints: `.key`, `["odd key"]` or `[3]`.
    fn write_to(&self, out: &mut impl fmt::Write) -> fmt::Result {
        match *self {
            ConcreteStep::Key(key) => crate::value::write_key_segment(out, key),
            ConcreteStep::Index(index) => crate::value::write_index_segment(out, index),
        }
    }
}

impl fmt::Display for ConcreteStep<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

/// Visits every value `path` reaches, stopping at the first the predicate rejects.
///
/// Returns `Ok(())` when every value holds (or the path is absent and `optional`), otherwise
/// why it stopped; on a stop, `trail` holds the concrete path of the offending value.
pub fn visit<'r, 's, J: Json<'r>, T: Trail<'s>>(
    input: &Input<'_, J>,
    path: &'s CompiledPath,
    optional: bool,
    trail: &mut T,
    predicate: &mut impl FnMut(Leaf<'_, J>) -> bool,
) -> Result<(), Stop> {
    let string = |value: Option<&str>, predicate: &mut dyn FnMut(Leaf<'_, J>) -> bool| match value {
        Some(s) if predicate(Leaf::Str(s)) => Ok(()),
        Some(_) => Err(Stop::Rejected),
        None if optional => Ok(()),
        None => Err(Stop::Missing),
    };
    match &path.access {
        PathAccess::Json { root, segments } => {
            let document = input.document(*root);
            // An absent root reads as `null` (SPEC §4), so a path below it is absent, not a
            // wrong shape (regression: `optional` constraints failed on a request without a
            // payload).
            if document.is_null() && !segments.is_empty() {
                return if optional { Ok(()) } else { Err(Stop::Missing) };
            }
            walk(
                document,
                segments,
                Walk {
                    optional,
                    max_array_scan: input.max_array_scan,
                    variants: input.refuse_case_variants,
                },
                trail,
                predicate,
            )
        }
        PathAccess::Binding { slot } => string(input.bindings.get(usize::from(*slot)), predicate),
        PathAccess::Query { name } => match input.resource.query(name) {
            QueryValue::Absent => string(None, predicate),
            QueryValue::One(value) => string(Some(&value), predicate),
            QueryValue::Repeated => Err(Stop::Ambiguous(QueryAmbiguity::Repeated)),
            QueryValue::Variant(_) => Err(Stop::Ambiguous(QueryAmbiguity::Variant)),
            QueryValue::DoubleEncoded => Err(Stop::Ambiguous(QueryAmbiguity::DoubleEncoded)),
        },
        PathAccess::RequestSkill => string(Some(input.skill), predicate),
        PathAccess::RequestOperation => string(Some(input.operation), predicate),
        PathAccess::RequestTransaction => string(input.transaction, predicate),
    }
}

/// Where [`follow`] stopped.
enum Reached<'s, J> {
    /// The value reached, with the segments left: none, or a `[*]` and what follows it.
    Value(J, &'s [Segment]),
    /// A member or element on the way is absent, and the constraint is `optional`.
    Absent,
}

/// How a path is walked: what the constraint and the limits say.
#[derive(Debug, Clone, Copy)]
struct Walk {
    /// An absent member or element holds (the constraint is `optional`).
    optional: bool,
    /// The longest array a `[*]` may scan.
    max_array_scan: usize,
    /// An absent member whose name has a case variant in its object stops the walk
    /// ([`Stop::CaseVariant`]).
    variants: bool,
}

/// Follows the key and index segments at the start of `segments` from `value`, pushing each on
/// `trail` and counting them in `pushed`; stops at the end or at a `[*]`.
#[inline(always)]
fn follow<'r, 's, J: Json<'r>, T: Trail<'s>>(
    mut value: J,
    mut segments: &'s [Segment],
    how: Walk,
    trail: &mut T,
    pushed: &mut usize,
) -> Result<Reached<'s, J>, Stop> {
    let optional = how.optional;
    loop {
        let child = match (segments.split_first(), value.kind()) {
            (None | Some((Segment::Wildcard, _)), _) => return Ok(Reached::Value(value, segments)),
            (Some((Segment::Key(key), _)), JsonKind::Object) => {
                trail.push(ConcreteStep::Key(key));
                // Only a miss asks for case variants: a member found costs nothing more.
                match value.member(key, how.variants) {
                    Ok(child) => child,
                    Err(super::json::CaseVariant) => return Err(Stop::CaseVariant),
                }
            }
            (Some((Segment::Index(index), _)), JsonKind::Array) => {
                let position = usize::try_from(*index).unwrap_or(usize::MAX);
                trail.push(ConcreteStep::Index(position));
                value.index(position)
            }
            (Some((Segment::Key(_), _)), other) => {
                return Err(Stop::WrongShape(expected_shape("an object", other)));
            }
            (Some((Segment::Index(_), _)), other) => {
                return Err(Stop::WrongShape(expected_shape("an array", other)));
            }
        };
        *pushed += 1;
        match child {
            Some(child) => value = child,
            None if optional => return Ok(Reached::Absent),
            None => return Err(Stop::Missing),
        }
        segments = segments.get(1..).unwrap_or_default();
    }
}

/// Walks `segments` down from `value` and hands every value reached to `predicate`. Keys and
/// indexes are followed in a loop; a `[*]` visits each element, recursing only when another
/// `[*]` follows (recursive calls' frames otherwise cost ~5 % of a decision's instructions). On
/// success every segment pushed on `trail` is popped again; on a stop the trail is left at the
/// offending value.
fn walk<'r, 's, J: Json<'r>, T: Trail<'s>>(
    value: J,
    segments: &'s [Segment],
    how: Walk,
    trail: &mut T,
    predicate: &mut impl FnMut(Leaf<'_, J>) -> bool,
) -> Result<(), Stop> {
    let mut pushed = 0usize;
    match follow(value, segments, how, trail, &mut pushed)? {
        Reached::Absent => {}
        Reached::Value(value, []) => {
            if !predicate(Leaf::Json(value)) {
                return Err(Stop::Rejected);
            }
        }
        // `follow` stops only at the end or at a `[*]`.
        Reached::Value(value, [_wildcard, rest @ ..]) => {
            if value.kind() != JsonKind::Array {
                return Err(Stop::WrongShape(expected_shape("an array", value.kind())));
            }
            let length = value.len();
            if length > how.max_array_scan {
                return Err(Stop::TooLong(length));
            }
            let nested = rest.iter().any(|s| matches!(s, Segment::Wildcard));
            for (position, child) in value.elements().enumerate() {
                trail.push(ConcreteStep::Index(position));
                if nested {
                    walk(child, rest, how, trail, predicate)?;
                } else {
                    let mut inner = 0usize;
                    if let Reached::Value(leaf, _) = follow(child, rest, how, trail, &mut inner)?
                        && !predicate(Leaf::Json(leaf))
                    {
                        return Err(Stop::Rejected);
                    }
                    for _ in 0..inner {
                        trail.pop();
                    }
                }
                trail.pop();
            }
        }
    }
    for _ in 0..pushed {
        trail.pop();
    }
    Ok(())
}

fn expected_shape(expected: &'static str, found: JsonKind) -> &'static str {
    match (expected, found) {
        ("an object", JsonKind::Null) => "expected an object, found null",
        ("an object", JsonKind::Array) => "expected an object, found an array",
        ("an object", JsonKind::String) => "expected an object, found a string",
        ("an object", JsonKind::Number) => "expected an object, found a number",
        ("an object", JsonKind::Bool) => "expected an object, found a boolean",
        (_, JsonKind::Null) => "expected an array, found null",
        (_, JsonKind::Object) => "expected an array, found an object",
        (_, JsonKind::String) => "expected an array, found a string",
        (_, JsonKind::Number) => "expected an array, found a number",
        (_, JsonKind::Bool) => "expected an array, found a boolean",
        _ => "unexpected value type",
    }
}

/// The value a path into a document reaches when it is made of keys only and every step finds
/// an object that has the member; `None` for anything else (another kind of path, an index or a
/// `[*]`, a missing member, a step into a value that is not an object, and so a `null` root
/// with steps below it). For such a path, [`visit`] and [`with_single`] reach exactly this one
/// value, so a test may decide on it directly and leave every other case to them.
#[inline]
pub fn plain_member<'r, J: Json<'r>>(input: &Input<'_, J>, path: &CompiledPath) -> Option<J> {
    let PathAccess::Json { root, segments } = &path.access else {
        return None;
    };
    // Decided on the path alone first, so a path with a `[*]` costs no lookups here.
    if !path.keys_only() {
        return None;
    }
    follow_keys(input.document(*root), segments)
}

/// The value `segments` lead to from `value` when they are all keys and each step finds an
/// object with the member; `None` at the first that does not, or at any other kind of segment.
#[inline]
pub fn follow_keys<'r, J: Json<'r>>(mut value: J, segments: &[Segment]) -> Option<J> {
    for segment in segments {
        let Segment::Key(key) = segment else {
            return None;
        };
        // `get` finds nothing in a value that is not an object.
        value = value.get(key)?;
    }
    Some(value)
}

/// Reads a path that has no `[*]` and names exactly one value, and hands the leaf (or why it
/// could not be read) to `f`.
pub fn with_single<'r, J: Json<'r>, R>(
    input: &Input<'_, J>,
    path: &CompiledPath,
    f: impl FnOnce(Result<Leaf<'_, J>, Stop>) -> R,
) -> R {
    match &path.access {
        PathAccess::Json { root, segments } => {
            let value = input.document(*root);
            // As in `visit`: below a `null` (absent) root, a path is absent.
            if value.is_null() && !segments.is_empty() {
                return f(Err(Stop::Missing));
            }
            let how = Walk {
                optional: false,
                max_array_scan: input.max_array_scan,
                variants: input.refuse_case_variants,
            };
            match follow(value, segments, how, &mut NoTrail, &mut 0) {
                Ok(Reached::Value(leaf, [])) => f(Ok(Leaf::Json(leaf))),
                // Paths read here have no `[*]` (the compiler's choice); one would be a shape
                // error.
                Ok(Reached::Value(value, _)) => f(Err(Stop::WrongShape(expected_shape(
                    "an array",
                    value.kind(),
                )))),
                // Not optional: absence is `Missing`, never `Absent`.
                Ok(Reached::Absent) => f(Err(Stop::Missing)),
                Err(stop) => f(Err(stop)),
            }
        }
        PathAccess::Binding { slot } => match input.bindings.get(usize::from(*slot)) {
            Some(s) => f(Ok(Leaf::Str(s))),
            None => f(Err(Stop::Missing)),
        },
        PathAccess::Query { name } => match input.resource.query(name) {
            QueryValue::One(value) => f(Ok(Leaf::Str(&value))),
            QueryValue::Absent => f(Err(Stop::Missing)),
            QueryValue::Repeated => f(Err(Stop::Ambiguous(QueryAmbiguity::Repeated))),
            QueryValue::Variant(_) => f(Err(Stop::Ambiguous(QueryAmbiguity::Variant))),
            QueryValue::DoubleEncoded => f(Err(Stop::Ambiguous(QueryAmbiguity::DoubleEncoded))),
        },
        PathAccess::RequestSkill => f(Ok(Leaf::Str(input.skill))),
        PathAccess::RequestOperation => f(Ok(Leaf::Str(input.operation))),
        PathAccess::RequestTransaction => match input.transaction {
            Some(tx) => f(Ok(Leaf::Str(tx))),
            None => f(Err(Stop::Missing)),
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{SegmentTrail, Stop, walk};
    use crate::value::Segment;

    fn key(k: &str) -> Segment {
        Segment::Key(k.to_owned())
    }

    /// Walks `segments` over `value` with a trail, rejecting strings equal to `bad`; returns the
    /// outcome, the trail left behind and the strings visited.
    fn run(
        value: &Value,
        segments: &[Segment],
        optional: bool,
        bad: &str,
    ) -> (Result<(), Stop>, Vec<Segment>, Vec<String>) {
        let mut trail = SegmentTrail::default();
        let mut seen = Vec::new();
        let how = super::Walk {
            optional,
            max_array_scan: 100,
            variants: true,
        };
        let result = walk(value, segments, how, &mut trail, &mut |leaf| {
            leaf.with_str(|s| {
                seen.push(s.unwrap_or("<not a string>").to_owned());
                s != Some(bad)
            })
        });
        let trail = trail
            .steps
            .iter()
            .map(|step| match *step {
                super::ConcreteStep::Key(k) => key(k),
                super::ConcreteStep::Index(i) => Segment::Index(i as u64),
            })
            .collect();
        (result, trail, seen)
    }

    #[test]
    fn a_walk_that_holds_leaves_the_trail_empty() {
        let doc = json!({"a": [{"b": {"c": "x"}}, {"b": {"c": "y"}}], "k": [["p", "q"]]});
        let path = [key("a"), Segment::Wildcard, key("b"), key("c")];
        let (result, trail, seen) = run(&doc, &path, false, "none");
        assert_eq!(result, Ok(()));
        assert!(trail.is_empty(), "{trail:?}");
        assert_eq!(seen, ["x", "y"]);
        let path = [key("k"), Segment::Index(0), Segment::Index(1)];
        let (result, trail, seen) = run(&doc, &path, false, "none");
        assert_eq!(
            (result, trail.is_empty(), seen),
            (Ok(()), true, vec!["q".to_owned()])
        );
    }

    #[test]
    fn a_rejected_value_leaves_its_concrete_path_on_the_trail() {
        let doc = json!({"a": [{"b": {"c": "x"}}, {"b": {"c": "bad"}}, {"b": {"c": "z"}}]});
        let path = [key("a"), Segment::Wildcard, key("b"), key("c")];
        let (result, trail, seen) = run(&doc, &path, false, "bad");
        assert_eq!(result, Err(Stop::Rejected));
        assert_eq!(trail, [key("a"), Segment::Index(1), key("b"), key("c")]);
        assert_eq!(seen, ["x", "bad"], "the walk stops at the first rejection");
    }

    #[test]
    fn a_missing_member_is_absent_when_optional_and_named_otherwise() {
        let doc = json!({"a": [{"b": {"c": "x"}}, {"b": {}}, {"b": {"c": "z"}}]});
        let path = [key("a"), Segment::Wildcard, key("b"), key("c")];
        let (result, trail, seen) = run(&doc, &path, true, "none");
        assert_eq!(result, Ok(()));
        assert!(trail.is_empty(), "{trail:?}");
        assert_eq!(
            seen,
            ["x", "z"],
            "the elements after an absent one are still visited"
        );
        let (result, trail, _) = run(&doc, &path, false, "none");
        assert_eq!(result, Err(Stop::Missing));
        assert_eq!(trail, [key("a"), Segment::Index(1), key("b"), key("c")]);
        let path = [key("a"), Segment::Index(7), key("b")];
        let (result, trail, _) = run(&doc, &path, false, "none");
        assert_eq!(result, Err(Stop::Missing));
        assert_eq!(trail, [key("a"), Segment::Index(7)]);
        assert_eq!(run(&doc, &path, true, "none").1, Vec::<Segment>::new());
    }

    #[test]
    fn nested_wildcards_visit_every_element_and_name_the_rejected_one() {
        let doc = json!({"m": [[{"b": "x"}], [], [{"b": "y"}, {"b": "bad"}, {"b": "z"}]]});
        let path = [key("m"), Segment::Wildcard, Segment::Wildcard, key("b")];
        let (result, trail, seen) = run(&doc, &path, false, "none");
        assert_eq!((result, trail.is_empty()), (Ok(()), true));
        assert_eq!(seen, ["x", "y", "bad", "z"]);
        let (result, trail, seen) = run(&doc, &path, false, "bad");
        assert_eq!(result, Err(Stop::Rejected));
        assert_eq!(
            trail,
            [key("m"), Segment::Index(2), Segment::Index(1), key("b")]
        );
        assert_eq!(seen, ["x", "y", "bad"]);
        // A wildcard over an object is the wrong shape, wherever it is.
        let doc = json!({"m": [{"b": "x"}]});
        let (result, trail, _) = run(&doc, &path, true, "none");
        assert_eq!(
            result,
            Err(Stop::WrongShape("expected an array, found an object"))
        );
        assert_eq!(trail, [key("m"), Segment::Index(0)]);
    }

    #[test]
    fn a_step_into_the_wrong_type_stops_even_when_optional() {
        let doc = json!({"a": [{"b": "text"}]});
        let path = [key("a"), Segment::Wildcard, key("b"), key("c")];
        let (result, trail, _) = run(&doc, &path, true, "none");
        assert_eq!(
            result,
            Err(Stop::WrongShape("expected an object, found a string"))
        );
        assert_eq!(trail, [key("a"), Segment::Index(0), key("b")]);
    }
}
