//! payloadSchema validation. (Being written.)
