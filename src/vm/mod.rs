//! Executes verified programs against a request. (Being written.)

pub mod resource;
pub mod schema;
pub mod window;
