use chrono::{DateTime, Utc};
use proptest::prelude::*;

use super::*;
use crate::engine::decision::{Reason, ReasonKind, Verdict};
use crate::revision::Revision;

fn serde_line(record: &AuditRecord<'_>) -> String {
    serde_json::to_string(record).unwrap()
}

fn hand_line(record: &AuditRecord<'_>) -> String {
    let mut line = Vec::new();
    write(&mut line, record).unwrap();
    String::from_utf8(line).unwrap()
}

fn verdict() -> impl Strategy<Value = Verdict> {
    prop_oneof![
        Just(Verdict::Allow),
        Just(Verdict::Deny),
        Just(Verdict::ApprovalRequired)
    ]
}

/// Strings with what JSON escapes (quotes, backslashes, every control character), DEL, and
/// characters of every UTF-8 length.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9:/._-]{0,40}",
        "[\\x00-\\x7f]{0,16}",
        any::<String>(),
        "[\"\\\\\u{7f}\u{e9}\u{20ac}\u{1f600}\\x00-\\x1f a]{0,12}",
    ]
}

/// Instants over chrono's whole range, whole seconds and every fraction length, and leap
/// seconds (a nanosecond field past one second on a minute's last second).
fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    let min = DateTime::<Utc>::MIN_UTC.timestamp();
    let max = DateTime::<Utc>::MAX_UTC.timestamp();
    prop_oneof![
        (min..=max, 0u32..1_000_000_000),
        (min..=max, Just(0u32)),
        (
            0i64..4_102_444_800,
            prop_oneof![Just(0u32), Just(5_000_000), Just(123_456_000), Just(7)]
        ),
        (0i64..68_374_000, 1_000_000_000u32..2_000_000_000)
            .prop_map(|(minute, nanos)| (minute * 60 + 59, nanos)),
    ]
    .prop_filter_map("in range", |(secs, nanos)| {
        DateTime::from_timestamp(secs, nanos)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_line_is_what_serde_json_writes(
        time in instant(),
        decision in verdict(),
        observed in proptest::option::of(verdict()),
        skill in text(),
        capability in proptest::option::of(text()),
        operation in text(),
        resource in text(),
        agent in proptest::option::of(text()),
        transaction in proptest::option::of(text()),
        grant in proptest::option::of(text()),
        message in proptest::option::of(text()),
        revision in proptest::option::of(any::<[u8; 32]>().prop_map(Revision::from_bytes)),
    ) {
        let reasons: Vec<Reason> = message
            .into_iter()
            .map(|message| Reason::request(ReasonKind::Input, message))
            .collect();
        let record = AuditRecord {
            time,
            decision,
            observed,
            skill: &skill,
            capability: capability.as_deref(),
            operation: &operation,
            resource: &resource,
            agent: agent.as_deref(),
            transaction: transaction.as_deref(),
            grant: grant.as_deref(),
            reasons: &reasons,
            revision,
        };
        prop_assert_eq!(hand_line(&record), serde_line(&record));
    }
}

#[test]
fn time_and_revision_keep_their_wire_form() {
    let record = AuditRecord {
        time: DateTime::from_timestamp(1_796_137_200, 250_000_000).unwrap(),
        decision: Verdict::Deny,
        observed: None,
        skill: "s",
        capability: None,
        operation: "GET",
        resource: "https://api.example.com/a\"b",
        agent: Some("agent-\u{1}"),
        transaction: None,
        grant: None,
        reasons: &[],
        revision: Some(Revision::of_manifest(b"abc")),
    };
    let line = hand_line(&record);
    assert_eq!(
        line,
        r#"{"time":"2026-12-01T15:00:00.250+00:00","decision":"deny","skill":"s","capability":null,"operation":"GET","resource":"https://api.example.com/a\"b","agent":"agent-\u0001","transaction":null,"grant":null,"reasons":[],"revision":"sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}"#
    );
    assert_eq!(line, serde_line(&record));
}
