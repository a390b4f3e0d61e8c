//! Runs the `meeting-scheduler` scenario (README.md) on capgate, its peers and hand-written Rust,
//! checks every engine's decision on both variants before timing it, and prints one table.
//!
//! Run with `cargo run --release --manifest-path benches/peers/Cargo.toml` from the capgate
//! checkout. `PEERS_ROUNDS` (default 3) sets how many times every row is measured; the table
//! keeps each row's best round, since the machine it runs on is usually shared and noisy, and
//! also measures each row against its stage reference in back-to-back pairs (`harness.rs`).
//! `PEERS_SPLIT=1` instead splits capgate's from-bytes time into parse and decision (`split.rs`);
//! `PEERS_PROFILE` runs one engine alone, for a profiler (below); `PEERS_ROWS=capgate` keeps
//! only capgate's rows and the references.

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

mod baseline;
mod harness;
mod peers;
mod split;

use std::hint::black_box;
use std::path::Path;

use capgate::{Engine, Limits, PolicyLoader, Request, Verdict};
use serde_json::Value;

use crate::harness::{Row, Stage};

/// The two variants of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Every condition holds.
    Allow,
    /// The 5th attendee is `eve@evil.com`: only C3 fails, on the last element.
    DenyLast,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Allow => "ALLOW",
            Variant::DenyLast => "DENY_LAST",
        }
    }

    fn expected(self) -> bool {
        self == Variant::Allow
    }
}

/// The scenario's request as bytes (every engine's input, parsed into a `Value` for the
/// pre-parsed rows): ~1 KB payload with 5 attendees and a 600-character
/// description, members in the scenario's order (the envelope, then summary, organizer,
/// attendees, start, end, location, description).
///
/// Written out rather than serialized from a `Value`: `serde_json::to_vec` writes a map's
/// members in the map's order, which is alphabetical in the own build and insertion order in
/// the cedar build (cedar-policy turns on `preserve_order` for the whole build), so the two
/// builds would time different bytes. The same bytes in another order parse 4–14 % faster or
/// slower with the same instructions.
pub fn request_bytes(variant: Variant) -> Vec<u8> {
    let last = match variant {
        Variant::Allow => "erin@example.com",
        Variant::DenyLast => "eve@evil.com",
    };
    let description = "Agenda: ".to_owned() + &"review the plan; ".repeat(36)[..592];
    format!(
        concat!(
            r#"{{"skill":"meeting-scheduler","operation":"POST","#,
            r#""resource":"https://calendar.example.com/v3/calendars/primary/events","#,
            r#""agent":{{"id":"agent-7","email":"sched-bot@example.com","org":"acme"}},"#,
            r#""payload":{{"summary":"Quarterly planning sync","#,
            r#""organizer":{{"email":"sched-bot@example.com"}},"#,
            r#""attendees":[{{"email":"alice@example.com"}},{{"email":"bob@example.com"}},"#,
            r#"{{"email":"carol@example.com"}},{{"email":"dave@example.com"}},{{"email":"{last}"}}],"#,
            r#""start":"2026-12-01T15:00:00Z","end":"2026-12-01T16:00:00Z","#,
            r#""location":"Room 4, 3rd floor","description":"{description}"}}}}"#
        ),
        last = last,
        description = description
    )
    .into_bytes()
}

/// `PEERS_ITERATIONS` (default 1,000,000): how many calls a profiling loop makes.
pub fn iterations() -> usize {
    std::env::var("PEERS_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
}

fn here(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(file)
}

fn read(file: &str) -> String {
    std::fs::read_to_string(here(file)).unwrap_or_else(|e| panic!("cannot read `{file}`: {e}"))
}

fn capgate_engine() -> Engine {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(&here("scenario.cap"));
    let policy = loader
        .finish()
        .unwrap_or_else(|e| panic!("scenario.cap must load: {e:?}"));
    // Stateless and system clock: the scenario has no rate limit and no window.
    Engine::builder(policy).build()
}

/// One variant's request in every form the rows need, built before anything is timed.
struct Inputs {
    variant: Variant,
    value: Value,
    bytes: Vec<u8>,
    payload: Value,
    parsed: Request,
    #[cfg(feature = "cedar")]
    cedar_native: cedar_policy::Request,
    #[cfg(feature = "cedar")]
    cedar_outcomes: peers::Outcomes,
    rego_native: peers::Rego,
    cel_native: cel::Value,
}

/// Panics unless `decide` gives the variant's expected decision.
fn verify(engine: &str, variant: Variant, allowed: bool) {
    assert_eq!(
        allowed,
        variant.expected(),
        "{engine} decides {} wrongly: allowed = {allowed}",
        variant.name()
    );
}

fn main() {
    let rounds: usize = std::env::var("PEERS_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let engine = capgate_engine();
    #[cfg(feature = "cedar")]
    let cedar = peers::Cedar::new(&read("scenario.cedar"));
    let rego = peers::Rego::new(&read("scenario.rego"));
    let cel = peers::Cel::new(&read("scenario.cel"));
    let schema: Value = serde_json::from_str(&read("schema-c3-c6.json")).unwrap();
    let capgate_schema = capgate::compile::schema::compile_schema(&schema)
        .unwrap_or_else(|e| panic!("capgate must compile the C3-C6 schema: {e:?}"));
    let jsonschema = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("jsonschema must compile the C3-C6 schema: {e}"));
    let matcher = baseline::Matcher::new();

    let inputs: Vec<Inputs> = [Variant::Allow, Variant::DenyLast]
        .into_iter()
        .map(|variant| {
            // Every row starts from these bytes; the `Value` rows from the `Value` read from them.
            let bytes = request_bytes(variant);
            let value: Value =
                serde_json::from_slice(&bytes).expect("the scenario request is JSON");
            Inputs {
                variant,
                bytes,
                payload: value["payload"].clone(),
                parsed: Request::from_value(value.clone(), &Limits::DEFAULT).unwrap(),
                #[cfg(feature = "cedar")]
                cedar_native: cedar.native(&value, &matcher),
                #[cfg(feature = "cedar")]
                cedar_outcomes: cedar.outcomes(&value),
                rego_native: {
                    let mut rego = rego.clone();
                    rego.set_input(&value);
                    rego
                },
                cel_native: cel.native(&value),
                value,
            }
        })
        .collect();

    for input in &inputs {
        let (variant, value, bytes, payload) =
            (input.variant, &input.value, &input.bytes, &input.payload);
        // Every engine must decide both variants right before it is timed.
        #[cfg_attr(not(feature = "cedar"), allow(unused_mut))]
        let mut checks: Vec<(&str, bool)> = vec![
            ("hand-written Value", matcher.decide_value(value)),
            (
                "hand-written Value from bytes",
                matcher.decide_value_bytes(bytes),
            ),
            ("hand-written borrowed", matcher.decide_borrowed(bytes)),
            (
                "capgate",
                engine.check(&input.parsed).verdict == Verdict::Allow,
            ),
            (
                "capgate from bytes",
                engine.check_slice(bytes).verdict == Verdict::Allow,
            ),
            ("regorus", rego.clone().decide(value)),
            ("regorus native", input.rego_native.clone().decide_native()),
            ("regorus from bytes", rego.clone().decide_bytes(bytes)),
            ("cel", cel.decide(value)),
            ("cel native", cel.decide_native(&input.cel_native)),
            ("cel from bytes", cel.decide_bytes(bytes)),
            (
                "capgate schema",
                capgate::vm::schema::is_valid(&capgate_schema, payload),
            ),
            ("jsonschema", jsonschema.is_valid(payload)),
        ];
        #[cfg(feature = "cedar")]
        checks.extend([
            ("cedar", cedar.decide(value, &matcher)),
            ("cedar native", cedar.decide_native(&input.cedar_native)),
            (
                "cedar C3/C4/C6 in Rust, prebuilt Context",
                cedar.decide_outcomes(&input.cedar_outcomes, value, &matcher),
            ),
            ("cedar from bytes", cedar.decide_bytes(bytes, &matcher)),
        ]);
        for (name, allowed) in checks {
            verify(name, variant, allowed);
        }
    }

    // `PEERS_PROFILE=pre-parsed|from-bytes|schema` runs only capgate (on ALLOW, or DENY_LAST with
    // `PEERS_VARIANT=deny`), for perf or callgrind; `baseline` and `baseline-bytes` run the
    // hand-written `Value` decision and the `IgnoredAny` scan the same way, so instruction
    // counts compare where wall times move with each build's code layout.
    if std::env::var("PEERS_SPLIT").is_ok() {
        let (allow, deny_last) = (&inputs[0], &inputs[1]);
        split::run(
            &engine,
            &allow.bytes,
            &deny_last.bytes,
            &allow.parsed,
            rounds.max(1),
        );
        return;
    }

    if let Ok(mode) = std::env::var("PEERS_PROFILE") {
        let deny = std::env::var("PEERS_VARIANT").is_ok_and(|v| v == "deny");
        let input = &inputs[usize::from(deny)];
        for _ in 0..iterations() {
            match mode.as_str() {
                "from-bytes" => {
                    black_box(engine.check_slice(black_box(&input.bytes)));
                }
                "baseline" => {
                    black_box(matcher.decide_value(black_box(&input.value)));
                }
                "baseline-bytes" => {
                    black_box(baseline::scan(black_box(&input.bytes)));
                }
                "schema" => {
                    black_box(capgate::vm::schema::is_valid(
                        &capgate_schema,
                        black_box(&input.payload),
                    ));
                }
                _ => {
                    black_box(engine.check(black_box(&input.parsed)));
                }
            }
        }
        return;
    }

    let mut rows: Vec<Row> = Vec::new();
    for input in &inputs {
        let (value, bytes, payload) = (&input.value, &input.bytes, &input.payload);
        let v = input.variant.name();
        let (engine, cel, matcher) = (&engine, &cel, &matcher);
        #[cfg(feature = "cedar")]
        let cedar = &cedar;
        let (capgate_schema, jsonschema) = (&capgate_schema, &jsonschema);
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "hand-written (serde_json::Value)",
            true,
            move || matcher.decide_value(black_box(value)),
        ));
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "capgate Engine::check",
            false,
            move || engine.check(black_box(&input.parsed)).verdict == Verdict::Allow,
        ));
        #[cfg(feature = "cedar")]
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "cedar-policy (Value -> Context)",
            false,
            move || cedar.decide(black_box(value), matcher),
        ));
        #[cfg(feature = "cedar")]
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "cedar-policy (prebuilt Context)",
            false,
            move || cedar.decide_native(black_box(&input.cedar_native)),
        ));
        #[cfg(feature = "cedar")]
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "cedar-policy (C3/C4/C6 in Rust, prebuilt Context)",
            false,
            move || {
                cedar.decide_outcomes(black_box(&input.cedar_outcomes), black_box(value), matcher)
            },
        ));
        let mut rego_value = rego.clone();
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "regorus (Value -> regorus::Value)",
            false,
            move || rego_value.decide(black_box(value)),
        ));
        let mut rego_only = input.rego_native.clone();
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "regorus (input already set)",
            false,
            move || rego_only.decide_native(),
        ));
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "cel (Value -> cel::Value)",
            false,
            move || cel.decide(black_box(value)),
        ));
        rows.push(Row::new(
            Stage::PreParsed,
            v,
            "cel (prebuilt cel::Value)",
            false,
            move || cel.decide_native(black_box(&input.cel_native)),
        ));

        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "IgnoredAny scan (floor)",
            true,
            move || baseline::scan(black_box(bytes)),
        ));
        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "hand-written (borrowed serde structs)",
            false,
            move || matcher.decide_borrowed(black_box(bytes)),
        ));
        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "hand-written (serde_json::Value)",
            false,
            move || matcher.decide_value_bytes(black_box(bytes)),
        ));
        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "capgate Engine::check_slice",
            false,
            move || engine.check_slice(black_box(bytes)).verdict == Verdict::Allow,
        ));
        #[cfg(feature = "cedar")]
        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "cedar-policy",
            false,
            move || cedar.decide_bytes(black_box(bytes), matcher),
        ));
        let mut rego_bytes = rego.clone();
        rows.push(Row::new(
            Stage::FromBytes,
            v,
            "regorus (set_input_json)",
            false,
            move || rego_bytes.decide_bytes(black_box(bytes)),
        ));
        rows.push(Row::new(Stage::FromBytes, v, "cel", false, move || {
            cel.decide_bytes(black_box(bytes))
        }));

        rows.push(Row::new(
            Stage::Schema,
            v,
            "capgate vm::schema::is_valid",
            false,
            move || capgate::vm::schema::is_valid(capgate_schema, black_box(payload)),
        ));
        rows.push(Row::new(
            Stage::Schema,
            v,
            "jsonschema Validator::is_valid",
            true,
            move || jsonschema.is_valid(black_box(payload)),
        ));
    }

    // `PEERS_ROWS=TEXT` keeps only the rows whose engine names contain TEXT (and the
    // references), to compare two builds quickly by their paired ratios.
    if let Ok(only) = std::env::var("PEERS_ROWS") {
        rows.retain(|row| row.is_reference() || row.engine().contains(&only));
    }
    harness::run(&mut rows, rounds);
    harness::print(&rows, rounds);
}
