//! What every handler shares: the engine, the credentials, readiness and the metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use axum::http::HeaderMap;
use capgate::Engine;

use crate::audit::QueuedAudit;
use crate::body::BodyLimits;
use crate::credential::{TokenFile, bearer};
use crate::error::ApiError;
use crate::gateway::Gateway;
use crate::identity::Identities;
use crate::metrics::Metrics;
use crate::reload::Reloader;

/// Whether the server is ready to take traffic, and the last reload's error.
#[derive(Debug, Default)]
pub struct Readiness {
    loaded: AtomicBool,
    last_error: RwLock<Option<String>>,
}

impl Readiness {
    /// Records a successful load.
    pub fn loaded(&self) {
        self.loaded.store(true, Ordering::Release);
        *self
            .last_error
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Records a failed reload; the server keeps the policy it has.
    pub fn failed(&self, error: String) {
        *self
            .last_error
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(error);
    }

    /// True once a policy has loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// The last reload's error, if it failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The state every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The engine, stateful, with the server's clock.
    pub engine: Arc<Engine>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The credential of policy-enforcement points (`POST /v1/check`).
    pub pep: Arc<TokenFile>,
    /// The operator's credential; without one the operator API refuses every call.
    pub operator: Option<Arc<TokenFile>>,
    /// Readiness.
    pub readiness: Arc<Readiness>,
    /// Reloads the policy on request.
    pub reloader: Reloader,
    /// Body limits.
    pub body: BodyLimits,
    /// The audit log, if any.
    pub audit: Option<Arc<QueuedAudit>>,
    /// The engine as the gateway modes decide with it.
    pub gateway: Gateway,
    /// The agents' credentials and what they bind (`--identities`).
    pub identities: Arc<Identities>,
}

impl AppState {
    /// Accepts the request if it carries the PEP token.
    ///
    /// # Errors
    /// 401 otherwise (counted).
    pub fn require_pep(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match bearer(headers) {
            Some(token) if self.pep.accepts(token) => Ok(()),
            _ => {
                self.metrics.unauthorized();
                Err(ApiError::unauthorized(
                    "this endpoint takes the policy-enforcement point's bearer token",
                ))
            }
        }
    }

    /// Accepts the request if it carries the operator token.
    ///
    /// # Errors
    /// 401 otherwise (counted), and always when the server has no operator token.
    pub fn require_operator(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        match (bearer(headers), &self.operator) {
            (Some(token), Some(operator)) if operator.accepts(token) => Ok(()),
            _ => {
                self.metrics.unauthorized();
                Err(ApiError::unauthorized(
                    "the operator API takes the operator's bearer token (--operator-token-file)",
                ))
            }
        }
    }
}
