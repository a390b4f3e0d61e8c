//! PLACEHOLDER until the `resource` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use crate::syntax::ast::ResourceKind;
#[derive(Debug, Clone)]
pub struct ResourcePattern { kind: ResourceKind, locator: String, bindings: Vec<String> }
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ResourcePatternError { pub message: String, pub help: Option<String> }
impl ResourcePattern {
    pub fn compile(kind: ResourceKind, locator: &str) -> Result<Self, ResourcePatternError> {
        let bindings = locator.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).map(str::to_owned).collect();
        Ok(ResourcePattern { kind, locator: locator.to_owned(), bindings })
    }
    pub fn kind(&self) -> ResourceKind { self.kind }
    pub fn locator(&self) -> &str { &self.locator }
    pub fn bindings(&self) -> &[String] { &self.bindings }
    pub fn has_wildcard(&self) -> bool { false }
}
