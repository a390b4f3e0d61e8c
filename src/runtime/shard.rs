//! One shard of the in-memory rate-limit state: a hash table from key to [`RateState`], and
//! the floor that lets the shard forget idle keys without anyone being able to tell.
//!
//! Keys are chosen by callers (`by` paths read request values), so a store that kept every key
//! would grow without bound. A shard forgets a key once its state is idle — it would answer
//! every later call as fresh state would ([`RateState::idle_at`]) — and remembers, as its
//! `floor`, the latest instant at which a key it forgot became idle. A key the table does not
//! hold is evaluated as [`RateState::absent`] at that floor; under a clock that never goes back
//! that is exactly what its forgotten state would have answered (`docs/runtime.md`).
//!
//! Forgetting happens in [`RateShard::forget_idle`]: when a new key arrives and the table holds
//! twice the keys it kept at its last sweep (so a sweep, which reads the whole table, comes at
//! most once per half a table of inserts, and the table never holds more than about twice the
//! keys that were busy at a sweep), and when the store's owner calls
//! `InMemoryStore::forget_idle`.

use hashbrown::HashTable;

use super::rate::{Limit, RateState};

/// The rate-limit keys of one shard and their state.
pub(super) struct RateShard {
    table: HashTable<(Box<[u8]>, RateState)>,
    /// The latest [`RateState::idle_at`] of a key this shard forgot; `i128::MIN` until it forgets
    /// one. Only rises.
    floor: i128,
    /// How many keys the table may hold before the next new key sweeps it: twice what it kept at
    /// the last sweep, at least [`MIN_SWEEP`].
    next_sweep: usize,
}

/// The table size below which a new key never sweeps.
const MIN_SWEEP: usize = 32;

impl RateShard {
    /// An empty shard.
    pub(super) fn new() -> Self {
        Self {
            table: HashTable::new(),
            floor: i128::MIN,
            next_sweep: MIN_SWEEP,
        }
    }

    /// How many keys have state.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether a call on `key` (whose hash is `hash`) at `now` would be allowed.
    pub(super) fn admits(&self, hash: u64, key: &[u8], limit: &Limit, now: i128) -> bool {
        match self.table.find(hash, |(stored, _)| **stored == *key) {
            Some((_, state)) => state.admits(limit, now),
            None => RateState::absent(limit, self.floor).admits(limit, now),
        }
    }

    /// Allows and records a call on `key` at `now` if [`RateShard::admits`] says so; returns
    /// whether it did. `rehash` is the store's key hash, for the table to grow with.
    pub(super) fn admit(
        &mut self,
        hash: u64,
        key: &[u8],
        limit: &Limit,
        now: i128,
        rehash: impl Fn(&[u8]) -> u64,
    ) -> bool {
        if let Some((_, state)) = self.table.find_mut(hash, |(stored, _)| **stored == *key) {
            return state.admit(limit, now);
        }
        let mut state = RateState::absent(limit, self.floor);
        if !state.admit(limit, now) {
            return false;
        }
        if self.table.len() >= self.next_sweep {
            self.forget_idle(now, &rehash);
        }
        self.table
            .insert_unique(hash, (Box::from(key), state), |(key, _)| rehash(key));
        true
    }

    /// Forgets every key idle at `now`, raising the floor to the latest instant one of them
    /// became idle, and gives back table and ring-buffer memory the shard no longer needs.
    /// Returns how many keys it forgot.
    pub(super) fn forget_idle(&mut self, now: i128, rehash: impl Fn(&[u8]) -> u64) -> usize {
        let before = self.table.len();
        let mut floor = self.floor;
        self.table.retain(|(_, state)| {
            let idle_at = state.idle_at();
            if idle_at <= now {
                floor = floor.max(idle_at);
                false
            } else {
                state.shrink();
                true
            }
        });
        self.floor = floor;
        let len = self.table.len();
        self.next_sweep = len.saturating_mul(2).max(MIN_SWEEP);
        if len < self.table.capacity() / 4 {
            self.table
                .shrink_to(len.saturating_mul(2), |(key, _)| rehash(key));
        }
        before.saturating_sub(len)
    }
}

#[cfg(test)]
mod tests;
