//! The instruction table against itself, the `.capc` encoding and `docs/bytecode.md`.

use std::collections::HashSet;

use super::*;
use crate::bytecode::decode::op_from_bytes;
use crate::bytecode::encode::op_bytes;
use crate::bytecode::index::Index;

/// Operands for building every instruction: each index one more than the last, from `next`,
/// and every flag `flags`.
struct Sample {
    next: usize,
    flags: bool,
}

impl Sample {
    fn index<I: Index>(&mut self) -> Result<I, ()> {
        let index = I::from_usize(self.next).ok_or(())?;
        self.next = self.next.wrapping_add(1);
        Ok(index)
    }
}

impl OperandSource for Sample {
    type Error = ();

    fn path(&mut self) -> Result<PathIdx, ()> {
        self.index()
    }

    fn constant(&mut self) -> Result<ConstIdx, ()> {
        self.index()
    }

    fn set(&mut self) -> Result<SetIdx, ()> {
        self.index()
    }

    fn regex(&mut self) -> Result<RegexIdx, ()> {
        self.index()
    }

    fn bounds(&mut self) -> Result<BoundsIdx, ()> {
        self.index()
    }

    fn schema(&mut self) -> Result<SchemaIdx, ()> {
        self.index()
    }

    fn window(&mut self) -> Result<WindowIdx, ()> {
        self.index()
    }

    fn check(&mut self) -> Result<CheckIdx, ()> {
        self.index()
    }

    fn target(&mut self) -> Result<JumpTarget, ()> {
        self.index()
    }

    fn optional(&mut self) -> Result<bool, ()> {
        Ok(self.flags)
    }

    fn flag(&mut self) -> Result<bool, ()> {
        Ok(self.flags)
    }
}

/// Every instruction of the table, built with operands from `sample`.
fn every_instruction(mut sample: impl FnMut() -> Sample) -> Vec<(Instruction, Op)> {
    INSTRUCTIONS
        .iter()
        .map(|instruction| {
            let op = Op::read(instruction.opcode, &mut sample())
                .unwrap()
                .unwrap_or_else(|| panic!("opcode {:#04x} builds nothing", instruction.opcode));
            (*instruction, op)
        })
        .collect()
}

#[test]
fn no_opcode_or_mnemonic_is_used_twice() {
    let mut opcodes = HashSet::new();
    let mut mnemonics = HashSet::new();
    for instruction in INSTRUCTIONS {
        assert!(
            opcodes.insert(instruction.opcode),
            "opcode {:#04x} is used twice",
            instruction.opcode
        );
        assert!(
            mnemonics.insert(instruction.mnemonic),
            "mnemonic `{}` is used twice",
            instruction.mnemonic
        );
    }
}

#[test]
fn every_instruction_decodes_from_its_encoding_and_reencodes_to_the_same_bytes() {
    let samples = [
        Sample {
            next: 1,
            flags: true,
        },
        Sample {
            next: 0,
            flags: false,
        },
        Sample {
            next: usize::try_from(u32::MAX - 3).unwrap(),
            flags: true,
        },
    ];
    for sample in samples {
        let (next, flags) = (sample.next, sample.flags);
        for (instruction, op) in every_instruction(|| Sample { next, flags }) {
            assert_eq!(op.opcode(), instruction.opcode, "{op:?}");
            assert_eq!(op.mnemonic(), instruction.mnemonic, "{op:?}");
            let bytes = op_bytes(&op).unwrap();
            let flags = instruction
                .operands
                .iter()
                .filter(|(_, kind)| matches!(*kind, "optional" | "flag"))
                .count();
            let indices = instruction.operands.len() - flags;
            assert_eq!(bytes.len(), 1 + 4 * indices + flags, "{op:?}: {bytes:02x?}");
            assert_eq!(bytes.first(), Some(&instruction.opcode), "{op:?}");
            let decoded = op_from_bytes(&bytes).unwrap_or_else(|e| panic!("{op:?}: {e}"));
            assert_eq!(decoded, op, "{bytes:02x?}");
            assert_eq!(op_bytes(&decoded).unwrap(), bytes, "{op:?}");
        }
    }
}

#[test]
fn a_byte_outside_the_table_is_no_instruction() {
    let opcodes: HashSet<u8> = INSTRUCTIONS.iter().map(|i| i.opcode).collect();
    for byte in (0..=u8::MAX).filter(|b| !opcodes.contains(b)) {
        let sample = &mut Sample {
            next: 0,
            flags: false,
        };
        assert_eq!(Op::read(byte, sample), Ok(None), "{byte:#04x}");
        let error = op_from_bytes(&[byte]).unwrap_err().to_string();
        assert!(error.contains("unknown opcode"), "{byte:#04x}: {error}");
    }
}

#[test]
fn effects_follow_the_table() {
    for (instruction, op) in every_instruction(|| Sample {
        next: 7,
        flags: false,
    }) {
        let effect = op.effect();
        assert_eq!(
            (effect.pops, effect.pushes),
            (instruction.pops, instruction.pushes),
            "{op:?}"
        );
        let has_target = instruction.operands.iter().any(|(_, k)| *k == "target");
        assert_eq!(effect.jump.is_some(), has_target, "{op:?}");
        // A test pushes its one boolean and goes on.
        if op.is_test() {
            assert_eq!((effect.pops, effect.pushes, effect.terminal), (0, 1, false));
        }
    }
}
/// The operands column of `docs/bytecode.md`: each field, with its kind when the name differs.
fn documented_operands(instruction: &Instruction) -> String {
    let operands: Vec<String> = instruction
        .operands
        .iter()
        .map(|&(name, kind)| {
            if name == kind {
                name.to_owned()
            } else {
                format!("{name} ({kind})")
            }
        })
        .collect();
    operands.join(", ")
}

#[test]
fn docs_list_every_instruction_as_the_table_defines_it() {
    let docs = include_str!("../../../docs/bytecode.md");
    let rows = docs
        .lines()
        .filter(|line| line.starts_with("| `0x"))
        .collect::<Vec<_>>();
    assert_eq!(rows.len(), INSTRUCTIONS.len(), "{rows:#?}");
    let mut sorted = INSTRUCTIONS.to_vec();
    sorted.sort_by_key(|i| i.opcode);
    for (row, instruction) in rows.iter().zip(&sorted) {
        let expected = format!(
            "| `{:#04x}` | `{}` | {} | {} → {} |",
            instruction.opcode,
            instruction.mnemonic,
            documented_operands(instruction),
            instruction.pops,
            instruction.pushes
        );
        assert!(
            row.starts_with(&expected),
            "docs/bytecode.md has\n{row}\nwhere the table gives\n{expected}"
        );
    }
}
