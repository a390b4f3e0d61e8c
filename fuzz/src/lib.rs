//! Shared helpers of the capgate fuzz targets.
//!
//! - [`check_span`]: the invariant every front-end error span must satisfy.
//! - [`corpus`]: the skills compiled once from `../policies` (plus a small built-in policy, so
//!   the targets have something to work on even when the directory is empty).
//! - [`Vocabulary`]: keys and values harvested from the compiled programs, so arbitrary payloads
//!   reach the paths and constants the policies actually test.
//! - [`arbitrary_json`] / [`arbitrary_resource`]: structured inputs built from `Unstructured`.

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use capgate::bytecode::program::{CompiledSkill, PathAccess};
use capgate::span::{SourceMap, Span};
use capgate::value::Segment;
use capgate::{Limits, PolicyFormat, PolicyLoader, Request};
use serde_json::{Map, Number, Value};

/// Asserts that an error span points inside the input, on character boundaries, and that it
/// can be rendered as a location.
pub fn check_span(sources: &SourceMap, span: Span, len: usize) {
    let start = span.start_usize();
    let end = usize::try_from(span.end).unwrap_or(usize::MAX);
    assert!(start <= end, "span {span:?} ends before it starts");
    assert!(
        end <= len,
        "span {span:?} runs past the end of the {len}-byte input"
    );
    let text = sources.file(span.file).map(|f| f.text.clone());
    let text = text.unwrap_or_else(|| panic!("span {span:?} names an unknown file"));
    assert!(
        text.is_char_boundary(start) && text.is_char_boundary(end),
        "span {span:?} splits a character"
    );
    let _ = sources.location(span);
}

/// A policy that uses every constraint form, compiled alongside `../policies`.
pub const BUILTIN_POLICY: &str = r#"
skill "fuzz-builtin" {
  version "1.0.0"
  risk 10
  capability "everything" {
    resource   db "crm/{org}/records/*"
    operations SELECT, INSERT
    lifetime   process
    justification "exercises every constraint form"
    fieldEquals     resource.org == context.org
    fieldEquals     payload.kind in ["a", "b", 1, 2.5, null, true]
    optional fieldEquals payload.exact == {"x": [1, 2]}
    fieldMatches    payload.items[*].name ~ /[a-z]+/i
    optional fieldMatches resource.query.q ~ /\d+/
    fieldRange      0 < payload.amount <= 1000
    optional fieldRange payload.due > now
    optional fieldRange payload.end - payload.start <= 2h
    actorBinding    payload.owner == agent.id
    any { fieldEquals request.operation == "SELECT" not { fieldEquals payload.kind == "b" } all { } }
    payloadSchema { "type": "object", "properties": { "items": { "type": "array", "maxItems": 5 } } }
    rateLimit 5 per 1m burst 2 by agent.id
    wallClockWindow mon-fri 09:00-17:00, sat 22:00-02:00 "Europe/Berlin"
  }
  capability "tool" {
    resource tool "{name}"
    operations call
    justification "runs a tool inside one transaction"
    fieldEquals request.transaction == "t-1"
    wallClockWindow from 2020-01-01T00:00:00Z until 2030-01-01T00:00:00Z
  }
}
"#;

/// Where the policies live, relative to this crate.
pub fn policies_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies")
}

/// Builds the loader for `../policies` plus the built-in policy.
pub fn corpus_loader() -> PolicyLoader {
    let mut loader = PolicyLoader::new(Limits::DEFAULT);
    loader.add_path(&policies_dir());
    loader.add_text(
        "builtin.cap",
        BUILTIN_POLICY.to_owned(),
        PolicyFormat::Cap,
        None,
    );
    loader
}

/// The compiled corpus, loaded once. Panics (at start-up, not during fuzzing) if the policies
/// do not load: a fuzz run over a broken corpus would test nothing.
pub fn corpus() -> &'static [CompiledSkill] {
    static SKILLS: OnceLock<Vec<CompiledSkill>> = OnceLock::new();
    SKILLS.get_or_init(|| match corpus_loader().finish() {
        Ok(policy) => policy.skills,
        Err(e) => panic!("the policy corpus does not load: {:?}", e.diagnostics),
    })
}

/// Keys and values the policies test, for building payloads that reach them.
#[derive(Debug, Default)]
pub struct Vocabulary {
    /// Object keys met on payload/agent/context paths.
    pub keys: Vec<String>,
    /// Constants and set members of the programs, plus a few timestamps.
    pub values: Vec<Value>,
    /// Strings worth trying as resource segments and operations.
    pub words: Vec<String>,
}

/// The vocabulary of [`corpus`], built once.
pub fn vocabulary() -> &'static Vocabulary {
    static VOCABULARY: OnceLock<Vocabulary> = OnceLock::new();
    VOCABULARY.get_or_init(|| {
        let mut v = Vocabulary::default();
        for skill in corpus() {
            v.words.push(skill.name.to_string());
            for capability in &skill.capabilities {
                v.words.push(capability.name.to_string());
                v.words
                    .extend(capability.operations.iter().map(|o| o.to_string()));
                v.words
                    .extend(capability.resource().bindings().iter().cloned());
                let program = capability.program().program();
                for path in &program.paths {
                    if let PathAccess::Json { segments, .. } = &path.access {
                        for segment in segments {
                            if let Segment::Key(key) = segment {
                                v.keys.push(key.clone());
                            }
                        }
                    }
                    if let PathAccess::Query { name } = &path.access {
                        v.words.push(name.clone());
                    }
                }
                v.values.extend(program.consts.iter().cloned());
                for set in &program.sets {
                    v.values.extend(set.values.iter().cloned());
                }
            }
        }
        for stamp in [
            "2026-12-01T15:00:00Z",
            "2026-12-01T16:30:00+01:00",
            "2026-12-05T23:59:59.999999999Z",
            "1970-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            v.values.push(Value::String(stamp.to_owned()));
        }
        for word in &v.words {
            v.values.push(Value::String(word.clone()));
        }
        v.keys.sort();
        v.keys.dedup();
        v.words.sort();
        v.words.dedup();
        v
    })
}

/// Picks one element, or `None` for an empty slice.
pub fn pick<'a, T>(u: &mut Unstructured<'_>, items: &'a [T]) -> Result<Option<&'a T>> {
    if items.is_empty() {
        return Ok(None);
    }
    Ok(items.get(u.choose_index(items.len())?))
}

/// A short string: a vocabulary word or arbitrary text.
pub fn arbitrary_word(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(3, 4)? {
        if let Some(word) = pick(u, &vocabulary().words)? {
            return Ok(word.clone());
        }
    }
    u.arbitrary()
}

/// An object key: a vocabulary key, a case variant of one (the keys a server that binds members
/// case-insensitively reads as the same), or arbitrary text.
pub fn arbitrary_key(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(4, 5)? {
        if let Some(key) = pick(u, &vocabulary().keys)? {
            if u.ratio(1, 6)? {
                return case_variant(u, key);
            }
            return Ok(key.clone());
        }
    }
    u.arbitrary()
}

/// `word` with some letters' case flipped, or a `k`/`s` replaced by the characters that fold
/// to it (KELVIN SIGN, LONG S).
fn case_variant(u: &mut Unstructured<'_>, word: &str) -> Result<String> {
    let mut out = String::with_capacity(word.len() + 2);
    for c in word.chars() {
        let variant = match c {
            'k' | 'K' if u.ratio(1, 4)? => '\u{212A}',
            's' | 'S' if u.ratio(1, 4)? => '\u{17F}',
            c if c.is_ascii_lowercase() && u.arbitrary()? => c.to_ascii_uppercase(),
            c if c.is_ascii_uppercase() && u.arbitrary()? => c.to_ascii_lowercase(),
            c => c,
        };
        out.push(variant);
    }
    Ok(out)
}

/// A JSON value nested at most `depth` levels.
pub fn arbitrary_json(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let choices = if depth == 0 { 7 } else { 9 };
    Ok(match u.choose_index(choices)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
        3 => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::String(u.arbitrary()?),
        5 | 6 => match pick(u, &vocabulary().values)? {
            Some(value) => value.clone(),
            None => Value::Null,
        },
        7 => {
            let len = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(arbitrary_json(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let len = u.int_in_range(0..=5)?;
            let mut map = Map::new();
            for _ in 0..len {
                let key = arbitrary_key(u)?;
                map.insert(key, arbitrary_json(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

/// A request resource: mostly a capability's template with its holes filled in, sometimes
/// arbitrary text.
pub fn arbitrary_resource(
    u: &mut Unstructured<'_>,
    skill: Option<&CompiledSkill>,
) -> Result<String> {
    let template = match skill {
        Some(skill) if u.ratio(7, 8)? => pick(u, &skill.capabilities)?,
        _ => None,
    };
    let Some(capability) = template else {
        return u.arbitrary();
    };
    let pattern = capability.resource();
    let mut out = String::new();
    if pattern.kind() != capgate::syntax::ast::ResourceKind::Http {
        let kind = capgate::syntax::ast::ResourceKind::ALL
            .iter()
            .find(|(k, _)| *k == pattern.kind())
            .map_or("tool", |(_, name)| *name);
        out.push_str(kind);
        out.push(':');
    }
    let mut rest = pattern.locator();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('{') {
            let close = after.find('}').map_or(after.len(), |i| i + 1);
            rest = after.get(close..).unwrap_or("");
            out.push_str(&arbitrary_segment(u)?);
        } else if let Some(after) = rest.strip_prefix("**") {
            rest = after;
            for _ in 0..u.int_in_range(1..=3)? {
                out.push_str(&arbitrary_segment(u)?);
                out.push('/');
            }
            out.pop();
        } else if let Some(after) = rest.strip_prefix('*') {
            rest = after;
            out.push_str(&arbitrary_segment(u)?);
        } else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
    }
    if u.ratio(1, 4)? {
        out.push('?');
        for _ in 0..u.int_in_range(1..=3)? {
            let name = arbitrary_word(u)?;
            let name = if u.ratio(1, 4)? {
                case_variant(u, &name)?
            } else {
                name
            };
            out.push_str(&name);
            if let Some(suffix) = pick(u, QUERY_NAME_SUFFIXES)? {
                out.push_str(suffix);
            }
            out.push('=');
            out.push_str(&arbitrary_word(u)?);
            out.push(if u.ratio(1, 8)? { ';' } else { '&' });
        }
        out.pop();
    }
    Ok(out)
}

/// What a query parameter's name may end in that some servers strip (`role[]`, `role[0]`).
const QUERY_NAME_SUFFIXES: &[&str] = &["", "", "", "", "[]", "%5B%5D", "[0]", "[x]"];

/// Path segments that some server reads as something else than their text: dot segments,
/// encoded separators, compatibility characters NFKC folds into dots and separators, trailing
/// dots and spaces, double encoding.
const TRICKY_SEGMENTS: &[&str] = &[
    "..",
    "%2F",
    "a%20b",
    "...",
    "..%20",
    "%20..",
    ".%2E%20",
    "%EF%BC%8E%EF%BC%8E",
    "a%EF%BC%8Fb",
    "a%EF%BC%BCb",
    "%EF%B9%92",
    "file.",
    "file%20",
    "file.%20",
    "%252e%252e",
    "%252F",
    "%C2%AA",
    "%EF%AC%81le",
];

fn arbitrary_segment(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 3)? {
        if let Some(segment) = pick(u, TRICKY_SEGMENTS)? {
            return Ok((*segment).to_owned());
        }
    }
    arbitrary_word(u)
}

/// A request: mostly for a skill of the corpus, with an operation of one of its capabilities
/// and a resource built from its templates; payload, agent and context from [`arbitrary_json`];
/// sometimes a transaction, grant, skill hash, autonomy score and `time`.
pub fn arbitrary_request(u: &mut Unstructured<'_>) -> Result<Request> {
    let skills = corpus();
    let skill = if u.ratio(15, 16)? {
        pick(u, skills)?
    } else {
        None
    };
    let name = match skill {
        Some(skill) => skill.name.to_string(),
        None => u.arbitrary()?,
    };
    let operation = match skill.and_then(|s| s.capabilities.first()) {
        Some(_) if u.ratio(3, 4)? => {
            let capability = pick(u, &skill.map_or(&[][..], |s| &s.capabilities))?;
            match capability.and_then(|c| c.operations.first().map(|_| c)) {
                Some(c) => pick(u, &c.operations)?.map_or(String::new(), |o| o.to_string()),
                None => arbitrary_word(u)?,
            }
        }
        _ => arbitrary_word(u)?,
    };
    let resource = arbitrary_resource(u, skill)?;
    let mut request = Request::new(name, operation, resource);
    request.payload = arbitrary_json(u, 4)?;
    request.agent = arbitrary_json(u, 2)?;
    request.context = arbitrary_json(u, 2)?;
    if u.ratio(1, 4)? {
        request.transaction = Some(arbitrary_word(u)?);
    }
    if u.ratio(1, 8)? {
        request.grant = Some(u.arbitrary()?);
    }
    if u.ratio(1, 8)? {
        request.skill_hash = Some(u.arbitrary()?);
    }
    request.autonomy = match u.choose_index(4)? {
        0 => None,
        1 | 2 => Some(Value::from(u.int_in_range(0..=100u8)?)),
        // `"autonomy": null` on the wire reads as absent, so `Some(null)` is not generated:
        // it would make the wire comparison below differ by construction.
        _ => Some(arbitrary_json(u, 1)?).filter(|v| !v.is_null()),
    };
    request.time = match u.choose_index(4)? {
        0 => None,
        1 => Some(u.arbitrary()?),
        _ => {
            let seconds = u.int_in_range(1_700_000_000..=1_900_000_000i64)?;
            chrono::DateTime::from_timestamp(seconds, 0).map(|t| t.to_rfc3339())
        }
    };
    Ok(request)
}
