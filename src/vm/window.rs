//! Wall-clock window evaluation (SPEC §2.4 `wallClockWindow`).
//!
//! [`CompiledWindow::contains`] decides whether an instant falls in a compiled window;
//! [`CompiledWindow::describe`] and [`CompiledWindow::describe_instant`] render the window and the
//! instant for deny messages ("mon-fri 09:00-17:00 America/New_York", "sat 10:15
//! America/New_York (UTC-05:00)").
//!
//! Weekly windows are evaluated in local wall time: the instant is converted to the zone, and
//! its local weekday and time of day (to the nanosecond) are compared with each half-open
//! `[start, end)` window. A window whose end is before its start crosses midnight and belongs to
//! the day it starts on. Daylight-saving changes follow from the conversion: a window inside a
//! skipped hour never holds that day, a repeated hour holds twice. Nothing here allocates.

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};

use crate::bytecode::window::{CompiledWindow, DayInterval, WindowRule, clock};

const NANOS_PER_MINUTE: u64 = 60_000_000_000;
const NANOS_PER_SECOND: u64 = 1_000_000_000;
const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

impl CompiledWindow {
    /// True when `at` falls in the window.
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        match &self.rule {
            WindowRule::Weekly { windows, zone } => {
                let local = at.with_timezone(zone);
                let weekday = local.weekday().num_days_from_monday();
                // A leap second (nanos >= 1e9) stays inside the minute it extends.
                let nanos = u64::from(local.nanosecond().min(999_999_999));
                let time_of_day = u64::from(local.num_seconds_from_midnight())
                    .saturating_mul(NANOS_PER_SECOND)
                    .saturating_add(nanos);
                windows
                    .iter()
                    .any(|window| window.holds(weekday, time_of_day))
            }
            WindowRule::Absolute {
                from_utc,
                until_utc,
                ..
            } => *from_utc <= at && at < *until_utc,
        }
    }

    /// The window as written, for messages: `mon-fri 09:00-17:00 America/New_York`,
    /// `from 2026-01-01T00:00:00+00:00 until 2026-02-01T00:00:00+00:00`.
    pub fn describe(&self) -> String {
        match &self.rule {
            WindowRule::Weekly { windows, zone } => {
                let mut text = String::new();
                for (i, window) in windows.iter().enumerate() {
                    if i > 0 {
                        text.push_str(", ");
                    }
                    text.push_str(&describe_days(window.days));
                    text.push(' ');
                    text.push_str(&clock(window.start));
                    text.push('-');
                    text.push_str(&clock(window.end));
                }
                text.push(' ');
                text.push_str(zone.name());
                text
            }
            WindowRule::Absolute { from, until, .. } => format!(
                "from {} until {}",
                from.to_rfc3339_opts(SecondsFormat::AutoSi, true),
                until.to_rfc3339_opts(SecondsFormat::AutoSi, true)
            ),
        }
    }

    /// The instant as the window sees it, for messages: `sat 10:15 America/New_York
    /// (UTC-05:00)` for a weekly window (the offset disambiguates a repeated hour), the RFC 3339
    /// UTC instant for an absolute one.
    pub fn describe_instant(&self, at: DateTime<Utc>) -> String {
        match &self.rule {
            WindowRule::Weekly { zone, .. } => {
                let local = at.with_timezone(zone);
                let weekday = usize::try_from(local.weekday().num_days_from_monday()).unwrap_or(0);
                let offset = local.fixed_offset().offset().to_string();
                format!(
                    "{} {:02}:{:02} {} (UTC{})",
                    DAY_NAMES.get(weekday).copied().unwrap_or("?"),
                    local.hour(),
                    local.minute(),
                    zone.name(),
                    offset
                )
            }
            WindowRule::Absolute { .. } => at.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        }
    }
}

impl DayInterval {
    /// Whether local `weekday` (0 = Monday) at `time_of_day` nanoseconds after local midnight
    /// falls in this window.
    fn holds(self, weekday: u32, time_of_day: u64) -> bool {
        let start = u64::from(self.start).saturating_mul(NANOS_PER_MINUTE);
        let end = u64::from(self.end).saturating_mul(NANOS_PER_MINUTE);
        if self.start < self.end {
            self.starts_on(weekday) && start <= time_of_day && time_of_day < end
        } else {
            // Crosses midnight: the evening part on a listed day, the morning part on the day
            // after a listed day.
            let previous = (weekday + 6) % 7;
            (self.starts_on(weekday) && time_of_day >= start)
                || (self.starts_on(previous) && time_of_day < end)
        }
    }

    fn starts_on(self, weekday: u32) -> bool {
        weekday < 7 && self.days & (1 << weekday) != 0
    }
}

/// `daily`, `mon-fri`, `fri-mon`, `sat`, or runs joined by commas (`mon-wed,fri`).
fn describe_days(days: u8) -> String {
    let has = |i: usize| days & (1 << (i % 7)) != 0;
    if days & 0b111_1111 == 0b111_1111 {
        return "daily".to_owned();
    }
    let mut runs = Vec::new();
    // Start scanning just after an absent day so a run wrapping past Sunday stays whole.
    let Some(gap) = (0..7).find(|i| !has(*i)) else {
        return "daily".to_owned();
    };
    let mut i = gap + 1;
    while i <= gap + 7 {
        if has(i) {
            let first = i;
            while has(i + 1) && i < gap + 7 {
                i += 1;
            }
            runs.push((first % 7, i % 7));
        }
        i += 1;
    }
    runs.sort_unstable();
    let name = |d: usize| DAY_NAMES.get(d).copied().unwrap_or("?");
    runs.iter()
        .map(|&(a, b)| {
            if a == b {
                name(a).to_owned()
            } else {
                format!("{}-{}", name(a), name(b))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_sets_render_as_runs() {
        assert_eq!(describe_days(0b001_1111), "mon-fri");
        assert_eq!(describe_days(0b111_0001), "fri-mon");
        assert_eq!(describe_days(0b001_0101), "mon,wed,fri");
        assert_eq!(describe_days(0b001_0111), "mon-wed,fri");
        assert_eq!(describe_days(0b100_0000), "sun");
        assert_eq!(describe_days(0b111_1111), "daily");
    }
}
