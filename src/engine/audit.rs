//! The audit trail: one record per decision, never the payload.

mod line;

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};

use super::decision::{Reason, Verdict};
use crate::revision::Revision;

/// What the audit trail keeps of one decision.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord<'a> {
    /// The engine clock's instant, serialised as `DateTime::to_rfc3339` writes it: RFC 3339 for
    /// years 0–9999 (chrono writes others with a sign and more digits, outside RFC 3339).
    #[serde(serialize_with = "rfc3339")]
    pub time: DateTime<Utc>,
    /// The decision returned.
    pub decision: Verdict,
    /// In observe mode, the decision that would have been enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<Verdict>,
    /// The skill named by the request.
    pub skill: &'a str,
    /// The deciding capability.
    pub capability: Option<&'a str>,
    /// The request's operation.
    pub operation: &'a str,
    /// The request's resource.
    pub resource: &'a str,
    /// `agent.id`, when it is a string.
    pub agent: Option<&'a str>,
    /// The request's transaction.
    pub transaction: Option<&'a str>,
    /// The grant consumed or presented.
    pub grant: Option<&'a str>,
    /// Why.
    pub reasons: &'a [Reason],
    /// The revision of the skill that decided: the SHA-256 of its canonical manifest, written
    /// `sha256:` and 64 lower-case hex digits.
    pub revision: Option<Revision>,
}

/// `time` as `DateTime::to_rfc3339` writes it.
fn rfc3339<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&time.to_rfc3339())
}

/// Receives one record per decision. Implementations must not block for long: they run on the
/// decision path.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Records one decision.
    fn record(&self, record: &AuditRecord<'_>);
}

/// Writes records as JSON lines to any writer (a file, for `--audit FILE`).
///
/// Each record is written whole into a line buffer of the calling thread (so it allocates only
/// while a record is longer than any that thread wrote before) — the bytes `serde_json` makes of
/// [`AuditRecord`]'s `Serialize`, written field by field without escaping the fixed keys byte by
/// byte — before the sink's lock is taken, then handed to the writer under the lock in one
/// `write_all` and flushed: an unbuffered writer such as a bare [`std::fs::File`] sees one
/// `write` per record, not one per JSON token, a line is never interleaved with another
/// thread's, and threads wait for each other only while a finished line is written.
///
/// A failed write or flush does not change the decision (the sink runs after it), but it is
/// not silent either: [`JsonLinesAudit::write_failures`] counts the records concerned and keeps
/// the first error, and the CLI turns them into exit code 2. A writer that took part of a line
/// before failing keeps that fragment; the next record then starts on a new line, so every
/// record written after a failure is still a whole line of its own.
#[derive(Debug)]
pub struct JsonLinesAudit<W: Write + Send> {
    state: Mutex<Lines<W>>,
}

/// The writer and what failed (the line is built outside the lock, in [`LINE`]).
#[derive(Debug)]
struct Lines<W> {
    out: W,
    failures: Option<AuditWriteFailures>,
    /// The last write failed, and may have left part of its line with the writer: the next
    /// record starts with a newline, so that fragment ends there instead of running into it.
    torn: bool,
}

/// Records a [`JsonLinesAudit`] could not hand to its writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditWriteFailures {
    /// How many records failed to be written or flushed.
    pub records: u64,
    /// The first failure's error, as text.
    pub first_error: String,
}

impl<W: Write + Send> JsonLinesAudit<W> {
    /// Wraps a writer.
    pub fn new(out: W) -> Arc<Self> {
        Arc::new(JsonLinesAudit {
            state: Mutex::new(Lines {
                out,
                failures: None,
                torn: false,
            }),
        })
    }

    /// The records that could not be written so far, or `None` if every one was.
    pub fn write_failures(&self) -> Option<AuditWriteFailures> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.failures.clone()
    }
}

thread_local! {
    /// The line buffer of this thread's records, reused for every record: a record is built
    /// before the sink's lock is taken, so threads auditing in parallel wait for each other only
    /// while a finished line is handed to the writer.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl<W: Write + Send + std::fmt::Debug> AuditSink for JsonLinesAudit<W> {
    fn record(&self, record: &AuditRecord<'_>) {
        let done = LINE.try_with(|cell| match cell.try_borrow_mut() {
            Ok(mut line) => self.write_record(&mut line, record),
            // A sink called from inside another record's writer on this thread.
            Err(_) => self.write_record(&mut Vec::new(), record),
        });
        if done.is_err() {
            // This thread's storage is being torn down (a decision from another thread-local's
            // destructor): `try_with` ran nothing, so the record is written once, from here.
            self.write_record(&mut Vec::new(), record);
        }
    }
}

impl<W: Write + Send> JsonLinesAudit<W> {
    /// Builds `record`'s line in `line` (a newline first, sent only after a torn write), then
    /// hands it to the writer under the lock.
    fn write_record(&self, line: &mut Vec<u8>, record: &AuditRecord<'_>) {
        line.clear();
        line.push(b'\n');
        // Written whole before anything reaches the writer, so a failure never leaves half a
        // line from this step (writing this record into memory cannot fail in practice).
        let built = line::write(line, record).map_err(std::io::Error::from);
        line.push(b'\n');
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Lines {
            out,
            failures,
            torn,
        } = &mut *state;
        let written = built.and_then(|()| {
            let whole = if *torn {
                line.as_slice()
            } else {
                line.get(1..).unwrap_or_default()
            };
            // Only a failed `write_all` can leave part of a line behind (a failed flush leaves
            // the bytes with the writer, which sends them on its next write). Marked torn
            // first, so a writer that panics part-way is treated as one that failed.
            *torn = true;
            let sent = out.write_all(whole);
            if sent.is_ok() {
                *torn = false;
            }
            sent.and_then(|()| out.flush())
        });
        if let Err(e) = written {
            match failures {
                Some(failures) => failures.records += 1,
                None => {
                    *failures = Some(AuditWriteFailures {
                        records: 1,
                        first_error: e.to_string(),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A writer into a buffer the test keeps a handle on.
    #[derive(Debug, Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn record<'a>(skill: &'a str, agent: &'a str) -> AuditRecord<'a> {
        AuditRecord {
            time: DateTime::from_timestamp(1_796_137_200, 0).unwrap(),
            decision: Verdict::Allow,
            observed: None,
            skill,
            capability: Some("c"),
            operation: "call",
            resource: "tool:x",
            agent: Some(agent),
            transaction: None,
            grant: None,
            reasons: &[],
            revision: Some(Revision::from_bytes([0xff; 32])),
        }
    }

    /// A writer that counts its `write` calls and can be told to fail them.
    #[derive(Debug, Clone, Default)]
    struct Counting {
        writes: Arc<Mutex<Vec<usize>>>,
        fail: bool,
    }

    impl Write for Counting {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.fail {
                return Err(std::io::Error::other("disk full"));
            }
            self.writes.lock().unwrap().push(bytes.len());
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_unbuffered_writer_gets_one_write_per_whole_record() {
        let out = Counting::default();
        let sink = JsonLinesAudit::new(out.clone());
        sink.record(&record("s", "agent-1"));
        sink.record(&record("a-longer-skill-name", "agent-2"));
        let writes = out.writes.lock().unwrap().clone();
        assert_eq!(writes.len(), 2, "{writes:?}");
        let first = serde_json::to_vec(&record("s", "agent-1")).unwrap();
        assert_eq!(writes[0], first.len() + 1);
        assert_eq!(sink.write_failures(), None);
    }

    #[test]
    fn failed_writes_are_counted_with_the_first_error() {
        let out = Counting {
            fail: true,
            ..Counting::default()
        };
        let sink = JsonLinesAudit::new(out);
        assert_eq!(sink.write_failures(), None);
        for _ in 0..3 {
            sink.record(&record("s", "agent-1"));
        }
        assert_eq!(
            sink.write_failures(),
            Some(AuditWriteFailures {
                records: 3,
                first_error: "disk full".to_owned(),
            })
        );
    }

    /// A writer that takes half of the first write and then fails: by returning an error on the
    /// second write (`panics: false`) or by panicking at once (`panics: true`); it then works.
    #[derive(Debug, Clone, Default)]
    struct Torn {
        bytes: Arc<Mutex<Vec<u8>>>,
        calls: Arc<Mutex<usize>>,
        panics: bool,
    }

    impl Write for Torn {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let call = {
                let mut calls = self.calls.lock().unwrap();
                *calls += 1;
                *calls
            };
            let taken = match (call, self.panics) {
                (1, _) => bytes.len() / 2,
                (2, false) => return Err(std::io::Error::other("no space left")),
                _ => bytes.len(),
            };
            self.bytes
                .lock()
                .unwrap()
                .extend_from_slice(&bytes[..taken]);
            assert!(
                !(call == 1 && self.panics),
                "the writer panics part-way through its first line"
            );
            Ok(taken)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Regression (found in review): a writer that took part of a line and then failed left the
    /// fragment, and the next record was appended to it — a successful, uncounted write that no
    /// reader could parse.
    #[test]
    fn regression_a_record_after_a_torn_write_starts_on_its_own_line() {
        let out = Torn::default();
        let sink = JsonLinesAudit::new(out.clone());
        sink.record(&record("s", "agent-1"));
        sink.record(&record("s", "agent-2"));
        sink.record(&record("s", "agent-3"));
        assert_eq!(sink.write_failures().map(|f| f.records), Some(1));
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(serde_json::from_str::<serde_json::Value>(lines[0]).is_err());
        for (line, agent) in lines[1..].iter().zip(["agent-2", "agent-3"]) {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["agent"], agent);
        }
    }

    /// A writer that audits each line it receives into a second sink, on the same thread.
    #[derive(Debug)]
    struct Relay(Arc<JsonLinesAudit<Shared>>);

    impl Write for Relay {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.record(&record("relayed", "relay"));
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_sink_called_from_inside_another_sinks_writer_builds_its_own_line() {
        // The outer record holds this thread's line buffer while its writer runs.
        let inner_out = Shared::default();
        let inner = JsonLinesAudit::new(inner_out.clone());
        let outer = JsonLinesAudit::new(Relay(inner));
        outer.record(&record("s", "agent-1"));
        outer.record(&record("s", "agent-2"));
        assert_eq!(outer.write_failures(), None);
        let text = String::from_utf8(inner_out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(value["skill"], "relayed");
        }
    }

    /// Records into its sink when dropped.
    struct RecordOnDrop(Arc<JsonLinesAudit<Shared>>);

    impl Drop for RecordOnDrop {
        fn drop(&mut self) {
            self.0.record(&record("s", "at-thread-exit"));
        }
    }

    thread_local! {
        static ON_EXIT: RefCell<Option<RecordOnDrop>> = const { RefCell::new(None) };
    }

    #[test]
    fn regression_a_record_from_a_thread_local_destructor_is_written() {
        // Found by review: the line buffer is a thread-local, and thread-locals are destroyed
        // in reverse order of first use, so a destructor registered before the buffer's first
        // use ran after it was gone; `LINE.with` panicked, and a panic in a thread-local
        // destructor aborts the process.
        let out = Shared::default();
        let sink = JsonLinesAudit::new(out.clone());
        let for_thread = Arc::clone(&sink);
        std::thread::spawn(move || {
            ON_EXIT.with(|slot| *slot.borrow_mut() = Some(RecordOnDrop(Arc::clone(&for_thread))));
            for_thread.record(&record("s", "in-thread"));
        })
        .join()
        .unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let agents: Vec<String> = text
            .lines()
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                value["agent"].as_str().unwrap().to_owned()
            })
            .collect();
        assert_eq!(agents, ["in-thread", "at-thread-exit"]);
    }

    #[test]
    fn regression_a_record_after_a_writer_panicked_part_way_starts_on_its_own_line() {
        // Found by review: a writer that took part of a line and then panicked left `torn`
        // unset, so the next record was glued to the fragment.
        let out = Torn {
            panics: true,
            ..Torn::default()
        };
        let sink = JsonLinesAudit::new(out.clone());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sink.record(&record("s", "agent-1"));
        }));
        assert!(panicked.is_err());
        sink.record(&record("s", "agent-2"));
        let text = String::from_utf8(out.bytes.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let value: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(value["agent"], "agent-2");
    }

    #[test]
    fn records_from_many_threads_arrive_as_whole_json_lines() {
        let out = Shared::default();
        let sink = JsonLinesAudit::new(out.clone());
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let sink = &sink;
                scope.spawn(move || {
                    for i in 0..250 {
                        let agent = format!("agent-{thread}-{i}");
                        sink.record(&record("s", &agent));
                    }
                });
            }
        });
        let bytes = out.0.lock().unwrap().clone();
        let text = String::from_utf8(bytes).unwrap();
        let mut agents: Vec<String> = text
            .lines()
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(value["skill"], "s");
                assert_eq!(value["revision"], format!("sha256:{}", "ff".repeat(32)));
                value["agent"].as_str().unwrap().to_owned()
            })
            .collect();
        assert!(text.ends_with('\n'));
        agents.sort();
        agents.dedup();
        assert_eq!(agents.len(), 1_000);
    }
}
