//! Every input a fuzz target (`fuzz/`) found a bug with, kept as a named test. Each test embeds
//! the input (minimised by hand where the fuzzer's was long) and pins the fixed behaviour; the
//! comment names the target that found it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::span::SourceMap;
use capgate::{Limits, Request};

/// A manifest with one `fieldEquals` on `field`.
fn manifest_with_field(field: &str) -> String {
    format!(
        r#"{{
  "skill": {{ "name": "s", "version": "1" }},
  "capabilities": [ {{
    "name": "c",
    "resource": "https://example.com/a",
    "operations": ["GET"],
    "constraints": [ {{ "type": "fieldEquals", "field": "{field}", "value": 1 }} ]
  }} ]
}}"#
    )
}

/// Found by `manifest_json`: the span of an invalid path inside a JSON string covered one byte
/// at the error offset, splitting a multi-byte character (`Ö` is two bytes), so rendering the
/// diagnostic could slice through a character.
#[test]
fn regression_manifest_path_span_covers_whole_character() {
    // The fuzzer's input: the path `payload.attendees[` followed by `\u{5a2}\u{454}mail`.
    for field in [
        "payload.attendees[\u{5a2}\u{454}mail",
        "payload.a[Ö",
        "payload.\u{1F600}x",
    ] {
        let text = manifest_with_field(field);
        let mut sources = SourceMap::new();
        let file = sources.add("m.json", text.as_str());
        let errors =
            capgate::manifest::parse_manifest(file, &text).expect_err("the path is invalid");
        for error in &errors {
            let (start, end) = (error.span.start_usize(), error.span.end as usize);
            assert!(start <= end && end <= text.len(), "{error:?}");
            assert!(
                text.is_char_boundary(start) && text.is_char_boundary(end),
                "span {:?} splits a character of {field:?}",
                error.span
            );
        }
        let path_error = errors
            .iter()
            .find(|e| e.message.starts_with("invalid path"))
            .expect("an invalid-path error");
        // The span points into the string, at a whole character.
        let pointed = &text[path_error.span.start_usize()..path_error.span.end as usize];
        assert_eq!(
            pointed.chars().count(),
            1,
            "{path_error:?} points at {pointed:?}"
        );
    }
}

/// Found by `decide` (a request decided differently through `check` and through `check_slice`
/// on its own wire form): serde_json's default number parser can be one ulp off, so capgate
/// could read a payload number differently from the API behind the gateway, which is exactly
/// where a `fieldRange` bound decides. The crate enables serde_json's `float_roundtrip`.
#[test]
fn regression_json_numbers_parse_to_the_nearest_double() {
    for text in [
        "4.846394912523539e-101",
        "1000.0000000000001",
        "0.30000000000000004",
        "2.2250738585072014e-308",
        "9007199254740993.0",
    ] {
        let wire = format!(
            r#"{{"skill":"s","operation":"GET","resource":"https://example.com/","payload":{{"n":{text}}}}}"#
        );
        let request = Request::from_slice(wire.as_bytes(), &Limits::DEFAULT).unwrap();
        let expected: f64 = text.parse().unwrap();
        assert_eq!(
            request.payload["n"].as_f64().unwrap().to_bits(),
            expected.to_bits(),
            "`{text}` parsed to another double"
        );
    }
}
