//! The HTTP API: the router and the decision, health and metrics endpoints.
//!
//! | endpoint | credential | answers |
//! |---|---|---|
//! | `POST /v1/check` | PEP bearer token | the SPEC §4 decision; 400 for a malformed request |
//! | `POST /v1/reload`, `/v1/grants`, ... | operator bearer token | see [`crate::operator`] |
//! | `GET /healthz` | none | 200 while the process serves |
//! | `GET /readyz` | none | 200 once a policy is loaded; 503 before |
//! | `GET /metrics` | none | Prometheus text format |

use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use capgate::{Decision, ReasonKind, Verdict};

use crate::body;
use crate::error::ApiError;
use crate::operator;
use crate::state::AppState;

/// The server's router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/check", post(check))
        .merge(operator::routes())
        .merge(crate::subrequest::routes())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), in_flight))
        .with_state(state)
}

/// Counts the request in `capgate_in_flight_requests` while it is served.
async fn in_flight(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let gauge = state.metrics.in_flight().clone();
    gauge.inc();
    let response = next.run(request).await;
    gauge.dec();
    response
}

/// `POST /v1/check`.
async fn check(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    if let Err(error) = state.require_pep(&headers) {
        return error.into_response();
    }
    let bytes = match body::read(&headers, body, state.body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let started = Instant::now();
    let decision = state.engine.check_slice(&bytes);
    let seconds = started.elapsed().as_secs_f64();
    state.metrics.decided(&decision.skill, &decision, seconds);
    if is_malformed(&decision) {
        let message = decision
            .reasons
            .first()
            .map_or_else(String::new, |r| r.message.clone());
        let mut body = ApiError::bad_request(message).body();
        if let (Some(object), Ok(decision)) =
            (body.as_object_mut(), serde_json::to_value(&decision))
        {
            object.insert("decision".to_owned(), decision);
        }
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    axum::Json(decision).into_response()
}

/// A deny for the request itself (not JSON, not a request, past a limit): every reason is
/// `input` and names no capability.
fn is_malformed(decision: &Decision) -> bool {
    decision.verdict == Verdict::Deny
        && decision.observed.is_none()
        && !decision.reasons.is_empty()
        && decision
            .reasons
            .iter()
            .all(|r| r.constraint == ReasonKind::Input && r.capability.is_none())
}

/// `GET /healthz`.
async fn healthz() -> Response {
    axum::Json(serde_json::json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: 503 before the first load; after it 200, with the last reload's error if it
/// failed (the server still serves the last good policy).
async fn readyz(State(state): State<AppState>) -> Response {
    let error = state.readiness.last_error();
    if !state.readiness.is_loaded() {
        let body = serde_json::json!({"status": "not ready", "reload_error": error});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    let body = match error {
        None => serde_json::json!({"status": "ready"}),
        Some(error) => serde_json::json!({"status": "ready", "reload_error": error}),
    };
    axum::Json(body).into_response()
}

/// `GET /metrics`.
async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take this method",
    )
}
