//! String `format` assertions, written by hand and strict.
//!
//! Each checker takes the whole string and accepts only the exact grammar: no surrounding
//! whitespace, ASCII digits only (a Bengali `৪` is not a digit here), no trailing newline.
//! None of them allocates; the IDNA check decodes Punycode into a fixed stack buffer.

use std::sync::OnceLock;

use crate::bytecode::schema::Format;

/// True when `text` is a valid instance of `format`.
pub fn is_valid_format(format: Format, text: &str) -> bool {
    match format {
        Format::DateTime => is_date_time(text),
        Format::Date => is_date(text),
        Format::Time => is_time(text),
        Format::Email => is_email(text),
        Format::Uri => is_uri(text),
        Format::Uuid => is_uuid(text),
        Format::Ipv4 => is_ipv4(text),
        Format::Ipv6 => is_ipv6(text),
        Format::Hostname => is_hostname(text),
    }
}

/// The value of exactly `N` ASCII digits.
fn digits<const N: usize>(bytes: &[u8]) -> Option<u32> {
    if bytes.len() != N {
        return None;
    }
    bytes.iter().try_fold(0u32, |acc, b| {
        b.is_ascii_digit().then(|| acc * 10 + u32::from(b - b'0'))
    })
}

fn is_leap_year(year: u32) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

/// RFC 3339 `full-date`: `YYYY-MM-DD` with a real day of that month.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    let (Some(year), Some(b'-'), Some(month), Some(b'-'), Some(day)) = (
        b.get(0..4).and_then(digits::<4>),
        b.get(4),
        b.get(5..7).and_then(digits::<2>),
        b.get(7),
        b.get(8..).and_then(digits::<2>),
    ) else {
        return false;
    };
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days_in_month).contains(&day)
}

/// RFC 3339 `full-time`: `HH:MM:SS[.frac](Z|±HH:MM)`. Second 60 is allowed only when the time
/// is 23:59 in UTC (a leap second), whatever the offset.
fn is_time(text: &str) -> bool {
    let b = text.as_bytes();
    let (Some(hour), Some(b':'), Some(minute), Some(b':'), Some(second)) = (
        b.get(0..2).and_then(digits::<2>),
        b.get(2),
        b.get(3..5).and_then(digits::<2>),
        b.get(5),
        b.get(6..8).and_then(digits::<2>),
    ) else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut rest = b.get(8..).unwrap_or_default();
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = fraction.get(n..).unwrap_or_default();
    }
    let offset_minutes: i64 = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (Some(oh), Some(om)) = (digits::<2>(&[*h1, *h2]), digits::<2>(&[*m1, *m2])) else {
                return false;
            };
            if oh > 23 || om > 59 {
                return false;
            }
            let magnitude = i64::from(oh * 60 + om);
            if *sign == b'+' { magnitude } else { -magnitude }
        }
        _ => return false,
    };
    if second == 60 {
        let utc = (i64::from(hour * 60 + minute) - offset_minutes).rem_euclid(24 * 60);
        return utc == 23 * 60 + 59;
    }
    true
}

/// RFC 3339 `date-time`: `full-date "T" full-time`, `T` and `Z` in either case.
fn is_date_time(text: &str) -> bool {
    match (text.get(..10), text.as_bytes().get(10), text.get(11..)) {
        (Some(date), Some(b'T' | b't'), Some(time)) => is_date(date) && is_time(time),
        _ => false,
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// `8-4-4-4-12` hex digits, any case, any version and variant.
fn is_uuid(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => is_hex(*c),
        })
}

/// Dotted quad, each part `0` or 1–3 digits without a leading zero, at most 255.
fn is_ipv4(text: &str) -> bool {
    let mut parts = 0;
    for part in text.split('.') {
        parts += 1;
        let b = part.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= 3
            && b.iter().all(u8::is_ascii_digit)
            && !(b.len() > 1 && b.first() == Some(&b'0'))
            && part.parse::<u16>().is_ok_and(|v| v <= 255);
        if !ok || parts > 4 {
            return false;
        }
    }
    parts == 4
}

/// One side of an IPv6 address around `::`: groups of 1–4 hex digits; the last group of the
/// whole address may be a dotted quad worth two groups. Returns the number of 16-bit groups.
fn ipv6_groups(side: &str, ends_address: bool) -> Option<usize> {
    if side.is_empty() {
        return Some(0);
    }
    let mut count = 0;
    let mut groups = side.split(':').peekable();
    while let Some(group) = groups.next() {
        let last = groups.peek().is_none();
        if last && ends_address && group.contains('.') {
            if !is_ipv4(group) {
                return None;
            }
            count += 2;
        } else {
            let b = group.as_bytes();
            if b.is_empty() || b.len() > 4 || !b.iter().all(|c| is_hex(*c)) {
                return None;
            }
            count += 1;
        }
    }
    Some(count)
}

/// RFC 4291 text form: eight groups, or fewer with one `::`; an embedded IPv4 tail; no zone
/// index, no prefix length, no brackets.
fn is_ipv6(text: &str) -> bool {
    match text.split_once("::") {
        Some((left, right)) => {
            if right.contains("::") {
                return false;
            }
            match (ipv6_groups(left, false), ipv6_groups(right, true)) {
                (Some(l), Some(r)) => l + r <= 7,
                _ => false,
            }
        }
        None => ipv6_groups(text, true) == Some(8),
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// True when every byte is allowed by `allowed` or starts a valid `%XX` escape.
fn all_uri_chars(text: &str, allowed: impl Fn(u8) -> bool) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            match (b.get(i + 1), b.get(i + 2)) {
                (Some(h), Some(l)) if is_hex(*h) && is_hex(*l) => i += 3,
                _ => return false,
            }
        } else if allowed(c) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || b == b':' || b == b'@'
}

/// RFC 3986 `URI` (absolute, fragment allowed): `scheme ":" hier-part [ "?" query ]
/// [ "#" fragment ]`, ASCII only.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut scheme_bytes = scheme.bytes();
    let scheme_ok = scheme_bytes.next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme_bytes.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return false;
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (hier, query) = rest.split_once('?').unwrap_or((rest, ""));
    let query_char = |c| is_pchar(c) || c == b'/' || c == b'?';
    if !all_uri_chars(fragment, query_char) || !all_uri_chars(query, query_char) {
        return false;
    }
    let path = match hier.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            let (authority, path) = after.split_at(end);
            if !is_authority(authority) {
                return false;
            }
            path
        }
        None => hier,
    };
    all_uri_chars(path, |c| is_pchar(c) || c == b'/')
}

/// `[ userinfo "@" ] host [ ":" port ]`.
fn is_authority(authority: &str) -> bool {
    let (userinfo, host_port) = match authority.split_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority),
    };
    if let Some(userinfo) = userinfo
        && !all_uri_chars(userinfo, |c| {
            is_unreserved(c) || is_sub_delim(c) || c == b':'
        })
    {
        return false;
    }
    let (host_ok, port) = if let Some(literal) = host_port.strip_prefix('[') {
        let Some((inside, after)) = literal.split_once(']') else {
            return false;
        };
        let ok = if let Some(future) = inside.strip_prefix(['v', 'V']) {
            match future.split_once('.') {
                Some((version, body)) => {
                    !version.is_empty()
                        && version.bytes().all(is_hex)
                        && !body.is_empty()
                        && body
                            .bytes()
                            .all(|c| is_unreserved(c) || is_sub_delim(c) || c == b':')
                }
                None => false,
            }
        } else {
            is_ipv6(inside)
        };
        match after {
            "" => (ok, ""),
            _ => match after.strip_prefix(':') {
                Some(port) => (ok, port),
                None => return false,
            },
        }
    } else {
        let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
        (
            all_uri_chars(host, |c| is_unreserved(c) || is_sub_delim(c)),
            port,
        )
    };
    host_ok && port.bytes().all(|c| c.is_ascii_digit())
}

fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'/'
                | b'='
                | b'?'
                | b'^'
                | b'_'
                | b'`'
                | b'{'
                | b'|'
                | b'}'
                | b'~'
        )
}

/// The longest local part of a mailbox, in bytes (RFC 5321 §4.5.3.1.1).
const LOCAL_PART_BYTES: usize = 64;

/// The longest DNS label, in bytes (RFC 1035 §2.3.4). A 63-byte A-label decodes to at most 63
/// code points, so a U-label fits a buffer of this many characters.
const LABEL_BYTES: usize = 63;

/// The longest host name, in bytes: 255 octets on the wire (RFC 1035 §2.3.4) are 253 characters
/// of dotted text without the trailing dot.
const HOST_NAME_BYTES: usize = 253;

/// RFC 5321 `Mailbox`: a dot-atom or quoted-string local part (at most [`LOCAL_PART_BYTES`]),
/// `@`, and a hostname or an `[IPv4]` / `[IPv6:...]` address literal.
fn is_email(text: &str) -> bool {
    let b = text.as_bytes();
    let local_end = if b.first() == Some(&b'"') {
        // Quoted string: printable ASCII, with `\` escaping any printable character.
        let mut i = 1;
        loop {
            match b.get(i) {
                Some(b'"') => break i + 1,
                Some(b'\\') => match b.get(i + 1) {
                    Some(c) if (b' '..=b'~').contains(c) => i += 2,
                    _ => return false,
                },
                Some(c) if (b' '..=b'~').contains(c) => i += 1,
                _ => return false,
            }
        }
    } else {
        let end = b.iter().position(|c| *c == b'@').unwrap_or(b.len());
        let local = b.get(..end).unwrap_or_default();
        let atoms_ok = local
            .split(|c| *c == b'.')
            .all(|atom| !atom.is_empty() && atom.iter().all(|c| is_atext(*c)));
        if !atoms_ok {
            return false;
        }
        end
    };
    if local_end > LOCAL_PART_BYTES || b.get(local_end) != Some(&b'@') {
        return false;
    }
    let Some(domain) = text.get(local_end + 1..) else {
        return false;
    };
    match domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        Some(literal) => match literal.strip_prefix("IPv6:") {
            Some(v6) => is_ipv6(v6),
            None => is_ipv4(literal),
        },
        None => is_hostname(domain),
    }
}

/// RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, each 1–63
/// bytes, at most 253 bytes in all, no trailing dot. A label starting with `xn--` must be a
/// valid IDNA2008 A-label.
fn is_hostname(text: &str) -> bool {
    if text.is_empty() || text.len() > HOST_NAME_BYTES {
        return false;
    }
    text.split('.').all(|label| {
        let b = label.as_bytes();
        let ldh = !b.is_empty()
            && b.len() <= LABEL_BYTES
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
            && b.first() != Some(&b'-')
            && b.last() != Some(&b'-');
        ldh && match b.get(..4) {
            Some(prefix) if prefix.eq_ignore_ascii_case(b"xn--") => {
                label.get(4..).is_some_and(is_a_label_body)
            }
            _ => true,
        }
    })
}

/// Decodes RFC 3492 Punycode into `out`; returns the number of code points.
fn punycode_decode(input: &str, out: &mut [char; LABEL_BYTES]) -> Option<usize> {
    const BASE: u32 = 36;
    const T_MIN: u32 = 1;
    const T_MAX: u32 = 26;
    let (basic, encoded) = match input.rfind('-') {
        Some(at) => (input.get(..at)?, input.get(at + 1..)?),
        None => ("", input),
    };
    let mut len = 0;
    for c in basic.chars() {
        if !c.is_ascii() {
            return None;
        }
        *out.get_mut(len)? = c;
        len += 1;
    }
    let (mut n, mut i, mut bias) = (128u32, 0u32, 72u32);
    let mut digits = encoded.bytes().peekable();
    while digits.peek().is_some() {
        let old_i = i;
        let mut weight = 1u32;
        let mut k = BASE;
        loop {
            let digit = match digits.next()? {
                c @ b'a'..=b'z' => u32::from(c - b'a'),
                c @ b'A'..=b'Z' => u32::from(c - b'A'),
                c @ b'0'..=b'9' => u32::from(c - b'0') + 26,
                _ => return None,
            };
            i = i.checked_add(digit.checked_mul(weight)?)?;
            let t = if k <= bias {
                T_MIN
            } else if k >= bias + T_MAX {
                T_MAX
            } else {
                k - bias
            };
            if digit < t {
                break;
            }
            weight = weight.checked_mul(BASE - t)?;
            k += BASE;
        }
        let count = u32::try_from(len + 1).ok()?;
        bias = adapt(i - old_i, count, old_i == 0);
        n = n.checked_add(i / count)?;
        i %= count;
        let at = usize::try_from(i).ok()?;
        if len >= LABEL_BYTES || at > len {
            return None;
        }
        out.copy_within(at..len, at + 1);
        *out.get_mut(at)? = char::from_u32(n)?;
        len += 1;
        i += 1;
    }
    Some(len)
}

fn adapt(delta: u32, count: u32, first: bool) -> u32 {
    let mut delta = if first { delta / 700 } else { delta / 2 };
    delta += delta / count;
    let mut k = 0;
    while delta > ((36 - 1) * 26) / 2 {
        delta /= 36 - 1;
        k += 36;
    }
    k + (36 * delta) / (delta + 38)
}

/// Compiled Unicode property tests, built once (the `regex` crate carries the tables).
struct UnicodeClasses {
    pvalid_category: regex::Regex,
    mark: regex::Regex,
    greek: regex::Regex,
    hebrew: regex::Regex,
    kana_han: regex::Regex,
    joining_script: regex::Regex,
    transparent: regex::Regex,
}

fn classes() -> Option<&'static UnicodeClasses> {
    static CLASSES: OnceLock<Option<UnicodeClasses>> = OnceLock::new();
    CLASSES
        .get_or_init(|| {
            let re = |p: &str| regex::Regex::new(p).ok();
            Some(UnicodeClasses {
                pvalid_category: re(r"^[\p{Ll}\p{Lo}\p{Lm}\p{Mn}\p{Mc}\p{Nd}]$")?,
                mark: re(r"^\p{M}$")?,
                greek: re(r"^\p{Greek}$")?,
                hebrew: re(r"^\p{Hebrew}$")?,
                kana_han: re(r"^[\p{Hiragana}\p{Katakana}\p{Han}]$")?,
                joining_script: re(
                    r"^[\p{Arabic}\p{Syriac}\p{Nko}\p{Mongolian}\p{Mandaic}\p{Manichaean}\p{Psalter_Pahlavi}\p{Adlam}\p{Hanifi_Rohingya}\p{Sogdian}\p{Phags_Pa}]$",
                )?,
                transparent: re(r"^[\p{Mn}\p{Me}\p{Cf}]$")?,
            })
        })
        .as_ref()
}

fn char_is(regex: &regex::Regex, c: char) -> bool {
    let mut buf = [0u8; 4];
    regex.is_match(c.encode_utf8(&mut buf))
}

/// Code points with canonical combining class 9 (virama), for the ZWJ/ZWNJ rules.
const VIRAMAS: [u32; 66] = [
    0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D3B, 0x0D3C, 0x0D4D, 0x0DCA,
    0x0E3A, 0x0EBA, 0x0F84, 0x1039, 0x103A, 0x1714, 0x1715, 0x1734, 0x17D2, 0x1A60, 0x1B44, 0x1BAA,
    0x1BAB, 0x1BF2, 0x1BF3, 0x2D7F, 0xA806, 0xA82C, 0xA8C4, 0xA953, 0xA9C0, 0xAAF6, 0xABED,
    0x10A3F, 0x11046, 0x11070, 0x1107F, 0x110B9, 0x11133, 0x11134, 0x111C0, 0x11235, 0x112EA,
    0x1134D, 0x11442, 0x114C2, 0x115BF, 0x1163F, 0x116B6, 0x1172B, 0x11839, 0x1193D, 0x1193E,
    0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11C3F, 0x11D44, 0x11D45, 0x11D97, 0x11F41, 0x11F42,
    0x1612F,
];

/// Checks the part of an A-label after `xn--`: it must decode to a U-label whose every code
/// point is PVALID under IDNA2008 (RFC 5892, approximated by general category plus the
/// exception table) or satisfies its CONTEXTJ/CONTEXTO rule. The Bidi rule (RFC 5893) is not
/// checked.
fn is_a_label_body(body: &str) -> bool {
    let mut buffer = ['\0'; LABEL_BYTES];
    let Some(len) = punycode_decode(body, &mut buffer) else {
        return false;
    };
    let Some(label) = buffer.get(..len) else {
        return false;
    };
    let Some(classes) = classes() else {
        return false;
    };
    if label.iter().all(char::is_ascii)
        || label.first() == Some(&'-')
        || label.last() == Some(&'-')
        || (label.get(2) == Some(&'-') && label.get(3) == Some(&'-'))
        || label.first().is_some_and(|c| char_is(&classes.mark, *c))
    {
        return false;
    }
    let has_arabic_indic = label.iter().any(|c| ('\u{0660}'..='\u{0669}').contains(c));
    let has_extended_arabic_indic = label.iter().any(|c| ('\u{06F0}'..='\u{06F9}').contains(c));
    label.iter().enumerate().all(|(i, &c)| {
        let before = i.checked_sub(1).and_then(|j| label.get(j)).copied();
        let after = label.get(i + 1).copied();
        match c {
            'a'..='z' | '0'..='9' | '-' => true,
            // Exceptions (RFC 5892 §2.6): PVALID.
            '\u{00DF}' | '\u{03C2}' | '\u{06FD}' | '\u{06FE}' | '\u{0F0B}' | '\u{3007}' => true,
            // Exceptions: DISALLOWED.
            '\u{0640}'
            | '\u{07FA}'
            | '\u{302E}'
            | '\u{302F}'
            | '\u{3031}'..='\u{3035}'
            | '\u{303B}' => false,
            // CONTEXTO rules (RFC 5892 Appendix A).
            '\u{00B7}' => before == Some('l') && after == Some('l'),
            '\u{0375}' => after.is_some_and(|a| char_is(&classes.greek, a)),
            '\u{05F3}' | '\u{05F4}' => before.is_some_and(|b| char_is(&classes.hebrew, b)),
            '\u{30FB}' => label
                .iter()
                .any(|o| *o != '\u{30FB}' && char_is(&classes.kana_han, *o)),
            '\u{0660}'..='\u{0669}' => !has_extended_arabic_indic,
            '\u{06F0}'..='\u{06F9}' => !has_arabic_indic,
            // CONTEXTJ rules.
            '\u{200D}' => before.is_some_and(is_virama),
            '\u{200C}' => before.is_some_and(is_virama) || zwnj_joins(label, i, classes),
            c if c.is_ascii() => false,
            c => char_is(&classes.pvalid_category, c),
        }
    })
}

fn is_virama(c: char) -> bool {
    VIRAMAS.contains(&u32::from(c))
}

/// The ZWNJ joining-type rule, approximated: skipping transparent marks, a joining-script
/// letter must come before and after the ZWNJ.
fn zwnj_joins(label: &[char], at: usize, classes: &UnicodeClasses) -> bool {
    let joins = |c: &char| !char_is(&classes.transparent, *c);
    let before = label
        .get(..at)
        .and_then(|s| s.iter().rev().find(|c| joins(c)));
    let after = label
        .get(at + 1..)
        .and_then(|s| s.iter().find(|c| joins(c)));
    match (before, after) {
        (Some(b), Some(a)) => {
            char_is(&classes.joining_script, *b) && char_is(&classes.joining_script, *a)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_check_month_lengths_and_leap_years() {
        assert!(is_date("2020-02-29"));
        assert!(!is_date("2021-02-29"));
        assert!(!is_date("2100-02-29"));
        assert!(is_date("2000-02-29"));
        assert!(!is_date("2020-04-31"));
        assert!(!is_date("2020-1-01"));
        assert!(!is_date("2020-01-01\n"));
    }

    #[test]
    fn leap_seconds_must_fall_on_2359_utc() {
        assert!(is_time("23:59:60Z"));
        assert!(is_time("15:59:60-08:00"));
        assert!(!is_time("23:59:60+01:00"));
        assert!(!is_time("12:00:00"));
        assert!(is_date_time("1963-06-19t08:30:06.283185z"));
        assert!(!is_date_time("1963-06-19T08:30:06.Z"));
    }

    #[test]
    fn ipv4_rejects_leading_zeros_and_shorthand() {
        assert!(is_ipv4("0.0.0.0"));
        assert!(!is_ipv4("01.0.0.0"));
        assert!(!is_ipv4("127.1"));
        assert!(!is_ipv4("1.2.3.4.5"));
    }

    #[test]
    fn ipv6_allows_one_compression_and_an_ipv4_tail() {
        assert!(is_ipv6("::"));
        assert!(is_ipv6("::ffff:192.168.0.1"));
        assert!(!is_ipv6("1::2::3"));
        assert!(!is_ipv6("1.2.3.4::"));
        assert!(!is_ipv6("fe80::1%eth0"));
        assert!(is_ipv6("1:2:3:4:5:6:7:8"));
        assert!(!is_ipv6("1:2:3:4:5:6:7:8:9"));
    }

    #[test]
    fn uris_must_be_absolute_and_ascii() {
        assert!(is_uri("urn:isbn:0451450523"));
        assert!(is_uri("https://user:pw@[v1.x]:8080/a?b#c"));
        assert!(!is_uri("/relative"));
        assert!(!is_uri("http://example.com:80a/"));
    }

    #[test]
    fn punycode_decodes_known_labels() {
        let mut buf = ['\0'; LABEL_BYTES];
        let n = punycode_decode("mnchen-3ya", &mut buf).unwrap();
        assert_eq!(buf[..n].iter().collect::<String>(), "münchen");
        assert!(punycode_decode("X", &mut buf).is_none());
    }

    #[test]
    fn hostnames_check_a_labels() {
        assert!(is_hostname("xn--mnchen-3ya.de"));
        assert!(!is_hostname("xn--X.de"));
        assert!(!is_hostname("example."));
    }

    #[test]
    fn emails_accept_quoted_local_parts_and_address_literals() {
        assert!(is_email("\"a@b\"@example.com"));
        assert!(is_email("a@[IPv6:::1]"));
        assert!(!is_email("a..b@example.com"));
        assert!(!is_email(&format!("{}@example.com", "a".repeat(65))));
    }
}
