//! Byte-string comparison for the decision path (tape keys, template literals, regex affixes).

/// Byte equality in line, by whole words: from the front, then one (possibly overlapping) word
/// that ends at the end. The literals compared on the decision path (template segments and
/// hosts, regex affixes) are short, and a `memcmp` call for each costs more than the comparison
/// (measured: the regex shortcut takes 47 ns per match with `str::strip_suffix`, 8 ns with this).
#[inline]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let same = |at: usize, width: usize| match (a.get(at..at + width), b.get(at..at + width)) {
        // Both are exactly `width` bytes; a failed conversion would mean unequal (fail closed).
        (Some(x), Some(y)) => match width {
            8 => matches!((word::<8>(x), word::<8>(y)), (Some(p), Some(q)) if p == q),
            _ => matches!((word::<4>(x), word::<4>(y)), (Some(p), Some(q)) if p == q),
        },
        _ => false,
    };
    if n >= 8 {
        let mut at = 0;
        while at + 8 < n {
            if !same(at, 8) {
                return false;
            }
            at += 8;
        }
        return same(n - 8, 8);
    }
    if n >= 4 {
        return same(0, 4) && same(n - 4, 4);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// `bytes` as an array, when it has exactly `N` of them.
#[inline]
fn word<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(bytes).ok()
}

/// Whether `bytes` holds a byte a JSON string must escape (`"`, `\` or a control character):
/// the tape's test for the end of a plain run ([`is_special`]), for code that writes JSON
/// strings. A branch-free OR over the bytes (vector compares): for the short strings it is
/// meant for, cheaper than a walk like [`find_special`]'s, which finds where the byte is (a
/// word-then-block walk costs +124 instructions per audit record).
pub(crate) fn needs_escape(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(false, |any, &byte| any | is_special::<false>(byte))
}

/// Whether `byte` is `"`, `\`, below 0x20 or (when `STOP_ON_HIGH`) at least 0x80: the byte
/// [`find_special`] stops at. Branch-free, so that [`any_special`] compiles to vector compares.
#[inline(always)]
pub(crate) fn is_special<const STOP_ON_HIGH: bool>(byte: u8) -> bool {
    // As a signed byte, every byte ≥ 0x80 is negative, so one comparison covers both ends.
    let outside = if STOP_ON_HIGH {
        i8::from_ne_bytes([byte]) < 0x20
    } else {
        byte < 0x20
    };
    (byte == b'"') | (byte == b'\\') | outside
}

#[cfg(test)]
mod tests {
    use super::bytes_eq;

    #[test]
    fn bytes_eq_is_byte_equality_at_every_length_and_position() {
        for len in 0..40 {
            let a: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(bytes_eq(&a, &a.clone()), "len {len}");
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!bytes_eq(&a, &b), "len {len}, difference at {at}");
            }
            let mut longer = a.clone();
            longer.push(b'z');
            assert!(
                !bytes_eq(&a, &longer) && !bytes_eq(&longer, &a),
                "len {len}"
            );
        }
    }
}
