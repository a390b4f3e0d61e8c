//! The authoring tools' integration tests, one binary: each module is one tool.

mod common;
mod format_convert;
mod policy_tests;
mod undecidable;
