//! The audit log: one JSON line per decision, written off the decision path.
//!
//! A decision serialises its record and hands the line to a bounded queue
//! ([`QueuedAudit::CAPACITY`] lines); one writer thread appends the lines to the file and flushes
//! after each batch. When the queue is full or the writer has failed, the record is lost: the
//! line is dropped and counted ([`QueuedAudit::failures`]), and the sink reports it so the engine
//! denies that decision (`docs/server.md`, "Audit").

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use capgate::{AuditRecord, AuditSink};
use prometheus_client::metrics::counter::Counter;

/// An audit sink that queues lines for a writer thread.
#[derive(Debug)]
pub struct QueuedAudit {
    /// Read-locked by every record (threads share the sender), write-locked once, to close.
    sender: RwLock<Option<SyncSender<Vec<u8>>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    failed: Arc<AtomicBool>,
    /// Records lost: `capgate_audit_failures_total`.
    failures: Counter<u64, AtomicU64>,
}

impl QueuedAudit {
    /// How many lines may wait for the writer.
    pub const CAPACITY: usize = 65_536;

    /// Appends to `path` (created if missing), counting lost records in `failures`.
    ///
    /// # Errors
    /// The file cannot be opened for appending.
    pub fn open(path: &Path, failures: Counter) -> std::io::Result<Arc<Self>> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self::to_writer(file, failures))
    }

    /// Writes to `out`, counting lost records in `failures`.
    pub fn to_writer<W: Write + Send + 'static>(out: W, failures: Counter) -> Arc<Self> {
        let (sender, receiver) = sync_channel(Self::CAPACITY);
        let failed = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&failed);
        let writer = std::thread::Builder::new()
            .name("capgate-audit".to_owned())
            .spawn(move || write_lines(out, &receiver, &flag))
            .ok();
        if writer.is_none() {
            failed.store(true, Ordering::Relaxed);
        }
        Arc::new(QueuedAudit {
            sender: RwLock::new(Some(sender)),
            writer: Mutex::new(writer),
            failed,
            failures,
        })
    }

    /// Queues one line; false when it is lost.
    pub fn push(&self, line: Vec<u8>) -> bool {
        if self.failed.load(Ordering::Relaxed) {
            self.failures.inc();
            return false;
        }
        let sender = self.sender.read().unwrap_or_else(PoisonError::into_inner);
        let sent = match sender.as_ref() {
            Some(sender) => match sender.try_send(line) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !sent {
            self.failures.inc();
        }
        sent
    }

    /// Records lost so far.
    pub fn failures(&self) -> u64 {
        self.failures.get()
    }

    /// Stops taking records, writes every queued one and waits for the writer: nothing queued
    /// is lost at shutdown.
    pub fn close(&self) {
        drop(
            self.sender
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(writer) = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = writer.join();
        }
    }
}

/// The writer thread: appends lines as they come, flushing when the queue is empty.
fn write_lines<W: Write>(mut out: W, lines: &Receiver<Vec<u8>>, failed: &AtomicBool) {
    while let Ok(line) = lines.recv() {
        let mut ok = out.write_all(&line).is_ok();
        while ok && let Ok(more) = lines.try_recv() {
            ok = out.write_all(&more).is_ok();
        }
        if !ok || out.flush().is_err() {
            failed.store(true, Ordering::Relaxed);
            tracing::error!(
                "the audit log cannot be written; every decision is denied from now on"
            );
            return;
        }
    }
    let _ = out.flush();
}

impl AuditSink for QueuedAudit {
    fn record(&self, record: &AuditRecord<'_>) {
        let mut line = match serde_json::to_vec(record) {
            Ok(line) => line,
            Err(_) => {
                self.failures.inc();
                return;
            }
        };
        line.push(b'\n');
        self.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
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

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn close_writes_every_queued_line() {
        let out = Shared::default();
        let audit = QueuedAudit::to_writer(out.clone(), Counter::default());
        for i in 0..1000 {
            assert!(audit.push(format!("{i}\n").into_bytes()));
        }
        audit.close();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1000);
        assert!(!audit.push(b"late\n".to_vec()), "closed");
        assert_eq!(audit.failures(), 1);
    }

    #[test]
    fn a_failed_writer_loses_every_later_line() {
        let audit = QueuedAudit::to_writer(Broken, Counter::default());
        let _ = audit.push(b"first\n".to_vec());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while audit.push(b"next\n".to_vec()) {
            assert!(
                std::time::Instant::now() < deadline,
                "the failure was never seen"
            );
            std::thread::yield_now();
        }
        assert!(audit.failures() >= 1);
    }
}
