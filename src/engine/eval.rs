//! One decision, step by step (SPEC §5.1).
//!
//! 1. Unknown skill → deny `unknownSkill`; a `skill_hash` that differs → deny `revision`.
//! 2. A malformed or suspicious resource → deny `resource`.
//! 3. Candidates: capabilities whose template matches and whose operations contain the
//!    request's, in declaration order; none → deny `resource` or `operation`.
//! 4. Per candidate: revocation and lifetime/grant (stateful only), the constraint program, the
//!    rate limits (stateful only). The first candidate for which everything holds decides.
//! 5. Gating on that candidate: autonomy below its risk → `approval_required` (`risk`);
//!    `elevated` without a recorded approval → `approval_required` (`sensitivity`).
//! 6. Allow consumes, atomically, one slot per rate limit and one use of the grant; if the
//!    commit is refused (another thread took the last slot), the candidate fails and the next
//!    one is tried.
//! 7. No candidate → deny with the first failing check of every candidate.
//!
//! Reasons are built only on the deny path: the program runs once fast; only when it fails is it
//! traced to find the offending value.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Engine;
use super::decision::{Decision, Reason, ReasonKind, Verdict};
use super::rate_key::KeyRefusal;
use super::request::Request;
use super::view::RequestView;
use crate::bytecode::index::{CheckIdx, lookup};
use crate::bytecode::program::{
    CompiledCapability, CompiledSkill, LifetimeSpec, RateLimitSpec, SensitivityLevel,
};
use crate::name::Name;
use crate::revision::Revision;
use crate::runtime::{
    Authority, Commit, CommitRefusal, GrantLifetime, GrantRefusal, GrantStatus, GrantUse,
    LifetimeBound, RateCharge, RateKey, RateSpec, Revocation, StateStore,
};
use crate::span::Location;
use crate::vm::json::JsonKind;
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

/// What one candidate capability answers. `'g` is the request's: an allow names the grant it
/// consumed, borrowed from the request.
enum Step<'g> {
    /// The constraint program held (the candidate goes on to rate limits and gating).
    Holds,
    /// The candidate allows, consuming `grant` if any. The caller builds the [`Decision`] where
    /// it returns it: a `Decision` built inside `Step` and then moved out of it is copied with
    /// 16-byte loads of what was just stored 8 bytes at a time, and each such load waits for
    /// the stores (in a profile, a third of `decide_in`'s samples; `docs/performance.md`, *What
    /// makes the decision path fast*).
    Allows {
        /// The grant the allow consumed.
        grant: Option<&'g str>,
    },
    /// The candidate decides otherwise: approval_required (gating).
    Decides(Decision),
    /// The candidate fails with this reason; try the next.
    Fails(Reason),
    /// The whole request is refused (a limit or an internal error).
    Abort(Reason),
}

impl Engine {
    fn now_for<'r, J: Json<'r>>(
        &self,
        request: &RequestView<'r, J>,
    ) -> Result<DateTime<Utc>, Reason> {
        Ok(self
            .request_time(request)?
            .unwrap_or_else(|| self.clock.now()))
    }

    /// The request's `time` when the clock is simulated (`None`: read the engine's clock). A
    /// `time` that is not an RFC 3339 timestamp is refused on every engine, live ones included,
    /// so the same request is refused alike by `capgate check`, replay and a gateway
    /// (regression: a live engine allowed it).
    #[inline]
    fn request_time<'r, J: Json<'r>>(
        &self,
        request: &RequestView<'r, J>,
    ) -> Result<Option<DateTime<Utc>>, Reason> {
        let Some(time) = &request.time else {
            return Ok(None);
        };
        let parsed = crate::time::parse_timestamp(time).ok_or_else(|| {
            Reason::request(
                ReasonKind::Input,
                format!("`time` {} is not an RFC 3339 timestamp", quote(time)),
            )
        })?;
        // A live engine never trusts a request's clock.
        Ok(self.clock.is_simulated().then_some(parsed))
    }

    /// What the programs of one candidate read: the request, borrowed, with its bindings.
    fn input<'i, 'r: 'i, J: Json<'r>>(
        &self,
        request: &'i RequestView<'r, J>,
        resource: &'i RequestResource<'i>,
        bindings: &'i Bindings<'i>,
        now: DateTime<Utc>,
        regex_budget: &'i RegexBudget,
    ) -> Input<'i, J> {
        Input {
            payload: request.payload,
            agent: request.agent,
            context: request.context,
            resource,
            bindings,
            skill: request.skill,
            operation: request.operation,
            transaction: request.transaction,
            now,
            max_array_scan: self.limits.max_array_scan,
            regex_budget,
            refuse_case_variants: self.limits.refuse_case_variant_reads,
        }
    }

    pub(super) fn decide<'r, J: Json<'r>>(&self, request: &RequestView<'r, J>) -> Decision {
        self.with_policy(|policy| self.decide_in(policy.skill(request.skill), request))
            .unwrap_or_else(|| self.policy_unreadable(request))
    }

    /// [`Engine::decide`], and the revision of the named skill in the policy that decided (for
    /// the audit record: read from the same snapshot, so a reload between the decision and the
    /// record cannot make the record name another revision).
    pub(super) fn decide_with_revision<'r, J: Json<'r>>(
        &self,
        request: &RequestView<'r, J>,
    ) -> (Decision, Option<Revision>) {
        self.with_policy(|policy| {
            let skill = policy.skill(request.skill);
            (
                self.decide_in(skill, request),
                skill.map(|skill| skill.revision),
            )
        })
        .unwrap_or_else(|| (self.policy_unreadable(request), None))
    }

    /// The deny when `with_policy` could not run (unreachable by construction); never an allow.
    #[cold]
    fn policy_unreadable<'r, J: Json<'r>>(&self, request: &RequestView<'r, J>) -> Decision {
        self.finish(Decision::deny(
            Name::from(request.skill),
            vec![Reason::request(
                ReasonKind::Input,
                "internal error: the policy could not be read",
            )],
        ))
    }

    /// The decision for `request`, whose skill is `skill` in the policy in force (`None`: no
    /// skill of that name is loaded).
    fn decide_in<'r, J: Json<'r>>(
        &self,
        skill: Option<&Arc<CompiledSkill>>,
        request: &RequestView<'r, J>,
    ) -> Decision {
        let Some(skill) = skill else {
            return self.finish(Decision::deny(
                Name::from(request.skill),
                vec![Reason::request(
                    ReasonKind::UnknownSkill,
                    format!("no skill {} is loaded", quote(request.skill)),
                )],
            ));
        };
        let deny = |reasons| self.finish(Decision::deny(skill.name.clone(), reasons));
        if let Some(reason) = validate(request) {
            return deny(vec![reason]);
        }
        // The clock is read once, and only when a candidate needs it (a stateful engine, or a
        // program with `fieldRange ... now` or `window`): most decisions never read it.
        let given_time = match self.request_time(request) {
            Ok(time) => time,
            Err(reason) => return deny(vec![reason]),
        };
        let mut clock_time = None;
        if let Some(expected) = &request.skill_hash
            && skill.hash.as_deref() != Some(&**expected)
        {
            let loaded = skill
                .hash
                .as_deref()
                .map_or("no hash".to_owned(), quote_hash);
            return deny(vec![Reason::request(
                ReasonKind::Revision,
                format!(
                    "request names skill hash {} but the loaded manifest has {loaded}",
                    quote_hash(expected)
                ),
            )]);
        }
        let mut bindings = Bindings::new();
        // A plain http request of the first capability's origin is parsed and matched against
        // its template in one pass; any other is parsed alone first, and every rejection is
        // the general parser's.
        let first = skill.capabilities.first().and_then(|capability| {
            capability
                .resource
                .parse_and_match(request.resource, &mut bindings)
        });
        // Borrowed where `parse_and_match` wrote it: moving it out of the `Option` copies it
        // with 16-byte loads of what was just stored 8 bytes at a time, and the loads wait for
        // the stores (in a profile, a sixth of `decide_in`'s samples).
        let parsed;
        let (resource, mut first_matched) = match &first {
            Some((resource, matched)) => (resource, Some(*matched)),
            None => match RequestResource::parse(request.resource) {
                Ok(resource) => {
                    parsed = resource;
                    (&parsed, None)
                }
                Err(rejection) => {
                    return deny(vec![Reason::request(
                        ReasonKind::Resource,
                        format!(
                            "resource {} is refused: {rejection}",
                            quote(request.resource)
                        ),
                    )]);
                }
            },
        };
        let mut reasons = Vec::new();
        let mut resource_matched = false;
        let mut operation_matched = false;
        // One budget for the whole request: every candidate's matches are paid from it.
        let regex_budget = RegexBudget::new(self.limits.max_regex_work);
        for capability in &skill.capabilities {
            // `matches` compares the resource kind too; the first capability may have been
            // matched already.
            let matched = first_matched
                .take()
                .unwrap_or_else(|| capability.resource.matches(resource, &mut bindings));
            if !matched {
                continue;
            }
            resource_matched = true;
            if !capability.allows_operation(request.operation) {
                continue;
            }
            operation_matched = true;
            let now = match given_time {
                Some(time) => time,
                None if self.state.is_some() || capability.program.reads_clock() => {
                    *clock_time.get_or_insert_with(|| self.clock.now())
                }
                // Nothing this candidate runs reads the instant.
                None => DateTime::<Utc>::UNIX_EPOCH,
            };
            let input = self.input(request, resource, &bindings, now, &regex_budget);
            match self.candidate(skill, capability, request, &input, now) {
                // Not through `finish`, which changes only what is not an allow (observe
                // mode): an allow returned through it would be built aside and copied.
                Step::Allows { grant } => return allow(skill, capability, grant),
                Step::Decides(decision) => return self.finish(decision),
                // `candidate` never answers `Holds`: it goes on to a decision or a failure.
                Step::Holds => {}
                Step::Fails(reason) => reasons.push(reason),
                Step::Abort(reason) => return deny(vec![reason]),
            }
        }
        if !resource_matched {
            reasons.push(Reason::request(
                ReasonKind::Resource,
                format!(
                    "no capability of skill {} covers resource {}",
                    quote(&skill.name),
                    quote(request.resource)
                ),
            ));
        } else if !operation_matched {
            reasons.push(Reason::request(
                ReasonKind::Operation,
                format!(
                    "no capability of skill {} allows operation {} on resource {}",
                    quote(&skill.name),
                    quote(request.operation),
                    quote(request.resource)
                ),
            ));
        }
        deny(reasons)
    }

    fn candidate<'r, J: Json<'r>>(
        &self,
        skill: &CompiledSkill,
        capability: &CompiledCapability,
        request: &RequestView<'r, J>,
        input: &Input<'_, J>,
        now: DateTime<Utc>,
    ) -> Step<'r> {
        let fail = |constraint: ReasonKind, message: String| {
            Step::Fails(reason_for(capability, constraint, message))
        };
        // Lifetime and grant (stateful engines only).
        let mut renew = None;
        let mut grant_token: Option<&str> = None;
        if let Some(store) = &self.state {
            if self.removal_unrecorded(store.as_ref(), &skill.name, &capability.name) {
                return fail(
                    ReasonKind::Grant,
                    format!(
                        "a reload removed capability {} and the state store has not recorded it \
                         yet: its earlier grants cannot be told apart",
                        quote(&capability.name)
                    ),
                );
            }
            if store.is_revoked(&skill.name, &capability.name) {
                return fail(
                    ReasonKind::Grant,
                    revoked_message(store.as_ref(), skill, capability),
                );
            }
            match capability.lifetime {
                LifetimeSpec::Process => {}
                LifetimeSpec::Transaction => {
                    if let Some(message) = transaction_unmet(input.transaction, store.as_ref()) {
                        return fail(ReasonKind::Lifetime, message);
                    }
                }
                LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. } => {
                    let Some(token) = request.grant else {
                        return fail(
                            ReasonKind::Grant,
                            format!(
                                "capability {} needs a grant and the request carries none",
                                quote(&capability.name)
                            ),
                        );
                    };
                    let revision = match store.grant_status(
                        token,
                        &skill.name,
                        &capability.name,
                        input.transaction,
                        lifetime_bound(skill, capability),
                        now,
                    ) {
                        GrantStatus::Valid { revision } => revision,
                        GrantStatus::ExpiredRenewable { revision } => {
                            // Renew only if the *current* capability is still renewable: a
                            // reload that drops `renewable` must not be widened by a grant issued
                            // before it (regression: such grants were renewed). Otherwise the
                            // grant has expired, said here with the other grant checks, before
                            // rate limits (regression: the commit said it, after them).
                            let LifetimeSpec::WallClock {
                                duration,
                                renewable: true,
                            } = capability.lifetime
                            else {
                                let (kind, message) = grant_refusal(GrantRefusal::Expired, token);
                                return fail(kind, message);
                            };
                            renew = Some(duration);
                            revision
                        }
                        GrantStatus::Refused(refusal) => {
                            let (kind, message) = grant_refusal(refusal, token);
                            return fail(kind, message);
                        }
                    };
                    if revision != skill.revision {
                        // INVARIANT (pinned-grant): a grant issued under an older revision is
                        // honoured only where the old capability also allows — its resource
                        // template, its operations and its constraints.
                        let old_skill = self.skill_at_revision(&skill.name, revision);
                        match old_skill
                            .as_deref()
                            .and_then(|old| old.capability(&capability.name))
                        {
                            Some(old) => {
                                if let Some(mut refused) = pinned_refusal(old, input, &**store) {
                                    if let Step::Fails(reason) | Step::Abort(reason) = &mut refused
                                    {
                                        reason.message = format!(
                                            "under the revision the grant was issued for: {}",
                                            reason.message
                                        );
                                    }
                                    return refused;
                                }
                            }
                            None => {
                                return fail(
                                    ReasonKind::Grant,
                                    format!(
                                        "grant {} was issued under a revision that did not have this capability",
                                        quote(token)
                                    ),
                                );
                            }
                        }
                    }
                    grant_token = Some(token);
                }
            }
        }
        if let failed @ (Step::Fails(_) | Step::Abort(_)) = self.program_step(capability, input) {
            return failed;
        }
        let Some(store) = self.state.as_deref() else {
            // Stateless: no rate limits, no grants; gating decides.
            return match self.gate(skill, capability, request) {
                Some(gated) => Step::Decides(gated),
                None => Step::Allows { grant: None },
            };
        };
        self.rate_and_commit(
            store,
            skill,
            capability,
            request,
            input,
            grant_token,
            renew,
            now,
        )
    }

    /// Rate limits (read-only check), gating, then the atomic commit.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one decision, passed once"
    )]
    fn rate_and_commit<'r, J: Json<'r>>(
        &self,
        store: &dyn StateStore,
        skill: &CompiledSkill,
        capability: &CompiledCapability,
        request: &RequestView<'r, J>,
        input: &Input<'_, J>,
        grant_token: Option<&'r str>,
        renew: Option<std::time::Duration>,
        now: DateTime<Utc>,
    ) -> Step<'r> {
        // One fixed-size key per rate limit, hashed from the canonical `by` values as they are
        // read (no copy of a value is kept).
        let mut keys = [RateKey::from_bytes([0; RateKey::LEN]); MAX_RATE_LIMITS];
        for (index, limit) in capability.rate_limits.iter().enumerate() {
            let Some(slot) = keys.get_mut(index) else {
                return Step::Abort(Reason::request(
                    ReasonKind::Input,
                    "internal error: too many rate limits",
                ));
            };
            // An absent `by` value fails the candidate; a case variant of its name refuses the
            // request (`input`), as for any path a capability reads.
            match self.rate_keys.key(skill, capability, index, limit, input) {
                Ok(key) => *slot = key,
                Err(KeyRefusal::Absent(reason)) => return Step::Fails(reason),
                Err(KeyRefusal::CaseVariant(reason)) => return Step::Abort(reason),
            }
        }
        // The order of checks: a full rate limit denies before gating (lifetimes and grants
        // were checked by the caller, completely: the commit refuses the authority only when
        // it changed since — a revocation, a grant used up or a transaction ended in between).
        // A read-only check gives that order when the call is gated. Otherwise the commit's
        // own check gives the same answer — it refuses for a rate limit, first charge first,
        // with the same reason, or for an authority that changed in between — so the
        // read-only check is skipped, saving a second lock of each key's shard.
        let gated = self.gate(skill, capability, request);
        if gated.is_some() {
            for (index, limit) in capability.rate_limits.iter().enumerate() {
                let refused = keys
                    .get(index)
                    .is_none_or(|key| !store.rate_would_allow(key, &rate_spec(limit), now));
                if refused {
                    return rate_reason(capability, limit, now);
                }
            }
        }
        if let Some(decision) = gated {
            return Step::Decides(decision);
        }
        let authority = match (capability.lifetime, grant_token) {
            (LifetimeSpec::Transaction, _) => match input.transaction {
                Some(tx) => Authority::Transaction(tx),
                None => {
                    return Step::Fails(reason_for(
                        capability,
                        ReasonKind::Lifetime,
                        "the capability lives for a transaction and the request names none"
                            .to_owned(),
                    ));
                }
            },
            (LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. }, Some(token)) => {
                Authority::Grant(GrantUse {
                    token,
                    transaction: input.transaction,
                    renew,
                    bound: lifetime_bound(skill, capability),
                })
            }
            (LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. }, None) => {
                return Step::Fails(reason_for(
                    capability,
                    ReasonKind::Grant,
                    "the request carries no grant".to_owned(),
                ));
            }
            (LifetimeSpec::Process, _) => Authority::Process,
        };
        let count = capability.rate_limits.len();
        let charge = |index: usize| {
            let limit = capability.rate_limits.get(index)?;
            Some(RateCharge {
                key: *keys.get(index)?,
                spec: rate_spec(limit),
            })
        };
        let commit = |rates: &[RateCharge]| {
            let commit = Commit {
                skill: &skill.name,
                capability: &capability.name,
                authority,
                rates,
            };
            store.commit(&commit, now)
        };
        // Never commit with fewer charges than the capability declares (the loop above already
        // aborts past MAX_RATE_LIMITS; this keeps the commit itself from dropping any).
        let Some(committed) = with_charges(count, charge, commit) else {
            return Step::Abort(Reason::request(
                ReasonKind::Input,
                "internal error: too many rate limits",
            ));
        };
        match committed {
            Ok(()) => Step::Allows { grant: grant_token },
            Err(refusal) => {
                let (kind, message) = match refusal {
                    CommitRefusal::Revoked => {
                        (ReasonKind::Grant, revoked_message(store, skill, capability))
                    }
                    CommitRefusal::CapabilityRemoved => (
                        ReasonKind::Grant,
                        format!(
                            "transaction {} was begun before a reload removed capability {}: \
                             the capability's grant in it is void",
                            quote(input.transaction.unwrap_or("")),
                            quote(&capability.name)
                        ),
                    ),
                    CommitRefusal::TransactionNotOpen => (
                        ReasonKind::Lifetime,
                        format!(
                            "transaction {} is not open",
                            quote(input.transaction.unwrap_or(""))
                        ),
                    ),
                    CommitRefusal::Grant(refusal) => {
                        grant_refusal(refusal, grant_token.unwrap_or(""))
                    }
                    CommitRefusal::RateLimited { charge }
                    | CommitRefusal::DuplicateRateKey { charge } => {
                        if let Some(limit) = capability.rate_limits.get(charge) {
                            return rate_reason(capability, limit, now);
                        }
                        (ReasonKind::RateLimit, "rate limit reached".to_owned())
                    }
                };
                Step::Fails(reason_for(capability, kind, message))
            }
        }
    }

    /// Runs the constraint program; on failure, traces it to build the reason.
    fn program_step<'r, J: Json<'r>>(
        &self,
        capability: &CompiledCapability,
        input: &Input<'_, J>,
    ) -> Step<'static> {
        let left = input.regex_budget.left();
        match crate::vm::run(&capability.program, input) {
            Ok(Outcome::Accepted) => Step::Holds,
            Ok(Outcome::Failed(check)) => {
                Step::Fails(explain_failure(capability, input, check, left))
            }
            Err(error) => Step::Abort(vm_error_reason(capability, &error)),
        }
    }

    #[inline]
    fn gate<'r, J: Json<'r>>(
        &self,
        skill: &CompiledSkill,
        capability: &CompiledCapability,
        request: &RequestView<'r, J>,
    ) -> Option<Decision> {
        let autonomy = autonomy(request);
        let reason = if autonomy < capability.required_autonomy {
            Some(reason_for(
                capability,
                ReasonKind::Risk,
                format!(
                    "autonomy {autonomy} is below the {} required by the capability's risk",
                    capability.required_autonomy
                ),
            ))
        } else if capability.sensitivity == SensitivityLevel::Elevated
            && !self
                .state
                .as_ref()
                .is_some_and(|store| store.is_approved(&skill.name))
        {
            Some(reason_for(
                capability,
                ReasonKind::Sensitivity,
                format!(
                    "capability {} is elevated and skill {} has no recorded approval",
                    quote(&capability.name),
                    quote(&skill.name)
                ),
            ))
        } else {
            None
        };
        reason.map(|reason| Decision {
            verdict: Verdict::ApprovalRequired,
            skill: skill.name.clone(),
            capability: Some(capability.name.clone()),
            grant: None,
            observed: None,
            reasons: vec![reason],
        })
    }

    /// Traces every candidate's every constraint (for `:explain`). Stateless: lifetimes and
    /// rate limits are not consulted.
    pub fn explain(&self, request: &Request) -> Vec<CandidateTrace> {
        let request = &request.view();
        let policy = self.policy();
        let Some(skill) = policy.skill(request.skill) else {
            return Vec::new();
        };
        let Ok(resource) = RequestResource::parse(request.resource) else {
            return Vec::new();
        };
        let now = self.now_for(request).unwrap_or_else(|_| self.clock.now());
        let mut traces = Vec::new();
        let mut bindings = Bindings::new();
        for capability in &skill.capabilities {
            if !capability.resource.matches(&resource, &mut bindings)
                || !capability.allows_operation(request.operation)
            {
                continue;
            }
            let regex_budget = RegexBudget::new(self.limits.max_regex_work);
            let input = self.input(request, &resource, &bindings, now, &regex_budget);
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
}

/// Why a `transaction` lifetime is not met: no transaction named, or one that is not open.
fn transaction_unmet(transaction: Option<&str>, store: &dyn StateStore) -> Option<String> {
    match transaction {
        None => {
            Some("the capability lives for a transaction and the request names none".to_owned())
        }
        Some(tx) if !store.is_transaction_open(tx) => {
            Some(format!("transaction {} is not open", quote(tx)))
        }
        Some(_) => None,
    }
}

/// Why a grant pinned to an older revision does not cover this request under that revision's
/// capability `old`: its template, its operations, its constraints or its `transaction`
/// lifetime (`None` when it covers it). A limit broken while running the old program is a
/// [`Step::Abort`], which denies the whole request; any other refusal a [`Step::Fails`].
///
/// The old program runs with bindings from the old template: binding slots are per template,
/// so reusing the new template's bindings would read the wrong segments (regression: a widened
/// template or reordered bindings let an old grant through).
fn pinned_refusal<'r, J: Json<'r>>(
    old: &CompiledCapability,
    input: &Input<'_, J>,
    store: &dyn StateStore,
) -> Option<Step<'static>> {
    // A grant for a `transaction` capability issued without a transaction is recorded as a
    // one-call grant; the old lifetime still wants an open transaction named (regression: a
    // reload to `lifetime call 1` made such a grant usable without one).
    if matches!(old.lifetime, LifetimeSpec::Transaction)
        && let Some(message) = transaction_unmet(input.transaction, store)
    {
        return Some(Step::Fails(reason_for(old, ReasonKind::Lifetime, message)));
    }
    let mut bindings = Bindings::new();
    if !old.resource.matches(input.resource, &mut bindings) {
        return Some(Step::Fails(reason_for(
            old,
            ReasonKind::Resource,
            "the resource is outside the capability's template".to_owned(),
        )));
    }
    if !old.allows_operation(input.operation) {
        return Some(Step::Fails(reason_for(
            old,
            ReasonKind::Operation,
            format!("operation {} is not allowed", quote(input.operation)),
        )));
    }
    let old_input = Input {
        bindings: &bindings,
        ..*input
    };
    let left = input.regex_budget.left();
    match crate::vm::run(&old.program, &old_input) {
        Ok(Outcome::Accepted) => None,
        Ok(Outcome::Failed(check)) => {
            Some(Step::Fails(explain_failure(old, &old_input, check, left)))
        }
        // A broken limit in the old program denies the whole request, as in the current one
        // (regression: it failed only this capability, and a later one could allow).
        Err(error) => Some(Step::Abort(vm_error_reason(old, &error))),
    }
}

/// Most rate limits one capability may declare (the compiler enforces it).
pub use crate::limits::MAX_RATE_LIMITS;

/// An allow, carrying copies of the interned names (see [`crate::name`]).
#[inline]
fn allow(skill: &CompiledSkill, capability: &CompiledCapability, grant: Option<&str>) -> Decision {
    Decision {
        verdict: Verdict::Allow,
        skill: skill.name.clone(),
        capability: Some(capability.name.clone()),
        grant: grant.map(Arc::from),
        observed: None,
        reasons: Vec::new(),
    }
}

/// The grant lifetime of a `lifetime call N` or `lifetime wallClock D` capability; `None` for
/// lifetimes that need no grant (`process`, `transaction`).
pub(super) fn grant_lifetime(spec: LifetimeSpec) -> Option<GrantLifetime> {
    match spec {
        LifetimeSpec::Call(uses) => Some(GrantLifetime::Calls(uses)),
        LifetimeSpec::WallClock {
            duration,
            renewable,
        } => Some(GrantLifetime::WallClock {
            duration,
            renewable,
        }),
        LifetimeSpec::Transaction | LifetimeSpec::Process => None,
    }
}

/// The lifetime of `capability` as it is now, which a grant issued under an older revision of
/// `skill` must also satisfy (`None` for lifetimes without grants).
fn lifetime_bound(skill: &CompiledSkill, capability: &CompiledCapability) -> Option<LifetimeBound> {
    grant_lifetime(capability.lifetime).map(|lifetime| LifetimeBound::new(skill.revision, lifetime))
}

fn reason_for(capability: &CompiledCapability, constraint: ReasonKind, message: String) -> Reason {
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
fn quote_hash(text: &str) -> String {
    format!("`{}`", crate::value::truncate_str(text, 160))
}

fn quote(text: &str) -> String {
    format!("`{}`", crate::value::truncate_str(text, 64))
}

/// Request-level validation that does not depend on the policy.
#[inline]
fn validate<'r, J: Json<'r>>(request: &RequestView<'r, J>) -> Option<Reason> {
    for (name, value) in [("agent", request.agent), ("context", request.context)] {
        if !matches!(value.kind(), JsonKind::Null | JsonKind::Object) {
            return Some(Reason::request(
                ReasonKind::Input,
                format!("`{name}` must be an object, found {}", value.type_name()),
            ));
        }
    }
    if let Some(autonomy) = request.autonomy
        && autonomy_score(autonomy).is_none()
    {
        return Some(Reason::request(
            ReasonKind::Input,
            format!(
                "`autonomy` must be an integer in 0..=100, found {}",
                autonomy.describe(64)
            ),
        ));
    }
    None
}

/// An autonomy score: an integer in 0..=100, written as `75` or `75.0`.
fn autonomy_score<'r, J: Json<'r>>(value: J) -> Option<u8> {
    let number = value.as_number()?;
    let score = match number.as_u64() {
        Some(n) => u8::try_from(n).ok(),
        None => number
            .as_f64()
            .and_then(|f| (0..=100u8).find(|n| f64::from(*n) == f)),
    };
    score.filter(|n| *n <= 100)
}

/// The request's autonomy score; absent means 0 (`validate` has refused invalid ones).
fn autonomy<'r, J: Json<'r>>(request: &RequestView<'r, J>) -> u8 {
    request.autonomy.and_then(autonomy_score).unwrap_or(0)
}

/// Says what is revoked: the skill, the capability, or (for a store that cannot tell) either.
fn revoked_message(
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

fn grant_refusal(refusal: GrantRefusal, token: &str) -> (ReasonKind, String) {
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

/// `commit` with the `count` charges `charge` makes (index 0 up), held on the stack in an array
/// of the smallest size class that holds them: a capability with one rate limit writes one
/// charge per call, not [`MAX_RATE_LIMITS`] (a full array's placeholders would be ~0.8 KB of
/// stores per stateful decision). `None` when `count` is over [`MAX_RATE_LIMITS`] or `charge`
/// has no charge for an index below `count`.
fn with_charges<R>(
    count: usize,
    charge: impl Fn(usize) -> Option<RateCharge>,
    commit: impl FnOnce(&[RateCharge]) -> R,
) -> Option<R> {
    match count {
        0 => Some(commit(&[])),
        1 => charges_in::<1, _>(count, charge, commit),
        2 => charges_in::<2, _>(count, charge, commit),
        3 | 4 => charges_in::<4, _>(count, charge, commit),
        _ => charges_in::<MAX_RATE_LIMITS, _>(count, charge, commit),
    }
}

/// [`with_charges`] in an array of `N` charges (`count` of them used, at least one): the slots
/// past `count` repeat the first charge and are not committed.
fn charges_in<const N: usize, R>(
    count: usize,
    charge: impl Fn(usize) -> Option<RateCharge>,
    commit: impl FnOnce(&[RateCharge]) -> R,
) -> Option<R> {
    let mut charges = [charge(0)?; N];
    for (index, slot) in charges.iter_mut().enumerate().take(count).skip(1) {
        *slot = charge(index)?;
    }
    Some(commit(charges.get(..count)?))
}

fn rate_spec(limit: &RateLimitSpec) -> RateSpec {
    match limit.burst {
        Some(burst) => RateSpec::Bucket {
            count: limit.count,
            per: limit.per,
            burst,
        },
        None => RateSpec::Window {
            count: limit.count,
            per: limit.per,
        },
    }
}

/// The reason a rate limit refused a call at `now`: reached, or — for a sliding window, which
/// counts only within 64-bit nanoseconds — a clock outside the range it supports (regression:
/// a clock in the year 9999 said "rate limit reached" on the first call).
fn rate_reason(
    capability: &CompiledCapability,
    limit: &RateLimitSpec,
    now: DateTime<Utc>,
) -> Step<'static> {
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
    Step::Fails(Reason {
        capability: Some(capability.name.clone()),
        constraint: ReasonKind::RateLimit,
        path: None,
        message,
        source: limit.location.as_ref().map(ToString::to_string),
    })
}

fn vm_error_reason(capability: &CompiledCapability, error: &VmError) -> Reason {
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
fn explain_failure<'r, J: Json<'r>>(
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
