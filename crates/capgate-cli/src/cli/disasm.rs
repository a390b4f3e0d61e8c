//! `capgate disasm`: each capability's bytecode with the source line of every instruction.

use std::path::PathBuf;

use clap::Args;

use capgate::Limits;
use capgate::compiled::{CompiledCapability, RateLimitSpec};
use capgate::syntax::ast::Duration;
use capgate::syntax::units::format_duration;
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
    for skill in &policy.skills {
        outln!(
            "skill `{}` (revision {})",
            escape_controls(&skill.name),
            skill.revision
        );
        for capability in &skill.capabilities {
            outln!();
            print_capability(capability);
        }
        outln!();
    }
    EXIT_OK
}

/// A capability's one-line summary, as `capgate disasm` and the REPL's `:policies` and
/// `:disasm` print it: `capability `send`: service outboundGateway [use]`. Names, locators and
/// verbs are policy text, escaped as the listing is.
pub(super) fn summary(capability: &CompiledCapability) -> String {
    let operations: Vec<&str> = capability.operations.iter().map(|o| &**o).collect();
    format!(
        "capability `{}`: {} {} [{}]",
        escape_controls(&capability.name),
        capability.resource_kind().name(),
        escape_controls(capability.locator()),
        escape_controls(&operations.join(", "))
    )
}

/// Prints a capability's summary, its bytecode, the plan of its checks and the rate limits that
/// run after them.
pub(super) fn print_capability(capability: &CompiledCapability) {
    outln!("{}", summary(capability));
    out!("{}", capability.disassemble());
    for limit in capability.rate_limits() {
        outln!(
            "  then  rateLimit {}",
            escape_controls(&rate_limit(capability, limit))
        );
    }
}

/// A rate limit as the engine enforces it, written from its fields (`10 per 1m burst 20 by
/// agent.id`), not from the text stored beside them.
fn rate_limit(capability: &CompiledCapability, limit: &RateLimitSpec) -> String {
    let per = u64::try_from(limit.per.as_nanos()).map_or_else(
        |_| format!("{:?}", limit.per),
        |nanos| format_duration(Duration { nanos }),
    );
    let mut text = format!("{} per {per}", limit.count);
    if let Some(burst) = limit.burst {
        text.push_str(&format!(" burst {burst}"));
    }
    let by: Vec<&str> = capability.rate_limit_keys(limit).collect();
    if !by.is_empty() {
        text.push_str(&format!(" by {}", by.join(", ")));
    }
    text
}
