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
//!
//! This file is the facade: the public methods of [`Engine`] and how a request reaches a
//! decision (the thread's tape, the full parse, observe mode, the audit record). The rest lives
//! beside it: the decision path in `decide.rs` (a request, its candidates and their steps), the
//! reasons of a deny in `explain.rs`, each thread's policy snapshot in `snapshot.rs`, the
//! operator API of a stateful engine (grants, transactions, revocation, approvals) in
//! `state.rs`, the request as a decision reads it in `view.rs`, and rate-limit keys in
//! `rate_key.rs`.

mod audit;
mod builder;
mod decide;
mod decision;
mod explain;
mod index;
mod load;
mod named;
mod rate_key;
mod request;
mod snapshot;
mod state;
mod view;

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

pub use crate::vm::TestReport;
pub use audit::{AuditRecord, AuditSink, AuditWriteFailures, JsonLinesAudit};
pub use builder::{EngineBuilder, EngineError, MIN_RATE_KEY_SECRET_BYTES};
pub use decision::{Decision, Reason, ReasonKind, Verdict};
pub use explain::CandidateTrace;
pub use index::SkillIndex;
pub use load::{Diagnostic, LoadError, PolicyFormat, PolicyLoader, PolicySet};
pub use request::{
    Request, RequestError, depth_exceeds, parse_json_slice_with_depth, parse_json_with_depth,
    parse_strict_json,
};

use crate::bytecode::program::CompiledSkill;
use crate::limits::Limits;
use crate::name::Name;
use crate::revision::Revision;
use crate::runtime::{Clock, StateStore};
use crate::tape::{Repeats, Tape};
use index::removed_capabilities;
use named::Named;
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
        EngineBuilder::new(policy)
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

    /// Traces every candidate's every constraint (for `:explain`). Stateless: lifetimes and
    /// rate limits are not consulted.
    pub fn explain(&self, request: &Request) -> Vec<CandidateTrace> {
        explain::traces(self, &request.view())
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
            None => decide::decide(self, view),
            Some(sink) => {
                let (decision, revision) = decide::decide_with_revision(self, view);
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
            |view| Some(decide::decide(self, view)),
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

    /// Decides a request whose call has a payload that cannot be read as its upstream will
    /// read it — a body that is not JSON, is compressed, arrived only in part or was not
    /// forwarded — `why` saying which. The request's own `payload` member is ignored. Every
    /// candidate capability whose constraints read the payload
    /// ([`CompiledCapability::reads_payload`](crate::compiled::CompiledCapability::reads_payload))
    /// fails with `input`, so a payload constraint is never skipped; the others decide as
    /// usual. The gateway modes of `capgate serve` decide such calls with it.
    pub fn check_value_without_payload(&self, mut value: serde_json::Value, why: &str) -> Decision {
        if let Some(object) = value.as_object_mut() {
            object.remove("payload");
        }
        self.check_value_read(value, None, Some(why))
    }

    /// [`Engine::check_value`] on a value read from `text_size` bytes of text (a session line's
    /// `call` member): the size limit counts those bytes, as `check_slice` would. Any bound at
    /// least the text's size will do while it is within the limit.
    pub(crate) fn check_value_measured(
        &self,
        value: serde_json::Value,
        text_size: Option<usize>,
    ) -> Decision {
        self.check_value_read(value, text_size, None)
    }

    /// Reads `value` as a request and decides it, with its payload unreadable for the reason
    /// given, if one is.
    fn check_value_read(
        &self,
        value: serde_json::Value,
        text_size: Option<usize>,
        payload_unreadable: Option<&str>,
    ) -> Decision {
        let named = Named::from_value(&value);
        match Request::from_value_measured(value, text_size, &self.limits) {
            Ok(request) => {
                let mut view = request.view();
                view.payload_unreadable = payload_unreadable;
                self.decide_audited(&view)
            }
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
