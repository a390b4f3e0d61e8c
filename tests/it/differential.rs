//! Differential tests: the engine (both front ends → compiler → VM) against the AST-walking
//! reference evaluator (`capgate::reference`), on generated policies and requests biased toward
//! each policy's own boundaries; plus the VM cost bound of `docs/bytecode.md` on the same
//! programs.
//!
//! Each case builds one skill as an AST, prints it as `.cap` text and as a JSON manifest
//! (`manifest::skill_to_json_text`), loads both through `PolicyLoader` into stateless engines
//! with a simulated clock, and compares each engine's decision with the reference's: the same
//! verdict, the same deciding capability, and the same (capability, constraint) per reason.
//!
//! `CAPGATE_PROPTEST_CASES` raises the number of cases (default 1024, a few seconds in debug).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use capgate::bytecode::op::Op;
use capgate::reference::{self, ReferenceDecision, ReferenceFailure};
use capgate::span::Span;
use capgate::syntax::ast::{
    Bound, BoundValue, Capability, CmpOp, Constraint, ConstraintKind, DaySet, DayWindow, Duration,
    EqualsRhs, PolicyFile, RangeSubject, RateLimit, ResourceDecl, ResourceKind, Risk, RiskLabel,
    SchemaSource, Sensitivity, Skill, Spanned, TimeOfDay, WindowSpec,
};
use capgate::value::{Path, Root, Segment};
use capgate::vm::resource::{Bindings, RequestResource};
use capgate::vm::{Input, RegexBudget, VmError, run_counted};
use capgate::{Decision, Engine, PolicyFormat, PolicyLoader, Request, SimulatedClock, Verdict};
use chrono::{DateTime, FixedOffset, SecondsFormat, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Map, Number, Value, json};

// ---------------------------------------------------------------------------------------------
// A small deterministic generator, seeded by proptest.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn sp<T>(node: T) -> Spanned<T> {
    Spanned::new(node, Span::default())
}

// ---------------------------------------------------------------------------------------------
// Policy generation.

const KEYS: [&str; 8] = ["a", "b", "n", "a.b", "", "[*]", "x-y", "sk"];
const REGEXES: [(&str, &[&str]); 9] = [
    ("ab+c", &["abc", "abbbc"]),
    ("[a-z]{2,3}", &["ab", "xyz"]),
    ("x|xy", &["x", "xy"]),
    ("a.c", &["abc", "a-c"]),
    ("(foo|bar)-\\d+", &["foo-1", "bar-42"]),
    ("[^@]+@example\\.com", &["me@example.com"]),
    ("A[bc]", &["Ab", "Ac"]),
    ("é+", &["é", "éé"]),
    ("docs/[^/]+", &["docs/x"]),
];
const NUMBERS: [&str; 8] = [
    "0",
    "10",
    "-5",
    "2.5",
    "1000.0",
    "9007199254740993",
    "-0.5",
    "18446744073709551615",
];
const DURATIONS: [(&str, u64); 5] = [
    ("2h", 7_200_000_000_000),
    ("30m", 1_800_000_000_000),
    ("500ms", 500_000_000),
    ("1s", 1_000_000_000),
    ("0s", 0),
];
const DAYS: [(&str, u8); 6] = [
    ("mon-fri", 0b001_1111),
    ("sat", 0b010_0000),
    ("sun", 0b100_0000),
    ("daily", 0b111_1111),
    ("fri-mon", 0b111_0001),
    ("wed", 0b000_0100),
];
const TIMES: [u16; 9] = [0, 60, 120, 180, 360, 540, 1020, 1320, 1440];
const ZONES: [&str; 5] = [
    "UTC",
    "America/New_York",
    "Europe/Paris",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
];
const SCHEMAS: [&str; 9] = [
    r#"{"type": "object"}"#,
    r#"{"type": "object", "required": ["a"]}"#,
    r#"{"required": ["sk"], "dependentRequired": {"a": ["n"]}, "properties": {"b": {"type": "number"}}}"#,
    r#"{"properties": {"n": {"type": "number", "maximum": 10}}}"#,
    r#"{"properties": {"a": {"type": "string", "pattern": "^x"}}, "additionalProperties": {"type": "array"}}"#,
    r#"{"type": "array", "items": {"type": "integer"}}"#,
    r#"true"#,
    r#"false"#,
    r#"{"anyOf": [{"type": "null"}, {"type": "object", "maxProperties": 1}]}"#,
];

/// Instants each case may use as its clock, chosen around DST changes and weekday edges.
fn base_instants() -> Vec<DateTime<Utc>> {
    [
        "2026-03-08T06:30:00Z", // New York springs forward at 07:00Z
        "2026-11-01T05:30:00Z", // New York falls back at 06:00Z
        "2026-12-04T21:59:59Z", // a Friday evening in UTC
        "2026-12-07T00:00:00Z", // Monday midnight UTC
        "2026-04-05T15:30:00Z", // Lord Howe falls back half an hour
    ]
    .iter()
    .map(|t| t.parse().unwrap())
    .collect()
}

/// Everything a case generated: the skill and the values its requests should be built from.
struct Case {
    skill: Skill,
    now: DateTime<Utc>,
    /// Paths used by the policy, per root, to plant values along.
    paths: Vec<Path>,
    /// Leaf values near the policy's boundaries.
    pool: Vec<Value>,
    /// Values `resource.id` may take.
    ids: Vec<String>,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    now: DateTime<Utc>,
    paths: Vec<Path>,
    pool: Vec<Value>,
    ids: Vec<String>,
}

fn number(text: &str) -> Number {
    serde_json::from_str(text).unwrap()
}

fn timestamp_text(t: DateTime<Utc>, offset_minutes: i32) -> String {
    let offset = FixedOffset::east_opt(offset_minutes * 60).unwrap();
    t.with_timezone(&offset)
        .to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

impl Gen<'_> {
    fn key(&mut self) -> String {
        (*self.rng.pick(&KEYS)).to_owned()
    }

    fn json_path(&mut self, root: Root, many: bool) -> Path {
        let mut segments = Vec::new();
        for _ in 0..self.rng.below(4) {
            segments.push(match self.rng.below(10) {
                0 => Segment::Index(self.rng.below(2) as u64),
                1 | 2 if many => Segment::Wildcard,
                _ => Segment::Key(self.key()),
            });
        }
        if segments.is_empty() && root != Root::Payload {
            segments.push(Segment::Key(self.key()));
        }
        Path { root, segments }
    }

    fn path(&mut self, many: bool) -> Path {
        let path = match self.rng.below(12) {
            0 => Path {
                root: Root::Resource,
                segments: vec![Segment::Key("id".into())],
            },
            1 => Path {
                root: Root::Resource,
                segments: vec![Segment::Key("query".into()), Segment::Key("q".into())],
            },
            2 => Path {
                root: Root::Request,
                segments: vec![Segment::Key(
                    (*self.rng.pick(&["operation", "transaction", "skill"])).to_owned(),
                )],
            },
            3 => self.json_path(Root::Agent, many),
            4 => self.json_path(Root::Context, many),
            _ => self.json_path(Root::Payload, many),
        };
        self.paths.push(path.clone());
        path
    }

    fn literal(&mut self) -> Value {
        let value = match self.rng.below(12) {
            0 => json!(null),
            1 => json!(true),
            2 => json!(""),
            3 => json!("x"),
            4 => json!("X"),
            5 => json!([1, "a"]),
            6 => json!({"a": 1}),
            7 => json!("primary"),
            8 => json!("1"),
            _ => Value::Number(number(self.rng.pick::<&str>(&NUMBERS))),
        };
        self.note_value(&value);
        value
    }

    /// Adds a literal and its near neighbours to the pool.
    fn note_value(&mut self, value: &Value) {
        self.pool.push(value.clone());
        match value {
            Value::Number(n) => {
                let f = n.as_f64().unwrap();
                for delta in [-1.0, -0.5, 0.5, 1.0] {
                    self.pool.push(json!(f + delta));
                }
                self.pool.push(json!(f));
                if let Some(i) = n.as_i64() {
                    self.pool.push(json!(i.saturating_add(1)));
                    self.pool.push(json!(i.saturating_sub(1)));
                }
                if let Some(u) = n.as_u64() {
                    self.pool.push(json!(u.saturating_sub(1)));
                }
                self.pool.push(Value::String(n.to_string()));
            }
            Value::String(s) => {
                self.pool.push(json!(s.to_uppercase()));
                self.pool.push(json!(format!("{s} ")));
                self.ids.push(s.clone());
            }
            _ => {}
        }
    }

    fn near_misses(&mut self, sample: &str) {
        self.pool.push(json!(sample));
        self.ids.push(sample.to_owned());
        let chars: Vec<char> = sample.chars().collect();
        let variants = [
            format!("{sample}x"),
            format!("x{sample}"),
            format!("{sample}\n"),
            chars[1..].iter().collect(),
            chars[..chars.len() - 1].iter().collect(),
            sample.to_uppercase(),
            sample.to_lowercase(),
            {
                let mut c = chars.clone();
                let i = self.rng.below(c.len());
                c[i] = if c[i] == 'z' { 'a' } else { 'z' };
                c.into_iter().collect()
            },
        ];
        for v in variants {
            self.ids.push(v.clone());
            self.pool.push(Value::String(v));
        }
    }

    fn instant_texts(&mut self, t: DateTime<Utc>) {
        for delta_ns in [-1_000_000_000i64, -1, 0, 1, 1_000_000_000] {
            let shifted = t + chrono::Duration::nanoseconds(delta_ns);
            let offset = *self.rng.pick(&[0, 120, -300, 330]);
            self.pool
                .push(Value::String(timestamp_text(shifted, offset)));
        }
    }

    fn bound(&mut self, op: CmpOp, value: BoundValue) -> Bound {
        Bound {
            op,
            value,
            span: Span::default(),
        }
    }

    fn field_constraint(&mut self) -> ConstraintKind {
        match self.rng.below(11) {
            0 => ConstraintKind::FieldEquals {
                path: sp(self.path(true)),
                rhs: EqualsRhs::Value(sp(self.literal())),
            },
            1 => {
                let n = 1 + self.rng.below(3);
                let values = (0..n).map(|_| sp(self.literal())).collect();
                ConstraintKind::FieldEquals {
                    path: sp(self.path(true)),
                    rhs: EqualsRhs::In(values),
                }
            }
            2 => ConstraintKind::FieldEquals {
                path: sp(self.path(true)),
                rhs: EqualsRhs::Path(sp(self.path(false))),
            },
            3 | 4 => {
                let (pattern, samples) = *self.rng.pick(&REGEXES);
                for sample in samples {
                    self.near_misses(sample);
                }
                ConstraintKind::FieldMatches {
                    path: sp(self.path(true)),
                    pattern: sp(pattern.to_owned()),
                    case_insensitive: self.rng.chance(40),
                }
            }
            5 | 6 => {
                let ops = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge];
                let mut bounds = Vec::new();
                let a = number(self.rng.pick::<&str>(&NUMBERS));
                self.note_value(&Value::Number(a.clone()));
                if self.rng.chance(50) {
                    let op = *self.rng.pick(&ops);
                    bounds.push(self.bound(op, BoundValue::Number(a)));
                } else {
                    let b = number(self.rng.pick::<&str>(&NUMBERS));
                    self.note_value(&Value::Number(b.clone()));
                    let (lo, hi) = if a.as_f64() <= b.as_f64() {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    let lower = *self.rng.pick(&[CmpOp::Gt, CmpOp::Ge]);
                    let upper = *self.rng.pick(&[CmpOp::Lt, CmpOp::Le]);
                    bounds.push(self.bound(lower, BoundValue::Number(lo)));
                    bounds.push(self.bound(upper, BoundValue::Number(hi)));
                }
                ConstraintKind::FieldRange {
                    subject: RangeSubject::Field(sp(self.path(true))),
                    bounds,
                }
            }
            7 => {
                let now = self.now;
                self.instant_texts(now);
                let op = *self.rng.pick(&[CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge]);
                ConstraintKind::FieldRange {
                    subject: RangeSubject::Field(sp(self.path(true))),
                    bounds: vec![self.bound(op, BoundValue::Now)],
                }
            }
            8 => {
                let (_, nanos) = *self.rng.pick(&DURATIONS);
                let start = self.now;
                self.instant_texts(start);
                self.instant_texts(start + chrono::Duration::nanoseconds(nanos as i64));
                self.instant_texts(start - chrono::Duration::nanoseconds(nanos as i64));
                let op = *self.rng.pick(&[CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge]);
                ConstraintKind::FieldRange {
                    subject: RangeSubject::Difference(sp(self.path(false)), sp(self.path(false))),
                    bounds: vec![self.bound(op, BoundValue::Duration(Duration { nanos }))],
                }
            }
            _ => {
                let identity = Path {
                    root: Root::Agent,
                    segments: vec![Segment::Key((*self.rng.pick(&["id", "email"])).to_owned())],
                };
                self.paths.push(identity.clone());
                let n = 1 + self.rng.below(2);
                let paths = (0..n).map(|_| sp(self.path(true))).collect();
                for v in ["agent-7", "bot@example.com", "Agent-7"] {
                    self.pool.push(json!(v));
                }
                ConstraintKind::ActorBinding {
                    paths,
                    identity: sp(identity),
                }
            }
        }
    }

    fn window(&mut self) -> WindowSpec {
        if self.rng.chance(30) {
            let offsets = [
                -3_600_000_000_000i64,
                -1,
                0,
                1,
                1_000_000_000,
                86_400_000_000_000,
            ];
            let from = self.now + chrono::Duration::nanoseconds(*self.rng.pick(&offsets));
            let until = from
                + chrono::Duration::nanoseconds(1 + self.rng.below(2) as i64 * 7_200_000_000_000);
            let fixed = |t: DateTime<Utc>, minutes: i32| {
                t.with_timezone(&FixedOffset::east_opt(minutes * 60).unwrap())
            };
            return WindowSpec::Absolute {
                from: sp(fixed(from, *self.rng.pick(&[0, 60, -480]))),
                until: sp(fixed(until, *self.rng.pick(&[0, 330]))),
            };
        }
        let n = 1 + self.rng.below(2);
        let windows = (0..n)
            .map(|_| {
                let (_, days) = *self.rng.pick(&DAYS);
                let start = *self.rng.pick(&TIMES[..TIMES.len() - 1]);
                let mut end = *self.rng.pick(&TIMES);
                if end == start {
                    end = 1440;
                }
                DayWindow {
                    days: DaySet(days),
                    start: TimeOfDay(start),
                    end: TimeOfDay(end),
                    span: Span::default(),
                }
            })
            .collect();
        WindowSpec::Weekly {
            windows,
            zone: sp((*self.rng.pick(&ZONES)).to_owned()),
        }
    }

    fn constraint(&mut self, depth: usize) -> Constraint {
        let roll = self.rng.below(20);
        let kind = match roll {
            0 if depth < 3 => {
                let n = self.rng.below(4);
                ConstraintKind::Any((0..n).map(|_| self.constraint(depth + 1)).collect())
            }
            1 if depth < 3 => {
                let n = self.rng.below(4);
                ConstraintKind::All((0..n).map(|_| self.constraint(depth + 1)).collect())
            }
            2 if depth < 3 => ConstraintKind::Not(Box::new(self.constraint(depth + 1))),
            3 => ConstraintKind::PayloadSchema(SchemaSource::Inline(sp(serde_json::from_str(
                self.rng.pick::<&str>(&SCHEMAS),
            )
            .unwrap()))),
            4 => ConstraintKind::WallClockWindow(self.window()),
            _ => self.field_constraint(),
        };
        let field = matches!(
            kind,
            ConstraintKind::FieldEquals { .. }
                | ConstraintKind::FieldMatches { .. }
                | ConstraintKind::FieldRange { .. }
                | ConstraintKind::ActorBinding { .. }
        );
        Constraint {
            optional: field && self.rng.chance(30),
            kind,
            span: Span::default(),
        }
    }

    fn capability(&mut self, index: usize) -> Capability {
        let mut constraints: Vec<Constraint> =
            (0..self.rng.below(4)).map(|_| self.constraint(0)).collect();
        if self.rng.chance(10) {
            let by = Path {
                root: Root::Agent,
                segments: vec![Segment::Key("id".into())],
            };
            constraints.push(Constraint {
                kind: ConstraintKind::RateLimit(RateLimit {
                    count: sp(1),
                    per: sp(Duration {
                        nanos: 60_000_000_000,
                    }),
                    burst: None,
                    by: vec![sp(by)],
                }),
                optional: false,
                span: Span::default(),
            });
        }
        let operations = match self.rng.below(3) {
            0 => vec!["GET"],
            1 => vec!["POST"],
            _ => vec!["GET", "POST"],
        };
        let risk = |rng: &mut Rng| match rng.below(6) {
            0 => Some(sp(Risk::Label(RiskLabel::Low))),
            1 => Some(sp(Risk::Score(80))),
            _ => None,
        };
        Capability {
            name: sp(format!("c{index}")),
            resource: Some(sp(ResourceDecl {
                kind: ResourceKind::Http,
                locator: if self.rng.chance(85) {
                    "https://api.example.com/items/{id}".to_owned()
                } else {
                    "https://api.example.com/{id}/other".to_owned()
                },
            })),
            operations: operations.into_iter().map(|o| sp(o.to_owned())).collect(),
            operations_span: None,
            lifetime: None,
            justification: Some(sp("needed for the differential tests".to_owned())),
            risk: risk(self.rng),
            sensitivity: self.rng.chance(10).then(|| sp(Sensitivity::Elevated)),
            constraints,
            span: Span::default(),
        }
    }
}

fn generate_case(rng: &mut Rng) -> Case {
    let now = *rng.pick(&base_instants())
        + chrono::Duration::seconds(*rng.pick(&[0i64, 1800, 3600, -3600, 86_400]));
    let mut generator = Gen {
        rng,
        now,
        paths: Vec::new(),
        pool: Vec::new(),
        ids: vec!["primary".into(), "1".into()],
    };
    let capabilities = (0..1 + generator.rng.below(3))
        .map(|i| generator.capability(i))
        .collect();
    let risk = match generator.rng.below(5) {
        0 => Some(sp(Risk::Label(RiskLabel::High))),
        1 => Some(sp(Risk::Score(75))),
        _ => None,
    };
    let sensitivity = generator.rng.chance(5).then(|| sp(Sensitivity::Elevated));
    let skill = Skill {
        name: sp("s".to_owned()),
        version: Some(sp("1.0.0".to_owned())),
        hash: Some(sp("sha256:abc".to_owned())),
        signer: None,
        risk,
        sensitivity,
        capabilities,
        span: Span::default(),
    };
    let mut pool = generator.pool;
    pool.extend([
        json!(null),
        json!(1),
        json!("a"),
        json!([]),
        json!({}),
        json!(true),
        json!(-0.0),
        json!([10]),
        json!("2026-12-31T23:59:60Z"),
        json!("2026-12-04T21:59:59.999999999-00:00"),
        json!("2026-12-04 21:59:59Z"),
    ]);
    Case {
        skill,
        now,
        paths: generator.paths,
        pool,
        ids: generator.ids,
    }
}

// ---------------------------------------------------------------------------------------------
// `.cap` printing.

fn cap_path(path: &Path) -> String {
    path.to_string()
}

fn cap_constraint(c: &Constraint, out: &mut String) {
    if c.optional {
        out.push_str("optional ");
    }
    match &c.kind {
        ConstraintKind::FieldEquals { path, rhs } => {
            out.push_str(&format!("fieldEquals {} ", cap_path(&path.node)));
            match rhs {
                EqualsRhs::Value(v) => out.push_str(&format!("== {}", v.node)),
                EqualsRhs::In(vs) => {
                    let items: Vec<String> = vs.iter().map(|v| v.node.to_string()).collect();
                    out.push_str(&format!("in [{}]", items.join(", ")));
                }
                EqualsRhs::Path(p) => out.push_str(&format!("== {}", cap_path(&p.node))),
            }
        }
        ConstraintKind::FieldMatches {
            path,
            pattern,
            case_insensitive,
        } => out.push_str(&format!(
            "fieldMatches {} ~ /{}/{}",
            cap_path(&path.node),
            pattern.node.replace('/', "\\/"),
            if *case_insensitive { "i" } else { "" }
        )),
        ConstraintKind::FieldRange { subject, bounds } => {
            let value = |b: &Bound| match &b.value {
                BoundValue::Number(n) => n.to_string(),
                BoundValue::Duration(d) => DURATIONS
                    .iter()
                    .find(|(_, nanos)| *nanos == d.nanos)
                    .unwrap()
                    .0
                    .to_owned(),
                BoundValue::Now => "now".to_owned(),
            };
            match (subject, bounds.as_slice()) {
                (RangeSubject::Field(p), [b]) => out.push_str(&format!(
                    "fieldRange {} {} {}",
                    cap_path(&p.node),
                    b.op.symbol(),
                    value(b)
                )),
                (RangeSubject::Field(p), [lo, hi]) => {
                    let flipped = if lo.op == CmpOp::Gt { "<" } else { "<=" };
                    out.push_str(&format!(
                        "fieldRange {} {flipped} {} {} {}",
                        value(lo),
                        cap_path(&p.node),
                        hi.op.symbol(),
                        value(hi)
                    ));
                }
                (RangeSubject::Difference(a, b), [bound]) => out.push_str(&format!(
                    "fieldRange {} - {} {} {}",
                    cap_path(&a.node),
                    cap_path(&b.node),
                    bound.op.symbol(),
                    value(bound)
                )),
                _ => unreachable!("the generator writes one or two bounds"),
            }
        }
        ConstraintKind::PayloadSchema(SchemaSource::Inline(schema)) => {
            out.push_str(&format!("payloadSchema {}", schema.node));
        }
        ConstraintKind::PayloadSchema(SchemaSource::File(_)) => unreachable!(),
        ConstraintKind::ActorBinding { paths, identity } => {
            let list: Vec<String> = paths.iter().map(|p| cap_path(&p.node)).collect();
            out.push_str(&format!(
                "actorBinding {} == {}",
                list.join(", "),
                cap_path(&identity.node)
            ));
        }
        ConstraintKind::RateLimit(limit) => {
            let by: Vec<String> = limit.by.iter().map(|p| cap_path(&p.node)).collect();
            out.push_str(&format!(
                "rateLimit {} per minute by {}",
                limit.count.node,
                by.join(", ")
            ));
        }
        ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
            let list: Vec<String> = windows
                .iter()
                .map(|w| {
                    let days = DAYS.iter().find(|(_, bits)| *bits == w.days.0).unwrap().0;
                    let time = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
                    format!("{days} {}-{}", time(w.start.0), time(w.end.0))
                })
                .collect();
            out.push_str(&format!(
                "wallClockWindow {} \"{}\"",
                list.join(", "),
                zone.node
            ));
        }
        ConstraintKind::WallClockWindow(WindowSpec::Absolute { from, until }) => {
            out.push_str(&format!(
                "wallClockWindow from {} until {}",
                from.node.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                until.node.to_rfc3339_opts(SecondsFormat::AutoSi, true)
            ));
        }
        ConstraintKind::Any(items) | ConstraintKind::All(items) => {
            out.push_str(if matches!(c.kind, ConstraintKind::Any(_)) {
                "any {"
            } else {
                "all {"
            });
            for item in items {
                out.push('\n');
                cap_constraint(item, out);
            }
            out.push_str("\n}");
        }
        ConstraintKind::Not(inner) => {
            out.push_str("not { ");
            cap_constraint(inner, out);
            out.push_str(" }");
        }
    }
}

fn cap_risk(risk: &Risk) -> String {
    match risk {
        Risk::Label(label) => label.name().to_owned(),
        Risk::Score(n) => n.to_string(),
    }
}

fn cap_text(skill: &Skill) -> String {
    let mut out = format!(
        "skill \"{}\" {{\n  version \"1.0.0\"\n  hash \"sha256:abc\"\n",
        skill.name.node
    );
    if let Some(risk) = &skill.risk {
        out.push_str(&format!("  risk {}\n", cap_risk(&risk.node)));
    }
    if skill.sensitivity.is_some() {
        out.push_str("  sensitivity elevated\n");
    }
    for capability in &skill.capabilities {
        let resource = capability.resource.as_ref().unwrap();
        let ops: Vec<&str> = capability
            .operations
            .iter()
            .map(|o| o.node.as_str())
            .collect();
        out.push_str(&format!(
            "  capability \"{}\" {{\n    resource http \"{}\"\n    operations {}\n    justification \"{}\"\n",
            capability.name.node,
            resource.node.locator,
            ops.join(", "),
            capability.justification.as_ref().unwrap().node
        ));
        if let Some(risk) = &capability.risk {
            out.push_str(&format!("    risk {}\n", cap_risk(&risk.node)));
        }
        if capability.sensitivity.is_some() {
            out.push_str("    sensitivity elevated\n");
        }
        for constraint in &capability.constraints {
            out.push_str("    ");
            cap_constraint(constraint, &mut out);
            out.push('\n');
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

// ---------------------------------------------------------------------------------------------
// Request generation.

fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().unwrap()
}

fn ensure_array(value: &mut Value) -> &mut Vec<Value> {
    if !value.is_array() {
        *value = Value::Array(Vec::new());
    }
    value.as_array_mut().unwrap()
}

/// Sets values along `segments`, sometimes leaving a step absent or of the wrong shape.
fn plant(value: &mut Value, segments: &[Segment], rng: &mut Rng, pool: &[Value]) {
    let Some((first, rest)) = segments.split_first() else {
        *value = rng.pick(pool).clone();
        return;
    };
    if rng.chance(6) {
        // Wrong shape (or null) right here.
        *value = rng
            .pick(&[json!(null), json!("s"), json!(3), json!([]), json!({})])
            .clone();
        return;
    }
    match first {
        Segment::Key(key) => {
            let map = ensure_object(value);
            if rng.chance(8) {
                return; // absent
            }
            // A case variant of the name beside it (two names an upstream that binds members
            // case-insensitively may read either of), or in its place (a name it reads as this
            // one where capgate finds none).
            if rng.chance(3)
                && let Some(variant) = case_variant(key, rng)
            {
                map.insert(variant, rng.pick(pool).clone());
            }
            let name = match case_variant(key, rng) {
                Some(variant) if rng.chance(4) => variant,
                _ => key.clone(),
            };
            plant(map.entry(name).or_insert(Value::Null), rest, rng, pool);
        }
        Segment::Index(i) => {
            let items = ensure_array(value);
            let want = *i as usize + usize::from(!rng.chance(12));
            while items.len() < want {
                items.push(rng.pick(pool).clone());
            }
            if let Some(item) = items.get_mut(*i as usize) {
                plant(item, rest, rng, pool);
            }
        }
        Segment::Wildcard => {
            let items = ensure_array(value);
            if items.is_empty() {
                for _ in 0..rng.below(3) {
                    items.push(Value::Null);
                }
            }
            for item in items.iter_mut() {
                plant(item, rest, rng, pool);
            }
        }
    }
}

/// A spelling of `name` other than `name` that is equal to it under simple case folding (some
/// letters' case flipped, `k` as the KELVIN SIGN, `s` as LONG S); `None` for a name without
/// letters.
fn case_variant(name: &str, rng: &mut Rng) -> Option<String> {
    let letters = name.chars().filter(char::is_ascii_alphabetic).count();
    if letters == 0 {
        return None;
    }
    let must = rng.below(letters);
    let mut seen = 0;
    let variant: String = name
        .chars()
        .map(|c| {
            if !c.is_ascii_alphabetic() {
                return c;
            }
            seen += 1;
            if seen - 1 != must && rng.chance(50) {
                return c;
            }
            match c {
                'k' | 'K' if rng.chance(30) => '\u{212A}',
                's' | 'S' if rng.chance(30) => '\u{17F}',
                _ if c.is_ascii_lowercase() => c.to_ascii_uppercase(),
                _ => c.to_ascii_lowercase(),
            }
        })
        .collect();
    Some(variant)
}

fn document(case: &Case, root: Root, rng: &mut Rng) -> Value {
    if rng.chance(8) {
        return Value::Null;
    }
    let mut value = Value::Object(Map::new());
    for path in case.paths.iter().filter(|p| p.root == root) {
        if rng.chance(80) {
            plant(&mut value, &path.segments, rng, &case.pool);
        }
    }
    if root == Root::Agent {
        let map = ensure_object(&mut value);
        if rng.chance(60) {
            map.insert(
                "id".into(),
                rng.pick(&[json!("agent-7"), json!("Agent-7"), json!(7)])
                    .clone(),
            );
        }
        if rng.chance(60) {
            map.insert("email".into(), json!("bot@example.com"));
        }
    }
    if root != Root::Payload && rng.chance(1) {
        return json!("not an object");
    }
    value
}

fn generate_request(case: &Case, rng: &mut Rng) -> Request {
    let skill = if rng.chance(2) { "other" } else { "s" };
    let operation = if rng.chance(5) {
        "DELETE"
    } else {
        *rng.pick(&["GET", "POST"])
    };
    let id = if rng.chance(70) {
        rng.pick(&case.ids).clone()
    } else {
        rng.pick(&["primary", "x", "1", "a%20b", "..", "%2F"])
            .to_string()
    };
    let encoded: String = id
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'@' || b == b'.' || b == b'%' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let query = match rng.below(5) {
        0 => String::new(),
        1 => "?q=a&q=b".to_owned(),
        2 => "?other=1".to_owned(),
        _ => format!("?q={encoded}"),
    };
    let path = if rng.chance(97) { "items" } else { "elsewhere" };
    let mut request = Request::new(
        skill,
        operation,
        format!("https://api.example.com/{path}/{encoded}{query}"),
    );
    request.payload = if rng.chance(5) {
        Value::Null
    } else {
        document(case, Root::Payload, rng)
    };
    request.agent = document(case, Root::Agent, rng);
    request.context = document(case, Root::Context, rng);
    if rng.chance(50) {
        request.transaction = Some(rng.pick(&case.ids).clone());
    }
    request.autonomy = match rng.below(20) {
        0 | 1 => None,
        2 => Some(json!(80)),
        3 => Some(json!(79)),
        4 => Some(json!(60)),
        5 => Some(json!(100.0)),
        6 => Some(json!(101)),
        8..=12 => Some(json!(100)),
        7 => Some(json!(75)),
        _ => Some(json!(90)),
    };
    if rng.chance(2) {
        request.skill_hash = Some("sha256:other".into());
    }
    request
}

// ---------------------------------------------------------------------------------------------
// Loading, comparing, counting.

fn load(name: &str, text: String, format: PolicyFormat, clock: &Arc<SimulatedClock>) -> Engine {
    let mut loader = PolicyLoader::default();
    loader.add_text(name, text.clone(), format, None);
    let loaded = loader
        .finish()
        .unwrap_or_else(|e| panic!("generated policy does not load:\n{e}\n--- {name}:\n{text}"));
    Engine::builder(loaded).clock(clock.clone()).build()
}

fn weekly_windows<'a>(constraints: &'a [Constraint], out: &mut Vec<(&'a DayWindow, &'a str)>) {
    for c in constraints {
        match &c.kind {
            ConstraintKind::WallClockWindow(WindowSpec::Weekly { windows, zone }) => {
                out.extend(windows.iter().map(|w| (w, zone.node.as_str())));
            }
            ConstraintKind::Any(items) | ConstraintKind::All(items) => weekly_windows(items, out),
            ConstraintKind::Not(inner) => weekly_windows(std::slice::from_ref(&**inner), out),
            _ => {}
        }
    }
}

/// An instant at (or a nanosecond or a second either side of) the start or end of one of the
/// policy's weekly windows, on some day of the week of `base`; `None` when the policy has none
/// or the local time does not exist that day.
fn window_edge(skill: &Skill, base: DateTime<Utc>, rng: &mut Rng) -> Option<DateTime<Utc>> {
    let mut windows = Vec::new();
    for capability in &skill.capabilities {
        weekly_windows(&capability.constraints, &mut windows);
    }
    if windows.is_empty() {
        return None;
    }
    let (window, zone) = *rng.pick(&windows);
    let zone: chrono_tz::Tz = zone.parse().ok()?;
    let minutes = i64::from(if rng.chance(50) {
        window.start.0
    } else {
        window.end.0
    });
    let day = base.date_naive() + chrono::Duration::days(rng.below(8) as i64 - 1);
    let local = day.and_hms_opt(0, 0, 0)? + chrono::Duration::minutes(minutes);
    let mapped = zone.from_local_datetime(&local);
    let instant = if rng.chance(50) {
        mapped.earliest()?
    } else {
        mapped.latest()?
    };
    let delta = *rng.pick(&[-1_000_000_000i64, -1, 0, 0, 1, 1_000_000_000]);
    Some(instant.with_timezone(&Utc) + chrono::Duration::nanoseconds(delta))
}

fn engine_view(decision: &Decision) -> ReferenceDecision {
    ReferenceDecision {
        verdict: decision.verdict,
        capability: decision.capability.as_deref().map(str::to_owned),
        failures: decision
            .reasons
            .iter()
            .map(|r| ReferenceFailure {
                capability: r.capability.as_deref().map(str::to_owned),
                constraint: r.constraint.as_str(),
            })
            .collect(),
    }
}

fn json_nodes(value: &Value) -> u64 {
    1 + match value {
        Value::Array(items) => items.iter().map(json_nodes).sum(),
        Value::Object(map) => map.values().map(json_nodes).sum(),
        _ => 0,
    }
}

/// The cost bound of `docs/bytecode.md`, on every capability the request reaches.
fn check_cost_bound(engine: &Engine, request: &Request, now: DateTime<Utc>) {
    let Ok(resource) = RequestResource::parse(&request.resource) else {
        return;
    };
    let policy = engine.policy();
    let skill = policy.skill("s").unwrap();
    let n =
        json_nodes(&request.payload) + json_nodes(&request.agent) + json_nodes(&request.context);
    for capability in &skill.capabilities {
        let mut bindings = Bindings::new();
        if !capability.resource().matches(&resource, &mut bindings) {
            // The program still runs over the request; bindings are just empty.
            bindings = Bindings::new();
        }
        let input = Input {
            payload: &request.payload,
            agent: &request.agent,
            context: &request.context,
            resource: &resource,
            bindings: &bindings,
            skill: &request.skill,
            operation: &request.operation,
            transaction: request.transaction.as_deref(),
            now,
            max_array_scan: engine.limits().max_array_scan,
            regex_budget: &RegexBudget::unlimited(),
            refuse_case_variants: engine.limits().refuse_case_variant_reads,
        };
        let program = capability.program().program();
        let tests = program
            .code
            .iter()
            .filter(|op| {
                !matches!(
                    op,
                    Op::Push(_)
                        | Op::Not
                        | Op::OrElse { .. }
                        | Op::AndThen { .. }
                        | Op::Require { .. }
                        | Op::Accept
                )
            })
            .count() as u64;
        let steps = match run_counted(capability.program(), &input) {
            Ok((_, steps)) => steps,
            // A case variant of a name read refuses the request: no outcome to bound.
            Err(VmError::CaseVariant { .. }) => continue,
            Err(error) => panic!("{error}"),
        };
        assert!(
            steps.instructions <= program.code.len() as u64,
            "{} instructions for a program of {}",
            steps.instructions,
            program.code.len()
        );
        assert!(
            steps.visits <= tests * (n + 2),
            "{} visits > {tests} tests x ({n} nodes + 2)",
            steps.visits
        );
    }
}

fn run_case(seed: u64) {
    let mut rng = Rng(seed);
    let case = generate_case(&mut rng);
    let cap = cap_text(&case.skill);
    let json = capgate::manifest::skill_to_json_text(&case.skill).unwrap();
    let clock = Arc::new(SimulatedClock::new(case.now));
    let from_cap = load("gen.cap", cap.clone(), PolicyFormat::Cap, &clock);
    let from_json = load("gen.json", json, PolicyFormat::Json, &clock);
    let files = [PolicyFile {
        skills: vec![case.skill.clone()],
    }];
    for _ in 0..8 {
        let request = generate_request(&case, &mut rng);
        // Half the requests are decided at the edge of one of the policy's windows.
        let now = match window_edge(&case.skill, case.now, &mut rng) {
            Some(edge) if rng.chance(50) => edge,
            _ => case.now,
        };
        clock.set(now);
        let expected = reference::decide(&files, &request, now);
        for (front_end, engine) in [("cap", &from_cap), ("json", &from_json)] {
            let got = engine_view(&engine.check(&request));
            assert_eq!(
                got,
                expected,
                "the engine ({front_end}) and the reference disagree (seed {seed})\n--- policy:\n{cap}--- now: {}\n--- request:\n{}",
                now.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                serde_json::to_string_pretty(&request).unwrap()
            );
        }
        // From bytes: the tape path alone must decide exactly as `check` on the parsed
        // request — verdict and reasons — and so must `check_slice`.
        let parsed = from_cap.check(&request);
        let compact = serde_json::to_vec(&request).unwrap();
        let pretty = serde_json::to_vec_pretty(&request).unwrap();
        // Members in reverse name order: a tape keeps input order where a `Value` sorts, and
        // reasons must not depend on it.
        let mut reversed = String::new();
        write_reversed(&serde_json::to_value(&request).unwrap(), &mut reversed);
        let reversed = reversed.into_bytes();
        // Every character outside ASCII escaped (`\u212a`), member names included.
        let escaped = escape_non_ascii(&String::from_utf8(compact.clone()).unwrap()).into_bytes();
        // Two member names of one object equal up to case: the request parsers refuse it
        // (`input`), the tape's first of all, whatever `check` makes of the request as built.
        let strict =
            Request::from_value(serde_json::to_value(&request).unwrap(), from_cap.limits());
        if let Err(error) = strict {
            assert!(
                matches!(error, capgate::RequestError::CaseVariantMembers { .. }),
                "{error}"
            );
            for bytes in [&compact, &pretty, &reversed, &escaped] {
                assert_eq!(from_cap.check_slice_tape_only(bytes), None, "seed {seed}");
                let decision = from_cap.check_slice(bytes);
                assert_eq!(decision.verdict, Verdict::Deny);
                assert_eq!(
                    engine_view(&decision).failures,
                    [ReferenceFailure {
                        capability: None,
                        constraint: "input"
                    }]
                );
                let value = serde_json::from_slice(bytes).unwrap();
                assert_eq!(from_cap.check_value(value), decision, "seed {seed}");
            }
            check_cost_bound(&from_cap, &request, now);
            continue;
        }
        for bytes in [&compact, &pretty, &reversed, &escaped] {
            let tape = from_cap
                .check_slice_tape_only(bytes)
                .expect("the tape path reads every generated request");
            assert_eq!(
                engine_view(&tape),
                engine_view(&parsed),
                "the tape path and `check` disagree (seed {seed})\n--- policy:\n{cap}--- request:\n{}",
                String::from_utf8_lossy(&pretty)
            );
            assert_eq!(
                from_cap.check_slice(bytes),
                parsed,
                "check_slice (seed {seed})"
            );
        }
        check_cost_bound(&from_cap, &request, now);
    }
}

/// `json` with every character outside ASCII written as a `\u` escape (a surrogate pair
/// beyond the BMP); JSON text outside strings is ASCII, so only strings change.
fn escape_non_ascii(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Writes `value` as JSON with every object's members in reverse name order.
fn write_reversed(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            out.push('{');
            for (i, (key, member)) in map.iter().rev().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).unwrap());
                out.push(':');
                write_reversed(member, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_reversed(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).unwrap()),
    }
}

fn cases() -> u32 {
    std::env::var("CAPGATE_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// The engine, through both front ends, decides every generated request as the reference
    /// does, and stays within the documented cost bound.
    #[test]
    fn engine_agrees_with_the_reference(seed in any::<u64>()) {
        run_case(seed);
    }
}

// ---------------------------------------------------------------------------------------------
// The reference on its own: a few hand-checked decisions, so a bug shared by both sides of the
// comparison would still show.

fn reference_decide(cap: &str, request: &Request, now: &str) -> ReferenceDecision {
    let file = capgate::syntax::parse(capgate::span::FileId::default(), cap).unwrap();
    reference::decide(&[file], request, now.parse().unwrap())
}

const SCHEDULER: &str = r#"skill "s" {
  version "1"
  capability "create" {
    resource http "https://api.example.com/items/{id}"
    operations POST
    justification "creates items"
    fieldEquals resource.id in ["primary", "team"]
    optional fieldMatches payload.attendees[*].email ~ /[^@]+@example\.com/i
    fieldRange payload.end - payload.start <= 2h
    wallClockWindow mon-fri 09:00-17:00 "America/New_York"
  }
}"#;

fn scheduler_request(payload: Value) -> Request {
    let mut request = Request::new("s", "POST", "https://api.example.com/items/primary");
    request.payload = payload;
    request
}

#[test]
fn reference_allows_a_request_inside_every_constraint() {
    let request = scheduler_request(json!({
        "attendees": [{"email": "A@EXAMPLE.COM"}, {}],
        "start": "2026-12-01T15:00:00Z",
        "end": "2026-12-01T17:00:00Z",
    }));
    let decision = reference_decide(SCHEDULER, &request, "2026-12-01T21:59:59.999999999Z");
    assert_eq!(decision.verdict, Verdict::Allow, "{decision:?}");
}

#[test]
fn reference_denies_at_the_exclusive_end_of_a_window_and_names_the_constraint() {
    let request = scheduler_request(json!({
        "start": "2026-12-01T15:00:00Z",
        "end": "2026-12-01T17:00:00Z",
    }));
    let decision = reference_decide(SCHEDULER, &request, "2026-12-01T22:00:00Z");
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(
        decision.failures,
        vec![ReferenceFailure {
            capability: Some("create".into()),
            constraint: "wallClockWindow"
        }]
    );
}

#[test]
fn reference_fails_optional_wildcard_over_an_object_and_a_difference_one_nanosecond_long() {
    let request = scheduler_request(json!({ "attendees": {"email": "a@example.com"} }));
    let decision = reference_decide(SCHEDULER, &request, "2026-12-01T15:00:00Z");
    assert_eq!(decision.failures[0].constraint, "fieldMatches");
    let request = scheduler_request(json!({
        "start": "2026-12-01T15:00:00Z",
        "end": "2026-12-01T17:00:00.000000001Z",
    }));
    let decision = reference_decide(SCHEDULER, &request, "2026-12-01T15:00:00Z");
    assert_eq!(decision.failures[0].constraint, "fieldRange");
}
