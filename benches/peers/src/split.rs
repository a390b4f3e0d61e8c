//! `PEERS_SPLIT=1`: where capgate's from-bytes time goes, in one process on the ALLOW request.
//!
//! Times, in rounds of alternating loops: the `IgnoredAny` floor; `Tape::parse` alone; the
//! decision on a tape parsed once (`Engine::check_doc`, request view included); parse then
//! decide in one loop; `check_slice`; and `check` pre-parsed. Then the same request with every
//! member no check reads removed (the ceiling of a projection that skipped them for free), the
//! floor and `check_slice` on it. Then two bounds on a tape-based design: C1-C6 written by hand
//! over capgate's tape (parse included), and `check_doc` on an engine whose skill has the same
//! resource and operation but no constraints (what the engine spends around a capability's
//! checks). Prints nanoseconds per call for each loop and round.
//!
//! `PEERS_SPLIT=paired` times the same loops as table rows, each paired with the floor
//! (`harness.rs`). `PEERS_SPLIT_LOOP=engine|bare|hand|parse` instead runs one of `check_doc` (the scenario's
//! engine), `check_doc` (the engine without constraints), the hand-written tape decision or
//! `Tape::parse` alone
//! `PEERS_ITERATIONS` times (default 1,000,000) and exits, for perf or callgrind.

use std::hint::black_box;
use std::time::Instant;

use capgate::tape::{Doc, Kind, NodeRef, Repeats, Tape};
use capgate::{Engine, Limits, PolicyFormat, PolicyLoader, Request, Verdict};
use serde_json::Value;

use crate::baseline;
use crate::harness::{self, Row, Stage};

/// Calls per loop.
const CALLS: u32 = 300_000;

/// The keys a default engine's parse refuses as one key given twice (`Engine::repeats`): a
/// document for `check_doc` parsed so is not parsed again.
const REPEATS: Repeats = Repeats::CaseFolded;

/// Nanoseconds per call of `f`, over `CALLS` calls.
fn time(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

/// The request without the members no check of the scenario reads.
fn slim(bytes: &[u8]) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(bytes).unwrap();
    let payload = request["payload"].as_object_mut().unwrap();
    for unread in ["start", "end", "location", "description"] {
        payload.remove(unread);
    }
    request["agent"].as_object_mut().unwrap().remove("org");
    serde_json::to_vec(&request).unwrap()
}

/// C1-C6 written by hand over a tape that capgate's parser fills from `bytes` (the parse is
/// part of the call), with the baselines' checks of C1 and C6: what a tape-based design would
/// take if its decision cost no more than hand-written Rust. Reads the request members with
/// [`capgate::tape::NodeRef::get`], as the engine's request view does not (it walks the root's
/// members once).
fn hand_written_on_tape(tape: &mut Tape, bytes: &[u8], depth: usize) -> bool {
    let Ok(doc) = tape.parse_with(bytes, depth, REPEATS) else {
        return false;
    };
    let root = doc.root();
    let text = |node: Option<NodeRef<'_>>, wanted: &dyn Fn(&str) -> bool| {
        node.and_then(NodeRef::as_str).is_some_and(|s| wanted(&s))
    };
    // C3 without a regex: `[^@]+@example\.com` as a whole-string match.
    let on_domain = |email: &str| {
        email
            .strip_suffix("@example.com")
            .is_some_and(|local| !local.is_empty() && !local.contains('@'))
    };
    let (Some(payload), Some(agent)) = (root.get("payload"), root.get("agent")) else {
        return false;
    };
    let Some(agent_email) = agent.get("email").and_then(NodeRef::as_str) else {
        return false;
    };
    let attendees = payload.get("attendees");
    text(root.get("skill"), &|s| s == "meeting-scheduler")
        && text(root.get("operation"), &|s| s == "POST")
        && text(root.get("resource"), &baseline::calendar_allowed)
        && payload
            .get("organizer")
            .and_then(|organizer| organizer.get("email"))
            .is_some_and(|email| email.str_eq(&agent_email))
        && attendees.is_some_and(|attendees| {
            attendees.kind() == Kind::Array
                && attendees.len() <= 50
                && attendees
                    .elements()
                    .all(|attendee| text(attendee.get("email"), &on_domain))
        })
        && payload.get("recurrence").is_none()
        && text(payload.get("summary"), &baseline::summary_length_ok)
}

/// The scenario's skill with its resource and operation but none of its constraints.
fn engine_without_constraints() -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    let text = r#"skill "meeting-scheduler" {
  version "1.0.0"
  capability "create-event" {
    resource http "https://calendar.example.com/v3/calendars/{calendar}/events"
    operations POST
    justification "Creates exactly one calendar event per scheduling request."
  }
}"#;
    loader.add_text("bare.cap", text.to_owned(), PolicyFormat::Cap, None);
    Engine::builder(loader.finish().unwrap()).build()
}

pub fn run(engine: &Engine, bytes: &[u8], deny_last: &[u8], parsed: &Request, rounds: usize) {
    // The depth limit a default engine's `check_slice` parses with.
    let depth = Limits::DEFAULT.parse_depth();
    let mut tape = Tape::new();
    let mut once = Tape::new();
    assert_eq!(engine.repeats(), REPEATS);
    let doc = once.parse_with(bytes, depth, REPEATS).unwrap();
    assert_eq!(engine.check_doc(&doc).verdict, Verdict::Allow);
    let slim = slim(bytes);
    let bare = engine_without_constraints();
    assert_eq!(bare.check_doc(&doc).verdict, Verdict::Allow);
    assert!(hand_written_on_tape(&mut tape, bytes, depth));
    assert!(!hand_written_on_tape(&mut tape, deny_last, depth));
    if let Ok(which) = std::env::var("PEERS_SPLIT_LOOP") {
        for _ in 0..crate::iterations() {
            match which.as_str() {
                "engine" => drop(black_box(engine.check_doc(black_box(&doc)))),
                "bare" => drop(black_box(bare.check_doc(black_box(&doc)))),
                "hand" => {
                    black_box(hand_written_on_tape(&mut tape, black_box(bytes), depth));
                }
                "parse" => {
                    black_box(tape.parse_with(black_box(bytes), depth, REPEATS).is_ok());
                }
                other => panic!("PEERS_SPLIT_LOOP={other}: expected engine, bare, hand or parse"),
            }
        }
        return;
    }
    assert_eq!(engine.check_slice(&slim).verdict, Verdict::Allow);
    if std::env::var("PEERS_SPLIT").as_deref() == Ok("paired") {
        paired(engine, &bare, bytes, &doc, depth, rounds);
        return;
    }
    println!(
        "split of the from-bytes ALLOW decision ({} bytes; slim {} bytes), ns per call",
        bytes.len(),
        slim.len()
    );
    for round in 1..=rounds {
        let floor = time(|| {
            black_box(baseline::scan(black_box(bytes)));
        });
        let parse = time(|| {
            black_box(tape.parse_with(black_box(bytes), depth, REPEATS).is_ok());
        });
        let decide = time(|| {
            black_box(engine.check_doc(black_box(&doc)));
        });
        let both = time(|| {
            if let Ok(doc) = tape.parse_with(black_box(bytes), depth, REPEATS) {
                black_box(engine.check_doc(&doc));
            }
        });
        let slice = time(|| {
            black_box(engine.check_slice(black_box(bytes)));
        });
        let pre = time(|| {
            black_box(engine.check(black_box(parsed)));
        });
        let hand = time(|| {
            black_box(hand_written_on_tape(&mut tape, black_box(bytes), depth));
        });
        let without = time(|| {
            black_box(bare.check_doc(black_box(&doc)));
        });
        let without_both = time(|| {
            if let Ok(doc) = tape.parse_with(black_box(bytes), depth, REPEATS) {
                black_box(bare.check_doc(&doc));
            }
        });
        let slim_floor = time(|| {
            black_box(baseline::scan(black_box(&slim)));
        });
        let slim_slice = time(|| {
            black_box(engine.check_slice(black_box(&slim)));
        });
        println!(
            "round {round}: floor {floor:.0}, parse {parse:.0} ({:.2}x), decide on the tape \
             {decide:.0} ({:.2}x), parse then decide {both:.0}, check_slice {slice:.0} ({:.2}x), \
             check pre-parsed {pre:.0}; slim: floor {slim_floor:.0}, check_slice {slim_slice:.0} \
             ({:.2}x the full floor); C1-C6 by hand on the tape, parse included {hand:.0} \
             ({:.2}x), the engine without constraints on the tape {without:.0} ({:.2}x), parse then that \
             engine {without_both:.0} (parse + it alone {:.0})",
            parse / floor,
            decide / floor,
            slice / floor,
            slim_slice / floor,
            hand / floor,
            without / floor,
            parse + without
        );
    }
}

/// `PEERS_SPLIT=paired`: the same loops as rows of the peers table, each timed against the
/// `IgnoredAny` floor in back-to-back pairs (see `harness.rs`), so the split holds still on a
/// busy host.
fn paired(
    engine: &Engine,
    bare: &Engine,
    bytes: &[u8],
    doc: &Doc<'_>,
    depth: usize,
    rounds: usize,
) {
    fn loop_row<'a>(
        name: &'static str,
        reference: bool,
        decide: impl FnMut() -> bool + 'a,
    ) -> Row<'a> {
        Row::new(Stage::FromBytes, "ALLOW", name, reference, decide)
    }
    let (mut parse_tape, mut hand_tape) = (Tape::new(), Tape::new());
    let mut rows = vec![
        loop_row("IgnoredAny scan (floor)", true, move || {
            baseline::scan(black_box(bytes))
        }),
        loop_row("Tape::parse alone", false, move || {
            parse_tape
                .parse_with(black_box(bytes), depth, REPEATS)
                .is_ok()
        }),
        loop_row(
            "check_doc on a parsed tape",
            false,
            decides_doc(engine, doc),
        ),
        loop_row(
            "Tape::parse then check_doc",
            false,
            parse_then(engine, bytes, depth),
        ),
        loop_row("check_slice", false, move || {
            engine.check_slice(black_box(bytes)).verdict == Verdict::Allow
        }),
        loop_row(
            "C1-C6 by hand on the tape, parse included",
            false,
            move || hand_written_on_tape(&mut hand_tape, black_box(bytes), depth),
        ),
        loop_row(
            "check_doc, engine without constraints",
            false,
            decides_doc(bare, doc),
        ),
        loop_row(
            "Tape::parse then check_doc without constraints",
            false,
            parse_then(bare, bytes, depth),
        ),
    ];
    harness::run(&mut rows, rounds);
    harness::print(&rows, rounds);
}

/// A loop body that decides the parsed `doc` with `engine`.
fn decides_doc<'a>(engine: &'a Engine, doc: &'a Doc<'_>) -> impl FnMut() -> bool + 'a {
    move || engine.check_doc(black_box(doc)).verdict == Verdict::Allow
}

/// A loop body that parses `bytes` into its own tape and decides it with `engine`.
fn parse_then<'a>(engine: &'a Engine, bytes: &'a [u8], depth: usize) -> impl FnMut() -> bool + 'a {
    let mut tape = Tape::new();
    move || {
        tape.parse_with(black_box(bytes), depth, REPEATS)
            .is_ok_and(|doc| engine.check_doc(&doc).verdict == Verdict::Allow)
    }
}
