//! Decisions and reasons, as they go on the wire (SPEC §4).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::name::Name;
use crate::vocabulary::ConstraintKeyword;

/// The three outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The call may proceed.
    Allow,
    /// The call is refused.
    Deny,
    /// A human must approve the call first.
    ApprovalRequired,
}

impl Verdict {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Deny => "deny",
            Verdict::ApprovalRequired => "approval_required",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a reason is about: a constraint of SPEC §2.4 (the first ten kinds, one per
/// [`ConstraintKeyword`], converted with `From`) or one of the engine's own checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReasonKind {
    /// `fieldEquals`
    FieldEquals,
    /// `fieldMatches`
    FieldMatches,
    /// `fieldRange`
    FieldRange,
    /// `payloadSchema`
    PayloadSchema,
    /// `actorBinding`
    ActorBinding,
    /// `rateLimit`
    RateLimit,
    /// `wallClockWindow`
    WallClockWindow,
    /// `any`
    Any,
    /// `all`
    All,
    /// `not`
    Not,
    /// No capability covers the resource, or the resource is malformed or suspicious.
    Resource,
    /// A capability covers the resource but not the operation.
    Operation,
    /// The skill is not loaded.
    UnknownSkill,
    /// The request's `skill_hash` differs from the loaded manifest.
    Revision,
    /// The grant is missing, unknown, for another capability, or revoked.
    Grant,
    /// The grant's lifetime is over (uses exhausted, expired, transaction not open).
    Lifetime,
    /// The agent's autonomy score is below the capability's risk.
    Risk,
    /// The capability is elevated and the skill has no recorded approval.
    Sensitivity,
    /// The request is malformed or breaks a limit.
    Input,
}

impl ReasonKind {
    /// Every kind: the constraint kinds in [`ConstraintKeyword::ALL`] order, then the engine's
    /// own checks.
    pub const ALL: [ReasonKind; 19] = [
        ReasonKind::FieldEquals,
        ReasonKind::FieldMatches,
        ReasonKind::FieldRange,
        ReasonKind::PayloadSchema,
        ReasonKind::ActorBinding,
        ReasonKind::RateLimit,
        ReasonKind::WallClockWindow,
        ReasonKind::Any,
        ReasonKind::All,
        ReasonKind::Not,
        ReasonKind::Resource,
        ReasonKind::Operation,
        ReasonKind::UnknownSkill,
        ReasonKind::Revision,
        ReasonKind::Grant,
        ReasonKind::Lifetime,
        ReasonKind::Risk,
        ReasonKind::Sensitivity,
        ReasonKind::Input,
    ];

    /// The wire name (`fieldMatches`, `unknownSkill`, ...); a constraint kind's is its
    /// keyword's name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::FieldEquals => ConstraintKeyword::FieldEquals.name(),
            ReasonKind::FieldMatches => ConstraintKeyword::FieldMatches.name(),
            ReasonKind::FieldRange => ConstraintKeyword::FieldRange.name(),
            ReasonKind::PayloadSchema => ConstraintKeyword::PayloadSchema.name(),
            ReasonKind::ActorBinding => ConstraintKeyword::ActorBinding.name(),
            ReasonKind::RateLimit => ConstraintKeyword::RateLimit.name(),
            ReasonKind::WallClockWindow => ConstraintKeyword::WallClockWindow.name(),
            ReasonKind::Any => ConstraintKeyword::Any.name(),
            ReasonKind::All => ConstraintKeyword::All.name(),
            ReasonKind::Not => ConstraintKeyword::Not.name(),
            ReasonKind::Resource => "resource",
            ReasonKind::Operation => "operation",
            ReasonKind::UnknownSkill => "unknownSkill",
            ReasonKind::Revision => "revision",
            ReasonKind::Grant => "grant",
            ReasonKind::Lifetime => "lifetime",
            ReasonKind::Risk => "risk",
            ReasonKind::Sensitivity => "sensitivity",
            ReasonKind::Input => "input",
        }
    }

    /// The kind with the wire name `name`, if any.
    pub fn from_name(name: &str) -> Option<ReasonKind> {
        ReasonKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl From<ConstraintKeyword> for ReasonKind {
    /// The reason kind of a failed constraint: a copy of its tag, nothing looked up.
    #[inline]
    fn from(keyword: ConstraintKeyword) -> ReasonKind {
        match keyword {
            ConstraintKeyword::FieldEquals => ReasonKind::FieldEquals,
            ConstraintKeyword::FieldMatches => ReasonKind::FieldMatches,
            ConstraintKeyword::FieldRange => ReasonKind::FieldRange,
            ConstraintKeyword::PayloadSchema => ReasonKind::PayloadSchema,
            ConstraintKeyword::ActorBinding => ReasonKind::ActorBinding,
            ConstraintKeyword::RateLimit => ReasonKind::RateLimit,
            ConstraintKeyword::WallClockWindow => ReasonKind::WallClockWindow,
            ConstraintKeyword::Any => ReasonKind::Any,
            ConstraintKeyword::All => ReasonKind::All,
            ConstraintKeyword::Not => ReasonKind::Not,
        }
    }
}

impl fmt::Display for ReasonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a capability did not decide, or why the request was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// The capability this reason is about (`null` for request-level reasons).
    pub capability: Option<Name>,
    /// What failed.
    pub constraint: ReasonKind,
    /// The concrete path of the offending value, when there is one.
    pub path: Option<String>,
    /// One line for people; quoted values are cut to 64 characters.
    pub message: String,
    /// `file:line:column` of the constraint in the policy, when there is one.
    pub source: Option<String>,
}

impl Reason {
    /// A request-level reason (no capability, path or source).
    pub fn request(constraint: ReasonKind, message: impl Into<String>) -> Self {
        Reason {
            capability: None,
            constraint,
            path: None,
            message: message.into(),
            source: None,
        }
    }
}

/// The engine's answer for one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// What the caller must do (serialized as `"decision"`). In observe mode this is always
    /// `allow`.
    #[serde(rename = "decision")]
    pub verdict: Verdict,
    /// The skill the request named.
    pub skill: Name,
    /// On allow (and approval_required), the capability that decided.
    pub capability: Option<Name>,
    /// On allow, the grant consumed, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Arc<str>>,
    /// In observe mode, the decision that would have been enforced when it was not `allow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed: Option<Verdict>,
    /// Why: every failing check on deny; the gating reason on approval_required; empty on allow.
    pub reasons: Vec<Reason>,
}

impl Decision {
    /// A deny with the given reasons.
    pub fn deny(skill: Name, reasons: Vec<Reason>) -> Self {
        Decision {
            verdict: Verdict::Deny,
            skill,
            capability: None,
            grant: None,
            observed: None,
            reasons,
        }
    }

    /// One decision as text: the verdict, the capability, and each failing check with its path and
    /// source.
    pub fn to_text(&self) -> String {
        let decision = self;
        let mut out = String::new();
        let verdict = match decision.observed {
            Some(observed) => format!("allow (observe mode: would be {observed})"),
            None => decision.verdict.to_string(),
        };
        out.push_str(&verdict);
        // The skill and grant come from the request: escaped, so they cannot start a line.
        let printable = crate::value::escape_controls;
        out.push_str(&format!(" — skill `{}`", printable(&decision.skill)));
        if let Some(capability) = &decision.capability {
            out.push_str(&format!(", capability `{}`", printable(capability)));
        }
        if let Some(grant) = &decision.grant {
            out.push_str(&format!(", grant `{}`", printable(grant)));
        }
        out.push('\n');
        for reason in &decision.reasons {
            out.push_str("  ");
            if let Some(capability) = &reason.capability {
                out.push_str(&format!("[{}] ", printable(capability)));
            }
            out.push_str(reason.constraint.as_str());
            if let Some(path) = &reason.path {
                // A path holds the request's member names.
                out.push_str(&format!(" {}", printable(path)));
            }
            out.push_str(&format!(": {}", printable(&reason.message)));
            if let Some(source) = &reason.source {
                // A file name is text too.
                out.push_str(&format!("\n      at {}", printable(source)));
            }
            out.push('\n');
        }
        out
    }

    /// The decision that was (or, in observe mode, would have been) enforced.
    pub fn effective(&self) -> Verdict {
        self.observed.unwrap_or(self.verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constraint_reason_is_named_by_its_keyword() {
        for keyword in ConstraintKeyword::ALL {
            let kind = ReasonKind::from(keyword);
            assert_eq!(kind.as_str(), keyword.name());
            assert_eq!(ReasonKind::from_name(keyword.name()), Some(kind));
        }
        let constraint_kinds: Vec<ReasonKind> =
            ConstraintKeyword::ALL.map(ReasonKind::from).to_vec();
        assert_eq!(
            ReasonKind::ALL.get(..constraint_kinds.len()),
            Some(constraint_kinds.as_slice())
        );
    }

    #[test]
    fn every_reason_kind_serialises_as_its_wire_name() {
        let mut names: Vec<&str> = ReasonKind::ALL.iter().map(|k| k.as_str()).collect();
        for kind in ReasonKind::ALL {
            let wire = serde_json::to_value(kind).unwrap();
            assert_eq!(wire.as_str(), Some(kind.as_str()));
            let back: ReasonKind = serde_json::from_value(wire).unwrap();
            assert_eq!(back, kind);
            assert_eq!(ReasonKind::from_name(kind.as_str()), Some(kind));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ReasonKind::ALL.len());
        // `ALL` follows declaration order: a variant left out shows up as a gap.
        for (i, kind) in ReasonKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind}");
        }
        assert_eq!(ReasonKind::from_name("FieldEquals"), None);
    }
}
