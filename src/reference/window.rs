//! `wallClockWindow`, computed naively from the local wall time ([`window_holds`]).
//!
//! Weekly: convert the instant to the zone; take the local weekday and time of day; a window
//! `DAYS S-E` with `S < E` holds on a listed day for `S <= t < E`; with `E <= S` (crossing
//! midnight) it holds on a listed day for `t >= S` and on the day after a listed day for
//! `t < E`. Absolute: `from <= now < until`.

use chrono::{DateTime, Datelike, Timelike, Utc};
use chrono_tz::Tz;

use crate::syntax::ast::WindowSpec;

/// Whether `now` falls in the window. An unknown zone never holds (the checker rejects it).
pub(super) fn window_holds(spec: &WindowSpec, now: DateTime<Utc>) -> bool {
    match spec {
        WindowSpec::Absolute { from, until } => from.node <= now && now < until.node,
        WindowSpec::Weekly { windows, zone } => {
            let Ok(zone) = zone.node.parse::<Tz>() else {
                return false;
            };
            let local = now.with_timezone(&zone);
            let today = local.weekday().num_days_from_monday();
            let yesterday = (today + 6) % 7;
            // Nanoseconds since local midnight; a leap second stays in its minute.
            let nanos = u128::from(local.num_seconds_from_midnight()) * 1_000_000_000
                + u128::from(local.nanosecond().min(999_999_999));
            windows.iter().any(|window| {
                let start = u128::from(window.start.0) * 60_000_000_000;
                let end = u128::from(window.end.0) * 60_000_000_000;
                if start < end {
                    window.days.contains(today) && start <= nanos && nanos < end
                } else {
                    (window.days.contains(today) && nanos >= start)
                        || (window.days.contains(yesterday) && nanos < end)
                }
            })
        }
    }
}
