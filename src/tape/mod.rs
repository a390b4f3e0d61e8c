//! A borrowed JSON "tape": one validating pass over the request bytes that stores a flat array of
//! small `Node`s pointing into them, instead of building a `serde_json::Value`.
//!
//! - [`Tape`] owns the reusable buffers (nodes, the parse stack, the duplicate-key set). Parsing
//!   into a warm tape allocates nothing unless the input needs more room than any before it.
//! - [`Doc`] is one parsed document: the input bytes plus the nodes, borrowed from the tape.
//! - [`NodeRef`] is a value inside a [`Doc`]: its [`Kind`], scalar accessors (strings are decoded
//!   lazily, borrowed when they hold no escapes), member/element navigation, its nesting depth and
//!   a conversion to `serde_json::Value`.
//! - [`TapeError`] says why bytes are not accepted, with the byte offset.
//!
//! The tape accepts exactly what [`parse_json_slice_with_depth`] accepts (serde_json with
//! `float_roundtrip`, plus duplicate keys refused at any depth and at most `max_depth` nested
//! arrays/objects), and [`NodeRef::to_value`] of the root equals the `Value` it returns.
//!
//! Layout: the nodes are in document order (pre-order). A container's node is followed by its
//! children; an object's children are its members, each a key node followed by the value's
//! subtree. Every node records `next`, the index of the first node after its subtree, so
//! siblings are one step apart whatever they contain.
//!
//! [`parse_json_slice_with_depth`]: crate::engine::parse_json_slice_with_depth

mod keys;
mod scan;
mod string;

use std::borrow::Cow;
use std::str::FromStr;

use serde_json::{Map, Number, Value};

use keys::KeySet;
use scan::Frame;
use string::DecodedBytes;

use crate::bytes::bytes_eq;
use crate::convert::usize_from;

/// What a JSON value is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number.
    Number,
    /// A string (also every object key).
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// The body of a string node holds at least one escape.
const ESCAPED: u8 = 1;
/// The body of a string node holds a byte outside ASCII (an escape aside). A key with neither
/// flag is plain ASCII, compared under case folding with `eq_ignore_ascii_case`.
const NON_ASCII: u8 = 16;
/// A number node holds its value, read once by the parser, as a `u64` in `len` (low half) and
/// `depth` (high half) — fields only containers use otherwise — so comparing or bounding it never
/// parses its text again (regression: a long number was parsed on every read, and `uniqueItems`
/// over many of them read gigabytes). One of these flags says which form serde_json gives it.
const NUMBER_POSITIVE: u8 = 2;
/// See [`NUMBER_POSITIVE`]: an `i64` below zero.
const NUMBER_NEGATIVE: u8 = 4;
/// See [`NUMBER_POSITIVE`]: the bits of a finite `f64`.
const NUMBER_FLOAT: u8 = 8;

/// One value on the tape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    /// Strings: the first byte after the opening quote; other values: their first byte.
    start: u32,
    /// Strings: the closing quote; other values: one past their last byte.
    end: u32,
    // INVARIANT (next): the index of the first node after this node's subtree (index + 1 for a
    // scalar); set by the parser when the value is complete.
    next: u32,
    /// Containers: the number of elements or members; numbers: the low half of their value
    /// ([`NUMBER_POSITIVE`]); 0 for other scalars.
    len: u32,
    /// Containers: nested arrays/objects inside and including this one; numbers: the high half
    /// of their value; 0 for other scalars.
    depth: u32,
    kind: Kind,
    flags: u8,
}

impl Node {
    /// Strings: the bytes between the quotes; other values: their text.
    #[inline]
    fn body<'b>(&self, bytes: &'b [u8]) -> &'b [u8] {
        bytes
            .get(usize_from(self.start)..usize_from(self.end))
            .unwrap_or_default()
    }

    #[inline]
    fn escaped(&self) -> bool {
        self.flags & ESCAPED != 0
    }

    /// A string whose body is its text and all ASCII (no escape, no byte outside ASCII).
    #[inline]
    fn plain_ascii(&self) -> bool {
        self.flags & (ESCAPED | NON_ASCII) == 0
    }
}

/// Which member names of one object [`Tape::parse_with`] refuses as the same name given twice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Repeats {
    /// Names that decode to the same string (`{"a":1,"\u0061":2}`): what JSON parsers that keep
    /// one member per name disagree on. [`Tape::parse`] refuses these.
    #[default]
    Exact,
    /// Also names equal under Unicode simple case folding (`{"amount":1,"Amount":2}`,
    /// `{"kind":1,"\u212Aind":2}` with the KELVIN SIGN): what a server that binds members
    /// case-insensitively (Go's `encoding/json`) may read either of. What the engine refuses
    /// by default (`Limits::refuse_case_variant_members`).
    CaseFolded,
}

/// Whether two string nodes decode to the same string: a byte comparison when neither has
/// escapes, a streaming decoded comparison (no allocation) otherwise.
#[inline]
fn keys_equal(bytes: &[u8], a: &Node, b: &Node) -> bool {
    let (body_a, body_b) = (a.body(bytes), b.body(bytes));
    match (a.escaped(), b.escaped()) {
        (false, false) => bytes_eq(body_a, body_b),
        (true, false) => DecodedBytes::new(body_a).eq(body_b.iter().copied()),
        (false, true) => DecodedBytes::new(body_b).eq(body_a.iter().copied()),
        (true, true) => DecodedBytes::new(body_a).eq(DecodedBytes::new(body_b)),
    }
}

/// Whether two string nodes are equal under simple case folding ([`crate::fold`]), decoded;
/// allocates nothing.
#[inline]
fn keys_fold_equal(bytes: &[u8], a: &Node, b: &Node) -> bool {
    let (body_a, body_b) = (a.body(bytes), b.body(bytes));
    if a.plain_ascii() && b.plain_ascii() {
        return body_a.len() == body_b.len() && body_a.eq_ignore_ascii_case(body_b);
    }
    keys_fold_equal_decoded(body_a, body_b)
}

/// [`keys_fold_equal`] for a key with escapes or bytes outside ASCII: character by character.
#[cold]
#[inline(never)]
fn keys_fold_equal_decoded(a: &[u8], b: &[u8]) -> bool {
    let fold = crate::fold::fold_char;
    string::decoded_chars(a)
        .map(fold)
        .eq(string::decoded_chars(b).map(fold))
}

/// Whether the string with body `body` (escapes decoded) is a case variant of `key` and not
/// `key` itself: for names with escapes or bytes outside ASCII.
#[cold]
#[inline(never)]
fn name_is_case_variant(body: &[u8], key: &str) -> bool {
    let fold = crate::fold::fold_char;
    !DecodedBytes::new(body).eq(key.bytes())
        && string::decoded_chars(body)
            .map(fold)
            .eq(key.chars().map(fold))
}

/// Whether the body of an escaped key decodes to `key` (out of line: keys with escapes are rare,
/// and the decoder in line would make every member lookup pay for its registers).
#[cold]
#[inline(never)]
fn escaped_key_is(body: &[u8], key: &str) -> bool {
    DecodedBytes::new(body).eq(key.bytes())
}

#[cfg(test)]
thread_local! {
    /// Members [`NodeRef::get`] has looked at on this thread, for tests of what lookups cost.
    pub(crate) static MEMBERS_PASSED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Why bytes were not accepted as one JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{kind} at byte {offset}")]
pub struct TapeError {
    /// The byte offset where the problem was found.
    pub offset: u32,
    /// What the problem is.
    pub kind: ErrorKind,
}

/// What is wrong with the input, for [`TapeError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The input is longer than `u32::MAX` bytes.
    #[error("input is {0} bytes, more than the tape's limit of 4294967295")]
    TooLong(usize),
    /// The input ends inside a value.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// A value was expected here.
    #[error("expected a value")]
    ExpectedValue,
    /// An object key (a string) was expected here.
    #[error("expected an object key")]
    ExpectedKey,
    /// `:` was expected after an object key.
    #[error("expected `:` after an object key")]
    ExpectedColon,
    /// `,` or `]` was expected after an array element.
    #[error("expected `,` or `]` after an array element")]
    ExpectedCommaOrBracket,
    /// `,` or `}` was expected after an object member.
    #[error("expected `,` or `}}` after an object member")]
    ExpectedCommaOrBrace,
    /// Something other than whitespace follows the value.
    #[error("trailing characters after the value")]
    TrailingCharacters,
    /// `true`, `false` or `null` is misspelt.
    #[error("invalid literal")]
    InvalidLiteral,
    /// The number does not follow JSON's number grammar.
    #[error("invalid number")]
    InvalidNumber,
    /// The number is too large for an `f64`.
    #[error("number out of range")]
    NumberOutOfRange,
    /// A string holds a raw control character (below 0x20).
    #[error("control character in a string")]
    ControlCharacter,
    /// A string holds an unknown escape or a `\u` with bad hex digits.
    #[error("invalid escape in a string")]
    InvalidEscape,
    /// A `\u` escape is a surrogate that is not part of a high-low pair.
    #[error("lone surrogate in a `\\u` escape")]
    LoneSurrogate,
    /// A string is not valid UTF-8.
    #[error("invalid utf-8 in a string")]
    InvalidUtf8,
    /// An object has the same key twice (compared after decoding escapes).
    #[error("duplicate key `{0}`")]
    DuplicateKey(String),
    /// An object has two keys equal under simple case folding ([`Repeats::CaseFolded`]).
    #[error("key `{0}` differs from an earlier key of its object only by case")]
    CaseVariantKey(String),
    /// Arrays/objects nest deeper than the limit.
    #[error("json nested too deeply (more than {0} levels)")]
    TooDeep(usize),
    /// The parser found its own state inconsistent (unreachable by construction). Refused, so
    /// the strict parser reads the input instead: never a duplicate let through.
    #[error("internal error: the tape parser's state is inconsistent")]
    Internal,
}

/// Reusable buffers for parsing JSON documents onto a tape.
#[derive(Debug, Clone, Default)]
pub struct Tape {
    nodes: Vec<Node>,
    stack: Vec<Frame>,
    keys: KeySet,
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Self {
        Tape::default()
    }

    /// Parses `bytes` as one JSON value, replacing the tape's contents; no allocation once warm
    /// (when the tape has parsed an input needing as many nodes, as deep a nesting and as many
    /// keys in large objects before). Refuses an object with two keys that decode to the same
    /// string ([`Repeats::Exact`]).
    pub fn parse<'t>(
        &'t mut self,
        bytes: &'t [u8],
        max_depth: usize,
    ) -> Result<Doc<'t>, TapeError> {
        self.parse_with(bytes, max_depth, Repeats::Exact)
    }

    /// [`Tape::parse`], refusing the keys `repeats` names as one key given twice. A gateway
    /// that hands the document to `Engine::check_doc` parses with the engine's own rule
    /// (`Repeats::CaseFolded` under the default limits), or the engine parses the bytes again.
    pub fn parse_with<'t>(
        &'t mut self,
        bytes: &'t [u8],
        max_depth: usize,
        repeats: Repeats,
    ) -> Result<Doc<'t>, TapeError> {
        scan::parse(self, bytes, max_depth, repeats == Repeats::CaseFolded)?;
        // An accepted document is UTF-8 throughout (outside strings only ASCII is valid JSON,
        // inside them the scan checked it), so this holds; checking the whole input once lets
        // every string read later borrow by slicing instead of validating its bytes again.
        let text = simdutf8::compat::from_utf8(bytes).map_err(|e| TapeError {
            offset: scan::offset(e.valid_up_to()),
            kind: ErrorKind::InvalidUtf8,
        })?;
        Ok(Doc {
            bytes,
            text,
            nodes: &self.nodes,
            repeats,
        })
    }
}

/// One parsed JSON document: the input bytes and its nodes.
#[derive(Clone, Copy, Debug)]
pub struct Doc<'t> {
    bytes: &'t [u8],
    /// `bytes` as text (an accepted document is UTF-8).
    text: &'t str,
    // INVARIANT (non-empty): a successful parse leaves at least the root node.
    nodes: &'t [Node],
    /// The keys the parse refused as repeats.
    repeats: Repeats,
}

impl<'t> Doc<'t> {
    /// The document's top-level value.
    pub fn root(&self) -> NodeRef<'_> {
        NodeRef {
            doc: self,
            index: 0,
        }
    }

    /// The input the document was parsed from.
    pub fn bytes(self) -> &'t [u8] {
        self.bytes
    }

    /// The keys the parse refused as one key given twice: no object of the document has two
    /// such keys.
    pub fn repeats(self) -> Repeats {
        self.repeats
    }
}

/// A document holding only `null`: what an absent payload, agent or context reads as.
static NULL_DOC: Doc<'static> = Doc {
    bytes: b"null",
    text: "null",
    nodes: &[Node {
        start: 0,
        end: 4,
        next: 1,
        len: 0,
        depth: 0,
        kind: Kind::Null,
        flags: 0,
    }],
    // No object, so no keys that repeat in any sense.
    repeats: Repeats::CaseFolded,
};

/// JSON `null`, as a node of a document of its own.
pub fn null() -> NodeRef<'static> {
    NULL_DOC.root()
}

/// One value inside a [`Doc`]: a reference to the document and a node index (two words, so the
/// evaluator passes it around as cheaply as a `&Value`).
#[derive(Clone, Copy, Debug)]
pub struct NodeRef<'t> {
    doc: &'t Doc<'t>,
    index: u32,
}

/// A node placeholder for out-of-range indices (unreachable: indices come from the parser).
const NULL_NODE: Node = Node {
    start: 0,
    end: 0,
    next: u32::MAX,
    len: 0,
    depth: 0,
    kind: Kind::Null,
    flags: 0,
};

/// What [`NodeRef::find_member`] found.
enum Lookup<'t> {
    /// The member's value.
    Found(NodeRef<'t>),
    /// No member has the key (or the value is not an object).
    Absent,
    /// A key with escapes was reached before the key was found: the walk must decode.
    Escaped,
}

impl<'t> NodeRef<'t> {
    #[inline]
    fn node(self) -> &'t Node {
        self.doc
            .nodes
            .get(usize_from(self.index))
            .unwrap_or(&NULL_NODE)
    }

    /// The node at `index` of the same document. Indices come from the parser's `next` links
    /// (`u32`); one past the end reads as the placeholder node.
    #[inline]
    fn at(self, index: u32) -> NodeRef<'t> {
        NodeRef {
            doc: self.doc,
            index,
        }
    }

    /// What the value is.
    #[inline]
    pub fn kind(self) -> Kind {
        self.node().kind
    }

    /// The boolean, for `true`/`false`.
    pub fn as_bool(self) -> Option<bool> {
        match (self.kind(), self.raw()) {
            (Kind::Bool, b"true") => Some(true),
            (Kind::Bool, b"false") => Some(false),
            // A boolean node always holds one of the two; anything else reads as no boolean.
            _ => None,
        }
    }

    /// The decoded string, for a string: borrowed from the input when it holds no escapes.
    #[inline]
    pub fn as_str(self) -> Option<Cow<'t, str>> {
        let node = self.node();
        if node.kind != Kind::String {
            return None;
        }
        if let Some(text) = self.plain_str() {
            return Some(Cow::Borrowed(text));
        }
        Some(self.decoded(node))
    }

    /// The text of string node `node` when it has escapes (decoded), or, unreachably, when its
    /// body is not a slice of the text (then read lossily, only to stay total).
    #[cold]
    #[inline(never)]
    fn decoded(self, node: &Node) -> Cow<'t, str> {
        let body = node.body(self.doc.bytes);
        if node.escaped() {
            Cow::Owned(string::decode(body))
        } else {
            String::from_utf8_lossy(body)
        }
    }

    /// True for a string equal to `other` after decoding; allocates nothing.
    #[inline]
    pub fn str_eq(self, other: &str) -> bool {
        let node = self.node();
        if node.kind != Kind::String {
            return false;
        }
        let body = node.body(self.doc.bytes);
        if node.escaped() {
            DecodedBytes::new(body).eq(other.bytes())
        } else {
            bytes_eq(body, other.as_bytes())
        }
    }

    /// The bytes between the quotes, for a string without escapes (they are then its text);
    /// `None` for an escaped string or any other value. Lets a caller compare a key without
    /// making a `&str` of it.
    #[inline]
    pub(crate) fn plain_bytes(self) -> Option<&'t [u8]> {
        let node = self.node();
        (node.kind == Kind::String && !node.escaped()).then(|| node.body(self.doc.bytes))
    }

    /// The text between the quotes, for a string without escapes (a slice of the document,
    /// owning nothing); `None` for an escaped string or any other value.
    #[inline]
    pub(crate) fn plain_str(self) -> Option<&'t str> {
        let node = self.node();
        if node.kind != Kind::String || node.escaped() {
            return None;
        }
        // The quotes around the body are ASCII, so both ends are character boundaries.
        self.doc
            .text
            .get(usize_from(node.start)..usize_from(node.end))
    }

    /// The number, for a number: exactly what serde_json reads from its text.
    pub fn as_number(self) -> Option<Number> {
        let node = self.node();
        if node.kind != Kind::Number {
            return None;
        }
        let bits = u64::from(node.len) | (u64::from(node.depth) << 32);
        match node.flags {
            NUMBER_POSITIVE => Some(Number::from(bits)),
            NUMBER_NEGATIVE => Some(Number::from(i64::from_ne_bytes(bits.to_ne_bytes()))),
            NUMBER_FLOAT => Number::from_f64(f64::from_bits(bits)),
            // Every number the parser pushes carries its value; read the text otherwise.
            _ => {
                let text = self
                    .doc
                    .text
                    .get(usize_from(node.start)..usize_from(node.end))?;
                Number::from_str(text).ok()
            }
        }
    }

    /// The value's JSON text as it appears in the input (strings with their quotes).
    pub fn raw(self) -> &'t [u8] {
        let node = self.node();
        let (start, end) = match node.kind {
            Kind::String => (
                usize_from(node.start).saturating_sub(1),
                usize_from(node.end).saturating_add(1),
            ),
            _ => (usize_from(node.start), usize_from(node.end)),
        };
        self.doc.bytes.get(start..end).unwrap_or_default()
    }

    /// What reading the value whole costs, in units of work: one per node of its subtree (keys
    /// included), plus one per `bytes_per_step` bytes of each string and key, decoded. The same
    /// as a `serde_json::Value` of it weighs (`vm::Json::weight`): a number is one node, read
    /// once by the parser, however long its text.
    pub fn weight(self, bytes_per_step: u64) -> u64 {
        let (start, end) = (usize_from(self.index), usize_from(self.node().next));
        let nodes = self.doc.nodes.get(start..end).unwrap_or_default();
        let per_step = bytes_per_step.max(1);
        nodes.iter().fold(0, |sum: u64, node| {
            let bytes = match node.kind {
                Kind::String if node.escaped() => {
                    DecodedBytes::new(node.body(self.doc.bytes)).count()
                }
                Kind::String => usize_from(node.end.saturating_sub(node.start)),
                _ => 0,
            };
            let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
            sum.saturating_add(1).saturating_add(bytes / per_step)
        })
    }

    /// The number of elements (array) or members (object); 0 for scalars.
    pub fn len(self) -> usize {
        let node = self.node();
        match node.kind {
            Kind::Array | Kind::Object => usize_from(node.len),
            _ => 0,
        }
    }

    /// True for a scalar or an empty array/object.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// The value of the member whose decoded key is `key`, for an object: a walk over the
    /// members, so a caller looking up many names in a large object sorts them instead.
    pub fn get(self, key: &str) -> Option<NodeRef<'t>> {
        match self.find_member(key, false) {
            Lookup::Found(value) => Some(value),
            Lookup::Absent => None,
            Lookup::Escaped => self.get_past_escapes(key),
        }
    }

    /// [`NodeRef::get`] in an object with a key that has escapes: the same walk, decoding those
    /// keys. Out of line, so that the usual walk calls nothing and keeps its state in
    /// registers a call would clobber (a call in its loop cost every lookup six register saves
    /// and restores: ~190 instructions of the scenario request's twelve lookups).
    #[cold]
    #[inline(never)]
    fn get_past_escapes(self, key: &str) -> Option<NodeRef<'t>> {
        match self.find_member(key, true) {
            Lookup::Found(value) => Some(value),
            Lookup::Absent | Lookup::Escaped => None,
        }
    }

    /// The walk of [`NodeRef::get`]: with `decode`, keys with escapes are decoded and compared;
    /// without, the first such key ends the walk with [`Lookup::Escaped`] (unless the key was
    /// found before it).
    #[inline(always)]
    fn find_member(self, key: &str, decode: bool) -> Lookup<'t> {
        let object = self.node();
        if object.kind != Kind::Object {
            return Lookup::Absent;
        }
        let bytes = self.doc.bytes;
        // INVARIANT (next): the object's members are the nodes up to its `next`, each a key node
        // followed by its value's subtree, so the walk ends there.
        let Some(members) = self.doc.nodes.get(..usize_from(object.next)) else {
            return Lookup::Absent;
        };
        let want = key.as_bytes();
        let mut cursor = usize_from(self.index).saturating_add(1);
        while let (Some(name), Some(value)) = (members.get(cursor), members.get(cursor + 1)) {
            #[cfg(test)]
            MEMBERS_PASSED.with(|passed| passed.set(passed.get() + 1));
            // Lengths first: most members differ in length from the key looked up.
            let found = if name.escaped() {
                if !decode {
                    return Lookup::Escaped;
                }
                escaped_key_is(name.body(bytes), key)
            } else {
                usize_from(name.end.wrapping_sub(name.start)) == want.len()
                    && bytes_eq(name.body(bytes), want)
            };
            if found {
                return Lookup::Found(self.at(scan::offset(cursor + 1)));
            }
            cursor = usize_from(value.next);
        }
        Lookup::Absent
    }

    /// [`NodeRef::get`] for a caller that refuses case variants: `Ok(Some(value))` for the
    /// member `key`, and on a miss `Err(())` when a member's name is a case variant of `key`
    /// ([`NodeRef::has_case_variant`]), else `Ok(None)`. The lookup's walk notes the names that
    /// could be one (a plain ASCII name of the key's length, or a name with bytes outside
    /// ASCII), so a miss in an object without such a name (or a key outside ASCII) ends
    /// without the second walk over the members.
    #[inline]
    pub(crate) fn get_refusing_case_variants(self, key: &str) -> Result<Option<NodeRef<'t>>, ()> {
        let object = self.node();
        if object.kind != Kind::Object {
            return Ok(None);
        }
        let bytes = self.doc.bytes;
        // INVARIANT (next): as in `find_member`.
        let Some(members) = self.doc.nodes.get(..usize_from(object.next)) else {
            return Ok(None);
        };
        let want = key.as_bytes();
        let mut suspect = false;
        let mut cursor = usize_from(self.index).saturating_add(1);
        while let (Some(name), Some(value)) = (members.get(cursor), members.get(cursor + 1)) {
            #[cfg(test)]
            MEMBERS_PASSED.with(|passed| passed.set(passed.get() + 1));
            if !name.plain_ascii() {
                if name.escaped() {
                    // Keys with escapes decode: the two walks of old.
                    return self.get_then_case_variants(key);
                }
                // A name outside ASCII may fold to a key of another length (`K`).
                suspect = true;
            }
            if usize_from(name.end.wrapping_sub(name.start)) == want.len() {
                if bytes_eq(name.body(bytes), want) {
                    return Ok(Some(self.at(scan::offset(cursor + 1))));
                }
                suspect = true;
            }
            cursor = usize_from(value.next);
        }
        // A plain ASCII name of another length than an ASCII key is never its case variant.
        if (suspect || !want.is_ascii()) && self.has_case_variant(key) {
            return Err(());
        }
        Ok(None)
    }

    /// [`NodeRef::get_refusing_case_variants`] as two walks: the lookup, then on a miss the
    /// walk for a case variant.
    #[cold]
    #[inline(never)]
    fn get_then_case_variants(self, key: &str) -> Result<Option<NodeRef<'t>>, ()> {
        match self.get(key) {
            Some(value) => Ok(Some(value)),
            None if self.has_case_variant(key) => Err(()),
            None => Ok(None),
        }
    }

    /// True for an object with a member whose name is a case variant of `key` (equal to it
    /// under Unicode simple case folding) but not `key` itself: for a lookup of `key` that found
    /// nothing, whose upstream may read that member as `key`. A walk over the members that
    /// compares a plain ASCII name with an ASCII key by its length first, and decodes only
    /// names with escapes or bytes outside ASCII.
    #[cold]
    #[inline(never)]
    pub(crate) fn has_case_variant(self, key: &str) -> bool {
        let object = self.node();
        if object.kind != Kind::Object {
            return false;
        }
        let bytes = self.doc.bytes;
        let want = key.as_bytes();
        let ascii_key = want.is_ascii();
        // INVARIANT (next): as in `find_member`.
        let Some(members) = self.doc.nodes.get(..usize_from(object.next)) else {
            return false;
        };
        let mut cursor = usize_from(self.index).saturating_add(1);
        while let (Some(name), Some(value)) = (members.get(cursor), members.get(cursor + 1)) {
            let body = name.body(bytes);
            let variant = if ascii_key && name.plain_ascii() {
                // A plain ASCII name folds to the key's length only if it has it.
                body.len() == want.len() && body.eq_ignore_ascii_case(want) && body != want
            } else {
                name_is_case_variant(body, key)
            };
            if variant {
                return true;
            }
            cursor = usize_from(value.next);
        }
        false
    }

    /// The `i`-th element, for an array.
    pub fn index(self, i: usize) -> Option<NodeRef<'t>> {
        self.elements().nth(i)
    }

    /// The elements, for an array; empty otherwise.
    #[inline]
    pub fn elements(self) -> Elements<'t> {
        let left = if self.kind() == Kind::Array {
            self.node().len
        } else {
            0
        };
        Elements {
            at: self.at(self.index.saturating_add(1)),
            left,
        }
    }

    /// The members as (key node, value), for an object; empty otherwise.
    #[inline]
    pub fn members(self) -> Members<'t> {
        let left = if self.kind() == Kind::Object {
            self.node().len
        } else {
            0
        };
        Members {
            at: self.at(self.index.saturating_add(1)),
            left,
        }
    }

    /// The nested arrays/objects inside and including this value: 0 for a scalar, 1 for `[]`,
    /// 2 for `[[1]]`.
    pub fn depth(self) -> usize {
        let node = self.node();
        match node.kind {
            Kind::Array | Kind::Object => usize_from(node.depth),
            _ => 0,
        }
    }

    /// The value as a `serde_json::Value` (built without recursion, so any depth is fine).
    pub fn to_value(self) -> Value {
        /// A container being built: its members/elements so far and how many are left.
        enum Open {
            Array(Vec<Value>, usize),
            Object(Map<String, Value>, Option<String>, usize),
        }
        let mut open: Vec<Open> = Vec::new();
        let mut index = self.index;
        loop {
            let node = self.at(index);
            index = index.saturating_add(1);
            let mut done = match node.kind() {
                Kind::Array if !node.is_empty() => {
                    open.push(Open::Array(Vec::with_capacity(node.len()), node.len()));
                    continue;
                }
                Kind::Object if !node.is_empty() => {
                    open.push(Open::Object(Map::new(), None, node.len()));
                    continue;
                }
                Kind::Array => Value::Array(Vec::new()),
                Kind::Object => Value::Object(Map::new()),
                Kind::Null => Value::Null,
                Kind::Bool => Value::Bool(node.as_bool().unwrap_or(false)),
                Kind::Number => node.as_number().map_or(Value::Null, Value::Number),
                Kind::String => {
                    let text = node.as_str().map(Cow::into_owned).unwrap_or_default();
                    if let Some(Open::Object(_, key @ None, _)) = open.last_mut() {
                        *key = Some(text);
                        continue;
                    }
                    Value::String(text)
                }
            };
            // Attach the finished value to its parent, closing every parent it completes.
            loop {
                let parent_done = match open.last_mut() {
                    None => return done,
                    Some(Open::Array(items, left)) => {
                        items.push(done);
                        *left -= 1;
                        *left == 0
                    }
                    Some(Open::Object(map, key, left)) => {
                        map.insert(key.take().unwrap_or_default(), done);
                        *left -= 1;
                        *left == 0
                    }
                };
                if !parent_done {
                    break;
                }
                done = match open.pop() {
                    Some(Open::Array(items, _)) => Value::Array(items),
                    Some(Open::Object(map, _, _)) => Value::Object(map),
                    None => return Value::Null,
                };
            }
        }
    }
}

/// The elements of an array node ([`NodeRef::elements`]).
#[derive(Clone, Copy, Debug)]
pub struct Elements<'t> {
    /// The next element.
    at: NodeRef<'t>,
    /// How many elements are left.
    left: u32,
}

impl<'t> Iterator for Elements<'t> {
    type Item = NodeRef<'t>;

    #[inline]
    fn next(&mut self) -> Option<NodeRef<'t>> {
        self.left = self.left.checked_sub(1)?;
        let element = self.at;
        self.at = element.at(element.node().next);
        Some(element)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize_from(self.left);
        (left, Some(left))
    }
}

/// The members of an object node as (key node, value) ([`NodeRef::members`]).
#[derive(Clone, Copy, Debug)]
pub struct Members<'t> {
    /// The next member's key.
    at: NodeRef<'t>,
    /// How many members are left.
    left: u32,
}

impl<'t> Iterator for Members<'t> {
    type Item = (NodeRef<'t>, NodeRef<'t>);

    #[inline]
    fn next(&mut self) -> Option<(NodeRef<'t>, NodeRef<'t>)> {
        self.left = self.left.checked_sub(1)?;
        let key = self.at;
        let value = key.at(key.index.saturating_add(1));
        self.at = value.at(value.node().next);
        Some((key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize_from(self.left);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests;
