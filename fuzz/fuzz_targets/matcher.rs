//! The regex shortcut (`capgate::bytecode::matcher::Matcher`) against the regex crate it stands
//! in for. Any difference is a policy that allows or denies a string the written regex would not.
//!
//! Input: one flags byte (bit 0: the `i` flag; bits 1–2: the pattern as it is, wrapped as
//! `fieldMatches` compiles it — `^(?:…)$` —, or anchored at the start or the end only), then
//! UTF-8 text: the pattern up to the first NUL, then texts separated by NULs. Never panics, and
//! whenever the regex compiles, `Matcher::is_match` equals `Regex::is_match` on every text — the
//! regex crate given the pattern with its perl classes written as the ASCII classes capgate reads
//! them as (`\d` as `[[:digit:]]`, ...).
#![no_main]

use capgate::bytecode::matcher::Matcher;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(input) = std::str::from_utf8(rest) else {
        return;
    };
    let mut parts = input.split('\0');
    let Some(pattern) = parts.next() else {
        return;
    };
    let pattern = match (flags >> 1) & 3 {
        0 => pattern.to_owned(),
        1 => format!("^(?:{pattern})$"),
        2 => format!("^{pattern}"),
        _ => format!("{pattern}$"),
    };
    let case_insensitive = flags & 1 == 1;
    // The regex the fuzzer compares against is built apart from the matcher's own, from the
    // pattern with `\d`, `\w` and `\s` spelled as ASCII classes.
    let Ok(ascii) = capgate::bytecode::matcher::with_ascii_classes(&pattern) else {
        return;
    };
    let Ok(regex) = regex::RegexBuilder::new(&ascii)
        .case_insensitive(case_insensitive)
        .size_limit(1 << 20)
        .build()
    else {
        return;
    };
    let Ok(matcher) = Matcher::build(&pattern, case_insensitive, 1 << 20) else {
        panic!("the regex crate compiled {pattern:?} but Matcher::build refused it");
    };
    for text in parts {
        assert_eq!(
            matcher.is_match(text),
            regex.is_match(text),
            "pattern {pattern:?} (i = {case_insensitive}, shortcut = {}) on {text:?}",
            matcher.has_shortcut()
        );
    }
});
