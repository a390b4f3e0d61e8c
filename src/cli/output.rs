//! Printing decisions for people and for programs.

use capgate::{Decision, Verdict};

/// One decision as text: the verdict, the capability, and each failing check with its path and
/// source.
pub fn decision_text(decision: &Decision) -> String {
    let mut out = String::new();
    let verdict = match decision.observed {
        Some(observed) => format!("allow (observe mode: would be {observed})"),
        None => decision.decision.to_string(),
    };
    out.push_str(&verdict);
    out.push_str(&format!(" — skill `{}`", decision.skill));
    if let Some(capability) = &decision.capability {
        out.push_str(&format!(", capability `{capability}`"));
    }
    if let Some(grant) = &decision.grant {
        out.push_str(&format!(", grant `{grant}`"));
    }
    out.push('\n');
    for reason in &decision.reasons {
        out.push_str("  ");
        if let Some(capability) = &reason.capability {
            out.push_str(&format!("[{capability}] "));
        }
        out.push_str(reason.constraint.as_str());
        if let Some(path) = &reason.path {
            out.push_str(&format!(" {path}"));
        }
        out.push_str(&format!(": {}", reason.message));
        if let Some(source) = &reason.source {
            out.push_str(&format!("\n      at {source}"));
        }
        out.push('\n');
    }
    out
}

/// The exit code for a decision.
pub fn exit_code(decision: &Decision) -> u8 {
    match decision.decision {
        Verdict::Allow => super::EXIT_OK,
        Verdict::Deny => super::EXIT_DENY,
        Verdict::ApprovalRequired => super::EXIT_APPROVAL,
    }
}
