//! A request borrowed for one decision, whatever it was parsed into.
//!
//! [`RequestView`] holds the fields of a [`Request`] (a request built in memory or from a session
//! line) or of a request read straight from its bytes into a [`crate::tape`], as borrowed strings
//! and [`Json`] values. The decision procedure reads only views, so both ways in decide alike.
//!
//! The strings are plain `&str`, so a view owns nothing and has no drop glue (with `Cow`
//! fields, every field set and every early return of [`RequestView::from_tape`] carried a
//! deallocation branch: a third of its code). A tape request whose member names or envelope
//! strings have escapes (`\/` from some encoders, `\u0026` from Go's) is read again from
//! copies decoded first ([`Decoded`]), off the usual path.

use serde_json::Value;

use super::request::Request;
use crate::bytes::bytes_eq;
use crate::tape::{Kind, NodeRef};
use crate::vm::Json;

/// The fields of one request, borrowed; `J` is the document type of its JSON fields.
#[derive(Debug, Clone)]
pub(crate) struct RequestView<'r, J> {
    /// The calling skill's name.
    pub skill: &'r str,
    /// The manifest hash the caller expects, if given.
    pub skill_hash: Option<&'r str>,
    /// The operation.
    pub operation: &'r str,
    /// The resource.
    pub resource: &'r str,
    /// The payload (`null` when absent).
    pub payload: J,
    /// The agent identity (`null` when absent).
    pub agent: J,
    /// The caller's context (`null` when absent).
    pub context: J,
    /// The transaction, if named.
    pub transaction: Option<&'r str>,
    /// The grant token, if presented.
    pub grant: Option<&'r str>,
    /// The autonomy score as sent (absent or `null` is `None`).
    pub autonomy: Option<J>,
    /// The call's time, if given.
    pub time: Option<&'r str>,
    /// Set when the call has a payload that cannot be read as its upstream will read it:
    /// why. Every capability that reads the payload then fails with `input`.
    pub payload_unreadable: Option<&'r str>,
}

impl Request {
    /// This request as a view (borrows everything; allocates nothing).
    #[inline]
    pub(crate) fn view(&self) -> RequestView<'_, &Value> {
        RequestView {
            skill: &self.skill,
            skill_hash: self.skill_hash.as_deref(),
            operation: &self.operation,
            resource: &self.resource,
            payload: &self.payload,
            agent: &self.agent,
            context: &self.context,
            transaction: self.transaction.as_deref(),
            grant: self.grant.as_deref(),
            autonomy: self.autonomy.as_ref(),
            time: self.time.as_deref(),
            payload_unreadable: None,
        }
    }
}

/// Why a tape could not be read as a request here. The caller falls back to
/// [`Request::from_slice`], which gives the precise error, so this only has to be right about
/// *whether* to refuse — except `escaped`, which asks the caller to read the request again
/// with its escaped strings decoded ([`Decoded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotARequest {
    /// A member name or envelope string has escapes: not refused, only not read in place.
    pub escaped: bool,
}

/// Refused: not a request (the full parse says why).
const REFUSED: NotARequest = NotARequest { escaped: false };
/// Not read in place: a name or envelope string has escapes.
const ESCAPED: NotARequest = NotARequest { escaped: true };

/// How [`RequestView::from_tape`] reads member names and envelope strings.
trait Strings<'r> {
    /// The member `key` names.
    fn member(&self, key: NodeRef<'r>) -> Result<Member, NotARequest>;
    /// The text of string `value`, the value of `member`.
    fn text(&self, member: Member, value: NodeRef<'r>) -> Result<&'r str, NotARequest>;
}

/// Names and strings read where they lie: the usual case, allocating nothing; anything with
/// escapes is [`ESCAPED`].
struct InPlace;

impl<'r> Strings<'r> for InPlace {
    #[inline(always)]
    fn member(&self, key: NodeRef<'r>) -> Result<Member, NotARequest> {
        // Compared where it lies (a name is always a string node).
        let name = key.plain_bytes().ok_or(ESCAPED)?;
        Member::named(name).ok_or(REFUSED)
    }

    #[inline(always)]
    fn text(&self, _: Member, value: NodeRef<'r>) -> Result<&'r str, NotARequest> {
        match value.plain_str() {
            Some(text) => Ok(text),
            None if value.kind() == Kind::String => Err(ESCAPED),
            None => Err(REFUSED),
        }
    }
}

/// The envelope strings of a request that has escapes in them, decoded (by member), for
/// [`RequestView::from_tape_decoded`]; member names are decoded as they are read.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    texts: [Option<String>; MEMBERS],
}

impl Decoded {
    /// The decoded text of every string member of `root` (the first of each name: a tape
    /// holds no duplicate).
    pub(crate) fn of(root: NodeRef<'_>) -> Decoded {
        let mut decoded = Decoded::default();
        for (key, value) in root.members() {
            if let (Ok(member), Some(text)) = (Decoded::member_of(key), value.as_str())
                && let Some(slot) = decoded.texts.get_mut(member as usize)
                && slot.is_none()
            {
                *slot = Some(text.into_owned());
            }
        }
        decoded
    }

    /// The member `key` names once decoded.
    fn member_of(key: NodeRef<'_>) -> Result<Member, NotARequest> {
        match key.plain_bytes() {
            Some(name) => Member::named(name),
            None => Member::named(key.as_str().ok_or(REFUSED)?.as_bytes()),
        }
        .ok_or(REFUSED)
    }
}

impl<'r> Strings<'r> for &'r Decoded {
    fn member(&self, key: NodeRef<'r>) -> Result<Member, NotARequest> {
        Decoded::member_of(key)
    }

    fn text(&self, member: Member, value: NodeRef<'r>) -> Result<&'r str, NotARequest> {
        if let Some(text) = value.plain_str() {
            return Ok(text);
        }
        match self.texts.get(member as usize) {
            Some(Some(text)) if value.kind() == Kind::String => Ok(text),
            _ => Err(REFUSED),
        }
    }
}

impl<'r> RequestView<'r, NodeRef<'r>> {
    /// Reads a request from a parsed tape with the rules of [`Request::from_slice`]: an object
    /// with string `skill`, `operation` and `resource`, optional strings (`null` = absent)
    /// `skill_hash`, `transaction`, `grant` and `time`, any JSON in `payload`, `agent`, `context`
    /// and `autonomy`, no other member, and `payload`/`agent`/`context` nested at most
    /// `max_depth` levels. Duplicate members were refused by the tape parser. A member name or
    /// envelope string with escapes is not read here: the error is then `escaped`, and
    /// [`RequestView::from_tape_decoded`] reads the request.
    pub(crate) fn from_tape(root: NodeRef<'r>, max_depth: usize) -> Result<Self, NotARequest> {
        Self::read(root, max_depth, InPlace)
    }

    /// [`RequestView::from_tape`] for a request with escapes in its member names or envelope
    /// strings, whose strings `decoded` holds ([`Decoded::of`] the same root).
    #[cold]
    #[inline(never)]
    pub(crate) fn from_tape_decoded(
        root: NodeRef<'r>,
        max_depth: usize,
        decoded: &'r Decoded,
    ) -> Result<Self, NotARequest> {
        Self::read(root, max_depth, decoded)
    }

    #[inline(always)]
    fn read(
        root: NodeRef<'r>,
        max_depth: usize,
        strings: impl Strings<'r>,
    ) -> Result<Self, NotARequest> {
        if root.kind() != Kind::Object {
            return Err(REFUSED);
        }
        let null = NodeRef::null();
        let mut view = RequestView {
            skill: "",
            skill_hash: None,
            operation: "",
            resource: "",
            payload: null,
            agent: null,
            context: null,
            transaction: None,
            grant: None,
            autonomy: None,
            time: None,
            payload_unreadable: None,
        };
        let (mut skill, mut operation, mut resource) = (false, false, false);
        let optional = |member, value: NodeRef<'r>| match value.kind() {
            Kind::Null => Ok(None),
            _ => strings.text(member, value).map(Some),
        };
        let nested = |value: NodeRef<'r>| {
            if value.depth() > max_depth {
                Err(REFUSED)
            } else {
                Ok(value)
            }
        };
        for (key, value) in root.members() {
            let member = strings.member(key)?;
            match member {
                Member::Skill => {
                    view.skill = strings.text(member, value)?;
                    skill = true;
                }
                Member::Operation => {
                    view.operation = strings.text(member, value)?;
                    operation = true;
                }
                Member::Resource => {
                    view.resource = strings.text(member, value)?;
                    resource = true;
                }
                Member::SkillHash => view.skill_hash = optional(member, value)?,
                Member::Transaction => view.transaction = optional(member, value)?,
                Member::Grant => view.grant = optional(member, value)?,
                Member::Time => view.time = optional(member, value)?,
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
            Err(REFUSED)
        }
    }
}

/// How many members a request object may have ([`Member`]).
const MEMBERS: usize = 11;

/// The members a request object may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
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
    /// on the length, then compared in line (a `match` on the strings calls `memcmp` for every
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
    use super::{MEMBERS, Member};

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
        // Each member has its own slot among the decoded texts.
        let mut slots: Vec<usize> = all.iter().map(|(_, member)| *member as usize).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), all.len());
        assert!(slots.iter().all(|&slot| slot < MEMBERS));
        assert_eq!(all.len(), MEMBERS);
    }
}
