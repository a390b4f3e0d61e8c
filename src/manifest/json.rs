//! A strict JSON reader (RFC 8259) that keeps the span of every node.
//!
//! serde_json's `Value` forgets where things were written, but every manifest error must name
//! `file:line:column`, so the manifest loader reads the text with this module first:
//!
//! - [`parse_json`] turns a text into a [`SpannedJson`] tree or the errors found.
//! - [`SpannedJson`] is one node: a [`JsonValue`] and its [`Span`]; objects keep their members
//!   in written order as [`JsonMember`]s, each with the span of its key.
//! - [`SpannedJson::to_value`] drops the spans, for payload schemas and literals.
//!
//! Strictness: no comments, no trailing commas, no byte order mark, no leading zeros, no
//! duplicate object keys, no lone surrogates in `\u` escapes, no numbers outside the `f64` range,
//! and at most [`MAX_DEPTH`] nested arrays and objects. The reader never panics.

use std::collections::HashSet;

use serde_json::{Map, Number, Value};

use super::error::ManifestError;
use crate::span::{FileId, Span};

/// Objects up to this many members check a new key against the earlier ones one by one.
const LINEAR_KEYS: usize = 16;

/// The deepest nesting of arrays and objects accepted (the outermost container is level 1),
/// the same as `.cap` text's ([`crate::limits::MAX_POLICY_NESTING`]).
pub use crate::limits::MAX_POLICY_NESTING as MAX_DEPTH;

/// One JSON node with the span of its text.
#[derive(Debug, Clone, PartialEq)]
pub struct SpannedJson {
    /// The node.
    pub value: JsonValue,
    /// From its first to one past its last byte (quotes and brackets included).
    pub span: Span,
}

/// The JSON data model, with spanned children.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonValue {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, parsed from its text as serde_json does (`u64`, `i64`, else `f64`).
    Number(Number),
    /// A string, escapes decoded.
    String(String),
    /// An array.
    Array(Vec<SpannedJson>),
    /// An object, members in written order; keys are unique.
    Object(Vec<JsonMember>),
}

/// One `"key": value` member of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonMember {
    /// The key, escapes decoded.
    pub key: String,
    /// The key's span, quotes included.
    pub key_span: Span,
    /// The value.
    pub value: SpannedJson,
}

impl JsonValue {
    /// The type as a noun phrase for messages (`a string`, `an object`).
    pub fn type_phrase(&self) -> &'static str {
        match self {
            JsonValue::Null => "null",
            JsonValue::Bool(_) => "a boolean",
            JsonValue::Number(_) => "a number",
            JsonValue::String(_) => "a string",
            JsonValue::Array(_) => "an array",
            JsonValue::Object(_) => "an object",
        }
    }
}

impl SpannedJson {
    /// The same tree as a serde_json value, without spans.
    pub fn to_value(&self) -> Value {
        match &self.value {
            JsonValue::Null => Value::Null,
            JsonValue::Bool(b) => Value::Bool(*b),
            JsonValue::Number(n) => Value::Number(n.clone()),
            JsonValue::String(s) => Value::String(s.clone()),
            JsonValue::Array(items) => Value::Array(items.iter().map(Self::to_value).collect()),
            JsonValue::Object(members) => {
                let mut map = Map::new();
                for member in members {
                    map.insert(member.key.clone(), member.value.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// The member named `key`, when this is an object that has one.
    pub fn member(&self, key: &str) -> Option<&JsonMember> {
        match &self.value {
            JsonValue::Object(members) => members.iter().find(|m| m.key == key),
            _ => None,
        }
    }
}

/// Parses one JSON text. Syntax errors stop the reader (the first is returned); duplicate keys
/// are all reported.
#[cfg(test)]
fn parse_json(file: FileId, text: &str) -> Result<SpannedJson, Vec<ManifestError>> {
    match parse_json_partial(file, text) {
        (Some(node), errors) if errors.is_empty() => Ok(node),
        (_, errors) => Err(errors),
    }
}

/// [`parse_json`], keeping the document when its only errors are duplicate keys (each object
/// then holds every member as written, and readers see the first of each name), so that the
/// rest of a manifest can still be checked.
pub(crate) fn parse_json_partial(
    file: FileId,
    text: &str,
) -> (Option<SpannedJson>, Vec<ManifestError>) {
    let mut reader = Reader {
        file,
        text,
        bytes: text.as_bytes(),
        pos: 0,
        duplicates: Vec::new(),
    };
    if text.starts_with('\u{feff}') {
        let error = reader
            .error(0, 3, "byte order mark is not allowed in JSON")
            .with_help("save the file as UTF-8 without a BOM");
        return (None, vec![error]);
    }
    match reader.document() {
        Ok(node) => (Some(node), reader.duplicates),
        Err(error) => {
            let mut errors = reader.duplicates;
            errors.push(error);
            (None, errors)
        }
    }
}

struct Reader<'a> {
    file: FileId,
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    duplicates: Vec<ManifestError>,
}

type Parsed<T> = Result<T, ManifestError>;

impl Reader<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.file, start, end)
    }

    fn error(&self, start: usize, end: usize, message: impl Into<String>) -> ManifestError {
        ManifestError::new(self.span(start, end), message)
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// The character at the cursor, for messages.
    fn current_char(&self) -> Option<char> {
        self.text
            .get(self.pos..)
            .and_then(|rest| rest.chars().next())
    }

    fn unexpected(&self, expected: &str) -> ManifestError {
        match self.current_char() {
            None => self.error(
                self.pos,
                self.pos,
                format!("unexpected end of input, expected {expected}"),
            ),
            Some('/') => self
                .error(self.pos, self.pos + 1, "comments are not allowed in JSON")
                .with_help("remove the comment; `justification` is the place for prose"),
            Some(c) if crate::value::is_bidi_control(c) => {
                self.error(
                    self.pos,
                    self.pos + c.len_utf8(),
                    format!(
                        "bidirectional control U+{:04X} outside a string, expected {expected}",
                        u32::from(c)
                    ),
                )
                .with_help("it can make the manifest read differently from how it loads; delete it")
            }
            Some(c) => self.error(
                self.pos,
                self.pos + c.len_utf8(),
                format!("unexpected `{}`, expected {expected}", c.escape_debug()),
            ),
        }
    }

    fn document(&mut self) -> Parsed<SpannedJson> {
        self.skip_whitespace();
        let node = self.value(0)?;
        self.skip_whitespace();
        if self.pos < self.bytes.len() {
            return Err(self.unexpected("the end of the document"));
        }
        Ok(node)
    }

    fn value(&mut self, depth: usize) -> Parsed<SpannedJson> {
        let start = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.object(depth + 1)?,
            Some(b'[') => self.array(depth + 1)?,
            Some(b'"') => JsonValue::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => JsonValue::Number(self.number()?),
            Some(b't') => self.literal("true", JsonValue::Bool(true))?,
            Some(b'f') => self.literal("false", JsonValue::Bool(false))?,
            Some(b'n') => self.literal("null", JsonValue::Null)?,
            _ => return Err(self.unexpected("a value")),
        };
        Ok(SpannedJson {
            value,
            span: self.span(start, self.pos),
        })
    }

    fn literal(&mut self, word: &str, value: JsonValue) -> Parsed<JsonValue> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) == Some(word.as_bytes()) {
            self.pos = end;
            Ok(value)
        } else {
            Err(self.unexpected("a value"))
        }
    }

    fn enter(&self, depth: usize) -> Parsed<()> {
        if depth > MAX_DEPTH {
            Err(self
                .error(
                    self.pos,
                    self.pos + 1,
                    "JSON nesting is deeper than 128 levels",
                )
                .with_help("a manifest never needs this depth; flatten the document"))
        } else {
            Ok(())
        }
    }

    fn object(&mut self, depth: usize) -> Parsed<JsonValue> {
        self.enter(depth)?;
        self.pos += 1; // `{`
        let mut members: Vec<JsonMember> = Vec::new();
        // Past `LINEAR_KEYS` members, the keys so far in a set: comparing each new key with every
        // earlier one made reading an object of many keys quadratic (regression: 60,000 keys,
        // 649 KB, took 34 s).
        let mut keys: HashSet<String> = HashSet::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(JsonValue::Object(members));
        }
        loop {
            self.skip_whitespace();
            if self.peek() != Some(b'"') {
                let error = self.unexpected("a string key");
                return Err(if members.is_empty() || self.peek() != Some(b'}') {
                    error
                } else {
                    error.with_help("JSON does not allow a trailing comma")
                });
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = self.span(key_start, self.pos);
            let duplicate = if members.len() < LINEAR_KEYS {
                members.iter().any(|m| m.key == key)
            } else {
                if keys.is_empty() {
                    keys.extend(members.iter().map(|m| m.key.clone()));
                }
                !keys.insert(key.clone())
            };
            if duplicate {
                self.duplicates.push(
                    ManifestError::new(key_span, format!("duplicate key `{}`", key.escape_debug()))
                        .with_help("each key may appear only once in an object"),
                );
            }
            self.skip_whitespace();
            if self.peek() != Some(b':') {
                return Err(self.unexpected("`:` after an object key"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let value = self.value(depth)?;
            members.push(JsonMember {
                key,
                key_span,
                value,
            });
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(JsonValue::Object(members));
                }
                _ => return Err(self.unexpected("`,` or `}` after an object member")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Parsed<JsonValue> {
        self.enter(depth)?;
        self.pos += 1; // `[`
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(JsonValue::Array(items));
        }
        loop {
            self.skip_whitespace();
            if self.peek() == Some(b']') {
                return Err(self
                    .unexpected("a value")
                    .with_help("JSON does not allow a trailing comma"));
            }
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(JsonValue::Array(items));
                }
                _ => return Err(self.unexpected("`,` or `]` after an array element")),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Parsed<Number> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        let int_start = self.pos;
        let int_digits = self.digits();
        if int_digits == 0 {
            return Err(self.unexpected("a digit"));
        }
        if int_digits > 1 && self.bytes.get(int_start) == Some(&b'0') {
            return Err(self
                .error(
                    start,
                    self.pos,
                    "numbers may not have leading zeros in JSON",
                )
                .with_help("write the number without the leading `0`"));
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if self.digits() == 0 {
                return Err(self.unexpected("a digit after `.`"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.unexpected("a digit in the exponent"));
            }
        }
        let text = self.text.get(start..self.pos).unwrap_or("");
        serde_json::from_str::<Number>(text)
            .ok()
            .filter(|n| n.as_f64().is_some_and(f64::is_finite))
            .ok_or_else(|| self.error(start, self.pos, format!("number `{text}` is out of range")))
    }

    fn hex4(&mut self) -> Parsed<u16> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u16::from_str_radix(d, 16).ok());
        match digits {
            Some(unit) => {
                self.pos += 4;
                Ok(unit)
            }
            None => Err(self.error(
                self.pos.saturating_sub(2),
                self.pos,
                "`\\u` must be followed by four hex digits",
            )),
        }
    }

    fn string(&mut self) -> Parsed<String> {
        let start = self.pos;
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // The run stops only at ASCII bytes, so both ends are character boundaries.
            out.push_str(self.text.get(run_start..self.pos).unwrap_or(""));
            match self.peek() {
                None => {
                    return Err(self
                        .error(start, self.pos, "unterminated string")
                        .with_help("close the string with `\"`"));
                }
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(b) => {
                    return Err(self
                        .error(
                            self.pos,
                            self.pos + 1,
                            format!("control character U+{b:04X} must be escaped in a string"),
                        )
                        .with_help("write `\\n`, `\\t` or `\\u00XX` instead"));
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Parsed<()> {
        let escape_start = self.pos - 1;
        let Some(b) = self.peek() else {
            return Err(self.error(escape_start, self.pos, "unterminated string"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(escape_start, out),
            _ => {
                let shown = self.text.get(escape_start..).and_then(|rest| {
                    rest.char_indices()
                        .nth(1)
                        .map(|(i, c)| rest.get(..i + c.len_utf8()).unwrap_or(""))
                });
                let end = escape_start + shown.map_or(1, str::len);
                self.pos = end;
                return Err(self
                    .error(
                        escape_start,
                        end,
                        format!("invalid escape `{}`", shown.unwrap_or("\\")),
                    )
                    .with_help("JSON escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX"));
            }
        };
        out.push(c);
        Ok(())
    }

    fn unicode_escape(&mut self, escape_start: usize, out: &mut String) -> Parsed<()> {
        let lone = |reader: &Self| {
            reader
                .error(escape_start, reader.pos, "lone surrogate in a `\\u` escape")
                .with_help("a high surrogate `\\uD800`-`\\uDBFF` must be followed by a low one")
        };
        let unit = self.hex4()?;
        let code = match unit {
            0xD800..=0xDBFF => {
                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u".as_slice()) {
                    return Err(lone(self));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(lone(self));
                }
                0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(lone(self)),
            _ => u32::from(unit),
        };
        match char::from_u32(code) {
            Some(c) => {
                out.push(c);
                Ok(())
            }
            None => Err(lone(self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const FILE: FileId = FileId(0);

    fn parse(text: &str) -> Result<SpannedJson, Vec<ManifestError>> {
        parse_json(FILE, text)
    }

    fn first_error(text: &str) -> ManifestError {
        parse(text).unwrap_err().remove(0)
    }

    #[test]
    fn values_convert_to_the_same_serde_json_value() {
        let text =
            r#"{"a": [1, -2, 3.5, 1e3, true, false, null, "x\n\u00e9\ud83d\ude00"], "b": {}}"#;
        let node = parse(text).unwrap();
        let expected: Value = serde_json::from_str(text).unwrap();
        assert_eq!(node.to_value(), expected);
    }

    #[test]
    fn spans_cover_each_node_and_key() {
        let node = parse(r#" { "ab" : [ 1 , "x" ] } "#).unwrap();
        assert_eq!((node.span.start, node.span.end), (1, 23));
        let member = node.member("ab").unwrap();
        assert_eq!((member.key_span.start, member.key_span.end), (3, 7));
        assert_eq!((member.value.span.start, member.value.span.end), (10, 21));
        let JsonValue::Array(items) = &member.value.value else {
            panic!("array expected")
        };
        assert_eq!((items[1].span.start, items[1].span.end), (16, 19));
    }

    #[test]
    fn duplicate_keys_are_each_reported() {
        let errors = parse(r#"{"a": 1, "b": {"c": 1, "c": 2}, "a": 3}"#).unwrap_err();
        let messages: Vec<_> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(messages, ["duplicate key `c`", "duplicate key `a`"]);
        assert_eq!(errors[1].span.start, 32);
    }

    #[test]
    fn nesting_128_levels_is_accepted_and_129_rejected() {
        let ok = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert!(parse(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        let error = first_error(&deep);
        assert!(error.message.contains("deeper than 128"), "{error}");
        assert_eq!(error.span.start, 128);
    }

    #[test]
    fn very_deep_input_is_rejected_without_overflowing_the_stack() {
        let deep = "[{\"a\":".repeat(100_000);
        assert!(first_error(&deep).message.contains("deeper than 128"));
    }

    #[test]
    fn numbers_outside_f64_range_are_rejected() {
        assert_eq!(
            first_error("1e400").message,
            "number `1e400` is out of range"
        );
        assert_eq!(
            first_error("-1e400").message,
            "number `-1e400` is out of range"
        );
        assert!(parse("1e308").is_ok());
        // Integers too big for u64 fall back to f64, as serde_json does.
        let big = parse("123456789012345678901234567890").unwrap();
        assert!(matches!(big.value, JsonValue::Number(n) if n.is_f64()));
    }

    #[test]
    fn numbers_keep_integer_forms() {
        let node = parse("[18446744073709551615, -9223372036854775808, 0, -0.5]").unwrap();
        assert_eq!(
            node.to_value(),
            json!([18446744073709551615u64, -9223372036854775808i64, 0, -0.5])
        );
    }

    #[test]
    fn non_rfc_8259_forms_are_rejected() {
        for bad in [
            "",
            " ",
            "01",
            "-",
            "1.",
            ".5",
            "1e",
            "+1",
            "0x10",
            "NaN",
            "Infinity",
            "[1,]",
            "{\"a\":1,}",
            "{a:1}",
            "{'a':1}",
            "'a'",
            "[1 2]",
            "{\"a\" 1}",
            "tru",
            "nul",
            "\"\\x\"",
            "\"\\u12\"",
            "\"a\tb\"",
            "\"a\nb\"",
            "\"unterminated",
            "1 2",
            "[] []",
            "// c\n{}",
            "/* c */ {}",
            "\u{feff}{}",
            "[\"\\",
            "\"\\u",
        ] {
            assert!(parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn lone_surrogates_are_rejected_and_pairs_decoded() {
        for bad in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800\u0041""#,
            r#""\ud800x""#,
        ] {
            let error = first_error(bad);
            assert!(error.message.contains("lone surrogate"), "{bad}: {error}");
        }
        let pair = parse(r#""\ud83d\ude00""#).unwrap();
        assert_eq!(pair.value, JsonValue::String("😀".to_owned()));
    }

    #[test]
    fn trailing_comma_gets_a_hint() {
        let error = first_error("{\"a\": 1,}");
        assert_eq!(
            error.help.as_deref(),
            Some("JSON does not allow a trailing comma")
        );
        let error = first_error("[1,]");
        assert_eq!(
            error.help.as_deref(),
            Some("JSON does not allow a trailing comma")
        );
    }

    #[test]
    fn comments_are_named_as_such() {
        assert_eq!(
            first_error("{} // x").message,
            "comments are not allowed in JSON"
        );
    }

    #[test]
    fn unexpected_character_is_quoted_and_spanned() {
        let error = first_error("[1, é]");
        assert_eq!(error.message, "unexpected `é`, expected a value");
        assert_eq!((error.span.start, error.span.end), (4, 6));
    }

    proptest! {
        #[test]
        fn random_text_never_panics(text in "\\PC{0,64}") {
            let _ = parse(&text);
        }

        #[test]
        fn random_json_like_text_never_panics(
            text in "[\\[\\]{}\",:0-9eE.+\\-tfrunlsa\\\\ud8c \n]{0,64}"
        ) {
            let _ = parse(&text);
        }

        #[test]
        fn agrees_with_serde_json_on_acceptance(
            text in "[\\[\\]{}\",:0-9e.\\-a\\\\u ]{0,24}"
        ) {
            // serde_json accepts duplicate keys; we do not. Otherwise both must agree.
            let ours = parse(&text);
            let theirs = serde_json::from_str::<Value>(&text);
            if let Ok(node) = &ours {
                prop_assert_eq!(node.to_value(), theirs.unwrap());
            } else if theirs.is_ok() {
                let errors = ours.unwrap_err();
                prop_assert!(errors.iter().all(|e| e.message.starts_with("duplicate key")));
            }
        }
    }
}
