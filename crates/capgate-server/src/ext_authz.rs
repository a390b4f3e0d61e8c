//! Envoy external authorization over gRPC (`envoy.service.auth.v3.Authorization/Check`).
//!
//! Envoy calls `Check` for each request of a route with the `ext_authz` filter. The call is
//! the request's method, scheme, host, path with query, headers and — when the filter has
//! `with_request_body` — its body ([`crate::call`] decides what of it is a payload). Who is
//! calling comes from the route's `check_settings.context_extensions`, which Envoy's
//! configuration sets and the client cannot:
//!
//! | key | value |
//! |---|---|
//! | `capgate.skill` | the skill (required) |
//! | `capgate.agent` | the request's `agent`, as JSON |
//! | `capgate.context` | the request's `context`, as JSON |
//! | `capgate.autonomy` | 0–100 |
//!
//! Envoy authenticates to capgate with the PEP token as `Bearer` in one `authorization`
//! metadata value (`grpc_service.initial_metadata`). Answers: allow → `OK`, removing `x-capgate-transaction`
//! and `x-capgate-grant` before the upstream; deny or approval required → `PERMISSION_DENIED`
//! with a 403 whose body is the decision, plus the `x-capgate-reason` (and for an approval,
//! `x-capgate-approval-required`) header; a caller without the PEP token →
//! `UNAUTHENTICATED`; a route without `capgate.skill` → `PERMISSION_DENIED`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use envoy_types::ext_authz::v3::pb::{
    Authorization, CheckRequest, CheckResponse, DeniedHttpResponse, HeaderValue as EnvoyHeader,
    HeaderValueOption, HttpResponse, HttpStatus, OkHttpResponse,
};
use envoy_types::pb::google::rpc;
use serde_json::Value;

use crate::call::{Body, GRANT_HEADER, HttpCall, TRANSACTION_HEADER, marked_partial};
use crate::credential::{TokenFile, bearer_token};
use crate::gateway::{APPROVAL_HEADER, Gateway, REASON_HEADER};
use crate::identity::Identity;
use crate::metrics::Metrics;

/// gRPC status codes.
const OK: i32 = 0;
const PERMISSION_DENIED: i32 = 7;
/// HTTP 403, as Envoy's `StatusCode` enum spells it.
const FORBIDDEN: i32 = 403;

/// The ext_authz service.
#[derive(Debug, Clone)]
pub struct ExtAuthz {
    gateway: Gateway,
    pep: Arc<TokenFile>,
    metrics: Arc<Metrics>,
}

impl ExtAuthz {
    /// The service, deciding with `gateway` for callers with the PEP token.
    pub fn new(gateway: Gateway, pep: Arc<TokenFile>, metrics: Arc<Metrics>) -> Self {
        ExtAuthz {
            gateway,
            pep,
            metrics,
        }
    }

    /// The tonic service to serve.
    pub fn into_service(self) -> envoy_types::ext_authz::v3::pb::AuthorizationServer<ExtAuthz> {
        envoy_types::ext_authz::v3::pb::AuthorizationServer::new(self)
    }
}

#[tonic::async_trait]
impl Authorization for ExtAuthz {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
        // Exactly one `authorization` value, as for the HTTP endpoints.
        let mut values = request.metadata().get_all("authorization").iter();
        let token = match (values.next(), values.next()) {
            (Some(value), None) => bearer_token(value.as_bytes()),
            _ => None,
        };
        if !token.is_some_and(|t| self.pep.accepts(t)) {
            self.metrics.unauthorized();
            return Err(tonic::Status::unauthenticated(
                "ext_authz takes the policy-enforcement point's bearer token",
            ));
        }
        Ok(tonic::Response::new(self.decide(&request.into_inner())))
    }
}

impl ExtAuthz {
    /// The answer to one `Check`.
    pub fn decide(&self, check: &CheckRequest) -> CheckResponse {
        let Some(attributes) = check.attributes.as_ref() else {
            return denied_without_decision("the check request has no attributes");
        };
        let identity = match identity(&attributes.context_extensions) {
            Ok(identity) => identity,
            Err(why) => return denied_without_decision(&why),
        };
        let Some(http) = attributes.request.as_ref().and_then(|r| r.http.as_ref()) else {
            return denied_without_decision("the check request has no HTTP request");
        };
        let headers = header_map(&http.headers);
        let raw = if http.raw_body.is_empty() {
            http.body.as_bytes()
        } else {
            &http.raw_body
        };
        let body = body_state(&headers, raw, http.size);
        // Envoy's `path` holds the query too.
        let call = HttpCall {
            method: &http.method,
            scheme: if http.scheme.is_empty() {
                "http"
            } else {
                &http.scheme
            },
            authority: &http.host,
            path_and_query: &http.path,
            headers: &headers,
            body,
        };
        let outcome = self.gateway.decide(&identity, &call);
        if outcome.allowed() {
            return CheckResponse {
                status: Some(status(OK, "")),
                http_response: Some(HttpResponse::OkResponse(OkHttpResponse {
                    headers_to_remove: vec![
                        TRANSACTION_HEADER.as_str().to_owned(),
                        GRANT_HEADER.as_str().to_owned(),
                    ],
                    ..OkHttpResponse::default()
                })),
                ..CheckResponse::default()
            };
        }
        let mut extra = Vec::new();
        if let Some(reason) = outcome.reason_header() {
            extra.push((REASON_HEADER, reason));
        }
        if let Some(approval) = outcome.approval_header() {
            extra.push((APPROVAL_HEADER, approval));
        }
        denied(&outcome.body(), &extra)
    }
}

/// The identity the route's context extensions give.
fn identity(extensions: &HashMap<String, String>) -> Result<Identity, String> {
    let skill = extensions
        .get("capgate.skill")
        .filter(|s| !s.is_empty())
        .ok_or("the route sets no capgate.skill context extension")?;
    let json = |key: &str| -> Result<Value, String> {
        extensions.get(key).map_or(Ok(Value::Null), |text| {
            serde_json::from_str(text).map_err(|e| format!("{key} is not JSON: {e}"))
        })
    };
    let autonomy = match extensions.get("capgate.autonomy") {
        None => 0,
        Some(text) => text
            .parse::<u8>()
            .ok()
            .filter(|a| *a <= 100)
            .ok_or("capgate.autonomy is not an integer from 0 to 100")?,
    };
    Ok(Identity {
        skill: skill.clone(),
        agent: json("capgate.agent")?,
        context: json("capgate.context")?,
        autonomy,
    })
}

/// Envoy's header map (lower-case names, repeated values joined) as a `HeaderMap`; a name or
/// value that is not a valid header is dropped, which can only make a payload unreadable.
fn header_map(headers: &HashMap<String, String>) -> HeaderMap {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.append(name, value);
        }
    }
    map
}

/// What of the body Envoy forwarded: partial when it says so or sent fewer bytes than the
/// request's size; not forwarded when it sent none of a body the request has.
fn body_state<'a>(headers: &HeaderMap, raw: &'a [u8], size: i64) -> Body<'a> {
    if marked_partial(headers) {
        return Body::Partial;
    }
    let declared = u64::try_from(size).ok().or_else(|| {
        headers
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    });
    let chunked = headers.contains_key("transfer-encoding");
    let sent = u64::try_from(raw.len()).unwrap_or(u64::MAX);
    match declared {
        Some(size) if sent < size && sent == 0 => Body::NotForwarded,
        Some(size) if sent < size => Body::Partial,
        None if chunked && sent == 0 => Body::NotForwarded,
        _ => Body::Whole(raw),
    }
}

fn status(code: i32, message: &str) -> rpc::Status {
    rpc::Status {
        code,
        message: message.to_owned(),
        details: Vec::new(),
    }
}

fn header(name: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(EnvoyHeader {
            key: name.to_owned(),
            value: value.to_owned(),
            ..EnvoyHeader::default()
        }),
        ..HeaderValueOption::default()
    }
}

fn denied(body: &str, extra: &[(&str, HeaderValue)]) -> CheckResponse {
    let mut headers = vec![header("content-type", "application/json")];
    for (name, value) in extra {
        if let Ok(value) = value.to_str() {
            headers.push(header(name, value));
        }
    }
    CheckResponse {
        status: Some(status(PERMISSION_DENIED, "denied by capgate")),
        http_response: Some(HttpResponse::DeniedResponse(DeniedHttpResponse {
            status: Some(HttpStatus { code: FORBIDDEN }),
            headers,
            body: body.to_owned(),
        })),
        ..CheckResponse::default()
    }
}

fn denied_without_decision(why: &str) -> CheckResponse {
    let body = serde_json::json!({
        "decision": "deny",
        "capability": null,
        "reasons": [{"capability": null, "constraint": "input", "message": why}],
    });
    let reason = HeaderValue::from_static("input");
    denied(&body.to_string(), &[(REASON_HEADER, reason)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::PARTIAL_BODY_HEADER;

    #[test]
    fn the_body_state_follows_what_envoy_sent() {
        let none = HeaderMap::new();
        assert_eq!(body_state(&none, b"", 0), Body::Whole(b""));
        assert_eq!(body_state(&none, b"", -1), Body::Whole(b""));
        assert_eq!(body_state(&none, b"{}", 2), Body::Whole(b"{}"));
        assert_eq!(body_state(&none, b"", 10), Body::NotForwarded);
        assert_eq!(body_state(&none, b"{\"a\"", 10), Body::Partial);
        let mut partial = HeaderMap::new();
        partial.insert(PARTIAL_BODY_HEADER, HeaderValue::from_static("true"));
        assert_eq!(body_state(&partial, b"{}", 2), Body::Partial);
        let mut chunked = HeaderMap::new();
        chunked.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        assert_eq!(body_state(&chunked, b"", -1), Body::NotForwarded);
        let mut length = HeaderMap::new();
        length.insert("content-length", HeaderValue::from_static("5"));
        assert_eq!(body_state(&length, b"", -1), Body::NotForwarded);
    }

    #[test]
    fn the_identity_comes_from_the_route_only() {
        let mut extensions = HashMap::new();
        assert!(identity(&extensions).is_err());
        extensions.insert("capgate.skill".to_owned(), "crm-writer".to_owned());
        extensions.insert(
            "capgate.context".to_owned(),
            r#"{"org": "acme"}"#.to_owned(),
        );
        extensions.insert("capgate.autonomy".to_owned(), "60".to_owned());
        let found = identity(&extensions).unwrap();
        assert_eq!(found.skill, "crm-writer");
        assert_eq!(found.context["org"], "acme");
        assert_eq!(found.autonomy, 60);
        extensions.insert("capgate.autonomy".to_owned(), "101".to_owned());
        assert!(identity(&extensions).is_err());
        extensions.insert("capgate.autonomy".to_owned(), "5".to_owned());
        extensions.insert("capgate.agent".to_owned(), "{".to_owned());
        assert!(identity(&extensions).is_err());
    }
}
