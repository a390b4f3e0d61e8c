//! JSON strings on the tape: the one-pass scan that validates a string where it lies, and the
//! lazy decoding of its escapes when a caller reads it.
//!
//! - [`scan_string`] finds a string's closing quote 16 bytes at a time (SSE2 compares and
//!   `pmovmskb`s through `safe_arch`, which also tell whether the byte they stop at is the
//!   quote; two SWAR words over `u64`s on other targets) and 64 at a
//!   time in long strings (byte compares the compiler vectorises), stopping only at `"`, `\`,
//!   control characters and (until the first one is seen) bytes ≥ 0x80; it checks every escape
//!   as serde_json does and validates UTF-8 only for strings that hold a non-ASCII byte.
//! - [`Pieces`] walks a validated string body as raw runs and decoded escapes; [`DecodedBytes`]
//!   flattens it to the decoded UTF-8 bytes, so keys compare and hash without allocating;
//!   [`decode`] builds the owned string.

mod block;

use super::ErrorKind;
use crate::bytes::is_special;
use block::{Stop, special_in_block, special_in_block_from};

/// What a string scan found about the body between the quotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ScannedString {
    /// The index of the closing quote.
    pub end: usize,
    /// The body holds at least one backslash escape.
    pub escaped: bool,
    /// The body holds a byte outside ASCII (escapes aside: `\u00e9` is ASCII text).
    pub non_ascii: bool,
}

/// Scans the body of a string that starts at `start` (just after the opening quote): returns
/// where it ends, or the offset and kind of the first error. The rules are serde_json's for
/// strings read as `str`: control characters (below 0x20) are refused, escapes are
/// `\" \\ \/ \b \f \n \r \t \uXXXX`, a `\u` surrogate must be a high surrogate directly followed
/// by a `\u` low surrogate, and the body must be UTF-8.
#[inline(always)]
pub(super) fn scan_string(bytes: &[u8], start: usize) -> Result<ScannedString, (usize, ErrorKind)> {
    // The common case: plain ASCII up to the closing quote, which the scan's compares name.
    let found = find_special::<true>(bytes, start);
    if found.quote {
        return Ok(ScannedString {
            end: found.at,
            escaped: false,
            non_ascii: false,
        });
    }
    scan_string_rest(bytes, start, found.at)
}

/// [`scan_string`] from `pos`, the first escape, control or non-ASCII byte of the body (or the
/// end of the input).
#[inline(never)]
fn scan_string_rest(
    bytes: &[u8],
    start: usize,
    mut pos: usize,
) -> Result<ScannedString, (usize, ErrorKind)> {
    let mut escaped = false;
    let mut non_ascii = false;
    loop {
        match bytes.get(pos) {
            Some(b'"') => break,
            Some(b'\\') => {
                pos = scan_escape(bytes, pos)?;
                escaped = true;
            }
            Some(0..0x20) => return Err((pos, ErrorKind::ControlCharacter)),
            Some(_) => {
                // A byte ≥ 0x80: from now on only `"`, `\` and control bytes stop the scan;
                // the whole body is validated as UTF-8 at the end.
                non_ascii = true;
                pos += 1;
            }
            None => return Err((pos, ErrorKind::UnexpectedEnd)),
        }
        pos = if non_ascii {
            find_special::<false>(bytes, pos).at
        } else {
            find_special::<true>(bytes, pos).at
        };
    }
    if non_ascii {
        // Escapes are ASCII and every escape decodes to whole characters, so the body is valid
        // UTF-8 exactly when the decoded string would be.
        let body = bytes.get(start..pos).unwrap_or_default();
        if let Err(error) = simdutf8::compat::from_utf8(body) {
            return Err((start + error.valid_up_to(), ErrorKind::InvalidUtf8));
        }
    }
    Ok(ScannedString {
        end: pos,
        escaped,
        non_ascii,
    })
}

/// Where [`find_special`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Found {
    /// The index of the special byte; the input's length when there is none.
    at: usize,
    /// The byte at `at` is `"` (false at the end of the input).
    quote: bool,
}

impl Found {
    /// The special byte `stop` of the block that starts at index `block`.
    #[inline(always)]
    fn in_block(block: usize, stop: Stop) -> Self {
        Found {
            at: block + stop.offset,
            quote: stop.quote,
        }
    }
}

/// The first byte at or after `pos` that is `"`, `\`, below 0x20 or (when `STOP_ON_HIGH`) at
/// least 0x80, and whether it is `"`; `bytes.len()` when there is none. The first 32 bytes are two
/// 16-byte blocks of one branch each ([`special_in_block`]: keys, addresses and timestamps end
/// there); after that, 64 bytes per step with vector compares ([`any_special`]), and the
/// 16-byte blocks again for the block that holds the byte and for the rest. Under 16 bytes
/// from the end of the input, the input's last 16 bytes ([`find_special_in_tail`]).
#[inline(always)]
fn find_special<const STOP_ON_HIGH: bool>(bytes: &[u8], pos: usize) -> Found {
    let mut after = bytes.get(pos..).unwrap_or_default();
    let mut at = pos;
    for _ in 0..2 {
        let Some((block, rest)) = after.split_first_chunk::<16>() else {
            return find_special_in_tail::<STOP_ON_HIGH>(bytes, at);
        };
        if let Some(stop) = special_in_block::<STOP_ON_HIGH>(block) {
            return Found::in_block(at, stop);
        }
        at += 16;
        after = rest;
    }
    // Longer strings: 64 bytes per step, each step a yes/no that compiles to vector compares;
    // the 16-byte loop below then finds the exact byte in the block that says yes.
    while let Some((block, rest)) = after.split_first_chunk::<64>() {
        if any_special::<STOP_ON_HIGH>(block) {
            break;
        }
        at += 64;
        after = rest;
    }
    while let Some((block, rest)) = after.split_first_chunk::<16>() {
        if let Some(stop) = special_in_block::<STOP_ON_HIGH>(block) {
            return Found::in_block(at, stop);
        }
        at += 16;
        after = rest;
    }
    find_special_in_tail::<STOP_ON_HIGH>(bytes, at)
}

/// [`find_special`] from `at`, fewer than 16 bytes from the end of `bytes`: the input's last 16
/// bytes as one block, the bytes before `at` masked off (a string that ends the input, as a
/// request's last member often does, ends in this block); byte by byte in an input shorter
/// than 16 bytes.
#[inline(always)]
fn find_special_in_tail<const STOP_ON_HIGH: bool>(bytes: &[u8], at: usize) -> Found {
    if let Some(start) = bytes.len().checked_sub(16)
        && let Some(block) = bytes.get(start..).and_then(|b| b.first_chunk::<16>())
    {
        // `at` lies in the block (it is under 16 bytes from the end): `skip` is below 16.
        let skip = at.saturating_sub(start);
        return match special_in_block_from::<STOP_ON_HIGH>(block, skip) {
            Some(stop) => Found::in_block(start, stop),
            None => Found {
                at: bytes.len(),
                quote: false,
            },
        };
    }
    let mut at = at;
    for &byte in bytes.get(at..).unwrap_or_default() {
        if is_special::<STOP_ON_HIGH>(byte) {
            return Found {
                at,
                quote: byte == b'"',
            };
        }
        at += 1;
    }
    Found { at, quote: false }
}

/// Whether any byte of `block` is special ([`is_special`]). A branch-free OR over the bytes, so
/// the compiler emits vector compares (with x86-64's baseline SSE2: four loads, twelve compares
/// and one `pmovmskb` for the 64 bytes).
#[inline(always)]
fn any_special<const STOP_ON_HIGH: bool>(block: &[u8; 64]) -> bool {
    block
        .iter()
        .fold(false, |any, &byte| any | is_special::<STOP_ON_HIGH>(byte))
}

/// Checks the escape whose backslash is at `pos`; returns the index just after it.
#[inline]
fn scan_escape(bytes: &[u8], pos: usize) -> Result<usize, (usize, ErrorKind)> {
    match bytes.get(pos + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(pos + 2),
        Some(b'u') => scan_unicode_escape(bytes, pos),
        Some(_) => Err((pos + 1, ErrorKind::InvalidEscape)),
        None => Err((pos + 1, ErrorKind::UnexpectedEnd)),
    }
}

/// Checks the `\uXXXX` escape at `pos` (and its low-surrogate partner); returns the index after.
#[cold]
fn scan_unicode_escape(bytes: &[u8], pos: usize) -> Result<usize, (usize, ErrorKind)> {
    let unit = hex4(bytes, pos + 2)?;
    match unit {
        // serde_json refuses a low surrogate that is not preceded by a high one.
        0xDC00..=0xDFFF => Err((pos, ErrorKind::LoneSurrogate)),
        0xD800..=0xDBFF => {
            // A high surrogate must be followed at once by `\u` and a low surrogate.
            let next = pos + 6;
            if bytes.get(next..next + 2) != Some(b"\\u".as_slice()) {
                return Err((pos, ErrorKind::LoneSurrogate));
            }
            match hex4(bytes, next + 2)? {
                0xDC00..=0xDFFF => Ok(next + 6),
                _ => Err((pos, ErrorKind::LoneSurrogate)),
            }
        }
        _ => Ok(pos + 6),
    }
}

/// The four hex digits at `pos`, as serde_json reads them (either case).
fn hex4(bytes: &[u8], pos: usize) -> Result<u16, (usize, ErrorKind)> {
    let Some(digits) = bytes.get(pos..pos + 4) else {
        return Err((bytes.len(), ErrorKind::UnexpectedEnd));
    };
    let mut unit = 0u16;
    for (i, &digit) in digits.iter().enumerate() {
        let value = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            b'A'..=b'F' => digit - b'A' + 10,
            _ => return Err((pos + i, ErrorKind::InvalidEscape)),
        };
        unit = unit << 4 | u16::from(value);
    }
    Ok(unit)
}

/// One run of a string body: raw bytes copied as they are, or one decoded escape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Piece<'a> {
    /// Bytes without escapes.
    Raw(&'a [u8]),
    /// The character an escape (or surrogate pair) stands for.
    Char(char),
}

/// The pieces of a string body that [`scan_string`] accepted.
#[derive(Debug, Clone)]
pub(super) struct Pieces<'a> {
    rest: &'a [u8],
}

impl<'a> Pieces<'a> {
    /// The pieces of `body` (the bytes between the quotes).
    pub(super) fn new(body: &'a [u8]) -> Self {
        Pieces { rest: body }
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        match self.rest.first()? {
            b'\\' => {
                let (ch, used) = decode_escape(self.rest);
                self.rest = self.rest.get(used..).unwrap_or_default();
                Some(Piece::Char(ch))
            }
            _ => {
                let run = self
                    .rest
                    .iter()
                    .position(|&b| b == b'\\')
                    .unwrap_or(self.rest.len());
                let (raw, rest) = self.rest.split_at(run);
                self.rest = rest;
                Some(Piece::Raw(raw))
            }
        }
    }
}

/// Decodes the escape at the start of `text` (validated by [`scan_string`]): the character and
/// how many bytes the escape took. Malformed escapes (unreachable after a scan) read as U+FFFD.
fn decode_escape(text: &[u8]) -> (char, usize) {
    let simple = match text.get(1) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => return decode_unicode_escape(text),
        _ => return (char::REPLACEMENT_CHARACTER, text.len().min(2)),
    };
    (simple, 2)
}

/// Decodes a `\uXXXX` escape, or a `\uXXXX\uXXXX` surrogate pair, at the start of `text`.
fn decode_unicode_escape(text: &[u8]) -> (char, usize) {
    let Ok(high) = hex4(text, 2) else {
        return (char::REPLACEMENT_CHARACTER, text.len().min(6));
    };
    if (0xD800..=0xDBFF).contains(&high)
        && let Ok(low) = hex4(text, 8)
    {
        let code = 0x1_0000 + ((u32::from(high) - 0xD800) << 10 | (u32::from(low) - 0xDC00));
        return (
            char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER),
            12,
        );
    }
    (
        char::from_u32(u32::from(high)).unwrap_or(char::REPLACEMENT_CHARACTER),
        6,
    )
}

/// The decoded UTF-8 bytes of a string body, one at a time, without allocating.
#[derive(Debug, Clone)]
pub(super) struct DecodedBytes<'a> {
    pieces: Pieces<'a>,
    raw: std::slice::Iter<'a, u8>,
    char_bytes: [u8; 4],
    char_pos: usize,
    char_len: usize,
}

impl<'a> DecodedBytes<'a> {
    /// The decoded bytes of `body` (the bytes between the quotes).
    pub(super) fn new(body: &'a [u8]) -> Self {
        DecodedBytes {
            pieces: Pieces::new(body),
            raw: [].iter(),
            char_bytes: [0; 4],
            char_pos: 0,
            char_len: 0,
        }
    }
}

impl Iterator for DecodedBytes<'_> {
    type Item = u8;

    fn next(&mut self) -> Option<u8> {
        loop {
            if let Some(&byte) = self.raw.next() {
                return Some(byte);
            }
            if self.char_pos < self.char_len {
                let byte = self.char_bytes.get(self.char_pos).copied();
                self.char_pos += 1;
                return byte;
            }
            match self.pieces.next()? {
                Piece::Raw(raw) => self.raw = raw.iter(),
                Piece::Char(ch) => {
                    self.char_len = ch.encode_utf8(&mut self.char_bytes).len();
                    self.char_pos = 0;
                }
            }
        }
    }
}

/// The characters of a body that [`scan_string`] accepted, escapes decoded, allocating nothing
/// (for comparing and hashing names under case folding).
pub(super) fn decoded_chars(body: &[u8]) -> impl Iterator<Item = char> + '_ {
    Pieces::new(body).flat_map(|piece| {
        let (raw, escaped) = match piece {
            // A run between escapes of an accepted body is whole UTF-8 characters (escapes are
            // ASCII); were it not, it would read as one replacement character.
            Piece::Raw(raw) => (std::str::from_utf8(raw).unwrap_or("\u{fffd}"), None),
            Piece::Char(c) => ("", Some(c)),
        };
        raw.chars().chain(escaped)
    })
}

/// The decoded string of a body that [`scan_string`] accepted.
pub(super) fn decode(body: &[u8]) -> String {
    let mut out = Vec::with_capacity(body.len());
    for piece in Pieces::new(body) {
        match piece {
            Piece::Raw(raw) => out.extend_from_slice(raw),
            Piece::Char(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    match String::from_utf8(out) {
        Ok(text) => text,
        // Unreachable after a scan; stay total anyway.
        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &[u8]) -> Result<ScannedString, (usize, ErrorKind)> {
        scan_string(text, 0)
    }

    /// What [`find_special`] must answer when it stops at `at` in `bytes`: whether that byte is
    /// the quote is read from the byte itself.
    fn found(bytes: &[u8], at: usize) -> Found {
        Found {
            at,
            quote: bytes.get(at) == Some(&b'"'),
        }
    }

    #[test]
    fn the_swar_scan_finds_each_special_byte_at_every_position() {
        for len in 0..20 {
            for special in [b'"', b'\\', 0x00, 0x1f] {
                let mut body = vec![b'a'; len];
                body.push(special);
                body.extend_from_slice(b"xxxxxxxxxx\"");
                let expected = found(&body, len);
                assert_eq!(find_special::<true>(&body, 0), expected, "{len} {special}");
                assert_eq!(find_special::<false>(&body, 0), expected, "{len} {special}");
            }
            let mut body = vec![b'a'; len];
            body.push(0xC3);
            body.extend_from_slice(b"xxxxxxxxxx\"");
            assert_eq!(find_special::<true>(&body, 0), found(&body, len));
            assert_eq!(
                find_special::<false>(&body, 0),
                found(&body, body.len() - 1)
            );
        }
    }

    #[test]
    fn the_scan_finds_the_first_special_byte_in_the_first_word_the_blocks_and_the_tail() {
        // Lengths across the first word, the 64-byte blocks, the 16-byte blocks and the
        // byte-wise tail; the special byte last in the input or followed by more bytes; scans
        // from inner offsets; and inputs with no special byte at all (the scan ends at the end).
        for start in 0..3 {
            for len in 0..224 {
                for after in [0, 1, 7, 8, 15, 16, 17] {
                    for special in [b'"', b'\\', 0x00, 0x1f, 0xC3] {
                        let mut body = vec![b'a'; start + len];
                        body.push(special);
                        body.extend(std::iter::repeat_n(b'"', after));
                        let at = start + len;
                        assert_eq!(
                            find_special::<true>(&body, start),
                            found(&body, at),
                            "{start} {len} {after} {special}"
                        );
                        // Without stopping on high bytes, the scan passes 0xC3 and stops at the
                        // next byte (a quote, or the end of the input).
                        let expected = if special == 0xC3 { at + 1 } else { at };
                        assert_eq!(
                            find_special::<false>(&body, start),
                            found(&body, expected),
                            "{start} {len} {after} {special}"
                        );
                    }
                }
                let plain = vec![b'a'; start + len];
                let end = found(&plain, plain.len());
                assert_eq!(find_special::<true>(&plain, start), end);
                assert_eq!(find_special::<false>(&plain, start), end);
            }
        }
        assert_eq!(
            find_special::<true>(b"abc", 5),
            found(b"abc", 5),
            "a start past the end finds nothing"
        );
    }

    /// The first byte at or after `pos` that [`find_special`] must stop at, one byte at a time.
    fn reference(bytes: &[u8], pos: usize, stop_on_high: bool) -> Found {
        let stops = |b: u8| b == b'"' || b == b'\\' || b < 0x20 || (stop_on_high && b >= 0x80);
        let at = (pos..bytes.len())
            .find(|&i| bytes.get(i).is_some_and(|&b| stops(b)))
            .unwrap_or(bytes.len().max(pos));
        found(bytes, at)
    }

    /// Both kinds of scan of `body` from `start` agree with [`reference`].
    fn assert_scans_agree(body: &[u8], start: usize, label: &str) {
        assert_eq!(
            find_special::<true>(body, start),
            reference(body, start, true),
            "{label} from {start}"
        );
        assert_eq!(
            find_special::<false>(body, start),
            reference(body, start, false),
            "{label} from {start}"
        );
    }

    #[test]
    fn the_scan_near_the_end_of_the_input_ignores_special_bytes_before_its_start() {
        // The last 16 bytes are read as one block from the input's end, whatever the scan's
        // start: a special byte before the start but in that block must not be found.
        for len in 0..48 {
            for special in [b'"', b'\\', 0x00, 0x1f, 0x7f, 0x80, 0xC3, 0xff] {
                for at in 0..len {
                    let mut body = vec![b'x'; len];
                    body[at] = special;
                    for start in 0..=len {
                        assert_scans_agree(&body, start, &format!("{len} {special:#x} at {at}"));
                    }
                }
            }
        }
    }

    #[test]
    fn the_scan_agrees_with_a_byte_by_byte_reference_for_every_byte_at_every_position() {
        for byte in 0..=u8::MAX {
            for at in (0..200).step_by(3) {
                let mut body = vec![b'x'; 260];
                body[at] = byte;
                for start in [0, 1, 5] {
                    assert_scans_agree(&body, start, &format!("{byte:#x} at {at}"));
                }
            }
        }
    }

    #[test]
    fn bytes_0x20_and_0x7f_do_not_stop_the_scan() {
        let body = b" \x7f !#[]{}~\x7f\x7f\x7f\x7f\x7f\"";
        assert_eq!(scan(body).map(|s| s.end), Ok(body.len() - 1));
    }

    #[test]
    fn a_high_byte_right_before_a_control_byte_is_not_masking_it() {
        let body = b"\xc3\xa9\xc3\xa9\xc3\xa9\x01aaaaaaaa\"";
        assert_eq!(scan(body), Err((6, ErrorKind::ControlCharacter)));
    }

    #[test]
    fn decoding_joins_raw_runs_and_escapes() {
        assert_eq!(decode(br"a\nb\u00e9\ud83d\ude00\/"), "a\nb\u{e9}\u{1f600}/");
        let bytes: Vec<u8> = DecodedBytes::new(br"x\u00e9\ty").collect();
        assert_eq!(bytes, "x\u{e9}\ty".as_bytes());
    }
}
