//! The constraint vocabulary: one table of the constraint keywords that the `.cap` language and
//! the JSON manifest share.
//!
//! [`ConstraintKeyword`] is the table: one variant per kind of constraint (SPEC §2.4 and the
//! combinators), with its name, which is at once the `.cap` keyword, the manifest's `"type"`
//! and the `constraint` of a deny reason. [`OPTIONAL`] is the prefix that makes a field
//! constraint hold when its path is absent, and [`CONSTRAINT_WORDS`] every word a constraint
//! starts with.
//!
//! Everything else derives from this table: the AST's [`ConstraintKind::keyword`], the
//! parser's "did you mean" hints, the manifest's `type` names and the fields each accepts (an
//! exhaustive `match` on the keyword), the names compiled checks carry into `.capc` files,
//! [`ReasonKind`]'s wire names, the formatter's item keywords and the REPL's. The grammar
//! (`grammar/capgate.pest`) spells the keywords as literals, as pest needs; a test checks that
//! it and this table list the same words.
//!
//! This module depends on nothing else in the crate.
//!
//! [`ConstraintKind::keyword`]: crate::syntax::ast::ConstraintKind::keyword
//! [`ReasonKind`]: crate::ReasonKind

use std::fmt;

/// The keyword of one kind of constraint: `fieldEquals`, `rateLimit`, `any`, ...
///
/// A plain tag, one byte, without the constraint's operands (those are in
/// [`ConstraintKind`](crate::syntax::ast::ConstraintKind)); compiled checks carry it, so a deny
/// reason's kind is a copy of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConstraintKeyword {
    /// `fieldEquals`: a path equals a literal, one of a list, or another path.
    FieldEquals,
    /// `fieldMatches`: a string at a path matches a regex.
    FieldMatches,
    /// `fieldRange`: a number, timestamp or difference of timestamps is within bounds.
    FieldRange,
    /// `payloadSchema`: the payload validates against a JSON Schema.
    PayloadSchema,
    /// `actorBinding`: paths equal a field of the calling agent's identity.
    ActorBinding,
    /// `rateLimit`: calls per window, only at the top level of a capability.
    RateLimit,
    /// `wallClockWindow`: the engine clock is within weekly windows or an absolute interval.
    WallClockWindow,
    /// `any { ... }`: at least one of the constraints holds.
    Any,
    /// `all { ... }`: every one of the constraints holds.
    All,
    /// `not { ... }`: the one constraint does not hold.
    Not,
}

impl ConstraintKeyword {
    /// Every keyword, in the order the language guide, SPEC §2.4 and messages list them.
    pub const ALL: [ConstraintKeyword; 10] = [
        ConstraintKeyword::FieldEquals,
        ConstraintKeyword::FieldMatches,
        ConstraintKeyword::FieldRange,
        ConstraintKeyword::PayloadSchema,
        ConstraintKeyword::ActorBinding,
        ConstraintKeyword::RateLimit,
        ConstraintKeyword::WallClockWindow,
        ConstraintKeyword::Any,
        ConstraintKeyword::All,
        ConstraintKeyword::Not,
    ];

    /// The keyword as written in `.cap`, as the manifest's `"type"` and as a reason's
    /// `constraint`.
    #[inline]
    pub const fn name(self) -> &'static str {
        match self {
            ConstraintKeyword::FieldEquals => "fieldEquals",
            ConstraintKeyword::FieldMatches => "fieldMatches",
            ConstraintKeyword::FieldRange => "fieldRange",
            ConstraintKeyword::PayloadSchema => "payloadSchema",
            ConstraintKeyword::ActorBinding => "actorBinding",
            ConstraintKeyword::RateLimit => "rateLimit",
            ConstraintKeyword::WallClockWindow => "wallClockWindow",
            ConstraintKeyword::Any => "any",
            ConstraintKeyword::All => "all",
            ConstraintKeyword::Not => "not",
        }
    }

    /// The keyword named `name`, if any (exact, case-sensitive).
    pub fn from_name(name: &str) -> Option<ConstraintKeyword> {
        ConstraintKeyword::ALL
            .into_iter()
            .find(|k| k.name() == name)
    }

    /// Whether [`OPTIONAL`] applies: true for the field constraints (`fieldEquals`,
    /// `fieldMatches`, `fieldRange`, `actorBinding`), which read one path each and can hold
    /// when it is absent (SPEC §2.4).
    pub const fn may_be_optional(self) -> bool {
        matches!(
            self,
            ConstraintKeyword::FieldEquals
                | ConstraintKeyword::FieldMatches
                | ConstraintKeyword::FieldRange
                | ConstraintKeyword::ActorBinding
        )
    }

    /// Whether the keyword opens a block of constraints (`any`, `all`, `not`).
    pub const fn is_combinator(self) -> bool {
        matches!(
            self,
            ConstraintKeyword::Any | ConstraintKeyword::All | ConstraintKeyword::Not
        )
    }
}

impl fmt::Display for ConstraintKeyword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `optional`: the prefix that lets a field constraint hold when its path (or any segment of
/// it) is absent; see [`ConstraintKeyword::may_be_optional`]. In the manifest it is the member
/// `"optional": true`.
pub const OPTIONAL: &str = "optional";

/// Every word a constraint can start with: [`OPTIONAL`], then each [`ConstraintKeyword`]'s
/// name in [`ConstraintKeyword::ALL`] order. The REPL reads a line that starts with one as a
/// constraint; the formatter starts a new item at one.
#[expect(
    clippy::indexing_slicing,
    reason = "evaluated at compile time, where an index out of bounds fails the build"
)]
pub const CONSTRAINT_WORDS: [&str; ConstraintKeyword::ALL.len() + 1] = {
    let mut words = [OPTIONAL; ConstraintKeyword::ALL.len() + 1];
    let mut i = 0;
    while i < ConstraintKeyword::ALL.len() {
        words[i + 1] = ConstraintKeyword::ALL[i].name();
        i += 1;
    }
    words
};

/// The words that start a declaration of a skill or capability block besides the constraint
/// words ([`CONSTRAINT_WORDS`]): the two blocks and their fields. The formatter starts a new item
/// at one; the REPL completes them.
pub const ITEM_WORDS: [&str; 11] = [
    "skill",
    "capability",
    "version",
    "hash",
    "signer",
    "risk",
    "sensitivity",
    "resource",
    "operations",
    "lifetime",
    "justification",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_read_back() {
        for keyword in ConstraintKeyword::ALL {
            assert_eq!(ConstraintKeyword::from_name(keyword.name()), Some(keyword));
            assert_eq!(keyword.to_string(), keyword.name());
        }
        let mut names: Vec<&str> = ConstraintKeyword::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ConstraintKeyword::ALL.len());
        assert_eq!(ConstraintKeyword::from_name("FieldEquals"), None);
        assert_eq!(ConstraintKeyword::from_name(OPTIONAL), None);
    }

    #[test]
    fn all_lists_every_variant_in_declaration_order() {
        // `ALL` is sorted by the derived `Ord`, which follows declaration order; a variant left
        // out of `ALL` shows up as a gap in the discriminants.
        for (i, keyword) in ConstraintKeyword::ALL.into_iter().enumerate() {
            assert_eq!(keyword as usize, i, "{keyword}");
        }
    }

    #[test]
    fn constraint_words_are_optional_then_the_names() {
        let (first, rest) = CONSTRAINT_WORDS.split_first().unwrap();
        assert_eq!(*first, "optional");
        let names: Vec<&str> = ConstraintKeyword::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(rest, names.as_slice());
    }

    #[test]
    fn only_field_constraints_may_be_optional() {
        let optional: Vec<&str> = ConstraintKeyword::ALL
            .into_iter()
            .filter(|k| k.may_be_optional())
            .map(ConstraintKeyword::name)
            .collect();
        assert_eq!(
            optional,
            ["fieldEquals", "fieldMatches", "fieldRange", "actorBinding"]
        );
        let combinators: Vec<&str> = ConstraintKeyword::ALL
            .into_iter()
            .filter(|k| k.is_combinator())
            .map(ConstraintKeyword::name)
            .collect();
        assert_eq!(combinators, ["any", "all", "not"]);
    }
}
