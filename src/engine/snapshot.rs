//! Each thread's snapshot of an engine's current policy: a decision reads the policy without
//! a lock or a shared reference count.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Engine, SkillIndex};

/// Every engine's identity, for the per-thread policy snapshots.
pub(super) static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// How many engines' snapshots one thread keeps (the oldest is dropped first).
const SNAPSHOTS_PER_THREAD: usize = 8;

/// One thread's copy of an engine's current policy.
struct Snapshot {
    engine: u64,
    generation: u64,
    policy: Arc<SkillIndex>,
}

thread_local! {
    /// Per-thread snapshots, so that a decision reads the policy without writing to any cache
    /// line another thread reads (no lock, no reference count on the hot path).
    static SNAPSHOTS: std::cell::RefCell<Vec<Snapshot>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Engine {
    /// Runs `f` on the current policy. On the hot path it reads this thread's snapshot, checked
    /// against the reload generation with one atomic load; after a reload (or on a thread's
    /// first call) the snapshot is refreshed from the lock. `None` only if `f` could not be run,
    /// which the construction below rules out; callers fail closed on it anyway.
    pub(crate) fn with_policy<R>(&self, f: impl FnOnce(&SkillIndex) -> R) -> Option<R> {
        let generation = self.generation.load(Ordering::Acquire);
        // `f` stays in `slot` unless it is about to run, so the fallback below can still run it.
        let mut slot = Some(f);
        let ran = SNAPSHOTS
            .try_with(|cell| {
                if let Ok(mut snapshots) = cell.try_borrow_mut()
                    && !snapshots
                        .iter()
                        .any(|s| s.engine == self.id && s.generation == generation)
                {
                    self.refresh_snapshot(&mut snapshots, generation);
                }
                // The mutable borrow above has ended, so a nested decision on this thread (an
                // audit sink calling the engine) can read the snapshot too.
                let snapshots = cell.try_borrow().ok()?;
                let snapshot = snapshots
                    .iter()
                    .find(|s| s.engine == self.id && s.generation == generation)?;
                slot.take().map(|f| f(&snapshot.policy))
            })
            .ok()
            .flatten();
        match (ran, slot.take()) {
            (Some(result), _) => Some(result),
            // No usable snapshot (thread-local storage torn down, or borrowed): read the lock.
            (None, Some(f)) => Some(f(&self.policy())),
            (None, None) => None,
        }
    }

    /// Brings this thread's snapshot of the engine to `generation` (after a reload, or on the
    /// thread's first decision): out of line, so that the decisions that find their snapshot
    /// current keep only the check in their code.
    #[cold]
    #[inline(never)]
    fn refresh_snapshot(&self, snapshots: &mut Vec<Snapshot>, generation: u64) {
        match snapshots.iter_mut().find(|s| s.engine == self.id) {
            Some(snapshot) => {
                snapshot.policy = self.policy();
                snapshot.generation = generation;
            }
            None => {
                if snapshots.len() >= SNAPSHOTS_PER_THREAD {
                    snapshots.remove(0);
                }
                snapshots.push(Snapshot {
                    engine: self.id,
                    generation,
                    policy: self.policy(),
                });
            }
        }
    }
}
