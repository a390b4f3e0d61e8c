//! Printing decisions for people and for programs.

use capgate::{Decision, Verdict};

/// One decision as text.
pub fn decision_text(decision: &Decision) -> String {
    decision.to_text()
}

/// The exit code for a decision.
pub fn exit_code(decision: &Decision) -> u8 {
    match decision.decision {
        Verdict::Allow => super::EXIT_OK,
        Verdict::Deny => super::EXIT_DENY,
        Verdict::ApprovalRequired => super::EXIT_APPROVAL,
    }
}
