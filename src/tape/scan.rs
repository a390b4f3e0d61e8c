//! The tape parser: one pass over the bytes that validates the whole input and appends a
//! [`Node`] per value, with an explicit stack of open containers ([`Frame`]) instead of
//! recursion, so no input can overflow the call stack.

use std::str::FromStr;

use super::keys::{Insert, KeySet, LINEAR_MEMBERS};
use super::string::scan_string;
use super::{
    ESCAPED, ErrorKind, Kind, NON_ASCII, NUMBER_FLOAT, NUMBER_NEGATIVE, NUMBER_POSITIVE, Node,
    Tape, TapeError, keys_equal, keys_fold_equal,
};
use crate::convert::usize_from;

/// An array or object still open while parsing.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    /// Its node's index.
    node: u32,
    /// Elements or members seen so far (including the one being read).
    len: u32,
    /// The deepest nesting among its finished children (0 when none is a container).
    depth: u32,
    /// An object (`}` closes it, members have keys) rather than an array.
    object: bool,
    /// Objects: a one-word Bloom filter of the plain ASCII keys so far, blind to ASCII case (all
    /// ones once a key had an escape or a byte outside ASCII), so most keys of a small object
    /// skip the scan of the earlier ones.
    key_filter: u64,
}

/// The [`Frame::key_filter`] bit of a plain ASCII key with body `body`: from its length and its
/// first two bytes, which tell apart most keys of real objects. Not the last byte: its address
/// waits for the string scan that found the key's end, and the parse would wait on that load;
/// the first two bytes' addresses are known before the scan starts. The bytes
/// with their `0x20` bit set, so keys that differ only in the case of ASCII letters share a bit
/// (and are compared when case variants are refused).
#[inline(always)]
pub(super) fn key_filter_bit(body: &[u8]) -> u64 {
    let first = body.first().copied().unwrap_or(0) | 0x20;
    let second = body.get(1).copied().unwrap_or(0) | 0x20;
    let mix = body.len() ^ usize::from(first) ^ usize::from(second) << 2;
    1 << (mix & 63)
}

/// A parse error before it becomes a [`TapeError`]: the byte offset and what is wrong.
type Fault = (usize, ErrorKind);

/// An offset or index as `u32`. INVARIANT (u32-input): the parser refuses inputs longer than
/// `u32::MAX` up front ([`check_length`]), and every offset is at most the input's length and
/// every node index below it, so the conversion is lossless. A plain `as`: the checked
/// conversion cost ~550 instructions per scenario request (three per node).
#[inline(always)]
pub(super) fn offset(pos: usize) -> u32 {
    debug_assert!(
        u32::try_from(pos).is_ok(),
        "offset {pos} beyond the u32 input limit"
    );
    pos as u32
}

/// Parses `bytes` into `tape` (see [`Tape::parse_with`]); on error the tape holds no document.
/// With `fold`, keys equal under simple case folding are refused as well as equal ones.
pub(super) fn parse(
    tape: &mut Tape,
    bytes: &[u8],
    max_depth: usize,
    fold: bool,
) -> Result<(), TapeError> {
    tape.nodes.clear();
    tape.stack.clear();
    check_length(bytes.len())?;
    tape.keys.reset(fold);
    // The buffers move into the parser (no allocation) so the hot loop owns them directly.
    let mut parser = Parser {
        bytes,
        pos: 0,
        nodes: std::mem::take(&mut tape.nodes),
        stack: std::mem::take(&mut tape.stack),
        keys: &mut tape.keys,
        max_depth,
        fold,
    };
    let result = parser.run();
    tape.nodes = parser.nodes;
    tape.stack = parser.stack;
    result.map_err(|(pos, kind)| {
        tape.nodes.clear();
        TapeError {
            offset: offset(pos),
            kind,
        }
    })
}

/// Refuses inputs whose offsets do not fit the nodes' `u32`s.
pub(super) fn check_length(len: usize) -> Result<(), TapeError> {
    match u32::try_from(len) {
        Ok(_) => Ok(()),
        Err(_) => Err(TapeError {
            offset: u32::MAX,
            kind: ErrorKind::TooLong(len),
        }),
    }
}

/// The state of one parse.
struct Parser<'a> {
    bytes: &'a [u8],
    /// The next byte to read.
    pos: usize,
    nodes: Vec<Node>,
    stack: Vec<Frame>,
    keys: &'a mut KeySet,
    max_depth: usize,
    /// Keys equal under simple case folding are refused too ([`super::Repeats::CaseFolded`]).
    fold: bool,
}

impl Parser<'_> {
    /// Reads one value (the whole input but whitespace), leaving its nodes on the tape.
    ///
    /// Whitespace is skipped where a dispatch on the next byte finds it, not tested for before
    /// every dispatch: in compact JSON (the usual request) no byte is whitespace, and a test
    /// before each dispatch would be ~380 instructions of the scenario request's parse.
    fn run(&mut self) -> Result<(), Fault> {
        'value: loop {
            // A value (or whitespace before it) starts at `pos`.
            match self.bytes.get(self.pos) {
                Some(b'"') => {
                    self.string()?;
                }
                Some(&open @ (b'{' | b'[')) => {
                    if self.open(open == b'{')? {
                        continue 'value;
                    }
                }
                Some(b'-' | b'0'..=b'9') => self.number()?,
                Some(b't') => self.literal(b"true", Kind::Bool)?,
                Some(b'f') => self.literal(b"false", Kind::Bool)?,
                Some(b'n') => self.literal(b"null", Kind::Null)?,
                Some(b' ' | b'\n' | b'\t' | b'\r') => {
                    self.pos = whitespace_end(self.bytes, self.pos);
                    continue 'value;
                }
                Some(_) => return Err((self.pos, ErrorKind::ExpectedValue)),
                None => return Err((self.pos, ErrorKind::UnexpectedEnd)),
            }
            // A value ended: continue or close the containers around it.
            loop {
                let Some(top) = self.stack.last_mut() else {
                    break 'value;
                };
                match self.bytes.get(self.pos) {
                    Some(b',') => {
                        self.pos += 1;
                        top.len += 1;
                        if top.object {
                            self.key()?;
                        }
                        continue 'value;
                    }
                    Some(b']') if !top.object => self.close(),
                    Some(b'}') if top.object => self.close(),
                    Some(b' ' | b'\n' | b'\t' | b'\r') => {
                        self.pos = whitespace_end(self.bytes, self.pos);
                    }
                    Some(_) if top.object => {
                        return Err((self.pos, ErrorKind::ExpectedCommaOrBrace));
                    }
                    Some(_) => return Err((self.pos, ErrorKind::ExpectedCommaOrBracket)),
                    None => return Err((self.pos, ErrorKind::UnexpectedEnd)),
                }
            }
        }
        self.skip_whitespace();
        if self.pos != self.bytes.len() {
            return Err((self.pos, ErrorKind::TrailingCharacters));
        }
        Ok(())
    }

    /// Skips JSON whitespace (space, tab, LF, CR). Every byte that can follow whitespace in
    /// JSON is above `' '`, so one comparison answers the usual case (compact JSON) and the
    /// loop runs only on a byte that may be whitespace.
    #[inline(always)]
    fn skip_whitespace(&mut self) {
        if self.bytes.get(self.pos).is_some_and(|&b| b <= b' ') {
            self.pos = whitespace_end(self.bytes, self.pos);
        }
    }

    /// Opens the array or object at `pos`. Returns true when a first element (or member value)
    /// follows, false when the container was empty and is already closed.
    #[inline(always)]
    fn open(&mut self, object: bool) -> Result<bool, Fault> {
        // The reference refuses a container `max_depth` containers deep as it opens it.
        if self.stack.len() >= self.max_depth {
            return Err((self.pos, ErrorKind::TooDeep(self.max_depth)));
        }
        let node = offset(self.nodes.len());
        self.nodes.push(Node {
            start: offset(self.pos),
            end: 0,
            next: 0,
            len: 0,
            depth: 1,
            kind: if object { Kind::Object } else { Kind::Array },
            flags: 0,
        });
        self.pos += 1;
        self.skip_whitespace();
        let close = if object { b'}' } else { b']' };
        let empty = self.bytes.get(self.pos) == Some(&close);
        self.stack.push(Frame {
            node,
            len: u32::from(!empty),
            depth: 0,
            object,
            key_filter: 0,
        });
        if empty {
            self.close();
            return Ok(false);
        }
        if object {
            self.key()?;
        }
        Ok(true)
    }

    /// Closes the innermost container at its closing bracket (at `pos`).
    #[inline(always)]
    fn close(&mut self) {
        self.pos += 1;
        let Some(frame) = self.stack.pop() else {
            return;
        };
        let depth = frame.depth + 1;
        let next = offset(self.nodes.len());
        if let Some(node) = self.nodes.get_mut(usize_from(frame.node)) {
            node.end = offset(self.pos);
            // INVARIANT (next): every node of the subtree has been pushed.
            node.next = next;
            node.len = frame.len;
            node.depth = depth;
        }
        if let Some(parent) = self.stack.last_mut() {
            parent.depth = parent.depth.max(depth);
        }
    }

    /// Reads an object key at `pos` (or after whitespace there), checks it against the object's
    /// earlier keys, and the `:` after it, leaving `pos` just after the `:`.
    #[inline(always)]
    fn key(&mut self) -> Result<(), Fault> {
        self.expect(b'"', ErrorKind::ExpectedKey)?;
        let key = self.string()?;
        self.check_duplicate(key)?;
        self.expect(b':', ErrorKind::ExpectedColon)?;
        // Whitespace before the value is skipped by the value's dispatch.
        self.pos += 1;
        Ok(())
    }

    /// Leaves `pos` at `expected`, past any whitespace before it; `missing` where another byte
    /// stands. The expected byte is tested first: whitespace is looked for only when it is not
    /// there.
    #[inline(always)]
    fn expect(&mut self, expected: u8, missing: ErrorKind) -> Result<(), Fault> {
        if self.bytes.get(self.pos) != Some(&expected) {
            self.skip_whitespace();
            match self.bytes.get(self.pos) {
                Some(&byte) if byte == expected => {}
                Some(_) => return Err((self.pos, missing)),
                None => return Err((self.pos, ErrorKind::UnexpectedEnd)),
            }
        }
        Ok(())
    }

    /// Refuses key node `key` when the innermost object already has a key that decodes the same.
    #[inline(always)]
    fn check_duplicate(&mut self, key: usize) -> Result<(), Fault> {
        // A key is read inside an object, whose frame is on the stack and whose node exists; if
        // not, the input is refused (the strict parser then reads it), never let through.
        let Some(top) = self.stack.last_mut() else {
            return Err((self.pos, ErrorKind::Internal));
        };
        let (object, earlier) = (top.node, top.len.saturating_sub(1));
        let Some(new_key) = self.nodes.get(key) else {
            return Err((self.pos, ErrorKind::Internal));
        };
        if earlier < LINEAR_MEMBERS {
            let bit = if !new_key.plain_ascii() {
                u64::MAX
            } else {
                key_filter_bit(new_key.body(self.bytes))
            };
            let seen = top.key_filter;
            top.key_filter |= bit;
            if seen & bit == 0 {
                // No earlier key has this key's filter bit: none can equal it, even up to case.
                return Ok(());
            }
            return self.compare_earlier(key, object, earlier);
        }
        self.check_in_set(key, object, earlier)
    }

    /// Compares key node `key` with the `earlier` keys of object node `object`, one of which
    /// shares its filter bit. Out of line, as is [`Parser::check_in_set`]: most keys are told apart by
    /// the filter alone, and in line these loops cost the parse's hot loop registers (~100
    /// instructions per scenario request).
    #[inline(never)]
    fn compare_earlier(&self, key: usize, object: u32, earlier: u32) -> Result<(), Fault> {
        let Some(new_key) = self.nodes.get(key) else {
            return Err((self.pos, ErrorKind::Internal));
        };
        let plain_len = (!new_key.escaped()).then(|| new_key.end.wrapping_sub(new_key.start));
        for old_key in earlier_keys(&self.nodes, object, earlier) {
            let Some(old) = self.nodes.get(old_key) else {
                return Err((self.pos, ErrorKind::Internal));
            };
            // Two unescaped keys of different lengths differ, and (both ASCII) are not case
            // variants either: only the earlier keys of the new key's length (or with escapes,
            // or bytes outside ASCII when folding) are compared. (The length is cheaper to
            // compare than the filter bit is to compute again.)
            let lengths_differ = !old.escaped()
                && plain_len.is_some_and(|len| old.end.wrapping_sub(old.start) != len);
            if lengths_differ && (!self.fold || (old.plain_ascii() && new_key.plain_ascii())) {
                continue;
            }
            if keys_equal(self.bytes, old, new_key) {
                return Err(duplicate(self.bytes, &self.nodes, key));
            }
            if self.fold && keys_fold_equal(self.bytes, old, new_key) {
                return Err(case_variant(self.bytes, &self.nodes, key));
            }
        }
        Ok(())
    }

    /// Checks key node `key` of an object past [`LINEAR_MEMBERS`] members against the key set.
    #[inline(never)]
    fn check_in_set(&mut self, key: usize, object: u32, earlier: u32) -> Result<(), Fault> {
        if earlier == LINEAR_MEMBERS {
            // The object just outgrew the linear scan: its (distinct) keys so far go in the set.
            for old_key in earlier_keys(&self.nodes, object, earlier) {
                let inserted = self
                    .keys
                    .insert(object, offset(old_key), self.bytes, &self.nodes);
                if inserted != Insert::New {
                    // The earlier keys are distinct (checked one by one as they came).
                    return Err((self.pos, ErrorKind::Internal));
                }
            }
        }
        match self
            .keys
            .insert(object, offset(key), self.bytes, &self.nodes)
        {
            Insert::New => Ok(()),
            Insert::Duplicate => Err(duplicate(self.bytes, &self.nodes, key)),
            Insert::CaseVariant => Err(case_variant(self.bytes, &self.nodes, key)),
            Insert::Broken => Err((self.pos, ErrorKind::Internal)),
        }
    }

    /// Reads the string at `pos` (its opening quote); returns its node's index.
    #[inline(always)]
    fn string(&mut self) -> Result<usize, Fault> {
        let start = self.pos + 1;
        let scanned = scan_string(self.bytes, start)?;
        let index = self.nodes.len();
        self.nodes.push(Node {
            start: offset(start),
            end: offset(scanned.end),
            next: offset(index + 1),
            len: 0,
            depth: 0,
            kind: Kind::String,
            flags: if scanned.escaped { ESCAPED } else { 0 }
                | if scanned.non_ascii { NON_ASCII } else { 0 },
        });
        self.pos = scanned.end + 1;
        Ok(index)
    }

    /// Reads `word` (`true`, `false` or `null`) at `pos`.
    #[inline(always)]
    fn literal(&mut self, word: &'static [u8], kind: Kind) -> Result<(), Fault> {
        let end = self.pos + word.len();
        if self.bytes.get(self.pos..end) != Some(word) {
            let rest = self.bytes.get(self.pos..).unwrap_or_default();
            let kind = if word.starts_with(rest) {
                ErrorKind::UnexpectedEnd
            } else {
                ErrorKind::InvalidLiteral
            };
            return Err((self.pos, kind));
        }
        self.push_scalar(kind, self.pos, end);
        self.pos = end;
        Ok(())
    }

    /// Reads the number at `pos`: grammar `-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?`, and refused
    /// when serde_json finds it out of `f64` range.
    #[inline(always)]
    fn number(&mut self) -> Result<(), Fault> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut pos = start;
        if bytes.get(pos) == Some(&b'-') {
            pos += 1;
        }
        let integer_start = pos;
        match bytes.get(pos) {
            Some(b'0') => {
                pos += 1;
                if let Some(b'0'..=b'9') = bytes.get(pos) {
                    return Err((pos, ErrorKind::InvalidNumber));
                }
            }
            Some(b'1'..=b'9') => {
                pos += 1;
                pos = skip_digits(bytes, pos);
            }
            Some(_) => return Err((pos, ErrorKind::InvalidNumber)),
            None => return Err((pos, ErrorKind::UnexpectedEnd)),
        }
        let integer_digits = pos - integer_start;
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            let fraction_start = pos;
            pos = skip_digits(bytes, pos);
            if pos == fraction_start {
                return Err(digit_expected(bytes, pos));
            }
        }
        let mut exponent: i64 = 0;
        if let Some(b'e' | b'E') = bytes.get(pos) {
            pos += 1;
            let negative = match bytes.get(pos) {
                Some(b'-') => {
                    pos += 1;
                    true
                }
                Some(b'+') => {
                    pos += 1;
                    false
                }
                _ => false,
            };
            let exponent_start = pos;
            while let Some(&digit @ b'0'..=b'9') = bytes.get(pos) {
                // Capped: anything past ±1,000,000 decides the same way.
                exponent = (exponent * 10 + i64::from(digit - b'0')).min(1_000_000);
                pos += 1;
            }
            if pos == exponent_start {
                return Err(digit_expected(bytes, pos));
            }
            if negative {
                exponent = -exponent;
            }
        }
        let integer = pos == integer_start + integer_digits;
        let (flags, bits) = if integer && integer_digits <= 18 {
            small_integer(bytes, start, pos)
        } else {
            // |value| < 10^(integer digits + exponent): up to 10^308 it is surely a finite
            // `f64` (underflow to 0 is accepted); above, ask serde_json itself.
            let magnitude = i64::try_from(integer_digits)
                .unwrap_or(i64::MAX)
                .saturating_add(exponent);
            if magnitude > 308 {
                check_range(bytes, start, pos)?;
            }
            number_value(bytes, start, pos, integer)?
        };
        let index = self.nodes.len();
        self.nodes.push(Node {
            start: offset(start),
            end: offset(pos),
            next: offset(index + 1),
            // The value, read once here (`NUMBER_POSITIVE`).
            len: bits as u32,
            depth: (bits >> 32) as u32,
            kind: Kind::Number,
            flags,
        });
        self.pos = pos;
        Ok(())
    }

    /// Appends a number or literal node spanning `start..end`.
    #[inline(always)]
    fn push_scalar(&mut self, kind: Kind, start: usize, end: usize) {
        let index = self.nodes.len();
        self.nodes.push(Node {
            start: offset(start),
            end: offset(end),
            next: offset(index + 1),
            len: 0,
            depth: 0,
            kind,
            flags: 0,
        });
    }
}

/// The first byte at or after `pos` that is not JSON whitespace ([`Parser::skip_whitespace`]
/// from a byte at or below `' '`). A function of the bytes, not a method: a call that took the
/// parser by reference would keep its position in memory instead of a register.
#[inline(never)]
fn whitespace_end(bytes: &[u8], mut pos: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\t' | b'\r') = bytes.get(pos) {
        pos += 1;
    }
    pos
}

/// The duplicate-key error for key node `key`.
#[cold]
#[inline(never)]
fn duplicate(bytes: &[u8], nodes: &[Node], key: usize) -> Fault {
    let node = nodes.get(key).copied().unwrap_or(super::NULL_NODE);
    let name = super::string::decode(node.body(bytes));
    (
        usize_from(node.start).saturating_sub(1),
        ErrorKind::DuplicateKey(crate::value::truncate_str(&name, 64)),
    )
}

/// The case-variant-key error for key node `key`.
#[cold]
#[inline(never)]
fn case_variant(bytes: &[u8], nodes: &[Node], key: usize) -> Fault {
    let node = nodes.get(key).copied().unwrap_or(super::NULL_NODE);
    let name = super::string::decode(node.body(bytes));
    (
        usize_from(node.start).saturating_sub(1),
        ErrorKind::CaseVariantKey(crate::value::truncate_str(&name, 64)),
    )
}

/// The index of the first non-digit at or after `pos`.
#[inline(always)]
fn skip_digits(bytes: &[u8], mut pos: usize) -> usize {
    while let Some(b'0'..=b'9') = bytes.get(pos) {
        pos += 1;
    }
    pos
}

/// The value of the integer of at most 18 digits at `start..end` (so below 2^63), as serde_json
/// reads it: a `u64`, an `i64` below zero, and `-0` as the float `-0.0`. Node flags and bits.
#[inline(always)]
fn small_integer(bytes: &[u8], start: usize, end: usize) -> (u8, u64) {
    let negative = bytes.get(start) == Some(&b'-');
    let digits = bytes
        .get(start + usize::from(negative)..end)
        .unwrap_or_default();
    let value = digits.iter().fold(0_u64, |value, &digit| {
        value * 10 + u64::from(digit.wrapping_sub(b'0'))
    });
    match (negative, i64::try_from(value)) {
        (false, _) => (NUMBER_POSITIVE, value),
        (true, Ok(0)) => (NUMBER_FLOAT, (-0.0_f64).to_bits()),
        (true, Ok(value)) => (NUMBER_NEGATIVE, u64::from_ne_bytes((-value).to_ne_bytes())),
        // Unreachable: 18 digits are below 2^63. Read as serde_json would.
        (true, Err(_)) => number_value(bytes, start, end, true).unwrap_or((0, 0)),
    }
}

/// The value of any other (grammatical, in-range) number at `start..end`, as serde_json reads
/// it: an integer that fits a `u64` or (below zero) an `i64` as such, anything else as the
/// nearest `f64` — `f64::from_str`, correctly rounded like serde_json's `float_roundtrip`
/// (checked against serde_json by `tape_equivalence`). Node flags and bits.
#[cold]
#[inline(never)]
fn number_value(bytes: &[u8], start: usize, end: usize, integer: bool) -> Result<(u8, u64), Fault> {
    let text = bytes
        .get(start..end)
        .and_then(|text| std::str::from_utf8(text).ok())
        .unwrap_or_default();
    let out_of_range = (start, ErrorKind::NumberOutOfRange);
    if integer {
        // serde_json's integers past 64 bits are floats; ask it for those exactly.
        let number = serde_json::Number::from_str(text).map_err(|_| out_of_range.clone())?;
        if let Some(value) = number.as_u64() {
            return Ok((NUMBER_POSITIVE, value));
        }
        if let Some(value) = number.as_i64() {
            return Ok((NUMBER_NEGATIVE, u64::from_ne_bytes(value.to_ne_bytes())));
        }
        return match number.as_f64() {
            Some(value) => Ok((NUMBER_FLOAT, value.to_bits())),
            None => Err(out_of_range),
        };
    }
    match f64::from_str(text) {
        Ok(value) if value.is_finite() => Ok((NUMBER_FLOAT, value.to_bits())),
        _ => Err(out_of_range),
    }
}

/// The error for a missing digit at `pos` (after `.`, `e` or the exponent's sign).
#[cold]
fn digit_expected(bytes: &[u8], pos: usize) -> Fault {
    if pos >= bytes.len() {
        (pos, ErrorKind::UnexpectedEnd)
    } else {
        (pos, ErrorKind::InvalidNumber)
    }
}

/// Refuses the (grammatical) number at `start..end` when serde_json reads it as out of range.
#[cold]
#[inline(never)]
fn check_range(bytes: &[u8], start: usize, end: usize) -> Result<(), Fault> {
    let text = bytes
        .get(start..end)
        .and_then(|text| std::str::from_utf8(text).ok())
        .unwrap_or_default();
    match serde_json::Number::from_str(text) {
        Ok(_) => Ok(()),
        Err(_) => Err((start, ErrorKind::NumberOutOfRange)),
    }
}

/// The node indices of the first `count` keys of object node `object` (all complete).
fn earlier_keys(nodes: &[Node], object: u32, count: u32) -> impl Iterator<Item = usize> + '_ {
    let mut cursor = usize_from(object) + 1;
    (0..count).map(move |_| {
        let key = cursor;
        cursor = nodes
            .get(key + 1)
            .map_or(usize::MAX, |value| usize_from(value.next));
        key
    })
}
