//! `capgate disasm`: each capability's bytecode with the source line of every instruction.

use std::path::PathBuf;

use clap::Args;

use capgate::Limits;
use capgate::bytecode::disasm::{disassemble, disassemble_plan};
use capgate::value::escape_controls;

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
    // Names, locators and verbs are policy text: escaped as the listing is.
    let shown = |text: &str| escape_controls(text).into_owned();
    for skill in &policy.skills {
        outln!(
            "skill `{}` (revision {:016x})",
            shown(&skill.name),
            skill.revision
        );
        for capability in &skill.capabilities {
            outln!(
                "\ncapability `{}`: {} {} [{}]",
                shown(&capability.name),
                capability.resource.kind().name(),
                shown(capability.resource.locator()),
                shown(
                    &capability
                        .operations
                        .iter()
                        .map(|o| &**o)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            );
            out!("{}", disassemble(capability.program.program()));
            out!("{}", disassemble_plan(capability.program.plan()));
            for limit in &capability.rate_limits {
                outln!("  then  rateLimit {}", shown(&limit.summary));
            }
        }
        outln!();
    }
    EXIT_OK
}
