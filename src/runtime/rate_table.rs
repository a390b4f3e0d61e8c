//! The rate-limit keys of an [`InMemoryStore`](super::InMemoryStore): a concurrent table from
//! key to [`RateState`], read without a lock, and the floors that let it forget idle keys
//! without anyone being able to tell.
//!
//! - [`RateTable`] maps each key to a [`KeyCell`]: the key and its state behind a mutex of its
//!   own. The map is a lock-free hash table (`papaya`): a call on a key the table holds reads
//!   the table, writes nothing another key's call writes, and locks only its key's cell. Two
//!   threads on distinct keys therefore share no cache line they write, which a lock around
//!   the table (or around a shard of it) cannot give: its lock word moves between the threads'
//!   cores on most calls (`docs/runtime.md`, *Concurrency*).
//! - The keys are split over [`Shard`]s by hash. A shard is taken (a mutex) only to insert or
//!   forget one of its keys: it holds the list of its keys that the sweeps walk, the sweep's
//!   cursor, and its `floor`.
//!
//! # Forgetting
//! Keys are chosen by callers (`by` paths read request values), so a table that kept every key
//! would grow without bound. A shard forgets a key once its state is idle — it would answer
//! every later call as fresh state would ([`RateState::idle_at`]) — and remembers, as its
//! `floor`, the latest instant at which a key it forgot became idle. A key the table does not
//! hold is evaluated as [`RateState::absent`] at that floor; under a clock that never goes back
//! that is exactly what its forgotten state would have answered (`docs/runtime.md`).
//!
//! Forgetting is incremental: every new key, once every charge of its commit is recorded, looks
//! at the next [`SWEEP_STEP`] keys of its shard's list (a cursor that wraps around; once the
//! shard holds more than [`SWEEP_FROM`] keys) and forgets the idle ones, so no call pays for
//! more than a few, and a pass over a shard takes about a seventh of its keys in inserts,
//! which bounds the idle keys it can hold. [`RateTable::forget_idle`] sweeps every shard whole
//! and gives list memory back, for `InMemoryStore::forget_idle`.
//!
//! # Locks
//! A key's cell is locked to read or charge its state. A forgotten cell is emptied (its state
//! becomes `None`) under its own lock and its shard's, and taken out of the map before either
//! is released, so whoever then locks it knows to look the key up again. Lock order: a shard,
//! then cells; a commit locks its cells in address order and takes no shard while it holds
//! one (it inserts its new keys first and sweeps after). A cell a commit inserted is `fresh`
//! until that commit has locked it, and no sweep forgets a fresh cell: each key makes a commit
//! start over at most once, when it found the key's cell and a sweep forgot it before it was
//! locked.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use papaya::{Equivalent, HashMap, LocalGuard};

use super::rate::{Limit, RateState};
use super::store::{RateCharge, RateKey};

/// How many keys each new key's incremental sweep looks at. Each step moves the cursor on or
/// forgets the key under it, whose place the list's last key takes, so a pass over a shard of
/// `n` keys takes about `n / 7` of its inserts (1,442 for 10,000 idle keys in the tests), and a
/// shard holds about 1.15× the keys that are busy (plus those that went idle since the cursor
/// passed them).
pub(super) const SWEEP_STEP: usize = 8;

/// How many keys [`RateTable::forget_idle`] looks at each time it takes a shard's lock: an
/// insert into that shard waits for at most this many (about 0.35 ms at the ~0.68 µs per
/// key measured for a table of 1 M keys), not for the shard's whole list.
/// The unit tests take a small chunk, so that the lock changes hands often while they race.
pub(super) const FORGET_CHUNK: usize = if cfg!(test) { 16 } else { 512 };

/// A shard that held fewer keys than this before a new one forgets none by itself (only
/// `forget_idle` does): their memory is small (64 shards × 32 keys), and a small store then
/// answers exactly as one that keeps every key, even under a clock set back (the runtime model
/// test relies on it).
pub(super) const SWEEP_FROM: usize = 32;

/// A value alone on its cache lines (128 bytes: two lines, for adjacent-line prefetch), so
/// threads inserting into neighbouring shards do not invalidate each other's lock word.
#[repr(align(128))]
struct Padded<T>(T);

/// One key's state, and what finds it again.
///
/// The state (its lock word and the state itself) is the only part of the table a call writes,
/// so it starts the cell and the cell starts a cache line: the state fills that line alone.
/// Its partner in the 128-byte pair that the adjacent-line prefetcher fetches together is this
/// cell's own too: the line after it (the hash and the key), or the line before it, which
/// holds the `Arc`'s reference counts (written only when a key is inserted or forgotten). On
/// CPUs with 128-byte lines the line that holds the state is one of those same two pairs, so
/// it is the cell's own there too.
///
/// Without the alignment a cell shares its lines with whatever the allocator put next to it,
/// and in a heap whose freed memory is reused that is often another thread's cell, key or map
/// entry: two threads on distinct keys write lines the other reads, and in about half of the
/// two-thread rounds of the `threads` report (benches/stages.rs) throughput falls from ~1.9×
/// one thread's to ~1.3–1.5×. Padding the state with 48 bytes of the cell on each side, which
/// keeps its lines but not their pair partners to itself, does not help in that report
/// (`docs/performance.md`, *What makes the decision path fast*). The alignment costs ~100
/// bytes per key.
#[repr(C, align(64))]
pub(super) struct KeyCell {
    /// `None` once forgotten: the cell is no longer in the table, and the key is looked up again.
    state: Mutex<Option<RateState>>,
    /// The table's hash of `key` ([`RateTable::hash`]).
    hash: u64,
    key: RateKey,
    /// Set by the commit that inserted the cell until it has locked it; a sweep leaves a fresh
    /// cell alone, though its state (absent at the floor) is idle.
    fresh: AtomicBool,
}

/// A key's state, locked.
pub(super) type Slot<'g> = MutexGuard<'g, Option<RateState>>;

/// The map's key: the cell, hashed and compared by its key.
struct Cell(Arc<KeyCell>);

impl Hash for Cell {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialEq for Cell {
    fn eq(&self, other: &Self) -> bool {
        self.0.probe().equivalent(other)
    }
}

impl Eq for Cell {}

/// A key to look up, with its hash.
#[derive(Clone, Copy)]
struct Probe<'k> {
    hash: u64,
    key: &'k RateKey,
}

impl Hash for Probe<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Equivalent<Cell> for Probe<'_> {
    fn equivalent(&self, cell: &Cell) -> bool {
        self.hash == cell.0.hash && *self.key == cell.0.key
    }
}

/// The map's hasher: a key is hashed once, by [`RateTable::hash`], and the map reads that hash.
#[derive(Clone, Copy, Default)]
struct Prehashed;

/// See [`Prehashed`].
#[derive(Default)]
struct PrehashedHasher(u64);

impl BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;

    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

impl Hasher for PrehashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    // Only `Cell` and `Probe` are hashed, each with one `write_u64`; anything else is folded in
    // so the hasher is still a function of its input.
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
}

/// The insert, forget and sweep side of one shard of keys.
struct Shard {
    /// The shard's keys, in the order the sweeps walk them.
    cells: Vec<Arc<KeyCell>>,
    /// Where the next incremental sweep starts (taken modulo the list's length).
    cursor: usize,
    /// The latest [`RateState::idle_at`] of a key this shard forgot; `i128::MIN` until it forgets
    /// one. Only rises.
    floor: i128,
}

/// Every rate-limit key of a store, and its state.
pub(super) struct RateTable {
    map: HashMap<Cell, (), Prehashed>,
    // INVARIANT (shard-count): a power of two, at most 64 (`RateTable::new`).
    shards: Box<[Padded<Mutex<Shard>>]>,
    hasher: RandomState,
}

impl RateTable {
    /// An empty table of `shards` shards (rounded to a power of two in `1..=64`).
    pub(super) fn new(shards: usize) -> Self {
        // INVARIANT (shard-count): a power of two in 1..=64.
        let shards = shards.clamp(1, 64).next_power_of_two();
        Self {
            map: HashMap::builder().hasher(Prehashed).build(),
            shards: (0..shards)
                .map(|_| {
                    Padded(Mutex::new(Shard {
                        cells: Vec::new(),
                        cursor: 0,
                        floor: i128::MIN,
                    }))
                })
                .collect(),
            hasher: RandomState::new(),
        }
    }

    /// The key's hash: its place in the map, and (bits 32..38) its shard. A per-table randomly
    /// keyed SipHash, so callers cannot aim many keys at one shard or bucket.
    pub(super) fn hash(&self, key: &RateKey) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The shard of a key whose hash is `hash`.
    pub(super) fn shard_of(&self, hash: u64) -> usize {
        // INVARIANT (shard-count): the count is a power of two, so the mask is below it.
        usize::try_from(hash >> 32).unwrap_or(0) & self.shards.len().saturating_sub(1)
    }

    /// How many keys have state.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// A guard to hold while cells found in the map are used: the map frees nothing it removed
    /// while a guard taken before the removal lives.
    pub(super) fn guard(&self) -> LocalGuard<'_> {
        self.map.guard()
    }

    fn shard(&self, index: usize) -> Option<MutexGuard<'_, Shard>> {
        self.shards
            .get(index)
            .map(|Padded(shard)| shard.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn find<'g>(&self, probe: Probe<'_>, guard: &'g LocalGuard<'_>) -> Option<&'g KeyCell> {
        self.map
            .get_key_value(&probe, guard)
            .map(|(Cell(cell), ())| &**cell)
    }

    /// Whether a call on `key` (whose hash is `hash`) at `now` would be allowed; records nothing.
    pub(super) fn admits(&self, hash: u64, key: &RateKey, limit: &Limit, now: i128) -> bool {
        let guard = self.guard();
        let probe = Probe { hash, key };
        if let Some(cell) = self.find(probe, &guard)
            && let Some(state) = &*lock(cell)
        {
            return state.admits(limit, now);
        }
        // Not held, or forgotten since it was found: under the shard's lock nothing is forgotten
        // or inserted, and a cell found there is not forgotten.
        let Some(shard) = self.shard(self.shard_of(hash)) else {
            return false;
        };
        match self.find(probe, &guard).map(lock).as_deref() {
            Some(Some(state)) => state.admits(limit, now),
            _ => RateState::absent(limit, shard.floor).admits(limit, now),
        }
    }

    /// Locks the state of every charge (`slots[i]` for `rates[i]`, whose key hash is
    /// `hashes[i]`; `None` for a new key whose limit cannot be enforced), inserting the keys the
    /// table does not hold, as absent at their shard's floor. The limit is read only for a new
    /// key: the commit's checks refuse a charge whose limit cannot be enforced. `inserted[i]` says whether charge
    /// `i` inserted its key; run [`RateTable::sweep_step`] for each once the commit is done with
    /// the slots. `cells` is scratch; the slices are as long as `rates`.
    ///
    /// Cells are locked in address order, with no shard held: no lock-order cycle with another
    /// commit or with a sweep.
    pub(super) fn lock<'g>(
        &self,
        guard: &'g LocalGuard<'_>,
        rates: &[RateCharge],
        hashes: &[u64],
        cells: &mut [Option<&'g KeyCell>],
        slots: &mut [Option<Slot<'g>>],
        inserted: &mut [bool],
    ) {
        // INVARIANT (charges-paired): checked by `InMemoryStore::commit_charges`, the one
        // caller. Were a slice shorter, the zip below would give the charges past its end no
        // cell and so no slot, and the commit's checks refuse a charge without a slot.
        debug_assert!(
            [hashes.len(), cells.len(), slots.len(), inserted.len()] == [rates.len(); 4],
            "per-charge slices of unequal lengths"
        );
        loop {
            let charges = rates
                .iter()
                .zip(hashes)
                .zip(&mut *cells)
                .zip(&mut *inserted);
            for (((rate, &hash), cell), inserted) in charges {
                let probe = Probe {
                    hash,
                    key: &rate.key,
                };
                // A fresh cell this commit inserted in an earlier round is found again. A key
                // whose limit cannot be enforced is not inserted (its charge is refused).
                *cell = match (self.find(probe, guard), rate.spec.limit()) {
                    (Some(found), _) => Some(found),
                    (None, Some(limit)) => {
                        let (found, new) = self.insert(probe, &limit, guard);
                        *inserted |= new;
                        found
                    }
                    (None, None) => None,
                };
            }
            if self.lock_in_address_order(cells, slots) {
                // Under the cells' locks, which a sweep takes before it reads `fresh`.
                for (cell, _) in cells.iter().zip(&*inserted).filter(|(_, new)| **new) {
                    if let Some(cell) = cell {
                        cell.fresh.store(false, Ordering::Relaxed);
                    }
                }
                return;
            }
            // A cell was forgotten between finding and locking it: start over.
            slots.iter_mut().for_each(|slot| *slot = None);
        }
    }

    /// Locks each cell, lowest address first; false (some locked) if one was forgotten.
    fn lock_in_address_order<'g>(
        &self,
        cells: &[Option<&'g KeyCell>],
        slots: &mut [Option<Slot<'g>>],
    ) -> bool {
        let address = |cell: &KeyCell| std::ptr::from_ref(cell).addr();
        let mut after = None;
        loop {
            // The unlocked cell with the lowest address above the last one locked (commits
            // have at most a few charges; their keys are distinct, so their cells are too).
            let next = cells
                .iter()
                .enumerate()
                .filter_map(|(index, cell)| cell.map(|cell| (address(cell), index, cell)))
                .filter(|(address, _, _)| after.is_none_or(|after| *address > after))
                .min_by_key(|(address, _, _)| *address);
            let Some((at, index, cell)) = next else {
                return true;
            };
            let slot = lock(cell);
            if slot.is_none() {
                return false;
            }
            if let Some(place) = slots.get_mut(index) {
                *place = Some(slot);
            }
            after = Some(at);
        }
    }

    /// Inserts `probe`'s key, absent at its shard's floor and fresh, unless another commit did
    /// first; returns the key's cell and whether this call inserted it.
    fn insert<'g>(
        &self,
        probe: Probe<'_>,
        limit: &Limit,
        guard: &'g LocalGuard<'_>,
    ) -> (Option<&'g KeyCell>, bool) {
        let Some(mut shard) = self.shard(self.shard_of(probe.hash)) else {
            return (None, false);
        };
        if let Some(found) = self.find(probe, guard) {
            return (Some(found), false);
        }
        let cell = Arc::new(KeyCell {
            hash: probe.hash,
            key: *probe.key,
            state: Mutex::new(Some(RateState::absent(limit, shard.floor))),
            fresh: AtomicBool::new(true),
        });
        // Inserts of this shard's keys are serialised by its lock: the key is not there.
        let _ = self.map.try_insert(Cell(Arc::clone(&cell)), (), guard);
        shard.cells.push(cell);
        (self.find(probe, guard), true)
    }

    /// Forgets the idle keys at `now` among the next [`SWEEP_STEP`] of shard `shard_of(hash)`,
    /// raising its floor, and shrinks the ring buffers of the others. Run once per new key a
    /// commit inserted, after it released its slots.
    pub(super) fn sweep_step(&self, hash: u64, now: i128) {
        let Some(mut shard) = self.shard(self.shard_of(hash)) else {
            return;
        };
        // The new key that asks for this step is already in: the shard held one fewer.
        if shard.cells.len() <= SWEEP_FROM {
            return;
        }
        let guard = self.guard();
        for _ in 0..SWEEP_STEP {
            let Shard {
                cells,
                cursor,
                floor,
            } = &mut *shard;
            let index = *cursor % cells.len().max(1);
            let Some(cell) = cells.get(index) else {
                return;
            };
            if self.forget_if_idle(cell, now, floor, &guard) != Swept::Kept {
                // The last key takes its place, and is looked at next.
                cells.swap_remove(index);
                *cursor = index;
            } else {
                *cursor = index.wrapping_add(1);
            }
        }
    }

    /// Forgets every key idle at `now`, raising the floors, and gives back list and
    /// ring-buffer memory the shards no longer need. Returns how many keys it forgot.
    pub(super) fn forget_idle(&self, now: i128) -> usize {
        (0..self.shards.len())
            .map(|index| self.forget_idle_in(index, now))
            .fold(0, usize::saturating_add)
    }

    /// [`RateTable::forget_idle`] for shard `index`, from the end of its list down, holding
    /// the shard's lock for [`FORGET_CHUNK`] keys at a time so that an insert into it never
    /// waits for the whole list. Between chunks the list can change, and no key is missed:
    /// an insert appends a key (fresh, so not idle), and a sweep's `swap_remove` moves the
    /// list's last key, which this walk has already looked at while the list is longer than
    /// where it stands, and otherwise moves it lower, where the walk still goes.
    fn forget_idle_in(&self, index: usize, now: i128) -> usize {
        let mut forgot = 0_usize;
        let mut next = self.shard(index).map_or(0, |shard| shard.cells.len());
        while next > 0 {
            let guard = self.guard();
            let Some(mut shard) = self.shard(index) else {
                break;
            };
            let Shard { cells, floor, .. } = &mut *shard;
            let stop = next.saturating_sub(FORGET_CHUNK);
            while next > stop {
                next -= 1;
                let Some(cell) = cells.get(next) else {
                    // The list shrank below this place since the last chunk.
                    continue;
                };
                match self.forget_if_idle(cell, now, floor, &guard) {
                    Swept::Kept => continue,
                    Swept::Forgot => forgot = forgot.saturating_add(1),
                    Swept::Gone => {}
                }
                // The last key, already looked at, takes its place.
                cells.swap_remove(next);
            }
            if next == 0 {
                let len = cells.len();
                if len < cells.capacity() / 4 {
                    cells.shrink_to(len.saturating_mul(2));
                }
            }
        }
        forgot
    }

    /// The forgetting rule, for both sweeps, under the cell's shard's lock: a cell idle at `now`
    /// (and not fresh) is emptied, taken out of the map and `floor` raised to the instant it
    /// became idle; otherwise its ring buffer is shrunk.
    fn forget_if_idle(
        &self,
        cell: &KeyCell,
        now: i128,
        floor: &mut i128,
        guard: &LocalGuard<'_>,
    ) -> Swept {
        let mut slot = lock(cell);
        let Some(state) = slot.as_mut() else {
            return Swept::Gone;
        };
        let idle_at = state.idle_at();
        if idle_at > now || cell.fresh.load(Ordering::Relaxed) {
            state.shrink();
            return Swept::Kept;
        }
        *floor = (*floor).max(idle_at);
        *slot = None;
        // Out of the map before the cell's lock is released: whoever locks it next and finds
        // it empty looks the key up again and does not find it.
        self.map.remove(&cell.probe(), guard);
        Swept::Forgot
    }

    /// Takes out again a key that a refused commit inserted, unless a call was recorded on it
    /// since: while its state is still absent at its shard's floor, the table answers the same
    /// without it. It leaves the shard's list at the next sweep that reaches it.
    pub(super) fn forget_unused(&self, hash: u64, key: &RateKey, limit: &Limit) {
        let guard = self.guard();
        let Some(shard) = self.shard(self.shard_of(hash)) else {
            return;
        };
        let probe = Probe { hash, key };
        let Some(cell) = self.find(probe, &guard) else {
            return;
        };
        let mut slot = lock(cell);
        if slot
            .as_ref()
            .is_some_and(|state| *state == RateState::absent(limit, shard.floor))
        {
            *slot = None;
            self.map.remove(&probe, &guard);
        }
    }
}

/// What a sweep did with a key of its shard's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Swept {
    /// Busy: kept.
    Kept,
    /// Idle: forgotten now.
    Forgot,
    /// Already out of the map (a refused commit's key, [`RateTable::forget_unused`]).
    Gone,
}

impl KeyCell {
    fn probe(&self) -> Probe<'_> {
        Probe {
            hash: self.hash,
            key: &self.key,
        }
    }
}

fn lock(cell: &KeyCell) -> Slot<'_> {
    cell.state.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
