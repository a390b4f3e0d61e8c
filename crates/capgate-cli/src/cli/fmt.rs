//! `capgate fmt`: rewrite `.cap` files in the canonical layout, or check that they are.

use std::path::{Path, PathBuf};

use clap::Args;

use capgate::Limits;
use capgate::bounded::{ByteLimit, Descend, files_under};
use capgate::span::SourceMap;
use capgate_authoring::format::{FormatError, format_cap};

use super::diagnostics::{Report, Severity, emit};
use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK};

/// Arguments of `capgate fmt`.
#[derive(Debug, Args)]
pub struct FmtArgs {
    /// Do not write; list the files that would change and exit 1 if any would.
    #[arg(long)]
    check: bool,
    /// `.cap` files, or directories (every `.cap` file within).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// Runs `capgate fmt`.
pub fn run(args: FmtArgs) -> u8 {
    let mut files = Vec::new();
    let mut failed = false;
    for path in &args.files {
        if path.is_dir() {
            let found = files_under(path, Descend::Everywhere, |file| {
                file.extension().is_some_and(|e| e == "cap")
            });
            // Only regular files from a walk are opened: a FIFO would block, a device not end.
            for file in found {
                match capgate::bounded::regular_file(&file) {
                    Ok(()) => files.push(file),
                    Err(e) => {
                        eprintln!("error: {e}");
                        failed = true;
                    }
                }
            }
        } else {
            files.push(path.clone());
        }
    }
    let mut would_change = false;
    for path in &files {
        match format_file(path, args.check) {
            Ok(changed) => would_change |= changed,
            Err(()) => failed = true,
        }
    }
    if failed {
        EXIT_INPUT
    } else if args.check && would_change {
        EXIT_DENY
    } else {
        EXIT_OK
    }
}

/// Formats one file; returns whether it changed (or would change, with `check`).
fn format_file(path: &Path, check: bool) -> Result<bool, ()> {
    let name = path.display().to_string();
    if path.extension().is_none_or(|e| e != "cap") {
        eprintln!("error: `{name}` is not a `.cap` file; `capgate fmt` formats `.cap` files only");
        return Err(());
    }
    let limit = ByteLimit::policy_file(&Limits::DEFAULT);
    let bytes = capgate::bounded::read_file(path, limit).map_err(|e| {
        eprintln!("error: {e}");
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        eprintln!("error: `{name}` is not UTF-8 (invalid byte at offset {offset})");
    })?;
    let formatted = match format_cap(&text) {
        Ok(formatted) => formatted,
        Err(FormatError::Syntax(errors)) => {
            let mut sources = SourceMap::new();
            let file = sources.add(name.as_str(), text.as_str());
            let reports: Vec<Report> = errors
                .into_iter()
                .map(|e| Report {
                    severity: Severity::Error,
                    code: None,
                    span: capgate::span::Span { file, ..e.span },
                    message: e.message,
                    help: e.help,
                })
                .collect();
            emit(&sources, &reports);
            return Err(());
        }
        Err(e) => {
            eprintln!("error: `{name}`: {e}");
            return Err(());
        }
    };
    if formatted == text {
        return Ok(false);
    }
    if check {
        outln!("would reformat {name}");
    } else if let Err(e) = std::fs::write(path, formatted) {
        eprintln!("error: cannot write `{name}`: {e}");
        return Err(());
    }
    Ok(true)
}
