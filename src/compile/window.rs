//! Compiling a `wallClockWindow` (SPEC §2.4) from the syntax tree into a
//! [`CompiledWindow`]: the zone resolved (with a suggestion for a misspelt one), and windows
//! that are empty, ambiguous or out of range refused with a [`WindowError`].

use chrono::Utc;
use chrono_tz::Tz;
use thiserror::Error;

use crate::bytecode::window::{CompiledWindow, DayInterval, MINUTES_PER_DAY, WindowRule, clock};
use crate::span::Span;
use crate::syntax::ast::{DayWindow, WindowSpec};

/// A window that cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Error, miette::Diagnostic)]
#[error("{message}")]
pub struct WindowError {
    /// What is wrong, one lowercase line.
    pub message: String,
    /// How to fix it, when there is something useful to say.
    #[help]
    pub help: Option<String>,
    /// The window, zone or interval at fault.
    pub span: Span,
}

impl WindowError {
    fn new(message: impl Into<String>, help: Option<String>, span: Span) -> Self {
        WindowError {
            message: message.into(),
            help,
            span,
        }
    }
}

/// Compiles a window specification, resolving its zone.
pub fn compile_window(spec: &WindowSpec) -> Result<CompiledWindow, WindowError> {
    let rule = match spec {
        WindowSpec::Weekly { windows, zone } => {
            let tz = resolve_zone(&zone.node, zone.span)?;
            if windows.is_empty() {
                return Err(WindowError::new(
                    "wallClockWindow has no windows",
                    Some("write at least one window, e.g. `mon-fri 09:00-17:00`".to_owned()),
                    zone.span,
                ));
            }
            let windows = windows
                .iter()
                .map(compile_day_window)
                .collect::<Result<Vec<_>, _>>()?;
            WindowRule::Weekly { windows, zone: tz }
        }
        WindowSpec::Absolute { from, until } => {
            if from.node >= until.node {
                return Err(WindowError::new(
                    format!(
                        "`from {}` is not before `until {}`",
                        from.node.to_rfc3339(),
                        until.node.to_rfc3339()
                    ),
                    Some("the interval is half-open: `from` is inside, `until` is not".to_owned()),
                    from.span.to(until.span),
                ));
            }
            WindowRule::Absolute {
                from: from.node,
                until: until.node,
                from_utc: from.node.with_timezone(&Utc),
                until_utc: until.node.with_timezone(&Utc),
            }
        }
    };
    Ok(CompiledWindow { rule })
}

fn compile_day_window(window: &DayWindow) -> Result<DayInterval, WindowError> {
    let span = window.span;
    let days = window.days.0 & 0b111_1111;
    if days == 0 || window.days.0 != days {
        return Err(WindowError::new("window has no days", None, span));
    }
    let (start, end) = (window.start.0, window.end.0);
    for (what, minutes) in [("start", start), ("end", end)] {
        if minutes > MINUTES_PER_DAY {
            return Err(WindowError::new(
                format!("window {what} `{}` is beyond 24:00", clock(minutes)),
                None,
                span,
            ));
        }
    }
    if start == MINUTES_PER_DAY {
        return Err(WindowError::new(
            "window starts at `24:00`",
            Some(
                "a window that starts at midnight is written `00:00-...` on the next day"
                    .to_owned(),
            ),
            span,
        ));
    }
    if start == end {
        return Err(WindowError::new(
            format!(
                "window `{}-{}` starts where it ends",
                clock(start),
                clock(end)
            ),
            Some("write `00:00-24:00` for a whole day".to_owned()),
            span,
        ));
    }
    // INVARIANT (day-window): checked above.
    Ok(DayInterval { days, start, end })
}

fn resolve_zone(name: &str, span: Span) -> Result<Tz, WindowError> {
    if let Ok(tz) = name.parse::<Tz>() {
        return Ok(tz);
    }
    let help = closest_zone(name).map(|z| format!("did you mean `{z}`?"));
    Err(WindowError::new(
        format!("unknown time zone `{name}`"),
        help.or_else(|| Some("use an IANA zone name such as `Europe/Berlin`".to_owned())),
        span,
    ))
}

/// The known zone name nearest to `name` by edit distance (case-insensitive), if close enough.
fn closest_zone(name: &str) -> Option<&'static str> {
    let wanted = name.to_ascii_lowercase();
    chrono_tz::TZ_VARIANTS
        .iter()
        .map(|tz| {
            let candidate = tz.name();
            (
                edit_distance(&wanted, &candidate.to_ascii_lowercase()),
                candidate,
            )
        })
        .filter(|(distance, _)| *distance <= 3.max(wanted.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len().saturating_add(1)];
    for (i, ca) in a.bytes().enumerate() {
        if let Some(first) = current.first_mut() {
            *first = i.saturating_add(1);
        }
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous
                .get(j)
                .map_or(usize::MAX, |d| d.saturating_add(usize::from(ca != *cb)));
            let delete = previous
                .get(j.saturating_add(1))
                .map_or(usize::MAX, |d| d.saturating_add(1));
            let insert = current.get(j).map_or(usize::MAX, |d| d.saturating_add(1));
            if let Some(cell) = current.get_mut(j.saturating_add(1)) {
                *cell = substitute.min(delete).min(insert);
            }
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous.last().copied().unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_zone_suggests_the_canonical_spelling() {
        assert_eq!(closest_zone("america/new_york"), Some("America/New_York"));
        assert_eq!(closest_zone("Europe/Berlln"), Some("Europe/Berlin"));
        assert_eq!(closest_zone("Nowhere/Special_Place_Far_Away"), None);
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("abc", "abc"), 0);
    }
}
