//! The line editor's helper: [`ReplHelper`] completes commands, keywords, skill and capability
//! names and paths (file names after `:load`), keeps reading lines while a `{` or `[` is open,
//! and colours the prompt.

use std::borrow::Cow;

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use capgate::authoring::needs_more_input;

use super::style::Style;
use super::vocabulary::Vocabulary;

/// Completion, multi-line validation and prompt colour for the repl's editor.
pub struct ReplHelper {
    vocabulary: Vocabulary,
    files: FilenameCompleter,
    style: Style,
}

impl ReplHelper {
    /// A helper completing from `vocabulary`.
    pub fn new(vocabulary: Vocabulary, style: Style) -> Self {
        ReplHelper {
            vocabulary,
            files: FilenameCompleter::new(),
            style,
        }
    }
}

/// Where the word ending at `pos` starts: after whitespace, a quote, or an opening bracket of
/// JSON (a path's own `[` belongs to the word).
fn word_start(line: &str, pos: usize) -> usize {
    let head = line.get(..pos).unwrap_or(line);
    head.char_indices()
        .rev()
        .find(|(_, c)| c.is_whitespace() || matches!(c, '"' | '{' | '(' | ','))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let start = word_start(line, pos);
        let before = line.get(..start).unwrap_or("");
        let command = line
            .trim_start()
            .starts_with(':')
            .then(|| line.split_whitespace().next())
            .flatten()
            .filter(|_| !before.trim().is_empty());
        if command == Some(":load") {
            return self.files.complete(line, pos, ctx);
        }
        let prefix = line.get(start..pos).unwrap_or("");
        let line_start = before.trim().is_empty();
        let candidates = self
            .vocabulary
            .complete(prefix, line_start, command)
            .into_iter()
            .map(|word| Pair {
                display: word.clone(),
                replacement: word,
            })
            .collect();
        Ok((start, candidates))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}

impl Highlighter for ReplHelper {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(
        &'s self,
        prompt: &'p str,
        default: bool,
    ) -> Cow<'b, str> {
        if default && self.style.coloured() {
            Cow::Owned(self.style.prompt(prompt))
        } else {
            Cow::Borrowed(prompt)
        }
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        if needs_more_input(ctx.input()) {
            Ok(ValidationResult::Incomplete)
        } else {
            Ok(ValidationResult::Valid(None))
        }
    }
}

impl Helper for ReplHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_starts_after_a_space_or_a_json_quote() {
        assert_eq!(word_start(":lo", 3), 0);
        assert_eq!(word_start(":grant ema", 10), 7);
        assert_eq!(word_start(r#"{"skill": "ema"#, 14), 11);
        assert_eq!(word_start("fieldEquals payload.a[*].b", 26), 12);
    }
}
