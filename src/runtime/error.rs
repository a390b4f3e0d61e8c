//! Errors of the runtime state layer.
//!
//! [`StateError`] is what an operator action (a session line, an admin call) gets back when the
//! store refuses it. Refusals of a *call* are not errors: they are [`GrantStatus`] and
//! [`CommitRefusal`] values the engine turns into deny reasons.
//!
//! [`GrantStatus`]: super::GrantStatus
//! [`CommitRefusal`]: super::CommitRefusal

/// An operator action the state store refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum StateError {
    /// `begin_transaction` on a transaction that is open.
    #[error("transaction `{0}` is already open")]
    TransactionAlreadyOpen(String),
    /// `end_transaction`, or a grant bound to a transaction, when it is not open.
    #[error("transaction `{0}` is not open")]
    TransactionNotOpen(String),
    /// A grant token can be issued once for the life of the store.
    #[error("grant token `{0}` was already issued")]
    #[diagnostic(help("grant tokens are never reused, even after revocation or expiry"))]
    TokenAlreadyIssued(String),
    /// No grant was ever issued with this token.
    #[error("no grant `{0}` was issued")]
    UnknownGrant(String),
    /// The skill is revoked; no grant for it is issued until the revocation is lifted.
    #[error("skill `{0}` is revoked")]
    SkillRevoked(String),
    /// The capability is revoked; no grant for it is issued until the revocation is lifted.
    #[error("capability `{capability}` of skill `{skill}` is revoked")]
    CapabilityRevoked {
        /// The skill.
        skill: String,
        /// The revoked capability.
        capability: String,
    },
    /// A grant of zero calls or zero duration could never be used.
    #[error("a grant needs at least one call or a non-zero duration")]
    EmptyLifetime,
    /// `issued_at + duration` is not a representable instant.
    #[error("the grant's expiry is outside the supported time range")]
    LifetimeOutOfRange,
    /// The store ran out of transaction epochs (after 2^64 `begin_transaction`s).
    #[error("no more transactions can be begun in this store")]
    TransactionsExhausted,
}
