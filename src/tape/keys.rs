//! Duplicate-key detection for large objects.
//!
//! [`KeySet`] is an open-addressed hash set of key nodes, keyed by (object, decoded key), that
//! lives in the [`Tape`](super::Tape) and is reused from parse to parse. Objects of up to
//! [`LINEAR_MEMBERS`] members compare each new key with the earlier ones directly (cheaper than
//! hashing for the small objects requests are made of); from the next member on, the object's
//! keys go into the set, so an object of n members costs O(n) and not O(n²).
//!
//! Why a hash set and not sorting: the reference parser reports a duplicate at the second key,
//! before reading its value, and so must the tape (a duplicate followed by a too-deep value is a
//! duplicate-key error in both); sorting could only run once the object is complete. The hash is
//! std's randomly keyed SipHash, so crafted keys cannot force collisions; slots carry the parse's
//! generation number, so starting a new parse forgets the old entries in O(1) and the set
//! allocates only when an input needs more slots than any before it.

use super::usize_from;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use super::Node;
use super::string::{Piece, Pieces};

/// Objects with at most this many members check duplicates by a linear scan of earlier keys.
pub(super) const LINEAR_MEMBERS: u32 = 16;

/// One slot: a key node of an object, valid only in the generation that wrote it.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    generation: u32,
    object: u32,
    key: u32,
    hash: u32,
}

/// The keys of the large objects of the current parse.
#[derive(Debug, Clone)]
pub(super) struct KeySet {
    // INVARIANT (power of two): `slots.len()` is 0 or a power of two, at least twice `used`.
    slots: Vec<Slot>,
    used: usize,
    // INVARIANT (generation): never 0 once a parse started; slots from older generations are
    // empty.
    generation: u32,
    hasher: RandomState,
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet {
            slots: Vec::new(),
            used: 0,
            generation: 0,
            hasher: RandomState::new(),
        }
    }
}

/// What [`KeySet::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Insert {
    /// The key is new to its object.
    New,
    /// An earlier key of its object decodes the same.
    Duplicate,
    /// A node index was out of range (unreachable): the caller refuses the input.
    Broken,
}

impl KeySet {
    /// Forgets every key, in O(1) (O(slots) once every 2³² parses).
    pub(super) fn reset(&mut self) {
        self.used = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.fill(Slot::default());
            self.generation = 1;
        }
    }

    /// Adds key node `key` of object node `object`; says whether an earlier key of that object
    /// decodes to the same string (and then adds nothing).
    pub(super) fn insert(&mut self, object: u32, key: u32, bytes: &[u8], nodes: &[Node]) -> Insert {
        let Some(node) = nodes.get(usize_from(key)) else {
            return Insert::Broken;
        };
        let hash = self.hash(object, bytes, node);
        if (self.used + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len().wrapping_sub(1);
        let mut index = usize_from(hash) & mask;
        loop {
            let Some(slot) = self.slots.get_mut(index) else {
                return Insert::Broken;
            };
            if slot.generation != self.generation {
                *slot = Slot {
                    generation: self.generation,
                    object,
                    key,
                    hash,
                };
                self.used += 1;
                return Insert::New;
            }
            if slot.object == object && slot.hash == hash {
                let Some(earlier) = nodes.get(usize_from(slot.key)) else {
                    return Insert::Broken;
                };
                if super::keys_equal(bytes, earlier, node) {
                    return Insert::Duplicate;
                }
            }
            index = (index + 1) & mask;
        }
    }

    /// Doubles the slots (at least 64) and re-inserts the current generation's entries.
    #[cold]
    fn grow(&mut self) {
        let len = (self.slots.len() * 2).max(64);
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); len]);
        let mask = len - 1;
        for slot in old.into_iter().filter(|s| s.generation == self.generation) {
            let mut index = usize_from(slot.hash) & mask;
            while let Some(target) = self.slots.get_mut(index) {
                if target.generation != self.generation {
                    *target = slot;
                    break;
                }
                index = (index + 1) & mask;
            }
        }
    }

    /// The hash of (object, decoded key): the keyed SipHash of the decoded key (escaped keys
    /// hash their decoded bytes piece by piece, which SipHash's streaming `write` makes equal to
    /// hashing them in one go), then the object mixed in by a multiply. Keeping the object out
    /// of the SipHash input spares a second streaming `write` per key (~70 instructions); mixing
    /// it in afterwards still sends the same name in different objects to different slots, and
    /// what a caller controls (the names) still goes through the keyed hash.
    fn hash(&self, object: u32, bytes: &[u8], node: &Node) -> u32 {
        let mut hasher = self.hasher.build_hasher();
        let body = node.body(bytes);
        if node.escaped() {
            for piece in Pieces::new(body) {
                match piece {
                    Piece::Raw(raw) => hasher.write(raw),
                    Piece::Char(ch) => hasher.write(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                }
            }
        } else {
            hasher.write(body);
        }
        let [a, b, c, d, ..] = hasher.finish().to_le_bytes();
        u32::from_le_bytes([a, b, c, d]) ^ object.wrapping_mul(0x9E37_79B9)
    }
}
