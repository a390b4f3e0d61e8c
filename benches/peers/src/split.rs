//! `PEERS_SPLIT=1`: where capgate's from-bytes time goes, in one process on the ALLOW request.
//!
//! Times, in rounds of alternating loops: the `IgnoredAny` floor; `Tape::parse` alone; the
//! decision on a tape parsed once (`Engine::check_doc`, request view included); parse then
//! decide in one loop; `check_slice`; and `check` pre-parsed. Then the same request with every
//! member no check reads removed (the ceiling of a projection that skipped them for free), the
//! floor and `check_slice` on it. Prints nanoseconds per call for each loop and round.

use std::hint::black_box;
use std::time::Instant;

use capgate::tape::Tape;
use capgate::{Engine, Limits, Request, Verdict};
use serde_json::Value;

use crate::baseline;

/// Calls per loop.
const CALLS: u32 = 300_000;

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

pub fn run(engine: &Engine, bytes: &[u8], parsed: &Request, rounds: usize) {
    // The depth limit a default engine's `check_slice` parses with.
    let depth = Limits::DEFAULT.parse_depth();
    let mut tape = Tape::new();
    let mut once = Tape::new();
    let doc = once.parse(bytes, depth).unwrap();
    assert_eq!(engine.check_doc(&doc).decision, Verdict::Allow);
    let slim = slim(bytes);
    assert_eq!(engine.check_slice(&slim).decision, Verdict::Allow);
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
            black_box(tape.parse(black_box(bytes), depth).is_ok());
        });
        let decide = time(|| {
            black_box(engine.check_doc(black_box(&doc)));
        });
        let both = time(|| {
            if let Ok(doc) = tape.parse(black_box(bytes), depth) {
                black_box(engine.check_doc(&doc));
            }
        });
        let slice = time(|| {
            black_box(engine.check_slice(black_box(bytes)));
        });
        let pre = time(|| {
            black_box(engine.check(black_box(parsed)));
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
             ({:.2}x the full floor)",
            parse / floor,
            decide / floor,
            slice / floor,
            slim_slice / floor
        );
    }
}
