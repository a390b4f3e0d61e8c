//! The instruction set and compiled programs. (Being written.)

pub mod resource;
pub mod schema;
pub mod window;
