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
//!   fast path that allocates nothing and reads each byte once.

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
