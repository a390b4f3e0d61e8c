//! Printing decisions for people and for programs.

use capgate::{Decision, ReasonKind, Verdict};

/// One decision as text.
pub fn decision_text(decision: &Decision) -> String {
    decision.to_text()
}

/// The exit code for a decision: a deny whose only reasons are request-level `input` ones (a
/// malformed `agent`, `context`, `autonomy` or `time`, a limit broken) is an input error (2),
/// like a request the parser refused (regression: those exited 1).
pub fn exit_code(decision: &Decision) -> u8 {
    match decision.verdict {
        Verdict::Allow => super::EXIT_OK,
        Verdict::Deny if is_input_refusal(decision) => super::EXIT_INPUT,
        Verdict::Deny => super::EXIT_DENY,
        Verdict::ApprovalRequired => super::EXIT_APPROVAL,
    }
}

/// Whether every reason of a deny is about the request's input rather than a policy: request
/// validation, or a limit the request broke while a capability was evaluated (a `[*]` over
/// `max_array_scan`: regression, it exited 1).
fn is_input_refusal(decision: &Decision) -> bool {
    !decision.reasons.is_empty()
        && decision
            .reasons
            .iter()
            .all(|reason| reason.constraint == ReasonKind::Input)
}
