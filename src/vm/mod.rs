//! The virtual machine: runs a verified program against one request.
//!
//! - [`Input`] borrows everything a program may read from the request; nothing is cloned.
//! - [`run`] is the hot path: no allocation, just the outcome ([`Outcome`]). It answers the
//!   checks from the program's plan first (`plan`, [`crate::bytecode::plan`]) and runs the
//!   program from the first check the plan cannot answer; `run_unplanned` (feature `internals`)
//!   is the program alone, the reference the plan is tested against.
//! - [`trace`] runs the same loop and reports every test to a [`Tracer`]; deny reasons and
//!   `:explain` come from it.
//! - [`resource`], [`schema`] and [`window`] evaluate the compiled resource templates, payload
//!   schemas and wall-clock windows.
//!
//! The VM depends on `bytecode` and `value` only; it does no I/O and keeps no state between
//! calls (rate limits and grants live in `runtime`).

mod exec;
mod explain;
mod input;
pub mod json;
pub mod path;
mod plan;
pub mod resource;
pub mod schema;
mod test_op;
pub mod window;

pub use exec::{
    Outcome, TestReport, Tracer, VmError, run, trace, trace_check, undecidable_tests_decide,
};
#[cfg(feature = "internals")]
pub use exec::{Steps, decided_by_plan, run_counted, run_unplanned, trace_from};
#[cfg(feature = "internals")]
pub use input::RegexWorkExceeded;
pub use input::{Input, RegexBudget};
#[cfg(feature = "internals")]
pub use json::CaseVariant;
pub use json::Json;
