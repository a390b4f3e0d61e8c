#![doc = include_str!("../README.md")]

pub mod bytecode;
pub mod compile;
pub mod limits;
pub mod manifest;
pub mod runtime;
pub mod span;
pub mod syntax;
pub mod value;
pub mod vm;
