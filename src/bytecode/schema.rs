//! PLACEHOLDER until the `schema` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
#[derive(Debug, Clone)]
pub struct SchemaProgram { pub(crate) schema: serde_json::Value }
