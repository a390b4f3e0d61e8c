//! Wall-clock window evaluation. (Being written.)
