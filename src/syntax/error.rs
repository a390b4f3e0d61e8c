//! Errors of the `.cap` front end.
//!
//! [`SyntaxError`] is the one error type of this layer: a span, a one-line message and an
//! optional hint. The parser returns every error it can find in one go (pest syntax errors stop
//! at the first; errors found while building the AST are all collected). This module also holds
//! the small helpers that make messages friendlier (`did_you_mean`, `one_of`).

use crate::span::Span;

/// A syntax error with the place it was found and a one-line hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("{message}")]
pub struct SyntaxError {
    /// Where the problem is.
    pub span: Span,
    /// Lowercase, one line, no final period; user input in backticks.
    pub message: String,
    /// What to do about it.
    #[help]
    pub help: Option<String>,
}

impl SyntaxError {
    /// An error without a hint.
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        SyntaxError {
            span,
            message: message.into(),
            help: None,
        }
    }

    /// Adds a hint.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// The candidate closest to `word` within edit distance 2 (and not equal to it), if any.
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|candidate| *candidate != word)
        .map(|candidate| (edit_distance(word, candidate), candidate))
        // Within two edits, and fewer than the word has characters (`y` is not `any`).
        .filter(|(distance, _)| *distance <= 2 && *distance < word.chars().count())
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// `did you mean `x`?` for the closest candidate, if one is close enough.
pub(crate) fn suggestion<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    did_you_mean(word, candidates).map(|best| format!("did you mean `{best}`?"))
}

/// Levenshtein distance over characters; gives up (returns a large number) on long inputs so a
/// pathological word cannot make an error message slow.
fn edit_distance(a: &str, b: &str) -> usize {
    const GIVE_UP: usize = 64;
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > GIVE_UP || b.len() > GIVE_UP {
        return usize::MAX;
    }
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        if let Some(first) = current.first_mut() {
            *first = i + 1;
        }
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous.get(j).copied().unwrap_or(usize::MAX);
            let delete = previous.get(j + 1).copied().unwrap_or(usize::MAX);
            let insert = current.get(j).copied().unwrap_or(usize::MAX);
            let cost = substitute.saturating_add(usize::from(ca != cb));
            let best = cost
                .min(delete.saturating_add(1))
                .min(insert.saturating_add(1));
            if let Some(cell) = current.get_mut(j + 1) {
                *cell = best;
            }
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous.last().copied().unwrap_or(usize::MAX)
}

/// Joins descriptions as `a`, `a or b`, `a, b or c`.
pub(crate) fn one_of(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("payload", "payload"), 0);
        assert_eq!(edit_distance("paylod", "payload"), 1);
        assert_eq!(edit_distance("agnet", "agent"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn did_you_mean_picks_the_closest_within_two_edits() {
        let roots = ["payload", "agent", "context", "resource", "request"];
        assert_eq!(did_you_mean("paylod", roots), Some("payload"));
        assert_eq!(did_you_mean("requst", roots), Some("request"));
        assert_eq!(did_you_mean("body", roots), None);
    }

    #[test]
    fn one_of_joins_with_commas_and_or() {
        let items = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(one_of(&items(&["a"])), "a");
        assert_eq!(one_of(&items(&["a", "b"])), "a or b");
        assert_eq!(one_of(&items(&["a", "b", "c"])), "a, b or c");
    }
}
