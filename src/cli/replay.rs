//! `capgate replay`: run a JSON Lines session on one stateful engine with a simulated clock.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

use clap::Args;

use capgate::{JsonLinesAudit, Limits, Session, SessionOptions};

use super::{EXIT_DENY, EXIT_INPUT, EXIT_OK, Format, load_policies};

/// Arguments of `capgate replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Policy files (.cap, .json) or directories.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The session file (JSON Lines).
    session: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "json")]
    format: Format,
    /// Observe mode: return allow, reporting what would have been enforced.
    #[arg(long)]
    observe: bool,
    /// Append one audit record per decision to this file (JSON Lines).
    #[arg(long)]
    audit: Option<PathBuf>,
}

/// Runs `capgate replay`.
pub fn run(args: ReplayArgs) -> u8 {
    let limits = Limits::DEFAULT;
    let policy = match load_policies(&args.policies, limits) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    let text = match std::fs::read_to_string(&args.session) {
        Ok(text) => text,
        Err(e) => {
            eprintln!(
                "error: cannot read session `{}`: {e}",
                args.session.display()
            );
            return EXIT_INPUT;
        }
    };
    let mut options = SessionOptions {
        observe: args.observe,
        limits: Some(limits),
        ..SessionOptions::default()
    };
    if let Some(path) = &args.audit {
        match File::options().create(true).append(true).open(path) {
            Ok(file) => options.audit = Some(JsonLinesAudit::new(BufWriter::new(file))),
            Err(e) => {
                eprintln!("error: cannot open audit file `{}`: {e}", path.display());
                return EXIT_INPUT;
            }
        }
    }
    let session = Session::new(policy, options);
    let (mut failed, mut errors) = (0usize, 0usize);
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let result = session.run_line(line, index + 1);
        failed += usize::from(result.failed_expectation);
        errors += usize::from(result.error);
        match args.format {
            Format::Json => println!("{}", result.output),
            Format::Text => print!("{}", result.text),
        }
    }
    if errors > 0 {
        eprintln!("error: {errors} session line(s) could not be run");
        EXIT_INPUT
    } else if failed > 0 {
        eprintln!("error: {failed} expectation(s) failed");
        EXIT_DENY
    } else {
        EXIT_OK
    }
}
