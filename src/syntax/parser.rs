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
use crate::span::{FileId, Span};

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
pub use crate::limits::MAX_POLICY_NESTING as MAX_NESTING;

/// Parses one `.cap` file.
///
/// Returns the AST, or every error found: one syntax error if the text does not match the
/// grammar, otherwise all the errors found while building the AST (unknown names, bad
/// durations, duplicate fields, ...). Never panics, whatever the input.
pub fn parse(file: FileId, text: &str) -> Result<PolicyFile, Vec<SyntaxError>> {
    check_line_ends(file, text).map_err(|error| vec![error])?;
    check_nesting(file, text).map_err(|error| vec![error])?;
    let pairs = grammar::CapParser::parse(Rule::file, text)
        .map_err(|error| vec![from_pest(file, text, &error)])?;
    lower::lower_file(file, pairs)
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
            if let Some(help) = help_for(&found, &positives) {
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
    const MAX_FOUND: usize = 40;
    let rest = text.get(position..).unwrap_or("");
    let Some(first) = rest.chars().next() else {
        return String::new();
    };
    if first.is_alphanumeric() || first == '_' {
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '$' | '-' | '.' | ':'))
            .take(MAX_FOUND)
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

/// A "did you mean" hint when the found word is close to a keyword expected there.
fn help_for(found: &str, positives: &[Rule]) -> Option<String> {
    if found == ";" {
        return Some(
            "constraints and fields are separated by spaces or line breaks, not `;`".to_owned(),
        );
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
    const CONSTRAINTS: &[&str] = &[
        "optional",
        "fieldEquals",
        "fieldMatches",
        "fieldRange",
        "payloadSchema",
        "actorBinding",
        "rateLimit",
        "wallClockWindow",
        "any",
        "all",
        "not",
    ];
    const LIFETIMES: &[&str] = &["call", "transaction", "wallClock", "process"];
    match rule {
        Rule::skill_field => SKILL_FIELDS,
        Rule::capability_field => CAPABILITY_FIELDS,
        Rule::constraint | Rule::constraint_body => CONSTRAINTS,
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

    /// Where `(escape | plain)*` stops in `text` (`at_least_one`: `+`; `None` when it cannot
    /// match): an escape is `\` and any character but a line break, a plain character anything
    /// but `stop`, `\` and a line break. The grammar's literal bodies before they were written as
    /// runs, whose language and stopping points the runs must keep.
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
