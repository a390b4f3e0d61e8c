//! The `.cap` parser: text → pest parse tree → AST (via [`super::lower`]).
//!
//! [`parse`] is the entry point. It runs in three steps:
//! 1. a cheap lexical pre-scan that rejects bracket nesting deeper than [`MAX_NESTING`], so that
//!    neither pest nor the lowering pass can recurse without bound on hostile input;
//! 2. the pest parser generated from `grammar/capgate.pest` (a syntax error stops here, and is
//!    turned into one [`SyntaxError`] whose message names what was expected in words, not rule
//!    names);
//! 3. lowering the parse tree into the AST, collecting every error found on the way.

use pest::Parser as _;
use pest::error::{ErrorVariant, InputLocation};

use super::ast::PolicyFile;
use super::error::{SyntaxError, did_you_mean, one_of};
use super::lower;
use super::units;
use crate::span::{FileId, Span};
use crate::vocabulary::CONSTRAINT_WORDS;

mod grammar {
    //! The parser pest derives from `grammar/capgate.pest`; every rule is documented there.
    #![allow(missing_docs)]

    /// The generated `.cap` parser.
    #[derive(pest_derive::Parser)]
    #[grammar = "../grammar/capgate.pest"]
    pub(crate) struct CapParser;
}

pub(crate) use grammar::Rule;

/// The deepest nesting of `{` and `[` (blocks, combinators, JSON literals) a file may have.
///
/// Combinators have their own, lower limit ([`lower::MAX_COMBINATOR_DEPTH`]); this one exists so
/// that the recursive-descent parser and the lowering pass are bounded on any input.
pub(crate) use crate::limits::MAX_POLICY_NESTING as MAX_NESTING;

/// Parses one `.cap` file.
///
/// Returns the AST, or every error found: one syntax error if the text does not match the
/// grammar, otherwise all the errors found while building the AST (unknown names, bad
/// durations, duplicate fields, ...). Never panics, whatever the input.
pub fn parse(file: FileId, text: &str) -> Result<PolicyFile, Vec<SyntaxError>> {
    match parse_partial(file, text) {
        (Some(policy), errors) if errors.is_empty() => Ok(policy),
        (_, errors) => Err(errors),
    }
}

/// [`parse`], returning with the errors found while building the AST the parts that were
/// well-formed (malformed fields absent, malformed constraints dropped), so that the compiler
/// can check those too and a load lists every error in one pass (SPEC §7). The policy is
/// `None` when the text does not match the grammar; with no errors it is the policy [`parse`]
/// returns.
pub(crate) fn parse_partial(file: FileId, text: &str) -> (Option<PolicyFile>, Vec<SyntaxError>) {
    let checked = check_line_ends(file, text).and_then(|()| check_nesting(file, text));
    if let Err(error) = checked {
        return (None, vec![error]);
    }
    let mut errors = check_bidi(file, text);
    match grammar::CapParser::parse(Rule::file, text) {
        Ok(pairs) => {
            let (policy, lowering) = lower::lower_file(file, pairs);
            errors.extend(lowering);
            (Some(policy), errors)
        }
        Err(error) => {
            // A bidi control in the code is where the grammar stops too: said once.
            let error = from_pest(file, text, &error);
            if !errors.iter().any(|e| e.span.start == error.span.start) {
                errors.push(error);
            }
            (None, errors)
        }
    }
}

/// Rejects every bidirectional control outside a string literal — in a comment, a regex literal
/// or between tokens — where it can make the policy a reviewer approves read differently from
/// the one that runs (Trojan Source: a comment that seems to end before a constraint hides it).
/// Inside a string literal it is a value the policy means; `capgate lint` flags it there. Strings,
/// comments and regex literals are found the way [`check_nesting`] finds them.
fn check_bidi(file: FileId, text: &str) -> Vec<SyntaxError> {
    let mut errors = Vec::new();
    if text.is_ascii() {
        return errors;
    }
    let bytes = text.as_bytes();
    let mut after_tilde = false;
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        // The end of the comment, regex or character at `i` (always a character boundary:
        // the skips stop at an ASCII byte or the end).
        let end = match byte {
            b'"' => {
                after_tilde = false;
                i = skip_delimited(bytes, i + 1, b'"');
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => skip_line(bytes, i),
            b'#' => skip_line(bytes, i),
            b'/' if after_tilde => skip_delimited(bytes, i + 1, b'/'),
            _ => {
                i + text
                    .get(i..)
                    .and_then(|rest| rest.chars().next())
                    .map_or(1, char::len_utf8)
            }
        };
        match byte {
            b'~' => after_tilde = true,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => after_tilde = false,
        }
        for (at, c) in text.get(i..end).unwrap_or_default().char_indices() {
            if crate::value::is_bidi_control(c) {
                errors.push(bidi_error(file, i + at, c));
            }
        }
        i = end.max(i + 1);
    }
    errors
}

/// The error for a bidirectional control `c` at byte `at`, outside a string literal.
fn bidi_error(file: FileId, at: usize, c: char) -> SyntaxError {
    SyntaxError::new(
        Span::new(file, at, at + c.len_utf8()),
        format!(
            "bidirectional control U+{:04X} outside a string literal",
            u32::from(c)
        ),
    )
    .with_help(
        "it can make the policy read differently from how it runs; delete it (in a string, write \
         it as an escape such as `\\u202e`; in a regex, `\\x{202e}`)",
    )
}

/// Rejects a carriage return that is not followed by a line feed. Most editors show one as a line
/// break, but a comment runs to the next line feed, so `// note\r fieldEquals ...` would hide
/// the constraint after it inside the comment (regression: such a policy loaded without the
/// constraint). `\r\n` line ends are fine.
fn check_line_ends(file: FileId, text: &str) -> Result<(), SyntaxError> {
    let bytes = text.as_bytes();
    let bare = bytes
        .iter()
        .enumerate()
        .find(|&(at, &byte)| byte == b'\r' && bytes.get(at + 1) != Some(&b'\n'));
    match bare {
        Some((at, _)) => Err(SyntaxError::new(
            Span::new(file, at, at + 1),
            "a carriage return that does not end a line (not followed by a line feed)",
        )
        .with_help(
            "use `\\n` or `\\r\\n` line ends; editors may show a lone `\\r` as a line break",
        )),
        None => Ok(()),
    }
}

/// Rejects bracket nesting deeper than [`MAX_NESTING`], skipping strings, comments and regex
/// literals the way the grammar does.
fn check_nesting(file: FileId, text: &str) -> Result<(), SyntaxError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut after_tilde = false;
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'"' => {
                i = skip_delimited(bytes, i + 1, b'"');
                after_tilde = false;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = skip_line(bytes, i);
                continue;
            }
            b'#' => {
                i = skip_line(bytes, i);
                continue;
            }
            b'/' if after_tilde => {
                i = skip_delimited(bytes, i + 1, b'/');
                after_tilde = false;
                continue;
            }
            b'~' => after_tilde = true,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'{' | b'[' => {
                after_tilde = false;
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(SyntaxError::new(
                        Span::new(file, i, i + 1),
                        format!("nesting deeper than {MAX_NESTING} levels of `{{` and `[`"),
                    )
                    .with_help("flatten the policy; deeply nested blocks are never needed"));
                }
            }
            b'}' | b']' => {
                after_tilde = false;
                depth = depth.saturating_sub(1);
            }
            _ => after_tilde = false,
        }
        i += 1;
    }
    Ok(())
}

/// The index just past the closing `delimiter` (honouring `\` escapes), or of the line end or
/// file end if the literal is unterminated.
fn skip_delimited(bytes: &[u8], mut i: usize, delimiter: u8) -> usize {
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'\\' => i += 2,
            b'\n' => return i,
            _ if byte == delimiter => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index of the next line break (or the end).
fn skip_line(bytes: &[u8], i: usize) -> usize {
    bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
        .map_or(bytes.len(), |offset| i + offset)
}

/// Turns a pest error into a readable [`SyntaxError`] at the failure point.
fn from_pest(file: FileId, text: &str, error: &pest::error::Error<Rule>) -> SyntaxError {
    let position = match error.location {
        InputLocation::Pos(position) => position,
        InputLocation::Span((start, _)) => start,
    };
    let found = found_at(text, position);
    let end = (position + found.len().max(1))
        .min(text.len())
        .max(position);
    let span = Span::new(file, position, end);
    match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let mut expected: Vec<String> = Vec::new();
            let mut positives = positives.clone();
            positives.sort_by_key(|rule| rank(*rule));
            for rule in &positives {
                let name = describe(*rule).to_owned();
                if !expected.contains(&name) {
                    expected.push(name);
                }
            }
            let found_text = describe_found(&found);
            let message = if expected.is_empty() {
                format!("unexpected {found_text}")
            } else {
                format!("expected {}, found {found_text}", one_of(&expected))
            };
            let mut syntax_error = SyntaxError::new(span, message);
            let before = text.get(..position).unwrap_or("");
            let rest = text.get(position..).unwrap_or("");
            if let Some(help) = help_for(&found, before, rest, &positives) {
                syntax_error = syntax_error.with_help(help);
            }
            syntax_error
        }
        ErrorVariant::CustomError { message } => {
            SyntaxError::new(span, format!("the policy could not be parsed: {message}"))
                .with_help("the file is too large or too deeply nested for the parser")
        }
    }
}

/// Where a rule comes in an "expected ..." list: constructs first, then punctuation, then the
/// end of the file.
fn rank(rule: Rule) -> u8 {
    match rule {
        Rule::lbrace
        | Rule::rbrace
        | Rule::lbracket
        | Rule::rbracket
        | Rule::comma
        | Rule::colon
        | Rule::eq_op
        | Rule::tilde
        | Rule::minus
        | Rule::cmp_op => 1,
        Rule::EOI => 2,
        _ => 0,
    }
}

/// The text at `position` that the parser stumbled on: a name-like run, one character, or
/// nothing at the end of the file.
fn found_at(text: &str, position: usize) -> String {
    // How much of a name-like run a message quotes, in characters.
    const FOUND_CHARS: usize = 40;
    let rest = text.get(position..).unwrap_or("");
    let Some(first) = rest.chars().next() else {
        return String::new();
    };
    if first.is_alphanumeric() || first == '_' {
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '-' | '.' | ':'))
            .take(FOUND_CHARS)
            .collect()
    } else {
        first.to_string()
    }
}

/// How a found token reads in a message.
fn describe_found(found: &str) -> String {
    match found {
        "" => "end of file".to_owned(),
        "\n" | "\r" => "end of line".to_owned(),
        " " | "\t" => "whitespace".to_owned(),
        _ if found.chars().any(char::is_control) => format!("`{}`", found.escape_debug()),
        _ => format!("`{found}`"),
    }
}

/// A "did you mean" hint when the found word is close to a keyword expected there, or the text
/// at the failure point (`rest`, after `before`) is a near miss of what was expected: `=` for
/// `==`, `2 hours` for `2h`, an unquoted name for a string, a `not` without braces.
fn help_for(found: &str, before: &str, rest: &str, positives: &[Rule]) -> Option<String> {
    let after_not = before
        .trim_end()
        .strip_suffix("not")
        .is_some_and(|head| !head.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
    if after_not && positives.contains(&Rule::lbrace) {
        return Some(format!(
            "`not` takes one constraint in braces: `not {{ {} ... }}`",
            if found.is_empty() {
                "constraint"
            } else {
                found
            }
        ));
    }
    if found == ";" {
        return Some(
            "constraints and fields are separated by spaces or line breaks, not `;`".to_owned(),
        );
    }
    if found == "=" && positives.contains(&Rule::eq_op) {
        return Some("did you mean `==`?".to_owned());
    }
    let wants_duration = positives
        .iter()
        .any(|rule| matches!(rule, Rule::duration | Rule::rate_period));
    if wants_duration && let Some((meant, _)) = units::leading_duration_words(rest) {
        return Some(format!("did you mean `{meant}`?"));
    }
    let wants_string = positives
        .iter()
        .any(|rule| matches!(rule, Rule::string | Rule::quote));
    if wants_string && found.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        let name = found.escape_debug();
        return Some(format!(
            "did you mean `\"{name}\"`? names are quoted strings"
        ));
    }
    if found.is_empty() || !found.starts_with(|c: char| c.is_alphabetic()) {
        return None;
    }
    let candidates = positives
        .iter()
        .flat_map(|rule| keywords_of(*rule).iter().copied());
    did_you_mean(found, candidates).map(|best| format!("did you mean `{best}`?"))
}

/// The keywords a rule can start with, for "did you mean" hints.
fn keywords_of(rule: Rule) -> &'static [&'static str] {
    const SKILL_FIELDS: &[&str] = &["version", "hash", "signer", "risk", "sensitivity"];
    const CAPABILITY_FIELDS: &[&str] = &[
        "resource",
        "operations",
        "lifetime",
        "justification",
        "risk",
        "sensitivity",
    ];
    const LIFETIMES: &[&str] = &["call", "transaction", "wallClock", "process"];
    match rule {
        Rule::skill_field => SKILL_FIELDS,
        Rule::capability_field => CAPABILITY_FIELDS,
        Rule::constraint | Rule::constraint_body => &CONSTRAINT_WORDS,
        Rule::lifetime => LIFETIMES,
        Rule::file | Rule::kw_skill => &["skill"],
        Rule::kw_capability => &["capability"],
        Rule::kw_in => &["in"],
        Rule::kw_per => &["per"],
        Rule::kw_burst => &["burst"],
        Rule::kw_by => &["by"],
        Rule::kw_from => &["from"],
        Rule::kw_until => &["until"],
        Rule::kw_renewable => &["renewable"],
        Rule::kw_file => &["file"],
        Rule::range_value => &["now"],
        _ => &[],
    }
}

/// What a rule means to a user, for "expected ..." messages.
fn describe(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "end of file",
        Rule::WHITESPACE => "whitespace",
        Rule::COMMENT => "a comment",
        Rule::ident_char => "a name character",
        Rule::word => "a name",
        Rule::file => "`skill`",
        Rule::skill | Rule::kw_skill => "`skill`",
        Rule::skill_field => "a skill field (`version`, `hash`, `signer`, `risk`, `sensitivity`)",
        Rule::version_field => "`version \"...\"`",
        Rule::hash_field => "`hash \"...\"`",
        Rule::signer_field => "`signer \"...\"`",
        Rule::risk_field => "`risk LEVEL`",
        Rule::risk_value => "a risk level (`none`, `low`, `medium`, `high`, `critical` or 0..100)",
        Rule::sensitivity_field => "`sensitivity normal|elevated`",
        Rule::capability | Rule::kw_capability => "`capability`",
        Rule::capability_field => {
            "a capability field (`resource`, `operations`, `lifetime`, `justification`, ...)"
        }
        Rule::resource_field => "`resource KIND \"LOCATOR\"`",
        Rule::operations_field => "`operations VERB, ...`",
        Rule::verb | Rule::verb_word => "an operation name",
        Rule::lifetime_field => "`lifetime ...`",
        Rule::lifetime => "a lifetime (`call`, `transaction`, `wallClock` or `process`)",
        Rule::lifetime_call => "`call`",
        Rule::lifetime_transaction => "`transaction`",
        Rule::lifetime_wall_clock => "`wallClock DURATION`",
        Rule::lifetime_process => "`process`",
        Rule::justification_field => "`justification \"...\"`",
        Rule::constraint => "a constraint",
        Rule::constraint_body => "a constraint after `optional`",
        Rule::field_equals => "`fieldEquals`",
        Rule::equals_in => "`in [...]`",
        Rule::equals_value => "`== LITERAL`",
        Rule::equals_path => "`== PATH`",
        Rule::field_matches => "`fieldMatches`",
        Rule::regex | Rule::regex_open => "a regex literal `/.../`",
        Rule::regex_body => "a regex (an empty `//` starts a comment)",
        Rule::regex_close => "`/` closing the regex",
        Rule::regex_flags => "regex flags",
        Rule::field_range => "`fieldRange`",
        Rule::range_between => "`NUM OP PATH OP NUM`",
        Rule::range_difference => "`PATH - PATH OP DURATION`",
        Rule::range_single => "`PATH OP NUM`",
        Rule::range_value => "a number, a duration or `now`",
        Rule::payload_schema => "`payloadSchema`",
        Rule::schema_file => "`file \"...\"`",
        Rule::actor_binding => "`actorBinding`",
        Rule::rate_limit => "`rateLimit`",
        Rule::rate_period => {
            "a rate unit (`second`, `minute`, `hour`, `day`) or a duration such as `30s`"
        }
        Rule::rate_burst => "`burst N`",
        Rule::rate_by => "`by PATH, ...`",
        Rule::wall_clock_window => "`wallClockWindow`",
        Rule::window_absolute => "`from TIMESTAMP until TIMESTAMP`",
        Rule::timestamp | Rule::timestamp_text => {
            "an RFC 3339 timestamp such as `2026-12-01T09:00:00Z`"
        }
        Rule::window_weekly | Rule::day_window => "a window such as `mon-fri 09:00-17:00`",
        Rule::days => "days (`mon`, `mon-fri`, `daily`, ...)",
        Rule::time_of_day => "a time `HH:MM`",
        Rule::any_block => "`any { ... }`",
        Rule::all_block => "`all { ... }`",
        Rule::not_block => "`not { ... }`",
        Rule::path | Rule::path_root => "a path such as `payload.name`",
        Rule::dot_segment | Rule::member_name => "a member name",
        Rule::bracket_segment => "`[\"key\"]`, `[N]` or `[*]`",
        Rule::index => "an array index",
        Rule::wildcard => "`*`",
        Rule::json_value => "a JSON value",
        Rule::json_object => "a JSON object `{ ... }`",
        Rule::json_member => "a `\"key\": value` member",
        Rule::json_array => "a JSON array `[ ... ]`",
        Rule::json_true => "`true`",
        Rule::json_false => "`false`",
        Rule::json_null => "`null`",
        Rule::string | Rule::quote => "a string",
        Rule::string_body => "string characters",
        Rule::string_close => "`\"` closing the string",
        Rule::number => "a number",
        Rule::integer | Rule::uint => "a whole number",
        Rule::duration => "a duration such as `30s` or `2h`",
        Rule::lbrace => "`{`",
        Rule::rbrace => "`}`",
        Rule::lbracket => "`[`",
        Rule::rbracket => "`]`",
        Rule::comma => "`,`",
        Rule::colon => "`:`",
        Rule::eq_op => "`==`",
        Rule::tilde => "`~`",
        Rule::minus => "`-`",
        Rule::cmp_op => "a comparison (`<`, `<=`, `>`, `>=`)",
        Rule::kw_version => "`version`",
        Rule::kw_hash => "`hash`",
        Rule::kw_signer => "`signer`",
        Rule::kw_risk => "`risk`",
        Rule::kw_sensitivity => "`sensitivity`",
        Rule::kw_resource => "`resource`",
        Rule::kw_operations => "`operations`",
        Rule::kw_lifetime => "`lifetime`",
        Rule::kw_justification => "`justification`",
        Rule::kw_call => "`call`",
        Rule::kw_transaction => "`transaction`",
        Rule::kw_wall_clock => "`wallClock`",
        Rule::kw_renewable => "`renewable`",
        Rule::kw_process => "`process`",
        Rule::kw_optional => "`optional`",
        Rule::kw_field_equals => "`fieldEquals`",
        Rule::kw_in => "`in`",
        Rule::kw_field_matches => "`fieldMatches`",
        Rule::kw_field_range => "`fieldRange`",
        Rule::kw_now => "`now`",
        Rule::kw_payload_schema => "`payloadSchema`",
        Rule::kw_file => "`file`",
        Rule::kw_actor_binding => "`actorBinding`",
        Rule::kw_rate_limit => "`rateLimit`",
        Rule::kw_per => "`per`",
        Rule::kw_burst => "`burst`",
        Rule::kw_by => "`by`",
        Rule::kw_wall_clock_window => "`wallClockWindow`",
        Rule::kw_from => "`from`",
        Rule::kw_until => "`until`",
        Rule::kw_any => "`any`",
        Rule::kw_all => "`all`",
        Rule::kw_not => "`not`",
    }
}

#[cfg(test)]
mod tests {
    use pest::Parser as _;
    use proptest::prelude::*;

    use super::grammar::{CapParser, Rule};
    use crate::vocabulary::{ConstraintKeyword, ITEM_WORDS, OPTIONAL};

    const GRAMMAR: &str = include_str!("../../grammar/capgate.pest");

    /// The body of the grammar rule `name`, between its braces.
    fn rule_body(name: &str) -> &'static str {
        let start = GRAMMAR
            .lines()
            .position(|line| line.starts_with(&format!("{name} =")))
            .unwrap_or_else(|| panic!("no rule `{name}` in the grammar"));
        let from: usize = GRAMMAR.lines().take(start).map(|l| l.len() + 1).sum();
        let text = &GRAMMAR[from..];
        let open = text.find('{').unwrap() + 1;
        let close = text.find('}').unwrap();
        text[open..close].trim()
    }

    /// The literal a keyword rule (`kw_x = @{ "x" ~ !ident_char }`) matches.
    fn keyword_literal(rule: &str) -> &'static str {
        let body = rule_body(rule);
        let literal = body.split('"').nth(1).unwrap();
        assert_eq!(body, format!("\"{literal}\" ~ !ident_char"), "{rule}");
        literal
    }

    /// The grammar keeps its keywords as literals; the constraint ones are the table's.
    #[test]
    fn the_grammar_spells_the_constraint_keywords_of_the_table() {
        let alternatives: Vec<&str> = rule_body("constraint_body")
            .split('|')
            .map(str::trim)
            .collect();
        let grammar_words: Vec<&str> = alternatives
            .iter()
            .map(|rule| {
                let first = rule_body(rule).split_whitespace().next().unwrap();
                assert!(first.starts_with("kw_"), "`{rule}` starts with `{first}`");
                keyword_literal(first)
            })
            .collect();
        let table_words: Vec<&str> = ConstraintKeyword::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(grammar_words, table_words);
        assert_eq!(rule_body("constraint"), "kw_optional? ~ constraint_body");
        assert_eq!(keyword_literal("kw_optional"), OPTIONAL);
    }

    /// Each item word of the table is a keyword rule of the grammar (`kw_<word>`).
    #[test]
    fn the_grammar_spells_the_item_words_of_the_table() {
        for word in ITEM_WORDS {
            assert_eq!(keyword_literal(&format!("kw_{word}")), word);
        }
    }

    /// Where `(escape | plain)*` stops in `text` (`at_least_one`: `+`; `None` when it cannot
    /// match): an escape is `\` and any character but a line break, a plain character anything
    /// but `stop`, `\` and a line break: the plain form of the grammar's literal bodies, whose
    /// language and stopping points the runs the grammar writes them as must keep.
    fn reference_end(text: &str, stop: char, at_least_one: bool) -> Option<usize> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut i = 0;
        loop {
            match (chars.get(i), chars.get(i + 1)) {
                (Some((_, '\\')), Some((_, next))) if *next != '\n' => i += 2,
                (Some((_, c)), _) if *c != stop && *c != '\\' && *c != '\n' => i += 1,
                _ => break,
            }
        }
        if at_least_one && i == 0 {
            return None;
        }
        Some(chars.get(i).map_or(text.len(), |(at, _)| *at))
    }

    fn parsed_end(rule: Rule, text: &str) -> Option<usize> {
        CapParser::parse(rule, text)
            .ok()
            .and_then(|mut pairs| pairs.next())
            .map(|pair| pair.as_span().end())
    }

    fn literal_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec![
                "a", "\"", "\\", "\n", "/", " ", "é", "\t", "\\n", "\\\"",
            ]),
            0..24,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn string_and_regex_bodies_stop_where_escape_or_plain_did(text in literal_text()) {
            for (rule, stop, at_least_one) in
                [(Rule::string_body, '"', false), (Rule::regex_body, '/', true)]
            {
                prop_assert_eq!(
                    parsed_end(rule, &text),
                    reference_end(&text, stop, at_least_one),
                    "{:?} {:?}",
                    rule,
                    text
                );
            }
        }
    }
}
