//! The integer conversion the engine makes everywhere: a `u32` it stores (a byte offset, a table
//! index, a count) as the `usize` that slicing and indexing take.

/// A `u32` offset, index or count as a `usize`: lossless on the 32- and 64-bit targets capgate
/// builds for. On a narrower one it saturates, past the end of any table, so a lookup misses
/// (fail closed) instead of wrapping to another entry.
#[inline(always)]
pub(crate) fn usize_from(value: u32) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::usize_from;

    #[test]
    fn every_u32_is_kept_exactly() {
        for value in [0, 1, 0xFFFF, 0x1_0000, u32::MAX - 1, u32::MAX] {
            assert_eq!(u64::try_from(usize_from(value)).unwrap(), u64::from(value));
        }
    }
}
