//! Reading a request body under a size limit and a time limit.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::ApiError;

/// How much of a body is read, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// The largest body, in bytes; larger is 413.
    pub max_bytes: usize,
    /// The longest the whole body may take to arrive; longer is 408.
    pub timeout: Duration,
}

/// Reads the whole body.
///
/// # Errors
/// 413 when `Content-Length` or the bytes read pass `limits.max_bytes`, 408 when the body takes
/// longer than `limits.timeout`, 400 when the connection breaks mid-body.
pub async fn read(headers: &HeaderMap, body: Body, limits: BodyLimits) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body is larger than {} bytes", limits.max_bytes),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limits.max_bytes).unwrap_or(u64::MAX)) {
        return Err(too_large());
    }
    let collect = Limited::new(body, limits.max_bytes).collect();
    match tokio::time::timeout(limits.timeout, collect).await {
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            format!(
                "the body did not arrive within {} ms",
                limits.timeout.as_millis()
            ),
        )),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(_)) => Err(ApiError::bad_request("the body could not be read")),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}
