//! `Engine::check_doc`: a request the caller parsed onto a tape is decided exactly as
//! `check_slice` decides its bytes — verdicts, reasons, input errors and audit records — whatever
//! depth limit the caller parsed with.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::{Arc, Mutex};

use capgate::tape::{Repeats, Tape};
use capgate::{
    AuditRecord, AuditSink, Engine, Limits, PolicyFormat, PolicyLoader, SimulatedClock, Verdict,
    parse_timestamp,
};

const POLICY: &str = r#"
skill "s" {
  version "1"
  capability "c" {
    resource tool "t"
    operations call
    fieldRange payload.n <= 10
    justification "j"
  }
}
"#;

/// Small limits, so the size and depth fallbacks are reachable with short inputs.
const LIMITS: Limits = Limits {
    max_payload_depth: 3,
    max_request_bytes: 200,
    ..Limits::DEFAULT
};

#[derive(Debug, Default)]
struct Records(Mutex<Vec<String>>);

impl AuditSink for Records {
    fn record(&self, record: &AuditRecord<'_>) {
        let line = serde_json::to_string(record).unwrap();
        self.0.lock().unwrap().push(line);
    }
}

fn engine(sink: Arc<Records>) -> Engine {
    let mut loader = PolicyLoader::new(LIMITS);
    loader.add_text("p.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
    let now = parse_timestamp("2026-12-01T10:00:00Z").unwrap();
    Engine::builder(loader.finish().unwrap())
        .limits(LIMITS)
        .unwrap()
        .clock(Arc::new(SimulatedClock::new(now)))
        .audit(sink)
        .build()
}

/// An allowed request whose payload nests `depth` containers (`{"n":1,"a":[[…1…]]}`).
fn nested(depth: usize) -> String {
    let mut inner = "1".to_owned();
    for _ in 1..depth {
        inner = format!("[{inner}]");
    }
    format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{{"n":1,"a":{inner}}}}}"#
    )
}

#[test]
fn check_doc_decides_as_check_slice_on_every_kind_of_input() {
    let long = format!(
        r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{{"n":1,"pad":"{}"}}}}"#,
        "x".repeat(300)
    );
    let inputs: Vec<String> = vec![
        // allowed, and denied by the constraint
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":3}}"#.to_owned(),
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":11}}"#.to_owned(),
        // an unknown skill, an operation not granted
        r#"{"skill":"nobody","operation":"call","resource":"tool:t"}"#.to_owned(),
        r#"{"skill":"s","operation":"delete","resource":"tool:t"}"#.to_owned(),
        // not a request: an unknown member, a member of the wrong type, not an object
        r#"{"skill":"s","operation":"call","resource":"tool:t","extra":1}"#.to_owned(),
        r#"{"skill":"s","operation":7,"resource":"tool:t"}"#.to_owned(),
        r#"["skill"]"#.to_owned(),
        // payloads at the depth limit and past it, and another member far past the parse depth
        nested(3),
        nested(4),
        format!(
            r#"{{"skill":"s","operation":"call","resource":"tool:t","autonomy":{}1{}}}"#,
            "[".repeat(20),
            "]".repeat(20)
        ),
        // larger than max_request_bytes
        long,
        // member names equal up to case: refused by the engine's own parse, which a document
        // parsed without that rule (`Tape::parse`) gets
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":1,"N":20}}"#
            .to_owned(),
        r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"N":20}}"#.to_owned(),
    ];
    for input in &inputs {
        let (slice_sink, doc_sink) = (Arc::new(Records::default()), Arc::new(Records::default()));
        let expected = engine(slice_sink.clone()).check_slice(input.as_bytes());
        // Parsed by a caller with a far more generous depth limit than the engine's.
        let mut tape = Tape::new();
        let doc = tape.parse(input.as_bytes(), 1_000).unwrap();
        let decided = engine(doc_sink.clone()).check_doc(&doc);
        assert_eq!(decided, expected, "{input}");
        assert_eq!(
            *doc_sink.0.lock().unwrap(),
            *slice_sink.0.lock().unwrap(),
            "audit records for {input}"
        );
        assert_eq!(doc_sink.0.lock().unwrap().len(), 1, "{input}");
    }
}

#[test]
fn the_fallbacks_are_reached() {
    // The inputs above include refusals for depth and size; check that they are refusals, so
    // the equality above compares the fallback path and not two allows.
    let sink = Arc::new(Records::default());
    let engine = engine(sink);
    let mut tape = Tape::new();
    for (input, kind) in [
        (nested(3), None),
        (nested(4), Some("input")),
        (
            format!(
                r#"{{"skill":"s","operation":"call","resource":"tool:t","payload":{{"pad":"{}"}}}}"#,
                "x".repeat(300)
            ),
            Some("input"),
        ),
    ] {
        let doc = tape.parse(input.as_bytes(), 1_000).unwrap();
        let decision = engine.check_doc(&doc);
        let first = decision.reasons.first().map(|r| r.constraint.as_str());
        match kind {
            None => assert!(decision.reasons.is_empty(), "{input}: {decision:?}"),
            Some(kind) => assert_eq!(first, Some(kind), "{input}: {decision:?}"),
        }
    }
}

#[test]
fn a_document_parsed_without_refusing_case_variants_is_parsed_again() {
    let sink = Arc::new(Records::default());
    let engine = engine(sink);
    assert_eq!(engine.repeats(), Repeats::CaseFolded);
    let input = r#"{"skill":"s","operation":"call","resource":"tool:t","payload":{"n":1,"N":20}}"#;
    let mut tape = Tape::new();
    // Parsed as the engine parses, the document is refused before any decision.
    assert!(
        tape.parse_with(input.as_bytes(), 1_000, Repeats::CaseFolded)
            .is_err()
    );
    // Parsed with exact repeats, it is decided as `check_slice` decides it: refused (`input`),
    // not allowed on `n`.
    let doc = tape.parse(input.as_bytes(), 1_000).unwrap();
    assert_eq!(doc.repeats(), Repeats::Exact);
    let decision = engine.check_doc(&doc);
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint.as_str(), "input");
    assert_eq!(decision, engine.check_slice(input.as_bytes()));
}

/// Regression (found in review): `check_slice` added the parse headroom to `max_payload_depth`
/// unchecked, so a limit near `usize::MAX` panicked in debug builds and, with overflow checks
/// off, wrapped to a tiny depth limit that refused an ordinary request — while `check_doc`
/// allowed it. The sum saturates, and such a limit is refused before any engine is built:
/// payloads are walked recursively, so no depth above `MAX_PAYLOAD_DEPTH` can be honoured.
#[test]
fn regression_a_payload_depth_limit_near_usize_max_does_not_overflow() {
    for max_payload_depth in [usize::MAX, usize::MAX - 3, usize::MAX - 7] {
        let limits = Limits {
            max_payload_depth,
            ..Limits::DEFAULT
        };
        assert_eq!(limits.parse_depth(), usize::MAX);
        let mut loader = PolicyLoader::new(Limits::DEFAULT);
        loader.add_text("p.cap", POLICY.to_owned(), PolicyFormat::Cap, None);
        let error = Engine::builder(loader.finish().unwrap())
            .limits(limits)
            .unwrap_err()
            .to_string();
        assert!(error.contains("max_payload_depth"), "{error}");
        assert!(error.contains("512"), "{error}");
    }
}
