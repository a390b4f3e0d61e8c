//! Compiled `payloadSchema` programs (SPEC §2.6).
//!
//! - [`SchemaProgram`] is what [`crate::compile::schema::compile_schema`] produces and
//!   [`crate::vm::schema`] executes: an immutable arena of [`SchemaNode`]s rooted at
//!   [`SchemaProgram::root`]. It is `Send + Sync` and never mutated after compilation.
//! - [`SchemaNodeId`] indexes the arena. Every `$ref` is resolved at compile time into such an
//!   index, so validation never looks at the schema's JSON again.
//! - [`SchemaObject`] holds the keywords of one object schema; boolean schemas are the
//!   [`SchemaNode::Always`] and [`SchemaNode::Never`] variants.
//! - [`SchemaPattern`] is a precompiled `pattern`/`patternProperties` regex with its source text.
//! - [`Format`] names the string formats checked as assertions; [`TypeSet`] is the `type` keyword.
//!
//! Validation is bounded: [`SchemaProgram::depth_limit`] caps nested evaluation and
//! [`SchemaProgram::step_limit`] caps total work; both fail closed.

use std::fmt;

use serde_json::{Number, Value};

use super::matcher::Matcher;

/// Caps on nested subschema evaluations and on the work of one validation (defined, with why,
/// in [`crate::limits`]).
pub use crate::limits::{
    SCHEMA_DEPTH_LIMIT as DEFAULT_SCHEMA_DEPTH_LIMIT,
    SCHEMA_STEP_LIMIT as DEFAULT_SCHEMA_STEP_LIMIT,
};

/// Index of a node in a [`SchemaProgram`]'s arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchemaNodeId(u32);

impl SchemaNodeId {
    /// The first slot of an arena (the root of every compiled program).
    pub(crate) const FIRST: SchemaNodeId = SchemaNodeId(0);

    /// The id of the arena slot at `index`, or `None` if it does not fit the id width.
    pub(crate) fn from_index(index: usize) -> Option<Self> {
        u32::try_from(index).ok().map(SchemaNodeId)
    }

    /// The arena slot this id names.
    pub(crate) fn index(self) -> usize {
        crate::convert::usize_from(self.0)
    }
}

impl fmt::Display for SchemaNodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// A compiled `payloadSchema`: an arena of nodes and the root to start from.
#[derive(Debug, Clone)]
pub struct SchemaProgram {
    // INVARIANT (schema-arena): every SchemaNodeId stored in `nodes` or `root` indexes `nodes`;
    // upheld by the compiler, which only hands out ids of slots it has pushed.
    pub(crate) nodes: Vec<SchemaNode>,
    pub(crate) root: SchemaNodeId,
    pub(crate) depth_limit: u32,
    pub(crate) step_limit: u64,
}

impl SchemaProgram {
    /// A program over `nodes`, deriving each object's [`Shape`].
    pub(crate) fn new(
        mut nodes: Vec<SchemaNode>,
        root: SchemaNodeId,
        depth_limit: u32,
        step_limit: u64,
    ) -> SchemaProgram {
        for node in &mut nodes {
            if let SchemaNode::Object(object) = node {
                object.shape = Shape::of(object);
            }
        }
        SchemaProgram {
            nodes,
            root,
            depth_limit,
            step_limit,
        }
    }

    /// The node validation starts from.
    pub fn root(&self) -> SchemaNodeId {
        self.root
    }

    /// Number of compiled nodes (subschemas), a measure of program size.
    #[cfg(any(test, feature = "internals"))]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The node with this id; `None` only if the id comes from another program.
    pub fn node(&self, id: SchemaNodeId) -> Option<&SchemaNode> {
        self.nodes.get(id.index())
    }

    /// Cap on nested subschema evaluations; deeper validation fails closed.
    pub fn depth_limit(&self) -> u32 {
        self.depth_limit
    }

    /// Cap on the work of one validation; more work fails closed.
    pub fn step_limit(&self) -> u64 {
        self.step_limit
    }

    /// The same program with other validation limits (for the engine's `Limits`).
    #[cfg(any(test, feature = "internals"))]
    pub fn with_limits(mut self, depth_limit: u32, step_limit: u64) -> Self {
        self.depth_limit = depth_limit;
        self.step_limit = step_limit;
        self
    }
}

/// One compiled subschema.
#[derive(Debug, Clone)]
pub enum SchemaNode {
    /// The schema `true` (or `{}`): every instance is valid.
    Always,
    /// The schema `false`: no instance is valid.
    Never,
    /// An object schema with at least one assertion or applicator.
    Object(Box<SchemaObject>),
}

/// The keywords of one object schema. Absent keywords are `None` or empty.
#[derive(Debug, Clone, Default)]
pub struct SchemaObject {
    /// `$ref`, resolved to the node it points at.
    pub reference: Option<SchemaNodeId>,
    /// `type`.
    pub types: Option<TypeSet>,
    /// `enum`: the instance must equal one of these.
    pub enum_values: Option<Vec<Value>>,
    /// `const`.
    pub const_value: Option<Value>,
    /// `minimum`.
    pub minimum: Option<Number>,
    /// `maximum`.
    pub maximum: Option<Number>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: Option<Number>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: Option<Number>,
    /// `multipleOf`, as given and as an exact decimal.
    pub multiple_of: Option<(Number, Decimal)>,
    /// `minLength`, in Unicode code points.
    pub min_length: Option<u64>,
    /// `maxLength`, in Unicode code points.
    pub max_length: Option<u64>,
    /// `pattern` (unanchored search).
    pub pattern: Option<SchemaPattern>,
    /// `format`, as an assertion.
    pub format: Option<Format>,
    /// `prefixItems`.
    pub prefix_items: Vec<SchemaNodeId>,
    /// `items`: elements after the `prefixItems`.
    pub items: Option<SchemaNodeId>,
    /// `contains`, with its bounds `minContains` (default 1) and `maxContains`.
    pub contains: Option<ContainsRule>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `uniqueItems: true`.
    pub unique_items: bool,
    /// `required`.
    pub required: Vec<String>,
    /// `properties`, sorted by name.
    pub properties: Vec<(String, SchemaNodeId)>,
    /// `patternProperties`.
    pub pattern_properties: Vec<(SchemaPattern, SchemaNodeId)>,
    /// `additionalProperties`: members matched by neither `properties` nor `patternProperties`.
    pub additional_properties: Option<SchemaNodeId>,
    /// `propertyNames`: applied to each member name as a string.
    pub property_names: Option<SchemaNodeId>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `dependentRequired`: when the first member is present, all the others must be.
    pub dependent_required: Vec<(String, Vec<String>)>,
    /// `allOf`.
    pub all_of: Vec<SchemaNodeId>,
    /// `anyOf`.
    pub any_of: Vec<SchemaNodeId>,
    /// `oneOf`.
    pub one_of: Vec<SchemaNodeId>,
    /// `not`.
    pub not: Option<SchemaNodeId>,
    /// `if` with its `then` and `else` (both ignored without `if`).
    pub condition: Option<Condition>,
    /// Which keyword groups are present, derived from the fields above when the program is
    /// built (`SchemaProgram::new`); never serialized.
    pub shape: Shape,
}

/// What an object schema needs, derived once so validation skips absent keyword groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    /// A keyword for strings: `minLength`, `maxLength`, `pattern`, `format`.
    pub strings: bool,
    /// A keyword for numbers: the bounds and `multipleOf`.
    pub numbers: bool,
    /// A keyword for arrays.
    pub arrays: bool,
    /// A keyword for objects.
    pub objects: bool,
    /// An applicator on the same instance: `allOf`, `anyOf`, `oneOf`, `not`, `if`.
    pub applicators: bool,
    /// For each `required` name, its position in `properties` when listed there (so one lookup
    /// serves both keywords).
    pub required_properties: Vec<Option<usize>>,
    /// The simple case foldings of the `properties` names, sorted, when `patternProperties` or
    /// `additionalProperties` apply too (members are then matched by name, and a member that is
    /// a case variant of a property is found by folding its name).
    pub folded_properties: Vec<String>,
    /// Set when the schema's only keywords are `type` and the length bounds of strings and
    /// arrays: the quiet evaluator checks such a leaf in line. Boxed: `SchemaObject`s are
    /// built on the stack of a recursive compiler, whose frames this would otherwise widen.
    pub leaf: Option<Box<Leaf>>,
}

/// A schema made only of `type`, `minLength`/`maxLength` and `minItems`/`maxItems` (any of
/// them); [`Shape::leaf`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leaf {
    /// `type`.
    pub types: Option<TypeSet>,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
}

impl Shape {
    /// The shape of `object`'s keywords.
    pub fn of(object: &SchemaObject) -> Shape {
        // Every field named, so a keyword added to `SchemaObject` does not compile until it is
        // placed in a group here (a keyword left out would be skipped: fail open).
        let SchemaObject {
            reference: _,
            types: _,
            enum_values: _,
            const_value: _,
            minimum: _,
            maximum: _,
            exclusive_minimum: _,
            exclusive_maximum: _,
            multiple_of: _,
            min_length: _,
            max_length: _,
            pattern: _,
            format: _,
            prefix_items: _,
            items: _,
            contains: _,
            min_items: _,
            max_items: _,
            unique_items: _,
            required: _,
            properties: _,
            pattern_properties: _,
            additional_properties: _,
            property_names: _,
            min_properties: _,
            max_properties: _,
            dependent_required: _,
            all_of: _,
            any_of: _,
            one_of: _,
            not: _,
            condition: _,
            shape: _,
        } = object;
        // A leaf: nothing but `type` and the four size bounds. Every field is named (no `..`),
        // so a keyword added to `SchemaObject` does not compile until it is placed here: a
        // keyword a leaf ignored would be skipped by the in-line check (fail open).
        let leaf = match object {
            SchemaObject {
                reference: None,
                types,
                enum_values: None,
                const_value: None,
                minimum: None,
                maximum: None,
                exclusive_minimum: None,
                exclusive_maximum: None,
                multiple_of: None,
                min_length,
                max_length,
                pattern: None,
                format: None,
                prefix_items,
                items: None,
                contains: None,
                min_items,
                max_items,
                unique_items: false,
                required,
                properties,
                pattern_properties,
                additional_properties: None,
                property_names: None,
                min_properties: None,
                max_properties: None,
                dependent_required,
                all_of,
                any_of,
                one_of,
                not: None,
                condition: None,
                shape: _,
            } if prefix_items.is_empty()
                && required.is_empty()
                && properties.is_empty()
                && pattern_properties.is_empty()
                && dependent_required.is_empty()
                && all_of.is_empty()
                && any_of.is_empty()
                && one_of.is_empty() =>
            {
                Some(Box::new(Leaf {
                    types: *types,
                    min_length: *min_length,
                    max_length: *max_length,
                    min_items: *min_items,
                    max_items: *max_items,
                }))
            }
            _ => None,
        };
        Shape {
            leaf,
            strings: object.min_length.is_some()
                || object.max_length.is_some()
                || object.pattern.is_some()
                || object.format.is_some(),
            numbers: object.minimum.is_some()
                || object.maximum.is_some()
                || object.exclusive_minimum.is_some()
                || object.exclusive_maximum.is_some()
                || object.multiple_of.is_some(),
            arrays: !object.prefix_items.is_empty()
                || object.items.is_some()
                || object.contains.is_some()
                || object.min_items.is_some()
                || object.max_items.is_some()
                || object.unique_items,
            objects: !object.required.is_empty()
                || !object.properties.is_empty()
                || !object.pattern_properties.is_empty()
                || object.additional_properties.is_some()
                || object.property_names.is_some()
                || object.min_properties.is_some()
                || object.max_properties.is_some()
                || !object.dependent_required.is_empty(),
            applicators: !object.all_of.is_empty()
                || !object.any_of.is_empty()
                || !object.one_of.is_empty()
                || object.not.is_some()
                || object.condition.is_some(),
            folded_properties: if object.pattern_properties.is_empty()
                && object.additional_properties.is_none()
            {
                Vec::new()
            } else {
                let mut folded: Vec<String> = object
                    .properties
                    .iter()
                    .map(|(name, _)| crate::fold::folded(name).collect())
                    .collect();
                folded.sort_unstable();
                folded
            },
            required_properties: object
                .required
                .iter()
                .map(|name| {
                    object
                        .properties
                        .binary_search_by(|(key, _)| key.as_str().cmp(name))
                        .ok()
                })
                .collect(),
        }
    }
}

impl SchemaObject {
    /// The property schema for `name`, if `properties` lists it.
    pub fn property(&self, name: &str) -> Option<SchemaNodeId> {
        self.properties
            .binary_search_by(|(key, _)| key.as_str().cmp(name))
            .ok()
            .and_then(|i| self.properties.get(i))
            .map(|(_, id)| *id)
    }

    /// True when a name of `properties` is equal to `name` under simple case folding (for a
    /// member `properties` does not list: then a case variant of a property). Only for a schema
    /// with `patternProperties` or `additionalProperties` ([`Shape::folded_properties`]).
    pub fn has_case_variant_property(&self, name: &str) -> bool {
        self.shape
            .folded_properties
            .binary_search_by(|property| property.chars().cmp(crate::fold::folded(name)))
            .is_ok()
    }

    /// Every node this object applies to the same instance location (`$ref`, `allOf`, `anyOf`,
    /// `oneOf`, `not`, `if`, `then`, `else`): the edges a `$ref` cycle must not be made of.
    pub fn in_place_children(&self) -> impl Iterator<Item = SchemaNodeId> + '_ {
        let condition = self.condition.iter().flat_map(|c| {
            std::iter::once(c.if_schema)
                .chain(c.then_schema)
                .chain(c.else_schema)
        });
        self.reference
            .iter()
            .copied()
            .chain(self.all_of.iter().copied())
            .chain(self.any_of.iter().copied())
            .chain(self.one_of.iter().copied())
            .chain(self.not)
            .chain(condition)
    }
}

/// `contains` with `minContains` and `maxContains`.
#[derive(Debug, Clone, Copy)]
pub struct ContainsRule {
    /// The schema elements are counted against.
    pub schema: SchemaNodeId,
    /// `minContains` (default 1).
    pub min: u64,
    /// `maxContains`.
    pub max: Option<u64>,
}

/// `if`/`then`/`else`.
#[derive(Debug, Clone, Copy)]
pub struct Condition {
    /// `if`.
    pub if_schema: SchemaNodeId,
    /// `then`, applied when `if` holds.
    pub then_schema: Option<SchemaNodeId>,
    /// `else`, applied when `if` does not hold.
    pub else_schema: Option<SchemaNodeId>,
}

/// A compiled `pattern` or `patternProperties` regex.
#[derive(Debug, Clone)]
pub struct SchemaPattern {
    /// The pattern as written in the schema (for messages).
    pub source: String,
    /// The compiled regex (ECMA-262 `\d \w \D \W` rewritten to ASCII classes), with its
    /// shortcut when it has one.
    pub regex: Matcher,
}

/// The JSON types a `type` keyword allows, as a bit set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TypeSet(u8);

/// One JSON Schema type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean,
    /// `object`.
    Object,
    /// `array`.
    Array,
    /// `number` (includes integers).
    Number,
    /// `string`.
    String,
    /// `integer`: a number with no fractional part (`1.0` counts).
    Integer,
}

impl SchemaType {
    /// Every type, in the order messages list them.
    pub const ALL: [SchemaType; 7] = [
        SchemaType::Null,
        SchemaType::Boolean,
        SchemaType::Object,
        SchemaType::Array,
        SchemaType::Number,
        SchemaType::String,
        SchemaType::Integer,
    ];

    /// The type's name in a schema.
    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Null => "null",
            SchemaType::Boolean => "boolean",
            SchemaType::Object => "object",
            SchemaType::Array => "array",
            SchemaType::Number => "number",
            SchemaType::String => "string",
            SchemaType::Integer => "integer",
        }
    }

    /// The type named `name`, if any.
    pub fn from_name(name: &str) -> Option<SchemaType> {
        SchemaType::ALL.into_iter().find(|t| t.name() == name)
    }

    fn bit(self) -> u8 {
        match self {
            SchemaType::Null => 1,
            SchemaType::Boolean => 2,
            SchemaType::Object => 4,
            SchemaType::Array => 8,
            SchemaType::Number => 16,
            SchemaType::String => 32,
            SchemaType::Integer => 64,
        }
    }
}

impl TypeSet {
    /// The empty set.
    pub fn empty() -> Self {
        TypeSet(0)
    }

    /// This set with `ty` added.
    pub fn with(self, ty: SchemaType) -> Self {
        TypeSet(self.0 | ty.bit())
    }

    /// True when `ty` is in the set.
    pub fn contains(self, ty: SchemaType) -> bool {
        self.0 & ty.bit() != 0
    }

    /// The raw bit set, for the `.capc` encoding (`bytecode::encode`).
    pub(crate) fn bits(self) -> u8 {
        self.0
    }

    /// The set with these raw bits (see [`TypeSet::bits`]); `None` when a bit names no type.
    pub(crate) fn from_bits(bits: u8) -> Option<TypeSet> {
        (bits & !0b111_1111 == 0).then_some(TypeSet(bits))
    }

    /// The types in the set, in [`SchemaType::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = SchemaType> {
        SchemaType::ALL
            .into_iter()
            .filter(move |t| self.contains(*t))
    }
}

impl fmt::Display for TypeSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, ty) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(" or ")?;
            }
            f.write_str(ty.name())?;
        }
        Ok(())
    }
}

/// A string format checked as an assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// RFC 3339 `date-time`.
    DateTime,
    /// RFC 3339 `full-date`.
    Date,
    /// RFC 3339 `full-time`.
    Time,
    /// RFC 5321 mailbox (dot-atom or quoted local part; hostname or address-literal domain).
    Email,
    /// RFC 3986 absolute URI.
    Uri,
    /// RFC 4122 textual UUID (any version and variant).
    Uuid,
    /// Dotted-quad IPv4, no leading zeros.
    Ipv4,
    /// RFC 4291 IPv6 text form, no zone, no prefix length.
    Ipv6,
    /// RFC 1123 host name; `xn--` labels are checked as IDNA2008 A-labels.
    Hostname,
}

impl Format {
    /// Every supported format.
    pub const ALL: [Format; 9] = [
        Format::DateTime,
        Format::Date,
        Format::Time,
        Format::Email,
        Format::Uri,
        Format::Uuid,
        Format::Ipv4,
        Format::Ipv6,
        Format::Hostname,
    ];

    /// The format's name in a schema.
    pub fn name(self) -> &'static str {
        match self {
            Format::DateTime => "date-time",
            Format::Date => "date",
            Format::Time => "time",
            Format::Email => "email",
            Format::Uri => "uri",
            Format::Uuid => "uuid",
            Format::Ipv4 => "ipv4",
            Format::Ipv6 => "ipv6",
            Format::Hostname => "hostname",
        }
    }

    /// The format named `name`, if supported.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A finite decimal `mantissa × 10^exponent` (sign dropped), the exact value of a JSON number
/// as serde_json keeps it: an integer, or the shortest decimal that round-trips an `f64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decimal {
    /// The significant digits.
    pub mantissa: u64,
    /// The power of ten.
    pub exponent: i32,
}

impl Decimal {
    /// The absolute value of `n` as a decimal; `None` for non-finite numbers.
    pub fn from_number(n: &Number) -> Option<Decimal> {
        if let Some(u) = n.as_u64() {
            return Some(Decimal::normalized(u, 0));
        }
        if let Some(i) = n.as_i64() {
            return Some(Decimal::normalized(i.unsigned_abs(), 0));
        }
        let f = n.as_f64().filter(|f| f.is_finite())?;
        Decimal::from_f64(f)
    }

    fn normalized(mut mantissa: u64, mut exponent: i32) -> Decimal {
        if mantissa == 0 {
            return Decimal {
                mantissa: 0,
                exponent: 0,
            };
        }
        while mantissa.is_multiple_of(10) {
            mantissa /= 10;
            exponent = exponent.saturating_add(1);
        }
        Decimal { mantissa, exponent }
    }

    /// The shortest round-tripping decimal of `|f|`, formatted into a stack buffer (no heap).
    fn from_f64(f: f64) -> Option<Decimal> {
        use std::io::Write;
        let mut buf = [0u8; 48];
        let len = {
            let mut cursor = std::io::Cursor::new(buf.as_mut_slice());
            write!(cursor, "{:e}", f.abs()).ok()?;
            usize::try_from(cursor.position()).ok()?
        };
        let text = std::str::from_utf8(buf.get(..len)?).ok()?;
        let (digits, exp) = text.split_once('e')?;
        let mut exponent: i32 = exp.parse().ok()?;
        let mut mantissa: u64 = 0;
        let mut seen_point = false;
        for c in digits.chars() {
            match c {
                '.' => seen_point = true,
                '0'..='9' => {
                    mantissa = mantissa
                        .checked_mul(10)?
                        .checked_add(u64::from(c.to_digit(10)?))?;
                    if seen_point {
                        exponent = exponent.checked_sub(1)?;
                    }
                }
                _ => return None,
            }
        }
        Some(Decimal::normalized(mantissa, exponent))
    }

    /// True when `self` is an integer multiple of `divisor` (`divisor` must be non-zero).
    pub fn is_multiple_of(self, divisor: Decimal) -> bool {
        if self.mantissa == 0 {
            return true;
        }
        if divisor.mantissa == 0 {
            return false;
        }
        let d = u128::from(divisor.mantissa);
        if self.exponent >= divisor.exponent {
            // self / divisor = mantissa·10^k / d with k >= 0: compute mantissa·10^k mod d.
            let k = self.exponent.abs_diff(divisor.exponent);
            let m = u128::from(self.mantissa) % d;
            let p = pow10_mod(k, d);
            // m, p < d < 2^64, so the product fits in u128.
            (m * p).is_multiple_of(d)
        } else {
            // divisor = d·10^k with k > 0 against self.mantissa: need mantissa % (d·10^k) == 0.
            let k = divisor.exponent.abs_diff(self.exponent);
            let mut big = d;
            for _ in 0..k {
                match big.checked_mul(10) {
                    Some(b) => big = b,
                    // d·10^k exceeds 2^128 > any u64 mantissa, which is non-zero here.
                    None => return false,
                }
            }
            u128::from(self.mantissa) % big == 0
        }
    }
}

/// `10^k mod m` by square-and-multiply; `m` is below 2^64 so products fit in u128.
fn pow10_mod(mut k: u32, m: u128) -> u128 {
    if m == 1 {
        return 0;
    }
    let mut result: u128 = 1;
    let mut base: u128 = 10 % m;
    while k > 0 {
        if k & 1 == 1 {
            result = (result * base) % m;
        }
        base = (base * base) % m;
        k >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(text: &str) -> Decimal {
        let n: Number = serde_json::from_str(text).unwrap();
        Decimal::from_number(&n).unwrap()
    }

    #[test]
    fn decimals_take_the_shortest_round_trip_digits() {
        assert_eq!(
            dec("0.0075"),
            Decimal {
                mantissa: 75,
                exponent: -4
            }
        );
        assert_eq!(
            dec("1e308"),
            Decimal {
                mantissa: 1,
                exponent: 308
            }
        );
        assert_eq!(
            dec("-1200"),
            Decimal {
                mantissa: 12,
                exponent: 2
            }
        );
        assert_eq!(dec("0").mantissa, 0);
    }

    #[test]
    fn multiple_of_is_exact_for_decimals() {
        assert!(dec("0.0075").is_multiple_of(dec("0.0001")));
        assert!(!dec("0.00751").is_multiple_of(dec("0.0001")));
        assert!(dec("4.5").is_multiple_of(dec("1.5")));
        assert!(!dec("35").is_multiple_of(dec("1.5")));
        assert!(!dec("1e308").is_multiple_of(dec("0.123456789")));
        assert!(dec("12391239123").is_multiple_of(dec("1e-8")));
        assert!(dec("18446744073709551615").is_multiple_of(dec("5")));
        assert!(!dec("5").is_multiple_of(dec("1e300")));
        assert!(dec("1e300").is_multiple_of(dec("1e-300")));
    }

    #[test]
    fn type_sets_list_their_members_in_order() {
        let set = TypeSet::empty()
            .with(SchemaType::String)
            .with(SchemaType::Null);
        assert_eq!(set.to_string(), "null or string");
        assert!(!set.contains(SchemaType::Integer));
    }
}
