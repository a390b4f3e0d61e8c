//! Unicode simple case folding, for names that a server may match without regard to case.
//!
//! Many upstreams bind names case-insensitively: Go's `encoding/json` matches object members with
//! `bytes.EqualFold`, frameworks look query parameters up in case-insensitive maps. A name that
//! capgate reads one way and the upstream another is a fail-open, so names are also compared the
//! way those upstreams compare them:
//!
//! - [`fold_char`] is the simple case folding of one character (Unicode `CaseFolding.txt`,
//!   statuses C and S): one character to one character, so `K` (KELVIN SIGN, U+212A) folds to
//!   `k` and `ſ` (LONG S, U+017F) to `s`, as in Go's `unicode.SimpleFold` orbits. Full foldings
//!   that change the length (`ß` to `ss`) are not applied: the upstreams above do not apply them.
//! - [`fold_eq`] compares two strings character by character under that folding, with an ASCII
//!   fast path that allocates nothing and reads each byte once; [`fold_eq_ascii_key`] is the
//!   same for an ASCII key (a name a policy reads) tried against many names, each usually
//!   rejected by its length alone.

/// The simple case folding of `c` (itself when it has none).
#[inline]
pub(crate) fn fold_char(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    unicode_case_mapping::case_folded(c)
        .and_then(|code| char::from_u32(code.get()))
        .unwrap_or(c)
}

/// The characters of `text`, each simply case-folded.
#[inline]
pub(crate) fn folded(text: &str) -> impl Iterator<Item = char> + Clone + '_ {
    text.chars().map(fold_char)
}

/// True when `a` and `b` are equal under simple case folding (`Role`, `ROLE` and `role`; `K`
/// with `k`). Two ASCII strings compare byte by byte without a table.
#[inline]
pub(crate) fn fold_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    // Only a non-ASCII character can fold to an ASCII one (`K`, `ſ`), so an ASCII string may
    // still equal a non-ASCII one: compare the folded characters.
    folded(a).eq(folded(b))
}

/// The most bytes a character's UTF-8 form has per byte of a character with the same simple case
/// folding: `K` (U+212A, three bytes) folds as `k` (one). A fact of Unicode's simple case folding
/// (`CaseFolding.txt`, statuses C and S), not a limit: strings whose lengths differ by more than
/// this factor are never equal under folding (checked over every character by a test).
pub(crate) const FOLD_GROWTH: usize = 3;

/// [`fold_eq`] for a `key` that is ASCII, cheaper for the usual `name`: one of another length is
/// equal to the key under folding only if it holds the KELVIN SIGN or LONG S (the only
/// characters outside ASCII that fold into it), which make it longer, at most [`FOLD_GROWTH`]
/// times. For the walk over an object's member names after a lookup missed.
#[inline]
pub(crate) fn fold_eq_ascii_key(name: &str, key: &str) -> bool {
    debug_assert!(key.is_ascii());
    let (n, k) = (name.len(), key.len());
    if n == k {
        // `k` characters in `k` bytes: ASCII, so ASCII case is all there is to fold.
        return name.as_bytes().eq_ignore_ascii_case(key.as_bytes());
    }
    if n < k || n > FOLD_GROWTH.saturating_mul(k) || name.is_ascii() {
        return false;
    }
    folded(name).eq(folded(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_ascii_key_comparison_is_fold_eq() {
        let names = [
            "amount",
            "Amount",
            "AMOUNT",
            "amounts",
            "mount",
            "kind",
            "\u{212A}ind",
            "KIND",
            "\u{212A}\u{212A}",
            "kk",
            "sum",
            "\u{17F}um",
            "\u{17F}",
            "s",
            "S",
            "",
            "é",
            "e",
            "\u{212A}",
            "k",
            "ask",
            "a\u{17F}\u{212A}",
            "@",
            "`",
            "[",
            "{",
        ];
        for name in names {
            for key in names.iter().filter(|key| key.is_ascii()) {
                assert_eq!(
                    fold_eq_ascii_key(name, key),
                    fold_eq(name, key),
                    "{name:?} {key:?}"
                );
            }
        }
    }

    #[test]
    fn case_variants_differ_in_length_by_at_most_the_growth_factor() {
        // Every class of characters with one simple folding: its longest member in UTF-8 is at
        // most `FOLD_GROWTH` times its shortest, so a name that much longer than an ASCII key is
        // no case variant of it.
        let mut lengths = std::collections::HashMap::new();
        let folding: Vec<(char, char)> = (0..=0x10FFFF)
            .filter_map(char::from_u32)
            .map(|c| (c, fold_char(c)))
            .filter(|(c, folded)| c != folded)
            .collect();
        for &(c, folded) in &folding {
            for member in [c, folded] {
                let entry = lengths.entry(folded).or_insert((usize::MAX, 0));
                entry.0 = member.len_utf8().min(entry.0);
                entry.1 = member.len_utf8().max(entry.1);
            }
        }
        for (folded, (shortest, longest)) in lengths {
            assert!(longest <= FOLD_GROWTH * shortest, "{folded:?}");
        }
        // Only two characters outside ASCII fold into it.
        let into_ascii: Vec<char> = folding
            .iter()
            .filter(|(c, folded)| !c.is_ascii() && folded.is_ascii())
            .map(|(c, _)| *c)
            .collect();
        assert_eq!(into_ascii, ['\u{17F}', '\u{212A}']);
    }

    #[test]
    fn simple_folding_joins_case_variants_and_their_orbits() {
        for (a, b) in [
            ("role", "ROLE"),
            ("role", "Role"),
            ("kind", "\u{212A}ind"), // KELVIN SIGN
            ("sort", "\u{17F}ort"),  // LATIN SMALL LETTER LONG S
            ("σ", "ς"),              // final sigma
            ("σ", "Σ"),
            ("straße", "STRAẞE"), // capital sharp s folds to ß
            ("", ""),
        ] {
            assert!(fold_eq(a, b), "{a} ~ {b}");
            assert!(fold_eq(b, a), "{b} ~ {a}");
        }
        for (a, b) in [
            ("role", "roles"),
            ("role", "rôle"),
            // Full folding only: `ß` is `ss` there, not under simple folding.
            ("strasse", "straße"),
            // `İ` (U+0130) has no simple folding.
            ("i", "\u{130}"),
            ("role", "rol"),
        ] {
            assert!(!fold_eq(a, b), "{a} !~ {b}");
        }
    }

    proptest! {
        /// The ASCII fast path agrees with comparing the folded characters.
        #[test]
        fn fold_eq_agrees_with_comparing_folded_characters(
            a in "[a-zA-Z_\u{212A}\u{17F}ſσςΣßẞ]{0,6}",
            b in "[a-zA-Z_\u{212A}\u{17F}ſσςΣßẞ]{0,6}",
        ) {
            prop_assert_eq!(fold_eq(&a, &b), folded(&a).eq(folded(&b)));
        }
    }
}
