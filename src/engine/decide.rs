//! The decision path: one request decided against the policy in force (SPEC §5.1).
//!
//! The facade ([`Engine::check`] and its siblings) reads a request into a [`RequestView`] and
//! hands it to [`decide`]. A decision goes step by step:
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
//! Steps 1–3 and 7 are [`decide`]'s. Each candidate of steps 4–6 is a [`Candidate`]: the parts
//! of the decision its steps read (the engine, the skill, the capability, the request, the
//! programs' [`Input`] and the instant), held together so that each step is a method of it that
//! takes them in one reference — [`Candidate::authority`] (revocation, lifetime and grant),
//! [`Candidate::program`], [`Candidate::gate`], [`Candidate::rate_keys`] and
//! [`Candidate::commit`]. Each answers the candidate's [`Step`] or lets the next one run.
//!
//! Reasons are built only on the deny path (`explain.rs`): the program runs once fast; only when
//! it fails is it traced to find the offending value.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Engine;
use super::decision::{Decision, Reason, ReasonKind, Verdict};
use super::explain::{
    explain_failure, grant_refusal, quote, quote_hash, rate_reason, reason_for, revoked_message,
    vm_error_reason,
};
use super::rate_key::KeyRefusal;
use super::view::RequestView;
use crate::bytecode::program::{
    CompiledCapability, CompiledSkill, LifetimeSpec, RateLimitSpec, SensitivityLevel,
};
use crate::limits::MAX_RATE_LIMITS;
use crate::name::Name;
use crate::revision::Revision;
use crate::runtime::{
    Authority, Commit, CommitRefusal, GrantLifetime, GrantRefusal, GrantStatus, GrantUse,
    LifetimeBound, RateCharge, RateKey, RateSpec, StateStore,
};
use crate::vm::json::JsonKind;
use crate::vm::resource::{Bindings, RequestResource};
use crate::vm::{Input, Json, Outcome, RegexBudget};

/// The decision for `request`.
#[inline]
pub(super) fn decide<'r, J: Json<'r>>(engine: &Engine, request: &RequestView<'r, J>) -> Decision {
    engine
        .with_policy(|policy| decide_in(engine, policy.skill(request.skill), request))
        .unwrap_or_else(|| policy_unreadable(engine, request))
}

/// [`decide`], and the revision of the named skill in the policy that decided (for the audit
/// record: read from the same snapshot, so a reload between the decision and the record cannot
/// make the record name another revision).
#[inline]
pub(super) fn decide_with_revision<'r, J: Json<'r>>(
    engine: &Engine,
    request: &RequestView<'r, J>,
) -> (Decision, Option<Revision>) {
    engine
        .with_policy(|policy| {
            let skill = policy.skill(request.skill);
            (
                decide_in(engine, skill, request),
                skill.map(|skill| skill.revision),
            )
        })
        .unwrap_or_else(|| (policy_unreadable(engine, request), None))
}

/// The deny when `with_policy` could not run (unreachable by construction); never an allow.
#[cold]
fn policy_unreadable<'r, J: Json<'r>>(engine: &Engine, request: &RequestView<'r, J>) -> Decision {
    engine.finish(Decision::deny(
        Name::from(request.skill),
        vec![Reason::request(
            ReasonKind::Input,
            "internal error: the policy could not be read",
        )],
    ))
}

/// The decision for `request`, whose skill is `skill` in the policy in force (`None`: no skill
/// of that name is loaded).
fn decide_in<'r, J: Json<'r>>(
    engine: &Engine,
    skill: Option<&Arc<CompiledSkill>>,
    request: &RequestView<'r, J>,
) -> Decision {
    let Some(skill) = skill else {
        return engine.finish(Decision::deny(
            Name::from(request.skill),
            vec![Reason::request(
                ReasonKind::UnknownSkill,
                format!("no skill {} is loaded", quote(request.skill)),
            )],
        ));
    };
    let deny = |reasons| engine.finish(Decision::deny(skill.name.clone(), reasons));
    // The clock is read once, and only when a candidate needs it (a stateful engine, or a
    // program with `fieldRange ... now` or `window`): most decisions never read it.
    let given_time = match admitted_time(engine, skill, request) {
        Ok(time) => time,
        Err(reason) => return deny(vec![reason]),
    };
    let mut clock_time = None;
    let mut bindings = Bindings::new();
    // A plain http request of the first capability's origin is parsed and matched against its
    // template in one pass; any other is parsed alone first, and every rejection is the general
    // parser's.
    let first = skill.capabilities.first().and_then(|capability| {
        capability
            .resource
            .parse_and_match(request.resource, &mut bindings)
    });
    // Borrowed where `parse_and_match` wrote it: moving it out of the `Option` copies it with
    // 16-byte loads of what was just stored 8 bytes at a time, and the loads wait for the
    // stores (in a profile, a sixth of `decide_in`'s samples).
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
    let regex_budget = RegexBudget::new(engine.limits.max_regex_work);
    for capability in &skill.capabilities {
        // `matches` compares the resource kind too; the first capability may have been matched
        // already.
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
            None if engine.state.is_some() || capability.program.reads_clock() => {
                *clock_time.get_or_insert_with(|| engine.clock.now())
            }
            // Nothing this candidate runs reads the instant.
            None => DateTime::<Utc>::UNIX_EPOCH,
        };
        let input = input(engine, request, resource, &bindings, now, &regex_budget);
        let candidate = Candidate {
            engine,
            skill,
            capability,
            request,
            input: &input,
            now,
        };
        match candidate.decide() {
            // Not through `finish`, which changes only what is not an allow (observe mode): an
            // allow returned through it would be built aside and copied.
            Step::Allows { grant } => return allow(skill, capability, grant),
            Step::Decides(decision) => return engine.finish(decision),
            // `Candidate::decide` never answers `Holds`: it goes on to a decision or a failure.
            Step::Holds => {}
            Step::Fails(reason) => reasons.push(reason),
            Step::Abort(reason) => return deny(vec![reason]),
        }
    }
    reasons.extend(unmatched(
        skill,
        request,
        resource_matched,
        operation_matched,
    ));
    deny(reasons)
}

/// The checks of a request that need no candidate — its envelope, its `time`, the skill hash it
/// names — in that order: the first that refuses it, or the request's own instant (`None`: read
/// the engine's clock).
#[inline]
fn admitted_time<'r, J: Json<'r>>(
    engine: &Engine,
    skill: &CompiledSkill,
    request: &RequestView<'r, J>,
) -> Result<Option<DateTime<Utc>>, Reason> {
    if let Some(reason) = validate(request) {
        return Err(reason);
    }
    let given_time = request_time(engine, request)?;
    if let Some(expected) = &request.skill_hash
        && skill.hash.as_deref() != Some(&**expected)
    {
        let loaded = skill
            .hash
            .as_deref()
            .map_or("no hash".to_owned(), quote_hash);
        return Err(Reason::request(
            ReasonKind::Revision,
            format!(
                "request names skill hash {} but the loaded manifest has {loaded}",
                quote_hash(expected)
            ),
        ));
    }
    Ok(given_time)
}

/// Why no capability was a candidate, when none was: none covers the resource, or none of
/// those allows the operation.
fn unmatched<'r, J: Json<'r>>(
    skill: &CompiledSkill,
    request: &RequestView<'r, J>,
    resource_matched: bool,
    operation_matched: bool,
) -> Option<Reason> {
    if !resource_matched {
        Some(Reason::request(
            ReasonKind::Resource,
            format!(
                "no capability of skill {} covers resource {}",
                quote(&skill.name),
                quote(request.resource)
            ),
        ))
    } else if !operation_matched {
        Some(Reason::request(
            ReasonKind::Operation,
            format!(
                "no capability of skill {} allows operation {} on resource {}",
                quote(&skill.name),
                quote(request.operation),
                quote(request.resource)
            ),
        ))
    } else {
        None
    }
}

/// The instant `request` is decided at: its own `time` on a simulated clock, else the engine's
/// clock.
pub(super) fn now_for<'r, J: Json<'r>>(
    engine: &Engine,
    request: &RequestView<'r, J>,
) -> Result<DateTime<Utc>, Reason> {
    Ok(request_time(engine, request)?.unwrap_or_else(|| engine.clock.now()))
}

/// The request's `time` when the clock is simulated (`None`: read the engine's clock). A `time`
/// that is not an RFC 3339 timestamp is refused on every engine, live ones included, so the
/// same request is refused alike by `capgate check`, replay and a gateway (regression: a live
/// engine allowed it).
#[inline]
fn request_time<'r, J: Json<'r>>(
    engine: &Engine,
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
    Ok(engine.clock.is_simulated().then_some(parsed))
}

/// What the programs of one candidate read: the request, borrowed, with its bindings.
pub(super) fn input<'i, 'r: 'i, J: Json<'r>>(
    engine: &Engine,
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
        max_array_scan: engine.limits.max_array_scan,
        regex_budget,
        refuse_case_variants: engine.limits.refuse_case_variant_reads,
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

/// One capability tried for a request: the parts of the decision each of its steps reads.
/// `'r` is the request's.
struct Candidate<'c, 'r, J> {
    engine: &'c Engine,
    skill: &'c CompiledSkill,
    capability: &'c CompiledCapability,
    request: &'c RequestView<'r, J>,
    /// What the capability's programs read.
    input: &'c Input<'c, J>,
    /// The instant the call is decided at (the epoch when nothing the candidate runs reads it).
    now: DateTime<Utc>,
}

/// What the request's grant brings to the commit of a call that passed its authority checks.
#[derive(Debug, Clone, Copy, Default)]
struct Granted<'r> {
    /// The grant the call uses (a `call` or `wallClock` lifetime).
    token: Option<&'r str>,
    /// How long an expired renewable grant is renewed for.
    renew: Option<Duration>,
}

impl<'c, 'r, J: Json<'r>> Candidate<'c, 'r, J> {
    /// Steps 4 to 6 for this capability: its authority (stateful engines), its program, then
    /// gating, or rate limits, gating and the commit (stateful engines).
    #[inline]
    fn decide(&self) -> Step<'r> {
        let store = self.engine.state.as_deref();
        let granted = match store.map(|store| self.authority(store)) {
            Some(Err(failed)) => return failed,
            Some(Ok(granted)) => granted,
            None => Granted::default(),
        };
        if let failed @ (Step::Fails(_) | Step::Abort(_)) = self.program() {
            return failed;
        }
        let Some(store) = store else {
            // Stateless: no rate limits, no grants; gating decides.
            return match self.gate() {
                Some(gated) => Step::Decides(gated),
                None => Step::Allows { grant: None },
            };
        };
        self.rate_and_commit(store, granted)
    }

    /// The candidate's failure, with its reason.
    fn fail(&self, constraint: ReasonKind, message: String) -> Step<'r> {
        Step::Fails(reason_for(self.capability, constraint, message))
    }

    /// Revocation, then the capability's lifetime and its grant: what the grant brings to the
    /// commit, or the candidate's failure.
    fn authority(&self, store: &dyn StateStore) -> Result<Granted<'r>, Step<'r>> {
        let (skill, capability) = (self.skill, self.capability);
        if self
            .engine
            .removal_unrecorded(store, &skill.name, &capability.name)
        {
            return Err(self.fail(
                ReasonKind::Grant,
                format!(
                    "a reload removed capability {} and the state store has not recorded it yet: \
                     its earlier grants cannot be told apart",
                    quote(&capability.name)
                ),
            ));
        }
        if store.is_revoked(&skill.name, &capability.name) {
            return Err(self.fail(ReasonKind::Grant, revoked_message(store, skill, capability)));
        }
        match capability.lifetime {
            LifetimeSpec::Process => Ok(Granted::default()),
            LifetimeSpec::Transaction => match transaction_unmet(self.input.transaction, store) {
                Some(message) => Err(self.fail(ReasonKind::Lifetime, message)),
                None => Ok(Granted::default()),
            },
            LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. } => self.grant(store),
        }
    }

    /// The request's grant for a capability that needs one: valid now (or expired and
    /// renewable, then renewed), and allowed by the capability it was issued under.
    fn grant(&self, store: &dyn StateStore) -> Result<Granted<'r>, Step<'r>> {
        let (skill, capability) = (self.skill, self.capability);
        let Some(token) = self.request.grant else {
            return Err(self.fail(
                ReasonKind::Grant,
                format!(
                    "capability {} needs a grant and the request carries none",
                    quote(&capability.name)
                ),
            ));
        };
        let refused = |refusal| {
            let (kind, message) = grant_refusal(refusal, token);
            self.fail(kind, message)
        };
        let (revision, renew) = match store.grant_status(
            token,
            &skill.name,
            &capability.name,
            self.input.transaction,
            lifetime_bound(skill, capability),
            self.now,
        ) {
            GrantStatus::Valid { revision } => (revision, None),
            GrantStatus::ExpiredRenewable { revision } => {
                // Renew only if the *current* capability is still renewable: a reload that drops
                // `renewable` must not be widened by a grant issued before it (regression: such
                // grants were renewed). Otherwise the grant has expired, said here with the other
                // grant checks, before rate limits (regression: the commit said it, after them).
                let LifetimeSpec::WallClock {
                    duration,
                    renewable: true,
                } = capability.lifetime
                else {
                    return Err(refused(GrantRefusal::Expired));
                };
                (revision, Some(duration))
            }
            GrantStatus::Refused(refusal) => return Err(refused(refusal)),
        };
        if revision != skill.revision {
            self.pinned(store, token, revision)?;
        }
        Ok(Granted {
            token: Some(token),
            renew,
        })
    }

    /// A grant issued under an older revision `revision` of the skill: refused unless the
    /// capability of that revision allows the call too.
    fn pinned(
        &self,
        store: &dyn StateStore,
        token: &str,
        revision: Revision,
    ) -> Result<(), Step<'r>> {
        // INVARIANT (pinned-grant): a grant issued under an older revision is honoured only
        // where the old capability also allows — its resource template, its operations and its
        // constraints.
        let old_skill = self.engine.skill_at_revision(&self.skill.name, revision);
        let Some(old) = old_skill
            .as_deref()
            .and_then(|old| old.capability(&self.capability.name))
        else {
            return Err(self.fail(
                ReasonKind::Grant,
                format!(
                    "grant {} was issued under a revision that did not have this capability",
                    quote(token)
                ),
            ));
        };
        match pinned_refusal(old, self.input, store) {
            None => Ok(()),
            Some(mut refused) => {
                if let Step::Fails(reason) | Step::Abort(reason) = &mut refused {
                    reason.message = format!(
                        "under the revision the grant was issued for: {}",
                        reason.message
                    );
                }
                Err(refused)
            }
        }
    }

    /// Runs the constraint program; on failure, traces it to build the reason.
    fn program(&self) -> Step<'static> {
        let (capability, input) = (self.capability, self.input);
        if let Some(why) = self.request.payload_unreadable
            && capability.reads_payload()
        {
            let message = format!("the payload cannot be read as the upstream will read it: {why}");
            return Step::Fails(reason_for(capability, ReasonKind::Input, message));
        }
        let left = input.regex_budget.left();
        match crate::vm::run(&capability.program, input) {
            Ok(Outcome::Accepted) => Step::Holds,
            Ok(Outcome::Failed(check)) => {
                Step::Fails(explain_failure(capability, input, check, left))
            }
            Err(error) => Step::Abort(vm_error_reason(capability, &error)),
        }
    }

    /// Gating: the `approval_required` decision when the request's autonomy is below the
    /// capability's risk or the capability is elevated and the skill has no recorded approval.
    #[inline]
    fn gate(&self) -> Option<Decision> {
        let (skill, capability) = (self.skill, self.capability);
        let autonomy = autonomy(self.request);
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
                .engine
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

    /// Rate limits (read-only check), gating, then the atomic commit.
    fn rate_and_commit(&self, store: &dyn StateStore, granted: Granted<'r>) -> Step<'r> {
        let mut keys = [RateKey::from_bytes([0; RateKey::LEN]); MAX_RATE_LIMITS];
        if let Some(refused) = self.rate_keys(&mut keys) {
            return refused;
        }
        // The order of checks: a full rate limit denies before gating (lifetimes and grants
        // were checked by `authority`, completely: the commit refuses the authority only when
        // it changed since — a revocation, a grant used up or a transaction ended in between).
        // A read-only check gives that order when the call is gated. Otherwise the commit's
        // own check gives the same answer — it refuses for a rate limit, first charge first,
        // with the same reason, or for an authority that changed in between — so the
        // read-only check is skipped, saving a second lock of each key's shard.
        if let Some(gated) = self.gate() {
            return match self.full_rate_limit(store, &keys) {
                Some(full) => full,
                None => Step::Decides(gated),
            };
        }
        let authority = match self.commit_authority(granted) {
            Ok(authority) => authority,
            Err(failed) => return failed,
        };
        self.commit(store, &keys, authority, granted.token)
    }

    /// Fills `keys` with one fixed-size key per rate limit, hashed from the canonical `by`
    /// values as they are read (no copy of a value is kept); the candidate's answer when one
    /// cannot be made.
    fn rate_keys(&self, keys: &mut [RateKey; MAX_RATE_LIMITS]) -> Option<Step<'r>> {
        for (index, limit) in self.capability.rate_limits.iter().enumerate() {
            let Some(slot) = keys.get_mut(index) else {
                return Some(Step::Abort(Reason::request(
                    ReasonKind::Input,
                    "internal error: too many rate limits",
                )));
            };
            // An absent `by` value fails the candidate; a case variant of its name refuses the
            // request (`input`), as for any path a capability reads.
            match self
                .engine
                .rate_keys
                .key(self.skill, self.capability, index, limit, self.input)
            {
                Ok(key) => *slot = key,
                Err(KeyRefusal::Absent(reason)) => return Some(Step::Fails(reason)),
                Err(KeyRefusal::CaseVariant(reason)) => return Some(Step::Abort(reason)),
            }
        }
        None
    }

    /// The first rate limit that would refuse the call now (read-only), as the candidate's
    /// failure.
    fn full_rate_limit(
        &self,
        store: &dyn StateStore,
        keys: &[RateKey; MAX_RATE_LIMITS],
    ) -> Option<Step<'r>> {
        let capability = self.capability;
        capability
            .rate_limits
            .iter()
            .enumerate()
            .find(|(index, limit)| {
                keys.get(*index)
                    .is_none_or(|key| !store.rate_would_allow(key, &rate_spec(limit), self.now))
            })
            .map(|(_, limit)| Step::Fails(rate_reason(capability, limit, self.now)))
    }

    /// What the commit consumes besides rate-limit slots: the process, the request's
    /// transaction, or a use of its grant.
    fn commit_authority(&self, granted: Granted<'r>) -> Result<Authority<'c>, Step<'r>> {
        let transaction = self.input.transaction;
        match (self.capability.lifetime, granted.token) {
            (LifetimeSpec::Transaction, _) => match transaction {
                Some(tx) => Ok(Authority::Transaction(tx)),
                None => Err(self.fail(
                    ReasonKind::Lifetime,
                    "the capability lives for a transaction and the request names none".to_owned(),
                )),
            },
            (LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. }, Some(token)) => {
                Ok(Authority::Grant(GrantUse {
                    token,
                    transaction,
                    renew: granted.renew,
                    bound: lifetime_bound(self.skill, self.capability),
                }))
            }
            (LifetimeSpec::Call(_) | LifetimeSpec::WallClock { .. }, None) => {
                Err(self.fail(ReasonKind::Grant, "the request carries no grant".to_owned()))
            }
            (LifetimeSpec::Process, _) => Ok(Authority::Process),
        }
    }

    /// Consumes, atomically, one slot per rate limit (keyed by `keys`) and `authority`: the
    /// allow, or the candidate's failure.
    fn commit(
        &self,
        store: &dyn StateStore,
        keys: &[RateKey; MAX_RATE_LIMITS],
        authority: Authority<'_>,
        token: Option<&'r str>,
    ) -> Step<'r> {
        let capability = self.capability;
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
                skill: &self.skill.name,
                capability: &capability.name,
                authority,
                rates,
            };
            store.commit(&commit, self.now)
        };
        // Never commit with fewer charges than the capability declares (`rate_keys` already
        // aborts past MAX_RATE_LIMITS; this keeps the commit itself from dropping any).
        let Some(committed) = with_charges(count, charge, commit) else {
            return Step::Abort(Reason::request(
                ReasonKind::Input,
                "internal error: too many rate limits",
            ));
        };
        match committed {
            Ok(()) => Step::Allows { grant: token },
            Err(refusal) => self.commit_refused(store, refusal, token),
        }
    }

    /// The candidate's failure for a commit the state store refused.
    fn commit_refused(
        &self,
        store: &dyn StateStore,
        refusal: CommitRefusal,
        token: Option<&str>,
    ) -> Step<'r> {
        let capability = self.capability;
        let transaction = || quote(self.input.transaction.unwrap_or(""));
        let (kind, message) = match refusal {
            CommitRefusal::Revoked => (
                ReasonKind::Grant,
                revoked_message(store, self.skill, capability),
            ),
            CommitRefusal::CapabilityRemoved => (
                ReasonKind::Grant,
                format!(
                    "transaction {} was begun before a reload removed capability {}: the \
                     capability's grant in it is void",
                    transaction(),
                    quote(&capability.name)
                ),
            ),
            CommitRefusal::TransactionNotOpen => (
                ReasonKind::Lifetime,
                format!("transaction {} is not open", transaction()),
            ),
            CommitRefusal::Grant(refusal) => grant_refusal(refusal, token.unwrap_or("")),
            CommitRefusal::RateLimited { charge } | CommitRefusal::DuplicateRateKey { charge } => {
                if let Some(limit) = capability.rate_limits.get(charge) {
                    return Step::Fails(rate_reason(capability, limit, self.now));
                }
                (ReasonKind::RateLimit, "rate limit reached".to_owned())
            }
        };
        self.fail(kind, message)
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

/// The runtime's form of one `rateLimit`.
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
