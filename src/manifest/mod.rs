//! The JSON manifest form (SPEC §3) → the same AST as `.cap`. (Being written.)
