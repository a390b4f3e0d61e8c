//! The canonical layout: tokens → text.
//!
//! Rules, applied to the token sequence alone (so that formatting twice gives the same text):
//! - blocks (`skill`, `capability`, `any`, `all`, `not`) put each item on its own line, indented
//!   two spaces per level; an item starts at a field or constraint keyword (`optional` keeps the
//!   keyword after it on its line);
//! - tokens on one line are separated by one space (none before `,` and `:`);
//! - an embedded JSON object or array is written on one line (`{ "type": "string" }`,
//!   `["a", "b"]`) when it holds no comment and fits in [`FLAT_JSON_WIDTH`] characters, otherwise
//!   one member or element per line;
//! - comments stay where they were: a comment on its own line stays on its own line (indented
//!   with the code), a comment after code stays after that code;
//! - one empty line is kept where the source had one or more between two lines; none is kept
//!   right after `{`, right before `}`, or at the start of the file; the text ends with one line
//!   break.

use capgate::ConstraintKeyword;
use capgate::vocabulary::{CONSTRAINT_WORDS, ITEM_WORDS, OPTIONAL};

use super::lex::{Token, TokenKind};

/// The widest embedded JSON value written on one line.
pub const FLAT_JSON_WIDTH: usize = 60;

/// True when `word` starts an item of a block.
fn starts_item(word: &str) -> bool {
    ITEM_WORDS.contains(&word) || CONSTRAINT_WORDS.contains(&word)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    Block,
    Json,
}

struct Layout {
    out: String,
    line: String,
    level: usize,
    stack: Vec<Context>,
    /// The next token starts a new line.
    force_break: bool,
    /// The next line starts a new item or element (no continuation indent).
    structural: bool,
    /// The last line written opened a block or a JSON value.
    just_opened: bool,
}

impl Layout {
    fn context(&self) -> Context {
        self.stack.last().copied().unwrap_or(Context::Block)
    }

    fn flush(&mut self) {
        if !self.line.is_empty() {
            self.out.push_str(self.line.trim_end());
            self.out.push('\n');
            self.line.clear();
        }
    }

    fn start_line(&mut self, blank: bool, extra_indent: usize) {
        self.flush();
        if blank && !self.just_opened && !self.out.is_empty() {
            self.out.push('\n');
        }
        self.just_opened = false;
        for _ in 0..self.level.saturating_add(extra_indent) {
            self.line.push_str("  ");
        }
    }
}

/// Lays out a token sequence in the canonical form.
pub(crate) fn layout(tokens: &[Token<'_>]) -> String {
    let mut state = Layout {
        out: String::new(),
        line: String::new(),
        level: 0,
        stack: Vec::new(),
        force_break: true,
        structural: true,
        just_opened: false,
    };
    let mut previous: Option<&Token<'_>> = None;
    let mut before_previous: Option<&Token<'_>> = None;
    let mut i = 0;
    while let Some(token) = tokens.get(i) {
        if token.kind == TokenKind::Comment {
            if token.newline_before || state.line.trim().is_empty() {
                state.start_line(token.blank_before, 0);
                state.line.push_str(token.text);
                state.flush();
            } else {
                state.line.push(' ');
                state.line.push_str(token.text);
                state.flush();
            }
            state.force_break = true;
            i += 1;
            continue;
        }
        let closing = matches!(token.kind, TokenKind::RBrace | TokenKind::RBracket);
        if closing {
            state.stack.pop();
            state.level = state.level.saturating_sub(1);
        }
        let context = state.context();
        let item_start = context == Context::Block
            && (closing
                || (token.kind == TokenKind::Word
                    && starts_item(token.text)
                    && previous.is_none_or(|p| p.text != OPTIONAL)));
        if state.force_break || item_start || closing {
            let extra = usize::from(!(state.structural || item_start || closing));
            state.start_line(token.blank_before && !closing, extra);
        } else if !matches!(token.kind, TokenKind::Comma | TokenKind::Colon) {
            state.line.push(' ');
        }
        state.force_break = false;
        state.structural = false;
        match token.kind {
            TokenKind::LBrace
                if context == Context::Block && opens_block(previous, before_previous) =>
            {
                state.line.push('{');
                state.stack.push(Context::Block);
                state.level += 1;
                state.force_break = true;
                state.structural = true;
                state.just_opened = true;
            }
            TokenKind::LBrace | TokenKind::LBracket => {
                let close = matching_close(tokens, i);
                match close.and_then(|close| flat_json(tokens.get(i..=close)?)) {
                    Some(flat) => {
                        state.line.push_str(&flat);
                        i = close.unwrap_or(i);
                    }
                    None => {
                        state.line.push_str(token.text);
                        state.stack.push(Context::Json);
                        state.level += 1;
                        state.force_break = true;
                        state.structural = true;
                        state.just_opened = true;
                    }
                }
            }
            TokenKind::RBrace | TokenKind::RBracket => {
                state.line.push_str(token.text);
                if context == Context::Block {
                    state.force_break = true;
                    state.structural = true;
                }
            }
            TokenKind::Comma if context == Context::Json => {
                state.line.push(',');
                state.force_break = true;
                state.structural = true;
            }
            _ => state.line.push_str(token.text),
        }
        before_previous = previous;
        previous = tokens.get(i);
        i += 1;
    }
    state.flush();
    state.out
}

/// True when a `{` opens a block: after `any`/`all`/`not`, or after `skill "name"` or
/// `capability "name"`.
fn opens_block(previous: Option<&Token<'_>>, before_previous: Option<&Token<'_>>) -> bool {
    match previous {
        Some(p) if p.kind == TokenKind::Word => {
            ConstraintKeyword::from_name(p.text).is_some_and(ConstraintKeyword::is_combinator)
        }
        Some(p) if p.kind == TokenKind::Str => {
            before_previous.is_some_and(|b| matches!(b.text, "skill" | "capability"))
        }
        _ => false,
    }
}

/// The index of the bracket closing the one at `open`, if any.
fn matching_close(tokens: &[Token<'_>], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, token) in tokens.get(open..)?.iter().enumerate() {
        match token.kind {
            TokenKind::LBrace | TokenKind::LBracket => depth += 1,
            TokenKind::RBrace | TokenKind::RBracket => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

/// The one-line form of a JSON value, if it holds no comment and is narrow enough.
fn flat_json(tokens: &[Token<'_>]) -> Option<String> {
    let mut text = String::new();
    let mut previous: Option<TokenKind> = None;
    for token in tokens {
        if token.kind == TokenKind::Comment {
            return None;
        }
        let tight = matches!(
            (previous, token.kind),
            (None, _)
                | (_, TokenKind::Comma | TokenKind::Colon | TokenKind::RBracket)
                | (Some(TokenKind::LBracket), _)
                | (Some(TokenKind::LBrace), TokenKind::RBrace)
        );
        if !tight {
            text.push(' ');
        }
        text.push_str(token.text);
        if text.chars().count() > FLAT_JSON_WIDTH {
            return None;
        }
        previous = Some(token.kind);
    }
    Some(text)
}
