//! Runtime state of a stateful engine: clock, rate limits, grants, transactions, approvals and
//! revocation (SPEC §5.2–§5.4).
//!
//! - [`Clock`] says what time it is: [`SystemClock`] in production, [`SimulatedClock`] in tests,
//!   `replay` and the REPL.
//! - [`StateStore`] is everything the engine reads and consumes between decisions;
//!   [`InMemoryStore`] implements it for one process. A later Redis backend implements the same
//!   trait.
//! - [`Commit`] is what one allowed call consumes (rate-limit slots as [`RateCharge`]s and, per
//!   [`Authority`], a grant use); [`StateStore::commit`] takes all of it atomically or answers a
//!   [`CommitRefusal`].
//! - [`NewGrant`], [`GrantLifetime`], [`GrantStatus`] and [`GrantRefusal`] describe grants;
//!   [`RateSpec`] describes a `rateLimit`; [`RefusalReason`] maps refusals to deny reasons.
//!
//! This layer depends on nothing but std, chrono and the crate's fixed bounds (`crate::limits`): the engine builds rate keys, looks up
//! capabilities and maps refusals to reasons. Semantics and memory costs: `docs/runtime.md`.

mod clock;
mod error;
mod grants;
mod rate;
mod rate_table;
mod store;

pub use clock::{Clock, ClockOutOfRange, SimulatedClock, SystemClock};
pub use error::StateError;
pub use grants::{
    GrantLifetime, GrantRefusal, GrantStatus, LifetimeBound, NewGrant, RefusalReason,
};
pub use rate::RateSpec;
pub(crate) use rate::window_counts_at;
pub use store::{
    Authority, Commit, CommitRefusal, GrantUse, InMemoryStore, RateCharge, RateKey, Revocation,
    StateStore,
};
