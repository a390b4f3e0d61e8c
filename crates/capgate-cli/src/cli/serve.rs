//! `capgate serve`: the decision server (`docs/server.md`).

use std::net::SocketAddr;
use std::path::PathBuf;

use capgate::Limits;
use capgate_server::{ConnectionLimits, ServeConfig};
use clap::Args;

use super::{EXIT_INPUT, EXIT_OK};

/// Arguments of `capgate serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Policy files (.cap, .json, .capc) or directories, watched and reloaded on change.
    #[arg(short = 'p', long = "policy", required = true, num_args = 1..)]
    policies: Vec<PathBuf>,
    /// The address to listen on. A non-loopback address needs TLS or --insecure-plaintext.
    #[arg(long, default_value = "127.0.0.1:8181")]
    listen: SocketAddr,
    /// The bearer token of policy-enforcement points, which alone may call POST /v1/check.
    #[arg(long, value_name = "FILE")]
    pep_token_file: PathBuf,
    /// The operator's bearer token (grants, revocations, transactions, approvals, reload);
    /// without it the operator API refuses every call. Re-read on SIGHUP.
    #[arg(long, value_name = "FILE")]
    operator_token_file: Option<PathBuf>,
    /// Append one JSON line per decision and per operator action to FILE.
    #[arg(long, value_name = "FILE")]
    audit: Option<PathBuf>,
    /// The TLS certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The agents' credentials, as SHA-256 digests bound to skill, agent, context and autonomy,
    /// for the gateway modes (the auth-subrequest dialects).
    #[arg(long, value_name = "FILE")]
    identities: Option<PathBuf>,
    /// Also serve Envoy's gRPC external authorization (`envoy.service.auth.v3`) here.
    #[arg(long, value_name = "ADDR")]
    grpc_listen: Option<SocketAddr>,
    /// Serve plain HTTP on a non-loopback address.
    #[arg(long)]
    insecure_plaintext: bool,
    /// Observe mode: decide as usual but answer allow, with the observed decision (SPEC §5.1).
    #[arg(long)]
    observe: bool,
    /// Where grants, transactions, revocations, approvals and rate limits live.
    #[arg(long, default_value = "memory", value_parser = ["memory"])]
    state: String,
    /// Do not watch the policy paths (reload on SIGHUP or POST /v1/reload only).
    #[arg(long)]
    no_watch: bool,
    /// Connections served at once.
    #[arg(long, default_value_t = ConnectionLimits::default().max_connections)]
    max_connections: usize,
}

/// Runs `capgate serve` until SIGTERM or SIGINT.
pub fn run(args: ServeArgs) -> u8 {
    init_logging();
    let config = ServeConfig {
        policies: args.policies,
        listen: args.listen,
        pep_token_file: args.pep_token_file,
        operator_token_file: args.operator_token_file,
        audit: args.audit,
        tls: args.tls_cert.zip(args.tls_key),
        identities: args.identities,
        grpc_listen: args.grpc_listen,
        insecure_plaintext: args.insecure_plaintext,
        observe: args.observe,
        watch: !args.no_watch,
        limits: Limits::DEFAULT,
        connections: ConnectionLimits {
            max_connections: args.max_connections.max(1),
            ..ConnectionLimits::default()
        },
    };
    match capgate_server::run(config) {
        Ok(()) => EXIT_OK,
        Err(error) => {
            eprintln!("error: {error}");
            EXIT_INPUT
        }
    }
}

/// Structured logs on standard error; `RUST_LOG` filters them (default `info`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
