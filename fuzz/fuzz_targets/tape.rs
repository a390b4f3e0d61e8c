//! The JSON tape (`capgate::tape`) against the strict reference parser
//! (`capgate::engine::parse_json_slice_with_depth`: serde_json with `float_roundtrip`, duplicate
//! keys refused at any depth, a nesting limit). Any difference is a parser differential: the
//! gateway would read a payload differently from the API behind it.
//!
//! Raw bytes, parsed with three depth limits (one of 0..=8 picked by the first byte, the
//! engine's own limit for requests, and 128) into a tape reused from input to input and, for
//! the first limit, into a fresh tape too. Never panics, and:
//! - the tape accepts exactly what the reference accepts (a warm and a fresh tape alike, with
//!   the same error);
//! - on accept, `to_value()` of the root equals the reference's `Value`, and for every node of
//!   the tree `depth`, `kind`, `len`, `get`, `index`, `elements`, `members`, `as_str`,
//!   `str_eq`, `as_number`, `as_bool` agree with the matching `Value`, and a
//!   scalar's `raw()` text parses back to it;
//! - parsed refusing case variants (`Repeats::CaseFolded`, the engine's rule), the tape accepts
//!   exactly what the reference accepts with no two keys of one object equal under simple case
//!   folding (checked with the Unicode table directly), with the same value.
#![no_main]

use std::cell::RefCell;

use capgate::Limits;
use capgate::engine::parse_json_slice_with_depth;
use capgate::tape::{Kind, NodeRef, Repeats, Tape};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

thread_local! {
    /// One tape for every input, as the engine reuses its thread's tape: a stale buffer or key
    /// set from an earlier parse must never change a later one.
    static WARM: RefCell<Tape> = RefCell::new(Tape::new());
}

/// The nesting depth of `value` as `NodeRef::depth` counts it: 0 for a scalar, 1 for `[]`.
fn value_depth(value: &Value) -> usize {
    // Iterative: (value, depth of its parent).
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((value, above)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(above + 1);
                stack.extend(items.iter().map(|item| (item, above + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(above + 1);
                stack.extend(map.values().map(|item| (item, above + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Strings that are not `text` but close to it: one character more, one fewer, the last one
/// changed, a NUL appended.
fn near_misses(text: &str) -> Vec<String> {
    let mut misses = vec![
        format!("{text}x"),
        format!("{text}\u{0}"),
        format!("x{text}"),
    ];
    if let Some((last, ch)) = text.char_indices().last() {
        let shorter = text.get(..last).unwrap_or_default();
        misses.push(shorter.to_owned());
        let other = if ch == 'a' { 'b' } else { 'a' };
        misses.push(format!("{shorter}{other}"));
    }
    misses
}

/// Every accessor of every node under `root` agrees with `value`.
fn check_tree(root: NodeRef<'_>, value: &Value, max_depth: usize) {
    let mut stack = vec![(root, value)];
    while let Some((node, value)) = stack.pop() {
        assert_eq!(node.depth(), value_depth(value), "depth of {value}");
        let expected_kind = match value {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        };
        assert_eq!(node.kind(), expected_kind, "kind of {value}");
        assert_eq!(node.as_bool(), value.as_bool(), "as_bool of {value}");
        assert_eq!(
            node.as_number().as_ref(),
            value.as_number(),
            "as_number of {value}"
        );
        assert_eq!(
            node.as_str().as_deref(),
            value.as_str(),
            "as_str of {value}"
        );
        match value.as_str() {
            Some(text) => {
                assert!(node.str_eq(text), "str_eq of {value}");
                for miss in near_misses(text) {
                    assert!(!node.str_eq(&miss), "str_eq({miss:?}) of {value}");
                }
            }
            None => {
                assert!(!node.str_eq(""), "str_eq on a non-string {value}");
            }
        }
        match value {
            Value::Array(items) => {
                assert_eq!(node.len(), items.len(), "len of {value}");
                assert_eq!(node.is_empty(), items.is_empty());
                assert_eq!(
                    node.elements().size_hint(),
                    (items.len(), Some(items.len()))
                );
                assert_eq!(node.elements().count(), items.len(), "elements of {value}");
                assert_eq!(node.members().count(), 0, "members of an array");
                assert!(node.get("").is_none(), "get on an array");
                for (i, (element, item)) in node.elements().zip(items).enumerate() {
                    let indexed = node.index(i);
                    let indexed = indexed.unwrap_or_else(|| panic!("index({i}) of {value}"));
                    assert_eq!(indexed.raw(), element.raw(), "index({i}) of {value}");
                    stack.push((element, item));
                }
                assert!(node.index(items.len()).is_none(), "index past the end");
            }
            Value::Object(map) => {
                assert_eq!(node.len(), map.len(), "len of {value}");
                assert_eq!(node.is_empty(), map.is_empty());
                assert_eq!(node.members().size_hint(), (map.len(), Some(map.len())));
                assert_eq!(node.members().count(), map.len(), "members of {value}");
                assert_eq!(node.elements().count(), 0, "elements of an object");
                assert!(node.index(0).is_none(), "index on an object");
                for (key, member) in node.members() {
                    assert_eq!(key.kind(), Kind::String, "a key that is not a string");
                    let name = key.as_str();
                    let name = name.unwrap_or_else(|| panic!("a key without text in {value}"));
                    let expected = map.get(name.as_ref());
                    let expected =
                        expected.unwrap_or_else(|| panic!("key {name:?} not in {value}"));
                    let got = node.get(&name);
                    let got = got.unwrap_or_else(|| panic!("get({name:?}) of {value}"));
                    assert_eq!(got.raw(), member.raw(), "get({name:?}) of {value}");
                    for miss in near_misses(&name) {
                        assert_eq!(
                            node.get(&miss).is_some(),
                            map.contains_key(&miss),
                            "get({miss:?}) of {value}"
                        );
                    }
                    stack.push((member, expected));
                }
            }
            _ => {
                assert_eq!(node.len(), 0, "len of a scalar");
                assert!(node.is_empty(), "is_empty of a scalar");
                assert_eq!(node.elements().count(), 0, "elements of a scalar");
                assert_eq!(node.members().count(), 0, "members of a scalar");
                assert!(node.index(0).is_none(), "index on a scalar");
                assert!(node.get("").is_none(), "get on a scalar");
                let again = parse_json_slice_with_depth(node.raw(), max_depth);
                assert_eq!(again.as_ref(), Ok(value), "raw text of {value}");
            }
        }
    }
}

/// The tape and the reference accept/refuse `bytes` alike with `max_depth`; on accept the
/// value and every accessor agree.
fn check(tape: &mut Tape, bytes: &[u8], max_depth: usize) {
    let reference = parse_json_slice_with_depth(bytes, max_depth);
    match (tape.parse(bytes, max_depth), reference) {
        (Ok(doc), Ok(value)) => {
            let root = doc.root();
            assert_eq!(root.to_value(), value, "to_value at max_depth {max_depth}");
            check_tree(root, &value, max_depth);
        }
        (Err(error), Err(_)) => {
            assert!(
                usize::try_from(error.offset).is_ok_and(|at| at <= bytes.len()),
                "error offset past the input: {error}"
            );
        }
        (Ok(doc), Err(reference)) => panic!(
            "the tape accepts what the reference refuses ({reference}) at max_depth \
             {max_depth}: {:?}",
            doc.root().to_value()
        ),
        (Err(error), Ok(value)) => panic!(
            "the tape refuses ({error}) what the reference accepts at max_depth {max_depth}: \
             {value:?}"
        ),
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
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                let mut folded = std::collections::HashSet::new();
                if map
                    .keys()
                    .any(|key| !folded.insert(key.chars().map(fold).collect::<String>()))
                {
                    return true;
                }
                stack.extend(map.values());
            }
            _ => {}
        }
    }
    false
}

/// Parsed refusing case variants, the tape accepts exactly what the reference accepts without
/// two keys of one object that are equal under simple case folding, with the same value.
fn check_folded(tape: &mut Tape, bytes: &[u8], max_depth: usize) {
    let reference = parse_json_slice_with_depth(bytes, max_depth);
    let folded = tape
        .parse_with(bytes, max_depth, Repeats::CaseFolded)
        .map(|doc| doc.root().to_value());
    match (folded, reference) {
        (Ok(ours), Ok(value)) => {
            assert_eq!(ours, value, "to_value refusing case variants");
            assert!(
                !has_case_variants(&value),
                "case variants accepted: {value:?}"
            );
        }
        (Err(error), Ok(value)) => assert!(
            has_case_variants(&value),
            "the tape refuses ({error}) what the reference accepts without case variants: \
             {value:?}"
        ),
        (Ok(ours), Err(reference)) => panic!(
            "the tape refusing case variants accepts what the reference refuses ({reference}): \
             {ours:?}"
        ),
        (Err(_), Err(_)) => {}
    }
}

fuzz_target!(|bytes: &[u8]| {
    let small = usize::from(bytes.first().copied().unwrap_or(0) % 9);
    let request_depth = Limits::DEFAULT.parse_depth();
    WARM.with(|warm| {
        let mut warm = warm.borrow_mut();
        for max_depth in [small, request_depth, 128] {
            check(&mut warm, bytes, max_depth);
        }
        check_folded(&mut warm, bytes, request_depth);
        // A fresh tape decides exactly as the warm one.
        let warm_result = warm.parse(bytes, small).map(|doc| doc.root().to_value());
        let mut fresh = Tape::new();
        let fresh_result = fresh.parse(bytes, small).map(|doc| doc.root().to_value());
        assert_eq!(warm_result, fresh_result, "a warm and a fresh tape differ");
    });
});
