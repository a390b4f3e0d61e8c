//! Every value a path reaches, collected into a list ([`Reached`]).
//!
//! The rules of SPEC §2.3 and `docs/semantics.md`, spelled out: a missing member or an index
//! past the end is *absent*; stepping into a value of the wrong type (a member of a non-object,
//! an index or `[*]` of a non-array, anything of a `null` member) is the *wrong shape*, but below
//! a `null` root (an absent payload, agent or context) a path is absent; `[*]` reaches every
//! element (nothing for an empty array); a query parameter given twice is *ambiguous*.

use serde_json::Value;

use super::constraint::{Abort, Env};
use crate::value::{Path, Root, Segment};
use crate::vm::resource::QueryValue;

/// A value reached by a path: JSON, or a string from the resource or the request.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Found<'a> {
    /// A JSON value from the payload, agent or context.
    Json(&'a Value),
    /// A string: a template binding, a query parameter, `request.*`.
    Text(String),
}

impl Found<'_> {
    /// The value as a JSON value (a request string is the JSON string with the same text).
    pub(super) fn to_json(&self) -> Value {
        match self {
            Found::Json(value) => (*value).clone(),
            Found::Text(text) => Value::String(text.clone()),
        }
    }
}

/// One outcome of following a path to its end.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Reached<'a> {
    /// A value is there.
    Value(Found<'a>),
    /// A member or index is missing.
    Absent,
    /// A step met a value of the wrong type, or a query parameter was repeated.
    Broken,
    /// A member is missing, but its object has a member whose name is a case variant of it
    /// (and the limits refuse that): the request is refused.
    CaseVariant,
}

/// Everything `path` reaches in the request, in document order.
pub(super) fn reach<'a>(env: &Env<'a>, path: &Path) -> Result<Vec<Reached<'a>>, Abort> {
    let request = env.request;
    let text = |value: Option<String>| {
        vec![match value {
            Some(text) => Reached::Value(Found::Text(text)),
            None => Reached::Absent,
        }]
    };
    // SPEC §4: an absent payload, agent or context *is* `null`, so below a `null` root every
    // path is absent (inside a document, a step into `null` stays the wrong shape).
    let document = |root: &'a Value| {
        if root.is_null() && !path.segments.is_empty() {
            Ok(vec![Reached::Absent])
        } else {
            follow(
                root,
                &path.segments,
                env.max_array_scan,
                env.refuse_case_variants,
            )
        }
    };
    match path.root {
        Root::Payload => document(&request.payload),
        Root::Agent => document(&request.agent),
        Root::Context => document(&request.context),
        Root::Request => Ok(match path.segments.as_slice() {
            [Segment::Key(k)] if k == "skill" => text(Some(request.skill.clone())),
            [Segment::Key(k)] if k == "operation" => text(Some(request.operation.clone())),
            [Segment::Key(k)] if k == "transaction" => text(request.transaction.clone()),
            // The checker rejects every other request path.
            _ => vec![Reached::Broken],
        }),
        Root::Resource => Ok(match path.segments.as_slice() {
            [Segment::Key(q), Segment::Key(name)] if q == "query" => {
                match env.resource.query(name) {
                    QueryValue::Absent => vec![Reached::Absent],
                    QueryValue::One(value) => text(Some(value.into_owned())),
                    QueryValue::Repeated | QueryValue::Variant(_) | QueryValue::DoubleEncoded => {
                        vec![Reached::Broken]
                    }
                }
            }
            [Segment::Key(name)] => {
                let slot = env.binding_names.iter().position(|b| b == name);
                text(
                    slot.and_then(|slot| env.bindings.get(slot))
                        .map(str::to_owned),
                )
            }
            // The checker rejects every other resource path.
            _ => vec![Reached::Broken],
        }),
    }
}

/// Follows `segments` from `value`; with `variants`, a missing member whose name has a case
/// variant in its object is [`Reached::CaseVariant`].
fn follow<'a>(
    value: &'a Value,
    segments: &[Segment],
    max_array_scan: usize,
    variants: bool,
) -> Result<Vec<Reached<'a>>, Abort> {
    let Some((first, rest)) = segments.split_first() else {
        return Ok(vec![Reached::Value(Found::Json(value))]);
    };
    match (first, value) {
        (Segment::Key(key), Value::Object(members)) => match members.get(key) {
            Some(member) => follow(member, rest, max_array_scan, variants),
            None if variants && members.keys().any(|name| case_variants(name, key)) => {
                Ok(vec![Reached::CaseVariant])
            }
            None => Ok(vec![Reached::Absent]),
        },
        (Segment::Index(index), Value::Array(items)) => {
            match usize::try_from(*index).ok().and_then(|i| items.get(i)) {
                Some(item) => follow(item, rest, max_array_scan, variants),
                None => Ok(vec![Reached::Absent]),
            }
        }
        (Segment::Wildcard, Value::Array(items)) => {
            if items.len() > max_array_scan {
                return Err(Abort);
            }
            let mut all = Vec::new();
            for item in items {
                all.extend(follow(item, rest, max_array_scan, variants)?);
            }
            Ok(all)
        }
        _ => Ok(vec![Reached::Broken]),
    }
}

/// Two different names with the same simple case folding, character by character.
fn case_variants(name: &str, key: &str) -> bool {
    let fold = crate::fold::fold_char;
    name != key && name.chars().map(fold).eq(key.chars().map(fold))
}

/// The single value a `[*]`-free path names, or why there is none.
pub(super) fn reach_one<'a>(env: &Env<'a>, path: &Path) -> Result<Reached<'a>, Abort> {
    let mut all = reach(env, path)?;
    Ok(match all.len() {
        1 => all.pop().unwrap_or(Reached::Broken),
        // Only a `[*]` reaches zero or many values; the checker forbids it here.
        _ => Reached::Broken,
    })
}
