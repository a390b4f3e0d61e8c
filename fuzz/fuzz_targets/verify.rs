//! Bytecode verifier. A compiled program from the corpus is mutated (instructions, operands,
//! jumps, check ranges, tables) and verified. The verifier must accept or reject without
//! panicking; when it accepts, running the VM on a fuzzed request must never return
//! `VmError::Internal` ("verified programs never hit internal errors"), and `run` (which answers
//! from the program's plan where it can), `run_unplanned` and `trace` must agree on the outcome.
#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use capgate::ConstraintKeyword;
use capgate::bytecode::index::{
    BoundsIdx, CheckIdx, ConstIdx, Index, JumpTarget, PathIdx, RegexIdx, SchemaIdx, SetIdx,
    WindowIdx,
};
use capgate::bytecode::op::Op;
use capgate::bytecode::program::{CheckInfo, Program};
use capgate::vm::{
    Input, TestReport, Tracer, VmError, resource::Bindings, resource::RequestResource,
};
use libfuzzer_sys::fuzz_target;

/// An instruction with small operands, so most land in range.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum FuzzOp {
    Equals {
        path: u8,
        value: u8,
        optional: bool,
    },
    InSet {
        path: u8,
        set: u8,
        optional: bool,
    },
    EqualsPath {
        path: u8,
        other: u8,
        optional: bool,
    },
    BindsIdentity {
        path: u8,
        identity: u8,
        optional: bool,
    },
    Matches {
        path: u8,
        regex: u8,
        optional: bool,
    },
    Range {
        path: u8,
        bounds: u8,
        optional: bool,
    },
    RangeNow {
        path: u8,
        bounds: u8,
        optional: bool,
    },
    RangeDiff {
        a: u8,
        b: u8,
        bounds: u8,
        optional: bool,
    },
    Schema {
        schema: u8,
    },
    Window {
        window: u8,
    },
    Push(bool),
    Not,
    /// Jump `forward` instructions ahead of where the op lands (0 = a self-jump).
    OrElse {
        forward: u8,
    },
    AndThen {
        forward: u8,
    },
    Require {
        check: u8,
    },
    Accept,
    /// A jump to an absolute position (may be backward or out of range).
    AbsoluteJump {
        target: u32,
        or_else: bool,
    },
}

fn idx<I: Index>(n: impl Into<u64>) -> I {
    I::from_usize(usize::try_from(n.into()).unwrap_or(0)).unwrap_or_else(|| unreachable!())
}

impl FuzzOp {
    fn to_op(self, at: usize) -> Op {
        let jump = |forward: u8| -> JumpTarget { idx(at as u64 + u64::from(forward)) };
        match self {
            FuzzOp::Equals {
                path,
                value,
                optional,
            } => Op::Equals {
                path: idx::<PathIdx>(path),
                value: idx::<ConstIdx>(value),
                optional,
            },
            FuzzOp::InSet {
                path,
                set,
                optional,
            } => Op::InSet {
                path: idx::<PathIdx>(path),
                set: idx::<SetIdx>(set),
                optional,
            },
            FuzzOp::EqualsPath {
                path,
                other,
                optional,
            } => Op::EqualsPath {
                path: idx::<PathIdx>(path),
                other: idx::<PathIdx>(other),
                optional,
            },
            FuzzOp::BindsIdentity {
                path,
                identity,
                optional,
            } => Op::BindsIdentity {
                path: idx::<PathIdx>(path),
                identity: idx::<PathIdx>(identity),
                optional,
            },
            FuzzOp::Matches {
                path,
                regex,
                optional,
            } => Op::Matches {
                path: idx::<PathIdx>(path),
                regex: idx::<RegexIdx>(regex),
                optional,
            },
            FuzzOp::Range {
                path,
                bounds,
                optional,
            } => Op::Range {
                path: idx::<PathIdx>(path),
                bounds: idx::<BoundsIdx>(bounds),
                optional,
            },
            FuzzOp::RangeNow {
                path,
                bounds,
                optional,
            } => Op::RangeNow {
                path: idx::<PathIdx>(path),
                bounds: idx::<BoundsIdx>(bounds),
                optional,
            },
            FuzzOp::RangeDiff {
                a,
                b,
                bounds,
                optional,
            } => Op::RangeDiff {
                a: idx::<PathIdx>(a),
                b: idx::<PathIdx>(b),
                bounds: idx::<BoundsIdx>(bounds),
                optional,
            },
            FuzzOp::Schema { schema } => Op::Schema {
                schema: idx::<SchemaIdx>(schema),
            },
            FuzzOp::Window { window } => Op::Window {
                window: idx::<WindowIdx>(window),
            },
            FuzzOp::Push(b) => Op::Push(b),
            FuzzOp::Not => Op::Not,
            FuzzOp::OrElse { forward } => Op::OrElse {
                target: jump(forward),
            },
            FuzzOp::AndThen { forward } => Op::AndThen {
                target: jump(forward),
            },
            FuzzOp::Require { check } => Op::Require {
                check: idx::<CheckIdx>(check),
            },
            FuzzOp::Accept => Op::Accept,
            FuzzOp::AbsoluteJump { target, or_else } => {
                let target = idx::<JumpTarget>(target);
                if or_else {
                    Op::OrElse { target }
                } else {
                    Op::AndThen { target }
                }
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Table {
    Consts,
    Sets,
    Paths,
    Regexes,
    Schemas,
    Windows,
    Bounds,
    Checks,
}

#[derive(Arbitrary, Debug)]
enum Mutation {
    Replace {
        at: u16,
        op: FuzzOp,
    },
    Insert {
        at: u16,
        op: FuzzOp,
    },
    Remove {
        at: u16,
    },
    Swap {
        a: u16,
        b: u16,
    },
    /// Rewrites (or appends) a check's code range.
    SetCheck {
        check: u8,
        start: u32,
        end: u32,
    },
    /// Drops the last entry of a table.
    Shrink(Table),
    SetMaxStack(u16),
    /// Desynchronises the debug table from the code.
    PopDebug,
}

fn position(at: u16, len: usize) -> usize {
    if len == 0 { 0 } else { usize::from(at) % len }
}

fn apply(program: &mut Program, mutation: &Mutation) {
    let len = program.code.len();
    match *mutation {
        Mutation::Replace { at, op } if len > 0 => {
            let at = position(at, len);
            program.code[at] = op.to_op(at);
        }
        Mutation::Insert { at, op } => {
            let at = position(at, len + 1);
            program.code.insert(at, op.to_op(at));
            program.debug.insert(at.min(program.debug.len()), None);
        }
        Mutation::Remove { at } if len > 0 => {
            let at = position(at, len);
            program.code.remove(at);
            if at < program.debug.len() {
                program.debug.remove(at);
            }
        }
        Mutation::Swap { a, b } if len > 0 => program.code.swap(position(a, len), position(b, len)),
        Mutation::SetCheck { check, start, end } => {
            let check = usize::from(check);
            if let Some(info) = program.checks.get_mut(check) {
                info.set_code(start..end);
            } else {
                program.checks.push(CheckInfo::new(
                    ConstraintKeyword::FieldEquals,
                    None,
                    String::new(),
                    start..end,
                ));
            }
        }
        Mutation::Shrink(ref table) => match table {
            Table::Consts => drop(program.consts.pop()),
            Table::Sets => drop(program.sets.pop()),
            Table::Paths => drop(program.paths.pop()),
            Table::Regexes => drop(program.regexes.pop()),
            Table::Schemas => drop(program.schemas.pop()),
            Table::Windows => drop(program.windows.pop()),
            Table::Bounds => drop(program.bounds.pop()),
            Table::Checks => drop(program.checks.pop()),
        },
        Mutation::SetMaxStack(n) => program.max_stack = n,
        Mutation::PopDebug => drop(program.debug.pop()),
        _ => {}
    }
}

#[derive(Debug)]
struct Case {
    skill: usize,
    capability: usize,
    mutations: Vec<Mutation>,
    payload: serde_json::Value,
    agent: serde_json::Value,
    context: serde_json::Value,
    resource: String,
    operation: String,
    transaction: Option<String>,
    now_seconds: i64,
    max_array_scan: u8,
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let skills = capgate_fuzz::corpus();
        let skill = u.choose_index(skills.len())?;
        let capabilities = skills[skill].capabilities.len();
        let capability = if capabilities == 0 {
            0
        } else {
            u.choose_index(capabilities)?
        };
        let count = u.int_in_range(0..=8)?;
        let mut mutations = Vec::with_capacity(count);
        for _ in 0..count {
            mutations.push(u.arbitrary()?);
        }
        Ok(Case {
            skill,
            capability,
            mutations,
            payload: capgate_fuzz::arbitrary_json(u, 4)?,
            agent: capgate_fuzz::arbitrary_json(u, 2)?,
            context: capgate_fuzz::arbitrary_json(u, 2)?,
            resource: capgate_fuzz::arbitrary_resource(u, skills.get(skill))?,
            operation: capgate_fuzz::arbitrary_word(u)?,
            transaction: if u.arbitrary()? {
                Some(capgate_fuzz::arbitrary_word(u)?)
            } else {
                None
            },
            now_seconds: u.int_in_range(0..=4_102_444_800)?,
            max_array_scan: u.arbitrary()?,
        })
    }
}

#[derive(Default)]
struct Collect {
    tests: Vec<TestReport>,
    requires: usize,
}

impl Tracer for Collect {
    fn test(&mut self, report: TestReport) {
        self.tests.push(report);
    }
    fn require(&mut self, _check: CheckIdx, _holds: bool) {
        self.requires += 1;
    }
}

fn no_internal<T: std::fmt::Debug>(
    what: &str,
    result: &std::result::Result<T, VmError>,
    program: &Program,
) {
    if let Err(VmError::Internal(message)) = result {
        panic!(
            "{what}: verified program hit an internal error `{message}`\n{}",
            capgate::bytecode::disasm::disassemble(program)
        );
    }
}

fuzz_target!(|case: Case| {
    let skills = capgate_fuzz::corpus();
    let Some(capability) = skills[case.skill].capabilities.get(case.capability) else {
        return;
    };
    let mut program = capability.program().program().clone();
    for mutation in &case.mutations {
        apply(&mut program, mutation);
    }
    let Ok(verified) = capgate::bytecode::verify::verify(program) else {
        return;
    };
    let program = verified.program();
    assert!(verified.max_stack() <= capgate::bytecode::verify::MAX_STACK);
    let _ = capgate::bytecode::disasm::disassemble(program);

    let Ok(resource) = RequestResource::parse(&case.resource) else {
        return;
    };
    let mut bindings = Bindings::new();
    let _ = capability.resource().matches(&resource, &mut bindings);
    let input = Input {
        payload: &case.payload,
        agent: &case.agent,
        context: &case.context,
        resource: &resource,
        bindings: &bindings,
        skill: &skills[case.skill].name,
        operation: &case.operation,
        transaction: case.transaction.as_deref(),
        now: chrono::DateTime::from_timestamp(case.now_seconds, 0).unwrap_or_default(),
        max_array_scan: usize::from(case.max_array_scan),
        regex_budget: &capgate::vm::RegexBudget::unlimited(),
        refuse_case_variants: true,
    };
    let fast = capgate::vm::run(&verified, &input);
    no_internal("run", &fast, program);
    // `run` answers from the program's plan where it can; the program alone must agree.
    let unplanned = capgate::vm::run_unplanned(&verified, &input);
    no_internal("run_unplanned", &unplanned, program);
    assert_eq!(fast, unplanned, "the plan and the program disagree");
    let mut collect = Collect::default();
    let traced = capgate::vm::trace(&verified, &input, &mut collect, false);
    no_internal("trace", &traced, program);
    assert_eq!(fast, traced, "run and trace disagree");
    let mut all = Collect::default();
    let traced_all = capgate::vm::trace(&verified, &input, &mut all, true);
    no_internal("trace keep_going", &traced_all, program);
    // Going on past a failure may meet an over-long array the fast path never reached, so only
    // a completed keep-going trace is compared.
    if traced_all.is_ok() {
        assert_eq!(
            fast, traced_all,
            "run and trace (keep going) disagree on the first failure"
        );
    }
});
