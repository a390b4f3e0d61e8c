//! Building an [`Engine`]: its clock, state store, audit sink, limits and mode.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::limits::Limits;
use crate::runtime::{Clock, StateError, StateStore, SystemClock};

use super::rate_key::RateKeys;
use super::snapshot::NEXT_ENGINE_ID;
use super::{AuditSink, Engine, PolicySet, SkillIndex};

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
    /// A builder with the defaults: the system clock, no state store, no audit sink, the
    /// default limits, enforcing, rate-limit keys unkeyed.
    pub(super) fn new(policy: PolicySet) -> Self {
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
