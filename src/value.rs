//! Paths into a request and the value semantics constraints rely on.
//!
//! - [`Path`] is a root ([`Root`]) followed by [`Segment`]s; it is what `payload.attendees[*].email`
//!   parses to, and its `Display` prints that form back (quoting odd keys as `["a.b"]`).
//! - The equality of `fieldEquals` (`json_eq`, crate-private): same type, numbers by value
//!   (`1 == 1.0`), strings exact, arrays and objects structurally; numbers are ordered exactly,
//!   without rounding `i64`/`u64` through `f64` (`cmp_numbers`).
//! - [`escape_controls`] and its kin show policy and request text with control and
//!   bidirectional characters escaped, as every message, listing and diagnostic does.
//!
//! This module depends on nothing else in the crate.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde_json::{Number, Value};

/// Where a path starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Root {
    /// The call's JSON body.
    Payload,
    /// The identity of the calling agent.
    Agent,
    /// Caller-supplied facts.
    Context,
    /// Template bindings and `resource.query`.
    Resource,
    /// `request.skill`, `request.operation`, `request.transaction`.
    Request,
}

impl Root {
    /// Every root, in the order they are documented.
    pub const ALL: [Root; 5] = [
        Root::Payload,
        Root::Agent,
        Root::Context,
        Root::Resource,
        Root::Request,
    ];

    /// The keyword that names this root.
    pub fn name(self) -> &'static str {
        match self {
            Root::Payload => "payload",
            Root::Agent => "agent",
            Root::Context => "context",
            Root::Resource => "resource",
            Root::Request => "request",
        }
    }

    /// The root named by `word`, if any.
    pub fn from_name(word: &str) -> Option<Root> {
        Root::ALL.into_iter().find(|r| r.name() == word)
    }
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Segment {
    /// `.name` or `["any key"]`: an object member.
    Key(String),
    /// `[3]`: an array element.
    Index(u64),
    /// `[*]`: every element of an array.
    Wildcard,
}

/// A root followed by segments, e.g. `payload.attendees[*].email`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Path {
    /// Where the path starts.
    pub root: Root,
    /// The steps after the root.
    pub segments: Vec<Segment>,
}

impl Path {
    /// A path with no segments.
    pub fn root(root: Root) -> Self {
        Path {
            root,
            segments: Vec::new(),
        }
    }

    /// True when some segment is `[*]`.
    pub fn has_wildcard(&self) -> bool {
        self.segments.iter().any(|s| matches!(s, Segment::Wildcard))
    }

    /// Parses the textual form (`payload.a["b c"][0][*]`). Used by the JSON manifest form, where
    /// paths are strings. Errors name the byte offset where parsing stopped.
    pub fn parse(text: &str) -> Result<Path, PathParseError> {
        PathParser { text, pos: 0 }.parse()
    }
}

/// Why a textual path could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid path `{text}` at byte {offset}: {reason}")]
pub struct PathParseError {
    /// The whole path text.
    pub text: String,
    /// Byte offset of the problem.
    pub offset: usize,
    /// What was expected.
    pub reason: &'static str,
}

struct PathParser<'a> {
    text: &'a str,
    pos: usize,
}

impl PathParser<'_> {
    fn error(&self, reason: &'static str) -> PathParseError {
        PathParseError {
            text: self.text.to_owned(),
            offset: self.pos,
            reason,
        }
    }

    fn rest(&self) -> &str {
        self.text.get(self.pos..).unwrap_or("")
    }

    fn identifier(&mut self) -> Option<String> {
        let rest = self.rest();
        let mut end = 0;
        for (i, c) in rest.char_indices() {
            let ok = if i == 0 {
                c.is_ascii_alphabetic() || c == '_'
            } else {
                c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$'
            };
            if !ok {
                break;
            }
            end = i + c.len_utf8();
        }
        let ident = rest.get(..end).filter(|s| !s.is_empty())?.to_owned();
        self.pos += end;
        Some(ident)
    }

    fn parse(mut self) -> Result<Path, PathParseError> {
        let root_word = self
            .identifier()
            .ok_or_else(|| self.error("expected a root"))?;
        let root = Root::from_name(&root_word).ok_or_else(|| PathParseError {
            text: self.text.to_owned(),
            offset: 0,
            reason: "unknown root; expected payload, agent, context, resource or request",
        })?;
        let mut segments = Vec::new();
        while !self.rest().is_empty() {
            if self.rest().starts_with('.') {
                self.pos += 1;
                let name = self
                    .identifier()
                    .ok_or_else(|| self.error("expected a name after `.`"))?;
                segments.push(Segment::Key(name));
            } else if self.rest().starts_with("[*]") {
                self.pos += 3;
                segments.push(Segment::Wildcard);
            } else if self.rest().starts_with("[\"") {
                self.pos += 1;
                let (key, used) = parse_json_string(self.rest())
                    .ok_or_else(|| self.error("expected a JSON string key"))?;
                self.pos += used;
                if !self.rest().starts_with(']') {
                    return Err(self.error("expected `]`"));
                }
                self.pos += 1;
                segments.push(Segment::Key(key));
            } else if self.rest().starts_with('[') {
                self.pos += 1;
                let digits: usize = self.rest().bytes().take_while(u8::is_ascii_digit).count();
                let index = self
                    .rest()
                    .get(..digits)
                    .and_then(|d| d.parse::<u64>().ok())
                    .ok_or_else(|| self.error("expected an index, `*` or a quoted key"))?;
                self.pos += digits;
                if !self.rest().starts_with(']') {
                    return Err(self.error("expected `]`"));
                }
                self.pos += 1;
                segments.push(Segment::Index(index));
            } else {
                return Err(self.error("expected `.name`, `[n]`, `[*]` or `[\"key\"]`"));
            }
        }
        Ok(Path { root, segments })
    }
}

/// Parses a JSON string literal at the start of `text`; returns it and the bytes used.
fn parse_json_string(text: &str) -> Option<(String, usize)> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<String>();
    let value = stream.next()?.ok()?;
    Some((value, stream.byte_offset()))
}

fn is_plain_key(key: &str) -> bool {
    // Every character allowed is ASCII, so bytes decide it (a byte of a multi-byte character is
    // never allowed).
    match key.as_bytes() {
        [first, rest @ ..] if first.is_ascii_alphabetic() || *first == b'_' => rest
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'$')),
        _ => false,
    }
}

/// A key step as paths print it: `.key` when the key reads as a name, `["odd key"]` otherwise,
/// with the characters [`is_hidden`] holds for written as `\uXXXX` escapes (serde_json leaves
/// DEL, C1 and bidirectional controls raw): the path reads back as the same key, and a deny
/// reason's path cannot reorder or hide what a reader sees. (Pieces go through `write_str`, not
/// `write!`: deny reasons print concrete paths into a `String`, where the formatting machinery
/// cost more than the text.)
pub(crate) fn write_key_segment(out: &mut impl fmt::Write, key: &str) -> fmt::Result {
    if is_plain_key(key) {
        out.write_char('.')?;
        out.write_str(key)
    } else {
        let quoted = serde_json::to_string(key).map_err(|_| fmt::Error)?;
        out.write_char('[')?;
        if quoted.chars().any(is_hidden) {
            for c in quoted.chars() {
                if is_hidden(c) {
                    // Every hidden character is in the Basic Multilingual Plane.
                    write!(out, "\\u{:04x}", u32::from(c))?;
                } else {
                    out.write_char(c)?;
                }
            }
        } else {
            out.write_str(&quoted)?;
        }
        out.write_char(']')
    }
}

/// An index step as paths print it: `[3]`.
pub(crate) fn write_index_segment(
    out: &mut impl fmt::Write,
    index: impl itoa::Integer,
) -> fmt::Result {
    out.write_char('[')?;
    out.write_str(itoa::Buffer::new().format(index))?;
    out.write_char(']')
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Key(key) => write_key_segment(f, key),
            Segment::Index(i) => write_index_segment(f, *i),
            Segment::Wildcard => f.write_str("[*]"),
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.root.name())?;
        for segment in &self.segments {
            write!(f, "{segment}")?;
        }
        Ok(())
    }
}

/// JSON equality as `fieldEquals` defines it: same type; numbers by exact value (`1 == 1.0`,
/// `-0.0 == 0`); strings byte-exact (no Unicode normalisation); arrays element-wise; objects with
/// the same key set and equal members, in any order.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y) == Some(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => false,
    }
}

/// A JSON number in one of the three exact forms serde_json keeps.
#[derive(Debug, Clone, Copy)]
enum Num {
    I(i64),
    U(u64),
    F(f64),
}

fn num(n: &Number) -> Option<Num> {
    if let Some(i) = n.as_i64() {
        Some(Num::I(i))
    } else if let Some(u) = n.as_u64() {
        Some(Num::U(u))
    } else {
        n.as_f64().filter(|f| f.is_finite()).map(Num::F)
    }
}

/// A number's value as one key, so that two numbers have the same key exactly when
/// [`cmp_numbers`] finds them equal: an integral value (`1`, `1.0`, `-0.0`) is the integer, any
/// other float its bits. For hashing under JSON equality (`uniqueItems`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NumberKey {
    /// An integral value below 2^127 in magnitude (every `i64` and `u64`, and such floats).
    Int(i128),
    /// A float that is not integral, or too large for [`NumberKey::Int`].
    Float(u64),
}

/// The [`NumberKey`] of `n`; `None` only for what [`cmp_numbers`] cannot order either.
pub(crate) fn number_key(n: &Number) -> Option<NumberKey> {
    /// 2^127: every integral float below it in magnitude fits an `i128` exactly.
    const LIMIT: f64 = 1.7014118346046923e38;
    Some(match num(n)? {
        Num::I(i) => NumberKey::Int(i128::from(i)),
        Num::U(u) => NumberKey::Int(i128::from(u)),
        Num::F(f) if f.fract() == 0.0 && f.abs() < LIMIT => {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "f is integral and below 2^127 in magnitude: the cast is exact"
            )]
            let whole = f as i128;
            NumberKey::Int(whole)
        }
        Num::F(f) => NumberKey::Float(f.to_bits()),
    })
}

/// Orders an integer against a float exactly. `None` only for NaN (which JSON cannot carry).
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    // Every i64/u64 lies strictly inside (-2^127, 2^127); floats outside that range order trivially.
    const LIMIT: f64 = 1.7014118346046923e38; // 2^127
    if f >= LIMIT {
        return Some(Ordering::Less);
    }
    if f <= -LIMIT {
        return Some(Ordering::Greater);
    }
    let truncated = f.trunc();
    // `truncated` is an integer with |truncated| < 2^127, so the conversion is exact.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "truncated is integral and within i128 range (checked above)"
    )]
    let whole = truncated as i128;
    match i.cmp(&whole) {
        Ordering::Equal => {
            let frac = f - truncated;
            Some(if frac > 0.0 {
                Ordering::Less
            } else if frac < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            })
        }
        other => Some(other),
    }
}

/// Orders two JSON numbers by exact value; `None` if either is not finite.
pub(crate) fn cmp_numbers(a: &Number, b: &Number) -> Option<Ordering> {
    match (num(a)?, num(b)?) {
        (Num::I(x), Num::I(y)) => Some(x.cmp(&y)),
        (Num::U(x), Num::U(y)) => Some(x.cmp(&y)),
        (Num::I(x), Num::U(y)) => Some(i128::from(x).cmp(&i128::from(y))),
        (Num::U(x), Num::I(y)) => Some(i128::from(x).cmp(&i128::from(y))),
        (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
        (Num::I(x), Num::F(y)) => cmp_int_float(i128::from(x), y),
        (Num::U(x), Num::F(y)) => cmp_int_float(i128::from(x), y),
        (Num::F(x), Num::I(y)) => cmp_int_float(i128::from(y), x).map(Ordering::reverse),
        (Num::F(x), Num::U(y)) => cmp_int_float(i128::from(y), x).map(Ordering::reverse),
    }
}

/// Renders a value for a message: JSON text cut to at most `max` characters, with `…` appended
/// when cut.
pub fn truncate_for_message(value: &Value, max: usize) -> String {
    match value {
        Value::String(text) => string_for_message(text, max),
        _ => truncate_owned(value.to_string(), max),
    }
}

/// [`truncate_for_message`] of a JSON string: quoted and escaped as serde_json writes it.
pub(crate) fn string_for_message(text: &str, max: usize) -> String {
    let mut quoted = Vec::with_capacity(text.len() + 2);
    let quoted = match write_json_str(&mut quoted, text) {
        // Quotes around a `str`, or serde_json's own output: UTF-8 either way.
        Ok(()) => String::from_utf8(quoted)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(_) => String::from("\"?\""),
    };
    truncate_owned(quoted, max)
}

/// Appends `text` as a JSON string, byte for byte as serde_json writes it. A string with
/// nothing to escape (what requests and records usually hold) is quoted directly; anything else
/// goes through serde_json's own escaping, so the two cannot disagree.
pub(crate) fn write_json_str(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    if crate::bytes::needs_escape(text.as_bytes()) {
        return serde_json::to_writer(&mut *out, text);
    }
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Cuts a string to at most `max` characters, appending `…` when cut, with its control
/// characters written as escapes ([`escape_controls`]): the form in which request text is quoted
/// in messages.
pub(crate) fn truncate_str(text: &str, max: usize) -> String {
    let kept = match text.char_indices().nth(max) {
        Some((cut, _)) => text.get(..cut).unwrap_or(text),
        None => text,
    };
    let mut out = escape_controls(kept).into_owned();
    if kept.len() < text.len() {
        out.push('…');
    }
    out
}

/// `text` with every character [`is_hidden`] holds for written as an escape — `\n`, `\r`, `\t`,
/// else `\u{1b}`, `\u{202e}` — so that untrusted text in a message or a line of text output can
/// neither start a line of its own (a forged verdict in `--format text`, say), nor drive a
/// terminal, nor reorder what a reader sees around it. Borrowed when there is nothing to escape.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape_where(text, is_hidden)
}

/// [`escape_controls`] for text of several lines (a disassembly, a source snippet, a block of
/// output): line feeds, tabs and the carriage return of a `\r\n` stay as they are, everything
/// else [`is_hidden`] holds for is escaped.
pub fn escape_controls_in_lines(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    escape_where(text, |c| {
        let layout = match c {
            '\n' | '\t' => true,
            '\r' => bytes.get(at + 1) == Some(&b'\n'),
            _ => false,
        };
        at += c.len_utf8();
        !layout && is_hidden(c)
    })
}

/// True for a character that is never written raw into a message or text output: the C0 and C1
/// controls and DEL, the line and paragraph separators U+2028/U+2029, and the bidirectional
/// controls — the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069, the marks
/// U+200E/U+200F and U+061C — which make a terminal or an editor show text in an order other
/// than the one it is read in.
pub fn is_hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_bidi_control(c)
}

/// True for the bidirectional controls: the embeddings and overrides U+202A–U+202E, the isolates
/// U+2066–U+2069, and the marks U+200E, U+200F and U+061C.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
    )
}

/// `value` as compact JSON, as `serde_json::to_string` writes it except that the characters
/// [`is_hidden`] holds for are written as `\uXXXX` escapes wherever serde_json leaves them raw
/// (DEL, C1, U+2028/U+2029, the bidirectional controls): the same JSON value, printable on a
/// terminal line. For the JSON lines of `capgate check --format json` and `replay`.
pub fn to_json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, HiddenEscaped);
    value.serialize(&mut serializer)?;
    // serde_json writes UTF-8, and the escapes are ASCII.
    Ok(String::from_utf8(out)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// serde_json's compact formatter, with hidden characters in strings written as `\uXXXX`.
struct HiddenEscaped;

impl serde_json::ser::Formatter for HiddenEscaped {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut run = 0;
        for (at, c) in fragment.char_indices() {
            if is_hidden(c) {
                writer.write_all(fragment.get(run..at).unwrap_or_default().as_bytes())?;
                // Every hidden character is in the Basic Multilingual Plane.
                write!(writer, "\\u{:04x}", u32::from(c))?;
                run = at + c.len_utf8();
            }
        }
        writer.write_all(fragment.get(run..).unwrap_or_default().as_bytes())
    }
}

/// `text` with the characters `escape` selects written as `\n`, `\r`, `\t` or `\u{..}`, in
/// order (the predicate sees every character once, left to right).
fn escape_where(text: &str, mut escape: impl FnMut(char) -> bool) -> Cow<'_, str> {
    // Every hidden character is a control below U+00A0 or at least two bytes long: ASCII text
    // without controls is returned without looking at each character.
    let plain_ascii = text.bytes().all(|b| (0x20..0x7f).contains(&b));
    if plain_ascii {
        return Cow::Borrowed(text);
    }
    let mut out: Option<String> = None;
    for (at, c) in text.char_indices() {
        if escape(c) {
            let out = out.get_or_insert_with(|| {
                let mut head = String::with_capacity(text.len() + 8);
                head.push_str(text.get(..at).unwrap_or_default());
                head
            });
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            }
        } else if let Some(out) = out.as_mut() {
            out.push(c);
        }
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

/// [`truncate_str`] of an owned string (returned as it is when nothing is cut or escaped).
fn truncate_owned(text: String, max: usize) -> String {
    let cut = text.char_indices().nth(max).is_some();
    if !cut && matches!(escape_controls(&text), Cow::Borrowed(_)) {
        return text;
    }
    truncate_str(&text, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn control_characters_in_quoted_text_are_escaped() {
        assert!(matches!(
            escape_controls("plain `text` é"),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\nb\rc\td\u{1b}[2K\u{7f}\u{85}\u{9b}\u{2028}\u{2029}\\"),
            "a\\nb\\rc\\td\\u{1b}[2K\\u{7f}\\u{85}\\u{9b}\\u{2028}\\u{2029}\\"
        );
        // Cut first, then escaped: the limit counts the text's own characters.
        assert_eq!(truncate_str("ab\ncd", 3), "ab\\n…");
        assert_eq!(string_for_message("x\u{7f}", 10), "\"x\\u{7f}\"");
    }

    #[test]
    fn bidi_controls_are_escaped_like_control_characters() {
        assert_eq!(
            escape_controls("a\u{202e}b\u{2066}c\u{2069}d\u{200e}\u{200f}\u{61c}\u{202a}"),
            "a\\u{202e}b\\u{2066}c\\u{2069}d\\u{200e}\\u{200f}\\u{61c}\\u{202a}"
        );
        // Neighbours of the bidi ranges are ordinary text.
        let neighbours = "\u{2029}\u{202f}\u{2065}\u{206a}\u{200d}\u{61b}";
        assert_eq!(
            escape_controls(neighbours),
            "\\u{2029}\u{202f}\u{2065}\u{206a}\u{200d}\u{61b}"
        );
        // Several lines keep their line breaks, tabs and `\r\n` ends; a lone `\r` is escaped.
        assert_eq!(
            escape_controls_in_lines("a\tb\r\nc\u{202e}\rd\n\u{1b}[2J"),
            "a\tb\r\nc\\u{202e}\\rd\n\\u{1b}[2J"
        );
        assert!(matches!(
            escape_controls_in_lines("a\nb é"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_json_line_escapes_hidden_characters_and_keeps_the_value() {
        let value = json!({ "a\u{202e}": ["x\u{7f}\u{85}\u{2028}\u{2066}y\n", 1] });
        let line = to_json_line(&value).unwrap();
        assert_eq!(line, r#"{"a\u202e":["x\u007f\u0085\u2028\u2066y\n",1]}"#);
        assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), value);
        let plain = json!({"skill": "s", "n": [1, 2.5, null]});
        assert_eq!(to_json_line(&plain).unwrap(), plain.to_string());
    }

    /// Any mix of text and control or bidi characters.
    fn hostile_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                "\\PC{0,4}",
                proptest::char::ranges(
                    vec![
                        '\u{0}'..='\u{1f}',
                        '\u{7f}'..='\u{9f}',
                        '\u{2028}'..='\u{2029}',
                        '\u{202a}'..='\u{202e}',
                        '\u{2066}'..='\u{2069}',
                        '\u{200e}'..='\u{200f}',
                        '\u{61c}'..='\u{61c}',
                    ]
                    .into()
                )
                .prop_map(String::from),
            ],
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn no_message_function_lets_a_hidden_character_through(text in hostile_text(), max in 0_usize..40) {
            let value = Value::String(text.clone());
            for shown in [
                escape_controls(&text).into_owned(),
                truncate_str(&text, max),
                string_for_message(&text, max),
                truncate_for_message(&value, max),
                truncate_for_message(&json!({ text.clone(): [text.clone()] }), max),
            ] {
                prop_assert!(!shown.chars().any(is_hidden), "{:?} → {:?}", text, shown);
            }
            let line = to_json_line(&json!({ text.clone(): text.clone() })).unwrap();
            prop_assert!(!line.chars().any(is_hidden), "{:?} → {:?}", text, line);
            prop_assert_eq!(
                serde_json::from_str::<Value>(&line).unwrap(),
                json!({ text.clone(): text.clone() })
            );
            let lines = escape_controls_in_lines(&text);
            let raw = lines
                .char_indices()
                .filter(|(at, c)| {
                    let crlf = *c == '\r' && lines.get(at + 1..).is_some_and(|t| t.starts_with('\n'));
                    is_hidden(*c) && !matches!(c, '\n' | '\t') && !crlf
                })
                .count();
            prop_assert_eq!(raw, 0, "{:?} → {:?}", text, lines);
        }
    }

    proptest! {
        #[test]
        fn a_string_for_a_message_is_its_json_text_cut(
            text in "(\\PC|[\"\\\\\u{0}-\u{1f}\u{7f}é€😀]){0,80}",
            max in 0_usize..90,
        ) {
            let reference = truncate_str(&serde_json::to_string(&text).unwrap(), max);
            prop_assert_eq!(string_for_message(&text, max), reference.clone());
            prop_assert_eq!(truncate_for_message(&Value::String(text), max), reference);
        }
    }

    #[test]
    fn plain_keys_are_ascii_names() {
        for key in ["a", "_", "email", "a-b$", "A_9", "x$-_"] {
            assert!(is_plain_key(key), "{key}");
        }
        for key in [
            "", "1a", "-a", "$", "é", "aé", "a b", "a.b", "a\u{0}", "ﬁ", "a\u{301}",
        ] {
            assert!(!is_plain_key(key), "{key:?}");
        }
    }

    #[test]
    fn paths_round_trip_through_display() {
        // A key with hidden characters prints them as JSON escapes and reads back the same.
        let path = Path {
            root: Root::Payload,
            segments: vec![Segment::Key("a\u{202e}b\u{7f}\u{85}\u{1}".into())],
        };
        assert_eq!(
            path.to_string(),
            "payload[\"a\\u202eb\\u007f\\u0085\\u0001\"]"
        );
        assert_eq!(Path::parse(&path.to_string()).unwrap(), path);
        for text in [
            "payload",
            "payload.attendees[*].email",
            "payload[\"a.b\"][\"\"][\"[*]\"][0]",
            "resource.query.page",
            "agent.email",
        ] {
            let path = Path::parse(text).unwrap();
            assert_eq!(path.to_string(), text);
        }
    }

    #[test]
    fn path_parse_rejects_unknown_roots_and_bad_segments() {
        assert!(Path::parse("body.x").is_err());
        assert!(Path::parse("payload.").is_err());
        assert!(Path::parse("payload[x]").is_err());
        assert!(Path::parse("payload[1").is_err());
        assert!(Path::parse("").is_err());
    }

    #[test]
    fn numbers_compare_by_value_across_forms() {
        assert!(json_eq(&json!(1), &json!(1.0)));
        assert!(!json_eq(&json!("1"), &json!(1)));
        assert!(json_eq(&json!(-0.0), &json!(0)));
        // 2^53 + 1 is not representable as f64; it must not equal 2^53 as a float.
        let big: Value = serde_json::from_str("9007199254740993").unwrap();
        let float: Value = serde_json::from_str("9007199254740992.0").unwrap();
        assert!(!json_eq(&big, &float));
        assert_eq!(
            cmp_numbers(&Number::from(u64::MAX), &Number::from(i64::MIN)),
            Some(Ordering::Greater)
        );
        let half = Number::from_f64(0.5).unwrap();
        assert_eq!(cmp_numbers(&Number::from(0), &half), Some(Ordering::Less));
        let neg_half = Number::from_f64(-0.5).unwrap();
        assert_eq!(
            cmp_numbers(&Number::from(0), &neg_half),
            Some(Ordering::Greater)
        );
    }

    #[test]
    fn objects_compare_structurally_in_any_order() {
        assert!(json_eq(
            &json!({"a": 1, "b": [1, 2]}),
            &json!({"b": [1.0, 2], "a": 1})
        ));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_str("ééé", 2), "éé…");
        assert_eq!(truncate_str("abc", 3), "abc");
    }
}
