//! `capgate check`: decide one request, statelessly.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use capgate::bounded::read_at_most;
use capgate::{Engine, Limits, Request, SimulatedClock, parse_timestamp};

use super::audit::AuditFile;
use super::output::{decision_text, exit_code};
use super::{EXIT_INPUT, Format, load_policies};

/// Arguments of `capgate check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Policy files (.cap, .json) or directories.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The request as JSON; `-` or absent reads standard input.
    #[arg(short = 'r', long = "request")]
    request: Option<String>,
    /// The engine clock (RFC 3339); otherwise the request's `time`, otherwise the system clock.
    #[arg(long)]
    now: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Append one audit record per decision to this file (JSON Lines).
    #[arg(long)]
    audit: Option<PathBuf>,
}

/// Runs `capgate check`.
pub fn run(args: CheckArgs) -> u8 {
    let limits = Limits::DEFAULT;
    let policy = match load_policies(&args.policies, limits) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    // Read no more than one byte past the request limit, from a file, a FIFO or standard input
    // alike (`/dev/zero` included): a request over the limit is refused below as the library
    // refuses it, audit record included.
    let most = limits.max_request_bytes;
    let bytes = match args.request.as_deref() {
        None | Some("-") => match read_at_most(std::io::stdin().lock(), most) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read the request from standard input: {e}");
                return EXIT_INPUT;
            }
        },
        Some(path) => match std::fs::File::open(path).and_then(|file| read_at_most(file, most)) {
            Ok(bytes) => bytes,
            Err(e) => {
                eprintln!("error: cannot read request `{path}`: {e}");
                return EXIT_INPUT;
            }
        },
    };
    // `--now` is the caller's: a bad one is a usage error, before anything is decided.
    let now = match args
        .now
        .as_deref()
        .map(|text| (text, parse_timestamp(text)))
    {
        Some((_, Some(now))) => Some(now),
        Some((text, None)) => {
            eprintln!("error: `{text}` is not an RFC 3339 timestamp");
            return EXIT_INPUT;
        }
        None => None,
    };
    let audit = match args.audit.as_deref().map(AuditFile::open).transpose() {
        Ok(audit) => audit,
        Err(code) => return code,
    };
    let engine = |now| {
        // `limits` is `Limits::DEFAULT`, the builder's own.
        let mut builder = Engine::builder(policy.clone());
        if let Some(now) = now {
            builder = builder.clock(Arc::new(SimulatedClock::new(now)));
        }
        if let Some(audit) = &audit {
            builder = builder.audit(audit.sink());
        }
        builder.build()
    };
    // A request that cannot be read or breaks a limit is an input error for the CLI (exit 2,
    // message on stderr); the library's `check_slice` denies the same with reason `input`, and
    // that refusal is what the audit trail records (regression: it recorded nothing).
    let mut request = match Request::from_slice(&bytes, &limits) {
        Ok(request) => request,
        Err(e) => {
            eprintln!("error: {e}");
            if audit.is_some() {
                let _refusal = engine(now).check_slice(&bytes);
            }
            return match audit.as_ref().map(AuditFile::check_written) {
                Some(Err(code)) => code,
                _ => EXIT_INPUT,
            };
        }
    };
    // The clock: `--now`, else the request's own `time` (a malformed one is refused by the
    // engine with reason `input`), else the system clock.
    let now = now.or_else(|| request.time.as_deref().and_then(parse_timestamp));
    if args.now.is_some() {
        // `--now` wins over the request's own `time`.
        request.time = None;
    }
    let decision = engine(now).check(&request);
    match args.format {
        Format::Text => out!("{}", decision_text(&decision)),
        Format::Json => match capgate::value::to_json_line(&decision) {
            Ok(json) => outln!("{json}"),
            Err(e) => {
                eprintln!("error: cannot print the decision: {e}");
                return EXIT_INPUT;
            }
        },
    }
    if let Some(Err(code)) = audit.as_ref().map(AuditFile::check_written) {
        return code;
    }
    exit_code(&decision)
}
