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
//! Forgetting is incremental: every new key, once every charge of its commit is recorded, looks
//! at the next [`SWEEP_STEP`] buckets of the table (a cursor that wraps around; once the shard
//! holds more than [`SWEEP_FROM`] keys) and forgets the idle keys there, so no call pays for
//! more than a few, and a pass over the whole table takes at most a fraction of a table of
//! inserts, which bounds the idle keys the table can hold.
//! [`RateShard::forget_idle`] sweeps the whole table at once and gives memory back, for
//! `InMemoryStore::forget_idle`.

use hashbrown::HashTable;

use super::rate::{Limit, RateState};

/// What [`RateShard::admit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// The call is over the limit; nothing was recorded.
    Refused,
    /// Recorded on a key the shard held.
    Held,
    /// Recorded on a key the shard did not hold, now inserted.
    New,
}

/// The rate-limit keys of one shard and their state.
pub(super) struct RateShard {
    /// Each key's state in an allocation of its own, which the thread that made the key
    /// allocated: the buckets are written only when a key comes or goes, and a charge writes
    /// to no cache line another key's charge writes to. Held in the buckets, the state of a
    /// key one thread charged shared a line with its neighbours', which other threads charged:
    /// two threads on distinct keys moved those lines between their cores on about every other
    /// call, and scaled 1.36–1.46× (`STAGES_REPORT=threads`; 1.67–1.90× held apart). The table
    /// is also smaller: 180 bytes a key in all, against 200.
    table: HashTable<(Box<[u8]>, Box<RateState>)>,
    /// The latest [`RateState::idle_at`] of a key this shard forgot; `i128::MIN` until it forgets
    /// one. Only rises.
    floor: i128,
    /// The bucket the next incremental sweep starts at (taken modulo the bucket count, which
    /// changes when the table grows or shrinks).
    cursor: usize,
}

/// How many buckets each new key's incremental sweep looks at. A table of `n` keys has at most
/// about `2.3 n` buckets (hashbrown keeps it at most 7/8 full, in powers of two), so a pass takes
/// at most ~`0.29 n` inserts and a table holds at most ~1.4× the keys that are busy (plus those
/// that went idle since the cursor passed them).
const SWEEP_STEP: usize = 8;

/// A shard that held fewer keys than this before a new one forgets none by itself (only
/// `forget_idle` does): their memory is small (64 shards × 32 keys), and a small store then
/// answers exactly as one that keeps every key, even under a clock set back (the runtime model
/// test relies on it).
const SWEEP_FROM: usize = 32;

impl RateShard {
    /// An empty shard.
    pub(super) fn new() -> Self {
        Self {
            table: HashTable::new(),
            floor: i128::MIN,
            cursor: 0,
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

    /// Allows and records a call on `key` at `now` if [`RateShard::admits`] says so, and says
    /// how. `rehash` is the store's key hash, for the table to grow with.
    ///
    /// A new key does not sweep here: the caller runs [`RateShard::sweep_step`] once per new key
    /// after *every* charge of its commit is recorded. Sweeping in between could forget a key
    /// the same commit charges next, which is then read as absent at the floor — and under a
    /// clock set back below the floor that refused the charge the commit had already checked
    /// (regression: the commit went through with that key never charged).
    pub(super) fn admit(
        &mut self,
        hash: u64,
        key: &[u8],
        limit: &Limit,
        now: i128,
        rehash: impl Fn(&[u8]) -> u64,
    ) -> Admitted {
        if let Some((_, state)) = self.table.find_mut(hash, |(stored, _)| **stored == *key) {
            return if state.admit(limit, now) {
                Admitted::Held
            } else {
                Admitted::Refused
            };
        }
        let mut state = RateState::absent(limit, self.floor);
        if !state.admit(limit, now) {
            return Admitted::Refused;
        }
        self.table
            .insert_unique(hash, (Box::from(key), Box::new(state)), |(key, _)| {
                rehash(key)
            });
        Admitted::New
    }

    /// Forgets every key idle at `now`, raising the floor to the latest instant one of them
    /// became idle, and gives back table and ring-buffer memory the shard no longer needs.
    /// Returns how many keys it forgot.
    pub(super) fn forget_idle(&mut self, now: i128, rehash: impl Fn(&[u8]) -> u64) -> usize {
        let before = self.table.len();
        let mut floor = self.floor;
        self.table
            .retain(|(_, state)| keep_unless_idle(state, now, &mut floor));
        self.floor = floor;
        let len = self.table.len();
        if len < self.table.capacity() / 4 {
            self.table
                .shrink_to(len.saturating_mul(2), |(key, _)| rehash(key));
        }
        before.saturating_sub(len)
    }

    /// Forgets the keys idle at `now` among the next [`SWEEP_STEP`] buckets, raising the floor as
    /// [`RateShard::forget_idle`] does, and shrinks the ring buffers of the others. Run once per
    /// new key a commit recorded ([`Admitted::New`]), after all its charges.
    pub(super) fn sweep_step(&mut self, now: i128) {
        let buckets = self.table.num_buckets();
        // The new key that asks for this step is already in: the shard held one fewer.
        if self.table.len() <= SWEEP_FROM || buckets == 0 {
            return;
        }
        for _ in 0..SWEEP_STEP {
            let index = self.cursor % buckets;
            self.cursor = index.wrapping_add(1);
            if let Ok(mut entry) = self.table.get_bucket_entry(index) {
                if !keep_unless_idle(&mut entry.get_mut().1, now, &mut self.floor) {
                    entry.remove();
                }
            }
        }
    }
}

/// The forgetting rule, for both sweeps: false (forget it) when `state` is idle at `now`, which
/// raises `floor` to the instant it became idle; otherwise true, and its ring buffer shrunk.
#[inline]
fn keep_unless_idle(state: &mut RateState, now: i128, floor: &mut i128) -> bool {
    let idle_at = state.idle_at();
    if idle_at <= now {
        *floor = (*floor).max(idle_at);
        false
    } else {
        state.shrink();
        true
    }
}

#[cfg(test)]
mod tests;
