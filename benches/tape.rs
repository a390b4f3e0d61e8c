//! The tape parser against serde_json on the benchmark request (about 1.3 KB): `tape/parse`
//! (validating parse onto a warm [`Tape`], refusing keys equal up to case as the engine's
//! default limits do), `serde/ignored_any` (serde_json validating and
//! discarding: the floor) and `serde/value` (serde_json building a `Value`). Then the same
//! `tape` / `ignored_any` pair on three shapes of 100 elements each (group `shape`): an array of
//! short strings, an array of one-member objects (the attendees' shape) and one object of 100
//! members (past 16 members the tape checks duplicate keys through a keyed hash set).

#![allow(
    clippy::panic,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing
)]

use std::hint::black_box;

use capgate::tape::{Repeats, Tape};
use criterion::{Criterion, criterion_group, criterion_main};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

/// The benchmark request: a calendar event with five attendees and a 600-character description.
fn request() -> Vec<u8> {
    let mut description = String::from("Agenda: ");
    while description.len() < 600 {
        description.push_str("review the plan; ");
    }
    description.truncate(600);
    let request = json!({
        "skill": "meeting-scheduler",
        "operation": "POST",
        "resource": "https://calendar.example.com/v3/calendars/primary/events",
        "agent": {"id": "agent-7", "email": "sched-bot@example.com", "org": "acme"},
        "payload": {
            "summary": "Quarterly planning sync",
            "organizer": {"email": "sched-bot@example.com"},
            "attendees": [
                {"email": "alice@example.com"},
                {"email": "bob@example.com"},
                {"email": "carol@example.com"},
                {"email": "dave@example.com"},
                {"email": "erin@example.com"}
            ],
            "start": "2026-12-01T15:00:00Z",
            "end": "2026-12-01T16:00:00Z",
            "location": "Room 4, 3rd floor",
            "description": description
        }
    });
    serde_json::to_vec(&request).unwrap()
}

fn tape(c: &mut Criterion) {
    let bytes = request();
    let mut group = c.benchmark_group("json");
    let mut tape = Tape::new();
    group.bench_function("tape/parse", |b| {
        b.iter(|| {
            let doc = tape
                .parse_with(black_box(&bytes), 136, Repeats::CaseFolded)
                .unwrap();
            black_box(doc.root().len())
        });
    });
    group.bench_function("serde/ignored_any", |b| {
        b.iter(|| serde_json::from_slice::<IgnoredAny>(black_box(&bytes)).unwrap());
    });
    group.bench_function("serde/value", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&bytes)).unwrap());
    });
    group.finish();
}

/// The three shapes, 100 elements each.
fn shapes() -> [(&'static str, Vec<u8>); 3] {
    let strings: Vec<String> = (0..100).map(|i| format!(r#""v{i}""#)).collect();
    let objects: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"email":"a{i}@example.com"}}"#))
        .collect();
    let members: Vec<String> = (0..100).map(|i| format!(r#""k{i}":"v{i}""#)).collect();
    [
        ("strings", format!("[{}]", strings.join(",")).into_bytes()),
        ("objects", format!("[{}]", objects.join(",")).into_bytes()),
        ("members", format!("{{{}}}", members.join(",")).into_bytes()),
    ]
}

fn shape(c: &mut Criterion) {
    let mut group = c.benchmark_group("shape");
    let mut tape = Tape::new();
    for (name, bytes) in shapes() {
        group.bench_function(format!("{name}/tape"), |b| {
            b.iter(|| {
                let doc = tape
                    .parse_with(black_box(&bytes), 136, Repeats::CaseFolded)
                    .unwrap();
                black_box(doc.root().len())
            });
        });
        group.bench_function(format!("{name}/ignored_any"), |b| {
            b.iter(|| serde_json::from_slice::<IgnoredAny>(black_box(&bytes)).unwrap());
        });
    }
    group.finish();
}

criterion_group!(benches, tape, shape);
criterion_main!(benches);
