//! The `capgate` command line: one file per subcommand, using only the library's public API.

mod check;
mod disasm;
mod output;
mod repl;
mod replay;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use capgate::{Limits, LoadError, LoadedPolicy, PolicyLoader};

/// Exit code: allow / success.
pub const EXIT_OK: u8 = 0;
/// Exit code: deny or failed expectation.
pub const EXIT_DENY: u8 = 1;
/// Exit code: usage or input error.
pub const EXIT_INPUT: u8 = 2;
/// Exit code: approval required.
pub const EXIT_APPROVAL: u8 = 3;

/// Gives every AI-agent skill the smallest privilege it can work with.
#[derive(Debug, Parser)]
#[command(name = "capgate", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decide one request (stateless: grants and rate limits are not applied).
    Check(check::CheckArgs),
    /// Run a JSON Lines session on one stateful engine with a simulated clock.
    Replay(replay::ReplayArgs),
    /// Print each capability's bytecode with source locations.
    Disasm(disasm::DisasmArgs),
    /// Author policies interactively on a stateful engine with a simulated clock.
    Repl(repl::ReplArgs),
    /// Run the policy tests (`.captest` files and sessions) next to the policies.
    Test(test::TestArgs),
}

/// Parses arguments and runs the subcommand.
pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_INPUT } else { EXIT_OK });
        }
    };
    let code = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Disasm(args) => disasm::run(args),
        Command::Repl(args) => repl::run(args),
        Command::Test(args) => test::run(args),
    };
    ExitCode::from(code)
}

/// Loads policies from paths, printing every diagnostic on failure.
fn load_policies(paths: &[PathBuf], limits: Limits) -> Result<LoadedPolicy, u8> {
    let mut loader = PolicyLoader::new(limits);
    for path in paths {
        loader.add_path(path);
    }
    loader.finish().map_err(|e| {
        print_load_error(&e);
        EXIT_INPUT
    })
}

/// Prints load errors with the offending source line and a caret.
fn print_load_error(error: &LoadError) {
    let count = error.diagnostics.len();
    for diagnostic in &error.diagnostics {
        eprintln!("{}: error: {}", diagnostic.location, diagnostic.message);
        if let Some(file) = error.sources.file(diagnostic.span.file) {
            let line = usize::try_from(diagnostic.location.line).unwrap_or(0);
            if let Some(text) = file.text.lines().nth(line.saturating_sub(1)) {
                if line > 0 {
                    let column = usize::try_from(diagnostic.location.column).unwrap_or(1);
                    eprintln!("  {line:>4} | {text}");
                    eprintln!("       | {}^", " ".repeat(column.saturating_sub(1)));
                }
            }
        }
        if let Some(help) = &diagnostic.help {
            eprintln!("  help: {help}");
        }
    }
    eprintln!(
        "error: policy rejected: {count} error{}",
        if count == 1 { "" } else { "s" }
    );
}
