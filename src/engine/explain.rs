//! Why a call is not allowed: the reasons of a decision, built only on the deny path.
//!
//! - [`explain_failure`] traces a constraint program that failed to find the offending value;
//!   [`vm_error_reason`] says which limit a program broke.
//! - [`revoked_message`], [`grant_refusal`] and [`rate_reason`] word what the state store
//!   refused; [`reason_for`] attaches a message to its capability.
//! - [`traces`] traces every constraint of every candidate, for [`Engine::explain`]
//!   (`:explain`), into [`CandidateTrace`]s.

use super::Engine;
use super::decide::{input, now_for};
use super::decision::{Reason, ReasonKind};
use super::view::RequestView;
use crate::bytecode::index::{CheckIdx, lookup};
use crate::bytecode::program::{CompiledCapability, CompiledSkill, RateLimitSpec};
use crate::name::Name;
use crate::runtime::{GrantRefusal, Revocation, StateStore};
use crate::span::Location;
use crate::vm::resource::{Bindings, RequestResource};
use crate::vm::{Input, Json, Outcome, RegexBudget, TestReport, Tracer, VmError};

/// The trace of one candidate, for `:explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateTrace {
    /// The capability.
    pub capability: Name,
    /// Each top-level constraint: its summary, whether it held, and its tests.
    pub checks: Vec<(String, bool, Vec<TestReport>)>,
}

/// Collects the test reports of the failing top-level constraint.
#[derive(Default)]
struct FirstFailure {
    current: Vec<TestReport>,
    failed: Option<(CheckIdx, Vec<TestReport>)>,
}

impl Tracer for FirstFailure {
    fn test(&mut self, report: TestReport) {
        self.current.push(report);
    }

    fn require(&mut self, check: CheckIdx, holds: bool) {
        let reports = std::mem::take(&mut self.current);
        if !holds && self.failed.is_none() {
            self.failed = Some((check, reports));
        }
    }
}

/// Collects every constraint's reports.
#[derive(Default)]
struct Everything {
    current: Vec<TestReport>,
    checks: Vec<(CheckIdx, bool, Vec<TestReport>)>,
}

impl Tracer for Everything {
    fn test(&mut self, report: TestReport) {
        self.current.push(report);
    }

    fn require(&mut self, check: CheckIdx, holds: bool) {
        let reports = std::mem::take(&mut self.current);
        self.checks.push((check, holds, reports));
    }
}

/// Traces every candidate's every constraint (for [`Engine::explain`]). Stateless: lifetimes
/// and rate limits are not consulted.
pub(super) fn traces<'r, J: Json<'r>>(
    engine: &Engine,
    request: &RequestView<'r, J>,
) -> Vec<CandidateTrace> {
    let policy = engine.policy();
    let Some(skill) = policy.skill(request.skill) else {
        return Vec::new();
    };
    let Ok(resource) = RequestResource::parse(request.resource) else {
        return Vec::new();
    };
    let now = now_for(engine, request).unwrap_or_else(|_| engine.clock.now());
    let mut traces = Vec::new();
    let mut bindings = Bindings::new();
    for capability in &skill.capabilities {
        if !capability.resource.matches(&resource, &mut bindings)
            || !capability.allows_operation(request.operation)
        {
            continue;
        }
        let regex_budget = RegexBudget::new(engine.limits.max_regex_work);
        let input = input(engine, request, &resource, &bindings, now, &regex_budget);
        let mut tracer = Everything::default();
        let _ = crate::vm::trace(&capability.program, &input, &mut tracer, true);
        let checks = tracer
            .checks
            .into_iter()
            .map(|(check, holds, reports)| {
                let summary = lookup(&capability.program.checks, check)
                    .map_or_else(String::new, |c| c.summary.clone());
                (summary, holds, reports)
            })
            .collect();
        traces.push(CandidateTrace {
            capability: capability.name.clone(),
            checks,
        });
    }
    traces
}

/// A reason of `capability`.
pub(super) fn reason_for(
    capability: &CompiledCapability,
    constraint: ReasonKind,
    message: String,
) -> Reason {
    Reason {
        capability: Some(capability.name.clone()),
        constraint,
        path: None,
        message,
        source: capability.location.as_ref().map(ToString::to_string),
    }
}

/// Quotes a manifest hash whole (a `sha256:` hash is 71 characters: cut at 64, two hashes that
/// differ only at the end would read the same), still bounded for hostile input.
pub(super) fn quote_hash(text: &str) -> String {
    format!("`{}`", crate::value::truncate_str(text, 160))
}

/// Quotes a name or a value from a request, cut for messages.
pub(super) fn quote(text: &str) -> String {
    format!("`{}`", crate::value::truncate_str(text, 64))
}

/// Says what is revoked: the skill, the capability, or (for a store that cannot tell) either.
pub(super) fn revoked_message(
    store: &dyn StateStore,
    skill: &CompiledSkill,
    capability: &CompiledCapability,
) -> String {
    match store.revocation(&skill.name, &capability.name) {
        Revocation::Skill => format!("skill {} is revoked", quote(&skill.name)),
        Revocation::Capability => format!("capability {} is revoked", quote(&capability.name)),
        // `None`: revoked when checked, lifted since; still refused, as checked.
        Revocation::SkillOrCapability | Revocation::None => format!(
            "skill {} or its capability {} is revoked",
            quote(&skill.name),
            quote(&capability.name)
        ),
    }
}

/// The kind and message of a refused grant.
pub(super) fn grant_refusal(refusal: GrantRefusal, token: &str) -> (ReasonKind, String) {
    let token = quote(token);
    match refusal {
        GrantRefusal::UnknownToken => (ReasonKind::Grant, format!("no grant {token} was issued")),
        GrantRefusal::OtherCapability => (
            ReasonKind::Grant,
            format!("grant {token} was issued for another skill or capability"),
        ),
        GrantRefusal::Revoked => (ReasonKind::Grant, format!("grant {token} is revoked")),
        GrantRefusal::CapabilityRemoved => (
            ReasonKind::Grant,
            format!("grant {token} is void: a reload removed its capability after it was issued"),
        ),
        GrantRefusal::TransactionMismatch => (
            ReasonKind::Grant,
            format!("grant {token} is bound to a transaction the request does not name"),
        ),
        GrantRefusal::TransactionEnded => (
            ReasonKind::Lifetime,
            format!("the transaction of grant {token} has ended"),
        ),
        GrantRefusal::UsesExhausted => (
            ReasonKind::Lifetime,
            format!("grant {token} has no uses left"),
        ),
        GrantRefusal::Expired => (ReasonKind::Lifetime, format!("grant {token} has expired")),
    }
}

/// The reason a rate limit refused a call at `now`: reached, or — for a sliding window, which
/// counts only within 64-bit nanoseconds — a clock outside the range it supports (regression:
/// a clock in the year 9999 said "rate limit reached" on the first call).
pub(super) fn rate_reason(
    capability: &CompiledCapability,
    limit: &RateLimitSpec,
    now: chrono::DateTime<chrono::Utc>,
) -> Reason {
    let message = if limit.burst.is_none() && !crate::runtime::window_counts_at(now) {
        format!(
            "the clock ({}) is outside the supported range of the rate limit of {} \
             (1677-09-21 to 2262-04-11)",
            now.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            limit.summary
        )
    } else {
        format!("rate limit of {} reached", limit.summary)
    };
    Reason {
        capability: Some(capability.name.clone()),
        constraint: ReasonKind::RateLimit,
        path: None,
        message,
        source: limit.location.as_ref().map(ToString::to_string),
    }
}

/// The reason for a program that could not be evaluated: the limit it broke (reason `input`).
pub(super) fn vm_error_reason(capability: &CompiledCapability, error: &VmError) -> Reason {
    Reason {
        capability: Some(capability.name.clone()),
        constraint: ReasonKind::Input,
        path: match error {
            VmError::ArrayTooLong { path, .. } => Some(path.clone()),
            VmError::RegexWork { path, .. } => Some(path.clone()),
            VmError::SchemaLimit(_) => Some("payload".to_owned()),
            VmError::CaseVariant { path } => path.clone(),
            VmError::Internal(_) => None,
        },
        message: error.to_string(),
        source: None,
    }
}

/// Builds the reason for a failed top-level constraint by tracing the program. Each trace runs
/// on a budget of its own with the regex work that was `left` when the decision ran the
/// program: it repeats (a part of) that run, so it fits it, and the decision's budget — which
/// the next candidates share — is not spent on explaining.
pub(super) fn explain_failure<'r, J: Json<'r>>(
    capability: &CompiledCapability,
    decided: &Input<'_, J>,
    check: CheckIdx,
    left: u64,
) -> Reason {
    let (traced_budget, lenient_budget) = (
        decided.regex_budget.with_left(left),
        decided.regex_budget.with_left(left),
    );
    let input = &Input {
        regex_budget: &traced_budget,
        ..*decided
    };
    let lenient_input = &Input {
        regex_budget: &lenient_budget,
        ..*decided
    };
    let info = lookup(&capability.program.checks, check);
    let constraint = info.map_or(ReasonKind::Input, |c| ReasonKind::from(c.constraint));
    let source = info
        .and_then(|c| c.location.as_ref())
        .map(Location::to_text);
    let mut tracer = FirstFailure::default();
    // Only the failing check needs its tests explained: the ones before it held.
    let traced = crate::vm::trace_check(&capability.program, input, &mut tracer, check);
    let reports = match (traced, tracer.failed) {
        (Ok(Outcome::Failed(traced_check)), Some((failed, reports)))
            if traced_check == check && failed == check =>
        {
            reports
        }
        _ => {
            // INVARIANT (trace-agrees): the traced run takes the same path as the fast run.
            return Reason {
                capability: Some(capability.name.clone()),
                constraint,
                path: None,
                message: "internal error: the trace disagrees with the decision".to_owned(),
                source,
            };
        }
    };
    let broken: Vec<&TestReport> = reports.iter().filter(|r| r.broken).collect();
    // The tests that could not decide explain the deny only when the check would have held had
    // they given the answer that helps it; otherwise a decided test failed the check on its own
    // and is named (regression: an undecidable test in an `any` that held anyway took the place
    // of the failure that mattered).
    let undecidable = !broken.is_empty()
        && crate::vm::undecidable_tests_decide(&capability.program, lenient_input, check)
            .unwrap_or(true);
    let failing: Vec<&TestReport> = reports
        .iter()
        .filter(|r| !r.holds && (!r.broken || undecidable))
        .collect();
    let described = |reports: &[&TestReport]| {
        reports
            .iter()
            .map(|r| match &r.path {
                Some(p) => format!("{p}: {}", r.message),
                None => r.message.clone(),
            })
            .collect::<Vec<String>>()
            .join("; ")
    };
    let (path, message) = match constraint {
        // A value a test could not decide on counted as whatever fails the check: say so, and
        // which value (regression: "the negated constraint holds" for a repeated parameter).
        _ if undecidable => (
            broken.first().and_then(|r| r.path.clone()),
            format!(
                "the constraint cannot be decided on this request, and a value it cannot decide \
                 on is never a pass: {}",
                described(&broken)
            ),
        ),
        ReasonKind::Not => {
            let held: Vec<&str> = reports
                .iter()
                .filter(|r| r.holds && !r.broken)
                .map(|r| r.message.as_str())
                .collect();
            (
                reports
                    .iter()
                    .find(|r| r.holds)
                    .and_then(|r| r.path.clone()),
                format!("the negated constraint holds: {}", held.join("; ")),
            )
        }
        ReasonKind::Any => {
            let messages: Vec<String> = failing
                .iter()
                .map(|r| match &r.path {
                    Some(p) => format!("{p}: {}", r.message),
                    None => r.message.clone(),
                })
                .collect();
            (
                failing.first().and_then(|r| r.path.clone()),
                format!("no alternative holds: {}", messages.join("; ")),
            )
        }
        _ => match failing.last() {
            Some(report) => (report.path.clone(), report.message.clone()),
            None => (None, "the constraint does not hold".to_owned()),
        },
    };
    Reason {
        capability: Some(capability.name.clone()),
        constraint,
        path,
        message,
        source,
    }
}
