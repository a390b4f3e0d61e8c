//! Unicode simple case folding, for the names an upstream may read case-insensitively.
//!
//! Two names are *case variants* of each other ([`fold_eq`]) when they have the same number of
//! characters and each pair of characters has the same simple case folding — the mapping of
//! Unicode's `CaseFolding.txt` with status C or S (Unicode 16, through `unicode-case-mapping`).
//! That is the equality Go's `strings.EqualFold` and `encoding/json` use to bind a JSON member to
//! a struct field: `amount`, `Amount` and `AMOUNT` are one name, and so are `kind` and `Kind`
//! with the KELVIN SIGN (U+212A, folds to `k`) and `sum` and `ſum` with LATIN SMALL LETTER LONG S
//! (U+017F, folds to `s`). Full folding (`ß` against `ss`) changes the number of characters and
//! is not what such servers compare.
//!
//! Names that are plain ASCII, the usual case, compare with one `eq_ignore_ascii_case`: the only
//! characters outside ASCII that fold into it are U+212A and U+017F, and they are two or three
//! bytes long, so a name holding one is never as long as its ASCII variant.

/// The most bytes a character's UTF-8 form has per byte of a character with the same simple case
/// folding: `K` (U+212A, three bytes) folds as `k` (one). Strings whose lengths differ by more
/// than this factor are never case variants (checked over every character by a test).
pub(crate) const MAX_GROWTH: usize = 3;

/// The simple case folding of `c` (`c` itself when it has none).
#[inline]
pub(crate) fn fold_char(c: char) -> char {
    unicode_case_mapping::case_folded(c)
        .and_then(|folded| char::from_u32(folded.get()))
        .unwrap_or(c)
}

/// The characters of `text`, each simply case folded.
#[inline]
pub(crate) fn folded(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().map(fold_char)
}

/// True when `a` and `b` are equal under simple case folding (module docs): byte-equal names
/// included. Allocates nothing.
#[inline]
pub(crate) fn fold_eq(a: &str, b: &str) -> bool {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    // Equal up to ASCII case: the bytes outside ASCII are then identical, so the characters
    // are the same up to the case of ASCII letters.
    if x.len() == y.len() && x.eq_ignore_ascii_case(y) {
        return true;
    }
    if x.len() > MAX_GROWTH.saturating_mul(y.len()) || y.len() > MAX_GROWTH.saturating_mul(x.len())
    {
        return false;
    }
    // ASCII folds only to ASCII, and nothing outside ASCII folds to the same as two ASCII
    // strings that differ other than by case.
    if x.is_ascii() && y.is_ascii() {
        return false;
    }
    unicode_fold_eq(a, b)
}

/// [`fold_eq`] for a `key` that is ASCII (the names a policy reads usually are), cheaper for
/// the usual name: one of another length is a case variant only if it holds the KELVIN SIGN or
/// LONG S, which makes it longer (at most [`MAX_GROWTH`] times).
#[inline]
pub(crate) fn fold_eq_ascii_key(name: &str, key: &str) -> bool {
    debug_assert!(key.is_ascii());
    let (n, k) = (name.len(), key.len());
    if n == k {
        // `k` characters in `k` bytes: ASCII, so ASCII case is all there is to fold.
        return name.as_bytes().eq_ignore_ascii_case(key.as_bytes());
    }
    if n < k || n > MAX_GROWTH.saturating_mul(k) || name.is_ascii() {
        return false;
    }
    unicode_fold_eq(name, key)
}

/// [`fold_eq`] character by character, for names outside ASCII.
#[cold]
#[inline(never)]
pub(crate) fn unicode_fold_eq(a: &str, b: &str) -> bool {
    folded(a).eq(folded(b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

    use std::collections::HashMap;

    use super::{MAX_GROWTH, fold_char, fold_eq};

    #[test]
    fn ascii_names_are_case_variants_up_to_ascii_case() {
        assert!(fold_eq("amount", "Amount"));
        assert!(fold_eq("amount", "AMOUNT"));
        assert!(fold_eq("amount", "amount"));
        assert!(fold_eq("", ""));
        assert!(!fold_eq("amount", "amounts"));
        assert!(!fold_eq("amount", "am0unt"));
        // `@` and `` ` `` differ only in the bit that is case for letters.
        assert!(!fold_eq("a@", "a`"));
        assert!(!fold_eq("[", "{"));
    }

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
        ];
        for name in names {
            for key in names.iter().filter(|key| key.is_ascii()) {
                assert_eq!(
                    super::fold_eq_ascii_key(name, key),
                    fold_eq(name, key),
                    "{name:?} {key:?}"
                );
            }
        }
    }

    #[test]
    fn kelvin_sign_and_long_s_are_case_variants_of_ascii_letters() {
        assert!(fold_eq("kind", "\u{212A}ind"));
        assert!(fold_eq("KIND", "\u{212A}ind"));
        assert!(fold_eq("sum", "\u{17F}um"));
        assert!(fold_eq("SUM", "\u{17F}UM"));
        assert!(fold_eq("ask", "a\u{17F}\u{212A}"));
        assert!(!fold_eq("kind", "\u{212A}inds"));
    }

    #[test]
    fn other_scripts_fold_simply_and_full_folding_does_not_apply() {
        assert!(
            !fold_eq("größe", "GRÖSSE"),
            "ß is not ss under simple folding"
        );
        assert!(fold_eq("ß", "\u{1E9E}"), "capital sharp s folds to ß");
        assert!(fold_eq("σ", "Σ"));
        assert!(fold_eq("ς", "Σ"), "final sigma folds to σ");
        assert!(fold_eq("Ωmega", "\u{2126}MEGA"), "ohm sign folds to ω");
        assert!(fold_eq("ǆ", "ǅ"), "titlecase digraph");
        // İ (U+0130) has only a full and a Turkic folding.
        assert!(!fold_eq("i", "\u{130}"));
        assert!(!fold_eq("é", "e"));
    }

    #[test]
    fn case_variants_differ_in_length_by_at_most_the_growth_factor() {
        // Every class of characters with one simple folding: its longest member in UTF-8 is at
        // most `MAX_GROWTH` times its shortest, so `fold_eq` may reject longer ratios at once.
        let mut lengths: HashMap<char, (usize, usize)> = HashMap::new();
        let folding: Vec<(char, char)> = (0..=0x10FFFF)
            .filter_map(char::from_u32)
            .map(|c| (c, fold_char(c)))
            .filter(|(c, folded)| c != folded)
            .collect();
        for &(c, folded) in &folding {
            for member in [c, folded] {
                let entry = lengths.entry(folded).or_insert((usize::MAX, 0));
                entry.0 = entry.0.min(member.len_utf8());
                entry.1 = entry.1.max(member.len_utf8());
            }
        }
        for (folded, (shortest, longest)) in lengths {
            assert!(longest <= MAX_GROWTH * shortest, "{folded:?}");
        }
        // Only two characters outside ASCII fold into it.
        let into_ascii: Vec<char> = folding
            .iter()
            .filter(|(c, folded)| !c.is_ascii() && folded.is_ascii())
            .map(|(c, _)| *c)
            .collect();
        assert_eq!(into_ascii, ['\u{17F}', '\u{212A}']);
    }
}
