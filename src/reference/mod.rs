//! A reference evaluator: the decision of SPEC §5.1, computed by walking the AST.
//!
//! [`decide`] takes the parsed [`PolicyFile`]s, a [`Request`] and the clock's instant and
//! returns a [`ReferenceDecision`]: the verdict, the deciding capability and, on deny, the first
//! failing check of every candidate ([`ReferenceFailure`]). It decides statelessly, like
//! `capgate check`: no grants, lifetimes, revocations or rate limits; gating by autonomy and
//! sensitivity (`elevated` is always `approval_required`, since there are no approvals).
//!
//! This module exists to be compared with the engine (`tests/it/differential.rs`), so it is written
//! to be obviously correct rather than fast: it interprets the AST directly, collects every value
//! a path reaches into a `Vec` before judging them, and recompiles regexes, schemas and resource
//! templates on every call. It shares no evaluation code with the compiler or the VM. It reuses
//! only pure helpers that have their own test suites: JSON equality and number ordering
//! (`value`), request-resource parsing and template matching (`vm::resource`, which is not what
//! the differential tests target), and the payload-schema compiler and validator (which has its
//! own conformance suite). Wall-clock windows are computed here, naively, from the local time.
//!
//! Compiled only with the `reference` feature.

mod constraint;
mod path;
mod window;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::bytecode::resource::ResourcePattern;
use crate::engine::{Request, Verdict};
use crate::limits::Limits;
use crate::syntax::ast::{Capability, PolicyFile, Risk, Sensitivity, Skill};
use crate::vm::resource::{Bindings, RequestResource};

use constraint::{Abort, Env};

/// What the reference decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceDecision {
    /// allow, deny or approval_required.
    pub verdict: Verdict,
    /// The deciding capability (allow and approval_required).
    pub capability: Option<String>,
    /// On deny: one entry per failing candidate in declaration order, or the single
    /// request-level problem. On approval_required: the gate that stopped it.
    pub failures: Vec<ReferenceFailure>,
}

/// One reason: which capability (none for a request-level problem) and which check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceFailure {
    /// The capability the check belongs to; `None` for `unknownSkill`, `input`, `revision`,
    /// `resource` and `operation`.
    pub capability: Option<String>,
    /// The constraint name of the first failing top-level constraint (`fieldEquals`, `any`,
    /// ...), or `unknownSkill`, `input`, `revision`, `resource`, `operation`, `risk`,
    /// `sensitivity`.
    pub constraint: &'static str,
}

impl ReferenceDecision {
    fn deny(failures: Vec<ReferenceFailure>) -> Self {
        ReferenceDecision {
            verdict: Verdict::Deny,
            capability: None,
            failures,
        }
    }

    fn request_problem(constraint: &'static str) -> Self {
        Self::deny(vec![ReferenceFailure {
            capability: None,
            constraint,
        }])
    }
}

/// Decides `request` against `files` at the instant `now`, statelessly.
pub fn decide(files: &[PolicyFile], request: &Request, now: DateTime<Utc>) -> ReferenceDecision {
    decide_with_limits(files, request, now, &Limits::DEFAULT)
}

/// [`decide`] with explicit limits (only `max_array_scan` and `refuse_case_variant_reads` are
/// consulted: case-variant member names, `refuse_case_variant_members`, are the request
/// parsers' to refuse, and a [`Request`] is taken as built, as `Engine::check` takes it).
pub fn decide_with_limits(
    files: &[PolicyFile],
    request: &Request,
    now: DateTime<Utc>,
    limits: &Limits,
) -> ReferenceDecision {
    // 1. The skill.
    let Some(skill) = files
        .iter()
        .flat_map(|file| file.skills.iter())
        .find(|skill| skill.name.node == request.skill)
    else {
        return ReferenceDecision::request_problem("unknownSkill");
    };
    // Request validation: agent and context are objects or absent, autonomy 0..=100.
    let is_object_or_null = |value: &Value| matches!(value, Value::Null | Value::Object(_));
    if !is_object_or_null(&request.agent) || !is_object_or_null(&request.context) {
        return ReferenceDecision::request_problem("input");
    }
    let autonomy = match &request.autonomy {
        None => 0,
        Some(value) => match autonomy_score(value) {
            Some(score) => score,
            None => return ReferenceDecision::request_problem("input"),
        },
    };
    if let Some(expected) = &request.skill_hash
        && skill.hash.as_ref().map(|h| &h.node) != Some(expected)
    {
        return ReferenceDecision::request_problem("revision");
    }
    // 2. The resource.
    let Ok(resource) = RequestResource::parse(&request.resource) else {
        return ReferenceDecision::request_problem("resource");
    };
    // 3. Candidates, 4. constraints, in declaration order.
    let mut failures = Vec::new();
    let mut any_resource_matched = false;
    let mut any_operation_matched = false;
    for capability in &skill.capabilities {
        let Some(declared) = &capability.resource else {
            continue;
        };
        let Ok(pattern) = ResourcePattern::compile(declared.node.kind, &declared.node.locator)
        else {
            continue;
        };
        let mut bindings = Bindings::new();
        if !pattern.matches(&resource, &mut bindings) {
            continue;
        }
        any_resource_matched = true;
        if !capability
            .operations
            .iter()
            .any(|op| op.node == request.operation)
        {
            continue;
        }
        any_operation_matched = true;
        let env = Env {
            request,
            resource: &resource,
            binding_names: pattern.bindings(),
            bindings: &bindings,
            now,
            max_array_scan: limits.max_array_scan,
            refuse_case_variants: limits.refuse_case_variant_reads,
            negated: std::cell::Cell::new(false),
        };
        match constraint::first_failing(&env, &capability.constraints) {
            // A limit breached while evaluating denies the whole request, naming the capability.
            Err(Abort) => {
                return ReferenceDecision::deny(vec![ReferenceFailure {
                    capability: Some(capability.name.node.clone()),
                    constraint: "input",
                }]);
            }
            Ok(Some(name)) => failures.push(ReferenceFailure {
                capability: Some(capability.name.node.clone()),
                constraint: name,
            }),
            // 5. Gating on the first candidate whose constraints hold.
            Ok(None) => return gate(skill, capability, autonomy),
        }
    }
    if !any_resource_matched {
        failures.push(ReferenceFailure {
            capability: None,
            constraint: "resource",
        });
    } else if !any_operation_matched {
        failures.push(ReferenceFailure {
            capability: None,
            constraint: "operation",
        });
    }
    ReferenceDecision::deny(failures)
}

/// The autonomy score of a request: an integer 0..=100, written as an integer or a float with
/// no fraction.
fn autonomy_score(value: &Value) -> Option<u8> {
    let number = value.as_number()?;
    let whole = match (number.as_u64(), number.as_f64()) {
        (Some(n), _) => n,
        // A whole number in 0..=100: the cast is exact.
        (None, Some(f)) if f.fract() == 0.0 && (0.0..=100.0).contains(&f) => f as u64,
        _ => return None,
    };
    u8::try_from(whole).ok().filter(|n| *n <= 100)
}

fn risk_score(risk: Risk) -> u8 {
    match risk {
        Risk::Label(label) => label.min_score(),
        // The checker keeps scores in 0..=100.
        Risk::Score(n) => u8::try_from(n).unwrap_or(u8::MAX),
    }
}

fn gate(skill: &Skill, capability: &Capability, autonomy: u8) -> ReferenceDecision {
    let risk = capability
        .risk
        .as_ref()
        .or(skill.risk.as_ref())
        .map_or(0, |r| risk_score(r.node));
    let sensitivity = capability
        .sensitivity
        .as_ref()
        .or(skill.sensitivity.as_ref())
        .map_or(Sensitivity::Normal, |s| s.node);
    let name = Some(capability.name.node.clone());
    let stopped_by = if autonomy < risk {
        Some("risk")
    } else if sensitivity == Sensitivity::Elevated {
        Some("sensitivity")
    } else {
        None
    };
    match stopped_by {
        None => ReferenceDecision {
            verdict: Verdict::Allow,
            capability: name,
            failures: Vec::new(),
        },
        Some(gate) => ReferenceDecision {
            verdict: Verdict::ApprovalRequired,
            capability: name.clone(),
            failures: vec![ReferenceFailure {
                capability: name,
                constraint: gate,
            }],
        },
    }
}
