//! Compiled patterns: a `regex::Regex`, searched through a full DFA when one fits.
//!
//! [`Matcher`] answers "does this text match?" for `fieldMatches` (anchored to the whole value)
//! and JSON Schema `pattern` / `patternProperties`. It keeps the `regex` crate's `Regex` (the
//! source of truth, also what `.capc` files store) and, on first use, tries to build a
//! `regex_automata` dense DFA from the same pattern and flags. When that succeeds within
//! [`DFA_SIZE_LIMIT`], a match is one table walk over the bytes — no cache pool, no strategy
//! dispatch, which is most of the `regex` crate's cost on the short strings policies test
//! (emails, ids, enum-like values). Patterns a dense DFA cannot express (Unicode word
//! boundaries) or that would grow too large keep using the `Regex`; so does any search the DFA
//! gives up on. Both are linear-time automata of the same pattern, so they agree (tested).

use std::sync::OnceLock;

use regex_automata::dfa::{Automaton, dense};
use regex_automata::util::syntax;

/// Largest dense DFA built for one pattern, in bytes (and the determinization budget). Typical
/// policy patterns are far smaller (`[^@]+@example\.com`: 6.3 KiB, `(primary|team)`: 1.9 KiB);
/// a Unicode `\w+` (160 KiB) stays on the `Regex`. So a policy's DFAs take at most 64 KiB per
/// pattern, built only for patterns that are used.
pub const DFA_SIZE_LIMIT: usize = 64 * 1024;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Matcher {
    regex: regex::Regex,
    case_insensitive: bool,
    /// The DFA, built on first use; `None` when the pattern has none within the limit.
    dfa: OnceLock<Option<dense::DFA<Vec<u32>>>>,
}

impl Matcher {
    /// A matcher for `regex`, which was built with `case_insensitive` and otherwise the
    /// `regex` crate's defaults.
    pub fn new(regex: regex::Regex, case_insensitive: bool) -> Matcher {
        Matcher {
            regex,
            case_insensitive,
            dfa: OnceLock::new(),
        }
    }

    /// The pattern as compiled.
    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }

    /// The `regex` crate's compiled form.
    pub fn regex(&self) -> &regex::Regex {
        &self.regex
    }

    /// True when the pattern matches somewhere in `text` (a `fieldMatches` pattern is anchored
    /// at both ends, so there it means the whole value).
    #[inline]
    pub fn is_match(&self, text: &str) -> bool {
        if let Some(dfa) = self.dfa() {
            let input = regex_automata::Input::new(text).earliest(true);
            if let Ok(found) = dfa.try_search_fwd(&input) {
                return found.is_some();
            }
        }
        self.regex.is_match(text)
    }

    /// True when a DFA serves this pattern (after building it if needed).
    pub fn has_dfa(&self) -> bool {
        self.dfa().is_some()
    }

    fn dfa(&self) -> Option<&dense::DFA<Vec<u32>>> {
        self.dfa
            .get_or_init(|| {
                dense::Builder::new()
                    .syntax(syntax::Config::new().case_insensitive(self.case_insensitive))
                    .configure(
                        dense::DFA::config()
                            .dfa_size_limit(Some(DFA_SIZE_LIMIT))
                            .determinize_size_limit(Some(DFA_SIZE_LIMIT)),
                    )
                    .build(self.regex.as_str())
                    .ok()
            })
            .as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn matcher(pattern: &str, case_insensitive: bool) -> Matcher {
        let regex = regex::RegexBuilder::new(pattern)
            .case_insensitive(case_insensitive)
            .build()
            .unwrap();
        Matcher::new(regex, case_insensitive)
    }

    const PATTERNS: &[(&str, bool)] = &[
        ("^(?:[^@]+@example\\.com)$", false),
        ("^(?:[^@]+@example\\.com)$", true),
        ("^(?:(primary|team))$", false),
        ("^(?:\\d{3}-\\d{4})$", false),
        ("^(?:[a-z]+ü\\w*)$", true),
        ("^(?:.*)$", false),
        ("^(?:)$", false),
        ("ab|^c$|d$", false),
        ("\\p{Greek}+", false),
        ("(?s)a.b", false),
        ("(?m)^x$", false),
        ("\\bword\\b", false),
    ];

    #[test]
    fn common_patterns_get_a_dfa_and_unicode_word_boundaries_do_not() {
        assert!(matcher(PATTERNS[0].0, false).has_dfa());
        assert!(matcher(PATTERNS[1].0, true).has_dfa());
        assert!(!matcher("\\bword\\b", false).has_dfa());
        // Unicode `\w` determinizes to ~160 KiB: over the limit, so it stays on the regex.
        assert!(!matcher("^(?:\\w+)$", false).has_dfa());
        assert!(matcher("^(?:\\w+)$", false).is_match("añb"));
        assert!(matcher("\\bword\\b", false).is_match("a word here"));
        assert!(!matcher("\\bword\\b", false).is_match("swordfish"));
    }

    #[test]
    fn a_pattern_too_large_for_a_dfa_still_matches_through_the_regex() {
        let big = matcher("^(?:\\w{200}[a-z]{50})$", false);
        assert!(!big.has_dfa());
        let text = format!("{}{}", "é".repeat(200), "z".repeat(50));
        assert!(big.is_match(&text));
        assert!(!big.is_match("short"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// The DFA and the `regex` crate agree on every pattern, case flag and text.
        #[test]
        fn the_dfa_agrees_with_the_regex(
            which in 0..PATTERNS.len(),
            text in "(?s)[a-zA-Z0-9@.\\- \nüÜéΣσ_]{0,24}|[a-z]{1,8}@example\\.(com|COM|org)",
        ) {
            // Built once for all cases: a DFA takes a while to build in a debug build.
            static MATCHERS: OnceLock<Vec<Matcher>> = OnceLock::new();
            let matchers = MATCHERS.get_or_init(|| {
                PATTERNS.iter().map(|(p, ci)| matcher(p, *ci)).collect()
            });
            let fast = &matchers[which];
            prop_assert_eq!(
                fast.is_match(&text),
                fast.regex().is_match(&text),
                "{} on {:?}",
                fast.as_str(),
                text
            );
        }
    }
}
