//! The engine's index of a policy set: each skill by name, through a hash built for names.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bytecode::program::CompiledSkill;
use crate::name::Name;
use crate::span::SourceMap;

use super::PolicySet;

/// A word-at-a-time multiplicative hash (FxHash's step) for the skill index. Its keys come
/// from the loaded policies (trusted), so the flooding resistance of SipHash buys nothing
/// there; lookups by a request's skill name only read the table. Not FNV-1a, whose one multiply
/// per byte is a dependency chain: 18 multiplies to hash `meeting-scheduler` (and its
/// terminator) against 4 here.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct NameHash(u64);

impl NameHash {
    #[inline(always)]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for NameHash {
    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the most entropy in the high bits; the table picks buckets from
        // the low ones.
        self.0.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buffer = [0; 8];
            buffer.copy_from_slice(word);
            self.mix(u64::from_le_bytes(buffer));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buffer = [0; 8];
            if let Some(head) = buffer.get_mut(..rest.len()) {
                head.copy_from_slice(rest);
            }
            self.mix(u64::from_le_bytes(buffer));
        }
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.mix(u64::try_from(value).unwrap_or(u64::MAX));
    }
}

pub(super) type NameHashBuild = std::hash::BuildHasherDefault<NameHash>;

/// The loaded skills, indexed by name for O(1) lookup.
#[derive(Debug)]
pub struct SkillIndex {
    pub(super) skills: Vec<Arc<CompiledSkill>>,
    pub(super) by_name: HashMap<Name, usize, NameHashBuild>,
    pub(super) sources: SourceMap,
}

impl SkillIndex {
    pub(super) fn new(loaded: PolicySet) -> Self {
        let skills: Vec<Arc<CompiledSkill>> = loaded.skills.into_iter().map(Arc::new).collect();
        let by_name = skills
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        SkillIndex {
            skills,
            by_name,
            sources: loaded.sources,
        }
    }

    /// The skill named `name`.
    pub fn skill(&self, name: &str) -> Option<&Arc<CompiledSkill>> {
        self.by_name.get(name).and_then(|&i| self.skills.get(i))
    }

    /// Every skill, in load order.
    pub fn skills(&self) -> &[Arc<CompiledSkill>] {
        &self.skills
    }

    /// The source files the policy came from.
    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }
}

/// The (skill, capability) pairs of `old` that `new` lacks.
pub(super) fn removed_capabilities(old: &SkillIndex, new: &SkillIndex) -> Vec<(Name, Name)> {
    let mut removed = Vec::new();
    for skill in old.skills() {
        let kept = new.skill(&skill.name);
        for capability in &skill.capabilities {
            if kept.is_none_or(|kept| kept.capability(&capability.name).is_none()) {
                removed.push((skill.name.clone(), capability.name.clone()));
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash of `name` as the skill index computes it.
    fn name_hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        NameHashBuild::default().hash_one(name)
    }

    #[test]
    fn skill_names_spread_over_the_low_bits_the_table_picks_buckets_from() {
        // Names that differ only in their last bytes, in their first bytes, or in length.
        let families: [&dyn Fn(usize) -> String; 3] = [
            &|i| format!("calendar-skill-{i}"),
            &|i| format!("{i}-calendar-skill"),
            &|i| "s".repeat(i % 40 + 1) + &(i / 40).to_string(),
        ];
        for family in families {
            let buckets: std::collections::HashSet<u64> =
                (0..4096).map(|i| name_hash(&family(i)) & 1023).collect();
            // 4,096 uniform hashes fill ~1,005 of 1,024 buckets.
            assert!(buckets.len() > 950, "{} of 1024 buckets", buckets.len());
        }
        assert_ne!(name_hash("ab"), name_hash("ba"));
        assert_ne!(name_hash(""), name_hash("a"));
    }
}
