//! Who is calling, in the gateway modes: identities bound to credentials by configuration.
//!
//! In the gateway modes (the egress proxy, the auth-subrequest dialects, ext_authz and the tower
//! layer) the agent's own request reaches capgate, so `skill`, `agent`, `context` and `autonomy`
//! may not come from it: an agent that set its own `autonomy: 100` or `context.org` would have
//! escalated. They come from an [`Identity`] that the configuration binds to a credential.
//!
//! `--identities FILE` is JSON:
//!
//! ```json
//! {"identities": [
//!   {"credential_sha256": "9f86d08…", "skill": "crm-writer",
//!    "agent": {"id": "agent-7"}, "context": {"org": "acme"}, "autonomy": 60}
//! ]}
//! ```
//!
//! `credential_sha256` is the SHA-256 of the credential, in hex: the file holds no credential
//! (`printf %s "$TOKEN" | sha256sum`). A credential is looked up by its digest.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::credential::{TokenDigest, digest};

/// The largest identities file read, in bytes.
const MAX_IDENTITIES_BYTES: u64 = 16 << 20;

/// What the configuration says about one caller.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The skill its calls are decided for.
    pub skill: String,
    /// The request's `agent`.
    #[serde(default)]
    pub agent: Value,
    /// The request's `context`.
    #[serde(default)]
    pub context: Value,
    /// The request's `autonomy` (0–100).
    #[serde(default)]
    pub autonomy: u8,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    credential_sha256: String,
    #[serde(flatten)]
    identity: Identity,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    identities: Vec<Entry>,
}

/// Why an identities file was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The file cannot be read or is too large.
    #[error("cannot read the identities file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The file is not the format above.
    #[error("identities file {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong, with the entry's index.
        reason: String,
    },
}

/// The identities, by the digest of their credential.
#[derive(Debug, Clone, Default)]
pub struct Identities {
    by_digest: HashMap<TokenDigest, Identity>,
}

impl Identities {
    /// Reads an identities file.
    ///
    /// # Errors
    /// The file cannot be read, is over 16 MiB, is not the format above, has an autonomy over
    /// 100, a digest that is not 64 hex digits, or the same digest twice.
    pub fn load(path: &Path) -> Result<Self, IdentityError> {
        let shown = path.display().to_string();
        let read = |reason: String| IdentityError::Read {
            path: shown.clone(),
            reason,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| read(e.to_string()))?
            .len();
        if size > MAX_IDENTITIES_BYTES {
            return Err(read(format!("larger than {MAX_IDENTITIES_BYTES} bytes")));
        }
        let text = std::fs::read(path).map_err(|e| read(e.to_string()))?;
        Self::parse(&text).map_err(|reason| IdentityError::Invalid {
            path: shown,
            reason,
        })
    }

    /// Parses the JSON of an identities file.
    ///
    /// # Errors
    /// As [`Identities::load`], without the file.
    pub fn parse(text: &[u8]) -> Result<Self, String> {
        let file: File = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        let mut by_digest = HashMap::new();
        for (index, entry) in file.identities.into_iter().enumerate() {
            let digest = parse_digest(&entry.credential_sha256).ok_or_else(|| {
                format!("identities[{index}]: credential_sha256 is not 64 hex digits")
            })?;
            if entry.identity.autonomy > 100 {
                return Err(format!("identities[{index}]: autonomy is over 100"));
            }
            if by_digest.insert(digest, entry.identity).is_some() {
                return Err(format!("identities[{index}]: the same credential twice"));
            }
        }
        Ok(Identities { by_digest })
    }

    /// The identity bound to `credential`, if any.
    pub fn lookup(&self, credential: &[u8]) -> Option<&Identity> {
        self.by_digest.get(&digest(credential))
    }

    /// How many identities there are.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

fn parse_digest(hex: &str) -> Option<TokenDigest> {
    let bytes = hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut digest = [0_u8; 32];
    for (slot, pair) in digest.iter_mut().zip(bytes.chunks_exact(2)) {
        let text = std::str::from_utf8(pair).ok()?;
        *slot = u8::from_str_radix(text, 16).ok()?;
    }
    Some(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(token: &str) -> String {
        digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn a_credential_finds_its_identity_by_digest() {
        let text = format!(
            r#"{{"identities": [{{"credential_sha256": "{}", "skill": "crm-writer", "context": {{"org": "acme"}}, "autonomy": 60}}]}}"#,
            hex("agent-7-secret")
        );
        let identities = Identities::parse(text.as_bytes()).unwrap();
        let found = identities.lookup(b"agent-7-secret").unwrap();
        assert_eq!(found.skill, "crm-writer");
        assert_eq!(found.context["org"], "acme");
        assert_eq!(found.autonomy, 60);
        assert!(identities.lookup(b"agent-7-secreT").is_none());
    }

    #[test]
    fn bad_files_are_refused_with_the_entry() {
        let cases = [
            (
                r#"{"identities": [{"credential_sha256": "abc", "skill": "s"}]}"#.to_owned(),
                "64 hex",
            ),
            (
                format!(
                    r#"{{"identities": [{{"credential_sha256": "{}", "skill": "s", "autonomy": 101}}]}}"#,
                    hex("t")
                ),
                "over 100",
            ),
            (
                format!(
                    r#"{{"identities": [{{"credential_sha256": "{0}", "skill": "s"}}, {{"credential_sha256": "{0}", "skill": "t"}}]}}"#,
                    hex("t")
                ),
                "identities[1]",
            ),
            (
                format!(
                    r#"{{"identities": [{{"credential_sha256": "{}", "skill": "s", "role": "admin"}}]}}"#,
                    hex("t")
                ),
                "unknown field",
            ),
        ];
        for (text, expected) in cases {
            let error = Identities::parse(text.as_bytes()).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }
}
