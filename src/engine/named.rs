//! What a refused request names, read leniently for its deny and audit record.

use crate::name::Name;

/// What a refused request names — its `skill`, `operation` and `resource`, each `""` when it
/// names none — for its deny and audit record. Untrusted text, never used to decide.
#[derive(Debug, Clone, Default)]
pub(super) struct Named {
    pub(super) skill: Name,
    pub(super) operation: String,
    pub(super) resource: String,
}

impl Named {
    /// What `value` names.
    pub(super) fn from_value(value: &serde_json::Value) -> Named {
        let text = |name: &str| value.get(name).and_then(|s| s.as_str()).unwrap_or("");
        Named {
            skill: Name::from(text("skill")),
            operation: text("operation").to_owned(),
            resource: text("resource").to_owned(),
        }
    }

    /// What `bytes` name, read leniently (a duplicate member, the usual reason for a refusal,
    /// does not stop it: the last one is read, as most parsers would); nothing when they are
    /// not JSON at all.
    pub(super) fn from_slice(bytes: &[u8]) -> Named {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .map(|value| Named::from_value(&value))
            .unwrap_or_default()
    }
}
