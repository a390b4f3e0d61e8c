//! One 16-byte block of a string body: the offset of its first byte a string scan stops at
//! (`"`, `\`, below 0x20, and — when `STOP_ON_HIGH` — at least 0x80), and whether that byte is
//! the quote ([`Stop`]).
//!
//! With SSE2 (every x86-64) it is three byte compares and two `pmovmskb`s, through `safe_arch`'s
//! safe wrappers of the intrinsics (this crate denies `unsafe`): about half the instructions of
//! two SWAR words, and most of a request's parse is this scan. Elsewhere it is the two SWAR
//! words (module `words`), which the tests also hold to the vector version on x86.

#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
pub(super) use vector::{special_in_block, special_in_block_from};
#[cfg(not(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
)))]
pub(super) use words::{special_in_block, special_in_block_from};

/// Where a block's scan stopped: the offset of its first special byte, and whether that byte
/// is the closing quote `"`, told by the compares themselves so the caller need not load the
/// byte again to know (a load whose address waits for the scan; in a profile, such a load is
/// the parse's most sampled line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stop {
    /// The byte's offset in the block.
    pub offset: usize,
    /// The byte is `"`.
    pub quote: bool,
}

/// The blocks with SSE2.
#[cfg(all(
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
mod vector {
    use super::Stop;
    use crate::convert::usize_from;

    /// The first special byte of `block`, one branch when there is none.
    #[inline(always)]
    pub(crate) fn special_in_block<const STOP_ON_HIGH: bool>(block: &[u8; 16]) -> Option<Stop> {
        let (special, quotes) = masks::<STOP_ON_HIGH>(block);
        first_stop(special, quotes)
    }

    /// [`special_in_block`] from offset `skip` (below 16) of `block` on: the bytes before it are
    /// not looked at.
    #[inline(always)]
    pub(crate) fn special_in_block_from<const STOP_ON_HIGH: bool>(
        block: &[u8; 16],
        skip: usize,
    ) -> Option<Stop> {
        // Below 16, so the shift keeps the bytes from `skip` on; past it (impossible) keeps
        // none, and the caller then finds the string unterminated: refused, never let through.
        let keep = u32::try_from(skip)
            .ok()
            .and_then(|skip| u32::MAX.checked_shl(skip))
            .unwrap_or(0);
        let (special, quotes) = masks::<STOP_ON_HIGH>(block);
        first_stop(special & keep, quotes)
    }

    /// The byte of the lowest set bit of `special`, if any, and whether `quotes` has its bit.
    #[inline(always)]
    fn first_stop(special: u32, quotes: u32) -> Option<Stop> {
        (special != 0).then(|| {
            let offset = special.trailing_zeros();
            Stop {
                offset: usize_from(offset),
                quote: quotes >> offset & 1 != 0,
            }
        })
    }

    /// Two bits per byte of `block` (the first byte lowest): in the first mask, set when the
    /// byte is special; in the second, when it is `"`.
    #[inline(always)]
    fn masks<const STOP_ON_HIGH: bool>(block: &[u8; 16]) -> (u32, u32) {
        use safe_arch::{
            bitandnot_m128i, cmp_eq_mask_i8_m128i, cmp_lt_mask_i8_m128i, load_unaligned_m128i,
            move_mask_i8_m128i, set_splat_i8_m128i, zeroed_m128i,
        };
        let splat = |byte: u8| set_splat_i8_m128i(i8::from_ne_bytes([byte]));
        let bytes = load_unaligned_m128i(block);
        // Signed, every byte ≥ 0x80 is below 0x20 too: the controls and the high bytes at once.
        let low = cmp_lt_mask_i8_m128i(bytes, splat(0x20));
        let outside = if STOP_ON_HIGH {
            low
        } else {
            // Without the high bytes (negative when signed).
            bitandnot_m128i(cmp_lt_mask_i8_m128i(bytes, zeroed_m128i()), low)
        };
        let quotes = cmp_eq_mask_i8_m128i(bytes, splat(b'"'));
        let hits = quotes | cmp_eq_mask_i8_m128i(bytes, splat(b'\\')) | outside;
        // The upper 16 bits are zero.
        let mask = |bytes| u32::from_ne_bytes(move_mask_i8_m128i(bytes).to_ne_bytes());
        (mask(hits), mask(quotes))
    }
}

/// The blocks as two SWAR words over `u64`s: without SSE2, and in the tests on x86.
#[cfg_attr(
    all(
        any(target_arch = "x86", target_arch = "x86_64"),
        target_feature = "sse2"
    ),
    cfg(test)
)]
mod words {
    use super::Stop;
    use crate::convert::usize_from;

    /// `0x01` in every byte of a `u64`.
    const ONES: u64 = 0x0101_0101_0101_0101;
    /// The high bit of every byte of a `u64`.
    const HIGHS: u64 = 0x8080_8080_8080_8080;

    /// The first special byte of `block`, one branch when there is none.
    #[inline(always)]
    pub(crate) fn special_in_block<const STOP_ON_HIGH: bool>(block: &[u8; 16]) -> Option<Stop> {
        let (low, high) = block.split_at(8);
        // A half that is not 8 bytes (impossible) reads as NUL bytes, which are special for
        // both kinds of scan: the scan stops there, and the quote flag reads the byte itself.
        let word = |half: &[u8]| <[u8; 8]>::try_from(half).map_or(0, u64::from_le_bytes);
        let (low, high) = (
            special::<STOP_ON_HIGH>(word(low)),
            special::<STOP_ON_HIGH>(word(high)),
        );
        if low | high == 0 {
            return None;
        }
        let offset = if low != 0 {
            usize_from(low.trailing_zeros() / 8)
        } else {
            8 + usize_from(high.trailing_zeros() / 8)
        };
        Some(Stop {
            offset,
            quote: block.get(offset) == Some(&b'"'),
        })
    }

    /// [`special_in_block`] from offset `skip` (below 16) of `block` on: the bytes before it
    /// are replaced by one no scan stops at (a word's hits past the first are not exact, so
    /// they cannot be masked off afterwards).
    #[inline(always)]
    pub(crate) fn special_in_block_from<const STOP_ON_HIGH: bool>(
        block: &[u8; 16],
        skip: usize,
    ) -> Option<Stop> {
        let mut block = *block;
        for byte in block.iter_mut().take(skip) {
            *byte = b'a';
        }
        special_in_block::<STOP_ON_HIGH>(&block)
    }

    /// The high bit of each special byte of `word`; the lowest set bit is exact.
    #[inline(always)]
    fn special<const STOP_ON_HIGH: bool>(word: u64) -> u64 {
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // Each subtraction sets a byte's high bit when that byte is below 0x20 / equals `"` /
        // equals `\`; a borrow can only flag bytes *after* the first true hit, so the lowest
        // flagged byte is exact. Bytes ≥ 0x80 carry their own high bit: either counted as a
        // hit or masked out.
        let candidates = word.wrapping_sub(ONES * 0x20)
            | quote.wrapping_sub(ONES)
            | backslash.wrapping_sub(ONES);
        if STOP_ON_HIGH {
            (candidates | word) & HIGHS
        } else {
            candidates & !word & HIGHS
        }
    }
}

#[cfg(all(
    test,
    any(target_arch = "x86", target_arch = "x86_64"),
    target_feature = "sse2"
))]
mod tests {
    use super::{vector, words};

    #[test]
    fn the_vector_blocks_agree_with_the_swar_words_for_every_byte_at_every_position_and_start() {
        for byte in 0..=u8::MAX {
            for at in 0..16 {
                let mut block = [b'y'; 16];
                block[at] = byte;
                // And a second special byte later, which must not be the one found.
                let mut two = block;
                two[15] = b'"';
                for block in [block, two] {
                    // The quote flag names the byte found, as a load of it would.
                    if let Some(stop) = vector::special_in_block::<true>(&block) {
                        assert_eq!(stop.quote, block[stop.offset] == b'"', "{byte:#x} at {at}");
                    }
                    assert_eq!(
                        vector::special_in_block::<true>(&block),
                        words::special_in_block::<true>(&block),
                        "{byte:#x} at {at}"
                    );
                    assert_eq!(
                        vector::special_in_block::<false>(&block),
                        words::special_in_block::<false>(&block),
                        "{byte:#x} at {at}"
                    );
                    for skip in 0..16 {
                        assert_eq!(
                            vector::special_in_block_from::<true>(&block, skip),
                            words::special_in_block_from::<true>(&block, skip),
                            "{byte:#x} at {at} from {skip}"
                        );
                        assert_eq!(
                            vector::special_in_block_from::<false>(&block, skip),
                            words::special_in_block_from::<false>(&block, skip),
                            "{byte:#x} at {at} from {skip}"
                        );
                    }
                }
            }
        }
    }
}
