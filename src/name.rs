//! [`Name`]: the name of a skill or capability as a decision carries it — a copy, not a
//! reference count, for names a policy declares.
//!
//! A decision names its skill and capability. Carried as `Arc<str>`, every allowed decision
//! would increment and decrement two shared reference counts: four atomic read-modify-writes
//! on the hot path (each waits for the core's pending stores), and one cache line that threads
//! deciding for the same skill take from each other. A policy's names are few and known when
//! it is compiled, so they are interned instead: kept once per process, for its life, and
//! copied as one pointer. Names that come from outside a policy (a request naming an unknown
//! skill, a decision read back from JSON) are never interned — that would let untrusted input
//! grow the process — and are reference-counted.
//!
//! Both ways hold a thin pointer, so a `Name` and an `Option<Name>` are 16 bytes each (a fat
//! `&str` makes them 24, and the `Decision` that moves through every call 16 bytes larger:
//! 1.50-1.53x the from-bytes floor against 1.46-1.48x with the thin pointer, in alternated runs
//! of benches/peers). Reading the text is one more load, which only deny reasons and audit
//! records do.
//!
//! The memory this keeps is the distinct names of every policy the process has compiled or
//! loaded, each once: reloading the same policies adds nothing.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A name that clones without touching a reference count when it was interned.
///
/// Compares, orders and hashes as its text, whichever way it is held, and borrows as `str`
/// (so a `HashMap<Name, _>` is looked up with a `&str`).
#[derive(Clone)]
pub struct Name(Repr);

#[derive(Clone)]
enum Repr {
    /// Interned for the process's life: [`Name::interned`]. A thin pointer (to the kept
    /// `&str`), so that a name is 16 bytes and an `Option<Name>` too: a decision carries two.
    Interned(&'static &'static str),
    /// Any other name (thin for the same reason).
    Shared(Arc<Box<str>>),
}

/// Every interned name, by its text.
static INTERNED: OnceLock<Mutex<HashMap<&'static str, &'static &'static str>>> = OnceLock::new();

impl Name {
    /// The name `text`, interned: the first call with a given text keeps a copy for the rest of
    /// the process's life, and every clone of the result is a copy of a pointer.
    ///
    /// For names a policy declares, which are few; never for text from a request.
    pub fn interned(text: &str) -> Name {
        let names = INTERNED.get_or_init(Mutex::default);
        // A panic while the lock was held cannot leave the map inconsistent: an insert of
        // leaked strings either happened or did not.
        let mut names = names.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&kept) = names.get(text) {
            return Name(Repr::Interned(kept));
        }
        let text: &'static str = Box::leak(Box::from(text));
        let kept: &'static &'static str = Box::leak(Box::new(text));
        names.insert(text, kept);
        Name(Repr::Interned(kept))
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Interned(text) => text,
            Repr::Shared(text) => text,
        }
    }

    /// True when the name is interned (clones are copies).
    pub fn is_interned(&self) -> bool {
        matches!(self.0, Repr::Interned(_))
    }
}

impl Default for Name {
    /// The empty name (a literal: nothing is interned).
    fn default() -> Name {
        Name(Repr::Interned(&""))
    }
}

impl Deref for Name {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Name {
    /// Not interned: see [`Name::interned`].
    fn from(text: &str) -> Name {
        Name(Repr::Shared(Arc::new(Box::from(text))))
    }
}

impl From<String> for Name {
    /// Not interned: see [`Name::interned`].
    fn from(text: String) -> Name {
        Name(Repr::Shared(Arc::new(text.into_boxed_str())))
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Name {
    /// As `str` hashes, as `Borrow<str>` requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Name {
    /// Never interned: the text is input.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Name, D::Error> {
        String::deserialize(deserializer).map(Name::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_keeps_one_copy_per_text() {
        let a = Name::interned("interning_keeps_one_copy_per_text");
        let b = Name::interned(&String::from("interning_keeps_one_copy_per_text"));
        assert!(a.is_interned() && b.is_interned());
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert!(std::ptr::eq(a.clone().as_str(), a.as_str()));
    }

    #[test]
    fn a_name_and_an_optional_name_are_two_words() {
        assert_eq!(std::mem::size_of::<Name>(), 16);
        assert_eq!(std::mem::size_of::<Option<Name>>(), 16);
    }

    #[test]
    fn held_either_way_compares_and_hashes_as_text() {
        let interned = Name::interned("meeting-scheduler");
        let shared = Name::from("meeting-scheduler");
        assert!(!shared.is_interned());
        assert_eq!(interned, shared);
        assert_eq!(interned, "meeting-scheduler");
        let mut set = std::collections::HashSet::new();
        set.insert(interned);
        assert!(set.contains(&shared));
        assert!(set.contains("meeting-scheduler"));
        assert_eq!(shared.to_string(), "meeting-scheduler");
        assert_eq!(format!("{shared:?}"), "\"meeting-scheduler\"");
    }

    #[test]
    fn deserialized_names_are_not_interned() {
        let name: Name = serde_json::from_str("\"from-input\"").unwrap();
        assert!(!name.is_interned());
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"from-input\"");
    }
}
