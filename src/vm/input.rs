//! What a program reads: the request, borrowed, plus the clock and limits.

use chrono::{DateTime, Utc};

use super::json::JsonRef;
use super::resource::{Bindings, RequestResource};
use crate::bytecode::program::JsonRoot;

/// Everything a program may read, borrowed from the request for one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Input<'r> {
    /// The payload (JSON `null` when absent).
    pub payload: JsonRef<'r>,
    /// The agent identity object (JSON `null` when absent).
    pub agent: JsonRef<'r>,
    /// The caller's context object (JSON `null` when absent).
    pub context: JsonRef<'r>,
    /// The parsed request resource (for `resource.query`).
    pub resource: &'r RequestResource<'r>,
    /// The template bindings of the capability being evaluated.
    pub bindings: &'r Bindings<'r>,
    /// `request.skill`.
    pub skill: &'r str,
    /// `request.operation`.
    pub operation: &'r str,
    /// `request.transaction`.
    pub transaction: Option<&'r str>,
    /// The engine clock's instant for this decision.
    pub now: DateTime<Utc>,
    /// The longest array a `[*]` may scan.
    pub max_array_scan: usize,
}

impl<'r> Input<'r> {
    /// The JSON document a path rooted at `root` reads.
    pub fn document(&self, root: JsonRoot) -> JsonRef<'r> {
        match root {
            JsonRoot::Payload => self.payload,
            JsonRoot::Agent => self.agent,
            JsonRoot::Context => self.context,
        }
    }
}
