//! The `payloadSchema` compiler: JSON Schema 2020-12 subset → [`SchemaProgram`] (SPEC §2.6).
//!
//! - [`compile_schema`] checks a whole schema and either returns a program or every problem
//!   found, each a [`SchemaCompileError`] with a JSON pointer into the schema.
//! - Anything outside the subset is an error, never ignored: an unknown keyword, a `$ref` that
//!   is not a `#/...` pointer into the same document, an `$anchor`, a nested `$id`, an unknown
//!   `format`, a regex the linear-time engine cannot run.
//! - `$ref`s are resolved here into node ids. A `$ref` cycle that never descends into the
//!   instance (`{"$ref": "#"}`, `a → b → a` through `$ref`/`allOf`/`anyOf`/`oneOf`/`not`/
//!   `if`/`then`/`else`) is rejected at compile time, because evaluating it would never end.
//!
//! Patterns use the Rust `regex` dialect with ECMA-262's ASCII meaning of `\d \w \D \W`
//! (see `docs/schema.md`).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::bytecode::matcher::{BuildError, MatcherCache};
use crate::bytecode::schema::{
    Condition, ContainsRule, DEFAULT_SCHEMA_DEPTH_LIMIT, DEFAULT_SCHEMA_STEP_LIMIT, Decimal,
    Format, SchemaNode, SchemaNodeId, SchemaObject, SchemaPattern, SchemaProgram, SchemaType,
    TypeSet,
};
use crate::syntax::error::did_you_mean;
use crate::value::truncate_for_message;

/// Largest compiled size of one `pattern` regex by default (SPEC §7: regex compiled size 1 MiB,
/// `Limits::DEFAULT.max_regex_bytes`); [`compile_schema_with_regex_limit`] takes another.
pub const SCHEMA_REGEX_SIZE_LIMIT: usize = crate::limits::Limits::DEFAULT.max_regex_bytes;

/// Deepest nesting of subschemas the compiler accepts (its recursion follows the nesting).
pub use crate::limits::MAX_SCHEMA_NESTING;

/// The keywords `payloadSchema` enforces (SPEC §2.6).
pub const SUPPORTED_KEYWORDS: [&str; 37] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "$defs",
    "$ref",
    "format",
];

/// Keywords accepted and ignored (they never change validation).
pub const ANNOTATION_KEYWORDS: [&str; 10] = [
    "title",
    "description",
    "$comment",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "$id",
];

/// One problem in a `payloadSchema`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SchemaCompileError {
    /// JSON pointer into the schema, e.g. `/properties/a/foo` (empty for the root).
    pub pointer: String,
    /// What is wrong, lowercase, one line.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    pub help: Option<String>,
}

/// Compiles a `payloadSchema` into a program, or returns every error found; a `pattern` may
/// compile to at most [`SCHEMA_REGEX_SIZE_LIMIT`] bytes.
#[cfg(any(test, feature = "internals", feature = "reference"))]
pub fn compile_schema(schema: &Value) -> Result<SchemaProgram, Vec<SchemaCompileError>> {
    compile_schema_with_regex_limit(schema, SCHEMA_REGEX_SIZE_LIMIT)
}

/// [`compile_schema`] with the engine's `Limits::max_regex_bytes` as the largest compiled size
/// of a `pattern`, as for `fieldMatches` (regression: patterns always had the default).
#[cfg(any(test, feature = "internals", feature = "reference"))]
pub fn compile_schema_with_regex_limit(
    schema: &Value,
    regex_limit: usize,
) -> Result<SchemaProgram, Vec<SchemaCompileError>> {
    compile_schema_sharing(schema, regex_limit, &mut MatcherCache::default())
}

/// [`compile_schema_with_regex_limit`], building `pattern`s through `matchers`, the cache of
/// the load the schema is part of.
pub(crate) fn compile_schema_sharing(
    schema: &Value,
    regex_limit: usize,
    matchers: &mut MatcherCache,
) -> Result<SchemaProgram, Vec<SchemaCompileError>> {
    let mut compiler = Compiler {
        regex_limit,
        matchers: std::mem::take(matchers),
        ..Compiler::default()
    };
    let mut pointer = String::new();
    let root = compiler.schema(schema, &mut pointer, true);
    compiler.resolve_refs(schema);
    if compiler.errors.is_empty() {
        compiler.reject_in_place_cycles();
    }
    // Back to the load, once the compiler is done with it.
    *matchers = std::mem::take(&mut compiler.matchers);
    if compiler.errors.is_empty() {
        // INVARIANT (schema-arena): every id in `nodes` came from `push` on this arena, and
        // every `$ref` resolved to a registered location, so all ids index `nodes`.
        Ok(SchemaProgram::new(
            compiler.nodes,
            root,
            DEFAULT_SCHEMA_DEPTH_LIMIT,
            DEFAULT_SCHEMA_STEP_LIMIT,
        ))
    } else {
        Err(compiler.errors)
    }
}

/// A `$ref` waiting for every location to be known.
struct PendingRef {
    holder: SchemaNodeId,
    /// Inside a subschema with a nested `$id`, whose base a `#` pointer would be relative to.
    /// That `$id` is already an error; resolving against the root would only add noise.
    under_nested_id: bool,
    target: String,
    pointer: String,
}

struct Compiler {
    nodes: Vec<SchemaNode>,
    /// The schema location of each node, parallel to `nodes` (for cycle messages).
    node_pointers: Vec<String>,
    /// Canonical JSON pointer of every subschema → its node.
    locations: HashMap<String, SchemaNodeId>,
    pending_refs: Vec<PendingRef>,
    errors: Vec<SchemaCompileError>,
    /// How many enclosing subschemas carry a nested `$id`.
    nested_id_depth: u32,
    /// How many subschemas enclose the one being compiled.
    nesting: u32,
    /// The largest compiled size of a `pattern`.
    regex_limit: usize,
    /// The regexes of the load this schema is compiled in (a pattern built once per load).
    matchers: MatcherCache,
}

impl Default for Compiler {
    fn default() -> Self {
        Compiler {
            nodes: Vec::new(),
            node_pointers: Vec::new(),
            locations: HashMap::new(),
            pending_refs: Vec::new(),
            errors: Vec::new(),
            nested_id_depth: 0,
            nesting: 0,
            regex_limit: SCHEMA_REGEX_SIZE_LIMIT,
            matchers: MatcherCache::default(),
        }
    }
}

fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

fn describe(value: &Value) -> String {
    truncate_for_message(value, 64)
}

/// The keywords of one schema object as [`Compiler::object`] reads them; those that combine with
/// another (`contains` with its bounds, `if` with its branches) are put together at the end.
#[derive(Default)]
struct ObjectParts {
    obj: SchemaObject,
    contains: Option<SchemaNodeId>,
    min_contains: Option<u64>,
    max_contains: Option<u64>,
    if_schema: Option<SchemaNodeId>,
    then_schema: Option<SchemaNodeId>,
    else_schema: Option<SchemaNodeId>,
}

impl ObjectParts {
    /// The object with `contains` (at least one match unless `minContains` says otherwise) and
    /// the `if`/`then`/`else` condition in place.
    fn finish(self) -> SchemaObject {
        let mut obj = self.obj;
        if let Some(schema) = self.contains {
            obj.contains = Some(ContainsRule {
                schema,
                min: self.min_contains.unwrap_or(1),
                max: self.max_contains,
            });
        }
        if let Some(if_schema) = self.if_schema {
            obj.condition = Some(Condition {
                if_schema,
                then_schema: self.then_schema,
                else_schema: self.else_schema,
            });
        }
        obj
    }
}

/// The help for an unsupported keyword: what replaces a keyword of another draft, or the
/// nearest supported keyword, or else the supported and ignored keywords.
fn unsupported_keyword_help(keyword: &str) -> String {
    match keyword {
        "$anchor" | "$dynamicAnchor" | "$dynamicRef" | "$recursiveRef" | "$recursiveAnchor" => {
            "refer to subschemas with `$ref` and a `#/...` JSON pointer".to_owned()
        }
        "additionalItems" => "in 2020-12 use `items` after `prefixItems`".to_owned(),
        "dependencies" => "in 2020-12 use `dependentRequired`".to_owned(),
        "definitions" => "in 2020-12 use `$defs`".to_owned(),
        // One suggestion when a keyword is near (`propertis`), not the list.
        _ => match did_you_mean(keyword, SUPPORTED_KEYWORDS.iter().copied()) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!(
                "supported keywords: {}; ignored annotations: {}",
                SUPPORTED_KEYWORDS.join(" "),
                ANNOTATION_KEYWORDS.join(" ")
            ),
        },
    }
}

impl Compiler {
    fn error(&mut self, pointer: &str, message: String, help: Option<String>) {
        self.errors.push(SchemaCompileError {
            pointer: pointer.to_owned(),
            message,
            help,
        });
    }

    fn push(&mut self, node: SchemaNode, pointer: &str) -> SchemaNodeId {
        match SchemaNodeId::from_index(self.nodes.len()) {
            Some(id) => {
                self.nodes.push(node);
                self.node_pointers.push(pointer.to_owned());
                id
            }
            None => {
                self.error(pointer, "schema has too many subschemas".to_owned(), None);
                // The program is rejected anyway; any id will do.
                SchemaNodeId::FIRST
            }
        }
    }

    /// Compiles the subschema at `pointer`; records errors and returns its node either way.
    fn schema(&mut self, value: &Value, pointer: &mut String, is_root: bool) -> SchemaNodeId {
        let id = self.push(SchemaNode::Always, pointer);
        self.locations.insert(pointer.clone(), id);
        if self.nesting >= MAX_SCHEMA_NESTING {
            self.error(
                pointer,
                format!("schema nests subschemas deeper than {MAX_SCHEMA_NESTING} levels"),
                Some("move repeated structure into `$defs` and refer to it with `$ref`".to_owned()),
            );
            return id;
        }
        self.nesting += 1;
        let node = match value {
            Value::Bool(true) => SchemaNode::Always,
            Value::Bool(false) => SchemaNode::Never,
            Value::Object(map) => self.object(map, pointer, is_root),
            other => {
                self.error(
                    pointer,
                    format!(
                        "a schema must be an object or a boolean, found `{}`",
                        describe(other)
                    ),
                    None,
                );
                SchemaNode::Never
            }
        };
        self.nesting -= 1;
        if let Some(slot) = self.nodes.get_mut(id.index()) {
            *slot = node;
        }
        id
    }

    fn child(&mut self, value: &Value, pointer: &mut String, token: &str) -> SchemaNodeId {
        let len = pointer.len();
        push_token(pointer, token);
        let id = self.schema(value, pointer, false);
        pointer.truncate(len);
        id
    }

    /// Compiles a schema object, keyword by keyword; `Always` when none of its keywords asserts
    /// anything (annotations and `$defs` only).
    fn object(
        &mut self,
        map: &Map<String, Value>,
        pointer: &mut String,
        is_root: bool,
    ) -> SchemaNode {
        let mut parts = ObjectParts::default();
        let mut has_assertion = false;
        let nested_id = !is_root && map.contains_key("$id");
        if nested_id {
            self.nested_id_depth += 1;
        }
        for (keyword, value) in map {
            let len = pointer.len();
            push_token(pointer, keyword);
            let here = pointer.clone();
            pointer.truncate(len);
            has_assertion |= self.keyword(&mut parts, keyword, value, pointer, &here, is_root);
        }
        if nested_id {
            self.nested_id_depth -= 1;
        }
        if has_assertion {
            SchemaNode::Object(Box::new(parts.finish()))
        } else {
            SchemaNode::Always
        }
    }

    /// Reads one keyword of the schema object at `pointer` into `parts` (`here` points at the
    /// keyword). Returns whether the keyword asserts anything: annotations and `$defs` do not.
    fn keyword(
        &mut self,
        parts: &mut ObjectParts,
        keyword: &str,
        value: &Value,
        pointer: &mut String,
        here: &str,
        is_root: bool,
    ) -> bool {
        if self.instance_keyword(parts, keyword, value, here)
            || self.subschema_keyword(parts, keyword, value, pointer, here)
        {
            return true;
        }
        match keyword {
            "$ref" => self.reference(value, pointer, here),
            "$defs" => {
                self.schema_map(value, pointer, keyword);
                return false;
            }
            "$id" if !is_root => self.error(
                here,
                "nested `$id` is not supported".to_owned(),
                Some(
                    "`$id` is accepted as an annotation at the schema root only; \
                     refer to subschemas with `#/...` pointers"
                        .to_owned(),
                ),
            ),
            k if ANNOTATION_KEYWORDS.contains(&k) => return false,
            k => self.error(
                here,
                format!("unsupported payloadSchema keyword `{k}`"),
                Some(unsupported_keyword_help(k)),
            ),
        }
        true
    }

    /// Reads `keyword` if it constrains the instance by its own value (`type`, `enum`, bounds,
    /// `pattern`, `required`, ...); false, reading nothing, for any other keyword.
    fn instance_keyword(
        &mut self,
        parts: &mut ObjectParts,
        keyword: &str,
        value: &Value,
        here: &str,
    ) -> bool {
        let obj = &mut parts.obj;
        match keyword {
            "type" => obj.types = self.types(value, here),
            "enum" => match value {
                Value::Array(values) => obj.enum_values = Some(values.clone()),
                _ => self.expected(here, keyword, "an array", value),
            },
            "const" => obj.const_value = Some(value.clone()),
            "minimum" => obj.minimum = self.number(value, here, keyword),
            "maximum" => obj.maximum = self.number(value, here, keyword),
            "exclusiveMinimum" => obj.exclusive_minimum = self.number(value, here, keyword),
            "exclusiveMaximum" => obj.exclusive_maximum = self.number(value, here, keyword),
            "multipleOf" => obj.multiple_of = self.multiple_of(value, here),
            "minLength" => obj.min_length = self.count(value, here, keyword),
            "maxLength" => obj.max_length = self.count(value, here, keyword),
            "minItems" => obj.min_items = self.count(value, here, keyword),
            "maxItems" => obj.max_items = self.count(value, here, keyword),
            "minProperties" => obj.min_properties = self.count(value, here, keyword),
            "maxProperties" => obj.max_properties = self.count(value, here, keyword),
            "minContains" => parts.min_contains = self.count(value, here, keyword),
            "maxContains" => parts.max_contains = self.count(value, here, keyword),
            "uniqueItems" => match value {
                Value::Bool(b) => obj.unique_items = *b,
                _ => self.expected(here, keyword, "a boolean", value),
            },
            "pattern" => match value.as_str() {
                Some(source) => obj.pattern = self.pattern(source, here),
                None => self.expected(here, keyword, "a string", value),
            },
            "format" => obj.format = self.format(value, here),
            "required" => {
                if let Some(names) = self.string_list(value, here, keyword) {
                    obj.required = names;
                }
            }
            "dependentRequired" => obj.dependent_required = self.dependent_required(value, here),
            _ => return false,
        }
        true
    }

    /// Reads `keyword` if its value is a subschema or holds subschemas (`items`, `allOf`,
    /// `properties`, `if`, ...), compiling them as children of `pointer`; false, reading nothing,
    /// for any other keyword.
    fn subschema_keyword(
        &mut self,
        parts: &mut ObjectParts,
        keyword: &str,
        value: &Value,
        pointer: &mut String,
        here: &str,
    ) -> bool {
        let obj = &mut parts.obj;
        match keyword {
            "prefixItems" => obj.prefix_items = self.schema_list(value, pointer, keyword),
            "allOf" => obj.all_of = self.schema_list(value, pointer, keyword),
            "anyOf" => obj.any_of = self.schema_list(value, pointer, keyword),
            "oneOf" => obj.one_of = self.schema_list(value, pointer, keyword),
            "items" => obj.items = Some(self.child(value, pointer, keyword)),
            "contains" => parts.contains = Some(self.child(value, pointer, keyword)),
            "additionalProperties" => {
                obj.additional_properties = Some(self.child(value, pointer, keyword));
            }
            "propertyNames" => obj.property_names = Some(self.child(value, pointer, keyword)),
            "not" => obj.not = Some(self.child(value, pointer, keyword)),
            "if" => parts.if_schema = Some(self.child(value, pointer, keyword)),
            "then" => parts.then_schema = Some(self.child(value, pointer, keyword)),
            "else" => parts.else_schema = Some(self.child(value, pointer, keyword)),
            "properties" => {
                let mut properties = self.schema_map(value, pointer, keyword);
                properties.sort_by(|a, b| a.0.cmp(&b.0));
                obj.properties = properties;
            }
            "patternProperties" => {
                for (source, id) in self.schema_map(value, pointer, keyword) {
                    let mut at = here.to_owned();
                    push_token(&mut at, &source);
                    if let Some(pattern) = self.pattern(&source, &at) {
                        obj.pattern_properties.push((pattern, id));
                    }
                }
            }
            _ => return false,
        }
        true
    }

    /// Records a `$ref` of the schema object at `pointer`, resolved once every subschema is
    /// compiled (`here` points at the keyword).
    fn reference(&mut self, value: &Value, pointer: &str, here: &str) {
        let Some(target) = value.as_str() else {
            return self.expected(here, "$ref", "a string", value);
        };
        // The holder id is the node being built: the last one registered for this pointer.
        if let Some(holder) = self.locations.get(pointer).copied() {
            self.pending_refs.push(PendingRef {
                holder,
                under_nested_id: self.nested_id_depth > 0,
                target: target.to_owned(),
                pointer: here.to_owned(),
            });
        }
    }

    fn expected(&mut self, pointer: &str, keyword: &str, what: &str, found: &Value) {
        self.error(
            pointer,
            format!("`{keyword}` must be {what}, found `{}`", describe(found)),
            None,
        );
    }

    fn types(&mut self, value: &Value, pointer: &str) -> Option<TypeSet> {
        let names: Vec<&Value> = match value {
            Value::String(_) => vec![value],
            Value::Array(items) if !items.is_empty() => items.iter().collect(),
            _ => {
                self.expected(
                    pointer,
                    "type",
                    "a type name or a non-empty array of them",
                    value,
                );
                return None;
            }
        };
        let mut set = TypeSet::empty();
        let mut ok = true;
        for name in names {
            match name.as_str().and_then(SchemaType::from_name) {
                Some(ty) if !set.contains(ty) => set = set.with(ty),
                Some(ty) => {
                    ok = false;
                    self.error(
                        pointer,
                        format!("`type` lists `{}` more than once", ty.name()),
                        None,
                    );
                }
                None => {
                    ok = false;
                    self.error(
                        pointer,
                        format!("unknown type `{}`", describe(name)),
                        Some(
                            "types are null boolean object array number string integer".to_owned(),
                        ),
                    );
                }
            }
        }
        ok.then_some(set)
    }

    fn number(&mut self, value: &Value, pointer: &str, keyword: &str) -> Option<Number> {
        match value {
            Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => Some(n.clone()),
            _ => {
                self.expected(pointer, keyword, "a number", value);
                None
            }
        }
    }

    fn multiple_of(&mut self, value: &Value, pointer: &str) -> Option<(Number, Decimal)> {
        let decimal = match value {
            Value::Number(n) => Decimal::from_number(n)
                .filter(|d| d.mantissa > 0 && n.as_f64().is_some_and(|f| f > 0.0))
                .map(|d| (n.clone(), d)),
            _ => None,
        };
        if decimal.is_none() {
            self.expected(pointer, "multipleOf", "a number greater than 0", value);
        }
        decimal
    }

    fn count(&mut self, value: &Value, pointer: &str, keyword: &str) -> Option<u64> {
        let count = match value {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)
                    // Integral and non-negative; `as` saturates above u64::MAX, which is the
                    // right reading of an absurdly large bound.
                    .map(|f| {
                        #[expect(
                            clippy::cast_possible_truncation,
                            clippy::cast_sign_loss,
                            reason = "f is integral and non-negative; the cast saturates"
                        )]
                        let whole = f as u64;
                        whole
                    })
            }),
            _ => None,
        };
        if count.is_none() {
            self.expected(pointer, keyword, "a non-negative integer", value);
        }
        count
    }

    fn pattern(&mut self, source: &str, pointer: &str) -> Option<SchemaPattern> {
        let translated = match ecma_to_rust_regex(source) {
            Ok(translated) => translated,
            Err(reason) => {
                self.error(
                    pointer,
                    format!("invalid pattern `{source}`: {reason}"),
                    None,
                );
                return None;
            }
        };
        match self.matchers.build(&translated, false, self.regex_limit) {
            Ok(regex) => Some(SchemaPattern {
                source: source.to_owned(),
                regex,
            }),
            Err(BuildError::TotalTooBig { limit }) => {
                self.error(
                    pointer,
                    format!("pattern `{source}`: {}", BuildError::TotalTooBig { limit }),
                    Some(
                        "share patterns between schemas, simplify them, or raise the limit"
                            .to_owned(),
                    ),
                );
                None
            }
            Err(BuildError::Regex(error)) => {
                let (reason, help) = regex_error_reason(&error);
                self.error(
                    pointer,
                    format!("invalid pattern `{source}`: {reason}"),
                    Some(help),
                );
                None
            }
        }
    }

    fn format(&mut self, value: &Value, pointer: &str) -> Option<Format> {
        let format = value.as_str().and_then(Format::from_name);
        if format.is_none() {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            self.error(
                pointer,
                format!("unsupported format `{}`", describe(value)),
                Some(format!("supported formats: {}", names.join(" "))),
            );
        }
        format
    }

    fn string_list(&mut self, value: &Value, pointer: &str, keyword: &str) -> Option<Vec<String>> {
        let items = match value {
            Value::Array(items) => items,
            _ => {
                self.expected(pointer, keyword, "an array of strings", value);
                return None;
            }
        };
        let mut names = Vec::with_capacity(items.len());
        for item in items {
            match item.as_str() {
                Some(name) => names.push(name.to_owned()),
                None => {
                    self.expected(pointer, keyword, "an array of strings", value);
                    return None;
                }
            }
        }
        Some(names)
    }

    fn dependent_required(&mut self, value: &Value, pointer: &str) -> Vec<(String, Vec<String>)> {
        let Value::Object(map) = value else {
            self.expected(
                pointer,
                "dependentRequired",
                "an object of string arrays",
                value,
            );
            return Vec::new();
        };
        let mut rules = Vec::with_capacity(map.len());
        for (name, dependents) in map {
            let mut at = pointer.to_owned();
            push_token(&mut at, name);
            if let Some(list) = self.string_list(dependents, &at, "dependentRequired") {
                rules.push((name.clone(), list));
            }
        }
        rules
    }

    fn schema_list(
        &mut self,
        value: &Value,
        pointer: &mut String,
        keyword: &str,
    ) -> Vec<SchemaNodeId> {
        let items = match value {
            Value::Array(items) if !items.is_empty() => items,
            _ => {
                let mut at = pointer.clone();
                push_token(&mut at, keyword);
                self.expected(&at, keyword, "a non-empty array of schemas", value);
                return Vec::new();
            }
        };
        let len = pointer.len();
        push_token(pointer, keyword);
        let ids = items
            .iter()
            .enumerate()
            .map(|(i, item)| self.child(item, pointer, &i.to_string()))
            .collect();
        pointer.truncate(len);
        ids
    }

    fn schema_map(
        &mut self,
        value: &Value,
        pointer: &mut String,
        keyword: &str,
    ) -> Vec<(String, SchemaNodeId)> {
        let Value::Object(map) = value else {
            let mut at = pointer.clone();
            push_token(&mut at, keyword);
            self.expected(&at, keyword, "an object of schemas", value);
            return Vec::new();
        };
        let len = pointer.len();
        push_token(pointer, keyword);
        let entries = map
            .iter()
            .map(|(name, schema)| (name.clone(), self.child(schema, pointer, name)))
            .collect();
        pointer.truncate(len);
        entries
    }

    fn resolve_refs(&mut self, document: &Value) {
        for pending in std::mem::take(&mut self.pending_refs) {
            if pending.under_nested_id && pending.target.starts_with('#') {
                continue;
            }
            match self.resolve(&pending.target, document) {
                Ok(target) => {
                    if let Some(SchemaNode::Object(obj)) =
                        self.nodes.get_mut(pending.holder.index())
                    {
                        obj.reference = Some(target);
                    }
                }
                Err((message, help)) => self.error(&pending.pointer, message, help),
            }
        }
    }

    fn resolve(
        &self,
        target: &str,
        document: &Value,
    ) -> Result<SchemaNodeId, (String, Option<String>)> {
        let local_help =
            || Some("only `#` and `#/...` JSON pointers into this schema are supported".to_owned());
        let Some(fragment) = target.strip_prefix('#') else {
            return Err((
                format!("`$ref` `{target}` is not a local reference"),
                local_help(),
            ));
        };
        let decoded = percent_decode(fragment).ok_or_else(|| {
            (
                format!("`$ref` `{target}` has invalid percent-encoding"),
                None,
            )
        })?;
        let canonical = if decoded.is_empty() {
            String::new()
        } else if let Some(rest) = decoded.strip_prefix('/') {
            let mut canonical = String::with_capacity(decoded.len());
            for token in rest.split('/') {
                let token = unescape_token(token).ok_or_else(|| {
                    (
                        format!("`$ref` `{target}` has an invalid `~` escape"),
                        Some("in a JSON pointer `~0` is `~` and `~1` is `/`".to_owned()),
                    )
                })?;
                push_token(&mut canonical, &token);
            }
            canonical
        } else {
            return Err((
                format!("`$ref` `{target}` refers to an anchor, which is not supported"),
                local_help(),
            ));
        };
        if let Some(id) = self.locations.get(&canonical) {
            return Ok(*id);
        }
        if document.pointer(&canonical).is_some() {
            Err((
                format!("`$ref` `{target}` points to a value that is not a schema"),
                None,
            ))
        } else {
            Err((
                format!("`$ref` `{target}` does not resolve to anything in this schema"),
                None,
            ))
        }
    }

    /// Rejects cycles made only of in-place edges: such a cycle re-evaluates the same instance
    /// forever. Cycles through `properties`, `items` and the like are fine: each trip around
    /// descends into the instance, which is finite.
    fn reject_in_place_cycles(&mut self) {
        let edges: Vec<Vec<SchemaNodeId>> = self
            .nodes
            .iter()
            .map(|node| match node {
                SchemaNode::Object(obj) => obj.in_place_children().collect(),
                _ => Vec::new(),
            })
            .collect();
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Active,
            Done,
        }
        let mut marks = vec![Mark::New; self.nodes.len()];
        let mut cycles = Vec::new();
        for start in 0..self.nodes.len() {
            if marks.get(start) != Some(&Mark::New) {
                continue;
            }
            // Iterative DFS: (node, next edge to follow).
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            if let Some(m) = marks.get_mut(start) {
                *m = Mark::Active;
            }
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                let Some(child) = edges
                    .get(node)
                    .and_then(|e| e.get(*next))
                    .map(|c| c.index())
                else {
                    if let Some(m) = marks.get_mut(node) {
                        *m = Mark::Done;
                    }
                    stack.pop();
                    continue;
                };
                *next += 1;
                match marks.get(child) {
                    Some(Mark::New) => {
                        if let Some(m) = marks.get_mut(child) {
                            *m = Mark::Active;
                        }
                        stack.push((child, 0));
                    }
                    Some(Mark::Active) => {
                        let from = stack.iter().position(|(n, _)| *n == child).unwrap_or(0);
                        let path: Vec<usize> = stack
                            .get(from..)
                            .unwrap_or_default()
                            .iter()
                            .map(|(n, _)| *n)
                            .chain(std::iter::once(child))
                            .collect();
                        cycles.push((node, path));
                    }
                    _ => {}
                }
            }
        }
        for (node, path) in cycles {
            let mut chain = String::new();
            for (i, n) in path.iter().enumerate() {
                if i > 0 {
                    chain.push_str(" → ");
                }
                let at = self
                    .node_pointers
                    .get(*n)
                    .map(String::as_str)
                    .unwrap_or("?");
                let _ = write!(chain, "`#{at}`");
            }
            let pointer = self.node_pointers.get(node).cloned().unwrap_or_default();
            self.error(
                &pointer,
                format!("`$ref` cycle never descends into the payload: {chain}"),
                Some(
                    "a recursive schema must pass through `properties`, `items` or another \
                     keyword that moves into the payload before it refers back"
                        .to_owned(),
                ),
            );
        }
    }
}

fn unescape_token(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hi = bytes.get(i + 1).and_then(|h| (*h as char).to_digit(16))?;
            let lo = bytes.get(i + 2).and_then(|h| (*h as char).to_digit(16))?;
            out.push(u8::try_from(hi * 16 + lo).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Rewrites the ECMA-262 shorthand classes whose meaning differs in Rust's Unicode mode:
/// `\d \D \w \W` are ASCII in ECMA-262. Everything else passes through unchanged.
///
/// Inside a class, such an escape next to a `-` that would make it a range endpoint
/// (`[\w-~]`, `[+-\d]`) is refused, as ECMA-262 refuses it in Unicode mode: written out as
/// `0-9A-Za-z_`, the `-` joined its last character into a range (`_`..`~`, which let `{` in).
pub(crate) fn ecma_to_rust_regex(source: &str) -> Result<String, String> {
    let endpoint = |e: char| {
        format!(
            "`\\{e}` cannot be an end of a range in a character class (write the `-` last, or escape it as `\\-`)"
        )
    };
    let mut out = String::with_capacity(source.len() + 16);
    let mut class_depth = 0u32;
    // Where the innermost class's atoms start in `out` (after a `^`), to tell a range `-` from
    // a leading one.
    let mut class_start = 0usize;
    // Where the last unescaped `-` went in `out` (an escaped `\-` is a literal).
    let mut dash_at: Option<usize> = None;
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('d' | 'D' | 'w' | 'W')) => {
                    if class_depth > 0 {
                        let after_range_dash =
                            dash_at.is_some_and(|at| at > class_start && at + 1 == out.len());
                        let mut ahead = chars.clone();
                        let before_range_dash =
                            ahead.next() == Some('-') && ahead.next().is_some_and(|n| n != ']');
                        if after_range_dash || before_range_dash {
                            return Err(endpoint(e));
                        }
                    }
                    let (positive, negated) = match e {
                        'd' | 'D' => ("0-9", "[^0-9]"),
                        _ => ("0-9A-Za-z_", "[^0-9A-Za-z_]"),
                    };
                    let is_negated = e.is_ascii_uppercase();
                    match (class_depth > 0, is_negated) {
                        (true, false) => out.push_str(positive),
                        (false, false) => {
                            out.push('[');
                            out.push_str(positive);
                            out.push(']');
                        }
                        (_, true) => out.push_str(negated),
                    }
                }
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '[' => {
                out.push('[');
                // A POSIX class such as `[:alpha:]` (letters only) is copied through to its
                // `:]`; anything else that starts `[:` is a nested class whose escapes are
                // rewritten (regression: `[[:\d:]]` was copied whole and kept Unicode `\d`).
                let posix = class_depth > 0 && {
                    let mut ahead = chars.clone();
                    ahead.next() == Some(':') && {
                        let name: String = ahead
                            .clone()
                            .take_while(char::is_ascii_alphabetic)
                            .collect();
                        let mut rest = ahead.skip(name.len());
                        !name.is_empty() && rest.next() == Some(':') && rest.next() == Some(']')
                    }
                };
                if posix {
                    while let Some(p) = chars.next() {
                        out.push(p);
                        if p == ':' && chars.peek() == Some(&']') {
                            if let Some(close) = chars.next() {
                                out.push(close);
                            }
                            break;
                        }
                    }
                } else {
                    class_depth += 1;
                    // A `]` (after an optional `^`) right at the start is a literal in Rust.
                    if chars.peek() == Some(&'^')
                        && let Some(caret) = chars.next()
                    {
                        out.push(caret);
                    }
                    class_start = out.len();
                    if chars.peek() == Some(&']')
                        && let Some(bracket) = chars.next()
                    {
                        out.push(bracket);
                    }
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(']');
            }
            c => {
                if c == '-' {
                    dash_at = Some(out.len());
                }
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// One-line reason and help for a regex that did not compile.
fn regex_error_reason(error: &regex::Error) -> (String, String) {
    let dialect = "payloadSchema patterns use the linear-time Rust `regex` dialect: \
                   no backreferences, no look-around"
        .to_owned();
    match error {
        regex::Error::CompiledTooBig(limit) => (
            format!("compiled regex exceeds the size limit of {limit} bytes"),
            "simplify the pattern, e.g. smaller counted repetitions".to_owned(),
        ),
        regex::Error::Syntax(text) => {
            let reason = text
                .lines()
                .rev()
                .find_map(|line| line.trim().strip_prefix("error: "))
                .unwrap_or("syntax error")
                .to_owned();
            let reason = if text.contains("look-around") || text.contains("backreferences") {
                format!("{reason} (look-around and backreferences are not supported)")
            } else {
                reason
            };
            (reason, dialect)
        }
        _ => ("regex could not be compiled".to_owned(), dialect),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_of_one_load_build_each_pattern_once() {
        let mut matchers = MatcherCache::default();
        let schema = json!({
            "properties": {
                "sku": { "type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$" },
                "code": { "type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$" }
            }
        });
        for _ in 0..3 {
            let program = compile_schema_sharing(&schema, SCHEMA_REGEX_SIZE_LIMIT, &mut matchers)
                .unwrap_or_else(|e| panic!("{e:?}"));
            assert!(crate::vm::schema::is_valid(
                &program,
                &json!({"sku": "ABC-1234"})
            ));
            assert!(!crate::vm::schema::is_valid(
                &program,
                &json!({"code": "abc-1234"})
            ));
        }
        assert_eq!(matchers.len(), 1);
        // A pattern over the limit is refused at each use, as without the cache.
        let big = json!({ "properties": { "a": { "pattern": "[a-z]{1000}" }, "b": { "pattern": "[a-z]{1000}" } } });
        let errors = compile_schema_sharing(&big, 64, &mut matchers).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert_eq!(
            errors,
            compile_schema_with_regex_limit(&big, 64).unwrap_err()
        );
    }

    fn errors(schema: Value) -> Vec<SchemaCompileError> {
        compile_schema(&schema).unwrap_err()
    }

    fn one_error(schema: Value) -> SchemaCompileError {
        let errs = errors(schema);
        assert_eq!(errs.len(), 1, "{errs:?}");
        errs.into_iter().next().unwrap()
    }

    #[test]
    fn unknown_keyword_is_an_error_naming_it() {
        let e = one_error(json!({"properties": {"a": {"foo": 1}}}));
        assert_eq!(e.pointer, "/properties/a/foo");
        assert_eq!(e.message, "unsupported payloadSchema keyword `foo`");
        assert!(e.help.is_some());
    }

    #[test]
    fn a_misspelt_keyword_gets_one_suggestion_not_the_list() {
        let e = one_error(json!({"type": "object", "propertis": {}}));
        assert_eq!(e.message, "unsupported payloadSchema keyword `propertis`");
        assert_eq!(e.help.as_deref(), Some("did you mean `properties`?"));
        let e = one_error(json!({"minLenght": 1}));
        assert_eq!(e.help.as_deref(), Some("did you mean `minLength`?"));
    }

    #[test]
    fn every_error_is_reported_not_just_the_first() {
        let errs = errors(json!({
            "foo": 1,
            "minLength": -1,
            "properties": {"a": {"type": "nope"}, "b": {"pattern": "("}},
            "format": "color"
        }));
        let pointers: Vec<&str> = errs.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(
            pointers,
            // Errors come in key order (serde_json's map is sorted).
            [
                "/foo",
                "/format",
                "/minLength",
                "/properties/a/type",
                "/properties/b/pattern"
            ]
        );
    }

    #[test]
    fn annotations_are_accepted_and_ignored() {
        let program = compile_schema(&json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://example.com/s",
            "title": "t", "description": "d", "$comment": "c", "examples": [1],
            "default": 1, "deprecated": false, "readOnly": true, "writeOnly": false
        }))
        .unwrap();
        assert!(matches!(
            program.node(program.root()),
            Some(SchemaNode::Always)
        ));
    }

    #[test]
    fn nested_id_is_rejected() {
        let e = one_error(json!({"$defs": {"a": {"$id": "a.json"}}}));
        assert_eq!(e.pointer, "/$defs/a/$id");
        assert!(e.message.contains("nested `$id`"));
    }

    #[test]
    fn keyword_values_must_have_the_right_type() {
        for (schema, pointer) in [
            (json!({"minLength": 1.5}), "/minLength"),
            (json!({"maxItems": "3"}), "/maxItems"),
            (json!({"minimum": "0"}), "/minimum"),
            (json!({"multipleOf": 0}), "/multipleOf"),
            (json!({"multipleOf": -2}), "/multipleOf"),
            (json!({"required": ["a", 1]}), "/required"),
            (json!({"enum": 1}), "/enum"),
            (json!({"uniqueItems": 1}), "/uniqueItems"),
            (json!({"allOf": []}), "/allOf"),
            (json!({"anyOf": {}}), "/anyOf"),
            (json!({"properties": []}), "/properties"),
            (json!({"items": 3}), "/items"),
            (json!({"type": []}), "/type"),
            (json!({"type": ["string", "string"]}), "/type"),
            (
                json!({"dependentRequired": {"a": "b"}}),
                "/dependentRequired/a",
            ),
            (json!({"$ref": 1}), "/$ref"),
        ] {
            let e = one_error(schema.clone());
            assert_eq!(e.pointer, pointer, "{schema}");
        }
    }

    #[test]
    fn counts_accept_integral_floats() {
        assert!(compile_schema(&json!({"maxLength": 2.0, "minContains": 1.0})).is_ok());
    }

    #[test]
    fn remote_refs_are_rejected() {
        let e = one_error(json!({"$ref": "https://example.com/schema"}));
        assert!(
            e.message.contains("is not a local reference"),
            "{}",
            e.message
        );
        let e = one_error(json!({"$ref": "other.json#/a"}));
        assert!(e.message.contains("is not a local reference"));
    }

    #[test]
    fn anchor_refs_are_rejected() {
        let e = one_error(json!({"$ref": "#foo"}));
        assert!(e.message.contains("anchor"));
    }

    #[test]
    fn dangling_refs_are_rejected() {
        let e = one_error(json!({"$ref": "#/$defs/missing"}));
        assert!(e.message.contains("does not resolve"), "{}", e.message);
        let e = one_error(json!({"$ref": "#/required", "required": ["a"]}));
        assert!(e.message.contains("not a schema"), "{}", e.message);
    }

    #[test]
    fn ref_pointers_are_unescaped_and_percent_decoded() {
        assert!(
            compile_schema(&json!({
                "$defs": {"a/b": true, "c~d": true, "e%f": true, "g\"h": true},
                "allOf": [
                    {"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"},
                    {"$ref": "#/$defs/e%25f"}, {"$ref": "#/$defs/g%22h"},
                    {"$ref": "#"}
                ],
                "properties": {"x": {"$ref": "#"}}
            }))
            .is_err(),
            "the `#` inside allOf is an in-place cycle"
        );
        assert!(
            compile_schema(&json!({
                "$defs": {"a/b": true, "c~d": true, "e%f": true, "g\"h": true},
                "allOf": [
                    {"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"},
                    {"$ref": "#/$defs/e%25f"}, {"$ref": "#/$defs/g%22h"}
                ],
                "properties": {"x": {"$ref": "#"}}
            }))
            .is_ok()
        );
        let e = one_error(json!({"$ref": "#/$defs/a~2"}));
        assert!(e.message.contains("`~`"));
        let e = one_error(json!({"$ref": "#/%zz"}));
        assert!(e.message.contains("percent"));
    }

    #[test]
    fn ref_cycles_that_never_descend_are_rejected() {
        let e = one_error(json!({"$ref": "#"}));
        assert!(e.message.contains("cycle"), "{}", e.message);
        let e = one_error(json!({
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
            "$ref": "#/$defs/a"
        }));
        assert!(
            e.message.contains("`#/$defs/a` → `#/$defs/b`"),
            "{}",
            e.message
        );
    }

    #[test]
    fn ref_cycles_through_the_instance_are_fine() {
        assert!(compile_schema(&json!({"properties": {"next": {"$ref": "#"}}})).is_ok());
        assert!(
            compile_schema(&json!({"items": {"$ref": "#"}, "not": {"items": {"$ref": "#"}}}))
                .is_ok()
        );
    }

    #[test]
    fn unknown_formats_are_rejected() {
        let e = one_error(json!({"format": "color"}));
        assert_eq!(e.message, "unsupported format `\"color\"`");
        assert!(e.help.unwrap().contains("date-time"));
    }

    #[test]
    fn backreferences_and_lookaround_are_rejected_clearly() {
        let e = one_error(json!({"pattern": "(a)\\1"}));
        assert!(e.message.contains("backreferences"), "{}", e.message);
        assert!(!e.message.contains('\n'));
        let e = one_error(json!({"patternProperties": {"(?=a)": true}}));
        assert_eq!(e.pointer, "/patternProperties/(?=a)");
        assert!(e.message.contains("look-around"), "{}", e.message);
    }

    #[test]
    fn oversized_regexes_are_rejected() {
        let e = one_error(json!({"pattern": "(\\pL{50}){50}"}));
        assert!(e.message.contains("size limit"), "{}", e.message);
    }

    #[test]
    fn ecma_shorthands_become_ascii_classes() {
        let ok = |source: &str| ecma_to_rust_regex(source).unwrap();
        assert_eq!(ok(r"^\d+$"), "^[0-9]+$");
        assert_eq!(ok(r"[\w-]"), "[0-9A-Za-z_-]");
        assert_eq!(ok(r"[-\w]"), "[-0-9A-Za-z_]");
        assert_eq!(ok(r"[^-\d]"), "[^-0-9]");
        assert_eq!(ok(r"[^\D]"), "[^[^0-9]]");
        assert_eq!(ok(r"\\d"), r"\\d");
        assert_eq!(ok(r"[[:alpha:]\d]"), "[[:alpha:]0-9]");
        assert_eq!(ok(r"[]\d]"), "[]0-9]");
        assert_eq!(ok(r"[a\-\d]"), r"[a\-0-9]");
    }

    /// Found in review: inside a class, `\d`/`\w` written out as `0-9A-Za-z_` let a `-` next to
    /// them make a range (`[\w-~]` took in `_`..`~`, so `{` passed; `[+-\d]` took `+`..`0`), and
    /// `[[:\d:]]` was copied as if POSIX, keeping Unicode `\d`. A class escape as a range end is
    /// refused, as ECMA-262 refuses it in Unicode mode; a lookalike's escapes are rewritten.
    #[test]
    fn regression_a_class_escape_is_never_a_range_end() {
        for source in [r"^[\w-~]+$", r"^[+-\d]+$", r"[a-\D]", r"[\W-z]", r"[]-\d]"] {
            assert!(ecma_to_rust_regex(source).is_err(), "{source}");
            let e = one_error(json!({ "pattern": source }));
            assert!(
                e.message.contains("cannot be an end of a range"),
                "{}",
                e.message
            );
        }
        let program = compile_schema(&json!({"pattern": "^[[:\\d:]]+$"})).unwrap();
        assert!(!crate::vm::schema::is_valid(
            &program,
            &json!("\u{9e7}\u{9e8}")
        ));
        let program = compile_schema(&json!({
            "patternProperties": {"^[\\w-]+$": {"type": "string"}},
            "additionalProperties": false
        }))
        .unwrap();
        assert!(crate::vm::schema::is_valid(&program, &json!({"a-b": "x"})));
        assert!(!crate::vm::schema::is_valid(
            &program,
            &json!({"a{b}": "x"})
        ));
    }

    #[test]
    fn absurdly_deep_schemas_are_rejected_not_overflowed() {
        let mut schema = json!(true);
        for _ in 0..300 {
            schema = json!({ "not": schema });
        }
        let e = one_error(schema);
        assert!(e.message.contains("deeper than 256"), "{}", e.message);
    }

    #[test]
    fn compiled_programs_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SchemaProgram>();
    }

    #[test]
    fn schemas_must_be_objects_or_booleans() {
        let e = one_error(json!({"not": 3}));
        assert_eq!(e.pointer, "/not");
        let e = one_error(json!(null));
        assert_eq!(e.pointer, "");
    }
}
