//! Grants, transactions, approvals and revocation (§5.2), without locking.
//!
//! - [`NewGrant`] and [`GrantLifetime`] describe a grant to issue: a token bound to one skill and
//!   capability, optionally to a transaction, pinned to a manifest revision, good for N calls or
//!   until a wall-clock expiry.
//! - [`GrantStatus`] is the read-only answer to "may this token be used now", with a
//!   [`GrantRefusal`] saying why not; [`GrantRefusal::reason`] maps it to a deny reason.
//! - `Registry` holds all of it; the store puts it behind one lock and calls it.
//!
//! Transactions carry an *epoch*: each `begin_transaction` gets a fresh number and a grant records
//! the epoch it was issued in, so ending a transaction ends all its grants in O(1), and beginning
//! a transaction of the same name again does not revive them.
//!
//! A capability that a reload removes is *withdrawn* (`Registry::withdraw_capability`): the
//! grants issued for it so far, and its implicit grant in every transaction begun so far, are
//! dead for good, so adding the capability back later revives none of them (§5.2).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::error::StateError;
use super::store::{Authority, CommitRefusal, GrantUse};
use crate::revision::Revision;
use crate::vocabulary::ConstraintKeyword;

/// A grant to issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGrant {
    /// The token a request presents; unique for the life of the store.
    pub token: String,
    /// The skill the grant is for.
    pub skill: String,
    /// The capability of that skill the grant is for.
    pub capability: String,
    /// If set, the grant is only good in this transaction, and only while it is open.
    pub transaction: Option<String>,
    /// When it was issued; a wall-clock grant expires at `issued_at + duration`.
    pub issued_at: DateTime<Utc>,
    /// The revision (manifest hash) of the skill the grant was issued under.
    pub revision: Revision,
    /// How long the grant lasts.
    pub lifetime: GrantLifetime,
}

/// How long a grant lasts (`lifetime call N` or `lifetime wallClock D [renewable]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantLifetime {
    /// Good for this many allowed calls.
    Calls(u64),
    /// Good while `now < issued_at + duration`.
    WallClock {
        /// The time the grant is good for.
        duration: Duration,
        /// Whether an expired grant is renewed on use (§5.2).
        renewable: bool,
    },
}

/// The lifetime of the capability in force, which a grant issued under another revision must
/// satisfy as well as its own (SPEC §5.2: after a reload a grant is honoured only under the
/// intersection of its old and its new capability, so a reload that narrows a lifetime narrows
/// running grants too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifetimeBound {
    /// The revision in force: a grant issued under it is held to its own lifetime only.
    pub revision: Revision,
    /// `lifetime call N` in force: at most `N` uses, counted since the grant was issued.
    pub uses: Option<u64>,
    /// `lifetime wallClock D` in force: good only while `now < from + D`, where `from` is the
    /// grant's issue, or its last renewal.
    pub duration: Option<Duration>,
}

impl LifetimeBound {
    /// The bound of a capability whose grants last `lifetime`, at `revision`.
    pub fn new(revision: Revision, lifetime: GrantLifetime) -> LifetimeBound {
        match lifetime {
            GrantLifetime::Calls(uses) => LifetimeBound {
                revision,
                uses: Some(uses),
                duration: None,
            },
            GrantLifetime::WallClock { duration, .. } => LifetimeBound {
                revision,
                uses: None,
                duration: Some(duration),
            },
        }
    }
}

/// Whether a grant token may be used for a call now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantStatus {
    /// The grant is good; it was issued under manifest `revision`.
    Valid {
        /// The revision (manifest hash) of the skill the grant was issued under.
        revision: Revision,
    },
    /// A renewable wall-clock grant has expired; the engine may renew it on use (by committing
    /// with [`GrantUse::renew`]) if the capability still exists and is not revoked.
    ExpiredRenewable {
        /// The revision (manifest hash) of the skill the grant was issued under.
        revision: Revision,
    },
    /// The grant may not be used.
    Refused(GrantRefusal),
}

/// Why a grant may not be used, in the order the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GrantRefusal {
    /// No grant was issued with this token.
    UnknownToken,
    /// The grant was issued for another skill or capability.
    OtherCapability,
    /// The grant, its skill or its capability is revoked.
    Revoked,
    /// A reload removed the grant's capability after the grant was issued: the grant is dead for
    /// good, even once the capability is back (§5.2).
    CapabilityRemoved,
    /// The grant is bound to a transaction the request does not name.
    TransactionMismatch,
    /// The grant's transaction has ended.
    TransactionEnded,
    /// All of a `call N` grant's uses are spent.
    UsesExhausted,
    /// A wall-clock grant has expired and is not renewable (or could not be renewed).
    Expired,
}

/// The deny reason (`constraint` of §4) a refusal maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    /// `grant`: no usable grant (unknown, for something else, revoked, other transaction).
    Grant,
    /// `lifetime`: the grant existed but its lifetime is over.
    Lifetime,
    /// `rateLimit`: a rate limit is full.
    RateLimit,
}

impl RefusalReason {
    /// The `constraint` name of §4.
    pub fn constraint(self) -> &'static str {
        match self {
            RefusalReason::Grant => "grant",
            RefusalReason::Lifetime => "lifetime",
            RefusalReason::RateLimit => ConstraintKeyword::RateLimit.name(),
        }
    }
}

impl GrantRefusal {
    /// The deny reason this refusal maps to.
    pub fn reason(self) -> RefusalReason {
        match self {
            GrantRefusal::UnknownToken
            | GrantRefusal::OtherCapability
            | GrantRefusal::Revoked
            | GrantRefusal::CapabilityRemoved
            | GrantRefusal::TransactionMismatch => RefusalReason::Grant,
            GrantRefusal::TransactionEnded
            | GrantRefusal::UsesExhausted
            | GrantRefusal::Expired => RefusalReason::Lifetime,
        }
    }
}

/// One issued grant.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    skill: Box<str>,
    capability: Box<str>,
    transaction: Option<TransactionBinding>,
    revision: Revision,
    uses: GrantUses,
    /// Uses so far, whatever its lifetime: what a narrower `call N` after a reload counts.
    used: u64,
    /// When it was issued, or last renewed: where a narrower `wallClock D` after a reload
    /// counts from.
    valid_from: DateTime<Utc>,
    /// Revoked by token, or by its skill or capability while it existed; never un-revoked.
    revoked: bool,
    /// Its capability was removed by a reload after it was issued; never undone.
    withdrawn: bool,
}

/// The transaction (and which opening of it) a grant is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TransactionBinding {
    name: Box<str>,
    epoch: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GrantUses {
    Calls {
        remaining: u64,
    },
    WallClock {
        expires_at: DateTime<Utc>,
        renewable: bool,
        /// The duration it was issued with: a renewal never lasts longer.
        duration: Duration,
    },
}

/// What a commit will do to the registry once every check has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuthorityUse<'a> {
    /// `process` and `transaction` lifetimes consume nothing here.
    Nothing,
    /// Spend one use of this grant, after renewing it (at, new expiry) if it is renewed.
    Grant {
        token: &'a str,
        renewal: Option<(DateTime<Utc>, DateTime<Utc>)>,
    },
}

/// Everything of §5.2 except rate limits.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Open transactions and the epoch they were opened in.
    open_transactions: HashMap<Box<str>, u64>,
    next_epoch: u64,
    grants: HashMap<Box<str>, Grant>,
    revoked_skills: HashSet<Box<str>>,
    revoked_capabilities: HashMap<Box<str>, HashSet<Box<str>>>,
    approved_skills: HashSet<Box<str>>,
    /// Per skill and withdrawn capability, the first transaction epoch it may be used in again:
    /// the transactions begun before its last withdrawal lost their implicit grant for it.
    withdrawn_capabilities: HashMap<Box<str>, HashMap<Box<str>, u64>>,
}

impl Registry {
    pub(crate) fn begin_transaction(&mut self, transaction: &str) -> Result<(), StateError> {
        if self.open_transactions.contains_key(transaction) {
            return Err(StateError::TransactionAlreadyOpen(transaction.to_owned()));
        }
        let epoch = self.next_epoch;
        self.next_epoch = epoch
            .checked_add(1)
            .ok_or(StateError::TransactionsExhausted)?;
        self.open_transactions.insert(Box::from(transaction), epoch);
        Ok(())
    }

    pub(crate) fn end_transaction(&mut self, transaction: &str) -> Result<(), StateError> {
        self.open_transactions
            .remove(transaction)
            .map(drop)
            .ok_or_else(|| StateError::TransactionNotOpen(transaction.to_owned()))
    }

    pub(crate) fn is_transaction_open(&self, transaction: &str) -> bool {
        self.open_transactions.contains_key(transaction)
    }

    pub(crate) fn issue_grant(&mut self, grant: NewGrant) -> Result<(), StateError> {
        if self.grants.contains_key(grant.token.as_str()) {
            return Err(StateError::TokenAlreadyIssued(grant.token));
        }
        let uses = match grant.lifetime {
            GrantLifetime::Calls(0) => return Err(StateError::EmptyLifetime),
            GrantLifetime::Calls(remaining) => GrantUses::Calls { remaining },
            GrantLifetime::WallClock { duration, .. } if duration.is_zero() => {
                return Err(StateError::EmptyLifetime);
            }
            GrantLifetime::WallClock {
                duration,
                renewable,
            } => GrantUses::WallClock {
                expires_at: instant_after(grant.issued_at, duration)
                    .ok_or(StateError::LifetimeOutOfRange)?,
                renewable,
                duration,
            },
        };
        if self.revoked_skills.contains(grant.skill.as_str()) {
            return Err(StateError::SkillRevoked(grant.skill));
        }
        if self.is_capability_revoked(&grant.skill, &grant.capability) {
            return Err(StateError::CapabilityRevoked {
                skill: grant.skill,
                capability: grant.capability,
            });
        }
        let transaction = match grant.transaction {
            None => None,
            Some(name) => match self.open_transactions.get(name.as_str()) {
                Some(&epoch) => Some(TransactionBinding {
                    name: name.into_boxed_str(),
                    epoch,
                }),
                None => return Err(StateError::TransactionNotOpen(name)),
            },
        };
        self.grants.insert(
            grant.token.into_boxed_str(),
            Grant {
                skill: grant.skill.into_boxed_str(),
                capability: grant.capability.into_boxed_str(),
                transaction,
                revision: grant.revision,
                uses,
                used: 0,
                valid_from: grant.issued_at,
                revoked: false,
                withdrawn: false,
            },
        );
        Ok(())
    }

    pub(crate) fn grant_status(
        &self,
        token: &str,
        skill: &str,
        capability: &str,
        transaction: Option<&str>,
        bound: Option<LifetimeBound>,
        now: DateTime<Utc>,
    ) -> GrantStatus {
        let Some(grant) = self.grants.get(token) else {
            return GrantStatus::Refused(GrantRefusal::UnknownToken);
        };
        if &*grant.skill != skill || &*grant.capability != capability {
            return GrantStatus::Refused(GrantRefusal::OtherCapability);
        }
        if grant.revoked || self.is_revoked(skill, capability) {
            return GrantStatus::Refused(GrantRefusal::Revoked);
        }
        if grant.withdrawn {
            return GrantStatus::Refused(GrantRefusal::CapabilityRemoved);
        }
        if let Some(binding) = &grant.transaction {
            if transaction != Some(&*binding.name) {
                return GrantStatus::Refused(GrantRefusal::TransactionMismatch);
            }
            if self.open_transactions.get(&*binding.name) != Some(&binding.epoch) {
                return GrantStatus::Refused(GrantRefusal::TransactionEnded);
            }
        }
        let revision = grant.revision;
        let own = match grant.uses {
            GrantUses::Calls { remaining: 0 } => GrantStatus::Refused(GrantRefusal::UsesExhausted),
            GrantUses::Calls { .. } => GrantStatus::Valid { revision },
            GrantUses::WallClock { expires_at, .. } if now < expires_at => {
                GrantStatus::Valid { revision }
            }
            GrantUses::WallClock {
                renewable: true, ..
            } => GrantStatus::ExpiredRenewable { revision },
            GrantUses::WallClock {
                renewable: false, ..
            } => GrantStatus::Refused(GrantRefusal::Expired),
        };
        // A grant pinned to another revision is also held to the lifetime in force.
        let Some(bound) = bound.filter(|bound| bound.revision != revision) else {
            return own;
        };
        if let GrantStatus::Refused(_) = own {
            return own;
        }
        if bound.uses.is_some_and(|uses| grant.used >= uses) {
            return GrantStatus::Refused(GrantRefusal::UsesExhausted);
        }
        // An expiry past the representable range never comes.
        let expired = bound
            .duration
            .and_then(|duration| instant_after(grant.valid_from, duration))
            .is_some_and(|expires_at| now >= expires_at);
        match grant.uses {
            GrantUses::WallClock {
                renewable: true, ..
            } if expired => GrantStatus::ExpiredRenewable { revision },
            _ if expired => GrantStatus::Refused(GrantRefusal::Expired),
            _ => own,
        }
    }

    pub(crate) fn revoke_grant(&mut self, token: &str) -> Result<(), StateError> {
        let grant = self
            .grants
            .get_mut(token)
            .ok_or_else(|| StateError::UnknownGrant(token.to_owned()))?;
        grant.revoked = true;
        Ok(())
    }

    /// Revokes the skill and, permanently, every grant issued for it so far.
    pub(crate) fn revoke_skill(&mut self, skill: &str) {
        self.revoked_skills.insert(Box::from(skill));
        for grant in self.grants.values_mut() {
            if &*grant.skill == skill {
                grant.revoked = true;
            }
        }
    }

    /// Revokes the capability and, permanently, every grant issued for it so far.
    pub(crate) fn revoke_capability(&mut self, skill: &str, capability: &str) {
        match self.revoked_capabilities.get_mut(skill) {
            Some(capabilities) => {
                capabilities.insert(Box::from(capability));
            }
            None => {
                let capabilities = HashSet::from([Box::from(capability)]);
                self.revoked_capabilities
                    .insert(Box::from(skill), capabilities);
            }
        }
        for grant in self.grants.values_mut() {
            if &*grant.skill == skill && &*grant.capability == capability {
                grant.revoked = true;
            }
        }
    }

    /// Withdraws a capability that a reload removed: every grant issued for it so far, and its
    /// implicit grant in every transaction begun so far, is dead for good (§5.2). Grants issued
    /// and transactions begun later are not affected, so a capability added back works afresh.
    pub(crate) fn withdraw_capability(&mut self, skill: &str, capability: &str) {
        for grant in self.grants.values_mut() {
            if &*grant.skill == skill && &*grant.capability == capability {
                grant.withdrawn = true;
            }
        }
        // Every transaction begun so far has an epoch below `next_epoch`; later ones do not.
        let first_epoch = self.next_epoch;
        match self.withdrawn_capabilities.get_mut(skill) {
            Some(capabilities) => {
                capabilities.insert(Box::from(capability), first_epoch);
            }
            None => {
                let capabilities = HashMap::from([(Box::from(capability), first_epoch)]);
                self.withdrawn_capabilities
                    .insert(Box::from(skill), capabilities);
            }
        }
    }

    /// Whether `transaction` (open) was begun before `capability` of `skill` was last withdrawn,
    /// so that its implicit grant for it is dead.
    fn withdrawn_in(&self, skill: &str, capability: &str, transaction: &str) -> bool {
        if self.withdrawn_capabilities.is_empty() {
            return false;
        }
        let first_epoch = self
            .withdrawn_capabilities
            .get(skill)
            .and_then(|capabilities| capabilities.get(capability));
        match (first_epoch, self.open_transactions.get(transaction)) {
            (Some(first_epoch), Some(epoch)) => epoch < first_epoch,
            _ => false,
        }
    }

    pub(crate) fn lift_skill(&mut self, skill: &str) -> bool {
        self.revoked_skills.remove(skill)
    }

    pub(crate) fn lift_capability(&mut self, skill: &str, capability: &str) -> bool {
        let Some(capabilities) = self.revoked_capabilities.get_mut(skill) else {
            return false;
        };
        let lifted = capabilities.remove(capability);
        if capabilities.is_empty() {
            self.revoked_capabilities.remove(skill);
        }
        lifted
    }

    pub(crate) fn is_revoked(&self, skill: &str, capability: &str) -> bool {
        self.revoked_skills.contains(skill) || self.is_capability_revoked(skill, capability)
    }

    /// Which revocation applies: the skill's first, then the capability's.
    pub(crate) fn revocation(&self, skill: &str, capability: &str) -> super::store::Revocation {
        use super::store::Revocation;
        if self.revoked_skills.contains(skill) {
            Revocation::Skill
        } else if self.is_capability_revoked(skill, capability) {
            Revocation::Capability
        } else {
            Revocation::None
        }
    }

    fn is_capability_revoked(&self, skill: &str, capability: &str) -> bool {
        self.revoked_capabilities
            .get(skill)
            .is_some_and(|capabilities| capabilities.contains(capability))
    }

    pub(crate) fn approve(&mut self, skill: &str) {
        if !self.approved_skills.contains(skill) {
            self.approved_skills.insert(Box::from(skill));
        }
    }

    pub(crate) fn is_approved(&self, skill: &str) -> bool {
        self.approved_skills.contains(skill)
    }

    /// Checks that `authority` entitles a call to `skill`/`capability` at `now`, without changing
    /// anything; the result says what [`Registry::spend`] must do once the rest of the commit
    /// has passed its checks too.
    pub(crate) fn check_authority<'a>(
        &self,
        skill: &str,
        capability: &str,
        authority: &Authority<'a>,
        now: DateTime<Utc>,
    ) -> Result<AuthorityUse<'a>, CommitRefusal> {
        match *authority {
            Authority::Process => {
                if self.is_revoked(skill, capability) {
                    return Err(CommitRefusal::Revoked);
                }
                Ok(AuthorityUse::Nothing)
            }
            Authority::Transaction(transaction) => {
                if self.is_revoked(skill, capability) {
                    return Err(CommitRefusal::Revoked);
                }
                if !self.is_transaction_open(transaction) {
                    return Err(CommitRefusal::TransactionNotOpen);
                }
                if self.withdrawn_in(skill, capability, transaction) {
                    return Err(CommitRefusal::CapabilityRemoved);
                }
                Ok(AuthorityUse::Nothing)
            }
            Authority::Grant(GrantUse {
                token,
                transaction,
                renew,
                bound,
            }) => match self.grant_status(token, skill, capability, transaction, bound, now) {
                GrantStatus::Valid { .. } => Ok(AuthorityUse::Grant {
                    token,
                    renewal: None,
                }),
                GrantStatus::ExpiredRenewable { .. } => {
                    // A renewal lasts the shorter of the current capability's duration and the
                    // grant's own, so a reload never lengthens a running grant (regression: a
                    // reload to a longer duration made a one-minute grant last a day).
                    let own = match self.grants.get(token).map(|grant| grant.uses) {
                        Some(GrantUses::WallClock { duration, .. }) => Some(duration),
                        _ => None,
                    };
                    // INVARIANT (renewal-usable): a renewal is only taken if the renewed grant
                    // is good at `now`, so a zero duration refuses.
                    let renewed_expiry = renew
                        .zip(own)
                        .map(|(current, own)| current.min(own))
                        .and_then(|duration| instant_after(now, duration))
                        .filter(|&expires_at| now < expires_at)
                        .ok_or(CommitRefusal::Grant(GrantRefusal::Expired))?;
                    Ok(AuthorityUse::Grant {
                        token,
                        renewal: Some((now, renewed_expiry)),
                    })
                }
                GrantStatus::Refused(refusal) => Err(CommitRefusal::Grant(refusal)),
            },
        }
    }

    /// Applies what [`Registry::check_authority`] approved.
    pub(crate) fn spend(&mut self, authority: AuthorityUse<'_>) {
        let AuthorityUse::Grant { token, renewal } = authority else {
            return;
        };
        let Some(grant) = self.grants.get_mut(token) else {
            return;
        };
        grant.used = grant.used.saturating_add(1);
        match &mut grant.uses {
            GrantUses::Calls { remaining } => *remaining = remaining.saturating_sub(1),
            GrantUses::WallClock { expires_at, .. } => {
                if let Some((at, renewed)) = renewal {
                    *expires_at = renewed;
                    grant.valid_from = at;
                }
            }
        }
    }

    /// How many grants were ever issued (for memory estimates and diagnostics).
    pub(crate) fn grant_count(&self) -> usize {
        self.grants.len()
    }
}

/// `at + duration`, if representable.
fn instant_after(at: DateTime<Utc>, duration: Duration) -> Option<DateTime<Utc>> {
    at.checked_add_signed(TimeDelta::from_std(duration).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REVISION: Revision = Revision::from_bytes([7; 32]);

    /// `docs/runtime.md` (Memory) counts a grant's map entry from this size.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_grant_record_is_the_size_the_memory_estimate_counts() {
        assert_eq!(std::mem::size_of::<Grant>(), 144);
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn calls(token: &str, uses: u64) -> NewGrant {
        NewGrant {
            token: token.to_owned(),
            skill: "s".to_owned(),
            capability: "c".to_owned(),
            transaction: None,
            issued_at: at(0),
            revision: REVISION,
            lifetime: GrantLifetime::Calls(uses),
        }
    }

    fn wall_clock(token: &str, seconds: u64, renewable: bool) -> NewGrant {
        NewGrant {
            lifetime: GrantLifetime::WallClock {
                duration: Duration::from_secs(seconds),
                renewable,
            },
            ..calls(token, 1)
        }
    }

    fn status(registry: &Registry, token: &str, now: i64) -> GrantStatus {
        registry.grant_status(token, "s", "c", None, None, at(now))
    }

    fn use_grant(registry: &mut Registry, token: &str, now: i64) -> Result<(), CommitRefusal> {
        let authority = Authority::Grant(GrantUse {
            token,
            transaction: None,
            renew: None,
            bound: None,
        });
        let spent = registry.check_authority("s", "c", &authority, at(now))?;
        registry.spend(spent);
        Ok(())
    }

    const REFUSED_EXPIRED: GrantStatus = GrantStatus::Refused(GrantRefusal::Expired);

    #[test]
    fn transaction_cannot_be_begun_twice() {
        let mut registry = Registry::default();
        registry.begin_transaction("t").unwrap();
        assert_eq!(
            registry.begin_transaction("t"),
            Err(StateError::TransactionAlreadyOpen("t".into()))
        );
    }

    #[test]
    fn ending_a_transaction_that_is_not_open_is_an_error() {
        let mut registry = Registry::default();
        assert_eq!(
            registry.end_transaction("t"),
            Err(StateError::TransactionNotOpen("t".into()))
        );
    }

    #[test]
    fn call_grant_is_good_for_exactly_n_uses() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 2)).unwrap();
        assert_eq!(
            status(&registry, "g", 0),
            GrantStatus::Valid { revision: REVISION }
        );
        use_grant(&mut registry, "g", 0).unwrap();
        use_grant(&mut registry, "g", 0).unwrap();
        let exhausted = GrantStatus::Refused(GrantRefusal::UsesExhausted);
        assert_eq!(status(&registry, "g", 0), exhausted);
        assert_eq!(
            use_grant(&mut registry, "g", 0),
            Err(CommitRefusal::Grant(GrantRefusal::UsesExhausted))
        );
    }

    #[test]
    fn wall_clock_grant_is_good_strictly_before_its_expiry() {
        let mut registry = Registry::default();
        registry.issue_grant(wall_clock("g", 10, false)).unwrap();
        assert_eq!(
            status(&registry, "g", 9),
            GrantStatus::Valid { revision: REVISION }
        );
        assert_eq!(status(&registry, "g", 10), REFUSED_EXPIRED);
    }

    #[test]
    fn wall_clock_grant_is_not_used_up_by_calls() {
        let mut registry = Registry::default();
        registry.issue_grant(wall_clock("g", 10, false)).unwrap();
        for _ in 0..5 {
            use_grant(&mut registry, "g", 1).unwrap();
        }
        assert_eq!(
            status(&registry, "g", 1),
            GrantStatus::Valid { revision: REVISION }
        );
    }

    #[test]
    fn expired_renewable_grant_is_renewed_from_now_on_use() {
        let mut registry = Registry::default();
        registry.issue_grant(wall_clock("g", 10, true)).unwrap();
        let expired = GrantStatus::ExpiredRenewable { revision: REVISION };
        assert_eq!(status(&registry, "g", 10), expired);
        assert_eq!(
            use_grant(&mut registry, "g", 10),
            Err(CommitRefusal::Grant(GrantRefusal::Expired))
        );
        let renew = Authority::Grant(GrantUse {
            token: "g",
            transaction: None,
            renew: Some(Duration::from_secs(5)),
            bound: None,
        });
        let spent = registry.check_authority("s", "c", &renew, at(20)).unwrap();
        registry.spend(spent);
        assert_eq!(
            status(&registry, "g", 24),
            GrantStatus::Valid { revision: REVISION }
        );
        assert_eq!(status(&registry, "g", 25), expired);
    }

    #[test]
    fn renewal_by_zero_is_refused() {
        let mut registry = Registry::default();
        registry.issue_grant(wall_clock("g", 10, true)).unwrap();
        let renew = Authority::Grant(GrantUse {
            token: "g",
            transaction: None,
            renew: Some(Duration::ZERO),
            bound: None,
        });
        assert_eq!(
            registry.check_authority("s", "c", &renew, at(10)),
            Err(CommitRefusal::Grant(GrantRefusal::Expired))
        );
    }

    #[test]
    fn renewal_is_ignored_while_the_grant_is_valid() {
        let mut registry = Registry::default();
        registry.issue_grant(wall_clock("g", 10, true)).unwrap();
        let renew = Authority::Grant(GrantUse {
            token: "g",
            transaction: None,
            renew: Some(Duration::from_secs(100)),
            bound: None,
        });
        let spent = registry.check_authority("s", "c", &renew, at(5)).unwrap();
        registry.spend(spent);
        let expired = GrantStatus::ExpiredRenewable { revision: REVISION };
        assert_eq!(status(&registry, "g", 10), expired);
    }

    #[test]
    fn grant_tokens_are_never_reissued() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 1)).unwrap();
        registry.revoke_grant("g").unwrap();
        assert_eq!(
            registry.issue_grant(calls("g", 1)),
            Err(StateError::TokenAlreadyIssued("g".into()))
        );
    }

    #[test]
    fn empty_lifetimes_are_refused_at_issue() {
        let mut registry = Registry::default();
        assert_eq!(
            registry.issue_grant(calls("g", 0)),
            Err(StateError::EmptyLifetime)
        );
        assert_eq!(
            registry.issue_grant(wall_clock("g", 0, true)),
            Err(StateError::EmptyLifetime)
        );
    }

    #[test]
    fn unrepresentable_expiry_is_refused_at_issue() {
        let mut registry = Registry::default();
        assert_eq!(
            registry.issue_grant(wall_clock("g", u64::MAX, false)),
            Err(StateError::LifetimeOutOfRange)
        );
    }

    #[test]
    fn grant_for_another_skill_or_capability_is_refused() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 1)).unwrap();
        let other = GrantStatus::Refused(GrantRefusal::OtherCapability);
        assert_eq!(
            registry.grant_status("g", "s", "d", None, None, at(0)),
            other
        );
        assert_eq!(
            registry.grant_status("g", "t", "c", None, None, at(0)),
            other
        );
    }

    #[test]
    fn unknown_token_is_refused() {
        let registry = Registry::default();
        let unknown = GrantStatus::Refused(GrantRefusal::UnknownToken);
        assert_eq!(status(&registry, "g", 0), unknown);
    }

    #[test]
    fn transaction_grant_needs_its_transaction_named_and_open() {
        let mut registry = Registry::default();
        registry.begin_transaction("t").unwrap();
        let grant = NewGrant {
            transaction: Some("t".into()),
            ..calls("g", 5)
        };
        registry.issue_grant(grant).unwrap();
        let valid = GrantStatus::Valid { revision: REVISION };
        let mismatch = GrantStatus::Refused(GrantRefusal::TransactionMismatch);
        let ended = GrantStatus::Refused(GrantRefusal::TransactionEnded);
        assert_eq!(
            registry.grant_status("g", "s", "c", Some("t"), None, at(0)),
            valid
        );
        assert_eq!(
            registry.grant_status("g", "s", "c", None, None, at(0)),
            mismatch
        );
        assert_eq!(
            registry.grant_status("g", "s", "c", Some("u"), None, at(0)),
            mismatch
        );
        registry.end_transaction("t").unwrap();
        assert_eq!(
            registry.grant_status("g", "s", "c", Some("t"), None, at(0)),
            ended
        );
    }

    #[test]
    fn reopening_a_transaction_does_not_revive_its_grants() {
        let mut registry = Registry::default();
        registry.begin_transaction("t").unwrap();
        let grant = NewGrant {
            transaction: Some("t".into()),
            ..calls("g", 5)
        };
        registry.issue_grant(grant).unwrap();
        registry.end_transaction("t").unwrap();
        registry.begin_transaction("t").unwrap();
        let ended = GrantStatus::Refused(GrantRefusal::TransactionEnded);
        assert_eq!(
            registry.grant_status("g", "s", "c", Some("t"), None, at(0)),
            ended
        );
    }

    #[test]
    fn grant_for_a_transaction_that_is_not_open_is_refused_at_issue() {
        let mut registry = Registry::default();
        let grant = NewGrant {
            transaction: Some("t".into()),
            ..calls("g", 5)
        };
        assert_eq!(
            registry.issue_grant(grant),
            Err(StateError::TransactionNotOpen("t".into()))
        );
    }

    #[test]
    fn grant_without_a_transaction_ignores_the_request_transaction() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 1)).unwrap();
        let valid = GrantStatus::Valid { revision: REVISION };
        assert_eq!(
            registry.grant_status("g", "s", "c", Some("t"), None, at(0)),
            valid
        );
    }

    #[test]
    fn revoked_skill_refuses_later_grants_and_earlier_ones_for_good() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 5)).unwrap();
        registry.revoke_skill("s");
        let revoked = GrantStatus::Refused(GrantRefusal::Revoked);
        assert_eq!(status(&registry, "g", 0), revoked);
        assert_eq!(
            registry.issue_grant(calls("h", 1)),
            Err(StateError::SkillRevoked("s".into()))
        );
        assert!(registry.lift_skill("s"));
        // Lifting allows new grants; grants alive at revocation stay revoked.
        assert_eq!(status(&registry, "g", 0), revoked);
        registry.issue_grant(calls("h", 1)).unwrap();
        assert_eq!(
            status(&registry, "h", 0),
            GrantStatus::Valid { revision: REVISION }
        );
    }

    #[test]
    fn revoked_capability_refuses_only_that_capability() {
        let mut registry = Registry::default();
        registry.revoke_capability("s", "c");
        assert!(registry.is_revoked("s", "c"));
        assert!(!registry.is_revoked("s", "d"));
        let refused = registry.issue_grant(calls("g", 1));
        assert!(matches!(refused, Err(StateError::CapabilityRevoked { .. })));
        let other = NewGrant {
            capability: "d".into(),
            ..calls("g", 1)
        };
        registry.issue_grant(other).unwrap();
        assert!(registry.lift_capability("s", "c"));
        assert!(!registry.lift_capability("s", "c"));
        assert!(!registry.is_revoked("s", "c"));
    }

    #[test]
    fn withdrawing_a_capability_voids_its_grants_and_transactions_so_far_for_good() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 5)).unwrap();
        let other = NewGrant {
            capability: "d".into(),
            ..calls("h", 5)
        };
        registry.issue_grant(other).unwrap();
        registry.begin_transaction("before").unwrap();
        registry.withdraw_capability("s", "c");
        registry.begin_transaction("after").unwrap();
        let removed = GrantStatus::Refused(GrantRefusal::CapabilityRemoved);
        assert_eq!(status(&registry, "g", 0), removed);
        assert_eq!(
            GrantRefusal::CapabilityRemoved.reason().constraint(),
            "grant"
        );
        // Another capability's grant, a later grant and a later transaction are untouched.
        assert_eq!(
            registry.grant_status("h", "s", "d", None, None, at(0)),
            GrantStatus::Valid { revision: REVISION }
        );
        registry.issue_grant(calls("k", 1)).unwrap();
        assert_eq!(
            status(&registry, "k", 0),
            GrantStatus::Valid { revision: REVISION }
        );
        let in_tx = |tx| Authority::Transaction(tx);
        assert_eq!(
            registry.check_authority("s", "c", &in_tx("before"), at(0)),
            Err(CommitRefusal::CapabilityRemoved)
        );
        assert!(
            registry
                .check_authority("s", "d", &in_tx("before"), at(0))
                .is_ok()
        );
        assert!(
            registry
                .check_authority("s", "c", &in_tx("after"), at(0))
                .is_ok()
        );
        // Ending and beginning `before` again gives a transaction of its own.
        registry.end_transaction("before").unwrap();
        registry.begin_transaction("before").unwrap();
        assert!(
            registry
                .check_authority("s", "c", &in_tx("before"), at(0))
                .is_ok()
        );
    }

    #[test]
    fn revoking_a_grant_by_token_refuses_it() {
        let mut registry = Registry::default();
        registry.issue_grant(calls("g", 5)).unwrap();
        registry.revoke_grant("g").unwrap();
        let revoked = GrantStatus::Refused(GrantRefusal::Revoked);
        assert_eq!(status(&registry, "g", 0), revoked);
        assert_eq!(
            registry.revoke_grant("nope"),
            Err(StateError::UnknownGrant("nope".into()))
        );
    }

    #[test]
    fn process_and_transaction_authority_respect_revocation() {
        let mut registry = Registry::default();
        registry.begin_transaction("t").unwrap();
        let now = at(0);
        let in_t = Authority::Transaction("t");
        assert!(
            registry
                .check_authority("s", "c", &Authority::Process, now)
                .is_ok()
        );
        assert!(registry.check_authority("s", "c", &in_t, now).is_ok());
        registry.revoke_skill("s");
        let refused = Err(CommitRefusal::Revoked);
        assert_eq!(
            registry.check_authority("s", "c", &Authority::Process, now),
            refused
        );
        assert_eq!(registry.check_authority("s", "c", &in_t, now), refused);
    }

    #[test]
    fn transaction_authority_needs_an_open_transaction() {
        let registry = Registry::default();
        assert_eq!(
            registry.check_authority("s", "c", &Authority::Transaction("t"), at(0)),
            Err(CommitRefusal::TransactionNotOpen)
        );
    }

    #[test]
    fn approval_is_recorded_per_skill() {
        let mut registry = Registry::default();
        assert!(!registry.is_approved("s"));
        registry.approve("s");
        registry.approve("s");
        assert!(registry.is_approved("s"));
        assert!(!registry.is_approved("t"));
    }

    #[test]
    fn refusals_map_to_grant_or_lifetime() {
        assert_eq!(GrantRefusal::Revoked.reason().constraint(), "grant");
        assert_eq!(
            GrantRefusal::UsesExhausted.reason().constraint(),
            "lifetime"
        );
        assert_eq!(
            GrantRefusal::TransactionEnded.reason().constraint(),
            "lifetime"
        );
        assert_eq!(
            GrantRefusal::TransactionMismatch.reason().constraint(),
            "grant"
        );
    }
}
