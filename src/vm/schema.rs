//! PLACEHOLDER until the `schema` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use crate::bytecode::schema::SchemaProgram;
use serde_json::Value;
pub struct SchemaViolation { pub instance_path: Vec<crate::value::Segment>, pub keyword: &'static str, pub message: String }
pub fn is_valid(program: &SchemaProgram, instance: &Value) -> bool { first_violation(program, instance).is_none() }
pub fn first_violation(program: &SchemaProgram, instance: &Value) -> Option<SchemaViolation> {
    if let Some(props) = program.schema.get("properties").and_then(|p| p.as_object()) {
        for (k, v) in props { if v == &Value::Bool(false) && instance.get(k).is_some() {
            return Some(SchemaViolation { instance_path: vec![crate::value::Segment::Key(k.clone())], keyword: "false", message: format!("`{k}` is not allowed") }); } }
    }
    None
}
