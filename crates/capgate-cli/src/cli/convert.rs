//! `capgate convert`: a policy between its `.cap` and JSON manifest forms, on standard output.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use capgate::manifest::to_json_text;
use capgate::span::FileId;
use capgate::{Limits, PolicyLoader};
use capgate_authoring::format::{policy_to_cap, regex_cap_cannot_hold};

use super::diagnostics::print_load_error;
use super::{EXIT_INPUT, EXIT_OK};

/// The form to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    /// The `.cap` language.
    Cap,
    /// A JSON manifest (one skill).
    Json,
}

/// Arguments of `capgate convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The form to print.
    #[arg(long, value_enum)]
    to: Target,
    /// The policy file (.cap or .json).
    file: PathBuf,
}

/// Runs `capgate convert`. Only a policy that loads is converted (exit 2 otherwise).
pub fn run(args: ConvertArgs) -> u8 {
    let loaded = match PolicyLoader::new(Limits::DEFAULT).finish_paths(&[args.file.as_path()]) {
        Ok(loaded) => loaded,
        Err(error) => {
            print_load_error(&error);
            return EXIT_INPUT;
        }
    };
    let Some(source) = loaded.sources.files().first() else {
        eprintln!("error: `{}` holds no policy", args.file.display());
        return EXIT_INPUT;
    };
    let parsed = if source.name.ends_with(".json") {
        capgate::manifest::parse_manifest(FileId(0), &source.text).ok()
    } else {
        capgate::syntax::parse(FileId(0), &source.text).ok()
    };
    let Some(policy) = parsed else {
        eprintln!("error: `{}` could not be read again", args.file.display());
        return EXIT_INPUT;
    };
    let text = match args.to {
        Target::Cap => {
            // A shape `.cap` cannot hold is an error, never a silent change of meaning.
            if let Some(pattern) = regex_cap_cannot_hold(&policy) {
                eprintln!(
                    "error: `{}` cannot be written as `.cap`: the regex {pattern:?} holds a line break",
                    args.file.display()
                );
                eprintln!(
                    "  help: a `/…/` literal ends at the line; write the pattern without a raw line break"
                );
                return EXIT_INPUT;
            }
            policy_to_cap(&policy)
        }
        Target::Json => match to_json_text(&policy) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: {}", e.message);
                return EXIT_INPUT;
            }
        },
    };
    // Never print what would not load back (regression: `1e+20` was written for a large bound,
    // which the grammar then read as the duration `1e`).
    let loads = match args.to {
        Target::Cap => capgate::syntax::parse(FileId(0), &text).is_ok(),
        Target::Json => capgate::manifest::parse_manifest(FileId(0), &text).is_ok(),
    };
    if !loads {
        eprintln!(
            "error: `{}` converts to text that does not load back; please report it",
            args.file.display()
        );
        return EXIT_INPUT;
    }
    out!("{text}");
    EXIT_OK
}
