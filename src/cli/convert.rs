//! `capgate convert`: a policy between its `.cap` and JSON manifest forms, on standard output.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use capgate::format::{policy_to_cap, same_policy};
use capgate::manifest::{parse_manifest, to_json_text};
use capgate::span::FileId;
use capgate::{Limits, PolicyLoader};

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
    let (text, reread) = match args.to {
        Target::Cap => {
            let text = policy_to_cap(&policy);
            let reread = capgate::syntax::parse(FileId(0), &text).ok();
            (text, reread)
        }
        Target::Json => match to_json_text(&policy) {
            Ok(text) => {
                let reread = parse_manifest(FileId(0), &text).ok();
                (text, reread)
            }
            Err(e) => {
                eprintln!("error: {}", e.message);
                return EXIT_INPUT;
            }
        },
    };
    // The output must read back as the same policy, or it is not printed: a form that cannot
    // hold something exactly is an error, never a silent change (regression: a regex with a
    // line break in extended mode, `(?x)`, was written with `\n`, which means something else
    // there, and turned a deny into an allow).
    if !reread.is_some_and(|reread| same_policy(&policy, &reread)) {
        eprintln!(
            "error: `{}` cannot be written in the other form without changing its meaning",
            args.file.display()
        );
        eprintln!("  help: a `/…/` regex cannot hold a line break; write the pattern without one");
        return EXIT_INPUT;
    }
    out!("{text}");
    EXIT_OK
}
