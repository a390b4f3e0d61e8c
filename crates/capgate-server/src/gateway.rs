//! Deciding an outbound HTTP call in the gateway modes: the identity, the call, the decision,
//! and how each mode tells the front.
//!
//! Every mode (ext_authz, the auth-subrequest dialects, the proxy, the tower layer) decides
//! through [`Gateway::decide`] and answers a refusal the same way: 403 with the decision as a
//! JSON body, an `x-capgate-reason` header that holds only the first reason's kind and its
//! capability (the reasons quote request values; those stay in the body), and for an
//! approval-required call an `x-capgate-approval-required` header naming the capability to
//! approve.

use std::sync::Arc;
use std::time::Instant;

use axum::http::HeaderValue;
use capgate::{Decision, Engine, Verdict};

use crate::call::{CallRefusal, HttpCall, Payload, request};
use crate::identity::Identity;
use crate::metrics::Metrics;

/// The header that says why a call was refused: the reason's kind and capability.
pub const REASON_HEADER: &str = "x-capgate-reason";
/// The header that names the capability an approval-required call needs approved.
pub const APPROVAL_HEADER: &str = "x-capgate-approval-required";

/// What deciding a call gave.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The engine decided.
    Decided(Decision),
    /// The call was refused before deciding (a method override, a target capgate cannot name).
    Refused(CallRefusal),
}

impl Outcome {
    /// True for an allow (in observe mode, the allow returned).
    pub fn allowed(&self) -> bool {
        matches!(self, Outcome::Decided(d) if d.verdict == Verdict::Allow)
    }

    /// The `x-capgate-reason` value of a refusal: `KIND CAPABILITY` or `KIND`, only characters
    /// that policy names and reason kinds are made of.
    pub fn reason_header(&self) -> Option<HeaderValue> {
        let text = match self {
            Outcome::Refused(CallRefusal::MethodOverride(_)) => "methodOverride".to_owned(),
            Outcome::Refused(CallRefusal::Target(_)) => "resource".to_owned(),
            Outcome::Decided(decision) if decision.verdict == Verdict::Allow => return None,
            Outcome::Decided(decision) => match decision.reasons.first() {
                None => decision.verdict.as_str().to_owned(),
                Some(reason) => match &reason.capability {
                    Some(capability) => format!("{} {capability}", reason.constraint.as_str()),
                    None => reason.constraint.as_str().to_owned(),
                },
            },
        };
        let visible: String = text
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        HeaderValue::from_str(&visible).ok()
    }

    /// The `x-capgate-approval-required` value: the capability to approve.
    pub fn approval_header(&self) -> Option<HeaderValue> {
        let Outcome::Decided(decision) = self else {
            return None;
        };
        if decision.verdict != Verdict::ApprovalRequired {
            return None;
        }
        let capability = decision.capability.as_deref().or_else(|| {
            decision
                .reasons
                .first()
                .and_then(|r| r.capability.as_deref())
        })?;
        let visible: String = capability
            .chars()
            .map(|c| if c.is_ascii_graphic() { c } else { '?' })
            .collect();
        HeaderValue::from_str(&visible).ok()
    }

    /// The JSON body of a refusal: the decision (SPEC §4), or for a call refused before
    /// deciding, a deny with its reason.
    pub fn body(&self) -> String {
        match self {
            Outcome::Decided(decision) => serde_json::to_string(decision).unwrap_or_default(),
            Outcome::Refused(refusal) => serde_json::json!({
                "decision": "deny",
                "capability": null,
                "reasons": [{"capability": null, "constraint": "input", "message": refusal.to_string()}],
            })
            .to_string(),
        }
    }
}

/// The engine as the gateway modes use it.
#[derive(Debug, Clone)]
pub struct Gateway {
    engine: Arc<Engine>,
    metrics: Arc<Metrics>,
}

impl Gateway {
    /// A gateway deciding with `engine`, counting each decision and its latency in `metrics`.
    pub fn new(engine: Arc<Engine>, metrics: Arc<Metrics>) -> Self {
        Gateway { engine, metrics }
    }

    /// Decides `call` for `identity`.
    pub fn decide(&self, identity: &Identity, call: &HttpCall<'_>) -> Outcome {
        let started = Instant::now();
        let (request, payload) = match request(identity, call) {
            Ok(built) => built,
            Err(refusal) => return Outcome::Refused(refusal),
        };
        let decision = match payload {
            Payload::Unreadable(why) => self.engine.check_value_without_payload(request, why),
            Payload::Absent | Payload::Json(_) => self.engine.check_value(request),
        };
        self.metrics
            .decided(&identity.skill, &decision, started.elapsed().as_secs_f64());
        Outcome::Decided(decision)
    }
}
