//! Errors as JSON: `{"error": {"code": "…", "message": "…"}}` with the
//! status that goes with the code.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::json;

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
}

impl From<tollgate::Error> for ApiError {
    fn from(e: tollgate::Error) -> ApiError {
        use tollgate::Error as E;
        let message = e.to_string();
        match e {
            E::CostExceedsLimit { .. } => {
                ApiError::new(StatusCode::BAD_REQUEST, "cost_exceeds_limit", message)
            }
            E::StoreUnavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                message,
            ),
            E::Store { .. } => ApiError::new(StatusCode::BAD_GATEWAY, "store_error", message),
            // Bad keys, arguments, operations the algorithm does not have.
            _ => ApiError::invalid(message),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}
