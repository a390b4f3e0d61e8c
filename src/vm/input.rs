//! What a program reads: the request, borrowed, plus the clock and limits.
//!
//! - [`Input`] borrows everything a program may read for one evaluation.
//! - [`RegexBudget`] is the regex work a request has left; the candidates of one decision share
//!   it through their inputs.

use std::cell::Cell;

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
    /// The regex work the request has left, shared by every candidate of the decision.
    pub regex_budget: &'r RegexBudget,
    /// A member the program reads that is absent while the object has a case variant of its
    /// name stops the evaluation with an error ([`crate::vm::CaseVariant`];
    /// `Limits::refuse_case_variant_reads`).
    pub refuse_case_variants: bool,
}

/// The regex work one request may still take, in byte-states (`Limits::max_regex_work`): each
/// match is charged [`crate::bytecode::matcher::Matcher::work`] before it runs, and a match the
/// budget cannot pay for is not run — the request is refused (`input`). Deterministic: the
/// charges depend on the texts and the patterns alone, so a request is refused alike on every
/// run, from bytes and pre-parsed.
#[derive(Debug)]
pub struct RegexBudget {
    left: Cell<u64>,
    limit: u64,
}

/// A match the budget could not pay for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegexWorkExceeded {
    /// `Limits::max_regex_work`.
    pub limit: u64,
}

impl RegexBudget {
    /// A full budget of `limit` byte-states.
    pub fn new(limit: u64) -> RegexBudget {
        RegexBudget {
            left: Cell::new(limit),
            limit,
        }
    }

    /// A budget that never runs out (for validation outside a decision).
    pub fn unlimited() -> RegexBudget {
        RegexBudget::new(u64::MAX)
    }

    /// A budget of the same limit with `left` byte-states left: what explaining a decision
    /// spends, apart from the decision's own.
    pub fn with_left(&self, left: u64) -> RegexBudget {
        RegexBudget {
            left: Cell::new(left.min(self.limit)),
            limit: self.limit,
        }
    }

    /// Pays `work` byte-states, or refuses (and pays nothing) when fewer are left.
    #[inline]
    pub fn charge(&self, work: u64) -> Result<(), RegexWorkExceeded> {
        match self.left.get().checked_sub(work) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(RegexWorkExceeded { limit: self.limit }),
        }
    }

    /// The byte-states left.
    #[inline]
    pub fn left(&self) -> u64 {
        self.left.get()
    }

    /// Puts the budget back to `left` byte-states left (the plan undoes the charges of a check
    /// it could not answer, which the program then runs and charges again).
    #[inline]
    pub(crate) fn restore(&self, left: u64) {
        self.left.set(left);
    }

    /// `Limits::max_regex_work`.
    #[cfg(any(test, feature = "internals"))]
    pub fn limit(&self) -> u64 {
        self.limit
    }
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
