//! The compiled artifact: the instruction set, programs, the verifier and the disassembler.
//!
//! - [`op::Op`] is the instruction set, defined once; [`index`] holds the typed operand indices.
//! - [`program::Program`] is one capability's code and tables; [`verify::verify`] turns it into a
//!   [`verify::VerifiedProgram`], the only form the VM runs, with its [`plan::Plan`] when its
//!   checks follow one another and stand alone.
//! - [`program::CompiledSkill`] / [`program::CompiledCapability`] wrap programs with everything
//!   else the engine needs (resource template, operations, lifetime, rate limits, gating).
//! - [`resource`], [`schema`] and [`window`] are the compiled forms of resource templates,
//!   payload schemas and wall-clock windows.
//! - [`disasm`] prints programs for people.
//! - [`encode`] writes compiled skills to a `.capc` file; [`decode`] reads one back, checking
//!   every byte and each skill's revision and verifying every program; `compile::load_capc`
//!   (the entry point) then checks each skill against the manifest embedded with it.

pub mod decode;
pub mod disasm;
pub mod encode;
pub mod index;
pub mod matcher;
pub mod op;
pub mod plan;
pub mod program;
pub mod resource;
pub mod schema;
pub mod verify;
pub mod window;
