//! Compiled wall-clock windows. (Being written.)
