//! Index newtypes into a [`Program`](super::program::Program)'s tables.
//!
//! Every operand that names a table entry has its own type, so a path index can never be used
//! where a regex index is expected. They are built only by checked constructors
//! ([`Index::from_usize`]); the verifier then proves each one is in range for its table, which
//! lets the VM look entries up with `get` and treat a miss as an internal-invariant error.

use std::fmt;

/// Common behaviour of every table index.
pub trait Index: Copy + fmt::Debug {
    /// The table entry type this index points into (for documentation only).
    const TABLE: &'static str;

    /// A checked constructor: `None` when `n` does not fit the index width.
    fn from_usize(n: usize) -> Option<Self>;

    /// The position in the table.
    fn to_usize(self) -> usize;
}

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident, $table:literal, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl Index for $name {
            const TABLE: &'static str = $table;

            fn from_usize(n: usize) -> Option<Self> {
                u32::try_from(n).ok().map($name)
            }

            fn to_usize(self) -> usize {
                crate::convert::usize_from(self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

index_type!(
    /// An entry of the constant pool (a JSON literal).
    ConstIdx, "constants", "c"
);
index_type!(
    /// An entry of the set table (the literals of `in [...]`).
    SetIdx, "sets", "set"
);
index_type!(
    /// An entry of the interned path table.
    PathIdx, "paths", "p"
);
index_type!(
    /// An entry of the compiled regex table.
    RegexIdx, "regexes", "re"
);
index_type!(
    /// An entry of the compiled schema table.
    SchemaIdx, "schemas", "schema"
);
index_type!(
    /// An entry of the compiled window table.
    WindowIdx, "windows", "win"
);
index_type!(
    /// An entry of the bound-set table (the bounds of one `fieldRange`).
    BoundsIdx, "bounds", "b"
);
index_type!(
    /// An entry of the check table: one top-level constraint, for reasons.
    CheckIdx, "checks", "check"
);
index_type!(
    /// An instruction position; jumps may only target a later one.
    JumpTarget, "code", "@"
);

/// Looks an index up in its table.
pub fn lookup<I: Index, T>(table: &[T], index: I) -> Option<&T> {
    table.get(index.to_usize())
}
