//! PLACEHOLDER until the `schema` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use crate::bytecode::schema::SchemaProgram;
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SchemaCompileError { pub pointer: String, pub message: String, pub help: Option<String> }
pub fn compile_schema(schema: &serde_json::Value) -> Result<SchemaProgram, Vec<SchemaCompileError>> { Ok(SchemaProgram { schema: schema.clone() }) }
