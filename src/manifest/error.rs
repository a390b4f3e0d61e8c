//! Errors of the JSON manifest front end, and the "did you mean" suggestion they carry.
//!
//! [`ManifestError`] is the one error type of this layer: JSON syntax errors, shape errors found
//! while lowering a manifest to the AST, and the few ASTs the JSON form cannot express.

use crate::span::Span;

/// A manifest error with the place it was found and an optional one-line hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct ManifestError {
    /// Where the problem is.
    pub span: Span,
    /// Lowercase, one line, no final period; user input in backticks.
    pub message: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}

impl ManifestError {
    /// An error without help text.
    pub(crate) fn new(span: Span, message: impl Into<String>) -> Self {
        ManifestError {
            span,
            message: message.into(),
            help: None,
        }
    }

    /// The same error with help text.
    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// The candidate closest to `word` by edit distance, if it is within 2 edits (and closer than
/// rewriting the candidate entirely).
pub(crate) fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (levenshtein(word, c), *c))
        .filter(|(distance, c)| *distance <= 2 && *distance < c.chars().count())
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// Edit distance (insertions, deletions, substitutions) between two strings, by characters.
pub(crate) fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    // `row[j]` is the distance between the prefix of `a` read so far and `b[..j]`.
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = i;
        let mut left = i + 1;
        let mut next = Vec::with_capacity(row.len());
        next.push(left);
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX);
            let cost = usize::from(ca != *cb);
            let value = (diagonal + cost).min(up.saturating_add(1)).min(left + 1);
            next.push(value);
            diagonal = up;
            left = value;
        }
        row = next;
    }
    row.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levenshtein_counts_single_character_edits() {
        assert_eq!(levenshtein("", ""), 0);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("justfication", "justification"), 1);
        assert_eq!(levenshtein("opertions", "operations"), 1);
        assert_eq!(levenshtein("ab", "ba"), 2);
    }

    #[test]
    fn suggestion_is_the_closest_known_word_within_two_edits() {
        let known = ["field", "fields", "pattern"];
        assert_eq!(did_you_mean("feild", &known), Some("field"));
        assert_eq!(did_you_mean("fieldz", &known), Some("field"));
        assert_eq!(did_you_mean("patern", &known), Some("pattern"));
        assert_eq!(did_you_mean("zzzzzz", &known), None);
    }

    #[test]
    fn suggestion_is_not_made_for_words_unrelated_but_short() {
        assert_eq!(did_you_mean("x", &["in"]), None);
    }
}
