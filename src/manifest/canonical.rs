//! The canonical text of a skill's JSON manifest form: what its revision hashes.
//!
//! Compact JSON (no spaces) whose object keys are in byte order at every depth, written straight
//! into any [`io::Write`] — for the revision, a hasher — without building a `serde_json::Value`
//! or a `String` first. The bytes are those of `skill_to_json(skill)?.to_string()` in a build
//! whose serde_json maps are sorted (capgate's own), so no revision changes; unlike that text,
//! they stay the same when a crate linked beside capgate turns on serde_json's `preserve_order`
//! (Cargo unifies features, and cedar-policy is one such crate), under which a `Map` keeps
//! insertion order and the revision followed the source order of a payload schema's keys.

use std::io;

use serde_json::Value;

use super::emit::{Out, skill_out};
use super::error::ManifestError;
use crate::syntax::ast::Skill;

/// A skill's manifest form, ready to be written canonically ([`CanonicalSkill::write_to`]).
pub(crate) struct CanonicalSkill(Out);

impl CanonicalSkill {
    /// The manifest form of `skill`; an error for what the JSON form cannot express.
    pub(crate) fn new(skill: &Skill) -> Result<CanonicalSkill, ManifestError> {
        skill_out(skill).map(CanonicalSkill)
    }

    /// Writes the canonical text to `out`.
    pub(crate) fn write_to(&self, out: &mut impl io::Write) -> io::Result<()> {
        write_out(&self.0, out)
    }
}

fn write_out(node: &Out, out: &mut impl io::Write) -> io::Result<()> {
    match node {
        Out::Scalar(value) => write_value(value, out),
        Out::Array(items) => write_array(items, out, write_out),
        Out::Object(members) => write_object(
            members.iter().map(|(key, value)| (key.as_str(), value)),
            out,
            write_out,
        ),
    }
}

fn write_value(value: &Value, out: &mut impl io::Write) -> io::Result<()> {
    match value {
        Value::Array(items) => write_array(items, out, write_value),
        Value::Object(map) => write_object(
            map.iter().map(|(key, value)| (key.as_str(), value)),
            out,
            write_value,
        ),
        scalar => serde_json::to_writer(out, scalar).map_err(io::Error::from),
    }
}

fn write_array<T, W: io::Write>(
    items: &[T],
    out: &mut W,
    write: fn(&T, &mut W) -> io::Result<()>,
) -> io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        write(item, out)?;
    }
    out.write_all(b"]")
}

/// An object with its members in key order. Of members with the same key the last one given is
/// written, as `Map::insert` keeps it (the manifest form never repeats a key).
fn write_object<'a, T: 'a, W: io::Write>(
    members: impl Iterator<Item = (&'a str, &'a T)>,
    out: &mut W,
    write: fn(&T, &mut W) -> io::Result<()>,
) -> io::Result<()> {
    let mut members: Vec<(&str, &T)> = members.collect();
    // Stable: members with equal keys keep their order, so the last of each run is the last given.
    members.sort_by(|a, b| a.0.cmp(b.0));
    out.write_all(b"{")?;
    let mut first = true;
    for (i, &(key, value)) in members.iter().enumerate() {
        if members.get(i + 1).is_some_and(|next| next.0 == key) {
            continue;
        }
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, key).map_err(io::Error::from)?;
        out.write_all(b":")?;
        write(value, out)?;
    }
    out.write_all(b"}")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Out, write_out};

    fn text(node: &Out) -> String {
        let mut bytes = Vec::new();
        write_out(node, &mut bytes).unwrap_or_else(|e| panic!("{e}"));
        String::from_utf8(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    fn scalar(value: Value) -> Out {
        Out::Scalar(value)
    }

    #[test]
    fn regression_canonical_text_sorts_keys_whatever_the_member_order() {
        // Members in reverse key order, as a payload schema written `{"type": ..., "required":
        // ...}` reaches the manifest form when serde_json keeps insertion order.
        let reversed = Out::Object(vec![
            ("type".to_owned(), scalar(json!("object"))),
            (
                "required".to_owned(),
                Out::Array(vec![scalar(json!("items"))]),
            ),
            (
                "properties".to_owned(),
                Out::Object(vec![
                    ("zeta".to_owned(), scalar(json!(1))),
                    ("Zeta".to_owned(), scalar(json!(2.5))),
                    ("é".to_owned(), scalar(json!(null))),
                    ("a\"b".to_owned(), scalar(json!(true))),
                ]),
            ),
        ]);
        let expected = r#"{"properties":{"Zeta":2.5,"a\"b":true,"zeta":1,"é":null},"required":["items"],"type":"object"}"#;
        assert_eq!(text(&reversed), expected);
        // The same document as a sorted `Value` prints the same bytes.
        let value: Value = serde_json::from_str(expected).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(value.to_string(), expected);
    }

    #[test]
    fn a_value_nested_in_a_scalar_is_written_canonically_too() {
        let node = Out::Array(vec![
            scalar(json!({"b": [1, {"d": 1, "c": "x"}], "a": {}})),
            scalar(json!([])),
            scalar(json!("line\nbreak \u{7f} \u{1}")),
            scalar(json!(-0.0)),
            scalar(json!(18_446_744_073_709_551_615_u64)),
        ]);
        let expected = "[{\"a\":{},\"b\":[1,{\"c\":\"x\",\"d\":1}]},[],\"line\\nbreak \u{7f} \\u0001\",-0.0,18446744073709551615]";
        assert_eq!(text(&node), expected);
    }

    #[test]
    fn of_members_with_one_key_the_last_is_written() {
        let node = Out::Object(vec![
            ("k".to_owned(), scalar(json!(1))),
            ("a".to_owned(), scalar(json!(0))),
            ("k".to_owned(), scalar(json!(2))),
        ]);
        assert_eq!(text(&node), r#"{"a":0,"k":2}"#);
    }
}
