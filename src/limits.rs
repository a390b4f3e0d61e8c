//! Every limit capgate enforces, in one place (SPEC §7).
//!
//! A request that breaks a limit is denied with reason `input`; a policy that breaks one is
//! rejected at load with an error naming the limit. Defaults are the documented ones; embedders
//! may tighten or loosen them when building an engine.

/// How much deeper than the payload limit the parser itself goes before refusing: enough for
/// the request object and the session line around a payload at the limit
/// ([`Limits::parse_depth`]).
const PARSE_HEADROOM: usize = 8;

/// The limits of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest payload (and agent/context) nesting accepted, counting each array/object level.
    pub max_payload_depth: usize,
    /// Largest request accepted from bytes, in bytes (payload included).
    pub max_request_bytes: usize,
    /// Largest compiled size of one regex, in bytes (passed to the regex compiler).
    pub max_regex_bytes: usize,
    /// Largest policy file, in bytes.
    pub max_policy_file_bytes: usize,
    /// Most capabilities in one skill.
    pub max_capabilities_per_skill: usize,
    /// Longest array a `[*]` path may scan.
    pub max_array_scan: usize,
    /// Largest `N` of a plain (sliding-window) `rateLimit`.
    pub max_sliding_window: u64,
}

impl Limits {
    /// How deep a whole request (or session line) may nest before the parser refuses it: the
    /// payload limit plus room for the objects around a payload, so that a payload one level too
    /// deep is reported as too deep (a deny naming the limit) and not as unparseable.
    pub const fn parse_depth(&self) -> usize {
        self.max_payload_depth.saturating_add(PARSE_HEADROOM)
    }

    /// The longest session line (`capgate replay`, session tests) or line of REPL input, in
    /// bytes: twice [`Limits::max_request_bytes`], room for a `call` over the request limit
    /// (denied with reason `input`, as a gateway would deny it) and the line's own members. A
    /// longer line is an error for that line, and no more than one byte past this limit of it is
    /// ever held.
    pub const fn max_session_line_bytes(&self) -> usize {
        self.max_request_bytes.saturating_mul(2)
    }

    /// The defaults of SPEC §7.
    pub const DEFAULT: Limits = Limits {
        max_payload_depth: 128,
        max_request_bytes: 1 << 20,
        max_regex_bytes: 1 << 20,
        max_policy_file_bytes: 4 << 20,
        max_capabilities_per_skill: 1_000,
        max_array_scan: 100_000,
        max_sliding_window: 10_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
