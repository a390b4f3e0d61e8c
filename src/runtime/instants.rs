//! The instants a sliding window holds: a queue of `i64` kept in blocks of one cache line each.
//!
//! A window's queue is written on every call it allows. Kept in an ordinary allocation, its
//! first and last cache lines could hold a neighbouring allocation's bytes, which another
//! thread may be using: the heap interleaves keys that different threads call, so two threads
//! on distinct keys would write lines the other reads (the reason the key cells are aligned,
//! `rate_table.rs`). Blocks aligned to a line each hold nothing but this queue's instants.
//! Measured as the `threads` report of benches/stages.rs measures, on window keys
//! (`docs/performance.md`, *What makes the decision path fast*): two threads on distinct window
//! keys scale 1.89–1.92× one thread's throughput with blocks, 1.79–1.84× with a
//! `VecDeque<i64>`; the price is an aligned allocation when a window first stores an instant
//! (~0.5 µs more per new key in a table of 1 M) and at least 64 bytes per window that holds any.
//! A ring's first or last block may still have a neighbour's line as the other half of its
//! 128-byte pair, which adjacent-line prefetchers fetch together (the key cells close that too,
//! `rate_table.rs`); blocks aligned to 128 bytes would, at twice the smallest ring. At 64 the
//! window keys already scale as bucket keys do, so the blocks stay at one line.

use crate::convert::usize_from;

/// Instants per block: one 64-byte cache line of `i64`.
const PER_BLOCK: usize = 8;

/// One cache line of instants.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
struct Block([i64; PER_BLOCK]);

/// A first-in, first-out queue of instants: a ring buffer over whole blocks, with the
/// operations of `VecDeque<i64>` that windows use. 24 bytes, so that a window's state stays
/// within the 64-byte line its key's cell gives it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Instants {
    // INVARIANT (instants-ring): a power of two of blocks, or none; `head` is a slot below
    // their capacity (0 when there are none), `len` at most that capacity.
    blocks: Box<[Block]>,
    /// The slot of the oldest instant.
    head: u32,
    len: u32,
}

impl Instants {
    /// How many instants are held.
    pub(crate) fn len(&self) -> usize {
        usize_from(self.len)
    }

    /// How many instants fit without reallocating.
    pub(crate) fn capacity(&self) -> usize {
        self.blocks.len().saturating_mul(PER_BLOCK)
    }

    /// The slot of the `i`-th instant from the front (`i` below the capacity).
    fn slot(&self, i: usize) -> usize {
        // INVARIANT (instants-ring): the capacity is a power of two, so the mask wraps.
        usize_from(self.head).wrapping_add(i) & self.capacity().wrapping_sub(1)
    }

    fn at(&self, slot: usize) -> Option<i64> {
        let block = self.blocks.get(slot / PER_BLOCK)?;
        block.0.get(slot % PER_BLOCK).copied()
    }

    /// The `i`-th instant from the front.
    pub(crate) fn get(&self, i: usize) -> Option<i64> {
        if i >= self.len() {
            return None;
        }
        self.at(self.slot(i))
    }

    /// The oldest instant.
    pub(crate) fn front(&self) -> Option<i64> {
        self.get(0)
    }

    /// Drops the oldest instant, if any.
    pub(crate) fn pop_front(&mut self) {
        if self.len == 0 {
            return;
        }
        self.len -= 1;
        self.head = u32::try_from(self.slot(1)).unwrap_or(0);
    }

    /// Appends `instant` at the back; false (nothing stored) only if the queue cannot grow,
    /// which a caller must treat as a refusal.
    #[must_use]
    pub(crate) fn push_back(&mut self, instant: i64) -> bool {
        if self.len() == self.capacity() && !self.resize(self.capacity().saturating_mul(2)) {
            return false;
        }
        let slot = self.slot(self.len());
        let Some(place) = slot_mut(&mut self.blocks, slot) else {
            return false;
        };
        *place = instant;
        self.len += 1;
        true
    }

    /// The number of instants from the front for which `before` holds, given that it holds for
    /// a prefix of the queue (a binary search, as `VecDeque::partition_point`).
    pub(crate) fn partition_point(&self, mut before: impl FnMut(i64) -> bool) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if self.get(mid).is_some_and(&mut before) {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Gives back memory beyond what `capacity` instants need (at least the instants held),
    /// rounded up to a power of two of blocks.
    pub(crate) fn shrink_to(&mut self, capacity: usize) {
        let want = capacity.max(self.len());
        if want == 0 {
            *self = Self::default();
        } else if blocks_for(want) < self.blocks.len() {
            // Shrinking to the instants held cannot fail; should it, nothing changes.
            let _ = self.resize(want);
        }
    }

    /// The instants, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Moves the instants, oldest first, into a new ring of at least `capacity` slots (at least
    /// one block, a power of two of them); false (nothing changed) if that cannot hold them or
    /// its slots do not fit in `u32`.
    fn resize(&mut self, capacity: usize) -> bool {
        let blocks = blocks_for(capacity);
        let slots = blocks.saturating_mul(PER_BLOCK);
        if slots < self.len() || u32::try_from(slots).is_err() {
            return false;
        }
        let mut ring = vec![Block::default(); blocks].into_boxed_slice();
        for (slot, instant) in self.iter().enumerate() {
            // Every instant has a slot below `slots`; one without would be lost, so refuse.
            let Some(place) = slot_mut(&mut ring, slot) else {
                return false;
            };
            *place = instant;
        }
        self.blocks = ring;
        self.head = 0;
        true
    }
}

/// How many blocks a ring of at least `capacity` slots has: at least one, a power of two.
fn blocks_for(capacity: usize) -> usize {
    capacity.max(1).div_ceil(PER_BLOCK).next_power_of_two()
}

/// The place of `slot` in `blocks`.
fn slot_mut(blocks: &mut [Block], slot: usize) -> Option<&mut i64> {
    blocks
        .get_mut(slot / PER_BLOCK)
        .and_then(|block| block.0.get_mut(slot % PER_BLOCK))
}

/// Equal when they hold the same instants in the same order, however they are laid out.
impl PartialEq for Instants {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Instants {}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    /// What a step of the model test does. A window pushes instants in order, so a push
    /// adds a step to the latest instant.
    #[derive(Debug, Clone)]
    enum Op {
        Push(u16),
        Pop,
        Shrink(usize),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        prop::collection::vec(
            prop_oneof![
                6 => any::<u16>().prop_map(Op::Push),
                3 => Just(Op::Pop),
                1 => (0usize..40).prop_map(Op::Shrink),
            ],
            0..200,
        )
    }

    proptest! {
        /// The queue answers every operation as `VecDeque<i64>` does, and its blocks never
        /// hold more than the instants need.
        #[test]
        fn behaves_as_a_vec_deque(start in any::<i32>(), ops in ops()) {
            let (mut queue, mut model) = (Instants::default(), VecDeque::new());
            let mut latest = i64::from(start);
            for op in ops {
                match op {
                    Op::Push(step) => {
                        latest += i64::from(step);
                        prop_assert!(queue.push_back(latest));
                        model.push_back(latest);
                    }
                    Op::Pop => {
                        queue.pop_front();
                        model.pop_front();
                    }
                    Op::Shrink(n) => queue.shrink_to(n.max(queue.len())),
                }
                prop_assert_eq!(queue.len(), model.len());
                prop_assert_eq!(queue.front(), model.front().copied());
                prop_assert!(queue.iter().eq(model.iter().copied()));
                prop_assert!(queue.capacity() >= queue.len());
                // INVARIANT (instants-ring), as documented.
                prop_assert!(queue.blocks.is_empty() || queue.blocks.len().is_power_of_two());
                prop_assert!(queue.head == 0 || usize_from(queue.head) < queue.capacity());
                let first = model.front().copied().unwrap_or(0);
                for cut in [i64::MIN, first - 1, first, first + 1, latest - 1, latest, i64::MAX] {
                    prop_assert_eq!(
                        queue.partition_point(|t| t <= cut),
                        model.partition_point(|&t| t <= cut)
                    );
                }
            }
        }
    }

    #[test]
    fn equal_queues_compare_equal_whatever_their_layout() {
        let mut spent = Instants::default();
        for t in 0..10 {
            assert!(spent.push_back(t));
        }
        for _ in 0..7 {
            spent.pop_front();
        }
        let mut fresh = Instants::default();
        for t in 7..10 {
            assert!(fresh.push_back(t));
        }
        assert_eq!(spent, fresh);
        assert!(fresh.push_back(10));
        assert_ne!(spent, fresh);
        assert_eq!(Instants::default(), {
            let mut emptied = Instants::default();
            assert!(emptied.push_back(1));
            emptied.pop_front();
            emptied
        });
    }

    /// Regression: a window's instants shared cache lines with neighbouring allocations. Every
    /// block starts a line of its own.
    #[test]
    fn every_block_fills_a_cache_line_of_its_own() {
        assert_eq!(std::mem::align_of::<Block>(), 64);
        assert_eq!(std::mem::size_of::<Block>(), 64);
        let mut queue = Instants::default();
        for t in 0..100 {
            assert!(queue.push_back(t));
            for block in &*queue.blocks {
                assert_eq!(std::ptr::from_ref(block).addr() % 64, 0);
            }
        }
    }

    #[test]
    fn a_first_instant_takes_one_line() {
        let mut queue = Instants::default();
        assert!(queue.push_back(1));
        assert_eq!(queue.capacity(), PER_BLOCK);
        assert_eq!(std::mem::size_of::<Instants>(), 24);
    }
}
