//! Lexical forms shared by both front ends.
//!
//! - [`parse_duration`]: `500ms`, `30s`, `10m`, `2h`, `1d` → [`Duration`]; the parsers the
//!   front ends use besides (crate-private) read `second|minute|hour|day`, day sets (`mon`,
//!   `mon-fri`, wrapping `fri-mon`, `daily`) and times of day (`HH:MM`, `24:00` allowed).
//! - [`format_duration`], [`format_days`] and [`format_time_of_day`] write them back as the
//!   formatter prints them.
//!
//! Each parser returns a one-line error message (without a span; the caller attaches one).

use super::ast::{DaySet, Duration, TimeOfDay};

const NANOS_PER_MS: u64 = 1_000_000;
const NANOS_PER_S: u64 = 1_000_000_000;

/// Parses `<digits><unit>` with unit `ms|s|m|h|d`, or several such parts in decreasing unit
/// order (`1h30m`, `11m59s`, `1s500ms`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    const UNITS: [(&str, u64); 5] = [
        ("d", 86_400 * NANOS_PER_S),
        ("h", 3_600 * NANOS_PER_S),
        ("m", 60 * NANOS_PER_S),
        ("s", NANOS_PER_S),
        ("ms", NANOS_PER_MS),
    ];
    let expected = || {
        format!("invalid duration `{text}`: expected a whole number followed by ms, s, m, h or d")
    };
    let mut rest = text;
    let mut total: u64 = 0;
    // Index into UNITS of the last unit used: later parts must use smaller units.
    let mut last_unit: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, after) = rest.split_at_checked(digits).ok_or_else(expected)?;
        if number.is_empty() {
            return Err(expected());
        }
        let letters = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, tail) = after.split_at_checked(letters).ok_or_else(expected)?;
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            // Name what follows the number, even when it is not a word (`2 h`).
            let shown = if unit.is_empty() { after } else { unit };
            return Err(format!(
                "invalid duration `{text}`: unknown unit `{shown}`, expected ms, s, m, h or d"
            ));
        };
        if last_unit.is_some_and(|last| index <= last) {
            return Err(format!(
                "invalid duration `{text}`: write the parts from the largest unit down, each once"
            ));
        }
        last_unit = Some(index);
        let per_unit = UNITS.get(index).map_or(0, |(_, n)| *n);
        let value: u64 = number
            .parse()
            .map_err(|_| format!("invalid duration `{text}`: number too large"))?;
        total = value
            .checked_mul(per_unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("invalid duration `{text}`: too long"))?;
        rest = tail;
    }
    if last_unit.is_none() {
        return Err(expected());
    }
    Ok(Duration { nanos: total })
}

/// The duration a newcomer most likely meant by `text` — `2 hours`, `2hr`, `1 hour 30 mins`,
/// `500 msec` → `2h`, `2h`, `1h30m`, `500ms` — when that is not what was written and it parses;
/// for a "did you mean" hint. Unit names are matched in full (`hours`, `hrs`, `hr`, `h`), never
/// by edit distance, so a hint never guesses between `m` and `ms`.
pub(crate) fn suggest_duration(text: &str) -> Option<String> {
    let (suggested, rest) = leading_duration_words(text)?;
    if !rest.trim().is_empty() || suggested == text {
        return None;
    }
    Some(suggested)
}

/// [`suggest_duration`] for the start of `text`: the duration written as words at its start
/// (`2 hours burst 3` → `2h`), with what follows; for the parser, which stops at the `2`.
pub(crate) fn leading_duration_words(text: &str) -> Option<(String, &str)> {
    const ALIASES: [(&str, &[&str]); 5] = [
        ("d", &["d", "day", "days"]),
        ("h", &["h", "hr", "hrs", "hour", "hours"]),
        ("m", &["m", "min", "mins", "minute", "minutes"]),
        ("s", &["s", "sec", "secs", "second", "seconds"]),
        (
            "ms",
            &["ms", "msec", "msecs", "millisecond", "milliseconds"],
        ),
    ];
    let mut out = String::new();
    let mut rest = text;
    loop {
        let after_space = rest.trim_start_matches([' ', '\t']);
        let digits = after_space.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        let (number, after) = after_space.split_at_checked(digits)?;
        let after = after.trim_start_matches([' ', '\t']);
        let letters = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (word, tail) = after.split_at_checked(letters)?;
        let lower = word.to_ascii_lowercase();
        let (unit, _) = ALIASES
            .iter()
            .find(|(_, names)| names.contains(&lower.as_str()))?;
        out.push_str(number);
        out.push_str(unit);
        rest = tail;
    }
    if out.is_empty() || parse_duration(&out).is_err() {
        return None;
    }
    Some((out, rest))
}

/// Parses a `per` unit name (`second`, `minute`, `hour`, `day`).
pub(crate) fn parse_rate_unit(text: &str) -> Option<Duration> {
    let seconds = match text {
        "second" => 1,
        "minute" => 60,
        "hour" => 3_600,
        "day" => 86_400,
        _ => return None,
    };
    Some(Duration {
        nanos: seconds * NANOS_PER_S,
    })
}

/// The index (0 = Monday) of a three-letter day name.
pub(crate) fn day_index(name: &str) -> Option<u8> {
    DaySet::NAMES
        .iter()
        .position(|d| *d == name)
        .and_then(|i| u8::try_from(i).ok())
}

/// Parses `daily`, a day name, or a range `a-b` (wrapping past Sunday when `b` comes before `a`).
pub(crate) fn parse_days(text: &str) -> Result<DaySet, String> {
    if text == "daily" {
        return Ok(DaySet::DAILY);
    }
    let unknown = |name: &str| {
        format!("unknown day `{name}`: expected mon, tue, wed, thu, fri, sat, sun or daily")
    };
    match text.split_once('-') {
        None => {
            let day = day_index(text).ok_or_else(|| unknown(text))?;
            Ok(DaySet(1 << day))
        }
        Some((from, to)) => {
            let from = day_index(from).ok_or_else(|| unknown(from))?;
            let to = day_index(to).ok_or_else(|| unknown(to))?;
            let mut bits = 0u8;
            let mut day = from;
            loop {
                bits |= 1 << day;
                if day == to {
                    break;
                }
                day = (day + 1) % 7;
            }
            Ok(DaySet(bits))
        }
    }
}

/// Parses `HH:MM` (two digits each); `24:00` is the end of the day.
pub(crate) fn parse_time_of_day(text: &str) -> Result<TimeOfDay, String> {
    let bad = || format!("invalid time `{text}`: expected HH:MM between 00:00 and 24:00");
    let bytes = text.as_bytes();
    if bytes.len() != 5 || bytes.get(2) != Some(&b':') {
        return Err(bad());
    }
    let hours: u16 = text
        .get(0..2)
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let minutes: u16 = text
        .get(3..5)
        .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    if minutes > 59 || hours > 24 || (hours == 24 && minutes != 0) {
        return Err(bad());
    }
    Ok(TimeOfDay(hours * 60 + minutes))
}

/// Formats a time of day back as `HH:MM`.
pub fn format_time_of_day(time: TimeOfDay) -> String {
    format!("{:02}:{:02}", time.0 / 60, time.0 % 60)
}

/// Formats a duration in the largest unit that divides it exactly (`2h`, `90s`, `500ms`); zero
/// is `0s` (every unit divides it, and `0d` reads as a mistake).
pub fn format_duration(duration: Duration) -> String {
    if duration.nanos == 0 {
        return "0s".to_owned();
    }
    const UNITS: [(u64, &str); 5] = [
        (86_400 * NANOS_PER_S, "d"),
        (3_600 * NANOS_PER_S, "h"),
        (60 * NANOS_PER_S, "m"),
        (NANOS_PER_S, "s"),
        (NANOS_PER_MS, "ms"),
    ];
    for (size, unit) in UNITS {
        if duration.nanos.is_multiple_of(size) {
            return format!("{}{unit}", duration.nanos / size);
        }
    }
    format!("{}ns", duration.nanos)
}

/// Formats a day set as the shortest day-range text (`daily`, `mon-fri`, `sat`), or names
/// joined with `,` when the set is not one range.
pub fn format_days(days: DaySet) -> String {
    if days == DaySet::DAILY {
        return "daily".to_owned();
    }
    // Find a start day such that the set is one contiguous (wrapping) run.
    for start in 0..7u32 {
        if !days.contains(start) || days.contains((start + 6) % 7) {
            continue;
        }
        let mut len = 0;
        while len < 7 && days.contains((start + len) % 7) {
            len += 1;
        }
        if len == days.0.count_ones() {
            let name = |i: u32| DaySet::NAMES.get(i as usize).copied().unwrap_or("?");
            return if len == 1 {
                name(start).to_owned()
            } else {
                format!("{}-{}", name(start), name((start + len - 1) % 7))
            };
        }
    }
    DaySet::NAMES
        .iter()
        .enumerate()
        .filter(|(i, _)| days.contains(u32::try_from(*i).unwrap_or(7)))
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_duration_prints_as_0s() {
        assert_eq!(format_duration(Duration { nanos: 0 }), "0s");
        for text in ["0s", "0ms", "0d", "0h0m"] {
            assert_eq!(
                format_duration(parse_duration(text).unwrap()),
                "0s",
                "{text}"
            );
        }
        assert_eq!(format_duration(parse_duration("1h30m").unwrap()), "90m");
    }

    #[test]
    fn durations_written_as_words_suggest_the_duration_meant() {
        for (written, meant) in [
            ("2 hours", "2h"),
            ("2hr", "2h"),
            ("2 HRS", "2h"),
            ("1 hour 30 mins", "1h30m"),
            ("90 seconds", "90s"),
            ("500 msec", "500ms"),
            ("1 day", "1d"),
            ("2 h", "2h"),
        ] {
            assert_eq!(
                suggest_duration(written).as_deref(),
                Some(meant),
                "{written}"
            );
        }
        // Nothing to suggest: already a duration, an unknown unit, units in the wrong order.
        for written in ["2h", "2 fortnights", "30m 1h", "hours", "2 hours extra"] {
            assert_eq!(suggest_duration(written), None, "{written}");
        }
        assert_eq!(
            leading_duration_words("2 hours burst 3"),
            Some(("2h".to_owned(), " burst 3"))
        );
    }

    #[test]
    fn durations_parse_in_every_unit() {
        assert_eq!(parse_duration("500ms").unwrap().nanos, 500_000_000);
        assert_eq!(parse_duration("30s").unwrap().nanos, 30_000_000_000);
        assert_eq!(parse_duration("10m").unwrap().nanos, 600_000_000_000);
        assert_eq!(
            parse_duration("2h").unwrap(),
            Duration {
                nanos: 7_200_000_000_000
            }
        );
        assert_eq!(parse_duration("1d").unwrap().nanos, 86_400_000_000_000);
        for bad in [
            "",
            "10",
            "h",
            "1.5h",
            "10x",
            "-1s",
            "99999999999999999999d",
            "300000d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn compound_durations_add_up_from_the_largest_unit_down() {
        assert_eq!(parse_duration("1h30m").unwrap().nanos, 5_400_000_000_000);
        assert_eq!(parse_duration("11m59s").unwrap().nanos, 719_000_000_000);
        assert_eq!(parse_duration("1s500ms").unwrap().nanos, 1_500_000_000);
        assert_eq!(parse_duration("1d0h").unwrap().nanos, 86_400_000_000_000);
    }

    #[test]
    fn day_ranges_wrap_past_sunday() {
        assert_eq!(parse_days("mon-fri").unwrap(), DaySet(0b001_1111));
        assert_eq!(parse_days("fri-mon").unwrap(), DaySet(0b111_0001));
        assert_eq!(parse_days("sun").unwrap(), DaySet(0b100_0000));
        assert_eq!(parse_days("daily").unwrap(), DaySet::DAILY);
        assert!(parse_days("monday").is_err());
        assert!(parse_days("mon-").is_err());
    }

    #[test]
    fn times_of_day_allow_24_00_only_as_end_of_day() {
        assert_eq!(parse_time_of_day("00:00").unwrap(), TimeOfDay(0));
        assert_eq!(parse_time_of_day("24:00").unwrap(), TimeOfDay(1440));
        assert_eq!(parse_time_of_day("17:30").unwrap(), TimeOfDay(1050));
        for bad in ["24:01", "9:00", "09:60", "25:00", "09-00", "+1:00"] {
            assert!(parse_time_of_day(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for text in ["mon-fri", "fri-mon", "sat", "daily", "sun-mon"] {
            assert_eq!(format_days(parse_days(text).unwrap()), text);
        }
        for text in ["2h", "90s", "500ms", "1d", "10m"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
        assert_eq!(format_time_of_day(TimeOfDay(1050)), "17:30");
    }
}
