//! A skill's revision: the SHA-256 of its canonical manifest.
//!
//! [`Revision`] is what grants are pinned to (SPEC §5.2), what audit records name, and what a
//! `.capc` file is checked against at load. The canonical manifest is the skill's JSON manifest
//! form written compactly, object keys in byte order at every depth (`manifest::CanonicalSkill`;
//! `docs/semantics.md` says which bytes exactly); source positions, comments and formatting are
//! not part of it, so reformatting a policy keeps its revision and any change of meaning gives
//! another.
//!
//! The text form is `sha256:` followed by 64 lower-case hex digits, the form of a manifest's
//! `hash` (`contentHash`).

use std::fmt;

use serde::{Serialize, Serializer};
use sha2::{Digest, Sha256};

/// The SHA-256 of a skill's canonical manifest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Revision([u8; 32]);

impl Revision {
    /// What the text form starts with.
    pub const PREFIX: &'static str = "sha256:";

    /// The length of the text form: the prefix and 64 hex digits.
    pub const TEXT_LEN: usize = Self::PREFIX.len() + 64;

    /// The revision of a skill whose canonical manifest is `canonical`.
    pub fn of_manifest(canonical: &[u8]) -> Revision {
        Revision(Sha256::digest(canonical).into())
    }

    /// A revision from its 32 bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Revision {
        Revision(bytes)
    }

    /// The 32 bytes of the hash.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The text form, `sha256:` and 64 lower-case hex digits, without allocating.
    pub fn text(&self) -> [u8; Self::TEXT_LEN] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; Self::TEXT_LEN];
        let (prefix, digits) = out.split_at_mut(Self::PREFIX.len());
        prefix.copy_from_slice(Self::PREFIX.as_bytes());
        for (pair, byte) in digits.chunks_exact_mut(2).zip(self.0) {
            if let [high, low] = pair {
                *high = HEX.get(usize::from(byte >> 4)).copied().unwrap_or(b'0');
                *low = HEX.get(usize::from(byte & 0xf)).copied().unwrap_or(b'0');
            }
        }
        out
    }

    /// Reads the text form (lower- or upper-case hex); `None` for anything else.
    pub fn parse(text: &str) -> Option<Revision> {
        let digits = text.strip_prefix(Self::PREFIX)?.as_bytes();
        if digits.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
            let [high, low] = pair else { return None };
            *byte = (hex_value(*high)? << 4) | hex_value(*low)?;
        }
        Some(Revision(bytes))
    }
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.text();
        // The text is ASCII by construction.
        f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Revision({self})")
    }
}

impl Serialize for Revision {
    /// As its text form.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::Revision;

    #[test]
    fn the_revision_is_the_sha256_of_the_manifest_bytes() {
        // FIPS 180-2's example: SHA-256("abc").
        assert_eq!(
            Revision::of_manifest(b"abc").to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_text_form_reads_back() {
        let revision = Revision::of_manifest(b"{\"skill\":{}}");
        let text = revision.to_string();
        assert_eq!(text.len(), Revision::TEXT_LEN);
        assert_eq!(Revision::parse(&text), Some(revision));
        assert_eq!(
            Revision::parse(&text.to_uppercase().replace("SHA256", "sha256")),
            Some(revision)
        );
        for bad in [
            "",
            "sha256:",
            "sha256:ab",
            &text[1..],
            &format!("{text}0"),
            &text.replace("sha256:", "sha512:"),
        ] {
            assert_eq!(Revision::parse(bad), None, "{bad}");
        }
        assert_eq!(
            serde_json::to_string(&revision).unwrap_or_default(),
            format!("\"{text}\"")
        );
    }
}
