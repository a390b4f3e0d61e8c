//! An HTTP call as the upstream will read it, turned into a SPEC §4 request.
//!
//! Used by every gateway mode (proxy, auth subrequest, ext_authz, the tower layer). What the
//! upstream runs must be what capgate decided, so:
//! - the resource is the call's scheme, host and path with query, as sent;
//! - the payload is the body parsed as JSON only when `Content-Type` is `application/json` or
//!   `*/*+json` (no charset, or UTF-8) and there is no `Content-Encoding`; an empty body is no
//!   payload; any other body, a body the front marks partial, or one not forwarded at all makes
//!   the payload [`Payload::Unreadable`], which every capability with a payload constraint
//!   denies with `input`;
//! - a call that asks the upstream to run another verb (`X-HTTP-Method-Override`,
//!   `X-HTTP-Method`, `X-Method-Override`, a `_method` query parameter or form field) is
//!   refused;
//! - `skill`, `agent`, `context` and `autonomy` come from the caller's [`Identity`], never from
//!   the call; `transaction` and `grant` from `x-capgate-transaction` and `x-capgate-grant`.

use axum::http::{HeaderMap, HeaderName, header};
use serde_json::{Map, Value, json};

use crate::identity::Identity;

/// The header that names the call's transaction.
pub const TRANSACTION_HEADER: HeaderName = HeaderName::from_static("x-capgate-transaction");
/// The header that carries the call's grant token.
pub const GRANT_HEADER: HeaderName = HeaderName::from_static("x-capgate-grant");
/// The header Envoy adds (`true`) when it forwarded only part of the body.
pub const PARTIAL_BODY_HEADER: &str = "x-envoy-auth-partial-body";

/// True when the front marked the body it forwarded as partial ([`PARTIAL_BODY_HEADER`]).
pub fn marked_partial(headers: &HeaderMap) -> bool {
    headers
        .get(PARTIAL_BODY_HEADER)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
}

/// The headers that ask an upstream to run another verb than the request line's.
pub const METHOD_OVERRIDE_HEADERS: [&str; 3] = [
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// What the call's body gives the decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// No body: the request has no payload.
    Absent,
    /// A JSON body.
    Json(Value),
    /// A body capgate cannot read as the upstream will: why.
    Unreadable(&'static str),
}

/// How much of the body the front forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// All of it.
    Whole(&'a [u8]),
    /// Part of it (Envoy's `with_request_body` past its limit).
    Partial,
    /// None of it (nginx `auth_request`), though the call has one.
    NotForwarded,
}

/// Why a call was refused before deciding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRefusal {
    /// The call asks the upstream to run another verb.
    #[error(
        "the call asks the upstream to run another method ({0}); capgate decides the request line's"
    )]
    MethodOverride(String),
    /// The call's target is not a URL capgate can name.
    #[error("the call's target is not an absolute http(s) URL: {0}")]
    Target(String),
}

/// One outbound HTTP call.
#[derive(Debug, Clone, Copy)]
pub struct HttpCall<'a> {
    /// The method of the request line.
    pub method: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The authority: host and optional port.
    pub authority: &'a str,
    /// The path with its query, as sent.
    pub path_and_query: &'a str,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The body.
    pub body: Body<'a>,
}

/// The call's payload.
pub fn payload(headers: &HeaderMap, body: Body<'_>) -> Payload {
    let bytes = match body {
        Body::Partial => return Payload::Unreadable("the front forwarded only part of the body"),
        Body::NotForwarded => return Payload::Unreadable("the front did not forward the body"),
        Body::Whole(bytes) => bytes,
    };
    if bytes.is_empty() {
        return Payload::Absent;
    }
    if headers.contains_key(header::CONTENT_ENCODING) {
        return Payload::Unreadable("the body has a Content-Encoding");
    }
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(content_type), None) = (types.next(), types.next()) else {
        return Payload::Unreadable("the body has no single Content-Type");
    };
    if !content_type.to_str().is_ok_and(is_json_type) {
        return Payload::Unreadable("the body is not JSON by its Content-Type");
    }
    match serde_json::from_slice(bytes) {
        Ok(value) => Payload::Json(value),
        Err(_) => Payload::Unreadable("the body is not valid JSON"),
    }
}

/// `application/json` or `TYPE/SUBTYPE+json`, with no parameter but `charset=utf-8`.
fn is_json_type(value: &str) -> bool {
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let json = essence == "application/json"
        || essence
            .split_once('/')
            .is_some_and(|(kind, sub)| !kind.is_empty() && sub.len() > 5 && sub.ends_with("+json"));
    json && parts.all(|parameter| {
        parameter.split_once('=').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("charset")
                && value.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
        })
    })
}

/// The method-override header or parameter a call carries, if any.
pub fn method_override(headers: &HeaderMap, path_and_query: &str) -> Option<String> {
    for name in METHOD_OVERRIDE_HEADERS {
        if headers.contains_key(name) {
            return Some(name.to_owned());
        }
    }
    let query = path_and_query.split_once('?')?.1;
    has_method_parameter(query).then(|| "_method".to_owned())
}

/// True when a form-encoded text (a query, an `application/x-www-form-urlencoded` body) has a
/// `_method` parameter, in any case and encoding.
fn has_method_parameter(form: &str) -> bool {
    form.split('&')
        .map(|pair| pair.split_once('=').map_or(pair, |(name, _)| name))
        .any(|name| percent_decode(name).eq_ignore_ascii_case("_method"))
}

/// The `_method` field a form body carries, which frameworks read as the method to run: an
/// `application/x-www-form-urlencoded` body with a `_method` parameter, or a multipart body
/// with a part named `_method`.
pub fn body_method_override(headers: &HeaderMap, body: Body<'_>) -> Option<String> {
    let Body::Whole(bytes) = body else {
        return None;
    };
    let types = headers.get_all(header::CONTENT_TYPE);
    let form = types.iter().any(|t| {
        t.to_str().is_ok_and(|t| {
            let essence = t.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
    });
    let multipart = types.iter().any(|t| {
        t.to_str().is_ok_and(|t| {
            t.trim_start()
                .to_ascii_lowercase()
                .starts_with("multipart/")
        })
    });
    let text = String::from_utf8_lossy(bytes);
    if form && has_method_parameter(text.trim()) {
        return Some("a _method form field".to_owned());
    }
    let lower = text.to_ascii_lowercase();
    if multipart && (lower.contains("name=\"_method\"") || lower.contains("name=_method")) {
        return Some("a _method form part".to_owned());
    }
    None
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%'
            && let Some(hex) = bytes.get(i + 1..i + 3)
            && let Ok(hex) = std::str::from_utf8(hex)
            && let Ok(value) = u8::from_str_radix(hex, 16)
        {
            out.push(value);
            i += 3;
        } else {
            out.push(if byte == b'+' { b' ' } else { byte });
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The SPEC §4 request for `call` by `identity`, and what its body gives.
///
/// # Errors
/// The call asks for a method override, or its scheme is not http(s).
pub fn request(identity: &Identity, call: &HttpCall<'_>) -> Result<(Value, Payload), CallRefusal> {
    if let Some(name) = method_override(call.headers, call.path_and_query)
        .or_else(|| body_method_override(call.headers, call.body))
    {
        return Err(CallRefusal::MethodOverride(name));
    }
    if !matches!(call.scheme, "http" | "https") || call.authority.is_empty() {
        return Err(CallRefusal::Target(format!(
            "{}://{}{}",
            call.scheme, call.authority, call.path_and_query
        )));
    }
    let path = if call.path_and_query.starts_with('/') {
        call.path_and_query.to_owned()
    } else {
        format!("/{}", call.path_and_query)
    };
    let mut request = Map::new();
    request.insert("skill".to_owned(), json!(identity.skill));
    request.insert("operation".to_owned(), json!(call.method));
    request.insert(
        "resource".to_owned(),
        json!(format!("{}://{}{path}", call.scheme, call.authority)),
    );
    request.insert("agent".to_owned(), identity.agent.clone());
    request.insert("context".to_owned(), identity.context.clone());
    request.insert("autonomy".to_owned(), json!(identity.autonomy));
    for (name, field) in [
        (&TRANSACTION_HEADER, "transaction"),
        (&GRANT_HEADER, "grant"),
    ] {
        if let Some(value) = call.headers.get(name).and_then(|v| v.to_str().ok()) {
            request.insert(field.to_owned(), json!(value));
        }
    }
    let payload = payload(call.headers, call.body);
    if let Payload::Json(value) = &payload {
        request.insert("payload".to_owned(), value.clone());
    }
    Ok((Value::Object(request), payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn only_a_json_body_without_encoding_is_a_payload() {
        let body = Body::Whole(br#"{"a": 1}"#);
        for json_type in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/vnd.api+json",
            "application/problem+json;charset=\"UTF-8\"",
        ] {
            assert_eq!(
                payload(&headers(&[("content-type", json_type)]), body),
                Payload::Json(json!({"a": 1})),
                "{json_type}"
            );
        }
        for other in [
            "text/plain",
            "application/json; charset=latin1",
            "application/json; boundary=x",
            "application/+json",
            "application/jsonx",
            "multipart/form-data",
        ] {
            assert!(
                matches!(
                    payload(&headers(&[("content-type", other)]), body),
                    Payload::Unreadable(_)
                ),
                "{other}"
            );
        }
        let encoded = headers(&[
            ("content-type", "application/json"),
            ("content-encoding", "gzip"),
        ]);
        assert!(matches!(payload(&encoded, body), Payload::Unreadable(_)));
        let doubled = headers(&[
            ("content-type", "application/json"),
            ("content-type", "text/plain"),
        ]);
        assert!(matches!(payload(&doubled, body), Payload::Unreadable(_)));
        assert!(matches!(
            payload(&HeaderMap::new(), body),
            Payload::Unreadable(_)
        ));
        assert_eq!(
            payload(&HeaderMap::new(), Body::Whole(b"")),
            Payload::Absent
        );
        assert!(matches!(
            payload(&HeaderMap::new(), Body::Partial),
            Payload::Unreadable(_)
        ));
        assert!(matches!(
            payload(&HeaderMap::new(), Body::NotForwarded),
            Payload::Unreadable(_)
        ));
        let broken = headers(&[("content-type", "application/json")]);
        assert!(matches!(
            payload(&broken, Body::Whole(b"{")),
            Payload::Unreadable(_)
        ));
    }

    #[test]
    fn method_overrides_are_found_in_any_spelling() {
        for name in [
            "X-HTTP-Method-Override",
            "x-http-method",
            "X-Method-Override",
        ] {
            assert!(
                method_override(&headers(&[(name, "DELETE")]), "/a").is_some(),
                "{name}"
            );
        }
        for query in [
            "/a?_method=DELETE",
            "/a?x=1&_METHOD=PUT",
            "/a?%5Fmethod=PUT",
            "/a?_method",
        ] {
            assert!(
                method_override(&HeaderMap::new(), query).is_some(),
                "{query}"
            );
        }
        for query in ["/a", "/a?method=PUT", "/a?x=_method", "/_method"] {
            assert!(
                method_override(&HeaderMap::new(), query).is_none(),
                "{query}"
            );
        }
    }

    #[test]
    fn form_bodies_with_a_method_field_are_found() {
        let form = headers(&[(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )]);
        assert!(body_method_override(&form, Body::Whole(b"a=1&_method=DELETE")).is_some());
        assert!(body_method_override(&form, Body::Whole(b"%5FMETHOD=PUT")).is_some());
        assert!(body_method_override(&form, Body::Whole(b"a=_method")).is_none());
        let multipart = headers(&[("content-type", "multipart/form-data; boundary=x")]);
        let part =
            b"--x\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--x--";
        assert!(body_method_override(&multipart, Body::Whole(part)).is_some());
        let json = headers(&[("content-type", "application/json")]);
        assert!(body_method_override(&json, Body::Whole(br#"{"_method": "x"}"#)).is_none());
    }

    #[test]
    fn identity_fields_come_from_the_identity_only() {
        let identity = Identity {
            skill: "crm-writer".to_owned(),
            agent: json!({"id": "a-7"}),
            context: json!({"org": "acme"}),
            autonomy: 40,
        };
        let call_headers = headers(&[
            ("content-type", "application/json"),
            ("x-capgate-grant", "g-1"),
            ("x-capgate-transaction", "t-1"),
        ]);
        let body = br#"{"skill": "payments", "autonomy": 100, "context": {"org": "evil"}}"#;
        let call = HttpCall {
            method: "POST",
            scheme: "https",
            authority: "crm.example.com",
            path_and_query: "/v1/records?x=1",
            headers: &call_headers,
            body: Body::Whole(body),
        };
        let (request, payload) = request(&identity, &call).unwrap();
        assert_eq!(request["skill"], "crm-writer");
        assert_eq!(request["autonomy"], 40);
        assert_eq!(request["context"], json!({"org": "acme"}));
        assert_eq!(
            request["resource"],
            "https://crm.example.com/v1/records?x=1"
        );
        assert_eq!(request["grant"], "g-1");
        assert_eq!(request["transaction"], "t-1");
        assert_eq!(
            request["payload"]["skill"], "payments",
            "the body is only the payload"
        );
        assert!(matches!(payload, Payload::Json(_)));
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// `_method` with each character in either case, each optionally percent-encoded (in either
    /// hex case), before or after other parameters, with or without a value.
    fn spelled_method() -> impl Strategy<Value = String> {
        proptest::collection::vec((any::<bool>(), any::<bool>(), any::<bool>()), 7).prop_map(
            |choices| {
                "_method"
                    .chars()
                    .zip(choices)
                    .map(|(c, (upper, encode, upper_hex))| {
                        let c = if upper { c.to_ascii_uppercase() } else { c };
                        match (encode, upper_hex) {
                            (true, true) => format!("%{:02X}", u32::from(c)),
                            (true, false) => format!("%{:02x}", u32::from(c)),
                            (false, _) => c.to_string(),
                        }
                    })
                    .collect()
            },
        )
    }

    proptest! {
        #[test]
        fn generated_method_override_parameters_are_found(
            name in spelled_method(),
            before in proptest::option::of("[a-z]{1,5}=[a-z0-9]{0,5}"),
            value in proptest::option::of("[A-Z]{0,6}"),
        ) {
            let parameter = match value {
                Some(value) => format!("{name}={value}"),
                None => name,
            };
            let query = match before {
                Some(before) => format!("/r?{before}&{parameter}"),
                None => format!("/r?{parameter}"),
            };
            prop_assert!(method_override(&HeaderMap::new(), &query).is_some(), "{}", query);
        }

        #[test]
        fn generated_override_header_names_are_found(
            index in 0..METHOD_OVERRIDE_HEADERS.len(),
            cases in proptest::collection::vec(any::<bool>(), 32),
        ) {
            let name: String = METHOD_OVERRIDE_HEADERS[index]
                .chars()
                .zip(cases.into_iter().chain(std::iter::repeat(false)))
                .map(|(c, upper)| if upper { c.to_ascii_uppercase() } else { c })
                .collect();
            let mut headers = HeaderMap::new();
            headers.insert(HeaderName::from_bytes(name.as_bytes()).unwrap(), "DELETE".parse().unwrap());
            prop_assert!(method_override(&headers, "/r").is_some());
        }
    }
}
