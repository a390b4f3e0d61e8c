//! payloadSchema compiler. (Being written.)
