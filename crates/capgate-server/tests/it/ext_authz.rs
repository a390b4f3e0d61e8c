//! Envoy's gRPC external authorization, called by a tonic client built from the same protos
//! (Envoy itself is not installed here).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashMap;

use envoy_types::ext_authz::v3::pb::{CheckRequest, CheckResponse, HttpResponse};
use envoy_types::pb::envoy::service::auth::v3::AttributeContext;
use envoy_types::pb::envoy::service::auth::v3::attribute_context::{HttpRequest, Request};
use envoy_types::pb::envoy::service::auth::v3::authorization_client::AuthorizationClient;

use crate::check::start_notes;
use crate::common::*;

fn check_request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    extensions: &[(&str, &str)],
) -> CheckRequest {
    let http = HttpRequest {
        method: method.to_owned(),
        path: path.to_owned(),
        host: "notes.example.com".to_owned(),
        scheme: "https".to_owned(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body: body.to_owned(),
        size: i64::try_from(body.len()).unwrap(),
        ..HttpRequest::default()
    };
    CheckRequest {
        attributes: Some(AttributeContext {
            request: Some(Request {
                http: Some(http),
                ..Request::default()
            }),
            context_extensions: extensions
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<HashMap<_, _>>(),
            ..AttributeContext::default()
        }),
    }
}

const ROUTE: [(&str, &str); 3] = [
    ("capgate.skill", "notes"),
    ("capgate.context", r#"{"org": "acme"}"#),
    ("capgate.autonomy", "100"),
];

fn call(
    server: &Running,
    token: Option<&str>,
    request: CheckRequest,
) -> Result<CheckResponse, tonic::Status> {
    let address = format!("http://{}", server.grpc.unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut client = AuthorizationClient::connect(address).await.unwrap();
        let mut request = tonic::Request::new(request);
        if let Some(token) = token {
            request
                .metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        client.check(request).await.map(tonic::Response::into_inner)
    })
}

fn denied(response: &CheckResponse) -> (String, HashMap<String, String>) {
    match response.http_response.as_ref().unwrap() {
        HttpResponse::DeniedResponse(denied) => {
            assert_eq!(denied.status.as_ref().unwrap().code, 403);
            let headers = denied
                .headers
                .iter()
                .filter_map(|h| h.header.as_ref())
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect();
            (denied.body.clone(), headers)
        }
        other => panic!("not denied: {other:?}"),
    }
}

#[test]
fn an_allowed_call_is_ok_and_strips_the_capgate_headers() {
    let (server, _dir) = start_notes("grpc-allow");
    let response = call(
        &server,
        Some(PEP),
        check_request("GET", "/v1/notes/1", &[], "", &ROUTE),
    )
    .unwrap();
    assert_eq!(response.status.unwrap().code, 0);
    match response.http_response.unwrap() {
        HttpResponse::OkResponse(ok) => {
            assert!(ok.headers_to_remove.contains(&"x-capgate-grant".to_owned()));
            assert!(
                ok.headers_to_remove
                    .contains(&"x-capgate-transaction".to_owned())
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_denied_call_is_permission_denied_with_the_reasons_in_the_body_only() {
    let (server, _dir) = start_notes("grpc-deny");
    let body = r#"{"title": "SECRET-VALUE!"}"#;
    let request = check_request(
        "POST",
        "/v1/notes",
        &[("content-type", "application/json")],
        body,
        &ROUTE,
    );
    let response = call(&server, Some(PEP), request).unwrap();
    assert_eq!(response.status.as_ref().unwrap().code, 7);
    let (body, headers) = denied(&response);
    assert_eq!(headers["x-capgate-reason"], "fieldMatches write");
    assert!(!headers["x-capgate-reason"].contains("SECRET"));
    let decision: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "fieldMatches");
}

#[test]
fn approval_required_has_its_own_header() {
    let (server, _dir) = start_notes("grpc-approval");
    let route = [("capgate.skill", "notes"), ("capgate.autonomy", "0")];
    let response = call(
        &server,
        Some(PEP),
        check_request("GET", "/v1/notes/1", &[], "", &route),
    )
    .unwrap();
    let (_, headers) = denied(&response);
    assert_eq!(headers["x-capgate-approval-required"], "read");
}

#[test]
fn a_partial_body_fails_payload_constraints_with_input() {
    let (server, _dir) = start_notes("grpc-partial");
    let headers = [
        ("content-type", "application/json"),
        ("x-envoy-auth-partial-body", "true"),
    ];
    let request = check_request(
        "POST",
        "/v1/notes",
        &headers,
        r#"{"title": "hello"}"#,
        &ROUTE,
    );
    let response = call(&server, Some(PEP), request).unwrap();
    let (body, _) = denied(&response);
    let decision: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(decision["reasons"][0]["constraint"], "input", "{decision}");
}

#[test]
fn the_caller_needs_the_pep_token_and_the_route_a_skill() {
    let (server, _dir) = start_notes("grpc-auth");
    for token in [None, Some(OPERATOR), Some(AGENT)] {
        let error = call(
            &server,
            token,
            check_request("GET", "/v1/notes/1", &[], "", &ROUTE),
        )
        .unwrap_err();
        assert_eq!(error.code(), tonic::Code::Unauthenticated, "{token:?}");
    }
    // The skill and autonomy come from the route, not from the call's headers.
    let headers = [("x-capgate-skill", "notes"), ("x-capgate-autonomy", "100")];
    let response = call(
        &server,
        Some(PEP),
        check_request("GET", "/v1/notes/1", &headers, "", &[]),
    )
    .unwrap();
    assert_eq!(response.status.unwrap().code, 7);
}
