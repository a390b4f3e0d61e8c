//! An allowed decision allocates nothing on the heap.
//!
//! A counting global allocator wraps the system allocator; after one warm-up call (which may
//! size thread-local buffers and regex caches), a run of allowed decisions must not allocate.
// A global allocator is the one way to observe allocations; it only counts and delegates.
#![allow(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use capgate::{Engine, Limits, PolicyLoader, Request, SimulatedClock, Verdict, parse_timestamp};
use serde_json::json;

struct Counting;

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
    /// Bytes allocated and not yet freed by this thread (frees of another thread's blocks
    /// land on that thread's count).
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn track(grown: usize, shrunk: usize) {
    let delta = i64::try_from(grown).unwrap_or(i64::MAX) - i64::try_from(shrunk).unwrap_or(0);
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_add(delta)));
}

// SAFETY: every method delegates to `System` with the caller's arguments unchanged; the counter
// is a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        track(layout.size(), 0);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(0, layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        track(new_size, layout.size());
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    COUNT.with(Cell::get)
}

fn live_bytes() -> i64 {
    LIVE.with(Cell::get)
}

fn scheduler_engine() -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(std::path::Path::new("policies/meeting-scheduler"));
    let now = parse_timestamp("2026-12-01T15:00:00Z").unwrap();
    Engine::builder(loader.finish().unwrap())
        .clock(Arc::new(SimulatedClock::new(now)))
        .build()
}

fn scheduler_request() -> Request {
    Request::from_value(
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
                    {"email": "erin@example.com"}
                ],
                "start": "2026-12-01T15:00:00Z",
                "end": "2026-12-01T16:00:00Z",
                "description": "x".repeat(600)
            }
        }),
        &Limits::DEFAULT,
    )
    .unwrap()
}

#[test]
fn an_allowed_decision_allocates_nothing() {
    let engine = scheduler_engine();
    let request = scheduler_request();
    assert_eq!(engine.check(&request).verdict, Verdict::Allow);
    let before = allocations();
    for _ in 0..100 {
        let decision = engine.check(&request);
        assert_eq!(decision.verdict, Verdict::Allow);
    }
    let per_call = (allocations() - before) as f64 / 100.0;
    assert_eq!(per_call, 0.0, "allocations per allowed decision");
}

#[test]
fn an_allowed_decision_from_bytes_allocates_nothing_once_the_thread_is_warm() {
    let engine = scheduler_engine();
    let bytes = serde_json::to_vec(&scheduler_request()).unwrap();
    // The first call grows this thread's tape; every later one reuses it.
    assert_eq!(engine.check_slice(&bytes).verdict, Verdict::Allow);
    let before = allocations();
    for _ in 0..100 {
        let decision = engine.check_slice(&bytes);
        assert_eq!(decision.verdict, Verdict::Allow);
    }
    let per_call = (allocations() - before) as f64 / 100.0;
    assert_eq!(per_call, 0.0, "allocations per allowed decision from bytes");
}

/// An engine on one `.cap` policy text, with a simulated clock (stateful if `state`).
fn engine_on(policy: &str, state: bool) -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_text("p.cap", policy.to_owned(), capgate::PolicyFormat::Cap, None);
    let now = parse_timestamp("2026-12-01T15:00:00Z").unwrap();
    let builder =
        Engine::builder(loader.finish().unwrap()).clock(Arc::new(SimulatedClock::new(now)));
    if state {
        builder
            .state(Arc::new(capgate::InMemoryStore::new()))
            .build()
    } else {
        builder.build()
    }
}

/// Found in review: comparing two large tape objects sorted one of them up front, so
/// `uniqueItems` over distinct objects of more than 16 members allocated on every allowed
/// decision; and a rate-limit key on an object `by` value collected its members even from a
/// pre-parsed (already sorted) map. Neither allocates.
#[test]
fn large_objects_and_object_rate_keys_allocate_nothing_when_allowed() {
    let unique = engine_on(
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call
  justification "j" payloadSchema {"properties": {"items": {"uniqueItems": true}}} } }"#,
        false,
    );
    let items: Vec<serde_json::Value> = (0..4)
        .map(|i| {
            let members: serde_json::Map<String, serde_json::Value> = (0..17)
                .map(|k| (format!("k{k:02}"), json!(i * 100 + k)))
                .collect();
            serde_json::Value::Object(members)
        })
        .collect();
    let bytes = serde_json::to_vec(&json!({
        "skill": "s", "operation": "call", "resource": "tool:t", "payload": {"items": items},
    }))
    .unwrap();
    assert_eq!(unique.check_slice(&bytes).verdict, Verdict::Allow);
    let before = allocations();
    for _ in 0..100 {
        assert_eq!(unique.check_slice(&bytes).verdict, Verdict::Allow);
    }
    let per_call = (allocations() - before) as f64 / 100.0;
    assert_eq!(
        per_call, 0.0,
        "uniqueItems over 17-member objects, from bytes"
    );

    let keyed = engine_on(
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call
  lifetime process justification "j" rateLimit 1000000 per 1h burst 1000000 by payload.who } }"#,
        true,
    );
    let request = Request::from_value(
        json!({"skill": "s", "operation": "call", "resource": "tool:t",
               "payload": {"who": {"org": "acme", "id": 7}}}),
        &Limits::DEFAULT,
    )
    .unwrap();
    assert_eq!(keyed.check(&request).verdict, Verdict::Allow);
    let before = allocations();
    for _ in 0..100 {
        assert_eq!(keyed.check(&request).verdict, Verdict::Allow);
    }
    let per_call = (allocations() - before) as f64 / 100.0;
    assert_eq!(per_call, 0.0, "a rate limit keyed by an object, pre-parsed");
}

/// Regression: a rate limit's `by` value was stored whole as its key, so every new megabyte
/// value a caller sent kept a megabyte in the store (+292 MB for 300 keys). The store keeps a
/// 16-byte hash of the canonical value: a call with a new megabyte value keeps only the key's
/// cell and its table and list slots.
#[test]
fn a_huge_rate_limit_key_is_stored_as_a_fixed_size_hash() {
    let engine = engine_on(
        r#"skill "s" { version "1" capability "c" { resource tool "t" operations call
  lifetime process justification "j" rateLimit 1 per 1h by payload.who } }"#,
        true,
    );
    // Megabyte values that differ only in their last character.
    let request = |last: char| {
        let mut who = "x".repeat(1_000_000);
        who.push(last);
        Request::from_value(
            json!({"skill": "s", "operation": "call", "resource": "tool:t",
                   "payload": {"who": who}}),
            &Limits::DEFAULT,
        )
        .unwrap()
    };
    let requests: Vec<Request> = ['a', 'b', 'c', 'd', 'e'].into_iter().map(request).collect();
    assert_eq!(engine.check(&requests[0]).verdict, Verdict::Allow);
    let before = live_bytes();
    for request in &requests[1..] {
        assert_eq!(engine.check(request).verdict, Verdict::Allow);
    }
    let kept = live_bytes() - before;
    assert!(
        (0..4 * 2048).contains(&kept),
        "{kept} bytes kept for four new keys of a megabyte each"
    );
    assert_eq!(std::mem::size_of::<capgate::runtime::RateKey>(), 16);
    // Each value still has a key of its own: its one call per hour is taken.
    for request in &requests {
        let decision = engine.check(request);
        assert_eq!(decision.verdict, Verdict::Deny);
        assert_eq!(decision.reasons[0].constraint.as_str(), "rateLimit");
    }
}
