//! The operator API of a stateful engine: grants, transactions, revocation, approvals, and
//! recording the capabilities a reload removed.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::bytecode::program::CompiledSkill;
use crate::name::Name;
use crate::revision::Revision;
use crate::runtime::{GrantLifetime, NewGrant, StateStore};

use super::{Engine, EngineError};

impl Engine {
    /// Withdraws `removed` in the state store, with every removal still unrecorded; keeps those
    /// the store could not record, for the next reload or call.
    pub(super) fn record_removals(&self, removed: Vec<(Name, Name)>) {
        let Some(store) = &self.state else {
            return;
        };
        let mut unrecorded = self
            .unrecorded_removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for pair in removed {
            if !unrecorded.contains(&pair) {
                unrecorded.push(pair);
            }
        }
        unrecorded
            .retain(|(skill, capability)| store.withdraw_capability(skill, capability).is_err());
        self.any_unrecorded_removal
            .store(!unrecorded.is_empty(), Ordering::Release);
    }

    /// Whether a reload removed `capability` of `skill` and the store has not recorded it yet
    /// (after trying again now): calls to it are refused until it has.
    #[inline]
    pub(crate) fn removal_unrecorded(
        &self,
        store: &dyn StateStore,
        skill: &Name,
        capability: &Name,
    ) -> bool {
        if !self.any_unrecorded_removal.load(Ordering::Acquire) {
            return false;
        }
        self.retry_removals(store, skill, capability)
    }

    #[cold]
    #[inline(never)]
    pub(super) fn retry_removals(
        &self,
        store: &dyn StateStore,
        skill: &Name,
        capability: &Name,
    ) -> bool {
        let mut unrecorded = self
            .unrecorded_removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unrecorded
            .retain(|(skill, capability)| store.withdraw_capability(skill, capability).is_err());
        self.any_unrecorded_removal
            .store(!unrecorded.is_empty(), Ordering::Release);
        unrecorded
            .iter()
            .any(|(s, c)| s == skill && c == capability)
    }

    /// `name` is the policy's own (interned) name, so the key is a copy, not an allocation.
    pub(super) fn skill_at_revision(
        &self,
        name: &Name,
        revision: Revision,
    ) -> Option<Arc<CompiledSkill>> {
        self.history
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(name.clone(), revision))
            .cloned()
    }

    pub(super) fn store(&self, what: &'static str) -> Result<&Arc<dyn StateStore>, EngineError> {
        self.state.as_ref().ok_or(EngineError::Stateless(what))
    }

    /// Issues a grant for `skill`/`capability`, optionally bound to a transaction. `token` names
    /// it (generated when `None`); returns the token.
    pub fn issue_grant(
        &self,
        skill: &str,
        capability: &str,
        transaction: Option<&str>,
        token: Option<String>,
    ) -> Result<String, EngineError> {
        let store = self.store("a grant")?;
        // Held until the grant is recorded: a reload cannot withdraw its capability in between.
        let _history = self.history.read().unwrap_or_else(PoisonError::into_inner);
        let policy = self.policy();
        let compiled = policy
            .skill(skill)
            .ok_or_else(|| EngineError::UnknownSkill(skill.to_owned()))?;
        let cap =
            compiled
                .capability(capability)
                .ok_or_else(|| EngineError::UnknownCapability {
                    skill: skill.to_owned(),
                    capability: capability.to_owned(),
                })?;
        // Process and transaction lifetimes need no token; a grant for them is recorded as a
        // one-call grant so the token is still valid, revocable and pinned, but the engine does
        // not require or consume it.
        let lifetime =
            super::decide::grant_lifetime(cap.lifetime).unwrap_or(GrantLifetime::Calls(1));
        let token = token
            .unwrap_or_else(|| format!("g-{}", self.next_grant.fetch_add(1, Ordering::Relaxed)));
        store.issue_grant(NewGrant {
            token: token.clone(),
            skill: skill.to_owned(),
            capability: capability.to_owned(),
            transaction: transaction.map(str::to_owned),
            issued_at: self.clock.now(),
            revision: compiled.revision,
            lifetime,
        })?;
        Ok(token)
    }

    /// Opens a transaction.
    pub fn begin_transaction(&self, transaction: &str) -> Result<(), EngineError> {
        Ok(self
            .store("a transaction")?
            .begin_transaction(transaction)?)
    }

    /// Closes a transaction and ends its grants.
    pub fn end_transaction(&self, transaction: &str) -> Result<(), EngineError> {
        Ok(self.store("a transaction")?.end_transaction(transaction)?)
    }

    /// Revokes one grant.
    pub fn revoke_grant(&self, token: &str) -> Result<(), EngineError> {
        Ok(self.store("revocation")?.revoke_grant(token)?)
    }

    /// Revokes a skill: every later call and grant is refused until lifted.
    pub fn revoke_skill(&self, skill: &str) -> Result<(), EngineError> {
        Ok(self.store("revocation")?.revoke_skill(skill)?)
    }

    /// Revokes one capability of a skill.
    pub fn revoke_capability(&self, skill: &str, capability: &str) -> Result<(), EngineError> {
        Ok(self
            .store("revocation")?
            .revoke_capability(skill, capability)?)
    }

    /// Lifts a skill's revocation; returns whether it was revoked.
    pub fn lift_skill(&self, skill: &str) -> Result<bool, EngineError> {
        Ok(self.store("revocation")?.lift_skill(skill)?)
    }

    /// Lifts a capability's revocation; returns whether it was revoked.
    pub fn lift_capability(&self, skill: &str, capability: &str) -> Result<bool, EngineError> {
        Ok(self
            .store("revocation")?
            .lift_capability(skill, capability)?)
    }

    /// Records the first-use approval of a skill.
    pub fn approve(&self, skill: &str) -> Result<(), EngineError> {
        Ok(self.store("an approval")?.approve(skill)?)
    }
}
