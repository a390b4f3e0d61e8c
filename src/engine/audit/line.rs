//! One [`AuditRecord`] as JSON, written field by field.
//!
//! The output is byte for byte what `serde_json` makes of the record's derived `Serialize`
//! (`the_line_is_what_serde_json_writes`, a property test over every field but `reasons`, which
//! are handed to serde_json itself and varied only as none or one); only the work differs.
//! serde_json escapes every key and value a byte at a time (that loop is 15 % of an audited
//! decision's samples when serde_json writes the record); here the fixed keys are copied as
//! they are, a value with nothing to escape — every value an engine usually records — is copied
//! between quotes, and anything else goes to serde_json's own string escaping
//! (`value::write_json_str`), so the two can never disagree on how a string is escaped.

use std::io::Write;

use chrono::format::{Fixed, Item};
use chrono::{DateTime, Datelike, Timelike, Utc};

use super::AuditRecord;
use crate::value::write_json_str;

/// RFC 3339 as `DateTime::to_rfc3339` writes it (seconds' fraction only when not zero).
const RFC3339: [Item<'static>; 1] = [Item::Fixed(Fixed::RFC3339)];

/// Appends `record` as one JSON object (no newline).
pub(super) fn write(line: &mut Vec<u8>, record: &AuditRecord<'_>) -> serde_json::Result<()> {
    line.extend_from_slice(b"{\"time\":\"");
    time(line, &record.time)?;
    line.extend_from_slice(b"\",\"decision\":\"");
    line.extend_from_slice(record.decision.as_str().as_bytes());
    line.push(b'"');
    if let Some(observed) = record.observed {
        line.extend_from_slice(b",\"observed\":\"");
        line.extend_from_slice(observed.as_str().as_bytes());
        line.push(b'"');
    }
    line.extend_from_slice(b",\"skill\":");
    write_json_str(line, record.skill)?;
    line.extend_from_slice(b",\"capability\":");
    optional(line, record.capability)?;
    line.extend_from_slice(b",\"operation\":");
    write_json_str(line, record.operation)?;
    line.extend_from_slice(b",\"resource\":");
    write_json_str(line, record.resource)?;
    line.extend_from_slice(b",\"agent\":");
    optional(line, record.agent)?;
    line.extend_from_slice(b",\"transaction\":");
    optional(line, record.transaction)?;
    line.extend_from_slice(b",\"grant\":");
    optional(line, record.grant)?;
    line.extend_from_slice(b",\"reasons\":");
    if record.reasons.is_empty() {
        line.extend_from_slice(b"[]");
    } else {
        serde_json::to_writer(&mut *line, record.reasons)?;
    }
    line.extend_from_slice(b",\"revision\":");
    match record.revision {
        None => line.extend_from_slice(b"null"),
        Some(revision) => {
            line.push(b'"');
            line.extend_from_slice(&revision.text());
            line.push(b'"');
        }
    }
    line.push(b'}');
    Ok(())
}

/// `time` in RFC 3339 (digits, `-`, `:`, `T`, `.` and `+`: nothing to escape). Years of four
/// digits outside leap seconds are written here; chrono writes the rest (signed or longer years,
/// a leap second's `:60`).
fn time(line: &mut Vec<u8>, time: &DateTime<Utc>) -> serde_json::Result<()> {
    let (year, nanos) = (time.year(), time.nanosecond());
    let (Ok(year @ 0..=9999), 0..=999_999_999) = (u32::try_from(year), nanos) else {
        // Writing into a `Vec` cannot fail.
        return write!(line, "{}", time.format_with_items(RFC3339.iter()))
            .map_err(serde_json::Error::io);
    };
    digits(line, year, 4);
    line.push(b'-');
    digits(line, time.month(), 2);
    line.push(b'-');
    digits(line, time.day(), 2);
    line.push(b'T');
    digits(line, time.hour(), 2);
    line.push(b':');
    digits(line, time.minute(), 2);
    line.push(b':');
    digits(line, time.second(), 2);
    // As many fraction digits as the value needs: none, 3, 6 or 9 (chrono's `AutoSi`).
    if nanos != 0 {
        line.push(b'.');
        if nanos % 1_000_000 == 0 {
            digits(line, nanos / 1_000_000, 3);
        } else if nanos % 1_000 == 0 {
            digits(line, nanos / 1_000, 6);
        } else {
            digits(line, nanos, 9);
        }
    }
    line.extend_from_slice(b"+00:00");
    Ok(())
}

/// The last `width` decimal digits of `value`, zero-padded.
fn digits(line: &mut Vec<u8>, value: u32, width: u32) {
    for place in (0..width).rev() {
        let digit = (value / 10u32.pow(place)) % 10;
        line.push(b'0' + u8::try_from(digit).unwrap_or(0));
    }
}

/// `value` as a JSON string, or `null`.
fn optional(line: &mut Vec<u8>, value: Option<&str>) -> serde_json::Result<()> {
    match value {
        Some(value) => write_json_str(line, value),
        None => {
            line.extend_from_slice(b"null");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
