//! The engine crate's integration tests, one binary: each module is one area.

mod boundaries;
mod check_doc;
mod common;
mod differential;
mod engine_semantics;
mod fuzz_regressions;
mod layers;
mod manifest_cases;
mod policies;
mod regressions;
mod resource_rules;
mod runtime_model;
mod schema_conformance;
mod syntax_cases;
mod tape_equivalence;
mod undecidable;
mod vm_bytecode;
mod vm_plan;
mod window_edges;
mod zero_alloc;
