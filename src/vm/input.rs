//! What a program reads: the request, borrowed, plus the clock and limits.

use chrono::{DateTime, Utc};

use super::resource::{Bindings, RequestResource};
use crate::bytecode::program::JsonRoot;

/// Everything a program may read, borrowed from the request for one evaluation. `J` is the
/// document type: `&Value` for a parsed request, a tape [`crate::tape::NodeRef`] from bytes.
#[derive(Debug, Clone, Copy)]
pub struct Input<'r, J> {
    /// The payload (JSON `null` when absent).
    pub payload: J,
    /// The agent identity object (JSON `null` when absent).
    pub agent: J,
    /// The caller's context object (JSON `null` when absent).
    pub context: J,
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
    /// A member the program reads that is absent while the object has a case variant of its
    /// name stops the evaluation with an error ([`crate::vm::CaseVariant`];
    /// `Limits::refuse_case_variant_reads`).
    pub refuse_case_variants: bool,
}

impl<'r, J: Copy> Input<'r, J> {
    /// The JSON document a path rooted at `root` reads.
    pub fn document(&self, root: JsonRoot) -> J {
        match root {
            JsonRoot::Payload => self.payload,
            JsonRoot::Agent => self.agent,
            JsonRoot::Context => self.context,
        }
    }
}
