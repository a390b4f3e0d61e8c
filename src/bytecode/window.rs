//! PLACEHOLDER until the `resource` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use crate::syntax::ast::WindowSpec;
#[derive(Debug, Clone)]
pub struct CompiledWindow { pub(crate) spec: WindowSpec }
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct WindowError { pub message: String, pub help: Option<String>, pub span: crate::span::Span }
impl CompiledWindow { pub fn compile(spec: &WindowSpec) -> Result<Self, WindowError> { Ok(Self { spec: spec.clone() }) } }
