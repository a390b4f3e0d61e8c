//! PLACEHOLDER until the `resource` branch merges (same signatures).
#![allow(missing_docs, clippy::all)]
use std::borrow::Cow;
use crate::bytecode::resource::ResourcePattern;
use crate::syntax::ast::ResourceKind;
#[derive(Debug)]
pub struct RequestResource<'a> { text: &'a str }
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResourceRejection { #[error("malformed resource")] Malformed }
pub enum QueryValue<'a> { Absent, One(Cow<'a, str>), Repeated }
#[derive(Debug, Default)]
pub struct Bindings<'a> { v: Vec<Cow<'a, str>> }
impl<'a> Bindings<'a> { pub fn new() -> Self { Self::default() } pub fn get(&self, slot: usize) -> Option<&str> { self.v.get(slot).map(|c| &**c) } }
impl<'a> RequestResource<'a> {
    pub fn parse(text: &'a str) -> Result<Self, ResourceRejection> { if text.contains("..") { return Err(ResourceRejection::Malformed) } Ok(Self { text }) }
    pub fn kind(&self) -> ResourceKind { ResourceKind::Http }
    pub fn query(&self, _name: &str) -> QueryValue<'a> { QueryValue::Absent }
}
impl ResourcePattern {
    pub fn matches<'a>(&self, request: &RequestResource<'a>, bindings: &mut Bindings<'a>) -> bool {
        bindings.v.clear();
        let p: Vec<&str> = self.locator().split('/').collect();
        let r: Vec<&str> = request.text.split('?').next().unwrap_or("").split('/').collect();
        if p.len() != r.len() { return false; }
        for (a, b) in p.iter().zip(r.iter()) {
            if a.starts_with('{') { bindings.v.push(Cow::Borrowed(b)); } else if a != b && *a != "*" { return false; }
        }
        true
    }
}
