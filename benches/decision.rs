//! Decision benchmarks over the bundled `meeting-scheduler` policy: one allowed call and one
//! denied on its last attendee, each with the request pre-parsed and from raw bytes.
//!
//! Run with `cargo bench --bench decision`. The engine is stateless (as `capgate check`), so the
//! policy's rate limit does not interfere; its clock is fixed inside the business-hours window.

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use capgate::{Engine, Limits, PolicyLoader, Request, SimulatedClock, Verdict, parse_timestamp};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn engine() -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(std::path::Path::new("policies/meeting-scheduler"));
    let policy = match loader.finish() {
        Ok(policy) => policy,
        Err(e) => panic!("the bundled policy must load: {e}"),
    };
    let now = parse_timestamp("2026-12-01T15:00:00Z").unwrap_or_default();
    Engine::builder(policy)
        .clock(Arc::new(SimulatedClock::new(now)))
        .build()
}

/// The peers scenario (`benches/peers/README.md`): ~1 KB payload, 5 attendees, a 600-character
/// description.
fn request(last_attendee: &str) -> serde_json::Value {
    json!({
        "skill": "meeting-scheduler",
        "operation": "POST",
        "resource": "https://calendar.example.com/v3/calendars/primary/events",
        "agent": {"id": "agent-7", "email": "sched-bot@example.com", "org": "acme"},
        "autonomy": 85,
        "payload": {
            "summary": "Quarterly planning sync",
            "organizer": {"email": "sched-bot@example.com"},
            "attendees": [
                {"email": "alice@example.com"}, {"email": "bob@example.com"},
                {"email": "carol@example.com"}, {"email": "dave@example.com"},
                {"email": last_attendee}
            ],
            "start": "2026-12-01T15:00:00Z",
            "end": "2026-12-01T16:00:00Z",
            "location": "Room 4",
            "description": "x".repeat(600)
        }
    })
}

fn decision(c: &mut Criterion) {
    let engine = engine();
    let mut group = c.benchmark_group("decide");
    for (name, last, expected) in [
        ("allow", "erin@example.com", Verdict::Allow),
        ("deny_last", "eve@evil.com", Verdict::Deny),
    ] {
        let value = request(last);
        let bytes = match serde_json::to_vec(&value) {
            Ok(bytes) => bytes,
            Err(e) => panic!("{e}"),
        };
        let parsed = match Request::from_value(value, &Limits::DEFAULT) {
            Ok(request) => request,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(engine.check(&parsed).verdict, expected, "{name} pre-parsed");
        assert_eq!(
            engine.check_slice(&bytes).verdict,
            expected,
            "{name} from bytes"
        );
        group.bench_function(format!("{name}/pre_parsed"), |b| {
            b.iter(|| engine.check(black_box(&parsed)))
        });
        group.bench_function(format!("{name}/from_bytes"), |b| {
            b.iter(|| engine.check_slice(black_box(&bytes)))
        });
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
