//! What the framework answers itself, in the API's JSON error form: a
//! request whose head is over [`MAX_HEAD`] is answered here (414 or 431)
//! before anything else reads it, and any error axum makes on its own (a
//! 405, a path that does not decode, a rejection an extractor answers in
//! text) has its body replaced by `{"error": {"code", "message"}}`, its
//! status and headers (`Allow`) kept.
//!
//! hyper answers a head far over these limits (`serve::http` sets its own
//! at several times `MAX_HEAD`) or one that is not HTTP at all with an
//! empty 400, 414 or 431 before any service runs; it has no hook to change
//! that answer, so those stay empty (docs/service.md says so).

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use http_body_util::BodyExt;

use super::body::{ErrorBody, ErrorDetail};
use super::json::cut;
use crate::error::{Code, ServiceError};

/// The largest request head the API reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadLimit {
    /// The request target (path and query), in bytes.
    pub(crate) uri: usize,
    /// The header fields, names and values, in bytes.
    pub(crate) bytes: usize,
    /// The number of header fields.
    pub(crate) fields: usize,
}

pub(crate) const MAX_HEAD: HeadLimit = HeadLimit {
    uri: 8 * 1024,
    bytes: 32 * 1024,
    fields: 100,
};

/// The most of a framework's text answer read to quote in its message.
const TEXT_READ: usize = 4096;

/// The answer to a request whose head is over the limits, before anything
/// else reads it (`gate` in `mod.rs` asks first).
pub(super) fn head_refusal(request: &Request) -> Option<Response> {
    over_head_limits(request).map(IntoResponse::into_response)
}

/// `response` in the JSON error form when it is an error the framework
/// made in text (`gate` in `mod.rs` passes every response here).
pub(super) async fn as_json(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match http_body_util::Limited::new(body, TEXT_READ)
        .collect()
        .await
    {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes())
            .trim()
            .to_string(),
        Err(_) => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        cut(&text, 512)
    };
    let body = ErrorBody {
        error: ErrorDetail {
            code: code_of(status).as_str(),
            message,
        },
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let json = serde_json::to_vec(&body).unwrap_or_default();
    Response::from_parts(parts, Body::from(json))
}

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The code an error status the framework chose goes with.
fn code_of(status: StatusCode) -> Code {
    match status {
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => Code::MethodNotAllowed,
        StatusCode::REQUEST_TIMEOUT => Code::Timeout,
        StatusCode::PAYLOAD_TOO_LARGE => Code::PayloadTooLarge,
        StatusCode::URI_TOO_LONG => Code::UriTooLong,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => Code::HeadersTooLarge,
        StatusCode::UNAUTHORIZED => Code::Unauthorized,
        s if s.is_server_error() => Code::Internal,
        _ => Code::InvalidRequest,
    }
}

fn over_head_limits(request: &Request) -> Option<ServiceError> {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if target > MAX_HEAD.uri {
        return Some(ServiceError::new(
            Code::UriTooLong,
            format!(
                "the request target is {target} bytes, over the limit of {}",
                MAX_HEAD.uri
            ),
        ));
    }
    let headers = request.headers();
    if headers.len() > MAX_HEAD.fields {
        return Some(ServiceError::new(
            Code::HeadersTooLarge,
            format!(
                "{} header fields, over the limit of {}",
                headers.len(),
                MAX_HEAD.fields
            ),
        ));
    }
    let bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if bytes > MAX_HEAD.bytes {
        return Some(ServiceError::new(
            Code::HeadersTooLarge,
            format!(
                "the header fields are {bytes} bytes, over the limit of {}",
                MAX_HEAD.bytes
            ),
        ));
    }
    None
}
