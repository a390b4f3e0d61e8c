//! The line editor's helper: [`ReplHelper`] completes commands, keywords, skill and capability
//! names and paths (file names after `:load`) and colours the prompt; [`Block`] gathers the
//! lines typed into inputs, reading on under [`CONTINUATION`] while a `{` or `[` is open.

use std::borrow::Cow;

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;
use rustyline::{Context, Helper};

use capgate_authoring::repl::line_depth;

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

/// Every line is accepted as typed: an open block continues in [`Block`], under its own
/// prompt, rather than inside one editor buffer, which rustyline shows with no prompt at all
/// and which a `:` command could not end.
impl Validator for ReplHelper {}

impl Helper for ReplHelper {}

/// The prompt of a line that continues an open `{` or `[`, as wide as the first prompt.
pub const CONTINUATION: &str = "     ... ";

/// Lines typed at the prompt, gathered into the inputs the repl handles: a line that leaves a
/// `{` or `[` open continues on the next (shown under [`CONTINUATION`]) until the brackets
/// balance, and a `:` command line ends an unfinished block — the block is handled (and its
/// error shown) first, then the command — as in scripted input.
#[derive(Debug, Default)]
pub struct Block {
    pending: String,
    /// The running total of open brackets over the pending lines.
    depth: i64,
}

impl Block {
    /// True while a block is open: the next line continues it.
    pub fn is_open(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Adds what the editor returned (one line, or several from a recalled history entry) and
    /// returns the inputs now complete, in order.
    pub fn push(&mut self, typed: &str) -> Vec<String> {
        let mut ready = Vec::new();
        for line in typed.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if self.is_open() && line.trim_start().starts_with(':') {
                ready.extend(self.take());
            }
            if self.is_open() {
                self.pending.push('\n');
            }
            self.pending.push_str(line);
            self.depth = self.depth.saturating_add(line_depth(line));
            if self.depth <= 0 {
                self.depth = 0;
                ready.push(std::mem::take(&mut self.pending));
            }
        }
        ready
    }

    /// The unfinished block, to be reported (at the end of input), unless it is blank.
    pub fn take(&mut self) -> Option<String> {
        self.depth = 0;
        let pending = std::mem::take(&mut self.pending);
        (!pending.trim().is_empty()).then_some(pending)
    }

    /// Drops the unfinished block (Ctrl-C).
    pub fn abandon(&mut self) {
        self.pending.clear();
        self.depth = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repl_continues_an_unclosed_bracket() {
        let mut block = Block::default();
        assert_eq!(block.push(r#"{"skill": "mail","#), Vec::<String>::new());
        assert!(
            block.is_open(),
            "an open `{{` continues under the continuation prompt"
        );
        assert_eq!(block.push(r#""payload": [1,"#), Vec::<String>::new());
        assert_eq!(
            block.push("2]}"),
            ["{\"skill\": \"mail\",\n\"payload\": [1,\n2]}"]
        );
        assert!(!block.is_open());
        // Brackets inside strings, regexes and comments do not count.
        assert_eq!(
            block.push(r#"fieldMatches payload.a ~ /[{/ # {"#),
            ["fieldMatches payload.a ~ /[{/ # {"]
        );
    }

    #[test]
    fn a_command_line_ends_an_open_block() {
        let mut block = Block::default();
        assert!(block.push("skill \"s\" {").is_empty());
        assert!(block.push("  version \"1\"").is_empty());
        // The unfinished block is handled first (and reported), then the command.
        assert_eq!(
            block.push(":quit"),
            ["skill \"s\" {\n  version \"1\"", ":quit"]
        );
        assert!(!block.is_open());
        // A recalled multi-line history entry is read line by line.
        assert_eq!(block.push("{\"a\":\n1}"), ["{\"a\":\n1}"]);
        // Ctrl-C drops the block; end of input reports it.
        assert!(block.push("[").is_empty());
        block.abandon();
        assert!(!block.is_open());
        assert!(block.push("[ 1,").is_empty());
        assert_eq!(block.take().as_deref(), Some("[ 1,"));
        assert_eq!(block.take(), None);
    }

    #[test]
    fn the_continuation_prompt_is_as_wide_as_the_prompt() {
        assert_eq!(
            CONTINUATION.chars().count(),
            super::super::PROMPT.chars().count()
        );
    }

    #[test]
    fn a_word_starts_after_a_space_or_a_json_quote() {
        assert_eq!(word_start(":lo", 3), 0);
        assert_eq!(word_start(":grant ema", 10), 7);
        assert_eq!(word_start(r#"{"skill": "ema"#, 14), 11);
        assert_eq!(word_start("fieldEquals payload.a[*].b", 26), 12);
    }
}
