//! Every limit capgate enforces, in one place (SPEC §7).
//!
//! Two kinds live here:
//!
//! - [`Limits`]: the configurable limits of one engine or loader. A request that breaks one is
//!   denied with reason `input`; a policy that breaks one is rejected at load with an error
//!   naming the limit. Defaults are the documented ones; embedders may tighten or loosen them,
//!   up to the fixed bound of each field that has one ([`Limits::check`]): an engine, loader,
//!   `.capc` load or request parse given a field above its bound refuses to start, naming the
//!   field and the bound, and never clamps it in silence.
//! - Fixed bounds (the `MAX_*` and `SCHEMA_*` constants): sizes the file formats, the bytecode or
//!   the implementation are built around (array sizes, `u32` offsets, recursion that must stay
//!   inside a thread's stack). They are not configurable; the code that enforces each reads it
//!   from here.
//!
//! A bound that comes from a standard or from Unicode (the 63-byte DNS label, the autonomy scale
//! `0..=100`, how much longer case folding can make a string) is not a limit: it lives beside
//! the code that uses it, named for what it is, and its doc comment cites its source.

/// How much deeper than the payload limit the parser itself goes before refusing: enough for
/// the request object and the session line around a payload at the limit
/// ([`Limits::parse_depth`]).
const PARSE_HEADROOM: usize = 8;

// ---------------------------------------------------------------------------------------------
// Fixed bounds of configurable limits: a `Limits` field above its bound is refused.

/// The deepest payload nesting [`Limits::max_payload_depth`] may allow. Payloads are walked
/// recursively (schemas, rate-limit keys, JSON equality, the parsers' fallbacks), so the bound
/// keeps every walk well inside a 2 MiB thread stack (a payload 4,000 deep overflowed one in a
/// debug build); it equals [`SCHEMA_DEPTH_LIMIT`], so a schema taking at least one subschema
/// level per payload level can still descend a payload at the limit.
pub const MAX_PAYLOAD_DEPTH: usize = 512;

/// The largest request [`Limits::max_request_bytes`] may allow: the tape stores offsets as
/// `u32`.
pub const MAX_REQUEST_BYTES: usize = u32::MAX as usize;

/// The largest policy file [`Limits::max_policy_file_bytes`] may allow: source spans store
/// offsets as `u32`.
pub const MAX_POLICY_FILE_BYTES: usize = u32::MAX as usize;

/// The largest `N` of a plain (sliding-window) `rateLimit` that [`Limits::max_sliding_window`]
/// may allow: a window stores every allowed call still in it (8–16 bytes each per key), and the
/// runtime refuses every call of a window above this bound (SPEC §5.3; use `burst` for more).
pub const MAX_SLIDING_WINDOW: u64 = 10_000;

// ---------------------------------------------------------------------------------------------
// Fixed bounds of policies and compiled programs.

/// Most `rateLimit`s one capability may declare: a commit's charges and keys are kept in arrays
/// of this size on the stack, so an allowed call allocates nothing.
pub const MAX_RATE_LIMITS: usize = 16;

/// Deepest nesting of `{` and `[` in `.cap` text and of arrays and objects in a JSON manifest
/// (both parsers recurse).
pub const MAX_POLICY_NESTING: usize = 128;

/// Deepest nesting of `any`, `all` and `not` in a capability (the compiler and the reference
/// evaluator recurse).
pub const MAX_CONSTRAINT_NESTING: usize = 64;

/// Deepest nesting of subschemas in one `payloadSchema` (the schema compiler recurses).
pub const MAX_SCHEMA_NESTING: u32 = 256;

/// Most names one resource template binds (`{var}` captures): binding slots are a `u8`-indexed
/// table per template.
pub const MAX_BINDINGS: usize = 64;

/// Deepest operand stack a verified program may use: the VM keeps it in an array of this size.
pub const MAX_STACK: u16 = 256;

/// Deepest nesting of a JSON literal (`fieldEquals` constants, `enum`, `const`) in a `.capc`
/// file; its encoder and decoder recurse.
pub const MAX_LITERAL_DEPTH: usize = 512;

/// Most nested subschema evaluations of one validation: a payload at the default nesting limit
/// (128) leaves room for four per payload level, and the bound keeps the recursion well inside
/// a 2 MiB thread stack. Deeper validation fails closed.
pub const SCHEMA_DEPTH_LIMIT: u32 = 512;

/// Most work of one schema validation, in steps: subschema evaluations plus work that grows with
/// the instance (`docs/schema.md`, "Limits"). More aborts validation, and the engine refuses the
/// request (`input`).
pub const SCHEMA_STEP_LIMIT: u64 = 1 << 22;

/// The limits of one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest payload (and agent/context) nesting accepted, counting each array/object level.
    /// At most [`MAX_PAYLOAD_DEPTH`].
    pub max_payload_depth: usize,
    /// Largest request accepted from bytes, in bytes (payload included). At most
    /// [`MAX_REQUEST_BYTES`].
    pub max_request_bytes: usize,
    /// Largest compiled size of one regex, in bytes (passed to the regex compiler).
    pub max_regex_bytes: usize,
    /// Largest policy file, in bytes. At most [`MAX_POLICY_FILE_BYTES`].
    pub max_policy_file_bytes: usize,
    /// Most capabilities in one skill.
    pub max_capabilities_per_skill: usize,
    /// Longest array a `[*]` path may scan.
    pub max_array_scan: usize,
    /// Largest `N` of a plain (sliding-window) `rateLimit`. At most [`MAX_SLIDING_WINDOW`].
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
    /// Most regex work one request may take, in byte-states: every match — `fieldMatches`, per
    /// value a `[*]` path reaches, and `payloadSchema` `pattern`/`patternProperties` — is
    /// charged its text's length in bytes (plus one) times its regex's size in NFA states,
    /// before it runs, summed over every candidate capability. More refuses the request
    /// (`input`).
    pub max_regex_work: u64,
    /// Largest compiled size of all the regexes of one policy set (or `.capc` file) together,
    /// in bytes of heap: bounds the compile work of a load as `max_regex_bytes` bounds one regex.
    pub max_regex_total_bytes: usize,
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
        refuse_case_variant_members: true,
        refuse_case_variant_reads: true,
        max_regex_work: 1 << 22,
        max_regex_total_bytes: 16 << 20,
    };

    /// Checks every field against its fixed bound; the first field above it is the error.
    /// Fields without a bound (`max_regex_bytes`, `max_capabilities_per_skill`,
    /// `max_array_scan`, `max_regex_work`, `max_regex_total_bytes`) and the switches
    /// (`refuse_case_variant_members`, `refuse_case_variant_reads`) take any value.
    ///
    /// # Errors
    /// A [`LimitError`] naming the field, its value and its bound.
    pub fn check(&self) -> Result<(), LimitError> {
        let bounded: [(&'static str, u64, u64); 4] = [
            (
                "max_payload_depth",
                wide(self.max_payload_depth),
                wide(MAX_PAYLOAD_DEPTH),
            ),
            (
                "max_request_bytes",
                wide(self.max_request_bytes),
                wide(MAX_REQUEST_BYTES),
            ),
            (
                "max_policy_file_bytes",
                wide(self.max_policy_file_bytes),
                wide(MAX_POLICY_FILE_BYTES),
            ),
            (
                "max_sliding_window",
                self.max_sliding_window,
                MAX_SLIDING_WINDOW,
            ),
        ];
        match bounded.into_iter().find(|&(_, value, bound)| value > bound) {
            Some((field, value, bound)) => Err(LimitError {
                field,
                value,
                bound,
            }),
            None => Ok(()),
        }
    }
}

/// A `usize` as `u64` (saturating: no supported target has a wider `usize`).
fn wide(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A [`Limits`] field set above the fixed bound the code is built around.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("`Limits::{field}` is {value}, above its bound of {bound}")]
#[diagnostic(help("capgate cannot enforce a larger value; see `src/limits.rs` for why"))]
pub struct LimitError {
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: u64,
    /// The largest value it may take.
    pub bound: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_within_their_bounds() {
        assert_eq!(Limits::DEFAULT.check(), Ok(()));
        assert_eq!(Limits::DEFAULT.max_sliding_window, MAX_SLIDING_WINDOW);
    }

    #[test]
    fn a_field_above_its_bound_is_named_with_the_bound() {
        let limits = Limits {
            max_sliding_window: 20_000,
            ..Limits::DEFAULT
        };
        let error = limits.check().unwrap_err();
        assert_eq!(error.field, "max_sliding_window");
        assert_eq!(
            error.to_string(),
            "`Limits::max_sliding_window` is 20000, above its bound of 10000"
        );
    }
}
