//! Messages for test results: what was checked, what was seen, why it failed.
//!
//! Only [`super::exec::trace`] calls into this module, so nothing here runs on the hot path.

use super::input::Input;
use super::json::Json;
use super::path::Stop;
use crate::bytecode::index::{Index, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::program::Program;

use super::exec::Seen;
fn path_text(program: &Program, index: impl Index) -> String {
    lookup(&program.paths, index).map_or_else(|| "?".to_owned(), |p| p.text.clone())
}

/// The one-line message for a test result.
pub(super) fn test_message<'r, J: Json<'r>>(
    program: &Program,
    op: &Op,
    result: Result<(), Stop>,
    seen: &Seen,
    input: &Input<'_, J>,
) -> String {
    let value = seen.text.as_deref().unwrap_or("the value");
    let kind = seen.kind.unwrap_or("value");
    match result {
        Err(Stop::Missing) => return "the value is absent".to_owned(),
        Err(Stop::WrongShape(why)) => return format!("cannot follow the path: {why}"),
        Err(Stop::Ambiguous) => {
            return "the query parameter is given more than once".to_owned();
        }
        Err(Stop::TooLong(n)) => return format!("array of {n} elements is too long to scan"),
        Ok(()) | Err(Stop::Rejected) => {}
    }
    let holds = result.is_ok();
    match *op {
        Op::Equals { value: c, .. } => {
            let expected = lookup(&program.consts, c).map_or_else(
                || "?".to_owned(),
                |v| crate::value::truncate_for_message(v, 64),
            );
            if holds {
                format!("equals {expected}")
            } else {
                format!("value {value} is not equal to {expected}")
            }
        }
        Op::InSet { set, .. } => {
            let members = lookup(&program.sets, set).map_or_else(
                || "?".to_owned(),
                |s| {
                    let list: Vec<String> = s.values.iter().map(|v| v.to_string()).collect();
                    crate::value::truncate_str(&format!("[{}]", list.join(", ")), 64)
                },
            );
            if holds {
                format!("is one of {members}")
            } else {
                format!("value {value} is not one of {members}")
            }
        }
        Op::EqualsPath { other, .. } => {
            let other_text = path_text(program, other);
            if holds {
                format!("equals `{other_text}`")
            } else {
                let other_value = lookup(&program.paths, other).map_or_else(
                    || "?".to_owned(),
                    |p| {
                        super::path::with_single(input, p, |leaf| match leaf {
                            Ok(leaf) => leaf.describe(),
                            Err(_) => "absent".to_owned(),
                        })
                    },
                );
                format!("value {value} does not equal `{other_text}` ({other_value})")
            }
        }
        Op::Matches { regex, .. } => {
            let pattern = lookup(&program.regexes, regex).map_or_else(
                || "?".to_owned(),
                |r| {
                    format!(
                        "/{}/{}",
                        r.source.replace('/', "\\/"),
                        if r.case_insensitive { "i" } else { "" }
                    )
                },
            );
            if holds {
                format!("matches {pattern}")
            } else if kind != "string" {
                format!("value {value} is a {kind}, not a string matching {pattern}")
            } else {
                format!("value {value} does not match {pattern}")
            }
        }
        Op::Range { bounds, .. } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            if holds {
                format!("is {text}")
            } else if kind != "number" {
                format!("value {value} is a {kind}, not a number {text}")
            } else {
                format!("value {value} is not {text}")
            }
        }
        Op::RangeNow { bounds, .. } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            let now = input.now.to_rfc3339();
            if holds {
                format!("is {text} ({now})")
            } else if seen
                .text
                .as_deref()
                .and_then(|t| serde_json::from_str::<String>(t).ok())
                .and_then(|t| super::exec::parse_timestamp(&t))
                .is_none()
            {
                format!("value {value} is not an RFC 3339 timestamp")
            } else {
                format!("timestamp {value} is not {text} (now is {now})")
            }
        }
        Op::RangeDiff { bounds, .. } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            if holds {
                format!("difference is {text}")
            } else if kind == "difference" {
                format!("difference {value} is not {text}")
            } else {
                format!("values {value} are not both RFC 3339 timestamps")
            }
        }
        Op::Schema { .. } | Op::Window { .. } => String::new(),
        Op::Push(_) | Op::Not | Op::OrElse { .. } | Op::AndThen { .. } | Op::Require { .. } => {
            String::new()
        }
        Op::Accept => String::new(),
    }
}
