//! The facade: [`Engine`], built once from policies and a clock, deciding [`Request`]s.
//!
//! - [`PolicyLoader`] reads `.cap` files, JSON manifests and directories into a
//!   [`PolicySet`] (or a [`LoadError`] listing every problem).
//! - [`Engine`] decides requests (`check`), from many threads at once. A *stateless* engine
//!   (no state store) evaluates resource, operation, constraints and gating only — what
//!   `capgate check` does. A *stateful* engine also enforces lifetimes, grants, transactions,
//!   revocation, approvals and rate limits through a [`StateStore`].
//! - [`Decision`], [`Reason`], [`Request`] are the wire types of SPEC §4.
//! - [`AuditSink`] receives one [`AuditRecord`] per decision.

mod audit;
mod decision;
mod eval;
mod load;
mod rate_key;
mod request;
mod view;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

pub use audit::{AuditRecord, AuditSink, AuditWriteFailures, JsonLinesAudit};
pub use decision::{Decision, Reason, ReasonKind, Verdict};
pub use eval::CandidateTrace;
pub use load::{Diagnostic, LoadError, PolicyFormat, PolicyLoader, PolicySet};
pub use request::{
    Request, RequestError, depth_exceeds, parse_json_slice_with_depth, parse_json_with_depth,
    parse_strict_json,
};

use crate::bytecode::program::CompiledSkill;
use crate::limits::Limits;
use crate::name::Name;
use crate::revision::Revision;
use crate::runtime::{Clock, GrantLifetime, NewGrant, StateError, StateStore, SystemClock};
use crate::span::SourceMap;
use crate::tape::{Repeats, Tape};
use rate_key::RateKeys;
use view::{Decoded, NotARequest, RequestView};

thread_local! {
    /// The tape `check_slice` parses into, reused so a warm thread does not allocate. A decision
    /// takes it out and puts it back ([`Engine::check_slice`]); one nested in it on the same
    /// thread (an audit sink deciding) finds the slot empty and parses into a fresh tape.
    static TAPE: Cell<Option<Box<Tape>>> = const { Cell::new(None) };
}

/// Every compiled revision of every skill, by (name, revision).
type RevisionHistory = HashMap<(Name, Revision), Arc<CompiledSkill>>;

/// A word-at-a-time multiplicative hash (FxHash's step) for the skill index. Its keys come
/// from the loaded policies (trusted), so the flooding resistance of SipHash buys nothing
/// there; lookups by a request's skill name only read the table. Not FNV-1a, whose one multiply
/// per byte is a dependency chain: 18 multiplies to hash `meeting-scheduler` (and its
/// terminator) against 4 here.
#[derive(Debug, Clone, Copy, Default)]
struct NameHash(u64);

impl NameHash {
    #[inline(always)]
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for NameHash {
    #[inline]
    fn finish(&self) -> u64 {
        // The multiply leaves the most entropy in the high bits; the table picks buckets from
        // the low ones.
        self.0.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut buffer = [0; 8];
            buffer.copy_from_slice(word);
            self.mix(u64::from_le_bytes(buffer));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut buffer = [0; 8];
            if let Some(head) = buffer.get_mut(..rest.len()) {
                head.copy_from_slice(rest);
            }
            self.mix(u64::from_le_bytes(buffer));
        }
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    #[inline]
    fn write_usize(&mut self, value: usize) {
        self.mix(u64::try_from(value).unwrap_or(u64::MAX));
    }
}

type NameHashBuild = std::hash::BuildHasherDefault<NameHash>;

/// The loaded skills, indexed by name for O(1) lookup.
#[derive(Debug)]
pub struct SkillIndex {
    skills: Vec<Arc<CompiledSkill>>,
    by_name: HashMap<Name, usize, NameHashBuild>,
    sources: SourceMap,
}

impl SkillIndex {
    fn new(loaded: PolicySet) -> Self {
        let skills: Vec<Arc<CompiledSkill>> = loaded.skills.into_iter().map(Arc::new).collect();
        let by_name = skills
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.clone(), i))
            .collect();
        SkillIndex {
            skills,
            by_name,
            sources: loaded.sources,
        }
    }

    /// The skill named `name`.
    pub fn skill(&self, name: &str) -> Option<&Arc<CompiledSkill>> {
        self.by_name.get(name).and_then(|&i| self.skills.get(i))
    }

    /// Every skill, in load order.
    pub fn skills(&self) -> &[Arc<CompiledSkill>] {
        &self.skills
    }

    /// The source files the policy came from.
    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }
}

/// An operator action the engine refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, miette::Diagnostic)]
pub enum EngineError {
    /// The skill is not loaded.
    #[error("unknown skill `{0}`")]
    UnknownSkill(String),
    /// The capability is not in the skill.
    #[error("skill `{skill}` has no capability `{capability}`")]
    UnknownCapability {
        /// The skill.
        skill: String,
        /// The capability asked for.
        capability: String,
    },
    /// The engine keeps no state (grants, transactions, revocations need a state store).
    #[error("this engine is stateless: {0} needs a state store")]
    Stateless(&'static str),
    /// The state store refused.
    #[error(transparent)]
    State(#[from] StateError),
    /// A [`Limits`] field is above its fixed bound.
    #[error(transparent)]
    Limits(#[from] crate::limits::LimitError),
    /// A rate-key secret shorter than [`MIN_RATE_KEY_SECRET_BYTES`].
    #[error("a rate-key secret needs at least {MIN_RATE_KEY_SECRET_BYTES} bytes, found {0}")]
    #[diagnostic(help("use 32 random bytes, in a file every replica reads"))]
    RateKeySecretTooShort(usize),
}

/// The fewest bytes a rate-key secret may have ([`EngineBuilder::rate_key_secret`]).
pub const MIN_RATE_KEY_SECRET_BYTES: usize = 16;

/// How an engine is put together.
#[derive(Debug)]
pub struct EngineBuilder {
    policy: PolicySet,
    clock: Option<Arc<dyn Clock>>,
    state: Option<Arc<dyn StateStore>>,
    audit: Option<Arc<dyn AuditSink>>,
    limits: Limits,
    observe: bool,
    rate_keys: RateKeys,
}

impl EngineBuilder {
    /// Uses this clock (default: the system clock). A request's `time` is honoured only when
    /// the clock says it is simulated.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Makes the engine stateful with this store.
    pub fn state(mut self, state: Arc<dyn StateStore>) -> Self {
        self.state = Some(state);
        self
    }

    /// Sends one record per decision to `sink`.
    pub fn audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// Uses these limits (default: [`Limits::DEFAULT`]).
    ///
    /// # Errors
    /// [`EngineError::Limits`] if a field is above its fixed bound ([`Limits::check`]): the
    /// engine could not enforce it as set.
    pub fn limits(mut self, limits: Limits) -> Result<Self, EngineError> {
        limits.check()?;
        self.limits = limits;
        Ok(self)
    }

    /// Observe mode: decide as usual but return allow, with the real decision in `observed`.
    pub fn observe(mut self, observe: bool) -> Self {
        self.observe = observe;
        self
    }

    /// Keys rate limits with HMAC-SHA-256 under `secret` instead of plain SHA-256, so that
    /// callers cannot compute which `by` values share a key. Read the secret from a file that
    /// every replica on the same state store shares: replicas with different secrets (or a
    /// secret made up per process) count one caller under different keys, each with a full
    /// limit.
    ///
    /// # Errors
    /// [`EngineError::RateKeySecretTooShort`] for a secret of fewer than
    /// [`MIN_RATE_KEY_SECRET_BYTES`] bytes (an empty file, say).
    pub fn rate_key_secret(mut self, secret: &[u8]) -> Result<Self, EngineError> {
        if secret.len() < MIN_RATE_KEY_SECRET_BYTES {
            return Err(EngineError::RateKeySecretTooShort(secret.len()));
        }
        self.rate_keys = RateKeys::keyed(secret);
        Ok(self)
    }

    /// Builds the engine.
    pub fn build(self) -> Engine {
        let policy = SkillIndex::new(self.policy);
        let mut history = HashMap::new();
        for skill in &policy.skills {
            history.insert((skill.name.clone(), skill.revision), skill.clone());
        }
        Engine {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
            policy: RwLock::new(Arc::new(policy)),
            history: RwLock::new(history),
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            state: self.state,
            audit: self.audit,
            limits: self.limits,
            observe: self.observe,
            rate_keys: self.rate_keys,
            next_grant: AtomicU64::new(1),
            unrecorded_removals: Mutex::new(Vec::new()),
            any_unrecorded_removal: AtomicBool::new(false),
        }
    }
}

/// What a refused request names — its `skill`, `operation` and `resource`, each `""` when it
/// names none — for its deny and audit record. Untrusted text, never used to decide.
#[derive(Debug, Clone, Default)]
struct Named {
    skill: Name,
    operation: String,
    resource: String,
}

impl Named {
    /// What `value` names.
    fn from_value(value: &serde_json::Value) -> Named {
        let text = |name: &str| value.get(name).and_then(|s| s.as_str()).unwrap_or("");
        Named {
            skill: Name::from(text("skill")),
            operation: text("operation").to_owned(),
            resource: text("resource").to_owned(),
        }
    }

    /// What `bytes` name, read leniently (a duplicate member, the usual reason for a refusal,
    /// does not stop it: the last one is read, as most parsers would); nothing when they are
    /// not JSON at all.
    fn from_slice(bytes: &[u8]) -> Named {
        serde_json::from_slice::<serde_json::Value>(bytes)
            .map(|value| Named::from_value(&value))
            .unwrap_or_default()
    }
}

/// The (skill, capability) pairs of `old` that `new` lacks.
fn removed_capabilities(old: &SkillIndex, new: &SkillIndex) -> Vec<(Name, Name)> {
    let mut removed = Vec::new();
    for skill in old.skills() {
        let kept = new.skill(&skill.name);
        for capability in &skill.capabilities {
            if kept.is_none_or(|kept| kept.capability(&capability.name).is_none()) {
                removed.push((skill.name.clone(), capability.name.clone()));
            }
        }
    }
    removed
}

/// Every engine's identity, for the per-thread policy snapshots.
static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

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

/// Decides requests against a loaded policy. `Send + Sync`: share one engine between threads.
#[derive(Debug)]
pub struct Engine {
    /// Identity for the per-thread snapshots.
    id: u64,
    /// Bumped (after the policy is replaced) by every reload.
    // INVARIANT (policy-generation): a thread that reads generation `g` with Acquire and then
    // reads `policy` sees a policy at least as new as the one current when `g` was published.
    generation: AtomicU64,
    policy: RwLock<Arc<SkillIndex>>,
    /// Every revision of every skill ever loaded, for grants pinned to an older one. Its write
    /// lock is held through a whole reload, its read lock through a grant's issue: a grant is
    /// issued either before a reload withdraws its capability (and is withdrawn with it) or
    /// under the policy that reload installed.
    history: RwLock<RevisionHistory>,
    clock: Arc<dyn Clock>,
    state: Option<Arc<dyn StateStore>>,
    audit: Option<Arc<dyn AuditSink>>,
    limits: Limits,
    observe: bool,
    /// How rate-limit keys are hashed.
    rate_keys: RateKeys,
    next_grant: AtomicU64,
    /// Capabilities a reload removed that the state store could not record as withdrawn
    /// ([`StateStore::withdraw_capability`]): retried at every reload and at every call to one
    /// of them, which is refused until then (its old grants cannot be told from new ones).
    unrecorded_removals: Mutex<Vec<(Name, Name)>>,
    /// Whether `unrecorded_removals` may be non-empty, so calls skip its lock when it is not.
    any_unrecorded_removal: AtomicBool,
}

impl Engine {
    /// Starts building an engine around a loaded policy.
    pub fn builder(policy: PolicySet) -> EngineBuilder {
        EngineBuilder {
            policy,
            clock: None,
            state: None,
            audit: None,
            limits: Limits::DEFAULT,
            observe: false,
            rate_keys: RateKeys::unkeyed(),
        }
    }

    /// The current policy.
    pub fn policy(&self) -> Arc<SkillIndex> {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The engine's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Replaces the policy. Grants issued under the old one stay pinned to it: they are honoured
    /// only where both the old and the new capability allow. A capability the new policy lacks
    /// is withdrawn in the state store: its grants so far stay void even if a later reload adds
    /// it back (SPEC §5.2). Revocations survive reloads.
    pub fn reload(&self, policy: PolicySet) {
        let policy = SkillIndex::new(policy);
        // Held until the new policy is in place and its removals are recorded, so that no grant
        // is issued under the old policy after its capability was withdrawn.
        let mut history = self.history.write().unwrap_or_else(PoisonError::into_inner);
        for skill in &policy.skills {
            history.insert((skill.name.clone(), skill.revision), skill.clone());
        }
        let policy = Arc::new(policy);
        let old = std::mem::replace(
            &mut *self.policy.write().unwrap_or_else(PoisonError::into_inner),
            Arc::clone(&policy),
        );
        self.record_removals(removed_capabilities(&old, &policy));
        // INVARIANT (policy-generation): published after the new policy is in place.
        self.generation.fetch_add(1, Ordering::Release);
        drop(history);
    }

    /// Withdraws `removed` in the state store, with every removal still unrecorded; keeps those
    /// the store could not record, for the next reload or call.
    fn record_removals(&self, removed: Vec<(Name, Name)>) {
        let Some(store) = &self.state else {
            return;
        };
        let mut unrecorded = self
            .unrecorded_removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for pair in removed {
            if !unrecorded.contains(&pair) {
                unrecorded.push(pair);
            }
        }
        unrecorded
            .retain(|(skill, capability)| store.withdraw_capability(skill, capability).is_err());
        self.any_unrecorded_removal
            .store(!unrecorded.is_empty(), Ordering::Release);
    }

    /// Whether a reload removed `capability` of `skill` and the store has not recorded it yet
    /// (after trying again now): calls to it are refused until it has.
    #[inline]
    pub(crate) fn removal_unrecorded(
        &self,
        store: &dyn StateStore,
        skill: &Name,
        capability: &Name,
    ) -> bool {
        if !self.any_unrecorded_removal.load(Ordering::Acquire) {
            return false;
        }
        self.retry_removals(store, skill, capability)
    }

    #[cold]
    #[inline(never)]
    fn retry_removals(&self, store: &dyn StateStore, skill: &Name, capability: &Name) -> bool {
        let mut unrecorded = self
            .unrecorded_removals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        unrecorded
            .retain(|(skill, capability)| store.withdraw_capability(skill, capability).is_err());
        self.any_unrecorded_removal
            .store(!unrecorded.is_empty(), Ordering::Release);
        unrecorded
            .iter()
            .any(|(s, c)| s == skill && c == capability)
    }

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

    /// Loads policies from paths and replaces the current policy with them. If loading fails,
    /// the engine keeps serving the last good policy and the error lists every problem.
    pub fn reload_paths(&self, paths: &[&std::path::Path]) -> Result<(), LoadError> {
        let mut loader = PolicyLoader::new(self.limits);
        for path in paths {
            loader.add_path(path);
        }
        let policy = loader.finish()?;
        self.reload(policy);
        Ok(())
    }

    /// `name` is the policy's own (interned) name, so the key is a copy, not an allocation.
    fn skill_at_revision(&self, name: &Name, revision: Revision) -> Option<Arc<CompiledSkill>> {
        self.history
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(name.clone(), revision))
            .cloned()
    }

    fn store(&self, what: &'static str) -> Result<&Arc<dyn StateStore>, EngineError> {
        self.state.as_ref().ok_or(EngineError::Stateless(what))
    }

    /// Issues a grant for `skill`/`capability`, optionally bound to a transaction. `token` names
    /// it (generated when `None`); returns the token.
    pub fn issue_grant(
        &self,
        skill: &str,
        capability: &str,
        transaction: Option<&str>,
        token: Option<String>,
    ) -> Result<String, EngineError> {
        let store = self.store("a grant")?;
        // Held until the grant is recorded: a reload cannot withdraw its capability in between.
        let _history = self.history.read().unwrap_or_else(PoisonError::into_inner);
        let policy = self.policy();
        let compiled = policy
            .skill(skill)
            .ok_or_else(|| EngineError::UnknownSkill(skill.to_owned()))?;
        let cap =
            compiled
                .capability(capability)
                .ok_or_else(|| EngineError::UnknownCapability {
                    skill: skill.to_owned(),
                    capability: capability.to_owned(),
                })?;
        // Process and transaction lifetimes need no token; a grant for them is recorded as a
        // one-call grant so the token is still valid, revocable and pinned, but the engine does
        // not require or consume it.
        let lifetime = eval::grant_lifetime(cap.lifetime).unwrap_or(GrantLifetime::Calls(1));
        let token = token
            .unwrap_or_else(|| format!("g-{}", self.next_grant.fetch_add(1, Ordering::Relaxed)));
        store.issue_grant(NewGrant {
            token: token.clone(),
            skill: skill.to_owned(),
            capability: capability.to_owned(),
            transaction: transaction.map(str::to_owned),
            issued_at: self.clock.now(),
            revision: compiled.revision,
            lifetime,
        })?;
        Ok(token)
    }

    /// Opens a transaction.
    pub fn begin_transaction(&self, transaction: &str) -> Result<(), EngineError> {
        Ok(self
            .store("a transaction")?
            .begin_transaction(transaction)?)
    }

    /// Closes a transaction and ends its grants.
    pub fn end_transaction(&self, transaction: &str) -> Result<(), EngineError> {
        Ok(self.store("a transaction")?.end_transaction(transaction)?)
    }

    /// Revokes one grant.
    pub fn revoke_grant(&self, token: &str) -> Result<(), EngineError> {
        Ok(self.store("revocation")?.revoke_grant(token)?)
    }

    /// Revokes a skill: every later call and grant is refused until lifted.
    pub fn revoke_skill(&self, skill: &str) -> Result<(), EngineError> {
        Ok(self.store("revocation")?.revoke_skill(skill)?)
    }

    /// Revokes one capability of a skill.
    pub fn revoke_capability(&self, skill: &str, capability: &str) -> Result<(), EngineError> {
        Ok(self
            .store("revocation")?
            .revoke_capability(skill, capability)?)
    }

    /// Lifts a skill's revocation; returns whether it was revoked.
    pub fn lift_skill(&self, skill: &str) -> Result<bool, EngineError> {
        Ok(self.store("revocation")?.lift_skill(skill)?)
    }

    /// Lifts a capability's revocation; returns whether it was revoked.
    pub fn lift_capability(&self, skill: &str, capability: &str) -> Result<bool, EngineError> {
        Ok(self
            .store("revocation")?
            .lift_capability(skill, capability)?)
    }

    /// Records the first-use approval of a skill.
    pub fn approve(&self, skill: &str) -> Result<(), EngineError> {
        Ok(self.store("an approval")?.approve(skill)?)
    }

    /// Decides one request. Never panics and never allows on error.
    ///
    /// The request is taken as built: what its parsers refuse ([`Request::from_slice`],
    /// [`Request::from_value`] — duplicate keys, nesting past the limit, two member names equal
    /// up to case) is not checked again here, so build it with them from untrusted input (or
    /// call [`Engine::check_slice`] or [`Engine::check_value`]). A case variant of a name the
    /// policy reads is refused here too (`Limits::refuse_case_variant_reads`).
    pub fn check(&self, request: &Request) -> Decision {
        self.decide_audited(&request.view())
    }

    /// Decides a request given as untrusted bytes (size, depth and duplicate keys are checked).
    ///
    /// The bytes are read in one pass into a reusable [`crate::tape::Tape`] (no `Value` tree, no
    /// allocation once the thread's tape is warm) and decided from it, with the same verdict and
    /// reasons as [`Engine::check`] on the parsed request. Bytes the tape path does not read as
    /// a request (malformed JSON, an unknown field, a limit broken) are refused through a full
    /// parse, so input errors are exactly those of [`Request::from_slice`].
    pub fn check_slice(&self, bytes: &[u8]) -> Decision {
        if bytes.len() > self.limits.max_request_bytes {
            return self.check_slice_parsed(bytes);
        }
        // The thread's tape, or a fresh one when it is out (taken by a decision this one is
        // nested in) or gone (a decision from a thread-local destructor at thread exit).
        let mut tape = TAPE.try_with(Cell::take).ok().flatten().unwrap_or_default();
        // Every step below returns the `Decision` itself, never wrapped in an `Option`: each
        // wrapper would be a copy of the freshly written decision, and copying a value just
        // stored field by field stalls the load on the stores (store-to-load forwarding fails).
        let decision = self.check_tape(&mut tape, bytes);
        // Gone at thread exit: the tape is then dropped with this frame.
        let _ = TAPE.try_with(|slot| slot.set(Some(tape)));
        decision
    }

    /// Which member names of one object this engine refuses as one name given twice: the rule
    /// to parse a document for [`Engine::check_doc`] with ([`Repeats::CaseFolded`] unless
    /// `Limits::refuse_case_variant_members` is off).
    #[inline]
    pub fn repeats(&self) -> Repeats {
        if self.limits.refuse_case_variant_members {
            Repeats::CaseFolded
        } else {
            Repeats::Exact
        }
    }

    /// Decides a request the caller has already parsed onto a [`crate::tape::Tape`] — for a
    /// gateway that parses the bytes once for its own use (routing, say) and then asks for a
    /// decision without parsing them again.
    ///
    /// Gives exactly [`Engine::check_slice`]'s decision on `doc.bytes()`, audit record included,
    /// whatever depth limit the caller parsed with: a document larger than `max_request_bytes`
    /// or not a request this engine reads (a member nested deeper than `max_payload_depth`
    /// included, which also bounds the whole document well inside the engine's own parse
    /// limit) is decided through the same full parse, so the input error is the same too. A
    /// document parsed with [`Repeats::Exact`] (as [`crate::tape::Tape::parse`] does) by an
    /// engine that refuses case-variant member names is parsed again with
    /// [`Engine::repeats`]; parse with that rule (`Tape::parse_with`) to parse once.
    pub fn check_doc(&self, doc: &crate::tape::Doc<'_>) -> Decision {
        let bytes = doc.bytes();
        if bytes.len() > self.limits.max_request_bytes {
            return self.check_slice_parsed(bytes);
        }
        // A document parsed without refusing case-variant member names, where the engine
        // refuses them, may hold some: the engine parses the bytes with its own rule.
        if self.repeats() == Repeats::CaseFolded && doc.repeats() == Repeats::Exact {
            return self.check_slice(bytes);
        }
        self.read_doc(
            doc,
            |view| self.decide_audited(view),
            || self.check_slice_parsed(bytes),
        )
    }

    /// The decision of the tape path, or of the full parse for bytes it does not read as a
    /// request.
    fn check_tape(&self, tape: &mut Tape, bytes: &[u8]) -> Decision {
        self.with_tape_view(
            tape,
            bytes,
            |view| self.decide_audited(view),
            || self.check_slice_parsed(bytes),
        )
    }

    /// The decision for `view`, and its audit record when a sink is set (with the revision read
    /// in the policy snapshot that decided).
    #[inline(always)]
    fn decide_audited<'r, J: crate::vm::Json<'r>>(&self, view: &RequestView<'r, J>) -> Decision {
        match &self.audit {
            None => self.decide(view),
            Some(sink) => {
                let (decision, revision) = self.decide_with_revision(view);
                self.audit_record(sink.as_ref(), view, &decision, revision);
                decision
            }
        }
    }

    /// The tape path alone, without the full-parse fallback: its decision, or `None` when the
    /// bytes are not a request it reads. For the differential tests and the fuzzers, which hold
    /// it to [`Engine::check`]; embedders call [`Engine::check_slice`]. Feature `internals`.
    #[cfg(feature = "internals")]
    pub fn check_slice_tape_only(&self, bytes: &[u8]) -> Option<Decision> {
        self.with_tape_view(
            &mut Tape::new(),
            bytes,
            |view| Some(self.decide(view)),
            || None,
        )
    }

    /// Parses `bytes` into `tape` and reads them as a request for `f`; `refused()` when they are
    /// not one the tape path reads (the strict parser then says why).
    #[inline(always)]
    fn with_tape_view<R>(
        &self,
        tape: &mut Tape,
        bytes: &[u8],
        f: impl FnOnce(&RequestView<'_, crate::tape::NodeRef<'_>>) -> R,
        refused: impl FnOnce() -> R,
    ) -> R {
        // Borrowed where it was built, as the view below is: moving the document out of the
        // `Result` would copy it just after the parse stored it.
        match &tape.parse_with(bytes, self.limits.parse_depth(), self.repeats()) {
            Ok(doc) => self.read_doc(doc, f, refused),
            Err(_) => refused(),
        }
    }

    /// Reads a parsed document as a request for `f`; `refused()` when it is not one the tape
    /// path reads.
    #[inline(always)]
    fn read_doc<R>(
        &self,
        doc: &crate::tape::Doc<'_>,
        f: impl FnOnce(&RequestView<'_, crate::tape::NodeRef<'_>>) -> R,
        refused: impl FnOnce() -> R,
    ) -> R {
        // Borrowed where it was built: moving the view out of the `Result` would be a `memcpy`
        // call per decision.
        match &RequestView::from_tape(doc.root(), self.limits.max_payload_depth) {
            Ok(view) => f(view),
            Err(NotARequest { escaped: true }) => self.with_decoded_view(doc.root(), f, refused),
            Err(_) => refused(),
        }
    }

    /// [`Engine::read_doc`] for a request with escapes in its member names or envelope
    /// strings: read again from decoded copies of them (allocating, off the usual path).
    #[cold]
    #[inline(never)]
    fn with_decoded_view<R>(
        &self,
        root: crate::tape::NodeRef<'_>,
        f: impl FnOnce(&RequestView<'_, crate::tape::NodeRef<'_>>) -> R,
        refused: impl FnOnce() -> R,
    ) -> R {
        let decoded = Decoded::of(root);
        match &RequestView::from_tape_decoded(root, self.limits.max_payload_depth, &decoded) {
            Ok(view) => f(view),
            Err(_) => refused(),
        }
    }

    /// Decides from a full parse into a [`Request`]: the input errors of
    /// [`Engine::check_slice`].
    fn check_slice_parsed(&self, bytes: &[u8]) -> Decision {
        match Request::from_slice(bytes, &self.limits) {
            Ok(request) => self.check(&request),
            Err(e) => {
                // Best effort to name the skill, operation and resource in the deny and its
                // record; never trusted for anything else. An over-limit body is not parsed at
                // all (regression: it was, in full, for this); any other is read leniently, so a
                // request refused for a duplicate member is still named (regression: its skill,
                // operation and resource were recorded as "").
                let named = match e {
                    RequestError::TooLarge { .. } => Named::default(),
                    _ => Named::from_slice(bytes),
                };
                self.refuse_input(named, &e)
            }
        }
    }

    /// Decides a request given as a parsed JSON value (a session line's `call`): a value that is
    /// not a valid request is denied with reason `input`.
    pub fn check_value(&self, value: serde_json::Value) -> Decision {
        self.check_value_measured(value, None)
    }

    /// [`Engine::check_value`] on a value read from `text_size` bytes of text (a session line's
    /// `call` member): the size limit counts those bytes, as `check_slice` would. Any bound at
    /// least the text's size will do while it is within the limit.
    pub(crate) fn check_value_measured(
        &self,
        value: serde_json::Value,
        text_size: Option<usize>,
    ) -> Decision {
        let named = Named::from_value(&value);
        match Request::from_value_measured(value, text_size, &self.limits) {
            Ok(request) => self.check(&request),
            Err(e) => self.refuse_input(named, &e),
        }
    }

    fn refuse_input(&self, named: Named, error: &RequestError) -> Decision {
        let decision = self.finish(Decision::deny(
            named.skill,
            vec![Reason::request(ReasonKind::Input, error.to_string())],
        ));
        if let Some(sink) = &self.audit {
            let request = Request::new(&*decision.skill, named.operation, named.resource);
            let revision = self
                .with_policy(|policy| policy.skill(&decision.skill).map(|s| s.revision))
                .flatten();
            self.audit_record(sink.as_ref(), &request.view(), &decision, revision);
        }
        decision
    }

    /// Applies observe mode to a computed decision.
    fn finish(&self, mut decision: Decision) -> Decision {
        if self.observe && decision.verdict != Verdict::Allow {
            decision.observed = Some(decision.verdict);
            decision.verdict = Verdict::Allow;
        }
        decision
    }

    /// Hands `sink` the record of `decision`; `revision` is the named skill's, from the policy
    /// snapshot that decided (no lock and no shared reference count per audited decision).
    fn audit_record<'r, J: crate::vm::Json<'r>>(
        &self,
        sink: &dyn AuditSink,
        request: &RequestView<'r, J>,
        decision: &Decision,
        revision: Option<Revision>,
    ) {
        let agent_id = request.agent.get("id").and_then(|v| v.as_str());
        sink.record(&AuditRecord {
            time: self.clock.now(),
            decision: decision.verdict,
            observed: decision.observed,
            skill: request.skill,
            capability: decision.capability.as_deref(),
            operation: request.operation,
            resource: request.resource,
            agent: agent_id.as_deref(),
            transaction: request.transaction,
            grant: decision.grant.as_deref().or(request.grant),
            reasons: &decision.reasons,
            revision,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    /// The hash of `name` as the skill index computes it.
    fn name_hash(name: &str) -> u64 {
        use std::hash::BuildHasher;
        NameHashBuild::default().hash_one(name)
    }

    #[test]
    fn skill_names_spread_over_the_low_bits_the_table_picks_buckets_from() {
        // Names that differ only in their last bytes, in their first bytes, or in length.
        let families: [&dyn Fn(usize) -> String; 3] = [
            &|i| format!("calendar-skill-{i}"),
            &|i| format!("{i}-calendar-skill"),
            &|i| "s".repeat(i % 40 + 1) + &(i / 40).to_string(),
        ];
        for family in families {
            let buckets: std::collections::HashSet<u64> =
                (0..4096).map(|i| name_hash(&family(i)) & 1023).collect();
            // 4,096 uniform hashes fill ~1,005 of 1,024 buckets.
            assert!(buckets.len() > 950, "{} of 1024 buckets", buckets.len());
        }
        assert_ne!(name_hash("ab"), name_hash("ba"));
        assert_ne!(name_hash(""), name_hash("a"));
    }

    #[test]
    fn a_failed_reload_keeps_the_last_good_policy() {
        let dir = std::env::temp_dir().join(format!("capgate-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("p.cap");
        let good = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#;
        std::fs::write(&file, good).unwrap();
        let engine = Engine::builder(
            PolicyLoader::new(Limits::DEFAULT)
                .finish_paths(&[&file])
                .unwrap(),
        )
        .build();
        let request = Request::new("s", "call", "tool:t");
        assert_eq!(engine.check(&request).verdict, Verdict::Allow);
        std::fs::write(
            &file,
            "skill \"s\" { version \"1\" capability \"c\" { resource tool }",
        )
        .unwrap();
        let error = engine.reload_paths(&[&file]).unwrap_err();
        assert!(!error.diagnostics.is_empty());
        assert_eq!(engine.check(&request).verdict, Verdict::Allow);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn loaded(text: &str) -> PolicySet {
        let mut loader = PolicyLoader::new(Limits::DEFAULT);
        loader.add_text("p.cap", text.to_owned(), PolicyFormat::Cap, None);
        loader.finish().unwrap()
    }

    #[test]
    fn skill_names_from_requests_are_never_interned() {
        // Interned names live as long as the process: text from a request must not grow it.
        let engine = Engine::builder(loaded(
            r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#,
        ))
        .build();
        let decision = engine.check(&Request::new("no-such-skill", "call", "tool:t"));
        assert_eq!(decision.verdict, Verdict::Deny);
        assert_eq!(&*decision.skill, "no-such-skill");
        assert!(!decision.skill.is_interned());
        let refused = engine.check_slice(br#"{"skill":"unread-skill","skill":"twice"}"#);
        assert_eq!(refused.verdict, Verdict::Deny);
        assert!(!refused.skill.is_interned());
    }

    #[test]
    fn decisions_carry_the_names_of_the_policy_in_force_after_a_reload() {
        // Names are interned by the policy, not cached per thread: after a reload a decision
        // carries the new policy's.
        let policy = |skill: &str, capability: &str| {
            loaded(&format!(
                r#"skill "{skill}" {{ version "1" capability "{capability}" {{ resource tool "t" operations call justification "j" }} }}"#
            ))
        };
        let engine = Engine::builder(policy("s", "first")).build();
        let request = Request::new("s", "call", "tool:t");
        for _ in 0..3 {
            let decision = engine.check(&request);
            assert_eq!(decision.capability.as_deref(), Some("first"));
            assert_eq!(&*decision.skill, "s");
            // Copies of the interned names: no reference count written per decision.
            assert!(decision.skill.is_interned());
            assert!(decision.capability.as_ref().is_some_and(Name::is_interned));
        }
        engine.reload(policy("s", "second"));
        for _ in 0..3 {
            assert_eq!(engine.check(&request).capability.as_deref(), Some("second"));
        }
        // Another thread gets its own copies, with the same text.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                assert_eq!(engine.check(&request).capability.as_deref(), Some("second"));
            });
        });
    }

    /// Keeps the revision of every audit record.
    #[derive(Debug, Default)]
    struct Revisions(std::sync::Mutex<Vec<Option<String>>>);

    impl AuditSink for Revisions {
        fn record(&self, record: &AuditRecord<'_>) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(record.revision.map(|revision| revision.to_string()));
        }
    }

    /// Decides, from its `record`, another request from bytes on the same thread: the nested
    /// decision finds the thread's tape taken by the outer one.
    #[derive(Debug)]
    struct Nested {
        engine: Engine,
        bytes: &'static [u8],
        verdicts: std::sync::Mutex<Vec<Verdict>>,
    }

    impl AuditSink for Nested {
        fn record(&self, _: &AuditRecord<'_>) {
            let verdict = self.engine.check_slice(self.bytes).verdict;
            self.verdicts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(verdict);
        }
    }

    #[test]
    fn a_decision_from_bytes_nested_in_one_from_bytes_parses_into_its_own_tape() {
        let text = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#;
        let inner = br#"{"skill":"s","operation":"call","resource":"tool:t"}"#;
        let sink = Arc::new(Nested {
            engine: Engine::builder(loaded(text)).build(),
            bytes: inner,
            verdicts: std::sync::Mutex::default(),
        });
        let engine = Engine::builder(loaded(text)).audit(sink.clone()).build();
        let outer = [
            (
                &br#"{"skill":"s","operation":"call","resource":"tool:t"}"#[..],
                Verdict::Allow,
            ),
            (
                br#"{"skill":"s","operation":"call","resource":"tool:other"}"#,
                Verdict::Deny,
            ),
            (
                br#"{"skill":"s","operation":"call","resource":"tool:t"}"#,
                Verdict::Allow,
            ),
        ];
        for (bytes, verdict) in outer {
            assert_eq!(engine.check_slice(bytes).verdict, verdict);
        }
        assert_eq!(*sink.verdicts.lock().unwrap(), vec![Verdict::Allow; 3]);
        // The thread's tape is back in its slot and still decides.
        assert_eq!(sink.engine.check_slice(inner).verdict, Verdict::Allow);
    }

    #[test]
    fn audit_records_carry_the_revision_of_the_policy_in_force() {
        let v1 = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#;
        let v2 = r#"skill "s" { version "2" capability "c" { resource tool "t" operations call justification "j" } }"#;
        let sink = Arc::new(Revisions::default());
        let engine = Engine::builder(loaded(v1)).audit(sink.clone()).build();
        let revision = |engine: &Engine| {
            let policy = engine.policy();
            policy.skill("s").unwrap().revision.to_string()
        };
        let first = revision(&engine);
        let manifest = engine.policy().skill("s").unwrap().manifest.clone();
        assert_eq!(
            first,
            Revision::of_manifest(manifest.as_bytes()).to_string()
        );
        let request = Request::new("s", "call", "tool:t");
        engine.check(&request);
        engine.check_slice(br#"{"skill":"s","operation":"call","resource":"tool:t"}"#);
        engine.reload(loaded(v2));
        let second = revision(&engine);
        assert_ne!(first, second);
        engine.check(&request);
        // An unknown skill has no revision.
        engine.check(&Request::new("nobody", "call", "tool:t"));
        let seen = sink.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![Some(first.clone()), Some(first), Some(second), None]
        );
    }

    #[test]
    fn a_reload_is_seen_by_every_thread_on_its_next_decision() {
        let allow = r#"skill "s" { version "1" capability "c" { resource tool "t" operations call justification "j" } }"#;
        let deny = r#"skill "s" { version "2" capability "c" { resource tool "other" operations call justification "j" } }"#;
        let engine = Engine::builder(loaded(allow)).build();
        let request = Request::new("s", "call", "tool:t");
        let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
        let (to_main, from_worker) = std::sync::mpsc::channel::<Verdict>();
        std::thread::scope(|scope| {
            let (engine, request, to_main) = (&engine, &request, to_main.clone());
            scope.spawn(move || {
                // Warm this thread's snapshot, then decide again after the reload.
                to_main.send(engine.check(request).verdict).unwrap();
                from_main.recv().unwrap();
                to_main.send(engine.check(request).verdict).unwrap();
            });
            assert_eq!(from_worker.recv().unwrap(), Verdict::Allow);
            engine.reload(loaded(deny));
            to_worker.send(()).unwrap();
            assert_eq!(from_worker.recv().unwrap(), Verdict::Deny);
        });
        // And on this thread, whose snapshot was never taken before the reload.
        assert_eq!(engine.check(&request).verdict, Verdict::Deny);
    }

    #[test]
    fn engine_is_send_and_sync() {
        assert_send_sync::<Engine>();
        assert_send_sync::<Decision>();
    }
}
