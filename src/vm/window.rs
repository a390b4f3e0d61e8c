//! PLACEHOLDER until the `resource` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use crate::bytecode::window::CompiledWindow;
use chrono::{DateTime, Utc};
impl CompiledWindow {
    pub fn contains(&self, _at: DateTime<Utc>) -> bool { true }
    pub fn describe(&self) -> String { "window".into() }
}
