//! Requests, as they come off the wire (SPEC §4), and strict parsing from bytes.
//!
//! [`Request::from_slice`] is the way in for untrusted bytes: it rejects duplicate object keys
//! anywhere (a payload with two `amount`s must not be read one way by capgate and another by the
//! API behind it), unknown request fields, nesting deeper than the limit and oversized input;
//! and, unless `Limits::refuse_case_variant_members` is off, objects of the payload, agent or
//! context with two member names equal under simple case folding (`amount` and `Amount`, which
//! an API that binds members case-insensitively reads as one).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use crate::limits::{LimitError, Limits};

/// One outbound call to decide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The calling skill's name.
    pub skill: String,
    /// If present, must equal the loaded manifest's `hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_hash: Option<String>,
    /// The operation (`POST`, `SELECT`, a scope name, `call`, ...).
    pub operation: String,
    /// The resource (`https://host/path?query`, `db:crm/acme/records`, ...).
    pub resource: String,
    /// The call's JSON body; `null` when absent.
    #[serde(default, deserialize_with = "strict_value")]
    pub payload: Value,
    /// The calling agent's identity; `null` when absent.
    #[serde(default, deserialize_with = "strict_value")]
    pub agent: Value,
    /// Caller-supplied facts; `null` when absent.
    #[serde(default, deserialize_with = "strict_value")]
    pub context: Value,
    /// The transaction the call belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<String>,
    /// The grant token the call presents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// The agent's autonomy score, 0..=100; absent means 0.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "strict_optional_value"
    )]
    pub autonomy: Option<Value>,
    /// The call's time; honoured only by an engine with a simulated clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

/// Why bytes are not a valid request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum RequestError {
    /// The input is larger than the limit. The message names the limit, not the size: a
    /// reader that stops one byte past the limit (`capgate check`) knows no more than that.
    #[error("request is larger than the {limit}-byte limit (`Limits::max_request_bytes`)")]
    TooLarge {
        /// Its size, or as much of it as was read (at least `limit + 1`).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// `payload`, `agent` or `context` nests deeper than the limit.
    #[error("`{field}` is nested deeper than the limit of {limit}")]
    TooDeep {
        /// Which part of the request.
        field: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The JSON is malformed, has duplicate keys or unknown fields, or lacks a required field.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// An object of `payload`, `agent` or `context` has two members whose names are equal under
    /// Unicode simple case folding (`Limits::refuse_case_variant_members`).
    #[error(
        "`{field}` has members `{first}` and `{second}`, whose names differ only by case: \
         refused, as an upstream that binds members case-insensitively may read either"
    )]
    CaseVariantMembers {
        /// Which part of the request.
        field: &'static str,
        /// One member's name, cut to 64 characters with its control characters escaped.
        first: String,
        /// The other's.
        second: String,
    },
    /// The limits it was to be read under set a field above its fixed bound.
    #[error(transparent)]
    Limits(#[from] LimitError),
}

/// A parser's refusal as a [`RequestError::Malformed`]: its message quotes request text (an
/// unknown member's name, say), so it is cut to [`MALFORMED_MESSAGE_CHARS`] characters with its
/// control characters escaped (regression: a 10,000-character member name went whole into the
/// reason and the audit record, and raw escape sequences onto `capgate check`'s stderr).
fn malformed(error: &impl std::fmt::Display) -> RequestError {
    RequestError::Malformed(crate::value::truncate_str(
        &error.to_string(),
        MALFORMED_MESSAGE_CHARS,
    ))
}

/// The longest message of a [`RequestError::Malformed`], in characters.
const MALFORMED_MESSAGE_CHARS: usize = 256;

impl RequestError {
    /// True for a well-formed request that breaks a limit (the engine denies it with reason
    /// `input`), false for input that is not a request at all.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            RequestError::TooLarge { .. }
                | RequestError::TooDeep { .. }
                | RequestError::CaseVariantMembers { .. }
        )
    }
}

/// Why a request that is not a JSON object is refused.
const NOT_AN_OBJECT: &str = "a request must be a JSON object";

/// U+FEFF in UTF-8, which some editors write at the start of a file.
const BYTE_ORDER_MARK: &[u8] = "\u{feff}".as_bytes();

/// Why a JSON text that starts with a byte-order mark is refused (RFC 8259 §8.1: JSON text
/// must not begin with one).
const STARTS_WITH_BOM: &str = "the JSON text starts with a byte-order mark (U+FEFF), which JSON \
                               does not allow; save it as UTF-8 without a BOM";

impl Request {
    /// A request with the required fields and everything else absent.
    pub fn new(
        skill: impl Into<String>,
        operation: impl Into<String>,
        resource: impl Into<String>,
    ) -> Self {
        Request {
            skill: skill.into(),
            skill_hash: None,
            operation: operation.into(),
            resource: resource.into(),
            payload: Value::Null,
            agent: Value::Null,
            context: Value::Null,
            transaction: None,
            grant: None,
            autonomy: None,
            time: None,
        }
    }

    /// Parses a request from untrusted bytes, enforcing `limits` (size, nesting depth) and
    /// rejecting duplicate keys and unknown fields.
    pub fn from_slice(bytes: &[u8], limits: &Limits) -> Result<Request, RequestError> {
        limits.check()?;
        if bytes.len() > limits.max_request_bytes {
            return Err(RequestError::TooLarge {
                size: bytes.len(),
                limit: limits.max_request_bytes,
            });
        }
        // A request is a JSON object. serde's derived `Deserialize` also reads a struct from an
        // array, by position (`["s",null,"GET","tool:x"]`), where `deny_unknown_fields` does not
        // apply: refuse that form before it is read (regression: it was decided).
        let first = bytes
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        let rest = first.and_then(|at| bytes.get(at..)).unwrap_or_default();
        if rest.first() != Some(&b'{') {
            // A byte-order mark is invisible in most editors: name it, not "not an object".
            let message = if rest.starts_with(BYTE_ORDER_MARK) {
                STARTS_WITH_BOM
            } else {
                NOT_AN_OBJECT
            };
            return Err(RequestError::Malformed(message.to_owned()));
        }
        // One pass from bytes to `Request`: serde_json's fixed recursion limit (which would count
        // the request object around the payload) is lifted, and every field that can nest
        // (payload, agent, context, autonomy) is read by `StrictValue` with a depth budget, so the
        // parser's recursion stays bounded whatever the input.
        let mut deserializer = serde_json::Deserializer::from_slice(bytes);
        deserializer.disable_recursion_limit();
        let parsed = with_depth_budget(limits.parse_depth(), || {
            Request::deserialize(&mut deserializer)
                .and_then(|request| deserializer.end().map(|()| request))
        });
        let request = parsed.map_err(|e| malformed(&e))?;
        request.check_depth(limits)?;
        request.check_member_names(limits)?;
        Ok(request)
    }

    /// Parses a request from an already-parsed JSON value (e.g. a session line), with the same
    /// rules as [`Request::from_slice`] except duplicate keys, which the caller's parser must
    /// have rejected.
    ///
    /// The size limit applies to the value written as compact JSON (regression: a session,
    /// a `.captest` case or the REPL decided a 2 MiB request that `check_slice` and
    /// `capgate check` refuse, so policy tests certified decisions no gateway would make).
    pub fn from_value(value: Value, limits: &Limits) -> Result<Request, RequestError> {
        Request::from_value_measured(value, None, limits)
    }

    /// [`Request::from_value`], with the size of the text the value was read from when the
    /// caller has it (`Some(bytes)`: a session line's `call` member), which the size limit then
    /// counts instead of the value written back as compact JSON.
    pub(crate) fn from_value_measured(
        value: Value,
        text_size: Option<usize>,
        limits: &Limits,
    ) -> Result<Request, RequestError> {
        limits.check()?;
        // As in `from_slice`: never read a request from an array by position.
        if !value.is_object() {
            return Err(RequestError::Malformed(NOT_AN_OBJECT.to_owned()));
        }
        let over = match text_size {
            Some(size) => (size > limits.max_request_bytes).then_some(size),
            None => compact_size_over(&value, limits.max_request_bytes),
        };
        if let Some(size) = over {
            return Err(RequestError::TooLarge {
                size,
                limit: limits.max_request_bytes,
            });
        }
        let request: Request = serde_json::from_value(value).map_err(|e| malformed(&e))?;
        request.check_depth(limits)?;
        request.check_member_names(limits)?;
        Ok(request)
    }

    fn check_depth(&self, limits: &Limits) -> Result<(), RequestError> {
        for (name, value) in [
            ("payload", &self.payload),
            ("agent", &self.agent),
            ("context", &self.context),
        ] {
            if depth_exceeds(value, limits.max_payload_depth) {
                return Err(RequestError::TooDeep {
                    field: name,
                    limit: limits.max_payload_depth,
                });
            }
        }
        Ok(())
    }
}

impl Request {
    /// Refuses an object of the payload, agent or context with two member names equal under
    /// simple case folding, unless `limits` allow them. Run after [`Request::check_depth`], so the
    /// walk is over values of bounded depth.
    fn check_member_names(&self, limits: &Limits) -> Result<(), RequestError> {
        if !limits.refuse_case_variant_members {
            return Ok(());
        }
        for (field, value) in [
            ("payload", &self.payload),
            ("agent", &self.agent),
            ("context", &self.context),
        ] {
            if let Some((first, second)) = case_variant_members(value) {
                return Err(RequestError::CaseVariantMembers {
                    field,
                    first: crate::value::truncate_str(first, 64),
                    second: crate::value::truncate_str(second, 64),
                });
            }
        }
        Ok(())
    }
}

/// Objects with at most this many members are searched for case variants pair by pair; larger
/// ones by sorting their names' foldings.
const PAIRWISE_MEMBERS: usize = 16;

/// The first two member names of an object in `value` (at any depth) that are equal under
/// simple case folding, if any. Iterative, so a deep value cannot overflow the stack here.
pub(crate) fn case_variant_members(value: &Value) -> Option<(&str, &str)> {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                if let Some(pair) = case_variant_pair(map) {
                    return Some(pair);
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    None
}

/// Two member names of `map` equal under simple case folding, if any (names are distinct).
fn case_variant_pair(map: &Map<String, Value>) -> Option<(&str, &str)> {
    if map.len() <= PAIRWISE_MEMBERS {
        for (i, a) in map.keys().enumerate() {
            for b in map.keys().skip(i + 1) {
                if crate::fold::fold_eq(a, b) {
                    return Some((a, b));
                }
            }
        }
        return None;
    }
    let mut folded: Vec<(String, &str)> = map
        .keys()
        .map(|name| (crate::fold::folded(name).collect(), name.as_str()))
        .collect();
    folded.sort_unstable();
    folded.windows(2).find_map(|pair| match pair {
        [(x, a), (y, b)] if x == y => Some((*a, *b)),
        _ => None,
    })
}

/// True when `value` nests arrays/objects more than `limit` levels deep. Iterative, so a deep
/// value cannot overflow the stack here.
pub fn depth_exceeds(value: &Value, limit: usize) -> bool {
    // An explicit stack of (value, depth of its parent): no recursion, and no allocation per
    // node beyond the stack's amortised growth.
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        let depth = depth + 1;
        match value {
            Value::Array(_) | Value::Object(_) if depth > limit => return true,
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, depth))),
            Value::Object(map) => stack.extend(map.values().map(|child| (child, depth))),
            _ => {}
        }
    }
    false
}

/// Parses JSON into a `Value`, rejecting duplicate object keys at any depth and nesting deeper
/// than the default payload limit plus room for the objects around a payload.
pub fn parse_strict_json(text: &str) -> Result<Value, String> {
    parse_json_with_depth(text, Limits::DEFAULT.parse_depth())
}

/// Parses JSON with duplicate keys rejected and at most `max_depth` nested arrays/objects. The
/// parser's own recursion is bounded by `max_depth`, so no input can overflow the stack.
pub fn parse_json_with_depth(text: &str, max_depth: usize) -> Result<Value, String> {
    if text.as_bytes().starts_with(BYTE_ORDER_MARK) {
        return Err(STARTS_WITH_BOM.to_owned());
    }
    // From `&str`: serde_json's `StrRead` does not check the UTF-8 of each string again.
    parse_strict(serde_json::Deserializer::from_str(text), max_depth)
}

/// [`parse_json_with_depth`] for bytes that may not be UTF-8: invalid UTF-8 inside a string is
/// refused (outside strings any non-ASCII byte is already a syntax error).
pub fn parse_json_slice_with_depth(bytes: &[u8], max_depth: usize) -> Result<Value, String> {
    if bytes.starts_with(BYTE_ORDER_MARK) {
        return Err(STARTS_WITH_BOM.to_owned());
    }
    parse_strict(serde_json::Deserializer::from_slice(bytes), max_depth)
}

/// One JSON value read by `StrictValue` (duplicate keys refused, at most `max_depth` nested
/// arrays/objects) and nothing after it.
fn parse_strict<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
    max_depth: usize,
) -> Result<Value, String> {
    // Our seed counts depth itself (below), so serde_json's fixed limit of 128 is lifted.
    deserializer.disable_recursion_limit();
    let value = StrictValue {
        depth_left: max_depth,
    }
    .deserialize(&mut deserializer)
    .map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// The size of `value` as compact JSON when it is more than `limit` bytes; `None` within the
/// limit. Counts without building the text.
fn compact_size_over(value: &Value, limit: usize) -> Option<usize> {
    /// Counts the bytes written.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a counter cannot fail; if it somehow did, the value is refused.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => (count.0 > limit).then_some(count.0),
        Err(_) => Some(usize::MAX),
    }
}

thread_local! {
    /// The nesting budget of the request being parsed on this thread (see `from_slice`).
    static DEPTH_BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Runs `parse` with `budget` as the nesting budget of the request's JSON fields.
fn with_depth_budget<T>(budget: usize, parse: impl FnOnce() -> T) -> T {
    let previous = DEPTH_BUDGET.with(|b| b.replace(budget));
    let result = parse();
    DEPTH_BUDGET.with(|b| b.set(previous));
    result
}

fn strict_value<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    // From bytes, the budget bounds the parser's recursion; from an in-memory `Value` (already
    // bounded by whoever built it) it is unlimited. `Request::check_depth` applies either way.
    StrictValue {
        depth_left: DEPTH_BUDGET.with(std::cell::Cell::get),
    }
    .deserialize(deserializer)
}

fn strict_optional_value<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    // `null` reads as absent, like serde's own `Option`.
    strict_value(deserializer).map(|value| match value {
        Value::Null => None,
        other => Some(other),
    })
}

/// A `Value` seed that rejects duplicate keys and nesting deeper than `depth_left`.
#[derive(Clone, Copy)]
struct StrictValue {
    depth_left: usize,
}

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor {
            depth_left: self.depth_left,
        })
    }
}

struct StrictVisitor {
    depth_left: usize,
}

impl StrictVisitor {
    fn inner<E: de::Error>(&self) -> Result<StrictValue, E> {
        self.depth_left
            .checked_sub(1)
            .map(|depth_left| StrictValue { depth_left })
            .ok_or_else(|| E::custom("JSON nested too deeply"))
    }
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            // The map itself answers whether the key was seen: no second set of keys.
            if map.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    crate::value::truncate_str(&key, 64)
                )));
            }
            let value = access.next_value_seed(inner)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Request, RequestError> {
        Request::from_slice(text.as_bytes(), &Limits::DEFAULT)
    }

    #[test]
    fn duplicate_payload_keys_are_rejected_at_any_depth() {
        let err = parse(
            r#"{"skill":"s","operation":"GET","resource":"tool:x","payload":{"a":{"b":1,"b":2}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("duplicate key `b`"), "{err}");
    }

    #[test]
    fn duplicate_request_fields_and_unknown_fields_are_rejected() {
        assert!(
            parse(r#"{"skill":"s","skill":"t","operation":"GET","resource":"tool:x"}"#).is_err()
        );
        assert!(parse(r#"{"skill":"s","operation":"GET","resource":"tool:x","extra":1}"#).is_err());
    }

    #[test]
    fn case_variant_members_are_refused_in_objects_of_any_size_unless_allowed() {
        let request = |payload: &str| {
            format!(r#"{{"skill":"s","operation":"GET","resource":"tool:x","payload":{payload}}}"#)
        };
        let many: Vec<String> = (0..40).map(|i| format!(r#""m{i}":{i}"#)).collect();
        let large = format!(r#"{{{},"Amount":1,"amount":2}}"#, many.join(","));
        for payload in [
            r#"{"amount":1,"Amount":2}"#,
            r#"{"a":[{"b":{"kind":1,"Kind":2}}]}"#,
            "{\"sum\":1,\"\u{17F}um\":2}",
            large.as_str(),
        ] {
            let text = request(payload);
            let error = parse(&text).unwrap_err();
            assert!(
                matches!(
                    error,
                    RequestError::CaseVariantMembers {
                        field: "payload",
                        ..
                    }
                ),
                "{error}"
            );
            assert!(error.is_limit());
            assert!(error.to_string().contains("differ only by case"), "{error}");
            let value: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(
                Request::from_value(value, &Limits::DEFAULT).unwrap_err(),
                error
            );
            let allowed = Limits {
                refuse_case_variant_members: false,
                ..Limits::DEFAULT
            };
            assert!(Request::from_slice(text.as_bytes(), &allowed).is_ok());
        }
        // Names that differ other than by simple case folding, or in different objects.
        for payload in [
            r#"{"ss":1,"ß":2,"i":3,"İ":4}"#,
            r#"{"a":{"x":1},"b":[{"X":2}]}"#,
        ] {
            assert!(parse(&request(payload)).is_ok(), "{payload}");
        }
        let agent =
            r#"{"skill":"s","operation":"GET","resource":"tool:x","agent":{"id":1,"ID":2}}"#;
        assert!(matches!(
            parse(agent),
            Err(RequestError::CaseVariantMembers { field: "agent", .. })
        ));
    }

    #[test]
    fn absent_payload_is_null() {
        let request = parse(r#"{"skill":"s","operation":"GET","resource":"tool:x"}"#).unwrap();
        assert_eq!(request.payload, Value::Null);
    }

    fn nested(depth: usize) -> String {
        let payload = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        format!(r#"{{"skill":"s","operation":"GET","resource":"tool:x","payload":{payload}}}"#)
    }

    #[test]
    fn payloads_at_the_depth_limit_parse_and_one_deeper_are_too_deep() {
        assert!(parse(&nested(128)).is_ok());
        assert!(matches!(
            parse(&nested(129)),
            Err(RequestError::TooDeep {
                field: "payload",
                limit: 128
            })
        ));
    }

    #[test]
    fn deep_nesting_in_any_field_is_refused_without_overflowing_the_stack() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        for field in [
            "payload", "autonomy", "agent", "context", "unknown", "skill",
        ] {
            let text = format!(
                r#"{{"skill":"s","operation":"GET","resource":"tool:x","{field}":{deep}}}"#
            );
            let error = parse(&text).unwrap_err();
            assert!(!error.is_limit() || field != "unknown", "{field}: {error}");
        }
    }

    #[test]
    fn oversized_requests_are_rejected() {
        let limits = Limits {
            max_request_bytes: 10,
            ..Limits::DEFAULT
        };
        assert!(matches!(
            Request::from_slice(
                br#"{"skill":"s","operation":"GET","resource":"tool:x"}"#,
                &limits
            ),
            Err(RequestError::TooLarge { .. })
        ));
    }

    #[test]
    fn numbers_beyond_f64_are_rejected() {
        assert!(
            parse(r#"{"skill":"s","operation":"GET","resource":"tool:x","payload":1e400}"#)
                .is_err()
        );
    }

    #[test]
    fn non_utf8_bytes_are_rejected() {
        let mut bytes =
            br#"{"skill":"s","operation":"GET","resource":"tool:x","payload":""#.to_vec();
        bytes.extend_from_slice(&[0xff, 0xfe]);
        bytes.extend_from_slice(br#""}"#);
        assert!(Request::from_slice(&bytes, &Limits::DEFAULT).is_err());
    }
}
