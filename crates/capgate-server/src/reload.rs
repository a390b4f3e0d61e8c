//! Reloading the policy off the decision path.
//!
//! One thread, `capgate-reload`, compiles: a reload asked for by `POST /v1/reload`, SIGHUP or a
//! change in a watched policy file is queued to it, requests that arrive while it works are
//! answered by the next load (a burst of file events compiles once), and the engine swaps the
//! compiled set in atomically ([`Engine::reload`]). Decisions go on against the policy they
//! started with and never wait for a compile. A failed load keeps the last good policy; the
//! error goes to the log, the `capgate_reloads_total{result="error"}` metric and `/readyz`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use capgate::{Engine, Limits, LoadError, PolicyLoader, PolicySet};
use tokio::sync::oneshot;

use crate::metrics::Metrics;
use crate::state::Readiness;

/// How long the reload thread waits for more requests before it compiles, so that a burst of
/// file events is one reload.
const SETTLE: Duration = Duration::from_millis(100);

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The policy was replaced; this many skills are loaded.
    Loaded {
        /// The skills loaded.
        skills: usize,
    },
    /// Loading failed; the last good policy stays. Every problem, one a line.
    Failed(String),
}

type Reply = oneshot::Sender<ReloadOutcome>;

/// Queues reloads to the reload thread.
#[derive(Debug, Clone)]
pub struct Reloader {
    requests: Sender<Option<Reply>>,
}

impl Reloader {
    /// Starts the reload thread for `engine`, loading `paths` under `limits`.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn start(
        engine: Arc<Engine>,
        paths: Vec<PathBuf>,
        limits: Limits,
        metrics: Arc<Metrics>,
        readiness: Arc<Readiness>,
    ) -> std::io::Result<Self> {
        let (requests, queue) = channel();
        std::thread::Builder::new()
            .name("capgate-reload".to_owned())
            .spawn(move || {
                run(
                    &queue,
                    &Loading {
                        engine,
                        paths,
                        limits,
                        metrics,
                        readiness,
                    },
                );
            })?;
        Ok(Reloader { requests })
    }

    /// Asks for a reload and waits for its outcome.
    pub async fn reload(&self) -> ReloadOutcome {
        let (reply, outcome) = oneshot::channel();
        if self.requests.send(Some(reply)).is_err() {
            return ReloadOutcome::Failed("the reload thread has stopped".to_owned());
        }
        outcome
            .await
            .unwrap_or_else(|_| ReloadOutcome::Failed("the reload thread has stopped".to_owned()))
    }

    /// Asks for a reload without waiting (file events, SIGHUP).
    pub fn request(&self) {
        let _ = self.requests.send(None);
    }
}

struct Loading {
    engine: Arc<Engine>,
    paths: Vec<PathBuf>,
    limits: Limits,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
}

fn run(queue: &Receiver<Option<Reply>>, loading: &Loading) {
    while let Ok(first) = queue.recv() {
        std::thread::sleep(SETTLE);
        let mut replies: Vec<Reply> = first.into_iter().collect();
        while let Ok(more) = queue.try_recv() {
            replies.extend(more);
        }
        let outcome = reload_once(loading);
        for reply in replies {
            let _ = reply.send(outcome.clone());
        }
    }
}

fn reload_once(loading: &Loading) -> ReloadOutcome {
    match load(&loading.paths, loading.limits) {
        Ok(policy) => {
            let skills = policy.skills.len();
            loading.engine.reload(policy);
            loading.metrics.loaded(&loading.engine.policy());
            loading.metrics.reloaded(true);
            loading.readiness.loaded();
            tracing::info!(skills, "policy reloaded");
            ReloadOutcome::Loaded { skills }
        }
        Err(error) => {
            let text = error.to_string();
            loading.metrics.reloaded(false);
            loading.readiness.failed(text.clone());
            tracing::error!(error = %text, "policy reload failed; the last good policy stays");
            ReloadOutcome::Failed(text)
        }
    }
}

/// Loads `paths` into a policy set.
///
/// # Errors
/// Every problem in every file.
pub fn load(paths: &[PathBuf], limits: Limits) -> Result<PolicySet, LoadError> {
    let mut loader = PolicyLoader::new(limits);
    for path in paths {
        loader.add_path(path);
    }
    loader.finish()
}

/// Watches the policy paths and asks for a reload on every change. The watcher stops when the
/// returned value is dropped.
///
/// # Errors
/// A path cannot be watched.
pub fn watch(paths: &[PathBuf], reloader: Reloader) -> notify::Result<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access()) {
            reloader.request();
        }
    })?;
    for path in paths {
        watcher.watch(path, notify::RecursiveMode::Recursive)?;
    }
    Ok(watcher)
}
