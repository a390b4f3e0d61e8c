//! Disassembly. (Being written.)
