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
//! duplicate-key error in both); sorting could only run once the object is complete. Slots carry
//! the parse's generation number, so starting a new parse forgets the old entries in O(1) and the
//! set allocates only when an input needs more slots than any before it.
//!
//! The hash is adaptive. Each parse starts with foldhash (seeded at random), about a tenth of
//! SipHash's cost on a short key. foldhash does not claim to resist crafted collisions, so the
//! set switches the parse to std's randomly keyed SipHash — re-hashing the keys it holds, which it
//! lists as it goes, and keeping SipHash until the next parse — on either sign of an attack:
//! - the parse's inserts overrun a budget of probed slots, [`PROBES_PER_KEY`] per key held plus
//!   [`PROBE_SLACK`] (random keys at the set's load, at most half full, probe fewer than two slots
//!   per insert on average), or
//! - comparisons of different keys of one object that have the same 32-bit hash overrun a
//!   budget of bytes: each charges both keys' lengths (a decoded comparison may scan either to
//!   its end), and the parse may spend the length of the keys it holds plus [`COMPARE_SLACK`]. Honest keys rarely share a hash (n keys make about
//!   n²/2³³ such pairs: 0.3 for 50,000 keys), and crafted ones cost their bytes.
//!
//! Keys crafted to collide so cost at most the two budgets and one re-hash of the keys held: a
//! parse stays linear in its input, in probes and in bytes compared.
//!
//! A parse that refuses case variants ([`super::Repeats::CaseFolded`]) hashes each key's simple
//! case folding (a plain ASCII key's bytes in lower case, any other key's characters folded one
//! by one), so keys equal up to case meet in one slot, where the first such pair ends the parse:
//! many case variants of one name cost no more than one.

use crate::convert::usize_from;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use foldhash::fast::RandomState as FastState;

use super::Node;
use super::string::{DecodedBytes, decoded_chars};

/// Objects with at most this many members check duplicates by a linear scan of earlier keys.
pub(super) const LINEAR_MEMBERS: u32 = 16;

/// Slots the fast hash may probe per key held before the set switches to SipHash.
const PROBES_PER_KEY: usize = 16;
/// Slots the fast hash may probe beyond [`PROBES_PER_KEY`] per key.
const PROBE_SLACK: usize = 64;
/// Bytes that comparisons of same-hash keys may cost beyond the length of the keys held.
const COMPARE_SLACK: usize = 1024;

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
    // INVARIANT (power of two): `slots.len()` is 0 or a power of two, at least twice the keys
    // held (`entries.len()`).
    slots: Vec<Slot>,
    // INVARIANT (generation): never 0 once a parse started; slots from older generations are
    // empty.
    generation: u32,
    /// Slots probed by the current generation's inserts.
    probes: usize,
    /// The length (in input bytes) of the keys held in the current generation.
    key_bytes: usize,
    /// Bytes charged by comparisons of different keys with one hash in the current generation.
    compared: usize,
    /// The current generation hashes with `strong` (an attack was suspected).
    hardened: bool,
    /// The current generation hashes keys case-folded and finds case variants.
    fold: bool,
    /// The (object, key node) pairs held in the current generation: the keys to re-hash when
    /// switching to SipHash, and their count.
    entries: Vec<(u32, u32)>,
    fast: FastState,
    strong: RandomState,
    /// Tests only: replaces the fast hash of every key (to force collisions).
    #[cfg(test)]
    collide: Option<fn(u32) -> u32>,
}

impl Default for KeySet {
    fn default() -> Self {
        KeySet {
            slots: Vec::new(),
            generation: 0,
            probes: 0,
            key_bytes: 0,
            compared: 0,
            hardened: false,
            fold: false,
            entries: Vec::new(),
            fast: FastState::default(),
            strong: RandomState::new(),
            #[cfg(test)]
            collide: None,
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
    /// An earlier key of its object is equal to it under simple case folding (only when the
    /// parse folds).
    CaseVariant,
    /// A node index was out of range (unreachable): the caller refuses the input.
    Broken,
}

impl KeySet {
    /// Forgets every key, in O(1) (O(slots) once every 2³² parses); the next parse finds case
    /// variants when `fold`.
    pub(super) fn reset(&mut self, fold: bool) {
        self.probes = 0;
        self.key_bytes = 0;
        self.compared = 0;
        self.hardened = false;
        self.fold = fold;
        self.entries.clear();
        self.next_generation();
    }

    /// Empties every slot in O(1) (O(slots) once every 2³² calls).
    fn next_generation(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.fill(Slot::default());
            self.generation = 1;
        }
    }

    /// Adds key node `key` of object node `object`; says whether an earlier key of that object
    /// decodes to the same string, or (when folding) to a case variant of it, and then adds
    /// nothing.
    pub(super) fn insert(&mut self, object: u32, key: u32, bytes: &[u8], nodes: &[Node]) -> Insert {
        let Some(node) = nodes.get(usize_from(key)) else {
            return Insert::Broken;
        };
        let hash = self.hash(object, bytes, node);
        if (self.entries.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len().wrapping_sub(1);
        let mut index = usize_from(hash) & mask;
        loop {
            self.probes += 1;
            if !self.hardened && self.probes > PROBES_PER_KEY * self.entries.len() + PROBE_SLACK {
                return self.harden_and_insert(object, key, bytes, nodes);
            }
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
                self.key_bytes += key_len(node);
                self.entries.push((object, key));
                return Insert::New;
            }
            if slot.object == object && slot.hash == hash {
                let Some(earlier) = nodes.get(usize_from(slot.key)) else {
                    return Insert::Broken;
                };
                if super::keys_equal(bytes, earlier, node) {
                    return Insert::Duplicate;
                }
                if self.fold && super::keys_fold_equal(bytes, earlier, node) {
                    return Insert::CaseVariant;
                }
                // Two keys of one object with one 32-bit hash: their comparison costs up to
                // both keys' lengths (a decoded comparison scans a raw run to its end), which
                // the probe budget does not count.
                self.compared += key_len(node) + key_len(earlier) + 1;
                if !self.hardened && self.compared > self.key_bytes + COMPARE_SLACK {
                    return self.harden_and_insert(object, key, bytes, nodes);
                }
            }
            index = (index + 1) & mask;
        }
    }

    /// Switches the current generation to SipHash, then inserts as [`KeySet::insert`] does.
    #[cold]
    #[inline(never)]
    fn harden_and_insert(&mut self, object: u32, key: u32, bytes: &[u8], nodes: &[Node]) -> Insert {
        match self.harden(bytes, nodes) {
            Some(()) => self.insert(object, key, bytes, nodes),
            None => Insert::Broken,
        }
    }

    /// Switches the current generation to SipHash: empties the slots (a new generation, O(1))
    /// and re-inserts the keys it held from `entries`, so the cost is that of the keys, not of
    /// the table (which keeps the size of the largest parse before). `None` if a key node is out
    /// of range (unreachable: the caller refuses the input).
    fn harden(&mut self, bytes: &[u8], nodes: &[Node]) -> Option<()> {
        self.hardened = true;
        self.next_generation();
        let mask = self.slots.len().wrapping_sub(1);
        for &(object, key) in &self.entries {
            let hash = self.hash(object, bytes, nodes.get(usize_from(key))?);
            let mut index = usize_from(hash) & mask;
            while let Some(target) = self.slots.get_mut(index) {
                if target.generation != self.generation {
                    *target = Slot {
                        generation: self.generation,
                        object,
                        key,
                        hash,
                    };
                    break;
                }
                index = (index + 1) & mask;
            }
        }
        Some(())
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

    /// The hash of (object, decoded key): the keyed hash (foldhash, or SipHash once hardened)
    /// of the object and the decoded (when folding, the case-folded) key.
    #[inline(always)]
    fn hash(&self, object: u32, bytes: &[u8], node: &Node) -> u32 {
        let key = if self.hardened {
            key_hash(self.strong.build_hasher(), object, bytes, node, self.fold)
        } else {
            let fast = key_hash(self.fast.build_hasher(), object, bytes, node, self.fold);
            #[cfg(test)]
            if let Some(collide) = self.collide {
                let [a, b, c, d, ..] = fast.to_le_bytes();
                return collide(u32::from_le_bytes([a, b, c, d]));
            }
            fast
        };
        let [a, b, c, d, ..] = key.to_le_bytes();
        u32::from_le_bytes([a, b, c, d])
    }
}

/// The length of a key node's body in the input.
#[inline(always)]
fn key_len(node: &Node) -> usize {
    usize_from(node.end.saturating_sub(node.start))
}

/// The bytes [`key_hash`] hands its hasher in one `write`.
const CHUNK: usize = 16;

/// `hasher`'s hash of object node `object` and the decoded key of `node`, the key written in
/// chunks of [`CHUNK`] bytes (the last shorter, none empty): foldhash's `write` hashes each
/// call's bytes as a unit, so an escaped key's decoded bytes must reach it in the same calls as
/// an equal unescaped key's. Most keys are one chunk. The object goes through the keyed hash
/// too: mixed in afterwards by a public multiply, it would let an input place its objects at
/// node indices that send the same names in every object to one block of slots, under SipHash
/// as well (`regression_objects_placed_at_chosen_node_indices_do_not_cluster_their_keys`).
///
/// With `fold`, the key's simple case folding is hashed instead, in the same chunks of its
/// bytes: a plain ASCII key's bytes in lower case, any other key's characters folded one by one,
/// so that case variants hash alike whichever way they are written.
#[inline(always)]
fn key_hash(mut hasher: impl Hasher, object: u32, bytes: &[u8], node: &Node, fold: bool) -> u64 {
    hasher.write_u32(object);
    let body = node.body(bytes);
    if fold {
        if node.plain_ascii() {
            write_chunked(&mut hasher, body.iter().map(u8::to_ascii_lowercase));
        } else {
            write_chunked(&mut hasher, folded_bytes(body));
        }
    } else if node.escaped() {
        write_chunked(&mut hasher, DecodedBytes::new(body));
    } else if body.len() <= CHUNK {
        if !body.is_empty() {
            hasher.write(body);
        }
    } else {
        for chunk in body.chunks(CHUNK) {
            hasher.write(chunk);
        }
    }
    hasher.finish()
}

/// Hands `hasher` the bytes of `key` in chunks of [`CHUNK`] (the last shorter, none empty), as
/// [`key_hash`] writes a plain key.
#[inline(always)]
fn write_chunked(hasher: &mut impl Hasher, key: impl Iterator<Item = u8>) {
    let mut chunk = [0; CHUNK];
    let mut len = 0;
    for byte in key {
        if let Some(slot) = chunk.get_mut(len) {
            *slot = byte;
        }
        len += 1;
        if len == CHUNK {
            hasher.write(&chunk);
            len = 0;
        }
    }
    if len > 0 {
        hasher.write(chunk.get(..len).unwrap_or_default());
    }
}

/// The UTF-8 bytes of the simple case folding of the string with body `body`, decoded.
fn folded_bytes(body: &[u8]) -> impl Iterator<Item = u8> + '_ {
    decoded_chars(body).flat_map(|c| {
        let folded = crate::fold::fold_char(c);
        let mut buffer = [0; 4];
        let len = folded.encode_utf8(&mut buffer).len();
        buffer.into_iter().take(len)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::sync::atomic::{AtomicU32, Ordering};

    use super::super::{ErrorKind, Tape};
    use super::{CHUNK, COMPARE_SLACK, LINEAR_MEMBERS, PROBE_SLACK, PROBES_PER_KEY};
    use crate::convert::usize_from;

    /// An object of `count` members `"{prefix}{i}": i`, then `extra` before the closing brace.
    fn object(prefix: &str, count: usize, extra: &str) -> String {
        let members: Vec<String> = (0..count)
            .map(|i| format!(r#""{prefix}{i}":{i}"#))
            .collect();
        format!("{{{}{extra}}}", members.join(","))
    }

    /// Distinct hashes that all pick the same slot (low 16 bits zero), for the probe budget.
    fn same_slot(_fast: u32) -> u32 {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed) << 16
    }

    /// One hash for every key.
    fn same_hash(_fast: u32) -> u32 {
        0
    }

    #[test]
    fn keys_crafted_into_one_cluster_spend_the_budget_then_switch_to_siphash() {
        let count = 2_000;
        let mut tape = Tape::new();
        tape.keys.collide = Some(same_slot);
        let text = object("k", count, "");
        let doc = tape.parse(text.as_bytes(), 10).unwrap();
        assert_eq!(doc.root().len(), count);
        assert!(tape.keys.hardened);
        // Every key probing the one cluster would take count²/2 = 2,000,000 probes; the switch
        // caps the fast hash's share at the budget.
        let budget = PROBES_PER_KEY * count + PROBE_SLACK;
        assert!(tape.keys.probes < 2 * budget, "{} probes", tape.keys.probes);

        // Duplicates are still found after the switch, escaped or not, and the next parse
        // starts with the fast hash again.
        for key in ["k1500", r"k15\u0030\u0030", "k7"] {
            let text = object("k", count, &format!(r#","{key}":true"#));
            let error = tape.parse(text.as_bytes(), 10).unwrap_err();
            assert!(
                matches!(&error.kind, ErrorKind::DuplicateKey(name) if name.starts_with("k")),
                "{key}: {error}"
            );
            assert!(tape.keys.hardened);
        }
        // The k-th key of one cluster probes k slots, within the budget up to 18 keys.
        let small = usize::try_from(LINEAR_MEMBERS).unwrap() + 2;
        assert!((1..=small).all(|k| k * (k + 1) / 2 <= PROBES_PER_KEY * (k - 1) + PROBE_SLACK));
        tape.parse(object("k", small, "").as_bytes(), 10).unwrap();
        assert!(!tape.keys.hardened, "{small} keys stay within the budget");
    }

    #[test]
    fn regression_comparing_keys_with_one_hash_costs_at_most_their_bytes() {
        // Found by review: the budget counted probes, and a probe that meets a key with the same
        // hash compares the two keys' bytes, so long colliding keys cost their length on every
        // such probe (input^1.5). Those comparisons charge a budget of bytes — the length of
        // the keys held — and overrunning it switches the parse to SipHash.
        let mut tape = Tape::new();
        tape.keys.collide = Some(same_hash);
        let long = "x".repeat(10_000);
        let members = 200;
        let text = object(&long, members, "");
        tape.parse(text.as_bytes(), 10).unwrap();
        assert!(tape.keys.hardened, "{members} long keys with one hash");
        let (compared, held) = (tape.keys.compared, tape.keys.key_bytes);
        // Without the budget: every key compared with every earlier one, ~200²/2 × 10 KB.
        assert!(
            compared <= held + COMPARE_SLACK + 2 * (long.len() + 4),
            "{compared} bytes compared for {held} bytes of keys"
        );
        let text = object("k", members, r#","k3":0"#);
        assert!(
            tape.parse(text.as_bytes(), 10).is_err(),
            "duplicates still found"
        );
    }

    #[test]
    fn regression_a_comparison_is_charged_the_earlier_keys_length_too() {
        // Found by review: a decoded comparison scans a raw run to its end, so a short key
        // compared with a long escaped one costs the long one's length; it was charged the
        // short key's.
        let mut tape = Tape::new();
        tape.keys.collide = Some(same_hash);
        let long = format!(r"\u0041{}", "x".repeat(100_000));
        let text = object("A", 40, &format!(r#","{long}":0"#)).replacen(
            '{',
            &format!(r#"{{"{long}":0,"#),
            1,
        );
        let error = tape.parse(text.as_bytes(), 10).unwrap_err();
        assert!(matches!(error.kind, ErrorKind::DuplicateKey(_)), "{error}");
        let text = object("A", 40, "").replacen('{', &format!(r#"{{"{long}":0,"#), 1);
        tape.parse(text.as_bytes(), 10).unwrap();
        assert!(tape.keys.hardened);
        assert!(
            tape.keys.compared > 100_000,
            "{} bytes charged",
            tape.keys.compared
        );
    }

    #[test]
    fn regression_objects_placed_at_chosen_node_indices_do_not_cluster_their_keys() {
        // Found by review: the object was mixed into a key's hash by a public multiply, after the
        // keyed hash of the name, so an input that padded an array to put each object at a node
        // index `o` with `o * 0x9E37_79B9` in a narrow window of slots sent the same name in
        // every object to one block — under SipHash too, where no budget applies.
        let mut tape = Tape::new();
        tape.parse(object("k", 20_000, "").as_bytes(), 10).unwrap();
        let mask = tape.keys.slots.len() - 1;
        let (objects, window) = (600_usize, 150_usize);
        let record = object("field", 17, "");
        let mut text = String::from("[");
        let mut next = 1_usize; // the array is node 0
        for i in 0..objects {
            let mut at = next;
            while usize_from(u32::try_from(at).unwrap().wrapping_mul(0x9E37_79B9)) & mask >= window
            {
                at += 1;
            }
            for _ in next..at {
                text.push_str("0,");
            }
            text.push_str(&record);
            text.push(if i + 1 < objects { ',' } else { ']' });
            next = at + 1 + 2 * 17;
        }
        tape.parse(text.as_bytes(), 10).unwrap();
        let keys = objects * 17;
        assert!(
            tape.keys.probes < 8 * keys,
            "{} probes for {keys} keys",
            tape.keys.probes
        );
    }

    #[test]
    fn regression_switching_to_siphash_costs_the_keys_held_not_the_table() {
        // Found by review: the switch re-hashed by scanning (and reallocating) the whole table,
        // which keeps the size of the largest parse before — 1 M slots after one large
        // document made every later switch cost 16 MiB. A switch re-inserts the listed keys.
        let mut tape = Tape::new();
        tape.parse(object("k", 300_000, "").as_bytes(), 10).unwrap();
        let (slots, len) = (tape.keys.slots.as_ptr(), tape.keys.slots.len());
        assert!(len >= 600_000);
        tape.keys.collide = Some(same_hash);
        tape.parse(object("k", 40, "").as_bytes(), 10).unwrap();
        assert!(tape.keys.hardened);
        assert_eq!(tape.keys.entries.len(), 40);
        assert_eq!(
            (tape.keys.slots.as_ptr(), tape.keys.slots.len()),
            (slots, len),
            "the table is neither copied nor reallocated"
        );
    }

    #[test]
    fn random_keys_never_leave_the_fast_hash() {
        let mut tape = Tape::new();
        for count in [17, 100, 5_000, 50_000] {
            let text = object("member-", count, "");
            tape.parse(text.as_bytes(), 10).unwrap();
            assert!(!tape.keys.hardened, "{count} members");
        }
    }

    #[test]
    fn escaped_and_plain_spellings_of_long_keys_hash_alike() {
        // Keys longer than a chunk, with the escape before, across and after chunk boundaries:
        // each must collide with its plain spelling in an object past the linear scan.
        let plain = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH";
        assert!(plain.len() > 2 * CHUNK);
        let mut tape = Tape::new();
        for at in 0..plain.len() {
            let (before, rest) = plain.split_at(at);
            let mut chars = rest.chars();
            let escaped_char = chars.next().unwrap();
            let escaped = format!(
                r"{before}\u{:04x}{}",
                u32::from(escaped_char),
                chars.as_str()
            );
            for (first, second) in [(plain, escaped.as_str()), (escaped.as_str(), plain)] {
                let text = object("k", 40, &format!(r#","{first}":1,"{second}":2"#));
                let error = tape.parse(text.as_bytes(), 10).unwrap_err();
                assert!(
                    matches!(&error.kind, ErrorKind::DuplicateKey(name) if name == plain),
                    "escape at {at}: {error}"
                );
            }
            // A two-byte character escaped as `\u00e9` is one key with its raw spelling, too.
            let text = object("k", 40, &format!(r#","{before}é":1,"{before}\u00e9":2"#));
            assert!(tape.parse(text.as_bytes(), 10).is_err(), "é at {at}");
        }
    }
}
