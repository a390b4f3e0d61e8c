//! The `capgate` command line: one file per subcommand, using only the library's public API.

/// `println!` for the CLI: a closed standard output (the reader of a pipe went away, as in
/// `capgate replay ... | head`) ends the process quietly instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for the CLI, with the same handling of a closed standard output as [`outln!`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

mod audit;
mod check;
mod compile;
mod convert;
mod diagnostics;
mod disasm;
mod fmt;
mod lint;
mod output;
mod repl;
mod replay;
mod serve;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use capgate::{Limits, PolicyLoader, PolicySet};

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
    /// How errors and warnings are printed: `human` (source snippets) or `json` (one object
    /// per line on standard output, for editors).
    #[arg(long, global = true, value_enum, default_value = "human")]
    error_format: diagnostics::ErrorFormat,
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
    /// Write policies as a `.capc` file that loads without the compiler.
    Compile(compile::CompileArgs),
    /// Run a JSON Lines session on one stateful engine with a simulated clock.
    Replay(replay::ReplayArgs),
    /// Print each capability's bytecode with source locations.
    Disasm(disasm::DisasmArgs),
    /// Author policies interactively on a stateful engine with a simulated clock.
    Repl(repl::ReplArgs),
    /// Run the policy tests (`.captest` files and sessions) next to the policies.
    Test(test::TestArgs),
    /// Rewrite `.cap` files in the canonical layout (`--check`: only report).
    Fmt(fmt::FmtArgs),
    /// Print review warnings for policies.
    Lint(lint::LintArgs),
    /// Print a policy in its other form (`.cap` or JSON manifest).
    Convert(convert::ConvertArgs),
    /// Serve decisions over HTTP to gateways and agent runtimes (`docs/server.md`).
    Serve(serve::ServeArgs),
}

/// Writes to standard output. If the reader has gone away (broken pipe), the process exits
/// with success: there is no one left to tell. Any other write error exits with the input-error
/// code after a message on standard error.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(i32::from(EXIT_OK));
        }
        eprintln!("error: cannot write to standard output: {e}");
        std::process::exit(i32::from(EXIT_INPUT));
    }
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
    diagnostics::set_error_format(cli.error_format);
    let code = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Compile(args) => compile::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Disasm(args) => disasm::run(args),
        Command::Repl(args) => repl::run(args),
        Command::Test(args) => test::run(args),
        Command::Fmt(args) => fmt::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Convert(args) => convert::run(args),
        Command::Serve(args) => serve::run(args),
    };
    ExitCode::from(code)
}

/// Loads policies from paths, printing every diagnostic on failure.
fn load_policies(paths: &[PathBuf], limits: Limits) -> Result<PolicySet, u8> {
    let mut loader = PolicyLoader::new(limits);
    for path in paths {
        loader.add_path(path);
    }
    loader.finish().map_err(|e| {
        diagnostics::print_load_error(&e);
        EXIT_INPUT
    })
}
