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
//! once its perl classes are made ASCII (property tests hold all three together).
//!
//! `\d`, `\w` and `\s` (and `\D`, `\W`, `\S`) are ASCII in every capgate regex, where the regex
//! crate reads them as Unicode classes: `١٢٣` and `１２３` are not `\d+`. `parse` swaps each for
//! the POSIX class of the same meaning (`[[:digit:]]`, `[[:word:]]`, `[[:space:]]`) in the syntax
//! tree before it is translated, so the rest of the pattern — Unicode literals, `\p{..}` classes,
//! `.` — keeps its Unicode meaning. A policy that wants Unicode digits writes `\p{Nd}`.

use std::collections::HashMap;
use std::sync::Arc;

use regex_automata::{Input, MatchKind, meta};
use regex_syntax::ast::{
    self, Ast, ClassAscii, ClassAsciiKind, ClassBracketed, ClassPerl, ClassPerlKind, ClassSet,
    ClassSetItem,
};
use regex_syntax::hir::translate::TranslatorBuilder;
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
    /// What one byte of text costs to match, in NFA states ([`nfa_states`]).
    cost: u64,
}

/// The regex crate's cap on the lazy DFA's cache, which [`regex::RegexBuilder`] sets by default.
const DFA_CACHE_BYTES: usize = 2 * (1 << 20);

impl Matcher {
    /// Compiles `pattern` as [`regex::RegexBuilder`] would with its defaults, the `i` flag set
    /// to `case_insensitive` and the compiled size limited to `size_limit` bytes, and works out
    /// whether it has a shortcut. The pattern is parsed once: the shortcut is read from the
    /// syntax tree the engine is built from, so the two cannot disagree. Parsing it a second
    /// time inside the regex crate would be a quarter of the cost of building a matcher
    /// (~40,000 instructions of ~150,000): 7 % of compiling 1,000 capabilities with a regex each.
    pub fn build(
        pattern: &str,
        case_insensitive: bool,
        size_limit: usize,
    ) -> Result<Self, regex::Error> {
        // `regex::RegexBuilder::build` for a `&str` regex: UTF-8 syntax, leftmost-first, empty
        // matches only at character boundaries.
        let hir = parse(pattern, case_insensitive)?;
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
        let shortcut = Shortcut::from_hir(&hir);
        let cost = match &shortcut {
            Some(shortcut) => shortcut.cost(),
            None => nfa_states(&hir).saturating_add(SEARCH_STATES),
        };
        Ok(Matcher {
            regex,
            pattern: Arc::from(pattern),
            shortcut,
            cost,
        })
    }

    /// The regex work a match on `text` may take, in byte-states: its length in bytes (one
    /// more, for the end) times [`Matcher::cost`]. Charged before the match runs
    /// (`Limits::max_regex_work`).
    #[inline]
    pub fn work(&self, text: &str) -> u64 {
        u64::try_from(text.len())
            .unwrap_or(u64::MAX)
            .saturating_add(1)
            .saturating_mul(self.cost)
    }

    /// What one byte of text may cost to match. For the regex engine, an upper bound on the
    /// states of the NFA it builds, counted from the syntax tree: its slowest search — a Pike
    /// VM, which it falls back to when its lazy DFA thrashes — takes at most one step per state
    /// per byte, so text bytes times this bounds the work of any match, whichever path the
    /// engine takes. A shortcut reads each byte once (`Shortcut::cost`). Either way it depends
    /// on the pattern alone, never on the machine or the clock.
    #[cfg(any(test, feature = "internals"))]
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The heap memory of the compiled regex, in bytes, as the regex crate reports it (what a
    /// load's total is charged: `Limits::max_regex_total_bytes`).
    pub fn memory(&self) -> usize {
        self.regex.memory_usage()
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
    #[cfg(any(test, feature = "internals"))]
    pub fn has_shortcut(&self) -> bool {
        self.shortcut.is_some()
    }
}

/// Parses `pattern` as the regex crate does for a `&str` regex (its default syntax options, the
/// `i` flag set to `case_insensitive`), with `\d`, `\w`, `\s` and their negations made ASCII.
/// Errors are the regex crate's (`regex::Error::Syntax` with regex-syntax's text).
fn parse(pattern: &str, case_insensitive: bool) -> Result<Hir, regex::Error> {
    let syntax = |e: regex_syntax::Error| regex::Error::Syntax(e.to_string());
    let mut ast = ast_parser().parse(pattern).map_err(|e| syntax(e.into()))?;
    ascii_perl_classes(&mut ast);
    TranslatorBuilder::new()
        .utf8(true)
        .case_insensitive(case_insensitive)
        .build()
        .translate(pattern, &ast)
        .map_err(|e| syntax(e.into()))
}

/// The regex crate's syntax parser: its nesting limit (which also bounds the recursion of
/// [`ascii_perl_classes`]), no octal escapes, whitespace significant.
fn ast_parser() -> ast::parse::Parser {
    ast::parse::ParserBuilder::new()
        .nest_limit(250)
        .octal(false)
        .ignore_whitespace(false)
        .build()
}

/// `pattern` with its perl classes written as the ASCII classes capgate reads them as
/// (`\d+` → `[[:digit:]]+`, `[^\s@]` → `[^[:space:]@]`): a pattern the regex crate answers as a
/// [`Matcher`] of `pattern` does. For the reference evaluator and the tests that hold the
/// matcher to the regex crate.
#[cfg(any(test, feature = "internals", feature = "reference"))]
pub fn with_ascii_classes(pattern: &str) -> Result<String, regex::Error> {
    let mut ast = ast_parser()
        .parse(pattern)
        .map_err(|e| regex::Error::Syntax(regex_syntax::Error::from(e).to_string()))?;
    ascii_perl_classes(&mut ast);
    let mut printed = String::with_capacity(pattern.len() + 16);
    ast::print::Printer::new()
        .print(&ast, &mut printed)
        .map_err(|e| regex::Error::Syntax(e.to_string()))?;
    Ok(printed)
}

/// Replaces every perl class (`\d`, `\W`, ...) in `ast` with the ASCII class of the same name,
/// outside and inside brackets. Recursion is bounded by the parser's nesting limit.
fn ascii_perl_classes(ast: &mut Ast) {
    match ast {
        Ast::ClassPerl(perl) => {
            let span = perl.span;
            let item = ClassSetItem::Ascii(ascii_class(perl));
            *ast = Ast::class_bracketed(ClassBracketed {
                span,
                negated: false,
                kind: ClassSet::Item(item),
            });
        }
        Ast::ClassBracketed(class) => ascii_in_set(&mut class.kind),
        Ast::Repetition(repetition) => ascii_perl_classes(&mut repetition.ast),
        Ast::Group(group) => ascii_perl_classes(&mut group.ast),
        Ast::Alternation(alternation) => alternation.asts.iter_mut().for_each(ascii_perl_classes),
        Ast::Concat(concat) => concat.asts.iter_mut().for_each(ascii_perl_classes),
        Ast::Empty(_)
        | Ast::Flags(_)
        | Ast::Literal(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_) => {}
    }
}

fn ascii_in_set(set: &mut ClassSet) {
    match set {
        ClassSet::Item(item) => ascii_in_item(item),
        ClassSet::BinaryOp(op) => {
            ascii_in_set(&mut op.lhs);
            ascii_in_set(&mut op.rhs);
        }
    }
}

fn ascii_in_item(item: &mut ClassSetItem) {
    match item {
        ClassSetItem::Perl(perl) => *item = ClassSetItem::Ascii(ascii_class(perl)),
        ClassSetItem::Bracketed(class) => ascii_in_set(&mut class.kind),
        ClassSetItem::Union(union) => union.items.iter_mut().for_each(ascii_in_item),
        ClassSetItem::Empty(_)
        | ClassSetItem::Literal(_)
        | ClassSetItem::Range(_)
        | ClassSetItem::Ascii(_)
        | ClassSetItem::Unicode(_) => {}
    }
}

/// The ASCII class a perl class stands for: `\d` is `[[:digit:]]` (`[0-9]`), `\w` is
/// `[[:word:]]` (`[0-9A-Za-z_]`), `\s` is `[[:space:]]` (`[\t\n\v\f\r ]`), negated alike.
fn ascii_class(perl: &ClassPerl) -> ClassAscii {
    ClassAscii {
        span: perl.span,
        kind: match perl.kind {
            ClassPerlKind::Digit => ClassAsciiKind::Digit,
            ClassPerlKind::Space => ClassAsciiKind::Space,
            ClassPerlKind::Word => ClassAsciiKind::Word,
        },
        negated: perl.negated,
    }
}

/// States the engine's unanchored search adds to every regex's own: the `(?s:.)*?` prefix, the
/// start and the match state.
const SEARCH_STATES: u64 = 4;

/// An upper bound on the states of the Thompson NFA the regex engine compiles `hir` to: a
/// literal is a state per byte, a class one state plus the inner nodes of its UTF-8 byte
/// automaton (none for ASCII), a counted repetition one copy of its body per allowed count,
/// and each group, alternation or repetition a few states of its own. Saturating; recursion is
/// bounded by the parser's nesting limit.
fn nfa_states(hir: &Hir) -> u64 {
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Bytes(_)) => 1,
        HirKind::Literal(literal) => count(literal.0.len()).max(1),
        HirKind::Class(Class::Unicode(class)) => utf8_inner_nodes(class).saturating_add(1),
        HirKind::Repetition(repetition) => {
            let body = nfa_states(&repetition.sub).saturating_add(1);
            let copies = match repetition.max {
                Some(max) => u64::from(max),
                None => u64::from(repetition.min).saturating_add(1),
            };
            copies.max(1).saturating_mul(body).saturating_add(1)
        }
        HirKind::Capture(capture) => nfa_states(&capture.sub).saturating_add(2),
        HirKind::Concat(subs) => subs
            .iter()
            .fold(1, |sum: u64, sub| sum.saturating_add(nfa_states(sub))),
        HirKind::Alternation(subs) => subs.iter().fold(2, |sum: u64, sub| {
            sum.saturating_add(nfa_states(sub)).saturating_add(1)
        }),
    }
}

/// The inner nodes of the trie of a class's UTF-8 byte sequences: each sequence's byte ranges
/// but the last, less the leading ones it shares with the sequence before it (the sequences come
/// in order, so a shared prefix is always the previous one's). The engine's UTF-8 automaton
/// shares suffixes too, so it has at most this many states besides its final one; none for an
/// ASCII class.
fn utf8_inner_nodes(class: &regex_syntax::hir::ClassUnicode) -> u64 {
    let mut nodes: u64 = 0;
    let mut previous: Option<regex_syntax::utf8::Utf8Sequence> = None;
    for range in class.ranges() {
        for sequence in regex_syntax::utf8::Utf8Sequences::new(range.start(), range.end()) {
            let inner = sequence.len().saturating_sub(1);
            let shared = previous.as_ref().map_or(0, |before| {
                sequence
                    .as_slice()
                    .iter()
                    .zip(before.as_slice())
                    .take(inner)
                    .take_while(|(a, b)| a == b)
                    .count()
            });
            nodes = nodes.saturating_add(u64::try_from(inner - shared).unwrap_or(u64::MAX));
            previous = Some(sequence);
        }
    }
    nodes
}

/// Why a [`MatcherCache`] did not build a regex.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// The regex crate refused it: a syntax error, or more than the size limit of one regex.
    #[error(transparent)]
    Regex(#[from] regex::Error),
    /// The regexes of the load already hold `limit` bytes, or would with this one
    /// (`Limits::max_regex_total_bytes`).
    #[error(
        "the regexes of this policy set need more than {limit} bytes compiled together \
         (`max_regex_total_bytes`)"
    )]
    TotalTooBig {
        /// The limit on the load's total.
        limit: usize,
    },
}

/// The matchers one load has built, by pattern, `i` flag and size limit: a policy set that uses
/// one pattern in many capabilities (an email domain, a SKU format) compiles it once, and every
/// use shares the compiled regex (cloning a matcher shares its program). A pattern that
/// failed fails again at every use, with the same error, so each use is reported.
///
/// The cache also bounds the load's compile work (`Limits::max_regex_total_bytes`): every regex
/// it builds is charged its compiled size, and one that fails for size the limit it was built
/// under (the work spent reaching it). A build gets at most what is left as its size limit, so
/// once the total is spent the next regexes fail at once instead of each compiling up to the
/// size limit of one regex (regression: a 41 KB policy of 1,000 distinct `\w{38}zN` regexes
/// took 20 s to be refused).
#[derive(Debug)]
pub struct MatcherCache {
    built: HashMap<String, Vec<Built>>,
    /// `Limits::max_regex_total_bytes`.
    total_limit: usize,
    /// The bytes charged so far.
    spent: usize,
}

impl Default for MatcherCache {
    fn default() -> Self {
        MatcherCache::with_total(crate::limits::Limits::DEFAULT.max_regex_total_bytes)
    }
}

/// One entry of [`MatcherCache`]: the flag and limit a pattern was built with, and what came of it.
type Built = (bool, usize, Result<Matcher, BuildError>);

impl MatcherCache {
    /// An empty cache whose builds may compile to `total_limit` bytes together.
    pub fn with_total(total_limit: usize) -> Self {
        MatcherCache {
            built: HashMap::new(),
            total_limit,
            spent: 0,
        }
    }

    /// [`Matcher::build`] within what is left of the total, or a copy of what it gave for the
    /// same arguments before (a copy costs nothing: it shares the compiled regex).
    pub fn build(
        &mut self,
        pattern: &str,
        case_insensitive: bool,
        size_limit: usize,
    ) -> Result<Matcher, BuildError> {
        let same = |(flag, limit, _): &&Built| *flag == case_insensitive && *limit == size_limit;
        if let Some((_, _, built)) = self.built.get(pattern).and_then(|b| b.iter().find(same)) {
            return built.clone();
        }
        let built = self.build_within_total(pattern, case_insensitive, size_limit);
        self.built.entry(pattern.to_owned()).or_default().push((
            case_insensitive,
            size_limit,
            built.clone(),
        ));
        built
    }

    fn build_within_total(
        &mut self,
        pattern: &str,
        case_insensitive: bool,
        size_limit: usize,
    ) -> Result<Matcher, BuildError> {
        let total_too_big = BuildError::TotalTooBig {
            limit: self.total_limit,
        };
        let left = self.total_limit.saturating_sub(self.spent);
        if left == 0 {
            return Err(total_too_big);
        }
        let limit = size_limit.min(left);
        match Matcher::build(pattern, case_insensitive, limit) {
            Ok(matcher) => {
                let memory = matcher.memory();
                self.spent = self.spent.saturating_add(memory);
                if memory > left {
                    return Err(total_too_big);
                }
                Ok(matcher)
            }
            Err(regex::Error::CompiledTooBig(_)) if limit < size_limit => {
                self.spent = self.total_limit;
                Err(total_too_big)
            }
            Err(error @ regex::Error::CompiledTooBig(_)) => {
                self.spent = self.spent.saturating_add(limit);
                Err(BuildError::Regex(error))
            }
            Err(error) => Err(BuildError::Regex(error)),
        }
    }

    /// How many distinct (pattern, flag, limit) builds it holds.
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.built.values().map(Vec::len).sum()
    }

    /// Whether it holds none.
    #[cfg(any(test, feature = "internals"))]
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

    /// What one byte costs: one table load, and for a run with non-ASCII characters a binary
    /// search of its ranges per character.
    fn cost(&self) -> u64 {
        match self {
            Shortcut::Anchored { run: Some(run), .. } => {
                let wide = u64::try_from(run.class.wide.len()).unwrap_or(u64::MAX);
                1 + u64::from(wide.saturating_add(1).next_power_of_two().trailing_zeros())
            }
            Shortcut::Anchored { run: None, .. } | Shortcut::Literal { .. } => 1,
        }
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
/// `strip_suffix` (a `memcmp` call each) the shortcut measures slower than the regex. Bytes,
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
