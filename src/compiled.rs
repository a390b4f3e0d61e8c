//! Compiled policies, for tools that inspect or store them.
//!
//! - [`CompiledSkill`] and [`CompiledCapability`]: what a [`PolicySet`](crate::PolicySet) holds
//!   for each skill once its manifest is compiled and its bytecode verified. Their fields and
//!   accessors answer what a reviewer asks (resource, operations, lifetime, gating, each
//!   constraint and rate limit with its source location); [`CompiledCapability::disassemble`]
//!   prints the bytecode.
//! - [`encode_capc`] and [`load_capc`]: the `.capc` file, the compiled form of a policy set that
//!   loads without compiling (`docs/bytecode.md`). Loading checks every byte and compiles each
//!   skill again from its embedded manifest, so a `.capc` file decides exactly as its sources.
//! - [`Regex`]: a `fieldMatches` pattern as the engine compiles and runs it, for linters.
//!
//! The bytecode itself, the compiler and the VM are internal; feature `internals` exposes them
//! to this crate's own tests, benches and fuzzers and carries no stability promise.

pub use crate::bytecode::decode::{CapcContents, CapcError};
pub use crate::bytecode::encode::{
    FORMAT_VERSION as CAPC_FORMAT_VERSION, MAGIC as CAPC_MAGIC, encode_capc,
};
pub use crate::bytecode::program::{
    CheckInfo, CompiledCapability, CompiledSkill, LifetimeSpec, RateLimitSpec, SensitivityLevel,
};
pub use crate::bytecode::verify::{VerifyError, VerifyReason};
pub use crate::compile::load_capc;

use crate::bytecode::matcher::Matcher;
use crate::limits::Limits;

/// A regex as a `fieldMatches` constraint runs it: the whole value must match (the pattern is
/// anchored as `^(?:…)$`), under the compiled-size limit of [`Limits::max_regex_bytes`].
#[derive(Debug, Clone)]
pub struct Regex {
    matcher: Matcher,
}

impl Regex {
    /// Compiles `pattern` as the compiler compiles a `fieldMatches` pattern (case-sensitive),
    /// or says why it does not compile.
    pub fn new(pattern: &str, limits: &Limits) -> Result<Self, regex::Error> {
        let anchored = Matcher::anchored(pattern)?;
        let matcher = Matcher::build(&anchored, false, limits.max_regex_bytes)?;
        Ok(Regex { matcher })
    }

    /// True when the whole of `text` matches.
    pub fn is_match(&self, text: &str) -> bool {
        self.matcher.is_match(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regex_matches_the_whole_value_only() {
        let regex = Regex::new("[a-z]+", &Limits::DEFAULT).unwrap();
        assert!(regex.is_match("abc"));
        assert!(!regex.is_match("abc1"));
        assert!(Regex::new("(", &Limits::DEFAULT).is_err());
    }
}
