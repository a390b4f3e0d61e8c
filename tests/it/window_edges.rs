//! Wall-clock windows (SPEC §2.4 `wallClockWindow`): exact edges, midnight crossing, wrapping
//! day ranges, daylight-saving transitions in several zones, absolute intervals, compile errors,
//! and a property test against a naive reference.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use capgate::bytecode::window::CompiledWindow;
use capgate::compile::window::compile_window;
use capgate::span::Span;
use capgate::syntax::ast::{DaySet, DayWindow, Spanned, TimeOfDay, WindowSpec};
use chrono::{DateTime, Datelike, Duration, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use proptest::prelude::*;

const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// `mon-fri`, `fri-mon`, `sat`, `daily`, or comma lists of those.
fn day_set(text: &str) -> DaySet {
    let index = |d: &str| DAYS.iter().position(|n| *n == d).unwrap();
    let mut bits = 0u8;
    for part in text.split(',') {
        if part == "daily" {
            bits |= 0b111_1111;
        } else if let Some((a, b)) = part.split_once('-') {
            let (a, b) = (index(a), index(b));
            let mut i = a;
            loop {
                bits |= 1 << i;
                if i == b {
                    break;
                }
                i = (i + 1) % 7;
            }
        } else {
            bits |= 1 << index(part);
        }
    }
    DaySet(bits)
}

fn time(text: &str) -> TimeOfDay {
    let (h, m) = text.split_once(':').unwrap();
    TimeOfDay(h.parse::<u16>().unwrap() * 60 + m.parse::<u16>().unwrap())
}

fn spec(windows: &[(&str, &str, &str)], zone: &str) -> WindowSpec {
    WindowSpec::Weekly {
        windows: windows
            .iter()
            .map(|(days, start, end)| DayWindow {
                days: day_set(days),
                start: time(start),
                end: time(end),
                span: Span::default(),
            })
            .collect(),
        zone: Spanned::new(zone.to_owned(), Span::default()),
    }
}

fn window(days: &str, start: &str, end: &str, zone: &str) -> CompiledWindow {
    compile_window(&spec(&[(days, start, end)], zone)).unwrap()
}

fn absolute(from: &str, until: &str) -> WindowSpec {
    WindowSpec::Absolute {
        from: Spanned::new(DateTime::parse_from_rfc3339(from).unwrap(), Span::default()),
        until: Spanned::new(
            DateTime::parse_from_rfc3339(until).unwrap(),
            Span::default(),
        ),
    }
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn ns(n: i64) -> Duration {
    Duration::nanoseconds(n)
}

/// Minutes (sampled at each minute start) in `[from, until)` during which the window holds.
fn minutes_held(window: &CompiledWindow, from: &str, until: &str) -> i64 {
    let (mut t, end) = (at(from), at(until));
    let mut held = 0;
    while t < end {
        if window.contains(t) {
            held += 1;
        }
        t += Duration::minutes(1);
    }
    held
}

fn compile_error(spec: &WindowSpec) -> (String, Option<String>) {
    match compile_window(spec) {
        Ok(w) => panic!("should not compile: {w:?}"),
        Err(e) => (e.message, e.help),
    }
}

// ---------------------------------------------------------------- edges

#[test]
fn start_is_inside_and_one_nanosecond_before_is_outside() {
    let w = window("mon-fri", "09:00", "17:00", "UTC");
    // 2026-12-07 is a Monday.
    assert!(w.contains(at("2026-12-07T09:00:00Z")));
    assert!(!w.contains(at("2026-12-07T09:00:00Z") - ns(1)));
    assert!(w.contains(at("2026-12-07T09:00:00Z") + ns(1)));
}

#[test]
fn end_is_outside_and_one_nanosecond_before_is_inside() {
    let w = window("mon-fri", "09:00", "17:00", "UTC");
    assert!(w.contains(at("2026-12-07T16:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-07T17:00:00Z")));
    assert!(!w.contains(at("2026-12-07T17:00:00Z") + ns(1)));
}

#[test]
fn day_outside_the_set_is_outside() {
    let w = window("mon-fri", "09:00", "17:00", "UTC");
    assert!(!w.contains(at("2026-12-05T10:00:00Z"))); // Saturday
    assert!(!w.contains(at("2026-12-06T10:00:00Z"))); // Sunday
    assert!(w.contains(at("2026-12-11T10:00:00Z"))); // Friday
}

#[test]
fn whole_day_window_covers_midnight_to_midnight() {
    let w = window("mon", "00:00", "24:00", "UTC");
    assert!(w.contains(at("2026-12-07T00:00:00Z")));
    assert!(w.contains(at("2026-12-07T23:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-08T00:00:00Z")));
    assert!(!w.contains(at("2026-12-07T00:00:00Z") - ns(1)));
}

#[test]
fn daily_whole_day_window_always_holds() {
    let w = window("daily", "00:00", "24:00", "UTC");
    assert_eq!(
        minutes_held(&w, "2026-12-01T00:00:00Z", "2026-12-08T00:00:00Z"),
        7 * 1440
    );
}

#[test]
fn window_ending_at_24_00_holds_until_the_last_nanosecond() {
    let w = window("sat", "22:00", "24:00", "UTC");
    assert!(w.contains(at("2026-12-05T23:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-06T00:00:00Z")));
}

// ---------------------------------------------------------------- midnight crossing

#[test]
fn midnight_crossing_window_belongs_to_the_day_it_starts_on() {
    let w = window("fri", "22:00", "06:00", "UTC");
    // 2026-12-11 is a Friday.
    assert!(!w.contains(at("2026-12-11T22:00:00Z") - ns(1)));
    assert!(w.contains(at("2026-12-11T22:00:00Z")));
    assert!(w.contains(at("2026-12-12T00:00:00Z")));
    assert!(w.contains(at("2026-12-12T05:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-12T06:00:00Z")));
}

#[test]
fn midnight_crossing_window_does_not_hold_on_the_morning_of_its_start_day() {
    let w = window("fri", "22:00", "06:00", "UTC");
    assert!(!w.contains(at("2026-12-11T03:00:00Z"))); // Friday morning: Thursday not listed
    assert!(!w.contains(at("2026-12-12T22:30:00Z"))); // Saturday evening
}

#[test]
fn midnight_crossing_from_sunday_reaches_monday() {
    let w = window("sun", "22:00", "02:00", "UTC");
    assert!(w.contains(at("2026-12-06T23:00:00Z"))); // Sunday
    assert!(w.contains(at("2026-12-07T01:59:59Z"))); // Monday
    assert!(!w.contains(at("2026-12-07T02:00:00Z")));
}

#[test]
fn window_ending_at_midnight_covers_only_the_evening() {
    let w = window("fri", "22:00", "00:00", "UTC");
    assert!(w.contains(at("2026-12-11T23:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-12T00:00:00Z")));
}

#[test]
fn midnight_crossing_window_holds_eight_hours_per_listed_day() {
    let w = window("mon-fri", "22:00", "06:00", "UTC");
    assert_eq!(
        minutes_held(&w, "2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z"),
        5 * 8 * 60
    );
}

// ---------------------------------------------------------------- day ranges

#[test]
fn wrapping_day_range_covers_the_weekend() {
    let w = window("fri-mon", "09:00", "17:00", "UTC");
    for (day, inside) in [
        ("2026-12-07", true),  // mon
        ("2026-12-08", false), // tue
        ("2026-12-09", false), // wed
        ("2026-12-10", false), // thu
        ("2026-12-11", true),  // fri
        ("2026-12-12", true),  // sat
        ("2026-12-13", true),  // sun
    ] {
        assert_eq!(w.contains(at(&format!("{day}T12:00:00Z"))), inside, "{day}");
    }
}

#[test]
fn several_windows_hold_when_any_holds() {
    let w = compile_window(&spec(
        &[("mon", "09:00", "12:00"), ("mon", "13:00", "17:00")],
        "UTC",
    ))
    .unwrap();
    assert!(w.contains(at("2026-12-07T11:59:00Z")));
    assert!(!w.contains(at("2026-12-07T12:30:00Z")));
    assert!(w.contains(at("2026-12-07T13:00:00Z")));
}

// ---------------------------------------------------------------- zones and DST

#[test]
fn window_is_read_in_local_wall_time_across_dst_in_new_york() {
    let w = window("mon-fri", "09:00", "17:00", "America/New_York");
    // Friday 2026-03-06 is EST (UTC-5), Monday 2026-03-09 is EDT (UTC-4).
    assert!(w.contains(at("2026-03-06T14:00:00Z")));
    assert!(!w.contains(at("2026-03-06T13:59:59.999999999Z")));
    assert!(w.contains(at("2026-03-09T13:00:00Z")));
    assert!(!w.contains(at("2026-03-09T12:59:59.999999999Z")));
    assert!(!w.contains(at("2026-03-09T21:00:00Z")));
}

#[test]
fn new_york_spring_forward_day_has_23_hours() {
    let w = window("sun", "00:00", "24:00", "America/New_York");
    // 2026-03-08 local midnight is 05:00Z (EST); next midnight is 04:00Z (EDT).
    assert_eq!(
        minutes_held(&w, "2026-03-08T00:00:00Z", "2026-03-10T00:00:00Z"),
        23 * 60
    );
}

#[test]
fn new_york_window_inside_skipped_hour_never_holds() {
    let w = window("sun", "02:00", "03:00", "America/New_York");
    assert_eq!(
        minutes_held(&w, "2026-03-08T00:00:00Z", "2026-03-09T12:00:00Z"),
        0
    );
    // The following Sunday it holds for an hour again.
    assert_eq!(
        minutes_held(&w, "2026-03-15T00:00:00Z", "2026-03-16T00:00:00Z"),
        60
    );
}

#[test]
fn new_york_window_around_skipped_hour_loses_it() {
    let w = window("sun", "01:30", "03:30", "America/New_York");
    assert!(w.contains(at("2026-03-08T06:59:00Z"))); // 01:59 EST
    assert!(w.contains(at("2026-03-08T07:00:00Z"))); // 03:00 EDT
    assert!(!w.contains(at("2026-03-08T07:30:00Z"))); // 03:30 EDT
    assert_eq!(
        minutes_held(&w, "2026-03-08T00:00:00Z", "2026-03-09T00:00:00Z"),
        60
    );
}

#[test]
fn new_york_fall_back_day_has_25_hours() {
    let w = window("sun", "00:00", "24:00", "America/New_York");
    assert_eq!(
        minutes_held(&w, "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"),
        25 * 60
    );
}

#[test]
fn new_york_repeated_hour_holds_twice() {
    let w = window("sun", "01:00", "02:00", "America/New_York");
    assert!(w.contains(at("2026-11-01T05:30:00Z"))); // 01:30 EDT
    assert!(w.contains(at("2026-11-01T06:30:00Z"))); // 01:30 EST
    assert!(!w.contains(at("2026-11-01T07:00:00Z"))); // 02:00 EST
    assert_eq!(
        minutes_held(&w, "2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z"),
        120
    );
}

#[test]
fn berlin_skipped_hour_never_holds() {
    // 2026-03-29: 02:00 CET jumps to 03:00 CEST at 01:00Z.
    let w = window("sun", "02:00", "03:00", "Europe/Berlin");
    assert_eq!(
        minutes_held(&w, "2026-03-28T12:00:00Z", "2026-03-30T00:00:00Z"),
        0
    );
    assert!(!w.contains(at("2026-03-29T01:00:00Z") - ns(1))); // 01:59:59.999999999 CET
    let whole = window("sun", "00:00", "24:00", "Europe/Berlin");
    assert_eq!(
        minutes_held(&whole, "2026-03-28T12:00:00Z", "2026-03-30T00:00:00Z"),
        23 * 60
    );
}

#[test]
fn berlin_repeated_hour_holds_twice() {
    // 2026-10-25: 03:00 CEST falls back to 02:00 CET at 01:00Z.
    let w = window("sun", "02:00", "03:00", "Europe/Berlin");
    assert!(w.contains(at("2026-10-25T00:00:00Z"))); // 02:00 CEST
    assert!(w.contains(at("2026-10-25T01:59:59.999999999Z"))); // 02:59:59.999999999 CET
    assert!(!w.contains(at("2026-10-25T02:00:00Z"))); // 03:00 CET
    assert_eq!(
        minutes_held(&w, "2026-10-24T12:00:00Z", "2026-10-26T00:00:00Z"),
        120
    );
}

#[test]
fn lord_howe_half_hour_gap_never_holds() {
    // 2026-10-04: 02:00 (+10:30) jumps to 02:30 (+11:00) at 15:30Z on 2026-10-03.
    let w = window("sun", "02:00", "02:30", "Australia/Lord_Howe");
    assert_eq!(
        minutes_held(&w, "2026-10-03T00:00:00Z", "2026-10-05T00:00:00Z"),
        0
    );
    assert!(!w.contains(at("2026-10-03T15:30:00Z") - ns(1)));
    assert!(!w.contains(at("2026-10-03T15:30:00Z")));
    let whole = window("sun", "00:00", "24:00", "Australia/Lord_Howe");
    assert_eq!(
        minutes_held(&whole, "2026-10-03T00:00:00Z", "2026-10-05T00:00:00Z"),
        1410
    );
}

#[test]
fn lord_howe_half_hour_repeat_holds_twice() {
    // 2026-04-05: 02:00 (+11:00) falls back to 01:30 (+10:30) at 15:00Z on 2026-04-04.
    let w = window("sun", "01:30", "02:00", "Australia/Lord_Howe");
    assert!(w.contains(at("2026-04-04T14:30:00Z")));
    assert!(w.contains(at("2026-04-04T15:29:59.999999999Z")));
    assert!(!w.contains(at("2026-04-04T15:30:00Z")));
    assert_eq!(
        minutes_held(&w, "2026-04-04T00:00:00Z", "2026-04-06T00:00:00Z"),
        60
    );
}

#[test]
fn chatham_skipped_hour_never_holds() {
    // 2026-09-27: 02:45 (+12:45) jumps to 03:45 (+13:45) at 14:00Z on 2026-09-26.
    let w = window("sun", "02:45", "03:45", "Pacific/Chatham");
    assert_eq!(
        minutes_held(&w, "2026-09-26T00:00:00Z", "2026-09-28T00:00:00Z"),
        0
    );
    let around = window("sun", "02:00", "04:00", "Pacific/Chatham");
    assert_eq!(
        minutes_held(&around, "2026-09-26T00:00:00Z", "2026-09-28T00:00:00Z"),
        60
    );
}

#[test]
fn chatham_repeated_hour_holds_twice() {
    // 2026-04-05: 03:45 (+13:45) falls back to 02:45 (+12:45) at 14:00Z on 2026-04-04.
    let w = window("sun", "02:45", "03:45", "Pacific/Chatham");
    assert!(w.contains(at("2026-04-04T13:00:00Z")));
    assert!(w.contains(at("2026-04-04T14:59:59.999999999Z")));
    assert!(!w.contains(at("2026-04-04T15:00:00Z")));
    assert!(!w.contains(at("2026-04-04T13:00:00Z") - ns(1)));
    assert_eq!(
        minutes_held(&w, "2026-04-04T00:00:00Z", "2026-04-06T00:00:00Z"),
        120
    );
}

#[test]
fn kolkata_half_hour_offset_shifts_the_edges() {
    let w = window("mon-fri", "09:00", "17:00", "Asia/Kolkata");
    // Monday 09:00 IST is 03:30Z; 17:00 IST is 11:30Z.
    assert!(w.contains(at("2026-12-07T03:30:00Z")));
    assert!(!w.contains(at("2026-12-07T03:30:00Z") - ns(1)));
    assert!(w.contains(at("2026-12-07T11:29:59.999999999Z")));
    assert!(!w.contains(at("2026-12-07T11:30:00Z")));
    // Sunday 22:00Z is already Monday 03:30 IST: outside, but the weekday is Monday's.
    assert!(!w.contains(at("2026-12-06T22:00:00Z")));
    let monday = window("mon", "03:00", "04:00", "Asia/Kolkata");
    assert!(monday.contains(at("2026-12-06T22:00:00Z")));
}

// ---------------------------------------------------------------- absolute intervals

#[test]
fn absolute_interval_is_half_open() {
    let w = compile_window(&absolute("2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z")).unwrap();
    assert!(w.contains(at("2026-12-01T00:00:00Z")));
    assert!(!w.contains(at("2026-12-01T00:00:00Z") - ns(1)));
    assert!(w.contains(at("2026-12-01T23:59:59.999999999Z")));
    assert!(!w.contains(at("2026-12-02T00:00:00Z")));
}

#[test]
fn absolute_interval_honours_written_offsets() {
    let w = compile_window(&absolute(
        "2026-12-01T09:00:00+05:30",
        "2026-12-01T17:00:00+05:30",
    ))
    .unwrap();
    assert!(w.contains(at("2026-12-01T03:30:00Z")));
    assert!(!w.contains(at("2026-12-01T03:29:59.999999999Z")));
    assert!(!w.contains(at("2026-12-01T11:30:00Z")));
    assert_eq!(w.zone_name(), None);
}

// ---------------------------------------------------------------- compile errors

#[test]
fn unknown_zone_is_an_error_with_a_suggestion() {
    let (message, help) = compile_error(&spec(&[("mon", "09:00", "17:00")], "America/New_Yrok"));
    assert_eq!(message, "unknown time zone `America/New_Yrok`");
    assert_eq!(help.as_deref(), Some("did you mean `America/New_York`?"));
}

#[test]
fn zone_names_are_case_sensitive() {
    let (message, help) = compile_error(&spec(&[("mon", "09:00", "17:00")], "europe/berlin"));
    assert_eq!(message, "unknown time zone `europe/berlin`");
    assert_eq!(help.as_deref(), Some("did you mean `Europe/Berlin`?"));
}

#[test]
fn window_starting_where_it_ends_is_an_error() {
    let (message, help) = compile_error(&spec(&[("mon", "09:00", "09:00")], "UTC"));
    assert_eq!(message, "window `09:00-09:00` starts where it ends");
    assert!(help.unwrap().contains("00:00-24:00"));
    compile_error(&spec(&[("mon", "00:00", "00:00")], "UTC"));
}

#[test]
fn times_beyond_24_00_are_errors() {
    let beyond = WindowSpec::Weekly {
        windows: vec![DayWindow {
            days: DaySet::DAILY,
            start: TimeOfDay(60),
            end: TimeOfDay(1441),
            span: Span::default(),
        }],
        zone: Spanned::new("UTC".to_owned(), Span::default()),
    };
    assert_eq!(
        compile_error(&beyond).0,
        "window end `24:01` is beyond 24:00"
    );
    compile_error(&spec(&[("mon", "24:00", "06:00")], "UTC"));
}

#[test]
fn empty_day_set_is_an_error() {
    let empty = WindowSpec::Weekly {
        windows: vec![DayWindow {
            days: DaySet(0),
            start: TimeOfDay(60),
            end: TimeOfDay(120),
            span: Span::default(),
        }],
        zone: Spanned::new("UTC".to_owned(), Span::default()),
    };
    assert_eq!(compile_error(&empty).0, "window has no days");
}

#[test]
fn no_windows_is_an_error() {
    compile_error(&spec(&[], "UTC"));
}

#[test]
fn absolute_from_not_before_until_is_an_error() {
    compile_error(&absolute("2026-12-02T00:00:00Z", "2026-12-01T00:00:00Z"));
    // Equal instants written with different offsets are still empty.
    compile_error(&absolute(
        "2026-12-01T05:30:00+05:30",
        "2026-12-01T00:00:00Z",
    ));
}

// ---------------------------------------------------------------- messages

#[test]
fn describe_renders_the_window_as_written() {
    assert_eq!(
        window("mon-fri", "09:00", "17:00", "America/New_York").describe(),
        "mon-fri 09:00-17:00 America/New_York"
    );
    let several = compile_window(&spec(
        &[("fri-mon", "22:00", "06:00"), ("daily", "00:00", "24:00")],
        "UTC",
    ))
    .unwrap();
    assert_eq!(
        several.describe(),
        "fri-mon 22:00-06:00, daily 00:00-24:00 UTC"
    );
    let abs = compile_window(&absolute(
        "2026-12-01T00:00:00Z",
        "2026-12-02T00:00:00+01:00",
    ))
    .unwrap();
    assert_eq!(
        abs.describe(),
        "from 2026-12-01T00:00:00Z until 2026-12-02T00:00:00+01:00"
    );
}

#[test]
fn describe_instant_shows_local_time_and_offset() {
    let w = window("mon-fri", "09:00", "17:00", "America/New_York");
    assert_eq!(
        w.describe_instant(at("2026-12-05T15:15:00Z")),
        "sat 10:15 America/New_York (UTC-05:00)"
    );
    // The repeated hour is told apart by its offset.
    assert_eq!(
        w.describe_instant(at("2026-11-01T05:30:00Z")),
        "sun 01:30 America/New_York (UTC-04:00)"
    );
    assert_eq!(
        w.describe_instant(at("2026-11-01T06:30:00Z")),
        "sun 01:30 America/New_York (UTC-05:00)"
    );
    assert_eq!(w.zone_name(), Some("America/New_York"));
}

// ---------------------------------------------------------------- property

/// The reference: lay each candidate occurrence out as a local naive-datetime interval
/// `[day + start, day + end)` (end on the next day when it crosses midnight) for the local day
/// and the day before, and check the local wall time against it.
fn reference_contains(days: u8, start: u16, end: u16, zone: Tz, instant: DateTime<Utc>) -> bool {
    let local = instant.with_timezone(&zone).naive_local();
    let today = local.date();
    [today, today.pred_opt().unwrap()].into_iter().any(|day| {
        let weekday = day.weekday().num_days_from_monday();
        if days & (1 << weekday) == 0 {
            return false;
        }
        let midnight = day.and_time(NaiveTime::MIN);
        let open = midnight + Duration::minutes(i64::from(start));
        let close = if end > start {
            midnight + Duration::minutes(i64::from(end))
        } else {
            midnight + Duration::days(1) + Duration::minutes(i64::from(end))
        };
        open <= local && local < close
    })
}

const ZONES: [&str; 8] = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "America/Santiago",
    "Pacific/Kiritimati",
];

proptest! {
    #[test]
    fn contains_agrees_with_a_naive_reference(
        days in 1u8..128,
        start in 0u16..1440,
        end in 0u16..=1440,
        zone in prop::sample::select(ZONES.to_vec()),
        seconds in 1_577_836_800i64..1_893_456_000, // 2020..2030
        nanos in prop::sample::select(vec![0u32, 1, 999_999_999, 500_000_000]),
    ) {
        prop_assume!(start != end);
        let compiled = compile_window(&WindowSpec::Weekly {
            windows: vec![DayWindow {
                days: DaySet(days),
                start: TimeOfDay(start),
                end: TimeOfDay(end),
                span: Span::default(),
            }],
            zone: Spanned::new(zone.to_owned(), Span::default()),
        })
        .unwrap();
        let instant = Utc.timestamp_opt(seconds, nanos).unwrap();
        let tz: Tz = zone.parse().unwrap();
        prop_assert_eq!(
            compiled.contains(instant),
            reference_contains(days, start, end, tz, instant),
            "{} at {}", compiled.describe(), instant
        );
        // The edges themselves, seen from the window's own day.
        let edge = instant.with_timezone(&tz).date_naive().and_time(NaiveTime::MIN)
            + Duration::minutes(i64::from(start));
        if let Some(edge) = tz.from_local_datetime(&edge).earliest() {
            let edge = edge.with_timezone(&Utc);
            for t in [edge - Duration::nanoseconds(1), edge, edge + Duration::nanoseconds(1)] {
                prop_assert_eq!(compiled.contains(t), reference_contains(days, start, end, tz, t));
            }
        }
    }
}

#[test]
fn compiled_window_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CompiledWindow>();
}
