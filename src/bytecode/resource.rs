//! Compiled resource templates (SPEC §2.2).
//!
//! A [`ResourcePattern`] is what a capability's `resource KIND "LOCATOR"` compiles to: the kind,
//! for `http` the origin (scheme, host or `*.` host suffix, effective port), and the path as a
//! list of segment patterns — a decoded literal, a `{name}` binding, `*` (one segment) — optionally
//! ending in `**` (one or more segments). [`ResourcePattern::compile`] rejects every template that
//! could never match or would match something the author did not mean, with a
//! [`ResourcePatternError`].
//!
//! Matching a request against a pattern lives with the request parser in `vm::resource`; the
//! percent-decoding both sides share is in `percent`.
//!
//! `ResourceKind` comes from the syntax layer; it is re-exported here so the VM can name it
//! without depending on `syntax`.

use std::fmt;

use thiserror::Error;

pub use crate::resource_kind::ResourceKind;

/// A template that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Error, miette::Diagnostic)]
#[error("{message}")]
pub struct ResourcePatternError {
    /// What is wrong, one lowercase line.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[help]
    pub help: Option<String>,
}

impl ResourcePatternError {
    fn new(message: impl Into<String>) -> Self {
        ResourcePatternError {
            message: message.into(),
            help: None,
        }
    }

    fn with_help(message: impl Into<String>, help: impl Into<String>) -> Self {
        ResourcePatternError {
            message: message.into(),
            help: Some(help.into()),
        }
    }
}

/// `http` or `https`: different schemes never match each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `http://`, default port 80.
    Http,
    /// `https://`, default port 443.
    Https,
}

impl Scheme {
    /// The scheme as written before `://`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL without an explicit port uses.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// Splits a leading `http://` or `https://` (lower case only) off `text`.
    pub fn strip_prefix(text: &str) -> Option<(Scheme, &str)> {
        if let Some(rest) = text.strip_prefix("https://") {
            Some((Scheme::Https, rest))
        } else {
            text.strip_prefix("http://")
                .map(|rest| (Scheme::Http, rest))
        }
    }
}

/// The host part of an `http` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPattern {
    /// One host, lower-cased.
    Exact(String),
    /// `*.example.com`, stored as `.example.com`: one or more labels before it, never the apex.
    Suffix(String),
}

/// The origin of an `http` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OriginPattern {
    pub(crate) scheme: Scheme,
    pub(crate) host: HostPattern,
    /// The effective port: the scheme's default when none was written.
    pub(crate) port: u16,
}

/// One segment of a template path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentPattern {
    /// Matches a request segment whose percent-decoded text is exactly this. The empty literal
    /// only ever appears last (a template ending in `/`).
    Literal(String),
    /// `{name}`: any one non-empty segment, bound to the slot with this index.
    Bind(usize),
    /// `*`: any one non-empty segment.
    Any,
}

/// A compiled `resource KIND "LOCATOR"` template.
///
/// INVARIANT (pattern-shape): `segments` is non-empty unless `rest` is set; only the last segment
/// may be the empty literal, and never before `**`; every `Bind(i)` has `i < bindings.len()` and each slot is used exactly once; `origin`
/// is `Some` exactly when `kind` is `Http`. Upheld by [`ResourcePattern::compile`], the only
/// constructor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    kind: ResourceKind,
    locator: String,
    origin: Option<OriginPattern>,
    segments: Vec<SegmentPattern>,
    /// The template ends in `**`: one or more further non-empty segments.
    rest: bool,
    bindings: Vec<String>,
    /// The leading literal segments a plain request's path must start with, each followed by
    /// its `/` (derived from `segments`; see [`plain_prefix`]).
    plain_prefix: String,
    /// How many segments [`ResourcePattern::plain_prefix`] stands for.
    prefix_segments: usize,
    /// `scheme://host/` for an http template whose host is exact, plain (lower-case labels of
    /// `[a-z0-9_-]` between single dots) and whose port is the scheme's default: the text a plain
    /// request of this origin starts with (see [`plain_origin`]).
    plain_origin: Option<String>,
}

impl ResourcePattern {
    /// Compiles a declaration. For `http`, `locator` is the whole URL template; for the other
    /// kinds it is the part after `KIND:`.
    pub fn compile(
        kind: ResourceKind,
        locator: &str,
    ) -> Result<ResourcePattern, ResourcePatternError> {
        check_characters(locator)?;
        let (origin, path) = if kind == ResourceKind::Http {
            let (origin, path) = compile_origin(locator)?;
            (Some(origin), path)
        } else {
            (None, compile_locator_prefix(kind, locator)?)
        };
        let (segments, rest, bindings) = compile_path(path)?;
        let (plain_prefix, prefix_segments) = plain_prefix(&segments, rest);
        let plain_origin = origin.as_ref().and_then(plain_origin);
        // INVARIANT (pattern-shape): origin iff http; compile_path upholds the rest.
        Ok(ResourcePattern {
            kind,
            locator: locator.to_owned(),
            origin,
            segments,
            rest,
            bindings,
            plain_prefix,
            prefix_segments,
            plain_origin,
        })
    }

    /// The resource kind.
    pub fn kind(&self) -> ResourceKind {
        self.kind
    }

    /// The locator exactly as written.
    pub fn locator(&self) -> &str {
        &self.locator
    }

    /// The binding names in template order; the slot index of a binding is its position.
    pub fn bindings(&self) -> &[String] {
        &self.bindings
    }

    /// True when the template has a `*` or `**` segment or a `*.` wildcard host.
    #[cfg(any(test, feature = "internals"))]
    pub fn has_wildcard(&self) -> bool {
        self.rest
            || self.segments.contains(&SegmentPattern::Any)
            || matches!(
                self.origin,
                Some(OriginPattern {
                    host: HostPattern::Suffix(_),
                    ..
                })
            )
    }

    pub(crate) fn origin(&self) -> Option<&OriginPattern> {
        self.origin.as_ref()
    }

    pub(crate) fn segments(&self) -> &[SegmentPattern] {
        &self.segments
    }

    pub(crate) fn has_rest(&self) -> bool {
        self.rest
    }

    /// The text a plain request's path must start with, and the segments it stands for.
    pub(crate) fn plain_prefix(&self) -> (&str, usize) {
        (&self.plain_prefix, self.prefix_segments)
    }

    /// `scheme://host/` when a request starting with exactly this text has this template's
    /// origin (see [`plain_origin`]).
    pub(crate) fn plain_origin(&self) -> Option<&str> {
        self.plain_origin.as_deref()
    }
}

/// `scheme://host/` for an origin that a plain request spells only that way: an exact host of
/// lower-case labels (`[a-z0-9_-]`, none empty, single dots) on the scheme's default port. A
/// request that starts with this text has a host the plain parser accepts as it is, equal byte for
/// byte to the template's, and no port (so the default one); any other origin is `None`.
fn plain_origin(origin: &OriginPattern) -> Option<String> {
    let HostPattern::Exact(host) = &origin.host else {
        return None;
    };
    let plain_label = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    if origin.port != origin.scheme.default_port() || !host.split('.').all(plain_label) {
        return None;
    }
    Some(format!("{}://{host}/", origin.scheme.name()))
}

/// The leading literal segments of a template joined as `a/b/`, and how many they are: each one
/// non-empty, accepted by [`check_segment`], and made only of bytes a plain request segment can
/// hold (so it never holds a `/`, and a plain request's path may hold it as it is), and followed
/// by another segment or `**` (the last segment is left to the segment loop, which
/// checks that nothing follows it). A plain request matches those segments exactly when its path
/// starts with this text.
fn plain_prefix(segments: &[SegmentPattern], rest: bool) -> (String, usize) {
    let eligible = if rest {
        segments.len()
    } else {
        segments.len().saturating_sub(1)
    };
    let mut prefix = String::new();
    let mut count = 0;
    for segment in segments.iter().take(eligible) {
        match segment {
            SegmentPattern::Literal(text)
                if !text.is_empty()
                    && check_segment(text).is_ok()
                    && text.bytes().all(|b| {
                        b != b'/' && b != b'?' && PLAIN.get(usize::from(b)).copied() == Some(true)
                    }) =>
            {
                prefix.push_str(text);
                prefix.push('/');
                count += 1;
            }
            _ => break,
        }
    }
    (prefix, count)
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ResourceKind::Http => f.write_str(&self.locator),
            kind => write!(f, "{}:{}", kind.name(), self.locator),
        }
    }
}

/// Rejects whitespace, control characters and backslashes anywhere in a template.
fn check_characters(locator: &str) -> Result<(), ResourcePatternError> {
    if let Some(c) = locator
        .chars()
        .find(|c| c.is_control() || c.is_whitespace())
    {
        return Err(ResourcePatternError::new(format!(
            "resource template contains a control or whitespace character (U+{:04X})",
            u32::from(c)
        )));
    }
    if locator.contains('\\') {
        return Err(ResourcePatternError::with_help(
            "resource template contains a `\\`",
            "separate path segments with `/`",
        ));
    }
    if let Some(at) = locator.find('#') {
        return Err(ResourcePatternError::new(format!(
            "resource template contains a fragment `{}`",
            quote(locator.get(at..).unwrap_or("#"))
        )));
    }
    if let Some(at) = locator.find('?') {
        return Err(ResourcePatternError::with_help(
            format!(
                "resource template contains a query `{}`",
                quote(locator.get(at..).unwrap_or("?"))
            ),
            "query parameters are not part of matching; constrain them with `resource.query.NAME`",
        ));
    }
    Ok(())
}

/// Rejects a non-http locator that repeats its `KIND:` prefix, and an empty one.
fn compile_locator_prefix(kind: ResourceKind, locator: &str) -> Result<&str, ResourcePatternError> {
    if locator.is_empty() {
        return Err(ResourcePatternError::new(format!(
            "`{}` resource template is empty",
            kind.name()
        )));
    }
    if let Some(rest) = locator
        .strip_prefix(kind.name())
        .and_then(|r| r.strip_prefix(':'))
    {
        return Err(ResourcePatternError::with_help(
            format!(
                "resource template `{}` repeats the kind prefix",
                quote(locator)
            ),
            format!("write `resource {} \"{}\"`", kind.name(), rest),
        ));
    }
    Ok(locator)
}

/// Parses `scheme://host[:port]` off an http template; returns the origin and the path after the
/// leading `/` (`""` when the template has no path or is just `/`).
fn compile_origin(locator: &str) -> Result<(OriginPattern, &str), ResourcePatternError> {
    let Some((scheme, rest)) = Scheme::strip_prefix(locator) else {
        return Err(ResourcePatternError::with_help(
            format!(
                "http resource template `{}` does not start with `https://` or `http://`",
                quote(locator)
            ),
            "write the whole URL, e.g. `https://api.example.com/v1/items`",
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(slash) => (
            rest.get(..slash).unwrap_or(""),
            rest.get(slash.saturating_add(1)..).unwrap_or(""),
        ),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(ResourcePatternError::new(format!(
            "resource template `{}` contains userinfo",
            quote(locator)
        )));
    }
    let (host_text, port_text) = split_port(authority);
    let port = match port_text {
        None => scheme.default_port(),
        Some(p) => parse_port(p).ok_or_else(|| {
            ResourcePatternError::new(format!("port `{}` is not a number in 1..=65535", quote(p)))
        })?,
    };
    let host = compile_host(host_text)?;
    Ok((OriginPattern { scheme, host, port }, path))
}

/// Splits `host[:port]`, keeping a bracketed IPv6 literal whole.
pub(crate) fn split_port(authority: &str) -> (&str, Option<&str>) {
    let host_end = if authority.starts_with('[') {
        authority
            .find(']')
            .map_or(authority.len(), |i| i.saturating_add(1))
    } else {
        find_byte(authority, b':').unwrap_or(authority.len())
    };
    let host = authority.get(..host_end).unwrap_or(authority);
    let after = authority.get(host_end..).unwrap_or("");
    match after.strip_prefix(':') {
        Some(port) => (host, Some(port)),
        // Anything else after a `]` is kept in the host so host validation rejects it.
        None if after.is_empty() => (host, None),
        None => (authority, None),
    }
}

/// A port: one to five ASCII digits, value in `1..=65535`.
pub(crate) fn parse_port(text: &str) -> Option<u16> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u16>().ok().filter(|p| *p != 0)
}

/// Why a host is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostProblem {
    /// No host at all.
    Empty,
    /// A character outside ASCII (IDNs must be written in punycode).
    NonAscii,
    /// Anything else: a bad character, an empty label, a malformed IPv6 literal.
    Invalid,
}

/// Checks a request or template host: DNS-style labels of `[A-Za-z0-9_-]` separated by single
/// dots (no leading, trailing or doubled dot), or a bracketed IPv6 literal of hex digits, `:` and
/// `.`. Nothing is normalised beyond ASCII case.
pub(crate) fn check_host(host: &str) -> Result<(), HostProblem> {
    if host.is_empty() {
        return Err(HostProblem::Empty);
    }
    if !host.is_ascii() {
        return Err(HostProblem::NonAscii);
    }
    if let Some(inner) = host.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or(HostProblem::Invalid)?;
        let ok = inner.contains(':')
            && inner
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
        return if ok {
            Ok(())
        } else {
            Err(HostProblem::Invalid)
        };
    }
    // Labels of `[A-Za-z0-9_-]`, separated by single dots, none empty: one pass over the bytes.
    let mut label_len = 0usize;
    for b in host.bytes() {
        match HOST_BYTES
            .get(usize::from(b))
            .copied()
            .unwrap_or(HostByte::Other)
        {
            HostByte::Label => label_len += 1,
            HostByte::Dot if label_len > 0 => label_len = 0,
            HostByte::Dot | HostByte::Other => return Err(HostProblem::Invalid),
        }
    }
    if label_len == 0 {
        Err(HostProblem::Invalid)
    } else {
        Ok(())
    }
}

/// What a byte is in a host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostByte {
    /// `[A-Za-z0-9_-]`.
    Label,
    /// `.`.
    Dot,
    /// Anything else.
    Other,
}

/// Bytes that no character-level deny rule looks for: ASCII letters and digits and
/// `-._~!$&'()*+,;=:/?`. A request made only of them is *plain* (the request parser's fast
/// path): no escape to decode and nothing outside ASCII, so of the rules only the structural ones
/// apply (empty and dot segments, a dot at a segment's end, `;` in the query). A template literal
/// made only of them, `/` and `?` aside, can be compared with a plain request byte for byte.
#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "const evaluation: `b < 256` bounds both the index and the cast, and a mistake fails the build"
)]
pub(crate) const PLAIN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'/'
                    | b'?'
            );
        b += 1;
    }
    table
};

/// [`HostByte`] of every byte, so the host check is one table load per byte.
#[expect(
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "const evaluation: `b < 256` bounds both the index and the cast, and a mistake fails the build"
)]
pub(crate) const HOST_BYTES: [HostByte; 256] = {
    let mut table = [HostByte::Other; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' {
            table[b] = HostByte::Label;
        } else if c == b'.' {
            table[b] = HostByte::Dot;
        }
        b += 1;
    }
    table
};

fn compile_host(host: &str) -> Result<HostPattern, ResourcePatternError> {
    let (wildcard, literal) = match host.strip_prefix("*.") {
        Some(suffix) => (true, suffix),
        None => (false, host),
    };
    if literal.contains('*') {
        return Err(ResourcePatternError::with_help(
            format!(
                "host `{}` has a `*` that is not a leading `*.` label",
                quote(host)
            ),
            "a wildcard host is written `*.example.com` and matches one or more labels before it",
        ));
    }
    match check_host(literal) {
        Ok(()) => {}
        Err(HostProblem::Empty) => {
            return Err(ResourcePatternError::new(
                "resource template has an empty host",
            ));
        }
        Err(HostProblem::NonAscii) => {
            return Err(ResourcePatternError::with_help(
                format!("host `{}` contains a non-ascii character", quote(host)),
                "write internationalised host names in punycode (`xn--...`)",
            ));
        }
        Err(HostProblem::Invalid) => {
            return Err(ResourcePatternError::new(format!(
                "host `{}` is not a valid host name",
                quote(host)
            )));
        }
    }
    let lower = literal.to_ascii_lowercase();
    if !wildcard {
        return Ok(HostPattern::Exact(lower));
    }
    if lower.starts_with('[') || !lower.contains('.') {
        return Err(ResourcePatternError::with_help(
            format!("wildcard host `{}` is too broad", quote(host)),
            "a wildcard host needs at least two labels after `*.`, e.g. `*.example.com`",
        ));
    }
    Ok(HostPattern::Suffix(format!(".{lower}")))
}

type CompiledPath = (Vec<SegmentPattern>, bool, Vec<String>);

/// Compiles the `/`-separated path (without its leading `/` for http).
fn compile_path(path: &str) -> Result<CompiledPath, ResourcePatternError> {
    let mut segments = Vec::new();
    let mut bindings: Vec<String> = Vec::new();
    let mut rest = false;
    let count = path.split('/').count();
    for (index, text) in path.split('/').enumerate() {
        let last = index.saturating_add(1) == count;
        if rest {
            return Err(ResourcePatternError::with_help(
                "`**` must be the last segment of a resource template",
                "use `*` to match exactly one segment in the middle of a path",
            ));
        }
        match text {
            "**" => rest = true,
            "*" => segments.push(SegmentPattern::Any),
            "" if last => segments.push(SegmentPattern::Literal(String::new())),
            "" => {
                return Err(ResourcePatternError::new(format!(
                    "resource template `{}` has an empty segment",
                    quote(path)
                )));
            }
            _ => segments.push(compile_segment(text, &mut bindings)?),
        }
    }
    Ok((segments, rest, bindings))
}

/// The most `{name}` bindings one template may have (defined, with why, in [`crate::limits`]).
pub use crate::limits::MAX_BINDINGS;

fn compile_segment(
    text: &str,
    bindings: &mut Vec<String>,
) -> Result<SegmentPattern, ResourcePatternError> {
    if let Some(name) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        if !is_binding_name(name) {
            return Err(ResourcePatternError::with_help(
                format!("binding `{}` is not a valid name", quote(text)),
                "a binding name starts with a letter or `_` and continues with letters, digits or `_`",
            ));
        }
        if name == "query" {
            return Err(ResourcePatternError::with_help(
                "binding `{query}` would shadow `resource.query`",
                "pick another name for this segment",
            ));
        }
        if bindings.len() >= MAX_BINDINGS {
            return Err(ResourcePatternError::with_help(
                format!("a resource template binds at most {MAX_BINDINGS} names"),
                "match the rest of the path with `*` or `**` instead of naming every segment",
            ));
        }
        // At most `MAX_BINDINGS` names to compare with, so this stays cheap.
        if bindings.iter().any(|b| b == name) {
            return Err(ResourcePatternError::new(format!(
                "binding `{{{name}}}` appears twice in one resource template"
            )));
        }
        let slot = bindings.len();
        bindings.push(name.to_owned());
        return Ok(SegmentPattern::Bind(slot));
    }
    if text.contains(['{', '}']) {
        return Err(ResourcePatternError::with_help(
            format!(
                "segment `{}` mixes a binding with literal text",
                quote(text)
            ),
            "a `{name}` binding must be a whole segment",
        ));
    }
    if text.contains('*') {
        return Err(ResourcePatternError::with_help(
            format!(
                "segment `{}` mixes a wildcard with literal text",
                quote(text)
            ),
            "`*` and `**` must be whole segments",
        ));
    }
    let decoded = percent::decode_segment(text).map_err(|problem| {
        ResourcePatternError::new(format!("segment `{}` {}", quote(text), problem.describe()))
    })?;
    if let Some(escape) = percent::inner_escape(&decoded) {
        return Err(ResourcePatternError::with_help(
            format!(
                "segment `{}` percent-decodes to another escape `{}`",
                quote(text),
                quote(escape)
            ),
            "requests with double-encoded segments are always denied, so this template could never match",
        ));
    }
    if let Err(problem) = check_segment(&decoded) {
        return Err(ResourcePatternError::with_help(
            format!("segment `{}` {}", quote(text), problem.describe()),
            "requests with such a segment are always denied, so this template could never match",
        ));
    }
    Ok(SegmentPattern::Literal(decoded))
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_binding_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `.` or `..`, also with a `;parameters` suffix (`..;x`), which some servers strip before
/// resolving the path.
pub(crate) fn is_dot_segment(decoded: &str) -> bool {
    // Most segments do not start with `.`: answer those without searching for `;`.
    if !decoded.starts_with('.') {
        return false;
    }
    let stem = decoded.split(';').next().unwrap_or(decoded);
    stem == "." || stem == ".."
}

/// Why a (percent-decoded) path segment is one a server may read as another segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegmentProblem {
    /// Not in Unicode normalization form NFKC (a fullwidth `．`, `／`, `＼`, a ligature, a
    /// superscript): a server that applies NFKC reads other characters. Holds the first character
    /// that is not NFKC-stable on its own, if one is (text such as `e` + U+0301 is unstable only
    /// as a sequence).
    NotNfkc(Option<char>),
    /// `.` or `..`, possibly with `;parameters` ([`is_dot_segment`]).
    Dot,
    /// Made only of dots and spaces (`...`, `.. `, ` .`), itself or before its `;parameters`: a
    /// server that trims spaces or trailing dots reads a dot segment.
    DotsAndSpaces,
    /// Ends with a dot or a space, itself or before its `;parameters` (`file.`, `a `, `a.;x`):
    /// Windows file systems and servers that trim drop them.
    TrailingDotOrSpace,
    /// Starts with a space (` a`): servers that trim drop it.
    LeadingSpace,
}

impl SegmentProblem {
    /// The problem as the tail of a sentence (`segment `x` <describe>`).
    pub(crate) fn describe(self) -> String {
        match self {
            SegmentProblem::NotNfkc(Some(c)) => format!(
                "contains U+{:04X}, which unicode normalization (nfkc) changes",
                u32::from(c)
            ),
            SegmentProblem::NotNfkc(None) => {
                "is not in unicode normalization form nfkc".to_owned()
            }
            SegmentProblem::Dot => "is a dot segment".to_owned(),
            SegmentProblem::DotsAndSpaces => {
                "is made only of dots and spaces, which a server that trims them reads as a dot segment"
                    .to_owned()
            }
            SegmentProblem::TrailingDotOrSpace => {
                "ends with a dot or a space, which a server may strip".to_owned()
            }
            SegmentProblem::LeadingSpace => {
                "starts with a space, which a server may strip".to_owned()
            }
        }
    }
}

/// The segment rules that do not depend on how a segment was written: `decoded` is the segment
/// after percent-decoding (the same text for a segment without escapes). Template literals and
/// request segments both pass through it, so a template never names a segment no request may
/// have. Spaces are every Unicode `White_Space` character that decoding can produce.
///
/// Costs nothing extra on ASCII text beyond a look at its first and last bytes and, when it
/// holds a `;`, at the byte before it.
pub(crate) fn check_segment(decoded: &str) -> Result<(), SegmentProblem> {
    if !decoded.is_ascii() {
        check_nfkc(decoded)?;
    }
    if is_dot_segment(decoded) {
        return Err(SegmentProblem::Dot);
    }
    // The text before `;parameters` is what a server that strips them goes on to read.
    let stem = match find_byte(decoded, b';') {
        Some(at) => decoded.get(..at).unwrap_or(decoded),
        None => decoded,
    };
    for part in [decoded, stem] {
        let Some(last) = part.chars().next_back() else {
            continue;
        };
        if last != '.' && !last.is_whitespace() {
            continue;
        }
        let problem = if part.chars().all(|c| c == '.' || c.is_whitespace()) {
            SegmentProblem::DotsAndSpaces
        } else {
            SegmentProblem::TrailingDotOrSpace
        };
        return Err(problem);
    }
    if decoded.starts_with(char::is_whitespace) {
        return Err(SegmentProblem::LeadingSpace);
    }
    Ok(())
}

/// [`SegmentProblem::NotNfkc`] unless `text` is its own NFKC form. The quick check answers most
/// text without normalising it.
fn check_nfkc(text: &str) -> Result<(), SegmentProblem> {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};
    let normalized = match is_nfkc_quick(text.chars()) {
        IsNormalized::Yes => true,
        IsNormalized::No => false,
        IsNormalized::Maybe => text.nfkc().eq(text.chars()),
    };
    if normalized {
        return Ok(());
    }
    let unstable = text.chars().find(|&c| {
        let mut one = [0u8; 4];
        let one: &str = c.encode_utf8(&mut one);
        !one.nfkc().eq(one.chars())
    });
    Err(SegmentProblem::NotNfkc(unstable))
}

/// The position of the first `byte` (ASCII) in `text`. A plain loop: the texts searched on the
/// decision path (hosts, paths, segments) are short, where `str::find`'s `memchr` set-up costs
/// more than the search.
#[inline]
pub(crate) fn find_byte(text: &str, byte: u8) -> Option<usize> {
    text.bytes().position(|b| b == byte)
}

/// Splits `text` at every `byte` (ASCII), like `str::split` with a `char`, by a plain loop.
pub(crate) fn split_byte(text: &str, byte: u8) -> SplitByte<'_> {
    SplitByte {
        text,
        byte,
        start: Some(0),
    }
}

/// The iterator of [`split_byte`].
#[derive(Debug, Clone)]
pub(crate) struct SplitByte<'a> {
    text: &'a str,
    byte: u8,
    /// Where the next piece starts; `None` once the last piece was returned.
    start: Option<usize>,
}

impl<'a> Iterator for SplitByte<'a> {
    type Item = &'a str;

    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        let start = self.start?;
        let rest = self.text.get(start..)?;
        match find_byte(rest, self.byte) {
            Some(at) => {
                self.start = Some(start + at + 1);
                rest.get(..at)
            }
            None => {
                self.start = None;
                Some(rest)
            }
        }
    }
}

/// Quotes user input in messages: truncated to 64 characters, control characters escaped.
pub(crate) fn quote(text: &str) -> String {
    crate::value::truncate_str(text, 64)
}

/// Percent-decoding of path segments and query components, shared by templates and requests.
///
/// Decoding is strict: every `%` starts exactly two hex digits; the decoded bytes must be UTF-8
/// and contain no NUL or other control character; a path segment must not decode to `/` or `\`.
pub(crate) mod percent {
    use std::borrow::Cow;

    /// Why a piece of text does not decode.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum DecodeProblem {
        /// `%` not followed by two hex digits; holds the offending escape as written.
        BadEscape(String),
        /// `%2F` or `%5C` (any case) in a path segment.
        EncodedSeparator(String),
        /// `%00`.
        Nul,
        /// Another encoded control character, e.g. `%0A`.
        EncodedControl(String),
        /// The decoded bytes are not UTF-8.
        NotUtf8,
    }

    impl DecodeProblem {
        /// The problem as the tail of a sentence (`segment `x` <describe>`).
        pub(crate) fn describe(&self) -> String {
            match self {
                DecodeProblem::BadEscape(e) => format!("has invalid percent-encoding `{e}`"),
                DecodeProblem::EncodedSeparator(e) => {
                    format!("contains an encoded separator `{e}`")
                }
                DecodeProblem::Nul => "contains an encoded nul `%00`".to_owned(),
                DecodeProblem::EncodedControl(e) => {
                    format!("contains an encoded control character `{e}`")
                }
                DecodeProblem::NotUtf8 => "does not percent-decode to utf-8".to_owned(),
            }
        }
    }

    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }

    /// The escape starting at byte `at` (for messages): `%` and up to two following characters.
    fn escape_text(text: &str, at: usize) -> String {
        text.get(at..)
            .map(|t| t.chars().take(3).collect())
            .unwrap_or_else(|| "%".to_owned())
    }

    /// Iterates the decoded bytes of `text`, `+` read as a space when `plus_is_space`. Yields
    /// `Err(byte offset of the escape)` for a malformed escape and stops.
    pub(crate) struct Decoded<'t> {
        bytes: &'t [u8],
        at: usize,
        plus_is_space: bool,
    }

    impl<'t> Decoded<'t> {
        pub(crate) fn new(text: &'t str, plus_is_space: bool) -> Self {
            Decoded {
                bytes: text.as_bytes(),
                at: 0,
                plus_is_space,
            }
        }
    }

    impl Iterator for Decoded<'_> {
        type Item = Result<(u8, bool), usize>;

        /// The next decoded byte and whether it came from an escape.
        fn next(&mut self) -> Option<Self::Item> {
            let start = self.at;
            let b = *self.bytes.get(start)?;
            if b == b'%' {
                let pair = self
                    .bytes
                    .get(start.saturating_add(1))
                    .and_then(|h| hex(*h))
                    .zip(
                        self.bytes
                            .get(start.saturating_add(2))
                            .and_then(|l| hex(*l)),
                    );
                match pair {
                    Some((h, l)) => {
                        self.at = start.saturating_add(3);
                        Some(Ok((h << 4 | l, true)))
                    }
                    None => {
                        self.at = self.bytes.len();
                        Some(Err(start))
                    }
                }
            } else {
                self.at = start.saturating_add(1);
                if b == b'+' && self.plus_is_space {
                    Some(Ok((b' ', false)))
                } else {
                    Some(Ok((b, false)))
                }
            }
        }
    }

    /// Validates `text` as a path segment (`separators`) or query component and returns its
    /// decoding: borrowed (without allocating) when it contains nothing to decode.
    pub(crate) fn validate(
        text: &str,
        separators: bool,
        plus_is_space: bool,
    ) -> Result<Cow<'_, str>, DecodeProblem> {
        let mut escaped = false;
        let mut at = 0usize;
        for item in Decoded::new(text, plus_is_space) {
            let (b, from_escape) =
                item.map_err(|i| DecodeProblem::BadEscape(escape_text(text, i)))?;
            if from_escape {
                escaped = true;
                if b == 0 {
                    return Err(DecodeProblem::Nul);
                }
                if separators && (b == b'/' || b == b'\\') {
                    return Err(DecodeProblem::EncodedSeparator(escape_text(text, at)));
                }
                if b < 0x20 || b == 0x7f {
                    return Err(DecodeProblem::EncodedControl(escape_text(text, at)));
                }
                at = at.saturating_add(3);
            } else {
                if plus_is_space && text.as_bytes().get(at) == Some(&b'+') {
                    escaped = true;
                }
                at = at.saturating_add(1);
            }
        }
        if !escaped {
            return Ok(Cow::Borrowed(text));
        }
        // Decoded UTF-8 validity needs the bytes together; C1 controls are checked too.
        let decoded = decode_bytes(text, plus_is_space);
        let decoded = String::from_utf8(decoded).map_err(|_| DecodeProblem::NotUtf8)?;
        if let Some(c) = decoded.chars().find(|c| c.is_control()) {
            return Err(DecodeProblem::EncodedControl(format!(
                "U+{:04X}",
                u32::from(c)
            )));
        }
        Ok(Cow::Owned(decoded))
    }

    /// The first `%` followed by two hex digits in already-decoded text (`%2e` in the decoding
    /// of `%252e` or `%25%32%65`): text that a server decoding twice reads differently.
    pub(crate) fn inner_escape(decoded: &str) -> Option<&str> {
        let bytes = decoded.as_bytes();
        let at = bytes
            .windows(3)
            .position(|w| matches!(w, [b'%', h, l] if hex(*h).is_some() && hex(*l).is_some()))?;
        decoded.get(at..at.saturating_add(3))
    }

    fn decode_bytes(text: &str, plus_is_space: bool) -> Vec<u8> {
        Decoded::new(text, plus_is_space)
            .map_while(Result::ok)
            .map(|(b, _)| b)
            .collect()
    }

    /// Decodes text already accepted by [`validate`]; borrows when there is nothing to decode.
    /// Returns `None` only if `text` was not validated (callers treat that as no match).
    pub(crate) fn decode<'t>(text: &'t str, plus_is_space: bool) -> Option<Cow<'t, str>> {
        let needs = text.contains('%') || (plus_is_space && text.contains('+'));
        if !needs {
            return Some(Cow::Borrowed(text));
        }
        let mut bytes = Vec::with_capacity(text.len());
        for item in Decoded::new(text, plus_is_space) {
            bytes.push(item.ok()?.0);
        }
        String::from_utf8(bytes).ok().map(Cow::Owned)
    }

    /// Validates and decodes a template literal segment.
    pub(crate) fn decode_segment(text: &str) -> Result<String, DecodeProblem> {
        validate(text, true, false).map(Cow::into_owned)
    }

    /// True when the decoding of `text` equals `expected`, without allocating.
    pub(crate) fn decoded_eq(text: &str, plus_is_space: bool, expected: &str) -> bool {
        let mut want = expected.bytes();
        for item in Decoded::new(text, plus_is_space) {
            match (item, want.next()) {
                (Ok((got, _)), Some(w)) if got == w => {}
                _ => return false,
            }
        }
        want.next().is_none()
    }
}
