//! `.cap` formatting and printing: one canonical layout for policy files.
//!
//! - [`format_cap`] reformats `.cap` text: it keeps every token and every comment, and changes
//!   only whitespace (the rules are in the docs of `layout`). It refuses text that does not parse,
//!   and checks that the result parses to the same policy before returning it, so a formatter
//!   bug can never change what a policy allows.
//! - [`policy_to_cap`] prints an AST (for example one read from a JSON manifest) as `.cap` text
//!   in the same layout.
//! - [`same_policy`] compares two ASTs ignoring where things were written (spans).
//!
//! The formatter works on tokens (`lex`) rather than on the AST so that comments stay exactly
//! where they were; the REPL can reuse it for echoing what the user typed.

mod layout;
mod lex;
mod print;

pub use layout::FLAT_JSON_WIDTH;
pub use print::{policy_to_cap, regex_cap_cannot_hold};

use capgate::span::FileId;
use capgate::syntax::SyntaxError;
use capgate::syntax::ast::PolicyFile;

/// Why a file was not formatted.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
pub enum FormatError {
    /// The text is not a valid `.cap` file; every error found.
    #[error("the file does not parse ({} error{})", .0.len(), if .0.len() == 1 { "" } else { "s" })]
    Syntax(Vec<SyntaxError>),
    /// The formatted text would read differently (a formatter bug; the file is left alone).
    #[error("formatting would change the meaning of the policy; the file is left unchanged")]
    #[diagnostic(help("please report this as a bug, with the file"))]
    MeaningChanged,
}

/// Formats `.cap` text in the canonical layout.
///
/// Idempotent: `format_cap(format_cap(x)) == format_cap(x)`. A leading byte-order mark is kept.
pub fn format_cap(text: &str) -> Result<String, FormatError> {
    let file = FileId(0);
    let before = capgate::syntax::parse(file, text).map_err(FormatError::Syntax)?;
    let formatted = layout_text(text);
    match capgate::syntax::parse(file, &formatted) {
        Ok(after) if same_policy(&before, &after) => Ok(formatted),
        _ => Err(FormatError::MeaningChanged),
    }
}

/// Lays out text without checking that it parses (for text this crate generated).
pub(crate) fn layout_text(text: &str) -> String {
    let (bom, body) = match text.strip_prefix('\u{FEFF}') {
        Some(body) => ("\u{FEFF}", body),
        None => ("", text),
    };
    let mut out = String::from(bom);
    out.push_str(&layout::layout(&lex::lex(body)));
    out
}

/// True when two policy files say the same thing, wherever each part was written.
pub fn same_policy(a: &PolicyFile, b: &PolicyFile) -> bool {
    without_spans(a) == without_spans(b)
}

/// The debug form of an AST with every span blanked out.
fn without_spans(file: &PolicyFile) -> String {
    let debug = format!("{file:?}");
    match regex::Regex::new(r"Span \{ file: FileId\(\d+\), start: \d+, end: \d+ \}") {
        Ok(span) => span.replace_all(&debug, "Span").into_owned(),
        Err(_) => debug,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRAMPED: &str = r#"# header comment
skill "s"{version "1" risk high
capability "c"{resource http "https://api.example.com/v1/{id}"   operations GET,POST
justification "Creates one record per request, for the agent's organization." // why
  payloadSchema {"type":"object","required":["a"],"properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":0,"maximum":10}}}


  optional fieldEquals payload.kind in ["x","y"]
  any { fieldEquals payload.a == "z"  not { fieldMatches payload.b ~ /a\/b#c/i } }
  fieldRange 0 < payload.n <= 10
  wallClockWindow mon-fri 09:00-17:00 "UTC"
}}
"#;

    const EXPECTED: &str = r#"# header comment
skill "s" {
  version "1"
  risk high
  capability "c" {
    resource http "https://api.example.com/v1/{id}"
    operations GET, POST
    justification "Creates one record per request, for the agent's organization." // why
    payloadSchema {
      "type": "object",
      "required": ["a"],
      "properties": {
        "a": { "type": "string" },
        "b": { "type": "integer", "minimum": 0, "maximum": 10 }
      }
    }

    optional fieldEquals payload.kind in ["x", "y"]
    any {
      fieldEquals payload.a == "z"
      not {
        fieldMatches payload.b ~ /a\/b#c/i
      }
    }
    fieldRange 0 < payload.n <= 10
    wallClockWindow mon-fri 09:00-17:00 "UTC"
  }
}
"#;

    #[test]
    fn cramped_policy_gets_the_canonical_layout() {
        let formatted = format_cap(CRAMPED).unwrap();
        assert_eq!(formatted, EXPECTED);
    }

    #[test]
    fn formatting_is_idempotent_on_the_canonical_form() {
        assert_eq!(format_cap(EXPECTED).unwrap(), EXPECTED);
    }

    #[test]
    fn own_line_and_trailing_comments_stay_in_place() {
        let text = "skill \"s\" { // after brace\n  // own line\n  version \"1\" # trailing\n\n\n  // before capability\n}\n";
        let formatted = format_cap(text).unwrap();
        assert_eq!(
            formatted,
            "skill \"s\" { // after brace\n  // own line\n  version \"1\" # trailing\n\n  // before capability\n}\n"
        );
    }

    #[test]
    fn comments_inside_json_force_one_member_per_line() {
        let text = "skill \"s\" { version \"1\" capability \"c\" { resource tool \"t\" operations call justification \"Calls the tool once per request of the user.\" payloadSchema { \"type\": \"object\" // only objects\n } } }";
        let formatted = format_cap(text).unwrap();
        assert!(
            formatted
                .contains("payloadSchema {\n      \"type\": \"object\" // only objects\n    }\n"),
            "{formatted}"
        );
    }

    #[test]
    fn invalid_text_is_refused_with_its_syntax_errors() {
        assert!(
            matches!(format_cap("skill {"), Err(FormatError::Syntax(errors)) if !errors.is_empty())
        );
    }

    #[test]
    fn a_byte_order_mark_is_kept() {
        let formatted = format_cap("\u{FEFF}skill \"s\" { version \"1\" }").unwrap();
        assert_eq!(formatted, "\u{FEFF}skill \"s\" {\n  version \"1\"\n}\n");
    }

    #[test]
    fn same_policy_ignores_spans_only() {
        let a = capgate::syntax::parse(FileId(0), "skill \"s\" { version \"1\" }").unwrap();
        let b = capgate::syntax::parse(FileId(3), "\n\nskill  \"s\"{version \"1\"}").unwrap();
        let c = capgate::syntax::parse(FileId(0), "skill \"s\" { version \"2\" }").unwrap();
        assert!(same_policy(&a, &b));
        assert!(!same_policy(&a, &c));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// The bundled `.cap` policies plus the cramped example: the seeds that get mutated.
    fn seeds() -> Vec<String> {
        let mut seeds = vec![tests_seed()];
        for dir in [
            "coding-agent-tools",
            "crm-writer",
            "email-send",
            "meeting-scheduler",
        ] {
            let path = format!(
                "{}/../../policies/{dir}/{dir}.cap",
                env!("CARGO_MANIFEST_DIR")
            );
            seeds.push(std::fs::read_to_string(path).unwrap());
        }
        for dir in ["crm-summarizer", "payments-transfer"] {
            let path = format!(
                "{}/../../policies/{dir}/{dir}.json",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(path).unwrap();
            let file = capgate::manifest::parse_manifest(FileId(0), &text).unwrap();
            seeds.push(policy_to_cap(&file));
        }
        seeds
    }

    fn tests_seed() -> String {
        "skill \"s\"{version \"1\" capability \"c\"{resource http \"https://a.example.com/{x}\" operations GET\n fieldEquals payload.k in[\"a\",\"b\"] any{fieldRange 0<payload.n<=10 not{fieldMatches payload.s ~/x\\/y/i}}}}".to_owned()
    }

    /// Re-joins a seed's tokens with the chosen separators, sometimes adding a comment.
    fn mutate(text: &str, choices: &[u8]) -> String {
        const SEPARATORS: [&str; 6] =
            [" ", "\n", "\n\n\n", "  \t ", " // added\n", "\n# added\n  "];
        let tokens = lex::lex(text);
        let mut out = String::new();
        for (index, token) in tokens.iter().enumerate() {
            if index > 0 {
                let choice = choices
                    .get(index % choices.len().max(1))
                    .copied()
                    .unwrap_or(0);
                out.push_str(SEPARATORS[usize::from(choice) % SEPARATORS.len()]);
            }
            out.push_str(token.text);
            if token.kind == lex::TokenKind::Comment {
                out.push('\n');
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn formatting_is_idempotent_and_keeps_the_policy(
            seed in 0usize..7,
            choices in proptest::collection::vec(any::<u8>(), 1..64),
        ) {
            let seeds = seeds();
            let original = &seeds[seed % seeds.len()];
            let mutated = mutate(original, &choices);
            let formatted = format_cap(&mutated).unwrap();
            prop_assert_eq!(&format_cap(&formatted).unwrap(), &formatted);
            let before = capgate::syntax::parse(FileId(0), original).unwrap();
            let after = capgate::syntax::parse(FileId(0), &formatted).unwrap();
            prop_assert!(same_policy(&before, &after));
            prop_assert_eq!(
                formatted.matches("added").count(),
                mutated.matches("added").count(),
                "every comment is kept"
            );
        }
    }
}
