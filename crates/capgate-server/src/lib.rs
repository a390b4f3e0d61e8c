//! capgate as a service: `capgate serve`, a decision server for policy-enforcement points
//! (gateways, agent runtimes) on tokio, hyper and axum.
//!
//! - [`serve`]: configuration, the listener (TLS, connection limits, timeouts, graceful
//!   shutdown) and [`serve::run`], what `capgate serve` runs.
//! - [`routes`]: `POST /v1/check`, health, readiness and metrics; [`operator`]: grants,
//!   revocations, transactions, approvals and reloads behind the operator's token.
//! - [`credential`]: bearer tokens from files, compared in constant time.
//! - [`audit`]: the audit log, written off the decision path.
//! - [`reload`]: compiling on one thread and swapping atomically; watching the policy files.
//! - [`metrics`]: Prometheus metrics whose labels come only from the loaded policies.
//!
//! `docs/server.md` is the user guide: every endpoint, who may call it, and what is trusted.

pub mod audit;
pub mod body;
pub mod call;
pub mod credential;
pub mod error;
pub mod ext_authz;
pub mod gateway;
pub mod identity;
pub mod metrics;
pub mod operator;
pub mod reload;
pub mod routes;
pub mod serve;
pub mod state;
pub mod subrequest;
pub mod tls;

pub use serve::{ConnectionLimits, ServeConfig, ServeError, Server, run};
