//! Authoring tools for [capgate] manifests, built on the engine's public API:
//!
//! - [`testing`]: policy tests — `.captest` files of requests and expected decisions, run
//!   against a policy directory with coverage of every capability and constraint
//!   (`capgate test`). [`testing::run_dir`] is the entry point for a project's own
//!   `cargo test`.
//! - [`format`](mod@format): the canonical formatter of `.cap` files (`capgate fmt`), and the `.cap`
//!   writer that `capgate convert` uses for JSON manifests.
//! - [`lint`]: warnings about manifests that are valid but likely wrong (`capgate lint`).
//! - [`repl`]: the helpers of the interactive REPL (`capgate repl`): evaluating one constraint
//!   against a payload, finding the value a trace saw, telling when typed text is unfinished.

pub mod format;
pub mod lint;
pub mod repl;
pub mod testing;
