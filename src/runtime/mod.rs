//! Clock, rate limits, grants, transactions, approvals and revocation.
pub mod clock;
pub mod rate;
