//! Rate-limit keys: which calls count against the same limit.
//!
//! SPEC §5.3 keys a limit on (skill, capability, rateLimit index) plus the *values* of its `by`
//! paths, and JSON values compare as §2.4 says: numbers by value, objects whatever the order of
//! their members. So each `by` value is written in one canonical form: a number as the integer
//! it equals when it is one within `i64`/`u64` (`7`, `7.0`, `7e0` and `70e-1` are all `7`; `-0`
//! and `-0.0` are `0`), otherwise as its `f64`; an object with its members in name order;
//! strings by their decoded text. Every value starts with a tag naming its type, strings carry
//! their length and arrays and objects an end tag, so a string and a number stay apart (`"7"` is
//! not `7`) and no two sequences of values share an encoding. Writing the JSON text as it came
//! let one caller spread its calls over up to three keys per number (regression: `7` and `7.0`
//! each got a full limit).
//!
//! The store keeps a [`RateKey`]: the first 128 bits of SHA-256 over that canonical form,
//! behind a domain prefix and the length-prefixed skill, capability and index ([`RateKeys`]).
//! The canonical form is streamed into the hash as it is written, so no copy of a `by` value is
//! made and a caller sending a megabyte `by` value costs the store 16 bytes, not a megabyte.
//! With a secret shared by every replica ([`RateKeys::keyed`]) the hash is HMAC-SHA-256, so
//! callers cannot compute keys offline; never a per-process random secret, or replicas on one
//! shared store would count the same caller under different keys.

use std::borrow::Cow;
use std::fmt;

use serde_json::Number;
use sha2::{Digest, Sha256};

use super::decision::{Reason, ReasonKind};
use crate::bytecode::index::lookup;
use crate::bytecode::program::{CompiledCapability, CompiledSkill, RateLimitSpec};
use crate::runtime::RateKey;
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

/// What every key's hash starts with: a key of this scheme never equals one of another.
const DOMAIN: &[u8] = b"capgate rate-limit key v1\0";

/// SHA-256's block size, HMAC's pad length.
const BLOCK: usize = 64;

/// The tags that start each canonical value.
mod tag {
    pub(super) const NULL: u8 = 0;
    pub(super) const FALSE: u8 = 1;
    pub(super) const TRUE: u8 = 2;
    /// An integer in `i64`, as 8 little-endian bytes.
    pub(super) const INT: u8 = 3;
    /// An integer above `i64::MAX` (in `u64`), as 8 little-endian bytes.
    pub(super) const UINT: u8 = 4;
    /// Any other number, as the 8 little-endian bytes of its `f64`.
    pub(super) const FLOAT: u8 = 5;
    /// A string: its length (8 little-endian bytes), then its UTF-8 bytes.
    pub(super) const STRING: u8 = 6;
    /// An array: its elements, then [`END_ARRAY`].
    pub(super) const ARRAY: u8 = 7;
    pub(super) const END_ARRAY: u8 = 8;
    /// An object: [`MEMBER`], name (length and bytes) and value for each member in name order,
    /// then [`END_OBJECT`].
    pub(super) const OBJECT: u8 = 9;
    pub(super) const MEMBER: u8 = 10;
    pub(super) const END_OBJECT: u8 = 11;
}

/// Where a canonical key is written: the hash, or (in tests) a buffer to look at.
pub(super) trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Sha256 {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// How an engine hashes rate-limit keys: plain SHA-256, or HMAC-SHA-256 under a secret; both
/// truncated to [`RateKey::LEN`] bytes. The states after the fixed prefixes are kept, so a key
/// costs the hash of its own bytes (plus HMAC's outer block when keyed).
#[derive(Clone)]
pub(crate) struct RateKeys {
    /// The hash after the domain prefix (HMAC: after the inner pad and the prefix).
    start: Sha256,
    /// HMAC's outer hash after the outer pad; `None` unkeyed.
    outer: Option<Sha256>,
}

impl fmt::Debug for RateKeys {
    // The states are derived from the secret: print only which kind this is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.outer.is_some() {
            "HMAC-SHA-256"
        } else {
            "SHA-256"
        };
        f.debug_tuple("RateKeys").field(&kind).finish()
    }
}

impl Default for RateKeys {
    fn default() -> Self {
        RateKeys::unkeyed()
    }
}

impl RateKeys {
    /// SHA-256 of the canonical key.
    pub(crate) fn unkeyed() -> RateKeys {
        let mut start = Sha256::new();
        start.update(DOMAIN);
        RateKeys { start, outer: None }
    }

    /// HMAC-SHA-256 of the canonical key under `secret`.
    pub(crate) fn keyed(secret: &[u8]) -> RateKeys {
        let (mut start, outer) = hmac_states(secret);
        start.update(DOMAIN);
        RateKeys {
            start,
            outer: Some(outer),
        }
    }

    /// The key of `capability`'s `index`th rate limit for this request.
    pub(super) fn key<'r, J: Json<'r>>(
        &self,
        skill: &CompiledSkill,
        capability: &CompiledCapability,
        index: usize,
        limit: &RateLimitSpec,
        input: &Input<'_, J>,
    ) -> Result<RateKey, KeyRefusal> {
        let mut hash = self.start.clone();
        write_key(&mut hash, skill, capability, index, limit, input)?;
        Ok(self.finish(hash))
    }

    /// The key from `hash`, fed after [`RateKeys::start`]: its first [`RateKey::LEN`] bytes,
    /// through HMAC's outer hash when keyed.
    fn finish(&self, hash: Sha256) -> RateKey {
        let mut digest = hash.finalize();
        if let Some(outer) = &self.outer {
            let mut outer = outer.clone();
            outer.update(digest);
            digest = outer.finalize();
        }
        let mut key = [0_u8; RateKey::LEN];
        key.iter_mut().zip(digest).for_each(|(k, d)| *k = d);
        RateKey::from_bytes(key)
    }
}

/// HMAC's inner and outer hashes after their pads (RFC 2104: a secret longer than a block is
/// hashed first).
fn hmac_states(secret: &[u8]) -> (Sha256, Sha256) {
    let mut key = [0_u8; BLOCK];
    if secret.len() > BLOCK {
        let digest = Sha256::digest(secret);
        key.iter_mut().zip(digest).for_each(|(k, d)| *k = d);
    } else {
        key.iter_mut().zip(secret).for_each(|(k, s)| *k = *s);
    }
    let pad = |byte: u8| {
        let mut padded = key;
        padded.iter_mut().for_each(|k| *k ^= byte);
        Sha256::new_with_prefix(padded)
    };
    (pad(0x36), pad(0x5c))
}

/// Writes the canonical key: length-prefixed skill, capability and index, then each `by` value.
pub(super) fn write_key<'r, J: Json<'r>, S: Sink>(
    out: &mut S,
    skill: &CompiledSkill,
    capability: &CompiledCapability,
    index: usize,
    limit: &RateLimitSpec,
    input: &Input<'_, J>,
) -> Result<(), KeyRefusal> {
    write_len_prefixed(out, skill.name.as_bytes());
    write_len_prefixed(out, capability.name.as_bytes());
    out.put(&u64::try_from(index).unwrap_or(u64::MAX).to_le_bytes());
    for by in &limit.by {
        let Some(path) = lookup(&capability.program.paths, *by) else {
            return Err(KeyRefusal::Absent(Reason::request(
                ReasonKind::Input,
                "internal error: rate-limit path out of range",
            )));
        };
        let mut case_variant = false;
        let ok = with_single(input, path, |leaf| match leaf {
            Ok(Leaf::Json(value)) => write_value(out, value),
            Ok(Leaf::Str(text)) => {
                write_string(out, text);
                true
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

/// `bytes`, after their length.
fn write_len_prefixed<S: Sink>(out: &mut S, bytes: &[u8]) {
    out.put(&u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_le_bytes());
    out.put(bytes);
}

fn write_string<S: Sink>(out: &mut S, text: &str) {
    out.put(&[tag::STRING]);
    write_len_prefixed(out, text.as_bytes());
}

/// Writes `value` in its canonical form (module docs); false if it could not be written, which
/// the caller refuses (fail closed). A string is written from its decoded text, so a key is the
/// same whichever way the request came in.
fn write_value<'r, J: Json<'r>, S: Sink>(out: &mut S, value: J) -> bool {
    match value.kind() {
        JsonKind::Null => out.put(&[tag::NULL]),
        JsonKind::Bool => out.put(&[match value.as_bool() {
            Some(true) => tag::TRUE,
            _ => tag::FALSE,
        }]),
        JsonKind::Number => match value.as_number() {
            Some(number) => write_number(out, &number),
            None => return false,
        },
        JsonKind::String => match value.as_str() {
            Some(text) => write_string(out, &text),
            None => return false,
        },
        JsonKind::Array => {
            out.put(&[tag::ARRAY]);
            for element in value.elements() {
                if !write_value(out, element) {
                    return false;
                }
            }
            out.put(&[tag::END_ARRAY]);
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
fn write_members<'r, J: Json<'r>, S: Sink>(
    out: &mut S,
    members: impl Iterator<Item = (Cow<'r, str>, J)>,
) -> bool {
    out.put(&[tag::OBJECT]);
    for (name, member) in members {
        out.put(&[tag::MEMBER]);
        write_len_prefixed(out, name.as_bytes());
        if !write_value(out, member) {
            return false;
        }
    }
    out.put(&[tag::END_OBJECT]);
    true
}

/// 2^63 and 2^64 as `f64` (both exact).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// Writes a number as the integer it equals when it is one within `i64`/`u64`, otherwise as its
/// `f64` (JSON has no NaN or infinity, and `-0.0` is the integer 0, so equal numbers write equal
/// bytes).
fn write_number<S: Sink>(out: &mut S, number: &Number) {
    let (tag, bytes) = if let Some(i) = number.as_i64() {
        (tag::INT, i.to_le_bytes())
    } else if let Some(u) = number.as_u64() {
        (tag::UINT, u.to_le_bytes())
    } else {
        let f = number.as_f64().unwrap_or(f64::NAN);
        match integral(f) {
            Some(Integral::Signed(i)) => (tag::INT, i.to_le_bytes()),
            // Only above `i64::MAX`: `integral` prefers `Signed`.
            Some(Integral::Unsigned(u)) => (tag::UINT, u.to_le_bytes()),
            None => (tag::FLOAT, f.to_bits().to_le_bytes()),
        }
    };
    out.put(&[tag]);
    out.put(&bytes);
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
    use proptest::prelude::*;
    use serde_json::{Number, Value, json};
    use sha2::Digest;

    use super::{RateKeys, Sink, write_value};
    use crate::tape::Tape;

    /// The canonical bytes of a JSON text, read as a `Value` and as a tape (they must agree).
    fn key(text: &str) -> Vec<u8> {
        let value: Value = serde_json::from_str(text).unwrap();
        let mut from_value = Vec::new();
        assert!(write_value(&mut from_value, &value));
        let mut tape = Tape::new();
        let doc = tape.parse(text.as_bytes(), 128).unwrap();
        let mut from_tape = Vec::new();
        assert!(write_value(&mut from_tape, doc.root()));
        assert_eq!(from_value, from_tape, "{text}");
        from_value
    }

    /// The 128-bit hash `keys` makes of `value`'s canonical form (as [`RateKeys::key`] does
    /// after the skill, capability and index).
    fn digest(keys: &RateKeys, value: &Value) -> crate::runtime::RateKey {
        let mut hash = keys.start.clone();
        assert!(write_value(&mut hash, value));
        keys.finish(hash)
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
            "[[7],7]",
            "[[7,7]]",
            "{\"a\":7}",
            "{\"a\":\"7\"}",
            "{\"a\":[]}",
            "[{}]",
            "\"\"",
            "[\"\"]",
            "[]",
            "{}",
        ];
        let keys: Vec<Vec<u8>> = texts.iter().map(|t| key(t)).collect();
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
        assert_eq!(key(r#"{"b":1,"a":2}"#), key(r#"{"a":2,"b":1}"#));
        assert_ne!(key("[1,2]"), key("[2,1]"));
        assert_eq!(key(r#""\u0061\"b""#), key(&json!("a\"b").to_string()));
    }

    #[test]
    fn a_secret_changes_every_key_and_the_same_secret_gives_the_same_keys() {
        let value = json!({"org": "acme", "id": 7});
        let unkeyed = digest(&RateKeys::unkeyed(), &value);
        let replica_a = digest(&RateKeys::keyed(b"0123456789abcdef-shared"), &value);
        let replica_b = digest(&RateKeys::keyed(b"0123456789abcdef-shared"), &value);
        let other = digest(&RateKeys::keyed(b"0123456789abcdef-other!"), &value);
        assert_eq!(replica_a, replica_b);
        assert_ne!(replica_a, unkeyed);
        assert_ne!(replica_a, other);
        // A secret longer than a block is hashed first (RFC 2104), and still counts whole.
        let long = [7_u8; 100];
        let mut longer = long.to_vec();
        longer.push(0);
        assert_ne!(
            digest(&RateKeys::keyed(&long), &value),
            digest(&RateKeys::keyed(&longer), &value)
        );
    }

    #[test]
    fn the_keyed_hash_is_hmac_sha_256() {
        // RFC 4231, test cases 2 (a short key) and 6 (a key longer than a block).
        let hmac = |key: &[u8], message: &[u8]| {
            let (mut inner, mut outer) = super::hmac_states(key);
            inner.put(message);
            outer.update(inner.finalize());
            outer
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(
            hmac(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hmac(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    /// JSON values over a small alphabet, so that equal values (and values that differ only in
    /// type, like `1`, `1.0` and `"1"`) come up often.
    fn small_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-2_i64..3).prop_map(|n| json!(n)),
            (-2_i64..3).prop_map(|n| Value::Number(Number::from_f64(n as f64).unwrap())),
            Just(json!(0.5)),
            Just(json!(-0.0)),
            Just(json!(u64::MAX)),
            Just(json!(1e20)),
            prop::sample::select(vec!["", "1", "1.0", "a", "A", "null"]).prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop::sample::select(vec!["a", "b", "B", ""]),
                    inner,
                    0..3
                )
                .prop_map(|members| {
                    Value::Object(
                        members
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                    )
                }),
            ]
        })
    }

    /// `value` as JSON text written another way: members in reverse order, integers with a
    /// fraction, strings with escapes.
    fn rewritten(value: &Value) -> String {
        match value {
            Value::Number(n) if n.as_i64().is_some() => format!("{}.0e0", n.as_i64().unwrap()),
            Value::String(s) => {
                let escaped: String = s
                    .chars()
                    .map(|c| format!("\\u{:04x}", u32::from(c)))
                    .collect();
                format!("\"{escaped}\"")
            }
            Value::Array(elements) => {
                let parts: Vec<String> = elements.iter().map(rewritten).collect();
                format!("[ {} ]", parts.join(" , "))
            }
            Value::Object(members) => {
                let parts: Vec<String> = members
                    .iter()
                    .rev()
                    .map(|(k, v)| format!("{} : {}", json!(k), rewritten(v)))
                    .collect();
                format!("{{ {} }}", parts.join(" , "))
            }
            other => other.to_string(),
        }
    }

    proptest! {
        /// Two values share a key exactly when they are equal as `fieldEquals` compares them:
        /// numbers by value, objects in any order, and nothing across types (`1`, `1.0` and
        /// `"1"`). Checked on the canonical bytes and on the stored 128-bit keys, unkeyed and
        /// keyed.
        #[test]
        fn keys_are_equal_exactly_when_values_are_equal(a in small_json(), b in small_json()) {
            let equal = crate::value::json_eq(&a, &b);
            let (mut bytes_a, mut bytes_b) = (Vec::new(), Vec::new());
            prop_assert!(write_value(&mut bytes_a, &a));
            prop_assert!(write_value(&mut bytes_b, &b));
            prop_assert_eq!(bytes_a == bytes_b, equal);
            for keys in [RateKeys::unkeyed(), RateKeys::keyed(b"a shared secret, 32 bytes long!!")] {
                prop_assert_eq!(digest(&keys, &a) == digest(&keys, &b), equal, "{} {}", a, b);
            }
        }

        /// The same value written another way (member order, number form, escapes), read from
        /// the tape, has the same key as the value.
        #[test]
        fn a_value_written_another_way_keeps_its_key(value in small_json()) {
            let text = rewritten(&value);
            let mut tape = Tape::new();
            let doc = tape.parse(text.as_bytes(), 128).unwrap();
            let (mut from_value, mut from_tape) = (Vec::new(), Vec::new());
            prop_assert!(write_value(&mut from_value, &value));
            prop_assert!(write_value(&mut from_tape, doc.root()));
            prop_assert_eq!(from_value, from_tape, "{}", text);
        }
    }
}
