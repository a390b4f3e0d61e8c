//! A borrowed JSON value the VM reads, whatever the request was parsed into.
//!
//! [`JsonRef`] is a copyable reference to one JSON value: either a node of a
//! `serde_json::Value` tree (a request built in memory, or a session line) or a node of a
//! [`crate::tape`] (a request decided straight from its bytes, without building a tree). Every
//! read the VM makes — member and element lookups, types, strings, numbers, equality — goes
//! through it, so both representations decide identically.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Number, Value};

use crate::tape::{self, Kind, NodeRef};
use crate::value::cmp_numbers;

/// The elements of an array ([`JsonRef::elements`]).
#[derive(Debug, Clone)]
pub enum Elements<'r> {
    /// Of a `Value` array (empty for anything else).
    Value(std::slice::Iter<'r, Value>),
    /// Of a tape array.
    Tape(tape::Elements<'r>),
}

impl<'r> Iterator for Elements<'r> {
    type Item = JsonRef<'r>;

    #[inline]
    fn next(&mut self) -> Option<JsonRef<'r>> {
        match self {
            Elements::Value(items) => items.next().map(JsonRef::Value),
            Elements::Tape(nodes) => nodes.next().map(JsonRef::Tape),
        }
    }
}

/// The members of an object, names decoded ([`JsonRef::members`]).
#[derive(Debug, Clone)]
pub enum Members<'r> {
    /// Of a `Value` object (`None` for anything else).
    Value(Option<serde_json::map::Iter<'r>>),
    /// Of a tape object.
    Tape(tape::Members<'r>),
}

impl<'r> Iterator for Members<'r> {
    type Item = (Cow<'r, str>, JsonRef<'r>);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Members::Value(members) => members
                .as_mut()?
                .next()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), JsonRef::Value(v))),
            Members::Tape(members) => members.next().map(|(k, v)| {
                // Keys are strings (the parser accepts nothing else), so this always decodes.
                (k.as_str().unwrap_or(Cow::Borrowed("")), JsonRef::Tape(v))
            }),
        }
    }
}

/// One JSON value, borrowed from a `Value` tree or from a tape.
#[derive(Debug, Clone, Copy)]
pub enum JsonRef<'r> {
    /// A node of a `serde_json::Value`.
    Value(&'r Value),
    /// A node of a parsed tape.
    Tape(NodeRef<'r>),
}

/// The JSON type of a value.
pub type JsonKind = Kind;

/// JSON `null`, for absent roots.
pub static NULL: Value = Value::Null;

impl<'r> From<&'r Value> for JsonRef<'r> {
    fn from(value: &'r Value) -> Self {
        JsonRef::Value(value)
    }
}

impl<'r> JsonRef<'r> {
    /// JSON `null`.
    pub fn null() -> JsonRef<'static> {
        JsonRef::Value(&NULL)
    }

    /// The value's JSON type.
    #[inline]
    pub fn kind(self) -> JsonKind {
        match self {
            JsonRef::Value(value) => match value {
                Value::Null => Kind::Null,
                Value::Bool(_) => Kind::Bool,
                Value::Number(_) => Kind::Number,
                Value::String(_) => Kind::String,
                Value::Array(_) => Kind::Array,
                Value::Object(_) => Kind::Object,
            },
            JsonRef::Tape(node) => node.kind(),
        }
    }

    /// The JSON type's name as messages and JSON Schema say it (`boolean`, `object`, ...).
    pub fn type_name(self) -> &'static str {
        match self.kind() {
            Kind::Null => "null",
            Kind::Bool => "boolean",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }

    /// True for JSON `null`.
    #[inline]
    pub fn is_null(self) -> bool {
        self.kind() == Kind::Null
    }

    /// An object's member, if this is an object that has it.
    #[inline]
    pub fn get(self, key: &str) -> Option<JsonRef<'r>> {
        match self {
            JsonRef::Value(Value::Object(map)) => map.get(key).map(JsonRef::Value),
            JsonRef::Value(_) => None,
            JsonRef::Tape(node) => node.get(key).map(JsonRef::Tape),
        }
    }

    /// An array's element, if this is an array long enough.
    #[inline]
    pub fn index(self, position: usize) -> Option<JsonRef<'r>> {
        match self {
            JsonRef::Value(Value::Array(items)) => items.get(position).map(JsonRef::Value),
            JsonRef::Value(_) => None,
            JsonRef::Tape(node) => node.index(position).map(JsonRef::Tape),
        }
    }

    /// The number of elements of an array or members of an object; 0 for anything else.
    #[inline]
    pub fn len(self) -> usize {
        match self {
            JsonRef::Value(Value::Array(items)) => items.len(),
            JsonRef::Value(Value::Object(map)) => map.len(),
            JsonRef::Value(_) => 0,
            JsonRef::Tape(node) => node.len(),
        }
    }

    /// True when [`JsonRef::len`] is 0.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// An array's elements in order; nothing for anything else.
    #[inline]
    pub fn elements(self) -> Elements<'r> {
        match self {
            JsonRef::Value(Value::Array(items)) => Elements::Value(items.iter()),
            JsonRef::Value(_) => Elements::Value([].iter()),
            JsonRef::Tape(node) => Elements::Tape(node.elements()),
        }
    }

    /// An object's members, with their names decoded; nothing for anything else. A `Value`
    /// object yields them in name order, a tape in the order of the input.
    pub fn members(self) -> Members<'r> {
        match self {
            JsonRef::Value(Value::Object(map)) => Members::Value(Some(map.iter())),
            JsonRef::Value(_) => Members::Value(None),
            JsonRef::Tape(node) => Members::Tape(node.members()),
        }
    }

    /// True when this is an object with a member named `key`.
    pub fn has_member(self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The string, decoded, if this is one (borrowed unless a tape string has escapes).
    #[inline]
    pub fn as_str(self) -> Option<Cow<'r, str>> {
        match self {
            JsonRef::Value(Value::String(s)) => Some(Cow::Borrowed(s)),
            JsonRef::Value(_) => None,
            JsonRef::Tape(node) => node.as_str(),
        }
    }

    /// True when this is a string equal to `text`.
    #[inline]
    pub fn str_eq(self, text: &str) -> bool {
        match self {
            JsonRef::Value(Value::String(s)) => s == text,
            JsonRef::Value(_) => false,
            JsonRef::Tape(node) => node.str_eq(text),
        }
    }

    /// The number, if this is one, exactly as serde_json reads it.
    #[inline]
    pub fn as_number(self) -> Option<Number> {
        match self {
            JsonRef::Value(Value::Number(n)) => Some(n.clone()),
            JsonRef::Value(_) => None,
            JsonRef::Tape(node) => node.as_number(),
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(self) -> Option<bool> {
        match self {
            JsonRef::Value(value) => value.as_bool(),
            JsonRef::Tape(node) => node.as_bool(),
        }
    }

    /// The value as a `serde_json::Value` (borrowed from a tree, built from a tape).
    pub fn to_value(self) -> Cow<'r, Value> {
        match self {
            JsonRef::Value(value) => Cow::Borrowed(value),
            JsonRef::Tape(node) => Cow::Owned(node.to_value()),
        }
    }

    /// JSON equality (numbers by value, objects regardless of member order), as
    /// [`crate::value::json_eq`].
    pub fn json_eq(self, other: JsonRef<'_>) -> bool {
        if let (JsonRef::Value(a), JsonRef::Value(b)) = (self, other) {
            return crate::value::json_eq(a, b);
        }
        match (self.kind(), other.kind()) {
            (Kind::Null, Kind::Null) => true,
            (Kind::Bool, Kind::Bool) => self.as_bool() == other.as_bool(),
            (Kind::Number, Kind::Number) => match (self.as_number(), other.as_number()) {
                (Some(a), Some(b)) => cmp_numbers(&a, &b) == Some(Ordering::Equal),
                _ => false,
            },
            (Kind::String, Kind::String) => match other {
                JsonRef::Value(Value::String(b)) => self.str_eq(b),
                _ => match self {
                    JsonRef::Value(Value::String(a)) => other.str_eq(a),
                    _ => self.as_str() == other.as_str(),
                },
            },
            (Kind::Array, Kind::Array) => {
                self.len() == other.len()
                    && self
                        .elements()
                        .zip(other.elements())
                        .all(|(a, b)| a.json_eq(b))
            }
            (Kind::Object, Kind::Object) => {
                // Keys are unique on both sides (the parsers reject duplicates), so equal sizes
                // and every member found equal means equal objects.
                self.len() == other.len()
                    && self
                        .members()
                        .all(|(k, v)| other.get(&k).is_some_and(|w| v.json_eq(w)))
            }
            _ => false,
        }
    }

    /// JSON equality with a constant.
    #[inline]
    pub fn equals_value(self, value: &Value) -> bool {
        match (self, value) {
            (JsonRef::Value(a), b) => crate::value::json_eq(a, b),
            (node, Value::String(b)) => node.str_eq(b),
            (node, b) => node.json_eq(JsonRef::Value(b)),
        }
    }

    /// The value as JSON text for messages, cut to `max` characters.
    pub fn describe(self, max: usize) -> String {
        crate::value::truncate_for_message(&self.to_value(), max)
    }
}
