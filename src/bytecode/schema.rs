//! Compiled payloadSchema programs. (Being written.)
