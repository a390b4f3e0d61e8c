//! The operator API, behind the operator's bearer token (`--operator-token-file`).
//!
//! | endpoint | body | does |
//! |---|---|---|
//! | `POST /v1/reload` | — | reloads the policy; 200 with the skill count, 422 with every problem |
//! | `POST /v1/grants` | `{"skill", "capability", "transaction"?}` | issues a grant; 201 `{"token"}` (128 OS-random bits, hex) |
//! | `DELETE /v1/grants/{token}` | — | revokes a grant |
//! | `POST /v1/revocations` | `{"skill", "capability"?}` | revokes a skill or one capability |
//! | `POST /v1/revocations/lift` | `{"skill", "capability"?}` | lifts it; `{"lifted": bool}` |
//! | `POST /v1/transactions` | `{"transaction"}` | begins a transaction |
//! | `DELETE /v1/transactions/{id}` | — | ends it, and its grants |
//! | `POST /v1/approvals` | `{"skill"}` | records the skill's first-use approval |
//!
//! Each action, done or refused by the engine, is one line in the audit log
//! (`{"time", "operator": ACTION, ..., "ok": bool, "error"?}`).

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use capgate::EngineError;
use capgate::runtime::StateError;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::body;
use crate::error::ApiError;
use crate::reload::ReloadOutcome;
use crate::state::AppState;

/// The operator routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/reload", post(reload))
        .route("/v1/grants", post(grant))
        .route("/v1/grants/{token}", delete(revoke_grant))
        .route("/v1/revocations", post(revoke))
        .route("/v1/revocations/lift", post(lift))
        .route("/v1/transactions", post(begin))
        .route("/v1/transactions/{id}", delete(end))
        .route("/v1/approvals", post(approve))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    skill: String,
    capability: String,
    transaction: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetBody {
    skill: String,
    capability: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TransactionBody {
    transaction: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkillBody {
    skill: String,
}

/// Authenticates the operator and reads a JSON body of type `T`.
async fn operator_body<T: serde::de::DeserializeOwned>(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<T, ApiError> {
    state.require_operator(headers)?;
    let bytes = body::read(headers, body, state.body).await?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(format!("invalid body: {e}")))
}

/// Writes the operator action to the audit log.
fn audit(state: &AppState, action: &str, mut fields: Value, result: &Result<(), String>) {
    let Some(log) = &state.audit else { return };
    if let Some(object) = fields.as_object_mut() {
        object.insert(
            "time".to_owned(),
            json!(state.engine.clock().now().to_rfc3339()),
        );
        object.insert("operator".to_owned(), json!(action));
        object.insert("ok".to_owned(), json!(result.is_ok()));
        if let Err(error) = result {
            object.insert("error".to_owned(), json!(error));
        }
    }
    let Ok(mut line) = serde_json::to_vec(&fields) else {
        return;
    };
    line.push(b'\n');
    // A lost line is counted by the log (`capgate_audit_failures_total`).
    if !log.push(line) {
        tracing::error!(action, "an operator action's audit record was lost");
    }
}

/// The answer for an engine error.
fn engine_error(error: &EngineError) -> ApiError {
    let status = match error {
        EngineError::UnknownSkill(_) | EngineError::UnknownCapability { .. } => {
            StatusCode::NOT_FOUND
        }
        EngineError::State(StateError::UnknownGrant(_) | StateError::TransactionNotOpen(_)) => {
            StatusCode::NOT_FOUND
        }
        EngineError::State(_) => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::CONFLICT => "conflict",
        _ => "internal",
    };
    ApiError::new(status, code, error.to_string())
}

/// Runs an engine action, audits it and answers.
fn act<T>(
    state: &AppState,
    action: &str,
    fields: Value,
    result: Result<T, EngineError>,
    ok: impl FnOnce(T) -> Response,
) -> Response {
    let audited = result.as_ref().map(|_| ()).map_err(ToString::to_string);
    audit(state, action, fields, &audited);
    match result {
        Ok(value) => ok(value),
        Err(error) => engine_error(&error).into_response(),
    }
}

async fn reload(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(error) = state.require_operator(&headers) {
        return error.into_response();
    }
    let outcome = state.reloader.reload().await;
    let result = match &outcome {
        ReloadOutcome::Loaded { .. } => Ok(()),
        ReloadOutcome::Failed(error) => Err(error.clone()),
    };
    audit(&state, "reload", json!({}), &result);
    match outcome {
        ReloadOutcome::Loaded { skills } => axum::Json(json!({"skills": skills})).into_response(),
        ReloadOutcome::Failed(error) => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "policy_invalid", error).into_response()
        }
    }
}

async fn grant(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let request: GrantBody = match operator_body(&state, &headers, body).await {
        Ok(request) => request,
        Err(error) => return error.into_response(),
    };
    let token = match new_token() {
        Ok(token) => token,
        Err(error) => return error.into_response(),
    };
    let result = state.engine.issue_grant(
        &request.skill,
        &request.capability,
        request.transaction.as_deref(),
        Some(token),
    );
    let fields = json!({
        "skill": request.skill,
        "capability": request.capability,
        "transaction": request.transaction,
        "grant": result.as_ref().ok(),
    });
    act(&state, "grant", fields, result, |token| {
        (StatusCode::CREATED, axum::Json(json!({"token": token}))).into_response()
    })
}

/// A grant token: 128 bits from the operating system's generator, as 32 hex digits after `g-`.
fn new_token() -> Result<String, ApiError> {
    let mut bytes = [0_u8; 16];
    getrandom::fill(&mut bytes).map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the operating system's random generator failed",
        )
    })?;
    let mut token = String::with_capacity(34);
    token.push_str("g-");
    for byte in bytes {
        token.push_str(&format!("{byte:02x}"));
    }
    Ok(token)
}

async fn revoke_grant(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    if let Err(error) = state.require_operator(&headers) {
        return error.into_response();
    }
    let result = state.engine.revoke_grant(&token);
    act(&state, "revoke", json!({"grant": token}), result, |()| {
        StatusCode::NO_CONTENT.into_response()
    })
}

async fn revoke(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let target: TargetBody = match operator_body(&state, &headers, body).await {
        Ok(target) => target,
        Err(error) => return error.into_response(),
    };
    let result = match &target.capability {
        None => state.engine.revoke_skill(&target.skill),
        Some(capability) => state.engine.revoke_capability(&target.skill, capability),
    };
    let fields = json!({"skill": target.skill, "capability": target.capability});
    act(&state, "revoke", fields, result, |()| {
        StatusCode::NO_CONTENT.into_response()
    })
}

async fn lift(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let target: TargetBody = match operator_body(&state, &headers, body).await {
        Ok(target) => target,
        Err(error) => return error.into_response(),
    };
    let result = match &target.capability {
        None => state.engine.lift_skill(&target.skill),
        Some(capability) => state.engine.lift_capability(&target.skill, capability),
    };
    let fields = json!({"skill": target.skill, "capability": target.capability});
    act(&state, "lift", fields, result, |lifted| {
        axum::Json(json!({"lifted": lifted})).into_response()
    })
}

async fn begin(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let request: TransactionBody = match operator_body(&state, &headers, body).await {
        Ok(request) => request,
        Err(error) => return error.into_response(),
    };
    let result = state.engine.begin_transaction(&request.transaction);
    let fields = json!({"transaction": request.transaction});
    act(&state, "begin_transaction", fields, result, |()| {
        StatusCode::NO_CONTENT.into_response()
    })
}

async fn end(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(transaction): Path<String>,
) -> Response {
    if let Err(error) = state.require_operator(&headers) {
        return error.into_response();
    }
    let result = state.engine.end_transaction(&transaction);
    act(
        &state,
        "end_transaction",
        json!({"transaction": transaction}),
        result,
        |()| StatusCode::NO_CONTENT.into_response(),
    )
}

async fn approve(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let request: SkillBody = match operator_body(&state, &headers, body).await {
        Ok(request) => request,
        Err(error) => return error.into_response(),
    };
    let result = state.engine.approve(&request.skill);
    act(
        &state,
        "approve",
        json!({"skill": request.skill}),
        result,
        |()| StatusCode::NO_CONTENT.into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_tokens_are_128_random_bits_in_hex() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 34);
        assert!(a.starts_with("g-"));
        assert!(a[2..].bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
