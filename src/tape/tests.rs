//! Edge cases of the tape parser, each checked against the reference parser too.

use std::borrow::Cow;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::engine::parse_json_slice_with_depth;

/// The default limit of the request parser (payload limit + headroom).
const DEPTH: usize = 136;

/// Parses `bytes` on a fresh tape into a `Value`.
fn tape_with_depth(bytes: &[u8], max_depth: usize) -> Result<Value, TapeError> {
    let mut tape = Tape::new();
    tape.parse(bytes, max_depth)
        .map(|doc| doc.root().to_value())
}

/// Asserts the tape accepts `bytes` exactly when the reference does, with the same value, and
/// returns the tape's result.
fn agree_with_depth(bytes: &[u8], max_depth: usize) -> Result<Value, TapeError> {
    let ours = tape_with_depth(bytes, max_depth);
    let reference = parse_json_slice_with_depth(bytes, max_depth);
    match (&ours, &reference) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{:?}", String::from_utf8_lossy(bytes)),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "disagree on {:?}: tape {ours:?}, reference {reference:?}",
            String::from_utf8_lossy(bytes)
        ),
    }
    ours
}

fn agree(bytes: &[u8]) -> Result<Value, TapeError> {
    agree_with_depth(bytes, DEPTH)
}

fn accepted(text: &str) -> Value {
    agree(text.as_bytes()).unwrap()
}

fn refused(bytes: &[u8]) -> TapeError {
    agree(bytes).unwrap_err()
}

#[test]
fn simple_escapes_decode_like_serde_json() {
    assert_eq!(
        accepted(r#""\"\\\/\b\f\n\r\t""#),
        json!("\"\\/\u{8}\u{c}\n\r\t")
    );
    assert_eq!(accepted(r#""\u0041\u00e9\u00E9\u20ac""#), json!("Aéé€"));
    assert_eq!(accepted(r#""a\/b""#), json!("a/b"));
}

#[test]
fn unknown_escapes_and_bad_hex_are_refused() {
    for text in [
        r#""\a""#,
        r#""\x41""#,
        r#""\u00g0""#,
        r#""\u12""#,
        r#""\"#,
        r#""\u""#,
    ] {
        refused(text.as_bytes());
    }
    assert_eq!(refused(br#""\q""#).kind, ErrorKind::InvalidEscape);
}

#[test]
fn surrogate_pairs_decode_to_one_character() {
    assert_eq!(accepted(r#""\ud83d\ude00""#), json!("😀"));
    assert_eq!(accepted(r#""\uD83D\uDE00x""#), json!("😀x"));
    assert_eq!(accepted(r#""\udbff\udfff""#), json!("\u{10ffff}"));
}

#[test]
fn lone_and_mismatched_surrogates_are_refused() {
    for text in [
        r#""\ud800""#,       // high surrogate, then the end of the string
        r#""\ud800x""#,      // high surrogate, then a character
        r#""\ud800\n""#,     // high surrogate, then another escape
        r#""\ud800\u0041""#, // high surrogate, then a non-surrogate
        r#""\ud800\ud800""#, // two high surrogates
        r#""\udc00""#,       // low surrogate alone
        r#""\ude00\ud83d""#, // a pair in the wrong order
        r#""\ud800\udc0""#,  // truncated low surrogate
    ] {
        let error = refused(text.as_bytes());
        assert!(
            matches!(
                error.kind,
                ErrorKind::LoneSurrogate | ErrorKind::InvalidEscape | ErrorKind::UnexpectedEnd
            ),
            "{text}: {error}"
        );
    }
}

#[test]
fn control_characters_in_strings_are_refused_and_del_is_not() {
    for byte in 0u8..0x20 {
        let text = [b'"', b'a', byte, b'"'];
        assert_eq!(refused(&text).kind, ErrorKind::ControlCharacter, "{byte}");
    }
    assert_eq!(accepted("\"a\u{7f}b\""), json!("a\u{7f}b"));
}

#[test]
fn invalid_utf8_in_strings_is_refused() {
    for bytes in [
        b"\"\xff\"".as_slice(),
        b"\"\xc3\"",             // truncated two-byte sequence
        b"\"\xc3(\"",            // bad continuation
        b"\"\xc0\xaf\"",         // overlong
        b"\"\xed\xa0\x80\"",     // an encoded surrogate (CESU-8)
        b"\"\xf4\x90\x80\x80\"", // above U+10FFFF
        b"\"abcdefgh\xe2\x82\"", // truncated after the SWAR chunk
        b"\"\xc3\\n\xa9\"",      // an escape cannot complete a sequence
    ] {
        assert_eq!(refused(bytes).kind, ErrorKind::InvalidUtf8, "{bytes:?}");
    }
    assert_eq!(
        accepted("\"é€😀 and some ascii after\""),
        json!("é€😀 and some ascii after")
    );
}

#[test]
fn invalid_utf8_is_reported_at_its_first_bad_byte_at_any_position() {
    // The vectorised check reads 64-byte blocks: bad bytes before, inside and after the first
    // blocks, after ASCII and after multi-byte characters, are all found where they are.
    for prefix in ["", "é", "€😀"] {
        for pad in 0..150 {
            let good = format!("{prefix}{}", "a".repeat(pad));
            for bad in [&b"\xff"[..], b"\xc3(", b"\xed\xa0\x80"] {
                let mut bytes = format!("\"{good}").into_bytes();
                bytes.extend_from_slice(bad);
                bytes.extend_from_slice(b"tail\"");
                let error = refused(&bytes);
                assert_eq!(error.kind, ErrorKind::InvalidUtf8, "{bytes:?}");
                assert_eq!(error.offset as usize, 1 + good.len(), "{bytes:?}");
            }
        }
    }
}

#[test]
fn non_ascii_bytes_outside_strings_are_refused() {
    refused(b"[1,\xc3\xa9]");
    refused("é".as_bytes());
}

#[test]
fn duplicate_raw_keys_are_refused_in_small_objects() {
    let error = refused(br#"{"a":1,"b":2,"a":3}"#);
    assert_eq!(error.kind, ErrorKind::DuplicateKey("a".into()));
    assert_eq!(error.offset, 13);
    assert!(error.to_string().contains("duplicate key `a`"), "{error}");
}

#[test]
fn duplicate_keys_are_compared_after_decoding_escapes() {
    assert!(
        refused(br#"{"a":1,"\u0061":2}"#)
            .to_string()
            .contains("duplicate key `a`")
    );
    refused(br#"{"\u0061":1,"a":2}"#);
    refused(br#"{"\u00e9":1,"\u00E9":2}"#);
    refused("{\"\\ud83d\\ude00\":1,\"😀\":2}".as_bytes());
    refused(br#"{"a\/b":1,"a/b":2}"#);
    // Equal escapes of different strings are not duplicates.
    accepted(r#"{"\u0061":1,"\u0062":2,"a\n":3,"a\\n":4}"#);
}

#[test]
fn duplicates_are_found_among_keys_that_share_a_filter_bit() {
    // `start` and `state` share their one-word filter bit (length and first two bytes mixed):
    // a key with that bit is compared with the earlier keys that have it, and only those, so
    // the duplicate is found wherever it stands.
    assert_eq!(
        scan::key_filter_bit(b"start"),
        scan::key_filter_bit(b"state")
    );
    accepted(r#"{"start":1,"state":2}"#);
    refused(br#"{"start":1,"state":2,"x":0,"state":3}"#);
    refused(br#"{"state":2,"start":1,"x":0,"start":3}"#);
    // Earlier keys with escapes are always compared, whatever their bit.
    refused(br#"{"st\u0061rt":1,"x":0,"start":2}"#);
    refused(br#"{"start":1,"x":0,"st\u0061rt":2}"#);
    // Keys of no byte or one byte: the filter reads no byte past the key's body.
    refused(br#"{"":1,"" :2}"#);
    refused(br#"{"a":1,"a" :2}"#);
    accepted(r#"{"":1,"a":2,"b" :3}"#);
    // Fifteen distinct names (an object small enough for the linear scan) are accepted, and
    // any one of them repeated at the end is refused.
    let names: Vec<String> = (b'a'..=b'z')
        .map(|c| (c as char).to_string())
        .chain((b'a'..=b'l').map(|c| format!("{}{}", c as char, (c + 1) as char)))
        .take(15)
        .collect();
    let members: Vec<String> = names.iter().map(|n| format!(r#""{n}":0"#)).collect();
    accepted(&format!("{{{}}}", members.join(",")));
    for name in &names {
        refused(format!(r#"{{{},"{name}":1}}"#, members.join(",")).as_bytes());
    }
}

#[test]
fn lookups_find_members_by_their_decoded_keys_among_look_alikes() {
    // Keys alike in length and in their first, second and last bytes; escaped keys; long keys.
    let long_a = format!("ab{}z", "c".repeat(300));
    let long_b = format!("ab{}z", "c".repeat(301));
    let text = format!(
        r#"{{"abcd":1,"abxd":2,"a\u0062yd":3,"{long_a}":4,"{long_b}":5,"":6,"\u00e9t\u00e9":7}}"#
    );
    let mut tape = Tape::new();
    let doc = tape.parse(text.as_bytes(), DEPTH).unwrap();
    let root = doc.root();
    let number = |key: &str| root.get(key).and_then(|v| v.as_number()?.as_u64());
    assert_eq!(number("abcd"), Some(1));
    assert_eq!(number("abxd"), Some(2));
    assert_eq!(number("abyd"), Some(3));
    assert_eq!(number(&long_a), Some(4));
    assert_eq!(number(&long_b), Some(5));
    assert_eq!(number(""), Some(6));
    assert_eq!(number("été"), Some(7));
    for absent in ["abzd", "abc", "abcde", "a", "ete", r"\u0062"] {
        assert_eq!(root.get(absent).map(NodeRef::kind), None, "{absent}");
    }
}

#[test]
fn duplicate_keys_are_refused_at_any_depth_but_not_across_objects() {
    refused(br#"{"x":[{"a":{"b":1,"b":2}}]}"#);
    accepted(r#"{"a":{"a":1},"b":{"a":2},"c":[{"a":3},{"a":4}]}"#);
}

/// An object with `count` distinct keys `k0`, `k1`, ..., then `extra` members.
fn large_object(count: usize, extra: &str) -> String {
    let members: Vec<String> = (0..count).map(|i| format!(r#""k{i}":{i}"#)).collect();
    format!("{{{}{extra}}}", members.join(","))
}

#[test]
fn duplicate_keys_are_refused_in_objects_past_the_linear_scan() {
    for count in [15, 16, 17, 18, 100, 5000] {
        assert_eq!(
            accepted(&large_object(count, ""))
                .as_object()
                .unwrap()
                .len(),
            count
        );
        let last = format!("k{}", count - 1);
        for key in ["k0", "k\\u0030", "k1\\u0030", last.as_str()] {
            let text = large_object(count, &format!(r#","{key}":true"#));
            let error = refused(text.as_bytes());
            assert!(
                error.to_string().contains("duplicate key `k"),
                "{count} {key}: {error}"
            );
        }
    }
}

#[test]
fn large_objects_nested_in_large_objects_keep_their_keys_apart() {
    let inner = large_object(40, "");
    let members: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{inner}"#)).collect();
    let text = format!("{{{}}}", members.join(","));
    accepted(&text);
    let text = format!("{{{},\"k39\":0}}", members.join(","));
    refused(text.as_bytes());
}

/// Parses `text` on a fresh tape refusing case variants ([`Repeats::CaseFolded`]).
fn parse_folded(text: &str) -> Result<Value, TapeError> {
    let mut tape = Tape::new();
    tape.parse_with(text.as_bytes(), DEPTH, Repeats::CaseFolded)
        .map(|doc| {
            assert_eq!(doc.repeats(), Repeats::CaseFolded);
            doc.root().to_value()
        })
}

#[test]
fn case_variant_keys_are_refused_when_folding_in_objects_of_any_size() {
    // Pairs of keys equal under simple case folding, raw or escaped: ASCII case, the KELVIN
    // SIGN and LONG S (which fold into ASCII), capital sharp s, final sigma.
    let pairs = [
        ("amount", "Amount"),
        ("amount", "AMOUNT"),
        ("Amount", r"\u0061mount"),
        ("kind", "\u{212A}ind"),
        ("kind", r"\u212Aind"),
        ("KIND", r"\u212a\u0069nd"),
        ("sum", "\u{17F}um"),
        ("SUM", r"\u017fum"),
        ("ß", "\u{1E9E}"),
        ("σ", "Σ"),
        ("ς", r"\u03a3"),
        ("x", "X"),
    ];
    for count in [0, 3, 14, 15, 16, 17, 40, 1000] {
        let filler = large_object(count, "");
        let filler = filler.trim_start_matches('{').trim_end_matches('}');
        let comma = if filler.is_empty() { "" } else { "," };
        for (first, second) in pairs {
            for (a, b) in [(first, second), (second, first)] {
                // The variants at the start, apart, and at the end of the object.
                for text in [
                    format!(r#"{{"{a}":1,"{b}":2{comma}{filler}}}"#),
                    format!(r#"{{"{a}":1{comma}{filler},"{b}":2}}"#),
                    format!(r#"{{{filler}{comma}"{a}":1,"{b}":2}}"#),
                ] {
                    // Read as two names where repeats are exact, as the reference reads them.
                    assert_eq!(
                        accepted(&text).as_object().unwrap().len(),
                        count + 2,
                        "{text}"
                    );
                    let error = parse_folded(&text).unwrap_err();
                    assert!(
                        matches!(error.kind, ErrorKind::CaseVariantKey(_)),
                        "{count} {a} {b}: {error}"
                    );
                }
            }
        }
    }
    // An exact repeat is still a duplicate when folding.
    let error = parse_folded(r#"{"a":1,"b":2,"a":3}"#).unwrap_err();
    assert_eq!(error.kind, ErrorKind::DuplicateKey("a".into()));
    // Deep inside, and named in the error.
    let error = parse_folded(r#"{"x":[{"y":{"role":"user","ROLE":"admin"}}]}"#).unwrap_err();
    assert_eq!(error.kind, ErrorKind::CaseVariantKey("ROLE".into()));
}

#[test]
fn names_that_differ_other_than_by_simple_case_folding_are_accepted_when_folding() {
    // `@` and `` ` ``, `[` and `{` differ in the bit that is case for letters; `ß` is `ss` only
    // under full folding; `İ` folds only under Turkic rules; same names in different objects.
    for text in [
        r#"{"a@":1,"a`":2}"#,
        r#"{"[":1,"{":2}"#,
        r#"{"amount":1,"amounts":2,"amoun":3,"am0unt":4}"#,
        r#"{"ss":1,"ß":2}"#,
        r#"{"i":1,"\u0130":2}"#,
        r#"{"e":1,"é":2,"E\u0301":3}"#,
        r#"{"a":{"a":1},"c":[{"A":2},{"b":3}]}"#,
    ] {
        assert_eq!(parse_folded(text).unwrap(), accepted(text), "{text}");
    }
    let names: Vec<String> = (0..2000).map(|i| format!("Key{i}")).collect();
    let members: Vec<String> = names.iter().map(|n| format!(r#""{n}":0"#)).collect();
    let text = format!("{{{}}}", members.join(","));
    assert_eq!(parse_folded(&text).unwrap(), accepted(&text));
}

#[test]
fn many_case_variants_of_one_name_end_the_parse_at_the_first_pair() {
    // 2^12 spellings of one twelve-letter name: folded, they all hash alike; the first pair
    // ends the parse, so the rest cost nothing (no quadratic comparison of the variants).
    let name = "abcdefghijkl";
    let members: Vec<String> = (0..4096u32)
        .map(|bits| {
            let spelt: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if bits >> i & 1 == 1 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            format!(r#""{spelt}":0"#)
        })
        .collect();
    let text = format!(r#"{{"pad0":0,"pad1":0,{}}}"#, members.join(","));
    let mut tape = Tape::new();
    let error = tape
        .parse_with(text.as_bytes(), DEPTH, Repeats::CaseFolded)
        .unwrap_err();
    assert_eq!(error.kind, ErrorKind::CaseVariantKey("Abcdefghijkl".into()));
    assert_eq!(
        tape.parse(text.as_bytes(), DEPTH).unwrap().root().len(),
        4098
    );
}

#[test]
fn duplicate_key_names_are_cut_to_64_characters() {
    let key = "é".repeat(100);
    let text = format!(r#"{{"{key}":1,"{key}":2}}"#);
    let error = refused(text.as_bytes());
    let shown = format!("{}…", "é".repeat(64));
    assert_eq!(error.kind, ErrorKind::DuplicateKey(shown));
}

#[test]
fn a_duplicate_key_is_reported_before_a_too_deep_value() {
    let deep = "[".repeat(300);
    let text = format!(r#"{{"a":1,"a":{deep}"#);
    let error = refused(text.as_bytes());
    assert!(matches!(error.kind, ErrorKind::DuplicateKey(_)), "{error}");
}

#[test]
fn nesting_at_the_depth_limit_is_accepted_and_one_deeper_is_refused() {
    for limit in [0, 1, 2, 5, 136] {
        let at = format!("{}{}", "[".repeat(limit), "]".repeat(limit));
        let over = format!("{}{}", "[".repeat(limit + 1), "]".repeat(limit + 1));
        if limit > 0 {
            agree_with_depth(at.as_bytes(), limit).unwrap();
        }
        let error = agree_with_depth(over.as_bytes(), limit).unwrap_err();
        assert!(error.to_string().contains("nested too deeply"), "{error}");
        assert_eq!(error.offset, u32::try_from(limit).unwrap());
    }
    let objects = r#"{"a":{"b":{"c":[]}}}"#;
    agree_with_depth(objects.as_bytes(), 4).unwrap();
    agree_with_depth(objects.as_bytes(), 3).unwrap_err();
    agree_with_depth(b"1", 0).unwrap();
}

#[test]
fn a_hundred_thousand_open_brackets_do_not_overflow_the_stack() {
    let open = "[".repeat(100_000);
    assert!(
        refused(open.as_bytes())
            .to_string()
            .contains("nested too deeply")
    );
    let nested = format!("{open}{}", "]".repeat(100_000));
    let mut tape = Tape::new();
    let doc = tape.parse(nested.as_bytes(), usize::MAX).unwrap();
    assert_eq!(doc.root().depth(), 100_000);
    assert_eq!(doc.root().index(0).unwrap().depth(), 99_999);
    let mut tape = Tape::new();
    assert!(tape.parse(open.as_bytes(), usize::MAX).is_err());
}

#[test]
fn numbers_read_exactly_as_serde_json_reads_them() {
    assert_eq!(accepted("-0"), json!(-0.0));
    assert_eq!(accepted("0"), json!(0));
    assert_eq!(accepted("1.0"), json!(1.0));
    assert_eq!(accepted("1e-400"), json!(0.0));
    assert_eq!(accepted("18446744073709551615"), json!(u64::MAX));
    assert_eq!(
        accepted("18446744073709551616"),
        json!(18_446_744_073_709_551_616.0)
    );
    assert_eq!(
        accepted("18446744073709551617"),
        json!(18_446_744_073_709_551_616.0)
    );
    assert_eq!(accepted("-9223372036854775808"), json!(i64::MIN));
    assert_eq!(
        accepted("-9223372036854775809"),
        json!(-9_223_372_036_854_775_809.0)
    );
    assert_eq!(
        accepted("7673222765294225.0"),
        json!(7_673_222_765_294_225.0)
    );
    for text in [
        "1E5",
        "1e+5",
        "-1.5e-5",
        "0.0",
        "123.456e7",
        "1e308",
        "1.7976931348623157e308",
        "1.7976931348623158e308",
        "0e999999999999",
        "0.000e400",
        "1e-999999999999",
        "-0.0e-0",
        "100000000000000000000000000000",
        "0.1e309",
    ] {
        accepted(text);
    }
}

#[test]
fn numbers_out_of_f64_range_are_refused() {
    for text in [
        "1e400",
        "-1e400",
        "1.7976931348623159e308",
        "1e999999999999",
        "10e308",
        "[1e309]",
    ] {
        assert_eq!(
            refused(text.as_bytes()).kind,
            ErrorKind::NumberOutOfRange,
            "{text}"
        );
    }
    let digits = format!("1{}", "0".repeat(399));
    assert_eq!(refused(digits.as_bytes()).kind, ErrorKind::NumberOutOfRange);
    let digits = format!("1{}", "0".repeat(300));
    accepted(&digits);
}

#[test]
fn numbers_off_the_json_grammar_are_refused() {
    for text in [
        "01",
        "-01",
        "00",
        "1.",
        ".5",
        "-",
        "+1",
        "1.e5",
        "1e",
        "1e+",
        "-e5",
        "0x10",
        "1.5.5",
        "NaN",
        "Infinity",
        "-Infinity",
        "1_000",
        "[01]",
        "[1.]",
        "[-]",
        "{\"a\":1e}",
    ] {
        refused(text.as_bytes());
    }
}

#[test]
fn literals_must_be_spelt_exactly() {
    assert_eq!(accepted("[true,false,null]"), json!([true, false, null]));
    for text in ["tru", "True", "nul", "nulll", "[fals]", "[truex]", "n"] {
        refused(text.as_bytes());
    }
}

#[test]
fn trailing_garbage_after_the_value_is_refused() {
    for text in ["1 2", "{} x", "[]]", "{}}", "\"a\"\"b\"", "null,", "1\u{0}"] {
        refused(text.as_bytes());
    }
    assert_eq!(refused(b"{} x").kind, ErrorKind::TrailingCharacters);
}

#[test]
fn only_json_whitespace_is_skipped() {
    assert_eq!(
        accepted(" \t\r\n{ \"a\" \n:\t[ 1 ,\r2 ] , \"b\" : { } } \n"),
        json!({"a": [1, 2], "b": {}})
    );
    for text in ["\u{c}1", "1\u{b}", "\u{a0}1", "[1,\u{85}2]", "\u{2028}1"] {
        refused(text.as_bytes());
    }
    // Every other byte at or below a space, at every place whitespace may stand (the skip
    // looks further only at such bytes).
    for byte in (0u8..=b' ').filter(|b| !b" \t\n\r".contains(b)) {
        let c = char::from(byte);
        for text in [
            format!("{c}[1]"),
            format!("[{c}1]"),
            format!("[1{c}]"),
            format!("[1,{c}2]"),
            format!("{{{c}\"a\":1}}"),
            format!("{{\"a\"{c}:1}}"),
            format!("{{\"a\":{c}1}}"),
            format!("[1]{c}"),
        ] {
            refused(text.as_bytes());
        }
    }
}

#[test]
fn empty_and_whitespace_only_input_is_refused() {
    assert_eq!(refused(b"").kind, ErrorKind::UnexpectedEnd);
    refused(b"   \n");
}

#[test]
fn a_byte_order_mark_is_refused() {
    refused(b"\xef\xbb\xbf{}");
    refused("\u{feff}1".as_bytes());
}

#[test]
fn unclosed_and_malformed_containers_are_refused() {
    for text in [
        "[",
        "[1",
        "[1,",
        "[1,]",
        "[,1]",
        "{",
        "{\"a\"",
        "{\"a\":",
        "{\"a\":1",
        "{\"a\":1,}",
        "{,}",
        "{1:2}",
        "{\"a\" 1}",
        "{\"a\":1 \"b\":2}",
        "[1 2]",
        "]",
        "}",
        "\"abc",
        "[}",
        "{]",
    ] {
        refused(text.as_bytes());
    }
}

#[test]
fn inputs_longer_than_u32_offsets_are_refused() {
    let error = scan::check_length(usize::try_from(u64::from(u32::MAX) + 1).unwrap()).unwrap_err();
    assert!(matches!(error.kind, ErrorKind::TooLong(_)), "{error}");
    assert!(scan::check_length(usize::try_from(u32::MAX).unwrap()).is_ok());
}

#[test]
fn accessors_read_members_elements_and_scalars() {
    let text = br#" {"s":"plain","e":"a\nb","n":-12.5e1,"t":true,"f":false,"z":null,
        "arr":[1,[2,[3]],{"k":"v"}],"o":{}} "#;
    let mut tape = Tape::new();
    let doc = tape.parse(text, DEPTH).unwrap();
    let root = doc.root();
    assert_eq!(root.kind(), Kind::Object);
    assert_eq!(root.len(), 8);
    assert_eq!(root.depth(), 4);
    assert!(matches!(
        root.get("s").unwrap().as_str(),
        Some(Cow::Borrowed("plain"))
    ));
    assert_eq!(root.get("e").unwrap().as_str().unwrap(), "a\nb");
    assert!(root.get("e").unwrap().str_eq("a\nb"));
    assert!(!root.get("e").unwrap().str_eq("a\\nb"));
    assert!(root.get("s").unwrap().str_eq("plain"));
    assert_eq!(root.get("e").unwrap().raw(), br#""a\nb""#);
    assert_eq!(
        root.get("n").unwrap().as_number().unwrap(),
        serde_json::Number::from_f64(-125.0).unwrap()
    );
    assert_eq!(root.get("n").unwrap().raw(), b"-12.5e1");
    assert_eq!(root.get("t").unwrap().as_bool(), Some(true));
    assert_eq!(root.get("f").unwrap().as_bool(), Some(false));
    assert_eq!(root.get("z").unwrap().kind(), Kind::Null);
    assert_eq!(root.get("z").unwrap().as_bool(), None);
    assert!(root.get("missing").is_none());
    let arr = root.get("arr").unwrap();
    assert_eq!(arr.len(), 3);
    assert_eq!(arr.depth(), 3);
    assert_eq!(arr.index(1).unwrap().raw(), b"[2,[3]]");
    assert_eq!(
        arr.index(2).unwrap().get("k").unwrap().as_str().unwrap(),
        "v"
    );
    assert!(arr.index(3).is_none());
    assert_eq!(arr.elements().count(), 3);
    assert_eq!(arr.members().count(), 0);
    assert!(arr.get("k").is_none());
    let keys: Vec<String> = root
        .members()
        .map(|(k, _)| k.as_str().unwrap().into_owned())
        .collect();
    assert_eq!(keys, ["s", "e", "n", "t", "f", "z", "arr", "o"]);
    assert_eq!(root.get("o").unwrap().depth(), 1);
    assert!(root.get("o").unwrap().is_empty());
    assert_eq!(root.get("s").unwrap().depth(), 0);
    assert_eq!(root.get("s").unwrap().elements().count(), 0);
    assert_eq!(root.get("s").unwrap().as_number(), None);
    assert_eq!(root.get("n").unwrap().as_str(), None);
    assert!(!root.get("n").unwrap().str_eq("-12.5e1"));
}

#[test]
fn get_compares_decoded_keys() {
    let mut tape = Tape::new();
    let doc = tape.parse(br#"{"\u0061b":1,"c\"d":2}"#, DEPTH).unwrap();
    assert_eq!(doc.root().get("ab").unwrap().raw(), b"1");
    assert_eq!(doc.root().get("c\"d").unwrap().raw(), b"2");
    assert!(doc.root().get("\\u0061b").is_none());
    // Plain keys before, between and after escaped ones; a key absent from such an object.
    let doc = tape
        .parse(br#"{"a":0,"\u0062":1,"c":2,"d\/e":3,"f":4}"#, DEPTH)
        .unwrap();
    let root = doc.root();
    for (key, value) in [
        ("a", b"0"),
        ("b", b"1"),
        ("c", b"2"),
        ("d/e", b"3"),
        ("f", b"4"),
    ] {
        assert_eq!(root.get(key).unwrap().raw(), value, "{key}");
    }
    assert!(root.get("g").is_none());
    assert!(root.get("d\\/e").is_none());
}

#[test]
fn a_warm_tape_does_not_grow_for_an_input_no_bigger_than_before() {
    let big = format!(
        r#"{{"a":[{}],"b":{},"c":"x"}}"#,
        "[1,2,{\"q\":3}],".repeat(50) + "0",
        large_object(100, "")
    );
    let mut tape = Tape::new();
    tape.parse(big.as_bytes(), DEPTH).unwrap();
    let capacities = (tape.nodes.capacity(), tape.stack.capacity());
    for _ in 0..3 {
        tape.parse(big.as_bytes(), DEPTH).unwrap();
        tape.parse(br#"{"x":[1,2,3]}"#, DEPTH).unwrap();
        assert!(tape.parse(br#"{"x":[1,2,3]"#, DEPTH).is_err());
    }
    assert_eq!((tape.nodes.capacity(), tape.stack.capacity()), capacities);
}

#[test]
fn a_failed_parse_leaves_the_tape_reusable() {
    let mut tape = Tape::new();
    assert!(tape.parse(br#"{"a":[1,2"#, DEPTH).is_err());
    let doc = tape.parse(br#"{"a":[1,2]}"#, DEPTH).unwrap();
    assert_eq!(doc.root().to_value(), json!({"a": [1, 2]}));
}

#[test]
fn errors_are_lowercase_one_line_with_the_offset() {
    let error = refused(b"[1,]");
    assert_eq!(error.to_string(), "expected a value at byte 3");
}

/// The parser reads each number once and keeps its value in the node; what it keeps must be
/// exactly what serde_json reads from the text (its integer forms, `-0` as a float, floats
/// correctly rounded, integers past 64 bits as floats).
#[test]
fn a_number_keeps_exactly_the_value_serde_json_reads() {
    for text in [
        "0",
        "-0",
        "1",
        "-1",
        "999999999999999999",
        "-999999999999999999",
        "1000000000000000000",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1.0",
        "-0.0",
        "0.1",
        "1e2",
        "1E-2",
        "2.5e-324",
        "1e-400",
        "1.7976931348623157e308",
        "9007199254740993.0",
        "7673222765294225.0",
        "100.00000000000000001",
        "0.30000000000000004",
        "123456789012345678901234567890",
    ] {
        let mut tape = Tape::new();
        let doc = tape.parse(text.as_bytes(), 8).unwrap();
        let expected = serde_json::Number::from_str(text).unwrap();
        let got = doc.root().as_number().unwrap();
        assert_eq!(got, expected, "{text}");
        assert_eq!(doc.root().len(), 0, "{text}");
        assert_eq!(doc.root().depth(), 0, "{text}");
    }
}

proptest! {
    #[test]
    fn random_numbers_keep_serde_jsons_value(
        text in r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?",
    ) {
        let Ok(expected) = serde_json::Number::from_str(&text) else {
            return Ok(());
        };
        let mut tape = Tape::new();
        let doc = tape.parse(text.as_bytes(), 8).unwrap();
        prop_assert_eq!(doc.root().as_number().unwrap(), expected, "{}", text);
    }
}
