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
//! The table below lists each instruction once: its variant and operands, its opcode byte in a
//! `.capc` file, its mnemonic, its stack effect and control flow, what it reads, and (for
//! `range.diff`) its disassembly layout. `instruction_table!` (in `op/generate.rs`) expands it
//! into [`Op`] and the functions the rest of the bytecode layer derives from it: the encoder
//! writes [`Op::opcode`] and then each operand, the decoder reads them back by opcode, the
//! verifier checks each operand against its table and follows [`Op::effect`], the disassembler
//! prints [`Op::mnemonic`] and the operands in the table's layout. The VM matches on [`Op`]
//! itself, with nothing looked up at run time. The human reference is `docs/bytecode.md`.
//!
//! Each operand has a kind: an index into one of the program's tables (`path`, `constant`,
//! `set`, `regex`, `bounds`, `schema`, `window`, `check`), a jump `target`, or a boolean
//! (`optional`, `flag`). The kind gives the field's type, and one method of each of the crate's
//! operand traits (`OperandVisitor`, `OperandSource`), so every reader and writer of operands
//! says what it does with every kind.

mod generate;
#[cfg(test)]
mod tests;

use generate::instruction_table;

use super::index::{
    BoundsIdx, CheckIdx, ConstIdx, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx, WindowIdx,
};

instruction_table! {
    /// Push whether every value at `path` equals constant `value` (JSON equality).
    Equals {
        /// The path read.
        path: path,
        /// The constant compared with.
        value: constant,
        /// Holds when the path is absent.
        optional: optional,
    } = 0x01 "eq", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` equals one member of `set`.
    InSet {
        /// The path read.
        path: path,
        /// The allowed values.
        set: set,
        /// Holds when the path is absent.
        optional: optional,
    } = 0x02 "in", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` equals the single value at `other` (which must exist).
    EqualsPath {
        /// The path read.
        path: path,
        /// The path compared with; it has no `[*]`.
        other: path,
        /// Holds when `path` is absent (never when `other` is).
        optional: optional,
    } = 0x03 "eq.path", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` equals the agent identity at `identity` (no `[*]`),
    /// which must be present and not `null` (`actorBinding`: a `null` identity binds nothing).
    BindsIdentity {
        /// The path read.
        path: path,
        /// The agent identity field.
        identity: path,
        /// Holds when `path` is absent (never when `identity` is, or is `null`).
        optional: optional,
    } = 0x10 "binds", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` is a string the regex matches whole.
    Matches {
        /// The path read.
        path: path,
        /// The anchored regex.
        regex: regex,
        /// Holds when the path is absent.
        optional: optional,
    } = 0x04 "match", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` is a number within every bound of `bounds`.
    Range {
        /// The path read.
        path: path,
        /// Numeric bounds.
        bounds: bounds,
        /// Holds when the path is absent.
        optional: optional,
    } = 0x05 "range", stack(0 -> 1), then(next), reads(request);

    /// Push whether every value at `path` is an RFC 3339 timestamp within `bounds` of the clock.
    RangeNow {
        /// The path read.
        path: path,
        /// Bounds whose constant side is the engine clock.
        bounds: bounds,
        /// Holds when the path is absent.
        optional: optional,
    } = 0x06 "range.now", stack(0 -> 1), then(next), reads(request, clock);

    /// Push whether `a − b` (two RFC 3339 timestamps) lies within the duration `bounds`.
    RangeDiff {
        /// The minuend; no `[*]`.
        a: path,
        /// The subtrahend; no `[*]`.
        b: path,
        /// Duration bounds.
        bounds: bounds,
        /// Holds when either path is absent.
        optional: optional,
    } = 0x07 "range.diff", stack(0 -> 1), then(next), reads(request),
        disasm "{a} - {b} {bounds} {optional}";

    /// Push whether the payload validates against a compiled schema.
    Schema {
        /// The schema program.
        schema: schema,
    } = 0x08 "schema", stack(0 -> 1), then(next), reads(request);

    /// Push whether the engine clock lies in a wall-clock window.
    Window {
        /// The window.
        window: window,
    } = 0x09 "window", stack(0 -> 1), then(next), reads(clock);

    /// Push a constant boolean (the value of an empty `any` or `all`).
    Push(value: flag) = 0x0a "push", stack(0 -> 1), then(next), reads();

    /// Negate the top of the stack.
    Not = 0x0b "not", stack(1 -> 1), then(next), reads();

    /// If the top is true, jump to `target` keeping it; otherwise pop it and go on.
    OrElse {
        /// A later instruction.
        target: target,
    } = 0x0c "or_else", stack(1 -> 0), then(next, target), reads();

    /// If the top is false, jump to `target` keeping it; otherwise pop it and go on.
    AndThen {
        /// A later instruction.
        target: target,
    } = 0x0d "and_then", stack(1 -> 0), then(next, target), reads();

    /// Pop the result of top-level constraint `check`; stop with that failure when false.
    Require {
        /// The constraint this result belongs to.
        check: check,
    } = 0x0e "require", stack(1 -> 0), then(next), reads();

    /// Stop: every constraint held.
    Accept = 0x0f "accept", stack(0 -> 0), then(), reads();
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

/// One entry of the instruction table as data (`INSTRUCTIONS`), for the tests that hold the
/// encoding and `docs/bytecode.md` to it.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Instruction {
    /// [`Op::opcode`].
    pub(crate) opcode: u8,
    /// [`Op::mnemonic`].
    pub(crate) mnemonic: &'static str,
    /// Each operand's field name and kind, in declaration (and encoding) order.
    pub(crate) operands: &'static [(&'static str, &'static str)],
    /// [`Effect::pops`].
    pub(crate) pops: u8,
    /// [`Effect::pushes`].
    pub(crate) pushes: u8,
}

/// Something done with each operand of an instruction, one method per operand kind
/// ([`Op::try_for_each_operand`], [`Op::format_operands`]): the encoder writes it, the verifier
/// checks it against its table, the disassembler prints it.
pub(crate) trait OperandVisitor {
    /// What each call gives back.
    type Output;
    /// An index into the path table.
    fn path(&mut self, path: PathIdx) -> Self::Output;
    /// An index into the constant table.
    fn constant(&mut self, constant: ConstIdx) -> Self::Output;
    /// An index into the set table.
    fn set(&mut self, set: SetIdx) -> Self::Output;
    /// An index into the regex table.
    fn regex(&mut self, regex: RegexIdx) -> Self::Output;
    /// An index into the bound-set table.
    fn bounds(&mut self, bounds: BoundsIdx) -> Self::Output;
    /// An index into the schema table.
    fn schema(&mut self, schema: SchemaIdx) -> Self::Output;
    /// An index into the window table.
    fn window(&mut self, window: WindowIdx) -> Self::Output;
    /// An index into the check table.
    fn check(&mut self, check: CheckIdx) -> Self::Output;
    /// A jump target: an instruction position.
    fn target(&mut self, target: JumpTarget) -> Self::Output;
    /// A test's `optional` flag.
    fn optional(&mut self, optional: bool) -> Self::Output;
    /// A constant boolean ([`Op::Push`]).
    fn flag(&mut self, value: bool) -> Self::Output;
}

/// Where the operands of an instruction come from, one method per operand kind ([`Op::read`]):
/// the decoder reads them from a `.capc` file.
pub(crate) trait OperandSource {
    /// Why an operand could not be read.
    type Error;
    /// An index into the path table.
    fn path(&mut self) -> Result<PathIdx, Self::Error>;
    /// An index into the constant table.
    fn constant(&mut self) -> Result<ConstIdx, Self::Error>;
    /// An index into the set table.
    fn set(&mut self) -> Result<SetIdx, Self::Error>;
    /// An index into the regex table.
    fn regex(&mut self) -> Result<RegexIdx, Self::Error>;
    /// An index into the bound-set table.
    fn bounds(&mut self) -> Result<BoundsIdx, Self::Error>;
    /// An index into the schema table.
    fn schema(&mut self) -> Result<SchemaIdx, Self::Error>;
    /// An index into the window table.
    fn window(&mut self) -> Result<WindowIdx, Self::Error>;
    /// An index into the check table.
    fn check(&mut self) -> Result<CheckIdx, Self::Error>;
    /// A jump target.
    fn target(&mut self) -> Result<JumpTarget, Self::Error>;
    /// A test's `optional` flag.
    fn optional(&mut self) -> Result<bool, Self::Error>;
    /// A constant boolean ([`Op::Push`]).
    fn flag(&mut self) -> Result<bool, Self::Error>;
}
