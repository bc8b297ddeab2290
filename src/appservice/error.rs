//! The one place that turns errors into Matrix error JSON (`{"errcode", "error"}`).
//! Messages are fixed sentences; internals go to the log, never to the wire.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer of the appservice API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    MissingToken,
    Forbidden,
    NotJson,
    BadJson(&'static str),
    NotFound,
    Unrecognized,
    MethodNotAllowed,
    TooLarge,
    /// Storage failed: the homeserver must retry the transaction.
    Unavailable,
    /// Too many transactions at once: retry in a second.
    Busy,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, errcode, error) = match self {
            ApiError::MissingToken => (StatusCode::UNAUTHORIZED, "M_MISSING_TOKEN", "Missing access token"),
            ApiError::Forbidden => (StatusCode::FORBIDDEN, "M_FORBIDDEN", "Invalid homeserver token"),
            ApiError::NotJson => (StatusCode::BAD_REQUEST, "M_NOT_JSON", "Request body is not valid JSON"),
            ApiError::BadJson(why) => (StatusCode::BAD_REQUEST, "M_BAD_JSON", why),
            ApiError::NotFound => (StatusCode::NOT_FOUND, "M_NOT_FOUND", "Not found"),
            ApiError::Unrecognized => (StatusCode::NOT_FOUND, "M_UNRECOGNIZED", "Unrecognized request"),
            ApiError::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "M_UNRECOGNIZED", "Method not allowed"),
            ApiError::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "M_TOO_LARGE", "Request body is too large"),
            ApiError::Unavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "M_UNKNOWN", "Temporarily unavailable; retry later")
            }
            ApiError::Busy => {
                let body = json!({"errcode": "M_LIMIT_EXCEEDED", "error": "Too many transactions at once", "retry_after_ms": 1000});
                return (StatusCode::SERVICE_UNAVAILABLE, [(axum::http::header::RETRY_AFTER, "1")], Json(body))
                    .into_response();
            }
        };
        (status, Json(json!({"errcode": errcode, "error": error}))).into_response()
    }
}

/// Reads a JSON object body; size, JSON and shape errors become Matrix errors.
pub fn json_object(
    body: Result<bytes::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    let bytes =
        body.map_err(
            |e| if e.status() == StatusCode::PAYLOAD_TOO_LARGE { ApiError::TooLarge } else { ApiError::NotJson },
        )?;
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::BadJson("Request body must be a JSON object")),
        Err(_) => Err(ApiError::NotJson),
    }
}
