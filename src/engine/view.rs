//! A request borrowed for one decision, whatever it was parsed into.
//!
//! [`RequestView`] holds the fields of a [`Request`] (a request built in memory or from a session
//! line) or of a request read straight from its bytes into a [`crate::tape`], as borrowed strings
//! and [`JsonRef`]s. The decision procedure reads only views, so both ways in decide alike.

use std::borrow::Cow;

use serde_json::Value;

use super::request::Request;
use crate::bytes::bytes_eq;
use crate::tape::{Kind, NodeRef};
use crate::vm::Json;

/// The fields of one request, borrowed; `J` is the document type of its JSON fields.
#[derive(Debug, Clone)]
pub(crate) struct RequestView<'r, J> {
    /// The calling skill's name.
    pub skill: Cow<'r, str>,
    /// The manifest hash the caller expects, if given.
    pub skill_hash: Option<Cow<'r, str>>,
    /// The operation.
    pub operation: Cow<'r, str>,
    /// The resource.
    pub resource: Cow<'r, str>,
    /// The payload (`null` when absent).
    pub payload: J,
    /// The agent identity (`null` when absent).
    pub agent: J,
    /// The caller's context (`null` when absent).
    pub context: J,
    /// The transaction, if named.
    pub transaction: Option<Cow<'r, str>>,
    /// The grant token, if presented.
    pub grant: Option<Cow<'r, str>>,
    /// The autonomy score as sent (absent or `null` is `None`).
    pub autonomy: Option<J>,
    /// The call's time, if given.
    pub time: Option<Cow<'r, str>>,
}

impl Request {
    /// This request as a view (borrows everything; allocates nothing).
    #[inline]
    pub(crate) fn view(&self) -> RequestView<'_, &Value> {
        fn text(s: &Option<String>) -> Option<Cow<'_, str>> {
            s.as_deref().map(Cow::Borrowed)
        }
        RequestView {
            skill: Cow::Borrowed(&self.skill),
            skill_hash: text(&self.skill_hash),
            operation: Cow::Borrowed(&self.operation),
            resource: Cow::Borrowed(&self.resource),
            payload: &self.payload,
            agent: &self.agent,
            context: &self.context,
            transaction: text(&self.transaction),
            grant: text(&self.grant),
            autonomy: self.autonomy.as_ref(),
            time: text(&self.time),
        }
    }
}

/// Why a tape could not be read as a request. The caller falls back to [`Request::from_slice`],
/// which gives the precise error, so this only has to be right about *whether* to refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotARequest;

impl<'r> RequestView<'r, NodeRef<'r>> {
    /// Reads a request from a parsed tape with the rules of [`Request::from_slice`]: an object
    /// with string `skill`, `operation` and `resource`, optional strings (`null` = absent)
    /// `skill_hash`, `transaction`, `grant` and `time`, any JSON in `payload`, `agent`, `context`
    /// and `autonomy`, no other member, and `payload`/`agent`/`context` nested at most
    /// `max_depth` levels. Duplicate members were refused by the tape parser.
    pub(crate) fn from_tape(root: NodeRef<'r>, max_depth: usize) -> Result<Self, NotARequest> {
        if root.kind() != Kind::Object {
            return Err(NotARequest);
        }
        let null = NodeRef::null();
        let mut view = RequestView {
            skill: Cow::Borrowed(""),
            skill_hash: None,
            operation: Cow::Borrowed(""),
            resource: Cow::Borrowed(""),
            payload: null,
            agent: null,
            context: null,
            transaction: None,
            grant: None,
            autonomy: None,
            time: None,
        };
        let (mut skill, mut operation, mut resource) = (false, false, false);
        let required = |value: NodeRef<'r>| value.as_str().ok_or(NotARequest);
        let optional = |value: NodeRef<'r>| match value.kind() {
            Kind::Null => Ok(None),
            Kind::String => value.as_str().map(Some).ok_or(NotARequest),
            _ => Err(NotARequest),
        };
        let nested = |value: NodeRef<'r>| {
            if value.depth() > max_depth {
                Err(NotARequest)
            } else {
                Ok(value)
            }
        };
        for (key, value) in root.members() {
            // Compared where it lies unless the name has escapes (then decoded, as the strict
            // parser reads it).
            let member = match key.plain_bytes() {
                Some(name) => Member::named(name),
                None => Member::named(key.as_str().ok_or(NotARequest)?.as_bytes()),
            };
            match member.ok_or(NotARequest)? {
                Member::Skill => {
                    view.skill = required(value)?;
                    skill = true;
                }
                Member::Operation => {
                    view.operation = required(value)?;
                    operation = true;
                }
                Member::Resource => {
                    view.resource = required(value)?;
                    resource = true;
                }
                Member::SkillHash => view.skill_hash = optional(value)?,
                Member::Transaction => view.transaction = optional(value)?,
                Member::Grant => view.grant = optional(value)?,
                Member::Time => view.time = optional(value)?,
                Member::Payload => view.payload = nested(value)?,
                Member::Agent => view.agent = nested(value)?,
                Member::Context => view.context = nested(value)?,
                Member::Autonomy => {
                    view.autonomy = match value.kind() {
                        Kind::Null => None,
                        _ => Some(nested(value)?),
                    }
                }
            }
        }
        if skill && operation && resource {
            Ok(view)
        } else {
            Err(NotARequest)
        }
    }
}

/// The members a request object may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    Skill,
    SkillHash,
    Operation,
    Resource,
    Payload,
    Agent,
    Context,
    Transaction,
    Grant,
    Autonomy,
    Time,
}

impl Member {
    /// The member called `name`, if a request may have it. One comparison per name: dispatched
    /// on the length, then compared in line (a `match` on the strings called `memcmp` for every
    /// candidate of the same length, ~0.4k instructions per request).
    fn named(name: &[u8]) -> Option<Member> {
        let (member, expected): (Member, &[u8]) = match (name.len(), name.first()?) {
            (5, b's') => (Member::Skill, b"skill"),
            (10, _) => (Member::SkillHash, b"skill_hash"),
            (9, b'o') => (Member::Operation, b"operation"),
            (8, b'r') => (Member::Resource, b"resource"),
            (7, b'p') => (Member::Payload, b"payload"),
            (5, b'a') => (Member::Agent, b"agent"),
            (7, b'c') => (Member::Context, b"context"),
            (11, _) => (Member::Transaction, b"transaction"),
            (5, b'g') => (Member::Grant, b"grant"),
            (8, b'a') => (Member::Autonomy, b"autonomy"),
            (4, _) => (Member::Time, b"time"),
            _ => return None,
        };
        bytes_eq(name, expected).then_some(member)
    }
}

#[cfg(test)]
mod tests {
    use super::Member;

    #[test]
    fn request_member_names_are_recognised_exactly() {
        let all = [
            ("skill", Member::Skill),
            ("skill_hash", Member::SkillHash),
            ("operation", Member::Operation),
            ("resource", Member::Resource),
            ("payload", Member::Payload),
            ("agent", Member::Agent),
            ("context", Member::Context),
            ("transaction", Member::Transaction),
            ("grant", Member::Grant),
            ("autonomy", Member::Autonomy),
            ("time", Member::Time),
        ];
        for (name, member) in all {
            assert_eq!(Member::named(name.as_bytes()), Some(member), "{name}");
            // Every one-byte change, a longer and a shorter name are not members.
            for at in 0..name.len() {
                let mut changed = name.as_bytes().to_vec();
                changed[at] ^= 0x20;
                assert_eq!(Member::named(&changed), None, "{name} changed at {at}");
            }
            assert_eq!(Member::named(format!("{name}s").as_bytes()), None);
            assert_eq!(Member::named(&name.as_bytes()[1..]), None);
        }
        assert_eq!(Member::named(b""), None);
    }
}
