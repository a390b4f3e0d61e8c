//! Instants and durations as capgate reads and writes them: RFC 3339 timestamps kept to the
//! nanosecond, exact nanosecond arithmetic, and the duration syntax of the language (`30s`,
//! `2h`, `1d`).

use chrono::{DateTime, Utc};

/// Parses an RFC 3339 timestamp. RFC 3339 allows any number of fraction digits; an instant is
/// kept to the nanosecond, so a fraction with a non-zero digit past the ninth is refused
/// (`None`) rather than cut off, which would move it earlier (regression: `12:00:00.0000000001`
/// read as `12:00:00`, so `end - start <= 2h` held for an end just past two hours).
pub fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    let fraction = text.split_once('.').map_or("", |(_, rest)| rest);
    let digits = fraction.bytes().take_while(u8::is_ascii_digit);
    if digits.skip(9).any(|digit| digit != b'0') {
        return None;
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Nanoseconds since the epoch, exactly.
pub(crate) fn nanos(t: DateTime<Utc>) -> i128 {
    i128::from(t.timestamp()) * 1_000_000_000 + i128::from(t.timestamp_subsec_nanos())
}

/// Formats signed nanoseconds as a readable duration (`2h0m1s`, `-30s`, `1.5s`).
pub(crate) fn format_nanos(d: i128) -> String {
    let sign = if d < 0 { "-" } else { "" };
    let d = d.unsigned_abs();
    let secs = d / 1_000_000_000;
    let frac = d % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut text = String::from(sign);
    if h > 0 {
        text.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        text.push_str(&format!("{m}m"));
    }
    if frac == 0 {
        text.push_str(&format!("{s}s"));
    } else {
        let frac = format!("{frac:09}");
        text.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    }
    text
}

/// Parses a duration such as `500ms`, `30s`, `10m`, `2h` or `1d`.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    crate::syntax::units::parse_duration(text).map(crate::syntax::ast::Duration::to_std)
}
