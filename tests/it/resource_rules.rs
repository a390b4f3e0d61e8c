//! Resource templates and request resources (SPEC §2.2): one test per deny rule and per
//! matching rule, plus property tests.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::borrow::Cow;

use capgate::bytecode::resource::{ResourceKind, ResourcePattern};
use capgate::vm::resource::{
    Bindings, QueryValue, RequestResource, ResourcePart, ResourceRejection,
};
use capgate::{Engine, PolicyFormat, PolicyLoader, Verdict};
use proptest::prelude::*;
use unicode_normalization::UnicodeNormalization;

fn http(template: &str) -> ResourcePattern {
    ResourcePattern::compile(ResourceKind::Http, template)
        .unwrap_or_else(|e| panic!("template `{template}` should compile: {e}"))
}

fn template_error(kind: ResourceKind, template: &str) -> String {
    match ResourcePattern::compile(kind, template) {
        Ok(p) => panic!("template `{template}` should not compile, got {p:?}"),
        Err(e) => e.message,
    }
}

fn rejected(resource: &str) -> ResourceRejection {
    match RequestResource::parse(resource) {
        Ok(r) => panic!("`{resource}` should be rejected, parsed as {r:?}"),
        Err(e) => e,
    }
}

fn parsed(resource: &str) -> RequestResource<'_> {
    RequestResource::parse(resource).unwrap_or_else(|e| panic!("`{resource}` should parse: {e}"))
}

fn matches(pattern: &ResourcePattern, resource: &str) -> bool {
    let request = parsed(resource);
    let mut bindings = Bindings::new();
    pattern.matches(&request, &mut bindings)
}

fn bound(pattern: &ResourcePattern, resource: &str) -> Vec<Option<String>> {
    let request = parsed(resource);
    let mut bindings = Bindings::new();
    assert!(
        pattern.matches(&request, &mut bindings),
        "`{resource}` should match"
    );
    (0..pattern.bindings().len())
        .map(|i| bindings.get(i).map(str::to_owned))
        .collect()
}

/// The issue's scenario: each user reads their own files, and never as an admin.
fn engine_with(constraint: &str) -> Engine {
    let policy = format!(
        r#"skill "files" {{
  version "1"
  capability "read" {{
    resource http "https://files.example.com/v1/users/{{user}}/files/**"
    operations GET
    fieldEquals resource.user == agent.id
{constraint}
  }}
}}"#
    );
    let mut loader = PolicyLoader::default();
    loader.add_text("files.cap", policy, PolicyFormat::Cap, None);
    Engine::builder(loader.finish().unwrap()).build()
}

fn files_engine() -> Engine {
    engine_with(r#"    not { fieldEquals resource.query.role == "admin" }"#)
}

/// Decides one `GET` from bytes and pre-parsed, checks that both agree, returns the decision.
fn files_call(engine: &Engine, resource: &str, agent: &str) -> capgate::Decision {
    let text = serde_json::to_vec(&serde_json::json!({
        "skill": "files", "operation": "GET", "resource": resource, "agent": {"id": agent},
    }))
    .unwrap();
    let from_bytes = engine.check_slice(&text);
    let pre_parsed = engine.check_value(serde_json::from_slice(&text).unwrap());
    assert_eq!(from_bytes.verdict, pre_parsed.verdict, "{resource}");
    assert_eq!(from_bytes.reasons, pre_parsed.reasons, "{resource}");
    from_bytes
}

// ---------------------------------------------------------------- deny rules: dot segments

#[test]
fn dot_dot_segment_is_rejected() {
    let e = rejected("https://api.example.com/v1/../admin");
    assert!(matches!(
        e,
        ResourceRejection::DotSegment { encoded: false, .. }
    ));
    assert_eq!(e.to_string(), "path contains a `..` segment");
}

#[test]
fn single_dot_segment_is_rejected() {
    assert!(matches!(
        rejected("https://api.example.com/v1/./items"),
        ResourceRejection::DotSegment { .. }
    ));
}

#[test]
fn trailing_dot_dot_segment_is_rejected() {
    assert!(matches!(
        rejected("https://api.example.com/v1/.."),
        ResourceRejection::DotSegment { .. }
    ));
}

#[test]
fn percent_encoded_dot_segments_are_rejected_in_any_case() {
    for resource in [
        "https://api.example.com/v1/%2e%2E/admin",
        "https://api.example.com/v1/%2E%2e/admin",
        "https://api.example.com/v1/.%2e/admin",
        "https://api.example.com/v1/%2e./admin",
        "https://api.example.com/v1/%2e/admin",
    ] {
        assert!(
            matches!(
                rejected(resource),
                ResourceRejection::DotSegment { encoded: true, .. }
            ),
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/%2e%2E").to_string(),
        "path contains a `%2e%2E` segment, which percent-decodes to a dot segment"
    );
}

#[test]
fn dot_segment_with_path_parameter_is_rejected() {
    assert!(matches!(
        rejected("https://api.example.com/v1/..;jsessionid=1/admin"),
        ResourceRejection::DotSegment { .. }
    ));
}

#[test]
fn dot_segment_in_non_http_locator_is_rejected() {
    assert!(matches!(
        rejected("db:crm/../hr"),
        ResourceRejection::DotSegment { .. }
    ));
    assert!(matches!(
        rejected("tool:./x"),
        ResourceRejection::DotSegment { .. }
    ));
}

/// Dots inside a segment and a leading dot are ordinary; a segment made only of dots is refused
/// (`dot_only_segments_after_trimming_spaces_are_refused`).
#[test]
fn segments_that_merely_contain_dots_are_accepted() {
    let pattern = http("https://h.example.com/files/{name}");
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/a..b"),
        [Some("a..b".to_owned())]
    );
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/.env"),
        [Some(".env".to_owned())]
    );
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/..a"),
        [Some("..a".to_owned())]
    );
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/a.b.c"),
        [Some("a.b.c".to_owned())]
    );
}

// ---------------------------------------------------------------- deny rules: what a normalising
// or trimming server reads otherwise

/// FULLWIDTH FULL STOP / SOLIDUS / REVERSE SOLIDUS are `.`, `/` and `\` under NFKC: a server that
/// normalises reads `%EF%BC%8E%EF%BC%8E%EF%BC%8F` as `../`. Refused in every kind's path, raw or
/// escaped, alone or inside a segment.
#[test]
fn fullwidth_dot_and_solidus_escapes_are_refused() {
    for (resource, segment, code) in [
        (
            "https://h.example.com/files/%EF%BC%8E%EF%BC%8E/admin",
            "%EF%BC%8E%EF%BC%8E",
            0xFF0E,
        ),
        (
            "https://h.example.com/files/%ef%bc%8e%ef%bc%8e%ef%bc%8fadmin",
            "%ef%bc%8e%ef%bc%8e%ef%bc%8fadmin",
            0xFF0E,
        ),
        (
            "https://h.example.com/files/a%EF%BC%8Fb",
            "a%EF%BC%8Fb",
            0xFF0F,
        ),
        (
            "https://h.example.com/files/a%EF%BC%BCb",
            "a%EF%BC%BCb",
            0xFF3C,
        ),
        (
            "https://h.example.com/files/\u{FF0E}\u{FF0E}/admin",
            "\u{FF0E}\u{FF0E}",
            0xFF0E,
        ),
        ("db:crm/%EF%BC%8E%EF%BC%8E/x", "%EF%BC%8E%EF%BC%8E", 0xFF0E),
        ("tool:a/\u{FF0F}etc", "\u{FF0F}etc", 0xFF0F),
    ] {
        assert_eq!(
            rejected(resource),
            ResourceRejection::NotNormalized {
                segment: segment.to_owned(),
                code: Some(code),
            },
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/%EF%BC%8E%EF%BC%8E").to_string(),
        "path segment `%EF%BC%8E%EF%BC%8E` contains U+FF0E, which unicode normalization (nfkc) changes"
    );
}

/// Every character NFKC changes is refused, not just look-alikes of separators: ligatures,
/// superscripts, compatibility spaces, the KELVIN SIGN; and decomposed text that NFKC composes
/// (`e` + U+0301), where no single character is to blame.
#[test]
fn characters_that_nfkc_changes_are_refused_in_paths() {
    for segment in [
        "%EF%AC%81le",      // ﬁ ligature
        "x%C2%B2",          // superscript two
        "a%C2%A0b",         // no-break space
        "%E2%84%AAelvin",   // KELVIN SIGN
        "%E2%80%A4",        // ONE DOT LEADER
        "\u{2024}\u{2024}", // raw ONE DOT LEADER
        "%E3%80%80x",       // ideographic space (NFKC: a space)
    ] {
        let resource = format!("https://h.example.com/files/{segment}");
        assert!(
            matches!(
                rejected(&resource),
                ResourceRejection::NotNormalized { code: Some(_), .. }
            ),
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/files/cafe%CC%81"),
        ResourceRejection::NotNormalized {
            segment: "cafe%CC%81".to_owned(),
            code: None,
        }
    );
    // Text already in NFKC is ordinary, escaped or raw.
    let pattern = http("https://h.example.com/files/{name}");
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/caf%C3%A9"),
        [Some("café".to_owned())]
    );
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/日本語"),
        [Some("日本語".to_owned())]
    );
    // In the query, such text is data (search terms are written in fullwidth forms too).
    assert_eq!(
        parsed("https://h.example.com/s?q=%EF%BC%8E%EF%BC%8E").query("q"),
        QueryValue::One(Cow::Owned("\u{FF0E}\u{FF0E}".to_owned()))
    );
}

/// `...`, `.. `, `..%20`, ` .`: a server that trims spaces or trailing dots (Windows, .NET,
/// Python's `strip`) reads a dot segment. Also before `;parameters` (`...;x`).
#[test]
fn dot_only_segments_after_trimming_spaces_are_refused() {
    for segment in [
        "...",
        "....",
        "..%20",
        "%20..",
        "%20.",
        ".%20.",
        "%2e%2e%2e",
        "..%20%20",
        "...;x",
        "%20",
        "..%E2%80%A8",
    ] {
        for prefix in ["https://h.example.com/files/", "db:crm/", "tool:"] {
            let resource = format!("{prefix}{segment}/x");
            assert_eq!(
                rejected(&resource),
                ResourceRejection::DotsAndSpaces {
                    segment: segment.to_owned()
                },
                "{resource}"
            );
        }
    }
    assert_eq!(
        rejected("https://h.example.com/..%20/admin").to_string(),
        "path segment `..%20` is made only of dots and spaces, which a server that trims them reads as a dot segment"
    );
}

/// `file.`, `a%20`, `name.%20`: Windows and servers that trim strip trailing dots and spaces, so
/// `secret.txt.` is `secret.txt` there; a leading space is stripped by servers that trim both
/// ends. Also before `;parameters` (`file.;x`).
#[test]
fn trailing_dots_and_spaces_in_a_segment_are_refused() {
    for segment in [
        "file.",
        "a%20",
        "name.%20",
        "a%2e",
        "a.;x",
        "a%20;x",
        "x..",
        "v1.0.",
        "a%E1%9A%80",
    ] {
        let resource = format!("https://h.example.com/files/{segment}");
        assert_eq!(
            rejected(&resource),
            ResourceRejection::TrailingDotOrSpace {
                segment: segment.to_owned()
            },
            "{resource}"
        );
    }
    assert_eq!(
        rejected("db:crm/secret.txt./x"),
        ResourceRejection::TrailingDotOrSpace {
            segment: "secret.txt.".to_owned()
        }
    );
    for segment in ["%20a", "%20admin"] {
        let resource = format!("https://h.example.com/files/{segment}");
        assert_eq!(
            rejected(&resource),
            ResourceRejection::LeadingSpace {
                segment: segment.to_owned()
            },
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/file.").to_string(),
        "path segment `file.` ends with a dot or a space, which a server may strip"
    );
    // Dots and spaces inside a segment are ordinary; so are `;parameters` after a plain stem.
    let pattern = http("https://h.example.com/files/{name}");
    for (segment, value) in [
        ("a.b", "a.b"),
        ("my%20file.txt", "my file.txt"),
        ("a;v=1", "a;v=1"),
        (";x", ";x"),
    ] {
        let resource = format!("https://h.example.com/files/{segment}");
        assert_eq!(bound(&pattern, &resource), [Some(value.to_owned())]);
    }
}

/// The issue's scenario, end to end through `Engine`, from bytes and pre-parsed: under
/// `…/users/{user}/files/**` with `fieldEquals resource.user == agent.id`, no spelling of a
/// traversal into another user's files is allowed, and a plain request still is.
#[test]
fn traversal_variants_into_another_users_files_are_denied_end_to_end() {
    let engine = files_engine();
    let base = "https://files.example.com/v1/users/alice/files";
    assert_eq!(
        files_call(&engine, &format!("{base}/report.txt"), "alice").verdict,
        Verdict::Allow
    );
    assert_eq!(
        files_call(&engine, &format!("{base}/a/b.c?x=1"), "alice").verdict,
        Verdict::Allow
    );
    for tail in [
        "%EF%BC%8E%EF%BC%8E/%EF%BC%8E%EF%BC%8E/bob/files/secret",
        "%EF%BC%8E%EF%BC%8E%EF%BC%8F%EF%BC%8E%EF%BC%8E%EF%BC%8Fbob%EF%BC%8Ffiles%EF%BC%8Fsecret",
        "..%EF%BC%BC..%EF%BC%BCbob%EF%BC%BCfiles%EF%BC%BCsecret",
        "..%20/..%20/bob/files/secret",
        ".../.../bob/files/secret",
        "..%2e/bob",
        "%20../%20../bob/files/secret",
        "%252e%252e/%252e%252e/bob/files/secret",
        "%252e%252e%252fbob",
        "secret.txt.",
        "secret.txt%20",
    ] {
        let resource = format!("{base}/{tail}");
        let decision = files_call(&engine, &resource, "alice");
        assert_eq!(decision.verdict, Verdict::Deny, "{resource}: {decision:?}");
        assert_eq!(
            decision.reasons[0].constraint.as_str(),
            "resource",
            "{resource}: {decision:?}"
        );
    }
    // The binding itself is covered the same way.
    for user in [
        "alice%EF%BC%8F..%EF%BC%8Fbob",
        "alice.",
        "%20alice",
        "%252e%252e",
    ] {
        let resource = format!("https://files.example.com/v1/users/{user}/files/x");
        let decision = files_call(&engine, &resource, "alice");
        assert_eq!(decision.verdict, Verdict::Deny, "{resource}");
        assert_eq!(
            decision.reasons[0].constraint.as_str(),
            "resource",
            "{resource}"
        );
    }
}

/// Template literals the segment rules refuse in every request could never match: compile
/// errors, as dot segments are.
#[test]
fn templates_that_no_request_could_match_under_the_segment_rules_are_errors() {
    for template in [
        "https://h.example.com/a./x",
        "https://h.example.com/...",
        "https://h.example.com/a%20",
        "https://h.example.com/%20a",
        "https://h.example.com/%EF%BC%8E",
        "https://h.example.com/\u{FB01}le",
        "https://h.example.com/a.;x/{b}",
        "https://h.example.com/%252e",
    ] {
        let message = template_error(ResourceKind::Http, template);
        assert!(message.starts_with("segment `"), "{template}: {message}");
    }
    let error = ResourcePattern::compile(ResourceKind::Db, "crm/file./x").unwrap_err();
    assert_eq!(
        error.message,
        "segment `file.` ends with a dot or a space, which a server may strip"
    );
    assert!(error.help.unwrap().contains("could never match"));
    // Ordinary dots and escapes still compile.
    http("https://h.example.com/v1.0/a.b/caf%C3%A9/.well-known/{x}");
}

// ---------------------------------------------------------------- deny rules: separators

#[test]
fn encoded_slash_is_rejected_in_any_case() {
    for resource in ["https://h.example.com/a%2Fb", "https://h.example.com/a%2fb"] {
        let e = rejected(resource);
        assert!(
            matches!(e, ResourceRejection::EncodedSeparator { .. }),
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/a%2Fb").to_string(),
        "path contains an encoded separator `%2F`"
    );
}

#[test]
fn encoded_backslash_is_rejected_in_any_case() {
    for resource in ["https://h.example.com/a%5Cb", "https://h.example.com/a%5cb"] {
        assert!(
            matches!(
                rejected(resource),
                ResourceRejection::EncodedSeparator { .. }
            ),
            "{resource}"
        );
    }
}

#[test]
fn raw_backslash_in_path_is_rejected() {
    assert_eq!(
        rejected("https://h.example.com/a\\..\\admin"),
        ResourceRejection::Backslash
    );
    assert_eq!(rejected("db:crm\\acme"), ResourceRejection::Backslash);
}

#[test]
fn raw_backslash_in_authority_is_rejected() {
    assert_eq!(
        rejected("https://evil.com\\@calendar.example.com/"),
        ResourceRejection::Backslash
    );
}

#[test]
fn empty_segment_in_the_middle_is_rejected() {
    assert!(matches!(
        rejected("https://h.example.com/a//b"),
        ResourceRejection::EmptySegment { .. }
    ));
    assert!(matches!(
        rejected("https://h.example.com//a"),
        ResourceRejection::EmptySegment { .. }
    ));
    assert!(matches!(
        rejected("db:/crm"),
        ResourceRejection::EmptySegment { .. }
    ));
    assert!(matches!(
        rejected("db:crm//x"),
        ResourceRejection::EmptySegment { .. }
    ));
}

// ---------------------------------------------------------------- deny rules: NUL, controls

#[test]
fn raw_nul_is_rejected() {
    assert_eq!(
        rejected("https://h.example.com/a\0b"),
        ResourceRejection::Nul { encoded: false }
    );
}

#[test]
fn encoded_nul_is_rejected_in_path_and_query() {
    assert_eq!(
        rejected("https://h.example.com/a%00b"),
        ResourceRejection::Nul { encoded: true }
    );
    assert_eq!(
        rejected("https://h.example.com/a?x=%00"),
        ResourceRejection::Nul { encoded: true }
    );
}

#[test]
fn raw_whitespace_and_control_characters_are_rejected() {
    for resource in [
        "https://h.example.com/a b",
        "https://h.example.com/a\tb",
        "https://h.example.com/a\nb",
        "https://h.example.com/a\u{7f}",
        "https://h.example.com/a\u{85}",
        "https://h.example.com/a\u{2028}",
        " https://h.example.com/",
    ] {
        assert!(
            matches!(
                rejected(resource),
                ResourceRejection::ControlCharacter { .. }
            ),
            "{resource:?}"
        );
    }
}

#[test]
fn encoded_control_characters_are_rejected() {
    for resource in [
        "https://h.example.com/a%0Ab",
        "https://h.example.com/a%0d",
        "https://h.example.com/a%7F",
        "https://h.example.com/a%C2%85",
        "https://h.example.com/a?x=%0A",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::EncodedControl { .. }),
            "{resource}"
        );
    }
}

#[test]
fn encoded_space_is_an_ordinary_character() {
    let pattern = http("https://h.example.com/files/{name}");
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/my%20file"),
        [Some("my file".to_owned())]
    );
}

// ---------------------------------------------------------------- deny rules: percent-encoding

#[test]
fn lone_percent_is_rejected() {
    let e = rejected("https://h.example.com/100%");
    assert_eq!(
        e,
        ResourceRejection::BadPercentEncoding {
            part: ResourcePart::Path,
            escape: "%".to_owned()
        }
    );
    assert_eq!(e.to_string(), "path contains invalid percent-encoding `%`");
}

#[test]
fn non_hex_percent_escape_is_rejected() {
    assert_eq!(
        rejected("https://h.example.com/a%G1"),
        ResourceRejection::BadPercentEncoding {
            part: ResourcePart::Path,
            escape: "%G1".to_owned()
        }
    );
}

#[test]
fn truncated_percent_escape_is_rejected() {
    assert_eq!(
        rejected("https://h.example.com/a%4"),
        ResourceRejection::BadPercentEncoding {
            part: ResourcePart::Path,
            escape: "%4".to_owned()
        }
    );
}

#[test]
fn bad_percent_encoding_in_query_is_rejected() {
    assert_eq!(
        rejected("https://h.example.com/a?x=%zz"),
        ResourceRejection::BadPercentEncoding {
            part: ResourcePart::Query,
            escape: "%zz".to_owned()
        }
    );
    assert!(matches!(
        rejected("https://h.example.com/a?%=1"),
        ResourceRejection::BadPercentEncoding {
            part: ResourcePart::Query,
            ..
        }
    ));
}

#[test]
fn percent_decoding_to_invalid_utf8_is_rejected() {
    for resource in [
        "https://h.example.com/a%FF",
        "https://h.example.com/a%C3",
        "https://h.example.com/%C0%AE%C0%AE/admin",
        "https://h.example.com/a?x=%FF",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::NotUtf8 { .. }),
            "{resource}"
        );
    }
}

/// `%252e` decodes to the text `%2e`, which a back end that decodes twice reads as `.`: a path
/// segment or query name whose decoding holds another escape is refused, however the `%` and the
/// digits were written (`%25%32%65`).
#[test]
fn double_encoding_is_refused() {
    for (resource, part, escape) in [
        (
            "https://h.example.com/files/%252e%252e/admin",
            ResourcePart::Path,
            "%2e",
        ),
        (
            "https://h.example.com/files/a%252Fb",
            ResourcePart::Path,
            "%2F",
        ),
        (
            "https://h.example.com/files/%25%32%65",
            ResourcePart::Path,
            "%2e",
        ),
        (
            "https://h.example.com/files/%2541",
            ResourcePart::Path,
            "%41",
        ),
        ("db:crm/%255c", ResourcePart::Path, "%5c"),
        (
            "https://h.example.com/s?%2572ole=admin",
            ResourcePart::Query,
            "%72",
        ),
    ] {
        match rejected(resource) {
            ResourceRejection::DoubleEncoding {
                part: got,
                escape: got_escape,
                ..
            } => {
                assert_eq!(got, part, "{resource}");
                assert_eq!(got_escape, escape, "{resource}");
            }
            other => panic!("{resource}: {other:?}"),
        }
    }
    assert_eq!(
        rejected("https://h.example.com/files/%252e%252e").to_string(),
        "path component `%252e%252e` percent-decodes to another escape `%2e` (double encoding)"
    );
    // A `%` that starts no escape after decoding is data: `100%25` is `100%`, `%25zz` is `%zz`.
    let pattern = http("https://h.example.com/files/{name}");
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/100%25"),
        [Some("100%".to_owned())]
    );
    assert_eq!(
        bound(&pattern, "https://h.example.com/files/%25zz"),
        [Some("%zz".to_owned())]
    );
    // A query value may carry an escaped URL (`next=%2Fa%2520b`); only a constraint that reads
    // it cannot decide on it (`double_encoded_query_value_is_undecidable`).
    let request = parsed("https://h.example.com/s?next=%2Fa%2520b&q=1");
    assert_eq!(request.query("next"), QueryValue::DoubleEncoded);
    assert_eq!(request.query("q"), QueryValue::One(Cow::Borrowed("1")));
    // A template literal that decodes to another escape could never match.
    let message = template_error(ResourceKind::Http, "https://h.example.com/a%252e");
    assert!(message.contains("another escape `%2e`"), "{message}");
}

// ---------------------------------------------------------------- deny rules: userinfo, host

#[test]
fn userinfo_is_rejected() {
    let e = rejected("https://a@b.example.com/");
    assert_eq!(
        e,
        ResourceRejection::Userinfo {
            userinfo: "a@".to_owned()
        }
    );
    assert!(matches!(
        rejected("https://user:pass@b.example.com/"),
        ResourceRejection::Userinfo { .. }
    ));
}

#[test]
fn userinfo_that_looks_like_the_allowed_host_is_rejected() {
    let e = rejected("https://calendar.example.com@evil.com/v3/calendars/primary/events");
    assert_eq!(
        e.to_string(),
        "url contains userinfo `calendar.example.com@` before the host"
    );
    assert!(matches!(
        rejected("https://calendar.example.com:443@evil.com/"),
        ResourceRejection::Userinfo { .. }
    ));
    assert!(matches!(
        rejected("https://evil.com@calendar.example.com/"),
        ResourceRejection::Userinfo { .. }
    ));
}

#[test]
fn at_sign_in_path_or_query_is_not_userinfo() {
    let pattern = http("https://h.example.com/users/{email}");
    assert_eq!(
        bound(&pattern, "https://h.example.com/users/a@b.com?x=@"),
        [Some("a@b.com".to_owned())]
    );
}

#[test]
fn fragment_is_rejected() {
    let e = rejected("https://h.example.com/a#section");
    assert_eq!(
        e,
        ResourceRejection::Fragment {
            fragment: "#section".to_owned()
        }
    );
    assert!(matches!(
        rejected("https://h.example.com/a?x=1#f"),
        ResourceRejection::Fragment { .. }
    ));
    assert!(matches!(
        rejected("tool:x#y"),
        ResourceRejection::Fragment { .. }
    ));
}

#[test]
fn empty_host_is_rejected() {
    assert_eq!(rejected("https:///a"), ResourceRejection::EmptyHost);
    assert_eq!(rejected("https://:443/a"), ResourceRejection::EmptyHost);
    assert_eq!(rejected("https://"), ResourceRejection::EmptyHost);
}

#[test]
fn bad_port_is_rejected() {
    for resource in [
        "https://h.example.com:/a",
        "https://h.example.com:0/a",
        "https://h.example.com:65536/a",
        "https://h.example.com:443x/a",
        "https://h.example.com:-1/a",
        "https://h.example.com:004430/a",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::BadPort { .. }),
            "{resource}"
        );
    }
}

#[test]
fn non_ascii_host_is_rejected() {
    assert!(matches!(
        rejected("https://bücher.example.com/"),
        ResourceRejection::NonAsciiHost { .. }
    ));
    // Punycode is the accepted spelling.
    assert!(RequestResource::parse("https://xn--bcher-kva.example.com/").is_ok());
}

#[test]
fn malformed_host_is_rejected() {
    for resource in [
        "https://h..example.com/",
        "https://.example.com/",
        "https://example.com./",
        "https://h%2eexample.com/",
        "https://h*.example.com/",
        "https://[zz::1]/",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::InvalidHost { .. }),
            "{resource}"
        );
    }
}

#[test]
fn unknown_kind_is_rejected() {
    for resource in [
        "ftp://h.example.com/",
        "HTTPS://h.example.com/",
        "file:/etc/passwd",
        "crm/acme",
        "DB:crm",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::UnknownKind { .. }),
            "{resource}"
        );
    }
    assert_eq!(rejected(""), ResourceRejection::Empty);
}

#[test]
fn empty_non_http_locator_is_rejected() {
    assert_eq!(
        rejected("db:"),
        ResourceRejection::EmptyLocator {
            kind: ResourceKind::Db
        }
    );
    assert_eq!(
        rejected("db:").to_string(),
        "resource `db:` has an empty locator"
    );
}

#[test]
fn long_offending_input_is_truncated_in_messages() {
    let host = "a".repeat(200);
    let message = rejected(&format!("https://{host}@evil.com/")).to_string();
    assert!(message.len() < 120, "{message}");
    assert!(message.contains('…'));
}

// ---------------------------------------------------------------- matching: host and port

#[test]
fn host_is_compared_case_insensitively() {
    let pattern = http("https://Calendar.Example.com/v3");
    assert!(matches(&pattern, "https://calendar.example.com/v3"));
    assert!(matches(&pattern, "https://CALENDAR.EXAMPLE.COM/v3"));
    assert!(!matches(&pattern, "https://calendar.example.org/v3"));
}

#[test]
fn path_is_compared_case_sensitively() {
    let pattern = http("https://h.example.com/v3/Events");
    assert!(matches(&pattern, "https://h.example.com/v3/Events"));
    assert!(!matches(&pattern, "https://h.example.com/v3/events"));
}

#[test]
fn explicit_default_port_equals_no_port() {
    let pattern = http("https://h.example.com/a");
    assert!(matches(&pattern, "https://h.example.com:443/a"));
    let pattern = http("https://h.example.com:443/a");
    assert!(matches(&pattern, "https://h.example.com/a"));
    let pattern = http("http://h.example.com/a");
    assert!(matches(&pattern, "http://h.example.com:80/a"));
}

#[test]
fn non_default_port_must_match_exactly() {
    let pattern = http("https://h.example.com:8443/a");
    assert!(matches(&pattern, "https://h.example.com:8443/a"));
    assert!(!matches(&pattern, "https://h.example.com/a"));
    assert!(!matches(
        &http("https://h.example.com/a"),
        "https://h.example.com:8443/a"
    ));
    // 80 is not the default port of https.
    assert!(!matches(
        &http("https://h.example.com/a"),
        "https://h.example.com:80/a"
    ));
}

#[test]
fn http_and_https_are_different_schemes() {
    assert!(!matches(
        &http("https://h.example.com/a"),
        "http://h.example.com/a"
    ));
    assert!(!matches(
        &http("http://h.example.com/a"),
        "https://h.example.com/a"
    ));
    assert!(!matches(
        &http("http://h.example.com:443/a"),
        "https://h.example.com/a"
    ));
}

#[test]
fn wildcard_host_matches_one_or_more_labels() {
    let pattern = http("https://*.example.com/a");
    assert!(matches(&pattern, "https://api.example.com/a"));
    assert!(matches(&pattern, "https://eu.api.example.com/a"));
    assert!(matches(&pattern, "https://API.Example.COM/a"));
    assert!(pattern.has_wildcard());
}

#[test]
fn wildcard_host_does_not_match_the_apex() {
    assert!(!matches(
        &http("https://*.example.com/a"),
        "https://example.com/a"
    ));
}

#[test]
fn wildcard_host_does_not_match_lookalike_domains() {
    let pattern = http("https://*.example.com/a");
    assert!(!matches(&pattern, "https://evilexample.com/a"));
    assert!(!matches(&pattern, "https://api.example.com.evil.com/a"));
    assert!(!matches(&pattern, "https://api.example.co/a"));
}

#[test]
fn ipv6_literal_host_matches_textually() {
    let pattern = http("https://[::1]:8443/a");
    assert!(matches(&pattern, "https://[::1]:8443/a"));
    assert!(!matches(&pattern, "https://[0::1]:8443/a"));
}

// ---------------------------------------------------------------- matching: path

#[test]
fn literal_template_matches_only_itself() {
    let pattern = http("https://h.example.com/v3/calendars");
    assert!(matches(&pattern, "https://h.example.com/v3/calendars"));
    assert!(!matches(&pattern, "https://h.example.com/v3/calendars/x"));
    assert!(!matches(&pattern, "https://h.example.com/v3"));
    assert!(!pattern.has_wildcard());
}

#[test]
fn literal_segments_compare_after_percent_decoding() {
    let pattern = http("https://h.example.com/caf%C3%A9/a%20b");
    assert!(matches(&pattern, "https://h.example.com/café/a%20b"));
    assert!(matches(&pattern, "https://h.example.com/caf%c3%a9/a%20b"));
    assert!(matches(
        &http("https://h.example.com/v3"),
        "https://h.example.com/%76%33"
    ));
}

#[test]
fn star_matches_exactly_one_non_empty_segment() {
    let pattern = http("https://h.example.com/v3/*/events");
    assert!(matches(&pattern, "https://h.example.com/v3/primary/events"));
    assert!(!matches(&pattern, "https://h.example.com/v3/a/b/events"));
    assert!(!matches(&pattern, "https://h.example.com/v3/events"));
    assert!(pattern.has_wildcard());
}

#[test]
fn double_star_matches_one_or_more_segments() {
    let pattern = http("https://h.example.com/files/**");
    assert!(matches(&pattern, "https://h.example.com/files/a"));
    assert!(matches(&pattern, "https://h.example.com/files/a/b/c"));
    assert!(pattern.has_wildcard());
}

#[test]
fn double_star_does_not_match_zero_segments() {
    let pattern = http("https://h.example.com/files/**");
    assert!(!matches(&pattern, "https://h.example.com/files"));
    assert!(!matches(&pattern, "https://h.example.com/files/"));
}

#[test]
fn double_star_does_not_match_a_trailing_slash() {
    assert!(!matches(
        &http("https://h.example.com/files/**"),
        "https://h.example.com/files/a/"
    ));
}

#[test]
fn trailing_slash_matches_only_a_template_ending_in_slash() {
    let plain = http("https://h.example.com/v3/items");
    let slashed = http("https://h.example.com/v3/items/");
    assert!(!matches(&plain, "https://h.example.com/v3/items/"));
    assert!(matches(&slashed, "https://h.example.com/v3/items/"));
    assert!(!matches(&slashed, "https://h.example.com/v3/items"));
    assert!(!matches(
        &http("https://h.example.com/v3/*"),
        "https://h.example.com/v3/"
    ));
    assert!(!matches(
        &http("https://h.example.com/v3/{id}"),
        "https://h.example.com/v3/"
    ));
}

#[test]
fn root_path_and_no_path_are_the_same() {
    for template in ["https://h.example.com", "https://h.example.com/"] {
        let pattern = http(template);
        assert!(matches(&pattern, "https://h.example.com"), "{template}");
        assert!(matches(&pattern, "https://h.example.com/"), "{template}");
        assert!(matches(&pattern, "https://h.example.com?x=1"), "{template}");
        assert!(!matches(&pattern, "https://h.example.com/a"), "{template}");
    }
}

#[test]
fn bindings_capture_decoded_segments_in_template_order() {
    let pattern = http("https://h.example.com/orgs/{org}/calendars/{calendar}/events");
    assert_eq!(pattern.bindings(), ["org", "calendar"]);
    assert_eq!(
        bound(
            &pattern,
            "https://h.example.com/orgs/acme/calendars/team%20a/events"
        ),
        [Some("acme".to_owned()), Some("team a".to_owned())]
    );
}

#[test]
fn unescaped_bindings_borrow_from_the_request() {
    let pattern = ResourcePattern::compile(ResourceKind::Db, "crm/{org}/records").unwrap();
    let text = "db:crm/acme/records";
    let request = parsed(text);
    let mut bindings = Bindings::new();
    assert!(pattern.matches(&request, &mut bindings));
    let value = bindings.get(0).unwrap();
    // Borrowed: the value points into the request text.
    let range = text.as_bytes().as_ptr_range();
    assert!(range.contains(&value.as_ptr()));
}

#[test]
fn bindings_buffer_is_emptied_by_a_failed_match_and_reused() {
    let pattern = http("https://h.example.com/a/{x}/b");
    let mut bindings = Bindings::new();
    let good = parsed("https://h.example.com/a/1/b");
    assert!(pattern.matches(&good, &mut bindings));
    assert_eq!(bindings.get(0), Some("1"));
    let bad = parsed("https://h.example.com/a/1/c");
    assert!(!pattern.matches(&bad, &mut bindings));
    assert_eq!(bindings.get(0), None);
    assert!(bindings.is_empty());
}

#[test]
fn kinds_never_match_each_other() {
    let pattern = ResourcePattern::compile(ResourceKind::Db, "crm").unwrap();
    assert!(matches(&pattern, "db:crm"));
    assert!(!matches(&pattern, "tool:crm"));
    assert!(!matches(&http("https://h.example.com/crm"), "db:crm"));
}

#[test]
fn non_http_kinds_match_their_locator() {
    let cases = [
        (ResourceKind::Db, "crm/{org}/records", "db:crm/acme/records"),
        (ResourceKind::Oauth, "calendar/*", "oauth:calendar/acme"),
        (ResourceKind::Tool, "read_text_file", "tool:read_text_file"),
        (
            ResourceKind::Service,
            "outboundGateway",
            "service:outboundGateway",
        ),
        (
            ResourceKind::Secret,
            "NYLAS_API_KEY",
            "secret:NYLAS_API_KEY",
        ),
    ];
    for (kind, template, request) in cases {
        let pattern = ResourcePattern::compile(kind, template).unwrap();
        assert!(matches(&pattern, request), "{request}");
        assert_eq!(pattern.kind(), kind);
        assert_eq!(pattern.locator(), template);
    }
}

#[test]
fn non_http_double_star_matches_whole_locator() {
    let pattern = ResourcePattern::compile(ResourceKind::Db, "**").unwrap();
    assert!(matches(&pattern, "db:crm"));
    assert!(matches(&pattern, "db:crm/acme/records"));
    assert!(!matches(&pattern, "db:crm/"));
}

// ---------------------------------------------------------------- query parameters

#[test]
fn query_is_not_part_of_matching() {
    let pattern = http("https://h.example.com/search");
    assert!(matches(&pattern, "https://h.example.com/search?q=x&page=2"));
    assert!(matches(&pattern, "https://h.example.com/search?"));
}

#[test]
fn query_parameter_is_percent_decoded_with_plus_as_space() {
    let request = parsed("https://h.example.com/s?q=a+b%2Bc&n%61me=x%26y&flag&empty=");
    assert_eq!(
        request.query("q"),
        QueryValue::One(Cow::Owned("a b+c".to_owned()))
    );
    assert_eq!(
        request.query("name"),
        QueryValue::One(Cow::Owned("x&y".to_owned()))
    );
    assert_eq!(request.query("flag"), QueryValue::One(Cow::Borrowed("")));
    assert_eq!(request.query("empty"), QueryValue::One(Cow::Borrowed("")));
    assert_eq!(request.query("missing"), QueryValue::Absent);
}

#[test]
fn query_value_without_escapes_is_borrowed() {
    let request = parsed("https://h.example.com/s?q=plain");
    assert!(matches!(
        request.query("q"),
        QueryValue::One(Cow::Borrowed("plain"))
    ));
}

#[test]
fn repeated_query_parameter_is_pollution() {
    let request = parsed("https://h.example.com/s?role=user&role=admin");
    assert_eq!(request.query("role"), QueryValue::Repeated);
    let same = parsed("https://h.example.com/s?role=user&role=user");
    assert_eq!(same.query("role"), QueryValue::Repeated);
}

#[test]
fn repeated_query_parameter_is_detected_after_decoding_the_name() {
    let request = parsed("https://h.example.com/s?role=user&%72ole=admin");
    assert_eq!(request.query("role"), QueryValue::Repeated);
}

#[test]
fn query_without_a_query_string_is_absent() {
    assert_eq!(
        parsed("https://h.example.com/s").query("q"),
        QueryValue::Absent
    );
}

#[test]
fn encoded_separators_are_data_in_the_query() {
    let request = parsed("https://h.example.com/s?path=a%2Fb%5Cc");
    assert_eq!(
        request.query("path"),
        QueryValue::One(Cow::Owned("a/b\\c".to_owned()))
    );
}

#[test]
fn non_http_kinds_accept_a_query() {
    let request = parsed("tool:search?limit=5");
    assert_eq!(request.query("limit"), QueryValue::One(Cow::Borrowed("5")));
    assert_eq!(request.path(), "search");
}

/// `?Role=admin`, `?role[]=admin`, `?role%5B%5D=admin`, `?role[0]=admin`: a server that folds
/// case or reads `role[…]` as `role` sees the parameter `role`. All such names are one parameter:
/// twice is `Repeated`, once under a spelling other than the name read is `Variant`; both fail
/// every constraint.
#[test]
fn case_and_bracket_variants_of_a_query_name_are_one_parameter() {
    for variant in [
        "Role",
        "ROLE",
        "rOlE",
        "role[]",
        "role%5B%5D",
        "role%5b%5d",
        "role[0]",
        "role[x]",
        "Role[]",
        "role[a][b]",
        "%52ole",
        "%72ole[]",
    ] {
        let alone = format!("https://h.example.com/s?{variant}=admin&x=1");
        assert_eq!(
            parsed(&alone).query("role"),
            QueryValue::Variant(variant),
            "{alone}"
        );
        for pair in [
            format!("role=user&{variant}=admin"),
            format!("{variant}=admin&role=user"),
            format!("{variant}=admin&{variant}=user"),
        ] {
            let resource = format!("https://h.example.com/s?{pair}");
            assert_eq!(
                parsed(&resource).query("role"),
                QueryValue::Repeated,
                "{resource}"
            );
        }
    }
    // Unicode simple case folding: KELVIN SIGN is `k`, LONG S is `s`, in any position.
    let request = parsed("https://h.example.com/s?%E2%84%AAind=a&%C5%BFort=b");
    assert_eq!(request.query("kind"), QueryValue::Variant("%E2%84%AAind"));
    assert_eq!(request.query("sort"), QueryValue::Variant("%C5%BFort"));
    // The name read may itself carry a suffix; the spelling given decides `One` or `Variant`.
    let request = parsed("https://h.example.com/s?ids[]=1");
    assert_eq!(request.query("ids[]"), QueryValue::One(Cow::Borrowed("1")));
    assert_eq!(request.query("ids"), QueryValue::Variant("ids[]"));
    // Other names stay other parameters.
    let request = parsed("https://h.example.com/s?roles=a&rol=b&role_=c&[role]=d&role=e");
    assert_eq!(request.query("role"), QueryValue::One(Cow::Borrowed("e")));
}

/// `?x=1;role=admin`: servers that split parameters on `;` as on `&` read `role`. A raw `;`
/// anywhere in the query is refused (an encoded `%3B` is data).
#[test]
fn semicolon_in_a_query_is_refused() {
    for resource in [
        "https://h.example.com/s?x=1;role=admin",
        "https://h.example.com/s?;",
        "https://h.example.com/s?role=a;b",
        "https://h.example.com/?a=%41;b",
        "tool:search?x;y",
    ] {
        assert!(
            matches!(rejected(resource), ResourceRejection::QuerySemicolon { .. }),
            "{resource}"
        );
    }
    assert_eq!(
        rejected("https://h.example.com/s?x=1;role=admin").to_string(),
        "query `x=1;role=admin` contains a `;`, which some servers read as a parameter separator"
    );
    // `;` in the path is a segment parameter, as before; `%3B` in the query is data.
    assert!(RequestResource::parse("https://h.example.com/a;v=1/b?x=1").is_ok());
    assert_eq!(
        parsed("https://h.example.com/s?q=a%3Bb").query("q"),
        QueryValue::One(Cow::Owned("a;b".to_owned()))
    );
}

/// A value that decodes to another escape (`%2561` is `%61` once, `a` twice) is undecidable
/// when a constraint reads it; unread, it is left alone (an escaped URL in `next=` is common).
#[test]
fn double_encoded_query_value_is_undecidable() {
    let request = parsed("https://h.example.com/s?role=%2561dmin&next=%2Fa%2520b&q=%25");
    assert_eq!(request.query("role"), QueryValue::DoubleEncoded);
    assert_eq!(request.query("next"), QueryValue::DoubleEncoded);
    assert_eq!(
        request.query("q"),
        QueryValue::One(Cow::Owned("%".to_owned()))
    );
}

/// The issue's query scenario end to end through `Engine`, from bytes and pre-parsed: no other
/// spelling of `role=admin` passes `not { fieldEquals resource.query.role == "admin" }`, and
/// each deny says why it cannot decide.
#[test]
fn query_variants_do_not_pass_a_negated_constraint_end_to_end() {
    let engine = files_engine();
    let base = "https://files.example.com/v1/users/alice/files/report";
    assert_eq!(
        files_call(&engine, &format!("{base}?role=user"), "alice").verdict,
        Verdict::Allow
    );
    assert_eq!(
        files_call(&engine, &format!("{base}?other=admin"), "alice").verdict,
        Verdict::Allow
    );
    for (query, why) in [
        ("Role=admin", "another spelling"),
        ("ROLE=admin", "another spelling"),
        ("role[]=admin", "another spelling"),
        ("role%5B%5D=admin", "another spelling"),
        ("role[0]=admin", "another spelling"),
        ("role[x]=admin", "another spelling"),
        ("role=user&Role=admin", "more than once"),
        ("role=user&role[]=admin", "more than once"),
        ("role=%2561dmin", "double encoding"),
    ] {
        let resource = format!("{base}?{query}");
        let decision = files_call(&engine, &resource, "alice");
        assert_eq!(decision.verdict, Verdict::Deny, "{resource}: {decision:?}");
        assert_eq!(decision.reasons[0].constraint.as_str(), "not", "{query}");
        assert!(
            decision.reasons[0].message.contains(why),
            "{query}: {}",
            decision.reasons[0].message
        );
    }
    let decision = files_call(&engine, &format!("{base}?x=1;role=admin"), "alice");
    assert_eq!(decision.verdict, Verdict::Deny);
    assert_eq!(decision.reasons[0].constraint.as_str(), "resource");
}

/// A variant spelling fails under `optional` too: absent would pass, a variant is not absent.
#[test]
fn a_variant_query_name_fails_an_optional_constraint() {
    let engine = engine_with(r#"    optional fieldEquals resource.query.limit in ["10", "20"]"#);
    let call = |query: &str| {
        files_call(
            &engine,
            &format!("https://files.example.com/v1/users/alice/files/r{query}"),
            "alice",
        )
    };
    assert_eq!(call("").verdict, Verdict::Allow);
    assert_eq!(call("?limit=10").verdict, Verdict::Allow);
    for query in [
        "?Limit=5000",
        "?limit[]=5000",
        "?LIMIT=10",
        "?limit=10&Limit=10",
    ] {
        assert_eq!(call(query).verdict, Verdict::Deny, "{query}");
    }
}

// ---------------------------------------------------------------- parsed accessors

#[test]
fn parsed_request_exposes_its_parts() {
    let request = parsed("https://H.example.com:8443/v3/x?y=1");
    assert_eq!(request.kind(), ResourceKind::Http);
    assert_eq!(request.host(), Some("H.example.com"));
    assert_eq!(request.port(), Some(8443));
    assert_eq!(request.path(), "v3/x");
    assert_eq!(request.query_string(), Some("y=1"));
    assert_eq!(request.as_str(), "https://H.example.com:8443/v3/x?y=1");
    assert_eq!(parsed("http://h.example.com/").port(), Some(80));
}

// ---------------------------------------------------------------- template compile errors

#[test]
fn double_star_must_be_last() {
    let message = template_error(ResourceKind::Http, "https://h.example.com/**/x");
    assert_eq!(
        message,
        "`**` must be the last segment of a resource template"
    );
}

#[test]
fn duplicate_binding_name_is_an_error() {
    let message = template_error(ResourceKind::Db, "{org}/x/{org}");
    assert_eq!(
        message,
        "binding `{org}` appears twice in one resource template"
    );
}

/// Found in review: each new binding was compared with every earlier one, so compiling a
/// template of many bindings was quadratic (a 400 KB policy of one template took 9 s to load).
/// A template binds at most `MAX_BINDINGS` names, with a clear error past that.
#[test]
fn regression_a_template_binds_at_most_max_bindings_names() {
    use capgate::bytecode::resource::MAX_BINDINGS;
    let template = |n: usize| {
        let names: Vec<String> = (0..n).map(|i| format!("{{b{i}}}")).collect();
        format!("https://h.example.com/{}", names.join("/"))
    };
    let pattern = ResourcePattern::compile(ResourceKind::Http, &template(MAX_BINDINGS)).unwrap();
    assert_eq!(pattern.bindings().len(), MAX_BINDINGS);
    let message = template_error(ResourceKind::Http, &template(MAX_BINDINGS + 1));
    assert_eq!(message, "a resource template binds at most 64 names");
    // 40,000 bindings stop at the 65th instead of comparing every pair.
    let message = template_error(ResourceKind::Http, &template(40_000));
    assert_eq!(message, "a resource template binds at most 64 names");
}

#[test]
fn binding_named_query_is_an_error() {
    let message = template_error(ResourceKind::Http, "https://h.example.com/{query}");
    assert!(message.contains("shadow `resource.query`"), "{message}");
}

#[test]
fn invalid_binding_names_are_errors() {
    for template in [
        "{}", "{1x}", "{a-b}", "{a b}", "{a.b}", "x{a}", "{a}x", "{a",
    ] {
        let message = template_error(ResourceKind::Db, template);
        assert!(
            message.contains("binding") || message.contains("whitespace"),
            "{template}: {message}"
        );
    }
}

#[test]
fn wildcard_inside_a_segment_is_an_error() {
    for template in ["a*", "*a", "***"] {
        template_error(ResourceKind::Db, template);
    }
}

#[test]
fn empty_template_segments_are_errors() {
    template_error(ResourceKind::Http, "https://h.example.com/a//b");
    template_error(ResourceKind::Http, "https://h.example.com//a");
    template_error(ResourceKind::Db, "/crm");
    template_error(ResourceKind::Db, "");
}

#[test]
fn dot_segments_in_templates_are_errors() {
    template_error(ResourceKind::Http, "https://h.example.com/a/../b");
    template_error(ResourceKind::Http, "https://h.example.com/a/./b");
    template_error(ResourceKind::Http, "https://h.example.com/a/%2e%2e/b");
}

#[test]
fn bad_percent_encoding_in_template_literal_is_an_error() {
    for template in [
        "https://h.example.com/a%",
        "https://h.example.com/a%G1",
        "https://h.example.com/a%2F",
        "https://h.example.com/a%00",
        "https://h.example.com/a%FF",
    ] {
        template_error(ResourceKind::Http, template);
    }
}

#[test]
fn query_fragment_and_userinfo_in_template_are_errors() {
    template_error(ResourceKind::Http, "https://h.example.com/a?x=1");
    template_error(ResourceKind::Http, "https://h.example.com/a#f");
    template_error(ResourceKind::Http, "https://u@h.example.com/a");
}

#[test]
fn http_template_needs_a_literal_scheme_and_valid_host() {
    template_error(ResourceKind::Http, "h.example.com/a");
    template_error(ResourceKind::Http, "ftp://h.example.com/a");
    template_error(ResourceKind::Http, "https:///a");
    template_error(ResourceKind::Http, "https://h.example.com:0/a");
    template_error(ResourceKind::Http, "https://bücher.example.com/a");
    template_error(ResourceKind::Http, "https://{host}.example.com/a");
    template_error(ResourceKind::Http, "https://a.*.example.com/a");
}

#[test]
fn too_broad_wildcard_host_is_an_error() {
    template_error(ResourceKind::Http, "https://*.com/a");
    template_error(ResourceKind::Http, "https://*/a");
}

#[test]
fn non_http_template_repeating_its_kind_is_an_error() {
    let error = ResourcePattern::compile(ResourceKind::Db, "db:crm").unwrap_err();
    assert_eq!(error.help.as_deref(), Some("write `resource db \"crm\"`"));
}

#[test]
fn whitespace_and_backslash_in_template_are_errors() {
    template_error(ResourceKind::Db, "crm acme");
    template_error(ResourceKind::Db, "crm\\acme");
}

// ---------------------------------------------------------------- properties

fn safe_segment() -> impl Strategy<Value = String> {
    // Unreserved characters plus a few sub-delims; a dot is always followed by another
    // character that is neither a dot nor `;`, so never a dot segment nor a trailing dot.
    "([A-Za-z0-9_~!$'()+,;=:@-]|\\.[A-Za-z0-9_~!$'()+,=:@-]){1,8}"
}

proptest! {
    #[test]
    fn any_safe_path_matches_stars_of_the_same_length(
        segments in prop::collection::vec(safe_segment(), 1..8)
    ) {
        let request_text = format!("https://h.example.com/{}", segments.join("/"));
        let request = RequestResource::parse(&request_text).unwrap();
        let stars = vec!["*"; segments.len()].join("/");
        let pattern = http(&format!("https://h.example.com/{stars}"));
        let mut bindings = Bindings::new();
        prop_assert!(pattern.matches(&request, &mut bindings));
        let longer = http(&format!("https://h.example.com/{stars}/*"));
        prop_assert!(!longer.matches(&request, &mut bindings));
        let rest = http("https://h.example.com/**");
        prop_assert!(rest.matches(&request, &mut bindings));
    }

    #[test]
    fn any_request_with_a_dot_segment_is_rejected(
        before in prop::collection::vec(safe_segment(), 0..4),
        after in prop::collection::vec(safe_segment(), 0..4),
        dot in prop::sample::select(vec![
            ".", "..", "%2e", "%2E", "%2e%2e", "%2E%2E", "%2e%2E", ".%2e", "%2E.", "..;x", ".;",
        ]),
        kind in prop::sample::select(vec!["https://h.example.com/", "db:", "tool:"]),
    ) {
        let mut segments = before.clone();
        segments.push(dot.to_owned());
        segments.extend(after);
        let text = format!("{kind}{}", segments.join("/"));
        let rejected = matches!(
            RequestResource::parse(&text),
            Err(ResourceRejection::DotSegment { .. })
        );
        prop_assert!(rejected, "{}", text);
    }

    #[test]
    fn binding_round_trips_any_percent_encoded_text(raw in "[^\u{0}-\u{1f}\u{7f}-\u{9f}/\\\\]{1,12}") {
        // Text that the segment rules accept: NFKC, between two `_` (no character composes
        // with `_`, so no dot, space or dot segment at either end).
        let value = format!("_{}_", raw.nfkc().collect::<String>());
        prop_assume!(segment_rules_accept(&value));
        let encoded: String = value
            .bytes()
            .map(|b| format!("%{b:02X}"))
            .collect();
        let text = format!("db:x/{encoded}");
        let request = RequestResource::parse(&text).unwrap();
        let pattern = ResourcePattern::compile(ResourceKind::Db, "x/{v}").unwrap();
        let mut bindings = Bindings::new();
        prop_assert!(pattern.matches(&request, &mut bindings));
        prop_assert_eq!(bindings.get(0), Some(value.as_str()));
    }

    #[test]
    fn parse_never_panics(text in "\\PC{0,40}") {
        let _ = RequestResource::parse(&text);
        let _ = ResourcePattern::compile(ResourceKind::Http, &text);
    }
}

/// Percent-decodes one path segment as a server would: `None` for a bad escape or bytes that are
/// not UTF-8.
fn decode_segment(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        if b == b'%' {
            let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(b);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The segment rules, stated on their own: the decoded text of a segment a request may have.
/// Dot segments, segments of dots and spaces and trailing dots all end with a dot or a space,
/// so one edge rule covers them (each with its own rejection in the parser).
fn segment_rules_accept(decoded: &str) -> bool {
    let stem = decoded.split(';').next().unwrap_or(decoded);
    let clean_end = |part: &str| !part.ends_with(|c: char| c == '.' || c.is_whitespace());
    let inner_escape = decoded
        .as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit());
    !decoded.is_empty()
        && decoded.nfkc().eq(decoded.chars())
        && !decoded.contains(['/', '\\'])
        && !decoded.chars().any(char::is_control)
        && !inner_escape
        && !decoded.starts_with(char::is_whitespace)
        && clean_end(decoded)
        && clean_end(stem)
}

/// Pieces of path segments near every segment rule: dots and spaces in every spelling,
/// characters NFKC changes (fullwidth `．`, `／`, `＼`, a ligature, a superscript, KELVIN SIGN,
/// no-break space, one-dot leader), escaped in either hex case or raw, `%25` before hex digits,
/// `;`, and ordinary text.
fn segment_piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        ".",
        "..",
        "%2e",
        "%2E",
        "%20",
        " ",
        "+",
        ";",
        ";x",
        "a",
        "b.c",
        "~",
        "%41",
        "%C3%A9",
        "é",
        "%EF%BC%8E",
        "%ef%bc%8e",
        "%EF%BC%8F",
        "%Ef%Bc%8f",
        "%EF%BC%BC",
        "\u{FF0E}",
        "\u{FF0F}",
        "%EF%AC%81",
        "\u{FB01}",
        "%C2%B2",
        "%E2%84%AA",
        "%C2%A0",
        "%E2%80%A4",
        "%E2%80%A5",
        "%E3%80%80",
        "%25",
        "%252e",
        "%252E",
        "%2532",
        "2e",
        "%32",
        "%65",
        "%CC%81",
        "e",
        "%2F",
        "%5c",
        "%0A",
    ])
}

/// `name` written as a client might: each character in a random case (or, for `k` and `s`,
/// KELVIN SIGN or LONG S, raw or escaped), some percent-encoded in either hex case, then a
/// random `[…]` suffix.
fn spelled(name: &'static str) -> impl Strategy<Value = String> {
    let chars: Vec<char> = name.chars().collect();
    let count = chars.len();
    (
        prop::collection::vec(0u8..6, count),
        prop::sample::select(vec![
            "", "", "", "[]", "%5B%5D", "%5b%5D", "[0]", "[x]", "%5B0%5D", "[a][b]", "[", "]",
        ]),
    )
        .prop_map(move |(spellings, suffix)| {
            let mut key = String::new();
            for (c, how) in chars.iter().zip(spellings) {
                match (how, c) {
                    (1, _) => key.push(c.to_ascii_uppercase()),
                    (2, _) => key.push_str(&format!("%{:02X}", u32::from(*c))),
                    (3, _) => key.push_str(&format!("%{:02x}", u32::from(c.to_ascii_uppercase()))),
                    (4, 'k') => key.push('\u{212A}'),
                    (5, 'k') => key.push_str("%E2%84%AA"),
                    (4, 's') => key.push('\u{17F}'),
                    (5, 's') => key.push_str("%c5%bf"),
                    _ => key.push(*c),
                }
            }
            key.push_str(suffix);
            key
        })
}

/// The equivalence `RequestResource::query` uses, stated on its own: decode, drop a trailing
/// `[…]`, fold case (simple folding, here only what `spelled` produces).
fn same_name(key: &str, name: &str) -> bool {
    let fold = |text: &str| -> String {
        let stem = match (text.ends_with(']'), text.find('[')) {
            (true, Some(at)) => &text[..at],
            _ => text,
        };
        stem.chars()
            .map(|c| match c {
                '\u{212A}' => 'k',
                '\u{17F}' => 's',
                c => c.to_ascii_lowercase(),
            })
            .collect()
    };
    decode_segment(key).is_some_and(|key| fold(&key) == fold(name))
}

proptest! {
    /// Segments built from pieces near every segment rule, at a random position of a random
    /// kind's path: the request parses exactly when every segment decodes and the rules accept
    /// it, and a refused one is refused for a path rule.
    #[test]
    fn generated_segments_are_refused_exactly_when_a_segment_rule_says_so(
        before in prop::collection::vec(safe_segment(), 0..3),
        pieces in prop::collection::vec(segment_piece(), 1..5),
        after in prop::collection::vec(safe_segment(), 0..3),
        kind in prop::sample::select(vec!["https://h.example.com/", "http://h.example.com:8080/", "db:", "tool:"]),
    ) {
        let segment: String = pieces.concat();
        let mut segments = before;
        segments.push(segment.clone());
        segments.extend(after);
        let text = format!("{kind}{}", segments.join("/"));
        // A raw space is refused before any segment rule (raw whitespace); `+` is an ordinary
        // character in a path.
        let raw_space = segment.contains(' ');
        let accepted = !raw_space && decode_segment(&segment).is_some_and(|d| segment_rules_accept(&d));
        let parsed = RequestResource::parse(&text);
        prop_assert_eq!(parsed.is_ok(), accepted, "{} {:?}", text, parsed);
        if let Err(rejection) = parsed {
            let path_rule = matches!(
                rejection,
                ResourceRejection::ControlCharacter { .. }
                    | ResourceRejection::DotSegment { .. }
                    | ResourceRejection::EncodedSeparator { .. }
                    | ResourceRejection::EncodedControl { .. }
                    | ResourceRejection::NotUtf8 { .. }
                    | ResourceRejection::NotNormalized { .. }
                    | ResourceRejection::DotsAndSpaces { .. }
                    | ResourceRejection::TrailingDotOrSpace { .. }
                    | ResourceRejection::LeadingSpace { .. }
                    | ResourceRejection::DoubleEncoding { part: ResourcePart::Path, .. }
            );
            prop_assert!(path_rule, "{} {:?}", text, rejection);
        }
    }

    /// Every spelling of a name is the same parameter: alone it is `One` when it decodes to the
    /// name exactly and `Variant` otherwise; next to any other spelling it is `Repeated`.
    #[test]
    fn generated_spellings_of_a_query_name_are_one_parameter(
        (name, key, other) in prop::sample::select(vec!["role", "kind", "sort", "status"])
            .prop_flat_map(|name| (Just(name), spelled(name), spelled(name))),
        // Another parameter; `x…` is never a spelling of the names tried.
        before in prop::option::of("x[a-z]{0,3}=[a-z0-9]{0,3}"),
        first in any::<bool>(),
    ) {
        let mut pairs: Vec<String> = before.into_iter().collect();
        pairs.push(format!("{key}=admin"));
        let text = format!("https://h.example.com/s?{}", pairs.join("&"));
        let request = parsed(&text);
        let exact = decode_segment(&key).as_deref() == Some(name);
        let same = same_name(&key, name);
        let expected = match (exact, same) {
            (true, _) => QueryValue::One(Cow::Borrowed("admin")),
            (false, true) => QueryValue::Variant(&key),
            (false, false) => QueryValue::Absent,
        };
        let got = request.query(name);
        // `One` may borrow or own; compare the text.
        prop_assert_eq!(format!("{got:?}").replace("Owned", "Borrowed"), format!("{expected:?}"), "{}", text);
        // Two names of the one parameter (a lone `[` or `]` is no `[…]` suffix: `role[` is
        // another name).
        if same && same_name(&other, name) {
            let two = if first {
                format!("https://h.example.com/s?{key}=admin&{other}=user")
            } else {
                format!("https://h.example.com/s?{other}=user&{key}=admin")
            };
            prop_assert_eq!(parsed(&two).query(name), QueryValue::Repeated, "{}", two);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// End to end: no generated spelling of `role=admin` (alone or next to `role=user`) passes
    /// `not { fieldEquals resource.query.role == "admin" }`, from bytes or pre-parsed.
    #[test]
    fn generated_query_spellings_never_pass_a_negated_constraint(
        key in spelled("role"),
        with_user in any::<bool>(),
    ) {
        prop_assume!(same_name(&key, "role"));
        let engine = files_engine();
        let query = if with_user { format!("role=user&{key}=admin") } else { format!("{key}=admin") };
        let resource = format!("https://files.example.com/v1/users/alice/files/r?{query}");
        let decision = files_call(&engine, &resource, "alice");
        prop_assert_eq!(decision.verdict, Verdict::Deny, "{}", resource);
    }

    /// End to end: a traversal built from generated dot-like pieces never reaches another
    /// user's files; the decision is allow only for a path the segment rules accept.
    #[test]
    fn generated_traversals_never_reach_another_users_files(
        pieces in prop::collection::vec(segment_piece(), 1..4),
        depth in 1usize..3,
    ) {
        let engine = files_engine();
        let segment: String = pieces.concat();
        prop_assume!(!segment.contains(' '));
        let climb = vec![segment.as_str(); depth].join("/");
        let resource = format!("https://files.example.com/v1/users/alice/files/{climb}/bob/files/secret");
        let decision = files_call(&engine, &resource, "alice");
        let accepted = decode_segment(&segment).is_some_and(|d| segment_rules_accept(&d));
        prop_assert_eq!(decision.verdict == Verdict::Allow, accepted, "{} {:?}", resource, decision);
    }
}

#[test]
fn compiled_pattern_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<ResourcePattern>();
    assert_send_sync::<RequestResource<'static>>();
    assert_send_sync::<Bindings<'static>>();
}
