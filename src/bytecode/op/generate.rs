//! `instruction_table!`: expands the instruction table in `op.rs` into `Op` and the functions
//! the encoder, decoder, verifier and disassembler derive from it.
//!
//! One entry of the table:
//!
//! ```text
//! /// What the instruction does.
//! RangeDiff {
//!     /// What the operand is.
//!     a: path,
//!     ...
//! } = 0x07 "range.diff", stack(0 -> 1), then(next), reads(request),
//!     disasm "{a} - {b} {bounds} {optional}";
//! ```
//!
//! - the variant's fields: `{ field: kind, ... }`, `(field: kind)` for a tuple variant, or none.
//!   A kind is one of the methods of `OperandVisitor` and `OperandSource`: it gives the field's
//!   type here and how each of those traits' implementations writes, reads, checks and prints it;
//! - the opcode byte and the mnemonic;
//! - `stack(P -> Q)`: the booleans popped, then pushed, when control goes on to the next
//!   instruction;
//! - `then(...)`: where control can go: `next`, then the field holding a jump target if there is
//!   one; empty for an instruction that ends the program;
//! - `reads(...)`: `request`, `clock`, both or neither; an instruction that reads either is a test;
//! - `disasm`, optional: how the disassembler lays the operands out, when not separated by spaces.
//!
//! It generates `Op`, `Op::opcode`, `Op::mnemonic`, `Op::effect`, `Op::is_test`,
//! `Op::reads_clock`, the operand drivers `Op::read`, `Op::try_for_each_operand` and
//! `Op::format_operands`, and, for tests, the table as data (`INSTRUCTIONS`).

/// Expands the instruction table; see the module docs for the syntax of an entry.
macro_rules! instruction_table {
    // The Rust type of each operand kind.
    (@type path) => { PathIdx };
    (@type constant) => { ConstIdx };
    (@type set) => { SetIdx };
    (@type regex) => { RegexIdx };
    (@type bounds) => { BoundsIdx };
    (@type schema) => { SchemaIdx };
    (@type window) => { WindowIdx };
    (@type check) => { CheckIdx };
    (@type target) => { JumpTarget };
    (@type optional) => { bool };
    (@type flag) => { bool };
    // `then(...)`: the jump field, and whether control can reach the next instruction.
    (@jump) => { None };
    (@jump $field:ident) => { Some($field) };
    (@terminal) => { true };
    (@terminal next) => { false };
    // `reads(...)`.
    (@reads_clock) => { false };
    (@reads_clock clock $($rest:ident)*) => { true };
    (@reads_clock request $($rest:ident)*) => { instruction_table!(@reads_clock $($rest)*) };
    (@reads_anything) => { false };
    (@reads_anything $($source:ident)+) => { true };
    // The disassembly layout: as given, or the operands separated by spaces.
    (@layout [$layout:literal] $($field:ident)*) => { $layout };
    (@layout [] $($field:ident)*) => { concat!($("{", stringify!($field), "} ",)*) };

    ($(
        $(#[$doc:meta])*
        $name:ident
        $({ $( $(#[$field_doc:meta])* $field:ident : $kind:ident ),* $(,)? })?
        $(( $(#[$tuple_doc:meta])* $tuple:ident : $tuple_kind:ident ))?
        = $opcode:literal $mnemonic:literal,
        stack($pops:literal -> $pushes:literal),
        then($($next:ident)? $(, $jump:ident)?),
        reads($($source:ident),*)
        $(, disasm $layout:literal)?
        ;
    )*) => {
        /// One instruction.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Op {
            $(
                $(#[$doc])*
                $name
                $({ $( $(#[$field_doc])* $field: instruction_table!(@type $kind) ),* })?
                $(( $(#[$tuple_doc])* instruction_table!(@type $tuple_kind) ))?,
            )*
        }

        /// Every instruction of the table, in the order of [`Op`]'s variants.
        #[cfg(test)]
        pub(crate) const INSTRUCTIONS: &[Instruction] = &[$(
            Instruction {
                opcode: $opcode,
                mnemonic: $mnemonic,
                operands: &[
                    $($( (stringify!($field), stringify!($kind)) ),*)?
                    $( (stringify!($tuple), stringify!($tuple_kind)) )?
                ],
                pops: $pops,
                pushes: $pushes,
            },
        )*];

        impl Op {
            /// The byte that stands for the instruction in a `.capc` file.
            pub fn opcode(&self) -> u8 {
                match self {
                    $( Op::$name { .. } => $opcode, )*
                }
            }

            /// The mnemonic used by the disassembler and `docs/bytecode.md`.
            pub fn mnemonic(&self) -> &'static str {
                match self {
                    $( Op::$name { .. } => $mnemonic, )*
                }
            }

            /// The stack effect and jump target. When a jump is taken the stack keeps the
            /// tested value (height after = height before); when it is not, `pops`/`pushes`
            /// apply.
            pub fn effect(&self) -> Effect {
                match *self {
                    $( Op::$name { $($jump,)? .. } => Effect {
                        pops: $pops,
                        pushes: $pushes,
                        jump: instruction_table!(@jump $($jump)?),
                        terminal: instruction_table!(@terminal $($next)?),
                    }, )*
                }
            }

            /// True for instructions that read the request or the clock (and so are "tests" in
            /// traces).
            pub fn is_test(&self) -> bool {
                match self {
                    $( Op::$name { .. } => instruction_table!(@reads_anything $($source)*), )*
                }
            }

            /// True for instructions that read the engine clock.
            pub fn reads_clock(&self) -> bool {
                match self {
                    $( Op::$name { .. } => instruction_table!(@reads_clock $($source)*), )*
                }
            }

            /// The instruction numbered `opcode`, its operands read from `source` in declaration
            /// order; `None` when no instruction has that number.
            pub(crate) fn read<S: OperandSource>(
                opcode: u8,
                source: &mut S,
            ) -> Result<Option<Op>, S::Error> {
                Ok(Some(match opcode {
                    $( $opcode => Op::$name
                        $({ $( $field: source.$kind()? ),* })?
                        $(( source.$tuple_kind()? ))?, )*
                    _ => return Ok(None),
                }))
            }

            /// Calls `visitor` on each operand in declaration order, stopping at the first
            /// error.
            pub(crate) fn try_for_each_operand<V, E>(&self, visitor: &mut V) -> Result<(), E>
            where
                V: OperandVisitor<Output = Result<(), E>>,
            {
                match *self {
                    $( Op::$name $({ $($field),* })? $(($tuple))? => {
                        $($( visitor.$kind($field)?; )*)?
                        $( visitor.$tuple_kind($tuple)?; )?
                    } )*
                }
                Ok(())
            }

            /// The operands as `visitor` prints them, laid out as the table says (separated by
            /// spaces unless it says otherwise; an operand that prints as nothing leaves its
            /// separator, so the text may end in spaces).
            pub(crate) fn format_operands<V>(&self, visitor: &mut V) -> String
            where
                V: OperandVisitor<Output = String>,
            {
                match *self {
                    $( Op::$name $({ $($field),* })? $(($tuple))? => format!(
                        instruction_table!(@layout [$($layout)?] $($($field)*)? $($tuple)?)
                        $($(, $field = visitor.$kind($field))*)?
                        $(, $tuple = visitor.$tuple_kind($tuple))?
                    ), )*
                }
            }
        }
    };
}

pub(super) use instruction_table;
