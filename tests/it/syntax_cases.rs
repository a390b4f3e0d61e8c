//! The `.cap` front end: every construct of SPEC §2 parses to the AST it should, and every error
//! is reported at the right line and column with a readable message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::span::{FileId, SourceMap, Span};
use capgate::syntax::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, DaySet, Duration, EqualsRhs,
    Lifetime, PolicyFile, RangeSubject, ResourceKind, Risk, RiskLabel, SchemaSource, Sensitivity,
    TimeOfDay, WindowSpec,
};
use capgate::syntax::{SyntaxError, parse};
use capgate::value::{Path, Segment};
use proptest::prelude::*;
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Parses `text` or fails the test showing every error with its location.
fn parse_ok(text: &str) -> PolicyFile {
    match parse(FileId(0), text) {
        Ok(file) => file,
        Err(errors) => panic!(
            "expected a parse, got:\n{}",
            render(text, &errors).join("\n")
        ),
    }
}

/// The errors of `text` as `line:column: message`.
fn errors(text: &str) -> Vec<String> {
    match parse(FileId(0), text) {
        Ok(_) => panic!("expected errors, the text parsed:\n{text}"),
        Err(errors) => render(text, &errors),
    }
}

/// The single error of `text` with its hint.
fn only_error(text: &str) -> SyntaxError {
    let errors = parse(FileId(0), text).expect_err("expected an error");
    assert_eq!(errors.len(), 1, "{:?}", render(text, &errors));
    errors.into_iter().next().unwrap()
}

fn render(text: &str, errors: &[SyntaxError]) -> Vec<String> {
    let mut map = SourceMap::new();
    let id = map.add("t.cap", text);
    errors
        .iter()
        .map(|e| {
            let location = map.location(Span { file: id, ..e.span });
            format!("{}:{}: {}", location.line, location.column, e.message)
        })
        .collect()
}

/// `line:column` of a span in `text`.
fn at(text: &str, span: Span) -> (u32, u32) {
    let mut map = SourceMap::new();
    let id = map.add("t.cap", text);
    let location = map.location(Span { file: id, ..span });
    (location.line, location.column)
}

/// Wraps capability body lines so that `body` starts at line 3, column 5.
fn in_capability(body: &str) -> String {
    format!("skill \"s\" {{\n  capability \"c\" {{\n    {body}\n  }}\n}}\n")
}

fn capability(body: &str) -> Capability {
    let mut file = parse_ok(&in_capability(body));
    file.skills.remove(0).capabilities.remove(0)
}

/// The single constraint of a capability whose body is `text`.
fn constraint(text: &str) -> Constraint {
    let mut capability = capability(text);
    assert_eq!(capability.constraints.len(), 1);
    capability.constraints.remove(0)
}

fn kind(text: &str) -> ConstraintKind {
    constraint(text).kind
}

/// The errors of a capability body, as `line:column: message` (the body starts at 3:5).
fn capability_errors(body: &str) -> Vec<String> {
    errors(&in_capability(body))
}

fn path(text: &str) -> Path {
    Path::parse(text).unwrap()
}

fn duration(text: &str) -> Duration {
    capgate::syntax::units::parse_duration(text).unwrap()
}

fn bounds_of(kind: ConstraintKind) -> (RangeSubject, Vec<(CmpOp, BoundValue)>) {
    match kind {
        ConstraintKind::FieldRange { subject, bounds } => (
            subject,
            bounds
                .into_iter()
                .map(|Bound { op, value, .. }| (op, value))
                .collect(),
        ),
        other => panic!("not a fieldRange: {other:?}"),
    }
}

fn number(value: serde_json::Value) -> BoundValue {
    match value {
        serde_json::Value::Number(n) => BoundValue::Number(n),
        other => panic!("not a number: {other}"),
    }
}

const SPEC_EXAMPLE: &str = r#"skill "meeting-scheduler" {
  version     "2.1.0"
  hash        "sha256:0000000000000000000000000000000000000000000000000000000000000000"            // contentHash of the skill artifact (optional until signing)
  signer      "ed25519:AAAA"       // signingIdentity (optional until signing)
  risk        high                         // none|low|medium|high|critical or 0..100 (optional, default none)
  sensitivity normal                       // normal|elevated (optional, default normal)

  capability "create-event" {
    resource   http "https://calendar.example.com/v3/calendars/{calendar}/events"
    operations POST
    lifetime   call
    justification "Creates exactly one calendar event per scheduling request."

    fieldEquals     resource.calendar in ["primary", "team"]
    actorBinding    payload.organizer.email == agent.email
    fieldMatches    payload.attendees[*].email ~ /[^@]+@example\.com/i
    fieldRange      payload.end - payload.start <= 2h
    payloadSchema   {
      "type": "object",
      "required": ["organizer", "attendees", "start", "end"],
      "properties": {
        "attendees":  { "type": "array", "maxItems": 50 },
        "recurrence": false
      }
    }
    rateLimit       10 per minute
    wallClockWindow mon-fri 09:00-17:00 "America/New_York"
  }
}
"#;

// ---------------------------------------------------------------------------------------------
// The SPEC example
// ---------------------------------------------------------------------------------------------

#[test]
fn spec_example_parses_to_the_expected_ast() {
    let file = parse_ok(SPEC_EXAMPLE);
    assert_eq!(file.skills.len(), 1);
    let skill = &file.skills[0];
    assert_eq!(skill.name.node, "meeting-scheduler");
    assert_eq!(at(SPEC_EXAMPLE, skill.name.span), (1, 7));
    assert_eq!(at(SPEC_EXAMPLE, skill.span), (1, 1));
    assert_eq!(skill.span.end as usize, SPEC_EXAMPLE.trim_end().len());
    assert_eq!(skill.version.as_ref().unwrap().node, "2.1.0");
    assert_eq!(
        at(SPEC_EXAMPLE, skill.version.as_ref().unwrap().span),
        (2, 15)
    );
    assert!(skill.hash.as_ref().unwrap().node.starts_with("sha256:0000"));
    assert_eq!(skill.signer.as_ref().unwrap().node, "ed25519:AAAA");
    assert_eq!(
        skill.risk.as_ref().unwrap().node,
        Risk::Label(RiskLabel::High)
    );
    assert_eq!(at(SPEC_EXAMPLE, skill.risk.as_ref().unwrap().span), (5, 15));
    assert_eq!(
        skill.sensitivity.as_ref().unwrap().node,
        Sensitivity::Normal
    );

    let cap = &skill.capabilities[0];
    assert_eq!(cap.name.node, "create-event");
    assert_eq!(at(SPEC_EXAMPLE, cap.span), (8, 3));
    let resource = cap.resource.as_ref().unwrap();
    assert_eq!(resource.node.kind, ResourceKind::Http);
    assert_eq!(
        resource.node.locator,
        "https://calendar.example.com/v3/calendars/{calendar}/events"
    );
    assert_eq!(at(SPEC_EXAMPLE, resource.span), (9, 5));
    assert_eq!(
        cap.operations
            .iter()
            .map(|o| o.node.as_str())
            .collect::<Vec<_>>(),
        ["POST"]
    );
    assert_eq!(at(SPEC_EXAMPLE, cap.operations[0].span), (10, 16));
    assert_eq!(at(SPEC_EXAMPLE, cap.operations_span.unwrap()), (10, 5));
    assert_eq!(cap.lifetime.as_ref().unwrap().node, Lifetime::Call(1));
    assert_eq!(
        cap.justification.as_ref().unwrap().node,
        "Creates exactly one calendar event per scheduling request."
    );
    assert_eq!(cap.risk, None);

    let names: Vec<&str> = cap.constraints.iter().map(|c| c.kind.name()).collect();
    assert_eq!(
        names,
        [
            "fieldEquals",
            "actorBinding",
            "fieldMatches",
            "fieldRange",
            "payloadSchema",
            "rateLimit",
            "wallClockWindow"
        ]
    );
    let lines: Vec<(u32, u32)> = cap
        .constraints
        .iter()
        .map(|c| at(SPEC_EXAMPLE, c.span))
        .collect();
    assert_eq!(
        lines,
        [
            (14, 5),
            (15, 5),
            (16, 5),
            (17, 5),
            (18, 5),
            (26, 5),
            (27, 5)
        ]
    );
    assert!(cap.constraints.iter().all(|c| !c.optional));

    match &cap.constraints[0].kind {
        ConstraintKind::FieldEquals {
            path: p,
            rhs: EqualsRhs::In(values),
        } => {
            assert_eq!(p.node, path("resource.calendar"));
            assert_eq!(at(SPEC_EXAMPLE, p.span), (14, 21));
            let values: Vec<_> = values.iter().map(|v| v.node.clone()).collect();
            assert_eq!(values, [json!("primary"), json!("team")]);
        }
        other => panic!("{other:?}"),
    }
    match &cap.constraints[1].kind {
        ConstraintKind::ActorBinding { paths, identity } => {
            assert_eq!(paths.len(), 1);
            assert_eq!(paths[0].node, path("payload.organizer.email"));
            assert_eq!(identity.node, path("agent.email"));
        }
        other => panic!("{other:?}"),
    }
    match &cap.constraints[2].kind {
        ConstraintKind::FieldMatches {
            path: p,
            pattern,
            case_insensitive,
        } => {
            assert_eq!(
                p.node.segments,
                [
                    Segment::Key("attendees".into()),
                    Segment::Wildcard,
                    Segment::Key("email".into())
                ]
            );
            assert_eq!(pattern.node, r"[^@]+@example\.com");
            assert_eq!(at(SPEC_EXAMPLE, pattern.span), (16, 50));
            assert!(*case_insensitive);
        }
        other => panic!("{other:?}"),
    }
    let (subject, bounds) = bounds_of(cap.constraints[3].kind.clone());
    match subject {
        RangeSubject::Difference(a, b) => {
            assert_eq!(a.node, path("payload.end"));
            assert_eq!(b.node, path("payload.start"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        bounds,
        [(CmpOp::Le, BoundValue::Duration(Duration::HOUR.mul2()))]
    );
    match &cap.constraints[4].kind {
        ConstraintKind::PayloadSchema(SchemaSource::Inline(schema)) => {
            assert_eq!(
                schema.node,
                json!({
                    "type": "object",
                    "required": ["organizer", "attendees", "start", "end"],
                    "properties": {
                        "attendees": { "type": "array", "maxItems": 50 },
                        "recurrence": false
                    }
                })
            );
            assert_eq!(at(SPEC_EXAMPLE, schema.span), (18, 21));
        }
        other => panic!("{other:?}"),
    }
    match &cap.constraints[5].kind {
        ConstraintKind::RateLimit(rate) => {
            assert_eq!(rate.count.node, 10);
            assert_eq!(rate.per.node, duration("1m"));
            assert_eq!(rate.burst, None);
            assert!(rate.by.is_empty());
        }
        other => panic!("{other:?}"),
    }
    match &cap.constraints[6].kind {
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            assert_eq!(zone.node, "America/New_York");
            assert_eq!(windows.len(), 1);
            assert_eq!(windows[0].days, DaySet(0b001_1111));
            assert_eq!(windows[0].start, TimeOfDay(9 * 60));
            assert_eq!(windows[0].end, TimeOfDay(17 * 60));
        }
        other => panic!("{other:?}"),
    }
}

trait Twice {
    fn mul2(self) -> Duration;
}

impl Twice for Duration {
    fn mul2(self) -> Duration {
        Duration {
            nanos: self.nanos * 2,
        }
    }
}

#[test]
fn several_skills_in_one_file_keep_file_order() {
    let file = parse_ok("skill \"a\" { version \"1\" }\nskill \"b\" { }\n");
    let names: Vec<_> = file.skills.iter().map(|s| s.name.node.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn a_file_without_skills_is_an_error() {
    assert_eq!(errors(""), ["1:1: no skill in file"]);
    assert_eq!(
        errors("// only a comment\n# and another\n"),
        ["1:1: no skill in file"]
    );
}

#[test]
fn a_byte_order_mark_at_the_start_is_ignored() {
    let file = parse_ok("\u{FEFF}skill \"a\" {}");
    assert_eq!(file.skills[0].name.node, "a");
}

// ---------------------------------------------------------------------------------------------
// Skill header and capability fields
// ---------------------------------------------------------------------------------------------

#[test]
fn header_fields_and_capabilities_may_interleave_in_any_order() {
    let text = r#"skill "s" {
  capability "one" { operations GET }
  sensitivity elevated
  capability "two" { operations GET }
  version "1.0"
  risk 75
}"#;
    let skill = parse_ok(text).skills.remove(0);
    assert_eq!(skill.capabilities.len(), 2);
    assert_eq!(skill.version.unwrap().node, "1.0");
    assert_eq!(skill.risk.unwrap().node, Risk::Score(75));
    assert_eq!(skill.sensitivity.unwrap().node, Sensitivity::Elevated);
}

#[test]
fn duplicate_header_fields_are_each_reported_with_their_name() {
    let text = "skill \"s\" {\n  version \"1\"\n  version \"2\"\n  risk low\n  risk high\n  hash \"a\"\n  hash \"b\"\n  signer \"a\"\n  signer \"b\"\n  sensitivity normal\n  sensitivity normal\n}";
    assert_eq!(
        errors(text),
        [
            "3:3: duplicate `version` in skill",
            "5:3: duplicate `risk` in skill",
            "7:3: duplicate `hash` in skill",
            "9:3: duplicate `signer` in skill",
            "11:3: duplicate `sensitivity` in skill",
        ]
    );
}

#[test]
fn duplicate_capability_fields_are_each_reported_with_their_name() {
    let body = "resource http \"https://a/\"\n    resource http \"https://b/\"\n    operations GET\n    operations POST\n    lifetime call\n    lifetime process\n    justification \"a\"\n    justification \"b\"\n    risk low\n    risk low\n    sensitivity normal\n    sensitivity elevated";
    assert_eq!(
        capability_errors(body),
        [
            "4:5: duplicate `resource` in capability",
            "6:5: duplicate `operations` in capability",
            "8:5: duplicate `lifetime` in capability",
            "10:5: duplicate `justification` in capability",
            "12:5: duplicate `risk` in capability",
            "14:5: duplicate `sensitivity` in capability",
        ]
    );
}

#[test]
fn missing_resource_and_operations_are_left_to_the_checker() {
    let cap = capability("justification \"nothing else\"");
    assert_eq!(cap.resource, None);
    assert!(cap.operations.is_empty());
    assert_eq!(cap.operations_span, None);
    assert_eq!(cap.lifetime, None);
}

#[test]
fn risk_accepts_every_label_and_any_whole_number() {
    for (label, expected) in RiskLabel::ALL.map(|(l, n)| (n, l)) {
        let skill = parse_ok(&format!("skill \"s\" {{ risk {label} }}"))
            .skills
            .remove(0);
        assert_eq!(skill.risk.unwrap().node, Risk::Label(expected));
    }
    for (text, score) in [("0", 0), ("100", 100), ("-5", -5), ("150", 150)] {
        let skill = parse_ok(&format!("skill \"s\" {{ risk {text} }}"))
            .skills
            .remove(0);
        assert_eq!(skill.risk.unwrap().node, Risk::Score(score));
    }
}

#[test]
fn risk_rejects_fractions_unknown_labels_and_huge_numbers() {
    assert_eq!(
        errors("skill \"s\" { risk 7.5 }"),
        [
            "1:18: expected a risk level (`none`, `low`, `medium`, `high`, `critical` or 0..100), found `7.5`"
        ]
    );
    let error = only_error("skill \"s\" { risk hihg }");
    assert_eq!(
        error.message,
        "unknown risk level `hihg`: expected none, low, medium, high, critical or a number from 0 to 100"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `high`?"));
    assert_eq!(
        errors("skill \"s\" { risk 99999999999999999999 }"),
        ["1:18: risk `99999999999999999999` is out of range"]
    );
}

#[test]
fn capability_risk_and_sensitivity_override_fields_parse() {
    let cap = capability("risk critical\n    sensitivity elevated");
    assert_eq!(cap.risk.unwrap().node, Risk::Label(RiskLabel::Critical));
    assert_eq!(cap.sensitivity.unwrap().node, Sensitivity::Elevated);
    assert_eq!(
        capability_errors("sensitivity high"),
        ["3:17: unknown sensitivity `high`: expected normal or elevated"]
    );
}

#[test]
fn resource_kinds_all_parse_and_a_repeated_kind_prefix_is_stripped() {
    for (kind, name) in ResourceKind::ALL {
        let cap = capability(&format!("resource {name} \"x/{{y}}\""));
        let resource = cap.resource.unwrap().node;
        assert_eq!(resource.kind, kind);
        assert_eq!(resource.locator, "x/{y}");
    }
    let db = capability("resource db \"db:crm/{org}/records\"")
        .resource
        .unwrap()
        .node;
    assert_eq!(db.locator, "crm/{org}/records");
    let tool = capability("resource tool \"tool:read_text_file\"")
        .resource
        .unwrap()
        .node;
    assert_eq!(tool.locator, "read_text_file");
    // Only the kind's own prefix is stripped; an http URL is always kept whole.
    let other = capability("resource db \"tool:x\"").resource.unwrap().node;
    assert_eq!(other.locator, "tool:x");
    let http = capability("resource http \"http://h/p\"")
        .resource
        .unwrap()
        .node;
    assert_eq!(http.locator, "http://h/p");
}

#[test]
fn unknown_resource_kind_is_an_error_with_a_suggestion() {
    let text = in_capability("resource htp \"https://x/\"");
    let error = only_error(&text);
    assert_eq!(at(&text, error.span), (3, 14));
    assert_eq!(
        error.message,
        "unknown resource kind `htp`: expected http, db, oauth, tool, service or secret"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `http`?"));
}

#[test]
fn operations_accept_dotted_names_and_quoted_scopes() {
    let cap = capability(
        "operations calendar.events.readonly, GET, call, read_all, x-y,\n      \"https://www.googleapis.com/auth/calendar\"",
    );
    let verbs: Vec<_> = cap.operations.iter().map(|v| v.node.as_str()).collect();
    assert_eq!(
        verbs,
        [
            "calendar.events.readonly",
            "GET",
            "call",
            "read_all",
            "x-y",
            "https://www.googleapis.com/auth/calendar"
        ]
    );
}

#[test]
fn operations_need_commas_between_verbs() {
    assert_eq!(
        capability_errors("operations GET POST"),
        [
            "3:20: expected a capability field (`resource`, `operations`, `lifetime`, `justification`, ...), a constraint, `}` or `,`, found `POST`"
        ]
    );
}

#[test]
fn every_lifetime_form_parses() {
    let lifetime = |text: &str| capability(text).lifetime.unwrap().node;
    assert_eq!(lifetime("lifetime call"), Lifetime::Call(1));
    assert_eq!(lifetime("lifetime call 5"), Lifetime::Call(5));
    assert_eq!(lifetime("lifetime transaction"), Lifetime::Transaction);
    assert_eq!(lifetime("lifetime process"), Lifetime::Process);
    assert_eq!(
        lifetime("lifetime wallClock 30m"),
        Lifetime::WallClock {
            duration: duration("30m"),
            renewable: false
        }
    );
    assert_eq!(
        lifetime("lifetime wallClock 2h renewable"),
        Lifetime::WallClock {
            duration: duration("2h"),
            renewable: true
        }
    );
}

#[test]
fn lifetime_errors_name_the_choices_and_bad_durations() {
    assert_eq!(
        capability_errors("lifetime forever"),
        [
            "3:14: expected a lifetime (`call`, `transaction`, `wallClock` or `process`), found `forever`"
        ]
    );
    assert_eq!(
        capability_errors("lifetime wallClock 2x"),
        ["3:24: invalid duration `2x`: unknown unit `x`, expected ms, s, m, h or d"]
    );
}

// ---------------------------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------------------------

#[test]
fn strings_decode_json_escapes_and_surrogate_pairs() {
    let cap =
        capability(r#"justification "tab\t quote\" slash\/ back\\ e\u00e9 smile\ud83d\ude00""#);
    assert_eq!(
        cap.justification.unwrap().node,
        "tab\t quote\" slash/ back\\ e\u{e9} smile\u{1F600}"
    );
}

#[test]
fn unicode_is_kept_in_strings_and_keys() {
    let text = in_capability(
        "justification \"Planifie une réunion — 会議\"\n    fieldEquals payload[\"名前\"] == \"José 🚀\"",
    );
    let cap = parse_ok(&text).skills.remove(0).capabilities.remove(0);
    assert_eq!(
        cap.justification.unwrap().node,
        "Planifie une réunion — 会議"
    );
    match &cap.constraints[0].kind {
        ConstraintKind::FieldEquals {
            path: p,
            rhs: EqualsRhs::Value(value),
        } => {
            assert_eq!(p.node.segments, [Segment::Key("名前".into())]);
            assert_eq!(value.node, json!("José 🚀"));
            // Columns count characters, not bytes.
            assert_eq!(at(&text, value.span), (4, 34));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn invalid_escapes_are_reported_at_the_escape() {
    assert_eq!(
        capability_errors(r#"justification "ab\qc""#),
        [r"3:22: invalid escape `\q` in a string"]
    );
    assert_eq!(
        capability_errors(r#"justification "\u12x""#),
        [r"3:20: invalid unicode escape `\u12` in a string: expected four hex digits after `\u`"]
    );
    assert_eq!(
        capability_errors(r#"justification "x\ud800""#),
        [
            r"3:21: unpaired surrogate `\uD800` in a string: a high surrogate must be followed by a low one"
        ]
    );
    // Two bad escapes in one string: both are reported.
    assert_eq!(capability_errors(r#"justification "\a\e""#).len(), 2);
}

#[test]
fn an_unterminated_string_is_reported_at_the_end_of_its_line() {
    assert_eq!(
        capability_errors("justification \"abc\n"),
        ["3:23: expected `\"` closing the string, found end of line"]
    );
}

#[test]
fn raw_control_characters_in_strings_are_errors() {
    assert_eq!(
        capability_errors("justification \"a\tb\""),
        ["3:21: control character U+0009 in a string"]
    );
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

fn equals_path(text: &str) -> Path {
    match kind(&format!("fieldEquals {text} == 1")) {
        ConstraintKind::FieldEquals { path, .. } => path.node,
        other => panic!("{other:?}"),
    }
}

#[test]
fn paths_follow_names_quoted_keys_indexes_and_wildcards() {
    let p = equals_path("payload.a_b$c-d[\"x y\"][3][*].e");
    assert_eq!(
        p.segments,
        [
            Segment::Key("a_b$c-d".into()),
            Segment::Key("x y".into()),
            Segment::Index(3),
            Segment::Wildcard,
            Segment::Key("e".into()),
        ]
    );
    for root in ["payload", "agent", "context", "resource", "request"] {
        assert_eq!(equals_path(root).root.name(), root);
    }
}

#[test]
fn odd_keys_in_brackets_are_plain_keys() {
    let p = equals_path(r#"payload["a.b"][""]["[*]"]["\"q\""]"#);
    assert_eq!(
        p.segments,
        [
            Segment::Key("a.b".into()),
            Segment::Key(String::new()),
            Segment::Key("[*]".into()),
            Segment::Key("\"q\"".into()),
        ]
    );
}

#[test]
fn unknown_roots_list_the_roots_and_suggest_the_closest() {
    let text = in_capability("fieldEquals paylod.x == 1");
    let error = only_error(&text);
    assert_eq!(at(&text, error.span), (3, 17));
    assert_eq!(
        error.message,
        "unknown path root `paylod`: expected payload, agent, context, resource or request"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `payload`?"));
    assert_eq!(
        only_error(&in_capability("fieldEquals body.x == 1")).help,
        None
    );
}

#[test]
fn malformed_path_segments_are_syntax_errors() {
    assert_eq!(
        capability_errors("fieldEquals payload. == 1"),
        ["3:25: expected a member name, found whitespace"]
    );
    assert_eq!(
        capability_errors("fieldEquals payload[99999999999999999999999] == 1"),
        ["3:25: number `99999999999999999999999` is too large"]
    );
}

// ---------------------------------------------------------------------------------------------
// fieldEquals and JSON literals
// ---------------------------------------------------------------------------------------------

fn equals_value(literal: &str) -> serde_json::Value {
    match kind(&format!("fieldEquals payload.x == {literal}")) {
        ConstraintKind::FieldEquals {
            rhs: EqualsRhs::Value(value),
            ..
        } => value.node,
        other => panic!("{other:?}"),
    }
}

#[test]
fn literals_are_full_json_values() {
    assert_eq!(equals_value("\"s\""), json!("s"));
    assert_eq!(equals_value("true"), json!(true));
    assert_eq!(equals_value("false"), json!(false));
    assert_eq!(equals_value("null"), json!(null));
    assert_eq!(equals_value("[1, \"a\", [], {}]"), json!([1, "a", [], {}]));
    assert_eq!(
        equals_value("{ \"a\": { \"b\": [null] }, \"c\": -1.5e3 }"),
        json!({"a": {"b": [null]}, "c": -1500.0})
    );
}

#[test]
fn numbers_keep_integers_apart_from_floats() {
    assert!(equals_value("1").as_u64() == Some(1));
    assert!(equals_value("-7").as_i64() == Some(-7));
    let float = equals_value("1.0");
    assert!(float.is_f64() && float.as_f64() == Some(1.0));
    assert_eq!(equals_value("2E-2").as_f64(), Some(0.02));
    assert_eq!(
        equals_value("18446744073709551615").as_u64(),
        Some(u64::MAX)
    );
}

#[test]
fn numbers_outside_the_float_range_and_leading_zeros_are_errors() {
    assert_eq!(
        capability_errors("fieldEquals payload.x == 1e400"),
        ["3:30: number `1e400` is out of range"]
    );
    assert!(capability_errors("fieldEquals payload.x == 01")[0].starts_with("3:30: expected"));
}

#[test]
fn field_equals_takes_a_list_or_another_path() {
    match kind("fieldEquals payload.x in [1, \"one\", null]") {
        ConstraintKind::FieldEquals {
            rhs: EqualsRhs::In(values),
            ..
        } => {
            let values: Vec<_> = values.into_iter().map(|v| v.node).collect();
            assert_eq!(values, [json!(1), json!("one"), json!(null)]);
        }
        other => panic!("{other:?}"),
    }
    match kind("fieldEquals payload.org == context.org") {
        ConstraintKind::FieldEquals {
            rhs: EqualsRhs::Path(other),
            ..
        } => assert_eq!(other.node, path("context.org")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn duplicate_keys_in_json_objects_are_errors() {
    assert_eq!(
        capability_errors("fieldEquals payload.x == {\"a\": 1, \"a\": 2}"),
        ["3:39: duplicate key `a` in object"]
    );
}

#[test]
fn json_syntax_errors_point_at_the_token() {
    assert_eq!(
        capability_errors("fieldEquals payload.x == [1, 2,]"),
        ["3:36: expected a JSON value, found `]`"]
    );
    assert_eq!(
        capability_errors("fieldEquals payload.x = 1"),
        ["3:27: expected `in` or `==`, found `=`"]
    );
}

// ---------------------------------------------------------------------------------------------
// fieldMatches
// ---------------------------------------------------------------------------------------------

fn regex_of(text: &str) -> (String, bool) {
    match kind(&format!("fieldMatches payload.x ~ {text}")) {
        ConstraintKind::FieldMatches {
            pattern,
            case_insensitive,
            ..
        } => (pattern.node, case_insensitive),
        other => panic!("{other:?}"),
    }
}

#[test]
fn regex_literals_keep_escapes_except_escaped_slashes() {
    assert_eq!(regex_of(r"/a\/b\.c\d+/"), (r"a/b\.c\d+".to_owned(), false));
    assert_eq!(regex_of("/[A-Z]+/i"), ("[A-Z]+".to_owned(), true));
    // `#` and `"` inside a regex are characters, not a comment or a string.
    assert_eq!(
        regex_of("/#\"x/ # trailing comment"),
        ("#\"x".to_owned(), false)
    );
}

#[test]
fn regex_flags_other_than_i_are_errors() {
    assert_eq!(
        capability_errors("fieldMatches payload.x ~ /a/g"),
        ["3:33: unknown regex flags `g`: only `i` is supported"]
    );
    assert_eq!(
        capability_errors("fieldMatches payload.x ~ /a/ii"),
        ["3:33: unknown regex flags `ii`: only `i` is supported"]
    );
}

#[test]
fn a_regex_may_not_span_lines() {
    assert_eq!(
        capability_errors("fieldMatches payload.x ~ /abc\n"),
        ["3:34: expected `/` closing the regex, found end of line"]
    );
}

// ---------------------------------------------------------------------------------------------
// fieldRange
// ---------------------------------------------------------------------------------------------

#[test]
fn field_range_single_bounds_take_numbers_or_now() {
    let (subject, bounds) = bounds_of(kind("fieldRange payload.amount <= 100"));
    assert_eq!(
        subject,
        RangeSubject::Field(capability_path("payload.amount", 3, 16))
    );
    assert_eq!(bounds, [(CmpOp::Le, number(json!(100)))]);
    let (_, bounds) = bounds_of(kind("fieldRange payload.expires > now"));
    assert_eq!(bounds, [(CmpOp::Gt, BoundValue::Now)]);
    let (_, bounds) = bounds_of(kind("fieldRange payload.t >= -0.5"));
    assert_eq!(bounds, [(CmpOp::Ge, number(json!(-0.5)))]);
}

fn capability_path(text: &str, line: u32, column: u32) -> capgate::syntax::ast::SpannedPath {
    // Rebuild the span the parser gives a path written at `line:column` of `in_capability`.
    let source = in_capability("");
    let line_start: usize = source
        .split_inclusive('\n')
        .take(line as usize - 1)
        .map(str::len)
        .sum();
    let start = line_start + column as usize - 1;
    capgate::syntax::ast::Spanned::new(path(text), Span::new(FileId(0), start, start + text.len()))
}

#[test]
fn field_range_between_is_normalised_with_the_subject_on_the_left() {
    let range = kind("fieldRange 0 < payload.x <= 10");
    let (subject, bounds) = bounds_of(range);
    assert!(matches!(subject, RangeSubject::Field(p) if p.node == path("payload.x")));
    assert_eq!(
        bounds,
        [
            (CmpOp::Gt, number(json!(0))),
            (CmpOp::Le, number(json!(10)))
        ]
    );
    let (_, bounds) = bounds_of(kind("fieldRange 10 >= payload.x > -1"));
    assert_eq!(
        bounds,
        [
            (CmpOp::Le, number(json!(10))),
            (CmpOp::Gt, number(json!(-1)))
        ]
    );
}

#[test]
fn field_range_between_bounds_carry_their_own_spans() {
    let text = in_capability("fieldRange 0 < payload.x <= 10");
    let cap = parse_ok(&text).skills.remove(0).capabilities.remove(0);
    match &cap.constraints[0].kind {
        ConstraintKind::FieldRange { bounds, .. } => {
            assert_eq!(at(&text, bounds[0].span), (3, 16));
            assert_eq!(at(&text, bounds[1].span), (3, 30));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn field_range_difference_takes_a_duration() {
    let (subject, bounds) = bounds_of(kind("fieldRange payload.end - payload.start < 90m"));
    assert!(matches!(subject, RangeSubject::Difference(a, b)
        if a.node == path("payload.end") && b.node == path("payload.start")));
    assert_eq!(bounds, [(CmpOp::Lt, BoundValue::Duration(duration("90m")))]);
}

#[test]
fn field_range_rejects_bounds_that_do_not_fit_the_subject() {
    assert_eq!(
        capability_errors("fieldRange payload.x <= 2h"),
        ["3:29: a duration bound `2h` needs a difference `PATH - PATH`"]
    );
    assert_eq!(
        capability_errors("fieldRange payload.a - payload.b <= 3"),
        ["3:41: the difference of two timestamps is bounded by a duration, found `3`"]
    );
    assert_eq!(
        capability_errors("fieldRange payload.a - payload.b <= now"),
        ["3:41: `now` bounds a single timestamp field, not a difference or a chained range"]
    );
    assert_eq!(
        capability_errors("fieldRange 0 < payload.a < now"),
        ["3:32: `now` bounds a single timestamp field, not a difference or a chained range"]
    );
    assert_eq!(
        capability_errors("fieldRange 10 > payload.x < 3"),
        [
            "3:16: `>` and `<` point different ways: write `LOW < PATH < HIGH` or `HIGH > PATH > LOW`"
        ]
    );
    assert_eq!(
        capability_errors("fieldRange payload.x = 3"),
        ["3:26: expected `-` or a comparison (`<`, `<=`, `>`, `>=`), found `=`"]
    );
}

// ---------------------------------------------------------------------------------------------
// payloadSchema, actorBinding, rateLimit, wallClockWindow
// ---------------------------------------------------------------------------------------------

#[test]
fn payload_schema_is_inline_json_a_boolean_or_a_file() {
    match kind("payloadSchema true") {
        ConstraintKind::PayloadSchema(SchemaSource::Inline(v)) => assert_eq!(v.node, json!(true)),
        other => panic!("{other:?}"),
    }
    match kind("payloadSchema false") {
        ConstraintKind::PayloadSchema(SchemaSource::Inline(v)) => assert_eq!(v.node, json!(false)),
        other => panic!("{other:?}"),
    }
    match kind("payloadSchema file \"schemas/event.json\"") {
        ConstraintKind::PayloadSchema(SchemaSource::File(f)) => {
            assert_eq!(f.node, "schemas/event.json");
        }
        other => panic!("{other:?}"),
    }
    match kind("payloadSchema { \"$ref\": \"#/$defs/x\", \"$defs\": { \"x\": {} } }") {
        ConstraintKind::PayloadSchema(SchemaSource::Inline(v)) => {
            assert_eq!(v.node, json!({"$ref": "#/$defs/x", "$defs": {"x": {}}}));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn actor_binding_takes_several_paths_and_an_agent_field() {
    match kind("actorBinding payload.organizer, payload[\"owner\"].id == agent.id") {
        ConstraintKind::ActorBinding { paths, identity } => {
            assert_eq!(paths.len(), 2);
            assert_eq!(paths[1].node, path("payload.owner.id"));
            assert_eq!(identity.node, path("agent.id"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn actor_binding_identity_must_be_a_field_of_agent() {
    assert_eq!(
        capability_errors("actorBinding payload.x == context.y"),
        ["3:31: `actorBinding` compares with a field of `agent`, found `context.y`"]
    );
    assert_eq!(
        capability_errors("actorBinding payload.x == agent"),
        ["3:31: `actorBinding` compares with a field of `agent`, found `agent`"]
    );
}

#[test]
fn rate_limits_take_units_durations_burst_and_keys() {
    match kind("rateLimit 5 per second") {
        ConstraintKind::RateLimit(rate) => {
            assert_eq!(rate.count.node, 5);
            assert_eq!(rate.per.node, duration("1s"));
        }
        other => panic!("{other:?}"),
    }
    for (unit, text) in [("minute", "1m"), ("hour", "1h"), ("day", "1d")] {
        match kind(&format!("rateLimit 1 per {unit}")) {
            ConstraintKind::RateLimit(rate) => assert_eq!(rate.per.node, duration(text)),
            other => panic!("{other:?}"),
        }
    }
    match kind("rateLimit 100 per 10s burst 20 by agent.id, context[\"org\"]") {
        ConstraintKind::RateLimit(rate) => {
            assert_eq!(rate.count.node, 100);
            assert_eq!(rate.per.node, duration("10s"));
            assert_eq!(rate.burst.unwrap().node, 20);
            let by: Vec<_> = rate.by.into_iter().map(|p| p.node).collect();
            assert_eq!(by, [path("agent.id"), path("context.org")]);
        }
        other => panic!("{other:?}"),
    }
    match kind("rateLimit 10 per minute by agent.id") {
        ConstraintKind::RateLimit(rate) => {
            assert_eq!(rate.burst, None);
            assert_eq!(rate.by.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rate_limit_errors_name_units_and_missing_numbers() {
    let error = only_error(&in_capability("rateLimit 10 per minutes"));
    assert_eq!(
        error.message,
        "unknown rate unit `minutes`: expected second, minute, hour, day or a duration such as `30s`"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `minute`?"));
    // The error is where the number should be, after skipping the line break.
    assert_eq!(
        capability_errors("rateLimit 10 per minute burst\n"),
        ["5:3: expected a whole number, found `}`"]
    );
    assert!(
        capability_errors("rateLimit -1 per minute")[0]
            .starts_with("3:15: expected a whole number")
    );
    assert_eq!(
        capability_errors("rateLimit 10 per 0x"),
        ["3:22: invalid duration `0x`: unknown unit `x`, expected ms, s, m, h or d"]
    );
}

#[test]
fn weekly_windows_take_days_times_and_an_optional_zone() {
    match kind("wallClockWindow mon-fri 09:00-17:00, sat 10:00-12:00") {
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            assert_eq!(zone.node, "UTC");
            assert_eq!(windows.len(), 2);
            assert_eq!(windows[1].days, DaySet(0b010_0000));
            assert_eq!(windows[1].start, TimeOfDay(600));
        }
        other => panic!("{other:?}"),
    }
    match kind("wallClockWindow fri-mon 22:00-06:00, daily 00:00-24:00 \"Europe/Paris\"") {
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            assert_eq!(zone.node, "Europe/Paris");
            assert_eq!(windows[0].days, DaySet(0b111_0001));
            assert_eq!(windows[0].end, TimeOfDay(360));
            assert_eq!(windows[1].days, DaySet::DAILY);
            assert_eq!(windows[1].end, TimeOfDay(1440));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn absolute_windows_take_bare_or_quoted_rfc3339_timestamps() {
    match kind("wallClockWindow from 2026-12-01T09:00:00Z until \"2026-12-01T10:30:00+02:00\"") {
        ConstraintKind::WallClockWindow(WindowSpec::Absolute { from, until }) => {
            assert_eq!(from.node.to_rfc3339(), "2026-12-01T09:00:00+00:00");
            assert_eq!(until.node.to_rfc3339(), "2026-12-01T10:30:00+02:00");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn window_errors_name_bad_days_times_and_timestamps() {
    assert_eq!(
        capability_errors("wallClockWindow mnday 09:00-17:00"),
        ["3:21: unknown day `mnday`: expected mon, tue, wed, thu, fri, sat, sun or daily"]
    );
    assert_eq!(
        capability_errors("wallClockWindow mon 9:00-17:00"),
        ["3:25: invalid time `9:00`: expected HH:MM between 00:00 and 24:00"]
    );
    assert_eq!(
        capability_errors("wallClockWindow mon 09:00-24:30"),
        ["3:31: invalid time `24:30`: expected HH:MM between 00:00 and 24:00"]
    );
    assert_eq!(
        capability_errors("wallClockWindow from 2026-13-01T09:00:00Z until 2026-12-01T10:00:00Z"),
        ["3:26: invalid timestamp `2026-13-01T09:00:00Z`: input is out of range"]
    );
    assert_eq!(
        capability_errors("wallClockWindow from 2026-12-01T09:00:00 until 2026-12-01T10:00:00Z"),
        ["3:26: invalid timestamp `2026-12-01T09:00:00`: premature end of input"]
    );
}

// ---------------------------------------------------------------------------------------------
// optional, combinators, nesting limits
// ---------------------------------------------------------------------------------------------

#[test]
fn optional_marks_the_constraint_and_starts_its_span() {
    let text = in_capability("optional fieldEquals payload.x == 1   // trailing comment");
    let cap = parse_ok(&text).skills.remove(0).capabilities.remove(0);
    let c = &cap.constraints[0];
    assert!(c.optional);
    assert_eq!(at(&text, c.span), (3, 5));
    assert_eq!(
        text.get(c.span.start as usize..c.span.end as usize),
        Some("optional fieldEquals payload.x == 1")
    );
}

#[test]
fn constraint_spans_end_at_the_last_token_not_at_trailing_comments() {
    let text = in_capability("rateLimit 10 per minute   # note\n    fieldEquals payload.x == 1");
    let cap = parse_ok(&text).skills.remove(0).capabilities.remove(0);
    let first = cap.constraints[0].span;
    assert_eq!(
        text.get(first.start as usize..first.end as usize),
        Some("rateLimit 10 per minute")
    );
}

#[test]
fn combinators_nest_and_keep_optional_inside() {
    let body = "any {\n      all { fieldEquals payload.a == 1  optional fieldEquals payload.b == 2 }\n      not { fieldMatches payload.c ~ /x/ }\n    }";
    match kind(body) {
        ConstraintKind::Any(items) => {
            assert_eq!(items.len(), 2);
            match &items[0].kind {
                ConstraintKind::All(inner) => {
                    assert_eq!(inner.len(), 2);
                    assert!(!inner[0].optional && inner[1].optional);
                }
                other => panic!("{other:?}"),
            }
            assert!(
                matches!(&items[1].kind, ConstraintKind::Not(c) if c.kind.name() == "fieldMatches")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(kind("any { }"), ConstraintKind::Any(v) if v.is_empty()));
    assert!(matches!(kind("all {}"), ConstraintKind::All(v) if v.is_empty()));
}

#[test]
fn not_takes_exactly_one_constraint() {
    assert_eq!(
        capability_errors("not { }"),
        ["3:5: `not` takes exactly one constraint, found 0"]
    );
    assert_eq!(
        capability_errors("not { fieldEquals payload.a == 1 fieldEquals payload.b == 1 }"),
        ["3:5: `not` takes exactly one constraint, found 2"]
    );
}

fn nested(depth: usize) -> String {
    let mut body = String::new();
    for _ in 0..depth {
        body.push_str("any { ");
    }
    body.push_str("fieldEquals payload.x == 1 ");
    for _ in 0..depth {
        body.push_str("} ");
    }
    body
}

#[test]
fn combinators_nest_up_to_64_levels() {
    let mut c = constraint(&nested(64));
    let mut levels = 0;
    while let ConstraintKind::Any(mut items) = c.kind {
        levels += 1;
        c = items.remove(0);
    }
    assert_eq!(levels, 64);
    assert_eq!(
        capability_errors(&nested(65)),
        ["3:389: `any` nested deeper than 64 levels of `any`, `all` and `not`"]
    );
}

#[test]
fn absurd_nesting_is_an_error_not_a_stack_overflow() {
    let body = "any { ".repeat(10_000);
    let found = capability_errors(&body);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].contains("nesting deeper than 128 levels"),
        "{found:?}"
    );
    let deep_json = format!(
        "fieldEquals payload.x == {}1{}",
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(capability_errors(&deep_json)[0].contains("nesting deeper than 128 levels"));
    // Just under the limit parses, even on a test thread's small stack.
    let ok_json = format!(
        "fieldEquals payload.x == {}1{}",
        "[".repeat(120),
        "]".repeat(120)
    );
    let _ = constraint(&ok_json);
}

#[test]
fn brackets_inside_strings_regexes_and_comments_do_not_count_as_nesting() {
    let text = in_capability(&format!(
        "justification \"{}\"\n    fieldMatches payload.x ~ /{}/\n    # {}\n    // {}",
        "{".repeat(300),
        "[".repeat(300),
        "{".repeat(300),
        "[".repeat(300)
    ));
    let _ = parse_ok(&text);
}

// ---------------------------------------------------------------------------------------------
// Comments and layout
// ---------------------------------------------------------------------------------------------

#[test]
fn comments_may_appear_between_any_tokens() {
    let text = r##"# leading
skill // after keyword
  "s" # after name
{
  capability "c" { // x
    operations // between
      GET, # after comma
      POST
    fieldEquals payload.x // before operator
      in [ // inside a list
        1, # after an element
        "a // not a comment", "# not one either"
      ]
    payloadSchema {
      // inside a schema
      "type": # between key and value
        "object"
    }
    resource http "https://h/a#b//c"
  }
}"##;
    let cap = parse_ok(text).skills.remove(0).capabilities.remove(0);
    assert_eq!(cap.operations.len(), 2);
    assert_eq!(cap.resource.unwrap().node.locator, "https://h/a#b//c");
    match &cap.constraints[0].kind {
        ConstraintKind::FieldEquals {
            rhs: EqualsRhs::In(values),
            ..
        } => assert_eq!(values[1].node, json!("a // not a comment")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn everything_may_sit_on_one_line() {
    let file = parse_ok(
        "skill \"s\" { version \"1\" capability \"c\" { resource tool \"x\" operations call fieldEquals payload.a == 1 rateLimit 1 per second } }",
    );
    assert_eq!(file.skills[0].capabilities[0].constraints.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Syntax errors
// ---------------------------------------------------------------------------------------------

#[test]
fn keyword_typos_get_a_did_you_mean() {
    let text = in_capability("resorce http \"x\"");
    let error = only_error(&text);
    assert_eq!(at(&text, error.span), (3, 5));
    assert_eq!(
        error.message,
        "expected a capability field (`resource`, `operations`, `lifetime`, `justification`, ...), a constraint or `}`, found `resorce`"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `resource`?"));
    let error = only_error(&in_capability("optional fieldEqual payload.x == 1"));
    assert_eq!(
        error.message,
        "expected a constraint after `optional`, found `fieldEqual`"
    );
    assert_eq!(error.help.as_deref(), Some("did you mean `fieldEquals`?"));
    let error = only_error("skil \"s\" {}");
    assert_eq!(error.message, "expected `skill`, found `skil`");
    assert_eq!(error.help.as_deref(), Some("did you mean `skill`?"));
}

#[test]
fn keywords_are_case_sensitive() {
    assert_eq!(
        errors("Skill \"s\" {}"),
        ["1:1: expected `skill`, found `Skill`"]
    );
    assert!(capability_errors("FieldEquals payload.x == 1")[0].starts_with("3:5: expected"));
}

#[test]
fn a_missing_closing_brace_is_reported_at_the_end_of_the_file() {
    assert_eq!(
        errors("skill \"s\" {\n  capability \"c\" {\n"),
        [
            "3:1: expected a capability field (`resource`, `operations`, `lifetime`, `justification`, ...), a constraint or `}`, found end of file"
        ]
    );
    assert_eq!(
        errors("skill \"s\" {\n"),
        [
            "2:1: expected a skill field (`version`, `hash`, `signer`, `risk`, `sensitivity`), `capability` or `}`, found end of file"
        ]
    );
}

#[test]
fn syntax_errors_say_what_each_construct_expects() {
    assert_eq!(
        capability_errors("payloadSchema \"x\""),
        ["3:19: expected `true`, `false`, `file` or `{`, found `\"`"]
    );
    assert_eq!(
        capability_errors("wallClockWindow 09:00-17:00"),
        ["3:21: expected days (`mon`, `mon-fri`, `daily`, ...) or `from`, found `09:00-17:00`"]
    );
    assert_eq!(
        capability_errors("rateLimit 10 minute"),
        ["3:18: expected `per`, found `minute`"]
    );
    assert_eq!(
        capability_errors("fieldMatches payload.x ~ abc"),
        ["3:30: expected a regex literal `/.../`, found `abc`"]
    );
    assert_eq!(
        capability_errors("actorBinding payload.x agent.id"),
        ["3:28: expected `,` or `==`, found `agent.id`"]
    );
}

#[test]
fn semicolons_are_not_separators() {
    let error = only_error(&in_capability("rateLimit 1 per day;"));
    assert!(error.message.ends_with("found `;`"), "{}", error.message);
    assert!(error.help.unwrap().contains("not `;`"));
}

#[test]
fn lowering_errors_are_all_collected() {
    let body = "resource ftp \"x\"\n    fieldEquals paylod.x == 1\n    rateLimit 1 per fortnight\n    wallClockWindow mon 25:00-26:00";
    assert_eq!(
        capability_errors(body),
        [
            "3:14: unknown resource kind `ftp`: expected http, db, oauth, tool, service or secret",
            "4:17: unknown path root `paylod`: expected payload, agent, context, resource or request",
            "5:21: unknown rate unit `fortnight`: expected second, minute, hour, day or a duration such as `30s`",
            "6:25: invalid time `25:00`: expected HH:MM between 00:00 and 24:00",
            "6:31: invalid time `26:00`: expected HH:MM between 00:00 and 24:00",
        ]
    );
}

/// The hint of the single error of `text`.
fn only_help(text: &str) -> String {
    only_error(text).help.unwrap_or_default()
}

#[test]
fn did_you_mean_suggests_one_keyword() {
    // A near miss gets one suggestion: the nearest keyword, the duration or the operator meant.
    for (body, help) in [
        ("rateLimit 5 per 2 hours", "did you mean `2h`?"),
        ("rateLimit 5 per 2hr", "did you mean `2h`?"),
        ("lifetime wallClock 1 hour 30 mins", "did you mean `1h30m`?"),
        ("fieldEquals payload.a = 1", "did you mean `==`?"),
        ("justifcation \"x\"", "did you mean `justification`?"),
        (
            "not fieldEquals payload.a == 1",
            "`not` takes one constraint in braces: `not { fieldEquals ... }`",
        ),
    ] {
        assert_eq!(only_help(&in_capability(body)), help, "{body}");
    }
    assert_eq!(
        only_help("skill s {\n}\n"),
        "did you mean `\"s\"`? names are quoted strings"
    );
    assert_eq!(
        only_help("skill \"s\" {\n  capability read_files {\n  }\n}\n"),
        "did you mean `\"read_files\"`? names are quoted strings"
    );
    // A word with nothing near gets no guess (`y` is two edits from `any`, but only one letter).
    let error = only_error(&in_capability("operations GET, x y"));
    assert_eq!(error.help, None, "{}", error.message);
}

#[test]
fn the_not_error_names_its_one_constraint() {
    let errors = parse(FileId(0), &in_capability("not { }")).unwrap_err();
    assert_eq!(
        errors[0].message,
        "`not` takes exactly one constraint, found 0"
    );
    assert!(
        errors[0]
            .help
            .as_deref()
            .unwrap()
            .contains("`not { fieldEquals ... }`")
    );
}

/// The bidirectional controls (`capgate::value::is_bidi_control`).
const BIDI: [char; 12] = [
    '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}',
    '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}',
];

/// A capability whose comment, regex and string literal may each carry a bidi control.
fn with_bidi(comment: &str, regex: &str, string: &str) -> String {
    in_capability(&format!(
        "// ok{comment}\n    fieldMatches payload.a ~ /a{regex}b/\n    fieldEquals payload.b == \"x{string}\""
    ))
}

#[test]
fn a_bidi_control_outside_a_string_is_a_compile_error() {
    // Trojan Source: a comment that seems to end before the constraint it hides.
    let errors = parse(FileId(0), &with_bidi("\u{202e} } \u{2066}// ", "", "")).unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0].message,
        "bidirectional control U+202E outside a string literal"
    );
    assert_eq!(at(&with_bidi("\u{202e}", "", ""), errors[0].span), (3, 10));
    assert!(errors[0].help.as_deref().unwrap().contains("`\\u202e`"));
    // In a regex literal and between tokens too.
    let errors = parse(FileId(0), &with_bidi("", "\u{2067}", "")).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("U+2067"), "{errors:?}");
    let errors = parse(
        FileId(0),
        &in_capability("\u{200f}fieldEquals payload.a == 1"),
    )
    .unwrap_err();
    assert_eq!(
        errors.len(),
        1,
        "said once, not again as a syntax error: {errors:?}"
    );
    // Inside a string literal it is a value the policy means (`capgate lint` flags it).
    parse_ok(&with_bidi("", "", "\u{202e}"));
}

proptest! {
    #[test]
    fn every_bidi_control_outside_a_string_is_refused_and_inside_one_is_read(
        bidi in proptest::sample::select(BIDI.to_vec()),
        place in 0_usize..3,
    ) {
        let text = bidi.to_string();
        let (comment, regex, string) = match place {
            0 => (text.as_str(), "", ""),
            1 => ("", text.as_str(), ""),
            _ => ("", "", text.as_str()),
        };
        let result = parse(FileId(0), &with_bidi(comment, regex, string));
        if place == 2 {
            prop_assert!(result.is_ok(), "{:?}", result);
        } else {
            let errors = result.unwrap_err();
            prop_assert_eq!(errors.len(), 1, "{:?}", errors);
            prop_assert!(errors[0].message.starts_with("bidirectional control U+"));
        }
    }
}

#[test]
fn a_cap_file_reports_every_error_in_one_pass() {
    // Two front-end errors and three the compiler finds (regex, schema, zone): all five at once.
    let text = "skill \"s\" {
  version \"1\"
  capability \"c\" {
    resource http \"https://api.example.com/x\"
    operations GET
    risk hgh
    fieldMatches payload.a ~ /(/
    payloadSchema { \"type\": \"strin\" }
    wallClockWindow mon-fri 09:00-17:00 \"Mars/Olympus\"
    fieldEquals payloads.a == 1
  }
}
";
    let mut loader = capgate::PolicyLoader::new(capgate::Limits::DEFAULT);
    loader.add_text("t.cap", text.to_owned(), capgate::PolicyFormat::Cap, None);
    let errors: Vec<String> = match loader.finish() {
        Ok(_) => panic!("expected errors, the policy loaded"),
        Err(error) => error
            .diagnostics
            .iter()
            .map(|d| d.message.clone())
            .collect(),
    };
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(errors[0].starts_with("unknown risk level `hgh`"));
    assert!(errors[1].starts_with("unknown path root `payloads`"));
    assert!(errors[2].starts_with("invalid regex `/(/`"));
    assert!(errors[3].starts_with("unknown type `\"strin\"`"));
    assert!(errors[4].starts_with("unknown time zone `Mars/Olympus`"));
}

#[test]
fn every_example_in_the_language_guide_parses() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/language.md")).unwrap();
    let mut examples = 0;
    for block in guide.split("```cap\n").skip(1) {
        let code = block.split("```").next().unwrap();
        if code.trim_start().starts_with("skill") {
            parse_ok(code);
        } else if parse(FileId(0), &in_capability(code)).is_err() {
            // A list of alternatives for one field: each line on its own must parse.
            for line in code.lines().filter(|l| !l.trim().is_empty()) {
                parse_ok(&in_capability(line));
            }
        }
        examples += 1;
    }
    assert!(examples >= 10, "only {examples} examples found");
}

// ---------------------------------------------------------------------------------------------
// Never panic
// ---------------------------------------------------------------------------------------------

const TOKENS: &[&str] = &[
    "skill",
    "capability",
    "\"s\"",
    "\"",
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ",",
    ":",
    "==",
    "~",
    "-",
    "<",
    "<=",
    ">",
    ">=",
    "/",
    "/a/i",
    "//",
    "#",
    "\n",
    " ",
    "\\",
    "\\u",
    "version",
    "risk",
    "high",
    "7.5",
    "-1",
    "1e999",
    "0",
    "99999999999999999999999",
    "resource",
    "http",
    "db",
    "operations",
    "GET",
    "lifetime",
    "call",
    "wallClock",
    "2h",
    "renewable",
    "optional",
    "fieldEquals",
    "fieldMatches",
    "fieldRange",
    "payloadSchema",
    "file",
    "actorBinding",
    "rateLimit",
    "per",
    "minute",
    "burst",
    "by",
    "wallClockWindow",
    "mon-fri",
    "09:00-17:00",
    "from",
    "until",
    "2026-12-01T09:00:00Z",
    "any",
    "all",
    "not",
    "now",
    "in",
    "payload",
    "agent.id",
    "payload.x",
    "[*]",
    "[\"k\"]",
    "[3]",
    "true",
    "null",
    "é",
    "\u{FEFF}",
    "\t",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse(FileId(0), &text);
    }

    #[test]
    fn token_soup_never_panics(indexes in proptest::collection::vec(0..TOKENS.len(), 0..120)) {
        let text: String = indexes.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
        let _ = parse(FileId(0), &text);
    }

    #[test]
    fn mutated_spec_example_never_panics(
        cut in 0..SPEC_EXAMPLE.len(),
        insert in 0..TOKENS.len(),
    ) {
        let mut text = SPEC_EXAMPLE.to_owned();
        if text.is_char_boundary(cut) {
            text.insert_str(cut, TOKENS[insert]);
        }
        let _ = parse(FileId(0), &text);
    }

    #[test]
    fn any_string_round_trips_through_a_justification(value in ".{0,40}") {
        let literal = serde_json::to_string(&value).unwrap();
        let cap = capability(&format!("justification {literal}"));
        prop_assert_eq!(cap.justification.unwrap().node, value);
    }
}

#[test]
fn regression_compound_durations_parse_wherever_a_duration_does() {
    // `1h30m` was rejected by the grammar (a duration was one number and one unit) although
    // the REPL's `:advance`, the `.captest` `advance` step and the JSON manifest form read it.
    assert_eq!(
        capability("lifetime wallClock 1h30m")
            .lifetime
            .unwrap()
            .node,
        Lifetime::WallClock {
            duration: duration("90m"),
            renewable: false
        }
    );
    match kind("rateLimit 10 per 1m30s burst 2") {
        ConstraintKind::RateLimit(rate) => assert_eq!(rate.per.node, duration("90s")),
        other => panic!("{other:?}"),
    }
    let (_, bounds) = bounds_of(kind("fieldRange payload.end - payload.start <= 1d12h"));
    assert_eq!(bounds, [(CmpOp::Le, BoundValue::Duration(duration("36h")))]);
    // Parts out of order, or a unit twice, are refused where they stand.
    assert_eq!(
        capability_errors("lifetime wallClock 30m1h"),
        ["3:24: invalid duration `30m1h`: write the parts from the largest unit down, each once"]
    );
    // Numbers with an exponent are still numbers, not durations.
    let (_, bounds) = bounds_of(kind("fieldRange payload.x <= 1e5"));
    assert_eq!(bounds, [(CmpOp::Le, number(json!(1e5)))]);
    let (_, bounds) = bounds_of(kind("fieldRange payload.x <= 1E+20"));
    assert_eq!(bounds, [(CmpOp::Le, number(json!(1e20)))]);
}
