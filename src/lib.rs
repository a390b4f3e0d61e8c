#![doc = include_str!("../README.md")]

pub mod bounded;
#[cfg(feature = "internals")]
pub mod bytecode;
#[cfg(not(feature = "internals"))]
mod bytecode;
mod bytes;
#[cfg(feature = "internals")]
pub mod compile;
#[cfg(not(feature = "internals"))]
mod compile;
pub mod compiled;
mod convert;
pub mod engine;
mod fold;
pub mod limits;
pub mod manifest;
pub mod name;
#[cfg(feature = "reference")]
pub mod reference;
mod resource_kind;
pub mod revision;
pub mod runtime;
pub mod session;
pub mod span;
pub mod syntax;
pub mod tape;
pub mod time;
pub mod value;
#[cfg(feature = "internals")]
pub mod vm;
#[cfg(not(feature = "internals"))]
mod vm;
pub mod vocabulary;

pub use engine::{
    AuditRecord, AuditSink, AuditWriteFailures, CandidateTrace, Decision, Diagnostic, Engine,
    EngineBuilder, EngineError, JsonLinesAudit, LoadError, PolicyFormat, PolicyLoader, PolicySet,
    Reason, ReasonKind, Request, RequestError, Verdict, parse_strict_json,
};
pub use limits::Limits;
pub use name::Name;
pub use revision::Revision;
pub use runtime::{Clock, InMemoryStore, SimulatedClock, StateStore, SystemClock};
pub use session::{LineResult, Session, SessionOptions};
pub use time::{parse_duration, parse_timestamp};
pub use vocabulary::ConstraintKeyword;
