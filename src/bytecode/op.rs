//! The instruction set, defined once.
//!
//! A capability compiles to a straight-line program over a stack of booleans:
//!
//! - **Tests** ([`Op::Equals`], [`Op::Matches`], ...) read a path, check every value it reaches
//!   and push one boolean. A path with `[*]` is walked by the test itself: that walk over the
//!   elements of a payload array is the only iteration in the machine, so its length is bounded
//!   by the payload, not by the program.
//! - **Combinators** ([`Op::OrElse`], [`Op::AndThen`], [`Op::Not`]) short-circuit with forward
//!   jumps only.
//! - [`Op::Require`] pops the result of one top-level constraint and stops the program with that
//!   constraint as the failure when it is false; [`Op::Accept`] ends a program whose every
//!   constraint held.
//!
//! [`Op::effect`] gives each instruction's stack effect and jump target; the verifier, the VM
//! and the disassembler all derive from it. The human reference is `docs/bytecode.md`.

use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx, WindowIdx,
};

/// One instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Push whether every value at `path` equals constant `value` (JSON equality).
    Equals {
        /// The path read.
        path: PathIdx,
        /// The constant compared with.
        value: ConstIdx,
        /// Holds when the path is absent.
        optional: bool,
    },
    /// Push whether every value at `path` equals one member of `set`.
    InSet {
        /// The path read.
        path: PathIdx,
        /// The allowed values.
        set: SetIdx,
        /// Holds when the path is absent.
        optional: bool,
    },
    /// Push whether every value at `path` equals the single value at `other` (which must exist).
    EqualsPath {
        /// The path read.
        path: PathIdx,
        /// The path compared with; it has no `[*]`.
        other: PathIdx,
        /// Holds when `path` is absent (never when `other` is).
        optional: bool,
    },
    /// Push whether every value at `path` equals the agent identity at `identity` (no `[*]`),
    /// which must be present and not `null` (`actorBinding`: a `null` identity binds nothing).
    BindsIdentity {
        /// The path read.
        path: PathIdx,
        /// The agent identity field.
        identity: PathIdx,
        /// Holds when `path` is absent (never when `identity` is, or is `null`).
        optional: bool,
    },
    /// Push whether every value at `path` is a string the regex matches whole.
    Matches {
        /// The path read.
        path: PathIdx,
        /// The anchored regex.
        regex: RegexIdx,
        /// Holds when the path is absent.
        optional: bool,
    },
    /// Push whether every value at `path` is a number within every bound of `bounds`.
    Range {
        /// The path read.
        path: PathIdx,
        /// Numeric bounds.
        bounds: BoundsIdx,
        /// Holds when the path is absent.
        optional: bool,
    },
    /// Push whether every value at `path` is an RFC 3339 timestamp within `bounds` of the clock.
    RangeNow {
        /// The path read.
        path: PathIdx,
        /// Bounds whose constant side is the engine clock.
        bounds: BoundsIdx,
        /// Holds when the path is absent.
        optional: bool,
    },
    /// Push whether `a − b` (two RFC 3339 timestamps) lies within the duration `bounds`.
    RangeDiff {
        /// The minuend; no `[*]`.
        a: PathIdx,
        /// The subtrahend; no `[*]`.
        b: PathIdx,
        /// Duration bounds.
        bounds: BoundsIdx,
        /// Holds when either path is absent.
        optional: bool,
    },
    /// Push whether the payload validates against a compiled schema.
    Schema {
        /// The schema program.
        schema: SchemaIdx,
    },
    /// Push whether the engine clock lies in a wall-clock window.
    Window {
        /// The window.
        window: WindowIdx,
    },
    /// Push a constant boolean (the value of an empty `any` or `all`).
    Push(bool),
    /// Negate the top of the stack.
    Not,
    /// If the top is true, jump to `target` keeping it; otherwise pop it and go on.
    OrElse {
        /// A later instruction.
        target: JumpTarget,
    },
    /// If the top is false, jump to `target` keeping it; otherwise pop it and go on.
    AndThen {
        /// A later instruction.
        target: JumpTarget,
    },
    /// Pop the result of top-level constraint `check`; stop with that failure when false.
    Require {
        /// The constraint this result belongs to.
        check: CheckIdx,
    },
    /// Stop: every constraint held.
    Accept,
}

/// What an instruction does to the stack and to control flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    /// Booleans popped.
    pub pops: u8,
    /// Booleans pushed after popping.
    pub pushes: u8,
    /// A forward jump target, if the instruction can jump.
    pub jump: Option<JumpTarget>,
    /// True when control never reaches the next instruction.
    pub terminal: bool,
}

impl Op {
    /// The mnemonic used by the disassembler and `docs/bytecode.md`.
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Op::Equals { .. } => "eq",
            Op::InSet { .. } => "in",
            Op::EqualsPath { .. } => "eq.path",
            Op::BindsIdentity { .. } => "binds",
            Op::Matches { .. } => "match",
            Op::Range { .. } => "range",
            Op::RangeNow { .. } => "range.now",
            Op::RangeDiff { .. } => "range.diff",
            Op::Schema { .. } => "schema",
            Op::Window { .. } => "window",
            Op::Push(_) => "push",
            Op::Not => "not",
            Op::OrElse { .. } => "or_else",
            Op::AndThen { .. } => "and_then",
            Op::Require { .. } => "require",
            Op::Accept => "accept",
        }
    }

    /// The stack effect and jump target. When a jump is taken the stack keeps the tested value
    /// (height after = height before); when it is not, `pops`/`pushes` apply.
    pub fn effect(&self) -> Effect {
        let test = Effect {
            pops: 0,
            pushes: 1,
            jump: None,
            terminal: false,
        };
        match *self {
            Op::Equals { .. }
            | Op::InSet { .. }
            | Op::EqualsPath { .. }
            | Op::BindsIdentity { .. }
            | Op::Matches { .. }
            | Op::Range { .. }
            | Op::RangeNow { .. }
            | Op::RangeDiff { .. }
            | Op::Schema { .. }
            | Op::Window { .. }
            | Op::Push(_) => test,
            Op::Not => Effect {
                pops: 1,
                pushes: 1,
                jump: None,
                terminal: false,
            },
            Op::OrElse { target } | Op::AndThen { target } => Effect {
                pops: 1,
                pushes: 0,
                jump: Some(target),
                terminal: false,
            },
            Op::Require { .. } => Effect {
                pops: 1,
                pushes: 0,
                jump: None,
                terminal: false,
            },
            Op::Accept => Effect {
                pops: 0,
                pushes: 0,
                jump: None,
                terminal: true,
            },
        }
    }

    /// True for instructions that read request data (and so are "tests" in traces).
    pub fn is_test(&self) -> bool {
        matches!(
            self,
            Op::Equals { .. }
                | Op::InSet { .. }
                | Op::EqualsPath { .. }
                | Op::BindsIdentity { .. }
                | Op::Matches { .. }
                | Op::Range { .. }
                | Op::RangeNow { .. }
                | Op::RangeDiff { .. }
                | Op::Schema { .. }
                | Op::Window { .. }
        )
    }
}
