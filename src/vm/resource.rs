//! Request resources: strict parsing and template matching (SPEC §2.2, §5.1 steps 2–3).
//!
//! - [`RequestResource`] is a request's resource string, parsed and validated once, borrowing
//!   from the request. Anything ambiguous — dot segments, encoded separators, NUL, bad
//!   percent-encoding, double encoding, text NFKC changes, trimmable dots and spaces, userinfo,
//!   fragments, empty segments, `;` in the query — is a [`ResourceRejection`], which the engine
//!   turns into a deny with reason `resource`. Nothing is ever normalised into a match.
//! - [`ResourcePattern::matches`] matches a parsed request against a compiled template, writing
//!   `{name}` bindings into a reusable [`Bindings`] buffer. A request without percent-escapes
//!   matches without allocating.
//! - [`RequestResource::query`] reads one query parameter as a [`QueryValue`]; a parameter given
//!   twice (also as `Role` and `role[]`) is [`QueryValue::Repeated`], so parameter pollution never
//!   picks a winner, and one given only under another spelling is [`QueryValue::Variant`].
//!
//! The rules, with an example of each, are in `docs/resources.md`.

use std::borrow::Cow;

use crate::bytecode::resource::percent::{self, DecodeProblem};
use crate::bytecode::resource::{
    HostPattern, HostProblem, PLAIN, ResourceKind, ResourcePattern, Scheme, SegmentPattern,
    SegmentProblem, check_host, check_segment, find_byte, parse_port, quote, split_byte,
    split_port,
};
use crate::bytes::bytes_eq;

/// Which part of a resource a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourcePart {
    /// The `/`-separated path (or the locator of a non-http resource).
    Path,
    /// The query string after `?`.
    Query,
}

impl ResourcePart {
    fn name(self) -> &'static str {
        match self {
            ResourcePart::Path => "path",
            ResourcePart::Query => "query",
        }
    }
}

/// Why a request's resource is refused before any matching. Each is a deny with reason
/// `resource`; the `Display` form is the deny message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceRejection {
    /// The resource string is empty.
    #[error("resource is empty")]
    Empty,
    /// No `http://`, `https://`, `db:`, `oauth:`, `tool:`, `service:` or `secret:` prefix.
    #[error(
        "resource `{resource}` does not start with `https://`, `http://`, `db:`, `oauth:`, `tool:`, `service:` or `secret:`"
    )]
    UnknownKind {
        /// The resource as given (truncated).
        resource: String,
    },
    /// A raw control or whitespace character anywhere (NUL has its own variant).
    #[error("resource contains a control or whitespace character (U+{code:04X})")]
    ControlCharacter {
        /// The character's code point.
        code: u32,
    },
    /// A NUL byte, raw or as `%00`.
    #[error("resource contains {}", if *encoded { "an encoded nul `%00`" } else { "a nul byte" })]
    Nul {
        /// True for `%00`, false for a raw NUL.
        encoded: bool,
    },
    /// A raw `\` in the host or path.
    #[error("path contains a raw `\\`")]
    Backslash,
    /// A `#fragment`.
    #[error("resource contains a fragment `{fragment}`")]
    Fragment {
        /// The fragment, from `#`.
        fragment: String,
    },
    /// `user[:password]@` before the host, e.g. `https://calendar.example.com@evil.com/`.
    #[error("url contains userinfo `{userinfo}` before the host")]
    Userinfo {
        /// Everything up to and including the last `@`.
        userinfo: String,
    },
    /// `https:///path` or `https://:443/`.
    #[error("url has an empty host")]
    EmptyHost,
    /// A host with a non-ASCII character (write IDNs in punycode).
    #[error("host `{host}` contains a non-ascii character (write it in punycode)")]
    NonAsciiHost {
        /// The host as given.
        host: String,
    },
    /// A host with a character outside `[A-Za-z0-9_-]`, an empty label, or a bad IPv6 literal.
    #[error("host `{host}` is not a valid host name")]
    InvalidHost {
        /// The host as given.
        host: String,
    },
    /// A port that is empty, not decimal, zero, or above 65535.
    #[error("port `{port}` is not a number in 1..=65535")]
    BadPort {
        /// The port text after `:`.
        port: String,
    },
    /// `db:` with nothing after the colon.
    #[error("resource `{}:` has an empty locator", kind.name())]
    EmptyLocator {
        /// The kind.
        kind: ResourceKind,
    },
    /// `a//b`, a leading `/` in a non-http locator, or `//` at the start of an http path.
    #[error("path `{path}` contains an empty segment")]
    EmptySegment {
        /// The path as given.
        path: String,
    },
    /// A `.` or `..` segment, also percent-encoded (`%2e%2E`) or with a `;param` suffix.
    #[error(
        "path contains a `{segment}` segment{}",
        if *encoded { ", which percent-decodes to a dot segment" } else { "" }
    )]
    DotSegment {
        /// The segment as written.
        segment: String,
        /// True when it had to be decoded to be seen as a dot segment.
        encoded: bool,
    },
    /// `%2F` or `%5C` (any case) in the path.
    #[error("path contains an encoded separator `{escape}`")]
    EncodedSeparator {
        /// The escape as written.
        escape: String,
    },
    /// A `%` not followed by two hex digits.
    #[error("{} contains invalid percent-encoding `{escape}`", part.name())]
    BadPercentEncoding {
        /// Path or query.
        part: ResourcePart,
        /// The escape as written (`%`, `%G1`, `%4`).
        escape: String,
    },
    /// An escape that decodes to a control character other than NUL (`%0A`, `%7F`).
    #[error("{} contains an encoded control character `{escape}`", part.name())]
    EncodedControl {
        /// Path or query.
        part: ResourcePart,
        /// The escape as written, or the decoded code point.
        escape: String,
    },
    /// Percent-decoded bytes that are not UTF-8.
    #[error("{} component `{text}` does not percent-decode to utf-8", part.name())]
    NotUtf8 {
        /// Path or query.
        part: ResourcePart,
        /// The segment or query component as written.
        text: String,
    },
    /// A path segment whose decoded text is not in Unicode normalization form NFKC: a fullwidth
    /// `．` (`%EF%BC%8E`), `／` or `＼`, a ligature, a superscript. A server that applies NFKC
    /// reads other characters, possibly a dot segment or a separator.
    #[error(
        "path segment `{segment}` {}",
        SegmentProblem::NotNfkc(code.and_then(char::from_u32)).describe()
    )]
    NotNormalized {
        /// The segment as written.
        segment: String,
        /// The first character that NFKC changes on its own, if one does.
        code: Option<u32>,
    },
    /// A path segment made only of dots and spaces (`...`, `..%20`, `%20.`), itself or before
    /// its `;parameters`: a server that trims them reads a dot segment.
    #[error("path segment `{segment}` {}", SegmentProblem::DotsAndSpaces.describe())]
    DotsAndSpaces {
        /// The segment as written.
        segment: String,
    },
    /// A path segment (or the part before its `;parameters`) that ends with a dot or a space
    /// (`file.`, `a%20`): Windows file systems and servers that trim strip them.
    #[error("path segment `{segment}` {}", SegmentProblem::TrailingDotOrSpace.describe())]
    TrailingDotOrSpace {
        /// The segment as written.
        segment: String,
    },
    /// A path segment that starts with a space (`%20a`): servers that trim strip it.
    #[error("path segment `{segment}` {}", SegmentProblem::LeadingSpace.describe())]
    LeadingSpace {
        /// The segment as written.
        segment: String,
    },
    /// Decoded text that holds another escape (`%252e` decodes to `%2e`), in a path segment or a
    /// query parameter name: a server that decodes twice reads another character.
    #[error(
        "{} component `{text}` percent-decodes to another escape `{escape}` (double encoding)",
        part.name()
    )]
    DoubleEncoding {
        /// Path or query.
        part: ResourcePart,
        /// The segment or name as written.
        text: String,
        /// The escape the decoding holds.
        escape: String,
    },
    /// A `;` in the query: some servers split parameters on it as on `&`.
    #[error("query `{query}` contains a `;`, which some servers read as a parameter separator")]
    QuerySemicolon {
        /// The query as written.
        query: String,
    },
}

impl ResourceRejection {
    fn from_decode(problem: DecodeProblem, part: ResourcePart, text: &str) -> Self {
        match problem {
            DecodeProblem::BadEscape(escape) => ResourceRejection::BadPercentEncoding {
                part,
                escape: quote(&escape),
            },
            DecodeProblem::EncodedSeparator(escape) => ResourceRejection::EncodedSeparator {
                escape: quote(&escape),
            },
            DecodeProblem::Nul => ResourceRejection::Nul { encoded: true },
            DecodeProblem::EncodedControl(escape) => ResourceRejection::EncodedControl {
                part,
                escape: quote(&escape),
            },
            DecodeProblem::NotUtf8 => ResourceRejection::NotUtf8 {
                part,
                text: quote(text),
            },
        }
    }

    /// The rejection for a path segment (`written`, decoded `escaped`) that breaks a rule of
    /// [`check_segment`].
    fn from_segment(problem: SegmentProblem, written: &str, escaped: bool) -> Self {
        let segment = quote(written);
        match problem {
            SegmentProblem::NotNfkc(c) => ResourceRejection::NotNormalized {
                segment,
                code: c.map(u32::from),
            },
            SegmentProblem::Dot => ResourceRejection::DotSegment {
                segment,
                encoded: escaped,
            },
            SegmentProblem::DotsAndSpaces => ResourceRejection::DotsAndSpaces { segment },
            SegmentProblem::TrailingDotOrSpace => ResourceRejection::TrailingDotOrSpace { segment },
            SegmentProblem::LeadingSpace => ResourceRejection::LeadingSpace { segment },
        }
    }
}

/// The origin of an http request resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RequestOrigin<'a> {
    scheme: Scheme,
    /// As written; compared ASCII-case-insensitively.
    host: &'a str,
    /// The effective port: the scheme's default when none was written.
    port: u16,
}

/// A request's resource string, parsed and validated.
///
/// INVARIANT (validated-request): every segment of `path` is non-empty except possibly the last,
/// contains no raw `\`, percent-decodes (per segment) to UTF-8 with no `/`, `\`, NUL or control
/// character and no second escape, and passes `check_segment` (NFKC, not a dot segment, no
/// trimmable dots or spaces); `query` has no `;`, and every `&`-separated component of it
/// percent-decodes the same way (without the separator rule), a name to no second escape. Upheld
/// by [`RequestResource::parse`], the only constructor; matching relies on it and still fails
/// closed if it were broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestResource<'a> {
    text: &'a str,
    kind: ResourceKind,
    origin: Option<RequestOrigin<'a>>,
    /// `/`-separated segments; for http the path without its leading `/` (`""` for the root).
    path: &'a str,
    query: Option<&'a str>,
    /// No byte of the resource is an escape or anything a deny rule looks for, so segments
    /// compare as they are, without percent-decoding.
    plain: bool,
}

const NON_HTTP_KINDS: [ResourceKind; 5] = [
    ResourceKind::Db,
    ResourceKind::Oauth,
    ResourceKind::Tool,
    ResourceKind::Service,
    ResourceKind::Secret,
];

impl<'a> RequestResource<'a> {
    /// Parses and validates a request's resource string. Allocates only to build a rejection
    /// or to check the UTF-8 of percent-decoded text.
    pub fn parse(text: &'a str) -> Result<RequestResource<'a>, ResourceRejection> {
        // The common case — a plain `http(s)://host[:port]/path[?query]` that every rule
        // accepts — in one pass; anything else (including every rejection) takes the general
        // parser below, which the fast path is tested to agree with.
        match Self::parse_plain_http(text) {
            Some(resource) => Ok(resource),
            None => Self::parse_general(text),
        }
    }

    /// One pass over a plain http resource: `Some` only for a resource the general parser
    /// accepts, with the same result; `None` for anything else (the general parser then
    /// accepts it or says why not).
    fn parse_plain_http(text: &'a str) -> Option<RequestResource<'a>> {
        let (scheme, rest) = Scheme::strip_prefix(text)?;
        let bytes = rest.as_bytes();
        // The host: labels of `[A-Za-z0-9_-]` separated by single dots.
        let mut at = 0;
        loop {
            let label = at;
            at = run_end(bytes, at, HOST_LABEL);
            if at == label {
                return None;
            }
            if bytes.get(at) != Some(&b'.') {
                break;
            }
            at += 1;
        }
        let host = rest.get(..at)?;
        // An optional `:port` of decimal digits.
        let port = if bytes.get(at) == Some(&b':') {
            let digits = at + 1;
            at = run_end(bytes, digits, DIGIT);
            parse_port(rest.get(digits..at)?)?
        } else {
            scheme.default_port()
        };
        let (path, query) = match bytes.get(at) {
            Some(b'/') => Self::plain_path_and_query(rest.get(at + 1..)?, 0)?,
            _ => ("", Self::plain_query(rest.get(at..)?)?),
        };
        Some(RequestResource {
            text,
            kind: ResourceKind::Http,
            origin: Some(RequestOrigin { scheme, host, port }),
            path,
            query,
            plain: true,
        })
    }

    /// The path and query of a plain http resource from `rest`, the text after the `/` that ends
    /// its origin: segments of plain bytes, none empty but the last, none ending with a dot
    /// (neither before its `;parameters`), then the end or a plain query. The first `checked`
    /// bytes are already known to be such segments, each followed by its `/` (a template's plain
    /// prefix), so the scan starts after them.
    #[inline(always)]
    fn plain_path_and_query(rest: &'a str, checked: usize) -> Option<(&'a str, Option<&'a str>)> {
        Self::scan_plain_path(rest, checked, |_| {})
    }

    /// [`RequestResource::plain_path_and_query`], handing each segment after `checked` to
    /// `segment` as the scan finds it (so a template can be matched in the same pass).
    #[inline(always)]
    fn scan_plain_path(
        rest: &'a str,
        checked: usize,
        mut segment: impl FnMut(&'a str),
    ) -> Option<(&'a str, Option<&'a str>)> {
        let bytes = rest.as_bytes();
        let mut at = checked;
        loop {
            let start = at;
            at = run_end(bytes, at, STEM);
            if bytes.get(at) == Some(&b';') {
                // `;parameters`: the stem before them must not end with a dot either.
                if at > start && bytes.get(at - 1) == Some(&b'.') {
                    return None;
                }
                at = run_end(bytes, at, SEGMENT);
            }
            let last = bytes.get(at) != Some(&b'/');
            if at == start && !last {
                return None;
            }
            // A plain segment has no escapes, spaces or non-ASCII, so of the segment rules only
            // the trailing dot can apply, and every dot segment (`.`, `..`, `..;x`) and every
            // segment of dots ends with one: those are for the general parser, which refuses them.
            if at > start && bytes.get(at - 1) == Some(&b'.') {
                return None;
            }
            let text = rest.get(start..at)?;
            segment(text);
            if last {
                break;
            }
            at += 1;
        }
        Some((rest.get(..at)?, Self::plain_query(rest.get(at..)?)?))
    }

    /// After a plain path: `Some(None)` at the end, `Some(Some(query))` for `?` and a query of
    /// plain bytes other than `;` (so every component decodes as it is); `None` for anything
    /// else, which is for the general parser.
    #[inline(always)]
    fn plain_query(tail: &'a str) -> Option<Option<&'a str>> {
        match tail.as_bytes().first() {
            None => Some(None),
            Some(b'?') => {
                let query = tail.get(1..)?;
                query
                    .bytes()
                    .all(|b| url_class(b) & QUERY != 0)
                    .then_some(Some(query))
            }
            Some(_) => None,
        }
    }

    /// The general parser: every kind, every rule, every rejection.
    fn parse_general(text: &'a str) -> Result<RequestResource<'a>, ResourceRejection> {
        if text.is_empty() {
            return Err(ResourceRejection::Empty);
        }
        // One pass over the bytes: a resource made only of plain characters (no `%`, `#`, `@`,
        // `\`, brackets, controls, whitespace or non-ASCII) cannot break the rules that look for
        // those, so their scans are skipped. Everything else takes every check below.
        let plain = text
            .bytes()
            .all(|b| PLAIN.get(usize::from(b)).copied().unwrap_or(false));
        if !plain {
            check_raw_characters(text)?;
        }
        let (kind, after_kind) = detect_kind(text)?;
        if !plain && let Some(at) = text.find('#') {
            return Err(ResourceRejection::Fragment {
                fragment: quote(text.get(at..).unwrap_or("#")),
            });
        }
        let (before_query, query) = match find_byte(after_kind, b'?') {
            Some(at) => (
                after_kind.get(..at).unwrap_or(after_kind),
                after_kind.get(at + 1..),
            ),
            None => (after_kind, None),
        };
        if !plain && before_query.contains('\\') {
            return Err(ResourceRejection::Backslash);
        }
        let (origin, path) = match kind {
            ResourceKind::Http => {
                let (origin, path) = parse_origin(text, before_query)?;
                (Some(origin), path)
            }
            _ if before_query.is_empty() => return Err(ResourceRejection::EmptyLocator { kind }),
            _ => (None, before_query),
        };
        if plain {
            // No escapes and nothing outside ASCII: only the structural rules (empty, dot and
            // trailing-dot segments, `;` in the query) can apply, and a query without `%`
            // always decodes to itself.
            validate_plain_path(path)?;
            if let Some(query) = query {
                check_query_separators(query)?;
            }
        } else {
            validate_path(path)?;
            if let Some(query) = query {
                validate_query(query)?;
            }
        }
        // INVARIANT (validated-request): path and query validated above.
        Ok(RequestResource {
            text,
            kind,
            origin,
            path,
            query,
            plain,
        })
    }

    /// The resource string as given.
    #[cfg(any(test, feature = "internals"))]
    pub fn as_str(&self) -> &'a str {
        self.text
    }

    /// The resource kind.
    #[cfg(any(test, feature = "internals"))]
    pub fn kind(&self) -> ResourceKind {
        self.kind
    }

    /// The scheme of an http resource.
    #[cfg(any(test, feature = "internals"))]
    pub fn scheme(&self) -> Option<Scheme> {
        self.origin.map(|o| o.scheme)
    }

    /// The host of an http resource, as written (compare it case-insensitively).
    #[cfg(any(test, feature = "internals"))]
    pub fn host(&self) -> Option<&'a str> {
        self.origin.map(|o| o.host)
    }

    /// The effective port of an http resource (443/80 when none was written).
    #[cfg(any(test, feature = "internals"))]
    pub fn port(&self) -> Option<u16> {
        self.origin.map(|o| o.port)
    }

    /// The raw (still percent-encoded) `/`-separated path: for http without its leading `/`,
    /// for the other kinds the locator after `KIND:`.
    #[cfg(any(test, feature = "internals"))]
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// The raw query string after `?`, if any.
    #[cfg(any(test, feature = "internals"))]
    pub fn query_string(&self) -> Option<&'a str> {
        self.query
    }

    /// The value of query parameter `name`. A parameter without `=` has the empty value.
    ///
    /// Names are compared after percent-decoding (`+` read as a space), and every name that a
    /// server might take for `name` counts: names equal to it under Unicode simple case folding
    /// once a trailing `[…]` suffix is removed from both (`same_parameter`: `Role`, `ROLE`,
    /// `role[]`, `role%5B%5D`, `role[0]`). So the value is:
    /// - [`QueryValue::Repeated`] when two or more parameters have such names;
    /// - [`QueryValue::Variant`] when one does, spelled otherwise than `name` after decoding;
    /// - [`QueryValue::DoubleEncoded`] when `name` is given once and its value decodes to text
    ///   that holds another escape (`%2561` decodes to `%61`);
    /// - [`QueryValue::One`] with the decoded value, or [`QueryValue::Absent`].
    pub fn query(&self, name: &str) -> QueryValue<'a> {
        let Some(query) = self.query else {
            return QueryValue::Absent;
        };
        // The parameter found so far: its name as written, its value, whether the name decodes
        // to `name` exactly.
        let mut found: Option<(&'a str, &'a str, bool)> = None;
        for pair in split_byte(query, b'&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let exact = percent::decoded_eq(key, true, name);
            if exact || same_parameter(key, name) {
                if found.is_some() {
                    return QueryValue::Repeated;
                }
                found = Some((key, value, exact));
            }
        }
        match found {
            None => QueryValue::Absent,
            Some((key, _, false)) => QueryValue::Variant(key),
            Some((_, value, true)) => match percent::decode(value, true) {
                Some(decoded) if percent::inner_escape(&decoded).is_some() => {
                    QueryValue::DoubleEncoded
                }
                Some(decoded) => QueryValue::One(decoded),
                // Unreachable by INVARIANT (validated-request); `Repeated` fails every
                // constraint, where `Absent` could satisfy an `optional` one.
                None => QueryValue::Repeated,
            },
        }
    }
}

/// True when query parameter `key` (as written, still percent-encoded) is the parameter `name`
/// to a server that folds case or reads `name[…]` as `name`: the two are equal under Unicode
/// simple case folding ([`crate::fold`]) once `key` is decoded and a trailing `[…]` suffix
/// (everything from the first `[` of a name that ends with `]`) is removed from both.
///
/// Without escapes and in ASCII (the usual case) this compares bytes without allocating.
fn same_parameter(key: &str, name: &str) -> bool {
    let plain = key.bytes().all(|b| b.is_ascii() && b != b'%' && b != b'+');
    if plain && name.is_ascii() {
        return parameter_stem(key).eq_ignore_ascii_case(parameter_stem(name));
    }
    percent::decode(key, true)
        .is_some_and(|key| crate::fold::fold_eq(parameter_stem(&key), parameter_stem(name)))
}

/// A query parameter name without its trailing `[…]` suffix: `role` for `role[]`, `role[0]`,
/// `role[a][b]`; the name itself when it does not end with `]`.
fn parameter_stem(name: &str) -> &str {
    if !name.ends_with(']') {
        return name;
    }
    match find_byte(name, b'[') {
        Some(at) => name.get(..at).unwrap_or(name),
        None => name,
    }
}

/// One query parameter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryValue<'a> {
    /// Not in the query string.
    Absent,
    /// Given exactly once; percent-decoded, `+` read as a space.
    One(Cow<'a, str>),
    /// Given more than once (even with equal values, even under names that differ only in case
    /// or a `[…]` suffix): every constraint on it fails.
    Repeated,
    /// Given once, under another spelling of the name (`Role` or `role[]` for `role`; the name
    /// as written): a server may read it as this parameter, and capgate does not, so every
    /// constraint on it fails.
    Variant(&'a str),
    /// Given once, with a value that percent-decodes to another escape (`%2561` to `%61`): a
    /// server that decodes twice reads another value, so every constraint on it fails.
    DoubleEncoded,
}

/// Rejects raw NUL, control and whitespace characters anywhere in the resource.
fn check_raw_characters(text: &str) -> Result<(), ResourceRejection> {
    match text.chars().find(|c| c.is_control() || c.is_whitespace()) {
        None => Ok(()),
        Some('\0') => Err(ResourceRejection::Nul { encoded: false }),
        Some(c) => Err(ResourceRejection::ControlCharacter { code: u32::from(c) }),
    }
}

/// The kind and what follows its prefix (`host...` for http, the locator otherwise).
fn detect_kind(text: &str) -> Result<(ResourceKind, &str), ResourceRejection> {
    if Scheme::strip_prefix(text).is_some() {
        return Ok((ResourceKind::Http, text));
    }
    NON_HTTP_KINDS
        .into_iter()
        .find_map(|kind| {
            text.strip_prefix(kind.name())
                .and_then(|rest| rest.strip_prefix(':'))
                .map(|rest| (kind, rest))
        })
        .ok_or_else(|| ResourceRejection::UnknownKind {
            resource: quote(text),
        })
}

/// Parses `scheme://host[:port]` and returns the origin and the path after its leading `/`.
fn parse_origin<'a>(
    whole: &str,
    url: &'a str,
) -> Result<(RequestOrigin<'a>, &'a str), ResourceRejection> {
    let Some((scheme, rest)) = Scheme::strip_prefix(url) else {
        return Err(ResourceRejection::UnknownKind {
            resource: quote(whole),
        });
    };
    let (authority, path) = match find_byte(rest, b'/') {
        Some(at) => (
            rest.get(..at).unwrap_or(rest),
            rest.get(at + 1..).unwrap_or(""),
        ),
        None => (rest, ""),
    };
    if let Some(at) = authority.bytes().rposition(|b| b == b'@') {
        return Err(ResourceRejection::Userinfo {
            userinfo: quote(authority.get(..=at).unwrap_or(authority)),
        });
    }
    let (host, port) = split_port(authority);
    match check_host(host) {
        Ok(()) => {}
        Err(HostProblem::Empty) => return Err(ResourceRejection::EmptyHost),
        Err(HostProblem::NonAscii) => {
            return Err(ResourceRejection::NonAsciiHost { host: quote(host) });
        }
        Err(HostProblem::Invalid) => {
            return Err(ResourceRejection::InvalidHost { host: quote(host) });
        }
    }
    let port = match port {
        None => scheme.default_port(),
        Some(p) => parse_port(p).ok_or_else(|| ResourceRejection::BadPort { port: quote(p) })?,
    };
    Ok((RequestOrigin { scheme, host, port }, path))
}

/// [`URL_CLASSES`] bit: a host label byte, `[A-Za-z0-9_-]`.
const HOST_LABEL: u8 = 1;
/// [`URL_CLASSES`] bit: a [`PLAIN`] byte other than `/` and `?`, i.e. inside a plain segment.
const SEGMENT: u8 = 2;
/// [`URL_CLASSES`] bit: a [`PLAIN`] byte other than `;`, i.e. anywhere in a plain query (a query
/// with `;` is refused, by the general parser).
const QUERY: u8 = 4;
/// [`URL_CLASSES`] bit: an ASCII digit.
const DIGIT: u8 = 8;
/// [`URL_CLASSES`] bit: a [`SEGMENT`] byte other than `;`, i.e. inside the stem of a plain
/// segment, before its `;parameters`.
const STEM: u8 = 16;

/// The classes of every byte for the plain-http fast path, one table load per byte.
#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "const evaluation: `b < 256` bounds both the index and the cast, and a mistake fails the build"
)]
const URL_CLASSES: [u8; 256] = {
    let mut table = [0; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' {
            table[b] |= HOST_LABEL;
        }
        if c.is_ascii_digit() {
            table[b] |= DIGIT;
        }
        if PLAIN[b] {
            if c != b';' {
                table[b] |= QUERY;
            }
            if c != b'/' && c != b'?' {
                table[b] |= SEGMENT;
                if c != b';' {
                    table[b] |= STEM;
                }
            }
        }
        b += 1;
    }
    table
};

#[inline(always)]
fn url_class(b: u8) -> u8 {
    URL_CLASSES.get(usize::from(b)).copied().unwrap_or(0)
}

/// The end of the run of bytes from `at` whose class has a bit of `mask`.
#[inline(always)]
fn run_end(bytes: &[u8], at: usize, mask: u8) -> usize {
    at + bytes.get(at..).map_or(0, |rest| {
        rest.iter()
            .take_while(|&&b| url_class(b) & mask != 0)
            .count()
    })
}

/// [`validate_path`] for a path of plain bytes: no escapes to decode, nothing outside ASCII.
fn validate_plain_path(path: &str) -> Result<(), ResourceRejection> {
    let mut segments = split_byte(path, b'/').peekable();
    while let Some(segment) = segments.next() {
        if segment.is_empty() && segments.peek().is_some() {
            return Err(ResourceRejection::EmptySegment { path: quote(path) });
        }
        check_segment(segment)
            .map_err(|problem| ResourceRejection::from_segment(problem, segment, false))?;
    }
    Ok(())
}

/// Every path rule, segment by segment: the escapes ([`percent::validate`]), then on the decoded
/// text double encoding and [`check_segment`] (NFKC, dot segments, trimmable dots and spaces).
fn validate_path(path: &str) -> Result<(), ResourceRejection> {
    let mut segments = path.split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        if segment.is_empty() && !last {
            return Err(ResourceRejection::EmptySegment { path: quote(path) });
        }
        let decoded = percent::validate(segment, true, false)
            .map_err(|p| ResourceRejection::from_decode(p, ResourcePart::Path, segment))?;
        let escaped = matches!(decoded, Cow::Owned(_));
        if escaped {
            // Only an escape decodes to `%`: text without one holds no second escape.
            if let Some(escape) = percent::inner_escape(&decoded) {
                return Err(ResourceRejection::DoubleEncoding {
                    part: ResourcePart::Path,
                    text: quote(segment),
                    escape: quote(escape),
                });
            }
        }
        check_segment(&decoded)
            .map_err(|problem| ResourceRejection::from_segment(problem, segment, escaped))?;
    }
    Ok(())
}

/// `;` is refused outright; each `&`-separated name and value must decode; a name must not
/// decode to another escape. (A value may: it is undecidable only when a constraint reads it,
/// see [`RequestResource::query`].)
fn validate_query(query: &str) -> Result<(), ResourceRejection> {
    check_query_separators(query)?;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = percent::validate(key, false, true)
            .map_err(|p| ResourceRejection::from_decode(p, ResourcePart::Query, key))?;
        if let Some(escape) = percent::inner_escape(&name) {
            return Err(ResourceRejection::DoubleEncoding {
                part: ResourcePart::Query,
                text: quote(key),
                escape: quote(escape),
            });
        }
        percent::validate(value, false, true)
            .map_err(|p| ResourceRejection::from_decode(p, ResourcePart::Query, value))?;
    }
    Ok(())
}

/// Refuses a raw `;` in a query: servers that split on it as on `&` read parameters we do not.
fn check_query_separators(query: &str) -> Result<(), ResourceRejection> {
    if find_byte(query, b';').is_some() {
        return Err(ResourceRejection::QuerySemicolon {
            query: quote(query),
        });
    }
    Ok(())
}

/// The `{name}` bindings of one match, reused across matches so the hot path does not allocate.
///
/// Slot `i` holds the percent-decoded segment bound to `pattern.bindings()[i]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bindings<'a> {
    /// The first [`INLINE_BINDINGS`] slots, kept inline so a match allocates nothing.
    inline: [Option<Cow<'a, str>>; INLINE_BINDINGS],
    /// Slots past the inline ones (templates with many bindings are rare).
    spill: Vec<Option<Cow<'a, str>>>,
    /// Slots of the last match.
    len: usize,
}

/// How many bindings a match holds without allocating.
pub const INLINE_BINDINGS: usize = 8;

impl<'a> Bindings<'a> {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, slot: usize) -> Option<&Option<Cow<'a, str>>> {
        if slot >= self.len {
            return None;
        }
        match slot.checked_sub(INLINE_BINDINGS) {
            None => self.inline.get(slot),
            Some(extra) => self.spill.get(extra),
        }
    }

    /// The value bound in `slot` by the last successful match.
    pub fn get(&self, slot: usize) -> Option<&str> {
        self.slot(slot).and_then(|s| s.as_deref())
    }

    /// The number of slots of the last match (bound or not).
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no slots.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every value, keeping the capacity.
    pub fn clear(&mut self) {
        self.reset(0);
    }

    #[inline]
    fn reset(&mut self, slots: usize) {
        // INVARIANT (bindings-tail): slots at or past `len` are `None` (`set` writes only below
        // `len`), so only the last match's slots need clearing.
        for place in self.inline.iter_mut().take(self.len) {
            *place = None;
        }
        self.spill.clear();
        if slots > INLINE_BINDINGS {
            self.spill.resize(slots - INLINE_BINDINGS, None);
        }
        self.len = slots;
    }

    fn set(&mut self, slot: usize, value: Cow<'a, str>) -> bool {
        if slot >= self.len {
            return false;
        }
        let place = match slot.checked_sub(INLINE_BINDINGS) {
            None => self.inline.get_mut(slot),
            Some(extra) => self.spill.get_mut(extra),
        };
        match place {
            Some(place) => {
                *place = Some(value);
                true
            }
            None => false,
        }
    }
}

impl ResourcePattern {
    /// True when `request` matches this template; on a match `bindings` holds the `{name}`
    /// values (slot `i` = `self.bindings()[i]`), otherwise it is left empty.
    pub fn matches<'a>(&self, request: &RequestResource<'a>, bindings: &mut Bindings<'a>) -> bool {
        if self.kind() == request.kind && self.origin_matches(request) {
            self.match_path(request.path, request.plain, bindings)
        } else {
            bindings.clear();
            false
        }
    }

    /// Matches `path` against the template's segments, leaving `bindings` as
    /// [`ResourcePattern::matches`] documents: this template's slots on a match, empty otherwise.
    fn match_path<'a>(&self, path: &'a str, plain: bool, bindings: &mut Bindings<'a>) -> bool {
        bindings.reset(self.bindings().len());
        let matched = self.path_matches(path, plain, bindings);
        if !matched {
            bindings.clear();
        }
        matched
    }

    /// [`RequestResource::parse`] and then [`ResourcePattern::matches`], in one pass, for a plain
    /// http request that starts with this template's plain origin (`scheme://host/`, see
    /// `plain_origin`): `Some` with the resource `parse` gives and whether `matches` holds
    /// (`bindings` as it leaves them), without scanning the origin or the template's literal
    /// prefix byte by byte.
    /// `None` for every other request, which the caller parses and matches the general way.
    pub fn parse_and_match<'a>(
        &self,
        text: &'a str,
        bindings: &mut Bindings<'a>,
    ) -> Option<(RequestResource<'a>, bool)> {
        let head = self.plain_origin()?;
        let origin = self.origin()?;
        // `bytes_eq`, not `starts_with`: a `memcmp` call costs more than these short compares.
        let starts = |text: &str, prefix: &str| {
            text.as_bytes()
                .get(..prefix.len())
                .is_some_and(|start| bytes_eq(start, prefix.as_bytes()))
        };
        if !starts(text, head) {
            return None;
        }
        // `head` is `scheme://host/`, all ASCII, so both cuts fall on character boundaries.
        let host = text.get(origin.scheme.name().len() + 3..head.len() - 1)?;
        let rest = text.get(head.len()..)?;
        let (prefix, _) = self.plain_prefix();
        let prefix_matched = starts(rest, prefix);
        let checked = if prefix_matched { prefix.len() } else { 0 };
        let Some((path, query, matched)) =
            self.scan_and_match_path(rest, checked, prefix_matched, bindings)
        else {
            bindings.clear();
            return None;
        };
        let resource = RequestResource {
            text,
            kind: ResourceKind::Http,
            origin: Some(RequestOrigin {
                scheme: origin.scheme,
                host,
                port: origin.port,
            }),
            path,
            query,
            plain: true,
        };
        Some((resource, matched))
    }

    /// The plain path and query of `rest` (the request after `scheme://host/`, plain from
    /// `checked` on, as [`RequestResource::plain_path_and_query`] reads it), and whether the
    /// path matches this template's ([`ResourcePattern::match_path`] on a plain path, kind and
    /// origin being this template's by construction), in one scan: each segment is checked
    /// and matched as it is found. `prefix_matched`: `rest` starts with the template's plain
    /// prefix, which `checked` then covers. `None` where the general parser must decide (the
    /// caller clears `bindings`).
    #[inline(always)]
    fn scan_and_match_path<'a>(
        &self,
        rest: &'a str,
        checked: usize,
        prefix_matched: bool,
        bindings: &mut Bindings<'a>,
    ) -> Option<(&'a str, Option<&'a str>, bool)> {
        let (_, covered) = self.plain_prefix();
        let patterns = self.segments();
        bindings.reset(self.bindings().len());
        // A template with a literal prefix the request does not start with cannot match; the
        // scan still checks the whole path, which decides whether the one pass may answer.
        let mut matched = prefix_matched;
        let (mut next_pattern, mut extra) = (covered, 0usize);
        let has_rest = self.has_rest();
        let (path, query) = RequestResource::scan_plain_path(rest, checked, |segment| {
            if !matched {
                return;
            }
            matched = match patterns.get(next_pattern) {
                Some(pattern) => {
                    next_pattern += 1;
                    segment_matches(pattern, segment, true, bindings)
                }
                // Past the template's segments only `**` goes on: one or more segments, none
                // empty (a trailing slash never matches it).
                None => {
                    extra += 1;
                    has_rest && !segment.is_empty()
                }
            };
        })?;
        let matched = matched && next_pattern == patterns.len() && (!has_rest || extra > 0);
        if !matched {
            bindings.clear();
        }
        Some((path, query, matched))
    }

    fn origin_matches(&self, request: &RequestResource<'_>) -> bool {
        match (self.origin(), request.origin) {
            (None, None) => true,
            (Some(pattern), Some(origin)) => {
                pattern.scheme == origin.scheme
                    && pattern.port == origin.port
                    && host_matches(&pattern.host, origin.host)
            }
            _ => false,
        }
    }

    fn path_matches<'a>(&self, path: &'a str, plain: bool, bindings: &mut Bindings<'a>) -> bool {
        // A plain request's leading literal segments compare as one block of text.
        let (prefix, covered) = self.plain_prefix();
        let (patterns, path) = if plain && covered > 0 {
            let head = path.as_bytes().get(..prefix.len());
            match (self.segments().get(covered..), path.get(prefix.len()..)) {
                (Some(patterns), Some(rest))
                    if head.is_some_and(|head| bytes_eq(head, prefix.as_bytes())) =>
                {
                    (patterns, rest)
                }
                _ => return false,
            }
        } else {
            (self.segments(), path)
        };
        let mut segments = split_byte(path, b'/');
        for pattern in patterns {
            let Some(segment) = segments.next() else {
                return false;
            };
            if !segment_matches(pattern, segment, plain, bindings) {
                return false;
            }
        }
        if self.has_rest() {
            // `**`: one or more further segments, none empty (a trailing slash never matches it).
            let mut rest = segments.peekable();
            rest.peek().is_some() && rest.all(|s| !s.is_empty())
        } else {
            segments.next().is_none()
        }
    }
}

/// Whether one request path segment matches one template segment, binding it for `{name}`
/// (`plain`: the request has no escapes, so its segments are their own decoding).
#[inline(always)]
fn segment_matches<'a>(
    pattern: &SegmentPattern,
    segment: &'a str,
    plain: bool,
    bindings: &mut Bindings<'a>,
) -> bool {
    match pattern {
        SegmentPattern::Literal(literal) if plain => {
            bytes_eq(segment.as_bytes(), literal.as_bytes())
        }
        SegmentPattern::Literal(literal) => percent::decoded_eq(segment, false, literal),
        SegmentPattern::Any => !segment.is_empty(),
        SegmentPattern::Bind(slot) if plain => {
            !segment.is_empty() && bindings.set(*slot, Cow::Borrowed(segment))
        }
        SegmentPattern::Bind(slot) => {
            !segment.is_empty()
                && percent::decode(segment, false).is_some_and(|value| bindings.set(*slot, value))
        }
    }
}

fn host_matches(pattern: &HostPattern, host: &str) -> bool {
    match pattern {
        // The pattern is lower-cased; a lower-case request host is equal byte for byte.
        HostPattern::Exact(exact) => {
            bytes_eq(exact.as_bytes(), host.as_bytes()) || exact.eq_ignore_ascii_case(host)
        }
        HostPattern::Suffix(suffix) => {
            // The suffix starts with `.`, and request hosts have no empty labels, so a longer
            // host ending in it has at least one label before it: the apex never matches.
            host.len() > suffix.len()
                && host
                    .get(host.len().saturating_sub(suffix.len())..)
                    .is_some_and(|tail| tail.eq_ignore_ascii_case(suffix))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn general(text: &str) -> Result<RequestResource<'_>, ResourceRejection> {
        RequestResource::parse_general(text)
    }

    #[test]
    fn the_fast_path_takes_plain_http_resources_and_leaves_the_rest() {
        for text in [
            "https://calendar.example.com/v3/calendars/primary/events",
            "http://h:8080/a/b/?q=1&r",
            "https://h",
            "https://h/",
            "https://h?x",
            "https://a_b-c.d/;x/..a/.b",
            "https://h/a.b/.c/a;b.c/;/a;.x",
            "https://h/v1.0/x?a.=.&b=",
        ] {
            let fast = RequestResource::parse_plain_http(text);
            assert!(fast.is_some(), "{text}");
            assert_eq!(fast.map(Ok), Some(general(text)), "{text}");
        }
        for text in [
            "https://h//a",
            "https://h/./a",
            "https://h/a/..",
            "https://h/a/..;x",
            "https://h:0/",
            "https://h:/",
            "https://h:1:2/",
            "https://.h/",
            "https://h./",
            "https://h..i/",
            "https://u@h/",
            "https://h/a%2Fb",
            "https://h/a#f",
            "https://[::1]/",
            "https:///a",
            "HTTPS://h/",
            "db:crm/x",
            // Trailing dots, also before `;parameters`, and segments of dots.
            "https://h/a.",
            "https://h/a./b",
            "https://h/...",
            "https://h/a.;x",
            "https://h/...;x/b",
            // `;` in the query.
            "https://h/a?x;y",
            "https://h?;",
            "https://h/a?x=1;role=admin",
        ] {
            assert!(RequestResource::parse_plain_http(text).is_none(), "{text}");
        }
    }

    /// `parse_and_match` against `parse` then `matches`: the same resource, verdict and
    /// bindings whenever it answers.
    fn assert_one_pass_agrees(template: &str, text: &str) -> Option<bool> {
        let pattern = ResourcePattern::compile(ResourceKind::Http, template).unwrap();
        let mut one_pass = Bindings::new();
        let answer = pattern.parse_and_match(text, &mut one_pass)?;
        let mut two_pass = Bindings::new();
        let parsed = RequestResource::parse(text);
        assert_eq!(Ok(answer.0), parsed, "{text} ~ {template}");
        let matched = parsed.is_ok_and(|request| pattern.matches(&request, &mut two_pass));
        assert_eq!(answer.1, matched, "{text} ~ {template}");
        assert_eq!(one_pass.len(), two_pass.len(), "{text} ~ {template}");
        for slot in 0..pattern.bindings().len() {
            assert_eq!(
                one_pass.get(slot),
                two_pass.get(slot),
                "{text} ~ {template}"
            );
        }
        Some(answer.1)
    }

    #[test]
    fn one_pass_matching_takes_plain_requests_of_the_templates_origin_only() {
        let template = "https://calendar.example.com/v3/calendars/{calendar}/events";
        for (text, matched) in [
            (
                "https://calendar.example.com/v3/calendars/primary/events",
                true,
            ),
            (
                "https://calendar.example.com/v3/calendars/primary/events?x=1",
                true,
            ),
            (
                "https://calendar.example.com/v3/calendars/primary/events/",
                false,
            ),
            ("https://calendar.example.com/v3/calendars/primary", false),
            (
                "https://calendar.example.com/v3/other/primary/events",
                false,
            ),
            ("https://calendar.example.com/", false),
        ] {
            assert_eq!(
                assert_one_pass_agrees(template, text),
                Some(matched),
                "{text}"
            );
        }
        // Everything else is left to `parse` and `matches`: another spelling of the origin, an
        // escape, a rejected path, another origin.
        for text in [
            "https://CALENDAR.example.com/v3/calendars/primary/events",
            "https://calendar.example.com:443/v3/calendars/primary/events",
            "http://calendar.example.com/v3/calendars/primary/events",
            "https://calendar.example.com.evil.com/v3/calendars/primary/events",
            "https://calendar.example.com",
            "https://calendar.example.com/v3/calendars/pri%6Dary/events",
            "https://calendar.example.com/v3/calendars/../events",
            "https://calendar.example.com/v3/calendars//events",
            "https://calendar.example.com/v3/calendars/primary/events#f",
        ] {
            assert_eq!(assert_one_pass_agrees(template, text), None, "{text}");
        }
        // Templates whose origin a plain request may spell otherwise never take the one pass.
        for template in [
            "https://*.example.com/v3/{x}",
            "https://calendar.example.com:8443/v3/{x}",
            "https://[::1]/v3/{x}",
        ] {
            let pattern = ResourcePattern::compile(ResourceKind::Http, template).unwrap();
            assert_eq!(pattern.plain_origin(), None, "{template}");
        }
    }

    /// Every path of up to four segments from a small alphabet, against templates with
    /// wildcards, bindings, literal prefixes and trailing slashes: the one-pass scan matches each
    /// segment as it finds it, so the counts (too few, too many, `**` with none left) and empty
    /// segments are where it could differ from `parse` then `matches`.
    #[test]
    fn one_pass_matching_agrees_on_every_short_path() {
        let templates = [
            "https://api.example.com/v3/**",
            "https://api.example.com/{a}/**",
            "https://api.example.com/*/x",
            "https://api.example.com/v3/*",
            "https://api.example.com/v3/{a}/{b}",
            "https://api.example.com/v3/x/",
            "https://api.example.com/{a}",
            "https://api.example.com/",
            "https://api.example.com/*/**",
        ];
        let alphabet = ["v3", "x", "", "calendars"];
        // Every sequence of up to four segments (so also empty ones first, in the middle, last).
        let mut sequences: Vec<Vec<&str>> = vec![Vec::new()];
        let mut last: Vec<Vec<&str>> = vec![Vec::new()];
        for _ in 0..4 {
            last = last
                .iter()
                .flat_map(|sequence| {
                    alphabet.iter().map(move |segment| {
                        let mut longer = sequence.clone();
                        longer.push(*segment);
                        longer
                    })
                })
                .collect();
            sequences.extend(last.iter().cloned());
        }
        let paths: Vec<String> = sequences
            .iter()
            .map(|sequence| sequence.join("/"))
            .collect();
        let mut answered = 0;
        for template in templates {
            for path in &paths {
                for tail in ["", "/", "?q=1"] {
                    let text = format!("https://api.example.com/{path}{tail}");
                    answered += usize::from(assert_one_pass_agrees(template, &text).is_some());
                }
            }
        }
        // Most of these are plain requests of the templates' origin, which the one pass answers.
        assert!(answered > 2_000, "{answered}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Whatever the fast path accepts, the general parser accepts with the same result.
        #[test]
        fn the_fast_path_agrees_with_the_general_parser(
            scheme in prop::sample::select(vec!["http://", "https://"]),
            rest in r"[a-zA-Z0-9._~:/?&=;%@# \\\[\]-]{0,24}",
        ) {
            let text = format!("{scheme}{rest}");
            if let Some(fast) = RequestResource::parse_plain_http(&text) {
                prop_assert_eq!(Ok(fast), general(&text));
            }
        }

        /// A plain request matches a template exactly as the general (percent-decoding)
        /// segment comparison says: the literal-prefix block, the byte-for-byte literals and
        /// the lower-case host shortcut change nothing.
        #[test]
        fn plain_matching_agrees_with_the_decoding_comparison(
            template in prop::sample::select(vec![
                "https://api.example.com/v3/calendars/{calendar}/events",
                "https://api.example.com/v3/calendars/*",
                "https://api.example.com/v3/**",
                "https://api.example.com/v3/calendars",
                "https://api.example.com/v3/calendars/",
                "https://api.example.com/{a}/calendars/{b}",
                "https://api.example.com/a%20b/c/{x}",
                "https://*.example.com/v3/{x}/events",
                "https://api.example.com/",
            ]),
            host in prop::sample::select(vec!["api.example.com", "API.Example.COM", "x.example.com", "example.com"]),
            segments in prop::collection::vec(
                prop::sample::select(vec!["v3", "V3", "calendars", "primary", "events", "", "a", "v3x", "c", "calendar"]),
                0..5,
            ),
            near in prop::option::of(prop::sample::select(vec![
                "v3", "v3/", "v3/calendars", "v3/calendars/", "v3/calendars/primary",
                "v3/calendars/primary/events", "v3/calendars/primary/events/", "v3/calendarsx",
                "v3/calendars/x/y", "v3/x/events", "x/calendars/y", "x/calendars/y/z", "a%20b/c/d",
                "a b/c/d",
            ])),
            slash in any::<bool>(),
        ) {
            let pattern = ResourcePattern::compile(ResourceKind::Http, template).unwrap();
            let mut text = format!("https://{host}");
            if let Some(near) = near {
                // Paths next to the templates' own, where an off-by-one would show.
                text.push('/');
                text.push_str(near);
            } else {
                if slash || !segments.is_empty() {
                    text.push('/');
                }
                text.push_str(&segments.join("/"));
            }
            // Requests with escapes always take the decoding comparison.
            let Ok(request) = RequestResource::parse(&text) else {
                return Ok(());
            };
            if request.plain {
                let general = RequestResource { plain: false, ..request };
                let (mut fast, mut slow) = (Bindings::new(), Bindings::new());
                let matched = pattern.matches(&request, &mut fast);
                prop_assert_eq!(matched, pattern.matches(&general, &mut slow), "{} ~ {}", text, template);
                for slot in 0..pattern.bindings().len() {
                    prop_assert_eq!(fast.get(slot), slow.get(slot));
                }
            }
        }

        /// The same on URL-shaped input, where the fast path usually answers: hosts with odd
        /// labels, ports, dot and empty segments, `;` parameters, queries, and stray bytes.
        #[test]
        fn the_fast_path_agrees_with_the_general_parser_on_url_shapes(
            scheme in prop::sample::select(vec!["http://", "https://", "HTTPS://"]),
            labels in prop::collection::vec(r"[a-zA-Z0-9_-]{0,4}|\.|[@%:\[\]]", 0..4),
            port in prop::option::of(r"[0-9]{0,6}|:|x"),
            segments in prop::collection::vec(
                prop::sample::select(vec![
                    "", ".", "..", ".;x", "..;", "a", "v3", "a.b", ".a", "x;y", "%2e", "%41",
                    "a b", "a?b", "a#b", "é", "~!$&'()*+,;=:", "\\",
                    // Trailing dots and spaces, segments of dots, what NFKC changes, double
                    // encoding: all for the general parser, which refuses them.
                    "...", "a.", "a.;x", "a;x.", ";.", ".. ", "..%20", "%20.", "a%20", "%20a",
                    "%EF%BC%8E", "%ef%bc%8f%ef%bc%8e", "%EF%BC%BC", "\u{FF0E}", "%252e", "%25",
                ]),
                0..5,
            ),
            slash in any::<bool>(),
            query in prop::option::of(r"[a-z0-9=&;%/?#.\[\]]{0,8}"),
        ) {
            let mut text = format!("{scheme}{}", labels.join("."));
            if let Some(port) = port {
                text.push(':');
                text.push_str(&port);
            }
            if slash || !segments.is_empty() {
                text.push('/');
            }
            text.push_str(&segments.join("/"));
            if let Some(query) = query {
                text.push('?');
                text.push_str(&query);
            }
            if let Some(fast) = RequestResource::parse_plain_http(&text) {
                prop_assert_eq!(Ok(fast), general(&text), "{}", text);
            }
        }
        /// One-pass matching agrees with `parse` then `matches` on requests near each template's
        /// origin and prefix: odd hosts and ports, dot and empty segments, queries, escapes.
        #[test]
        fn one_pass_matching_agrees_with_parse_then_match(
            template in prop::sample::select(vec![
                "https://api.example.com/v3/calendars/{calendar}/events",
                "https://api.example.com/v3/calendars/*",
                "https://api.example.com/v3/**",
                "https://api.example.com/v3/calendars",
                "https://api.example.com/v3/calendars/",
                "https://api.example.com/{a}/calendars/{b}",
                "https://api.example.com/a%20b/c/{x}",
                "https://api.example.com/",
                "https://api.example.com",
                "http://api.example.com:80/v3/{x}",
                "https://api.example.com:443/..a/{x}",
            ]),
            origin in prop::sample::select(vec![
                "https://api.example.com", "https://API.example.com", "http://api.example.com",
                "https://api.example.com:443", "https://api.example.co", "https://api.example.com.",
                "https://api.example.comx", "http://api.example.com:80",
            ]),
            segments in prop::collection::vec(
                prop::sample::select(vec![
                    "v3", "calendars", "primary", "events", "", ".", "..", ".;x", "..a", "a",
                    "%41", "a b", "calendarsx", "é", "c", "...", "a.", "calendars.", "a.;x",
                    "..%20", "%EF%BC%8E", "%252e", "\u{FF0F}",
                ]),
                0..5,
            ),
            slash in any::<bool>(),
            query in prop::option::of(r"[a-z0-9=&;%/?#]{0,6}"),
        ) {
            let mut text = origin.to_owned();
            if slash || !segments.is_empty() {
                text.push('/');
            }
            text.push_str(&segments.join("/"));
            if let Some(query) = query {
                text.push('?');
                text.push_str(&query);
            }
            assert_one_pass_agrees(template, &text);
        }
    }
}
