//! A compiled regex, with a shortcut for the patterns that are simple enough not to need the
//! regex engine.
//!
//! Most patterns in capability manifests have one shape: a fixed prefix, one run of characters
//! from a single class, a fixed suffix, anchored at both ends — `[^@]+@example\.com`,
//! `INV-[0-9]{6}`, `[a-z0-9-]{1,63}`. For those, [`Matcher::is_match`] strips the literals and
//! checks the run directly: a few instructions per character instead of a search through the
//! regex crate's lazy DFA. The pattern's syntax tree (from `regex-syntax`, the parser the regex
//! crate itself uses, with the same options) decides whether the shortcut applies; anything it
//! does not recognise — alternation, nested repetition, look-around other than the text
//! anchors, multi-line anchors, byte classes — goes to the regex crate's engine (the
//! `regex_automata::meta::Regex` a [`regex::Regex`] wraps, configured as the regex crate
//! configures it), built from the same syntax tree and always kept. The shortcut answers exactly
//! what the regex answers, and the engine what a [`regex::Regex`] of the same pattern answers
//! (property tests hold all three together).

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, meta};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

use crate::bytes::bytes_eq;

/// A compiled regex; answers [`Matcher::is_match`] without the regex engine when it can.
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The regex crate's engine, built from the syntax tree parsed for the shortcut.
    regex: meta::Regex,
    /// The pattern it was built from (shared by the clones a [`MatcherCache`] hands out).
    pattern: Arc<str>,
    shortcut: Option<Shortcut>,
}

/// The regex crate's cap on the lazy DFA's cache, which [`regex::RegexBuilder`] sets by default.
const DFA_CACHE_BYTES: usize = 2 * (1 << 20);

impl Matcher {
    /// Compiles `pattern` as [`regex::RegexBuilder`] would with its defaults, the `i` flag set
    /// to `case_insensitive` and the compiled size limited to `size_limit` bytes, and works out
    /// whether it has a shortcut. The pattern is parsed once: the shortcut is read from the
    /// syntax tree the engine is built from, so the two cannot disagree. Parsing it a second
    /// time inside the regex crate was a quarter of the cost of building a matcher (~40,000
    /// instructions of ~150,000): 7 % of compiling 1,000 capabilities with a regex each.
    pub fn build(
        pattern: &str,
        case_insensitive: bool,
        size_limit: usize,
    ) -> Result<Self, regex::Error> {
        // `regex::RegexBuilder::build` for a `&str` regex: UTF-8 syntax, leftmost-first, empty
        // matches only at character boundaries.
        let syntax = syntax::Config::new()
            .case_insensitive(case_insensitive)
            .utf8(true);
        let hir = syntax::parse_with(pattern, &syntax)
            .map_err(|e| regex::Error::Syntax(e.to_string()))?;
        let config = meta::Config::new()
            .nfa_size_limit(Some(size_limit))
            .hybrid_cache_capacity(DFA_CACHE_BYTES)
            .match_kind(MatchKind::LeftmostFirst)
            .utf8_empty(true);
        let regex = meta::Builder::new()
            .configure(config)
            .build_from_hir(&hir)
            .map_err(|e| match e.size_limit() {
                // The regex crate's own mapping of a build error to its `Error`.
                Some(limit) => regex::Error::CompiledTooBig(limit),
                None => regex::Error::Syntax(e.to_string()),
            })?;
        Ok(Matcher {
            regex,
            pattern: Arc::from(pattern),
            shortcut: Shortcut::from_hir(&hir),
        })
    }

    /// `^(?:source)$`: `source` anchored at both ends, for a whole-string match — once `source`
    /// is checked to parse as a regex on its own. Pasted in unchecked, a source such as
    /// `[a-z]+)|(?:x` closed the group early and made a top-level alternation whose first branch
    /// was anchored only at the start (regression: `abc; DROP TABLE` matched).
    ///
    /// A source that ends inside a verbose-mode comment (`(?x)a # c`) gets a line break before
    /// the closing `)$`, which the comment would otherwise swallow ("unclosed group"); a comment
    /// is only read in verbose mode, where the line break is whitespace and matches nothing.
    pub fn anchored(source: &str) -> Result<String, regex::Error> {
        let parsed = regex_syntax::ast::parse::Parser::new()
            .parse_with_comments(source)
            .map_err(|e| regex::Error::Syntax(e.to_string()))?;
        let ends_in_comment = parsed
            .comments
            .last()
            .is_some_and(|comment| comment.span.end.offset == source.len());
        let close = if ends_in_comment { "\n)$" } else { ")$" };
        Ok(format!("^(?:{source}{close}"))
    }

    /// True when the pattern matches somewhere in `text` (the regex crate's `is_match`).
    #[inline]
    pub fn is_match(&self, text: &str) -> bool {
        match &self.shortcut {
            Some(shortcut) => shortcut.is_match(text),
            None => self.engine_is_match(text),
        }
    }

    /// [`Matcher::is_match`] by the regex engine, as `regex::Regex::is_match` asks it. Out of
    /// line: a search costs far more than the call, and the VM's loops that test a regex stay
    /// small.
    #[inline(never)]
    fn engine_is_match(&self, text: &str) -> bool {
        self.regex
            .search_half(&Input::new(text).earliest(true))
            .is_some()
    }

    /// The pattern the regex was compiled from.
    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    /// True when [`Matcher::is_match`] answers without the regex engine.
    pub fn has_shortcut(&self) -> bool {
        self.shortcut.is_some()
    }
}

/// The matchers one load has built, by pattern, `i` flag and size limit: a policy set that uses
/// one pattern in many capabilities (an email domain, a SKU format) compiles it once, and every
/// use shares the compiled regex (cloning a matcher shares its program). A pattern that
/// failed fails again at every use, with the same error, so each use is reported.
#[derive(Debug, Default)]
pub struct MatcherCache {
    built: HashMap<String, Vec<Built>>,
}

/// One entry of [`MatcherCache`]: the flag and limit a pattern was built with, and what came of it.
type Built = (bool, usize, Result<Matcher, regex::Error>);

impl MatcherCache {
    /// [`Matcher::build`], or a copy of what it gave for the same arguments before.
    pub fn build(
        &mut self,
        pattern: &str,
        case_insensitive: bool,
        size_limit: usize,
    ) -> Result<Matcher, regex::Error> {
        let same = |(flag, limit, _): &&Built| *flag == case_insensitive && *limit == size_limit;
        if let Some((_, _, built)) = self.built.get(pattern).and_then(|b| b.iter().find(same)) {
            return built.clone();
        }
        let built = Matcher::build(pattern, case_insensitive, size_limit);
        self.built.entry(pattern.to_owned()).or_default().push((
            case_insensitive,
            size_limit,
            built.clone(),
        ));
        built
    }

    /// How many distinct (pattern, flag, limit) builds it holds.
    pub fn len(&self) -> usize {
        self.built.values().map(Vec::len).sum()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.built.is_empty()
    }
}

/// A pattern of the form `prefix run suffix`, anchored at both ends, or a bare literal with any
/// anchoring.
#[derive(Debug, Clone)]
enum Shortcut {
    /// `^prefix run suffix$`, where `run` is optional.
    Anchored {
        prefix: Box<str>,
        run: Option<Run>,
        suffix: Box<str>,
    },
    /// A literal that must start the text (`^lit`), end it (`lit$`), or occur in it (`lit`).
    Literal { text: Box<str>, anchors: Anchors },
}

/// Which end of the text a literal-only pattern is tied to (both is [`Shortcut::Anchored`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchors {
    Start,
    End,
    Neither,
}

/// `min..=max` characters, each from one class.
#[derive(Debug, Clone)]
struct Run {
    class: CharSet,
    min: u32,
    max: Option<u32>,
}

/// A set of characters: a byte table for ASCII, sorted disjoint ranges above it.
#[derive(Debug, Clone)]
struct CharSet {
    /// `bytes[b]` for an ASCII byte `b` in the set; false for every byte ≥ 0x80. One load per
    /// byte (a `u128` bitmap cost a double-word shift and a select per byte).
    bytes: Box<[bool; 256]>,
    wide: Box<[(char, char)]>,
}

impl Shortcut {
    fn from_hir(hir: &Hir) -> Option<Shortcut> {
        let mut parts: Vec<&Hir> = Vec::new();
        flatten(hir, &mut parts);
        let start = matches!(
            parts.first().map(|h| h.kind()),
            Some(HirKind::Look(Look::Start))
        );
        if start {
            parts.remove(0);
        }
        let end = matches!(
            parts.last().map(|h| h.kind()),
            Some(HirKind::Look(Look::End))
        );
        if end {
            parts.pop();
        }
        let mut parts = parts.into_iter().peekable();
        let prefix = parts.next_if(|h| literal(h).is_some()).and_then(literal);
        let run = parts
            .next_if(|h| Run::from_hir(h).is_some())
            .and_then(Run::from_hir);
        let suffix = parts.next_if(|h| literal(h).is_some()).and_then(literal);
        if parts.next().is_some() {
            return None;
        }
        let prefix = prefix.unwrap_or_default();
        let suffix = suffix.unwrap_or_default();
        if start && end {
            return Some(Shortcut::Anchored {
                prefix: prefix.into(),
                run,
                suffix: suffix.into(),
            });
        }
        // Without both anchors only a lone, non-empty literal is taken: a run's length would no
        // longer be pinned by the ends of the text.
        if run.is_some() || !suffix.is_empty() || prefix.is_empty() {
            return None;
        }
        let anchors = match (start, end) {
            (true, _) => Anchors::Start,
            (false, true) => Anchors::End,
            (false, false) => Anchors::Neither,
        };
        Some(Shortcut::Literal {
            text: prefix.into(),
            anchors,
        })
    }

    #[inline]
    fn is_match(&self, text: &str) -> bool {
        match self {
            Shortcut::Anchored {
                prefix,
                run,
                suffix,
            } => {
                // Both ends are pinned, so the split is forced: the prefix, then the suffix at
                // the very end, then the run is whatever lies between.
                let Some(middle) = strip(text, prefix, suffix) else {
                    return false;
                };
                match run {
                    Some(run) => run.is_match(middle),
                    None => middle.is_empty(),
                }
            }
            Shortcut::Literal { text: lit, anchors } => match anchors {
                Anchors::Start => strip(text, lit, "").is_some(),
                Anchors::End => strip(text, "", lit).is_some(),
                Anchors::Neither => text.contains(&**lit),
            },
        }
    }
}

/// The bytes of `text` between `prefix` at its start and `suffix` at its end, or `None` when it
/// does not have them. Compares bytes in line ([`bytes_eq`]): with `str::strip_prefix` and
/// `strip_suffix` (a `memcmp` call each) the shortcut measured slower than the regex. Bytes,
/// not `&str`: both literals are whole UTF-8 sequences, so the middle is UTF-8 too, and only a
/// run with a non-ASCII byte needs it as text.
#[inline(always)]
fn strip<'t>(text: &'t str, prefix: &str, suffix: &str) -> Option<&'t [u8]> {
    let bytes = text.as_bytes();
    let end = bytes.len().checked_sub(suffix.len())?;
    let head = bytes.get(..prefix.len())?;
    let tail = bytes.get(end..)?;
    if end < prefix.len()
        || !bytes_eq(head, prefix.as_bytes())
        || !bytes_eq(tail, suffix.as_bytes())
    {
        return None;
    }
    bytes.get(prefix.len()..end)
}

/// The concatenated parts of `hir`, with capture groups (which do not change what matches)
/// opened.
fn flatten<'h>(hir: &'h Hir, parts: &mut Vec<&'h Hir>) {
    match hir.kind() {
        HirKind::Concat(subs) => subs.iter().for_each(|sub| flatten(sub, parts)),
        HirKind::Capture(capture) => flatten(&capture.sub, parts),
        _ => parts.push(hir),
    }
}

/// The text of a literal part (UTF-8: in Unicode mode literals always are).
fn literal(hir: &Hir) -> Option<String> {
    match hir.kind() {
        HirKind::Literal(lit) => String::from_utf8(lit.0.to_vec()).ok(),
        _ => None,
    }
}

impl Run {
    fn from_hir(hir: &Hir) -> Option<Run> {
        match hir.kind() {
            HirKind::Repetition(rep) => Some(Run {
                class: CharSet::from_hir(&rep.sub)?,
                min: rep.min,
                max: rep.max,
            }),
            // A lone class is a run of exactly one.
            HirKind::Class(_) => Some(Run {
                class: CharSet::from_hir(hir)?,
                min: 1,
                max: Some(1),
            }),
            _ => None,
        }
    }

    /// True when `bytes` (UTF-8, the middle of the text) is a run of the class.
    #[inline]
    fn is_match(&self, bytes: &[u8]) -> bool {
        // ASCII, the usual case: one table load per byte, and the length is the count.
        match bytes.iter().position(|&b| !self.class.contains_ascii(b)) {
            None => self.count_allowed(bytes.len()),
            Some(at) if bytes.get(at).is_some_and(|&b| b >= 0x80) => self.is_match_wide(bytes, at),
            Some(_) => false,
        }
    }

    /// [`Run::is_match`] from the first non-ASCII byte, at `at`: every character before it is
    /// ASCII and in the class.
    #[cold]
    fn is_match_wide(&self, bytes: &[u8], at: usize) -> bool {
        // The middle of a `&str` between two whole UTF-8 literals, from an ASCII position: it
        // is UTF-8, so this never fails (and a failure would only refuse the match).
        let Some(rest) = bytes
            .get(at..)
            .and_then(|rest| std::str::from_utf8(rest).ok())
        else {
            return false;
        };
        let mut count = at;
        for c in rest.chars() {
            if !self.class.contains(c) {
                return false;
            }
            count += 1;
        }
        self.count_allowed(count)
    }

    #[inline]
    fn count_allowed(&self, count: usize) -> bool {
        let count = u64::try_from(count).unwrap_or(u64::MAX);
        count >= u64::from(self.min) && self.max.is_none_or(|max| count <= u64::from(max))
    }
}

impl CharSet {
    /// The set of a Unicode class, or of a one-character literal (`a*`); `None` for byte
    /// classes and longer literals.
    fn from_hir(hir: &Hir) -> Option<CharSet> {
        let ranges: Vec<(char, char)> = match hir.kind() {
            HirKind::Class(Class::Unicode(class)) => class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect(),
            HirKind::Literal(_) => {
                let text = literal(hir)?;
                let mut chars = text.chars();
                let (Some(c), None) = (chars.next(), chars.next()) else {
                    return None;
                };
                vec![(c, c)]
            }
            _ => return None,
        };
        let mut set = CharSet {
            bytes: Box::new([false; 256]),
            wide: Box::default(),
        };
        let mut wide = Vec::new();
        for (start, end) in ranges {
            for c in u32::from(start)..=u32::from(end).min(0x7f) {
                if let Some(member) = usize::try_from(c).ok().and_then(|c| set.bytes.get_mut(c)) {
                    *member = true;
                }
            }
            if u32::from(end) > 0x7f {
                wide.push((start.max('\u{80}'), end));
            }
        }
        set.wide = wide.into();
        Some(set)
    }

    /// True for an ASCII byte in the set; false for every byte ≥ 0x80 (not a character).
    #[inline]
    fn contains_ascii(&self, b: u8) -> bool {
        self.bytes.get(usize::from(b)).copied().unwrap_or(false)
    }

    #[inline]
    fn contains(&self, c: char) -> bool {
        let c32 = u32::from(c);
        if c32 < 0x80 {
            return u8::try_from(c32).is_ok_and(|b| self.contains_ascii(b));
        }
        self.wide
            .binary_search_by(|&(start, end)| {
                if end < c {
                    std::cmp::Ordering::Less
                } else if start > c {
                    std::cmp::Ordering::Greater
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .is_ok()
    }
}

#[cfg(test)]
mod tests;
