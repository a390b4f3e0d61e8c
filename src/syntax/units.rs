//! Lexical forms shared by both front ends: durations, day sets, times of day. (Being written.)
