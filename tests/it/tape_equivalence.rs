#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
//! The tape parser against the reference parser (`parse_json_slice_with_depth`: serde_json
//! with duplicate keys refused and a depth limit):
//!
//! - generated JSON documents (nested, odd keys, unicode, escapes, numbers near the edges of
//!   `u64`/`i64`/`f64`), written compactly, with varied whitespace and with characters escaped
//!   at random, must parse to the same `Value`, and every accessor must agree with it;
//! - mutated documents (a byte deleted, inserted or flipped, a duplicate key or a case variant
//!   of a key inserted, the depth limit moved) must be accepted or refused exactly as the
//!   reference does;
//! - parsed refusing case variants (`Repeats::CaseFolded`), documents must be accepted exactly
//!   when the reference accepts them and no object has two keys with the same simple case
//!   folding (checked here with the Unicode table directly).
//!
//! `CAPGATE_PROPTEST_CASES` sets the number of cases (default 2048).

use capgate::engine::parse_json_slice_with_depth;
use capgate::tape::{Kind, NodeRef, Repeats, Tape};
use proptest::prelude::*;
use serde_json::Value;

fn cases() -> u32 {
    std::env::var("CAPGATE_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2048)
}

/// A generated document: like a `Value`, but numbers keep their text and objects may repeat
/// keys.
#[derive(Debug, Clone)]
enum Doc {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Doc>),
    Object(Vec<(String, Doc)>),
}

/// Number texts at the edges: integer limits, `-0`, float range and precision limits.
const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1.0",
    "-0.0",
    "1e400",
    "-1e400",
    "1e-400",
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551617",
    "-9223372036854775808",
    "-9223372036854775809",
    "9223372036854775807",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "1.7976931348623159e308",
    "17976931348623157e292",
    "2.2250738585072014e-308",
    "5e-324",
    "2e-324",
    "1E+2",
    "1e-0",
    "0.000001",
    "7673222765294225.0",
    "123456789012345678901234567890",
    "0e999999999999",
    "1e999999999999",
    "1e-999999999999",
    "0.1e309",
    "10e307",
    "99999999999999999999999999999999999999e270",
];

fn number_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::to_string(&f).unwrap()),
        prop::sample::select(EDGE_NUMBERS).prop_map(str::to_owned),
        // Any text of the grammar: -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?
        (
            any::<bool>(),
            "(0|[1-9][0-9]{0,25})",
            prop::option::of("[0-9]{1,25}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{1,4}")),
        )
            .prop_map(|(negative, integer, fraction, exponent)| {
                let mut text = String::new();
                if negative {
                    text.push('-');
                }
                text.push_str(&integer);
                if let Some(fraction) = fraction {
                    text.push('.');
                    text.push_str(&fraction);
                }
                if let Some((e, sign, digits)) = exponent {
                    text.push_str(&e);
                    text.push_str(&sign);
                    text.push_str(&digits);
                }
                text
            }),
    ]
}

fn text_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range(' ', '~'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => prop::sample::select(vec![
            '"', '\\', '/', '\u{7f}', 'é', '€', '😀', '\u{ffff}', '\u{fffd}', '\u{10ffff}',
            '\u{feff}', '\u{2028}', '\u{d7ff}', '\u{e000}',
        ]),
        1 => any::<char>(),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(text_char(), 0..12).prop_map(|chars| chars.into_iter().collect())
}

/// Keys: mostly from a small set, so objects often repeat one (a duplicate).
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "a", "b", "A", "é", "😀", "k1", "", "a\"b", "a\\b", "\u{7f}", "\n", "/", "email",
            // Case variants: ASCII, the KELVIN SIGN and LONG S (which fold into ASCII),
            // sharp s (whose capital folds to it; `ss` is not a variant), sigmas.
            "K1", "\u{212A}1", "É", "EMAIL", "eMail", "s", "\u{17F}", "ß", "\u{1E9E}", "ss",
            "σ", "ς", "Σ", "\u{130}", "i",
        ])
        .prop_map(str::to_owned),
        1 => text(),
    ]
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        Just(Doc::Null),
        any::<bool>().prop_map(Doc::Bool),
        number_text().prop_map(Doc::Number),
        text().prop_map(Doc::String),
    ];
    leaf.prop_recursive(6, 64, 24, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Doc::Array),
            prop::collection::vec((key(), inner), 0..6).prop_map(Doc::Object),
            // Objects past the 16-member linear duplicate scan.
            prop::collection::vec((key(), Just(Doc::Null)), 15..24).prop_map(Doc::Object),
        ]
    })
}

/// How to write a document: which whitespace goes between tokens and which characters are
/// escaped, decided by a small deterministic generator.
struct Writer {
    state: u64,
    whitespace: &'static [&'static str],
    escape_rate: u64,
    out: String,
}

impl Writer {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn space(&mut self) {
        let choice = (self.next() % self.whitespace.len() as u64) as usize;
        self.out.push_str(self.whitespace[choice]);
    }

    fn string(&mut self, text: &str) {
        self.out.push('"');
        for ch in text.chars() {
            let escape = self.escape_rate > 0 && self.next().is_multiple_of(self.escape_rate);
            match ch {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' if !escape => self.out.push_str("\\n"),
                '\t' if !escape => self.out.push_str("\\t"),
                '\u{8}' if !escape => self.out.push_str("\\b"),
                '\u{c}' if !escape => self.out.push_str("\\f"),
                '\r' if !escape => self.out.push_str("\\r"),
                '/' if escape => self.out.push_str("\\/"),
                ch if escape || ch < ' ' => {
                    let upper = self.next().is_multiple_of(2);
                    for unit in ch.encode_utf16(&mut [0; 2]) {
                        if upper {
                            self.out.push_str(&format!("\\u{unit:04X}"));
                        } else {
                            self.out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
                ch => self.out.push(ch),
            }
        }
        self.out.push('"');
    }

    fn doc(&mut self, doc: &Doc) {
        match doc {
            Doc::Null => self.out.push_str("null"),
            Doc::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Doc::Number(text) => self.out.push_str(text),
            Doc::String(text) => self.string(text),
            Doc::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.doc(item);
                    self.space();
                }
                self.out.push(']');
            }
            Doc::Object(members) => {
                self.out.push('{');
                for (i, (key, value)) in members.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.space();
                    self.string(key);
                    self.space();
                    self.out.push(':');
                    self.space();
                    self.doc(value);
                    self.space();
                }
                self.out.push('}');
            }
        }
    }
}

const WHITESPACE_STYLES: &[&[&str]] = &[
    &[""],
    &["", " "],
    &["", " ", "\n  ", "\t", "\r\n", "  \n\t "],
];

/// Writes `doc` in the style picked by `style` (whitespace and escapes) and `seed`.
fn write(doc: &Doc, style: u8, seed: u64) -> Vec<u8> {
    let mut writer = Writer {
        state: seed | 1,
        whitespace: WHITESPACE_STYLES[usize::from(style % 3)],
        escape_rate: [0, 4, 1][usize::from(style / 3 % 3)],
        out: String::new(),
    };
    writer.space();
    writer.doc(doc);
    writer.space();
    writer.out.into_bytes()
}

fn value_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Every accessor of `node` agrees with `value`.
fn check_node(node: NodeRef<'_>, value: &Value) {
    assert_eq!(node.depth(), value_depth(value), "depth of {value}");
    match value {
        Value::Null => assert_eq!(node.kind(), Kind::Null),
        Value::Bool(b) => assert_eq!(node.as_bool(), Some(*b)),
        Value::Number(n) => {
            assert_eq!(node.kind(), Kind::Number);
            assert_eq!(node.as_number().as_ref(), Some(n));
        }
        Value::String(s) => {
            assert_eq!(node.as_str().as_deref(), Some(s.as_str()));
            assert!(node.str_eq(s));
            assert!(!node.str_eq(&format!("{s}x")));
            if let Some(shorter) = s.char_indices().last().map(|(i, _)| &s[..i]) {
                assert!(!node.str_eq(shorter));
            }
        }
        Value::Array(items) => {
            assert_eq!(node.kind(), Kind::Array);
            assert_eq!(node.len(), items.len());
            assert_eq!(node.elements().count(), items.len());
            assert_eq!(node.members().count(), 0);
            for (i, (element, item)) in node.elements().zip(items).enumerate() {
                assert_eq!(node.index(i).unwrap().raw(), element.raw());
                check_node(element, item);
            }
            assert!(node.index(items.len()).is_none());
        }
        Value::Object(map) => {
            assert_eq!(node.kind(), Kind::Object);
            assert_eq!(node.len(), map.len());
            assert_eq!(node.elements().count(), 0);
            for (key, member) in node.members() {
                let name = key.as_str().unwrap();
                let expected = &map[name.as_ref()];
                assert_eq!(node.get(&name).unwrap().raw(), member.raw());
                check_node(member, expected);
            }
            assert!(node.get("\u{0}not a key\u{0}").is_none());
        }
    }
    if !matches!(value, Value::Array(_) | Value::Object(_)) {
        assert_eq!(node.len(), 0);
    }
}

/// The simple case folding of `c` (Unicode's `CaseFolding.txt`, statuses C and S).
fn fold(c: char) -> char {
    unicode_case_mapping::case_folded(c)
        .and_then(|folded| char::from_u32(folded.get()))
        .unwrap_or(c)
}

/// True when an object in `value` has two keys with the same simple case folding.
fn has_case_variants(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().any(has_case_variants),
        Value::Object(map) => {
            let mut folded = std::collections::HashSet::new();
            map.keys()
                .any(|key| !folded.insert(key.chars().map(fold).collect::<String>()))
                || map.values().any(has_case_variants)
        }
        _ => false,
    }
}

/// The tape and the reference accept/refuse `bytes` alike; when both accept, the values and
/// the accessors agree. Parsed refusing case variants, the tape accepts exactly what the
/// reference accepts without them.
fn check_against_reference(tape: &mut Tape, bytes: &[u8], max_depth: usize) -> bool {
    let reference = parse_json_slice_with_depth(bytes, max_depth);
    let folded = tape
        .parse_with(bytes, max_depth, Repeats::CaseFolded)
        .map(|doc| doc.root().to_value());
    match (&folded, &reference) {
        (Ok(ours), Ok(value)) if !has_case_variants(value) => assert_eq!(ours, value),
        (Err(_), Ok(value)) if has_case_variants(value) => {}
        (Err(_), Err(_)) => {}
        (ours, reference) => panic!(
            "tape (refusing case variants) and reference disagree on {:?}:\ntape: {ours:?}\nreference: {reference:?}",
            String::from_utf8_lossy(bytes),
        ),
    }
    let ours = tape.parse(bytes, max_depth);
    match (ours, reference) {
        (Ok(doc), Ok(value)) => {
            assert_eq!(
                doc.root().to_value(),
                value,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
            check_node(doc.root(), &value);
            true
        }
        (Err(_), Err(_)) => false,
        (ours, reference) => panic!(
            "tape and reference disagree on {:?} (depth {max_depth}):\ntape: {:?}\nreference: {:?}",
            String::from_utf8_lossy(bytes),
            ours.map(|doc| doc.root().to_value()),
            reference
        ),
    }
}

/// One way of breaking a document.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Insert(usize, u8),
    Flip(usize, u8),
    /// Re-insert the first key of the `n`-th object (escaped or not) at the object's start.
    DuplicateKey(usize, bool),
    /// Insert a case variant of the first key of the `n`-th object (its first ASCII letter's
    /// case flipped, or `k`/`s` as the KELVIN SIGN/LONG S) at the object's start.
    CaseVariantKey(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop::sample::select(vec![
        b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b' ', b'0', b'1', b'-', b'+', b'e', b'.',
        b'u', b'n', b't', b'/', 0x00, 0x1f, 0x7f, 0x80, 0xbf, 0xc3, 0xed, 0xef, 0xff, b'\t', b'\n',
        0x0b,
    ]);
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), interesting).prop_map(|(at, byte)| Mutation::Insert(at, byte)),
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<usize>(), any::<bool>()).prop_map(|(n, escape)| Mutation::DuplicateKey(n, escape)),
        any::<usize>().prop_map(Mutation::CaseVariantKey),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// The first key of the object opening at `open` (`{`), as raw text with its quotes.
fn first_key(bytes: &[u8], open: usize) -> Option<Vec<u8>> {
    let mut at = open + 1;
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut end = at + 1;
    while let Some(&byte) = bytes.get(end) {
        match byte {
            b'"' => return Some(bytes[at..=end].to_vec()),
            b'\\' => end += 2,
            _ => end += 1,
        }
    }
    None
}

fn mutate(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match *mutation {
        Mutation::Delete(at) => {
            bytes.remove(at % len);
        }
        Mutation::Insert(at, byte) => bytes.insert(at % (len + 1), byte),
        Mutation::Flip(at, bit) => bytes[at % len] ^= 1 << bit,
        Mutation::Truncate(at) => bytes.truncate(at % len),
        Mutation::CaseVariantKey(n) => {
            let opens: Vec<usize> = (0..len).filter(|&i| bytes[i] == b'{').collect();
            if opens.is_empty() {
                return;
            }
            let open = opens[n % opens.len()];
            let Some(key) = first_key(bytes, open) else {
                return;
            };
            let Some(at) = key.iter().position(u8::is_ascii_alphabetic) else {
                return;
            };
            let mut variant = key[..at].to_vec();
            match key[at] {
                b'k' if n % 3 == 0 => variant.extend_from_slice("\u{212A}".as_bytes()),
                b's' if n % 3 == 0 => variant.extend_from_slice("\u{17F}".as_bytes()),
                letter => variant.push(letter ^ 0x20),
            }
            variant.extend_from_slice(&key[at + 1..]);
            variant.extend_from_slice(b":0,");
            bytes.splice(open + 1..open + 1, variant);
        }
        Mutation::DuplicateKey(n, escape) => {
            let opens: Vec<usize> = (0..len).filter(|&i| bytes[i] == b'{').collect();
            if opens.is_empty() {
                return;
            }
            let open = opens[n % opens.len()];
            let Some(mut key) = first_key(bytes, open) else {
                return;
            };
            if escape && key.get(1).is_some_and(|b| b.is_ascii_alphanumeric()) {
                let escaped = format!("\\u{:04x}", key[1]);
                key.splice(1..2, escaped.bytes());
            }
            key.extend_from_slice(b":0,");
            bytes.splice(open + 1..open + 1, key);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Generated documents, written in any style, read the same through the tape.
    #[test]
    fn generated_documents_read_as_the_reference_reads_them(
        doc in doc(),
        style in 0u8..9,
        seed in any::<u64>(),
    ) {
        let bytes = write(&doc, style, seed);
        let mut tape = Tape::new();
        check_against_reference(&mut tape, &bytes, 136);
        // The same tape, reused, on a compact rewrite.
        check_against_reference(&mut tape, &write(&doc, 0, seed), 136);
    }

    /// Broken documents are refused (or accepted) exactly as the reference does, whatever the
    /// depth limit.
    #[test]
    fn mutated_documents_are_accepted_exactly_when_the_reference_accepts(
        doc in doc(),
        style in 0u8..9,
        seed in any::<u64>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        depth_shift in 0usize..3,
    ) {
        let mut bytes = write(&doc, style, seed);
        for mutation in &mutations {
            mutate(&mut bytes, mutation);
        }
        let mut tape = Tape::new();
        check_against_reference(&mut tape, &bytes, 136);
        // The depth limit at, just under and just over the document's own depth.
        if let Ok(value) = serde_json::from_slice::<Value>(&bytes) {
            let depth = value_depth(&value);
            let max_depth = (depth + 1).saturating_sub(depth_shift);
            check_against_reference(&mut tape, &bytes, max_depth);
        }
    }
}

#[test]
fn the_edge_numbers_read_as_the_reference_reads_them() {
    let mut tape = Tape::new();
    for text in EDGE_NUMBERS {
        check_against_reference(&mut tape, text.as_bytes(), 136);
        check_against_reference(&mut tape, format!("[{text}]").as_bytes(), 136);
    }
}
