//! The command line's integration tests, one binary: each module drives the built `capgate` binary (or the library beneath it) over one area.

mod bad_input;
mod capc;
mod cli;
mod cli_test_command;
mod cli_tooling;
mod common;
mod repl;
