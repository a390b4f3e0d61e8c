use proptest::prelude::*;

use super::{Matcher, MatcherCache, SEARCH_STATES, nfa_states, parse, with_ascii_classes};

fn matcher(pattern: &str, case_insensitive: bool) -> Matcher {
    Matcher::build(pattern, case_insensitive, 1 << 20)
        .unwrap_or_else(|e| panic!("`{pattern}` must compile: {e}"))
}

/// The same pattern built by the regex crate itself, its perl classes written out as ASCII
/// classes: what the matcher must answer.
fn regex_crate(pattern: &str, case_insensitive: bool) -> regex::Regex {
    let ascii =
        with_ascii_classes(pattern).unwrap_or_else(|e| panic!("`{pattern}` must parse: {e}"));
    regex::RegexBuilder::new(&ascii)
        .case_insensitive(case_insensitive)
        .size_limit(1 << 20)
        .build()
        .unwrap_or_else(|e| panic!("`{pattern}` must compile in the regex crate: {e}"))
}

/// Asserts the shortcut is (or is not) taken, and that it answers as the regex does on `texts`.
fn check(pattern: &str, shortcut: bool, texts: &[&str]) {
    let (m, re) = (matcher(pattern, false), regex_crate(pattern, false));
    assert_eq!(m.has_shortcut(), shortcut, "shortcut for `{pattern}`");
    for text in texts {
        let expected = re.is_match(text);
        assert_eq!(m.is_match(text), expected, "`{pattern}` on {text:?}");
        assert_eq!(
            m.engine_is_match(text),
            expected,
            "engine: `{pattern}` on {text:?}"
        );
    }
}

const TEXTS: &[&str] = &[
    "",
    "a",
    "@",
    "alice@example.com",
    "@example.com",
    "eve@evil.com",
    "a@b@example.com",
    "alice@example.comx",
    "xalice@example.com",
    "INV-123456",
    "INV-12345",
    "INV-1234567",
    "inv-123456",
    "é@example.com",
    "\n@example.com",
    "日本@example.com",
    "ab",
    "aab",
    "abab",
];

#[test]
fn the_usual_anchored_shapes_take_the_shortcut() {
    for pattern in [
        r"^(?:[^@]+@example\.com)$",
        r"^[^@]+@example\.com$",
        r"^INV-[0-9]{6}$",
        r"^(?:[a-z0-9-]{1,63})$",
        r"^a*b$",
        r"^(a)b$",
        // One-character alternatives are a class.
        r"^(?:a|b)$",
        r"^\d+$",
        r"^.*$",
        r"^$",
        r"^exact$",
        r"\A[a-z]+\z",
    ] {
        check(pattern, true, TEXTS);
    }
}

#[test]
fn lone_literals_take_the_shortcut_with_any_anchoring() {
    for pattern in ["^INV-", r"example\.com$", r"@example\.com", "é"] {
        check(pattern, true, TEXTS);
    }
}

#[test]
fn other_shapes_go_to_the_regex_engine() {
    for pattern in [
        "",
        "^",
        "a|b",
        "^(?:ab|b)$",
        "^[a-z]+",
        "[a-z]+$",
        "[a-z]",
        "^(ab)+$",
        "^a+b+$",
        r"^\bword\b$",
        "(?m)^a$",
        "(?-u:[a-z])",
        "^^a$",
        "^(?i)ab$",
    ] {
        check(pattern, false, TEXTS);
    }
}

#[test]
fn the_case_insensitive_flag_is_parsed_as_the_regex_was_built() {
    // With `i`, `abc` becomes three classes: no shortcut, and the regex answers.
    let m = matcher("^(?:abc)$", true);
    assert!(!m.has_shortcut());
    assert!(m.is_match("ABC"));
    // A run of a case-folded class still takes it.
    let m = matcher("^(?:[a-c]+)$", true);
    assert!(m.has_shortcut());
    assert!(m.is_match("AbC"));
    assert!(!m.is_match("abd"));
}

/// Patterns of every recognised shape, and some near misses, from a small alphabet so that
/// generated texts often match.
fn pattern() -> impl Strategy<Value = String> {
    let literal = prop::collection::vec(
        prop::sample::select(vec!["a", "b", "@", ".", "é", "日"]),
        0..3,
    )
    .prop_map(|parts| regex::escape(&parts.concat()));
    let class = prop::sample::select(vec![
        "[a-b]", "[^@]", ".", r"\d", "[é日]", "[^a]", "a", "é", r"\w", "(?s:.)",
    ]);
    let repeat = prop::sample::select(vec!["", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}"]);
    let start = prop::sample::select(vec!["", "^", r"\A"]);
    let end = prop::sample::select(vec!["", "$", r"\z"]);
    (
        start,
        literal.clone(),
        prop::option::of((class, repeat)),
        literal,
        end,
    )
        .prop_map(|(start, prefix, run, suffix, end)| {
            let run = run.map_or(String::new(), |(class, repeat)| format!("{class}{repeat}"));
            format!("{start}{prefix}{run}{suffix}{end}")
        })
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', '@', '.', 'é', '日', '1', '\n', 'Z']),
        0..8,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_shortcut_answers_as_the_regex_does(
        pattern in pattern(),
        case_insensitive in any::<bool>(),
        texts in prop::collection::vec(text(), 1..16),
    ) {
        let m = matcher(&pattern, case_insensitive);
        let re = regex_crate(&pattern, case_insensitive);
        for text in &texts {
            let expected = re.is_match(text);
            prop_assert_eq!(
                m.is_match(text),
                expected,
                "`{}` (i = {}) on {:?}", pattern, case_insensitive, text
            );
            prop_assert_eq!(
                m.engine_is_match(text),
                expected,
                "engine: `{}` (i = {}) on {:?}", pattern, case_insensitive, text
            );
        }
    }
}

/// A source that does not parse on its own is refused before it is anchored (regression: one
/// that closed the anchoring group early escaped the whole-string match); one that does parse
/// keeps its meaning inside the group, inline flags included.
#[test]
fn anchoring_refuses_a_source_that_is_not_a_regex_on_its_own() {
    for bad in ["[a-z]+)|(?:x", "a)(?m)(?:b", ")", "(", "abc\\", "x)|(y"] {
        assert!(Matcher::anchored(bad).is_err(), "{bad}");
    }
    for (source, text, whole) in [
        ("a|b", "ab", false),
        ("a|b", "b", true),
        ("(?m)a$", "a\nb", false),
        ("(?i)abc", "ABC", true),
        ("(?x) a b # a comment\n", "ab", true),
        ("[)]", ")", true),
        ("\\)|x", ")", true),
        ("\\)|x", ")x", false),
    ] {
        let anchored = Matcher::anchored(source).unwrap();
        let matcher = Matcher::build(&anchored, false, 1 << 20).unwrap();
        assert_eq!(matcher.is_match(text), whole, "{source:?} on {text:?}");
    }
}

/// A verbose-mode comment that runs to the end of the source ends before the anchoring `)$`
/// (regression: `(?x)a # c` was refused as "unclosed group", the comment having swallowed the
/// group's close).
#[test]
fn verbose_regex_comments_are_not_an_unclosed_group() {
    for (source, text, whole) in [
        ("(?x)a # c", "a", true),
        ("(?x)a # c", "ab", false),
        ("(?x)a # c", "a # c", false),
        ("(?x) a b #", "ab", true),
        ("(?x)a|b # either", "b", true),
        ("(?x)a|b # either", "ba", false),
        (
            "(?x:a)b # not a comment: x is off",
            "ab # not a comment: x is off",
            true,
        ),
        ("a\\# c", "a# c", true),
    ] {
        let anchored = Matcher::anchored(source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
        let matcher = Matcher::build(&anchored, false, 1 << 20).unwrap();
        assert_eq!(matcher.is_match(text), whole, "{source:?} on {text:?}");
    }
}

#[test]
fn a_cache_builds_each_pattern_flag_and_limit_once_and_answers_as_a_fresh_build() {
    let mut cache = MatcherCache::default();
    for _ in 0..3 {
        for (pattern, case_insensitive) in [
            ("[^@]+@example\\.com", false),
            ("a|b", false),
            ("a|b", true),
        ] {
            let cached = cache.build(pattern, case_insensitive, 1 << 20).unwrap();
            let fresh = matcher(pattern, case_insensitive);
            assert_eq!(cached.has_shortcut(), fresh.has_shortcut(), "{pattern}");
            for text in TEXTS.iter().chain(&["A", "B", "b"]) {
                assert_eq!(
                    cached.is_match(text),
                    fresh.is_match(text),
                    "`{pattern}` on {text:?}"
                );
            }
        }
    }
    assert_eq!(cache.len(), 3);
    // Another size limit is another build, and a pattern over it fails at every use alike.
    let limit = 64;
    let too_big = "[a-z]{1000}";
    let first = cache.build(too_big, false, limit).unwrap_err();
    let again = cache.build(too_big, false, limit).unwrap_err();
    assert_eq!(first.to_string(), again.to_string());
    assert_eq!(
        first.to_string(),
        Matcher::build(too_big, false, limit)
            .unwrap_err()
            .to_string()
    );
    assert_eq!(cache.len(), 4);
}

/// The matcher builds the regex crate's engine itself (from the syntax tree it parsed once), so
/// a pattern the regex crate refuses is refused with the regex crate's error, text and kind.
#[test]
fn a_build_error_is_the_error_the_regex_crate_gives() {
    for (pattern, case_insensitive, limit) in [
        ("(", false, 1 << 20),
        ("a{2,1}", false, 1 << 20),
        ("(?=a)b", false, 1 << 20),
        ("(a)\\1", false, 1 << 20),
        ("\\p{NotAClass}", true, 1 << 20),
        ("[z-a]", false, 1 << 20),
        ("[a-z]{1000}", false, 64),
        ("\\w{50}", true, 1 << 10),
    ] {
        let ours = Matcher::build(pattern, case_insensitive, limit).unwrap_err();
        let theirs = regex::RegexBuilder::new(
            &with_ascii_classes(pattern).unwrap_or_else(|_| pattern.to_owned()),
        )
        .case_insensitive(case_insensitive)
        .size_limit(limit)
        .build()
        .unwrap_err();
        assert_eq!(ours, theirs, "{pattern}");
        assert_eq!(ours.to_string(), theirs.to_string(), "{pattern}");
    }
}

/// Pieces of a pattern with a perl class, each with the same piece written with explicit ASCII
/// ranges: the meaning `\d`, `\w` and `\s` have in capgate, spelled so that the regex crate
/// reads it alike.
const PERL_PIECES: &[(&str, &str)] = &[
    (r"\d", "[0-9]"),
    (r"\D", "[^0-9]"),
    (r"\w", "[0-9A-Za-z_]"),
    (r"\W", "[^0-9A-Za-z_]"),
    (r"\s", r"[\t\n\x0B\x0C\r ]"),
    (r"\S", r"[^\t\n\x0B\x0C\r ]"),
    (r"[\d.]", "[0-9.]"),
    (r"[^\s@]", r"[^\t\n\x0B\x0C\r @]"),
    (r"[\w&&[^_]]", "[0-9A-Za-z]"),
    (r"[[\W]a]", "[[^0-9A-Za-z_]a]"),
    (r"\p{Nd}", r"\p{Nd}"),
    ("é", "é"),
    ("a", "a"),
    (".", "."),
];

/// Characters that tell ASCII and Unicode perl classes apart, and some that do not.
fn perl_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            'a', 'Z', '_', '7', ' ', '\t', '@', '.', 'é', 'ｆ', '١', '１', '৩', '\u{a0}',
            '\u{3000}', '\u{2028}', '\u{85}', 'K', 'k', '\u{212a}', 'ſ',
        ]),
        0..6,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// A pattern of perl classes answers as the same pattern with the classes spelled out in
    /// ASCII, with and without `i`: `\d`, `\w` and `\s` never take in a Unicode digit, letter or
    /// space, and their negations take in every one.
    #[test]
    fn perl_classes_answer_as_their_ascii_spelling(
        pieces in prop::collection::vec(
            (prop::sample::select(PERL_PIECES.to_vec()),
             prop::sample::select(vec!["", "*", "+", "?", "{2}"])),
            1..4,
        ),
        anchored in any::<bool>(),
        case_insensitive in any::<bool>(),
        texts in prop::collection::vec(perl_text(), 1..12),
    ) {
        let (mut ours, mut spelled) = (String::new(), String::new());
        for ((perl, ascii), repeat) in &pieces {
            ours.push_str(perl);
            ours.push_str(repeat);
            spelled.push_str(ascii);
            spelled.push_str(repeat);
        }
        if anchored {
            ours = Matcher::anchored(&ours).unwrap();
            spelled = format!("^(?:{spelled})$");
        }
        let m = matcher(&ours, case_insensitive);
        let re = regex::RegexBuilder::new(&spelled)
            .case_insensitive(case_insensitive)
            .build()
            .unwrap();
        for text in &texts {
            prop_assert_eq!(
                m.is_match(text),
                re.is_match(text),
                "`{}` (as `{}`, i = {}) on {:?}", ours, spelled, case_insensitive, text
            );
        }
    }
}

/// The cost a match by the regex engine is charged per byte ([`Matcher::cost`]) is at least the
/// number of states of the NFA the engine compiles the pattern to (what its slowest search steps
/// through per byte), and within a small factor of it for the usual shapes — counted from the
/// syntax tree, without compiling a second NFA.
#[test]
fn the_cost_bounds_the_states_of_the_compiled_nfa() {
    use regex_automata::nfa::thompson;
    for (pattern, case_insensitive) in [
        (r"^(?:[^@]+@example\.com)$", false),
        (r"^(?:[^@]+@example\.com)$", true),
        (r"^(?:\w{38}zN)$", false),
        (r"\w{38}zN", true),
        (r"^(?:[^@\s]+@[^@\s]+\.[a-z]{2,})$", true),
        (r"^(?:rec_[0-9a-z]{12})$", false),
        (r"^(?:[1-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|250)$", false),
        (r"^(?:\pL{38}zN)$", false),
        (r"\p{Greek}+|(?:café){2,5}|日本語", true),
        (r"^(?:[a-z]*a[a-z]{20})$", false),
        (r"(a|b|)*?(?:x?){0,7}\b$", false),
        ("", false),
        (".*", false),
        ("(?s).{3,}", false),
    ] {
        let hir = parse(pattern, case_insensitive).unwrap();
        let cost = nfa_states(&hir) + SEARCH_STATES;
        let nfa = thompson::Compiler::new()
            .configure(thompson::Config::new().nfa_size_limit(None))
            .build_from_hir(&hir)
            .unwrap();
        let states = u64::try_from(nfa.states().len()).unwrap();
        assert!(cost >= states, "`{pattern}`: cost {cost} < {states} states");
        assert!(
            cost <= 4 * states + 16,
            "`{pattern}`: cost {cost} ≫ {states} states"
        );
    }
}

/// A shortcut reads each byte once: a table load, and a binary search of the run's ranges for a
/// non-ASCII character. The engine's cost is its NFA's.
#[test]
fn a_match_costs_its_text_times_its_cost_per_byte() {
    let ascii = matcher(r"^(?:INV-[0-9]{6})$", false);
    assert!(ascii.has_shortcut());
    assert_eq!(ascii.cost(), 1);
    assert_eq!(ascii.work("INV-123456"), 11);
    let wide = matcher(r"^(?:[^@]+@example\.com)$", false);
    assert!(wide.has_shortcut());
    assert_eq!(wide.cost(), 2);
    let engine = matcher(r"^(?:a|bc)+$", false);
    assert!(!engine.has_shortcut());
    assert!(engine.cost() > 4);
    assert_eq!(engine.work(""), engine.cost());
    assert_eq!(engine.work("abc"), 4 * engine.cost());
}
