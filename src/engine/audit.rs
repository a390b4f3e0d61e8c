//! The audit trail: one record per decision, never the payload.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

use super::decision::{Reason, Verdict};

/// What the audit trail keeps of one decision.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord<'a> {
    /// The engine clock's instant (RFC 3339).
    pub time: String,
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
    /// The revision (manifest hash) of the skill that decided, in hex.
    pub revision: Option<String>,
}

/// Receives one record per decision. Implementations must not block for long: they run on the
/// decision path.
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    /// Records one decision.
    fn record(&self, record: &AuditRecord<'_>);
}

/// Writes records as JSON lines to any writer (a file, for `--audit FILE`).
#[derive(Debug)]
pub struct JsonLinesAudit<W: Write + Send> {
    out: Mutex<W>,
}

impl<W: Write + Send> JsonLinesAudit<W> {
    /// Wraps a writer.
    pub fn new(out: W) -> Arc<Self> {
        Arc::new(JsonLinesAudit {
            out: Mutex::new(out),
        })
    }
}

impl<W: Write + Send + std::fmt::Debug> AuditSink for JsonLinesAudit<W> {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        // An audit write failure must not change the decision; it is reported on stderr once
        // per failure by the CLI's writer.
        if serde_json::to_writer(&mut *out, record).is_ok() {
            let _ = out.write_all(b"\n");
            let _ = out.flush();
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
            time: "2026-12-01T15:00:00+00:00".to_owned(),
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
            revision: Some("00000000000000ff".to_owned()),
        }
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
                assert_eq!(value["revision"], "00000000000000ff");
                value["agent"].as_str().unwrap().to_owned()
            })
            .collect();
        assert!(text.ends_with('\n'));
        agents.sort();
        agents.dedup();
        assert_eq!(agents.len(), 1_000);
    }
}
