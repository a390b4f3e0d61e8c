//! The HTTP auth-subrequest dialects: a front (nginx `auth_request`, Traefik `forwardAuth`,
//! Envoy's HTTP `ext_authz`) asks capgate about each call before it forwards it.
//!
//! | dialect | endpoint | the call is |
//! |---|---|---|
//! | `forward-auth` | any method, `/v1/auth/forward` | `X-Forwarded-Method`, `-Proto`, `-Host`, `-Uri` |
//! | `envoy-http` | the call's method, `/v1/auth/envoy` + the call's path | the subrequest's own method, path after the prefix, `Host`, `X-Forwarded-Proto` |
//!
//! The front authenticates with the PEP token (`Authorization: Bearer`, which it sets on the
//! subrequest in place of the client's); only then are the `X-Forwarded-*` headers believed.
//! The agent is named by its own credential in `X-Capgate-Credential`, which the front passes
//! through and strips before the upstream; `--identities` binds it to skill, agent, context and
//! autonomy. Answers: 200 allow; 403 deny or approval required (with `x-capgate-reason` and
//! `x-capgate-approval-required`, and the decision as the body); 401 without the PEP token
//! (`unauthorized`) or without a known agent credential (`unknown_agent`) — 401, because a
//! front passes 401 and 403 on and turns any other status into an error.
//!
//! The body: a subrequest that carries one (Traefik's `forwardBody`, Envoy's
//! `with_request_body`) is the call's; an empty one means the front did not forward it, unless
//! `X-Forwarded-Content-Length` says the call had none (`0` or empty). Envoy's
//! `x-envoy-auth-partial-body: true` marks a partial body.

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use crate::body;
use crate::call::{Body as CallBody, HttpCall, marked_partial};
use crate::error::ApiError;
use crate::gateway::{APPROVAL_HEADER, Outcome, REASON_HEADER};
use crate::identity::Identity;
use crate::state::AppState;

/// The header an agent's credential travels in.
pub const CREDENTIAL_HEADER: &str = "x-capgate-credential";
/// The path prefix of the `envoy-http` dialect.
pub const ENVOY_PREFIX: &str = "/v1/auth/envoy";

/// The dialects' routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/auth/forward", any(forward_auth))
        .route(ENVOY_PREFIX, any(envoy_http))
        .route(&format!("{ENVOY_PREFIX}/{{*path}}"), any(envoy_http))
}

/// The identity of the agent whose call this is.
fn agent(state: &AppState, headers: &HeaderMap) -> Result<Identity, ApiError> {
    let credential = headers
        .get(CREDENTIAL_HEADER)
        .map(|v| v.as_bytes())
        .filter(|c| !c.is_empty());
    match credential.and_then(|c| state.identities.lookup(c)) {
        Some(identity) => Ok(identity.clone()),
        None => {
            state.metrics.unauthorized();
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unknown_agent",
                "the call carries no agent credential that --identities knows (X-Capgate-Credential)",
            ))
        }
    }
}

fn text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
}

/// What of the body the front sent.
fn body_state<'a>(headers: &HeaderMap, bytes: &'a [u8]) -> CallBody<'a> {
    if marked_partial(headers) {
        return CallBody::Partial;
    }
    if !bytes.is_empty() {
        return CallBody::Whole(bytes);
    }
    match headers
        .get("x-forwarded-content-length")
        .map(|v| v.as_bytes().trim_ascii())
    {
        Some(b"" | b"0") => CallBody::Whole(bytes),
        _ => CallBody::NotForwarded,
    }
}

/// The answer for an outcome.
fn answer(outcome: &Outcome) -> Response {
    if outcome.allowed() {
        return StatusCode::OK.into_response();
    }
    let mut response = (
        StatusCode::FORBIDDEN,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        outcome.body(),
    )
        .into_response();
    if let Some(reason) = outcome.reason_header() {
        response.headers_mut().insert(REASON_HEADER, reason);
    }
    if let Some(approval) = outcome.approval_header() {
        response.headers_mut().insert(APPROVAL_HEADER, approval);
    }
    response
}

async fn forward_auth(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    if let Err(error) = state.require_pep(&headers) {
        return error.into_response();
    }
    let identity = match agent(&state, &headers) {
        Ok(identity) => identity,
        Err(error) => return error.into_response(),
    };
    let (Some(method), Some(host), Some(uri)) = (
        text(&headers, "x-forwarded-method"),
        text(&headers, "x-forwarded-host"),
        text(&headers, "x-forwarded-uri"),
    ) else {
        return ApiError::bad_request(
            "forward-auth needs X-Forwarded-Method, X-Forwarded-Host and X-Forwarded-Uri",
        )
        .into_response();
    };
    let scheme = text(&headers, "x-forwarded-proto").unwrap_or("http");
    let bytes = match body::read(&headers, body, state.body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let call = HttpCall {
        method,
        scheme,
        authority: host,
        path_and_query: uri,
        headers: &headers,
        body: body_state(&headers, &bytes),
    };
    let outcome = state.gateway.decide(&identity, &call);
    answer(&outcome)
}

async fn envoy_http(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(error) = state.require_pep(&headers) {
        return error.into_response();
    }
    let identity = match agent(&state, &headers) {
        Ok(identity) => identity,
        Err(error) => return error.into_response(),
    };
    let Some(host) = text(&headers, "host") else {
        return ApiError::bad_request("envoy-http needs the call's Host").into_response();
    };
    let scheme = text(&headers, "x-forwarded-proto").unwrap_or("http");
    // The call's path is the subrequest's, as sent, after the prefix.
    let raw = uri.path_and_query().map_or("", |p| p.as_str());
    let path_and_query = raw.strip_prefix(ENVOY_PREFIX).unwrap_or(raw);
    let path_and_query = if path_and_query.is_empty() {
        "/"
    } else {
        path_and_query
    };
    let bytes = match body::read(&headers, body, state.body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let call = HttpCall {
        method: method.as_str(),
        scheme,
        authority: host,
        path_and_query,
        headers: &headers,
        body: body_state(&headers, &bytes),
    };
    let outcome = state.gateway.decide(&identity, &call);
    answer(&outcome)
}
