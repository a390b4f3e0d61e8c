//! The runtime state store against a plain model, plus edges and concurrency.
//!
//! The model keeps *all* history (every allowed instant per key, every grant ever) in BTreeMaps
//! and Vecs and recomputes each answer from it the obvious way; the store prunes, shards, uses
//! transaction epochs and locks. A random operation sequence is applied to both and every
//! observable answer must agree after every step.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use capgate::Revision;
use capgate::runtime::{
    Authority, Commit, CommitRefusal, GrantLifetime, GrantRefusal, GrantStatus, GrantUse,
    InMemoryStore, LifetimeBound, NewGrant, RateCharge, RateKey, RateSpec, StateError, StateStore,
};
use chrono::{DateTime, Utc};
use proptest::prelude::*;

const BASE: i64 = 1_800_000_000_000_000_000;

fn at(offset: i128) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(BASE + i64::try_from(offset).unwrap())
}

/// Revision `n` of the model (a grant's revision is compared, never read).
fn rev(n: u64) -> Revision {
    let mut bytes = [0; 32];
    bytes[..8].copy_from_slice(&n.to_le_bytes());
    Revision::from_bytes(bytes)
}

const TOKENS: [&str; 4] = ["g0", "g1", "g2", "g3"];
const SKILLS: [&str; 2] = ["a", "b"];
const CAPABILITIES: [&str; 2] = ["x", "y"];
const TRANSACTIONS: [&str; 2] = ["t0", "t1"];

fn nanos(n: u64) -> Duration {
    Duration::from_nanos(n)
}

/// A key named by up to 15 bytes (distinct names, distinct keys).
fn rk(name: &[u8]) -> RateKey {
    let mut bytes = [0; RateKey::LEN];
    bytes[0] = u8::try_from(name.len()).unwrap();
    bytes[1..=name.len()].copy_from_slice(name);
    RateKey::from_bytes(bytes)
}

fn rate_keys() -> [(RateKey, RateSpec); 4] {
    [
        (
            rk(b"k0"),
            RateSpec::Window {
                count: 2,
                per: nanos(10),
            },
        ),
        (
            rk(b"k1"),
            RateSpec::Window {
                count: 1,
                per: nanos(5),
            },
        ),
        (
            rk(b"k2"),
            RateSpec::Bucket {
                count: 3,
                per: nanos(10),
                burst: 2,
            },
        ),
        (
            rk(b"k3"),
            RateSpec::Bucket {
                count: 1,
                per: nanos(7),
                burst: 1,
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Debug, Clone)]
struct ModelGrant {
    skill: String,
    capability: String,
    transaction: Option<String>,
    transaction_ended: bool,
    revision: Revision,
    remaining: Option<u64>,
    expires_at: Option<i128>,
    renewable: bool,
    /// A wall-clock grant's issued duration: a renewal lasts at most this long.
    duration: Option<std::time::Duration>,
    /// Uses so far, and when it was issued or last renewed: what a bound counts.
    used: u64,
    valid_from: i128,
    revoked: bool,
    /// A reload removed its capability after it was issued.
    withdrawn: bool,
}

#[derive(Debug, Default)]
struct Model {
    open: BTreeSet<String>,
    /// How many transactions were ever begun, and when each open one was (by that count).
    begun: u64,
    opened_at: BTreeMap<String, u64>,
    /// Per (skill, capability) withdrawn by a reload: how many transactions had been begun then.
    withdrawn: BTreeMap<(String, String), u64>,
    grants: BTreeMap<String, ModelGrant>,
    revoked_skills: BTreeSet<String>,
    revoked_capabilities: BTreeSet<(String, String)>,
    approved: BTreeSet<String>,
    /// Every instant a call was recorded at, per key, never pruned.
    history: BTreeMap<RateKey, Vec<i128>>,
}

impl Model {
    fn is_revoked(&self, skill: &str, capability: &str) -> bool {
        self.revoked_skills.contains(skill)
            || self
                .revoked_capabilities
                .contains(&(skill.to_owned(), capability.to_owned()))
    }

    fn begin(&mut self, tx: &str) -> Result<(), StateError> {
        if !self.open.insert(tx.to_owned()) {
            return Err(StateError::TransactionAlreadyOpen(tx.to_owned()));
        }
        self.opened_at.insert(tx.to_owned(), self.begun);
        self.begun += 1;
        Ok(())
    }

    fn end(&mut self, tx: &str) -> Result<(), StateError> {
        if !self.open.remove(tx) {
            return Err(StateError::TransactionNotOpen(tx.to_owned()));
        }
        for grant in self.grants.values_mut() {
            if grant.transaction.as_deref() == Some(tx) {
                grant.transaction_ended = true;
            }
        }
        Ok(())
    }

    fn issue(&mut self, grant: &NewGrant, now: i128) -> Result<(), StateError> {
        if self.grants.contains_key(&grant.token) {
            return Err(StateError::TokenAlreadyIssued(grant.token.clone()));
        }
        let duration = match grant.lifetime {
            GrantLifetime::WallClock { duration, .. } => Some(duration),
            GrantLifetime::Calls(_) => None,
        };
        let (remaining, expires_at, renewable) = match grant.lifetime {
            GrantLifetime::Calls(0) => return Err(StateError::EmptyLifetime),
            GrantLifetime::Calls(n) => (Some(n), None, false),
            GrantLifetime::WallClock { duration, .. } if duration.is_zero() => {
                return Err(StateError::EmptyLifetime);
            }
            GrantLifetime::WallClock {
                duration,
                renewable,
            } => (
                None,
                Some(now + i128::try_from(duration.as_nanos()).unwrap()),
                renewable,
            ),
        };
        if self.revoked_skills.contains(&grant.skill) {
            return Err(StateError::SkillRevoked(grant.skill.clone()));
        }
        if self.is_revoked(&grant.skill, &grant.capability) {
            return Err(StateError::CapabilityRevoked {
                skill: grant.skill.clone(),
                capability: grant.capability.clone(),
            });
        }
        if let Some(tx) = &grant.transaction
            && !self.open.contains(tx)
        {
            return Err(StateError::TransactionNotOpen(tx.clone()));
        }
        self.grants.insert(
            grant.token.clone(),
            ModelGrant {
                skill: grant.skill.clone(),
                capability: grant.capability.clone(),
                transaction: grant.transaction.clone(),
                transaction_ended: false,
                revision: grant.revision,
                remaining,
                expires_at,
                renewable,
                duration,
                used: 0,
                valid_from: now,
                revoked: false,
                withdrawn: false,
            },
        );
        Ok(())
    }

    /// A reload removed the capability: its grants so far, and its implicit grant in every
    /// transaction begun so far, are void for good.
    fn withdraw(&mut self, skill: &str, capability: &str) {
        for grant in self.grants.values_mut() {
            if grant.skill == skill && grant.capability == capability {
                grant.withdrawn = true;
            }
        }
        self.withdrawn
            .insert((skill.to_owned(), capability.to_owned()), self.begun);
    }

    /// Whether the open transaction `tx` was begun before `capability` was last withdrawn.
    fn withdrawn_in(&self, skill: &str, capability: &str, tx: &str) -> bool {
        let key = (skill.to_owned(), capability.to_owned());
        match (self.withdrawn.get(&key), self.opened_at.get(tx)) {
            (Some(begun_then), Some(opened)) => opened < begun_then,
            _ => false,
        }
    }

    fn status(
        &self,
        token: &str,
        skill: &str,
        capability: &str,
        tx: Option<&str>,
        bound: Option<LifetimeBound>,
        now: i128,
    ) -> GrantStatus {
        let refused = GrantStatus::Refused;
        let Some(grant) = self.grants.get(token) else {
            return refused(GrantRefusal::UnknownToken);
        };
        if grant.skill != skill || grant.capability != capability {
            return refused(GrantRefusal::OtherCapability);
        }
        if grant.revoked || self.is_revoked(skill, capability) {
            return refused(GrantRefusal::Revoked);
        }
        if grant.withdrawn {
            return refused(GrantRefusal::CapabilityRemoved);
        }
        if let Some(bound) = &grant.transaction {
            if tx != Some(bound.as_str()) {
                return refused(GrantRefusal::TransactionMismatch);
            }
            if grant.transaction_ended {
                return refused(GrantRefusal::TransactionEnded);
            }
        }
        let revision = grant.revision;
        if grant.remaining == Some(0) {
            return refused(GrantRefusal::UsesExhausted);
        }
        // A grant of another revision must satisfy the bound too: its uses since issue, and its
        // time since issue or renewal.
        let bound = bound.filter(|bound| bound.revision != revision);
        let own_expired = grant.expires_at.is_some_and(|expiry| now >= expiry);
        if own_expired && !grant.renewable {
            return refused(GrantRefusal::Expired);
        }
        if bound
            .and_then(|b| b.uses)
            .is_some_and(|uses| grant.used >= uses)
        {
            return refused(GrantRefusal::UsesExhausted);
        }
        let bound_expired = bound
            .and_then(|b| b.duration)
            .is_some_and(|d| now >= grant.valid_from + i128::try_from(d.as_nanos()).unwrap());
        match (
            own_expired || bound_expired,
            grant.renewable && grant.expires_at.is_some(),
        ) {
            (true, true) => GrantStatus::ExpiredRenewable { revision },
            (true, false) => refused(GrantRefusal::Expired),
            (false, _) => GrantStatus::Valid { revision },
        }
    }

    /// The instant a call to `key` at `now` is recorded at if allowed, or `None` if refused.
    fn rate_admits(&self, key: &RateKey, spec: &RateSpec, now: i128) -> Option<i128> {
        let empty = Vec::new();
        let history = self.history.get(key).unwrap_or(&empty);
        match *spec {
            RateSpec::Window { count, per } => {
                let now = history.iter().copied().fold(now, i128::max);
                let per = i128::try_from(per.as_nanos()).unwrap();
                let live = history.iter().filter(|&&t| t > now - per).count();
                (u64::try_from(live).unwrap() < count).then_some(now)
            }
            RateSpec::Bucket { count, per, burst } => {
                let interval = i128::try_from(per.as_nanos().div_ceil(u128::from(count))).unwrap();
                let tolerance = interval * i128::from(burst - 1);
                let tat = history
                    .iter()
                    .fold(None, |tat: Option<i128>, &t| {
                        Some(tat.map_or(t, |tat| tat.max(t)) + interval)
                    })
                    .map_or(now, |tat| tat.max(now));
                (tat - now <= tolerance).then_some(now)
            }
        }
    }

    fn commit(
        &mut self,
        skill: &str,
        capability: &str,
        authority: &Authority<'_>,
        rates: &[RateCharge],
        now: i128,
    ) -> Result<(), CommitRefusal> {
        let mut renewed = None;
        match *authority {
            Authority::Process => {
                if self.is_revoked(skill, capability) {
                    return Err(CommitRefusal::Revoked);
                }
            }
            Authority::Transaction(tx) => {
                if self.is_revoked(skill, capability) {
                    return Err(CommitRefusal::Revoked);
                }
                if !self.open.contains(tx) {
                    return Err(CommitRefusal::TransactionNotOpen);
                }
                if self.withdrawn_in(skill, capability, tx) {
                    return Err(CommitRefusal::CapabilityRemoved);
                }
            }
            Authority::Grant(GrantUse {
                token,
                transaction,
                renew,
                bound,
            }) => match self.status(token, skill, capability, transaction, bound, now) {
                GrantStatus::Valid { .. } => {}
                // A renewal lasts the shorter of the requested and the issued duration.
                GrantStatus::ExpiredRenewable { .. } => {
                    match renew.zip(self.grants.get(token).and_then(|grant| grant.duration)) {
                        Some((requested, issued)) if !requested.min(issued).is_zero() => {
                            let d = requested.min(issued);
                            renewed = Some(now + i128::try_from(d.as_nanos()).unwrap());
                        }
                        _ => return Err(CommitRefusal::Grant(GrantRefusal::Expired)),
                    }
                }
                GrantStatus::Refused(refusal) => return Err(CommitRefusal::Grant(refusal)),
            },
        }
        let mut recorded = Vec::new();
        for (charge, rate) in rates.iter().enumerate() {
            match self.rate_admits(&rate.key, &rate.spec, now) {
                Some(instant) => recorded.push((rate.key, instant)),
                None => return Err(CommitRefusal::RateLimited { charge }),
            }
        }
        for (key, instant) in recorded {
            self.history.entry(key).or_default().push(instant);
        }
        if let Authority::Grant(GrantUse { token, .. }) = authority {
            let grant = self.grants.get_mut(*token).unwrap();
            if let Some(remaining) = &mut grant.remaining {
                *remaining -= 1;
            }
            grant.used += 1;
            if renewed.is_some() {
                grant.expires_at = renewed;
                grant.valid_from = now;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Operations.

#[derive(Debug, Clone)]
enum AuthorityChoice {
    Process,
    Transaction(usize),
    Grant {
        token: usize,
        transaction: Option<usize>,
        renew: Option<u64>,
        bound: Option<LifetimeBound>,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Begin(usize),
    End(usize),
    Issue {
        token: usize,
        skill: usize,
        capability: usize,
        transaction: Option<usize>,
        revision: u64,
        lifetime: GrantLifetime,
    },
    Status {
        token: usize,
        skill: usize,
        capability: usize,
        transaction: Option<usize>,
        bound: Option<LifetimeBound>,
    },
    Commit {
        skill: usize,
        capability: usize,
        authority: AuthorityChoice,
        rates: Vec<usize>,
    },
    RevokeGrant(usize),
    RevokeSkill(usize),
    RevokeCapability(usize, usize),
    LiftSkill(usize),
    LiftCapability(usize, usize),
    /// A reload removed the capability (`StateStore::withdraw_capability`); a later issue is
    /// the capability added back.
    Withdraw(usize, usize),
    Approve(usize),
    Advance(u64),
    Back(u64),
    /// `InMemoryStore::forget_idle` at the current time (the model forgets nothing).
    Forget,
}

fn lifetime() -> impl Strategy<Value = GrantLifetime> {
    prop_oneof![
        (0..4_u64).prop_map(GrantLifetime::Calls),
        (0..20_u64, any::<bool>()).prop_map(|(n, renewable)| GrantLifetime::WallClock {
            duration: nanos(n),
            renewable,
        }),
    ]
}

/// The lifetime in force for a grant: of revision 0..3 (grants are issued under 0..3 too), a
/// `call N` or a `wallClock D`.
fn bound() -> impl Strategy<Value = Option<LifetimeBound>> {
    proptest::option::of(
        (0..3_u64, lifetime())
            .prop_map(|(revision, lifetime)| LifetimeBound::new(rev(revision), lifetime)),
    )
}

fn authority() -> impl Strategy<Value = AuthorityChoice> {
    prop_oneof![
        Just(AuthorityChoice::Process),
        (0..2_usize).prop_map(AuthorityChoice::Transaction),
        (
            0..4_usize,
            proptest::option::of(0..2_usize),
            proptest::option::of(0..15_u64),
            bound(),
        )
            .prop_map(
                |(token, transaction, renew, bound)| AuthorityChoice::Grant {
                    token,
                    transaction,
                    renew,
                    bound,
                }
            ),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let tx = || proptest::option::of(0..2_usize);
    prop_oneof![
        1 => (0..2_usize).prop_map(Op::Begin),
        1 => (0..2_usize).prop_map(Op::End),
        3 => (0..4_usize, 0..2_usize, 0..2_usize, tx(), 0..3_u64, lifetime()).prop_map(
            |(token, skill, capability, transaction, revision, lifetime)| Op::Issue {
                token, skill, capability, transaction, revision, lifetime,
            }
        ),
        1 => (0..4_usize, 0..2_usize, 0..2_usize, tx(), bound()).prop_map(
            |(token, skill, capability, transaction, bound)| Op::Status {
                token, skill, capability, transaction, bound,
            }
        ),
        6 => (0..2_usize, 0..2_usize, authority(), proptest::sample::subsequence(vec![0, 1, 2, 3], 0..=4))
            .prop_map(|(skill, capability, authority, rates)| Op::Commit {
                skill, capability, authority, rates,
            }),
        1 => (0..4_usize).prop_map(Op::RevokeGrant),
        1 => (0..2_usize).prop_map(Op::RevokeSkill),
        1 => (0..2_usize, 0..2_usize).prop_map(|(s, c)| Op::RevokeCapability(s, c)),
        1 => (0..2_usize).prop_map(Op::LiftSkill),
        1 => (0..2_usize, 0..2_usize).prop_map(|(s, c)| Op::LiftCapability(s, c)),
        1 => (0..2_usize, 0..2_usize).prop_map(|(s, c)| Op::Withdraw(s, c)),
        1 => (0..2_usize).prop_map(Op::Approve),
        4 => (0..12_u64).prop_map(Op::Advance),
        1 => (0..12_u64).prop_map(Op::Back),
    ]
}

/// Applies `op` to both; panics if their answers differ.
fn step(store: &InMemoryStore, model: &mut Model, now: &mut i128, op: &Op) {
    let tx_name = |t: Option<usize>| t.map(|t| TRANSACTIONS[t]);
    match *op {
        Op::Begin(t) => assert_eq!(
            store.begin_transaction(TRANSACTIONS[t]),
            model.begin(TRANSACTIONS[t])
        ),
        Op::End(t) => assert_eq!(
            store.end_transaction(TRANSACTIONS[t]),
            model.end(TRANSACTIONS[t])
        ),
        Op::Issue {
            token,
            skill,
            capability,
            transaction,
            revision,
            lifetime,
        } => {
            let grant = NewGrant {
                token: TOKENS[token].to_owned(),
                skill: SKILLS[skill].to_owned(),
                capability: CAPABILITIES[capability].to_owned(),
                transaction: tx_name(transaction).map(str::to_owned),
                issued_at: at(*now),
                revision: rev(revision),
                lifetime,
            };
            let expected = model.issue(&grant, *now);
            assert_eq!(store.issue_grant(grant), expected);
        }
        Op::Status {
            token,
            skill,
            capability,
            transaction,
            bound,
        } => {
            let (token, skill, capability) =
                (TOKENS[token], SKILLS[skill], CAPABILITIES[capability]);
            let tx = tx_name(transaction);
            assert_eq!(
                store.grant_status(token, skill, capability, tx, bound, at(*now)),
                model.status(token, skill, capability, tx, bound, *now)
            );
        }
        Op::Commit {
            skill,
            capability,
            ref authority,
            ref rates,
        } => {
            let keys = rate_keys();
            let charges: Vec<RateCharge> = rates
                .iter()
                .map(|&k| RateCharge {
                    key: keys[k].0,
                    spec: keys[k].1,
                })
                .collect();
            let authority = match *authority {
                AuthorityChoice::Process => Authority::Process,
                AuthorityChoice::Transaction(t) => Authority::Transaction(TRANSACTIONS[t]),
                AuthorityChoice::Grant {
                    token,
                    transaction,
                    renew,
                    bound,
                } => Authority::Grant(GrantUse {
                    token: TOKENS[token],
                    transaction: tx_name(transaction),
                    renew: renew.map(nanos),
                    bound,
                }),
            };
            let (skill, capability) = (SKILLS[skill], CAPABILITIES[capability]);
            let commit = Commit {
                skill,
                capability,
                authority,
                rates: &charges,
            };
            let expected = model.commit(skill, capability, &authority, &charges, *now);
            assert_eq!(store.commit(&commit, at(*now)), expected, "{commit:?}");
        }
        Op::RevokeGrant(g) => {
            let expected = match model.grants.get_mut(TOKENS[g]) {
                Some(grant) => {
                    grant.revoked = true;
                    Ok(())
                }
                None => Err(StateError::UnknownGrant(TOKENS[g].to_owned())),
            };
            assert_eq!(store.revoke_grant(TOKENS[g]), expected);
        }
        Op::RevokeSkill(s) => {
            store.revoke_skill(SKILLS[s]).unwrap();
            model.revoked_skills.insert(SKILLS[s].to_owned());
            for grant in model.grants.values_mut() {
                if grant.skill == SKILLS[s] {
                    grant.revoked = true;
                }
            }
        }
        Op::RevokeCapability(s, c) => {
            store.revoke_capability(SKILLS[s], CAPABILITIES[c]).unwrap();
            model
                .revoked_capabilities
                .insert((SKILLS[s].to_owned(), CAPABILITIES[c].to_owned()));
            for grant in model.grants.values_mut() {
                if grant.skill == SKILLS[s] && grant.capability == CAPABILITIES[c] {
                    grant.revoked = true;
                }
            }
        }
        Op::LiftSkill(s) => assert_eq!(
            store.lift_skill(SKILLS[s]).unwrap(),
            model.revoked_skills.remove(SKILLS[s])
        ),
        Op::LiftCapability(s, c) => assert_eq!(
            store.lift_capability(SKILLS[s], CAPABILITIES[c]).unwrap(),
            model
                .revoked_capabilities
                .remove(&(SKILLS[s].to_owned(), CAPABILITIES[c].to_owned()))
        ),
        Op::Withdraw(s, c) => {
            store
                .withdraw_capability(SKILLS[s], CAPABILITIES[c])
                .unwrap();
            model.withdraw(SKILLS[s], CAPABILITIES[c]);
        }
        Op::Approve(s) => {
            store.approve(SKILLS[s]).unwrap();
            model.approved.insert(SKILLS[s].to_owned());
        }
        Op::Advance(n) => *now += i128::from(n),
        Op::Back(n) => *now -= i128::from(n),
        Op::Forget => {
            store.forget_idle(at(*now));
        }
    }
}

/// Every read-only answer of the store equals the model's.
fn agree(store: &InMemoryStore, model: &Model, now: i128) {
    for tx in TRANSACTIONS {
        assert_eq!(
            store.is_transaction_open(tx),
            model.open.contains(tx),
            "{tx}"
        );
    }
    for skill in SKILLS {
        assert_eq!(store.is_approved(skill), model.approved.contains(skill));
        for capability in CAPABILITIES {
            assert_eq!(
                store.is_revoked(skill, capability),
                model.is_revoked(skill, capability)
            );
            for token in TOKENS {
                for tx in [None, Some("t0"), Some("t1")] {
                    for bound in [
                        None,
                        Some(LifetimeBound::new(rev(0), GrantLifetime::Calls(1))),
                        Some(LifetimeBound::new(
                            rev(1),
                            GrantLifetime::WallClock {
                                duration: nanos(5),
                                renewable: false,
                            },
                        )),
                    ] {
                        assert_eq!(
                            store.grant_status(token, skill, capability, tx, bound, at(now)),
                            model.status(token, skill, capability, tx, bound, now),
                            "{token} {skill} {capability} {tx:?} {bound:?}"
                        );
                    }
                }
            }
        }
    }
    for (key, spec) in rate_keys() {
        assert_eq!(
            store.rate_would_allow(&key, &spec, at(now)),
            model.rate_admits(&key, &spec, now).is_some(),
            "{key:?}"
        );
    }
}

/// Applies `ops` to a fresh store and model, checking every answer after every step.
fn run(ops: &[Op]) {
    let store = InMemoryStore::new();
    let mut model = Model::default();
    let mut now = 0_i128;
    for op in ops {
        step(&store, &mut model, &mut now, op);
        agree(&store, &model, now);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn store_agrees_with_the_model_after_every_step(ops in proptest::collection::vec(op(), 1..80)) {
        run(&ops);
    }

    /// Forgetting idle rate-limit keys — on demand here, as the store also does when a shard
    /// fills — cannot be observed while the clock never goes back: the store that forgets keeps
    /// agreeing with the model that keeps all history.
    #[test]
    fn forgetting_idle_keys_is_invisible_while_the_clock_never_goes_back(
        ops in proptest::collection::vec(
            prop_oneof![
                8 => op().prop_filter("forward clock", |op| !matches!(op, Op::Back(_))),
                2 => Just(Op::Forget),
            ],
            1..80,
        )
    ) {
        run(&ops);
    }
}

// ---------------------------------------------------------------------------------------------
// Named edges through the store.

fn process<'a>(rates: &'a [RateCharge]) -> Commit<'a> {
    Commit {
        skill: "s",
        capability: "c",
        authority: Authority::Process,
        rates,
    }
}

fn one_per_ten_ns() -> [RateCharge; 1] {
    [RateCharge {
        key: rk(b"k"),
        spec: RateSpec::Window {
            count: 1,
            per: nanos(10),
        },
    }]
}

#[test]
fn window_slot_is_still_taken_one_nanosecond_before_t() {
    let store = InMemoryStore::new();
    let rates = one_per_ten_ns();
    store.commit(&process(&rates), at(0)).unwrap();
    assert_eq!(
        store.commit(&process(&rates), at(9)),
        Err(CommitRefusal::RateLimited { charge: 0 })
    );
}

#[test]
fn window_slot_frees_at_exactly_t() {
    let store = InMemoryStore::new();
    let rates = one_per_ten_ns();
    store.commit(&process(&rates), at(0)).unwrap();
    assert_eq!(store.commit(&process(&rates), at(10)), Ok(()));
}

#[test]
fn window_slot_is_free_one_nanosecond_after_t() {
    let store = InMemoryStore::new();
    let rates = one_per_ten_ns();
    store.commit(&process(&rates), at(0)).unwrap();
    assert_eq!(store.commit(&process(&rates), at(11)), Ok(()));
}

#[test]
fn bucket_allows_burst_then_one_per_interval() {
    let store = InMemoryStore::new();
    // 4 per 100ns burst 3: I = 25ns, τ = 50ns.
    let rates = [RateCharge {
        key: rk(b"k"),
        spec: RateSpec::Bucket {
            count: 4,
            per: nanos(100),
            burst: 3,
        },
    }];
    for _ in 0..3 {
        store.commit(&process(&rates), at(0)).unwrap();
    }
    let limited = Err(CommitRefusal::RateLimited { charge: 0 });
    assert_eq!(store.commit(&process(&rates), at(0)), limited);
    assert_eq!(store.commit(&process(&rates), at(24)), limited);
    assert_eq!(store.commit(&process(&rates), at(25)), Ok(()));
    assert_eq!(store.commit(&process(&rates), at(25)), limited);
}

#[test]
fn revocation_refuses_later_grants_and_later_statuses() {
    let store = InMemoryStore::new();
    let grant = |token: &str| NewGrant {
        token: token.to_owned(),
        skill: "s".to_owned(),
        capability: "c".to_owned(),
        transaction: None,
        issued_at: at(0),
        revision: rev(9),
        lifetime: GrantLifetime::Calls(3),
    };
    store.issue_grant(grant("g1")).unwrap();
    store.revoke_capability("s", "c").unwrap();
    let revoked = GrantStatus::Refused(GrantRefusal::Revoked);
    assert_eq!(
        store.grant_status("g1", "s", "c", None, None, at(1)),
        revoked
    );
    assert!(matches!(
        store.issue_grant(grant("g2")),
        Err(StateError::CapabilityRevoked { .. })
    ));
    let use_g1 = Commit {
        authority: Authority::Grant(GrantUse {
            token: "g1",
            transaction: None,
            renew: None,
            bound: None,
        }),
        ..process(&[])
    };
    assert_eq!(
        store.commit(&use_g1, at(1)),
        Err(CommitRefusal::Grant(GrantRefusal::Revoked))
    );
    assert_eq!(
        store.commit(&process(&[]), at(1)),
        Err(CommitRefusal::Revoked)
    );
    store.lift_capability("s", "c").unwrap();
    assert_eq!(
        store.grant_status("g1", "s", "c", None, None, at(1)),
        revoked
    );
    store.issue_grant(grant("g3")).unwrap();
    assert_eq!(
        store.grant_status("g3", "s", "c", None, None, at(1)),
        GrantStatus::Valid { revision: rev(9) }
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrency.

const THREADS: usize = 8;

/// Runs `THREADS` threads that each try `attempts` commits; returns how many were allowed.
fn hammer(store: &Arc<InMemoryStore>, attempts: usize, spec: RateSpec, now: i128) -> u64 {
    let allowed = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (store, allowed, start) = (store.clone(), allowed.clone(), start.clone());
            thread::spawn(move || {
                let rates = [RateCharge {
                    key: rk(b"hot"),
                    spec,
                }];
                start.wait();
                for _ in 0..attempts {
                    if store.commit(&process(&rates), at(now)).is_ok() {
                        allowed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    allowed.load(Ordering::Relaxed)
}

#[test]
fn hot_window_key_never_allows_more_than_n_under_contention() {
    let spec = RateSpec::Window {
        count: 100,
        per: nanos(10),
    };
    for _ in 0..5 {
        let store = Arc::new(InMemoryStore::new());
        // Rounds half a window apart: each round may only use what the previous one left.
        let expected = [100, 0, 100, 0];
        for (round, expected) in expected.into_iter().enumerate() {
            let now = i128::try_from(round).unwrap() * 5;
            assert_eq!(hammer(&store, 500, spec, now), expected, "round {round}");
        }
    }
}

#[test]
fn hot_bucket_key_never_allows_more_than_burst_under_contention() {
    let spec = RateSpec::Bucket {
        count: 10,
        per: nanos(1_000),
        burst: 37,
    };
    for _ in 0..5 {
        let store = Arc::new(InMemoryStore::new());
        assert_eq!(hammer(&store, 500, spec, 0), 37);
        // I = 100ns: after 250ns two more calls conform (tat − now ≤ τ).
        assert_eq!(hammer(&store, 500, spec, 250), 2);
    }
}

#[test]
fn hot_grant_is_used_at_most_n_times_under_contention() {
    for _ in 0..5 {
        let store = Arc::new(InMemoryStore::new());
        store
            .issue_grant(NewGrant {
                token: "g".into(),
                skill: "s".into(),
                capability: "c".into(),
                transaction: None,
                issued_at: at(0),
                revision: rev(1),
                lifetime: GrantLifetime::Calls(250),
            })
            .unwrap();
        let allowed = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (store, allowed) = (store.clone(), allowed.clone());
                thread::spawn(move || {
                    let commit = Commit {
                        authority: Authority::Grant(GrantUse {
                            token: "g",
                            transaction: None,
                            renew: None,
                            bound: None,
                        }),
                        ..process(&[])
                    };
                    for _ in 0..100 {
                        if store.commit(&commit, at(0)).is_ok() {
                            allowed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
        assert_eq!(allowed.load(Ordering::Relaxed), 250);
    }
}

#[test]
fn multi_key_commits_in_opposite_orders_do_not_deadlock() {
    let store = Arc::new(InMemoryStore::new());
    let spec = RateSpec::Bucket {
        count: 1_000_000,
        per: nanos(1),
        burst: 1_000_000,
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|thread_index| {
            let store = store.clone();
            thread::spawn(move || {
                let keys: Vec<[u8; 2]> = (0..32_u8).map(|k| [k, 0]).collect();
                for i in 0..2_000_usize {
                    let a = &keys[(i + thread_index) % keys.len()];
                    let b = &keys[(i * 7 + 3) % keys.len()];
                    if a == b {
                        continue;
                    }
                    let (first, second) = if (i + thread_index) % 2 == 0 {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    let rates = [
                        RateCharge {
                            key: rk(first),
                            spec,
                        },
                        RateCharge {
                            key: rk(second),
                            spec,
                        },
                    ];
                    store.commit(&process(&rates), at(0)).unwrap();
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(store.rate_key_count(), 32);
}
