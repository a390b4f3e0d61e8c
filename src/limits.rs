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
    /// Refuse (`input`) a request with an object whose member names include two that are equal
    /// under Unicode simple case folding (`{"amount": 50, "Amount": 1000000}`): an upstream that
    /// binds members case-insensitively (Go's `encoding/json`) may read either. Checked by the
    /// request parsers (`check_slice`, `check_doc`, `check_value`, `Request::from_slice`), not
    /// on a `Request` built in memory. See `docs/semantics.md` (Requests).
    pub refuse_case_variant_members: bool,
    /// Refuse (`input`) a request when a member the policy reads (a path of a constraint, an
    /// `optional` or `not` one included, or a `payloadSchema`'s `properties`, `required` or
    /// `dependentRequired`) is absent but the object has a member whose name is a case variant
    /// of it (`{"Amount": 1000000}` against `optional fieldRange payload.amount <= 100`).
    pub refuse_case_variant_reads: bool,
}

impl Limits {
    /// How deep a whole request (or session line) may nest before the parser refuses it: the
    /// payload limit plus room for the objects around a payload, so that a payload one level too
    /// deep is reported as too deep (a deny naming the limit) and not as unparseable.
    pub const fn parse_depth(&self) -> usize {
        self.max_payload_depth.saturating_add(PARSE_HEADROOM)
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
        refuse_case_variant_members: true,
        refuse_case_variant_reads: true,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
