//! AST → checked IR → bytecode. (Being written.)

pub mod schema;
