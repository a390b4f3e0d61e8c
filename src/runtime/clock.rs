//! Where "now" comes from.
//!
//! - [`Clock`] is what an engine asks for the current instant.
//! - [`SystemClock`] reads the operating system's wall clock; production engines use it, and a
//!   request's `time` field is never honoured with it (§4: a skill must not claim business hours).
//! - [`SimulatedClock`] holds an instant that tests, `replay`, `capgate test` and the REPL move with
//!   [`SimulatedClock::set`] and [`SimulatedClock::advance`].
//!
//! Nothing in the state store reads a clock: every stateful call takes `now` as an argument, so a
//! decision and the commit that follows it see the same instant.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A source of the current instant.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;

    /// Whether this clock may be set by its user; only then may a request's `time` move it.
    fn is_simulated(&self) -> bool;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn is_simulated(&self) -> bool {
        false
    }
}

/// A clock that only moves when told to.
///
/// It may be set to an earlier instant; the state store treats time going backwards
/// conservatively (see `docs/runtime.md`).
#[derive(Debug)]
pub struct SimulatedClock {
    // A poisoned lock is recovered: the only critical sections are a read and a whole-value
    // write of a `Copy` value, so the instant inside is always a complete one.
    now: Mutex<DateTime<Utc>>,
}

/// Moving a [`SimulatedClock`] would leave the range of instants chrono represents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
#[error("advancing the clock by {by:?} leaves the supported time range")]
pub struct ClockOutOfRange {
    /// The requested step.
    pub by: Duration,
}

impl SimulatedClock {
    /// A clock that reads `start` until moved.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Sets the clock, earlier or later.
    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = to;
    }

    /// Moves the clock forward by `by` and returns the new instant.
    ///
    /// # Errors
    /// [`ClockOutOfRange`] if the result is not representable; the clock is then unchanged.
    pub fn advance(&self, by: Duration) -> Result<DateTime<Utc>, ClockOutOfRange> {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        let next = chrono::TimeDelta::from_std(by)
            .ok()
            .and_then(|delta| now.checked_add_signed(delta))
            .ok_or(ClockOutOfRange { by })?;
        *now = next;
        Ok(next)
    }
}

impl Clock for SimulatedClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn is_simulated(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instant(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn simulated_clock_reads_its_start_until_moved() {
        let clock = SimulatedClock::new(instant("2026-12-01T15:00:00Z"));
        assert_eq!(clock.now(), instant("2026-12-01T15:00:00Z"));
        assert!(clock.is_simulated());
    }

    #[test]
    fn simulated_clock_advances_by_nanoseconds() {
        let clock = SimulatedClock::new(instant("2026-12-01T15:00:00Z"));
        let next = clock.advance(Duration::from_nanos(1)).unwrap();
        assert_eq!(next, instant("2026-12-01T15:00:00.000000001Z"));
        assert_eq!(clock.now(), next);
    }

    #[test]
    fn simulated_clock_can_be_set_backwards() {
        let clock = SimulatedClock::new(instant("2026-12-01T15:00:00Z"));
        clock.set(instant("2020-01-01T00:00:00Z"));
        assert_eq!(clock.now(), instant("2020-01-01T00:00:00Z"));
    }

    #[test]
    fn advancing_out_of_range_is_an_error_and_leaves_the_clock_alone() {
        let clock = SimulatedClock::new(instant("2026-12-01T15:00:00Z"));
        assert!(clock.advance(Duration::from_secs(u64::MAX)).is_err());
        assert_eq!(clock.now(), instant("2026-12-01T15:00:00Z"));
    }

    #[test]
    fn system_clock_is_not_simulated() {
        assert!(!SystemClock.is_simulated());
    }
}
