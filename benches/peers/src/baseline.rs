//! The hand-written baselines: the scenario's C1-C6 in plain Rust, over a `serde_json::Value` and
//! over borrowed serde structs, and the `IgnoredAny` scan that only checks the bytes are JSON.
//!
//! Both baselines use the anchored `regex::Regex` for C3 that capgate compiles; capgate itself
//! answers this pattern with its regex shortcut (a character run and a literal suffix), which is
//! part of what the comparison measures.

use std::borrow::Cow;

use regex::Regex;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// C3's pattern, anchored for a whole-string match.
pub const ATTENDEE_EMAIL: &str = r"^[^@]+@example\.com$";

/// The hand-written decision, with its compiled regex.
pub struct Matcher {
    attendee_email: Regex,
}

fn str_at<'v>(value: &'v Value, key: &str) -> Option<&'v str> {
    value.get(key).and_then(Value::as_str)
}

/// C1's resource half: the calendar between the fixed prefix and suffix is `primary` or `team`.
pub fn calendar_allowed(resource: &str) -> bool {
    resource
        .strip_prefix("https://calendar.example.com/v3/calendars/")
        .and_then(|rest| rest.strip_suffix("/events"))
        .is_some_and(|calendar| calendar == "primary" || calendar == "team")
}

/// C6 on a string: 1..=200 characters (Unicode code points, as JSON Schema counts).
pub fn summary_length_ok(summary: &str) -> bool {
    (1..=200).contains(&summary.chars().count())
}

impl Matcher {
    /// Compiles C3's regex.
    pub fn new() -> Self {
        Matcher {
            attendee_email: Regex::new(ATTENDEE_EMAIL).unwrap(),
        }
    }

    /// C3 over a payload value: every attendee has an email on the domain (and there is an
    /// attendees array).
    pub fn attendees_on_domain(&self, payload: &Value) -> bool {
        payload
            .get("attendees")
            .and_then(Value::as_array)
            .is_some_and(|attendees| {
                attendees.iter().all(|attendee| {
                    attendee
                        .get("email")
                        .and_then(Value::as_str)
                        .is_some_and(|email| self.attendee_email.is_match(email))
                })
            })
    }

    /// C4 over a payload value.
    pub fn at_most_50_attendees(payload: &Value) -> bool {
        payload
            .get("attendees")
            .and_then(Value::as_array)
            .is_some_and(|attendees| attendees.len() <= 50)
    }

    /// C6 over a payload value.
    pub fn summary_ok(payload: &Value) -> bool {
        payload
            .get("summary")
            .and_then(Value::as_str)
            .is_some_and(summary_length_ok)
    }

    /// C1-C6 over a whole request value.
    pub fn decide_value(&self, request: &Value) -> bool {
        let Some(payload) = request.get("payload") else {
            return false;
        };
        let organizer = payload.get("organizer").and_then(|o| str_at(o, "email"));
        let agent = request.get("agent").and_then(|a| str_at(a, "email"));
        str_at(request, "operation") == Some("POST")
            && str_at(request, "resource").is_some_and(calendar_allowed)
            && organizer.is_some()
            && organizer == agent
            && self.attendees_on_domain(payload)
            && Self::at_most_50_attendees(payload)
            && payload.get("recurrence").is_none()
            && Self::summary_ok(payload)
    }

    /// Parses the bytes into a `Value`, then [`Matcher::decide_value`].
    pub fn decide_value_bytes(&self, bytes: &[u8]) -> bool {
        serde_json::from_slice::<Value>(bytes).is_ok_and(|request| self.decide_value(&request))
    }

    /// C1-C6 over borrowed structs deserialized straight from the bytes: the fastest honest
    /// hand-written decision (unknown fields are skipped, strings borrowed unless escaped).
    pub fn decide_borrowed(&self, bytes: &[u8]) -> bool {
        let Ok(call) = serde_json::from_slice::<Call<'_>>(bytes) else {
            return false;
        };
        let event = &call.payload;
        call.operation == "POST"
            && calendar_allowed(&call.resource)
            && event.organizer.email == call.agent.email
            && event
                .attendees
                .iter()
                .all(|attendee| self.attendee_email.is_match(&attendee.email))
            && event.attendees.len() <= 50
            && !event.recurrence
            && summary_length_ok(&event.summary)
    }
}

/// Deserializes the bytes as `IgnoredAny`: the floor of any from-bytes decision, since every
/// engine must at least read the whole input as JSON.
pub fn scan(bytes: &[u8]) -> bool {
    serde_json::from_slice::<IgnoredAny>(bytes).is_ok()
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    operation: Cow<'a, str>,
    #[serde(borrow)]
    resource: Cow<'a, str>,
    #[serde(borrow)]
    agent: Person<'a>,
    #[serde(borrow)]
    payload: Event<'a>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    summary: Cow<'a, str>,
    #[serde(borrow)]
    organizer: Person<'a>,
    #[serde(borrow)]
    attendees: Vec<Person<'a>>,
    /// True when the member is present at all, whatever its value (`null` included).
    #[serde(default, deserialize_with = "present")]
    recurrence: bool,
}

#[derive(Deserialize)]
struct Person<'a> {
    #[serde(borrow)]
    email: Cow<'a, str>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    IgnoredAny::deserialize(deserializer).map(|_| true)
}
