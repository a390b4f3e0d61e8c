//! Messages for test results: what was checked, what was seen, why it failed.
//!
//! Only [`super::exec::trace`] calls into this module, so nothing here runs on the hot path.

use super::input::Input;
use super::json::Json;
use super::path::Stop;
use crate::bytecode::index::{Index, lookup};
use crate::bytecode::op::Op;
use crate::bytecode::program::Program;

use super::test_op::Seen;
fn path_text(program: &Program, index: impl Index) -> String {
    lookup(&program.paths, index).map_or_else(|| "?".to_owned(), |p| p.text.clone())
}

/// A regex as policies write it: `/source/`, `/` inside escaped, `i` after when case-insensitive.
fn regex_literal(source: &str, case_insensitive: bool) -> String {
    let mut text = String::with_capacity(source.len() + 3);
    text.push('/');
    let mut pieces = source.split('/');
    text.push_str(pieces.next().unwrap_or_default());
    for piece in pieces {
        text.push_str("\\/");
        text.push_str(piece);
    }
    text.push('/');
    if case_insensitive {
        text.push('i');
    }
    text
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
        Err(Stop::Ambiguous(why)) => return why.describe().to_owned(),
        Err(Stop::TooLong(n)) => return format!("array of {n} elements is too long to scan"),
        Err(Stop::NullIdentity) => return "the agent identity is null".to_owned(),
        Err(Stop::CaseVariant) => {
            return "a member's name differs only by case from the one read".to_owned();
        }
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
                ["equals ", &expected].concat()
            } else {
                ["value ", value, " is not equal to ", &expected].concat()
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
                ["is one of ", &members].concat()
            } else {
                ["value ", value, " is not one of ", &members].concat()
            }
        }
        Op::EqualsPath { other, .. }
        | Op::BindsIdentity {
            identity: other, ..
        } => {
            let other_text = path_text(program, other);
            if holds {
                ["equals `", &other_text, "`"].concat()
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
                [
                    "value ",
                    value,
                    " does not equal `",
                    &other_text,
                    "` (",
                    &other_value,
                    ")",
                ]
                .concat()
            }
        }
        Op::Matches { regex, .. } => {
            let pattern = lookup(&program.regexes, regex).map_or_else(
                || "?".to_owned(),
                |r| regex_literal(&r.source, r.case_insensitive),
            );
            if holds {
                ["matches ", &pattern].concat()
            } else if kind != "string" {
                [
                    "value ",
                    value,
                    " is a ",
                    kind,
                    ", not a string matching ",
                    &pattern,
                ]
                .concat()
            } else {
                ["value ", value, " does not match ", &pattern].concat()
            }
        }
        Op::Range { bounds, .. } => {
            let text = lookup(&program.bounds, bounds).map_or("?", |b| b.text.as_str());
            if holds {
                ["is ", text].concat()
            } else if kind != "number" {
                ["value ", value, " is a ", kind, ", not a number ", text].concat()
            } else {
                ["value ", value, " is not ", text].concat()
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
                .and_then(|t| crate::time::parse_timestamp(&t))
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

#[cfg(test)]
mod tests {
    use super::regex_literal;

    #[test]
    fn regex_literals_escape_slashes_and_mark_case_insensitivity() {
        for (source, case_insensitive) in [
            ("", false),
            ("[^@]+@example\\.com", false),
            ("/", true),
            ("a/b//c/", false),
            ("^/v3/é/", true),
        ] {
            let expected = format!(
                "/{}/{}",
                source.replace('/', "\\/"),
                if case_insensitive { "i" } else { "" }
            );
            assert_eq!(regex_literal(source, case_insensitive), expected);
        }
    }
}
