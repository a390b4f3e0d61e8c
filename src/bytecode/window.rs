//! Compiled wall-clock windows (SPEC §2.4 `wallClockWindow`).
//!
//! A [`CompiledWindow`] is either a set of weekly day windows in one IANA zone
//! (`mon-fri 09:00-17:00 "America/New_York"`) or an absolute half-open interval
//! (`from … until …`). `compile::window` builds one from the syntax tree, resolving the zone and
//! rejecting windows that are empty, ambiguous or out of range; evaluation (`contains`) and the
//! deny message helpers live in `vm::window`. The VM never sees the syntax tree.

use chrono::{DateTime, FixedOffset, Utc};
use chrono_tz::Tz;

/// Minutes in a day: `24:00`.
pub(crate) const MINUTES_PER_DAY: u16 = 1440;

/// One `DAYS HH:MM-HH:MM` window, in minutes since local midnight.
///
/// INVARIANT (day-window): `days` is a non-empty subset of bits 0..7; `start < 1440`;
/// `end <= 1440`; `start != end`. `end < start` crosses midnight. Upheld by
/// `compile::window::compile_window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DayInterval {
    /// Bit 0 = Monday … bit 6 = Sunday: the days a window may start on.
    pub(crate) days: u8,
    pub(crate) start: u16,
    pub(crate) end: u16,
}

/// What a compiled window holds for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WindowRule {
    /// Local wall time in `zone` falls in one of `windows` (non-empty).
    Weekly { windows: Vec<DayInterval>, zone: Tz },
    /// `from <= at < until`; `from < until`. The offsets as written are kept for messages.
    Absolute {
        from: DateTime<FixedOffset>,
        until: DateTime<FixedOffset>,
        from_utc: DateTime<Utc>,
        until_utc: DateTime<Utc>,
    },
}

/// A compiled `wallClockWindow` constraint. Immutable and `Send + Sync`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledWindow {
    pub(crate) rule: WindowRule,
}

impl CompiledWindow {
    /// The IANA zone name of a weekly window; `None` for an absolute interval.
    #[cfg(any(test, feature = "internals"))]
    pub fn zone_name(&self) -> Option<&'static str> {
        match &self.rule {
            WindowRule::Weekly { zone, .. } => Some(zone.name()),
            WindowRule::Absolute { .. } => None,
        }
    }
}

/// `HH:MM` for minutes since midnight (up to `24:00`).
pub(crate) fn clock(minutes: u16) -> String {
    format!("{:02}:{:02}", minutes / 60, minutes % 60)
}
