//! Errors as JSON: `{"error": {"code": "…", "message": "…"}}` with the
//! status that goes with the code (the codes are `crate::error::Code`).

use super::body::{ErrorBody, ErrorDetail};
use crate::error::{Code, ServiceError};
use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// The HTTP status of a code.
pub(crate) fn status(code: Code) -> StatusCode {
    match code {
        Code::InvalidRequest
        | Code::InvalidPolicy
        | Code::InvalidArgument
        | Code::InvalidKey
        | Code::CostExceedsLimit
        | Code::Unsupported => StatusCode::BAD_REQUEST,
        Code::UnknownPolicy | Code::NotFound => StatusCode::NOT_FOUND,
        Code::Unauthorized => StatusCode::UNAUTHORIZED,
        Code::Forbidden => StatusCode::FORBIDDEN,
        Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        Code::Timeout => StatusCode::REQUEST_TIMEOUT,
        Code::UriTooLong => StatusCode::URI_TOO_LONG,
        Code::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        Code::StoreError => StatusCode::BAD_GATEWAY,
        Code::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = status(self.code());
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code().as_str(),
                message: self.message().to_string(),
            },
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use serde_json::json;

    use super::*;

    /// Every code answers its status with the JSON error; a 503 says when
    /// to come back. (`store_error` cannot be provoked through the router:
    /// the service puts a failure policy in front of every Redis store.)
    #[tokio::test]
    async fn every_code_answers_its_status_and_json() {
        let codes = [
            (Code::InvalidRequest, 400),
            (Code::InvalidPolicy, 400),
            (Code::InvalidArgument, 400),
            (Code::InvalidKey, 400),
            (Code::CostExceedsLimit, 400),
            (Code::Unsupported, 400),
            (Code::Unauthorized, 401),
            (Code::Forbidden, 403),
            (Code::UnknownPolicy, 404),
            (Code::NotFound, 404),
            (Code::PayloadTooLarge, 413),
            (Code::MethodNotAllowed, 405),
            (Code::Timeout, 408),
            (Code::UriTooLong, 414),
            (Code::HeadersTooLarge, 431),
            (Code::Internal, 500),
            (Code::StoreError, 502),
            (Code::StoreUnavailable, 503),
        ];
        for (code, expected) in codes {
            let response = ServiceError::new(code, "why").into_response();
            assert_eq!(response.status().as_u16(), expected, "{code:?}");
            let retry = response.headers().get(http::header::RETRY_AFTER).cloned();
            assert_eq!(retry.is_some(), expected == 503, "{code:?}");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(
                body,
                json!({"error": {"code": code.as_str(), "message": "why"}})
            );
        }
    }
}
