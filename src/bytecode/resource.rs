//! Compiled resource templates. (Being written.)
