//! `capgate disasm`: each capability's bytecode with the source line of every instruction.

use std::path::PathBuf;

use clap::Args;

use capgate::Limits;
use capgate::bytecode::disasm::{disassemble, disassemble_plan};

use super::{EXIT_OK, load_policies};

/// Arguments of `capgate disasm`.
#[derive(Debug, Args)]
pub struct DisasmArgs {
    /// Policy files (.cap, .json) or directories.
    #[arg(required = true, num_args = 1..)]
    files: Vec<PathBuf>,
}

/// Runs `capgate disasm`.
pub fn run(args: DisasmArgs) -> u8 {
    let policy = match load_policies(&args.files, Limits::DEFAULT) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    for skill in &policy.skills {
        outln!("skill `{}` (revision {:016x})", skill.name, skill.revision);
        for capability in &skill.capabilities {
            outln!(
                "\ncapability `{}`: {} {} [{}]",
                capability.name,
                capability.resource.kind().name(),
                capability.resource.locator(),
                capability
                    .operations
                    .iter()
                    .map(|o| &**o)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            out!("{}", disassemble(capability.program.program()));
            out!("{}", disassemble_plan(capability.program.plan()));
            for limit in &capability.rate_limits {
                outln!("  then  rateLimit {}", limit.summary);
            }
        }
        outln!();
    }
    EXIT_OK
}
