//! Rate-limit keys: which calls count against the same limit.
//!
//! SPEC §5.3 keys a limit on (skill, capability, rateLimit index) plus the *values* of its `by`
//! paths, and JSON values compare as §2.4 says: numbers by value, objects whatever the order of
//! their members. So each `by` value is written in one canonical form: a number as the integer
//! it equals when it is one within `i64`/`u64` (`7`, `7.0`, `7e0` and `70e-1` are all `7`; `-0`
//! and `-0.0` are `0`), otherwise as the shortest text of its `f64`; an object with its members
//! in name order; strings, arrays and literals as compact JSON. A string and a number stay apart
//! (`"7"` is not `7`). Writing the JSON text as it came let one caller spread its calls over up
//! to three keys per number (regression: `7` and `7.0` each got a full limit).

use std::borrow::Cow;

use serde_json::Number;

use super::decision::{Reason, ReasonKind};
use crate::bytecode::index::lookup;
use crate::bytecode::program::{CompiledCapability, CompiledSkill, RateLimitSpec};
use crate::vm::json::JsonKind;
use crate::vm::path::{Leaf, Stop, with_single};
use crate::vm::{Input, Json, VmError};

/// Why a rate-limit key could not be built.
#[derive(Debug)]
pub(super) enum KeyRefusal {
    /// A `by` value is absent or unreadable: the candidate fails (`rateLimit`).
    Absent(Reason),
    /// A `by` path is absent but its object has a case variant of the name: the request is
    /// refused (`input`), as for any path a capability reads.
    CaseVariant(Reason),
}

/// Appends the rate-limit key: length-prefixed skill, capability, index and `by` values.
pub(super) fn rate_key<'r, J: Json<'r>>(
    out: &mut Vec<u8>,
    skill: &CompiledSkill,
    capability: &CompiledCapability,
    index: usize,
    limit: &RateLimitSpec,
    input: &Input<'_, J>,
) -> Result<(), KeyRefusal> {
    fn part(out: &mut Vec<u8>, bytes: &[u8]) {
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(bytes);
    }
    part(out, skill.name.as_bytes());
    part(out, capability.name.as_bytes());
    part(out, &u32::try_from(index).unwrap_or(u32::MAX).to_le_bytes());
    for by in &limit.by {
        let Some(path) = lookup(&capability.program.paths, *by) else {
            return Err(KeyRefusal::Absent(Reason::request(
                ReasonKind::Input,
                "internal error: rate-limit path out of range",
            )));
        };
        let mut case_variant = false;
        let ok = with_single(input, path, |leaf| match leaf {
            Ok(leaf) => {
                let start = out.len();
                out.extend_from_slice(&[0; 4]);
                let written = match leaf {
                    Leaf::Json(value) => write_value(out, value),
                    Leaf::Str(s) => serde_json::to_writer(&mut *out, s).is_ok(),
                };
                let len = u32::try_from(out.len() - start - 4).unwrap_or(u32::MAX);
                if let Some(prefix) = out.get_mut(start..start + 4) {
                    prefix.copy_from_slice(&len.to_le_bytes());
                }
                written
            }
            Err(stop) => {
                case_variant = stop == Stop::CaseVariant;
                false
            }
        });
        if case_variant {
            let error = VmError::CaseVariant {
                path: Some(path.text.clone()),
            };
            return Err(KeyRefusal::CaseVariant(Reason {
                capability: Some(capability.name.clone()),
                constraint: ReasonKind::Input,
                path: Some(path.text.clone()),
                message: error.to_string(),
                source: None,
            }));
        }
        if !ok {
            return Err(KeyRefusal::Absent(Reason {
                capability: Some(capability.name.clone()),
                constraint: ReasonKind::RateLimit,
                path: Some(path.text.clone()),
                message: format!("the rate-limit key `{}` is absent", path.text),
                source: limit.location.as_ref().map(ToString::to_string),
            }));
        }
    }
    Ok(())
}

/// Writes `value` in its canonical form (module docs); false if it could not be written, which
/// the caller refuses (fail closed). A string is written from its decoded text, so a key is the
/// same whichever way the request came in.
fn write_value<'r, J: Json<'r>>(out: &mut Vec<u8>, value: J) -> bool {
    match value.kind() {
        JsonKind::Null => out.extend_from_slice(b"null"),
        JsonKind::Bool => out.extend_from_slice(match value.as_bool() {
            Some(true) => b"true",
            _ => b"false",
        }),
        JsonKind::Number => match value.as_number() {
            Some(number) => write_number(out, &number),
            None => return false,
        },
        JsonKind::String => {
            let text = value.as_str().unwrap_or(Cow::Borrowed(""));
            if serde_json::to_writer(&mut *out, &*text).is_err() {
                return false;
            }
        }
        JsonKind::Array => {
            out.push(b'[');
            for (i, element) in value.elements().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write_value(out, element) {
                    return false;
                }
            }
            out.push(b']');
        }
        JsonKind::Object if J::sorted_members() => {
            // Already in name order (a `Value` map): written as it is, nothing collected, so
            // an allowed decision keyed by an object allocates nothing.
            return write_members(out, value.members());
        }
        JsonKind::Object => {
            let mut members: Vec<(Cow<'r, str>, J)> = value.members().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            return write_members(out, members.into_iter());
        }
    }
    true
}

/// Writes an object's members, given in name order.
fn write_members<'r, J: Json<'r>>(
    out: &mut Vec<u8>,
    members: impl Iterator<Item = (Cow<'r, str>, J)>,
) -> bool {
    out.push(b'{');
    for (i, (name, member)) in members.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if serde_json::to_writer(&mut *out, &*name).is_err() {
            return false;
        }
        out.push(b':');
        if !write_value(out, member) {
            return false;
        }
    }
    out.push(b'}');
    true
}

/// 2^63 and 2^64 as `f64` (both exact).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// Writes a number as the integer it equals when it is one within `i64`/`u64`, otherwise as its
/// `f64`'s shortest text (what serde_json writes).
fn write_number(out: &mut Vec<u8>, number: &Number) {
    let mut digits = itoa::Buffer::new();
    if let Some(i) = number.as_i64() {
        out.extend_from_slice(digits.format(i).as_bytes());
    } else if let Some(u) = number.as_u64() {
        out.extend_from_slice(digits.format(u).as_bytes());
    } else if let Some(f) = number.as_f64() {
        match integral(f) {
            Some(Integral::Signed(i)) => out.extend_from_slice(digits.format(i).as_bytes()),
            Some(Integral::Unsigned(u)) => out.extend_from_slice(digits.format(u).as_bytes()),
            // Writing into a `Vec` cannot fail.
            None => {
                let _ = serde_json::to_writer(&mut *out, number);
            }
        }
    }
}

/// An integral `f64`'s exact integer value.
enum Integral {
    Signed(i64),
    Unsigned(u64),
}

/// The integer `f` equals, when it is integral and within `i64` or `u64` (both bounds are exact
/// powers of two, so the conversions below are exact).
fn integral(f: f64) -> Option<Integral> {
    if !f.is_finite() || f.fract() != 0.0 {
        return None;
    }
    if (-TWO_POW_63..TWO_POW_63).contains(&f) {
        // In range and integral: the cast is exact (and `-0.0` becomes 0).
        return Some(Integral::Signed(f as i64));
    }
    if (0.0..TWO_POW_64).contains(&f) {
        return Some(Integral::Unsigned(f as u64));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::write_value;
    use crate::tape::Tape;

    /// The key bytes of a JSON text, read as a `Value` and as a tape (they must agree).
    fn key(text: &str) -> String {
        let value: Value = serde_json::from_str(text).unwrap();
        let mut from_value = Vec::new();
        assert!(write_value(&mut from_value, &value));
        let mut tape = Tape::new();
        let doc = tape.parse(text.as_bytes(), 128).unwrap();
        let mut from_tape = Vec::new();
        assert!(write_value(&mut from_tape, doc.root()));
        assert_eq!(from_value, from_tape, "{text}");
        String::from_utf8(from_value).unwrap()
    }

    #[test]
    fn numbers_equal_by_value_share_a_key() {
        for same in [
            &["7", "7.0", "7e0", "70e-1", "0.7e1", "7.000"][..],
            &["0", "-0", "0.0", "-0.0", "0e10"],
            &["-12", "-12.0", "-1.2e1"],
            &["1.5", "1.50", "15e-1"],
            &[
                "9007199254740992",
                "9007199254740992.0",
                "9.007199254740992e15",
            ],
            &["18446744073709551615", "18446744073709551615"],
            &["-9223372036854775808", "-9223372036854775808.0"],
            &["1e20", "100000000000000000000", "1.0e20"],
        ] {
            let first = key(same[0]);
            for text in same {
                assert_eq!(key(text), first, "{text} and {}", same[0]);
            }
        }
    }

    #[test]
    fn different_values_keep_different_keys() {
        let texts = [
            "7",
            "\"7\"",
            "7.5",
            "-7",
            "9007199254740993",
            "9007199254740992",
            "18446744073709551615",
            "18446744073709551616",
            "null",
            "true",
            "false",
            "[7]",
            "[7,7]",
            "{\"a\":7}",
            "{\"a\":\"7\"}",
            "\"\"",
        ];
        let keys: Vec<String> = texts.iter().map(|t| key(t)).collect();
        for (i, a) in keys.iter().enumerate() {
            for (j, b) in keys.iter().enumerate() {
                assert_eq!(i == j, a == b, "{} and {}", texts[i], texts[j]);
            }
        }
    }

    #[test]
    fn objects_and_arrays_are_canonical_all_the_way_down() {
        assert_eq!(
            key(r#"{"b":[1.0,{"y":2,"x":-0.0}],"a":"\u0041"}"#),
            key(r#"{"a":"A","b":[1,{"x":0,"y":2e0}]}"#)
        );
        assert_eq!(key(r#"{"b":1,"a":2}"#), r#"{"a":2,"b":1}"#);
        assert_ne!(key("[1,2]"), key("[2,1]"));
        assert_eq!(key(&json!("a\"b").to_string()), r#""a\"b""#);
    }
}
