//! The formatter's lexer: `.cap` text → [`Token`]s, comments and line breaks included.
//!
//! The lexer only needs to find the places where whitespace may be changed without changing what
//! the pest grammar reads. Everything the grammar reads as one atomic unit — a path such as
//! `payload.items[*]["a b"]`, a string, a regex with its flags, a number, a duration, a
//! timestamp, a time range such as `09:00-17:00` — is one [`TokenKind::Word`], [`TokenKind::Str`]
//! or [`TokenKind::Regex`] here, so the layout can put any amount of whitespace between tokens and
//! never inside one.

/// What a token is, as far as layout cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A name, keyword, path, number, duration, timestamp or time range.
    Word,
    /// A `"..."` string, quotes included.
    Str,
    /// A `/.../flags` regex literal.
    Regex,
    /// `==`, `<`, `<=`, `>`, `>=` or `~`.
    Op,
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `,`
    Comma,
    /// `:`
    Colon,
    /// A `//` or `#` comment, without the line break (trailing whitespace trimmed).
    Comment,
}

/// One token with the layout facts of the whitespace before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    /// What it is.
    pub kind: TokenKind,
    /// Its text, exactly as written.
    pub text: &'a str,
    /// A line break came between the previous token and this one.
    pub newline_before: bool,
    /// An empty line came between the previous token and this one.
    pub blank_before: bool,
}

/// Splits `.cap` text into tokens. Never fails: text the grammar would reject still lexes into
/// something (the formatter only runs on text that parsed).
pub(crate) fn lex(text: &str) -> Vec<Token<'_>> {
    let mut tokens: Vec<Token<'_>> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut newlines = 0usize;
    while let Some(&byte) = bytes.get(i) {
        let start = i;
        let kind = match byte {
            b'\n' => {
                newlines += 1;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                i = line_end(bytes, i);
                TokenKind::Comment
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = line_end(bytes, i);
                TokenKind::Comment
            }
            b'/' if last_significant(&tokens).is_some_and(|t| t.text == "~") => {
                i = delimited_end(bytes, i + 1, b'/');
                while bytes.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                    i += 1;
                }
                TokenKind::Regex
            }
            b'"' => {
                i = delimited_end(bytes, i + 1, b'"');
                TokenKind::Str
            }
            b'{' => single(&mut i, TokenKind::LBrace),
            b'}' => single(&mut i, TokenKind::RBrace),
            b'[' => single(&mut i, TokenKind::LBracket),
            b']' => single(&mut i, TokenKind::RBracket),
            b',' => single(&mut i, TokenKind::Comma),
            b':' => single(&mut i, TokenKind::Colon),
            b'~' => single(&mut i, TokenKind::Op),
            b'=' | b'<' | b'>' | b'!' => {
                while bytes
                    .get(i)
                    .is_some_and(|b| matches!(b, b'=' | b'<' | b'>' | b'!'))
                {
                    i += 1;
                }
                TokenKind::Op
            }
            _ => {
                i = word_end(bytes, i);
                TokenKind::Word
            }
        };
        // Always make progress, whatever the input.
        if i <= start {
            i = next_char_boundary(text, start);
        }
        let mut token_text = text.get(start..i).unwrap_or("");
        if kind == TokenKind::Comment {
            token_text = token_text.trim_end();
        }
        tokens.push(Token {
            kind,
            text: token_text,
            newline_before: newlines > 0,
            blank_before: newlines > 1,
        });
        newlines = 0;
    }
    tokens
}

fn single(i: &mut usize, kind: TokenKind) -> TokenKind {
    *i += 1;
    kind
}

fn next_char_boundary(text: &str, start: usize) -> usize {
    let mut end = start + 1;
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    end.min(text.len())
}

fn last_significant<'t, 'a>(tokens: &'t [Token<'a>]) -> Option<&'t Token<'a>> {
    tokens.iter().rev().find(|t| t.kind != TokenKind::Comment)
}

/// The index of the line break ending the line that contains `i` (or the end of the text).
fn line_end(bytes: &[u8], i: usize) -> usize {
    bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        .map_or(bytes.len(), |offset| i + offset)
}

/// The index just past the closing `delimiter`, honouring `\` escapes; an unterminated literal
/// ends at the line break.
fn delimited_end(bytes: &[u8], mut i: usize, delimiter: u8) -> usize {
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'\\' if bytes.get(i + 1).is_some_and(|&b| b != b'\n') => i += 2,
            b'\n' => return i,
            _ if byte == delimiter => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The end of a word: a run of characters up to whitespace, punctuation, a string or a comment.
/// A `[` right after the word's text that opens a path segment (`["key"]`, `[3]`, `[*]`) and its
/// `]` are part of the word, as in the grammar's atomic `path` rule.
fn word_end(bytes: &[u8], mut i: usize) -> usize {
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' | b'{' | b'}' | b']' | b',' | b'"' | b'#' | b'~'
            | b'=' | b'<' | b'>' | b'!' => return i,
            b'/' if bytes.get(i + 1) == Some(&b'/') => return i,
            b'[' => match bracket_segment_end(bytes, i) {
                Some(end) => i = end,
                None => return i,
            },
            _ => i += 1,
        }
    }
    i
}

/// The index past `["key"]`, `[digits]` or `[*]` starting at the `[` at `i`, if one is there.
fn bracket_segment_end(bytes: &[u8], i: usize) -> Option<usize> {
    let inner = i + 1;
    let close = match bytes.get(inner)? {
        b'*' => inner + 1,
        b'"' => {
            let end = delimited_end(bytes, inner + 1, b'"');
            (bytes.get(end.checked_sub(1)?) == Some(&b'"') && end > inner + 1).then_some(end)?
        }
        b if b.is_ascii_digit() => {
            let mut j = inner;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            j
        }
        _ => return None,
    };
    (bytes.get(close) == Some(&b']')).then_some(close + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_and_texts(text: &str) -> Vec<(TokenKind, &str)> {
        lex(text).into_iter().map(|t| (t.kind, t.text)).collect()
    }

    #[test]
    fn paths_with_brackets_are_one_word() {
        let tokens = kinds_and_texts(r#"payload.a[*]["b c"][3].d == 1"#);
        assert_eq!(
            tokens,
            vec![
                (TokenKind::Word, r#"payload.a[*]["b c"][3].d"#),
                (TokenKind::Op, "=="),
                (TokenKind::Word, "1"),
            ]
        );
    }

    #[test]
    fn a_regex_follows_a_tilde_even_across_a_comment() {
        let tokens = kinds_and_texts("x ~ // note\n /a#b\\/c/i // tail");
        assert_eq!(
            tokens,
            vec![
                (TokenKind::Word, "x"),
                (TokenKind::Op, "~"),
                (TokenKind::Comment, "// note"),
                (TokenKind::Regex, "/a#b\\/c/i"),
                (TokenKind::Comment, "// tail"),
            ]
        );
    }

    #[test]
    fn strings_keep_comment_markers_and_escaped_quotes() {
        let tokens = kinds_and_texts(r#""a # b \" // c" # real"#);
        assert_eq!(
            tokens,
            vec![
                (TokenKind::Str, r#""a # b \" // c""#),
                (TokenKind::Comment, "# real"),
            ]
        );
    }

    #[test]
    fn blank_lines_are_recorded_on_the_next_token() {
        let tokens = lex("a\nb\n\n\nc");
        let flags: Vec<(bool, bool)> = tokens
            .iter()
            .map(|t| (t.newline_before, t.blank_before))
            .collect();
        assert_eq!(flags, vec![(false, false), (true, false), (true, true)]);
    }

    #[test]
    fn a_json_array_after_a_word_is_not_a_path_segment() {
        let tokens = kinds_and_texts(r#"in["a", "b"]"#);
        assert_eq!(tokens.first(), Some(&(TokenKind::Word, "in")));
        assert_eq!(tokens.get(1), Some(&(TokenKind::LBracket, "[")));
    }
}
